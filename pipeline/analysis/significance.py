"""Significance for per-language leaderboards: paired bootstrap, compact letter display, rank intervals, power.

Input frames are wide: one row per item (query), one column per model, the score in the cell, NaN where a model
has no (scored) answer for that item. Higher scores are better.
"""

from __future__ import annotations

import itertools
import math
import string
from collections.abc import Mapping

import numpy as np
import pandas as pd

#: Fewer items than this and a leaderboard's ranks are reported as "not established" (see `ranks_established`).
MIN_ITEMS_FOR_RANKS = 30

_LETTERS = string.ascii_lowercase + string.ascii_uppercase

PAIRWISE_COLUMNS = [
    "model_a", "model_b", "n_items", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "p_value", "significant",
]


def paired_bootstrap(
    scores: pd.DataFrame,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Paired bootstrap of the mean score difference for every pair of models (columns of `scores`).

    For each pair only the items both models scored are used, and the same resampled items are taken for both
    (bootstrapping the per-item differences with `scipy.stats.bootstrap`, percentile interval). Every pair is
    resampled from a generator seeded with `seed`, so pairs over the same number of shared items share one index
    draw, and the result is reproducible for a seed.

    `diff` is mean_a − mean_b; `p_value` is the two-sided bootstrap p-value min(1, 2·(1 + m) / (1 + n_resamples)),
    m the smaller of #{d* ≤ 0} and #{d* ≥ 0} over the resampled mean differences d*; `significant` is
    p < 1 − confidence (two identical models get p = 1).
    Pairs with fewer than 2 shared items get NaN statistics and `significant=False`.
    """
    from scipy import stats
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values = scores.astype(float)
    alpha = 1 - confidence
    rows = []
    for model_a, model_b in itertools.combinations(values.columns, 2):
        pair = values[[model_a, model_b]].dropna()
        a = pair[model_a].to_numpy()
        b = pair[model_b].to_numpy()
        row = {"model_a": model_a, "model_b": model_b, "n_items": len(pair),
               "mean_a": a.mean() if len(a) else np.nan, "mean_b": b.mean() if len(b) else np.nan}
        if len(pair) < 2:
            rows.append({**row, "diff": row["mean_a"] - row["mean_b"], "ci_lo": np.nan, "ci_hi": np.nan,
                         "p_value": np.nan, "significant": False})
            continue
        d = a - b
        res = stats.bootstrap(
            (d,), np.mean, n_resamples=n_resamples, confidence_level=confidence, method="percentile",
            rng=np.random.default_rng(seed),
        )
        dist = res.bootstrap_distribution
        rarer = min(int(np.sum(dist <= 0)), int(np.sum(dist >= 0)))
        p_value = min(1.0, 2 * (1 + rarer) / (1 + n_resamples))
        rows.append({**row, "diff": d.mean(), "ci_lo": res.confidence_interval.low,
                     "ci_hi": res.confidence_interval.high, "p_value": p_value, "significant": p_value < alpha})
    return pd.DataFrame(rows, columns=PAIRWISE_COLUMNS)


def tied_groups(
    means: Mapping[str, float] | pd.Series,
    pairwise: pd.DataFrame,
) -> dict[str, str]:
    """Compact letter display (Piepho 2004, insert-and-absorb): models sharing a letter are not distinguishable.

    `means` orders the letters ("a" goes to the group of the best model); `pairwise` has columns `model_a`,
    `model_b`, `significant` (as `paired_bootstrap` returns). Pairs not listed are treated as not different.
    """
    means = pd.Series(means, dtype=float)
    order = list(means.sort_values(ascending=False, kind="stable").index)
    position = {m: i for i, m in enumerate(order)}
    columns: list[frozenset[str]] = [frozenset(order)]
    different = pairwise.loc[pairwise["significant"].astype(bool), ["model_a", "model_b"]]
    for a, b in different.itertuples(index=False):
        if a not in position or b not in position or not any(a in c and b in c for c in columns):
            continue  # (no column holds both: nothing to split, and the columns are already absorbed)
        # insert: split every column holding both a and b into one without a and one without b
        new_columns: list[frozenset[str]] = []
        for column in columns:
            if a in column and b in column:
                new_columns.extend([column - {a}, column - {b}])
            else:
                new_columns.append(column)
        # absorb: drop duplicates and columns contained in another column
        unique = list(dict.fromkeys(new_columns))
        columns = [c for c in unique if not any(c < other for other in unique)]
    columns.sort(key=lambda c: sorted(position[m] for m in c))
    if len(columns) > len(_LETTERS):
        raise ValueError(f"letter display needs {len(columns)} letters; only {len(_LETTERS)} available")
    return {m: "".join(_LETTERS[i] for i, c in enumerate(columns) if m in c) for m in order}


def rank_intervals(
    scores: pd.DataFrame,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Bootstrap rank intervals: resample items (rows), rank the models' mean scores (1 = best, ties averaged).

    Each model's mean is taken over the items it scored among the resampled ones. Returns one row per model with
    its observed `mean` and `rank` and the percentile interval `rank_lo`..`rank_hi`, best first.
    """
    from scipy import stats
    values = scores.astype(float).to_numpy()
    n_items = values.shape[0]
    if n_items < 2:
        raise ValueError("rank intervals need at least 2 items")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_items, size=(n_resamples, n_items))
    present = ~np.isnan(values)
    filled = np.where(present, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot_means = filled[idx].sum(axis=1) / present[idx].sum(axis=1)  # (n_resamples, n_models)
    boot_means = np.where(np.isnan(boot_means), -np.inf, boot_means)
    boot_ranks = stats.rankdata(-boot_means, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        obs_means = filled.sum(axis=0) / present.sum(axis=0)
    half = (1 - confidence) / 2
    frame = pd.DataFrame({
        "model": scores.columns,
        "mean": obs_means,
        "rank": stats.rankdata(-np.nan_to_num(obs_means, nan=-np.inf)),
        "rank_lo": np.quantile(boot_ranks, half, axis=0),
        "rank_hi": np.quantile(boot_ranks, 1 - half, axis=0),
    })
    return frame.sort_values(["rank", "model"]).reset_index(drop=True)


def minimum_detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean paired difference a two-sided z-test at `alpha` detects with `power`.

    `sd` is the standard deviation of the per-item differences, `n` the number of shared items:
    MDD = (z_{1−α/2} + z_{power}) · sd / √n.
    """
    from scipy import stats
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * sd / math.sqrt(n))


def ranks_established(n_items: int, min_items: int = MIN_ITEMS_FOR_RANKS) -> tuple[bool, str]:
    """Whether a leaderboard over `n_items` items may claim an order of models, with the reason to show.

    Below `MIN_ITEMS_FOR_RANKS` (30) items the percentile bootstrap under-covers and, for a typical per-item
    difference SD of 0.8 on the 0–2 judge scale, the minimum detectable difference exceeds 0.4 points (a fifth of
    the scale): ranks are then "not established" (Health-Pariksha's Telugu set has 14 queries).
    """
    if n_items < min_items:
        return False, f"ranks not established: {n_items} items < {min_items}"
    return True, f"ranks established: {n_items} items ≥ {min_items}"
