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
from rechunk.errors import ConfigError

require("llama_index.core", "llamaindex")

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding  # noqa: E402
from llama_index.core.bridge.pydantic import Field, PrivateAttr  # noqa: E402

__all__ = ["RechunkEmbedding"]


_NO_URI = (
    "this RechunkEmbedding was made from an Embedder object, which does not travel to "
    "another process: make it from an embedder URI (RechunkEmbedding('onnx:PATH'), or "
    "RechunkEmbedding() for the default)"
)


class RechunkEmbedding(BaseEmbedding):
    """A rechunk embedder as a LlamaIndex ``BaseEmbedding``.

    ``embedder``: an embedder URI as ``rechunk sync --embedder`` takes it (``onnx:PATH``,
    ``st:PATH``, ``openai:MODEL`` with ``embed_url``), a rechunk
    :class:`~rechunk.Embedder`, or None for the default. ``model_name`` is the identity a
    synced collection records for its points (``rechunk status`` shows it). A text
    longer than the model's window is an :class:`~rechunk.EmbeddingError`, never
    truncated. Queries and texts are embedded alike (the models rechunk opens take no
    query prefix). Made from a URI (or the default), it pickles (an ``IngestionPipeline``
    with worker processes sends it to them) and each copy opens the model again.
    """

    embedder_uri: str | None = Field(
        default=None, description="the embedder URI (None: the default); see rechunk's docs"
    )
    embed_url: str | None = Field(default=None, description="an openai: embedder's URL")
    from_object: bool = Field(
        default=False, description="made from an Embedder object (no URI to open it from)"
    )
    _embedder: Any = PrivateAttr(default=None)

    def __init__(self, embedder: Any = None, *, embed_url: str | None = None, **kwargs: Any):
        # from_dict and unpickling give the fields back: the URI opens the model again
        kwargs.pop("model_name", None)
        uri = kwargs.pop("embedder_uri", None)
        if kwargs.pop("from_object", False) and embedder is None:
            raise ConfigError(_NO_URI)
        if embedder is None and uri is not None:
            embedder = uri
        opened = query_embedder(embedder, embed_url)
        fields: dict[str, Any] = {
            "embedder_uri": embedder if isinstance(embedder, str) else None,
            "embed_url": embed_url,
            "from_object": embedder is not None and not isinstance(embedder, str),
        }
        super().__init__(model_name=str(opened.model_id), **fields, **kwargs)
        self._embedder = opened

    @classmethod
    def class_name(cls) -> str:
        return "RechunkEmbedding"

    @property
    def model_id(self) -> str:
        """The model's rechunk identity (``model_name``): the key ``rechunk sync`` caches its
        vectors under, so ``CachedEmbedding(RechunkEmbedding())`` shares them."""
        return self.model_name

    @property
    def pins_weights(self) -> bool:
        """Whether ``model_name`` names the weights (rechunk's local models, known by a
        hash of their files): a cache wrapper around it then runs no model check."""
        return bool(getattr(self._model(), "pins_weights", False))

    def __getstate__(self) -> dict[str, Any]:
        # the model stays behind (an ONNX session does not pickle): the copy opens it
        # again from the URI, without LlamaIndex's warning about a dropped attribute
        held, self._embedder = self._embedder, None
        try:
            return dict(super().__getstate__())
        finally:
            self._embedder = held

    def _model(self) -> Any:
        """The embedder: the one given, or (in a copy made by unpickling) the one the URI
        names, opened again."""
        if self._embedder is None:
            if self.from_object:
                raise ConfigError(_NO_URI)
            self._embedder = query_embedder(self.embedder_uri, self.embed_url)
        return self._embedder

    def _get_query_embedding(self, query: str) -> Embedding:
        return embed_texts(self._model(), [query])[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return embed_texts(self._model(), [text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return embed_texts(self._model(), texts)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)
