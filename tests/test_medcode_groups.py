"""The Med-CoDE page's groups (``critique_groups``, ``lexical_groups``, ``critique_items``;
pipeline/store/derived_critiques.py): the page
reads the same frames from them as from the critiques, and the writer keeps them equal to their recomputation from
scratch through writes of critiques, a regenerated or failed response, a deleted critique, new lexical scores and a
query filed under another language. The correlations' fixed sample is the same however it is found."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from pipeline.read import medcode
from pipeline.read.common import Filters
from pipeline.store import DERIVED, TABLES, Store
from pipeline.store.rows import AnswerCheckRow, CritiqueRow, LexicalRow, QueryRow, ResponseRow

GROUPS = ("critique_groups", "lexical_groups", "critique_items")
CRITIC = "vllm/medcode-phi-3-mini-critic"
FILTERS = [Filters(), Filters(dataset="synthetic"), Filters(dataset="medqa-synth"),
           Filters(dataset="synthetic", languages=("hi", "en")), Filters(scripts=("latin",)),
           Filters(models=("openai/gpt-4o", "vllm/BioMistral/BioMistral-7B")),
           Filters(dataset="synthetic", languages=("kn",), scripts=("native",), models=("openai/gpt-4o",)),
           Filters(dataset="synthetic", languages=("xx",)),  # nothing in scope
           Filters(dataset="synthetic", themes=("cultural",))]  # the groups' definitions over the theme's queries


def _frames(db: Path, f: Filters, grouped: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, pd.DataFrame]:
    with monkeypatch.context() as m:
        if not grouped:
            m.setattr(medcode, "_present", lambda have, *tables: False)  # the tables' definitions
        return medcode.medcode_view(db, f)


def _assert_same_views(db: Path, monkeypatch: pytest.MonkeyPatch, filters=FILTERS) -> None:
    for f in filters:
        a, b = _frames(db, f, True, monkeypatch), _frames(db, f, False, monkeypatch)
        assert a.keys() == b.keys()
        for name in a:
            pd.testing.assert_frame_equal(a[name], b[name], check_exact=False, rtol=1e-12, atol=1e-12,
                                          obj=f"{name} of {f}")


def _rounded(value):
    if isinstance(value, float):
        return round(value, 10)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _assert_fresh(db: Path) -> None:
    """Each group table equals its recomputation from scratch (floats to 1e-10: sums in another order)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table in GROUPS:
            stored = con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
            fresh = con.execute(f"SELECT * FROM ({DERIVED[table].definition()}) ORDER BY ALL").fetchall()
            assert [_rounded(list(r)) for r in stored] == [_rounded(list(r)) for r in fresh], table
    finally:
        con.close()


def _n(db: Path, where: str, params=()) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT coalesce(sum(n), 0) FROM critique_groups WHERE {where}", list(params)).fetchone()[0]
    finally:
        con.close()


def _fetch(db: Path, sql: str, params=()) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def _row(cls, db: Path, where: str, params) -> object:
    names = TABLES[cls.TABLE].names
    (values,) = _fetch(db, f"SELECT {', '.join(names)} FROM {cls.TABLE} WHERE {where}", params)
    return cls(**dict(zip(names, values, strict=True)))


@pytest.fixture
def varied_db(synthetic_db, copy_db) -> Path:
    """The synthetic database plus what it lacks: a checkpoint classifier and uniform fallbacks beside logprobs,
    a second critic, failed (unclassified) and stale critiques, answer checks (some unparsed)."""
    db = copy_db(synthetic_db)
    critiques = [_row(CritiqueRow, db, "dataset = ? AND query_id = ? AND model_id = ? AND critic_id = ?", key)
                 for key in _fetch(db, "SELECT dataset, query_id, model_id, critic_id FROM critiques "
                                       "ORDER BY hash(dataset, query_id, model_id) LIMIT 40")]
    rows: list = []
    for i, c in enumerate(critiques):
        if i % 5 == 0:
            c.classifier = "checkpoint:abc"
        elif i % 5 == 1:
            c.classifier, c.p_none, c.p_low, c.p_moderate, c.p_high = "logprobs:no-label-token", .25, .25, .25, .25
        elif i % 5 == 2:
            c.p_none = c.p_low = c.p_moderate = c.p_high = None
            c.error = "failed"
        elif i % 5 == 3:
            c.response_hash = "stale"
        rows.append(c)
        if i % 2:
            rows.append(CritiqueRow(dataset=c.dataset, query_id=c.query_id, model_id=c.model_id,
                                    critic_id="vllm/other-critic", classifier="checkpoint:def", critique="",
                                    p_none=0.1 * (i % 7), p_low=0.3, p_moderate=0.3, p_high=0.4 - 0.1 * (i % 7) + 0.3,
                                    label=None, response_hash=c.response_hash, run_id="t"))
    for i, (dataset, query_id, model_id, response_hash) in enumerate(_fetch(
            db, "SELECT dataset, query_id, model_id, response_hash FROM responses WHERE error IS NULL "
                "ORDER BY ALL LIMIT 60")):
        common = {"dataset": dataset, "query_id": query_id, "model_id": model_id, "response_hash": response_hash,
                  "run_id": "t", "parsed": None}
        rows += [AnswerCheckRow(**common, method="choice", checker_id="parser", correct=None if i % 7 == 0 else
                                bool(i % 3), raw_output=""),
                 AnswerCheckRow(**common, method="llm", checker_id="openai/gpt-4o-mini",
                                correct=None if i % 5 == 0 else bool(i % 2), raw_output="")]
    Store(db).write(rows)
    return db


