"""The local judge at its prefill limit: prompt tokens evaluated ÷ minimal, and the shared-prefix order's wall time.

The embedded judge (SmolLM2-135M in process, llama-cpp-python) keeps one KV cache per weights file
and reuses the longest token prefix a call shares with the previous call on that instance. So the
prompt tokens a call *must* evaluate are its tokens not shared with the previous call (the
**minimal** count, computed here from the token sequences); what llama.cpp actually evaluated is
``Completion.evaluated_prompt_tokens`` (pipeline/models/llamacpp.py). Three parts:

1. **Orders.** For N responses (the ground truths of the first N answerable data/cataract queries,
   judged with their kb_refs chunks), the four judge calls of each response run in two orders:
   ``shared_prefix`` — the judge's own prompts (system, query, response, chunks, ground truth,
   rubric last; a response's calls back to back) — and ``rubric_first`` — the same calls with the
   rubric at the start of the user turn (so consecutive calls share little more than the system
   prompt). KV cache reset before every pass, no result cache, passes interleaved REPEATS times,
   order flipping. Per pass: wall, CPU, llama.cpp's own prefill and decode seconds (its perf
   counters), tokens evaluated and minimal. Each order runs twice more with llama-cpp-python's stock
   sampler chain (the JSON grammar over the whole vocabulary at every step) instead of the backend's
   ``GreedyGrammarSampler`` (the argmax checked first): the texts must be the same (asserted), and
   ``rubric_first_stock_sampler`` is the judge as it was before both changes.
2. **The judge step itself.** The same N responses stored as a model's responses in a scratch
   DuckDB and judged by ``pipeline.runner.run`` (stage ``judge``): its stored raw outputs must equal
   the ``shared_prefix`` pass's texts (asserted), and its evaluated ÷ minimal is reported.
3. **Every LLM stage of the default run.** ``configs/default.yaml``'s models and roles on its
   first ``--stage-queries`` queries (retrievals taken from kb_refs, so no embedding model loads;
   completions capped at ``--stage-max-tokens``, which changes no prompt; Med-CoDE with the
   zero-shot ``logprobs`` classifier, the variant that calls the LLM): evaluated ÷ minimal per
   stage and model instance (generation, judge, Med-CoDE critic and classifier, sanity set).

Every figure carries the 1-minute load average (2 shared cores). Writes bench/results/judge_prefix.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import hashlib
import io
import itertools
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the pipeline's backend does, before libgomp loads

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.catalog import catalog  # noqa: E402
from pipeline.config import ModelConfig, RunConfig  # noqa: E402
from pipeline.dataset import load_dataset  # noqa: E402
from pipeline.models import Model, create_backend, llamacpp  # noqa: E402
from pipeline.steps import context as step_context  # noqa: E402
from pipeline.steps.judge import judge_calls  # noqa: E402
from pipeline.store import Store  # noqa: E402
from pipeline.store.rows import ResponseRow, RetrievalRow  # noqa: E402

MODEL = "llamacpp/smollm2-135m-instruct"
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
RESULTS = ROOT / "bench" / "results" / "judge_prefix.json"
BENCH_MODEL = "extractive/top-sentences"  # the model id the stored ground-truth "responses" are filed under
TARGET_RATIO, TARGET_SPEEDUP = 1.2, 2.0


# -- recording what each call evaluated --------------------------------------------------------------
@dataclass
class Call:
    instance: str  # weights file of the llama.cpp instance
    stage: str
    seq: int  # order of calls across instances
    prompt: np.ndarray  # the call's prompt tokens
    kv_after: np.ndarray  # what the instance's KV cache held after the call (prompt + generated)
    evaluated: int | None
    completion_tokens: int
    text: str


class Recorder:
    """Wraps the llamacpp backend so that every call's prompt tokens and KV state are recorded (inside the
    instance's lock, so calls of two threads on one instance cannot be misordered)."""

    stage: contextvars.ContextVar[str] = contextvars.ContextVar("stage", default="-")

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._seq = itertools.count()
        self._local = threading.local()
        recorder = self
        complete_sync = llamacpp.LlamaCppBackend._complete_sync

        def recorded(backend, request):
            recorder._instrument(backend.shared)
            completion = complete_sync(backend, request)
            seq, prompt, kv = recorder._local.last
            recorder.calls.append(Call(str(backend.path), recorder.stage.get(), seq, prompt, kv,
                                       completion.evaluated_prompt_tokens, completion.completion_tokens,
                                       completion.text))
            return completion

        llamacpp.LlamaCppBackend._complete_sync = recorded
        drive = step_context.RunContext.drive

        async def staged(ctx, stage, *args, **kwargs):
            token = recorder.stage.set(stage)
            try:
                return await drive(ctx, stage, *args, **kwargs)
            finally:
                recorder.stage.reset(token)

        step_context.RunContext.drive = staged

    def _instrument(self, shared) -> None:
        llama = shared.llama
        if getattr(llama, "_bench_recorded", False):
            return
        original = llama.create_chat_completion

        def create_chat_completion(**kwargs):
            out = original(**kwargs)
            n = out["usage"]["prompt_tokens"]
            self._local.last = (next(self._seq), llama.input_ids[:n].copy(), llama.input_ids[:llama.n_tokens].copy())
            return out

        llama.create_chat_completion = create_chat_completion
        llama._bench_recorded = True

    def take(self) -> list[Call]:
        calls, self.calls = sorted(self.calls, key=lambda c: c.seq), []
        return calls


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def token_counts(calls: list[Call]) -> dict:
    """Prompt, evaluated and minimal tokens of calls on instances whose KV cache was empty before the first.

    Minimal = a call's prompt tokens not shared with what the previous call on the same instance left
    in the KV cache (its prompt and generated tokens).
    """
    before: dict[str, np.ndarray] = {}
    prompt = evaluated = minimal = 0
    for c in calls:
        prev = before.get(c.instance)
        minimal += len(c.prompt) - (common_prefix(prev, c.prompt) if prev is not None else 0)
        prompt += len(c.prompt)
        evaluated += c.evaluated or 0
        before[c.instance] = c.kv_after
    return {"calls": len(calls), "prompt_tokens": prompt, "evaluated_tokens": evaluated, "minimal_tokens": minimal,
            "evaluated_over_minimal": round(evaluated / minimal, 4) if minimal else None}


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- part 1: the two orders ---------------------------------------------------------------------------
def chosen_queries(dataset, n: int):
    """The first n answerable queries, in the order the judge step takes them (query_id)."""
    return sorted([q for q in dataset.queries if q.kb_refs][:n], key=lambda q: q.query_id)


