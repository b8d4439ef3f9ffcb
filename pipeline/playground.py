"""The playground's work for one live query: language, translate, retrieve, generate (streamed), check, judge,
critique, save.

The page (``pages/6_playground.py``) draws the widgets and caches loaded models; everything here
is plain Python over the pipeline's own modules, so it runs the same prompts, retrieval and judge
as a pipeline run. The config is ``$PARIKSHA_CONFIG``, else ``configs/default.yaml``.

A typed query's language is detected from its script (``pipeline.dataset.themes.detect_language``, the
tagger's rule: the script with most letters, or for Latin text its matrix language), the user may
override it; a non-English query without an English rendering is translated before retrieval by
``pipeline.steps.translate.translate_text`` (the pipeline's translator prompt), the config's
``translator`` by default. Every answer gets the safety step's checks (``check_response`` with the
messages the model was sent: ``prompt_echo`` among them); a saved answer keeps its prompt hash and checks.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.catalog import catalog
from pipeline.config import ModelConfig, RunConfig
from pipeline.dataset import Chunk, Dataset, Query, load_dataset
from pipeline.disagreement import PROB_COLUMNS
from pipeline.metrics import METRICS
from pipeline.models import Model, create_backend, unavailable_reason
from pipeline.models.base import ChatRequest, GenerateParams
from pipeline.models.reference import is_reference
from pipeline.steps.translate import QUERY, translate_text
from pipeline.store import Store, now
from pipeline.store.rows import (
    ChunkRow,
    CritiqueRow,
    DatasetRow,
    JudgmentRow,
    QueryRow,
    ResponseRow,
    RetrievalRow,
    Row,
    SafetyCheckRow,
    TranslationRow,
    text_hash,
)
from pipeline.store.schema import PLAYGROUND

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "configs" / "default.yaml"
PLACEHOLDER_GT = "(no ground truth given)"


def config_path() -> Path:
    """``$PARIKSHA_CONFIG`` or configs/default.yaml."""
    env = os.environ.get("PARIKSHA_CONFIG")
    return Path(env).expanduser() if env else DEFAULT_CONFIG


def load_playground_config(path: Path | None = None) -> RunConfig:
    return catalog().load_config(path or config_path())


@dataclass(frozen=True)
class ModelChoice:
    """A model of the config and why it cannot run here (None when it can)."""

    config: ModelConfig
    reason: str | None

    @property
    def available(self) -> bool:
        return self.reason is None


def model_choices(config: RunConfig) -> list[ModelChoice]:
    """The config's generator models, each with its availability on this machine (the doctors' approved answers
    answer only the dataset's own queries, never one typed here)."""
    return [ModelChoice(m, "answers only the dataset's queries, with their approved answers" if is_reference(m.id)
                        else unavailable_reason(m)) for m in config.models]


def role_config(config: RunConfig, role: str) -> ModelConfig | None:
    """The judge's or critic's model options, or None when the config has no such role."""
    if role == "judge" and config.judge is not None:
        return config.model_config_for(config.judge.id)
    if role == "critic" and (medcode := config.section("medcode")) is not None:
        return config.model_config_for(medcode.critic_id)
    return None


def load_model(model_config: ModelConfig) -> Model:
    """A ``Model`` (backend + retries) for live use; no cache, one call at a time, and no circuit breaker (the model
    outlives one call: each of a user's tries reaches the endpoint and shows its own error)."""
    return Model(create_backend(model_config), cache=None, concurrency=1, down_after=0)


def resolve_dataset_path(path: str | None, fallback: str) -> Path | None:
    """A dataset folder from the database's record (relative to the cwd or this repo), else ``fallback``."""
    for candidate in (path, fallback):
        if not candidate:
            continue
        for base in (Path.cwd(), REPO_ROOT):
            full = (base / candidate).resolve()
            if (full / "queries.jsonl").is_file() or (full / "kb.jsonl").is_file():
                return full
    return None


def load_kb(path: Path) -> Dataset:
    return load_dataset(path)


def make_query(*, language: str, query: str, query_en: str | None, gt_response: str | None,
               query_id: str = "playground") -> Query:
    """A validated ``Query`` for the prompt, retrieval and judge (a blank ground truth gets a placeholder)."""
    return Query(query_id=query_id, language=language, query=query.strip(),
                 query_en=(query_en or "").strip() or None, gt_response=(gt_response or "").strip() or PLACEHOLDER_GT)