def test_the_groups_and_the_critiques_give_the_same_page(synthetic_db, varied_db, monkeypatch):
    assert medcode._present({"critique_groups", "lexical_groups"}, "critique_groups", "lexical_groups")
    assert not medcode._present({"critiques"}, "critique_groups")  # an older file, before upgrade
    _assert_same_views(synthetic_db, monkeypatch)
    _assert_same_views(varied_db, monkeypatch)
    view = medcode.medcode_view(varied_db, Filters())
    assert {"checkpoint:abc", "checkpoint:def", "logprobs"} <= set(view["distribution"].classifier)
    assert view["classifiers"].set_index("classifier").uniform["logprobs"] > 0
    assert {"meteor", "rouge_l", "p_none", "exact_match", "llm_accuracy"} <= set(view["table2"].measure)


def test_the_groups_follow_writes(varied_db, monkeypatch):
    db = varied_db
    store = Store(db)
    _assert_fresh(db)
    key = "dataset = ? AND query_id = ? AND model_id = ?"

    # new critiques: one reclassified under another family leaves its old group; one failed drops out
    (first, second) = _fetch(db, "SELECT dataset, query_id, model_id FROM critiques WHERE critic_id = ? "
                                 "AND classifier = 'logprobs' AND p_none IS NOT NULL ORDER BY ALL LIMIT 2", [CRITIC])
    moved = _row(CritiqueRow, db, f"{key} AND critic_id = ?", [*first, CRITIC])
    failed = _row(CritiqueRow, db, f"{key} AND critic_id = ?", [*second, CRITIC])
    moved.classifier = "checkpoint:new"
    failed.p_none = failed.p_low = failed.p_moderate = failed.p_high = None
    before = _n(db, "critic_id = ?", [CRITIC])
    store.write([moved, failed])
    _assert_fresh(db)
    assert _n(db, "classifier_family = 'checkpoint:new'") == 1 and _n(db, "critic_id = ?", [CRITIC]) == before - 1

    # a regenerated response: its critiques (of the old text) no longer count, nor its old lexical scores
    (response,) = _fetch(db, "SELECT dataset, query_id, model_id FROM critiques WHERE critic_id = ? "
                             "AND p_none IS NOT NULL ORDER BY ALL DESC LIMIT 1", [CRITIC])  # not ``first``
    old = _row(ResponseRow, db, key, response)
    n_model = _n(db, "dataset = ? AND model_id = ?", [response[0], response[2]])
    current = _fetch(db, f"SELECT count(*) FROM critiques c WHERE {key} AND p_none IS NOT NULL AND response_hash = ?",
                     [*response, old.response_hash])[0][0]
    store.write([ResponseRow(dataset=old.dataset, query_id=old.query_id, model_id=old.model_id, run_id="t",
                             prompt_hash=old.prompt_hash, text="a regenerated answer", error=None)])
    _assert_fresh(db)
    assert current > 0 and _n(db, "dataset = ? AND model_id = ?", [response[0], response[2]]) == n_model - current

    # a response that failed on a rerun: neither its critiques nor its lexical scores count
    (errored,) = _fetch(db, "SELECT dataset, query_id, model_id FROM critiques WHERE critic_id = ? "
                            "AND p_none IS NOT NULL ORDER BY ALL LIMIT 1 OFFSET 5", [CRITIC])
    store.write([ResponseRow(dataset=errored[0], query_id=errored[1], model_id=errored[2], run_id="t",
                             prompt_hash=None, text=None, error="RateLimitError: 429")])
    _assert_fresh(db)

    # a deleted critique and new lexical scores
    (gone,) = _fetch(db, "SELECT dataset, query_id, model_id FROM critiques WHERE critic_id = ? "
                         "AND p_none IS NOT NULL ORDER BY ALL LIMIT 1 OFFSET 9", [CRITIC])
    before = _n(db, "critic_id = ?", [CRITIC])
    store.delete_where("critiques", f"{key} AND critic_id = ?", [*gone, CRITIC])
    _assert_fresh(db)
    assert _n(db, "critic_id = ?", [CRITIC]) == before - 1
    lexical = _row(LexicalRow, db, key, gone)
    lexical.meteor, lexical.rouge_l = 0.123456, 0.987654
    store.write([lexical])
    _assert_fresh(db)

    # a query filed under another language (and script): its critiques and lexical scores move with it
    query = _row(QueryRow, db, "dataset = ? AND query_id = ?", gone[:2])
    moving = _fetch(db, "SELECT count(*) FROM critiques c JOIN responses r USING (dataset, query_id, model_id) "
                        "WHERE c.dataset = ? AND c.query_id = ? AND c.p_none IS NOT NULL AND r.error IS NULL "
                        "AND r.response_hash = c.response_hash", gone[:2])[0][0]
    query.language, query.script = "zz", "latin"
    store.write([query])
    _assert_fresh(db)
    assert moving > 0 and _n(db, "query_language = 'zz'") == moving
    assert _fetch(db, "SELECT count(*) FROM lexical_groups WHERE query_language = 'zz'")[0][0] > 0
    _assert_same_views(db, monkeypatch, [Filters(), Filters(languages=("zz",)), Filters(dataset="synthetic")])


