"""The VectorStore protocol: what the sync engine needs from a vector collection.

Adapters (``rechunk.adapters.qdrant.QdrantStore``, ``rechunk.adapters.chroma.
ChromaStore``) implement it on top of a ready client. Every point a sync writes
carries a :class:`PointPayload`; how the payload is laid out in the collection
(``layout="langchain"`` or ``"llamaindex"``) is the adapter's business, so that
the framework's own vector store class can read the collection directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "RESERVED_METADATA_KEYS",
    "SUPERSEDED_KEY",
    "SUPERSEDED_MARK",
    "CollectionInfo",
    "Distance",
    "PointPayload",
    "PointWrite",
    "StoredPoint",
    "VectorStore",
    "current_hits",
    "mark_superseded",
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
        "superseded",
    }
)

#: The payload key that marks a point superseded (see :func:`mark_superseded`): written
#: (as :data:`SUPERSEDED_MARK`) on the points of a document's old revision once its new
#: revision is written, just before they are deleted, and absent on every other point.
#: Queries leave such points out: :meth:`VectorStore.search` does, and a LangChain or
#: LlamaIndex retriever does with the filter that ``rechunk.adapters.guard`` builds for it.
SUPERSEDED_KEY = "superseded"
#: The value of :data:`SUPERSEDED_KEY` on a marked point: the integer 1, not ``True``, so
#: that every framework's filter can name it (LlamaIndex's ``MetadataFilter`` holds no
#: bool, and Qdrant and Chroma match 1 and ``True`` apart).
SUPERSEDED_MARK = 1


@dataclass(frozen=True)
class PointPayload:
    """Everything stored beside one chunk's vector.

    ``previous_id`` / ``next_id`` are the point ids of the chunks before and after this one
    in the same document (``None`` at its ends). A sync fills them only for a store that
    keeps them (``keeps_neighbours``: the llamaindex layout writes them as the node's
    PREVIOUS / NEXT relationships); elsewhere they stay ``None``.

    ``superseded`` is true on a point of a revision that a newer one replaced, between the
    sync that wrote the newer one marking it and deleting it (see :func:`mark_superseded`);
    a store writes the key only when it is true, so a payload written again clears it.
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
    superseded: bool = False


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
    ``text_locators`` (true: what a document's locator says of a chunk is stored as
    text, :func:`~rechunk.document.locator_as_text`),
    ``conditional_versions`` / ``writer_lock()`` (see :func:`rechunk.sync`), and reads
    by point id for a store whose filtered reads scan the collection (Chroma):
    ``present_ids(ids)`` (the check after publishing), ``get_vectors_at(points,
    model_id)`` (inputs the sync published itself) and ``all_ids()`` with
    ``doc_ids_of(ids)`` (what a prune deletes). ``search_many(vectors, k)``: ``search``
    of each vector in one request or pass (the watcher's retrievability probe; without
    it, one ``search`` after another). ``other_model(model_id)``: the model_id of any of
    rechunk's points another model wrote, or None, looking at every point (the check
    after a first sync without a writer lock,
    :func:`~rechunk.sync.verifying.check_one_model`; without it, ``collection_info``'s).
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
        """The ``k`` nearest points with their scores (higher is closer), leaving out
        superseded points (:attr:`PointPayload.superseded`; see :func:`current_hits`)."""
        ...


Hits = list[tuple[StoredPoint, float]]


def current_hits(
    fetch: Callable[[int], Sequence[tuple[StoredPoint | None, float]]], k: int
) -> Hits:
    """The ``k`` best hits that are not superseded, from ``fetch(n)``: the ``n`` nearest
    points, closest first, superseded or not, with ``None`` for a point another tool wrote
    (it holds a place in the store's answer, and is left out here). Asked for ``k``
    first, then for twice as many each time superseded or foreign points took places,
    until ``k`` current hits are in hand or the store has no more: the top ``n`` of all
    points holds the top ``k`` current ones as soon as it holds ``k`` current ones at
    all, so the answer is what a filtered search gives. Superseded points live between
    two steps of one sync, so a second request is rare, and no store needs a filter (or,
    on a Qdrant server in strict mode, an index) on the key."""
    n = k
    while True:
        hits = fetch(n)
        current = [
            (point, score)
            for point, score in hits
            if point is not None and not point.payload.superseded
        ]
        if len(current) >= k or len(hits) < n:
            return current[:k]
        n *= 2


def mark_superseded(
    store: VectorStore, points: Sequence[StoredPoint], **guard: int
) -> None:
    """Mark ``points`` superseded: ``store.supersede`` where the store has it (one
    payload-only request per batch), else a payload-only write of each point's payload
    with ``superseded`` set. ``guard``: ``version=`` for a store with conditional
    writes (see :func:`rechunk.sync`)."""
    if not points:
        return
    supersede = getattr(store, "supersede", None)
    if callable(supersede):
        supersede([p.id for p in points], **guard)
        return
    write: Callable[..., None] = store.write  # Qdrant's takes version=
    write([PointWrite(p.id, replace(p.payload, superseded=True), None) for p in points], **guard)


def of_model(
    points: Mapping[str, list[StoredPoint]], model_id: str
) -> dict[str, list[StoredPoint]]:
    """``points`` (per doc_id) without those another model wrote. A sync reads, plans,
    settles and verifies only its own model's points: another model's are never deleted
    or overwritten by it. A collection another model wrote is refused before a sync, and
    one that a concurrent first sync of another model wrote into is found after it
    (:func:`rechunk.sync.verifying.check_one_model`)."""
    return {
        doc_id: [p for p in found if p.payload.model_id == model_id]
        for doc_id, found in points.items()
    }


# What a store offers beyond the protocol: the optional methods and attributes the
# sync asks for (see VectorStore).


def _method(store: object, name: str) -> Callable[..., Any] | None:
    """The optional method ``name`` of ``store`` (see VectorStore), or None."""
    method = getattr(store, name, None)
    return method if callable(method) else None


def _offers(store: object, *methods: str) -> bool:
    """Whether ``store`` has every one of these optional methods (see VectorStore)."""
    return all(_method(store, name) is not None for name in methods)


def _keeps(store: VectorStore) -> bool:
    """Whether ``store`` keeps each point's PREVIOUS / NEXT ids (``keeps_neighbours``)."""
    return bool(getattr(store, "keeps_neighbours", False))


def _text_locators(store: VectorStore) -> bool:
    """Whether ``store`` holds locators as text (``text_locators``)."""
    return bool(getattr(store, "text_locators", False))
