"""Machine translation: queries before retrieval, and responses for readers.

- ``translate`` (before ``retrieve``): a non-English query without a human ``query_en`` is rendered
  into English by the configured ``translator`` model, as HealthBot translated queries before RAG
  with an off-the-shelf translator (Health-Pariksha §3.1). The rendering is stored in
  ``translations`` (marked machine-made by living there) and becomes the query's English text for
  retrieval and the critic.
- ``translate-responses`` (after ``generate``): non-English responses are rendered into English
  for doctors who cannot read them; stored apart from the response, shown beside it, and never
  used for scoring. A response to a native-script query with no letter of that script is already
  English (the extractive baseline quotes the English knowledge base; tiny models often answer in
  English) and is shown as written (``needs_rendering``).

The playground uses the same requests (``translate_text``). Calls are cached like every LLM call.

A rendering must be in English's script: an output whose letters are mostly not Latin (the translator answered
in the source script, as small models do) is asked again like an unparsed judgment (``reask``: up to
``reask.times`` more times, each a new sample), and if it stays so it is stored as a failed translation
(``error`` starting with ``SOURCE_SCRIPT``, the text kept for readers), counted as an error of the stage in the
run's summary; a rerun asks a failed query translation again.
"""

from __future__ import annotations

import time

from pipeline.config import ModelConfig, RunConfig
from pipeline.dataset import LANGUAGES, Query
from pipeline.dataset.languages import in_script_of, script_letters
from pipeline.errors import UserError
from pipeline.models.base import ChatRequest, Completion, GenerateParams, Model
from pipeline.prompts import load_text
from pipeline.steps.context import Call, Inputs, Pending, RunContext, pending_of
from pipeline.steps.spec import Step
from pipeline.store.rows import TranslationRow, text_hash

QUERY = ""  # TranslationRow.model_id of a query's own translation
MAX_TOKENS = 256
TARGET = "en"  # the language every rendering is in
SOURCE_SCRIPT = "still in the source script"  # a failed translation's error starts so


def in_script(text: str, language: str) -> bool:
    """Whether a model's answer (quotes and whitespace cleaned off) has most of its letters in the script of
    ``language``: the check of every rendering, and of a model-written variant (``pipeline/rewrite.py``)."""
    return in_script_of(clean(text), language)


def in_source_script(text: str) -> bool:
    """Whether a rendering's letters are mostly not in the target's (Latin) script: the source left untranslated."""
    return not in_script(text, TARGET)


def unrendered(completion: Completion) -> bool:
    """``Pending.unparsed`` of the translate stages: an answer still in the source script is asked again."""
    return in_source_script(completion.text)


def rendering_error(completion: Completion, reasks: int) -> tuple[str, str | None]:
    """(text to store, error or None) of a translator's final answer: a failed call or an empty answer is an
    error, and so is an answer still in the source script (its text kept)."""
    text = clean(completion.text) if completion.ok else ""
    if not text:
        return "", completion.error or "empty translation"
    if in_source_script(text):
        return text, f"{SOURCE_SCRIPT} after {reasks} re-ask(s)"
    return text, None


def translation_request(text: str, language: str, *, of: str = "query", max_tokens: int = MAX_TOKENS) -> ChatRequest:
    """The translator's prompt for a query (``of='query'``) or a response (``of='response'``)."""
    system = load_text(f"translate_{of}.txt").format(language=LANGUAGES.get(language, language))
    return ChatRequest(messages=({"role": "system", "content": system}, {"role": "user", "content": text}),
                       params=GenerateParams(max_tokens=max_tokens, temperature=0.0))


def clean(text: str) -> str:
    """The translation without surrounding quotes and whitespace."""
    return text.strip().strip('"“”').strip()


async def translate_text(model: Model, text: str, language: str, *, of: str = "query") -> str:
    """One English rendering by ``model``; raises RuntimeError when the call fails or returns nothing."""
    done = await model.generate(translation_request(text, language, of=of,
                                                    max_tokens=min(model.backend.config.max_tokens, MAX_TOKENS)))
    if not done.ok or not clean(done.text):
        raise RuntimeError(f"translation by {model.id} failed: {done.error or 'empty output'}")
    return clean(done.text)


def needs_translation(q: Query) -> bool:
    return q.language != "en" and not q.query_en


def apply_stored_translations(ctx: Inputs) -> None:
    """Give the selected queries without a human ``query_en`` their stored machine rendering (if any)."""
    if not any(needs_translation(q) for q in ctx.queries):
        return
    stored = {(qid, h): text for qid, h, text in ctx.fetch(
        "SELECT query_id, source_hash, text FROM translations WHERE dataset = ? AND model_id = ? AND error IS NULL",
        [ctx.dataset.name, QUERY])}
    ctx.queries = [q.model_copy(update={"query_en": stored[(q.query_id, text_hash(q.query))],
                                        "query_en_source": "machine"})
                   if needs_translation(q) and (q.query_id, text_hash(q.query)) in stored else q
                   for q in ctx.queries]


