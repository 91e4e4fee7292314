"""ChromaStore: the store contract on a PersistentClient and on a real Chroma server
(``chroma run``), error translation, the exact layouts, and reading the collection
with LangChain's ``Chroma`` and LlamaIndex's ``ChromaVectorStore``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chroma_server import free_port, running_chroma
from store_contract import (
    DIM,
    MODEL,
    RECHUNK_KEYS,
    TEXT,
    NoIO,
    StoreContract,
    StoreFactory,
    collection_name,
    fill,
    fixed_embeddings,
    new_id,
    payload,
    store_factory,
    unit,
)

import rechunk
from rechunk.errors import ConfigError, StoreError, StoreUnavailableError, TransientError
from rechunk.sync.store import PointPayload, PointWrite, StoredPoint

chromadb = pytest.importorskip("chromadb")
from chromadb.config import Settings  # noqa: E402

import rechunk.adapters.chroma as chroma_adapter  # noqa: E402
from rechunk.adapters._layout import ForeignPointsWarning  # noqa: E402
from rechunk.adapters.chroma import ChromaStore, http_client  # noqa: E402


@pytest.fixture(scope="module")
def persistent(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("chroma-persistent")
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_chroma(tmp_path_factory.mktemp("chroma-server") / "data") as running:
        yield running.client


@pytest.fixture(autouse=True)
def _never_embed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma's default embedding function would download a model: make any use fail loudly."""
    from chromadb.utils import embedding_functions

    def refuse(self: Any, input: Any) -> Any:  # the signature Chroma checks
        raise AssertionError("Chroma's default embedding function was called")

    monkeypatch.setattr(embedding_functions.DefaultEmbeddingFunction, "__call__", refuse)
    monkeypatch.setattr(embedding_functions.ONNXMiniLM_L6_V2, "__call__", refuse)


class ChromaContract(StoreContract):
    nested_metadata = False

    def add_foreign(self, store: Any, count: int) -> None:
        """Records with ids of another tool's own making (``note-1``), as chromadb users
        write them."""
        raw = store.client.get_collection(store.collection, embedding_function=None)
        raw.add(
            ids=[f"note-{i}" for i in range(count)],
            embeddings=[unit(i) for i in range(count)],
            metadatas=[{"source": f"t{i}"} for i in range(count)],
            documents=["theirs"] * count,
        )


class TestChromaPersistent(ChromaContract):
    @pytest.fixture
    def make_store(self, persistent: Any) -> StoreFactory:
        return store_factory(ChromaStore, persistent)


class TestChromaServer(ChromaContract):
    @pytest.fixture
    def make_store(self, server: Any) -> StoreFactory:
        return store_factory(ChromaStore, server)


