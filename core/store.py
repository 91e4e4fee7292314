"""The VectorStore protocol: what the sync engine needs from a vector collection.

Adapters (``rechunk.adapters.qdrant.QdrantStore``, ``rechunk.adapters.chroma.
ChromaStore``) implement it on top of a ready client. Every point a sync writes
carries a :class:`PointPayload`; how the payload is laid out in the collection
(``layout="langchain"`` or ``"llamaindex"``) is the adapter's business, so that
the framework's own vector store class can read the collection directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "RESERVED_METADATA_KEYS",
    "CollectionInfo",
    "Distance",
    "PointPayload",
    "PointWrite",
    "StoredPoint",
    "VectorStore",
]

Distance = Literal["cosine", "dot", "euclid"]
T = TypeVar("T")


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size`` (a sync's batches of documents,
    a store's requests)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]

#: Payload keys rechunk owns; document metadata may not use them.
RESERVED_METADATA_KEYS = frozenset(
    {
        "doc_id",
        "revision",
        "policy",
        "input_key",
        "model_id",
        "ordinal",
        "start",
        "end",
        "tokens",
        "version",
    }
)


@dataclass(frozen=True)
class PointPayload:
    """Everything stored beside one chunk's vector.

    ``previous_id`` / ``next_id`` are the point ids of the chunks before and after this one
    in the same document (``None`` at its ends). A sync fills them only for a store that
    keeps them (``keeps_neighbours``: the llamaindex layout writes them as the node's
    PREVIOUS / NEXT relationships); elsewhere they stay ``None``.
    """

    doc_id: str
    revision: str
    policy: str
    input_key: str
    model_id: str
    ordinal: int
    start: int
    end: int
    tokens: int
    text: str
    version: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    previous_id: str | None = None
    next_id: str | None = None


@dataclass(frozen=True)
class StoredPoint:
    """A point as read back from the store (without its vector)."""

    id: str
    payload: PointPayload


@dataclass(frozen=True)
class PointWrite:
    """One write: a new point (``vector`` set) or a payload-only update (``vector=None``)."""

    id: str
    payload: PointPayload
    vector: npt.NDArray[np.float32] | None = None


@dataclass(frozen=True)
class CollectionInfo:
    """The collection's configuration as the store reports it."""

    name: str
    dimension: int
    distance: Distance
    points: int
    model_ids: frozenset[str] = frozenset()


@runtime_checkable
class VectorStore(Protocol):
    """A vector collection that rechunk can sync into.

    Constructors take a ready client and do no I/O. Every method that reaches the
    store raises ``StoreError`` (or ``StoreUnavailableError`` when it cannot be
    reached); none of them writes anything partially on bad input.

    Optional attributes a sync looks for: ``keeps_neighbours`` (true: the store holds
    :attr:`PointPayload.previous_id` / ``next_id``, and reads them back),
    ``conditional_versions`` / ``writer_lock()`` (see :func:`rechunk.sync`), and reads
    by point id for a store whose filtered reads scan the collection (Chroma):
    ``present_ids(ids)`` (the check after publishing), ``get_vectors_at(points,
    model_id)`` (inputs the sync published itself) and ``all_ids()`` with
    ``doc_ids_of(ids)`` (what a prune deletes).
    """

    @property
    def collection(self) -> str: ...

    def collection_info(self) -> CollectionInfo | None:
        """The collection's configuration, or ``None`` when it does not exist."""
        ...

    def ensure_collection(self, dimension: int, distance: Distance = "cosine") -> CollectionInfo:
        """Create the collection, or check that the existing one has this configuration."""
        ...

    def get_points(self, doc_id: str) -> list[StoredPoint]:
        """All points of ``doc_id`` (any revision), payloads without vectors."""
        ...

    def get_points_many(self, doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
        """:meth:`get_points` of each of ``doc_ids`` (a key per id, ``[]`` when it has
        none), read in a few requests: a store without a payload index (embedded Qdrant)
        scans its collection once per request, so a sync reads all its documents at once."""
        ...

    def get_vectors(
        self, input_keys: Sequence[str], model_id: str
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Vectors already stored under these input keys by ``model_id`` (any doc)."""
        ...

    def check_metadata(self, doc_id: str, metadata: Mapping[str, Any]) -> None:
        """Raise ``InputError`` when this store cannot hold ``metadata`` on the points of
        ``doc_id``; no I/O. A sync checks every document with it before it writes anything."""
        ...

    def write(self, points: Sequence[PointWrite]) -> None:
        """Upsert points with vectors; update only the payload where ``vector`` is None."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id; ids that do not exist are ignored."""
        ...

    def doc_ids(self) -> set[str]:
        """Every doc_id that has at least one point."""
        ...

    def search(
        self, vector: npt.NDArray[np.float32], k: int = 5
    ) -> list[tuple[StoredPoint, float]]:
        """The ``k`` nearest points with their scores (higher is closer)."""
        ...
