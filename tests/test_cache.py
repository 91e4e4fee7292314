"""The reuse cache contract, run against every backend, plus SQLite's own guarantees."""

from __future__ import annotations

import os
import pickle
import sqlite3
import subprocess
import sys
import threading
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rechunk.errors import CacheError, InputError, RechunkError
from rechunk.reuse.cache import (
    SCHEMA_VERSION,
    CacheStats,
    CacheWarning,
    EmbeddingCache,
    MemoryCache,
    SQLiteCache,
)
from rechunk.reuse.identity import input_key

MODEL = "test-model/v1"
OTHER = "test-model/v2"


def vector_for(key: str, dim: int) -> np.ndarray:
    """A deterministic float32 vector derived from the key (with awkward bit patterns)."""
    rng = np.random.default_rng(zlib.crc32(f"{key}/{dim}".encode()))
    vec = rng.standard_normal(dim).astype(np.float32)
    vec[0] = np.float32(-0.0)
    if dim > 2:
        vec[1] = np.finfo(np.float32).tiny / 2  # a subnormal
    return vec


def bits(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype="<f4").tobytes()


class CacheContract:
    """Every EmbeddingCache backend must pass these (subclass and provide ``cache``)."""

    @pytest.fixture
    def cache(self, tmp_path: Path) -> Iterator[EmbeddingCache]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def test_is_an_embedding_cache(self, cache: EmbeddingCache) -> None:
        assert isinstance(cache, EmbeddingCache)

    def test_round_trip_is_bit_identical(self, cache: EmbeddingCache) -> None:
        keys = [input_key(MODEL, f"text {i}") for i in range(50)]
        written = {k: vector_for(k, 384) for k in keys}
        assert cache.put_many(written.items(), MODEL) == 50
        got = cache.get_many(keys, MODEL, 384)
        assert set(got) == set(keys)
        for key, vec in got.items():
            assert vec.dtype == np.float32 and vec.shape == (384,)
            assert bits(vec) == bits(written[key])
            assert vec.flags.writeable

    def test_returned_vectors_are_copies(self, cache: EmbeddingCache) -> None:
        cache.put_many([("k", np.ones(4, dtype=np.float32))], MODEL)
        cache.get_many(["k"], MODEL, 4)["k"][:] = 7
        assert (cache.get_many(["k"], MODEL, 4)["k"] == 1).all()

    def test_missing_keys_are_absent(self, cache: EmbeddingCache) -> None:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
        assert set(cache.get_many(["a", "b", "c"], MODEL, 8)) == {"a"}
        assert cache.get_many([], MODEL, 8) == {}

    def test_other_model_is_never_returned(self, cache: EmbeddingCache) -> None:
        cache.put_many([("k", vector_for("k", 8))], MODEL)
        assert cache.get_many(["k"], OTHER, 8) == {}
        cache.put_many([("k", vector_for("other", 8))], OTHER)
        assert bits(cache.get_many(["k"], MODEL, 8)["k"]) == bits(vector_for("k", 8))
        assert bits(cache.get_many(["k"], OTHER, 8)["k"]) == bits(vector_for("other", 8))

    def test_other_dimension_is_never_returned(self, cache: EmbeddingCache) -> None:
        cache.put_many([("k", vector_for("k", 8))], MODEL)
        assert cache.get_many(["k"], MODEL, 16) == {}
        assert cache.get_many(["k"], MODEL, 4) == {}
        assert set(cache.get_many(["k"], MODEL, 8)) == {"k"}

    def test_rewrite_replaces(self, cache: EmbeddingCache) -> None:
        cache.put_many([("k", vector_for("a", 8))], MODEL)
        cache.put_many([("k", vector_for("b", 8))], MODEL)
        assert bits(cache.get_many(["k"], MODEL, 8)["k"]) == bits(vector_for("b", 8))
        assert cache.stats().entries == 1

    def test_stats_count(self, cache: EmbeddingCache) -> None:
        assert cache.stats() == CacheStats()
        cache.put_many([(k, vector_for(k, 8)) for k in "abc"], MODEL)
        cache.get_many(["a", "b", "x", "a"], MODEL, 8)  # duplicates count once
        cache.get_many(["c"], OTHER, 8)
        stats = cache.stats()
        assert (stats.hits, stats.misses, stats.writes, stats.entries) == (2, 2, 3, 3)
        assert stats.corrupt == 0

    def test_batch_of_1000_keys(self, cache: EmbeddingCache) -> None:
        keys = [input_key(MODEL, str(i)) for i in range(1000)]
        cache.put_many(((k, vector_for(k, 32)) for k in keys[::2]), MODEL)
        got = cache.get_many(keys, MODEL, 32)
        assert set(got) == set(keys[::2])
        assert all(bits(got[k]) == bits(vector_for(k, 32)) for k in keys[::2])
        stats = cache.stats()
        assert (stats.hits, stats.misses, stats.entries) == (500, 500, 500)

    @pytest.mark.parametrize(
        "item",
        [
            ("k", np.ones(4, dtype=np.float64)),
            ("k", np.ones((2, 2), dtype=np.float32)),
            ("k", np.ones(0, dtype=np.float32)),
            ("k", np.array([1.0, np.inf, 0.0, 0.0], dtype=np.float32)),
            ("k", [1.0, 2.0]),
            (1, np.ones(4, dtype=np.float32)),
            ("caf\udce9", np.ones(4, dtype=np.float32)),  # a lone surrogate: not UTF-8
            ("only-a-key",),
        ],
    )
    def test_bad_item_writes_nothing(self, cache: EmbeddingCache, item: Any) -> None:
        good = ("good", np.ones(4, dtype=np.float32))
        with pytest.raises(InputError):
            cache.put_many([good, item], MODEL)
        assert cache.get_many(["good"], MODEL, 4) == {}
        assert cache.stats().entries == 0

    def test_bad_arguments(self, cache: EmbeddingCache) -> None:
        with pytest.raises(InputError):
            cache.get_many("abc", MODEL, 4)
        with pytest.raises(InputError):
            cache.get_many(["a"], "", 4)
        with pytest.raises(InputError):
            cache.get_many(["a"], MODEL, 0)
        with pytest.raises(InputError):
            cache.get_many(["a"], MODEL, True)
        for keys, model in ((None, MODEL), (["caf\udce9"], MODEL), (["a"], "m\udce9")):
            with pytest.raises(InputError):
                cache.get_many(keys, model, 4)  # type: ignore[arg-type]
        with pytest.raises(InputError):
            cache.put_many(None, MODEL)  # type: ignore[arg-type]

    def test_closed_cache_refuses(self, cache: EmbeddingCache) -> None:
        cache.close()
        with pytest.raises(CacheError):
            cache.get_many(["a"], MODEL, 4)
        with pytest.raises(CacheError):
            cache.put_many([("a", np.ones(4, dtype=np.float32))], MODEL)
        with pytest.raises(CacheError):
            cache.stats()

    def test_pickled_copy_keeps_entries_and_counters(self, cache: EmbeddingCache) -> None:
        cache.put_many([(k, vector_for(k, 8)) for k in "ab"], MODEL)
        cache.get_many(["a", "x"], MODEL, 8)
        copy = pickle.loads(pickle.dumps(cache))
        try:
            assert copy.stats() == cache.stats() == CacheStats(1, 1, 2, 2, 0)
            got = copy.get_many(["a", "b"], MODEL, 8)
            assert {k: bits(v) for k, v in got.items()} == {k: bits(vector_for(k, 8)) for k in "ab"}
            assert copy.put_many([("c", vector_for("c", 8))], MODEL) == 1
            assert (copy.stats().hits, copy.stats().writes) == (3, 3)
            assert (cache.stats().hits, cache.stats().writes) == (1, 2)  # counted in the copy only
        finally:
            copy.close()
        assert set(cache.get_many(["a", "b"], MODEL, 8)) == {"a", "b"}  # closing the copy

    def test_pickled_closed_cache_stays_closed(self, cache: EmbeddingCache) -> None:
        cache.close()
        copy = pickle.loads(pickle.dumps(cache))
        with pytest.raises(CacheError, match="closed"):
            copy.get_many(["a"], MODEL, 4)
        with pytest.raises(CacheError, match="closed"):
            copy.put_many([("a", np.ones(4, dtype=np.float32))], MODEL)

    def test_threads_write_and_read_concurrently(self, cache: EmbeddingCache) -> None:
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for batch in range(20):
                    keys = [f"{worker}-{batch}-{i}" for i in range(25)]
                    cache.put_many([(k, vector_for(k, 16)) for k in keys], MODEL)
                    got = cache.get_many([*keys, f"{(worker + 1) % 4}-{batch}-0"], MODEL, 16)
                    assert all(bits(got[k]) == bits(vector_for(k, 16)) for k in keys)
                    for key, vec in got.items():
                        assert bits(vec) == bits(vector_for(key, 16))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        assert cache.stats().entries == 4 * 20 * 25


