"""``serve-and-run``: the dashboard first, then the evaluation in the background, writing into the same database.

``make run`` starts the dashboard (``make serve``), waits until it answers, then runs the background steps (the
first results without a local model, llama.cpp's build, the classifier, the evaluation) one after another. The
dashboard reads the database as the run writes it (the writer opens the file for one batch at a time, see
``pipeline.store.connections``) and its home page shows the run's progress. When the steps are done the
dashboard keeps serving.

Set-up shown: the launcher records its phases (what it is doing, since when, how each ended) in one JSON file
beside the database, ``<db>.launch.json`` (``pipeline.launch_status``), rewritten atomically at every change; the
dashboard reads it (``pipeline.read.setup``) to say what is being prepared while no result exists yet.

One launcher per database: it holds ``<db>.launch.lock`` (``filelock``: the kernel frees it however the launcher
ends) for its whole life; a second one says where the first serves and exits before starting anything.

Processes that end together: Ctrl-C, SIGTERM and SIGHUP (a closed terminal) stop everything: each child, in a
session of its own, gets SIGINT on its whole process group (a run marks itself interrupted, its finished batches
kept), then SIGTERM and SIGKILL if it lingers. Should the launcher's parent (``make``) die, the launcher stops
too; should the launcher be killed outright, the kernel sends its children SIGTERM (``PR_SET_PDEATHSIG``). A
second ``make run`` after a stop resumes: the run skips what is already stored.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import httpx
from filelock import FileLock, Timeout

from pipeline.console import make_console
from pipeline.launch_status import PHASES, LaunchStatus, Phase, launch_lock_path, parse_step, read_status
from pipeline.processes import die_with_parent

STOP_WAIT_S = 20.0  # how long a child may take to stop after SIGINT, and again after SIGTERM
HEALTH_WAIT_S = 120.0
POLL_S = 0.2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

class Stop(Exception):
    """Ctrl-C, SIGTERM or SIGHUP reached the launcher, or its parent died."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _die_with_parent() -> None:
    """In a child before exec: a session of its own, and SIGTERM when the launcher dies (Linux)."""
    os.setsid()
    die_with_parent()


def _start(command: str) -> subprocess.Popen:
    # A session of its own: the terminal's Ctrl-C reaches the launcher only, which stops the children in order; and
    # SIGTERM from the kernel should the launcher be killed outright.
    return subprocess.Popen(shlex.split(command), preexec_fn=_die_with_parent)


def stop(proc: subprocess.Popen) -> int | None:
    """Stop ``proc``'s whole process group: SIGINT, then SIGTERM, then SIGKILL; its exit code."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is not None:  # the leader is gone: what it left in its group goes too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return proc.poll()


class _Watch:
    """The launcher's parent: if it dies (``make`` killed), the launcher is reparented and stops."""

    def __init__(self) -> None:
        self.parent = os.getppid()

    def check(self) -> None:
        if os.getppid() != self.parent:
            raise Stop("parent died")


def _wait_healthy(url: str, server: subprocess.Popen, timeout_s: float, watch: _Watch) -> bool:
    """Wait until Streamlit at ``url`` answers its health check; False when the server exits or time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        watch.check()
        try:
            if httpx.get(f"{url.rstrip('/')}/_stcore/health", timeout=2).text == "ok":
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


def serve_and_run(serve: str, then: Sequence[str], *, url: str | None = None, db: str | Path | None = None,
                  since: float | None = None) -> int:
    """Run the ``serve`` command line, wait for ``url`` to answer (when given), then each ``then`` step in turn
    (``"NAME: COMMAND"`` or a command line; a failed one ends the sequence); keep serving until the server exits
    or a stop signal. With ``db``: one launcher per database, and its phases recorded in the status file (the
    first, ``install``, from ``since``: when ``make run`` started). Returns the server's exit code, 130 after a
    stop, 1 when another launcher serves ``db``."""
    console = make_console(stderr=True, highlight=False)
    lock: FileLock | None = None
    if db is not None:
        launch_lock_path(db).parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(launch_lock_path(db))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            record = read_status(db) or {}
            console.print(f"[red]error:[/] `make run` is already running for {db} at {record.get('url') or '?'} "
                          f"(pid {record.get('pid', '?')}); open that address, or stop that one first",
                          soft_wrap=True)
            return 1
    previous = {sig: signal.signal(sig, _raise_stop) for sig in STOP_SIGNALS}
    watch = _Watch()
    server: subprocess.Popen | None = None
    job: subprocess.Popen | None = None
    started = time.monotonic()
    steps = [parse_step(s) for s in then]
    serving = Phase("serve", PHASES["serve"].label, serve, PHASES["serve"].typical_s)
    installed = [Phase("install", PHASES["install"].label, "make", PHASES["install"].typical_s, since, time.time(), 0)
                 ] if since is not None else []
    launch = LaunchStatus(db, url, [*installed, serving, *steps]) if db is not None else None
    failed = False
    try:
        if launch is not None:
            launch.begin(serving)
        server = _start(serve)
        if url is not None:
            if not _wait_healthy(url, server, HEALTH_WAIT_S, watch):
                console.print(f"[red]error:[/] the dashboard did not come up at {url} ({serve!r})")
                return server.poll() or 1
            console.print(f"[green]dashboard:[/] {url} (up in {time.monotonic() - started:.1f} s); the evaluation "
                          "runs in the background and the home page shows its progress. Ctrl-C stops both.")
        if launch is not None:
            launch.end(serving, 0)
        for step in steps:
            if launch is not None:
                launch.begin(step)
            job = _start(step.command)
            while job.poll() is None and server.poll() is None:
                watch.check()
                time.sleep(POLL_S)
            if server.poll() is not None:
                break
            if launch is not None:
                launch.end(step, job.returncode)
            if job.returncode != 0:
                console.print(f"[red]{step.command!r} failed (exit {job.returncode})[/]; the dashboard keeps serving "
                              "what is stored. Ctrl-C stops it.")
                failed = True
                break
            job = None
        else:
            console.print(f"[green]evaluation finished[/] in {time.monotonic() - started:.0f} s; the dashboard "
                          "keeps serving. Ctrl-C stops it.")
        if launch is not None:
            launch.finish("failed" if failed else "serving")
        while server.poll() is None:
            watch.check()
            time.sleep(POLL_S)
        return server.returncode
    except Stop:
        console.print("[yellow]stopping[/]: the evaluation keeps its finished batches; `make run` resumes it")
        return 130
    finally:
        for sig in previous:  # a second Ctrl-C must not cut the stopping short
            signal.signal(sig, signal.SIG_IGN)
        for proc in (job, server):  # the writer first, then the dashboard
            if proc is not None:
                stop(proc)
        if launch is not None:
            for phase in launch.phases:
                if phase.started_at is not None and phase.ended_at is None:
                    phase.ended_at = time.time()
            launch.finish("failed" if failed else "stopped")
        if lock is not None:
            lock.release()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
