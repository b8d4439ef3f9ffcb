"""The in-process llama.cpp backend reports the prompt tokens it evaluated (the rest came from its KV cache)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.models.llamacpp import evaluated_prompt_tokens


def t(*ids: int) -> np.ndarray:
    return np.array(ids, dtype=np.intc)


def test_evaluated_tokens_follow_llama_cpp_python_prefix_rule():
    assert evaluated_prompt_tokens(t(), t(1, 2, 3), logits_live=False) == 3  # empty cache: everything
    assert evaluated_prompt_tokens(t(1, 2, 9, 9), t(1, 2, 3, 4, 5), logits_live=True) == 3  # after the shared 1, 2
    assert evaluated_prompt_tokens(t(7, 2, 3), t(1, 2, 3), logits_live=True) == 3  # no common prefix
    # the prompt is wholly a prefix of the cache: its last token is replayed to refresh the logits ...
    assert evaluated_prompt_tokens(t(1, 2, 3, 4, 5), t(1, 2, 3), logits_live=True) == 1
    # ... unless it is exactly what the cache holds and the logits came from a live decode
    assert evaluated_prompt_tokens(t(1, 2, 3), t(1, 2, 3), logits_live=True) == 0
    assert evaluated_prompt_tokens(t(1, 2, 3), t(1, 2, 3), logits_live=False) == 1


def test_completions_carry_the_evaluated_prompt_tokens():
    pytest.importorskip("llama_cpp")
    from pipeline.config import ModelConfig
    from pipeline.models.base import ChatRequest, GenerateParams
    from pipeline.models.llamacpp import LlamaCppBackend, unavailable

    config = ModelConfig(id="llamacpp/smollm2-135m-instruct")
    if unavailable(config):
        pytest.skip(unavailable(config))
    backend = LlamaCppBackend(config)
    backend.shared.llama.reset()
    system = {"role": "system", "content": "You answer in one short sentence about cataract surgery recovery."}
    params = GenerateParams(max_tokens=2)
    first = backend._complete_sync(ChatRequest((system, {"role": "user", "content": "Can I bathe?"}), params))
    second = backend._complete_sync(ChatRequest((system, {"role": "user", "content": "Can I read?"}), params))
    assert first.evaluated_prompt_tokens == first.prompt_tokens  # nothing cached before the first call
    # the second call shares the system prompt with the first: only its own tail is evaluated
    assert 0 < second.evaluated_prompt_tokens < second.prompt_tokens - 10