@pytest.fixture(params=["persistent", "server"])
def client(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def _fill(store: ChromaStore) -> list[tuple[str, PointPayload]]:
    return fill(store, {"source": "a.md", "lang": "en"})


# -- construction and errors -------------------------------------------------------------


def test_constructor_does_no_io() -> None:
    store = ChromaStore(NoIO(), "docs", "llamaindex")  # type: ignore[arg-type]
    assert (store.collection, store.layout) == ("docs", "llamaindex")
    assert repr(store) == "ChromaStore(collection='docs', layout='llamaindex')"


@pytest.mark.parametrize(
    "args, kwargs",
    [(("docs", "llama"), {}), (("",), {}), ((None,), {}), (("docs",), {"batch_size": -1})],
)
def test_constructor_validates(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ChromaStore(NoIO(), *args, **kwargs)  # type: ignore[arg-type]


def test_the_lock_collection_is_not_a_store(persistent: Any) -> None:
    """rechunk's writer locks live in LOCK_COLLECTION: a store on it is refused before any
    request, so a sync cannot rewrite the locks (nor their collection's metadata)."""
    with pytest.raises(ConfigError, match="'rechunk-writer-locks' is reserved"):
        ChromaStore(NoIO(), chroma_adapter.LOCK_COLLECTION)  # type: ignore[arg-type]
    store = ChromaStore(persistent, collection_name())
    with store.writer_lock(wait=5):  # the lock collection exists now
        pass
    locks = persistent.get_collection(chroma_adapter.LOCK_COLLECTION)
    assert locks.metadata == {"rechunk:locks": 1}
    with pytest.raises(ConfigError, match="reserved"):
        ChromaStore(persistent, chroma_adapter.LOCK_COLLECTION).ensure_collection(DIM)
    assert persistent.get_collection(chroma_adapter.LOCK_COLLECTION).metadata == locks.metadata


def test_nothing_listening_is_store_unavailable() -> None:
    port = free_port()
    with pytest.raises(StoreUnavailableError, match="cannot reach") as exc:
        http_client("127.0.0.1", port, settings=Settings(anonymized_telemetry=False))
    assert isinstance(exc.value, TransientError)


def test_server_going_away_is_store_unavailable(tmp_path: Path) -> None:
    with running_chroma(tmp_path / "data") as running:
        store = ChromaStore(running.client, "docs")
        _fill(store)
        running.stop()
        for call in (
            store.collection_info,
            lambda: store.get_points("a.md"),
            lambda: store.write([PointWrite(new_id(), payload(5), unit(5))]),
            lambda: store.search(unit(0)),
        ):
            with pytest.raises(StoreUnavailableError, match="cannot reach") as exc:
                call()
            assert isinstance(exc.value, TransientError)


def test_a_server_gone_while_the_writer_lock_is_renewed_is_store_unavailable(
    tmp_path: Path,
) -> None:
    """A write that renews the writer lock first raised the client's bare ConnectError
    when the server had gone: publishing did not retry it (a user's sync gave up two
    seconds after the server was killed, where it waits 1, 2 and 4 s for it)."""
    import time

    with running_chroma(tmp_path / "data") as running:
        store = ChromaStore(running.client, "docs")
        _fill(store)
        with store.writer_lock(wait=5):
            lease = store._lease
            assert lease is not None
            store.write([PointWrite(new_id(), payload(4), unit(4))])  # pins the collection
            running.stop()
            lease._valid_until = time.monotonic() + lease._ttl / 4  # a renewal is due
            with pytest.raises(StoreUnavailableError, match="renew the writer lock") as exc:
                store.write([PointWrite(new_id(), payload(5), unit(5))])
            assert isinstance(exc.value, TransientError)


def test_layout_mismatch_is_refused(persistent: Any) -> None:
    name = collection_name()
    ChromaStore(persistent, name, "langchain").ensure_collection(DIM)
    with pytest.raises(StoreError, match="layout"):
        ChromaStore(persistent, name, "llamaindex").ensure_collection(DIM)


def test_foreign_records_are_reported(persistent: Any) -> None:
    name = collection_name()
    store = ChromaStore(persistent, name)
    store.ensure_collection(DIM)
    raw = persistent.get_collection(name, embedding_function=None)
    raw.add(ids=[new_id()], embeddings=[unit(0)], metadatas=[{"doc_id": "theirs"}],
            documents=["?"])
    with pytest.warns(ForeignPointsWarning, match="not a rechunk point"):
        assert store.search(unit(0)) == []  # skipped and left alone, never an error
        assert store.get_points("theirs") == []
    assert len(store.foreign_points) == 1
    assert store.doc_ids() == set()  # so that a prune never asks for its records
    # the foreign record is the nearest, yet a search still finds k of rechunk's own
    mine = new_id()
    store.write([PointWrite(mine, payload(0), unit(0) + 0.5 * unit(2))])
    assert [p.id for p, _ in store.search(unit(0), 1)] == [mine]  # warned once, above
    assert [[p.id for p, _ in hits] for hits in store.search_many([unit(0)], 1)] == [[mine]]


def test_a_prune_leaves_another_tools_records_alone(persistent: Any) -> None:
    """A collection chromadb users wrote first, with ids such as ``note-1`` and a record
    carrying a ``doc_id`` and an ``input_key`` of its own: a pruning sync deletes the
    documents it was not given and none of theirs."""
    store = ChromaStore(persistent, collection_name())
    store.ensure_collection(DIM)
    raw = persistent.get_collection(store.collection, embedding_function=None)
    raw.add(ids=["note-1", "note-2"], embeddings=[unit(1), unit(2)], documents=["?", "?"],
            metadatas=[{"source": "x"}, {"doc_id": "b", "input_key": "k"}])  # fmt: skip
    chunker, embedder = rechunk.FixedChunker(max_tokens=50), _Ones()
    docs = [rechunk.Document(d, f"Text of {d}.") for d in "abc"]
    rechunk.sync(docs, store, chunker=chunker, embedder=embedder)
    report = rechunk.sync(docs[:1], store, chunker=chunker, embedder=embedder, prune=True)
    assert report.documents["deleted"] == 2
    assert store.doc_ids() == {"a"}
    assert raw.get(ids=["note-1", "note-2"])["ids"] == ["note-1", "note-2"]


def test_present_ids_name_the_records_that_exist(client: Any) -> None:
    store = ChromaStore(client, collection_name())
    (a0, _), (a1, _), (b0, _) = _fill(store)
    theirs = new_id()  # another tool's record is named too
    raw = client.get_collection(store.collection, embedding_function=None)
    raw.add(ids=[theirs], embeddings=[unit(3)], metadatas=[{"doc_id": "a.md"}], documents=["?"])
    assert store.present_ids([a0, theirs, new_id(), a0]) == {a0, theirs}
    assert store.present_ids([b0, a1]) == {a1, b0}
    assert store.present_ids([]) == set()
    with pytest.raises(ConfigError):
        store.present_ids(["not-a-uuid"])


def test_all_ids_and_doc_ids_of_name_rechunk_records_by_id(client: Any) -> None:
    store = ChromaStore(client, collection_name())
    (a0, _), (a1, _), (b0, _) = _fill(store)
    theirs = new_id()  # another tool's record: listed by all_ids, no doc_id of rechunk's
    raw = client.get_collection(store.collection, embedding_function=None)
    raw.add(ids=[theirs], embeddings=[unit(3)], metadatas=[{"doc_id": "a.md"}], documents=["?"])
    assert sorted(i for page in store.all_ids() for i in page) == sorted([a0, a1, b0, theirs])
    assert store.doc_ids_of([a0, b0, theirs, new_id()]) == {a0: "a.md", b0: "b.md"}
    assert store.doc_ids_of([]) == {}
    # ids rechunk never gives are another tool's: passed over, as all_ids lists them
    assert store.doc_ids_of(["note-1", a1]) == {a1: "a.md"}
    # as is a record that has two of rechunk's fields but not the rest
    half = new_id()
    raw.add(ids=[half], embeddings=[unit(4)], metadatas=[{"doc_id": "b.md", "input_key": "k"}],
            documents=["?"])  # fmt: skip
    assert store.doc_ids_of([half, b0]) == {b0: "b.md"}
    assert store.doc_ids() == {"a.md", "b.md"}
    with pytest.raises(ConfigError):
        store.doc_ids_of("a0")


def test_reads_page_through_a_collection_larger_than_a_page(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read gives the same answer in pages of two or three records as in one page
    (Chroma's ``limit`` / ``offset`` paging: the last page short, or full and followed by
    an empty one)."""
    store = ChromaStore(client, collection_name(), batch_size=1)
    store.ensure_collection(DIM)
    written = [(new_id(), payload(i, doc_id=f"d{i % 3}.md")) for i in range(12)]
    store.write([PointWrite(i, p, unit(n)) for n, (i, p) in enumerate(written)])
    docs = ["d0.md", "d1.md", "d2.md"]
    keys = [p.input_key for _, p in written]
    ids = [i for i, _ in written]

    def reads() -> tuple[Any, ...]:
        return (
            store.doc_ids(), store.get_points_many(docs), store.present_ids(ids),
            {k: v.tolist() for k, v in store.get_vectors(keys, MODEL).items()},
            {k: v.tolist() for k, v in store.get_vectors_at(dict(zip(keys, ids)), MODEL).items()},
            sorted(i for page in store.all_ids() for i in page), store.doc_ids_of(ids),
        )  # fmt: skip

    whole = reads()
    assert whole[0] == set(docs) and len(whole[2]) == len(whole[3]) == 12
    assert whole[4] == whole[3] and whole[5] == sorted(ids)
    assert whole[6] == {i: p.doc_id for i, p in written}
    # 12 records: pages of 1, 3 and 5 (ids alone: 8, 24 and 40), the last page full and
    # followed by an empty one, or short
    for records in (1, 3, 5):
        monkeypatch.setattr(chroma_adapter, "_READ_PAGE", records)
        assert reads() == whole


class _Ones:  # the smallest rechunk Embedder
    model_id, dimension, max_input_tokens = "ones", DIM, None

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), DIM), dtype=np.float32)


class _CountsOpens:
    """A Chroma client that counts the requests for a collection object."""

    def __init__(self, client: Any) -> None:
        self.client, self.opened = client, 0

    def get_collection(self, *args: Any, **kwargs: Any) -> Any:
        self.opened += 1
        return self.client.get_collection(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_the_writer_lock_keeps_the_collection_open(server: Any) -> None:
    """Under the writer lock a sync asks the server for the collection once (each read
    and write asked again before); outside it every call asks, so a collection dropped
    and made anew in between is the one used."""
    client = _CountsOpens(server)
    store = ChromaStore(client, collection_name())
    store.ensure_collection(DIM)
    chunker, embedder = rechunk.FixedChunker(max_tokens=50), _Ones()
    docs = [rechunk.Document(f"{i}.md", f"Text number {i}. " * 40) for i in range(3)]
    client.opened = 0
    report = rechunk.sync(docs, store, chunker=chunker, embedder=embedder)
    assert report.stale_check == "passed" and client.opened == 1
    edited = [rechunk.Document("0.md", "A new first line.\n\n" + docs[0].text)]
    client.opened = 0
    assert rechunk.sync(edited, store, chunker=chunker, embedder=embedder).documents == {
        "synced": 1, "new": 0, "changed": 1, "unchanged": 0, "skipped": 0, "deleted": 0
    }  # fmt: skip
    assert client.opened == 1
    store.drop_collection()
    store.ensure_collection(DIM)
    assert store.doc_ids() == set()  # the new collection, not the one held during the sync
    assert rechunk.sync(docs, store, chunker=chunker, embedder=embedder).documents["new"] == 3


def test_adopts_a_collection_it_did_not_create(persistent: Any) -> None:
    name = collection_name()
    raw = persistent.create_collection(
        name, embedding_function=None, configuration={"hnsw": {"space": "ip"}}
    )
    store = ChromaStore(persistent, name)
    assert store.collection_info() is not None
    assert store.collection_info().dimension == 0  # type: ignore[union-attr]

    with pytest.raises(StoreError, match="records no dimension yet"):
        rechunk.sync([rechunk.Document("a", "Some text.")], store,
                     chunker=rechunk.FixedChunker(max_tokens=50), embedder=_Ones())
    with pytest.raises(StoreError, match="cosine"):
        store.ensure_collection(DIM)
    info = store.ensure_collection(DIM, "dot")
    assert (info.dimension, info.distance) == (DIM, "dot")
    meta = persistent.get_collection(name, embedding_function=None).metadata
    assert meta == {"rechunk:dimension": DIM, "rechunk:layout": "langchain"}
    assert raw.configuration["hnsw"]["space"] == "ip"


def test_text_change_without_the_low_level_update(
    persistent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback for a Chroma without the lower-level update: the vector is sent back."""
    monkeypatch.setattr(chroma_adapter, "_low_level_update", lambda collection: None)
    store = ChromaStore(persistent, collection_name())
    store.ensure_collection(DIM, "dot")
    point_id = new_id()
    store.write([PointWrite(point_id, payload(0), unit(0))])
    before = store.get_vectors([payload(0).input_key], MODEL)
    new = payload(0, text="a new text", ordinal=3)
    store.write([PointWrite(point_id, new)])
    assert store.get_points("a.md") == [StoredPoint(point_id, new)]
    after = store.get_vectors([payload(0).input_key], MODEL)
    assert after[payload(0).input_key].tobytes() == before[payload(0).input_key].tobytes()


# -- the exact layouts ---------------------------------------------------------------------


def test_langchain_layout(client: Any) -> None:
    name = collection_name()
    written = _fill(ChromaStore(client, name, "langchain"))
    raw = client.get_collection(name, embedding_function=None)
    assert raw.metadata == {"rechunk:dimension": DIM, "rechunk:layout": "langchain"}
    assert raw.configuration["hnsw"]["space"] == "cosine"
    point_id, p = written[0]
    got = raw.get(ids=[point_id], include=["metadatas", "documents"])
    assert got["documents"] == [TEXT]
    assert got["metadatas"] == [
        {
            "doc_id": "a.md", "revision": "rev-1", "policy": p.policy, "input_key": p.input_key,
            "model_id": MODEL, "ordinal": 0, "start": 0, "end": 10, "tokens": 3,
            "source": "a.md", "lang": "en",
        }
    ]  # fmt: skip


def test_llamaindex_layout(client: Any) -> None:
    name = collection_name()
    written = _fill(ChromaStore(client, name, "llamaindex"))
    raw = client.get_collection(name, embedding_function=None)
    point_id, p = written[0]
    got = raw.get(ids=[point_id], include=["metadatas", "documents"])
    assert got["documents"] == [TEXT]
    flat = dict(got["metadatas"][0])
    node = json.loads(flat.pop("_node_content"))
    assert flat == {
        "doc_id": "a.md", "revision": "rev-1", "policy": p.policy, "input_key": p.input_key,
        "model_id": MODEL, "ordinal": 0, "start": 0, "end": 10, "tokens": 3,
        "source": "a.md", "lang": "en",
        "_node_type": "TextNode", "document_id": "a.md", "ref_doc_id": "a.md",
    }  # fmt: skip
    assert node["id_"] == point_id and node["text"] == ""  # the text is the record's document
    assert (node["start_char_idx"], node["end_char_idx"]) == (0, 10)
    assert set(node["excluded_embed_metadata_keys"]) == RECHUNK_KEYS


# -- interoperability ----------------------------------------------------------------------


@pytest.mark.requires("langchain_chroma")
def test_langchain_chroma_reads_the_collection(client: Any) -> None:
    from langchain_chroma import Chroma

    name = collection_name()
    store = ChromaStore(client, name, "langchain")
    written = _fill(store)
    query = unit(1) + 0.3 * unit(2)
    reader = Chroma(
        client=client,
        collection_name=name,
        embedding_function=fixed_embeddings({"q": query.tolist()}),
    )
    docs = reader.similarity_search_by_vector(unit(1).tolist(), k=2)
    point_id, p = written[1]
    assert docs[0].id == point_id and docs[0].page_content == p.text
    assert docs[0].metadata == {
        "doc_id": "a.md", "revision": "rev-1", "policy": p.policy, "input_key": p.input_key,
        "model_id": MODEL, "ordinal": 1, "start": 10, "end": 20, "tokens": 4, "version": 2,
        "source": "a.md", "n": 1,
    }  # fmt: skip
    # LangChain picks its relevance function from the collection's hnsw space (cosine)
    scored = reader.similarity_search_with_relevance_scores("q", k=1)
    cosine = float(query @ unit(1) / np.linalg.norm(query))
    assert scored[0][0].id == point_id and scored[0][1] == pytest.approx(cosine, abs=1e-5)
    only_b = reader.similarity_search_by_vector(unit(1).tolist(), k=5, filter={"doc_id": "b.md"})
    assert [d.id for d in only_b] == [written[2][0]]


@pytest.mark.requires("llama_index.vector_stores.chroma")
def test_llamaindex_chroma_reads_the_collection(client: Any) -> None:
    from llama_index.core.schema import MetadataMode
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.chroma import ChromaVectorStore

    name = collection_name()
    store = ChromaStore(client, name, "llamaindex")
    written = _fill(store)
    reader = ChromaVectorStore(
        chroma_collection=client.get_collection(name, embedding_function=None)
    )
    result = reader.query(VectorStoreQuery(query_embedding=unit(0).tolist(), similarity_top_k=2))
    assert result.nodes is not None and result.ids is not None
    point_id, p = written[0]
    node = result.nodes[0]
    assert result.ids[0] == point_id and node.node_id == point_id
    assert node.get_content(metadata_mode=MetadataMode.NONE) == TEXT
    assert (node.start_char_idx, node.end_char_idx) == (p.start, p.end)  # type: ignore[attr-defined]
    assert node.ref_doc_id == "a.md"
    embed_view = node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "lang: en" in embed_view and p.input_key not in embed_view

    store.write([PointWrite(point_id, payload(0, ordinal=9, start=50, end=60, text=TEXT))])
    result = reader.query(VectorStoreQuery(query_embedding=unit(0).tolist(), similarity_top_k=1))
    assert result.nodes is not None
    assert (result.nodes[0].start_char_idx, result.nodes[0].end_char_idx) == (50, 60)  # type: ignore[attr-defined]

    reader.delete("a.md")  # LlamaIndex deletes by ref_doc_id (where document_id == ...)
    assert store.get_points("a.md") == [] and store.doc_ids() == {"b.md"}


# -- import hygiene ------------------------------------------------------------------------


def test_import_loads_no_other_framework() -> None:
    code = (
        "import sys, rechunk.adapters.chroma\n"
        "bad = [m for m in ('qdrant_client', 'llama_index', 'langchain_core', 'langchain_chroma')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_chromadb_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['chromadb'] = None\n"
        "from rechunk.errors import MissingDependencyError\n"
        "try:\n"
        "    import rechunk.adapters.chroma\n"
        "except MissingDependencyError as exc:\n"
        "    assert exc.extra == 'chroma', exc\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert "rechunk[chroma]" in out.stdout


def test_vectors_are_float32(persistent: Any) -> None:
    store = ChromaStore(persistent, collection_name())
    store.ensure_collection(DIM, "euclid")
    raw = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    store.write([PointWrite(new_id(), payload(0), raw)])
    got = store.get_vectors([payload(0).input_key], MODEL)[payload(0).input_key]
    assert got.dtype == np.float32 and got.tobytes() == raw.tobytes()


def test_write_requests_are_capped_in_records_and_bytes() -> None:
    """A Chroma server refuses large bodies: a sync of big metadata must not fail there on
    every run (a single record larger than the cap still goes alone)."""
    from rechunk.adapters.chroma import MAX_REQUEST_BYTES, _requests

    third = [(i, "x" * (MAX_REQUEST_BYTES // 3), {}) for i in range(7)]
    assert [len(request) for request in _requests(third, 100)] == [2, 2, 2, 1]
    assert [len(request) for request in _requests(third, 1)] == [1] * 7
    huge = [(0, "", {"acl": "u" * 2 * MAX_REQUEST_BYTES}), (1, "", {})]
    assert [len(request) for request in _requests(huge, 100)] == [1, 1]
    vectors = [(i, "", {}) for i in range(10)]  # 384 numbers as JSON, about 9 KB each
    assert [len(r) for r in _requests(vectors, 4, dimension=384)] == [4, 4, 2]


def test_a_server_that_stops_answering_is_unavailable_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    monkeypatch.setattr(chroma_adapter, "REQUEST_SECONDS", 1.0)
    with running_chroma(tmp_path / "data") as running:
        client = http_client("127.0.0.1", running.port,
                             settings=Settings(anonymized_telemetry=False))
        store = ChromaStore(client, "docs")
        store.ensure_collection(DIM)
        running.process.send_signal(signal.SIGSTOP)  # alive, but answers nothing
        try:
            with pytest.raises(StoreUnavailableError):
                store.collection_info()
        finally:
            running.process.send_signal(signal.SIGCONT)


# -- another process writes the first vectors of a collection this one saw empty ------------

FIRST_WRITER = """
import sys
import chromadb
from chromadb.config import Settings
from store_contract import DIM, payload, unit
from rechunk.adapters.chroma import ChromaStore
from rechunk.sync.store import PointWrite

client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
store = ChromaStore(client, "docs")
store.ensure_collection(DIM)
with store.writer_lock():
    store.write([PointWrite(f"00000000-0000-4000-8000-00000000000{i}", payload(i), unit(i))
                 for i in range(3)])
"""


def test_reads_vectors_another_process_wrote_after_this_one_saw_the_collection_empty(
    tmp_path: Path,
) -> None:
    """chromadb's embedded engine that counted a collection while it was empty fails to read
    vectors after another process wrote the first ones ("Nothing found on disk"), even
    through a new get_collection. The store reopens the folder's engine once and reads
    them; the other collection of the folder and the raw client keep working."""
    folder = str(tmp_path / "chroma")
    client = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False))
    neighbour = ChromaStore(client, "neighbour")
    fill(neighbour, {"n": 1})
    store = ChromaStore(client, "docs")
    assert store.ensure_collection(DIM).points == 0  # seen empty by this process
    tests = str(Path(__file__).resolve().parent)
    subprocess.run([sys.executable, "-c", FIRST_WRITER, folder], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": tests})  # fmt: skip
    assert store.collection_info() is not None and store.collection_info().points == 3  # type: ignore[union-attr]
    keys = [payload(i).input_key for i in range(3)]
    found = store.get_vectors(keys, MODEL)
    assert sorted(found) == sorted(keys)
    for i, key in enumerate(keys):
        assert np.allclose(found[key], unit(i), atol=1e-6)
    (best, score), *_ = store.search(unit(1), k=3)
    assert best.payload.input_key == keys[1] and score == pytest.approx(1.0, abs=1e-5)
    # one engine per folder and process: every client of the folder reads the fresh one
    raw = client.get_collection("docs", embedding_function=None)
    assert len(raw.get(include=["embeddings"])["ids"]) == 3
    assert len(neighbour.get_vectors([payload(0).input_key], MODEL)) == 1


REWRITER = """
import sys
import uuid
import chromadb
from chromadb.config import Settings
from store_contract import DIM, payload, unit
from rechunk.adapters.chroma import ChromaStore
from rechunk.sync.store import PointWrite

client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
store = ChromaStore(client, "docs")
with store.writer_lock():
    for d in range(6):  # a watcher's batches: documents deleted and written again, larger
        store.delete([p.id for p in store.get_points_many([f"d{d}.md"])[f"d{d}.md"]])
        store.write([PointWrite(str(uuid.uuid4()), payload(i, f"d{d}.md"), unit(i))
                     for i in range(200)])
"""


def test_reads_vectors_after_another_process_deleted_and_wrote_them_again(
    tmp_path: Path,
) -> None:
    """A cron sync beside a watcher on one embedded Chroma folder: after the watcher deleted
    documents and wrote them again, this process's engine failed to read their vectors
    ("Error finding id"; the sync exited 3 after waiting for the writer lock). The store
    reopens the folder's engine once and reads them, as for a collection first seen empty."""
    import uuid

    folder = str(tmp_path / "chroma")
    client = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False))
    store = ChromaStore(client, "docs")
    store.ensure_collection(DIM)
    with store.writer_lock():
        store.write([PointWrite(str(uuid.uuid4()), payload(i, f"d{d}.md"), unit(i))
                     for d in range(30) for i in range(10)])  # fmt: skip
    keys = [payload(i, "d1.md").input_key for i in range(10)]
    assert len(store.get_vectors(keys, MODEL)) == 10  # this process's engine read them
    tests = str(Path(__file__).resolve().parent)
    subprocess.run([sys.executable, "-c", REWRITER, folder], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": tests})  # fmt: skip
    found = store.get_vectors(keys, MODEL)
    assert sorted(found) == sorted(keys)
    assert all(np.allclose(found[key], unit(i), atol=1e-6) for i, key in enumerate(keys))


def test_only_an_embedded_folder_is_reopened(server: Any) -> None:
    """A server's collection and an in-memory one are never reopened (started afresh, an
    in-memory engine would be empty): their errors reach the caller as they are."""
    ephemeral = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    for client in (ephemeral, server):
        store = ChromaStore(client, collection_name())
        fill(store, {"n": 1})
        collection = client.get_collection(store.collection, embedding_function=None)
        assert chroma_adapter._reopen_embedded(collection) is False
        assert store.collection_info().points == 3  # type: ignore[union-attr]


def test_a_sync_that_waited_for_the_first_writer_of_a_new_collection_syncs(
    tmp_path: Path,
) -> None:
    """Two overlapping ``rechunk sync`` runs on a new embedded Chroma folder (cron): the
    second opens the collection while it is empty, waits for the writer lock while the
    first writes the first vectors, then syncs its edit (its new inputs looked up among
    the stored vectors: the read that failed, exit 3, "Nothing found on disk")."""
    import queue
    import threading

    from bad_embeddings_server import BadEmbeddingsServer, vectors_reply
    from cli_helpers import guide_paragraphs

    from rechunk.integrations._st_folder import ModelFolder

    gate = threading.Event()

    def gated(request: dict[str, Any]) -> Any:  # the first sync waits here, holding the lock
        gate.wait(120)
        return vectors_reply(request)

    kb = tmp_path / "kb"
    kb.mkdir()
    paragraphs = guide_paragraphs()
    for i in range(3):
        (kb / f"b{i}.md").write_text("\n\n".join(paragraphs[i:]), encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with BadEmbeddingsServer(reply=gated, hold_seconds=120) as embeddings:
        command = [
            sys.executable, "-m", "rechunk.cli", "sync", "kb", "--store", "chroma:cdb",
            "--embedder", f"openai:minilm?tokenizer={ModelFolder().folder}",
            "--embed-url", embeddings.url, "--json",
        ]  # fmt: skip
        first = subprocess.Popen(command, cwd=tmp_path, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        second = None
        try:
            deadline = time.monotonic() + 60
            while not embeddings.requests:  # the first is embedding: it holds the lock
                assert first.poll() is None and time.monotonic() < deadline, first.communicate()
                time.sleep(0.05)
            for i in range(3):  # the files change before the second run
                (kb / f"b{i}.md").write_text(
                    "\n\n".join([f"Edited paragraph {i} of this revision.", *paragraphs[i:]]),
                    encoding="utf-8",
                )
            second = subprocess.Popen(command, cwd=tmp_path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
            errors: queue.Queue[str] = queue.Queue()
            err = second.stderr
            threading.Thread(target=lambda: [errors.put(x) for x in err], daemon=True).start()  # type: ignore[union-attr]
            said: list[str] = []
            while not any("waiting for the writer lock" in line for line in said):
                said.append(errors.get(timeout=60))
            gate.set()
            _, err1 = first.communicate(timeout=120)
            second.wait(timeout=120)
            out2 = second.stdout.read()  # type: ignore[union-attr]
        finally:
            gate.set()
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
    time.sleep(0.5)  # the reader thread drains the rest of stderr
    said.extend(errors.queue)
    assert first.returncode == 0, err1
    assert second.returncode == 0, "".join(said)
    report = json.loads(out2)
    assert report["documents"]["changed"] == 3 and report["stale_check"] == "passed", report
    status = subprocess.run(
        [sys.executable, "-m", "rechunk.cli", "status", "--store", "chroma:cdb", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    data = json.loads(status.stdout)
    assert data["documents"] == 3 and data["stale_check"] == "passed", data
