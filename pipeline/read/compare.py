"""Compare runs: two sets of results side by side — per-metric paired differences with 95 % intervals, the items
that changed most, and which provenance differs.

**What a side is.** Results are keyed by (dataset, query, model[, judge]): a later run of the same config
overwrites an earlier run's rows in place. So "two runs" can only be compared where their rows still exist
apart: in **two result databases** (e.g. two runs with different retrieval, each into its own file), or in
one database as **two models, judges or datasets** (a prompt change stored as another dataset, a model change,
a second judge). A side is (database, dataset, model or every model, judge); two sides with the same four
are the same rows, and the read says so instead of reporting zero differences.

**Pairing.** Items are paired by query (by query and model when both sides take every model); a metric's
difference is taken over the pairs both sides scored. ``diff`` is B − A, and its interval is the 95 %
percentile paired bootstrap of the mean of the per-item differences (the same resampled items on both sides:
``stats.bootstrap_mean_ci`` on their histogram, which costs the same for any number of items).

Scores are the current ones (``item_scores``, ``response_facts``, current critiques, ``rubric_items``);
AGG uses the weights given (the page passes the run's).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from pipeline.analysis.significance import MIN_ITEMS_FOR_RANKS
from pipeline.analysis.stats import bootstrap_mean_ci, histogram
from pipeline.metrics import METRICS
from pipeline.read.common import current_hash, weights_dict
from pipeline.store import LEXICAL, SHARED_READERS

MEDCODE = "p_high"
RUBRIC = "rubric"
LOWER_IS_BETTER = {MEDCODE}
MIN_ITEMS = MIN_ITEMS_FOR_RANKS  # fewer shared items: the percentile bootstrap under-covers (say so)
METRIC_COLUMNS = ["metric", "n", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "differs", "better", "only_a",
                  "only_b"]
CHANGED_COLUMNS = ["query_id", "model_id", "language", "query", "query_en", "gt_response", "text_a", "text_b",
                   "score_a", "score_b", "diff", "text_changed", "chunks_a", "chunks_b"]
PROVENANCE_COLUMNS = ["what", "A", "B", "differs"]


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a database file, a dataset in it, one model (None: every model) and a judge."""

    db: str
    dataset: str
    model: str | None = None
    judge: str | None = None

    def describe(self) -> str:
        return f"{Path(self.db).name} · {self.dataset} · {self.model or 'every model'} · judge {self.judge or '–'}"


