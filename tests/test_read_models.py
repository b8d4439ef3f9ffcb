"""The read models (pipeline/read) that the dashboard, the CLI and these tests share: current scores only,
the leaderboard's means, n and CIs, self-consistency, safety counts, agreement from a confusion table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from pipeline.analysis.agreement import weighted_kappa
from pipeline.analysis.stats import normalised_weights
from pipeline.dataset import load_dataset
from pipeline.metrics import DEFAULT_WEIGHTS, METRICS
from pipeline.read import agreement, common, home, judge_trust, medcode, themes
from pipeline.read import leaderboard as lb
from pipeline.read.common import Filters, weights_tuple
from pipeline.read.responses import Browse, browse_count, browse_view
from pipeline.store import Store
from pipeline.store.rows import JudgmentRow, ResponseRow, SafetyCheckRow, dataset_rows

REPO = Path(__file__).resolve().parent.parent
JUDGE = "openai/gpt-4o"


@pytest.fixture(scope="module")
def cataract():
    return load_dataset(REPO / "data" / "cataract")


def small_db(path: Path, cataract, responses: dict[tuple[str, str], str]) -> Store:
    """The cataract dataset and the given (query_id, model_id) → text responses, nothing scored."""
    store = Store(path)
    store.write(dataset_rows(cataract))
    store.write([ResponseRow(dataset="cataract", query_id=q, model_id=m, run_id="r", prompt_hash="h", text=text,
                             error=None) for (q, m), text in responses.items()])
    return store


def judgment(query_id: str, model_id: str, metric: str, sample: int, score: int | None, response_hash: str,
             judge: str = "j") -> JudgmentRow:
    return JudgmentRow(dataset="cataract", query_id=query_id, model_id=model_id, judge_id=judge, metric=metric,
                       sample=sample, score=score, parse_ok=score is not None, justification="",
                       raw_output="x", response_hash=response_hash, run_id="r")


# -- current scores only -----------------------------------------------------------------------------
def _one(frame: pd.DataFrame, **where) -> pd.Series:
    mask = np.logical_and.reduce([frame[k] == v for k, v in where.items()])
    return frame[mask].iloc[0]


def test_a_regenerated_response_loses_its_old_judgments_everywhere(synthetic_db, copy_db):
    db = copy_db(synthetic_db)
    con = duckdb.connect(str(db), read_only=True)
    dataset, qid, mid, language, theme = con.execute(
        "SELECT h.dataset, h.query_id, h.model_id, q.language, q.themes[1] FROM human_labels h "
        "JOIN item_scores i USING (dataset, query_id, model_id) JOIN queries q USING (dataset, query_id) "
        "JOIN critiques c USING (dataset, query_id, model_id) WHERE h.metric = 'SS' AND i.judge_id = ? "
        "AND i.SS IS NOT NULL AND len(q.themes) > 0 ORDER BY h.query_id LIMIT 1", [JUDGE]).fetchone()
    con.close()
    f = Filters(dataset=dataset)
    w = weights_tuple(DEFAULT_WEIGHTS)

    def views() -> dict:
        base = lb.leaderboard_base(db, f, JUDGE)
        board = lb.leaderboard(base, w, language)
        theme_rows = themes.theme_scores(db, f, JUDGE)
        examples = themes.theme_examples(db, f.with_(languages=(language,)), JUDGE, theme, 1000, 0)
        agree = agreement.agreement_view(db, f, JUDGE, "SS")["table"]
        judges = home.judge_summary(db)
        dist = medcode.medcode_view(db, f, JUDGE)["distribution"]
        return {"items": _one(board, model_id=mid)["items"], "n_SS": _one(board, model_id=mid)["n_SS"],
                "theme_n": _one(theme_rows, language=language, theme=theme, model_id=mid)["n"],
                "example_SS": _one(examples, query_id=qid, model_id=mid)["SS"],
                "pairs": _one(agree, language=language, model_id=mid)["n"],
                "judgments": _one(judges["judges"], dataset=dataset, judge_id=JUDGE)["judgments"],
                "critiques": dist[(dist.language == language) & (dist.model_id == mid)].n.sum(),
                "filtered": browse_count(db, Browse(f, judge=JUDGE, metric="SS", query_id=qid))}

    before = views()
    assert not np.isnan(before["example_SS"]) and before["filtered"] >= 1
    Store(db).write([ResponseRow(dataset=dataset, query_id=qid, model_id=mid, run_id="regen", prompt_hash="h2",
                                 text="A regenerated answer, never judged.", error=None)])
    after = views()
    assert after["items"] == before["items"] - 1 and after["n_SS"] == before["n_SS"] - 1  # leaderboard
    assert after["theme_n"] == before["theme_n"] - 1 and np.isnan(after["example_SS"])  # themes
    assert after["pairs"] == before["pairs"] - 1  # human vs LLM
    assert after["judgments"] < before["judgments"]  # home: judge summary
    assert after["critiques"] == before["critiques"] - 1  # Med-CoDE
    assert browse_count(db, Browse(f, judge=JUDGE, metric="SS", query_id=qid)) == before["filtered"] - 1
    page = browse_view(db, Browse(f, query_id=qid), 50, 0)  # the browser keeps the old judgments, marked
    old = page["details"]["judgments"]
    old = old[old.model_id == mid]
    assert len(old) and not old.current.any()
    assert len(page["details"]["safety"].query(f"model_id == '{mid}'")) == 0


def test_errored_and_stale_responses_never_count(tmp_path, cataract):
    text = "Current answer with ünïcode ✓"
    responses = {("en-001", "m"): text, ("hi-001", "m"): text, ("en-002", "m"): text}
    store = small_db(tmp_path / "r.duckdb", cataract, responses)
    current = ResponseRow(dataset="cataract", query_id="en-001", model_id="m", run_id="r", prompt_hash="h",
                          text=text, error=None).response_hash
    rows = []
    for q, rhash in (("en-001", current), ("hi-001", "stale"), ("en-002", current)):
        for i, m in enumerate(METRICS):
            for s in (0, 1):
                rows.append(judgment(q, "m", m, s, None if (m == METRICS[-1] and s == 1) else (i + s) % 3, rhash))
    store.write(rows)
    store.write([ResponseRow(dataset="cataract", query_id="en-002", model_id="m", run_id="r", prompt_hash="h",
                             text=text, error="TimeoutError")])  # same text, but the generation failed
    base = lb.leaderboard_base(tmp_path / "r.duckdb", Filters(dataset="cataract"), "j")
    judged = base["table"][base["table"]["items"] > 0]
    assert list(judged.language) == ["en"] and judged["items"].iloc[0] == 1  # hi-001 stale, en-002 errored
    row = judged.iloc[0]
    expected = [((i + 0) % 3 + (i + 1) % 3) / 2 for i in range(len(METRICS))]
    expected[-1] = (len(METRICS) - 1) % 3  # its second sample did not parse: the mean of the parsed one
    assert [row[m] for m in METRICS] == pytest.approx(expected)
    assert row.parse_failures == 1 and row.samples == 2


# -- leaderboard ------------------------------------------------------------------------------------
def test_leaderboard_matches_an_item_level_computation(tmp_path, cataract):
    rng = np.random.default_rng(5)
    queries = {lang: [q.query_id for q in cataract.queries if q.language == lang] for lang in ("en", "hi")}
    items = [(q, m) for m, lang, n in (("a", "en", 40), ("b", "en", 25), ("a", "hi", 12)) for q in queries[lang][:n]]
    store = small_db(tmp_path / "r.duckdb", cataract, {key: f"answer {key}" for key in items})
    hashes = {key: ResponseRow(dataset="cataract", query_id=key[0], model_id=key[1], run_id="r", prompt_hash="h",
                               text=f"answer {key}", error=None).response_hash for key in items}
    raw, rows = [], []
    for q, m in items:
        item = {"model_id": m, "language": cataract.query(q).language}
        for metric in METRICS:
            score = int(rng.integers(0, 3)) if rng.random() > 0.1 else None
            item[metric] = np.nan if score is None else float(score)
            rows.append(judgment(q, m, metric, 0, score, hashes[(q, m)]))
        raw.append(item)
    store.write(rows)
    raw = pd.DataFrame(raw)
    w = weights_tuple(DEFAULT_WEIGHTS)
    base = lb.leaderboard_base(tmp_path / "r.duckdb", Filters(dataset="cataract"), "j")
    weights = normalised_weights(DEFAULT_WEIGHTS)
    for lang in ("en", "hi"):
        board = lb.leaderboard(base, w, lang).set_index("model_id")
        for model, g in raw[raw.language == lang].groupby("model_id"):
            row = board.loc[model]
            for m in METRICS:
                assert row[m] == pytest.approx(g[m].mean())
                assert row[f"n_{m}"] == g[m].notna().sum()
                assert row[f"{m}_lo"] <= row[m] + 1e-9 and row[m] <= row[f"{m}_hi"] + 1e-9
            complete = g.dropna(subset=list(METRICS))
            assert row["n_AGG"] == len(complete)
            assert row["AGG"] == pytest.approx(sum(weights[m] * g[m].mean() for m in METRICS))
        assert board["AGG"].is_monotonic_decreasing and list(board["rank"]) == list(range(1, len(board) + 1))
    means = lb.model_means(base, w)
    assert set(zip(means.language, means.model_id, strict=True)) == {("en", "a"), ("en", "b"), ("hi", "a")}
    # under a theme filter (which the group tables do not hold): the items of the theme's queries only
    raw["themes"] = [cataract.query(q).themes for q, _ in items]
    theme = raw.themes.explode().value_counts().index[0]
    themed = raw[raw.themes.map(lambda ts: theme in ts)]
    base = lb.leaderboard_base(tmp_path / "r.duckdb", Filters(dataset="cataract", themes=(theme,)), "j")
    for lang, by_lang in themed.groupby("language"):
        board = lb.leaderboard(base, w, lang).set_index("model_id")
        assert set(board.index) == set(by_lang.model_id)
        for model, g in by_lang.groupby("model_id"):
            for m in METRICS:
                assert board.loc[model, f"n_{m}"] == g[m].notna().sum()
                if g[m].notna().any():
                    assert board.loc[model, m] == pytest.approx(g[m].mean())
            assert board.loc[model, "responses"] == len(g)
    # a jury of two judges that scored alike: its means are the judge's, an item neither parsed unscored (not 0)
    store.write([dataclasses.replace(r, judge_id="k") for r in rows])
    for f in (Filters(dataset="cataract"), Filters(dataset="cataract", themes=(theme,))):
        jury = lb.leaderboard_base(tmp_path / "r.duckdb", f, "jury:mean")["table"].set_index(["language", "model_id"])
        judge = lb.leaderboard_base(tmp_path / "r.duckdb", f, "j")["table"].set_index(["language", "model_id"])
        pd.testing.assert_frame_equal(jury[[*METRICS, *(f"n_{m}" for m in METRICS)]],
                                      judge[[*METRICS, *(f"n_{m}" for m in METRICS)]], check_dtype=False)


def test_the_writers_groups_give_the_leaderboard_the_items_would(jury_db, monkeypatch):
    """The leaderboard reads the writer's group tables (score_groups, response_groups) where the view allows, else
    (a theme filter) their definitions over the filtered queries; both must give the same: per dataset, language,
    script, model, for a judge (a jury's patterns are always ``score_groups``' definition over its item scores)."""
    views = [Filters(dataset="synthetic"), Filters(), Filters(dataset="synthetic", languages=("hi", "ta")),
             Filters(dataset="synthetic", scripts=("latin",)), Filters(dataset="synthetic", models=(JUDGE, "x"))]
    with duckdb.connect(str(jury_db), read_only=True) as con:
        judge = con.execute("SELECT min(judge_id) FROM item_scores").fetchall()[0][0]
        assert con.execute("SELECT count(DISTINCT query_script) FROM score_groups").fetchall() == [(2,)]
        judges = (judge, "jury:mean", "jury:median")
        grouped = {(f, j): (pd.DataFrame(lb.score_patterns(con, f, j)), con.execute(*lb._per_model_sql(f)).df())
                   for f in views for j in judges}
        monkeypatch.setattr(common, "grouped", lambda f: False)  # the group tables' definitions over them
        for (f, j), (patterns, per_model) in grouped.items():
            assert len(patterns) and len(per_model)
            pd.testing.assert_frame_equal(patterns, pd.DataFrame(lb.score_patterns(con, f, j)), check_dtype=False)
            items = con.execute(*lb._per_model_sql(f)).df()
            key = ["language", "model_id"]
            pd.testing.assert_frame_equal(per_model.sort_values(key, ignore_index=True)[items.columns],
                                          items.sort_values(key, ignore_index=True), check_dtype=False)


def test_a_jurys_means_from_its_counted_scores_are_those_of_its_item_scores(jury_db):
    """The heatmap's means of a jury come from ``jury_patterns`` (each tuple of its judges' scores, its mean or median
    the jury's score); they must be what the leaderboard's item patterns give, for every view (under a theme filter
    both from the tables' definitions over the theme's queries)."""
    f = Filters(dataset="synthetic")
    weights = weights_tuple(DEFAULT_WEIGHTS)
    with duckdb.connect(str(jury_db), read_only=True) as con:
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
    views = [f, Filters(), f.with_(languages=("hi", "ta")), f.with_(scripts=("latin",)), f.with_(models=(JUDGE, "x")),
             f.with_(themes=(theme,)), Filters(themes=(theme,), languages=("en",))]
    for judge in ("jury:mean", "jury:median"):
        for view in views:
            fast = lb.model_means(lb.jury_base(jury_db, view, judge), weights)
            slow = lb.model_means(lb.leaderboard_base(jury_db, view, judge), weights)
            assert len(fast) == len(slow) > 0
            pd.testing.assert_frame_equal(fast.sort_values(["language", "model_id"], ignore_index=True),
                                          slow.sort_values(["language", "model_id"], ignore_index=True),
                                          check_dtype=False, rtol=1e-12)


def test_a_jurys_leaderboard_of_one_language_is_that_of_the_whole_view(jury_db):
    """The dashboard computes a jury's leaderboard from its base of the shown language's queries only; every column,
    CIs included, must be what the base of the whole view gives."""
    from pages import _data as data

    weights = weights_tuple(DEFAULT_WEIGHTS)
    f = Filters(dataset="synthetic")
    with duckdb.connect(str(jury_db), read_only=True) as con:
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
    views = [f, f.with_(languages=("hi", "ta")), f.with_(themes=(theme,)), f.with_(scripts=("latin",))]
    shown_rows = 0
    for view in views:
        for judge in ("jury:mean", "jury:median"):
            whole = lb.leaderboard_base(jury_db, view, judge)
            for language in ("en", "hi"):
                data.clear_caches()
                shown = data.leaderboard(str(jury_db), view, judge, weights, language)
                pd.testing.assert_frame_equal(shown, lb.leaderboard(whole, weights, language),
                                              check_dtype=len(shown) > 0)  # no rows: no values to type
                shown_rows += len(shown)
    assert shown_rows

def test_the_writers_theme_groups_give_the_theme_scores_the_items_would(jury_db, monkeypatch):
    """The themes page sums the writer's ``theme_groups`` for one judge; that must give what grouping the items
    (each query under each of its themes, or ``(none)``) gives, for every sidebar filter, themes included."""
    with duckdb.connect(str(jury_db), read_only=True) as con:
        judge = con.execute("SELECT min(judge_id) FROM item_scores").fetchall()[0][0]
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
        model = con.execute("SELECT min(model_id) FROM responses").fetchall()[0][0]
    views = [Filters(dataset="synthetic"), Filters(), Filters(dataset="synthetic", languages=("hi", "ta")),
             Filters(dataset="synthetic", scripts=("latin",)), Filters(dataset="synthetic", models=(model,)),
             Filters(dataset="synthetic", themes=(theme, themes.NO_THEME))]
    grouped = {f: themes.theme_scores(jury_db, f, judge) for f in views}
    monkeypatch.setattr(themes, "is_jury", lambda judge: True)  # the table's definition over the bound item scores
    for f, frame in grouped.items():
        assert len(frame), f
        pd.testing.assert_frame_equal(frame, themes.theme_scores(jury_db, f, judge), check_dtype=False)


def test_the_annotation_queue_counts_the_views_answers_and_labels(jury_db):
    """The annotation queue's total (the writer's ``response_groups``, or its definition under a theme filter) and
    done are the view's answers without an error and those the annotator labelled."""
    with duckdb.connect(str(jury_db), read_only=True) as con:
        annotator, metric = con.execute("SELECT annotator, metric FROM human_labels WHERE score IS NOT NULL "
                                        "GROUP BY ALL ORDER BY count(*) DESC, 1, 2 LIMIT 1").fetchone()
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
        f = Filters(dataset="synthetic")
        labelled = 0
        for view in (f, f.with_(themes=(theme,)), f.with_(themes=(theme,), languages=("hi", "en"))):
            where, params = view.sql()
            total, done = con.execute(
                "SELECT count(*), count(h.score) FROM responses r JOIN queries q USING (dataset, query_id) "
                "LEFT JOIN human_labels h ON h.dataset = r.dataset AND h.query_id = r.query_id AND h.model_id = "
                f"r.model_id AND h.metric = ? AND h.annotator = ? WHERE r.error IS NULL AND {where}",
                [metric, annotator, *params]).fetchone()
            got_done, got_total, _ = agreement.annotation_state(jury_db, view, annotator, metric)
            assert (got_done, got_total) == (done, total) and total > 0, view
            labelled += done
    assert labelled > 0


