"""QdrantStore: the store contract on local mode (``:memory:`` and ``path=``), error
translation, the exact payload layouts, and reading the collection with LangChain's
and LlamaIndex's own Qdrant vector stores."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chroma_server import free_port
from store_contract import (
    DIM,
    MODEL,
    RECHUNK_KEYS,
    TEXT,
    NoIO,
    StoreContract,
    StoreFactory,
    fill,
    fixed_embeddings,
    new_id,
    payload,
    store_factory,
    unit,
)

from rechunk.errors import ConfigError, StoreError, StoreUnavailableError, TransientError
from rechunk.sync.store import PointPayload, PointWrite, StoredPoint

qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient, models  # noqa: E402

from rechunk.adapters._layout import ForeignPointsWarning, Layout, rechunk_fields  # noqa: E402
from rechunk.adapters.qdrant import QdrantStore, local_client  # noqa: E402


class QdrantContract(StoreContract):
    def add_foreign(self, store: Any, count: int) -> None:
        """LangChain documents with integer ids (which Qdrant takes and rechunk never writes)."""
        name = None if store.layout == "langchain" else "text-dense"
        store.client.upsert(
            store.collection,
            [
                models.PointStruct(
                    id=i,
                    vector=unit(i).tolist() if name is None else {name: unit(i).tolist()},
                    payload={"page_content": "theirs", "metadata": {"source": f"t{i}"}},
                )
                for i in range(count)
            ],
        )


class TestQdrantMemory(QdrantContract):
    @pytest.fixture
    def make_store(self) -> Iterator[StoreFactory]:
        client = QdrantClient(":memory:")
        yield store_factory(QdrantStore, client)
        client.close()


class TestQdrantPath(QdrantContract):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Iterator[StoreFactory]:
        client = QdrantClient(path=str(tmp_path / "qdrant"))
        yield store_factory(QdrantStore, client)
        client.close()


class TestQdrantLocalClient(QdrantContract):
    """A folder opened by rechunk's own ``local_client`` (write-ahead logging)."""

    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Iterator[StoreFactory]:
        client = local_client(tmp_path / "qdrant")
        yield store_factory(QdrantStore, client)
        client.close()


class TestQdrantWithoutIndex(QdrantContract):
    """The filtered reads used where embedded Qdrant's internals are not as expected."""

    @pytest.fixture
    def make_store(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreFactory]:
        import rechunk.adapters.qdrant as adapter

        monkeypatch.setattr(adapter, "_local_collection", lambda client, name: None)
        client = QdrantClient(":memory:")
        yield store_factory(QdrantStore, client)
        client.close()


@pytest.fixture
def client() -> Iterator[QdrantClient]:
    c = QdrantClient(":memory:")
    yield c
    c.close()


def _fill(store: QdrantStore) -> list[tuple[str, PointPayload]]:
    return fill(store, {"source": "a.md", "tags": ["x", "y"]})


# -- construction and errors -------------------------------------------------------------


def test_constructor_does_no_io() -> None:
    store = QdrantStore(NoIO(), "docs", "llamaindex")  # type: ignore[arg-type]
    assert (store.collection, store.layout) == ("docs", "llamaindex")
    assert repr(store) == "QdrantStore(collection='docs', layout='llamaindex')"


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("docs", "LangChain"), {}),
        (("docs", None), {}),
        (("",), {}),
        ((3,), {}),
        (("docs",), {"batch_size": 0}),
        (("docs",), {"batch_size": True}),
    ],
)
def test_constructor_validates(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        QdrantStore(NoIO(), *args, **kwargs)  # type: ignore[arg-type]


def test_unreachable_server_is_store_unavailable() -> None:
    port = free_port()
    remote = QdrantClient(url=f"http://127.0.0.1:{port}", timeout=2, check_compatibility=False)
    store = QdrantStore(remote, "docs")
    for call in (
        store.collection_info,
        lambda: store.ensure_collection(DIM),
        lambda: store.get_points("a.md"),
        lambda: store.write([PointWrite(new_id(), payload(0), unit(0))]),
    ):
        with pytest.raises(StoreUnavailableError, match="cannot reach") as exc:
            call()
        assert isinstance(exc.value, TransientError)
    remote.close()


class _Failing:
    """A client whose every call raises ``exc``; ``collection_exists`` answers ``exists``."""

    def __init__(self, exc: Exception, exists: bool = True) -> None:
        self.exc, self.exists = exc, exists

    def collection_exists(self, name: str) -> bool:
        return self.exists

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise self.exc

        return fail


class _GrpcError(Exception):
    """Shaped like grpc's _InactiveRpcError (module grpc._channel, a code() method)."""

    __module__ = "grpc._channel"

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self._code = code

    def code(self) -> Any:
        return type("StatusCode", (), {"name": self._code})()


def _response(status: int) -> Exception:
    import httpx
    from qdrant_client.http.exceptions import UnexpectedResponse

    return UnexpectedResponse(status, "reason", b"{}", httpx.Headers())


def _transient_errors() -> list[Exception]:
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException

    return [
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        ResponseHandlingException(httpx.ConnectError("refused")),
        _response(503),
        _GrpcError("UNAVAILABLE"),
        _GrpcError("DEADLINE_EXCEEDED"),
        TimeoutError("timed out"),
    ]


@pytest.mark.parametrize("exc", _transient_errors(), ids=lambda e: type(e).__name__)
def test_transient_client_errors_are_store_unavailable(exc: Exception) -> None:
    store = QdrantStore(_Failing(exc), "docs")  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailableError, match="cannot reach Qdrant") as info:
        store.get_points("a.md")
    assert info.value.__cause__ is exc