def split_refs(dataset, q):
    chunks = [dataset.chunk(c) for c in q.kb_refs]
    return [c for c in chunks if c.kind == "raw"], [c for c in chunks if c.kind == "update"]


def order_requests(dataset, queries, rubric_first: bool, max_tokens: int):
    out = []
    for q in queries:
        out += [c.request for c in judge_calls(q, q.gt_response, *split_refs(dataset, q), max_tokens=max_tokens,
                                               rubric_first=rubric_first)]
    return out


@contextlib.contextmanager
def sampler(llama, stock: bool):
    """``stock``: llama-cpp-python's own sampler chain (grammar over the whole vocabulary at every step)
    instead of the backend's GreedyGrammarSampler."""
    if not stock:
        yield
        return
    from llama_cpp import Llama

    cls = type(llama)
    checked = cls.__dict__["_init_sampler"]
    cls._init_sampler = Llama._init_sampler
    try:
        yield
    finally:
        cls._init_sampler = checked


def one_pass(model: Model, requests, recorder: Recorder, stock: bool = False) -> dict:
    import llama_cpp

    llama = model.backend.shared.llama
    llama.reset()  # start from an empty KV cache
    llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
    load_before, cpu0, started = load1(), cpu_s(), time.perf_counter()
    with sampler(llama, stock):
        done = asyncio.run(model.generate_many(requests))
    wall, cpu = time.perf_counter() - started, cpu_s() - cpu0
    perf = llama_cpp.llama_perf_context(llama._ctx.ctx)
    errors = [c.error for c in done if not c.ok]
    if errors:
        raise RuntimeError(f"judge calls failed: {errors[0]}")
    calls = recorder.take()
    prefill, decode = perf.t_p_eval_ms / 1000, perf.t_eval_ms / 1000
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "prefill_s": round(prefill, 3),
            "decode_s": round(decode, 3), "other_s": round(wall - prefill - decode, 3),
            **token_counts(calls), "completion_tokens": sum(c.completion_tokens for c in done),
            "texts": [c.text for c in done], "load_avg_1m": [load_before, load1()]}