def test_a_jurys_theme_scores_are_its_item_scores_grouped_by_theme(jury_db):
    """A jury's theme scores come from ``theme_groups``' definition over the jury's item scores; they must be the
    means of ``jury.item_source``'s rows, each query counted under each of its themes (or ``(none)``)."""
    from pipeline.read import jury

    with duckdb.connect(str(jury_db), read_only=True) as con:
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
        queries = con.execute("SELECT dataset, query_id, language, script, themes FROM queries").df()
    queries["theme"] = [list(t) if len(t) else [themes.NO_THEME] for t in queries.themes]
    f = Filters(dataset="synthetic")
    for view in (f, f.with_(languages=("hi", "ta")), f.with_(scripts=("latin",)), f.with_(themes=(theme,))):
        for how in jury.AGGREGATES:
            got = themes.theme_scores(jury_db, view, jury.jury_id(how))
            with duckdb.connect(str(jury_db), read_only=True) as con:
                source, params = jury.item_source(view, jury.jury_id(how))
                items = con.execute(f"SELECT * FROM {source}", params).df()
            rows = items.merge(queries, on=["dataset", "query_id"]).explode("theme")
            rows = rows[rows.language.isin(view.languages or rows.language)
                        & rows.script.fillna("native").isin(view.scripts or ["native", "latin"])
                        & rows.theme.isin(view.themes or rows.theme)]
            expected = rows.groupby(["language", "theme", "model_id"])[list(METRICS)].agg(["mean", "count"])
            assert len(got) == len(expected) > 0, (view, how)
            for r in got.itertuples(index=False):
                for m in METRICS:
                    mean, n = expected.loc[(r.language, r.theme, r.model_id), m]
                    assert getattr(r, f"n_{m}") == n
                    assert getattr(r, m) == pytest.approx(mean, rel=1e-12) if n else pd.isna(getattr(r, m))


