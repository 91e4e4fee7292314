"""The reuse cache: input key -> float32 vector, per embedding model.

An :class:`EmbeddingCache` maps an input key (see :func:`rechunk.input_key`) to
the vector one embedding model produced for it. Every entry records the model
identity and the vector's dimension, and a read names both: ``get_many(keys,
model_id, dimension)`` only ever returns vectors written under that exact
``model_id`` with that exact ``dimension``; anything else is a miss. A vector
read back is bit-identical to the one written (float32, same bytes).

Two backends:

- :class:`MemoryCache`: a dict in this process; thread-safe.
- :class:`SQLiteCache`: one SQLite file, the embedded default. WAL mode, a
  float32 blob with its dimension and crc32 per entry, a schema-version table.
  Safe for several threads (a small pool of connections) and several processes
  (``busy_timeout``, short transactions; ``put_many`` is one transaction, so a
  crash at any point leaves each batch either fully written or absent). A file
  that is not a rechunk cache, or comes from a newer rechunk, is refused with
  :class:`~rechunk.errors.CacheError` and never modified. A damaged cache file
  (found when opening or in the middle of a call) is renamed aside and a new one
  started; one that cannot be written is only read; each with one
  :class:`CacheWarning`, and the caller goes on.

Both pickle (LlamaIndex's ``IngestionPipeline.run(num_workers=...)`` sends its
transformations to worker processes that way), and so does ``copy.deepcopy``: an
unpickled :class:`SQLiteCache` reopens the same file, so every process reads and
writes one cache; an unpickled :class:`MemoryCache` is a copy of the entries, and
what the copy writes (in a worker process) stays in the copy. Counters travel as
they were; a closed cache stays closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import sys
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from rechunk.errors import CacheError, InputError
from rechunk.reuse.embedding import MAX_COMPONENT, MIN_NORM, first_fault
from rechunk.reuse.identity import hash_fields, is_utf8

__all__ = [
    "SCHEMA_VERSION",
    "CacheStats",
    "CacheWarning",
    "EmbeddingCache",
    "MemoryCache",
    "SQLiteCache",
    "check_keys",
    "check_model_id",
    "encode_items",
    "record_dimension",
    "recorded_dimension",
    "row_checksum",
]

#: Version of the SQLite layout written by this code. A file with a higher
#: version was written by a newer rechunk and is refused, never rewritten. Version 1's
#: ``checksum`` was the crc32 of the vector bytes only; version 2's is
#: :func:`row_checksum`, over model, key, dimension and bytes (a file of version 1 is
#: migrated when it is first opened read-write).
SCHEMA_VERSION = 2

#: Keys per ``WHERE key IN (...)`` statement (well below SQLite's variable limit).
LOOKUP_CHUNK = 500

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER = 100
_DTYPE = np.dtype("<f4")

Vector = npt.NDArray[np.float32]
_T = TypeVar("_T")


@dataclass(frozen=True)
class CacheStats:
    """Counters of one cache object.

    ``hits`` and ``misses`` count distinct keys asked for by ``get_many`` (a key
    stored under another model or dimension, or whose bytes fail their checksum,
    is a miss); ``writes`` counts entries written by ``put_many``; these three
    count this object's calls only. ``entries`` is the number of entries the
    cache holds now, all models together (for SQLite: the whole file, whoever
    wrote it). ``corrupt`` counts entries read whose stored bytes did not match
    their checksum or dimension (always 0 unless the file was damaged).
    """

    hits: int = 0
    misses: int = 0
    writes: int = 0
    entries: int = 0
    corrupt: int = 0


@runtime_checkable
class EmbeddingCache(Protocol):
    """Input key -> float32 vector, checked against model identity and dimension.

    Contract every backend honours:

    - ``get_many(keys, model_id, dimension)`` returns ``{key: vector}`` for the
      keys present under exactly ``model_id`` with exactly ``dimension``;
      missing keys are simply absent from the result. Each vector is a fresh,
      writable, 1-D float32 array, bit-identical to what was written.
    - ``put_many(items, model_id)`` stores ``(key, vector)`` pairs (1-D float32,
      non-empty) under ``model_id``, all or nothing: a bad item raises
      :class:`~rechunk.errors.InputError` before anything is written. A key
      written again replaces the previous vector. Returns the number written.
    - ``stats()`` returns :class:`CacheStats`; ``close()`` releases resources
      (using the cache afterwards raises :class:`~rechunk.errors.CacheError`).
    """

    def get_many(self, keys: Sequence[str], model_id: str, dimension: int) -> dict[str, Vector]:
        """Vectors of the ``keys`` stored under ``model_id`` with ``dimension``."""
        ...

    def put_many(self, items: Iterable[tuple[str, Vector]], model_id: str) -> int:
        """Store ``(key, vector)`` pairs under ``model_id``; return how many were written."""
        ...

    def stats(self) -> CacheStats:
        """Current counters."""
        ...

    def close(self) -> None:
        """Release the cache; later calls raise CacheError."""
        ...


# --------------------------------------------------------------------------- validation


def check_model_id(model_id: object) -> str:
    if not isinstance(model_id, str) or not model_id:
        raise InputError("model_id must be a non-empty string")
    if not is_utf8(model_id):
        raise InputError("model_id holds a lone surrogate (not valid UTF-8)")
    return model_id


def _check_dimension(dimension: object) -> int:
    if type(dimension) is not int or dimension <= 0:
        raise InputError(f"dimension must be a positive int, got {dimension!r}")
    return dimension


def check_keys(keys: Sequence[str]) -> list[str]:
    """Distinct keys in first-seen order; every key must be a str."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise InputError(f"keys must be a sequence of str, got {type(keys).__name__}")
    seen: dict[str, None] = {}
    for key in keys:
        if not isinstance(key, str):
            raise InputError(f"every key must be a str, got {type(key).__name__}")
        if not is_utf8(key):
            raise InputError(f"key {key!r} holds a lone surrogate (not valid UTF-8)")
        seen[key] = None
    return list(seen)


