"""What every read model shares: the database file, the sidebar's filters, read-only connections, SQL pieces.

Every read opens a read-only connection through ``pipeline.store.SHARED_READERS`` (a cursor of the
instance the current render holds, or a connection of its own; either waits out a writer's lock)
and closes it at once. SQL identifiers come only from fixed lists (the metric registry, the
store's schema, this package's constants); every filter value is a parameter. Nothing here writes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from pipeline.analysis.stats import normalised_weights
from pipeline.disagreement import COLUMN_LABELS, PROB_COLUMNS
from pipeline.metrics import DEFAULT_WEIGHTS, METRICS, agg_weights
from pipeline.store import DERIVED, SCHEMA_VERSION, SHARED_READERS

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DB = REPO_ROOT / "data" / "results.duckdb"
REFERENCE_DIR = REPO_ROOT / "data" / "reference"
REFERENCE_FILES = {"medcode_table2": "medcode_table2.csv", "medcode_table1": "medcode_table1.csv",
                   "table7": "health_pariksha_table7_rankings.csv",
                   "table1": "health_pariksha_table1_models.csv", "leaderboards": "health_pariksha_leaderboards.csv"}
PLAYGROUND = "playground"
LEXICAL_LABELS = {"rouge_l": "ROUGE-L", "chrf": "chrF++", "bleu": "BLEU", "meteor": "METEOR", "cosine": "cosine"}
DISAGREEMENT = PROB_COLUMNS
DISAGREEMENT_LABELS = COLUMN_LABELS
UPGRADE_COMMAND = "python -m pipeline upgrade --db {db}"


# -- the database file -----------------------------------------------------------------------------
def db_path() -> Path:
    """The results database: ``$PARIKSHA_DB``, else ``data/results.duckdb`` of this repository."""
    env = os.environ.get("PARIKSHA_DB")
    return Path(env).expanduser() if env else DEFAULT_DB


def db_exists(db: str | Path) -> bool:
    return Path(db).is_file() and Path(db).stat().st_size > 0


def db_stamp(db: str | Path) -> tuple[int, int, int, int]:
    """Size and mtime of the file and its WAL: changes whenever a writer commits."""
    out: list[int] = []
    for path in (Path(db), Path(f"{db}.wal")):
        try:
            stat = path.stat()
            out += [stat.st_size, stat.st_mtime_ns]
        except OSError:
            out += [0, 0]
    return tuple(out)  # type: ignore[return-value]


def df(db: str | Path, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    """Run one read-only query and close the connection at once."""
    with SHARED_READERS.cursor(db) as con:
        return con.execute(sql, list(params)).df()


def dfs(db: str | Path, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[pd.DataFrame]:
    """Several read-only queries on one short-lived connection (one consistent snapshot)."""
    with SHARED_READERS.cursor(db) as con:
        return [con.execute(sql, list(params)).df() for sql, params in statements]


# -- schema version ----------------------------------------------------------------------------------
def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """The file's ``meta.schema_version`` (0 when it has none)."""
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.CatalogException:
        return 0
    return int(row[0]) if row else 0


def upgrade_notice(db: str | Path, version: int) -> str | None:
    """One line for a page when the file was written by an older version of the studio, else None
    (also for a file without a schema version: not a results database)."""
    if not 0 < version < SCHEMA_VERSION:
        return None
    return (f"This database was written by an older version of Pariksha Studio (schema {version}, now "
            f"{SCHEMA_VERSION}), so some figures may be missing or stale; run `{UPGRADE_COMMAND.format(db=db)}`.")


def outdated(db: str | Path) -> str | None:
    """``upgrade_notice`` of the file, read on its own (for when its tables cannot be read)."""
    with SHARED_READERS.cursor(db) as con:
        return upgrade_notice(db, schema_version(con))


# -- current scores ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=32)
def _columns(db: str, stamp: tuple[int, ...]) -> frozenset[tuple[str, str]]:
    with SHARED_READERS.cursor(db) as con:
        return frozenset(con.execute("SELECT table_name, column_name FROM duckdb_columns()").fetchall())


def has_columns(db: str | Path, table: str, *columns: str) -> bool:
    """Whether ``table`` of the file has every one of ``columns`` (an older file may lack a newer schema's columns:
    reads never upgrade). Listed once per file state (``db_stamp``): a fresh DuckDB instance takes milliseconds to
    list its columns, and a file gains columns only when a writer commits."""
    present = _columns(str(db), db_stamp(db))
    return all((table, column) in present for column in columns)


