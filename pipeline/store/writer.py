"""The only writer of the results database.

Every table has a natural key and every write is an upsert, so a rerun adds no duplicates and a
crash loses at most the batch in flight. Derived tables (``schema.DERIVED``) are recomputed for the
touched keys in the same transaction, in their refresh order.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline.store.connections import open_connection
from pipeline.store.rows import Row, RunRow, now
from pipeline.store.schema import (
    _RESPONSE,
    BACKFILL,
    DERIVED,
    REBUILT_AT,
    RETIRED,
    SCHEMA,
    SCHEMA_VERSION,
    SOURCES,
    Schema,
    TableSpec,
    refresh_sql,
)

ROW_GROUP_ROWS = 122_880  # DuckDB's row group: the unit its min/max statistics skip


class Store:
    """The only writer of the results database. Cheap to create; holds no open connection. ``schema``: the tables it
    makes and writes (the store's own by default; the catalog's, ``pipeline.catalog``, adds the steps' own)."""

    def __init__(self, path: str | Path, schema: Schema = SCHEMA):
        self.path = Path(path)
        self.schema = schema
        self._lock = threading.Lock()  # one connection at a time within this process
        self._ready = False

    # -- connections -------------------------------------------------------------------------
    @contextmanager
    def _opened(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The read-write connection, this process's only one (the file's folder made if missing)."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open_connection(self.path, read_only=False) as con:
                yield con

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection for one transaction; the schema is created on first use."""
        with self._opened() as con:
            if not self._ready:
                self._create_schema(con)
                self._ready = True
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _create_schema(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        """Create missing tables, add missing columns (backfilled where derivable), drop retired derived tables,
        refresh the derived tables when what they hold changed (``REBUILT_AT``), else make just those a file lacks.
        Returns what was done to a file that had tables, a line each."""
        existing = {(t, c) for t, c in con.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'").fetchall()}
        tables = {t for t, _ in existing}
        changed = False
        done: list[str] = []
        new_derived: list[str] = []  # derived tables a filled file lacks: made alone when nothing else changed
        for table, spec in self.schema.tables.items():
            if table not in tables:
                columns = ", ".join(f"{name} {sql_type}" for name, sql_type in spec.columns)
                con.execute(f"CREATE TABLE {table} ({columns}, PRIMARY KEY ({', '.join(spec.key)}))")
                if tables:
                    done.append(f"table {table} created")
                if table in DERIVED and tables:
                    new_derived.append(table)
                continue
            for name, sql_type in spec.columns:
                if (table, name) not in existing:
                    con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")
                    done.append(f"column {table}.{name} added")
                    if (table, name) in BACKFILL:
                        con.execute(f"UPDATE {table} SET {name} = {BACKFILL[(table, name)]}")
                    changed = True
        for table in sorted(set(RETIRED) & tables):
            con.execute(f"DROP TABLE {table}")
            done.append(f"retired table {table} dropped")
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        everything = changed or (row is not None and int(row[0]) < REBUILT_AT)
        if everything:
            done.append("derived tables recomputed")
        if row is not None and int(row[0]) != SCHEMA_VERSION:
            done.insert(0, f"schema {row[0]} → {SCHEMA_VERSION}")
        for derived in (d for d in DERIVED if everything or d in new_derived):  # a table after its sources
            try:
                for sql in refresh_sql(derived):
                    con.execute(sql)
            except duckdb.Error as exc:
                raise _naming(exc, derived) from exc
        con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        return done

    def upgrade(self) -> list[str]:
        """Bring a database written by an older version to this schema (the first write does it too); returns what
        was done, a line each (empty: the file was current)."""
        with self._opened() as con:
            done = self._create_schema(con)
            self._ready = True
        return done

    def cluster(self, progress: Callable[[str, int], None] | None = None) -> dict[str, int]:
        """Rewrite each table keyed by query or by model (key starting dataset, query_id or dataset, model_id) that
        spans more than one row group in key order, one table per transaction; returns the rows rewritten per table.

        DuckDB skips a row group whose min/max excludes a filter's values, so a file written as runs finish
        (model by model) makes one query's lookup read a third of a table; clustered, it reads one or two row
        groups (and one model's rows of the by-model ``model_items`` lie together). Rows written later
        are appended unclustered: run it again after large runs. ``progress`` is told each table and its rows
        before its rewrite.
        """
        done: dict[str, int] = {}
        with self.connect() as con:
            present = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            sizes = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t, spec in self.schema.tables.items()
                     if t in present and spec.key[:2] in (("dataset", "query_id"), ("dataset", "model_id"))}
        for table, rows in sizes.items():
            if rows <= ROW_GROUP_ROWS:
                continue
            if progress is not None:
                progress(table, rows)
            spec = self.schema.tables[table]
            with self.connect() as con:
                columns = con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE "
                                      "table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
                                      [table]).fetchall()  # the file's own order (older files add columns last)
                con.execute(f"CREATE TABLE _clustered ({', '.join(f'{n} {t}' for n, t in columns)}, "
                            f"PRIMARY KEY ({', '.join(spec.key)}))")
                con.execute(f"INSERT INTO _clustered SELECT * FROM {table} ORDER BY {', '.join(spec.key)}")
                con.execute(f"DROP TABLE {table}")
                con.execute(f"ALTER TABLE _clustered RENAME TO {table}")
            done[table] = rows
        with open_connection(self.path, read_only=False) as con:
            con.execute("CHECKPOINT")
        return done

    # -- writes --------------------------------------------------------------------------------
    def write(self, rows: Iterable[Row], con: duckdb.DuckDBPyConnection | None = None) -> int:
        """Insert or replace ``rows`` (instances of the schema's row classes, any tables) by their keys,
        in one transaction; derived tables follow."""
        by_table: dict[type[Row], list[Row]] = {}
        for row in rows:
            by_table.setdefault(type(row), []).append(row)
        if not by_table:
            return 0
        for cls in by_table:
            if self.schema.rows.get(getattr(cls, "TABLE", None)) is not cls:
                raise TypeError(f"{cls.__name__} is not a row class of this store's schema (pipeline.store.rows, or a "
                                "step's Step.rows through the catalog's schema)")
        if con is None:
            with self.connect() as own:
                # One thread for a batch: most of its cost is serial (primary-key index upkeep), and on a 2-core
                # machine the other core stays with the event loop driving requests (bench_store_writes.py).
                own.execute("SET threads = 1")
                return self.write(rows=[r for group in by_table.values() for r in group], con=own)
        total = 0
        for cls, group in by_table.items():
            spec = self.schema.tables[cls.TABLE]
            names = spec.names
            columns = {name: [getattr(r, name) for r in group] for name in names}
            total += self._insert(con, spec, cls.TABLE, pa.table(columns, schema=spec.arrow_schema()))
        return total

    def write_table(self, table: str, frame: pa.Table) -> int:
        """Bulk path (synthetic databases, benchmarks): an Arrow table with exactly ``table``'s columns."""
        if table not in self.schema.rows:
            raise ValueError(f"unknown or derived table {table!r}")
        spec = self.schema.tables[table]
        if set(frame.column_names) != set(spec.names):
            missing, extra = set(spec.names) - set(frame.column_names), set(frame.column_names) - set(spec.names)
            raise ValueError(f"{table}: columns differ from the schema (missing {sorted(missing)}, "
                             f"unknown {sorted(extra)})")
        with self.connect() as con:
            return self._insert(con, spec, table, frame.select(list(spec.names)).cast(spec.arrow_schema()))

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, spec: TableSpec, table: str, arrow_rows: pa.Table) -> int:
        con.register("_incoming_rows", arrow_rows)
        changed: dict[str, str] = {}  # derived table -> the temp table of the keys whose watched columns change
        doing = table  # what a failure names: the written table, then the derived table being refreshed
        try:
            for name, d in DERIVED.items():
                watched = dict(d.watch).get(table)
                if table in SOURCES[name] and watched:
                    key = spec.key
                    changed[name] = f"_changed_{name}"
                    con.execute(f"CREATE OR REPLACE TEMP TABLE {changed[name]} AS SELECT "
                                f"{', '.join('i.' + k for k in key)} FROM _incoming_rows i LEFT JOIN {table} t ON "
                                + " AND ".join(f"t.{k} = i.{k}" for k in key) + " WHERE "
                                + " OR ".join(f"t.{c} IS DISTINCT FROM i.{c}" for c in watched))
            con.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM _incoming_rows")
            for name in DERIVED:
                if table in SOURCES[name]:
                    doing = f"{table} (refreshing {name})"
                    key_columns = tuple(c for c in SCHEMA.tables[name].key if c in arrow_rows.column_names)
                    for sql in refresh_sql(name, changed.get(name, "_incoming_rows"), key_columns):
                        con.execute(sql)
        except duckdb.Error as exc:  # nothing more runs in the aborted transaction: its rollback drops the temp tables
            raise _naming(exc, doing) from exc
        for temp in changed.values():
            con.execute(f"DROP TABLE {temp}")
        con.unregister("_incoming_rows")
        return arrow_rows.num_rows

    def delete_where(self, table: str, where: str, params: list) -> None:
        """Delete rows of ``table``; ``where`` is a fixed SQL predicate with ``?`` parameters."""
        if table not in self.schema.rows or table == "judgments":
            raise ValueError(f"cannot delete from {table!r} (judgments are replaced; derived tables follow)")
        refresh = [name for name in DERIVED if table in SOURCES[name]]
        with self.connect() as con:
            if refresh:  # the response keys losing rows, to recompute what derives from them
                con.execute(f"CREATE TEMP TABLE _deleted_keys AS SELECT DISTINCT {', '.join(_RESPONSE)} "
                            f"FROM {table} WHERE {where}", params)
            con.execute(f"DELETE FROM {table} WHERE {where}", params)
            for name in refresh:
                try:
                    for sql in refresh_sql(name, "_deleted_keys", tuple(c for c in _RESPONSE
                                                                        if c in SCHEMA.tables[name].key)):
                        con.execute(sql)
                except duckdb.Error as exc:
                    raise _naming(exc, f"{table} (refreshing {name})") from exc
            if refresh:
                con.execute("DROP TABLE _deleted_keys")

    def restamp_kb(self, dataset: str, keys: list[tuple[str, str]], kb_hash: str) -> int:
        """Record ``kb_hash`` as the KB of the responses ``keys`` ((query_id, model_id)): answers kept because their
        prompt, chunks included, is the same under that KB. Returns the rows changed (no derived table reads it)."""
        if not keys or not self.fetch("SELECT 1 FROM responses WHERE dataset = ? AND kb_hash IS DISTINCT FROM ? "
                                      "LIMIT 1", [dataset, kb_hash]):
            return 0  # nothing to record: no write transaction (a dashboard save need not wait for one)
        with self.connect() as con:
            (changed,) = con.execute(
                "UPDATE responses SET kb_hash = ? FROM (SELECT unnest(?::VARCHAR[]) AS q, unnest(?::VARCHAR[]) AS m) k "
                "WHERE responses.dataset = ? AND responses.query_id = k.q AND responses.model_id = k.m "
                "AND responses.kb_hash IS DISTINCT FROM ?",
                [kb_hash, [q for q, _ in keys], [m for _, m in keys], dataset, kb_hash]).fetchone()
        return changed

    # -- the pipeline's own reads -----------------------------------------------------------------
    def fetch(self, sql: str, params: list | tuple | None = None) -> list[tuple]:
        """Rows of a query, for the pipeline's own bookkeeping, on a read-only connection (the app
        reads through pipeline/read)."""
        if not self.path.exists():
            return []
        with self._lock, open_connection(self.path, read_only=True) as con:
            return con.execute(sql, params or []).fetchall()

    def fetch_df(self, sql: str, params: list | tuple | None = None):
        with self._lock, open_connection(self.path, read_only=True) as con:
            return con.execute(sql, params or []).df()

    # -- runs ----------------------------------------------------------------------------------
    def start_run(self, *, name: str, kind: str, dataset: str, config_json: str, config_hash: str,
                  code_revision: str, model_files: dict[str, Any]) -> str:
        """Record a run as started and return its id."""
        run_id = f"{now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.write([RunRow(run_id=run_id, name=name, kind=kind, dataset=dataset, config=config_json,
                           config_hash=config_hash, code_revision=code_revision,
                           model_files=json.dumps(model_files, sort_keys=True))])
        return run_id

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Update counters/status of a run (fields are column names of ``runs``)."""
        bad = set(fields) - set(self.schema.tables["runs"].names)
        if bad:
            raise ValueError(f"unknown run fields {sorted(bad)}")
        if "summary" in fields and not isinstance(fields["summary"], (str, type(None))):
            fields["summary"] = json.dumps(fields["summary"], default=str)
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.connect() as con:
            con.execute(f"UPDATE runs SET {assignments} WHERE run_id = ?", [*fields.values(), run_id])

    # -- LLM cache -----------------------------------------------------------------------------
    def cache_get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Cached completions for ``keys`` (missing keys are absent from the result)."""
        if not keys or not self.path.exists():
            return {}
        with self._lock, open_connection(self.path, read_only=True) as con:
            rows = con.execute(
                "SELECT key, text, top_logprobs, prompt_tokens, completion_tokens, latency_s "
                "FROM llm_cache WHERE key IN (SELECT unnest(?))",
                [keys],
            ).fetchall()
        return {
            r[0]: {"text": r[1], "top_logprobs": json.loads(r[2]) if r[2] else None,
                   "prompt_tokens": r[3], "completion_tokens": r[4], "latency_s": r[5]}
            for r in rows
        }


def _naming(exc: duckdb.Error, doing: str) -> duckdb.Error:
    """``exc`` again (same DuckDB error class), its message prefixed by what was being written."""
    return type(exc)(f"writing {doing}: {exc}")
