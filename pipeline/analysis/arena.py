"""Pairwise preferences into rankings: Bradley–Terry as Chatbot Arena fits it (issue 28, MedArena, Pariksha).

- ``bradley_terry``: strengths from aggregated comparisons (rows of model_a, model_b, outcome, n and optional
  style bins) by scikit-learn's logistic regression on ±1 design rows, as FastChat's ``elo_analysis`` does: a win
  is two rows of its winner, a tie (or "both bad") one row each way; strengths on the Elo scale (400 per factor of
  10 in the odds, 1000 the mean). Bootstrap 95 % intervals resample the counts (a multinomial draw of the
  comparisons, the same as resampling the votes). With ``style`` columns the style-controlled fit (FastChat's style
  control): each style feature's normalised difference (a − b) / (a + b + 1), scaled, is a covariate, so a
  model's strength is what remains once length and markdown are accounted for.
- ``win_rates``: the pairwise win-rate matrix (ties half).
- ``votes_to_separate``: how many more direct comparisons would make two models' difference significant.
- ``rank_agreement``: doctors' and judge's rankings side by side (Kendall's τ, scipy) and their agreement on
  shared comparisons (percentage, Cohen's κ over a / b / tie, scikit-learn) — Pariksha's analysis.

Pure functions on frames; the rows come from ``pipeline.read.arena`` (SQL, grouped).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline import style

SCALE, BASE, INIT = 400.0, 10.0, 1000.0  # Chatbot Arena's Elo scale
OUTCOMES = ("a", "b", "tie")  # a comparison's outcome for (model_a, model_b); 'both_bad' is read as 'tie'
STYLE_FEATURES = style.FEATURES  # FastChat's style elements (characters for tokens): pipeline.style owns them
Z95 = 1.959963984540054
Z80 = 0.8416212335729143  # power 80 %
LEADERBOARD_COLUMNS = ["model", "strength", "lower", "upper", "votes", "rank"]
SOLVER = "newton-cholesky"  # a few Newton steps on a few hundred grouped rows: milliseconds per fit
BATCH = 10  # bootstrap replicates fitted together (``_fit_batch``): scikit-learn's fixed cost of a fit (checks,
# set-up: about two thirds of a refit of 276 pairs) paid once per 10; more makes the sparse Newton system the cost


@dataclass(frozen=True)
class BTFit:
    """A leaderboard: ``table`` (model, strength, lower, upper, votes, rank; best first), the style covariates'
    coefficients and intervals (empty without style control), and the bootstrap's strengths (rounds × models)."""

    table: pd.DataFrame
    style: pd.DataFrame
    boot: pd.DataFrame


def _groups(rows: pd.DataFrame, models: list[str], style: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(X, counts): one design row per pair (and style bin) — +log 10 for model_a, −log 10 for model_b, the style
    covariates — and its comparisons won by a, by b and tied (columns 0, 1, 2)."""
    keys = ["model_a", "model_b", *style]
    cells = rows.pivot_table(index=keys, columns="outcome", values="n", aggfunc="sum", fill_value=0)
    counts = cells.reindex(columns=list(OUTCOMES), fill_value=0).to_numpy(dtype=float)
    groups = cells.index.to_frame(index=False)
    index = {m: i for i, m in enumerate(models)}
    x = np.zeros((len(groups), len(models) + len(style)))
    x[np.arange(len(groups)), groups.model_a.map(index).to_numpy()] = math.log(BASE)
    x[np.arange(len(groups)), groups.model_b.map(index).to_numpy()] = -math.log(BASE)
    for j, feature in enumerate(style):
        x[:, len(models) + j] = groups[feature].to_numpy(dtype=float)
    return x, counts


def _weights(counts: np.ndarray) -> np.ndarray:
    """Row weights of ``_design``'s rows: a win counts twice for its winner, a tie once each way (Chatbot Arena)."""
    return np.concatenate([2 * counts[:, 0] + counts[:, 2], 2 * counts[:, 1] + counts[:, 2]])


def _design(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): each group's row twice, once as "model_a won" (weight ``_weights``' first half) and once as "model_b
    won" (its second half). Rows of weight 0 stay, so the regression sees both classes even when every vote went
    one way."""
    return np.vstack([x, x]), np.concatenate([np.ones(len(x)), np.zeros(len(x))])


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, warm: np.ndarray | None = None) -> np.ndarray:
    """The logistic regression's coefficients (the first model's fixed at 0), warm-started from ``warm``."""
    import sklearn
    from sklearn.linear_model import LogisticRegression

    x = x[:, 1:]  # the first model's strength is fixed at 0: BT is identified up to a constant (Newton needs it)
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6, max_iter=1000, solver=SOLVER,
                            warm_start=warm is not None)
    if warm is not None:
        lr.coef_ = warm[1:].reshape(1, -1).copy()
    # checks skipped: the design is ours and finite (a hundred refits of a few hundred rows are mostly checks)
    with warnings.catch_warnings(), sklearn.config_context(assume_finite=True, skip_parameter_validation=True):
        warnings.simplefilter("ignore")  # separable bootstrap draws: the coefficients stay finite at max_iter
        lr.fit(x, y, sample_weight=w)
    return np.concatenate([[0.0], lr.coef_[0]])


def _fit_batch(x: np.ndarray, y: np.ndarray, weights: list[np.ndarray], warm: np.ndarray) -> np.ndarray:
    """``_fit`` of every weight vector of ``weights`` (bootstrap replicates of one design), warm-started from
    ``warm``, as one scikit-learn fit of the block-diagonal design (a sparse matrix): the replicates share no
    coefficient and the regression is unpenalised, so the joint likelihood is their product and its maximum is each
    replicate's own (the same coefficients as fitting them one by one, to rounding). Rows: replicates."""
    import scipy.sparse as sp
    import sklearn
    from sklearn.linear_model import LogisticRegression

    block = sp.csr_matrix(x[:, 1:])
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6, max_iter=1000, solver=SOLVER, warm_start=True)
    lr.coef_ = np.tile(warm[1:], len(weights)).reshape(1, -1)
    with warnings.catch_warnings(), sklearn.config_context(assume_finite=True, skip_parameter_validation=True):
        warnings.simplefilter("ignore")
        lr.fit(sp.block_diag([block] * len(weights), format="csr"), np.tile(y, len(weights)),
               sample_weight=np.concatenate(weights))
    coef = lr.coef_[0].reshape(len(weights), -1)
    return np.hstack([np.zeros((len(weights), 1)), coef])


