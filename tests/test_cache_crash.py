"""SQLiteCache under real crashes (kill -9 mid-write) and real concurrent writer processes."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rechunk.errors import CacheError
from rechunk.reuse.cache import SQLiteCache, row_checksum

MODEL = "crash-model"
DIM = 128
BATCH = 300

# Both scripts derive every vector from its key, so any process can check any entry.
_VECTOR = """
import hashlib, numpy as np
def vector(key, dim):
    raw = hashlib.blake2b(key.encode(), digest_size=64).digest() * (dim // 16)
    # hash bytes as numbers in [-1, 1) (read as floats they could be NaN, which a cache refuses)
    return (np.frombuffer(raw, dtype="<u4") / 2.0**31 - 1.0).astype(np.float32)
"""

_WRITERS: dict[str, Any] = {}
exec(_VECTOR, _WRITERS)  # the writers' own vector function, for checking what they stored

# Writes batches of BATCH fresh keys (and every third time rewrites an older batch of
# the same run) in a loop until killed; prints "ready" once the cache is open.
_CRASH_WRITER = (
    _VECTOR
    + """
import sys
from rechunk.reuse.cache import SQLiteCache, row_checksum
path, run, dim, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cache = SQLiteCache(path)
print("ready", flush=True)
n = 0
while True:
    batch = n if n % 3 != 2 else n // 2
    keys = [f"{run}/{batch}/{i}" for i in range(size)]
    cache.put_many([(key, vector(key, dim)) for key in keys], "crash-model")
    n += 1
"""
)

# Waits for a shared start time, writes keys [first, last) in batches, exits normally.
_RANGE_WRITER = (
    _VECTOR
    + """
import sys, time
from rechunk.reuse.cache import SQLiteCache, row_checksum
path, first, last, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
time.sleep(max(0.0, float(sys.argv[5]) - time.time()))
with SQLiteCache(path) as cache:
    for start in range(first, last, 50):
        keys = [f"key-{i}" for i in range(start, min(start + 50, last))]
        cache.put_many([(key, vector(key, dim)) for key in keys], "crash-model")
"""
)


def expected_bytes(key: str, dim: int = DIM) -> bytes:
    """The little-endian float32 bytes every writer stores under ``key`` (dim % 16 == 0)."""
    return bytes(_WRITERS["vector"](key, dim).astype("<f4").tobytes())


def _raw_rows(path: Path) -> list[tuple[str, str, int, int, bytes]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT model_id, key, dimension, checksum, vector FROM vectors"
        ).fetchall()
    finally:
        conn.close()


def _verify(path: Path, run: int) -> set[str]:
    """Open the cache after a crash; every entry must be whole and bit-correct.

    Every row is checked raw (size, checksum, bytes); the rows of the run just
    killed, plus a sample of older ones, are also read back through the cache.
    """
    with SQLiteCache(path) as cache:  # opens (recovering the WAL) without error
        rows = _raw_rows(path)
        keys = [key for _, key, _, _, _ in rows]
        for model, key, dimension, checksum, blob in rows:
            assert model == MODEL and dimension == DIM, key
            assert len(blob) == DIM * 4, f"partial entry {key}"
            assert row_checksum(model, key, dimension, blob) == checksum, f"bad check {key}"
            assert blob == expected_bytes(key), f"wrong vector for {key}"
        recent = [key for key in keys if key.startswith(f"{run}/")]
        sample = recent + random.Random(run).sample(keys, min(500, len(keys)))
        got = cache.get_many(sample, MODEL, DIM)
        assert set(got) == set(sample)
        assert all(got[key].tobytes() == expected_bytes(key) for key in sample)
        assert cache.stats().corrupt == 0
    batches = Counter(key.rsplit("/", 1)[0] for key in keys)
    partial = {batch: n for batch, n in batches.items() if n != BATCH}
    assert not partial, f"put_many was not atomic: {partial}"
    return set(keys)


@pytest.mark.slow
def test_kill_9_during_writes_never_leaves_a_partial_entry(tmp_path: Path) -> None:
    rng = random.Random(20240531)
    iterations = 60
    path = tmp_path / "cache-0.sqlite"
    present: set[str] = set()
    kills_after_ready = 0
    for it in range(iterations):
        if it % 10 == 0:  # a fresh file now and then: crashes while creating it, too
            path = tmp_path / f"cache-{it}.sqlite"
            present = set()
        proc = subprocess.Popen(
            [sys.executable, "-c", _CRASH_WRITER, str(path), str(it), str(DIM), str(BATCH)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            if it % 5 == 0:  # somewhere in start-up, opening or creating the file
                time.sleep(rng.uniform(0.0, 0.25))
            else:
                line = proc.stdout.readline() if proc.stdout else ""
                assert line == "ready\n", proc.communicate()[1]
                time.sleep(rng.uniform(0.0, 0.025))
                kills_after_ready += 1
            assert proc.poll() is None, proc.communicate()[1]  # the writer never stops on its own
        finally:
            proc.kill()  # SIGKILL: no cleanup, no atexit, mid-transaction
            _, stderr = proc.communicate()
        assert proc.returncode == -9 or proc.returncode == 1, stderr
        assert "Error" not in stderr, stderr
        if not path.exists():
            continue
        now = _verify(path, it)
        assert present <= now, f"committed entries lost: {len(present - now)}"
        present = now
    assert kills_after_ready >= 45


@pytest.mark.slow
def test_a_hot_journal_left_by_a_killed_writer_is_rolled_back_not_given_up(
    tmp_path: Path,
) -> None:
    """A process killed while it creates a cache file (its first transaction runs in
    rollback-journal mode, before WAL mode is set) leaves a hot journal that a read-only
    connection may not roll back (SQLITE_READONLY_ROLLBACK): the next open rolls it back
    and uses the file, not memory only (found by the kill -9 test at a fresh file)."""
    path = tmp_path / "cache.sqlite"
    empty = sqlite3.connect(path, isolation_level=None)  # an SQLite file with no table yet
    empty.execute("CREATE TABLE x(a)")
    empty.execute("DROP TABLE x")
    empty.close()
    writer = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA cache_size=1'); c.execute('BEGIN'); c.execute('CREATE TABLE u(y)')\n"
        "for _ in range(200): c.execute('INSERT INTO u VALUES (randomblob(5000))')\n"
        "print('ready', flush=True)\n"
        "while True: c.execute('INSERT INTO u VALUES (randomblob(5000))')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", writer, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    finally:
        proc.kill()  # SIGKILL mid-transaction: the journal stays hot
        proc.communicate()
    assert Path(f"{path}-journal").exists() and path.stat().st_size > 0
    probe = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        probe.execute("SELECT name FROM sqlite_master").fetchall()
    probe.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "vectors are kept in memory only"
        with SQLiteCache(path) as cache:
            assert cache.degraded is None
            cache.put_many([("k", _WRITERS["vector"]("k", DIM))], "m")
    assert [row[:2] for row in _raw_rows(path)] == [("m", "k")]


def test_two_processes_write_overlapping_keys(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"  # does not exist yet: both race to create it
    start_at = str(time.time() + 1.0)  # both open the missing file at the same moment
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RANGE_WRITER,
                str(path),
                str(first),
                str(last),
                str(DIM),
                start_at,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first, last in ((0, 6000), (3000, 9000))
    ]
    reads = 0
    try:
        while any(w.poll() is None for w in writers):  # read while they write
            time.sleep(0.005)
            try:
                cache = SQLiteCache(path, readonly=True)
            except CacheError:  # not created yet, or mid-creation
                continue
            with cache:
                keys = [f"key-{i}" for i in range(9000)]
                for key, vec in cache.get_many(keys, MODEL, DIM).items():
                    assert vec.tobytes() == expected_bytes(key)
            reads += 1
    finally:
        outputs = [w.communicate(timeout=60) for w in writers]
    for writer, (_, stderr) in zip(writers, outputs):
        assert writer.returncode == 0, stderr
    keys = [f"key-{i}" for i in range(9000)]
    with SQLiteCache(path) as cache:
        got = cache.get_many(keys, MODEL, DIM)
        assert len(got) == 9000, f"lost {9000 - len(got)} entries"
        assert all(got[key].tobytes() == expected_bytes(key) for key in keys)
        assert cache.stats().entries == 9000
    assert reads > 0
