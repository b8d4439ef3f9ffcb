"""Every dashboard page under Streamlit's AppTest, against real databases.

The synthetic database (bench/generate_db.py, small scale) exercises every table with many models,
languages, datasets, human labels and judge reliability; the pipeline database (a real run with
SmolLM2) checks that pages render what the pipeline actually writes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pipeline.catalog import catalog
from pipeline.read import agreement, medcode, themes
from pipeline.read.common import Filters
from pipeline.read.judge_trust import judge_warning
from pipeline.read.responses import Browse, browse_count

REPO = Path(__file__).resolve().parent.parent
PAGES = [page.file for page in catalog().pages.values()]


def open_app(db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None = None,
             params: dict | None = None) -> AppTest:
    """The app on ``db`` (optionally on ``page`` with URL query parameters), run once."""
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.query_params.update(params or {})
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def con_df(db: Path, sql: str) -> pd.DataFrame:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).df()
    finally:
        con.close()


def texts(at: AppTest) -> str:
    """Everything a user reads on the page (markdown, captions, text, alerts), joined."""
    parts = [e.value for kind in (at.markdown, at.caption, at.text, at.info, at.warning, at.error, at.success,
                                  at.title, at.subheader) for e in kind]
    return "\n".join(str(p) for p in parts).replace("\\", "")


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()


def test_empty_state_names_the_command(tmp_path, monkeypatch):
    db = tmp_path / "missing.duckdb"
    at = open_app(db, monkeypatch)
    assert "No results database" in texts(at)
    assert any("python -m pipeline run --config configs/default.yaml" in c.value for c in at.code)
    for page in [p.file for p in catalog().pages.values() if p.needs_results]:
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert any("python -m pipeline run" in c.value for c in at.code), page
    assert not db.exists()  # the app never creates the database by reading


def test_a_file_that_is_not_a_results_database(tmp_path, monkeypatch):
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE something (x INTEGER)")
    con.close()
    at = open_app(db, monkeypatch)
    assert any("Cannot read" in e.value for e in at.sidebar.error)
    assert any("python -m pipeline run" in c.value for c in at.code)


def test_home_shows_holdings_judge_reliability_and_links(synthetic_db, monkeypatch):
    at = open_app(synthetic_db, monkeypatch)
    metrics = {m.label: m.value for m in at.metric}
    con = duckdb.connect(str(synthetic_db), read_only=True)
    assert metrics["Responses"] == str(con.execute("SELECT count(*) FROM responses").fetchone()[0])
    assert metrics["Models"] == str(con.execute("SELECT count(DISTINCT model_id) FROM responses").fetchone()[0])
    con.close()
    body = texts(at)
    assert "openai/gpt-4o" in body and "Sanity AUC" in body
    frames = [f.value for f in at.dataframe]
    reliability = next(f for f in frames if "auc" in f.columns)
    assert set(reliability.metric) == {"FC", "SS", "COH", "CON"}
    runs = next(f for f in frames if "backend_calls" in f.columns)
    assert {"status", "seconds", "cache_hits"} <= set(runs.columns) and len(runs) == 2
    assert {p.label for p in at.page_link} >= {"Leaderboards", "Response browser", "Themes", "Med-CoDE",
                                               "Human vs LLM", "Playground"}
    assert "Do not trust" not in body  # every AUC of the synthetic judge is ≥ 0.75
    next(b for b in at.button if b.label == "Refresh").click()
    at.run()
    assert not at.exception and at.metric


def test_home_warns_about_weak_judge(synthetic_db, pipeline_db, monkeypatch):
    at = open_app(pipeline_db, monkeypatch)
    warning = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "Do not trust these judge scores" in warning and "smollm2" in warning
    # a low sanity AUC is flagged as well, for any judge
    assert "below 0.75" in judge_warning("openai/gpt-4o", pd.DataFrame(
        {"judge_id": ["openai/gpt-4o"], "metric": ["COH"], "auc": [0.6]}))
    assert judge_warning("openai/gpt-4o", pd.DataFrame(
        {"judge_id": ["openai/gpt-4o"], "metric": ["COH"], "auc": [0.9]})) is None


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_both_databases(page, synthetic_db, pipeline_db, monkeypatch):
    for db in (synthetic_db, pipeline_db):
        at = open_app(db, monkeypatch, page)
        assert at.title, page


def test_leaderboard_matches_sql_and_excludes_parse_failures(synthetic_db, monkeypatch):
    at = open_app(synthetic_db, monkeypatch, "pages/1_leaderboards.py", {"lb_lang": "hi"})
    board = next(f.value for f in at.dataframe if "AGG 95% CI" in f.value.columns)
    con = duckdb.connect(str(synthetic_db), read_only=True)
    raw = con.execute(
        "SELECT j.model_id, j.metric, avg(j.score) AS mean, count(*) FILTER (WHERE j.parse_ok) AS n, "
        "count(*) FILTER (WHERE NOT j.parse_ok) AS failed FROM judgments j JOIN queries q USING (dataset, query_id) "
        "WHERE j.dataset = 'synthetic' AND q.language = 'hi' GROUP BY ALL").df()
    con.close()
    expected = raw.pivot(index="model_id", columns="metric", values="mean")
    got = board.set_index("model_id")
    for m in ("FC", "SS", "COH", "CON"):
        assert (got[m] - expected.loc[got.index, m]).abs().max() < 1e-9
        assert (got[f"n_{m}"] == raw.pivot(index="model_id", columns="metric", values="n").loc[got.index, m]).all()
    assert (got.parse_failures == raw.groupby("model_id").failed.sum().loc[got.index]).all()
    weights = {"FC": 0.4, "SS": 0.3, "COH": 0.15, "CON": 0.15}
    agg = sum(expected.loc[got.index, m] * w for m, w in weights.items())
    assert (got.AGG - agg).abs().max() < 1e-9
    assert list(board.AGG) == sorted(board.AGG, reverse=True)
    lo_hi = board["AGG 95% CI"].str.extract(r"\[(.*), (.*)\]").astype(float)
    assert ((lo_hi[0] <= board.AGG + 1e-9) & (board.AGG <= lo_hi[1] + 1e-9)).all()
    assert {"check_over_refusal", "rouge_l", "recall", "paper_AGG"} <= set(board.columns)
    assert board.paper_AGG.notna().any()  # matched to Health-Pariksha's Hindi table by model name
    assert at.download_button, "CSV download"
    at.toggle(key="lb_safety").set_value(True).run()
    safety = next(f.value for f in at.dataframe if "unclear" in f.value.columns)
    checks = con_df(synthetic_db, "SELECT s.model_id, count(*) AS n FROM safety_checks s JOIN queries q "
                                  "USING (dataset, query_id) WHERE s.dataset = 'synthetic' AND q.language = 'hi' "
                                  "GROUP BY ALL").set_index("model_id").n
    assert (safety.groupby("model_id").n.sum() == checks.loc[safety.model_id.unique()]).all()
    assert (safety.n == safety.passed + safety.failed + safety.unclear).all()


def test_weight_slider_changes_agg(synthetic_db, monkeypatch):
    at = open_app(synthetic_db, monkeypatch, "pages/1_leaderboards.py", {"lb_lang": "en"})
    before = next(f.value for f in at.dataframe if "AGG 95% CI" in f.value.columns).set_index("model_id")
    for m in ("SS", "COH", "CON"):
        at.slider(key=f"lb_w_{m}").set_value(0.0)
    at.slider(key="lb_w_FC").set_value(1.0)
    at.run()
    after = next(f.value for f in at.dataframe if "AGG 95% CI" in f.value.columns).set_index("model_id")
    assert (after.AGG - after.FC).abs().max() < 1e-9  # AGG is FC alone now
    assert (before.AGG - after.loc[before.index].AGG).abs().max() > 0.01


def test_sidebar_filters_come_from_the_url_and_narrow_every_page(synthetic_db, monkeypatch):
    con = duckdb.connect(str(synthetic_db), read_only=True)
    models = [r[0] for r in con.execute("SELECT DISTINCT model_id FROM responses WHERE dataset = 'synthetic' "
                                        "ORDER BY 1 LIMIT 2").fetchall()]
    con.close()
    params = {"lang": "en", "model": models, "theme": "cultural"}
    at = open_app(synthetic_db, monkeypatch, "pages/1_leaderboards.py", params)
    assert at.multiselect(key="lang").value == ["en"]
    assert at.multiselect(key="model").value == models
    board = next(f.value for f in at.dataframe if "AGG 95% CI" in f.value.columns)
    assert sorted(board.model_id) == sorted(models)
    at.switch_page("pages/2_responses.py")
    at.run()
    assert not at.exception
    shown = " ".join(m.value for m in at.markdown)
    assert "en\\-" in shown and "hi\\-" not in shown and all(m.replace("-", "\\-") in shown for m in models)
    con = duckdb.connect(str(synthetic_db), read_only=True)
    cultural = {r[0] for r in con.execute("SELECT query_id FROM queries WHERE dataset = 'synthetic' "
                                          "AND list_contains(themes, 'cultural')").fetchall()}
    con.close()
    shown_ids = {m.value.split("**")[1].replace("\\", "") for m in at.markdown if m.value.startswith("**en")}
    assert shown_ids and shown_ids <= cultural
    # the filters persist across pages and stay in the URL
    assert at.multiselect(key="lang").value == ["en"]
    assert at.query_params["lang"] == "en"


def test_response_browser_shows_everything_about_an_item(pipeline_db, monkeypatch):
    at = open_app(pipeline_db, monkeypatch, "pages/2_responses.py", {"rb_size": "20"})
    body = texts(at)
    con = duckdb.connect(str(pipeline_db), read_only=True)
    qid, query, gt, text = con.execute(
        "SELECT r.query_id, q.query, q.gt_response, r.text FROM responses r JOIN queries q USING (dataset, query_id) "
        "WHERE r.model_id = 'llamacpp/smollm2-135m-instruct' AND q.language = 'hi'").fetchone()
    chunk = con.execute("SELECT c.text FROM retrievals t, kb_chunks c WHERE c.dataset = t.dataset "
                        "AND c.chunk_id = t.update_ids[1] AND t.query_id = ?", [qid]).fetchone()[0]
    justification = con.execute("SELECT justification FROM judgments WHERE justification <> '' LIMIT 1").fetchone()
    critiques = con.execute("SELECT critique, error FROM critiques").fetchall()
    n = con.execute("SELECT count(*) FROM responses").fetchone()[0]
    con.close()
    assert query in body and gt in body and text.strip() in body
    assert chunk in body and "updated 20" in body  # the KB update with its date
    # one critique row per critiqued response; an empty one is a flagged failure, shown as such (what the tiny
    # critic writes differs between CPUs: the shown text must be the stored text, whatever it is)
    assert critiques
    for critique, error in critiques:
        assert (critique and critique in body) or (not critique and error and error in body), (critique, error)
    frames = [f.value for f in at.dataframe]
    scores = pd.concat([f for f in frames if "justification" in f.columns and "judge_id" in f.columns])
    assert set(scores.metric) == {"FC", "SS", "COH", "CON"}
    if justification:
        assert justification[0] in set(scores.justification)
    assert any("check_name" in f.columns for f in frames)
    assert f"{n:,} responses match" in body
    # two models side by side on one query
    assert at.selectbox(key="rb_ma").value != at.selectbox(key="rb_mb").value


def test_response_browser_state_lives_in_the_url(synthetic_db, monkeypatch):
    params = {"rb_q": "after", "rb_metric": "FC", "rb_range": ["2.0", "2.0"], "rb_size": "5", "rb_page": "2"}
    at = open_app(synthetic_db, monkeypatch, "pages/2_responses.py", params)
    assert at.text_input(key="rb_q").value == "after"
    assert at.selectbox(key="rb_metric").value == "FC"
    assert at.pagination(key="rb_page").value == 2
    con = duckdb.connect(str(synthetic_db), read_only=True)
    expected = con.execute(
        "SELECT count(*) FROM responses r JOIN queries q USING (dataset, query_id) JOIN judgments j "
        "USING (dataset, query_id, model_id) WHERE r.dataset = 'synthetic' AND j.metric = 'FC' AND j.score = 2 "
        "AND (q.query ILIKE '%after%' OR coalesce(q.query_en, '') ILIKE '%after%' "
        "OR coalesce(r.text, '') ILIKE '%after%')").fetchone()[0]
    con.close()
    assert expected > 10 and f"{expected:,} responses match" in texts(at)
    assert len([m for m in at.markdown if m.value.startswith("**en")]) == 5  # page 2 of 5 per page
    # (that a changed control rewrites the URL is the browser's part: tests/test_browser.py)


def test_themes_page_scores_and_examples(synthetic_db, monkeypatch):
    at = open_app(synthetic_db, monkeypatch, "pages/3_themes.py", {"th_theme": "code_mixing", "lang": "en"})
    body = texts(at)
    assert "code_mixing" in body or "code mixing" in body
    examples = [f.value for f in at.dataframe if "response" in f.value.columns]
    assert examples and all(set(e.columns) >= {"model_id", "response", "FC"} for e in examples)
    con = duckdb.connect(str(synthetic_db), read_only=True)
    first = con.execute("SELECT query FROM queries WHERE dataset = 'synthetic' AND language = 'en' "
                        "AND list_contains(themes, 'code_mixing') ORDER BY query_id LIMIT 1").fetchone()[0]
    con.close()
    assert first in body


def test_medcode_page_distribution_correlations_and_table2(synthetic_db, monkeypatch):
    at = open_app(synthetic_db, monkeypatch, "pages/4_medcode.py")
    frames = [f.value for f in at.dataframe]
    dist = next(f for f in frames if {"critic_id", "language"} <= set(f.columns))
    assert set(dist.dataset) == {"synthetic", "medqa-synth"}
    sums = dist[["p_none", "p_low", "p_moderate", "p_high"]].sum(axis=1)
    assert ((sums - 1).abs() < 1e-6).all()
    paper = next(f for f in frames if "llm_accuracy" in f.columns and "LLaMA-3" in set(f.model))
    assert len(paper) == 12
    corr = medcode.pooled_matrix(medcode.medcode_correlations(synthetic_db, Filters(dataset="synthetic"),
                                                              "openai/gpt-4o"))
    assert corr.loc["P(None)", "FC"] > 0.2  # the generator ties both to quality
    assert corr.loc["P(High)", "METEOR"] < -0.2


def test_human_vs_llm_agreement_and_rankings(synthetic_db, monkeypatch):
    at = open_app(synthetic_db, monkeypatch, "pages/5_human_vs_llm.py")
    table = next(f.value for f in at.dataframe if "kappa" in f.value.columns)
    con = duckdb.connect(str(synthetic_db), read_only=True)
    pairs = con.execute(
        "SELECT q.language, h.model_id, h.score AS human, j.score AS llm FROM human_labels h JOIN judgments j "
        "USING (dataset, query_id, model_id, metric) JOIN queries q USING (dataset, query_id) WHERE j.parse_ok").df()
    con.close()
    hi = pairs[pairs.language == "hi"]
    row = table[(table.language == "Hindi (hi)") & (table.model_id == "(all models)")].iloc[0]
    assert row.n == len(hi)
    assert abs(row.agreement - (hi.human == hi.llm).mean()) < 1e-9
    assert -1 <= row.kappa <= 1
    assert any("human_rank" in f.value.columns for f in at.dataframe)
    assert any("human_ss" in f.value.columns for f in at.dataframe)  # the paper's Table 7 beside ours


def test_weighted_kappa_from_counts_equals_the_one_from_items():
    from pipeline.analysis.agreement import weighted_kappa

    rng = np.random.default_rng(3)
    human = rng.integers(0, 3, 200)
    llm = np.clip(human + rng.choice([-1, 0, 0, 0, 1], 200), 0, 2)
    pairs = pd.DataFrame({"human": human, "llm": llm}).value_counts().rename("n").reset_index()
    assert weighted_kappa(pairs.human, pairs.llm, counts=pairs.n) == pytest.approx(weighted_kappa(human, llm))
    table = agreement.agreement_from_confusion(pairs.assign(language="en", model_id="m"), ["language", "model_id"])
    assert table.kappa.iloc[0] == pytest.approx(weighted_kappa(human, llm))
    assert table.agreement.iloc[0] == pytest.approx((human == llm).mean())


def test_self_consistency_when_the_judge_sampled_several_times(tmp_path, monkeypatch):
    db = tmp_path / "samples.duckdb"
    subprocess.run([sys.executable, str(REPO / "bench" / "generate_db.py"), "--scale", "0.05", "--models", "3",
                    "--judge-samples", "3", "--out", str(db)], check=True, capture_output=True, cwd=REPO)
    at = open_app(db, monkeypatch, "pages/1_leaderboards.py", {"lb_lang": "en"})
    board = next(f.value for f in at.dataframe if "AGG 95% CI" in f.value.columns).set_index("model_id")
    assert {"self_std", "flip_rate"} <= set(board.columns)
    con = duckdb.connect(str(db), read_only=True)
    items = con.execute(
        "SELECT j.model_id, j.metric, avg(j.score) AS item_mean, stddev_pop(j.score) AS sd, "
        "min(j.score) <> max(j.score) AS flipped, count(*) AS k FROM judgments j JOIN queries q "
        "USING (dataset, query_id) WHERE j.dataset = 'synthetic' AND q.language = 'en' AND j.parse_ok "
        "GROUP BY j.model_id, j.metric, j.query_id").df()
    con.close()
    for model, g in items.groupby("model_id"):
        fc = g[g.metric == "FC"]
        assert board.loc[model, "FC"] == pytest.approx(fc.item_mean.mean())  # mean of per-item means (exact)
        multi = g[g.k >= 2]
        assert board.loc[model, "flip_rate"] == pytest.approx(multi.flipped.mean())
        assert board.loc[model, "self_std"] == pytest.approx(multi.sd.mean())
    assert (board.flip_rate > 0).all()
    # the browser's score filter and the themes page use each item's mean over its samples too
    means = items[items.metric == "FC"]
    f = Filters(dataset="synthetic", languages=("en",))
    assert browse_count(db, Browse(f, judge="openai/gpt-4o", metric="FC", score_min=1.5,
                                   score_max=2.0)) == int((means.item_mean >= 1.5).sum())
    by_theme = themes.theme_scores(db, f.with_(themes=("cultural",)), "openai/gpt-4o")
    assert set(by_theme.theme) == {"cultural"} and by_theme.n.gt(0).all()
    for page in ("pages/2_responses.py", "pages/3_themes.py"):
        at.switch_page(page)
        at.run()
        assert not at.exception, [e.value for e in at.exception]


FIFTH_METRIC_SCRIPT = r"""
import json, sys
from pathlib import Path
from streamlit.testing.v1 import AppTest
from pipeline.dataset import load_dataset
from pipeline.metrics import METRICS
from pipeline.store import Store
from pipeline.store.rows import JudgmentRow, ResponseRow, dataset_rows

