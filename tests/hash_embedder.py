"""A real deterministic embedder for tests where the model is not the point.

Each vector comes from the sha256 of its text, so the same text gives the same vector in
any process: a Ray worker's, a CLI child's. A test that ships it to Ray workers registers
this module to be pickled by value (the workers cannot import the tests folder).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


class HashEmbedder:
    """16 numbers a text, drawn from a generator seeded by the text's sha256."""

    model_id = "hash/v1"
    dimension = 16
    max_input_tokens: int | None = None

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [
            np.random.default_rng(
                int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "big")
            ).standard_normal(self.dimension)
            for t in texts
        ]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimension)
