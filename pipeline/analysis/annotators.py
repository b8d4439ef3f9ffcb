"""Voter quality in the doctors' arena: who votes how, and who to leave out (issue 36, in the spirit of FastChat's
``elo_analysis.outlier_detect`` and ``limit_user_votes``).

Per annotator, from their current votes: ``votes``; ``median_seconds`` from the pair shown to the vote (votes with
both times); ``left_share``, the share of their decided votes (not tie / both bad) with a known side that went to
the answer shown on the left (the page draws the side at random: 0.5 expected); ``consensus_agreement``, the share
of their decided votes that chose the model the others' Bradley–Terry fit (fitted without them: a held-out
prediction) rates higher, beside ``consensus_expected``, the share that fit expects of a voter who votes as the
others do (the mean of max(p, 1 − p)); and ``judge_agreement``, the share of their votes with the same outcome as
the pairwise judge on the same two texts (NaN without such comparisons).

**Flags** (``reason`` lists every rule met; tests are binomial, scipy, Bonferroni-corrected over the annotators at
``ALPHA``, and need ``MIN_VOTES`` votes for the rule):
- *too fast*: median seconds below ``FAST_SECONDS`` — two medical answers cannot be read in that time;
- *one side*: the left share differs from 0.5 (two-sided test);
- *against the consensus*: fewer agreements with the held-out fit than it expects (one-sided test) — a voter at
  random or by position agrees about half the time where careful voters agree more.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipeline.analysis.arena import BASE, SCALE, bradley_terry

ANNOTATOR_COLUMNS = ["annotator", "votes", "median_seconds", "left_share", "consensus_agreement",
                     "consensus_expected", "judge_agreement", "flagged", "reason"]
FAST_SECONDS = 5.0  # a median below this is too fast to have read two answers
ALPHA = 0.05  # family-wise error of the flags over all annotators (Bonferroni)
MIN_VOTES = 10  # votes a rule needs before it can flag


def _held_out(votes: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per annotator, the others' point BT strengths (Elo scale) fitted without their votes."""
    grouped = votes.groupby(["annotator", "model_a", "model_b", "outcome"]).size().rename("n").reset_index()
    total = grouped.groupby(["model_a", "model_b", "outcome"]).n.sum()
    out = {}
    for annotator, own in grouped.groupby("annotator"):
        others = total.sub(own.set_index(["model_a", "model_b", "outcome"]).n, fill_value=0)
        others = others[others > 0].rename("n").reset_index()
        if others.empty:
            out[annotator] = {}
            continue
        table = bradley_terry(others, rounds=0).table
        out[annotator] = dict(zip(table.model, table.strength, strict=True))
    return out


def annotator_quality(votes: pd.DataFrame) -> pd.DataFrame:
    """The voter-quality table (``ANNOTATOR_COLUMNS``), flagged first then by votes.

    ``votes``: one row per current vote — annotator, model_a, model_b, outcome ('a', 'b', 'tie'; both bad is a
    tie), left ('a', 'b' or None: which of model_a / model_b was shown on the left), seconds (NaN when unknown) and
    judge_outcome (the pairwise judge's outcome on the same two texts, None when it has none).
    """
    from scipy.stats import binomtest

    if votes.empty:
        return pd.DataFrame(columns=ANNOTATOR_COLUMNS)
    strengths = _held_out(votes)
    n_annotators = votes.annotator.nunique()
    level = ALPHA / n_annotators
    rows = []
    for annotator, own in votes.groupby("annotator", sort=True):
        decided = own[own.outcome.isin(["a", "b"])]
        sided = decided[decided.left.isin(["a", "b"])]
        left_wins = int((sided.outcome == sided.left).sum())
        s = strengths[annotator]
        known = decided[decided.model_a.isin(list(s)) & decided.model_b.isin(list(s))]
        diff = known.model_a.map(s).to_numpy(dtype=float) - known.model_b.map(s).to_numpy(dtype=float)
        p_a = 1.0 / (1.0 + BASE ** (-diff / SCALE))
        agree = int(((diff > 0) & (known.outcome == "a")).sum() + ((diff < 0) & (known.outcome == "b")).sum()
                    + 0.5 * (diff == 0).sum())
        expected = float(np.maximum(p_a, 1 - p_a).mean()) if len(known) else math.nan
        judged = own[own.judge_outcome.notna()]
        seconds = own.seconds.dropna()
        reasons = []
        if len(seconds) >= MIN_VOTES and seconds.median() < FAST_SECONDS:
            reasons.append(f"too fast: median {seconds.median():.1f} s per vote (< {FAST_SECONDS:g} s)")
        if len(sided) >= MIN_VOTES and binomtest(left_wins, len(sided), 0.5).pvalue < level:
            reasons.append(f"one side: the left answer won {left_wins} of {len(sided)} decided votes")
        if len(known) >= MIN_VOTES and binomtest(agree, len(known), expected, alternative="less").pvalue < level:
            reasons.append(f"against the consensus: agrees with the others' fit on {agree} of {len(known)} decided "
                           f"votes where {expected:.0%} is expected")
        rows.append({"annotator": annotator, "votes": len(own),
                     "median_seconds": float(seconds.median()) if len(seconds) else math.nan,
                     "left_share": left_wins / len(sided) if len(sided) else math.nan,
                     "consensus_agreement": agree / len(known) if len(known) else math.nan,
                     "consensus_expected": expected,
                     "judge_agreement": float((judged.outcome == judged.judge_outcome).mean()) if len(judged)
                     else math.nan,
                     "flagged": bool(reasons), "reason": "; ".join(reasons)})
    table = pd.DataFrame(rows, columns=ANNOTATOR_COLUMNS)
    return table.sort_values(["flagged", "votes", "annotator"], ascending=[False, False, True]).reset_index(drop=True)
