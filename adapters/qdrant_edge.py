"""rechunk's :class:`~rechunk.VectorStore` on Qdrant Edge (``pip install 'rechunk[edge]'``).

Qdrant Edge (``qdrant-edge-py``) is Qdrant's own storage engine run inside the process:
segments on disk with payload indexes, a write-ahead log, conditional writes. Unlike
qdrant-client's local mode (``qdrant:DIR``), opening a collection loads none of its
points into Python, so a process opens millions of points in a fraction of a second, and
a filtered read costs what it returns.

A folder (the store URI ``qdrant-edge:DIR``) holds every collection of one store::

    DIR/edge.json             rechunk's marker and the aliases ({"aliases": {alias: collection}}),
                              replaced atomically (written beside, synced, renamed over it)
    DIR/edge.lock             the process that has the folder open (pid and command)
    DIR/collections/NAME/     one Edge shard per collection (Edge's own files)

Collections and aliases are rechunk's, not Edge's: an Edge shard is one collection, and
Edge has no aliases. A generation (:func:`rechunk.sync.generations.reindex`) is a shard of its
own, and switching an alias is one atomic rename of ``edge.json``.

The payload layout is the Qdrant store's (:mod:`rechunk.adapters._layout`), so the same
points read back the same way through either store; but qdrant-client, and with it
LangChain's and LlamaIndex's own Qdrant classes, cannot open an Edge shard.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, NoReturn

import numpy as np

from rechunk._heap import release_free_heap
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
    check_point_id,
    check_query_vector,
    check_version,
    from_qdrant,
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

require("qdrant_edge", "edge", package="qdrant-edge-py")

import qdrant_edge as qe  # noqa: E402  (after the check that names the extra)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "MARKER",
    "OPTIMIZE_POINTS",
    "EdgeClient",
    "QdrantEdgeStore",
    "check_collection_name",
    "edge_client",
]

#: rechunk's file in an Edge store folder: the marker a store is there, and the aliases
MARKER: Final = "edge.json"
_FORMAT: Final = "rechunk-qdrant-edge"
_LOCK: Final = "edge.lock"
_COLLECTIONS: Final = "collections"
#: Edge's own file in a shard's folder (written by ``EdgeShard.create``)
_EDGE_CONFIG: Final = "edge_config.json"
#: the prefix of a collection being dropped (what a drop cut short leaves goes when the
#: folder is next opened)
_DROPPING: Final = ".drop-"
#: a collection is a folder: a name of letters, digits, ``_``, ``-`` and ``.``
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")

#: points written or deleted through one client, after which the shard's optimizer runs
#: (see :meth:`EdgeClient.changed`)
OPTIMIZE_POINTS: Final = 50_000
#: the points whose vectors fill the largest segment Edge's optimizer makes by merging
SEGMENT_POINTS: Final = 150_000
#: points read from one collection after which its shard is closed and opened again
#: (see :meth:`EdgeClient.read`)
REOPEN_POINTS: Final = 150_000
#: how long a sync waits for another thread of the process that writes the collection
LOCK_WAIT_SECONDS: Final = 600.0

_TO_EDGE: Final[dict[Distance, qe.Distance]] = {
    "cosine": qe.Distance.Cosine,
    "dot": qe.Distance.Dot,
    "euclid": qe.Distance.Euclid,
}
_FROM_EDGE: Final[dict[str, Distance]] = {"Cosine": "cosine", "Dot": "dot", "Euclid": "euclid"}
#: payload fields a sync filters on, each given a keyword index (``revision``, ``version``
#: and the rest are read, never filtered on, so they get none)
_INDEXED: Final = ("doc_id", "input_key", "model_id")
#: the field whose keyword index is Edge's tenant index, which the optimizer groups a
#: segment's points by (see :func:`_keyword`)
_GROUPED: Final = "doc_id"
_MODEL_SAMPLE: Final = 256
#: Edge's words for a shard whose write-ahead log another process holds
_LOCKED_TEXT: Final = "WouldBlock"
_CLOSED_TEXT: Final = "not initialized"


def check_collection_name(name: str) -> str:
    """``name``, or ConfigError when it cannot name a collection folder (letters, digits,
    ``_``, ``-`` and ``.``, starting with a letter or digit, at most 200 characters)."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"Qdrant Edge collection names are 1-200 letters, digits, '_', '-' or '.', "
            f"starting with a letter or digit (each is a folder); got {name!r}"
        )
    return name


# -- the folder ----------------------------------------------------------------------------


def _command() -> str:
    """A short name of this process's command, for the lock file: its program (``rechunk``,
    ``python -m rechunk.cli``, ``python -c``) and its first argument when that is a word
    (``sync``); no paths, nothing more."""
    argv = sys.argv or [""]
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        program = "python -m " + spec.name.removesuffix(".__main__")
    elif argv[0] in ("-c", ""):
        program = "python" + (" -c" if argv[0] else "")
    else:
        program = os.path.basename(argv[0])
    words = [a for a in argv[1:2] if re.fullmatch(r"[a-z][a-z-]{0,30}", a)]
    return " ".join([program, *words])


def _holder(text: str) -> str:
    """Who the lock file says holds the folder: ``process 1234 (rechunk sync)``."""
    try:
        held: Any = json.loads(text)
        pid = int(held["pid"])
    except (ValueError, KeyError, TypeError):
        return "another process (it left no pid)"
    if pid == os.getpid():
        return f"this process ({pid}), through another client"
    command = held.get("command")
    return f"process {pid}" + (f" ({command})" if isinstance(command, str) and command else "")


def _in_use(folder: Path, holder: str) -> StoreUnavailableError:
    if holder.startswith("this process"):
        return StoreUnavailableError(
            f"store is in use: the Qdrant Edge folder {folder} is open in {holder}; one "
            "client at a time opens it: close that one first, or share it"
        )
    return StoreUnavailableError(
        f"store is in use by another process: the Qdrant Edge folder {folder} is open in "
        f"{holder}; one process at a time opens it: wait for that one to end"
    )


