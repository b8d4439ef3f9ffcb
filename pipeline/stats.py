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
