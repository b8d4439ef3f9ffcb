"""``llamacpp/<name>`` before llama-cpp-python is built: llama.cpp through xllamacpp's prebuilt CPU wheel.

llama-cpp-python has no binary wheel on PyPI and builds from source (≈10 min on 2 cores, ``make setup``);
xllamacpp (Xorbits, MIT) ships llama.cpp compiled for any x86-64 CPU with AVX2 and installs in seconds, so the
embedded GGUF models answer while the build goes on. Its in-process server takes OpenAI-style requests: JSON-schema
constrained output (the judge's) and the first token's top log-probabilities (Med-CoDE's ``logprobs`` option) work
as with llama-cpp-python.

The prompt is the one llama-cpp-python sends: a model without a chat format of its own is given its GGUF's chat
template (SmolLM2), as llama-cpp-python's Jinja formatter does; ``gemma`` is rendered here exactly as
llama-cpp-python's ``format_gemma`` renders it, and sent as a raw completion (``tests/test_llamacpp_prebuilt.py``
compares the prompt tokens of both engines where both are installed).

The answers are another engine's (another llama.cpp build, other kernels): the cache keys carry ``engine`` and every
answer records it, so none is replayed or kept as llama-cpp-python's (``pipeline.steps.generate``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.config import ModelConfig
from pipeline.models.base import Backend, ChatRequest, Completion, Message

ENGINE = "xllamacpp"
# The chat formats rendered here as llama-cpp-python renders them (its ``llama_chat_format``); None: the GGUF's own.
RAW_FORMATS = {"gemma"}


def render_gemma(messages: Sequence[Message]) -> str:
    """llama-cpp-python's ``format_gemma``: every turn as ``<start_of_turn>ROLE\\n…<end_of_turn>\\n`` (assistant →
    ``model``), then the open model turn; the system role has been folded into the first user turn before
    (``llamacpp.as_sent``). The tokenizer adds BOS."""
    roles = {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"}
    turns = [f"{roles[m['role']]}{m['content']}<end_of_turn>\n" for m in messages if m["role"] in roles]
    return "".join(turns) + roles["assistant"]


GEMMA_STOP = ["<end_of_turn>\n"]


def installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("xllamacpp") is not None


def unsupported(chat_format: str | None) -> str | None:
    """Why a chat format cannot be sent through this engine (``None``: it can)."""
    if chat_format is None or chat_format in RAW_FORMATS:
        return None
    return f"chat format {chat_format!r} needs llama-cpp-python (run `make setup`)"


class _SharedServer:
    """One xllamacpp server (one slot) per weights file, used by one call at a time."""

    def __init__(self, path: Path, n_ctx: int):
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1
        threads = os.cpu_count() or 2
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.verbosity = -1  # llama.cpp's server logs every slot's timings on stderr otherwise; errors come back
        self.server = xllamacpp.Server(params)
        self.lock = threading.Lock()


_SERVERS: dict[tuple[str, int], _SharedServer] = {}
_LOAD_LOCK = threading.Lock()


def shared_server(path: Path, n_ctx: int) -> _SharedServer:
    key = (str(path), n_ctx)
    with _LOAD_LOCK:
        if key not in _SERVERS:
            _SERVERS[key] = _SharedServer(path, n_ctx)
        return _SERVERS[key]


class PrebuiltLlamaCppBackend(Backend):
    """The ``llamacpp`` provider's second engine; built by ``llamacpp.create`` while llama-cpp-python is missing."""

    max_concurrency = 1
    billed = False
    engine = ENGINE

    def __init__(self, config: ModelConfig, path: Path, chat_format: str | None, identity: dict[str, Any]):
        super().__init__(config)
        self.path, self.chat_format = path, chat_format
        self._identity = identity
        self._shared: _SharedServer | None = None

    @property
    def shared(self) -> _SharedServer:
        if self._shared is None:
            self._shared = shared_server(self.path, self.config.n_ctx)
        return self._shared

    def cache_identity(self) -> dict[str, Any]:
        return {**self._identity, "engine": ENGINE}

    def provenance(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self._identity["gguf_sha256"], "chat_format": self.chat_format,
                "engine": ENGINE, "engine_version": importlib.metadata.version("xllamacpp")}

    def body(self, request: ChatRequest, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        """Which server call (``chat`` or ``completion``) and its OpenAI-style body."""
        p = request.params
        body: dict[str, Any] = {"max_tokens": p.max_tokens, "temperature": p.temperature, "top_p": p.top_p,
                                "seed": p.seed + p.sample}
        if p.json_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"schema": p.json_schema}}
        if p.top_logprobs > 0:
            body["logprobs"] = True
            body["top_logprobs"] = p.top_logprobs
        if self.chat_format == "gemma":  # the completions API's forms
            if p.top_logprobs > 0:
                body["logprobs"] = p.top_logprobs
                body.pop("top_logprobs")
            if p.json_schema is not None:
                body["json_schema"] = body.pop("response_format")["json_schema"]["schema"]
            return "completion", {**body, "prompt": render_gemma(messages), "stop": GEMMA_STOP}
        return "chat", {**body, "messages": messages}

    def _complete_sync(self, request: ChatRequest, messages: list[dict[str, str]]) -> Completion:
        kind, body = self.body(request, messages)
        with self.shared.lock:
            start = time.perf_counter()
            server = self.shared.server
            out = server.handle_chat_completions(body) if kind == "chat" else server.handle_completions(body)
            latency = time.perf_counter() - start
        if "choices" not in out:
            raise RuntimeError(f"xllamacpp: {out.get('error') or out}")
        choice = out["choices"][0]
        text = choice["message"].get("content") or "" if kind == "chat" else choice.get("text") or ""
        usage = out.get("usage") or {}
        return Completion(text=text, prompt_tokens=usage.get("prompt_tokens", 0),
                          completion_tokens=usage.get("completion_tokens", 0), latency_s=latency,
                          top_logprobs=first_token_logprobs(choice.get("logprobs")) if request.params.top_logprobs
                          else None)

    async def complete(self, request: ChatRequest) -> Completion:
        from pipeline.models.llamacpp import as_sent

        return await asyncio.to_thread(self._complete_sync, request, as_sent(request.messages, self.chat_format))


def first_token_logprobs(logprobs: dict[str, Any] | None) -> dict[str, float] | None:
    """The first generated token's alternatives, ``{piece: logprob}`` (the best of pieces that read alike), from
    either API's ``logprobs`` (chat: ``content[0].top_logprobs``; completions: ``top_logprobs[0]`` or the same
    ``content`` form)."""
    if not logprobs:
        return None
    content = logprobs.get("content")
    if content:
        alternatives = [(a["token"], a["logprob"]) for a in content[0].get("top_logprobs") or []]
    elif logprobs.get("top_logprobs"):
        alternatives = list(logprobs["top_logprobs"][0].items())
    else:
        return None
    top: dict[str, float] = {}
    for piece, logprob in alternatives:
        top[piece] = max(top.get(piece, float("-inf")), float(logprob))
    return top or None
