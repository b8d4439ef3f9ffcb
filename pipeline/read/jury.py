"""Juries (MedHELM): several judges score every item; the jury's score is computed when read.

``item_source`` is the one place a "judge" becomes rows of ``item_scores``: one judge's, or the jury's —
per item and metric the mean (or median) over the judges that scored it, as ``analysis.jury.jury_scores``.
A jury is named ``jury:mean`` or ``jury:median`` wherever a judge id is taken (leaderboards, themes,
calibration), and is made of every judge that scored the dataset.

Agreement between judges comes from counted score patterns (one row per distinct tuple of the judges'
scores of an item on a metric, per language): Krippendorff's α and pairwise weighted κ by
``analysis.coincidence`` (equal to ``krippendorff.alpha`` and scikit-learn on the items × judges matrix).
The disagreement view lists the items whose judges' scores spread most (``analysis.jury.disagreements``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.analysis.coincidence import alpha_from_patterns, kappa_from_patterns
from pipeline.metrics import METRICS
from pipeline.read.common import Filters, df, group_pred, group_source, model_pred, on_qf, queries_cte
from pipeline.store.derived_jury import SEP as JUDGE_SET_SEP

JURY_PREFIX = "jury:"
AGGREGATES = ("mean", "median")
ALL_LANGUAGES = "all"
ALPHA_COLUMNS = ["language", "metric", "items", "alpha"]
KAPPA_COLUMNS = ["language", "metric", "judge_a", "judge_b", "n_items", "kappa"]


def jury_id(how: str = "mean") -> str:
    """The name a jury goes by where a judge id is expected."""
    if how not in AGGREGATES:
        raise ValueError(f"a jury aggregates by {' or '.join(AGGREGATES)}, not {how!r}")
    return JURY_PREFIX + how


def is_jury(judge: str | None) -> bool:
    return isinstance(judge, str) and judge.startswith(JURY_PREFIX)


def jury_label(judge: str, members: int | None = None) -> str:
    how = judge.removeprefix(JURY_PREFIX)
    return f"jury ({how} of {members} judges)" if members else f"jury ({how})"


def item_source(f: Filters, judge: str) -> tuple[str, list[Any]]:
    """A relation with ``item_scores``' columns for a FROM clause: the table itself for a judge, or the
    jury's per-item scores (``judge_id`` = the jury's name) over every judge of the filtered dataset, from the
    writer's ``jury_items`` (no grouping of every judge's rows; no ``runs``: a jury's are its judges'), with the
    query's language and script as ``item_scores`` carries them (``score_groups`` reads them there)."""
    if not is_jury(judge):
        return "item_scores", []
    how = judge.removeprefix(JURY_PREFIX)
    pred, params = ("dataset = ?", [f.dataset]) if f.dataset is not None else ("TRUE", [])
    if f.models:
        pred += " AND list_contains(?, model_id)"
        params.append(list(f.models))
    scores = ", ".join(f"{m}_{how} AS {m}" for m in METRICS)
    return (f"(SELECT dataset, query_id, model_id, ?::VARCHAR AS judge_id, {scores}, judgments, unparsed, "
            f"samples, []::VARCHAR[] AS runs, query_language, query_script FROM jury_items WHERE {pred})",
            [judge, *params])


def _judges_items(f: Filters, judges: tuple[str, ...]) -> tuple[str, str, list[Any]]:
    """``item_scores`` of ``judges`` only (and the view's models), bound as the table of that name in a definition
    (``common.group_source`` inputs): a jury of some of the judges only."""
    pred, params = model_pred(f, "i")
    return "item_scores", f"item_scores i WHERE list_contains(?, i.judge_id) AND {pred}", [list(judges), *params]


def _whole_jury(db: str | Path, f: Filters, judges: tuple[str, ...]) -> bool:
    """Whether the writer's ``jury_items`` / ``jury_patterns`` hold this jury: ``judges`` are every judge of the
    view's datasets (a row of them is made of every judge that scored the item)."""
    return set(judges) == set(_judges_of(db, f.dataset))


def _patterns(db: str | Path, f: Filters, judges: tuple[str, ...]) -> pd.DataFrame:
    """Per (language, metric) each distinct tuple of the judges' item scores (``s0``… in ``judges`` order) and
    its count of items; an item a judge did not score (or could not: unparsed) has NULL there. From the writer's
    ``jury_patterns`` (every judge's scores of an item counted per metric, language and judge set) when ``judges``
    are every judge of the view's datasets; under a theme filter its definition over ``jury_items`` of the filtered
    queries; for some judges only, over the definition of ``jury_items`` over their item scores
    (``common.group_source``). Each judge's score is taken from its place in the judge set (NULL where the set lacks
    it), the counts summed over models, scripts and judge sets."""
    inputs = [] if _whole_jury(db, f, judges) else [_judges_items(f, judges)]
    source, p_source = group_source("jury_patterns", f, inputs=inputs, through=("jury_items",))
    pred, params = group_pred(f, "j")
    at = f"list_position(string_split(j.judge_set, chr({ord(JUDGE_SET_SEP)})), ?)"
    spread = ", ".join(f"j.scores[{at}] AS s{k}" for k in range(len(judges)))
    return df(db, f"SELECT j.query_language AS language, j.metric, {spread}, sum(j.n)::BIGINT AS n "
                  f"FROM {source} j WHERE {pred} GROUP BY ALL ORDER BY ALL", [*judges, *p_source, *params])


