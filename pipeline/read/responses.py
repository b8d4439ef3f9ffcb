"""The response browser: matching responses one page at a time, with everything about each item.

A score filter reads ``item_scores`` (the item's mean over its parsed samples, of the current
response text). An item's judgments and critiques carry ``current``: whether they scored the text
now stored (``pipeline.store.text_hash``; older ones are kept in the store, never counted); its
safety checks and lexical scores are the current ones only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from pipeline.metrics import METRICS
from pipeline.read.common import Filters, current_hash
from pipeline.store import LEXICAL, SHARED_READERS, text_hash


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


def _browse_sql(db: str | Path, b: Browse) -> tuple[str, list[Any]]:
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
        if b.unparsed_only:  # a sample of this metric did not parse, for the text now stored
            clauses.append("r.error IS NULL AND EXISTS (SELECT 1 FROM judgments m WHERE m.dataset = r.dataset "
                           "AND m.query_id = r.query_id AND m.model_id = r.model_id AND m.judge_id = ? "
                           f"AND m.metric = ? AND NOT m.parse_ok AND m.response_hash = {current_hash(db, 'r')})")
            params += [b.judge, b.metric]
        else:  # b.metric is a registry name: an item_scores column
            join = ("JOIN item_scores m ON m.dataset = r.dataset AND m.query_id = r.query_id "
                    f"AND m.model_id = r.model_id AND m.judge_id = ? AND m.{b.metric} BETWEEN ? AND ?")
            p_join = [b.judge, b.score_min, b.score_max]
    sql = (f"FROM responses r JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id {join} "
           f"WHERE {' AND '.join(clauses)}")
    return sql, [*p_join, *params]


_PAGE_COLUMNS = ("r.dataset, r.query_id, r.model_id, q.language, q.themes, q.query, q.query_en, q.gt_response, "
                 "q.update_sensitive, r.text, r.error, r.latency_s, r.completion_tokens, r.run_id, r.created_at")
_ORDER = "ORDER BY q.language, r.query_id, r.model_id"


def _count(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse) -> int:
    sql, params = _browse_sql(db, b)
    return int(con.execute(f"SELECT count(*) {sql}", params).fetchone()[0])


def _page(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse, limit: int, offset: int) -> pd.DataFrame:
    sql, params = _browse_sql(db, b)
    return con.execute(f"SELECT {_PAGE_COLUMNS} {sql} {_ORDER} LIMIT ? OFFSET ?",
                       [*params, int(limit), int(offset)]).df()


def _total_and_page(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse, limit: int,
                    offset: int) -> tuple[int, pd.DataFrame]:
    """(matches, one page). With a search or score filter the matching keys are found once, counted
    with a window and paged, then joined to their texts; a plain listing counts and pages apart."""
    if not (b.search.strip() or b.metric):
        return _count(con, db, b), _page(con, db, b, limit, offset)
    sql, params = _browse_sql(db, b)
    page = con.execute(
        f"WITH k AS (SELECT r.dataset, r.query_id, r.model_id, count(*) OVER () AS _total {sql} {_ORDER} "
        f"LIMIT ? OFFSET ?) SELECT k._total, {_PAGE_COLUMNS} FROM k JOIN responses r ON r.dataset = k.dataset "
        "AND r.query_id = k.query_id AND r.model_id = k.model_id JOIN queries q ON q.dataset = r.dataset "
        f"AND q.query_id = r.query_id {_ORDER}", [*params, int(limit), int(offset)]).df()
    if page.empty:  # past the end (or nothing matches): the count says which
        return _count(con, db, b), page.drop(columns=["_total"])
    return int(page._total.iloc[0]), page.drop(columns=["_total"])


def browse_count(db: str | Path, b: Browse) -> int:
    """How many responses match the browser's filters."""
    with SHARED_READERS.cursor(db) as con:
        return _count(con, db, b)


def browse_page(db: str | Path, b: Browse, limit: int, offset: int) -> pd.DataFrame:
    """One page of matching responses with their queries, ordered by language, query, model (LIMIT/OFFSET)."""
    with SHARED_READERS.cursor(db) as con:
        return _page(con, db, b, limit, offset)


