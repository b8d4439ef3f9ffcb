"""The themes page: scores per (language, theme, model) and example queries of a theme with every answer.

Scores are ``item_scores``' (each metric's mean over the item's parsed samples, current response
texts only); queries without a theme count as ``(none)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.metrics import METRICS
from pipeline.read.common import Filters, df, model_pred, weights_dict

NO_THEME = "(none)"


def theme_scores(db: str | Path, f: Filters, judge: str) -> pd.DataFrame:
    """Per (language, theme, model): each metric's mean item score and n.

    With a theme filter only those themes are shown. Unparsed judgments are excluded; with several
    samples an item's score is the mean of its parsed samples.
    """
    where, params = f.with_(themes=()).sql(r=None)
    theme_pred, p_theme = ("list_contains(?, th.theme)", [list(f.themes)]) if f.themes else ("TRUE", [])
    pred, p_model = model_pred(f, "i")
    th = (f"th AS (SELECT * FROM (SELECT q.dataset, q.query_id, q.language, unnest(CASE WHEN len(q.themes) = 0 "
          f"THEN ['{NO_THEME}'] ELSE q.themes END) AS theme FROM queries q WHERE {where}) th WHERE {theme_pred})")
    means = ", ".join(f"avg(i.{m}) AS {m}, count(i.{m}) AS n_{m}" for m in METRICS)
    out = df(db, f"WITH {th} SELECT th.language, th.theme, i.model_id, {means} FROM item_scores i JOIN th "
                 f"ON th.dataset = i.dataset AND th.query_id = i.query_id WHERE i.judge_id = ? AND {pred} "
                 "GROUP BY ALL ORDER BY ALL", [*params, *p_theme, judge, *p_model])
    out["n"] = out[[f"n_{m}" for m in METRICS]].max(axis=1)
    return out[["language", "theme", "model_id", "n", *METRICS, *(f"n_{m}" for m in METRICS)]]


def theme_table(scores: pd.DataFrame, weights: tuple[float, ...]) -> pd.DataFrame:
    """``theme_scores`` with AGG (the weighted mean of the metric means) added."""
    if scores.empty:
        return pd.DataFrame(columns=["language", "theme", "model_id", "AGG", *METRICS, "n"])
    w = weights_dict(weights)
    used = [m for m in METRICS if w[m] > 0]
    out = scores.copy()
    out["AGG"] = sum(out[m].astype(float) * w[m] for m in used) if used else np.nan
    return out[["language", "theme", "model_id", "AGG", *METRICS, "n"]]


def theme_examples(db: str | Path, f: Filters, judge: str | None, theme: str, limit: int = 5,
                   offset: int = 0) -> pd.DataFrame:
    """Example queries of a theme and every (filtered) model's answer with its metric scores (NULL: unscored)."""
    where_q, p_q = f.with_(themes=()).sql(r=None)
    theme_pred = "len(q.themes) = 0" if theme == NO_THEME else "list_contains(q.themes, ?)"
    p_theme = [] if theme == NO_THEME else [theme]
    pred, p_model = ("list_contains(?, r.model_id)", [list(f.models)]) if f.models else ("TRUE", [])
    return df(db, (
        f"WITH ex AS (SELECT q.dataset, q.query_id FROM queries q WHERE {where_q} AND {theme_pred} "
        "ORDER BY q.language, q.query_id LIMIT ? OFFSET ?) "
        "SELECT q.query_id, q.language, q.query, q.query_en, q.gt_response, r.model_id, r.text, r.error, "
        + ", ".join(f"i.{m}" for m in METRICS)
        + " FROM ex JOIN queries q ON q.dataset = ex.dataset AND q.query_id = ex.query_id "
        "JOIN responses r ON r.dataset = ex.dataset AND r.query_id = ex.query_id "
        "LEFT JOIN item_scores i ON i.dataset = r.dataset AND i.query_id = r.query_id AND i.model_id = r.model_id "
        f"AND i.judge_id = ? WHERE {pred} ORDER BY q.language, q.query_id, r.model_id"
    ), [*p_q, *p_theme, int(limit), int(offset), judge, *p_model])
