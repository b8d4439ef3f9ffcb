"""Bad input and hostile input found by an independent pass (issue 29, item 6): each case is refused with one line
or handled, and nothing the user owns is overwritten or deleted."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from pipeline.catalog import load_config
from pipeline.dataset import load_dataset
from pipeline.errors import UserError
from pipeline.runner import run
from pipeline.store import open_connection
from tests.support.datasets import answered_db, write_closed_book, write_config

REPO = Path(__file__).resolve().parent.parent
QA_FIXTURES = REPO / "tests" / "fixtures" / "qa"


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, check=False)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


# -- import-qa never overwrites a dataset unless --force -------------------------------------------------------
def test_import_qa_refuses_a_folder_that_holds_a_dataset(tmp_path):
    out = tmp_path / "eyecare-qa"
    shutil.copytree(REPO / "data" / "eyecare-qa", out)
    before = (out / "queries.jsonl").read_bytes()
    medqa = str(QA_FIXTURES / "medqa_us_test.jsonl")
    line = _one_error_line(_cli("import-qa", "medqa", medqa, str(out)))
    assert str(out) in line and "queries.jsonl" in line and "--force" in line
    assert (out / "queries.jsonl").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eyecare-qa"]  # no temporary folder left
    proc = _cli("import-qa", "medqa", medqa, str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert len((out / "queries.jsonl").read_text(encoding="utf-8").splitlines()) == 3


# -- a db: that is a folder is one line ---------------------------------------------------------------------------
def test_db_that_is_a_folder_is_one_line(tmp_path):
    dataset = write_closed_book(tmp_path / "qa", 2)
    (tmp_path / "results").mkdir()
    config = write_config(tmp_path / "run.yaml", dataset=dataset, db=tmp_path / "results",
                          models=["extractive/top-sentences"])
    line = _one_error_line(_cli("run", "--config", str(config)))
    assert f"field db: Value error, {tmp_path / 'results'} is a folder" in line
    line = _one_error_line(_cli("run", "--config", str(config), "--db", str(tmp_path)))
    assert f"{tmp_path} is a folder" in line
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == []


# -- any folder name is a dataset name LanceDB can index ----------------------------------------------------------
@pytest.mark.parametrize("folder", ["cataract v2", "o'brien set"])
def test_retrieval_runs_on_a_folder_name_with_spaces_and_quotes(tmp_path, folder):
    dataset = tmp_path / folder
    dataset.mkdir()
    chunks = (REPO / "data" / "cataract" / "kb.jsonl").read_text(encoding="utf-8").splitlines()[:8]
    (dataset / "kb.jsonl").write_text("\n".join(chunks) + "\n", encoding="utf-8")
    queries = [json.loads(line) for line in (REPO / "data" / "cataract" / "queries.jsonl").read_text(
        encoding="utf-8").splitlines()[:3]]
    (dataset / "queries.jsonl").write_text("".join(json.dumps({**q, "kb_refs": []}) + "\n" for q in queries),
                                           encoding="utf-8")
    db = tmp_path / "results.duckdb"
    config = load_config(write_config(tmp_path / "run.yaml", dataset=dataset, db=db,
                                      models=["extractive/top-sentences"]))
    run(config, stages="retrieve", console=Console(file=io.StringIO()))
    with open_connection(db, read_only=True) as con:
        rows = con.execute("SELECT count(*), min(len(raw_ids)) FROM retrievals WHERE dataset = ?", [folder]).fetchone()
    assert rows[0] == 3 and rows[1] > 0


# -- a dataset reads only its own files -------------------------------------------------------------------------
def test_a_link_out_of_the_dataset_folder_is_refused(tmp_path):
    secret = tmp_path / "private" / "notes.txt"
    secret.parent.mkdir()
    secret.write_text("patient register, not for any model\n", encoding="utf-8")
    dataset = write_closed_book(tmp_path / "qa", 2)
    (dataset / "prompts").mkdir()
    (dataset / "prompts" / "closed_book_system.txt").symlink_to(secret)
    proc = _cli("validate", str(dataset))
    assert proc.returncode == 1
    errors = [line for line in proc.stdout.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {dataset / 'prompts' / 'closed_book_system.txt'}: a link to {secret}, outside the "
                      f"dataset folder; copy the file into {dataset} instead"]
    with pytest.raises(UserError, match="outside the dataset folder"):
        load_dataset(dataset)
    # the prompts folder itself, and the queries file, as links: refused alike; a link inside the folder is fine
    (dataset / "prompts" / "closed_book_system.txt").unlink()
    (dataset / "prompts").rmdir()
    (dataset / "prompts").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(UserError, match=r"prompts: a link to .*private, outside"):
        load_dataset(dataset)
    (dataset / "prompts").unlink()
    outside = write_closed_book(tmp_path / "elsewhere", 2)
    (dataset / "queries.jsonl").unlink()
    (dataset / "queries.jsonl").symlink_to(outside / "queries.jsonl")
    with pytest.raises(UserError, match=r"queries\.jsonl: a link to .*elsewhere/queries\.jsonl, outside"):
        load_dataset(dataset)
    (dataset / "queries.jsonl").unlink()
    (outside / "queries.jsonl").rename(dataset / "kept.jsonl")
    (dataset / "queries.jsonl").symlink_to(dataset / "kept.jsonl")
    assert len(load_dataset(dataset).queries) == 2


# -- the dashboard's CSV downloads: no formula a spreadsheet would run ---------------------------------------------
def test_dashboard_csv_download_neutralises_formulas_parquet_keeps_raw_text():
    from pages._ui import table_bytes

    cells = ["=cmd|' /C calc'!A0", "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx", "fine - not a formula", "a\r=1+2", None]
    frame = pd.DataFrame({"text": cells, "score": [-0.5] * len(cells), "=col": ["a"] * len(cells)})
    header, *rows = csv.reader(io.StringIO(table_bytes(frame, "csv").decode("utf-8"), newline=""))
    assert header == ["text", "score", "'=col"]
    assert [r[0] for r in rows] == ["'=cmd|' /C calc'!A0", "'+1+2", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx",
                                    "fine - not a formula", "a\r=1+2", ""]  # a carriage return inside: quoted
    assert {r[1] for r in rows} == {"-0.5"}  # numbers are not text: written as they are
    raw = pd.read_parquet(io.BytesIO(table_bytes(frame, "parquet")))
    assert raw.text.tolist()[:-1] == cells[:-1] and list(raw.columns) == ["text", "score", "=col"]


# -- Compare runs opens only result databases of the results folder ------------------------------------------------
def test_compare_runs_opens_only_files_of_the_results_folder(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from pages import _data as data

    runs = tmp_path / "runs"
    runs.mkdir()
    a_db = answered_db(runs, name="a.duckdb")
    shutil.copy(a_db, runs / "b.duckdb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(a_db, elsewhere / "private.duckdb")
    (runs / "linked.duckdb").symlink_to(elsewhere / "private.duckdb")  # a link out of the folder is not offered
    data.clear_caches()
    monkeypatch.setenv("PARIKSHA_DB", str(a_db))

    def page(**params: str) -> AppTest:
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
        at.query_params.update(params)
        at.run()
        at.switch_page("pages/9_compare_runs.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    for hostile in ("/etc/passwd", str(elsewhere / "private.duckdb"), "../elsewhere/private.duckdb",
                    "linked.duckdb", "missing.duckdb"):
        at = page(cr_b_path=hostile, cr_b_db=hostile)
        assert at.selectbox(key="cr_b_db").options == ["b.duckdb"] and at.selectbox(key="cr_b_db").value == "b.duckdb"
        assert not at.text_input  # no path box: B is chosen from the list
        shown = " ".join(str(e.value) for e in (*at.caption, *at.error, *at.info, *at.markdown))
        assert "passwd" not in shown and "elsewhere" not in shown and "missing" not in shown
        assert f"B: {runs / 'b.duckdb'}" in shown.replace("\\", "")
    monkeypatch.setenv("PARIKSHA_RESULTS_DIR", str(elsewhere))  # another results folder, named explicitly
    assert page(cr_b_db="private.duckdb").selectbox(key="cr_b_db").value == "private.duckdb"
