"""A fixture server speaking OpenAI's chat-completions protocol, for load and fault injection.

It is not a model: it answers after a fixed latency with a deterministic echo of the request
(with ``usage``; a request with a JSON schema in ``response_format`` gets the schema's first allowed value for
each field instead, like a grader that answers), can answer each prompt badly the first N times it is asked
(``unparsable_first``: prose without a verdict where JSON is asked for, else an empty answer), and injects
faults — 429 (some with ``Retry-After``), 500, requests held past the client's timeout, malformed bodies
(truncated JSON, no ``choices``), 500s whose body echoes the request headers (a misbehaving proxy), and answers
that quote the request's API key — in configured shares; ``stream: true`` is answered as server-sent events.
The fault a request gets is drawn from ``hash(seed, request content, how often that content was seen)``, so
every item's fate is the same whatever order concurrent requests arrive in. It counts requests per outcome
(``GET /stats``); ``POST /admin/faults`` changes the shares while it runs. ``reply`` answers every request with one
text; ``replies`` answers a request whose last user message contains one of its keys with that key's text (the first
key found; a judge or grader with known verdicts), and any other request as usual.

It runs in its own process (uvicorn + starlette) so that it does not share the GIL with the
client it is measuring. Start it with :class:`FixtureServer` (a context manager)::

    with FixtureServer(latency_s=0.2, faults=Faults(rate_limit=0.2)) as server:
        ... base_url=server.base_url ...
        server.stats()["outcomes"]

Real-LLM tests use llama.cpp's own server; this fixture is only for load and faults.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

import httpx

OUTCOMES = ("ok", "rate_limit", "server_error", "timeout", "malformed", "echo_headers", "echo_key")


@dataclass
class Faults:
    """Shares of requests that get each fault (the rest are answered normally)."""

    rate_limit: float = 0.0  # 429
    server_error: float = 0.0  # 500
    timeout: float = 0.0  # held for hang_s (longer than the client's timeout), then answered
    malformed: float = 0.0  # 200 with truncated JSON or a body without `choices` (half each)
    echo_headers: float = 0.0  # 500 whose error body echoes the request's headers
    echo_key: float = 0.0  # 200 whose answer quotes the API key the request carried
    retry_after_share: float = 0.5  # of the 429s, the share that carries a Retry-After header
    retry_after_s: float = 1.0
    hang_s: float = 30.0
    unparsable_first: int = 0  # the first N asks of each prompt get an answer that cannot be parsed

    def draw(self, u: float) -> str:
        """The outcome for a uniform draw ``u`` in [0, 1)."""
        edge = 0.0
        for outcome in OUTCOMES[1:]:
            edge += getattr(self, outcome)
            if u < edge:
                return outcome
        return "ok"


def _unit(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from ``parts``."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


UNPARSABLE = "I would rather not commit to a verdict on this one."


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request asks for (OpenAI's ``json_schema`` or llama.cpp's ``json_object`` style)."""
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")


def schema_answer(schema: dict[str, Any]) -> str:
    """A JSON object that fits ``schema``: each property's first enum value, else true / 0 / a short string."""
    out: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if prop.get("enum"):
            out[name] = prop["enum"][0]
        else:
            kind = prop.get("type")
            out[name] = {"boolean": True, "integer": 0, "number": 0.0}.get(kind, "fixture answer"[:prop.get(
                "maxLength", 64)])
    return json.dumps(out)


def completion_text(body: dict[str, Any], attempt: int = 0, unparsable_first: int = 0) -> str:
    """The deterministic answer to a request: a digest of its messages and the last user turn; an object fitting
    the requested JSON schema; or, for the first ``unparsable_first`` asks of a prompt, an unparsable answer."""
    schema = _schema(body)
    if attempt < unparsable_first:
        return UNPARSABLE if schema else ""
    if schema:
        return schema_answer(schema)
    messages = body.get("messages") or []
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:12]
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return f"echo {digest}: {str(last)[-80:]}"


PLANTED_POOR = "planted poor answer"


