"""Doctors' pairwise votes into ``arena_votes``: the arena page's one vote (``save_vote``) and a CSV of votes given
offline (``arena import-votes``).

The CSV's columns: ``dataset, query_id, model_a, model_b, winner`` (a, b, tie, both_bad) and ``annotator``; optional
``shown_left`` (model_a or model_b's id), ``tags`` (separated by ';'), ``shown_at`` (when the pair was shown) and
``voted_at`` (ISO date-times). Cells ``arena export-votes`` guarded against spreadsheets (``'=…``) are read back as
written. A vote is tied to the two responses stored now (their hashes and style counts). The file is one
transaction: one bad row (a missing field, an unknown dataset, query or model response, a winner not in the list,
a malformed time) and every bad row is printed with its line, nothing is written, the exit code is 1.

**Repeats** — a second vote of one annotator on one query and pair (a doctor who came back, a double click) — follow
one rule everywhere, ``REPEATS_DEFAULT`` 'first': the first vote counts and every later one is listed (line,
annotator, query, pair) and left out, as LMArena and MedArena do; a vote already stored is the first. 'last': the
latest counts (it replaces the earlier one). 'refuse': a repeat within the file is a bad row (the file is refused).
The arena page applies 'first': a second save of the same pair by the same annotator keeps the stored vote.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pipeline.dataset.csv_cells import uncell
from pipeline.dataset.label_csv import REPEATS, BadRow, csv_rows, validate_rows
from pipeline.labels.importing import import_command
from pipeline.store import Store
from pipeline.store.arena_rows import ARENA_WINNERS, ArenaVoteRow

REQUIRED_COLUMNS = ("query_id", "model_a", "model_b", "winner", "annotator")
REASON_TAGS = ("wrong", "unsafe", "incomplete", "too long", "wrong language", "ignored the KB update")
REPEATS_DEFAULT = "first"
VoteKey = tuple[str, str, str, str, str]  # dataset, query_id, model_a, model_b (sorted), annotator


def _current_texts(store: Store) -> tuple[set[str], dict[tuple[str, str, str], str]]:
    """Datasets, and (dataset, query_id, model_id) → current text of every response without an error."""
    if not store.path.exists():
        return set(), {}
    datasets = {r[0] for r in store.fetch("SELECT name FROM datasets")}
    texts = {(d, q, m): t for d, q, m, t in store.fetch(
        "SELECT dataset, query_id, model_id, text FROM responses WHERE error IS NULL AND text IS NOT NULL")}
    return datasets, texts


def _stored_votes(store: Store, text: str) -> set[VoteKey]:
    """The keys of the votes stored on the queries a votes CSV's ``text`` names (none in a file written before the
    arena): only those can repeat one of its rows."""
    import csv
    import io

    if not store.fetch("SELECT 1 FROM duckdb_tables() WHERE table_name = 'arena_votes'"):
        return set()
    queries = sorted({uncell(row.get("query_id", "")) for _, row in csv_rows(csv.DictReader(io.StringIO(text)))
                      if row is not None} - {""})
    return set(store.fetch("SELECT dataset, query_id, model_a, model_b, annotator FROM arena_votes WHERE "
                           "list_contains(?, query_id)", [queries]))


def _time(row: dict[str, str], column: str) -> datetime | None:
    """An ISO date-time cell (None when empty); BadRow for anything else ('now', 'today', '2026-13-01')."""
    if not row.get(column):
        return None
    try:
        return datetime.fromisoformat(row[column]).replace(tzinfo=None)
    except ValueError:
        raise BadRow(f"{column} {row[column]!r} is not an ISO date-time (e.g. 2026-12-05T14:03:00)") from None


def validate_vote_rows(text: str, *, datasets: set[str], texts: dict[tuple[str, str, str], str],
                       dataset: str | None, source: str, repeats: str = "refuse",
                       repeated: list[tuple[int, int, tuple]] | None = None, stored: set[VoteKey] | None = None,
                       ) -> tuple[list[ArenaVoteRow], list[str]]:
    """(vote rows, problems as 'line N: reason') of a votes CSV's text; a repeat (same query, pair of models and
    annotator, or with 'first' a vote of ``stored``) by ``repeats`` (``REPEATS``), each one listed in ``repeated``
    as (line, earlier line (0: the stored vote), key)."""

    def parse_row(row: dict[str, str], ds: str) -> tuple[VoteKey, ArenaVoteRow]:
        row = {k: uncell(v) for k, v in row.items()}
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
        voted_at, shown_at = _time(row, "voted_at"), _time(row, "shown_at")
        if shown_at is not None and voted_at is not None and shown_at > voted_at:
            raise BadRow(f"shown_at {row['shown_at']} is after voted_at {row['voted_at']}")
        tags = [t.strip() for t in (row.get("tags") or "").split(";") if t.strip()]
        vote = ArenaVoteRow.of(dataset=ds, query_id=row["query_id"], model_a=a, model_b=b, winner=winner,
                               annotator=row["annotator"], shown_left=left, tags=tags,
                               text_a=texts[(ds, row["query_id"], a)], text_b=texts[(ds, row["query_id"], b)],
                               source=source, shown_at=shown_at,
                               **({"voted_at": voted_at} if voted_at else {}))
        return (ds, vote.query_id, vote.model_a, vote.model_b, vote.annotator), vote

    return validate_rows(text, required=REQUIRED_COLUMNS, datasets=datasets, dataset=dataset, parse_row=parse_row,
                         same="same query, pair of models and annotator", repeats=repeats, repeated=repeated,
                         stored=stored or ())


def describe_repeat(line: int, earlier: int, key: VoteKey, repeats: str) -> str:
    """'line N: ...' naming a repeat's annotator, query and pair, and which vote counts."""
    ds, query_id, a, b, annotator = key
    of = f"line {earlier}" if earlier else "a vote stored before"
    counted = "this vote replaces it" if repeats == "last" else "not counted: the first vote counts"
    return (f"line {line}: repeat of {of} (annotator {annotator!r}, dataset {ds!r}, query {query_id!r}, pair "
            f"{a} vs {b}); {counted}")


