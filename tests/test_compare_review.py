"""The rubric page, compare runs and the review queue: read models against hand computations on the synthetic
database (with rubrics and a second judge), and the pages under AppTest — a verdict given in the review queue
shows in the agreement view; every table shown offers CSV and Parquet."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pages import _data as data
from pages._ui import table_bytes
from pipeline.metrics import METRICS
from pipeline.read import review
from pipeline.read.common import Filters
from pipeline.read.compare import Side, compare, config_diff
from pipeline.store import Store
from pipeline.store.rows import JudgmentRow, ResponseRow, RunRow

REPO = Path(__file__).resolve().parent.parent
JUDGE, SECOND = "openai/gpt-4o", "vllm/second-judge"
GRADER = "openai/gpt-4.1"


@pytest.fixture(scope="module")
def review_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic database (5 % scale, 6 models) with rubrics on 30 queries and a second judge on 40 items
    whose FC is one step off the first judge's."""
    db = tmp_path_factory.mktemp("review") / "review.duckdb"
    subprocess.run([sys.executable, str(REPO / "bench" / "generate_db.py"), "--scale", "0.05", "--models", "6",
                    "--rubric-items", "30", "--out", str(db)], check=True, capture_output=True, cwd=REPO)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT j.query_id, j.model_id, j.metric, j.score, j.response_hash FROM judgments j "
                           "WHERE j.judge_id = ? AND j.parse_ok ORDER BY j.model_id, j.query_id LIMIT 160",
                           [JUDGE]).fetchall()
    Store(db).write([JudgmentRow(dataset="synthetic", query_id=q, model_id=m, judge_id=SECOND, metric=metric,
                                 sample=0, score=(s + 1) % 3 if metric == "FC" else s, parse_ok=True,
                                 justification="", raw_output="", response_hash=h, run_id=None)
                     for q, m, metric, s, h in rows])
    return db


@pytest.fixture(autouse=True)
def fresh_caches():
    data.clear_caches()
    yield
    data.clear_caches()


def frame(db: Path, sql: str, params: list | None = None) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).df()


def hand_severity(db: Path) -> pd.DataFrame:
    """Severity by the documented rules, straight from the source tables (pandas, no derived table but
    item_scores and response_facts)."""
    items = frame(db, "SELECT r.query_id, r.model_id, r.response_hash, len(q.kb_refs) > 0 "
                      "AND NOT list_contains(q.themes, 'out_of_kb') AS answerable FROM responses r JOIN queries q "
                      "USING (dataset, query_id) WHERE r.dataset = 'synthetic' AND r.error IS NULL")
    crit = frame(db, "SELECT query_id, model_id, response_hash, max(p_high) AS p_high FROM critiques "
                     "WHERE dataset = 'synthetic' GROUP BY ALL")
    scores = frame(db, "SELECT * FROM item_scores WHERE dataset = 'synthetic'")
    facts = frame(db, "SELECT query_id, model_id, over_refusal FROM response_facts WHERE dataset = 'synthetic'")
    harm = frame(db, "SELECT g.query_id, g.model_id, g.grader_id, count(*) FILTER (WHERE g.met AND g.points < 0) "
                     "AS harmful FROM rubric_grades g JOIN responses r USING (dataset, query_id, model_id) "
                     "WHERE g.response_hash = r.response_hash GROUP BY ALL")
    keys = ["query_id", "model_id"]
    out = items.merge(crit, on=[*keys, "response_hash"], how="left")
    out = out.merge(scores[scores.judge_id == JUDGE][[*keys, "FC"]], on=keys, how="left").merge(facts, on=keys,
                                                                                                how="left")
    many = scores.groupby(keys).filter(lambda g: g.judge_id.nunique() > 1)
    spread = many.groupby(keys)[list(METRICS)].agg(lambda s: s.max() - s.min()).fillna(0).max(axis=1)
    out = out.merge(spread.rename("spread").reset_index(), on=keys, how="left")
    out = out.merge(harm.groupby(keys).harmful.max().reset_index(), on=keys, how="left")
    out["severity"] = (3 * out.p_high.fillna(0) + 3 * (out.answerable & (out.FC < 0.5)).astype(float)
                       + 2 * (out.over_refusal == False).astype(float)  # noqa: E712
                       + out.spread.fillna(0) + out.harmful.fillna(0).clip(upper=3))
    return out


