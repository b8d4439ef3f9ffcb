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

from pipeline.analysis.arena import BASE, OUTCOMES, SCALE, held_out_strengths

ANNOTATOR_COLUMNS = ["annotator", "votes", "median_seconds", "left_share", "consensus_agreement",
                     "consensus_expected", "judge_agreement", "flagged", "reason"]
FAST_SECONDS = 5.0  # a median below this is too fast to have read two answers
ALPHA = 0.05  # family-wise error of the flags over all annotators (Bonferroni)
MIN_VOTES = 10  # votes a rule needs before it can flag


def annotator_quality(votes: pd.DataFrame) -> pd.DataFrame:
    """The voter-quality table (``ANNOTATOR_COLUMNS``), flagged first then by votes.

    ``votes``: one row per current vote — annotator, model_a, model_b, outcome ('a', 'b', 'tie'; both bad is a
    tie), left ('a', 'b' or None: which of model_a / model_b was shown on the left), seconds (NaN when unknown) and
    judge_outcome (the pairwise judge's outcome on the same two texts, None when it has none).
    """
    from scipy.stats import binomtest

    if votes.empty:
        return pd.DataFrame(columns=ANNOTATOR_COLUMNS)
    # one code per pair and one per annotator; every column an array (a million votes, hundreds of annotators)
    pair_codes, pairs = pd.MultiIndex.from_arrays([votes.model_a, votes.model_b]).factorize()
    pairs = pairs.to_frame(index=False, name=["model_a", "model_b"])
    who_codes, names = pd.factorize(votes.annotator, sort=True)
    outcome = pd.Categorical(votes.outcome, categories=list(OUTCOMES)).codes  # 0 a, 1 b, 2 tie
    left = pd.Categorical(votes.left, categories=["a", "b"]).codes  # -1 unknown
    seconds = votes.seconds.to_numpy(dtype=float)
    judged = votes.judge_outcome.notna().to_numpy()
    same_as_judge = (votes.outcome == votes.judge_outcome).to_numpy()
    cells = np.zeros((len(names), len(pairs), 3))
    np.add.at(cells, (who_codes, pair_codes, outcome), 1.0)
    strengths = held_out_strengths(pairs, cells.sum(axis=0), list(cells))
    models = sorted(set(pairs.model_a) | set(pairs.model_b))
    index = {m: i for i, m in enumerate(models)}
    pair_a, pair_b = pairs.model_a.map(index).to_numpy(), pairs.model_b.map(index).to_numpy()
    level = ALPHA / len(names)
    rows = []
    for k, positions in enumerate(pd.Series(np.arange(len(votes))).groupby(who_codes).indices.values()):
        own_outcome, own_left, own_pairs = outcome[positions], left[positions], pair_codes[positions]
        decided = own_outcome < 2
        sided = decided & (own_left >= 0)
        left_wins = int((own_outcome[sided] == own_left[sided]).sum())
        diff = strengths[k][pair_a[own_pairs]] - strengths[k][pair_b[own_pairs]]
        known = decided & ~np.isnan(diff)
        p_a = 1.0 / (1.0 + BASE ** (-diff[known] / SCALE))
        chose_a = own_outcome[known] == 0
        agree = int(((diff[known] > 0) & chose_a).sum() + ((diff[known] < 0) & ~chose_a).sum())  # equal: no
        n_known, n_sided = int(known.sum()), int(sided.sum())
        expected = float(np.maximum(p_a, 1 - p_a).mean()) if n_known else math.nan
        timed = seconds[positions][~np.isnan(seconds[positions])]
        median = float(np.median(timed)) if len(timed) else math.nan
        with_judge = judged[positions]
        reasons = []
        if len(timed) >= MIN_VOTES and median < FAST_SECONDS:
            reasons.append(f"too fast: median {median:.1f} s per vote (< {FAST_SECONDS:g} s)")
        if n_sided >= MIN_VOTES and binomtest(left_wins, n_sided, 0.5).pvalue < level:
            reasons.append(f"one side: the left answer won {left_wins} of {n_sided} decided votes")
        if n_known >= MIN_VOTES and binomtest(agree, n_known, expected, alternative="less").pvalue < level:
            reasons.append(f"against the consensus: agrees with the others' fit on {agree} of {n_known} decided "
                           f"votes where {expected:.0%} is expected")
        rows.append({"annotator": names[k], "votes": len(positions), "median_seconds": median,
                     "left_share": left_wins / n_sided if n_sided else math.nan,
                     "consensus_agreement": agree / n_known if n_known else math.nan,
                     "consensus_expected": expected,
                     "judge_agreement": float(same_as_judge[positions][with_judge].mean()) if with_judge.any()
                     else math.nan,
                     "flagged": bool(reasons), "reason": "; ".join(reasons)})
    table = pd.DataFrame(rows, columns=ANNOTATOR_COLUMNS)
    return table.sort_values(["flagged", "votes", "annotator"], ascending=[False, False, True]).reset_index(drop=True)
