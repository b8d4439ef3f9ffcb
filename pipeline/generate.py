"""Generation: the paper's uniform RAG prompt, the same retrieved chunks for every model.

The system prompt is Health-Pariksha's Figure 3 (``prompts/generation_system.txt``); raw chunks
and KB-update chunks are given separately (§3.4), ``{query_lang}`` is the query's language and
``{response_lang}`` the same. A closed-book dataset gets the same prompt with empty knowledge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from pipeline.dataset import LANGUAGES, Chunk, Query
from pipeline.models.base import ChatRequest, GenerateParams, Message
from pipeline.prompts import load_text

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
    system = load_text("generation_system.txt").format(query_lang=language, response_lang=language)
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