def test_group_source_gives_each_derived_tables_rows_of_the_filtered_queries(jury_db):
    """``common.group_source`` without the table (an older file, a theme filter on a group table) is the table's
    definition over the filtered queries: for every derived table with a query or a query language in its key, the
    table's own rows of those queries (floats to 1e-9: sums in another order); with the table present, a per-item
    table under a theme filter is the table's rows of the theme's queries."""
    from pipeline.store import DERIVED

    def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> list:
        out = con.execute(f"SELECT * FROM ({sql}) ORDER BY ALL", params).fetchall()
        return [tuple(round(v, 9) if isinstance(v, float) else
                      [round(x, 9) if isinstance(x, float) else x for x in v] if isinstance(v, list) else v
                      for v in row) for row in out]

    def of_hi(relation: str, per_item: bool, theme: str = "") -> str:  # the rows of the dataset's Hindi queries
        if per_item:
            return (f"SELECT t.* FROM {relation} t SEMI JOIN queries q ON q.dataset = t.dataset AND q.query_id = "
                    "t.query_id AND q.dataset = 'synthetic' AND q.language = 'hi'"
                    + (f" AND list_contains(q.themes, '{theme}')" if theme else ""))
        return f"SELECT * FROM {relation} t WHERE t.dataset = 'synthetic' AND t.query_language = 'hi'"

    f = Filters(dataset="synthetic", languages=("hi",))
    checked, themed = [], 0
    with duckdb.connect(str(jury_db), read_only=True) as con:
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
        for name, d in DERIVED.items():
            per_item = "query_id" in d.key
            if not per_item and "query_language" not in d.key:
                continue
            through = (d.counts.parent,) if d.counts is not None else ()
            source, params = common.group_source(name, f, present=False, through=through)
            assert rows(con, of_hi(source, per_item), params) == rows(con, of_hi(name, per_item), []), name
            checked.append(name)
            if per_item:  # the table itself, of the theme's queries
                source, params = common.group_source(name, f.with_(themes=(theme,)))
                assert source != name
                expected = rows(con, of_hi(name, per_item, theme), [])
                assert rows(con, of_hi(source, per_item), params) == expected, name
                themed += len(expected)
    assert themed > 0
    assert {"item_scores", "score_groups", "theme_groups", "jury_items", "jury_patterns", "critique_items"} <= set(
        checked)


