"""The results database's schema: every table's columns and key, and the derived tables kept in step.

A written table's columns are the fields of its row class, their DuckDB types following from the annotations
(``Schema``: row classes → tables). ``SCHEMA`` holds the store's own tables: every row class defined in
``pipeline/store/rows.py`` and ``arena_rows.py`` (collected from the modules, no list kept by hand) and the derived
tables, which read only those. The catalog (``pipeline.catalog``) adds the tables of the steps' own row classes
(``Step.rows``) with ``Schema.with_rows`` and hands that schema to every entry point that opens a ``Store``
(the run, ``upgrade``, ``export``, ``status``). ``Store`` creates missing tables and adds missing columns to an
existing database (a new metric, a new field), backfilling what can be derived (``BACKFILL``).

Nineteen tables are derived, each one declaration (``pipeline.store.derived.Derived``: its key, the tables it
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
- ``pipeline/store/derived_models.py``: ``model_items`` — what Compare runs pairs of each answer, keyed by model
  first so that ``Store.cluster`` orders it by model.
- ``pipeline/store/derived_arena.py``: ``arena_comparisons`` (per current vote or judged pair), ``arena_pairs`` and
  ``arena_styles`` (counted from it: what the arena's leaderboards and the judge's bias view fit).

The pages read them instead of regrouping millions of rows at every render (bench/README.md has the figures).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from types import MappingProxyType, ModuleType
from typing import Annotated, Any, NamedTuple

import pyarrow as pa

from pipeline.store import (
    arena_rows,
    derived_arena,
    derived_critiques,
    derived_groups,
    derived_items,
    derived_jury,
    derived_models,
    derived_review,
    derived_rubric,
    rows,
)
from pipeline.store.derived import RESPONSE, Derived, ordered, sources
from pipeline.store.derived import refresh_sql as _refresh_sql
from pipeline.store.rows import LEXICAL, TEXT_HASH_SQL, Row

SCHEMA_VERSION = 14  # 2: item_scores; 3: response_facts; 4: responses.response_hash, derived = current only; 5: groups
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
# 14: model_items (what Compare runs pairs of each answer, keyed by model first; an older file makes it on upgrade)
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


def _defined_in(*modules: ModuleType) -> tuple[type[Row], ...]:
    """The row classes each module defines (not those it imports; a class naming a ``TABLE``, not a shared base), in
    the order they are written."""
    return tuple(v for m in modules for v in vars(m).values() if isinstance(v, type) and issubclass(v, Row)
                 and "TABLE" in vars(v) and v.__module__ == m.__name__)


_RESPONSE = RESPONSE
_OWN_ROWS = _defined_in(rows, arena_rows)
_BASE: dict[str, TableSpec] = {c.TABLE: TableSpec(_columns(c), c.KEY) for c in _OWN_ROWS}

# Every derived table, in refresh order (a table after the tables it reads), and its columns (its SELECT's)
DERIVED, _DERIVED_COLUMNS = ordered((*derived_items.DERIVED, *derived_groups.DERIVED, *derived_rubric.DERIVED,
                                     *derived_critiques.DERIVED, *derived_review.DERIVED, *derived_jury.DERIVED,
                                     *derived_arena.DERIVED, *derived_models.DERIVED),
                                    {t: spec.columns for t, spec in _BASE.items()})

# derived table -> the base tables whose writes refresh it (what it reads, through the derived tables it reads)
SOURCES: dict[str, tuple[str, ...]] = {name: sources(DERIVED, name, _BASE) for name in DERIVED}


@dataclass(frozen=True)
class Schema:
    """The tables of a database: ``rows`` (written table → its row class) and ``tables`` (every table, written and
    derived → columns and key). Immutable; ``with_rows`` makes a larger one."""

    rows: Mapping[str, type[Row]]
    tables: Mapping[str, TableSpec]

    @classmethod
    def of(cls, row_classes: Iterable[type[Row]]) -> Schema:
        """The schema of ``row_classes`` and the derived tables; a table name taken twice is refused."""
        derived = {t: TableSpec(_DERIVED_COLUMNS[t], d.key) for t, d in DERIVED.items()}
        return cls(MappingProxyType({}), MappingProxyType(derived)).with_rows(*row_classes)

    def with_rows(self, *classes: type[Row]) -> Schema:
        """This schema and the tables of ``classes`` (a step's own rows, ``Step.rows``). A class already here adds
        nothing; another class under a table name already taken is refused (ValueError naming both)."""
        found, tables = dict(self.rows), dict(self.tables)
        for cls in classes:
            if found.get(cls.TABLE) is cls:
                continue
            if cls.TABLE in tables:
                owner = getattr(found.get(cls.TABLE), "__name__", "a derived table")
                raise ValueError(f"{cls.__name__}: table {cls.TABLE!r} belongs to {owner}")
            found[cls.TABLE] = cls
            tables[cls.TABLE] = TableSpec(_columns(cls), cls.KEY)
        written = {t: tables.pop(t) for t in list(tables) if t in found}
        return Schema(MappingProxyType(found), MappingProxyType({**written, **tables}))


SCHEMA = Schema.of(_OWN_ROWS)  # the store's own tables: what a Store opened without the catalog's schema knows
TABLES: Mapping[str, TableSpec] = SCHEMA.tables  # table -> spec. Identifiers in SQL come only from a schema's map.

# Columns added after a table first shipped, and how to fill them in an older database.
BACKFILL: dict[tuple[str, str], str] = {
    ("responses", "response_hash"): f"CASE WHEN text IS NULL THEN NULL ELSE {TEXT_HASH_SQL.format(col='text')} END",
}


def refresh_sql(derived: str, keys_from: str | None = None, key_columns: tuple[str, ...] = ()) -> list[str]:
    """Statements that recompute ``derived`` for the keys in relation ``keys_from`` (all rows if None): see
    ``pipeline.store.derived.refresh_sql``."""
    return _refresh_sql(DERIVED, _DERIVED_COLUMNS, derived, keys_from, key_columns)


__all__ = ["BACKFILL", "DERIVED", "LEXICAL", "PLAYGROUND", "REBUILT_AT", "RETIRED", "SCHEMA", "SCHEMA_VERSION",
           "SOURCES", "TABLES", "Derived", "Schema", "TableSpec", "refresh_sql"]
