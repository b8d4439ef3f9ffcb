"""``pipeline cluster``: the per-query tables rewritten in key order keep every row, key and derived table, and
one query's lookup then reads one or two row groups."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb

from pipeline.store import Store
from pipeline.store import writer as store_writer
from pipeline.store.rows import ResponseRow
from pipeline.store.schema import TABLES

REPO = Path(__file__).resolve().parent.parent


def _snapshot(db: Path) -> dict[str, tuple[list, list, list]]:
    """Per table: its columns (name, type, order), primary key, and rows sorted."""
    with duckdb.connect(str(db), read_only=True) as con:
        out = {}
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            columns = con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                                  "ORDER BY ordinal_position", [table]).fetchall()
            key = con.execute("SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = ? AND "
                              "constraint_type = 'PRIMARY KEY'", [table]).fetchall()
            rows = sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            out[table] = (columns, key, rows)
    return out


def test_cluster_keeps_every_row_and_orders_the_per_query_and_per_model_tables(synthetic_db, tmp_path, monkeypatch):
    db = tmp_path / "clustered.duckdb"
    shutil.copy(synthetic_db, db)
    before = _snapshot(db)
    monkeypatch.setattr(store_writer, "ROW_GROUP_ROWS", 0)  # the fixture's tables fit one row group each
    told: list[str] = []
    done = Store(db).cluster(lambda table, rows: told.append(table))
    keyed = {t for t, spec in TABLES.items() if spec.key[:2] in (("dataset", "query_id"), ("dataset", "model_id"))
             and t in before and before[t][2]}
    assert set(done) == set(told) == keyed and {"responses", "judgments", "item_scores", "model_items"} <= keyed
    assert _snapshot(db) == before  # same columns in the same order, same keys, same rows
    with duckdb.connect(str(db), read_only=True) as con:
        for table in done:
            key = ", ".join(TABLES[table].key)
            stored = con.execute(f"SELECT {key} FROM {table} ORDER BY rowid").fetchall()
            assert stored == sorted(stored), table
    # the key still holds (an upsert replaces), and the writer keeps the derived tables in step
    with duckdb.connect(str(db), read_only=True) as con:
        dataset, query_id, model_id, text = con.execute(
            "SELECT r.dataset, r.query_id, r.model_id, r.text FROM responses r JOIN item_scores i "
            "USING (dataset, query_id, model_id) WHERE r.error IS NULL LIMIT 1").fetchone()
        n = con.execute("SELECT count(*) FROM responses").fetchone()[0]
    Store(db).write([ResponseRow(dataset=dataset, query_id=query_id, model_id=model_id, run_id="edit", prompt_hash="p",
                                 text=text + " (edited)", error=None)])
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM responses").fetchone()[0] == n
        assert con.execute("SELECT count(*) FROM item_scores WHERE dataset = ? AND query_id = ? AND model_id = ?",
                           [dataset, query_id, model_id]).fetchone()[0] == 0  # its judgments scored the old text


def test_cluster_command(synthetic_db, tmp_path):
    db = tmp_path / "small.duckdb"
    shutil.copy(synthetic_db, db)
    done = subprocess.run([sys.executable, "-m", "pipeline", "cluster", "--db", str(db)], capture_output=True,
                          text=True, cwd=REPO)
    assert done.returncode == 0 and "clustered" in done.stdout
    missing = subprocess.run([sys.executable, "-m", "pipeline", "cluster", "--db", str(tmp_path / "none.duckdb")],
                             capture_output=True, text=True, cwd=REPO)
    assert missing.returncode != 0 and "no results database" in (missing.stdout + missing.stderr)
    assert not (tmp_path / "none.duckdb").exists()


def _row_groups(db: Path, sql: str) -> tuple[int, int]:
    """(row groups scanned, row groups in all) of ``sql``'s scan (``EXPLAIN ANALYZE``)."""
    with duckdb.connect(str(db), read_only=True) as con:
        plan = con.execute(f"EXPLAIN ANALYZE {sql}").fetchall()[0][1]
    line = next(x for x in plan.splitlines() if "Row Groups Scanned" in x)
    scanned, total = (int(n.strip(" │")) for n in line.split(":")[1].split("/"))
    return scanned, total


def test_cluster_makes_a_query_lookup_read_fewer_row_groups(tmp_path):
    """Rows written model by model over several row groups: a lookup of one query reads every row group before,
    one or two after (DuckDB's min/max statistics)."""
    db = tmp_path / "rows.duckdb"
    models, queries = 4, 40_000
    Store(db).upgrade()
    with duckdb.connect(str(db)) as con:
        con.execute("INSERT INTO responses (dataset, query_id, model_id, text, response_hash) SELECT 'd', "
                    "printf('q-%06d', q), printf('m%d', m), 'x', 'h' FROM range(?) m(m), range(?) q(q) ORDER BY m, q",
                    [models, queries])

    lookup = "SELECT count(*) FROM responses WHERE dataset = 'd' AND query_id = 'q-020000'"
    before, _ = _row_groups(db, lookup)
    Store(db).cluster()
    assert before >= 2 and _row_groups(db, lookup)[0] <= 1 < before


def test_cluster_makes_a_two_model_read_of_the_by_model_table_read_fewer_row_groups(tmp_path):
    """The by-model table (``derived_models``) written query by query, every model in every row group: two models'
    rows are in every row group before, in at most two each after (what Compare runs reads)."""
    db = tmp_path / "rows.duckdb"
    models, queries = 16, 40_000
    Store(db).upgrade()
    with duckdb.connect(str(db)) as con:
        con.execute("INSERT INTO model_items (dataset, model_id, query_id, failed, response_hash) SELECT 'd', "
                    "printf('m%d', m), printf('q-%06d', q), false, 'h' FROM range(?) q(q), range(?) m(m) ORDER BY q, m",
                    [queries, models])

    two_models = "SELECT count(*) FROM model_items WHERE dataset = 'd' AND model_id IN ('m2', 'm5')"
    before, total = _row_groups(db, two_models)
    assert Store(db).cluster() == {"model_items": models * queries}
    after, _ = _row_groups(db, two_models)
    assert before == total >= 5 and after <= 4 < before  # each model 40,000 rows: in one or two row groups
