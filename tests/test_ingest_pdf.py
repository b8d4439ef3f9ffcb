"""The PDF reader on real files the tests write: Indian-script PDFs (fpdf2 + HarfBuzz + Debian Noto fonts) read
with their words intact, a KrutiDev-encoded text layer converted, image-only pages OCR'd by the installed
Tesseract, a ruled "NOTES" page reported blank, encrypted PDFs, --skip-unreadable, and outline headings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from pipeline.dataset import legacy_fonts, ocr
from pipeline.dataset.ingest import FileReport, ingest
from pipeline.dataset.legacy_fonts import devanagari_share
from pipeline.dataset.pdf import read_pdf
from pipeline.dataset.text_check import page_problems, sign_initial_words
from pipeline.errors import UserError
from pipeline.formats import FORMATS, PdfOptions
from tests.support.kb_sources import (
    INDIC_LEAFLETS,
    MIXED_LINE,
    PREOP_PAGES,
    ROMANIZED_LEAFLETS,
    SCRIPT_FONTS,
    write_bilingual_krutidev_pdf,
    write_browser_pdf,
    write_encrypted_pdf,
    write_image_only_pdf,
    write_indic_pdf,
    write_krutidev_pdf,
    write_mixed_line_pdf,
    write_pdf,
    write_romanized_pdf,
)
from tests.support.real_pdfs import REAL_LEGACY_PDFS, page_figures

REPO = Path(__file__).resolve().parents[1]
INTACT_AT_LEAST = 0.98  # share of the source text's words found intact in the chunks (issue 35's bar)


def words(text: str) -> Counter:
    return Counter(re.findall(r"[\w\u0900-\u0DFF]+", unicodedata.normalize("NFC", text)))


def intact(source: Counter, text: str) -> float:
    return sum((source & words(text)).values()) / sum(source.values())


def source_words(language: str) -> Counter:
    return words(" ".join(f"{h} {' '.join(ps)}" for h, ps in INDIC_LEAFLETS[language]))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("language", sorted(SCRIPT_FONTS))
def test_indian_script_words_intact_and_better_than_pypdf(tmp_path, language):
    from pypdf import PdfReader

    path = write_indic_pdf(tmp_path / f"{language}.pdf", language)
    report = FileReport(path.name, "", "pdf")
    sections = read_pdf(path, report)
    text = "\n".join(s.text for s in sections)
    source = source_words(language)
    old = "\n".join(page.extract_text() for page in PdfReader(path).pages)
    assert intact(source, text) >= INTACT_AT_LEAST > intact(source, old)
    assert report.engine.startswith("pypdfium2")
    assert not sign_initial_words(text) and not report.page_notes
    # and against poppler's pdftotext, the usual reference: every word it gets right, we get right too
    poppler = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True,
                             check=True).stdout
    assert not (source & words(poppler)) - words(text)


# measured on Chromium's PDFs (docs/ingest.md): poppler splits two Telugu and one Kannada word at a subjoined form
BROWSER_INTACT_AT_LEAST = {"hi": 0.98, "ta": 0.98, "bn": 0.98, "te": 0.93, "kn": 0.97}


@pytest.mark.usefixtures("chromium")  # Debian's chromium (installed by .ci/run) prints the PDFs
def test_browser_printed_indian_script_pdfs_are_read_by_poppler(tmp_path):
    for language in sorted(SCRIPT_FONTS):
        path = write_browser_pdf(tmp_path / f"{language}.pdf", language)
        report = FileReport(path.name, "", "pdf")
        sections = read_pdf(path, report)
        text = "\n".join(s.text for s in sections)
        assert intact(source_words(language), text) >= BROWSER_INTACT_AT_LEAST[language], language
        assert "poppler pdftotext" in report.engine and not sign_initial_words(text)
        squeezed = [["".join(h.split()) for h in s.headings] for s in sections]  # poppler spaces ':' off
        assert squeezed == [["".join(h.split())] for h, _ in INDIC_LEAFLETS[language]]  # each <h1>, by its size


def test_page_problems_name_what_a_reordering_reader_leaves():
    problems = page_problems("से कम (सिस्टोलिक) िीमारी और याबि ंद")
    assert len(problems) == 1 and "2 word(s) start with a dependent vowel sign" in problems[0]
    assert "replacement" in page_problems("blood sugar \ufffd\ufffd after food")[0]
    assert "mostly not words" in page_problems("%% ## @@ :: 12 ab &&")[-1]
    assert page_problems("मधुमेह की दवाएँ पहले की तरह लेते रहें।") == []


def test_krutidev_text_layer_is_converted_and_reported(tmp_path):
    path = write_krutidev_pdf(tmp_path / "kd.pdf")
    report = FileReport(path.name, "", "pdf")
    text = "\n".join(s.text for s in read_pdf(path, report))
    notes = report.page_notes
    assert [(n["page"], n["kind"]) for n in notes] == [(1, "legacy_font"), (2, "legacy_font")]
    assert all("krutidev_010" in n["encoding"].split("/") for n in notes)
    assert all("NotoSans" in n["detail"] and "found by its signature" in n["detail"] for n in notes)  # not by name
    assert any("converted by its signature: check the text" in flag for flag in report.flags)
    assert devanagari_share(text) >= 0.95
    assert intact(source_words("hi"), text) >= 0.95
    # English text in a Latin font is not taken for a legacy font
    english = FileReport("preop.pdf", "", "pdf")
    read_pdf(write_pdf(tmp_path / "preop.pdf"), english)
    assert english.page_notes == []


def test_bilingual_page_converts_the_krutidev_font_runs_and_leaves_the_english_ones(tmp_path):
    """English and KrutiDev paragraphs alternating on every page, the Hindi in a font named KrutiDev010."""
    path = write_bilingual_krutidev_pdf(tmp_path / "bilingual.pdf")
    report = FileReport(path.name, "", "pdf")
    sections = read_pdf(path, report)
    text = "\n".join(s.text for s in sections)
    pairs = list(zip(PREOP_PAGES, INDIC_LEAFLETS["hi"], strict=False))
    english = words(" ".join(f"{h} {' '.join(ps[:len(hs)])}" for (h, ps), (_, hs) in pairs))
    hindi = words(" ".join(" ".join(hs[:len(ps)]) for (_, ps), (_, hs) in pairs))
    assert intact(english, text) >= INTACT_AT_LEAST and intact(hindi, text) >= 0.95
    assert [s.headings for s in sections] == [[h] for (h, _), _ in pairs]  # the English headings, by their size
    for page, (heading, paragraphs), (_, hindi_paragraphs) in zip((1, 2), *zip(*pairs, strict=True), strict=True):
        page_text = sections[page - 1].text
        assert page_text.startswith(heading)
        for english_para, hindi_para in zip(paragraphs, hindi_paragraphs, strict=False):  # in order, each right
            assert intact(words(english_para), page_text) == 1.0 and intact(words(hindi_para), page_text) >= 0.9
    notes = report.page_notes
    assert [(n["page"], n["kind"], n["encoding"]) for n in notes] == [(1, "legacy_font", "krutidev_010"),
                                                                        (2, "legacy_font", "krutidev_010")]
    assert all("KrutiDev010" in n["detail"] and "signature" not in n["detail"] for n in notes)


def test_a_line_mixing_english_and_krutidev_words_converts_exactly_the_krutidev_runs(tmp_path):
    path = write_mixed_line_pdf(tmp_path / "label.pdf")
    report = FileReport(path.name, "", "pdf")
    text = "\n".join(s.text for s in read_pdf(path, report))
    assert text == " ".join("".join(piece for _, piece in MIXED_LINE).split())
    [note] = report.page_notes
    assert "KrutiDev010 (krutidev_010, 2 run(s))" in note["detail"]


@pytest.mark.parametrize("language", sorted(ROMANIZED_LEAFLETS))
def test_romanized_hindi_and_tamil_leaflets_stay_as_written(tmp_path, language):
    path = write_romanized_pdf(tmp_path / f"romanized-{language}.pdf", language)
    report = FileReport(path.name, "", "pdf")
    text = "\n".join(s.text for s in read_pdf(path, report))
    source = words(" ".join(f"{h} {' '.join(ps)}" for h, ps in ROMANIZED_LEAFLETS[language]))
    assert intact(source, text) == 1.0 and devanagari_share(text) == 0.0
    assert report.page_notes == []
    assert legacy_fonts.romanized_share(text) > legacy_fonts.ROMANIZED_WORDS_AT_MOST  # decided on the input
    assert legacy_fonts.legacy_glyph_share(text) < legacy_fonts.LEGACY_GLYPHS_AT_LEAST


def test_a_hyphen_ending_a_line_is_read_as_a_hyphen(tmp_path):
    """PDFium gives a hyphen that ends a line as U+FFFE (a noncharacter), joined to the next line's word."""
    path = write_pdf(tmp_path / "hyphen.pdf", [("Before surgery", [
        "The patient attends the pre-\noperative clinic two weeks before the day of surgery, with every report."])])
    text = "\n".join(s.text for s in read_pdf(path, FileReport(path.name, "", "pdf")))
    assert "pre-operative clinic" in text and "\ufffe" not in text


