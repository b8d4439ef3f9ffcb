"""Generation: one uniform prompt per dataset, the same retrieved chunks for every model.

The prompt files are the dataset's own (``data/<name>/prompts/``) where it has them, else the
studio's (``pipeline/prompts/``): the bundled cataract set carries Health-Pariksha's Figure 3;
other datasets get a generic health-assistant RAG prompt. Raw chunks and KB-update chunks are
given separately (§3.4), ``{query_lang}`` is the query's language and ``{response_lang}`` the same.
A closed-book dataset gets the closed-book prompt, with no knowledge-base sections.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence

from pipeline.config import ModelConfig
from pipeline.dataset import LANGUAGES, REFUSAL_SENTENCE, Chunk, Dataset, Query
from pipeline.models import Completion, engine_of, is_exclusive
from pipeline.models.base import ChatRequest, GenerateParams, Message
from pipeline.models.reference import has_approved_answer, is_reference, reference_request
from pipeline.prompts import PROMPTS_DIR, load_text
from pipeline.steps.context import Call, Inputs, Pending, RunContext, pending_of
from pipeline.steps.spec import Step
from pipeline.store.rows import ResponseRow

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


def sent_as_is(query: Query, dataset: Dataset | None) -> bool:
    """Whether ``query``'s conversation is the whole prompt, as HealthBench sends it: a multi-turn item (open, not
    multiple-choice) of a closed-book dataset that has no ``closed_book_system.txt`` of its own. A dataset that
    wants a system prompt in front of its conversations ships that file."""
    return (bool(query.messages) and not query.options and dataset is not None and dataset.closed_book
            and dataset.prompt_path("closed_book_system.txt").parent == PROMPTS_DIR)


def build_messages(query: Query, raw: Sequence[Chunk], updates: Sequence[Chunk],
                   dataset: Dataset | None = None) -> tuple[Message, ...]:
    """The generation prompt of one query, from ``dataset``'s prompt files (the studio's without a dataset).

    With a knowledge base: the system prompt, then a user turn with the raw chunks, the KB updates
    and the query. Closed-book: the closed-book system prompt and the query, no knowledge-base
    sections. A multiple-choice item lists its options and asks for one letter and a one-line
    reason. A query with ``messages`` (HealthBench) is sent as its conversation: as it is, with no
    system prompt of ours, in a closed-book dataset without a closed-book system prompt of its own
    (``sent_as_is``, HealthBench's way); otherwise after the system prompt (a system message of its
    own is appended to ours), and with a knowledge base its last turn carries the chunks.
    """
    if sent_as_is(query, dataset):
        return tuple({"role": t.role, "content": t.content} for t in query.messages or ())
    text = dataset.prompt_text if dataset is not None else load_text
    closed = dataset is not None and dataset.closed_book
    language = LANGUAGES.get(query.language, query.language)
    system = text("closed_book_system.txt" if closed else "generation_system.txt").format(
        query_lang=language, response_lang=language, refusal=REFUSAL_SENTENCE)
    history = [{"role": t.role, "content": t.content} for t in query.messages or ()]
    asked = history.pop()["content"] if history else query.query
    if history and history[0]["role"] == "system":
        system = f"{system}\n\n{history.pop(0)['content']}"
    if query.options:
        letters = list(query.options)
        asked = text("multiple_choice.txt").format(
            query=asked, options="\n".join(f"{k}. {v}" for k, v in query.options.items()),
            letters=", ".join(letters[:-1]) + f" or {letters[-1]}")
    if not closed:
        user = text("generation_user.txt").format(raw_chunks=format_chunks(raw), update_chunks=format_chunks(updates),
                                                  query=asked)
    else:
        user = asked if query.messages else text("closed_book_user.txt").format(query=asked)
    return ({"role": "system", "content": system}, *history, {"role": "user", "content": user})


def build_request(query: Query, raw: Sequence[Chunk], updates: Sequence[Chunk],
                  params: GenerateParams, dataset: Dataset | None = None) -> ChatRequest:
    """The generation request (``dataset`` chooses the prompt files); carries the structured inputs for
    non-LLM baselines too."""
    context = {
        "query": query.query, "query_en": query.search_text, "language": query.language,
        "raw_texts": [c.text for c in raw], "update_texts": [c.text for c in updates],
    }
    return ChatRequest(messages=build_messages(query, raw, updates, dataset), params=params, context=context)


def prompt_hash(messages: Sequence[Message]) -> str:
    """Hash of the exact prompt a model saw; a changed prompt or chunk set means a new response."""
    blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


# -- the step ---------------------------------------------------------------------------------------
def pending(ctx: Inputs) -> list[Pending]:
    """Per generator: its calls for the selected queries of its languages that have no error-free response to the
    same prompt by the same engine (a changed prompt or chunk set asks again; so does llama-cpp-python, once built,
    for the answers its prebuilt stand-in wrote: ``llamacpp_prebuilt``). A call's item is the query and its prompt
    hash. The reference (``reference/approved``) answers only the queries with an approved answer, with that
    answer."""
    chunks = ctx.chunks()
    done = {(q, m): (h, e) for q, m, h, e in ctx.fetch(
        "SELECT query_id, model_id, prompt_hash, engine FROM responses WHERE dataset = ? AND error IS NULL",
        [ctx.dataset.name])}
    out = []
    for mc in ctx.generator_models:
        params = GenerateParams(max_tokens=mc.max_tokens, temperature=mc.temperature)
        engine = engine_of(mc)

        def call(q: Query, mc: ModelConfig = mc, params: GenerateParams = params) -> Call:
            request = (reference_request(q, params) if is_reference(mc.id)
                       else build_request(q, *chunks[q.query_id], params, ctx.dataset))
            return Call((q.query_id, mc.id), request, (q, prompt_hash(request.messages)))

        calls = [call(q) for q in ctx.queries if (not mc.languages or q.language in mc.languages)
                 and (has_approved_answer(q) or not is_reference(mc.id))]
        # an answer stored before engines were recorded (NULL) counts as this engine's
        out.append(pending_of("generate", mc, calls, done,
                              lambda c, d, engine=engine: d[0] == c.item[1] and d[1] in (None, engine)))
    return out


async def step_generate(ctx: RunContext) -> None:
    """Every selected model answers what ``pending`` says, from the same stored chunks; each answer records the KB
    they came from (``kb_hash``), and a kept answer whose prompt is unchanged under a changed KB is recorded as of
    the KB now (its chunks are the same)."""

    async def for_model(p: Pending) -> None:
        def to_rows(call: Call, c: Completion) -> list[ResponseRow]:
            q, phash = call.item
            return [ResponseRow(dataset=ctx.dataset_name, query_id=q.query_id, model_id=p.model.id,
                                run_id=ctx.run_id, prompt_hash=phash, text=c.text if c.ok else None, error=c.error,
                                latency_s=c.latency_s, prompt_tokens=c.prompt_tokens,
                                completion_tokens=c.completion_tokens, cached=c.cached, kb_hash=ctx.dataset.kb_hash,
                                engine=c.engine)]

        await ctx.send(p, to_rows, label=f"generate {p.model.id}")

    async def one_at_a_time(todo: list[Pending]) -> None:
        for p in todo:
            await for_model(p)
            ctx.release(p.model.id)

    todo = pending(ctx)
    if ctx.dataset.kb_hash is not None:  # an answer whose prompt is the same under the KB now belongs to it too
        ctx.store.restamp_kb(ctx.dataset_name, [k for p in todo for k in p.finished], ctx.dataset.kb_hash)
    await asyncio.gather(*(for_model(p) for p in todo if not is_exclusive(p.model)),
                         one_at_a_time([p for p in todo if is_exclusive(p.model)]))


STEP = Step(run=step_generate, pending=pending, models=lambda config: [("generator", m) for m in config.models],
            rows=(ResponseRow,), answers=True)
