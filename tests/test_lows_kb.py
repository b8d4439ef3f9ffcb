"""The low findings of issue 44 outside PDFs, OCR and identifiers, each with an input that failed before: a source
file's name shown as text on the Dataset page; a dataset write killed between its renames completed by the next
command (staging folders never listed); a read-only or full disk in one line; a malformed launch status ignored
with one line; time-only and partial dates refused; a CSV with two columns of one name refused; Compare runs
offering only readable result databases."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from datetime import date
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.dataset.curate import _asked_on
from pipeline.dataset.loader import validate
from pipeline.dataset.records import read_records
from pipeline.dataset.writing import JOURNAL, recover, sha256_of, write_dataset
from pipeline.errors import UserError
from pipeline.launch_status import read_status, status_path
from pipeline.read.compare import result_files
from pipeline.read.dataset import dataset_folders
from pipeline.read.setup import setup_status

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "data" / "eyecare-ingested"
PAYLOAD = "[call us](https://evil.example) ![x](https://evil.example/p.png).md"


def test_dataset_page_shows_a_source_files_name_as_text(tmp_path, monkeypatch):
    folder = tmp_path / "ingested"
    shutil.copytree(EXAMPLE, folder)
    for name in ("kb.jsonl", "ingest_report.json"):
        text = (folder / name).read_text(encoding="utf-8")
        (folder / name).write_text(text.replace("insurance-and-costs.md", PAYLOAD.replace('"', '\\"')),
                                   encoding="utf-8")
    monkeypatch.setenv("PARIKSHA_DB", str(tmp_path / "missing.duckdb"))
    monkeypatch.setattr(data, "dataset_folders", lambda: [str(folder)])
    data.clear_caches()
    at = AppTest.from_file(str(REPO / "pages" / "11_dataset.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    grids = [df.value for df in at.dataframe if "file" in df.value.columns]
    assert any(PAYLOAD in set(grid["file"]) for grid in grids)  # shown whole, as text in a grid
    assert not any(PAYLOAD in str(t.value) for t in at.table)  # a table's cells are Markdown
    rendered = [m.value for m in (*at.markdown, *at.caption, *at.warning)]
    assert not any("](https://evil.example" in m for m in rendered)
    data.clear_caches()


KILL_ON_SECOND_RENAME = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pipeline.dataset import writing
    calls = []
    real = os.replace
    def replace(src, dst):
        if str(dst).endswith(writing.JOURNAL):
            return real(src, dst)
        calls.append(dst)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst)
    writing.os.replace = replace
    folder = Path(sys.argv[1])
    writing.write_dataset(folder, {"kb.jsonl": "new kb\\n", "queries.jsonl": "new queries\\n"},
                          command="test-cmd", report_name="test_report.json", report={"n": 2})
""")


def test_a_write_killed_between_its_renames_is_completed_by_the_next_command(tmp_path):
    folder = tmp_path / "data" / "ds"
    write_dataset(folder, {"kb.jsonl": "old kb\n", "queries.jsonl": "old queries\n"}, command="test-cmd",
                  report_name="test_report.json", report={"n": 1})
    done = subprocess.run([sys.executable, "-c", KILL_ON_SECOND_RENAME, str(folder)], cwd=REPO, timeout=120)
    assert done.returncode == -9  # killed after renaming kb.jsonl, before queries.jsonl and the report
    assert (folder / "kb.jsonl").read_text() == "new kb\n"
    assert (folder / "queries.jsonl").read_text() == "old queries\n"
    assert (folder / JOURNAL).is_file()
    staging = [p for p in folder.parent.iterdir() if p.name.startswith(".")]
    assert staging and dataset_folders(folder.parent) == [str(folder.resolve())]  # never offered as a dataset
    dataset, issues = validate(folder)
    assert dataset is None and any("interrupted" in i.message for i in issues)
    assert recover(folder) == ["queries.jsonl", "test_report.json"]
    report = json.loads((folder / "test_report.json").read_text())
    assert report["n"] == 2 and not (folder / JOURNAL).exists()
    for name in ("kb.jsonl", "queries.jsonl"):  # the folder is the new write, whole; its report vouches for it
        assert report["outputs"][name] == sha256_of((folder / name).read_bytes())
    assert [p for p in folder.parent.iterdir() if p.name.startswith(".")] == []


