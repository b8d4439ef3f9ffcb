"""Health-Pariksha's protocol as the pipeline runs it: the paper's retrieval split, the KB as of the day the
patient asked, machine translation before retrieval (real embedded model, real LanceDB index)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pytest
from rich.console import Console

from pipeline.catalog import catalog
from pipeline.errors import UserError
from pipeline.runner import run
from pipeline.store import text_hash

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"


def _rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def _write(folder: Path, name: str, rows: list[dict]) -> None:
    (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def dated_kb(tmp_path: Path) -> Path:
    """A tiny KB whose shield advice changed on 2024-03-01, and two patients who asked before and after."""
    folder = tmp_path / "dated"
    folder.mkdir()
    _write(folder, "kb.jsonl", [
        {"chunk_id": "raw-1", "kind": "raw", "title": "Eye shield", "source": "leaflet", "updated": None,
         "text": "Wear the plastic eye shield at night for one week after cataract surgery."},
        {"chunk_id": "raw-2", "kind": "raw", "title": "Eye drops", "source": "leaflet", "updated": None,
         "text": "Use the antibiotic eye drops four times a day for three weeks."},
        {"chunk_id": "upd-1", "kind": "update", "title": "Eye shield (update)", "source": "doctor Q&A",
         "updated": "2024-03-01",
         "text": "Update (2024-03-01): wear the plastic eye shield at night for two weeks after surgery."},
    ])
    base = {"language": "en", "query_en": None, "themes": [], "update_sensitive": True,
            "query": "How long should I wear the eye shield at night?"}
    _write(folder, "queries.jsonl", [
        {**base, "query_id": "before", "asked_on": "2024-01-15", "kb_refs": ["raw-1"],
         "gt_response": "Wear the eye shield at night for one week.", "update_sensitive": False},
        {**base, "query_id": "after", "asked_on": "2024-04-10", "kb_refs": ["upd-1"],
         "gt_response": "Wear the eye shield at night for two weeks."},
    ])
    return folder


@pytest.mark.slow
def test_paper_retrieval_and_the_kb_as_of_the_query_date(dated_kb: Path, tmp_path: Path):
    db = tmp_path / "r.duckdb"
    config = catalog().config({
        "name": "dated", "dataset": str(dated_kb), "db": str(db),
        "models": [{"id": SMOLLM2, "max_tokens": 8}], "judge": {"id": SMOLLM2, "max_tokens": 8},
        "reask": {"times": 0},  # one call per prompt: an 8-token verdict is rarely readable, and re-asks are not this
    })
    assert config.retrieval.split == "by_kind" and config.retrieval.top_k == 3
    run(config, stages="retrieve,generate,judge", console=Console(file=io.StringIO()))
    stored = {q: (list(raw), list(upd)) for q, raw, upd in _rows(db, "SELECT query_id, raw_ids, update_ids FROM "
                                                                  "retrievals")}
    # asked after the update: the paper's top 3 over the whole KB, split by kind
    assert sorted(stored["after"][0] + stored["after"][1]) == ["raw-1", "raw-2", "upd-1"]
    assert stored["after"][1] == ["upd-1"]
    # asked before it: the update did not exist yet
    assert "upd-1" not in stored["before"][1] and stored["before"][1] == []
    # the update reaches the prompts of the patient who asked after it (generation + four judge calls), never
    # the other's: every metric sees the chunks, FC and SS the ground truth that names the patient
    prompts = [json.dumps(json.loads(r[0])["messages"], ensure_ascii=False) for r in _rows(db, "SELECT request FROM "
                                                                                             "llm_cache")]
    assert len(prompts) == 2 + 2 * 4
    with_update = [p for p in prompts if "two weeks after surgery" in p]
    assert len(with_update) == 1 + 4
    assert not any("Wear the eye shield at night for one week." in p for p in with_update)
    # judge inputs per metric (Health-Pariksha 3.5.1): FC and SS see chunks and ground truth, COH and CON the
    # chunks and no ground truth
    for p in prompts:
        metric = next((m for m, label in (("FC", "Factual"), ("SS", "Semantic Similarity"), ("COH", "Coherence"),
                                          ("CON", "Conciseness")) if f'\\"name\\": \\"{label}' in p), None)
        if metric is None:
            continue  # a generation prompt
        assert "Raw knowledge base chunks:" in p, metric
        assert ("Ground-truth reference:" in p) == (metric in ("FC", "SS")), metric


@pytest.mark.slow
def test_a_hindi_query_without_english_is_machine_translated_before_retrieval(dated_kb: Path, tmp_path: Path):
    _write(dated_kb, "queries.jsonl", [
        {"query_id": "hi-1", "language": "hi", "query": "ऑपरेशन के बाद रात में आँख की ढाल कितने दिन पहनें?",
         "query_en": None, "gt_response": "Wear the eye shield at night for two weeks.", "themes": [],
         "kb_refs": ["upd-1"], "update_sensitive": True},
    ])
    db = tmp_path / "r.duckdb"
    config = catalog().config({
        "name": "translated", "dataset": str(dated_kb), "db": str(db), "models": [{"id": "extractive/top-sentences"}],
        "translator": {"id": SMOLLM2, "max_tokens": 48},
    })
    try:
        run(config, stages="translate,retrieve", console=Console(file=io.StringIO()))
    except UserError as exc:  # the tiny translator wrote nothing: flagged, and nothing retrieved from it
        assert "no English rendering" in str(exc)
        (error,), = _rows(db, "SELECT error FROM translations WHERE query_id = 'hi-1'")
        assert error and _rows(db, "SELECT count(*) FROM retrievals") == [(0,)]
        return
    (text, translator, source_hash, error), = _rows(
        db, "SELECT text, translator_id, source_hash, error FROM translations WHERE query_id = 'hi-1'")
    assert error is None and text.strip() and translator == SMOLLM2 and source_hash == text_hash(
        "ऑपरेशन के बाद रात में आँख की ढाल कितने दिन पहनें?")
    (search_text,), = _rows(db, "SELECT search_text FROM retrievals WHERE query_id = 'hi-1'")
    assert search_text == text  # retrieval searched the machine rendering, not the Devanagari text
    # a second run reuses the stored rendering: no new call
    again = run(config, stages="translate,retrieve", console=Console(file=io.StringIO()))
    assert _rows(db, "SELECT backend_calls FROM runs WHERE run_id = ?", [again]) == [(0,)]


def test_a_response_that_copies_the_system_prompt_is_a_prompt_echo():
    from pipeline.dataset import load_dataset
    from pipeline.steps.generate import build_messages
    from pipeline.steps.safety import check_response

    dataset = load_dataset(REPO / "data" / "cataract")
    q = dataset.queries[0]
    raw = [dataset.chunk(c) for c in q.kb_refs if dataset.chunk(c).kind == "raw"]
    prompt = build_messages(q, raw, [])
    checks = {name: (passed, detail) for name, passed, detail in check_response(q, prompt[0]["content"], prompt)}
    assert checks["prompt_echo"][0] is False and "system prompt" in checks["prompt_echo"][1]
    answer = {name: passed for name, passed, _ in check_response(q, q.gt_response, prompt)}
    assert answer["prompt_echo"] is True  # a real answer, even one quoting a chunk sentence, is not an echo


def test_the_extractive_baseline_never_repeats_a_sentence():
    import asyncio

    from pipeline.config import ModelConfig
    from pipeline.models.base import ChatRequest, GenerateParams
    from pipeline.models.extractive import ExtractiveBackend

    shared = "Use the antibiotic eye drops four times a day for three weeks after the operation."
    request = ChatRequest(messages=({"role": "user", "content": "drops?"},), params=GenerateParams(max_tokens=64),
                          context={"query": "How often should I use the antibiotic eye drops?",
                                   "raw_texts": [f"{shared} Keep the bottle closed.", f"Wash your hands. {shared}"],
                                   "update_texts": []})
    text = asyncio.run(ExtractiveBackend(ModelConfig(id="extractive/top-sentences")).complete(request)).text
    assert text.count(shared) == 1


@pytest.mark.slow
def test_a_jury_of_two_embedded_judges_scores_every_item(tmp_path: Path):
    """MedHELM-style jury: `judge:` a list; every judge scores every item and both are stored apart."""
    db = tmp_path / "r.duckdb"
    config = catalog().config({
        "name": "jury", "dataset": str(REPO / "data" / "cataract"), "db": str(db), "languages": ["en"],
        "per_language": 1, "models": [{"id": "extractive/top-sentences"}],
        "judge": [{"id": SMOLLM2, "max_tokens": 16}, {"id": "llamacpp/gemma-3-270m", "max_tokens": 16}],
        "reask": {"times": 0, "on_rerun": False},  # one call an item: parsing is not what this tests
    })
    run(config, stages="retrieve,generate,judge", console=Console(file=io.StringIO()))
    per_judge = dict(_rows(db, "SELECT judge_id, count(*) FROM judgments GROUP BY ALL"))
    assert per_judge == {SMOLLM2: 4, "llamacpp/gemma-3-270m": 4}
    assert _rows(db, "SELECT count(DISTINCT judge_id), count(*) FROM item_scores") == [(2, 2)]


def test_responses_already_in_english_are_not_sent_for_an_english_rendering():
    """Readers get a machine English rendering of a non-English answer; an answer to a native-script query with
    no letter of that script is English already (the extractive baseline quotes the English KB), and an answer
    to a romanized query is rendered whatever its letters."""
    from pipeline.dataset import load_dataset
    from pipeline.steps.translate import needs_rendering

    queries = load_dataset(REPO / "data" / "cataract").queries
    first = {(q.language, q.script): q for q in reversed(queries)}
    hindi, romanized, english = first[("hi", "native")], first[("hi", "latin")], first[("en", "native")]
    assert needs_rendering("ऑपरेशन के बाद एक हफ्ते तक आंख में पानी न जाने दें।", hindi)
    assert needs_rendering("Operation ke baad ek hafte tak aankh mein paani na jaane dein.", romanized)
    assert not needs_rendering("Keep water out of the eye for a week after the operation.", hindi)
    assert not needs_rendering("Keep water out of the eye for a week after the operation.", english)
