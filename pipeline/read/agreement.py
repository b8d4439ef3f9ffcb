"""The Human vs LLM page: human labels against the judge, rankings side by side, and the annotation queue.

The judge's side of a pair is the item's score in ``item_scores`` (the mean of its parsed samples
of the current response text), rounded to the 0–2 scale; a label of an item the judge has not
scored (unparsed, stale or errored) pairs with nothing.

A human-evaluation plan (``python -m pipeline human-eval plan``, table ``annotation_plans``) fixes
the sample: with ``plan`` given, agreement, rankings and the annotation queue use exactly the plan's
items (its dataset, models and queries, its metric), whatever the sidebar's filters; ``plan_progress``
says how complete it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.analysis.agreement import ranking_comparison, weighted_kappa
from pipeline.metrics import METRICS
from pipeline.read.common import (
    Filters,
    group_pred,
    group_source,
    metric_case,
    model_pred,
    on_qf,
    queries_cte,
)
from pipeline.read.responses import has_table, renderings
from pipeline.read.review import facts_pred
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


def _in_plan(alias: str, metric: str = "metric") -> str:
    """SQL: the (dataset, query, model, metric) of per-item table ``alias`` is an item of the plan (parameter)."""
    return (f"EXISTS (SELECT 1 FROM annotation_plans p WHERE p.plan_id = ? AND p.dataset = {alias}.dataset "
            f"AND p.query_id = {alias}.query_id AND p.model_id = {alias}.model_id AND p.metric = {alias}.{metric})")


def _pairs_cte(f: Filters, judge: str, metric: str, plan: str | None = None) -> tuple[str, list[Any]]:
    """``pairs``: each human label of ``metric`` with the judge's rounded item score of the same item (only the
    plan's items when ``plan`` is given; then the plan alone selects them), from the writer's ``label_pairs``."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    if plan is not None:
        f = Filters(dataset=f.dataset)
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "l")
    planned, p_plan = (f" AND {_in_plan('l', 'label_metric')}", [plan]) if plan is not None else ("", [])
    return (
        f"{qf}, pairs AS (SELECT language, model_id, query_id, unnest(annotators) AS annotator, "
        "unnest(humans) AS human, llm FROM (SELECT qf.language, l.model_id, l.query_id, l.annotators, l.humans, "
        f"round(l.llm) AS llm FROM label_pairs l JOIN qf ON {on_qf(f, 'l')} WHERE l.label_metric = ? "
        f"AND l.judge_id = ? AND l.llm IS NOT NULL AND {pred}{planned}))"
    ), [*p_qf, metric, judge, *p_model, *p_plan]


def plans(db: str | Path, dataset: str | None = None) -> pd.DataFrame:
    """The human-evaluation plans (of one dataset): plan_id, dataset, metric, annotators, seed, items, queries,
    models, languages (list), created_at; newest first."""
    where, params = ("WHERE dataset = ?", [dataset]) if dataset is not None else ("", [])
    columns = ["plan_id", "dataset", "metric", "annotators", "seed", "items", "queries", "models", "languages",
               "created_at"]
    with SHARED_READERS.cursor(db) as con:
        if not has_table(con, "annotation_plans"):
            return pd.DataFrame(columns=columns)
        return con.execute(
            "SELECT plan_id, any_value(dataset) AS dataset, any_value(metric) AS metric, "
            "max(annotators) AS annotators, any_value(seed) AS seed, count(*) AS items, "
            "count(DISTINCT query_id) AS queries, count(DISTINCT model_id) AS models, "
            "list_sort(list(DISTINCT language)) AS languages, max(created_at) AS created_at "
            f"FROM annotation_plans {where} GROUP BY plan_id ORDER BY created_at DESC, plan_id", params).df()


