"""The home page and the sidebar: what the database holds, its runs, its judges; the CLI's ``status`` tables."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from pipeline.metrics import DEFAULT_WEIGHTS, METRICS
from pipeline.read.agreement import agreement_from_confusion
from pipeline.read.common import PLAYGROUND, dfs, has_columns, schema_version, upgrade_notice
from pipeline.store import DERIVED, SCHEMA_VERSION, SHARED_READERS
from pipeline.store.rows import now
from pipeline.store.runlock import lock_holder, shown_status

STALE_S = 600  # a running run that has reported no progress for this long may have been stopped without a word
LIVE_COLUMNS = ["stage", "model_id", "done", "items", "skipped", "errors", "wall_s", "eta_s", "live"]
# per (dataset, model): answers, errors, mean latency and completion tokens, the KB the latest run saw
# (``datasets.kb_hash``) and how many answers came from another one (an older KB, or one not recorded: written before
# results recorded their KB). The answers from another KB are counted apart, joined only to the datasets that record
# a KB, so a file that records none pays almost nothing for them.
_PER_MODEL = ("SELECT dataset, model_id, count(*) AS responses, count(error) AS errors, "
              "round(avg(latency_s), 2) AS mean_latency_s, sum(completion_tokens) AS completion_tokens "
              "FROM responses GROUP BY ALL")
KB_USED = (f"SELECT m.*, d.kb_hash AS kb, coalesce(o.other_kb, 0)::BIGINT AS other_kb FROM ({_PER_MODEL}) m "
           "LEFT JOIN datasets d ON d.name = m.dataset LEFT JOIN (SELECT r.dataset, r.model_id, count(*) AS other_kb "
           "FROM responses r JOIN datasets d ON d.name = r.dataset AND d.kb_hash IS NOT NULL "
           "WHERE r.kb_hash IS DISTINCT FROM d.kb_hash GROUP BY ALL) o USING (dataset, model_id)")
# a file of schema 10 or older: no KB recorded
KB_UNRECORDED = f"SELECT m.*, NULL::VARCHAR AS kb, 0::BIGINT AS other_kb FROM ({_PER_MODEL}) m"


def kb_used(db: str | Path) -> str:
    """``KB_USED``, or ``KB_UNRECORDED`` for an older file whose responses and datasets have no ``kb_hash``."""
    recorded = has_columns(db, "responses", "kb_hash") and has_columns(db, "datasets", "kb_hash")
    return KB_USED if recorded else KB_UNRECORDED


def _frames(db: str | Path, statements: Callable[[str], list[tuple[str, list[Any]]]]) -> list[pd.DataFrame]:
    """``statements(kb)`` (``kb``: what ``kb_used`` gives for this file) run on one connection, as frames."""
    kb = kb_used(db)
    with SHARED_READERS.cursor(db) as con:
        return [con.execute(sql, params).df() for sql, params in statements(kb)]


def choices(db: str | Path) -> dict[str, Any]:
    """Datasets (most responses first, the playground last) and per dataset its languages, models, judges.

    Counts come from the writer's group tables (``response_groups``, ``score_groups``), not the row tables;
    an older file without one of the derived tables raises ``duckdb.CatalogException`` with the upgrade notice
    (the sidebar shows it instead of pages that cannot be read). Also the latest pipeline run's config per
    dataset, and ``notice``: one line when the file was written by an older version (``upgrade_notice``; None
    when current). Reading never upgrades.
    """
    with SHARED_READERS.cursor(db) as con:
        version = schema_version(con)
        if 0 < version < SCHEMA_VERSION:  # an older file may lack a derived table the pages read: say so first
            tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            if missing := sorted(set(DERIVED) - tables):
                raise duckdb.CatalogException(f"{db} has no {', '.join(missing)}: {upgrade_notice(db, version)}")
        datasets, langs, models, judges, configs = (con.execute(sql, params).df() for sql, params in [
            ("SELECT d.name, coalesce(sum(g.responses), 0)::BIGINT AS n FROM datasets d LEFT JOIN response_groups g "
             "ON g.dataset = d.name GROUP BY d.name ORDER BY (d.name = ?), n DESC, d.name", [PLAYGROUND]),
            ("SELECT dataset, language, count(*) AS n FROM queries GROUP BY ALL ORDER BY dataset, n DESC", []),
            ("SELECT dataset, model_id, sum(responses)::BIGINT AS n FROM response_groups GROUP BY ALL "
             "ORDER BY dataset, model_id", []),
            ("SELECT dataset, judge_id, sum(list_sum(judgments))::BIGINT AS n FROM score_groups GROUP BY ALL "
             "ORDER BY dataset, n DESC", []),
            ("SELECT dataset, arg_max(config, started_at) AS config, max(started_at) AS started FROM runs "
             "WHERE kind = 'pipeline' AND config IS NOT NULL GROUP BY dataset ORDER BY started DESC", []),
        ])
    return {
        "configs": {d: c for d, c in zip(configs.dataset, configs.config, strict=True)},
        "latest_config": configs.config.iloc[0] if len(configs) else None,
        "datasets": datasets.name.tolist(),
        "languages": {d: g.language.tolist() for d, g in langs.groupby("dataset", sort=False)},
        "models": {d: g.model_id.tolist() for d, g in models.groupby("dataset", sort=False)},
        "judges": {d: g.judge_id.tolist() for d, g in judges.groupby("dataset", sort=False)},
        "schema_version": version,
        "notice": upgrade_notice(db, version),
    }


def run_config(choices: dict[str, Any], dataset: str | None) -> dict[str, Any]:
    """The config of the latest pipeline run of ``dataset`` (any dataset if None), parsed; {} if none."""
    raw = choices["configs"].get(dataset) if dataset else choices["latest_config"]
    try:
        return json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return {}


def run_weights(choices: dict[str, Any], dataset: str | None) -> dict[str, float]:
    """AGG weights of the latest run's config (the registry's defaults when absent)."""
    weights = run_config(choices, dataset).get("weights") or DEFAULT_WEIGHTS
    if not isinstance(weights, dict):  # a preset name the config resolved at run time
        weights = DEFAULT_WEIGHTS
    return {m: float(weights.get(m, 0.0)) for m in METRICS}


def judge_in_use(choices: dict[str, Any], dataset: str | None) -> str | None:
    """The judge of the latest run's config if it judged this dataset, else the most-used judge."""
    judges = choices["judges"].get(dataset, []) if dataset else []
    configured = (run_config(choices, dataset).get("judge") or {}).get("id")
    if configured and (configured in judges or not judges):
        return configured
    return judges[0] if judges else configured


