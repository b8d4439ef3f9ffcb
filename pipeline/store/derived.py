"""A derived table is one declaration (``Derived``); ``ordered`` checks and orders them; ``refresh_sql`` keeps one.

A declaration names the table, its key, every table its definition reads (base and derived), and the definition:
one SELECT over those tables, in which placeholders mark where a refresh restricts a table to the keys a write
touched. With every placeholder empty it is the table's definition over all rows (``Derived.definition``); the
columns and their types are that SELECT's (``column_types``: DuckDB's ``DESCRIBE`` of it over empty tables), so a
type is stated once, in the SQL (``count(*)::INTEGER``).

Placeholders (resolved by name, ``Derived.placeholders``; any other name fails at import):

- ``{touched}``: joins the driving table (alias ``alias``) to the touched keys;
- ``{touched_X}``: the same for the table aliased X (a subquery's own source);
- ``{touched_items_X}``: the table aliased X to the touched keys' responses (dataset, query, model: a source that
  lacks the rest of the key);
- ``{touched_queries_X}``: the table aliased X to the touched queries (dataset, query), when the keys have them;
- ``{rows}``: a counted table's parent rows (``Counts``).

How a table is kept:

- **recomputed by key** (the default): after a write, the rows of the keys it touched are deleted and the
  restricted SELECT inserts them again, in the same transaction;
- **counted** (``counts``): a rollup of another derived table's rows by mergeable sums (``Counts.sums``). Around its
  parent's refresh the touched parent rows' counts before it are subtracted and after it added, rows left at
  ``n`` = 0 deleted, instead of regrouping every row of the touched groups (``jury_patterns``).

``watch`` narrows what a write to a base table touches: only the keys whose values of those columns change (a run
rewrites every query; only a changed rubric matters to the rubric tables). The base table may be read directly or
through the derived tables it reads (``score_groups`` reads a query's language and script from ``item_scores``).

``ordered`` computes the refresh order from the declared reads (``graphlib``: parents first) and fails on a cycle,
an unknown table, or a definition that reads a table it does not declare (DuckDB's own parser lists the tables a
SELECT reads). docs/store.md has the rules for adding a table.
"""

from __future__ import annotations

import graphlib
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import duckdb

RESPONSE = ("dataset", "query_id", "model_id")
QUERY = ("dataset", "query_id")
QUERY_LANGUAGE = (("queries", ("language", "script")),)  # a watch: only a query moved to another language or script
Columns = tuple[tuple[str, str], ...]  # (name, DuckDB type), in order


@dataclass(frozen=True)
class Counts:
    """A counted table: ``parent``'s rows grouped by its SELECT (reading ``{rows}``), kept by deltas of ``sums``
    (the first is the group's row count: a row whose count falls to 0 is deleted)."""

    parent: str
    sums: tuple[str, ...]


@dataclass(frozen=True)
class Derived:
    """One derived table: see the module docstring."""

    name: str
    key: tuple[str, ...]
    reads: tuple[str, ...]  # every table the SELECT reads, base and derived
    alias: str  # the driving table's alias in the SELECT (what ``{touched}`` restricts)
    select: str
    watch: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (base table, the columns whose change touches a key)
    counts: Counts | None = None

    def placeholders(self) -> tuple[str, ...]:
        """The placeholder names of the SELECT, each of a known form (else ValueError)."""
        names = tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(self.select) if f is not None))
        for name in names:
            if name == "rows" and self.counts is None:
                raise ValueError(f"{self.name}: {{rows}} outside a counted table")
            if name not in ("rows", "touched") and not name.startswith("touched_"):
                raise ValueError(f"{self.name}: unknown placeholder {{{name}}}")
        return names

    def definition(self) -> str:
        """The SELECT of every row (no key restricted)."""
        return self.select.format_map({n: self.counts.parent if n == "rows" else "" for n in self.placeholders()})

    def restricted(self, touched: Callable[[str, tuple[str, ...]], str], key_columns: tuple[str, ...]) -> str:
        """The SELECT of the rows of the touched keys: ``touched(alias, columns)`` joins a table to them."""
        values: dict[str, str] = {}
        for name in self.placeholders():
            if name == "touched":
                values[name] = touched(self.alias, key_columns)
            elif name.startswith("touched_items_"):
                values[name] = touched(name.removeprefix("touched_items_"),
                                       tuple(c for c in RESPONSE if c in key_columns))
            elif name.startswith("touched_queries_"):
                values[name] = touched(name.removeprefix("touched_queries_"), QUERY) \
                    if set(QUERY) <= set(key_columns) else ""
            elif name.startswith("touched_"):
                values[name] = touched(name.removeprefix("touched_"), key_columns)
            else:
                raise ValueError(f"{self.name}: {{{name}}} in a table kept by key")
        return self.select.format_map(values)


def ordered(declarations: Iterable[Derived], base: Mapping[str, Columns]) -> tuple[dict[str, Derived],
                                                                                     dict[str, Columns]]:
    """The declarations in refresh order (a table after every table it reads) and each one's columns.

    Fails (ValueError, graphlib.CycleError) on a name declared twice or shadowing a base table, a read of an unknown
    table, a watch of a table it does not read, a cycle, a counted table that reads more than its parent, an unknown
    placeholder, or a SELECT whose tables differ from its declared reads."""
    by_name: dict[str, Derived] = {}
    for d in declarations:
        if d.name in by_name or d.name in base:
            raise ValueError(f"derived table {d.name} declared twice")
        by_name[d.name] = d
    for d in by_name.values():
        if unknown := [t for t in d.reads if t not in by_name and t not in base]:
            raise ValueError(f"{d.name} reads unknown tables {unknown}")
        if d.counts is not None and d.reads != (d.counts.parent,):
            raise ValueError(f"{d.name}: a counted table reads its parent alone")
        d.placeholders()
    order = graphlib.TopologicalSorter({d.name: [t for t in d.reads if t in by_name] for d in by_name.values()})
    ranked = {name: by_name[name] for name in order.static_order()}
    for d in ranked.values():  # a base table read directly or through the derived tables it reads (no cycle now)
        if unread := [t for t, _ in d.watch if t not in sources(ranked, d.name, base)]:
            raise ValueError(f"{d.name} watches {unread}, base tables it does not read")
    return ranked, column_types(ranked, base)


