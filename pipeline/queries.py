"""The dashboard's only reader: SQL aggregation in DuckDB, results cached per filter set.

Every function takes the database path and hashable filters, reads through a read-only
connection that it closes at once (``pipeline.store.SHARED_READERS``: a cursor of the instance
the current render holds, or a connection of its own; either waits out a writer's lock) and
returns a small DataFrame. DuckDB does the filtering and GROUP BY; pandas only ever sees
aggregates or one page of rows. Results are cached with ``st.cache_data``; the cache key includes
the database file's size and modification time (and its WAL's), so a write — a pipeline batch,
a human label — shows on the next rerun. ``clear_caches()`` backs the Refresh button.

SQL identifiers come only from fixed lists in this module; every filter value is a parameter.
The dashboard's writes go through ``Store``: a human label here (``save_human_label``), a
playground run in ``pipeline.playground``.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from pipeline.analysis.stats import bootstrap_mean_cis, normalised_weights
from pipeline.config import SAFETY_CHECKS
from pipeline.metrics import DEFAULT_WEIGHTS, METRICS
from pipeline.store import LEXICAL, SCHEMA_VERSION, SHARED_READERS, Store, now

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = REPO_ROOT / "data" / "results.duckdb"
REFERENCE_DIR = REPO_ROOT / "data" / "reference"
PLAYGROUND = "playground"
LEXICAL_LABELS = {"rouge_l": "ROUGE-L", "chrf": "chrF++", "bleu": "BLEU", "meteor": "METEOR", "cosine": "cosine"}
DISAGREEMENT = ("p_none", "p_low", "p_moderate", "p_high")
DISAGREEMENT_LABELS = {"p_none": "None", "p_low": "Low", "p_moderate": "Moderate", "p_high": "High"}
WEAK_JUDGES = ("llamacpp/smollm2-135m-instruct",)  # DESIGN.md: scores a right, a wrong and a refusal alike
AUC_TRUST = 0.75
CACHE_TTL_S = 600
CI_RESAMPLES = 1000  # percentile bootstrap; 1,000 resamples fix a 95% interval's ends to ~±0.01 of its width

F = TypeVar("F", bound=Callable[..., Any])
_CACHED: list[Any] = []


@functools.cache
def _reference_csv(name: str) -> pd.DataFrame:
    """A published table of the papers in data/reference (read once: it ships with the code)."""
    return pd.read_csv(REFERENCE_DIR / name)


# -- database file and connections -----------------------------------------------------------------
def db_path() -> Path:
    """The results database: ``$PARIKSHA_DB``, else ``data/results.duckdb`` of this repository."""
    env = os.environ.get("PARIKSHA_DB")
    return Path(env).expanduser() if env else DEFAULT_DB


def db_exists(db: str | Path) -> bool:
    return Path(db).is_file() and Path(db).stat().st_size > 0


def db_stamp(db: str | Path) -> tuple[int, int, int, int]:
    """Size and mtime of the file and its WAL: changes whenever a writer commits."""
    out = []
    for path in (Path(db), Path(f"{db}.wal")):
        try:
            st_ = path.stat()
            out += [st_.st_size, st_.st_mtime_ns]
        except OSError:
            out += [0, 0]
    return tuple(out)  # type: ignore[return-value]


def _df(db: str | Path, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    """Run one read-only query and close the connection at once."""
    with SHARED_READERS.cursor(db) as con:
        return con.execute(sql, list(params)).df()


def _dfs(db: str | Path, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[pd.DataFrame]:
    """Several read-only queries on one short-lived connection (one consistent snapshot)."""
    with SHARED_READERS.cursor(db) as con:
        return [con.execute(sql, list(params)).df() for sql, params in statements]


def cached_query(fn: F) -> F:
    """``st.cache_data`` keyed by the function's arguments and the database's stamp.

    The wrapper keeps ``.uncached`` (the plain function, for benchmarks) and ``.clear()``.
    """

    def inner(db: str, stamp: tuple, *args: Any, **kwargs: Any) -> Any:
        return fn(db, *args, **kwargs)

    inner.__module__, inner.__qualname__, inner.__name__ = fn.__module__, fn.__qualname__, fn.__name__
    cached = st.cache_data(ttl=CACHE_TTL_S, max_entries=64, show_spinner=False)(inner)

    @functools.wraps(fn)
    def wrapper(db: str | Path, *args: Any, **kwargs: Any) -> Any:
        return cached(str(db), db_stamp(db), *args, **kwargs)

    wrapper.uncached = fn  # type: ignore[attr-defined]
    wrapper.clear = cached.clear  # type: ignore[attr-defined]
    _CACHED.append(cached)
    return wrapper  # type: ignore[return-value]


def clear_caches() -> None:
    """Forget every cached result (the Refresh button; after the app writes)."""
    for cached in _CACHED:
        cached.clear()


# -- filters -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filters:
    """The sidebar's filters. Empty tuples mean "all"; ``dataset=None`` means every dataset."""

    dataset: str | None = None
    languages: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    themes: tuple[str, ...] = ()

    def sql(self, q: str = "q", r: str | None = "r") -> tuple[str, list[Any]]:
        """A WHERE predicate over ``queries`` (alias ``q``) and ``responses`` (alias ``r``)."""
        preds: list[str] = []
        params: list[Any] = []
        if self.dataset is not None:
            preds.append(f"{q}.dataset = ?")
            params.append(self.dataset)
        if self.languages:
            preds.append(f"list_contains(?, {q}.language)")
            params.append(list(self.languages))
        if self.themes:
            preds.append(f"list_has_any({q}.themes, ?)")
            params.append(list(self.themes))
        if self.models and r is not None:
            preds.append(f"list_contains(?, {r}.model_id)")
            params.append(list(self.models))
        return (" AND ".join(preds) or "TRUE"), params

    def with_(self, **changes: Any) -> Filters:
        return Filters(**{**self.__dict__, **changes})


def _items_cte(f: Filters, *, ok_only: bool = True) -> tuple[str, list[Any]]:
    """``items``: the filtered (dataset, query, model) responses, with the query's language."""
    where, params = f.sql()
    ok = " AND r.error IS NULL" if ok_only else ""
    return (
        "items AS (SELECT r.dataset, r.query_id, r.model_id, q.language FROM responses r "
        f"JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id WHERE {where}{ok})"
    ), params


def weights_tuple(weights: dict[str, float] | None) -> tuple[float, ...]:
    """Weights as a hashable tuple in METRICS order (cache keys)."""
    weights = weights or DEFAULT_WEIGHTS
    return tuple(float(weights.get(m, 0.0)) for m in METRICS)


def _weights(w: tuple[float, ...]) -> dict[str, float]:
    return normalised_weights(dict(zip(METRICS, w, strict=True)))


