"""``openai/<model>`` and ``openai-compatible/<name>``: the ``openai`` package's async client.

One class serves OpenAI, Azure OpenAI's v1 endpoint, vLLM's server, llama.cpp's server, Ollama
and TGI. The client's own retries are off: the ``Model`` wrapper retries (jittered exponential
back-off, honouring ``Retry-After``) so that retries are counted. API keys come from the
environment variable named in the config, never from the config or the database.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from typing import Any

from pipeline.config import ModelConfig
from pipeline.models.base import REDACTED, Backend, ChatRequest, Completion

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY"}
# A bearer token in an error body (some proxies and servers echo the request's headers).
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",}]+")


def _key_env(config: ModelConfig) -> str | None:
    return config.api_key_env or DEFAULT_KEY_ENV.get(config.provider)


def unavailable(config: ModelConfig) -> str | None:
    if config.provider == "openai-compatible" and not config.base_url:
        return "openai-compatible models need `base_url:` (e.g. http://127.0.0.1:8000/v1)"
    env = _key_env(config)
    if env and not os.environ.get(env):
        return f"environment variable {env} is not set (it holds the API key)"
    return None


class OpenAICompatibleBackend(Backend):
    @classmethod
    def needs(cls, config: ModelConfig) -> str:
        return config.base_url or "base_url" if config.provider == "openai-compatible" else _key_env(config)

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        import httpx2
        import openai

        self._openai, self._httpx = openai, httpx2
        env = _key_env(config)
        api_key = os.environ.get(env) if env else None
        kwargs: dict[str, Any] = {
            "api_key": api_key or "not-needed", "timeout": config.timeout, "max_retries": 0,
        }
        if config.base_url:
            kwargs["base_url"] = config.base_url
        self._api_key = api_key
        self._client_kwargs = kwargs
        self._clients: dict[int, Any] = {}  # one async client per event loop (its pool is bound to it)
        # OpenAI and vLLM take json_schema; llama.cpp's server takes json_object with a schema.
        self._schema_style = "json_schema" if config.provider == "openai" else "json_object"

    def _response_format(self, schema: dict) -> dict:
        if self._schema_style == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
        return {"type": "json_object", "schema": schema}

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        p = request.params
        kwargs: dict[str, Any] = {
            "model": self.config.name, "messages": list(request.messages), "max_tokens": p.max_tokens,
            "temperature": p.temperature, "top_p": p.top_p, "seed": p.seed + p.sample,
        }
        if p.json_schema is not None:
            kwargs["response_format"] = self._response_format(p.json_schema)
        if p.top_logprobs > 0:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = min(p.top_logprobs, 20)
        return kwargs

    @property
    def client(self):
        """The async client of the running event loop (a Streamlit rerun or test may start a new loop)."""
        loop = asyncio.get_running_loop()
        if id(loop) not in self._clients:
            # aiohttp as the SDK's transport (its documented ``DefaultAioHttpClient``): a C HTTP parser
            # instead of pure-Python httpcore, the client's CPU per request being what limits
            # throughput at high concurrency (bench/README.md, orchestration)
            self._clients = {id(loop): self._openai.AsyncOpenAI(**self._client_kwargs,
                                                                 http_client=self._openai.DefaultAioHttpClient())}
        return self._clients[id(loop)]

    async def complete(self, request: ChatRequest) -> Completion:
        start = time.perf_counter()
        # The SDK's documented way to call an endpoint and take the raw response (``client.post`` with
        # ``cast_to=httpx2.Response``): its retries are off, its error statuses still raise, and the
        # reply is read as plain JSON. Building the typed ``ChatCompletion`` and running the typed
        # transform over our plain-JSON body cost a quarter of the client's CPU per request and
        # change nothing (bench/README.md, orchestration).
        response = await self.client.post("/chat/completions", body=self._kwargs(request),
                                          cast_to=self._httpx.Response)
        latency = time.perf_counter() - start
        data = response.json()  # a truncated body raises JSONDecodeError: a transient fault, retried
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices:
            raise ValueError("malformed response: no choices")
        try:
            choice = choices[0]
            top = None
            content_logprobs = (choice.get("logprobs") or {}).get("content")
            if content_logprobs:
                top = {alt["token"]: alt["logprob"] for alt in content_logprobs[0].get("top_logprobs") or []}
            usage = data.get("usage") or {}
            return Completion(
                text=(choice.get("message") or {}).get("content") or "",
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
                latency_s=latency, top_logprobs=top,
            )
        except (AttributeError, KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed response: {exc!r}") from exc

    def stream(self, request: ChatRequest) -> Iterator[str]:
        client = self._openai.OpenAI(**self._client_kwargs)
        try:
            for chunk in client.chat.completions.create(**self._kwargs(request), stream=True):
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        finally:
            client.close()

    def is_retryable(self, exc: BaseException) -> bool:
        o = self._openai
        if isinstance(exc, (o.RateLimitError, o.InternalServerError, o.APITimeoutError, o.APIConnectionError)):
            return True
        if isinstance(exc, o.APIStatusError):
            return exc.status_code in (408, 409, 429) or exc.status_code >= 500
        # A body that is not the protocol (truncated JSON, missing fields) is a transient server fault.
        return isinstance(exc, (o.APIResponseValidationError, ValueError))

    def is_unreachable(self, exc: BaseException) -> bool:
        """No answer at all: the connection was refused, reset or timed out (the SDK's APIConnectionError and
        its APITimeoutError); any HTTP status is an answer."""
        return isinstance(exc, self._openai.APIConnectionError)

    def retry_after(self, exc: BaseException) -> float | None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        if not headers:
            return None
        for name in ("retry-after-ms", "retry-after"):
            value = headers.get(name)
            if value is None:
                continue
            try:
                seconds = float(value)
            except ValueError:
                continue
            return seconds / 1000 if name == "retry-after-ms" else seconds
        return None

    def secrets(self) -> tuple[str, ...]:
        return (self._api_key,) if self._api_key else ()

    def redact(self, text: str) -> str:
        """Mask the API key (and any bearer token) that an answer or error message may carry."""
        return _BEARER.sub(rf"\1{REDACTED}", super().redact(text))

    async def aclose(self) -> None:
        """Close the running loop's client (its connection pool dies with the loop)."""
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.close()


def create(config: ModelConfig) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(config)


BACKEND = OpenAICompatibleBackend
