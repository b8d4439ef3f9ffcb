"""Pairwise preferences into rankings: Bradley–Terry as Chatbot Arena fits it (issue 28, MedArena, Pariksha).

- ``bradley_terry``: strengths from aggregated comparisons (rows of model_a, model_b, outcome, n and optional
  style bins) by scikit-learn's logistic regression on ±1 design rows, as FastChat's ``elo_analysis`` does: a win
  is two rows of its winner, a tie (or "both bad") one row each way; strengths on the Elo scale (400 per factor of
  10 in the odds, 1000 the mean). Bootstrap 95 % intervals resample the counts (a multinomial draw of the
  comparisons, the same as resampling the votes). With ``style`` columns the style-controlled fit (FastChat's style
  control): each style feature's normalised difference (a − b) / (a + b + 1), scaled, is a covariate, so a
  model's strength is what remains once length and markdown are accounted for; that fit is regularised as FastChat's
  contextual BT (``STYLE_REG``). Strengths can be anchored to a model (FastChat's ``scale_and_offset``); fits that
  did not converge, and models that never lost or never won, are reported in ``BTFit.warnings``.
- ``held_out_strengths``: the many refits without one annotator each (``pipeline.analysis.annotators``).
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
LEADERBOARD_COLUMNS = ["model", "strength", "lower", "upper", "votes", "rank", "note"]
STYLE_REG = 0.5  # FastChat's ``fit_contextual_bt`` default: an L2 penalty reg / 2 · ‖θ‖² on the per-vote log loss
MAX_ITER = 1000  # Newton steps of one fit; a fit stopped here is reported (``BTFit.warnings``), never silenced
SOLVER = "newton-cholesky"  # a few Newton steps on a few hundred grouped rows: milliseconds per fit
BATCH = 10  # bootstrap replicates fitted together (``_fit_batch``): scikit-learn's fixed cost of a fit (checks,
# set-up: about two thirds of a refit of 276 pairs) paid once per 10; more makes the sparse Newton system the cost


@dataclass(frozen=True)
class BTFit:
    """A leaderboard: ``table`` (model, strength, lower, upper, votes, rank, note; best first), the style
    covariates' coefficients and intervals (empty without style control), the bootstrap's strengths (rounds ×
    models), the anchor model (None: strengths centred on 1000) and ``warnings``: what the fit reported (a fit that
    did not converge, counted; a model with no finite strength) — the page and the CLI say them."""

    table: pd.DataFrame
    style: pd.DataFrame
    boot: pd.DataFrame
    anchor: str | None = None
    warnings: tuple[str, ...] = ()


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


def _solver(c: float, warm_start: bool) -> object:
    """scikit-learn's logistic regression for a BT fit: unpenalised (``c`` = inf) or with FastChat's L2 penalty."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(fit_intercept=False, C=c, tol=1e-6, max_iter=MAX_ITER, solver=SOLVER,
                              warm_start=warm_start)


def _c(reg: float) -> float:
    """scikit-learn's C for FastChat's ``reg``: its loss is reg / 2 · ‖θ‖² + the per-vote log loss (a tie half a
    win each way); ours counts every vote twice (two rows, weights 2 / 0 or 1 / 1) and scikit-learn minimises
    ½‖θ‖² + C · loss, so C = 1 / (2 reg). ``reg`` 0: no penalty."""
    return np.inf if reg <= 0 else 1.0 / (2.0 * reg)


def _run(lr: object, x: object, y: np.ndarray, w: np.ndarray) -> str:
    """Fit ``lr``; its first convergence warning's text ('' when none): kept, not silenced, for the page."""
    import sklearn
    from sklearn.exceptions import ConvergenceWarning

    # checks skipped: the design is ours and finite (a hundred refits of a few hundred rows are mostly checks)
    with warnings.catch_warnings(record=True) as caught, \
            sklearn.config_context(assume_finite=True, skip_parameter_validation=True):
        warnings.simplefilter("always", ConvergenceWarning)
        lr.fit(x, y, sample_weight=w)
    said = ""
    for w_ in caught:
        if issubclass(w_.category, ConvergenceWarning):
            said = said or " ".join(str(w_.message).split())
        else:  # anything else goes on to the caller's filters
            warnings.warn_explicit(w_.message, w_.category, w_.filename, w_.lineno)
    return said


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, reg: float = 0.0) -> tuple[np.ndarray, str]:
    """(the logistic regression's coefficients, its convergence warning or ''). Unpenalised, the first model's
    strength is fixed at 0 (BT is identified up to a constant; Newton needs it); penalised, every coefficient is
    fitted and the penalty identifies them (their sum is 0 at the optimum), as FastChat's contextual BT."""
    fixed = reg <= 0
    lr = _solver(_c(reg), warm_start=False)
    failed = _run(lr, x[:, 1:] if fixed else x, y, w)
    return (np.concatenate([[0.0], lr.coef_[0]]) if fixed else lr.coef_[0].copy()), failed


