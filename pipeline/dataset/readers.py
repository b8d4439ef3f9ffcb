"""The readers of ``ingest-kb``'s formats other than PDF, each registered once in ``pipeline.formats.FORMATS``.

Every reader takes a file, its ``FileReport``, its format's reading options (None: these formats take none) and
the ``InputLimits`` (checked before these readers open a file), and returns ``Section``s: text under its heading
path, built as Markdown (headings ``#``–``######``, tables as Markdown rows) and split at its headings by
langchain-text-splitters.
Word: python-docx, paragraphs and tables in document order, heading styles giving the path. Web pages, whole or
fragments without ``<html>``/``<body>``: trafilatura (navigation, banners and footers dropped) as XML, whose
``<head rend="hN">`` give the path, whose tables become Markdown rows under their heading (as a Word file's do) and
whose inline markup (bold, italics, links, ``<sup>``) is reduced to its text. Markdown and text: UTF-8.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from pipeline.dataset.ingest import FileReport, Section, _bad
from pipeline.formats import InputLimits

HEADING_LEVELS = 6
SUPERSCRIPT = str.maketrans("0123456789+-=()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾")
SUBSCRIPT = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")


def read_text_file(path: Path) -> str:
    """The file's text (UTF-8, a BOM dropped); ``UserError`` naming the file and the first bad byte."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad(path, f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         "re-save it as UTF-8") from None
    except OSError as exc:
        raise _bad(path, f"cannot read the file ({exc.strerror})") from None


def markdown_sections(markdown: str) -> list[Section]:
    """Sections of Markdown text under their heading path (headings ``#`` to ``######`` kept in the text)."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    levels = [f"h{n}" for n in range(1, HEADING_LEVELS + 1)]
    splitter = MarkdownHeaderTextSplitter([("#" * n, f"h{n}") for n in range(1, HEADING_LEVELS + 1)],
                                          strip_headers=False)
    sections = []
    for doc in splitter.split_text(markdown):
        if doc.page_content.strip():
            sections.append(Section(doc.page_content.strip(), [doc.metadata[k] for k in levels if k in doc.metadata]))
    return sections


def markdown_table(rows: list[list[str]]) -> str:
    """Rows of cell texts as a Markdown table (the first row as its header); empty rows dropped."""
    rows = [[" ".join(cell.split()).replace("|", "\\|") for cell in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join([lines[0], "|" + "---|" * width, *lines[1:]])


# -- the readers (FORMATS entries) ---------------------------------------------------------------------------
def read_markdown(path: Path, report: FileReport, options: None, limits: InputLimits) -> list[Section]:
    """A Markdown file: its headings give the path."""
    return markdown_sections(read_text_file(path))


def read_text(path: Path, report: FileReport, options: None, limits: InputLimits) -> list[Section]:
    """A plain text file: one section, no headings."""
    text = read_text_file(path).strip()
    return [Section(text, [])] if text else []


def read_docx(path: Path, report: FileReport, options: None, limits: InputLimits) -> list[Section]:
    """A Word file: paragraphs and tables in document order; ``Title`` and ``Heading N`` styles give the path."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from lxml.etree import XMLSyntaxError

    blocks = []
    try:
        document = docx.Document(str(path))
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                blocks.append(markdown_table([[cell.text for cell in row.cells] for row in block.rows]))
                continue
            text = block.text.strip()
            style = (block.style.name if block.style is not None else "") or ""
            level = re.fullmatch(r"Heading (\d)", style)
            if text and (level or style == "Title"):
                blocks.append(f"{'#' * min(int(level.group(1)) if level else 1, HEADING_LEVELS)} {text}")
            elif text:
                blocks.append(text)
    except XMLSyntaxError as exc:
        raise _bad(path, f"malformed XML inside the Word file ({exc}); save it again as .docx") from None
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise _bad(path, f"unreadable Word file ({type(exc).__name__}: {exc}); save it again as .docx") from None
    return markdown_sections("\n\n".join(b for b in blocks if b))


def read_html(path: Path, report: FileReport, options: None, limits: InputLimits) -> list[Section]:
    """A web page's main text (trafilatura): ``h1``–``h6`` give the path, inline markup becomes plain text."""
    import trafilatura
    from lxml import etree

    xml = trafilatura.extract(read_text_file(path), output_format="xml", include_formatting=True,
                              include_links=False, include_comments=False, include_tables=True, favor_recall=True)
    if not xml:
        return []
    main = etree.fromstring(xml.encode("utf-8")).find("main")
    return markdown_sections("\n\n".join(b for b in map(_html_block, _html_blocks(main)) if b))


def _html_blocks(element: Any) -> list[Any]:
    """The blocks of trafilatura's XML in document order, ``div``s opened: a fragment without ``<html>``/``<body>``
    comes back wrapped in one, and a ``div`` taken as one block would lose its headings and tables."""
    if element is None:
        return []
    blocks = []
    for child in element:
        blocks += _html_blocks(child) if child.tag == "div" and len(child) else [child]
    return blocks


def _html_block(element: Any) -> str:
    """One block of trafilatura's XML (``head``, ``p``, ``list``, ``table``, …) as Markdown."""
    for hi in element.iter("hi"):  # superscript/subscript digits keep their meaning without tags: m², H₂O, ref¹²
        if hi.get("rend") in ("#sup", "#sub") and hi.text:
            hi.text = hi.text.translate(SUPERSCRIPT if hi.get("rend") == "#sup" else SUBSCRIPT)
    if element.tag == "head":
        level = re.fullmatch(r"h([1-6])", element.get("rend") or "")
        text = _plain(element)
        return f"{'#' * (int(level.group(1)) if level else 2)} {text}" if text else ""
    if element.tag == "list":
        return "\n".join(f"- {_plain(item)}" for item in element.findall("item") if _plain(item))
    if element.tag == "table":
        return markdown_table([[_plain(cell) for cell in row.findall("cell")] for row in element.findall("row")])
    return _plain(element)


def _plain(element: Any) -> str:
    return " ".join("".join(element.itertext()).split())