def standardise_style(rows: pd.DataFrame, style: tuple[str, ...]) -> pd.DataFrame:
    """Each style column divided by its count-weighted root mean square, so coefficients are per typical
    difference. Not centred, unlike FastChat's (where model_a is the random left answer and the mean difference
    is about 0): here model_a is the first of the two ids, and a centred difference would add a constant to every
    comparison — a bonus of model_a over model_b that the models' strengths would absorb."""
    out = rows.copy()
    w = rows.n.to_numpy(dtype=float)
    for feature in style:
        v = rows[feature].to_numpy(dtype=float)
        rms = math.sqrt(np.average(v * v, weights=w))
        out[feature] = v / rms if rms > 0 else 0.0
    return out


def bradley_terry(rows: pd.DataFrame, *, style: tuple[str, ...] = (), rounds: int = 100, seed: int = 0) -> BTFit:
    """Bradley–Terry strengths with bootstrap 95 % intervals from aggregated comparisons.

    ``rows``: model_a, model_b, outcome ('a', 'b', 'tie'; 'both_bad' counts as a tie), n (how many), and for a
    style-controlled fit the ``style`` columns (each comparison's normalised style difference, binned). Strengths
    are centred on 1000; ``rounds`` = 0 gives no intervals (NaN).
    """
    rows = rows[rows.n > 0].assign(outcome=rows.outcome.replace({"both_bad": "tie"}))
    models = sorted(set(rows.model_a) | set(rows.model_b))
    if len(models) < 2:
        return BTFit(pd.DataFrame(columns=LEADERBOARD_COLUMNS), pd.DataFrame(columns=["feature", "coef", "lower",
                                                                                   "upper"]),
                     pd.DataFrame(columns=models))
    if style:
        rows = standardise_style(rows, style)
    groups, counts = _groups(rows, models, style)
    x, y = _design(groups)
    p = len(models)

    def scaled(coef: np.ndarray) -> np.ndarray:
        s = SCALE * coef[:p]
        return np.concatenate([s - s.mean() + INIT, coef[p:]])

    point = _fit(x, y, _weights(counts))
    boot = np.full((rounds, p + len(style)), np.nan)
    rng = np.random.default_rng(seed)
    total = int(counts.sum())
    share = counts.ravel() / total
    draws = [_weights(rng.multinomial(total, share).reshape(counts.shape).astype(float)) for _ in range(rounds)]
    for start in range(0, rounds, BATCH):  # a bootstrap of the comparisons = a multinomial draw of the grouped counts
        for r, coef in enumerate(_fit_batch(x, y, draws[start:start + BATCH], point), start):
            boot[r] = scaled(coef)
    est = scaled(point)
    lower, upper = (np.nanquantile(boot, q, axis=0) if rounds else np.full(len(est), np.nan) for q in (0.025, 0.975))
    votes = pd.concat([rows[["model_a", "n"]].rename(columns={"model_a": "model"}),
                       rows[["model_b", "n"]].rename(columns={"model_b": "model"})]).groupby("model").n.sum()
    table = pd.DataFrame({"model": models, "strength": est[:p], "lower": lower[:p], "upper": upper[:p],
                          "votes": votes.reindex(models).fillna(0).astype(int).to_numpy()})
    order = np.lexsort((table.model.to_numpy(), -np.round(table.strength.to_numpy(), 6)))  # equal: by name
    table = table.iloc[order].reset_index(drop=True)
    table["rank"] = np.arange(1, p + 1)
    style_table = pd.DataFrame({"feature": list(style), "coef": est[p:], "lower": lower[p:], "upper": upper[p:]})
    return BTFit(table, style_table, pd.DataFrame(boot[:, :p], columns=models))


