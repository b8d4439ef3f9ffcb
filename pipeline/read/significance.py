"""Leaderboard statistics beyond a mean and its CI: which models are tied, how small a difference the
language's items can show, means calibrated by human labels, and how bad a model can be at its worst.

- ``significance``: per language, each item's score for every model (AGG with the page's weights, or one
  metric) as an items × models matrix, the paired bootstrap of every pair on it (``analysis.paired``, the
  same resampled items for both models), the compact letter display of the models not distinguishable at
  95 % (``analysis.significance.tied_groups``), the minimum detectable difference for the language's n and
  whether ranks there are established (``ranks_established``).
- ``calibrated_means``: prediction-powered inference (``analysis.calibration.ppi_mean``): the judge's scores of
  all items with the human scores of the few labelled ones give a mean and CI valid even for a biased judge.
- ``worst_of_k``: with several judge samples per item, the expected worst of k samples (``analysis.worst_at_k``),
  and ``item_variance``, the items whose samples vary most.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from pipeline.analysis.calibration import ppi_mean
from pipeline.analysis.paired import paired_differences
from pipeline.analysis.significance import minimum_detectable_difference, ranks_established, tied_groups
from pipeline.analysis.stats import histogram, mean_with_ci
from pipeline.analysis.worst_at_k import expected_min
from pipeline.metrics import METRICS
from pipeline.read.common import (
    Filters,
    current_join,
    df,
    group_pred,
    group_source,
    model_pred,
    on_qf,
    queries_cte,
    weights_dict,
)
from pipeline.read.jury import JURY_PREFIX, is_jury, item_source
from pipeline.read.leaderboard import score_patterns
from pipeline.store import SHARED_READERS

MIN_PPI_LABELS = 10  # labelled items of a model (in a language) before a calibrated mean is shown
PPI_COLUMNS = ["model_id", "metric", "judge_mean", "mean", "lo", "hi", "correction", "n_labelled", "n_unlabelled",
               "method"]
WORST_COLUMNS = ["model_id", "k", "worst", "mean", "n_items"]


def item_matrix(db: str | Path, f: Filters, judge: str, language: str, models: tuple[str, ...]) -> np.ndarray:
    """Items × models × metrics of ``language``'s item scores (NaN: not scored), models in ``models`` order,
    items in an order shared by every model (only items some model scored)."""
    lf = f.with_(languages=(language,))
    qf, p_qf = queries_cte(lf)
    pred, p_model = model_pred(lf, "i")
    source, p_source = item_source(lf, judge)
    with SHARED_READERS.cursor(db) as con:
        got = con.execute(
            f"WITH {qf}, codes AS (SELECT qf.*, row_number() OVER () - 1 AS qi FROM qf) "
            f"SELECT qf.qi, list_position(?, i.model_id) - 1 AS mi, {', '.join(f'i.{m}' for m in METRICS)} "
            f"FROM {source} i JOIN codes qf ON {on_qf(lf, 'i')} WHERE i.judge_id = ? AND list_contains(?, i.model_id) "
            f"AND {pred}", [*p_qf, list(models), *p_source, judge, list(models), *p_model]).fetchnumpy()
    qi, mi = got["qi"].astype(np.int64), got["mi"].astype(np.int64)
    row, n_items = _dense_rows(qi)
    out = np.full((n_items, len(models), len(METRICS)), np.nan)
    for k, m in enumerate(METRICS):
        values = got[m]
        out[row, mi, k] = np.ma.filled(values.astype(float), np.nan) if np.ma.isMaskedArray(values) else values
    return out


def _dense_rows(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Each code's rank among the distinct codes (non-negative integers) and how many there are: ``np.unique``'s
    inverse, by marking the codes present (no sort)."""
    present = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=bool)
    present[codes] = True
    rank = np.cumsum(present) - 1
    return rank[codes], int(present.sum())


