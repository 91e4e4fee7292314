"""End-to-end sync into real stores with the real model: reuse, convergence, bad input."""

from __future__ import annotations

import functools
import gc
import importlib
import itertools
import json
import logging
import time
import types
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chroma_server import running_chroma
from sync_helpers import FaultyStore, InjectedFault, RecordingEmbedder, snapshot

import rechunk.adapters.chroma as chroma_adapter
from rechunk import (
    ConfigError,
    Document,
    EmbeddingError,
    InputError,
    MemoryCache,
    RecursiveChunker,
    StaleCheckError,
    StoreError,
    TransientError,
    policy_for,
    sync,
)
from rechunk.adapters.chroma import ChromaStore
from rechunk.adapters.qdrant import QdrantStore
from rechunk.document import MAX_NESTING
from rechunk.reuse.cache import recorded_dimension

HERE = Path(__file__).resolve().parent
GUIDE_V1 = (HERE.parent / "examples" / "revisions" / "chunking-guide.v1.md").read_text()
GUIDE_V2 = (HERE.parent / "examples" / "revisions" / "chunking-guide.v2.md").read_text()
NOTES = "\n\n".join(
    f"Note {i}: the sync job keeps chunk {i} when its text did not change." for i in range(12)
)


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_chroma(tmp_path_factory.mktemp("chroma-server") / "data") as server:
        yield server


StoreFactory = Callable[[str], Any]


