"""The results database's schema: every table's columns and key, and the derived tables kept in step.

A written table's columns are the fields of its row class (``pipeline/store/rows.py``), their DuckDB types
following from the annotations (``TABLES``). ``Store`` creates missing tables and adds missing columns to an
existing database (a new metric, a new field), backfilling what can be derived (``BACKFILL``).

Sixteen tables are derived, and the writer keeps them in step with their sources: after a batch is
written, the rows of every key it touched are deleted and recomputed in the same transaction, so
they never disagree. Both count only what belongs to the response text now stored:

- ``item_scores``: one row per judged item (dataset, query, model, judge) with each metric's mean
  over its parsed samples and the item's judgment counts — only judgments whose ``response_hash``
  is the stored response's, and never of a response that errored.
- ``label_pairs``: per human-labelled item, metric and judge the annotators' scores (and their mean) beside the
  judge's item score, with the query's language, script and themes.
- ``response_facts``: one row per response with its error flag and its current lexical scores and
  safety-check outcomes.

- ``score_groups`` and ``response_groups``: per (dataset, model, query language and script; and judge) the
  score patterns and response counts a leaderboard sums, made of the two above (and ``retrieval_groups``, the recall
  of the retrievals); ``theme_groups``: per theme too,
  each metric's sums and counts (``pipeline/store/derived_groups.py``).
- ``rubric_items`` and ``rubric_tag_items``: per rubric item (dataset, query, model, grader), and per item and
  tag, HealthBench's sums over its current criterion grades and its score (``pipeline/store/derived_rubric.py``).
- ``critique_groups`` and ``lexical_groups``: per (dataset, model, query language and script; and critic and
  classifier family) the Med-CoDE page's counts, probability sums and histograms of current classified critiques,
  and its METEOR / ROUGE-L histograms; ``critique_items``: per classified critique what the correlations read of
  their fixed sample (``pipeline/store/derived_critiques.py``).
- ``review_facts``: per response without an error what the review queue's severity is made of
  (``pipeline/store/derived_review.py``).
- ``jury_items``: per item the judges' mean, median, min, max and spread of each metric and every judge's score,
  what a jury of every judge that scored it and the agreement between them read (``pipeline/store/derived_jury.py``);
  ``jury_patterns``: per language and script the judges' score tuples per metric, counted from ``jury_items`` by
  deltas (``Derived.counts``).

The pages read them instead of regrouping millions of rows at every render (bench/README.md has the figures).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import date, datetime
from typing import Annotated, Any, NamedTuple

import pyarrow as pa

from pipeline.config import SAFETY_CHECKS
from pipeline.metrics import METRICS
from pipeline.store import derived_critiques, derived_groups, derived_jury, derived_review, derived_rubric
from pipeline.store.rows import LEXICAL, ROW_CLASSES, TEXT_HASH_SQL, Row

SCHEMA_VERSION = 8  # 2: item_scores; 3: response_facts; 4: responses.response_hash, derived = current only; 5: groups
# 6: labelled_scores; 7: critique_groups, lexical_groups, critique_items (the Med-CoDE page's sums and sample),
# theme_groups (the themes page's sums), review_facts (the review queue's severity inputs), jury_items (a jury's
# per-item scores and spread); 8: jury_patterns (counted from jury_items), label_pairs (instead of labelled_scores),
# retrieval_groups
REBUILT_AT = 7  # the last version that changed what an existing derived table holds: an older file rebuilds them all,
# a newer one only makes the derived tables it lacks
RETIRED = ("labelled_scores",)  # derived tables of older versions, dropped on upgrade (label_pairs replaced it)
PLAYGROUND = "playground"  # the dataset that holds the playground's saved answers


# -- column types --------------------------------------------------------------------------------------
_SQL_TYPES: dict[Any, str] = {str: "VARCHAR", int: "INTEGER", float: "DOUBLE", bool: "BOOLEAN",
                              datetime: "TIMESTAMP", date: "DATE"}
_ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us"), "DATE": pa.date32(), "VARCHAR[]": pa.list_(pa.string()),
}


def _sql_type(hint: Any) -> str:
    if typing.get_origin(hint) is Annotated:
        return typing.get_args(hint)[1]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _sql_type(inner)
    if typing.get_origin(hint) is list:
        return _sql_type(typing.get_args(hint)[0]) + "[]"
    return _SQL_TYPES[hint]


def _columns(cls: type[Row]) -> tuple[tuple[str, str], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f.name, _sql_type(hints[f.name])) for f in dataclasses.fields(cls))


class TableSpec(NamedTuple):
    """A table's columns ((name, DuckDB type), in order) and primary key."""

    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(name, _ARROW_TYPES[t]) for name, t in self.columns])