def column_types(registry: Mapping[str, Derived], base: Mapping[str, Columns]) -> dict[str, Columns]:
    """Each table's columns as its definition's SELECT gives them (``DESCRIBE`` over empty tables, in order); a
    SELECT reading a table it does not declare fails (ValueError)."""
    con = duckdb.connect()
    try:
        for table, columns in base.items():
            con.execute(f"CREATE TABLE {table} ({', '.join(f'{n} {t}' for n, t in columns)})")
        out: dict[str, Columns] = {}
        for name, d in registry.items():
            sql = d.definition()
            read = con.get_table_names(sql)
            if read != set(d.reads):
                raise ValueError(f"{name}: its SELECT reads {sorted(read)}, it declares {sorted(d.reads)}")
            out[name] = tuple((c, t) for c, t, *_ in con.execute(f"DESCRIBE {sql}").fetchall())
            if missing := [k for k in d.key if k not in dict(out[name])]:
                raise ValueError(f"{name}: key columns {missing} are not in its SELECT")
            con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in out[name])})")
        return out
    finally:
        con.close()


def sources(registry: Mapping[str, Derived], name: str, base: Iterable[str]) -> tuple[str, ...]:
    """The base tables whose writes change ``name`` (what it reads, through the derived tables it reads)."""
    base, seen, todo = set(base), set(), [name]
    while todo:
        for t in registry[todo.pop()].reads:
            if t in registry:
                todo.append(t)
            else:
                seen.add(t)
    return tuple(sorted(seen & base))


def join_on(a: str, b: str, columns: tuple[str, ...] = RESPONSE) -> str:
    """SQL equating ``columns`` of aliases ``a`` and ``b`` (by default a response's key)."""
    return " AND ".join(f"{a}.{c} = {b}.{c}" for c in columns)


def refresh_sql(registry: Mapping[str, Derived], columns: Mapping[str, Columns], name: str,
                keys_from: str | None = None, key_columns: tuple[str, ...] = ()) -> list[str]:
    """Statements that recompute ``name`` for the keys in relation ``keys_from`` (all rows if None).

    ``key_columns`` are the columns of its key that ``keys_from`` has (a response key for a write to ``responses``,
    the whole key for ``judgments``). Rows of touched keys are deleted first, so a key whose sources no longer
    qualify (a regenerated response) loses its row. Rows are inserted BY NAME: a column added to an older database
    (a new metric) sits last in the table. A counted table is kept by its parent's refresh (its deltas follow it).
    """
    d = registry[name]
    if keys_from is None:
        return [f"DELETE FROM {name}", f"INSERT INTO {name} BY NAME {d.definition()}"]
    if d.counts is not None:
        return []

    def touched(alias: str, cols: tuple[str, ...] = key_columns) -> str:
        return f"JOIN (SELECT DISTINCT {', '.join(cols)} FROM {keys_from}) k ON {join_on('k', alias, cols)}"

    select = d.restricted(touched, key_columns)
    delete = (f"DELETE FROM {name} USING (SELECT DISTINCT {', '.join(key_columns)} FROM {keys_from}) k "
              f"WHERE {join_on('k', name, key_columns)}")
    counted = [c for c in registry.values() if c.counts is not None and c.counts.parent == name]
    if not counted:
        return [delete, f"INSERT INTO {name} BY NAME {select}"]
    # the touched rows before and after, kept apart, so that each counted table subtracts what they counted and adds
    # what they count now, reading a few thousand rows instead of the parent's millions
    old, new = f"_old_{name}", f"_new_{name}"
    statements = [f"CREATE OR REPLACE TEMP TABLE {old} AS SELECT {name}.* FROM {name} {touched(name)}",
                  f"CREATE OR REPLACE TEMP TABLE {new} AS {select}", delete,
                  f"INSERT INTO {name} BY NAME SELECT * FROM {new}"]
    for c in counted:
        sums = c.counts.sums
        kept = [n for n, _ in columns[c.name] if n not in c.key and n not in sums]
        negated = ", ".join(f"-{s} AS {s}" for s in sums)
        statements += [
            f"INSERT INTO {c.name} BY NAME SELECT {', '.join(c.key)}, "
            + "".join(f"any_value({n}) AS {n}, " for n in kept) + ", ".join(f"sum({s}) AS {s}" for s in sums)
            + f" FROM (SELECT * REPLACE ({negated}) FROM ({c.select.format(rows=old)}) "
            f"UNION ALL ({c.select.format(rows=new)})) GROUP BY {', '.join(c.key)} "
            "ON CONFLICT DO UPDATE SET " + ", ".join(f"{s} = {s} + excluded.{s}" for s in sums),
            f"DELETE FROM {c.name} WHERE {sums[0]} = 0"]
    return [*statements, f"DROP TABLE {old}", f"DROP TABLE {new}"]

