"""The response browser: matching responses one page at a time, with everything about each item.

A score filter reads ``item_scores`` (the item's mean over its parsed samples, of the current
response text). An item's judgments and critiques carry ``current``: whether they scored the text
now stored (``pipeline.store.text_hash``; older ones are kept in the store, never counted); its
safety checks and lexical scores are the current ones only.

Machine English renderings (table ``translations``, ``pipeline/steps/translate.py``) are for readers:
a query's (``model_id`` '') is the one made of the query text now stored, a response's carries
``current`` like a score. They are shown marked machine-made and never scored. Each item also says
which prompt it came from (``pipeline.read.provenance``); ``graders`` are the rubric graders of the
page's queries (an item's criteria are read when shown, ``pipeline.read.rubric.rubric_item``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from pipeline.metrics import METRICS
from pipeline.read.common import Filters, current_hash, group_pred, grouped
from pipeline.read.provenance import prompt_provenance
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
    grader: str | None = None  # rubric grader whose criteria to show (None: the one with most grades)


def _browse_sql(db: str | Path, b: Browse, within: tuple[str, str, str] | None = None) -> tuple[str, list[Any]]:
    """FROM … WHERE of the matching responses; ``within`` (language, first, last query id) keeps the queries of
    that language whose ids lie in the range (a probe's, ``_probe``), which every table's scan filters first."""
    where, params = b.filters.sql()
    clauses = [where]
    scan, p_scan = "", []
    if within is not None:
        clauses.append("q.language = ? AND q.query_id BETWEEN ? AND ? AND r.query_id BETWEEN ? AND ?")
        params += [*within, *within[1:]]
        scan, p_scan = " AND {a}.query_id BETWEEN ? AND ?", list(within[1:])
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
            join = ("JOIN (SELECT dataset, query_id, model_id FROM item_scores m WHERE m.judge_id = ? "
                    f"AND m.{b.metric} BETWEEN ? AND ?{scan.format(a='m')}) m ON m.dataset = r.dataset "
                    "AND m.query_id = r.query_id AND m.model_id = r.model_id")
            p_join = [b.judge, b.score_min, b.score_max, *p_scan]
    sql = (f"FROM responses r JOIN queries q ON q.dataset = r.dataset AND q.query_id = r.query_id {join} "
           f"WHERE {' AND '.join(clauses)}")
    return sql, [*p_join, *params]


_PAGE_COLUMNS = ("r.dataset, r.query_id, r.model_id, q.language, q.themes, q.query, q.query_en, q.gt_response, "
                 "q.update_sensitive, r.text, r.error, r.latency_s, r.completion_tokens, r.run_id, r.created_at, "
                 "q.query_en_source, q.options, q.messages, q.rubric IS NOT NULL AS has_rubric, r.prompt_hash")
_ORDER = "ORDER BY q.language, r.query_id, r.model_id"
# A search or score filter over a large dataset first looks at the first PROBE_QUERIES queries of the listing's
# order (one language); when their matches fill the page, the page comes from them and the count is a lower
# bound ("at least"), counted in full on request (``browse_count``); bench/bench_dashboard.py measures what it saves.
PROBE_QUERIES = 512


@dataclass(frozen=True)
class Matches:
    """How many responses match: ``n``, exact when ``complete``, else counted over the first ``queries`` queries
    of the listing's order (of ``of`` the filters keep)."""

    n: int
    complete: bool = True
    queries: int | None = None
    of: int | None = None


def _count(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse) -> int:
    sql, params = _browse_sql(db, b)
    return int(con.execute(f"SELECT count(*) {sql}", params).fetchone()[0])


def _page(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse, limit: int, offset: int) -> pd.DataFrame:
    sql, params = _browse_sql(db, b)
    return _rows(con, [k for (k,) in con.execute(f"SELECT r.rowid {sql} {_ORDER} LIMIT ? OFFSET ?",
                                                 [*params, int(limit), int(offset)]).fetchall()])


def _rows(con: duckdb.DuckDBPyConnection, rowids: list[int]) -> pd.DataFrame:
    """The page's rows (``_PAGE_COLUMNS``, in the listing's order) of ``responses`` rows by their rowids, read on
    the cursor that found them (a read-only snapshot: a rowid names one row until a writer deletes it). A join
    on the keys instead would read every response's text: DuckDB filters a scan by a join's keys only after
    reading the row."""
    query_ids = [q for (q,) in con.execute("SELECT DISTINCT query_id FROM responses WHERE rowid IN "
                                           "(SELECT unnest(?::BIGINT[]))", [rowids]).fetchall()]
    return con.execute(f"SELECT {_PAGE_COLUMNS} FROM responses r JOIN queries q ON q.dataset = r.dataset "
                       "AND q.query_id = r.query_id WHERE r.rowid IN (SELECT unnest(?::BIGINT[])) "
                       f"AND q.query_id IN (SELECT unnest(?::VARCHAR[])) {_ORDER}", [rowids, query_ids]).df()


def _windowed(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any], limit: int,
              offset: int) -> tuple[int, pd.DataFrame]:
    """(matches, one page) of ``sql`` (FROM … WHERE): the matching rows found once, counted with a window and
    paged, then read (``_rows``); the count is 0 when the page is past the end."""
    found = con.execute(f"SELECT r.rowid, count(*) OVER () {sql} {_ORDER} LIMIT ? OFFSET ?",
                        [*params, int(limit), int(offset)]).fetchall()
    return (int(found[0][1]) if found else 0), _rows(con, [k[0] for k in found])


