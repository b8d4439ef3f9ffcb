"""The KB as it stood (issue 44): a query sees updates approved strictly before it was asked and never an update
made from its own message (a provenance link, whatever the dates); validate refuses a dataset whose query can
retrieve its own ground truth; no bundled dataset lets a query see its own answer; the arena never shows the
reference's text beside a blind pair that contains it."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from pipeline.dataset import Chunk, Query, validate
from pipeline.dataset.format import chunk_source_message, message_ref
from pipeline.dataset.loader import own_answer_leaks, unseen_by
from pipeline.read import arena
from pipeline.store import Store
from pipeline.store.arena_rows import ArenaVoteRow
from pipeline.store.rows import ChunkRow, DatasetRow, QueryRow, ResponseRow, RetrievalRow

REPO = Path(__file__).resolve().parent.parent
ANSWER = "Start the antibiotic eye drops one day before surgery, four times a day."


def chunk(chunk_id: str, updated: str | None, message: str | None = None, text: str = "Some advice text.") -> Chunk:
    provenance = {"source_message": message} if message else None
    return Chunk(chunk_id=chunk_id, kind="update" if updated else "raw", title="t", text=text, source="s",
                 updated=updated, provenance=provenance)


def query(asked_on: str | None, message: str | None = None) -> Query:
    return Query(query_id="q", language="en", query="When do I start the drops?", gt_response=ANSWER,
                 asked_on=asked_on, source_message=message)


def test_only_updates_approved_strictly_before_the_question_are_seen():
    q = query("2024-01-09")
    assert unseen_by(q, chunk("u", "2024-01-09"))  # the same day: it may be this question's own answer
    assert unseen_by(q, chunk("u", "2024-01-10"))
    assert unseen_by(q, chunk("u", "2024-01-08")) is None
    assert unseen_by(q, chunk("raw", None)) is None


def test_an_update_made_from_the_querys_own_message_is_never_seen_whatever_its_date():
    own = message_ref("chatbot_log.csv", 4)
    q = query("2024-01-09", own)
    early = chunk("u", "2024-01-01", own)  # a wrongly early approval date: the link still hides it
    assert chunk_source_message(early) == own and "own message" in unseen_by(q, early)
    assert unseen_by(q, chunk("u", "2024-01-01", message_ref("chatbot_log.csv", 5))) is None
    assert unseen_by(query(None, own), early)  # no date at all: the link alone decides


def write_dataset(folder: Path, chunks: list[dict], queries: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "kb.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    return folder


def test_validate_refuses_a_query_that_can_retrieve_its_own_ground_truth(tmp_path: Path):
    raw = {"chunk_id": "raw-1", "kind": "raw", "title": "Drops", "text": "Before surgery. " + ANSWER, "source": "d"}
    update = {"chunk_id": "upd-1", "kind": "update", "title": "Q&A", "text": "When drops?\n" + ANSWER.upper(),
              "source": "log", "updated": "2024-01-02"}
    q = {"query_id": "q1", "language": "en", "query": "When do I start the drops?", "gt_response": ANSWER,
         "asked_on": "2024-01-05"}
    dataset, issues = validate(write_dataset(tmp_path / "leak", [raw, update], [q]))
    assert dataset is None
    [issue] = [i for i in issues if i.severity == "error"]
    assert (issue.line, issue.field) == (1, "gt_response") and "'upd-1'" in issue.message
    # the update linked to the query's own message is hidden: valid (a raw document holding the answer is fine)
    linked = {**update, "provenance": {"source_message": "log.csv:2"}}
    own = {**q, "source_message": "log.csv:2"}
    dataset, issues = validate(write_dataset(tmp_path / "linked", [raw, linked], [own]))
    assert dataset is not None, issues
    assert dataset.hidden_for(dataset.queries[0]) == {"upd-1"}
    # dated the day of the question: hidden as well
    dataset, _ = validate(write_dataset(tmp_path / "same-day", [raw, {**update, "updated": "2024-01-05"}], [q]))
    assert dataset is not None and dataset.hidden_for(dataset.queries[0]) == {"upd-1"}


def bundled() -> list[Path]:
    return sorted(p for p in (REPO / "data").iterdir() if p.is_dir() and any(p.glob("queries.*")))


def test_the_bundled_datasets_are_all_checked():
    assert {p.name for p in bundled()} >= {"cataract", "eyecare-qa", "eyecare-ingested"}


@pytest.mark.parametrize("folder", bundled(), ids=lambda p: p.name)
def test_no_bundled_query_can_retrieve_a_chunk_made_from_its_own_answer(folder: Path):
    dataset, issues = validate(folder)
    assert dataset is not None, [str(i) for i in issues if i.severity == "error"]
    assert own_answer_leaks(dataset) == []
    for q in dataset.queries:
        hidden = dataset.hidden_for(q)
        own = [c.chunk_id for c in dataset.update_chunks
               if q.source_message and chunk_source_message(c) == q.source_message]
        assert set(own) <= hidden, q.query_id
        assert all(c.updated < q.asked_on for c in dataset.update_chunks if q.asked_on and c.chunk_id not in hidden)


def test_the_worked_example_links_its_updates_to_their_messages():
    dataset, _ = validate(REPO / "data" / "eyecare-ingested")
    linked = {chunk_source_message(c) for c in dataset.update_chunks} & {q.source_message for q in dataset.queries}
    assert linked  # the red-team's case: answers approved into the KB the day their question was asked
    for q in dataset.queries:
        if q.source_message in linked:
            assert {c.chunk_id for c in dataset.update_chunks if chunk_source_message(c) == q.source_message} \
                <= dataset.hidden_for(q)


def arena_db(path: Path) -> Path:
    rows: list = [DatasetRow(name="ds", path="data/ds", closed_book=False, n_queries=1, n_chunks=2, content_hash=None),
                  QueryRow(dataset="ds", query_id="q1", language="en", query="When do I start the drops?",
                           query_en=None, gt_response=ANSWER, themes=[], kb_refs=[], update_sensitive=False),
                  ChunkRow(dataset="ds", chunk_id="upd-1", kind="update", title="Q&A", text="Drops?\n" + ANSWER,
                           source="log", updated=date(2024, 1, 2)),
                  ChunkRow(dataset="ds", chunk_id="raw-1", kind="raw", title="SOP", text="Fast for six hours.",
                           source="sop", updated=None),
                  RetrievalRow(dataset="ds", query_id="q1", search_text="drops", raw_ids=["raw-1"],
                               update_ids=["upd-1"], recall=None, settings="{}")]
    for model, text in (("reference/approved", ANSWER), ("org/a", "Use the drops."), ("org/b", "Ask your doctor.")):
        rows.append(ResponseRow(dataset="ds", query_id="q1", model_id=model, run_id=None, prompt_hash=None,
                                text=text, error=None))
    Store(path).write(rows)
    return path


def test_the_arena_never_shows_the_references_text_beside_a_pair_that_holds_it(tmp_path: Path):
    db = arena_db(tmp_path / "r.duckdb")
    seen = set()
    for _ in range(3):
        item = arena.next_pair(db, "ds", None, "dr", adaptive=False)
        pair = (item["model_a"], item["model_b"])
        seen.add(pair)
        texts = [item["gt_response"] or "", *(c["text"] for c in item["chunks"])]
        if "reference/approved" in pair:
            assert item["gt_response"] is None and item["withheld_chunks"] == 1
            assert not any(ANSWER.casefold() in t.casefold() for t in texts)
            assert [c["text"] for c in item["chunks"]] == ["Fast for six hours."]
        else:
            assert item["gt_response"] == ANSWER and len(item["chunks"]) == 2 and item["withheld_chunks"] == 0
        Store(db).write([ArenaVoteRow.of(dataset="ds", query_id="q1", model_a=pair[0], model_b=pair[1],
                                               winner="tie", annotator="dr", shown_left=pair[0], tags=[],
                                               text_a=item["text_a"], text_b=item["text_b"], source="app")])
    assert len(seen) == 3


def test_the_retrieve_step_never_stores_a_querys_own_update(tmp_path: Path):
    """End to end through LanceDB: the query's own update (linked, and dated the day it was asked) and a same-day
    update are not retrieved, though they match the query best; an earlier update is."""
    import io

    from rich.console import Console

    from pipeline.config import RunConfig
    from pipeline.runner import run

    question = "Can I take my blood pressure tablet on the morning of cataract surgery?"
    chunks = [
        {"chunk_id": "raw-1", "kind": "raw", "title": "Fasting", "text": "Do not eat for six hours before surgery.",
         "source": "sop"},
        {"chunk_id": "own", "kind": "update", "title": f"Q&A: {question}", "text": f"{question}\n{ANSWER}",
         "source": "log.csv", "updated": "2024-01-01", "provenance": {"source_message": "log.csv:2"}},
        {"chunk_id": "same-day", "kind": "update", "title": f"Q&A: {question}", "text": f"{question} Yes, usually.",
         "source": "log.csv", "updated": "2024-01-08"},
        {"chunk_id": "earlier", "kind": "update", "title": "BP tablets", "text": "Blood pressure tablets: take them "
         "with a sip of water on the morning of surgery.", "source": "doctor", "updated": "2024-01-02"},
    ]
    q = {"query_id": "q1", "language": "en", "query": question, "gt_response": ANSWER, "asked_on": "2024-01-08",
         "source_message": "log.csv:2"}
    folder = write_dataset(tmp_path / "own", chunks, [q])
    config = RunConfig.model_validate({"name": "own", "dataset": str(folder), "db": str(tmp_path / "r.duckdb"),
                                       "retrieval": {"top_k": 4, "split": "by_kind"},
                                       "models": [{"id": "extractive/top-sentences"}]})
    run(config, stages="retrieve", console=Console(file=io.StringIO()))
    [(raw, updates)] = Store(tmp_path / "r.duckdb").fetch("SELECT raw_ids, update_ids FROM retrievals")
    assert "earlier" in updates and not {"own", "same-day"} & {*raw, *updates}
