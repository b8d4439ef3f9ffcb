"""Team mode (issue 38, item 11): a dashboard save that has to wait for another process's write says so, and why;
a login whose e-mail the identity provider has not verified is refused unless the deployment trusts it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.store import Store, open_connection
from pipeline.store.connections import on_lock_wait
from pipeline.store.rows import MetaRow
from tests.support.db_holder import hold

HOLD_S = 2.5


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "results.duckdb"
    Store(path).write([MetaRow(key="made", value="1")])
    return path


def _hold(db: Path):
    return hold(db, HOLD_S)


def test_a_write_that_waits_for_another_process_tells_the_caller(db):
    waited: list[float] = []
    holder = _hold(db)
    started = time.monotonic()
    with on_lock_wait(waited.append):
        Store(db).write([MetaRow(key="saved", value="1")])
    holder.wait(timeout=30)
    assert waited and waited == sorted(waited)  # told before each back-off, the seconds waited so far
    assert time.monotonic() - started >= HOLD_S * 0.5
    with open_connection(db, read_only=True) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'saved'").fetchone() == ("1",)
    waited.clear()
    Store(db).write([MetaRow(key="again", value="1")])  # outside the block nobody is told
    assert waited == []


def _save_script(db: str) -> None:
    import streamlit as st

    from pages import _ui as ui
    from pipeline.store import Store
    from pipeline.store.rows import MetaRow

    with ui.saving(db):
        Store(db).write([MetaRow(key="label", value="2")])
    st.write("saved")


def test_a_dashboard_save_that_waits_shows_what_it_waits_for(db):
    holder = _hold(db)
    at = AppTest.from_function(_save_script, args=(str(db),), default_timeout=60)
    at.run()
    holder.wait(timeout=30)
    assert not at.exception, [e.value for e in at.exception]
    (status,) = at.status
    assert status.state == "complete"
    assert status.label.startswith("Saved after waiting ") and "for run run-writing's write" in status.label
    assert [m.value for m in at.markdown] == ["saved"]


def test_a_save_that_does_not_wait_shows_nothing(db):
    at = AppTest.from_function(_save_script, args=(str(db),), default_timeout=60)
    at.run()
    assert not at.exception and not at.status


class _User(dict):
    is_logged_in = True


@pytest.mark.parametrize(("claims", "trusted", "allowed"), [
    ({"email": "dr.rao@eyecare.example", "email_verified": True}, "", True),
    ({"email": "dr.rao@eyecare.example", "email_verified": "true"}, "", True),
    ({"email": "dr.rao@eyecare.example", "email_verified": False}, "", False),
    ({"email": "dr.rao@eyecare.example"}, "", False),
    ({"email": "dr.rao@eyecare.example", "email_verified": "false"}, "", False),
    ({"email": "dr.rao@eyecare.example"}, "1", True),
])
def test_only_a_verified_email_names_labels_unless_the_deployment_trusts_its_provider(monkeypatch, claims, trusted,
                                                                                     allowed):
    import streamlit as st

    from pages import _ui as ui

    monkeypatch.setattr(st, "user", _User({"sub": "dr-rao", **claims}))
    monkeypatch.setenv(ui.UNVERIFIED_ENV, trusted)
    assert ui.email_verified() is allowed
