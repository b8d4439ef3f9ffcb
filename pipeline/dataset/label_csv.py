"""The skeleton the label importers share (``human_labels``, ``criterion_labels``, ``critique_labels``).

A label CSV is read as UTF-8 text, its header checked for the columns an importer needs, and each row checked on
its own: a problem is reported as ``line N: reason``, the file's name put in front when printed. The import is all
or nothing: one bad row and nothing is written. What a row must refer to, and what it becomes, is the importer's
``parse_row``; this module owns the loop, the dataset column and the repeated rows; writing them, and the CLI's
reporting, is ``pipeline.labels.importing``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pipeline.errors import UserError

T = TypeVar("T")


class BadRow(Exception):
    """Raised by a ``parse_row`` for a row it rejects; the message is the reason."""


TOO_MANY_FIELDS = "more fields than the header has"
REPEATS = ("first", "last", "refuse")  # what a row repeating an earlier row's key does (``validate_rows``)


def read_csv_text(path: Path) -> str:
    """A CSV file's text (UTF-8, a byte-order mark dropped); UserError naming the file when it is missing or not
    UTF-8."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def csv_rows(reader: csv.DictReader) -> Iterator[tuple[int, dict[str, str] | None]]:
    """(line, row) per record of ``reader``: names stripped and lower-cased, values stripped; row None for a
    record with more fields than the header (``TOO_MANY_FIELDS``)."""
    for raw in reader:
        if None in raw:
            yield reader.line_num, None
        else:
            yield reader.line_num, {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}


def _blank(row: dict[str, str]) -> bool:
    return not any(row.values())


def validate_rows(text: str, *, required: Sequence[str], datasets: Iterable[str], dataset: str | None,
                  parse_row: Callable[[dict[str, str], str], tuple[tuple, T]], same: str,
                  any_of: Sequence[str] = (), skip: Callable[[dict[str, str]], Any] = _blank,
                  repeats: str = "refuse", repeated: list[tuple[int, int, tuple]] | None = None,
                  stored: Iterable[tuple] = (),
                  ) -> tuple[list[T], list[str]]:
    """(parsed rows, problems as 'line N: reason') of a label CSV's text.

    Header names and values are stripped (names lower-cased). A row ``skip`` says yes to is left out (by default
    a row of empty fields); a row lacking one of ``required`` is ``missing ...``; its dataset (the ``dataset``
    column, else ``dataset``, else the database's only one) must be one of ``datasets``. ``parse_row(row,
    dataset)`` gives the row's (key, value) or raises :class:`BadRow`; a key seen before is a repeat, reported
    with the earlier line and ``same`` (what a repeat shares, e.g. 'same query, model, annotator') — or, with
    ``repeats`` 'first' / 'last', kept out (the first row counts) or put in the earlier one's place (the last row
    counts), and listed in ``repeated`` as (line, earlier line, key). With 'first', a row whose key is one of
    ``stored`` (rows already in the database) repeats it (earlier line 0) and is left out too.
    """
    if repeats not in REPEATS:
        raise ValueError(f"repeats {repeats!r} is not one of {', '.join(REPEATS)}")
    datasets = set(datasets)
    reader = csv.DictReader(io.StringIO(text))
    header = [(h or "").strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing or (any_of and not any(c in header for c in any_of)):
        need = ", ".join(required) + (f" and {' and/or '.join(any_of)}" if any_of else "")
        return [], [f"line 1: header lacks column(s) {', '.join(missing) or ' / '.join(any_of)} (need {need})"]
    if "dataset" not in header and dataset is None:
        if len(datasets) != 1:
            return [], ["line 1: no dataset column; pass --dataset (the database holds "
                        f"{', '.join(sorted(datasets)) or 'no dataset'})"]
        dataset = next(iter(datasets))
    rows: list[T] = []
    problems: list[str] = []
    seen: dict[tuple, int] = dict.fromkeys(stored, 0) if repeats == "first" else {}
    position: dict[tuple, int] = {}  # key -> its row's index in ``rows`` (repeats 'last' replaces it there)
    for line, row in csv_rows(reader):
        if row is None:
            problems.append(f"line {line}: {TOO_MANY_FIELDS}")
            continue
        if skip(row):
            continue
        ds = row.get("dataset") or dataset
        empty = [c for c in required if not row.get(c)]
        try:
            if empty:
                raise BadRow(f"missing {', '.join(empty)}")
            if ds not in datasets:
                raise BadRow(f"dataset {ds!r} is not in the database")
            key, value = parse_row(row, ds)
        except BadRow as exc:
            problems.append(f"line {line}: {exc}")
            continue
        if key in seen:
            if repeats == "refuse":
                problems.append(f"line {line}: repeats line {seen[key]} ({same})")
                continue
            if repeated is not None:
                repeated.append((line, seen[key], key))
            if repeats == "last":
                rows[position[key]] = value
                seen[key] = line
            continue
        seen[key] = line
        position[key] = len(rows)
        rows.append(value)
    return rows, problems
