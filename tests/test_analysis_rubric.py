"""HealthBench rubric scoring (pipeline.analysis.rubric) against hand computations."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from pipeline.analysis.rubric import (
    calculate_score,
    clipped_stats,
    grader_agreement,
    item_metrics,
    item_scores,
    tag_breakdown,
)

# (item_id, points, criteria_met, rubric tags, example tags)
ROWS = [
    ("i1", 5, True, ["axis:accuracy", "level:example"], ["theme:emergency"]),
    ("i1", 3, False, ["axis:completeness"], ["theme:emergency"]),
    ("i1", -4, True, ["axis:accuracy"], ["theme:emergency"]),
    ("i1", 2, True, ["axis:communication"], ["theme:emergency"]),
    ("i2", 4, False, ["axis:accuracy"], ["theme:emergency", "theme:global_health"]),
    ("i2", -6, True, ["axis:accuracy"], ["theme:emergency", "theme:global_health"]),
    ("i2", 2, False, ["axis:completeness"], ["theme:emergency", "theme:global_health"]),
    ("i3", 3, True, ["axis:completeness"], ["theme:global_health"]),
    ("i3", -2, False, ["axis:communication"], ["theme:global_health"]),
]


@pytest.fixture
def grades() -> pd.DataFrame:
    return pd.DataFrame(ROWS, columns=["item_id", "points", "criteria_met", "tags", "example_tags"])


@dataclass
class Criterion:
    criterion: str
    points: float
    tags: list[str] = field(default_factory=list)


def test_calculate_score_by_hand() -> None:
    rubric = [{"points": 5}, {"points": 3}, {"points": -4}, {"points": 2}]
    # achieved 5 − 4 + 2 = 3 of 10 positive points
    assert calculate_score(rubric, [{"criteria_met": m} for m in (True, False, True, True)]) == pytest.approx(0.3)
    assert calculate_score([Criterion("a", 4), Criterion("b", -6)], [False, True]) == pytest.approx(-1.5)
    assert calculate_score([{"points": -2}], [True]) is None  # no positive points
    with pytest.raises(ValueError, match="rubric items"):
        calculate_score(rubric, [True])
    with pytest.raises(ValueError, match="needs a grade"):
        calculate_score(rubric, [True, None, False, True])


def test_item_metrics_like_grade_sample() -> None:
    rubric = [{"points": p, "tags": t} for _, p, _, t, _ in ROWS[:4]]
    results = [{"criteria_met": m} for _, _, m, _, _ in ROWS[:4]]
    metrics = item_metrics(rubric, results, example_tags=["theme:emergency"])
    assert metrics == pytest.approx({
        "overall_score": 0.3, "theme:emergency": 0.3,
        "axis:accuracy": (5 - 4) / 5, "level:example": 1.0, "axis:completeness": 0.0, "axis:communication": 1.0,
    })
    # an ungraded criterion leaves the item unscored, and the tags it belongs to
    results[1] = {"criteria_met": None}
    unscored = item_metrics(rubric, results, example_tags=["theme:emergency"])
    assert "overall_score" not in unscored and "theme:emergency" not in unscored
    assert "axis:completeness" not in unscored and unscored["axis:accuracy"] == pytest.approx(0.2)


def test_item_scores(grades: pd.DataFrame) -> None:
    scores = item_scores(grades)
    assert scores.to_dict() == pytest.approx({"i1": 0.3, "i2": -1.0, "i3": 1.0})
    grades["criteria_met"] = grades["criteria_met"].astype("boolean")  # nullable, as read from the store
    grades.loc[7, "criteria_met"] = pd.NA
    assert np.isnan(item_scores(grades)["i3"])


def test_clipped_stats_clip_the_mean_not_the_items() -> None:
    # items −1.0, 0.3, 1.0: mean 0.1 (clipping items first would give 0.433)
    assert clipped_stats([-1.0, 0.3, 1.0])["mean"] == pytest.approx(0.1)
    assert clipped_stats([-1.0, -0.5, 0.5])["mean"] == 0.0
    single = clipped_stats([0.4])
    assert single["mean"] == pytest.approx(0.4) and single["bootstrap_std"] == 0.0 and single["n_samples"] == 1
    assert np.isnan(clipped_stats([])["mean"]) and clipped_stats([None, 0.5])["n_samples"] == 1


def test_clipped_stats_bootstrap_like_healthbench() -> None:
    values = np.random.default_rng(1).uniform(-0.5, 1.0, size=80)
    ours = clipped_stats(values, seed=2)
    assert ours == clipped_stats(values, seed=2)  # reproducible
    # HealthBench's _compute_clipped_stats: std of 1000 clipped means of resamples with replacement
    rng = np.random.default_rng(3)
    theirs = np.std([np.clip(np.mean(rng.choice(values, len(values))), 0, 1) for _ in range(1000)])
    assert ours["bootstrap_std"] == pytest.approx(theirs, rel=0.1)
    assert ours["ci_lo"] < ours["mean"] < ours["ci_hi"]


def test_tag_breakdown_by_hand(grades: pd.DataFrame) -> None:
    table = tag_breakdown(grades, n_bootstrap=200)
    assert table.index[0] == "overall_score"
    expected = {  # tag: (kind, clipped mean, n_samples)
        "overall_score": ("overall", (0.3 - 1.0 + 1.0) / 3, 3),
        "theme:emergency": ("example", 0.0, 2),  # mean(0.3, −1.0) = −0.35, clipped
        "theme:global_health": ("example", 0.0, 2),  # mean(−1.0, 1.0)
        "axis:accuracy": ("rubric", 0.0, 2),  # mean(0.2, −1.5) clipped
        "axis:completeness": ("rubric", 1 / 3, 3),  # mean(0, 0, 1)
        "axis:communication": ("rubric", 1.0, 1),  # i3 has only a negative communication criterion: omitted
        "level:example": ("rubric", 1.0, 1),
    }
    assert set(table.index) == set(expected)
    for tag, (kind, score, n) in expected.items():
        assert table.loc[tag, "kind"] == kind
        assert table.loc[tag, "score"] == pytest.approx(score), tag
        assert table.loc[tag, "n_samples"] == n


def test_grader_agreement_by_hand() -> None:
    grader = np.array([True, False, True, False, True])
    physicians = [[True, True], [False, True], [False], [False, False, True], [True]]
    result = grader_agreement(grader, physicians, categories=["a", "a", "b", "b", "b"])
    assert result["n_criteria"] == 5 and result["n_pairs"] == 9
    assert result["agreement"] == pytest.approx(6 / 9)
    np.testing.assert_allclose(result["per_criterion"], [1, 0.5, 0, 2 / 3, 1])
    # pairs: TP 3, FP 1, FN 2, TN 3 -> F1(met) = 6/9, F1(not met) = 6/9
    assert result["f1_pos"] == pytest.approx(6 / 9) and result["f1_neg"] == pytest.approx(6 / 9)
    g = np.repeat(grader, [len(p) for p in physicians])
    p = np.concatenate(physicians)
    assert result["macro_f1"] == pytest.approx(f1_score(p, g, average="macro"))
    # HealthBench's precision/recall route: P = TP/(TP+FP), R = TP/(TP+FN), balanced = mean of both classes
    f1_met = 2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5)
    f1_not = 2 * (3 / 5) * (3 / 4) / (3 / 5 + 3 / 4)
    assert result["macro_f1"] == pytest.approx((f1_met + f1_not) / 2)
    by_cat = result["by_category"]
    assert by_cat.loc["a", "n_pairs"] == 4 and by_cat.loc["a", "agreement"] == pytest.approx(3 / 4)
    assert by_cat.loc["b", "n_criteria"] == 3


def test_grader_agreement_array_inputs_and_undefined_f1() -> None:
    grader = np.array([True, False, True])
    one = grader_agreement(grader, np.array([True, True, False]))
    assert one["n_pairs"] == 3 and one["agreement"] == pytest.approx(1 / 3)
    two = grader_agreement(grader, np.array([[1.0, np.nan], [0.0, 1.0], [1.0, 1.0]]))
    assert two["n_pairs"] == 5 and two["agreement"] == pytest.approx(4 / 5)
    undefined = grader_agreement(np.array([True, True]), np.array([True, False]))  # grader never says "not met"
    assert np.isnan(undefined["macro_f1"]) and undefined["agreement"] == 0.5