def planted_text(body: dict[str, Any], worse_on: frozenset[str], seed: int) -> str:
    """A planted model that answers worse on some questions (``worse_on``: their texts): it answers a prompt
    containing one of them with ``PLANTED_POOR``, and as a judge (a JSON schema with a ``Score`` enum) scores such
    an answer lowest and any other answer with one of the two highest scores, drawn from a hash of the prompt."""
    messages = body.get("messages") or []
    text = json.dumps(messages, ensure_ascii=False)
    schema = _schema(body)
    if schema and "Score" in (schema.get("properties") or {}):
        scores = sorted(schema["properties"]["Score"].get("enum") or [0, 1, 2])
        score = scores[0] if PLANTED_POOR in text else scores[-1 - int(_unit(seed, text) < 0.5)]
        return json.dumps({"Score": score, "Justification": "planted"})
    if schema:
        return schema_answer(schema)
    last = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    if any(w in last for w in worse_on):
        return PLANTED_POOR
    return f"answer {hashlib.sha256(last.encode()).hexdigest()[:12]}"


def _sse(model: str, text: str, piece: int = 5) -> Iterator[str]:
    """A chat completion streamed as ``chat.completion.chunk`` events of ``piece`` characters, then [DONE]."""
    for start in range(0, len(text), piece):
        chunk = {"id": "chatcmpl-stream", "object": "chat.completion.chunk", "created": 0, "model": model,
                 "choices": [{"index": 0, "delta": {"content": text[start:start + piece]}, "finish_reason": None}]}
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def known_reply(body: dict[str, Any], replies: dict[str, str] | None) -> str | None:
    """The text of the first key of ``replies`` found in the request's last user message; None when none is."""
    last = next((m.get("content", "") for m in reversed(body.get("messages") or []) if m.get("role") == "user"), "")
    return next((text for key, text in (replies or {}).items() if key in str(last)), None)


