"""rechunk's :class:`~rechunk.sync.store.VectorStore` on Qdrant (``pip install 'rechunk[qdrant]'``).

Works with every kind of ``QdrantClient``: a server (``url=``), or local mode
(``":memory:"``, ``path=``). The collection is laid out so that LangChain's or
LlamaIndex's own Qdrant vector store reads it directly (see
:mod:`rechunk.adapters._layout`); llama_index and langchain need not be installed.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import itertools
import json
import os
import pickle
import shlex
import sqlite3
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator, Sequence
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
    check_doc_ids,
    check_ids,
    check_k,
    check_query_vector,
    check_version,
    from_qdrant,
    is_timeout,
    is_unreachable,
    layout_vector,
    prepare_writes,
    qdrant_payload,
    qdrant_vouches,
    vouch_fields,
)
from rechunk.errors import (
    CollectionMismatchError,
    ConfigError,
    RechunkError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from rechunk.sync.store import (
    SUPERSEDED_KEY,
    SUPERSEDED_MARK,
    CollectionInfo,
    Distance,
    PointWrite,
    StoredPoint,
    current_hits,
)

require("qdrant_client", "qdrant", package="qdrant-client")

from pydantic import ValidationError  # noqa: E402  (qdrant-client's own dependency)
from qdrant_client import models  # noqa: E402  (after the check that names the extra)

if TYPE_CHECKING:
    import numpy.typing as npt
    from qdrant_client import QdrantClient

__all__ = ["EMBEDDED_POINTS_ADVICE", "QdrantStore", "local_client"]

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


#: Points past which ``rechunk status`` advises a Qdrant server over embedded Qdrant: local
#: mode loads every point into memory when a process opens the folder (about 2 s and
#: 270 MB per 10,000 points of MiniLM-sized chunks in benchmarks/scale.py).
EMBEDDED_POINTS_ADVICE: Final = 100_000
#: qdrant-client's own warning (three lines on stderr) once an embedded collection holds
#: 20,000 points: rechunk silences it and advises a server past EMBEDDED_POINTS_ADVICE
#: points instead (:meth:`QdrantStore.size_advice`, shown by ``rechunk sync`` and ``status``).
_LOCAL_MODE_WARNING: Final = "Local mode is not recommended"


@contextmanager
def _quiet_local_mode() -> Iterator[None]:
    """Silence :data:`_LOCAL_MODE_WARNING` while inside."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LOCAL_MODE_WARNING, category=UserWarning)
        yield


#: qdrant-client local mode's threshold for normalising a cosine vector (f32 epsilon)
_EPSILON: Final = 1.1920929e-7

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


#: embedded clients made by :func:`local_client`, whose collection files rechunk tunes
_TUNED_CLIENTS: weakref.WeakSet[Any] = weakref.WeakSet()


@atexit.register
def _close_local_clients() -> None:
    """Close the embedded clients still open as the interpreter exits: a client a script
    kept in a global was closed by its ``__del__`` during shutdown, which printed an
    ignored ImportError ("sys.meta_path is None") under every such script's output."""
    for client in list(_TUNED_CLIENTS):
        with contextlib.suppress(Exception):
            client.close()


def local_client(path: str | os.PathLike[str]) -> QdrantClient:
    """``QdrantClient(path=path)``; :class:`StoreUnavailableError` when the folder is locked.

    Qdrant's local mode takes an exclusive lock on the folder when the client is
    created; a second client on the same folder, in this process or another,
    fails with a ``RuntimeError`` until the first one is closed.

    Local mode loads every point of the folder as the client is created, and kept each
    vector as a list of Python floats until the last one was read (about 9 KB a MiniLM
    vector, and the memory stayed fragmented after). Here each vector becomes a float32
    row as it is read (:func:`_lean_load`), and Python's cyclic garbage collector is
    paused meanwhile (each full collection walked every object made so far). Opening
    181,600 points took 10-13 s and 1.9 GB instead of 20-30 s and 4.8 GB (4.3 GB
    held after). The vectors are held with room for new points (see :func:`_reserve`),
    so a sync that adds a few points to a large collection copies none of them, nor the
    collection's per-point flags (local mode copies those for every point it adds: see
    :class:`_Flags`).

    Local mode stores each point in its own SQLite transaction, and by default
    SQLite waits for the disk on every one (about 110 points/s here). A
    :class:`QdrantStore` on a client made here switches each collection's file
    to write-ahead logging with ``synchronous=NORMAL`` before it writes (about
    10x faster): a killed process loses nothing, and a power cut can lose the
    last writes but never corrupts the file; the next sync, which plans from what
    the collection holds, writes them again.
    """
    from qdrant_client import QdrantClient

    try:
        with _lean_load(), _collector_paused(), _quiet_local_mode():
            client = QdrantClient(path=os.fspath(path))
    except RuntimeError as exc:
        if _LOCK_TEXT in str(exc):
            raise _lock_error(path, exc) from exc
        raise StoreError(f"cannot open the Qdrant folder {path}: {exc}") from exc
    except (OSError, sqlite3.Error) as exc:  # a full disk, a read-only or damaged folder
        # local mode writes its lock and files even to read: say so of a read-only folder
        hint = (
            ""
            if os.access(path, os.W_OK)
            else (
                " (the folder is read-only to this process, and local mode writes in it even "
                "to read: copy it somewhere writable, or make it writable)"
            )
        )
        raise StoreError(
            f"cannot open the Qdrant folder {path}: {type(exc).__name__}: {exc}{hint}"
        ) from exc
    except ValidationError as exc:  # settings this client does not know (a newer one's)
        raise StoreError(
            f"cannot open the Qdrant folder {path}: its meta.json holds settings this "
            f"qdrant-client cannot read ({type(exc).__name__}); was it written by a newer "
            "qdrant-client? Open it with that version"
        ) from exc
    except (
        pickle.UnpicklingError,
        json.JSONDecodeError,
        EOFError,
        KeyError,
        TypeError,
        AttributeError,
    ) as exc:
        # a damaged point record or meta.json: name the error, never its message (a
        # pickle's quotes the stored bytes, and points hold document text)
        raise StoreError(
            f"cannot open the Qdrant folder {path}: it is damaged ({type(exc).__name__} "
            "reading it); move it aside and sync again: a new folder is made, and the "
            "inputs the reuse cache holds are not embedded again"
        ) from exc
    _TUNED_CLIENTS.add(client)
    for name in getattr(getattr(client, "_client", None), "collections", None) or {}:
        collection = _local_collection(client, name)
        if collection is not None:
            _reserve(collection, 0)  # float32 with room, as the folder is loaded
            _normalise_loaded(collection)
    return client


