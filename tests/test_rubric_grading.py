"""HealthBench rubric grading: the grader prompt, parsing, the step end to end on the HealthBench fixture with the
embedded grader, and the read models' scores against hand computations over met flags (stored by the run, or
written directly so that negative points, unparsed grades, stale grades and clipping of the mean are controlled).

What the tiny grader decides is never asserted: only what the pipeline guarantees about it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from pipeline.analysis.rubric import calculate_score, item_scores, score_from_sums, tag_breakdown
from pipeline.catalog import catalog
from pipeline.dataset import Query, load_dataset, validate
from pipeline.dataset.importers import import_qa
from pipeline.labels.criterion_labels import import_criterion_labels_command
from pipeline.read.rubric import (
    ALL_LANGUAGES,
    grader_meta_eval,
    grades_frame,
    item_sums,
    rubric_graders,
    rubric_item,
    rubric_leaderboard,
    rubric_tags,
)
from pipeline.runner import parse_stages, print_dry_run, run, select_queries
from pipeline.steps.rubric import conversation_text, grader_messages, parse_grade, rubric_item_text
from pipeline.store import Store, text_hash
from pipeline.store.rows import ResponseRow, RubricGradeRow, dataset_rows

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "qa" / "healthbench_oss_eval.jsonl"
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
GRADER = "openai/grader-x"

# The rubrics of tests/test_analysis_rubric.py (its expected figures hold here too), with the example tags
# copied onto every criterion as the HealthBench importer does, and a dataset theme on q3.
EMERGENCY, GLOBAL = "theme:emergency", "theme:global_health"
RUBRICS = {
    "q1": [(5, ["axis:accuracy", "level:example", EMERGENCY]), (3, ["axis:completeness", EMERGENCY]),
           (-4, ["axis:accuracy", EMERGENCY]), (2, ["axis:communication", EMERGENCY])],
    "q2": [(4, ["axis:accuracy", EMERGENCY, GLOBAL]), (-6, ["axis:accuracy", EMERGENCY, GLOBAL]),
           (2, ["axis:completeness", EMERGENCY, GLOBAL])],
    "q3": [(3, ["axis:completeness", GLOBAL]), (-2, ["axis:communication", GLOBAL])],
}
LANGUAGE = {"q1": "en", "q2": "en", "q3": "hi"}
# model -> query -> met flags per criterion (None = unparsed)
MET = {
    "m1": {"q1": [True, False, True, True], "q2": [False, True, False], "q3": [True, False]},
    "m2": {"q1": [True, True, False, True], "q2": [True, None, True], "q3": [False, True]},
    "m3": {"q1": [True, True, True, True], "q2": [False, True, False], "q3": [False, True]},
}
STALE = ("m3", "q1", 3)  # this grade scored an older text of the response: it does not count


def criterion_text(qid: str, i: int) -> str:
    return f"Criterion {i} of {qid}."


def hand_item_score(qid: str, met: list[bool | None]) -> float | None:
    """Σ points of met criteria ÷ Σ positive points; None when a criterion is unparsed."""
    if any(m is None for m in met):
        return None
    points = [p for p, _ in RUBRICS[qid]]
    return sum(p for p, m in zip(points, met, strict=True) if m) / sum(p for p in points if p > 0)


def hand_model_score(scores: list[float | None]) -> float:
    scored = [s for s in scores if s is not None]
    return min(1.0, max(0.0, sum(scored) / len(scored)))


def write_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for qid, rubric in RUBRICS.items():
        row = {"query_id": qid, "language": LANGUAGE[qid], "query": f"Question {qid}?", "gt_response": "Answer.",
               "rubric": [{"criterion": criterion_text(qid, i), "points": p, "tags": t}
                          for i, (p, t) in enumerate(rubric)]}
        if LANGUAGE[qid] != "en":
            row.update(query_en=f"Question {qid}?", themes=["cultural"])
        rows.append(row)
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.fixture
def graded_db(tmp_path: Path) -> Path:
    """A database holding the dataset, a response per (model, query) and the MET flags as rubric grades."""
    dataset = load_dataset(write_dataset(tmp_path / "rubric-set"))
    db = tmp_path / "graded.duckdb"
    store = Store(db)
    store.write(dataset_rows(dataset))
    rows: list = []
    for model, per_query in MET.items():
        for qid, flags in per_query.items():
            text = f"{model} answers {qid}."
            rows.append(ResponseRow(dataset=dataset.name, query_id=qid, model_id=model, run_id="r", prompt_hash="p",
                                    text=text, error=None))
            for i, met in enumerate(flags):
                points, tags = RUBRICS[qid][i]
                stale = (model, qid, i) == STALE
                rows.append(RubricGradeRow(
                    dataset=dataset.name, query_id=qid, model_id=model, grader_id=GRADER, criterion_index=i,
                    criterion=criterion_text(qid, i), points=points, tags=tags, met=met, explanation=f"why {i}",
                    raw_output=json.dumps({"explanation": f"why {i}", "criteria_met": met}),
                    response_hash=text_hash("an older text" if stale else text), run_id="r"))
                # another grader's verdicts are not this grader's
                rows.append(RubricGradeRow(
                    dataset=dataset.name, query_id=qid, model_id=model, grader_id="other/grader", criterion_index=i,
                    criterion=criterion_text(qid, i), points=points, tags=tags, met=not met, explanation="",
                    raw_output="", response_hash=text_hash(text), run_id="r"))
    store.write(rows)
    return db


# -- prompt and parsing ------------------------------------------------------------------------------------
def test_grader_prompt_shows_the_conversation_the_response_and_the_rubric_item() -> None:
    turns = [{"role": "user", "content": "My mother had cataract surgery."},
             {"role": "assistant", "content": "How can I help?"},
             {"role": "user", "content": "Can she stop her drops?"}]
    query = Query.model_validate({"query_id": "hb-1", "language": "en", "query": turns[-1]["content"],
                                  "gt_response": "No.", "messages": turns,
                                  "rubric": [{"criterion": "Advises asking the eye team.", "points": 8},
                                             {"criterion": "Advises stopping the drops now.", "points": -8}]})
    criterion = query.rubric[1]
    system, user = grader_messages(query, "Keep using them until the eye team says.", criterion)
    assert conversation_text(query, "R.") == ("user: My mother had cataract surgery.\n\nassistant: How can I help?"
                                              "\n\nuser: Can she stop her drops?\n\nassistant: R.")
    assert rubric_item_text(criterion) == "[-8] Advises stopping the drops now."  # HealthBench's RubricItem str
    assert "assistant: Keep using them until the eye team says." in user["content"]
    content = user["content"]
    assert content.index("# Conversation") < content.index("# Rubric item") < content.index("[-8] Advises stopping")
    assert '"criteria_met"' in system["content"] and '"explanation"' in system["content"]
    assert "negative points" in system["content"] and "{{" not in system["content"] + user["content"]
    single = Query.model_validate({"query_id": "q", "language": "en", "query": "Can I shave?", "gt_response": "Yes."})
    assert conversation_text(single, "Yes.") == "user: Can I shave?\n\nassistant: Yes."


# What HealthBench's reference grader (openai/simple-evals ``healthbench_eval.py``: ``parse_json_to_dict``, then the
# check in ``grade_sample``) counts, written out by hand: a verdict it counts, or None (it asks again).
GRADER_OUTPUTS = [
    ('{"explanation": "It says so.", "criteria_met": true}', True, "It says so."),
    ('```json\n{"criteria_met": false, "explanation": "No."}\n```', False, "No."),
    ('Here: {"explanation": "x", "criteria_met": false} done', None, ""),  # prose around the object
    ('{"explanation": "x", "criteria_met": "false"}', None, "x"),  # a string is not a boolean
    ('{"explanation": "x", "criteria_met": true,}', None, ""),  # trailing comma: not JSON
    ("criteria_met: true", None, ""),
    ('{"criteria_met": 1, "explanation": "one"}', None, "one"),  # 1 is not True for `label is True`
    ('```\n{"criteria_met": true}\n```', None, ""),  # only a ```json fence is stripped
    ('[{"criteria_met": true}]', None, ""),
    ('{"explanation": "cut off", "criteria_met": "maybe"}', None, "cut off"),  # kept, though unparsed
    ("I cannot decide.", None, ""),
    ("", None, ""),
]


@pytest.mark.parametrize(("raw", "met", "explanation"), GRADER_OUTPUTS)
def test_parse_grade_never_guesses(raw: str, met: bool | None, explanation: str) -> None:
    assert parse_grade(raw) == (met, explanation)


def test_score_from_sums_is_calculate_score() -> None:
    for qid, flags in MET["m1"].items():
        rubric = [{"points": p} for p, _ in RUBRICS[qid]]
        achieved = sum(p for (p, _), m in zip(RUBRICS[qid], flags, strict=True) if m)
        possible = sum(p for p, _ in RUBRICS[qid] if p > 0)
        assert score_from_sums([achieved], [possible])[0] == pytest.approx(calculate_score(rubric, flags))
    assert np.isnan(score_from_sums([3], [5], [1])).all() and np.isnan(score_from_sums([-2], [0])).all()


# -- read models over controlled met flags --------------------------------------------------------------------
def test_item_and_model_scores_equal_a_hand_computation(graded_db: Path) -> None:
    sums = item_sums(graded_db, "rubric-set", GRADER).set_index(["model_id", "query_id"])
    for model, per_query in MET.items():
        for qid, flags in per_query.items():
            expected = None if (model, qid) == STALE[:2] else hand_item_score(qid, flags)
            got = sums.loc[(model, qid), "score"]
            assert (np.isnan(got) if expected is None else got == pytest.approx(expected)), (model, qid)
    assert sums.loc[("m1", "q2"), "score"] == pytest.approx(-1.0)  # a met harmful criterion: below 0

    board = rubric_leaderboard(graded_db, "rubric-set", GRADER, n_bootstrap=200)
    overall = board[board.language == ALL_LANGUAGES].set_index("model_id")
    m1 = [hand_item_score(q, f) for q, f in MET["m1"].items()]
    m2 = [hand_item_score(q, f) for q, f in MET["m2"].items()]
    m3 = [hand_item_score(q, f) for q, f in MET["m3"].items() if q != "q1"]
    assert overall.loc["m1", "score"] == pytest.approx(hand_model_score(m1)) == pytest.approx(0.1)
    assert overall.loc["m2", "score"] == pytest.approx(hand_model_score(m2)) == pytest.approx((1 - 2 / 3) / 2)
    assert overall.loc["m3", "score"] == 0.0 == hand_model_score(m3)  # the mean (−0.83) is clipped, not the items
    assert overall.loc["m2", ["n_items", "n_scored", "n_unscored", "n_unparsed", "n_ungraded"]].tolist() == [
        3, 2, 1, 1, 0]
    assert overall.loc["m3", ["n_items", "n_scored", "n_unscored", "n_unparsed", "n_ungraded"]].tolist() == [
        3, 2, 1, 0, 1]
    assert overall["rank"].to_dict() == {"m2": 1, "m1": 2, "m3": 3}
    assert list(board.language) == ["all"] * 3 + ["en"] * 3 + ["hi"] * 3
    per_lang = board.set_index(["model_id", "language"])
    assert per_lang.loc[("m1", "en"), "score"] == 0.0  # mean(0.3, −1.0) clipped
    assert per_lang.loc[("m1", "hi"), "score"] == pytest.approx(1.0)
    assert per_lang.loc[("m2", "en"), ["score", "n_scored", "n_unscored"]].tolist() == [1.0, 1, 1]
    m1_all = overall.loc["m1"]
    assert m1_all.ci_lo <= m1_all.score <= m1_all.ci_hi and m1_all.bootstrap_std > 0
    assert rubric_graders(graded_db, "rubric-set").set_index("grader_id")["unparsed"].to_dict() == {
        GRADER: 1, "other/grader": 0}


def test_tag_breakdown_is_healthbench_s(graded_db: Path) -> None:
    tags = rubric_tags(graded_db, "rubric-set", GRADER, n_bootstrap=200)
    m1 = tags[tags.model_id == "m1"].set_index("tag")
    expected = {  # tests/test_analysis_rubric.py's hand figures for the same flags
        "overall_score": ("overall", 0.1, 3), EMERGENCY: ("example", 0.0, 2), GLOBAL: ("example", 0.0, 2),
        "axis:accuracy": ("rubric", 0.0, 2), "axis:completeness": ("rubric", 1 / 3, 3),
        "axis:communication": ("rubric", 1.0, 1), "level:example": ("rubric", 1.0, 1),
        "query_theme:cultural": ("example", 1.0, 1),  # q3's dataset theme selects q3
    }
    assert set(m1.index) == set(expected)
    for tag, (kind, score, n) in expected.items():
        assert (m1.loc[tag, "kind"], m1.loc[tag, "n_samples"]) == (kind, n), tag
        assert m1.loc[tag, "score"] == pytest.approx(score), tag
    # the frame the read model hands to analysis.rubric scores items exactly as the leaderboard does
    grades = grades_frame(graded_db, "rubric-set", GRADER)
    for model, rows in grades.groupby("model_id"):
        by_item = item_scores(rows)
        sums = item_sums(graded_db, "rubric-set", GRADER).query("model_id == @model").set_index("query_id")
        np.testing.assert_allclose(by_item.to_numpy(), sums.loc[by_item.index, "score"].to_numpy())
        table = tag_breakdown(rows, n_bootstrap=200)
        mine = tags[tags.model_id == model].set_index("tag")
        np.testing.assert_allclose(mine.loc[table.index, "score"], table["score"])


def test_rubric_item_shows_each_criterion(graded_db: Path) -> None:
    m1 = rubric_item(graded_db, "rubric-set", "q1", "m1", GRADER)
    crit = m1["criteria"]
    assert list(crit.status) == ["met", "not met", "met", "met"] and list(crit.points) == [5, 3, -4, 2]
    assert list(crit.explanation) == [f"why {i}" for i in range(4)] and not crit.stale.any()
    assert m1["score"] == pytest.approx(0.3) and (m1["achieved"], m1["possible"]) == (3, 10)
    m2 = rubric_item(graded_db, "rubric-set", "q2", "m2", GRADER)
    assert list(m2["criteria"].status) == ["met", "unparsed", "met"] and m2["score"] is None
    assert m2["n_unparsed"] == 1 and pd.isna(m2["criteria"].met[1])
    m3 = rubric_item(graded_db, "rubric-set", "q1", "m3", GRADER)
    assert list(m3["criteria"].status) == ["met", "met", "met", "not graded"] and m3["criteria"].stale[3]
    assert m3["score"] is None and m3["n_ungraded"] == 1
    assert rubric_item(graded_db, "rubric-set", "q9", "m1", GRADER)["criteria"].empty


def test_a_database_without_rubric_tables_reads_as_empty(graded_db: Path) -> None:
    import duckdb

    with duckdb.connect(str(graded_db)) as con:
        for table in ("rubric_grades", "criterion_labels", "rubric_items", "rubric_tag_items"):  # as an older file
            con.execute(f"DROP TABLE {table}")
    assert rubric_leaderboard(graded_db, "rubric-set", GRADER).empty
    assert rubric_tags(graded_db, "rubric-set", GRADER).empty and rubric_graders(graded_db, "rubric-set").empty
    assert rubric_item(graded_db, "rubric-set", "q1", "m1", GRADER)["score"] is None
    assert grader_meta_eval(graded_db, "rubric-set", GRADER).empty


# -- physician labels and the grader's meta-evaluation --------------------------------------------------------
def _import(tmp_path: Path, db: Path, text: str, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    path = tmp_path / "labels.csv"
    path.write_text(text, encoding="utf-8")
    code = import_criterion_labels_command(path, db=db)
    return code, capsys.readouterr().err


def test_meta_eval_by_hand(graded_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # m1 on q1: the grader said met, not met, met, met
    lines = ["query_id,model_id,criterion,annotator,met"]
    for doctor, labels in (("dr-a", ["true", "false", "0", "1"]), ("dr-b", ["1", "TRUE", "true", "true"])):
        lines += [f"q1,m1,{i},{doctor},{m}" for i, m in enumerate(labels)]
    lines.append("q2,m2,  criterion 1 OF q2. ,dr-a,false")  # by text; the grader's output was unparsed
    code, err = _import(tmp_path, graded_db, "\n".join(lines) + "\n", capsys)
    assert code == 0, err
    table = grader_meta_eval(graded_db, "rubric-set", GRADER).set_index(["group", "category"])
    overall = table.loc[("overall", "overall_score")]
    # pairs (grader, doctor): TP 5, FP 1, FN 1, TN 1
    assert (overall.n_criteria, overall.n_pairs, overall.n_unparsed) == (4, 8, 1)
    assert overall.agreement == pytest.approx(6 / 8)
    assert overall.f1_pos == pytest.approx(10 / 12) and overall.f1_neg == pytest.approx(0.5)
    assert overall.macro_f1 == pytest.approx((10 / 12 + 0.5) / 2)
    accuracy = table.loc[("tag", "axis:accuracy")]  # criteria 0 and 2: grader met, met; doctors (T, T), (F, T)
    assert (accuracy.n_pairs, accuracy.agreement) == (4, pytest.approx(3 / 4))
    assert table.loc[("language", "en"), "n_pairs"] == 8


def test_import_names_every_bad_line_and_writes_nothing(graded_db: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    text = ("query_id,model_id,criterion,annotator,met\n"
            "q1,m1,0,dr-a,true\n"            # 2: fine
            "q1,m1,9,dr-a,true\n"            # 3: index out of range
            "q1,m1,No such criterion.,dr-a,1\n"  # 4: text not in the rubric
            "q1,m1,1,dr-a,maybe\n"           # 5: met not a boolean
            "q1,,2,dr-a,true\n"              # 6: no model, three answered
            "q1,m9,2,dr-a,true\n"            # 7: unknown model
            "q9,m1,0,dr-a,true\n"            # 8: no such query
            "q1,m1,Criterion 0 of q1.,dr-a,false\n"  # 9: repeats line 2 (same criterion, by text)
            "q1,m1,3,,true\n")               # 10: no annotator
    code, err = _import(tmp_path, graded_db, text, capsys)
    assert code == 1
    for line, reason in ((3, "out of range"), (4, "not in the query's rubric"), (5, "not true, false, 1 or 0"),
                         (6, "3 models answered"), (7, "model 'm9' has no response"), (8, "has no rubric"),
                         (9, "repeats line 2"), (10, "missing annotator")):
        assert f"labels.csv:line {line}: " in err and reason in err, (line, err)
    assert "labels.csv:line 2:" not in err and "8 bad row(s); nothing imported" in " ".join(err.split())
    assert Store(graded_db).fetch("SELECT count(*) FROM criterion_labels") == [(0,)]
    code, err = _import(tmp_path, graded_db, "query_id,criterion,met\nq1,0,true\n", capsys)
    assert code == 1 and "header lacks column(s) annotator" in err


# -- the run: config, stages, dry run ----------------------------------------------------------------------
def test_rubric_stage_needs_a_grader_and_the_dry_run_counts_its_calls(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "rubric-set")
    base = {"name": "t", "dataset": str(folder), "db": str(tmp_path / "r.duckdb"),
            "models": [{"id": "extractive/top-sentences"}, {"id": SMOLLM2, "languages": ["en"]}]}
    assert "rubric" not in parse_stages(None, catalog().config(base))
    from pipeline.errors import UserError
    with pytest.raises(UserError, match="no `rubric_grader:` section"):
        parse_stages("rubric", catalog().config(base))
    config = catalog().config({**base, "rubric_grader": SMOLLM2})
    assert parse_stages(None, config).index("rubric") == parse_stages(None, config).index("generate") + 1
    assert config.model_config_for(SMOLLM2).id == SMOLLM2
    dataset = load_dataset(folder)
    out = io.StringIO()
    print_dry_run(config, dataset, select_queries(dataset, config), ["generate", "rubric"],
                  Console(file=out, width=200))
    # extractive answers all 3 queries (9 criteria), SmolLM2 the 2 English ones (7 criteria)
    assert "rubric 16" in out.getvalue() and "rubric grader" in out.getvalue()


# -- end to end with a grader whose every verdict is known ---------------------------------------------------
def test_a_grader_with_known_verdicts_gives_the_hand_scores(tmp_path: Path) -> None:
    """The fixture server grades each criterion as MET["m2"] says (None: prose, unparsed): the stored grades and the
    scores are those flags' hand computations."""
    from tests.support.openai_fixture import FixtureServer

    folder = write_dataset(tmp_path / "rubric-set")
    replies = {criterion_text(qid, i): "I cannot decide." if met is None else json.dumps(
        {"explanation": f"verdict {i} on {qid}", "criteria_met": met})
        for qid, flags in MET["m2"].items() for i, met in enumerate(flags)}
    with FixtureServer(latency_s=0.0) as answers, FixtureServer(latency_s=0.0, replies=replies) as grader:
        config = catalog().config({
            "name": "known", "dataset": str(folder), "db": str(tmp_path / "known.duckdb"),
            "models": [{"id": "openai-compatible/m2", "base_url": answers.base_url}],
            "rubric_grader": {"id": "openai-compatible/grader", "base_url": grader.base_url}})
        run(config, stages="generate,rubric", console=Console(file=io.StringIO()))
    grades = Store(config.db).fetch("SELECT query_id, criterion_index, met, explanation FROM rubric_grades")
    assert sorted(grades, key=str) == sorted(
        [(q, i, m, "" if m is None else f"verdict {i} on {q}") for q, flags in MET["m2"].items()
         for i, m in enumerate(flags)], key=str)
    board = rubric_leaderboard(config.db, "rubric-set", "openai-compatible/grader", n_bootstrap=50)
    overall = board[board.language == ALL_LANGUAGES].set_index("model_id").loc["openai-compatible/m2"]
    assert overall.score == pytest.approx((1 - 2 / 3) / 2)  # q1 1.0, q3 −2/3, q2 unparsed: not scored
    assert overall[["n_items", "n_scored", "n_unparsed"]].tolist() == [3, 2, 1]
    detail = rubric_item(config.db, "rubric-set", "q1", "openai-compatible/m2", "openai-compatible/grader")
    assert list(detail["criteria"].status) == ["met", "met", "not met", "met"] and detail["score"] == 1.0


