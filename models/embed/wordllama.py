"""Sentence vectors for a profile's facts and a caller's question (knowledge retrieval).

WordLlama keeps only the token embedding table of a large LLM, trained so that a sentence's
average token vector places paraphrases together: a caller's "Where are you located?" lands
near "We are at 12 Oak Street", which shares no word with it and so escapes BM25.
It is a 16 MB table and a tokenizer, bundled in the ``wordllama`` wheel; a question is embedded
in a fraction of a millisecond, so retrieval stays off the scheduler. The package's own loader
looks for its tokenizer in a folder the wheel does not have and then goes to the hub, so the
two files are read here directly.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from models import catalog

MODEL = "wordllama-l2-256"
TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
"""Beside ``weights/`` in the package."""


class Embedder:
    """Unit-length sentence vectors (cosine similarity is a dot product)."""

    def __init__(self, weights: Path, tokenizer: Path):
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        with safe_open(str(weights), framework="np") as f:
            table = f.get_tensor("embedding.weight")
        self._model = WordLlamaInference(table, Tokenizer.from_file(str(tokenizer)))
        self._lock = threading.Lock()  # its tokenizer is shared across calls' loops

    @property
    def dim(self) -> int:
        return int(self._model.embedding.shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text, each of unit length."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        with self._lock:
            return np.asarray(self._model.embed(list(texts), norm=True), np.float32)


@lru_cache(maxsize=1)
def embedder() -> Embedder:
    """The process's one embedder (loaded on first use, in about a tenth of a second).

    Raises:
        ModelMissingError: the ``wordllama`` package is not installed (named).
    """
    weights = catalog.resolve(MODEL, "embed")
    return Embedder(weights, weights.parent.parent / TOKENIZER)
