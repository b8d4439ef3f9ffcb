"""The pairwise judge (stage ``pairwise``, issue 28; MT-Bench's pairwise judge, Pariksha's LLM evaluator).

Every judge of the config (the jury too) compares two models' responses to the same query, seeing what the direct
judge sees (the query's stored chunks and the ground truth), **in both orders**: each order is one call and one
``pairwise_verdicts`` row, its verdict turned into the two models' terms ('a' = model_a, the first id). A pair
whose verdict changes with the order is a tie and a position flip (``pipeline.read.arena``). A pair with the
doctors' approved answers (``reference/approved``) is judged without the ground truth: it is one of the two
answers, and a judge shown it would only be matching texts. Which pairs: every
pair of models on every selected query, or a seeded sample of ``per_language`` (query, pair) per language.

The prompt (``prompts/pairwise_system.txt``, ``pairwise_user.txt``) asks for JSON ``{"Reason", "Winner"}``,
constrained where the backend can; ``parse_verdict`` reads it tolerantly with the direct judge's JSON repairs, and
an answer it cannot read is kept with its raw text as ``verdict = None, parse_ok = False``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any, Literal

from pydantic import Field

from pipeline.config import Frozen
from pipeline.dataset import Chunk, Query
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Message
from pipeline.models.reference import is_reference
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, ResponseItem, RunContext, pending_of
from pipeline.steps.generate import format_chunks
from pipeline.steps.judge import _balanced_objects, _find_key, _load_object, judges
from pipeline.steps.spec import Step
from pipeline.store.arena_rows import PairwiseVerdictRow

REASON_MAX_CHARS = 400
_WINNERS = {"a": "A", "b": "B", "tie": "tie", "response a": "A", "response b": "B", "[[a]]": "A", "[[b]]": "B",
            "[[c]]": "tie", "c": "tie", "equal": "tie", "draw": "tie"}
_WINNER_TEXT = re.compile(r"(?i)(?<![a-z])winner[\s\"'*_`]*[:=][\s\"'*_`]*(response a|response b|a|b|tie)(?![a-z])")


class PairwiseConfig(Frozen):
    """The config's ``pairwise:`` section (docs/arena.md): every judge of ``judge:`` compares the models' responses
    two by two in both orders, for the arena's judge leaderboard and bias figures; needs ``judge:``."""

    pairs: Literal["all", "sample"] = Field("all", description="all: every pair of models on every query; sample: "
                                            "`per_language` (query, pair) comparisons per language, seeded")
    per_language: int = Field(50, ge=1, le=1_000_000, description="comparisons per language with pairs: sample")
    seed: int = 0
    max_tokens: int = Field(200, gt=0)


def verdict_schema(max_tokens: int) -> dict[str, Any]:
    """JSON schema of a verdict for constrained decoding (the reason capped so the winner always fits)."""
    return {"type": "object",
            "properties": {"Reason": {"type": "string", "maxLength": max(16, min(REASON_MAX_CHARS,
                                                                                  (max_tokens - 16) * 2))},
                           "Winner": {"type": "string", "enum": ["A", "B", "tie"]}},
            "required": ["Reason", "Winner"]}


def build_pairwise_messages(query: Query, first: str, second: str, raw: Sequence[Chunk], updates: Sequence[Chunk],
                            *, prompts: Callable[[str], str] = load_text,
                            ground_truth: bool = True) -> tuple[Message, ...]:
    """System + user messages comparing ``first`` (shown as Response A) and ``second`` (Response B); the query's
    ground truth among the context unless ``ground_truth`` is False (a pair with the reference answer itself)."""
    context = []
    if raw or updates:
        context.append(prompts("judge_user_chunks.txt").format(raw_chunks=format_chunks(raw),
                                                                update_chunks=format_chunks(updates)))
    if ground_truth:
        context.append(prompts("judge_user_ground_truth.txt").format(ground_truth=query.gt_response))
    user = prompts("pairwise_user.txt").format(query=query.query, context="".join(c + "\n\n" for c in context),
                                               response_a=first, response_b=second)
    return ({"role": "system", "content": prompts("pairwise_system.txt")}, {"role": "user", "content": user})


def parse_verdict(raw: str | None) -> str | None:
    """'A', 'B' or 'tie' from a judge's raw output (JSON with a Winner key, repaired as the direct judge's
    output is, or a ``Winner: A`` line); None when there is none or it is ambiguous."""
    text = (raw or "").strip()
    for candidate in _balanced_objects(text):
        found, value = _find_key(_load_object(candidate), ("winner", "verdict", "better"))
        if found:
            return _WINNERS.get(str(value).strip().strip("\"'*_` .").lower())
    found = {_WINNERS[m.group(1).lower()] for m in _WINNER_TEXT.finditer(text)}
    return found.pop() if len(found) == 1 else None


