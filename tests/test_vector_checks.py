"""Every vector is checked before it is stored, cached or reused (issue #36).

A model or server that answers all-zero vectors, NaN, infinities, values near float32's
limit or the wrong dimension fails the sync with a typed BadVectorError, and nothing of
the batch reaches the collection or the cache; no numpy warning reaches the user. A
vector a past bad run left in the cache or the collection is not reused: it is embedded
again and replaced. Real embedders (implementations of the protocol), a real embedded
Qdrant, a real SQLite cache and, for the OpenAI-compatible path, a real HTTP server on
127.0.0.1.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import warnings
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import rechunk
from rechunk import CachedEmbedder, Document, RecursiveChunker, SQLiteCache, sync
from rechunk.errors import BadVectorError, EmbeddingError, InputError, RechunkError
from rechunk.reuse.agreement import REFERENCE
from rechunk.reuse.cache import row_checksum
from rechunk.reuse.embedding import check_vectors
from rechunk.reuse.identity import input_key
from rechunk.sync.store import PointWrite

MODEL = "vector-checks/hash-v1"
DIM = 8
TEXT_A = "\n\n".join(
    f"Paragraph {i} of the first document says something about vectors number {i}."
    for i in range(6)
)
TEXT_B = "\n\n".join(
    f"Paragraph {i} of the second document talks about caches and collections {i}."
    for i in range(6)
)
CHUNKER = RecursiveChunker(target_tokens=24, hard_max_tokens=64)


def hashed(text: str, dimension: int = DIM) -> npt.NDArray[np.float32]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    row = np.random.default_rng(seed).standard_normal(dimension)
    return (row / np.linalg.norm(row)).astype(np.float32)


class HashEmbedder:
    """A real deterministic embedder: unit vectors seeded by each text's sha256. Its
    identity names the one function it is (``pins_weights``: no model check; these tests
    count what it is asked to embed, tests/test_model_check.py the check)."""

    model_id = MODEL
    dimension = DIM
    pins_weights = True
    max_input_tokens: int | None = None

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.embedded.extend(texts)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([hashed(t) for t in texts])


class BadEmbedder(HashEmbedder):
    """The same model answering badly, as a broken server would: ``fault`` says how. Only
    the first vector of each batch is bad with ``first`` set (the others are good)."""

    def __init__(self, fault: str, first: bool = False) -> None:
        super().__init__()
        self.fault = fault
        self.first = first

    def embed(self, texts: Sequence[str]) -> Any:
        good = super().embed(texts)
        rows = slice(0, 1) if self.first else slice(None)
        if self.fault == "dimension":
            return good[:, : DIM - 1]
        if self.fault == "float64 beyond float32":
            out = good.astype(np.float64)
            out[rows] = 1e39
            return out
        value = {"zeros": 0.0, "nan": np.nan, "inf": np.inf, "3e38": 3e38, "tiny": 1e-9}
        good[rows] = value[self.fault]
        return good


#: each fault and the words its one-line message holds
FAULTS = {
    "zeros": "all zeros",
    "nan": "NaN or infinite",
    "inf": "NaN or infinite",
    "3e38": "beyond",
    "float64 beyond float32": "beyond",
    "tiny": "norm below",
    "dimension": "expected 8",
}


@pytest.fixture
def client() -> Iterator[Any]:
    from qdrant_client import QdrantClient

    opened = QdrantClient(":memory:")
    yield opened
    opened.close()


@pytest.fixture
def store(client: Any) -> Any:
    from rechunk.adapters.qdrant import QdrantStore

    qdrant = QdrantStore(client, "docs")
    qdrant.ensure_collection(DIM)
    return qdrant


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[SQLiteCache]:
    with SQLiteCache(tmp_path / "cache.sqlite") as opened:
        yield opened


@contextlib.contextmanager
def no_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised inside, which the test then asserts there is none of."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def points(store: Any) -> int:
    info = store.collection_info()
    return 0 if info is None else int(info.points)


def stored_vectors(client: Any, store: Any, doc_id: str) -> dict[str, npt.NDArray[np.float32]]:
    """Input key -> the vector of ``doc_id``'s point that holds it, read point by point
    from Qdrant itself (the store's ``get_vectors`` answers one point per key, of any
    document)."""
    key_of = {p.id: p.payload.input_key for p in store.get_points(doc_id)}
    records = client.retrieve(store.collection, list(key_of), with_vectors=True)
    return {key_of[str(r.id)]: np.asarray(r.vector, dtype=np.float32) for r in records}


def keys_of(text: str, model: str = MODEL) -> list[str]:
    return [input_key(model, c.text) for c in CHUNKER.chunk(text)]


def texts_of(text: str) -> list[str]:
    return [c.text for c in CHUNKER.chunk(text)]


# --------------------------------------------------------------------------- the check itself


def test_the_check_names_the_model_how_many_and_why() -> None:
    vectors = np.stack([hashed(str(i)) for i in range(4)])
    vectors[[0, 2, 3]] = 0.0
    with no_warnings() as caught, pytest.raises(BadVectorError) as error:
        check_vectors(vectors, model_id="acme/m1", dimension=DIM, count=4)
    message = str(error.value)
    assert "'acme/m1'" in message and "3 of 4 vectors are all zeros" in message
    assert "\n" not in message and isinstance(error.value, EmbeddingError)
    assert (error.value.bad, error.value.total, error.value.reasons) == (3, 4, {"zero": 3})
    mixed = np.stack([hashed(str(i)) for i in range(4)])
    mixed[0, 1], mixed[1], mixed[2, 0] = np.inf, 0.0, 3e38
    with pytest.raises(BadVectorError, match=r"3 of 4 vectors are unusable \(1 holds NaN"):
        check_vectors(mixed, model_id="acme/m1", dimension=DIM, count=4)
    assert caught == []
    good = check_vectors(np.stack([hashed("x")]).astype(np.float64), model_id="m", dimension=DIM)
    assert good.dtype == np.float32 and good.flags.c_contiguous


# --------------------------------------------------------------------------- sync refuses


@pytest.mark.parametrize(
    ("fault", "first"),
    [
        (fault, first)
        for fault in FAULTS
        for first in (False, True)
        if fault != "dimension" or not first
    ],
)
def test_a_bad_answer_fails_the_sync_and_changes_nothing(
    client: Any, fault: str, first: bool, store: Any, cache: SQLiteCache
) -> None:
    """Every vector of the batch bad, or only its first one: the batch fails whole."""
    sync([Document("a", TEXT_A)], store, chunker=CHUNKER, embedder=HashEmbedder(), cache=cache)
    before_points, before_entries = points(store), cache.stats().entries
    before_a = stored_vectors(client, store, "a")
    docs = [Document("a", TEXT_A), Document("b", TEXT_B)]
    bad = BadEmbedder(fault, first)
    with no_warnings() as caught, pytest.raises(BadVectorError) as error:
        sync(docs, store, chunker=CHUNKER, embedder=CachedEmbedder(bad, cache))
    message = str(error.value)
    assert MODEL in message and FAULTS[fault] in message and "\n" not in message
    n = len(bad.embedded)
    if fault != "dimension":
        assert f"{1 if first else n} of {n} vector" in message
    assert caught == [], [str(w.message) for w in caught]
    # nothing of the batch reached the collection or the cache
    assert points(store) == before_points and store.get_points("b") == []
    assert cache.stats().entries == before_entries
    assert cache.get_many(keys_of(TEXT_B), MODEL, DIM) == {}
    after_a = stored_vectors(client, store, "a")
    assert after_a.keys() == before_a.keys()
    assert all(np.array_equal(after_a[k], before_a[k]) for k in before_a)
    # the same model answering well then syncs it all
    good = HashEmbedder()
    with no_warnings() as caught:
        report = sync(docs, store, chunker=CHUNKER, embedder=good, cache=cache)
    assert caught == [] and report.stale_check == "passed"
    assert sorted(good.embedded) == sorted(set(texts_of(TEXT_B)))
    held = stored_vectors(client, store, "b")
    assert all(np.allclose(held[input_key(MODEL, t)], hashed(t), atol=1e-6) for t in good.embedded)


def test_a_bad_answer_fails_the_cached_embedder_and_caches_nothing(cache: SQLiteCache) -> None:
    with no_warnings() as caught, pytest.raises(BadVectorError, match="2 of 2 vectors are all"):
        CachedEmbedder(BadEmbedder("zeros"), cache).embed(["one", "two"])
    assert caught == [] and cache.stats().entries == 0


def test_no_cache_writer_accepts_a_bad_vector(cache: SQLiteCache) -> None:
    """The cache refuses one too, whoever writes (an API embedder keeps each request's
    vectors in the sync's cache itself)."""
    for bad in (np.zeros(DIM, np.float32), np.full(DIM, 3e38, np.float32)):
        with pytest.raises(InputError, match="item 1: vector"):
            cache.put_many([("k0", hashed("k0")), ("k1", bad)], MODEL)
    assert cache.stats().entries == 0


# --------------------------------------------------------------------------- poisoned, repaired


def poison_cache(path: Path, keys: Sequence[str], model: str = MODEL) -> None:
    """Overwrite cached vectors with zeros as a past run (before the check) left them: a
    row with a valid check, so that only the vector check can tell."""
    blob = np.zeros(DIM, dtype="<f4").tobytes()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for key in keys:
            changed = conn.execute(
                "UPDATE vectors SET vector = ?, checksum = ? WHERE model_id = ? AND key = ?",
                (blob, row_checksum(model, key, DIM, blob), model, key),
            ).rowcount
            assert changed == 1
        conn.commit()


def poison_store(store: Any, doc_id: str, count: int) -> list[str]:
    """Overwrite the vectors of ``count`` points of ``doc_id`` with zeros; their keys."""
    chosen = sorted(store.get_points(doc_id), key=lambda p: p.payload.ordinal)[:count]
    store.write([PointWrite(p.id, p.payload, np.zeros(DIM, np.float32)) for p in chosen])
    keys = [p.payload.input_key for p in chosen]
    assert all(not v.any() for v in store.get_vectors(keys, MODEL).values())
    return keys


def test_a_poisoned_cache_entry_is_embedded_again_and_replaced(
    client: Any, store: Any, tmp_path: Path
) -> None:
    path = tmp_path / "cache.sqlite"
    with SQLiteCache(path) as cache:
        sync([Document("a", TEXT_A)], store, chunker=CHUNKER, embedder=HashEmbedder(), cache=cache)
    poisoned = keys_of(TEXT_A)[:2]
    poison_cache(path, poisoned)
    fresh = store.with_collection("fresh")
    fresh.ensure_collection(DIM)
    good = HashEmbedder()
    with SQLiteCache(path) as cache, no_warnings() as caught:
        report = sync([Document("a", TEXT_A)], fresh, chunker=CHUNKER, embedder=good, cache=cache)
        repaired = cache.get_many(poisoned, MODEL, DIM)
    assert caught == []
    assert (
        report.inputs["embedded"] == 2
        and report.inputs["from_cache"] == len(set(keys_of(TEXT_A))) - 2
    )
    assert [input_key(MODEL, t) for t in good.embedded] == poisoned
    for key, text in zip(poisoned, good.embedded):
        assert np.array_equal(repaired[key], hashed(text))  # the cache entry was replaced
        assert np.allclose(stored_vectors(client, fresh, "a")[key], hashed(text), atol=1e-6)


def test_the_cached_embedder_replaces_a_poisoned_entry(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with SQLiteCache(path) as cache:
        CachedEmbedder(HashEmbedder(), cache).embed(["one", "two"])
    poison_cache(path, [input_key(MODEL, "one")])
    good = HashEmbedder()
    with SQLiteCache(path) as cache:
        out = CachedEmbedder(good, cache).embed(["one", "two"])
        assert good.embedded == ["one"]
        assert np.array_equal(out, np.stack([hashed("one"), hashed("two")]))
        assert np.array_equal(
            cache.get_many([input_key(MODEL, "one")], MODEL, DIM)[input_key(MODEL, "one")],
            hashed("one"),
        )


def test_a_poisoned_stored_vector_is_not_copied_to_a_new_point(client: Any, store: Any) -> None:
    sync([Document("a", TEXT_A)], store, chunker=CHUNKER, embedder=HashEmbedder())
    poisoned = poison_store(store, "a", 2)
    good = HashEmbedder()
    with no_warnings() as caught:  # "b" holds a's text: its inputs are reused by key
        report = sync([Document("b", TEXT_A)], store, chunker=CHUNKER, embedder=good)
    assert caught == []
    assert sorted(input_key(MODEL, t) for t in good.embedded) == sorted(poisoned)
    assert report.inputs["embedded"] == 2
    held = stored_vectors(client, store, "b")
    assert len(held) == len(set(keys_of(TEXT_A)))
    assert all(np.linalg.norm(v) > 0.99 for v in held.values())


def test_check_stored_repairs_a_collection_and_cache_a_bad_server_left(
    client: Any, store: Any, tmp_path: Path
) -> None:
    """The break-in: a run before these checks stored and cached zero vectors; a re-run
    against a good server with check_stored=True replaces both."""
    path = tmp_path / "cache.sqlite"
    docs = [Document("a", TEXT_A), Document("b", TEXT_B)]
    with SQLiteCache(path) as cache:
        sync(docs, store, chunker=CHUNKER, embedder=HashEmbedder(), cache=cache)
    poisoned = poison_store(store, "a", 3)
    poison_cache(path, poisoned)
    ids_before = {d.doc_id: {p.id for p in store.get_points(d.doc_id)} for d in docs}
    good = HashEmbedder()
    with SQLiteCache(path) as cache, no_warnings() as caught:
        report = sync(docs, store, chunker=CHUNKER, embedder=good, cache=cache, check_stored=True)
        cached = cache.get_many(poisoned, MODEL, DIM)
    assert caught == [] and report.stale_check == "passed"
    assert report.chunks["added"] == 3 and report.inputs["embedded"] == 3
    assert report.documents["changed"] == 1 and report.documents["unchanged"] == 1
    assert sorted(input_key(MODEL, t) for t in good.embedded) == sorted(poisoned)
    held = stored_vectors(client, store, "a")
    for text in good.embedded:
        key = input_key(MODEL, text)
        assert np.allclose(held[key], hashed(text), atol=1e-6)
        assert np.array_equal(cached[key], hashed(text))
    assert {d.doc_id: {p.id for p in store.get_points(d.doc_id)} for d in docs} == ids_before
    # repaired: the next re-run has nothing to do
    again = sync(docs, store, chunker=CHUNKER, embedder=HashEmbedder(), check_stored=True)
    assert again.documents["unchanged"] == 2 and again.inputs["embedded"] == 0


def test_reindex_does_not_copy_a_poisoned_vector_of_the_live_generation(
    client: Any, store: Any
) -> None:
    from rechunk.sync.generations import open_live, reindex

    docs = [Document("short", "One short paragraph that both policies keep whole.")]
    old_policy = RecursiveChunker()
    live = open_live(store.with_collection("live"), old_policy, DIM)
    sync(docs, live, chunker=old_policy, embedder=HashEmbedder())
    poison_store(live, "short", 1)
    good = HashEmbedder()
    with no_warnings() as caught:
        result = reindex(docs, live, rechunk.FixedChunker(max_tokens=300), good)
    assert caught == [] and result.switched
    assert good.embedded == [docs[0].text]
    (vector,) = stored_vectors(client, live, "short").values()  # read through the switched alias
    assert np.allclose(vector, hashed(docs[0].text), atol=1e-6)


# --------------------------------------------------------------------------- adapters


def test_langchain_cached_embeddings_refuse_and_repair(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import Embeddings

    from rechunk.adapters.langchain import CachedEmbeddings

    class Answers(Embeddings):
        def __init__(self, zeros: bool) -> None:
            self.zeros = zeros
            self.calls: list[list[str]] = []

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.calls.append(list(texts))
            return [[0.0] * DIM if self.zeros else hashed(t).tolist() for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    path = tmp_path / "cache.sqlite"
    with SQLiteCache(path) as cache, no_warnings() as caught:
        # 3: the reference text a new cache records for the model check rides along
        with pytest.raises(BadVectorError, match="'lc-model': 3 of 3 vectors are all zeros"):
            CachedEmbeddings(
                Answers(True), cache, model_id="lc-model", dimension=DIM
            ).embed_documents(["x", "y"])
        assert cache.stats().entries == 0
        CachedEmbeddings(Answers(False), cache, model_id="lc-model").embed_documents(["x", "y"])
    assert caught == []
    key = input_key("lc-model", "x")
    blob = np.zeros(DIM, dtype="<f4").tobytes()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "UPDATE vectors SET vector = ?, checksum = ? WHERE key = ?",
            (blob, row_checksum("lc-model", key, DIM, blob), key),
        )
        conn.commit()
    good = Answers(False)
    with SQLiteCache(path) as cache:
        out = CachedEmbeddings(good, cache, model_id="lc-model").embed_documents(["x", "y"])
        assert good.calls == [[REFERENCE, "x"]]  # the model check, against the reference
        assert np.allclose(out, [hashed("x"), hashed("y")])
        assert np.array_equal(cache.get_many([key], "lc-model", DIM)[key], hashed("x"))


def test_llamaindex_cached_embedding_refuses_bad_vectors() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.embeddings.base import BaseEmbedding

    from rechunk import MemoryCache
    from rechunk.adapters.llamaindex import CachedEmbedding

    class Huge(BaseEmbedding):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[3e38] * DIM for _ in texts]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

    cache = MemoryCache()
    with (
        no_warnings() as caught,
        pytest.raises(BadVectorError, match="3 of 3 vectors have values beyond"),
    ):
        CachedEmbedding(
            Huge(model_name="huge"), cache, model_id="li-model"
        ).get_text_embedding_batch(["a", "b"])
    assert caught == [] and cache.stats().entries == 0


# --------------------------------------------------------------------------- OpenAI-compatible API


class EmbeddingsServer:
    """A real OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 whose answers the
    test sets: ``"zeros"``, ``"huge"`` (3e38) or ``"good"`` (the hash vectors)."""

    def __init__(self) -> None:
        self.mode = "good"
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["content-length"])))
                texts = request["input"]
                texts = [texts] if isinstance(texts, str) else texts
                rows = [server.answer(t) for t in texts]
                body = json.dumps(
                    {
                        "object": "list",
                        "model": request["model"],
                        "data": [
                            {"object": "embedding", "index": i, "embedding": row}
                            for i, row in enumerate(rows)
                        ],
                        "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, text: str) -> list[float]:
        if self.mode == "zeros":
            return [0.0] * DIM
        if self.mode == "huge":
            return [3e38] * DIM
        return [float(x) for x in hashed(text)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    pytest.importorskip("openai")
    running = EmbeddingsServer()
    yield running
    running.close()


def api(server: EmbeddingsServer, cache: Any = None) -> Any:
    from rechunk.chunking.tokens import resolve_tokenizer
    from rechunk.integrations.openai import OpenAIEmbedder

    return OpenAIEmbedder(
        "test-model",
        base_url=server.url,
        tokenizer=resolve_tokenizer(),
        dimension=DIM,
        max_input_tokens=512,
        identity=MODEL,
        cache=cache,
        max_retries=0,
    )


@pytest.mark.parametrize("mode", ["zeros", "huge"])
def test_an_api_answering_bad_vectors_fails_the_sync(
    client: Any, mode: str, server: EmbeddingsServer, store: Any, cache: SQLiteCache
) -> None:
    server.mode = mode
    docs = [Document("a", TEXT_A)]
    with no_warnings() as caught, pytest.raises(BadVectorError) as error:
        sync(docs, store, chunker=CHUNKER, embedder=api(server), cache=cache)
    n = len(set(keys_of(TEXT_A)))
    assert f"{MODEL}" in str(error.value) and f"{n} of {n} vectors" in str(error.value)
    assert caught == [] and points(store) == 0 and cache.stats().entries == 0
    # the command line lets the API embedder keep its vectors in the sync's cache itself:
    # the cache refuses them (a typed error), so nothing is cached either
    with no_warnings() as caught, pytest.raises(RechunkError, match="vector"):
        sync(docs, store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
    assert caught == [] and points(store) == 0 and cache.stats().entries == 0
    server.mode = "good"
    report = sync(docs, store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
    assert report.stale_check == "passed" and report.inputs["embedded"] == n
    assert all(np.linalg.norm(v) > 0.99 for v in stored_vectors(client, store, "a").values())


def test_an_api_embedder_sharing_a_poisoned_cache_repairs_it(
    server: EmbeddingsServer, store: Any, tmp_path: Path
) -> None:
    path = tmp_path / "cache.sqlite"
    docs = [Document("a", TEXT_A)]
    with SQLiteCache(path) as cache:
        sync(docs, store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
    model = api(server).model_id  # identity= names the server: openai/v1:...@MODEL;dim=8
    poison_cache(path, keys_of(TEXT_A, model)[:1], model)
    fresh = store.with_collection("fresh")
    fresh.ensure_collection(DIM)
    with SQLiteCache(path) as cache:
        report = sync(docs, fresh, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
    assert report.inputs["embedded"] == 1