@pytest.fixture(params=["qdrant-memory", "qdrant-path", "chroma-persistent", "chroma-server"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of empty stores of one kind (a new collection per call)."""
    kind = request.param
    clients: list[Any] = []
    if kind.startswith("qdrant"):
        from qdrant_client import QdrantClient

        client = QdrantClient(":memory:") if kind == "qdrant-memory" else QdrantClient(
            path=str(tmp_path / "qdrant"))
        clients.append(client)

        def factory(layout: str = "langchain") -> Any:
            return QdrantStore(client, f"c{uuid.uuid4().hex[:8]}", layout=layout)
    else:
        import chromadb

        if kind == "chroma-persistent":
            client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
        else:
            client = request.getfixturevalue("chroma_server").client

        def factory(layout: str = "langchain") -> Any:
            return ChromaStore(client, f"c{uuid.uuid4().hex[:8]}", layout=layout)
    yield factory
    for client in clients:
        client.close()


@pytest.fixture(scope="module")
def chunker(minilm: Any) -> Any:
    return policy_for(minilm, "recursive")


def fresh(store: Any, minilm: Any) -> Any:
    store.ensure_collection(minilm.dimension)
    return store


def test_revision_embeds_only_new_inputs(make_store: StoreFactory, minilm: Any,
                                         chunker: Any) -> None:
    store = fresh(make_store("langchain"), minilm)
    recorder = RecordingEmbedder(minilm)
    first = sync([Document("guide.md", GUIDE_V1), Document("notes.md", NOTES)], store,
                 chunker=chunker, embedder=recorder)
    old_inputs = {c.text for c in chunker.chunk(GUIDE_V1)} | {c.text for c in chunker.chunk(NOTES)}
    assert set(recorder.embedded) == old_inputs
    assert len(recorder.embedded) == len(old_inputs)  # each distinct input once
    assert first.documents["new"] == 2 and first.stale_check == "passed"

    recorder.calls.clear()
    second = sync([Document("guide.md", GUIDE_V2)], store, chunker=chunker, embedder=recorder)
    new_inputs = {c.text for c in chunker.chunk(GUIDE_V2)}
    assert set(recorder.embedded) == new_inputs - old_inputs
    assert second.inputs["embedded"] == len(new_inputs - old_inputs)
    assert second.documents == {"synced": 1, "new": 0, "changed": 1, "unchanged": 0,
                                "skipped": 0, "deleted": 0}
    assert 0 < second.recompute_fraction < 1
    assert second.stale_check == "passed" and second.stale_points == 0
    points = store.get_points("guide.md")
    assert sorted(p.payload.text for p in points) == sorted(c.text for c in chunker.chunk(GUIDE_V2))
    assert {p.payload.revision for p in points} == {Document("g", GUIDE_V2).revision}
    assert len(store.get_points("notes.md")) == len(chunker.chunk(NOTES))  # untouched

    recorder.calls.clear()
    third = sync([Document("guide.md", GUIDE_V2)], store, chunker=chunker, embedder=recorder)
    assert recorder.calls == [] and third.documents["unchanged"] == 1
    assert third.chunks["added"] == third.chunks["updated"] == third.chunks["deleted"] == 0


def test_vectors_reused_from_the_collection_and_cache(make_store: StoreFactory, minilm: Any,
                                                      chunker: Any) -> None:
    store = fresh(make_store("langchain"), minilm)
    recorder = RecordingEmbedder(minilm)
    cache = MemoryCache()
    sync([Document("a.md", NOTES)], store, chunker=chunker, embedder=recorder, cache=cache)
    # noted for the adapters, which look vectors up by model id before they know the size
    assert recorded_dimension(cache, recorder.model_id) == recorder.dimension
    recorder.calls.clear()
    # the same text under another doc_id: every vector comes from the cache
    report = sync([Document("b.md", NOTES)], store, chunker=chunker, embedder=recorder,
                  cache=cache)
    assert recorder.calls == [] and report.inputs["from_cache"] == report.chunks["added"]
    # and without a cache, from the collection itself
    report = sync([Document("c.md", NOTES)], store, chunker=chunker, embedder=recorder)
    assert recorder.calls == [] and report.inputs["from_store"] == report.chunks["added"]


@pytest.mark.parametrize("order", ["upsert-then-delete", "delete-then-upsert"])
def test_both_orders_end_in_the_same_state(make_store: StoreFactory, minilm: Any, chunker: Any,
                                           order: str) -> None:
    cache = MemoryCache()
    reference = fresh(make_store("langchain"), minilm)
    sync([Document("g", GUIDE_V2)], reference, chunker=chunker, embedder=minilm, cache=cache)
    store = fresh(make_store("langchain"), minilm)
    sync([Document("g", GUIDE_V1)], store, chunker=chunker, embedder=minilm, cache=cache)
    sync([Document("g", GUIDE_V2)], store, chunker=chunker, embedder=minilm, cache=cache,
         order=order)  # type: ignore[arg-type]
    assert snapshot(store) == snapshot(reference)


def test_a_sync_reads_all_its_documents_at_once(make_store: StoreFactory, minilm: Any,
                                                chunker: Any) -> None:
    """Embedded Qdrant scans the collection per read: reads must not grow with documents."""
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    docs = [Document(f"d{i}.md", f"# Note {i}\n\n{NOTES}") for i in range(12)]
    sync(docs, store, chunker=chunker, embedder=minilm, cache=cache)
    counting = FaultyStore(store)
    edited = [Document(d.doc_id, d.text + "\n\nOne more line.") for d in docs[:6]]
    report = sync(edited + docs[6:9], counting, chunker=chunker, embedder=minilm, cache=cache,
                  prune=True)
    assert report.documents["changed"] == 6 and report.documents["deleted"] == 3
    assert "get_points" not in counting.calls
    reads = [c for c in counting.calls
             if c in ("get_points_many", "present_ids", "doc_ids", "all_ids", "doc_ids_of")]
    if hasattr(store, "writer_lock"):  # Chroma: reads by id for the check and the prune
        assert reads == ["get_points_many", "present_ids", "all_ids", "doc_ids_of"]
    else:
        assert reads == ["get_points_many"] * 2 + ["doc_ids", "get_points_many"]


def test_every_injected_fault_converges(make_store: StoreFactory, minilm: Any,
                                        chunker: Any) -> None:
    """Fail the k-th store call of a revision's sync, for every k; a re-run repairs it."""
    cache = MemoryCache()
    docs_v1 = [Document("g", GUIDE_V1), Document("n", NOTES)]
    docs_v2 = [Document("g", GUIDE_V2), Document("n", NOTES + "\n\nOne more note.")]
    reference = fresh(make_store("langchain"), minilm)
    sync(docs_v2, reference, chunker=chunker, embedder=minilm, cache=cache)
    expected = snapshot(reference)

    probe = fresh(make_store("langchain"), minilm)
    sync(docs_v1, probe, chunker=chunker, embedder=minilm, cache=cache)
    counting = FaultyStore(probe)
    sync(docs_v2, counting, chunker=chunker, embedder=minilm, cache=cache)
    calls = len(counting.calls)
    assert {"write", "delete", "get_points_many"} <= set(counting.calls)

    for k, order in itertools.product(range(calls), ("upsert-then-delete", "delete-then-upsert")):
        store = fresh(make_store("langchain"), minilm)
        sync(docs_v1, store, chunker=chunker, embedder=minilm, cache=cache)
        with pytest.raises(InjectedFault):
            sync(docs_v2, FaultyStore(store, fail_at=k), chunker=chunker, embedder=minilm,
                 cache=cache, order=order)  # type: ignore[arg-type]
        report = sync(docs_v2, store, chunker=chunker, embedder=minilm, cache=cache,
                      order=order)  # type: ignore[arg-type]
        assert report.stale_check == "passed", (k, counting.calls[k])
        assert snapshot(store) == expected, (k, order, counting.calls[k])


def test_prune_and_untouched_documents(make_store: StoreFactory, minilm: Any,
                                       chunker: Any) -> None:
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    sync([Document("a", NOTES), Document("b", GUIDE_V1)], store, chunker=chunker,
         embedder=minilm, cache=cache)
    kept = sync([Document("a", NOTES)], store, chunker=chunker, embedder=minilm, cache=cache)
    assert store.doc_ids() == {"a", "b"} and kept.documents["deleted"] == 0
    guarded = sync([Document("a", NOTES)], store, chunker=chunker, embedder=minilm,
                   cache=cache, prune=True, keep=["b"])
    assert store.doc_ids() == {"a", "b"} and guarded.documents["deleted"] == 0
    pruned = sync([Document("a", NOTES)], store, chunker=chunker, embedder=minilm, cache=cache,
                  prune=True)
    assert store.doc_ids() == {"a"} and pruned.documents["deleted"] == 1


def test_the_chunks_not_given_are_counted_without_a_read_of_their_own(
    make_store: StoreFactory, minilm: Any, chunker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``chunks_not_given`` is the points the collection held at the sync's start beside
    the given documents' (``keep``'s among them), from the count and the plan's reads:
    a sync without a prune reads no doc_id and no other document's point for it."""
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    docs = [Document("a", NOTES), Document("b", GUIDE_V1), Document("c", GUIDE_V2)]

    def run(given: list[Document], **kwargs: Any) -> Any:
        return sync(given, store, chunker=chunker, embedder=minilm, cache=cache, **kwargs)

    assert run(docs).chunks_not_given == 0
    others = len(store.get_points("b")) + len(store.get_points("c"))
    edited = [Document("a", NOTES + "\n\nOne more paragraph.\n")]
    with monkeypatch.context() as patch:
        for name in ("doc_ids", "all_ids", "doc_ids_of"):
            if hasattr(store, name):
                patch.setattr(store, name, lambda *a, n=name: pytest.fail(f"{n} read"))
        assert run(docs[:1]).chunks_not_given == others
        assert run(docs[:1], keep=["b"]).chunks_not_given == others
        assert run(edited, dry_run=True).chunks_not_given == others
        assert run(edited).chunks_not_given == others
        assert run([*edited, docs[1]]).chunks_not_given == len(store.get_points("c"))
    assert run(edited, prune=True, dry_run=True).chunks_not_given == 0  # would be pruned
    pruned = run(edited, prune=True)  # what the collection holds after it
    assert pruned.chunks_not_given == 0 and pruned.documents["deleted"] == 2
    assert pruned.chunks["deleted"] == others
    assert store.doc_ids() == {"a"} and run(edited).chunks_not_given == 0


def test_a_prunes_reads_count_as_plan(make_store: StoreFactory, minilm: Any, chunker: Any,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The reads that find what a prune deletes (every stored doc_id, then the gone
    documents' points) are in ``seconds["plan"]``: the report accounts for them."""
    sync_module = importlib.import_module("rechunk.sync.stages")  # the stages' clock
    store = fresh(make_store("langchain"), minilm)
    sync([Document("a", NOTES), Document("b", GUIDE_V1)], store, chunker=chunker,
         embedder=minilm)
    clock = {"skew": 0.0}
    skewed = types.SimpleNamespace(perf_counter=lambda: time.perf_counter() + clock["skew"])
    monkeypatch.setattr(sync_module, "time", skewed)

    def slow(read: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            clock["skew"] += 100.0  # each read "takes" 100 s on the sync's clock
            return read(*args, **kwargs)
        return timed

    for name in ("doc_ids", "get_points_many", "all_ids", "doc_ids_of"):
        if hasattr(store, name):
            monkeypatch.setattr(store, name, slow(getattr(store, name)))
    pruned = sync([Document("a", NOTES)], store, chunker=chunker, embedder=minilm, prune=True)
    assert pruned.documents["deleted"] == 1
    # the plan of "a" reads its points once, the prune two more times: doc_ids then b's
    # points, or (Chroma) every id then the doc_ids of those that are not a's
    assert pruned.seconds["plan"] >= 300.0


def test_a_sync_keeps_the_collector_off_older_objects(minilm: Any, chunker: Any) -> None:
    """While a sync runs, the objects that existed before it are frozen (``gc.freeze``:
    full collections skip an embedded collection's points); afterwards they are not,
    also when the sync fails; a process's own freeze is left as it is."""
    from qdrant_client import QdrantClient

    store = fresh(QdrantStore(QdrantClient(":memory:"), "frozen"), minilm)
    seen: list[int] = []

    def progress(stage: str, done: int, total: int) -> None:
        seen.append(gc.get_freeze_count())

    assert gc.get_freeze_count() == 0
    sync([Document("a", NOTES)], store, chunker=chunker, embedder=minilm, progress=progress)
    assert seen and min(seen) > 0 and gc.get_freeze_count() == 0
    with pytest.raises(InputError):
        sync([], store, chunker=chunker, embedder=minilm, prune=True)
    assert gc.get_freeze_count() == 0
    gc.freeze()  # the process's own, as a server that forks workers does
    try:
        own = gc.get_freeze_count()
        seen.clear()
        report = sync([Document("a", GUIDE_V1)], store, chunker=chunker, embedder=minilm,
                      progress=progress)
        assert report.documents["changed"] == 1
        assert seen and max(seen) <= own and gc.get_freeze_count() > 0  # not unfrozen
    finally:
        gc.unfreeze()


def test_garbage_made_between_syncs_is_not_frozen_with_the_rest(minilm: Any,
                                                                 chunker: Any) -> None:
    """Cycles that die between two syncs are collected, though no full collection runs:
    a sync collects the young generations before its freeze, so they are not thawed into
    the oldest generation afterwards (a process syncing every few seconds, as a watcher
    does, never reached a full collection, and its memory grew)."""
    import weakref

    from qdrant_client import QdrantClient

    class Cycle:
        me: Any = None

    store = fresh(QdrantStore(QdrantClient(":memory:"), "young"), minilm)
    refs = []
    for text in (NOTES, GUIDE_V1, NOTES):
        for _ in range(50):
            c = Cycle()
            c.me = c
            refs.append(weakref.ref(c))
        del c
        sync([Document("a", text)], store, chunker=chunker, embedder=minilm)
    assert sum(r() is not None for r in refs) == 0


def test_revision_guard_skips_older_versions(make_store: StoreFactory, minilm: Any,
                                             chunker: Any) -> None:
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    sync([Document("g", GUIDE_V2, version=2)], store, chunker=chunker, embedder=minilm,
         cache=cache)
    report = sync([Document("g", GUIDE_V1, version=1)], store, chunker=chunker,
                  embedder=minilm, cache=cache)
    assert report.documents["skipped"] == 1 and report.documents["synced"] == 0
    assert {p.payload.version for p in store.get_points("g")} == {2}
    newer = sync([Document("g", GUIDE_V1, version=3)], store, chunker=chunker, embedder=minilm,
                 cache=cache)
    assert newer.documents["changed"] == 1


def test_dry_run_changes_nothing(make_store: StoreFactory, minilm: Any, chunker: Any) -> None:
    store = fresh(make_store("langchain"), minilm)
    recorder = RecordingEmbedder(minilm)
    report = sync([Document("g", GUIDE_V1)], store, chunker=chunker, embedder=recorder,
                  dry_run=True)
    assert report.dry_run and report.chunks["added"] > 0 and report.inputs["embedded"] > 0
    assert recorder.calls == [] and store.doc_ids() == set()


def test_bad_input_changes_nothing(make_store: StoreFactory, minilm: Any, chunker: Any) -> None:
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    sync([Document("g", GUIDE_V1)], store, chunker=chunker, embedder=minilm, cache=cache)
    before = snapshot(store)
    bad_calls: list[tuple[type[Exception], Callable[[], Any]]] = [
        (InputError, lambda: sync([Document("g", GUIDE_V2), Document("g", NOTES)], store,
                                  chunker=chunker, embedder=minilm, cache=cache)),
        (InputError, lambda: sync([Document("x", NOTES), Document("g", " \n ")], store,
                                  chunker=chunker, embedder=minilm, cache=cache)),
        (InputError, lambda: sync([Document("g", NOTES, metadata={"revision": "x"})], store,
                                  chunker=chunker, embedder=minilm, cache=cache)),
        (ConfigError, lambda: sync([Document("g", GUIDE_V2)], store, chunker=RecursiveChunker(),
                                   embedder=minilm, cache=cache)),
        (ConfigError, lambda: sync([Document("g", GUIDE_V2)], store, chunker=chunker,
                                   embedder=minilm, order="sideways")),  # type: ignore[arg-type]
        (ConfigError, lambda: sync([Document("g", GUIDE_V2)], store,
                                   chunker=RecursiveChunker(198, tokenizer=len, hard_max_tokens=254),
                                   embedder=minilm)),
        (InputError, lambda: sync(None, store, chunker=chunker,  # type: ignore[arg-type]
                                  embedder=minilm)),
        # one str is not a set of doc_ids: it would have kept "g"'s characters, not "g"
        (InputError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                  embedder=minilm, prune=True, keep="g")),
        # an empty folder or a spent generator must not empty the collection
        (InputError, lambda: sync(iter([]), store, chunker=chunker, embedder=minilm,
                                  prune=True)),
        # arguments of the wrong kind: "false" is truthy, and pruned the collection
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=minilm, prune="false")),  # type: ignore[arg-type]
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=minilm, dry_run="False")),  # type: ignore[arg-type]
        (ConfigError, lambda: sync([Document("x", NOTES)], None, chunker=chunker,  # type: ignore[arg-type]
                                   embedder=minilm)),
        (ConfigError, lambda: sync([Document("x", NOTES)], "qdrant:kb", chunker=chunker,  # type: ignore[arg-type]
                                   embedder=minilm)),
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker="structured",  # type: ignore[arg-type]
                                   embedder=minilm)),
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=None)),  # type: ignore[arg-type]
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=minilm, cache="x.sqlite")),  # type: ignore[arg-type]
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=minilm, reuse_from=store)),
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=minilm, progress="x")),  # type: ignore[arg-type]
        (InputError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                  embedder=minilm, keep=None)),  # type: ignore[arg-type]
        # one file's name is not a set of files: its characters would have been
        (InputError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                  embedder=minilm, complete_files="faq.jsonl")),
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=_Renamed(minilm, dimension="384"))),
        (ConfigError, lambda: sync([Document("x", NOTES)], store, chunker=chunker,
                                   embedder=_Renamed(minilm, model_id=""))),
    ]
    for error, call in bad_calls:
        with pytest.raises(error):
            call()
        assert snapshot(store) == before


