"""``vllm/<hf-id-or-path>``: vLLM's offline batched engine (``LLM.chat``) on NVIDIA GPUs.

Imported lazily and installed by ``requirements-gpu.txt``. ``tensor_parallel_size`` splits a
model across the GPUs of one node; ``distributed_executor_backend: ray`` spreads it across nodes
of a Ray cluster. A whole stage's requests go to the engine as one batch.
"""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

from pipeline.config import ModelConfig
from pipeline.models.base import Backend, ChatRequest, Completion

# The engine holds whole GPUs: such models are loaded one after another and released after their
# stage, never side by side.
EXCLUSIVE = True


def unavailable(config: ModelConfig) -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed; on a machine with NVIDIA GPUs run `pip install -r requirements-gpu.txt`"
    if shutil.which("nvidia-smi") is None:
        return (f"no NVIDIA GPU found (nvidia-smi is missing); vLLM's engine needs {config.tensor_parallel_size} "
                "GPU(s) for this model")
    return None


class VLLMBackend(Backend):
    billed = False

    @classmethod
    def needs(cls, config: ModelConfig) -> str:
        return f"{config.tensor_parallel_size} GPU(s)"

    supports_batch = True

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        from vllm import LLM

        engine_args: dict[str, Any] = {
            "model": config.name, "tensor_parallel_size": config.tensor_parallel_size,
            "max_model_len": config.n_ctx, **config.engine_args,
        }
        if config.distributed_executor_backend:
            engine_args["distributed_executor_backend"] = config.distributed_executor_backend
        self.engine_args = engine_args
        self.llm = LLM(**engine_args)

    def provenance(self) -> dict[str, Any]:
        return {"engine": "vllm", **{k: v for k, v in self.engine_args.items() if k != "model"}}

    def _sampling(self, request: ChatRequest):
        from vllm import SamplingParams

        p = request.params
        kwargs: dict[str, Any] = {
            "max_tokens": p.max_tokens, "temperature": p.temperature, "top_p": p.top_p, "seed": p.seed + p.sample,
        }
        if p.top_logprobs > 0:
            kwargs["logprobs"] = p.top_logprobs
        if p.json_schema is not None:
            try:  # vLLM ≥ 0.10: structured outputs
                from vllm.sampling_params import StructuredOutputsParams

                kwargs["structured_outputs"] = StructuredOutputsParams(json=p.json_schema)
            except ImportError:  # older releases: guided decoding
                from vllm.sampling_params import GuidedDecodingParams

                kwargs["guided_decoding"] = GuidedDecodingParams(json=p.json_schema)
        return SamplingParams(**kwargs)

    async def complete(self, request: ChatRequest) -> Completion:
        return (await self.complete_batch([request]))[0]

    async def complete_batch(self, requests: list[ChatRequest]) -> list[Completion]:
        import asyncio

        def run() -> list[Completion]:
            outputs = self.llm.chat([list(r.messages) for r in requests], [self._sampling(r) for r in requests],
                                    use_tqdm=False)
            results = []
            for out in outputs:
                gen = out.outputs[0]
                top = None
                if gen.logprobs:
                    top = {lp.decoded_token: lp.logprob for lp in gen.logprobs[0].values()}
                results.append(Completion(text=gen.text, prompt_tokens=len(out.prompt_token_ids or []),
                                          completion_tokens=len(gen.token_ids), top_logprobs=top))
            return results

        return await asyncio.to_thread(run)


    def close(self) -> None:
        """Free the GPUs for the next model."""
        import gc

        del self.llm
        gc.collect()
        try:
            import torch

            torch.cuda.empty_cache()
        except ImportError:
            pass


def create(config: ModelConfig) -> VLLMBackend:
    return VLLMBackend(config)


BACKEND = VLLMBackend