def item_scores_of(matrix: np.ndarray, weights: dict[str, float], metric: str = "AGG") -> np.ndarray:
    """Items × models of one score: a metric's, or AGG = Σ wₘ·scoreₘ over the weighted metrics (NaN when one
    is missing: the items ``leaderboard``'s AGG CI resamples)."""
    if metric != "AGG":
        return matrix[:, :, METRICS.index(metric)]
    used = [k for k, m in enumerate(METRICS) if weights[m] > 0]
    return matrix[:, :, used] @ np.array([weights[METRICS[k]] for k in used])


def significance(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...], language: str,
                 models: tuple[str, ...], preset: str | None = None, metric: str = "AGG") -> dict[str, Any]:
    """Tied groups of ``models`` in ``language`` on AGG (or ``metric``): see the module docstring.

    Returns ``letters`` (model → letters; models sharing a letter are not distinguishable at 95 %),
    ``pairs`` (``analysis.paired.paired_differences``), ``means`` (each model's mean item score), ``n_items``
    (items scored for at least two models), ``sd`` (median SD of the per-item differences), ``mdd`` (the
    smallest true difference a paired test finds with 80 % power at that n), ``established``, ``reason``.
    """
    scores = item_scores_of(item_matrix(db, f, judge, language, models), weights_dict(weights, preset), metric)
    with np.errstate(invalid="ignore"):
        means = pd.Series(np.nanmean(np.where(np.isnan(scores), np.nan, scores), axis=0) if len(scores) else
                          np.full(len(models), np.nan), index=list(models))
    pairs = paired_differences(scores, list(models))
    n_items = int(((~np.isnan(scores)).sum(axis=1) >= 2).sum()) if len(scores) else 0
    sd = float(np.nanmedian(pairs.sd)) if len(pairs) and pairs.sd.notna().any() else float("nan")
    mdd = minimum_detectable_difference(sd, n_items) if n_items and not np.isnan(sd) else float("nan")
    established, reason = ranks_established(n_items)
    scored = means.dropna()
    letters = tied_groups(scored, pairs) if len(scored) else {}
    return {"letters": letters, "pairs": pairs, "means": means, "n_items": n_items, "sd": sd, "mdd": mdd,
            "established": established, "reason": reason, "metric": metric}


def calibration_arrays(db: str | Path, f: Filters, judge: str, language: str) -> pd.DataFrame:
    """Per (model, metric) with human labels in ``language`` on items the judge scored: each distinct (judge item
    score, human score or NULL = unlabelled) and its count of items. The human score of an item is its annotators'
    mean; items the judge did not score are left out (PPI drops them).

    The labelled items come from ``label_pairs`` (a jury's item scores from ``jury_items``, so that its values are the
    very ones counted); the unlabelled counts are every item's (``leaderboard.score_patterns``: the writer's counted
    patterns where the view allows) less the labelled."""
    lf = f.with_(languages=(language,))
    source, p_source = group_source("label_pairs", lf)  # under a theme filter its rows of the filtered queries
    where, p_where = group_pred(lf, "p")  # the pairs carry their query's language and script
    pairs, params = f"{source} p WHERE {where}", [*p_source, *p_where]
    if not is_jury(judge):
        labelled = (f"SELECT p.model_id, p.label_metric AS metric, p.llm AS judge, p.human, count(*) AS n "
                    f"FROM {pairs} AND p.judge_id = ? AND list_contains(?, p.label_metric) GROUP BY ALL")
        params = [*params, judge, list(METRICS)]
    else:
        how = judge.removeprefix(JURY_PREFIX)
        value = "CASE h.metric " + " ".join(f"WHEN '{m}' THEN j.{m}_{how}" for m in METRICS) + " END"
        labelled = (f"SELECT h.model_id, h.metric, {value} AS judge, h.human, count(*) AS n FROM ("
                    "SELECT DISTINCT p.dataset, p.query_id, p.model_id, p.label_metric AS metric, p.human "
                    f"FROM {pairs} AND list_contains(?, p.label_metric)) h JOIN jury_items j ON j.dataset = h.dataset "
                    "AND j.query_id = h.query_id AND j.model_id = h.model_id GROUP BY ALL")
        params = [*params, list(METRICS)]
    with SHARED_READERS.cursor(db) as con:
        con.execute(f"CREATE OR REPLACE TEMP TABLE cal_labelled AS {labelled}", params)
        models = [m for (m,) in con.execute("SELECT DISTINCT model_id FROM cal_labelled").fetchall()]
        if not models:
            return pd.DataFrame(columns=["model_id", "metric", "judge", "human", "n"])
        patterns = score_patterns(con, lf.with_(models=tuple(models)), judge)
        con.register("cal_patterns", pa.table({c: patterns[c] for c in ("model_id", *METRICS, "n")}))
        try:
            return con.execute(
                "WITH every AS (SELECT model_id, metric, judge, sum(n) AS n FROM (UNPIVOT cal_patterns "
                f"ON {', '.join(METRICS)} INTO NAME metric VALUE judge) SEMI JOIN (SELECT DISTINCT model_id, metric "
                "FROM cal_labelled) USING (model_id, metric) GROUP BY ALL), "
                "taken AS (SELECT * FROM cal_labelled WHERE judge IS NOT NULL) "
                "SELECT * FROM taken UNION ALL SELECT e.model_id, e.metric, e.judge, NULL, e.n - coalesce(t.n, 0) "
                "FROM every e LEFT JOIN (SELECT model_id, metric, judge, sum(n) AS n FROM taken GROUP BY ALL) t "
                "USING (model_id, metric, judge) WHERE e.n > coalesce(t.n, 0) ORDER BY ALL").df()
        finally:
            con.unregister("cal_patterns")
            con.execute("DROP TABLE cal_labelled")


