"""Compare runs in headless Chromium, on two runs of the bundled data that differ in retrieval: the pipeline's own
database (retrieval split ``separate``, 1 raw chunk + 1 update) and a copy into which a second run with the paper's
split (``by_kind``, top 3 over the whole KB) regenerated and re-judged the extractive baseline. The page shows the
paired differences with their CI, the items whose answers changed and the retrieval settings that differ."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import duckdb
import pytest

from tests.support.browser import ARTIFACTS, BROWSER, REPO, serve_app, settle
from tests.support.results_db import copy_results_db

SMOLLM2 = "llamacpp/smollm2-135m-instruct"
EXTRACTIVE = "extractive/top-sentences"
pytestmark = BROWSER


@pytest.fixture(scope="module")
def two_runs(pipeline_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(A, B) in one folder: A the pipeline's run; B the same, then rerun with the paper's retrieval split for the
    extractive model (retrieve, generate, judge, lexical)."""
    from rich.console import Console

    from pipeline.config import RunConfig
    from pipeline.runner import run

    folder = tmp_path_factory.mktemp("compare-runs")
    a = copy_results_db(pipeline_db, folder / "run-separate.duckdb")
    b = copy_results_db(pipeline_db, folder / "run-by-kind.duckdb")
    config = RunConfig.model_validate({
        "name": "app-tests-by-kind", "dataset": str(REPO / "data" / "cataract"), "db": str(b),
        "languages": ["en", "hi"], "per_language": 1, "retrieval": {"top_k": 3, "split": "by_kind"},
        "models": [{"id": EXTRACTIVE}], "judge": {"id": SMOLLM2, "max_tokens": 24}, "concurrency": 4,
    })
    run(config, stages="retrieve,generate,judge,lexical", console=Console(file=io.StringIO()))
    return a, b


@pytest.fixture(scope="module")
def app_url(two_runs: tuple[Path, Path]) -> Iterator[str]:
    with serve_app(two_runs[0]) as url:
        yield url


@pytest.fixture
def viewport() -> dict[str, int]:
    return {"width": 1440, "height": 2400}


def _texts(db: Path) -> dict[str, str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return dict(con.execute("SELECT query_id, text FROM responses WHERE model_id = ?", [EXTRACTIVE]).fetchall())


def test_compare_runs_that_differ_in_retrieval(app_url, page, two_runs) -> None:
    a, b = two_runs
    texts_a, texts_b = _texts(a), _texts(b)
    changed = sorted(q for q in texts_a if q in texts_b and texts_a[q] != texts_b[q])
    assert changed, "the paper's split gave the extractive baseline other chunks, so other answers"
    params = {"cr_b_db": b.name, "cr_model_a": EXTRACTIVE, "cr_model_b": EXTRACTIVE}
    page.goto(f"{app_url}/compare_runs?{urlencode(params)}")
    settle(page)
    assert not page.query_selector_all('[data-testid="stException"]')
    text = page.inner_text('[data-testid="stMain"]')
    assert "Paired differences (B − A)" in text and "95% CI [" in text  # the paired CI of the judge metrics
    assert "Items that changed most" in text
    for qid in changed:  # every changed item has its side-by-side expander
        assert qid in text, qid
    first = page.locator('[data-testid="stExpander"]').first
    assert "Response A" in first.inner_text() and "Response B" in first.inner_text()
    assert texts_b[changed[0]][:40] in text or any(texts_b[q][:40] in text for q in changed)
    assert "config: retrieval.split: separate → by_kind" in text
    assert "queries whose retrieved chunks differ" in text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_runs.png"), full_page=True)