class TestMemoryCache(CacheContract):
    @pytest.fixture
    def cache(self, tmp_path: Path) -> Iterator[EmbeddingCache]:
        cache = MemoryCache()
        yield cache
        cache.close()


def test_pickled_memory_cache_is_a_copy() -> None:
    with MemoryCache() as cache:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
        with pickle.loads(pickle.dumps(cache)) as copy:
            copy.put_many([("b", vector_for("b", 8))], MODEL)
            cache.put_many([("c", vector_for("c", 8))], MODEL)
            assert set(copy.get_many(["a", "b", "c"], MODEL, 8)) == {"a", "b"}
            assert set(cache.get_many(["a", "b", "c"], MODEL, 8)) == {"a", "c"}


class TestSQLiteCache(CacheContract):
    @pytest.fixture
    def cache(self, tmp_path: Path) -> Iterator[EmbeddingCache]:
        cache = SQLiteCache(tmp_path / "cache.sqlite")
        yield cache
        cache.close()


# --------------------------------------------------------------------------- SQLite only


def _fill(path: Path, n: int = 200, dim: int = 64) -> dict[str, np.ndarray]:
    written = {f"k{i}": vector_for(f"k{i}", dim) for i in range(n)}
    with SQLiteCache(path) as cache:
        cache.put_many(written.items(), MODEL)
    return written