_LOAD_LOCK = threading.Lock()


def _dense(vector: Any) -> bool:
    return isinstance(vector, list) and bool(vector) and isinstance(vector[0], (float, int))


def _as_rows(vector: Any) -> Any:
    """A stored point's vector with each dense one as a float32 array (the unnamed one
    under local mode's name for it, ``""``); sparse and multi-vectors as they are."""
    with contextlib.suppress(TypeError, ValueError):
        if _dense(vector):
            return {"": np.array(vector, dtype=np.float32)}
        if isinstance(vector, dict):
            return {k: np.array(v, dtype=np.float32) if _dense(v) else v for k, v in vector.items()}
    return vector


@contextmanager
def _lean_load() -> Iterator[None]:
    """While inside, embedded Qdrant's folder loader hands each stored point over with
    its dense vectors as float32 arrays (:func:`_as_rows`): local mode collects them in a
    list and stacks them once all are read, which then makes a float32 array of them
    rather than a float64 one, and no list of floats outlives its point. Everything else
    of the loader (which rows are current, legacy keys) is qdrant-client's own. Nothing
    changes where the loader is not where this module expects it."""
    try:
        from qdrant_client.local.persistence import CollectionPersistence
    except ImportError:
        yield
        return
    original = getattr(CollectionPersistence, "load", None)
    if original is None:
        yield
        return

    def load(self: Any) -> Iterator[Any]:
        for point in original(self):
            with contextlib.suppress(AttributeError, TypeError, ValueError):  # a frozen model
                point.vector = _as_rows(point.vector)
            yield point

    with _LOAD_LOCK:
        CollectionPersistence.load = load  # type: ignore[method-assign]
        try:
            yield
        finally:
            CollectionPersistence.load = original  # type: ignore[method-assign]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside, back on after (left as it was where
    the process had turned it off). Nothing a load makes is lost: cycles are collected
    once the collector runs again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _local_collection(client: Any, name: str) -> Any:
    """The in-process collection object behind an embedded client (aliases resolved), or
    None where it is not there or not as this module knows it (qdrant-client internals:
    ``payload`` and ``ids_inv`` lists, a ``deleted`` mask, one entry per stored point)."""
    inner = getattr(client, "_client", None)
    get = getattr(inner, "_get_collection", None)
    if get is None:
        return None
    try:
        collection = get(name)
    except (ValueError, KeyError, RuntimeError):
        return None
    payload = getattr(collection, "payload", None)
    ids_inv = getattr(collection, "ids_inv", None)
    deleted = getattr(collection, "deleted", None)
    if not (isinstance(payload, list) and isinstance(ids_inv, list)):
        return None
    if not isinstance(deleted, np.ndarray) or len(payload) != len(ids_inv):
        return None
    tables = (getattr(collection, n, None) for n in ("ids", "vectors", "deleted_per_vector"))
    if not all(isinstance(t, dict) for t in tables):
        return None
    return collection


def _tune(collection: Any) -> None:
    """Write-ahead logging with ``synchronous=NORMAL`` for the SQLite file of one embedded
    collection of a :func:`local_client`; nothing where the file is not as expected."""
    connection = getattr(getattr(collection, "storage", None), "storage", None)
    if isinstance(connection, sqlite3.Connection):
        with contextlib.suppress(sqlite3.Error):
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")