def _take_lock(folder: Path) -> IO[str] | None:
    """An exclusive lock on ``folder`` (``edge.lock``, holding this process's pid and
    command), or StoreUnavailableError naming the process that has it. None where the
    system has no ``flock`` (Edge's own lock on each shard still refuses a second
    process there). The kernel drops the lock when its process ends, however it ends."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    try:
        handle = open(folder / _LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (held while open)
    except OSError as exc:
        raise StoreError(
            f"cannot open the Qdrant Edge folder {folder}: {exc.strerror or exc} (a store is "
            "opened for writing, to lock it: a read-only copy cannot be opened; copy it to "
            "a writable folder)"
        ) from exc
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        text = handle.read()
        handle.close()
        raise _in_use(folder, _holder(text)) from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "command": _command()}) + "\n")
    handle.flush()
    return handle


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every system opens folders
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_marker(folder: Path, aliases: dict[str, str]) -> None:
    """Replace ``edge.json`` atomically: a reader (or a crash) sees the old file or the
    new one, never a part of either."""
    target = folder / MARKER
    scratch = folder / f".{MARKER}.{os.getpid()}.tmp"
    data = {"format": _FORMAT, "version": 1, "aliases": dict(sorted(aliases.items()))}
    with open(scratch, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(scratch, target)
    _fsync_dir(folder)


def _read_marker(folder: Path) -> dict[str, str]:
    """The aliases ``edge.json`` records; StoreError when it is not rechunk's file."""
    path = folder / MARKER
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise StoreError(f"{path} is not rechunk's Qdrant Edge file; is {folder} another store?")
    aliases = data.get("aliases")
    if data.get("format") != _FORMAT or not isinstance(aliases, dict):
        raise StoreError(f"{path} is not rechunk's Qdrant Edge file; is {folder} another store?")
    if not all(type(k) is str and type(v) is str for k, v in aliases.items()):
        raise StoreError(f"{path} holds aliases that are not names")
    return dict(aliases)


def edge_client(path: str | os.PathLike[str], *, create: bool = True) -> EdgeClient:
    """Open the Qdrant Edge store folder ``path`` (created, with ``create``, when missing).

    The folder is opened by one process at a time: a second one gets
    :class:`StoreUnavailableError` naming the process that has it (pid and command, read
    from ``edge.lock``). Nothing is loaded but the alias file: each collection's shard
    opens on its first use. Close the client (or use it as a context manager) to flush
    and release the folder.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file, not a folder")
    if not (folder / MARKER).is_file():
        if not create:
            raise StoreError(f"no store at {folder} (nothing synced there yet)")
        others = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        others = [name for name in others if name != _LOCK]
        if others:
            raise ConfigError(
                f"{folder} holds files but no {MARKER} ({', '.join(others[:3])}): it is not a "
                "Qdrant Edge store folder; give an empty or new folder (embedded Qdrant's "
                "folders open as qdrant:DIR)"
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the store folder {folder}: {exc}") from exc
    lock = _take_lock(folder)
    try:
        if not (folder / MARKER).is_file():
            _write_marker(folder, {})
        aliases = _read_marker(folder)
        shards = folder / _COLLECTIONS
        shards.mkdir(exist_ok=True)
        for leftover in shards.iterdir():
            if leftover.name.startswith(_DROPPING):
                shutil.rmtree(leftover, ignore_errors=True)
    except BaseException:
        if lock is not None:
            lock.close()
        raise
    return EdgeClient(folder, lock, aliases)


@dataclass
class _Models:
    """The model_ids of one collection's points at one payload path, as a client knows
    them: ``held`` each held by a stored point; ``unsure`` each to be confirmed by a
    read, as its points may be gone (a point was deleted or given another payload since)
    or were never stored (a conditional write may have left them out)."""

    held: set[str]
    unsure: set[str]


@dataclass(frozen=True)
class _Vector:
    """One dense vector of a shard's configuration."""

    size: int
    distance: str  # Edge's name: "Cosine", "Dot", "Euclid", "Manhattan"


