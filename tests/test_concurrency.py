"""Concurrent writers of one document: after every writer has returned, the store holds
exactly the chunks of the newest version any of them synced; a writer that lost the race
says so (its document "skipped") and leaves nothing behind.

Threads share one embedded Qdrant client (conditional writes by version); processes share
one real Chroma server (a writer lock kept in the server). Bounded: a few rounds each."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chroma_server import running_chroma
from concurrency_helpers import TableEmbedder, chroma_worker, version_text

from rechunk import Document, StoreError, policy_for, sync
from rechunk.adapters.qdrant import QdrantStore, _client_lock
from rechunk.sync.planning import _plan

VERSIONS = (2, 3, 4)


@pytest.fixture(scope="module")
def table(minilm: Any) -> dict[str, np.ndarray]:
    """Real vectors of every chunk of every version."""
    chunker = policy_for(TableEmbedder(minilm.model_id, minilm.dimension, {}), "recursive")
    texts = sorted({c.text for v in (1, *VERSIONS) for c in chunker.chunk(version_text(v))})
    return dict(zip(texts, np.asarray(minilm.embed(texts), dtype=np.float32)))


@pytest.fixture(scope="module")
def embedder(minilm: Any, table: dict[str, np.ndarray]) -> TableEmbedder:
    return TableEmbedder(minilm.model_id, minilm.dimension, table)


def expected_ids(doc_id: str, version: int, embedder: Any) -> set[str]:
    chunker = policy_for(embedder, "recursive")
    doc = Document(doc_id, version_text(version), version=version)
    return set(_plan(doc, chunker.chunk(doc.text), chunker, embedder.model_id, []).ids)


def check_newest(store: Any, doc_id: str, newest: int, embedder: Any) -> None:
    """Exactly the newest version's chunks: none missing, none extra, no other revision."""
    points = store.get_points(doc_id)
    versions = sorted({p.payload.version for p in points}, key=str)
    assert versions == [newest], f"{doc_id}: revisions mixed: versions {versions}"
    assert {p.id for p in points} == expected_ids(doc_id, newest, embedder), f"{doc_id}: ids"
    assert len({p.payload.revision for p in points}) == 1


class ServerPath(QdrantStore):
    """Embedded Qdrant driven the way a Qdrant server is: payload updates and deletes as
    filtered requests that carry the version condition (the client's lock still held,
    since embedded Qdrant is not thread-safe)."""

    def _is_embedded(self) -> bool:
        return False

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        with _client_lock(self._client), super()._errors(action):
            yield


class PlanThenWait(QdrantStore):
    """A writer that stops before its first write until every writer has planned."""

    barrier: threading.Barrier

    def write(self, points: Any, **kwargs: Any) -> None:
        if not getattr(self, "_waited", False):
            self._waited = True
            self.barrier.wait(timeout=60)
        super().write(points, **kwargs)


@pytest.mark.parametrize("kind", [QdrantStore, ServerPath])
def test_both_read_before_either_writes(kind: type[QdrantStore], embedder: Any) -> None:
    """The issue's deterministic repro: versions 3 and 2 both plan against version 1."""
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    chunker = policy_for(embedder, "recursive")
    base = kind(client, "docs")
    base.ensure_collection(embedder.dimension)
    sync([Document("d", version_text(1), version=1)], base, chunker=chunker, embedder=embedder)
    for order in ((3, 2), (2, 3)):
        barrier = threading.Barrier(2)
        results: dict[int, Any] = {}

        def writer(version: int, results: dict[int, Any] = results,
                   barrier: threading.Barrier = barrier) -> None:
            store = type("W", (PlanThenWait, kind), {"barrier": barrier})(client, "docs")
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
        check_newest(base, "d", 3, embedder)
        assert results[3].stale_check == "passed"
        lost = results[2]  # finished first, or saw version 3 and removed its own points
        assert not isinstance(lost, Exception), lost
        assert lost.per_document[0].status in ("changed", "skipped")
        # back to version 1 for the other order
        base.delete([p.id for p in base.get_points("d")])
        sync([Document("d", version_text(1), version=1)], base, chunker=chunker,
             embedder=embedder)


