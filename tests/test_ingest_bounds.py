"""ingest-kb's bounded inputs: a file over the size limit, a DOCX whose members inflate beyond a limit or a ratio,
a zip member inflating past its declared size, malformed or entity-bomb XML, and a PDF page whose content inflates
to 1 GiB or that draws a huge image are refused in one line naming the file (and the page and the limit), with
nothing written and memory bounded; a huge PDF page is rendered for OCR within the pixel budget."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.dataset.ingest import FileReport, ingest
from pipeline.dataset.pdf import read_pdf
from pipeline.dataset.pdf_bounds import render_dpi
from pipeline.formats import InputLimits
from tests.support.kb_sources import (
    write_docx,
    write_huge_page_pdf,
    write_image_page_pdf,
    write_inflating_pdf,
    write_pdf,
)

REPO = Path(__file__).resolve().parent.parent
NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
MB = 1024 * 1024
# The CLI in a child of a small wrapper, so the peak RSS measured is the CLI's own (Linux: ru_maxrss in KB).
MEASURED = ("import json, resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(json.dumps({'rc': r.returncode, 'stderr': r.stderr,\n"
            "                  'peak_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")


def ingest_cli(*args: str) -> dict:
    """``ingest-kb ARGS``: exit code, stderr and the peak memory of the command (KB)."""
    result = subprocess.run([sys.executable, "-c", MEASURED, sys.executable, "-m", "pipeline", "ingest-kb", *args],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    return json.loads(result.stdout)


def one_line(outcome: dict) -> str:
    lines = [line for line in outcome["stderr"].splitlines() if line.strip()]
    assert outcome["rc"] == 1 and len(lines) == 1, outcome["stderr"]
    return lines[0]


def with_document(tmp_path: Path, name: str, write_body) -> Path:
    """A real python-docx file whose ``word/document.xml`` is replaced by what ``write_body(stream)`` writes."""
    base = write_docx(tmp_path / "base.docx")
    path = tmp_path / name
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        for info in src.infolist():
            if info.filename == "word/document.xml":
                with dst.open("word/document.xml", "w", force_zip64=True) as stream:
                    write_body(stream)
            else:
                dst.writestr(info, src.read(info))
    return path


def huge_text(megabytes: int):
    def write(stream) -> None:
        stream.write(f'<?xml version="1.0"?><w:document {NS}><w:body><w:p><w:r><w:t>'.encode())
        block = b"a" * MB
        for _ in range(megabytes):
            stream.write(block)
        stream.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return write


def test_docx_inflating_to_400_mb_is_refused_in_one_line_with_memory_bounded(tmp_path):
    bomb = with_document(tmp_path, "manual.docx", huge_text(400))
    assert bomb.stat().st_size < 5 * MB
    outcome = ingest_cli(str(bomb), "--out", str(tmp_path / "ds"))
    line = one_line(outcome)
    assert str(bomb) in line and "--max-inflated-mb 100" in line
    assert outcome["peak_kb"] < 1.5 * 1024 * 1024, outcome["peak_kb"]
    assert not (tmp_path / "ds").exists()


def test_member_inflating_beyond_the_ratio_is_refused_and_limits_are_options(tmp_path):
    dense = with_document(tmp_path, "dense.docx", huge_text(20))  # 20 MB of one letter: far over 100 times
    line = one_line(ingest_cli(str(dense), "--out", str(tmp_path / "ds")))
    assert str(dense) in line and "word/document.xml" in line and "--max-ratio 100" in line
    line = one_line(ingest_cli(str(dense), "--out", str(tmp_path / "ds"), "--max-inflated-mb", "10",
                               "--max-ratio", "100000"))
    assert "--max-inflated-mb 10" in line
    # with both limits raised, the parser's own limit on a text node still ends in one line, not a traceback
    line = one_line(ingest_cli(str(dense), "--out", str(tmp_path / "ds"), "--max-ratio", "100000"))
    assert str(dense) in line and "malformed XML inside the Word file" in line


def test_member_larger_than_its_declared_size_is_one_line(tmp_path):
    """A zip whose directory declares 4 KB for a member that really inflates to 8 MB (a lying header)."""
    path = with_document(tmp_path, "lying.docx", huge_text(8))
    data = bytearray(path.read_bytes())
    name = b"word/document.xml"
    entry = data.index(b"PK\x01\x02")  # the central directory: per member 46 fixed bytes, then its name
    while data[entry + 46:entry + 46 + len(name)] != name:
        entry = data.index(b"PK\x01\x02", entry + 4)
    data[entry + 24:entry + 28] = (4096).to_bytes(4, "little")  # uncompressed size
    path.write_bytes(bytes(data))
    line = one_line(ingest_cli(str(path), "--out", str(tmp_path / "ds"), "--max-ratio", "100000"))
    assert str(path) in line and "word/document.xml" in line


@pytest.mark.parametrize(("body", "expected"), [
    (f'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">'
     f'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><w:document {NS}><w:body><w:p><w:r><w:t>&lol3;'
     "</w:t></w:r></w:p></w:body></w:document>", "declares a DTD or entities"),
    (f'<?xml version="1.0"?><w:document {NS}><w:body>\n<w:p><w:r><w:t>Eye drops</w:r></w:p></w:body></w:document>',
     "malformed XML in word/document.xml at line 2"),
])
def test_entity_bomb_and_malformed_xml_in_a_docx_are_one_line(tmp_path, body, expected):
    path = with_document(tmp_path, "leaflet.docx", lambda stream: stream.write(body.encode()))
    line = one_line(ingest_cli(str(path), "--out", str(tmp_path / "ds")))
    assert str(path) in line and expected in line


def test_sparse_1_gb_text_is_refused_by_its_size_without_reading_it(tmp_path):
    big = tmp_path / "export.txt"
    with big.open("wb") as fh:
        fh.truncate(1024 * MB)  # sparse: 1 GB long, nothing on disk
    outcome = ingest_cli(str(big), "--out", str(tmp_path / "ds"))
    line = one_line(outcome)
    assert str(big) in line and "--max-file-mb 100" in line
    assert outcome["peak_kb"] < 300 * 1024, outcome["peak_kb"]
    small = tmp_path / "note.md"
    small.write_text("# Drops\n\n" + "One drop four times a day. " * 100)
    assert "--max-file-mb 0.001" in one_line(ingest_cli(str(small), "--out", str(tmp_path / "ds"),
                                                        "--max-file-mb", "0.001"))
    assert not (tmp_path / "ds").exists()


def test_pdf_page_inflating_to_1_gib_is_refused_in_one_line_with_memory_bounded(tmp_path):
    bomb = write_inflating_pdf(tmp_path / "leaflet.pdf", 1024)
    assert bomb.stat().st_size < 4 * MB
    outcome = ingest_cli(str(bomb), "--out", str(tmp_path / "ds"))
    line = one_line(outcome)
    assert str(bomb) in line and "page 1" in line and "--max-page-content-mb 20" in line
    assert outcome["peak_kb"] < 1.5 * 1024 * 1024, outcome["peak_kb"]
    assert not (tmp_path / "ds").exists()
    # the limit is the option's; with --skip-unreadable the batch goes on without the file
    small = write_inflating_pdf(tmp_path / "batch" / "dense.pdf", 3)
    write_pdf(tmp_path / "batch" / "preop-sop.pdf")
    report = ingest([tmp_path / "batch"], tmp_path / "ds", limits=InputLimits(max_page_content_mb=2),
                    skip_unreadable=True)
    assert [f["file"] for f in report["files"]] == ["preop-sop.pdf"]
    [skipped] = report["skipped"]
    assert skipped["file"] == small.name and "page 1" in skipped["reason"]
    assert "--max-page-content-mb 2" in skipped["reason"]


def test_200_inch_page_is_rendered_within_the_pixel_budget_and_the_report_says_so(tmp_path):
    huge = write_huge_page_pdf(tmp_path / "poster.pdf", 200)
    assert huge.stat().st_size < 1000
    outcome = ingest_cli(str(huge), "--out", str(tmp_path / "ds"))
    assert outcome["rc"] == 0, outcome["stderr"]
    assert outcome["peak_kb"] < 1.5 * 1024 * 1024, outcome["peak_kb"]
    [entry] = json.loads((tmp_path / "ds" / "ingest_report.json").read_text(encoding="utf-8"))["files"]
    assert [(n["page"], n["kind"]) for n in entry["page_notes"]] == [(1, "downscaled"), (1, "blank")]
    assert "200 x 200 in rendered at 35 dpi" in entry["page_notes"][0]["detail"]
    assert sum("--max-page-mpx" in flag for flag in entry["flags"]) == 1
    assert render_dpi(595, 842, 300, InputLimits()) == 300  # an A4 page keeps its 300 dpi
    assert round(render_dpi(595, 842, 300, InputLimits(max_page_mpx=2))) == 144


def test_pdf_page_drawing_an_image_beyond_the_pixel_budget_is_one_line(tmp_path):
    path = write_image_page_pdf(tmp_path / "scan.pdf", 20000, 20000)
    report = ingest([path], tmp_path / "ds", skip_unreadable=True)
    [skipped] = report["skipped"]
    assert "page 1: an image of 20,000 x 20,000 pixels" in skipped["reason"]
    assert "--max-page-mpx 50" in skipped["reason"]


def test_the_ingest_memory_ceiling_stops_a_file_in_one_line_and_the_batch_goes_on(tmp_path, monkeypatch):
    """``--max-memory-mb``: what the ingest adds to its process's resident memory since it began, checked at each PDF
    page and after each other file. A planted process growing 100 MB a check: the PDF stops at page 2 and the batch
    goes on, a DOCX stops once read, each in one line; the CLI refuses in one line with nothing written."""
    from pipeline.dataset import bounds

    pdf = write_pdf(tmp_path / "batch" / "preop-sop.pdf")
    docx = write_docx(tmp_path / "batch" / "discharge.docx")
    held = iter(range(500, 10_000, 100))
    monkeypatch.setattr(bounds, "resident_mb", lambda: float(next(held)))
    report = ingest([tmp_path / "batch"], tmp_path / "ds", limits=InputLimits(max_memory_mb=250),
                    skip_unreadable=True)  # discharge.docx read (+100 MB), then preop-sop.pdf's pages (+200, +300)
    assert [f["file"] for f in report["files"]] == [docx.name]
    [skipped] = report["skipped"]
    assert skipped["reason"] == (f"{pdf}: page 2: the ingest took 300 MB, over the limit (--max-memory-mb 250); "
                                 "split the file, ingest it alone or raise the limit")
    report = ingest([docx], tmp_path / "ds2", limits=InputLimits(max_memory_mb=50), skip_unreadable=True)
    assert report["skipped"][0]["reason"].startswith(f"{docx}: read: the ingest took 100 MB, over the limit")
    monkeypatch.setattr(bounds, "resident_mb", lambda: 5_000.0)  # a library caller's process already holds 5 GB
    assert read_pdf(pdf, FileReport(pdf.name, "", "pdf"))  # the read counts what it adds: nothing here
    monkeypatch.undo()
    line = one_line(ingest_cli(str(pdf), "--out", str(tmp_path / "cli"), "--max-memory-mb", "1"))
    assert str(pdf) in line and "page 1" in line and "--max-memory-mb 1)" in line  # a real process: imports and all
    assert not (tmp_path / "cli").exists()
    assert ingest([pdf], tmp_path / "default")["files"][0]["file"] == pdf.name
