"""The paired bootstrap of every pair of models at once, fast enough for a leaderboard of 24 models × 6,660 items.

``significance.paired_bootstrap`` is the reference: per pair, the items both models scored are resampled
(the same items for both) and the mean difference's percentile interval read off 2,000 resamples with
scipy. Here the same bootstrap distribution is reached two cheaper ways, as ``stats.bootstrap_mean_cis``
does for one mean:

- **many items** (n ≥ ``EXPANSION_MIN_N``, the mean difference not skewed): the bootstrap distribution
  of a mean of n resampled differences has exactly known cumulants (κ₂ = σ²/n, κ₃ = μ₃/n², κ₄ =
  (μ₄ − 3σ⁴)/n³), and its quantiles follow from them by the Cornish–Fisher expansion — the quantiles of
  infinitely many resamples, at no cost. The moments of every pair's differences come from a few
  matrix products of the score matrix (Σ x_a^p x_b^q over the items both scored), never from the
  n × pairs differences themselves.
- **few items** (or a skewed difference): ``n_resamples`` multinomial draws of the items, one draw
  shared by every model and pair (the same resampled items for both models of a pair), each pair's mean
  difference taken over its shared items among them; the percentile interval and the two-sided
  bootstrap p-value of ``paired_bootstrap``.

Input: one row per item, one column per model, NaN where a model has no score. Pure numpy; no SQL.
"""

from __future__ import annotations

import functools
import itertools
from contextlib import AbstractContextManager
from math import comb
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import ThreadpoolController

from pipeline.analysis.significance import PAIRWISE_COLUMNS
from pipeline.analysis.stats import EXPANSION_MAX_SKEW, EXPANSION_MIN_N

N_RESAMPLES = 1000


@functools.cache
def _threadpools() -> ThreadpoolController:
    """The process's thread pools (found once: listing the loaded libraries costs more than a small product)."""
    return ThreadpoolController()


def _one_blas_thread() -> AbstractContextManager[Any]:
    """A context in which BLAS runs on one thread (a small product: BLAS threads only wait on a busy machine)."""
    return _threadpools().limit(limits=1, user_api="blas")


def _moment_sums(values: np.ndarray) -> tuple[np.ndarray, ...]:
    """For every ordered pair (a, b): n, Σx_a, Σx_b and Σd^k (k = 1..4, d = x_a − x_b) over the items both scored."""
    mask = ~np.isnan(values)
    x = np.where(mask, values, 0.0)
    k = values.shape[1]
    stacked = np.concatenate([mask.astype(float), x, x**2, x**3, x**4], axis=1)  # items × (5 · models)
    with _one_blas_thread():
        gram = stacked.T @ stacked
    s = {(p, q): gram[p * k:(p + 1) * k, q * k:(q + 1) * k] for p in range(5) for q in range(5) if p + q <= 4}
    sums = [sum(comb(k, j) * (-1) ** (k - j) * s[(j, k - j)] for j in range(k + 1)) for k in range(1, 5)]
    return s[(0, 0)], s[(1, 0)], s[(0, 1)], *sums