def elo_points(log_odds: float) -> float:
    """A natural log-odds coefficient (a style covariate's) on the leaderboard's Elo scale."""
    return log_odds * SCALE / math.log(BASE)


def win_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Row model's win rate against the column model (ties half), over their direct comparisons; NaN if none."""
    rows = rows.assign(outcome=rows.outcome.replace({"both_bad": "tie"}))
    score = rows.n * rows.outcome.map({"a": 1.0, "b": 0.0, "tie": 0.5})
    both = pd.concat([
        pd.DataFrame({"row": rows.model_a, "col": rows.model_b, "won": score, "n": rows.n}),
        pd.DataFrame({"row": rows.model_b, "col": rows.model_a, "won": rows.n - score, "n": rows.n})])
    sums = both.groupby(["row", "col"])[["won", "n"]].sum()
    models = sorted(set(both.row))
    return (sums.won / sums.n).unstack("col").reindex(index=models, columns=models)


def votes_to_separate(diff: float, direct: int) -> int | None:
    """More direct comparisons of two models (Elo-scale strength difference ``diff``, ``direct`` so far) before a
    95 % test of the difference has 80 % power: n = (z₀.₉₇₅ + z₀.₈)² / (d² p (1 − p)), d the difference in
    log-odds and p the win probability it implies (the Wald test of a logistic coefficient). None when the models
    are tied (no finite number)."""
    d = abs(diff) * math.log(BASE) / SCALE
    if not math.isfinite(d) or d < 1e-9:
        return None
    p = 1.0 / (1.0 + math.exp(-d))
    needed = (Z95 + Z80) ** 2 / (d * d * p * (1 - p))
    return max(0, math.ceil(needed - direct))


def adjacent_pairs(table: pd.DataFrame, pair_counts: dict[tuple[str, str], int]) -> pd.DataFrame:
    """Adjacent models of a leaderboard (best first) with whether their intervals overlap, their direct
    comparisons and the votes that would separate them; ``priority`` orders the pairs whose comparison would
    reduce the ranking's uncertainty most (overlapping, close, few comparisons) first."""
    out = []
    for hi, lo in zip(table.itertuples(), table.iloc[1:].itertuples(), strict=False):
        key = tuple(sorted((hi.model, lo.model)))
        direct = pair_counts.get(key, 0)
        overlap = max(0.0, min(hi.upper, lo.upper) - max(hi.lower, lo.lower)) if pd.notna(hi.upper) else float("inf")
        width = max(hi.upper - hi.lower, lo.upper - lo.lower, 1e-9) if pd.notna(hi.upper) else 1.0
        out.append({"higher": hi.model, "lower": lo.model, "diff": hi.strength - lo.strength,
                    "overlap": overlap > 0, "direct": direct,
                    "more_votes": votes_to_separate(hi.strength - lo.strength, direct),
                    "priority": (min(overlap / width, 1.0) + 0.01) / (1 + direct)})
    return pd.DataFrame(out, columns=["higher", "lower", "diff", "overlap", "direct", "more_votes", "priority"])


def rank_agreement(doctors: pd.DataFrame, judge: pd.DataFrame, shared: pd.DataFrame) -> dict:
    """Doctors' and the judge's leaderboards side by side and their agreement on the shared comparisons.

    ``doctors`` / ``judge``: leaderboards (model, strength, rank); ``shared``: doctor, judge (outcomes 'a', 'b',
    'tie') and n for the comparisons both made. Returns ``ranks`` (model, doctors_rank, judge_rank), ``tau``
    (Kendall's τ of the strengths over the models both ranked), ``agreement`` (share of shared comparisons with
    the same outcome), ``kappa`` (Cohen's κ over a / b / tie) and ``shared`` (how many).
    """
    from scipy.stats import kendalltau
    from sklearn.metrics import cohen_kappa_score

    ranks = doctors[["model", "strength", "rank"]].merge(judge[["model", "strength", "rank"]], on="model",
                                                          how="outer", suffixes=("_doctors", "_judge"))
    both = ranks.dropna()
    tau = float(kendalltau(both.strength_doctors, both.strength_judge).statistic) if len(both) > 1 else float("nan")
    n = int(shared.n.sum()) if len(shared) else 0
    agreement = kappa = float("nan")
    if n:
        d, j = shared.doctor.replace({"both_bad": "tie"}), shared.judge.replace({"both_bad": "tie"})
        agreement = float(shared.n[d == j].sum() / n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kappa = float(cohen_kappa_score(d, j, labels=list(OUTCOMES), sample_weight=shared.n))
    return {"ranks": ranks.rename(columns={"rank_doctors": "doctors_rank", "rank_judge": "judge_rank"}),
            "tau": tau, "agreement": agreement, "kappa": kappa, "shared": n}
