"""Calls, tokens and cost of every run, per stage and model, from what the runs recorded; read-only.

Where the numbers come from, per run (``source`` column), the first that is complete:

1. ``summary`` — ``runs.summary``: one record per stage and model (``pipeline.steps.context.StageRecord``)
   with the backend calls, cache hits and, since token accounting, the prompt and completion tokens of
   the completions the backend made. Complete for every LLM stage of runs written by this version.
2. ``responses`` — a run whose summary has no token totals (older versions) or no summary at all (a
   synthetic database): the ``generate`` stage's tokens are the sums over the ``responses`` rows that
   run wrote and did not take from the cache (each response row records its call's tokens). Rows a later
   run regenerated are no longer there, so an old run may be undercounted.
3. ``llm_cache`` — for such a run's other LLM stages: the cache rows of the model written inside the
   run's time window (every successful backend call leaves one, with its tokens), minus what
   ``responses`` already attributed to the model's ``generate`` stage — used only when one stage of
   the model is left to attribute them to; else the tokens stay NULL.

Cost = prompt tokens × input price + completion tokens × output price, prices in $ per 1M tokens from
the run's own stored config (``prices:``). Cached calls cost nothing. A model without a price costs 0
when its backend is not billed per token (``Backend.billed``: llama.cpp, extractive, vLLM; tokens still shown)
and NULL (unknown) otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.models import backend_class
from pipeline.store import SHARED_READERS

COLUMNS = ["run_id", "run_name", "kind", "dataset", "started_at", "stage", "model_id", "calls", "cached",
           "prompt_tokens", "completion_tokens", "price_input", "price_output", "cost", "source"]
_INT_COLUMNS = ("calls", "cached", "prompt_tokens", "completion_tokens")


def cost_of(model_id: str, prices: dict[str, Any], prompt_tokens: int | None,
            completion_tokens: int | None) -> float | None:
    """Dollars for the tokens at ``prices[model_id]`` ({input, output}: $ per 1M tokens); 0 for an in-process
    model without a price; None when the price or the tokens are unknown."""
    price = prices.get(model_id)
    if price is None:
        backend = backend_class(model_id.split("/", 1)[0])
        return 0.0 if backend is not None and not backend.billed else None
    if prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * float(price["input"]) + completion_tokens * float(price["output"])) / 1e6


def _loads(text: str | None, default: Any) -> Any:
    try:
        value = json.loads(text) if text else default
    except (TypeError, ValueError):
        return default
    return value if isinstance(value, type(default)) else default


def _prices(config: str | None) -> dict[str, dict[str, float]]:
    prices = _loads(config, {}).get("prices") or {}
    return {m: p for m, p in prices.items() if isinstance(p, dict) and {"input", "output"} <= set(p)}


def _summary_groups(summary: str | None) -> dict[tuple[str, str], dict[str, Any]]:
    """(stage, model) → calls, cached and tokens (None when a record predates token accounting) of the
    summary's LLM records (a stage may record one model several times: Med-CoDE blocks)."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in _loads(summary, []):
        if not isinstance(rec, dict) or not (rec.get("backend_calls") or rec.get("cache_hits")):
            continue  # a non-LLM stage, or nothing left to do
        g = groups.setdefault((str(rec.get("stage")), str(rec.get("model_id"))),
                              {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0})
        g["calls"] += int(rec.get("backend_calls") or 0)
        g["cached"] += int(rec.get("cache_hits") or 0)
        for col in ("prompt_tokens", "completion_tokens"):
            g[col] = None if g[col] is None or rec.get(col) is None else g[col] + int(rec[col])
    for g in groups.values():
        g["source"] = "summary" if g["prompt_tokens"] is not None else None
    return groups