@pytest.mark.parametrize("kind", [QdrantStore, ServerPath])
def test_threads_sharing_an_embedded_qdrant_client(kind: type[QdrantStore],
                                                   embedder: Any) -> None:
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    chunker = policy_for(embedder, "recursive")
    store = kind(client, "docs")
    store.ensure_collection(embedder.dimension)
    rng = random.Random(16)
    started = time.monotonic()
    for round_ in range(8):
        docs = [f"r{round_}-{i}" for i in range(3)]
        sync([Document(d, version_text(1), version=1) for d in docs], store, chunker=chunker,
             embedder=embedder)
        versions = list(VERSIONS)
        rng.shuffle(versions)
        barrier = threading.Barrier(len(versions))
        outcome: dict[int, Any] = {}

        def writer(version: int, outcome: dict[int, Any] = outcome,
                   barrier: threading.Barrier = barrier, docs: list[str] = docs) -> None:
            barrier.wait(timeout=60)
            time.sleep(rng.random() * 0.01)
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
        newest = max(VERSIONS)
        assert not isinstance(outcome[newest], Exception), outcome[newest]
        for doc_id in docs:
            check_newest(store, doc_id, newest, embedder)
        for version, result in outcome.items():
            assert not isinstance(result, Exception), (version, result)
            # an older writer either finished before the newest wrote, or lost: skipped
            assert {d.status for d in result.per_document} <= {"changed", "skipped"}
    assert time.monotonic() - started < 300


# --------------------------------------------------------------------------- settling, in order
# Deterministic interleavings of the writers above: the test decides when each request lands.


class Paused(QdrantStore):
    """A writer that stops twice for the test to order it against others: before its first
    write (it has planned) and before its first read after writing (it has published; that
    read starts its settling)."""

    def __init__(self, client: Any, collection: str) -> None:
        super().__init__(client, collection)
        self.planned, self.write_now = threading.Event(), threading.Event()
        self.published, self.settle_now = threading.Event(), threading.Event()

    def write(self, points: Any, **kwargs: Any) -> None:
        if not self.planned.is_set():
            self.planned.set()
            assert self.write_now.wait(60)
        super().write(points, **kwargs)

    def get_points_many(self, doc_ids: Any) -> Any:
        if self.planned.is_set() and not self.published.is_set():
            self.published.set()
            assert self.settle_now.wait(60)
        return super().get_points_many(doc_ids)


class Between(QdrantStore):
    """A writer through whose settling other writers' requests land: before each of its
    reads after its first write, the next of ``requests`` runs."""

    requests: list[Callable[[], Any]]

    def write(self, points: Any, **kwargs: Any) -> None:
        super().write(points, **kwargs)
        self.wrote = True

    def get_points_many(self, doc_ids: Any) -> Any:
        if getattr(self, "wrote", False) and self.requests:
            self.requests.pop(0)()
        return super().get_points_many(doc_ids)


def fresh_store(embedder: Any) -> tuple[Any, QdrantStore, Any]:
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    store = QdrantStore(client, "docs")
    store.ensure_collection(embedder.dimension)
    return client, store, policy_for(embedder, "recursive")


def test_an_older_writer_overwrote_a_point_the_newest_updated(embedder: Any) -> None:
    """The interleaving of the threads test's failures under load (3 in 15 runs): version
    4 plans a payload-only update of version 1's points X (chunks it keeps); version 2,
    which has no such chunks, deletes X; version 3 plans X as new; version 4's update
    finds X gone (skipped) and version 3 then writes X. Version 4's settling finds its own
    points X holding version 3 and writes them again: its check passes, and version 3,
    seeing version 4, leaves nothing."""
    client, store, chunker = fresh_store(embedder)
    ids = {v: expected_ids("d", v, embedder) for v in (1, 2, 3, 4)}
    assert (ids[1] & ids[3] & ids[4]) - ids[2]  # the points X
    sync([Document("d", version_text(1), version=1)], store, chunker=chunker, embedder=embedder)
    results: dict[int, Any] = {}

    def writer(version: int, through: Paused) -> threading.Thread:
        def run() -> None:
            doc = Document("d", version_text(version), version=version)
            try:
                results[version] = sync([doc], through, chunker=chunker, embedder=embedder)
            except Exception as exc:
                results[version] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    newest, older = Paused(client, "docs"), Paused(client, "docs")
    threads = [writer(4, newest)]
    assert newest.planned.wait(60)
    sync([Document("d", version_text(2), version=2)], store, chunker=chunker, embedder=embedder)
    threads.append(writer(3, older))
    assert older.planned.wait(60)
    for step in (newest, older):  # version 4 publishes, then version 3
        step.write_now.set()
        assert step.published.wait(60)
    for step, thread in zip((newest, older), threads):  # version 4 settles, then version 3
        step.settle_now.set()
        thread.join(timeout=60)
    assert not isinstance(results[4], Exception), results[4]
    assert results[4].stale_check == "passed"
    assert not isinstance(results[3], Exception), results[3]
    assert results[3].per_document[0].status == "skipped"
    check_newest(store, "d", 4, embedder)