# -- choices for the sidebar ---------------------------------------------------------------------------
@cached_query
def choices(db: str) -> dict[str, Any]:
    """Datasets (most responses first, the playground last) and per dataset its languages, models, judges."""
    datasets, langs, models, judges, configs, version = _dfs(db, [
        ("SELECT d.name, count(r.query_id) AS n FROM datasets d LEFT JOIN responses r ON r.dataset = d.name "
         "GROUP BY d.name ORDER BY (d.name = ?), n DESC, d.name", [PLAYGROUND]),
        ("SELECT dataset, language, count(*) AS n FROM queries GROUP BY ALL ORDER BY dataset, n DESC", []),
        ("SELECT dataset, model_id, count(*) AS n FROM responses GROUP BY ALL ORDER BY dataset, model_id", []),
        ("SELECT dataset, judge_id, sum(judgments) AS n FROM item_scores GROUP BY ALL ORDER BY dataset, n DESC", []),
        ("SELECT dataset, arg_max(config, started_at) AS config, max(started_at) AS started FROM runs "
         "WHERE kind = 'pipeline' AND config IS NOT NULL GROUP BY dataset ORDER BY started DESC", []),
        ("SELECT value FROM meta WHERE key = 'schema_version'", []),
    ])
    if version.empty or int(version.value.iloc[0]) < SCHEMA_VERSION:  # written by an older version
        Store(db).upgrade()  # derives the tables this one reads; the file's stamp changes
    return {
        "configs": {d: c for d, c in zip(configs.dataset, configs.config, strict=True)},
        "latest_config": configs.config.iloc[0] if len(configs) else None,
        "datasets": datasets.name.tolist(),
        "languages": {d: g.language.tolist() for d, g in langs.groupby("dataset", sort=False)},
        "models": {d: g.model_id.tolist() for d, g in models.groupby("dataset", sort=False)},
        "judges": {d: g.judge_id.tolist() for d, g in judges.groupby("dataset", sort=False)},
    }


def run_config(db: str | Path, dataset: str | None) -> dict[str, Any]:
    """The config of the latest pipeline run of ``dataset`` (any dataset if None), parsed; {} if none."""
    c = choices(db)
    raw = c["configs"].get(dataset) if dataset else c["latest_config"]
    try:
        return json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return {}


def run_weights(db: str | Path, dataset: str | None) -> dict[str, float]:
    """AGG weights of the latest run's config (DESIGN.md's defaults when absent)."""
    weights = run_config(db, dataset).get("weights") or DEFAULT_WEIGHTS
    return {m: float(weights.get(m, 0.0)) for m in METRICS}


def judge_in_use(db: str | Path, dataset: str | None) -> str | None:
    """The judge of the latest run's config if it judged this dataset, else the most-used judge."""
    judges = choices(db)["judges"].get(dataset, []) if dataset else []
    configured = (run_config(db, dataset).get("judge") or {}).get("id")
    if configured and (configured in judges or not judges):
        return configured
    return judges[0] if judges else configured


def judge_warning(judge: str | None, reliability: pd.DataFrame) -> str | None:
    """A plain warning when the judge's scores should not be trusted, else None."""
    if judge is None:
        return None
    reasons = []
    if judge in WEAK_JUDGES:
        reasons.append(f"{judge} is a 135M-parameter model kept to prove the machinery: as a judge it gave "
                       "Score 0 to a correct, a wrong and a refusing answer alike")
    rel = reliability[reliability.judge_id == judge] if not reliability.empty else reliability
    weak = rel[rel.auc < AUC_TRUST] if not rel.empty else rel
    if not weak.empty:
        listed = ", ".join(f"{r.metric} {r.auc:.2f}" for r in weak.itertuples())
        reasons.append(f"its sanity-check AUC is below {AUC_TRUST} for {listed} (0.5 is chance)")
    if rel.empty and judge not in WEAK_JUDGES:
        reasons.append("it has no sanity check yet (run the `sanity` stage)")
        return "Judge reliability unknown: " + "; ".join(reasons) + "."
    if not reasons:
        return None
    return "Do not trust these judge scores: " + "; ".join(reasons) + ". Point `judge:` at a strong model."


# -- home ----------------------------------------------------------------------------------------------
@cached_query
def overview(db: str) -> dict[str, pd.DataFrame]:
    """What the database holds: datasets, runs, models, counts per language."""
    datasets, runs, per_language, models = _dfs(db, [
        ("SELECT name AS dataset, closed_book, n_queries, n_chunks, path, loaded_at FROM datasets ORDER BY name", []),
        ("SELECT run_id, name, kind, dataset, status, started_at, finished_at, "
         "date_diff('second', started_at, coalesce(finished_at, now()::TIMESTAMP)) AS seconds, "
         "backend_calls, cache_hits, retries, errors FROM runs ORDER BY started_at DESC LIMIT 50", []),
        ("SELECT q.dataset, q.language, count(DISTINCT q.query_id) AS queries, count(r.model_id) AS responses, "
         "count(DISTINCT r.model_id) AS models FROM queries q LEFT JOIN responses r "
         "ON r.dataset = q.dataset AND r.query_id = q.query_id GROUP BY ALL ORDER BY q.dataset, queries DESC", []),
        ("SELECT dataset, model_id, count(*) AS responses, count(error) AS errors, "
         "round(avg(latency_s), 2) AS mean_latency_s, sum(completion_tokens) AS completion_tokens "
         "FROM responses GROUP BY ALL ORDER BY dataset, model_id", []),
    ])
    return {"datasets": datasets, "runs": runs, "per_language": per_language, "models": models}


@cached_query
def judge_summary(db: str) -> dict[str, pd.DataFrame]:
    """Judges with their judgment and parse-failure counts, reliability (sanity AUC), human agreement."""
    judges, reliability, confusion = _dfs(db, [
        ("SELECT dataset, judge_id, sum(judgments)::BIGINT AS judgments, sum(unparsed)::BIGINT AS parse_failures, "
         "max(samples) AS samples FROM item_scores GROUP BY ALL ORDER BY dataset, judgments DESC", []),
        ("SELECT dataset, judge_id, metric, auc, n_good, n_bad, n_unparsed, created_at FROM judge_reliability "
         "ORDER BY dataset, judge_id, metric", []),
        ("WITH pairs AS (SELECT h.dataset, j.judge_id, h.metric, h.score AS human, round(avg(j.score)) AS llm "
         "FROM human_labels h JOIN judgments j ON j.dataset = h.dataset AND j.query_id = h.query_id "
         "AND j.model_id = h.model_id AND j.metric = h.metric WHERE h.score IS NOT NULL AND j.parse_ok "
         "GROUP BY h.dataset, h.query_id, h.model_id, h.metric, h.annotator, h.score, j.judge_id) "
         "SELECT dataset, judge_id, metric, human, llm, count(*) AS n FROM pairs GROUP BY ALL", []),
    ])
    agreement = _agreement_from_confusion(confusion, ["dataset", "judge_id", "metric"])
    return {"judges": judges, "reliability": reliability, "agreement": agreement}


