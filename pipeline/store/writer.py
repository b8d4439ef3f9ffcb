"""The only writer of the results database.

Every table has a natural key and every write is an upsert, so a rerun adds no duplicates and a
crash loses at most the batch in flight. Derived tables (``schema.DERIVED``) are recomputed for the
touched keys in the same transaction.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline.store.connections import open_connection
from pipeline.store.schema import _RESPONSE, DERIVED, SCHEMA_VERSION, TABLES, _refresh_sql, now


class Store:
    """The only writer of the results database. Cheap to create; holds no open connection."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()  # one connection at a time within this process
        self._ready = False

    # -- connections -------------------------------------------------------------------------
    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection for one transaction; the schema is created on first use."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open_connection(self.path, read_only=False) as con:
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

    @staticmethod
    def _create_schema(con: duckdb.DuckDBPyConnection) -> None:
        for table, (columns, key) in TABLES.items():
            con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns}, PRIMARY KEY ({', '.join(key)}))")
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and int(row[0]) < SCHEMA_VERSION:  # written before a derived table existed
            for derived in DERIVED:
                con.execute(_refresh_sql(derived, None))
        con.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
        )

    def upgrade(self) -> None:
        """Bring a database written by an older version to this schema (the first write does it too)."""
        with self.connect():
            pass

    # -- generic writes and reads ------------------------------------------------------------
    def upsert(self, table: str, rows: Iterable[dict[str, Any]], con: duckdb.DuckDBPyConnection | None = None) -> int:
        """Insert or replace ``rows`` (dicts keyed by column name) into ``table`` by its key."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        if table in DERIVED:
            raise ValueError(f"{table} is derived from {', '.join(DERIVED[table].sources)}: write those")
        rows = list(rows)
        if not rows:
            return 0
        arrow_rows = pa.Table.from_pylist(rows)
        if con is None:
            with self.connect() as own:
                return self._insert(own, table, arrow_rows)
        return self._insert(con, table, arrow_rows)

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, table: str, arrow_rows: pa.Table) -> int:
        con.register("_incoming_rows", arrow_rows)
        try:
            con.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM _incoming_rows")
            for name, d in DERIVED.items():
                if table in d.sources:
                    con.execute(_refresh_sql(name, "_incoming_rows"))
        finally:
            con.unregister("_incoming_rows")
        return arrow_rows.num_rows

    def write_batch(self, batch: dict[str, list[dict[str, Any]]]) -> int:
        """Upsert rows into several tables in one transaction (results with their cache rows)."""
        batch = {t: rows for t, rows in batch.items() if rows}
        if not batch:
            return 0
        with self.connect() as con:
            return sum(self.upsert(table, rows, con=con) for table, rows in batch.items())

    def fetch(self, sql: str, params: list | tuple | None = None) -> list[tuple]:
        """Rows of a query, for the pipeline's own bookkeeping (the app reads via queries.py)."""
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()

    def fetch_df(self, sql: str, params: list | tuple | None = None):
        with self.connect() as con:
            return con.execute(sql, params or []).df()

    def delete_where(self, table: str, where: str, params: list) -> None:
        """Delete rows of ``table``; ``where`` is a fixed SQL predicate with ``?`` parameters."""
        if table not in TABLES or table in DERIVED or table == "judgments":
            raise ValueError(f"cannot delete from {table!r} (judgments are replaced; derived tables follow)")
        refresh = [name for name, d in DERIVED.items() if table in d.sources]
        with self.connect() as con:
            if refresh:  # the response keys losing rows, to recompute what derives from them
                con.execute(f"CREATE TEMP TABLE _deleted_keys AS SELECT DISTINCT {', '.join(_RESPONSE)} "
                            f"FROM {table} WHERE {where}", params)
            con.execute(f"DELETE FROM {table} WHERE {where}", params)
            for name in refresh:
                con.execute(_refresh_sql(name, "_deleted_keys"))
            if refresh:
                con.execute("DROP TABLE _deleted_keys")

    # -- runs ----------------------------------------------------------------------------------
    def start_run(self, *, name: str, kind: str, dataset: str, config_json: str, config_hash: str,
                  code_revision: str, model_files: dict[str, Any]) -> str:
        """Record a run as started and return its id."""
        run_id = f"{now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.upsert("runs", [{
            "run_id": run_id, "name": name, "kind": kind, "dataset": dataset,
            "config": config_json, "config_hash": config_hash, "code_revision": code_revision,
            "model_files": json.dumps(model_files, sort_keys=True), "started_at": now(),
            "finished_at": None, "status": "running", "backend_calls": 0, "cache_hits": 0,
            "retries": 0, "errors": 0, "summary": None,
        }])
        return run_id

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Update counters/status of a run (fields are column names of ``runs``)."""
        allowed = set(TABLES["runs"][0].replace(",", " ").split()) - {"VARCHAR", "BIGINT", "TIMESTAMP"}
        bad = set(fields) - allowed
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
        with self.connect() as con:
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

