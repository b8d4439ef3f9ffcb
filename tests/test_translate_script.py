"""A translation left in the source script: re-asked (``reask``) and then stored as a failed translation, counted
in the run's summary and shown as failed where renderings are shown; checked with the fixture server answering
every request in Devanagari (never what a real model says)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pytest
from rich.console import Console

from pipeline.catalog import catalog
from pipeline.config import RunConfig
from pipeline.dataset.languages import in_script_of
from pipeline.errors import UserError
from pipeline.runner import run
from pipeline.steps.translate import SOURCE_SCRIPT
from tests.support.openai_fixture import FixtureServer

DEVANAGARI = "ऑपरेशन के बाद आँख में पानी आना सामान्य है"
TRANSLATOR = "openai-compatible/fixture-translator"


def _rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def _dataset(folder: Path, query: dict) -> Path:
    folder.mkdir()
    kb = {"chunk_id": "raw-1", "kind": "raw", "title": "Eye drops", "source": "leaflet",
          "text": "Watering of the eye for a few days after cataract surgery is common. Use the drops as advised."}
    (folder / "kb.jsonl").write_text(json.dumps(kb) + "\n", encoding="utf-8")
    base = {"query_id": "hi-1", "language": "hi", "themes": [], "kb_refs": ["raw-1"],
            "gt_response": "Some watering for a few days is common."}
    (folder / "queries.jsonl").write_text(json.dumps({**base, **query}, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def _config(folder: Path, db: Path, server: FixtureServer, times: int) -> RunConfig:
    return catalog().config({
        "name": "script", "dataset": str(folder), "db": str(db), "models": [{"id": "extractive/top-sentences"}],
        "translator": {"id": TRANSLATOR, "base_url": server.base_url, "max_retries": 0},
        "reask": {"times": times}})


def _stage(db: Path, stage: str) -> dict:
    (summary,), = _rows(db, "SELECT summary FROM runs ORDER BY started_at DESC LIMIT 1")
    summary = json.loads(summary) if isinstance(summary, str) else summary
    return next(r for r in summary if r["stage"] == stage)


def test_script_of_a_rendering():
    assert in_script_of("Watering after surgery is common.", "en")
    assert not in_script_of(DEVANAGARI, "en")
    assert not in_script_of(f"{DEVANAGARI} (watering)", "en")  # mostly Devanagari
    assert in_script_of("১২৩ 42 !", "en")  # no letters: in no script, never a failure
    assert not in_script_of("கண்ணில் நீர் வடிதல் சாதாரணம்", "en")


def test_a_query_translation_left_in_the_source_script_is_reasked_then_counted_failed(tmp_path):
    folder = _dataset(tmp_path / "ds", {"query": "ऑपरेशन के बाद आँख से पानी आना ठीक है?"})
    db = tmp_path / "r.duckdb"
    with FixtureServer(latency_s=0.01, reply=DEVANAGARI) as server:
        with pytest.raises(UserError, match=f"1 {SOURCE_SCRIPT} after 2 re-ask"):
            run(_config(folder, db, server, times=2), stages="translate", console=Console(file=io.StringIO()))
        assert server.stats()["requests"] == 3  # the first ask and two re-asks, no more
    (text, error), = _rows(db, "SELECT text, error FROM translations WHERE query_id = 'hi-1'")
    assert text == DEVANAGARI and error.startswith(SOURCE_SCRIPT)
    record = _stage(db, "translate")
    assert (record["reasked"], record["unparsed"], record["errors"]) == (2, 1, 1)


def test_a_latin_rendering_is_taken_at_the_first_ask(tmp_path):
    folder = _dataset(tmp_path / "ds", {"query": "ऑपरेशन के बाद आँख से पानी आना ठीक है?"})
    db = tmp_path / "r.duckdb"
    with FixtureServer(latency_s=0.01, reply="Is watering of the eye normal after the operation?") as server:
        run(_config(folder, db, server, times=2), stages="translate", console=Console(file=io.StringIO()))
        assert server.stats()["requests"] == 1
    assert _rows(db, "SELECT error FROM translations") == [(None,)]
    assert _stage(db, "translate")["reasked"] == 0


def test_a_response_rendering_left_in_the_source_script_is_shown_failed(tmp_path):
    """A romanized Hindi query's response is rendered for readers; a rendering in Devanagari is re-asked, stored
    as failed and read back as failed (the response browser shows it as a warning, not as an English rendering)."""
    from pipeline.read.responses import renderings

    folder = _dataset(tmp_path / "ds", {"query": "operation ke baad aankh se paani aana theek hai?", "script": "latin",
                                        "query_en": "Is watering of the eye normal after the operation?"})
    db = tmp_path / "r.duckdb"
    with FixtureServer(latency_s=0.01, reply=DEVANAGARI) as server:
        run(_config(folder, db, server, times=1), stages="retrieve,generate,translate-responses",
            console=Console(file=io.StringIO()))
        assert server.stats()["requests"] == 2
    record = _stage(db, "translate-responses")
    assert (record["reasked"], record["unparsed"], record["errors"]) == (1, 1, 1)
    with duckdb.connect(str(db), read_only=True) as con:
        page = con.execute("SELECT query_id, model_id, text, error FROM responses").df()
        page["query"] = "operation ke baad aankh se paani aana theek hai?"
        _, shown = renderings(con, folder.name, page)
    (row,) = shown.itertuples()
    assert row.text == DEVANAGARI and row.error.startswith(SOURCE_SCRIPT) and row.current