def calibrated_means(db: str | Path, f: Filters, judge: str, language: str) -> pd.DataFrame:
    """Per (model, metric) with at least ``MIN_PPI_LABELS`` labelled items in ``language``: the judge's mean over
    all its items, the PPI++ mean and 95 % CI (``ppi_mean``), ``correction`` = PPI mean − judge mean, and the
    labelled and unlabelled item counts. When every item is labelled there is nothing to predict: the mean is
    the human mean with its bootstrap CI (``method`` says which)."""
    counts = calibration_arrays(db, f, judge, language)
    rows = []
    for (model, metric), g in counts.groupby(["model_id", "metric"], sort=True):
        labelled = g[g.human.notna()]
        unlabelled = g[g.human.isna()]
        n = labelled.n.to_numpy(dtype=np.int64)
        if n.sum() < MIN_PPI_LABELS:
            continue
        judge_l, human = np.repeat(labelled.judge.to_numpy(dtype=float), n), np.repeat(labelled.human.to_numpy(
            dtype=float), n)
        if unlabelled.n.sum() < 1:
            values, hist = histogram(human, decimals=2)
            ci = mean_with_ci(values, hist)
            rows.append({"model_id": model, "metric": metric, "judge_mean": float(judge_l.mean()), "mean": ci["mean"],
                         "lo": ci["lo"], "hi": ci["hi"], "correction": ci["mean"] - float(judge_l.mean()),
                         "n_labelled": int(n.sum()), "n_unlabelled": 0, "method": "human labels (every item)"})
            continue
        res = ppi_mean(judge_l, human,
                       np.repeat(unlabelled.judge.to_numpy(dtype=float), unlabelled.n.to_numpy(dtype=np.int64)))
        rows.append({"model_id": model, "metric": metric, **{k: res[k] for k in PPI_COLUMNS[2:-1]}, "method": "PPI++"})
    out = pd.DataFrame(rows, columns=PPI_COLUMNS)
    order = {m: i for i, m in enumerate(METRICS)}
    return out.sort_values(["metric", "model_id"], key=lambda s: s.map(order) if s.name == "metric" else s,
                           kind="stable").reset_index(drop=True)


