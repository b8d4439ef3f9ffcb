"""``python -m pipeline export``: every results table as Parquet or CSV that pandas reads back with the database's
row counts, provenance joined in, a manifest and a README; bad input is one line and leaves nothing behind."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline.errors import UserError
from pipeline.read.export import export
from pipeline.store import TABLES, Store, open_connection
from pipeline.store.rows import ResponseRow

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def db_counts(db: Path) -> dict[str, int]:
    with open_connection(db, read_only=True) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES if t in tables}


def test_parquet_export_reads_back_with_the_databases_row_counts(synthetic_db, tmp_path):
    out = tmp_path / "export"
    manifest = export(synthetic_db, out)
    counts = db_counts(synthetic_db)
    assert set(manifest["tables"]) == set(counts) - {"llm_cache"}  # the cache only with --with-cache
    assert "llm_cache" in manifest["left_out"]
    for table, entry in manifest["tables"].items():
        frame = pd.read_parquet(out / entry["file"])
        assert len(frame) == counts[table] == entry["rows"], table
        assert list(frame.columns) == [c["name"] for c in entry["columns"]]
        assert entry["sha256"] == hashlib.sha256((out / entry["file"]).read_bytes()).hexdigest()
    assert json.loads((out / "manifest.json").read_text()) == manifest
    readme = (out / "README.txt").read_text()
    assert all(entry["file"] in readme for entry in manifest["tables"].values())
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [e["file"] for e in manifest["tables"].values()] + ["manifest.json", "README.txt"])


def test_provenance_columns_come_from_the_run_that_wrote_each_row(synthetic_db, tmp_path):
    manifest = export(synthetic_db, tmp_path / "export", tables=["judgments", "responses", "critiques", "runs"])
    judgments = pd.read_parquet(tmp_path / "export" / "judgments.parquet")
    responses = pd.read_parquet(tmp_path / "export" / "responses.parquet")
    runs = pd.read_parquet(tmp_path / "export" / "runs.parquet").set_index("run_id")
    for frame in (judgments, responses):
        assert {"run_config_hash", "run_code_revision"} <= set(frame.columns)
        linked = frame.dropna(subset=["run_id"])
        assert len(linked) > 0
        assert (linked.run_config_hash == runs.loc[linked.run_id, "config_hash"].to_numpy()).all()
        assert (linked.run_code_revision == runs.loc[linked.run_id, "code_revision"].to_numpy()).all()
    assert {"judge_provenance", "judge_sha256", "response_prompt_hash"} <= set(judgments.columns)
    assert {"model_provenance", "model_sha256"} <= set(responses.columns)
    assert "critic_provenance" in manifest["tables"]["critiques"]["provenance_columns"]
    # a judgment of the stored response text carries that response's generation prompt hash
    current = judgments.merge(responses, on=["dataset", "query_id", "model_id", "response_hash"])
    assert len(current) > 0 and (current.response_prompt_hash == current.prompt_hash).all()


def test_csv_export_of_chosen_tables_with_the_cache(synthetic_db, tmp_path):
    out = tmp_path / "csv"
    result = cli("export", "--db", str(synthetic_db), "--out", str(out), "--format", "csv",
                 "--tables", "queries,judgments,llm_cache")
    assert result.returncode == 0, result.stderr
    counts = db_counts(synthetic_db)
    manifest = json.loads((out / "manifest.json").read_text())
    assert list(manifest["tables"]) == ["queries", "judgments", "llm_cache"] and manifest["format"] == "csv"
    for table in manifest["tables"]:
        assert len(pd.read_csv(out / f"{table}.csv")) == counts[table], table
    assert "3 csv files" in result.stderr


def test_with_cache_adds_llm_cache(synthetic_db, tmp_path):
    manifest = export(synthetic_db, tmp_path / "all", with_cache=True)
    assert "llm_cache" in manifest["tables"] and not manifest["left_out"]
    assert len(pd.read_parquet(tmp_path / "all" / "llm_cache.parquet")) == db_counts(synthetic_db)["llm_cache"]


@pytest.mark.parametrize(("db", "out", "extra", "expected"), [
    ("none.duckdb", None, [], "no results database here"),
    ("notes.txt", None, [], "not a valid DuckDB database"),
    (None, "notes.txt", [], "is a file"),
    (None, "busy", [], "already exists and is not empty"),
    (None, "busy", ["--force"], "not an earlier export"),
    (None, None, ["--tables", "judgments,bogus"], "unknown table 'bogus'"),
    (None, None, ["--format", "xlsx"], "'xlsx' is not one of parquet, csv"),
])
def test_bad_db_or_out_is_one_line_and_leaves_nothing_behind(synthetic_db, tmp_path, db, out, extra, expected):
    (tmp_path / "notes.txt").write_text("not a database")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep me")
    result = cli("export", "--db", str(tmp_path / db if db else synthetic_db),
                 "--out", str(tmp_path / (out or "out")), *extra)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1 and expected in lines[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "notes.txt"]  # no half-written folder
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep me"


def test_force_replaces_an_earlier_export_only_when_done(synthetic_db, tmp_path):
    out = tmp_path / "export"
    export(synthetic_db, out, tables=["queries"])
    with pytest.raises(UserError, match="already exists"):
        export(synthetic_db, out, tables=["runs"])
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_text("not a database")
    with pytest.raises(UserError, match="not a valid DuckDB"):  # a failed export leaves the earlier one as it was
        export(bogus, out, force=True)
    bogus.unlink()
    assert (out / "queries.parquet").is_file()
    export(synthetic_db, out, tables=["runs"], force=True)
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "manifest.json", "runs.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_export_reads_while_another_reader_holds_the_file(synthetic_db, tmp_path):
    """The export's connection is read-only: it shares the file with a dashboard's reader."""
    with open_connection(synthetic_db, read_only=True) as con:
        con.execute("SELECT count(*) FROM responses").fetchone()
        manifest = export(synthetic_db, tmp_path / "export", tables=["responses"])
    assert manifest["tables"]["responses"]["rows"] == db_counts(synthetic_db)["responses"]


def _small_db(path: Path, model_id: str = "openai-compatible/fixture") -> Path:
    """A results database with one run and one response of ``model_id`` (its provenance recorded by the run)."""
    store = Store(path)
    run_id = store.start_run(name="small", kind="pipeline", dataset="d", config_json="{}", config_hash="h",
                             code_revision="r", model_files={})
    store.update_run(run_id, model_files=json.dumps({model_id: {"base_url": "http://127.0.0.1:9/v1",
                                                                "sha256": "f00d"}}))
    store.write([ResponseRow(dataset="d", query_id="q1", model_id=model_id, run_id=run_id, prompt_hash="p",
                             text="=HYPERLINK(\"http://example.invalid\")", error=None, latency_s=0.1)])
    return path


@pytest.mark.parametrize("model_id", ['openai-compatible/dr "rao"', "openai-compatible/back\\slash"])
def test_a_model_id_with_quotes_exports_with_its_provenance(tmp_path, model_id):
    db = _small_db(tmp_path / "r.duckdb", model_id)
    export(db, tmp_path / "out")
    frame = pd.read_parquet(tmp_path / "out" / "responses.parquet")
    assert frame.model_id.tolist() == [model_id] and frame.model_sha256.tolist() == ["f00d"]
    assert json.loads(frame.model_provenance[0]) == {"base_url": "http://127.0.0.1:9/v1", "sha256": "f00d"}


def test_force_keeps_what_the_user_added_to_an_earlier_export(tmp_path):
    db = _small_db(tmp_path / "r.duckdb")
    out = tmp_path / "export"
    export(db, out, tables=["responses"])
    (out / "notes.md").write_text("my reading of the numbers", encoding="utf-8")
    (out / "figures").mkdir()
    (out / "figures" / "bars.png").write_bytes(b"png")
    export(db, out, tables=["runs"], force=True)
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "figures", "manifest.json", "notes.md",
                                                     "runs.parquet"]
    assert (out / "notes.md").read_text(encoding="utf-8") == "my reading of the numbers"
    assert (out / "figures" / "bars.png").read_bytes() == b"png"
    # a file of the user's that the new export would overwrite: refused, the folder as it was
    (out / "responses.parquet").write_bytes(b"mine")
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(UserError, match=r"responses\.parquet was not written by the earlier export"):
        export(db, out, tables=["responses"], force=True)
    assert sorted(p.name for p in out.iterdir()) == before and (out / "responses.parquet").read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "r.duckdb"]


def test_csv_cells_a_spreadsheet_would_run_are_neutralised_parquet_keeps_them(tmp_path):
    db = _small_db(tmp_path / "r.duckdb", "-model")
    export(db, tmp_path / "csv", fmt="csv", tables=["responses"])
    with (tmp_path / "csv" / "responses.csv").open(encoding="utf-8", newline="") as fh:
        row = next(csv.DictReader(fh))
    assert row["text"] == "'=HYPERLINK(\"http://example.invalid\")" and row["model_id"] == "'-model"
    assert row["query_id"] == "q1" and float(row["latency_s"]) == 0.1  # other cells and numbers as they are
    export(db, tmp_path / "parquet", tables=["responses"])
    frame = pd.read_parquet(tmp_path / "parquet" / "responses.parquet")
    assert frame.text.tolist() == ["=HYPERLINK(\"http://example.invalid\")"] and frame.model_id.tolist() == ["-model"]
