"""HealthBench rubric grading: a configured grader decides met / not met for every criterion of every response.

A query may carry a ``rubric`` (criteria with points, negative for harmful content, and tags). The grader
(``rubric_grader:`` in the run config) gets one call per (response, criterion), as HealthBench's
``grade_sample`` does (openai/simple-evals ``healthbench_eval.py``): the conversation with the response as
its last assistant turn, and the rubric item written as HealthBench writes it (``[points] criterion``). A
multi-turn query (``messages``) is shown as its whole conversation. The answer is JSON
``{"explanation", "criteria_met"}``, constrained where the backend can.

What the grader says is stored per criterion (``rubric_grades``) with its explanation and raw output.
An output without a readable true/false is asked again as a new sample (``RunContext.drive``; HealthBench
asks the grader again until it answers), up to ``reask.times`` times; what stays unreadable is stored with
``met = NULL``: counted as unparsed and as an error of the stage, never as met or not met, and asked again by
the next run (``reask.on_rerun``). Scores are computed when read (``pipeline.read.rubric`` over
``pipeline.analysis.rubric``): an item with an unparsed criterion has no score.

Prompts: ``prompts/rubric_grader_{system,user}.txt`` (the dataset's own first). The conversation comes
before the rubric item, so the calls for one response share their prompt prefix and run consecutively.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config import ModelConfig
from pipeline.dataset import Criterion, Query
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Message
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, ResponseItem, RunContext, finished, pending_of
from pipeline.steps.spec import Step
from pipeline.store.rows import RubricGradeRow

EXPLANATION_MAX_CHARS = 400


def grade_schema(max_tokens: int) -> dict[str, Any]:
    """JSON schema of a grade for constrained decoding; the explanation is capped so the object fits in
    ``max_tokens`` (about two characters a token), so a constrained output is never cut before its verdict."""
    max_chars = max(16, min(EXPLANATION_MAX_CHARS, (max_tokens - 16) * 2))
    return {"type": "object",
            "properties": {"explanation": {"type": "string", "maxLength": max_chars},
                           "criteria_met": {"type": "boolean"}},
            "required": ["explanation", "criteria_met"]}


# -- prompts -------------------------------------------------------------------------------------------
def conversation_text(query: Query, response: str) -> str:
    """The conversation as HealthBench shows it to the grader: ``role: content`` turns, blank-line separated,
    the response last as the assistant's turn. A single-turn query is one user turn."""
    turns = [(t.role, t.content) for t in query.messages] if query.messages else [("user", query.query)]
    return "\n\n".join(f"{role}: {content}" for role, content in [*turns, ("assistant", response)])


def rubric_item_text(criterion: Criterion) -> str:
    """A rubric item as HealthBench's ``RubricItem.__str__`` writes it: ``[points] criterion``."""
    return f"[{criterion.points}] {criterion.criterion}"


def grader_messages(query: Query, response: str, criterion: Criterion, *,
                    prompts: Callable[[str], str] = load_text) -> tuple[Message, ...]:
    """System + user messages for grading one response on one criterion."""
    return ({"role": "system", "content": prompts("rubric_grader_system.txt").format()},
            {"role": "user", "content": prompts("rubric_grader_user.txt").format(
                conversation=conversation_text(query, response), rubric_item=rubric_item_text(criterion))})


@dataclass(frozen=True)
class GradeCall:
    """One grader call: the response item, which criterion, and the request."""

    item: ResponseItem
    index: int
    criterion: Criterion
    request: ChatRequest

    @property
    def key(self) -> tuple[str, str, int]:
        return (*self.item.key, self.index)


def grade_calls(items: Sequence[ResponseItem], *, max_tokens: int, temperature: float = 0.0,
                prompts: Callable[[str], str] = load_text) -> list[GradeCall]:
    """One call per criterion of every item with a rubric, the criteria of one response consecutively."""
    params = GenerateParams(max_tokens=max_tokens, temperature=temperature, json_schema=grade_schema(max_tokens))
    return [GradeCall(item, i, c, ChatRequest(messages=grader_messages(item.query, item.text, c, prompts=prompts),
                                              params=params))
            for item in items for i, c in enumerate(item.query.rubric or ())]


