"""The Human vs LLM page: human labels against the judge, rankings side by side, and the annotation queue.

The judge's side of a pair is the item's score in ``item_scores`` (the mean of its parsed samples
of the current response text), rounded to the 0–2 scale; a label of an item the judge has not
scored (unparsed, stale or errored) pairs with nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.analysis.agreement import ranking_comparison, weighted_kappa
from pipeline.metrics import METRICS
from pipeline.read.common import Filters, items_cte, model_pred, on_qf, queries_cte
from pipeline.store import SHARED_READERS

PAPER_METRIC = "SS"  # Health-Pariksha compared humans and the judge on Semantic Similarity
ALL_MODELS = "(all models)"


def agreement_from_confusion(confusion: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Percentage agreement and linearly weighted kappa per group from (human, llm, n) counts."""
    if confusion.empty:
        return pd.DataFrame(columns=[*by, "n", "agreement", "kappa"])
    rows = []
    valid = confusion[confusion.human.between(0, 2) & confusion.llm.between(0, 2)]
    for key, g in valid.groupby(by, sort=True):
        total = int(g.n.sum())
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)), "n": total,
                     "agreement": float(g.n[g.human == g.llm].sum() / total) if total else np.nan,
                     "kappa": weighted_kappa(g.human, g.llm, counts=g.n)})
    return pd.DataFrame(rows, columns=[*by, "n", "agreement", "kappa"])


def _pairs_cte(f: Filters, judge: str, metric: str) -> tuple[str, list[Any]]:
    """``pairs``: each human label of ``metric`` with the judge's rounded item score of the same item."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "h")
    return (
        f"{qf}, pairs AS (SELECT qf.language, h.model_id, h.query_id, h.annotator, h.score AS human, "
        f"round(i.{metric}) AS llm FROM human_labels h JOIN qf ON {on_qf(f, 'h')} "
        "JOIN item_scores i ON i.dataset = h.dataset AND i.query_id = h.query_id AND i.model_id = h.model_id "
        f"WHERE h.metric = ? AND h.score IS NOT NULL AND i.judge_id = ? AND i.{metric} IS NOT NULL AND {pred})"
    ), [*p_qf, metric, judge, *p_model]


def agreement_view(db: str | Path, f: Filters, judge: str, metric: str) -> dict[str, pd.DataFrame]:
    """Human labels vs the judge in one short connection.

    ``table``: per language and model (and per language over all models) n, percentage agreement
    and weighted kappa. ``ranks``: per (language, model) mean human and judge scores on the same
    items and both ranks. ``summary``: per language whether the rankings are identical and Kendall's
    tau (``pipeline.analysis.agreement.ranking_comparison``).
    """
    cte, params = _pairs_cte(f, judge, metric)
    with SHARED_READERS.cursor(db) as con:
        confusion = con.execute(f"WITH {cte} SELECT language, model_id, human, llm, count(*) AS n FROM pairs "
                                "GROUP BY ALL", params).df()
        means = con.execute(f"WITH {cte} SELECT language, model_id, count(*) AS n, avg(human) AS human_mean, "
                            "avg(llm) AS llm_mean FROM pairs GROUP BY ALL", params).df()
    per_model = agreement_from_confusion(confusion, ["language", "model_id"])
    overall = agreement_from_confusion(confusion.assign(model_id=ALL_MODELS), ["language", "model_id"])
    table = pd.concat([per_model, overall], ignore_index=True)
    if means.empty:
        return {"table": table, "ranks": means.assign(human_rank=[], llm_rank=[]), "summary": pd.DataFrame()}
    means["human_rank"] = means.groupby("language").human_mean.rank(ascending=False, method="min").astype(int)
    means["llm_rank"] = means.groupby("language").llm_mean.rank(ascending=False, method="min").astype(int)
    summary = ranking_comparison(means.rename(columns={"human_mean": "human", "llm_mean": "llm"}))
    return {"table": table, "summary": summary,
            "ranks": means.sort_values(["language", "human_rank", "model_id"]).reset_index(drop=True)}


def annotation_state(db: str | Path, f: Filters, annotator: str, metric: str,
                     skip: tuple[str, ...] = ()) -> tuple[int, int, pd.DataFrame]:
    """(labelled, total, next item) for an annotator and metric, in one connection.

    Items are the filtered responses without an error; the next one is the first unlabelled and
    unskipped item in a fixed shuffled order.
    """
    items, p_items = items_cte(f)
    with SHARED_READERS.cursor(db) as con:
        done, total = con.execute(
            f"WITH {items} SELECT count(h.score) AS done, count(*) AS total FROM items i LEFT JOIN human_labels h "
            "ON h.dataset = i.dataset AND h.query_id = i.query_id AND h.model_id = i.model_id AND h.metric = ? "
            "AND h.annotator = ?", [*p_items, metric, annotator]).fetchone()
        queue = con.execute(
            f"WITH {items}, pick AS (SELECT i.dataset, i.query_id, i.model_id, i.language FROM items i "
            "WHERE NOT EXISTS (SELECT 1 FROM human_labels h WHERE h.dataset = i.dataset AND h.query_id = i.query_id "
            "AND h.model_id = i.model_id AND h.metric = ? AND h.annotator = ?) "
            "AND NOT list_contains(?::VARCHAR[], i.query_id || '|' || i.model_id) "
            "ORDER BY hash(i.query_id || '|' || i.model_id), i.query_id, i.model_id LIMIT 1) "
            "SELECT p.dataset, p.query_id, p.model_id, p.language, q.query, q.query_en, q.gt_response, r.text "
            "FROM pick p JOIN queries q ON q.dataset = p.dataset AND q.query_id = p.query_id "
            "JOIN responses r ON r.dataset = p.dataset AND r.query_id = p.query_id AND r.model_id = p.model_id",
            [*p_items, metric, annotator, list(skip)]).df()
    return int(done), int(total), queue
