"""The dashboard first, the evaluation streaming into it (``serve-and-run``, what ``make run`` does).

The launcher serves the dashboard on an empty database, then runs two evaluations in the background (as ``make
eval`` runs two configs). Their models answer through the fixture server with a delay, so that a browser can watch:
the home page's live panel advances on its own (items done, stage), and the leaderboard gains rows while the
evaluation goes on. Ctrl-C (SIGINT to the launcher) then stops the dashboard and leaves no process behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
from playwright.sync_api import Error as PlaywrightError

from tests.support.browser import BROWSER, REPO, free_port, main_text, no_exception, settle
from tests.support.openai_fixture import FixtureServer

pytestmark = BROWSER

JUDGE_REPLY = json.dumps({"score": 2, "justification": "Matches the ground truth."})
N_QUERIES = 8


def _config(path: Path, db: Path, model: str, generator: FixtureServer, judge: FixtureServer) -> Path:
    path.write_text(textwrap.dedent(f"""
        name: live-{model}
        dataset: {REPO / 'data' / 'eyecare-qa'}
        db: {db}
        limit: {N_QUERIES}
        models: [{{id: openai-compatible/{model}, base_url: "{generator.base_url}", concurrency: 1}}]
        judge: {{id: openai-compatible/fixture-judge, base_url: "{judge.base_url}", metrics: [FC], concurrency: 1}}
    """), encoding="utf-8")
    return path


def _statuses(db: Path) -> list[str]:
    """The runs' statuses in ``db``, oldest first (a short read-only look, as the dashboard's); [] before any."""
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            return [r[0] for r in con.execute("SELECT status FROM runs ORDER BY started_at").fetchall()]
    except duckdb.Error:  # not created yet, or the writer holds it this instant
        return []


def _leaderboard_rows(page) -> int:
    """Rows (models) of the leaderboard, as its heading says ("English (en): 2 models"); 0 before any."""
    found = re.search(r"English \(en\): (\d+) models", main_text(page))
    return int(found.group(1)) if found else 0


def test_home_page_follows_the_run_and_the_leaderboard_fills_in(tmp_path, page):
    db = tmp_path / "live.duckdb"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with FixtureServer(latency_s=0.8) as generator, FixtureServer(latency_s=0.3, reply=JUDGE_REPLY) as judge:
        runs = [_config(tmp_path / f"{m}.yaml", db, m, generator, judge) for m in ("slow-a", "slow-b")]
        serve = (f"{sys.executable} -m streamlit run app.py --server.port {port} --server.address 127.0.0.1 "
                 "--server.headless true --browser.gatherUsageStats false")
        then = [f"{sys.executable} -m pipeline run --config {c} --stages generate,judge" for c in runs]
        started = time.monotonic()
        launcher = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "serve-and-run", "--serve", serve, "--url", url,
             *(a for t in then for a in ("--then", t))],
            cwd=REPO, env={**os.environ, "PARIKSHA_DB": str(db)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:  # the dashboard answers before any result exists
                try:
                    page.goto(url)
                    break
                except PlaywrightError:  # not listening yet
                    time.sleep(0.3)
            served_s = time.monotonic() - started
            settle(page)
            no_exception(page)

            # while the evaluation goes on: the home page follows it by itself (items done of total advance, no
            # reload), and the leaderboard, reloaded in a second tab, gains rows
            board = page.context.new_page()
            seen: list[str] = []
            stages: set[str] = set()
            counts: list[tuple[int, bool]] = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                statuses = _statuses(db)
                running = statuses != ["finished", "finished"]  # the evaluation: two runs
                # the live panel's metrics (there only while a run goes on), read at once without waiting: the
                # panel can leave between a count and a read when the run ends
                metrics = {t.split("\n")[0]: t.split("\n")[-1]
                           for t in page.locator('[data-testid="stMetric"]').all_inner_texts() if "\n" in t}
                value = metrics.get("Items done", "")
                if "Stage" in metrics:
                    stages.add(metrics["Stage"])
                if re.fullmatch(r"\d+ of \d+", value) and (not seen or seen[-1] != value):
                    seen.append(value)
                board.goto(f"{url}/leaderboards")
                settle(board)
                no_exception(board)
                counts.append((_leaderboard_rows(board), running))
                if not running and counts[-1][0] >= 2:
                    break
            no_exception(page)
            assert len(set(seen)) >= 2, seen  # e.g. ['0 of 8', '3 of 8', '6 of 8']
            assert stages & {"generate", "judge"}, stages
            during = [n for n, running in counts if running]
            assert counts[-1][0] == 2, counts  # both models, once the evaluation has finished
            assert any(0 < n < 2 for n in during), counts  # a row was there before the evaluation ended

            # the home page shows the finished runs without the live panel
            page.goto(url)
            settle(page)
            assert "Run in progress" not in main_text(page)
        finally:
            launcher.send_signal(signal.SIGINT)  # Ctrl-C
            out = launcher.communicate(timeout=60)[0]
        print(f"dashboard served {served_s:.1f} s after the launcher started; items done seen {seen} in {stages}; "
              f"leaderboard rows (rows, evaluation running) {counts}")
    assert launcher.returncode == 130, out
    assert "evaluation finished" in out, out
    assert _statuses(db) == ["finished", "finished"]
    leftover = subprocess.run(["pgrep", "-f", f"--server.port {port}"], capture_output=True, text=True).stdout
    assert not leftover.strip(), leftover  # the dashboard was stopped with the launcher


def test_live_run_reads_progress_pace_and_silence(tmp_path):
    """``read.home.live_run`` over a running run's saved progress: items done of total, the stage's time left at
    its pace so far, and a run silent for longer than ``STALE_S`` flagged (it may have been killed)."""
    from pipeline.read.home import STALE_S, live_run
    from pipeline.store import Store
    from pipeline.store.runlock import RunLock

    store = Store(tmp_path / "r.duckdb")
    run_id = store.start_run(name="n", kind="pipeline", dataset="d", config_json="{}", config_hash="h",
                             code_revision="c", model_files={})
    assert live_run(store.path) is None  # marked running, but no run holds the database's lock: it was killed
    lock = RunLock(store.path).acquire()
    lock.claim(run_id)
    assert live_run(store.path)["stages"].empty
    stamp = time.time()
    store.update_run(run_id, errors=1, summary=[
        {"stage": "retrieve", "model_id": "lancedb", "items": 4, "skipped": 0, "errors": 0, "done": 4, "wall_s": 2.0,
         "updated_at": stamp},
        {"stage": "generate", "model_id": "m", "items": 10, "skipped": 2, "errors": 1, "done": 4, "wall_s": 8.0,
         "live": True, "updated_at": stamp}])
    run = live_run(store.path)
    stages = run["stages"].set_index("stage")
    assert run["run_id"] == run_id and run["errors"] == 1 and not run["stale"]
    assert (stages.loc["generate", "done"], stages.loc["generate", "items"]) == (4, 10)
    assert stages.loc["generate", "eta_s"] == 12.0  # 6 items left at 2 s an item
    assert stages.loc["retrieve", "eta_s"] != stages.loc["retrieve", "eta_s"]  # NaN: a finished stage has none
    store.update_run(run_id, summary=[{"stage": "generate", "model_id": "m", "items": 10, "done": 4, "wall_s": 8.0,
                                       "live": True, "updated_at": stamp - STALE_S - 1}])
    assert live_run(store.path)["stale"]
    store.update_run(run_id, status="finished")
    assert live_run(store.path) is None
    lock.release()