def _has(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()[0] > 0


def side_rows(side: Side) -> dict[str, pd.DataFrame]:
    """A side's items — ``rows``: per response (``query_id``, ``model_id``, ``language``, ``text``, ``error``,
    ``prompt_hash``, ``run_id``) its current scores (registry metrics of the side's judge, lexical, Med-CoDE
    P(High) averaged over critics, the rubric score of the dataset's first grader); ``retrievals`` of its queries
    (``chunks`` = raw then update ids, ``settings``); ``runs`` its responses came from; ``dataset`` its row."""
    model_pred = "AND r.model_id = ?" if side.model else ""
    with SHARED_READERS.cursor(side.db) as con:
        rubric = _has(con, "rubric_items")
        grader = con.execute("SELECT grader_id FROM rubric_items WHERE dataset = ? GROUP BY grader_id "
                             "ORDER BY count(*) DESC, grader_id LIMIT 1", [side.dataset]).fetchone() if rubric else None
        joins = ("LEFT JOIN item_scores i ON i.dataset = r.dataset AND i.query_id = r.query_id "
                 "AND i.model_id = r.model_id AND i.judge_id = ? "
                 "LEFT JOIN response_facts f ON f.dataset = r.dataset AND f.query_id = r.query_id "
                 "AND f.model_id = r.model_id "
                 "LEFT JOIN (SELECT query_id, model_id, response_hash, avg(p_high) AS p_high FROM critiques "
                 "WHERE dataset = ? AND p_high IS NOT NULL GROUP BY ALL) c ON c.query_id = r.query_id "
                 f"AND c.model_id = r.model_id AND c.response_hash = {current_hash(side.db, 'r')} AND r.error IS NULL ")
        params: list[Any] = [side.judge or "", side.dataset]
        rubric_col = "NULL::DOUBLE"
        if grader:
            joins += ("LEFT JOIN rubric_items ri ON ri.dataset = r.dataset AND ri.query_id = r.query_id "
                      "AND ri.model_id = r.model_id AND ri.grader_id = ? ")
            params.append(grader[0])
            rubric_col = "ri.score"
        rows = con.execute(
            "SELECT r.query_id, r.model_id, q.language, r.text, r.error, r.prompt_hash, r.run_id, "
            + ", ".join(f"i.{m}" for m in METRICS) + ", " + ", ".join(f"f.{c}" for c in LEXICAL)
            + f", c.p_high, {rubric_col} AS {RUBRIC} FROM responses r JOIN queries q ON q.dataset = r.dataset "
            f"AND q.query_id = r.query_id {joins}WHERE r.dataset = ? {model_pred} ORDER BY r.query_id, r.model_id",
            [*params, side.dataset, *([side.model] if side.model else [])]).df()
        retrievals = con.execute("SELECT query_id, list_concat(raw_ids, update_ids) AS chunks, settings "
                                 "FROM retrievals WHERE dataset = ?", [side.dataset]).df()
        runs = con.execute("SELECT run_id, name, started_at, config, config_hash, code_revision, model_files "
                           "FROM runs WHERE run_id IN (SELECT DISTINCT run_id FROM responses WHERE dataset = ?)",
                           [side.dataset]).df()
        dataset = con.execute("SELECT name, path, content_hash, n_queries, n_chunks FROM datasets WHERE name = ?",
                              [side.dataset]).df()
    failed = rows["error"].notna()
    for col in (*METRICS, *LEXICAL, MEDCODE, RUBRIC):
        rows[col] = rows[col].astype(float).where(~failed)  # an errored response has no score
    return {"rows": rows, "retrievals": retrievals, "runs": runs, "dataset": dataset,
            "grader": grader[0] if grader else None}


def with_agg(rows: pd.DataFrame, weights: tuple[float, ...]) -> pd.DataFrame:
    """``rows`` with AGG: Σ wₘ·scoreₘ over the weighted metrics (normalised weights), NaN when one is missing."""
    w = weights_dict(weights)
    used = [m for m in METRICS if w[m] > 0]
    agg = sum(w[m] * rows[m] for m in used) if used else np.nan
    return rows.assign(AGG=agg)


def paired_ci(diffs: np.ndarray) -> tuple[float, float]:
    """95 % percentile paired-bootstrap interval of the mean of per-item differences."""
    values, counts = histogram(diffs, decimals=6)
    return bootstrap_mean_ci(values, counts) if counts.sum() > 1 else (float("nan"), float("nan"))


def metric_table(pairs: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Per metric: shared pairs, both means over them, B − A with its interval, whether it excludes 0, which side
    it favours, and the items scored on one side only."""
    out = []
    for m in metrics:
        a, b = pairs[f"{m}_a"].to_numpy(dtype=float), pairs[f"{m}_b"].to_numpy(dtype=float)
        both = ~np.isnan(a) & ~np.isnan(b)
        only_a, only_b = int((~np.isnan(a) & np.isnan(b)).sum()), int((np.isnan(a) & ~np.isnan(b)).sum())
        if not both.any() and not (only_a or only_b):
            continue
        d = b[both] - a[both]
        lo, hi = paired_ci(d) if len(d) else (np.nan, np.nan)
        differs = bool(lo > 0 or hi < 0)
        diff = float(d.mean()) if len(d) else np.nan
        better = "–" if not differs else ("B" if (diff > 0) != (m in LOWER_IS_BETTER) else "A")
        out.append({"metric": m, "n": int(both.sum()), "mean_a": float(a[both].mean()) if len(d) else np.nan,
                    "mean_b": float(b[both].mean()) if len(d) else np.nan, "diff": diff, "ci_lo": lo, "ci_hi": hi,
                    "differs": differs, "better": better, "only_a": only_a, "only_b": only_b})
    return pd.DataFrame(out, columns=METRIC_COLUMNS)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A config as dotted keys (lists of models and judges by their ids)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) and "id" in v for v in value):
        out = {prefix.rstrip("."): ", ".join(str(v["id"]) for v in value)}
        for v in value:
            out.update(_flat({k: x for k, x in v.items() if k != "id"}, f"{prefix}{v['id']}."))
        return out
    return {prefix.rstrip("."): value}


def config_diff(a: str | None, b: str | None) -> list[tuple[str, Any, Any]]:
    """(key, A's value, B's value) of the dotted config keys whose values differ (``db`` and ``name`` left out)."""
    def load(text: str | None) -> dict[str, Any]:
        try:
            value = json.loads(text) if text else {}
        except (TypeError, ValueError):
            return {}
        return _flat(value) if isinstance(value, dict) else {}

    fa, fb = load(a), load(b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))
            if k not in ("db", "name") and fa.get(k) != fb.get(k)]


def _runs_of(rows: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.Series | None, str | None]:
    """The latest run (by start) that wrote any of ``rows``' responses, and every such run with its count."""
    counts = Counter(r for r in rows["run_id"] if isinstance(r, str))
    known = runs[runs.run_id.isin(list(counts))].sort_values("started_at")
    listed = ", ".join(f"{r} ({n})" for r, n in counts.most_common(5)) + (" …" if len(counts) > 5 else "")
    return (known.iloc[-1] if len(known) else None), (listed or None)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def provenance(a: Side, b: Side, sa: dict[str, Any], sb: dict[str, Any], pairs: pd.DataFrame) -> pd.DataFrame:
    """What differs between the sides: database, dataset (and its content hash), model, judge, rubric grader, the
    runs their shared responses came from and, of the latest of them, the config keys that differ, code revision,
    config hash and model files; the retrieval settings of the shared queries, and how many shared items differ in
    prompt hash, retrieved chunks and response text."""
    rows: list[tuple[str, Any, Any]] = [("database", a.db, b.db), ("dataset", a.dataset, b.dataset)]
    hashes = [s["dataset"].content_hash.iloc[0] if len(s["dataset"]) else None for s in (sa, sb)]
    rows += [("dataset content hash", *hashes), ("model", a.model or "every model", b.model or "every model"),
             ("judge", a.judge, b.judge), ("rubric grader", sa["grader"], sb["grader"])]
    (ra, listed_a), (rb, listed_b) = (_runs_of(pairs.rename(columns={f"run_id_{s}": "run_id"}), side["runs"])
                                      for s, side in (("a", sa), ("b", sb)))
    rows += [("runs that wrote the responses (count)", listed_a, listed_b),
             ("latest of those runs", None if ra is None else f"{ra.run_id} ({ra['name']})",
              None if rb is None else f"{rb.run_id} ({rb['name']})")]
    for field in ("started_at", "code_revision", "config_hash"):
        rows.append((f"run {field.replace('_', ' ')}", None if ra is None else str(ra[field]),
                     None if rb is None else str(rb[field])))
    for key, va, vb in config_diff(None if ra is None else ra.config, None if rb is None else rb.config):
        rows.append((f"config: {key}", va, vb))
    for key, va, vb in config_diff(None if ra is None else ra.model_files, None if rb is None else rb.model_files):
        rows.append((f"model file: {key}", va, vb))
    shared = set(pairs["query_id"])
    settings = [sorted(set(s["retrievals"][s["retrievals"].query_id.isin(shared)].settings)) for s in (sa, sb)]
    rows.append(("retrieval settings", " | ".join(settings[0]) or None, " | ".join(settings[1]) or None))
    chunks = [dict(zip(s["retrievals"].query_id, (list(c) for c in s["retrievals"].chunks), strict=True))
              for s in (sa, sb)]
    moved = sum(chunks[0].get(q) != chunks[1].get(q) for q in shared)
    n = len(pairs)
    rows += [
        ("queries whose retrieved chunks differ", f"{moved} of {len(shared)}", f"{moved} of {len(shared)}"),
        ("items whose prompt hash differs", *[f"{int((pairs.prompt_hash_a != pairs.prompt_hash_b).sum())} of {n}"] * 2),
        ("items whose response text differs", *[f"{int(pairs.text_changed.sum())} of {n}"] * 2),
    ]
    frame = pd.DataFrame([(w, _cell(x), _cell(y)) for w, x, y in rows], columns=PROVENANCE_COLUMNS[:3])
    counted = frame["what"].str.startswith(("queries whose", "items whose"))
    frame["differs"] = np.where(counted, ~frame["A"].str.startswith("0 of"), frame["A"] != frame["B"])
    return frame


def compare(a: Side, b: Side, weights: tuple[float, ...], *, metric: str = "AGG", n_changed: int = 10) -> dict:
    """Two sides compared (module docstring): ``metrics`` (``METRIC_COLUMNS``), ``changed`` (the ``n_changed``
    pairs whose ``metric`` moved most — then those whose text changed — with both texts and scores and both
    sides' chunk ids), ``provenance`` (``PROVENANCE_COLUMNS``), ``pairs`` (shared items), ``metric`` used,
    ``same`` (True when both sides are the same rows) and ``graders``."""
    same = a == b
    if (a.model is None) != (b.model is None):
        raise ValueError("both sides take one model each, or both take every model")
    sa, sb = side_rows(a), side_rows(b)
    keys = ["query_id"] if a.model else ["query_id", "model_id"]
    ra, rb = with_agg(sa["rows"], weights), with_agg(sb["rows"], weights)
    pairs = ra.merge(rb, on=keys, suffixes=("_a", "_b"))
    if a.model:
        pairs = pairs.rename(columns={"model_id_a": "model_id"})
    pairs["language"] = pairs["language_a"]
    pairs["text_changed"] = pairs["text_a"].fillna("\0") != pairs["text_b"].fillna("\0")
    metrics = [*METRICS, "AGG", *LEXICAL, MEDCODE, RUBRIC]
    table = metric_table(pairs, metrics)
    if metric not in set(table.metric):
        metric = next(iter(table.metric), "AGG")
    with SHARED_READERS.cursor(a.db) as con:
        queries = con.execute("SELECT query_id, query, query_en, gt_response FROM queries "
                              "WHERE dataset = ?", [a.dataset]).df()
    chunks = [dict(zip(s["retrievals"].query_id, (list(c) for c in s["retrievals"].chunks), strict=True))
              for s in (sa, sb)]
    ranked = pairs.assign(score_a=pairs.get(f"{metric}_a"), score_b=pairs.get(f"{metric}_b"))
    ranked["diff"] = ranked["score_b"] - ranked["score_a"]
    ranked["moved"] = ranked["diff"].abs().fillna(-1.0)
    ranked = ranked.sort_values(["moved", "text_changed", *keys], ascending=[False, False, *([True] * len(keys))])
    top = ranked[(ranked["moved"] > 0) | ranked["text_changed"]].head(n_changed).merge(queries, on="query_id",
                                                                                     how="left")
    top["chunks_a"] = [chunks[0].get(q, []) for q in top.query_id]
    top["chunks_b"] = [chunks[1].get(q, []) for q in top.query_id]
    return {"metrics": table, "changed": top[CHANGED_COLUMNS].reset_index(drop=True),
            "provenance": provenance(a, b, sa, sb, pairs), "pairs": len(pairs), "metric": metric, "same": same,
            "only_a": len(ra) - len(pairs), "only_b": len(rb) - len(pairs)}
