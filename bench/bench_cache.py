"""Cache: a rerun of a finished config makes no calls; a replay from llm_cache makes none either.

Three real runs of one config (stage `generate`, an `openai-compatible` model at the fixture
server, 200 ms per request) into one DuckDB file:

1. first run: every query is a call;
2. rerun of the finished config: every item is already done (same prompt hash), so nothing is
   sent — asserted by the server's request counter and by runs.backend_calls;
3. cache replay: the responses are deleted and the config runs again; every request is answered
   from llm_cache (cache_hits = N, still 0 calls) with the same texts.

Reports each wall time ÷ the first run's. Writes bench/results/cache.json.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.catalog import load_config  # noqa: E402
from pipeline.runner import run  # noqa: E402
from pipeline.store import Store, open_connection  # noqa: E402
from tests.support.datasets import write_closed_book, write_config  # noqa: E402
from tests.support.openai_fixture import FixtureServer  # noqa: E402

N_QUERIES = 200
LATENCY_S = 0.2
CONCURRENCY = 16
RESULTS = ROOT / "bench" / "results" / "cache.json"


def timed_run(config, server: FixtureServer) -> dict:
    """One run: wall time, the server's request count during it and the run's stored counters."""
    before = server.stats()["requests"]
    started = time.perf_counter()
    run_id = run(config, stages="generate", console=Console(file=io.StringIO()))
    wall = time.perf_counter() - started
    with open_connection(config.db, read_only=True) as con:
        calls, hits, errors = con.execute(
            "SELECT backend_calls, cache_hits, errors FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return {"wall_s": round(wall, 3), "server_requests": server.stats()["requests"] - before,
            "backend_calls": calls, "cache_hits": hits, "errors": errors}


def texts(db: str) -> dict[str, str]:
    with open_connection(db, read_only=True) as con:
        return dict(con.execute("SELECT query_id, text FROM responses").fetchall())


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp, FixtureServer(latency_s=LATENCY_S) as server:
        tmp_path = Path(tmp)
        dataset = write_closed_book(tmp_path / "qa", N_QUERIES)
        config = load_config(write_config(
            tmp_path / "cache.yaml", dataset=dataset, db=tmp_path / "results.duckdb", concurrency=CONCURRENCY,
            models=[{"id": "openai-compatible/fixture", "base_url": server.base_url}]))
        first = timed_run(config, server)
        assert first["server_requests"] == first["backend_calls"] == N_QUERIES and not first["errors"], first
        answers = texts(config.db)

        rerun = timed_run(config, server)
        assert rerun["server_requests"] == 0 and rerun["backend_calls"] == 0, rerun

        Store(config.db).delete_where("responses", "dataset = ?", [dataset.name])
        replay = timed_run(config, server)
        assert replay["server_requests"] == 0 and replay["backend_calls"] == 0, replay
        assert replay["cache_hits"] == N_QUERIES, replay
        assert texts(config.db) == answers

    result = {
        "queries": N_QUERIES, "latency_s": LATENCY_S, "concurrency": CONCURRENCY,
        "first_run": first, "rerun": rerun, "cache_replay": replay,
        "rerun_ratio": round(rerun["wall_s"] / first["wall_s"], 4),
        "cache_replay_ratio": round(replay["wall_s"] / first["wall_s"], 4),
        "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    table = Table(title=f"cache: {N_QUERIES} queries, {LATENCY_S * 1000:.0f} ms fixture server, "
                        f"concurrency {CONCURRENCY}")
    for col in ("run", "wall s", "÷ first", "server requests", "runs.backend_calls", "cache hits"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for name, r in (("first run", first), ("rerun (finished config)", rerun), ("replay from llm_cache", replay)):
        table.add_row(name, f"{r['wall_s']:.2f}", f"{r['wall_s'] / first['wall_s']:.3f}", str(r["server_requests"]),
                      str(r["backend_calls"]), str(r["cache_hits"]))
    Console(width=160).print(table)
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
