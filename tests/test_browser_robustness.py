"""The Robustness page in headless Chromium, on the planted model's results (``planted_variants_db``: a fixture
model that answers misspelled variants worse): it renders with no exception and shows the leaderboard, the changes
and the worst pairs, misspelled the worst kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import BROWSER, main_text, no_exception, serve_app, settle
from tests.support.datasets import planted_variants_db

pytestmark = BROWSER


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard on the planted results (made before the browser starts: the run has its own event loop)."""
    with serve_app(planted_variants_db(tmp_path_factory.mktemp("robustness"))) as url:
        yield url


def test_robustness_page_renders(app_url: str, page) -> None:
    page.goto(f"{app_url}/robustness")
    settle(page)
    no_exception(page)
    text = main_text(page)
    assert "Leaderboard: models by their worst kind" in text  # tables are drawn on a canvas: their text is not here
    assert "Worst kinds: openai-compatible/planted on misspelled" in text  # only FC judged: ranked by FC
    assert "openai-compatible/planted · Hindi (hi) · FC" in text  # the pairs that fell most, side by side
    assert "planted poor answer" in text and "A sample of each kind" in text
