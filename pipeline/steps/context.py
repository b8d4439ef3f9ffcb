"""What a step is given: the run's config, store, dataset, selected queries, models and progress.

A step is an async function ``step(ctx: RunContext) -> None``. An LLM step says what it has still to do once,
in its ``pending(ctx: Inputs) -> list[Pending]`` (per model: the calls not finished for their current inputs, and
how many are); the step sends those through ``ctx.send`` (cache, concurrency, retries; rows saved as they complete)
and the dry run's estimate (``pipeline.estimate``) tallies the same calls from its own view of the inputs. Steps
never import the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from rich.console import Console
from rich.progress import Progress

from pipeline.config import ModelConfig, RunConfig
from pipeline.dataset import Chunk, Dataset, Query
from pipeline.errors import UserError
from pipeline.models import Completion, Model, UsageStats, create_backend
from pipeline.models.base import ChatRequest
from pipeline.store import Store
from pipeline.store.rows import Row

T = TypeVar("T")
FLUSH_EVERY_S = 1.0
FLUSH_EVERY_ROWS = 500
# Re-ask k of sample s is sample s + 1000·k: a new cache key and seed, apart from a judge's own samples (at most 20).
REASK_SAMPLE_STRIDE = 1000
PROGRESS_EVERY_S = 5.0  # the run's progress is saved with every batch, and at least this often while a stage runs


def reask_request(request: ChatRequest, attempt: int, temperature: float) -> ChatRequest:
    """The same prompt asked again as a new sample: attempt ``attempt`` gets its own sample index (so its own
    cache key and seed) and at least ``temperature`` (at 0 a new sample would repeat the unparsed one)."""
    p = request.params
    return replace(request, params=replace(p, sample=p.sample + REASK_SAMPLE_STRIDE * attempt,
                                           temperature=max(p.temperature, temperature)))


@dataclass
class StageRecord:
    """What one stage did for one model: shown in the summary table and stored with the run."""

    stage: str
    model_id: str
    items: int = 0
    skipped: int = 0
    errors: int = 0
    done: int = 0  # of ``items``, those finished (answered or failed) so far: all of them unless interrupted
    usage: UsageStats = field(default_factory=UsageStats)
    wall_s: float = 0.0
    # tokens of the completions the backend made in this stage (cached ones cost nothing and are not counted)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasked: int = 0  # re-asks of unparsed outputs sent to the backend, beyond the first ask of each item
    replayed: int = 0  # re-asks answered from the cache (an earlier run's attempts, replayed free)
    unparsed: int = 0  # items whose output stayed unparsed after the re-asks (saved as they are, counted in errors)

    def summary(self) -> dict[str, Any]:
        """The record as ``runs.summary`` stores it: the stage's fields, then its usage's beside them (the
        readers take ``backend_calls``, ``cache_hits`` and ``retries`` flat). A usage field named like a stage
        field is prefixed ``usage_``: ``usage_errors`` (failed backend calls) never overwrites the stage's own
        ``errors`` (items that ended in an error)."""
        own = {k: v for k, v in vars(self).items() if k != "usage"}
        return {**own, **{f"usage_{k}" if k in own else k: v for k, v in vars(self.usage).items()}}


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
        self.down: dict[str, str] = {}  # model id -> the line saying its endpoint was taken as down (circuit breaker)
        self._live: dict[int, tuple[StageRecord, Model, UsageStats, float]] = {}  # stages running now
        self._progress_saved = 0.0
        self._models: dict[str, Model] = {}
        self.released_provenance: dict[str, dict[str, Any]] = {}

    @property
    def dataset_name(self) -> str:
        return self.dataset.name

    # -- the inputs of ``pending`` (``Inputs``): what is stored now --
    def fetch(self, sql: str, params: list) -> list[tuple]:
        return self.store.fetch(sql, params)

    def responses(self) -> list[ResponseItem]:
        return responses_to_score(self)

    def chunks(self, queries: Sequence[Query] | None = None, *,
               fallback_to_refs: bool = False) -> dict[str, tuple[list[Chunk], list[Chunk]]]:
        return stored_chunks(self, queries, fallback_to_refs=fallback_to_refs)

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

    def write(self, rows: Sequence[Row]) -> None:
        """Save rows (of any tables) in one transaction (non-LLM steps)."""
        self.store.write(rows)

    def live_summary(self) -> list[dict[str, Any]]:
        """``runs.summary`` while the run goes on: the finished stages' records, then those running now, each
        with ``live``, what it has done so far (``done``, ``errors``, its usage) and when (``updated_at``)."""
        stamp = time.time()
        live = []
        for record, model, before, started in list(self._live.values()):
            after = model.stats
            usage = UsageStats(**{k: getattr(after, k) - getattr(before, k) for k in after.__dict__})
            snapshot = StageRecord(**{**vars(record), "usage": usage, "wall_s": stamp - started})
            live.append({**snapshot.summary(), "live": True, "updated_at": stamp})
        return [{**r.summary(), "updated_at": stamp} for r in self.records] + live

    def save_progress(self) -> None:
        """Record the run's progress in its ``runs`` row (summary and counters), where the dashboard reads it."""
        summary = self.live_summary()
        self._progress_saved = time.monotonic()
        self.store.update_run(self.run_id, summary=summary, errors=sum(r["errors"] for r in summary),
                              backend_calls=sum(r["backend_calls"] for r in summary),
                              cache_hits=sum(r["cache_hits"] for r in summary),
                              retries=sum(r["retries"] for r in summary))

    async def drive(self, stage: str, model: Model, requests: Sequence[ChatRequest],
                    to_rows: Callable[[int, Completion], list[Row]], *, label: str | None = None,
                    skipped: int = 0, unparsed: Callable[[Completion], bool] | None = None) -> list[Completion]:
        """Run ``requests`` through ``model`` and save ``to_rows(i, completion)`` as they finish.

        Results are flushed with their cache rows every second (or every 500 rows) and at the end.
        A completion counts as an error when the call failed, a row it produced records an error, or it stayed
        unparsed. With ``unparsed`` (the step's test of an answer it cannot read), such an answer is asked again
        as a new sample (:func:`reask_request`) until it parses or the item has had ``config.reask.times`` more
        backend calls in this run (attempts an earlier run made come from the cache and cost none); every attempt
        is cached and counted. What stays unparsed is saved as it is. Returns each item's last completion.
        """
        record = StageRecord(stage, model.id, items=len(requests), skipped=skipped)
        before = UsageStats(**model.stats.__dict__)
        task = self.progress.add_task(label or f"{stage} {model.id}", total=len(requests))
        pending: list[Row] = []
        pending_rows = 0
        lock = asyncio.Lock()
        started = time.perf_counter()
        reask = self.config.reask
        last: list[Completion | None] = [None] * len(requests)
        calls_made = [0] * len(requests)  # backend calls per item in this run (cached attempts are free)
        again: list[int] = []  # items to ask again in the next round
        self._live[id(record)] = (record, model, before, time.time())

        def write_batch(batch: list[Row]) -> None:
            self.store.write(batch)
            self.save_progress()

        async def flush() -> None:
            nonlocal pending, pending_rows
            async with lock:
                batch, pending, pending_rows = pending, [], 0
                batch.extend(model.take_cache_rows())
                await asyncio.to_thread(write_batch, batch)

        def on_result(i: int, completion: Completion) -> None:
            nonlocal pending_rows
            last[i] = completion
            if attempt > 0:  # a re-ask: sent, or an earlier run's attempt replayed from the cache
                record.replayed += completion.cached
                record.reasked += not completion.cached
            if not completion.cached:
                calls_made[i] += 1
                record.prompt_tokens += completion.prompt_tokens or 0
                record.completion_tokens += completion.completion_tokens or 0
            unreadable = unparsed is not None and completion.ok and unparsed(completion)
            if unreadable and calls_made[i] <= reask.times:
                again.append(i)
                return
            record.unparsed += unreadable
            rows = to_rows(i, completion)
            pending.extend(rows)
            pending_rows += len(rows)
            record.done += 1
            if not completion.ok or unreadable or any(getattr(r, "error", None) for r in rows):
                record.errors += 1
            self.progress.advance(task)

        # The periodic flushes are stopped, never cancelled: cancelling a task that awaits
        # asyncio.to_thread(store.write) drops the batch when its job has not started yet (and a
        # started one would finish after the stage returned).
        stopping = asyncio.Event()

        async def every(period_s: float, due: Callable[[], bool]) -> None:
            while not stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), period_s)
                if not stopping.is_set() and due():
                    await flush()

        def due() -> bool:
            return pending_rows > 0 or time.monotonic() - self._progress_saved >= PROGRESS_EVERY_S

        background = [asyncio.create_task(every(FLUSH_EVERY_S, due)),
                      asyncio.create_task(every(0.05, lambda: pending_rows >= FLUSH_EVERY_ROWS))]
        try:
            items, attempt = list(range(len(requests))), 0
            while items:  # round 0 asks every item; round k re-asks those still unparsed as attempt k
                batch = [requests[i] if attempt == 0 else reask_request(requests[i], attempt, reask.temperature)
                         for i in items]
                await model.generate_many(batch, on_result=lambda j, c, items=items: on_result(items[j], c))
                items, attempt = list(again), attempt + 1
                again.clear()
            if model.down and model.id not in self.down:  # said once per run, where it happened
                self.down[model.id] = model.down
                self.console.print(f"[bold red]endpoint down:[/] {model.down}", highlight=False, soft_wrap=True)
        finally:
            stopping.set()
            await asyncio.gather(*background)  # a flush in progress completes; a failed write is raised
            record.wall_s = time.perf_counter() - started
            after = model.stats
            record.usage = UsageStats(**{k: getattr(after, k) - getattr(before, k) for k in after.__dict__})
            del self._live[id(record)]
            self.records.append(record)
            await flush()  # the last rows, with the stage recorded as finished
            self.progress.update(task, completed=len(requests))
        if record.reasked or record.replayed:
            replayed = f" ({record.replayed} more replayed from the cache)" if record.replayed else ""
            outcome = (f"{record.unparsed} item(s) still unparsed after at most {1 + reask.times} backend call(s) "
                       "each in this run: saved as they are and counted as errors"
                       + ("; a rerun asks them again" if reask.on_rerun else "")
                       if record.unparsed else "every item parsed in the end")
            self.console.print(f"{label or stage}: {record.reasked} re-ask(s) of unparsed outputs sent{replayed}; "
                               f"{outcome}", highlight=False, soft_wrap=True)
        return last  # type: ignore[return-value]

    async def send(self, pending: Pending, to_rows: Callable[[Call, Completion], list[Row]], *, label: str,
                   start: int = 0, stop: int | None = None) -> list[Completion]:
        """``drive`` the calls ``start:stop`` of ``pending`` through its model, its finished keys counted as
        skipped (with the first slice), its unparsed test re-asking; ``to_rows(call, completion)`` saves each."""
        calls = pending.calls[start:stop]
        return await self.drive(pending.stage, self.model(pending.model), [c.request for c in calls],
                                lambda i, c: to_rows(calls[i], c), label=label,
                                skipped=pending.done if start == 0 else 0, unparsed=pending.unparsed)

    def note(self, stage: str, model_id: str, items: int, skipped: int = 0, errors: int = 0,
             wall_s: float = 0.0) -> None:
        """Record a non-LLM stage's work for the summary (and as the run's progress)."""
        self.records.append(StageRecord(stage, model_id, items=items, skipped=skipped, errors=errors, done=items,
                                        wall_s=wall_s))
        self.save_progress()


