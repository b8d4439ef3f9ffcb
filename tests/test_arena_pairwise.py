"""The pairwise judge stage: both orders judged and stored; a judge that always prefers the first position flips
every pair (each a tie), and the bias view shows a 100 % flip rate."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.catalog import load_config
from pipeline.read import arena
from pipeline.runner import run
from pipeline.steps.pairwise import in_model_terms, parse_verdict
from pipeline.store import open_connection
from tests.support.datasets import write_closed_book, write_config
from tests.support.openai_fixture import FixtureServer

GENERATORS = ("openai-compatible/fixture-a", "openai-compatible/fixture-b", "openai-compatible/fixture-c")
FIRST_ALWAYS = json.dumps({"Reason": "The first response is better.", "Winner": "A"})


def rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with open_connection(db, read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"Reason": "B cites the update", "Winner": "B"}', "B"),
    ('```json\n{"reason": "same", "winner": "Tie"}\n```', "tie"),
    ("Winner: Response A", "A"),
    ('{"Winner": "both"}', None),
    ("A is better. Winner: A. Actually Winner: B", None),
    ("", None),
])
def test_parse_verdict(raw: str, expected: str | None):
    assert parse_verdict(raw) == expected


def test_verdicts_turn_into_the_models_terms():
    assert in_model_terms("A", "m1", "m1", "m2") == "a" and in_model_terms("A", "m2", "m1", "m2") == "b"
    assert in_model_terms("B", "m2", "m1", "m2") == "a" and in_model_terms("tie", "m2", "m1", "m2") == "tie"
    assert in_model_terms(None, "m1", "m1", "m2") is None


def test_a_judge_that_always_prefers_the_first_position_flips_every_pair(tmp_path: Path):
    dataset = write_closed_book(tmp_path / "qa", 5)
    db = tmp_path / "results.duckdb"
    with FixtureServer(latency_s=0.0, reply=FIRST_ALWAYS) as server:
        models = [{"id": m, "base_url": server.base_url} for m in GENERATORS]
        config = load_config(write_config(
            tmp_path / "first.yaml", dataset=dataset, db=db, models=models,
            judge={"id": "openai-compatible/fixture-judge", "base_url": server.base_url}, pairwise={}))
        run(config, stages="generate,pairwise", console=Console(file=io.StringIO()))
    verdicts = rows(db, "SELECT query_id, model_a, model_b, first, verdict, parse_ok FROM pairwise_verdicts")
    assert len(verdicts) == 5 * 3 * 2  # 5 queries x 3 pairs x both orders
    assert all(ok for *_, ok in verdicts)
    for _, a, _, first, verdict, _ in verdicts:  # the verdict always names the model shown first
        assert verdict == ("a" if first == a else "b")
    flips = arena.position_flips(db, "qa", "openai-compatible/fixture-judge")
    assert flips.comparisons.sum() == 15 and flips.flips.sum() == 15
    assert flips.flip_rate.tolist() == [1.0] and flips.first_wins.tolist() == [1.0]
    board = arena.comparisons(db, "qa", source="judge", judge="openai-compatible/fixture-judge")
    assert set(board.outcome) == {"tie"} and board.n.sum() == 15
    # the CLI's judge leaderboard: every model, each in 10 comparisons (5 queries x 2 opponents), all ties
    from typer.testing import CliRunner

    from pipeline.cli import app

    result = CliRunner().invoke(app, ["arena", "leaderboard", "--db", str(db), "--source", "judge", "--format",
                                      "json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert sorted(r["model"] for r in printed) == sorted(GENERATORS) and {r["votes"] for r in printed} == {10}
    assert all(abs(r["strength"] - 1000) < 1e-6 for r in printed)  # ties only: equal strengths
    # a rerun judges nothing again (both orders of every pair are stored for the same texts)
    with FixtureServer(latency_s=0.0, reply=FIRST_ALWAYS) as server:
        models = [{"id": m, "base_url": server.base_url} for m in GENERATORS]
        config = load_config(write_config(
            tmp_path / "first.yaml", dataset=dataset, db=db, models=models,
            judge={"id": "openai-compatible/fixture-judge", "base_url": server.base_url}, pairwise={}))
        run(config, stages="pairwise", console=Console(file=io.StringIO()))
        assert server.stats()["requests"] == 0


# A fixture judge whose verdict on each query is known (the key is in the prompt's query): A (the response shown
# first), B (the one shown second), a tie, prose naming no winner, and a winner that is not A, B or tie.
KNOWN_REPLIES = {
    "Question 0:": json.dumps({"Reason": "The first is better.", "Winner": "A"}),
    "Question 1:": json.dumps({"Reason": "The second is better.", "Winner": "B"}),
    "Question 2:": json.dumps({"Reason": "They are alike.", "Winner": "tie"}),
    "Question 3:": "I would rather not say which one I prefer.",
    "Question 4:": json.dumps({"Reason": "Both.", "Winner": "both"}),
}


def _judged_by_known_verdicts(tmp_path: Path, stages: str) -> tuple[Path, dict]:
    """5 queries answered by the three fixture generators and judged pairwise by the known-verdict judge; the
    database and the judge server's request counts."""
    dataset = tmp_path / "qa"
    if not dataset.exists():
        write_closed_book(dataset, 5)
    db = tmp_path / "results.duckdb"
    with FixtureServer(latency_s=0.0) as generators, FixtureServer(latency_s=0.0, replies=KNOWN_REPLIES) as judge:
        config = load_config(write_config(
            tmp_path / "known.yaml", dataset=dataset, db=db,
            models=[{"id": m, "base_url": generators.base_url} for m in GENERATORS],
            judge={"id": "openai-compatible/known-judge", "base_url": judge.base_url}, pairwise={},
            reask={"times": 1}))
        run(config, stages=stages, console=Console(file=io.StringIO()))
        return db, judge.stats()