def encode_items(items: Iterable[tuple[str, Vector]]) -> list[tuple[str, int, int, bytes]]:
    """Validate every item first; return ``(key, dimension, crc32, blob)`` rows.

    The blob is the vector as little-endian float32 bytes; every backend stores
    these rows (an invalid item raises :class:`InputError` before any is returned).
    """
    if not isinstance(items, Iterable):
        raise InputError(f"items must be (key, vector) pairs, got {type(items).__name__}")
    rows: list[tuple[str, int, int, bytes]] = []
    vectors: list[Vector] = []
    for index, item in enumerate(items):
        try:
            key, vector = item
        except (TypeError, ValueError):
            raise InputError(f"item {index} is not a (key, vector) pair") from None
        if not isinstance(key, str):
            raise InputError(f"item {index}: key must be a str, got {type(key).__name__}")
        if not is_utf8(key):
            raise InputError(f"item {index}: key holds a lone surrogate (not valid UTF-8)")
        if not isinstance(vector, np.ndarray) or vector.dtype != np.float32:
            kind = getattr(vector, "dtype", type(vector).__name__)
            raise InputError(f"item {index}: vector must be a float32 ndarray, got {kind}")
        if vector.ndim != 1 or vector.shape[0] == 0:
            raise InputError(f"item {index}: vector must be 1-D and non-empty, got {vector.shape}")
        vectors.append(vector)
        blob = vector.astype(_DTYPE, copy=False).tobytes()
        rows.append((key, int(vector.shape[0]), zlib.crc32(blob), blob))
    fault = first_fault(vectors)  # NaN, all zeros, near float32's limit: never cached
    if fault is not None:
        raise InputError(
            f"item {fault[0]}: vector {fault[1]}; nothing was written (a cache holds only "
            f"finite vectors of norm >= {MIN_NORM:g} with no value beyond +-{MAX_COMPONENT:g})"
        )
    return rows


def _intact(blob: bytes, dimension: int, checksum: int) -> bool:
    """Whether ``blob`` holds ``dimension`` float32 values matching the crc32 ``checksum``
    (a damaged file may hand back NULL or text where the bytes were)."""
    return (
        isinstance(blob, bytes)
        and len(blob) == dimension * 4
        and isinstance(checksum, int)
        and zlib.crc32(blob) == checksum
    )


def row_checksum(model_id: str, key: str, dimension: int, blob: bytes) -> int:
    """The check an SQLite cache row carries (schema 2): 64 bits of BLAKE2b over the
    length-prefixed model id, key, dimension and vector bytes, as a signed SQLite integer.

    A row whose vector (and check) came from another row, or that an index entry of
    another key points at, fails it: a read never returns a vector for another input.
    """
    digest = hashlib.blake2b(digest_size=8, person=b"rechunk-cache/2")
    for field in (model_id.encode("utf-8"), key.encode("utf-8")):
        digest.update(len(field).to_bytes(8, "little"))
        digest.update(field)
    digest.update(dimension.to_bytes(8, "little"))
    digest.update(blob)
    return int.from_bytes(digest.digest(), "little", signed=True)


def _row_intact(model_id: str, key: str, dimension: int, checksum: int, blob: bytes) -> bool:
    """Whether a schema-2 row holds ``dimension`` float32 values that match its check."""
    return (
        isinstance(blob, bytes)
        and len(blob) == dimension * 4
        and type(checksum) is int
        and row_checksum(model_id, key, dimension, blob) == checksum
    )


def _rows(keys: list[str], block: npt.NDArray[np.float32]) -> dict[str, Vector]:
    """``{key: row}`` over a fresh ``(len(keys), dim)`` array the cache keeps no reference to."""
    return dict(zip(keys, block))


