"""Answer accuracy, as Med-CoDE sets it beside its disagreement distributions (§5, Table 2).

- ``choice``: for a multiple-choice item, the option the response names (a tolerant parser,
  ``pipeline.analysis.mcq.parse_choice``) against the answer key. An answer the parser cannot
  read is stored with ``correct = NULL`` and counted as unparsed — never silently right or wrong.
- ``llm``: the paper's LLM-Accuracy (LLaMA-3 there): a configured checker model decides, in one
  call per response, whether the answer is correct against the ground truth; its raw output is
  stored; an output that cannot be read is asked again (``reask``), and one that stays unreadable is
  ``correct = NULL``, counted as an error of the stage.

Prompts: ``prompts/llm_accuracy_{system,user}.txt`` (ours: the paper does not print its prompt).
"""

from __future__ import annotations

import json
import re
import time

from pipeline.config import ModelConfig
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Message
from pipeline.models.reference import scorable
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, ResponseItem, RunContext, finished, pending_of
from pipeline.steps.spec import Step
from pipeline.store.rows import AnswerCheckRow

PARSER = "parser"
SCHEMA = {"type": "object", "properties": {"Correct": {"type": "boolean"}, "Reason": {"type": "string",
                                                                                       "maxLength": 160}},
          "required": ["Correct", "Reason"]}
_VERDICT = re.compile(r"(?i)\"?correct\"?\s*[:=]\s*\"?(true|false|yes|no)\b")


def accuracy_messages(item: ResponseItem) -> tuple[Message, ...]:
    q = item.query
    question = q.query if not q.options else q.query + "\n" + "\n".join(f"{k}. {v}" for k, v in q.options.items())
    return ({"role": "system", "content": load_text("llm_accuracy_system.txt")},
            {"role": "user", "content": load_text("llm_accuracy_user.txt").format(
                question=question, ground_truth=q.gt_response, response=item.text)})


def parse_verdict(raw: str | None) -> bool | None:
    """True/False from the checker's output (JSON, or a ``Correct: true`` line); None when it says neither."""
    text = (raw or "").strip()
    try:
        value = json.loads(text).get("Correct")
        if isinstance(value, bool):
            return value
    except (ValueError, AttributeError):
        pass
    found = {m.group(1).lower() in ("true", "yes") for m in _VERDICT.finditer(text)}
    return found.pop() if len(found) == 1 else None


def choice_check(item: ResponseItem) -> tuple[bool | None, str | None, str]:
    """(correct, the parsed letter, detail) of a multiple-choice item's response."""
    from pipeline.analysis.mcq import parse_choice

    letter = parse_choice(item.text, item.query.options)
    if letter is None:
        return None, None, "unparsed: no single option named"
    return letter == item.query.answer, letter, f"answered {letter}, key {item.query.answer}"


async def step_accuracy(ctx: RunContext) -> None:
    """Exact-match accuracy for multiple-choice items; LLM-Accuracy for every item when a checker is configured."""
    started = time.perf_counter()
    choice = [it for it in scorable("accuracy", ctx.responses()) if it.query.options and it.query.answer]
    if choice:
        rows = []
        for it in choice:
            correct, letter, detail = choice_check(it)
            rows.append(AnswerCheckRow(dataset=ctx.dataset_name, query_id=it.query.query_id, model_id=it.model_id,
                                       method="choice", checker_id=PARSER, correct=correct, parsed=letter,
                                       raw_output=detail, response_hash=it.response_hash, run_id=ctx.run_id))
        ctx.write(rows)
        ctx.note("accuracy-choice", PARSER, items=len(rows), errors=sum(r.correct is None for r in rows),
                 wall_s=time.perf_counter() - started)
    for p in pending(ctx):
        def to_rows(call: Call, c: Completion, checker_id: str = p.model.id) -> list[AnswerCheckRow]:
            if not c.ok:  # a failed call is not a verdict: retried next run
                return []
            it = call.item
            return [AnswerCheckRow(dataset=ctx.dataset_name, query_id=it.query.query_id, model_id=it.model_id,
                                   method="llm", checker_id=checker_id, correct=parse_verdict(c.text), parsed=None,
                                   raw_output=c.text, response_hash=it.response_hash, run_id=ctx.run_id)]

        await ctx.send(p, to_rows, label=f"LLM-Accuracy ({p.model.id})")


def pending(ctx: Inputs) -> list[Pending]:
    """LLM-Accuracy's calls (with a checker configured): one per selected response not yet checked for its current
    text (an unreadable verdict is asked again, ``reask.on_rerun``)."""
    mc = ctx.config.section("llm_accuracy")
    if mc is None:
        return []
    done = finished(ctx, "answer_checks", ("query_id", "model_id"), where={"method": "llm", "checker_id": mc.id},
                    unparsed="correct IS NULL")
    params = GenerateParams(max_tokens=mc.max_tokens, temperature=0.0, json_schema=SCHEMA)
    calls = [Call(it.key, ChatRequest(messages=accuracy_messages(it), params=params), it, it.assumed)
             for it in scorable("accuracy", ctx.responses())]
    return [pending_of("llm-accuracy", mc, calls, done, lambda c, d: d[0] == c.item.response_hash,
                       unparsed=lambda c: parse_verdict(c.text) is None)]


# its section, `llm_accuracy:` (Med-CoDE's LLM-Accuracy): this model decides whether each answer is correct against
# the ground truth (multiple-choice items are also checked by their parsed option)
STEP = Step(run=step_accuracy, pending=pending,
            models=lambda config: [("accuracy checker", mc)] if (mc := config.section("llm_accuracy")) else [],
            rows=(AnswerCheckRow,), section="llm_accuracy", settings=ModelConfig)