def test_an_older_file_without_the_groups_reads_the_critiques(synthetic_db, copy_db, monkeypatch):
    db = copy_db(synthetic_db)
    expected = medcode.medcode_view(db, Filters())
    con = duckdb.connect(str(db))
    for table in GROUPS:
        con.execute(f"DROP TABLE {table}")
    con.close()
    got = medcode.medcode_view(db, Filters())
    for name in expected:
        pd.testing.assert_frame_equal(expected[name], got[name], check_exact=False, rtol=1e-12, atol=1e-12)


def test_the_correlations_sample_is_the_fixed_one(varied_db, monkeypatch):
    """The CORRELATION_ITEMS critiques of the smallest hash(dataset, query, model) in scope (current or not; of
    those the current count), whether the groups' hash buckets narrow the sort or not: the same table."""
    monkeypatch.setattr(medcode, "CORRELATION_ITEMS", 25)
    for f in (Filters(), Filters(dataset="synthetic"), Filters(themes=("cultural",)),
              Filters(models=("openai/gpt-4o",), languages=("hi",))):
        corr = medcode.medcode_correlations(varied_db, f, "openai/gpt-4o")
        pred, params = f.sql(r="c")
        sample = _fetch(varied_db, f"SELECT c.model_id, c.p_none FROM critiques c JOIN queries q USING "
                                   f"(dataset, query_id) WHERE c.p_none IS NOT NULL AND c.critic_id = ? AND {pred} "
                                   "ORDER BY hash(c.dataset, c.query_id, c.model_id) LIMIT 25", [CRITIC, *params])
        assert corr.attrs["critic"] == CRITIC
        keys = _fetch(varied_db, f"SELECT c.dataset, c.query_id, c.model_id, c.response_hash FROM critiques c "
                                 f"JOIN queries q USING (dataset, query_id) WHERE c.p_none IS NOT NULL AND "
                                 f"c.critic_id = ? AND {pred} ORDER BY hash(c.dataset, c.query_id, c.model_id) "
                                 "LIMIT 25", [CRITIC, *params])
        current = [k for k in keys if _fetch(varied_db, "SELECT count(*) FROM responses WHERE dataset = ? AND "
                                         "query_id = ? AND model_id = ? AND response_hash = ? AND error IS NULL",
                                         k)[0][0]]
        assert len(sample) == len(keys) and corr.attrs["items"] == len(current)
        pooled = corr[(corr.model == medcode.POOLED) & (corr.score == "meteor") & (corr.quantity == "p_none")]
        assert len(pooled) == 1 and np.isfinite(pooled.n.iloc[0])
        with monkeypatch.context() as m:  # the same table from the tables' definitions (no groups, no buckets)
            m.setattr(medcode, "_present", lambda have, *tables: False)
            rows = medcode.medcode_correlations(varied_db, f, "openai/gpt-4o")
        pd.testing.assert_frame_equal(corr, rows, check_exact=False, rtol=1e-9, atol=1e-12)
        assert corr.attrs == rows.attrs
    con = duckdb.connect(str(varied_db), read_only=True)
    try:
        assert medcode._last_bucket(con, Filters(), CRITIC) is not None
        monkeypatch.setattr(medcode, "CORRELATION_ITEMS", 10**6)  # more than there are: no bucket, every critique
        assert medcode._last_bucket(con, Filters(), CRITIC) is None
    finally:
        con.close()
    assert medcode.medcode_correlations(varied_db, Filters(), "openai/gpt-4o").attrs["items"] == _fetch(
        varied_db, "SELECT count(*) FROM critiques c JOIN responses r USING (dataset, query_id, model_id, "
                   "response_hash) WHERE c.p_none IS NOT NULL AND c.critic_id = ? AND r.error IS NULL", [CRITIC])[0][0]