_RESPONSE = ("dataset", "query_id", "model_id")

# table -> spec. Identifiers in SQL come only from this fixed map.
TABLES: dict[str, TableSpec] = {
    **{c.TABLE: TableSpec(_columns(c), c.KEY) for c in ROW_CLASSES},
    # derived (see the module docstring); never written directly
    "item_scores": TableSpec((
        *((c, "VARCHAR") for c in (*_RESPONSE, "judge_id")), *((m, "DOUBLE") for m in METRICS),
        ("judgments", "INTEGER"), ("unparsed", "INTEGER"), ("samples", "INTEGER"), ("runs", "VARCHAR[]"),
    ), (*_RESPONSE, "judge_id")),
    "response_facts": TableSpec((
        *((c, "VARCHAR") for c in _RESPONSE), ("failed", "BOOLEAN"), ("lexical", "BOOLEAN"),
        *((c, "DOUBLE") for c in LEXICAL), *((c, "BOOLEAN") for c in SAFETY_CHECKS),
    ), _RESPONSE),
    **{t: TableSpec(columns, key) for t, (columns, key) in (*derived_groups.SPECS.items(),
                                                            *derived_rubric.SPECS.items(),
                                                            *derived_critiques.SPECS.items(),
                                                            *derived_review.SPECS.items(),
                                                            *derived_jury.SPECS.items())},
}

TABLES["label_pairs"] = TableSpec((
    *((c, "VARCHAR") for c in (*_RESPONSE, "label_metric", "judge_id", "query_language", "query_script")),
    ("themes", "VARCHAR[]"), ("human", "DOUBLE"), ("humans", "DOUBLE[]"), ("annotators", "VARCHAR[]"),
    ("llm", "DOUBLE"),
), (*_RESPONSE, "label_metric", "judge_id"))

# Columns added after a table first shipped, and how to fill them in an older database.
BACKFILL: dict[tuple[str, str], str] = {
    ("responses", "response_hash"): f"CASE WHEN text IS NULL THEN NULL ELSE {TEXT_HASH_SQL.format(col='text')} END",
}


def _on(a: str, b: str, columns: tuple[str, ...]) -> str:
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in columns)


class Derived(NamedTuple):
    """A derived table: the tables it follows and the SELECT of its rows (alias ``alias`` for the
    driving table; ``{touched}`` and ``{touched_s}`` join the touched keys ``k``). ``watch`` names, per
    source, the columns it depends on: a write to that source touches only the keys whose values of
    those columns change (a run rewrites every query; only a changed rubric matters to the rubric tables).

    ``counts``: (parent, summed columns) for a table that counts the rows of another derived table (its SELECT
    groups the relation ``{rows}`` of the parent's rows). It is kept by deltas around the parent's refresh — the
    touched rows' counts before it subtracted, after it added, rows left at ``n`` = 0 deleted — instead of
    regrouping every row of its touched groups."""

    sources: tuple[str, ...]
    alias: str
    select: str
    watch: tuple[tuple[str, tuple[str, ...]], ...] = ()
    counts: tuple[str, tuple[str, ...]] | None = None


