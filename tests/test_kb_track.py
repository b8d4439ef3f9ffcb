"""Results follow the knowledge base they came from (issue 38, item 3): a rerun after the KB changed retrieves again,
regenerates the answers whose chunks changed and rescores them; status, the home page and the export say which KB
each answer used; a changed file whose chunk ids are gone is one line, never a traceback."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from pipeline import cli
from pipeline.catalog import load_config
from pipeline.dataset import load_dataset
from pipeline.dataset.ingest import ingest
from pipeline.errors import UserError
from pipeline.read.export import export
from pipeline.read.home import database_status, kb_notes, overview
from pipeline.runner import execute
from pipeline.store import Store
from tests.support.datasets import write_config

MODEL = "extractive/top-sentences"
STAGES = "retrieve,generate,lexical"
DOCUMENTS = {
    "eye-drops.md": "# Eye drops after cataract surgery\n\nPut one drop of the antibiotic eye drops four times a "
                    "day for two weeks. Wash your hands before every drop and do not touch the tip of the bottle "
                    "to the eye. Wait five minutes between two different drops.\n",
    "food.md": "# Food after cataract surgery\n\nThere is no special diet after cataract surgery. You can eat your "
               "usual home food, including rice, dal and vegetables, from the same evening. Diabetic patients "
               "keep to their diabetic diet and take their tablets as usual.\n",
}
ADDED = {"driving.md": "# Driving after cataract surgery\n\nDo not drive a car, scooter or motorcycle for at least "
                      "one week after the operation. Drive again only after the doctor checks your vision at the "
                      "follow-up visit and says your new glasses, if any, are ready. Avoid driving at night for "
                      "the first month because of glare from headlights.\n"}
QUERIES = ["How many times a day should I put the antibiotic eye drops?",
           "Can I eat rice and dal after my cataract operation?",
           "When can I ride my scooter again after the operation?",
           "Is it safe to drive at night after cataract surgery?"]


def _dataset(tmp_path: Path) -> tuple[Path, Path]:
    """Source documents and the dataset folder ingested from them (kb.jsonl, and queries.jsonl written here)."""
    sources, folder = tmp_path / "sources", tmp_path / "eyecare"
    sources.mkdir()
    for name, text in DOCUMENTS.items():
        (sources / name).write_text(text, encoding="utf-8")
    ingest([sources], folder, max_tokens=120)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for i, query in enumerate(QUERIES):
            fh.write(json.dumps({"query_id": f"q{i}", "language": "en", "query": query, "query_en": None,
                                 "gt_response": "Follow the eye doctor's advice given at discharge.", "themes": [],
                                 "kb_refs": [], "update_sensitive": False}) + "\n")
    return sources, folder


def _run(config: Path, stages: str = STAGES, limit: int | None = None):
    return execute(load_config(config, limit=limit), stages=stages, console=Console(file=io.StringIO(), width=200))


def _table(db: Path, sql: str) -> pd.DataFrame:
    return Store(db).fetch_df(sql)


def test_a_rerun_after_a_document_was_added_retrieves_again_and_regenerates_the_answers_whose_chunks_changed(
        tmp_path):
    sources, folder = _dataset(tmp_path)
    db = tmp_path / "results.duckdb"
    config = write_config(tmp_path / "run.yaml", dataset=folder, db=db, models=[MODEL])
    first = _run(config)
    old_kb = load_dataset(folder).kb_hash
    before = _table(db, "SELECT query_id, list_concat(raw_ids, update_ids) AS chunks FROM retrievals").set_index(
        "query_id").chunks.map(list)
    answers = _table(db, "SELECT query_id, run_id, kb_hash, prompt_hash FROM responses").set_index("query_id")
    assert set(answers.run_id) == {first.run_id} and set(answers.kb_hash) == {old_kb}

    for name, text in ADDED.items():  # one more document, ingested into the same dataset folder
        (sources / name).write_text(text, encoding="utf-8")
    ingest([sources], folder, max_tokens=120)
    new_kb = load_dataset(folder).kb_hash
    assert new_kb != old_kb

    partial = _run(config, limit=2)  # the first two queries only: the other two answers stay from the old KB
    assert {(r.stage, r.items) for r in partial.records if r.stage == "retrieve"} == {("retrieve", 2)}
    _, models = database_status(db)
    assert (models.kb.tolist(), models.other_kb.tolist()) == ([new_kb], [2])
    (note,) = kb_notes(overview(db)["models"])
    assert note.startswith("eyecare: 2 of 4 answers come from another knowledge base") and new_kb in note

    final = _run(config)
    retrieved = {r.stage: (r.items, r.skipped) for r in final.records}["retrieve"]
    assert retrieved == (2, 2)  # the two retrieved from the old KB; the two of the partial run are current
    after = _table(db, "SELECT query_id, list_concat(raw_ids, update_ids) AS chunks, kb_hash FROM retrievals"
                   ).set_index("query_id")
    assert set(after.kb_hash) == {new_kb}
    changed = {q for q in after.index if list(after.chunks[q]) != before[q]}
    assert changed, "the added document changed no query's chunks: the test proves nothing"
    now = _table(db, "SELECT query_id, run_id, kb_hash, prompt_hash, response_hash FROM responses").set_index(
        "query_id")
    regenerated = {q for q in now.index if now.run_id[q] != first.run_id}
    assert regenerated == changed  # exactly the answers whose chunks changed were asked again
    assert all(now.prompt_hash[q] == answers.prompt_hash[q] for q in now.index if q not in changed)
    assert set(now.kb_hash) == {new_kb}  # kept answers had the same prompt under the new KB
    lexical = _table(db, "SELECT query_id, response_hash FROM lexical_scores").set_index("query_id")
    assert (lexical.response_hash.sort_index() == now.response_hash.sort_index()).all()  # scores follow the answers
    _, models = database_status(db)
    assert (models.kb.tolist(), models.other_kb.tolist()) == ([new_kb], [0])
    assert kb_notes(overview(db)["models"]) == []
    export(db, tmp_path / "export", fmt="csv", tables=["responses", "retrievals"])
    exported = pd.read_csv(tmp_path / "export" / "responses.csv")
    assert set(exported.kb_hash) == {new_kb}


def test_a_changed_file_whose_chunk_ids_are_gone_is_retrieved_again_or_refused_in_one_line(
        tmp_path, monkeypatch, capsys):
    sources, folder = _dataset(tmp_path)
    db = tmp_path / "results.duckdb"
    config = write_config(tmp_path / "run.yaml", dataset=folder, db=db, models=[MODEL])
    _run(config, stages="retrieve,generate")
    drops = sources / "eye-drops.md"
    drops.write_text(drops.read_text(encoding="utf-8") + "\nStop the drops only when the doctor says so.\n",
                     encoding="utf-8")
    report = ingest([drops], folder, max_tokens=120)
    assert report["retired_chunks"]
    used = set(_table(db, "SELECT unnest(list_concat(raw_ids, update_ids)) AS c FROM retrievals").c)
    assert used & set(report["retired_chunks"]), "no stored retrieval names a retired chunk: the test proves nothing"

    with pytest.raises(UserError, match="the knowledge base changed since query q"):  # no retrieve stage: refused
        _run(config, stages="generate")
    monkeypatch.setattr(sys, "argv", ["pipeline", "run", "--config", str(config), "--stages", "generate"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip().startswith("error")]
    assert exit_.value.code == 1 and len(lines) == 1 and "run the retrieve stage again" in lines[0]
    assert "Traceback" not in out.err and "KeyError" not in out.err

    result = _run(config, stages="retrieve,generate")  # the first run again: it retrieves, no lost chunk id
    assert result.status == "finished"
    gone = set(report["retired_chunks"])
    assert not gone & set(_table(db, "SELECT unnest(list_concat(raw_ids, update_ids)) AS c FROM retrievals").c)
