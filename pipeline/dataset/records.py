"""Reading a dataset's files: which files a folder holds, and their raw records as ``(line, dict)`` pairs.

JSONL, CSV and Parquet read alike. Problems (unreadable bytes, bad JSON, a ragged CSV row) become
``Issue``s naming file and line; nothing here raises for bad content, and nothing writes.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

FORMATS = ("jsonl", "csv", "parquet")


@dataclass
class Issue:
    """One problem found in a dataset. ``line`` is the JSONL line, CSV row (header = 1) or Parquet row index."""

    file: str
    line: int | None
    field: str | None
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f"field {self.field}: {self.message}" if self.field else self.message
        return f"{where}: {what}"


Record = tuple[int, dict[str, Any]]


def _decode_lines(path: Path, data: bytes, issues: list[Issue]) -> tuple[list[str], set[int]]:
    """Split bytes into lines; report each line that is not valid UTF-8 (kept, decoded with U+FFFD)."""
    data = data.removeprefix(codecs.BOM_UTF8)
    lines, bad = [], set()
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            issues.append(Issue(str(path), lineno, None,
                                f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                                "re-save the file as UTF-8"))
            lines.append(raw.decode("utf-8", errors="replace"))
            bad.add(lineno)
    return lines, bad


def _read_jsonl(path: Path, data: bytes, issues: list[Issue]) -> list[Record]:
    records: list[Record] = []
    lines, bad = _decode_lines(path, data, issues)
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or lineno in bad:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(Issue(str(path), lineno, None,
                                f"not valid JSON ({exc.msg} at column {exc.colno}); each line must be one JSON object"))
            continue
        if not isinstance(obj, dict):
            kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(obj), "a number")
            issues.append(Issue(str(path), lineno, None, f"expected a JSON object {{...}}, got {kind}"))
            continue
        records.append((lineno, obj))
    return records


class UnreadableCsv(ValueError):
    """A CSV record the strict reader refuses (a stray or unclosed quote): ``line``, where the record starts."""

    def __init__(self, line: int, error: csv.Error):
        super().__init__(f"unreadable CSV ({error}); check the quoting")
        self.line = line


def csv_records(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line where it starts, fields) per record of CSV ``text``, blank lines left out, read strictly: quoting the
    reader would have to guess at raises :class:`UnreadableCsv` instead."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise UnreadableCsv(line, exc) from None
        if row:
            yield line, row


def _read_csv(path: Path, data: bytes, issues: list[Issue]) -> list[Record]:
    """Rows of a CSV file as dicts of strings; rows are numbered with the header as line 1."""
    text = "\n".join(_decode_lines(path, data, issues)[0])
    try:
        rows = [row for _, row in csv_records(text)]
    except UnreadableCsv as exc:
        issues.append(Issue(str(path), exc.line, None, str(exc)))
        return []
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    twice = [h for h, n in Counter(header).items() if n > 1]
    if twice:  # a dict would keep the last of them, silently
        issues.append(Issue(str(path), 1, twice[0], f"column {twice[0]!r} appears {header.count(twice[0])} times in "
                            "the header; rename or remove the extra one"))
        return []
    records: list[Record] = []
    for lineno, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            issues.append(Issue(str(path), lineno, None, f"unreadable CSV row: {len(row)} fields but the header has "
                                f"{len(header)}; quote values that contain commas"))
            continue
        records.append((lineno, dict(zip(header, row, strict=True))))
    return records


def _read_parquet(path: Path, issues: list[Issue]) -> list[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        issues.append(Issue(str(path), None, None, f"unreadable Parquet file ({exc}); re-export it"))
        return []
    return list(enumerate(table.to_pylist()))


def read_records(path: str | Path) -> tuple[list[Record], list[Issue]]:
    """Raw records of one JSONL/CSV/Parquet file as ``(line, dict)`` pairs, with read problems as Issues."""
    path = Path(path)
    issues: list[Issue] = []
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        return [], [Issue(str(path), None, None, f"unsupported file type '.{suffix}'; use .jsonl, .csv or .parquet")]
    if suffix == "parquet":
        return _read_parquet(path, issues), issues
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], [Issue(str(path), None, None, f"cannot read the file ({exc.strerror})")]
    if suffix == "csv":
        return _read_csv(path, data, issues), issues
    return _read_jsonl(path, data, issues), issues


# -- which files a dataset has ------------------------------------------------------------------
def find_file(folder: Path, stem: str, issues: list[Issue], required: bool) -> Path | None:
    """``folder/<stem>.{jsonl,csv,parquet}``: the one that exists (several or a missing required one is an issue)."""
    found = [folder / f"{stem}.{ext}" for ext in FORMATS if (folder / f"{stem}.{ext}").is_file()]
    if len(found) > 1:
        issues.append(Issue(str(found[0]), None, None,
                            f"several {stem} files ({', '.join(p.name for p in found)}); keep only one"))
        return None
    if not found and required:
        issues.append(Issue(str(folder / f"{stem}.jsonl"), None, None,
                            f"missing: a dataset folder needs {stem}.jsonl (or {stem}.csv / {stem}.parquet)"))
    return found[0] if found else None


def dataset_folder(path: str | Path) -> Path | None:
    """The folder a dataset path stands for: the folder itself, or the folder of its ``queries.*`` file."""
    path = Path(path)
    if path.is_dir():
        return path
    if path.stem == "queries":
        return path.parent
    return None


def find_dataset_files(path: str | Path, issues: list[Issue]) -> tuple[Path | None, Path | None, str]:
    """(queries file, kb file or None, dataset name) of a folder or a queries file; problems go to ``issues``."""
    path = Path(path)
    if not path.exists():
        issues.append(Issue(str(path), None, None, "not found; give a dataset folder or a queries file"))
        return None, None, path.name
    if path.is_dir():
        queries = find_file(path, "queries", issues, required=True)
        kb = find_file(path, "kb", issues, required=False)
        return queries, kb, path.resolve().name
    if path.stem == "kb":
        issues.append(Issue(str(path), None, None, "this is a kb file; pass the dataset folder instead"))
        return None, None, path.parent.name
    if path.stem == "queries":  # data/x/queries.jsonl means the dataset data/x (with its kb, if any)
        kb = find_file(path.parent, "kb", issues, required=False)
        return path, kb, path.parent.resolve().name
    return path, None, path.stem