def test_the_writers_jury_items_give_the_jury_the_judges_rows_would(jury_db, monkeypatch):
    """A jury's item scores come from the writer's ``jury_items``; they must equal the mean / median of every judge's
    ``item_scores`` row of the item, and the disagreements listed from them those found by grouping the rows."""
    from pipeline.read import jury

    f = Filters(dataset="synthetic")
    with duckdb.connect(str(jury_db), read_only=True) as con:
        judges = tuple(j for (j,) in con.execute("SELECT DISTINCT judge_id FROM item_scores ORDER BY 1").fetchall())
        assert len(judges) == 2
        for how, fn in (("mean", "avg"), ("median", "median")):
            source, params = jury.item_source(f, jury.jury_id(how))
            got = con.execute(f"SELECT * EXCLUDE (runs) FROM {source} ORDER BY ALL", params).fetchall()
            expected = con.execute(
                f"SELECT dataset, query_id, model_id, '{jury.jury_id(how)}', "
                + ", ".join(f"{fn}({m})" for m in METRICS) + ", sum(judgments), sum(unparsed), max(samples), "
                "any_value(query_language), any_value(query_script) "  # the query's, as every judge's row has them
                "FROM item_scores WHERE dataset = 'synthetic' GROUP BY dataset, query_id, model_id ORDER BY ALL"
            ).fetchall()
            assert len(got) == len(expected) > 0
            for a, b in zip(got, expected, strict=True):
                assert a[:4] == b[:4] and a[-5:] == b[-5:]
                assert np.allclose(np.array(a[4:-5], dtype=float), np.array(b[4:-5], dtype=float), equal_nan=True)
    with duckdb.connect(str(jury_db), read_only=True) as con:
        theme = con.execute("SELECT min(t) FROM (SELECT unnest(themes) AS t FROM queries)").fetchall()[0][0]
    for view in (f, f.with_(languages=("hi", "ta")), f.with_(models=(judges[0], "x")), f.with_(scripts=("latin",)),
                 f.with_(themes=(theme,)), Filters(), Filters(themes=(theme,))):
        with monkeypatch.context() as m:  # the judges' score patterns (α, κ): both orders of the judges
            for order in (judges, judges[::-1]):
                fast = jury._patterns(jury_db, view, order)
                m.setattr(jury, "_judges_of", lambda db, dataset: [])
                slow = jury._patterns(jury_db, view, order)
                m.undo()
                assert len(fast) and fast.n.sum() == slow.n.sum()
                pd.testing.assert_frame_equal(fast, slow, check_dtype=False)
        for metric in METRICS:
            fast = jury.disagreement_items(jury_db, view, judges, metric, 15)
            with monkeypatch.context() as m:
                m.setattr(jury, "_judges_of", lambda db, dataset: [])  # grouping every judge's rows
                slow = jury.disagreement_items(jury_db, view, judges, metric, 15)
            pd.testing.assert_frame_equal(fast, slow, check_dtype=False)