def test_older_writes_landing_through_the_newest_settling(embedder: Any) -> None:
    """Versions 2 and 3 of a new document, planned before version 4 wrote, write their
    points (those version 4 does not have) one request each, one landing before every
    read of version 4's settling: 12 in all, more than the 3 rounds settling once had.
    Version 4 deletes them as they come and its check passes; the store holds exactly
    version 4."""
    from rechunk.sync.publishing import _guarded
    from rechunk.sync.store import PointWrite

    client, store, chunker = fresh_store(embedder)
    newest_ids = expected_ids("d", 4, embedder)
    one_by_one = QdrantStore(client, "docs")
    requests: list[Callable[[], Any]] = []
    for version in (2, 3):
        doc = Document("d", version_text(version), version=version)
        plan = _plan(doc, chunker.chunk(doc.text), chunker, embedder.model_id, [])
        for w in plan.writes:
            if w.id not in newest_ids:
                vector = embedder.table[plan.needs_vector[w.payload.input_key]]
                point = PointWrite(w.id, w.payload, vector)
                requests.append(partial(one_by_one.write, [point], **_guarded(store, version)))
    assert len(requests) == 12
    newest = Between(client, "docs")
    newest.requests = requests
    report = sync([Document("d", version_text(4), version=4)], newest, chunker=chunker,
                  embedder=embedder)
    assert not requests  # every one landed during the settling
    assert report.stale_check == "passed"
    check_newest(store, "d", 4, embedder)


def test_a_newer_version_written_while_settling_supersedes(embedder: Any) -> None:
    """A point of a newer version found while settling: the writer reports its document
    superseded (skipped) and leaves nothing of its own."""
    client, store, chunker = fresh_store(embedder)
    sync([Document("d", version_text(1), version=1)], store, chunker=chunker, embedder=embedder)
    older = Between(client, "docs")
    older.requests = [partial(sync, [Document("d", version_text(4), version=4)], store,
                              chunker=chunker, embedder=embedder)]
    report = sync([Document("d", version_text(3), version=3)], older, chunker=chunker,
                  embedder=embedder)
    assert not older.requests
    assert report.per_document[0].status == "skipped"
    assert "superseded" in (report.per_document[0].reason or "")
    check_newest(store, "d", 4, embedder)


class Reversed:
    """Another model: MiniLM's vectors reversed (another space), under its own id."""

    model_id = "test/minilm-reversed"

    def __init__(self, minilm: Any) -> None:
        self.minilm, self.dimension = minilm, minilm.dimension
        self.max_input_tokens, self.special_tokens = 256, 2

    def embed(self, texts: Any) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(self.minilm.embed(texts))[:, ::-1])


class WritesAfter(QdrantStore):
    """A writer that lets ``meanwhile`` run just before its first write (it has checked
    the collection and planned)."""

    meanwhile: list[Callable[[], Any]]

    def write(self, points: Any, **kwargs: Any) -> None:
        while self.meanwhile:
            self.meanwhile.pop(0)()
        super().write(points, **kwargs)


class SamplesOnly(QdrantStore):
    """A store without ``other_model``: the check after publishing asks collection_info."""

    other_model = None  # type: ignore[assignment]