def test_reopen_persists(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    written = _fill(path)
    with SQLiteCache(path) as cache:
        got = cache.get_many(list(written), MODEL, 64)
        assert {k: bits(v) for k, v in got.items()} == {k: bits(v) for k, v in written.items()}
        assert cache.stats().entries == 200
    with SQLiteCache(path, readonly=True) as cache:
        assert len(cache.get_many(list(written), MODEL, 64)) == 200


def test_wal_mode_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    _fill(path, n=3)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version FROM rechunk_schema").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_creates_parent_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "cache.sqlite"
    with SQLiteCache(path) as cache:
        cache.put_many([("k", np.ones(3, dtype=np.float32))], MODEL)
    assert path.is_file()


def test_readonly_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    _fill(path, n=3)
    with SQLiteCache(path, readonly=True) as cache, pytest.raises(CacheError, match="read-only"):
        cache.put_many([("x", np.ones(64, dtype=np.float32))], MODEL)


def test_readonly_missing_path_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite"
    with pytest.raises(CacheError, match="does not exist"):
        SQLiteCache(path, readonly=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content",
    [
        b"this is not a database at all" * 100,
        bytes(range(256)) * 40,
        b"SQLite format 3\x00" + b"\xff" * 4000,
        b"SQL",
    ],
    ids=["text", "binary", "fake-header", "tiny"],
)
@pytest.mark.parametrize("readonly", [False, True])
def test_garbage_file_is_refused_untouched(tmp_path: Path, content: bytes, readonly: bool) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(content)
    with pytest.raises(CacheError):
        SQLiteCache(path, readonly=readonly)
    assert path.read_bytes() == content


def test_error_is_a_rechunk_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"garbage" * 100)
    with pytest.raises(RechunkError):
        SQLiteCache(path)


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.2])
def test_truncated_file_is_set_aside_untouched(tmp_path: Path, keep: float) -> None:
    """A truncated cache is damaged: renamed aside with its bytes as they were (one
    CacheWarning), and a new cache starts (tests/test_cache_damage.py has the rest)."""
    path = tmp_path / "cache.sqlite"
    _fill(path, n=500, dim=384)
    data = path.read_bytes()
    assert not Path(f"{path}-wal").exists()  # closed cleanly: everything is in the file
    cut = data[: int(len(data) * keep)]
    path.write_bytes(cut)
    with pytest.warns(CacheWarning, match="damaged") as caught, SQLiteCache(path) as cache:
        assert cache.get_many(["k0"], MODEL, 384) == {}
    assert len(caught) == 1
    (aside,) = tmp_path.glob("cache.sqlite.damaged-????????T??????")
    assert aside.read_bytes() == cut


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    _fill(path, n=5)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE rechunk_schema SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(CacheError, match="newer"):
            SQLiteCache(path, readonly=readonly)
    assert path.read_bytes() == before


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('hello')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(CacheError, match="not a rechunk cache"):
        SQLiteCache(path)
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_corrupt_entry_is_a_counted_miss(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    _fill(path, n=3, dim=8)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE vectors SET vector = zeroblob(32) WHERE key = 'k1'")
    conn.execute("UPDATE vectors SET vector = zeroblob(12) WHERE key = 'k2'")
    conn.commit()
    conn.close()
    with SQLiteCache(path) as cache:
        assert set(cache.get_many(["k0", "k1", "k2"], MODEL, 8)) == {"k0"}
        assert cache.stats().corrupt == 2
        cache.put_many([("k1", vector_for("k1", 8))], MODEL)  # a rewrite repairs it
        assert bits(cache.get_many(["k1"], MODEL, 8)["k1"]) == bits(vector_for("k1", 8))
    conn = sqlite3.connect(path)  # damage that leaves text or NULL where bytes were
    conn.execute("UPDATE vectors SET vector = 'text' WHERE key = 'k0'")
    conn.execute("UPDATE vectors SET checksum = 'x' WHERE key = 'k1'")
    conn.commit()
    conn.close()
    with SQLiteCache(path) as cache:
        assert cache.get_many(["k0", "k1"], MODEL, 8) == {} and cache.stats().corrupt == 2


def test_a_damaged_index_never_serves_another_keys_row(tmp_path: Path) -> None:
    """One flipped bit in a stored key: that row must not come back under a key nobody asked
    for (the crc covers the vector bytes only)."""
    path = tmp_path / "cache.sqlite"
    keys = [input_key(MODEL, f"t{i}") for i in range(300)]
    with SQLiteCache(path) as cache:
        cache.put_many([(k, vector_for(k, 16)) for k in keys], MODEL)
    data = bytearray(path.read_bytes())
    where = [i for i in range(len(data)) if data.startswith(keys[25].encode(), i)]
    data[where[1]] ^= 0x08  # in the second copy: the table's row, not the index's
    path.write_bytes(bytes(data))
    with SQLiteCache(path) as cache:
        got = cache.get_many(keys, MODEL, 16)
    assert set(got) <= set(keys) and all(bits(v) == bits(vector_for(k, 16)) for k, v in got.items())


def test_a_newer_file_with_a_wal_is_refused_untouched(tmp_path: Path) -> None:
    """A newer rechunk died with its write-ahead log not yet merged: refusing the file must
    not merge it (closing a read-write connection would)."""
    path = tmp_path / "cache.sqlite"
    _fill(path, n=1, dim=4)
    newer = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA wal_autocheckpoint=0')\n"
        "conn.execute('UPDATE rechunk_schema SET version = version + 1')\n"
        "os._exit(0)\n"  # no close: the WAL stays
    )
    subprocess.run([sys.executable, "-c", newer, str(path)], check=True)
    wal = path.with_name(path.name + "-wal")
    before = (path.read_bytes(), wal.read_bytes())
    with pytest.raises(CacheError, match="newer than"):
        SQLiteCache(path)
    assert (path.read_bytes(), wal.read_bytes()) == before


