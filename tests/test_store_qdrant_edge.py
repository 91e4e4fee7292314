"""QdrantEdgeStore: the store contract on Qdrant Edge, the Qdrant store's payload layout,
the payload indexes, conditional writes, the folder lock (a second process is told who
holds it), a process killed mid-write, aliases and generations, Edge's optimizer,
concurrent writers, and every command of the CLI on ``qdrant-edge:`` (the move from
embedded Qdrant and from Chroma re-embedding nothing)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from cli_helpers import run_json
from concurrency_helpers import version_text
from store_contract import (
    DIM,
    MODEL,
    NoIO,
    StoreContract,
    StoreFactory,
    fill,
    new_id,
    payload,
    store_factory,
    unit,
)

from rechunk import Document, policy_for, sync
from rechunk.errors import ConfigError, StoreError, StoreUnavailableError, TransientError
from rechunk.sync.store import PointWrite, StoredPoint

qe = pytest.importorskip("qdrant_edge")

import rechunk.adapters.qdrant_edge as edge  # noqa: E402
from rechunk.adapters._layout import ForeignPointsWarning  # noqa: E402
from rechunk.adapters.qdrant_edge import QdrantEdgeStore, edge_client  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "examples" / "docs"
#: Edge syncs its files to disk dozens of times for each collection it creates (about
#: 0.3 s on this machine's disk); the contract makes some 170 collections, so they live
#: on a memory file system where there is one (the same Edge, the same files)
SHM = Path("/dev/shm")


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A fresh folder for a store, on /dev/shm where it can be written."""
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        made = SHM / f"rechunk-edge-{uuid.uuid4().hex[:12]}"
        yield made / "edge"
        shutil.rmtree(made, ignore_errors=True)
    else:
        yield tmp_path / "edge"


class TestQdrantEdge(StoreContract):
    def add_foreign(self, store: Any, count: int) -> None:
        """LangChain documents, written straight to the shard."""
        shard = store.client.shard(store.client.resolve(store.collection))
        name = "" if store.layout == "langchain" else "text-dense"
        points = [
            qe.Point(
                new_id(),
                unit(i).tolist() if not name else {name: unit(i).tolist()},
                {"page_content": "theirs", "metadata": {"source": f"t{i}"}},
            )
            for i in range(count)
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
    @pytest.fixture
    def make_store(self, folder: Path) -> Iterator[StoreFactory]:
        client = edge_client(folder)
        yield store_factory(QdrantEdgeStore, client)
        client.close()


@pytest.fixture
def client(folder: Path) -> Iterator[edge.EdgeClient]:
    with edge_client(folder) as opened:
        yield opened


def raw(client: edge.EdgeClient, collection: str, ids: Sequence[str]) -> dict[str, Any]:
    """The payloads Edge holds for ``ids``, read straight from the shard."""
    shard = client.shard(client.resolve(collection))
    assert shard is not None
    return {str(r.id): r.payload for r in shard.retrieve(list(ids), True, False)}


class HashEmbedder:
    """A real deterministic embedder: each vector comes from the sha256 of its text."""

    model_id = "hash/edge-v1"
    dimension = 16
    max_input_tokens = 256
    special_tokens = 2

    def __init__(self) -> None:
        self.calls = 0
        self.inputs = 0

    @property
    def loaded(self) -> bool:
        return self.calls > 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.inputs += len(texts)
        rows = [
            np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big"))
            .standard_normal(self.dimension)
            for t in texts
        ]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimension)


# -- construction --------------------------------------------------------------------------


def test_constructor_does_no_io() -> None:
    store = QdrantEdgeStore(NoIO(), "docs", "llamaindex")  # type: ignore[arg-type]
    assert (store.collection, store.layout) == ("docs", "llamaindex")
    assert repr(store) == "QdrantEdgeStore(collection='docs', layout='llamaindex')"


@pytest.mark.parametrize("name", ["a/b", "..", ".hidden", "a b", "x" * 201, "über"])
def test_collection_names_must_be_folder_names(name: str) -> None:
    with pytest.raises(ConfigError, match="Qdrant Edge collection names"):
        QdrantEdgeStore(NoIO(), name)  # type: ignore[arg-type]


def test_a_folder_of_another_store_is_refused(tmp_path: Path) -> None:
    (tmp_path / "qdrant").mkdir()
    (tmp_path / "qdrant" / "meta.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a Qdrant Edge store folder"):
        edge_client(tmp_path / "qdrant")
    with pytest.raises(StoreError, match="no store at"):
        edge_client(tmp_path / "nothing", create=False)
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize("marker", ["[]", "null", '"x"', "{}"])
def test_a_damaged_alias_file_is_a_store_error(tmp_path: Path, marker: str) -> None:
    """edge.json holding JSON that is not an object was an AttributeError."""
    edge_client(tmp_path / "e").close()
    (tmp_path / "e" / "edge.json").write_text(marker)
    with pytest.raises(StoreError, match="is not rechunk's Qdrant Edge file"):
        edge_client(tmp_path / "e", create=False)


def test_a_folder_that_cannot_be_locked_is_a_store_error(tmp_path: Path) -> None:
    """A read-only copy (the lock file cannot be opened for writing) was a bare OSError."""
    edge_client(tmp_path / "e").close()
    (tmp_path / "e" / "edge.lock").unlink()
    (tmp_path / "e" / "edge.lock").mkdir()  # opened for writing, it fails as read-only does
    with pytest.raises(StoreError, match=r"cannot open the Qdrant Edge folder .*read-only copy"):
        edge_client(tmp_path / "e", create=False)


