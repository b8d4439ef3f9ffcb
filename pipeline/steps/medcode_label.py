"""Labelled critiques: Med-CoDE's GPT-4 step (§3.1) — a teacher model writes a critique and a degree of
disagreement (None, Low, Moderate, High) for each stored response, the training data of the critic and the
classifier.

Stage ``medcode-label`` (opt-in: ``python -m pipeline medcode label --config F`` or ``--stages medcode-label``),
teacher ``medcode: {teacher: MODEL}``. One call per response, the critique first and the label after it, in the
critic's prompt format (question, ground truth, model response); constrained to the JSON shape where the backend
can. A label that cannot be read is asked again (``reask``); one that stays unreadable is stored as NULL with the
raw output, counted as an error of the stage, never exported and asked again by the next run; a failed call
writes nothing and is retried on the next run.

Prompts: ``prompts/medcode_teacher_{system,user}.txt`` (ours: the paper's Figure 3 template is not in its text).
"""

from __future__ import annotations

import json
import re

from pipeline.dataset import Query
from pipeline.disagreement import LABEL_ALIASES, LABELS
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Message
from pipeline.models.reference import scorable
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, RunContext, finished, pending_of
from pipeline.steps.medcode import MedcodeConfig
from pipeline.steps.spec import Step
from pipeline.store.rows import LabelledCritiqueRow

CRITIQUE_MAX_CHARS = 800
SCHEMA = {"type": "object",
          "properties": {"Critique": {"type": "string", "maxLength": CRITIQUE_MAX_CHARS},
                         "Disagreement": {"type": "string", "enum": list(LABELS)}},
          "required": ["Critique", "Disagreement"]}
_LABEL_WORDS = "|".join(sorted(LABEL_ALIASES, key=len, reverse=True))
_LABEL_LINE = re.compile(rf"(?i)[\"']?(?:disagreement|label|degree)[\"']?[^:=\n]{{0,30}}[:=]\s*[\"'*]*"
                         rf"({_LABEL_WORDS})\b")
_CRITIQUE_FIELD = re.compile(r"(?is)[\"']?critique[\"']?\s*:\s*\"((?:[^\"\\]|\\.)*)")


def question_text(query: Query) -> str:
    """The question as the critic sees it (``steps.medcode.critique_messages``): the query with its English
    rendering, so a teacher's critique trains the critic on the prompt it will be given."""
    return query.query if not query.query_en else f"{query.query} (in English: {query.query_en})"


def teacher_messages(query: Query, response: str) -> tuple[Message, ...]:
    user = load_text("medcode_teacher_user.txt").format(
        question=question_text(query), ground_truth=query.gt_response, response=response)
    return ({"role": "system", "content": load_text("medcode_teacher_system.txt")},
            {"role": "user", "content": user})


def teacher_request(query: Query, response: str, max_tokens: int) -> ChatRequest:
    return ChatRequest(messages=teacher_messages(query, response),
                       params=GenerateParams(max_tokens=max_tokens, temperature=0.0, json_schema=SCHEMA))


def _label(value: object) -> str | None:
    return LABEL_ALIASES.get(value.strip().strip("\"'*.").lower()) if isinstance(value, str) else None


def parse_teacher(raw: str | None) -> tuple[str, str | None]:
    """(critique, label) of a teacher's output: the JSON object, else a ``Disagreement: X`` line and the text
    around it (or a truncated JSON's critique string). ``label`` None when no single label is given."""
    text = (raw or "").strip()
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            obj = json.loads(text[start:end + 1])
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            keys = {k.lower(): v for k, v in obj.items() if isinstance(k, str)}
            critique = keys.get("critique")
            label = _label(keys.get("disagreement", keys.get("label", keys.get("degree"))))
            if isinstance(critique, str):
                return critique.strip(), label
    found = {LABEL_ALIASES[m.group(1).lower()] for m in _LABEL_LINE.finditer(text)}
    label = found.pop() if len(found) == 1 else None
    field = _CRITIQUE_FIELD.search(text)
    if field:
        try:
            critique = json.loads(f'"{field.group(1)}"')
        except ValueError:
            critique = field.group(1)
    else:
        critique = _LABEL_LINE.sub("", text).strip()
    return critique.strip(), label


def pending(ctx: Inputs) -> list[Pending]:
    """The teacher's calls: one per selected current response it has not labelled yet (an unreadable label is
    asked again, ``reask.on_rerun``)."""
    teacher = ctx.config.get("medcode.teacher")
    if teacher is None:
        return []
    done = finished(ctx, "labelled_critiques", ("query_id", "model_id"), where={"source": teacher.id},
                    unparsed="label IS NULL")
    calls = [Call(it.key, teacher_request(it.query, it.text, teacher.max_tokens), it, it.assumed)
             for it in scorable("medcode-label", ctx.responses())]
    return [pending_of("medcode-label", teacher, calls, done, lambda c, d: d[0] == c.item.response_hash,
                       unparsed=lambda c: parse_teacher(c.text)[1] is None)]


async def step_label(ctx: RunContext) -> None:
    """The teacher labels what ``pending`` says (one call each); one ``labelled_critiques`` row per response,
    source = the teacher's id."""
    for p in pending(ctx):
        def to_rows(call: Call, c: Completion, source: str = p.model.id) -> list[LabelledCritiqueRow]:
            if not c.ok:  # a failed call is not a label: retried next run
                return []
            it = call.item
            critique, label = parse_teacher(c.text)
            return [LabelledCritiqueRow(dataset=ctx.dataset_name, query_id=it.query.query_id, model_id=it.model_id,
                                        source=source, critique=critique, label=label,
                                        response_hash=it.response_hash, run_id=ctx.run_id, raw_output=c.text)]

        await ctx.send(p, to_rows, label=f"medcode label (teacher {p.model.id})")
        if unparsed := ctx.records[-1].unparsed:
            ctx.console.print(f"medcode label: {unparsed} of {len(p.calls)} labels unparsed (stored as NULL with the "
                              "teacher's output; never exported)", highlight=False)


STEP = Step(run=step_label, pending=pending, requires=("medcode", "medcode.teacher"),
            models=lambda config: [("teacher", config.get("medcode.teacher"))], rows=(LabelledCritiqueRow,),
            section="medcode", settings=MedcodeConfig, opt_in=True)
