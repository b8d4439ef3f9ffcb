"""The store's derived tables follow their sources through upserts, deletes and an upgrade."""

from __future__ import annotations

import duckdb
import pytest

from pipeline.config import SAFETY_CHECKS
from pipeline.metrics import METRICS
from pipeline.store import DERIVED, LEXICAL, Store, now

# What each derived table must hold, computed here straight from its sources.
EXPECTED = {
    "item_scores": (
        "SELECT dataset, query_id, model_id, judge_id, "
        + ", ".join(f"avg(score) FILTER (WHERE metric = '{m}' AND parse_ok)" for m in METRICS)
        + ", count(*), count(*) FILTER (WHERE NOT parse_ok), max(sample) + 1 FROM judgments GROUP BY ALL ORDER BY ALL"
    ),
    "response_facts": (
        "SELECT r.dataset, r.query_id, r.model_id, r.error IS NOT NULL, "
        "EXISTS (SELECT 1 FROM lexical_scores l WHERE l.dataset = r.dataset AND l.query_id = r.query_id "
        "AND l.model_id = r.model_id), "
        + ", ".join(f"(SELECT l.{c} FROM lexical_scores l WHERE l.dataset = r.dataset AND l.query_id = r.query_id "
                    "AND l.model_id = r.model_id)" for c in LEXICAL) + ", "
        + ", ".join(f"(SELECT s.passed FROM safety_checks s WHERE s.dataset = r.dataset AND s.query_id = r.query_id "
                    f"AND s.model_id = r.model_id AND s.check_name = '{c}')" for c in SAFETY_CHECKS)
        + " FROM responses r ORDER BY ALL"
    ),
}


def _derived(store: Store, table: str) -> list[tuple]:
    return store.fetch(f"SELECT * FROM {table} ORDER BY ALL")


def _write_sources(store: Store) -> None:
    stamp = now()
    store.write_batch({
        "responses": [{"dataset": "d", "query_id": f"q{i}", "model_id": m, "run_id": "r",
                       "text": None if i == 2 else "t", "error": "RateLimitError: 429" if i == 2 else None,
                       "created_at": stamp}
                      for i in range(4) for m in ("a", "b")],
        "lexical_scores": [{"dataset": "d", "query_id": f"q{i}", "model_id": "a", **{c: i / 10 for c in LEXICAL},
                            "created_at": stamp} for i in (0, 1, 3)],
        "safety_checks": [{"dataset": "d", "query_id": "q1", "model_id": m, "check_name": c, "passed": passed,
                           "created_at": stamp} for m in ("a", "b")
                          for c, passed in zip(SAFETY_CHECKS, (True, None, False), strict=True)],
        "judgments": [{"dataset": "d", "query_id": f"q{i}", "model_id": "a", "judge_id": "j", "metric": m,
                       "sample": s, "score": None if (i, m) == (1, "SS") else (i + s) % 3,
                       "parse_ok": (i, m) != (1, "SS"), "created_at": stamp}
                      for i in (0, 1, 3) for m in METRICS for s in range(1 + (i == 3))],
    })


def test_derived_tables_follow_upserts_and_deletes(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    _write_sources(store)
    for table, sql in EXPECTED.items():
        assert _derived(store, table) == store.fetch(sql), table
    (item,) = store.fetch("SELECT FC, SS, judgments, unparsed, samples FROM item_scores WHERE query_id = 'q3'")
    assert item == (0.5, 0.5, 8, 0, 2)  # mean of two samples (0 and 1), every metric judged twice

    # a rescored item, a recomputed lexical score and a deleted check: the derived rows follow
    store.upsert("judgments", [{"dataset": "d", "query_id": "q1", "model_id": "a", "judge_id": "j", "metric": "SS",
                                "sample": 0, "score": 2, "parse_ok": True, "created_at": now()}])
    store.upsert("lexical_scores", [{"dataset": "d", "query_id": "q3", "model_id": "b", **{c: 0.9 for c in LEXICAL},
                                     "created_at": now()}])
    store.delete_where("safety_checks", "dataset = ? AND query_id = ? AND model_id = ? AND check_name = ?",
                       ["d", "q1", "a", "refusal"])
    for table, sql in EXPECTED.items():
        assert _derived(store, table) == store.fetch(sql), table
    assert store.fetch("SELECT SS, unparsed FROM item_scores WHERE query_id = 'q1'") == [(2.0, 0)]
    assert store.fetch("SELECT refusal FROM response_facts WHERE query_id = 'q1' AND model_id = 'a'") == [(None,)]

    for table in DERIVED:
        with pytest.raises(ValueError, match="derived"):
            store.upsert(table, [{"dataset": "d"}])
    with pytest.raises(ValueError, match="cannot delete"):
        store.delete_where("judgments", "dataset = ?", ["d"])


def test_a_database_from_before_the_derived_tables_is_upgraded(tmp_path):
    path = tmp_path / "old.duckdb"
    _write_sources(Store(path))
    con = duckdb.connect(str(path))  # as an older version left it: no derived tables, schema 1
    for table in DERIVED:
        con.execute(f"DROP TABLE {table}")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    store.upgrade()
    for table, sql in EXPECTED.items():
        assert _derived(store, table) == store.fetch(sql) != [], table