def import_votes_command(csv_path: Path, *, db: Path, dataset: str | None = None,
                         repeats: str = REPEATS_DEFAULT) -> int:
    """CLI entry of ``arena import-votes``: all rows or nothing; bad rows printed with line and reason; repeats
    (``repeats``: first, last or refuse) listed with line, annotator, query and pair."""
    from pipeline.console import make_console
    from pipeline.errors import UserError

    if repeats not in REPEATS:
        raise UserError(f"--repeats: {repeats!r} is not one of {', '.join(REPEATS)}")
    console = make_console(stderr=True)
    repeated: list[tuple[int, int, VoteKey]] = []

    def validate(text: str, store: Store) -> tuple[list[ArenaVoteRow], list[str]]:
        datasets, texts = _current_texts(store)
        if dataset is not None and dataset not in datasets:
            raise UserError(f"--dataset: {dataset!r} is not in {db} (it holds {', '.join(sorted(datasets)) or 'none'})")
        repeated.clear()
        rows, problems = validate_vote_rows(text, datasets=datasets, texts=texts, dataset=dataset,
                                            source=Path(csv_path).name, repeats=repeats, repeated=repeated,
                                            stored=_stored_votes(store, text) if repeats == "first" else set())
        for line, earlier, key in sorted(repeated, key=lambda r: r[0]):
            console.print(f"{csv_path}:{describe_repeat(line, earlier, key, repeats)}", highlight=False,
                          soft_wrap=True)
        if repeated and not problems:
            counted = "the last of each counted" if repeats == "last" else "the first of each counted"
            console.print(f"{len(repeated)} repeated vote(s) ({counted}; --repeats {repeats})", highlight=False)
        return rows, problems

    return import_command(csv_path, db=db, validate=validate, what="vote", empty="no vote rows",
                          nothing_new=lambda: bool(repeated))


def save_vote(db: str | Path, *, dataset: str, query_id: str, model_a: str, model_b: str, winner: str,
              annotator: str, shown_left: str, tags: list[str], text_a: str, text_b: str, source: str = "app",
              shown_at: datetime | None = None) -> bool:
    """Save one vote of the arena page through the Store, tied to the two texts shown; ``shown_at``: when the page
    showed the pair. Repeats follow the 'first' rule: when this annotator already voted on this query and pair,
    the stored vote stays and False is returned."""
    if not annotator.strip():
        raise ValueError("a vote needs an annotator name")
    unknown = [t for t in tags if t not in REASON_TAGS]
    if unknown:
        raise ValueError(f"unknown reason tag(s) {unknown}; choose from {', '.join(REASON_TAGS)}")
    vote = ArenaVoteRow.of(dataset=dataset, query_id=query_id, model_a=model_a, model_b=model_b, winner=winner,
                           annotator=annotator.strip(), shown_left=shown_left, tags=list(tags), text_a=text_a,
                           text_b=text_b, source=source, shown_at=shown_at)
    store = Store(db)
    key = (vote.dataset, vote.query_id, vote.model_a, vote.model_b, vote.annotator)
    if store.path.exists() and store.fetch("SELECT 1 FROM duckdb_tables() WHERE table_name = 'arena_votes'") and \
            store.fetch("SELECT 1 FROM arena_votes WHERE dataset = ? AND query_id = ? AND model_a = ? AND model_b = ? "
                        "AND annotator = ?", list(key)):
        return False
    store.write([vote])
    return True
