"""What the browser tests share: the served app (``streamlit run app.py`` on a free port of 127.0.0.1) and helpers
to read a page in headless Chromium (Debian's, driven by Playwright). The ``browser`` and ``page`` fixtures are in
``tests/conftest.py``; a module that wants another viewport overrides the ``viewport`` fixture.

A test that needs Chromium (a browser module's ``pytestmark = BROWSER``, or ``@pytest.mark.usefixtures("chromium")``)
is skipped when ``chromium`` is not on ``PATH`` or Playwright is not installed — and fails instead when
``PARIKSHA_REQUIRE_BROWSER`` is set (not empty, not ``0``), as ``.ci/run`` sets it, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
REQUIRE_BROWSER = "PARIKSHA_REQUIRE_BROWSER"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's (apt-get install chromium chromium-driver)
CHROMIUM_ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# a browser module's ``pytestmark``: the marker, and the ``chromium`` fixture (tests/conftest.py: skip or fail)
BROWSER = [pytest.mark.browser, pytest.mark.usefixtures("chromium")]


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here (no ``chromium`` on PATH, or no Playwright); None when they can."""
    if shutil.which("chromium") is None:
        return "no `chromium` on PATH (apt-get install chromium chromium-driver)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -r requirements-dev.txt)"
    return None


def need_chromium() -> str:
    """The path of Chromium; when it cannot run, skip the calling test — or fail it when ``PARIKSHA_REQUIRE_BROWSER``
    is set."""
    why = chromium_missing()
    if why is None:
        return shutil.which("chromium") or CHROMIUM
    if os.environ.get(REQUIRE_BROWSER, "").strip() not in ("", "0"):
        pytest.fail(f"{REQUIRE_BROWSER} is set and {why}", pytrace=False)
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_app(db: Path, *, env: dict[str, str] | None = None, timeout_s: float = 90, port: int | None = None,
              address: str | None = "127.0.0.1", args: tuple[str, ...] = (), pid: list[int] | None = None,
              ) -> Iterator[str]:
    """The dashboard served on ``db`` (``PARIKSHA_DB``; more variables in ``env``, more ``streamlit run`` options in
    ``args``): its URL, until the block ends. ``address`` None: the project's config decides where it listens;
    ``pid`` gets the server's process id."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         *(("--server.address", address) if address else ()), "--server.headless", "true",
         "--browser.gatherUsageStats", "false", *args],
        cwd=REPO, env={**os.environ, "PARIKSHA_DB": str(db), **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    if pid is not None:
        pid.append(proc.pid)
    try:
        _wait_healthy(url, proc, timeout_s)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    import httpx

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(proc.stdout.read().decode() if proc.stdout else "streamlit exited")
        time.sleep(0.5)
    raise RuntimeError(f"streamlit did not come up in {timeout_s:g} s")


def settle(page, timeout_s: float = 120) -> None:
    """Wait until the script has finished and the page stops changing."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    deadline = time.time() + timeout_s
    quiet = 0
    while time.time() < deadline:
        state = page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
        quiet = quiet + 1 if state == "notRunning" else 0
        if quiet >= 3:
            return
        page.wait_for_timeout(300)
    raise AssertionError(f"page still running after {timeout_s} s")


def no_exception(page) -> None:
    errors = page.query_selector_all('[data-testid="stException"]')
    assert not errors, [e.inner_text()[:500] for e in errors]


def main_text(page) -> str:
    return page.inner_text('[data-testid="stMain"]')


def wait_for_text(page, *texts: str, timeout_s: float = 120) -> None:
    """Wait until the page's main text (what ``main_text`` reads: the visible text) holds every one of ``texts``;
    tables and charts draw after the script has finished, one after another."""
    page.wait_for_function("texts => { const main = document.querySelector('[data-testid=\"stMain\"]');"
                           " return !!main && texts.every(t => main.innerText.includes(t)); }",
                           arg=list(texts), timeout=timeout_s * 1000)