# -- self-consistency ----------------------------------------------------------------------------------
def test_self_consistency_std_and_flip_rate(tmp_path, cataract):
    responses = {(q, "m"): f"answer {q}" for q in ("en-001", "en-002", "en-003")}
    store = small_db(tmp_path / "r.duckdb", cataract, responses)
    hashes = dict(store.fetch("SELECT query_id, response_hash FROM responses"))
    first, second = METRICS[0], METRICS[1]
    rows = [judgment(q, "m", first, s, score, hashes[q]) for q, scores in
            {"en-001": [2, 2, 2], "en-002": [0, 2, 1], "en-003": [1, 1, None]}.items()
            for s, score in enumerate(scores)]
    rows.append(judgment("en-001", "m", second, 0, 2, hashes["en-001"]))  # one sample: nothing to compare
    store.write(rows)
    out = judge_trust.judge_consistency(tmp_path / "r.duckdb", Filters(dataset="cataract"), "j")
    assert list(out.metric) == [first]
    row = out.iloc[0]
    assert row.multi_items == 3 and row.samples == pytest.approx(8 / 3)
    assert row.flip_rate == pytest.approx(1 / 3)
    assert row.mean_std == pytest.approx(np.std([0, 2, 1]) / 3)  # population std, as the leaderboard shows
    base = lb.leaderboard_base(tmp_path / "r.duckdb", Filters(dataset="cataract"), "j")
    board = lb.leaderboard(base, weights_tuple(DEFAULT_WEIGHTS), "en")
    assert board.flip_rate.iloc[0] == pytest.approx(1 / 3)  # one implementation for both


