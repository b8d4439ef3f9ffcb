"""LLM juries (MedHELM style): aggregate several judges' scores and measure how far the judges agree.

Input frames are wide: one row per item, one column per judge, the score in the cell, NaN where a judge gave
no (parseable) score.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Literal

import krippendorff
import numpy as np
import pandas as pd


def jury_scores(frame: pd.DataFrame, how: Literal["mean", "median"] = "mean") -> pd.Series:
    """The jury's score per item: mean or median over the judges that scored it (NaN if none did)."""
    values = frame.astype(float)
    if how == "mean":
        result = values.mean(axis=1, skipna=True)
    elif how == "median":
        result = values.median(axis=1, skipna=True)
    else:
        raise ValueError(f"how must be 'mean' or 'median', got {how!r}")
    return result.rename("jury_score")


def krippendorff_alpha(
    frame: pd.DataFrame,
    level: Literal["nominal", "ordinal", "interval", "ratio"] = "ordinal",
    value_domain: list[float] | None = None,
) -> float:
    """Krippendorff's α of the judges (rows of the reliability data = judges), via `krippendorff.alpha`.

    NaN when α is undefined: fewer than two distinct values in the domain, or no item scored by two judges.
    """
    data = frame.astype(float).T.to_numpy()
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    domain = value_domain if value_domain is not None else np.unique(data[~np.isnan(data)])
    if not pairable.any() or len(domain) < 2:
        return float("nan")
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(krippendorff.alpha(reliability_data=data, value_domain=value_domain,
                                        level_of_measurement=level))


def pairwise_kappa(frame: pd.DataFrame, weights: Literal["linear", "quadratic"] | None = "linear") -> pd.DataFrame:
    """Weighted Cohen's κ (scikit-learn) for every pair of judges over the items both scored.

    The labels are all values seen in `frame`, so the weights are the same for every pair. κ is NaN when fewer
    than 2 items are shared or κ is undefined (both judges constant); no warnings leak.
    """
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score

    values = frame.astype(float)
    observed = values.to_numpy()
    labels = np.unique(observed[~np.isnan(observed)])
    rows = []
    for judge_a, judge_b in itertools.combinations(values.columns, 2):
        pair = values[[judge_a, judge_b]].dropna()
        kappa = float("nan")
        if len(pair) >= 2:
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", UndefinedMetricWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
                kappa = float(cohen_kappa_score(pair[judge_a], pair[judge_b], labels=labels, weights=weights,
                                                replace_undefined_by=np.nan))
        rows.append({"judge_a": judge_a, "judge_b": judge_b, "n_items": len(pair), "kappa": kappa})
    return pd.DataFrame(rows, columns=["judge_a", "judge_b", "n_items", "kappa"])


def disagreements(frame: pd.DataFrame, top: int = 20) -> pd.DataFrame:
    """The `top` items the judges disagree on most: by spread (max − min), then by (population) std.

    Columns: `n_judges`, `min`, `max`, `spread`, `std`, `mean`; indexed by item. Items no judge scored are left out.
    """
    values = frame.astype(float)
    summary = pd.DataFrame({
        "n_judges": values.notna().sum(axis=1),
        "min": values.min(axis=1),
        "max": values.max(axis=1),
        "std": values.std(axis=1, ddof=0),
        "mean": values.mean(axis=1),
    })
    summary = summary[summary["n_judges"] > 0]
    summary.insert(3, "spread", summary["max"] - summary["min"])
    return summary.sort_values(["spread", "std"], ascending=False, kind="stable").head(top)
