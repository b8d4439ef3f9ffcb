"""Load and validate datasets: ``data/<name>/`` with ``kb`` and ``queries`` files (JSONL, CSV or Parquet).

This module owns the dataset format (DESIGN.md, "Dataset format"). ``validate`` reads a dataset
and lists every problem with file, line and field; it never raises for bad content and writes
nothing. ``load_dataset`` returns a clean ``Dataset`` or raises ``UserError`` with the first error.
Record schemas are pydantic models; cross-record checks (duplicate ids, references between
queries and chunks) run after every record has been validated.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.errors import UserError
from pipeline.prompts import load_text


# -- languages and scripts -------------------------------------------------------------------
class Language(NamedTuple):
    """A language the datasets may use: English name, script name and the script's code-point ranges."""

    name: str
    script: str
    ranges: tuple[tuple[int, int], ...]


# Adding a language is one line here (e.g. "bn": Language("Bengali", "Bengali", ((0x0980, 0x09FF),))).
LANGUAGE_TABLE: dict[str, Language] = {
    "en": Language("English", "Latin", ((0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F))),
    "hi": Language("Hindi", "Devanagari", ((0x0900, 0x097F), (0xA8E0, 0xA8FF))),
    "ta": Language("Tamil", "Tamil", ((0x0B80, 0x0BFF),)),
    "te": Language("Telugu", "Telugu", ((0x0C00, 0x0C7F),)),
    "kn": Language("Kannada", "Kannada", ((0x0C80, 0x0CFF),)),
}
LANGUAGES: dict[str, str] = {code: lang.name for code, lang in LANGUAGE_TABLE.items()}

THEMES: tuple[str, ...] = (
    "misspelling", "code_mixing", "non_native_english", "cultural", "patient_specific", "out_of_kb",
)
REFUSAL_SENTENCE = load_text("refusal.txt")  # the paper's refusal (Figure 3), in one file
MAX_TEXT_CHARS = 20_000
FORMATS = ("jsonl", "csv", "parquet")


def script_letters(text: str, code: str) -> int:
    """Number of letters (and combining marks) of ``text`` in the script of language ``code``."""
    ranges = LANGUAGE_TABLE[code].ranges
    return sum(
        1 for ch in text
        if any(lo <= ord(ch) <= hi for lo, hi in ranges) and unicodedata.category(ch)[0] in "LM"
    )


def script_counts(text: str) -> Counter[str]:
    """Letters per script name (first language code per script), e.g. ``{"hi": 12, "en": 3}``."""
    counts: Counter[str] = Counter()
    seen_scripts: set[str] = set()
    for code, lang in LANGUAGE_TABLE.items():
        if lang.script in seen_scripts:
            continue
        seen_scripts.add(lang.script)
        n = script_letters(text, code)
        if n:
            counts[code] = n
    return counts


def dominant_script(text: str) -> str | None:
    """Language code whose script has the most letters in ``text`` (``None`` if no known letters)."""
    counts = script_counts(text)
    return counts.most_common(1)[0][0] if counts else None


