"""RunContext.drive saves every row: a periodic flush under way when the stage ends is completed, never dropped.

Found by bench/bench_judge_prefix.py: in a run where a model's only completion arrived just before its
stage ended, the periodic flusher had already submitted that batch's write to a worker thread; the
stage then cancelled the flusher, which cancelled the not-yet-started ``asyncio.to_thread`` job, and the
response was never stored (the stage still reported it done, without error).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import threading

from rich.console import Console
from rich.progress import Progress

from pipeline.config import RunConfig
from pipeline.models.base import ChatRequest, Completion, Message, UsageStats
from pipeline.steps import context as step_context
from pipeline.steps.context import RunContext
from pipeline.store import Store
from pipeline.store.rows import ResponseRow


class SlowStartExecutor(concurrent.futures.ThreadPoolExecutor):
    """Starts each job after a delay (a busy machine's thread pool), so a job can still be cancelled."""

    def __init__(self, delay_s: float):
        super().__init__(max_workers=1)
        self.delay_s = delay_s

    def submit(self, fn, /, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()

        def start():
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # pragma: no cover - reported through the future
                    future.set_exception(exc)

        threading.Timer(self.delay_s, start).start()
        return future


class OneAnswerModel:
    """A model whose only completion arrives, and then the stage lingers a moment before it returns."""

    id = "fake/one-answer"
    down = None  # its endpoint never went down (the circuit breaker's line)

    def __init__(self, linger_s: float):
        self.stats = UsageStats()
        self.linger_s = linger_s

    async def generate_many(self, requests, on_result=None):
        done = [Completion(text="the answer") for _ in requests]
        for i, c in enumerate(done):
            on_result(i, c)
        await asyncio.sleep(self.linger_s)  # the periodic flusher wakes here and submits the write
        return done

    def take_cache_rows(self):
        return []


def test_a_flush_under_way_when_the_stage_ends_is_not_lost(tmp_path, monkeypatch):
    monkeypatch.setattr(step_context, "FLUSH_EVERY_S", 0.01)
    store = Store(tmp_path / "results.duckdb")
    console = Console(file=io.StringIO())
    config = RunConfig.model_validate({"name": "flush", "dataset": str(tmp_path), "db": str(store.path),
                                       "models": [{"id": "extractive/top-sentences"}]})
    ctx = RunContext(config, store, None, [], "run-1", [], Progress(console=console), console)
    messages: tuple[Message, ...] = ({"role": "user", "content": "q"},)

    def to_rows(i: int, c: Completion):
        return [ResponseRow(dataset="d", query_id=f"q{i}", model_id="fake/one-answer", run_id="run-1",
                            prompt_hash="h", text=c.text, error=None)]

    async def stage():
        asyncio.get_running_loop().set_default_executor(SlowStartExecutor(0.3))
        await ctx.drive("generate", OneAnswerModel(linger_s=0.1), [ChatRequest(messages)], to_rows)

    asyncio.run(stage())
    assert store.fetch("SELECT query_id, text FROM responses") == [("q0", "the answer")]