def test_the_queue_follows_its_severity_rules(review_db: Path) -> None:
    queue = review.review_queue(review_db, Filters(dataset="synthetic"), JUDGE, limit=100_000)
    items = queue["items"]
    hand = hand_severity(review_db)
    assert queue["total"] == len(hand) == len(items) and queue["reviewed"] == 0
    expected = hand.sort_values(["severity", "p_high", "query_id", "model_id"],
                                ascending=[False, False, True, True], na_position="last")
    assert list(zip(items.query_id, items.model_id, strict=True)) == list(zip(expected.query_id, expected.model_id,
                                                                               strict=True))
    np.testing.assert_allclose(items.severity, expected.severity, atol=1e-9)
    assert (np.diff(items.severity) <= 1e-12).all()
    # every rule fires somewhere in this database, and its reason is named
    reasons = " ".join(r for rs in items.reasons for r in rs)
    for words in ("Med-CoDE P(High)", "FC 0 although the KB holds the answer", "refused an answerable question",
                  "judges differ by 1", "harmful rubric criteria met"):
        assert words in reasons, words
    assert queue["flagged"] == int(sum(bool(rs) for rs in items.reasons))
    assert set(review.RULES) == {"medcode_high", "fc_zero_in_kb", "refused_answerable", "judges_disagree",
                                 "harmful_criteria"}


