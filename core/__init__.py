"""rechunk: revision-aware chunking and embedding reuse for RAG stacks."""

from __future__ import annotations

from rechunk.chunk import Chunk, Chunker, embedding_input
from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker
from rechunk.document import Document
from rechunk.embedding import Embedder
from rechunk.errors import (
    CacheError,
    ConfigError,
    EmbeddingError,
    InputError,
    MissingDependencyError,
    RechunkError,
    StoreError,
    StoreUnavailableError,
    TransientError,
)
from rechunk.identity import input_key
from rechunk.measure import edit_band, edit_fraction, recompute_fraction
from rechunk.store import VectorStore
from rechunk.tokens import TokenCounter

__version__ = "0.1.0"

__all__ = [
    "CDCChunker",
    "CacheError",
    "Chunk",
    "Chunker",
    "ConfigError",
    "Document",
    "Embedder",
    "EmbeddingError",
    "FixedChunker",
    "InputError",
    "MissingDependencyError",
    "RechunkError",
    "RecursiveChunker",
    "StoreError",
    "StoreUnavailableError",
    "TokenCounter",
    "TransientError",
    "VectorStore",
    "__version__",
    "edit_band",
    "edit_fraction",
    "embedding_input",
    "input_key",
    "recompute_fraction",
]