def test_a_font_name_tells_a_legacy_encoding():
    assert legacy_fonts.font_encoding("MPDFAA+KrutiDev010") == "krutidev_010"
    assert legacy_fonts.font_encoding("Kruti Dev 010,Bold") == "krutidev_010"
    assert legacy_fonts.font_encoding("DevLys-010") == "devlys_010"
    assert legacy_fonts.font_encoding("WalkmanChanakya905") == "walkman_chanakya_905"
    assert legacy_fonts.font_encoding("ABCDEE+NotoSans-Regular") is None
    assert legacy_fonts.font_encoding("Arial,Bold") is None


def test_image_only_pages_ocr_with_confidence_and_ruled_page_blank(tmp_path):
    pages = INDIC_LEAFLETS["hi"][:1]
    folder = tmp_path / "src"
    write_image_only_pdf(folder / "scan.pdf", "hi", pages, blank_pages=1)
    report = ingest([folder], tmp_path / "ds", max_tokens=200)
    notes = report["files"][0]["page_notes"]
    assert [(n["page"], n["kind"]) for n in notes] == [(1, "ocr"), (2, "blank")]
    assert notes[0]["language"] == "hin+eng" and notes[0]["confidence"] > ocr.LOW_CONFIDENCE
    chunks = [json.loads(line) for line in (tmp_path / "ds" / "kb.jsonl").read_text(encoding="utf-8").splitlines()]
    assert chunks and all(c["provenance"]["ocr"] is True for c in chunks)
    assert all(c["provenance"]["ocr_confidence"] == notes[0]["confidence"] for c in chunks)
    assert chunks[0]["provenance"]["heading_path"] == [pages[0][0]]  # the large OCR'd line is the heading
    source = words(" ".join(f"{h} {' '.join(ps)}" for h, ps in pages))
    assert intact(source, " ".join(c["text"] for c in chunks)) >= 0.9


