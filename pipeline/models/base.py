"""One small interface for every backend, and one thick wrapper around it.

A backend (``Backend``) only turns one chat request into one completion and says which of its
errors are transient. ``Model`` wraps any backend and owns what they share: the content-addressed
cache, bounded concurrency, retries with jittered exponential back-off that honour
``Retry-After``, a circuit breaker for an endpoint that is down, and usage accounting (Inspect AI's
thin-provider / thick-wrapper split).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from pipeline.config import ModelConfig
from pipeline.store.rows import CacheRow

Message = dict[str, str]
REDACTED = "[redacted]"


@dataclass(frozen=True)
class GenerateParams:
    """Sampling parameters: everything here changes the output, so all of it is in the cache key."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    json_schema: dict | None = None  # constrained decoding where the backend has it
    top_logprobs: int = 0  # > 0: return the first generated token's top alternatives
    sample: int = 0  # self-consistency sample index (keeps n samples apart in the cache)


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    params: GenerateParams = GenerateParams()
    # Structured inputs for non-LLM backends (extractive). Not part of the cache key: it is
    # derived from the same data as the messages.
    context: dict | None = field(default=None, compare=False, hash=False)


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    top_logprobs: dict[str, float] | None = None  # first generated token: token -> logprob
    cached: bool = False
    error: str | None = None
    # In-process llama.cpp only: the prompt tokens this call actually evaluated (the rest was the prefix it
    # shared with the instance's previous call, reused from the KV cache). None where the backend cannot say.
    evaluated_prompt_tokens: int | None = None
    # The software that computed it, where a provider has more than one (``llamacpp/``: llama-cpp-python or the
    # prebuilt xllamacpp); set by ``Model`` from its backend, cache hits included (the cache key holds the engine).
    engine: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class PromptTokens:
    """Counts a request's prompt tokens before it is sent (the dry run's estimate): ≈ UTF-8 bytes / 4 and 3 per
    message, unless a backend counts with its model's own tokenizer (``Backend.prompt_tokens``)."""

    method = "bytes/4"

    def count(self, messages: Sequence[Message]) -> int:
        return sum(-(-len(m["content"].encode("utf-8")) // 4) + 3 for m in messages)


class Backend(ABC):
    """A thin backend: one request in, one completion out. The class also carries its provider's facts — whether
    its tokens are billed, what it needs to run, how its prompt tokens are counted — so nothing else has to know
    providers by name (Inspect AI's ``ModelAPI``)."""

    #: upper bound on parallel requests regardless of config (1 for in-process llama.cpp)
    max_concurrency: int | None = None
    #: tokens billed by a provider; False for a model on one's own hardware (it costs 0 unless a price is set)
    billed: ClassVar[bool] = True
    #: the software that computes the answers where a provider has more than one (recorded with each answer)
    engine: ClassVar[str | None] = None

    @classmethod
    def needs(cls, config: ModelConfig) -> str:
        """What the model needs to run, for the dry run's table (a key, an endpoint, GPUs)."""
        return "this machine"

    @classmethod
    def prompt_tokens(cls, config: ModelConfig) -> PromptTokens:
        """How this model's prompt tokens are counted before a run."""
        return PromptTokens()

    def __init__(self, config: ModelConfig):
        self.config = config

    @property
    def model_id(self) -> str:
        return self.config.id

    @abstractmethod
    async def complete(self, request: ChatRequest) -> Completion:
        """Return one completion; raise on failure (the wrapper decides whether to retry)."""

    #: True when :meth:`complete_batch` takes a whole batch at once (vLLM's offline engine)
    supports_batch: bool = False

    async def complete_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        """Batched path for engines that schedule many prompts themselves."""
        raise NotImplementedError

    def stream(self, request: ChatRequest) -> Iterator[str]:
        """Yield the response text in pieces as it is generated (default: all at once)."""
        yield asyncio.run(self.complete(request)).text

    def is_retryable(self, exc: BaseException) -> bool:
        """Transient errors (rate limits, 5xx, timeouts, dropped connections) are retried."""
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        """Seconds the server asked us to wait before retrying, if it said."""
        return None

    def is_unreachable(self, exc: BaseException) -> bool:
        """True when the call got no answer from the endpoint at all (refused, reset, timed out): what the
        circuit breaker counts. An HTTP error status is an answer: the endpoint is up."""
        return False

    def cache_identity(self) -> dict[str, Any]:
        """What, besides the request, changes the output: model id and endpoint, weights file."""
        return {"model": self.config.id, "base_url": self.config.base_url}

    def provenance(self) -> dict[str, Any]:
        """Recorded with the run: weights file and hash, endpoint, engine settings."""
        return {"base_url": self.config.base_url} if self.config.base_url else {}

    def secrets(self) -> tuple[str, ...]:
        """Values that must never be stored or shown (the API key): :meth:`redact` masks them."""
        return ()

    def redact(self, text: str) -> str:
        """``text`` (an answer or error message about to be stored or shown) with this backend's secrets masked."""
        for secret in self.secrets():
            text = text.replace(secret, REDACTED)
        return text

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (clients, engines)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release resources bound to the running event loop (async HTTP clients)."""


def cache_key(identity: dict[str, Any], request: ChatRequest) -> str:
    """Content address of a call: model identity, messages and sampling parameters only."""
    payload = {
        "identity": identity,
        "messages": list(request.messages),
        "params": request.params.__dict__,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class _WaitRetryAfter:
    """tenacity wait: the server's Retry-After when given, else jittered exponential back-off."""

    def __init__(self, backend: Backend, fallback, cap_s: float = 60.0):
        self.backend, self.fallback, self.cap_s = backend, fallback, cap_s

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = self.backend.retry_after(exc) if exc is not None else None
        if after is not None:
            return min(self.cap_s, max(0.0, after))
        return self.fallback(state)


class EndpointDown(Exception):
    """Raised instead of a call once a model's circuit breaker is open (its endpoint is taken as down)."""


@dataclass
class UsageStats:
    backend_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    errors: int = 0

    def add(self, other: UsageStats) -> None:
        for k in self.__dict__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


class Model:
    """A backend with cache, bounded concurrency, retries and accounting.

    ``cache`` is anything with ``cache_get(keys) -> {key: row}`` (the Store). New cache rows are
    kept in memory until the caller takes them with :meth:`take_cache_rows` and writes them in
    the same transaction as the results they produced, so a crash never leaves one without the
    other.
    """

    def __init__(self, backend: Backend, *, cache=None, concurrency: int = 8,
                 max_retries: int | None = None, backoff_max_s: float = 30.0, down_after: int | None = None):
        self.backend = backend
        self.cache = cache
        limit = concurrency if backend.max_concurrency is None else min(concurrency, backend.max_concurrency)
        self.concurrency = max(1, limit)
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        self.max_retries = backend.config.max_retries if max_retries is None else max_retries
        self.backoff_max_s = backoff_max_s
        # The circuit breaker: after ``down_after`` calls in a row that got no answer, the endpoint is taken as
        # down for the life of this Model (one run): every call still to come fails at once with ``down``.
        self.down_after = backend.config.down_after if down_after is None else down_after
        self.down: str | None = None
        self._unanswered_in_a_row = 0
        self.stats = UsageStats()
        self._cache_rows: list[CacheRow] = []
        self._identity = backend.cache_identity()

    @property
    def id(self) -> str:
        return self.backend.model_id

    def key(self, request: ChatRequest) -> str:
        return cache_key(self._identity, request)

    async def generate(self, request: ChatRequest) -> Completion:
        """One request through cache → semaphore → retries → backend."""
        return (await self.generate_many([request]))[0]

    async def generate_many(
        self, requests: list[ChatRequest], on_result: Callable[[int, Completion], None] | None = None,
        batch_size: int = 256,
    ) -> list[Completion]:
        """Many requests: one cache lookup for all, then the misses run on ``concurrency`` workers.

        Workers take requests in order (so consecutive prompts that share a prefix reach an
        in-process backend back to back). ``on_result(i, completion)`` is called as each request
        finishes, so callers can save results while the rest still run.
        """
        keys = [self.key(r) for r in requests]
        hits = await asyncio.to_thread(self._lookup, keys)
        results: list[Completion | None] = [None] * len(requests)
        misses: deque[int] = deque()
        for i, k in enumerate(keys):
            row = hits.get(k)
            if row is None:
                misses.append(i)
                continue
            results[i] = Completion(
                text=row["text"], prompt_tokens=row["prompt_tokens"] or 0,
                completion_tokens=row["completion_tokens"] or 0, top_logprobs=row["top_logprobs"], cached=True,
                engine=self.backend.engine,
            )
            self.stats.cache_hits += 1
            if on_result:
                on_result(i, results[i])

        def finish(i: int, completion: Completion) -> None:
            completion.engine = self.backend.engine
            completion.text = self.backend.redact(completion.text)  # an endpoint may echo the key in an answer
            results[i] = completion
            if completion.ok:
                self._remember(keys[i], requests[i], completion)
            else:
                self.stats.errors += 1
            if on_result:
                on_result(i, completion)

        if misses and self.backend.supports_batch:
            while misses:
                chunk = [misses.popleft() for _ in range(min(batch_size, len(misses)))]
                self.stats.backend_calls += len(chunk)
                try:
                    done = await self.backend.complete_batch([requests[i] for i in chunk])
                except Exception as exc:  # the whole batch failed: record it on every item
                    done = [Completion(text="", error=self.describe_error(exc)) for _ in chunk]
                for i, completion in zip(chunk, done, strict=True):
                    finish(i, completion)
        elif misses:
            async def worker() -> None:
                while misses:
                    i = misses.popleft()
                    finish(i, await self._call_with_retries(requests[i]))

            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(misses)))))
        return results  # type: ignore[return-value]

    def _lookup(self, keys: list[str], chunk: int = 2000) -> dict[str, dict[str, Any]]:
        if self.cache is None:
            return {}
        unique = sorted(set(keys))
        hits: dict[str, dict[str, Any]] = {}
        for start in range(0, len(unique), chunk):
            hits.update(self.cache.cache_get(unique[start:start + chunk]))
        return hits

    def _semaphore(self) -> asyncio.Semaphore:
        """The concurrency bound of the running event loop (a model may outlive one loop)."""
        loop = id(asyncio.get_running_loop())
        if loop not in self._semaphores:
            self._semaphores = {loop: asyncio.Semaphore(self.concurrency)}
        return self._semaphores[loop]

    async def _call_with_retries(self, request: ChatRequest) -> Completion:
        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda exc: not isinstance(exc, EndpointDown) and self.backend.is_retryable(exc)),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=_WaitRetryAfter(self.backend, wait_random_exponential(multiplier=0.5, max=self.backoff_max_s)),
            sleep=self._sleep_unless_down,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    async with self._semaphore():
                        if self.down:  # checked once a slot is free: calls queued behind the breaker are not made
                            raise EndpointDown(self.down)
                        if attempt.retry_state.attempt_number > 1:
                            self.stats.retries += 1
                        self.stats.backend_calls += 1
                        start = time.perf_counter()
                        try:
                            completion = await self.backend.complete(request)
                        except Exception as exc:
                            self._count_unanswered(exc)
                            raise
                        self._unanswered_in_a_row = 0
                        if not completion.latency_s:
                            completion.latency_s = time.perf_counter() - start
                        return completion
        except Exception as exc:  # recorded on the item, never lost
            return Completion(text="", error=self.describe_error(exc))
        raise AssertionError("unreachable")

    def _count_unanswered(self, exc: BaseException) -> None:
        """The circuit breaker's count: calls in a row that got no answer; any answer (an error status too)
        resets it. At ``down_after`` the endpoint is taken as down and ``down`` says so in one line."""
        if not self.backend.is_unreachable(exc):
            self._unanswered_in_a_row = 0
            return
        self._unanswered_in_a_row += 1
        if self.down is None and self.down_after and self._unanswered_in_a_row >= self.down_after:
            where = f" at {self.backend.config.base_url}" if self.backend.config.base_url else ""
            root = exc
            while root.__cause__ is not None and root.__cause__ is not root:
                root = root.__cause__
            cause = f" ({self.describe_error(root)[:200]})" if root is not exc else ""
            self.down = (f"{self.id}{where}: {self._unanswered_in_a_row} calls in a row got no answer (last: "
                         f"{self.describe_error(exc)[:200]}{cause}); taken as down, its remaining calls in this run "
                         "are recorded as errors without being made; rerun the same command to retry them")

    async def _sleep_unless_down(self, seconds: float) -> None:
        """tenacity's back-off sleep, cut short when the endpoint is taken as down meanwhile."""
        deadline = time.monotonic() + seconds
        while not self.down and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(0.1, left))

    def describe_error(self, exc: BaseException) -> str:
        """An exception as recorded on its item: type and message, secrets masked, at most 2000 chars."""
        return self.backend.redact(f"{type(exc).__name__}: {exc}")[:2000]

    def _remember(self, key: str, request: ChatRequest, completion: Completion) -> None:
        self._cache_rows.append(CacheRow(
            key=key, model_id=self.id,
            request=json.dumps({"messages": list(request.messages), "params": request.params.__dict__},
                               ensure_ascii=False, default=str),
            text=completion.text,
            top_logprobs=json.dumps(completion.top_logprobs) if completion.top_logprobs else None,
            prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s))

    def take_cache_rows(self) -> list[CacheRow]:
        """New cache rows since the last call, to be written with the results they produced."""
        rows, self._cache_rows = self._cache_rows, []
        return rows

    def stream(self, request: ChatRequest) -> Iterator[str]:
        """Stream a response live (playground), secrets masked; streamed calls are not cached.

        A secret may arrive split over pieces: the last ``len(secret)`` characters are held back until the next
        piece (or the end) shows whether they begin one."""
        hold = max(map(len, self.backend.secrets()), default=0)
        pending = ""
        for piece in self.backend.stream(request):
            pending = self.backend.redact(pending + piece)
            if len(pending) > hold:
                yield pending[:len(pending) - hold]
                pending = pending[len(pending) - hold:]
        if pending:
            yield self.backend.redact(pending)

    async def aclose(self) -> None:
        await self.backend.aclose()

    def close(self) -> None:
        self.backend.close()
