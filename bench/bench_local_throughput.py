"""Local throughput: several sequences at once against one at a time, for the embedded models on 2 cores.

The same real generation prompts (data/cataract queries with their kb_refs chunks, messages from
pipeline.steps.generate.build_request; greedy, 64 completion tokens at most)
run four ways:

- ``one_at_a_time``: the pipeline's llamacpp backend, one call after another (what the pipeline does:
  ``LlamaCppBackend.max_concurrency = 1``), 2 threads;
- ``batched``: one llama.cpp context holding all K sequences (``n_seq_max = K``): each prompt is
  prefilled, then every step decodes one token of each unfinished sequence in a single
  ``llama_decode`` call (llama.cpp's batched decoding; llama-cpp-python's own server has no parallel
  slots — it serialises requests behind a lock), greedy argmax, 2 threads;
- ``two_instances``: two instances of 1 thread each, half of the prompts each, side by side in two
  threads (several sequences at once by splitting the cores);
- ``two_models``: SmolLM2 and Gemma-3-270M each answering the prompts, side by side (what the
  generate stage does: its in-process models run concurrently) against one after the other.

Reported per way: wall and CPU seconds, completion tokens, tokens/s (prompt + completion tokens
processed ÷ wall; the prompts are the same every way, the completions may differ a little), the
speedup over one at a time (its wall ÷ this way's, the same prompts), and how many texts equal the
one-at-a-time texts (greedy decoding in a batch, or with another thread count, may round
differently). REPEATS passes, alternating; medians and fastest passes with the
1-minute load average (2 shared cores). Writes bench/results/local_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the pipeline's backend does, before libgomp loads

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.config import ModelConfig  # noqa: E402
from pipeline.dataset import load_dataset  # noqa: E402
from pipeline.models.base import ChatRequest, GenerateParams  # noqa: E402
from pipeline.models.llamacpp import LlamaCppBackend, resolve_weights  # noqa: E402
from pipeline.steps.generate import build_request  # noqa: E402

SMOLLM = "llamacpp/smollm2-135m-instruct"
GEMMA = "llamacpp/gemma-3-270m"
RESULTS = ROOT / "bench" / "results" / "local_throughput.json"
MAX_TOKENS = 64  # as bench_local_model.py; the default config's generators allow 96


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def requests_for(n: int, max_tokens: int) -> list[ChatRequest]:
    dataset = load_dataset(ROOT / "data" / "cataract")
    out = []
    for q in [q for q in dataset.queries if q.kb_refs and q.language == "en"][:n]:
        chunks = [dataset.chunk(c) for c in q.kb_refs]
        out.append(build_request(q, [c for c in chunks if c.kind == "raw"], [c for c in chunks if c.kind == "update"],
                                 GenerateParams(max_tokens=max_tokens, temperature=0.0), dataset))
    return out


class Prompted:
    """One call through the pipeline's backend, with the prompt tokens llama.cpp was given."""

    def __init__(self, backend: LlamaCppBackend):
        self.backend = backend

    def __call__(self, request: ChatRequest) -> tuple[np.ndarray, str, int]:
        c = self.backend._complete_sync(request)
        llama = self.backend.shared.llama
        return llama.input_ids[: c.prompt_tokens].copy(), c.text, c.completion_tokens


def one_at_a_time(backend: LlamaCppBackend, requests) -> dict:
    backend.shared.llama.reset()
    call = Prompted(backend)
    started, cpu0, load0 = time.perf_counter(), cpu_s(), load1()
    outs = [call(r) for r in requests]
    return {"wall_s": time.perf_counter() - started, "cpu_s": cpu_s() - cpu0, "prompts": [o[0] for o in outs],
            "texts": [o[1] for o in outs], "completion_tokens": sum(o[2] for o in outs),
            "load_avg_1m": [load0, load1()]}


