"""Judge reliability: the sanity set and its discrimination AUC (the leaderboard's n and CIs: test_read_models)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from pipeline.analysis.reliability import discrimination_auc
from pipeline.dataset import REFUSAL_SENTENCE, load_dataset
from pipeline.steps.sanity import other_answer, sanity_variants, spread_across_languages

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


def test_the_matrix_counts_give_scikit_learns_auc_and_kappa():
    """The reliability matrix's AUC and κ from counts (pipeline.read.trust) equal scikit-learn's on the expanded
    answers and labels, ties included."""
    from pipeline.analysis.agreement import weighted_kappa
    from pipeline.read.trust import _auc, _linear_kappa

    good, bad = {4.0: 3, 3.0: 2, 1.0: 1, 2.5: 2}, {3.0: 2, 2.0: 4, 1.0: 1, 2.5: 1}
    y = [1] * sum(good.values()) + [0] * sum(bad.values())
    scores = [s for counts in (good, bad) for s, n in counts.items() for _ in range(n)]
    assert _auc(good, bad) == pytest.approx(roc_auc_score(y, scores))
    assert _auc({2.0: 3}, {2.0: 5}) == pytest.approx(0.5)
    assert np.isnan(_auc(good, {}))
    confusion = np.array([[5, 2, 1], [1, 6, 2], [0, 3, 7]])
    human, llm = np.nonzero(confusion)
    assert _linear_kappa(confusion.astype(float)) == pytest.approx(weighted_kappa(human, llm, confusion[human, llm]))
    assert np.isnan(_linear_kappa(np.diag([0.0, 4.0, 0.0])))  # one category on both sides: undefined
