"""PDF ingestion: which engine reads Indian scripts right, what the new reader costs, and OCR seconds per page.

1. **Engines.** The project's leaflets in Devanagari (Hindi), Tamil, Telugu, Kannada and Bengali, written by
   two PDF writers (tests/support/kb_sources.py: fpdf2 with HarfBuzz shaping, and headless Chromium printing an
   HTML page; Debian's Noto fonts), read by: the studio's reader (pipeline/dataset/pdf.py), pypdfium2's own page
   text, pdfminer.six (through pdfplumber), pypdf, and poppler's ``pdftotext``. Figure: the share of the source
   text's words (the text the PDF was made from) found intact, and milliseconds per page (median of 3).
2. **ingest-kb without OCR** on a few hundred generated text pages (English, Hindi, Tamil, Telugu, Kannada,
   Bengali), in-process ``ingest`` (reading, splitting, token counting, writing), with the former reader (pypdf,
   one ``extract_text`` per page) and the new one, alternated, 3 runs each; median seconds and the ratio.
3. **OCR**: seconds per page of an image-only Hindi page through Tesseract, with its script detection (OSD) and
   with ``--ocr-langs hin+eng``.

Every figure carries the 1-minute load average (2 shared cores). Writes bench/results/ingest.json.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.dataset import ocr  # noqa: E402
from pipeline.dataset.ingest import FileReport, Section, ingest  # noqa: E402
from pipeline.dataset.pdf import read_pdf  # noqa: E402
from pipeline.formats import FORMATS  # noqa: E402
from tests.support.kb_sources import (  # noqa: E402
    INDIC_LEAFLETS,
    PREOP_PAGES,
    SCRIPT_FONTS,
    write_browser_pdf,
    write_image_only_pdf,
    write_indic_pdf,
    write_pdf,
)

RESULTS = ROOT / "bench" / "results" / "ingest.json"
REPEATS = 3
COPIES = 25  # every leaflet repeated: 25 x (3 English + 7 Indian-script pages) = 250 pages


def load() -> float:
    return round(os.getloadavg()[0], 2)


def words(text: str) -> Counter:
    return Counter(re.findall(r"[\w\u0900-\u0DFF]+", unicodedata.normalize("NFC", text)))


def intact(source: Counter, text: str) -> float:
    return round(sum((source & words(text)).values()) / sum(source.values()), 3)


# -- the engines -------------------------------------------------------------------------------------------
def studio(path: Path) -> list[str]:
    report = FileReport(path.name, "", "pdf")
    return [s.text for s in read_pdf(path, report)]


def pdfium_plain(path: Path) -> list[str]:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    pages = [page.get_textpage().get_text_bounded() for page in document]
    document.close()
    return pages


def pdfminer(path: Path) -> list[str]:
    import pdfplumber

    with pdfplumber.open(path) as pdf:
        return [page.extract_text() or "" for page in pdf.pages]


def pypdf_pages(path: Path) -> list[str]:
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def poppler(path: Path) -> list[str]:
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout.split("\f")


ENGINES = {"studio (pypdfium2 + poppler)": studio, "pypdfium2 get_text_bounded": pdfium_plain,
           "pdfminer.six (pdfplumber)": pdfminer, "pypdf": pypdf_pages, "poppler pdftotext": poppler}


WRITERS = {"fpdf2": write_indic_pdf, "chromium": write_browser_pdf}


def compare_engines(folder: Path) -> list[dict]:
    rows = []
    for (writer, write), language in itertools.product(WRITERS.items(), sorted(SCRIPT_FONTS)):
        if writer == "chromium" and not shutil.which("chromium"):
            continue
        path = write(folder / writer / f"{language}.pdf", language)
        source = words(" ".join(f"{h} {' '.join(ps)}" for h, ps in INDIC_LEAFLETS[language]))
        pages = len(INDIC_LEAFLETS[language])
        for name, read in ENGINES.items():
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                text = "\n".join(read(path))
                times.append(time.perf_counter() - start)
            rows.append({"writer": writer, "language": language, "engine": name, "words_intact": intact(source, text),
                         "ms_per_page": round(1000 * statistics.median(times) / pages, 1), "load_1min": load()})
    return rows


# -- ingest-kb, former reader against the new one -----------------------------------------------------------
def pypdf_reader(path: Path, report: FileReport, options: Any, limits: Any) -> list[Section]:
    """The reader ingest.py had before pipeline/dataset/pdf.py: pypdf, one extract_text per page."""
    from pypdf import PdfReader

    pages = [page.extract_text() or "" for page in PdfReader(path).pages]
    report.pages = len(pages)
    text, starts = "", []
    for number, page_text in enumerate(pages, 1):
        if len(page_text.strip()) < 20:
            report.pages_without_text.append(number)
            continue
        starts.append((len(text), number))
        text += page_text.strip() + "\n\n"
    return [Section(text.strip(), [], starts)] if text.strip() else []


def corpus(folder: Path) -> tuple[Path, int]:
    sources = folder / "corpus"
    write_pdf(sources / "en.pdf", PREOP_PAGES * COPIES)
    pages = len(PREOP_PAGES) * COPIES
    for language in sorted(SCRIPT_FONTS):
        write_indic_pdf(sources / f"{language}.pdf", language, INDIC_LEAFLETS[language] * COPIES)
        pages += len(INDIC_LEAFLETS[language]) * COPIES
    return sources, pages


def time_ingest(folder: Path) -> dict:
    sources, pages = corpus(folder)
    now_format = FORMATS["pdf"]
    before_format = replace(now_format, reader=f"{__name__}:pypdf_reader")  # this module's former reader
    seconds: dict[str, list[float]] = {"pypdf (before)": [], "pypdfium2 (now)": []}
    ingest([sources], folder / "warm")  # tokenizer and libraries loaded once, outside the timings
    for run in range(REPEATS):
        for name, document_format in (("pypdf (before)", before_format), ("pypdfium2 (now)", now_format)):
            start = time.perf_counter()
            ingest([sources], folder / f"out-{name[:5]}-{run}", formats={**FORMATS, "pdf": document_format})
            seconds[name].append(time.perf_counter() - start)
    before, now = (statistics.median(seconds[k]) for k in seconds)
    return {"pages": pages, "seconds_before": round(before, 2), "seconds_now": round(now, 2),
            "ratio": round(now / before, 2), "runs": {k: [round(v, 2) for v in vs] for k, vs in seconds.items()},
            "load_1min": load()}


def time_ocr(folder: Path) -> list[dict]:
    import pypdfium2

    path = write_image_only_pdf(folder / "scan.pdf", "hi", INDIC_LEAFLETS["hi"], blank_pages=0)
    document = pypdfium2.PdfDocument(str(path))
    rows = []
    for label, languages in (("script detected (OSD)", None), ("--ocr-langs hin+eng", "hin+eng")):
        times, confidences = [], []
        for page in document:
            start = time.perf_counter()
            image = page.render(scale=ocr.OCR_DPI / 72, grayscale=True).to_pil()
            result = ocr.read_page(image, languages)
            times.append(time.perf_counter() - start)
            confidences.append(result.confidence)
        rows.append({"mode": label, "pages": len(times), "seconds_per_page": round(statistics.mean(times), 2),
                     "mean_confidence": round(statistics.mean(confidences), 1), "load_1min": load()})
    document.close()
    return rows


def main() -> None:
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        engines = compare_engines(folder)
        timing = time_ingest(folder)
        ocr_rows = time_ocr(folder)
    result = {"engines": engines, "ingest_without_ocr": timing, "ocr": ocr_rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    for writer in dict.fromkeys(r["writer"] for r in engines):
        table = Table(title=f"PDF engines on {writer}'s PDFs: share of the source's words intact (ms per page)")
        table.add_column("engine")
        for language in sorted(SCRIPT_FONTS):
            table.add_column(language, justify="right")
        for name in ENGINES:
            cells = {r["language"]: f"{r['words_intact']:.3f} ({r['ms_per_page']:.0f})" for r in engines
                     if r["engine"] == name and r["writer"] == writer}
            table.add_row(name, *(cells[lang] for lang in sorted(SCRIPT_FONTS)))
        console.print(table)
    console.print(f"ingest-kb without OCR, {timing['pages']} pages: before (pypdf) {timing['seconds_before']} s, "
                  f"now (pypdfium2) {timing['seconds_now']} s, ratio {timing['ratio']} (load {timing['load_1min']})")
    for row in ocr_rows:
        console.print(f"OCR, {row['mode']}: {row['seconds_per_page']} s/page over {row['pages']} pages, mean "
                      f"confidence {row['mean_confidence']} (load {row['load_1min']})")
    console.print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
