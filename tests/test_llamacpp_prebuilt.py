"""The ``llamacpp/`` models on llama.cpp's prebuilt wheel (xllamacpp) before llama-cpp-python is built.

- The prompt is llama-cpp-python's: Gemma's rendered as ``format_gemma`` renders it, SmolLM2's through its GGUF's
  template, compared token for token where both engines are installed.
- The engine is in the cache key and on every answer; a run on llama-cpp-python answers again what the prebuilt
  engine answered, and a rerun on the same engine makes no call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from pipeline.catalog import load_config
from pipeline.config import ModelConfig
from pipeline.models import ChatRequest, GenerateParams, Model, create_backend, engine_of
from pipeline.models.base import cache_key
from pipeline.models.llamacpp import ENGINE_ENV, LLAMA_CPP_PYTHON, as_sent, engine, unavailable
from pipeline.models.llamacpp_prebuilt import ENGINE, first_token_logprobs, render_gemma, unsupported
from pipeline.runner import run
from pipeline.store import open_connection

REPO = Path(__file__).resolve().parent.parent
SMOLLM2 = "llamacpp/smollm2-135m-instruct"
GEMMA = "llamacpp/gemma-3-270m"
MESSAGES = ({"role": "system", "content": "You answer patients' questions about eye care."},
            {"role": "user", "content": "What is a cataract?"})


def test_engine_env_names_an_engine(monkeypatch):
    monkeypatch.setenv(ENGINE_ENV, "no-such-engine")
    with pytest.raises(Exception, match="the engines are"):
        engine()
    monkeypatch.setenv(ENGINE_ENV, ENGINE)
    assert engine() in (ENGINE, None)
    assert engine_of(ModelConfig(id="extractive/top-sentences")) is None


def test_gemma_prompt_and_chat_formats():
    sent = as_sent(MESSAGES, "gemma")
    assert render_gemma(sent) == ("<start_of_turn>user\nYou answer patients' questions about eye care.\n\n"
                                  "What is a cataract?<end_of_turn>\n<start_of_turn>model\n")
    assert unsupported(None) is None and unsupported("gemma") is None
    assert "llama-cpp-python" in unsupported("chatml")


def test_gemma_prompt_is_llama_cpp_pythons():
    llama_chat_format = pytest.importorskip("llama_cpp.llama_chat_format")
    sent = as_sent(MESSAGES, "gemma")
    assert render_gemma(sent) == llama_chat_format.format_gemma(sent).prompt


def test_first_token_logprobs_of_either_api():
    chat = {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": [
        {"token": "A", "logprob": -0.1}, {"token": "The", "logprob": -2.0}, {"token": "A", "logprob": -3.0}]}]}
    assert first_token_logprobs(chat) == {"A": -0.1, "The": -2.0}
    assert first_token_logprobs({"top_logprobs": [{" x": -0.5, "y": -1.5}]}) == {" x": -0.5, "y": -1.5}
    assert first_token_logprobs(None) is None


@pytest.fixture
def prebuilt(monkeypatch):
    monkeypatch.setenv(ENGINE_ENV, ENGINE)
    if unavailable(ModelConfig(id=SMOLLM2)):
        pytest.skip(f"xllamacpp: {unavailable(ModelConfig(id=SMOLLM2))}")


@pytest.mark.own_process  # xllamacpp and the PDF tests' uharfbuzz cannot share a process (tests/conftest.py)
@pytest.mark.parametrize("model_id", [SMOLLM2, GEMMA])
def test_prebuilt_engine_answers_with_schema_and_logprobs(prebuilt, model_id):
    backend = create_backend(ModelConfig(id=model_id))
    assert backend.engine == ENGINE and backend.cache_identity()["engine"] == ENGINE
    assert backend.provenance()["engine"] == ENGINE
    model = Model(backend)
    schema = {"type": "object", "properties": {"score": {"type": "integer", "enum": [0, 1, 2]}},
              "required": ["score"], "additionalProperties": False}
    text = asyncio.run(model.generate(ChatRequest(MESSAGES, GenerateParams(max_tokens=8))))
    judged = asyncio.run(model.generate(ChatRequest(MESSAGES, GenerateParams(max_tokens=48, json_schema=schema))))
    first = asyncio.run(model.generate(ChatRequest(MESSAGES, GenerateParams(max_tokens=1, top_logprobs=5))))
    assert text.prompt_tokens > 10 and 0 < text.completion_tokens <= 8
    assert judged.engine == ENGINE and judged.text.lstrip().startswith("{")  # the grammar held (a tiny model may
    if judged.completion_tokens < 48:  # spend its tokens on the whitespace JSON allows: then it is cut short)
        assert json.loads(judged.text)["score"] in (0, 1, 2)
    assert first.top_logprobs and len(first.top_logprobs) <= 5
    assert all(v <= 0 for v in first.top_logprobs.values())


@pytest.mark.own_process
@pytest.mark.parametrize("model_id", [SMOLLM2, GEMMA])
def test_both_engines_send_the_same_prompt_tokens(prebuilt, monkeypatch, model_id):
    pytest.importorskip("llama_cpp")
    request = ChatRequest(MESSAGES, GenerateParams(max_tokens=1))
    prebuilt_backend = create_backend(ModelConfig(id=model_id))
    monkeypatch.setenv(ENGINE_ENV, LLAMA_CPP_PYTHON)
    built = create_backend(ModelConfig(id=model_id))
    assert built.engine == LLAMA_CPP_PYTHON
    assert cache_key(built.cache_identity(), request) != cache_key(prebuilt_backend.cache_identity(), request)
    counts = [asyncio.run(b.complete(request)).prompt_tokens for b in (prebuilt_backend, built)]
    assert counts[0] == counts[1] > 10


def _answers(db: Path) -> list[tuple]:
    with open_connection(db, read_only=True) as con:
        return con.execute("SELECT query_id, engine, text IS NOT NULL FROM responses ORDER BY query_id").fetchall()


def _calls(db: Path, run_id: str) -> int:
    with open_connection(db, read_only=True) as con:
        return con.execute("SELECT backend_calls FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]


@pytest.mark.own_process
def test_answers_record_their_engine_and_llama_cpp_python_answers_again(prebuilt, monkeypatch, tmp_path):
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump({
        "name": "prebuilt", "dataset": str(REPO / "data" / "eyecare-qa"), "db": str(tmp_path / "results.duckdb"),
        "models": [{"id": SMOLLM2, "max_tokens": 8}]}), encoding="utf-8")
    config = load_config(config_path, limit=2)
    db = Path(config.db)
    first = run(config, stages="generate")  # closed-book: nothing to retrieve
    assert _answers(db) == [(q, ENGINE, True) for q, _, _ in _answers(db)] and len(_answers(db)) == 2
    assert _calls(db, first) == 2
    assert _calls(db, run(config, stages="generate")) == 0  # the same engine: nothing asked again
    if importlib.util.find_spec("llama_cpp") is not None:  # once built
        monkeypatch.setenv(ENGINE_ENV, LLAMA_CPP_PYTHON)
        again = run(config, stages="generate")
        assert _calls(db, again) == 2  # the prebuilt engine's answers are not kept as llama-cpp-python's
        assert {e for _, e, _ in _answers(db)} == {LLAMA_CPP_PYTHON}
