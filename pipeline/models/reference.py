"""``reference/approved``: a dataset's doctor-approved answers (``gt_response``) evaluated as a pseudo-model.

HealthBench grades physicians' own answers with the same grader, so every model is read against what doctors
write. Listing ``reference/approved`` in a config's ``models:`` makes each query's approved answer a response of
its own: no LLM call, no cost. Its "prompt" is the approved answer itself (``reference_request``), so the stored
response, its prompt hash and its cache key follow an edited answer.

It is scored wherever a score does not compare an answer with that same reference — rubric grades, safety checks,
the pairwise judge, arena votes — and shown there as a marked reference row, never ranked as a model. Steps whose
score compares with the reference (the Health-Pariksha judge's FC/SS and so AGG, lexical METEOR/ROUGE, Med-CoDE,
answer checks) skip it (``compares_with_reference``). ``is_reference`` is the one test every layer uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pipeline.config import ModelConfig
from pipeline.dataset import Query
from pipeline.models.base import Backend, ChatRequest, Completion, GenerateParams, Message, PromptTokens

PROVIDER = "reference"
REFERENCE_ID = "reference/approved"
LABEL = "📋 Doctors' approved answers (reference)"
#: why a board that compares answers with the approved answer has no reference row (the FC/SS leaderboard's note)
NOT_SCORED_NOTE = ("The doctors' approved answers (`reference/approved`) are not scored here: FC and SS compare an "
                   "answer with that very answer (and AGG weighs them; COH and CON are left out with them), as do "
                   "METEOR/ROUGE and Med-CoDE's critic. They are read as a reference row on the rubric, safety, "
                   "pairwise-judge and arena boards.")
#: the steps whose scores compare an answer with the query's approved answer: they never score the reference
COMPARES_WITH_REFERENCE = frozenset({"judge", "lexical", "medcode", "medcode-label", "accuracy"})

T = TypeVar("T")


def is_reference(model_id: str) -> bool:
    """Whether ``model_id`` is the doctors' approved answers, not a model."""
    return model_id.partition("/")[0] == PROVIDER


def label(model_id: str) -> str:
    """How a board names ``model_id``: the reference row marked, a model by its id."""
    return LABEL if is_reference(model_id) else model_id


def has_approved_answer(query: Query) -> bool:
    """Whether ``query`` carries an answer a doctor wrote or approved: an open question with a ``gt_response`` that
    is not an importer's placeholder (HealthBench's items without an ideal completion). A multiple-choice key is
    not an answer to grade."""
    from pipeline.dataset.importers import NO_IDEAL

    text = (query.gt_response or "").strip()
    return bool(text) and text != NO_IDEAL and not query.options


def scorable(step: str, items: Iterable[T], model_of: Any = lambda it: it.model_id) -> list[T]:
    """``items`` (responses to score) without the reference's when ``step`` compares with the reference."""
    if step not in COMPARES_WITH_REFERENCE:
        return list(items)
    return [it for it in items if not is_reference(model_of(it))]


def reference_request(query: Query, params: GenerateParams) -> ChatRequest:
    """The reference's request for ``query``: the question and its approved answer (what it "generates")."""
    return ChatRequest(messages=({"role": "user", "content": query.query},
                                 {"role": "assistant", "content": query.gt_response}), params=params)


class NoPromptTokens(PromptTokens):
    """Not an LLM: no tokens to count or pay for."""

    method = "not an LLM"

    def count(self, messages: Sequence[Message]) -> int:
        return 0


def unavailable(config: ModelConfig) -> str | None:
    if config.id != REFERENCE_ID:
        return f"the reference provider has one member: {REFERENCE_ID} (the dataset's approved answers)"
    return None


class ReferenceBackend(Backend):
    """Answers with the approved answer its request carries (``reference_request``)."""

    billed = False

    @classmethod
    def prompt_tokens(cls, config: ModelConfig) -> PromptTokens:
        return NoPromptTokens()

    @classmethod
    def needs(cls, config: ModelConfig) -> str:
        return "the dataset's approved answers"

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.config.id}

    async def complete(self, request: ChatRequest) -> Completion:
        answer = request.messages[-1]
        if answer["role"] != "assistant":
            raise ValueError(f"{REFERENCE_ID} answers only its own requests (the approved answer last)")
        return Completion(text=answer["content"], completion_tokens=len(answer["content"].split()))


def create(config: ModelConfig) -> ReferenceBackend:
    return ReferenceBackend(config)


BACKEND = ReferenceBackend
