"""The first minutes of ``make run`` in the browser: while the launcher's status file says the set-up is going on and
no results database exists, the home page lists the set-up's phases with an estimate and every other page says
results are being prepared, never "Fill it with"; the Dataset page shows a dataset folder without any database.

The status file is written by the launcher's own writer (``pipeline.launch_status.LaunchStatus``) on behalf of this test
process, which stands for the launcher (alive, same pid and start time)."""

from __future__ import annotations

import time

from pipeline.launch_status import PHASES, LaunchStatus, Phase, parse_step
from tests.support.browser import BROWSER, main_text, no_exception, serve_app, settle

pytestmark = BROWSER


def test_set_up_shown_before_any_result_and_the_dataset_page_needs_no_database(tmp_path, page):
    db = tmp_path / "results.duckdb"  # never created
    serving = Phase("serve", PHASES["serve"].label, "make serve", PHASES["serve"].typical_s)
    steps = [parse_step(s) for s in ("first-results: make eval-first", "build: make setup", "eval: make eval")]
    status = LaunchStatus(db, "http://127.0.0.1:1", [serving, *steps])
    status.begin(serving)
    status.end(serving, 0)
    status.begin(steps[0])
    status.end(steps[0], 0)
    status.begin(steps[1])  # building llama.cpp
    with serve_app(db) as url:
        page.goto(url)
        settle(page)
        no_exception(page)
        text = main_text(page)
        assert "Setting up" in text, text
        assert PHASES["build"].label in text, text
        assert "Set-up time left" in text and "Fill it with" not in text, text
        assert "Results are being prepared" in text, text

        status.end(steps[1], 0)  # the set-up moves on: the home page follows without a reload
        status.begin(steps[2])
        deadline = time.monotonic() + 30
        while PHASES["eval"].label not in main_text(page) and time.monotonic() < deadline:
            page.wait_for_timeout(500)
        assert PHASES["eval"].label in main_text(page)

        page.goto(f"{url}/leaderboards")
        settle(page)
        no_exception(page)
        text = main_text(page)
        assert "Results are being prepared" in text and PHASES["eval"].label in text, text
        assert "Fill it with" not in text and "No results database" not in text, text

        page.goto(f"{url}/dataset")  # a dataset is just a folder: shown without a results database
        settle(page)
        no_exception(page)
        text = main_text(page)
        assert "Source documents" in text and "Knowledge-base growth" in text, text
        assert "Results are being prepared" not in text, text

        status.finish("stopped")  # the launcher gone: the old text again, nobody fills the database
        page.goto(f"{url}/leaderboards")
        settle(page)
        assert "Fill it with" in main_text(page)