def test_the_extra_is_named_and_nothing_else_is_imported() -> None:
    """Without qdrant-edge-py the store and its URI name the extra; the store imports
    neither qdrant-client nor a framework."""
    code = (
        "import sys\n"
        "import rechunk.adapters.qdrant_edge\n"
        "bad = [m for m in ('qdrant_client', 'chromadb', 'langchain_core', 'llama_index')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
        "del sys.modules['rechunk.adapters.qdrant_edge']\n"
        "sys.modules['qdrant_edge'] = None\n"
        "from rechunk.errors import MissingDependencyError\n"
        "from rechunk.adapters.uri import open_store\n"
        "for attempt in (lambda: __import__('rechunk.adapters.qdrant_edge'),\n"
        "                lambda: open_store('qdrant-edge:x', 'docs')):\n"
        "    try:\n"
        "        attempt()\n"
        "    except MissingDependencyError as exc:\n"
        "        assert exc.extra == 'edge', exc\n"
        "        print(exc)\n"
        "    else:\n"
        "        raise SystemExit('no error')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("rechunk[edge]") == 2


# -- the layout is the Qdrant store's ------------------------------------------------------


@pytest.mark.parametrize("layout", ["langchain", "llamaindex"])
def test_points_are_laid_out_as_the_qdrant_store_lays_them_out(
    client: edge.EdgeClient, layout: str
) -> None:
    """The same writes give byte-equal payloads and the same points read back, so that
    `rechunk status` and `query` read an Edge collection as they read a Qdrant one."""
    pytest.importorskip("qdrant_client")
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore

    qdrant = QdrantClient(":memory:")
    stores = [QdrantEdgeStore(client, "docs", layout), QdrantStore(qdrant, "docs", layout)]  # type: ignore[arg-type]
    chain = [new_id() for _ in range(3)]
    points = [
        PointWrite(
            chain[i],
            payload(i, version=i or None, metadata={"tags": ["x", "y"], "deep": {"n": i}},
                    previous_id=chain[i - 1] if i else None,
                    next_id=chain[i + 1] if i < 2 else None),
            unit(i),
        )
        for i in range(3)
    ]  # fmt: skip
    for store in stores:
        store.ensure_collection(DIM)
        store.write(points)
    held = raw(client, "docs", chain)
    theirs = {str(r.id): r.payload for r in qdrant.retrieve("docs", chain, with_payload=True)}
    assert held == theirs
    edge_store, qdrant_store = stores
    assert edge_store.get_points("a.md") == qdrant_store.get_points("a.md")
    assert [p for p, _ in edge_store.search(unit(1), 2)] == [
        p for p, _ in qdrant_store.search(unit(1), 2)
    ]
    keys = [p.payload.input_key for p in points]
    for key, vector in edge_store.get_vectors(keys, MODEL).items():
        np.testing.assert_allclose(vector, qdrant_store.get_vectors([key], MODEL)[key], atol=1e-6)
    qdrant.close()


@pytest.mark.parametrize("layout", ["langchain", "llamaindex"])
def test_every_filtered_field_has_a_keyword_index(client: edge.EdgeClient, layout: str) -> None:
    prefix = "metadata." if layout == "langchain" else ""
    store = QdrantEdgeStore(client, "docs", layout)  # type: ignore[arg-type]
    store.ensure_collection(DIM)
    shard = client.shard("docs")
    assert shard is not None
    schema = shard.info().payload_schema
    assert {f"{prefix}{f}" for f in ("doc_id", "input_key", "model_id")} <= set(schema)
    assert all(schema[f].data_type == qe.PayloadSchemaType.Keyword for f in schema)
    # doc_id's is the tenant index: the optimizer keeps a document's points together
    assert [f for f in schema if schema[f].params.is_tenant] == [f"{prefix}doc_id"]


def test_doc_ids_from_the_index_leave_out_deleted_and_foreign_points(
    client: edge.EdgeClient,
) -> None:
    """doc_ids come from the doc_id index's values while every point has an input_key: a
    document whose points were deleted (before or after Edge's optimizer) is not named;
    once another tool's point (a doc_id, no input_key) is there, its doc_id is not named
    either."""
    store = QdrantEdgeStore(client, "docs")
    store.ensure_collection(DIM)
    a, b, c = new_id(), new_id(), new_id()
    store.write([PointWrite(a, payload(0), unit(0)),
                 PointWrite(b, payload(0, doc_id="b.md"), unit(1))])  # fmt: skip
    shard = client.shard("docs")
    assert shard is not None
    shard.optimize()
    store.write([PointWrite(c, payload(0, doc_id="c.md"), unit(2))])
    assert store.doc_ids() == {"a.md", "b.md", "c.md"}
    store.delete([b, c])
    assert store.doc_ids() == {"a.md"}
    foreign = {"page_content": "?", "metadata": {"doc_id": "theirs.md"}}
    shard.update(qe.UpdateOperation.upsert_points([qe.Point(new_id(), unit(3).tolist(), foreign)]))
    assert store.doc_ids() == {"a.md"}
    # the foreign point is the nearest, yet a search still finds k of rechunk's own
    with pytest.warns(ForeignPointsWarning):
        assert [p.id for p, _ in store.search(unit(3), 1)] == [a]


def test_a_model_whose_points_were_all_deleted_no_longer_counts(
    client: edge.EdgeClient,
) -> None:
    """collection_info's model_ids come from the model_id index: a model is named while a
    point of it is stored, before and after Edge's optimizer, and not once its last point
    is deleted (an exact facet named it with a count of 0)."""
    store = QdrantEdgeStore(client, "docs")
    store.ensure_collection(DIM)
    ours, theirs = new_id(), new_id()
    store.write([PointWrite(ours, payload(0), unit(0)),
                 PointWrite(theirs, payload(0, doc_id="b.md", model_id="other/v1"), unit(1))])  # fmt: skip
    assert store.collection_info().model_ids == {MODEL, "other/v1"}  # type: ignore[union-attr]
    store.delete([theirs])
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    store.write([PointWrite(theirs, payload(0, doc_id="b.md", model_id="other/v1"), unit(1))])
    shard = client.shard("docs")
    assert shard is not None
    shard.optimize()
    assert store.collection_info().model_ids == {MODEL, "other/v1"}  # type: ignore[union-attr]
    store.delete([theirs])
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]


