"""A jury of two embedded judges, end to end in headless Chromium: the pipeline stores both judges' scores; the
Judge trust page shows Krippendorff's α per metric and the items the judges disagree on, with a link into the
response browser; the leaderboard reads the jury's scores.

The run: the extractive baseline answers one English and one Hindi query; SmolLM2-135M and Gemma 3 270M (both
shipped inside PyPI packages) judge every answer on every metric, with few tokens. Assertions are about what the
pipeline guarantees (rows per judge, the page's sections), never what a tiny judge happens to score.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import duckdb
import pytest

from pipeline.metrics import METRICS
from tests.support.browser import ARTIFACTS, BROWSER, REPO, no_exception, serve_app, settle

JUDGES = ("llamacpp/smollm2-135m-instruct", "llamacpp/gemma-3-270m")
pytestmark = BROWSER


@pytest.fixture(scope="module")
def jury_run_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Retrieve, generate (extractive) and judge with a jury of the two embedded models."""
    from rich.console import Console

    from pipeline.config import RunConfig
    from pipeline.runner import run

    db = tmp_path_factory.mktemp("browser-jury") / "jury.duckdb"
    config = RunConfig.model_validate({
        "name": "browser-jury", "dataset": str(REPO / "data" / "cataract"), "db": str(db),
        "languages": ["en", "hi"], "per_language": 1,
        "retrieval": {"top_k": 2, "split": "by_kind"},
        "models": [{"id": "extractive/top-sentences"}],
        "judge": [{"id": j, "max_tokens": 24} for j in JUDGES],
        "concurrency": 2,
    })
    run(config, stages="retrieve,generate,judge", console=Console(file=io.StringIO()))
    return db


@pytest.fixture(scope="module")
def app_url(jury_run_db: Path) -> Iterator[str]:
    with serve_app(jury_run_db) as url:
        yield url


@pytest.fixture
def viewport() -> dict[str, int]:
    return {"width": 1440, "height": 2600}


def test_the_pipeline_stores_both_judges(jury_run_db):
    with duckdb.connect(str(jury_run_db), read_only=True) as con:
        per_judge = dict(con.execute("SELECT judge_id, count(*) FROM judgments GROUP BY ALL").fetchall())
        responses = con.execute("SELECT count(*) FROM responses WHERE error IS NULL").fetchone()[0]
        items = dict(con.execute("SELECT judge_id, count(*) FROM item_scores GROUP BY ALL").fetchall())
    assert set(per_judge) == set(JUDGES)
    for judge in JUDGES:  # every judge scored every answer on every metric
        assert per_judge[judge] == responses * len(METRICS) and items[judge] == responses


def test_judge_trust_shows_alpha_per_metric_and_the_disagreements(app_url, page):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.goto(f"{app_url}/judge_trust")
    settle(page)
    no_exception(page)
    main = page.locator('[data-testid="stMain"]')
    text = main.inner_text()
    assert "2 judges:" in text and all(j in text for j in JUDGES)
    assert "Krippendorff's α per metric and language" in text
    assert "Where the judges disagree most" in text
    # the grids' accessible tables: the α table (a language column and one per metric) and the disagreement view
    # (each judge's score, the spread, a link into the response browser)
    headers = []
    for grid in main.locator('[data-testid="stDataFrame"]').all():
        grid.scroll_into_view_if_needed()
        page.wait_for_timeout(800)  # the grid draws (and fills its accessible table) once it is on screen
        headers.append(({h.strip() for h in grid.locator("th").all_inner_texts()}, grid))
    alpha = [g for h, g in headers if {"language", "items", *METRICS} <= h]
    assert alpha, [h for h, _ in headers]
    assert "all" in {c.strip() for c in alpha[0].locator("td").all_inner_texts()}
    worst = [g for h, g in headers if {"spread (max − min)", *JUDGES, "response browser"} <= h]
    assert worst, [h for h, _ in headers]
    links = [c.strip() for c in worst[0].locator("td").all_inner_texts() if c.strip().startswith("responses?")]
    assert links and all("rb_q=" in link and "model=" in link for link in links)
    page.screenshot(path=str(ARTIFACTS / "judge_trust-jury.png"), full_page=True)


def test_the_leaderboard_reads_the_jury(app_url, page):
    # the control's URL value is its label (Streamlit binds the formatted option)
    page.goto(f"{app_url}/leaderboards?lb_src={quote('jury (mean of 2 judges)')}&lb_lang=en")
    settle(page)
    no_exception(page)
    text = page.inner_text('[data-testid="stMain"]')
    assert "Scores by jury (mean of 2 judges)" in text
    assert "Provenance: judge jury (mean of 2 judges)" in text
    page.screenshot(path=str(ARTIFACTS / "leaderboards-jury.png"), full_page=True)