def current_hash(db: str | Path, alias: str = "r") -> str:
    """SQL for the stored response's current text hash (``pipeline.store.text_hash``) of ``responses`` ``alias``.

    The stored ``response_hash`` column where the file has one; else computed from the text.
    """
    if has_columns(db, "responses", "response_hash"):
        return f"{alias}.response_hash"
    return f"substr(sha256(coalesce({alias}.text, '')), 1, 16)"


def current_join(db: str | Path, alias: str, r: str = "r") -> str:
    """JOIN of a per-response score table ``alias`` to the response it scored, current and not errored."""
    return (f"JOIN responses {r} ON {r}.dataset = {alias}.dataset AND {r}.query_id = {alias}.query_id "
            f"AND {r}.model_id = {alias}.model_id AND {r}.error IS NULL "
            f"AND {alias}.response_hash = {current_hash(db, r)}")


# -- filters -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filters:
    """The sidebar's filters. Empty tuples mean "all"; ``dataset=None`` means every dataset."""

    dataset: str | None = None
    languages: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    themes: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()  # 'native' | 'latin' (romanized); a query without a script counts as native

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
        if self.scripts:
            preds.append(f"list_contains(?, coalesce({q}.script, 'native'))")
            params.append(list(self.scripts))
        if self.models and r is not None:
            preds.append(f"list_contains(?, {r}.model_id)")
            params.append(list(self.models))
        return (" AND ".join(preds) or "TRUE"), params

    def with_(self, **changes: Any) -> Filters:
        return Filters(**{**self.__dict__, **changes})


def queries_cte(f: Filters) -> tuple[str, list[Any]]:
    """``qf``: the filtered queries with their language (models are filtered on the per-item rows)."""
    where, params = f.sql(r=None)
    return f"qf AS (SELECT q.dataset, q.query_id, q.language FROM queries q WHERE {where})", params


def model_pred(f: Filters, alias: str) -> tuple[str, list[Any]]:
    """WHERE predicate on a per-item table ``alias``: its dataset (when one is chosen) and models."""
    return Filters(dataset=f.dataset, models=f.models).sql(q=alias, r=alias)


def on_qf(f: Filters, alias: str) -> str:
    """Join condition of ``qf`` and a per-item table; with one dataset chosen (filtered in its WHERE by
    ``model_pred``) the query id alone is the key, which makes the join a quarter cheaper."""
    return f"qf.query_id = {alias}.query_id" + ("" if f.dataset is not None else f" AND qf.dataset = {alias}.dataset")


def items_cte(f: Filters) -> tuple[str, list[Any]]:
    """``items``: the filtered (dataset, query, model) responses without an error, with the query's language."""
    where, params = f.sql()
    return (
        "items AS (SELECT r.dataset, r.query_id, r.model_id, q.language FROM responses r "
        f"JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id WHERE {where} AND r.error IS NULL)"
    ), params


# -- the writer's group tables (pipeline/store/derived_groups.py) ------------------------------------------
def grouped(f: Filters) -> bool:
    """Whether the writer's group tables (``derived_groups``) answer this view: no theme filter (themes are not a
    group key). Scores need one judge too (a jury's item score is its judges' mean or median per item)."""
    return not f.themes