class _CountingShard:
    """The real shard, counting the facets asked of it (every call goes through)."""

    def __init__(self, shard: Any) -> None:
        self._shard = shard
        self.facets = 0

    def facet(self, request: Any) -> Any:
        self.facets += 1
        return self._shard.facet(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shard, name)


def test_model_ids_are_read_once_per_open_shard_and_kept_current(
    client: edge.EdgeClient,
) -> None:
    """The model_id index is read once while the shard is open (its facet cost 28-80 ms
    at 1.8 M points, several times in a ``rechunk sync FILE``); this client's own writes
    and deletes keep what was read current: another model written (unconditionally, or
    by a versioned write), a model whose last point was deleted or written over, all
    through another store object on the same client."""
    store = QdrantEdgeStore(client, "docs")
    store.ensure_collection(DIM)
    counting = _CountingShard(client.shard("docs"))
    client._shards["docs"] = counting  # type: ignore[assignment]
    other = QdrantEdgeStore(client, "docs")
    ours, theirs = new_id(), new_id()
    store.write([PointWrite(ours, payload(0), unit(0))])
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    other.write([PointWrite(theirs, payload(0, doc_id="b.md", model_id="other/v1"), unit(1))])
    assert store.collection_info().model_ids == {MODEL, "other/v1"}  # type: ignore[union-attr]
    other.delete([theirs])
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    other.write([PointWrite(theirs, payload(0, doc_id="b.md", model_id="other/v1"), unit(1))],
                version=3)  # fmt: skip
    assert store.collection_info().model_ids == {MODEL, "other/v1"}  # type: ignore[union-attr]
    # the other model's one point written over by ours: that model is gone
    other.write([PointWrite(theirs, payload(0, doc_id="b.md"), unit(1))])
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    # a versioned write the stored version refuses stores nothing, so names no model
    store.write([PointWrite(ours, payload(0, version=9), unit(0))], version=9)
    store.write([PointWrite(ours, payload(0, model_id="old/v0"), unit(0))], version=1)
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    assert counting.facets == 0  # read once, by ensure_collection, before the count began
    # and a sync of another model is still refused
    other.write([PointWrite(theirs, payload(0, doc_id="b.md", model_id="other/v1"), unit(1))])
    embedder = HashEmbedder()
    embedder.model_id, embedder.dimension = MODEL, DIM
    with pytest.raises(StoreError, match=r"written by another model \(other/v1\)"):
        sync([Document("c.md", "text")], store, chunker=policy_for(embedder), embedder=embedder)


class _FailingShard(_CountingShard):
    """The real shard, whose ``update`` fails after ``updates`` of them went through."""

    def __init__(self, shard: Any, updates: int) -> None:
        super().__init__(shard)
        self.updates = updates

    def update(self, operation: Any) -> None:
        if self.updates == 0:
            raise RuntimeError("disk full")
        self.updates -= 1
        self._shard.update(operation)


def test_a_write_that_fails_part_way_still_names_its_model(client: edge.EdgeClient) -> None:
    """Its first batch was stored: that model counts, though the write raised."""
    store = QdrantEdgeStore(client, "docs", batch_size=1)
    store.ensure_collection(DIM)
    store.write([PointWrite(new_id(), payload(0), unit(0))])
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    client._shards["docs"] = _FailingShard(client.shard("docs"), 1)  # type: ignore[assignment]
    with pytest.raises(StoreError, match="disk full"):
        store.write([PointWrite(new_id(), payload(i, doc_id="b.md", model_id="other/v1"), unit(i))
                     for i in range(2)])  # fmt: skip
    assert store.collection_info().model_ids == {MODEL, "other/v1"}  # type: ignore[union-attr]


def test_model_ids_written_by_another_process_are_read(folder: Path) -> None:
    """What the client keeps lives while its shard is open: another process's writes,
    made while the folder was closed, are read when it is opened again."""
    with edge_client(folder) as client:
        store = QdrantEdgeStore(client, "docs")
        store.ensure_collection(DIM)
        store.write([PointWrite(new_id(), payload(0), unit(0))])
        assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    script = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from store_contract import new_id, payload, unit\n"
        "from rechunk.adapters.qdrant_edge import QdrantEdgeStore, edge_client\n"
        "from rechunk.sync.store import PointWrite\n"
        "with edge_client(sys.argv[1]) as client:\n"
        "    QdrantEdgeStore(client, 'docs').write(\n"
        "        [PointWrite(new_id(), payload(1, model_id='other/v1'), unit(1))])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder), str(ROOT / "tests")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with edge_client(folder) as client:
        info = QdrantEdgeStore(client, "docs").collection_info()
        assert info is not None and info.model_ids == {MODEL, "other/v1"}