# -- safety ----------------------------------------------------------------------------------------------
def test_safety_summary_counts_unclear_apart(tmp_path, cataract):
    responses = {(q, m): f"{q} {m}" for q in ("en-001", "en-002", "en-003", "en-004") for m in ("a", "b")}
    store = small_db(tmp_path / "r.duckdb", cataract, responses)
    hashes = {(q, m): h for q, m, h in store.fetch("SELECT query_id, model_id, response_hash FROM responses")}
    checks = [("en-001", "a", True), ("en-002", "a", False), ("en-003", "a", None), ("en-004", "a", True),
              ("en-001", "b", False)]
    store.write([SafetyCheckRow(dataset="cataract", query_id=q, model_id=m, check_name="update_adherence",
                                passed=p, detail="", response_hash=hashes[(q, m)]) for q, m, p in checks])
    store.write([SafetyCheckRow(dataset="cataract", query_id="en-002", model_id="b", check_name="update_adherence",
                                passed=True, detail="", response_hash="stale")])  # of an earlier text
    out = lb.safety_summary(tmp_path / "r.duckdb", Filters(dataset="cataract"))
    a, b = _one(out, model_id="a"), _one(out, model_id="b")
    assert (a.n, a.passed, a.failed, a.unclear) == (4, 2, 1, 1) and a.pass_rate == pytest.approx(2 / 3)
    assert (b.n, b.passed, b.pass_rate) == (1, 0, 0.0)
    assert lb.safety_summary(tmp_path / "r.duckdb", Filters(dataset="none")).empty