def test_a_judge_with_known_verdicts_is_stored_in_the_models_terms(tmp_path: Path):
    db, stats = _judged_by_known_verdicts(tmp_path, "generate,pairwise")
    # every pair of every query in both orders (30), the 12 unreadable ones asked once more (reask.times 1)
    assert stats["requests"] == 30 + 12
    stored = rows(db, "SELECT query_id, model_a, model_b, first, verdict, parse_ok FROM pairwise_verdicts")
    expected = []
    for q, a, b in [(f"q{i:05d}", a, b) for i in range(5) for a, b in
                    ((GENERATORS[0], GENERATORS[1]), (GENERATORS[0], GENERATORS[2]), (GENERATORS[1], GENERATORS[2]))]:
        for first in (a, b):
            said = {"q00000": "first", "q00001": "second", "q00002": "tie"}.get(q)
            if said == "tie":
                verdict = "tie"
            elif said is None:
                verdict = None
            else:  # the model shown first (or second), named as a or b of the pair
                verdict = "a" if (first == a) == (said == "first") else "b"
            expected.append((q, a, b, first, verdict, verdict is not None))
    assert sorted(stored, key=str) == sorted(expected, key=str)
    assert Counter(v for *_, v, _ in stored) == {"a": 6, "b": 6, "tie": 6, None: 12}  # every branch, counted
    # a rerun asks again only what stayed unreadable (2 queries x 3 pairs x 2 orders, twice each), stores the same
    db, again = _judged_by_known_verdicts(tmp_path, "pairwise")
    assert again["requests"] == 12 * 2
    assert sorted(rows(db, "SELECT query_id, model_a, model_b, first, verdict, parse_ok FROM pairwise_verdicts"),
                  key=str) == sorted(expected, key=str)


def test_the_embedded_judge_stores_both_orders_of_every_judged_pair(tmp_path: Path):
    """SmolLM2 as the judge: whatever it says, both orders of every pair are stored with its raw output, and a
    verdict is stored exactly when it was read."""
    dataset = write_closed_book(tmp_path / "qa", 3)
    db = tmp_path / "results.duckdb"
    with FixtureServer(latency_s=0.0) as server:
        models = [{"id": m, "base_url": server.base_url} for m in GENERATORS[:2]]
        config = load_config(write_config(
            tmp_path / "smol.yaml", dataset=dataset, db=db, models=models,
            judge={"id": "llamacpp/smollm2-135m-instruct", "max_tokens": 60}, pairwise={"max_tokens": 60}))
        run(config, stages="generate,pairwise", console=Console(file=io.StringIO()))
    stored = rows(db, "SELECT query_id, model_a, model_b, list(first ORDER BY first), count(*), "
                      "bool_and(raw_output <> '') FROM pairwise_verdicts GROUP BY ALL ORDER BY 1")
    assert [r[0] for r in stored] == ["q00000", "q00001", "q00002"]
    for _, a, b, firsts, n, has_raw in stored:
        assert n == 2 and firsts == sorted([a, b]) and has_raw
    for verdict, ok in rows(db, "SELECT verdict, parse_ok FROM pairwise_verdicts"):
        assert verdict in ("a", "b", "tie", None) and ok == (verdict is not None)


def test_a_sample_per_language_takes_that_many_pairs_of_each_language_seeded():
    from pipeline.dataset import Query
    from pipeline.steps.context import ResponseItem
    from pipeline.steps.pairwise import PairwiseConfig, pairs_to_judge

    items = [ResponseItem(Query(query_id=f"{lang}-{k}", language=lang, query="q", gt_response="g"), m, "t", "h")
             for lang in ("hi", "ta") for k in range(4) for m in ("m1", "m2", "m3")]
    assert len(pairs_to_judge(items, PairwiseConfig())) == 8 * 3  # all: every pair of every query
    sample = pairs_to_judge(items, PairwiseConfig(pairs="sample", per_language=5, seed=1))
    assert sorted(a.query.language for a, _ in sample) == ["hi"] * 5 + ["ta"] * 5
    assert all(a.model_id < b.model_id and a.query.query_id == b.query.query_id for a, b in sample)
    again = pairs_to_judge(items, PairwiseConfig(pairs="sample", per_language=5, seed=1))
    other = pairs_to_judge(items, PairwiseConfig(pairs="sample", per_language=5, seed=2))
    key = [(a.query.query_id, a.model_id, b.model_id) for a, b in sample]
    assert key == [(a.query.query_id, a.model_id, b.model_id) for a, b in again]
    assert key != [(a.query.query_id, a.model_id, b.model_id) for a, b in other]
