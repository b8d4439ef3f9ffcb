"""The LLM judge (Health-Pariksha §3.5.1): one call per metric per response, scores 0–2.

Prompts are data: the evaluation system prompt (Figure 4) is ``prompts/judge_system.txt``; the
metrics, their rubrics (Figures 5–8) and what each sees come from the registry (``pipeline.metrics``).
By the paper's definitions (§3.5.1) FC and SS see the response's stored KB chunks and the ground
truth, COH and CON the chunks without the ground truth ("reference-free" means no ground truth).

Each judge prompt is ordered so that the calls for one response share their longest prefix:
system prompt, query and response first; then the chunks, then the ground truth, the metric
rubric last; metrics that see more come first. The calls of one response are issued
consecutively, so an in-process llama.cpp judge re-evaluates only the part after the shared prefix.

Output is JSON ``{"Score": 0-2, "Justification": "..."}``, constrained where the backend can
(llama.cpp grammar, OpenAI ``response_format``, vLLM structured outputs). ``parse_judgment``
reads it tolerantly; what it cannot read, or a score outside 0–2, is asked again as a new sample
(``RunContext.drive``, ``reask`` in the config) and, when it stays unreadable, kept with its raw text as
``score = None, parse_ok = False`` — never as 0 — counted as an error and asked again by the next run.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config import RunConfig
from pipeline.dataset import Chunk, Query
from pipeline.metrics import METRICS, registry, rubric
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Message, Model
from pipeline.models.reference import scorable
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, RunContext, finished, pending_of
from pipeline.steps.generate import format_chunks
from pipeline.steps.spec import Step
from pipeline.store.rows import JudgmentRow

JUSTIFICATION_MAX_CHARS = 400


def judgment_schema(max_tokens: int) -> dict[str, Any]:
    """JSON schema of a judgment for constrained decoding.

    The justification's length is capped so that the whole object fits in ``max_tokens`` (about
    two characters per token, conservatively): a grammar-constrained output can then not be cut
    off before its score. (llama.cpp's backend sorts schema keys, so Justification comes first
    there: the judge explains, then scores.)
    """
    max_chars = max(16, min(JUSTIFICATION_MAX_CHARS, (max_tokens - 16) * 2))
    return {
        "type": "object",
        "properties": {
            "Score": {"type": "integer", "enum": [0, 1, 2]},
            "Justification": {"type": "string", "maxLength": max_chars},
        },
        "required": ["Score", "Justification"],
    }


# -- prompts -------------------------------------------------------------------------------------
def metric_order(metrics: Sequence[str]) -> list[str]:
    """Metrics in call order: those that see chunks and ground truth, then chunks only, then the rest.

    Within a group the registry's order; consecutive calls then share the longest prompt prefix.
    """
    known = registry()
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {', '.join(known)}")
    ordered = [m for m in known if m in metrics]
    return sorted(ordered, key=lambda m: ("chunks" not in known[m].inputs, "ground_truth" not in known[m].inputs))


def build_judge_messages(query: Query, response: str, raw: Sequence[Chunk], updates: Sequence[Chunk],
                         metric: str, *, rubric_first: bool = False,
                         prompts: Callable[[str], str] = load_text) -> tuple[Message, ...]:
    """System + user messages for judging one response on one metric.

    The metric's registry entry says whether the chunks and the ground truth are shown; a
    closed-book item (no chunks at all) gets no knowledge-base section. ``rubric_first=True`` puts
    the rubric before everything else in the user turn; it exists only for the prefix-cache
    benchmark (bench/bench_judge_prefix.py) as the no-shared-prefix baseline.
    """
    inputs = registry()[metric].inputs
    parts = [prompts("judge_user_head.txt").format(query=query.query, response=response)]
    if "chunks" in inputs and (raw or updates):
        parts.append(prompts("judge_user_chunks.txt").format(
            raw_chunks=format_chunks(raw), update_chunks=format_chunks(updates)))
    if "ground_truth" in inputs:
        parts.append(prompts("judge_user_ground_truth.txt").format(ground_truth=query.gt_response))
    metric_block = prompts("judge_user_metric.txt").format(
        metric=json.dumps(rubric(metric), indent=2, ensure_ascii=False))
    parts = [metric_block, *parts] if rubric_first else [*parts, metric_block]
    return ({"role": "system", "content": prompts("judge_system.txt")},
            {"role": "user", "content": "\n\n".join(parts)})


@dataclass(frozen=True)
class JudgeCall:
    """One judge call: which metric and sample it is, and the request."""

    metric: str
    sample: int
    request: ChatRequest


def judge_calls(query: Query, response: str, raw: Sequence[Chunk], updates: Sequence[Chunk], *,
                metrics: Sequence[str] = METRICS, samples: int = 1, temperature: float = 0.0,
                max_tokens: int = 200, rubric_first: bool = False,
                prompts: Callable[[str], str] = load_text) -> list[JudgeCall]:
    """The calls for one response, in the order that shares the longest prompt prefix.

    With ``samples`` > 1 each metric is judged that many times; ``GenerateParams.sample`` keeps the
    samples apart in the cache (and seeds them differently).
    """
    if samples < 1:
        raise ValueError("samples must be >= 1")
    if samples > 1 and temperature <= 0:
        raise ValueError("self-consistency (samples > 1) needs a temperature > 0")
    schema = judgment_schema(max_tokens)
    calls = []
    for metric in metric_order(metrics):
        messages = build_judge_messages(query, response, raw, updates, metric, rubric_first=rubric_first,
                                        prompts=prompts)
        for s in range(samples):
            params = GenerateParams(max_tokens=max_tokens, temperature=temperature,
                                    json_schema=schema, sample=s)
            calls.append(JudgeCall(metric, s, ChatRequest(messages=messages, params=params)))
    return calls


# -- tolerant parsing ----------------------------------------------------------------------------
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)(?:```|$)", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_ ]*?)\s*:")
_SCORE_TEXT = re.compile(
    r"(?i)(?<![a-z])score(?![a-z])[\s\"'*_`]*(?:[:=]|-(?!\d)|–|is)[\s\"'*_`]*"
    r"(-?\d+(?:\.\d+)?|good|medium|bad)(?:\s*(?:/|out of)\s*(\d+))?")
_JUSTIFICATION_TEXT = re.compile(
    r"(?is)(?<![a-z])(?:justification|explanation|reasoning|reason|rationale)(?![a-z])[\s\"'*_`]*[:=][\s*_`]*"
    r"(\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?|.+)")
_SCORE_KEYS = ("score", "rating", "grade")
_JUSTIFICATION_KEYS = ("justification", "explanation", "reasoning", "reason", "rationale")
_WORD_SCORES = {"good": 2, "medium": 1, "bad": 0}  # the paper's class names (§3.5.1)
_SMART_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})


def _balanced_objects(text: str) -> list[str]:
    """Substrings that look like ``{...}`` objects (outermost, brace-balanced, quote-aware)."""
    out, depth, start, quote, escaped = [], 0, None, None, False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'" and depth > 0:
            # an apostrophe inside prose ("response's") must not open a quote in single-quoted-less JSON
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                continue
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start is not None:
                out.append(text[start:i + 1])
    return out


def _load_object(candidate: str) -> Any:
    """Try strict JSON, then common repairs, then a Python literal; None when nothing works."""
    attempts = [candidate]
    repaired = _TRAILING_COMMA.sub(r"\1", candidate.translate(_SMART_QUOTES))
    attempts.append(repaired)
    attempts.append(_BARE_KEY.sub(lambda m: f'{m.group(1)}"{m.group(2).strip()}":', repaired))
    for text in attempts:
        try:
            return json.loads(text)
        except (json.JSONDecodeError, ValueError):
            pass
    for text in attempts[1:]:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return None


def _find_key(obj: Any, keys: tuple[str, ...]) -> tuple[bool, Any]:
    """The value of the first matching key (case-insensitive), searching nested dicts and lists."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and k.strip().strip("*_").lower() in keys:
                return True, v
        for v in obj.values():
            found, value = _find_key(v, keys)
            if found:
                return found, value
    elif isinstance(obj, list):
        for v in obj:
            found, value = _find_key(v, keys)
            if found:
                return found, value
    return False, None


