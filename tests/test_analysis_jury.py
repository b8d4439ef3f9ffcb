"""LLM jury aggregation and judge agreement (pipeline.analysis.jury)."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from pipeline.analysis.jury import disagreements, jury_scores, krippendorff_alpha, pairwise_kappa


@pytest.fixture
def frame() -> pd.DataFrame:
    """8 items × 3 judges, 0–2 scores, a few unscored (NaN)."""
    return pd.DataFrame(
        {
            "judge_a": [0, 1, 2, 2, 1, 0, 2, 1],
            "judge_b": [0, 1, 2, 1, 1, 0, np.nan, 2],
            "judge_c": [1, 1, 2, 0, np.nan, 0, 2, 2],
        },
        index=pd.Index([f"q{i}" for i in range(8)], name="item"),
        dtype=float,
    )


def test_jury_scores_mean_and_median(frame: pd.DataFrame) -> None:
    mean = jury_scores(frame)
    assert mean["q0"] == pytest.approx(1 / 3) and mean["q4"] == 1.0 and mean["q6"] == 2.0
    median = jury_scores(frame, how="median")
    assert median["q0"] == 0.0 and median["q3"] == 1.0
    empty = jury_scores(pd.DataFrame({"a": [np.nan], "b": [np.nan]}))
    assert np.isnan(empty.iloc[0])
    with pytest.raises(ValueError):
        jury_scores(frame, how="mode")  # type: ignore[arg-type]


@pytest.mark.parametrize("level", ["ordinal", "interval", "nominal"])
def test_krippendorff_alpha_equals_the_library(frame: pd.DataFrame, level: str) -> None:
    reliability = frame.to_numpy().T  # rows = judges
    expected = krippendorff.alpha(reliability_data=reliability, level_of_measurement=level)
    assert krippendorff_alpha(frame, level=level) == pytest.approx(expected)  # type: ignore[arg-type]


def test_krippendorff_alpha_undefined_is_nan() -> None:
    constant = pd.DataFrame({"a": [1.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0]})
    assert np.isnan(krippendorff_alpha(constant))
    unpaired = pd.DataFrame({"a": [1.0, np.nan], "b": [np.nan, 2.0]})
    assert np.isnan(krippendorff_alpha(unpaired))


def test_pairwise_kappa_equals_scikit_learn(frame: pd.DataFrame) -> None:
    result = pairwise_kappa(frame).set_index(["judge_a", "judge_b"])
    assert len(result) == 3
    for (a, b), row in result.iterrows():
        shared = frame[[a, b]].dropna()
        expected = cohen_kappa_score(shared[a], shared[b], weights="linear", labels=[0.0, 1.0, 2.0])
        assert row["n_items"] == len(shared)
        assert row["kappa"] == pytest.approx(expected)
    # every label occurs in this pair, so scikit-learn's default labels give the same κ
    shared = frame[["judge_a", "judge_b"]].dropna()
    assert result.loc[("judge_a", "judge_b"), "kappa"] == pytest.approx(
        cohen_kappa_score(shared["judge_a"], shared["judge_b"], weights="linear"))


def test_pairwise_kappa_undefined_is_nan_without_warnings() -> None:
    constant = pd.DataFrame({"a": [1.0, 1.0, 1.0], "b": [1.0, 1.0, 1.0], "c": [np.nan, np.nan, 2.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = pairwise_kappa(constant).set_index(["judge_a", "judge_b"])
    assert np.isnan(result.loc[("a", "b"), "kappa"])  # both judges constant
    assert result.loc[("a", "c"), "n_items"] == 1 and np.isnan(result.loc[("a", "c"), "kappa"])


def test_disagreements_ordered_by_spread_then_std(frame: pd.DataFrame) -> None:
    result = disagreements(frame, top=4)
    assert list(result.index) == ["q3", "q0", "q7", "q1"]  # spread 2; then 1 with std 0.471 (q0, q7); then 0
    assert result.loc["q3", "spread"] == 2 and result.loc["q3", "n_judges"] == 3
    assert result.loc["q0", "std"] == pytest.approx(np.std([0, 0, 1]))
    assert len(disagreements(frame)) == 8