def _fit_batch(x: np.ndarray, y: np.ndarray, weights: list[np.ndarray], warm: np.ndarray,
               reg: float = 0.0) -> tuple[np.ndarray, str]:
    """``_fit`` of every weight vector of ``weights`` (bootstrap replicates of one design), warm-started from
    ``warm``, as one scikit-learn fit of the block-diagonal design (a sparse matrix): the replicates share no
    coefficient and the penalty (if any) is a sum over coefficients, so the joint objective is the sum of the
    replicates' and its minimum is each replicate's own (the same coefficients as fitting them one by one, to
    rounding). (Rows: replicates; the joint fit's convergence warning or ''.)"""
    import scipy.sparse as sp

    fixed = reg <= 0
    block = sp.csr_matrix(x[:, 1:] if fixed else x)
    lr = _solver(_c(reg), warm_start=True)
    lr.coef_ = np.tile(warm[1:] if fixed else warm, len(weights)).reshape(1, -1)
    failed = _run(lr, sp.block_diag([block] * len(weights), format="csr"), np.tile(y, len(weights)),
                  np.concatenate(weights))
    coef = lr.coef_[0].reshape(len(weights), -1)
    return (np.hstack([np.zeros((len(weights), 1)), coef]) if fixed else coef), failed


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


def _unbounded(x: np.ndarray, counts: np.ndarray, models: list[str]) -> dict[str, str]:
    """Models whose maximum-likelihood strength is infinite: one that never lost nor tied (only wins) or never won
    nor tied (only losses) — its fitted value is wherever the solver stopped. ``x``, ``counts``: ``_groups``'."""
    first, second = (x[:, :len(models)] > 0).astype(float), (x[:, :len(models)] < 0).astype(float)
    won = first.T @ counts[:, 0] + second.T @ counts[:, 1]
    lost = first.T @ counts[:, 1] + second.T @ counts[:, 0]
    tied = (first + second).T @ counts[:, 2]
    out = {}
    for k, m in enumerate(models):
        if tied[k] == 0 and (lost[k] == 0 or won[k] == 0):
            out[m] = (f"never {'lost' if lost[k] == 0 else 'won'}: no finite strength "
                      f"({'a lower' if lost[k] == 0 else 'an upper'} bound), no interval")
    return out


def bradley_terry(rows: pd.DataFrame, *, style: tuple[str, ...] = (), rounds: int = 100, seed: int = 0,
                  anchor: str | None = None, reg: float | None = None) -> BTFit:
    """Bradley–Terry strengths with bootstrap 95 % intervals from aggregated comparisons.

    ``rows``: model_a, model_b, outcome ('a', 'b', 'tie'; 'both_bad' counts as a tie), n (how many), and for a
    style-controlled fit the ``style`` columns (each comparison's normalised style difference, binned). Strengths
    are on the Elo scale with ``anchor`` at 1000 (FastChat's ``scale_and_offset``; its interval is then 0 wide and
    the others' are relative to it), or centred on 1000 without one; ``rounds`` = 0 gives no intervals (NaN).
    ``reg``: FastChat's L2 penalty of ``fit_contextual_bt`` (default: ``STYLE_REG`` with ``style``, else none).
    Unpenalised, a model that never lost (or never won) has no finite strength: its note says so and it gets no
    interval. ``warnings``: those models, and the fits that did not converge (counted).
    """
    rows = rows[rows.n > 0].assign(outcome=rows.outcome.replace({"both_bad": "tie"}))
    models = sorted(set(rows.model_a) | set(rows.model_b))
    if anchor is not None and anchor not in models:
        raise ValueError(f"anchor model {anchor!r} has no comparisons here")
    if len(models) < 2:
        return BTFit(pd.DataFrame(columns=LEADERBOARD_COLUMNS), pd.DataFrame(columns=["feature", "coef", "lower",
                                                                                   "upper"]),
                     pd.DataFrame(columns=models), anchor)
    reg = (STYLE_REG if style else 0.0) if reg is None else reg
    if style:
        rows = standardise_style(rows, style)
    groups, counts = _groups(rows, models, style)
    x, y = _design(groups)
    p = len(models)
    origin = models.index(anchor) if anchor is not None else None
    unbounded = _unbounded(groups, counts, models) if reg <= 0 else {}  # a penalised fit stays finite
    bounded = [k for k, m in enumerate(models) if m not in unbounded] or list(range(p))

    def scaled(coef: np.ndarray) -> np.ndarray:
        """Elo scale: the anchor at 1000, else the mean of the models with a finite strength at 1000."""
        s = SCALE * coef[..., :p]
        zero = s[..., [origin]] if origin is not None else s[..., bounded].mean(axis=-1, keepdims=True)
        return np.concatenate([s - zero + INIT, coef[..., p:]], axis=-1)

    point, failed = _fit(x, y, _weights(counts), reg)
    boot = np.full((rounds, p + len(style)), np.nan)
    rng = np.random.default_rng(seed)
    total = int(counts.sum())
    share = counts.ravel() / total
    draws = [_weights(rng.multinomial(total, share).reshape(counts.shape).astype(float)) for _ in range(rounds)]
    batch_warnings = []
    for start in range(0, rounds, BATCH):  # a bootstrap of the comparisons = a multinomial draw of the grouped counts
        coefs, said = _fit_batch(x, y, draws[start:start + BATCH], point, reg)
        boot[start:start + len(coefs)] = scaled(coefs)
        batch_warnings += [said] if said else []
    est = scaled(point)
    lower, upper = (np.nanquantile(boot, q, axis=0) if rounds else np.full(len(est), np.nan) for q in (0.025, 0.975))
    votes = pd.concat([rows[["model_a", "n"]].rename(columns={"model_a": "model"}),
                       rows[["model_b", "n"]].rename(columns={"model_b": "model"})]).groupby("model").n.sum()
    table = pd.DataFrame({"model": models, "strength": est[:p], "lower": lower[:p], "upper": upper[:p],
                          "votes": votes.reindex(models).fillna(0).astype(int).to_numpy(),
                          "note": [unbounded.get(m, "anchor (fixed at 1000)" if m == anchor else "") for m in models]})
    table.loc[table.model.isin(list(unbounded)), ["lower", "upper"]] = np.nan
    order = np.lexsort((table.model.to_numpy(), -np.round(table.strength.to_numpy(), 6)))  # equal: by name
    table = table.iloc[order].reset_index(drop=True)
    table.insert(5, "rank", np.arange(1, p + 1))
    style_table = pd.DataFrame({"feature": list(style), "coef": est[p:], "lower": lower[p:], "upper": upper[p:]})
    said = [f"{m}: {note}" for m, note in sorted(unbounded.items())]
    if failed:
        said.append(f"the point fit did not converge (at most {MAX_ITER} iterations): its strengths are where it "
                    f"stopped — scikit-learn: {failed}")
    if batch_warnings:
        said.append(f"{len(batch_warnings)} of {math.ceil(rounds / BATCH)} bootstrap refit batches ({BATCH} redraws "
                    f"each) did not converge (at most {MAX_ITER} iterations) — scikit-learn: {batch_warnings[0]}")
    return BTFit(table, style_table, pd.DataFrame(boot[:, :p], columns=models), anchor, tuple(said))