def stored_chunks(ctx: RunContext, queries: Sequence[Query] | None = None, *,
                  fallback_to_refs: bool = False) -> dict[str, tuple[list[Chunk], list[Chunk]]]:
    """query_id → (raw chunks, update chunks) as the retrieve step stored them.

    A closed-book dataset has none. A query without a stored retrieval is an error, unless
    ``fallback_to_refs`` (the judge sanity set) takes the query's ``kb_refs`` instead. So is one retrieved from
    another KB than the dataset's now (re-ingested or edited since), or one naming a chunk the KB no longer has:
    one line saying to retrieve again, never a result mixing two KBs.
    """
    queries = ctx.queries if queries is None else queries
    if ctx.dataset.closed_book:
        return {q.query_id: ([], []) for q in queries}
    stored = {qid: (raw, upd, kb) for qid, raw, upd, kb in ctx.store.fetch(
        "SELECT query_id, raw_ids, update_ids, kb_hash FROM retrievals WHERE dataset = ?", [ctx.dataset_name])}
    known = {c.chunk_id for c in ctx.dataset.chunks}
    out = {}
    for q in queries:
        if q.query_id in stored:
            raw_ids, upd_ids, kb_hash = stored[q.query_id]
            gone = [c for c in (*raw_ids, *upd_ids) if c not in known]
            if (kb_hash is not None and kb_hash != ctx.dataset.kb_hash) or gone:
                was = f"chunk {gone[0]!r} it names is gone" if gone else f"it was retrieved from KB {kb_hash}"
                raise UserError(f"{ctx.dataset_name}: the knowledge base changed since query {q.query_id} was "
                                f"retrieved ({was}; the KB is now {ctx.dataset.kb_hash}): run the retrieve stage "
                                "again (rerun without --stages, or add retrieve to them) so that answers and scores "
                                "follow the new KB")
        elif fallback_to_refs:
            raw_ids = [c for c in q.kb_refs if ctx.dataset.chunk(c).kind == "raw"]
            upd_ids = [c for c in q.kb_refs if ctx.dataset.chunk(c).kind == "update"]
        else:
            raise UserError(f"query {q.query_id} has no stored retrieval; run the 'retrieve' step first")
        out[q.query_id] = ([ctx.dataset.chunk(c) for c in raw_ids], [ctx.dataset.chunk(c) for c in upd_ids])
    return out


