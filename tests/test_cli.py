"""Bad input gets one clear line and exit 1; dry runs call nothing; the store waits out locks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest

from pipeline.catalog import load_config
from pipeline.config import ModelConfig
from pipeline.errors import UserError
from pipeline.models import create_backend, unavailable_reason
from pipeline.store import Store, open_connection
from pipeline.store.rows import MetaRow

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(("config", "expected"), [
    ("name: x\ndataset: data/cataract\nmodels: [llamacpp]\n", "field models.0.id"),
    ("name: x\ndataset: data/cataract\nmodels: [extractive/top-sentences]\nbogus: 1\n", "field bogus"),
    ("name: x\ndataset: data/cataract\nmodels: [extractive/top-sentences, extractive/top-sentences]\n",
     "listed twice"),
    ("name: x\ndataset: data/cataract\nmodels: [extractive/top-sentences]\nweights: {FC: -1}\n", "non-negative"),
    ("name: x\ndataset: data/cataract\nmodels: [extractive/top-sentences]\nconcurrency: 0\n", "field concurrency"),
    ("name: x\ndataset: data/cataract\nmodels: [extractive/top-sentences]\njudge: {id: x/y, metrics: [XX]}\n",
     "field judge.metrics"),
    ("name: x\n  dataset: [unclosed\n", "not valid YAML"),
    ("- just\n- a list\n", "mapping"),
])
def test_bad_config_is_one_line_naming_file_and_field(tmp_path, config, expected):
    path = write(tmp_path, config)
    result = cli("run", "--config", str(path), "--db", str(tmp_path / "r.duckdb"))
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and expected in lines[0]
    assert not (tmp_path / "r.duckdb").exists()  # nothing half-written


def test_missing_config_file(tmp_path):
    result = cli("run", "--config", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1 and "config file not found" in result.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["--models", "llamacpp/unknown"], "--models: llamacpp/unknown is not in the config"),
    (["--stages", "retrieve,bogus"], "unknown stage 'bogus'"),
    (["--stages", "judge"], "no `judge:` section"),
])
def test_bad_run_options(tmp_path, args, expected):
    path = write(tmp_path, f"""
        name: x
        dataset: {REPO / 'data' / 'cataract'}
        db: {tmp_path / 'r.duckdb'}
        models: [extractive/top-sentences]
    """)
    result = cli("run", "--config", str(path), *args)
    assert result.returncode == 1
    assert expected in result.stderr
    assert not (tmp_path / "r.duckdb").exists()


def test_bad_dataset_path_fails_before_writing(tmp_path):
    path = write(tmp_path, f"""
        name: x
        dataset: {tmp_path / 'missing'}
        db: {tmp_path / 'r.duckdb'}
        models: [extractive/top-sentences]
    """)
    result = cli("run", "--config", str(path))
    assert result.returncode == 1 and str(tmp_path / "missing") in result.stderr
    assert not (tmp_path / "r.duckdb").exists()


def test_status_of_missing_database(tmp_path):
    result = cli("status", "--db", str(tmp_path / "none.duckdb"))
    assert result.returncode == 1 and "no results database" in result.stderr


def test_dry_run_of_the_papers_24_models_lists_what_is_missing_and_calls_nothing(tmp_path):
    db = tmp_path / "hp24.duckdb"
    result = cli("run", "--config", "configs/health-pariksha-24.yaml", "--db", str(db), "--dry-run",
                 env={"OPENAI_API_KEY": "", "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    out = result.stderr
    config = load_config(REPO / "configs" / "health-pariksha-24.yaml")
    assert len(config.models) == 24
    for model in config.models:
        assert model.id in out
    assert "OPENAI_API_KEY is not set" in out
    assert "vLLM is not installed" in out or "no NVIDIA GPU" in out
    assert not db.exists()


def test_api_model_without_key_is_skipped_with_a_warning(tmp_path):
    path = write(tmp_path, f"""
        name: x
        dataset: {REPO / 'data' / 'cataract'}
        db: {tmp_path / 'r.duckdb'}
        limit: 2
        models: [extractive/top-sentences, {{id: openai/gpt-4o-mini, api_key_env: PARIKSHA_TEST_UNSET_KEY}}]
    """)
    result = cli("run", "--config", str(path), "--stages", "retrieve,generate", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "skipping openai/gpt-4o-mini" in result.stderr and "PARIKSHA_TEST_UNSET_KEY" in result.stderr
    with open_connection(tmp_path / "r.duckdb", read_only=True) as con:
        assert con.execute("SELECT DISTINCT model_id FROM responses").fetchall() == [("extractive/top-sentences",)]


def test_backend_errors_say_what_to_do():
    with pytest.raises(UserError, match="unknown provider 'nope'"):
        create_backend(ModelConfig(id="nope/model"))
    reason = unavailable_reason(ModelConfig(id="vllm/Qwen/Qwen2.5-72B-Instruct"))
    assert reason and ("requirements-gpu.txt" in reason or "GPU" in reason)
    with pytest.raises(UserError, match=r"vllm/Qwen/Qwen2\.5-72B-Instruct"):
        create_backend(ModelConfig(id="vllm/Qwen/Qwen2.5-72B-Instruct"))
    assert "base_url" in unavailable_reason(ModelConfig(id="openai-compatible/x"))
    assert "not found" in unavailable_reason(ModelConfig(id="llamacpp/x", path="/nonexistent.gguf"))


def test_reader_waits_out_a_writers_lock_held_by_another_process(tmp_path):
    db = tmp_path / "locked.duckdb"
    Store(db).write([MetaRow(key="k", value="v")])
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import duckdb, time, sys
        con = duckdb.connect({str(db)!r})
        con.execute("INSERT OR REPLACE INTO meta VALUES ('held', 'yes')")
        print("locked", flush=True)
        time.sleep(2.0)
        con.close()
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(duckdb.IOException):  # what a naive reader would hit
            duckdb.connect(str(db), read_only=True)
        started = time.monotonic()
        with open_connection(db, read_only=True, wait_s=30) as con:
            assert con.execute("SELECT value FROM meta WHERE key = 'held'").fetchone() == ("yes",)
        assert time.monotonic() - started > 0.5  # it really waited for the other process
    finally:
        holder.wait(timeout=30)


def test_store_writes_are_idempotent_and_concurrent_writers_in_one_process_serialise(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    rows = [MetaRow(key=f"k{i}", value=str(i)) for i in range(50)]

    def write_all():
        for i in range(0, 50, 10):
            store.write(rows[i:i + 10])

    threads = [threading.Thread(target=write_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (n,), = store.fetch("SELECT count(*) FROM meta WHERE key LIKE 'k%'")
    assert n == 50
    with pytest.raises(ValueError, match="unknown or derived table"):
        store.write_table("responses; DROP TABLE meta", None)


def test_run_summary_read_from_a_log_keeps_every_stage_and_model_whole(tmp_path):
    """Captured output (not a terminal, no COLUMNS) is not cut to 80 columns: each stage's row of the closing
    summary carries its stage name and model id whole, as runs.summary stores them."""
    import json
    import os

    path = write(tmp_path, f"""
        name: a-run-whose-name-is-long-enough-to-be-cut-at-eighty-columns
        dataset: {REPO / 'data' / 'cataract'}
        db: {tmp_path / 'r.duckdb'}
        limit: 2
        models: [extractive/top-sentences]
    """)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(path), "--stages",
                             "retrieve,generate,safety"], cwd=REPO, capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr
    with open_connection(tmp_path / "r.duckdb", read_only=True) as con:
        summary = json.loads(con.execute("SELECT summary FROM runs").fetchone()[0])
    assert {r["model_id"] for r in summary} == {"lancedb", "extractive/top-sentences", "phrase checks"}
    lines = result.stderr.splitlines()
    for record in summary:
        assert any(record["stage"] in line and record["model_id"] in line for line in lines), (record, result.stderr)
    assert "…" not in result.stderr
    assert "a-run-whose-name-is-long-enough-to-be-cut-at-eighty-columns" in result.stderr
    status = subprocess.run([sys.executable, "-m", "pipeline", "status", "--db", str(tmp_path / "r.duckdb")],
                            cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert status.returncode == 0, status.stderr
    assert "a-run-whose-name-is-long-enough-to-be-cut-at-eighty-columns" in status.stdout
    assert "extractive/top-sentences" in status.stdout and "…" not in status.stdout