@pytest.mark.parametrize(
    "exc", [_response(500), _GrpcError("INVALID_ARGUMENT"), ValueError("bad")], ids=str
)
def test_other_client_errors_are_store_errors(exc: Exception) -> None:
    store = QdrantStore(_Failing(exc), "docs")  # type: ignore[arg-type]
    with pytest.raises(StoreError) as info:
        store.collection_info()
    assert not isinstance(info.value, StoreUnavailableError)
    assert info.value.__cause__ is exc


def test_lock_error_during_a_call_is_store_unavailable() -> None:
    exc = RuntimeError(
        "Storage folder /x is already accessed by another instance of Qdrant client."
    )
    store = QdrantStore(_Failing(exc), "docs")  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailableError, match="in use by another process"):
        store.doc_ids()


def test_server_404_means_missing_collection() -> None:
    store = QdrantStore(_Failing(_response(404), exists=False), "docs")  # type: ignore[arg-type]
    assert store.collection_info() is None
    with pytest.raises(StoreError, match="ensure_collection"):
        store.get_points("a.md")


def test_a_damaged_folder_is_a_store_error(tmp_path: Path) -> None:
    """A collection file that is not a database (or a full disk): StoreError naming the
    folder, not SQLite's own error."""
    client = local_client(tmp_path / "q")
    QdrantStore(client, "docs").ensure_collection(DIM)
    client.close()
    (tmp_path / "q" / "collection" / "docs" / "storage.sqlite").write_bytes(b"not SQLite" * 99)
    with pytest.raises(StoreError, match=r"cannot open the Qdrant folder .*DatabaseError"):
        local_client(tmp_path / "q")


def test_a_damaged_point_or_meta_file_is_a_store_error_that_quotes_nothing(
    tmp_path: Path,
) -> None:
    """A point record whose pickled bytes are damaged, or a damaged meta.json: a
    StoreError naming the folder and saying what to do, and no byte of what it held (a
    pickle's own message quotes the byte it failed on; points hold document text).
    Before: the library's UnpicklingError / JSONDecodeError, raw."""
    import sqlite3

    client = local_client(tmp_path / "q")
    store = QdrantStore(client, "docs")
    store.ensure_collection(DIM)
    store.write([PointWrite(new_id(), payload(0), unit(0))])
    client.close()
    database = sqlite3.connect(tmp_path / "q" / "collection" / "docs" / "storage.sqlite")
    database.execute("UPDATE points SET point = ?", (b"\x80\x04\xab" + b"secret" * 9,))
    database.commit()
    database.close()
    with pytest.raises(StoreError, match=r"it is damaged \(UnpicklingError.*move it aside") as got:
        local_client(tmp_path / "q")
    assert "secret" not in str(got.value) and "\\x" not in str(got.value)
    (tmp_path / "q" / "meta.json").write_text("{secret", encoding="utf-8")
    with pytest.raises(StoreError, match=r"damaged \(JSONDecodeError") as got:
        local_client(tmp_path / "q")
    assert "secret" not in str(got.value)
    # settings a newer qdrant-client may write are no damage: say which it is
    (tmp_path / "q" / "meta.json").write_text(
        '{"collections": {"docs": {"vectors": {"size": 4, "distance": "Cosine"}, '
        '"some_new_option": 1}}, "aliases": {}}', encoding="utf-8"
    )
    with pytest.raises(StoreError, match=r"written by a newer qdrant-client"):
        local_client(tmp_path / "q")