# -- part 2 and 3: real runs into a scratch DuckDB ----------------------------------------------------
def stage_config(db: Path, *, limit: int, max_tokens: int | None, judge_only: bool, judge_max_tokens: int) -> RunConfig:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    raw.update(db=str(db), limit=limit, per_language=None)
    if judge_only:
        raw.update(models=[{"id": BENCH_MODEL}], medcode=None, translator=None)
        raw["judge"] = {**raw["judge"], "max_tokens": judge_max_tokens}
        return catalog().config(raw)
    raw["models"] = [m for m in raw["models"] if not str(m.get("id", "")).startswith("openai/")]
    if max_tokens:
        cap = lambda section: {**section, "max_tokens": min(section.get("max_tokens", max_tokens), max_tokens)}  # noqa: E731
        raw["models"] = [cap(m) for m in raw["models"]]
        raw["judge"] = cap(raw["judge"])
        for role in ("translator",):
            if isinstance(raw.get(role), dict):
                raw[role] = cap(raw[role])
        if isinstance(raw.get("medcode", {}).get("critic"), dict):
            raw["medcode"] = {**raw["medcode"], "critic": cap(raw["medcode"]["critic"])}
    raw["judge"] = {**raw["judge"], "sanity_items": 1}
    # the zero-shot classifier is the Med-CoDE path that calls the LLM (a trained checkpoint would not)
    raw["medcode"] = {**raw["medcode"], "classifier": "logprobs"}
    return catalog().config(raw)


def store_retrievals(store: Store, dataset, queries) -> None:
    rows = []
    for q in queries:
        raw, upd = split_refs(dataset, q)
        rows.append(RetrievalRow(dataset=dataset.name, query_id=q.query_id, search_text=q.query,
                                 raw_ids=[c.chunk_id for c in raw], update_ids=[c.chunk_id for c in upd],
                                 recall=None, settings="bench: kb_refs"))
    store.write(rows)


def reset_llama_instances() -> None:
    for shared in list(llamacpp._LOADED.values()):
        shared.llama.reset()


def judge_step_pass(dataset, queries, max_tokens: int, recorder: Recorder) -> dict:
    """The judge step (pipeline.runner.run, stage judge) on the same responses; its stored raw outputs."""
    from rich.console import Console as RichConsole

    from pipeline.runner import run, select_queries

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "judge.duckdb"
        selected_ids = {q.query_id for q in queries}
        order = [q.query_id for q in dataset.queries]
        limit = max(order.index(qid) for qid in selected_ids) + 1
        config = stage_config(db, limit=limit, max_tokens=None, judge_only=True, judge_max_tokens=max_tokens)
        assert selected_ids <= {q.query_id for q in select_queries(dataset, config)}
        store = Store(db)
        store_retrievals(store, dataset, queries)
        store.write([ResponseRow(dataset=dataset.name, query_id=q.query_id, model_id=BENCH_MODEL, run_id=None,
                                 prompt_hash="bench", text=q.gt_response, error=None) for q in queries])
        reset_llama_instances()
        load_before, started = load1(), time.perf_counter()
        run(config, stages="judge", console=RichConsole(file=io.StringIO()))
        wall = time.perf_counter() - started
        rows = store.fetch("SELECT query_id, metric, raw_output FROM judgments")
    calls = recorder.take()
    return {"wall_s": round(wall, 3), **token_counts(calls), "outputs": {(q, m): t for q, m, t in rows},
            "load_avg_1m": [load_before, load1()]}


