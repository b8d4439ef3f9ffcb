"""The model-written variant kinds: ``pipeline variants --kinds code-mixed-llm --model provider/name``.

Each query a model-written kind applies to (``pipeline.dataset.variants.WRITTEN``) is given to the model with the
kind's prompt (``pipeline/prompts/rewrite_<kind>.txt``), and its rewrite is kept only when it passes two checks:

1. **script**: most of its letters are in the kind's script — Latin for ``romanized-llm``, the language's own for
   ``native-llm``, the query's own for ``code-mixed-llm`` — the translate step's check (``in_script``); it must
   differ from the query, and a native-script ``code-mixed-llm`` rewrite must hold a word in Latin letters;
2. **meaning**: the same model translates it back into English (the translate step's prompt, and its check that
   the rendering is in English's script), and the cosine of the back-translation's MiniLM embedding with the
   original's English (the embedder of the KB index; ``pipeline.steps.lexical``) is at least ``THRESHOLD``. The
   original's English is its ``query_en``, else the translate step's rendering stored in the database, else the
   same model's translation of it (the translate step's request).

A rewrite that fails either check is dropped and counted with its reason (``variants_report.json``); a kept one
records in ``variant.settings`` the model, the prompts' hashes, the back-translation and both checks' scores.
Every call goes through ``Model`` with the results database's ``llm_cache``: a rerun makes no call again and the
same variants (a failed call is not cached, and is asked again).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.config import ModelConfig
from pipeline.dataset import Dataset
from pipeline.dataset.codemix import english_share
from pipeline.dataset.languages import LANGUAGE_TABLE, script_share
from pipeline.dataset.variants import WRITTEN, Made, Writer, Written, WrittenKind, to_write
from pipeline.models import ChatRequest, Completion, GenerateParams, Model, create_backend
from pipeline.prompts import load_text
from pipeline.read.robustness import stored_query_translations
from pipeline.steps.lexical import cosine_similarities
from pipeline.steps.translate import MAX_TOKENS, SOURCE_SCRIPT, clean, in_script, in_source_script, translation_request
from pipeline.store import Store

# The meaning check: MiniLM cosine of the back-translation with the original's English. On data/cataract's
# English questions, the 35 pairs of one question put into English by people from two languages score 0.663 and
# above; of the 21,609 pairs of different questions (different ground truths, one topic) 0.92 % reach 0.6.
THRESHOLD = 0.6
SIMILARITY = "cosine of all-MiniLM-L6-v2 embeddings (pipeline/models/embedder.py)"
BACK_PROMPT = "translate_query.txt"


def prompt_name(kind: WrittenKind) -> str:
    return f"rewrite_{kind.as_kind.replace('-', '_')}.txt"


def prompt_hash(name: str) -> str:
    return hashlib.sha256(load_text(name).encode("utf-8")).hexdigest()[:12]


def rewrite_request(kind: WrittenKind, q: Any, max_tokens: int = MAX_TOKENS) -> ChatRequest:
    """The model's prompt to restate ``q`` as ``kind``."""
    language = LANGUAGE_TABLE[q.language]
    system = load_text(prompt_name(kind)).format(language=language.name, script=language.script)
    return ChatRequest(messages=({"role": "system", "content": system}, {"role": "user", "content": q.query}),
                       params=GenerateParams(max_tokens=max_tokens, temperature=0.0))


def script_check(kind: WrittenKind, q: Any, completion: Completion) -> str:
    """The rewrite's text when it passes the script check; raises ``Rejected`` with the reason otherwise."""
    if not completion.ok:
        raise Rejected("the rewrite call failed")
    text = clean(completion.text)
    if not text:
        raise Rejected("an empty rewrite")
    target = kind.target(q)
    if not in_script(text, target):
        raise Rejected(f"the rewrite is not in {LANGUAGE_TABLE[target].script} letters")
    if text == q.query:
        raise Rejected("the rewrite is the query unchanged")
    if kind.as_kind == "code-mixed" and target != "en" and not english_share(text, latin=False):
        raise Rejected("the rewrite has no English word")
    return text


def back_check(completion: Completion, what: str) -> str:
    """An English rendering's text when it is one (the translate step's check); raises ``Rejected`` otherwise."""
    text = clean(completion.text) if completion.ok else ""
    if not completion.ok:
        raise Rejected(f"the {what} call failed")
    if not text:
        raise Rejected(f"an empty {what}")
    if in_source_script(text):
        raise Rejected(f"the {what} is {SOURCE_SCRIPT}")
    return text


class Rejected(Exception):
    """A rewrite that failed a check; the message is the reason it is dropped for."""


async def _ask(model: Model, requests: list[ChatRequest]) -> list[Completion]:
    """The completions of ``requests`` through the model's cache, each distinct request asked once."""
    unique = list({model.key(r): r for r in requests}.items())
    done = dict(zip((k for k, _ in unique), await model.generate_many([r for _, r in unique]), strict=True))
    return [done[model.key(r)] for r in requests]


