"""The Med-CoDE page under AppTest: Table 2 from answer_checks with n, unparsed and intervals, the classifier behind
every distribution (model card, logprobs flagged), all four probabilities in the correlations with the paper's
claims, the human checks (Table 1 against scikit-learn, critique accuracy) and the annotation queue."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score
from statsmodels.stats.proportion import proportion_confint

from pages import _data as data
from pipeline.disagreement import LABELS
from pipeline.read import medcode
from pipeline.read.common import Filters
from pipeline.steps.medcode import classifier_tag
from pipeline.store import Store
from pipeline.store.rows import AnswerCheckRow, CritiqueRow, LabelledCritiqueRow, RunRow
from tests.test_app_pages import open_app, texts

PAGE = "pages/4_medcode.py"
CLOSED = "medqa-synth"
CHECKER = "openai/gpt-4o-mini"
TEACHER = "openai/gpt-3.5-turbo"


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()


def query(db, sql: str, params=()) -> pd.DataFrame:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).df()
    finally:
        con.close()


def frame_with(at, *columns: str) -> pd.DataFrame:
    return next(f.value for f in at.dataframe if set(columns) <= set(f.value.columns))


def closed_book_responses(db) -> pd.DataFrame:
    return query(db, "SELECT query_id, model_id, response_hash FROM responses WHERE dataset = ? AND error IS NULL "
                     "ORDER BY query_id, model_id", [CLOSED])


@pytest.fixture(scope="module")
def checked_db(synthetic_db, tmp_path_factory):
    """The synthetic database plus answer checks (some unparsed), a teacher's labelled critiques (some unparsed),
    a second critic whose classifier has a model card, and human critique labels imported from a CSV."""
    import shutil

    from pipeline.labels.critique_labels import import_critique_labels_command

    root = tmp_path_factory.mktemp("medcode-page")
    db = root / "checked.duckdb"
    shutil.copy(synthetic_db, db)
    resp = closed_book_responses(db)
    rng = np.random.default_rng(7)
    rows = []
    for i, r in enumerate(resp.itertuples()):
        choice = None if i % 7 == 0 else bool(rng.random() < 0.6)
        verdict = None if i % 11 == 0 else bool(rng.random() < 0.5)
        common = {"dataset": CLOSED, "query_id": r.query_id, "model_id": r.model_id, "response_hash": r.response_hash,
                  "run_id": "test"}
        rows += [AnswerCheckRow(**common, method="choice", checker_id="parser", correct=choice, parsed=None,
                                raw_output=""),
                 AnswerCheckRow(**common, method="llm", checker_id=CHECKER, correct=verdict, parsed=None,
                                raw_output="{}")]
        if i < 40:
            rows.append(LabelledCritiqueRow(**common, source=TEACHER, critique=f"Teacher critique {i}.",
                                            label=None if i % 9 == 0 else LABELS[int(rng.integers(4))]))
    card_dir = root / "clf"
    card_dir.mkdir()
    (card_dir / "medcode.json").write_text(json.dumps({"format": "pariksha-medcode-classifier/1",
                                                       "base_model": "tiny", "training_csv": {"path": "x.csv"},
                                                       "test": {"n": 60, "accuracy": 0.8333, "macro_f1": 0.8}}))
    tag = classifier_tag(str(card_dir))
    rows.append(RunRow(run_id="card-run", name="card", kind="pipeline", dataset=CLOSED, config=json.dumps(
        {"medcode": {"critic": "vllm/other-critic", "classifier": str(card_dir)}}), config_hash="x",
        code_revision="x", model_files="{}"))
    for i, r in enumerate(resp.head(30).itertuples()):
        p = np.roll([0.7, 0.1, 0.1, 0.1], i % 4)
        rows.append(CritiqueRow(dataset=CLOSED, query_id=r.query_id, model_id=r.model_id, critic_id="vllm/other-critic",
                                classifier=tag, critique=f"Other critique {i}.", p_none=p[0], p_low=p[1],
                                p_moderate=p[2], p_high=p[3], label=LABELS[i % 4], response_hash=r.response_hash,
                                run_id="card-run"))
    Store(db).write(rows)
    lines = ["dataset,query_id,model_id,annotator,label,critique_accurate,critique_by,critique_kind"]
    for i, r in enumerate(resp.head(36).itertuples()):
        label = LABELS[int(rng.integers(4))] if i % 5 else ""
        lines.append(f"{CLOSED},{r.query_id},{r.model_id},dr-{i % 2},{label},{'yes' if i % 3 else 'no'},"
                     "vllm/medcode-phi-3-mini-critic,critic")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    assert import_critique_labels_command(root / "labels.csv", db=db) == 0
    return db


def test_results_table2_classifiers_and_claims(checked_db, monkeypatch):
    at = open_app(checked_db, monkeypatch, PAGE)
    body = texts(at)
    summary = frame_with(at, "llm_checker", "exact_match")
    long = frame_with(at, "measure", "unparsed", "lo", "hi")
    checks = query(checked_db, "SELECT model_id, method, count(*) AS total, count(correct) AS n, "
                               "count(*) FILTER (WHERE correct) AS k FROM answer_checks GROUP BY ALL")
    for c in checks.itertuples():
        measure = "exact_match" if c.method == "choice" else "llm_accuracy"
        row = long[(long.model == c.model_id) & (long.dataset == CLOSED) & (long.measure == measure)].iloc[0]
        lo, hi = proportion_confint(c.k, c.n, method="wilson")
        assert (row.n, row.unparsed) == (c.n, c.total - c.n)  # unparsed counted, never right or wrong
        assert row.value == pytest.approx(c.k / c.n) and (row.lo, row.hi) == (pytest.approx(lo), pytest.approx(hi))
        shown = summary[(summary.model == c.model_id) & (summary.dataset == CLOSED)][measure]
        assert len(shown) and np.allclose(shown, c.k / c.n)  # LLM-Accuracy is the checker's, not the share of FC = 2
    assert set(summary[summary.dataset == CLOSED].llm_checker) == {CHECKER} and CHECKER in body
    probs = long[long.measure.isin(["p_none", "p_high", "meteor"])]
    assert ((probs.lo <= probs.value + 1e-9) & (probs.value <= probs.hi + 1e-9)).all() and (probs.n > 0).all()
    classifiers = frame_with(at, "test_accuracy", "kind")
    card = classifiers[classifiers.critic_id == "vllm/other-critic"].iloc[0]
    assert card.test_accuracy == pytest.approx(0.8333) and card.n == 30
    assert "test accuracy 0.83" in body and "on 60 held-out critiques" in body
    assert any("came from logprobs" in w.value.replace("\\", "") and "not the paper's method" in
               w.value.replace("\\", "") for w in at.warning)
    claims = frame_with(at, "claim", "verdict")
    assert len(claims) == 5 and set(claims.quantity) == {"P(None)", "P(Low)", "P(Moderate)", "P(High)"}
    assert "strong positive correlation between accuracy" in " ".join(claims.claim)
    assert claims.published_r.notna().sum() == 4  # the paper's own Table 2 rows have no exact match
    paper = next(f.value for f in at.dataframe if "model" in f.value and "LLaMA-3" in set(f.value.model))
    assert len(paper) == 12 and "llm_checker" not in paper


def test_correlations_have_all_four_probabilities_per_model_and_pooled(checked_db):
    corr = medcode.medcode_correlations(checked_db, Filters(), "openai/gpt-4o")
    assert set(corr.quantity) == set(medcode.QUANTITIES)
    assert {"meteor", "rouge_l", "llm_accuracy", "exact_match", "FC", "SS", "COH", "CON"} <= set(corr.score)
    assert medcode.POOLED in set(corr.model) and len(set(corr.model)) > 2
    model = "vllm/BioMistral/BioMistral-7B"
    pairs = query(checked_db, "SELECT c.p_moderate, a.correct::DOUBLE AS acc FROM critiques c JOIN answer_checks a "
                              "USING (dataset, query_id, model_id, response_hash) WHERE a.method = 'llm' "
                              "AND c.critic_id = 'vllm/medcode-phi-3-mini-critic' AND c.model_id = ? "
                              "AND a.correct IS NOT NULL", [model])
    one = corr[corr.model == model].set_index(["quantity", "score"])
    assert one.loc[("p_moderate", "llm_accuracy"), "n"] == len(pairs)
    assert one.loc[("p_moderate", "llm_accuracy"), "r"] == pytest.approx(np.corrcoef(pairs.p_moderate, pairs.acc)[0, 1])
    assert one.loc[("p_low", "meteor"), "n"] > 0


def test_human_checks_against_scikit_learn(checked_db, monkeypatch):
    at = open_app(checked_db, monkeypatch, PAGE, {"mc_view": "Human checks"})
    table1 = frame_with(at, "classifier", "accuracy", "unparsed").set_index("classifier")
    human = query(checked_db, "SELECT dataset, query_id, model_id, annotator, label AS human, response_hash "
                              "FROM critique_labels WHERE label IS NOT NULL")
    critic = query(checked_db, "SELECT dataset, query_id, model_id, response_hash, label FROM critiques "
                               "WHERE critic_id = 'vllm/medcode-phi-3-mini-critic'")
    teacher = query(checked_db, "SELECT dataset, query_id, model_id, response_hash, label FROM labelled_critiques")
    keys = ["dataset", "query_id", "model_id", "response_hash"]
    for name, preds in (("vllm/medcode-phi-3-mini-critic · logprobs", critic), (f"teacher: {TEACHER}", teacher)):
        pairs = human.merge(preds, on=keys)
        known = pairs[pairs.label.notna()]
        row = table1.loc[name]
        assert row.n == len(known) and row.unparsed == len(pairs) - len(known)
        assert row.accuracy == pytest.approx(accuracy_score(known.human, known.label))
        lo, hi = proportion_confint(row.correct, row.n, method="wilson")
        assert (row.lo, row.hi) == (pytest.approx(lo), pytest.approx(hi))
    assert table1.loc[f"teacher: {TEACHER}", "kind"].startswith("zero-shot LLM")
    checked = query(checked_db, "SELECT count(*) AS n, count(*) FILTER (WHERE critique_accurate) AS k "
                                "FROM critique_labels").iloc[0]
    share = frame_with(at, "critique_source", "share").iloc[0]
    assert (share.n, share.accurate) == (checked.n, checked.k) and share.share == pytest.approx(checked.k / checked.n)
    published = frame_with(at, "framework", "accuracy")
    assert set(published.framework) == {"GPT-3.5", "Med-Code"}


def test_annotation_queue_saves_the_shown_critique(synthetic_db, copy_db, monkeypatch):
    db = copy_db(synthetic_db)
    at = open_app(db, monkeypatch, PAGE, {"mc_view": "Annotate"})
    at.text_input(key="mc_annotator").input("dr-test")
    at.run()
    shown = [t.value for t in at.text]
    item = query(db, "SELECT query_id, model_id, critique, response_hash FROM critiques WHERE critique = ?",
                 [shown[-1]])
    assert len(item) >= 1  # the critique shown is a stored critique, as stored
    at.radio(key="mc_label").set_value("High")
    at.radio(key="mc_accurate").set_value("No")
    next(b for b in at.button if b.label == "Save check").click()
    at.run()
    assert not at.exception
    saved = query(db, "SELECT * FROM critique_labels")
    assert len(saved) == 1 and saved.label[0] == "High" and not saved.critique_accurate[0]
    assert saved.annotator[0] == "dr-test" and saved.source[0] == "app"
    assert (saved.query_id[0], saved.model_id[0]) in set(zip(item.query_id, item.model_id, strict=True))
    assert "Saved" in texts(at)


def test_page_on_a_real_pipeline_run(pipeline_db, monkeypatch):
    at = open_app(pipeline_db, monkeypatch, PAGE)
    summary = frame_with(at, "llm_checker", "exact_match")
    critiques = query(pipeline_db, "SELECT DISTINCT model_id, dataset FROM critiques WHERE p_none IS NOT NULL")
    assert set(zip(summary.model, summary.dataset, strict=True)) >= set(
        zip(critiques.model_id, critiques.dataset, strict=True))
    assert any("came from logprobs" in w.value.replace("\\", "") for w in at.warning)
    for view in ("Human checks", "Annotate"):
        at = open_app(pipeline_db, monkeypatch, PAGE, {"mc_view": view})
        assert not at.exception
