"""Bounded PDFs (issue 44): peak memory and seconds of ``ingest-kb`` on a 2 MB PDF whose content stream inflates to 1
GiB (refused in one line), on one whose page content is just under ``--max-page-content-mb`` (accepted: the most
memory a page's content can cost PDFium) and on a 418-byte PDF of one 200 x 200-inch page (rendered for OCR within
the pixel budget), each in a fresh process; and what the pre-scan (``pipeline/dataset/pdf_bounds.py``) costs on an
ordinary document: ms per page of ``check_pages`` on the example's three-page PDF repeated to 300 pages.

Every figure carries the 1-minute load average (2 shared cores). Writes bench/results/pdf_bounds.json.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.dataset.pdf_bounds import check_pages  # noqa: E402
from pipeline.formats import InputLimits  # noqa: E402
from tests.support.kb_sources import PREOP_PAGES, write_huge_page_pdf, write_inflating_pdf, write_pdf  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "pdf_bounds.json"
MEASURED = ("import json, resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(json.dumps({'rc': r.returncode, 'stderr': r.stderr, 'seconds': time.perf_counter() - t,\n"
            "                  'peak_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")


def load() -> float:
    return round(os.getloadavg()[0], 2)


def ingest_measured(path: Path, out: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", MEASURED, sys.executable, "-m", "pipeline", "ingest-kb", str(path),
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True, check=True)
    outcome = json.loads(result.stdout)
    return {"file_bytes": path.stat().st_size, "exit_code": outcome["rc"],
            "stderr_lines": len([line for line in outcome["stderr"].splitlines() if line.strip()]),
            "peak_mb": round(outcome["peak_kb"] / 1024), "seconds": round(outcome["seconds"], 1), "load_1min": load()}


def main() -> None:
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows["inflating_1gib"] = ingest_measured(write_inflating_pdf(folder / "bomb.pdf", 1024), folder / "ds1")
        under = int(InputLimits().max_page_content_mb) - 1
        rows[f"content_{under}_mb"] = ingest_measured(write_inflating_pdf(folder / "dense.pdf", under), folder / "ds3")
        rows["four_pages_12_mb_each"] = ingest_measured(write_inflating_pdf(folder / "four.pdf", 12, pages=4),
                                                        folder / "ds4")
        rows["page_200_inches"] = ingest_measured(write_huge_page_pdf(folder / "poster.pdf", 200), folder / "ds2")
        document = write_pdf(folder / "long.pdf", PREOP_PAGES * 100)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            check_pages(document, InputLimits())
            times.append(time.perf_counter() - start)
        rows["prescan_300_pages"] = {"ms_per_page": round(1000 * statistics.median(times) / 300, 2),
                                     "load_1min": load()}
    for name, row in rows.items():
        print(name, json.dumps(row))
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), "ru_maxrss_self_mb":
                                   resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, **rows}, indent=1)
                       + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