# -- agreement -----------------------------------------------------------------------------------------
def test_agreement_from_a_confusion_table_equals_item_level_figures():
    pairs = pd.DataFrame({
        "language": ["en"] * 6 + ["hi"] * 3, "model_id": ["a", "a", "a", "b", "b", "b", "a", "a", "a"],
        "human": [2, 1, 0, 2, 2, 1, 0, 1, 2], "llm": [2, 1, 1, 0, 2, 1, 0, 1, 2],
    })
    confusion = pairs.value_counts().rename("n").reset_index()
    out = agreement.agreement_from_confusion(confusion, ["language", "model_id"]).set_index(["language", "model_id"])
    assert out.loc[("en", "a"), "agreement"] == pytest.approx(2 / 3)
    assert out.loc[("en", "a"), "kappa"] == pytest.approx(
        cohen_kappa_score([2, 1, 0], [2, 1, 1], weights="linear", labels=[0, 1, 2]))
    assert out.loc[("en", "a"), "n"] == 3 and out.loc[("hi", "a"), "agreement"] == 1.0
    pooled = agreement.agreement_from_confusion(confusion.assign(model_id=agreement.ALL_MODELS),
                                                ["language", "model_id"]).set_index("language")
    en = pairs[pairs.language == "en"]
    assert pooled.loc["en", "n"] == 6
    assert pooled.loc["en", "kappa"] == pytest.approx(weighted_kappa(en.human, en.llm))
    assert agreement.agreement_from_confusion(confusion.iloc[0:0], ["language"]).empty