def jury_agreement(db: str | Path, f: Filters, judges: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """Krippendorff's α (ordinal) per metric and language (and over all languages, ``language`` = 'all'), and
    pairwise linear-weighted κ per metric and language, with the items each rests on.

    ``items``: items scored by at least two judges. Values are the item scores (a judge's mean over its
    parsed samples), the domain the values seen.
    """
    if len(judges) < 2:
        return {"alpha": pd.DataFrame(columns=ALPHA_COLUMNS), "kappa": pd.DataFrame(columns=KAPPA_COLUMNS)}
    pats = _patterns(db, f, judges)
    cols = [f"s{k}" for k in range(len(judges))]
    alphas, kappas = [], []
    everything = pats.groupby(["metric", *cols], dropna=False, sort=False).n.sum().reset_index()
    for language, frame in (*pats.groupby("language", sort=True), (ALL_LANGUAGES, everything)):
        for metric in METRICS:
            g = frame[frame.metric == metric]
            values = g[cols].to_numpy(dtype=float)
            counts = g.n.to_numpy(dtype=float)
            pairable = (~np.isnan(values)).sum(axis=1) >= 2 if len(g) else np.zeros(0, bool)
            alphas.append({"language": language, "metric": metric, "items": int(counts[pairable].sum()),
                           "alpha": alpha_from_patterns(values, counts) if len(g) else np.nan})
            labels = np.unique(values[~np.isnan(values)])
            for (i, a), (j, b) in itertools.combinations(enumerate(judges), 2):
                kappa, n = kappa_from_patterns(values[:, i], values[:, j], counts, labels) if len(g) else (np.nan, 0)
                kappas.append({"language": language, "metric": metric, "judge_a": a, "judge_b": b, "n_items": n,
                               "kappa": kappa})
    return {"alpha": pd.DataFrame(alphas, columns=ALPHA_COLUMNS), "kappa": pd.DataFrame(kappas, columns=KAPPA_COLUMNS)}


def disagreement_items(db: str | Path, f: Filters, judges: tuple[str, ...], metric: str,
                       top: int = 20) -> pd.DataFrame:
    """The ``top`` items the judges disagree on most on ``metric``: spread (max − min of the judges' item scores),
    then population std — ``analysis.jury.disagreements`` — with each judge's score (``judges`` order, as
    columns named by judge), the query text and the language. Ties by dataset, query and model."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    inputs = [] if _whole_jury(db, f, judges) else [_judges_items(f, judges)]  # else the writer's rows
    source, p_source = group_source("jury_items", f, inputs=inputs)
    where, params = group_pred(f, "j")
    at = f"list_position(string_split(per.judge_set, chr({ord(JUDGE_SET_SEP)})), ?)"
    out = df(db, (
        f"WITH per AS (SELECT j.dataset, j.query_id, j.model_id, j.query_language AS language, "
        f"j.{metric}_n AS n_judges, j.{metric}_min AS min, j.{metric}_max AS max, "
        f"j.{metric}_max - j.{metric}_min AS spread, j.{metric}_std AS std, j.{metric}_mean AS mean, j.judge_set, "
        f"j.{metric}_scores AS scores FROM {source} j WHERE {where} AND j.{metric}_n > 0 "
        "ORDER BY spread DESC, std DESC, j.dataset, j.query_id, j.model_id LIMIT ?) "
        "SELECT per.* EXCLUDE (judge_set, scores), "
        + ", ".join(f"per.scores[{at}] AS s{k}" for k in range(len(judges))) + ", q.query FROM per "
        "JOIN queries q USING (dataset, query_id) ORDER BY spread DESC, std DESC, dataset, query_id, model_id"
    ), [*p_source, *params, int(top), *judges])
    return out.rename(columns={f"s{k}": j for k, j in enumerate(judges)})


def _judges_of(db: str | Path, dataset: str | None) -> list[str]:
    """Every judge that scored ``dataset`` (None: any dataset): the judges a row of ``jury_items`` is made of."""
    pred, params = ("dataset = ?", [dataset]) if dataset is not None else ("TRUE", [])
    return [j for (j,) in df(db, f"SELECT DISTINCT judge_id FROM score_groups WHERE {pred}",
                             params).itertuples(index=False)]


def judge_matrix(db: str | Path, f: Filters, judges: tuple[str, ...], metric: str) -> pd.DataFrame:
    """Items × judges: each judge's item score on ``metric`` (NaN: not scored), indexed by (dataset, query, model).
    What ``analysis.jury`` takes; for small views and tests (the pages use the counted patterns)."""
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "i")
    long = df(db, (f"WITH {qf} SELECT i.dataset, i.query_id, i.model_id, i.judge_id, i.{metric} AS score "
                   f"FROM item_scores i JOIN qf ON {on_qf(f, 'i')} WHERE list_contains(?, i.judge_id) AND {pred}"),
              [*p_qf, list(judges), *p_model])
    wide = long.pivot_table(index=["dataset", "query_id", "model_id"], columns="judge_id", values="score",
                            aggfunc="first", dropna=False)
    return wide.reindex(columns=list(judges)).sort_index()