class Batched:
    """Greedy batched decoding of K sequences in one llama.cpp context (llama_batch with K seq ids)."""

    def __init__(self, llama, k: int, n_ctx_per_seq: int, n_threads: int, unified: bool = False):
        import llama_cpp

        self.C, self.llama, self.k = llama_cpp, llama, k
        params = type(llama.context_params).from_buffer_copy(llama.context_params)
        params.n_ctx, params.n_seq_max = n_ctx_per_seq * k, k
        params.n_threads = params.n_threads_batch = n_threads
        if hasattr(params, "kv_unified"):  # False: each sequence attends over its own KV stream only
            params.kv_unified = unified
        self.ctx = llama_cpp.llama_init_from_model(llama._model.model, params)
        if not self.ctx:
            raise RuntimeError("could not create a batched llama.cpp context")
        self.n_batch = int(params.n_batch)
        self.batch = llama_cpp.llama_batch_init(max(self.n_batch, k), 0, k)
        self.vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
        self.n_vocab = llama.n_vocab()

    def close(self) -> None:
        self.C.llama_batch_free(self.batch)
        self.C.llama_free(self.ctx)

    def _fill(self, items: list[tuple[int, int, int, bool]]) -> None:
        b = self.batch
        b.n_tokens = len(items)
        for i, (token, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, pos, 1
            b.seq_id[i][0] = seq
            b.logits[i] = logits

    def _decode(self) -> None:
        rc = self.C.llama_decode(self.ctx, self.batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def _argmax(self, i: int) -> int:
        logits = np.ctypeslib.as_array(self.C.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))
        return int(np.argmax(logits))

    def generate(self, prompts: list[np.ndarray], max_tokens: int) -> list[list[int]]:
        assert len(prompts) <= self.k
        self.C.llama_memory_clear(self.C.llama_get_memory(self.ctx), True)
        nxt, pos = [], []
        for seq, prompt in enumerate(prompts):  # prefill, n_batch tokens at a time
            for start in range(0, len(prompt), self.n_batch):
                part = prompt[start:start + self.n_batch]
                last = start + len(part) == len(prompt)
                self._fill([(int(t), start + j, seq, last and j == len(part) - 1) for j, t in enumerate(part)])
                self._decode()
            nxt.append(self._argmax(len(part) - 1))
            pos.append(len(prompt))
        out: list[list[int]] = [[] for _ in prompts]
        active = list(range(len(prompts)))
        while active:
            still = []
            for seq in active:
                token = nxt[seq]
                if self.C.llama_vocab_is_eog(self.vocab, token):
                    continue
                out[seq].append(token)
                if len(out[seq]) < max_tokens:
                    still.append(seq)
            active = still
            if not active:
                break
            self._fill([(nxt[seq], pos[seq], seq, True) for seq in active])
            self._decode()
            for i, seq in enumerate(active):
                pos[seq] += 1
                nxt[seq] = self._argmax(i)
        return out


def batched(engine: Batched, prompts: list[np.ndarray], max_tokens: int) -> dict:
    started, cpu0, load0 = time.perf_counter(), cpu_s(), load1()
    tokens = engine.generate(prompts, max_tokens)
    wall, cpu = time.perf_counter() - started, cpu_s() - cpu0
    texts = [engine.llama.detokenize(t, prev_tokens=list(map(int, p))).decode("utf-8", errors="ignore")
             for t, p in zip(tokens, prompts, strict=True)]
    return {"wall_s": wall, "cpu_s": cpu, "texts": texts, "completion_tokens": sum(map(len, tokens)),
            "load_avg_1m": [load0, load1()]}


def side_by_side(jobs: list) -> tuple[float, float, list]:
    """Run callables in threads at once (llama.cpp releases the GIL); (wall, cpu, results)."""
    results: list = [None] * len(jobs)

    def work(i):
        results[i] = jobs[i]()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    started, cpu0 = time.perf_counter(), cpu_s()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, cpu_s() - cpu0, results


def two_instances(llamas, requests) -> dict:
    def job(llama, part):
        def run():
            llama.reset()
            outs = []
            for r in part:
                o = llama.create_chat_completion(messages=[dict(m) for m in r.messages], max_tokens=r.params.max_tokens,
                                                 temperature=0.0, top_p=r.params.top_p, seed=r.params.seed)
                outs.append((o["choices"][0]["message"].get("content") or "", o["usage"]["completion_tokens"]))
            return outs
        return run

    parts = [requests[0::2], requests[1::2]]
    load0 = load1()
    wall, cpu, results = side_by_side([job(llamas[0], parts[0]), job(llamas[1], parts[1])])
    texts = [None] * len(requests)
    for offset, res in enumerate(results):
        for j, (text, _) in enumerate(res):
            texts[offset + 2 * j] = text
    return {"wall_s": wall, "cpu_s": cpu, "texts": texts, "completion_tokens": sum(n for r in results for _, n in r),
            "load_avg_1m": [load0, load1()]}


def two_models(backends: list[LlamaCppBackend], requests, concurrent: bool) -> dict:
    def job(backend):
        def run():
            backend.shared.llama.reset()
            return [backend._complete_sync(r) for r in requests]
        return run

    load0 = load1()
    if concurrent:
        wall, cpu, results = side_by_side([job(b) for b in backends])
    else:
        started, cpu0 = time.perf_counter(), cpu_s()
        results = [job(b)() for b in backends]
        wall, cpu = time.perf_counter() - started, cpu_s() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "texts": [c.text for res in results for c in res],
            "completion_tokens": sum(c.completion_tokens for res in results for c in res),
            "load_avg_1m": [load0, load1()]}


