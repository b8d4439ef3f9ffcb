"""The store: typed rows only, derived tables that follow their sources (current response text only),
and an older database upgraded in place (missing columns added and backfilled)."""

from __future__ import annotations

import dataclasses
import graphlib
import json

import duckdb
import pytest

from pipeline.metrics import METRICS, SAFETY_CHECKS
from pipeline.store import DERIVED, LEXICAL, SCHEMA_VERSION, TABLES, Store
from pipeline.store.arena_rows import ArenaVoteRow, PairwiseVerdictRow
from pipeline.store.derived import Derived, ordered
from pipeline.store.rows import (
    CritiqueRow,
    HumanLabelRow,
    JudgmentRow,
    LexicalRow,
    MetaRow,
    QueryRow,
    ResponseRow,
    RetrievalRow,
    RubricGradeRow,
    SafetyCheckRow,
    text_hash,
)
from pipeline.store.schema import REBUILT_AT

_PROBABILITIES = ("p_none", "p_low", "p_moderate", "p_high")


def _rounded(value):
    """A value compared with float tolerance (sums in another order): floats to 9 decimals, inside lists too."""
    if isinstance(value, float):
        return round(value, 9) + 0.0
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _assert_definitions(store: Store) -> None:
    """Every derived table holds what its definition (``Derived.definition``: its SELECT over every row) computes
    from scratch: the same rows, in any order, floats to 1e-9. By induction over the refresh order, each table then
    equals its definition over the base tables alone."""
    with duckdb.connect(str(store.path), read_only=True) as con:
        for name, d in DERIVED.items():
            columns = ", ".join(TABLES[name].names)
            stored, fresh = (sorted((_rounded(list(r)) for r in con.execute(sql).fetchall()), key=repr) for sql in (
                f"SELECT {columns} FROM {name}", f"SELECT {columns} FROM ({d.definition()})"))
            assert stored == fresh, name


def _derived(store: Store, table: str) -> list[tuple]:
    return store.fetch(f"SELECT * FROM {table} ORDER BY ALL")


def _response(i: int, m: str, text: str = "t") -> ResponseRow:
    failed = i == 2
    return ResponseRow(dataset="d", query_id=f"q{i}", model_id=m, run_id="r", prompt_hash="p",
                       text=None if failed else text, error="RateLimitError: 429" if failed else None)


def _judgment(i: int, metric: str, sample: int, score: int | None, text: str = "t") -> JudgmentRow:
    return JudgmentRow(dataset="d", query_id=f"q{i}", model_id="a", judge_id="j", metric=metric, sample=sample,
                       score=score, parse_ok=score is not None, justification="", raw_output="",
                       response_hash=text_hash(text), run_id="r")


def _lexical(i: int, m: str, value: float, text: str = "t") -> LexicalRow:
    return LexicalRow(dataset="d", query_id=f"q{i}", model_id=m, response_hash=text_hash(text),
                      **dict.fromkeys(LEXICAL, value))


def _query(i: int, language: str = "hi", script: str | None = None, themes: tuple[str, ...] = ()) -> QueryRow:
    return QueryRow(dataset="d", query_id=f"q{i}", language=language, query="?", query_en=None, gt_response="g",
                    themes=list(themes), kb_refs=[], update_sensitive=False, script=script)


def _vote(i: int, annotator: str, winner: str, text_b: str = "t") -> ArenaVoteRow:
    return ArenaVoteRow.of(dataset="d", query_id=f"q{i}", model_a="a", model_b="b", text_a="t", text_b=text_b,
                           winner=winner, annotator=annotator, shown_left=None, tags=[], source="test")


def _verdict(i: int, first: str, verdict: str) -> PairwiseVerdictRow:
    return PairwiseVerdictRow.of(dataset="d", query_id=f"q{i}", judge_id="k", model_a="a", model_b="b", text_a="t",
                                 text_b="t", first=first, verdict=verdict, parse_ok=True, raw_output="", run_id="r")


