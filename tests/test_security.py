"""Secrets: an API key from the environment never reaches the database, the logs or the provenance.

`python -m pipeline run` drives the fixture server, which insists on the key in the
Authorization header (so it was really sent) and answers some requests with a 500 whose body
echoes the request headers, key included, as a misbehaving proxy might. The openai client puts
that body into its exception message, and the error of an item is stored; the key must not be.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pipeline.config import ModelConfig
from pipeline.models import create_backend
from pipeline.models.base import ChatRequest, Model
from pipeline.store import TABLES, open_connection
from tests.support.datasets import write_closed_book, write_config
from tests.support.openai_fixture import Faults, FixtureServer

REPO = Path(__file__).resolve().parent.parent
KEY_ENV = "PARIKSHA_TEST_API_KEY"
N_QUERIES = 12


@pytest.fixture
def canary() -> str:
    return f"sk-canary-{secrets.token_hex(16)}"


@pytest.fixture
def server(canary):
    faults = Faults(echo_headers=0.4, rate_limit=0.1, server_error=0.1)
    with FixtureServer(latency_s=0.01, faults=faults, seed=3, api_key_env=KEY_ENV, env={KEY_ENV: canary}) as s:
        yield s


def all_text(db: Path) -> list[str]:
    """Every VARCHAR value of every table of the results database."""
    values: list[str] = []
    with open_connection(db, read_only=True) as con:
        existing = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table, spec in TABLES.items():
            if table not in existing:
                continue
            text_columns = [name for name, sql_type in spec.columns if sql_type.startswith("VARCHAR")]
            for column in text_columns:
                values += [str(v) for (v,) in con.execute(f"SELECT {column} FROM {table}").fetchall() if v]
    return values


def test_echoing_server_shows_the_key_to_a_client(server, canary):
    """Control: the fixture really sends the key back in an error body (else the test below proves nothing)."""
    server.set_faults(echo_headers=1.0, rate_limit=0, server_error=0)
    reply = httpx.post(f"{server.base_url}/chat/completions", headers={"Authorization": f"Bearer {canary}"},
                       json={"model": "m", "messages": [{"role": "user", "content": "control"}]})
    assert reply.status_code == 500 and canary in reply.text
    wrong = httpx.post(f"{server.base_url}/chat/completions", headers={"Authorization": "Bearer wrong"},
                       json={"model": "m", "messages": [{"role": "user", "content": "control"}]})
    assert wrong.status_code == 401


def test_api_key_never_stored_logged_or_recorded(tmp_path, server, canary):
    dataset = write_closed_book(tmp_path / "qa", N_QUERIES)
    db = tmp_path / "results.duckdb"
    config = write_config(tmp_path / "secure.yaml", dataset=dataset, db=db, models=[
        {"id": "openai-compatible/fixture", "base_url": server.base_url, "api_key_env": KEY_ENV,
         "timeout": 5.0, "max_retries": 0},
    ])
    env = {**os.environ, KEY_ENV: canary}
    proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(config), "--stages", "generate"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]  # the echoed-header 500s left items without an answer

    seen = server.stats()
    assert seen.get("unauthorized", 0) == 0  # every request carried the key
    assert seen["outcomes"]["echo_headers"] > 0 and seen["outcomes"]["ok"] > 0

    # the echoed headers did reach the stored errors, with the key masked
    with open_connection(db, read_only=True) as con:
        errors = [e for (e,) in con.execute("SELECT error FROM responses WHERE error IS NOT NULL").fetchall()]
        config_json, model_files = con.execute("SELECT config, model_files FROM runs").fetchone()
        assert con.execute("SELECT count(*) FROM responses").fetchone()[0] == N_QUERIES
    echoed = [e for e in errors if "authorization" in e]
    assert len(echoed) == seen["outcomes"]["echo_headers"]
    assert all(canary not in e for e in errors)
    assert all("[redacted]" in e for e in echoed)

    # not in any value of any table, nor in the provenance, nor in the logs
    assert not [v for v in all_text(db) if canary in v]
    assert canary not in config_json and canary not in model_files
    assert KEY_ENV in config_json  # the variable's name is recorded, its value is not
    assert canary not in proc.stdout and canary not in proc.stderr

    # nor in the raw bytes of the database files (before the fix this found the key in results.duckdb)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".duckdb", ".wal")]
    assert db in files
    for path in files:
        assert canary.encode() not in path.read_bytes(), path


def test_key_echoed_in_an_answer_is_masked_where_it_is_stored_and_streamed(tmp_path, server, canary, monkeypatch):
    """An endpoint that quotes the request's key in a successful answer: the answer is stored (responses,
    llm_cache) and streamed (the playground) with the key masked, however the stream splits it."""
    server.set_faults(echo_headers=0, rate_limit=0, server_error=0, echo_key=1.0)
    dataset = write_closed_book(tmp_path / "qa", 4)
    db = tmp_path / "results.duckdb"
    model = {"id": "openai-compatible/fixture", "base_url": server.base_url, "api_key_env": KEY_ENV,
             "timeout": 5.0, "max_retries": 0}
    config = write_config(tmp_path / "echo.yaml", dataset=dataset, db=db, models=[model])
    proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(config), "--stages", "generate"],
                          cwd=REPO, env={**os.environ, KEY_ENV: canary}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert server.stats()["outcomes"]["echo_key"] == 4
    with open_connection(db, read_only=True) as con:
        answers = [t for (t,) in con.execute("SELECT text FROM responses").fetchall()]
        cached = [t for (t,) in con.execute("SELECT text FROM llm_cache").fetchall()]
    assert len(answers) == len(cached) == 4
    assert all(t.endswith("; sent with key [redacted]") for t in answers + cached), answers
    assert not [v for v in all_text(db) if canary in v]
    assert canary.encode() not in db.read_bytes()

    monkeypatch.setenv(KEY_ENV, canary)
    live = Model(create_backend(ModelConfig(**model)))
    request = ChatRequest(messages=({"role": "user", "content": "is it safe to rub my eye?"},))
    pieces = list(live.stream(request))
    assert len(pieces) > 3 and "".join(pieces).endswith("; sent with key [redacted]")
    assert canary not in "".join(pieces)