# -- parsing -------------------------------------------------------------------------------------------
_JSON_FENCE = re.compile(r"^```json\s*|\s*```$")  # HealthBench's ``parse_json_to_dict`` strips exactly this


def parse_grade(raw: str | None) -> tuple[bool | None, str]:
    """``(criteria_met, explanation)`` from a grader's output by HealthBench's own rule; ``criteria_met`` None when
    that rule cannot read it.

    The reference grader (openai/simple-evals ``healthbench_eval.py``: ``parse_json_to_dict``, then ``grade_sample``)
    strips a leading ```` ```json ```` and a trailing fence, parses the rest as JSON, and accepts the grade only when
    it is an object whose ``criteria_met`` is the boolean true or false; anything else — prose around the object,
    ``"true"`` as a string, a trailing comma, a bare ``criteria_met: false`` — is asked again. Applying the same rule
    here means one grader output counts here exactly when it counts there. The explanation of an object whose verdict
    is unreadable is still returned (it is stored beside the unparsed grade).
    """
    try:
        obj = json.loads(_JSON_FENCE.sub("", (raw or "").strip()))
    except ValueError:
        return None, ""
    if not isinstance(obj, dict):
        return None, ""
    met = obj.get("criteria_met")
    explanation = obj.get("explanation")
    return (met if isinstance(met, bool) else None), (str(explanation).strip() if explanation is not None else "")


# -- the step ------------------------------------------------------------------------------------------
def pending(ctx: Inputs) -> list[Pending]:
    """The grader's calls for every criterion of every selected response to a query with a rubric, not yet graded
    for the response's text and the criterion (a changed response, criterion text, points or tags is graded
    again; an unreadable grade is asked again, ``reask.on_rerun``)."""
    gc = ctx.config.section("rubric_grader")
    if gc is None:
        return []
    items = [it for it in ctx.responses() if it.query.rubric]
    calls = grade_calls(items, max_tokens=gc.max_tokens, temperature=gc.temperature, prompts=ctx.dataset.prompt_text)
    done = finished(ctx, "rubric_grades", ("query_id", "model_id", "criterion_index"), where={"grader_id": gc.id},
                    also=("criterion", "points", "tags"), unparsed="met IS NULL")

    def is_current(call: Call, d: tuple) -> bool:
        response_hash, criterion, points, tags = d
        c = call.item.criterion
        return (response_hash == call.item.item.response_hash and criterion == c.criterion and points == c.points
                and list(tags or ()) == list(c.tags))

    return [pending_of("rubric", gc, [Call(c.key, c.request, c, c.item.assumed) for c in calls], done, is_current,
                       unparsed=lambda c: parse_grade(c.text)[0] is None)]


async def step_rubric(ctx: RunContext) -> None:
    """The rubric grader grades what ``pending`` says, one call per response and criterion."""
    for p in pending(ctx):
        def to_rows(c: Call, completion: Completion, grader_id: str = p.model.id) -> list[RubricGradeRow]:
            if not completion.ok:  # a backend failure is not a grade: not stored, retried next run
                return []
            call: GradeCall = c.item
            met, explanation = parse_grade(completion.text)
            return [RubricGradeRow(
                dataset=ctx.dataset_name, query_id=call.item.query.query_id, model_id=call.item.model_id,
                grader_id=grader_id, criterion_index=call.index, criterion=call.criterion.criterion,
                points=call.criterion.points, tags=list(call.criterion.tags), met=met, explanation=explanation,
                raw_output=completion.text, response_hash=call.item.response_hash, run_id=ctx.run_id,
                cached=completion.cached)]

        await ctx.send(p, to_rows, label=f"rubric grader {p.model.id}")


# its section, `rubric_grader:` (HealthBench rubric grading): this model decides met / not met for each criterion of
# every response to a query that has a rubric, one call per criterion
STEP = Step(run=step_rubric, pending=pending, requires=("rubric_grader",),
            models=lambda config: [("rubric grader", config.section("rubric_grader"))], rows=(RubricGradeRow,),
            section="rubric_grader", settings=ModelConfig)
