"""Statistics of the Med-CoDE page on frames and arrays, no SQL: proportions with Wilson intervals, classification
accuracy against human labels (Table 1), Pearson correlations with Fisher-z intervals, and the paper's three
correlation claims (§5) checked against an interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
MIN_CORRELATION_N = 10  # fewer items than this: a claim is not checked


def wilson_ci(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials (``scipy.stats.binomtest(...).proportion_ci``);
    (nan, nan) when n = 0."""
    if n <= 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def proportion(k: int, n: int, confidence: float = CONFIDENCE) -> dict[str, float | int]:
    """``{"value", "lo", "hi", "n", "k"}``: the share k/n with its Wilson interval (NaN when n = 0)."""
    lo, hi = wilson_ci(k, n, confidence)
    return {"value": k / n if n else float("nan"), "lo": lo, "hi": hi, "n": int(n), "k": int(k)}


def accuracy(y_true: Sequence[str | None], y_pred: Sequence[str | None]) -> dict[str, float | int]:
    """Accuracy of predicted labels against true ones, with a Wilson interval. A pair whose prediction is missing
    (None/NaN: unparsed) is neither right nor wrong: left out of n and counted as ``unparsed``."""
    truth = pd.Series(list(y_true), dtype=object)
    pred = pd.Series(list(y_pred), dtype=object)
    known = truth.notna() & pred.notna()
    right = int((truth[known] == pred[known]).sum())
    out = proportion(right, int(known.sum()))
    return {**out, "accuracy": out["value"], "correct": right, "unparsed": int((truth.notna() & pred.isna()).sum())}


def fisher_ci(r: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Interval of a Pearson r over n pairs by Fisher's z (as ``scipy.stats.pearsonr(...).confidence_interval``);
    (nan, nan) when r is undefined or n ≤ 3."""
    if n <= 3 or r is None or not math.isfinite(r):
        return float("nan"), float("nan")
    if abs(r) >= 1:
        return float(r), float(r)
    z, half = math.atanh(r), NormalDist().inv_cdf(0.5 + confidence / 2) / math.sqrt(n - 3)
    return math.tanh(z - half), math.tanh(z + half)


def correlations(frame: pd.DataFrame, quantities: Sequence[str], targets: Sequence[str],
                 by: str | None = None, pooled: str = "(all models)") -> pd.DataFrame:
    """Pearson r of every quantity with every target over the rows of ``frame`` (pairwise complete), pooled and
    per value of ``by``: columns ``group``, ``quantity``, ``score``, ``r``, ``lo``, ``hi`` (Fisher z), ``n``."""
    matrix = frame[[*quantities, *targets]].to_numpy(dtype=float, na_value=np.nan)  # one copy, sliced per group
    groups: list[tuple[str, np.ndarray]] = [(pooled, matrix)]
    if by is not None:  # as groupby(by, sort=True): keys in order (no missing key), each group's rows in frame order
        codes, keys = pd.factorize(frame[by], sort=True)
        groups += [(str(g), matrix[codes == k]) for k, g in enumerate(keys)]
    rows = []
    for name, values in groups:
        present = (~np.isnan(values)).astype(float)
        counts = present.T @ present
        with np.errstate(invalid="ignore", divide="ignore"):
            r = pd.DataFrame(values).corr(min_periods=2).to_numpy()
        for i, q in enumerate(quantities):
            for j, t in enumerate(targets, start=len(quantities)):
                n = int(counts[i, j])
                value = float(r[i, j]) if n >= 2 else float("nan")
                lo, hi = fisher_ci(value, n)
                rows.append({"group": name, "quantity": q, "score": t, "r": value, "lo": lo, "hi": hi, "n": n})
    return pd.DataFrame(rows, columns=["group", "quantity", "score", "r", "lo", "hi", "n"])


@dataclass(frozen=True)
class Claim:
    """One of Med-CoDE's correlation claims (§5): the pairs it is about and the range of r it asserts."""

    text: str
    says: str
    pairs: tuple[tuple[str, str], ...]  # (quantity, score)
    low: float  # r the claim asserts: low < r (< high)
    high: float = 1.0


PAPER_CLAIMS = (
    Claim("strong positive correlation between accuracy and 'None' disagreement probability", "strong positive",
          (("p_none", "llm_accuracy"), ("p_none", "exact_match")), 0.5),
    Claim("positive correlation between METEOR scores and a 'Low' disagreement probability", "positive",
          (("p_low", "meteor"),), 0.0),
    Claim("low positive correlation between LLM-assisted accuracy and both 'Moderate' and 'High' disagreement "
          "probabilities", "low positive", (("p_moderate", "llm_accuracy"), ("p_high", "llm_accuracy")), 0.0, 0.3),
)
CLAIM_RANGES = "strong positive: r ≥ 0.5; positive: r > 0; low positive: 0 < r < 0.3"


def verdict(claim: Claim, r: float, lo: float, hi: float, n: int) -> str:
    """Whether a correlation bears the claim out: 'consistent' when its whole 95 % interval lies in the claimed
    range, 'contradicted' when the whole interval lies outside it, else 'undecided'; 'too few items' below
    MIN_CORRELATION_N pairs or when r is undefined."""
    if n < MIN_CORRELATION_N or not math.isfinite(r) or not (math.isfinite(lo) and math.isfinite(hi)):
        return "too few items"
    if lo > claim.low and hi < claim.high:
        return "consistent"
    if hi <= claim.low or lo >= claim.high:
        return "contradicted"
    return "undecided"


def check_claims(table: pd.DataFrame, group: str = "(all models)") -> pd.DataFrame:
    """The paper's claims beside the correlations of ``table`` (``correlations``' output) in ``group``: one row per
    claimed pair with r, its interval, n and the verdict."""
    index = table[table.group == group].set_index(["quantity", "score"])
    rows = []
    for claim in PAPER_CLAIMS:
        for q, t in claim.pairs:
            if (q, t) in index.index:
                r, lo, hi, n = (index.loc[(q, t), c] for c in ("r", "lo", "hi", "n"))
            else:
                r, lo, hi, n = float("nan"), float("nan"), float("nan"), 0
            rows.append({"claim": claim.text, "says": claim.says, "quantity": q, "score": t, "r": float(r),
                         "lo": float(lo), "hi": float(hi), "n": int(n),
                         "verdict": verdict(claim, float(r), float(lo), float(hi), int(n))})
    return pd.DataFrame(rows)