def _plain(con: duckdb.DuckDBPyConnection, b: Browse, limit: int, offset: int) -> tuple[int, pd.DataFrame]:
    """(matches, one page) of a listing without search or score filter, from the writer's per-language counts
    (``response_groups``): the page's keys are read within the one or two languages it falls in."""
    f = b.filters
    pred, params = group_pred(f, "g")
    counts = con.execute(f"SELECT g.query_language, sum(g.responses)::BIGINT FROM response_groups g WHERE {pred} "
                         "GROUP BY ALL HAVING sum(g.responses) > 0 ORDER BY 1", params).fetchall()
    keys: list[int] = []
    skip = offset
    for language, n in counts:
        if skip >= n:
            skip -= n
            continue
        q_where, q_params = Filters(dataset=f.dataset, languages=(language,), scripts=f.scripts).sql(r=None)
        m_where, m_params = Filters(models=f.models).sql(q="r", r="r")
        keys += con.execute("SELECT r.rowid FROM responses r WHERE r.dataset = ? "
                            f"AND {m_where} AND r.query_id IN (SELECT q.query_id FROM queries q WHERE {q_where}) "
                            "ORDER BY r.query_id, r.model_id LIMIT ? OFFSET ?",
                            [f.dataset, *m_params, *q_params, limit - len(keys), skip]).fetchall()
        skip = 0
        if len(keys) >= limit:
            break
    return sum(n for _, n in counts), _rows(con, [k for (k,) in keys])


def _probe(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse, limit: int,
           offset: int) -> tuple[Matches, pd.DataFrame] | None:
    """(matches, one page) from the first PROBE_QUERIES queries of the listing's order (those of its first language
    among them), when the filters keep more queries than that and the probe's matches reach past the page; else
    None."""
    q_where, q_params = b.filters.sql(r=None)
    first = con.execute(f"SELECT q.language, q.query_id FROM queries q WHERE {q_where} ORDER BY q.language, "
                        "q.query_id LIMIT ?", [*q_params, PROBE_QUERIES + 1]).fetchall()
    if len(first) <= PROBE_QUERIES:
        return None
    ids = [i for language, i in first[:PROBE_QUERIES] if language == first[0][0]]
    sql, params = _browse_sql(db, b, within=(first[0][0], ids[0], ids[-1]))
    found = [k for (k,) in con.execute(f"SELECT r.rowid {sql} {_ORDER}", params).fetchall()]  # a few thousand
    if len(found) < offset + limit:
        return None
    queries = int(con.execute(f"SELECT count(*) FROM queries q WHERE {q_where}", q_params).fetchone()[0])
    return Matches(len(found), complete=False, queries=len(ids), of=queries), _rows(con, found[offset:offset + limit])


