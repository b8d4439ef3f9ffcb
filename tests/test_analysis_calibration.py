"""Prediction-powered mean of human scores from judge scores (pipeline.analysis.calibration)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from pipeline.analysis.calibration import ppi_mean

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def biased_judge() -> dict[str, np.ndarray]:
    """Human scores 0–2; the judge is lenient: it adds 0.6 on average (and some noise), capped at 2."""
    rng = np.random.default_rng(0)
    human = rng.choice([0.0, 1.0, 2.0], size=2000, p=[0.3, 0.4, 0.3])
    judge = np.clip(human + 0.6 + rng.normal(0, 0.4, size=human.size), 0, 2)
    n = 150
    return {"judge_labelled": judge[:n], "human_labelled": human[:n], "judge_unlabelled": judge[n:],
            "human_unlabelled": human[n:]}


def test_equals_ppi_py_on_the_same_arrays(biased_judge: dict[str, np.ndarray]) -> None:
    with warnings.catch_warnings():
        import ppi_py
    y, y_hat, y_hat_u = (biased_judge[k] for k in ("human_labelled", "judge_labelled", "judge_unlabelled"))
    result = ppi_mean(y_hat, y, y_hat_u, alpha=0.05)
    lo, hi = ppi_py.ppi_mean_ci(y, y_hat, y_hat_u, alpha=0.05)
    assert result["mean"] == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y, y_hat, y_hat_u)[0]))
    assert (result["lo"], result["hi"]) == pytest.approx((float(lo[0]), float(hi[0])))
    assert result["n_labelled"] == 150 and result["n_unlabelled"] == 1850
    plain = ppi_mean(y_hat, y, y_hat_u, alpha=0.1, lam=1.0)
    lo1, hi1 = ppi_py.ppi_mean_ci(y, y_hat, y_hat_u, alpha=0.1, lam=1.0)
    assert (plain["lo"], plain["hi"]) == pytest.approx((float(lo1[0]), float(hi1[0])))
    # lam=1 is plain PPI: judge mean on unlabelled + mean rectifier on labelled
    assert plain["mean"] == pytest.approx(y_hat_u.mean() + (y - y_hat).mean())


def test_corrects_a_biased_judge(biased_judge: dict[str, np.ndarray]) -> None:
    result = ppi_mean(biased_judge["judge_labelled"], biased_judge["human_labelled"], biased_judge["judge_unlabelled"])
    truth = biased_judge["human_unlabelled"].mean()
    assert result["judge_mean"] - truth > 0.4  # the naive judge mean is far off
    assert result["lo"] <= truth <= result["hi"]
    assert not result["lo"] <= result["judge_mean"] <= result["hi"]
    assert result["correction"] == pytest.approx(result["mean"] - result["judge_mean"])
    assert result["correction"] < -0.3


def test_nan_entries_are_dropped(biased_judge: dict[str, np.ndarray]) -> None:
    y_hat = biased_judge["judge_labelled"].copy()
    y = biased_judge["human_labelled"].copy()
    y_hat_u = biased_judge["judge_unlabelled"].copy()
    y_hat[0], y[1], y_hat_u[:5] = np.nan, np.nan, np.nan
    result = ppi_mean(y_hat, y, y_hat_u)
    expected = ppi_mean(y_hat[2:], y[2:], y_hat_u[5:])
    assert result == pytest.approx(expected)
    assert result["n_labelled"] == 148 and result["n_unlabelled"] == 1845


def test_errors_on_too_few_labels() -> None:
    with pytest.raises(ValueError, match="at least 2 items"):
        ppi_mean([1.0], [2.0], [1.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="at least 2 items"):
        ppi_mean([1.0, np.nan], [2.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="differ in length"):
        ppi_mean([1.0, 2.0, 0.0], [2.0, 1.0], [1.0])
    with pytest.raises(ValueError, match="without a human label"):
        ppi_mean([1.0, 2.0], [2.0, 1.0], [])


def test_import_keeps_warning_filters() -> None:
    # ppi_py silences every warning when imported; importing it through calibration (on first use) must not.
    code = ("import sys, warnings\nfrom pipeline.analysis.calibration import ppi_mean\n"
            "assert 'ppi_py' not in sys.modules  # imported on first use, not with every page\n"
            "ppi_mean([1.0, 2.0, 0.0], [1.0, 2.0, 1.0], [1.0, 2.0, 0.0, 1.0])\nimport ppi_py\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.warn('still visible', UserWarning)\n"
            "print(len(caught), ('ignore', None, Warning, None, 0) in warnings.filters)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1 False"