def browse_view(db: str | Path, b: Browse, limit: int, offset: int) -> dict[str, Any]:
    """The response browser's page in one short connection.

    ``total`` matches; ``page`` (LIMIT/OFFSET; an offset past the end falls back to the first page);
    ``details`` of its items (judgments, critiques, safety, lexical); ``chunks`` of its queries.
    """
    with SHARED_READERS.cursor(db) as con:
        total, page = _total_and_page(con, db, b, limit, offset)
        if page.empty and total > 0:
            offset = 0
            page = _page(con, db, b, limit, offset)
        dataset = b.filters.dataset or ""
        return {"total": total, "offset": offset, "page": page, "details": _item_details(con, dataset, page),
                "chunks": _retrieved_chunks(con, dataset, tuple(dict.fromkeys(page.query_id)))}


def _keys_join(alias: str) -> str:
    return (f"JOIN (SELECT unnest(?::VARCHAR[]) AS query_id, unnest(?::VARCHAR[]) AS model_id) k "
            f"ON k.query_id = {alias}.query_id AND k.model_id = {alias}.model_id")


def _current_hashes(responses: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(query_id, model_id) → the hash of the text now stored, for responses without an error."""
    return {(q, m): text_hash(t) for q, m, t, e in zip(responses.query_id, responses.model_id, responses.text,
                                                     responses.error, strict=True)
            if isinstance(t, str) and not (isinstance(e, str) and e)}


def _mark_current(frame: pd.DataFrame, current: dict[tuple[str, str], str]) -> pd.DataFrame:
    """``frame`` (with query_id, model_id, response_hash) with ``current``: it scored the text now stored."""
    hits = [current.get((q, m)) == h for q, m, h in zip(frame.query_id, frame.model_id, frame.response_hash,
                                                         strict=True)]
    return frame.drop(columns=["response_hash"]).assign(current=pd.Series(hits, index=frame.index, dtype=bool))


def _item_details(con: duckdb.DuckDBPyConnection, dataset: str, page: pd.DataFrame) -> dict[str, pd.DataFrame]:
    params = [list(page.query_id), list(page.model_id), dataset]
    statements = {
        "judgments": ("SELECT j.query_id, j.model_id, j.judge_id, j.metric, j.sample, j.score, j.parse_ok, "
                      f"j.justification, j.raw_output, j.response_hash FROM judgments j {_keys_join('j')} "
                      "WHERE j.dataset = ? ORDER BY j.judge_id, j.metric, j.sample"),
        "critiques": ("SELECT c.query_id, c.model_id, c.critic_id, c.classifier, c.critique, c.p_none, c.p_low, "
                      f"c.p_moderate, c.p_high, c.label, c.response_hash FROM critiques c {_keys_join('c')} "
                      "WHERE c.dataset = ?"),
        "safety": ("SELECT s.query_id, s.model_id, s.check_name, s.passed, s.detail, s.response_hash "
                   f"FROM safety_checks s {_keys_join('s')} WHERE s.dataset = ? ORDER BY s.check_name"),
        "lexical": (f"SELECT l.query_id, l.model_id, {', '.join('l.' + c for c in LEXICAL)}, l.response_hash "
                    f"FROM lexical_scores l {_keys_join('l')} WHERE l.dataset = ?"),
    }
    current = _current_hashes(page)
    out = {name: _mark_current(con.execute(sql, params).df(), current) for name, sql in statements.items()}
    for name in ("safety", "lexical"):  # only the current ones are shown
        out[name] = out[name][out[name].current].drop(columns=["current"]).reset_index(drop=True)
    return out


def _retrieved_chunks(con: duckdb.DuckDBPyConnection, dataset: str, query_ids: tuple[str, ...]) -> pd.DataFrame:
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


def query_view(db: str | Path, dataset: str, query_id: str) -> dict[str, pd.DataFrame]:
    """Every model's response to one query and the judgments of its current text (side-by-side comparison)."""
    with SHARED_READERS.cursor(db) as con:
        answers = con.execute("SELECT r.query_id, r.model_id, r.text, r.error, r.latency_s FROM responses r "
                              "WHERE r.dataset = ? AND r.query_id = ? ORDER BY r.model_id", [dataset, query_id]).df()
        judgments = con.execute("SELECT query_id, model_id, judge_id, metric, sample, score, parse_ok, justification, "
                                "response_hash FROM judgments WHERE dataset = ? AND query_id = ? "
                                "ORDER BY judge_id, metric, sample", [dataset, query_id]).df()
    judgments = _mark_current(judgments, _current_hashes(answers))
    return {"responses": answers.drop(columns=["query_id"]),
            "judgments": judgments[judgments.current].drop(columns=["query_id", "current"]).reset_index(drop=True)}


def query_responses(db: str | Path, dataset: str, query_id: str) -> pd.DataFrame:
    """Every model's response to one query."""
    return query_view(db, dataset, query_id)["responses"]
