"""Store write rate: judgments written in a fast server's batch sizes into a large file, and whether the
writer stalls the event loop that drives the requests.

1. **Sustained rate.** A scratch copy of the synthetic results database (``bench/generate_db.py``,
   10× the paper's scale by default: 24 models × 7,490 queries, 728k judgments; ``--scale 100`` for
   7.2 M) receives new judgments (a new judge on the stored responses, four metrics each) through
   ``Store.write`` — the pipeline's only write path: one connection and one transaction per batch,
   ``item_scores`` recomputed for the touched keys in it — in batches of 320, 1,000, 5,000 and
   20,000 rows, back to back (RunContext.drive flushes what arrived while the previous write ran, so
   a fast server's batches grow until the writer keeps up). Rows/s = rows ÷ the batches' summed wall
   time; each batch's time is split into opening the file, the statements, and closing it (DuckDB
   checkpoints on close), and its CPU seconds (all threads) are recorded beside the wall time, being
   less sensitive to other load. The same at 1,000 and 5,000 with each judgment's ``llm_cache`` row
   beside it, as the pipeline writes.
2. **Concurrency held while writing.** A real ``pipeline.runner.run`` (stages generate, then judge)
   drives the fixture OpenAI-compatible server (tests/support/openai_fixture.py, its own process,
   fixed latency) at concurrency 32 into the same large file: RunContext.drive saves rows with their
   cache rows from a thread (``asyncio.to_thread``) every second or 500 rows. Every judge request's
   start is stamped on the client; the server holds each for exactly its latency, so the calls in
   flight at the server at time t are the requests started in (t − latency, t]. Reported inside and
   outside the write windows: mean and 5th-percentile calls in flight (10 ms bins), and the event
   loop's lag (a 5 ms heartbeat's overshoot), so a stall from the writer (its Python work holds the
   GIL) shows as a drop.

Every figure carries the 1-minute load average (2 shared cores). Writes bench/results/store_writes.json.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.catalog import catalog, load_config  # noqa: E402
from pipeline.models.openai_compatible import OpenAICompatibleBackend  # noqa: E402
from pipeline.runner import run  # noqa: E402
from pipeline.store import Store, open_connection  # noqa: E402
from pipeline.store import writer as store_writer  # noqa: E402
from pipeline.store.rows import CacheRow, JudgmentRow  # noqa: E402
from tests.support.datasets import write_closed_book, write_config  # noqa: E402
from tests.support.openai_fixture import FixtureServer  # noqa: E402

DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "results" / "store_writes.json"
METRICS = ("FC", "SS", "COH", "CON")
SIZES = (320, 1000, 5000, 20000)
CACHE_SIZES = (1000, 5000)  # also written with their llm_cache rows, as RunContext.drive does
TARGET_ROWS_S = 20_000
JUSTIFICATION = "The response states the same waiting period as the ground truth and the chunk; nothing is missing."


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def cpu_s() -> float:
    """CPU seconds of this process, all threads (DuckDB's included): less sensitive to other load than wall time."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def base_database(scale: int) -> Path:
    path = DATA / f"synthetic-{scale}x.duckdb"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "generate_db.py"), "--scale", str(scale), "--out",
                        str(path)], check=True)
    return path


def scratch_copy(base: Path, workdir: Path) -> Path:
    """A private copy of the synthetic file (the dashboard benchmark reads the original)."""
    target = workdir / f"store-writes-{base.stem}.duckdb"
    shutil.copyfile(base, target)
    return target


