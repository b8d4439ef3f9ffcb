"""Backends addressed as ``provider/name``, found in a registry and imported lazily.

Each backend module exposes ``create(config) -> Backend``, ``unavailable(config) -> str | None``
(why it cannot run here: a missing API key, package or GPU) and ``BACKEND``, its class, which carries the
provider's facts (billed or not, what it needs, how prompt tokens are counted). Heavy packages (llama_cpp, openai,
vllm) are imported inside the module's factory, so a missing optional package breaks only its
own backend.
"""

from __future__ import annotations

from pipeline.config import ModelConfig
from pipeline.errors import UserError
from pipeline.models.base import Backend, ChatRequest, Completion, GenerateParams, Model, UsageStats
from pipeline.registry import Registry

PROVIDERS = Registry("provider", {
    "llamacpp": "pipeline.models.llamacpp",
    "openai": "pipeline.models.openai_compatible",
    "openai-compatible": "pipeline.models.openai_compatible",
    "vllm": "pipeline.models.vllm_offline",
    "extractive": "pipeline.models.extractive",
    "reference": "pipeline.models.reference",  # the dataset's approved answers as a pseudo-model
})

__all__ = [
    "PROVIDERS",
    "Backend",
    "ChatRequest",
    "Completion",
    "GenerateParams",
    "Model",
    "UsageStats",
    "backend_class",
    "create_backend",
    "engine_of",
    "unavailable_reason",
]


def _module(config: ModelConfig):
    return PROVIDERS.lookup(config.provider, f"model {config.id}: ")


def backend_class(provider: str) -> type[Backend] | None:
    """The backend class of a provider (``None`` for an unknown one), imported on first use."""
    return PROVIDERS[provider].BACKEND if provider in PROVIDERS else None


def unavailable_reason(config: ModelConfig) -> str | None:
    """Why this model cannot run on this machine now (``None`` when it can)."""
    return _module(config).unavailable(config)


def engine_of(config: ModelConfig) -> str | None:
    """The engine this model's answers would be computed with here, where its provider has more than one
    (``llamacpp/``: llama-cpp-python or the prebuilt xllamacpp); ``None`` otherwise."""
    return getattr(_module(config), "engine", lambda config: None)(config)


def is_exclusive(config: ModelConfig) -> bool:
    """True for backends that hold whole accelerators (run one at a time, released after use)."""
    return bool(getattr(_module(config), "EXCLUSIVE", False))


def create_backend(config: ModelConfig) -> Backend:
    """The backend for ``config.id``; raises UserError when it cannot be created here."""
    reason = unavailable_reason(config)
    if reason:
        raise UserError(f"model {config.id}: {reason}")
    return _module(config).create(config)