def build_app(latency_s: float, faults: Faults, seed: int, api_key: str | None, reply: str | None = None,
              replies: dict[str, str] | None = None, worse_on: frozenset[str] | None = None):
    """The starlette app (imported only in the server process); ``reply``: answer every request with this text
    (a model with a fixed bias, e.g. a pairwise judge that always prefers the first response); ``replies``: see
    :func:`known_reply`; ``worse_on``: be the planted model of ``planted_text``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    state = {"faults": faults}
    outcomes: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    extra: Counter[str] = Counter()
    retry_after_at: dict[str, tuple[float, float]] = {}  # content -> (when a Retry-After was sent, seconds)
    retry_after_gaps: list[float] = []  # how long after a Retry-After the same content came back

    def error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status, headers=headers)

    async def chat(request: Request) -> Response:
        extra["requests"] += 1
        if api_key is not None and request.headers.get("authorization") != f"Bearer {api_key}":
            extra["unauthorized"] += 1
            return error(401, "invalid api key", "invalid_request_error")
        try:
            body = json.loads(await request.body())
        except ValueError:
            extra["bad_request"] += 1
            return error(400, "request body is not JSON", "invalid_request_error")
        content_key = hashlib.sha256(
            json.dumps([body.get("model"), body.get("messages")], sort_keys=True).encode()).hexdigest()
        attempt = seen[content_key]
        seen[content_key] += 1
        arrived = time.monotonic()
        if content_key in retry_after_at:
            sent, asked = retry_after_at.pop(content_key)
            retry_after_gaps.append(round(arrived - sent - asked, 4))
        f: Faults = state["faults"]
        outcome = f.draw(_unit(seed, content_key, attempt))
        outcomes[outcome] += 1
        await asyncio.sleep(latency_s)
        if outcome == "rate_limit":
            headers = None
            if _unit(seed, content_key, attempt, "retry-after") < f.retry_after_share:
                extra["retry_after_sent"] += 1
                headers = {"retry-after": f"{f.retry_after_s:g}"}
                retry_after_at[content_key] = (time.monotonic(), f.retry_after_s)
            return error(429, "rate limit reached, slow down", "rate_limit_error", headers)
        if outcome == "server_error":
            return error(500, "the server had an error", "server_error")
        if outcome == "echo_headers":
            echoed = {k: v for k, v in request.headers.items()}
            return error(500, f"upstream failed for request with headers {echoed}", "server_error")
        if outcome == "timeout":
            await asyncio.sleep(f.hang_s)
        known = known_reply(body, replies)
        text = (reply if reply is not None else known if known is not None
                else planted_text(body, worse_on, seed) if worse_on is not None
                else completion_text(body, attempt, f.unparsable_first))
        if outcome == "echo_key":
            text += f"; sent with key {(request.headers.get('authorization') or '').removeprefix('Bearer ')}"
        if body.get("stream"):  # server-sent events, a few characters a chunk, as the OpenAI API streams
            return StreamingResponse(_sse(body.get("model", "fixture"), text), media_type="text/event-stream")
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{content_key[:16]}-{attempt}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "fixture"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                      "total_tokens": prompt_tokens + len(text.split())},
        }
        if outcome == "malformed":
            if _unit(seed, content_key, attempt, "malformed") < 0.5:
                extra["malformed_truncated"] += 1
                raw = json.dumps(payload).encode()
                return Response(raw[: len(raw) // 2], 200, media_type="application/json")
            extra["malformed_no_choices"] += 1
            payload.pop("choices")
        return JSONResponse(payload)

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fixture", "object": "model", "owned_by": "tests"}]})

    async def stats(_: Request) -> Response:
        return JSONResponse({"requests": extra["requests"], "outcomes": {o: outcomes[o] for o in OUTCOMES},
                             **{k: v for k, v in extra.items() if k != "requests"},
                             "attempts_histogram": dict(Counter(seen.values())),
                             "retry_after_slack_s": retry_after_gaps,
                             "faults": asdict(state["faults"])})

    async def set_faults(request: Request) -> Response:
        changes = json.loads(await request.body())
        state["faults"] = Faults(**{**asdict(state["faults"]), **changes})
        return JSONResponse(asdict(state["faults"]))

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/admin/faults", set_faults, methods=["POST"]),
    ])


class FixtureServer:
    """Runs the fixture in a child process on 127.0.0.1 (a free port) for a ``with`` block."""

    def __init__(self, *, latency_s: float = 0.2, faults: Faults | None = None, seed: int = 0,
                 api_key_env: str | None = None, env: dict[str, str] | None = None, reply: str | None = None,
                 replies: dict[str, str] | None = None, worse_on: list[str] | None = None):
        self.latency_s, self.faults, self.seed, self.reply = latency_s, faults or Faults(), seed, reply
        self.replies, self.worse_on = replies, worse_on
        self.api_key_env, self.env = api_key_env, env
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``."""
        return f"{self.url}/v1"

    def start(self) -> FixtureServer:
        cmd = [sys.executable, __file__, "--latency", str(self.latency_s), "--seed", str(self.seed),
               "--faults", json.dumps(asdict(self.faults))]
        if self.api_key_env:
            cmd += ["--api-key-env", self.api_key_env]
        if self.reply is not None:
            cmd += ["--reply", self.reply]
        if self.replies:
            cmd += ["--replies", json.dumps(self.replies)]
        if self.worse_on is not None:
            cmd += ["--worse-on", json.dumps(self.worse_on, ensure_ascii=False)]
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, **(self.env or {})})
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"fixture server did not start (said {line!r})")
        self.port = int(line.split()[1])
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{self.base_url}/models", timeout=1).raise_for_status()
                return self
            except httpx.HTTPError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("fixture server is not answering") from None
                time.sleep(0.05)

    def stats(self) -> dict[str, Any]:
        """Requests counted per outcome since start."""
        return httpx.get(f"{self.url}/stats", timeout=10).json()

    def set_faults(self, **shares: float) -> dict[str, Any]:
        """Change fault shares (fields of :class:`Faults`) while the server runs."""
        unknown = set(shares) - {f.name for f in fields(Faults)}
        if unknown:
            raise ValueError(f"unknown fault fields {sorted(unknown)}")
        return httpx.post(f"{self.url}/admin/faults", json=shares, timeout=10).json()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # nothing to save; held (timeout) requests would only log noise
            self.process.wait()
        if self.process is not None and self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> FixtureServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", default="{}", help="JSON object of Faults fields")
    parser.add_argument("--api-key-env", help="require `Authorization: Bearer $NAME`")
    parser.add_argument("--reply", help="answer every request with this text")
    parser.add_argument("--replies", default="{}", help="JSON object: key in the last user message -> answer")
    parser.add_argument("--worse-on", help="JSON list of question texts the planted model answers worse")
    args = parser.parse_args()
    import uvicorn

    api_key = os.environ[args.api_key_env] if args.api_key_env else None
    worse_on = frozenset(json.loads(args.worse_on)) if args.worse_on else None
    app = build_app(args.latency, Faults(**json.loads(args.faults)), args.seed, api_key, args.reply,
                    json.loads(args.replies), worse_on)
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # accepted sockets inherit it. Without it every keep-alive response (headers and body written
    # separately) waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1,
                            backlog=2048)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
