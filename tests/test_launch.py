"""``make run``'s launcher (``pipeline.launch``): its phases in the status file, processes that end together, one
launcher per database. Real subprocesses with short fake commands (``sleep``), and the real Makefile's ``run``
target with fake ``python``/``streamlit`` programs in a fake virtualenv (the launcher itself is the real one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from pipeline.launch_status import PHASES, status_path
from pipeline.read.setup import setup_status
from tests.support.browser import REPO, free_port

LAUNCH = [sys.executable, "-m", "pipeline", "serve-and-run"]


def _launcher(db: Path, serve: str, *then: str, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    return subprocess.Popen([*LAUNCH, "--db", str(db), "--serve", serve, *(a for t in then for a in ("--then", t)),
                             *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(predicate, timeout_s: float = 90.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _status(db: Path) -> dict:
    try:
        return json.loads(status_path(db).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _phase(db: Path, name: str) -> dict:
    return next((p for p in _status(db).get("phases", []) if p["name"] == name), {})


def _family(pid: int) -> list[psutil.Process]:
    """``pid`` and every process below it."""
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def _family_of(pid: int, at_least: int) -> list[psutil.Process]:
    """``_family(pid)`` once it has ``at_least`` processes (the children take a moment to start theirs)."""
    return _wait_for(lambda: (lambda f: f if len(f) >= at_least else None)(_family(pid)), what=f"{at_least} processes")


def _all_gone(procs: list[psutil.Process], timeout_s: float = 60.0) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    return alive


def test_phases_are_recorded_with_their_times_and_a_failure_ends_the_set_up(tmp_path):
    db = tmp_path / "r.duckdb"
    since = time.time() - 5
    launcher = _launcher(db, "sleep 300", "first-results: sleep 0.3", "build: sh -c 'exit 3'", "eval: sleep 0.1",
                         extra=("--since", str(since)))
    try:
        _wait_for(lambda: _status(db).get("state") == "failed", what="the build phase to fail")
        status = _status(db)
        names = [p["name"] for p in status["phases"]]
        assert names == ["install", "serve", "first-results", "build", "eval"]
        first, build, evaluation = _phase(db, "first-results"), _phase(db, "build"), _phase(db, "eval")
        assert first["exit_code"] == 0 and first["ended_at"] - first["started_at"] >= 0.3
        assert build["exit_code"] == 3 and build["label"] == PHASES["build"].label
        assert evaluation["started_at"] is None  # a failed phase ends the sequence
        assert _phase(db, "install")["started_at"] == pytest.approx(since)
        seen = setup_status(db)  # what the dashboard reads: the failure named, the dashboard still serving
        assert seen is not None and seen["failed"] == f"{PHASES['build'].label} (exit 3)"
        assert seen["phases"].set_index("phase").loc["eval", "state"] == "waiting"
    finally:
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=60)
    assert launcher.returncode == 130
    assert _status(db)["state"] == "failed" and setup_status(db) is None  # no launcher alive: nothing to show


def test_setup_status_estimates_the_time_left_from_typical_lengths(tmp_path):
    db = tmp_path / "r.duckdb"
    launcher = _launcher(db, "sleep 300", "first-results: sleep 300", "build: sleep 300")
    try:
        _wait_for(lambda: _phase(db, "first-results").get("started_at"), what="first results to start")
        started = _phase(db, "first-results")["started_at"]
        seen = setup_status(db, now=started + 20)
        assert seen["state"] == "setting up" and seen["current"] == PHASES["first-results"].label
        expected_left = (PHASES["first-results"].typical_s - 20) + PHASES["build"].typical_s
        assert seen["left_s"] == pytest.approx(expected_left)
        assert seen["results_in_s"] == pytest.approx(PHASES["first-results"].typical_s - 20)
        late = setup_status(db, now=started + 10_000)  # overdue: the running phase counts 0 left, never negative
        assert late["left_s"] == pytest.approx(PHASES["build"].typical_s)
    finally:
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_the_launcher_leaves_no_process_of_it(tmp_path, sig):
    db = tmp_path / "r.duckdb"
    # the dashboard and the evaluation each with a grandchild, as make → sh → streamlit / pipeline run
    launcher = _launcher(db, "sh -c 'sleep 300 & sleep 300'", "eval: sh -c 'sleep 300 & sleep 300; true'")
    _wait_for(lambda: _phase(db, "eval").get("started_at"), what="the evaluation to start")
    family = _family_of(launcher.pid, 6)  # sh may exec its last command: at least 2 + 3 below the launcher
    launcher.send_signal(sig)
    out = launcher.communicate(timeout=60)[0]
    assert launcher.returncode == 130, out
    assert not _all_gone(family), "processes of the launcher left behind"
    assert _status(db)["state"] == "stopped"
    assert _phase(db, "eval")["ended_at"] is not None


def test_the_launcher_stops_when_its_parent_dies(tmp_path):
    """``make`` killed outright: the launcher, reparented, stops its children and itself."""
    db = tmp_path / "r.duckdb"
    line = " ".join([*LAUNCH, "--db", str(db), "--serve", "'sleep 300'", "--then", "'eval: sleep 300'"])
    parent = subprocess.Popen(["sh", "-c", f"{line}; echo never"], cwd=REPO)
    _wait_for(lambda: _phase(db, "eval").get("started_at"), what="the evaluation to start")
    family = _family_of(parent.pid, 4)[1:]  # the phase is recorded before its command has started its process
    parent.kill()
    parent.wait()
    assert not _all_gone(family), "processes of the launcher left behind"


def test_a_second_launch_on_the_same_database_refuses_and_starts_nothing(tmp_path):
    db = tmp_path / "r.duckdb"
    first = _launcher(db, "sleep 300", "eval: sleep 300", extra=("--url", "http://127.0.0.1:1"))
    try:
        # --url of a port nothing listens on: the first waits for its dashboard; what counts is that it serves db
        _wait_for(lambda: _status(db).get("pid") == first.pid, what="the first launcher's status")
        link = tmp_path / "link"
        link.symlink_to(tmp_path, target_is_directory=True)
        marker = tmp_path / "started"
        second = subprocess.run([*LAUNCH, "--db", str(link / "r.duckdb"), "--serve", f"touch {marker}",
                                 "--then", f"eval: touch {marker}"], cwd=REPO, capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "already running" in lines[0] and "http://127.0.0.1:1" in lines[0], second.stderr
        assert f"pid {first.pid}" in lines[0]
        assert not marker.exists()  # nothing was started
        assert _status(db).get("pid") == first.pid  # the first one's record untouched
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)


# -- the real Makefile's `run`, with a fake virtualenv: `streamlit` a tiny health-answering server, `python` the real
# one for the launcher and a sleeper for everything else (the evaluation) ---------------------------------------------
FAKE_STREAMLIT = """\
#!{python}
import http.server, sys
port = int(sys.argv[sys.argv.index("--server.port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""
FAKE_PYTHON = """\
#!/bin/sh
if [ "$3" = "serve-and-run" ]; then exec {python} "$@"; fi
exec sleep 300
"""


def _fake_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("streamlit", FAKE_STREAMLIT), ("python", FAKE_PYTHON)):
        path = venv / "bin" / name
        path.write_text(textwrap.dedent(text).format(python=sys.executable), encoding="utf-8")
        path.chmod(0o755)
    stamp = venv / ".dashboard"
    stamp.touch()
    later = (REPO / "requirements.txt").stat().st_mtime + 10
    os.utime(stamp, (later, later))
    return venv


def _make_run(tmp_path: Path, venv: Path, db: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen(["make", "--no-print-directory", "run", f"VENV={venv}", f"DB={db}", f"PORT={port}"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own process group, as a terminal's foreground job


@pytest.mark.parametrize("how", ["SIGHUP to the process group (a closed terminal)", "SIGTERM to make alone"])
def test_make_run_stops_everything_and_a_second_make_run_refuses(tmp_path, how):
    venv, db, port = _fake_venv(tmp_path), tmp_path / "r.duckdb", free_port()
    make = _make_run(tmp_path, venv, db, port)
    try:
        _wait_for(lambda: _phase(db, "first-answers").get("started_at"), what="the first phase to start")
        status = _status(db)
        assert [p["name"] for p in status["phases"]] == ["install", "serve", "first-answers", "first-results", "build",
                                                         "eval", "classifier", "medcode"]
        # make, the launcher, make serve and its server, make eval-first-answers and its child
        family = _family_of(make.pid, 6)
        other_port = free_port()
        second = subprocess.run(["make", "--no-print-directory", "run", f"VENV={venv}", f"DB={db}",
                                 f"PORT={other_port}"], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert second.returncode != 0
        assert f"already running for {db} at http://127.0.0.1:{port}" in second.stdout + second.stderr
        started = [p for p in psutil.process_iter(["cmdline"]) if str(other_port) in " ".join(p.info["cmdline"] or [])]
        assert not started  # the second started nothing (no dashboard on its port, nothing left running)
    finally:
        if how.startswith("SIGHUP"):
            os.killpg(make.pid, signal.SIGHUP)
        else:
            make.send_signal(signal.SIGTERM)
        out = make.communicate(timeout=90)[0]
    assert not _all_gone(family), f"processes of make run left behind: {out}"
    assert _status(db)["state"] == "stopped"
