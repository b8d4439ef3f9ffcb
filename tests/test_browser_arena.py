"""The Arena page in headless Chromium: a doctor votes on 5 pairs; no model name is in the page before a vote; no
pair is shown twice; the leaderboard reflects the votes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.read import arena
from pipeline.store import Store
from tests.support.browser import BROWSER, main_text, no_exception, serve_app, settle
from tests.test_arena import MODELS, build_db

pytestmark = BROWSER


@pytest.fixture(scope="module")
def arena_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_db(tmp_path_factory.mktemp("arena") / "results.duckdb", queries=6)


@pytest.fixture(scope="module")
def app_url(arena_db: Path) -> Iterator[str]:
    with serve_app(arena_db) as url:
        yield url


def test_a_doctor_votes_on_five_pairs_without_seeing_model_names(app_url, page, arena_db):
    page.goto(f"{app_url}/arena?ar_annotator=dr-browser&ar_lang=hi")
    settle(page)
    shown = []
    for n in range(5):
        no_exception(page)
        html = page.content()
        assert not [m for m in MODELS if m in html or m.split("/")[1] in html], "a model name before the vote"
        text = main_text(page)
        assert "Answer A" in text and "Answer B" in text
        shown.append(text[text.index("Patient query"):])
        page.get_by_text("A is better", exact=True).click()
        if n == 4:  # the last one with the names revealed after the vote: the check above can see a name
            page.get_by_text("Show which models these were after I vote").click()
        page.get_by_role("button", name="Save vote").click()
        settle(page)
        assert "Saved" in main_text(page)
    assert any(m in page.content() for m in MODELS)
    assert len(set(shown)) == 5  # a new question or pair after every vote
    votes = Store(arena_db).fetch("SELECT query_id, model_a, model_b, winner, shown_left FROM arena_votes "
                                  "WHERE annotator = 'dr-browser'")
    assert len(votes) == 5 and len({(q, a, b) for q, a, b, *_ in votes}) == 5  # no pair twice
    for _, a, b, winner, left in votes:  # "A" (the left answer) won: the winner is the model shown on the left
        assert (a if winner == "a" else b) == left
    times = Store(arena_db).fetch("SELECT shown_at, voted_at FROM arena_votes WHERE annotator = 'dr-browser'")
    assert all(shown is not None and shown <= voted for shown, voted in times)  # seconds per vote are known

    page.goto(f"{app_url}/arena?ar_view=Leaderboard&ar_lang=hi")
    settle(page)
    no_exception(page)
    text = main_text(page)
    board = arena.leaderboard(arena_db, "ds", "hi")
    assert board.votes.sum() == 10
    for model in board.model:
        assert model in text
    # the page's table is the read model's (model order = rank; the fit's warnings above it name models too)
    text = text[text.index("strength (Elo scale)"):]
    positions = [text.index(m) for m in board.model]
    assert positions == sorted(positions)
