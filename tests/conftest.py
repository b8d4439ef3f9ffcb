"""Shared fixtures: results databases built once per test session.

- ``pipeline_db``: a real run of the pipeline (``pipeline.runner.run``) on 2 queries of the bundled
  cataract dataset (one English, one Hindi) with SmolLM2 in process (small ``max_tokens``, one raw
  chunk and one KB update per query to keep prompts short) and the extractive baseline: retrieve,
  generate, judge (SmolLM2 as judge), lexical, Med-CoDE and safety stages, so those tables hold
  real rows. (The judge ``sanity`` stage is left out for time; ``synthetic_db`` has reliability rows.)
- ``synthetic_db``: ``bench/generate_db.py`` at a small scale (schema-exact synthetic rows for every
  table, several datasets, human labels, judge reliability).
- ``jury_db``: the same with two judges, two judge samples per item, scripts and variants of questions.

The session databases are read-only to tests: a test that writes takes its own copy (``copy_db``).
This is enforced: after every test that used one, its bytes must be unchanged (``_session_dbs_unchanged``).

- ``chromium``: its path, or a skip — a failure under ``PARIKSHA_REQUIRE_BROWSER`` — when it cannot run;
  ``browser``, ``page`` (sized by ``viewport``): headless Chromium for the browser tests.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.results_db import copy_results_db

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
STAGES = "retrieve,generate,judge,lexical,medcode,safety"


@pytest.fixture(scope="session")
def pipeline_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results database produced by the pipeline itself (real local models, no mocks)."""
    from rich.console import Console

    from pipeline.catalog import catalog
    from pipeline.runner import run

    db = tmp_path_factory.mktemp("pipeline-db") / "results.duckdb"
    reuse = os.environ.get("PARIKSHA_TEST_PIPELINE_DB")  # development shortcut: a database built by this fixture
    if reuse and Path(reuse).is_file():
        return copy_results_db(Path(reuse), db)
    config = catalog().config({
        "name": "app-tests", "dataset": str(REPO / "data" / "cataract"), "db": str(db),
        "languages": ["en", "hi"], "per_language": 1,
        "retrieval": {"top_k": 1, "split": "separate", "top_k_updates": 1},
        "models": [{"id": SMOLLM2, "max_tokens": 24}, {"id": "extractive/top-sentences"}],
        "judge": {"id": SMOLLM2, "max_tokens": 24},
        "medcode": {"critic": SMOLLM2, "classifier": "logprobs"},
        "concurrency": 4,
    })
    run(config, stages=STAGES, console=Console(file=io.StringIO()))
    return db


@pytest.fixture(scope="session")
def synthetic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench/generate_db.py at 5% of the paper's scale with 6 of its 24 models."""
    db = tmp_path_factory.mktemp("synthetic-db") / "synthetic.duckdb"
    subprocess.run([sys.executable, str(REPO / "bench" / "generate_db.py"), "--scale", "0.05", "--models", "6",
                    "--out", str(db)], check=True, capture_output=True, cwd=REPO)
    return db


@pytest.fixture(scope="session")
def jury_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench/generate_db.py with a second judge (a jury), two judge samples per item, scripts and variants:
    30% of the paper's scale with 4 of its models."""
    db = tmp_path_factory.mktemp("jury-db") / "jury.duckdb"
    subprocess.run([sys.executable, str(REPO / "bench" / "generate_db.py"), "--scale", "0.3", "--models", "4",
                    "--jury", "1", "--judge-samples", "2", "--out", str(db)], check=True, capture_output=True, cwd=REPO)
    return db


@pytest.fixture
def copy_db(tmp_path: Path) -> Callable[[Path], Path]:
    """Copy a session database (and its LanceDB index, if any) into this test's tmp dir."""

    return lambda db: copy_results_db(db, tmp_path / db.name)


def _digest(db: Path) -> str:
    h = hashlib.sha256()
    for path in (db, Path(f"{db}.wal")):
        if path.exists():
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture(autouse=True)
def _session_dbs_unchanged(request: pytest.FixtureRequest):
    """Fail a test that changed a shared session database instead of writing to a copy."""
    used = [name for name in ("pipeline_db", "synthetic_db", "jury_db") if name in request.fixturenames]
    before = {name: _digest(request.getfixturevalue(name)) for name in used}
    yield
    for name, digest in before.items():
        assert _digest(request.getfixturevalue(name)) == digest, (
            f"{request.node.nodeid} changed the shared session database {name}: write to copy_db({name}) instead")


# -- the browser tests (tests/test_browser*.py; helpers in tests/support/browser.py) ---------------------------
@pytest.fixture(scope="session")
def chromium() -> str:
    """Chromium's path; skips the test when it cannot run, or fails it when PARIKSHA_REQUIRE_BROWSER is set."""
    from tests.support.browser import need_chromium

    return need_chromium()


@pytest.fixture(scope="module")
def browser(chromium: str):
    """Headless Chromium, one per module."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser import CHROMIUM_ARGS

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def viewport() -> dict[str, int]:
    """The size of a ``page``; a module overrides it for a taller page."""
    return {"width": 1440, "height": 2200}


@pytest.fixture
def page(browser, viewport: dict[str, int]):
    """A fresh tab (in its own context) of the module's browser."""
    context = browser.new_context(viewport=viewport)
    yield context.new_page()
    context.close()


OWN_PROCESS_ENV = "PARIKSHA_TEST_OWN_PROCESS"
# Cython extension modules whose shared types clash with xllamacpp's (whichever is imported second fails with
# "Shared Cython type cython_function_or_method has the wrong size"): uharfbuzz, fpdf2's shaper in the PDF tests
CLASHES_WITH_XLLAMACPP = ("uharfbuzz",)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked ``own_process`` runs in a fresh interpreter when this one already holds a module it cannot share
    a process with; its outcome there is its outcome here (a failure there fails it, with the child's output)."""
    if (pyfuncitem.get_closest_marker("own_process") is None or os.environ.get(OWN_PROCESS_ENV)
            or not any(name in sys.modules for name in CLASHES_WITH_XLLAMACPP)):
        return None
    child = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
                            pyfuncitem.nodeid], cwd=REPO, env={**os.environ, OWN_PROCESS_ENV: "1"},
                           capture_output=True, text=True, timeout=900)
    summary = (child.stdout.strip().splitlines() or [""])[-1]
    assert child.returncode == 0, f"in its own process:\n{child.stdout[-6000:]}\n{child.stderr[-2000:]}"
    if " passed" not in summary:
        pytest.skip(f"in its own process: {summary}")
    return True
