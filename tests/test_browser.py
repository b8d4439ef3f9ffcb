"""The served dashboard in headless Chromium (Debian's, driven by Playwright): every page, a filter,
no exception, a screenshot each; model output never runs as HTML or script; hostile filter values
are only values.

The app is `streamlit run app.py` on 127.0.0.1 (a free port) with PARIKSHA_DB pointing to a copy of
the database the pipeline produced, into which a hostile response was written through the Store.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import duckdb
import httpx
import pytest

from pipeline.store import Store
from pipeline.store.schema import ResponseRow

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
XSS = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=1"> '
       "[click](javascript:window.__pwned=1)")
SQL_BITS = ("' OR 1=1 --", '"; DROP TABLE responses; --')
PAGES = ["", "leaderboards", "responses", "themes", "medcode", "human_vs_llm", "playground"]
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="apt-get install chromium chromium-driver")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_db(pipeline_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the pipeline's database with hostile responses written through the Store."""
    import shutil

    db = tmp_path_factory.mktemp("browser") / "results.duckdb"
    shutil.copy(pipeline_db, db)
    con = duckdb.connect(str(db), read_only=True)
    query_id = con.execute("SELECT query_id FROM queries WHERE dataset = 'cataract' AND language = 'en' "
                           "AND query_id IN (SELECT query_id FROM responses) LIMIT 1").fetchone()[0]
    con.close()
    Store(db).write([
        ResponseRow(dataset="cataract", query_id=query_id, model_id="test/xss", run_id="browser-test",
                    prompt_hash=None, text=XSS, error=None),
        ResponseRow(dataset="cataract", query_id=query_id, model_id="test/sql", run_id="browser-test",
                    prompt_hash=None, text="Answer with " + " and ".join(SQL_BITS), error=None),
    ])
    return db


@pytest.fixture(scope="module")
def app_url(served_db: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PARIKSHA_DB": str(served_db)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(proc.stdout.read().decode() if proc.stdout else "streamlit exited")
            time.sleep(0.5)
        else:
            raise RuntimeError("streamlit did not come up in 90 s")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 2200})
    tab = context.new_page()
    yield tab
    context.close()


def settle(page, timeout_s: float = 90) -> None:
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


def test_every_page_with_a_filter_and_a_screenshot(app_url, page):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for path in PAGES:
        page.goto(f"{app_url}/{path}?lang=en")
        settle(page)
        no_exception(page)
        assert page.get_attribute('[data-testid="stApp"]', "data-test-connection-state") == "CONNECTED"
        text = main_text(page)
        assert text.strip(), path
        if path in ("responses", "leaderboards"):
            assert "hi-" not in text  # the language filter from the URL applies
        page.screenshot(path=str(ARTIFACTS / f"{path or 'home'}.png"), full_page=True)


def test_filter_through_the_sidebar_updates_the_url(app_url, page, served_db):
    page.goto(f"{app_url}/responses")
    settle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.locator('[data-testid="stMultiSelect"]').first.click()
    page.get_by_role("option", name="hi").click()
    page.keyboard.press("Escape")
    settle(page)
    no_exception(page)
    assert "lang=hi" in page.url
    text = main_text(page)
    with duckdb.connect(str(served_db), read_only=True) as con:  # ids are stable; languages by matrix language
        by_lang = con.execute("SELECT q.language, list(DISTINCT q.query_id) FROM queries q JOIN responses r "
                              "USING (dataset, query_id) GROUP BY ALL").fetchall()
    shown = {lang: [qid for qid in ids if qid in text] for lang, ids in by_lang}
    assert shown.get("hi") and not any(shown[lang] for lang in shown if lang != "hi"), shown
    search = page.get_by_label("Search query, English rendering and response")
    search.fill("operation")
    search.press("Enter")
    settle(page)
    no_exception(page)
    assert "rb_q=operation" in page.url
    # the link reopens the same view in a fresh tab
    fresh = page.context.new_page()
    fresh.goto(page.url)
    settle(fresh)
    assert fresh.get_by_label("Search query, English rendering and response").input_value() == "operation"
    assert main_text(fresh).count("hi-") == text.count("hi-") or "hi-" in main_text(fresh)
    fresh.close()


def test_model_output_is_shown_as_text_and_never_runs(app_url, page, served_db):
    page.goto(f"{app_url}/responses?model=test/xss")
    settle(page)
    no_exception(page)
    text = main_text(page)
    assert "<script>window.__pwned=1</script>" in text
    assert '<img src=x onerror="window.__pwned=1">' in text
    assert "[click](javascript:window.__pwned=1)" in text
    for expander in page.locator('[data-testid="stExpander"] summary').all():
        expander.click()
    settle(page)
    no_exception(page)
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.locator("[data-testid='stMain'] img[src='x']").count() == 0
    # side by side too
    page.goto(f"{app_url}/responses?model=test/xss&model=test/sql")
    settle(page)
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    page.screenshot(path=str(ARTIFACTS / "security-xss.png"), full_page=True)


def test_hostile_filter_values_return_the_right_rows_and_change_nothing(app_url, page, served_db):
    def table_counts() -> dict[str, int]:
        con = duckdb.connect(str(served_db), read_only=True)
        try:
            return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("responses", "queries", "judgments")}
        finally:
            con.close()

    before = table_counts()
    for value in SQL_BITS:
        page.goto(f"{app_url}/responses?rb_q={quote(value)}")
        settle(page)
        no_exception(page)
        text = main_text(page)
        assert "1 responses match" in text, value  # exactly the response that contains the string
        assert "test/sql" in text
        # as a model filter (not an option): ignored, not executed
        page.goto(f"{app_url}/leaderboards?model={quote(value)}")
        settle(page)
        no_exception(page)
    assert table_counts() == before