def stages_pass(dataset, n_queries: int, max_tokens: int, recorder: Recorder) -> dict:
    """Every LLM stage of the default config on its first n queries; evaluated ÷ minimal per stage."""
    from rich.console import Console as RichConsole

    from pipeline.runner import run, select_queries

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "stages.duckdb"
        config = stage_config(db, limit=n_queries, max_tokens=max_tokens, judge_only=False, judge_max_tokens=0)
        queries = select_queries(dataset, config)
        store = Store(db)
        store_retrievals(store, dataset, queries)
        reset_llama_instances()
        stages = "translate,generate,translate-responses,judge,medcode,sanity"
        load_before, started = load1(), time.perf_counter()
        run(config, stages=stages, console=RichConsole(file=io.StringIO()))
        wall = time.perf_counter() - started
    calls = recorder.take()
    loaded_before = {c.instance for c in calls}
    per_stage = {}
    # minimal counts follow the call sequence of each instance across stages; summed per stage
    before: dict[str, np.ndarray] = {}
    for c in calls:
        prev = before.get(c.instance)
        minimal = len(c.prompt) - (common_prefix(prev, c.prompt) if prev is not None else 0)
        before[c.instance] = c.kv_after
        key = f"{c.stage} @ {Path(c.instance).name}"
        s = per_stage.setdefault(key, {"calls": 0, "prompt_tokens": 0, "evaluated_tokens": 0, "minimal_tokens": 0})
        s["calls"] += 1
        s["prompt_tokens"] += len(c.prompt)
        s["evaluated_tokens"] += c.evaluated or 0
        s["minimal_tokens"] += minimal
    for s in per_stage.values():
        s["evaluated_over_minimal"] = round(s["evaluated_tokens"] / s["minimal_tokens"], 4) \
            if s["minimal_tokens"] else None
    return {"queries": len(queries), "max_tokens_cap": max_tokens, "wall_s": round(wall, 2),
            "instances": sorted(Path(i).name for i in loaded_before), "stages": per_stage,
            "total": token_counts(calls), "load_avg_1m": [load_before, load1()]}


# -- main ----------------------------------------------------------------------------------------------
def summarise(passes: list[dict]) -> dict:
    med = {k: statistics.median(p[k] for p in passes) for k in ("wall_s", "cpu_s", "prefill_s", "decode_s", "other_s")}
    fastest = min(passes, key=lambda p: p["wall_s"])
    return {**{k: round(v, 3) for k, v in med.items()}, "wall_s_min": fastest["wall_s"],
            "wall_s_each": [p["wall_s"] for p in passes],
            **{k: passes[0][k] for k in ("calls", "prompt_tokens", "evaluated_tokens", "minimal_tokens",
                                         "evaluated_over_minimal")},
            "completion_tokens": passes[0]["completion_tokens"],
            "fastest_pass": {k: fastest[k] for k in ("wall_s", "prefill_s", "decode_s", "other_s", "cpu_s")},
            "load_avg_1m_each": [p["load_avg_1m"] for p in passes]}


