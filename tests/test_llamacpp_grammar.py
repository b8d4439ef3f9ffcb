"""Greedy grammar-constrained decoding checks the argmax first and writes the same tokens as the stock chain."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from pipeline.config import ModelConfig
from pipeline.dataset import load_dataset
from pipeline.models.base import ChatRequest, GenerateParams
from pipeline.models.llamacpp import GreedyGrammarSampler, LlamaCppBackend, unavailable
from pipeline.steps.judge import judge_calls

DATA = Path(__file__).resolve().parent.parent / "data" / "cataract"


@pytest.fixture(scope="module")
def backend() -> LlamaCppBackend:
    config = ModelConfig(id="llamacpp/smollm2-135m-instruct")
    if unavailable(config):
        pytest.skip(unavailable(config))
    return LlamaCppBackend(config)


def run(backend: LlamaCppBackend, request: ChatRequest, *, stock: bool, monkeypatch) -> tuple[str, int]:
    """One call from an empty KV cache; ``stock`` samples with llama-cpp-python's own chain."""
    from llama_cpp import Llama

    llama = backend.shared.llama
    llama.reset()
    llama.last_sampler = None
    with monkeypatch.context() as patch:
        if stock:
            patch.setattr(type(llama), "_init_sampler", Llama._init_sampler)
        completion = backend._complete_sync(request)
    assert completion.ok, completion.error
    return completion.text, completion.completion_tokens


def test_judge_calls_write_the_same_tokens_with_the_argmax_checked_first(backend, monkeypatch):
    dataset = load_dataset(DATA)
    queries = [q for q in dataset.queries if q.gt_response][:2]
    requests = [call.request for q in queries
                for call in judge_calls(q, q.gt_response, [], [], metrics=("SS", "COH"), max_tokens=48)]
    for request in requests:
        stock_text, stock_tokens = run(backend, request, stock=True, monkeypatch=monkeypatch)
        text, tokens = run(backend, request, stock=False, monkeypatch=monkeypatch)
        sampler = backend.shared.llama.last_sampler
        assert isinstance(sampler, GreedyGrammarSampler)  # the judge's greedy JSON calls take the checked path
        assert sampler.checks in (tokens, tokens + 1)  # one check per sampled token (and the end-of-text token)
        assert (text, tokens) == (stock_text, stock_tokens)


def test_a_rejected_argmax_falls_back_to_the_top_logits_then_the_whole_vocabulary(backend, monkeypatch):
    from llama_cpp import Llama, LlamaGrammar

    prompt = ({"role": "user", "content": "Is it safe to rub my eye after cataract surgery?"},)
    first, _ = run(backend, ChatRequest(prompt, GenerateParams(max_tokens=1)), stock=True, monkeypatch=monkeypatch)
    # a grammar that cannot start with the unconstrained first token: the check rejects it at step one
    letters = [c for c in "QXZJ" if not first.lstrip().upper().startswith(c)][:2]
    grammar = LlamaGrammar.from_string(f'root ::= "{letters[0]}" | "{letters[1]}"', verbose=False)
    llama = backend.shared.llama
    outputs, samplers = [], []
    # the stock chain; the checked sampler with only the argmax as its top candidates (so the rejected step
    # must go to the whole vocabulary); the checked sampler as the backend runs it
    for stock, top in ((True, None), (False, 1), (False, GreedyGrammarSampler.TOP)):
        llama.reset()
        llama.last_sampler = None
        with monkeypatch.context() as patch:
            if stock:
                patch.setattr(type(llama), "_init_sampler", Llama._init_sampler)
            else:
                patch.setattr(GreedyGrammarSampler, "TOP", top)
            out = llama.create_chat_completion(messages=list(prompt), max_tokens=4, temperature=0.0, grammar=grammar)
        outputs.append(out["choices"][0]["message"]["content"])
        samplers.append(llama.last_sampler)
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0] in letters
    assert samplers[1].top_passes >= 1 and samplers[1].full_passes >= 1
    assert samplers[2].top_passes >= 1
