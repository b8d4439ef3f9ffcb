"""The response browser and the annotation view beside a non-English response: its machine English rendering
(marked machine-made), the query's machine rendering, which prompt the response came from, its rubric criteria,
and a prompt echo flagged. Rows are written through the Store into a copy of the pipeline's database."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.read.common import Filters
from pipeline.read.responses import Browse, browse_view
from pipeline.store import Store
from pipeline.store.rows import QueryRow, RubricGradeRow, SafetyCheckRow, TranslationRow, text_hash

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
TRANSLATOR = "test/translator"
RENDERING = "Take paracetamol for mild pain; see the doctor if it is severe."
QUERY_RENDERING = "What should I do if there is pain after the operation?"


def texts(at: AppTest) -> str:
    parts = [e.value for kind in (at.markdown, at.caption, at.text, at.info, at.warning, at.error) for e in kind]
    return "\n".join(str(p) for p in parts).replace("\\", "")


@pytest.fixture
def db(pipeline_db, copy_db) -> tuple[Path, dict]:
    """A copy with: the Hindi query's human rendering removed and a machine one stored instead; a machine
    rendering of SmolLM2's Hindi response; rubric grades of that response; a failed prompt-echo check."""
    data.clear_caches()
    path = copy_db(pipeline_db)
    with duckdb.connect(str(path), read_only=True) as con:
        qid, query, text, rhash, rubric = con.execute(
            "SELECT q.query_id, q.query, r.text, r.response_hash, q.rubric FROM responses r JOIN queries q "
            "USING (dataset, query_id) WHERE q.language = 'hi' AND r.model_id = ?", [SMOLLM2]).fetchone()
        fields = [f.name for f in dataclasses.fields(QueryRow) if f.name != "created_at"]
        stored = con.execute(f"SELECT {', '.join(fields)} FROM queries WHERE query_id = ?", [qid]).df()
    criteria = json.loads(rubric)
    row = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in stored.iloc[0].items()}
    row = {k: None if not isinstance(v, list) and pd.isna(v) else v for k, v in row.items()}
    Store(path).write([  # the query as if the dataset had come without a human English rendering
        QueryRow(**{**row, "query_en": None, "query_en_source": None}),
        TranslationRow(dataset="cataract", query_id=qid, model_id="", translator_id=TRANSLATOR,
                       source_hash=text_hash(query), text=QUERY_RENDERING),
        TranslationRow(dataset="cataract", query_id=qid, model_id=SMOLLM2, translator_id=TRANSLATOR,
                       source_hash=rhash, text=RENDERING),
        *(RubricGradeRow(dataset="cataract", query_id=qid, model_id=SMOLLM2, grader_id="test/grader",
                         criterion_index=i, criterion=c["criterion"], points=float(c["points"]),
                         tags=c.get("tags") or [], met=i % 2 == 0, explanation=f"explanation {i}",
                         raw_output="{}", response_hash=rhash, run_id=None) for i, c in enumerate(criteria)),
        SafetyCheckRow(dataset="cataract", query_id=qid, model_id=SMOLLM2, check_name="prompt_echo", passed=False,
                       detail="repeats 80% of the system prompt", response_hash=rhash),
    ])
    return path, {"qid": qid, "text": text, "criteria": criteria}


def test_browser_shows_renderings_prompt_and_rubric(db, monkeypatch):
    path, item = db
    view = browse_view(path, Browse(filters=Filters(dataset="cataract"), query_id=item["qid"]), 10, 0)
    prompts = view["details"]["prompts"]
    assert prompts.matches.all()  # the prompt rebuilt from the stored query and chunks is the one the model saw
    assert set(prompts.own_files.sum()) == {"generation_system.txt"}  # the cataract set's own Figure 3
    assert view["graders"] == ["test/grader"]

    monkeypatch.setenv("PARIKSHA_DB", str(path))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/2_responses.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    body = texts(at)
    shown = [t.value for t in at.text]
    assert RENDERING in shown and QUERY_RENDERING in shown
    assert f"English rendering for readers by {TRANSLATOR} (machine-made, not checked by a person; never scored)" \
        in body
    assert f"English rendering by {TRANSLATOR}, used for retrieval (machine-made" in body
    assert "the dataset's own generation_system.txt" in body and "matches the prompt these files give now" in body
    assert "Prompt echo: the response repeats 80% of the system prompt" in body
    assert not any("status" in f.value.columns for f in at.dataframe)  # rubric criteria are read when opened
    at.session_state[f"rb_rubric|{item['qid']}|{SMOLLM2}"] = True  # open that item's rubric expander
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    criteria = next(f.value for f in at.dataframe if "status" in f.value.columns and "criterion" in f.value.columns)
    assert list(criteria.criterion) == [c["criterion"] for c in item["criteria"]]
    assert set(criteria.status) == {"met", "not met"} and "explanation 0" in set(criteria.explanation)
    # the rendering is never a score: the judge's scores of this response are unchanged, none reads it
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM judgments WHERE justification = ?", [RENDERING]).fetchone()[0] == 0


def test_annotation_view_shows_the_renderings(db, monkeypatch):
    path, item = db
    monkeypatch.setenv("PARIKSHA_DB", str(path))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.query_params.update({"hv_view": "Annotate", "hv_annotator": "dr-test", "lang": "hi", "model": SMOLLM2})
    at.run()
    at.switch_page("pages/5_human_vs_llm.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [t.value for t in at.text]
    assert item["text"] in shown and RENDERING in shown and QUERY_RENDERING in shown
    assert "never scored" in texts(at)


def test_a_changed_prompt_file_no_longer_matches_the_stored_hash(pipeline_db, tmp_path):
    """The browser rebuilds the prompt from the dataset's files now: a changed file shows as a mismatch, and a
    dataset without its own files is read with the studio's."""
    from pipeline.read.provenance import prompt_provenance

    view = browse_view(pipeline_db, Browse(filters=Filters(dataset="cataract")), 10, 0)
    page, chunks = view["page"], view["chunks"]
    folder = tmp_path / "cataract"
    (folder / "prompts").mkdir(parents=True)
    (folder / "queries.jsonl").write_text("", encoding="utf-8")
    figure3 = (REPO / "data" / "cataract" / "prompts" / "generation_system.txt").read_text(encoding="utf-8")
    (folder / "prompts" / "generation_system.txt").write_text(figure3, encoding="utf-8")
    same = prompt_provenance("cataract", (str(folder), False), page, chunks)
    assert same.matches.all() and all(own == ["generation_system.txt"] for own in same.own_files)
    (folder / "prompts" / "generation_system.txt").write_text(figure3 + "\n- Answer in one line.", encoding="utf-8")
    changed = prompt_provenance("cataract", (str(folder), False), page, chunks)
    assert not changed.matches.any() and all("differs" in note for note in changed.note)
    (folder / "prompts" / "generation_system.txt").unlink()
    studio = prompt_provenance("cataract", (str(folder), False), page, chunks)
    assert all(own == [] for own in studio.own_files) and not studio.matches.any()  # the generic prompt differs
    assert set(studio.studio_files.sum()) == {"generation_system.txt", "generation_user.txt"}
