"""The model ``rechunk sync`` wrote a collection with, as a LlamaIndex embedding.

Install with ``pip install 'rechunk[llamaindex]'``.

An application that reads a collection with LlamaIndex's own vector stores
(``QdrantVectorStore``, ``ChromaVectorStore`` under ``VectorStoreIndex.from_vector_store``)
embeds its queries with the model the collection was synced with; :class:`RechunkEmbedding`
is that model, opened as ``rechunk sync`` opens it (the packaged all-MiniLM-L6-v2 on ONNX
Runtime by default, offline), so a query's vector is the one ``rechunk query`` computes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rechunk._optional import require
from rechunk.adapters._query_model import embed_texts, query_embedder

require("llama_index.core", "llamaindex")

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding  # noqa: E402
from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402

__all__ = ["RechunkEmbedding"]


class RechunkEmbedding(BaseEmbedding):
    """A rechunk embedder as a LlamaIndex ``BaseEmbedding``.

    ``embedder``: an embedder URI as ``rechunk sync --embedder`` takes it (``onnx:PATH``,
    ``st:PATH``, ``openai:MODEL`` with ``embed_url``), a rechunk
    :class:`~rechunk.Embedder`, or None for the default. ``model_name`` is the identity a
    synced collection records for its points (``rechunk status`` shows it). A text
    longer than the model's window is an :class:`~rechunk.EmbeddingError`, never
    truncated. Queries and texts are embedded alike (the models rechunk opens take no
    query prefix).
    """

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Any = None, *, embed_url: str | None = None, **kwargs: Any):
        opened = query_embedder(embedder, embed_url)
        super().__init__(model_name=str(opened.model_id), **kwargs)
        self._embedder = opened

    @classmethod
    def class_name(cls) -> str:
        return "RechunkEmbedding"

    def _get_query_embedding(self, query: str) -> Embedding:
        return embed_texts(self._embedder, [query])[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return embed_texts(self._embedder, [text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return embed_texts(self._embedder, texts)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)
