"""The doctors' approved answers (``reference/approved``) in headless Chromium: a marked reference row on the rubric
leaderboard and the arena's boards, shown blind in the arena's pairs (no model name, no ground truth beside them),
and absent with a reason on the FC/SS leaderboard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pipeline.models.reference import LABEL, REFERENCE_ID
from pipeline.read import arena
from tests.support.browser import BROWSER, main_text, no_exception, serve_app, settle
from tests.test_reference_row import MODELS, build_reference_db

pytestmark = BROWSER
APPROVED_TEXT = "within a week; ask your doctor at the follow-up"  # in every approved answer of the test set


@pytest.fixture(scope="module")
def reference_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reference_db(tmp_path_factory.mktemp("reference-browser"))


@pytest.fixture(scope="module")
def app_url(reference_db: Path) -> Iterator[str]:
    with serve_app(reference_db) as url:
        yield url


def test_rubric_leaderboard_shows_the_reference_row(app_url, page):
    page.goto(f"{app_url}/rubrics")
    settle(page)
    no_exception(page)
    text = main_text(page)
    assert LABEL in text
    assert "not a model: it has no rank" in text


def test_fc_ss_leaderboard_says_why_the_reference_is_absent(app_url, page):
    page.goto(f"{app_url}/leaderboards")
    settle(page)
    no_exception(page)
    text = main_text(page)
    assert "are not scored here: FC and SS compare an answer with that very answer" in text
    before = text[:text.index("The doctors' approved answers (")]  # the board and everything above the note
    assert LABEL not in before and REFERENCE_ID not in before


def test_arena_shows_the_reference_blind_and_marks_it_on_the_board(app_url, page):
    # a doctor whose uniform order of pairs starts with one of the reference's (the adaptive order separates the
    # models first); the page's first pair is adaptive, the next ones uniform
    empty = pd.DataFrame(columns=["model", "strength", "lower", "upper"])
    doctor = next(name for name in (f"dr-blind-{i}" for i in range(100)) if REFERENCE_ID in arena.pair_order(
        empty, sorted(MODELS), {}, adaptive=False, seed=name)[0])
    page.goto(f"{app_url}/arena?ar_annotator={doctor}")
    settle(page)
    page.get_by_text("uniform", exact=True).click()
    names = [*MODELS, *(m.split("/")[1] for m in MODELS if m != REFERENCE_ID), LABEL, "Doctors' approved answers"]
    approved_shown = 0
    for _ in range(6):  # vote until a pair with an approved answer has been shown (it is shown nowhere else)
        settle(page)
        no_exception(page)
        html = page.inner_html('[data-testid="stMain"]')  # (the sidebar names the judge, here also a model)
        assert not [n for n in names if n in html], "a model's name before the vote"
        assert "Ground truth (doctor-approved)" not in html  # the approved answer is one of the answers
        text = main_text(page)
        assert "compared as an answer itself" in text
        approved_shown += APPROVED_TEXT in text[text.index("Answer A"):]
        if approved_shown:
            break
        page.get_by_text("Tie", exact=True).click()
        page.get_by_role("button", name="Save vote").click()
    assert approved_shown, "no pair with the approved answer in six votes"

    page.goto(f"{app_url}/arena?ar_view=Leaderboard")
    settle(page)
    no_exception(page)
    text = main_text(page)
    assert LABEL in text and "not ranked" in text
    assert REFERENCE_ID not in text.split("not ranked")[0].split("Leaderboard", 1)[-1]  # shown by its label
