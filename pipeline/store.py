"""DuckDB store: the schema and the only writer.

DuckDB allows one read-write process *or* many read-only ones. So that the dashboard stays
usable while a run writes, nobody holds the file open: every write opens a connection, writes
one batch in one transaction and closes; a lock held by another process is waited out with
back-off. Every table has a natural key and every write is an upsert, so a rerun adds no
duplicates and a crash loses at most the batch in flight.

Two tables are derived, and the store keeps them in step with their sources: after a batch is
written, the rows of every key it touched are recomputed in the same transaction, so they never
disagree. ``item_scores``: one row per judged item (dataset, query, model, judge) with each
metric's mean over its parsed samples and the item's judgment counts. ``response_facts``: one
row per response with its error flag, lexical scores and safety-check outcomes. The leaderboard
reads them instead of regrouping four judgment rows per item and scanning three tables.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from pipeline.config import METRICS, SAFETY_CHECKS

SCHEMA_VERSION = 3  # 2: item_scores; 3: response_facts
LEXICAL = ("rouge_l", "chrf", "bleu", "meteor", "cosine")  # lexical_scores' score columns

# table -> (DDL columns, primary key). Identifiers in SQL come only from this fixed map.
TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "datasets": (
        "name VARCHAR, path VARCHAR, closed_book BOOLEAN, n_queries INTEGER, n_chunks INTEGER, "
        "content_hash VARCHAR, loaded_at TIMESTAMP",
        ("name",),
    ),
    "queries": (
        "dataset VARCHAR, query_id VARCHAR, language VARCHAR, query VARCHAR, query_en VARCHAR, "
        "gt_response VARCHAR, themes VARCHAR[], kb_refs VARCHAR[], update_sensitive BOOLEAN",
        ("dataset", "query_id"),
    ),
    "kb_chunks": (
        "dataset VARCHAR, chunk_id VARCHAR, kind VARCHAR, title VARCHAR, text VARCHAR, "
        "source VARCHAR, updated DATE",
        ("dataset", "chunk_id"),
    ),
    "retrievals": (
        "dataset VARCHAR, query_id VARCHAR, search_text VARCHAR, raw_ids VARCHAR[], "
        "update_ids VARCHAR[], recall DOUBLE, settings VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id"),
    ),
    "runs": (
        "run_id VARCHAR, name VARCHAR, kind VARCHAR, dataset VARCHAR, config VARCHAR, "
        "config_hash VARCHAR, code_revision VARCHAR, model_files VARCHAR, started_at TIMESTAMP, "
        "finished_at TIMESTAMP, status VARCHAR, backend_calls BIGINT, cache_hits BIGINT, "
        "retries BIGINT, errors BIGINT, summary VARCHAR",
        ("run_id",),
    ),
    "responses": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, run_id VARCHAR, prompt_hash VARCHAR, "
        "text VARCHAR, error VARCHAR, latency_s DOUBLE, prompt_tokens INTEGER, "
        "completion_tokens INTEGER, cached BOOLEAN, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id"),
    ),
    "judgments": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, judge_id VARCHAR, metric VARCHAR, "
        "sample INTEGER, score INTEGER, parse_ok BOOLEAN, justification VARCHAR, raw_output VARCHAR, "
        "response_hash VARCHAR, run_id VARCHAR, cached BOOLEAN, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "judge_id", "metric", "sample"),
    ),
    "lexical_scores": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, response_hash VARCHAR, "
        f"{', '.join(f'{c} DOUBLE' for c in LEXICAL)}, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id"),
    ),
    "critiques": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, critic_id VARCHAR, classifier VARCHAR, "
        "critique VARCHAR, p_none DOUBLE, p_low DOUBLE, p_moderate DOUBLE, p_high DOUBLE, "
        "label VARCHAR, response_hash VARCHAR, run_id VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "critic_id"),
    ),
    "safety_checks": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, check_name VARCHAR, passed BOOLEAN, "
        "detail VARCHAR, response_hash VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "check_name"),
    ),
    "human_labels": (
        "dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, metric VARCHAR, annotator VARCHAR, "
        "score INTEGER, comment VARCHAR, source VARCHAR, created_at TIMESTAMP",
        ("dataset", "query_id", "model_id", "metric", "annotator"),
    ),
    "judge_sanity": (
        "dataset VARCHAR, query_id VARCHAR, judge_id VARCHAR, metric VARCHAR, variant VARCHAR, "
        "kind VARCHAR, sample INTEGER, score INTEGER, parse_ok BOOLEAN, raw_output VARCHAR, "
        "created_at TIMESTAMP",
        ("dataset", "query_id", "judge_id", "metric", "variant", "sample"),
    ),
    "judge_reliability": (
        "dataset VARCHAR, judge_id VARCHAR, metric VARCHAR, auc DOUBLE, n_good INTEGER, "
        "n_bad INTEGER, n_unparsed INTEGER, run_id VARCHAR, created_at TIMESTAMP",
        ("dataset", "judge_id", "metric"),
    ),
    "llm_cache": (
        "key VARCHAR, model_id VARCHAR, request VARCHAR, text VARCHAR, top_logprobs VARCHAR, "
        "prompt_tokens INTEGER, completion_tokens INTEGER, latency_s DOUBLE, created_at TIMESTAMP",
        ("key",),
    ),
    "meta": ("key VARCHAR, value VARCHAR", ("key",)),
    # derived (see the module docstring); never written directly
    "item_scores": (
        f"dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, judge_id VARCHAR, "
        f"{', '.join(f'{m} DOUBLE' for m in METRICS)}, judgments INTEGER, unparsed INTEGER, samples INTEGER",
        ("dataset", "query_id", "model_id", "judge_id"),
    ),
    "response_facts": (
        f"dataset VARCHAR, query_id VARCHAR, model_id VARCHAR, failed BOOLEAN, lexical BOOLEAN, "
        f"{', '.join(f'{c} DOUBLE' for c in LEXICAL)}, {', '.join(f'{c} BOOLEAN' for c in SAFETY_CHECKS)}",
        ("dataset", "query_id", "model_id"),
    ),
}


def _on(a: str, b: str, columns: tuple[str, ...]) -> str:
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in columns)


class Derived(NamedTuple):
    """A derived table: the tables it follows, its key, and the SELECT of its rows (alias ``alias``
    for the driving table; ``{touched}`` and ``{touched_s}`` join the touched keys ``k``)."""

    sources: tuple[str, ...]
    key: tuple[str, ...]
    alias: str
    select: str


_RESPONSE = ("dataset", "query_id", "model_id")
DERIVED: dict[str, Derived] = {
    "item_scores": Derived(("judgments",), (*_RESPONSE, "judge_id"), "j", (
        "SELECT j.dataset, j.query_id, j.model_id, j.judge_id, "
        + ", ".join(f"avg(j.score) FILTER (WHERE j.metric = '{m}' AND j.parse_ok) AS {m}" for m in METRICS)
        + ", count(*) AS judgments, count(*) FILTER (WHERE NOT j.parse_ok) AS unparsed, max(j.sample) + 1 AS samples "
        "FROM judgments j {touched} GROUP BY j.dataset, j.query_id, j.model_id, j.judge_id")),
    "response_facts": Derived(("responses", "lexical_scores", "safety_checks"), _RESPONSE, "r", (
        "SELECT r.dataset, r.query_id, r.model_id, r.error IS NOT NULL AS failed, l.query_id IS NOT NULL AS lexical, "
        f"{', '.join(f'l.{c}' for c in LEXICAL)}, {', '.join(f's.{c}' for c in SAFETY_CHECKS)} "
        "FROM responses r {touched} "
        f"LEFT JOIN lexical_scores l ON {_on('l', 'r', _RESPONSE)} "
        "LEFT JOIN (SELECT s.dataset, s.query_id, s.model_id, "
        + ", ".join(f"any_value(s.passed) FILTER (WHERE s.check_name = '{c}') AS {c}" for c in SAFETY_CHECKS)
        + f" FROM safety_checks s {{touched_s}} GROUP BY ALL) s ON {_on('s', 'r', _RESPONSE)}")),
}


def _refresh_sql(derived: str, keys_from: str | None) -> str:
    """INSERT OR REPLACE the rows of ``derived`` for the keys in relation ``keys_from`` (every row if None)."""
    d = DERIVED[derived]

    def touched(alias: str) -> str:
        return "" if keys_from is None else (
            f"JOIN (SELECT DISTINCT {', '.join(d.key)} FROM {keys_from}) k ON {_on('k', alias, d.key)}")

    return f"INSERT OR REPLACE INTO {derived} " + d.select.format(touched=touched(d.alias), touched_s=touched("s"))


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def text_hash(text: str | None) -> str:
    """Short content hash used to tie a score to the exact response text it scored."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:16]


