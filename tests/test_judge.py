"""The judge: prompts kept verbatim, call order sharing prefixes, the tolerant parser, self-consistency."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.config import JudgeConfig, RunConfig
from pipeline.dataset import load_dataset
from pipeline.metrics import METRICS
from pipeline.models.base import Completion, cache_key
from pipeline.prompts import PROMPTS_DIR
from pipeline.steps.judge import (
    build_judge_messages,
    judge_calls,
    judgment_result,
    judgment_schema,
    metric_order,
    parse_judgment,
    rubric,
)

REPO = Path(__file__).resolve().parent.parent
PAPER = REPO / "data" / "reference" / "health_pariksha_appendix_a2.txt"  # the paper's prompts, as printed


@pytest.fixture(scope="module")
def cataract():
    return load_dataset(REPO / "data" / "cataract")


def _paper_text() -> str:
    return PAPER.read_text(encoding="utf-8")


# -- prompts ------------------------------------------------------------------------------------------
def test_rubrics_are_the_papers_words_with_its_typos():
    paper = _paper_text()
    names = {"FC": "Factual Accuracy", "SS": "Semantic Similarity", "COH": "Coherence", "CON": "Conciseness"}
    for metric in METRICS:
        r = rubric(metric)
        assert r["name"] == names[metric]
        assert set(r["scoring"]) == {"0", "1", "2"}
        strings = [r["name"], r["description"], *(s for level in r["scoring"].values() for s in level.values())]
        for s in strings:
            assert s in paper, (metric, s)
    assert rubric("SS")["scoring"]["0"]["(a)"].startswith("he prediction")  # the paper's typo, kept


def test_system_prompt_is_figure_4_verbatim():
    paper = _paper_text()
    text = (PROMPTS_DIR / "judge_system.txt").read_text(encoding="utf-8")
    lines = [re.sub(r"^\s*(?:-|•)\s*", "", line).strip() for line in text.splitlines() if line.strip()]
    assert len(lines) == 8
    for line in lines:
        assert line in paper, line


def test_reference_metrics_see_ground_truth_and_chunks_others_do_not(cataract):
    q = cataract.query("en-004")
    raw = [cataract.chunk(c) for c in q.kb_refs if cataract.chunk(c).kind == "raw"]
    upd = [cataract.chunk(c) for c in q.kb_refs if cataract.chunk(c).kind == "update"]
    for metric in METRICS:
        system, user = build_judge_messages(q, "some answer", raw, upd, metric)
        assert system["role"] == "system" and user["role"] == "user"
        has_reference = q.gt_response in user["content"] and raw[0].text in user["content"]
        assert has_reference == (metric in ("FC", "SS")), metric
        assert user["content"].rstrip().endswith(json.dumps(rubric(metric), indent=2, ensure_ascii=False))


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_calls_of_one_response_share_their_longest_prefix(cataract):
    q = cataract.query("en-004")
    raw = [cataract.chunk(c) for c in q.kb_refs if cataract.chunk(c).kind == "raw"]
    upd = [cataract.chunk(c) for c in q.kb_refs if cataract.chunk(c).kind == "update"]
    calls = judge_calls(q, "Shave after a day; head bath after 7 days.", raw, upd)
    assert [c.metric for c in calls] == ["FC", "SS", "COH", "CON"]
    texts = ["".join(m["content"] for m in c.request.messages) for c in calls]
    # FC→SS share everything but the rubric; the rest share system + query + response
    rubric_ss = json.dumps(rubric("SS"), indent=2, ensure_ascii=False)
    assert _common_prefix(texts[0], texts[1]) >= len(texts[1]) - len(rubric_ss) - 20
    head = texts[2].index("Metric:")
    assert _common_prefix(texts[1], texts[2]) >= head - 1
    assert _common_prefix(texts[2], texts[3]) >= head - 1
    # the baseline ordering (rubric first) shares only the system prompt
    base = judge_calls(q, "Shave after a day; head bath after 7 days.", raw, upd, rubric_first=True)
    btexts = ["".join(m["content"] for m in c.request.messages) for c in base]
    system_len = len(calls[0].request.messages[0]["content"])
    assert _common_prefix(btexts[0], btexts[1]) < system_len + 200
    assert sorted(btexts) != sorted(texts)


def test_metric_order_and_unknown_metric():
    assert metric_order(["CON", "FC"]) == ["FC", "CON"]
    assert metric_order(["COH", "SS"]) == ["SS", "COH"]
    with pytest.raises(ValueError):
        metric_order(["FC", "XX"])


def test_samples_are_separate_cache_entries(cataract):
    q = cataract.query("en-001")
    calls = judge_calls(q, "x", [], [], metrics=["COH"], samples=3, temperature=0.7, max_tokens=64)
    assert [c.sample for c in calls] == [0, 1, 2]
    keys = {cache_key({"model": "m"}, c.request) for c in calls}
    assert len(keys) == 3
    with pytest.raises(ValueError, match="temperature"):
        judge_calls(q, "x", [], [], samples=2, temperature=0.0)


def test_config_requires_temperature_for_samples():
    with pytest.raises(ValidationError, match="temperature"):
        JudgeConfig(id="llamacpp/smollm2-135m-instruct", samples=3)
    ok = JudgeConfig(id="llamacpp/smollm2-135m-instruct", samples=3, temperature=0.7)
    assert ok.samples == 3 and ok.sanity_items == 20
    config = RunConfig(name="x", dataset="d", models=[{"id": "extractive/top-sentences"}],
                       judge={"id": "llamacpp/smollm2-135m-instruct", "sanity_items": 5})
    # judge-only options do not leak into the backend's ModelConfig
    assert config.model_config_for("llamacpp/smollm2-135m-instruct").max_tokens == 200


def test_schema_caps_justification_to_fit_the_token_budget():
    assert judgment_schema(200)["properties"]["Justification"]["maxLength"] == 368
    assert judgment_schema(40)["properties"]["Justification"]["maxLength"] == 48
    assert judgment_schema(1000)["properties"]["Justification"]["maxLength"] == 400
    assert judgment_schema(5)["properties"]["Score"]["enum"] == [0, 1, 2]


# -- the tolerant parser ----------------------------------------------------------------------------
READABLE = [
    ('{"Score": 2, "Justification": "Matches the ground truth."}', 2, "Matches the ground truth."),
    ('{"Justification": "Wrong dose.", "Score": 0}', 0, "Wrong dose."),
    ('```json\n{"Score": 1, "Justification": "Partly right."}\n```', 1, "Partly right."),
    ('```\n{"Score": 2, "Justification": "ok"}\n```', 2, "ok"),
    ('Here is my evaluation:\n{"Score": 1, "Justification": "Missing the 7-day rule."}\nHope this helps.', 1,
     "Missing the 7-day rule."),
    ('{"Score": "2", "Justification": "fine"}', 2, "fine"),
    ('{"Score": "1/2", "Justification": "half"}', 1, "half"),
    ('{"Score": 2.0, "Justification": "float"}', 2, "float"),
    ('{"score": 0, "justification": "lower-case keys"}', 0, "lower-case keys"),
    ('{"SCORE": 1, "JUSTIFICATION": "upper-case keys"}', 1, "upper-case keys"),
    ('{"Score": 2, "Justification": "trailing comma",}', 2, "trailing comma"),
    ("{'Score': 1, 'Justification': 'single quotes'}", 1, "single quotes"),
    ('{Score: 2, Justification: "bare keys"}', 2, "bare keys"),
    ('{“Score”: 1, “Justification”: “smart quotes”}', 1, "smart quotes"),
    ('Score: 2\nJustification: The response is correct.', 2, "The response is correct."),
    ('**Score:** 1\n**Justification:** Some facts are missing.', 1, "Some facts are missing."),
    ('score = 0; explanation: contradicts the KB', 0, "contradicts the KB"),
    ('{"Justification": "The answer says 7 days as the KB update does", "Score": 2', 2,
     "The answer says 7 days as the KB update does"),  # truncated before the closing brace
    ('{"Score": 1, "Justification": "The answer is cut off in the mid', 1, "The answer is cut off in the mid"),
    ('{"evaluation": {"Score": 2, "Justification": "nested"}}', 2, "nested"),
    ('[{"Score": 1, "Justification": "in a list"}]', 1, "in a list"),
    ('{"Score": "Good", "Justification": "class name"}', 2, "class name"),
    ('{"Score": "bad", "Justification": "class name"}', 0, "class name"),
    ('{"Score": 2, "Justification": "Uses {braces} inside the text"}', 2, "Uses {braces} inside the text"),
    ('{"Score": 1, "Justification": "The response\'s flow is uneven"}', 1, "The response's flow is uneven"),
    ('The score is 2 because everything matches.', 2, ""),
    ('Score - 1\nReason: partially aligned', 1, "partially aligned"),
    ('{"Score": 2}', 2, ""),
    ('  \n{"Score":0,"Justification":"no spaces"}\n\n', 0, "no spaces"),
    ('Score: 2/2', 2, ""),
    ('{"rating": 1, "explanation": "synonym keys"}', 1, "synonym keys"),
]

UNREADABLE = [
    "",
    "   ",
    None,
    "I cannot evaluate this response.",
    '{"Score": 3, "Justification": "out of range"}',
    '{"Score": -1, "Justification": "negative"}',
    '{"Score": 1.5, "Justification": "not an integer"}',
    '{"Score": "excellent", "Justification": "unknown word"}',
    '{"Score": null, "Justification": "null"}',
    '{"Score": true, "Justification": "boolean"}',
    '{"Justification": "no score at all"}',
    "Score: 4",
    "Score: 7/10",
    "Score: 2 ... on reflection, Score: 0",  # ambiguous
    '{"Score": [1, 2], "Justification": "a list"}',
    "The response is good.",
]


@pytest.mark.parametrize(("raw", "score", "justification"), READABLE)
def test_parser_reads_malformed_but_meaningful_outputs(raw, score, justification):
    got_score, got_just, ok = parse_judgment(raw)
    assert ok is True
    assert got_score == score
    assert got_just == justification


@pytest.mark.parametrize("raw", UNREADABLE)
def test_parser_never_turns_unreadable_output_into_a_score(raw):
    score, _, ok = parse_judgment(raw)
    assert score is None
    assert ok is False


def test_parser_case_count():
    assert len(READABLE) + len(UNREADABLE) >= 30


def test_out_of_range_keeps_raw_text_and_null_score():
    result = judgment_result("FC", 0, Completion(text='{"Score": 5, "Justification": "too high"}'))
    assert result["score"] is None and result["parse_ok"] is False
    assert result["raw_output"] == '{"Score": 5, "Justification": "too high"}'
    assert result["justification"] == "too high"
    failed = judgment_result("FC", 0, Completion(text="", error="TimeoutError: x"))
    assert failed["score"] is None and failed["error"] == "TimeoutError: x"


# -- the real judge ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_judge_response_with_real_smollm2_samples(cataract):
    from pipeline.config import ModelConfig
    from pipeline.models import Model, create_backend
    from pipeline.steps.judge import judge_response

    judge = Model(create_backend(ModelConfig(id="llamacpp/smollm2-135m-instruct", max_tokens=40)))
    q = cataract.query("en-001")
    results = asyncio.run(judge_response(judge, query=q, response=q.gt_response, raw=[], updates=[],
                                         metrics=("CON",), samples=2, temperature=0.8))
    assert [(r["metric"], r["sample"]) for r in results] == [("CON", 0), ("CON", 1)]
    for r in results:
        assert r["error"] is None and r["raw_output"]
        assert (r["score"] in (0, 1, 2)) == r["parse_ok"]
        if not r["parse_ok"]:
            assert r["score"] is None