# -- pending work: what a stage still has to send, per model ----------------------------------------
@dataclass(frozen=True)
class ResponseItem:
    """A stored, error-free response of a selected model to a selected query: what a scoring step scores. The dry
    run's estimate also passes responses not generated yet: empty text, no hash (never finished), and ``assumed``
    tokens (its model's ``max_tokens``) standing for the text in the prompts that hold it."""

    query: Query
    model_id: str
    text: str
    response_hash: str | None
    assumed: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return self.query.query_id, self.model_id


@dataclass(frozen=True)
class Call:
    """One request a stage would send: its key (as the stage's finished keys), the request, what the step saves
    the result with (``item``), and ``assumed`` tokens its prompt lacks (responses not generated yet)."""

    key: tuple
    request: ChatRequest
    item: Any = None
    assumed: int = 0


@dataclass
class Pending:
    """A stage's work for one model: the calls not finished for their current inputs (in the order they are sent)
    and how many are finished (``done``, not repeated). ``unparsed`` is the step's test of an output it cannot read
    (asked again, ``RunContext.drive``); ``then`` builds a follow-up stage from these calls' outputs (None: not
    known), as Med-CoDE classifies its critiques."""

    stage: str
    model: ModelConfig
    calls: list[Call]
    done: int = 0
    finished: list[tuple] = field(default_factory=list)  # the keys of the ``done`` calls
    unparsed: Callable[[Completion], bool] | None = None
    then: Callable[[list[str | None]], Pending] | None = None