def pending_queries(ctx: Inputs) -> list[Pending]:
    """The translator's calls (with one configured) for the selected non-English queries the dataset gives without
    ``query_en`` (before stored renderings are applied) that have no stored rendering of their current text."""
    mc = ctx.config.section("translator")
    if mc is None:
        return []
    done = {(qid, h): () for qid, h in ctx.fetch(
        "SELECT query_id, source_hash FROM translations WHERE dataset = ? AND model_id = ? AND error IS NULL",
        [ctx.dataset.name, QUERY])}
    given = {q.query_id: q for q in ctx.dataset.queries}
    calls = [Call((q.query_id, text_hash(q.query)), translation_request(q.query, q.language), q)
             for q in (given[sq.query_id] for sq in ctx.queries) if needs_translation(q)]
    return [pending_of("translate", mc, calls, done, lambda c, d: True, unparsed=unrendered)]


async def step_translate(ctx: RunContext) -> None:
    """Render non-English queries that lack ``query_en`` into English with the configured translator."""
    apply_stored_translations(ctx)
    todo = [q for q in ctx.queries if needs_translation(q)]
    if not todo:
        return
    if ctx.config.section("translator") is None:
        ids = ", ".join(q.query_id for q in todo[:5]) + (" …" if len(todo) > 5 else "")
        raise UserError(f"{len(todo)} non-English queries have no query_en ({ids}): set `translator:` in the "
                           "config, or give them a human query_en")
    for p in pending_queries(ctx):
        def to_rows(call: Call, c: Completion, translator_id: str = p.model.id) -> list[TranslationRow]:
            q = call.item
            text, error = rendering_error(c, ctx.config.reask.times)
            return [TranslationRow(dataset=ctx.dataset_name, query_id=q.query_id, model_id=QUERY,
                                   translator_id=translator_id, source_hash=text_hash(q.query), text=text,
                                   error=error)]

        await ctx.send(p, to_rows, label=f"translate queries ({p.model.id})")
    apply_stored_translations(ctx)
    missing = [q.query_id for q in ctx.queries if needs_translation(q)]
    if missing:
        left = {qid for qid, in ctx.fetch("SELECT query_id FROM translations WHERE dataset = ? AND model_id = ? AND "
                                           "starts_with(error, ?)", [ctx.dataset.name, QUERY, SOURCE_SCRIPT])}
        why = (f"{len(left & set(missing))} {SOURCE_SCRIPT} after {ctx.config.reask.times} re-ask(s); "
               if left & set(missing) else "")
        raise UserError(f"no English rendering for {len(missing)} queries ({', '.join(missing[:5])}): {why}"
                        "see the translate errors above, or give them a human query_en")


def needs_rendering(text: str, q: Query) -> bool:
    """Whether a response to ``q`` needs an English rendering for readers: a non-English query's response, unless
    the query is in its native script and the response has no letter of that script (then it is English).
    A response to a romanized query is rendered whatever its letters (romanized Hindi reads as Latin)."""
    if q.language == "en":
        return False
    return q.script == "latin" or script_letters(text or "", q.language) > 0


def pending_responses(ctx: Inputs) -> list[Pending]:
    """The translator's calls (with one configured) for the selected responses that need an English rendering
    (``needs_rendering``; a response not generated yet may, when its query is not English) and have none of their
    current text."""
    mc = ctx.config.section("translator")
    if mc is None:
        return []
    done = {(q, m): (h,) for q, m, h in ctx.fetch(
        "SELECT query_id, model_id, source_hash FROM translations WHERE dataset = ? AND translator_id = ? "
        "AND model_id <> ?", [ctx.dataset.name, mc.id, QUERY])}
    calls = [Call(it.key, translation_request(it.text, it.query.language, of="response"), it, it.assumed)
             for it in ctx.responses()
             if needs_rendering(it.text, it.query) or (it.response_hash is None and it.query.language != "en")]
    return [pending_of("translate-responses", mc, calls, done, lambda c, d: d[0] == c.item.response_hash,
                       unparsed=unrendered)]


async def step_translate_responses(ctx: RunContext) -> None:
    """Render non-English responses into English for readers (never used for scoring)."""
    started = time.perf_counter()
    for p in pending_responses(ctx):
        if not p.calls:
            ctx.note("translate-responses", p.model.id, items=0, skipped=p.done, wall_s=time.perf_counter() - started)
            continue

        def to_rows(call: Call, c: Completion, translator_id: str = p.model.id) -> list[TranslationRow]:
            it = call.item
            text, error = rendering_error(c, ctx.config.reask.times)
            return [TranslationRow(dataset=ctx.dataset_name, query_id=it.query.query_id, model_id=it.model_id,
                                   translator_id=translator_id, source_hash=it.response_hash, text=text,
                                   error=error)]

        await ctx.send(p, to_rows, label=f"translate responses for readers ({p.model.id})")


def _translator(config: RunConfig) -> list[tuple[str, ModelConfig]]:
    return [("translator", mc)] if (mc := config.section("translator")) is not None else []


# both stages read the section `translator:`: this model renders non-English queries without query_en before
# retrieval, and non-English responses for readers (machine-made, never scored)
QUERIES = Step(run=step_translate, pending=pending_queries, models=_translator, rows=(TranslationRow,),
               section="translator", settings=ModelConfig,
               prepare=apply_stored_translations)  # machine renderings of earlier runs, whatever runs now
RESPONSES = Step(run=step_translate_responses, pending=pending_responses, requires=("translator",),
                 models=_translator, rows=(TranslationRow,), section="translator", settings=ModelConfig)
