"""Figures of the PDF reader on real public legacy-font PDFs (not committed: see docs/ingest.md for where each comes
from), measured against an independent reading of the same file: pypdf's text with each piece's font.

Per page: ``hindi`` is the share of Devanagari among the letters of the studio's text once the words set in a
Latin font are taken out (a legacy run left unconverted counts its Latin letters against it); ``english`` is the
share of the words set in a font that is not a legacy one (Latin words of two letters or more) found intact in the
studio's text. Files live in ``REAL_LEGACY_PDFS`` (git-ignored); ``bench/bench_legacy_pdf.py`` prints the figures.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

REAL_LEGACY_PDFS = Path(__file__).resolve().parents[2] / "bench" / "data" / "real-legacy-pdf"
_LATIN = re.compile(r"[A-Za-z][A-Za-z'’]+")


def _fonts_text(path: Path) -> list[list[tuple[str, str]]]:
    """Each page's text pieces and their font (BaseFont), by pypdf."""
    from pypdf import PdfReader

    pages = []
    for page in PdfReader(path).pages:
        pieces: list[tuple[str, str]] = []

        def visit(text: str, _cm: Any, _tm: Any, font: Any, _size: Any, pieces=pieces) -> None:
            if text.strip():
                pieces.append((text, str((font or {}).get("/BaseFont", ""))))

        page.extract_text(visitor_text=visit)
        pages.append(pieces)
    return pages


def page_figures(path: Path) -> list[dict[str, Any]]:
    """Per page of ``path``: the studio's Hindi share and English words intact (see the module's docstring)."""
    from pipeline.dataset.ingest import FileReport
    from pipeline.dataset.legacy_fonts import font_encoding
    from pipeline.dataset.pdf import read_pdf

    report = FileReport(path.name, "", "pdf")
    sections = read_pdf(path, report)
    by_page: dict[int, str] = {}
    for section in sections:
        starts = [*section.page_starts, (len(section.text), 0)]
        for (start, page), (end, _) in itertools.pairwise(starts):
            by_page[page] = by_page.get(page, "") + "\n" + section.text[start:end]
    figures = []
    for number, pieces in enumerate(_fonts_text(path), 1):
        text = unicodedata.normalize("NFC", by_page.get(number, ""))
        english = Counter(w for piece, font in pieces if not font_encoding(font) for w in _LATIN.findall(piece))
        found = Counter(_LATIN.findall(text))
        intact = sum((english & found).values()) / sum(english.values()) if english else 1.0
        rest = text
        for word in english:
            rest = re.sub(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", " ", rest)
        letters = [c for c in rest if c.isalpha() or 0x0900 <= ord(c) <= 0x097F]
        hindi = sum(0x0900 <= ord(c) <= 0x097F for c in letters) / len(letters) if letters else None
        legacy_fonts = sorted({font for _, font in pieces if font_encoding(font)})
        figures.append({"page": number, "hindi": hindi, "english": intact, "english_words": sum(english.values()),
                        "legacy_fonts": legacy_fonts})
    return figures
