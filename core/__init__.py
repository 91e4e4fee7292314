"""rechunk: revision-aware chunking and embedding reuse for RAG stacks."""

from __future__ import annotations

from rechunk import _moved  # noqa: F401  (old module paths such as rechunk.cache still import)
from rechunk.chunkers import (
    CDCChunker,
    CodeChunker,
    FixedChunker,
    RecursiveChunker,
    StructuredChunker,
)
from rechunk.chunking.chunk import Chunk, Chunker, embedding_input
from rechunk.chunking.measure import edit_band, edit_fraction, recompute_fraction
from rechunk.chunking.policy import policy_for
from rechunk.chunking.tokens import TokenCounter
from rechunk.document import Document
from rechunk.errors import (
    CacheError,
    ConfigError,
    EmbeddingError,
    InputError,
    MissingDependencyError,
    RechunkError,
    StaleCheckError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
    TransientError,
)
from rechunk.reuse.cache import CacheStats, EmbeddingCache, MemoryCache, SQLiteCache
from rechunk.reuse.cached_embedder import CachedEmbedder, EmbedStats
from rechunk.reuse.embedding import Embedder
from rechunk.reuse.identity import input_key
from rechunk.sync import DocumentReport, SyncReport, sync
from rechunk.sync.generations import ReindexReport, reindex
from rechunk.sync.store import VectorStore

__version__ = "0.1.0"

__all__ = [
    "CDCChunker",
    "CacheError",
    "CacheStats",
    "CachedEmbedder",
    "Chunk",
    "Chunker",
    "CodeChunker",
    "ConfigError",
    "Document",
    "DocumentReport",
    "EmbedStats",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingError",
    "FixedChunker",
    "InputError",
    "MemoryCache",
    "MissingDependencyError",
    "RechunkError",
    "RecursiveChunker",
    "ReindexReport",
    "SQLiteCache",
    "StaleCheckError",
    "StoreError",
    "StoreTimeoutError",
    "StoreUnavailableError",
    "StructuredChunker",
    "SyncReport",
    "TokenCounter",
    "TransientError",
    "VectorStore",
    "__version__",
    "edit_band",
    "edit_fraction",
    "embedding_input",
    "input_key",
    "policy_for",
    "recompute_fraction",
    "reindex",
    "sync",
]
