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
from concurrent.futures import ThreadPoolExecutor
from statistics import NormalDist

import numpy as np

from pipeline.metrics import METRICS, agg_weights

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
    lo, hi = bootstrap_mean_cis(np.zeros(len(values), dtype=np.int64), values, counts, 1, confidence=confidence,
                                n_resamples=n_resamples, seed=seed)
    return float(lo[0]), float(hi[0])


def expansion_ci(n: np.ndarray, mean: np.ndarray, var: np.ndarray, m3: np.ndarray, m4: np.ndarray,
                 lowest: np.ndarray, highest: np.ndarray, *,
                 confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The percentile interval of the bootstrap mean of n items from their moments (the Cornish–Fisher expansion of
    its exact cumulants; module docstring), per sample: ``mean``, ``var``, ``m3``, ``m4`` are the items' (ddof 0)
    mean and central moments, ``lowest``/``highest`` their range (the interval never leaves it).

    Returns (lo, hi, constant, skew): ``constant`` marks a sample of one value (a zero-width interval), ``skew``
    the mean's skewness (beyond ``EXPANSION_MAX_SKEW`` resampling is closer).
    """
    alpha = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        constant = var <= 1e-18 * np.maximum(1.0, mean * mean)
        skew = m3 / var**1.5 / np.sqrt(n)  # of the mean of n resampled items
        kurt = (m4 / var**2 - 3.0) / n  # its excess kurtosis
        ends = []
        for q in (alpha, 1 - alpha):
            z = NormalDist().inv_cdf(q)
            w = z + (z * z - 1) * skew / 6 + (z**3 - 3 * z) * kurt / 24 - (2 * z**3 - 5 * z) * skew * skew / 36
            ends.append(np.where(constant, mean, mean + w * np.sqrt(var / n)))
    return np.clip(ends[0], lowest, highest), np.clip(ends[1], lowest, highest), constant, skew


def bootstrap_mean_cis(group: np.ndarray, values: np.ndarray, counts: np.ndarray, n_groups: int, *,
                       confidence: float = 0.95, n_resamples: int = N_RESAMPLES,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``bootstrap_mean_ci`` of many samples at once: row i (a value and its count) belongs to sample ``group[i]``.

    Returns arrays (lo, hi) of length ``n_groups`` (NaN for an empty sample). The expansion is computed
    for all samples together; the rest are resampled one by one, on two threads when there are many.
    """
    group = np.asarray(group, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    alpha = (1 - confidence) / 2
    n = np.bincount(group, weights=counts, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(group, weights=counts * values, minlength=n_groups) / n
        dev = values - mean[group]
        var, m3, m4 = (np.bincount(group, weights=counts * dev**k, minlength=n_groups) / n for k in (2, 3, 4))
    lowest = np.full(n_groups, np.inf)
    highest = np.full(n_groups, -np.inf)
    np.minimum.at(lowest, group, values)
    np.maximum.at(highest, group, values)
    lo, hi, constant, skew = expansion_ci(n, mean, var, m3, m4, lowest, highest, confidence=confidence)
    resample = np.flatnonzero((n > 0) & ~constant & ((n < EXPANSION_MIN_N) | ~(np.abs(skew) <= EXPANSION_MAX_SKEW)))
    lo[n == 0] = hi[n == 0] = np.nan

    def resampled(k: int) -> tuple[float, float]:
        rows = group == k
        draws = np.random.default_rng(seed).multinomial(int(n[k]), counts[rows] / n[k], size=n_resamples)
        return tuple(np.quantile(draws @ values[rows] / n[k], [alpha, 1 - alpha]))

    if len(resample) >= 8:
        with ThreadPoolExecutor(max_workers=2) as pool:  # numpy's sampler releases the GIL
            done = list(pool.map(resampled, resample))
    else:
        done = [resampled(k) for k in resample]
    for k, (low, high) in zip(resample, done, strict=True):
        lo[k], hi[k] = low, high
    return lo, hi


def normalised_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Weights over FC, SS, COH, CON scaled to sum to 1 (missing metrics weigh 0)."""
    total = sum(max(0.0, float(weights.get(m, 0.0))) for m in METRICS)
    if total <= 0:
        raise ValueError("AGG weights must not all be zero")
    return {m: max(0.0, float(weights.get(m, 0.0))) / total for m in METRICS}


def weighted_agg(metric_means: Mapping[str, float | None], weights: Mapping[str, float],
                 preset: str | None = None) -> float | None:
    """AGG of metric means (``pipeline.metrics.agg_weights``: normalised weights, or a paper-fit preset as
    given); None when a weighted metric is missing."""
    w = agg_weights(dict(weights), preset)
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
