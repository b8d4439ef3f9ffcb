"""Aggregates with their uncertainty: AGG, and percentile-bootstrap confidence intervals.

Leaderboard cells are means of many items. Resampling n items with replacement is the same as a
multinomial draw of n over the *distinct* values with their observed frequencies, so the
bootstrap here takes a histogram (value, count) — which DuckDB computes with one GROUP BY — and
its cost does not grow with n. Judge scores have three values (0, 1, 2); AGG of one item has at
most 81; continuous scores are binned to 0.01 by the caller, which moves an interval by far less
than its width.

The percentile interval is two quantiles of the bootstrap distribution of the mean, and that
distribution's cumulants are known exactly from the histogram (κ₂ = σ²/n, κ₃ = μ₃/n²,
κ₄ = (μ₄ − 3σ⁴)/n³). When n is large and the mean's skewness small, the Cornish–Fisher expansion
of those cumulants gives the quantiles of infinitely many resamples more closely than 1,000–2,000
resamples estimate them (measured in tests/test_stats.py against 400,000 resamples), at no cost;
otherwise — few items, or a mean still skewed, where the lattice of a few counts matters — the
resamples are drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import NormalDist

import numpy as np

from pipeline.config import METRICS

N_RESAMPLES = 2000
# Where the Cornish–Fisher quantiles replace resampling: enough items, and a mean whose skewness is
# small (beyond 0.35 the expansion drifts from 400,000 resamples by more than 1,000 resamples do).
EXPANSION_MIN_N = 200
EXPANSION_MAX_SKEW = 0.35


def bootstrap_mean_ci(values: np.ndarray, counts: np.ndarray, *, confidence: float = 0.95,
                      n_resamples: int = N_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of a sample given as a histogram of distinct values.

    From the bootstrap distribution's cumulants (Cornish–Fisher) when n ≥ ``EXPANSION_MIN_N`` and
    the mean's skewness is at most ``EXPANSION_MAX_SKEW``, else from ``n_resamples`` multinomial
    resamples. Returns (nan, nan) for an empty sample; a single distinct value gives a zero-width
    interval.
    """
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return float("nan"), float("nan")
    alpha = (1 - confidence) / 2
    expanded = _cornish_fisher_ci(values, counts, n, alpha)
    if expanded is not None:
        return expanded
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=n_resamples)
    means = draws @ values / n
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def _cornish_fisher_ci(values: np.ndarray, counts: np.ndarray, n: int, alpha: float) -> tuple[float, float] | None:
    """The bootstrap mean's α and 1−α quantiles from its first four cumulants; None where not accurate."""
    p = counts / n
    mean = float(p @ values)
    dev = values - mean
    var = float(p @ dev**2)
    if var <= 1e-18 * max(1.0, mean * mean):
        return mean, mean
    skew = float(p @ dev**3) / var**1.5 / np.sqrt(n)  # of the mean of n resampled items
    if n < EXPANSION_MIN_N or abs(skew) > EXPANSION_MAX_SKEW:
        return None
    kurt = (float(p @ dev**4) / var**2 - 3.0) / n  # excess kurtosis of the mean
    ends = []
    for q in (alpha, 1 - alpha):
        z = NormalDist().inv_cdf(q)
        w = (z + (z * z - 1) * skew / 6 + (z**3 - 3 * z) * kurt / 24 - (2 * z**3 - 5 * z) * skew * skew / 36)
        ends.append(min(max(mean + w * np.sqrt(var / n), float(values.min())), float(values.max())))
    return ends[0], ends[1]


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


def histogram(values, *, decimals: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, counts) of a sample, NaNs dropped; ``decimals`` bins continuous scores."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if decimals is not None:
        arr = np.round(arr, decimals)
    distinct, counts = np.unique(arr, return_counts=True)
    return distinct, counts


def mean_with_ci(values: np.ndarray, counts: np.ndarray, **kwargs) -> dict[str, float | int]:
    """``{"mean", "n", "lo", "hi"}`` of a histogram sample (bootstrap CI; NaN when empty)."""
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return {"mean": float("nan"), "n": 0, "lo": float("nan"), "hi": float("nan")}
    lo, hi = bootstrap_mean_ci(values, counts, **kwargs)
    return {"mean": float(values @ counts / n), "n": n, "lo": lo, "hi": hi}


def item_agg(scores: Mapping[str, float | None], weights: Mapping[str, float]) -> float | None:
    """AGG of one item (one response): weighted mean of its metric scores; None if a weighted one is missing."""
    return weighted_agg(scores, weights)


def fit_agg_weights(table, metrics: tuple[str, ...] = METRICS, target: str = "AGG") -> dict:
    """Non-negative least-squares weights reproducing a printed AGG column from metric columns.

    ``table`` is a DataFrame (e.g. data/reference/health_pariksha_leaderboards.csv). Returns
    ``{"weights": {metric: w}, "sum": Σw, "max_abs_error": ..., "rmse": ...}`` (scipy.optimize.nnls,
    no intercept, weights not forced to sum to 1).
    """
    from scipy.optimize import nnls

    a = table[list(metrics)].to_numpy(dtype=float)
    b = table[target].to_numpy(dtype=float)
    w, _ = nnls(a, b)
    residual = a @ w - b
    return {"weights": dict(zip(metrics, (float(x) for x in w), strict=True)), "sum": float(w.sum()),
            "max_abs_error": float(np.abs(residual).max()), "rmse": float(np.sqrt(np.mean(residual**2)))}


def agg_error(table, weights: Mapping[str, float], target: str = "AGG") -> float:
    """Largest |printed AGG − Σ wᵢ·metricᵢ| over the rows of ``table`` (weights used as given)."""
    predicted = sum(float(weights.get(m, 0.0)) * table[m].to_numpy(dtype=float) for m in METRICS)
    return float(np.abs(predicted - table[target].to_numpy(dtype=float)).max())
