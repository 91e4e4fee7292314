"""rechunk: revision-aware chunking and embedding reuse for RAG stacks."""

from __future__ import annotations

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
from rechunk.store import VectorStore

__version__ = "0.1.0"

__all__ = [
    "CacheError",
    "ConfigError",
    "Document",
    "Embedder",
    "EmbeddingError",
    "InputError",
    "MissingDependencyError",
    "RechunkError",
    "StoreError",
    "StoreUnavailableError",
    "TransientError",
    "VectorStore",
    "__version__",
    "input_key",
]
