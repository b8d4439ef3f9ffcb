"""Aggregates with their uncertainty: AGG, and percentile-bootstrap confidence intervals.

Leaderboard cells are means of many items. Resampling n items with replacement is the same as a
multinomial draw of n over the *distinct* values with their observed frequencies, so the
bootstrap here takes a histogram (value, count) — which DuckDB computes with one GROUP BY — and
its cost does not grow with n. Judge scores have three values (0, 1, 2); AGG of one item has at
most 81; continuous scores are binned to 0.01 by the caller, which moves an interval by far less
than its width.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pipeline.config import METRICS

N_RESAMPLES = 2000


def bootstrap_mean_ci(values: np.ndarray, counts: np.ndarray, *, confidence: float = 0.95,
                      n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of a sample given as a histogram of distinct values.

    Returns (nan, nan) for an empty sample; a single item gives a zero-width interval.
    """
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=n_resamples)
    means = draws @ values / n
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def normalised_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Weights over FC, SS, COH, CON scaled to sum to 1 (missing metrics weigh 0)."""
    total = sum(max(0.0, float(weights.get(m, 0.0))) for m in METRICS)
    if total <= 0:
        raise ValueError("AGG weights must not all be zero")
    return {m: max(0.0, float(weights.get(m, 0.0))) / total for m in METRICS}


def weighted_agg(metric_means: Mapping[str, float | None], weights: Mapping[str, float]) -> float | None:
    """AGG: the weighted mean of the four metric means; None when a weighted metric is missing."""
    w = normalised_weights(weights)
    if any(w[m] > 0 and (metric_means.get(m) is None or np.isnan(metric_means[m])) for m in METRICS):
        return None
    return float(sum(w[m] * metric_means[m] for m in METRICS if w[m] > 0))
