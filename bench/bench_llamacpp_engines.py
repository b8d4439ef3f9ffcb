"""The two engines of ``llamacpp/`` models: llama.cpp's prebuilt wheel (xllamacpp) against llama-cpp-python (built
from source), and optionally transformers' GGUF loader (``--transformers``), on the same prompts.

The prompts are the pipeline's own generation prompts (``pipeline.steps.generate.build_request``) for the first
``--prompts`` queries of the closed-book eye-care set (no retrieval needed), the GGUF files the embedded models
ship, greedy decoding, ``--max-tokens`` tokens. Every prompt runs on each engine back to back, the order turning each
time, so that load from other processes falls on all alike. Per engine and model: the load time (first call's
extra), tokens/s (completion tokens ÷ wall time, prompt processing included), and whether the prompt tokens are the
same as llama-cpp-python's (the same prompt sent). The 1-minute load average is recorded before and after.
Writes bench/results/llamacpp_engines.json.

Install times are not measured here (pip's cache decides them): docs/make-run.md has them.
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
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.config import ModelConfig  # noqa: E402
from pipeline.dataset import load_dataset  # noqa: E402
from pipeline.models import llamacpp  # noqa: E402
from pipeline.models.base import ChatRequest, Completion, GenerateParams  # noqa: E402
from pipeline.models.llamacpp_prebuilt import render_gemma  # noqa: E402
from pipeline.steps.generate import build_request  # noqa: E402

MODELS = ("llamacpp/smollm2-135m-instruct", "llamacpp/gemma-3-270m")


class TransformersGGUF:
    """transformers' GGUF loader (weights dequantized to float32 on the CPU torch), the GGUF's chat template (Gemma:
    llama-cpp-python's format, its GGUF has none)."""

    engine = "transformers-gguf"

    def __init__(self, config: ModelConfig):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path, self.chat_format = llamacpp.resolve_weights(config)
        self.tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        self.model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        self.torch = torch

    async def complete(self, request: ChatRequest) -> Completion:
        messages = llamacpp.as_sent(request.messages, self.chat_format)
        if self.chat_format == "gemma":  # the base model's GGUF has no chat template: llama-cpp-python's format
            ids = self.tokenizer(render_gemma(messages), return_tensors="pt")
        else:
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                     return_dict=True)
        with self.torch.inference_mode():
            out = self.model.generate(**ids, max_new_tokens=request.params.max_tokens, do_sample=False)
        n_prompt = ids["input_ids"].shape[1]
        return Completion(text=self.tokenizer.decode(out[0][n_prompt:], skip_special_tokens=True),
                          prompt_tokens=n_prompt, completion_tokens=out.shape[1] - n_prompt)


def backend(engine: str, model_id: str):
    config = ModelConfig(id=model_id)
    if engine == TransformersGGUF.engine:
        return TransformersGGUF(config)
    os.environ[llamacpp.ENGINE_ENV] = engine
    created = llamacpp.create(config)
    created.shared  # noqa: B018 - loads the model now (it is loaded on the first call otherwise)
    return created


def prompts(n: int, max_tokens: int) -> list[ChatRequest]:
    dataset = load_dataset(ROOT / "data" / "eyecare-qa")
    return [build_request(q, [], [], GenerateParams(max_tokens=max_tokens), dataset) for q in dataset.queries[:n]]


def load_1m() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--transformers", action="store_true", help="also transformers' GGUF loader (slow to load)")
    args = parser.parse_args()
    engines = ["xllamacpp", llamacpp.LLAMA_CPP_PYTHON] + ([TransformersGGUF.engine] if args.transformers else [])
    requests = prompts(args.prompts, args.max_tokens)
    results, before = [], load_1m()
    for model_id in MODELS:
        loaded, stats = {}, {e: {"wall": [], "tokens": [], "prompt_tokens": []} for e in engines}
        for i, request in enumerate(requests):
            order = engines[i % len(engines):] + engines[: i % len(engines)]
            for engine in order:
                start = time.perf_counter()
                if engine not in loaded:
                    loaded[engine] = backend(engine, model_id)
                    stats[engine]["load_s"] = time.perf_counter() - start
                    start = time.perf_counter()
                completion = asyncio.run(loaded[engine].complete(request))
                stats[engine]["wall"].append(time.perf_counter() - start)
                stats[engine]["tokens"].append(completion.completion_tokens)
                stats[engine]["prompt_tokens"].append(completion.prompt_tokens)
        reference = stats[llamacpp.LLAMA_CPP_PYTHON]["prompt_tokens"]
        for engine, s in stats.items():
            results.append({"model": model_id, "engine": engine, "load_s": round(s["load_s"], 2),
                            "tokens_per_s": round(sum(s["tokens"]) / sum(s["wall"]), 1),
                            "median_call_s": round(statistics.median(s["wall"]), 2), "calls": len(s["wall"]),
                            "same_prompt_tokens_as_llama_cpp_python": s["prompt_tokens"] == reference})
    out = {"prompts": args.prompts, "max_tokens": args.max_tokens, "load_1m_before": round(before, 2),
           "load_1m_after": round(load_1m(), 2), "results": results}
    path = ROOT / "bench" / "results" / "llamacpp_engines.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    table = Table(title=f"llamacpp/ engines (load {out['load_1m_before']}–{out['load_1m_after']})")
    for column in ("model", "engine", "load s", "tokens/s", "median call s", "same prompt"):
        table.add_column(column)
    for r in results:
        table.add_row(r["model"], r["engine"], f"{r['load_s']:.2f}", f"{r['tokens_per_s']:.1f}",
                      f"{r['median_call_s']:.2f}", str(r["same_prompt_tokens_as_llama_cpp_python"]))
    Console().print(table)


if __name__ == "__main__":
    main()