def run_on(model: Model, coroutine: Awaitable[T]) -> T:
    """Run one playground call to completion in a fresh event loop, closing the model's loop-bound client."""

    async def main() -> T:
        try:
            return await coroutine
        finally:
            await model.aclose()

    return asyncio.run(main())


def detect_language(text: str) -> str | None:
    """The language of a typed query by its script (the theme tagger's rule); None for blank text."""
    from pipeline.dataset.themes import detect_language as tagger_language

    return tagger_language(text) if (text or "").strip() else None


def translator_choices(config: RunConfig) -> list[ModelConfig]:
    """Models that can translate here: the config's ``translator`` first, then the available LLM generators."""
    translator = config.section("translator")
    out = [translator] if translator is not None and unavailable_reason(translator) is None else []
    out += [m for m in config.models if m.provider != "extractive" and not is_reference(m.id)
            and unavailable_reason(m) is None and m.id not in {o.id for o in out}]
    return out


def translate(model: Model, text: str, language: str) -> str:
    """An English rendering of ``text`` by ``model`` (the pipeline's translator prompt, the same cache)."""
    return run_on(model, translate_text(model, text, language))


def retrieve(index: Any, query: Query, config: RunConfig) -> tuple[list[Chunk], list[Chunk]]:
    """Raw chunks and KB updates for the query, exactly as the pipeline's retrieve stage chooses them."""
    found = index.retrieve(query, config.retrieval)
    return [index.chunks[c] for c in found.raw_ids], [index.chunks[c] for c in found.update_ids]


def request_for(query: Query, raw: list[Chunk], updates: list[Chunk], model_config: ModelConfig,
                kb: Dataset | None = None) -> ChatRequest:
    """The generation request the pipeline would send (the KB dataset's own prompt files when it has them)."""
    from pipeline.steps.generate import build_request

    params = GenerateParams(max_tokens=model_config.max_tokens, temperature=model_config.temperature)
    return build_request(query, raw, updates, params, kb)


def prompt_of(request: ChatRequest) -> tuple[str, str]:
    """(hash, plain text) of the messages a request sends (``pipeline.steps.generate.prompt_hash``)."""
    from pipeline.steps.generate import prompt_hash

    text = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in request.messages)
    return prompt_hash(request.messages), text


def checks(query: Query, response: str, request: ChatRequest) -> list[dict[str, Any]]:
    """The safety step's checks of one answer (``prompt_echo`` against the messages it was sent, refusals):
    dicts of check_name, passed, detail."""
    from pipeline.steps.safety import check_response

    return [{"check_name": n, "passed": p, "detail": d} for n, p, d in check_response(query, response,
                                                                                       request.messages)]


@dataclass
class Streamed:
    """Pieces of a streamed answer, collected while the page shows them."""

    pieces: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    latency_s: float = 0.0

    def wrap(self, stream: Iterator[str]) -> Iterator[str]:
        for piece in stream:
            self.pieces.append(piece)
            yield piece
        self.latency_s = time.perf_counter() - self.started

    @property
    def text(self) -> str:
        return "".join(self.pieces).strip()


def judge(model: Model, query: Query, response: str, raw: list[Chunk], updates: list[Chunk],
          metrics: tuple[str, ...] = METRICS) -> list[dict[str, Any]]:
    """The four judge scores (one call each) with justification and raw output."""
    from pipeline.steps.judge import judge_response

    return run_on(model, judge_response(model, query=query, response=response, raw=raw, updates=updates,
                                      metrics=metrics))


def critique(model: Model, query: Query, response: str, classifier: str) -> dict[str, Any]:
    """The Med-CoDE critique and its disagreement distribution."""
    from pipeline.steps import medcode

    return run_on(model, medcode.critique_response(model, query=query, response=response, classifier=classifier))