def test_a_damaged_schema_page_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    _fill(path, n=1, dim=4)
    data = bytearray(path.read_bytes())
    name = b"sqlite_autoindex_rechunk_schema_1"
    data[data.find(name) + len("sqlite_autoindex_r")] = 0xC5  # not UTF-8 any more
    path.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="(?i)utf-8"), SQLiteCache(path):
        pass
    (aside,) = tmp_path.glob("cache.sqlite.damaged-????????T??????")
    assert aside.read_bytes() == bytes(data)


def test_empty_file_becomes_a_cache(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"")
    with SQLiteCache(path) as cache:
        cache.put_many([("k", np.ones(2, dtype=np.float32))], MODEL)
    with SQLiteCache(path, readonly=True) as cache:
        assert set(cache.get_many(["k"], MODEL, 2)) == {"k"}


def test_two_objects_on_one_file_see_each_other(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with SQLiteCache(path) as a, SQLiteCache(path) as b:
        a.put_many([("k", vector_for("k", 8))], MODEL)
        assert bits(b.get_many(["k"], MODEL, 8)["k"]) == bits(vector_for("k", 8))


#: Another process reads the cache and closes its connection (one that closes while no
#: other holds the file's shared lock merges the write-ahead log and deletes it), then
#: writes an entry through a new connection (which starts a new log).
_READ_CLOSE_WRITE = (
    "import sqlite3, sys\n"
    "import numpy as np\n"
    "from rechunk.reuse.cache import SQLiteCache\n"
    "conn = sqlite3.connect(sys.argv[1])\n"
    "conn.execute('SELECT count(*) FROM vectors').fetchone()\n"
    "conn.close()\n"
    "with SQLiteCache(sys.argv[1]) as cache:\n"
    "    cache.put_many([('other', np.ones(8, dtype=np.float32))], sys.argv[2])\n"
)


@pytest.mark.parametrize(("existing", "copies"), [(True, 0), (False, 1), (True, 2)])
def test_reading_the_file_keeps_this_processs_locks(
    tmp_path: Path, existing: bool, copies: int
) -> None:
    """SQLite locks the file with POSIX locks, all of which a process loses when it closes
    any descriptor of that file. The cache reads the file's bytes itself (its header when
    a cache or a copy unpickled in the same process opens it, as in a LlamaIndex worker;
    its length once a connection is open): it must not close such a descriptor while a
    connection of this process holds a lock. Else another process's connection, closing,
    takes itself for the last one and deletes the write-ahead log under this process's
    connections: what either side writes next is lost to the other, and a write may find
    "database disk image is malformed" and set a healthy file aside (a pipeline with
    worker processes did, most runs on Python 3.10, whose connections close as soon as a
    dropped copy is freed)."""
    path = tmp_path / "cache.sqlite"
    if existing:  # closed cleanly: no write-ahead log until a connection opens one
        _fill(path, n=0)
    with SQLiteCache(path) as cache:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
        others = [pickle.loads(pickle.dumps(cache)) for _ in range(copies)]
        subprocess.run([sys.executable, "-c", _READ_CLOSE_WRITE, str(path), MODEL], check=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheWarning)
            for n, user in enumerate([cache, *others]):
                user.put_many([(f"k{n}", vector_for(f"k{n}", 8))], MODEL)
            wanted = ["a", "other", *(f"k{n}" for n in range(copies + 1))]
            for user in [cache, *others]:
                assert set(user.get_many(wanted, MODEL, 8)) == set(wanted)
                assert user.degraded is None
        for other in others:
            other.close()
    assert not list(tmp_path.glob("cache.sqlite.damaged-*"))
    with SQLiteCache(path, readonly=True) as cache:
        assert set(cache.get_many(wanted, MODEL, 8)) == set(wanted)


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd")
def test_descriptors_kept_for_the_locks_do_not_pile_up(tmp_path: Path) -> None:
    """The descriptors kept open so that this process keeps its locks are used again: a
    LlamaIndex worker unpickles a copy per task, and each copy opened (and kept) its own,
    one more per task until the process ran out of descriptors."""
    path = tmp_path / "cache.sqlite"

    def on_file() -> int:
        return sum(
            1 for fd in os.listdir("/dev/fd") if os.path.realpath(f"/dev/fd/{fd}") == str(path)
        )

    with SQLiteCache(path) as cache:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
        before = on_file()
        for _ in range(50):
            with pickle.loads(pickle.dumps(cache)) as copy:
                assert set(copy.get_many(["a"], MODEL, 8)) == {"a"}
        assert on_file() <= before + 2  # a kept descriptor per access mode at most
    assert on_file() == 0  # all closed with the last connection


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_a_thread_held_the_descriptor_lock_opens_the_cache(
    tmp_path: Path,
) -> None:
    """The module's descriptor lock held by another thread at a fork (a pipeline's thread
    opening a copy while the main thread forks a worker) stayed held in the child for good:
    its first cache open hung. The child starts with a fresh lock."""
    import time

    from rechunk.reuse import cache as module

    path = tmp_path / "cache.sqlite"
    with SQLiteCache(path) as cache:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with module._kept_lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads
        pid = os.fork()
    if pid == 0:  # the child: open the cache and read
        code = 1
        try:
            with SQLiteCache(path) as child:
                code = 0 if set(child.get_many(["a"], MODEL, 8)) == {"a"} else 1
        finally:
            os._exit(code)
    release.set()
    holder.join()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung opening the cache")


def test_whether_the_file_may_be_written_is_asked_afresh(tmp_path: Path) -> None:
    """A read-write descriptor kept for the locks answered "writable" after the file could
    no longer be written (made immutable, or its mode changed for a user other than root):
    SQLite's readonly error was then taken for damage and the healthy file set aside.
    Needs a file system where root can make a file immutable (chattr +i)."""
    import shutil

    from rechunk.reuse import cache as module

    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("making a file immutable needs root and chattr")
    path = tmp_path / "cache.sqlite"
    with SQLiteCache(path) as cache:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
        assert module._writable(path)  # a read-write descriptor is kept meanwhile
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, timeout=30)
        if made.returncode != 0:
            pytest.skip("this file system cannot make a file immutable")
        try:
            assert not module._writable(path)
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True, timeout=30)