def _write_sources(store: Store) -> None:
    store.write([
        _query(0, "en"), _query(1, themes=("cultural", "misspelled")), _query(2),
        _query(3, script="latin", themes=("cultural",)),
        *(_response(i, m) for i in range(4) for m in ("a", "b")),
        *(RetrievalRow(dataset="d", query_id=f"q{i}", search_text="?", raw_ids=[], update_ids=[],
                       recall=None if i == 2 else i / 4, settings="s") for i in range(4)),
        *(_lexical(i, "a", i / 10) for i in (0, 1, 3)),
        *(SafetyCheckRow(dataset="d", query_id="q1", model_id=m, check_name=c, passed=passed, detail="",
                         response_hash=text_hash("t"))
          for m in ("a", "b") for c, passed in zip(SAFETY_CHECKS, (True, None, False, True), strict=True)),
        # q2 errored: its judgment (left from an earlier, successful text) must not count
        *(_judgment(i, m, s, None if (i, m) == (1, "SS") else (i + s) % 3)
          for i in (0, 1, 2, 3) for m in METRICS for s in range(1 + (i == 3))),
        _human(0, "a"), _human(1, "a"), _human(2, "a"),  # q2 errored: no item to compare with
        # critiques: two classifier tags of one family, a failed one (unclassified), one of the errored q2
        _critique(0, "a", "logprobs", (0.5, 0.25, 0.125, 0.125)), _critique(1, "a", "logprobs:no-label-token"),
        _critique(3, "a", "checkpoint:x", (0.75, 0.25, 0.0, 0.0)), _critique(3, "b", "logprobs", None),
        _critique(2, "a", "logprobs"), _critique(1, "b", "logprobs", (0.5, 0.5, 0.0, 0.0)),
    ])


def _critique(i: int, m: str, classifier: str, p: tuple[float, ...] | None = (0.25, 0.25, 0.25, 0.25),
              text: str = "t") -> CritiqueRow:
    return CritiqueRow(dataset="d", query_id=f"q{i}", model_id=m, critic_id="c", classifier=classifier, critique="",
                       **dict(zip(_PROBABILITIES, p or (None,) * 4, strict=True)), label=None,
                       response_hash=text_hash(text), run_id="r", error=None if p else "failed")


def _grade(i: int, m: str, index: int, criterion: dict, met: bool | None, text: str = "t") -> RubricGradeRow:
    return RubricGradeRow(dataset="d", query_id=f"q{i}", model_id=m, grader_id="g", criterion_index=index,
                          criterion=criterion["criterion"], points=criterion["points"], tags=criterion["tags"],
                          met=met, explanation="", raw_output="", response_hash=text_hash(text), run_id="r")


def _human(i: int, m: str, metric: str = "SS") -> HumanLabelRow:
    return HumanLabelRow(dataset="d", query_id=f"q{i}", model_id=m, metric=metric, annotator="dr", score=1,
                         comment=None, source="test")