def main() -> int:
    from llama_cpp import Llama

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=4, help="K prompts (sequences at once)")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-gemma", action="store_true")
    args = parser.parse_args()

    requests = requests_for(args.prompts, args.max_tokens)
    smollm = LlamaCppBackend(ModelConfig(id=SMOLLM))
    path, _ = resolve_weights(smollm.config)
    singles = [Llama(model_path=str(path), n_ctx=smollm.config.n_ctx, n_threads=1, verbose=False, seed=0,
                     flash_attn=True) for _ in range(2)]
    engine = Batched(smollm.shared.llama, args.prompts, smollm.config.n_ctx, os.cpu_count() or 2)
    gemma = None if args.skip_gemma else LlamaCppBackend(ModelConfig(id=GEMMA))
    if gemma is not None:
        _ = gemma.shared

    warm = one_at_a_time(smollm, requests[:1])  # load and warm outside the timing
    del warm
    runs: dict[str, list[dict]] = {"one_at_a_time": [], "batched": [], "two_instances": []}
    if gemma is not None:
        runs.update({"two_models_one_after_the_other": [], "two_models_side_by_side": []})
    reference = None
    for rep in range(args.repeats):
        seq = one_at_a_time(smollm, requests)
        reference = reference or seq
        runs["one_at_a_time"].append(seq)
        order = ["batched", "two_instances"] if rep % 2 == 0 else ["two_instances", "batched"]
        for name in order:
            runs[name].append(batched(engine, seq["prompts"], args.max_tokens) if name == "batched"
                              else two_instances(singles, requests))
        if gemma is not None:
            pair = [smollm, gemma]
            flags = (False, True) if rep % 2 == 0 else (True, False)
            for concurrent in flags:
                name = "two_models_side_by_side" if concurrent else "two_models_one_after_the_other"
                runs[name].append(two_models(pair, requests, concurrent))
    engine.close()

    ref_texts = reference["texts"]
    prompt_tokens = int(sum(len(p) for p in reference["prompts"]))
    summary = {}
    for name, passes in runs.items():
        fastest = min(passes, key=lambda p: p["wall_s"])
        if name.startswith("two_models"):
            ref = runs["two_models_one_after_the_other"][0]["texts"]
        else:
            ref = ref_texts
        same = sum(a == b for a, b in zip(passes[0]["texts"], ref, strict=True))
        summary[name] = {
            "wall_s": round(statistics.median(p["wall_s"] for p in passes), 2),
            "wall_s_min": round(fastest["wall_s"], 2),
            "cpu_s": round(statistics.median(p["cpu_s"] for p in passes), 2),
            "completion_tokens": passes[0]["completion_tokens"],
            # two_models: two tokenizers, so tokens/s is not shown; their speedup compares wall times
            "tokens_per_s": None if name.startswith("two_models") else round(
                (prompt_tokens + passes[0]["completion_tokens"]) / statistics.median(p["wall_s"] for p in passes), 1),
            "identical_texts": f"{same}/{len(ref)}", "load_avg_1m_each": [p["load_avg_1m"] for p in passes],
        }
    base = summary["one_at_a_time"]
    for name, s in summary.items():
        other = summary["two_models_one_after_the_other"] if name.startswith("two_models") else base
        s["speedup_vs_one_at_a_time"] = round(other["wall_s"] / s["wall_s"], 3)
        s["speedup_fastest"] = round(other["wall_s_min"] / s["wall_s_min"], 3)
    loads = [x for passes in runs.values() for p in passes for x in p["load_avg_1m"]]
    result = {
        "model": SMOLLM, "prompts": len(requests), "max_tokens": args.max_tokens, "repeats": args.repeats,
        "prompt_tokens": prompt_tokens, "ways": summary,
        "load_avg_1m": {"min": min(loads), "max": max(loads)}, "cpus": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    table = Table(title=f"{len(requests)} RAG prompts ({result['prompt_tokens']} prompt tokens), max_tokens "
                        f"{args.max_tokens}, median of {args.repeats}; load {min(loads):.1f}–{max(loads):.1f} on "
                        f"{os.cpu_count()} cores")
    for col in ("way", "wall s (min)", "cpu s", "completion tok", "tok/s", "speedup (fastest)", "same texts"):
        table.add_column(col, justify="left" if col == "way" else "right")
    for name, s in summary.items():
        table.add_row(name, f"{s['wall_s']:.1f} ({s['wall_s_min']:.1f})", f"{s['cpu_s']:.1f}",
                      str(s["completion_tokens"]), f"{s['tokens_per_s']:.1f}" if s["tokens_per_s"] else "-",
                      f"{s['speedup_vs_one_at_a_time']:.2f} ({s['speedup_fastest']:.2f})", s["identical_texts"])
    Console().print(table)
    Console().print("two_models rows compare with two_models_one_after_the_other (SmolLM2 then Gemma)")
    Console().print(f"→ {RESULTS.relative_to(ROOT)}")
    for llama in singles:
        llama.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