# -- saving --------------------------------------------------------------------------------------------
@dataclass
class PlaygroundResult:
    """One playground answer to save: the query, the chunks it saw, the response and its scores."""

    language: str
    query: str
    query_en: str | None
    gt_response: str | None
    source_dataset: str | None
    source_query_id: str | None
    model_id: str
    response: str
    latency_s: float
    kb_name: str = "kb"  # the dataset whose KB the chunks came from (their ids are saved prefixed by it)
    raw_chunks: list[Chunk] = field(default_factory=list)
    update_chunks: list[Chunk] = field(default_factory=list)
    judgments: list[dict[str, Any]] = field(default_factory=list)  # judge_response's dicts
    judge_id: str | None = None
    critique: dict[str, Any] | None = None  # critique_response's dict
    critic_id: str | None = None
    config_json: str = "{}"
    prompt_hash: str | None = None  # of the messages the model was sent
    checks: list[dict[str, Any]] = field(default_factory=list)  # ``checks``' dicts
    translator_id: str | None = None  # set when query_en is a machine translation


def save_playground(db: str | Path, result: PlaygroundResult) -> tuple[str, str]:
    """Save a playground answer as a run of kind 'playground' in dataset 'playground'; (run_id, query_id).

    The query gets its own id in dataset 'playground' (``<dataset>:<query_id>`` when picked from a
    dataset), so a playground answer never replaces a pipeline run's response. Its chunks are
    copied under the same dataset so the response browser shows what the model saw.
    """
    store = Store(db)
    if result.source_dataset and result.source_query_id:
        query_id = f"{result.source_dataset}:{result.source_query_id}"
    else:
        query_id = "typed-" + hashlib.sha256(f"{result.language}|{result.query}".encode()).hexdigest()[:10]
    run_id = store.start_run(name="playground", kind="playground", dataset=PLAYGROUND,
                             config_json=result.config_json, config_hash="playground", code_revision="app",
                             model_files={})
    prefix = f"{result.kb_name}:"
    chunks = [ChunkRow.of(PLAYGROUND, c, prefix=prefix) for c in (*result.raw_chunks, *result.update_chunks)]
    response = ResponseRow(dataset=PLAYGROUND, query_id=query_id, model_id=result.model_id, run_id=run_id,
                           prompt_hash=result.prompt_hash, text=result.response, error=None,
                           latency_s=result.latency_s)
    machine = result.translator_id is not None and bool(result.query_en)
    rows: list[Row] = [
        DatasetRow(name=PLAYGROUND, path="(playground)", closed_book=False, n_queries=None, n_chunks=None,
                   content_hash=None),
        QueryRow(dataset=PLAYGROUND, query_id=query_id, language=result.language, query=result.query,
                 query_en=result.query_en, gt_response=result.gt_response or "", themes=[], kb_refs=[],
                 update_sensitive=False, query_en_source=("machine" if machine else "human") if result.query_en
                 else None),
        *([TranslationRow(dataset=PLAYGROUND, query_id=query_id, model_id=QUERY, translator_id=result.translator_id,
                          source_hash=text_hash(result.query), text=result.query_en)] if machine else []),
        *(SafetyCheckRow(dataset=PLAYGROUND, query_id=query_id, model_id=result.model_id, check_name=c["check_name"],
                         passed=c["passed"], detail=c["detail"], response_hash=response.response_hash)
          for c in result.checks),
        *chunks,
        RetrievalRow(dataset=PLAYGROUND, query_id=query_id, search_text=result.query_en or result.query,
                     raw_ids=[prefix + c.chunk_id for c in result.raw_chunks],
                     update_ids=[prefix + c.chunk_id for c in result.update_chunks], recall=None,
                     settings="playground"),
        response,
        *(JudgmentRow(dataset=PLAYGROUND, query_id=query_id, model_id=result.model_id, judge_id=result.judge_id,
                      metric=j["metric"], sample=int(j.get("sample", 0)), score=j.get("score"),
                      parse_ok=bool(j.get("parse_ok")), justification=j.get("justification") or "",
                      raw_output=j.get("raw_output") or "", response_hash=response.response_hash, run_id=run_id,
                      cached=bool(j.get("cached", False)))
          for j in result.judgments if result.judge_id and not j.get("error")),
    ]
    if result.critique and result.critic_id:
        c = result.critique
        rows.append(CritiqueRow(dataset=PLAYGROUND, query_id=query_id, model_id=result.model_id,
                                critic_id=result.critic_id, classifier=c["classifier"], critique=c["critique"],
                                **{p: c.get(p) for p in PROB_COLUMNS}, label=c.get("label"),
                                response_hash=response.response_hash, run_id=run_id, error=c.get("error")))
    store.write(rows)
    store.update_run(run_id, finished_at=now(), status="finished", backend_calls=0, cache_hits=0, errors=0)
    return run_id, query_id