def test_without_tesseract_image_pages_are_flagged_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "installed_languages", frozenset)
    path = write_image_only_pdf(tmp_path / "scan.pdf", "hi", INDIC_LEAFLETS["hi"][:1], blank_pages=1)
    report = FileReport(path.name, "", "pdf")
    assert read_pdf(path, report) == []
    assert [(n["page"], n["kind"]) for n in report.page_notes] == [(1, "image_only"), (2, "blank")]
    assert report.pages_without_text == [1] and "apt-get install -y tesseract-ocr" in report.flags[0]


def test_owner_password_pdf_opens_and_user_password_pdf_is_one_line(tmp_path):
    report = FileReport("owner.pdf", "", "pdf")
    text = "\n".join(s.text for s in read_pdf(write_encrypted_pdf(tmp_path / "owner.pdf"), report))
    assert "On the day of surgery" in text
    locked = write_encrypted_pdf(tmp_path / "locked.pdf", user_password="patient-123")
    result = cli("ingest-kb", str(locked), "--out", str(tmp_path / "ds"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert str(locked) in lines[0] and "password" in lines[0] and "qpdf --decrypt" in lines[0]
    assert not (tmp_path / "ds").exists()


def test_skip_unreadable_ingests_the_rest_and_lists_what_it_skipped(tmp_path):
    folder = tmp_path / "batch"
    write_pdf(folder / "preop-sop.pdf")
    write_encrypted_pdf(folder / "locked.pdf", user_password="patient-123")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    out = tmp_path / "ds"
    result = cli("ingest-kb", str(folder), "--out", str(out), "--skip-unreadable")
    assert result.returncode == 1, result.stderr
    report = json.loads((out / "ingest_report.json").read_text(encoding="utf-8"))
    assert [r["file"] for r in report["files"]] == ["preop-sop.pdf"]
    assert sorted(s["file"] for s in report["skipped"]) == ["broken.pdf", "locked.pdf"]
    assert "skipped (unreadable)" in result.stdout and "locked.pdf" in result.stdout
    assert (out / "kb.jsonl").read_text(encoding="utf-8").strip()


def test_heading_paths_from_the_outline_and_from_large_font_lines(tmp_path):
    out = tmp_path / "ds"
    folder = tmp_path / "src"
    write_indic_pdf(folder / "hi.pdf", "hi")  # headings are bookmarks
    write_pdf(folder / "preop-sop.pdf")  # no outline: headings set in 15 pt bold over 11 pt text
    ingest([folder], out, max_tokens=120)
    chunks = [json.loads(line) for line in (out / "kb.jsonl").read_text(encoding="utf-8").splitlines()]
    hindi = {tuple(c["provenance"]["heading_path"]) for c in chunks if c["source"] == "hi.pdf"}
    assert hindi == {(h,) for h, _ in INDIC_LEAFLETS["hi"]}
    preop = [c for c in chunks if c["source"] == "preop-sop.pdf"]
    assert {tuple(c["provenance"]["heading_path"]) for c in preop} == {(h,) for h, _ in PREOP_PAGES}
    for c in preop:
        assert c["provenance"]["heading_path"][0] == PREOP_PAGES[c["provenance"]["pages"][0] - 1][0]


def test_garbled_text_layer_is_flagged_in_the_report(tmp_path):
    garbled = [("रक्तचाप", ["सये कम (मसस्टोमलक) िीमारी … भोिन ंद का ध्यान रखें; ि ी ोे दवा समय पर लें।"])]
    report = FileReport("garbled.pdf", "", "pdf")
    read_pdf(write_indic_pdf(tmp_path / "garbled.pdf", "hi", garbled), report)
    [note] = report.page_notes
    assert note["page"] == 1 and note["kind"] == "suspect_text" and "dependent vowel sign" in note["detail"]
    assert any("suspect text" in flag for flag in report.flags)


def test_low_confidence_ocr_page_is_flagged(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "read_page", lambda image, languages=None, **_: ocr.OcrPage(
        "धुंधला पन्ना जिसे पढ़ना कठिन है", 41.5, "hin+eng", 6, [12.0]))
    path = write_image_only_pdf(tmp_path / "scan.pdf", "hi", INDIC_LEAFLETS["hi"][:1], blank_pages=0)
    report = FileReport(path.name, "", "pdf")
    read_pdf(path, report)
    [note] = report.page_notes
    assert note["kind"] == "ocr" and note["confidence"] == 41.5 and "LOW CONFIDENCE" in note["detail"]
    assert any("low OCR confidence" in flag and "1" in flag for flag in report.flags)


def test_rotated_scan_is_turned_upright_by_tesseract_osd_before_it_is_read(tmp_path):
    pages = INDIC_LEAFLETS["hi"][:1]
    path = write_image_only_pdf(tmp_path / "scan.pdf", "hi", pages, blank_pages=0, rotate=90)
    report = FileReport(path.name, "", "pdf")
    text = "\n".join(s.text for s in read_pdf(path, report))
    [note] = report.page_notes
    assert note["kind"] == "ocr" and "turned 90 degrees clockwise" in note["detail"] and note["language"] == "hin+eng"
    assert intact(words(" ".join(f"{h} {' '.join(ps)}" for h, ps in pages)), text) >= 0.9


def test_a_script_without_its_tesseract_pack_is_named_with_its_install_command(tmp_path, monkeypatch):
    """A Hindi scan where Tesseract has English and OSD only: not read as English gibberish, but named."""
    monkeypatch.setattr(ocr, "installed_languages", lambda: frozenset({"eng", "osd"}))
    path = write_image_only_pdf(tmp_path / "scan.pdf", "hi", INDIC_LEAFLETS["hi"][:1], blank_pages=0)
    report = FileReport(path.name, "", "pdf")
    assert read_pdf(path, report) == [] and report.pages_without_text == [1]
    [note] = report.page_notes
    assert note["kind"] == "image_only" and "Devanagari script" in note["detail"]
    assert "sudo apt-get install -y tesseract-ocr-hin" in note["detail"]
    assert any("tesseract-ocr-hin" in flag for flag in report.flags)
    monkeypatch.setattr(ocr, "installed_languages", lambda: frozenset({"eng", "hin"}))  # no OSD pack
    report = FileReport(path.name, "", "pdf")
    assert read_pdf(path, report) == []
    assert "sudo apt-get install -y tesseract-ocr-osd" in report.page_notes[0]["detail"]


def test_ocr_page_cap_and_progress_with_its_estimate(tmp_path, monkeypatch):
    from io import StringIO

    from rich.console import Console

    from pipeline import console
    from pipeline.formats import InputLimits

    shown = Console(file=StringIO(), width=120, force_terminal=False)
    monkeypatch.setattr(console, "make_console", lambda **_: shown)
    monkeypatch.setattr(ocr, "read_page", lambda image, languages=None, **_: ocr.OcrPage(
        "मोतियाबिंद के बाद आँख की देखभाल", 91.0, "hin+eng", 6, [12.0]))
    path = write_image_only_pdf(tmp_path / "scan.pdf", "hi", INDIC_LEAFLETS["hi"], blank_pages=0)
    report = FileReport(path.name, "", "pdf")
    read_pdf(path, report, limits=InputLimits(max_ocr_pages=1))
    assert [(n["page"], n["kind"]) for n in report.page_notes] == [(1, "ocr"), (2, "image_only")]
    assert "--max-ocr-pages 1" in report.page_notes[1]["detail"] and report.pages_without_text == [2]
    assert any("--max-ocr-pages 1" in flag for flag in report.flags)
    bar = shown.file.getvalue()
    assert "OCR scan.pdf" in bar and "1/1" in bar and "eta" in bar


def test_an_unknown_ocr_language_is_refused_in_one_line_naming_the_option_before_any_file_is_read(tmp_path):
    missing = tmp_path / "preop.pdf"  # never written: had any file been looked at, the error would be "not found"
    result = cli("ingest-kb", str(missing), "--out", str(tmp_path / "ds"), "--ocr-langs", "hin+xyz")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "--ocr-langs hin+xyz: xyz not installed" in lines[0], result.stderr
    with pytest.raises(UserError, match=r"^--ocr-langs hin\+xyz: xyz not installed [^\n]*$"):  # the library's options
        ingest([missing], tmp_path / "ds", options=[PdfOptions(ocr_langs="hin+xyz")])
    with pytest.raises(TypeError, match="PdfOptions: no format read here takes these options"):
        ingest([missing], tmp_path / "ds", options=[PdfOptions()], formats={"text": FORMATS["text"]})
    assert not (tmp_path / "ds").exists()


REAL = sorted(REAL_LEGACY_PDFS.glob("*.pdf"))


@pytest.mark.skipif(not REAL, reason=f"real public legacy-font PDFs go in {REAL_LEGACY_PDFS} (see docs/ingest.md)")
@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_legacy_font_pdf_hindi_converted_and_latin_words_intact_on_every_page(path):
    figures = page_figures(path)
    assert all(f["legacy_fonts"] for f in figures)
    assert all(f["hindi"] is None or f["hindi"] >= 0.95 for f in figures), min(f["hindi"] or 1 for f in figures)
    assert all(f["english"] == 1.0 for f in figures)


def test_a_pdf_with_a_text_layer_reads_without_pytesseract():
    """OCR is the only part of PDF reading that needs pytesseract: with it missing, a text PDF still reads."""
    code = ("import sys; sys.modules['pytesseract'] = None\n"  # `import pytesseract` now raises ImportError
            "from pathlib import Path\n"
            "from pipeline.dataset.ingest import FileReport\n"
            "from pipeline.dataset.pdf import read_pdf\n"
            "path = Path('data/raw-example/sources/preop-sop.pdf')\n"
            "report = FileReport(path.name, '', 'pdf')\n"
            "sections = read_pdf(path, report)\n"
            "print(report.pages, sum(len(s.text) for s in sections))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    n_pages, n_chars = map(int, result.stdout.split())
    assert n_pages == 3 and n_chars > 500


class PlantedOcr:
    """An OCR engine of known answers (``ocr.OcrEngine``): the page is on its side, in Devanagari; two paragraphs."""

    name = "Planted OCR"
    install_command = "install the planted engine"
    errors = (ValueError,)

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.seen = fail, []

    def languages(self) -> frozenset[str]:
        return frozenset({"hin", "eng", "osd"})

    def orientation(self, image):
        return 90, 9.5, "Devanagari"

    def words(self, image, language):
        self.seen.append((image.size, language))
        if self.fail:
            raise ValueError("planted failure")
        return [ocr.OcrWord("मोतियाबिंद", (1, 1, 1), 40, 90.0), ocr.OcrWord("ऑपरेशन", (1, 1, 1), 44, 80.0),
                ocr.OcrWord("के", (1, 1, 2), 40, None), ocr.OcrWord("बाद", (1, 1, 2), 36, 70.0),
                ocr.OcrWord("आँख", (2, 1, 1), 60, 60.0), ocr.OcrWord("न", (2, 1, 1), 60, 50.0),
                ocr.OcrWord("मलें", (2, 1, 1), 60, 40.0)]


def test_the_ocr_engine_is_an_interface_the_reader_assembles_pages_from(tmp_path, monkeypatch):
    """Tesseract is one ``OcrEngine``: another engine's words become the page's lines and paragraphs, its rotation
    and script choose how the page is turned and read, and its name and errors are what the report says."""
    from PIL import Image

    engine = PlantedOcr()
    page = ocr.read_page(Image.new("L", (100, 200), 255), engine=engine, dpi=144)
    assert engine.seen == [((200, 100), "hin+eng")]  # turned 90 degrees first, read in the script OSD found
    assert page.text == "मोतियाबिंद ऑपरेशन\nके बाद\n\nआँख न मलें"
    assert (page.rotated, page.language, page.words, page.confidence) == (90, "hin+eng", 6, 65.0)
    assert page.line_sizes == [21.0, 19.0, 30.0]  # median word height, pixels at 144 dpi -> points
    monkeypatch.setattr(ocr, "ENGINE", engine)
    monkeypatch.setattr(ocr, "installed_languages", engine.languages)
    path = write_image_only_pdf(tmp_path / "scan.pdf", "hi", INDIC_LEAFLETS["hi"][:1], blank_pages=0)
    report = FileReport(path.name, "", "pdf")
    assert "आँख न मलें" in "\n".join(s.text for s in read_pdf(path, report))
    assert report.page_notes[0]["detail"].startswith("OCR'd by Planted OCR (6 words; turned 90 degrees")
    monkeypatch.setattr(ocr, "ENGINE", PlantedOcr(fail=True))
    report = FileReport(path.name, "", "pdf")
    assert read_pdf(path, report) == []
    assert report.page_notes[0]["detail"] == "no text layer and Planted OCR failed on it (planted failure)"
