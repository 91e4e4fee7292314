"""rechunk: revision-aware chunking and embedding reuse for RAG stacks.

The core is in rooms by concern, each a subpackage whose docstring says what it holds
and what it may import; their dependencies run one way (``tests/test_rooms.py``):

- :mod:`rechunk.reuse`: input keys, the embedder protocol and vector checks, the
  caches; it imports no other room.
- :mod:`rechunk.chunking` and :mod:`rechunk.chunkers`: the chunk contract, token
  counting, policies, R_c, and the chunkers; they may import reuse.
- :mod:`rechunk.sync`: the sync in named stages, its reports, the store protocol and
  ``reindex``; it may import the rooms above.
- :mod:`rechunk.sources`: file discovery and the parsers; it may import the chunkers
  (a code file's language).
- :mod:`rechunk.live`: ``watch``, freshness, metrics, ``eval``; it may import any room.

The root keeps the vocabulary the rooms share: :mod:`rechunk.errors`, which any of them
may import, and :mod:`rechunk.document` (``Document``, built on reuse's text hash), which
the sync, sources and live rooms pass along; beside them ``_optional`` (a lazy import
that names its extra) and ``_moved`` (old module paths such as ``rechunk.cache`` or
``rechunk.store`` import the same module objects). The core never imports the adapters,
the integrations or the command line.
"""

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
    BadVectorError,
    CacheError,
    CollectionMismatchError,
    ConfigError,
    EmbeddingError,
    ForeignPointsWarning,
    InputError,
    LocatorWarning,
    MissingDependencyError,
    ModelChangedError,
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
    "BadVectorError",
    "CDCChunker",
    "CacheError",
    "CacheStats",
    "CachedEmbedder",
    "Chunk",
    "Chunker",
    "CodeChunker",
    "CollectionMismatchError",
    "ConfigError",
    "Document",
    "DocumentReport",
    "EmbedStats",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingError",
    "FixedChunker",
    "ForeignPointsWarning",
    "InputError",
    "LocatorWarning",
    "MemoryCache",
    "MissingDependencyError",
    "ModelChangedError",
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