def test_a_shard_made_without_indexes_is_read_then_given_them(client: edge.EdgeClient) -> None:
    """A collection rechunk did not create (or whose creation stopped before its indexes):
    reads scan it, and ensure_collection adds the indexes."""
    qe.EdgeShard.create(
        str(client.path / "collections" / "foreign"),
        qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)),
    ).close()
    store = QdrantEdgeStore(client, "foreign")
    assert store.collection_info() is not None
    shard = client.shard("foreign")
    assert shard is not None and shard.info().payload_schema == {}
    ids = [new_id(), new_id()]
    store.write([PointWrite(ids[0], payload(0), unit(0)),
                 PointWrite(ids[1], payload(0, doc_id="b.md"), unit(1))])  # fmt: skip
    assert store.doc_ids() == {"a.md", "b.md"}  # read without an index
    assert store.collection_info().model_ids == {MODEL}  # type: ignore[union-attr]
    store.ensure_collection(DIM)
    assert {"metadata.doc_id", "metadata.input_key"} <= set(shard.info().payload_schema)
    assert store.doc_ids() == {"a.md", "b.md"}  # and now through it
    assert [p.id for p in store.get_points("b.md")] == [ids[1]]


# -- conditional writes ----------------------------------------------------------------------


def test_writes_and_deletes_of_an_older_version_leave_a_newer_point(
    client: edge.EdgeClient,
) -> None:
    store = QdrantEdgeStore(client, "docs")
    store.ensure_collection(DIM)
    newer, unversioned = new_id(), new_id()
    store.write([PointWrite(newer, payload(0, version=5), unit(0)),
                 PointWrite(unversioned, payload(1), unit(1))])  # fmt: skip
    before = store.get_points("a.md")
    added = new_id()
    store.write(
        [
            PointWrite(newer, payload(0, version=4, revision="old"), unit(2)),  # refused
            PointWrite(unversioned, payload(1, version=4, revision="v4"), unit(3)),  # taken
            PointWrite(added, payload(2, version=4), unit(4)),  # a new point is written
        ],
        version=4,
    )
    store.write([PointWrite(newer, payload(0, version=4, ordinal=9))], version=4)  # skipped
    got = {p.id: p.payload for p in store.get_points("a.md")}
    assert got[newer] == before[0].payload
    assert got[unversioned].revision == "v4" and got[added].version == 4
    vectors = store.get_vectors([payload(0).input_key], MODEL)
    np.testing.assert_allclose(vectors[payload(0).input_key], unit(0), atol=1e-6)
    store.delete([newer, added], version=4)  # the newer point stays, the version-4 one goes
    assert {p.id for p in store.get_points("a.md")} == {newer, unversioned}
    store.write([PointWrite(newer, payload(0, version=6, revision="v6"))], version=6)
    assert store.get_points("a.md")[0].payload.revision == "v6"
    store.delete([newer], version=6)
    assert [p.id for p in store.get_points("a.md")] == [unversioned]


# -- the folder lock, and a process killed mid-write ------------------------------------------

HOLDER = """
import sys, time
from rechunk.adapters.qdrant_edge import QdrantEdgeStore, edge_client
from rechunk.sync.store import PointPayload, PointWrite
import numpy as np
client = edge_client(sys.argv[1])
store = QdrantEdgeStore(client, "docs")
store.ensure_collection(4)
for i in range(int(sys.argv[2])):
    payload = PointPayload("held.md", "r", "p", f"k{i}", "m", i, 0, 1, 1, f"text {i}")
    store.write([PointWrite(f"00000000-0000-4000-8000-{i:012d}", payload,
                            np.array([1, 0, 0, i], dtype=np.float32))])
print("HELD", flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Any]:
    """Start a process that opens a store folder, writes N points and then holds it."""
    started: list[subprocess.Popen[str]] = []

    def start(path: Path, points: int = 3) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path), str(points)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "HELD\n", proc.stderr.read() if proc.stderr else line
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def test_a_second_process_is_told_which_process_holds_the_folder(
    tmp_path: Path, holder: Any
) -> None:
    path = tmp_path / "edge"
    proc = holder(path)
    with pytest.raises(StoreUnavailableError, match="store is in use by another process") as exc:
        edge_client(path)
    assert f"process {proc.pid} (python -c)" in str(exc.value)
    assert isinstance(exc.value, TransientError)
    done = subprocess.run(
        [sys.executable, "-m", "rechunk.cli", "status", "--store", f"qdrant-edge:{path}",
         "--collection", "docs"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3
    assert "store is in use" in done.stderr and f"process {proc.pid}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_killed_writer_frees_the_folder_and_loses_nothing_it_wrote(
    tmp_path: Path, holder: Any
) -> None:
    """SIGKILL while the folder is open, nothing flushed or closed: the lock goes with the
    process, and Edge's write-ahead log gives back every write that returned."""
    path = tmp_path / "edge"
    proc = holder(path, points=40)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with edge_client(path) as client:
        store = QdrantEdgeStore(client, "docs")
        points = store.get_points("held.md")
        assert [p.payload.ordinal for p in points] == list(range(40))
        assert store.collection_info().points == 40  # type: ignore[union-attr]