def test_a_verdict_leaves_the_queue_and_everything_about_the_item_is_there(review_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "verdict.duckdb"
    shutil.copy(review_db, db)
    first = review.review_queue(db, Filters(dataset="synthetic"), JUDGE, "dr-rao", "FC", limit=5)["items"].iloc[0]
    detail = review.review_item(db, "synthetic", first.query_id, first.model_id)
    stored = frame(db, "SELECT text FROM responses WHERE query_id = ? AND model_id = ?",
                   [first.query_id, first.model_id]).text[0]
    assert detail["item"]["text"] == stored and detail["item"]["gt_response"]
    assert not detail["chunks"].empty and set(detail["judgments"].metric) == set(METRICS)
    assert not detail["critiques"].empty and not detail["lexical"].empty
    data.save_label(db, dataset="synthetic", query_id=first.query_id, model_id=first.model_id, metric="FC",
                    annotator="dr-rao", score=0, comment="unsafe", source=data.REVIEW_SOURCE)
    after = review.review_queue(db, Filters(dataset="synthetic"), JUDGE, "dr-rao", "FC", limit=5)
    assert after["reviewed"] == 1 and (first.query_id, first.model_id) not in set(
        zip(after["items"].query_id, after["items"].model_id, strict=True))
    shown = review.review_queue(db, Filters(dataset="synthetic"), JUDGE, "dr-rao", "FC", hide_reviewed=False,
                                limit=5)["items"]
    assert shown.reviewed.iloc[0] and shown.query_id.iloc[0] == first.query_id
    # another metric's queue, or another doctor's, still has it
    assert review.review_queue(db, Filters(dataset="synthetic"), JUDGE, "dr-rao", "SS", limit=5)["reviewed"] == 0


def _second_run(db: Path, target: Path, model: str, n: int) -> list[str]:
    """A copy of ``db`` as a second run would leave it: ``n`` of ``model``'s answers rewritten and re-judged (FC
    up to 2), under a run whose config differs in retrieval.split."""
    shutil.copy(db, target)
    rows = frame(target, "SELECT r.query_id, j.metric, j.score FROM responses r JOIN judgments j "
                         "USING (dataset, query_id, model_id) WHERE r.model_id = ? AND r.error IS NULL "
                         "AND j.judge_id = ? AND j.parse_ok ORDER BY r.query_id", [model, JUDGE])
    changed = sorted(set(rows.query_id))[:n]
    config = {"name": "second", "retrieval": {"top_k": 3, "split": "separate"}, "models": [{"id": model}]}
    store = Store(target)
    store.write([RunRow(run_id="run-b", name="second", kind="pipeline", dataset="synthetic",
                        config=json.dumps(config), config_hash="h-b", code_revision="rev-b", model_files="{}")])
    new = []
    for q in changed:
        text = f"A rewritten answer to {q}."
        new.append(ResponseRow(dataset="synthetic", query_id=q, model_id=model, run_id="run-b", prompt_hash="p-b",
                               text=text, error=None))
        for r in rows[rows.query_id == q].itertuples():
            new.append(JudgmentRow(dataset="synthetic", query_id=q, model_id=model, judge_id=JUDGE, metric=r.metric,
                                   sample=0, score=2, parse_ok=True, justification="", raw_output="",
                                   response_hash=ResponseRow(dataset="", query_id="", model_id="", run_id=None,
                                                             prompt_hash=None, text=text, error=None).response_hash,
                                   run_id="run-b"))
    store.write(new)
    return changed


def test_compare_two_databases_pairs_items_and_names_what_differs(review_db: Path, tmp_path: Path) -> None:
    model = "openai/gpt-4o"
    b_db = tmp_path / "b.duckdb"
    changed = _second_run(review_db, b_db, model, 6)
    a, b = Side(str(review_db), "synthetic", model, JUDGE), Side(str(b_db), "synthetic", model, JUDGE)
    result = compare(a, b, (0.4, 0.3, 0.15, 0.15), metric="FC", n_changed=20)
    fc_a = frame(review_db, "SELECT query_id, FC FROM item_scores WHERE model_id = ? AND judge_id = ?", [model, JUDGE])
    fc_b = frame(b_db, "SELECT query_id, FC FROM item_scores WHERE model_id = ? AND judge_id = ?", [model, JUDGE])
    both = fc_a.merge(fc_b, on="query_id").dropna()
    row = result["metrics"].set_index("metric").loc["FC"]
    assert row.n == len(both) and row["diff"] == pytest.approx((both.FC_y - both.FC_x).mean())
    assert row.ci_lo <= row["diff"] <= row.ci_hi
    top = result["changed"]
    assert set(changed) <= set(top.query_id) and top.text_changed.sum() == len(changed)
    assert (top.text_b[top.query_id.isin(changed)].str.startswith("A rewritten answer")).all()
    prov = result["provenance"].set_index("what")
    assert prov.loc["items whose response text differs", "A"] == f"{len(changed)} of {result['pairs']}"
    assert prov.loc["config: retrieval.split", "B"] == "separate" and prov.loc["config: retrieval.split", "differs"]
    assert prov.loc["run code revision", "differs"] and not prov.loc["dataset", "differs"]
    # one database, two models: paired by query; the same side twice is the same rows
    two = compare(a, Side(str(review_db), "synthetic", "openai/gpt-4", JUDGE), (0.4, 0.3, 0.15, 0.15))
    assert two["pairs"] > 0 and not two["same"] and "model" in set(two["provenance"].query("differs").what)
    assert compare(a, a, (0.4, 0.3, 0.15, 0.15))["same"]
    assert config_diff('{"a": {"b": 1}, "db": "x"}', '{"a": {"b": 2}, "db": "y"}') == [("a.b", 1, 2)]


def open_app(db: Path, monkeypatch: pytest.MonkeyPatch, page: str, params: dict | None = None) -> AppTest:
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.query_params.update(params or {})
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _downloads(at: AppTest) -> list:
    return at.get("download_button")


def test_rubric_page_shows_the_board_tags_and_meta_eval_with_downloads(review_db: Path, monkeypatch) -> None:
    at = open_app(review_db, monkeypatch, "pages/8_rubrics.py")
    board = at.dataframe[0].value
    assert len(board) == 6 and {"score", "ci_lo", "ci_hi", "n_unparsed", "n_ungraded"} <= set(board.columns)
    assert at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")
    meta = at.dataframe[-1].value
    assert {"agreement", "macro_f1"} <= set(meta.columns) and meta.group.iloc[0] == "overall"
    assert len(_downloads(at)) >= 6  # leaderboard, tags, meta-eval: CSV and Parquet each


def test_a_verdict_in_the_review_queue_appears_in_the_agreement_view(review_db: Path, tmp_path: Path,
                                                                     monkeypatch) -> None:
    db = tmp_path / "apptest.duckdb"
    shutil.copy(review_db, db)
    at = open_app(db, monkeypatch, "pages/10_review_queue.py", {"rq_annotator": "dr-apptest"})
    queue = review.review_queue(db, Filters(dataset="synthetic"), JUDGE, "dr-apptest", "FC")["items"]
    pick = queue[queue.FC.notna()].iloc[0]
    label = next(o for o in at.selectbox(key="rq_item").options if f" · {pick.query_id} · {pick.model_id}" in o)
    at.selectbox(key="rq_item").set_value(label).run()
    before = data.agreement_view(db, Filters(dataset="synthetic"), JUDGE, "FC")["table"]
    at.radio[0].set_value(0)
    next(b for b in at.button if b.label == "Save verdict").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    saved = frame(db, "SELECT score, source FROM human_labels WHERE annotator = 'dr-apptest'")
    assert saved.values.tolist() == [[0, data.REVIEW_SOURCE]]
    assert at.metric[2].value == "1"  # reviewed by you
    at.switch_page("pages/5_human_vs_llm.py")
    at.run()
    at.selectbox(key="hv_metric").set_value("FC").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = at.dataframe[0].value
    lang = frame(db, "SELECT language FROM queries WHERE query_id = ?", [pick.query_id]).language[0]
    row = shown[shown.model_id == pick.model_id]
    n_before = before[(before.language == lang) & (before.model_id == pick.model_id)].n.sum()
    assert row.n.sum() == n_before + 1


def test_compare_page_on_two_databases(review_db: Path, tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    a_db, b_db = folder / "a.duckdb", folder / "b.duckdb"
    shutil.copy(review_db, a_db)
    changed = _second_run(review_db, b_db, "openai/gpt-4o", 4)
    at = open_app(a_db, monkeypatch, "pages/9_compare_runs.py",
                  {"cr_model_a": "openai/gpt-4o", "cr_model_b": "openai/gpt-4o", "cr_b_db": b_db.name})
    metrics = at.dataframe[0].value
    assert {"FC", "AGG"} <= set(metrics.metric) and {"ci_lo", "ci_hi", "differs"} <= set(metrics.columns)
    shown = at.dataframe[1].value
    assert set(changed) <= set(shown.query_id)
    prov = at.dataframe[2].value.set_index("what")
    assert prov.loc["config: retrieval.split", "differs"]
    assert len(_downloads(at)) == 6


def test_downloads_are_the_table_as_csv_and_parquet() -> None:
    table = pd.DataFrame({"model_id": ["a", "b"], "score": [0.5, np.nan], "chunks": [["c1", "c2"], []],
                          "reasons": [["x"], None], "mixed": [1, "two"]})
    back = pd.read_parquet(io.BytesIO(table_bytes(table, "parquet")))
    assert len(back) == 2 and list(back.columns) == list(table.columns) and list(back.chunks[0]) == ["c1", "c2"]
    assert back.mixed.tolist() == ["1", "two"]
    assert pd.read_csv(io.BytesIO(table_bytes(table, "csv"))).shape == (2, 5)


def test_home_shows_cost_per_model_stage_and_run(review_db: Path, tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "cost.duckdb"
    shutil.copy(review_db, db)
    config = {"name": "priced", "prices": {JUDGE: {"input": 2.5, "output": 10.0}}}
    summary = [{"stage": "judge", "model_id": JUDGE, "backend_calls": 10, "cache_hits": 2,
                "prompt_tokens": 1_000_000, "completion_tokens": 100_000}]
    Store(db).write([RunRow(run_id="run-priced", name="priced", kind="pipeline", dataset="synthetic",
                            config=json.dumps(config), config_hash="h", code_revision="r", model_files="{}",
                            status="finished", summary=json.dumps(summary))])
    monkeypatch.setenv("PARIKSHA_DB", str(db))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Cost (known)"] == "$3.50"  # 1M in × $2.5 + 0.1M out × $10; in-process models cost 0
    frames = [f.value for f in at.dataframe]
    by_model = next(f for f in frames if list(f.columns[:2]) == ["model_id", "runs"])
    assert by_model.set_index("model_id").loc[JUDGE, "cost"] == pytest.approx(3.5)
    assert any("stage" in f.columns and "judge" in set(f.stage) for f in frames)
    assert len(_downloads(at)) >= 8  # every cost table: CSV and Parquet