def _reserve(collection: Any, extra: int) -> None:
    """Room in an embedded collection's dense vector arrays for ``extra`` more points, held
    as float32.

    Loaded from disk, an array holds exactly the stored points (as float64 where
    qdrant-client built it from lists of floats, not through :func:`_lean_load`; a
    collection it creates holds float32, and every vector it stores came from float32,
    so the conversion is exact). qdrant-client grows a full one
    with ``np.resize``, which took 2.4 s for 18,000 MiniLM vectors here on the first point
    a process added (a one-paragraph edit), and again at every doubling of an initial
    sync. Growing it here is cheaper, and Qdrant reads only the rows of its points. Grown
    by an eighth (at least 1,024 rows), so the memory held for room stays small;
    :func:`local_client` calls this as it opens the folder, so a sync that adds a few
    points copies nothing. A float32 array is grown in place where nothing else refers
    to it (:func:`_grown_in_place`), else copied. The "deleted" flags are held as
    :class:`_Flags`, so that adding a point copies none of them either."""
    need = len(collection.ids_inv) + extra + 1  # Qdrant grows when the next row is taken
    for name in list(collection.vectors):
        array = collection.vectors[name]
        if not (isinstance(array, np.ndarray) and array.ndim == 2):
            continue
        if array.shape[0] >= need and array.dtype == np.float32:
            continue
        rows = max(array.shape[0], need + max(need // 8, 1024))
        if array.dtype == np.float32:
            del array  # the collection's reference alone, for numpy's check
            if _grown_in_place(collection.vectors, name, rows):
                continue
            array = collection.vectors[name]
        grown = np.empty((rows, array.shape[1]), dtype=np.float32)
        grown[: array.shape[0]] = array
        collection.vectors[name] = grown
    if hasattr(collection, "deleted"):
        collection.deleted = _appendable(collection.deleted)
    for name, flags in list(getattr(collection, "deleted_per_vector", {}).items()):
        collection.deleted_per_vector[name] = _appendable(flags)


#: deleted points an embedded collection holds in memory before :func:`_compact` drops them
_COMPACT_MIN: Final = 1024


def _compact(collection: Any) -> bool:
    """Drop the deleted points an embedded collection still holds in memory; whether it did.

    Local mode deletes a point by setting its "deleted" flag: the point leaves the
    folder's file at once (the next process never loads it), but its id, payload (the
    chunk's text included) and vector row stay in this process's memory until it ends,
    and every search still computes a distance to that row. A process that keeps the
    collection open while documents change (``rechunk watch``) held every point it ever
    wrote: its memory grew by 167 MB an hour in the watch soak, and its searches slowed
    with it. Once the deleted points number ``_COMPACT_MIN`` and at least the live ones,
    the live ones are copied, in their order, into new lists and arrays (a copy of the
    live points: amortised over at least as many deletions), so memory stays within
    twice the live points plus ``_COMPACT_MIN``. Point ids do not change, and each
    point's id, payload, vector and flags move together, so what every read and search
    returns is the same as before; a :class:`_LocalIndex` (keyed by id) stays current.
    Nothing is done where the collection holds sparse or multi-vectors (rechunk writes
    neither) or its tables are not as this module knows them. Call it holding the
    client's lock."""
    if collection.sparse_vectors or collection.multivectors:
        return False
    total = len(collection.ids_inv)
    deleted = np.asarray(collection.deleted).view(np.ndarray)
    if deleted.shape != (total,) or len(collection.ids) != total:
        return False
    flags = {n: np.asarray(f).view(np.ndarray) for n, f in collection.deleted_per_vector.items()}
    if any(f.shape != (total,) for f in flags.values()):
        return False
    if any(
        not (isinstance(a, np.ndarray) and a.ndim == 2 and a.shape[0] >= total)
        for a in collection.vectors.values()
    ):
        return False
    dead = int(np.count_nonzero(deleted))
    if dead < max(_COMPACT_MIN, total - dead):
        return False
    indexes = list(_INDEXES.get(collection, {}).values())
    current = [i._seen == i._fingerprint() for i in indexes]
    keep = np.flatnonzero(deleted == 0)
    rows = keep.tolist()
    ids_inv = [collection.ids_inv[i] for i in rows]
    collection.payload = [collection.payload[i] for i in rows]
    collection.ids_inv = ids_inv
    collection.ids = {point_id: i for i, point_id in enumerate(ids_inv)}
    for name in list(collection.vectors):
        collection.vectors[name] = collection.vectors[name][keep]
    collection.deleted = np.zeros(len(rows), dtype=deleted.dtype)
    for name, f in flags.items():
        collection.deleted_per_vector[name] = f[keep]
    _reserve(collection, 0)
    for index, was_current in zip(indexes, current):
        if was_current:
            index._seen = index._fingerprint()
        else:  # its count of points could match the new one by chance
            index.invalidate()
    return True


def _grown_in_place(vectors: dict[str, Any], name: str, rows: int) -> bool:
    """Resize ``vectors[name]`` to ``rows`` rows in place; False (nothing changed) where
    numpy refuses because something else refers to the array (a view, a caller's
    reference) or it does not own its memory.

    numpy reallocates, which moves a large array's pages rather than copying them: the
    new rows are the only memory touched. A copy into a new array touches all of it,
    and here a process's first touch of memory is system time: in an initial sync of
    90,809 points the array's growth took 6.0-6.3 s copied, 0.12 s in place."""
    dim = vectors[name].shape[1]
    try:
        vectors[name].resize((rows, dim), refcheck=True)
    except ValueError:
        return False
    return True


class _Room:
    """The buffer behind a :class:`_Flags` array: ``used`` of its slots hold flags."""

    __slots__ = ("buffer", "used")

    def __init__(self, flags: npt.NDArray[Any]) -> None:
        self.buffer = np.empty(max(2 * len(flags), 1024), dtype=flags.dtype)
        self.buffer[: len(flags)] = flags
        self.used = len(flags)

    def view(self) -> _Flags:
        flags = self.buffer[: self.used].view(_Flags)
        flags.room = self
        return flags

    def append(self, flags: _Flags, value: Any) -> _Flags:
        """``np.append(flags, value)``: the same values and dtype, in amortised constant
        time when ``flags`` is this room's newest view (else a copy, as numpy makes)."""
        dtype = np.result_type(flags.dtype, np.asarray(value).dtype)
        newest = (
            flags.shape[0] == self.used
            and flags.__array_interface__["data"][0] == self.buffer.__array_interface__["data"][0]
        )
        if not newest or dtype != self.buffer.dtype:
            return _Room(np.append(flags.view(np.ndarray), value)).view()
        if self.used == len(self.buffer):
            grown = np.empty(2 * len(self.buffer), dtype=dtype)
            grown[: self.used] = self.buffer[: self.used]
            self.buffer = grown
        self.buffer[self.used] = value
        self.used += 1
        return self.view()


class _Flags(np.ndarray[Any, Any]):
    """A 1-d array to which ``np.append(flags, value)`` adds in amortised constant time.

    Embedded Qdrant adds a point's "deleted" flags with ``np.append``, which copies the
    whole array: each point added to a collection of N points copied 2 x 8 x N bytes
    (0.3 ms a point at 180,000 points: the part of an initial sync that grew with the
    collection). Held as this, the flags are appended into room kept behind them, and
    every other use sees a plain array of the same values and dtype (an array numpy
    derives from one, a slice or a negation, is a fixed one)."""

    room: _Room | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self.room = None

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if (
            func is np.append
            and self.room is not None
            and len(args) == 2
            and args[0] is self
            and not kwargs
            and np.ndim(args[1]) == 0
        ):
            return self.room.append(self, args[1])
        return super().__array_function__(func, types, args, kwargs)


def _appendable(flags: Any) -> Any:
    """``flags`` as :class:`_Flags` (itself when it is one already, or not a 1-d array)."""
    if isinstance(flags, _Flags) and flags.room is not None:
        return flags
    if not (isinstance(flags, np.ndarray) and flags.ndim == 1):
        return flags
    return _Room(flags).view()


def _is_cosine(collection: Any, name: str) -> bool:
    try:
        params = collection.get_vector_params(name)
    except (AttributeError, ValueError, KeyError):
        return False
    return getattr(params, "distance", None) == models.Distance.COSINE


def _normalise_loaded(collection: Any) -> None:
    """Normalise the loaded rows of each dense vector of a cosine collection (see
    :func:`_normalise`)."""
    for name, array in collection.vectors.items():
        if isinstance(array, np.ndarray) and array.ndim == 2 and _is_cosine(collection, name):
            _normalise(array[: len(collection.ids_inv)])


def _normalise(rows: npt.NDArray[np.float32]) -> None:
    """Unit rows, in place, as Qdrant stores the vectors of a cosine collection. Local mode
    normalises a vector as it is written but loads the caller's raw vector from disk, so
    after a reopen a vector that was not of unit length came back scaled (in ``get_vectors``
    and in search scores); rows of (almost) zero length are left as they are, as Qdrant
    does."""
    with np.errstate(over="ignore", invalid="ignore"):  # a stored vector beyond float32's
        norms = np.linalg.norm(rows, axis=1, keepdims=True)  # range: the vector checks judge it
        np.divide(rows, norms, out=rows, where=norms > _EPSILON)


def _vector_of(record: models.Record, name: str | None) -> npt.NDArray[np.float32] | None:
    """The dense vector rechunk uses (unnamed, or ``name``) of a record read with vectors."""
    vector: Any = record.vector
    if isinstance(vector, dict):
        vector = vector.get(name or "")
    return None if vector is None else np.asarray(vector, dtype=np.float32)


class _LocalIndex:
    """Which points of one embedded Qdrant collection hold each doc_id and input key.

    Embedded Qdrant has no payload index: a filtered read checks every point in
    Python, once per page, so reading the points of N documents cost N x points.
    The index is built in one pass over the collection's payloads (about 1 s per
    million points), then kept current by every :class:`QdrantStore` of the
    process that writes through the same client; reads then fetch points by id,
    in time linear in the points read. A count of the collection's stored and
    deleted points is checked before each use: a point that other code (another
    library on the same client) added or deleted makes the next use rebuild it.
    """

    def __init__(self, collection: Any, nested: bool) -> None:
        self.collection = collection
        self._nested = nested
        self.by_doc: dict[str, set[str]] = {}
        self.by_key: dict[str, set[str]] = {}
        self.of: dict[str, tuple[str | None, str | None]] = {}
        self._seen: tuple[int, int] = (-1, -1)

    def _fingerprint(self) -> tuple[int, int]:
        c = self.collection
        return len(c.ids_inv), int(np.count_nonzero(c.deleted))

    def _fields(self, payload: Any) -> tuple[str | None, str | None]:
        if not isinstance(payload, dict):
            return None, None
        if self._nested:
            payload = payload.get(LANGCHAIN_METADATA_KEY)
            if not isinstance(payload, dict):
                return None, None
        doc, key = payload.get("doc_id"), payload.get("input_key")
        return (doc if isinstance(doc, str) else None, key if isinstance(key, str) else None)

    def fresh(self) -> _LocalIndex:
        """This index, rebuilt first when the collection changed behind it."""
        if self._fingerprint() != self._seen:
            self.by_doc.clear()
            self.by_key.clear()
            self.of.clear()
            c = self.collection
            alive = (~c.deleted.astype(bool)).tolist()
            fields, by_doc, by_key = self._fields, self.by_doc, self.by_key
            for point_id, payload, live in zip(c.ids_inv, c.payload, alive):
                if live:
                    point_id = str(point_id)
                    doc, key = self.of[point_id] = fields(payload)
                    if doc is not None:
                        by_doc.setdefault(doc, set()).add(point_id)
                    if key is not None:
                        by_key.setdefault(key, set()).add(point_id)
            self._seen = self._fingerprint()
        return self

    def _add(self, point_id: str, doc: str | None, key: str | None) -> None:
        self._remove(point_id)
        self.of[point_id] = (doc, key)
        if doc is not None:
            self.by_doc.setdefault(doc, set()).add(point_id)
        if key is not None:
            self.by_key.setdefault(key, set()).add(point_id)

    def _remove(self, point_id: str) -> None:
        doc, key = self.of.pop(point_id, (None, None))
        for table, value in ((self.by_doc, doc), (self.by_key, key)):
            if value is not None:
                ids = table.get(value)
                if ids is not None:
                    ids.discard(point_id)
                    if not ids:
                        del table[value]

    def wrote(self, points: Sequence[tuple[str, str, str]]) -> None:
        """Record ``(point id, doc_id, input_key)`` of points just written."""
        for point_id, doc, key in points:
            self._add(point_id, doc, key)
        self._seen = self._fingerprint()

    def invalidate(self) -> None:
        self._seen = (-1, -1)

    def deleted(self, ids: Sequence[str]) -> None:
        for point_id in ids:
            self._remove(point_id)
        self._seen = self._fingerprint()

    def _live(self, point_id: str) -> int | None:
        idx = self.collection.ids.get(point_id)
        return None if idx is None or self.collection.deleted[idx] else int(idx)

    def payloads(self, ids: Iterable[str]) -> Iterator[tuple[str, Any]]:
        """``(id, payload)`` of those of ``ids`` that exist, read in place (what local
        mode's ``retrieve`` does, without a model object and a deep copy per point). The
        payloads are embedded Qdrant's own: read them, never change or hand them out
        (decoding copies what it keeps, see ``_layout.detached``)."""
        for point_id in ids:
            idx = self._live(point_id)
            if idx is not None:
                yield point_id, self.collection.payload[idx]

    def vector(self, point_id: str, name: str | None) -> npt.NDArray[np.float32] | None:
        """The dense vector ``name`` (None: the unnamed one) of a point, as a copy."""
        idx = self._live(point_id)
        table = self.collection.vectors.get(name or "")
        gone = self.collection.deleted_per_vector.get(name or "")
        if idx is None or table is None or gone is None or gone[idx]:
            return None
        return np.array(table[idx], dtype=np.float32)

    def rechunk_docs(self) -> set[str]:
        return {doc for doc, key in self.of.values() if doc is not None and key is not None}


#: one index per embedded collection object and layout
_INDEXES: weakref.WeakKeyDictionary[Any, dict[bool, _LocalIndex]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _Vectors:
    """The dense vector rechunk uses in an existing collection."""

    name: str | None  # None: the collection's single unnamed vector
    dimension: int
    distance: Distance


class QdrantStore(StoreBase["QdrantClient"]):
    """A Qdrant collection as a rechunk :class:`~rechunk.sync.store.VectorStore`.

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
        lock = _client_lock(self._client) if self.is_embedded() else nullcontext()
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
        if is_timeout(exc):
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
            name = layout_vector(self._layout, config, f"Qdrant collection {self._collection!r}")
            params = config[name]
        if not isinstance(params, models.VectorParams):
            raise CollectionMismatchError(
                f"Qdrant collection {self._collection!r} has no dense vector rechunk can use"
            )
        distance = _FROM_QDRANT.get(params.distance)
        if distance is None:
            raise CollectionMismatchError(
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
        """The model_ids of up to ``_MODEL_SAMPLE`` points that have one in this store's
        layout. Points without one (another tool's) are passed over however many come
        first, so they cannot hide which model wrote rechunk's vectors."""
        return frozenset(itertools.islice(self._model_ids(), _MODEL_SAMPLE))

    def other_model(self, model_id: str) -> str | None:
        """The model_id of a rechunk point in the collection that ``model_id`` did not
        write, or None: every point is looked at (:meth:`collection_info` samples), so a
        sync that found the collection without rechunk points can prove, once it has
        published, that no other model's sync wrote into it meanwhile."""
        with self._errors("read the model_ids of"):
            return next(self._model_ids(besides=model_id), None)

    def _model_ids(self, besides: str | None = None) -> Iterator[str]:
        """The model_ids of the points that have one in this store's layout, point by
        point, ``besides`` left out: every point in embedded Qdrant (through its index:
        0.3 s at 200,000 points, where a filtered scroll took 6 s), else the first
        ``_MODEL_SAMPLE`` a filtered scroll finds (a server applies the filter to all)."""
        path = self._path("model_id")
        index = self._index()
        payloads: Iterable[Any]
        if index is not None:  # a scroll sorts every point id first
            keyed = (pid for pid, (_, key) in index.of.items() if key is not None)
            payloads = (p for _, p in index.payloads(keyed))
        else:
            left_out: list[Any] = [models.IsEmptyCondition(is_empty=models.PayloadField(key=path))]
            if besides is not None:
                left_out.append(
                    models.FieldCondition(key=path, match=models.MatchValue(value=besides))
                )
            records, _ = self._client.scroll(
                self._collection,
                scroll_filter=models.Filter(must_not=left_out),
                limit=_MODEL_SAMPLE,
                with_payload=models.PayloadSelectorInclude(include=[path]),
                with_vectors=False,
            )
            payloads = (r.payload for r in records)
        found = (self._field(p, "model_id") for p in payloads)
        return (m for m in found if isinstance(m, str) and m != besides)

    def ensure_collection(self, dimension: int, distance: Distance = "cosine") -> CollectionInfo:
        """Create the collection, or check that the existing one has this dimension and distance."""
        dimension = check_dimension(dimension)
        distance = check_distance(distance)
        vectors = self._vectors()
        if vectors is None:
            self._create(dimension, distance)
            vectors = self._require()
        if (vectors.dimension, vectors.distance) != (dimension, distance):
            raise CollectionMismatchError(
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

    def _decode(self, point_id: Any, payload: dict[str, Any] | None) -> StoredPoint | None:
        """The point, or None for one another tool wrote (skipped, see ``foreign_points``)."""
        pid = str(point_id)
        return self._decoded(pid, lambda: from_qdrant(pid, payload, self._layout, self._collection))

    # -- reads -----------------------------------------------------------------------------

    def get_points_many(self, doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
        """:meth:`get_points` of each doc_id: a filtered scroll per ``4 * batch_size`` ids,
        in pages of ``32 * batch_size`` points (embedded Qdrant scans the whole collection
        for every page, so few large pages are what makes a sync of many documents fast)."""
        ids = check_doc_ids(doc_ids)
        self._require()
        points: list[StoredPoint] = []
        with self._errors("read points from"):
            index = self._index()
            if index is not None:
                wanted = [p for d in ids for p in index.by_doc.get(d, ())]
                decoded = (self._decode(i, p) for i, p in index.payloads(wanted))
                points.extend(p for p in decoded if p is not None)
                return by_doc(points, ids)
            for chunk in batches(ids, 4 * self._batch_size):
                condition = models.Filter(must=[self._match("doc_id", chunk)])
                records = self._scroll(condition, page=32 * self._batch_size)
                decoded = (self._decode(r.id, r.payload) for r in records)
                points.extend(p for p in decoded if p is not None)
        return by_doc(points, ids)

    def is_embedded(self) -> bool:
        """Whether the client is embedded Qdrant (a folder or ``":memory:"``), which has no
        payload index, so that every filter scans the collection."""
        options = getattr(self._client, "init_options", None)
        if not isinstance(options, dict):
            return False
        return options.get("path") is not None or options.get("location") == ":memory:"

    def size_advice(self, points: int | None = None) -> str | None:
        """rechunk's advice when this embedded collection holds more than
        :data:`EMBEDDED_POINTS_ADVICE` points (``points``, else counted), in place of
        qdrant-client's warning past 20,000; None for a server or a smaller collection."""
        if not self.is_embedded():
            return None
        if points is None:
            info = self.collection_info()
            points = info.points if info is not None else 0
        if points <= EMBEDDED_POINTS_ADVICE:
            return None
        folder = (getattr(self._client, "init_options", None) or {}).get("path") or "DIR"
        source = shlex.quote(f"qdrant:{folder}")
        collection = "" if self._collection == "rechunk" else f" --collection {self._collection}"
        return (
            f"embedded Qdrant holds {points:,} points (more than {EMBEDDED_POINTS_ADVICE:,}): "
            "every process that opens the folder loads them all into memory first; move the "
            "collection to a Qdrant server (--store qdrant+http://HOST:6333) or a Chroma server, "
            "or to Qdrant Edge, embedded as this store is but opened without loading it "
            f"(rechunk sync PATH --store qdrant-edge:DIR --reuse-from {source}{collection}: "
            "nothing is embedded again)"
        )

    def _index(self) -> _LocalIndex | None:
        """The embedded collection's :class:`_LocalIndex`, current (call it holding the
        client's lock); None for a server, or where the internals are not as expected."""
        if not self.is_embedded():
            return None
        collection = _local_collection(self._client, self._collection)
        if collection is None:
            return None
        tables = _INDEXES.setdefault(collection, {})
        nested = self._layout == "langchain"
        index = tables.get(nested)
        if index is None:
            if self._client in _TUNED_CLIENTS:
                _tune(collection)
            index = tables[nested] = _LocalIndex(collection, nested)
        return index.fresh()

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
        # the content too: a vector is handed out only for the key its text was embedded as
        fields = [self._path("input_key"), self._path("model_id"), *vouch_fields(self._layout)]
        selector = models.PayloadSelectorInclude(include=fields)
        wanted: bool | list[str] = True if vectors.name is None else [vectors.name]
        by_model = self._match("model_id", model_id)
        found: dict[str, npt.NDArray[np.float32]] = {}
        with self._errors("read vectors from"):
            index = self._index()
            if index is not None:
                wanted_ids = [p for k in keys for p in index.by_key.get(k, ())]
                for point_id, payload in index.payloads(wanted_ids):
                    if self._field(payload, "model_id") != model_id:
                        continue
                    key = qdrant_vouches(payload, self._layout)
                    if key is None or key in found:
                        continue
                    vector = index.vector(point_id, vectors.name)
                    if vector is not None:
                        found[key] = vector
                return found
            if (
                self.is_embedded()
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
                    key = qdrant_vouches(record.payload, self._layout)
                    if key is not None and key in asked and key not in found:
                        vector = _vector_of(record, vectors.name)
                        if vector is not None:
                            found[key] = vector
        return found

    def doc_ids(self) -> set[str]:
        """Every doc_id that has at least one rechunk point (a point another tool wrote,
        such as a LlamaIndex node with a ``doc_id`` of its own, is not counted)."""
        self._require()
        fields = [self._path("doc_id"), self._path("input_key")]
        selector = models.PayloadSelectorInclude(include=fields)
        with self._errors("read doc ids from"):
            index = self._index()
            if index is not None:
                return index.rechunk_docs()
            pairs = {
                (self._field(r.payload, "doc_id"), self._field(r.payload, "input_key"))
                for r in self._scroll(None, payload=selector)
            }
        return {doc for doc, key in pairs if isinstance(doc, str) and isinstance(key, str)}

    def search(
        self, vector: npt.NDArray[np.float32], k: int = 5
    ) -> list[tuple[StoredPoint, float]]:
        """The ``k`` nearest points that are not superseded, closest first; higher scores
        are closer."""
        k = check_k(k)
        info = self._require()
        query = check_query_vector(vector, info.dimension)

        def nearest(n: int) -> list[tuple[StoredPoint | None, float]]:
            (hits,) = self._nearest(info, [query], n)
            return hits

        # superseded points (an old revision waiting for its delete) and points another
        # tool wrote are left out
        return current_hits(nearest, k)

    def search_many(
        self, vectors: Sequence[npt.NDArray[np.float32]], k: int = 5
    ) -> list[list[tuple[StoredPoint, float]]]:
        """:meth:`search` of each of ``vectors``, the answers in their order: on a server
        one batch request (``query_batch_points``); in embedded Qdrant one pass over the
        collection's points for many vectors at once.

        Embedded Qdrant computes a search's distances to every point, and for a cosine
        collection first divides every stored vector by its length again (the vectors
        are stored at unit length already): about 10 ms a search at 5,000 points here,
        and its batch request runs one search after another. Here the distances of
        many queries come from one matrix product over the same rows, with local mode's
        own distance function, the same deleted points left out and the same order;
        each answer is what :meth:`search` returns (superseded points left out as it
        leaves them out). Where local mode's internals are not as this module knows
        them, its batch request is used.
        """
        k = check_k(k)
        info = self._require()
        queries = [check_query_vector(v, info.dimension) for v in vectors]
        if not queries:
            return []
        with self._errors("search"):
            collection = (
                _local_collection(self._client, self._collection) if self.is_embedded() else None
            )
            if collection is not None:
                answers = self._nearest_local(collection, info, queries, k)
                if answers is not None:
                    return answers
            return self._nearest_batch(info, queries, k)

    def _nearest_batch(
        self, info: _Vectors, queries: list[npt.NDArray[np.float32]], k: int
    ) -> list[list[tuple[StoredPoint, float]]]:
        """One batch request of ``k`` per query; a query whose ``k`` nearest held
        superseded points (they live between two steps of one sync) or another tool's is
        asked for more as :meth:`search` asks."""
        out: list[list[tuple[StoredPoint, float]]] = []
        for chunk in batches(queries, self._batch_size):
            for query, first in zip(chunk, self._nearest(info, chunk, k)):

                def nearest(
                    n: int, query: Any = query, first: Any = first
                ) -> list[tuple[StoredPoint | None, float]]:
                    return first if n == k else self._nearest(info, [query], n)[0]

                out.append(current_hits(nearest, k))
        return out

    def _nearest(
        self, info: _Vectors, queries: Sequence[npt.NDArray[np.float32]], n: int
    ) -> list[list[tuple[StoredPoint | None, float]]]:
        """The ``n`` nearest points of each query, superseded or not, closest first, with
        ``None`` for a point another tool wrote: one ``query_points`` for one query, else
        one ``query_batch_points``."""
        sign = -1.0 if info.distance == "euclid" else 1.0
        with self._errors("search"):
            if len(queries) == 1:
                responses = [
                    self._client.query_points(
                        self._collection,
                        query=queries[0].tolist(),
                        using=info.name or None,
                        limit=n,
                        with_payload=True,
                        with_vectors=False,
                    )
                ]
            else:
                requests = [
                    models.QueryRequest(
                        query=q.tolist(),
                        using=info.name or None,
                        limit=n,
                        with_payload=True,
                        with_vector=False,
                    )
                    for q in queries
                ]
                responses = self._client.query_batch_points(self._collection, requests=requests)
        return [
            [(self._decode(p.id, p.payload), sign * float(p.score)) for p in response.points]
            for response in responses
        ]

    def _nearest_local(
        self, collection: Any, info: _Vectors, queries: list[npt.NDArray[np.float32]], k: int
    ) -> list[list[tuple[StoredPoint, float]]] | None:
        """:meth:`search_many` over an embedded collection's rows (call it holding the
        client's lock), or None where they are not as this module knows them."""
        try:
            from qdrant_client.local.distances import (
                DistanceOrder,
                calculate_distance,
                distance_to_order,
            )
        except ImportError:
            return None
        name = info.name or ""
        total = len(collection.payload)
        table = collection.vectors.get(name)
        gone = collection.deleted_per_vector.get(name)
        if not (isinstance(table, np.ndarray) and table.ndim == 2 and table.shape[0] >= total):
            return None
        if gone is None or len(gone) != total or len(collection.deleted) != total:
            return None
        distance = _TO_QDRANT[info.distance]
        rows = table[:total]
        live = (np.asarray(collection.deleted) == 0) & (np.asarray(gone) == 0)
        bigger = distance_to_order(distance) == DistanceOrder.BIGGER_IS_BETTER
        sign = -1.0 if info.distance == "euclid" else 1.0
        payloads, ids_inv = collection.payload, collection.ids_inv
        # float64 queries, as local mode makes them from the request's list of floats;
        # query blocks small enough that the scores (or, euclid, the differences) stay small
        per_block = max(1, (1 << 22) // max(1, total * (rows.shape[1] if not bigger else 1)))
        out: list[list[tuple[StoredPoint, float]]] = []
        for start in range(0, len(queries), per_block):
            block = np.stack(queries[start : start + per_block]).astype(np.float64)
            scores = np.atleast_2d(calculate_distance(block, rows, distance))
            for row in scores:
                order = np.argsort(row)
                if bigger:
                    order = order[::-1]
                ranked = order[live[order]]

                def nearest(n: int, ranked: Any = ranked, row: Any = row) -> Any:
                    return [
                        (self._decode(ids_inv[i], payloads[i]), sign * float(row[i]))
                        for i in ranked[:n].tolist()
                    ]

                out.append(current_hits(nearest, k))
        return out

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
        version = check_version(version)
        vectors = self._require()
        check_dimensions(prepared, vectors.dimension, f"Qdrant collection {self._collection!r}")
        updates = [w for w in prepared if w.vector is None]
        upserts = [w for w in prepared if w.vector is not None]
        guard = None if version is None else self._not_newer(version)
        with self._errors("write to"), self._indexed() as index:
            if version is None:
                self._check_exist([w.id for w in updates])
            elif self.is_embedded():
                # the client's lock is held for this whole call: read, check, write at once
                allowed = set(self._not_newer_ids([w.id for w in updates], version))
                updates = [w for w in updates if w.id in allowed]
            if index is not None and self._client in _TUNED_CLIENTS:
                _reserve(index.collection, len(upserts))
            # embedded Qdrant warns past 20,000 points: rechunk advises at its own size
            with _quiet_local_mode() if self.is_embedded() else nullcontext():
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
            if index is not None:
                index.wrote([(w.id, w.payload.doc_id, w.payload.input_key) for w in prepared])

    @contextmanager
    def _indexed(self) -> Iterator[_LocalIndex | None]:
        """The current :class:`_LocalIndex` for a write (None for a server); a write that
        fails part-way leaves the index to be rebuilt on its next use."""
        index = self._index()
        try:
            yield index
        except BaseException:
            if index is not None:
                index.invalidate()
            raise

    def _set_payload(self, write: Any, guard: models.Filter | None) -> models.SetPayload:
        """Replace one point's payload: by id, or (a server, with a version) by a filter that
        also holds the version condition, so that the server checks it as it writes."""
        payload = qdrant_payload(write.id, write.payload, self._layout)
        if guard is None or self.is_embedded():
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
        version = check_version(version)
        self._require()
        with self._errors("delete from"), self._indexed() as index:
            if version is not None and self.is_embedded():
                unique = self._not_newer_ids(unique, version)
            for chunk in batches(unique, self._batch_size):
                selector: Any = models.PointIdsList(points=list(chunk))
                if version is not None and not self.is_embedded():
                    condition = models.HasIdCondition(has_id=list(chunk))
                    selector = models.FilterSelector(
                        filter=models.Filter(must=[condition, self._not_newer(version)])
                    )
                self._client.delete(self._collection, points_selector=selector, wait=True)
            if index is not None:
                index.deleted(unique)
            if self.is_embedded():
                collection = _local_collection(self._client, self._collection)
                if collection is not None:
                    _compact(collection)

    def supersede(self, ids: Sequence[str], *, version: int | None = None) -> None:
        """Mark those of ``ids`` that exist superseded (see
        :func:`rechunk.sync.store.mark_superseded`): ``superseded: 1`` set in their payload
        (under ``metadata`` in the langchain layout) by a payload-only request that leaves
        the rest of the payload and the vector alone. With ``version``, only points whose
        stored version is absent or at most ``version`` are marked, as ``delete`` does."""
        unique = check_ids(ids)
        if not unique:
            return
        version = check_version(version)
        self._require()
        key = LANGCHAIN_METADATA_KEY if self._layout == "langchain" else None
        with self._errors("mark superseded points in"):
            if self.is_embedded():  # by id (a filter scans the collection), those that exist
                if version is None:
                    unique = [
                        str(r.id)
                        for chunk in batches(unique, self._batch_size)
                        for r in self._client.retrieve(
                            self._collection, list(chunk), with_payload=False, with_vectors=False
                        )
                    ]
                else:
                    unique = self._not_newer_ids(unique, version)
            for chunk in batches(unique, self._batch_size):
                points: Any = list(chunk)
                if not self.is_embedded():  # a filter: a missing id is no error
                    must: list[Any] = [models.HasIdCondition(has_id=list(chunk))]
                    if version is not None:
                        must.append(self._not_newer(version))
                    points = models.FilterSelector(filter=models.Filter(must=must))
                mark = {SUPERSEDED_KEY: SUPERSEDED_MARK}
                self._client.set_payload(self._collection, mark, points=points, key=key, wait=True)

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
