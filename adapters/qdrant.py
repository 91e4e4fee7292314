"""rechunk's :class:`~rechunk.store.VectorStore` on Qdrant (``pip install 'rechunk[qdrant]'``).

Works with every kind of ``QdrantClient``: a server (``url=``), or local mode
(``":memory:"``, ``path=``). The collection is laid out so that LangChain's or
LlamaIndex's own Qdrant vector store reads it directly (see
:mod:`rechunk.adapters._layout`); llama_index and langchain need not be installed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn

import numpy as np

from rechunk._optional import require
from rechunk.adapters._layout import (
    LANGCHAIN_METADATA_KEY,
    LLAMAINDEX_VECTOR_NAME,
    Layout,
    StoreBase,
    batches,
    by_doc,
    check_dimension,
    check_dimensions,
    check_distance,
    check_doc_id,
    check_doc_ids,
    check_ids,
    check_k,
    check_query_vector,
    from_qdrant,
    is_unreachable,
    prepare_writes,
    qdrant_payload,
)
from rechunk.errors import (
    ConfigError,
    RechunkError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from rechunk.store import CollectionInfo, Distance, PointWrite, StoredPoint

require("qdrant_client", "qdrant", package="qdrant-client")

from qdrant_client import models  # noqa: E402  (after the check that names the extra)

if TYPE_CHECKING:
    import numpy.typing as npt
    from qdrant_client import QdrantClient

__all__ = ["QdrantStore", "local_client"]

_TO_QDRANT: Final[dict[Distance, models.Distance]] = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclid": models.Distance.EUCLID,
}
_FROM_QDRANT: Final = {value: key for key, value in _TO_QDRANT.items()}
_LOCK_TEXT: Final = "already accessed by another instance"
_UNAVAILABLE_STATUS: Final = frozenset({502, 503, 504})
_MODEL_SAMPLE: Final = 256
#: Payload fields rechunk filters on, each given a keyword index (Qdrant server; local mode
#: has none): a server in strict mode refuses filters on fields without one.
_INDEXED: Final = ("doc_id", "input_key", "model_id")


#: one lock per embedded client: Qdrant's local mode is not thread-safe (two threads
#: writing through one client left points holding another point's vector)
_CLIENT_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_CLIENT_LOCKS_GUARD = threading.Lock()


def _client_lock(client: Any) -> threading.RLock:
    with _CLIENT_LOCKS_GUARD:
        lock = _CLIENT_LOCKS.get(client)
        if lock is None:
            lock = _CLIENT_LOCKS[client] = threading.RLock()
        return lock


def _lock_error(path: object, exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(
        f"store is in use by another process: Qdrant local mode at {path} allows one client "
        f"at a time (close the other QdrantClient, or run a Qdrant server for concurrent "
        f"access): {exc}"
    )


def local_client(path: str | os.PathLike[str]) -> QdrantClient:
    """``QdrantClient(path=path)``; :class:`StoreUnavailableError` when the folder is locked.

    Qdrant's local mode takes an exclusive lock on the folder when the client is
    created; a second client on the same folder, in this process or another,
    fails with a ``RuntimeError`` until the first one is closed.
    """
    from qdrant_client import QdrantClient

    try:
        return QdrantClient(path=os.fspath(path))
    except RuntimeError as exc:
        if _LOCK_TEXT in str(exc):
            raise _lock_error(path, exc) from exc
        raise StoreError(f"cannot open the Qdrant folder {path}: {exc}") from exc


def _timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it wraps) is a request that timed out (httpx's
    timeouts, or gRPC's DEADLINE_EXCEEDED)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or any(
            cls.__name__ == "TimeoutException" and cls.__module__.startswith("httpx")
            for cls in type(current).__mro__
        ):
            return True
        code = getattr(current, "code", None)
        if callable(code) and type(current).__module__.startswith("grpc"):
            with contextlib.suppress(Exception):
                if getattr(code(), "name", "") == "DEADLINE_EXCEEDED":
                    return True
        current = current.__cause__ or current.__context__
    return False


def _check_version(version: object) -> int | None:
    if version is None:
        return None
    if type(version) is not int or version < 0:
        raise ConfigError(f"version must be a non-negative int or None, got {version!r}")
    return version


@dataclass(frozen=True)
class _Vectors:
    """The dense vector rechunk uses in an existing collection."""

    name: str | None  # None: the collection's single unnamed vector
    dimension: int
    distance: Distance


class QdrantStore(StoreBase["QdrantClient"]):
    """A Qdrant collection as a rechunk :class:`~rechunk.store.VectorStore`.

    ``client`` is a ready ``qdrant_client.QdrantClient``; the constructor does no
    I/O. ``layout`` (``"langchain"`` or ``"llamaindex"``) decides where the
    payload and vector go, so that ``langchain_qdrant.QdrantVectorStore`` (with
    its defaults) or ``llama_index``'s ``QdrantVectorStore`` reads the
    collection; it must stay the same for the life of a collection. Requests
    carry at most ``batch_size`` points (writes wait for Qdrant to apply them).

    Contracts:

    * Point ids are canonical UUID strings; anything else is a ConfigError.
    * ``ensure_collection`` creates the collection (layout langchain: one unnamed
      dense vector; llamaindex: the named vector ``"text-dense"``; both with
      keyword payload indexes on doc_id and input_key, which a Qdrant server
      uses and local mode ignores) or checks an existing one; another dimension
      or distance raises StoreError naming both and changes nothing.
    * Every other method on a missing collection raises StoreError saying to call
      ``ensure_collection`` (an empty ``write``, ``delete`` or ``get_vectors``
      does no I/O at all); an unreachable server (refused, timed out, HTTP
      502/503/504, gRPC UNAVAILABLE) raises StoreUnavailableError ("cannot reach
      ..."), a locked local folder StoreUnavailableError ("store is in use by
      another process ..."); any other failure of the client raises StoreError.
    * Reading a point that is not a rechunk point in this layout (written by
      another tool) raises StoreError naming it.
    * ``write`` validates every point before the first request (bad input writes
      nothing); payload-only updates (``vector=None``) replace the whole payload
      of existing points by id without sending the vector, so it stays
      bit-for-bit the same; updating a point that does not exist is a
      StoreError, raised before anything is written.
    * Scores: cosine similarity, dot product, or the negated Euclidean distance,
      so that higher is always closer.
    * Qdrant normalises vectors of cosine collections, so ``get_vectors`` returns
      the unit vector of what was written.
    """

    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        layout: Layout = "langchain",
        *,
        batch_size: int = 256,
    ) -> None:
        super().__init__(client, collection, layout, batch_size=batch_size)
        # where the rechunk fields sit in the payload: nested under "metadata" for LangChain
        self._prefix = f"{LANGCHAIN_METADATA_KEY}." if self._layout == "langchain" else ""

    # -- errors ----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Hold the client's lock (embedded Qdrant: requests through one client run one at
        a time, from any thread) and turn client exceptions into StoreError /
        StoreUnavailableError."""
        lock = _client_lock(self._client) if self._is_embedded() else nullcontext()
        with lock:
            try:
                yield
            except RechunkError:
                raise
            except Exception as exc:
                raise self._translate(exc, action) from exc

    def _translate(self, exc: Exception, action: str) -> RechunkError:
        if isinstance(exc, ValueError) and "ollection name" in str(exc):
            return ConfigError(f"Qdrant refuses the collection name {self._collection!r}: {exc}")
        if isinstance(exc, RuntimeError) and _LOCK_TEXT in str(exc):
            return _lock_error("its path", exc)
        status = getattr(exc, "status_code", None)
        if _timed_out(exc):
            return StoreTimeoutError(
                f"cannot reach Qdrant to {action} collection {self._collection!r}: the "
                f"server did not answer in time (frozen or overloaded?): "
                f"{type(exc).__name__}: {exc}"
            )
        if is_unreachable(exc) or status in _UNAVAILABLE_STATUS:
            return StoreUnavailableError(
                f"cannot reach Qdrant to {action} collection {self._collection!r}: "
                f"{type(exc).__name__}: {exc}"
            )
        return StoreError(
            f"Qdrant failed to {action} collection {self._collection!r}: "
            f"{type(exc).__name__}: {exc}"
        )

    def _missing(self) -> NoReturn:
        raise StoreError(
            f"Qdrant collection {self._collection!r} does not exist; "
            f"call ensure_collection(dimension) first"
        )

    # -- collection ------------------------------------------------------------------------

    def _vectors(self) -> _Vectors | None:
        """The collection's vector configuration, or None when it does not exist."""
        with self._errors("read"):
            try:
                info = self._client.get_collection(self._collection)
            except Exception:
                if not self._client.collection_exists(self._collection):
                    return None
                raise
        return self._pick(info.config.params.vectors)

    def _require(self) -> _Vectors:
        vectors = self._vectors()
        if vectors is None:
            self._missing()
        return vectors

    def _pick(self, config: Any) -> _Vectors:
        """The vector this layout reads: unnamed, or ``text-dense`` for llamaindex."""
        name: str | None = None
        params = config
        if isinstance(config, dict):
            wanted = [""] if self._layout == "langchain" else [LLAMAINDEX_VECTOR_NAME, ""]
            found = [n for n in wanted if n in config]
            if not found:
                need = (
                    "an unnamed vector"
                    if self._layout == "langchain"
                    else (f"the vector {LLAMAINDEX_VECTOR_NAME!r} or an unnamed one")
                )
                raise StoreError(
                    f"Qdrant collection {self._collection!r} has the named vectors "
                    f"{sorted(config)}; layout={self._layout!r} needs {need}"
                )
            name = found[0]
            params = config[name]
        if not isinstance(params, models.VectorParams):
            raise StoreError(
                f"Qdrant collection {self._collection!r} has no dense vector rechunk can use"
            )
        distance = _FROM_QDRANT.get(params.distance)
        if distance is None:
            raise StoreError(
                f"Qdrant collection {self._collection!r} uses {params.distance} distance; "
                f"rechunk supports cosine, dot and euclid"
            )
        return _Vectors(name, params.size, distance)

    def collection_info(self) -> CollectionInfo | None:
        """Dimension, distance, point count and the model_ids of up to 256 sampled points.

        ``None`` when the collection does not exist.
        """
        vectors = self._vectors()
        if vectors is None:
            return None
        with self._errors("count the points of"):
            points = self._client.count(self._collection, exact=True).count
            model_ids = self._sampled_model_ids()
            other: Layout = "llamaindex" if self._layout == "langchain" else "langchain"
            if points and not model_ids:
                written_in = QdrantStore(self._client, self._collection, other)
                if written_in._sampled_model_ids():
                    raise StoreError(
                        f"Qdrant collection {self._collection!r} holds rechunk points in the "
                        f"{other} layout, not {self._layout}: a collection keeps one layout"
                    )
        return CollectionInfo(
            name=self._collection,
            dimension=vectors.dimension,
            distance=vectors.distance,
            points=points,
            model_ids=model_ids,
        )

    def _sampled_model_ids(self) -> frozenset[str]:
        """The model_ids of up to ``_MODEL_SAMPLE`` points, read in this store's layout."""
        records, _ = self._client.scroll(
            self._collection,
            limit=_MODEL_SAMPLE,
            with_payload=models.PayloadSelectorInclude(include=[self._path("model_id")]),
            with_vectors=False,
        )
        model_ids = {self._field(r.payload, "model_id") for r in records}
        return frozenset(m for m in model_ids if isinstance(m, str))

    def ensure_collection(self, dimension: int, distance: Distance = "cosine") -> CollectionInfo:
        """Create the collection, or check that the existing one has this dimension and distance."""
        dimension = check_dimension(dimension)
        distance = check_distance(distance)
        vectors = self._vectors()
        if vectors is None:
            self._create(dimension, distance)
            vectors = self._require()
        if (vectors.dimension, vectors.distance) != (dimension, distance):
            raise StoreError(
                f"Qdrant collection {self._collection!r} holds {vectors.dimension}-dimensional "
                f"{vectors.distance} vectors, not the {dimension}-dimensional {distance} "
                f"vectors asked for; use another collection for another model or distance"
            )
        self._ensure_indexes()
        info = self.collection_info()
        if info is None:
            self._missing()
        return info

    def _create(self, dimension: int, distance: Distance) -> None:
        params = models.VectorParams(size=dimension, distance=_TO_QDRANT[distance])
        config: models.VectorParams | dict[str, models.VectorParams] = (
            params if self._layout == "langchain" else {LLAMAINDEX_VECTOR_NAME: params}
        )
        with self._errors("create"):
            try:
                self._client.create_collection(self._collection, vectors_config=config)
            except Exception:
                if self._client.collection_exists(self._collection):
                    return  # created meanwhile by someone else: ensure_collection validates it
                raise

    def _ensure_indexes(self) -> None:
        """Give every field of :data:`_INDEXED` a keyword index, also on a collection that
        rechunk did not create (or whose index calls failed part-way)."""
        with self._errors("index"):
            schema = self._client.get_collection(self._collection).payload_schema or {}
            with warnings.catch_warnings():
                # local mode ignores payload indexes and says so; a server uses them
                warnings.filterwarnings("ignore", message="Payload indexes have no effect")
                for field in _INDEXED:
                    if self._path(field) not in schema:
                        self._client.create_payload_index(
                            self._collection,
                            self._path(field),
                            field_schema=models.PayloadSchemaType.KEYWORD,
                            wait=True,
                        )

    # -- payload helpers -------------------------------------------------------------------

    def _path(self, field: str) -> str:
        return self._prefix + field

    def _field(self, payload: dict[str, Any] | None, field: str) -> Any:
        if not payload:
            return None
        if self._layout == "langchain":
            inner = payload.get(LANGCHAIN_METADATA_KEY)
            return inner.get(field) if isinstance(inner, dict) else None
        return payload.get(field)

    def _match(self, field: str, value: str | Sequence[str]) -> models.FieldCondition:
        """``field`` equals ``value``, or (a sequence) any of its values."""
        match: models.MatchValue | models.MatchAny = (
            models.MatchValue(value=value)
            if isinstance(value, str)
            else models.MatchAny(any=list(value))
        )
        return models.FieldCondition(key=self._path(field), match=match)

    def _scroll(
        self,
        condition: models.Filter | None,
        *,
        payload: bool | models.PayloadSelectorInclude = True,
        vectors: bool | list[str] = False,
        page: int | None = None,
    ) -> Iterator[models.Record]:
        offset: Any = None
        while True:
            records, offset = self._client.scroll(
                self._collection,
                scroll_filter=condition,
                limit=page or self._batch_size,
                offset=offset,
                with_payload=payload,
                with_vectors=vectors,
            )
            yield from records
            if offset is None:
                return

    def _decode(self, point_id: Any, payload: dict[str, Any] | None) -> StoredPoint:
        return StoredPoint(
            str(point_id), from_qdrant(str(point_id), payload, self._layout, self._collection)
        )

    # -- reads -----------------------------------------------------------------------------

    def get_points(self, doc_id: str) -> list[StoredPoint]:
        """Every point of ``doc_id`` (any revision) without vectors, ordered by (ordinal, id)."""
        doc_id = check_doc_id(doc_id)
        return self.get_points_many([doc_id])[doc_id]

    def get_points_many(self, doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
        """:meth:`get_points` of each doc_id: a filtered scroll per ``4 * batch_size`` ids,
        in pages of ``32 * batch_size`` points (embedded Qdrant scans the whole collection
        for every page, so few large pages are what makes a sync of many documents fast)."""
        ids = check_doc_ids(doc_ids)
        self._require()
        points: list[StoredPoint] = []
        with self._errors("read points from"):
            for chunk in batches(ids, 4 * self._batch_size):
                condition = models.Filter(must=[self._match("doc_id", chunk)])
                records = self._scroll(condition, page=32 * self._batch_size)
                points.extend(self._decode(r.id, r.payload) for r in records)
        return by_doc(points, ids)

    def _is_embedded(self) -> bool:
        """Whether the client is embedded Qdrant (a folder or ``":memory:"``), which has no
        payload index, so that every filter scans the collection."""
        options = getattr(self._client, "init_options", None)
        if not isinstance(options, dict):
            return False
        return options.get("path") is not None or options.get("location") == ":memory:"

    def get_vectors(
        self, input_keys: Sequence[str], model_id: str
    ) -> dict[str, npt.NDArray[np.float32]]:
        """One float32 vector per input key stored by ``model_id`` (any doc); others left out.

        Read as :meth:`get_points_many` reads: ``4 * batch_size`` keys per scroll, pages
        of ``32 * batch_size`` points (vectors included). In embedded Qdrant, which checks
        every point against every key of a filter, keys numbering 1/32 of the collection
        or more are read in one pass over the model's points instead.
        """
        if isinstance(input_keys, str) or not all(type(k) is str for k in input_keys):
            raise ConfigError("input_keys must be a sequence of str")
        if type(model_id) is not str or not model_id:
            raise ConfigError(f"model_id must be a non-empty str, got {model_id!r}")
        keys = list(dict.fromkeys(input_keys))
        if not keys:
            return {}
        vectors = self._require()
        selector = models.PayloadSelectorInclude(include=[self._path("input_key")])
        wanted: bool | list[str] = True if vectors.name is None else [vectors.name]
        by_model = self._match("model_id", model_id)
        found: dict[str, npt.NDArray[np.float32]] = {}
        with self._errors("read vectors from"):
            if (
                self._is_embedded()
                and 32 * len(keys) >= self._client.count(self._collection, exact=True).count
            ):
                # one pass costs about what key filters for 1/32 of the points cost
                # (benchmarks/store_reads.py)
                scans = [models.Filter(must=[by_model])]
            else:
                scans = [
                    models.Filter(must=[self._match("input_key", chunk), by_model])
                    for chunk in batches(keys, 4 * self._batch_size)
                ]
            asked = set(keys)
            for condition in scans:
                records = self._scroll(
                    condition, payload=selector, vectors=wanted, page=32 * self._batch_size
                )
                for record in records:
                    key = self._field(record.payload, "input_key")
                    if isinstance(key, str) and key in asked and key not in found:
                        vector: Any = record.vector
                        if isinstance(vector, dict):
                            vector = vector.get(vectors.name or "")
                        if vector is not None:
                            found[key] = np.asarray(vector, dtype=np.float32)
        return found

    def doc_ids(self) -> set[str]:
        """Every doc_id that has at least one rechunk point (a point another tool wrote,
        such as a LlamaIndex node with a ``doc_id`` of its own, is not counted)."""
        self._require()
        fields = [self._path("doc_id"), self._path("input_key")]
        selector = models.PayloadSelectorInclude(include=fields)
        with self._errors("read doc ids from"):
            pairs = {
                (self._field(r.payload, "doc_id"), self._field(r.payload, "input_key"))
                for r in self._scroll(None, payload=selector)
            }
        return {doc for doc, key in pairs if isinstance(doc, str) and isinstance(key, str)}

    def search(
        self, vector: npt.NDArray[np.float32], k: int = 5
    ) -> list[tuple[StoredPoint, float]]:
        """The ``k`` nearest points, closest first; higher scores are closer."""
        k = check_k(k)
        vectors = self._require()
        query = check_query_vector(vector, vectors.dimension)
        with self._errors("search"):
            response = self._client.query_points(
                self._collection,
                query=query.tolist(),
                using=vectors.name or None,
                limit=k,
                with_payload=True,
                with_vectors=False,
            )
        sign = -1.0 if vectors.distance == "euclid" else 1.0
        return [(self._decode(p.id, p.payload), sign * float(p.score)) for p in response.points]

    # -- writes ----------------------------------------------------------------------------

    #: ``write`` and ``delete`` take ``version=``: a conditional write that never replaces,
    #: and a delete that never removes, a point of a newer version (rechunk.sync uses it).
    conditional_versions: Final = True

    def write(self, points: Sequence[PointWrite], *, version: int | None = None) -> None:
        """Upsert points with a vector; replace only the payload of those with ``vector=None``.

        Everything is validated before the first request; an empty sequence does nothing.

        With ``version`` (a document's :attr:`~rechunk.Document.version`), an existing
        point is replaced only while its stored version is absent or at most ``version``
        (Qdrant's conditional ``update_filter``, checked by the server for each point),
        so a writer of an older version never overwrites a newer one; a payload-only
        update of a point that is missing, or newer, is skipped rather than refused (the
        sync's verification finds and repairs it).
        """
        prepared = prepare_writes(points, self._layout, flat=False)
        if not prepared:
            return
        version = _check_version(version)
        vectors = self._require()
        check_dimensions(prepared, vectors.dimension, f"Qdrant collection {self._collection!r}")
        updates = [w for w in prepared if w.vector is None]
        upserts = [w for w in prepared if w.vector is not None]
        guard = None if version is None else self._not_newer(version)
        with self._errors("write to"):
            if version is None:
                self._check_exist([w.id for w in updates])
            elif self._is_embedded():
                # the client's lock is held for this whole call: read, check, write at once
                allowed = set(self._not_newer_ids([w.id for w in updates], version))
                updates = [w for w in updates if w.id in allowed]
            for chunk in batches(upserts, self._batch_size):
                self._client.upsert(
                    self._collection,
                    points=[
                        models.PointStruct(
                            id=w.id,
                            vector=self._vector_struct(w.vector, vectors.name),
                            payload=qdrant_payload(w.id, w.payload, self._layout),
                        )
                        for w in chunk
                    ],
                    wait=True,
                    update_filter=guard,
                )
            for chunk in batches(updates, self._batch_size):
                self._client.batch_update_points(
                    self._collection,
                    update_operations=[
                        models.OverwritePayloadOperation(
                            overwrite_payload=self._set_payload(w, guard)
                        )
                        for w in chunk
                    ],
                    wait=True,
                )

    def _set_payload(self, write: Any, guard: models.Filter | None) -> models.SetPayload:
        """Replace one point's payload: by id, or (a server, with a version) by a filter that
        also holds the version condition, so that the server checks it as it writes."""
        payload = qdrant_payload(write.id, write.payload, self._layout)
        if guard is None or self._is_embedded():
            return models.SetPayload(payload=payload, points=[write.id])
        only = models.Filter(must=[models.HasIdCondition(has_id=[write.id]), guard])
        return models.SetPayload(payload=payload, filter=only)

    def _not_newer(self, version: int) -> models.Filter:
        """Points whose stored version is absent or at most ``version``."""
        field = self._path("version")
        return models.Filter(
            should=[
                models.IsEmptyCondition(is_empty=models.PayloadField(key=field)),
                models.FieldCondition(key=field, range=models.Range(lte=version)),
            ]
        )

    def _not_newer_ids(self, ids: list[str], version: int) -> list[str]:
        """Those of ``ids`` that exist with a version absent or at most ``version``."""
        found: list[str] = []
        selector = models.PayloadSelectorInclude(include=[self._path("version")])
        for chunk in batches(ids, self._batch_size):
            records = self._client.retrieve(
                self._collection, ids=list(chunk), with_payload=selector, with_vectors=False
            )
            for record in records:
                stored = self._field(record.payload, "version")
                if not isinstance(stored, int) or stored <= version:
                    found.append(str(record.id))
        return found

    @staticmethod
    def _vector_struct(vector: Any, name: str | None) -> Any:
        values = vector.tolist()
        return values if name is None else {name: values}

    def _check_exist(self, ids: list[str]) -> None:
        """StoreError (before any write) when a payload-only update targets a missing point."""
        present: set[str] = set()
        for chunk in batches(ids, self._batch_size):
            records = self._client.retrieve(
                self._collection, ids=list(chunk), with_payload=False, with_vectors=False
            )
            present.update(str(r.id) for r in records)
        missing = [i for i in ids if i not in present]
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise StoreError(
                f"payload-only update of {len(missing)} point(s) missing from Qdrant collection "
                f"{self._collection!r}: {shown}; write them with a vector; nothing was written"
            )

    def delete(self, ids: Sequence[str], *, version: int | None = None) -> None:
        """Delete points by id; ids that do not exist are ignored.

        With ``version``, only points whose stored version is absent or at most
        ``version`` are deleted (a server checks the condition as it deletes; embedded
        Qdrant under the client's lock), so a point a newer writer wrote meanwhile stays.
        """
        unique = check_ids(ids)
        if not unique:
            return
        version = _check_version(version)
        self._require()
        with self._errors("delete from"):
            if version is not None and self._is_embedded():
                unique = self._not_newer_ids(unique, version)
            for chunk in batches(unique, self._batch_size):
                selector: Any = models.PointIdsList(points=list(chunk))
                if version is not None and not self._is_embedded():
                    condition = models.HasIdCondition(has_id=list(chunk))
                    selector = models.FilterSelector(
                        filter=models.Filter(must=[condition, self._not_newer(version)])
                    )
                self._client.delete(self._collection, points_selector=selector, wait=True)

    # -- generations -----------------------------------------------------------------------

    def aliases(self) -> dict[str, str]:
        """Every alias of the client's Qdrant, as ``{alias: collection}``."""
        with self._errors("list the aliases of"):
            described = self._client.get_aliases().aliases
        return {a.alias_name: a.collection_name for a in described}

    def collections(self) -> list[str]:
        """The names of every collection of the client's Qdrant (aliases not included)."""
        with self._errors("list the collections of"):
            return [c.name for c in self._client.get_collections().collections]

    def is_alias(self) -> bool:
        """True when this store's name is an alias rather than a collection."""
        return self._collection in self.aliases()

    def switch_alias(self, collection: str) -> None:
        """Point this store's name, as an alias, at ``collection`` in one atomic request.

        Readers that query the alias see the old collection or the new one, never
        neither. The name must not be a collection itself.
        """
        alias = self._collection
        aliases = self.aliases()
        with self._errors("read"):
            is_collection = alias not in aliases and self._client.collection_exists(alias)
        if is_collection:
            raise StoreError(
                f"{alias!r} is a collection, not an alias, so it cannot be switched; "
                "sync into a new alias name (rechunk sync creates one) or rename it"
            )
        operations: list[Any] = []
        if alias in aliases:
            operations.append(
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
            )
        operations.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=collection, alias_name=alias)
            )
        )
        with self._errors("switch the alias to"):
            self._client.update_collection_aliases(change_aliases_operations=operations)

    def drop_collection(self) -> None:
        """Delete the collection (not an alias) and every point in it."""
        with self._errors("drop"):
            self._client.delete_collection(self._collection)