@pytest.mark.parametrize("kind", [QdrantStore, ServerPath, SamplesOnly])
def test_two_models_racing_into_a_new_collection_leave_one(kind: type[QdrantStore],
                                                           minilm: Any) -> None:
    """Two first syncs of one collection with different models both find it without
    rechunk points; the one that checks after publishing and finds the other's points
    removes its own and raises, whichever of them that is."""
    from qdrant_client import QdrantClient

    other = Reversed(minilm)
    notes = [f"# Note {i}\n\nA made-up note, number {i}, on gears and levers." for i in range(3)]
    docs = {
        minilm.model_id: [Document(f"m{i}", text) for i, text in enumerate(notes)],
        other.model_id: [Document(f"r{i}", text) for i, text in enumerate(notes)],
    }
    for first in (minilm, other):  # the sync that starts first and finishes last
        second = other if first is minilm else minilm
        client = QdrantClient(":memory:")
        store = type("S", (WritesAfter, kind), {"meanwhile": []})(client, "docs")
        store.ensure_collection(minilm.dimension)
        results: dict[str, Any] = {}

        def run(model: Any, results: dict[str, Any] = results, store: Any = store) -> None:
            try:
                results[model.model_id] = sync(docs[model.model_id], store,
                                               chunker=policy_for(model), embedder=model)
            except Exception as exc:
                results[model.model_id] = exc

        # ``first`` checks the collection, then ``second`` syncs from start to end
        store.meanwhile.append(lambda second=second: run(second))
        run(first)
        assert results[second.model_id].stale_check == "passed"
        lost = results[first.model_id]
        assert isinstance(lost, StoreError) and re.search(r"removed the [1-9]\d* point", str(lost))
        assert f"another model ({second.model_id})" in str(lost)
        held = {p.payload.model_id for d in store.doc_ids() for p in store.get_points(d)}
        assert held == {second.model_id}
        assert store.doc_ids() == {d.doc_id for d in docs[second.model_id]}
        assert client.count("docs").count == results[second.model_id].chunks["added"]
        with pytest.raises(StoreError, match="written by another model"):
            sync(docs[first.model_id], store, chunker=policy_for(first), embedder=first)
        client.close()


class ReadsAfter(QdrantStore):
    """A writer that lets ``meanwhile`` run just before its first read of stored points
    (it has checked the collection)."""

    meanwhile: list[Callable[[], Any]]

    def get_points_many(self, doc_ids: Any) -> Any:
        while self.meanwhile:
            self.meanwhile.pop(0)()
        return super().get_points_many(doc_ids)


def test_a_sync_never_deletes_the_points_another_model_wrote(minilm: Any) -> None:
    """Another model syncs the same documents between this sync's check of the empty
    collection and its read of them: this sync's plan must not take the other model's
    points for an old revision of its own and delete them (the other sync had reported
    success); it keeps off them, finds them after publishing, and removes its own."""
    from qdrant_client import QdrantClient

    other = Reversed(minilm)
    notes = [Document(f"n{i}", f"# Note {i}\n\nA made-up note, number {i}.") for i in range(3)]
    client = QdrantClient(":memory:")
    store = type("S", (ReadsAfter,), {"meanwhile": []})(client, "docs")
    store.ensure_collection(minilm.dimension)
    theirs: list[Any] = []
    store.meanwhile.append(
        lambda: theirs.append(sync(notes, store, chunker=policy_for(other), embedder=other))
    )
    with pytest.raises(StoreError, match=r"another model \(test/minilm-reversed\)"):
        sync(notes, store, chunker=policy_for(minilm), embedder=minilm)
    assert theirs[0].stale_check == "passed"
    held = store.get_points_many(["n0", "n1", "n2"])
    assert {p.payload.model_id for points in held.values() for p in points} == {other.model_id}
    assert client.count("docs").count == theirs[0].chunks["added"]
    client.close()


def test_a_store_that_keeps_what_it_deletes_still_fails_the_check(embedder: Any) -> None:
    """Settling is bounded: a store whose deletes do nothing leaves version 1's points
    beside version 2's, and the check of a versioned document fails (it does not loop)."""
    from rechunk import StaleCheckError

    class NoDelete(QdrantStore):
        def delete(self, ids: Any, **kwargs: Any) -> None:
            return None

    client, _, chunker = fresh_store(embedder)
    store = NoDelete(client, "docs")
    sync([Document("d", version_text(1), version=1)], store, chunker=chunker, embedder=embedder)
    with pytest.raises(StaleCheckError, match=r"document 'd' holds [1-9]\d* point\(s\) of"):
        sync([Document("d", version_text(2), version=2)], store, chunker=chunker,
             embedder=embedder)


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_chroma(tmp_path_factory.mktemp("chroma-race") / "data") as server:
        yield server


