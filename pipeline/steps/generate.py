"""Generation: the paper's uniform RAG prompt, the same retrieved chunks for every model.

The system prompt is Health-Pariksha's Figure 3 (``prompts/generation_system.txt``); raw chunks
and KB-update chunks are given separately (§3.4), ``{query_lang}`` is the query's language and
``{response_lang}`` the same. A closed-book dataset gets the same prompt with empty knowledge.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence

from pipeline.config import ModelConfig
from pipeline.dataset import LANGUAGES, REFUSAL_SENTENCE, Chunk, Query
from pipeline.models import Completion, is_exclusive
from pipeline.models.base import ChatRequest, GenerateParams, Message
from pipeline.prompts import load_text
from pipeline.steps.context import RunContext, stored_chunks
from pipeline.store.schema import ResponseRow

EMPTY_KB = "(empty)"


def format_chunks(chunks: Sequence[Chunk]) -> str:
    """Chunks as the model sees them: id, date for updates, title, text; ``(empty)`` when none."""
    if not chunks:
        return EMPTY_KB
    blocks = []
    for c in chunks:
        dated = f", updated {c.updated.isoformat()}" if c.kind == "update" and c.updated else ""
        blocks.append(f"[{c.chunk_id}{dated}] {c.title}\n{c.text}")
    return "\n\n".join(blocks)


def build_messages(query: Query, raw: Sequence[Chunk], updates: Sequence[Chunk]) -> tuple[Message, ...]:
    """System + user messages of the uniform RAG prompt for one query."""
    language = LANGUAGES.get(query.language, query.language)
    system = load_text("generation_system.txt").format(query_lang=language, response_lang=language,
                                                       refusal=REFUSAL_SENTENCE)
    user = load_text("generation_user.txt").format(
        raw_chunks=format_chunks(raw), update_chunks=format_chunks(updates), query=query.query,
    )
    return ({"role": "system", "content": system}, {"role": "user", "content": user})


def build_request(query: Query, raw: Sequence[Chunk], updates: Sequence[Chunk],
                  params: GenerateParams) -> ChatRequest:
    """The generation request; carries the structured inputs for non-LLM baselines too."""
    context = {
        "query": query.query, "query_en": query.search_text, "language": query.language,
        "raw_texts": [c.text for c in raw], "update_texts": [c.text for c in updates],
    }
    return ChatRequest(messages=build_messages(query, raw, updates), params=params, context=context)


def prompt_hash(messages: Sequence[Message]) -> str:
    """Hash of the exact prompt a model saw; a changed prompt or chunk set means a new response."""
    blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


# -- the step ---------------------------------------------------------------------------------------
async def step_generate(ctx: RunContext) -> None:
    """Every selected model answers every selected query from the same stored chunks."""
    chunks = stored_chunks(ctx)
    done = {(q, m): h for q, m, h in ctx.store.fetch(
        "SELECT query_id, model_id, prompt_hash FROM responses WHERE dataset = ? AND error IS NULL",
        [ctx.dataset_name])}

    async def for_model(mc: ModelConfig) -> None:
        params = GenerateParams(max_tokens=mc.max_tokens, temperature=mc.temperature)
        todo: list[tuple[Query, ChatRequest, str]] = []
        queries = [q for q in ctx.queries if not mc.languages or q.language in mc.languages]
        for q in queries:
            raw, updates = chunks[q.query_id]
            request = build_request(q, raw, updates, params)
            phash = prompt_hash(request.messages)
            if done.get((q.query_id, mc.id)) != phash:
                todo.append((q, request, phash))
        model = ctx.model(mc)

        def to_rows(i: int, c: Completion) -> list[ResponseRow]:
            q, _, phash = todo[i]
            return [ResponseRow(dataset=ctx.dataset_name, query_id=q.query_id, model_id=mc.id, run_id=ctx.run_id,
                                prompt_hash=phash, text=c.text if c.ok else None, error=c.error,
                                latency_s=c.latency_s, prompt_tokens=c.prompt_tokens,
                                completion_tokens=c.completion_tokens, cached=c.cached)]

        await ctx.drive("generate", model, [t[1] for t in todo], to_rows, label=f"generate {mc.id}",
                        skipped=len(queries) - len(todo))

    async def one_at_a_time(models: list[ModelConfig]) -> None:
        for mc in models:
            await for_model(mc)
            ctx.release(mc.id)

    shared = [m for m in ctx.generator_models if not is_exclusive(m)]
    exclusive = [m for m in ctx.generator_models if is_exclusive(m)]
    await asyncio.gather(*(for_model(m) for m in shared), one_at_a_time(exclusive))