@pytest.mark.parametrize(
    "metadata",
    [
        {"tags": ("a", "b")},
        {"n": 2**70},
        {"path": "caf\udce9.md"},
        {"nested": {1: "x"}},
        {"": 1},
        {"deep": functools.reduce(lambda inner, _: [inner], range(MAX_NESTING + 1), [])},
    ],
)
def test_metadata_no_store_can_read_back_is_refused_by_document(metadata: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="Document 'b'"):
        Document("b", NOTES, metadata=metadata)


class _Renamed:
    """An embedder with one attribute replaced (a user's wrapper with a bug)."""

    def __init__(self, inner: Any, **changed: Any) -> None:
        self._inner, self._changed = inner, changed

    def __getattr__(self, name: str) -> Any:
        return self._changed[name] if name in self._changed else getattr(self._inner, name)


def test_reuse_from_a_collection_of_another_model_is_refused(minilm: Any) -> None:
    """Its vectors cannot serve this model (input keys name the model): before, the sync
    embedded every input and said nothing, to a caller who meant a free move."""
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    old = fresh(QdrantStore(client, "old"), minilm)
    sync([Document("g", GUIDE_V2)], old, chunker=policy_for(minilm), embedder=minilm)
    other = _Renamed(minilm, model_id="test/minilm-renamed")
    new = fresh(QdrantStore(client, "new"), minilm)
    with pytest.raises(ConfigError, match=r"reuse_from collection 'old' was written by another"):
        sync([Document("g", GUIDE_V2)], new, chunker=policy_for(other), embedder=other,
             reuse_from=[old])  # fmt: skip
    assert new.doc_ids() == set()
    # the same model's collection lends its vectors, as before
    again = sync([Document("g", GUIDE_V2)], fresh(QdrantStore(client, "same"), minilm),
                 chunker=policy_for(minilm), embedder=minilm, reuse_from=[old])  # fmt: skip
    assert again.inputs["embedded"] == 0 and again.inputs["from_store"] > 0