def _total_and_page(con: duckdb.DuckDBPyConnection, db: str | Path, b: Browse, limit: int,
                    offset: int) -> tuple[Matches, pd.DataFrame]:
    """(matches, one page). A plain listing of one dataset reads the writer's counts (``_plain``); a search or
    score filter tries the probe (``_probe``) first; else the matching keys are found once, counted with a
    window and paged, then joined to their texts; a listing of every dataset counts and pages apart."""
    f = b.filters
    filtered = bool(b.search.strip() or b.metric)
    if f.dataset is not None and grouped(f) and not filtered and not b.query_id:
        n, page = _plain(con, b, limit, offset)
        return Matches(n), page
    if not filtered:
        return Matches(_count(con, db, b)), _page(con, db, b, limit, offset)
    if f.dataset is not None and not b.query_id and (probed := _probe(con, db, b, limit, offset)) is not None:
        return probed
    sql, params = _browse_sql(db, b)
    n, page = _windowed(con, sql, params, limit, offset)
    if page.empty and offset > 0:  # past the end, or nothing matches: the count says which
        return Matches(_count(con, db, b)), page
    return Matches(n), page


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

    ``total`` matches (``matches``: whether that count is complete, ``Matches``); ``page`` (LIMIT/OFFSET; an offset
    past the end falls back to the first page);
    ``details`` of its items (judgments, critiques, safety, lexical); ``chunks`` of its queries.
    """
    with SHARED_READERS.cursor(db) as con:
        matches, page = _total_and_page(con, db, b, limit, offset)
        if page.empty and matches.n > 0:  # past the end: the first page
            offset = 0
            matches, page = _total_and_page(con, db, b, limit, offset)
        dataset = b.filters.dataset or ""
        query_ids = tuple(dict.fromkeys(page.query_id))
        page, translated = renderings(con, dataset, page)
        details = _item_details(con, dataset, page)
        details["translations"] = translated
        chunks = _retrieved_chunks(con, dataset, query_ids)
        source = con.execute("SELECT path, closed_book FROM datasets WHERE name = ?", [dataset]).fetchone()
        graders = _rubric_graders(con, dataset, page) if not page.empty and bool(page.has_rubric.any()) else []
    details["prompts"] = prompt_provenance(dataset, source, page, chunks)
    grader = b.grader if b.grader in graders else (graders[0] if graders else None)
    return {"total": matches.n, "matches": matches, "offset": offset, "page": page, "details": details,
            "chunks": chunks,
            "graders": graders, "grader": grader}


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the file has a table (or view) ``name``: a catalog lookup by name (``duckdb_tables()`` would size
    every table of the file first)."""
    try:
        con.table(name)
    except duckdb.CatalogException:
        return False
    return True


def _rubric_graders(con: duckdb.DuckDBPyConnection, dataset: str, page: pd.DataFrame) -> list[str]:
    """The rubric graders that graded the page's queries, most grades first (one item's criteria are read when
    shown: ``pipeline.read.rubric.rubric_item``)."""
    if not has_table(con, "rubric_grades"):
        return []
    ids = list(dict.fromkeys(page.query_id[page.has_rubric.astype(bool)]))
    return [g for (g,) in con.execute("SELECT grader_id FROM rubric_grades WHERE dataset = ? AND "
                                      "list_contains(?, query_id) GROUP BY grader_id ORDER BY count(*) DESC, "
                                      "grader_id", [dataset, ids]).fetchall()]


RENDERING_COLUMNS = ["query_id", "model_id", "translator_id", "text", "error", "current"]
SOURCE_SCRIPT = "still in the source script"  # a failed rendering's error (pipeline.steps.translate.SOURCE_SCRIPT)
QUERY = ""  # translations.model_id of a query's own rendering (pipeline.steps.translate.QUERY)


