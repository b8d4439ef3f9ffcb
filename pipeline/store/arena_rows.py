"""The doctors' arena's rows: a clinician's pairwise vote and the pairwise judge's verdict, each on the two texts
compared (their hashes and the style counts style control reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pipeline import style
from pipeline.store.row import Row, now, text_hash

ARENA_WINNERS = ("a", "b", "tie", "both_bad")  # a vote's outcome for (model_a, model_b); both_bad counts as a tie


def compared_texts(model_a: str, model_b: str, text_a: str, text_b: str) -> dict[str, Any]:
    """The two compared responses as a comparison row stores them: model_a < model_b (``swapped`` says whether
    the given order was turned), their text hashes and style counts (``pipeline.style``: length, markdown headers,
    list items, bold spans, what style control reads)."""
    if model_a == model_b:
        raise ValueError("a comparison needs two different models")
    swapped = model_a > model_b
    if swapped:
        model_a, model_b, text_a, text_b = model_b, model_a, text_b, text_a
    return {"model_a": model_a, "model_b": model_b, "response_hash_a": text_hash(text_a),
            "response_hash_b": text_hash(text_b), "swapped": swapped, **style.of_pair(text_a, text_b)}


# The two texts a comparison compared: their hashes and style counts, typed once from the style module's columns.
Compared = dataclass(slots=True)(type("Compared", (Row,), {
    "__doc__": "The two texts a comparison compared: their hashes and their style counts (``pipeline.style``).",
    "__annotations__": {"response_hash_a": str, "response_hash_b": str, **dict.fromkeys(style.COLUMNS, int)},
    "__module__": __name__}))


@dataclass(slots=True)
class ArenaVoteRow(Compared):
    """A clinician's pairwise preference between two models' responses to one query (the arena page, or
    ``arena import-votes``). ``model_a`` < ``model_b`` (``of`` orders them and turns ``winner`` with them);
    ``shown_left`` is the model shown on the left (None when not known, e.g. an imported vote); ``shown_at`` when
    the pair was shown (None when not known), ``voted_at`` when the vote was given: their difference is the
    voter-quality view's seconds per vote. The hashes and style counts are of the two texts compared: a
    regenerated response no longer counts."""

    TABLE: ClassVar[str] = "arena_votes"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "model_a", "model_b", "annotator")
    dataset: str
    query_id: str
    model_a: str
    model_b: str
    annotator: str
    winner: str
    shown_left: str | None
    tags: list[str]
    source: str
    voted_at: datetime = field(default_factory=now)
    shown_at: datetime | None = None  # schema 11

    @classmethod
    def of(cls, *, model_a: str, model_b: str, text_a: str, text_b: str, winner: str, **fields: Any) -> ArenaVoteRow:
        """The vote on the two texts shown, its models in canonical order (``winner`` turned with them)."""
        if winner not in ARENA_WINNERS:
            raise ValueError(f"winner {winner!r} is not one of {', '.join(ARENA_WINNERS)}")
        compared = compared_texts(model_a, model_b, text_a, text_b)
        if compared.pop("swapped"):
            winner = {"a": "b", "b": "a"}.get(winner, winner)
        return cls(winner=winner, **compared, **fields)


@dataclass(slots=True)
class PairwiseVerdictRow(Compared):
    """One pairwise judge call (stage ``pairwise``): ``judge_id`` compared the responses of ``model_a`` < ``model_b``
    with ``first`` shown first. ``verdict`` ('a', 'b', 'tie') is in terms of model_a / model_b, None when the output
    could not be read (``parse_ok`` False, ``raw_output`` kept). Both orders of a pair are two rows; hashes and
    style counts as ``ArenaVoteRow``'s."""

    TABLE: ClassVar[str] = "pairwise_verdicts"
    KEY: ClassVar[tuple[str, ...]] = ("dataset", "query_id", "judge_id", "model_a", "model_b", "first")
    dataset: str
    query_id: str
    judge_id: str
    model_a: str
    model_b: str
    first: str
    verdict: str | None
    parse_ok: bool
    raw_output: str
    run_id: str | None
    cached: bool = False
    created_at: datetime = field(default_factory=now)

    @classmethod
    def of(cls, *, model_a: str, model_b: str, text_a: str, text_b: str, **fields: Any) -> PairwiseVerdictRow:
        """The verdict on the two texts (``model_a`` < ``model_b`` already: the verdict is in their terms)."""
        compared = compared_texts(model_a, model_b, text_a, text_b)
        if compared.pop("swapped"):
            raise ValueError("a pairwise verdict's model_a must sort before its model_b")
        return cls(**compared, **fields)
