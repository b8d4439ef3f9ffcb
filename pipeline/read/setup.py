"""What ``make run`` is preparing: its launcher's phases (``pipeline.launch_status``: the status file beside the
database), each with how long it has taken or is expected to take, while the launcher is alive and its set-up not
done.

The estimate of a phase is how long it took in this folder's last launch, else its typical length on 2 cores
(``pipeline.launch_status.PHASES``); the time left is the running phase's expected rest plus the phases still
waiting."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.launch_status import PHASES, launcher_alive, read_status, status_path

PHASE_COLUMNS = ["phase", "doing", "state", "took_s", "expected_s"]
ACTIVE_STATES = ("setting up", "failed")  # "serving": set-up over; "stopped": no launcher


def setup_status(db: str | Path, *, now: float | None = None) -> dict[str, Any] | None:
    """The set-up of the launcher serving ``db``: ``state`` ("setting up" or "failed"), ``url``, ``phases`` (a frame
    of :data:`PHASE_COLUMNS`), ``current`` (the running phase's label or None), ``failed`` (the failed phase's label
    and exit code or None), ``elapsed_s`` since the launch, ``left_s`` (the set-up's estimated time left) and
    ``results_in_s`` (until the next phase that writes results ends; None when none is ahead). None when no launcher
    is alive for ``db`` or its set-up is over."""
    record = read_status(db)
    if record is None or record.get("state") not in ACTIVE_STATES or not launcher_alive(record):
        return None
    now = time.time() if now is None else now
    rows, left, results_in, current, failed = [], 0.0, None, None, None
    for p in record.get("phases", []):
        started, ended, expected = p.get("started_at"), p.get("ended_at"), p.get("expected_s")
        if ended is not None:
            state = "done" if p.get("exit_code") == 0 else "failed"
            took = ended - started if started is not None else None
            if state == "failed":
                failed = f"{p['label']} (exit {p.get('exit_code')})"
        elif started is not None:
            state, took, current = "running", now - started, p["label"]
            left += max((expected or 0.0) - took, 0.0)
        else:
            state, took = "waiting", None
            left += expected or 0.0
        info = PHASES.get(p["name"])
        if state in ("running", "waiting") and results_in is None and info is not None and info.writes_results:
            results_in = left
        rows.append({"phase": p["name"], "doing": p["label"], "state": state, "took_s": took, "expected_s": expected})
    starts = [p["started_at"] for p in record.get("phases", []) if p.get("started_at")]
    return {"state": record["state"], "url": record.get("url"), "phases": pd.DataFrame(rows, columns=PHASE_COLUMNS),
            "current": current, "failed": failed, "elapsed_s": now - min(starts) if starts else 0.0,
            "left_s": left if record["state"] == "setting up" else None,
            "results_in_s": results_in if record["state"] == "setting up" else None}


def launch_stamp(db: str | Path) -> int:
    """The status file's modification time (ns; 0 without one): it changes whenever a phase begins or ends."""
    try:
        return status_path(db).stat().st_mtime_ns
    except OSError:
        return 0
