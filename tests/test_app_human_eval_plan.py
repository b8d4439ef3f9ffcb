"""The Human vs LLM page on a human-evaluation plan: `human-eval plan` draws the sample, part of its CSV is filled
and imported, and the page shows agreement, rankings and completeness on exactly that sample; the annotation
queue follows the plan's items."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.store import Store

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def open_page(db: Path, monkeypatch, **params: str) -> AppTest:
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.query_params.update(params)
    at.run()
    at.switch_page("pages/5_human_vs_llm.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_computes_agreement_and_completeness_on_the_plan(synthetic_db, copy_db, tmp_path, monkeypatch):
    data.clear_caches()
    db = copy_db(synthetic_db)
    Store(db).delete_where("human_labels", "TRUE", [])  # only the plan's labels below
    judge = data.judge_in_use(db, "synthetic")
    with duckdb.connect(str(db), read_only=True) as con:
        models = [r[0] for r in con.execute("SELECT DISTINCT model_id FROM responses WHERE dataset = 'synthetic' "
                                            "ORDER BY 1 LIMIT 3").fetchall()]
        llm = {(q, m): s for q, m, s in con.execute(
            "SELECT query_id, model_id, round(SS)::INTEGER FROM item_scores WHERE dataset = 'synthetic' "
            "AND judge_id = ? AND SS IS NOT NULL", [judge]).fetchall()}
    out = tmp_path / "plan.csv"
    made = cli("human-eval", "plan", "--db", str(db), "--dataset", "synthetic", "--models", ",".join(models),
               "--english", "8", "--metric", "SS", "--seed", "3", "--out", str(out))
    assert made.returncode == 0, made.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    plan_id = rows[0]["plan_id"]
    # fill every Indic row and half the English ones: the judge's score on even rows, another score on odd ones
    english = [r for r in rows if r["language"] == "en"]
    filled = [r for r in rows if r["language"] != "en"] + english[: len(english) // 2]
    for i, r in enumerate(filled):
        judged = llm.get((r["query_id"], r["model_id"]), 1)
        r["score"] = str(judged if i % 2 == 0 else (judged + 1) % 3)
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    imported = cli("import-human-labels", str(out), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    # a label outside the plan must not count
    with duckdb.connect(str(db), read_only=True) as con:
        outside = con.execute("SELECT r.query_id, r.model_id FROM responses r WHERE r.dataset = 'synthetic' AND "
                              "NOT EXISTS (SELECT 1 FROM annotation_plans p WHERE p.query_id = r.query_id AND "
                              "p.model_id = r.model_id) AND r.error IS NULL LIMIT 1").fetchone()
    from pipeline.labels.human_labels import save_label

    save_label(db, dataset="synthetic", query_id=outside[0], model_id=outside[1], metric="SS", annotator="other",
               score=0, comment="")

    at = open_page(db, monkeypatch, hv_plan=plan_id)
    assert at.selectbox(key="hv_plan").value == plan_id
    frames = [f.value for f in at.dataframe]
    progress = next(f for f in frames if "labels_planned" in f.columns).set_index("language")
    frame = pd.DataFrame(rows)
    assert progress.loc["all languages", "items"] == len(rows)
    assert progress.loc["all languages", "labels"] == len(filled)
    assert progress.loc["Hindi (hi)", "labels"] == progress.loc["Hindi (hi)", "labels_planned"] \
        == (frame.language == "hi").sum()
    assert progress.loc["English (en)", "labels"] == len(english) // 2
    assert progress.loc["English (en)", "labels_planned"] == len(english)

    table = next(f for f in frames if "kappa" in f.columns)
    pairs = pd.DataFrame([{"language": r["language"], "human": int(r["score"]),
                           "llm": llm[(r["query_id"], r["model_id"])]} for r in filled
                          if (r["query_id"], r["model_id"]) in llm])
    for code, label in (("en", "English (en)"), ("hi", "Hindi (hi)")):
        mine = pairs[pairs.language == code]
        row = table[(table.language == label) & (table.model_id == data.ALL_MODELS)].iloc[0]
        assert row.n == len(mine)  # exactly the plan's filled rows, not the label outside it
        assert abs(row.agreement - (mine.human == mine.llm).mean()) < 1e-9
    ranks = next(f for f in frames if "human_rank" in f.columns)
    assert set(ranks.model) <= {data.short_name(m) for m in models}
    assert any("Kendall" in c.value or "rankings" in c.value for c in at.caption)

    # the annotation queue follows the plan: its items only, the plan's metric
    at = open_page(db, monkeypatch, hv_plan=plan_id, hv_view="Annotate", hv_annotator="annotator-1")
    progress_text = at.get("progress")[0].proto.text.replace("\\", "")
    assert f"{len(filled)} of {len(rows)} items labelled by annotator-1 on SS" in progress_text
    shown = next(m.value for m in at.markdown if m.value.startswith("**")).replace("\\", "")
    planned = {(r["query_id"], r["model_id"]) for r in rows if not r["score"]}
    assert any(q in shown and m in shown for q, m in planned)
