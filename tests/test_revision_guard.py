"""The query-time revision guard (issue #40, item 5).

A sync in the default order (upsert-then-delete) writes a document's new revision,
marks the old revision's points superseded in a payload-only request, then deletes
them. These tests hold a real sync between the mark and the delete (the store's
``delete`` waits: :class:`HeldAtDelete`, a wrapper that hands every other call to the
real store) and query the same collection from another client meanwhile: rechunk's
search, LangChain's and LlamaIndex's own retrievers with the filter of
``rechunk.adapters.guard``, and (Chroma) another process. The old revision must not
come back, although its points are still stored and, unfiltered, would be the best
hits. A sync killed between the two steps is repaired by the next one, also when the
next one brings the old revision back (its points must then lose the mark).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chroma_server import make_client, running_chroma
from concurrency_helpers import version_text

from rechunk import Document, policy_for, sync
from rechunk.adapters.guard import langchain_filter, llamaindex_filters
from rechunk.errors import ConfigError
from rechunk.sync.store import StoredPoint

DOC = "guide.md"
WAIT = 120.0  # seconds a test waits for the other thread before it gives up


class HeldAtDelete:
    """A store whose ``delete`` waits until the test releases it: a sync using it stops
    after publishing its writes and marking the old points, before removing them (the
    test hook). ``fail=True``: the delete raises instead, as a sync killed there would
    leave the store."""

    def __init__(self, store: Any, *, fail: bool = False) -> None:
        self._store = store
        self._fail = fail
        self.held = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def delete(self, ids: Sequence[str], **kwargs: Any) -> None:
        if self._fail:
            raise KeyboardInterrupt("killed between the mark and the delete")
        self.held.set()
        assert self.release.wait(WAIT), "the test never released the sync"
        self._store.delete(ids, **kwargs)


def lc_embeddings(model: Any) -> Any:
    """The real model as a LangChain ``Embeddings``."""
    from langchain_core.embeddings import Embeddings

    class MiniLM(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in v] for v in model.embed(texts)]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return MiniLM()


def li_embedding(model: Any) -> Any:
    """The real model as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.embeddings import BaseEmbedding

    def one(text: str) -> list[float]:
        return [float(x) for x in model.embed([text])[0]]

    class MiniLM(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return one(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return one(text)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return one(query)

    return MiniLM(model_name="minilm")


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_chroma(tmp_path_factory.mktemp("guard-chroma") / "data") as running:
        yield running


class Setup:
    """A store (``kind``, ``layout``) holding revision 1 of :data:`DOC`, another client's
    store on the same collection (``reader``), and the framework's own vector store on it
    for the layout (``framework``: LangChain for langchain, LlamaIndex for llamaindex)."""

    def __init__(self, kind: str, layout: str, minilm: Any, tmp_path: Path, chroma: Any) -> None:
        name = f"guard-{uuid.uuid4().hex[:8]}"
        self.kind, self.layout, self.name, self.model = kind, layout, name, minilm
        self.chunker = policy_for(minilm, "recursive")
        if kind == "qdrant":
            from rechunk.adapters.qdrant import QdrantStore, local_client

            # embedded Qdrant: one client per folder (its lock), so the reader is another
            # store over that client, queried from another thread
            self.client = local_client(tmp_path / "qdrant")
            self.store: Any = QdrantStore(self.client, name, layout)  # type: ignore[arg-type]
            self.reader: Any = QdrantStore(self.client, name, layout)  # type: ignore[arg-type]
        else:
            from rechunk.adapters.chroma import ChromaStore

            self.client = chroma.client
            self.reader_client = make_client(chroma.port)  # another client of the server
            self.store = ChromaStore(self.client, name, layout)
            self.reader = ChromaStore(self.reader_client, name, layout)
        self.store.ensure_collection(minilm.dimension)
        self.sync(1)

    def sync(self, version: int, store: Any = None) -> Any:
        return sync(
            [Document(DOC, version_text(version))],
            store if store is not None else self.store,
            chunker=self.chunker,
            embedder=self.model,
        )

    def framework(self) -> Any:
        """LangChain's or LlamaIndex's own vector store on the collection (another client
        of the Chroma server)."""
        if self.layout == "langchain" and self.kind == "qdrant":
            from langchain_qdrant import QdrantVectorStore

            return QdrantVectorStore(
                client=self.client, collection_name=self.name,
                embedding=lc_embeddings(self.model),
            )  # fmt: skip
        if self.layout == "langchain":
            from langchain_chroma import Chroma

            return Chroma(
                client=self.reader_client, collection_name=self.name,
                embedding_function=lc_embeddings(self.model),
            )  # fmt: skip
        if self.kind == "qdrant":
            from llama_index.vector_stores.qdrant import QdrantVectorStore as LiQdrant

            return LiQdrant(client=self.client, collection_name=self.name)
        from llama_index.vector_stores.chroma import ChromaVectorStore

        return ChromaVectorStore(
            chroma_collection=self.reader_client.get_collection(self.name, embedding_function=None)
        )

    def retrieved(self, query: str, guarded: bool, k: int = 4) -> list[tuple[str, str]]:
        """``(point id, revision)`` of the framework retriever's top ``k`` for ``query``,
        with the guard's filter or without any."""
        vectorstore = self.framework()
        if self.layout == "langchain":
            kwargs: dict[str, Any] = {"k": k}
            if guarded:
                kwargs["filter"] = langchain_filter(vectorstore)
            docs = vectorstore.as_retriever(search_kwargs=kwargs).invoke(query)
            # langchain_qdrant names the point in metadata["_id"], langchain_chroma in .id
            return [(str(d.id or d.metadata["_id"]), d.metadata["revision"]) for d in docs]
        from llama_index.core import VectorStoreIndex

        index = VectorStoreIndex.from_vector_store(vectorstore, embed_model=li_embedding(self.model))
        filters = llamaindex_filters(vectorstore) if guarded else None
        hits = index.as_retriever(similarity_top_k=k, filters=filters).retrieve(query)
        return [(h.node.node_id, h.node.metadata["revision"]) for h in hits]

    def revision(self, version: int) -> str:
        return Document(DOC, version_text(version)).revision  # type: ignore[return-value]


def searched(store: Any, model: Any, text: str, k: int = 4) -> list[StoredPoint]:
    return [p for p, _ in store.search(model.embed([text])[0], k)]


#: a search of the Chroma server from a process of its own: rechunk's search, and the
#: raw query of Chroma's client (no filter), with the vector given on stdin
OTHER_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from rechunk.adapters.chroma import ChromaStore, http_client
    port, name, layout = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    vector = np.asarray(json.load(sys.stdin), dtype=np.float32)
    client = http_client("127.0.0.1", port)
    hits = ChromaStore(client, name, layout).search(vector, 4)
    raw = client.get_collection(name).query(query_embeddings=[vector.tolist()], n_results=4)
    print(json.dumps({"search": [p.id for p, _ in hits], "raw": raw["ids"][0]}))
    """
)


@pytest.mark.parametrize("layout", ["langchain", "llamaindex"])
@pytest.mark.parametrize("kind", ["qdrant", "chroma"])
def test_a_held_sync_never_shows_the_old_revision_once_the_new_one_is_published(
    kind: str, layout: str, minilm: Any, tmp_path: Path, chroma: Any
) -> None:
    setup = Setup(kind, layout, minilm, tmp_path, chroma)
    old_ids = {p.id for p in setup.store.get_points(DOC)}
    held = HeldAtDelete(setup.store)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["report"] = setup.sync(2, held)
        except BaseException as exc:  # reported by the test thread
            outcome["error"] = exc

    writer = threading.Thread(target=run, daemon=True)
    writer.start()
    try:
        assert held.held.wait(WAIT), f"the sync never reached its delete: {outcome}"
        new_rev, old_rev = setup.revision(2), setup.revision(1)
        points = setup.reader.get_points(DOC)
        marked = [p for p in points if p.payload.superseded]
        current = [p for p in points if not p.payload.superseded]
        # both revisions are stored; exactly the points the new one lacks are marked
        assert {p.payload.revision for p in marked} == {old_rev}
        assert {p.payload.revision for p in current} == {new_rev}
        assert {p.id for p in marked} == old_ids - {p.id for p in current}
        assert old_ids & {p.id for p in current}, "versions share chunks (kept point ids)"
        for old in marked:
            hits = searched(setup.reader, minilm, old.payload.text)
            assert len(hits) == 4 and old.id not in {p.id for p in hits}
            assert {p.payload.revision for p in hits} == {new_rev}
            assert not any(p.payload.superseded for p in hits)
        old, text = marked[0], marked[0].payload.text
        # unfiltered, the old point would be the best hit (it holds the query's text)
        if kind == "qdrant":
            raw = setup.client.query_points(
                setup.name, query=minilm.embed([text])[0].tolist(),
                using=None if layout == "langchain" else "text-dense", limit=1,
            ).points  # fmt: skip
            assert str(raw[0].id) == old.id
        assert setup.retrieved(text, guarded=False)[0] == (old.id, old_rev)
        guarded = setup.retrieved(text, guarded=True)
        assert len(guarded) == 4 and {rev for _, rev in guarded} == {new_rev}
        if kind == "chroma":
            vector = json.dumps(minilm.embed([marked[0].payload.text])[0].tolist())
            done = subprocess.run(
                [sys.executable, "-c", OTHER_PROCESS, str(chroma.port), setup.name, layout],
                input=vector, capture_output=True, text=True, timeout=WAIT, check=True,
            )  # fmt: skip
            seen = json.loads(done.stdout.strip().splitlines()[-1])
            assert seen["raw"][0] == marked[0].id
            assert not set(seen["search"]) & {p.id for p in marked}
            assert len(seen["search"]) == 4
    finally:
        held.release.set()
        writer.join(WAIT)
    assert "error" not in outcome, outcome.get("error")
    report = outcome["report"]
    assert report.stale_check == "passed" and report.chunks["deleted"] == len(marked)
    after = setup.reader.get_points(DOC)
    assert {p.payload.revision for p in after} == {new_rev}
    assert not any(p.payload.superseded for p in after)


@pytest.mark.parametrize("kind", ["qdrant", "chroma"])
def test_a_sync_killed_after_marking_is_repaired_by_the_next(
    kind: str, minilm: Any, tmp_path: Path, chroma: Any
) -> None:
    setup = Setup(kind, "langchain", minilm, tmp_path, chroma)
    one = {p.id: p for p in setup.store.get_points(DOC)}
    with pytest.raises(KeyboardInterrupt):
        setup.sync(2, HeldAtDelete(setup.store, fail=True))
    stranded = [p for p in setup.reader.get_points(DOC) if p.payload.superseded]
    assert stranded and {p.id for p in stranded} < set(one)
    for old in stranded:  # left behind, and still out of every search
        assert old.id not in {p.id for p in searched(setup.reader, minilm, old.payload.text)}
        assert {rev for _, rev in setup.retrieved(old.payload.text, guarded=True)} == {
            setup.revision(2)
        }
    report = setup.sync(2)  # the same sync again: the marked points go
    assert report.stale_check == "passed" and report.chunks["deleted"] == len(stranded)
    assert report.chunks["added"] == 0
    points = setup.store.get_points(DOC)
    assert not any(p.payload.superseded for p in points)
    assert {p.payload.revision for p in points} == {setup.revision(2)}

    # killed again while going back to revision 1, then revision 1 synced: the points
    # that revision 2 marked are revision 1's own again, so they must lose the mark
    with pytest.raises(KeyboardInterrupt):
        setup.sync(1, HeldAtDelete(setup.store, fail=True))
    with pytest.raises(KeyboardInterrupt):
        setup.sync(2, HeldAtDelete(setup.store, fail=True))
    marked = {p.id for p in setup.store.get_points(DOC) if p.payload.superseded}
    assert marked & set(one), "revision 1's own points are marked"
    report = setup.sync(1)
    assert report.stale_check == "passed"
    points = setup.store.get_points(DOC)
    assert {p.id for p in points} == set(one)
    assert not any(p.payload.superseded for p in points)
    for point in points:
        assert point.id in {p.id for p in searched(setup.reader, minilm, point.payload.text)}


def test_the_filters_combine_with_the_callers_and_name_what_they_take() -> None:
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        MetadataFilter,
        MetadataFilters,
    )
    from qdrant_client import models

    assert langchain_filter("chroma") == {"superseded": {"$ne": 1}}
    assert langchain_filter("chroma", {"lang": "en"}) == {
        "$and": [{"lang": "en"}, {"superseded": {"$ne": 1}}]
    }
    mine = models.Filter(must=[models.FieldCondition(key="metadata.lang",
                                                     match=models.MatchValue(value="en"))])
    both = langchain_filter("qdrant", mine)
    assert both.must == [mine]
    assert both.must_not == [
        models.FieldCondition(key="metadata.superseded", match=models.MatchValue(value=1))
    ]
    user = MetadataFilters(filters=[MetadataFilter(key="lang", value="en")])
    combined = llamaindex_filters("chroma", user)
    assert combined.condition == FilterCondition.AND and combined.filters[0] == user
    assert llamaindex_filters("qdrant").condition == FilterCondition.NOT
    with pytest.raises(ConfigError, match="langchain_chroma or langchain_qdrant"):
        langchain_filter(object())
    with pytest.raises(ConfigError, match="a Chroma filter is a dict"):
        langchain_filter("chroma", "lang=en")
    with pytest.raises(ConfigError, match="MetadataFilters"):
        llamaindex_filters("qdrant", {"lang": "en"})


def test_the_guard_costs_one_request_per_batch_of_documents(
    minilm: Any, tmp_path: Path
) -> None:
    """The mark is one payload-only request for a batch's changed documents (not one
    per point), on the store's own ``supersede``."""
    from rechunk.adapters.qdrant import QdrantStore, local_client

    store = QdrantStore(local_client(tmp_path / "q"), "count")  # type: ignore[arg-type]
    store.ensure_collection(minilm.dimension)
    chunker = policy_for(minilm, "recursive")
    docs = [f"doc{i}.md" for i in range(5)]
    sync([Document(d, version_text(1)) for d in docs], store, chunker=chunker, embedder=minilm)
    calls: list[int] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def supersede(self, ids: Sequence[str], **kwargs: Any) -> None:
            calls.append(len(ids))
            store.supersede(ids, **kwargs)

    report = sync(
        [Document(d, version_text(2)) for d in docs], Counting(), chunker=chunker,
        embedder=minilm,
    )  # fmt: skip
    assert calls == [report.chunks["deleted"]] and report.chunks["deleted"] > 0
    assert np.all([not p.payload.superseded for d in docs for p in store.get_points(d)])


@pytest.mark.parametrize("layout", ["langchain", "llamaindex"])
def test_the_qdrant_server_request_marks_by_a_filter_with_the_version(
    layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Qdrant server runs here: the request a server gets (a filter on the ids and the
    version, the mark set under ``metadata`` in the langchain layout) is sent to local
    mode, which answers it as a server does."""
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.sync.store import PointPayload, PointWrite

    monkeypatch.setattr(QdrantStore, "is_embedded", lambda self: False)
    store = QdrantStore(QdrantClient(":memory:"), "server", layout)  # type: ignore[arg-type]
    store.ensure_collection(4)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    written = [
        PointPayload(doc_id="a.md", revision="r1", policy="p", input_key=f"k{i}", model_id="m",
                     ordinal=i, start=i, end=i + 1, tokens=1, text=f"t{i}", version=1)
        for i in range(3)
    ]  # fmt: skip
    store.write([PointWrite(ids[i], written[i], np.eye(4, dtype=np.float32)[i]) for i in range(3)])
    store.supersede([ids[0], str(uuid.uuid4())])  # a missing id is no error
    store.supersede([ids[1]], version=0)  # stored version 1 is newer: left alone
    store.supersede([ids[2]], version=1)
    marked = {p.id: p.payload.superseded for p in store.get_points("a.md")}
    assert marked == {ids[0]: True, ids[1]: False, ids[2]: True}
    assert [p.id for p, _ in store.search(np.ones(4, dtype=np.float32), 3)] == [ids[1]]


def test_rechunk_query_leaves_superseded_points_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rechunk query`` searches through the store's search: a revision's points marked
    superseded (what a sync killed between its mark and its delete leaves) are not
    returned, although the query is their own text."""
    import shutil

    from rechunk.adapters.qdrant import QdrantStore, local_client
    from rechunk.cli import main

    shutil.copytree(Path(__file__).resolve().parent.parent / "examples" / "docs", tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    assert main(["sync", "docs", "--json"]) == 0
    capsys.readouterr()

    def query(text: str) -> list[dict[str, Any]]:
        assert main(["query", text, "-k", "3", "--json"]) == 0
        hits: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
        return hits

    client = local_client(tmp_path / ".rechunk" / "qdrant")
    store = QdrantStore(client, "rechunk")  # type: ignore[arg-type]
    points = store.get_points("sync-guide.md")
    client.close()
    text = points[0].payload.text
    assert query(text)[0]["doc_id"] == "sync-guide.md"
    client = local_client(tmp_path / ".rechunk" / "qdrant")
    QdrantStore(client, "rechunk").supersede([p.id for p in points])  # type: ignore[arg-type]
    client.close()
    hits = query(text)
    assert len(hits) == 3 and "sync-guide.md" not in {h["doc_id"] for h in hits}