def plan_progress(db: str | Path, plan: str, judge: str | None = None) -> pd.DataFrame:
    """How complete a plan is, per language and over all (``language`` = ``all``): ``items`` planned,
    ``labelled`` items (at least one label of the plan's metric), ``labels`` given (at most ``annotators`` per
    item counted) of ``labels_planned`` (items × annotators), ``judged`` items the judge scored on the plan's
    metric (NULL without a judge), and ``complete`` (labels / labels planned)."""
    judged = ("EXISTS (SELECT 1 FROM item_scores i WHERE i.dataset = p.dataset AND i.query_id = p.query_id "
              f"AND i.model_id = p.model_id AND i.judge_id = ? AND {metric_case('p.metric', 'i')} IS NOT NULL)"
              if judge else "NULL::BOOLEAN")
    sql = (
        "WITH per AS (SELECT p.language, p.dataset, p.query_id, p.model_id, p.metric, p.annotators, "
        "least(count(h.score), p.annotators) AS labels FROM annotation_plans p LEFT JOIN human_labels h "
        "ON h.dataset = p.dataset AND h.query_id = p.query_id AND h.model_id = p.model_id AND h.metric = p.metric "
        "AND h.score IS NOT NULL WHERE p.plan_id = ? GROUP BY p.language, p.dataset, p.query_id, p.model_id, p.metric, "
        "p.annotators), "
        f"per_j AS (SELECT p.*, {judged} AS judged FROM per p) "
        "SELECT coalesce(language, 'all') AS language, count(*) AS items, count(*) FILTER (WHERE labels > 0) "
        "AS labelled, sum(labels)::BIGINT AS labels, sum(annotators)::BIGINT AS labels_planned, "
        "(CASE WHEN bool_and(judged IS NULL) THEN NULL ELSE count(*) FILTER (WHERE judged) END)::BIGINT AS judged "
        "FROM per_j GROUP BY GROUPING SETS ((language), ()) ORDER BY language IS NULL, language")
    with SHARED_READERS.cursor(db) as con:
        if not has_table(con, "annotation_plans"):
            return pd.DataFrame(columns=["language", "items", "labelled", "labels", "labels_planned", "judged",
                                         "complete"])
        out = con.execute(sql, [plan, *([judge] if judge else [])]).df()
    out["complete"] = out["labels"] / out["labels_planned"].where(out["labels_planned"] > 0)
    return out


