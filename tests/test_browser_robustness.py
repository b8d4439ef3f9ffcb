"""The Robustness page in headless Chromium, on the planted model's results (``planted_variants_db``: a fixture
model that answers misspelled variants worse): it renders with no exception and shows the leaderboard, the changes
and the worst pairs, misspelled the worst kind."""

from __future__ import annotations

from pathlib import Path

from tests.support.browser import BROWSER, main_text, no_exception, serve_app, settle
from tests.support.datasets import planted_variants_db

pytestmark = BROWSER


def test_robustness_page_renders(tmp_path: Path, page) -> None:
    db = planted_variants_db(tmp_path)
    with serve_app(db) as url:
        page.goto(f"{url}/robustness")
        settle(page)
        no_exception(page)
        text = main_text(page)
    assert "Leaderboard: models by their worst kind" in text and "openai-compatible/planted" in text
    assert "misspelled" in text and "The pairs that fell most" in text and "round_trip_words" in text