def coerce_score(value: Any, denominator: str | None = None) -> int | None:
    """An integer 0–2 from ``2``, ``2.0``, ``"2"``, ``"2/2"``, ``"Good"``; None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip().strip("\"'*_` ").lower()
        if text in _WORD_SCORES:
            return _WORD_SCORES[text]
        m = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*(?:(?:/|out of)\s*(\d+))?(?:\s*\(.*\))?\.?", text)
        if not m:
            return None
        value, denominator = float(m.group(1)), m.group(2) or denominator
    if denominator is not None and denominator != "2":
        return None
    if isinstance(value, (int, float)) and float(value).is_integer() and 0 <= value <= 2:
        return int(value)
    return None


def _text_justification(text: str) -> str:
    m = _JUSTIFICATION_TEXT.search(text)
    if not m:
        return ""
    value = m.group(1).strip()
    if value[:1] in "\"'":
        value = value[1:-1] if len(value) > 1 and value[-1] == value[0] else value[1:]
    return value.rstrip("}` \n").strip()


def parse_judgment(raw: str | None) -> tuple[int | None, str, bool]:
    """``(score, justification, parse_ok)`` from a judge's raw output.

    Handles code fences, prose around the JSON, string scores (``"2"``, ``"2/2"``, ``"Good"``),
    ``Score: 2`` lines, trailing commas, single quotes, bare keys, smart quotes and truncated
    JSON. A missing, ambiguous or out-of-range score gives ``(None, justification, False)``.
    """
    text = (raw or "").strip()
    if not text:
        return None, "", False
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for block in candidates:
        for candidate in _balanced_objects(block):
            obj = _load_object(candidate)
            found, value = _find_key(obj, _SCORE_KEYS)
            if not found:
                continue
            _, justification = _find_key(obj, _JUSTIFICATION_KEYS)
            justification = "" if justification is None else str(justification).strip()
            score = coerce_score(value)
            return score, justification, score is not None
    scores = {coerce_score(m.group(1), m.group(2)) for m in _SCORE_TEXT.finditer(text)}
    justification = _text_justification(text)
    if len(scores) == 1 and None not in scores:
        return scores.pop(), justification, True
    return None, justification, False


# -- running -------------------------------------------------------------------------------------
def judgment_result(metric: str, sample: int, completion: Completion) -> dict[str, Any]:
    """One judge call's outcome: metric, sample, score, parse_ok, justification, raw_output, error."""
    if not completion.ok:
        return {"metric": metric, "sample": sample, "score": None, "parse_ok": False, "justification": "",
                "raw_output": "", "error": completion.error, "cached": completion.cached}
    score, justification, ok = parse_judgment(completion.text)
    return {"metric": metric, "sample": sample, "score": score, "parse_ok": ok, "justification": justification,
            "raw_output": completion.text, "error": None, "cached": completion.cached}


