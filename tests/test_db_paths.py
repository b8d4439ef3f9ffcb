"""A ``--db`` that is not a DuckDB file is one line in every command; the run lock and ``status`` follow the
database's resolved path, so a symlink to it is the same database (issue 38, items 8 and 9)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pipeline import cli
from pipeline.catalog import load_config
from pipeline.errors import UserError
from pipeline.runner import run
from pipeline.store import Store
from pipeline.store.runlock import RunLock, lock_holder, lock_path
from tests.support.datasets import write_closed_book, write_config

CSV = "dataset,query_id,model_id,metric,annotator,score\n"


def _main(monkeypatch, capsys, *args: str) -> tuple[int, list[str]]:
    """``python -m pipeline ARGS`` in this process: (exit code, the non-empty lines it printed)."""
    monkeypatch.setattr(sys, "argv", ["pipeline", *args])
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, [line for line in (out.out + out.err).splitlines() if line.strip()]


@pytest.fixture
def not_duckdb(tmp_path) -> Path:
    path = tmp_path / "results.duckdb"
    path.write_text("these are notes, not a database\n", encoding="utf-8")
    return path


def _commands(tmp_path: Path, db: Path) -> dict[str, list[str]]:
    dataset = write_closed_book(tmp_path / "qa", 2)
    config = write_config(tmp_path / "run.yaml", dataset=dataset, db=db, models=["extractive/top-sentences"])
    teacher = write_config(tmp_path / "label.yaml", dataset=dataset, db=db, models=["extractive/top-sentences"],
                           medcode={"teacher": {"id": "extractive/top-sentences"}})
    labels = tmp_path / "labels.csv"
    labels.write_text(CSV + "qa,q00000,extractive/top-sentences,SS,dr_a,1\n", encoding="utf-8")
    votes = tmp_path / "votes.csv"
    votes.write_text("dataset,query_id,model_a,model_b,winner,annotator\nqa,q00000,a/x,b/y,a,dr_a\n", encoding="utf-8")
    given = ["--db", str(db)]
    return {
        "run": ["run", "--config", str(config), *given],
        "status": ["status", *given],
        "upgrade": ["upgrade", *given],
        "cluster": ["cluster", *given],
        "export": ["export", *given, "--out", str(tmp_path / "export")],
        "import-human-labels": ["import-human-labels", str(labels), *given],
        "import-criterion-labels": ["import-criterion-labels", str(labels), *given],
        "import-critique-labels": ["import-critique-labels", str(labels), *given],
        "human-eval plan": ["human-eval", "plan", "--models", "extractive/top-sentences", *given],
        "medcode label": ["medcode", "label", "--config", str(teacher), *given],
        "medcode export-critiques": ["medcode", "export-critiques", *given, "--out", str(tmp_path / "c.csv")],
        "arena import-votes": ["arena", "import-votes", str(votes), *given],
        "arena export-votes": ["arena", "export-votes", *given, "--out", str(tmp_path / "v.csv")],
        "arena leaderboard": ["arena", "leaderboard", *given],
        "arena annotators": ["arena", "annotators", *given],
        "robustness": ["robustness", *given],
        "variants": ["variants", str(dataset), "--out", str(tmp_path / "variants"), "--kinds", "english", *given],
    }


# Commands that take --db but do not open it themselves, each with the reason.
NOT_OPENED_HERE = {
    "serve-and-run": "the launcher only hands --db to the dashboard and the phases it starts, which report it "
                     "(test_the_dashboard_on_a_file_that_is_not_duckdb_says_it_cannot_read_it)",
}


def commands_with_db() -> list[str]:
    """Every command of the Typer app (``medcode label``: a group's name, then the command's) that takes ``--db``."""
    import typer

    def walk(command, path: tuple[str, ...]):
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                yield from walk(sub, (*path, name))
        elif any("--db" in p.opts for p in command.params):
            yield " ".join(path)

    return sorted(walk(typer.main.get_command(cli.app), ()))


def test_every_command_that_takes_db_is_checked_here(tmp_path) -> None:
    """The list below is Typer's: a new command with ``--db`` fails here until it has an invocation."""
    taken = set(commands_with_db())
    assert {"run", "status", "export", "arena annotators", "medcode label", "human-eval plan"} <= taken  # the walk
    assert set(NOT_OPENED_HERE) <= taken, "a command exempted here no longer takes --db"
    unchecked = taken - set(NOT_OPENED_HERE) - set(_commands(tmp_path, tmp_path / "x.duckdb"))
    assert not unchecked, f"add an invocation to _commands for: {sorted(unchecked)}"