def renderings(con: duckdb.DuckDBPyConnection, dataset: str, page: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Machine English renderings of a page of responses (query_id, model_id, query, text, error), in one read.

    Returns ``page`` with ``query_mt`` and ``query_mt_by`` — the newest rendering of the query text now stored
    and its translator (None without one) — and the responses' renderings (for readers, never scored):
    query_id, model_id, translator_id, text, ``error`` (None, or why the rendering failed: the translator left it in
    the source script, its text kept), ``current`` (of the response text now stored)."""
    page = page.drop(columns=["query_mt", "query_mt_by"], errors="ignore")
    if page.empty or not has_table(con, "translations"):
        return (page.assign(query_mt=pd.Series(None, index=page.index, dtype=object),
                            query_mt_by=pd.Series(None, index=page.index, dtype=object)),
                pd.DataFrame(columns=RENDERING_COLUMNS))
    found = con.execute("SELECT query_id, model_id, translator_id, text, error, source_hash AS response_hash FROM "
                        "translations WHERE dataset = ? AND list_contains(?, query_id) AND (error IS NULL OR "
                        "starts_with(error, ?)) AND text <> '' ORDER BY created_at DESC, translator_id",
                        [dataset, list(dict.fromkeys(page.query_id)), SOURCE_SCRIPT]).df()
    of_query = found[(found.model_id == QUERY) & found.error.isna()]
    queries = dict(zip(page.query_id, page["query"], strict=True))
    newest: dict[str, tuple[str, str]] = {}
    for q, by, text, h in zip(of_query.query_id, of_query.translator_id, of_query.text, of_query.response_hash,
                              strict=True):
        if q not in newest and h == text_hash(queries.get(q)):
            newest[q] = (text, by)
    page = page.assign(query_mt=[newest.get(q, (None, None))[0] for q in page.query_id],
                       query_mt_by=[newest.get(q, (None, None))[1] for q in page.query_id])
    keys = set(zip(page.query_id, page.model_id, strict=True))
    mask = pd.Series([k in keys for k in zip(found.query_id, found.model_id, strict=True)], index=found.index,
                     dtype=bool)
    of_responses = found[mask]
    of_responses = of_responses.sort_values("translator_id", kind="stable").reset_index(drop=True)
    return page, _mark_current(of_responses, _current_hashes(page))


def _keys_join(alias: str) -> str:
    return (f"JOIN (SELECT unnest(?::VARCHAR[]) AS query_id, unnest(?::VARCHAR[]) AS model_id) k "
            f"ON k.query_id = {alias}.query_id AND k.model_id = {alias}.model_id")


def in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column IN (?, …)`` over ``values`` (FALSE when none): constants, which a table scan filters by (zone maps
    of a table in key order) where ``list_contains(?, column)`` reads every row."""
    values = list(values)
    return (f"{column} IN ({', '.join('?' * len(values))})" if values else "FALSE"), values


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
    of_page, shown = in_list("{a}.query_id", sorted(set(page.query_id)))  # {a}: each statement's alias
    params = [list(page.query_id), list(page.model_id), dataset, *shown]
    statements = {
        "judgments": ("SELECT j.query_id, j.model_id, j.judge_id, j.metric, j.sample, j.score, j.parse_ok, "
                      f"j.justification, j.raw_output, j.response_hash FROM judgments j {_keys_join('j')} "
                      f"WHERE j.dataset = ? AND {of_page.format(a='j')} ORDER BY j.judge_id, j.metric, j.sample"),
        "critiques": ("SELECT c.query_id, c.model_id, c.critic_id, c.classifier, c.critique, c.error, c.p_none, "
                      f"c.p_low, c.p_moderate, c.p_high, c.label, c.response_hash FROM critiques c {_keys_join('c')} "
                      f"WHERE c.dataset = ? AND {of_page.format(a='c')}"),
        "safety": ("SELECT s.query_id, s.model_id, s.check_name, s.passed, s.detail, s.response_hash "
                   f"FROM safety_checks s {_keys_join('s')} WHERE s.dataset = ? AND {of_page.format(a='s')} "
                   "ORDER BY s.check_name"),
        "lexical": (f"SELECT l.query_id, l.model_id, {', '.join('l.' + c for c in LEXICAL)}, l.response_hash "
                    f"FROM lexical_scores l {_keys_join('l')} WHERE l.dataset = ? AND {of_page.format(a='l')}"),
    }
    current = _current_hashes(page)
    out = {name: _mark_current(con.execute(sql, params).df(), current) for name, sql in statements.items()}
    for name in ("safety", "lexical"):  # only the current ones are shown
        out[name] = out[name][out[name].current].drop(columns=["current"]).reset_index(drop=True)
    return out


def _retrieved_chunks(con: duckdb.DuckDBPyConnection, dataset: str, query_ids: tuple[str, ...]) -> pd.DataFrame:
    shown, p_shown = in_list("query_id", sorted(set(query_ids)))
    return con.execute(
        "WITH t AS (SELECT query_id, recall, search_text, unnest(raw_ids) AS chunk_id, "
        "generate_subscripts(raw_ids, 1) AS pos, 'raw' AS slot FROM retrievals WHERE dataset = ? "
        f"AND {shown} UNION ALL SELECT query_id, recall, search_text, unnest(update_ids), "
        "generate_subscripts(update_ids, 1), 'update' FROM retrievals WHERE dataset = ? "
        f"AND {shown}) "
        "SELECT t.query_id, t.slot, t.pos, t.chunk_id, c.kind, c.title, c.text, c.source, c.updated, t.recall, "
        "t.search_text FROM t LEFT JOIN kb_chunks c ON c.dataset = ? AND c.chunk_id = t.chunk_id "
        "ORDER BY t.query_id, t.slot, t.pos",
        [dataset, *p_shown, dataset, *p_shown, dataset]).df()


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