class EdgeClient:
    """An open Qdrant Edge store folder: its collections (one Edge shard each, opened on
    first use and kept open), its aliases, and the folder's lock. Made by
    :func:`edge_client`; every :class:`QdrantEdgeStore` on the folder shares it.

    Calls through one client run one at a time (``lock``), from any thread."""

    def __init__(self, folder: Path, lock: IO[str] | None, aliases: dict[str, str]) -> None:
        self._folder = folder
        self._lock_file = lock
        self._aliases = aliases
        self._shards: dict[str, qe.EdgeShard] = {}
        self._vectors: dict[str, dict[str, _Vector]] = {}
        self._changes: dict[str, int] = {}
        self._reads: dict[str, int] = {}
        self._writers: dict[str, threading.RLock] = {}
        #: the model_ids of an open shard's points, by payload path (see :meth:`models`)
        self._models: dict[str, dict[str, _Models]] = {}
        self._closed = False
        #: held by every call of a store on this client
        self.lock = threading.RLock()

    def __repr__(self) -> str:
        return f"EdgeClient({str(self._folder)!r}{', closed' if self._closed else ''})"

    def __enter__(self) -> EdgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The store folder."""
        return self._folder

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the Qdrant Edge store {self._folder} was closed; open it again")

    def _dir(self, name: str) -> Path:
        return self._folder / _COLLECTIONS / name

    def resolve(self, name: str) -> str:
        """The collection ``name`` names: the one an alias points at, else itself."""
        return self._aliases.get(name, name)

    def exists(self, name: str) -> bool:
        """Whether collection ``name`` exists (aliases not resolved)."""
        self._check_open()
        return name in self._shards or (self._dir(name) / _EDGE_CONFIG).is_file()

    def collections(self) -> list[str]:
        """Every collection, sorted (aliases not included)."""
        self._check_open()
        root = self._folder / _COLLECTIONS
        return sorted(
            p.name
            for p in root.iterdir()
            if _NAME.fullmatch(p.name) and (p / _EDGE_CONFIG).is_file()
        )

    def aliases(self) -> dict[str, str]:
        """Every alias, ``{alias: collection}``."""
        self._check_open()
        return dict(self._aliases)

    def set_alias(self, alias: str, collection: str) -> None:
        """Point ``alias`` at ``collection``: one atomic replacement of the alias file."""
        with self.lock:
            self._check_open()
            aliases = {**self._aliases, alias: collection}
            _write_marker(self._folder, aliases)
            self._aliases = aliases

    def shard(self, name: str) -> qe.EdgeShard | None:
        """The open shard of collection ``name`` (opened now on its first use), or None
        when there is no such collection."""
        with self.lock:
            self._check_open()
            shard = self._shards.get(name)
            if shard is None and self.exists(name):
                try:
                    shard = qe.EdgeShard.load(str(self._dir(name)))
                except Exception as exc:
                    if _LOCKED_TEXT in str(exc):
                        raise self._busy(name, exc) from exc
                    raise StoreError(f"cannot open Qdrant Edge collection {name!r}: {exc}") from exc
                self._shards[name] = shard
            return shard

    def _busy(self, name: str, exc: BaseException) -> StoreUnavailableError:
        """The error for a shard another process holds open (Edge's own lock on its
        write-ahead log: a process that opened the shard without rechunk's folder lock)."""
        try:
            holder = _holder((self._folder / _LOCK).read_text(encoding="utf-8"))
        except OSError:
            holder = "another process"
        if holder.startswith("this process"):
            holder = "another process (Edge refused to open its write-ahead log)"
        return StoreUnavailableError(
            f"store is in use by another process: Qdrant Edge collection {name!r} in "
            f"{self._folder} is open in {holder}: wait for it to end ({exc})"
        )

    def vectors(self, name: str) -> dict[str, _Vector]:
        """The dense vectors of collection ``name`` (name -> size and distance), from the
        configuration Edge keeps beside the shard (``edge_config.json``)."""
        with self.lock:
            self._check_open()
            known = self._vectors.get(name)
            if known is not None:
                return known
            path = self._dir(name) / _EDGE_CONFIG
            try:
                config: Any = json.loads(path.read_text(encoding="utf-8"))
                found = {
                    str(vector): _Vector(int(params["size"]), str(params["distance"]))
                    for vector, params in config["vectors"].items()
                }
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StoreError(f"cannot read the vector configuration {path}: {exc}") from exc
            self._vectors[name] = found
            return found

    def create(
        self,
        name: str,
        config: qe.EdgeConfig,
        indexes: Sequence[str],
        grouped: str | None = None,
    ) -> None:
        """Create collection ``name`` with a keyword index on each of ``indexes`` (the one
        on ``grouped`` a tenant index: see :func:`_keyword`), and keep it open. A folder
        without Edge's configuration file is what a creation cut short left (the folder
        lock keeps every other creator out): it is removed first. One cut short after
        that file is a collection that lacks an index, which
        :meth:`QdrantEdgeStore.ensure_collection` adds."""
        with self.lock:
            self._check_open()
            if self.exists(name):
                return
            folder = self._dir(name)
            if folder.exists():
                shutil.rmtree(folder)
            shard = qe.EdgeShard.create(str(folder), config)
            try:
                for field in indexes:
                    params = _keyword(grouped=field == grouped)
                    shard.update(qe.UpdateOperation.create_field_index(field, params))
            except BaseException:
                shard.close()
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self._shards[name] = shard

    def models(self, name: str, path: str) -> _Models | None:
        """What this client knows of the model_ids at ``path`` in collection ``name``
        (None: nothing yet; :meth:`QdrantEdgeStore.collection_info` reads them from the
        shard's index, once per open shard, and keeps them here).

        Kept current through :meth:`wrote` and :meth:`removed`, which every write and
        delete of a store on this client calls: while a shard is open, no other process
        writes it (the folder lock, and Edge's own lock on its write-ahead log, keep
        every other process out), so what was read stays true but for this client's
        own changes. A write made straight through the shard (:meth:`shard`), not
        through a store, is not seen. Forgotten when the shard closes."""
        return self._models.get(name, {}).get(path)

    def keep_models(self, name: str, path: str, held: set[str]) -> None:
        """Keep the model_ids read from collection ``name``'s index at ``path``."""
        with self.lock:
            if name in self._shards:
                self._models.setdefault(name, {})[path] = _Models(set(held), set())

    def wrote(self, name: str, payloads: Sequence[dict[str, Any]], *, stored: bool) -> None:
        """Points of these payloads were written to collection ``name``: ``stored``,
        every one of them (an unconditional write); else perhaps some of them."""
        with self.lock:
            for path, known in self._models.get(name, {}).items():
                for payload in payloads:
                    value = _at(payload, path)
                    if not isinstance(value, str) or value in known.held:
                        continue
                    if stored:
                        known.unsure.discard(value)
                        known.held.add(value)
                    else:
                        known.unsure.add(value)

    def removed(self, name: str) -> None:
        """Points of collection ``name`` were deleted or given another payload: each
        model_id known may have lost its last point."""
        with self.lock:
            for known in self._models.get(name, {}).values():
                known.unsure |= known.held
                known.held = set()

    def drop(self, name: str) -> None:
        """Delete collection ``name`` and every alias that points at it (nothing when it
        does not exist). The folder is renamed aside first, so that a drop cut short
        leaves no half-deleted collection."""
        with self.lock:
            self._check_open()
            shard = self._shards.pop(name, None)
            self._vectors.pop(name, None)
            self._changes.pop(name, None)
            self._models.pop(name, None)
            if shard is not None:
                shard.close()
            gone = {a for a, c in self._aliases.items() if c == name}
            if gone:
                self._aliases = {a: c for a, c in self._aliases.items() if a not in gone}
                _write_marker(self._folder, self._aliases)
            if not self.exists(name):
                return
            aside = self._dir(name).with_name(f"{_DROPPING}{name}-{uuid.uuid4().hex[:8]}")
            os.rename(self._dir(name), aside)
            _fsync_dir(aside.parent)
            shutil.rmtree(aside, ignore_errors=True)

    def writer(self, name: str) -> threading.RLock:
        """The lock a sync into collection ``name`` holds (see
        :meth:`QdrantEdgeStore.writer_lock`)."""
        with self.lock:
            return self._writers.setdefault(name, threading.RLock())

    def changed(self, name: str, shard: qe.EdgeShard, points: int) -> None:
        """Count ``points`` written or deleted in collection ``name``; past
        :data:`OPTIMIZE_POINTS` since the last time, run Edge's optimizer.

        Edge writes new points into an appendable segment whose payload indexes live in
        memory and are rebuilt whenever the shard is opened; its optimizer (which Edge
        runs only when asked) turns them into segments read in place from disk, and
        removes deleted points. So a process that opens a large collection loads at most
        about this many points' index entries. The first count of a process starts from
        the points the shard holds outside such segments."""
        with self.lock:
            if name not in self._changes:
                info = shard.info()
                self._changes[name] = max(0, info.points_count - info.indexed_vectors_count)
            self._changes[name] += points
            if self._changes[name] >= OPTIMIZE_POINTS:
                shard.optimize()
                # the optimizer writes its segments through memory maps, whose pages stay
                # this process's until written out, and frees what it built in memory,
                # which glibc keeps: both grew a sync's RSS by 3 KB a point written
                shard.flush()
                release_free_heap()
                self._changes[name] = 0

    def read(self, name: str, shard: qe.EdgeShard, points: int) -> qe.EdgeShard:
        """Count ``points`` read from collection ``name``, and return the shard to read on:
        past :data:`REOPEN_POINTS` since the last time, its shard closed and opened again.

        Edge reads payloads and vectors in place, through memory maps, and each page read
        stays in this process's resident memory until its map goes (the kernel's page
        cache keeps it either way): a no-op sync held 1.6 KB of file pages a point it
        read, 3 GB at 1.8 M points. Reopening lets them go, in about what opening costs.
        Call it between requests, never while iterating a scroll of ``shard``."""
        with self.lock:
            count = self._reads.get(name, 0) + points
            self._reads[name] = count
            if count < REOPEN_POINTS or self._shards.get(name) is not shard:
                return shard
            del self._shards[name]
            self._models.pop(name, None)  # read again from the shard opened anew
            self._reads[name] = 0
            shard.close()
            release_free_heap()  # and what Edge and the reads freed
            reopened = self.shard(name)
            if reopened is None:  # dropped meanwhile: the next request says so
                return shard
            return reopened

    def close(self) -> None:
        """Flush and close every open shard, and release the folder (idempotent)."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            errors: list[str] = []
            for name, shard in self._shards.items():
                try:
                    shard.flush()
                    shard.close()
                except Exception as exc:  # close the others, then say which failed
                    errors.append(f"{name}: {exc}")
            self._shards.clear()
            self._models.clear()
            if self._lock_file is not None:
                with contextlib.suppress(OSError):
                    self._lock_file.seek(0)
                    self._lock_file.truncate()  # before the lock goes: the next holder writes
                self._lock_file.close()  # closing the file releases the lock
                self._lock_file = None
            if errors:
                raise StoreError(f"closing the Qdrant Edge store {self._folder} failed: {errors}")


def _keyword(*, grouped: bool = False) -> qe.KeywordIndexParams:
    """A keyword index read in place from disk once its segment is optimized.

    ``grouped``: Edge's tenant index (``is_tenant``), whose values the optimizer groups
    a segment's points by, so that the points of one doc_id lie together on disk.
    Without it they lie in the order of their ids (random UUIDs), apart from each
    other, and a read of some documents' points reads a page of the disk for each
    point: Edge drops its files' pages from the kernel's cache as it opens and closes a
    shard, so a process reads them from the disk. Reading 256 documents' points (about
    2,300) in a fresh process took 2.2 faults from the disk a point and 0.28-0.34 s at
    1.8 M points (0.06 s once read); at 181,600 points 0.53 faults a point and 140 ms
    ungrouped, 0.24 and 71 ms grouped. A collection made before it keeps its index as
    it was (Edge cannot change an index's kind in place)."""
    return qe.KeywordIndexParams(memory=qe.Memory.Cold, is_tenant=grouped or None)


def _shard_config(vectors: Any, dimension: int) -> qe.EdgeConfig:
    """A new collection's configuration. Vectors and payloads stay on disk and are read
    in place (``Memory.Cold``), so opening a collection reads neither. No HNSW graph is
    built (``m=0``): the optimizer's segments are searched exactly, by a scan of their
    vectors, and building a graph of a million points would take the sync minutes.

    Each optimizer run (rechunk asks for one every :data:`OPTIMIZE_POINTS` points) turns
    the appendable segment into a read-in-place one, whatever the size of its vectors
    (``indexing_threshold=1``, in KB). Past 16 segments it merges the smallest ones, up
    to :data:`SEGMENT_POINTS` points' vectors a segment: so a point is copied a few times
    at most however large the collection grows (a merge of ever larger segments would copy
    it again at every doubling), and a collection of 2 M points opens some 16 segments."""
    return qe.EdgeConfig(
        vectors=vectors,
        payload_memory=qe.Memory.Cold,
        hnsw_config=qe.HnswIndexConfig(
            m=0, ef_construct=100, full_scan_threshold=10_000, payload_m=0
        ),
        optimizers=qe.EdgeOptimizersConfig(
            indexing_threshold=1,
            default_segment_number=16,
            max_segment_size=max(1, 4 * dimension * SEGMENT_POINTS // 1024),
        ),
    )


# -- the store -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Vectors:
    """The dense vector rechunk uses in an existing collection."""

    name: str  # "": the collection's single unnamed vector
    dimension: int
    distance: Distance


class QdrantEdgeStore(StoreBase[EdgeClient]):
    """A Qdrant Edge collection as a rechunk :class:`~rechunk.sync.store.VectorStore`.

    ``client`` is an open :class:`EdgeClient` (:func:`edge_client`); the constructor
    does no I/O. ``layout`` puts the payload and vector where the Qdrant store puts them
    (:class:`rechunk.adapters.qdrant.QdrantStore`, the same contracts): the points read
    back the same way, and a collection keeps one layout.

    * ``ensure_collection`` creates a shard (layout langchain: one unnamed dense vector;
      llamaindex: the named vector ``"text-dense"``) with keyword payload indexes on
      ``doc_id``, ``input_key`` and ``model_id``, or checks an existing one (and gives it
      those indexes); another dimension or distance raises StoreError naming both.
    * Every read filters through those indexes: reading a document's points costs its
      points, whatever the collection's size.
    * ``write`` and ``delete`` take ``version=``: the conditional writes of
      :func:`rechunk.sync` (Edge checks the stored version of each point as it writes,
      ``upsert_points(..., condition=...)``); :meth:`writer_lock` makes the syncs of one
      collection in one process take turns, and the folder lock keeps other processes
      out.
    * Aliases and generations as the Qdrant store has them (:meth:`aliases`,
      :meth:`switch_alias`, :meth:`drop_collection`), kept in the folder's alias file.
    * A folder another process has open raises StoreUnavailableError ("store is in use
      by another process ...") naming that process; any other failure of Edge raises
      StoreError.
    """

    #: ``write`` and ``delete`` take ``version=`` (see :func:`rechunk.sync`)
    conditional_versions: Final = True

    def __init__(
        self,
        client: EdgeClient,
        collection: str,
        layout: Layout = "langchain",
        *,
        batch_size: int = 256,
    ) -> None:
        super().__init__(client, collection, layout, batch_size=batch_size)
        check_collection_name(self._collection)
        # where the rechunk fields sit in the payload: nested under "metadata" for LangChain
        self._prefix = f"{LANGCHAIN_METADATA_KEY}." if self._layout == "langchain" else ""

    # -- errors ----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Hold the client's lock and turn Edge's exceptions into StoreError /
        StoreUnavailableError."""
        with self._client.lock:
            try:
                yield
            except RechunkError:
                raise
            except Exception as exc:
                raise self._translate(exc, action) from exc

    def _translate(self, exc: Exception, action: str) -> RechunkError:
        target = self._client.resolve(self._collection)
        if _LOCKED_TEXT in str(exc):
            return self._client._busy(target, exc)
        if _CLOSED_TEXT in str(exc):
            return StoreError(
                f"cannot {action} Qdrant Edge collection {self._collection!r}: its store "
                f"{self._client.path} was closed; open it again"
            )
        return StoreError(
            f"Qdrant Edge failed to {action} collection {self._collection!r}: "
            f"{type(exc).__name__}: {exc}"
        )

    def _missing(self) -> NoReturn:
        raise StoreError(
            f"Qdrant Edge collection {self._collection!r} does not exist; "
            f"call ensure_collection(dimension) first"
        )

    # -- collection ------------------------------------------------------------------------

    def _open(self) -> tuple[qe.EdgeShard, _Vectors] | None:
        """The collection's shard and vector (call it holding the client's lock), or None
        when the collection does not exist."""
        name = self._client.resolve(self._collection)
        shard = self._client.shard(name)
        if shard is None:
            return None
        return shard, self._pick(self._client.vectors(name))

    def _require(self) -> tuple[qe.EdgeShard, _Vectors]:
        opened = self._open()
        if opened is None:
            self._missing()
        return opened

    def _pick(self, config: dict[str, _Vector]) -> _Vectors:
        """The vector this layout reads: unnamed, or ``text-dense`` for llamaindex (an
        unnamed one too, as LlamaIndex reads it)."""
        name = layout_vector(self._layout, config, f"Qdrant Edge collection {self._collection!r}")
        vector = config[name]
        distance = _FROM_EDGE.get(vector.distance)
        if distance is None:
            raise CollectionMismatchError(
                f"Qdrant Edge collection {self._collection!r} uses {vector.distance} distance; "
                f"rechunk supports cosine, dot and euclid"
            )
        return _Vectors(name, vector.size, distance)

    def collection_info(self) -> CollectionInfo | None:
        """Dimension, distance, point count and every model_id of the collection's points.

        ``None`` when the collection does not exist.
        """
        with self._errors("read"):
            opened = self._open()
            if opened is None:
                return None
            shard, vectors = opened
            points = shard.info().points_count
            model_ids = self._model_ids(shard, self._layout)
            other: Layout = "llamaindex" if self._layout == "langchain" else "langchain"
            if points and not model_ids and self._model_ids(shard, other):
                raise StoreError(
                    f"Qdrant Edge collection {self._collection!r} holds rechunk points in the "
                    f"{other} layout, not {self._layout}: a collection keeps one layout"
                )
        return CollectionInfo(
            name=self._collection,
            dimension=vectors.dimension,
            distance=vectors.distance,
            points=points,
            model_ids=model_ids,
        )

    def _model_ids(self, shard: qe.EdgeShard, layout: Layout) -> frozenset[str]:
        """The model_ids of the points, read in ``layout``: all of them from the keyword
        index where there is one, else those of up to 256 points.

        From the index, the values come from its posting lists (``exact=False``), each
        confirmed by one point that holds it. An exact facet counted every point (22 ms
        at 180,000 points, 0.2 s at 1.8 M, four times in a ``rechunk sync FILE``), and it
        named a model whose points were all deleted (with a count of 0), as if it still
        wrote the collection. The client keeps what was read for as long as the shard
        is open, current through this process's writes and deletes
        (:meth:`EdgeClient.models`); a model a write or delete may have changed is
        confirmed again by one point that holds it."""
        path = self._path("model_id", layout)
        name = self._client.resolve(self._collection)
        known = self._client.models(name, path)
        if known is not None:
            if known.unsure:
                known.held |= {v for v in known.unsure if self._holds(shard, path, v)}
                known.unsure = set()
            return frozenset(known.held)
        if path in shard.info().payload_schema:
            hits = shard.facet(qe.FacetRequest(key=path, limit=1024, exact=False)).hits
            values = {h.value for h in hits if isinstance(h.value, str)}
            held = {v for v in values if self._holds(shard, path, v)}
            self._client.keep_models(name, path, held)
            return frozenset(held)
        request = qe.ScrollRequest(limit=_MODEL_SAMPLE, with_payload=[path], with_vector=False)
        records, _ = shard.scroll(request)
        found = {_field(r.payload, "model_id", layout) for r in records}
        return frozenset(m for m in found if isinstance(m, str))

    @staticmethod
    def _holds(shard: qe.EdgeShard, path: str, value: str) -> bool:
        """Whether a point of the shard has ``value`` at ``path`` (read through its index)."""
        condition = qe.Filter(must=[qe.FieldCondition(path, match=qe.MatchValue(value))])
        request = qe.ScrollRequest(limit=1, filter=condition, with_payload=False, with_vector=False)
        records, _ = shard.scroll(request)
        return bool(records)

    def ensure_collection(self, dimension: int, distance: Distance = "cosine") -> CollectionInfo:
        """Create the collection, or check that the existing one has this dimension and
        distance (and give it the payload indexes a sync reads through)."""
        dimension = check_dimension(dimension)
        distance = check_distance(distance)
        with self._errors("create"):
            opened = self._open()
            if opened is None:
                params = qe.EdgeVectorParams(
                    size=dimension, distance=_TO_EDGE[distance], memory=qe.Memory.Cold
                )
                vectors: Any = (
                    params if self._layout == "langchain" else {LLAMAINDEX_VECTOR_NAME: params}
                )
                indexes = [self._path(f) for f in _INDEXED]
                self._client.create(
                    self._client.resolve(self._collection),
                    _shard_config(vectors, dimension),
                    indexes,
                    self._path(_GROUPED),
                )
                opened = self._require()
            shard, found = opened
            if (found.dimension, found.distance) != (dimension, distance):
                raise CollectionMismatchError(
                    f"Qdrant Edge collection {self._collection!r} holds {found.dimension}-"
                    f"dimensional {found.distance} vectors, not the {dimension}-dimensional "
                    f"{distance} vectors asked for; use another collection for another model "
                    "or distance"
                )
            schema = shard.info().payload_schema
            for field in _INDEXED:
                if self._path(field) not in schema:
                    shard.update(
                        qe.UpdateOperation.create_field_index(
                            self._path(field), _keyword(grouped=field == _GROUPED)
                        )
                    )
        info = self.collection_info()
        if info is None:
            self._missing()
        return info

    # -- payload helpers -------------------------------------------------------------------

    def _path(self, field: str, layout: Layout | None = None) -> str:
        nested = (layout or self._layout) == "langchain"
        return f"{LANGCHAIN_METADATA_KEY}.{field}" if nested else field

    def _match(self, field: str, value: str | Sequence[str]) -> qe.FieldCondition:
        """``field`` equals ``value``, or (a sequence) any of its values."""
        match: qe.MatchValue | qe.MatchAny = (
            qe.MatchValue(value) if isinstance(value, str) else qe.MatchAny(list(value))
        )
        return qe.FieldCondition(self._path(field), match=match)

    def _scroll(
        self,
        shard: qe.EdgeShard,
        condition: qe.Filter | None,
        *,
        payload: bool | list[str] = True,
        vectors: bool | list[str] = False,
        page: int | None = None,
    ) -> Iterator[qe.Record]:
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset,
                limit=page or self._batch_size,
                filter=condition,
                with_payload=payload,
                with_vector=vectors,
            )
            records, offset = shard.scroll(request)
            yield from records
            if offset is None:
                return

    def _decode(self, point_id: Any, payload: dict[str, Any] | None) -> StoredPoint | None:
        """The point, or None for one another tool wrote (skipped, see ``foreign_points``)."""
        pid = str(point_id)
        return self._decoded(pid, lambda: from_qdrant(pid, payload, self._layout, self._collection))

    # -- reads -----------------------------------------------------------------------------

    def get_points_many(self, doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
        """:meth:`get_points` of each doc_id: a read through the ``doc_id`` index per
        ``4 * batch_size`` ids, in pages of ``32 * batch_size`` points."""
        ids = check_doc_ids(doc_ids)
        points: list[StoredPoint] = []
        with self._errors("read points from"):
            shard, _ = self._require()
            name = self._client.resolve(self._collection)
            for chunk in batches(ids, 4 * self._batch_size):
                condition = qe.Filter(must=[self._match("doc_id", chunk)])
                before = len(points)
                for record in self._scroll(shard, condition, page=32 * self._batch_size):
                    point = self._decode(record.id, record.payload)
                    if point is not None:
                        points.append(point)
                shard = self._client.read(name, shard, len(points) - before)
        return by_doc(points, ids)

    def present_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the collection holds (rechunk's points or another tool's), read
        by id without payloads or vectors: what :func:`rechunk.sync` checks after
        publishing while it holds :meth:`writer_lock`."""
        unique = check_ids(ids)
        if not unique:
            return set()
        found: set[str] = set()
        with self._errors("read point ids from"):
            shard, _ = self._require()
            for chunk in batches(unique, 32 * self._batch_size):
                found.update(str(r.id) for r in shard.retrieve(list(chunk), False, False))
        return found

    def get_vectors(
        self, input_keys: Sequence[str], model_id: str
    ) -> dict[str, npt.NDArray[np.float32]]:
        """One float32 vector per input key stored by ``model_id`` (any doc); others left
        out. Read through the ``input_key`` index, ``4 * batch_size`` keys a request."""
        if isinstance(input_keys, str) or not all(type(k) is str for k in input_keys):
            raise ConfigError("input_keys must be a sequence of str")
        if type(model_id) is not str or not model_id:
            raise ConfigError(f"model_id must be a non-empty str, got {model_id!r}")
        keys = list(dict.fromkeys(input_keys))
        if not keys:
            return {}
        found: dict[str, npt.NDArray[np.float32]] = {}
        with self._errors("read vectors from"):
            shard, vectors = self._require()
            wanted: bool | list[str] = [vectors.name] if vectors.name else True
            # the content too: a vector is handed out only for the key its text was embedded as
            fields = ("input_key", "model_id")
            selector = [*map(self._path, fields), *vouch_fields(self._layout)]
            name = self._client.resolve(self._collection)
            for chunk in batches(keys, 4 * self._batch_size):
                # the input keys alone go to Edge, the model is checked here: with a
                # condition on model_id too (which every point matches) Edge's request cost
                # grew with the collection, 14x at 90,000 points for keys it did not hold,
                # which are most of an initial sync's; the points of a key are few
                condition = qe.Filter(must=[self._match("input_key", chunk)])
                records = self._scroll(
                    shard, condition, payload=selector, vectors=wanted, page=32 * self._batch_size
                )
                read = 0
                for record in records:
                    read += 1
                    if _field(record.payload, "model_id", self._layout) != model_id:
                        continue
                    key = qdrant_vouches(record.payload, self._layout)
                    if key is not None and key not in found:
                        vector = _vector_of(record.vector, vectors.name)
                        if vector is not None:
                            found[key] = vector
                shard = self._client.read(name, shard, read)
        return found

    def get_vectors_at(
        self, points: Mapping[str, str], model_id: str
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The vectors of ``points`` (input key -> the id of a point that holds it), read
        by id: a sync looks up there the inputs it published itself, past those it keeps
        in memory. A point that is gone, or that holds another input or another model's
        vector, is left out. A read by input key returns every point of the key (a
        paragraph repeated in nine documents, nine vectors): 1,024 keys took 95 ms at
        180,000 points, their 1,024 points by id 10 ms."""
        if type(model_id) is not str or not model_id:
            raise ConfigError(f"model_id must be a non-empty str, got {model_id!r}")
        key_of = {check_point_id(point_id): key for key, point_id in points.items()}
        found: dict[str, npt.NDArray[np.float32]] = {}
        if not key_of:
            return found
        with self._errors("read vectors from"):
            shard, vectors = self._require()
            selector = [self._path("input_key"), self._path("model_id")]
            wanted: bool | list[str] = [vectors.name] if vectors.name else True
            name = self._client.resolve(self._collection)
            for chunk in batches(list(key_of), 4 * self._batch_size):
                records = shard.retrieve(list(chunk), selector, wanted)
                for record in records:
                    key = key_of.get(str(record.id))
                    if (
                        key is not None
                        and _field(record.payload, "input_key", self._layout) == key
                        and _field(record.payload, "model_id", self._layout) == model_id
                    ):
                        vector = _vector_of(record.vector, vectors.name)
                        if vector is not None:
                            found[key] = vector
                shard = self._client.read(name, shard, len(records))
        return found

    def doc_ids(self) -> set[str]:
        """Every doc_id that has at least one rechunk point (a point another tool wrote,
        without an ``input_key``, is not counted), read from the ``doc_id`` index.

        Where every point has an ``input_key`` (a count the index answers at once), the
        doc_ids are the index's own values (``exact=False``: its posting lists, which
        leave out deleted points), a cost of the documents, not of the points: 40 ms at
        180,000 points where the exact facet, which reads every point, took 0.6-0.9 s
        (and a pruning sync of 1.8 M points ten times that)."""
        doc, key = self._path("doc_id"), self._path("input_key")
        with self._errors("read doc ids from"):
            shard, _ = self._require()
            if {doc, key} <= set(shard.info().payload_schema):
                theirs = qe.Filter(must=[qe.IsEmptyCondition(key)])
                if shard.count(qe.CountRequest(filter=theirs, exact=True)) == 0:
                    request = qe.FacetRequest(key=doc, limit=2**31 - 1, exact=False)
                    hits = shard.facet(request).hits
                    return {h.value for h in hits if isinstance(h.value, str) and h.count > 0}
                ours = qe.Filter(must_not=[qe.IsEmptyCondition(key)])
                request = qe.FacetRequest(key=doc, limit=2**31 - 1, exact=True, filter=ours)
                return {h.value for h in shard.facet(request).hits if isinstance(h.value, str)}
            found: set[str] = set()
            for record in self._scroll(shard, None, payload=[doc, key], page=32 * self._batch_size):
                doc_id = _field(record.payload, "doc_id", self._layout)
                if isinstance(doc_id, str) and isinstance(
                    _field(record.payload, "input_key", self._layout), str
                ):
                    found.add(doc_id)
            return found

    def search(
        self, vector: npt.NDArray[np.float32], k: int = 5
    ) -> list[tuple[StoredPoint, float]]:
        """The ``k`` nearest points, closest first; higher scores are closer (cosine
        similarity, dot product, or the negated Euclidean distance)."""
        k = check_k(k)

        def nearest(n: int) -> list[tuple[StoredPoint | None, float]]:
            with self._errors("search"):
                shard, vectors = self._require()
                query = check_query_vector(vector, vectors.dimension)
                request = qe.QueryRequest(
                    limit=n,
                    query=qe.Query.Nearest(query.tolist(), using=vectors.name or None),
                    with_payload=True,
                    with_vector=False,
                )
                found = shard.query(request)
                sign = -1.0 if vectors.distance == "euclid" else 1.0
                return [(self._decode(p.id, p.payload), sign * float(p.score)) for p in found]

        # superseded points (an old revision waiting for its delete) and points another
        # tool wrote are left out
        return current_hits(nearest, k)

    # -- writes ----------------------------------------------------------------------------

    def write(self, points: Sequence[PointWrite], *, version: int | None = None) -> None:
        """Upsert points with a vector; replace only the payload of those with ``vector=None``.

        Everything is validated before the first request; an empty sequence does nothing.
        With ``version``, an existing point is replaced only while its stored version is
        absent or at most ``version`` (Edge checks the condition for each point as it
        writes), so a writer of an older version never overwrites a newer one; a
        payload-only update of a point that is missing, or newer, is skipped rather than
        refused (the sync's verification finds and repairs it).
        """
        prepared = prepare_writes(points, self._layout, flat=False)
        if not prepared:
            return
        version = check_version(version)
        with self._errors("write to"):
            shard, vectors = self._require()
            where = f"Qdrant Edge collection {self._collection!r}"
            check_dimensions(prepared, vectors.dimension, where)
            updates = [w for w in prepared if w.vector is None]
            upserts = [w for w in prepared if w.vector is not None]
            guard = None if version is None else self._not_newer(version)
            if version is None:
                self._check_exist(shard, [w.id for w in updates])
            name = self._client.resolve(self._collection)
            # a point written over may have held another model's last point
            self._client.removed(name)
            written: list[dict[str, Any]] = []
            try:
                for chunk in batches(upserts, self._batch_size):
                    payloads = [qdrant_payload(w.id, w.payload, self._layout) for w in chunk]
                    written.extend(payloads)
                    batch = [
                        qe.Point(w.id, _vector_struct(w.vector, vectors.name), payload)
                        for w, payload in zip(chunk, payloads, strict=True)
                    ]
                    shard.update(qe.UpdateOperation.upsert_points(batch, condition=guard))
                for w in updates:  # each point its own payload: one operation each
                    payload = qdrant_payload(w.id, w.payload, self._layout)
                    written.append(payload)
                    if guard is None:
                        operation = qe.UpdateOperation.overwrite_payload([w.id], payload)
                    else:
                        only = qe.Filter(must=[qe.HasIdCondition({w.id}), guard])
                        operation = qe.UpdateOperation.overwrite_payload_by_filter(only, payload)
                    shard.update(operation)
            except BaseException:
                # a write that failed part way may have stored some points: their models
                # count until a read finds none
                self._client.wrote(name, written, stored=False)
                raise
            # every point stored only where nothing could leave one out or write over it
            self._client.wrote(name, written, stored=guard is None and not updates)
            self._client.changed(name, shard, len(prepared))

    def _not_newer(self, version: int) -> qe.Filter:
        """Points whose stored version is absent or at most ``version``."""
        field = self._path("version")
        return qe.Filter(
            should=[
                qe.IsEmptyCondition(field),
                qe.FieldCondition(field, range=qe.RangeFloat(lte=float(version))),
            ]
        )

    def _check_exist(self, shard: qe.EdgeShard, ids: list[str]) -> None:
        """StoreError (before any write) when a payload-only update targets a missing point."""
        present: set[str] = set()
        for chunk in batches(ids, 32 * self._batch_size):
            present.update(str(r.id) for r in shard.retrieve(list(chunk), False, False))
        missing = [i for i in ids if i not in present]
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise StoreError(
                f"payload-only update of {len(missing)} point(s) missing from Qdrant Edge "
                f"collection {self._collection!r}: {shown}; write them with a vector; nothing "
                "was written"
            )

    def delete(self, ids: Sequence[str], *, version: int | None = None) -> None:
        """Delete points by id; ids that do not exist are ignored. With ``version``, only
        points whose stored version is absent or at most ``version`` are deleted (Edge
        checks the condition as it deletes), so a point a newer writer wrote stays."""
        unique = check_ids(ids)
        if not unique:
            return
        version = check_version(version)
        with self._errors("delete from"):
            shard, _ = self._require()
            self._client.removed(self._client.resolve(self._collection))
            for chunk in batches(unique, 32 * self._batch_size):
                if version is None:
                    operation = qe.UpdateOperation.delete_points(list(chunk))
                else:
                    only = qe.Filter(must=[qe.HasIdCondition(set(chunk)), self._not_newer(version)])
                    operation = qe.UpdateOperation.delete_points_by_filter(only)
                shard.update(operation)
            self._client.changed(self._client.resolve(self._collection), shard, len(unique))

    def supersede(self, ids: Sequence[str], *, version: int | None = None) -> None:
        """Mark those of ``ids`` that exist superseded (see
        :func:`rechunk.sync.store.mark_superseded`): ``superseded: 1`` set in their payload
        (under ``metadata`` in the langchain layout), payload only; with ``version``, only
        points whose stored version is absent or at most ``version``, as ``delete`` does."""
        unique = check_ids(ids)
        if not unique:
            return
        version = check_version(version)
        key = LANGCHAIN_METADATA_KEY if self._layout == "langchain" else None
        with self._errors("mark superseded points in"):
            shard, _ = self._require()
            for chunk in batches(unique, 32 * self._batch_size):
                must: list[Any] = [qe.HasIdCondition(set(chunk))]
                if version is not None:
                    must.append(self._not_newer(version))
                shard.update(
                    qe.UpdateOperation.set_payload_by_filter(
                        qe.Filter(must=must), {SUPERSEDED_KEY: SUPERSEDED_MARK}, key
                    )
                )
            self._client.changed(self._client.resolve(self._collection), shard, len(unique))

    @contextmanager
    def writer_lock(self, wait: float | None = None) -> Iterator[None]:
        """Hold this collection's writer lock for the block (:func:`rechunk.sync` takes it).

        The folder lock keeps every other process out, so the lock is one of this process:
        syncs of one collection from several threads take turns (a thread that waits
        longer than ``wait``, default :data:`LOCK_WAIT_SECONDS`, gets
        :class:`StoreUnavailableError`). Under it a sync reads nothing from a collection
        it finds empty, and checks what it published by point id.
        """
        with self._client.lock:
            name = self._client.resolve(self._collection)
        lock = self._client.writer(name)
        limit = LOCK_WAIT_SECONDS if wait is None else wait
        if not lock.acquire(timeout=limit):
            raise StoreUnavailableError(
                f"another thread of this process has been writing to Qdrant Edge collection "
                f"{self._collection!r} for over {limit:g} s; try again once it is done"
            )
        try:
            yield
        finally:
            lock.release()

    # -- generations -----------------------------------------------------------------------

    def aliases(self) -> dict[str, str]:
        """Every alias of the store folder, as ``{alias: collection}``."""
        with self._errors("list the aliases of"):
            return self._client.aliases()

    def collections(self) -> list[str]:
        """The names of every collection of the store folder (aliases not included)."""
        with self._errors("list the collections of"):
            return self._client.collections()

    def is_alias(self) -> bool:
        """True when this store's name is an alias rather than a collection."""
        return self._collection in self.aliases()

    def switch_alias(self, collection: str) -> None:
        """Point this store's name, as an alias, at ``collection`` in one atomic step (the
        alias file replaced by a rename): readers that open the alias see the old
        collection or the new one, never neither. The name must not be a collection."""
        alias = self._collection
        check_collection_name(collection)
        with self._errors("switch the alias to"):
            if alias not in self._client.aliases() and self._client.exists(alias):
                raise StoreError(
                    f"{alias!r} is a collection, not an alias, so it cannot be switched; "
                    "sync into a new alias name (rechunk sync creates one) or rename it"
                )
            if not self._client.exists(collection):
                raise StoreError(
                    f"cannot point alias {alias!r} at {collection!r}: no such collection"
                )
            self._client.set_alias(alias, collection)

    def drop_collection(self) -> None:
        """Delete the collection (not an alias) and every point in it; the aliases that
        point at it go with it."""
        with self._errors("drop"):
            self._client.drop(self._collection)


def _field(payload: dict[str, Any] | None, field: str, layout: Layout) -> Any:
    """A rechunk field of a stored payload, read in ``layout``."""
    if not payload:
        return None
    if layout == "langchain":
        inner = payload.get(LANGCHAIN_METADATA_KEY)
        return inner.get(field) if isinstance(inner, dict) else None
    return payload.get(field)


def _at(payload: dict[str, Any] | None, path: str) -> Any:
    """The value at ``path`` (``metadata.model_id``, ``model_id``) of a payload."""
    value: Any = payload
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _vector_struct(vector: Any, name: str) -> Any:
    values = vector.tolist()
    return {name: values} if name else values


def _vector_of(vector: Any, name: str) -> npt.NDArray[np.float32] | None:
    """The dense vector rechunk uses (unnamed, or ``name``) of a record read with vectors."""
    if isinstance(vector, dict):
        vector = vector.get(name)
    if not isinstance(vector, list) or not vector:
        return None
    return np.asarray(vector, dtype=np.float32)
