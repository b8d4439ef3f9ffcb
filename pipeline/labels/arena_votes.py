"""Doctors' pairwise votes into ``arena_votes``: the arena page's one vote (``save_vote``) and a CSV of votes given
offline (``arena import-votes``).

The CSV's columns: ``dataset, query_id, model_a, model_b, winner`` (a, b, tie, both_bad) and ``annotator``; optional
``shown_left`` (model_a or model_b's id), ``tags`` (separated by ';') and ``voted_at`` (ISO date-time). A vote is
tied to the two responses stored now (their hashes and style counts). The file is one transaction: one bad row (a
missing field, an unknown dataset, query or model response, a winner not in the list, a repeated vote) and every
bad row is printed with its line, nothing is written, the exit code is 1.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pipeline.dataset.label_csv import BadRow, validate_rows
from pipeline.labels.importing import import_command
from pipeline.store import Store
from pipeline.store.arena_rows import ARENA_WINNERS, ArenaVoteRow

REQUIRED_COLUMNS = ("query_id", "model_a", "model_b", "winner", "annotator")
REASON_TAGS = ("wrong", "unsafe", "incomplete", "too long", "wrong language", "ignored the KB update")


def _current_texts(store: Store) -> tuple[set[str], dict[tuple[str, str, str], str]]:
    """Datasets, and (dataset, query_id, model_id) → current text of every response without an error."""
    if not store.path.exists():
        return set(), {}
    datasets = {r[0] for r in store.fetch("SELECT name FROM datasets")}
    texts = {(d, q, m): t for d, q, m, t in store.fetch(
        "SELECT dataset, query_id, model_id, text FROM responses WHERE error IS NULL AND text IS NOT NULL")}
    return datasets, texts


def validate_vote_rows(text: str, *, datasets: set[str], texts: dict[tuple[str, str, str], str],
                       dataset: str | None, source: str) -> tuple[list[ArenaVoteRow], list[str]]:
    """(vote rows, problems as 'line N: reason') of a votes CSV's text."""

    def parse_row(row: dict[str, str], ds: str) -> tuple[tuple, ArenaVoteRow]:
        a, b, winner = row["model_a"], row["model_b"], row["winner"].lower()
        if winner not in ARENA_WINNERS:
            raise BadRow(f"winner {row['winner']!r} is not one of {', '.join(ARENA_WINNERS)}")
        if a == b:
            raise BadRow(f"model_a and model_b are both {a!r}")
        for model in (a, b):
            if (ds, row["query_id"], model) not in texts:
                raise BadRow(f"model {model!r} has no response to {row['query_id']!r} in dataset {ds!r}")
        left = row.get("shown_left") or None
        if left is not None and left not in (a, b):
            raise BadRow(f"shown_left {left!r} is neither model_a nor model_b")
        try:
            voted_at = datetime.fromisoformat(row["voted_at"]).replace(tzinfo=None) if row.get("voted_at") else None
        except ValueError:
            raise BadRow(f"voted_at {row['voted_at']!r} is not an ISO date-time") from None
        tags = [t.strip() for t in (row.get("tags") or "").split(";") if t.strip()]
        vote = ArenaVoteRow.of(dataset=ds, query_id=row["query_id"], model_a=a, model_b=b, winner=winner,
                               annotator=row["annotator"], shown_left=left, tags=tags,
                               text_a=texts[(ds, row["query_id"], a)], text_b=texts[(ds, row["query_id"], b)],
                               source=source,
                               **({"voted_at": voted_at} if voted_at else {}))
        return (ds, vote.query_id, vote.model_a, vote.model_b, vote.annotator), vote

    return validate_rows(text, required=REQUIRED_COLUMNS, datasets=datasets, dataset=dataset, parse_row=parse_row,
                         same="same query, pair of models and annotator")


def import_votes_command(csv_path: Path, *, db: Path, dataset: str | None = None) -> int:
    """CLI entry of ``arena import-votes``: all rows or nothing; bad rows printed with line and reason."""

    def validate(text: str, store: Store) -> tuple[list[ArenaVoteRow], list[str]]:
        datasets, texts = _current_texts(store)
        return validate_vote_rows(text, datasets=datasets, texts=texts, dataset=dataset, source=Path(csv_path).name)

    return import_command(csv_path, db=db, validate=validate, what="vote", empty="no vote rows")


def save_vote(db: str | Path, *, dataset: str, query_id: str, model_a: str, model_b: str, winner: str,
              annotator: str, shown_left: str, tags: list[str], text_a: str, text_b: str, source: str = "app") -> None:
    """Save one vote of the arena page through the Store, tied to the two texts shown."""
    if not annotator.strip():
        raise ValueError("a vote needs an annotator name")
    unknown = [t for t in tags if t not in REASON_TAGS]
    if unknown:
        raise ValueError(f"unknown reason tag(s) {unknown}; choose from {', '.join(REASON_TAGS)}")
    Store(db).write([ArenaVoteRow.of(dataset=dataset, query_id=query_id, model_a=model_a, model_b=model_b,
                                     winner=winner, annotator=annotator.strip(), shown_left=shown_left,
                                     tags=list(tags), text_a=text_a, text_b=text_b, source=source)])