def test_lone_surrogates_are_input_errors() -> None:
    with pytest.raises(InputError, match="lone surrogate"):
        Document("caf\udce9.md", NOTES)
    with pytest.raises(InputError, match="lone surrogate at offset 3"):
        Document("b", "caf\udce9")
    # a revision of its own does not let the text past: a sync would fail on it later
    with pytest.raises(InputError, match="Document 'b': text holds a lone surrogate at offset 3"):
        Document("b", "caf\udce9", revision="r1")


def test_nul_bytes_are_refused_by_document() -> None:
    """No chunker reads a NUL: refused when the Document is made, so that a sync never
    meets it after earlier batches were written."""
    with pytest.raises(InputError, match="Document 'b': text holds a NUL byte at offset 3"):
        Document("b", "bad\x00text")


class _Careless:
    """A user's chunker that breaks the Chunker contract in the way ``how`` says."""

    hard_max_tokens = 50

    def __init__(self, how: str) -> None:
        self.how = how
        self.policy_id = f"careless-{how}"

    def chunk(self, text: str) -> list[Any]:
        from rechunk import Chunk, embedding_input

        half = len(text) // 2

        def made(a: int, b: int) -> Chunk:
            return Chunk(a, b, embedding_input(text[a:b]), 3)

        return {
            "gap": [made(0, half - 2), made(half, len(text))],
            "overlap": [made(0, half + 2), made(half, len(text))],
            "past the end": [made(0, half), Chunk(half, len(text) + 50, text[half:], 3)],
            "other text": [made(0, half), Chunk(half, len(text), "totally different", 3)],
            "none": [],
            "too many tokens": [Chunk(0, len(text), embedding_input(text), 51)],
        }[self.how]


@pytest.mark.parametrize(
    "how", ["gap", "overlap", "past the end", "other text", "none", "too many tokens"]
)
def test_a_chunker_of_ones_own_is_held_to_the_contract(how: str, minilm: Any) -> None:
    from qdrant_client import QdrantClient

    store = fresh(QdrantStore(QdrantClient(":memory:"), "careless"), minilm)
    with pytest.raises(ConfigError, match=f"careless-{how} broke the Chunker contract on "
                                          "document 'a'"):  # fmt: skip
        sync([Document("a", "Alpha beta gamma delta epsilon zeta eta theta.")], store,
             chunker=_Careless(how), embedder=minilm)  # fmt: skip
    assert store.doc_ids() == set()


def test_metadata_the_store_cannot_hold_is_refused_before_any_write(
    make_store: StoreFactory, minilm: Any, chunker: Any
) -> None:
    """Checked for every document before the first write, and in a dry run too: an
    earlier document of the same sync is not rewritten."""
    store = fresh(make_store("llamaindex"), minilm)
    cache = MemoryCache()
    sync([Document("a", NOTES)], store, chunker=chunker, embedder=minilm, cache=cache)
    before = snapshot(store)
    bad: list[dict[str, Any]] = [{"document_id": "x"}]  # the llamaindex layout's own key
    if isinstance(store, ChromaStore):
        bad += [{"owner": None}, {"tags": []}, {"nested": {"a": 1}}, {"chroma:x": 1},
                {"$and": 1}, {"#x": 1}, {"pages": list(range(5462))},
                {f"k{i}": i for i in range(5462)}]  # past 5,461 Chroma breaks for good
    for metadata in bad:
        for dry_run in (False, True):
            with pytest.raises(InputError, match="document 'b'"):
                sync([Document("a", GUIDE_V1), Document("b", NOTES, metadata=metadata)], store,
                     chunker=chunker, embedder=minilm, cache=cache, dry_run=dry_run)
            assert snapshot(store) == before


def test_a_change_of_metadata_type_is_written(make_store: StoreFactory, minilm: Any,
                                              chunker: Any) -> None:
    """1 == True == 1.0 in Python, but a store filters by type: sync compares types too."""
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    for value in (1, True, 1.0, 1):
        report = sync([Document("a", NOTES, metadata={"public": value})], store,
                      chunker=chunker, embedder=minilm, cache=cache)
        stored = [p.payload.metadata["public"] for p in store.get_points("a")]
        assert stored and all(type(v) is type(value) and v == value for v in stored)
    assert report.chunks["updated"] == len(stored) and report.inputs["embedded"] == 0


class Overflowing(RecordingEmbedder):
    """Finite float64 output too large for float32."""

    def embed(self, texts: Sequence[str]) -> Any:
        return np.asarray(super().embed(texts), dtype=np.float64) * 1e300


class Ragged(RecordingEmbedder):
    def embed(self, texts: Sequence[str]) -> Any:
        rows = [list(map(float, row)) for row in super().embed(texts)]
        return [rows[0][:-1], *rows[1:]]


