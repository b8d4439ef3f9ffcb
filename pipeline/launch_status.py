"""The launcher's status file (``make run``'s phases), kept apart from the launcher itself so that the dashboard's
read of it (``pipeline.read.setup``) sits below the launcher: one JSON file beside the database, ``<db>.launch.json``
(:func:`status_path`), rewritten atomically at every change (:class:`LaunchStatus`), read by :func:`read_status`;
:func:`launcher_alive` says whether the process that wrote it still runs."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import psutil
from pydantic import BaseModel, ConfigDict, ValidationError


class PhaseInfo(NamedTuple):
    label: str  # what the dashboard says the phase is doing
    typical_s: float  # its typical length on 2 cores from a fresh clone (docs/make-run.md)
    writes_results: bool  # results land in the database when it ends


# The phases `make run` goes through, by the name its Makefile gives them. The typical length is the estimate until
# this folder has a launch of its own to go by.
PHASES: dict[str, PhaseInfo] = {
    "install": PhaseInfo("installing the dashboard's packages", 150.0, False),
    "serve": PhaseInfo("starting the dashboard", 10.0, False),
    "first-answers": PhaseInfo("the local models' first answers and their judge scores (llama.cpp's prebuilt "
                               "wheel)", 150.0, True),
    "first-results": PhaseInfo("getting the first results without a local model: retrieval, the extractive "
                               "baseline, lexical scores", 60.0, True),
    "build": PhaseInfo("building llama.cpp and installing the local models' packages", 870.0, False),
    "eval": PhaseInfo("evaluating the local models: the cataract set, then the closed-book eye-care set", 800.0,
                      True),
    "classifier": PhaseInfo("training the Med-CoDE classifier", 400.0, False),
    "medcode": PhaseInfo("Med-CoDE: the critic's critiques and their classified severity", 250.0, True),
}
_NAMED = re.compile(r"^([a-z][a-z0-9-]*): (.+)$", re.S)


def status_path(db: str | Path) -> Path:
    """The launcher's status file of a database: ``results.duckdb`` → ``results.duckdb.launch.json`` beside it
    (the resolved path, so a symlinked database shares it)."""
    db = Path(db).expanduser().resolve()
    return db.with_name(db.name + ".launch.json")


def launch_lock_path(db: str | Path) -> Path:
    status = status_path(db)
    return status.with_name(status.name.removesuffix(".json") + ".lock")


@dataclass
class Phase:
    """One step of the launch: its name, what it does, the command, when it started and ended, how it ended."""

    name: str
    label: str
    command: str
    expected_s: float | None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None


def parse_step(step: str) -> Phase:
    """``"NAME: COMMAND"`` (NAME a phase of :data:`PHASES` or any lower-case word) or a bare command line."""
    named = _NAMED.match(step)
    if not named:
        return Phase("step", step, step, None)
    name, command = named.groups()
    info = PHASES.get(name)
    return Phase(name, info.label if info else name, command, info.typical_s if info else None)


class LaunchStatus:
    """The status file of one launch (:func:`status_path`), rewritten atomically whenever a phase changes."""

    def __init__(self, db: str | Path, url: str | None, phases: list[Phase]) -> None:
        self.path = status_path(db)
        self.url = url
        self.phases = phases
        self.state = "setting up"
        me = psutil.Process()
        self.pid, self.pid_started = me.pid, me.create_time()
        for phase, took in _last_durations(self.path).items():  # this folder's last launch: a better estimate
            for p in self.phases:
                if p.name == phase:
                    p.expected_s = took

    def begin(self, phase: Phase) -> None:
        phase.started_at = time.time()
        self.save()

    def end(self, phase: Phase, exit_code: int | None) -> None:
        phase.ended_at, phase.exit_code = time.time(), exit_code
        self.save()

    def finish(self, state: str) -> None:
        self.state = state
        self.save()

    def save(self) -> None:
        record = {"pid": self.pid, "pid_started": self.pid_started, "url": self.url, "state": self.state,
                  "updated_at": time.time(), "phases": [asdict(p) for p in self.phases]}
        write_atomically(self.path, json.dumps(record, indent=1))


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file beside it and a rename: a reader sees the old or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _PhaseRecord(BaseModel):
    """One phase as the status file holds it (:class:`Phase`); checked before any page reads it."""

    model_config = ConfigDict(extra="allow")
    name: str
    label: str
    command: str = ""
    expected_s: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None


class _StatusRecord(BaseModel):
    model_config = ConfigDict(extra="allow")
    pid: int
    pid_started: float
    url: str | None = None
    state: str
    updated_at: float | None = None
    phases: list[_PhaseRecord] = []


def read_status(db: str | Path) -> dict[str, Any] | None:
    """The status file of ``db``'s launcher (None when there is none or it cannot be read). A file whose fields are
    not what :class:`LaunchStatus` writes (hand-edited, truncated, another version) is ignored with a one-line
    warning naming the file and the field, so no page breaks on it."""
    path = status_path(db)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        _note(path, f"unreadable ({exc})")
        return None
    try:
        return _StatusRecord.model_validate(record).model_dump()
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "the file"
        _note(path, f"field {field}: {error['msg']}")
        return None


def _note(path: Path, problem: str) -> None:
    """One warning line per status file and problem (a page reads the file on every render)."""
    if (path, problem) not in _NOTED:
        _NOTED.add((path, problem))
        logging.getLogger(__name__).warning("%s: %s; the launch status is ignored", path, problem)


_NOTED: set[tuple[Path, str]] = set()


def launcher_alive(record: dict[str, Any]) -> bool:
    """True when the process that wrote ``record`` still runs (same pid, same start time)."""
    try:
        return abs(psutil.Process(int(record["pid"])).create_time() - float(record["pid_started"])) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def _last_durations(path: Path) -> dict[str, float]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return {p["name"]: p["ended_at"] - p["started_at"] for p in record.get("phases", [])
                if p.get("exit_code") == 0 and p.get("started_at") and p.get("ended_at")}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