def agreement_view(db: str | Path, f: Filters, judge: str, metric: str,
                   plan: str | None = None) -> dict[str, pd.DataFrame]:
    """Human labels vs the judge in one short connection (on exactly the plan's items when ``plan`` is given).

    ``table``: per language and model (and per language over all models) n, percentage agreement
    and weighted kappa. ``ranks``: per (language, model) mean human and judge scores on the same
    items and both ranks. ``summary``: per language whether the rankings are identical and Kendall's
    tau (``pipeline.analysis.agreement.ranking_comparison``).
    """
    cte, params = _pairs_cte(f, judge, metric, plan)
    with SHARED_READERS.cursor(db) as con:
        confusion = con.execute(f"WITH {cte} SELECT language, model_id, human, llm, count(*) AS n FROM pairs "
                                "GROUP BY ALL", params).df()
    # the means from the same counts (one pass over the labels): Σ score·n / Σ n per language and model
    means = (confusion.assign(human_sum=confusion.human * confusion.n, llm_sum=confusion.llm * confusion.n)
             .groupby(["language", "model_id"], sort=False, as_index=False)[["n", "human_sum", "llm_sum"]].sum())
    means = means.assign(human_mean=means.human_sum / means.n, llm_mean=means.llm_sum / means.n)[
        ["language", "model_id", "n", "human_mean", "llm_mean"]]
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
                     skip: tuple[str, ...] = (), plan: str | None = None) -> tuple[int, int, pd.DataFrame]:
    """(labelled, total, next item) for an annotator and metric, in one connection.

    Items are the filtered responses without an error (with ``plan``: the plan's items of ``metric``, whatever
    the filters); the next one is the first unlabelled and unskipped item in a fixed shuffled order. The item
    carries the query's English rendering and its source, its machine rendering (``query_mt``, ``query_mt_by``)
    and the response's current machine English rendering (``rendering``, ``rendering_by``; None without one).
    """
    if plan is None:  # the filtered responses without an error: the rows of ``review_facts`` (no join to queries)
        where, p_items = facts_pred(f)
        items = ("items AS (SELECT v.dataset, v.query_id, v.model_id, v.query_language AS language "
                 f"FROM review_facts v WHERE {where})")
    else:
        items, p_items = ("items AS (SELECT p.dataset, p.query_id, p.model_id, p.language FROM annotation_plans p "
                          "JOIN responses r ON r.dataset = p.dataset AND r.query_id = p.query_id "
                          "AND r.model_id = p.model_id WHERE p.plan_id = ? AND p.metric = ? AND r.error IS NULL)",
                          [plan, metric])
    with SHARED_READERS.cursor(db) as con:
        if plan is None:  # the total from the writer's counts (``group_source``), the labels from the few labelled
            source, p_source = group_source("response_groups", f)
            pred, p_group = group_pred(f, "g")
            where, p_where = f.sql()
            total = con.execute(f"SELECT coalesce(sum(g.responses - g.errors), 0) FROM {source} g "
                                f"WHERE {pred}", [*p_source, *p_group]).fetchone()[0]
            done = con.execute(
                "SELECT count(*) FROM human_labels h JOIN responses r ON r.dataset = h.dataset AND r.query_id = "
                "h.query_id AND r.model_id = h.model_id JOIN queries q ON q.dataset = r.dataset AND q.query_id = "
                "r.query_id WHERE h.metric = ? AND h.annotator = ? AND h.score IS NOT NULL AND r.error IS NULL "
                f"AND {where}", [metric, annotator, *p_where]).fetchone()[0]
        else:
            done, total = con.execute(
                f"WITH {items} SELECT count(h.score) AS done, count(*) AS total FROM items i LEFT JOIN human_labels h "
                "ON h.dataset = i.dataset AND h.query_id = i.query_id AND h.model_id = i.model_id AND h.metric = ? "
                "AND h.annotator = ?", [*p_items, metric, annotator]).fetchone()
        pick = con.execute(
            f"WITH {items} SELECT i.dataset, i.query_id, i.model_id, i.language FROM items i "
            "WHERE NOT EXISTS (SELECT 1 FROM human_labels h WHERE h.dataset = i.dataset AND h.query_id = i.query_id "
            "AND h.model_id = i.model_id AND h.metric = ? AND h.annotator = ?) "
            "AND NOT list_contains(?::VARCHAR[], i.query_id || '|' || i.model_id) "
            "ORDER BY hash(i.query_id || '|' || i.model_id), i.query_id, i.model_id LIMIT 1",
            [*p_items, metric, annotator, list(skip)]).fetchall()
        # the one item's texts by its key (a join would read every response's text first)
        queue = con.execute(
            "SELECT r.dataset, r.query_id, r.model_id, ?::VARCHAR AS language, q.query, q.query_en, "
            "q.query_en_source, q.gt_response, r.text, r.error FROM responses r JOIN queries q ON q.dataset = "
            "r.dataset AND q.query_id = r.query_id WHERE r.dataset = ? AND r.query_id = ? AND r.model_id = ? "
            "AND q.dataset = ? AND q.query_id = ?",
            [pick[0][3], *pick[0][:3], *pick[0][:2]] if pick else [None] * 6).df()
        dataset = str(queue.dataset.iloc[0]) if not queue.empty else ""
        queue, translated = renderings(con, dataset, queue)
    current = translated[translated.current & translated.error.isna()] if not translated.empty else translated
    first = current.iloc[0] if not current.empty else None
    queue = queue.assign(rendering=None if first is None else first.text,
                         rendering_by=None if first is None else first.translator_id)
    return int(done), int(total), queue.drop(columns=["error"])
