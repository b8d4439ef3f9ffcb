"""Image-only PDF pages: blank or ruled pages told apart by their pixels, the others read by Tesseract through
pytesseract, turned upright and in the language its orientation and script detection (OSD) finds, or the one the
user names (``--ocr-langs``); a script whose Tesseract pack is missing is named with its install command instead of
being read as gibberish. ``progress`` shows OCR's progress and estimate (rich)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

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


# what Tesseract raises on a page it cannot read: pytesseract's TesseractError is a RuntimeError and its
# TesseractNotFoundError an OSError, so pytesseract is imported only where OCR runs (a PDF without scans needs none)
OCR_ERRORS = (OSError, RuntimeError)


class MissingPack(Exception):
    """OSD found a script whose Tesseract language pack is not installed, or OSD's own pack is missing: the message
    names the install command."""

    def __init__(self, what: str, language: str) -> None:
        super().__init__(f"{what}, and Tesseract has no {language} pack to read it: "
                         f"sudo apt-get install -y tesseract-ocr-{language} (or give --ocr-langs)")


@dataclass
class OcrPage:
    """What Tesseract read on one page."""

    text: str
    confidence: float | None  # mean word confidence, 0-100
    language: str  # the Tesseract languages used, e.g. "hin+eng"
    words: int
    line_sizes: list[float] = field(default_factory=list)  # each line's median word height in points
    rotated: int = 0  # degrees the page image was turned (clockwise) to stand upright, by OSD


@cache
def installed_languages() -> frozenset[str]:
    """Tesseract's installed language packs; empty when Tesseract is missing."""
    import pytesseract

    try:
        return frozenset(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractNotFoundError, OSError, RuntimeError):
        return frozenset()


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


def orientation(image: Any) -> tuple[int, str | None]:
    """Tesseract's OSD of a page: the degrees to turn it clockwise to stand upright (0 unless OSD is confident) and
    the script it is written in (None when there is too little text to tell)."""
    import pytesseract

    try:
        osd = pytesseract.image_to_osd(image, config="--psm 0")
    except pytesseract.TesseractError:  # too little text for orientation and script detection
        return 0, None
    rotate = re.search(r"Rotate: (\d+)", osd)
    confidence = re.search(r"Orientation confidence: ([\d.]+)", osd)
    script = re.search(r"Script: (\w+)", osd)
    upright = not rotate or not confidence or float(confidence.group(1)) < ROTATION_CONFIDENCE_AT_LEAST
    return 0 if upright else int(rotate.group(1)) % 360, script.group(1) if script else None


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


def read_page(image: Any, requested: str | None = None, *, dpi: float = OCR_DPI) -> OcrPage:
    """The page's text by Tesseract (lines and paragraphs as it found them) and its mean word confidence, the page
    turned upright first; ``dpi``: the resolution the page image was rendered at (line heights are in points)."""
    import pytesseract

    rotated, script = orientation(image)
    if rotated:
        image = image.rotate(-rotated, expand=True)  # PIL turns counter-clockwise
    language = page_languages(script, requested)
    data = pytesseract.image_to_data(image, lang=language, output_type=pytesseract.Output.DICT)
    lines: dict[tuple[int, int, int], list[tuple[str, int]]] = {}
    confidences = []
    for i, word in enumerate(data["text"]):
        if not word.strip():
            continue
        key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
        lines.setdefault(key, []).append((word.strip(), data["height"][i]))
        if float(data["conf"][i]) >= 0:
            confidences.append(float(data["conf"][i]))
    text, previous, sizes = "", None, []
    for (block, par, _), words in lines.items():
        if previous is not None:
            text += "\n\n" if (block, par) != previous else "\n"
        text += " ".join(word for word, _ in words)
        sizes.append(round(statistics.median(height for _, height in words) * 72 / dpi, 1))
        previous = (block, par)
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
