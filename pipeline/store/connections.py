"""Connections to the results database: short-lived ones, and the read-only instance a render shares.

DuckDB allows one read-write process *or* many read-only ones. So that the dashboard stays usable
while a run writes, nobody holds the file open: every write opens a connection, writes one batch in
one transaction and closes; a lock held by another process is waited out with back-off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import duckdb
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from pipeline.errors import UserError


def is_lock_error(exc: BaseException) -> bool:
    """True for DuckDB's 'another process holds the file' errors, which are waited out."""
    msg = str(exc)
    return isinstance(exc, (duckdb.IOException, duckdb.ConnectionException)) and (
        "lock" in msg.lower() or "different configuration" in msg
    )


_ON_LOCK_WAIT: ContextVar[Callable[[float], None] | None] = ContextVar("on_lock_wait", default=None)


@contextmanager
def on_lock_wait(callback: Callable[[float], None]) -> Iterator[None]:
    """Inside this block, every connection that has to wait out another process's lock calls ``callback`` with the
    seconds waited so far, before each back-off (a dashboard save shows that it waits, and why)."""
    token = _ON_LOCK_WAIT.set(callback)
    try:
        yield
    finally:
        _ON_LOCK_WAIT.reset(token)


def _tell_waiting(state: RetryCallState) -> None:
    if (callback := _ON_LOCK_WAIT.get()) is not None:
        callback(state.seconds_since_start or 0.0)


@contextmanager
def open_connection(path: str | Path, *, read_only: bool, wait_s: float = 60.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open ``path`` for one batch of work, waiting out another process's lock with back-off."""
    if not read_only:
        SHARED_READERS.close(path)  # a render's shared reader in this process would block the write
    con = _connect(path, read_only=read_only, wait_s=wait_s)
    try:
        yield con
    finally:
        con.close()


def _connect(path: str | Path, *, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    retrying = Retrying(
        retry=retry_if_exception(is_lock_error),
        wait=wait_random_exponential(multiplier=0.02, max=0.5),
        stop=stop_after_delay(wait_s),
        before_sleep=_tell_waiting,
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        if is_lock_error(exc):
            raise
        raise not_a_database(path, exc) from None
    raise AssertionError("unreachable")


def require_database(path: str | Path) -> None:
    """A results database file at ``path``, else ``UserError`` with the command that makes one (the CLI's
    commands that read results, before they open anything)."""
    if not Path(path).is_file():
        raise UserError(f"{path}: no results database here (run `python -m pipeline run --config ...` first)")


class NotADatabase(UserError, duckdb.IOException):
    """A path DuckDB cannot open as a database: one line for the CLI (a ``UserError``), and still a DuckDB error to
    code that handles those (the dashboard's sidebar says it cannot read the file)."""


def not_a_database(path: str | Path, exc: BaseException) -> NotADatabase:
    """The one line every command gives for a ``--db`` DuckDB cannot open (not a DuckDB file, a folder, another
    DuckDB version's file): the path and DuckDB's own first line."""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return NotADatabase(f"--db {path}: DuckDB cannot open it as a database ({detail}); give the path of a "
                        "DuckDB file written by `python -m pipeline run`, or a new path to create one")


class SharedReaders:
    """Read-only DuckDB instances that the reads of one dashboard render share.

    Starting a DuckDB instance has a fixed cost whatever the file (it builds the function catalog), and
    a page render makes several reads. Inside ``held(path)`` (app.py wraps each render in it) every
    read gets a cursor of one open instance, closed when the last render holding it ends; outside,
    a read opens and closes its own connection. A write in this process closes the shared instance
    first (its cursors finish); another process's writer waits out the render like any read.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open: dict[str, duckdb.DuckDBPyConnection] = {}
        self._holders: dict[str, int] = {}
        self._busy: dict[str, int] = {}

    @contextmanager
    def held(self, path: str | Path) -> Iterator[None]:
        """Share one read-only instance of ``path`` among the reads inside this block (and concurrent ones)."""
        key = _key(path)
        with self._cond:
            self._holders[key] = self._holders.get(key, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._holders[key] -= 1
                if not self._holders[key]:
                    del self._holders[key]
                    self._close(key)

    @contextmanager
    def cursor(self, path: str | Path, wait_s: float = 60.0) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection: a cursor of the shared instance while one is held, else its own."""
        key = _key(path)
        with self._cond:
            shared = key in self._holders
            if shared:
                if key not in self._open:
                    self._open[key] = _connect(path, read_only=True, wait_s=wait_s)
                self._busy[key] = self._busy.get(key, 0) + 1
                con = self._open[key].cursor()
        if not shared:
            with open_connection(path, read_only=True, wait_s=wait_s) as own:
                yield own
            return
        try:
            yield con
        finally:
            con.close()
            with self._cond:
                self._busy[key] -= 1
                self._cond.notify_all()

    def close(self, path: str | Path) -> None:
        """Close ``path``'s shared instance once its reads have finished (a held render reopens it)."""
        with self._cond:
            self._close(_key(path))

    def _close(self, key: str) -> None:
        if not self._cond.wait_for(lambda: not self._busy.get(key), timeout=60):
            raise RuntimeError(f"reads of {key} did not finish within 60 s")
        con = self._open.pop(key, None)
        if con is not None:
            con.close()


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


SHARED_READERS = SharedReaders()


