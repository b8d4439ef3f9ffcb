"""Fault injection: a real pipeline run against a server that rate-limits, fails, hangs and garbles.

The fixture server (tests/support/openai_fixture.py) answers 20% of requests with 429 (half
with Retry-After), 10% with 500, holds 5% past the client's 1 s timeout and returns 5% malformed
bodies. Every item must end completed or recorded as an error after bounded retries, none lost
or duplicated; the run's counters must match what the server saw; a rerun completes the errored
items without duplicates.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.catalog import load_config
from pipeline.runner import run
from pipeline.store import open_connection
from tests.support.datasets import write_closed_book, write_config
from tests.support.openai_fixture import Faults, FixtureServer

N_QUERIES = 40
MODELS = ("openai-compatible/fixture-a", "openai-compatible/fixture-b")
MAX_RETRIES = 2
FAULTS = Faults(rate_limit=0.20, server_error=0.10, timeout=0.05, malformed=0.05,
                retry_after_share=0.5, retry_after_s=1.0, hang_s=5.0)


def rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with open_connection(db, read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def run_row(db: Path, run_id: str) -> dict:
    (row,) = rows(db, "SELECT status, backend_calls, cache_hits, retries, errors FROM runs WHERE run_id = ?", [run_id])
    return dict(zip(("status", "backend_calls", "cache_hits", "retries", "errors"), row, strict=True))


@pytest.fixture
def server():
    with FixtureServer(latency_s=0.02, faults=FAULTS, seed=7) as s:
        yield s


def test_faults_end_completed_or_recorded_and_rerun_completes(tmp_path, server):
    dataset = write_closed_book(tmp_path / "qa", N_QUERIES)
    db = tmp_path / "results.duckdb"
    models = [{"id": m, "base_url": server.base_url, "timeout": 1.0, "max_retries": MAX_RETRIES} for m in MODELS]
    config = load_config(write_config(tmp_path / "faults.yaml", dataset=dataset, db=db, models=models,
                                      concurrency=8))
    quiet = Console(file=io.StringIO())

    first = run(config, stages="generate", console=quiet)
    seen = server.stats()
    print("server after the first run:", seen)  # shown with -s: the fault mix this seed produced
    items = N_QUERIES * len(MODELS)

    # every item is there exactly once, either completed with the server's answer or with its error
    got = rows(db, "SELECT query_id, model_id, text, error FROM responses ORDER BY query_id, model_id")
    assert len(got) == items
    assert len({(q, m) for q, m, _, _ in got}) == items
    errored = [(q, m, e) for q, m, t, e in got if e is not None]
    completed = [(q, m, t) for q, m, t, e in got if e is None]
    assert errored and completed  # the seed gives both kinds; a change of draw would show here
    assert all(t and t.startswith("echo ") for _, _, t in completed)  # the fixture's answer, stored as is
    assert all(any(kind in e for kind in ("RateLimitError", "InternalServerError", "APITimeoutError",
                                          "ValueError", "JSONDecodeError")) for _, _, e in errored)

    # the server saw every fault kind, and no content more often than the retry bound allows
    assert all(seen["outcomes"][k] > 0 for k in ("rate_limit", "server_error", "timeout", "malformed"))
    assert seen["retry_after_sent"] > 0
    assert max(int(a) for a in seen["attempts_histogram"]) <= MAX_RETRIES + 1
    assert sum(seen["attempts_histogram"].values()) == items
    # Retry-After was honoured: the same request never came back before the server's delay ran out
    assert seen["retry_after_slack_s"] and min(seen["retry_after_slack_s"]) >= -0.05

    # the run's counters agree with the server and the table
    counts = run_row(db, first)
    assert counts["status"] == "incomplete"  # some items got no answer: a rerun is needed
    assert counts["backend_calls"] == seen["requests"]
    assert counts["retries"] == seen["requests"] - items
    assert counts["errors"] == len(errored)
    assert seen["outcomes"]["ok"] == len(completed)
    assert counts["cache_hits"] == 0
    assert rows(db, "SELECT count(*) FROM llm_cache")[0][0] == len(completed)

    # an errored item used up its retries: it was asked exactly MAX_RETRIES + 1 times
    assert seen["attempts_histogram"].get(str(MAX_RETRIES + 1), 0) >= len(errored)

    # rerun with the faults gone: only the errored items are asked again; nothing is duplicated
    server.set_faults(rate_limit=0, server_error=0, timeout=0, malformed=0)
    second = run(config, stages="generate", console=quiet)
    after = server.stats()
    counts2 = run_row(db, second)
    assert after["requests"] - seen["requests"] == len(errored) == counts2["backend_calls"]
    assert counts2["errors"] == 0 and counts2["retries"] == 0 and counts2["status"] == "finished"
    final = rows(db, "SELECT query_id, model_id, run_id, text, error FROM responses")
    assert len(final) == items and all(e is None for *_, e in final)
    by_key = {(q, m): (r, t) for q, m, r, t, _ in final}
    assert all(by_key[(q, m)][0] == second for q, m, _ in errored)
    assert all(by_key[(q, m)] == (first, t) for q, m, t in completed)  # untouched
    assert rows(db, "SELECT count(*) FROM llm_cache")[0][0] == items

