"""The document formats ``ingest-kb`` reads: one reader per format, registered once (docling's format → backend map).

``FORMATS`` maps a format's name to its ``DocumentFormat``: the label and file suffixes users see, where its
reader lives (``"module:function"``, imported on first use) and the class of its reading options, if it takes any
(PDF: ``PdfOptions``; docling's per-format options). Every reader takes the file, its ``FileReport``, its format's
options (None for a format without) and the ``InputLimits``, and returns the document's ``Section``s. An options
object is checked when it is made (the CLI makes it from its flags), so a bad option stops the command before any
file is read. The suffix lookup, the CLI help of ``ingest-kb`` and the "unsupported file type" error are generated
from the formats, so adding a format is a reader and one entry. The module sits outside ``pipeline.dataset`` so
that the command line builds its help without importing the dataset package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.registry import Registry, load

QA_TABLES = (".csv", ".jsonl")  # approved Q&A pairs (``--kind update``), read by the dataset reader, not a format


@dataclass(frozen=True)
class PdfOptions:
    """How PDFs are read (CLI: ``--ocr-langs``). ``ocr_langs``: Tesseract's languages for image-only pages, e.g.
    ``"hin+eng"`` (None: the script Tesseract detects on each page); ``UserError`` when made with a language that
    is not installed."""

    ocr_langs: str | None = None

    def __post_init__(self) -> None:
        if self.ocr_langs:
            from pipeline.dataset.ocr import check_languages  # Tesseract is asked only when languages are named

            check_languages(self.ocr_langs)


@dataclass(frozen=True)
class DocumentFormat:
    """One document format: what users call it, the suffixes that mean it, its reader (``"module:function"``) and
    the class of its reading options (None: it takes none)."""

    label: str
    suffixes: tuple[str, ...]
    reader: str
    archive: bool = False  # a zip of XML parts (DOCX): its members are checked before the reader opens it
    options: type | None = None

    def read(self, path: Path, report: Any, options: Any, limits: InputLimits) -> list[Any]:
        """The document's sections, by its reader (imported now: a missing library breaks only this format), given
        its reading options (an instance of ``self.options``, or None) and the limits of the input."""
        return load(self.reader)(path, report, options, limits)


FORMATS = Registry("document format", {
    "pdf": DocumentFormat("PDF", (".pdf",), "pipeline.dataset.pdf:read_pdf", options=PdfOptions),
    "docx": DocumentFormat("Word", (".docx",), "pipeline.dataset.readers:read_docx", archive=True),
    "html": DocumentFormat("web page", (".html", ".htm"), "pipeline.dataset.readers:read_html"),
    "markdown": DocumentFormat("Markdown", (".md", ".markdown"), "pipeline.dataset.readers:read_markdown"),
    "text": DocumentFormat("text", (".txt",), "pipeline.dataset.readers:read_text"),
})


@dataclass(frozen=True)
class InputLimits:
    """The largest input ``ingest-kb`` reads (CLI: ``--max-file-mb``, ``--max-inflated-mb``, ``--max-ratio``,
    ``--max-page-content-mb``, ``--max-page-mpx``, ``--max-ocr-pages``, ``--max-memory-mb``); enforced by
    ``pipeline.dataset.bounds`` before any reader opens a file, for a PDF's pages by ``pipeline.dataset.pdf_bounds``
    before PDFium parses them, by the PDF reader's OCR, and (the memory) as each page and each file is read."""

    max_file_mb: float = 100
    max_inflated_mb: float = 100  # all members of an archive together
    max_ratio: float = 100  # inflated / compressed size of one archive member
    max_page_content_mb: float = 20  # a PDF page's content streams, inflated (PDFium holds ~35 bytes for each byte)
    max_page_mpx: float = 50  # a PDF page rendered for OCR (larger: a lower resolution), an image a page draws
    max_ocr_pages: int | None = None  # image-only pages of one PDF OCR'd (the others noted); None: all
    max_memory_mb: float = 1536  # the resident memory one ingest adds to its process, checked at each page and file
    memory_base_mb: float | None = None  # the process's resident memory when the ingest began (None: when the read did)


def format_of(path: Path, formats: Mapping[str, DocumentFormat] = FORMATS) -> str | None:
    """The name of the format of ``formats`` a file's suffix (any case) means, or None."""
    suffix = path.suffix.lower()
    return next((name for name in formats if suffix in formats[name].suffixes), None)


def formats_described(formats: Mapping[str, DocumentFormat] = FORMATS) -> str:
    """``"PDF (.pdf), Word (.docx), …"``: every format with its suffixes, for help and error texts."""
    return ", ".join(f"{formats[name].label} ({', '.join(formats[name].suffixes)})" for name in formats)