def database_status(db: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs, and per dataset and model the counts of responses, errors, judgments, parse failures, critiques.

    Used by ``python -m pipeline status``; not cached.
    """
    runs, models = _dfs(db, [
        ("SELECT run_id, name, kind, dataset, status, strftime(started_at, '%Y-%m-%d %H:%M:%S') AS started, "
         "date_diff('second', started_at, finished_at) AS seconds, backend_calls, cache_hits, retries, errors "
         "FROM runs ORDER BY started_at", []),
        ("WITH r AS (SELECT dataset, model_id, count(*) AS responses, count(error) AS errors FROM responses "
         "GROUP BY ALL), j AS (SELECT dataset, model_id, count(*) AS judgments, "
         "count(*) FILTER (WHERE NOT parse_ok) AS parse_failures FROM judgments GROUP BY ALL), "
         "c AS (SELECT dataset, model_id, count(*) AS critiques FROM critiques GROUP BY ALL) "
         "SELECT r.dataset, r.model_id, r.responses, r.errors, coalesce(j.judgments, 0) AS judgments, "
         "coalesce(j.parse_failures, 0) AS parse_failures, coalesce(c.critiques, 0) AS critiques FROM r "
         "LEFT JOIN j USING (dataset, model_id) LEFT JOIN c USING (dataset, model_id) "
         "ORDER BY r.dataset, r.model_id", []),
    ])
    return runs, models


# -- leaderboards --------------------------------------------------------------------------------------
def _queries_cte(f: Filters) -> tuple[str, list[Any]]:
    """``qf``: the filtered queries with their language (models are filtered on the judged rows)."""
    where, params = f.sql(r=None)
    return f"qf AS (SELECT q.dataset, q.query_id, q.language FROM queries q WHERE {where})", params


def _model_pred(f: Filters, alias: str) -> tuple[str, list[Any]]:
    """WHERE predicate on a per-item table ``alias``: its dataset (when one is chosen) and models."""
    return Filters(dataset=f.dataset, models=f.models).sql(q=alias, r=alias)


def _on_qf(f: Filters, alias: str) -> str:
    """Join condition of ``qf`` and a per-item table; with one dataset chosen (filtered in its WHERE by
    ``_model_pred``) the query id alone is the key, which makes the join a quarter cheaper."""
    return f"qf.query_id = {alias}.query_id" + ("" if f.dataset is not None else f" AND qf.dataset = {alias}.dataset")


def _max_sample(con: Any, dataset: str | None, judge: str | None) -> int:
    """The highest judgment sample index of a judge (0: one sample per item and metric)."""
    pred, params = ("dataset = ? AND ", [dataset]) if dataset else ("", [])
    row = con.execute(f"SELECT max(sample) FROM judgments WHERE {pred}judge_id = ?", [*params, judge]).fetchone()
    return int(row[0] or 0)


def _patterns_sql(f: Filters, judge: str) -> tuple[str, list[Any]]:
    """Per (language, model) each distinct pattern of an item's four scores, with its count of items.

    A score is the item's mean over its parsed samples (``item_scores``), NULL when none parsed;
    means of a few integer samples take few values, so the patterns stay few. With the items'
    judgments and parse failures summed, and their most samples.
    """
    qf, p_qf = _queries_cte(f)
    model_pred, p_model = _model_pred(f, "i")
    return (f"WITH {qf} SELECT qf.language, i.model_id, {', '.join(f'i.{m}' for m in METRICS)}, count(*) AS n, "
            "sum(i.judgments) AS judgments, sum(i.unparsed) AS parse_failures, max(i.samples) AS samples "
            f"FROM item_scores i JOIN qf ON {_on_qf(f, 'i')} WHERE i.judge_id = ? AND {model_pred} GROUP BY ALL "
            "ORDER BY qf.language, i.model_id"), [*p_qf, judge, *p_model]


def _split_patterns(patterns: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict[str, np.ndarray]]]:
    """The (language, model)-sorted patterns as per-model judged figures and per-language CI inputs.

    Returns a frame with, per (language, model), each metric's mean and n over scored items, items,
    judgments, parse failures and samples; and per language ``models``, each row's ``group`` (its
    model's index), counts ``n`` and the ``scores`` matrix.
    """
    if not len(patterns):
        return pd.DataFrame(columns=["language", "model_id", *METRICS, *(f"n_{m}" for m in METRICS), "items",
                                     "judgments", "parse_failures", "samples"]), {}
    language, model = patterns.language.to_numpy(), patterns.model_id.to_numpy()
    new_language = np.r_[True, language[1:] != language[:-1]]
    new_group = new_language | np.r_[True, model[1:] != model[:-1]]
    starts = np.flatnonzero(new_group)
    n = patterns.n.to_numpy(dtype=np.int64)
    scores = patterns[list(METRICS)].to_numpy(dtype=float)
    out: dict[str, Any] = {"language": language[starts], "model_id": model[starts]}
    for i, m in enumerate(METRICS):
        scored = ~np.isnan(scores[:, i])
        out[f"n_{m}"] = np.add.reduceat(np.where(scored, n, 0), starts)
        with np.errstate(invalid="ignore"):
            out[m] = np.add.reduceat(np.where(scored, scores[:, i] * n, 0.0), starts) / out[f"n_{m}"]
    out |= {"items": np.add.reduceat(n, starts),
            "judgments": np.add.reduceat(patterns.judgments.to_numpy(dtype=np.int64), starts),
            "parse_failures": np.add.reduceat(patterns.parse_failures.to_numpy(dtype=np.int64), starts),
            "samples": np.maximum.reduceat(patterns.samples.to_numpy(dtype=np.int64), starts)}
    by_language = {}
    bounds = [*np.flatnonzero(new_language), len(patterns)]
    for a, b in itertools.pairwise(bounds):
        by_language[language[a]] = {"models": model[a:b][new_group[a:b]], "group": np.cumsum(new_group[a:b]) - 1,
                                    "n": n[a:b], "scores": scores[a:b]}
    return pd.DataFrame(out), by_language


def _per_model_sql(f: Filters) -> tuple[str, list[Any]]:
    """Per (language, model) from ``response_facts``: responses, errors, lexical means, safety pass rates
    (unclear outcomes left out), and the language's retrieval recall."""
    qf, p_qf = _queries_cte(f)
    model_pred, p_model = _model_pred(f, "x")
    lexical = ", ".join(f"avg(x.{c}) AS {c}" for c in LEXICAL)
    checks = ", ".join(f"avg(x.{c}::INTEGER) AS check_{c}" for c in SAFETY_CHECKS)
    dataset_pred, p_dataset = _model_pred(f.with_(models=()), "t")
    return (f"WITH {qf}, per AS (SELECT qf.language, x.model_id, count(*) AS responses, "
            f"count(*) FILTER (WHERE x.failed) AS errors, count(*) FILTER (WHERE x.lexical) AS n_lexical, {lexical}, "
            f"{checks} FROM response_facts x JOIN qf ON {_on_qf(f, 'x')} WHERE {model_pred} GROUP BY ALL), "
            f"rec AS (SELECT qf.language, avg(t.recall) AS recall FROM retrievals t JOIN qf ON {_on_qf(f, 't')} "
            f"WHERE {dataset_pred} GROUP BY ALL) SELECT * FROM per LEFT JOIN rec USING (language)"
            ), [*p_qf, *p_model, *p_dataset]


def _consistency_sql(f: Filters, judge: str) -> tuple[str, list[Any]]:
    """Self-consistency per (language, model, metric): mean std and flip rate over items with ≥2 parsed samples."""
    qf, p_qf = _queries_cte(f)
    model_pred, p_model = _model_pred(f, "j")
    per_item = ("SELECT qf.language, j.model_id, j.metric, stddev_pop(j.score) AS sd, count(*) AS n_parsed, "
                f"min(j.score) <> max(j.score) AS flipped FROM judgments j JOIN qf ON {_on_qf(f, 'j')} "
                f"WHERE j.judge_id = ? AND j.parse_ok AND {model_pred} "
                "GROUP BY qf.language, j.model_id, j.metric, j.dataset, j.query_id")
    return (f"WITH {qf}, per_item AS ({per_item}) SELECT language, model_id, metric, count(*) AS multi_items, "
            "avg(sd) AS mean_std, avg(flipped::INTEGER) AS flip_rate FROM per_item WHERE n_parsed >= 2 GROUP BY ALL"
            ), [*p_qf, judge, *p_model]


@cached_query
def leaderboard_base(db: str, f: Filters, judge: str) -> dict[str, Any]:
    """Everything per (language, model) a leaderboard needs but the CIs, from one short connection.

    ``table`` (``_per_model_sql`` with ``_split_patterns``' figures: one row per language and model),
    ``patterns`` (per language, what its CIs resample; ``_split_patterns``) and ``consistency``
    (self-consistency, when a judge took several samples per item).
    """
    with SHARED_READERS.cursor(db) as con:
        patterns = con.execute(*_patterns_sql(f, judge)).df()
        per_model = con.execute(*_per_model_sql(f)).df()
        multi = not patterns.empty and int(patterns.samples.max()) > 1
        consistency = con.execute(*_consistency_sql(f, judge)).df() if multi else pd.DataFrame(
            columns=["language", "model_id", "metric", "multi_items", "mean_std", "flip_rate"])
    judged, by_language = _split_patterns(patterns)
    table = per_model.merge(judged, on=["language", "model_id"], how="outer")
    table["items"] = table["items"].fillna(0)
    return {"table": table, "patterns": by_language, "consistency": consistency}


def model_means(db: str | Path, f: Filters, judge: str, weights: tuple[float, ...]) -> pd.DataFrame:
    """Per (language, model) judged: metric means, n and AGG (no CIs) — the heatmap."""
    table = leaderboard_base(db, f, judge)["table"]
    judged = table.loc[table["items"] > 0, ["language", "model_id", *METRICS, *(f"n_{m}" for m in METRICS),
                                            "judgments"]]
    w = _weights(weights)
    judged.insert(2, "AGG", sum(judged[m] * w[m] for m in METRICS if w[m] > 0))
    return judged.reset_index(drop=True)


def _cis(patterns: dict[str, np.ndarray], w: dict[str, float]) -> dict[str, np.ndarray]:
    """Per model of one language's patterns: the 95% CI of each metric's mean and of AGG, and n_AGG.

    AGG's CI resamples the per-item weighted score over the items scored on every weighted metric.
    Scores (means over samples) and AGG are binned to 0.01.
    """
    group, counts, scores = patterns["group"], patterns["n"], patterns["scores"]
    weighted = [i for i, m in enumerate(METRICS) if w[m] > 0]
    agg = scores[:, weighted] @ np.array([w[METRICS[i]] for i in weighted])  # NaN when one is missing
    n_models = len(patterns["models"])
    out: dict[str, np.ndarray] = {}
    for m, column in (*zip(METRICS, scores.T, strict=True), ("AGG", agg)):
        kept = ~np.isnan(column)
        out[f"{m}_lo"], out[f"{m}_hi"] = bootstrap_mean_cis(group[kept], np.round(column[kept], 2), counts[kept],
                                                            n_models, n_resamples=CI_RESAMPLES)
    complete = ~np.isnan(agg)
    out["n_AGG"] = np.bincount(group[complete], weights=counts[complete], minlength=n_models)
    return out


@cached_query
def leaderboard(db: str, f: Filters, judge: str, weights: tuple[float, ...], language: str) -> pd.DataFrame:
    """One language's leaderboard: models by AGG with FC, SS, COH, CON, each with n and a 95% bootstrap CI.

    AGG is the weighted mean of the metric means (``pipeline.analysis.stats``); its CI resamples the items
    scored on every weighted metric. Further columns: items judged, parse failures (excluded from
    means), errors, self-consistency when judgments have several samples, lexical baselines, safety
    check pass rates (``check_<name>``: refusal accuracy, update adherence; only checks that ran)
    and the language's retrieval recall.
    """
    data = leaderboard_base(db, f, judge)
    table = data["table"]
    rows = table[table.language == language]
    board: dict[str, np.ndarray] = {c: rows[c].to_numpy() for c in rows.columns if c != "language"}
    w = _weights(weights)
    board["AGG"] = sum(board[m].astype(float) * w[m] for m in METRICS if w[m] > 0)
    patterns = data["patterns"].get(language)
    if patterns is not None:
        at = pd.Index(patterns["models"]).get_indexer(board["model_id"])  # -1: a model with no judged item
        board |= {col: np.where(at >= 0, values[at], np.nan) for col, values in _cis(patterns, w).items()}
    consistency = data["consistency"]
    consistency = consistency[consistency.language == language]
    if not consistency.empty:
        sc = consistency.assign(std_w=consistency.mean_std * consistency.multi_items,
                                flip_w=consistency.flip_rate * consistency.multi_items)
        sc = sc.groupby("model_id")[["std_w", "flip_w", "multi_items"]].sum()
        board["self_std"] = (sc.std_w / sc.multi_items).reindex(board["model_id"]).to_numpy()
        board["flip_rate"] = (sc.flip_w / sc.multi_items).reindex(board["model_id"]).to_numpy()
    for c in (*LEXICAL, "n_lexical", *(f"check_{c}" for c in SAFETY_CHECKS)):  # only what was computed
        if pd.isna(board[c]).all():
            del board[c]
    for col in (*(f"{m}{suffix}" for m in ("AGG", *METRICS) for suffix in ("", "_lo", "_hi")),
                *(f"n_{m}" for m in ("AGG", *METRICS)), "judgments", "parse_failures", "samples"):
        board.setdefault(col, np.full(len(rows), np.nan))
    for col, values in board.items():  # missing values as NaN, never the text "None"
        if col != "model_id" and values.dtype == object:
            board[col] = pd.to_numeric(values, errors="coerce")
    order = np.lexsort((board["model_id"].astype(str), np.nan_to_num(-board["AGG"].astype(float), nan=np.inf)))
    return pd.DataFrame({"rank": np.arange(1, len(order) + 1), **{c: v[order] for c, v in board.items()}})


def paper_leaderboard(language: str) -> pd.DataFrame:
    """Health-Pariksha's published leaderboard for a language (Tables 2–6; GPT-4o as judge)."""
    board = _reference_csv("health_pariksha_leaderboards.csv")
    return board[board.language == language].drop(columns=["table", "language"]).reset_index(drop=True)


def short_name(model_id: str) -> str:
    """The last path part of a model id, lower-case: how model ids are matched to the paper's names."""
    return model_id.split("/")[-1].lower()


# -- response browser -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Browse:
    """The response browser's filters beyond the sidebar's."""

    filters: Filters
    judge: str | None = None
    metric: str | None = None  # filter by this metric's score
    score_min: float = 0.0
    score_max: float = 2.0
    unparsed_only: bool = False
    search: str = ""
    query_id: str | None = None


def _browse_sql(b: Browse, multi_sample: bool) -> tuple[str, list[Any]]:
    where, params = b.filters.sql()
    clauses = [where]
    if b.search.strip():
        clauses.append("(strpos(lower(q.query), lower(?)) > 0 OR strpos(lower(coalesce(q.query_en, '')), lower(?)) > 0 "
                       "OR strpos(lower(coalesce(r.text, '')), lower(?)) > 0)")
        params += [b.search.strip()] * 3
    if b.query_id:
        clauses.append("r.query_id = ?")
        params.append(b.query_id)
    join, p_join = "", []
    if b.metric and b.judge and b.metric in METRICS:
        on = "m.dataset = r.dataset AND m.query_id = r.query_id AND m.model_id = r.model_id"
        if not multi_sample:  # one judgment per item: a plain join, no GROUP BY
            test = "NOT m.parse_ok" if b.unparsed_only else "m.parse_ok AND m.score BETWEEN ? AND ?"
            join = f"JOIN judgments m ON {on} AND m.judge_id = ? AND m.metric = ? AND m.sample = 0 AND {test}"
        else:
            having = ("bool_or(NOT j.parse_ok)" if b.unparsed_only else
                      "avg(j.score) FILTER (WHERE j.parse_ok) BETWEEN ? AND ?")
            join = ("JOIN (SELECT j.dataset, j.query_id, j.model_id FROM judgments j WHERE j.judge_id = ? "
                    f"AND j.metric = ? GROUP BY ALL HAVING {having}) m ON {on}")
        p_join = [b.judge, b.metric, *([] if b.unparsed_only else [b.score_min, b.score_max])]
    sql = (f"FROM responses r JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id {join} "
           f"WHERE {' AND '.join(clauses)}")
    return sql, [*p_join, *params]


_PAGE_COLUMNS = ("r.dataset, r.query_id, r.model_id, q.language, q.themes, q.query, q.query_en, q.gt_response, "
                 "q.update_sensitive, r.text, r.error, r.latency_s, r.completion_tokens, r.run_id, r.created_at")
_ORDER = "ORDER BY q.language, r.query_id, r.model_id"


def _browse_count(con: Any, b: Browse) -> int:
    sql, params = _browse_sql(b, _max_sample(con, b.filters.dataset, b.judge) > 0 if b.metric else False)
    return int(con.execute(f"SELECT count(*) {sql}", params).fetchone()[0])


def _browse_page(con: Any, b: Browse, limit: int, offset: int) -> pd.DataFrame:
    sql, params = _browse_sql(b, _max_sample(con, b.filters.dataset, b.judge) > 0 if b.metric else False)
    return con.execute(f"SELECT {_PAGE_COLUMNS} {sql} {_ORDER} LIMIT ? OFFSET ?",
                       [*params, int(limit), int(offset)]).df()


def _browse_total_and_page(con: Any, b: Browse, limit: int, offset: int) -> tuple[int, pd.DataFrame]:
    """(matches, one page). With a search or score filter the matching keys are found once, counted
    with a window and paged, then joined to their texts; a plain listing counts and pages apart."""
    if not (b.search.strip() or b.metric):
        return _browse_count(con, b), _browse_page(con, b, limit, offset)
    sql, params = _browse_sql(b, _max_sample(con, b.filters.dataset, b.judge) > 0 if b.metric else False)
    page = con.execute(
        f"WITH k AS (SELECT r.dataset, r.query_id, r.model_id, count(*) OVER () AS _total {sql} {_ORDER} "
        f"LIMIT ? OFFSET ?) SELECT k._total, {_PAGE_COLUMNS} FROM k JOIN responses r ON r.dataset = k.dataset "
        "AND r.query_id = k.query_id AND r.model_id = k.model_id JOIN queries q ON q.dataset = r.dataset "
        f"AND q.query_id = r.query_id {_ORDER}", [*params, int(limit), int(offset)]).df()
    if page.empty:  # past the end (or nothing matches): the count says which
        return _browse_count(con, b), page.drop(columns=["_total"])
    return int(page._total.iloc[0]), page.drop(columns=["_total"])


@cached_query
def browse_count(db: str, b: Browse) -> int:
    """How many responses match the browser's filters."""
    with SHARED_READERS.cursor(db) as con:
        return _browse_count(con, b)


@cached_query
def browse_page(db: str, b: Browse, limit: int, offset: int) -> pd.DataFrame:
    """One page of matching responses with their queries, ordered by language, query, model (LIMIT/OFFSET)."""
    with SHARED_READERS.cursor(db) as con:
        return _browse_page(con, b, limit, offset)


@cached_query
def browse_view(db: str, b: Browse, limit: int, offset: int) -> dict[str, Any]:
    """The response browser's page in one short connection.

    ``total`` matches; ``page`` (LIMIT/OFFSET; an offset past the end falls back to the first page);
    ``details`` of its items (judgments, critiques, safety, lexical); ``chunks`` of its queries.
    """
    with SHARED_READERS.cursor(db) as con:
        total, page = _browse_total_and_page(con, b, limit, offset)
        if page.empty and total > 0:
            offset = 0
            page = _browse_page(con, b, limit, offset)
        keys = tuple(zip(page.query_id, page.model_id, strict=True))
        dataset = b.filters.dataset or ""
        return {"total": total, "offset": offset, "page": page, "details": _item_details(con, dataset, keys),
                "chunks": _retrieved_chunks(con, dataset, tuple(dict.fromkeys(page.query_id)))}


def _keys_join(alias: str) -> str:
    return (f"JOIN (SELECT unnest(?::VARCHAR[]) AS query_id, unnest(?::VARCHAR[]) AS model_id) k "
            f"ON k.query_id = {alias}.query_id AND k.model_id = {alias}.model_id")


def _item_details(con: Any, dataset: str, keys: tuple[tuple[str, str], ...]) -> dict[str, pd.DataFrame]:
    qids, mids = [k[0] for k in keys], [k[1] for k in keys]
    statements = {
        "judgments": ("SELECT j.query_id, j.model_id, j.judge_id, j.metric, j.sample, j.score, j.parse_ok, "
                      f"j.justification, j.raw_output FROM judgments j {_keys_join('j')} WHERE j.dataset = ? "
                      "ORDER BY j.judge_id, j.metric, j.sample"),
        "critiques": ("SELECT c.query_id, c.model_id, c.critic_id, c.classifier, c.critique, c.p_none, c.p_low, "
                      f"c.p_moderate, c.p_high, c.label FROM critiques c {_keys_join('c')} WHERE c.dataset = ?"),
        "safety": ("SELECT s.query_id, s.model_id, s.check_name, s.passed, s.detail FROM safety_checks s "
                   f"{_keys_join('s')} WHERE s.dataset = ? ORDER BY s.check_name"),
        "lexical": (f"SELECT l.query_id, l.model_id, {', '.join('l.' + c for c in LEXICAL)} FROM lexical_scores l "
                    f"{_keys_join('l')} WHERE l.dataset = ?"),
    }
    return {name: con.execute(sql, [qids, mids, dataset]).df() for name, sql in statements.items()}


def _retrieved_chunks(con: Any, dataset: str, query_ids: tuple[str, ...]) -> pd.DataFrame:
    return con.execute(
        "WITH t AS (SELECT query_id, recall, search_text, unnest(raw_ids) AS chunk_id, "
        "generate_subscripts(raw_ids, 1) AS pos, 'raw' AS slot FROM retrievals WHERE dataset = ? "
        "AND list_contains(?, query_id) UNION ALL SELECT query_id, recall, search_text, unnest(update_ids), "
        "generate_subscripts(update_ids, 1), 'update' FROM retrievals WHERE dataset = ? "
        "AND list_contains(?, query_id)) "
        "SELECT t.query_id, t.slot, t.pos, t.chunk_id, c.kind, c.title, c.text, c.source, c.updated, t.recall, "
        "t.search_text FROM t LEFT JOIN kb_chunks c ON c.dataset = ? AND c.chunk_id = t.chunk_id "
        "ORDER BY t.query_id, t.slot, t.pos",
        [dataset, list(query_ids), dataset, list(query_ids), dataset]).df()


@cached_query
def query_view(db: str, dataset: str, query_id: str) -> dict[str, pd.DataFrame]:
    """Every model's response to one query and their judgments (side-by-side comparison)."""
    with SHARED_READERS.cursor(db) as con:
        return {
            "responses": con.execute("SELECT r.model_id, r.text, r.error, r.latency_s FROM responses r "
                                     "WHERE r.dataset = ? AND r.query_id = ? ORDER BY r.model_id",
                                     [dataset, query_id]).df(),
            "judgments": con.execute("SELECT model_id, judge_id, metric, sample, score, parse_ok, justification "
                                     "FROM judgments WHERE dataset = ? AND query_id = ? ORDER BY judge_id, metric, "
                                     "sample", [dataset, query_id]).df(),
        }


def query_responses(db: str | Path, dataset: str, query_id: str) -> pd.DataFrame:
    """Every model's response to one query."""
    return query_view(db, dataset, query_id)["responses"]


# -- themes --------------------------------------------------------------------------------------------
@cached_query
def theme_scores(db: str, f: Filters, judge: str) -> pd.DataFrame:
    """Per (language, theme, model): each metric's mean item score and n (queries without themes: '(none)').

    With a theme filter only those themes are shown. Unparsed judgments are excluded; with several
    samples an item's score is the mean of its parsed samples.
    """
    where, params = f.with_(themes=()).sql(r=None)
    theme_pred, p_theme = ("list_contains(?, th.theme)", [list(f.themes)]) if f.themes else ("TRUE", [])
    model_pred, p_model = _model_pred(f, "i")
    th = (f"th AS (SELECT * FROM (SELECT q.dataset, q.query_id, q.language, unnest(CASE WHEN len(q.themes) = 0 "
          f"THEN ['(none)'] ELSE q.themes END) AS theme FROM queries q WHERE {where}) th WHERE {theme_pred})")
    means = ", ".join(f"avg(i.{m}) AS {m}, count(i.{m}) AS n_{m}" for m in METRICS)
    out = _df(db, f"WITH {th} SELECT th.language, th.theme, i.model_id, {means} FROM item_scores i JOIN th "
                  f"ON th.dataset = i.dataset AND th.query_id = i.query_id WHERE i.judge_id = ? AND {model_pred} "
                  "GROUP BY ALL ORDER BY ALL", [*params, *p_theme, judge, *p_model])
    out["n"] = out[[f"n_{m}" for m in METRICS]].max(axis=1)
    return out[["language", "theme", "model_id", "n", *METRICS, *(f"n_{m}" for m in METRICS)]]


def theme_table(scores: pd.DataFrame, weights: tuple[float, ...]) -> pd.DataFrame:
    """``theme_scores`` with AGG (the weighted mean of the metric means) added."""
    if scores.empty:
        return pd.DataFrame(columns=["language", "theme", "model_id", "AGG", *METRICS, "n"])
    w = _weights(weights)
    used = [m for m in METRICS if w[m] > 0]
    out = scores.copy()
    out["AGG"] = sum(out[m].astype(float) * w[m] for m in used) if used else np.nan
    return out[["language", "theme", "model_id", "AGG", *METRICS, "n"]]


@cached_query
def theme_examples(db: str, f: Filters, judge: str | None, theme: str, limit: int = 5,
                   offset: int = 0) -> pd.DataFrame:
    """Example queries of a theme and every (filtered) model's answer with its metric scores."""
    qf = f.with_(themes=())
    where_q, p_q = qf.sql(r=None)
    theme_pred = "len(q.themes) = 0" if theme == "(none)" else "list_contains(q.themes, ?)"
    p_theme = [] if theme == "(none)" else [theme]
    model_pred, p_model = ("list_contains(?, r.model_id)", [list(f.models)]) if f.models else ("TRUE", [])
    judge_params = [judge] if judge else [None]
    return _df(db, (
        f"WITH ex AS (SELECT q.dataset, q.query_id FROM queries q WHERE {where_q} AND {theme_pred} "
        "ORDER BY q.language, q.query_id LIMIT ? OFFSET ?), "
        "sc AS (SELECT j.dataset, j.query_id, j.model_id, "
        + ", ".join(f"avg(j.score) FILTER (WHERE j.parse_ok AND j.metric = '{m}') AS {m}" for m in METRICS)
        + " FROM judgments j JOIN ex ON ex.dataset = j.dataset AND ex.query_id = j.query_id WHERE j.judge_id = ? "
        "GROUP BY ALL) "
        "SELECT q.query_id, q.language, q.query, q.query_en, q.gt_response, r.model_id, r.text, r.error, "
        + ", ".join(f"sc.{m}" for m in METRICS)
        + " FROM ex JOIN queries q ON q.dataset = ex.dataset AND q.query_id = ex.query_id "
        "JOIN responses r ON r.dataset = ex.dataset AND r.query_id = ex.query_id "
        "LEFT JOIN sc ON sc.dataset = r.dataset AND sc.query_id = r.query_id AND sc.model_id = r.model_id "
        f"WHERE {model_pred} ORDER BY q.language, q.query_id, r.model_id"
    ), [*p_q, *p_theme, int(limit), int(offset), *judge_params, *p_model])


# -- Med-CoDE --------------------------------------------------------------------------------------------
def _medcode_distribution(con: Any, f: Filters) -> pd.DataFrame:
    qf, p_qf = _queries_cte(f)
    model_pred, p_model = _model_pred(f, "c")
    return con.execute((
        f"WITH {qf} SELECT c.dataset, qf.language, c.model_id, c.critic_id, count(*) AS n, "
        + ", ".join(f"avg(c.{p}) AS {p}" for p in DISAGREEMENT)
        + f" FROM critiques c JOIN qf ON {_on_qf(f, 'c')} "
        f"WHERE {model_pred} GROUP BY ALL ORDER BY c.dataset, qf.language, c.model_id"
    ), [*p_qf, *p_model]).df()


MEDCODE_QUANTITIES = {"p_none": "P(None)", "p_high": "P(High)", "expected": "E[disagreement]"}
CORRELATION_ITEMS = 20_000


@cached_query
def medcode_correlations(db: str, f: Filters, judge: str | None) -> pd.DataFrame:
    """Pearson r, over items, between Med-CoDE quantities and the judge's metrics and lexical scores.

    Computed over a fixed pseudo-random sample of at most CORRELATION_ITEMS critiqued items (the
    same items every time; all of them when there are fewer), so the cost stays flat at scale.
    """
    qf, p_qf = _queries_cte(f)
    model_pred, p_model = _model_pred(f, "c")
    targets = [*METRICS, *LEXICAL]
    corr_cols = ", ".join(f"corr({q}, {t}) AS \"{q}|{t}\"" for q in MEDCODE_QUANTITIES for t in targets)
    count_cols = ", ".join(f"count({t}) AS \"n|{t}\"" for t in targets)
    means = ", ".join(f"avg(j.score) FILTER (WHERE j.metric = '{m}' AND j.parse_ok) AS {m}" for m in METRICS)
    out = _df(db, (
        f"WITH {qf}, c AS (SELECT c.dataset, c.query_id, c.model_id, c.p_none, c.p_high, "
        f"c.p_low + 2 * c.p_moderate + 3 * c.p_high AS expected FROM critiques c JOIN qf ON {_on_qf(f, 'c')} "
        f"WHERE {model_pred} ORDER BY hash(c.dataset, c.query_id, c.model_id) "
        f"LIMIT {CORRELATION_ITEMS}), "
        f"s AS (SELECT c.dataset, c.query_id, c.model_id, {means} FROM judgments j JOIN c ON c.dataset = j.dataset "
        "AND c.query_id = j.query_id AND c.model_id = j.model_id WHERE j.judge_id = ? GROUP BY ALL), "
        "joined AS (SELECT c.p_none, c.p_high, c.expected, " + ", ".join(f"s.{m}" for m in METRICS) + ", "
        + ", ".join(f"l.{x}" for x in LEXICAL)
        + " FROM c LEFT JOIN s ON s.dataset = c.dataset AND s.query_id = c.query_id AND s.model_id = c.model_id "
        "LEFT JOIN lexical_scores l ON l.dataset = c.dataset AND l.query_id = c.query_id AND l.model_id = c.model_id) "
        f"SELECT {corr_cols}, {count_cols}, count(*) AS items FROM joined"
    ), [*p_qf, *p_model, judge or ""])
    rows = []
    for q, label in MEDCODE_QUANTITIES.items():
        rows.append({"quantity": label, **{t: out[f"{q}|{t}"].iloc[0] for t in targets}})
    table = pd.DataFrame(rows).rename(columns=LEXICAL_LABELS)
    n = {t: int(out[f"n|{t}"].iloc[0]) for t in targets}
    table.attrs["n"] = {LEXICAL_LABELS.get(k, k): v for k, v in n.items()}
    table.attrs["items"] = int(out["items"].iloc[0])
    return table


def _medcode_summary(con: Any, f: Filters, judge: str | None) -> pd.DataFrame:
    qf, p_qf = _queries_cte(f)
    preds = {a: _model_pred(f, a) for a in ("c", "l", "j")}
    return con.execute((
        f"WITH {qf}, c AS (SELECT c.model_id, c.dataset, count(*) AS n, "
        + ", ".join(f"avg(c.{p}) AS {p}" for p in DISAGREEMENT)
        + f" FROM critiques c JOIN qf ON {_on_qf(f, 'c')} WHERE {preds['c'][0]} "
        "GROUP BY ALL), l AS (SELECT l.model_id, l.dataset, avg(l.meteor) AS meteor, avg(l.rouge_l) AS rouge_l "
        f"FROM lexical_scores l JOIN qf ON {_on_qf(f, 'l')} WHERE {preds['l'][0]} "
        "GROUP BY ALL), fc AS (SELECT j.model_id, j.dataset, avg((j.score = 2)::INTEGER) AS llm_accuracy "
        f"FROM judgments j JOIN qf ON {_on_qf(f, 'j')} WHERE j.judge_id = ? "
        f"AND j.metric = 'FC' AND j.parse_ok AND {preds['j'][0]} GROUP BY ALL) "
        "SELECT c.model_id AS model, c.dataset, c.n, l.meteor, l.rouge_l, fc.llm_accuracy, "
        + ", ".join(f"c.{p}" for p in DISAGREEMENT)
        + " FROM c LEFT JOIN l USING (model_id, dataset) LEFT JOIN fc USING (model_id, dataset) "
        "ORDER BY c.model_id, c.dataset"
    ), [*p_qf, *preds["c"][1], *preds["l"][1], judge or "", *preds["j"][1]]).df()


@cached_query
def medcode_view(db: str, f: Filters, judge: str | None) -> dict[str, pd.DataFrame]:
    """The Med-CoDE page's distribution and Table-2 analogue in one short connection."""
    with SHARED_READERS.cursor(db) as con:
        return {"distribution": _medcode_distribution(con, f), "summary": _medcode_summary(con, f, judge)}


@cached_query
def reference_table(db: str, name: str) -> pd.DataFrame:
    """A reference CSV of the papers (data/reference), by fixed name."""
    files = {"medcode_table2": "medcode_table2.csv", "table7": "health_pariksha_table7_rankings.csv",
             "table1": "health_pariksha_table1_models.csv", "leaderboards": "health_pariksha_leaderboards.csv"}
    return _reference_csv(files[name]).copy()


# -- human vs LLM ---------------------------------------------------------------------------------------
def _agreement_from_confusion(confusion: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Percentage agreement and linearly weighted kappa per group from (human, llm, n) counts."""
    from pipeline.analysis.agreement import weighted_kappa

    rows = []
    if confusion.empty:
        return pd.DataFrame(columns=[*by, "n", "agreement", "kappa"])
    valid = confusion[confusion.human.between(0, 2) & confusion.llm.between(0, 2)]
    for key, g in valid.groupby(by, sort=True):
        total = int(g.n.sum())
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)), "n": total,
                     "agreement": float(g.n[g.human == g.llm].sum() / total) if total else np.nan,
                     "kappa": weighted_kappa(g.human, g.llm, counts=g.n)})
    return pd.DataFrame(rows)


def _labelled_cte(f: Filters, judge: str, metric: str) -> tuple[str, list[Any]]:
    """``pairs``: each human label with the judge's score of the same item (mean of parsed samples, rounded)."""
    qf, p_qf = _queries_cte(f)
    model_pred, p_model = _model_pred(f, "h")
    return (
        f"{qf}, pairs AS (SELECT qf.language, h.model_id, h.query_id, h.annotator, h.score AS human, "
        f"round(avg(j.score)) AS llm FROM human_labels h JOIN qf ON {_on_qf(f, 'h')} "
        "JOIN judgments j ON j.dataset = h.dataset AND j.query_id = h.query_id AND j.model_id = h.model_id "
        f"AND j.metric = h.metric WHERE h.metric = ? AND h.score IS NOT NULL AND j.judge_id = ? AND j.parse_ok "
        f"AND {model_pred} GROUP BY qf.language, h.model_id, h.query_id, h.annotator, h.score)"
    ), [*p_qf, metric, judge, *p_model]


@cached_query
def agreement_view(db: str, f: Filters, judge: str, metric: str) -> dict[str, pd.DataFrame]:
    """Human labels vs the judge in one short connection.

    ``table``: per language and model (and per language over all models) n, percentage agreement
    and weighted kappa. ``ranks``: per (language, model) mean human and judge scores on the same
    items and both ranks. ``summary``: per language whether the rankings are identical and Kendall's
    tau (``pipeline.analysis.agreement.ranking_comparison``).
    """
    from pipeline.analysis.agreement import ranking_comparison

    cte, params = _labelled_cte(f, judge, metric)
    with SHARED_READERS.cursor(db) as con:
        confusion = con.execute(f"WITH {cte} SELECT language, model_id, human, llm, count(*) AS n FROM pairs "
                                "GROUP BY ALL", params).df()
        means = con.execute(f"WITH {cte} SELECT language, model_id, count(*) AS n, avg(human) AS human_mean, "
                            "avg(llm) AS llm_mean FROM pairs GROUP BY ALL", params).df()
    per_model = _agreement_from_confusion(confusion, ["language", "model_id"])
    overall = _agreement_from_confusion(confusion.assign(model_id="(all models)"), ["language", "model_id"])
    table = pd.concat([per_model, overall], ignore_index=True)
    if means.empty:
        return {"table": table, "ranks": means.assign(human_rank=[], llm_rank=[]), "summary": pd.DataFrame()}
    means["human_rank"] = means.groupby("language").human_mean.rank(ascending=False, method="min").astype(int)
    means["llm_rank"] = means.groupby("language").llm_mean.rank(ascending=False, method="min").astype(int)
    summary = ranking_comparison(means.rename(columns={"human_mean": "human", "llm_mean": "llm"}))
    return {"table": table, "summary": summary,
            "ranks": means.sort_values(["language", "human_rank", "model_id"]).reset_index(drop=True)}


def agreement(db: str | Path, f: Filters, judge: str, metric: str) -> pd.DataFrame:
    """Per language and model (and per language over all models): n, percentage agreement, weighted kappa."""
    return agreement_view(db, f, judge, metric)["table"]


def annotation_state(db: str | Path, f: Filters, annotator: str, metric: str,
                     skip: tuple[str, ...] = ()) -> tuple[int, int, pd.DataFrame]:
    """(labelled, total, next item) for an annotator and metric, in one connection (not cached).

    Items are the filtered responses without an error; the next one is the first unlabelled and
    unskipped item in a fixed shuffled order.
    """
    items, p_items = _items_cte(f)
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


def save_human_label(db: str | Path, *, dataset: str, query_id: str, model_id: str, metric: str, annotator: str,
                     score: int, comment: str | None) -> None:
    """Save one label through the Store (source 'app') and drop the cached agreement figures."""
    if metric not in METRICS or score not in (0, 1, 2) or not annotator.strip():
        raise ValueError("a label needs a metric of FC/SS/COH/CON, a score 0–2 and an annotator name")
    Store(db).upsert("human_labels", [{
        "dataset": dataset, "query_id": query_id, "model_id": model_id, "metric": metric,
        "annotator": annotator.strip(), "score": int(score), "comment": (comment or "").strip() or None,
        "source": "app", "created_at": now(),
    }])
    for fn in (agreement_view, judge_summary):
        fn.clear()  # type: ignore[attr-defined]


# -- playground support -----------------------------------------------------------------------------------
@cached_query
def dataset_queries(db: str, dataset: str, language: str | None = None, limit: int = 500) -> pd.DataFrame:
    """Queries of a dataset to pick from (optionally one language)."""
    pred, params = ("AND language = ?", [language]) if language else ("", [])
    return _df(db, f"SELECT query_id, language, query, query_en, gt_response, themes, kb_refs, update_sensitive "
                   f"FROM queries WHERE dataset = ? {pred} ORDER BY language, query_id LIMIT ?",
               [dataset, *params, int(limit)])


@cached_query
def dataset_path(db: str, dataset: str) -> str | None:
    """Where a dataset was loaded from (None if unknown)."""
    out = _df(db, "SELECT path FROM datasets WHERE name = ?", [dataset])
    return None if out.empty else out.path.iloc[0]