def test_the_next_write_completes_an_interrupted_one_first(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    staging = tmp_path / ".ds.test-cmd-x"
    staging.mkdir()
    (staging / "b.jsonl").write_text("new b\n")
    (folder / JOURNAL).write_text(json.dumps({"command": "test-cmd", "staging": staging.name,
                                              "files": ["a.jsonl", "b.jsonl"]}))
    write_dataset(folder, {"c.jsonl": "c\n"}, command="other")
    assert (folder / "b.jsonl").read_text() == "new b\n" and (folder / "c.jsonl").exists()
    assert not (folder / JOURNAL).exists() and not staging.exists()


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC])
def test_a_read_only_or_full_disk_is_one_line(tmp_path, monkeypatch, code):
    folder = tmp_path / "ds"
    write_dataset(folder, {"a.jsonl": "old\n"}, command="test-cmd", report_name="r.json")

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(tmp_path / ".ds.test-cmd-1"))

    monkeypatch.setattr("pipeline.dataset.writing.tempfile.mkdtemp", refuse)
    with pytest.raises(UserError) as refused:
        write_dataset(folder, {"a.jsonl": "new\n"}, command="test-cmd", report_name="r.json")
    assert "\n" not in str(refused.value) and os.strerror(code) in str(refused.value)
    assert "nothing written" in str(refused.value) and (folder / "a.jsonl").read_text() == "old\n"


def test_the_cli_gives_a_full_disk_in_one_line():
    code = ("import errno, pipeline.cli as c\n"
            "def full(): raise OSError(errno.ENOSPC, 'No space left on device', '/data/ds/kb.jsonl')\n"
            "c.app = full\nc.main()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize("phases", [
    [{"name": "install", "label": "installing", "started_at": "yesterday"}],
    [{"name": "install", "started_at": 1.0}],
    "not a list",
])
def test_a_malformed_launch_status_is_ignored_with_one_line(tmp_path, caplog, phases):
    db = tmp_path / "results.duckdb"
    record = {"pid": os.getpid(), "pid_started": 0.0, "url": "http://localhost:8501", "state": "setting up",
              "updated_at": time.time(), "phases": phases}
    status_path(db).write_text(json.dumps(record), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="pipeline.launch_status"):
        assert read_status(db) is None
        assert setup_status(db) is None  # the pages' read: no exception
    [note] = [r.getMessage() for r in caplog.records]
    assert "\n" not in note and "phases" in note and "ignored" in note


@pytest.mark.parametrize("stamp", ["12:00", "Jan 8", "8 Jan", "9:15 AM"])
def test_time_only_and_partial_dates_are_refused(stamp):
    with pytest.raises(UserError, match=r"log.csv:3: field timestamp: .* has no (year|month|day)"):
        _asked_on(stamp, "log.csv:3: field timestamp")


@pytest.mark.parametrize(("stamp", "day"), [("08/01/2024 09:12", date(2024, 1, 8)), ("Jan 8 2024", date(2024, 1, 8)),
                                            ("2024-01-08", date(2024, 1, 8)), ("8 January 2024, 10 AM",
                                                                              date(2024, 1, 8))])
def test_full_dates_are_read_day_first(stamp, day):
    assert _asked_on(stamp, "log.csv:3: field timestamp") == day


def test_a_csv_with_two_columns_of_one_name_is_refused(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("timestamp,message,message\n2024-01-08,Can I bathe?,Can I cook?\n", encoding="utf-8")
    records, issues = read_records(log)
    assert records == [] and len(issues) == 1
    assert (issues[0].line, issues[0].field) == (1, "message") and "2 times" in issues[0].message


def test_compare_runs_offers_only_readable_result_databases(tmp_path):
    here, other = tmp_path / "results.duckdb", tmp_path / "other.duckdb"
    for db in (here, other):
        with duckdb.connect(str(db)) as con:
            con.execute("CREATE TABLE t (a INTEGER)")
    (tmp_path / "notes.duckdb").write_text("not a database", encoding="utf-8")
    (tmp_path / "empty.duckdb").write_bytes(b"")
    assert result_files(here) == ["other.duckdb"]