def _sample_scores_sql(db: str | Path, f: Filters, judge: str, language: str, weights: dict[str, float],
                       metric: str) -> tuple[str, list[Any]]:
    """SQL: per (model, item, sample) the sample's score — a metric's, or AGG over the weighted metrics all
    parsed in that sample — of the current response texts."""
    lf = f.with_(languages=(language,))
    qf, p_qf = queries_cte(lf)
    pred, p_model = model_pred(lf, "j")
    used = [m for m in METRICS if weights[m] > 0] if metric == "AGG" else [metric]
    w = " ".join(f"WHEN '{m}' THEN {weights[m] if metric == 'AGG' else 1.0!r}" for m in used)
    return (f"WITH {qf}, s AS (SELECT j.model_id, j.dataset, j.query_id, j.sample, "
            f"round(sum(j.score * CASE j.metric {w} END), 6) AS score FROM judgments j JOIN qf ON {on_qf(lf, 'j')} "
            f"{current_join(db, 'j')} WHERE j.judge_id = ? AND j.parse_ok AND list_contains(?, j.metric) AND {pred} "
            f"GROUP BY ALL HAVING count(*) = {len(used)})"), [*p_qf, judge, used, *p_model]


def worst_of_k(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...], language: str,
               preset: str | None = None, metric: str = "AGG") -> pd.DataFrame:
    """Per model, with k = the most samples every counted item has (at least 2): the mean over items of the
    expected worst of k samples (``analysis.worst_at_k.expected_min``, HealthBench's worst-at-k), the mean
    sample score, and the items. From counted patterns (each item's sorted sample scores); empty when the
    judge took one sample per item, or for a jury."""
    if is_jury(judge):
        return pd.DataFrame(columns=WORST_COLUMNS)
    sql, params = _sample_scores_sql(db, f, judge, language, weights_dict(weights, preset), metric)
    patterns = df(db, f"{sql}, per AS (SELECT model_id, list(score ORDER BY score) AS samples FROM s "
                      "GROUP BY model_id, dataset, query_id) SELECT model_id, samples, count(*) AS n FROM per "
                      "GROUP BY ALL ORDER BY ALL", params)
    rows = []
    for model, g in patterns.groupby("model_id", sort=True):
        sizes = g.samples.map(len).to_numpy()
        k = int(np.max(sizes)) if len(sizes) else 0
        kept = g[sizes >= k] if k >= 2 else g.iloc[0:0]
        if kept.empty:
            continue
        n = kept.n.to_numpy(dtype=float)
        worst = np.array([expected_min(np.asarray(s, dtype=float), k) for s in kept.samples])
        means = np.array([np.mean(s) for s in kept.samples])
        rows.append({"model_id": model, "k": k, "worst": float(worst @ n / n.sum()), "mean": float(means @ n / n.sum()),
                     "n_items": int(n.sum())})
    return pd.DataFrame(rows, columns=WORST_COLUMNS)


def item_variance(db: str | Path, f: Filters, judge: str, language: str, metric: str, limit: int = 50) -> pd.DataFrame:
    """The items of ``language`` whose judge samples on ``metric`` vary most: population variance (as
    ``analysis.worst_at_k.per_item_variance``), samples, lowest and highest score, with the query text.
    Items with at least two parsed samples; current response texts."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    if is_jury(judge):
        return pd.DataFrame(columns=["dataset", "query_id", "model_id", "samples", "variance", "min", "max", "query"])
    lf = f.with_(languages=(language,))
    qf, p_qf = queries_cte(lf)
    pred, p_model = model_pred(lf, "j")
    return df(db, (
        f"WITH {qf}, v AS (SELECT j.dataset, j.query_id, j.model_id, count(*) AS samples, "
        "var_pop(j.score) AS variance, min(j.score) AS min, max(j.score) AS max FROM judgments j "
        f"JOIN qf ON {on_qf(lf, 'j')} {current_join(db, 'j')} "
        f"WHERE j.judge_id = ? AND j.metric = ? AND j.parse_ok AND {pred} GROUP BY ALL HAVING count(*) >= 2 "
        "ORDER BY variance DESC, j.dataset, j.query_id, j.model_id LIMIT ?) "
        "SELECT v.*, q.query FROM v JOIN queries q USING (dataset, query_id) "
        "ORDER BY variance DESC, dataset, query_id, model_id"), [*p_qf, judge, metric, *p_model, int(limit)])
