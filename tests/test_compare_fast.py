"""Compare runs reads lean (scores, flags and text hashes per side; texts, queries and chunks only of the items
shown) and pairs in Arrow: the same results as the straightforward read it replaced — every response row of both
sides in pandas, texts compared, the whole dataset's queries merged — kept here as the reference, on two files
(a second run), two models, two judges, every model, empty sides and sides of different datasets and files."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

from pipeline.metrics import METRICS
from pipeline.read.common import current_hash
from pipeline.read.compare import (
    CHANGED_COLUMNS,
    LEXICAL,
    MEDCODE,
    PROVENANCE_COLUMNS,
    RUBRIC,
    Side,
    _cell,
    compare,
    config_diff,
    metric_table,
    with_agg,
)
from pipeline.read.responses import has_table
from pipeline.store import SHARED_READERS, Store, derived_models
from pipeline.store import writer as store_writer
from tests.test_compare_review import JUDGE, SECOND, _second_run

W = (0.4, 0.3, 0.15, 0.15)


# -- the reference: the read before it was made lean ----------------------------------------------------------
def reference_side_rows(side: Side) -> dict[str, pd.DataFrame]:
    """A side's items — ``rows``: per response (``query_id``, ``model_id``, ``language``, ``text``, ``error``,
    ``prompt_hash``, ``run_id``) its current scores (registry metrics of the side's judge, lexical, Med-CoDE
    P(High) averaged over critics, the rubric score of the dataset's first grader); ``retrievals`` of its queries
    (``chunks`` = raw then update ids, ``settings``); ``runs`` its responses came from; ``dataset`` its row."""
    model_pred = "AND r.model_id = ?" if side.model else ""
    with SHARED_READERS.cursor(side.db) as con:
        rubric = has_table(con, "rubric_items")
        grader = con.execute("SELECT grader_id FROM rubric_items WHERE dataset = ? GROUP BY grader_id "
                             "ORDER BY count(*) DESC, grader_id LIMIT 1", [side.dataset]).fetchone() if rubric else None
        joins = ("LEFT JOIN item_scores i ON i.dataset = r.dataset AND i.query_id = r.query_id "
                 "AND i.model_id = r.model_id AND i.judge_id = ? "
                 "LEFT JOIN response_facts f ON f.dataset = r.dataset AND f.query_id = r.query_id "
                 "AND f.model_id = r.model_id "
                 "LEFT JOIN (SELECT query_id, model_id, response_hash, avg(p_high) AS p_high FROM critiques "
                 "WHERE dataset = ? AND p_high IS NOT NULL GROUP BY ALL) c ON c.query_id = r.query_id "
                 f"AND c.model_id = r.model_id AND c.response_hash = {current_hash(side.db, 'r')} AND r.error IS NULL ")
        params: list[Any] = [side.judge or "", side.dataset]
        rubric_col = "NULL::DOUBLE"
        if grader:
            joins += ("LEFT JOIN rubric_items ri ON ri.dataset = r.dataset AND ri.query_id = r.query_id "
                      "AND ri.model_id = r.model_id AND ri.grader_id = ? ")
            params.append(grader[0])
            rubric_col = "ri.score"
        rows = con.execute(
            "SELECT r.query_id, r.model_id, q.language, r.text, r.error, r.prompt_hash, r.run_id, "
            + ", ".join(f"i.{m}" for m in METRICS) + ", " + ", ".join(f"f.{c}" for c in LEXICAL)
            + f", c.p_high, {rubric_col} AS {RUBRIC} FROM responses r JOIN queries q ON q.dataset = r.dataset "
            f"AND q.query_id = r.query_id {joins}WHERE r.dataset = ? {model_pred} ORDER BY r.query_id, r.model_id",
            [*params, side.dataset, *([side.model] if side.model else [])]).df()
        retrievals = con.execute("SELECT query_id, list_concat(raw_ids, update_ids) AS chunks, settings "
                                 "FROM retrievals WHERE dataset = ?", [side.dataset]).df()
        runs = con.execute("SELECT run_id, name, started_at, config, config_hash, code_revision, model_files "
                           "FROM runs WHERE run_id IN (SELECT DISTINCT run_id FROM responses WHERE dataset = ?)",
                           [side.dataset]).df()
        dataset = con.execute("SELECT name, path, content_hash, n_queries, n_chunks FROM datasets WHERE name = ?",
                              [side.dataset]).df()
    failed = rows["error"].notna()
    for col in (*METRICS, *LEXICAL, MEDCODE, RUBRIC):
        rows[col] = rows[col].astype(float).where(~failed)  # an errored response has no score
    return {"rows": rows, "retrievals": retrievals, "runs": runs, "dataset": dataset,
            "grader": grader[0] if grader else None}


def _reference_runs_of(rows: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.Series | None, str | None]:
    """The latest run (by start) that wrote any of ``rows``' responses, and every such run with its count."""
    counts = Counter(r for r in rows["run_id"] if isinstance(r, str))
    known = runs[runs.run_id.isin(list(counts))].sort_values("started_at")
    listed = ", ".join(f"{r} ({n})" for r, n in counts.most_common(5)) + (" …" if len(counts) > 5 else "")
    return (known.iloc[-1] if len(known) else None), (listed or None)


def reference_provenance(a: Side, b: Side, sa: dict[str, Any], sb: dict[str, Any], pairs: pd.DataFrame) -> pd.DataFrame:
    """What differs between the sides, each fact taken from the reference's own rows: database, dataset (and its
    content hash), model, judge, rubric grader, the runs their shared responses came from and, of the latest of
    them, the config keys that differ, code revision, config hash and model files; the retrieval settings of the
    shared queries, and how many shared items differ in prompt hash, retrieved chunks and response text. A fact
    differs when its two cells do; a count differs when it is not zero."""
    runs = [_reference_runs_of(pairs.rename(columns={f"run_id_{s}": "run_id"}), side["runs"])
            for s, side in (("a", sa), ("b", sb))]
    latest = [run for run, _ in runs]

    def of_latest(field: str) -> tuple[Any, Any]:
        return tuple(None if run is None else str(run[field]) for run in latest)

    def column(run: pd.Series | None, field: str) -> Any:
        return None if run is None else run[field]

    shared = set(pairs["query_id"])
    settings = [" | ".join(sorted(set(s["retrievals"][s["retrievals"].query_id.isin(shared)].settings))) or None
                for s in (sa, sb)]
    facts: dict[str, tuple[Any, Any]] = {
        "database": (a.db, b.db), "dataset": (a.dataset, b.dataset),
        "dataset content hash": tuple(s["dataset"].content_hash.iloc[0] if len(s["dataset"]) else None
                                      for s in (sa, sb)),
        "model": (a.model or "every model", b.model or "every model"), "judge": (a.judge, b.judge),
        "rubric grader": (sa["grader"], sb["grader"]),
        "runs that wrote the responses (count)": (runs[0][1], runs[1][1]),
        "latest of those runs": tuple(None if run is None else f"{run.run_id} ({run['name']})" for run in latest),
        "run started at": of_latest("started_at"), "run code revision": of_latest("code_revision"),
        "run config hash": of_latest("config_hash"),
        **{f"config: {key}": (va, vb) for key, va, vb in config_diff(column(latest[0], "config"),
                                                                     column(latest[1], "config"))},
        **{f"model file: {key}": (va, vb) for key, va, vb in config_diff(column(latest[0], "model_files"),
                                                                         column(latest[1], "model_files"))},
        "retrieval settings": (settings[0], settings[1]),
    }
    chunks = [dict(zip(s["retrievals"].query_id, (list(c) for c in s["retrievals"].chunks), strict=True))
              for s in (sa, sb)]
    counts = {"queries whose retrieved chunks differ": (sum(chunks[0].get(q) != chunks[1].get(q) for q in shared),
                                                        len(shared)),
              "items whose prompt hash differs": (int((pairs.prompt_hash_a != pairs.prompt_hash_b).sum()), len(pairs)),
              "items whose response text differs": (int(pairs.text_changed.sum()), len(pairs))}
    rows = [(what, _cell(x), _cell(y), _cell(x) != _cell(y)) for what, (x, y) in facts.items()]
    rows += [(what, f"{k} of {total}", f"{k} of {total}", k > 0) for what, (k, total) in counts.items()]
    return pd.DataFrame(rows, columns=PROVENANCE_COLUMNS[:4])


def reference_compare(a: Side, b: Side, weights: tuple[float, ...], *, metric: str = "AGG",
                      n_changed: int = 10) -> dict:
    """Two sides compared (module docstring): ``metrics`` (``METRIC_COLUMNS``), ``changed`` (the ``n_changed``
    pairs whose ``metric`` moved most — then those whose text changed — with both texts and scores and both
    sides' chunk ids), ``provenance`` (``PROVENANCE_COLUMNS``), ``pairs`` (shared items), ``metric`` used,
    ``same`` (True when both sides are the same rows) and ``graders``."""
    same = a == b
    if (a.model is None) != (b.model is None):
        raise ValueError("both sides take one model each, or both take every model")
    sa, sb = reference_side_rows(a), reference_side_rows(b)
    keys = ["query_id"] if a.model else ["query_id", "model_id"]
    ra, rb = with_agg(sa["rows"], weights), with_agg(sb["rows"], weights)
    pairs = ra.merge(rb, on=keys, suffixes=("_a", "_b"))
    if a.model:
        pairs = pairs.rename(columns={"model_id_a": "model_id"})
    pairs["language"] = pairs["language_a"]
    pairs["text_changed"] = pairs["text_a"].fillna("\0") != pairs["text_b"].fillna("\0")
    metrics = [*METRICS, "AGG", *LEXICAL, MEDCODE, RUBRIC]
    table = metric_table(pairs, metrics)
    if metric not in set(table.metric):
        metric = next(iter(table.metric), "AGG")
    with SHARED_READERS.cursor(a.db) as con:
        queries = con.execute("SELECT query_id, query, query_en, gt_response FROM queries "
                              "WHERE dataset = ?", [a.dataset]).df()
    chunks = [dict(zip(s["retrievals"].query_id, (list(c) for c in s["retrievals"].chunks), strict=True))
              for s in (sa, sb)]
    ranked = pairs.assign(score_a=pairs.get(f"{metric}_a"), score_b=pairs.get(f"{metric}_b"))
    ranked["diff"] = ranked["score_b"] - ranked["score_a"]
    ranked["moved"] = ranked["diff"].abs().fillna(-1.0)
    ranked = ranked.sort_values(["moved", "text_changed", *keys], ascending=[False, False, *([True] * len(keys))])
    top = ranked[(ranked["moved"] > 0) | ranked["text_changed"]].head(n_changed).merge(queries, on="query_id",
                                                                                     how="left")
    top["chunks_a"] = [chunks[0].get(q, []) for q in top.query_id]
    top["chunks_b"] = [chunks[1].get(q, []) for q in top.query_id]
    return {"metrics": table, "changed": top[CHANGED_COLUMNS].reset_index(drop=True),
            "provenance": reference_provenance(a, b, sa, sb, pairs), "pairs": len(pairs), "metric": metric,
            "same": same, "only_a": len(ra) - len(pairs), "only_b": len(rb) - len(pairs)}


# -- the cases -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["as written", "clustered", "without the by-model table"])
def dbs(synthetic_db: Path, jury_db: Path, tmp_path_factory: pytest.TempPathFactory,
        request: pytest.FixtureRequest) -> dict[str, str]:
    """The synthetic database, a copy as a second run left it (6 of gpt-4o's answers rewritten) and the jury one:
    as the writer left them; clustered (every table in key order, ``model_items`` by model, as ``pipeline cluster``
    leaves a large file); and as an older file without ``model_items`` (``derived_models``), which Compare runs
    reads from the per-query tables instead."""
    folder = tmp_path_factory.mktemp("compare-fast")
    a = folder / "a.duckdb"
    shutil.copy(synthetic_db, a)
    _second_run(a, folder / "b.duckdb", "openai/gpt-4o", 6)
    shutil.copy(jury_db, folder / "jury.duckdb")
    out = {"a": str(a), "b": str(folder / "b.duckdb"), "jury": str(folder / "jury.duckdb")}
    for db in out.values():
        if request.param == "clustered":
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(store_writer, "ROW_GROUP_ROWS", 0)  # the fixtures' tables fit one row group each
                assert "model_items" in Store(db).cluster()
        elif request.param == "without the by-model table":
            with duckdb.connect(db) as con:
                for table in derived_models.DERIVED:
                    con.execute(f"DROP TABLE {table.name}")
    return out


def same_frame(got: pd.DataFrame, want: pd.DataFrame, what: str) -> None:
    assert list(got.columns) == list(want.columns), what
    assert list(got.index) == list(want.index), what
    for column in want.columns:
        g, w = got[column], want[column]
        assert str(g.dtype) == str(w.dtype), (what, column, g.dtype, w.dtype)
        for i, (x, y) in enumerate(zip(g, w, strict=True)):
            if isinstance(y, float) and isinstance(x, float):
                assert (np.isnan(x) and np.isnan(y)) or abs(x - y) <= 1e-12, (what, column, i, x, y)
            elif isinstance(y, list):
                assert x == y, (what, column, i, x, y)
            else:
                assert (pd.isna(x) and pd.isna(y)) if pd.isna(y) is True else x == y, (what, column, i, x, y)


def same_result(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, pd.DataFrame):
            same_frame(got[key], value, key)
        else:
            assert got[key] == value and type(got[key]) is type(value), key


CASES = {
    "two files": (("a", "openai/gpt-4o", JUDGE), ("b", "openai/gpt-4o", JUDGE), {"metric": "FC", "n_changed": 20}),
    "two files, B first": (("b", "openai/gpt-4o", JUDGE), ("a", "openai/gpt-4o", JUDGE), {"metric": "rubric"}),
    "two models": (("a", "openai/gpt-4o", JUDGE), ("a", "openai/gpt-4", JUDGE), {}),
    "two models, Med-CoDE": (("a", "openai/gpt-4o", JUDGE), ("a", "openai/gpt-4", JUDGE),
                             {"metric": MEDCODE, "n_changed": 50}),
    "the same side": (("a", "openai/gpt-4o", JUDGE), ("a", "openai/gpt-4o", JUDGE), {}),
    "no judge": (("a", "openai/gpt-4o", None), ("a", "openai/gpt-4", None), {}),
    "every model, two files": (("a", None, JUDGE), ("b", None, JUDGE), {"n_changed": 30}),
    "every model, the same": (("a", None, JUDGE), ("a", None, JUDGE), {"metric": "COH"}),
    "a metric no side has": (("a", "openai/gpt-4o", JUDGE), ("b", "openai/gpt-4o", JUDGE), {"metric": "nope"}),
    "B empty": (("a", "openai/gpt-4o", JUDGE), ("a", "no/such-model", JUDGE), {}),
    "A empty": (("a", "no/such-model", JUDGE), ("a", "openai/gpt-4o", JUDGE), {}),
    "both empty": (("a", "no/such-model", JUDGE), ("b", "no/other", JUDGE), {}),
    "every model, A's dataset missing": (("a", None, JUDGE), ("b", None, JUDGE), {"dataset_a": "nods"}),
    "two judges (a jury)": (("jury", "first", "first-judge"), ("jury", "second", "last-judge"), {"n_changed": 15}),
    "every model, two judges": (("jury", None, "first-judge"), ("jury", None, "last-judge"), {}),
    "every model, other file and dataset size": (("a", None, JUDGE), ("jury", None, JUDGE), {"n_changed": 12}),
    "other file, other model": (("jury", "first", "first-judge"), ("a", "openai/gpt-4o", JUDGE), {}),
}


def _resolve(dbs: dict[str, str], spec: tuple, dataset: str = "synthetic") -> Side:
    db, model, judge = spec
    if db == "jury":
        with SHARED_READERS.cursor(dbs[db]) as con:
            models = [m for (m,) in con.execute("SELECT DISTINCT model_id FROM responses ORDER BY 1").fetchall()]
            judges = [j for (j,) in con.execute("SELECT DISTINCT judge_id FROM item_scores ORDER BY 1").fetchall()]
        model = {"first": models[0], "second": models[1]}.get(model, model)
        judge = {"first-judge": judges[0], "last-judge": judges[-1]}.get(judge, judge)
    return Side(dbs[db], dataset, model, judge)


@pytest.mark.parametrize("case", list(CASES))
def test_compare_gives_what_the_full_read_gave(dbs: dict[str, str], case: str) -> None:
    spec_a, spec_b, kw = CASES[case]
    kw = dict(kw)
    a, b = _resolve(dbs, spec_a, kw.pop("dataset_a", "synthetic")), _resolve(dbs, spec_b)
    got, want = compare(a, b, W, **kw), reference_compare(a, b, W, **kw)
    same_result(got, want)
    assert list(got["changed"].columns) == CHANGED_COLUMNS and list(got["provenance"].columns) == PROVENANCE_COLUMNS


def test_a_judge_without_scores_and_the_errors(dbs: dict[str, str]) -> None:
    a = Side(dbs["a"], "synthetic", "openai/gpt-4o", JUDGE)
    with pytest.raises(ValueError, match="must not all be zero"):
        compare(a, Side(dbs["b"], "synthetic", "openai/gpt-4o", JUDGE), (0.0, 0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="both sides"):
        compare(a, Side(dbs["a"], "synthetic", None, JUDGE), W)
    # a judge without scores on this file: every registry metric is missing on B, the others are still paired
    result = compare(a, Side(dbs["a"], "synthetic", "openai/gpt-4o", SECOND), W, metric="FC")
    same_result(result, reference_compare(a, Side(dbs["a"], "synthetic", "openai/gpt-4o", SECOND), W, metric="FC"))
    assert set(result["metrics"].metric) >= {*LEXICAL, MEDCODE} and "FC" not in set(
        result["metrics"].query("n > 0").metric)


def test_a_hash_collision_falls_back_to_the_ids():
    """Sources are looked up by their key's hash and checked against the ids: rows whose hashes collide are matched
    by the ids themselves (here every row hashes alike; only 'b' is in the source)."""
    import pyarrow as pa

    from pipeline.read.compare import _lookup

    r = pa.table({"query_id": ["a", "b", "c"], "k": pa.array([7, 7, 9], pa.uint64())})
    assert _lookup(r, r, "k", ["query_id"]).to_pylist() == [0, 1, 2]  # 'b' found as itself, not as 'a' (same hash)
    t = pa.table({"query_id": ["b"], "k": pa.array([7], pa.uint64())})
    assert _lookup(r, t, "k", ["query_id"]).to_pylist() == [None, 0, None]
    t = pa.table({"query_id": ["c", "a"], "k": pa.array([9, 7], pa.uint64())})  # 'b' hashes like 'a'
    assert _lookup(r, t, "k", ["query_id"]).to_pylist() == [1, None, 0]


# -- cells and config differences written by hand (the reference above formats with the module's own) ----------
@pytest.mark.parametrize(("value", "cell"), [
    (None, "–"), (float("nan"), "–"), ("split", "split"), ("", ""), (3, "3"), (0.5, "0.5"), (True, "true"),
    (["a", 1], '["a", 1]'), ({"k": None}, '{"k": null}'),
])
def test_a_provenance_cell(value: Any, cell: str) -> None:
    assert _cell(value) == cell


def test_the_paired_interval_is_the_bootstrap_of_the_differences() -> None:
    """``paired_ci`` against a plain percentile bootstrap written here (numpy, 20,000 resamples of the differences):
    the reference above computes its intervals with the module's own function, so this is what checks them."""
    from pipeline.read.compare import paired_ci

    rng = np.random.default_rng(7)
    diffs = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=120, p=[0.1, 0.15, 0.3, 0.25, 0.2])
    means = rng.choice(diffs, size=(20_000, diffs.size)).mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert paired_ci(diffs) == (pytest.approx(lo, abs=0.012), pytest.approx(hi, abs=0.012))
    assert np.isnan(paired_ci(np.array([0.5]))).all()  # one pair: no interval


def test_config_diff_lists_the_dotted_keys_that_differ() -> None:
    a = json.dumps({"name": "first", "db": "a.duckdb", "retrieval": {"top_k": 3, "split": "separate"},
                    "models": [{"id": "m1", "max_tokens": 10}, {"id": "m2"}]})
    b = json.dumps({"name": "second", "db": "b.duckdb", "retrieval": {"top_k": 5, "split": "separate"},
                    "models": [{"id": "m1", "max_tokens": 20}], "concurrency": 4})
    assert config_diff(a, b) == [("concurrency", None, 4), ("models", "m1, m2", "m1"),
                                 ("models.m1.max_tokens", 10, 20), ("retrieval.top_k", 3, 5)]
    assert config_diff(a, a) == [] and config_diff(None, None) == []
    assert config_diff("not JSON", '{"seed": 1}') == [("seed", None, 1)]  # an unreadable config: nothing known


def test_the_provenance_of_a_second_run_written_out(dbs: dict[str, str]) -> None:
    """Two files, gpt-4o on both: B is A with 6 answers rewritten by run-b (test_compare_review._second_run)."""
    with SHARED_READERS.cursor(dbs["a"]) as con:
        (n,) = con.execute("SELECT count(*) FROM responses WHERE model_id = 'openai/gpt-4o'").fetchone()
    a, b = Side(dbs["a"], "synthetic", "openai/gpt-4o", JUDGE), Side(dbs["b"], "synthetic", "openai/gpt-4o", JUDGE)
    shown = compare(a, b, W)["provenance"].set_index("what")
    expected = {  # what: (A, B, differs)
        "database": (dbs["a"], dbs["b"], True),
        "dataset": ("synthetic", "synthetic", False),
        "model": ("openai/gpt-4o", "openai/gpt-4o", False),
        "judge": (JUDGE, JUDGE, False),
        "items whose prompt hash differs": (f"6 of {n}", f"6 of {n}", True),
        "items whose response text differs": (f"6 of {n}", f"6 of {n}", True),
        "queries whose retrieved chunks differ": (f"0 of {n}", f"0 of {n}", False),
    }
    for what, (cell_a, cell_b, differs) in expected.items():
        assert tuple(shown.loc[what, ["A", "B"]]) == (cell_a, cell_b), what
        assert bool(shown.loc[what, "differs"]) is differs, what
    assert shown.loc["latest of those runs", "B"] == "run-b (second)"
    assert shown.loc["run code revision", "B"] == "rev-b" and shown.loc["run config hash", "B"] == "h-b"
    assert shown.loc["config: retrieval.split", "B"] == "separate"


def test_an_answer_without_text_or_error_on_one_side(dbs: dict[str, str], tmp_path: Path) -> None:
    """Whether a side's answer has a text is read from its stored hash (NULL exactly when the text is): B is a copy
    of A where two of gpt-4o's answers have no text and no error (an empty completion), and the comparison is what
    the full read, which reads the texts, gives."""
    from pipeline.store import Store
    from pipeline.store.rows import ResponseRow

    b = tmp_path / "b.duckdb"
    shutil.copy(dbs["a"], b)
    with SHARED_READERS.cursor(str(b)) as con:
        qids = [q for (q,) in con.execute("SELECT query_id FROM responses WHERE model_id = 'openai/gpt-4o' "
                                          "AND error IS NULL ORDER BY query_id LIMIT 2").fetchall()]
    Store(b).write([ResponseRow(dataset="synthetic", query_id=q, model_id="openai/gpt-4o", run_id="run-b",
                                prompt_hash="p-b", text=None, error=None) for q in qids])
    a, side_b = Side(dbs["a"], "synthetic", "openai/gpt-4o", JUDGE), Side(str(b), "synthetic", "openai/gpt-4o", JUDGE)
    got = compare(a, side_b, W, n_changed=5)
    same_result(got, reference_compare(a, side_b, W, n_changed=5))
    shown = got["provenance"].set_index("what")
    assert shown.loc["items whose response text differs", "A"].startswith("2 of ")
    assert set(qids) <= set(got["changed"].query_id) and got["changed"].text_b.isna().sum() >= 2


def test_two_critics_of_a_text_are_averaged(dbs: dict[str, str], tmp_path: Path) -> None:
    """Critiques are read as stored when each text has one critic; a second critic of some texts makes Med-CoDE's
    P(High) their mean, as the full read averages it (and a critique of an older text is not the current one's)."""
    from pipeline.store import Store
    from pipeline.store.rows import CritiqueRow

    db = tmp_path / "critics.duckdb"
    shutil.copy(dbs["a"], db)
    with SHARED_READERS.cursor(str(db)) as con:
        rows = con.execute("SELECT query_id, model_id, response_hash, p_high FROM critiques WHERE model_id = "
                           "'openai/gpt-4o' AND p_high IS NOT NULL ORDER BY query_id LIMIT 4").fetchall()
    Store(db).write([CritiqueRow(dataset="synthetic", query_id=q, model_id=m, critic_id="second-critic",
                                 classifier="trained", critique="", p_none=0.1, p_low=0.2, p_moderate=0.3,
                                 p_high=(p + 0.37) % 1, label="High", run_id=None,
                                 response_hash=h if i < 3 else "an-older-text")
                     for i, (q, m, h, p) in enumerate(rows)])
    a, b = Side(str(db), "synthetic", "openai/gpt-4o", JUDGE), Side(str(db), "synthetic", "openai/gpt-4", JUDGE)
    got = compare(a, b, W, metric=MEDCODE, n_changed=20)
    same_result(got, reference_compare(a, b, W, metric=MEDCODE, n_changed=20))
    alone = compare(Side(dbs["a"], "synthetic", "openai/gpt-4o", JUDGE), Side(dbs["a"], "synthetic", "openai/gpt-4",
                                                                             JUDGE), W, metric=MEDCODE)
    assert got["metrics"].set_index("metric").loc[MEDCODE, "mean_a"] != alone["metrics"].set_index(
        "metric").loc[MEDCODE, "mean_a"]