def paired_differences(values: np.ndarray | pd.DataFrame, models: list[str] | None = None, *,
                       n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """``significance.paired_bootstrap``'s table (same columns, same pair order) plus ``sd`` (of the
    per-item differences) and ``method`` ('expansion' or 'resampled').

    ``diff`` = mean_a − mean_b over the items both scored; ``ci_lo``/``ci_hi`` the percentile interval of the
    bootstrap distribution of that mean; ``significant``: the interval excludes 0 (expansion) or the
    bootstrap p-value is below 1 − confidence (resampled; p as in ``paired_bootstrap``). The expansion's
    ``p_value`` is the normal approximation 2·(1 − Φ(|diff| / se)). Pairs with fewer than 2 shared items
    get NaN statistics and ``significant=False``.
    """
    if isinstance(values, pd.DataFrame):
        models = list(values.columns) if models is None else models
        values = values.to_numpy(dtype=float)
    values = np.asarray(values, dtype=float)
    models = list(models if models is not None else range(values.shape[1]))
    alpha = 1 - confidence
    pairs = list(itertools.combinations(range(len(models)), 2))
    if not pairs:
        return pd.DataFrame(columns=[*PAIRWISE_COLUMNS, "sd", "method"])
    a, b = (np.array(side) for side in zip(*pairs, strict=True))
    n_m, sum_a, sum_b, t1, t2, t3, t4 = (m[a, b] for m in _moment_sums(values))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = t1 / n_m
        var = np.maximum(t2 / n_m - mean**2, 0.0)
        m3 = t3 / n_m - 3 * mean * t2 / n_m + 2 * mean**3
        m4 = t4 / n_m - 4 * mean * t3 / n_m + 6 * mean**2 * t2 / n_m - 3 * mean**4
        constant = var <= 1e-18 * np.maximum(1.0, mean**2)
        se = np.sqrt(var / n_m)
        skew = np.where(constant, 0.0, m3 / var**1.5 / np.sqrt(n_m))
        kurt = np.where(constant, 0.0, (m4 / var**2 - 3.0) / n_m)
        ends = []
        for q in (alpha / 2, 1 - alpha / 2):
            z = NormalDist().inv_cdf(q)
            w = z + (z * z - 1) * skew / 6 + (z**3 - 3 * z) * kurt / 24 - (2 * z**3 - 5 * z) * skew**2 / 36
            ends.append(np.where(constant, mean, mean + w * se))
        z_obs = np.where(constant, np.where(mean == 0, 0.0, np.inf), np.abs(mean) / se)
    lo, hi = ends
    p_value = np.array([2 * (1 - NormalDist().cdf(min(z, 38.0))) for z in z_obs])
    significant = (lo > 0) | (hi < 0)
    method = np.full(len(pairs), "expansion", dtype=object)
    skewed = ~(np.abs(skew) <= EXPANSION_MAX_SKEW)
    resample = np.flatnonzero((n_m >= 2) & ~constant & ((n_m < EXPANSION_MIN_N) | skewed))
    if len(resample):
        rs_lo, rs_hi, rs_p = _resampled(values, a[resample], b[resample], n_resamples, seed, confidence)
        lo[resample], hi[resample], p_value[resample] = rs_lo, rs_hi, rs_p
        significant[resample] = rs_p < alpha
        method[resample] = "resampled"
    few = n_m < 2
    lo[few] = hi[few] = p_value[few] = np.nan
    significant[few] = False
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(var * n_m / np.maximum(n_m - 1, 1))
        return pd.DataFrame({
            "model_a": [models[i] for i in a], "model_b": [models[i] for i in b], "n_items": n_m.astype(int),
            "mean_a": sum_a / n_m, "mean_b": sum_b / n_m, "diff": mean, "ci_lo": lo, "ci_hi": hi,
            "p_value": p_value, "significant": significant.astype(bool), "sd": np.where(few, np.nan, sd),
            "method": method,
        })


def _resampled(values: np.ndarray, a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int,
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile interval and bootstrap p-value of the pairs (a[i], b[i]) from one shared multinomial draw."""
    n_items = values.shape[0]
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_items, np.full(n_items, 1 / n_items), size=n_resamples).astype(float)
    shared = ~np.isnan(values[:, a]) & ~np.isnan(values[:, b])
    diffs = np.where(shared, np.nan_to_num(values[:, a]) - np.nan_to_num(values[:, b]), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"), _one_blas_thread():
        boot = (weights @ diffs) / (weights @ shared.astype(float))  # (resamples, pairs); NaN: no shared item drawn
    half = (1 - confidence) / 2
    quantile = np.nanquantile if np.isnan(boot).any() else np.quantile
    lo, hi = quantile(boot, [half, 1 - half], axis=0)
    drawn = (~np.isnan(boot)).sum(axis=0)
    rarer = np.minimum(np.sum(boot <= 0, axis=0), np.sum(boot >= 0, axis=0))
    p_value = np.minimum(1.0, 2 * (1 + rarer) / (1 + drawn))
    return lo, hi, p_value
