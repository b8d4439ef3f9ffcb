"""The PDF reader on real public legacy-font PDFs (issue 42): per file, the share of Devanagari letters in its
Hindi on every page and the share of the words set in Latin fonts found intact, measured against pypdf's reading of
the same file with each piece's font (``tests/support/real_pdfs.py``). The files are not committed (their licences
do not allow it); docs/ingest.md names where each comes from. Put them in bench/data/real-legacy-pdf/.

Every figure carries the 1-minute load average (2 shared cores). Writes bench/results/legacy_pdf.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.real_pdfs import REAL_LEGACY_PDFS, page_figures  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "legacy_pdf.json"


def main() -> None:
    files = sorted(REAL_LEGACY_PDFS.glob("*.pdf"))
    if not files:
        print(f"no real legacy-font PDFs in {REAL_LEGACY_PDFS} (see docs/ingest.md): nothing measured")
        return
    rows = []
    for path in files:
        start = time.perf_counter()
        figures = page_figures(path)
        seconds = time.perf_counter() - start
        hindi = [f["hindi"] for f in figures if f["hindi"] is not None]
        fonts = sorted({name for f in figures for name in f["legacy_fonts"]})
        rows.append({"file": path.name, "pages": len(figures), "fonts": fonts,
                     "hindi_min": round(min(hindi), 4), "hindi_median": round(statistics.median(hindi), 4),
                     "pages_hindi_at_least_0.95": sum(h >= 0.95 for h in hindi),
                     "english_words": sum(f["english_words"] for f in figures),
                     "english_intact_min": round(min(f["english"] for f in figures), 4),
                     "seconds": round(seconds, 1), "load_1min": round(os.getloadavg()[0], 2)})
        print(json.dumps(rows[-1], ensure_ascii=False))
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), "files": rows}, indent=1, ensure_ascii=False) + "\n",
                       encoding="utf-8")


if __name__ == "__main__":
    main()
