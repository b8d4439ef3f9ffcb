"""One run at a time per database: a run holds an exclusive lock on ``<db>.lock`` (beside the resolved path of the
database, so a symlink or another relative path to it shares the lock) for its whole life.

The lock is the operating system's (``filelock``: ``flock`` on Unix), so the kernel frees it when the process
ends, however it ends. Hence: a second run on the same database stops at once with one line naming the run that
holds it (no backend call is made twice), and a run still recorded as ``running`` whose lock is free was killed
(``kill -9``, a power cut): readers show it as ``interrupted``, and the next run records it so. The lock file
holds who took it (run id, pid, host, start) for those messages; it stays beside the database after a run.

Reads never take the lock: the dashboard's read-only connections open per read, as before. Only the probe of
:func:`lock_holder` holds it for an instant, which is why a run waits a few seconds for it before giving up.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from pipeline.errors import UserError
from pipeline.store.rows import now

ACQUIRE_WAIT_S = 3.0  # outlasts a reader's probe, never another run


def lock_path(db: str | Path) -> Path:
    """The lock file of a database: ``results.duckdb`` → ``results.duckdb.lock`` beside it, after the path is resolved
    (symlinks followed, ``..`` removed), so every name of one database file has one lock."""
    db = Path(db).resolve()
    return db.with_name(db.name + ".lock")


@dataclass(frozen=True)
class Holder:
    """Who holds a database's lock, as its lock file says."""

    run_id: str | None
    pid: int | None
    host: str | None
    started: str | None

    def __str__(self) -> str:
        run = f"run {self.run_id}" if self.run_id else "a run"
        return f"{run} (pid {self.pid} on {self.host}, started {self.started})"


def _holder(path: Path) -> Holder:
    try:
        raw = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    return Holder(raw.get("run_id"), raw.get("pid"), raw.get("host"), raw.get("started"))


class RunLock:
    """The exclusive lock of a run on ``db`` (a context manager): :meth:`acquire`, :meth:`claim`, :meth:`release`."""

    def __init__(self, db: str | Path):
        self.db = Path(db)
        self.path = lock_path(db)
        self._lock = FileLock(self.path, timeout=ACQUIRE_WAIT_S)
        self._record: dict[str, object] = {}

    def acquire(self) -> RunLock:
        """Take the lock or raise UserError naming the run that holds it."""
        if self.db.is_dir():  # leave the message about a directory to the code that opens it
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            raise UserError(f"{self.db} is being written by {_holder(self.path)}: one run at a time per database; "
                            "wait for it to end (or stop it), then run again") from None
        self._record = {"pid": os.getpid(), "host": socket.gethostname(), "started": f"{now():%Y-%m-%d %H:%M:%S}"}
        self._write()
        return self

    def claim(self, run_id: str) -> None:
        """Record the run id of the holder (known once the run's row is written)."""
        if self._lock.is_locked:
            self._record["run_id"] = run_id
            self._write()

    def _write(self) -> None:
        self.path.write_text(json.dumps(self._record), encoding="utf-8")  # same inode: the lock stays held

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(db: str | Path) -> str | None:
    """The run id of the run that holds ``db``'s lock now ('' when its id is not recorded yet), None when no run
    does. Writes nothing: it tries the lock for an instant and lets go at once."""
    path = lock_path(db)
    if not path.is_file():
        return None
    probe = FileLock(path, timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return _holder(path).run_id or ""
    except OSError:  # a read-only folder: no lock can be taken here, so no run writes here either
        return None
    probe.release()
    return None


def shown_status(status: str, run_id: str, live: str | None) -> str:
    """A run's status as readers show it: ``running`` only while that run holds the lock (or while a run holds it
    that has not recorded its id yet, an instant after it starts), else ``interrupted``."""
    return "interrupted" if status == "running" and live not in ("", run_id) else status