async def judge_response(judge: Model, *, query: Query, response: str, raw: list[Chunk], updates: list[Chunk],
                         metrics: Sequence[str] = METRICS, samples: int = 1,
                         temperature: float = 0.0) -> list[dict]:
    """Judge one response on ``metrics`` (the playground's entry; the judge stage uses the same calls).

    Returns one dict per call, in call order: ``metric``, ``sample``, ``score`` (0–2 or None),
    ``parse_ok``, ``justification``, ``raw_output``, plus ``error`` (a backend failure, else None)
    and ``cached``.
    """
    calls = judge_calls(query, response, raw, updates, metrics=metrics, samples=samples,
                        temperature=temperature, max_tokens=judge.backend.config.max_tokens)
    completions = await judge.generate_many([c.request for c in calls])
    return [judgment_result(c.metric, c.sample, done) for c, done in zip(calls, completions, strict=True)]


def pending(ctx: Inputs) -> list[Pending]:
    """Per judge (the jury when there are several): its calls for every selected response not yet judged for its
    current text on each metric and sample (an unparsed judgment is asked again, ``reask.on_rerun``)."""
    chunks = ctx.chunks()
    items = scorable("judge", ctx.responses())
    out = []
    for jc in ctx.config.judges:
        calls = [Call((*item.key, c.metric, c.sample), c.request, (item, c), item.assumed) for item in items
                 for c in judge_calls(item.query, item.text, *chunks[item.query.query_id], metrics=jc.metrics,
                                      samples=jc.samples, temperature=jc.temperature, max_tokens=jc.max_tokens,
                                      prompts=ctx.dataset.prompt_text)]
        done = finished(ctx, "judgments", ("query_id", "model_id", "metric", "sample"), where={"judge_id": jc.id},
                        unparsed="NOT parse_ok")
        out.append(pending_of("judge", ctx.config.model_config_for(jc.id), calls, done,
                              lambda c, d: d[0] == c.item[0].response_hash,
                              unparsed=lambda c: not parse_judgment(c.text)[2]))
    return out


async def step_judge(ctx: RunContext) -> None:
    """Every judge scores what ``pending`` says it has still to judge."""
    for p in pending(ctx):
        judge_id = p.model.id

        def to_rows(call: Call, completion: Completion, judge_id: str = judge_id) -> list[JudgmentRow]:
            if not completion.ok:  # a backend failure is not a judgment: not stored, retried next run
                return []
            item, jcall = call.item
            result = judgment_result(jcall.metric, jcall.sample, completion)
            return [JudgmentRow(
                dataset=ctx.dataset_name, query_id=item.query.query_id, model_id=item.model_id, judge_id=judge_id,
                metric=jcall.metric, sample=jcall.sample, score=result["score"], parse_ok=result["parse_ok"],
                justification=result["justification"], raw_output=result["raw_output"],
                response_hash=item.response_hash, run_id=ctx.run_id, cached=completion.cached)]

        await ctx.send(p, to_rows, label=f"judge {judge_id}")


def judges(config: RunConfig) -> list[tuple[str, str]]:
    """The judges a judging step calls: the primary judge, then the jury's."""
    return [("judge" if i == 0 else "jury judge", j.id) for i, j in enumerate(config.judges)]


STEP = Step(run=step_judge, pending=pending, requires=("judge",), models=judges, rows=(JudgmentRow,))
