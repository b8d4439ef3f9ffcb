"""HealthBench rubric scoring: per-item scores from per-criterion grades, the clipped model score, tag breakdowns
and grader-vs-physician agreement.

Follows openai/simple-evals at commit ee3b0318d8d1d9d72755a4120879be65f7c07e9e (2025-07-09; the HealthBench files
date from 5e623c2b, 2025-05-12): `healthbench_eval.py` `calculate_score` (lines 136–154), `grade_sample`'s
example-tag and rubric-tag metrics (lines 398–418), `_compute_clipped_stats` / `_aggregate_get_clipped_mean`
(lines 212–261) and `healthbench_meta_eval.py` `compute_metrics_for_rater_by_class` with its F1 and balanced
("macro") metrics. Where this module departs, its docstrings say so (seeded RNG, an added percentile CI, ungraded
criteria).

A grades frame is long: one row per (item, criterion) with columns `item_id`, `points` (may be negative),
`criteria_met` (bool; None/NaN = ungraded), optional `tags` (the criterion's rubric tags, e.g. "axis:accuracy")
and optional `example_tags` (the item's tags, e.g. "theme:emergency_referrals", repeated on its rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

OVERALL = "overall_score"


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def _met(result: Any) -> Any:
    return result["criteria_met"] if isinstance(result, Mapping) else result


def _graded(value: Any) -> bool:
    return not (pd.api.types.is_scalar(value) and pd.isna(value))


def calculate_score(rubric_items: Sequence[Any], grading_results: Sequence[Any]) -> float | None:
    """Σ points of the met criteria ÷ Σ positive points (HealthBench `calculate_score`); None if no positive points.

    Rubric items are mappings or objects with `points`; grading results are mappings with `criteria_met` or bare
    bools, one per rubric item. Met negative criteria subtract, so an item's score may fall below 0; it is not
    clipped here (only the mean over items is).
    """
    if len(rubric_items) != len(grading_results):
        raise ValueError(f"{len(rubric_items)} rubric items but {len(grading_results)} grading results")
    total_possible = sum(_field(item, "points") for item in rubric_items if _field(item, "points") > 0)
    if total_possible == 0:
        return None
    if not all(_graded(_met(r)) for r in grading_results):
        raise ValueError("every criterion needs a grade (criteria_met True/False) to compute a score")
    achieved = sum(_field(item, "points") for item, r in zip(rubric_items, grading_results, strict=True) if _met(r))
    return achieved / total_possible


def score_from_sums(achieved: Any, total_possible: Any, ungraded: Any = 0) -> np.ndarray:
    """`calculate_score` for many items at once from per-item sums (what a read model sums in SQL).

    `achieved` = Σ points of the met criteria, `total_possible` = Σ positive points, `ungraded` = the item's
    criteria without a grade. NaN where an item has an ungraded criterion (unscored, as `item_metrics`) or no
    positive points (where `calculate_score` gives None).
    """
    achieved, total, ungraded = (np.asarray(x, dtype=float) for x in (achieved, total_possible, ungraded))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((ungraded == 0) & (total > 0), achieved / np.where(total > 0, total, 1.0), np.nan)


def item_metrics(
    rubric_items: Sequence[Any],
    grading_results: Sequence[Any],
    example_tags: Sequence[str] = (),
) -> dict[str, float]:
    """One item's metrics as HealthBench's `grade_sample` builds them.

    `overall_score`; each example tag gets the overall score; each rubric tag gets `calculate_score` over the
    criteria carrying that tag (omitted when they have no positive points). Departure: an item with an ungraded
    criterion has no overall score (unscored, not 0) and a rubric tag is omitted when one of its criteria is
    ungraded; HealthBench re-asks the grader until it answers.
    """
    metrics: dict[str, float] = {}
    if all(_graded(_met(r)) for r in grading_results):
        overall = calculate_score(rubric_items, grading_results)
        if overall is None:
            raise ValueError("an item's rubric needs at least one criterion with positive points")
        metrics[OVERALL] = overall
        metrics.update({tag: overall for tag in example_tags})
    by_tag: dict[str, list[tuple[Any, Any]]] = {}
    for item, result in zip(rubric_items, grading_results, strict=True):
        for tag in dict.fromkeys(_field(item, "tags") or ()):
            by_tag.setdefault(tag, []).append((item, result))
    for tag, pairs in by_tag.items():
        items, results = zip(*pairs, strict=True)
        if not all(_graded(_met(r)) for r in results):
            continue
        score = calculate_score(items, results)
        if score is not None:
            metrics[tag] = score
    return metrics


def clipped_stats(
    values: Sequence[float] | np.ndarray,
    n_bootstrap: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, float | int]:
    """HealthBench's final statistic: the mean of item scores clipped to [0, 1], its bootstrap std, n_samples.

    As `_compute_clipped_stats`: 1000 resamples of the items, each resample's mean clipped, `bootstrap_std` =
    np.std (ddof 0) of those. Departures: a seeded generator (HealthBench uses the unseeded global np.random)
    and an added percentile CI (`ci_lo`, `ci_hi`) of the clipped means, which HealthBench does not report.
    None/NaN values are dropped.
    """
    from scipy import stats
    array = np.asarray([v for v in values if _graded(v)], dtype=float)
    n = len(array)
    result: dict[str, float | int] = {"mean": float("nan"), "n_samples": n, "bootstrap_std": float("nan"),
                                      "ci_lo": float("nan"), "ci_hi": float("nan")}
    if n == 0:
        return result
    result["mean"] = float(np.clip(np.mean(array), 0, 1))
    if n == 1:
        result["bootstrap_std"] = 0.0  # what HealthBench's resampling of a single value gives
        return result

    def clipped_mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.clip(np.mean(x, axis=axis), 0, 1)

    boot = stats.bootstrap((array,), clipped_mean, n_resamples=n_bootstrap, confidence_level=confidence,
                           method="percentile", rng=np.random.default_rng(seed))
    result["bootstrap_std"] = float(np.std(boot.bootstrap_distribution))
    result["ci_lo"] = float(boot.confidence_interval.low)
    result["ci_hi"] = float(boot.confidence_interval.high)
    return result


#: Fewest items for which `clipped_stats_moments` reads the interval off the Cornish–Fisher expansion: rubric scores
#: take many distinct values (no coarse lattice), and from 30 items the expansion lands nearer the quantiles of
#: 400,000 resamples than 1,000 resamples do (tests/test_rubric_fast.py).
RUBRIC_EXPANSION_MIN_N = 30
#: Item scores are binned to this many decimals where a sample is resampled from its histogram.
HISTOGRAM_DECIMALS = 2


def _plan(n: np.ndarray, sums: np.ndarray, lowest: np.ndarray, highest: np.ndarray) -> dict[str, np.ndarray]:
    """Moments of each sample from its power sums, and how each of its statistics is computed (see below)."""
    from pipeline.analysis.stats import EXPANSION_MAX_SKEW

    n = np.asarray(n, dtype=float)
    s1, s2, s3, s4 = (np.asarray(sums, dtype=float).reshape(-1, 4)[:, k] for k in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / n
        e2, e3, e4 = s2 / n, s3 / n, s4 / n
        var = np.maximum(e2 - mean**2, 0.0)
        m3 = e3 - 3 * mean * e2 + 2 * mean**3
        m4 = e4 - 4 * mean * e3 + 6 * mean**2 * e2 - 3 * mean**4
        skew = m3 / var**1.5 / np.sqrt(n)
        sd = np.sqrt(var / n)
    constant = (highest - lowest <= 0) | (var <= 1e-18 * np.maximum(1.0, mean * mean))
    many = n >= RUBRIC_EXPANSION_MIN_N
    expand = constant | (many & (np.abs(skew) <= EXPANSION_MAX_SKEW))
    inside = constant | ((lowest >= 0) & (highest <= 1)) | (many & (mean - 6 * sd >= 0) & (mean + 6 * sd <= 1))
    near = ~inside & many
    return {"n": n, "mean": mean, "var": var, "m3": m3, "m4": np.maximum(m4, 0.0), "sd": sd, "expand": expand,
            "inside": inside, "near": near, "lowest": lowest, "highest": highest,
            "histogram": (n > 1) & (~expand | (~inside & ~near))}


def needs_histogram(n: np.ndarray, sums: np.ndarray, lowest: np.ndarray, highest: np.ndarray) -> np.ndarray:
    """Which samples `clipped_stats_moments` must resample, so needs their histogram (few items, or a skewed mean)."""
    return _plan(n, sums, lowest, highest)["histogram"]


def clipped_stats_moments(
    n: np.ndarray,
    sums: np.ndarray,
    lowest: np.ndarray,
    highest: np.ndarray,
    histogram: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, np.ndarray]:
    """`clipped_stats` of many samples at once, at a cost that does not grow with their items.

    Sample k has ``n[k]`` item scores with power sums ``sums[k]`` = (Σx, Σx², Σx³, Σx⁴) and range
    ``lowest[k]``..``highest[k]`` (what SQL sums in one pass). ``histogram`` = (sample, value, count) rows of the
    scores binned to `HISTOGRAM_DECIMALS`, needed only for the samples `needs_histogram` marks.

    - `mean`: the mean clipped to [0, 1] (exact: HealthBench's score).
    - `ci_lo`/`ci_hi`: the percentile bootstrap interval of the clipped mean. Clipping is monotone, so the
      clipped means' quantiles are the clipped quantiles of the unclipped means: from `RUBRIC_EXPANSION_MIN_N`
      items with a mean that is not skewed, the Cornish–Fisher limit of the exact moments
      (`stats.expansion_ci`), else the quantiles of `n_bootstrap` resamples of the histogram, moved by the
      binning's shift of the mean; then clipped. NaN for n < 2, as `clipped_stats`.
    - `bootstrap_std`: HealthBench's bootstrap std — the (ddof 0) standard deviation of the resampled clipped
      means — in the limit of many resamples, which HealthBench's 1,000 estimate. Where no resampled mean can
      leave [0, 1] (every item score in [0, 1], or n ≥ `RUBRIC_EXPANSION_MIN_N` and mean ± 6 s inside [0, 1],
      s = σ/√n with σ the items' ddof-0 standard deviation) clipping does not bind and it is s; near a bound
      (n ≥ `RUBRIC_EXPANSION_MIN_N`) it is the standard deviation of N(mean, s²) clipped to [0, 1]; with fewer
      items it is estimated as HealthBench does, from `n_bootstrap` resamples (seeded; the same draws give the
      interval). 0 for a single item.
    - `n_samples`: the items per sample.
    """
    from pipeline.analysis.stats import expansion_ci

    lowest, highest = np.asarray(lowest, dtype=float), np.asarray(highest, dtype=float)
    p = _plan(n, sums, lowest, highest)
    lo, hi, _, _ = expansion_ci(p["n"], p["mean"], p["var"], p["m3"], p["m4"], lowest, highest,
                                confidence=confidence)
    std = np.where(p["inside"], p["sd"], np.nan)
    std[p["near"]] = _clipped_normal_std(p["mean"][p["near"]], p["sd"][p["near"]])
    todo = np.flatnonzero(p["histogram"])
    if len(todo):
        if histogram is None:
            raise ValueError("these samples need their histogram: " + ", ".join(map(str, todo[:5])))
        group, values, counts = (np.asarray(a) for a in histogram)
        alpha = (1 - confidence) / 2
        rng = np.random.default_rng(seed)
        for k in todo:
            mine = group == k
            v, c = values[mine].astype(float), counts[mine].astype(np.int64)
            total = int(c.sum())
            shift = p["mean"][k] - float(v @ c) / total
            if total < RUBRIC_EXPANSION_MIN_N:  # few items: resample the items themselves (cheaper than a multinomial)
                items = np.repeat(v, c)
                draws = items[rng.integers(0, total, size=(n_bootstrap, total))].mean(axis=1) + shift
            else:
                draws = rng.multinomial(total, c / total, size=n_bootstrap) @ v / total + shift
            if not p["expand"][k]:
                lo[k], hi[k] = np.quantile(draws, [alpha, 1 - alpha])
            if not p["inside"][k] and not p["near"][k]:
                std[k] = float(np.std(np.clip(draws, 0, 1)))
    empty, single = p["n"] == 0, p["n"] == 1
    std[single] = 0.0
    return {"mean": np.where(empty, np.nan, np.clip(p["mean"], 0, 1)), "bootstrap_std": np.where(empty, np.nan, std),
            "ci_lo": np.where(p["n"] < 2, np.nan, np.clip(lo, 0, 1)),
            "ci_hi": np.where(p["n"] < 2, np.nan, np.clip(hi, 0, 1)), "n_samples": p["n"].astype(np.int64)}


def _clipped_normal_std(mu: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Standard deviation of N(mu, s²) clipped to [0, 1]."""
    from scipy.special import ndtr

    a, b = -mu / s, (1 - mu) / s
    pdf_a, pdf_b = np.exp(-a * a / 2) / np.sqrt(2 * np.pi), np.exp(-b * b / 2) / np.sqrt(2 * np.pi)
    mass = ndtr(b) - ndtr(a)
    first = mu * mass + s * (pdf_a - pdf_b) + (1 - ndtr(b))
    second = (mu * mu * mass + 2 * mu * s * (pdf_a - pdf_b) + s * s * (mass + a * pdf_a - b * pdf_b)
              + (1 - ndtr(b)))
    return np.sqrt(np.maximum(second - first * first, 0.0))


def _per_item_metrics(grades: pd.DataFrame) -> tuple[list[dict[str, float]], dict[str, str]]:
    missing = {"item_id", "points", "criteria_met"} - set(grades.columns)
    if missing:
        raise ValueError(f"grades frame lacks columns {sorted(missing)}")
    per_item, kinds = [], {}
    for _, rows in grades.groupby("item_id", sort=False):
        records = rows.to_dict("records")
        rubric = [{"points": r["points"], "tags": r.get("tags") or ()} for r in records]
        results = [{"criteria_met": None if not _graded(r["criteria_met"]) else bool(r["criteria_met"])}
                   for r in records]
        example_tags = list(dict.fromkeys(records[0].get("example_tags") or ()))
        kinds.update({tag: "example" for tag in example_tags})
        kinds.update({tag: "rubric" for r in rubric for tag in r["tags"]})
        per_item.append(item_metrics(rubric, results, example_tags))
    return per_item, kinds


def item_scores(grades: pd.DataFrame) -> pd.Series:
    """Each item's overall score from a grades frame (NaN for items with an ungraded criterion), by item_id."""
    ids = list(dict.fromkeys(grades["item_id"]))
    per_item, _ = _per_item_metrics(grades)
    return pd.Series([m.get(OVERALL, np.nan) for m in per_item], index=pd.Index(ids, name="item_id"),
                     name=OVERALL, dtype=float)


def tag_breakdown(grades: pd.DataFrame, n_bootstrap: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Score per tag as HealthBench aggregates it, plus the overall score, from a grades frame of one model.

    Example (theme) tags: the clipped mean of the overall scores of the items carrying the tag. Rubric (axis)
    tags: the clipped mean over items of the score restricted to that tag's criteria, over the items where that
    restricted score exists. Indexed by metric name (`overall_score` first); columns `kind` (overall / example /
    rubric), `score`, `n_samples`, `bootstrap_std`, `ci_lo`, `ci_hi` (see `clipped_stats`).
    """
    per_item, kinds = _per_item_metrics(grades)
    name_to_values: dict[str, list[float]] = {OVERALL: []}
    for metrics in per_item:
        for name, value in metrics.items():
            name_to_values.setdefault(name, []).append(value)
    rows = []
    for name, values in name_to_values.items():
        summary = clipped_stats(values, n_bootstrap=n_bootstrap, seed=seed)
        kind = "overall" if name == OVERALL else kinds.get(name, "rubric")
        rows.append({"tag": name, "kind": kind, "score": summary["mean"], **{k: summary[k] for k in (
            "n_samples", "bootstrap_std", "ci_lo", "ci_hi")}})
    return pd.DataFrame(rows).set_index("tag")


def _physician_rows(physician_met: Any, n: int) -> list[np.ndarray]:
    rows = [np.atleast_1d(np.asarray(r, dtype=float)) for r in physician_met]
    if len(rows) != n:
        raise ValueError(f"{n} grader labels but {len(rows)} rows of physician labels")
    return [r[~np.isnan(r)].astype(bool) for r in rows]


def pair_agreement(grader: np.ndarray, physician: np.ndarray) -> dict[str, float | int]:
    """Agreement and F1 of (grader, physician) label pairs, from their confusion counts: what scikit-learn's
    `f1_score` gives (per class, and `average="macro"`) when both sides have both classes; NaN F1 otherwise
    (tests/test_rubric_fast.py checks it against scikit-learn)."""
    grader, physician = np.asarray(grader, dtype=bool), np.asarray(physician, dtype=bool)
    n = len(grader)
    tp = int(np.sum(grader & physician))
    tn = int(np.sum(~grader & ~physician))
    fp = int(np.sum(grader & ~physician))
    fn = n - tp - tn - fp
    both_classes = 0 < tp + fp < n and 0 < tp + fn < n  # the grader and the physicians each say met and not met
    f1_pos = 2 * tp / (2 * tp + fp + fn) if both_classes else float("nan")
    f1_neg = 2 * tn / (2 * tn + fn + fp) if both_classes else float("nan")
    return {"n_pairs": n, "agreement": (tp + tn) / n if n else float("nan"), "f1_pos": f1_pos, "f1_neg": f1_neg,
            "macro_f1": (f1_pos + f1_neg) / 2 if both_classes else float("nan")}


def _agreement(grader: np.ndarray, physician: np.ndarray) -> dict[str, float | int]:
    return pair_agreement(grader, physician)


def grader_agreement(
    grader_met: Sequence[bool] | np.ndarray,
    physician_met: Sequence[Any] | np.ndarray,
    categories: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Grader vs physicians on criterion labels, as HealthBench's meta-eval (`healthbench_meta_eval.py`) scores it.

    `grader_met[i]` is the grader's label for criterion i; `physician_met[i]` one physician label or a list of
    them (ragged lists or a 2-D array with NaN for missing). Every (grader, physician) label pair counts once:
    `agreement` is the share of agreeing pairs, `macro_f1` = scikit-learn `f1_score(average="macro")` over the pairs
    (the mean of F1 for met and not met: HealthBench's `pairwise_model_f1_balanced`), NaN when either side lacks a
    class (HealthBench gives None there). `per_criterion` is the share of each criterion's physicians agreeing with
    the grader; `by_category` (if categories are given) repeats the figures per category.
    """
    grader = np.asarray(grader_met, dtype=bool).ravel()
    physicians = _physician_rows(physician_met, len(grader))
    grader_pairs = np.concatenate([np.repeat(g, len(p)) for g, p in zip(grader, physicians, strict=True)] or [[]])
    physician_pairs = np.concatenate(physicians or [[]])
    result: dict[str, Any] = {
        "n_criteria": len(grader),
        **_agreement(grader_pairs.astype(bool), physician_pairs.astype(bool)),
        "per_criterion": np.array([np.mean(p == g) if len(p) else np.nan for g, p in zip(grader, physicians,
                                                                                       strict=True)]),
    }
    if categories is not None:
        cats = np.asarray(categories)
        if len(cats) != len(grader):
            raise ValueError(f"{len(grader)} grader labels but {len(cats)} categories")
        rows = []
        for cat in dict.fromkeys(cats):
            sel = np.flatnonzero(cats == cat)
            g = np.concatenate([np.repeat(grader[i], len(physicians[i])) for i in sel])
            p = np.concatenate([physicians[i] for i in sel])
            rows.append({"category": cat, "n_criteria": len(sel), **_agreement(g.astype(bool), p.astype(bool))})
        result["by_category"] = pd.DataFrame(rows).set_index("category")
    return result
