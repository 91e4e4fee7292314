"""Writers that race: versions of one document, and a worker process that syncs them.

``TableEmbedder`` serves vectors the real model computed beforehand (in the parent
test process), so that worker processes need not load torch to sync real vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

WORDS = ("sync", "chunk", "store", "vector", "revision", "writer", "lock", "version")


def version_text(version: int, paragraphs: int = 10) -> str:
    """Version ``version`` of one document: most paragraphs shared with every other
    version (so that versions share point ids), a few of its own."""
    out = []
    for p in range(paragraphs):
        own = p % 4 == version % 4  # a quarter of the paragraphs change per version
        tag = f"v{version}" if own else "shared"
        shift = version if own else 0
        words = " ".join(WORDS[(p * 7 + k + shift) % len(WORDS)] for k in range(120))
        out.append(f"Paragraph {p} ({tag}): {words}.")
    out.append(f"A closing paragraph that only version {version} has.")
    return "\n\n".join(out)


class TableEmbedder:
    """An embedder answering from a table of real vectors (text -> vector)."""

    def __init__(self, model_id: str, dimension: int, table: dict[str, np.ndarray]) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens = 256
        self.special_tokens = 2
        self.table = table

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.table[t] for t in texts])

    def count_tokens(self, text: str) -> int:  # the model check's reference text's
        return len(text.split())


def chroma_worker(port: int, collection: str, model_id: str, table: dict[str, np.ndarray],
                  tasks: Any, results: Any, barrier: Any) -> None:
    """Sync the (doc_id, version) each task names into a Chroma server, all workers at
    once (a barrier per task); put (doc_id, version, status or error) on ``results``."""
    from rechunk import Document, policy_for, sync
    from rechunk.adapters.chroma import ChromaStore, http_client

    embedder = TableEmbedder(model_id, 384, table)
    chunker = policy_for(embedder, "recursive")
    store = ChromaStore(http_client("127.0.0.1", port), collection)
    while True:
        task = tasks.get()
        if task is None:
            return
        doc_id, version = task
        barrier.wait()
        try:
            report = sync([Document(doc_id, version_text(version), version=version)], store,
                          chunker=chunker, embedder=embedder)
            results.put((doc_id, version, report.per_document[0].status))
        except Exception as exc:
            results.put((doc_id, version, f"{type(exc).__name__}: {exc}"))
