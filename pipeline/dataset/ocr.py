"""Image-only PDF pages: blank or ruled pages told apart by their pixels, the others read by an OCR engine, turned
upright and in the language its orientation and script detection (OSD) finds, or the one the user names
(``--ocr-langs``); a script whose language pack is missing is named with its install command instead of being read
as gibberish. ``progress`` shows OCR's progress and estimate (rich).

The engine is an ``OcrEngine``: what the reader needs of one (its installed languages, a page's orientation and
script, the words it reads with their line, height and confidence, its install command and its errors). Tesseract
through pytesseract is the implementation (``ENGINE``); pytesseract is imported only where OCR runs (a PDF without
scans needs none). What is the same whatever the engine — choosing the page's languages, turning it upright,
assembling lines and paragraphs, the mean confidence — is done here, once."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

OCR_DPI = 300
INK_LEVEL = 160  # a grey value below this is ink
RULE_ROW_INK = 0.3  # a pixel row (or column) this inked is a ruled line or a frame, not writing
BLANK_INK_AT_MOST = 0.0001  # share of inked pixels, rules removed, below which a page is blank (a line of text: ~0.1 %)
BLANK_WORDS_FEWER_THAN = 3  # an OCR'd page with fewer words is a blank or "NOTES" page
LOW_CONFIDENCE = 70.0  # Tesseract's mean word confidence (0-100) below which a page is flagged
OSD_SCRIPTS = {"Devanagari": "hin", "Tamil": "tam", "Telugu": "tel", "Kannada": "kan", "Bengali": "ben",
               "Gujarati": "guj", "Malayalam": "mal", "Gurmukhi": "pan", "Oriya": "ori", "Latin": "eng"}
ROTATION_CONFIDENCE_AT_LEAST = 2.0  # OSD's orientation confidence above which its rotation is applied
APT_PACKAGES = ("tesseract-ocr", "tesseract-ocr-osd", "tesseract-ocr-hin", "tesseract-ocr-mar", "tesseract-ocr-tam",
                "tesseract-ocr-tel", "tesseract-ocr-kan", "tesseract-ocr-ben", "tesseract-ocr-eng")
INSTALL_COMMAND = f"sudo apt-get install -y {' '.join(APT_PACKAGES)}"



class MissingPack(Exception):
    """OSD found a script whose Tesseract language pack is not installed, or OSD's own pack is missing: the message
    names the install command."""

    def __init__(self, what: str, language: str) -> None:
        super().__init__(f"{what}, and Tesseract has no {language} pack to read it: "
                         f"sudo apt-get install -y tesseract-ocr-{language} (or give --ocr-langs)")


@dataclass
class OcrPage:
    """What the engine read on one page."""

    text: str
    confidence: float | None  # mean word confidence, 0-100
    language: str  # the Tesseract languages used, e.g. "hin+eng"
    words: int
    line_sizes: list[float] = field(default_factory=list)  # each line's median word height in points
    rotated: int = 0  # degrees the page image was turned (clockwise) to stand upright, by OSD


@dataclass(frozen=True)
class OcrWord:
    """One word an engine read: its text, the (block, paragraph, line) it grouped it in, its height in pixels and
    its confidence (0-100; None when the engine gives none)."""

    text: str
    line: tuple[int, int, int]
    height: int
    confidence: float | None


class OcrEngine(Protocol):
    """What the PDF reader needs of an OCR engine."""

    name: str  # as the page notes say it ("Tesseract")
    install_command: str  # shown when the engine is missing
    errors: tuple[type[BaseException], ...]  # what it raises on a page it cannot read

    def languages(self) -> frozenset[str]:
        """Its installed language packs (``osd`` among them when it detects orientation); empty when missing."""

    def orientation(self, image: Any) -> tuple[int, float, str | None]:
        """Degrees to turn the page clockwise to stand upright, the confidence of that, and its script (OSD's
        names: ``Devanagari``, ``Tamil``, ``Latin``…); ``(0, 0.0, None)`` when there is too little text to tell."""

    def words(self, image: Any, language: str) -> list[OcrWord]:
        """The words of an upright page image read in ``language`` (``hin+eng``), in reading order."""


class Tesseract:
    """Tesseract through pytesseract (Debian's ``tesseract-ocr`` and its language packs)."""

    name = "Tesseract"
    install_command = INSTALL_COMMAND
    # pytesseract's TesseractError is a RuntimeError and its TesseractNotFoundError an OSError
    errors: tuple[type[BaseException], ...] = (OSError, RuntimeError)

    def languages(self) -> frozenset[str]:
        import pytesseract

        try:
            return frozenset(pytesseract.get_languages(config=""))
        except (pytesseract.TesseractNotFoundError, OSError, RuntimeError):
            return frozenset()

    def orientation(self, image: Any) -> tuple[int, float, str | None]:
        import pytesseract

        try:
            osd = pytesseract.image_to_osd(image, config="--psm 0")
        except pytesseract.TesseractError:  # too little text for orientation and script detection
            return 0, 0.0, None
        rotate = re.search(r"Rotate: (\d+)", osd)
        confidence = re.search(r"Orientation confidence: ([\d.]+)", osd)
        script = re.search(r"Script: (\w+)", osd)
        return (int(rotate.group(1)) % 360 if rotate else 0, float(confidence.group(1)) if confidence else 0.0,
                script.group(1) if script else None)

    def words(self, image: Any, language: str) -> list[OcrWord]:
        import pytesseract

        data = pytesseract.image_to_data(image, lang=language, output_type=pytesseract.Output.DICT)
        return [OcrWord(word.strip(), (data["block_num"][i], data["par_num"][i], data["line_num"][i]),
                        data["height"][i], float(data["conf"][i]) if float(data["conf"][i]) >= 0 else None)
                for i, word in enumerate(data["text"]) if word.strip()]


ENGINE: OcrEngine = Tesseract()


@cache
def installed_languages() -> frozenset[str]:
    """The engine's installed language packs; empty when it is missing."""
    return ENGINE.languages()


def check_languages(requested: str) -> None:
    """``UserError`` unless every language of ``requested`` (``hin+eng``) is an installed Tesseract language."""
    from pipeline.errors import UserError

    installed = installed_languages()
    if not installed:
        raise UserError(f"--ocr-langs {requested}: Tesseract is not installed; {INSTALL_COMMAND}")
    missing = [lang for lang in requested.split("+") if lang not in installed]
    if missing:
        raise UserError(f"--ocr-langs {requested}: {', '.join(missing)} not installed (installed: "
                        f"{'+'.join(sorted(installed - {'osd'}))}); install tesseract-ocr-{missing[0]}")


def ink_share(image: Any) -> float:
    """Share of inked pixels of a greyscale page image once ruled lines and frames are taken out."""
    import numpy as np

    ink = np.asarray(image.convert("L")) < INK_LEVEL
    ink = ink[ink.mean(axis=1) < RULE_ROW_INK][:, ink.mean(axis=0) < RULE_ROW_INK]
    return float(ink.mean()) if ink.size else 0.0


def is_blank(image: Any) -> bool:
    """A page with (almost) nothing on it but rules: a blank or lined "NOTES" page, not a scan to read."""
    return ink_share(image) < BLANK_INK_AT_MOST


def orientation(image: Any, engine: OcrEngine | None = None) -> tuple[int, str | None]:
    """The page's orientation and script (OSD): the degrees to turn it clockwise to stand upright (0 unless the
    engine is confident) and the script it is written in (None when there is too little text to tell)."""
    rotate, confidence, script = (engine or ENGINE).orientation(image)
    return (rotate if confidence >= ROTATION_CONFIDENCE_AT_LEAST else 0), script


def page_languages(script: str | None, requested: str | None) -> str:
    """Tesseract languages for a page: ``requested`` if given, else those of the script OSD detected (plus
    English); ``MissingPack`` when that script's pack is not installed."""
    if requested:
        return requested
    if "osd" not in installed_languages():
        raise MissingPack("the page's script and orientation not detected", "osd")
    language = OSD_SCRIPTS.get(script or "", "eng")
    if language not in installed_languages():
        raise MissingPack(f"{script or 'Latin'} script", language)
    return language if language == "eng" else f"{language}+eng"


def read_page(image: Any, requested: str | None = None, *, dpi: float = OCR_DPI,
              engine: OcrEngine | None = None) -> OcrPage:
    """The page's text (lines and paragraphs as the engine found them) and its mean word confidence, the page
    turned upright first; ``dpi``: the resolution the page image was rendered at (line heights are in points);
    ``engine``: ``ENGINE`` unless given."""
    engine = engine or ENGINE
    rotated, script = orientation(image, engine)
    if rotated:
        image = image.rotate(-rotated, expand=True)  # PIL turns counter-clockwise
    language = page_languages(script, requested)
    words = engine.words(image, language)
    lines: dict[tuple[int, int, int], list[OcrWord]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    text, previous, sizes = "", None, []
    for (block, par, _), line in lines.items():
        if previous is not None:
            text += "\n\n" if (block, par) != previous else "\n"
        text += " ".join(word.text for word in line)
        sizes.append(round(statistics.median(word.height for word in line) * 72 / dpi, 1))
        previous = (block, par)
    confidences = [w.confidence for w in words if w.confidence is not None]
    return OcrPage(text, round(sum(confidences) / len(confidences), 1) if confidences else None, language,
                   len(confidences), sizes, rotated)


@contextmanager
def progress(name: str, total: int) -> Iterator[Callable[[], None]]:
    """A rich progress bar with the time left for OCR of ``total`` pages of ``name``; yields its step."""
    from rich.markup import escape

    from pipeline import console

    bar = console.progress_bar(console.make_console(), label=f"OCR {escape(name)}")  # a file name is text, not markup
    with bar:
        task = bar.add_task("ocr", total=total)
        yield lambda: bar.advance(task)