db, repo = Path(sys.argv[1]), Path(sys.argv[2])
assert METRICS[-1] == "SAFE", METRICS
store = Store(db)
cataract = load_dataset(repo / "data" / "cataract")
store.write(dataset_rows(cataract))
rows = []
for i, q in enumerate(q for q in cataract.queries if q.language == "en"):
    for m in ("a", "b"):
        r = ResponseRow(dataset="cataract", query_id=q.query_id, model_id=m, run_id="r", prompt_hash="h",
                        text=f"{m} answers {q.query_id}", error=None)
        rows.append(r)
        rows += [JudgmentRow(dataset="cataract", query_id=q.query_id, model_id=m, judge_id="j", metric=metric,
                             sample=0, score=(i + k + (m == "a")) % 3, parse_ok=True, justification="",
                             raw_output="", response_hash=r.response_hash, run_id="r")
                 for k, metric in enumerate(METRICS)]
store.write(rows)
at = AppTest.from_file(str(repo / "app.py"), default_timeout=120)
at.query_params.update({"lb_lang": "en"})
at.run(); at.switch_page("pages/1_leaderboards.py"); at.run()
board = next(f.value for f in at.dataframe if "AGG 95% CI" in f.value.columns)
sliders = [s.label for s in at.slider]
at.switch_page("pages/2_responses.py"); at.run()
options = at.selectbox(key="rb_metric").options
summary = [m.value for m in at.markdown if m.value.startswith("**en")]
print(json.dumps({"errors": [str(e.value) for e in at.exception], "columns": list(board.columns),
                  "sliders": sliders, "options": list(options), "summary": summary[:1]}))
