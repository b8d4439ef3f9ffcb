"""Another process that holds a results database open for a while, as a running evaluation's write does to a
dashboard save: a shared DuckDB lock (reads go on, a write waits) and the run lock, claimed by ``run_id``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
HOLDER = """
import sys, time, duckdb
from pipeline.store.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
lock.claim(sys.argv[3])
con = duckdb.connect(sys.argv[1], read_only=True)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
lock.release()
"""


def hold(db: Path, seconds: float, run_id: str = "run-writing") -> subprocess.Popen:
    """Start the holder and return once it holds ``db`` (it lets go after ``seconds``; ``wait()`` for it)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(seconds), run_id], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held", "the holder did not start"
    return proc
