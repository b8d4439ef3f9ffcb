"""The annotation view writes a human label through the Store at once, and agreement follows."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.labels.human_labels import save_label

REPO = Path(__file__).resolve().parent.parent


def annotate(db: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.query_params.update(params)
    at.run()
    at.switch_page("pages/5_human_vs_llm.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_item(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**")).replace("\\", "")


def test_annotation_saves_label_and_updates_agreement(pipeline_db, copy_db, monkeypatch):
    data.clear_caches()
    db = copy_db(pipeline_db)
    con = duckdb.connect(str(db), read_only=True)
    total = con.execute("SELECT count(*) FROM responses WHERE text IS NOT NULL").fetchone()[0]
    con.close()
    at = annotate(db, monkeypatch, hv_view="Annotate", hv_annotator="dr-test", hv_ann_metric="FC")
    assert at.text_input(key="hv_annotator").value == "dr-test"
    assert f"0 of {total} items labelled by dr-test on FC" in at.get("progress")[0].proto.text.replace("\\", "")
    first = shown_item(at)

    at.radio(key="hv_score").set_value(2)
    at.text_area(key="hv_comment").input("matches the ground truth")
    next(b for b in at.button if b.label == "Save label").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT query_id, model_id, metric, annotator, score, comment, source "
                       "FROM human_labels").fetchall()
    con.close()
    assert len(rows) == 1
    query_id, model_id, metric, annotator, score, comment, source = rows[0]
    assert (metric, annotator, score, comment, source) == ("FC", "dr-test", 2, "matches the ground truth", "app")
    assert query_id in first and model_id in first
    # the queue moved on and the progress counts the new label
    assert f"1 of {total} items labelled by dr-test on FC" in at.get("progress")[0].proto.text.replace("\\", "")
    assert shown_item(at) != first

    # skipping shows another item without writing
    next(b for b in at.button if b.label == "Skip this item").click()
    at.run()
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM human_labels").fetchone()[0] == 1
    con.close()

    # the agreement view now compares this label with the judge's FC score for that item
    at.segmented_control(key="hv_view").set_value("Agreement")
    at.run()
    at.selectbox(key="hv_metric").set_value("FC")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    con = duckdb.connect(str(db), read_only=True)
    judged = con.execute("SELECT round(avg(score)) FROM judgments WHERE query_id = ? AND model_id = ? "
                         "AND metric = 'FC' AND parse_ok", [query_id, model_id]).fetchone()[0]
    con.close()
    if judged is None:  # SmolLM2's FC output for that item did not parse: nothing to compare
        assert any("No human labels" in i.value for i in at.info)
    else:
        table = next(f.value for f in at.dataframe if "kappa" in f.value.columns)
        row = table[table.model_id == model_id].iloc[0]
        assert row.n == 1 and row.agreement == (1.0 if judged == 2 else 0.0)


def test_annotation_needs_a_name_and_a_score(pipeline_db, copy_db, monkeypatch):
    data.clear_caches()
    db = copy_db(pipeline_db)
    at = annotate(db, monkeypatch, hv_view="Annotate")
    assert any("Enter your name" in i.value for i in at.info)
    at.text_input(key="hv_annotator").input("  ").run()
    assert any("Enter your name" in i.value for i in at.info)
    at.text_input(key="hv_annotator").input("dr-x").run()
    next(b for b in at.button if b.label == "Save label").click()
    at.run()
    assert any("Choose a score first" in e.value for e in at.error)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM human_labels").fetchone()[0] == 0
    con.close()
    with pytest.raises(ValueError):
        save_label(db, dataset="cataract", query_id="en-001", model_id="m", metric="XX", annotator="a", score=1,
                   comment=None)