DERIVED: dict[str, Derived] = {
    "item_scores": Derived(("judgments", "responses"), "j", (
        "SELECT j.dataset, j.query_id, j.model_id, j.judge_id, "
        + ", ".join(f"avg(j.score) FILTER (WHERE j.metric = '{m}' AND j.parse_ok) AS {m}" for m in METRICS)
        + ", count(*) AS judgments, count(*) FILTER (WHERE NOT j.parse_ok) AS unparsed, max(j.sample) + 1 AS samples, "
        "list_sort(list(DISTINCT coalesce(j.run_id, ''))) AS runs FROM judgments j {touched} "
        f"JOIN responses r ON {_on('r', 'j', _RESPONSE)} AND r.response_hash = j.response_hash AND r.error IS NULL "
        "GROUP BY j.dataset, j.query_id, j.model_id, j.judge_id")),
    # per human-labelled item, metric and judge: the annotators' scores and the judge's item score, with the query's
    # strata — what every human-vs-judge comparison counts, without joining the labels to the judges' items. The
    # metric is ``label_metric``: a judgment of one metric makes or drops the item's row of every metric (an item
    # exists once any of its judgments is current), so it must touch the item, not the metric
    "label_pairs": Derived(("judgments", "responses", "human_labels", "queries"), "p", (
        "SELECT p.* FROM (SELECT h.dataset, h.query_id, h.model_id, h.metric AS label_metric, i.judge_id, "
        "any_value(q.language) AS query_language, any_value(coalesce(q.script, 'native')) AS query_script, "
        "any_value(q.themes) AS themes, avg(h.score) AS human, list(h.score ORDER BY h.annotator) AS humans, "
        "list(h.annotator ORDER BY h.annotator) AS annotators, any_value(CASE h.metric "
        + " ".join(f"WHEN '{m}' THEN i.{m}" for m in METRICS) + " END) AS llm "
        "FROM human_labels h {touched_items_h} JOIN item_scores i {touched_items_i} "
        f"ON {_on('i', 'h', _RESPONSE)} JOIN queries q ON q.dataset = h.dataset AND q.query_id = h.query_id "
        "WHERE h.score IS NOT NULL GROUP BY h.dataset, h.query_id, h.model_id, h.metric, i.judge_id) p {touched}"),
        (("queries", ("language", "script", "themes")),)),
    "response_facts": Derived(("responses", "lexical_scores", "safety_checks"), "r", (
        "SELECT r.dataset, r.query_id, r.model_id, r.error IS NOT NULL AS failed, l.query_id IS NOT NULL AS lexical, "
        f"{', '.join(f'l.{c}' for c in LEXICAL)}, {', '.join(f's.{c}' for c in SAFETY_CHECKS)} "
        "FROM responses r {touched} "
        f"LEFT JOIN lexical_scores l ON {_on('l', 'r', _RESPONSE)} AND l.response_hash = r.response_hash "
        "LEFT JOIN (SELECT s.dataset, s.query_id, s.model_id, s.response_hash, "
        + ", ".join(f"any_value(s.passed) FILTER (WHERE s.check_name = '{c}') AS {c}" for c in SAFETY_CHECKS)
        + f" FROM safety_checks s {{touched_s}} GROUP BY ALL) s ON {_on('s', 'r', _RESPONSE)} "
        "AND s.response_hash = r.response_hash")),
    # per language and script of the queries, what a leaderboard sums (pipeline/store/derived_groups.py); after the
    # per-item tables they are made of, which a write refreshes first
    **{t: Derived(derived_groups.SOURCES[t], derived_groups.ALIASES[t], sql, derived_groups.WATCH)
       for t, sql in derived_groups.SELECTS.items()},
    # per rubric item, and per item and tag: HealthBench's sums over current grades (pipeline/store/derived_rubric.py)
    **{t: Derived(derived_rubric.SOURCES, derived_rubric.ALIAS, sql, derived_rubric.WATCH)
       for t, sql in derived_rubric.SELECTS.items()},
    # per language and script of the queries, what the Med-CoDE page sums: critiques' probabilities and their
    # histograms, METEOR / ROUGE-L histograms (pipeline/store/derived_critiques.py); after response_facts
    **{t: Derived(derived_critiques.SOURCES[t], derived_critiques.ALIASES[t], sql, derived_critiques.WATCH)
       for t, sql in derived_critiques.SELECTS.items()},
    # per response, what the review queue's severity is made of (pipeline/store/derived_review.py); after
    # item_scores, response_facts and rubric_items
    **{t: Derived(derived_review.SOURCES, derived_review.ALIAS, sql, derived_review.WATCH)
       for t, sql in derived_review.SELECTS.items()},
    # per item, what a jury of its judges makes of their scores (pipeline/store/derived_jury.py); after item_scores
    # and the judges' score tuples that their agreement and a jury's means count, kept by deltas (a counted table)
    **{t: Derived(derived_jury.SOURCES, derived_jury.ALIASES[t], sql, derived_jury.WATCH, derived_jury.COUNTS.get(t))
       for t, sql in derived_jury.SELECTS.items()},
}


