"""Judge reliability (sanity set, AUC) and leaderboard uncertainty (n and bootstrap CIs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from pipeline.analysis.stats import bootstrap_mean_ci, normalised_weights
from pipeline.dataset import REFUSAL_SENTENCE, load_dataset
from pipeline.metrics import DEFAULT_WEIGHTS, METRICS
from pipeline.runner import save_dataset
from pipeline.steps.sanity import (
    LEADERBOARD_ITEMS_SQL,
    LEADERBOARD_UNPARSED_SQL,
    discrimination_auc,
    leaderboard,
    other_answer,
    sanity_variants,
    spread_across_languages,
)
from pipeline.store import Store, now, text_hash

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cataract():
    return load_dataset(REPO / "data" / "cataract")


def test_sanity_variants(cataract):
    answerable = cataract.query("en-001")
    variants = {v: (kind, text) for v, kind, text in sanity_variants(answerable, cataract)}
    assert variants["ground_truth"] == ("good", answerable.gt_response)
    assert variants["refusal"] == ("bad", REFUSAL_SENTENCE)
    other = other_answer(answerable, cataract)
    assert variants["other_answer"] == ("bad", other.gt_response)
    assert not set(other.kb_refs) & set(answerable.kb_refs) and "out_of_kb" not in other.themes
    assert other_answer(answerable, cataract) == other  # stable
    oob = next(q for q in cataract.queries if "out_of_kb" in q.themes)
    kinds = {v: k for v, k, _ in sanity_variants(oob, cataract)}
    assert kinds == {"ground_truth": "good", "other_answer": "bad"}  # its GT is the refusal


def test_spread_across_languages(cataract):
    picked = spread_across_languages(cataract.queries, 7)
    assert len(picked) == 7
    assert {q.language for q in picked[:5]} == {"en", "hi", "ta", "te", "kn"}
    assert len(spread_across_languages(cataract.queries[:3], 20)) == 3


def test_auc_equals_sklearn_and_counts_unparsed():
    rng = np.random.default_rng(0)
    kinds = ["good"] * 30 + ["bad"] * 40
    scores = [int(x) for x in rng.integers(0, 3, 70)]
    parse_ok = [True] * 70
    scores[3], parse_ok[3] = None, False
    scores[50], parse_ok[50] = None, False
    df = pd.DataFrame({"judge_id": "j", "metric": "FC", "kind": kinds, "score": scores, "parse_ok": parse_ok})
    out = discrimination_auc(df).iloc[0]
    keep = df[df.parse_ok]
    assert out.auc == pytest.approx(roc_auc_score(keep.kind == "good", keep.score))
    assert (out.n_good, out.n_bad, out.n_unparsed) == (29, 39, 2)
    same = df.assign(score=1, parse_ok=True)
    assert discrimination_auc(same).iloc[0].auc == pytest.approx(0.5)  # a constant judge discriminates nothing
    perfect = df.assign(score=[2 if k == "good" else 0 for k in kinds], parse_ok=True)
    assert discrimination_auc(perfect).iloc[0].auc == 1.0
    only_good = df[df.kind == "good"]
    assert np.isnan(discrimination_auc(only_good).iloc[0].auc)


def _items(rng, n, model, language):
    rows = []
    for _ in range(n):
        item = {"model_id": model, "language": language}
        for m in METRICS:
            item[m] = float(rng.integers(0, 3)) if rng.random() > 0.1 else np.nan
        rows.append(item)
    return pd.DataFrame(rows)


def test_leaderboard_from_histogram_matches_item_level_computation():
    rng = np.random.default_rng(5)
    raw = pd.concat([_items(rng, 80, "a", "en"), _items(rng, 40, "b", "en"), _items(rng, 15, "a", "hi")])
    hist = raw.groupby(["model_id", "language", *METRICS], dropna=False).size().reset_index(name="n")
    board = leaderboard(hist, DEFAULT_WEIGHTS).set_index(["model_id", "language"])
    w = normalised_weights(DEFAULT_WEIGHTS)
    for (model, lang), g in raw.groupby(["model_id", "language"]):
        row = board.loc[(model, lang)]
        for m in METRICS:
            assert row[m] == pytest.approx(g[m].mean())
            assert row[f"{m}_n"] == g[m].notna().sum()
            assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"]
        complete = g.dropna(subset=list(METRICS))
        per_item = sum(w[m] * complete[m] for m in METRICS)
        assert row["AGG"] == pytest.approx(per_item.mean())
        assert row["AGG_n"] == len(complete)
        values, counts = np.unique(np.round(per_item.to_numpy(), 6), return_counts=True)
        assert (row["AGG_lo"], row["AGG_hi"]) == pytest.approx(bootstrap_mean_ci(values, counts))
    assert list(board.reset_index().language) == ["en", "en", "hi"]
    en = board.xs("en", level="language")
    assert en["AGG"].is_monotonic_decreasing


def test_leaderboard_sql_counts_only_current_response_text(tmp_path, cataract):
    store = Store(tmp_path / "r.duckdb")
    save_dataset(store, cataract)
    text = "Current answer with ünïcode ✓"
    store.upsert("responses", [{"dataset": "cataract", "query_id": q, "model_id": "m", "run_id": "r",
                                "prompt_hash": "h", "text": text, "error": None, "latency_s": 0.0,
                                "prompt_tokens": 0, "completion_tokens": 0, "cached": False, "created_at": now()}
                               for q in ("en-001", "hi-001")])
    rows = []
    for q, rhash in (("en-001", text_hash(text)), ("hi-001", "stale")):
        for i, m in enumerate(METRICS):
            for s in (0, 1):
                rows.append({"dataset": "cataract", "query_id": q, "model_id": "m", "judge_id": "j", "metric": m,
                             "sample": s, "score": None if (m == "CON" and s == 1) else (i + s) % 3,
                             "parse_ok": not (m == "CON" and s == 1), "justification": "", "raw_output": "x",
                             "response_hash": rhash, "run_id": "r", "cached": False, "created_at": now()})
    store.upsert("judgments", rows)
    hist = store.fetch_df(LEADERBOARD_ITEMS_SQL, ["cataract", "j"])
    assert len(hist) == 1 and hist.iloc[0].language == "en"  # the stale hi-001 judgments are left out
    item = hist.iloc[0]
    assert (item.FC, item.SS, item.COH, item.CON) == (0.5, 1.5, 1.0, 0.0)  # mean over parsed samples
    unparsed = store.fetch_df(LEADERBOARD_UNPARSED_SQL, ["cataract", "j"])
    board = leaderboard(hist, DEFAULT_WEIGHTS, unparsed=unparsed)
    en = board[board.language == "en"].iloc[0]
    assert en.CON_unparsed == 1 and en.FC_unparsed == 0