def overview(db: str | Path) -> dict[str, pd.DataFrame]:
    """What the database holds: datasets, runs, models, counts per language (responses from ``response_groups``)."""
    datasets, runs, per_language, models = _frames(db, lambda kb: [
        ("SELECT name AS dataset, closed_book, n_queries, n_chunks, path, loaded_at FROM datasets ORDER BY name", []),
        ("SELECT run_id, name, kind, dataset, status, started_at, finished_at, "
         "date_diff('second', started_at, coalesce(finished_at, now()::TIMESTAMP)) AS seconds, "
         "backend_calls, cache_hits, retries, errors FROM runs ORDER BY started_at DESC LIMIT 50", []),
        ("WITH q AS (SELECT dataset, language, count(*) AS queries FROM queries GROUP BY ALL), "
         "g AS (SELECT dataset, query_language AS language, sum(responses)::BIGINT AS responses, "
         "count(DISTINCT model_id) FILTER (WHERE responses > 0) AS models FROM response_groups GROUP BY ALL) "
         "SELECT q.dataset, q.language, q.queries, coalesce(g.responses, 0) AS responses, "
         "coalesce(g.models, 0) AS models FROM q LEFT JOIN g USING (dataset, language) "
         "ORDER BY q.dataset, queries DESC", []),
        (f"SELECT * FROM ({kb}) ORDER BY dataset, model_id", []),
    ])
    return {"datasets": datasets, "runs": with_live_status(db, runs), "per_language": per_language, "models": models}


def kb_notes(models: pd.DataFrame) -> list[str]:
    """One line per dataset whose stored answers did not all come from its knowledge base as the latest run saw it
    (``models``: a frame with ``KB_USED``'s columns); none when every answer did."""
    notes = []
    for dataset, group in models[models.other_kb > 0].groupby("dataset", sort=True):
        notes.append(f"{dataset}: {int(group.other_kb.sum())} of {int(group.responses.sum())} answers come from "
                     f"another knowledge base than the one the latest run saw ({group.kb.iloc[0]}); they were "
                     "not asked again. Rerun the config (retrieval runs again and answers whose chunks changed are "
                     "regenerated and rescored), or filter by kb in the export.")
    return notes


