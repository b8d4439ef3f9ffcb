"""The served dashboard in headless Chromium (Debian's, driven by Playwright): every page, a filter,
no exception, a screenshot each; model output never runs as HTML or script; hostile filter values
are only values.

The app is `streamlit run app.py` on 127.0.0.1 (a free port) with PARIKSHA_DB pointing to a copy of
the database the pipeline produced, into which a hostile response was written through the Store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import duckdb
import pytest

from pipeline.catalog import catalog
from pipeline.store import Store
from pipeline.store.rows import ResponseRow
from tests.support.browser import ARTIFACTS, BROWSER, main_text, no_exception, serve_app, settle

XSS = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=1"> '
       "[click](javascript:window.__pwned=1)")
SQL_BITS = ("' OR 1=1 --", '"; DROP TABLE responses; --')
PAGES = ["", *catalog().pages]  # the home page, then every page in menu order
pytestmark = BROWSER


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
    with serve_app(served_db) as url:
        yield url


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
