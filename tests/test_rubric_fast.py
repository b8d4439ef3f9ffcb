"""The rubric views' fast path: the store's per-item tables (``rubric_items``, ``rubric_tag_items``) and the
histogram-free statistics give exactly HealthBench's scores (``pipeline.analysis.rubric``), follow every write
that changes what counts, and their intervals are at least as close to the bootstrap's as 1,000 resamples."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from pipeline.analysis.rubric import (
    RUBRIC_EXPANSION_MIN_N,
    clipped_stats,
    clipped_stats_moments,
    item_scores,
    needs_histogram,
    tag_breakdown,
)
from pipeline.read import rubric as rr
from pipeline.store import DERIVED, Store
from pipeline.store.derived_rubric import DERIVED as RUBRIC_TABLES
from pipeline.store.rows import QueryRow, ResponseRow

REPO = Path(__file__).resolve().parent.parent
GRADER = "openai/gpt-4.1"
DERIVED_TABLES = tuple(d.name for d in RUBRIC_TABLES)


@pytest.fixture(scope="module")
def rubric_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench/generate_db.py at 5 % scale, 6 models, rubrics on 30 queries (10 criteria, 2 harmful)."""
    db = tmp_path_factory.mktemp("rubric-fast") / "rubric.duckdb"
    subprocess.run([sys.executable, str(REPO / "bench" / "generate_db.py"), "--scale", "0.05", "--models", "6",
                    "--rubric-items", "30", "--out", str(db)], check=True, capture_output=True, cwd=REPO)
    return db


def _copy(db: Path, target: Path, *, drop_derived: bool = False) -> Path:
    shutil.copy(db, target)
    if drop_derived:
        with duckdb.connect(str(target)) as con:
            for table in DERIVED_TABLES:
                con.execute(f"DROP TABLE {table}")
    return target


def _rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def _recomputed(db: Path, table: str) -> list[tuple]:
    """The derived table as its SELECT computes it from scratch."""
    return _rows(db, DERIVED[table].definition() + " ORDER BY ALL")


def test_fast_path_is_healthbench_s_scoring(rubric_db: Path) -> None:
    board = rr.rubric_leaderboard(rubric_db, "synthetic", GRADER)
    tags = rr.rubric_tags(rubric_db, "synthetic", GRADER)
    grades = rr.grades_frame(rubric_db, "synthetic", GRADER)
    assert rr.derived(rubric_db) and len(grades) > 1000 and grades["criteria_met"].isna().any()
    overall = board[board.language == rr.ALL_LANGUAGES].set_index("model_id")
    assert len(overall) == 6
    for model, rows in grades.groupby("model_id"):
        scores = item_scores(rows)
        reference = clipped_stats(scores.to_numpy(), n_bootstrap=20_000)
        mine = overall.loc[model]
        assert mine.score == pytest.approx(reference["mean"], abs=1e-12)
        assert (mine.n_items, mine.n_scored) == (len(scores), scores.notna().sum())
        assert mine.n_unparsed == int(rows.criteria_met.isna().sum())
        # the interval and HealthBench's std: as close as 20,000 resamples tell (they differ by their own noise)
        assert mine.ci_lo == pytest.approx(reference["ci_lo"], abs=0.02)
        assert mine.ci_hi == pytest.approx(reference["ci_hi"], abs=0.02)
        assert mine.bootstrap_std == pytest.approx(reference["bootstrap_std"], rel=0.1)
        table = tag_breakdown(rows, n_bootstrap=200)
        fast = tags[tags.model_id == model].set_index("tag")
        assert set(fast.index) == set(table.index)
        np.testing.assert_allclose(fast.loc[table.index, "score"], table["score"], atol=1e-12)
        assert (fast.loc[table.index, "n_samples"] == table["n_samples"]).all()
        assert (fast.loc[table.index, "kind"] == table["kind"]).all()


def test_fast_path_equals_the_reading_of_the_grades_themselves(rubric_db: Path, tmp_path: Path) -> None:
    """A file without the per-item tables is read from rubric_grades (the older path): the same figures."""
    old = _copy(rubric_db, tmp_path / "old.duckdb", drop_derived=True)
    assert not rr.derived(old)
    fast, slow = (rr.rubric_leaderboard(db, "synthetic", GRADER) for db in (rubric_db, old))
    exact = [c for c in fast.columns if c not in ("ci_lo", "ci_hi", "bootstrap_std")]
    pd.testing.assert_frame_equal(fast[exact], slow[exact], check_dtype=False, atol=1e-12)
    # resampled groups: SQL and numpy may bin a score on a rounding edge apart
    pd.testing.assert_frame_equal(fast, slow, check_dtype=False, atol=1e-3)
    sums = [rr.item_sums(db, "synthetic", GRADER).set_index(["model_id", "query_id"]).sort_index()
            for db in (rubric_db, old)]
    pd.testing.assert_frame_equal(sums[0], sums[1], check_dtype=False)
    # an older file gains the tables on its next write (upgrade), filled
    Store(old).upgrade()
    assert rr.derived(old)
    for table in DERIVED_TABLES:
        assert _rows(old, f"SELECT * FROM {table} ORDER BY ALL") == _recomputed(rubric_db, table) != []