def in_model_terms(verdict: str | None, first: str, model_a: str, model_b: str) -> str | None:
    """A verdict about positions (A = shown first) as 'a' / 'b' (model_a / model_b won) or 'tie'."""
    if verdict is None or verdict == "tie":
        return verdict
    winner = first if verdict == "A" else (model_b if first == model_a else model_a)
    return "a" if winner == model_a else "b"


def pairs_to_judge(items: Sequence[ResponseItem], config: PairwiseConfig) -> list[tuple[ResponseItem, ResponseItem]]:
    """(response of model_a, response of model_b), model_a < model_b, per query: every pair, or a seeded sample of
    ``per_language`` per language."""
    by_query: dict[str, list[ResponseItem]] = {}
    for item in items:
        by_query.setdefault(item.query.query_id, []).append(item)
    pairs = [(a, b) for group in by_query.values()
             for a, b in combinations(sorted(group, key=lambda i: i.model_id), 2)]
    if config.pairs == "all":
        return pairs

    def draw(p: tuple[ResponseItem, ResponseItem]) -> str:
        return hashlib.sha256(f"{config.seed}|{p[0].query.query_id}|{p[0].model_id}|{p[1].model_id}".encode()
                              ).hexdigest()

    kept: dict[str, list] = {}
    for pair in sorted(pairs, key=draw):
        chosen = kept.setdefault(pair[0].query.language, [])
        if len(chosen) < config.per_language:
            chosen.append(pair)
    return [p for chosen in kept.values() for p in chosen]


def pending(ctx: Inputs) -> list[Pending]:
    """Per judge: its calls for the chosen pairs of current responses in both orders (the item: model_a's and
    model_b's responses and the one shown first), skipping what it has judged for the same two texts (an
    unreadable verdict is asked again, ``reask.on_rerun``)."""
    config = ctx.config.section("pairwise")
    if config is None:
        return []
    chunks = ctx.chunks()
    pairs = pairs_to_judge(ctx.responses(), config)
    params = GenerateParams(max_tokens=config.max_tokens, temperature=0.0,
                            json_schema=verdict_schema(config.max_tokens))

    def call(a: ResponseItem, b: ResponseItem, first: ResponseItem) -> Call:
        second = b if first is a else a
        messages = build_pairwise_messages(a.query, first.text, second.text, *chunks[a.query.query_id],
                                           prompts=ctx.dataset.prompt_text,
                                           ground_truth=not (is_reference(a.model_id) or is_reference(b.model_id)))
        return Call((a.query.query_id, a.model_id, b.model_id, first.model_id),
                    ChatRequest(messages=messages, params=params), (a, b, first), a.assumed + b.assumed)

    calls = [call(a, b, first) for a, b in pairs for first in (a, b)]
    readable = " AND parse_ok" if ctx.config.reask.on_rerun else ""  # a rerun asks again what stayed unread
    out = []
    for jc in ctx.config.judges:
        done = {(q, ma, mb, f): (ha, hb) for q, ma, mb, f, ha, hb in ctx.fetch(
            "SELECT query_id, model_a, model_b, first, response_hash_a, response_hash_b FROM pairwise_verdicts "
            "WHERE dataset = ? AND judge_id = ?" + readable, [ctx.dataset.name, jc.id])}
        out.append(pending_of("pairwise", ctx.config.model_config_for(jc.id), calls, done,
                              lambda c, d: d == (c.item[0].response_hash, c.item[1].response_hash),
                              unparsed=lambda c: parse_verdict(c.text) is None))
    return out


async def step_pairwise(ctx: RunContext) -> None:
    """Every judge compares what ``pending`` says, in both orders."""
    for p in pending(ctx):
        def to_rows(call: Call, completion: Completion, judge_id: str = p.model.id) -> list[PairwiseVerdictRow]:
            if not completion.ok:  # a backend failure is not a verdict: not stored, retried next run
                return []
            a, b, first = call.item
            verdict = in_model_terms(parse_verdict(completion.text), first.model_id, a.model_id, b.model_id)
            return [PairwiseVerdictRow.of(
                dataset=ctx.dataset_name, query_id=a.query.query_id, judge_id=judge_id, model_a=a.model_id,
                model_b=b.model_id, text_a=a.text, text_b=b.text, first=first.model_id, verdict=verdict,
                parse_ok=verdict is not None, raw_output=completion.text or "", run_id=ctx.run_id,
                cached=completion.cached)]

        await ctx.send(p, to_rows, label=f"pairwise {p.model.id}")


STEP = Step(run=step_pairwise, pending=pending, requires=("judge", "pairwise"), models=judges,
            rows=(PairwiseVerdictRow,), section="pairwise", settings=PairwiseConfig)