@pytest.mark.parametrize("broken", [Overflowing, Ragged])
def test_unusable_model_output_is_refused_and_never_cached(
    broken: type[RecordingEmbedder], minilm: Any, chunker: Any
) -> None:
    from qdrant_client import QdrantClient

    store = fresh(QdrantStore(QdrantClient(":memory:"), "c"), minilm)
    cache = MemoryCache()
    with pytest.raises(EmbeddingError, match="finite real numbers"):
        sync([Document("g", GUIDE_V1)], store, chunker=chunker, embedder=broken(minilm),
             cache=cache)
    assert store.doc_ids() == set() and cache.stats().entries == 0
    # nothing poisoned: the real model then fills the collection
    report = sync([Document("g", GUIDE_V1)], store, chunker=chunker, embedder=minilm, cache=cache)
    assert report.inputs["from_cache"] == 0 and report.stale_check == "passed"


def test_incompatible_collections_are_refused(make_store: StoreFactory, minilm: Any,
                                              chunker: Any) -> None:
    missing = make_store("langchain")
    with pytest.raises(StoreError, match="ensure_collection"):
        sync([Document("g", NOTES)], missing, chunker=chunker, embedder=minilm)
    assert missing.collection_info() is None

    other_dim = make_store("langchain")
    other_dim.ensure_collection(minilm.dimension + 1)
    with pytest.raises(StoreError, match="dimensional"):
        sync([Document("g", NOTES)], other_dim, chunker=chunker, embedder=minilm)
    assert other_dim.doc_ids() == set()

    other_model = fresh(make_store("langchain"), minilm)

    class Renamed(RecordingEmbedder):
        @property
        def model_id(self) -> str:
            return "another-model"

    sync([Document("g", NOTES)], other_model, chunker=chunker, embedder=Renamed(minilm))
    before = snapshot(other_model)
    with pytest.raises(StoreError, match="another model"):
        sync([Document("g", GUIDE_V1)], other_model, chunker=chunker, embedder=minilm)
    assert snapshot(other_model) == before


def test_report_and_logs_carry_no_text(make_store: StoreFactory, minilm: Any, chunker: Any,
                                       caplog: pytest.LogCaptureFixture) -> None:
    store = fresh(make_store("langchain"), minilm)
    caplog.set_level(logging.DEBUG, logger="rechunk")
    sync([Document("g", GUIDE_V1)], store, chunker=chunker, embedder=minilm)
    report = sync([Document("g", GUIDE_V2)], store, chunker=chunker, embedder=minilm)
    dumped = report.to_json() + "\n".join(r.getMessage() for r in caplog.records)
    json.loads(report.to_json())
    words = GUIDE_V2.split()
    phrases = {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}
    leaked = [p for p in phrases if p in dumped]
    assert not leaked, leaked[:5]


def _numbered(doc: int, edited: bool) -> Document:
    """A document of distinct paragraphs (each chunk's text, and vector, is its own)."""
    notes = [f"Document {doc}, note {j}: the sync job keeps this paragraph while its text "
             f"stays the same{' (edited)' if edited and j % 3 == 0 else ''}." for j in range(36)]
    return Document(f"d{doc}", "\n\n".join(notes))


@pytest.fixture(scope="module")
def numbered_cache(minilm: Any, chunker: Any) -> MemoryCache:
    """The vectors of both revisions of 12 numbered documents, embedded once."""
    from qdrant_client import QdrantClient

    cache = MemoryCache()
    scratch = fresh(QdrantStore(QdrantClient(":memory:"), "scratch"), minilm)
    for edited in (False, True):
        sync([_numbered(i, edited) for i in range(12)], scratch, chunker=chunker,
             embedder=minilm, cache=cache)
    return cache


@pytest.mark.parametrize("make_store", ["qdrant-memory", "qdrant-path", "chroma-persistent"],
                         indirect=True)
def test_threads_syncing_through_one_client_keep_every_vector_right(
    make_store: StoreFactory, minilm: Any, chunker: Any, numbered_cache: MemoryCache
) -> None:
    """Embedded Qdrant is not thread-safe: unserialised, two syncs through one client left
    points holding another chunk's vector, which later syncs reported as unchanged."""
    import threading

    store = fresh(make_store("langchain"), minilm)
    sync([_numbered(i, False) for i in range(12)], store, chunker=chunker, embedder=minilm,
         cache=numbered_cache)
    edited = [_numbered(i, True) for i in range(12)]
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sync(edited, store, chunker=chunker, embedder=minilm, cache=numbered_cache)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    points = [p for doc in edited for p in store.get_points(doc.doc_id)]
    keys = [p.payload.input_key for p in points]
    stored = store.get_vectors(keys, minilm.model_id)
    made = numbered_cache.get_many(keys, minilm.model_id, minilm.dimension)
    for key in keys:
        want = made[key] / np.linalg.norm(made[key])
        assert float(np.dot(stored[key] / np.linalg.norm(stored[key]), want)) > 0.9999, key
    again = sync(edited, store, chunker=chunker, embedder=minilm, cache=numbered_cache)
    assert again.documents["unchanged"] == 12 and again.stale_check == "passed"


def test_totals_count_an_input_two_documents_share_once(minilm: Any, chunker: Any) -> None:
    from qdrant_client import QdrantClient

    store = fresh(QdrantStore(QdrantClient(":memory:"), "c"), minilm)
    shared = "A page that sits in two places of the knowledge base."
    recorder = RecordingEmbedder(minilm)
    report = sync([Document("a", NOTES), Document("b", shared), Document("copy-of-b", shared)],
                  store, chunker=chunker, embedder=recorder)
    sent = recorder.embedded
    assert len(sent) == len(set(sent)) == report.inputs["embedded"]
    assert report.tokens_embedded == sum(minilm.count_tokens(t) for t in sent)
    assert report.tokens_total == report.tokens_embedded  # a first sync embeds everything
    assert sum(d.embedded for d in report.per_document) == report.inputs["embedded"] + 1


def test_changed_bytes_count_the_edit_not_its_line(minilm: Any, chunker: Any) -> None:
    from qdrant_client import QdrantClient

    store = fresh(QdrantStore(QdrantClient(":memory:"), "c"), minilm)
    cache = MemoryCache()
    base = "One long paragraph on a single line, " * 12 + "and its end."
    sync([Document("d", base)], store, chunker=chunker, embedder=minilm, cache=cache)
    cases = [
        (base.replace("its end", "its final end"), len("final")),  # a word inside a line
        (base.replace("single line, ", "", 1), len("singleline,")),  # a deletion counts
        (base.replace(" ", "  "), 0),  # whitespace is no edit
    ]
    for text, changed in cases:
        report = sync([Document("d", text)], store, chunker=chunker, embedder=minilm,
                      cache=cache, dry_run=True)
        assert report.per_document[0].changed_bytes == changed