def test_writes_keep_the_per_item_tables_in_step(rubric_db: Path, tmp_path: Path) -> None:
    db = _copy(rubric_db, tmp_path / "edited.duckdb")
    qid, model = _rows(db, "SELECT query_id, model_id FROM rubric_items WHERE score IS NOT NULL "
                           "ORDER BY query_id, model_id LIMIT 1")[0]
    other = _rows(db, f"SELECT query_id FROM rubric_items WHERE query_id <> '{qid}' ORDER BY query_id LIMIT 1")[0][0]
    store = Store(db)
    # a regenerated response: its grades are stale, the item leaves the board
    store.write([ResponseRow(dataset="synthetic", query_id=qid, model_id=model, run_id="t", prompt_hash="p",
                             text="A new answer.", error=None)])
    assert _rows(db, f"SELECT count(*) FROM rubric_items WHERE query_id = '{qid}' AND model_id = '{model}'") == [(0,)]
    # a changed criterion (points): its grades no longer count, every item of the query loses its score
    (row,) = _rows(db, f"SELECT rubric FROM queries WHERE dataset = 'synthetic' AND query_id = '{other}'")
    rubric = json.loads(row[0])
    rubric[0]["points"] = rubric[0]["points"] + 1
    query = QueryRow(**{**dict(zip([c[0] for c in duckdb.connect(str(db), read_only=True).execute(
        "DESCRIBE queries").fetchall()], _rows(db, f"SELECT * FROM queries WHERE query_id = '{other}'")[0],
        strict=True)), "rubric": json.dumps(rubric)})
    store.write([query])
    assert _rows(db, f"SELECT count(score), min(ungraded) FROM rubric_items WHERE query_id = '{other}'") == [(0, 1)]
    for table in DERIVED_TABLES:
        assert _rows(db, f"SELECT * FROM {table} ORDER BY ALL") == _recomputed(db, table), table


def test_few_items_and_single_items_behave_as_clipped_stats() -> None:
    values = [0.3, -1.0, 1.0]
    sums = np.array([[sum(v**k for v in values) for k in range(1, 5)]])
    n, lo, hi = np.array([3]), np.array([-1.0]), np.array([1.0])
    assert needs_histogram(n, sums, lo, hi).all()
    with pytest.raises(ValueError, match="need their histogram"):
        clipped_stats_moments(n, sums, lo, hi)
    hist = (np.zeros(3, dtype=int), np.array(values), np.ones(3, dtype=int))
    fast = clipped_stats_moments(n, sums, lo, hi, hist, n_bootstrap=20_000)
    ref = clipped_stats(values, n_bootstrap=20_000)
    assert fast["mean"][0] == pytest.approx(ref["mean"]) == pytest.approx(0.1)
    assert fast["bootstrap_std"][0] == pytest.approx(ref["bootstrap_std"], rel=0.05)
    assert fast["ci_lo"][0] == 0.0 and fast["ci_hi"][0] == pytest.approx(ref["ci_hi"], abs=0.02)
    one = clipped_stats_moments(np.array([1, 0]), np.array([[1.3, 1.69, 2.197, 2.8561], [0, 0, 0, 0]]),
                                np.array([1.3, np.nan]), np.array([1.3, np.nan]))
    assert one["mean"][0] == 1.0 and one["bootstrap_std"][0] == 0.0 and np.isnan(one["ci_lo"][0])
    assert np.isnan(one["mean"][1]) and one["n_samples"].tolist() == [1, 0]


def test_the_expansion_beats_1000_resamples_from_30_rubric_scores() -> None:
    """RUBRIC_EXPANSION_MIN_N: on rubric-like item scores (10 criteria, 2 harmful: many distinct values in
    [−0.6, 1]) the interval from the moments is nearer the quantiles of 400,000 resamples than 1,000 are."""
    rng = np.random.default_rng(7)
    errors_expansion, errors_resampled = [], []
    for quality in (-0.5, 0.5, 1.5):
        points = np.array([5, 3, 8, 2, 6, 4, 7, 1, -4, -6], dtype=float)
        met = rng.random((RUBRIC_EXPANSION_MIN_N, 10)) < np.where(points > 0, 1 / (1 + np.exp(-quality)), 0.15)
        items = np.round(met @ points / points[points > 0].sum(), 2)
        sums = np.array([[np.sum(items**k) for k in range(1, 5)]])
        args = (np.array([len(items)]), sums, np.array([items.min()]), np.array([items.max()]))
        if needs_histogram(*args).any():
            continue  # a skewed sample is resampled anyway
        fast = clipped_stats_moments(*args)
        draws = items[rng.integers(0, len(items), size=(400_000, len(items)))].mean(axis=1)
        reference = np.quantile(np.clip(draws, 0, 1), [0.025, 0.975])
        few = np.quantile(np.clip(items[rng.integers(0, len(items), size=(1000, len(items)))].mean(axis=1), 0, 1),
                          [0.025, 0.975])
        scale = draws.std()
        errors_expansion.append(np.abs(np.array([fast["ci_lo"][0], fast["ci_hi"][0]]) - reference).max() / scale)
        errors_resampled.append(np.abs(few - reference).max() / scale)
    assert len(errors_expansion) >= 2
    assert np.mean(errors_expansion) < np.mean(errors_resampled)


def test_pair_agreement_is_scikit_learn_s_f1() -> None:
    from sklearn.metrics import f1_score

    from pipeline.analysis.rubric import pair_agreement

    rng = np.random.default_rng(3)
    for n in (5, 40, 300):
        grader, physician = rng.random(n) < 0.6, rng.random(n) < 0.5
        mine = pair_agreement(grader, physician)
        f1 = f1_score(physician, grader, labels=[False, True], average=None, zero_division=0.0)
        assert mine["f1_pos"] == pytest.approx(f1[1]) and mine["f1_neg"] == pytest.approx(f1[0])
        assert mine["macro_f1"] == pytest.approx(f1_score(physician, grader, average="macro"))
        assert mine["agreement"] == pytest.approx(np.mean(grader == physician))
    one_sided = pair_agreement(np.ones(4, dtype=bool), np.array([True, False, True, True]))
    assert np.isnan(one_sided["macro_f1"]) and one_sided["agreement"] == 0.75
