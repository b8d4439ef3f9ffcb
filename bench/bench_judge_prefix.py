"""Judge prompt-cache benefit: shared-prefix call order vs the rubric placed first.

For N responses (the ground truths of the first N answerable queries of data/cataract, judged
with their kb_refs chunks), the four judge calls of each response run through the in-process
llama.cpp backend (real SmolLM2-135M) in two orders:

- ``shared_prefix``: the judge's own order — system, query, response, (chunks and ground truth
  for FC/SS), rubric last; calls of one response back to back, so llama.cpp re-evaluates only
  what follows the prefix it shares with the previous call;
- ``rubric_first``: the same calls with the rubric at the start of the user turn, so consecutive
  calls share little more than the system prompt.

No result cache (every call reaches llama.cpp), the KV cache is reset before each pass, and the
two orders are interleaved REPEATS times; medians and fastest passes are reported with the 1-minute load average,
because these 2-core machines are shared. Prompt and completion token totals are recorded: the
outputs differ a little between the orders, so completion tokens are shown to separate decoding
time from prompt processing.

Writes bench/results/judge_prefix.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.config import ModelConfig  # noqa: E402
from pipeline.dataset import load_dataset  # noqa: E402
from pipeline.models import Model, create_backend  # noqa: E402
from pipeline.steps.judge import judge_calls  # noqa: E402

MODEL = "llamacpp/smollm2-135m-instruct"
RESULTS = ROOT / "bench" / "results" / "judge_prefix.json"


def requests_for(n: int, rubric_first: bool, max_tokens: int):
    dataset = load_dataset(ROOT / "data" / "cataract")
    queries = [q for q in dataset.queries if q.kb_refs][:n]
    out = []
    for q in queries:
        chunks = [dataset.chunk(c) for c in q.kb_refs]
        raw = [c for c in chunks if c.kind == "raw"]
        updates = [c for c in chunks if c.kind == "update"]
        out += [c.request for c in judge_calls(q, q.gt_response, raw, updates, max_tokens=max_tokens,
                                               rubric_first=rubric_first)]
    return out


async def one_pass(model: Model, requests) -> dict:
    model.backend.shared.llama.reset()  # start from an empty KV cache
    started = time.perf_counter()
    done = await model.generate_many(requests)
    wall = time.perf_counter() - started
    errors = [c.error for c in done if not c.ok]
    if errors:
        raise RuntimeError(f"judge calls failed: {errors[0]}")
    return {"wall_s": wall, "prompt_tokens": sum(c.prompt_tokens for c in done),
            "completion_tokens": sum(c.completion_tokens for c in done)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--responses", type=int, default=4, help="N responses (4 judge calls each)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()

    model = Model(create_backend(ModelConfig(id=MODEL, max_tokens=args.max_tokens)), cache=None, concurrency=1)
    orders = {"shared_prefix": requests_for(args.responses, False, args.max_tokens),
              "rubric_first": requests_for(args.responses, True, args.max_tokens)}
    asyncio.run(one_pass(model, orders["shared_prefix"][:1]))  # load the weights outside the timing
    runs: dict[str, list[dict]] = {k: [] for k in orders}
    loads = []
    for _ in range(args.repeats):
        for name, requests in orders.items():
            loads.append(os.getloadavg()[0])
            runs[name].append(asyncio.run(one_pass(model, requests)))
    summary = {}
    for name, passes in runs.items():
        summary[name] = {
            "wall_s": statistics.median(p["wall_s"] for p in passes),
            "wall_s_min": min(p["wall_s"] for p in passes),
            "wall_s_each": [round(p["wall_s"], 2) for p in passes],
            "prompt_tokens": passes[0]["prompt_tokens"],
            "completion_tokens": statistics.median(p["completion_tokens"] for p in passes),
        }
    result = {
        "model": MODEL, "responses": args.responses, "calls": len(orders["shared_prefix"]),
        "repeats": args.repeats, "max_tokens": args.max_tokens, **summary,
        "speedup": summary["rubric_first"]["wall_s"] / summary["shared_prefix"]["wall_s"],
        "speedup_min": summary["rubric_first"]["wall_s_min"] / summary["shared_prefix"]["wall_s_min"],
        "load_avg_1m": {"min": min(loads), "max": max(loads)}, "cpus": os.cpu_count(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    table = Table(title=f"judge calls: {result['calls']} ({args.responses} responses × 4 metrics), "
                        f"median of {args.repeats}; load {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores")
    for col in ("order", "median s", "min s", "each pass s", "prompt tokens", "completion tokens"):
        table.add_column(col, justify="left" if col == "order" else "right")
    for name in orders:
        s = summary[name]
        each = ", ".join(map(str, s["wall_s_each"]))
        table.add_row(name, f"{s['wall_s']:.1f}", f"{s['wall_s_min']:.1f}", each, str(s["prompt_tokens"]),
                      f"{s['completion_tokens']:.0f}")
    Console().print(table)
    Console().print(f"speedup of the shared-prefix order: {result['speedup']:.2f}× (median), "
                    f"{result['speedup_min']:.2f}× (fastest pass) → {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
