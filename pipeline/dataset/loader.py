"""Load and validate datasets: ``data/<name>/`` with ``kb`` and ``queries`` files (JSONL, CSV or Parquet).

Over 450 lines: the checks of one dataset (each a small function naming file, line and field) and the loader that
runs them.

``validate`` reads a dataset and lists every problem with file, line and field; it never raises for
bad content and writes nothing. ``load_dataset`` returns a clean ``Dataset`` or raises ``UserError``
with the first error. Each record is checked by its pydantic model (``pipeline.dataset.format``);
the checks across records (duplicate ids, references between queries, chunks and variants, the
optional ``rubrics`` file merged by ``query_id``, the folder's own ``prompts/``) run here, after
every record has been read.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.dataset.format import (
    LANGUAGE_TABLE,
    LANGUAGES,
    Chunk,
    Query,
    RubricEntry,
    _is_blank,
    _parse_date,
    _Record,
    _split_list,
    chunk_source_message,
    dominant_script,
    script_letters,
)
from pipeline.dataset.records import Issue, Record, dataset_folder, find_dataset_files, find_file, read_records
from pipeline.dataset.writing import JOURNAL, pending_journal
from pipeline.errors import UserError
from pipeline.prompts import PROMPTS_DIR, load_text

PROMPTS_SUBDIR = "prompts"  # data/<name>/prompts/<file>: a dataset's own version of a studio prompt file
# who sees which update (``unseen_by``), in ``kb_hash``: retrievals made under an older rule are made again
VISIBILITY_RULE = "updates approved before asked_on, never one from the query's own message"


# -- dataset -----------------------------------------------------------------------------------
@dataclass
class Dataset:
    """A validated dataset: knowledge-base chunks (none for closed-book QA), queries, and its own prompts."""

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

    # -- prompts: the dataset's own file, else the studio's -------------------------------------
    def prompt_path(self, name: str) -> Path:
        """The prompt file ``name`` this dataset uses: ``<folder>/prompts/<name>`` if it has one, else the studio's."""
        folder = dataset_folder(self.path)
        own = folder / PROMPTS_SUBDIR / name if folder is not None else None
        return own if own is not None and own.is_file() else PROMPTS_DIR / name

    def prompt_text(self, name: str) -> str:
        """The text of prompt file ``name`` (without its trailing newline), the dataset's own version first."""
        cache = self.__dict__.setdefault("_prompt_cache", {})
        if name not in cache:
            path = self.prompt_path(name)
            own = path.parent != PROMPTS_DIR
            cache[name] = path.read_text(encoding="utf-8").rstrip("\n") if own else load_text(name)
        return cache[name]

    def content_hash(self) -> str:
        """sha256 over the normalised records (same for JSONL, CSV and Parquet of the same content)."""
        payload = {
            "chunks": [c.model_dump(mode="json") for c in self.chunks],
            "queries": [q.content() for q in self.queries],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()

    @cached_property
    def kb_hash(self) -> str | None:
        """The knowledge base's identity, what results from retrieval onward record: the first 16 hex digits of a
        sha256 over its chunks (ids, kinds, titles, texts, sources, dates, and the log message an update was made
        from where known, which decides who may see it; in id order, so the same KB in another file order or format
        has the same hash) and, with updates, the rule of who sees them (``VISIBILITY_RULE``: retrievals made under
        an older rule are made again). None for a closed-book dataset."""
        if not self.chunks:
            return None
        def record(c: Chunk) -> dict[str, Any]:
            message = chunk_source_message(c)
            return {**c.model_dump(mode="json"), **({"source_message": message} if message else {})}

        chunks: list[Any] = sorted((record(c) for c in self.chunks), key=lambda c: c["chunk_id"])
        if self.update_chunks:
            chunks.append({"visibility": VISIBILITY_RULE})
        return hashlib.sha256(json.dumps(chunks, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]

    def hidden_for(self, query: Query) -> frozenset[str]:
        """The chunks ``query`` cannot see (``unseen_by``): the KB as it stood before the patient asked."""
        return frozenset(c.chunk_id for c in self.chunks if unseen_by(query, c))

    def summary(self) -> str:
        """One line: queries per language and chunks raw/update (or closed-book)."""
        langs = Counter(q.language for q in self.queries)
        per_lang = ", ".join(f"{code} {langs[code]}" for code in LANGUAGES if langs[code])
        kb = ("closed-book (no knowledge base)" if self.closed_book else
              f"{len(self.chunks)} chunks ({len(self.raw_chunks)} raw, {len(self.update_chunks)} update)")
        extras = [f"{n} {what}" for n, what in (
            (sum(q.multiple_choice for q in self.queries), "multiple-choice"),
            (sum(q.rubric is not None for q in self.queries), "with a rubric"),
            (sum(len(q.messages or ()) > 1 for q in self.queries), "multi-turn"),
        ) if n]
        more = f" [{', '.join(extras)}]" if extras else ""
        return f"{self.name}: {len(self.queries)} queries ({per_lang}){more}; {kb}"


def unseen_by(query: Query, chunk: Chunk) -> str | None:
    """Why ``query`` cannot see ``chunk``, else None. Health-Pariksha's rule is the KB as it stood when the question
    was asked: an update approved on or after the query's ``asked_on`` day (dates carry no time, so a same-day update
    may be the answer to this very message) is unseen, and so is an update made from the query's own message (its
    provenance's ``source_message`` is the query's), whatever its date."""
    if chunk.kind != "update":
        return None
    own = query.source_message
    if own is not None and chunk_source_message(chunk) == own:
        return f"made from the query's own message {own}"
    if query.asked_on is not None and chunk.updated is not None and chunk.updated >= query.asked_on:
        return f"approved {chunk.updated}, not before the query was asked ({query.asked_on})"
    return None


def _normal_text(text: str) -> str:
    return " ".join(text.casefold().split())


MIN_OWN_ANSWER_CHARS = 20  # a ground truth shorter than this ("Yes.") is too common to tell a chunk was made from it


def own_answer_leaks(dataset: Dataset) -> list[tuple[str, str]]:
    """``(query id, chunk id)`` for every update chunk a query can see (``unseen_by``) whose text holds the query's
    own ground truth (case and spacing aside): an update made from the query's own approved answer, which retrieval
    would put in the models' prompts. Raw chunks are the documents the answers are written from, not answers.
    Chunks are found by the answer's first ``MIN_OWN_ANSWER_CHARS`` characters (an index of every such stretch of
    every update), so 200k queries against thousands of updates stay linear."""
    n = MIN_OWN_ANSWER_CHARS
    texts = {c.chunk_id: _normal_text(c.text) for c in dataset.update_chunks}
    holding: dict[str, list[Chunk]] = {}
    for c in dataset.update_chunks:
        text = texts[c.chunk_id]
        for piece in {text[i:i + n] for i in range(len(text) - n + 1)}:
            holding.setdefault(piece, []).append(c)
    leaks = []
    for q in dataset.queries:
        answer = _normal_text(q.gt_response)
        if len(answer) < n:
            continue
        leaks += [(q.query_id, c.chunk_id) for c in holding.get(answer[:n], ())
                  if answer in texts[c.chunk_id] and not unseen_by(q, c)]
    return leaks


# -- record checks -----------------------------------------------------------------------------
EXPECTED_KEYS = {  # for "unknown key" messages of the nested records
    "update_check": "expect_any and/or superseded_any", "rubric": "criterion, points, tags",
    "messages": "role, content",
}
MISSING = {
    "criterion": "missing: every criterion needs its text (a statement a grader can check)",
    "points": "missing: every criterion needs its points (non-zero; negative for harmful content)",
    "role": "missing: every message needs its role (system, user or assistant)",
    "content": "missing: every message needs its content",
}


def _pydantic_issues(file: str, line: int, exc: ValidationError) -> list[Issue]:
    issues = []
    for err in exc.errors():
        loc = err["loc"]
        name = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
        msg = err["msg"]
        if err["type"] == "missing":
            msg = MISSING.get(str(loc[-1]), "missing (required field)") if len(loc) > 1 else "missing (required field)"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown key (expected {EXPECTED_KEYS.get(str(loc[0]), 'no other keys')})"
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


def _updated(rec: dict | None) -> date | None:
    try:
        return _parse_date((rec or {}).get("updated"))
    except ValueError:
        return None


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
                      query_recs: dict[str, dict], issues: list[Issue]) -> None:
    """``kb_refs`` name existing chunks (none in a closed-book set); ``variant_of`` names another query."""
    for line, rec in records:
        refs = _raw_ids(rec, "kb_refs")
        if kb_file is None and refs:
            issues.append(Issue(str(file), line, "kb_refs", "must be empty: the dataset is closed-book (no kb file)"))
        elif kb_file is not None:
            missing = [r for r in refs if r not in chunk_recs]
            if missing:
                issues.append(Issue(str(file), line, "kb_refs",
                                    f"names chunk(s) not in {kb_file.name}: {', '.join(map(repr, missing))}"))
        variant = rec.get("variant_of")
        if isinstance(variant, (str, int)) and not isinstance(variant, bool) and str(variant).strip():
            variant = str(variant).strip()
            if variant == str(rec.get("query_id", "")).strip():
                issues.append(Issue(str(file), line, "variant_of",
                                    "names the query itself; give the query it restates"))
            elif variant not in query_recs:
                issues.append(Issue(str(file), line, "variant_of",
                                    f"names query {variant!r}, which is not in {file.name}"))


def _check_script(f: str, line: int, q: Query, explicit: bool, issues: list[Issue]) -> None:
    """The query's letters against its language and ``script``: romanized text needs ``script: latin``."""
    written = dominant_script(q.query)
    own = LANGUAGE_TABLE[q.language]
    if explicit and q.script == "latin" and written not in (None, "en"):
        issues.append(Issue(f, line, "script", f"is 'latin' but the query is mostly {LANGUAGE_TABLE[written].script} "
                            "letters"))
    elif explicit and q.script == "native" and q.language != "en" and script_letters(q.query, q.language) == 0:
        issues.append(Issue(f, line, "script", f"is 'native' but the query has no {own.script} letters; "
                            "a romanized query has script 'latin'"))
    elif explicit and q.script == "latin":
        return  # romanized, and declared so (Health-Pariksha §3.1: filed by its matrix language)
    elif q.language != "en" and script_letters(q.query, q.language) == 0:
        issues.append(Issue(f, line, "query", f"no {own.script} letters for language {q.language!r}: "
                            "romanized (kept, labelled by matrix language; say so with script: latin) "
                            "or mislabelled?", "warning"))
    elif written is not None and LANGUAGE_TABLE[written].script != own.script and q.language != "en":
        issues.append(Issue(f, line, "query", f"mostly {LANGUAGE_TABLE[written].script} letters but language is "
                            f"{q.language!r}", "warning"))
    elif q.language == "en" and written not in (None, "en"):
        issues.append(Issue(f, line, "language", f"is 'en' but the query is written in "
                            f"{LANGUAGE_TABLE[written].script} script (language {written!r}?)", "warning"))


def _check_query(file: Path, line: int, q: Query, rec: dict, kb_file: Path | None, chunk_recs: dict[str, dict],
                 issues: list[Issue]) -> None:
    """Checks on one valid query that need other fields or the kb: out_of_kb, update_sensitive, dates, script."""
    f = str(file)
    if q.language != "en" and not q.query_en:
        issues.append(Issue(f, line, "query_en", f"missing for a {q.language!r} query: a run renders it with the "
                            "config's `translator:` (machine-made) before retrieval", "warning"))
    if kb_file is None and q.update_sensitive:
        issues.append(Issue(f, line, "update_sensitive", "cannot be true in a closed-book dataset (no kb file)"))
    if kb_file is not None:
        if "out_of_kb" in q.themes and q.kb_refs:
            issues.append(Issue(f, line, "kb_refs", "must be empty for an out_of_kb query"))
        if q.update_sensitive and not any(_kind(chunk_recs.get(r)) == "update" for r in q.kb_refs):
            issues.append(Issue(f, line, "kb_refs", "update_sensitive is true but no kb_ref is an update chunk",
                                "warning"))
        if q.asked_on is not None:
            later = [(r, d) for r in q.kb_refs if (d := _updated(chunk_recs.get(r))) and d >= q.asked_on]
            for ref, when in later:
                issues.append(Issue(f, line, "kb_refs", f"names update {ref!r} of {when}, on or after asked_on "
                                    f"{q.asked_on}: the query cannot see it (cite the chunk it could see)"))
    if q.messages is not None and q.messages[-1].content.strip() != q.query.strip():
        issues.append(Issue(f, line, "query", "differs from the last user message: the model answers the "
                            "conversation, retrieval and the judge see query", "warning"))
    _check_script(f, line, q, not _is_blank(rec.get("script")), issues)


def _merge_rubrics(folder: Path | None, queries: list[tuple[int, Query]], query_ids: set[str],
                   issues: list[Issue]) -> list[tuple[int, Query]]:
    """Merge ``<folder>/rubrics.{jsonl,csv,parquet}`` ({query_id, rubric} a line) into the queries by id."""
    rubrics_file = find_file(folder, "rubrics", issues, required=False) if folder is not None else None
    if rubrics_file is None:
        return queries
    records, read_issues = read_records(rubrics_file)
    issues += read_issues
    _check_duplicates(rubrics_file, records, "query_id", issues)
    inline = {q.query_id for _, q in queries if q.rubric is not None}
    by_id: dict[str, Any] = {}
    for line, entry in _validate_records(rubrics_file, records, RubricEntry, issues):
        if entry.query_id not in query_ids:
            issues.append(Issue(str(rubrics_file), line, "query_id", f"names query {entry.query_id!r}, "
                                "which is not in the queries file"))
        elif entry.query_id in inline:
            issues.append(Issue(str(rubrics_file), line, "query_id", f"query {entry.query_id!r} has its own rubric "
                                "in the queries file; keep one of the two"))
        else:
            by_id.setdefault(entry.query_id, entry.rubric)
    return [(line, q.model_copy(update={"rubric": by_id[q.query_id]}) if q.query_id in by_id else q)
            for line, q in queries]


def link_outside(folder: Path, path: Path, kind: str = "dataset folder") -> str | None:
    """Why ``path`` may not be read, when it is reached through a link that leads out of ``folder``, else None: a
    folder's reader reads only its own files, never what a link points at (a local file would be sent to a model
    endpoint and cached). Datasets (prompts, rubrics) and ``ingest-kb``'s source folders share this rule."""
    target = path.resolve()
    if target.is_relative_to(folder.resolve()):
        return None
    return f"a link to {target}, outside the {kind}; copy the file into {folder} instead"


def _outside(folder: Path, path: Path, issues: list[Issue]) -> bool:
    """True (and an error) when ``path`` is a link that leads out of the dataset ``folder``."""
    reason = link_outside(folder, path)
    if reason:
        issues.append(Issue(str(path), None, None, reason))
    return bool(reason)


def _check_links(folder: Path | None, files: list[Path | None], issues: list[Issue]) -> bool:
    """True when every file the dataset reads (``files``, ``rubrics.*``, ``prompts/``) resolves inside ``folder``."""
    if folder is None:
        return True
    paths = [p for p in (*files, find_file(folder, "rubrics", [], required=False)) if p is not None]
    prompts = folder / PROMPTS_SUBDIR
    if prompts.exists():
        paths.append(prompts)
        if prompts.is_dir():
            paths += sorted(prompts.iterdir())
    return not [p for p in paths if _outside(folder, p, issues)]


def _check_prompts(folder: Path | None, issues: list[Issue]) -> None:
    """A dataset's ``prompts/`` files: names the studio reads, and only the slots the studio's version fills."""
    prompts = folder / PROMPTS_SUBDIR if folder is not None else None
    if prompts is None or not prompts.is_dir():
        return
    for path in sorted(p for p in prompts.iterdir() if p.is_file() and not p.name.startswith(".")):
        studio = PROMPTS_DIR / path.name
        if not studio.is_file():
            known = ", ".join(sorted(p.name for p in PROMPTS_DIR.glob("*.txt")))
            issues.append(Issue(str(path), None, None, f"not a prompt file the studio reads (known: {known}); "
                                "ignored", "warning"))
            continue
        try:
            text = path.read_text(encoding="utf-8")
            slots = {s for _, s, _, _ in string.Formatter().parse(text) if s is not None}
            allowed = {s for _, s, _, _ in string.Formatter().parse(load_text(path.name)) if s is not None}
        except UnicodeDecodeError:
            issues.append(Issue(str(path), None, None, "invalid UTF-8; re-save the file as UTF-8"))
            continue
        except ValueError as exc:
            issues.append(Issue(str(path), None, None, f"unreadable template ({exc}); write a literal brace as "
                                "{{ or }}"))
            continue
        if not text.strip():
            issues.append(Issue(str(path), None, None, "is empty; delete it to use the studio's version"))
        extra = sorted(slots - allowed)
        if extra:
            fills = ", ".join("{" + s + "}" for s in sorted(allowed)) or "none"
            issues.append(Issue(str(path), None, None, f"slot(s) {', '.join('{' + s + '}' for s in extra)} are "
                                f"never filled; the studio fills: {fills}"))


def validate(path: str | Path) -> tuple[Dataset | None, list[Issue]]:
    """Read and check a dataset; return it (``None`` if any error) and every issue found. Writes nothing."""
    path = Path(path)
    issues: list[Issue] = []
    queries_file, kb_file, name = find_dataset_files(path, issues)
    folder = dataset_folder(path) if path.exists() else None
    if folder is not None and (journal := pending_journal(folder)) is not None:
        issues.append(Issue(str(folder / JOURNAL), None, None, f"a write by {journal.get('command')} was interrupted "
                            "between its renames: run ingest-kb or curate-queries on this folder again to complete "
                            "it (or remove the folder's files and rebuild)"))
        return None, issues
    if not _check_links(folder, [queries_file, kb_file], issues):
        return None, issues
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
        query_recs = _check_duplicates(queries_file, records, "query_id", issues)
        queries = _validate_records(queries_file, records, Query, issues)
        _check_query_refs(queries_file, records, kb_file, chunk_recs, query_recs, issues)
        raw = dict(records)
        for line, q in queries:
            _check_query(queries_file, line, q, raw[line], kb_file, chunk_recs, issues)
        queries = _merge_rubrics(folder, queries, set(query_recs), issues)
    _check_prompts(folder, issues)
    if any(i.severity == "error" for i in issues):
        return None, issues
    dataset = Dataset(name=name, path=path, chunks=[c for _, c in chunks], queries=[q for _, q in queries])
    lines = {q.query_id: line for line, q in queries}
    for query_id, chunk_id in own_answer_leaks(dataset):
        issues.append(Issue(str(queries_file), lines[query_id], "gt_response", f"query {query_id!r} can retrieve "
                            f"chunk {chunk_id!r}, which holds its own ground truth: date the update after the "
                            "question or name the message in its provenance (source_message)"))
    if any(i.severity == "error" for i in issues):
        return None, issues
    return dataset, issues


def load_dataset(path: str | Path) -> Dataset:
    """Load a valid dataset, or raise UserError with the first error and how to see the rest."""
    dataset, issues = validate(path)
    errors = [i for i in issues if i.severity == "error"]
    if dataset is None:
        more = f" (+{len(errors) - 1} more; run `python -m pipeline validate {path}`)" if len(errors) > 1 else ""
        raise UserError(f"{errors[0]}{more}")
    return dataset


SHOWN_PER_KIND = 3  # validate's console: issues shown per file, field and severity before they are counted


def validate_command(path: str | Path) -> int:
    """CLI: print the errors and warnings (one per line; past ``SHOWN_PER_KIND`` of one file, field and severity, a
    count with the lines they span) and a summary; 1 if any error, else 0."""
    from rich.text import Text as RichText

    from pipeline.console import make_console

    console = make_console(highlight=False, soft_wrap=True)
    dataset, issues = validate(path)
    ordered = sorted(issues, key=lambda i: (i.severity != "error", i.file, i.line if i.line is not None else -1))
    groups: dict[tuple[str, str, str | None], list[Issue]] = {}
    for issue in ordered:
        groups.setdefault((issue.severity, issue.file, issue.field), []).append(issue)
    for (severity, file, fld), group in groups.items():
        style = "bold red" if severity == "error" else "yellow"
        for issue in group[:SHOWN_PER_KIND]:
            console.print(RichText.assemble((f"{severity}: ", style), str(issue)))
        if len(group) > SHOWN_PER_KIND:  # a 200k-message log: counts and a few examples, not a line a message
            more = len(group) - SHOWN_PER_KIND
            lines = [i.line for i in group[SHOWN_PER_KIND:] if i.line is not None]
            where = f" (lines {lines[0]}-{lines[-1]})" if lines else ""
            console.print(RichText.assemble((f"{severity}: ", style), f"{file}: field {fld}: {more:,} more like "
                                            f"these{where}"))
    n_err = sum(i.severity == "error" for i in issues)
    n_warn = len(issues) - n_err
    warn = f"; {n_warn} warning{'s' * (n_warn != 1)}" if n_warn else ""
    if dataset is None:
        console.print(RichText.assemble((f"invalid: {n_err} error{'s' * (n_err != 1)}{warn} in {path}", "bold red"),
                                        "; fix them and rerun validate"))
        return 1
    console.print(RichText.assemble(("ok ", "bold green"), dataset.summary() + warn))
    return 0
