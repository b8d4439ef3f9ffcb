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

Scores are the current ones (``item_scores``, ``response_facts``, current critiques, ``rubric_items``), read from
``model_items`` where the file has it (one read of a side's rows, which a clustered file keeps together); AGG uses
the weights given (the page passes the run's).

Over 450 lines: the two sides' reads, their pairing, the bootstrap and the provenance diff share the sides'
resolution (``Side``, one read per table for both sides of a file); split apart they would pass it around.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.analysis.significance import MIN_ITEMS_FOR_RANKS
from pipeline.analysis.stats import bootstrap_mean_ci, histogram
from pipeline.metrics import METRICS
from pipeline.read.common import current_hash, has_columns, weights_dict
from pipeline.read.responses import has_table
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
RESULTS_DIR_ENV = "PARIKSHA_RESULTS_DIR"


def results_dir(db: str | Path) -> Path:
    """The folder whose result databases may be compared: ``$PARIKSHA_RESULTS_DIR``, else the folder of ``db`` (the
    database the dashboard serves)."""
    env = os.environ.get(RESULTS_DIR_ENV, "").strip()
    return Path(env).expanduser().resolve() if env else Path(db).resolve().parent


DUCKDB_MAGIC = (8, b"DUCK")  # a DuckDB file's header: 8 bytes of checksum, then these four


def result_files(db: str | Path) -> list[str]:
    """The names of the other result databases (``*.duckdb``) in :func:`results_dir`: the only files the page may
    open as B (a link leading out of the folder is not one of them). Nothing else of the server's is reachable, and
    a file this process cannot read or that is not a DuckDB file (an empty or truncated one, a text file named
    ``.duckdb``) is not offered."""
    folder, here = results_dir(db), Path(db).resolve()
    return sorted(p.name for p in folder.glob("*.duckdb")
                  if p.is_file() and p.resolve().parent == folder and p.resolve() != here and _readable_duckdb(p))


def _readable_duckdb(path: Path) -> bool:
    offset, magic = DUCKDB_MAGIC
    try:
        with path.open("rb") as fh:
            return fh.read(offset + len(magic))[offset:] == magic
    except OSError:
        return False


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a database file, a dataset in it, one model (None: every model) and a judge."""

    db: str
    dataset: str
    model: str | None = None
    judge: str | None = None

    def describe(self) -> str:
        return f"{Path(self.db).name} · {self.dataset} · {self.model or 'every model'} · judge {self.judge or '–'}"


def _grader(con: duckdb.DuckDBPyConnection, dataset: str) -> str | None:
    """The dataset's first rubric grader: the one with the most graded items (then by id), None without rubrics."""
    if not has_table(con, "rubric_items"):
        return None
    rows = con.execute("SELECT grader_id FROM rubric_items WHERE dataset = ? GROUP BY grader_id "
                       "ORDER BY count(*) DESC, grader_id LIMIT 1", [dataset]).fetchall()
    return rows[0][0] if rows else None


SCORES = [*METRICS, *LEXICAL, MEDCODE, RUBRIC]  # per-item scores of a side, as read (AGG is computed from them)


def _in(values: list[Any]) -> str:
    return "(" + ", ".join("?" * len(values)) + ")"


def _sources(db: str, dataset: str, sides: dict[str, tuple[Side, str | None]]) -> list[tuple[str, str, list[Any]]]:
    """(name, SQL, parameters) of the tables the items of ``sides`` (tag → side and its rubric grader, all of one
    dataset of ``db``) are made of: each table read once, lean, filtered to the sides' models (every model when
    one takes every model), judges and graders, with ``for_{tag}`` telling which rows are the side's — two
    one-model sides of the same dataset and file share one read of each (on a large file the scan, not the join,
    is what costs)."""
    models = None if any(side.model is None for side, _ in sides.values()) else [s.model for s, _ in sides.values()]
    model = f" AND model_id IN {_in(models)}" if models is not None else ""
    ms = models or []

    def mine(*extra: str) -> tuple[str, list[Any]]:
        sql, params = [], []
        for tag, (side, grader) in sides.items():
            conds, values = (["model_id = ?"], [side.model]) if side.model else (["TRUE"], [])
            for what in extra:
                conds.append(f"{what} = ?")
                values.append(side.judge or "" if what == "judge_id" else grader or "")
            sql.append(f"({' AND '.join(conds)}) AS for_{tag}")
            params += values
        return ", ".join(sql), params

    judges = [side.judge or "" for side, _ in sides.values()]
    graders = [g for _, g in sides.values() if g]
    item = "query_id" if models is not None else "query_id, model_id"  # what identifies a side's item
    text_hash = current_hash(db, "r")
    # the stored hash is NULL exactly when the text is (``ResponseRow``): the texts themselves are not read
    no_text = "r.response_hash IS NULL" if text_hash == "r.response_hash" else "text IS NULL"
    parts: list[tuple[str, str, list[Any]]] = []
    for name, columns, table, extra, where, values in (
            ("responses", f"query_id, model_id, error IS NOT NULL AS failed, {no_text} AS no_text, "
             f"{text_hash} AS text_hash, prompt_hash, run_id, hash({item}, {text_hash}) AS kt", "responses r", (),
             "", []),
            ("scores", "query_id, model_id, " + ", ".join(f"{m}::DOUBLE AS {m}" for m in METRICS), "item_scores",
             ("judge_id",), f" AND judge_id IN {_in(judges)}", judges),
            ("facts", "query_id, model_id, " + ", ".join(f"{c}::DOUBLE AS {c}" for c in LEXICAL), "response_facts",
             (), "", []),
            ("rubric", f"query_id, model_id, score::DOUBLE AS {RUBRIC}", "rubric_items", ("grader_id",),
             f" AND grader_id IN {_in(graders)}", graders)):
        if name == "rubric" and not graders:
            continue
        flags, flag_params = mine(*extra)
        parts.append((name, f"SELECT {columns}, hash({item}) AS k, {flags} FROM {table} WHERE dataset = ?{model}"
                            f"{where}", [*flag_params, dataset, *ms, *values]))
    flags, flag_params = mine()
    # read as stored; averaged over critics (GROUP BY ALL, half the read's cost) only when a text has several
    parts.append(("critiques", f"SELECT query_id, model_id, response_hash, {MEDCODE}, "
                  f"hash({item}, response_hash) AS kt, {flags}{{texts}} FROM (SELECT query_id, model_id, "
                  f"response_hash, {{p_high}} AS {MEDCODE} FROM critiques WHERE dataset = ?{model} "
                  "AND p_high IS NOT NULL{group})",
                  [*flag_params, dataset, *ms]))
    parts.append(("queries", "SELECT query_id, language IS NULL AS no_language FROM queries WHERE dataset = ?",
                  [dataset]))
    return parts


def read_sources(con: duckdb.DuckDBPyConnection, parts: list[tuple[str, str, list[Any]]]) -> dict[str, pa.Table]:
    """Each of ``parts`` as Arrow. Critiques are read as stored, one row per critic, and averaged per text in SQL
    only when some text has several (distinct hashes of (query, model, text) are distinct texts; a collision only
    costs the grouped read)."""
    out = {}
    for name, sql, params in parts:
        if name != "critiques":
            out[name] = con.sql(sql, params=params).to_arrow_table()
            continue
        one = con.sql(sql.format(texts=", hash(query_id, model_id, response_hash) AS kc", p_high="p_high::DOUBLE",
                                 group=""), params=params).to_arrow_table()
        if pc.count_distinct(one["kc"]).as_py() == one.num_rows:  # one critic per text: its P(High) is the mean
            out[name] = one.drop_columns(["kc"])
        else:
            out[name] = con.sql(sql.format(texts="", p_high="avg(p_high)::DOUBLE", group=" GROUP BY ALL"),
                                params=params).to_arrow_table()
    return out


def _key(t: pa.Table, columns: list[str]) -> pa.ChunkedArray:
    """A lookup key of ``columns`` (joined by NUL, which ids and hashes do not hold)."""
    return t[columns[0]] if len(columns) == 1 else pc.binary_join_element_wise(*(t[c] for c in columns), "\x00")


def _lookup(r: pa.Table, t: pa.Table, key: str, columns: list[str], r_columns: list[str] | None = None) -> pa.Array:
    """For each row of ``r`` its row in ``t`` (null: none) by ``columns`` (of ``r``: ``r_columns``): by their hash
    ``key`` (DuckDB's ``hash``, read beside them: integers look up several times faster than strings), checked against
    the columns themselves, by the strings when two differ there (a hash collision)."""
    at = pc.index_in(r[key], value_set=t[key])
    found, matched = pc.drop_null(at), pc.is_valid(at)
    if all(pc.all(pc.fill_null(pc.equal(r[a].filter(matched), t[b].take(found)), False)).as_py()
           for a, b in zip(r_columns or columns, columns, strict=True)):
        return at
    ids = r.select(r_columns or columns).rename_columns(columns)
    return pc.index_in(_key(ids, columns), value_set=_key(t, columns))


def side_items(side: Side, tag: str, src: dict[str, pa.Table]) -> pa.Table:
    """Side ``tag``'s items from its ``_sources``: per response of the side's dataset and model(s) that has a
    query — ``query_id``, ``model_id``, ``failed`` (an error), ``no_text``, ``no_language``, ``text_hash`` (the
    current text's hash, ``common.current_hash``), ``prompt_hash``, ``run_id`` and the current ``SCORES``:
    registry metrics of the side's judge, lexical, Med-CoDE P(High) averaged over critics (of the current text),
    the rubric score of the dataset's grader. Texts are not read: whether two differ is told by their hashes.

    Each source is looked up by query (by query and model for every model), as a LEFT JOIN would (the sources
    are unique by those keys; critiques by them and the text hash)."""
    keys = ["query_id"] if side.model else ["query_id", "model_id"]
    mine = {name: t.filter(t[f"for_{tag}"]) for name, t in src.items() if name != "queries"}
    r = mine["responses"]
    at = pc.index_in(r["query_id"], value_set=src["queries"]["query_id"])
    r = r.filter(pc.is_valid(at)).append_column("no_language", src["queries"]["no_language"].take(pc.drop_null(at)))
    columns = {c: r[c] for c in ("query_id", "model_id", "failed", "no_text", "no_language", "text_hash",
                                 "prompt_hash", "run_id")}
    for name, scores in (("scores", METRICS), ("facts", LEXICAL), ("rubric", [RUBRIC])):
        at = _lookup(r, mine[name], "k", keys) if name in mine else None
        for c in scores:
            columns[c] = mine[name][c].take(at) if at is not None else pa.nulls(r.num_rows, pa.float64())
    at = _lookup(r, mine["critiques"], "kt", [*keys, "response_hash"], [*keys, "text_hash"])
    columns[MEDCODE] = mine["critiques"][MEDCODE].take(at)  # an errored response's is dropped with its other scores
    return pa.table(columns).combine_chunks()


def _by_model(db: str) -> bool:
    """Whether the file has ``model_items`` (``pipeline.store.derived_models``; an older file lacks it)."""
    return has_columns(db, "model_items", "judges")


def model_side_items(con: duckdb.DuckDBPyConnection, side: Side, grader: str | None) -> pa.Table:
    """``side_items``' table read from ``model_items``: the side's rows in one scan (by model, a clustered file's rows
    of one model lie in its own row groups, in query order, and a scan keeps that order), its judge's scores picked
    from the per-judge lists, and the rubric score of the dataset's grader looked up by query (and model)."""
    where, params = (("dataset = ? AND model_id = ?", [side.dataset, side.model]) if side.model
                     else ("dataset = ?", [side.dataset]))
    items = con.sql("SELECT query_id, model_id, failed, response_hash IS NULL AS no_text, no_language, response_hash "
                    "AS text_hash, prompt_hash, run_id, " + ", ".join(f"{m}[list_position(judges, ?)] AS {m}"
                                                                      for m in METRICS)
                    + ", " + ", ".join(f"{c}::DOUBLE AS {c}" for c in LEXICAL) + f", p_high AS {MEDCODE} "
                    f"FROM model_items WHERE {where}", params=[side.judge or ""] * len(METRICS) + params
                    ).to_arrow_table()
    rubric = pa.nulls(items.num_rows, pa.float64())
    if grader:
        keys = ["query_id"] if side.model else ["query_id", "model_id"]
        graded = con.sql(f"SELECT query_id, model_id, score::DOUBLE AS score FROM rubric_items WHERE grader_id = ? "
                         f"AND {where}", params=[grader, *params]).to_arrow_table()
        rubric = graded["score"].take(pc.index_in(_key(items, keys), value_set=_key(graded, keys)))
    return items.add_column(items.column_names.index(MEDCODE), RUBRIC, rubric)


def _side_meta(con: duckdb.DuckDBPyConnection, side: Side) -> dict[str, Any]:
    """A side's ``dataset`` row and its rubric ``grader``."""
    dataset = con.execute("SELECT name, path, content_hash, n_queries, n_chunks FROM datasets WHERE name = ?",
                          [side.dataset]).df()
    return {"dataset": dataset, "grader": _grader(con, side.dataset)}


def with_agg(rows: pd.DataFrame, weights: tuple[float, ...], suffix: str = "") -> pd.DataFrame:
    """``rows`` with AGG: Σ wₘ·scoreₘ over the weighted metrics (normalised weights), NaN when one is missing
    (of the columns ``{metric}{suffix}``, into ``AGG{suffix}``)."""
    w = weights_dict(weights)
    used = [m for m in METRICS if w[m] > 0]
    agg = sum(w[m] * rows[f"{m}{suffix}"] for m in used) if used else np.nan
    return rows.assign(**{f"AGG{suffix}": agg})


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


def _runs_of(counts: list[tuple[str, int]], runs: pd.DataFrame) -> tuple[pd.Series | None, str | None]:
    """The latest run (by start) of ``runs`` among those that wrote a side's shared responses, ``counts`` (run id
    and count, most first, ties in the order the items come), and the five most with their counts."""
    known = runs[runs.run_id.isin([r for r, _ in counts])].sort_values("started_at")
    listed = ", ".join(f"{r} ({n})" for r, n in counts[:5]) + (" …" if len(counts) > 5 else "")
    return (known.iloc[-1] if len(known) else None), (listed or None)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def provenance(a: Side, b: Side, sa: dict[str, Any], sb: dict[str, Any], shared: dict[str, Any]) -> pd.DataFrame:
    """What differs between the sides: database, dataset (and its content hash), model, judge, rubric grader, the
    runs their shared responses came from and, of the latest of them, the config keys that differ, code revision,
    config hash and model files; the retrieval settings of the shared queries, and how many shared items differ in
    prompt hash, retrieved chunks and response text. ``sa``/``sb``: each side's ``dataset`` row, ``grader``,
    ``runs`` (``_run_counts``) and ``runs_rows`` (those runs' rows); ``shared``: what ``compare`` counted over the
    shared items (``settings`` of both sides, ``moved``, ``queries``, ``pairs``, ``prompt_differs``,
    ``text_changed``)."""
    rows: list[tuple[str, Any, Any]] = [("database", a.db, b.db), ("dataset", a.dataset, b.dataset)]
    hashes = [s["dataset"].content_hash.iloc[0] if len(s["dataset"]) else None for s in (sa, sb)]
    rows += [("dataset content hash", *hashes), ("model", a.model or "every model", b.model or "every model"),
             ("judge", a.judge, b.judge), ("rubric grader", sa["grader"], sb["grader"])]
    (ra, listed_a), (rb, listed_b) = (_runs_of(side["runs"], side["runs_rows"]) for side in (sa, sb))
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
    settings = [sorted(set(s)) for s in shared["settings"]]
    rows.append(("retrieval settings", " | ".join(settings[0]) or None, " | ".join(settings[1]) or None))
    moved, queries, n = shared["moved"], shared["queries"], shared["pairs"]
    rows += [
        ("queries whose retrieved chunks differ", f"{moved} of {queries}", f"{moved} of {queries}"),
        ("items whose prompt hash differs", *[f"{shared['prompt_differs']} of {n}"] * 2),
        ("items whose response text differs", *[f"{shared['text_changed']} of {n}"] * 2),
    ]
    frame = pd.DataFrame([(w, _cell(x), _cell(y)) for w, x, y in rows], columns=PROVENANCE_COLUMNS[:3])
    counted = frame["what"].str.startswith(("queries whose", "items whose"))
    frame["differs"] = np.where(counted, ~frame["A"].str.startswith("0 of"), frame["A"] != frame["B"])
    return frame


RETRIEVED = "FROM retrievals WHERE dataset = ? AND query_id IN (SELECT query_id FROM cmp_shared)"


def _texts(con: duckdb.DuckDBPyConnection, dataset: str, models: list[str] | None,
           qids: list[str]) -> dict[tuple[str, str], Any]:
    """(query, model) → response text of ``dataset``'s ``models`` (None: every model) for the queries ``qids``."""
    some = f"AND model_id IN {_in(models)}" if models is not None else ""
    return {(q, m): t for q, m, t in con.execute(
        f"SELECT query_id, model_id, text FROM responses WHERE dataset = ? AND query_id IN {_in(qids)} {some}",
        [dataset, *qids, *(models or [])]).fetchall()}


def _chunks(con: duckdb.DuckDBPyConnection, dataset: str, qids: list[str]) -> dict[str, list]:
    """query → retrieved chunk ids (raw then update) of ``dataset`` for the queries ``qids``."""
    return {q: list(c) for q, c in con.execute(
        "SELECT query_id, list_concat(raw_ids, update_ids) FROM retrievals WHERE dataset = ? "
        f"AND query_id IN {_in(qids)}", [dataset, *qids]).fetchall()}


def _strings(values: list[Any], any_value: bool) -> pd.Series:
    """A text column as reading the whole table gives it: ``str`` when any of its values is not NULL, else object."""
    return pd.Series(values, dtype="str" if any_value else object)


def _any(column: pa.ChunkedArray) -> bool:
    return bool(pc.any(column).as_py())


def _distinct(x: pa.ChunkedArray, y: pa.ChunkedArray) -> pa.ChunkedArray:
    """x IS DISTINCT FROM y."""
    return pc.or_(pc.not_equal(pc.is_null(x), pc.is_null(y)), pc.fill_null(pc.not_equal(x, y), False))


def _run_counts(runs: pa.ChunkedArray) -> list[tuple[str, int]]:
    """(run id, items it wrote), most first, ties in the order the items come (``Counter.most_common``)."""
    counts = pc.value_counts(pc.drop_null(runs)).to_pylist()  # in order of first appearance
    return sorted(((c["values"], c["counts"]) for c in counts), key=lambda rc: rc[1], reverse=True)


def _runs_rows(con: duckdb.DuckDBPyConnection, counts: list[tuple[str, int]]) -> pd.DataFrame:
    return con.execute("SELECT run_id, name, started_at, config, config_hash, code_revision, model_files FROM runs "
                       "WHERE list_contains(?, run_id)", [[r for r, _ in counts]]).df()


def _same_sorted(x: pa.ChunkedArray, y: pa.ChunkedArray) -> bool:
    """Whether ``x`` and ``y`` hold the same values in the same ascending order, none repeated."""
    if len(x) != len(y):
        return False
    if len(x) < 2:
        return len(x) == 0 or x[0] == y[0]
    return bool(pc.all(pc.less(x[:-1], x[1:])).as_py() and pc.all(pc.equal(x, y)).as_py())


def _pair(ta: pa.Table, tb: pa.Table, keys: list[str]) -> pa.Table:
    """The items both sides have, by ``keys``, in key order: the keys, then the other columns as ``{column}_a`` and
    ``{column}_b``."""
    # the same queries in key order (one model of a clustered file's ``model_items`` each) are paired as read
    if len(keys) == 1 and not _same_sorted(ta[keys[0]], tb[keys[0]]):  # by query: where each of A's items is in B
        ta = ta.take(pc.sort_indices(ta, sort_keys=[(keys[0], "ascending")]))
        at = pc.index_in(ta[keys[0]], value_set=tb[keys[0]])
        found = pc.is_valid(at)
        ta, tb = ta.filter(found), tb.take(pc.drop_null(at))
    elif len(keys) > 1:
        rows = [t.select(keys).append_column("row", pa.array(np.arange(t.num_rows))) for t in (ta, tb)]
        both = rows[0].join(rows[1], keys=keys, join_type="inner", left_suffix="_a", right_suffix="_b")
        both = both.take(pc.sort_indices(both, sort_keys=[(k, "ascending") for k in keys]))
        ta, tb = ta.take(both["row_a"]), tb.take(both["row_b"])
    columns = {k: ta[k] for k in keys}
    for suffix, t in (("a", ta), ("b", tb)):
        columns.update({f"{c}_{suffix}": t[c] for c in t.column_names if c not in keys})
    return pa.table(columns)


def compare(a: Side, b: Side, weights: tuple[float, ...], *, metric: str = "AGG", n_changed: int = 10) -> dict:
    """Two sides compared (module docstring): ``metrics`` (``METRIC_COLUMNS``), ``changed`` (the ``n_changed``
    pairs whose ``metric`` moved most — then those whose text changed — with both texts and scores and both
    sides' chunk ids), ``provenance`` (``PROVENANCE_COLUMNS``), ``pairs`` (the number of shared items), ``metric``
    used, ``same`` (True when both sides are the same rows), ``only_a`` and ``only_b`` (items of one side only).

    Each side's items (``side_items``: scores, flags and hashes, no texts) are read as Arrow from its own database
    (one read of each table for two one-model sides of one dataset and file) and paired, counted and ranked here;
    the retrieval settings and moved chunks of the shared queries are counted in SQL, and texts, queries and chunks
    are read only of the ``n_changed`` items shown."""
    same = a == b
    if (a.model is None) != (b.model is None):
        raise ValueError("both sides take one model each, or both take every model")
    keys = ["query_id"] if a.model else ["query_id", "model_id"]
    one_file = Path(a.db).resolve() == Path(b.db).resolve()
    with ExitStack() as stack:
        con = stack.enter_context(SHARED_READERS.cursor(a.db))
        con_b = con if one_file else stack.enter_context(SHARED_READERS.cursor(b.db))
        sa = _side_meta(con, a)
        sb = dict(sa) if one_file and a.dataset == b.dataset else _side_meta(con_b, b)
        if one_file and a.dataset == b.dataset and a.model and not _by_model(a.db):  # one read of each for both
            src = read_sources(con, _sources(a.db, a.dataset, {"a": (a, sa["grader"]), "b": (b, sb["grader"])}))
            ta, tb = side_items(a, "a", src), side_items(b, "b", src)
        else:
            ta, tb = (model_side_items(c, side, meta["grader"]) if _by_model(side.db) else
                      side_items(side, tag, read_sources(c, _sources(side.db, side.dataset,
                                                                     {tag: (side, meta["grader"])})))
                      for c, side, tag, meta in ((con, a, "a", sa), (con_b, b, "b", sb)))
        paired = _pair(ta, tb, keys)
        shared_ids = pa.table({"query_id": pc.unique(paired["query_id"])})
        for c in {id(con): con, id(con_b): con_b}.values():
            c.register("cmp_shared", shared_ids)
            stack.callback(c.unregister, "cmp_shared")
        settings = [[x for (x,) in c.execute(f"SELECT DISTINCT settings {RETRIEVED}", [side.dataset]).fetchall()]
                    for c, side in ((con, a), *(() if one_file and a.dataset == b.dataset else ((con_b, b),)))]
        settings = settings * (3 - len(settings))  # one dataset of one file: the same retrievals on both sides
        if one_file and a.dataset == b.dataset:
            moved = 0  # the same retrievals on both sides
        else:
            chunks = f"SELECT query_id, list_concat(raw_ids, update_ids) AS chunks {RETRIEVED}"
            if one_file:
                retrieved_b, params_b = f"({chunks})", [b.dataset]
            else:
                con.register("cmp_retrieved_b", con_b.sql(chunks, params=[b.dataset]).to_arrow_table())
                stack.callback(con.unregister, "cmp_retrieved_b")
                retrieved_b, params_b = "cmp_retrieved_b", []
            moved = con.execute(f"SELECT count(*) FROM cmp_shared s LEFT JOIN ({chunks}) ra "
                                f"ON ra.query_id = s.query_id LEFT JOIN {retrieved_b} rb ON rb.query_id = s.query_id "
                                "WHERE ra.chunks IS DISTINCT FROM rb.chunks", [a.dataset, *params_b]).fetchall()[0][0]
        sa["runs"], sb["runs"] = _run_counts(paired["run_id_a"]), _run_counts(paired["run_id_b"])
        if one_file:  # one read of both sides' runs (``_runs_of`` keeps a side's own)
            sa["runs_rows"] = sb["runs_rows"] = _runs_rows(con, sa["runs"] + sb["runs"])
        else:
            sa["runs_rows"], sb["runs_rows"] = _runs_rows(con, sa["runs"]), _runs_rows(con_b, sb["runs"])
        scores = {}
        for s in ("a", "b"):
            failed = paired[f"failed_{s}"].to_numpy(zero_copy_only=False)
            for col in SCORES:  # an error has no score
                scores[f"{col}_{s}"] = np.where(failed, np.nan, paired[f"{col}_{s}"].to_numpy(zero_copy_only=False))
        pairs = pd.DataFrame(scores)
        for s in ("a", "b"):
            pairs = with_agg(pairs, weights, f"_{s}")
        table = metric_table(pairs, [*METRICS, "AGG", *LEXICAL, MEDCODE, RUBRIC])
        if metric not in set(table.metric):
            metric = next(iter(table.metric), "AGG")
        score_a, score_b = (pairs[f"{metric}_{s}"].to_numpy(dtype=float) for s in ("a", "b"))
        text_changed = pc.or_(_distinct(paired["no_text_a"], paired["no_text_b"]),
                              pc.and_(pc.invert(paired["no_text_a"]),
                                      _distinct(paired["text_hash_a"], paired["text_hash_b"])))
        changed_text = text_changed.to_numpy(zero_copy_only=False).astype(bool)
        prompt_differs = int(pc.sum(pc.fill_null(pc.not_equal(paired["prompt_hash_a"], paired["prompt_hash_b"]),
                                                 True)).as_py() or 0)
        moved_by = np.abs(score_b - score_a)
        moved_by = np.where(np.isnan(moved_by), -1.0, moved_by)
        shown = np.flatnonzero((moved_by > 0) | changed_text)  # in key order: a stable sort keeps it among ties
        shown = shown[np.lexsort((~changed_text[shown], -moved_by[shown]))][:n_changed]
        top = list(zip(paired["query_id"].take(shown).to_pylist(),
                       paired["model_id" if "model_id" in keys else "model_id_a"].take(shown).to_pylist(),
                       strict=True))
        qids = list(dict.fromkeys(q for q, _ in top))
        has_query = con.execute("SELECT count(query) > 0, count(query_en) > 0, count(gt_response) > 0 FROM queries "
                                "WHERE dataset = ?", [a.dataset]).fetchall()[0]
        queries, texts_a, texts_b, chunks_a, chunks_b = {}, {}, {}, {}, {}
        if qids:
            queries = {q: rest for q, *rest in con.execute(
                "SELECT query_id, language, query, query_en, gt_response FROM queries WHERE dataset = ? "
                f"AND query_id IN {_in(qids)}", [a.dataset, *qids]).fetchall()}
            # a side's texts each (one model is a filter the scan applies; two are not, and every text is read)
            texts_a, texts_b = (_texts(c, s.dataset, [s.model] if s.model else None, qids)
                                for c, s in ((con, a), (con_b, b)))
            if one_file and a.dataset == b.dataset:  # the same chunks
                chunks_a = chunks_b = _chunks(con, a.dataset, qids)
            else:
                chunks_a, chunks_b = _chunks(con, a.dataset, qids), _chunks(con_b, b.dataset, qids)
    n_a, n_b, n_pairs = ta.num_rows, tb.num_rows, paired.num_rows
    changed = pd.DataFrame({
        "query_id": _strings([q for q, _ in top], n_a > 0), "model_id": _strings([m for _, m in top], n_a > 0),
        "language": _strings([queries[q][0] for q, _ in top], _any(pc.invert(ta["no_language"]))),
        **{c: _strings([queries[q][i + 1] for q, _ in top], has)
           for i, (c, has) in enumerate(zip(("query", "query_en", "gt_response"), has_query, strict=True))},
        "text_a": _strings([texts_a.get(k) for k in top], _any(pc.invert(ta["no_text"]))),
        "text_b": _strings([texts_b.get((q, b.model or m)) for q, m in top], _any(pc.invert(tb["no_text"]))),
        "score_a": score_a[shown], "score_b": score_b[shown], "diff": (score_b - score_a)[shown],
        "text_changed": changed_text[shown]})
    changed["chunks_a"] = [chunks_a.get(q, []) for q, _ in top]
    changed["chunks_b"] = [chunks_b.get(q, []) for q, _ in top]
    shared = {"settings": settings, "moved": int(moved), "queries": shared_ids.num_rows, "pairs": n_pairs,
              "prompt_differs": prompt_differs, "text_changed": int(changed_text.sum())}
    return {"metrics": table, "changed": changed[CHANGED_COLUMNS], "provenance": provenance(a, b, sa, sb, shared),
            "pairs": n_pairs, "metric": metric, "same": same, "only_a": n_a - n_pairs, "only_b": n_b - n_pairs}