def refresh_sql(derived: str, keys_from: str | None = None, key_columns: tuple[str, ...] = ()) -> list[str]:
    """Statements that recompute ``derived`` for the keys in relation ``keys_from`` (all rows if None).

    ``key_columns`` are the columns of the derived key that ``keys_from`` has (a response key for a
    write to ``responses``, the whole key for ``judgments``). Rows of touched keys are deleted first,
    so a key whose sources no longer qualify (a regenerated response) loses its derived row. Rows are
    inserted BY NAME: a column added to an older database (a new metric) sits last in the table.
    """
    d = DERIVED[derived]
    if keys_from is None:
        rows = d.select.format(rows=d.counts[0]) if d.counts else d.select.format_map(_Everything())
        return [f"DELETE FROM {derived}", f"INSERT INTO {derived} BY NAME {rows}"]
    if d.counts is not None:
        return []  # kept by its parent's refresh (below)
    cols = ", ".join(key_columns)
    keys = f"(SELECT DISTINCT {cols} FROM {keys_from})"

    def touched(alias: str, columns: tuple[str, ...] = key_columns) -> str:
        return f"JOIN (SELECT DISTINCT {', '.join(columns)} FROM {keys_from}) k ON {_on('k', alias, columns)}"

    # ``{touched_q}``: the touched queries (alias q0), for a SELECT that reads per-query data (a rubric)
    per_query = ("dataset", "query_id")
    touched_q = touched("q0", per_query) if set(per_query) <= set(key_columns) else ""
    select = d.select.format_map(_Touched(touched, d.alias, touched_q, key_columns))
    delete = f"DELETE FROM {derived} USING {keys} k WHERE {_on('k', derived, key_columns)}"
    counted = {name: c for name, c in DERIVED.items() if c.counts is not None and c.counts[0] == derived}
    if not counted:
        return [delete, f"INSERT INTO {derived} BY NAME {select}"]
    # the touched rows before and after, kept apart, so that each counted table subtracts what they counted and adds
    # what they count now, reading a few thousand rows instead of the parent's millions
    old, new = f"_old_{derived}", f"_new_{derived}"
    statements = [f"CREATE OR REPLACE TEMP TABLE {old} AS SELECT {derived}.* FROM {derived} {touched(derived)}",
                  f"CREATE OR REPLACE TEMP TABLE {new} AS {select}", delete,
                  f"INSERT INTO {derived} BY NAME SELECT * FROM {new}"]
    for name, c in counted.items():
        spec, sums = TABLES[name], c.counts[1]
        kept = [n for n in spec.names if n not in spec.key and n not in sums]
        negated = ", ".join(f"-{s} AS {s}" for s in sums)
        statements += [
            f"INSERT INTO {name} BY NAME SELECT {', '.join(spec.key)}, "
            + "".join(f"any_value({n}) AS {n}, " for n in kept) + ", ".join(f"sum({s}) AS {s}" for s in sums)
            + f" FROM (SELECT * REPLACE ({negated}) FROM ({c.select.format(rows=old)}) "
            f"UNION ALL ({c.select.format(rows=new)})) GROUP BY {', '.join(spec.key)} "
            "ON CONFLICT DO UPDATE SET " + ", ".join(f"{s} = {s} + excluded.{s}" for s in sums),
            f"DELETE FROM {name} WHERE n = 0"]
    return [*statements, f"DROP TABLE {old}", f"DROP TABLE {new}"]


class _Everything(dict):
    """A SELECT's placeholders for a refresh of every key: no restriction."""

    def __missing__(self, name: str) -> str:
        return ""


class _Touched(dict):
    """A SELECT's placeholders: ``{touched}`` restricts its main alias to the touched keys, ``{touched_X}`` the
    table aliased X (a subquery's own source), ``{touched_items_X}`` the table aliased X to the touched keys'
    responses (their dataset, query and model: a source that lacks the rest of the key), ``{touched_q}`` the touched
    queries (alias q0)."""

    def __init__(self, touched, alias: str, touched_q: str, key_columns: tuple[str, ...]):
        super().__init__(touched=touched(alias), touched_q=touched_q)
        self._touched = touched
        self._items = tuple(c for c in _RESPONSE if c in key_columns)

    def __missing__(self, name: str) -> str:
        if name.startswith("touched_items_"):
            return self._touched(name.removeprefix("touched_items_"), self._items)
        if not name.startswith("touched_"):
            raise KeyError(name)
        return self._touched(name.removeprefix("touched_"))
