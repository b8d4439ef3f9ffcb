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
EXAMPLE = REPO / "data" / "eyecare-ingested"


def _report_notes(folder: Path) -> list[list]:
    """(file, page, kind, confidence) of every page note in a folder's ingest report, as written."""
    report = json.loads((folder / "ingest_report.json").read_text(encoding="utf-8"))
    return [[f["file"], n["page"], n["kind"], n["confidence"]]
            for f in report["files"] for n in f.get("page_notes", [])]


def _folder_without_notes(tmp_path: Path) -> Path:
    """A copy of the bundled ingested example whose report predates page notes and engines."""
    folder = tmp_path / "ingested"
    shutil.copytree(EXAMPLE, folder)
    report = json.loads((folder / "ingest_report.json").read_text(encoding="utf-8"))
    for entry in report["files"]:
        entry.pop("page_notes", None)
        entry.pop("engine", None)
    (folder / "ingest_report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


def test_folder_view_reads_a_folder_with_page_notes_and_without(tmp_path):
    report = json.loads((EXAMPLE / "ingest_report.json").read_text(encoding="utf-8"))
    view = folder_view(EXAMPLE)
    notes = view["page_notes"]
    want = _report_notes(EXAMPLE)
    assert {kind for *_, kind, _ in want} >= {"ocr", "legacy_font", "blank"}  # the example's scan and KrutiDev PDF
    assert list(notes.columns) == PAGE_NOTE_COLUMNS
    got = notes[["file", "page", "kind", "confidence"]].astype(object).where(notes.notna(), None).values.tolist()
    assert sorted(got, key=str) == sorted(want, key=str)
    sources = view["sources"].set_index("file")
    engines = {f["file"]: f["engine"] for f in report["files"] if f.get("engine")}
    assert engines and all(sources.loc[file, "engine"] == engine for file, engine in engines.items())
    assert len(sources) == len(report["files"])
    assert len(view["excluded"]) == sum(1 for line in (EXAMPLE / "excluded.jsonl").open() if line.strip())

    plain = folder_view(_folder_without_notes(tmp_path))  # an older report: no page notes, no engine
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
    monkeypatch.setattr(data, "dataset_folders", lambda: [str(EXAMPLE)])
    at = AppTest.from_file(str(REPO / "pages" / "11_dataset.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    subheaders = [s.value for s in at.subheader]
    assert subheaders[:3] == ["Source documents", "Knowledge-base growth", "Excluded messages"], subheaders
    shown = [df.value for df in at.dataframe if "kind" in df.value.columns and "confidence" in df.value.columns]
    assert len(shown) == 1 and sorted(shown[0].page.tolist()) == sorted(page for _, page, *_ in _report_notes(EXAMPLE))
    assert not any("No results database" in i.value for i in at.info)
    assert not (tmp_path / "missing.duckdb").exists()


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()