def test_a_script_that_leaves_its_embedded_client_open_exits_quietly(tmp_path: Path) -> None:
    """A client kept in a global, never closed (as a short script does), or closed twice:
    the script's stderr stays empty. Before: qdrant-client's __del__ ran during shutdown
    and printed an ignored ImportError under every such script."""
    import subprocess
    import sys

    script = (
        "from rechunk.adapters.qdrant import QdrantStore, local_client\n"
        f"client = local_client({str(tmp_path / 'q')!r})\n"
        "QdrantStore(client, 'docs').ensure_collection(4)\n"
        "held = [client]\n"
        "held.append(held)  # freed by the last collection, after imports are torn down\n"
        f"closed = local_client({str(tmp_path / 'other')!r})\n"
        "closed.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_path_lock_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "locked"
    first = local_client(path)
    store = QdrantStore(first, "docs")
    written = _fill(store)
    # What qdrant-client itself does: the second client fails as it is created.
    with pytest.raises(RuntimeError, match="already accessed by another instance"):
        QdrantClient(path=str(path))
    with pytest.raises(StoreUnavailableError, match="in use by another process") as exc:
        local_client(path)
    assert isinstance(exc.value, TransientError)
    first.close()
    second = local_client(path)  # the lock is released with the first client
    assert QdrantStore(second, "docs").get_points("a.md") == [
        StoredPoint(i, p) for i, p in written[:2]
    ]
    second.close()


def test_closed_client_is_a_store_error(tmp_path: Path) -> None:
    c = QdrantClient(path=str(tmp_path / "q"))
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    c.close()
    with pytest.raises(StoreError):
        store.write([PointWrite(new_id(), payload(0), unit(0))])


def test_foreign_points_are_reported(client: QdrantClient) -> None:
    store = QdrantStore(client, "docs")
    store.ensure_collection(DIM)
    # a LangChain document whose metadata has a doc_id of its own
    foreign = {"page_content": "t", "metadata": {"doc_id": "theirs"}}
    client.upsert(
        "docs",
        points=[models.PointStruct(id=new_id(), vector=unit(0).tolist(), payload=foreign)],
    )
    with pytest.warns(ForeignPointsWarning, match="not a rechunk point"):
        assert store.search(unit(0)) == []  # skipped and left alone, never an error
        assert store.get_points("theirs") == []
    assert list(store.foreign_points) == [str(p.id) for p in client.scroll("docs")[0]]
    assert store.doc_ids() == set()  # so that a prune never asks for its points
    # the foreign point is the nearest, yet a search still finds k of rechunk's own
    mine = new_id()
    store.write([PointWrite(mine, payload(0), unit(0) + 0.5 * unit(2))])
    assert [p.id for p, _ in store.search(unit(0), 1)] == [mine]  # warned once, above
    assert [[p.id for p, _ in hits] for hits in store.search_many([unit(0)], 1)] == [[mine]]
    store.delete([mine])
    # a point with rechunk's fields but a broken value is not another tool's: an error
    broken = {"page_content": "t", "metadata": {**rechunk_fields(payload(0)), "ordinal": "x"}}
    client.upsert(
        "docs",
        points=[models.PointStruct(id=new_id(), vector=unit(1).tolist(), payload=broken)],
    )
    with pytest.raises(StoreError, match="ordinal"):
        store.search(unit(1))


def test_collection_with_other_vector_names_is_refused(client: QdrantClient) -> None:
    client.create_collection(
        "named",
        vectors_config={"other": models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
    )
    layouts: tuple[Layout, ...] = ("langchain", "llamaindex")
    for layout in layouts:
        with pytest.raises(StoreError, match="named vectors"):
            QdrantStore(client, "named", layout).ensure_collection(DIM)


# -- the exact layouts ---------------------------------------------------------------------


def test_langchain_layout(client: QdrantClient) -> None:
    store = QdrantStore(client, "docs", "langchain")
    written = _fill(store)
    params = client.get_collection("docs").config.params.vectors
    assert isinstance(params, models.VectorParams) and params.size == DIM  # unnamed vector
    point_id, p = written[0]
    record = client.retrieve("docs", [point_id], with_vectors=True)[0]
    assert record.payload == {
        "page_content": TEXT,
        "metadata": {
            "doc_id": "a.md", "revision": "rev-1", "policy": p.policy, "input_key": p.input_key,
            "model_id": MODEL, "ordinal": 0, "start": 0, "end": 10, "tokens": 3,
            "source": "a.md", "tags": ["x", "y"],
        },
    }  # fmt: skip
    assert isinstance(record.vector, list)
    versioned = client.retrieve("docs", [written[1][0]])[0].payload
    assert versioned is not None and versioned["metadata"]["version"] == 2


def test_llamaindex_layout(client: QdrantClient) -> None:
    store = QdrantStore(client, "docs", "llamaindex")
    written = _fill(store)
    params = client.get_collection("docs").config.params.vectors
    assert isinstance(params, dict) and set(params) == {"text-dense"}
    point_id, p = written[0]
    record = client.retrieve("docs", [point_id], with_vectors=True)[0]
    assert record.payload is not None and isinstance(record.vector, dict)
    assert set(record.vector) == {"text-dense"}
    flat = dict(record.payload)
    node = json.loads(flat.pop("_node_content"))
    assert flat == {
        "doc_id": "a.md", "revision": "rev-1", "policy": p.policy, "input_key": p.input_key,
        "model_id": MODEL, "ordinal": 0, "start": 0, "end": 10, "tokens": 3,
        "source": "a.md", "tags": ["x", "y"],
        "_node_type": "TextNode", "document_id": "a.md", "ref_doc_id": "a.md",
    }  # fmt: skip
    assert node["id_"] == point_id and node["text"] == TEXT
    assert (node["start_char_idx"], node["end_char_idx"]) == (0, 10)
    assert node["relationships"]["1"]["node_id"] == "a.md"
    assert set(node["excluded_embed_metadata_keys"]) == RECHUNK_KEYS
    # the LLM is shown which document a node is from
    assert set(node["excluded_llm_metadata_keys"]) == RECHUNK_KEYS - {"doc_id"}
    assert node["metadata"]["source"] == "a.md"


# -- interoperability: the frameworks' own classes read what rechunk wrote ---------------


@pytest.mark.requires("langchain_qdrant")
def test_langchain_qdrant_reads_the_collection(client: QdrantClient) -> None:
    from langchain_qdrant import QdrantVectorStore

    store = QdrantStore(client, "docs", "langchain")
    written = _fill(store)
    reader = QdrantVectorStore(
        client=client, collection_name="docs", embedding=fixed_embeddings({"q": unit(1).tolist()})
    )
    docs = reader.similarity_search_by_vector(unit(1).tolist(), k=2)
    point_id, p = written[1]
    assert docs[0].page_content == p.text
    assert docs[0].metadata == {
        "doc_id": "a.md", "revision": "rev-1", "policy": p.policy, "input_key": p.input_key,
        "model_id": MODEL, "ordinal": 1, "start": 10, "end": 20, "tokens": 4, "version": 2,
        "source": "a.md", "n": 1, "_id": point_id, "_collection_name": "docs",
    }  # fmt: skip
    by_query = reader.similarity_search("q", k=1)
    assert by_query[0].metadata["_id"] == point_id
    only_b = reader.similarity_search_by_vector(
        unit(1).tolist(),
        k=5,
        filter=models.Filter(
            must=[
                models.FieldCondition(key="metadata.doc_id", match=models.MatchValue(value="b.md"))
            ]
        ),
    )
    assert [d.metadata["_id"] for d in only_b] == [written[2][0]]


@pytest.mark.requires("langchain_qdrant")
def test_rechunk_accepts_a_collection_langchain_created(client: QdrantClient) -> None:
    from langchain_qdrant import QdrantVectorStore

    # what QdrantVectorStore.construct_instance creates: one unnamed cosine vector
    client.create_collection(
        "lc", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    lc = QdrantVectorStore(client=client, collection_name="lc", embedding=fixed_embeddings({}))
    lc.add_texts(["written by langchain"], metadatas=[{"source": "lc"}])
    store = QdrantStore(client, "lc", "langchain")
    assert store.ensure_collection(DIM).points == 1
    point = PointWrite(new_id(), payload(0), unit(0))
    store.write([point])
    assert store.get_points("a.md") == [StoredPoint(point.id, point.payload)]


@pytest.mark.requires("llama_index.vector_stores.qdrant")
def test_llamaindex_qdrant_reads_the_collection(client: QdrantClient) -> None:
    from llama_index.core.schema import MetadataMode
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    store = QdrantStore(client, "docs", "llamaindex")
    written = _fill(store)
    reader = QdrantVectorStore(collection_name="docs", client=client)
    result = reader.query(VectorStoreQuery(query_embedding=unit(0).tolist(), similarity_top_k=2))
    assert result.nodes is not None and result.ids is not None
    point_id, p = written[0]
    node = result.nodes[0]
    assert result.ids[0] == point_id and node.node_id == point_id
    assert node.get_content(metadata_mode=MetadataMode.NONE) == TEXT
    assert (node.start_char_idx, node.end_char_idx) == (p.start, p.end)  # type: ignore[attr-defined]
    assert node.ref_doc_id == "a.md"
    assert node.metadata["input_key"] == p.input_key and node.metadata["tags"] == ["x", "y"]
    embed_view = node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "source: a.md" in embed_view and p.input_key not in embed_view
    assert "rev-1" not in node.get_content(metadata_mode=MetadataMode.LLM)

    # a payload-only update is what LlamaIndex then sees
    store.write([PointWrite(point_id, payload(0, ordinal=9, start=50, end=60, text=TEXT))])
    result = reader.query(VectorStoreQuery(query_embedding=unit(0).tolist(), similarity_top_k=1))
    assert result.nodes is not None
    assert (result.nodes[0].start_char_idx, result.nodes[0].end_char_idx) == (50, 60)  # type: ignore[attr-defined]

    # LlamaIndex's own delete by ref_doc_id finds rechunk's points
    reader.delete("a.md")
    assert store.get_points("a.md") == [] and store.doc_ids() == {"b.md"}


@pytest.mark.requires("llama_index.vector_stores.qdrant")
def test_rechunk_reads_a_collection_llamaindex_created(client: QdrantClient) -> None:
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    li = QdrantVectorStore(collection_name="li", client=client)
    li.add([TextNode(id_=new_id(), text="from llamaindex", embedding=unit(3).tolist())])
    store = QdrantStore(client, "li", "llamaindex")
    info = store.ensure_collection(DIM)
    assert (info.dimension, info.points) == (DIM, 1)
    point = PointWrite(new_id(), payload(0), unit(0))
    store.write([point])
    assert store.search(unit(0), k=1)[0][0] == StoredPoint(point.id, point.payload)


# -- import hygiene ------------------------------------------------------------------------


def test_import_loads_no_other_framework() -> None:
    code = (
        "import sys, rechunk.adapters.qdrant\n"
        "bad = [m for m in ('chromadb', 'llama_index', 'langchain_core', 'langchain_qdrant')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_qdrant_client_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['qdrant_client'] = None\n"
        "from rechunk.errors import MissingDependencyError\n"
        "try:\n"
        "    import rechunk.adapters.qdrant\n"
        "except MissingDependencyError as exc:\n"
        "    assert exc.extra == 'qdrant', exc\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('no error')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert "rechunk[qdrant]" in out.stdout


def test_vectors_are_float32_copies(client: QdrantClient) -> None:
    store = QdrantStore(client, "docs", "llamaindex")
    store.ensure_collection(DIM, "dot")
    raw = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    store.write([PointWrite(new_id(), payload(0), raw)])
    got = store.get_vectors([payload(0).input_key], MODEL)[payload(0).input_key]
    assert got.dtype == np.float32 and got.tobytes() == raw.tobytes()  # dot: not normalised


class _IndexLog(QdrantClient):
    """A real local client that also records the payload indexes asked for."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.indexed: list[tuple[str, str]] = []

    def create_payload_index(self, collection_name: str, field_name: str, *a: Any, **k: Any) -> Any:
        self.indexed.append((collection_name, field_name))
        return super().create_payload_index(collection_name, field_name, *a, **k)


@pytest.mark.parametrize("layout", ["langchain", "llamaindex"])
def test_every_filtered_field_is_indexed_also_on_a_foreign_collection(layout: Layout) -> None:
    """A Qdrant server in strict mode refuses filters on fields without an index: the three
    fields rechunk filters on get one, also in a collection another tool created."""
    client = _IndexLog()
    vectors: Any = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    client.create_collection(
        "made-elsewhere",
        vectors_config=(vectors if layout == "langchain" else {"text-dense": vectors}),
    )
    QdrantStore(client, "made-elsewhere", layout).ensure_collection(DIM)
    prefix = "metadata." if layout == "langchain" else ""
    assert sorted(field for _, field in client.indexed) == sorted(
        prefix + f for f in ("doc_id", "input_key", "model_id")
    )
    QdrantStore(client, "new", layout).ensure_collection(DIM)
    assert sorted(f for c, f in client.indexed if c == "new") == sorted(
        prefix + f for f in ("doc_id", "input_key", "model_id")
    )


def test_layout_mismatch_is_refused(client: QdrantClient) -> None:
    """Writing a collection in the other layout would rewrite its points in another format
    (the same ids), and every document would look new."""
    store = QdrantStore(client, "docs", "langchain")
    store.ensure_collection(DIM)
    store.write([PointWrite(new_id(), payload(0), unit(0))])
    other = QdrantStore(client, "docs", "llamaindex")
    with pytest.raises(StoreError, match="langchain layout, not llamaindex"):
        other.ensure_collection(DIM)
    with pytest.raises(StoreError, match="keeps one layout"):
        other.collection_info()
    assert store.collection_info() is not None  # its own layout reads it as before


# -- the embedded index ------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["langchain", "llamaindex"])
def test_embedded_index_sees_what_other_code_writes_and_deletes(
    client: QdrantClient, layout: Layout
) -> None:
    """Points added or deleted through the same client by other code (another library)
    are seen by the next read, though the store's index was built before them."""
    store = QdrantStore(client, "docs", layout=layout)
    store.ensure_collection(DIM)
    _fill(store)
    doc = "a.md"
    before = store.get_points(doc)
    other = QdrantStore(client, "scratch", layout=layout)  # a twin written behind store's back
    other.ensure_collection(DIM)
    extra = PointWrite(new_id(), payload(0, doc_id="late.md"), unit(3))
    other.write([extra])
    record = client.retrieve("scratch", [extra.id], with_payload=True, with_vectors=True)[0]
    client.upsert(
        "docs", points=[models.PointStruct(id=extra.id, vector=record.vector, payload=record.payload)]
    )
    assert [p.id for p in store.get_points("late.md")] == [extra.id]
    assert "late.md" in store.doc_ids()
    assert extra.payload.input_key in store.get_vectors([extra.payload.input_key], MODEL)
    client.delete("docs", points_selector=models.PointIdsList(points=[before[0].id]))
    assert [p.id for p in store.get_points(doc)] == [p.id for p in before[1:]]


def test_local_client_writes_ahead(tmp_path: Path) -> None:
    """rechunk's own embedded folders use write-ahead logging (10x faster writes), and
    reopen with every point."""
    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    written = _fill(store)
    c.close()
    import sqlite3

    (storage,) = (tmp_path / "q").rglob("storage.sqlite")
    with sqlite3.connect(storage) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    assert sum(map(len, store.get_points_many(sorted(store.doc_ids())).values())) == len(written)
    c.close()


def test_local_client_holds_loaded_vectors_as_float32_with_room(tmp_path: Path) -> None:
    """qdrant-client loads a folder's vectors as float64 in an array of exactly the stored
    points, and without the normalisation a cosine collection gives them as they are
    written; ``local_client`` holds them as float32 unit vectors with room, so reads match
    what they were before the reopen and the next few writes copy nothing."""
    from rechunk.adapters.qdrant import _local_collection

    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    written = _fill(store)
    keys = [p.input_key for _, p in written]
    before = store.get_vectors(keys, MODEL)
    hits = store.search(unit(0), k=3)
    c.close()
    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    array = _local_collection(c, "docs").vectors[""]
    assert array.dtype == np.float32 and array.shape[0] > len(written)
    after = store.get_vectors(keys, MODEL)
    for key in keys:  # the unit vectors Qdrant made as it wrote (local mode loads the raw ones)
        assert after[key].dtype == np.float32
        np.testing.assert_allclose(after[key], before[key], rtol=0, atol=1e-7)
    again = store.search(unit(0), k=3)
    assert [point for point, _ in again] == [point for point, _ in hits]
    assert [score for _, score in again] == pytest.approx([score for _, score in hits], abs=1e-6)
    store.write([PointWrite(new_id(), payload(5, doc_id="c.md"), unit(5))])
    assert _local_collection(c, "docs").vectors[""] is array  # written into the room
    assert store.search(unit(5), k=1)[0][0].payload.doc_id == "c.md"
    c.close()


def test_local_client_loads_what_qdrant_client_loads(tmp_path: Path) -> None:
    """A folder of another tool's collections (named dense vectors of two distances, a
    sparse vector, a multivector, a point without one of its vectors, a re-written point)
    opens through ``local_client`` with the same points, payloads and search results as
    through a plain ``QdrantClient``; its dense vectors as float32."""
    folder = tmp_path / "q"
    writer = QdrantClient(path=str(folder))
    writer.create_collection(
        "mixed",
        vectors_config={
            "cos": models.VectorParams(size=4, distance=models.Distance.COSINE),
            "dot": models.VectorParams(size=4, distance=models.Distance.DOT),
            "multi": models.VectorParams(
                size=2,
                distance=models.Distance.DOT,
                multivector_config=models.MultiVectorConfig(
                    comparator=models.MultiVectorComparator.MAX_SIM
                ),
            ),
        },
        sparse_vectors_config={"sparse": models.SparseVectorParams()},
    )
    rng = np.random.default_rng(7)
    points = [
        models.PointStruct(
            id=i,
            vector={
                "cos": (rng.random(4) * 3).tolist(),
                "dot": (rng.random(4) * 3).tolist(),
                "multi": rng.random((2, 2)).tolist(),
                "sparse": models.SparseVector(indices=[i, i + 5], values=[0.5, 1.5]),
            },
            payload={"n": i, "tags": ["a", str(i)]},
        )
        for i in range(12)
    ]
    points.append(models.PointStruct(id=12, vector={"dot": [1.0, 0.0, 2.0, 0.0]}, payload={}))
    writer.upsert("mixed", points)
    writer.upsert("mixed", [models.PointStruct(id=3, vector=points[4].vector, payload={"n": 33})])
    writer.create_collection("plain", vectors_config=models.VectorParams(size=4, distance="Dot"))
    writer.upsert("plain", [models.PointStruct(id=1, vector=[0.5, 1, 2, 4], payload={"k": 1})])
    writer.close()

    def read(client: QdrantClient) -> list[Any]:
        queries: list[Any] = [
            ("mixed", [0.3, 0.1, 0.9, 0.2], "cos"),
            ("mixed", [0.3, 0.1, 0.9, 0.2], "dot"),
            ("mixed", [[0.2, 0.8], [0.5, 0.5]], "multi"),
            ("mixed", models.SparseVector(indices=[3, 8], values=[1.0, 1.0]), "sparse"),
            ("plain", [1.0, 1.0, 1.0, 1.0], None),
        ]
        out: list[Any] = []
        for name, query, using in queries:
            hits = client.query_points(name, query=query, using=using, limit=20).points
            out.append([(h.id, h.score, h.payload) for h in hits])
        for name in ("mixed", "plain"):
            records, _ = client.scroll(name, limit=100, with_vectors=True)
            out.append({r.id: (r.payload, r.vector) for r in records})
        return out

    plain = QdrantClient(path=str(folder))
    expected = read(plain)
    plain.close()
    ours = local_client(folder)
    from rechunk.adapters.qdrant import _local_collection

    for name in ("cos", "dot"):
        assert _local_collection(ours, "mixed").vectors[name].dtype == np.float32
    got = read(ours)
    ours.close()
    for hits, want in zip(got[:5], expected[:5]):  # the same hits, scores and payloads
        assert [(i, p) for i, _, p in hits] == [(i, p) for i, _, p in want]
        assert [score for _, score, _ in hits] == pytest.approx([s for _, s, _ in want], rel=1e-6)
    for records, want in zip(got[5:], expected[5:]):  # the same points, vectors to float32
        assert records.keys() == want.keys() and len(records) in (1, 13)
        for point_id, (point_payload, vector) in records.items():
            assert point_payload == want[point_id][0]
            wanted = want[point_id][1]
            if not isinstance(vector, dict):
                vector, wanted = {"": vector}, {"": wanted}
            assert vector.keys() == wanted.keys()
            for name, values in vector.items():
                if isinstance(values, models.SparseVector):
                    assert values == wanted[name]
                else:
                    assert np.allclose(values, wanted[name], rtol=1e-6, atol=1e-7)
    # the folder is read, never rewritten
    again = QdrantClient(path=str(folder))
    (loaded,) = again.retrieve("plain", [1], with_vectors=True)
    again.close()
    assert loaded.vector == [0.5, 1, 2, 4]


def test_lean_load_hands_over_dense_vectors_as_float32(tmp_path: Path) -> None:
    """Inside ``_lean_load``, qdrant-client's loader gives each point's dense vectors as
    float32 arrays (not lists of Python floats, which local mode kept until the last
    point was read), and the rest of the point as it was stored."""
    from qdrant_client.local.persistence import CollectionPersistence

    from rechunk.adapters.qdrant import _lean_load

    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    written = {point_id: p for point_id, p in _fill(store)}
    c.close()
    (storage,) = (tmp_path / "q").rglob("storage.sqlite")
    loader = CollectionPersistence.load
    plain = {str(p.id): p for p in CollectionPersistence(str(storage.parent)).load()}
    with _lean_load():
        lean = {str(p.id): p for p in CollectionPersistence(str(storage.parent)).load()}
    assert set(lean) == set(plain) == set(written)
    for point_id, point in lean.items():
        assert set(point.vector) == {""} and point.vector[""].dtype == np.float32
        assert point.vector[""].tolist() == pytest.approx(plain[point_id].vector, abs=1e-7)
        assert point.payload == plain[point_id].payload
    assert CollectionPersistence.load is loader


def test_local_client_leaves_the_loader_and_the_collector_as_they_were(tmp_path: Path) -> None:
    """``local_client`` changes qdrant-client's folder loader and pauses Python's garbage
    collector only while it loads (no collection runs meanwhile); after it, also after a
    failed open, both are as before, and a collector the process turned off stays off."""
    import gc

    from qdrant_client.local.persistence import CollectionPersistence

    loader = CollectionPersistence.load
    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    fill(store, {"tags": ["x"]})
    store.write(
        [PointWrite(new_id(), payload(i, doc_id=f"d{i}.md"), unit(i % DIM)) for i in range(300)]
    )
    c.close()
    runs: list[str] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        frame = sys._getframe()
        while frame is not None and frame.f_code.co_name != "load_vectors":
            frame = frame.f_back  # type: ignore[assignment]
        if phase == "start" and frame is not None:  # while local mode loads the points
            runs.append(phase)

    gc.callbacks.append(seen)
    try:
        c = local_client(tmp_path / "q")
    finally:
        gc.callbacks.remove(seen)
    assert runs == [] and gc.isenabled()
    assert CollectionPersistence.load is loader
    with pytest.raises(StoreUnavailableError):
        local_client(tmp_path / "q")  # locked by the client still open
    assert gc.isenabled() and CollectionPersistence.load is loader
    c.close()
    gc.disable()
    try:
        local_client(tmp_path / "q").close()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_local_client_grows_vectors_in_place_unless_referred_to(tmp_path: Path) -> None:
    """Writes past the room grow the vector array in place (no copy of the stored rows);
    an array something else refers to (here a view a caller holds) is copied instead,
    and that view keeps the values it had. Every point stays readable and searchable,
    and after a reopen too."""
    from rechunk.adapters.qdrant import _local_collection

    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    store.write([PointWrite(new_id(), payload(0, doc_id="d0.md"), unit(0))])
    collection = _local_collection(c, "docs")
    array = id(collection.vectors[""])  # not a weakref: numpy will not resize one with it
    room = collection.vectors[""].shape[0]
    batch = [
        PointWrite(new_id(), payload(i, doc_id=f"d{i}.md"), unit(i % DIM))
        for i in range(1, room + 50)
    ]
    store.write(batch)
    assert id(collection.vectors[""]) == array  # the same array, resized
    assert collection.vectors[""].shape[0] > room + 50
    held = collection.vectors[""][:3]
    kept = held.copy()
    room = collection.vectors[""].shape[0]
    more = [
        PointWrite(new_id(), payload(i, doc_id=f"e{i}.md"), unit(i % DIM))
        for i in range(room + 50)
    ]
    store.write(more)
    assert id(collection.vectors[""]) != array  # copied: a view referred to it
    np.testing.assert_array_equal(held, kept)
    del held
    written = len(batch) + len(more) + 1
    assert len(store.doc_ids()) == written
    assert store.search(unit(1), k=1)[0][1] == pytest.approx(1.0, abs=1e-6)
    keys = [w.payload.input_key for w in batch[:3] + more[-3:]]
    assert set(store.get_vectors(keys, MODEL)) == set(keys)
    c.close()
    c = local_client(tmp_path / "q")
    assert len(QdrantStore(c, "docs").doc_ids()) == written
    c.close()


def test_local_client_appends_deleted_flags_into_room(tmp_path: Path) -> None:
    """qdrant-client adds each point's "deleted" flags with ``np.append``, a copy of the
    whole array per point (what made an initial sync grow faster than the collection);
    under ``local_client`` the flags are appended into room behind them, and hold what
    numpy's append would have made."""
    from rechunk.adapters.qdrant import _local_collection

    c = local_client(tmp_path / "q")
    store = QdrantStore(c, "docs")
    store.ensure_collection(DIM)
    collection = _local_collection(c, "docs")
    buffers = set()
    ids = [new_id() for _ in range(40)]
    for n, point_id in enumerate(ids):
        store.write([PointWrite(point_id, payload(n, doc_id=f"d{n}.md"), unit(n % 8))])
        for flags in (collection.deleted, *collection.deleted_per_vector.values()):
            buffers.add(flags.__array_interface__["data"][0])
            assert flags.tolist() == [0] * (n + 1) and flags.dtype == np.int64
    assert len(buffers) <= 4  # at most a copy per array (to numpy's dtype), none per point
    store.delete(ids[:1])
    assert collection.deleted.tolist() == [1] + [0] * 39
    assert store.doc_ids() == {f"d{n}.md" for n in range(1, 40)}
    hits = store.search(unit(0), k=40)
    assert "d0.md" not in {point.payload.doc_id for point, _ in hits} and len(hits) == 39
    c.close()
    c = local_client(tmp_path / "q")  # reloaded from disk: the same points
    assert QdrantStore(c, "docs").doc_ids() == {f"d{n}.md" for n in range(1, 40)}
    c.close()


def test_embedded_reads_hand_out_copies(client: QdrantClient) -> None:
    """What a read returns shares nothing with the collection embedded Qdrant holds."""
    store = QdrantStore(client, "docs")
    _fill(store)
    (first, *_) = store.get_points("a.md")
    first.payload.metadata["tags"].append("changed by the caller")
    assert store.get_points("a.md")[0].payload.metadata["tags"] == ["x", "y"]
    key = first.payload.input_key
    vector = store.get_vectors([key], MODEL)[key]
    vector[:] = 0
    assert np.linalg.norm(store.get_vectors([key], MODEL)[key]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("opened", ["local_client", "plain"])
def test_embedded_collection_drops_deleted_points_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: str
) -> None:
    """Local mode keeps a deleted point's payload and vector in memory; the store drops
    them once they outnumber the live points (a long-running watcher's memory stays
    flat), and every read and search answers as a freshly opened folder does."""
    import rechunk.adapters.qdrant as adapter

    monkeypatch.setattr(adapter, "_COMPACT_MIN", 8)
    folder = tmp_path / "q"
    client = local_client(folder) if opened == "local_client" else QdrantClient(path=str(folder))
    store = QdrantStore(client, "docs")
    store.ensure_collection(DIM)
    live: dict[str, list[str]] = {}
    sizes = []
    for n in range(60):
        doc = f"d{n % 5}.md"
        writes = [PointWrite(new_id(), payload(i, doc_id=doc, revision=f"r{n}"), unit(7 * n + i))
                  for i in range(3)]
        store.get_points(doc)  # the index is current before each delete
        store.write(writes)
        store.delete(live.get(doc, []))
        live[doc] = [w.id for w in writes]
        sizes.append(len(adapter._local_collection(client, "docs").payload))
    assert max(sizes) <= 2 * 15 + 8 and sizes[-1] < 60 * 3  # live points: 15
    queries = [unit(i) for i in range(200, 210)]

    def answers(s: QdrantStore) -> list[Any]:
        hits = [[(p.id, round(score, 5)) for p, score in s.search(q, 7)] for q in queries]
        points = {d: sorted(p.id for p in s.get_points(d)) for d in sorted(live)}
        keys = [p.payload.input_key for d in sorted(live) for p in s.get_points(d)]
        vectors = s.get_vectors(keys, MODEL)
        return [hits, points, sorted(s.doc_ids()), vectors]

    got = answers(store)
    assert got[1] == {d: sorted(ids) for d, ids in live.items()}
    client.close()
    again = QdrantClient(path=str(folder))
    want = answers(QdrantStore(again, "docs"))
    again.close()
    assert got[:3] == want[:3]
    assert got[3].keys() == want[3].keys() and len(got[3]) == 15
    for key, vector in got[3].items():
        assert np.allclose(vector, want[3][key], atol=1e-6)


@pytest.mark.filterwarnings("ignore::rechunk.adapters._layout.ForeignPointsWarning")
@pytest.mark.parametrize("distance", ["cosine", "dot", "euclid"])
@pytest.mark.parametrize("opened", ["memory", "local_client", "internals_unknown"])
def test_search_many_answers_as_search_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: str, distance: Any
) -> None:
    """``search_many`` gives, for each vector, what ``search`` gives: the same points in
    the same order with the same scores, superseded, deleted and foreign points left out
    (one pass over embedded Qdrant's rows, or its batch request where the internals are
    not as the adapter knows them)."""
    import rechunk.adapters.qdrant as adapter

    if opened == "internals_unknown":
        monkeypatch.setattr(adapter, "_local_collection", lambda client, name: None)
    client = local_client(tmp_path / "q") if opened == "local_client" else QdrantClient(":memory:")
    store = QdrantStore(client, "docs", batch_size=4)
    store.ensure_collection(DIM, distance)
    rng = np.random.default_rng(3)
    writes = [
        PointWrite(new_id(), payload(i, doc_id=f"d{i % 6}.md"), (rng.normal(size=DIM) * 2).astype(np.float32))
        for i in range(40)
    ]
    store.write(writes)
    store.supersede([w.id for w in writes[:12]])  # the nearest of many queries, below
    store.delete([w.id for w in writes[12:16]])
    foreign = new_id()
    client.upsert("docs", [models.PointStruct(id=foreign, vector=[1.0, 0.0, 0.0, 0.0], payload={"x": 1})])
    queries = [w.vector for w in writes[:16]] + [rng.normal(size=DIM).astype(np.float32) for _ in range(9)]
    assert all(q is not None for q in queries)
    for k in (1, 3, 20, 100):
        many = store.search_many(queries, k)  # type: ignore[arg-type]
        one = [store.search(q, k) for q in queries]  # type: ignore[arg-type]
        assert [[p.id for p, _ in hits] for hits in many] == [[p.id for p, _ in hits] for hits in one]
        for got, want in zip(many, one):
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5, abs=1e-6)
            assert [p for p, _ in got] == [p for p, _ in want]
        superseded_or_gone = {w.id for w in writes[:16]} | {foreign}
        assert not any(p.id in superseded_or_gone for hits in many for p, _ in hits)
    assert store.search_many([], 5) == []
    with pytest.raises(ConfigError):
        store.search_many(queries, 0)  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        store.search_many([np.ones(DIM + 1, dtype=np.float32)], 5)
    client.close()