def main() -> int:
    default_judge_tokens = yaml.safe_load(DEFAULT_CONFIG.read_text())["judge"].get("max_tokens", 64)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--responses", type=int, default=2, help="N responses (4 judge calls each)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=default_judge_tokens,
                        help="judge max_tokens (default: configs/default.yaml's)")
    parser.add_argument("--stage-queries", type=int, default=1,
                        help="queries of the default run's stages (part 3; 0 skips it)")
    parser.add_argument("--stage-max-tokens", type=int, default=8, help="completion cap in part 3")
    args = parser.parse_args()

    recorder = Recorder()
    dataset = load_dataset(ROOT / "data" / "cataract")
    queries = chosen_queries(dataset, args.responses)
    model = Model(create_backend(ModelConfig(id=MODEL)), cache=None, concurrency=1)  # the judge step's instance too
    shared, first = (order_requests(dataset, queries, r, args.max_tokens) for r in (False, True))
    # name → (requests, llama-cpp-python's stock sampler chain?)
    orders = {"shared_prefix": (shared, False), "rubric_first": (first, False),
              "shared_prefix_stock_sampler": (shared, True), "rubric_first_stock_sampler": (first, True)}
    one_pass(model, shared[:1], recorder)  # load the weights outside the timing
    runs: dict[str, list[dict]] = {k: [] for k in orders}
    for rep in range(args.repeats):
        names = list(orders) if rep % 2 == 0 else list(reversed(orders))
        for name in names:
            requests, stock = orders[name]
            runs[name].append(one_pass(model, requests, recorder, stock=stock))
    for name, passes in runs.items():
        texts = {json.dumps(p["texts"]) for p in passes}
        assert len(texts) == 1, f"{name}: texts differ between passes at temperature 0"
    for order in ("shared_prefix", "rubric_first"):
        assert runs[order][0]["texts"] == runs[f"{order}_stock_sampler"][0]["texts"], \
            f"{order}: the checked sampler's texts differ from the stock sampler chain's"

    judge_step = judge_step_pass(dataset, queries, args.max_tokens, recorder)
    shared_texts = runs["shared_prefix"][0]["texts"]
    calls = [(q.query_id, c.metric) for q in queries
             for c in judge_calls(q, q.gt_response, *split_refs(dataset, q), max_tokens=args.max_tokens)]
    step_texts = [judge_step["outputs"].get(k) for k in calls]
    identical = step_texts == shared_texts
    assert identical, "the shared-prefix order's outputs differ from what the judge step stored"

    stages = stages_pass(dataset, args.stage_queries, args.stage_max_tokens, recorder) if args.stage_queries else None

    summary = {name: summarise(passes) for name, passes in runs.items()}
    s, r = summary["shared_prefix"], summary["rubric_first"]
    ss, rs = summary["shared_prefix_stock_sampler"], summary["rubric_first_stock_sampler"]
    loads = [x for p in itertools.chain(*runs.values()) for x in p["load_avg_1m"]] + judge_step["load_avg_1m"]
    ratios = [s["evaluated_over_minimal"], r["evaluated_over_minimal"], judge_step["evaluated_over_minimal"],
              *((st["evaluated_over_minimal"] for st in stages["stages"].values()) if stages else [])]
    ratios = [v for v in ratios if v is not None]
    result = {
        "model": MODEL, "gguf": llamacpp.resolve_weights(model.backend.config)[0].name,
        "responses": len(queries), "calls_per_pass": s["calls"], "repeats": args.repeats, "max_tokens": args.max_tokens,
        **summary,
        "speedup_wall_median": round(r["wall_s"] / s["wall_s"], 3),
        "speedup_over_stock_rubric_first_median": round(rs["wall_s"] / s["wall_s"], 3),
        "speedup_over_stock_rubric_first_fastest": round(rs["wall_s_min"] / s["wall_s_min"], 3),
        "sampler_speedup_shared_prefix_median": round(ss["wall_s"] / s["wall_s"], 3),
        "sampler_decode_speedup_median": round(ss["decode_s"] / s["decode_s"], 3),
        "sampler_texts_identical": True,
        "speedup_wall_fastest": round(r["wall_s_min"] / s["wall_s_min"], 3),
        "speedup_cpu_median": round(r["cpu_s"] / s["cpu_s"], 3),
        "speedup_prefill_median": round(r["prefill_s"] / s["prefill_s"], 3),
        "evaluated_tokens_ratio": round(r["evaluated_tokens"] / s["evaluated_tokens"], 3),
        "speedup_bound_if_decode_free": round((r["prefill_s"] + r["other_s"]) / (s["prefill_s"] + s["other_s"]), 3),
        "judge_step": {k: v for k, v in judge_step.items() if k != "outputs"},
        "judge_step_texts_identical": identical,
        "texts_sha256": hashlib.sha256(json.dumps(shared_texts).encode()).hexdigest()[:16],
        "pipeline_stages": stages,
        "max_evaluated_over_minimal": max(ratios),
        "target": {"evaluated_over_minimal": TARGET_RATIO, "speedup": TARGET_SPEEDUP},
        "load_avg_1m": {"min": min(loads), "max": max(loads)}, "cpus": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "n_threads": model.backend.shared.llama.n_threads if hasattr(model.backend.shared.llama, "n_threads") else None,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    console = Console()
    table = Table(title=f"judge calls: {s['calls']} per pass ({len(queries)} responses × 4 metrics), median of "
                        f"{args.repeats}; load {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores")
    for col in ("order", "wall s (min)", "prefill s", "decode s", "other s", "cpu s", "prompt tok", "evaluated",
                "minimal", "eval ÷ min", "completion tok"):
        table.add_column(col, justify="left" if col == "order" else "right")
    for name, x in summary.items():
        table.add_row(name, f"{x['wall_s']:.1f} ({x['wall_s_min']:.1f})", f"{x['prefill_s']:.1f}",
                      f"{x['decode_s']:.1f}", f"{x['other_s']:.1f}", f"{x['cpu_s']:.1f}", str(x["prompt_tokens"]),
                      str(x["evaluated_tokens"]), str(x["minimal_tokens"]), f"{x['evaluated_over_minimal']:.3f}",
                      str(x["completion_tokens"]))
    js = judge_step
    table.add_row("judge step (runner)", f"{js['wall_s']:.1f}", "", "", "", "", str(js["prompt_tokens"]),
                  str(js["evaluated_tokens"]), str(js["minimal_tokens"]), f"{js['evaluated_over_minimal']:.3f}", "")
    console.print(table)
    console.print(f"shared-prefix speedup: wall {result['speedup_wall_median']:.2f}× median, "
                  f"{result['speedup_wall_fastest']:.2f}× fastest; prefill {result['speedup_prefill_median']:.2f}×; "
                  f"evaluated tokens {result['evaluated_tokens_ratio']:.2f}×; bound if decoding were free "
                  f"{result['speedup_bound_if_decode_free']:.2f}×; judge step texts identical: {identical}")
    console.print(f"argmax-checked grammar sampler: decode {result['sampler_decode_speedup_median']:.2f}×, "
                  f"wall {result['sampler_speedup_shared_prefix_median']:.2f}× (same texts); shared prefix + "
                  "checked sampler over rubric first + stock chain: "
                  f"{result['speedup_over_stock_rubric_first_median']:.2f}× median, "
                  f"{result['speedup_over_stock_rubric_first_fastest']:.2f}× fastest")
    if stages:
        st = Table(title=f"default run's LLM stages on {stages['queries']} query(ies), completions capped at "
                         f"{stages['max_tokens_cap']} tokens; {stages['wall_s']:.0f} s, load "
                         f"{stages['load_avg_1m'][0]:.1f}–{stages['load_avg_1m'][1]:.1f}")
        for col in ("stage @ instance", "calls", "prompt tok", "evaluated", "minimal", "eval ÷ min"):
            st.add_column(col, justify="left" if col.startswith("stage") else "right")
        for key, v in stages["stages"].items():
            ratio = v["evaluated_over_minimal"]
            st.add_row(key, str(v["calls"]), str(v["prompt_tokens"]), str(v["evaluated_tokens"]),
                       str(v["minimal_tokens"]), f"{ratio:.3f}" if ratio else "-")
        console.print(st)
    console.print(f"→ {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