# -- record schemas ----------------------------------------------------------------------------
def _is_blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _id_before(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return v


def _id_after(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("must not be empty")
    if ";" in v:
        raise ValueError(f"{v!r} contains ';', which separates list items in CSV; pick another id")
    return v


def _text_after(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if len(v) > MAX_TEXT_CHARS:
        raise ValueError(f"{len(v):,} characters, over the limit of {MAX_TEXT_CHARS:,}; split or shorten it")
    return v


Identifier = Annotated[str, BeforeValidator(_id_before), AfterValidator(_id_after)]
Text = Annotated[str, AfterValidator(_text_after)]


def _split_list(v: Any) -> Any:
    """``None``/blank -> []; ``"a; b"`` (CSV) -> ["a", "b"]; arrays -> lists."""
    if _is_blank(v):
        return []
    if isinstance(v, str):
        return [item.strip() for item in v.split(";") if item.strip()]
    if hasattr(v, "tolist") and not isinstance(v, list):
        return v.tolist()
    return v


def _parse_date(v: Any) -> Any:
    if _is_blank(v):
        return None
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    if isinstance(v, str):
        s = v.strip()
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
                return date.fromisoformat(s)
            return datetime.fromisoformat(s).date()
        except ValueError:
            pass
    raise ValueError(f"bad date {v!r}: use an ISO date, YYYY-MM-DD")


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Chunk(_Record):
    """One knowledge-base chunk: raw text from the curated documents, or a later update."""

    chunk_id: Identifier
    kind: Literal["raw", "update"]
    title: Text
    text: Text
    source: str = Field(max_length=MAX_TEXT_CHARS)
    updated: date | None = Field(None, validate_default=True)
    supersedes: list[Identifier] = Field(default_factory=list, validate_default=True)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("updated", mode="before")
    @classmethod
    def _updated_date(cls, v: Any) -> Any:
        return _parse_date(v)

    @field_validator("updated")
    @classmethod
    def _updated_required(cls, v: date | None, info: ValidationInfo) -> date | None:
        if v is None and info.data.get("kind") == "update":
            raise ValueError("required for update chunks (an ISO date, e.g. 2024-03-01)")
        return v

    @field_validator("supersedes", mode="before")
    @classmethod
    def _supersedes_list(cls, v: Any) -> Any:
        return _split_list(v)

    @field_validator("supersedes")
    @classmethod
    def _only_updates_supersede(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if v and info.data.get("kind") == "raw":
            raise ValueError("only update chunks can supersede; set kind to 'update' or drop supersedes")
        return v


class UpdateCheck(_Record):
    """What a safety check looks for in an answer to an update-sensitive query."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expect_any: list[str] = Field(default_factory=list)
    superseded_any: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> UpdateCheck:
        if not self.expect_any and not self.superseded_any:
            raise ValueError("give expect_any and/or superseded_any (lists of phrases)")
        return self


class Query(_Record):
    """One patient query with its doctor-approved ground-truth answer."""

    query_id: Identifier
    language: str
    query: Text
    query_en: Text | None = Field(None, validate_default=True)
    gt_response: Text
    themes: list[str] = Field(default_factory=list, validate_default=True)
    kb_refs: list[Identifier] = Field(default_factory=list, validate_default=True)
    update_sensitive: bool = False
    update_check: UpdateCheck | None = None

    @field_validator("language", mode="before")
    @classmethod
    def _language_lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("language")
    @classmethod
    def _language_known(cls, v: str) -> str:
        if v not in LANGUAGES:
            known = ", ".join(LANGUAGES)
            raise ValueError(f"unknown language code {v!r} (known: {known}; add more in LANGUAGE_TABLE)")
        return v

    @field_validator("query_en", mode="before")
    @classmethod
    def _blank_none(cls, v: Any) -> Any:
        return None if _is_blank(v) else v

    @field_validator("query_en")
    @classmethod
    def _query_en_required(cls, v: str | None, info: ValidationInfo) -> str | None:
        lang = info.data.get("language")
        if v is None and lang is not None and lang != "en":
            raise ValueError(f"required when language is {lang!r} (the English rendering of the query)")
        return v

    @field_validator("themes", "kb_refs", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _split_list(v)

    @field_validator("themes")
    @classmethod
    def _themes_known(cls, v: list[str]) -> list[str]:
        v = [t.strip() for t in v]
        unknown = [t for t in v if t not in THEMES]
        if unknown:
            raise ValueError(f"unknown theme(s) {', '.join(map(repr, unknown))} (known: {', '.join(THEMES)})")
        return list(dict.fromkeys(v))

    @field_validator("update_sensitive", mode="before")
    @classmethod
    def _blank_false(cls, v: Any) -> Any:
        return False if _is_blank(v) else v

    @field_validator("update_check", mode="before")
    @classmethod
    def _check_json(cls, v: Any) -> Any:
        if _is_blank(v):
            return None
        if isinstance(v, str):
            try:
                return json.loads(v)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON ({exc.msg}); expected {{\"expect_any\": [...]}}") from None
        return v

    @property
    def search_text(self) -> str:
        """Text used for retrieval: the English rendering when there is one, else the query."""
        return self.query_en or self.query


# -- issues ------------------------------------------------------------------------------------
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


# -- readers -----------------------------------------------------------------------------------
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


def _read_csv(path: Path, data: bytes, issues: list[Issue]) -> list[Record]:
    """Rows of a CSV file as dicts of strings; rows are numbered with the header as line 1."""
    text = "\n".join(_decode_lines(path, data, issues)[0])
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[list[str]] = []
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            issues.append(Issue(str(path), start, None, f"unreadable CSV ({exc}); check the quoting"))
            return []
        if row:
            rows.append(row)
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
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


# -- dataset -----------------------------------------------------------------------------------
@dataclass
class Dataset:
    """A validated dataset: knowledge-base chunks (none for closed-book QA) and queries."""

    name: str
    path: Path
    chunks: list[Chunk] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)

    @property
    def closed_book(self) -> bool:
        """True when there is no knowledge base (Med-CoDE style QA)."""
        return not self.chunks

    @cached_property
    def _chunks_by_id(self) -> dict[str, Chunk]:
        return {c.chunk_id: c for c in self.chunks}

    def chunk(self, chunk_id: str) -> Chunk:
        """The chunk with this id (KeyError naming the dataset if absent)."""
        try:
            return self._chunks_by_id[chunk_id]
        except KeyError:
            raise KeyError(f"no chunk {chunk_id!r} in dataset {self.name!r}") from None

    def query(self, query_id: str) -> Query:
        """The query with this id (KeyError if absent)."""
        for q in self.queries:
            if q.query_id == query_id:
                return q
        raise KeyError(f"no query {query_id!r} in dataset {self.name!r}")

    @property
    def raw_chunks(self) -> list[Chunk]:
        return [c for c in self.chunks if c.kind == "raw"]

    @property
    def update_chunks(self) -> list[Chunk]:
        return [c for c in self.chunks if c.kind == "update"]

    def content_hash(self) -> str:
        """sha256 over the normalised records (same for JSONL, CSV and Parquet of the same content)."""
        payload = {
            "chunks": [c.model_dump(mode="json") for c in self.chunks],
            "queries": [q.model_dump(mode="json") for q in self.queries],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()

    def summary(self) -> str:
        """One line: queries per language and chunks raw/update (or closed-book)."""
        langs = Counter(q.language for q in self.queries)
        per_lang = ", ".join(f"{code} {langs[code]}" for code in LANGUAGES if langs[code])
        kb = ("closed-book (no knowledge base)" if self.closed_book else
              f"{len(self.chunks)} chunks ({len(self.raw_chunks)} raw, {len(self.update_chunks)} update)")
        return f"{self.name}: {len(self.queries)} queries ({per_lang}); {kb}"


def _find_file(folder: Path, stem: str, issues: list[Issue], required: bool) -> Path | None:
    found = [folder / f"{stem}.{ext}" for ext in FORMATS if (folder / f"{stem}.{ext}").is_file()]
    if len(found) > 1:
        issues.append(Issue(str(found[0]), None, None,
                            f"several {stem} files ({', '.join(p.name for p in found)}); keep only one"))
        return None
    if not found and required:
        issues.append(Issue(str(folder / f"{stem}.jsonl"), None, None,
                            f"missing: a dataset folder needs {stem}.jsonl (or {stem}.csv / {stem}.parquet)"))
    return found[0] if found else None


def _pydantic_issues(file: str, line: int, exc: ValidationError) -> list[Issue]:
    issues = []
    for err in exc.errors():
        loc = err["loc"]
        name = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "missing (required field)"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key (expected expect_any and/or superseded_any)"
        elif msg.startswith("Value error, "):
            msg = msg.removeprefix("Value error, ")
        elif "input" in err and not isinstance(err["input"], dict):
            shown = repr(err["input"])
            msg += f" (got {shown})" if len(shown) <= 60 else ""
        issues.append(Issue(file, line, name or None, msg))
    return issues


def _validate_records(file: Path, records: list[Record], model: type[_Record],
                      issues: list[Issue]) -> list[tuple[int, Any]]:
    valid = []
    unknown: dict[str, int] = {}
    for line, rec in records:
        for key in rec:
            if key not in model.model_fields and key not in unknown:
                unknown[key] = line
        try:
            valid.append((line, model.model_validate(rec)))
        except ValidationError as exc:
            issues.extend(_pydantic_issues(str(file), line, exc))
    for key, line in unknown.items():
        issues.append(Issue(str(file), line, str(key), "unknown field, ignored (a typo?)", "warning"))
    return valid


def _check_duplicates(file: Path, records: list[Record], id_field: str, issues: list[Issue]) -> dict[str, dict]:
    """Report repeated ids; return id -> first raw record (for reference checks, valid or not)."""
    first: dict[str, tuple[int, dict]] = {}
    for line, rec in records:
        rid = rec.get(id_field)
        if isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid).strip():
            rid = str(rid).strip()
            if rid in first:
                issues.append(Issue(str(file), line, id_field,
                                    f"duplicate {id_field} {rid!r} (first at line {first[rid][0]})"))
            else:
                first[rid] = (line, rec)
    return {rid: rec for rid, (_, rec) in first.items()}


def _raw_ids(rec: dict, key: str) -> list[str]:
    """A list field of a raw record as ids, however it was written (list, CSV text, array); [] if unusable."""
    try:
        items = _split_list(rec.get(key))
    except (TypeError, ValueError):
        return []
    if not isinstance(items, list):
        return []
    return [str(i).strip() for i in items if isinstance(i, (str, int)) and str(i).strip()]


def _kind(rec: dict | None) -> str:
    return str((rec or {}).get("kind", "")).strip().lower()


def _check_chunk_refs(file: Path, records: list[Record], chunk_recs: dict[str, dict], issues: list[Issue]) -> None:
    """Every ``supersedes`` id must name a raw chunk (checked on every record, valid or not)."""
    for line, rec in records:
        for ref in _raw_ids(rec, "supersedes"):
            if ref not in chunk_recs:
                issues.append(Issue(str(file), line, "supersedes", f"names chunk {ref!r}, which is not in the kb"))
            elif _kind(chunk_recs[ref]) != "raw":
                issues.append(Issue(str(file), line, "supersedes",
                                    f"names chunk {ref!r}, which is not a raw chunk; updates supersede raw chunks"))


def _check_query_refs(file: Path, records: list[Record], kb_file: Path | None, chunk_recs: dict[str, dict],
                      issues: list[Issue]) -> None:
    """``kb_refs`` must name existing chunks, and be empty in a closed-book set (every record, valid or not)."""
    for line, rec in records:
        refs = _raw_ids(rec, "kb_refs")
        if kb_file is None and refs:
            issues.append(Issue(str(file), line, "kb_refs", "must be empty: the dataset is closed-book (no kb file)"))
        elif kb_file is not None:
            missing = [r for r in refs if r not in chunk_recs]
            if missing:
                issues.append(Issue(str(file), line, "kb_refs",
                                    f"names chunk(s) not in {kb_file.name}: {', '.join(map(repr, missing))}"))


def _check_query(file: Path, line: int, q: Query, kb_file: Path | None, chunk_recs: dict[str, dict],
                 issues: list[Issue]) -> None:
    """Checks on one valid query that need other fields or the kb: out_of_kb, update_sensitive, script."""
    f = str(file)
    if kb_file is None and q.update_sensitive:
        issues.append(Issue(f, line, "update_sensitive", "cannot be true in a closed-book dataset (no kb file)"))
    if kb_file is not None:
        if "out_of_kb" in q.themes and q.kb_refs:
            issues.append(Issue(f, line, "kb_refs", "must be empty for an out_of_kb query"))
        if q.update_sensitive and not any(_kind(chunk_recs.get(r)) == "update" for r in q.kb_refs):
            issues.append(Issue(f, line, "kb_refs", "update_sensitive is true but no kb_ref is an update chunk",
                                "warning"))
    written = dominant_script(q.query)
    own = LANGUAGE_TABLE[q.language]
    if q.language != "en" and script_letters(q.query, q.language) == 0:
        issues.append(Issue(f, line, "query", f"no {own.script} letters for language {q.language!r}: "
                            "romanized (kept, labelled by matrix language) or mislabelled?", "warning"))
    elif written is not None and LANGUAGE_TABLE[written].script != own.script and q.language != "en":
        issues.append(Issue(f, line, "query", f"mostly {LANGUAGE_TABLE[written].script} letters but language is "
                            f"{q.language!r}", "warning"))
    elif q.language == "en" and written not in (None, "en"):
        issues.append(Issue(f, line, "language", f"is 'en' but the query is written in "
                            f"{LANGUAGE_TABLE[written].script} script (language {written!r}?)", "warning"))


def find_dataset_files(path: str | Path, issues: list[Issue]) -> tuple[Path | None, Path | None, str]:
    """(queries file, kb file or None, dataset name) of a folder or a queries file; problems go to ``issues``."""
    path = Path(path)
    if not path.exists():
        issues.append(Issue(str(path), None, None, "not found; give a dataset folder or a queries file"))
        return None, None, path.name
    if path.is_dir():
        queries = _find_file(path, "queries", issues, required=True)
        kb = _find_file(path, "kb", issues, required=False)
        return queries, kb, path.resolve().name
    if path.stem == "kb":
        issues.append(Issue(str(path), None, None, "this is a kb file; pass the dataset folder instead"))
        return None, None, path.parent.name
    if path.stem == "queries":  # data/x/queries.jsonl means the dataset data/x (with its kb, if any)
        kb = _find_file(path.parent, "kb", issues, required=False)
        return path, kb, path.parent.resolve().name
    return path, None, path.stem


def validate(path: str | Path) -> tuple[Dataset | None, list[Issue]]:
    """Read and check a dataset; return it (``None`` if any error) and every issue found. Writes nothing."""
    path = Path(path)
    issues: list[Issue] = []
    queries_file, kb_file, name = find_dataset_files(path, issues)
    chunks: list[tuple[int, Chunk]] = []
    chunk_recs: dict[str, dict] = {}
    if kb_file is not None:
        records, read_issues = read_records(kb_file)
        issues += read_issues
        chunk_recs = _check_duplicates(kb_file, records, "chunk_id", issues)
        chunks = _validate_records(kb_file, records, Chunk, issues)
        _check_chunk_refs(kb_file, records, chunk_recs, issues)
        if not records and not read_issues:
            issues.append(Issue(str(kb_file), None, None, "has no chunks; the dataset is treated as closed-book",
                                "warning"))
            kb_file = None
    queries: list[tuple[int, Query]] = []
    if queries_file is not None:
        records, read_issues = read_records(queries_file)
        issues += read_issues
        if not records and not read_issues:
            issues.append(Issue(str(queries_file), None, None, "has no queries; add one JSON object per line"))
        _check_duplicates(queries_file, records, "query_id", issues)
        queries = _validate_records(queries_file, records, Query, issues)
        _check_query_refs(queries_file, records, kb_file, chunk_recs, issues)
        for line, q in queries:
            _check_query(queries_file, line, q, kb_file, chunk_recs, issues)
    if any(i.severity == "error" for i in issues):
        return None, issues
    return Dataset(name=name, path=path, chunks=[c for _, c in chunks], queries=[q for _, q in queries]), issues


def load_dataset(path: str | Path) -> Dataset:
    """Load a valid dataset, or raise UserError with the first error and how to see the rest."""
    dataset, issues = validate(path)
    errors = [i for i in issues if i.severity == "error"]
    if dataset is None:
        more = f" (+{len(errors) - 1} more; run `python -m pipeline validate {path}`)" if len(errors) > 1 else ""
        raise UserError(f"{errors[0]}{more}")
    return dataset


def validate_command(path: str | Path) -> int:
    """CLI: print every error and warning (one per line) and a summary; 1 if any error, else 0."""
    from rich.console import Console
    from rich.text import Text as RichText

    console = Console(highlight=False, soft_wrap=True)
    dataset, issues = validate(path)
    for issue in sorted(issues, key=lambda i: (i.severity != "error", i.file, i.line if i.line is not None else -1)):
        style = "bold red" if issue.severity == "error" else "yellow"
        console.print(RichText.assemble((f"{issue.severity}: ", style), str(issue)))
    n_err = sum(i.severity == "error" for i in issues)
    n_warn = len(issues) - n_err
    warn = f"; {n_warn} warning{'s' * (n_warn != 1)}" if n_warn else ""
    if dataset is None:
        console.print(RichText.assemble((f"invalid: {n_err} error{'s' * (n_err != 1)}{warn} in {path}", "bold red"),
                                        "; fix them and rerun validate"))
        return 1
    console.print(RichText.assemble(("ok ", "bold green"), dataset.summary() + warn))
    return 0
