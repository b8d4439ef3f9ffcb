"""What a step is given: the run's config, store, dataset, selected queries, models and progress.

A step is an async function ``step(ctx: RunContext) -> None``. It finds its pending items, skips
finished keys, sends the rest through ``ctx.drive`` (cache, concurrency, retries; rows saved as
they complete) and records what it did for the run's summary. Steps never import the runner.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import Progress

from pipeline.config import ModelConfig, RunConfig
from pipeline.dataset import Chunk, Dataset, Query
from pipeline.errors import UserError
from pipeline.models import Completion, Model, UsageStats, create_backend
from pipeline.models.base import ChatRequest
from pipeline.store import Store

FLUSH_EVERY_S = 1.0
FLUSH_EVERY_ROWS = 500

Rows = dict[str, list[dict[str, Any]]]


@dataclass
class StageRecord:
    """What one stage did for one model: shown in the summary table and stored with the run."""

    stage: str
    model_id: str
    items: int = 0
    skipped: int = 0
    errors: int = 0
    usage: UsageStats = field(default_factory=UsageStats)
    wall_s: float = 0.0


class RunContext:
    """What a stage needs: config, store, dataset, the selected queries, models and progress."""

    def __init__(self, config: RunConfig, store: Store, dataset: Dataset, queries: list[Query], run_id: str,
                 generator_models: list[ModelConfig], progress: Progress, console: Console):
        self.config = config
        self.store = store
        self.dataset = dataset
        self.queries = queries
        self.run_id = run_id
        self.generator_models = generator_models
        self.progress = progress
        self.console = console
        self.records: list[StageRecord] = []
        self._models: dict[str, Model] = {}
        self.released_provenance: dict[str, dict[str, Any]] = {}

    @property
    def dataset_name(self) -> str:
        return self.dataset.name

    def model(self, model_id: str | ModelConfig) -> Model:
        """The shared ``Model`` (backend + cache + limits) for an id; created once per run."""
        config = model_id if isinstance(model_id, ModelConfig) else self.config.model_config_for(model_id)
        if config.id not in self._models:
            backend = create_backend(config)
            self._models[config.id] = Model(backend, cache=self.store, concurrency=self.config.concurrency_for(config))
        return self._models[config.id]

    def release(self, model_id: str) -> None:
        """Close a model and free what it holds (GPUs of an exclusive backend)."""
        model = self._models.pop(model_id, None)
        if model is not None:
            self.released_provenance[model_id] = model.backend.provenance()
            model.close()

    def models_in_use(self) -> dict[str, Model]:
        return dict(self._models)

    def write(self, rows: Rows) -> None:
        """Save rows of several tables in one transaction (non-LLM stages)."""
        self.store.write_batch(rows)

    async def drive(self, stage: str, model: Model, requests: Sequence[ChatRequest],
                    to_rows: Callable[[int, Completion], Rows], *, label: str | None = None,
                    skipped: int = 0) -> list[Completion]:
        """Run ``requests`` through ``model`` and save ``to_rows(i, completion)`` as they finish.

        Results are flushed with their cache rows every second (or every 500 rows) and at the end.
        """
        record = StageRecord(stage, model.id, items=len(requests), skipped=skipped)
        before = UsageStats(**model.stats.__dict__)
        task = self.progress.add_task(label or f"{stage} {model.id}", total=len(requests))
        pending: Rows = {}
        pending_rows = 0
        lock = asyncio.Lock()
        started = time.perf_counter()

        async def flush() -> None:
            nonlocal pending, pending_rows
            async with lock:
                batch, pending, pending_rows = pending, {}, 0
                batch["llm_cache"] = batch.get("llm_cache", []) + model.take_cache_rows()
                await asyncio.to_thread(self.store.write_batch, batch)

        def on_result(i: int, completion: Completion) -> None:
            nonlocal pending_rows
            for table, rows in to_rows(i, completion).items():
                pending.setdefault(table, []).extend(rows)
                pending_rows += len(rows)
            if not completion.ok:
                record.errors += 1
            self.progress.advance(task)

        async def flusher() -> None:
            while True:
                await asyncio.sleep(FLUSH_EVERY_S)
                if pending_rows:
                    await flush()

        async def flush_when_full() -> None:
            while True:
                await asyncio.sleep(0.05)
                if pending_rows >= FLUSH_EVERY_ROWS:
                    await flush()

        background = [asyncio.create_task(flusher()), asyncio.create_task(flush_when_full())]
        try:
            results = await model.generate_many(list(requests), on_result=on_result)
        finally:
            for t in background:
                t.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await flush()
            record.wall_s = time.perf_counter() - started
            after = model.stats
            record.usage = UsageStats(**{k: getattr(after, k) - getattr(before, k) for k in after.__dict__})
            self.records.append(record)
            self.progress.update(task, completed=len(requests))
        return results

    def note(self, stage: str, model_id: str, items: int, skipped: int = 0, errors: int = 0,
             wall_s: float = 0.0) -> None:
        """Record a non-LLM stage's work for the summary."""
        self.records.append(StageRecord(stage, model_id, items=items, skipped=skipped, errors=errors, wall_s=wall_s))


def stored_chunks(ctx: RunContext, queries: Sequence[Query] | None = None, *,
                  fallback_to_refs: bool = False) -> dict[str, tuple[list[Chunk], list[Chunk]]]:
    """query_id → (raw chunks, update chunks) as the retrieve step stored them.

    A closed-book dataset has none. A query without a stored retrieval is an error, unless
    ``fallback_to_refs`` (the judge sanity set) takes the query's ``kb_refs`` instead.
    """
    queries = ctx.queries if queries is None else queries
    if ctx.dataset.closed_book:
        return {q.query_id: ([], []) for q in queries}
    stored = {qid: (raw, upd) for qid, raw, upd in ctx.store.fetch(
        "SELECT query_id, raw_ids, update_ids FROM retrievals WHERE dataset = ?", [ctx.dataset_name])}
    out = {}
    for q in queries:
        if q.query_id in stored:
            raw_ids, upd_ids = stored[q.query_id]
        elif fallback_to_refs:
            raw_ids = [c for c in q.kb_refs if ctx.dataset.chunk(c).kind == "raw"]
            upd_ids = [c for c in q.kb_refs if ctx.dataset.chunk(c).kind == "update"]
        else:
            raise UserError(f"query {q.query_id} has no stored retrieval; run the 'retrieve' step first")
        out[q.query_id] = ([ctx.dataset.chunk(c) for c in raw_ids], [ctx.dataset.chunk(c) for c in upd_ids])
    return out
