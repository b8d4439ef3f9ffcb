"""Who can reach the dashboard, and under which name labels are saved.

On its default settings the served app listens on 127.0.0.1 only. Serving a team (``PARIKSHA_TEAM=1``) needs
Streamlit's OpenID Connect login: here against a local provider on 127.0.0.1 (the ``oidc-provider-mock`` package, a
real OIDC server with one predefined user), the user logs in through the provider's form in headless Chromium,
labels an answer, and the stored label carries the provider's identity, never a typed name; a save made while
another process holds the database says what it waits for. A user whose e-mail the provider has not verified is
refused. Without ``[auth]`` the app refuses team mode in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest
from streamlit.testing.v1 import AppTest

from pipeline.store import open_connection
from tests.support.browser import BROWSER, REPO, free_port, main_text, no_exception, serve_app, settle
from tests.support.datasets import answered_db
from tests.support.db_holder import hold

pytestmark = BROWSER
USER = {"sub": "dr-rao", "email": "dr.rao@eyecare.example", "email_verified": True, "name": "Dr Rao"}
UNVERIFIED = {"sub": "mallory", "email": "dr.rao@eyecare.example", "email_verified": False, "name": "Dr Rao"}


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three answers of an OpenAI-compatible endpoint (the fixture server), stored by the pipeline."""
    return answered_db(tmp_path_factory.mktemp("team"))


@contextmanager
def oidc_provider(user: dict[str, object] = USER) -> Iterator[str]:
    """``python -m oidc_provider_mock`` on 127.0.0.1 with ``user`` predefined: its issuer URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "oidc_provider_mock", "--host", "127.0.0.1", "--port", str(port),
                             "--user-claims", json.dumps(user)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.time() < deadline, "the OIDC provider did not start"
            time.sleep(0.3)
        yield issuer
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _secrets(tmp_path: Path, port: int, issuer: str) -> Path:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f"""[auth]
redirect_uri = "http://127.0.0.1:{port}/oauth2callback"
cookie_secret = "a-long-random-string-for-this-test-only-0123456789"
client_id = "pariksha-studio"
client_secret = "test-client-secret"
server_metadata_url = "{issuer}/.well-known/openid-configuration"
""", encoding="utf-8")
    return secrets


def _log_in(page, url: str, issuer: str, sub: str) -> None:
    page.goto(f"{url}/human_vs_llm?hv_view=Annotate&hv_ann_metric=FC&hv_annotator=mallory")
    settle(page)
    assert "Log in" in main_text(page) and "Model response" not in main_text(page)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{issuer}/**")
    page.get_by_role("button", name=sub).click()  # the provider's form: log in as this user
    page.wait_for_url(f"{url}/**")
    settle(page)


def test_team_mode_labels_carry_the_logged_in_identity(small_db, tmp_path, page):
    port = free_port()
    with oidc_provider() as issuer:
        secrets = _secrets(tmp_path, port, issuer)
        with serve_app(small_db, port=port, env={"PARIKSHA_TEAM": "1"}, args=("--secrets.files", str(secrets))) as url:
            _log_in(page, url, issuer, USER["sub"])
            assert f"Logged in as {USER['email']}" in page.inner_text('[data-testid="stSidebar"]')

            page.goto(f"{url}/human_vs_llm?hv_view=Annotate&hv_ann_metric=FC&hv_annotator=mallory")
            settle(page)
            no_exception(page)
            text = main_text(page)
            assert f"Saved as {USER['email']} (logged in)" in text and "Model response" in text
            assert page.get_by_label("Your name").count() == 0  # no typed name in team mode
            page.get_by_text("2 — good").click()
            holder = hold(small_db, 8.0, "20261205-eval")  # a running evaluation's write: the save must wait
            page.get_by_role("button", name="Save label").click()
            page.get_by_text("Waiting to save: run 20261205-eval is writing").wait_for(timeout=7_000)
            holder.wait(timeout=30)
            settle(page)
            no_exception(page)
    with open_connection(small_db, read_only=True) as con:
        labels = con.execute("SELECT annotator, metric, score, source FROM human_labels").fetchall()
    assert labels == [(USER["email"], "FC", 2, "app")]


def test_team_mode_refuses_a_login_whose_email_is_not_verified(small_db, tmp_path, page):
    port = free_port()
    with oidc_provider(UNVERIFIED) as issuer:
        secrets = _secrets(tmp_path, port, issuer)
        with serve_app(small_db, port=port, env={"PARIKSHA_TEAM": "1"}, args=("--secrets.files", str(secrets))) as url:
            _log_in(page, url, issuer, UNVERIFIED["sub"])
            no_exception(page)
            text = main_text(page)
            assert "no e-mail address the identity provider has verified" in text
            assert "Model response" not in text and "Saved as" not in text
            assert page.get_by_role("button", name="Log out").count() == 1


def test_team_mode_without_auth_refuses_in_one_line(small_db, monkeypatch):
    monkeypatch.setenv("PARIKSHA_DB", str(small_db))
    monkeypatch.setenv("PARIKSHA_TEAM", "1")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == [
        "Serving a team needs an OpenID Connect login: .streamlit/secrets.toml [auth] lacks redirect_uri, "
        "cookie_secret, client_id, client_secret, server_metadata_url (docs/security.md); or serve on 127.0.0.1 "
        "without PARIKSHA_TEAM=1."]
    assert not at.sidebar.title and not at.text_input  # nothing else is served


def test_default_settings_listen_on_127_0_0_1_only(small_db):
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    serve = next(line for line in makefile.splitlines() if "streamlit run" in line)
    assert "server.address" not in serve  # `make serve` keeps the config's address
    pid: list[int] = []
    with serve_app(small_db, address=None, pid=pid) as url:
        port = int(url.rsplit(":", 1)[1])
        listening = [c.laddr for c in psutil.Process(pid[0]).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        assert [a.ip for a in listening] == ["127.0.0.1"]
        assert httpx.get(f"{url}/_stcore/health", timeout=5).text == "ok"