def with_live_status(db: str | Path, runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with a run recorded as running shown as interrupted unless it holds the database's lock now (it
    was killed hard: ``pipeline.store.runlock``)."""
    live = lock_holder(db)
    return runs.assign(status=[shown_status(s, r, live) for s, r in zip(runs.status, runs.run_id, strict=True)])


def judge_summary(db: str | Path) -> dict[str, pd.DataFrame]:
    """Judges with their current judgment and parse-failure counts, reliability (sanity AUC), human agreement.

    Counts come from ``score_groups`` (the writer's sums over ``item_scores``: current response texts only), the
    agreement from ``label_pairs`` (each annotator's score beside the judge's item score: the mean of its parsed
    samples, rounded).
    """
    judges, reliability, confusion = dfs(db, [
        ("SELECT dataset, judge_id, sum(list_sum(judgments))::BIGINT AS judgments, "
         "sum(list_sum(unparsed))::BIGINT AS parse_failures, max(list_max(samples)) AS samples FROM score_groups "
         "GROUP BY ALL ORDER BY dataset, judgments DESC", []),
        ("SELECT dataset, judge_id, metric, auc, n_good, n_bad, n_unparsed, created_at FROM judge_reliability "
         "ORDER BY dataset, judge_id, metric", []),
        ("SELECT p.dataset, p.judge_id, p.label_metric AS metric, u.human, round(p.llm) AS llm, count(*) AS n "
         "FROM label_pairs p, unnest(p.humans) AS u(human) WHERE p.llm IS NOT NULL GROUP BY ALL", []),
    ])
    agreement = agreement_from_confusion(confusion, ["dataset", "judge_id", "metric"])
    return {"judges": judges, "reliability": reliability, "agreement": agreement}


def database_status(db: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``python -m pipeline status``: runs (a killed one shown as interrupted), and per dataset and model the rows
    stored (responses, errors, the KB the latest run saw and the answers from another one (``KB_USED``),
    judgments and those unparsed, rubric grades and those unparsed, critiques), whatever their response text."""
    runs, models = _frames(db, lambda kb: [
        ("SELECT run_id, name, kind, dataset, status, strftime(started_at, '%Y-%m-%d %H:%M:%S') AS started, "
         "date_diff('second', started_at, finished_at) AS seconds, backend_calls, cache_hits, retries, errors "
         "FROM runs ORDER BY started_at", []),
        (f"WITH r AS ({kb}), "
         "j AS (SELECT dataset, model_id, count(*) AS judgments, "
         "count(*) FILTER (WHERE NOT parse_ok) AS parse_failures FROM judgments GROUP BY ALL), "
         "c AS (SELECT dataset, model_id, count(*) AS critiques FROM critiques GROUP BY ALL), "
         "g AS (SELECT dataset, model_id, count(*) AS rubric_grades, count(*) FILTER (WHERE met IS NULL) "
         "AS rubric_unparsed FROM rubric_grades GROUP BY ALL) "
         "SELECT r.dataset, r.model_id, r.responses, r.errors, r.kb, r.other_kb, "
         "coalesce(j.judgments, 0) AS judgments, "
         "coalesce(j.parse_failures, 0) AS parse_failures, coalesce(g.rubric_grades, 0) AS rubric_grades, "
         "coalesce(g.rubric_unparsed, 0) AS rubric_unparsed, coalesce(c.critiques, 0) AS critiques FROM r "
         "LEFT JOIN j USING (dataset, model_id) LEFT JOIN c USING (dataset, model_id) "
         "LEFT JOIN g USING (dataset, model_id) ORDER BY r.dataset, r.model_id", []),
    ])
    return with_live_status(db, runs), models


def stage_tables(db: str | Path, writers: Mapping[str, str]) -> pd.DataFrame:
    """``python -m pipeline status``: per table a stage writes (``writers``: table → stage, the catalog's) the rows
    this file holds (0 where it has no such table yet)."""
    with SHARED_READERS.cursor(db) as con:
        have = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] if t in have else 0 for t in writers}
    return pd.DataFrame({"stage": list(writers.values()), "table": list(writers), "rows": list(counts.values())})


def live_run(db: str | Path) -> dict[str, Any] | None:
    """The newest pipeline run still marked running, as its progress says (``RunContext.save_progress``: the
    ``runs`` row is updated with every batch), or None. ``stages``: per stage and model what is done of how many
    items, its errors, seconds so far and, for a stage still running, the seconds left at its pace so far
    (``eta_s``; None before its first item); ``stale``: no progress for ``STALE_S``."""
    with SHARED_READERS.cursor(db) as con:
        row = con.execute("SELECT run_id, name, dataset, started_at, summary, errors FROM runs WHERE status = "
                          "'running' AND kind = 'pipeline' ORDER BY started_at DESC LIMIT 1").fetchone()
    if row is None or lock_holder(db) is None:  # no run holds the lock: one still marked running was killed
        return None
    run_id, name, dataset, started_at, summary, errors = row
    try:
        records = json.loads(summary) if summary else []
    except ValueError:
        records = []
    records = records if isinstance(records, list) else []
    stages = pd.DataFrame([{k: r.get(k) for k in LIVE_COLUMNS} for r in records if isinstance(r, dict)],
                          columns=LIVE_COLUMNS)
    stages["live"] = stages.live.fillna(False).astype(bool)
    done, items = stages.done.fillna(stages["items"]), stages["items"]  # an older record has no ``done``
    pace = stages.wall_s / done.where(done > 0)
    stages["done"] = done
    stages["eta_s"] = (pace * (items - done)).where(stages.live)
    elapsed_s = (now() - started_at).total_seconds()
    updated = [r.get("updated_at") for r in records if isinstance(r, dict) and r.get("updated_at")]
    quiet_s = time.time() - max(updated) if updated else elapsed_s
    return {"run_id": run_id, "name": name, "dataset": dataset, "elapsed_s": elapsed_s, "errors": int(errors or 0),
            "stages": stages, "quiet_s": quiet_s, "stale": quiet_s > STALE_S}