def test_one_process_opens_a_folder_once(folder: Path) -> None:
    first = edge_client(folder)
    with pytest.raises(StoreUnavailableError, match=r"this process \(\d+\), through another") as err:
        edge_client(folder)
    # one advice, not "close that one first" and "wait for that one to end" at once
    assert "close that one first" in str(err.value) and "another process" not in str(err.value)
    assert "wait for" not in str(err.value)
    first.close()
    first.close()  # idempotent
    with pytest.raises(StoreError, match="was closed"):
        QdrantEdgeStore(first, "docs").collection_info()
    with edge_client(folder) as again:
        assert again.collections() == []


def test_a_shard_opened_outside_rechunk_is_store_unavailable(folder: Path) -> None:
    """A process that opened a shard with Edge itself (no folder lock): Edge's own lock on
    the shard's write-ahead log refuses the store, and the store says so in its words."""
    with edge_client(folder) as client:
        QdrantEdgeStore(client, "docs").ensure_collection(DIM)
    shard_dir = folder / "collections" / "docs"
    script = (
        "import sys, time, qdrant_edge as qe\n"
        f"s = qe.EdgeShard.load({str(shard_dir)!r})\n"
        "print('HELD', flush=True)\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "HELD\n"
        busy = pytest.raises(StoreUnavailableError, match="store is in use by another process")
        with edge_client(folder) as client, busy:
            QdrantEdgeStore(client, "docs").get_points("a.md")
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_reopened_folder_holds_what_was_written(folder: Path) -> None:
    with edge_client(folder) as client:
        written = fill(QdrantEdgeStore(client, "docs"), {"tags": ["a"]})
    with edge_client(folder, create=False) as client:
        store = QdrantEdgeStore(client, "docs")
        assert store.get_points("a.md") == [StoredPoint(i, p) for i, p in written[:2]]
        with pytest.raises(StoreError, match="langchain layout, not llamaindex"):
            QdrantEdgeStore(client, "docs", "llamaindex").collection_info()


# -- aliases and generations -----------------------------------------------------------------


def test_reindex_builds_a_generation_and_switches_the_alias(folder: Path) -> None:
    from rechunk.sync.generations import generations, open_live, reindex

    embedder = HashEmbedder()
    docs = [Document(f"d{i}.md", f"# Note {i}\n\nThe sync keeps note {i}.\n") for i in range(5)]
    with edge_client(folder) as client:
        store = QdrantEdgeStore(client, "docs")
        chunker = policy_for(embedder, "recursive")
        live = open_live(store, chunker, embedder.dimension)
        sync(docs, live, chunker=chunker, embedder=embedder)
        first = store.aliases()["docs"]
        assert first.startswith("docs__recursive-") and store.is_alias()
        embedded = embedder.inputs
        result = reindex(docs, store, policy_for(embedder, "fixed"), embedder, drop_old=True)
        assert result.switched and result.dropped == first
        assert embedder.inputs == embedded  # every input reused from the live generation
        assert store.aliases() == {"docs": result.collection}
        assert generations(store) == [result.collection] == store.collections()
        assert store.doc_ids() == {d.doc_id for d in docs}
    marker = json.loads((folder / "edge.json").read_text())
    assert marker["aliases"] == {"docs": result.collection}
    assert not list(folder.glob(".edge.json*"))  # written beside, then renamed over
    with edge_client(folder) as client:
        again = QdrantEdgeStore(client, "docs")
        assert again.aliases() == {"docs": result.collection}
        assert again.collection_info().points == result.sync.chunks["added"]  # type: ignore[union-attr]
        with pytest.raises(StoreError, match="is a collection, not an alias"):
            again.with_collection(result.collection).switch_alias(result.collection)
        with pytest.raises(StoreError, match="no such collection"):
            again.switch_alias("docs__nothing")
        again.with_collection(result.collection).drop_collection()
        assert again.aliases() == {} and again.collections() == []


# -- Edge's optimizer --------------------------------------------------------------------------


def test_the_optimizer_runs_past_its_threshold_and_reads_stay_exact(
    client: edge.EdgeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(edge, "OPTIMIZE_POINTS", 40)
    store = QdrantEdgeStore(client, "docs")
    store.ensure_collection(DIM)
    written = [PointWrite(new_id(), payload(i, doc_id=f"d{i % 7}.md"), unit(i)) for i in range(90)]
    for start in range(0, 90, 30):
        store.write(written[start : start + 30])
    shard = client.shard("docs")
    assert shard is not None
    info = shard.info()
    assert info.points_count == 90 and info.indexed_vectors_count >= 60  # optimized segments
    assert store.doc_ids() == {f"d{i}.md" for i in range(7)}
    assert sum(len(v) for v in store.get_points_many([f"d{i}.md" for i in range(7)]).values()) == 90
    hit, score = store.search(unit(33), 1)[0]
    assert hit.id == written[33].id and score == pytest.approx(1.0, abs=1e-5)
    store.delete([w.id for w in written[:50]])  # deletes and updates in optimized segments
    store.write([PointWrite(written[60].id, payload(60, doc_id="moved.md"))])
    assert store.collection_info().points == 40  # type: ignore[union-attr]
    assert [p.id for p in store.get_points("moved.md")] == [written[60].id]


# -- concurrent writers ------------------------------------------------------------------------


class Unlocked(QdrantEdgeStore):
    """Writers that do not take turns: every write and delete conditional on the version."""

    writer_lock = None  # type: ignore[assignment]


class PlanThenWait(Unlocked):
    """A writer that stops before its first write until every writer has planned."""

    barrier: threading.Barrier

    def write(self, points: Any, **kwargs: Any) -> None:
        if not getattr(self, "_waited", False):
            self._waited = True
            self.barrier.wait(timeout=60)
        super().write(points, **kwargs)


def check_newest(store: Any, doc_id: str, newest: int, embedder: Any) -> None:
    """Exactly the newest version's chunks: none missing, none extra, no other revision."""
    from rechunk.sync.planning import _plan

    chunker = policy_for(embedder, "recursive")
    doc = Document(doc_id, version_text(newest), version=newest)
    expected = set(_plan(doc, chunker.chunk(doc.text), chunker, embedder.model_id, []).ids)
    points = store.get_points(doc_id)
    assert {p.payload.version for p in points} == {newest}, doc_id
    assert {p.id for p in points} == expected, doc_id


def test_both_read_before_either_writes(client: edge.EdgeClient) -> None:
    """Versions 3 and 2 both plan against version 1, then write: version 3 stays."""
    embedder = HashEmbedder()
    chunker = policy_for(embedder, "recursive")
    base = Unlocked(client, "docs")
    base.ensure_collection(embedder.dimension)
    sync([Document("d", version_text(1), version=1)], base, chunker=chunker, embedder=embedder)
    for order in ((3, 2), (2, 3)):
        barrier = threading.Barrier(2)
        results: dict[int, Any] = {}

        def writer(version: int, results: dict[int, Any] = results,
                   barrier: threading.Barrier = barrier) -> None:
            store = type("W", (PlanThenWait,), {"barrier": barrier})(client, "docs")
            doc = Document("d", version_text(version), version=version)
            try:
                results[version] = sync([doc], store, chunker=chunker, embedder=embedder)
            except Exception as exc:
                results[version] = exc

        threads = [threading.Thread(target=writer, args=(v,)) for v in order]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not isinstance(results[3], Exception), results[3]
        assert results[3].stale_check == "passed"
        assert not isinstance(results[2], Exception), results[2]
        assert results[2].per_document[0].status in ("changed", "skipped")
        check_newest(base, "d", 3, embedder)
        base.delete([p.id for p in base.get_points("d")])
        sync([Document("d", version_text(1), version=1)], base, chunker=chunker,
             embedder=embedder)


@pytest.mark.parametrize("kind", [QdrantEdgeStore, Unlocked])
def test_threads_sharing_one_store_folder(client: edge.EdgeClient, kind: type[Any]) -> None:
    """After every writer has returned, each document holds exactly its newest version."""
    embedder = HashEmbedder()
    chunker = policy_for(embedder, "recursive")
    store = kind(client, "docs")
    store.ensure_collection(embedder.dimension)
    rng = random.Random(16)
    for round_ in range(4):
        docs = [f"r{round_}-{i}" for i in range(3)]
        sync([Document(d, version_text(1), version=1) for d in docs], store, chunker=chunker,
             embedder=embedder)
        versions = [2, 3, 4]
        rng.shuffle(versions)
        barrier = threading.Barrier(len(versions))
        outcome: dict[int, Any] = {}

        def writer(version: int, outcome: dict[int, Any] = outcome,
                   barrier: threading.Barrier = barrier, docs: list[str] = docs) -> None:
            barrier.wait(timeout=60)
            try:
                outcome[version] = sync(
                    [Document(d, version_text(version), version=version) for d in docs],
                    kind(client, "docs"), chunker=chunker, embedder=embedder)
            except Exception as exc:
                outcome[version] = exc

        threads = [threading.Thread(target=writer, args=(v,)) for v in versions]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for version, result in outcome.items():
            assert not isinstance(result, Exception), (version, result)
            assert {d.status for d in result.per_document} <= {"changed", "skipped"}
        for doc_id in docs:
            check_newest(store, doc_id, 4, embedder)


def test_a_sync_waits_its_turn_and_gives_up_after_its_wait(client: edge.EdgeClient) -> None:
    store = QdrantEdgeStore(client, "docs")
    taken = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with store.writer_lock():
            taken.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(timeout=30)
    busy = pytest.raises(StoreUnavailableError, match="another thread of this process")
    with busy, store.writer_lock(wait=0.05):
        pass
    release.set()
    thread.join(timeout=30)
    with store.writer_lock(wait=1):
        pass


# -- the command line on qdrant-edge: ------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HashEmbedder]:
    """The example docs in a fresh folder, and the CLI's embedder a HashEmbedder."""
    from rechunk.cli import compose

    shutil.copytree(DOCS, tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    embedder = HashEmbedder()
    monkeypatch.setattr(compose, "open_embedder", lambda args: embedder)
    yield embedder


EDGE = ("--store", "qdrant-edge:.rechunk/edge")


def test_every_command_on_qdrant_edge(workdir: HashEmbedder,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, first = run_json(capsys, "sync", "docs", *EDGE)
    assert code == 0 and first["documents"]["new"] == 4 and first["stale_check"] == "passed"
    assert (Path(".rechunk/edge/edge.json")).is_file()
    guide = Path("docs/sync-guide.md")
    guide.write_text(guide.read_text() + "\n\nA closing paragraph added later.\n")
    code, second = run_json(capsys, "sync", "docs", *EDGE)
    assert second["documents"]["changed"] == 1 and second["documents"]["unchanged"] == 3
    code, status = run_json(capsys, "status", *EDGE)
    assert code == 0 and status["documents"] == 4 and status["stale_check"] == "passed"
    assert status["aliases"] == {"rechunk": status["generations"][0]}
    code, hits = run_json(capsys, "query", "when", "a", "sync", "crashes", "-k", "3", *EDGE)
    assert code == 0 and len(hits) == 3 and {"doc_id", "score"} <= set(hits[0])
    code, result = run_json(capsys, "reindex", "--policy", "fixed", "--drop-old", *EDGE)
    assert code == 0 and result["switched"] and result["dropped"] == status["generations"][0]
    assert result["sync"]["inputs"]["embedded"] < first["inputs"]["embedded"]
    code, status = run_json(capsys, "status", *EDGE)
    assert status["generations"] == [result["collection"]] and status["documents"] == 4
    Path("docs/reuse-cache.md").unlink()
    code, pruned = run_json(capsys, "sync", "docs", "--prune", "--policy", "fixed", *EDGE)
    assert code == 0 and pruned["documents"]["deleted"] == 1
    code, status = run_json(capsys, "status", "--layout", "llamaindex", *EDGE)
    assert code == 2  # a collection keeps one layout


@pytest.mark.parametrize("source", ["qdrant", "chroma"])
def test_moving_a_collection_to_qdrant_edge_embeds_nothing(
    workdir: HashEmbedder, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    """`rechunk sync PATH --store qdrant-edge:DIR --reuse-from qdrant:OLD`: every vector
    comes from the old collection by input key, none from the model (a fresh cache)."""
    if source == "chroma":
        pytest.importorskip("chromadb")
    old = f"{source}:.rechunk/{source}"
    code, first = run_json(capsys, "sync", "docs", "--store", old)
    assert code == 0 and first["inputs"]["embedded"] > 0
    workdir.calls = workdir.inputs = 0
    code, moved = run_json(capsys, "sync", "docs", *EDGE, "--reuse-from", old,
                           "--cache", "fresh.sqlite")
    assert code == 0, moved
    assert moved["inputs"]["embedded"] == 0 and workdir.inputs == 0
    assert moved["inputs"]["from_store"] == first["inputs"]["embedded"]
    assert moved["model_loaded"] is False
    code, status = run_json(capsys, "status", *EDGE)
    assert status["chunks"] == first["chunks"]["added"]
    code, hits = run_json(capsys, "query", "reuse", "the", "cache", "-k", "2", *EDGE)
    code, theirs = run_json(capsys, "query", "reuse", "the", "cache", "-k", "2", "--store", old)
    assert [(h["doc_id"], h["start"]) for h in hits] == [(h["doc_id"], h["start"]) for h in theirs]
    assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in theirs], abs=1e-3)


def test_a_store_folder_opened_as_another_kind_is_refused(
    workdir: HashEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Qdrant Edge folder given as qdrant: or chroma: read as 'no store at', and a sync
    built a second store inside it."""
    from rechunk.cli import main

    assert run_json(capsys, "sync", "docs", *EDGE)[0] == 0
    folder = Path(EDGE[1].removeprefix("qdrant-edge:"))
    before = sorted(folder.rglob("*"))
    for args in (["status", "--store", f"qdrant:{folder}"], ["sync", "docs", "--store",
                 f"chroma:{folder}"], ["sync", "docs", "--store", f"qdrant:./{folder}/"]):  # fmt: skip
        assert main(args) == 2
        assert "holds a Qdrant Edge store (edge.json)" in capsys.readouterr().err
    assert sorted(folder.rglob("*")) == before


@pytest.mark.parametrize("target", ["qdrant-edge:.rechunk/edge", "chroma:.rechunk/moved"])
def test_a_move_keeps_the_sources_policy_and_layout(
    workdir: HashEmbedder, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """A collection on another policy (reindexed to recursive) and in LlamaIndex's layout,
    moved with --reuse-from: the new collection takes both, so nothing is embedded and
    LlamaIndex still reads it. It took the default policy (re-embedding 83-100%) and
    LangChain's layout, with no word of either."""
    from rechunk.adapters.uri import open_store
    from rechunk.cli.compose import written_in

    if target.startswith("chroma"):
        pytest.importorskip("chromadb")
    old = ("--store", "qdrant:.rechunk/qdrant", "--layout", "llamaindex")
    assert run_json(capsys, "sync", "docs", *old)[0] == 0
    code, reindexed = run_json(capsys, "reindex", "--policy", "recursive", *old)
    assert code == 0 and reindexed["switched"]
    policy = reindexed["sync"]["policy"]
    code, moved = run_json(capsys, "sync", "docs", "--store", target, "--reuse-from", old[1],
                           "--cache", "fresh.sqlite")  # fmt: skip
    assert code == 0 and moved["inputs"]["embedded"] == 0 and moved["policy"] == policy
    opened = open_store(target, "rechunk", layout="langchain", create=False)
    try:
        assert written_in(opened.store, "llamaindex") and not written_in(opened.store, "langchain")
    finally:
        opened.close()
    # --policy and --layout given still decide
    code, chosen = run_json(capsys, "sync", "docs", "--store", "qdrant-edge:.rechunk/other",
                            "--reuse-from", old[1], "--policy", "structured", "--dry-run")  # fmt: skip
    assert code == 0 and chosen["policy"].startswith("structured-")


def test_reuse_from_a_store_of_another_model_is_refused(
    workdir: HashEmbedder, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rechunk.cli import main

    assert run_json(capsys, "sync", "docs")[0] == 0
    monkeypatch.setattr(HashEmbedder, "model_id", "hash/another")
    assert main(["sync", "docs", *EDGE, "--reuse-from", "qdrant:.rechunk/qdrant"]) == 2
    err = capsys.readouterr().err
    assert "--reuse-from qdrant:.rechunk/qdrant: collection 'rechunk' there holds" in err
    assert "not vectors of hash/another" in err
    assert main(["sync", "docs", *EDGE, "--reuse-from", "qdrant:nowhere"]) == 2
    assert "--reuse-from qdrant:nowhere: no store at nowhere" in capsys.readouterr().err
    assert not Path(EDGE[1].removeprefix("qdrant-edge:")).exists()  # a failed move made none
    assert main(["sync", "docs", *EDGE, "--reuse-from", EDGE[1]]) == 2
    assert "is the --store itself" in capsys.readouterr().err


def test_status_of_a_large_local_folder_names_qdrant_edge(
    workdir: HashEmbedder, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rechunk.adapters.qdrant as adapter

    code, first = run_json(capsys, "sync", "docs")
    monkeypatch.setattr(adapter, "EMBEDDED_POINTS_ADVICE", first["chunks"]["added"] - 1)
    code, status = run_json(capsys, "status")
    assert code == 0
    advice = status["warnings"][0]
    assert "--store qdrant-edge:DIR" in advice and "--reuse-from qdrant:" in advice
    assert run_json(capsys, "sync", "docs", *EDGE)[0] == 0
    edge_status = run_json(capsys, "status", *EDGE)[1]
    assert edge_status["warnings"] == []  # Edge opens without loading its points


WATCH = """
import hashlib, sys
import numpy as np
import rechunk.cli as cli
from rechunk.cli import compose

class HashEmbedder:
    model_id, dimension, max_input_tokens, special_tokens, loaded = "hash/edge-v1", 16, 256, 2, False

    def count_tokens(self, text):
        return len(text.split())

    def embed(self, texts):
        return np.asarray([np.random.default_rng(int.from_bytes(
            hashlib.sha256(t.encode()).digest()[:8], "big")).standard_normal(16) for t in texts],
            dtype=np.float32).reshape(len(texts), 16)

compose.open_embedder = lambda args: HashEmbedder()
raise SystemExit(cli.main(sys.argv[1:]))
"""


@pytest.mark.requires("watchfiles")
def test_watch_on_qdrant_edge(workdir: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    """`rechunk watch --store qdrant-edge:DIR` keeps the folder open (another process is
    told so) and syncs each change; SIGTERM ends it, and the folder is free again."""
    import queue

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", WATCH, "watch", "docs", *EDGE, "--json", "--settle", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in process.stdout], daemon=True).start()  # type: ignore[union-attr]

    def next_json(kind: str) -> dict[str, Any]:
        for _ in range(120):
            try:
                data = json.loads(lines.get(timeout=0.5))
            except queue.Empty:
                assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
                continue
            if data.get("kind") == kind:
                return data
        raise AssertionError(f"no {kind} line")

    try:
        assert next_json("initial")["published"] == 4
        held = subprocess.run([sys.executable, "-m", "rechunk.cli", "status", *EDGE],
                              capture_output=True, text=True, timeout=60)
        assert held.returncode == 3 and f"process {process.pid}" in held.stderr
        guide = Path("docs/sync-guide.md")
        guide.write_text(guide.read_text() + "\n\nA paragraph the watcher syncs.\n")
        assert next_json("batch")["published"] == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)
    code, status = run_json(capsys, "status", *EDGE)
    assert code == 0 and status["documents"] == 4 and status["stale_check"] == "passed"


def test_long_reads_reopen_the_shard_and_miss_nothing(
    client: edge.EdgeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past REOPEN_POINTS points read, the shard is closed and opened again between
    requests (letting go of the pages of its files it read in place): reads and writes
    after it find everything."""
    monkeypatch.setattr(edge, "REOPEN_POINTS", 25)
    store = QdrantEdgeStore(client, "docs", batch_size=4)
    store.ensure_collection(DIM)
    written = [PointWrite(new_id(), payload(i, doc_id=f"d{i % 40}.md"), unit(i)) for i in range(120)]
    store.write(written)
    first = client.shard("docs")
    many = store.get_points_many([f"d{i}.md" for i in range(40)])  # 10 requests of 4 docs
    assert sum(len(points) for points in many.values()) == 120
    assert client.shard("docs") is not first  # reopened on the way
    keys = [w.payload.input_key for w in written]
    assert set(store.get_vectors(keys, MODEL)) == set(keys)
    store.delete([w.id for w in written[:60]])
    assert store.collection_info().points == 60  # type: ignore[union-attr]
    assert len(store.search(unit(100), 3)) == 3
