"""The Dataset page without a results database: a dataset is just a folder (``pipeline.read.dataset.folder_view``),
its ingest report's ``page_notes`` (OCR'd, converted or flagged pages) shown when present and not missed when
absent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.read.dataset import PAGE_NOTE_COLUMNS, dataset_folders, folder_view

REPO = Path(__file__).resolve().parent.parent
NOTES = [
    {"page": 2, "kind": "ocr", "detail": "no text layer: read by tesseract (hin)", "confidence": 0.81,
     "encoding": None, "language": "hi"},
    {"page": 5, "kind": "legacy_font", "detail": "Kruti Dev glyphs converted to Unicode", "confidence": 0.93,
     "encoding": "krutidev", "language": "hi"},
]


def _folder_with_notes(tmp_path: Path) -> Path:
    """A copy of the bundled ingested example whose first file's report entry carries page notes and an engine."""
    folder = tmp_path / "ingested"
    shutil.copytree(REPO / "data" / "eyecare-ingested", folder)
    report = json.loads((folder / "ingest_report.json").read_text(encoding="utf-8"))
    report["files"][0]["page_notes"] = NOTES
    report["files"][0]["engine"] = "pdftotext+tesseract"
    (folder / "ingest_report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


def test_folder_view_reads_a_folder_with_page_notes_and_without(tmp_path):
    folder = _folder_with_notes(tmp_path)
    report = json.loads((folder / "ingest_report.json").read_text(encoding="utf-8"))
    view = folder_view(folder)
    first = report["files"][0]["file"]
    notes = view["page_notes"]
    assert list(notes.columns) == PAGE_NOTE_COLUMNS
    assert notes[["file", "page", "kind", "confidence"]].values.tolist() == [
        [first, 2, "ocr", 0.81], [first, 5, "legacy_font", 0.93]]
    sources = view["sources"].set_index("file")
    assert sources.loc[first, "engine"] == "pdftotext+tesseract"
    assert len(sources) == len(report["files"])
    assert len(view["excluded"]) == sum(1 for line in (folder / "excluded.jsonl").open() if line.strip())

    plain = folder_view(REPO / "data" / "eyecare-ingested")  # today's reports: no page notes, no engine
    assert plain["page_notes"].empty and list(plain["page_notes"].columns) == PAGE_NOTE_COLUMNS
    assert plain["sources"].engine.isna().all() and len(plain["sources"]) == len(report["files"])
    assert folder_view(tmp_path / "nope")["folder"] is None


def test_dataset_folders_are_the_folders_holding_dataset_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "kb.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "curate_report.json").write_text("{}", encoding="utf-8")
    assert dataset_folders(tmp_path) == [str((tmp_path / "a").resolve()), str((tmp_path / "c").resolve())]
    bundled = [Path(f).name for f in dataset_folders()]
    assert {"cataract", "eyecare-ingested", "eyecare-qa"} <= set(bundled) and "reference" not in bundled


def test_dataset_page_without_a_results_database(tmp_path, monkeypatch):
    monkeypatch.setenv("PARIKSHA_DB", str(tmp_path / "missing.duckdb"))
    monkeypatch.setattr(data, "dataset_folders", lambda: [str(_folder_with_notes(tmp_path))])
    at = AppTest.from_file(str(REPO / "pages" / "11_dataset.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    subheaders = [s.value for s in at.subheader]
    assert subheaders[:3] == ["Source documents", "Knowledge-base growth", "Excluded messages"], subheaders
    shown = [df.value for df in at.dataframe if "kind" in df.value.columns and "confidence" in df.value.columns]
    assert len(shown) == 1 and shown[0].page.tolist() == [2, 5]
    assert not any("No results database" in i.value for i in at.info)
    assert not (tmp_path / "missing.duckdb").exists()


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()