class _Counters:
    """Thread-safe hit/miss/write counters shared by both backends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hits = self.misses = self.writes = self.corrupt = 0

    def add(self, *, hits: int = 0, misses: int = 0, writes: int = 0, corrupt: int = 0) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses
            self.writes += writes
            self.corrupt += corrupt

    def snapshot(self, entries: int) -> CacheStats:
        with self._lock:
            return CacheStats(self.hits, self.misses, self.writes, entries, self.corrupt)

    def __getstate__(self) -> tuple[int, int, int, int]:
        with self._lock:
            return self.hits, self.misses, self.writes, self.corrupt

    def __setstate__(self, state: tuple[int, int, int, int]) -> None:
        self._lock = threading.Lock()
        self.hits, self.misses, self.writes, self.corrupt = state


# --------------------------------------------------------------------------- memory


#: Hash domain of the entry that records the length of a model's vectors in a cache (the
#: LangChain and LlamaIndex adapters wrote it first, hence its name).
DIMENSION_DOMAIN = "rechunk/adapter-dimension/v1"


def _dimension_key(model_id: str) -> str:
    return hash_fields(DIMENSION_DOMAIN, (model_id,))


def record_dimension(cache: EmbeddingCache, model_id: str, dimension: int) -> None:
    """Note in ``cache`` that ``model_id``'s vectors have ``dimension`` values.

    A reader that does not know the dimension (an adapter wrapping a framework's
    embeddings) needs it before it can look anything up: every writer records it,
    so vectors written by ``sync`` are found by the adapters' first call too. The
    record is a one-value vector under a reserved key (one entry per model in
    :meth:`~EmbeddingCache.stats`).
    """
    _check_dimension(dimension)
    record = np.array([dimension], dtype=np.float32)
    cache.put_many([(_dimension_key(model_id), record)], model_id)


def recorded_dimension(cache: EmbeddingCache, model_id: str) -> int | None:
    """The dimension :func:`record_dimension` noted for ``model_id``, or None."""
    key = _dimension_key(model_id)
    record = cache.get_many([key], model_id, 1).get(key)
    if record is None:
        return None
    value = float(record[0])
    return int(value) if value.is_integer() and value >= 1 else None


class MemoryCache:
    """An in-process :class:`EmbeddingCache` (a dict guarded by a lock).

    Keeps a private read-only copy of every vector written, keyed by
    ``(model_id, key)``; a read returns fresh copies. Nothing survives the process.
    A pickled copy (e.g. one sent to a worker process) holds the entries present
    when it was pickled; its writes stay in the copy and never reach the original.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], Vector] = {}
        self._counters = _Counters()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise CacheError("the cache is closed")

    def get_many(self, keys: Sequence[str], model_id: str, dimension: int) -> dict[str, Vector]:
        """Vectors of ``keys`` stored under exactly ``model_id`` and ``dimension``."""
        check_model_id(model_id)
        _check_dimension(dimension)
        wanted = check_keys(keys)
        with self._lock:
            self._check_open()
            stored = [(key, self._data.get((model_id, key))) for key in wanted]
        hits = [(key, vec) for key, vec in stored if vec is not None and vec.shape == (dimension,)]
        found: dict[str, Vector] = {}
        if hits:
            found = _rows([key for key, _ in hits], np.stack([vec for _, vec in hits]))
        self._counters.add(hits=len(found), misses=len(wanted) - len(found))
        return found

    def put_many(self, items: Iterable[tuple[str, Vector]], model_id: str) -> int:
        """Store ``(key, vector)`` pairs under ``model_id``, all or nothing."""
        check_model_id(model_id)
        rows = encode_items(items)
        copies = []
        for key, _, _, blob in rows:
            vector = np.frombuffer(blob, dtype=_DTYPE).astype(np.float32)
            vector.flags.writeable = False
            copies.append((key, vector))
        with self._lock:
            self._check_open()
            for key, vector in copies:
                self._data[(model_id, key)] = vector
        self._counters.add(writes=len(rows))
        return len(rows)

    def stats(self) -> CacheStats:
        """Counters of this cache; ``entries`` is the number of entries held."""
        with self._lock:
            self._check_open()
            entries = len(self._data)
        return self._counters.snapshot(entries)

    def close(self) -> None:
        """Drop every entry; later calls raise CacheError."""
        with self._lock:
            self._closed = True
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            return len(self._data)

    def __getstate__(self) -> dict[str, Any]:
        """The entries, counters and closed flag (not the lock)."""
        with self._lock:
            return {"data": dict(self._data), "counters": self._counters, "closed": self._closed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A new lock over the pickled entries (kept read-only, as every stored vector is)."""
        self._lock = threading.Lock()
        self._data = state["data"]
        for vector in self._data.values():
            vector.flags.writeable = False
        self._counters = state["counters"]
        self._closed = state["closed"]

    def __enter__(self) -> MemoryCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --------------------------------------------------------------------------- sqlite

_CREATE = (
    """CREATE TABLE IF NOT EXISTS rechunk_schema (
        name TEXT PRIMARY KEY,
        version INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS vectors (
        model_id TEXT NOT NULL,
        key TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        checksum INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (model_id, key)
    )""",
    "INSERT OR IGNORE INTO rechunk_schema (name, version) VALUES ('embedding-cache', "
    f"{SCHEMA_VERSION})",
)

_UPSERT = (
    "INSERT INTO vectors (model_id, key, dimension, checksum, vector) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (model_id, key) DO UPDATE SET dimension = excluded.dimension, "
    "checksum = excluded.checksum, vector = excluded.vector"
)


def _lookup_sql(count: int) -> str:
    marks = ",".join("?" * count)
    return (
        "SELECT key, dimension, checksum, vector FROM vectors "
        f"WHERE model_id = ? AND key IN ({marks})"
    )


class CacheWarning(UserWarning):
    """The reuse cache could not be used as it was, and the call went on without it: a
    damaged file was set aside (renamed, never deleted) and a new one started, or a file
    that cannot be written is only read. Nothing in a cache is the only copy of anything."""


class _Damaged(CacheError):
    """Damaged bytes in a file that may be a rechunk cache; ``reason`` says what was seen and
    ``foreign`` is the message for a file that turns out not to be a cache at all."""

    def __init__(self, reason: str, foreign: str) -> None:
        super().__init__(foreign)
        self.reason = reason
        self.foreign = foreign


class _Retry(Exception):
    """The file stopped being used while a call waited for a connection: ask again."""


class _Unwritable(CacheError):
    """The file (or its folder) cannot be written: read-only, full, or an I/O error."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


#: What SQLite calls damage, by error code (Python >= 3.11) and by message.
_DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FORMAT")
_DAMAGE_TEXT = (
    "malformed",
    "not a database",
    "unsupported file format",
    "no such table",
    "no such column",
    "could not decode",
)
#: What SQLite calls a file it cannot write (or, for a folder it cannot write, open).
_UNWRITABLE_CODES = (
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_PERM",
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_AUTH",
)
_UNWRITABLE_TEXT = ("readonly database", "unable to open", "disk i/o error", "is full")
#: Records of the schema table on page 1 of every rechunk cache (SQLite stores an entry's
#: type, name and table name side by side): a file holding one of them is a rechunk cache.
#: (Built, not written out: this source file must not hold them.)
_MARKERS = (
    b"table" + b"rechunk_schema" * 2,
    b"table" + b"vectors" * 2,
    b"sqlite_autoindex_rechunk_schema_1" + b"rechunk_schema",
)
#: What a refusal says of a file that does not hold a rechunk cache's schema records: it
#: may be another program's, so it is neither used nor set aside as a damaged cache.
_UNTOUCHED = (
    "left untouched (a cache whose first page is damaged cannot be told from another "
    "program's file: if it was rechunk's, move it aside and run again, which starts a new "
    "cache; else give another cache path)"
)
#: The files SQLite keeps beside a database; they go wherever the database goes.
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _failure(exc: BaseException) -> str | None:
    """``"damaged"``, ``"unwritable"`` or None (another failure: busy, locked, a bug)."""
    if isinstance(exc, UnicodeError):  # text where a damaged page had bytes
        return "damaged"
    if isinstance(exc, sqlite3.DatabaseError) and not exc.args:
        # Python 3.10 raises a bare DatabaseError when SQLite's own message cannot be
        # decoded: it quotes a name from a damaged schema page (3.11 raises UnicodeError)
        return "damaged"
    code = str(getattr(exc, "sqlite_errorname", "") or "")
    text = str(exc).lower()
    if code.startswith(_DAMAGE_CODES) or any(part in text for part in _DAMAGE_TEXT):
        return "damaged"
    if code.startswith(_UNWRITABLE_CODES) or any(part in text for part in _UNWRITABLE_TEXT):
        return "unwritable"
    return None


def _file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``: what tells a file from the one that replaced it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


# SQLite locks a database with POSIX locks, which belong to the process: closing any
# descriptor of the file drops all of them, those of every connection of this process
# too (SQLite itself never closes one of its own while they hold a lock). Then another
# process's connection, closing, takes itself for the file's last user and deletes the
# write-ahead log these connections still use: what either side writes next is lost to
# the other, or read as "database disk image is malformed". So a descriptor this module
# opens on a cache file is closed only when no other descriptor of this process is open
# on that file; until then it is kept here and used again (one per file and access mode,
# however many caches and copies open the file), and a later sweep closes it.
_kept_lock = threading.Lock()  # also held while a connection opens: see _sweep
_kept: dict[int, int] = {}  # kept descriptor -> its access mode
_users: dict[int, int] = {}  # kept descriptor -> the _opened blocks using it now
_POSIX = os.name == "posix"  # elsewhere a lock is a handle's: descriptors close at once


def _open_files() -> dict[tuple[int, int], set[int]] | None:
    """(device, inode) -> this process's open descriptors of it; None where unknown: only
    Linux's and macOS's ``/dev/fd`` list the open descriptors (a BSD's without fdescfs is
    a fixed folder of 0, 1, 2), and a listing that misses a kept one is not believed."""
    if not (sys.platform.startswith("linux") or sys.platform == "darwin"):
        return None
    try:
        names = os.listdir("/dev/fd")
    except OSError:
        return None
    files: dict[tuple[int, int], set[int]] = {}
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            st = os.fstat(int(name))
            files.setdefault((st.st_dev, st.st_ino), set()).add(int(name))
    listed = {fd for fds in files.values() for fd in fds}
    return files if set(_kept) <= listed else None


def _after_fork() -> None:
    """In a forked child: a fresh lock (another thread of the parent may have held it at
    the fork, and would never release it here) and no block using a kept descriptor (the
    parent's blocks do not run in the child; their counts would pin those forever)."""
    global _kept_lock
    _kept_lock = threading.Lock()
    _users.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _sweep() -> None:
    """Close the kept descriptors no block uses whose file no other descriptor of this
    process has open (no connection can hold a lock on it). Called under ``_kept_lock``,
    which connections open under too: none opens between the look and the close."""
    files = _open_files()
    if files is None:
        return  # which files are open cannot be told: keep them all
    for fd in [fd for fd in _kept if not _users.get(fd)]:
        try:
            st = os.fstat(fd)
        except OSError:
            del _kept[fd]
            continue
        if not files.get((st.st_dev, st.st_ino), set()) - set(_kept):
            del _kept[fd]
            os.close(fd)


def _kept_for(path: Path, mode: int) -> int | None:
    """A kept descriptor of the file at ``path`` with access ``mode``, if there is one."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    for fd, kept_mode in _kept.items():
        if kept_mode != mode:
            continue
        with contextlib.suppress(OSError):
            kst = os.fstat(fd)
            if (kst.st_dev, kst.st_ino) == (st.st_dev, st.st_ino):
                return fd
    return None


@contextlib.contextmanager
def _opened(path: Path, flags: int = os.O_RDONLY, *, fresh: bool = False) -> Iterator[int]:
    """A descriptor of ``path`` (read it with :func:`_head`: others may share it) that
    keeps this process's SQLite locks (see :func:`_sweep`); ``fresh``: opened now, not a
    kept one (the open itself is the check: whether this process may write the file)."""
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not _POSIX:
        fd = os.open(path, flags)
        try:
            yield fd
        finally:
            os.close(fd)
        return
    mode = flags & os.O_ACCMODE
    with _kept_lock:
        kept = None if fresh else _kept_for(path, mode)
        fd = os.open(path, flags) if kept is None else kept
        _kept[fd] = mode
        _users[fd] = _users.get(fd, 0) + 1
    try:
        yield fd
    finally:
        with _kept_lock:
            _users[fd] -= 1
            if not _users[fd]:
                del _users[fd]
            _sweep()


def _head(fd: int, size: int) -> bytes:
    """Up to the first ``size`` bytes of the file open as ``fd`` (whatever its offset)."""
    pread = getattr(os, "pread", None)
    if pread is None:  # Windows: the descriptor is this block's own
        os.lseek(fd, 0, os.SEEK_SET)
    parts: list[bytes] = []
    done = 0
    while done < size:
        part = pread(fd, size - done, done) if pread else os.read(fd, size - done)
        if not part:
            break
        parts.append(part)
        done += len(part)
    return b"".join(parts)


def _is_cache_file(path: Path) -> bool:
    """Whether ``path`` holds a rechunk cache's schema records, however damaged elsewhere."""
    try:
        with _opened(path) as fd:
            head = _head(fd, 1 << 16)
    except OSError:
        return False
    return any(marker in head for marker in _MARKERS)


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create files beside it (root too:
    an immutable file or a read-only file system refuses even root)."""
    try:
        with _opened(path, os.O_RDWR, fresh=True):
            pass
    except OSError:
        return False
    return os.access(path.parent, os.W_OK)


class SQLiteCache:
    """An :class:`EmbeddingCache` in one SQLite file (WAL mode), shared by threads and processes.

    Layout (schema version :data:`SCHEMA_VERSION`): table ``rechunk_schema``
    holds the version; table ``vectors`` holds one row per ``(model_id, key)``
    with ``dimension``, ``checksum`` (:func:`row_checksum`: 64 bits of BLAKE2b over
    model id, key, dimension and blob) and ``vector`` (the little-endian float32
    bytes). A read checks model, dimension, blob size and the checksum against the
    model and key it asked for, so a row whose vector came from another row, or an
    index entry pointing at another key's row, is never served: a row failing size or
    checksum is reported in ``stats().corrupt`` and treated as a miss (the next write
    replaces it).

    Schema 1 (rechunk before the row check; its checksum covered the vector bytes
    only) is migrated when such a file is first opened read-write, in one
    transaction: each row whose old crc32 holds gets the new checksum, a row whose
    crc32 fails is deleted. A row damaged in schema 1 in a way its crc32 could not
    see (a vector swapped together with its crc32) cannot be told apart then. Opened
    read-only, a schema-1 file is read with schema 1's check until a read-write open
    migrates it.

    Opening validates the file before anything can be written: a file that is not
    a rechunk cache (its header is not SQLite's and it holds no rechunk schema, or
    an SQLite database without rechunk's tables) or one from a newer schema raises
    :class:`CacheError` and the file's bytes are left exactly as they were.
    ``readonly=True`` never writes (``put_many`` raises CacheError) and refuses a
    missing path without creating it. With ``readonly=False`` a missing file (and
    its parent folder) is created.

    It is a cache, so a file that cannot be used does not stop the caller; each case
    gives one :class:`CacheWarning` naming the file:

    - Damage (SQLite finds the file malformed, truncated, its header or schema
      damaged), found when opening or in the middle of a call: the file and its
      ``-wal``/``-shm``/``-journal`` are renamed ``<name>.damaged-<time>`` (never
      deleted) and a new, empty cache is started at ``path``; the call goes on
      there. Opened ``readonly=True``, the file is left as it is and nothing is
      read from it.
    - A file that cannot be written (read-only file or file system, full disk):
      reads still come from it, writes stay in memory for the life of this object.
    - A file that cannot be read either: the object keeps vectors in memory only.

    :attr:`degraded` says which of the last two holds (None while the file is used).

    Concurrency: each call borrows a connection from a small pool (one per
    thread in flight), so threads read in parallel; writers in several
    processes serialise on SQLite's write lock, waiting up to ``timeout``
    seconds. ``put_many`` is one ``BEGIN IMMEDIATE`` transaction: after a crash
    at any point each batch is either all there or absent. WAL with
    ``synchronous=NORMAL`` keeps every committed batch across a process crash;
    a power loss may drop the last batches but never corrupts the file. A
    process that has the file open while another sets it aside goes on with the
    set-aside file until it finds damage itself, then opens the new one.

    Pickling keeps the file's absolute path, ``readonly``, ``timeout``, the
    counters and whether the cache is closed, never a connection: unpickling
    opens the file again (validated as when opening) unless the cache was closed,
    and a closed cache stays closed.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, timeout: float = 30.0
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise InputError(f"timeout must be a non-negative number of seconds, got {timeout!r}")
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise InputError(f"SQLiteCache takes a file path, not {path!r}")
        if type(readonly) is not bool:
            raise InputError(f"readonly must be True or False, not {readonly!r}")
        # absolute: a connection opened later (another thread) must not follow a chdir
        self._setup(Path(path).absolute(), readonly, float(timeout), _Counters(), closed=False)

    def _setup(
        self, path: Path, readonly: bool, timeout: float, counters: _Counters, *, closed: bool
    ) -> None:
        """Set every attribute and, unless ``closed``, open the file (``__init__``, unpickling)."""
        self.path = path
        self.readonly = readonly
        self._timeout = timeout
        self._lock = threading.Lock()
        self._recover_lock = threading.RLock()
        # (generation, connection): a connection to a file since set aside is closed, not reused
        self._idle: list[tuple[int, sqlite3.Connection]] = []
        self._generation = 0
        self._file: tuple[int, int] | None = None
        # "file": reads and writes go to the file; "read-only": the file is read and writes
        # stay in memory; "memory": the file is not used at all
        self._state = "file"
        # read-only state on a file system that cannot hold SQLite's -shm beside a WAL file
        # (read-only, full): the file is read as immutable, without locks
        self._immutable = False
        self._memory = MemoryCache()
        self._closed = closed
        self._counters = counters
        if not closed:
            self._open()

    @property
    def degraded(self) -> str | None:
        """None while the file is used as usual, else ``"read-only"`` (the file is read,
        writes stay in memory) or ``"memory"`` (the file is not used)."""
        return None if self._state == "file" else self._state

    # ----------------------------------------------------------------- opening

    def _open(self) -> None:
        """Validate (or create) the file and keep one connection ready; a damaged or
        unwritable file is handled as the class docstring says."""
        exists = self.path.exists()
        if exists and not self.path.is_file():
            raise CacheError(f"cache path {self.path} exists and is not a file")
        if self.readonly and not exists:
            raise CacheError(f"cache file {self.path} does not exist (opened read-only)")
        try:
            self._open_file()
        except _Damaged as exc:
            if not _is_cache_file(self.path):
                raise CacheError(exc.foreign) from exc
            self._set_aside(exc.reason, self._generation)
        except _Unwritable as exc:
            if exists:
                self._read_only(exc.reason)
                return
            # a new cache that cannot be made (a full or read-only file system) stops
            # nothing either: no 0-byte file is left where it was to be
            with contextlib.suppress(OSError):  # a link stays, and what it points at
                if not self.path.is_symlink() and self.path.stat().st_size == 0:
                    self.path.unlink()
            self._to_memory(
                f"cache {self.path} cannot be created ({exc.reason}); vectors are kept in "
                "memory only"
            )

    def _open_file(self) -> None:
        """Open ``path`` as a cache (created when missing); raises :class:`_Damaged`,
        :class:`_Unwritable` or :class:`CacheError`."""
        exists = self.path.exists()
        if exists:
            self._check_header()
        elif self.path.parent.exists() and not self.path.parent.is_dir():
            raise CacheError(f"cannot create cache {self.path}: {self.path.parent} is not a folder")
        elif not self.path.parent.exists():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CacheError(f"cannot create the folder of cache {self.path}: {exc}") from exc
        if exists and self._writes_file:
            # check on a read-only connection first: closing a read-write one checkpoints
            # the WAL, which would rewrite a file that is then refused (a newer schema)
            try:
                probe = self._connect(read_only=True)
                try:
                    self._prepare(probe, check_only=True)
                finally:
                    probe.close()
            except _Unwritable:
                # a process killed mid-transaction (creating the file, before it was in WAL
                # mode) left a hot journal that only a writer may roll back: the read-write
                # connection below does, where this process may write the file
                if not _writable(self.path):
                    raise
        conn = self._connect(create=not exists)
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._file = _file_id(self.path)
            self._idle.append((self._generation, conn))

    @property
    def _writes_file(self) -> bool:
        return not self.readonly and self._state == "file"

    def _check_header(self) -> None:
        """Refuse a non-SQLite file before SQLite ever touches it (0 bytes is a new cache)."""
        try:
            with _opened(self.path) as fd:
                header = _head(fd, _SQLITE_HEADER)
        except OSError as exc:
            raise CacheError(f"cannot read cache file {self.path}: {exc}") from exc
        if header and (len(header) < _SQLITE_HEADER or not header.startswith(_SQLITE_MAGIC)):
            raise _Damaged(
                "its header is not SQLite's",
                f"{self.path} is not a rechunk cache (not an SQLite database); {_UNTOUCHED}",
            )

    def _sqlite_failure(
        self, exc: BaseException, doing: str, *, read_only: bool = False
    ) -> CacheError:
        """The error for an SQLite failure while ``doing`` (on a connection opened
        ``read_only``): :class:`_Damaged`, :class:`_Unwritable`, or a plain
        :class:`CacheError` (busy, locked, ...)."""
        kind = _failure(exc)
        code = getattr(exc, "sqlite_errorname", "SQLITE_READONLY")
        if (
            kind == "unwritable"
            and code == "SQLITE_READONLY"  # not a subcode (moved, recovery, cannot lock)
            and "readonly" in str(exc).lower()
            and not read_only  # a read-only connection is refused a hot journal's rollback
            and self._writes_file
            and _writable(self.path)
        ):
            kind = "damaged"  # the file may be written: its own header says it may not
        said = str(exc) or f"{type(exc).__name__} whose message is not valid UTF-8"
        message = f"cannot {doing} cache {self.path}: {said}"
        if kind == "damaged":
            return _Damaged(said, f"{message}; {_UNTOUCHED}")
        if kind == "unwritable":
            return _Unwritable(said, message)
        return CacheError(message)

    def _connect(self, *, create: bool = False, read_only: bool = False) -> sqlite3.Connection:
        read_only = read_only or not self._writes_file
        mode = "ro" if read_only else ("rwc" if create else "rw")
        uri = f"{self.path.resolve().as_uri()}?mode={mode}"
        if read_only and self._immutable:
            uri += "&immutable=1"
        try:
            with _kept_lock:  # not while _sweep looks which files are open (it closes)
                conn = sqlite3.connect(
                    uri,
                    uri=True,
                    timeout=self._timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            if not read_only:
                conn.execute("PRAGMA synchronous = NORMAL")
        except (sqlite3.Error, UnicodeError) as exc:  # UnicodeError: a damaged schema page
            raise self._sqlite_failure(exc, "open", read_only=read_only) from exc
        return conn

    def _prepare(self, conn: sqlite3.Connection, check_only: bool = False) -> None:
        """Check (and for a new file, create) the schema; nothing is written to a foreign file.

        ``check_only``: a read-only look before the read-write connection opens (an empty
        database passes: the read-write pass makes it a cache).
        """
        writes = self._writes_file and not check_only
        try:
            tables = self._tables(conn)
            if not tables and check_only:
                return
            if not tables:
                if not writes:
                    raise CacheError(f"{self.path} is an empty database, not a rechunk cache")
                self._create(conn)
                tables = self._tables(conn)
            if "rechunk_schema" not in tables or "vectors" not in tables:
                raise _Damaged(
                    f"its tables are {sorted(tables)}",
                    f"{self.path} is an SQLite database but not a rechunk cache; {_UNTOUCHED}",
                )
            row = conn.execute(
                "SELECT version FROM rechunk_schema WHERE name = 'embedding-cache'"
            ).fetchone()
            if row is None or type(row[0]) is not int:
                raise _Damaged(
                    "it records no valid schema version",
                    f"{self.path} has no valid rechunk schema version; {_UNTOUCHED}",
                )
            if row[0] > SCHEMA_VERSION:
                raise CacheError(
                    f"{self.path} uses cache schema {row[0]}, newer than this rechunk's "
                    f"{SCHEMA_VERSION}; upgrade rechunk (the file was left untouched)"
                )
            if row[0] < 1:
                raise CacheError(f"{self.path} uses unknown old cache schema {row[0]}")
            if row[0] < SCHEMA_VERSION and writes:
                self._migrate(conn)
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal" and writes:
                self._set_wal(conn)
            self._check_truncation(conn)
        except (sqlite3.Error, UnicodeError) as exc:  # damaged bytes, or text
            raise self._sqlite_failure(exc, "read", read_only=check_only) from exc

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Schema 1 -> 2 in one write transaction (another process may have done it first):
        every row whose crc32 holds gets :func:`row_checksum`; the others are deleted."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            (version,) = conn.execute(
                "SELECT version FROM rechunk_schema WHERE name = 'embedding-cache'"
            ).fetchone()
            if version == 1:
                # rows read from the table itself (a full scan), never through the key index
                rows = conn.execute(
                    "SELECT rowid, model_id, key, dimension, checksum, vector FROM vectors"
                ).fetchall()
                updates, damaged = [], []
                for rowid, model_id, key, dimension, checksum, blob in rows:
                    if (
                        isinstance(model_id, str)
                        and isinstance(key, str)
                        and type(dimension) is int
                        and dimension > 0
                        and _intact(blob, dimension, checksum)
                    ):
                        updates.append((row_checksum(model_id, key, dimension, blob), rowid))
                    else:
                        damaged.append((rowid,))
                conn.executemany("UPDATE vectors SET checksum = ? WHERE rowid = ?", updates)
                conn.executemany("DELETE FROM vectors WHERE rowid = ?", damaged)
                conn.execute(
                    "UPDATE rechunk_schema SET version = ? WHERE name = 'embedding-cache'",
                    (SCHEMA_VERSION,),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _tables(conn: sqlite3.Connection) -> set[str]:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(name) for (name,) in rows}

    def _set_wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL mode, retrying while another process holds a lock.

        SQLite answers this pragma with "database is locked" at once, without
        its busy handler, when another connection is using the file (several
        processes opening a new cache together); retry until ``timeout``.
        """
        deadline = time.monotonic() + self._timeout
        delay = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        if str(mode).lower() != "wal":
            raise CacheError(f"cannot switch cache {self.path} to WAL mode (got {mode})")

    def _create(self, conn: sqlite3.Connection) -> None:
        """Create the schema in an empty file; safe when several processes race to do it.

        The caller then switches the file to WAL mode (a crash in between leaves
        a valid cache in rollback-journal mode, switched by the next opener).
        """
        conn.execute("PRAGMA page_size = 8192")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self._tables(conn) - {"rechunk_schema", "vectors"}:
                raise CacheError(f"{self.path} was filled by something else meanwhile")
            for statement in _CREATE:
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_truncation(self, conn: sqlite3.Connection) -> None:
        """Refuse a database file shorter than its header says (a truncated copy).

        Only meaningful while no write-ahead log holds pages: with this
        connection open (it holds SQLite's shared lock), no other process can
        remove a non-empty log, and without one every page lives in the file.
        """
        wal = self.path.with_name(self.path.name + "-wal")
        with contextlib.suppress(OSError):
            if wal.stat().st_size > 0:
                return
        try:
            with _opened(self.path) as fd:
                header = _head(fd, _SQLITE_HEADER)
                size = os.fstat(fd).st_size
        except OSError as exc:
            raise CacheError(f"cannot read cache file {self.path}: {exc}") from exc
        if len(header) < _SQLITE_HEADER:
            return
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        valid = header[24:28] == header[92:96]
        if valid and pages and size < pages * page_size:
            reason = f"truncated: {size} bytes, its header says {pages * page_size}"
            raise _Damaged(reason, f"cache file {self.path} is {reason}; {_UNTOUCHED}")

    # ----------------------------------------------------------------- damage and recovery

    def _warn(self, message: str) -> None:
        """One :class:`CacheWarning`, shown at the first caller outside this module."""
        level, frame = 2, sys._getframe(1)  # stacklevel 2: the caller of _warn
        while frame.f_code.co_filename == __file__ and frame.f_back is not None:
            level, frame = level + 1, frame.f_back
        warnings.warn(message, CacheWarning, stacklevel=level)

    def _set_aside(self, reason: str, seen: int) -> None:
        """Rename the damaged file aside and start a new cache at ``path`` (once per damage:
        ``seen`` is the generation the caller found damaged; a later one was repaired)."""
        with self._recover_lock:
            if seen != self._generation or self._state == "memory":
                return
            # a new generation first: no call borrows a connection to the damaged file now;
            # they close after the rename (SQLite does not checkpoint into a moved file)
            idle = self._retire(close=False)
            try:
                self._replace_damaged(reason)
            finally:
                for conn in idle:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()

    def _replace_damaged(self, reason: str) -> None:
        """The body of :meth:`_set_aside` (the recovery lock held, a new generation begun)."""
        if self.readonly or self._immutable:
            # read without locks (immutable), a file another process writes may look damaged
            why = "it was opened read-only" if self.readonly else "it cannot be written"
            self._to_memory(
                f"cache {self.path} is damaged ({reason}); {why}, so it is left as it is "
                "and nothing is read from it"
            )
            return
        aside = None
        if self._file is None or _file_id(self.path) == self._file:
            try:
                aside = self._rename_aside()
            except OSError as exc:
                self._to_memory(
                    f"cache {self.path} is damaged ({reason}) and cannot be set aside "
                    f"({exc.strerror or exc}); vectors are kept in memory only"
                )
                return
        # else: another process set it aside already (and said so); open what is there
        for _ in range(2):
            try:
                self._open_file()
                break
            except _Damaged as exc:  # what another process left is damaged too
                reason = exc.reason
                try:
                    aside = self._rename_aside()
                except OSError:
                    break
            except CacheError as exc:
                self._to_memory(
                    f"cache {self.path} is damaged ({reason}); "
                    + (f"it was set aside as {aside.name}, but " if aside else "")
                    + f"a new one cannot be started ({exc}); vectors are kept in memory only"
                )
                return
        if self._file is None or _file_id(self.path) != self._file:
            self._to_memory(f"cache {self.path} cannot be opened again after damage ({reason})")
            return
        if aside is not None:
            self._warn(
                f"cache {self.path} is damaged ({reason}); it was set aside as "
                f"{aside.name} and a new, empty cache was started"
            )

    def _rename_aside(self) -> Path:
        """Rename the file and its side files to ``<name>.damaged-<time>``; the side files
        first, so a new file at ``path`` never meets the old write-ahead log."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        n = 1
        while any(Path(f"{aside}{suffix}").exists() for suffix in ("", *_SIDE_FILES)):
            aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{n}")
            n += 1
        for suffix in _SIDE_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{self.path}{suffix}", f"{aside}{suffix}")
        os.rename(self.path, aside)
        self._file = None
        return aside

    def _retire(self, *, close: bool = True) -> list[sqlite3.Connection]:
        """Start a new generation: idle connections close now (or, ``close=False``, are
        returned for the caller to close), borrowed ones when their call ends."""
        with self._lock:
            self._generation += 1
            idle, self._idle = self._idle, []
        conns = [conn for _, conn in idle]
        if close:
            for conn in conns:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            return []
        return conns

    def _read_only(self, reason: str) -> None:
        """The file cannot be written: read it, keep writes in memory."""
        with self._recover_lock:
            if self._state != "file":
                return
            self._retire()
            self._state = "read-only"
            try:
                try:
                    self._open_file()
                except _Unwritable:
                    # SQLite reads a WAL file only with its -shm beside it, which a
                    # read-only or full file system cannot hold: read it as it is on disk
                    self._immutable = True
                    self._open_file()
            except (_Damaged, _Unwritable) as exc:
                self._state = "memory"
                also = "" if exc.reason == reason else f"; {exc.reason}"
                self._warn(
                    f"cache {self.path} cannot be written or read ({reason}{also}); "
                    "vectors are kept in memory only"
                )
                return
            except CacheError:
                self._state = "file"
                raise
            self._warn(
                f"cache {self.path} cannot be written ({reason}); it is still read, and "
                "what is embedded now is kept in memory only"
            )

    def _to_memory(self, message: str) -> None:
        with self._recover_lock:
            self._retire()
            self._state = "memory"
            self._warn(message)

    # ----------------------------------------------------------------- connections

    @contextlib.contextmanager
    def _connection(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        """A pooled connection and the generation (the file) it belongs to."""
        stale: list[sqlite3.Connection] = []
        with self._lock:
            if self._closed:
                raise CacheError("the cache is closed")
            generation = self._generation
            conn = None
            while self._idle and conn is None:
                born, candidate = self._idle.pop()
                if born == generation:
                    conn = candidate
                else:
                    stale.append(candidate)
        for old in stale:
            with contextlib.suppress(sqlite3.Error):
                old.close()
        if conn is None:
            # never while a recovery renames or replaces the file: a new connection opens
            # the file of the generation it is counted in
            with self._recover_lock:
                generation = self._generation
                if self._state == "memory":
                    raise _Retry
                conn = self._connect()
        try:
            yield conn, generation
        finally:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            with self._lock:
                keep = not self._closed and generation == self._generation
                if keep:
                    self._idle.append((generation, conn))
            if not keep:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    def _error(self, action: str, exc: sqlite3.Error) -> CacheError:
        return CacheError(f"cannot {action} cache {self.path}: {exc}")

    def _on_file(self, action: str, op: Callable[[sqlite3.Connection], _T]) -> _T | None:
        """``op`` on a pooled connection, or None once the file cannot serve it (damage is
        set aside and ``op`` runs again on the new file; an unwritable file turns
        read-only, an unreadable one memory-only)."""
        for _ in range(4):
            if self._state == "memory":
                with self._lock:
                    if self._closed:
                        raise CacheError("the cache is closed")
                return None
            seen = self._generation
            try:
                with self._connection() as (conn, born):
                    result = op(conn)
                if action == "write to" and born != self._generation:
                    continue  # written to a file set aside meanwhile: write to the new one
                return result
            except _Retry:
                continue
            except (sqlite3.Error, UnicodeError) as exc:
                failure: CacheError = self._sqlite_failure(exc, action)
            except (_Damaged, _Unwritable) as exc:  # opening a connection
                failure = exc
            if self._file is not None and _file_id(self.path) != self._file:
                self._reopen(seen)  # another process set the file aside: use the new one
            elif isinstance(failure, _Damaged):
                self._set_aside(failure.reason, seen)
            elif isinstance(failure, _Unwritable):
                if action == "write to" and self._state == "file":
                    self._read_only(failure.reason)
                else:
                    self._to_memory(
                        f"cache {self.path} cannot be read ({failure.reason}); vectors are "
                        "kept in memory only"
                    )
                return None
            else:
                raise failure
        raise CacheError(f"cannot {action} cache {self.path}: it keeps failing")

    def _reopen(self, seen: int) -> None:
        """Open the file now at ``path`` (another process replaced a damaged one)."""
        with self._recover_lock:
            if seen != self._generation:
                return
            self._retire()
            try:
                self._open_file()
            except _Damaged as exc:
                self._set_aside(exc.reason, self._generation)
            except CacheError as exc:
                self._to_memory(
                    f"cache {self.path} was replaced and cannot be opened again ({exc}); "
                    "vectors are kept in memory only"
                )

    # ----------------------------------------------------------------- API

    def get_many(self, keys: Sequence[str], model_id: str, dimension: int) -> dict[str, Vector]:
        """Vectors of ``keys`` stored under exactly ``model_id`` and ``dimension``.

        Looks keys up ``LOOKUP_CHUNK`` at a time with ``WHERE key IN (...)``,
        all in one read transaction (a consistent snapshot).
        """
        check_model_id(model_id)
        _check_dimension(dimension)
        wanted = check_keys(keys)
        if not wanted:
            with self._lock:
                if self._closed:
                    raise CacheError("the cache is closed")
            return {}
        found: dict[str, Vector] = {}
        rest = wanted
        if self._state != "file":  # what this object wrote since the file stopped taking writes
            found = self._memory.get_many(wanted, model_id, dimension)
            rest = [key for key in wanted if key not in found]
        corrupt = 0
        if rest:

            def lookup(conn: sqlite3.Connection) -> tuple[list[str], list[bytes], int]:
                found_keys: list[str] = []
                blobs: list[bytes] = []
                bad = 0
                conn.execute("BEGIN")
                # schema 1 until a read-write open migrates it (maybe another process's)
                (schema,) = conn.execute(
                    "SELECT version FROM rechunk_schema WHERE name = 'embedding-cache'"
                ).fetchone()
                for start in range(0, len(rest), LOOKUP_CHUNK):
                    chunk = rest[start : start + LOOKUP_CHUNK]
                    asked = set(chunk)
                    rows = conn.execute(_lookup_sql(len(chunk)), (model_id, *chunk))
                    for key, dim, checksum, blob in rows:
                        if key not in asked:  # a damaged index: never another's row
                            bad += 1
                            continue
                        if dim != dimension:
                            continue
                        if (
                            _row_intact(model_id, key, dim, checksum, blob)
                            if schema != 1
                            else _intact(blob, dim, checksum)
                        ):
                            found_keys.append(key)
                            blobs.append(blob)
                        else:
                            bad += 1
                conn.execute("COMMIT")
                return found_keys, blobs, bad

            result = self._on_file("read", lookup)
            if result is not None:
                found_keys, blobs, corrupt = result
                if blobs:
                    block = np.frombuffer(b"".join(blobs), dtype=_DTYPE).astype(np.float32)
                    found.update(_rows(found_keys, block.reshape(len(blobs), dimension)))
        self._counters.add(hits=len(found), misses=len(wanted) - len(found), corrupt=corrupt)
        return found

    def put_many(self, items: Iterable[tuple[str, Vector]], model_id: str) -> int:
        """Store ``(key, vector)`` pairs under ``model_id`` in one transaction."""
        if self.readonly:
            raise CacheError(f"cache {self.path} was opened read-only")
        check_model_id(model_id)
        rows = encode_items(items)
        if not rows:
            return 0
        params = [
            (model_id, key, dim, row_checksum(model_id, key, dim, blob), blob)
            for key, dim, _, blob in rows
        ]

        def write(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_UPSERT, params)
            conn.execute("COMMIT")
            return True

        if self._state != "file" or self._on_file("write to", write) is None:
            self._memory.put_many(
                [(key, np.frombuffer(blob, dtype=_DTYPE)) for key, _, _, blob in rows], model_id
            )
        self._counters.add(writes=len(rows))
        return len(rows)

    def stats(self) -> CacheStats:
        """Counters of this object; ``entries`` counts every entry in the file (and those
        kept in memory since the file stopped taking writes)."""

        def count(conn: sqlite3.Connection) -> int:
            (entries,) = conn.execute("SELECT count(*) FROM vectors").fetchone()
            return int(entries)

        entries = self._on_file("read", count) if self._state != "memory" else None
        extra = len(self._memory) if self._state != "file" else 0
        return self._counters.snapshot((entries or 0) + extra)

    def close(self) -> None:
        """Close every idle connection; connections in use close when their call ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()
        self._memory.close()
        if _POSIX:  # the descriptors kept for this file's locks, once no connection is left
            with _kept_lock:
                _sweep()

    def __enter__(self) -> SQLiteCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Where and how to open the file again, the counters and the closed flag."""
        with self._lock:
            closed = self._closed
        return {
            "path": self.path.absolute(),
            "readonly": self.readonly,
            "timeout": self._timeout,
            "counters": self._counters,
            "closed": closed,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Open the same file again (validated as when opening); a closed cache stays closed."""
        self._setup(
            state["path"],
            state["readonly"],
            state["timeout"],
            state["counters"],
            closed=state["closed"],
        )

    def __repr__(self) -> str:
        flag = ", readonly=True" if self.readonly else ""
        return f"SQLiteCache({str(self.path)!r}{flag})"
