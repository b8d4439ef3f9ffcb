"""``extractive/top-sentences``: a non-LLM baseline that answers with retrieved sentences.

It splits the retrieved chunks (updates first) into sentences and returns the ones most similar
to the query's English rendering (MiniLM cosine), in their original order. It needs the
structured request context that the generation stage passes along with the messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.config import ModelConfig
from pipeline.dataset import REFUSAL_SENTENCE
from pipeline.models.base import Backend, ChatRequest, Completion, Message, PromptTokens

SENTENCE_END = re.compile(r"(?<=[.!?।])\s+")
TOP_SENTENCES = 2


def unavailable(config: ModelConfig) -> str | None:
    if config.name != "top-sentences":
        return "the extractive provider has one model: extractive/top-sentences"
    return None


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text) if len(s.strip().split()) >= 3]


class NoPromptTokens(PromptTokens):
    """Not an LLM: no tokens to count or pay for."""

    method = "not an LLM"

    def count(self, messages: Sequence[Message]) -> int:
        return 0


class ExtractiveBackend(Backend):
    billed = False

    @classmethod
    def prompt_tokens(cls, config: ModelConfig) -> PromptTokens:
        return NoPromptTokens()

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.config.id, "top_sentences": TOP_SENTENCES, "embedder": "all-MiniLM-L6-v2",
                "distinct_sentences": True}

    async def complete(self, request: ChatRequest) -> Completion:
        from pipeline.models.embedder import get_embedder

        context = request.context or {}
        passages: list[str] = list(context.get("update_texts", [])) + list(context.get("raw_texts", []))
        # a sentence two chunks share is one candidate (never repeated in the answer); updates come first
        sentences = list(dict.fromkeys(s for p in passages for s in split_sentences(p)))
        if not sentences:
            return Completion(text=REFUSAL_SENTENCE)
        vectors = get_embedder().encode([context.get("query_en") or context.get("query", ""), *sentences])
        similarity = vectors[1:] @ vectors[0]
        best = sorted(np.argsort(-similarity)[:TOP_SENTENCES])
        text = " ".join(sentences[i] for i in best)
        return Completion(text=text, completion_tokens=len(text.split()))


def create(config: ModelConfig) -> ExtractiveBackend:
    return ExtractiveBackend(config)


BACKEND = ExtractiveBackend
