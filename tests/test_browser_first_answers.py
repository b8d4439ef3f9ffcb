"""``make run``'s first answers in the browser: while the launcher's status file says llama.cpp is being built, a
local model's answer written on the prebuilt engine (xllamacpp), and its judge score, are on the Response browser —
the text as stored, the score as stored (whatever a tiny model wrote: never asserted).

The status file is written by the launcher's own writer on behalf of this test process, which stands for the
launcher; the answer and the score by a real run (``python -m pipeline run``) of SmolLM2 on one closed-book query."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.config import ModelConfig
from pipeline.launch_status import PHASES, LaunchStatus, Phase, parse_step
from pipeline.models.llamacpp import ENGINE_ENV, unavailable
from pipeline.models.llamacpp_prebuilt import ENGINE
from pipeline.store import open_connection
from tests.support.browser import BROWSER, main_text, no_exception, serve_app, settle

pytestmark = BROWSER
REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"


def test_a_local_answer_and_its_score_while_llama_cpp_builds(tmp_path, page, monkeypatch):
    monkeypatch.setenv(ENGINE_ENV, ENGINE)
    if reason := unavailable(ModelConfig(id=SMOLLM2)):
        pytest.skip(f"xllamacpp: {reason}")
    db = tmp_path / "results.duckdb"
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump({
        "name": "first-answers", "dataset": str(REPO / "data" / "eyecare-qa"), "db": str(db), "limit": 1,
        "models": [{"id": SMOLLM2, "max_tokens": 24}],
        "judge": {"id": SMOLLM2, "metrics": ["FC"], "max_tokens": 48}}), encoding="utf-8")

    serving = Phase("serve", PHASES["serve"].label, "make serve", PHASES["serve"].typical_s)
    steps = [parse_step(s) for s in ("first-answers: make eval-first-answers", "first-results: make eval-first",
                                     "build: make setup", "eval: make eval-models")]
    status = LaunchStatus(db, "http://127.0.0.1:1", [serving, *steps])
    status.begin(serving)
    status.end(serving, 0)
    status.begin(steps[0])
    # what the first-answers phase does, on one query (a process of its own, as `make run` starts it)
    subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(config_path),
                    "--stages", "generate,judge"], cwd=REPO, check=True, timeout=600)
    status.end(steps[0], 0)
    status.begin(steps[1])
    status.end(steps[1], 0)
    status.begin(steps[2])  # llama.cpp is being built

    with open_connection(db, read_only=True) as con:
        query_id, text, engine = con.execute("SELECT query_id, text, engine FROM responses").fetchone()
        (score,) = con.execute("SELECT avg(score) FROM judgments WHERE metric = 'FC'").fetchone()
    assert engine == ENGINE and text
    shown_score = "–" if score is None else (str(int(score)) if float(score).is_integer() else f"{score:.2f}")

    with serve_app(db) as url:
        page.goto(url)
        settle(page)
        no_exception(page)
        assert "Setting up" in main_text(page) and PHASES["build"].label in main_text(page)

        page.goto(f"{url}/responses")
        settle(page)
        no_exception(page)
        shown = main_text(page)
        assert query_id in shown and SMOLLM2 in shown, shown
        assert f"FC {shown_score}" in shown, shown  # the header's score summary
        assert " ".join(text.split()[:6]) in " ".join(shown.split()), shown  # the answer as stored
