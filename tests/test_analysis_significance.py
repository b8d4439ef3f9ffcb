"""Paired bootstrap, compact letter display, rank intervals and power helpers (pipeline.analysis.significance)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipeline.analysis.significance import (
    minimum_detectable_difference,
    paired_bootstrap,
    rank_intervals,
    ranks_established,
    tied_groups,
)


@pytest.fixture
def scores() -> pd.DataFrame:
    """60 items; `better` is 0.5 above `base`; `twin` is an exact copy of `base`; `gappy` misses 20 items."""
    rng = np.random.default_rng(7)
    base = rng.integers(0, 3, size=60).astype(float)
    better = np.clip(base + rng.choice([0, 1], size=60, p=[0.5, 0.5]), 0, 2)
    gappy = base.copy()
    gappy[:20] = np.nan
    return pd.DataFrame({"base": base, "better": better, "twin": base.copy(), "gappy": gappy},
                        index=pd.Index([f"q{i}" for i in range(60)], name="item"))


def _row(frame: pd.DataFrame, a: str, b: str) -> pd.Series:
    return frame[(frame.model_a == a) & (frame.model_b == b)].iloc[0]


def test_paired_bootstrap_is_reproducible_for_a_seed(scores: pd.DataFrame) -> None:
    first = paired_bootstrap(scores, n_resamples=500, seed=3)
    pd.testing.assert_frame_equal(first, paired_bootstrap(scores, n_resamples=500, seed=3))
    other = paired_bootstrap(scores, n_resamples=500, seed=4)
    assert not np.allclose(first["ci_lo"].to_numpy(float), other["ci_lo"].to_numpy(float), equal_nan=True)
    assert len(first) == 6  # every pair of 4 models


def test_paired_bootstrap_detects_a_real_difference(scores: pd.DataFrame) -> None:
    result = paired_bootstrap(scores, n_resamples=1000)
    row = _row(result, "base", "better")
    assert row["diff"] == pytest.approx(scores["base"].mean() - scores["better"].mean())
    assert row["ci_hi"] < 0 and row["p_value"] < 0.01 and row["significant"]


def test_paired_bootstrap_marks_identical_models_tied(scores: pd.DataFrame) -> None:
    row = _row(paired_bootstrap(scores, n_resamples=1000), "base", "twin")
    assert row["diff"] == 0 and row["ci_lo"] == 0 and row["ci_hi"] == 0
    assert row["p_value"] == 1.0 and not row["significant"]


def test_paired_bootstrap_uses_only_shared_items_and_matches_scipy(scores: pd.DataFrame) -> None:
    row = _row(paired_bootstrap(scores, n_resamples=800, seed=5), "better", "gappy")
    assert row["n_items"] == 40
    d = (scores["better"] - scores["gappy"]).dropna().to_numpy()
    ref = stats.bootstrap((d,), np.mean, n_resamples=800, method="percentile", rng=np.random.default_rng(5))
    assert row["ci_lo"] == pytest.approx(ref.confidence_interval.low)
    assert row["ci_hi"] == pytest.approx(ref.confidence_interval.high)


def test_paired_bootstrap_too_few_shared_items() -> None:
    frame = pd.DataFrame({"a": [1.0, np.nan, 2.0], "b": [np.nan, 1.0, 0.0]})
    row = paired_bootstrap(frame).iloc[0]
    assert row["n_items"] == 1 and np.isnan(row["p_value"]) and not row["significant"]


def _pairs(significant: set[tuple[str, str]], models: list[str]) -> pd.DataFrame:
    rows = [{"model_a": a, "model_b": b, "significant": (a, b) in significant or (b, a) in significant}
            for a, b in itertools.combinations(models, 2)]
    return pd.DataFrame(rows)


def test_tied_groups_hand_example() -> None:
    # A > B > C > D; A–C, A–D, B–D differ.  Piepho's algorithm by hand:
    # {ABCD} -A/D-> {BCD},{ABC} -B/D-> {CD},{BC},{ABC} -absorb-> {ABC},{CD} -A/C-> {BC},{AB},{CD}
    means = {"A": 10.0, "B": 9.0, "C": 8.0, "D": 5.0}
    pairs = _pairs({("A", "C"), ("A", "D"), ("B", "D")}, list(means))
    assert tied_groups(means, pairs) == {"A": "a", "B": "ab", "C": "bc", "D": "c"}


def test_tied_groups_all_tied_and_all_different() -> None:
    means = pd.Series({"x": 1.0, "y": 3.0, "z": 2.0})
    assert tied_groups(means, _pairs(set(), list(means.index))) == {"y": "a", "z": "a", "x": "a"}
    all_pairs = set(itertools.combinations(means.index, 2))
    assert tied_groups(means, _pairs(all_pairs, list(means.index))) == {"y": "a", "z": "b", "x": "c"}


def test_tied_groups_letters_encode_exactly_the_non_significant_pairs() -> None:
    rng = np.random.default_rng(11)
    models = [f"m{i}" for i in range(7)]
    for _ in range(40):
        significant = {p for p in itertools.combinations(models, 2) if rng.random() < 0.4}
        letters = tied_groups(dict(zip(models, rng.random(7), strict=True)), _pairs(significant, models))
        for a, b in itertools.combinations(models, 2):
            share = bool(set(letters[a]) & set(letters[b]))
            assert share == ((a, b) not in significant), (a, b, letters)


def test_tied_groups_from_bootstrap(scores: pd.DataFrame) -> None:
    frame = scores[["base", "better", "twin"]]
    letters = tied_groups(frame.mean(), paired_bootstrap(frame, n_resamples=1000))
    assert letters == {"better": "a", "base": "b", "twin": "b"}


def test_rank_intervals(scores: pd.DataFrame) -> None:
    result = rank_intervals(scores[["base", "better", "twin"]], n_resamples=500)
    assert result["model"].iloc[0] == "better"
    best = result.iloc[0]
    assert best["rank"] == 1 and best["rank_lo"] == 1 and best["rank_hi"] == 1
    twins = result[result.model.isin(["base", "twin"])]
    assert (twins["rank"] == 2.5).all() and (twins["rank_lo"] == 2.5).all()
    pd.testing.assert_frame_equal(result, rank_intervals(scores[["base", "better", "twin"]], n_resamples=500))


def test_minimum_detectable_difference() -> None:
    expected = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 0.8 / np.sqrt(30)
    assert minimum_detectable_difference(0.8, 30) == pytest.approx(expected)
    assert minimum_detectable_difference(0.8, 14) > minimum_detectable_difference(0.8, 100)
    assert minimum_detectable_difference(0.8, 30, alpha=0.01) > minimum_detectable_difference(0.8, 30)


def test_ranks_established_threshold() -> None:
    ok, reason = ranks_established(14)
    assert not ok and "not established" in reason and "14" in reason
    assert ranks_established(30)[0] and ranks_established(200)[0]
