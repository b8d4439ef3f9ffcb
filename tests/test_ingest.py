"""ingest-kb: documents to token-bounded chunks with provenance, stable ids, identical re-runs, changed files
replacing their chunks, scanned pages flagged, and bad input as one line with nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.dataset.ingest import TOKENIZER_NAME, count_tokens, ingest
from tests.support.kb_sources import PREOP_PAGES, write_docx, write_pdf, write_scanned_pdf

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "data" / "raw-example"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture()
def sources(tmp_path: Path) -> Path:
    """A folder with a 3-page PDF, a DOCX, an HTML page, a Markdown file and a 2-page image-only PDF."""
    folder = tmp_path / "sources"
    write_pdf(folder / "preop-sop.pdf")
    write_docx(folder / "postop-care.docx")
    write_scanned_pdf(folder / "signed-consent.pdf")
    for name in ("eye-drops-faq.html", "insurance-and-costs.md"):
        shutil.copy(EXAMPLE / "sources" / name, folder / name)
    return folder


def kb(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "kb.jsonl").read_text(encoding="utf-8").splitlines()]


def test_chunks_fit_max_tokens_with_file_pages_and_scans_flagged(sources, tmp_path):
    out = tmp_path / "ds"
    report = ingest([sources], out, max_tokens=80, overlap=8)
    chunks = kb(out)
    assert report["tokenizer"] == TOKENIZER_NAME
    files = {c["provenance"]["source_file"] for c in chunks}
    assert files == {"preop-sop.pdf", "postop-care.docx", "eye-drops-faq.html", "insurance-and-costs.md",
                     "signed-consent.pdf"}
    for c in chunks:
        assert c["text"].strip()
        assert count_tokens(c["text"]) <= 80, c["chunk_id"]
        assert c["provenance"]["tokens"] == count_tokens(c["text"])
        assert len(c["provenance"]["sha256"]) == 64
    pdf = [c for c in chunks if c["source"] == "preop-sop.pdf"]
    assert {p for c in pdf for p in c["provenance"]["pages"]} == {1, 2, 3}
    assert all(c["provenance"]["pages"][0] <= c["provenance"]["pages"][1] for c in pdf)
    # the page a chunk names holds its text: page 3's heading is on page 3
    day = next(c for c in pdf if "On the day of surgery" in c["text"])
    assert day["provenance"]["pages"][0] == 3 == len(PREOP_PAGES)
    docx = [c for c in chunks if c["source"] == "postop-care.docx"]
    assert any(c["provenance"]["heading_path"] == ["After cataract surgery: care at home", "Eye drops"] for c in docx)
    html = " ".join(c["text"] for c in chunks if c["source"] == "eye-drops-faq.html")
    assert "Cookie settings" not in html and "Departments" not in html  # boilerplate dropped
    by_file = {r["file"]: r for r in report["files"]}
    scan = by_file["signed-consent.pdf"]  # image-only pages: OCR'd by Tesseract, each chunk says so
    assert [(n["page"], n["kind"]) for n in scan["page_notes"]] == [(1, "ocr"), (2, "ocr")]
    ocrd = [c for c in chunks if c["source"] == "signed-consent.pdf"]
    assert ocrd and all(c["provenance"]["ocr"] is True and c["provenance"]["ocr_confidence"] > 50 for c in ocrd)
    assert "Consent for cataract surgery" in ocrd[0]["text"]
    written = {r["file"]: r for r in json.loads((out / "ingest_report.json").read_text())["files"]}
    assert written["signed-consent.pdf"]["page_notes"] == scan["page_notes"]


def test_second_run_is_byte_identical_and_changed_file_replaces_its_chunks(sources, tmp_path):
    out = tmp_path / "ds"
    ingest([sources], out, max_tokens=120)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    ingest([sources], out, max_tokens=120)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    old = {c["chunk_id"] for c in kb(out) if c["source"] == "insurance-and-costs.md"}
    others = [c for c in kb(out) if c["source"] != "insurance-and-costs.md"]
    assert {c["source"] for c in others} == {"preop-sop.pdf", "postop-care.docx", "eye-drops-faq.html",
                                          "signed-consent.pdf"}  # the scan: OCR'd
    md = sources / "insurance-and-costs.md"
    md.write_text(md.read_text() + "\n## Cashless counter hours\n\nThe insurance desk is open 8 am to 6 pm.\n")
    report = ingest([md], out, max_tokens=120)
    after = kb(out)
    new = {c["chunk_id"] for c in after if c["source"] == "insurance-and-costs.md"}
    assert new and not new & old and set(report["retired_chunks"]) == old
    assert len(after) == len({c["chunk_id"] for c in after})
    assert [c for c in after if c["source"] != "insurance-and-costs.md"] == others  # other files' chunks kept as-is
    assert any("Cashless counter hours" in c["text"] for c in after)


def test_cross_file_duplicate_text_is_reported_not_stored_twice(sources, tmp_path):
    out = tmp_path / "ds"
    copy = sources / "copy-of-faq.md"
    copy.write_text((sources / "insurance-and-costs.md").read_text())
    report = ingest([sources / "insurance-and-costs.md", copy], out, max_tokens=120)
    dup = next(r for r in report["files"] if r["file"] == "copy-of-faq.md")
    assert dup["duplicates"] and dup["chunks"] == 0
    texts = [c["text"] for c in kb(out)]
    assert len(texts) == len(set(texts))


def test_approved_qa_become_dated_update_chunks(tmp_path):
    qa = tmp_path / "approved.csv"
    qa.write_text("question,answer,approved_on\nCan I travel by bus after surgery?,\"Yes, from the next day; wear "
                  "the dark glasses.\",2024-02-03\nMy number is 98765 43210 - can I bathe?,Avoid water in the eye "
                  "for two weeks.,2024-02-05\n")
    ingest([qa], tmp_path / "ds", kind="update")
    chunks = kb(tmp_path / "ds")
    assert [(c["kind"], c["updated"]) for c in chunks] == [("update", "2024-02-03"), ("update", "2024-02-05")]
    assert "98765" not in (tmp_path / "ds" / "kb.jsonl").read_text()


def test_document_added_later_becomes_dated_update_chunks(sources, tmp_path):
    from pipeline.errors import UserError

    out = tmp_path / "ds"
    with pytest.raises(UserError, match="--updated"):
        ingest([sources / "insurance-and-costs.md"], out, kind="update")
    assert not out.exists()
    from datetime import date

    ingest([sources / "insurance-and-costs.md"], out, kind="update", updated=date(2024, 3, 1))
    chunks = kb(out)
    assert chunks and all(c["kind"] == "update" and c["updated"] == "2024-03-01" for c in chunks)


@pytest.mark.parametrize(("name", "make", "expected"), [
    ("broken.pdf", lambda p: p.write_bytes(b"%PDF-1.4\nthis is not really a pdf"), "unreadable PDF"),
    ("locked.pdf", "encrypted", "encrypted PDF"),
    ("budget.xlsx", lambda p: p.write_bytes(b"PK\x03\x04"), "unsupported file type"),
    ("empty", lambda p: p.mkdir(), "empty folder"),
])
def test_bad_input_is_one_line_and_nothing_written(tmp_path, name, make, expected):
    path = tmp_path / name
    if make == "encrypted":
        from pypdf import PdfReader, PdfWriter

        writer = PdfWriter(clone_from=PdfReader(write_pdf(tmp_path / "plain.pdf")))
        writer.encrypt("secret")
        writer.write(path)
    else:
        make(path)
    out = tmp_path / "ds"
    result = cli("ingest-kb", str(path), "--out", str(out))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert str(path) in lines[0] and expected in lines[0]
    assert not out.exists()