@pytest.mark.parametrize("command", [c for c in commands_with_db() if c not in NOT_OPENED_HERE])
def test_a_db_that_is_not_duckdb_is_one_line_in_every_command(tmp_path, monkeypatch, capsys, not_duckdb, command):
    before = not_duckdb.read_bytes()
    invocations = _commands(tmp_path, not_duckdb)
    assert command in invocations, f"add an invocation of `{command}` to _commands"
    code, lines = _main(monkeypatch, capsys, *invocations[command])
    assert code == 1
    assert len(lines) == 1, "\n".join(lines)
    assert lines[0].startswith("error: --db ") and str(not_duckdb) in lines[0]
    assert "not a valid DuckDB database file" in lines[0]
    assert not_duckdb.read_bytes() == before  # nothing written into it


def test_the_opener_raises_user_error_for_a_non_duckdb_file(not_duckdb):
    from pipeline.store import open_connection

    for read_only in (True, False):
        with pytest.raises(UserError, match="DuckDB cannot open it"), open_connection(not_duckdb, read_only=read_only):
            pass


# -- the run lock follows the resolved path ------------------------------------------------------------------------
def test_the_lock_of_a_symlink_is_the_lock_of_its_target(tmp_path):
    db = tmp_path / "results.duckdb"
    link = tmp_path / "link.duckdb"
    link.symlink_to(db)
    assert lock_path(link) == lock_path(db) == tmp_path / "results.duckdb.lock"
    with RunLock(db) as held:
        held.claim("r1")
        with pytest.raises(UserError, match="one run at a time per database"):
            RunLock(link).acquire()
        assert lock_holder(link) == "r1"  # status through the link sees the live run


def test_a_second_run_through_a_symlink_stops_and_status_through_it_sees_the_live_run(tmp_path, monkeypatch, capsys):
    dataset = write_closed_book(tmp_path / "qa", 2)
    db = tmp_path / "results.duckdb"
    link = tmp_path / "elsewhere" / "same.duckdb"
    link.parent.mkdir()
    link.symlink_to(db)
    config = write_config(tmp_path / "run.yaml", dataset=dataset, db=link, models=["extractive/top-sentences"])
    run(load_config(config), console=Console(file=io.StringIO()))
    live = Store(db).start_run(name="live", kind="pipeline", dataset="qa", config_json="{}", config_hash="h",
                               code_revision="x", model_files={})
    with RunLock(db) as held:  # a run holds the database under its real name
        held.claim(live)
        with pytest.raises(UserError, match=f"being written by run {live}"):
            run(load_config(config), console=Console(file=io.StringIO()))
        code, lines = _main(monkeypatch, capsys, "status", "--db", str(link))
    assert code == 0
    shown = [line for line in lines if "live" in line]
    assert shown and "running" in shown[0] and "interrupted" not in shown[0], "\n".join(lines)


def test_the_dashboard_on_a_file_that_is_not_duckdb_says_it_cannot_read_it(monkeypatch, not_duckdb):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("PARIKSHA_DB", str(not_duckdb))
    at = AppTest.from_file(str(Path(cli.__file__).resolve().parent.parent / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Cannot read" in e.value and "not a valid DuckDB database file" in e.value for e in at.sidebar.error)
