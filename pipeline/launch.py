"""``serve-and-run``: the dashboard first, then the evaluation in the background, writing into the same database.

``make run`` starts the dashboard (``make serve``), waits until it answers, then runs the background commands
(``make eval``: the classifier, then the default evaluation) one after another. The dashboard reads the database
as the run writes it (the writer opens the file for one batch at a time, see ``pipeline.store.connections``) and
its home page shows the run's progress. When the commands are done the dashboard keeps serving. Ctrl-C (or
SIGTERM) stops both: each child gets SIGINT (a run marks itself interrupted, its finished batches kept), then
SIGTERM and SIGKILL if it lingers. A second ``make run`` resumes: the run skips what is already stored.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from types import FrameType

import httpx

from pipeline.console import make_console

STOP_WAIT_S = 20.0  # how long a child may take to stop after SIGINT, and again after SIGTERM
HEALTH_WAIT_S = 120.0


class Stop(Exception):
    """Ctrl-C or SIGTERM reached the launcher."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _start(command: Sequence[str]) -> subprocess.Popen:
    # A session of its own: the terminal's Ctrl-C reaches the launcher only, which stops the children in order.
    return subprocess.Popen(list(command), start_new_session=True)


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
    return proc.poll()


def _wait_healthy(url: str, server: subprocess.Popen, timeout_s: float) -> bool:
    """Wait until Streamlit at ``url`` answers its health check; False when the server exits or time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"{url.rstrip('/')}/_stcore/health", timeout=2).text == "ok":
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


def serve_and_run(serve: str, then: Sequence[str], *, url: str | None = None) -> int:
    """Run the ``serve`` command line, wait for ``url`` to answer (when given), then each ``then`` command line in
    turn (a failed one ends the sequence); keep serving until the server exits or Ctrl-C. Returns the server's
    exit code, 130 after Ctrl-C."""
    console = make_console(stderr=True, highlight=False)
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    server: subprocess.Popen | None = None
    job: subprocess.Popen | None = None
    started = time.monotonic()
    try:
        server = _start(shlex.split(serve))
        if url is not None:
            if not _wait_healthy(url, server, HEALTH_WAIT_S):
                console.print(f"[red]error:[/] the dashboard did not come up at {url} ({serve!r})")
                return server.poll() or 1
            console.print(f"[green]dashboard:[/] {url} (up in {time.monotonic() - started:.1f} s); the evaluation "
                          "runs in the background and the home page shows its progress. Ctrl-C stops both.")
        for command in then:
            job = _start(shlex.split(command))
            while job.poll() is None and server.poll() is None:
                time.sleep(0.2)
            if server.poll() is not None:
                break
            if job.returncode != 0:
                console.print(f"[red]{command!r} failed (exit {job.returncode})[/]; the dashboard keeps serving "
                              "what is stored. Ctrl-C stops it.")
                break
            job = None
        else:
            console.print(f"[green]evaluation finished[/] in {time.monotonic() - started:.0f} s; the dashboard "
                          "keeps serving. Ctrl-C stops it.")
        return server.wait()
    except Stop:
        console.print("[yellow]stopping[/]: the evaluation keeps its finished batches; `make run` resumes it")
        return 130
    finally:
        for sig in previous:  # a second Ctrl-C must not cut the stopping short
            signal.signal(sig, signal.SIG_IGN)
        for proc in (job, server):  # the writer first, then the dashboard
            if proc is not None:
                stop(proc)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