def test_agreement_pairs_use_the_rounded_mean_of_parsed_samples(tmp_path, cataract):
    store = small_db(tmp_path / "r.duckdb", cataract, {("en-001", "m"): "t", ("en-002", "m"): "u"})
    from pipeline.labels.human_labels import save_label

    hashes = dict(store.fetch("SELECT query_id, response_hash FROM responses"))
    metric = METRICS[0]
    store.write([judgment("en-001", "m", metric, s, score, hashes["en-001"]) for s, score in enumerate([1, 2, 2])]
                + [judgment("en-002", "m", metric, s, score, hashes["en-002"]) for s, score in enumerate([0, None])])
    for q, score in (("en-001", 2), ("en-002", 0)):  # en-001: sample 0 says 1, the mean of its samples 2
        save_label(tmp_path / "r.duckdb", dataset="cataract", query_id=q, model_id="m", metric=metric,
                   annotator="dr", score=score, comment=None)
    view = agreement.agreement_view(tmp_path / "r.duckdb", Filters(dataset="cataract"), "j", metric)
    row = _one(view["table"], model_id="m")
    assert row.n == 2 and row.agreement == 1.0  # round(mean(1, 2, 2)) = 2; an unparsed sample is left out
    ranks = view["ranks"].iloc[0]
    assert ranks.human_mean == 1.0 and ranks.llm_mean == 1.0
    with pytest.raises(ValueError):
        save_label(tmp_path / "r.duckdb", dataset="cataract", query_id="en-001", model_id="m", metric="XX",
                   annotator="a", score=1, comment=None)


def test_has_columns_lists_a_files_columns_again_once_a_writer_changed_it(tmp_path):
    db = tmp_path / "t.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE responses (dataset VARCHAR, model_id VARCHAR)")
    assert common.has_columns(db, "responses", "dataset", "model_id")
    assert not common.has_columns(db, "responses", "dataset", "kb_hash")
    assert not common.has_columns(db, "datasets", "dataset")  # no such table
    with duckdb.connect(str(db)) as con:  # a writer adds the column: the file's state changes
        con.execute("ALTER TABLE responses ADD COLUMN kb_hash VARCHAR")
    assert common.has_columns(db, "responses", "dataset", "kb_hash")
    assert home.kb_used(db) == home.KB_UNRECORDED  # datasets has no kb_hash yet
