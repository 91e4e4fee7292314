"""SQLiteCache never serves a vector for another input: the row check covers model, key,
dimension and vector bytes (schema 2), and files of schema 1 are migrated."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest

from rechunk.reuse.cache import SCHEMA_VERSION, SQLiteCache, row_checksum
from rechunk.reuse.identity import input_key

MODEL = "integrity-model/v1"
DIM = 3


def vec(i: int) -> np.ndarray:
    return np.array([i + 1, -i, i / 7], dtype=np.float32)  # never all zeros: not cacheable


def fill(path: Path, n: int) -> list[str]:
    keys = [input_key(MODEL, f"text {i}") for i in range(n)]
    with SQLiteCache(path) as cache:
        cache.put_many([(k, vec(i)) for i, k in enumerate(keys)], MODEL)
    return keys


def test_swapped_vector_and_checksum_are_a_counted_miss(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    keys = fill(path, 6)
    conn = sqlite3.connect(path)
    rows = {k: conn.execute("SELECT checksum, vector FROM vectors WHERE key = ?", (k,)).fetchone()
            for k in keys[:2]}
    conn.execute("UPDATE vectors SET checksum = ?, vector = ? WHERE key = ?", (*rows[keys[1]], keys[0]))
    conn.execute("UPDATE vectors SET checksum = ?, vector = ? WHERE key = ?", (*rows[keys[0]], keys[1]))
    # and a copy of a row (bytes and check) under another model
    conn.execute("INSERT INTO vectors SELECT 'other', key, dimension, checksum, vector "
                 "FROM vectors WHERE key = ?", (keys[2],))
    conn.commit()
    conn.close()
    with SQLiteCache(path) as cache:
        got = cache.get_many(keys, MODEL, DIM)
        assert sorted(got) == sorted(keys[2:])
        assert all(got[k].tobytes() == vec(i + 2).tobytes() for i, k in enumerate(keys[2:]))
        assert cache.get_many(keys[2:3], "other", DIM) == {}
        stats = cache.stats()
        assert stats.corrupt == 3 and stats.misses == 3 and stats.hits == 4
        cache.put_many([(keys[0], vec(0))], MODEL)  # a rewrite repairs the row
        assert cache.get_many(keys[:1], MODEL, DIM)[keys[0]].tobytes() == vec(0).tobytes()


def test_an_index_entry_pointing_at_another_row_is_a_counted_miss(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    keys = [f"key-{i:04d}" for i in range(2)]  # rowids 1 and 2
    with SQLiteCache(path) as cache:
        cache.put_many([(k, vec(i + 1)) for i, k in enumerate(keys)], MODEL)
    data = bytearray(path.read_bytes())
    # the key index stores rowid 2 as one byte right after the key: point it at rowid 1
    needle = keys[1].encode() + b"\x02"
    where = [i for i in range(len(data)) if data.startswith(needle, i)]
    assert len(where) == 1
    data[where[0] + len(keys[1])] = 1
    path.write_bytes(bytes(data))
    conn = sqlite3.connect(path)  # SQLite itself sees the damage
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok"
    conn.close()
    with SQLiteCache(path) as cache:
        assert cache.get_many([keys[1]], MODEL, DIM) == {}
        assert cache.stats().corrupt == 1
        assert cache.get_many([keys[0]], MODEL, DIM)[keys[0]].tobytes() == vec(1).tobytes()


def schema1_file(path: Path, rows: list[tuple[str, str, np.ndarray]]) -> None:
    """A cache file exactly as rechunk wrote it before the row check (schema 1: the
    checksum is the crc32 of the vector bytes), built here with sqlite3."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 8192")
    conn.execute("CREATE TABLE rechunk_schema (name TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    conn.execute("""CREATE TABLE vectors (
        model_id TEXT NOT NULL, key TEXT NOT NULL, dimension INTEGER NOT NULL,
        checksum INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model_id, key))""")
    conn.execute("INSERT INTO rechunk_schema VALUES ('embedding-cache', 1)")
    for model, key, vector in rows:
        blob = vector.astype("<f4").tobytes()
        conn.execute("INSERT INTO vectors VALUES (?, ?, ?, ?, ?)",
                     (model, key, len(vector), zlib.crc32(blob), blob))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.commit()
    conn.close()


def test_a_schema_1_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    keys = [input_key(MODEL, f"old {i}") for i in range(5)]
    schema1_file(path, [(MODEL, k, vec(i)) for i, k in enumerate(keys)]
                 + [("other-model", keys[0], vec(9))])
    conn = sqlite3.connect(path)  # one row damaged under schema 1: its crc32 fails
    conn.execute("UPDATE vectors SET vector = zeroblob(12) WHERE key = ? AND model_id = ?",
                 (keys[4], MODEL))
    conn.commit()
    conn.close()
    before = path.read_bytes()
    # read-only: read with schema 1's check, the file left as it was
    with SQLiteCache(path, readonly=True) as reader:
        got = reader.get_many(keys, MODEL, DIM)
        assert sorted(got) == sorted(keys[:4]) and reader.stats().corrupt == 1
    assert path.read_bytes() == before
    with SQLiteCache(path) as cache:  # read-write: migrated
        got = cache.get_many(keys, MODEL, DIM)
        assert sorted(got) == sorted(keys[:4])
        assert all(got[k].tobytes() == vec(i).tobytes() for i, k in enumerate(keys[:4]))
        assert cache.get_many(keys[:1], "other-model", DIM)[keys[0]].tobytes() == vec(9).tobytes()
        assert cache.stats().corrupt == 0 and cache.stats().entries == 5  # the damaged row went
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM rechunk_schema").fetchone()[0] == SCHEMA_VERSION == 2
    for model, key, dim, checksum, blob in conn.execute(
        "SELECT model_id, key, dimension, checksum, vector FROM vectors"
    ):
        assert checksum == row_checksum(model, key, dim, blob)
    conn.close()
    with SQLiteCache(path) as again:  # a second open finds nothing to migrate
        assert len(again.get_many(keys, MODEL, DIM)) == 4


def test_a_reader_opened_before_the_migration_keeps_reading(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    keys = [input_key(MODEL, f"old {i}") for i in range(3)]
    schema1_file(path, [(MODEL, k, vec(i)) for i, k in enumerate(keys)])
    with SQLiteCache(path, readonly=True) as reader:
        assert len(reader.get_many(keys, MODEL, DIM)) == 3
        with SQLiteCache(path) as writer:  # migrates while the reader is open
            assert len(writer.get_many(keys, MODEL, DIM)) == 3
        assert len(reader.get_many(keys, MODEL, DIM)) == 3
        assert reader.stats().corrupt == 0


@pytest.mark.parametrize("field", ["model_id", "key", "dimension"])
def test_row_checksum_covers_every_field(field: str) -> None:
    blob = vec(1).tobytes()
    base = {"model_id": "m", "key": "k", "dimension": 3}
    changed = {**base, field: {"model_id": "m2", "key": "k2", "dimension": 4}[field]}
    assert row_checksum(**base, blob=blob) != row_checksum(**changed, blob=blob)
    assert row_checksum(**base, blob=blob) != row_checksum(**base, blob=vec(2).tobytes())
    # length-prefixed: moving a character between model and key changes the check
    assert row_checksum("ab", "c", 3, blob) != row_checksum("a", "bc", 3, blob)