class CountingChunker:
    """A real chunker that counts the texts it is asked to chunk."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.chunked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def chunk(self, text: str) -> Any:
        self.chunked.append(text)
        return self.inner.chunk(text)


def test_unchanged_documents_are_planned_without_chunking(make_store: StoreFactory,
                                                          minilm: Any, chunker: Any) -> None:
    """Stored points that tile this very text under this policy are its chunks: a re-sync
    chunks only what changed, and ends where chunking everything would."""
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    docs = [Document("g", GUIDE_V1), Document("n", NOTES)]
    sync(docs, store, chunker=chunker, embedder=minilm, cache=cache)
    counting = CountingChunker(chunker)
    report = sync(docs, store, chunker=counting, embedder=minilm, cache=cache)
    assert counting.chunked == [] and report.documents["unchanged"] == 2
    assert report.tokens_total == sum(c.tokens for d in docs for c in chunker.chunk(d.text))

    edited = [Document("g", GUIDE_V2), docs[1]]
    report = sync(edited, store, chunker=counting, embedder=minilm, cache=cache)
    assert counting.chunked == [GUIDE_V2] and report.documents["changed"] == 1
    reference = fresh(make_store("langchain"), minilm)
    sync(edited, reference, chunker=chunker, embedder=minilm, cache=cache)
    assert snapshot(store) == snapshot(reference)


def test_stored_points_that_prove_nothing_are_chunked_again(make_store: StoreFactory,
                                                            minilm: Any, chunker: Any) -> None:
    """A caller's own revision label, another policy, or a tiling with a hole (a point
    deleted behind rechunk's back) is no proof: the document is chunked and repaired."""
    store = fresh(make_store("langchain"), minilm)
    cache = MemoryCache()
    labelled = Document("g", GUIDE_V1, revision="v1")
    sync([labelled, Document("n", NOTES)], store, chunker=chunker, embedder=minilm, cache=cache)
    counting = CountingChunker(chunker)
    sync([labelled], store, chunker=counting, embedder=minilm, cache=cache)
    assert counting.chunked == [GUIDE_V1]

    points = store.get_points("n")
    store.delete([points[-1].id])
    counting.chunked.clear()
    report = sync([Document("n", NOTES)], store, chunker=counting, embedder=minilm, cache=cache)
    assert counting.chunked == [NOTES] and report.chunks["added"] == 1
    assert [p.id for p in store.get_points("n")] == [p.id for p in points]

    other = policy_for(minilm, "fixed")
    counting = CountingChunker(other)
    report = sync([Document("n", NOTES)], store, chunker=counting, embedder=minilm, cache=cache)
    assert counting.chunked == [NOTES] and report.documents["changed"] == 1
    assert {p.payload.policy for p in store.get_points("n")} == {other.policy_id}