def group_source(table: str, f: Filters, present: bool = True,
                 inputs: Sequence[tuple[str, str, Sequence[Any]]] = (),
                 through: Sequence[str] = ()) -> tuple[str, list[Any]]:
    """A relation with the columns of the writer's derived table ``table`` for a FROM clause, with at least the rows
    of the view's queries (the caller's ``group_pred`` keeps the rest):

    - the table itself when it answers the view: the file has it (``present``) and there is no theme filter
      (``grouped``), or the table holds one row per query's item (its key has ``query_id``): then restricted to
      the filtered queries (``qf``);
    - else its definition — the SELECT the writer keeps it by (``pipeline.store.derived``) — over the filtered
      queries only, so a view the table cannot answer reads the same figures, not a second hand-written query.

    ``inputs`` (name, relation, params) bind a table the definition reads to another relation of its columns, as a
    CTE of that name (it shadows the table): a jury's item scores as ``item_scores`` (``jury.item_source``), or
    ``item_scores`` of some judges only; then no materialised table answers. Without a theme filter the bound rows
    are kept by their dataset, query language and script and models (``group_pred``: item rows carry them), the
    definition computed over them as it is, with no join to the filtered queries. ``through``: derived tables the
    definition reads, bound first (in reading order) to their own rows of the filtered queries — the table when it
    answers (as above), else its definition — e.g. ``jury_items`` for the counted ``jury_patterns``."""
    answers = present and not inputs  # the materialised rows are the definition's over the stored tables
    if answers and grouped(f):
        return table, []
    if inputs and grouped(f):  # the view's queries are its dataset, languages and scripts, which the bound item rows
        # carry (item_scores' query_language, query_script): kept by them, not joined to the filtered queries
        pred, params = group_pred(f, "r")
        ctes, bound = [], []
        for name, relation, p in inputs:
            ctes.append(f"{name} AS (SELECT * FROM (SELECT * FROM {relation}) r WHERE {pred})")
            bound += [*p, *params]
        ctes += [f"{name} AS MATERIALIZED ({DERIVED[name].definition()})" for name in through]
        return f"(WITH {', '.join(ctes)} {DERIVED[table].definition()})", bound
    qf, params = queries_cte(f)
    if answers and "query_id" in DERIVED[table].key:
        return f"(WITH {qf} SELECT t.* FROM {table} t SEMI JOIN qf ON {on_qf(f, 't')})", params
    ctes = [qf]
    for name, relation, p in inputs:
        ctes.append(f"{name} AS (SELECT * FROM {relation})")
        params += p
    for name in through:  # a CTE of the table's name reading the table (not itself: it is not recursive)
        rows = (f"SELECT t.* FROM {name} t SEMI JOIN qf ON {on_qf(f, 't')}"
                if answers and "query_id" in DERIVED[name].key else _over_queries(name))
        ctes.append(f"{name} AS MATERIALIZED ({rows})")
    return f"(WITH {', '.join(ctes)} {_over_queries(table)})", params


def _over_queries(table: str) -> str:
    """``table``'s definition restricted to the queries of ``qf`` (a counted table: over its parent's relation of
    the same name, which holds only those)."""
    d = DERIVED[table]
    if d.counts is not None:
        return d.select.format(rows=d.counts.parent)
    return d.restricted(lambda alias, _: f"JOIN qf k_{alias} ON k_{alias}.dataset = {alias}.dataset "
                                         f"AND k_{alias}.query_id = {alias}.query_id", ("dataset", "query_id"))


def group_pred(f: Filters, alias: str) -> tuple[str, list[Any]]:
    """WHERE predicate on a group table (``derived_groups``): dataset, languages, scripts, models."""
    preds, params = [], []
    for column, values in (("dataset", (f.dataset,) if f.dataset is not None else ()), ("query_language", f.languages),
                           ("query_script", f.scripts), ("model_id", f.models)):
        if values:
            preds.append(f"list_contains(?, {alias}.{column})")
            params.append(list(values))
    return " AND ".join(preds) or "TRUE", params


# -- metrics and weights ----------------------------------------------------------------------------------
def metric_case(metric_col: str, alias: str = "i") -> str:
    """SQL: the ``item_scores`` column (alias ``alias``) named by the value of ``metric_col`` (registry names)."""
    return f"CASE {metric_col} " + " ".join(f"WHEN '{m}' THEN {alias}.{m}" for m in METRICS) + " END"


def weights_tuple(weights: dict[str, float] | None) -> tuple[float, ...]:
    """Weights as a hashable tuple in METRICS order (cache keys)."""
    weights = weights or DEFAULT_WEIGHTS
    return tuple(float(weights.get(m, 0.0)) for m in METRICS)


def weights_dict(w: tuple[float, ...], preset: str | None = None) -> dict[str, float]:
    """A ``weights_tuple`` back as what AGG multiplies each metric by (``pipeline.metrics.agg_weights``):
    normalised to sum 1, or a preset such as ``paper-fit`` as given (the printed AGG's scale)."""
    if preset is not None:
        return agg_weights(dict(zip(METRICS, w, strict=True)), preset)
    return normalised_weights(dict(zip(METRICS, w, strict=True)))


# -- reference tables of the papers --------------------------------------------------------------------
@functools.cache
def _reference_csv(name: str) -> pd.DataFrame:
    return pd.read_csv(REFERENCE_DIR / REFERENCE_FILES[name])


def reference_table(name: str) -> pd.DataFrame:
    """A published table of the papers (data/reference), by fixed name (read once: it ships with the code)."""
    return _reference_csv(name).copy()
