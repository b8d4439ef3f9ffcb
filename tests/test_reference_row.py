"""The doctors' approved answers as a pseudo-model (``reference/approved``): the pipeline answers with each query's
approved answer (no LLM), scores it where the score does not compare with that answer (rubric, safety, pairwise
judge, arena) and skips it where it does (judge FC/SS, lexical); the boards show it as an unranked reference row.

The database is a real run of the pipeline: an OpenAI-compatible fixture server (not a model: it echoes, or gives
a JSON schema's first allowed values) answers, judges, grades and compares; nothing here depends on what an LLM
writes."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from pipeline.dataset.importers import NO_IDEAL
from pipeline.models.reference import (
    LABEL,
    REFERENCE_ID,
    ReferenceBackend,
    has_approved_answer,
    is_reference,
    label,
    reference_request,
    scorable,
)
from pipeline.store import Store
from pipeline.store.arena_rows import ArenaVoteRow
from tests.support.datasets import write_closed_book, write_config

FIXTURE = "openai-compatible/fixture"
EXTRACTIVE = "extractive/top-sentences"
MODELS = [REFERENCE_ID, FIXTURE, EXTRACTIVE]
APPROVED = 6  # queries with an approved answer (and a rubric); two more have none (a placeholder, a choice key)
RUBRIC = [{"criterion": "Says when the activity can be resumed", "points": 5, "tags": ["axis:completeness"]},
          {"criterion": "Advises asking the doctor at the follow-up visit", "points": 3, "tags": ["axis:accuracy"]}]


def build_reference_db(folder: Path) -> Path:
    """A results database written by the pipeline for the three models on a closed-book set of 8 queries (6 with an
    approved answer and a rubric), judged, graded and compared by the fixture server; then doctors' arena votes in
    which the approved answer beats both models on every question."""
    from rich.console import Console

    from pipeline.catalog import load_config
    from pipeline.runner import run
    from tests.support.openai_fixture import FixtureServer

    dataset = write_closed_book(folder / "qa", APPROVED, rubric=RUBRIC)
    with (dataset / "queries.jsonl").open("a", encoding="utf-8") as fh:
        for extra in ({"query_id": "x-noideal", "gt_response": NO_IDEAL},
                      {"query_id": "x-choice", "gt_response": "A. Yes", "options": {"A": "Yes", "B": "No"},
                       "answer": "A"}):
            fh.write(json.dumps({"language": "en", "query": f"Question {extra['query_id']}: may I rub my eye?",
                                 "query_en": None, "themes": [], "kb_refs": [], "update_sensitive": False,
                                 **extra}) + "\n")
    db = folder / "results.duckdb"
    with FixtureServer(latency_s=0.0) as server:
        fixture = {"id": FIXTURE, "base_url": server.base_url, "timeout": 5.0, "max_retries": 0, "max_tokens": 64}
        config = write_config(folder / "run.yaml", dataset=dataset, db=db,
                              models=[{"id": REFERENCE_ID}, fixture, {"id": EXTRACTIVE}],
                              judge=fixture, rubric_grader=fixture, pairwise={"max_tokens": 64})
        run(load_config(config), stages="generate,judge,lexical,safety,rubric,pairwise",
            console=Console(file=io.StringIO()))
    store = Store(db)
    texts = {(q, m): t for q, m, t in store.fetch("SELECT query_id, model_id, text FROM responses")}
    # the approved answer beats the fixture on 5 of 6 questions and the extractive baseline on 5 (one tie); the
    # fixture beats the baseline on 4: the order is reference, fixture, baseline
    exceptions = {(0, FIXTURE): FIXTURE, (1, EXTRACTIVE): "tie", (2, "pair"): EXTRACTIVE, (3, "pair"): EXTRACTIVE}
    votes = []
    for k, qid in enumerate(sorted(q for q, m in texts if m == REFERENCE_ID)):
        for first, second, slot in ((REFERENCE_ID, FIXTURE, FIXTURE), (REFERENCE_ID, EXTRACTIVE, EXTRACTIVE),
                                    (FIXTURE, EXTRACTIVE, "pair")):
            won = exceptions.get((k, slot), first)
            a, b = sorted((first, second))
            votes.append(ArenaVoteRow.of(dataset="qa", query_id=qid, model_a=a, model_b=b,
                                         winner="tie" if won == "tie" else "a" if won == a else "b",
                                         annotator="dr-ref", shown_left=a, tags=[], text_a=texts[(qid, a)],
                                         text_b=texts[(qid, b)], source="test"))
    store.write(votes)
    return db


@pytest.fixture(scope="module")
def reference_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reference_db(tmp_path_factory.mktemp("reference"))


def counts(db: Path, table: str) -> dict[str, int]:
    return dict(Store(db).fetch(f"SELECT model_id, count(*) FROM {table} GROUP BY ALL"))


def test_the_reference_is_one_id_and_answers_with_the_approved_text():
    assert is_reference(REFERENCE_ID) and not is_reference("openai/gpt-4o") and not is_reference("referee/x")
    assert label(REFERENCE_ID) == LABEL and label("openai/gpt-4o") == "openai/gpt-4o"
    from pipeline.config import ModelConfig
    from pipeline.dataset import Query
    from pipeline.models import GenerateParams, create_backend, unavailable_reason

    assert unavailable_reason(ModelConfig(id="reference/other")) is not None
    backend = create_backend(ModelConfig(id=REFERENCE_ID))
    assert isinstance(backend, ReferenceBackend) and not backend.billed
    query = Query(query_id="q1", language="en", query="When can I bathe?", gt_response="After a week.",
                  themes=[], kb_refs=[], update_sensitive=False)
    completion = asyncio.run(backend.complete(reference_request(query, GenerateParams())))
    assert completion.text == "After a week."
    assert has_approved_answer(query)
    assert not has_approved_answer(query.model_copy(update={"gt_response": NO_IDEAL}))
    assert not has_approved_answer(query.model_copy(update={"options": {"A": "x", "B": "y"}, "answer": "A"}))
    items = [{"model_id": REFERENCE_ID}, {"model_id": FIXTURE}]
    assert scorable("judge", items, lambda it: it["model_id"]) == [{"model_id": FIXTURE}]
    assert scorable("rubric", items, lambda it: it["model_id"]) == items
    from pipeline.catalog import catalog
    from pipeline.playground import model_choices, translator_choices

    config = catalog().config({"name": "x", "dataset": "data/cataract",
                               "models": [{"id": REFERENCE_ID}, {"id": EXTRACTIVE}]})
    assert {c.config.id: c.available for c in model_choices(config)} == {REFERENCE_ID: False, EXTRACTIVE: True}
    assert translator_choices(config) == []  # it answers no typed query, translates nothing


def test_the_reference_answers_only_approved_queries_with_their_text(reference_db: Path):
    store = Store(reference_db)
    gt = dict(store.fetch("SELECT query_id, gt_response FROM queries"))
    answers = dict(store.fetch("SELECT query_id, text FROM responses WHERE model_id = ? AND error IS NULL",
                               [REFERENCE_ID]))
    assert len(answers) == APPROVED and "x-noideal" not in answers and "x-choice" not in answers
    assert all(text == gt[qid] for qid, text in answers.items())
    assert counts(reference_db, "responses") == {REFERENCE_ID: APPROVED, FIXTURE: APPROVED + 2,
                                                 EXTRACTIVE: APPROVED + 2}
    no_llm = store.fetch("SELECT count(*) FROM llm_cache WHERE model_id = ?", [REFERENCE_ID])[0][0]
    tokens = store.fetch("SELECT sum(prompt_tokens) FROM responses WHERE model_id = ?", [REFERENCE_ID])[0][0]
    assert no_llm == APPROVED and tokens == 0  # cached like any answer, but nothing was prompted or billed


def test_scores_that_compare_with_the_reference_skip_it(reference_db: Path):
    from pipeline.read.common import Filters
    from pipeline.read.leaderboard import leaderboard, leaderboard_base

    judged, lexical = counts(reference_db, "judgments"), counts(reference_db, "lexical_scores")
    assert REFERENCE_ID not in judged and REFERENCE_ID not in lexical
    assert judged[FIXTURE] > 0 and lexical[FIXTURE] == APPROVED + 2
    board = leaderboard(leaderboard_base(reference_db, Filters(dataset="qa"), FIXTURE), (0.4, 0.3, 0.15, 0.15), "en")
    assert set(board.model_id) == {FIXTURE, EXTRACTIVE}  # the FC/SS board has no reference row (the page says why)


def test_rubric_safety_and_pairwise_score_the_reference(reference_db: Path):
    assert counts(reference_db, "rubric_grades")[REFERENCE_ID] == APPROVED * len(RUBRIC)
    assert counts(reference_db, "safety_checks")[REFERENCE_ID] >= APPROVED
    store = Store(reference_db)
    pairs = store.fetch("SELECT count(*) FROM pairwise_verdicts WHERE model_a = ? OR model_b = ?",
                        [REFERENCE_ID, REFERENCE_ID])[0][0]
    assert pairs == APPROVED * 2 * 2  # against each model, in both orders
    gt = [t for (t,) in store.fetch("SELECT text FROM responses WHERE model_id = ?", [REFERENCE_ID])]
    with_reference = without = 0
    for (request,) in store.fetch("SELECT request FROM llm_cache WHERE request LIKE '%Response B:%'"):
        user = json.loads(request)["messages"][-1]["content"]
        if any(f"Response A: {t}\n" in user or f"Response B: {t}\n" in user for t in gt):
            with_reference += 1
            assert "Ground-truth reference:" not in user  # the judge is not shown one of the answers as the truth
        else:
            without += 1
            assert "Ground-truth reference:" in user
    assert with_reference == pairs and without > 0


def test_boards_mark_the_reference_unranked(reference_db: Path):
    from pipeline.read import arena
    from pipeline.read.rubric import rubric_leaderboard

    board = rubric_leaderboard(reference_db, "qa", FIXTURE, n_bootstrap=50)
    overall = board[board.language == "all"].set_index("model_id")
    assert set(overall.index) == set(MODELS)
    assert overall["rank"].isna()[REFERENCE_ID] and overall["rank"].drop(REFERENCE_ID).notna().all()
    assert sorted(overall["rank"].dropna().astype(int)) in ([1, 2], [1, 1])  # the models ranked among themselves
    doctors = arena.leaderboard(reference_db, "qa", rounds=20)
    assert list(doctors.model) == [REFERENCE_ID, FIXTURE, EXTRACTIVE]  # it won every vote: first, but unranked
    assert doctors["rank"].isna().tolist() == [True, False, False] and list(doctors["rank"].dropna()) == [1, 2]
    assert set(arena.separation(reference_db, "qa", None, doctors).get("higher", [])) <= {FIXTURE, EXTRACTIVE}
    judge = arena.leaderboard(reference_db, "qa", source="judge", judge=FIXTURE, rounds=20)
    assert REFERENCE_ID in set(judge.model) and judge.set_index("model")["rank"].isna()[REFERENCE_ID]