def held_out_strengths(pairs: pd.DataFrame, total: np.ndarray, own: list[np.ndarray]) -> list[np.ndarray]:
    """Per entry of ``own``, the unpenalised point fit's Elo-scale strengths (mean 1000) of the comparisons ``total``
    less ``own[k]`` — the held-out fits of the voter-quality view. ``pairs``: model_a, model_b (one row per pair);
    counts: comparisons won by a, by b and tied (columns 0, 1, 2) per pair. Strengths are indexed by the sorted
    models of ``pairs``; a model left without comparisons is NaN. The leftovers that still compare every model
    share one design and are fitted ten at a time (``_fit_batch``, warm-started from the fit of ``total``)."""
    models = sorted(set(pairs.model_a) | set(pairs.model_b))
    index = {m: i for i, m in enumerate(models)}
    a, b = pairs.model_a.map(index).to_numpy(), pairs.model_b.map(index).to_numpy()
    x = np.zeros((len(pairs), len(models)))
    x[np.arange(len(pairs)), a] = math.log(BASE)
    x[np.arange(len(pairs)), b] = -math.log(BASE)
    design = _design(x)
    warm, _ = _fit(*design, _weights(total))
    out: list[np.ndarray] = [np.full(len(models), np.nan) for _ in own]
    full, partial = [], []
    for k, counts in enumerate(own):
        left = total - counts
        seen = np.bincount(np.concatenate([a, b]), weights=np.tile(left.sum(axis=1), 2), minlength=len(models))
        (full if (seen > 0).all() else partial).append(k)
    for start in range(0, len(full), BATCH):
        chunk = full[start:start + BATCH]
        coefs, _ = _fit_batch(*design, [_weights(total - own[k]) for k in chunk], warm)
        for k, coef in zip(chunk, coefs, strict=True):
            out[k] = SCALE * coef - SCALE * coef.mean() + INIT
    for k in partial:  # a model left without comparisons: fitted on the rest
        left = total - own[k]
        keep = left.sum(axis=1) > 0
        present = sorted(set(a[keep]) | set(b[keep]))
        if len(present) < 2:
            continue
        column = {m: i for i, m in enumerate(present)}
        sub = np.zeros((int(keep.sum()), len(present)))
        sub[np.arange(len(sub)), [column[i] for i in a[keep]]] = math.log(BASE)
        sub[np.arange(len(sub)), [column[i] for i in b[keep]]] = -math.log(BASE)
        coef, _ = _fit(*_design(sub), _weights(left[keep]))
        out[k][present] = SCALE * coef - SCALE * coef.mean() + INIT
    return out


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
