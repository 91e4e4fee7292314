"""The model ``rechunk sync`` wrote a collection with, as LangChain ``Embeddings``.

Install with ``pip install 'rechunk[langchain]'``.

An application that reads a collection with LangChain's own vector stores
(``langchain_qdrant.QdrantVectorStore``, ``langchain_chroma.Chroma``) embeds its queries
with the model the collection was synced with; :class:`RechunkEmbeddings` is that model,
opened as ``rechunk sync`` opens it (the packaged all-MiniLM-L6-v2 on ONNX Runtime by
default, offline), so a query's vector is the one ``rechunk query`` computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rechunk._optional import require
from rechunk.adapters._query_model import embed_texts, query_embedder

require("langchain_core", "langchain")

from langchain_core.embeddings import Embeddings  # noqa: E402

__all__ = ["RechunkEmbeddings"]


class RechunkEmbeddings(Embeddings):
    """A rechunk embedder as LangChain ``Embeddings``.

    ``embedder``: an embedder URI as ``rechunk sync --embedder`` takes it (``onnx:PATH``,
    ``st:PATH``, ``openai:MODEL`` with ``embed_url``), a rechunk
    :class:`~rechunk.Embedder`, or None for the default. ``model_id`` is the identity a
    synced collection records for its points (``rechunk status`` shows it): compare the
    two to know the vectors match. A text longer than the model's window is an
    :class:`~rechunk.EmbeddingError`, never truncated.
    """

    def __init__(self, embedder: Any = None, *, embed_url: str | None = None) -> None:
        self.embedder = query_embedder(embedder, embed_url)

    @property
    def model_id(self) -> str:
        return str(self.embedder.model_id)

    @property
    def pins_weights(self) -> bool:
        """Whether ``model_id`` names the weights (rechunk's local models): a cache wrapper
        around it then runs no model check."""
        return bool(getattr(self.embedder, "pins_weights", False))

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return embed_texts(self.embedder, texts)

    def embed_query(self, text: str) -> list[float]:
        return embed_texts(self.embedder, [text])[0]
