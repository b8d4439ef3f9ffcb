"""The results database's schema: every table's columns and key, and the derived tables kept in step.

A written table's columns are the fields of its row class (``pipeline/store/rows.py``), their DuckDB types
following from the annotations (``TABLES``). ``Store`` creates missing tables and adds missing columns to an
existing database (a new metric, a new field), backfilling what can be derived (``BACKFILL``).

Eighteen tables are derived, each one declaration (``pipeline.store.derived.Derived``: its key, the tables it
reads, its SELECT, how it is kept) in a module of its family, collected here in refresh order (``DERIVED``, checked at
import: a cycle or a table read but not declared fails). After a batch is written the writer recomputes the rows of
every key it touched in the same transaction, so they never disagree with their sources; they count only what
belongs to the response text now stored. docs/store.md has the rules.

- ``pipeline/store/derived_items.py``: ``item_scores`` (per judged item), ``label_pairs`` (per human-labelled item
  and judge), ``response_facts`` (per response).
- ``pipeline/store/derived_groups.py``: ``score_groups``, ``theme_groups``, ``response_groups``,
  ``retrieval_groups`` — per (dataset, model, query language and script; and judge, theme) what a leaderboard sums.
- ``pipeline/store/derived_rubric.py``: ``rubric_items``, ``rubric_tag_items`` — HealthBench's sums per rubric item.
- ``pipeline/store/derived_critiques.py``: ``critique_groups``, ``lexical_groups``, ``critique_items`` — the
  Med-CoDE page's sums and its correlations' sample.
- ``pipeline/store/derived_review.py``: ``review_facts`` — what the review queue's severity is made of.
- ``pipeline/store/derived_jury.py``: ``jury_items`` (a jury's per-item scores and spread) and ``jury_patterns``
  (the judges' score tuples, counted from ``jury_items`` by deltas).
- ``pipeline/store/derived_arena.py``: ``arena_comparisons`` (per current vote or judged pair), ``arena_pairs`` and
  ``arena_styles`` (counted from it: what the arena's leaderboards and the judge's bias view fit).

The pages read them instead of regrouping millions of rows at every render (bench/README.md has the figures).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import date, datetime
from typing import Annotated, Any, NamedTuple

import pyarrow as pa

from pipeline.store import (
    derived_arena,
    derived_critiques,
    derived_groups,
    derived_items,
    derived_jury,
    derived_review,
    derived_rubric,
)
from pipeline.store.derived import RESPONSE, Derived, ordered, sources
from pipeline.store.derived import refresh_sql as _refresh_sql
from pipeline.store.rows import LEXICAL, ROW_CLASSES, ROWS, TEXT_HASH_SQL, Row

SCHEMA_VERSION = 13  # 2: item_scores; 3: response_facts; 4: responses.response_hash, derived = current only; 5: groups
# 6: labelled_scores; 7: critique_groups, lexical_groups, critique_items (the Med-CoDE page's sums and sample),
# theme_groups (the themes page's sums), review_facts (the review queue's severity inputs), jury_items (a jury's
# per-item scores and spread); 8: jury_patterns (counted from jury_items), label_pairs (instead of labelled_scores),
# retrieval_groups; 9: arena_comparisons, arena_pairs, arena_styles (the arena's grouped comparisons);
# 10: item_scores.query_language, query_script (score_groups and jury_items read them there instead of joining
# queries; added to an older file's item_scores like a new metric's column, which rebuilds the derived tables);
# 11: retrievals.kb_hash, responses.kb_hash (the KB a result came from; NULL in an older file's rows: unrecorded),
# datasets.kb_hash (the KB the latest run saw)
# and arena_votes.shown_at (when the pair was shown; NULL in an older file's votes: their time is unknown);
# 12: queries.variant_kind, variant_made (a generated variant's kind and how it was made, `pipeline variants`; NULL
# in an older file's queries: none of them was generated)
# 13: responses.engine (llamacpp/'s llama-cpp-python or prebuilt xllamacpp; NULL in an older file's rows: unrecorded)
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


_RESPONSE = RESPONSE
_BASE: dict[str, TableSpec] = {c.TABLE: TableSpec(_columns(c), c.KEY) for c in ROW_CLASSES}

# Every derived table, in refresh order (a table after the tables it reads), and its columns (its SELECT's)
DERIVED, _DERIVED_COLUMNS = ordered((*derived_items.DERIVED, *derived_groups.DERIVED, *derived_rubric.DERIVED,
                                     *derived_critiques.DERIVED, *derived_review.DERIVED, *derived_jury.DERIVED,
                                     *derived_arena.DERIVED),
                                    {t: spec.columns for t, spec in _BASE.items()})

# derived table -> the base tables whose writes refresh it (what it reads, through the derived tables it reads)
SOURCES: dict[str, tuple[str, ...]] = {name: sources(DERIVED, name, _BASE) for name in DERIVED}

# table -> spec. Identifiers in SQL come only from this fixed map.
TABLES: dict[str, TableSpec] = {**_BASE, **{t: TableSpec(_DERIVED_COLUMNS[t], d.key) for t, d in DERIVED.items()}}

# Columns added after a table first shipped, and how to fill them in an older database.
BACKFILL: dict[tuple[str, str], str] = {
    ("responses", "response_hash"): f"CASE WHEN text IS NULL THEN NULL ELSE {TEXT_HASH_SQL.format(col='text')} END",
}


def register_rows(*classes: type[Row]) -> None:
    """Make row classes declared outside ``rows.py`` (a step's own, ``Step.rows``) tables of the store: the writer
    takes them and a database gains their tables on its next connection, as a new table of a newer version. The
    same class again changes nothing; another class under a table name already taken is refused."""
    for cls in classes:
        if ROWS.get(cls.TABLE) is cls:
            continue
        if cls.TABLE in TABLES:
            owner = getattr(ROWS.get(cls.TABLE), "__name__", "a derived table")
            raise ValueError(f"{cls.__name__}: table {cls.TABLE!r} belongs to {owner}")
        ROWS[cls.TABLE] = cls
        TABLES[cls.TABLE] = TableSpec(_columns(cls), cls.KEY)


def refresh_sql(derived: str, keys_from: str | None = None, key_columns: tuple[str, ...] = ()) -> list[str]:
    """Statements that recompute ``derived`` for the keys in relation ``keys_from`` (all rows if None): see
    ``pipeline.store.derived.refresh_sql``."""
    return _refresh_sql(DERIVED, _DERIVED_COLUMNS, derived, keys_from, key_columns)


__all__ = ["BACKFILL", "DERIVED", "LEXICAL", "PLAYGROUND", "REBUILT_AT", "RETIRED", "SCHEMA_VERSION", "SOURCES",
           "TABLES", "Derived", "TableSpec", "refresh_sql", "register_rows"]
