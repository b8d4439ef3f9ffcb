"""The scoring stages end to end: the real pipeline (SmolLM2 in process, no mocked LLM) on 2 queries
of data/cataract — an update-sensitive one and an out-of-KB one — with every stage, then the issue's
done-when conditions checked on the DuckDB file. (Small prompts and token budgets keep it to a few
minutes on 2 cores; Indic queries cost SmolLM2 many more tokens and are covered by other suites.)"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.catalog import catalog
from pipeline.disagreement import LABELS
from pipeline.metrics import METRICS
from pipeline.read.common import Filters, weights_tuple
from pipeline.read.leaderboard import leaderboard, leaderboard_base
from pipeline.runner import run
from pipeline.steps.lexical import meteor_available
from pipeline.store import Store, text_hash

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
QUERY_IDS = ("en-004", "en-131")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # one real run in the fixture


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scoring") / "cataract"
    folder.mkdir()
    shutil.copy(REPO / "data" / "cataract" / "kb.jsonl", folder / "kb.jsonl")
    lines = (REPO / "data" / "cataract" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    picked = [line for line in lines if line.strip() and json.loads(line)["query_id"] in QUERY_IDS]
    (folder / "queries.jsonl").write_text("\n".join(picked) + "\n", encoding="utf-8")
    config = catalog().config({
        "name": "scoring-test", "dataset": str(folder), "db": str(folder.parent / "results.duckdb"),
        "retrieval": {"top_k": 2, "split": "separate", "top_k_updates": 1},
        "models": [{"id": SMOLLM2, "max_tokens": 32}, {"id": "extractive/top-sentences"}],
        "judge": {"id": SMOLLM2, "max_tokens": 48, "sanity_items": 1},
        "medcode": {"critic": {"id": SMOLLM2, "max_tokens": 32}, "classifier": "logprobs"},
    })
    run_id = run(config, console=Console(file=io.StringIO()))
    return config, Store(config.db), run_id


def test_every_response_has_four_judgments(scored):
    _, store, _ = scored
    responses = store.fetch("SELECT query_id, model_id, text FROM responses WHERE error IS NULL")
    assert len(responses) == 2 * 2
    for query_id, model_id, text in responses:
        rows = store.fetch("SELECT metric, score, parse_ok, raw_output, response_hash FROM judgments "
                           "WHERE query_id = ? AND model_id = ? AND judge_id = ? AND sample = 0",
                           [query_id, model_id, SMOLLM2])
        assert sorted(r[0] for r in rows) == sorted(METRICS), (query_id, model_id)
        for metric, score, parse_ok, raw, rhash in rows:
            assert raw, (query_id, model_id, metric)
            assert rhash == text_hash(text)
            if parse_ok:
                assert score in (0, 1, 2)
            else:
                assert score is None  # never stored as 0


def test_every_response_has_lexical_scores(scored):
    _, store, _ = scored
    rows = store.fetch("SELECT l.rouge_l, l.chrf, l.bleu, l.meteor, l.cosine FROM responses r JOIN lexical_scores l "
                       "USING (dataset, query_id, model_id) WHERE r.error IS NULL")
    assert len(rows) == 4
    for rouge, chrf, bleu, meteor, cosine in rows:
        assert 0 <= rouge <= 1 and 0 <= chrf <= 100 and 0 <= bleu <= 100 and -1 <= cosine <= 1.0001
        assert (meteor is not None) == meteor_available()


def test_every_response_has_a_critique_with_a_distribution(scored):
    _, store, _ = scored
    rows = store.fetch("SELECT c.critique, c.p_none, c.p_low, c.p_moderate, c.p_high, c.label, c.classifier "
                       "FROM responses r JOIN critiques c USING (dataset, query_id, model_id) WHERE r.error IS NULL")
    assert len(rows) == 4
    for critique, *probs, label, classifier in rows:
        assert critique
        assert abs(sum(probs) - 1.0) <= 1e-6
        assert all(0 <= p <= 1 for p in probs)
        assert label in LABELS
        assert classifier in ("logprobs", "logprobs:no-label-token")


def test_safety_checks_where_they_apply(scored):
    _, store, _ = scored
    checks = store.fetch("SELECT query_id, model_id, check_name, passed, detail FROM safety_checks")
    by = {(q, m, c): (p, d) for q, m, c, p, d in checks}
    for model_id in (SMOLLM2, "extractive/top-sentences"):
        assert ("en-131", model_id, "refusal") in by  # out of the KB: did it decline?
        assert ("en-004", model_id, "over_refusal") in by
        assert ("en-131", model_id, "over_refusal") not in by
        refused = by[("en-004", model_id, "over_refusal")][0] is False
        assert (("en-004", model_id, "update_adherence") in by) != refused
    for (_, _, name), (passed, detail) in by.items():
        if name == "update_adherence" and passed is None:
            assert detail == "unclear"


def test_sanity_set_and_reliability(scored):
    _, store, _ = scored
    kinds = store.fetch("SELECT variant, kind, count(*) FROM judge_sanity GROUP BY ALL")
    assert {(v, k) for v, k, _ in kinds} >= {("ground_truth", "good"), ("refusal", "bad")}
    rel = store.fetch("SELECT metric, auc, n_good, n_bad, n_unparsed FROM judge_reliability WHERE judge_id = ?",
                      [SMOLLM2])
    assert sorted(r[0] for r in rel) == sorted(METRICS)
    for _, auc, n_good, n_bad, n_unparsed in rel:
        assert n_good + n_bad + n_unparsed >= 2
        assert auc is None or 0 <= auc <= 1


def test_leaderboard_from_the_database(scored):
    config, store, _ = scored
    base = leaderboard_base(store.path, Filters(dataset="cataract"), SMOLLM2)
    assert set(base["table"].language) == {"en"}
    board = leaderboard(base, weights_tuple(config.weights), "en")
    assert set(board.model_id) <= {SMOLLM2, "extractive/top-sentences"} and len(board) >= 2
    for row in board.itertuples():
        if row.n_AGG:
            assert row.AGG_lo <= row.AGG + 1e-9 and row.AGG <= row.AGG_hi + 1e-9


def test_rerun_of_scoring_stages_makes_no_calls(scored):
    """No call for what is finished; outputs left unparsed are asked again (config reask: at most 3 new attempts
    each, a critique that then reads gets its classification call too)."""
    config, store, _ = scored
    (left,), = store.fetch("SELECT (SELECT count(*) FROM judgments WHERE NOT parse_ok) + "
                           "(SELECT count(*) FROM critiques WHERE error IS NOT NULL)")
    run_id = run(config, stages="judge,lexical,medcode,safety,sanity", console=Console(file=io.StringIO()))
    calls, status = store.fetch("SELECT backend_calls, status FROM runs WHERE run_id = ?", [run_id])[0]
    assert status == "finished" and calls <= 4 * left and (calls == 0) == (left == 0)
    n = store.fetch("SELECT count(*) FROM judgments")[0][0]
    assert n == 4 * 4
