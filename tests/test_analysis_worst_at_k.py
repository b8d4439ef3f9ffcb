"""Worst-at-k reliability curves (pipeline.analysis.worst_at_k) against brute-force enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipeline.analysis.worst_at_k import expected_min, per_item_variance, worst_at_k, worst_at_k_curve

SAMPLES = {
    "q1": [2.0, 0.0, 1.0, 2.0, 1.0],  # ties included
    "q2": [1.0, 1.0, 2.0, 0.0, 2.0],
    "q3": [0.5, -0.25, 0.75, 1.0, 0.0],  # HealthBench-style scores can be negative
}


def _brute_force(samples: list[float], k: int) -> float:
    """What HealthBench's analysis notebook does: the mean of the minimum over every k-subset."""
    return float(np.mean([min(s) for s in itertools.combinations(samples, k)]))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_expected_min_equals_enumeration(k: int) -> None:
    for samples in SAMPLES.values():
        assert expected_min(samples, k) == pytest.approx(_brute_force(samples, k))


def test_hand_example() -> None:
    # [0, 1, 2], k=2: subsets {0,1},{0,2},{1,2} -> minima 0, 0, 1 -> 1/3
    assert expected_min([2, 0, 1], 2) == pytest.approx(1 / 3)
    assert expected_min([2, 0, 1], 1) == pytest.approx(1.0)
    assert expected_min([2, 0, 1], 3) == 0.0
    with pytest.raises(ValueError):
        expected_min([1, 2], 3)


def test_worst_at_k_averages_items_and_clips() -> None:
    for k in range(1, 6):
        expected = np.mean([_brute_force(s, k) for s in SAMPLES.values()])
        assert worst_at_k(SAMPLES, k) == pytest.approx(expected)
        assert worst_at_k(list(SAMPLES.values()), k) == pytest.approx(expected)
    assert worst_at_k({"a": [-0.5, -0.2]}, 1, clip=(0, 1)) == 0.0


def test_curve_keeps_one_item_set_and_drops_nan() -> None:
    samples = {"a": [1.0, 0.0, np.nan], "b": [2.0, 2.0, 1.0]}  # "a" has 2 scored samples
    curve = worst_at_k_curve(samples)
    assert list(curve["k"]) == [1, 2] and list(curve["n_items"]) == [2, 2]
    assert curve["worst_at_k"].tolist() == pytest.approx([(0.5 + 5 / 3) / 2, (0.0 + 4 / 3) / 2])
    longer = worst_at_k_curve(samples, k_max=3)
    assert list(longer["n_items"]) == [1, 1, 1]  # only "b" has 3 samples
    assert longer["worst_at_k"].tolist() == pytest.approx([5 / 3, 4 / 3, 1.0])
    full = worst_at_k_curve(SAMPLES)
    assert list(full["k"]) == [1, 2, 3, 4, 5] and full["worst_at_k"].is_monotonic_decreasing
    for _, row in full.iterrows():
        assert row["worst_at_k"] == pytest.approx(np.mean([_brute_force(s, int(row["k"])) for s in SAMPLES.values()]))


def test_per_item_variance() -> None:
    variance = per_item_variance(SAMPLES)
    for item, samples in SAMPLES.items():
        assert variance[item] == pytest.approx(np.var(samples))
    assert per_item_variance({"a": [1.0]}, ddof=1).isna().all()