# -- timing the writer's own steps -------------------------------------------------------------------
class Timings:
    """Wraps the writer's connections: time to open, each statement (by its first words), time to close."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = defaultdict(float)
        self._original = store_writer.open_connection
        timings = self

        @contextmanager
        def timed_open(path, *, read_only, **kwargs):
            started = time.perf_counter()
            cm = timings._original(path, read_only=read_only, **kwargs)
            con = cm.__enter__()
            timings.parts["open"] += time.perf_counter() - started
            try:
                yield _TimedConnection(con, timings.parts)
            finally:
                closing = time.perf_counter()
                cm.__exit__(None, None, None)
                timings.parts["close (checkpoint)"] += time.perf_counter() - closing

        self._timed_open = timed_open

    def __enter__(self) -> Timings:
        store_writer.open_connection = self._timed_open
        return self

    def __exit__(self, *exc) -> None:
        store_writer.open_connection = self._original


class _TimedConnection:
    def __init__(self, con, parts):
        self._con, self._parts = con, parts

    def execute(self, sql, *args, **kwargs):
        words = [w for w in sql.split() if w not in ("OR", "REPLACE", "INTO", "FROM", "TRANSACTION")]
        label = " ".join(words[:2])  # e.g. 'INSERT judgments', 'DELETE item_scores', 'COMMIT'
        started = time.perf_counter()
        try:
            return self._con.execute(sql, *args, **kwargs)
        finally:
            self._parts[label] += time.perf_counter() - started

    def __getattr__(self, name):
        return getattr(self._con, name)


# -- part 1: sustained rate ----------------------------------------------------------------------------
def response_keys(db: Path) -> list[tuple]:
    with open_connection(db, read_only=True) as con:
        return con.execute("SELECT dataset, query_id, model_id, response_hash FROM responses WHERE error IS NULL "
                           "AND text IS NOT NULL ORDER BY dataset, query_id, model_id").fetchall()


def judgment_batches(keys: list[tuple], size: int, batches: int, judge: str, start: int):
    """``batches`` lists of ``size`` judgment rows (four metrics per response), from response ``start`` on."""
    per = size // len(METRICS)
    out = []
    for b in range(batches):
        rows = []
        for dataset, query_id, model_id, response_hash in keys[start + b * per: start + (b + 1) * per]:
            for i, metric in enumerate(METRICS):
                score = zlib.crc32(f"{query_id}|{model_id}|{metric}".encode()) % 3
                rows.append(JudgmentRow(
                    dataset=dataset, query_id=query_id, model_id=model_id, judge_id=judge, metric=metric, sample=0,
                    score=score, parse_ok=i != 3 or score != 0, justification=JUSTIFICATION,
                    raw_output=json.dumps({"Justification": JUSTIFICATION, "Score": score}),
                    response_hash=response_hash, run_id="bench-store-writes"))
        out.append(rows)
    return out, start + batches * per


def cache_rows_for(rows: list[JudgmentRow]) -> list[CacheRow]:
    return [CacheRow(key=f"{r.judge_id}|{r.query_id}|{r.model_id}|{r.metric}", model_id=r.judge_id,
                     request=json.dumps({"messages": [{"role": "user", "content": f"judge {r.query_id} {r.metric}"}]}),
                     text=r.raw_output, top_logprobs=None, prompt_tokens=900, completion_tokens=30, latency_s=0.05)
            for r in rows]


def sustained(db: Path, keys: list[tuple], sizes, batches: int) -> list[dict]:
    store = Store(db)
    store.upgrade()  # schema work of a first open, outside the timing
    start = 0
    out = []
    for with_cache in (False, True):
        for size in (s for s in sizes if not with_cache or s in CACHE_SIZES):
            tag = f"bench/judge-{size}{'-cache' if with_cache else ''}"
            groups, start = judgment_batches(keys, size, batches, tag, start)
            walls, cpus = [], []
            load_before = load1()
            with Timings() as timings:
                for rows in groups:
                    payload = rows + cache_rows_for(rows) if with_cache else rows
                    started, cpu0 = time.perf_counter(), cpu_s()
                    store.write(payload)
                    walls.append(time.perf_counter() - started)
                    cpus.append(cpu_s() - cpu0)
            total = sum(walls)
            n_rows = sum(len(g) for g in groups)
            per_batch = {k: v / len(groups) * 1000 for k, v in timings.parts.items()}
            per_batch["python (rows → Arrow) and rest"] = total / len(groups) * 1000 - sum(per_batch.values())
            parts = {k: round(v, 1) for k, v in sorted(per_batch.items(), key=lambda kv: -kv[1])}
            out.append({"batch_rows": size, "with_cache_rows": with_cache, "batches": len(groups),
                        "judgment_rows_per_s": round(n_rows / total),
                        "batch_ms_median": round(statistics.median(walls) * 1000, 1),
                        "batch_ms_max": round(max(walls) * 1000, 1), "ms_per_batch": parts,
                        "cpu_ms_per_batch_median": round(statistics.median(cpus) * 1000, 1),
                        "judgment_rows_per_cpu_s": round(n_rows / sum(cpus)),
                        "load_avg_1m": [load_before, load1()]})
    return out


# -- part 2: concurrency held while writing --------------------------------------------------------------
def occupancy(starts: np.ndarray, latency: float, t0: float, t1: float,
              bin_s: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """(bin times, calls in flight at the server): requests started in (t − latency, t]."""
    times = np.arange(t0, t1, bin_s)
    starts = np.sort(starts)
    inflight = np.searchsorted(starts, times, side="right") - np.searchsorted(starts, times - latency, side="right")
    return times, inflight


def concurrency_held(db: Path, workdir: Path, *, concurrency: int, latency: float, queries: int, models: int) -> dict:
    starts: list[float] = []
    writes: list[tuple[float, float, int]] = []
    lags: list[tuple[float, float]] = []
    stage = {"name": None}
    complete = OpenAICompatibleBackend.complete
    write = Store.write

    async def stamped(backend, request):
        if stage["name"] == "judge":
            starts.append(time.perf_counter())
        return await complete(backend, request)

    def timed_write(store, rows, con=None):
        rows = list(rows)
        started = time.perf_counter()
        try:
            return write(store, rows, con)
        finally:
            if con is None and stage["name"] == "judge":
                writes.append((started, time.perf_counter(), sum(isinstance(r, JudgmentRow) for r in rows)))

    from pipeline.steps import judge as judge_step

    step_judge = judge_step.step_judge

    async def judged(ctx):
        async def heartbeat():
            while True:
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                lags.append((before, time.perf_counter() - before - 0.005))

        stage["name"] = "judge"
        beat = asyncio.create_task(heartbeat())
        try:
            await step_judge(ctx)
        finally:
            beat.cancel()
            stage["name"] = None

    dataset = write_closed_book(workdir / "qa", queries, prefix="sw-")
    with FixtureServer(latency_s=latency) as server:
        config = load_config(write_config(
            workdir / "store-writes.yaml", dataset=dataset, db=db, concurrency=concurrency,
            models=[{"id": f"openai-compatible/fixture-{i}", "base_url": server.base_url, "timeout": 30.0}
                    for i in range(models)],
            judge={"id": "openai-compatible/fixture-judge", "base_url": server.base_url, "timeout": 30.0,
                   "metrics": list(METRICS)}))
        OpenAICompatibleBackend.complete = stamped
        Store.write = timed_write
        try:
            load_before = load1()
            with catalog().steps.replaced("judge", judged):
                run(config, stages="generate,judge", console=Console(file=io.StringIO()))
        finally:
            OpenAICompatibleBackend.complete = complete
            Store.write = write
        load_after = load1()

    starts_a = np.array(starts)
    t0, t1 = starts_a.min() + latency, starts_a.max()  # steady state: the first latency is ramp-up
    times, inflight = occupancy(starts_a, latency, t0, t1)
    in_write = np.zeros(len(times), dtype=bool)
    for a, b, _ in writes:
        in_write |= (times >= a) & (times < b)
    lag_t = np.array([t for t, _ in lags])
    lag_v = np.array([v for _, v in lags]) * 1000
    lag_in = np.zeros(len(lag_t), dtype=bool)
    for a, b, _ in writes:
        lag_in |= (lag_t >= a) & (lag_t < b)

    def stats(values: np.ndarray) -> dict:
        if not len(values):
            return {}
        return {"mean": round(float(values.mean()), 2), "p5": round(float(np.percentile(values, 5)), 2),
                "min": int(values.min()) if values.dtype.kind in "iu" else round(float(values.min()), 2)}

    def lag_stats(values: np.ndarray) -> dict:
        if not len(values):
            return {}
        return {"p50_ms": round(float(np.percentile(values, 50)), 2),
                "p99_ms": round(float(np.percentile(values, 99)), 2), "max_ms": round(float(values.max()), 2)}

    span = starts_a.max() - starts_a.min() + latency
    batch_rows = [n for _, _, n in writes]
    return {
        "concurrency": concurrency, "latency_s": latency, "queries": queries, "models": models,
        "judge_calls": len(starts), "judge_stage_s": round(span, 2),
        "achieved_rps": round(len(starts) / span, 1), "ideal_rps": round(concurrency / latency, 1),
        "writes": len(writes), "write_s_total": round(sum(b - a for a, b, _ in writes), 2),
        "write_ms_median": round(statistics.median((b - a) * 1000 for a, b, _ in writes), 1) if writes else None,
        "write_share_of_stage": round(float(in_write.mean()), 3),
        "judgment_rows_per_write": {"median": statistics.median(batch_rows) if writes else None,
                                    "max": max(batch_rows) if writes else None},
        "in_flight_during_writes": stats(inflight[in_write]),
        "in_flight_between_writes": stats(inflight[~in_write]),
        "loop_lag_during_writes": lag_stats(lag_v[lag_in]),
        "loop_lag_between_writes": lag_stats(lag_v[~lag_in]),
        "load_avg_1m": [load_before, load_after],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=10, help="synthetic database scale (10; 100 takes minutes)")
    parser.add_argument("--batches", type=int, default=5, help="batches per size")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2, help="fixture server latency (s)")
    parser.add_argument("--queries", type=int, default=200, help="part 2: queries (× models × 4 judge calls)")
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--skip-drive", action="store_true", help="part 1 only")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))

    base = base_database(args.scale)
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        workdir = Path(tmp)
        db = scratch_copy(base, workdir)
        with open_connection(db, read_only=True) as con:
            judgments = con.execute("SELECT count(*) FROM judgments").fetchone()[0]
        keys = response_keys(db)
        rates = sustained(db, keys, sizes, args.batches)
        drive = None if args.skip_drive else concurrency_held(
            db, workdir, concurrency=args.concurrency, latency=args.latency, queries=args.queries, models=args.models)
    loads = [x for r in rates for x in r["load_avg_1m"]] + (drive["load_avg_1m"] if drive else [])
    best = max((r for r in rates if not r["with_cache_rows"]), key=lambda r: r["judgment_rows_per_s"])
    result = {
        "scale": args.scale, "database": base.name, "judgments_in_file": judgments, "sustained": rates,
        "best_judgment_rows_per_s": best["judgment_rows_per_s"], "best_at_batch_rows": best["batch_rows"],
        "target_rows_per_s": TARGET_ROWS_S, "drive": drive,
        "load_avg_1m": {"min": min(loads), "max": max(loads)}, "cpus": os.cpu_count(),
    }
    out = RESULTS if args.scale == 10 else RESULTS.with_name(f"store_writes-{args.scale}x.json")  # 10× keeps its file
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    console = Console()
    table = Table(title=f"Store.write into the {args.scale}× file ({judgments:,} judgments), {args.batches} batches "
                        f"per size; load {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores")
    for col in ("batch rows", "+ cache rows", "rows/s", "rows/CPU-s", "median ms", "CPU ms", "biggest parts (ms)"):
        table.add_column(col, justify="left" if col.startswith("biggest") else "right")
    for r in rates:
        parts = ", ".join(f"{k} {v:.0f}" for k, v in list(r["ms_per_batch"].items())[:4])
        table.add_row(str(r["batch_rows"]), "yes" if r["with_cache_rows"] else "no", f"{r['judgment_rows_per_s']:,}",
                      f"{r['judgment_rows_per_cpu_s']:,}", f"{r['batch_ms_median']:.0f}",
                      f"{r['cpu_ms_per_batch_median']:.0f}", parts)
    console.print(table)
    if drive:
        console.print(
            f"judge stage at concurrency {drive['concurrency']} ({drive['latency_s'] * 1000:.0f} ms server): "
            f"{drive['judge_calls']} calls, {drive['achieved_rps']} of {drive['ideal_rps']} req/s; "
            f"{drive['writes']} writes (median {drive['write_ms_median']} ms, "
            f"{drive['judgment_rows_per_write']['median']} judgments), "
            f"{drive['write_share_of_stage']:.0%} of the stage writing; in flight during writes "
            f"{drive['in_flight_during_writes']}, between {drive['in_flight_between_writes']}; loop lag during writes "
            f"{drive['loop_lag_during_writes']}, between {drive['loop_lag_between_writes']}")
    console.print(f"→ {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
