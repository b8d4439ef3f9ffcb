"""The leaderboards page: per language, models by AGG with every registry metric, n and 95% bootstrap CIs.

Scores come from ``item_scores`` (one row per judged item: each metric's mean over its parsed
samples, of the current response text, never of an errored response); responses, errors, lexical
means and safety pass rates from ``response_facts``. ``leaderboard_base`` reads everything in one
short connection; ``model_means`` and ``leaderboard`` are pure functions of it and the weights.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from pipeline.analysis.stats import bootstrap_mean_cis
from pipeline.metrics import METRICS, SAFETY_CHECKS
from pipeline.models.reference import is_reference
from pipeline.read.common import (
    Filters,
    current_join,
    df,
    group_pred,
    group_source,
    model_pred,
    on_qf,
    queries_cte,
    reference_table,
    weights_dict,
)
from pipeline.read.judge_trust import CONSISTENCY_COLUMNS, consistency_sql, pool_consistency
from pipeline.read.jury import JURY_PREFIX, is_jury, item_source
from pipeline.store import LEXICAL, SHARED_READERS

CI_RESAMPLES = 1000  # percentile bootstrap; 1,000 resamples fix a 95% interval's ends to ~±0.01 of its width
SAFETY_COLUMNS = ["model_id", "language", "check_name", "n", "passed", "failed", "unclear", "pass_rate"]


PATTERN_COLUMNS = ("language", "model_id", *METRICS, "n", "judgments", "parse_failures", "samples")


def score_patterns(con: Any, f: Filters, judge: str) -> dict[str, np.ndarray]:
    """Per (language, model) each distinct pattern of an item's metric scores, with its count of items,
    sorted by language, model and the scores (NULL last), as arrays (``PATTERN_COLUMNS``). ``judge`` may be
    a jury (``jury.item_source``: per item the judges' mean or median).

    A score is the item's mean over its parsed samples (``item_scores``), NULL when none parsed; means of a
    few integer samples take few values, so the patterns stay few. With the items' judgments and parse
    failures summed, and their most samples. Read from ``score_groups`` (the writer's patterns, as lists, per
    language and script), or its definition over the filtered queries (``group_source``): under a theme filter, and
    for a jury over its item scores (``jury.item_source``, bound as ``item_scores``).
    """
    inputs = [("item_scores", *item_source(f, judge))] if is_jury(judge) else []
    source, p_source = group_source("score_groups", f, inputs=inputs)
    pred, params = group_pred(f, "g")
    lists = (*METRICS, "n", "judgments", "unparsed", "samples")
    groups = con.sql(f"SELECT g.query_language AS language, g.model_id, {', '.join(f'g.{c}' for c in lists)} "
                     f"FROM {source} g WHERE g.judge_id = ? AND {pred} ORDER BY language, model_id",
                     params=[*p_source, judge, *params]).to_arrow_table()
    if not groups.num_rows:
        return {c: np.zeros(0, dtype=object if c in ("language", "model_id") else float) for c in PATTERN_COLUMNS}
    sizes = pc.list_value_length(groups["n"]).to_numpy(zero_copy_only=False)
    language = groups["language"].to_numpy(zero_copy_only=False)
    model = groups["model_id"].to_numpy(zero_copy_only=False)
    # groups come sorted by (language, model); a key with several groups (scripts, datasets) is merged below
    new_key = np.r_[True, (language[1:] != language[:-1]) | (model[1:] != model[:-1])]
    key = np.repeat(np.cumsum(new_key) - 1, sizes)
    first = np.flatnonzero(new_key)
    cols = {name: pc.list_flatten(groups[c]).to_numpy(zero_copy_only=False)
            for c, name in zip(lists, PATTERN_COLUMNS[2:], strict=True)}
    if len(first) < len(language):
        key, cols = _merge_patterns(key, cols)
    return {"language": language[first][key], "model_id": model[first][key], **cols}


def _merge_patterns(key: np.ndarray, cols: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Patterns of several groups of one key (a language and model) as one set: sorted by key and scores (NULL
    last, as ``score_groups`` sorts them), equal patterns summed (most samples)."""
    scores = [cols[m].astype(float) for m in METRICS]
    order = np.lexsort([*reversed(scores), key])
    key, scores = key[order], [m[order] for m in scores]
    same = key[1:] == key[:-1]
    for m in scores:
        same &= (m[1:] == m[:-1]) | (np.isnan(m[1:]) & np.isnan(m[:-1]))
    starts = np.flatnonzero(np.r_[True, ~same])
    out = {m: cols[m][order][starts] for m in METRICS}
    out |= {c: np.add.reduceat(cols[c][order], starts) for c in ("n", "judgments", "parse_failures")}
    out["samples"] = np.maximum.reduceat(cols["samples"][order], starts)
    return key[starts], out


def _split_patterns(patterns: dict[str, np.ndarray]) -> tuple[pd.DataFrame, dict[str, dict[str, np.ndarray]]]:
    """The (language, model)-sorted patterns as per-model judged figures and per-language CI inputs.

    Returns a frame with, per (language, model), each metric's mean and n over scored items, items,
    judgments, parse failures and samples; and per language ``models``, each row's ``group`` (its
    model's index), counts ``n`` and the ``scores`` matrix.
    """
    if not len(patterns["n"]):
        return pd.DataFrame(columns=["language", "model_id", *(c for m in METRICS for c in (f"n_{m}", m)), "items",
                                     "judgments", "parse_failures", "samples"]), {}  # the order of the columns below
    language, model = patterns["language"], patterns["model_id"]
    new_language = np.r_[True, language[1:] != language[:-1]]
    new_group = new_language | np.r_[True, model[1:] != model[:-1]]
    starts = np.flatnonzero(new_group)
    n = patterns["n"].astype(np.int64)
    scores = np.column_stack([patterns[m].astype(float) for m in METRICS])
    out: dict[str, Any] = {"language": language[starts], "model_id": model[starts]}
    for i, m in enumerate(METRICS):
        scored = ~np.isnan(scores[:, i])
        out[f"n_{m}"] = np.add.reduceat(np.where(scored, n, 0), starts)
        with np.errstate(invalid="ignore"):
            out[m] = np.add.reduceat(np.where(scored, scores[:, i] * n, 0.0), starts) / out[f"n_{m}"]
    out |= {"items": np.add.reduceat(n, starts),
            "judgments": np.add.reduceat(patterns["judgments"].astype(np.int64), starts),
            "parse_failures": np.add.reduceat(patterns["parse_failures"].astype(np.int64), starts),
            "samples": np.maximum.reduceat(patterns["samples"].astype(np.int64), starts)}
    by_language = {}
    bounds = [*np.flatnonzero(new_language), len(n)]
    for a, b in itertools.pairwise(bounds):
        by_language[language[a]] = {"models": model[a:b][new_group[a:b]], "group": np.cumsum(new_group[a:b]) - 1,
                                    "n": n[a:b], "scores": scores[a:b]}
    return pd.DataFrame(out), by_language


def _per_model_sql(f: Filters) -> tuple[str, list[Any]]:
    """Per (language, model) from ``response_facts``: responses, errors, responses that echo the prompt
    (Health-Pariksha §4.1), lexical means, safety pass rates (unclear outcomes left out), and the language's
    retrieval recall. From ``response_groups`` and ``retrieval_groups`` (the writer's sums per language and script;
    under a theme filter their definitions over the filtered queries, ``group_source``)."""
    echoes = "prompt_echo" in SAFETY_CHECKS
    responses, p_responses = group_source("response_groups", f)
    retrievals, p_retrievals = group_source("retrieval_groups", f)
    pred, p_group = group_pred(f, "g")
    r_pred, p_rec = group_pred(f.with_(models=()), "t")
    means = ", ".join(f"sum(g.{c}_sum) / nullif(sum(g.{c}_n), 0) AS {prefix}{c}"
                      for prefix, cols in (("", LEXICAL), ("check_", SAFETY_CHECKS)) for c in cols)
    return ("WITH rec AS (SELECT t.query_language AS language, sum(t.recall_sum) / nullif(sum(t.recall_n), 0) "
            f"AS recall FROM {retrievals} t WHERE {r_pred} GROUP BY ALL), "
            "per AS (SELECT g.query_language AS language, g.model_id, sum(g.responses) AS responses, "
            f"sum(g.errors) AS errors, {'sum(g.prompt_echoes) AS prompt_echoes, ' if echoes else ''}"
            f"sum(g.n_lexical) AS n_lexical, {means} FROM {responses} g WHERE {pred} GROUP BY ALL) "
            "SELECT * FROM per LEFT JOIN rec USING (language)"), [*p_retrievals, *p_rec, *p_responses, *p_group]


def leaderboard_base(db: str | Path, f: Filters, judge: str) -> dict[str, Any]:
    """Everything per (language, model) a leaderboard needs but the CIs, from one short connection.

    ``table`` (``_per_model_sql`` with ``_split_patterns``' figures: one row per language and model),
    ``patterns`` (per language, what its CIs resample; ``_split_patterns``) and ``consistency``
    (``judge_trust.consistency_sql``, when a judge took several samples per item).
    """
    with SHARED_READERS.cursor(db) as con:
        patterns = score_patterns(con, f, judge)
        per_model = con.execute(*_per_model_sql(f)).df()
        multi = len(patterns["n"]) > 0 and int(patterns["samples"].max()) > 1 and not is_jury(judge)
        consistency = (con.execute(*consistency_sql(db, f, judge)).df() if multi
                       else pd.DataFrame(columns=CONSISTENCY_COLUMNS))
    judged, by_language = _split_patterns(patterns)
    # the doctors' approved answers are never judged here (FC and SS compare with them): no row, not a NaN one
    per_model = per_model[~per_model.model_id.map(is_reference).astype(bool)]
    table = per_model.merge(judged, on=["language", "model_id"], how="outer")
    table["items"] = table["items"].fillna(0)
    return {"table": table, "patterns": by_language, "consistency": consistency}


def model_means(base: dict[str, Any], weights: tuple[float, ...], preset: str | None = None) -> pd.DataFrame:
    """Per (language, model) judged: metric means, n and AGG (no CIs) — the heatmap. ``preset``: a weights
    preset such as ``paper-fit``, whose weights AGG uses as given (``pipeline.metrics.agg_weights``)."""
    table = base["table"]
    judged = table.loc[table["items"] > 0, ["language", "model_id", *METRICS, *(f"n_{m}" for m in METRICS),
                                            "judgments"]]
    w = weights_dict(weights, preset)
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


def jury_base(db: str | Path, f: Filters, judge: str) -> dict[str, Any]:
    """What ``model_means`` reads of ``leaderboard_base`` (``table``: per language and model each metric's mean and n,
    items and judgments), for a jury from the writer's ``jury_patterns``: per metric the items of each tuple of its
    judges' scores, whose mean or median is the jury's score of them (as ``jury_items``' own); judgments are its
    judges' (``score_groups``); under a theme filter both tables' definitions over the filtered queries
    (``group_source``). No patterns across metrics: no CIs (``leaderboard_base`` has them)."""
    fn = {"mean": "list_avg", "median": "list_median"}[judge.removeprefix(JURY_PREFIX)]
    pred, params = group_pred(f, "j")
    g_pred, g_params = group_pred(f, "g")
    patterns, p_patterns = group_source("jury_patterns", f, through=("jury_items",))  # a theme: of its queries
    groups, p_groups = group_source("score_groups", f)
    with SHARED_READERS.cursor(db) as con:
        per = con.execute(
            f"SELECT language, model_id, metric, sum(n)::BIGINT AS items, sum(n) FILTER (WHERE v IS NOT NULL)::BIGINT "
            "AS scored, sum(v * n) FILTER (WHERE v IS NOT NULL) / sum(n) FILTER (WHERE v IS NOT NULL) AS mean "
            f"FROM (SELECT j.query_language AS language, j.model_id, j.metric, {fn}(j.scores) AS v, j.n "
            f"FROM {patterns} j WHERE {pred}) GROUP BY ALL ORDER BY language, model_id", [*p_patterns, *params]).df()
        judgments = con.execute(
            "SELECT g.query_language AS language, g.model_id, sum(list_sum(g.judgments))::BIGINT AS judgments "
            f"FROM {groups} g WHERE {g_pred} GROUP BY ALL", [*p_groups, *g_params]).df()
    if per.empty:
        return {"table": pd.DataFrame(columns=["language", "model_id", *METRICS, *(f"n_{m}" for m in METRICS),
                                               "items", "judgments"])}
    wide = per.pivot(index=["language", "model_id"], columns="metric", values=["mean", "scored", "items"])
    means, scored = wide["mean"].reindex(columns=list(METRICS)), wide["scored"].reindex(columns=list(METRICS))
    table = pd.concat([means, scored.fillna(0).add_prefix("n_")], axis=1).assign(items=wide["items"].max(axis=1))
    table = table.reset_index().merge(judgments, on=["language", "model_id"], how="left")
    return {"table": table}


def leaderboard(base: dict[str, Any], weights: tuple[float, ...], language: str,
                preset: str | None = None) -> pd.DataFrame:
    """One language's leaderboard: models by AGG with every metric, each with n and a 95% bootstrap CI.

    AGG is the weighted mean of the metric means (``pipeline.analysis.stats``); its CI resamples the items
    scored on every weighted metric. Further columns: items judged, parse failures (excluded from
    means), errors, self-consistency when judgments have several samples, lexical baselines, safety
    check pass rates (``check_<name>``: refusal accuracy, update adherence; only checks that ran)
    and the language's retrieval recall.
    """
    table = base["table"]
    rows = table[table.language == language]
    board: dict[str, np.ndarray] = {c: rows[c].to_numpy() for c in rows.columns if c != "language"}
    w = weights_dict(weights, preset)
    board["AGG"] = sum(board[m].astype(float) * w[m] for m in METRICS if w[m] > 0)
    patterns = base["patterns"].get(language)
    if patterns is not None:
        at = pd.Index(patterns["models"]).get_indexer(board["model_id"])  # -1: a model with no judged item
        board |= {col: np.where(at >= 0, values[at], np.nan) for col, values in _cis(patterns, w).items()}
    consistency = base["consistency"]
    consistency = consistency[consistency.language == language]
    if not consistency.empty:
        sc = pool_consistency(consistency, "model_id").set_index("model_id")
        board["self_std"] = sc.mean_std.reindex(board["model_id"]).to_numpy()
        board["flip_rate"] = sc.flip_rate.reindex(board["model_id"]).to_numpy()
    if "prompt_echoes" in board and pd.isna(board.get("check_prompt_echo", np.array([np.nan]))).all():
        del board["prompt_echoes"]  # the check did not run: no count, not zero
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


def language_scripts(db: str | Path, dataset: str | None) -> dict[str, list[str]]:
    """Per language the scripts its queries are in ('native', 'latin'; a query without a script is native)."""
    pred, params = ("dataset = ?", [dataset]) if dataset is not None else ("TRUE", [])
    with SHARED_READERS.cursor(db) as con:
        got = con.execute(f"SELECT language, list(DISTINCT coalesce(script, 'native') ORDER BY coalesce(script, "
                          f"'native') DESC) FROM queries WHERE {pred} GROUP BY ALL ORDER BY language",
                          params).fetchall()
    return {lang: list(scripts) for lang, scripts in got}


def safety_summary(db: str | Path, f: Filters) -> pd.DataFrame:
    """Per model × language × check: n, passed, failed, unclear and the pass rate over decided checks.

    Checks of the current response text only. ``pass_rate`` = passed / (passed + failed); NaN when
    nothing was decided (an ``unclear`` outcome is neither a pass nor a fail).
    """
    qf, p_qf = queries_cte(f)
    pred, p_model = model_pred(f, "s")
    out = df(db, (
        f"WITH {qf}, c AS (SELECT s.model_id, qf.language, s.check_name, count(*) AS n, "
        "count(*) FILTER (WHERE s.passed) AS passed, count(*) FILTER (WHERE NOT s.passed) AS failed "
        f"FROM safety_checks s JOIN qf ON {on_qf(f, 's')} {current_join(db, 's')} WHERE {pred} GROUP BY ALL) "
        "SELECT *, n - passed - failed AS unclear, "
        "CASE WHEN passed + failed > 0 THEN passed / (passed + failed) END AS pass_rate FROM c "
        "ORDER BY check_name, language, pass_rate DESC NULLS LAST, model_id"), [*p_qf, *p_model])
    return out[SAFETY_COLUMNS]


def paper_leaderboard(language: str) -> pd.DataFrame:
    """Health-Pariksha's published leaderboard for a language (Tables 2–6; GPT-4o as judge)."""
    board = reference_table("leaderboards")
    return board[board.language == language].drop(columns=["table", "language"]).reset_index(drop=True)


def paper_agg_check(language: str, weights: tuple[float, ...], preset: str | None = None) -> pd.DataFrame:
    """The published leaderboard of ``language`` with ``AGG_here``: its own FC, SS, COH and CON weighted as our
    AGG weights them now, and ``AGG_gap`` = printed − recomputed (near 0 only with the paper's weights)."""
    board = paper_leaderboard(language)
    if board.empty:
        return board.assign(AGG_here=[], AGG_gap=[])
    w = weights_dict(weights, preset)
    here = sum(board[m].astype(float) * w[m] for m in METRICS if m in board and w[m] > 0)
    return board.assign(AGG_here=here, AGG_gap=board.AGG - here)


def paper_copies() -> dict[str, str]:
    """Published per-language tables that repeat another language's row for row: language → the one it copies
    (the earlier table). Health-Pariksha's Tamil table (5) is its Kannada table (4); data/reference/README.md."""
    board = reference_table("leaderboards")
    columns = [c for c in board.columns if c not in ("table", "language")]
    tables = {lang: g[columns].sort_values(columns).reset_index(drop=True)
              for lang, g in sorted(board.groupby("language"), key=lambda kv: int(kv[1]["table"].iloc[0]))}
    out: dict[str, str] = {}
    seen: list[str] = []
    for lang, table in tables.items():
        for earlier in seen:
            if tables[earlier].shape == table.shape and tables[earlier].equals(table):
                out[lang] = earlier
                break
        seen.append(lang)
    return out


def short_name(model_id: str) -> str:
    """The last path part of a model id, lower-case: how model ids are matched to the paper's names."""
    return model_id.split("/")[-1].lower()