# -- end to end on the HealthBench fixture with the embedded grader --------------------------------------------
@pytest.mark.slow
def test_healthbench_fixture_imports_validates_and_grades_end_to_end(tmp_path: Path) -> None:
    folder = import_qa("healthbench", FIXTURE, tmp_path / "healthbench")[0].parent
    dataset, issues = validate(folder)
    assert dataset is not None and not [i for i in issues if i.severity == "error"]
    db = tmp_path / "hb.duckdb"
    config = catalog().config({
        "name": "hb", "dataset": str(folder), "db": str(db), "models": [{"id": "extractive/top-sentences"}],
        "rubric_grader": {"id": SMOLLM2, "max_tokens": 32}, "concurrency": 2})
    run(config, stages="generate,rubric", console=Console(file=io.StringIO()))
    store = Store(db)
    grades = store.fetch_df("SELECT * FROM rubric_grades ORDER BY query_id, criterion_index")
    n_criteria = sum(len(q.rubric) for q in dataset.queries)
    assert len(grades) == n_criteria and set(grades.grader_id) == {SMOLLM2}
    for g in grades.itertuples():
        met, explanation = parse_grade(g.raw_output)  # what is stored is what the grader's output says
        assert (None if pd.isna(g.met) else bool(g.met)) == met and g.explanation == explanation
    # the multi-turn item's grader saw its whole conversation and the response
    multi = next(q for q in dataset.queries if q.messages and len(q.messages) > 1)
    response = store.fetch("SELECT text FROM responses WHERE query_id = ?", [multi.query_id])[0][0]
    requests = [json.loads(r) for (r,) in store.fetch("SELECT request FROM llm_cache WHERE model_id = ?", [SMOLLM2])]
    users = [m["content"] for r in requests for m in r["messages"] if m["role"] == "user"]
    assert sum(conversation_text(multi, response) in u for u in users) == len(multi.rubric)

    # scores in the read model = a hand computation over the stored met flags
    board = rubric_leaderboard(db, dataset.name, SMOLLM2, n_bootstrap=100)
    row = board[board.language == ALL_LANGUAGES].iloc[0]
    hand = []
    for qid, rows in grades.groupby("query_id"):
        flags = [None if pd.isna(m) else bool(m) for m in rows.met]
        points = list(rows.points)
        item = None if None in flags else sum(p for p, m in zip(points, flags, strict=True) if m) / sum(
            p for p in points if p > 0)
        hand.append(item)
        detail = rubric_item(db, dataset.name, qid, "extractive/top-sentences", SMOLLM2)
        assert detail["score"] == (None if item is None else pytest.approx(item))
        assert list(detail["criteria"].explanation) == list(rows.explanation)
    scored = [s for s in hand if s is not None]
    assert row.n_items == len(hand) and row.n_scored == len(scored)
    assert row.n_unparsed == int(grades.met.isna().sum())
    if scored:
        assert row.score == pytest.approx(min(1.0, max(0.0, sum(scored) / len(scored))))
    else:
        assert np.isnan(row.score)

    # a rerun grades nothing again but what stayed unparsed (config reask: at most 3 new attempts each)
    unparsed = int(grades.met.isna().sum())
    run_id = run(config, stages="generate,rubric", console=Console(file=io.StringIO()))
    summary = json.loads(store.fetch("SELECT summary FROM runs WHERE run_id = ?", [run_id])[0][0])
    calls = sum(s["backend_calls"] for s in summary)
    assert calls <= 3 * unparsed and (calls == 0) == (unparsed == 0)
    assert store.fetch("SELECT count(*) FROM rubric_grades")[0][0] == n_criteria