def _from_responses(con, run_ids: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    if not run_ids:
        return {}
    rows = con.execute(
        "SELECT run_id, model_id, count(*) FILTER (WHERE NOT cached) AS calls, "
        "count(*) FILTER (WHERE cached) AS cached, "
        "coalesce(sum(prompt_tokens) FILTER (WHERE NOT cached), 0) AS prompt_tokens, "
        "coalesce(sum(completion_tokens) FILTER (WHERE NOT cached), 0) AS completion_tokens "
        "FROM responses WHERE list_contains(?, run_id) GROUP BY ALL", [run_ids]).fetchall()
    return {(r[0], r[1]): {"calls": r[2], "cached": r[3], "prompt_tokens": int(r[4]), "completion_tokens": int(r[5])}
            for r in rows}


def _fill_from_cache(con, run, groups: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Tokens of a run's unaccounted stages from the model's cache rows in the run's window (see the docstring)."""
    for model in sorted({m for _, m in groups}):
        mine = {stage: g for (stage, m), g in groups.items() if m == model}
        unknown = [stage for stage, g in mine.items() if g["prompt_tokens"] is None]
        if len(unknown) != 1 or pd.isna(run.finished_at):
            continue
        n, prompt, completion = con.execute(
            "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM llm_cache "
            "WHERE model_id = ? AND created_at BETWEEN ? AND ?", [model, run.started_at, run.finished_at]).fetchone()
        known = [g for g in mine.values() if g["prompt_tokens"] is not None]
        prompt -= sum(g["prompt_tokens"] for g in known)
        completion -= sum(g["completion_tokens"] for g in known)
        if n and prompt >= 0 and completion >= 0:
            mine[unknown[0]].update(prompt_tokens=int(prompt), completion_tokens=int(completion), source="llm_cache")


def cost_table(db: str | Path) -> pd.DataFrame:
    """One row per run × stage × model that made LLM calls (or took them from the cache), runs in start order.

    Columns: ``run_id``, ``run_name``, ``kind`` (pipeline, playground), ``dataset``, ``started_at``, ``stage``,
    ``model_id``, ``calls`` (backend calls, retries included), ``cached`` (served from the cache, free),
    ``prompt_tokens`` and ``completion_tokens`` (of the backend's completions; NULL when not recorded),
    ``price_input`` and ``price_output`` ($ per 1M tokens, NULL without a price), ``cost`` ($; 0 for an
    in-process model without a price, NULL when unknown) and ``source`` (summary, responses, llm_cache or
    NULL: where the tokens come from).
    """
    out: list[dict[str, Any]] = []
    with SHARED_READERS.cursor(db) as con:
        runs = con.execute("SELECT run_id, name, kind, dataset, started_at, finished_at, config, summary FROM runs "
                           "ORDER BY started_at, run_id").df()
        per_run = {run.run_id: _summary_groups(run.summary) for run in runs.itertuples()}
        old = [r for r, groups in per_run.items() if not groups or any(g["source"] is None for g in groups.values())]
        responses = _from_responses(con, old)
        for run in runs.itertuples():
            groups = per_run[run.run_id]
            if run.run_id in old:
                for (rid, model), fallback in responses.items():
                    if rid != run.run_id:
                        continue
                    g = groups.get(("generate", model))
                    if g is None:  # no summary record at all: the responses are all we know
                        groups[("generate", model)] = {**fallback, "source": "responses"}
                    elif g["source"] is None:
                        g.update(prompt_tokens=fallback["prompt_tokens"],
                                 completion_tokens=fallback["completion_tokens"], source="responses")
                if any(g["source"] is None for g in groups.values()):
                    _fill_from_cache(con, run, groups)
            prices = _prices(run.config)
            for (stage, model), g in groups.items():
                price = prices.get(model) or {}
                out.append({"run_id": run.run_id, "run_name": run.name, "kind": run.kind, "dataset": run.dataset,
                            "started_at": run.started_at, "stage": stage, "model_id": model, "calls": g["calls"],
                            "cached": g["cached"], "prompt_tokens": g["prompt_tokens"],
                            "completion_tokens": g["completion_tokens"], "price_input": price.get("input"),
                            "price_output": price.get("output"),
                            "cost": cost_of(model, prices, g["prompt_tokens"], g["completion_tokens"]),
                            "source": g["source"]})
    frame = pd.DataFrame(out, columns=COLUMNS)
    for col in _INT_COLUMNS:
        frame[col] = frame[col].astype("Int64")
    for col in ("price_input", "price_output", "cost"):
        frame[col] = frame[col].astype("Float64")
    return frame


def _totals(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    frame = frame.assign(unpriced_calls=frame.calls.where(frame.cost.isna(), 0))
    groups = frame.groupby(by, sort=True, dropna=False)
    out = groups[["calls", "cached"]].sum()
    known = groups[["prompt_tokens", "completion_tokens", "cost"]].sum(min_count=1)  # NULL when none is known
    out = pd.concat([groups.run_id.nunique().rename("runs"), out, known, groups.unpriced_calls.sum()], axis=1)
    return out.reset_index()


def cost_by_model(db: str | Path, dataset: str | None = None) -> pd.DataFrame:
    """Per model (over every run and stage, of ``dataset`` or all): ``model_id``, ``runs``, ``calls``, ``cached``,
    ``prompt_tokens``, ``completion_tokens``, ``cost`` (the sum of the known costs; NULL when none is known) and
    ``unpriced_calls`` (backend calls whose cost is unknown: no price for an API model, or tokens not recorded)."""
    frame = cost_table(db)
    if dataset is not None:
        frame = frame[frame.dataset == dataset]
    return _totals(frame, ["model_id"])


def cost_by_stage(db: str | Path, dataset: str | None = None) -> pd.DataFrame:
    """Per stage (generate, judge, rubric, medcode …, over every run and model): ``stage`` and the totals of
    ``cost_by_model``."""
    frame = cost_table(db)
    if dataset is not None:
        frame = frame[frame.dataset == dataset]
    return _totals(frame, ["stage"])


def cost_by_run(db: str | Path, dataset: str | None = None) -> pd.DataFrame:
    """Per run (newest first): ``run_id``, ``run_name``, ``dataset``, ``started_at`` and the totals of
    ``cost_by_model``."""
    frame = cost_table(db)
    if dataset is not None:
        frame = frame[frame.dataset == dataset]
    out = _totals(frame, ["run_id", "run_name", "dataset", "started_at"])
    return out.drop(columns="runs").sort_values("started_at", ascending=False, ignore_index=True)
