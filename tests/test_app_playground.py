"""The playground with the embedded SmolLM2, real and in process: stream, judge, critique, translate, save."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from pages import _data as data

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
pytestmark = pytest.mark.slow


@pytest.fixture
def playground(pipeline_db, copy_db, tmp_path, monkeypatch) -> tuple[AppTest, Path]:
    """The playground page on a copy of the pipeline database, with a small SmolLM2 config."""
    data.clear_caches()
    db = copy_db(pipeline_db)
    config = tmp_path / "playground.yaml"
    config.write_text(yaml.safe_dump({
        "name": "playground-test", "dataset": str(REPO / "data" / "cataract"), "db": str(db),
        "retrieval": {"top_k": 1, "split": "separate", "top_k_updates": 1},
        "models": [{"id": SMOLLM2, "max_tokens": 16}, {"id": "extractive/top-sentences"},
                   {"id": "openai/gpt-4o-mini", "api_key_env": "PARIKSHA_TEST_UNSET_KEY"}],
        "judge": {"id": SMOLLM2, "max_tokens": 24},
        "medcode": {"critic": SMOLLM2, "classifier": "logprobs"},
    }))
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    monkeypatch.setenv("PARIKSHA_CONFIG", str(config))
    monkeypatch.delenv("PARIKSHA_TEST_UNSET_KEY", raising=False)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
    at.run()
    at.switch_page("pages/6_playground.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at, db


def click(at: AppTest, label: str) -> None:
    next(b for b in at.button if b.label == label).click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_playground_streams_judges_critiques_and_saves(playground):
    at, db = playground
    boxes = {c.label.replace("\\", ""): c for c in at.checkbox}
    assert boxes[SMOLLM2].value and not boxes[SMOLLM2].disabled
    assert boxes["openai/gpt-4o-mini"].disabled  # its key variable is unset; the reason is shown
    assert any("PARIKSHA_TEST_UNSET_KEY" in c.value.replace("\\", "") for c in at.caption)

    at.text_area(key="pg_query").input("Can I wash my hair after the operation?")
    at.text_area(key="pg_gt").input("You can take a head bath from 7 days (1 week) after surgery.")
    at.run()
    click(at, "Generate")
    answer = at.session_state["pg_result"]["answers"][SMOLLM2]["text"]
    assert answer.strip() and answer in [t.value for t in at.text]  # shown as plain text
    assert any(e.label.startswith("Retrieved chunks: 1 raw, 1 KB updates") for e in at.expander)

    at.checkbox(key="pg_do_judge").check()
    at.checkbox(key="pg_do_medcode").check()
    at.run()
    click(at, "Score the answers")
    scores = next(f.value for f in at.dataframe if "justification" in f.value.columns)
    assert list(scores.metric) == ["FC", "SS", "COH", "CON"]
    assert scores.parse_ok.dtype == bool
    distribution = next(f.value for f in at.dataframe if "Moderate" in f.value.columns)
    assert abs(distribution.iloc[0].sum() - 1) < 1e-6

    click(at, "Save to the database")
    assert any("Saved" in s.value for s in at.success)
    con = duckdb.connect(str(db), read_only=True)
    runs = con.execute("SELECT run_id, status FROM runs WHERE kind = 'playground'").fetchall()
    response = con.execute("SELECT query_id, text FROM responses WHERE dataset = 'playground'").fetchall()
    judged = con.execute("SELECT count(*) FROM judgments WHERE dataset = 'playground'").fetchone()[0]
    critiques = con.execute("SELECT count(*) FROM critiques WHERE dataset = 'playground'").fetchone()[0]
    query = con.execute("SELECT query, gt_response FROM queries WHERE dataset = 'playground'").fetchone()
    chunks = con.execute("SELECT count(*) FROM kb_chunks WHERE dataset = 'playground'").fetchone()[0]
    pipeline_rows = con.execute("SELECT count(*) FROM responses WHERE dataset = 'cataract'").fetchone()[0]
    con.close()
    assert len(runs) == 1 and runs[0][1] == "finished"
    assert len(response) == 1 and response[0][1] == answer.strip() and response[0][0].startswith("typed-")
    assert judged == 4 and critiques == 1 and chunks == 2
    assert query == ("Can I wash my hair after the operation?",
                     "You can take a head bath from 7 days (1 week) after surgery.")
    assert pipeline_rows == 4  # a playground answer never replaces a pipeline run's response


def test_playground_translates_a_query_without_english_rendering(playground):
    at, _ = playground
    at.selectbox(key="pg_lang").set_value("hi")
    at.text_area(key="pg_query").input("ऑपरेशन के बाद सिर कब धो सकते हैं?")
    at.run()
    assert at.selectbox(key="pg_translator").value == SMOLLM2
    click(at, "Generate")
    result = at.session_state["pg_result"]
    assert result["translated"] and result["query"].query_en.strip()
    assert result["query"].query_en in [t.value for t in at.text]
    assert any("machine-translated" in c.value.replace("\\", "") for c in at.caption)
    assert result["answers"][SMOLLM2]["text"].strip()


def test_playground_reruns_a_dataset_query_with_another_model(playground):
    at, db = playground
    at.segmented_control(key="pg_source").set_value("Pick from the dataset")
    at.run()
    at.checkbox(key="pg_model_0").uncheck()
    at.checkbox(key="pg_model_1").check()  # the extractive baseline this time
    at.run()
    picked = at.selectbox(key="pg_pick").value
    click(at, "Generate")
    click(at, "Save to the database")
    con = duckdb.connect(str(db), read_only=True)
    saved = con.execute("SELECT query_id, model_id FROM responses WHERE dataset = 'playground'").fetchall()
    con.close()
    assert saved == [(f"cataract:{picked}", "extractive/top-sentences")]