def is_lock_error(exc: BaseException) -> bool:
    """True for DuckDB's 'another process holds the file' errors, which are waited out."""
    msg = str(exc)
    return isinstance(exc, (duckdb.IOException, duckdb.ConnectionException)) and (
        "lock" in msg.lower() or "different configuration" in msg
    )


@contextmanager
def open_connection(path: str | Path, *, read_only: bool, wait_s: float = 60.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open ``path`` for one batch of work, waiting out another process's lock with back-off."""
    if not read_only:
        SHARED_READERS.close(path)  # a render's shared reader in this process would block the write
    con = _connect(path, read_only=read_only, wait_s=wait_s)
    try:
        yield con
    finally:
        con.close()


def _connect(path: str | Path, *, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    retrying = Retrying(
        retry=retry_if_exception(is_lock_error),
        wait=wait_random_exponential(multiplier=0.02, max=0.5),
        stop=stop_after_delay(wait_s),
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            return duckdb.connect(str(path), read_only=read_only)
    raise AssertionError("unreachable")


class SharedReaders:
    """Read-only DuckDB instances that the reads of one dashboard render share.

    Starting a DuckDB instance costs ≈ 25 ms whatever the file (it builds the function catalog), and
    a page render makes several reads. Inside ``held(path)`` (app.py wraps each render in it) every
    read gets a cursor of one open instance, closed when the last render holding it ends; outside,
    a read opens and closes its own connection. A write in this process closes the shared instance
    first (its cursors finish); another process's writer waits out the render like any read.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open: dict[str, duckdb.DuckDBPyConnection] = {}
        self._holders: dict[str, int] = {}
        self._busy: dict[str, int] = {}

    @contextmanager
    def held(self, path: str | Path) -> Iterator[None]:
        """Share one read-only instance of ``path`` among the reads inside this block (and concurrent ones)."""
        key = _key(path)
        with self._cond:
            self._holders[key] = self._holders.get(key, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._holders[key] -= 1
                if not self._holders[key]:
                    del self._holders[key]
                    self._close(key)

    @contextmanager
    def cursor(self, path: str | Path, wait_s: float = 60.0) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection: a cursor of the shared instance while one is held, else its own."""
        key = _key(path)
        with self._cond:
            shared = key in self._holders
            if shared:
                if key not in self._open:
                    self._open[key] = _connect(path, read_only=True, wait_s=wait_s)
                self._busy[key] = self._busy.get(key, 0) + 1
                con = self._open[key].cursor()
        if not shared:
            with open_connection(path, read_only=True, wait_s=wait_s) as own:
                yield own
            return
        try:
            yield con
        finally:
            con.close()
            with self._cond:
                self._busy[key] -= 1
                self._cond.notify_all()

    def close(self, path: str | Path) -> None:
        """Close ``path``'s shared instance once its reads have finished (a held render reopens it)."""
        with self._cond:
            self._close(_key(path))

    def _close(self, key: str) -> None:
        if not self._cond.wait_for(lambda: not self._busy.get(key), timeout=60):
            raise RuntimeError(f"reads of {key} did not finish within 60 s")
        con = self._open.pop(key, None)
        if con is not None:
            con.close()


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


SHARED_READERS = SharedReaders()


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

