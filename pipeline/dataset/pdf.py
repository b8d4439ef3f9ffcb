"""PDF reader of ``ingest-kb``: text right for Indian scripts, legacy Hindi fonts converted, image-only pages
OCR'd, blank pages told apart, owner-password PDFs opened, headings from the outline or from large-font lines.

Engines, chosen by measurement (docs/ingest.md): pypdfium2 (PDFium) opens the PDF, gives the text of pages
without Indian scripts, the outline and the page images. A document with Indian-script text whose glyphs all map
to Unicode is read by poppler's ``pdftotext`` (Debian poppler-utils); one whose writer left glyphs of shaped
clusters unmapped is rebuilt from PDFium's characters (``_shaped_lines``): unmapped glyphs left out, line breaks
PDFium invented inside a line dropped, a space put where glyphs stand a space apart, displaced signs put back.
Each page that is not plain good text gets a ``page_notes`` entry in the report (kind ``ocr``, ``legacy_font``,
``blank``, ``image_only``, ``suspect_text`` or ``downscaled``); ``Section``/``FileReport`` are ingest.py's.

Over 450 lines: one reader's engine choice, line building and page notes share the page loop's state (the loaded
page, its text page, the report); the bounds, legacy fonts and OCR it calls are modules of their own.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.dataset import bounds, legacy_fonts, ocr, pdf_bounds
from pipeline.dataset.text_check import INDIC_BLOCKS, is_indic_sign, page_problems
from pipeline.errors import UserError
from pipeline.formats import InputLimits, PdfOptions

if TYPE_CHECKING:
    from pipeline.dataset.ingest import FileReport, Section

_INDIC = re.compile("[\u0900-\u0dff]")
POPPLER_TIMEOUT = 600  # seconds for pdftotext on one document
MIN_PAGE_CHARS = 20  # a page with fewer extracted characters has no usable text layer (a scan)
SPACE_GAP = 0.2  # a gap of this many font sizes between two glyphs of a line is a word space
HEADING_SIZE = 1.2  # a short line set this many times the body's font size is a heading
HEADING_MAX_CHARS = 150
LEVEL_STEP = 0.9  # heading sizes within 10 % of each other are one level (OCR'd line heights vary)
PDFIUM_PASSWORD_ERROR = 4  # FPDF_ERR_PASSWORD
BY_SIGNATURE = "no font name tells it: found by its signature, check the text"
DECRYPT_FIX = "remove the password (qpdf --decrypt --password=PASSWORD in.pdf out.pdf) and ingest the copy"


def engine_name() -> str:
    import pypdfium2

    return f"pypdfium2 {pypdfium2.version.PYPDFIUM_INFO.version}"


@dataclass
class Line:
    """One line of a page's text and the largest font size in it (0 when OCR'd); ``runs``: its text in pieces set in
    one font each, ``(text, font name)``, where PDFium read the line."""

    text: str
    size: float
    runs: list[tuple[str, str]] | None = None


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


def _place_marks(items: list[tuple[str, tuple[float, float] | None]]) -> str:
    """A line's text with each vowel sign the PDF wrote away from its letter (fpdf2 and others emit some marks
    after the cluster, or after the line) moved back behind the letter it is drawn on; likewise a consonant drawn
    under a letter that ends in a virama (a subjoined form)."""
    placed: list[tuple[str, tuple[float, float] | None]] = []
    last: tuple[float, float] | None = None  # where the last character placed in order is drawn
    for char, span in items:
        if (span is not None and last is not None and span[1] <= last[0] + 0.5
                and INDIC_BLOCKS[0] <= ord(char) <= INDIC_BLOCKS[1]):  # drawn before the character read last
            host = max(range(len(placed)), key=lambda k: _overlap(placed[k][1], span)
                       if placed[k][1] and not is_indic_sign(placed[k][0]) else -1)
            end = host + 1
            while end < len(placed) and is_indic_sign(placed[end][0]):
                end += 1
            subjoined = not is_indic_sign(char) and unicodedata.name(placed[end - 1][0], "").endswith("VIRAMA")
            if (placed[host][1] and (is_indic_sign(char) or subjoined)
                    and _overlap(placed[host][1], span) >= 0.5 * (span[1] - span[0])):
                placed.insert(end, (char, span))  # a sign, or a consonant drawn below a virama (subjoined)
                continue
        placed.append((char, span))
        last = span if span is not None else last
    return "".join(char for char, _ in placed).strip()


def _page_lines(textpage: Any, text: str, page: Any = None) -> list[Line]:
    """The page's lines and their font sizes: PDFium's text as it is for a page without Indian scripts, rebuilt
    from its characters for a page with them (``_shaped_lines``). Given the ``page``, each line's runs by font:
    cut character by character only when a font of the page may be a legacy one (``_page_fonts``); one run a line
    when the page has one font; none (``[]``: nothing to convert) otherwise."""
    import pypdfium2.raw as pdfium_c

    if len(text) != textpage.count_chars() or _INDIC.search(text):
        return _shaped_lines(textpage, text)
    fonts = _page_fonts(page, textpage) if page is not None else {}
    single = next(iter(fonts)) if len(fonts) == 1 else None
    cut = single is None and any(legacy_fonts.font_encoding(font) or legacy_fonts.detect(written)
                                 for font, written in fonts.items())
    lines, offset = [], 0
    for row in text.split("\n"):
        words = row.split()
        if words:
            first = offset + len(row) - len(row.lstrip())
            runs: list[tuple[str, str]] | None = None  # no fonts known: the page's signature decides
            if cut:
                runs = _font_runs(textpage, row, offset)
            elif page is not None:
                runs = [(row, single)] if single is not None else []
            lines.append(Line(" ".join(words), pdfium_c.FPDFText_GetFontSize(textpage.raw, first), runs))
        offset += len(row) + 1
    return lines


def _font_name(text_object: Any, buffer: Any) -> str:
    """The base font name of a PDFium text object ("ABCDEF+KrutiDev010"), "" when it has none."""
    import pypdfium2.raw as pdfium_c

    font = pdfium_c.FPDFTextObj_GetFont(text_object)
    size = pdfium_c.FPDFFont_GetBaseFontName(font, buffer, len(buffer)) if font else 0
    return buffer.value.decode("utf-8", "replace") if 0 < size <= len(buffer) else ""


def _page_fonts(page: Any, textpage: Any) -> dict[str, str]:
    """The fonts of the page's text objects (in forms too) and the text set in each, by PDFium."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    texts: dict[str, list[str]] = {}
    name = ctypes.create_string_buffer(256)
    for text_object in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_TEXT,)):
        length = pdfium_c.FPDFTextObj_GetText(text_object.raw, textpage.raw, None, 0)
        buffer = (ctypes.c_ushort * (length // 2 + 1))()
        pdfium_c.FPDFTextObj_GetText(text_object.raw, textpage.raw, buffer, length)
        text = bytes(buffer)[:max(length - 2, 0)].decode("utf-16-le", "replace")
        texts.setdefault(_font_name(text_object.raw, name), []).append(text)
    return {font: "\n".join(parts) for font, parts in texts.items()}


def _font_runs(textpage: Any, row: str, offset: int) -> list[tuple[str, str]]:
    """``row`` (the page's characters from ``offset``) cut where the font changes: ``[(text, font name)]``; a space
    or a character PDFium generated belongs to the run before it. The font is asked once per text object."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    runs: list[tuple[str, str]] = []
    buffer = ctypes.create_string_buffer(256)
    last_object, last_font = None, ""
    for i, char in enumerate(row):
        font = ""
        if not char.isspace():
            text_object = pdfium_c.FPDFText_GetTextObject(textpage.raw, offset + i)
            address = ctypes.cast(text_object, ctypes.c_void_p).value
            if address is not None and address == last_object:
                font = last_font
            elif address is not None:
                font = _font_name(text_object, buffer)
                last_object, last_font = address, font
        if runs and (not font or font == runs[-1][1]):
            runs[-1] = (runs[-1][0] + char, runs[-1][1])
        elif runs and not runs[-1][1]:
            runs[-1] = (runs[-1][0] + char, font)
        else:
            runs.append((char, font))
    return runs


def _shaped_lines(textpage: Any, text: str) -> list[Line]:
    """Lines rebuilt from PDFium's characters: unmapped glyphs (the extra glyphs of a shaped cluster) left out,
    whitespace PDFium invented inside a line dropped, a space put where glyphs stand a space apart, marks placed."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    raw = textpage.raw
    count = textpage.count_chars()
    if len(text) != count:  # characters beyond the BMP: one at a time
        text = "".join(chr(pdfium_c.FPDFText_GetUnicode(raw, i)) for i in range(count))
    unmapped = [bool(pdfium_c.FPDFText_HasUnicodeMapError(raw, i)) for i in range(count)]
    edges = [ctypes.c_double() for _ in range(4)]
    refs = [ctypes.byref(e) for e in edges]

    def box(i: int) -> tuple[float, float, float, float]:  # left, right, bottom, top
        pdfium_c.FPDFText_GetCharBox(raw, i, *refs)
        return edges[0].value, edges[1].value, edges[2].value, edges[3].value

    lines: list[Line] = []
    items: list[tuple[str, tuple[float, float] | None]] = []  # the line's characters and their horizontal extent
    size, right, span = 0.0, None, None  # span: the line's (bottom, top) so far

    def end_line() -> None:
        nonlocal items, size, right, span
        lines.append(Line(_place_marks(items), size))
        items, size, right, span = [], 0.0, None, None

    index = 0
    while index < count:
        char = text[index]
        if char.isspace() and not unmapped[index]:
            generated = bool(pdfium_c.FPDFText_IsGenerated(raw, index))
            end = index + 1
            while (end < count and text[end].isspace() and not unmapped[end]
                   and bool(pdfium_c.FPDFText_IsGenerated(raw, end)) == generated):
                end += 1
            same_line = False
            if generated and span is not None:
                following = next((j for j in range(end, count) if not unmapped[j] and not text[j].isspace()), None)
                if following is not None:
                    _, _, bottom, top = box(following)
                    same_line = bottom < span[1] and top > span[0]
            if same_line:
                pass  # PDFium's guess inside a line (a shaped cluster): the gap test below decides on a space
            elif "\n" in text[index:end] or "\r" in text[index:end]:
                end_line()
            else:
                items.append((" ", None))
                right = None
            index = end
            continue
        left, char_right, bottom, top = box(index)
        span = (bottom, top) if span is None else (min(span[0], bottom), max(span[1], top))
        if not unmapped[index]:  # an unmapped glyph is drawn but is not text; it still takes its place on the line
            if not size:
                size = pdfium_c.FPDFText_GetFontSize(raw, index)
            if right is not None and left - right > SPACE_GAP * size and not is_indic_sign(char):
                items.append((" ", None))
            items.append((char, (left, char_right)))
        right = char_right if right is None else max(right, char_right)
        index += 1
    end_line()
    return [line for line in lines if line.text]


def _has_unmapped_glyphs(textpage: Any) -> bool:
    """Whether the PDF left glyphs of this page without a Unicode map (its writer mapped a shaped cluster's text to
    one glyph and left the others out): only the characters rebuilt by ``_shaped_lines`` read such a page right."""
    import pypdfium2.raw as pdfium_c

    return any(pdfium_c.FPDFText_HasUnicodeMapError(textpage.raw, i) for i in range(textpage.count_chars()))


@cache
def poppler_version() -> str | None:
    """``pdftotext``'s version (Debian poppler-utils), or None when it is not installed."""
    if not shutil.which("pdftotext"):
        return None
    result = subprocess.run(["pdftotext", "-v"], capture_output=True, text=True, check=False)
    found = re.search(r"version ([\d.]+)", result.stderr + result.stdout)
    return found.group(1) if found else "?"


def _poppler_lines(path: Path, pages: int) -> list[list[Line]] | None:
    """Each page's lines by poppler's ``pdftotext -bbox-layout``, sized by their height; None if it fails."""
    from lxml import etree

    try:
        result = subprocess.run(["pdftotext", "-bbox-layout", "-enc", "UTF-8", str(path), "-"], capture_output=True,
                                check=True, timeout=POPPLER_TIMEOUT)
        root = etree.fromstring(result.stdout, etree.XMLParser(recover=True, huge_tree=True))
    except (OSError, subprocess.SubprocessError, etree.XMLSyntaxError):
        return None
    found = []
    for page in root.iter("{*}page"):
        lines = []
        for line in page.iter("{*}line"):
            words = [w.text.strip() for w in line.iter("{*}word") if w.text and w.text.strip()]
            if words:
                lines.append(Line(" ".join(words), round(float(line.get("yMax")) - float(line.get("yMin")), 1)))
        found.append(lines)
    return found if len(found) == pages else None


def _open(path: Path) -> Any:
    import pypdfium2

    try:
        return pypdfium2.PdfDocument(str(path))  # an owner-only password opens with the empty user password
    except pypdfium2.PdfiumError as exc:
        if getattr(exc, "err_code", None) == PDFIUM_PASSWORD_ERROR:
            raise UserError(f"{path}: encrypted PDF that needs a password to open; {DECRYPT_FIX}") from None
        raise UserError(f"{path}: unreadable PDF ({exc})") from None
    except OSError as exc:
        raise UserError(f"{path}: unreadable PDF ({exc.strerror or exc})") from None


def _outline(document: Any) -> dict[int, list[tuple[int, str]]]:
    """``{page number: [(level, title)]}`` of the PDF's bookmarks, in document order."""
    entries: dict[int, list[tuple[int, str]]] = {}
    for bookmark in document.get_toc():
        destination = bookmark.get_dest()
        index = destination.get_index() if destination is not None else None
        title = " ".join((bookmark.get_title() or "").split())
        if index is not None and title:
            entries.setdefault(index + 1, []).append((bookmark.level, title))
    return entries


def _note(report: FileReport, page: int, kind: str, detail: str, *, confidence: float | None = None,
          encoding: str | None = None, language: str | None = None) -> None:
    report.page_notes.append({"page": page, "kind": kind, "detail": detail, "confidence": confidence,
                              "encoding": encoding, "language": language})


def _image_page(page: Any, number: int, report: FileReport, ocr_langs: str | None, limits: InputLimits
                ) -> list[Line]:
    """An image-only page: blank, OCR'd, or (no Tesseract) flagged with the command that installs it; rendered at
    ``ocr.OCR_DPI``, or lower (and noted) when that image would be larger than the pixel budget."""
    width, height = page.get_size()
    dpi = pdf_bounds.render_dpi(width, height, ocr.OCR_DPI, limits)
    if dpi < ocr.OCR_DPI:
        _note(report, number, "downscaled", f"page of {width / 72:,.0f} x {height / 72:,.0f} in rendered at "
              f"{dpi:.0f} dpi, not {ocr.OCR_DPI}, to stay within the pixel budget (--max-page-mpx "
              f"{limits.max_page_mpx:g})")
    image = page.render(scale=dpi / 72, grayscale=True).to_pil()
    if ocr.is_blank(image):
        _note(report, number, "blank", f"blank page ({ocr.ink_share(image):.2%} ink once rules are taken out)")
        return []
    if not ocr.installed_languages():
        report.pages_without_text.append(number)
        _note(report, number, "image_only", f"no text layer and no {ocr.ENGINE.name} to read it: "
              f"{ocr.ENGINE.install_command}")
        return []
    try:
        result = ocr.read_page(image, ocr_langs, dpi=dpi)
    except ocr.MissingPack as exc:
        report.pages_without_text.append(number)
        _note(report, number, "image_only", f"no text layer: {exc}")
        return []
    except ocr.ENGINE.errors as exc:
        report.pages_without_text.append(number)
        _note(report, number, "image_only", f"no text layer and {ocr.ENGINE.name} failed on it ({exc})")
        return []
    if result.words < ocr.BLANK_WORDS_FEWER_THAN:
        _note(report, number, "blank", f"no writing but {result.text!r} (lined or notes page)",
              language=result.language, confidence=result.confidence)
        return []
    low = result.confidence is not None and result.confidence < ocr.LOW_CONFIDENCE
    _note(report, number, "ocr", f"OCR'd by {ocr.ENGINE.name} ({result.words} words"
          f"{f'; turned {result.rotated} degrees clockwise to stand upright (OSD)' if result.rotated else ''}"
          f"{'; LOW CONFIDENCE: check the text' if low else ''})", confidence=result.confidence,
          language=result.language)
    rows = [row for row in result.text.split("\n") if row.strip()]
    return [Line(row, size) for row, size in zip(rows, result.line_sizes, strict=True)]


def _decoded(text: str, encoding: str) -> str:
    """A run's text in Unicode, the spaces around it kept (hinlegacy drops them; they part it from the next run)."""
    core = text.strip()
    return text[:len(text) - len(text.lstrip())] + legacy_fonts.decode(core, encoding) + text[len(text.rstrip()):]


def _by_font(lines: list[Line], number: int, report: FileReport) -> list[Line]:
    """A page's lines with exactly the runs set in a legacy Hindi font converted: the fonts whose name tells it, and
    (flagged) the fonts whose runs together carry a legacy encoding's signature; English and Unicode runs as set."""
    fonts: dict[str, list[str]] = {}
    for line in lines:
        for text, font in line.runs or []:
            fonts.setdefault(font, []).append(text)
    converted: dict[str, str] = {}
    by_signature: set[str] = set()
    for font, texts in fonts.items():
        encoding = legacy_fonts.font_encoding(font)
        if not encoding:  # a font whose name does not tell: its runs together, by their signature
            encoding = legacy_fonts.detect("\n".join(texts))
            if encoding and legacy_fonts.convert("\n".join(texts), encoding) is None:
                encoding = None
            by_signature.update([font] if encoding else [])
        if encoding:
            converted[font] = encoding
    if not converted:
        return lines
    result = []
    for line in lines:
        pieces = [_decoded(text, converted[font]) if font in converted else text
                  for text, font in line.runs or [(line.text, "")]]
        result.append(Line(" ".join("".join(pieces).split()), line.size, line.runs))
    described = [f"{font or 'a font without a name'} ({encoding}, {len(fonts[font])} run(s)"
                 f"{f'; {BY_SIGNATURE}' if font in by_signature else ''})" for font, encoding in converted.items()]
    _note(report, number, "legacy_font", "legacy Hindi font(s) converted to Unicode by hinlegacy, other runs as set: "
          + "; ".join(described), encoding="/".join(dict.fromkeys(converted.values())), language="hi")
    return result


def _checked(lines: list[Line], number: int, report: FileReport) -> list[Line]:
    """A text page's lines, the runs in a legacy Hindi font converted (by font where PDFium gave the fonts, else by
    the page's signature), its problems noted."""
    if any(line.runs is not None for line in lines):
        lines = _by_font(lines, number, report)
        problems = page_problems("\n".join(line.text for line in lines))
        if problems:
            _note(report, number, "suspect_text", "; ".join(problems))
        return lines
    text = "\n".join(line.text for line in lines)
    encoding = legacy_fonts.detect(text)
    if encoding:
        converted = legacy_fonts.convert(text, encoding)
        if converted is not None:
            rows = converted.split("\n")
            sizes = [line.size for line in lines] if len(rows) == len(lines) else [0.0] * len(rows)
            lines = [Line(row, size) for row, size in zip(rows, sizes, strict=True)]
            _note(report, number, "legacy_font", f"legacy Hindi font converted to Unicode by hinlegacy "
                  f"({legacy_fonts.devanagari_share(converted):.0%} Devanagari letters)", encoding=encoding,
                  language="hi")
            text = converted
    problems = page_problems(text)
    if problems:
        _note(report, number, "suspect_text", "; ".join(problems))
    return lines


def _heading_levels(pages: list[list[Line]]) -> tuple[float, list[float]]:
    """The smallest heading size (``HEADING_SIZE`` x the size half the text is set in or below) and the size of
    each heading level, largest first; sizes within ``LEVEL_STEP`` of a level's largest belong to it."""
    sized = sorted((line.size, len(line.text)) for lines in pages for line in lines if line.size)
    if not sized:
        return 0.0, []
    half, seen, body = sum(n for _, n in sized) / 2, 0, sized[-1][0]
    for size, n in sized:
        seen += n
        if seen >= half:
            body = size
            break
    levels: list[float] = []
    for size in sorted({size for size, _ in sized if size >= HEADING_SIZE * body}, reverse=True):
        if not levels or size < LEVEL_STEP * levels[-1]:
            levels.append(size)
    return HEADING_SIZE * body, levels


def _sections(pages: list[list[Line]], outline: dict[int, list[tuple[int, str]]]) -> list[Section]:
    """Sections under their heading path: the outline's titles where the PDF has one, else large-font lines."""
    from pipeline.dataset.ingest import Section

    smallest, levels = (0.0, []) if outline else _heading_levels(pages)
    sections: list[Section] = []
    path: list[str] = []

    def add(text: str, page: int) -> None:
        if not text.strip():
            return
        if not sections or sections[-1].headings != path:
            sections.append(Section("", list(path), []))
        section = sections[-1]
        if section.text:
            section.text += "\n\n"
        if not section.page_starts or section.page_starts[-1][1] != page:
            section.page_starts.append((len(section.text), page))
        section.text += text.strip()

    for number, lines in enumerate(pages, 1):
        titles = {" ".join(t.split()): level for level, t in outline.get(number, [])}
        on_page = {line.text for line in lines}
        for level, title in outline.get(number, []):
            if title not in on_page:
                path = [*path[:level], title]
        buffer: list[str] = []
        previous: int | None = None  # the level of the line before when it was a heading set by size
        for line in lines:
            level = titles.get(line.text)
            by_size = level is None and line.size and len(line.text) <= HEADING_MAX_CHARS
            if by_size:
                level = next((n for n, s in enumerate(levels) if line.size >= max(LEVEL_STEP * s, smallest)), None)
            if by_size and level is not None and level == previous and len(path) == level + 1:
                path = [*path[:level], f"{path[level]} {line.text}"]  # a heading wrapped onto a second line
            elif level is not None:
                add("\n".join(buffer), number)
                buffer = []
                path = [*path[:level], line.text]
            previous = level if by_size else None
            buffer.append(line.text)
        add("\n".join(buffer), number)
    for section in sections:
        section.text = section.text.strip()
    return [s for s in sections if s.text]


@contextmanager
def _loaded(document: Any, index: int, path: Path, limits: InputLimits) -> Iterator[tuple[Any, Any]]:
    """Page ``index`` and its text page, closed after use so that one page's parsed content is held at a time; the
    ingest's memory checked while the page is still loaded (``--max-memory-mb``)."""
    page = document[index]
    textpage = page.get_textpage()
    try:
        yield page, textpage
        bounds.check_memory(path, f"page {index + 1}", limits)
    finally:
        textpage.close()
        page.close()


def read_pdf(path: Path, report: FileReport, options: PdfOptions = PdfOptions(),
             limits: InputLimits = InputLimits()) -> list[Section]:
    """The sections of a PDF (image-only pages OCR'd in ``options.ocr_langs``, or the script detected); pages noted
    in ``report.page_notes``; ``UserError`` naming the file if unreadable or a page is beyond ``limits``
    (``pdf_bounds``)."""
    import pypdfium2

    report.engine = engine_name()
    limits = bounds.begun(limits)  # called alone, --max-memory-mb counts what this read adds
    pdf_bounds.check_pages(path, limits)
    document = _open(path)
    try:
        outline = _outline(document)
        report.pages = len(document)
        # one page loaded at a time (PDFium keeps a loaded page's parsed content): Indian-script pages are read after
        # the choice of engine, the others now
        texts, found, unmapped = [], [], False
        for n in range(len(document)):
            with _loaded(document, n, path, limits) as (page, textpage):
                # PDFium gives a hyphen ending a line as U+FFFE: it is the hyphen the PDF drew (DevLys "ia-": "पं.")
                texts.append(textpage.get_text_range().replace("\ufffe", "-"))
                indic = bool(_INDIC.search(texts[-1]))
                unmapped = unmapped or (indic and _has_unmapped_glyphs(textpage))
                found.append(None if indic else _page_lines(textpage, texts[-1], page))
        poppler = None
        if None in found and not unmapped:
            poppler = _poppler_lines(path, len(document)) if poppler_version() else None
            if poppler is None:
                report.flags.append("Indian-script text read by pypdfium2 alone: poppler's pdftotext, which reads "
                                    "it best, is missing or failed (sudo apt-get install -y poppler-utils)")
            else:
                report.engine += f" + poppler pdftotext {poppler_version()}"
                found = list(poppler)
        for n in (n for n, lines in enumerate(found) if lines is None):
            with _loaded(document, n, path, limits) as (page, textpage):
                found[n] = _page_lines(textpage, texts[n], page)
        scans = [n for n, lines in enumerate(found, 1) if sum(len(line.text) for line in lines) < MIN_PAGE_CHARS]
        cap = limits.max_ocr_pages
        read = set(scans if cap is None else scans[:cap])
        shown = ocr.progress(path.name, len(read)) if read and ocr.installed_languages() else nullcontext(
            lambda: None)
        pages: list[list[Line]] = []
        with shown as step:
            for number, lines in enumerate(found, 1):
                if number in read:
                    with _loaded(document, number - 1, path, limits) as (page, _):
                        lines = _image_page(page, number, report, options.ocr_langs, limits)
                    step()
                elif number in scans:
                    report.pages_without_text.append(number)
                    _note(report, number, "image_only", f"no text layer, not OCR'd: the document's first {cap} "
                          f"image-only pages were (--max-ocr-pages {cap})")
                    lines = []
                else:
                    lines = _checked(lines, number, report)
                pages.append(lines)
    except pypdfium2.PdfiumError as exc:
        raise UserError(f"{path}: unreadable PDF ({exc})") from None
    finally:
        document.close()
    _summarise(report)
    return _sections(pages, outline)


def _summarise(report: FileReport) -> None:
    """One flag line per kind of page note, for the console table."""
    by_kind: dict[str, list[int]] = {}
    for note in report.page_notes:
        by_kind.setdefault(note["kind"], []).append(note["page"])
    words = {"ocr": "OCR'd by Tesseract", "legacy_font": "legacy Hindi font converted",
             "blank": "blank", "suspect_text": "suspect text (see page_notes)",
             "downscaled": f"rendered below {ocr.OCR_DPI} dpi for OCR (larger than --max-page-mpx; see page_notes)"}
    low = [n["page"] for n in report.page_notes if n["kind"] == "ocr" and n["confidence"] is not None
           and n["confidence"] < ocr.LOW_CONFIDENCE]
    if low:
        report.flags.append(f"page(s) {', '.join(map(str, low))}: low OCR confidence (below "
                            f"{ocr.LOW_CONFIDENCE:.0f}): check their text")
    guessed = [n["page"] for n in report.page_notes if n["kind"] == "legacy_font" and BY_SIGNATURE in n["detail"]]
    if guessed:
        report.flags.append(f"page(s) {', '.join(map(str, guessed))}: legacy Hindi text in a font whose name does not "
                            "tell it, converted by its signature: check the text")
    for kind, pages in by_kind.items():
        if kind == "image_only":
            reasons = dict.fromkeys(n["detail"].split(": ", 1)[-1] for n in report.page_notes if n["kind"] == kind)
            report.flags.append(f"no text layer on page(s) {', '.join(map(str, pages))} (scanned?): not ingested; "
                                + "; ".join(reasons))
        else:
            report.flags.append(f"page(s) {', '.join(map(str, pages))}: {words[kind]}")
