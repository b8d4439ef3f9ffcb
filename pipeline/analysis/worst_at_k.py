"""Worst-at-k reliability (HealthBench): the expected worst score among k answers sampled for the same item.

Input: per-item lists of the scores of repeated samples (answers) for that item, as a mapping item → scores or
a sequence of score lists. NaN (unscored) samples are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

SamplesByItem = Mapping[object, Sequence[float]] | Sequence[Sequence[float]]


def _items(samples_by_item: SamplesByItem) -> dict[object, np.ndarray]:
    pairs = samples_by_item.items() if isinstance(samples_by_item, Mapping) else enumerate(samples_by_item)
    items = {}
    for item, samples in pairs:
        values = np.asarray(samples, dtype=float).ravel()
        items[item] = values[~np.isnan(values)]
    return items


def expected_min(samples: Sequence[float] | np.ndarray, k: int) -> float:
    """E[min of k samples drawn without replacement from `samples`], in closed form.

    With x_(1) ≤ … ≤ x_(n) sorted ascending, P(min = x_(i)) = C(n−i, k−1) / C(n, k) (1-indexed i); this equals
    the average over all k-subsets that HealthBench's analysis notebook enumerates with `itertools.combinations`.
    """
    from scipy.special import comb
    x = np.sort(np.asarray(samples, dtype=float).ravel())
    n = len(x)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n} (the number of samples), got {k}")
    i = np.arange(1, n + 1)
    weights = comb(n - i, k - 1) / comb(n, k)
    return float(np.dot(weights, x))


def worst_at_k(
    samples_by_item: SamplesByItem,
    k: int,
    clip: tuple[float, float] | None = None,
) -> float:
    """Mean over items of `expected_min(item samples, k)`; items with fewer than k samples are skipped.

    HealthBench clips this mean to (0, 1) (`clip=(0, 1)`); our 0–2 judge scores need no clip. NaN if no item has
    k samples.
    """
    per_item = [expected_min(v, k) for v in _items(samples_by_item).values() if len(v) >= k]
    if not per_item:
        return float("nan")
    mean = float(np.mean(per_item))
    return float(np.clip(mean, *clip)) if clip is not None else mean


def worst_at_k_curve(
    samples_by_item: SamplesByItem,
    k_max: int | None = None,
    clip: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Worst-at-k for k = 1..k_max over one fixed set of items; columns `k`, `worst_at_k`, `n_items`.

    `k_max` defaults to the fewest samples any item has; with a larger `k_max`, items with fewer samples are left
    out of every point, so the curve never mixes item sets (it is then non-increasing in k).
    """
    items = {item: v for item, v in _items(samples_by_item).items() if len(v) > 0}
    if k_max is None:
        k_max = min((len(v) for v in items.values()), default=0)
    kept = {item: v for item, v in items.items() if len(v) >= k_max}
    rows = [{"k": k, "worst_at_k": worst_at_k(kept, k, clip=clip), "n_items": len(kept)} for k in range(1, k_max + 1)]
    return pd.DataFrame(rows, columns=["k", "worst_at_k", "n_items"])


def per_item_variance(samples_by_item: SamplesByItem, ddof: int = 0) -> pd.Series:
    """Variance of each item's sample scores (NaN when an item has ≤ ddof samples), indexed by item."""
    items = _items(samples_by_item)
    variances = {item: float(np.var(v, ddof=ddof)) if len(v) > ddof else float("nan") for item, v in items.items()}
    return pd.Series(variances, name="variance", dtype=float)