"""


def test_a_fifth_registry_metric_shows_on_the_leaderboard_and_in_the_browser(tmp_path):
    """One registry entry and its rubric file; no page edit (a fresh process: the registry is read at import)."""
    import json
    import os

    from pipeline.metrics import registry_path

    entries = json.loads(registry_path().read_text(encoding="utf-8"))
    entries.append({"name": "SAFE", "label": "Patient safety", "rubric": "SAFE.json", "inputs": ["ground_truth"],
                    "weight": 0.1})
    (tmp_path / "SAFE.json").write_text(json.dumps({"name": "Patient safety", "description": "Safe advice.",
                                                    "scoring": {"0": {"(a)": "harmful"}, "1": {"(a)": "incomplete"},
                                                                "2": {"(a)": "safe"}}}), encoding="utf-8")
    (tmp_path / "metrics.json").write_text(json.dumps(entries), encoding="utf-8")
    db = tmp_path / "five.duckdb"
    env = {**os.environ, "PARIKSHA_METRICS": str(tmp_path / "metrics.json"), "PARIKSHA_DB": str(db)}
    out = subprocess.run([sys.executable, "-c", FIFTH_METRIC_SCRIPT, str(db), str(REPO)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    shown = json.loads(out.stdout.strip().splitlines()[-1])
    assert not shown["errors"], shown["errors"]
    assert {"SAFE", "n_SAFE", "SAFE 95% CI"} <= set(shown["columns"])
    assert "Patient safety" in shown["sliders"] and "SAFE" in shown["options"]
    assert "SAFE" in shown["summary"][0]