def test_documents_are_synced_in_batches(make_store: StoreFactory, minilm: Any, chunker: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync reads, publishes and verifies a batch of documents at a time (memory grows
    with the batch), counts an input that several batches share once, and ends exact."""
    import sys

    sync_module = sys.modules["rechunk.sync.stages"]

    monkeypatch.setattr(sync_module, "DOC_BATCH", 3)
    store = fresh(make_store("langchain"), minilm)
    docs = [Document(f"d{i}.md", f"# Note {i}\n\n{NOTES}") for i in range(7)]
    recorder = RecordingEmbedder(minilm)
    counting = FaultyStore(store)
    report = sync(docs, counting, chunker=chunker, embedder=recorder)
    assert counting.calls.count("write") == 3
    if hasattr(store, "writer_lock"):
        # Chroma: under its lock an empty collection needs no read before planning, and
        # the check after publishing reads by id
        assert "get_points_many" not in counting.calls
        assert counting.calls.count("present_ids") == 3
    else:
        assert counting.calls.count("get_points_many") == 6
    assert len(recorder.embedded) == len(set(recorder.embedded))  # NOTES' chunks embedded once
    assert report.inputs["embedded"] == len(recorder.embedded)
    assert report.inputs["from_store"] == 0  # later batches reuse them, counted once
    assert report.stale_check == "passed" and report.documents["new"] == 7
    reference = fresh(make_store("langchain"), minilm)
    monkeypatch.setattr(sync_module, "DOC_BATCH", 256)
    sync(docs, reference, chunker=chunker, embedder=minilm)
    assert snapshot(store) == snapshot(reference)


@pytest.fixture
def ahead(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``rechunk.sync.ahead``, with batches of 4 documents and a helper for 2 of them on 2 cores."""
    monkeypatch.setattr(importlib.import_module("rechunk.sync.stages"), "DOC_BATCH", 4)
    module = importlib.import_module("rechunk.sync.ahead")
    monkeypatch.setattr(module, "MIN_DOCUMENTS", 2)
    monkeypatch.setattr(module, "cores", lambda: 2)
    return module


@pytest.mark.parametrize("helper", ["works", "dies"])
def test_later_batches_are_chunked_ahead_in_a_helper_process(
        make_store: StoreFactory, minilm: Any, ahead: Any, helper: str,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """With more than one batch, a helper process chunks the next batch while this one is
    published; the sync writes what it writes without the helper, even when the helper
    dies on the way (the sync then chunks those documents itself)."""
    started: list[Any] = []
    submit = ahead.ChunkAhead.submit

    def submit_and_watch(self: Any, texts: Any) -> bool:
        sent = submit(self, texts)
        if self.process is not None and self.process not in started:
            started.append(self.process)
            if helper == "dies":
                self.process.kill()
        return sent

    monkeypatch.setattr(ahead.ChunkAhead, "submit", submit_and_watch)
    chunker = policy_for(minilm)
    cache = MemoryCache()
    docs = [Document(f"d{i}.md", f"# Note {i}\n\n{NOTES}\n\nLast words of note {i}.")
            for i in range(11)]
    store = fresh(make_store("langchain"), minilm)
    with caplog.at_level(logging.WARNING, "rechunk.sync"):
        report = sync(docs, store, chunker=chunker, embedder=minilm, cache=cache)
    assert len(started) == 1 and started[0].poll() is not None  # one helper, ended
    assert ("chunking helper gave no answer" in caplog.text) == (helper == "dies")
    assert report.documents["new"] == 11 and report.stale_check == "passed"

    monkeypatch.setattr(ahead, "MIN_DOCUMENTS", 10**9)  # no helper
    reference = fresh(make_store("langchain"), minilm)
    alone = sync(docs, reference, chunker=chunker, embedder=minilm, cache=cache)
    assert snapshot(store) == snapshot(reference)
    assert report.chunks == alone.chunks and report.tokens_total == alone.tokens_total


def test_a_sync_that_fails_ends_its_chunking_helper(minilm: Any, ahead: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that fails while the helper chunks the next batch: the error is the
    store's, and no helper process outlives the sync."""
    from qdrant_client import QdrantClient

    helpers: list[Any] = []
    close = ahead.ChunkAhead.close

    def close_and_keep(self: Any) -> None:
        helpers.append(self.process)
        close(self)

    monkeypatch.setattr(ahead.ChunkAhead, "close", close_and_keep)
    docs = [Document(f"d{i}.md", f"# Note {i}\n\n{NOTES}") for i in range(11)]
    chunker, cache = policy_for(minilm), MemoryCache()
    watched = FaultyStore(fresh(QdrantStore(QdrantClient(":memory:"), "c"), minilm))
    sync(docs, watched, chunker=chunker, embedder=minilm, cache=cache)
    first_write = watched.calls.index("write")  # the helper is chunking the next batch
    store = fresh(QdrantStore(QdrantClient(":memory:"), "c"), minilm)
    with pytest.raises(InjectedFault):
        sync(docs, FaultyStore(store, first_write), chunker=chunker, embedder=minilm,
             cache=cache)
    assert len(helpers) == 2 and all(p is not None and p.poll() is not None for p in helpers)


def test_an_embedder_may_take_larger_calls(minilm: Any, chunker: Any) -> None:
    """An embedder that names ``embed_batch`` (OpenAIEmbedder: requests in flight times
    their size) gets calls that large; others get 32 inputs a call."""
    from qdrant_client import QdrantClient

    docs = [Document(f"d{i}.md", f"# Note {i}\n\n" + NOTES.replace("Note", f"N{i}"))
            for i in range(30)]
    for batch, expected in ((None, 32), (50, 50)):
        store = fresh(QdrantStore(QdrantClient(":memory:"), "c"), minilm)
        recorder = RecordingEmbedder(minilm)
        if batch is not None:
            recorder.embed_batch = batch
        sync(docs, store, chunker=chunker, embedder=recorder)
        assert len(recorder.embedded) > expected
        assert max(len(call) for call in recorder.calls) == expected


class _CountingChroma(ChromaStore):
    """A real ChromaStore that counts its reads, and can be made to lose its deletes or
    one new point of a write (store faults the stale check must report)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[str] = []
        self.looked_up: list[list[str]] = []
        self.read_at: list[list[str]] = []
        self.lose_deletes = False
        self.lose_one_write = False

    def get_points_many(self, doc_ids: Sequence[str]) -> Any:
        self.reads.append("get_points_many")
        return super().get_points_many(doc_ids)

    def present_ids(self, ids: Sequence[str]) -> set[str]:
        self.reads.append("present_ids")
        return super().present_ids(ids)

    def get_vectors(self, input_keys: Sequence[str], model_id: str) -> Any:
        self.looked_up.append(sorted(input_keys))
        return super().get_vectors(input_keys, model_id)

    def get_vectors_at(self, points: Mapping[str, str], model_id: str) -> Any:
        self.read_at.append(sorted(points))
        return super().get_vectors_at(points, model_id)

    def write(self, points: Any, **kwargs: Any) -> None:
        new = [i for i, p in enumerate(points) if p.vector is not None]
        if self.lose_one_write and new:
            points = [p for i, p in enumerate(points) if i != new[0]]
        super().write(points, **kwargs)

    def delete(self, ids: Any, **kwargs: Any) -> None:
        if not self.lose_deletes:
            super().delete(ids, **kwargs)


@pytest.mark.parametrize("make_store", ["chroma-persistent"], indirect=True)
def test_a_chroma_sync_reads_only_what_the_writer_lock_leaves_open(
    make_store: StoreFactory, minilm: Any, chunker: Any, numbered_cache: MemoryCache
) -> None:
    """Under the writer lock an empty collection holds only what the sync writes (no read
    before planning), and the check after publishing compares ids; a re-sync reads the
    stored points to plan, as before."""
    store = fresh(make_store("langchain"), minilm)
    counting = _CountingChroma(store._client, store.collection)
    docs = [_numbered(i, False) for i in range(4)]
    first = sync(docs, counting, chunker=chunker, embedder=minilm, cache=numbered_cache)
    assert first.documents["new"] == 4 and first.stale_check == "passed"
    assert counting.reads == ["present_ids"]  # one batch: no plan read, the check by id
    counting.reads.clear()
    edited = [_numbered(0, True), *docs[1:]]
    second = sync(edited, counting, chunker=chunker, embedder=minilm, cache=numbered_cache)
    assert (second.documents["changed"], second.documents["unchanged"]) == (1, 3)
    assert counting.reads == ["get_points_many", "present_ids"]
    assert sync(edited, counting, chunker=chunker, embedder=minilm,
                cache=numbered_cache).documents["unchanged"] == 4


@pytest.mark.parametrize("make_store", ["chroma-persistent"], indirect=True)
def test_a_chroma_prune_reads_ids_and_the_doc_ids_of_the_others_only(
    make_store: StoreFactory, minilm: Any, chunker: Any, numbered_cache: MemoryCache,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune on Chroma reads every id (pages of ids alone), then the doc_ids of the
    records that are not the given documents' points, by id: it deletes every point of
    the documents it was not given, keeps ``keep`` and leaves another tool's record,
    even one under a gone document's doc_id, alone."""
    monkeypatch.setattr(chroma_adapter, "_READ_PAGE", 2)  # ids in pages of 16 records
    store = fresh(make_store("langchain"), minilm)
    docs = [_numbered(i, False) for i in range(4)]
    sync(docs, store, chunker=chunker, embedder=minilm, cache=numbered_cache)
    points = {d.doc_id: {p.id for p in store.get_points(d.doc_id)} for d in docs}
    theirs = str(uuid.uuid4())
    raw = store._client.get_collection(store.collection, embedding_function=None)
    raw.add(ids=[theirs], embeddings=[[0.5] * minilm.dimension], metadatas=[{"doc_id": "d3"}],
            documents=["another tool's"])
    counting = _CountingChroma(store._client, store.collection)
    asked: list[list[str]] = []
    monkeypatch.setattr(counting, "doc_ids_of",
                        lambda ids: asked.append(list(ids)) or ChromaStore.doc_ids_of(counting, ids))
    report = sync(docs[:2], counting, chunker=chunker, embedder=minilm, cache=numbered_cache,
                  prune=True, keep=["d2"])
    assert report.documents["deleted"] == 1 and report.chunks["deleted"] == len(points["d3"])
    assert {r.doc_id for r in report.per_document if r.status == "deleted"} == {"d3"}
    assert store.doc_ids() == {"d0", "d1", "d2"}
    assert raw.get(ids=[theirs])["ids"] == [theirs]
    # only the ids that are not the given documents' points were asked for
    assert sorted(i for call in asked for i in call) == sorted(
        points["d2"] | points["d3"] | {theirs}
    )
    assert "get_points_many" not in counting.reads[1:]  # the plan's read only


def test_the_memory_of_what_a_sync_published_keeps_the_newest_within_its_bounds() -> None:
    from rechunk.sync.vectors import _Published

    def vector(i: int) -> np.ndarray:
        return np.full(4, i, dtype=np.float32)  # 16 bytes

    class ReadsById:  # the one method the memory asks a store for
        def get_vectors_at(self, points: Mapping[str, str], model_id: str) -> Any:
            return {key: vector(int(pid[1:])) for key, pid in points.items()}

    memory = _Published(ReadsById(), limit=40, ids=2)  # type: ignore[arg-type]  # room for two
    memory.add({"a": vector(1), "b": vector(2)}, {"a": "p1", "b": "p2"})
    memory.add({"a": vector(9), "c": vector(3)}, {"a": "p9", "c": "p3"})  # "a" kept as first
    assert memory.get("a") is None  # the oldest let go for "c"
    assert [memory.get(k)[0] for k in ("b", "c")] == [2, 3]  # type: ignore[index]
    assert memory._ids == {"b": "p2", "c": "p3"}
    assert {k: v[0] for k, v in memory.read(["a", "b"], "m").items()} == {"b": 2}
    # a store that cannot read by id: no ids kept, no answer
    unable = _Published(object(), limit=40, ids=2)  # type: ignore[arg-type]
    unable.add({"a": vector(1)}, {"a": "p1"})
    assert unable._ids == {} and unable.read(["a"], "m") == {}
    spent = _Published(ReadsById(), limit=0, ids=0)  # type: ignore[arg-type]
    spent.add({"a": vector(1)}, {"a": "p1"})
    assert spent.get("a") is None and spent._ids == {}


@pytest.mark.parametrize("remembered", ["vectors", "point-ids", "spent"])
@pytest.mark.parametrize("make_store", ["chroma-persistent"], indirect=True)
def test_into_an_empty_locked_collection_only_inputs_already_published_are_looked_up(
    make_store: StoreFactory,
    minilm: Any,
    chunker: Any,
    monkeypatch: pytest.MonkeyPatch,
    remembered: str,
) -> None:
    """The collection holds only what earlier batches of this sync published: the second
    batch reuses the vectors of the inputs the first one wrote, from the sync's memory of
    what it published, or, past the vectors it keeps, read by the ids of the points that
    hold them, and, once that memory is spent too, by looking up those inputs (and no
    other) in the collection."""
    import importlib

    module = importlib.import_module("rechunk.sync.stages")
    monkeypatch.setattr(module, "DOC_BATCH", 2)
    if remembered != "vectors":
        monkeypatch.setattr(module, "PUBLISHED_BYTES", 0)
    if remembered == "spent":
        monkeypatch.setattr(module, "PUBLISHED_IDS", 0)
    store = fresh(make_store("langchain"), minilm)
    counting = _CountingChroma(store._client, store.collection)
    d0, d1 = _numbered(0, False), _numbered(1, False)
    again = Document("again.md", d0.text)  # every input of d0 once more, in batch two
    report = sync([d0, d1, again, _numbered(2, False)], counting, chunker=chunker,
                  embedder=minilm)  # no cache: the store is where a vector is reused from
    assert counting.reads == ["present_ids", "present_ids"]  # no read before planning
    keys = sorted({p.payload.input_key for p in counting.get_points("d0")})
    assert counting.read_at == ([keys] if remembered == "point-ids" else [])
    assert counting.looked_up == ([keys] if remembered == "spent" else [])
    reused = {r.doc_id: r.from_store for r in report.per_document}
    assert reused == {"d0": 0, "d1": 0, "again.md": len(keys), "d2": 0}
    distinct = {p.payload.input_key for d in ("d0", "d1", "d2") for p in counting.get_points(d)}
    assert report.inputs["embedded"] == len(distinct) and report.stale_check == "passed"


@pytest.mark.parametrize("make_store", ["chroma-persistent"], indirect=True)
@pytest.mark.parametrize("fault", ["lose_deletes", "lose_one_write"])
def test_the_check_by_ids_still_names_a_fault(
    make_store: StoreFactory, minilm: Any, chunker: Any, numbered_cache: MemoryCache,
    fault: str
) -> None:
    """Ids that are not exactly the planned ones send the check back to the full re-read,
    which names the document and counts: a stale point left, or a point missing."""
    store = fresh(make_store("langchain"), minilm)
    counting = _CountingChroma(store._client, store.collection)
    sync([_numbered(0, False)], counting, chunker=chunker, embedder=minilm, cache=numbered_cache)
    setattr(counting, fault, True)
    with pytest.raises(StaleCheckError, match=r"document 'd0' holds") as caught:
        sync([_numbered(0, True)], counting, chunker=chunker, embedder=minilm,
             cache=numbered_cache)
    # running it again repairs the store: a service that retries TransientError retries it
    assert isinstance(caught.value, TransientError)
    report = caught.value.report
    wrong = report.chunks["deleted"] if fault == "lose_deletes" else 0
    assert report.stale_points == wrong + (fault == "lose_one_write")
    assert counting.reads[-2:] == ["present_ids", "get_points_many"]


def test_entry_points_refuse_arguments_of_the_wrong_kind(tmp_path: Path, minilm: Any,
                                                         chunker: Any) -> None:
    """A typed error, not an AttributeError or TypeError from deep inside, and for a flag
    given as a str ("no" is truthy) nothing dropped."""
    from qdrant_client import QdrantClient

    from rechunk import SQLiteCache, edit_fraction, input_key, recompute_fraction, reindex

    calls: list[tuple[type[Exception], Callable[[], Any]]] = [
        (ConfigError, lambda: policy_for(None)),  # type: ignore[arg-type]
        (InputError, lambda: SQLiteCache(5)),  # type: ignore[arg-type]
        (InputError, lambda: SQLiteCache(tmp_path / "c.sqlite", readonly="no")),  # type: ignore[arg-type]
        (ConfigError, lambda: input_key(None, "t")),  # type: ignore[arg-type]
        (InputError, lambda: input_key("m", None)),  # type: ignore[arg-type]
        (InputError, lambda: edit_fraction(None, "x")),  # type: ignore[arg-type]
        (InputError, lambda: recompute_fraction("a", "b")),  # type: ignore[arg-type]
    ]
    for error, call in calls:
        with pytest.raises(error):
            call()
    client = QdrantClient(":memory:")
    store = QdrantStore(client, "kb")
    reindex([Document("a", NOTES)], store, chunker, minilm)
    live = client.get_aliases().aliases
    with pytest.raises(ConfigError, match="drop_old must be True or False"):
        reindex([Document("a", NOTES)], store, policy_for(minilm, "fixed"), minilm,
                drop_old="no")  # type: ignore[arg-type]  # fmt: skip
    assert client.get_aliases().aliases == live
    assert len(client.get_collections().collections) == 1