class Inputs(Protocol):
    """What ``pending`` reads: a ``RunContext`` (what is stored now) or the dry run's estimate (stored, else the
    stand-ins and upper bounds it assumes)."""

    config: RunConfig
    dataset: Dataset
    queries: list[Query]
    generator_models: list[ModelConfig]

    def fetch(self, sql: str, params: list) -> list[tuple]: ...
    def responses(self) -> list[ResponseItem]: ...
    def chunks(self, queries: Sequence[Query] | None = None, *,
               fallback_to_refs: bool = False) -> dict[str, tuple[list[Chunk], list[Chunk]]]: ...


def pending_of(stage: str, model: ModelConfig, calls: Sequence[Call], done: dict[tuple, tuple],
               is_current: Callable[[Call, tuple], bool], **extra: Any) -> Pending:
    """The ``Pending`` of ``calls``: those whose key is finished for their current inputs (``done``: key → stored
    inputs) are done, the others are to send."""
    todo = [c for c in calls if c.key not in done or not is_current(c, done[c.key])]
    sending = {c.key for c in todo}
    return Pending(stage, model, todo, len(calls) - len(todo), [c.key for c in calls if c.key not in sending],
                   **extra)


def responses_to_score(ctx: RunContext) -> list[ResponseItem]:
    """The selected models' current responses to the selected queries, in (query, model) order."""
    selected = {q.query_id: q for q in ctx.queries}
    model_ids = {m.id for m in ctx.generator_models}
    rows = ctx.store.fetch(
        "SELECT query_id, model_id, text, response_hash FROM responses WHERE dataset = ? AND error IS NULL "
        "AND text IS NOT NULL ORDER BY query_id, model_id", [ctx.dataset_name])
    return [ResponseItem(selected[q], m, text, h) for q, m, text, h in rows if q in selected and m in model_ids]


def finished(ctx: Inputs, table: str, key: tuple[str, ...], *, where: dict[str, str] | None = None,
             also: tuple[str, ...] = (), unparsed: str | None = None) -> dict[tuple, tuple]:
    """Finished keys of a scoring table for this dataset: key → (response_hash, *also).

    ``table``, ``key``, ``where`` keys and ``also`` are fixed identifiers of the calling step; the
    ``where`` values are parameters. ``unparsed`` is the step's fixed SQL test of a row whose output could not
    be read: with ``reask.on_rerun`` (the default) such a row is not finished, so a rerun asks again.
    """
    where = where or {}
    preds = "".join(f" AND {col} = ?" for col in where)
    if unparsed and ctx.config.reask.on_rerun:
        preds += f" AND NOT coalesce({unparsed}, false)"
    rows = ctx.fetch(f"SELECT {', '.join(key)}, response_hash{''.join(', ' + c for c in also)} FROM {table} "
                     f"WHERE dataset = ?{preds}", [ctx.dataset.name, *where.values()])
    n = len(key)
    return {tuple(r[:n]): tuple(r[n:]) for r in rows}


def still_to_do(candidates: Sequence[T], key: Callable[[T], tuple], done: dict[tuple, tuple],
                   is_current: Callable[[T, tuple], bool]) -> tuple[list[T], int]:
    """(the candidates not finished for their current inputs, how many were finished)."""
    todo = [c for c in candidates if (k := key(c)) not in done or not is_current(c, done[k])]
    return todo, len(candidates) - len(todo)
