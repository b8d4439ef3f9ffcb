"""Robustness of a run against what real endpoints and real users do.

- An endpoint that is down is noticed once (circuit breaker): its model's remaining items are recorded as errors
  in one line, the other models go on, the run says it is incomplete and exits 1, and the next run retries them.
- One run at a time per database (a lock beside it): a second run stops with one line naming the first; a run
  killed with ``kill -9`` is shown as interrupted by ``status`` and recorded so by the next run.
- An output a step cannot read (judge, rubric grader, critic, teacher, accuracy checker) is asked again as a new
  sample, a bounded number of times; every attempt is cached and counted; what stays unreadable is stored as
  unparsed, counted as an error and asked again by the next run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.catalog import load_config
from pipeline.runner import execute
from pipeline.store import open_connection
from tests.support.datasets import write_closed_book, write_config
from tests.support.openai_fixture import Faults, FixtureServer

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
DEAD = "openai-compatible/dead"


def rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with open_connection(db, read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released): connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_dead_endpoint_is_noticed_once_and_the_next_run_retries(tmp_path):
    n = 80
    dataset = write_closed_book(tmp_path / "qa", n)
    db = tmp_path / "results.duckdb"
    dead = {"id": DEAD, "base_url": f"http://127.0.0.1:{closed_port()}/v1", "timeout": 5.0}
    path = write_config(tmp_path / "dead.yaml", dataset=dataset, db=db,
                        models=[dead, {"id": SMOLLM2, "max_tokens": 4}])

    started = time.monotonic()
    first = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(path), "--stages", "generate"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    err = first.stderr
    assert first.returncode == 1 and took < 120, (took, err[-3000:])
    # the closing line says the run is incomplete, how many items got no answer, which endpoint is down and what
    # failed there, and how to resume (the same line is printed when the breaker opens, unless llama.cpp's model
    # load has muted stderr at that moment)
    closing = err.splitlines()[-1]
    assert f"incomplete: {n} item(s) got no answer (generate {DEAD} {n}); endpoint down: {DEAD} at " \
           f"{dead['base_url']}: 3 calls in a row got no answer" in closing, err[-3000:]
    assert "ConnectionRefusedError" in closing and closing.endswith("rerun the same command to retry them")

    answered = rows(db, "SELECT count(*) FROM responses WHERE model_id = ? AND error IS NULL AND text <> ''",
                    [SMOLLM2])[0][0]
    assert answered == n  # the working model went on
    errors = rows(db, "SELECT error FROM responses WHERE model_id = ?", [DEAD])
    assert len(errors) == n and all(e and "taken as down" in e for (e,) in errors)
    (status, calls, run_errors), = rows(db, "SELECT status, backend_calls, errors FROM runs")
    # the breaker opened after 3 unanswered calls; calls already in flight (concurrency 8) and their retries
    # stop there: far fewer than n × (max_retries + 1)
    assert status == "incomplete" and run_errors == n and calls <= n + 8 * 2
    assert rows(db, "SELECT count(*) FROM llm_cache WHERE model_id = ?", [DEAD])[0][0] == 0  # errors not cached

    # the endpoint is back: the next run asks again for the dead model's items only
    with FixtureServer(latency_s=0.0) as server:
        write_config(path, dataset=dataset, db=db, models=[{**dead, "base_url": server.base_url},
                                                           {"id": SMOLLM2, "max_tokens": 4}])
        result = execute(load_config(path), stages="generate")
        assert server.stats()["requests"] == n
    assert result.status == "finished" and result.exit_code == 0 and result.closing_line() is None
    by_model = {r.model_id: r for r in result.records}
    assert by_model[SMOLLM2].items == 0 and by_model[SMOLLM2].skipped == n
    assert rows(db, "SELECT count(*) FROM responses WHERE error IS NULL")[0][0] == 2 * n


def test_a_run_whose_every_call_failed_says_so(tmp_path):
    dataset = write_closed_book(tmp_path / "qa", 5)
    dead = {"id": DEAD, "base_url": f"http://127.0.0.1:{closed_port()}/v1", "timeout": 5.0}
    config = load_config(write_config(tmp_path / "dead.yaml", dataset=dataset, db=tmp_path / "r.duckdb",
                                      models=[dead]))
    result = execute(config, stages="generate")
    assert (result.status, result.exit_code, result.unanswered) == ("incomplete", 1, 5)
    assert f"incomplete: every backend call failed: 5 item(s) got no answer (generate {DEAD} 5)" in \
        result.closing_line()
    assert rows(tmp_path / "r.duckdb", "SELECT status, errors FROM runs") == [("incomplete", 5)]


def _status(db: Path) -> dict[str, str]:
    """run_id -> status as ``python -m pipeline status`` prints it."""
    out = subprocess.run([sys.executable, "-m", "pipeline", "status", "--db", str(db)], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert out.returncode == 0, out.stderr[-2000:]
    ids = [r for (r,) in rows(db, "SELECT run_id FROM runs")]
    shown = {}
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        for run_id in ids:
            if run_id in cells:
                shown[run_id] = cells[cells.index(run_id) + 2]  # run_id, name, status
    return shown


def test_one_run_at_a_time_and_a_killed_run_is_interrupted(tmp_path):
    n = 80  # 40 s of work at concurrency 1: still running when it is killed
    dataset = write_closed_book(tmp_path / "qa", n)
    db = tmp_path / "results.duckdb"
    with FixtureServer(latency_s=0.5) as server:
        model = {"id": "openai-compatible/slow", "base_url": server.base_url}
        slow = write_config(tmp_path / "slow.yaml", dataset=dataset, db=db, models=[model], concurrency=1)
        cmd = [sys.executable, "-m", "pipeline", "run", "--config", str(slow), "--stages", "generate"]
        first = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.3)
                if db.exists() and server.stats()["requests"] >= 2:
                    break
            assert first.poll() is None, "the first run ended before the test could look at it"
            (run_id,), = rows(db, "SELECT run_id FROM runs")
            assert _status(db) == {run_id: "running"}  # it holds the lock: running

            # a second run on the same database stops at once with one line naming the first; no call is made twice
            second = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
            assert second.returncode == 1
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1 and f"is being written by run {run_id} (pid {first.pid} on " in lines[0], lines
            assert rows(db, "SELECT count(*) FROM runs")[0][0] == 1

            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                first.kill()
        assert set(server.stats()["attempts_histogram"]) == {"1"}  # no prompt was sent twice
        assert rows(db, "SELECT status FROM runs")[0][0] == "running"  # nothing could record its end
        assert _status(db) == {run_id: "interrupted"}  # its lock is free: not running

        # the next run records it as interrupted and finishes the rest
        fast = write_config(tmp_path / "fast.yaml", dataset=dataset, db=db, models=[model], concurrency=80)
        result = execute(load_config(fast), stages="generate")
    assert result.status == "finished"
    assert dict(rows(db, "SELECT run_id, status FROM runs")) == {run_id: "interrupted", result.run_id: "finished"}
    assert rows(db, "SELECT count(*), count(DISTINCT query_id) FROM responses WHERE error IS NULL")[0] == (n, n)


RUBRIC = [{"criterion": "Advises asking the eye team before restarting.", "points": 5, "tags": ["axis:accuracy"]},
          {"criterion": "Tells the patient to stop the drops at once.", "points": -3, "tags": ["axis:accuracy"]}]
ROLES = ("judge", "grader", "critic", "teacher", "checker")


def _scoring_config(tmp_path: Path, server: FixtureServer, n: int, **fields) -> Path:
    """Every scoring role on the fixture server (its own model id each); the answers come from the extractive
    baseline. Stages: judge, rubric, medcode (critic, logprobs), medcode-label (teacher), accuracy (checker)."""
    dataset = write_closed_book(tmp_path / "qa", n, rubric=RUBRIC)
    role = {r: {"id": f"openai-compatible/{r}", "base_url": server.base_url, "max_retries": 0} for r in ROLES}
    return write_config(tmp_path / "scoring.yaml", dataset=dataset, db=tmp_path / "results.duckdb",
                        models=[{"id": "extractive/top-sentences"}], judge={**role["judge"], "metrics": ["FC", "COH"]},
                        rubric_grader=role["grader"], llm_accuracy=role["checker"],
                        medcode={"critic": role["critic"], "classifier": "logprobs", "teacher": role["teacher"]},
                        **fields)


STAGES = "generate,judge,rubric,medcode,medcode-label,accuracy"
UNPARSED = {  # the rows of each step that hold an output it could not read
    "judge": "SELECT count(*) FILTER (WHERE NOT parse_ok), count(*) FROM judgments",
    "rubric": "SELECT count(*) FILTER (WHERE met IS NULL), count(*) FROM rubric_grades",
    "medcode-critique": "SELECT count(*) FILTER (WHERE error IS NOT NULL), count(*) FROM critiques",
    "medcode-label": "SELECT count(*) FILTER (WHERE label IS NULL), count(*) FROM labelled_critiques",
    "llm-accuracy": "SELECT count(*) FILTER (WHERE correct IS NULL), count(*) FROM answer_checks WHERE method = 'llm'",
}
ITEMS = {"judge": 2, "rubric": len(RUBRIC), "medcode-critique": 1, "medcode-label": 1, "llm-accuracy": 1}  # a query


def test_an_output_read_badly_once_is_asked_again(tmp_path):
    n = 4
    with FixtureServer(latency_s=0.0, faults=Faults(unparsable_first=1)) as server:
        result = execute(load_config(_scoring_config(tmp_path, server, n)), stages=STAGES)
        seen = server.stats()
    db = tmp_path / "results.duckdb"
    records = {r.stage: r for r in result.records if r.stage in UNPARSED}
    for stage, sql in UNPARSED.items():
        assert rows(db, sql)[0] == (0, n * ITEMS[stage]), stage  # every item parsed in the end
        record = records[stage]
        assert (record.items, record.reasked, record.unparsed, record.errors) == (n * ITEMS[stage],) * 2 + (0, 0)
        assert record.usage.backend_calls == 2 * record.items  # both attempts made and counted
    # every re-asked prompt reached the server twice (the critic's classify prompt, not re-asked, once)
    classify = records["medcode-critique"].items
    assert seen["attempts_histogram"] == {"2": sum(ITEMS.values()) * n, "1": classify}
    assert result.status == "finished" and result.exit_code == 0
    (calls, errors), = rows(db, "SELECT backend_calls, errors FROM runs")
    assert calls == seen["requests"] + n and errors == 0  # and the extractive baseline's n answers
    # each attempt is its own cache entry: a new sample (its own sample index and seed), at the re-ask temperature
    asked = [json.loads(r)["params"] for (r,) in rows(db, "SELECT request FROM llm_cache WHERE model_id = ?",
                                                       ["openai-compatible/judge"])]
    assert sorted((p["sample"], p["temperature"]) for p in asked) == [(0, 0.0)] * 2 * n + [(1000, 0.5)] * 2 * n


def test_an_output_never_read_is_unparsed_after_the_attempts_and_an_error(tmp_path):
    n = 3
    with FixtureServer(latency_s=0.0, faults=Faults(unparsable_first=100)) as server:
        config = load_config(_scoring_config(tmp_path, server, n))
        first = execute(config, stages=STAGES)
        after_first = server.stats()
        db = tmp_path / "results.duckdb"
        for stage, sql in UNPARSED.items():
            items = n * ITEMS[stage]
            record = next(r for r in first.records if r.stage == stage)
            assert rows(db, sql)[0] == (items, items), stage  # stored as unparsed, with the raw output
            assert (record.reasked, record.unparsed, record.errors) == (2 * items, items, items), stage
            assert record.usage.backend_calls == 3 * items  # reask.times = 2: three attempts
        assert "3" in after_first["attempts_histogram"] and set(after_first["attempts_histogram"]) <= {"1", "3"}
        # unparsed outputs are errors of their stages, but answers: the run is not incomplete
        assert first.status == "finished" and first.exit_code == 0
        assert rows(db, "SELECT errors FROM runs")[0][0] == sum(n * k for k in ITEMS.values())

        # `status` shows the rubric grades and how many are unparsed
        out = subprocess.run([sys.executable, "-m", "pipeline", "status", "--db", str(db)], cwd=REPO,
                             capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
        header = next(line for line in out.stdout.splitlines() if "rubric_grades" in line)
        row = next(line for line in out.stdout.splitlines() if "extractive/top-sentences" in line)
        cells = dict(zip([c.strip() for c in header.split("┃")], [c.strip() for c in row.split("│")], strict=True))
        assert (cells["rubric_grades"], cells["rubric_unparsed"]) == (str(n * 2), str(n * 2))
        assert (cells["judgments"], cells["parse_failures"]) == (str(n * 2), str(n * 2))

        # a rerun asks the unparsed items again (three new attempts each: the earlier ones come from the cache) ...
        second = execute(config, stages="judge")
        judge = next(r for r in second.records if r.stage == "judge")
        assert (judge.items, judge.usage.backend_calls, judge.usage.cache_hits) == (2 * n, 6 * n, 6 * n)
        # per item: the first ask and two re-asks replayed from the cache, then three re-asks sent (not 5 "re-asks")
        assert (judge.reasked, judge.replayed, judge.unparsed) == (3 * 2 * n, 2 * 2 * n, 2 * n)
        # ... unless the config says not to
        off = load_config(_scoring_config(tmp_path, server, n, reask={"on_rerun": False}))
        third = execute(off, stages="judge")
    judge = next(r for r in third.records if r.stage == "judge")
    assert (judge.items, judge.skipped, judge.usage.backend_calls) == (0, 2 * n, 0)