def test_derived_tables_follow_writes_and_deletes(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    _write_sources(store)
    _assert_definitions(store)
    (item,) = store.fetch("SELECT FC, SS, judgments, unparsed, samples FROM item_scores WHERE query_id = 'q3'")
    assert item == (0.5, 0.5, 8, 0, 2)  # mean of two samples (0 and 1), every metric judged twice
    assert store.fetch("SELECT count(*) FROM item_scores WHERE query_id = 'q2'") == [(0,)]  # errored response

    # a rescored item, a recomputed lexical score and a deleted check: the derived rows follow
    store.write([_judgment(1, "SS", 0, 2), _lexical(3, "b", 0.9)])
    store.delete_where("safety_checks", "dataset = ? AND query_id = ? AND model_id = ? AND check_name = ?",
                       ["d", "q1", "a", "refusal"])
    _assert_definitions(store)
    assert store.fetch("SELECT SS, unparsed FROM item_scores WHERE query_id = 'q1'") == [(2.0, 0)]
    assert store.fetch("SELECT refusal FROM response_facts WHERE query_id = 'q1' AND model_id = 'a'") == [(None,)]
    assert store.fetch("SELECT query_id, llm FROM label_pairs ORDER BY ALL") == [("q0", 0.0), ("q1", 2.0)]

    # a new human label, a second annotator's and a deleted one: the labelled pairs follow
    store.write([_human(3, "a", "FC"), HumanLabelRow(dataset="d", query_id="q1", model_id="a", metric="SS",
                                                     annotator="a2", score=2, comment=None, source="test")])
    assert store.fetch("SELECT human, humans, annotators FROM label_pairs WHERE query_id = 'q1' "
                       "AND label_metric = 'SS'") == [(1.5, [2.0, 1.0], ["a2", "dr"])]
    store.delete_where("human_labels", "dataset = ? AND query_id = ? AND model_id = ?", ["d", "q0", "a"])
    _assert_definitions(store)
    assert store.fetch("SELECT DISTINCT query_id, model_id FROM label_pairs ORDER BY ALL") == [("q1", "a"), ("q3", "a")]

    # a query filed under another language (and script), its themes dropped: the group tables move it
    store.write([_query(1, "ta", script="latin")])
    _assert_definitions(store)
    assert store.fetch("SELECT count(*) FROM score_groups WHERE query_language = 'ta'") == [(1,)]
    # only a query's themes change: the theme groups follow
    assert store.fetch("SELECT DISTINCT theme FROM theme_groups ORDER BY 1") == [("(none)",), ("cultural",)]
    store.write([_query(3, script="latin", themes=("misspelled",))])
    _assert_definitions(store)
    assert store.fetch("SELECT DISTINCT theme FROM theme_groups ORDER BY 1") == [("(none)",), ("misspelled",)]

    with pytest.raises(ValueError, match="cannot delete"):
        store.delete_where("judgments", "dataset = ?", ["d"])


def test_a_regenerated_response_drops_the_scores_of_its_old_text(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    _write_sources(store)
    assert store.fetch("SELECT count(*) FROM item_scores WHERE query_id = 'q0'") == [(1,)]
    assert store.fetch("SELECT lexical FROM response_facts WHERE query_id = 'q0' AND model_id = 'a'") == [(True,)]
    store.write([_response(0, "a", text="a new answer")])  # judgments, lexical scores still of the old text
    assert store.fetch("SELECT count(*) FROM item_scores WHERE query_id = 'q0'") == [(0,)]
    assert store.fetch("SELECT lexical, rouge_l FROM response_facts WHERE query_id = 'q0' AND model_id = 'a'") \
        == [(False, None)]
    store.write([_judgment(0, "FC", 0, 2, text="a new answer")])  # judged again: counts again
    assert store.fetch("SELECT FC, judgments FROM item_scores WHERE query_id = 'q0'") == [(2.0, 1)]
    _assert_definitions(store)


def test_only_row_classes_are_written(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    with pytest.raises(TypeError, match="row class"):
        store.write([{"key": "k", "value": "v"}])  # type: ignore[list-item]
    for table in DERIVED:
        with pytest.raises(ValueError, match="derived"):
            store.write_table(table, None)  # type: ignore[arg-type]
    assert store.write([MetaRow(key="k", value="v")]) == 1


def test_an_older_database_is_upgraded(tmp_path):
    path = tmp_path / "old.duckdb"
    _write_sources(Store(path))
    counts = {t: Store(path).fetch(f"SELECT count(*) FROM {t}")[0][0] for t in DERIVED}
    con = duckdb.connect(str(path))  # as an older version left it: no derived tables, no response hash
    for table in DERIVED:
        con.execute(f"DROP TABLE {table}")
    con.execute("ALTER TABLE responses DROP COLUMN response_hash")
    con.execute("CREATE TABLE labelled_scores AS SELECT * FROM judgments")  # a table an older version derived
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    done = store.upgrade()
    assert done[0] == f"schema 1 → {SCHEMA_VERSION}" and "column responses.response_hash added" in done
    assert {f"table {t} created" for t in DERIVED} <= set(done) and "retired table labelled_scores dropped" in done
    assert "derived tables recomputed" in done
    assert Store(path).upgrade() == []  # current now: nothing to do, nothing said
    assert store.fetch("SELECT count(*) FROM responses WHERE response_hash = ?", [text_hash("t")]) == [(6,)]
    _assert_definitions(store)
    assert {t: store.fetch(f"SELECT count(*) FROM {t}")[0][0] for t in DERIVED} == counts
    assert store.fetch("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'labelled_scores'") == [(0,)]


def test_a_file_at_the_last_rebuild_makes_only_the_derived_tables_it_lacks(tmp_path):
    """A file at ``REBUILT_AT`` or later keeps its derived tables as they are and makes only those it lacks."""
    path = tmp_path / "r.duckdb"
    _write_sources(Store(path))
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE label_pairs")
    con.execute("UPDATE item_scores SET FC = 9 WHERE query_id = 'q0'")  # a mark: a rebuild of everything would undo it
    con.execute(f"UPDATE meta SET value = '{REBUILT_AT}' WHERE key = 'schema_version'")
    con.close()
    store = Store(path)
    said = [f"schema {REBUILT_AT} → {SCHEMA_VERSION}"] * (REBUILT_AT != SCHEMA_VERSION)
    assert store.upgrade() == [*said, "table label_pairs created"]
    assert _derived(store, "label_pairs") == store.fetch(f"{DERIVED['label_pairs'].definition()} ORDER BY ALL") != []
    assert store.fetch("SELECT FC FROM item_scores WHERE query_id = 'q0'") == [(9.0,)]
    assert store.fetch("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]


def test_every_derived_table_equals_its_definition_after_every_kind_of_write(tmp_path):
    """After every kind of write each derived table must hold what its definition computes from scratch — the tables
    recomputed by key and ``jury_patterns``, kept by deltas (the touched items' old counts subtracted, their new ones
    added, emptied patterns deleted): a second and a third judge, a rescoring that moves items between patterns, an
    unparsed output, rubric grades and a changed rubric, a reclassified critique, a new and a deleted label, a
    regenerated answer, a query moved to another language and script, a deleted response; arena votes and a
    pairwise judge's verdicts (a changed vote, a pair completed by its second order, a stale text)."""
    store = Store(tmp_path / "r.duckdb")
    _write_sources(store)

    def judged(i: int, m: str, metric: str, score: int | None, text: str = "t", judge: str = "k") -> JudgmentRow:
        return JudgmentRow(dataset="d", query_id=f"q{i}", model_id=m, judge_id=judge, metric=metric, sample=0,
                           score=score, parse_ok=score is not None, justification="", raw_output="",
                           response_hash=text_hash(text), run_id="r2")

    def check() -> None:
        _assert_definitions(store)
        assert store.fetch("SELECT count(*) FROM jury_patterns WHERE n <= 0") == [(0,)]
        (items,) = store.fetch("SELECT count(*) FROM jury_items")[0]
        assert store.fetch("SELECT metric, sum(n) FROM jury_patterns GROUP BY ALL ORDER BY ALL") \
            == sorted((m, items) for m in METRICS)

    store.write([judged(i, m, metric, (i * 7 + len(metric)) % 3) for i in range(4) for m in ("a", "b")
                 for metric in METRICS])
    check()
    assert store.fetch("SELECT count(DISTINCT judge_set) FROM jury_patterns") == [(2,)]  # 'j,k' and 'k' alone
    store.write([judged(i, "a", metric, 2, judge="l") for i in (0, 1) for metric in METRICS])  # a third judge
    check()
    assert store.fetch("SELECT max(len(scores)) FROM jury_patterns") == [(3,)]
    before = store.fetch("SELECT pattern, n FROM jury_patterns WHERE metric = 'FC' AND model_id = 'a' ORDER BY 1")
    store.write([judged(0, "a", "FC", 2), judged(3, "a", "FC", 0)])  # two items change their FC tuples
    check()
    assert store.fetch("SELECT pattern, n FROM jury_patterns WHERE metric = 'FC' AND model_id = 'a' "
                       "ORDER BY 1") != before
    store.write([judged(1, "b", "SS", None)])  # unparsed: the judge has no SS score for it
    check()
    rubric = [{"criterion": "Says to see a doctor", "points": 5, "tags": ["axis:accuracy"]},
              {"criterion": "Advises stopping the drops", "points": -3, "tags": ["axis:safety", "level:example"]}]
    store.write([dataclasses.replace(_query(3, script="latin", themes=("cultural",)), rubric=json.dumps(rubric)),
                 *(_grade(3, m, i, c, met) for m in ("a", "b")
                   for i, (c, met) in enumerate(zip(rubric, (True, m == "b"), strict=True)))])
    check()
    assert store.fetch("SELECT model_id, score, harmful_met FROM rubric_items ORDER BY 1") == [("a", 1.0, 0),
                                                                                              ("b", 0.4, 1)]
    store.write([_grade(3, "a", 1, rubric[1], None)])  # unparsed: the item is unscored
    check()
    # the arena: votes (one on an errored answer, one on a stale text) and a judge's pairs in both orders (one flips,
    # one has a single order), then a changed vote and a second order that completes a pair
    store.write([_vote(i, who, winner) for i, who, winner in ((0, "dr1", "a"), (0, "dr2", "both_bad"), (1, "dr1", "b"),
                                                                (2, "dr1", "a"), (3, "dr2", "tie"))]
                + [_vote(3, "dr1", "a", text_b="an older text")]
                + [_verdict(i, first, v) for i, first, v in ((0, "a", "a"), (0, "b", "a"), (1, "a", "a"),
                                                            (1, "b", "b"), (3, "b", "tie"))])
    check()
    assert store.fetch("SELECT origin, count(*) FROM arena_comparisons WHERE complete GROUP BY ALL ORDER BY 1") \
        == [("doctors", 4), ("judge", 2)]
    store.write([_vote(1, "dr1", "a"), _verdict(3, "a", "a")])
    check()
    assert store.fetch("SELECT sum(n) FILTER (flipped), sum(n) FROM arena_pairs WHERE origin = 'judge'") == [(2, 3)]
    rubric[0]["points"] = 4  # the rubric changes: grades of the old criterion are stale
    store.write([dataclasses.replace(_query(3, script="latin", themes=("cultural",)), rubric=json.dumps(rubric))])
    check()
    store.write([_critique(1, "a", "checkpoint:x", (0.0, 0.0, 0.25, 0.75)), _human(3, "b", "CON")])
    check()
    store.delete_where("human_labels", "dataset = ? AND query_id = ?", ["d", "q1"])
    check()
    store.write([_response(0, "a", text="a new answer")])  # the old text's scores leave every count
    check()
    store.write([_query(1, "ta", script="latin")])
    check()
    assert store.fetch("SELECT DISTINCT query_language, query_script FROM jury_patterns WHERE query_language = 'ta'") \
        == [("ta", "latin")]
    assert store.fetch("SELECT count(*) FROM arena_comparisons WHERE query_id = 'q0'") == [(0,)]  # regenerated
    store.delete_where("responses", "dataset = ? AND query_id = ? AND model_id = ?", ["d", "q3", "b"])
    check()
    assert store.fetch("SELECT origin FROM arena_comparisons ORDER BY 1") == [("doctors",), ("judge",)]  # q1 alone


def test_a_failed_write_raises_the_database_error_naming_its_table(tmp_path):
    """A refresh that fails raises DuckDB's own error, named by the table written and the one being refreshed — not
    a TransactionException of the clean-up — and the transaction leaves nothing half-written."""
    path = tmp_path / "r.duckdb"
    store = Store(path)
    _write_sources(store)
    con = duckdb.connect(str(path))  # a file whose derived table lost a column the refresh writes
    con.execute("ALTER TABLE score_groups RENAME COLUMN runs TO old_runs")
    con.close()
    with pytest.raises(duckdb.BinderException, match=r"writing queries \(refreshing score_groups\): .*runs"):
        store.write([_query(1, "ta")])  # a watched column changes: the refresh of its groups runs (and fails)
    assert store.fetch("SELECT language FROM queries WHERE query_id = 'q1'") == [("hi",)]


def test_the_refresh_order_is_computed_and_a_cycle_or_an_undeclared_read_fails():
    """The registry is ordered from the declared reads (every table after what it reads); a SELECT reading a table
    it does not declare, a cycle, an unknown table or placeholder fail — what ``schema`` runs at import."""
    base = {t: spec.columns for t, spec in TABLES.items() if t not in DERIVED}
    shipped = list(DERIVED.values())
    for order in (list(DERIVED), list(ordered(reversed(shipped), base)[0])):  # whatever order they are declared in
        assert set(order) == set(DERIVED)
        assert all(order.index(r) < order.index(d.name) for d in shipped for r in d.reads if r in DERIVED)

    def broken(name: str, **changes) -> list[Derived]:
        return [dataclasses.replace(d, **changes) if d.name == name else d for d in shipped]

    with pytest.raises(ValueError, match=r"score_groups: its SELECT reads \['item_scores'\], it declares"):
        ordered(broken("score_groups", reads=("judgments", "queries")), base)  # reads item_scores, declared not
    with pytest.raises(graphlib.CycleError):
        ordered(broken("item_scores", reads=("judgments", "responses", "jury_items")), base)
    with pytest.raises(ValueError, match="unknown tables"):
        ordered(broken("item_scores", reads=("judgments", "answers")), base)
    with pytest.raises(ValueError, match="unknown placeholder"):
        ordered(broken("item_scores", select=DERIVED["item_scores"].select + " {touchd}"), base)
    with pytest.raises(ValueError, match="watches"):
        ordered(broken("response_facts", watch=(("queries", ("language",)),)), base)  # not read, even through
    with pytest.raises(ValueError, match="declared twice"):
        ordered([*shipped, shipped[0]], base)