def test_processes_against_one_chroma_server(chroma_server: Any, embedder: Any,
                                              minilm: Any) -> None:
    from rechunk.adapters.chroma import ChromaStore, http_client

    collection = f"race{uuid.uuid4().hex[:8]}"
    store = ChromaStore(http_client("127.0.0.1", chroma_server.port), collection)
    store.ensure_collection(embedder.dimension)
    chunker = policy_for(embedder, "recursive")
    context = multiprocessing.get_context("spawn")
    workers = len(VERSIONS)
    barrier = context.Barrier(workers)
    results = context.Queue()
    queues = [context.Queue() for _ in range(workers)]
    processes = [
        context.Process(target=chroma_worker, args=(chroma_server.port, collection,
                                                    minilm.model_id, embedder.table, q,
                                                    results, barrier), daemon=True)
        for q in queues
    ]
    for p in processes:
        p.start()
    rng = random.Random(16)
    started = time.monotonic()
    try:
        for round_ in range(5):
            doc_id = f"doc-{round_}"
            if round_ % 2:  # from version 1, or from an empty store
                sync([Document(doc_id, version_text(1), version=1)], store, chunker=chunker,
                     embedder=embedder)
            versions = list(VERSIONS)
            rng.shuffle(versions)
            for q, version in zip(queues, versions):
                q.put((doc_id, version))
            outcome = {}
            for _ in versions:
                got_doc, version, status = results.get(timeout=240)
                assert got_doc == doc_id
                outcome[version] = status
            newest = max(VERSIONS)
            assert outcome[newest] in ("new", "changed"), outcome
            assert all(outcome[v] in ("new", "changed", "skipped") for v in versions), outcome
            check_newest(store, doc_id, newest, embedder)
    finally:
        for q in queues:
            q.put(None)
        for p in processes:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert time.monotonic() - started < 400
    # the lock records are gone, and the lock collection is not one of the store's
    assert "rechunk-writer-locks" not in store.collections()
    locks = chroma_server.client.get_collection("rechunk-writer-locks")
    assert locks.count() == 0


HOLDER = """
import sys, time
from rechunk.adapters.chroma import ChromaStore, http_client
store = ChromaStore(http_client("127.0.0.1", {port}), {collection!r})
with store.writer_lock():
    print("HELD", flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(not hasattr(os, "waitid"), reason="needs os.waitid (POSIX)")
def test_a_killed_holder_left_unreaped_frees_the_lock_at_once(chroma_server: Any) -> None:
    """A writer killed while it holds the lock, its parent not (yet) reaping it: the
    zombie's pid still answers ``kill(pid, 0)``, but the next writer takes the lock at
    once, not after the lease."""
    from rechunk.adapters.chroma import LOCK_SECONDS, ChromaStore, http_client

    collection = f"zombie{uuid.uuid4().hex[:8]}"
    script = HOLDER.format(port=chroma_server.port, collection=collection)
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line == "HELD\n", holder.stderr.read() if holder.stderr else line
        os.kill(holder.pid, signal.SIGKILL)
        # wait until it has ended, without reaping it: it stays a zombie
        os.waitid(os.P_PID, holder.pid, os.WEXITED | os.WNOWAIT)
        if os.path.exists(f"/proc/{holder.pid}/stat"):
            stat = Path(f"/proc/{holder.pid}/stat").read_text()
            assert stat[stat.rfind(")") + 1 :].split()[0] == "Z"
        os.kill(holder.pid, 0)  # no error: the liveness check alone takes it for alive
        store = ChromaStore(http_client("127.0.0.1", chroma_server.port), collection)
        started = time.monotonic()
        with store.writer_lock(wait=20):
            took = time.monotonic() - started
        assert took < LOCK_SECONDS / 6, f"waited {took:.1f} s for a dead holder's lock"
        assert holder.poll() is None or holder.returncode == -signal.SIGKILL
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(timeout=30)
        for stream in (holder.stdout, holder.stderr):
            if stream is not None:
                stream.close()