def test_a_relative_path_does_not_follow_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with SQLiteCache("cache.sqlite") as cache:
        monkeypatch.chdir(tmp_path.parent)
        # another thread opens its own connection, after the chdir
        worker = threading.Thread(target=cache.put_many, args=([("a", vector_for("a", 8))], MODEL))
        worker.start()
        worker.join()
        assert cache.path == tmp_path / "cache.sqlite"
        assert not (tmp_path.parent / "cache.sqlite").exists()
    with SQLiteCache(tmp_path / "cache.sqlite", readonly=True) as again:
        assert set(again.get_many(["a"], MODEL, 8)) == {"a"}


def test_pickled_sqlite_cache_reopens_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with SQLiteCache("cache.sqlite") as cache:
        cache.put_many([("a", vector_for("a", 8))], MODEL)
        state = pickle.dumps(cache)
    monkeypatch.chdir(tmp_path.parent)  # a relative path is pickled as an absolute one
    with pickle.loads(state) as copy:
        assert copy.path == tmp_path / "cache.sqlite" and not copy.readonly
        assert bits(copy.get_many(["a"], MODEL, 8)["a"]) == bits(vector_for("a", 8))
        copy.put_many([("k", vector_for("k", 8))], MODEL)
    with SQLiteCache(tmp_path / "cache.sqlite", readonly=True) as readonly:
        assert set(readonly.get_many(["a", "k"], MODEL, 8)) == {"a", "k"}  # one shared file
        copy = pickle.loads(pickle.dumps(readonly))
    with copy:
        assert copy.readonly and set(copy.get_many(["k"], MODEL, 8)) == {"k"}
        with pytest.raises(CacheError, match="read-only"):
            copy.put_many([("x", vector_for("x", 8))], MODEL)