async def write(model: Model, dataset: Dataset, kinds: list[str], translations: dict[str, str]) -> Written:
    """The model-written variants of ``kinds`` of ``dataset``'s queries, or why each was dropped."""
    tokens = min(model.backend.config.max_tokens, MAX_TOKENS)
    asked = [(WRITTEN[k], q) for k in kinds for q in to_write(dataset, k)]
    rewrites = await _ask(model, [rewrite_request(kind, q, tokens) for kind, q in asked])
    written: Written = {}
    passed: list[tuple[WrittenKind, Any, str]] = []
    for (kind, q), completion in zip(asked, rewrites, strict=True):
        try:
            passed.append((kind, q, script_check(kind, q, completion)))
        except Rejected as why:
            written[(kind.name, q.query_id)] = str(why)
    english: dict[str, tuple[str, str]] = {}  # query_id -> (the original's English, where it came from)
    for _, q, _ in passed:
        if q.query_en:
            english[q.query_id] = (q.query_en, "query_en")
        elif q.query_id in translations:
            english[q.query_id] = (translations[q.query_id], "stored translation")
    originals = list({q.query_id: q for _, q, _ in passed if q.query_id not in english}.values())
    answers = await _ask(model, [translation_request(text, q.language, max_tokens=tokens) for _, q, text in passed]
                         + [translation_request(q.query, q.language, max_tokens=tokens) for q in originals])
    for q, completion in zip(originals, answers[len(passed):], strict=True):
        try:
            english[q.query_id] = (back_check(completion, "translation of the original"), "the model's translation")
        except Rejected as why:
            english[q.query_id] = ("", str(why))
    backs: list[tuple[WrittenKind, Any, str, str]] = []
    for (kind, q, text), completion in zip(passed, answers[:len(passed)], strict=True):
        try:
            if not english[q.query_id][0]:
                raise Rejected(f"no English of the original ({english[q.query_id][1]})")
            backs.append((kind, q, text, back_check(completion, "back-translation")))
        except Rejected as why:
            written[(kind.name, q.query_id)] = str(why)
    similarities = cosine_similarities([back for *_, back in backs], [english[q.query_id][0] for _, q, *_ in backs])
    for (kind, q, text, back), similarity in zip(backs, similarities, strict=True):
        if similarity < THRESHOLD:
            written[(kind.name, q.query_id)] = f"the meaning changed (back-translation similarity < {THRESHOLD})"
            continue
        written[(kind.name, q.query_id)] = made(model.id, kind, q, text, back, english[q.query_id][1], similarity)
    return written


def made(model_id: str, kind: WrittenKind, q: Any, text: str, back: str, source: str, similarity: float) -> Made:
    """A kept rewrite, its settings recording how it was made and checked."""
    share = round(script_share(text, kind.target(q)) or 0.0, 4)
    name = prompt_name(kind)
    quality = {"similarity": round(similarity, 4), "script_share": share}
    if kind.as_kind == "code-mixed":
        quality["english_words"] = round(english_share(text, latin=kind.script(q) == "latin") or 0.0, 4)
    return Made(text, q.language, kind.script(q),
                {"model": model_id, "prompts": {name: prompt_hash(name), BACK_PROMPT: prompt_hash(BACK_PROMPT)},
                 "script_share": share, "back_translation": back, "english_of_original": source,
                 "similarity": round(similarity, 4), "threshold": THRESHOLD},
                quality, themes=kind.themes)


def rewriter(config: ModelConfig, db: Path, echo: Callable[[str], None] = print) -> Writer:
    """``variants_command``'s writer of the model-written kinds: ``config``'s model, its calls cached in ``db``
    (whose stored query translations are the originals' English where they have no ``query_en``)."""

    def writer(dataset: Dataset, kinds: list[str]) -> tuple[Written, dict[str, Any]]:
        store = Store(db)
        model = Model(create_backend(config), cache=store, concurrency=config.concurrency or 8)

        async def main() -> Written:
            try:
                return await write(model, dataset, kinds, stored_query_translations(db, dataset))
            finally:
                await model.aclose()

        try:
            written = asyncio.run(main())
        finally:
            if rows := model.take_cache_rows():
                store.write(rows)
            model.close()
        echo(f"{model.id}: {model.stats.backend_calls} calls, {model.stats.cache_hits} from the cache ({db}), "
             f"{model.stats.errors} failed")
        prompts = sorted({prompt_name(WRITTEN[k]) for k in kinds} | {BACK_PROMPT})
        return written, {"id": model.id, "prompts": {p: prompt_hash(p) for p in prompts},
                         "meaning": {"similarity": SIMILARITY, "threshold": THRESHOLD}}

    return writer
