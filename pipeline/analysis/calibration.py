"""Calibrating judge scores with a few human labels: prediction-powered inference (PPI++) of a mean via `ppi_py`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np


def _ppi_py():
    """ppi_py, imported on first use (with numba it is slow to import: not on every page's first render)."""
    with warnings.catch_warnings():
        # ppi_py.ppi runs `warnings.simplefilter("ignore")` at import time, silencing warnings process-wide;
        # importing it inside catch_warnings restores the caller's filters afterwards.
        import ppi_py
    return ppi_py


def _clean(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


def ppi_mean(
    judge_labelled: Sequence[float] | np.ndarray,
    human_labelled: Sequence[float] | np.ndarray,
    judge_unlabelled: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
    lam: float | None = None,
) -> dict[str, float | int]:
    """Prediction-powered estimate and (1 − alpha) CI of the mean human score, from judge scores on many items.

    `judge_labelled[i]` and `human_labelled[i]` score the same item; `judge_unlabelled` are judge scores of the
    items without a human label. Unscored entries (NaN) are dropped: a labelled pair if either side is NaN.
    `lam=None` lets ppi_py tune the power parameter (PPI++, clipped to [0, 1]); `lam=1` is plain PPI, `lam=0`
    the human-only mean. Calls `ppi_py.ppi_mean_pointestimate` and `ppi_py.ppi_mean_ci` (whose own default
    alpha is 0.1).

    Returns `mean`, `lo`, `hi`, `n_labelled`, `n_unlabelled`, `judge_mean` (the naive mean of every judge score,
    labelled and unlabelled) and `correction` = mean − judge_mean.
    """
    y_hat = _clean(judge_labelled, "judge_labelled")
    y = _clean(human_labelled, "human_labelled")
    y_hat_unlabelled = _clean(judge_unlabelled, "judge_unlabelled")
    if y_hat.shape != y.shape:
        raise ValueError(f"judge_labelled and human_labelled differ in length: {len(y_hat)} vs {len(y)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    keep = ~(np.isnan(y) | np.isnan(y_hat))
    y, y_hat = y[keep], y_hat[keep]
    y_hat_unlabelled = y_hat_unlabelled[~np.isnan(y_hat_unlabelled)]
    if len(y) < 2:
        raise ValueError(f"PPI needs at least 2 items scored by both judge and human, got {len(y)}")
    if len(y_hat_unlabelled) < 1:
        raise ValueError("PPI needs at least 1 judge-scored item without a human label")
    ppi_py = _ppi_py()
    mean = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, y_hat, y_hat_unlabelled, lam=lam)))
    lo, hi = ppi_py.ppi_mean_ci(y, y_hat, y_hat_unlabelled, alpha=alpha, lam=lam)
    judge_mean = float(np.concatenate([y_hat, y_hat_unlabelled]).mean())
    return {
        "mean": mean,
        "lo": float(np.squeeze(lo)),
        "hi": float(np.squeeze(hi)),
        "n_labelled": len(y),
        "n_unlabelled": len(y_hat_unlabelled),
        "judge_mean": judge_mean,
        "correction": mean - judge_mean,
    }
