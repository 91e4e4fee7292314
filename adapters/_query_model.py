"""The model a collection was synced with, opened for an application's queries: what the
framework embeddings classes of :mod:`rechunk.adapters.langchain_embeddings` and
:mod:`rechunk.adapters.llamaindex_embedding` share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rechunk.errors import ConfigError
from rechunk.reuse.embedding import check_texts

__all__ = ["embed_texts", "query_embedder"]


def query_embedder(embedder: Any, embed_url: str | None) -> Any:
    """``embedder`` itself when it is a rechunk :class:`~rechunk.Embedder`; else the one an
    embedder URI names, as ``rechunk sync --embedder`` takes it (None: the default, the
    packaged all-MiniLM-L6-v2 on ONNX Runtime)."""
    if embedder is not None and not isinstance(embedder, str):
        if not all(hasattr(embedder, name) for name in ("embed", "model_id", "dimension")):
            raise ConfigError(
                "embedder takes a rechunk Embedder, an embedder URI (onnx:PATH, st:PATH, "
                f"openai:MODEL) or None for the default, not a {type(embedder).__name__}"
            )
        if embed_url is not None:
            raise ConfigError("embed_url applies to an openai:MODEL embedder URI only")
        return embedder
    from rechunk.integrations.uri import open_embedder

    return open_embedder(embedder, embed_url=embed_url)


def embed_texts(embedder: Any, texts: Sequence[str]) -> list[list[float]]:
    """The vectors of ``texts`` as lists of floats (what the frameworks store and search
    with); an input over the model's window is an EmbeddingError, never truncated."""
    listed = check_texts(texts)
    if not listed:
        return []
    return [[float(x) for x in row] for row in embedder.embed(listed)]
