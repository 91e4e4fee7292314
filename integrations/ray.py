"""The sync on a Ray cluster (``pip install 'rechunk[ray]'``): plan in tasks, embed in an
actor pool, commit in tasks, with the single-process sync's writes and checks.

:func:`sync` brings a collection of a store server (a Chroma server, a Qdrant server) to
exactly the given revisions, as :func:`rechunk.sync` does, but spreads the work over a
Ray cluster:

* **partition** -- documents are spread over tasks by a hash of their doc_id, each
  document in exactly one partition: one writer per document per run;
* **plan** (a task per partition, ``num_cpus=cpus``) -- read the partition's stored
  points, chunk (or take the chunks the stored points prove), compute keys and ids and
  what to write and delete (:func:`rechunk.sync.planning._plan`), and look up in the collection
  the vectors of new points' inputs (``get_vectors``). Plan tasks never write;
* **embed** (an actor pool of ``workers`` actors, each loading the model once, with
  ``num_gpus`` where asked) -- only the inputs no partition found: each distinct input
  is sent to one actor once per run, whichever partitions need it;
* **commit** (a task per partition) -- publish the plan (:func:`rechunk.sync.publishing._publish`:
  the same guarded, idempotent writes and deletes, in the same order), then the same
  stale check (:func:`rechunk.sync.verifying._check_published`).

The result is what :func:`rechunk.sync` writes: same point ids, payloads and vectors.

Retries. Ray runs work at least once: a task whose worker dies is run again, an actor
that dies is restarted and its calls retried. Every stage is safe to run twice: a plan
writes nothing; an embed call's vectors are a pure function of its inputs (an input is
embedded twice only when an embedding actor died before its vectors were kept: the
report's ``engine["inputs_sent"]`` counts every input sent to a model, retries
included, beside ``inputs["embedded"]``, the distinct ones); a commit writes
deterministic ids with their final payloads and deletes ids its plan names, so a
commit run twice leaves what it leaves once. The report is built from the plans (read
from the store before any write of their partition, kept by the driver as soon as
each plan ends, so a re-run plan is never counted) and the stale check that reads the
store after the commit: never by adding up what attempts said they did.

Chroma has no conditional write: the driver holds the collection's writer lock
(:meth:`~rechunk.adapters.chroma.ChromaStore.writer_lock`) for the whole run, so other
writers of that collection (another run, a local sync) wait for it, while this run's
commit tasks write their partitions side by side (partitions never share a document).
On Qdrant the versioned writes are conditional as in one process.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rechunk._optional import require
from rechunk.chunking.chunk import Chunker
from rechunk.document import Document
from rechunk.errors import ConfigError, InputError, StoreError
from rechunk.reuse.embedding import Embedder, check_vectors, usable_vectors
from rechunk.sync import (
    DOC_BATCH,
    EMBED_BATCH,
    ORDERS,
    DocumentReport,
    Order,
    Progress,
    SyncReport,
    check_compatible,
)
from rechunk.sync.inputs import _check_documents, _check_store, _chooser, check_lenders
from rechunk.sync.model_check import ModelCheck
from rechunk.sync.planning import _Plan, _plan, _stored_chunks
from rechunk.sync.publishing import _publish
from rechunk.sync.report import changed_totals
from rechunk.sync.stages import delete_gone, doc_id_set, records_of
from rechunk.sync.store import (
    VectorStore,
    _keeps,
    _method,
    _offers,
    _text_locators,
    batches,
    of_model,
)
from rechunk.sync.vectors import _bad_stored
from rechunk.sync.verifying import _check_published, check_one_model, stale_verdict

if TYPE_CHECKING:
    from rechunk.sources import ParseOptions

__all__ = ["RaySyncReport", "connect", "engine", "sync"]

#: CPUs a plan or commit task, and an embedding actor, ask Ray for: fractional, so that a
#: node of one CPU runs several (whole-CPU requests starved a cluster of one CPU a node)
CPUS = 0.25
#: attempts Ray makes of a task whose worker died, and restarts of an embedding actor
RETRIES = 3
#: schemes of the store URIs a cluster can share (a server); embedded stores cannot
SERVER_SCHEMES = ("chroma+http://", "chroma+https://", "qdrant+http://", "qdrant+https://")


@dataclass
class RaySyncReport(SyncReport):
    """A :class:`~rechunk.sync.SyncReport` of a run on Ray, with ``engine``: the cluster's
    nodes, the tasks and actors used, ``inputs_sent`` (every input sent to a model,
    retries included; ``inputs["embedded"]`` counts each distinct input once),
    ``spans`` (each plan and commit task: stage, partition, start and end in seconds from
    the engine's start) and ``seconds`` (wall clock of the whole run)."""

    engine: dict[str, Any] = field(default_factory=dict)


# -- what a worker needs to open the store and the embedder -----------------------------


#: chunkers a worker process used, by policy id, kept for its next tasks
_CHUNKERS: dict[str, Chunker] = {}
#: stores a worker process opened from a URI, kept for its next tasks
_OPENED: dict[tuple[str, str, str], VectorStore] = {}


@dataclass(frozen=True)
class _Spec:
    """How a worker opens the store (a server URI and collection, or a factory) and the
    embedder (a URI, a factory, or an embedder shipped as it is)."""

    store: str | Callable[[], VectorStore]
    collection: str | None
    layout: str
    embedder: str | Callable[[], Embedder] | Embedder
    embed_url: str | None
    model_id: str
    dimension: int
    order: Order
    locked: bool
    neighbours: bool
    max_input_tokens: int | None = None
    special_tokens: int = 0
    #: the collection held no point when the run took the writer lock: it holds only what
    #: this run writes, so plans read nothing (as rechunk.sync does; a brand-new Chroma
    #: collection being written can also fail reads: "Nothing found on disk")
    empty: bool = False
    #: the store holds locators as text (the llamaindex layout)
    text_locators: bool = False

    def open_store(self, keep: bool = False) -> tuple[VectorStore, Callable[[], None]]:
        """The store and what closes it; ``keep``: a worker keeps a store it opened from a
        URI for its next tasks (its client stays connected; the worker's end closes it)."""
        if callable(self.store):
            return self.store(), lambda: None
        from rechunk.adapters.uri import open_store

        assert self.collection is not None
        key = (self.store, self.collection, self.layout)
        if keep and key in _OPENED:
            return _pin(_OPENED[key], self.locked)
        opened = open_store(self.store, self.collection, self.layout, create=False)
        if keep:
            _OPENED[key] = opened.store
            return _pin(opened.store, self.locked)
        return opened.store, opened.close

    def open_embedder(self) -> Embedder:
        made = _embedder_from(self.embedder, self.embed_url)
        if made.model_id != self.model_id or made.dimension != self.dimension:
            raise ConfigError(
                f"the embedder made on a worker is {made.model_id} ({made.dimension}-d), not "
                f"{self.model_id} ({self.dimension}-d) as on the driver: give a factory or "
                "URI that makes the same model everywhere"
            )
        return made


def _pin(store: Any, locked: bool) -> tuple[VectorStore, Callable[[], None]]:
    """The store of a task, and what ends the task's use of it. Under the run's writer lock
    (held by the driver), a task's Chroma store opens the collection once for the task, as
    the lock holder's own store does, not once a request; it is let go when the task ends
    (the next run may find the collection dropped and made again)."""
    if not locked or not hasattr(store, "_pinned") or not callable(getattr(store, "_open", None)):
        return store, lambda: None
    store._pinned = store._open()

    def unpin() -> None:
        store._pinned = None

    return store, unpin


def _embedder_from(embedder: Any, embed_url: str | None = None) -> Embedder:
    """An embedder from a URI (:func:`rechunk.integrations.uri.open_embedder`), a
    factory, or an embedder itself."""
    if isinstance(embedder, str):
        from rechunk.integrations.uri import open_embedder

        made: Any = open_embedder(embedder, embed_url=embed_url)
    elif callable(getattr(embedder, "embed", None)) and not isinstance(embedder, type):
        made = embedder
    elif callable(embedder):
        made = embedder()
    else:
        raise ConfigError(
            "embedder must be an embedder URI (onnx:, st:, openai:), a callable that makes "
            f"an embedder, or an embedder, not a {type(embedder).__name__}"
        )
    if not callable(getattr(made, "embed", None)):
        raise ConfigError(f"the embedder factory returned a {type(made).__name__}, not an embedder")
    from rechunk.reuse.cached_embedder import CachedEmbedder

    if isinstance(made, CachedEmbedder):
        raise ConfigError("pass the cache as cache=, not inside the embedder (the driver uses it)")
    return made  # type: ignore[no-any-return]


class _LazyEmbedder:
    """The model, made on first use: a commit embeds only in the rare repair of a
    versioned document another writer changed meanwhile."""

    def __init__(self, spec: _Spec) -> None:
        self._spec = spec
        self._made: Embedder | None = None
        self.model_id = spec.model_id
        self.dimension = spec.dimension
        self.max_input_tokens = spec.max_input_tokens
        self.special_tokens = spec.special_tokens

    def embed(self, texts: Sequence[str]) -> Any:
        if self._made is None:
            self._made = self._spec.open_embedder()
        return self._made.embed(texts)


# -- the stages ----------------------------------------------------------------------------


@dataclass
class _Part:
    """One partition's input: documents, or files (path, doc_id, format) to read."""

    index: int
    documents: list[Document]
    files: list[tuple[str, str, str | None]]
    parse_options: ParseOptions | None  # what the files' parsers take
    policies: list[str]  # the policy ids of the run's chunkers (see _chunkers_of)
    table: Any  # the run's chunkers, in Ray's object store (fetched by a worker once)
    picks: dict[str, int]  # doc_id -> index into chunkers (others: chunkers[0])
    chunker_for: Callable[[Document], Chunker | None] | None
    check_stored: bool
    held: bool  # report the ids of the planned points (a prune needs them)


@dataclass
class _State:
    """What a plan hands its commit (kept in Ray's object store, never on the driver)."""

    plans: list[_Plan]
    found: dict[str, Any]  # input key -> vector the collection holds
    policies: list[str]
    table: Any
    extra: list[Chunker]  # chunkers the plan's chunker_for picked beyond the run's
    picks: dict[str, int]
    index: int

    def chunkers(self) -> list[Chunker]:
        return [*_chunkers_of(self.policies, self.table), *self.extra]


def _chunkers_of(policies: list[str], table: Any) -> list[Chunker]:
    """The run's chunkers, by policy id: those a task of this worker process used before
    (their caches warm; chunkers are deterministic: the policy id names everything they
    do), else the run's table from Ray's object store, fetched and unpickled once per
    worker process (a chunker with its tokenizer is about 0.5 MB, 50 ms to unpickle: in
    every task's arguments, it cost more than a small partition's planning)."""
    if any(policy not in _CHUNKERS for policy in policies):
        import ray

        for made in ray.get(table):
            _CHUNKERS.setdefault(made.policy_id, made)
    return [_CHUNKERS[policy] for policy in policies]


@dataclass
class _Summary:
    """What a plan tells the driver: per document its report and the inputs its new points
    need ``(key, tokens, bytes)``; the inputs not found in the collection, with their text;
    every distinct input's tokens; what it read; seconds."""

    index: int
    reports: list[DocumentReport]
    needs: dict[str, list[tuple[str, int, int]]]
    wanted: dict[str, str]
    found: set[str]
    tokens: dict[str, int]
    stored: int
    held: list[str]
    skipped: list[tuple[str, str]]
    seconds: dict[str, float]
    span: tuple[float, float] = (0.0, 0.0)  # the task's start and end (epoch seconds)


def _plan_part(spec: _Spec, part: _Part) -> tuple[_State, _Summary]:
    """The plan stage of one partition (a Ray task: it writes nothing)."""
    began = time.time()
    seconds = dict.fromkeys(("chunk", "plan"), 0.0)
    store, close = spec.open_store(keep=True)
    try:
        docs = list(part.documents)
        skipped: list[tuple[str, str]] = []
        chunkers = _chunkers_of(part.policies, part.table)
        known = len(chunkers)
        picks = dict(part.picks)
        if part.files:
            from rechunk.sources import ParseError
            from rechunk.sources.documents import documents_from_file

            for path, doc_id, fmt in part.files:
                try:
                    docs.extend(documents_from_file(path, doc_id, fmt, part.parse_options))
                except InputError as exc:  # a ParseError's reason: the row names the file
                    why = exc.reason if isinstance(exc, ParseError) else str(exc)
                    skipped.append((doc_id, why))
            docs = _check_documents(docs)
            for doc in docs:
                store.check_metadata(doc.doc_id, doc.metadata or {})
            if part.chunker_for is not None:
                seen = {id(c): i for i, c in enumerate(chunkers)}
                for doc in docs:
                    picked = part.chunker_for(doc)
                    if picked is None or picked is chunkers[0]:
                        continue
                    if id(picked) not in seen:
                        check_compatible(picked, _LazyEmbedder(spec))
                        seen[id(picked)] = len(chunkers)
                        chunkers.append(picked)
                    picks[doc.doc_id] = seen[id(picked)]

        def pick(doc: Document) -> Chunker:
            return chunkers[picks.get(doc.doc_id, 0)]

        t0 = time.perf_counter()
        reads = docs and not spec.empty
        stored = (
            of_model(store.get_points_many([d.doc_id for d in docs]), spec.model_id)
            if reads
            else {}
        )
        revector: dict[str, frozenset[str]] = {}
        if part.check_stored and stored:
            revector = _bad_stored(stored, store, spec.model_id, spec.dimension)
        seconds["plan"] += time.perf_counter() - t0
        plans: list[_Plan] = []
        for doc in docs:
            old = stored.get(doc.doc_id, [])
            chunker = pick(doc)
            t0 = time.perf_counter()
            chunks = _stored_chunks(doc, old, chunker.policy_id)
            if chunks is None:
                chunks = chunker.chunk(doc.text)
            t1 = time.perf_counter()
            plans.append(
                _plan(
                    doc,
                    chunks,
                    chunker,
                    spec.model_id,
                    old,
                    spec.neighbours,
                    revector.get(doc.doc_id, frozenset()),
                    spec.text_locators,
                )
            )
            seconds["chunk"] += t1 - t0
            seconds["plan"] += time.perf_counter() - t1
        t0 = time.perf_counter()
        active = [p for p in plans if p.report.status not in ("skipped", "unchanged")]
        wanted: dict[str, str] = {}
        for plan in active:
            wanted.update(plan.needs_vector)
        found: dict[str, Any] = {}
        if wanted and not spec.empty:
            held_vectors = store.get_vectors(list(wanted), spec.model_id)
            found, _ = usable_vectors(held_vectors, spec.dimension)
        seconds["plan"] += time.perf_counter() - t0
    finally:
        close()
    tokens: dict[str, int] = {}
    needs: dict[str, list[tuple[str, int, int]]] = {}
    for plan in plans:
        if plan.report.status == "skipped":
            continue
        by_key = dict(zip(plan.keys, plan.chunks))
        for key, chunk in by_key.items():
            tokens[key] = chunk.tokens
        needs[plan.doc.doc_id] = [
            (key, by_key[key].tokens, len(text.encode("utf-8")))
            for key, text in plan.needs_vector.items()
        ]
    summary = _Summary(
        index=part.index,
        reports=[p.report for p in plans],
        needs=needs,
        wanted={k: t for k, t in wanted.items() if k not in found},
        found=set(found),
        tokens=tokens,
        stored=sum(len(points) for points in stored.values()),
        held=[pid for p in plans for pid in p.ids] if part.held else [],
        skipped=skipped,
        seconds=seconds,
        span=(began, time.time()),
    )
    state = _State(plans, found, part.policies, part.table, chunkers[known:], picks, part.index)
    return state, summary


@dataclass
class _Committed:
    """What a commit tells the driver, per document: a new status (a versioned document
    another writer superseded), what a repair round added, and the stale check's
    ``(wrong, missing)``; seconds."""

    index: int
    status: dict[str, tuple[str, str | None]]
    repaired: dict[str, tuple[int, int]]
    failed: list[tuple[str, int, int]]
    seconds: dict[str, float]
    span: tuple[float, float] = (0.0, 0.0)  # the task's start and end (epoch seconds)


def _commit_part(
    spec: _Spec, state: _State, cached: Mapping[str, Any], *embedded: tuple[list[str], Any]
) -> _Committed:
    """The commit stage of one partition (a Ray task): publish its plans with the vectors
    found, cached or embedded, then the stale check. Safe to run again: the writes are
    deterministic and the deletes name ids."""
    began = time.time()
    seconds = dict.fromkeys(("publish", "verify"), 0.0)
    plans = state.plans
    published = [p for p in plans if p.report.status in ("new", "changed")]
    index = state.index
    if not published:
        return _Committed(index, {}, {}, [], seconds, (began, time.time()))
    vectors: dict[str, Any] = dict(state.found)
    vectors.update(cached)
    for keys, array in embedded:
        vectors.update(zip(keys, array))
    store, close = spec.open_store(keep=True)
    try:
        missing = sorted({k for p in published for k in p.needs_vector if k not in vectors})
        if missing:  # a plan made again after part of this partition was written
            found, _ = usable_vectors(store.get_vectors(missing, spec.model_id), spec.dimension)
            vectors.update(found)
            lost = [k for k in missing if k not in vectors]
            if lost:
                raise StoreError(
                    f"{len(lost)} input(s) of a re-planned partition have no vector in this "
                    "run (a node was lost mid-run); run the sync again"
                )
        t0 = time.perf_counter()
        _publish(published, vectors, store, spec.order)
        seconds["publish"] += time.perf_counter() - t0
        before = {
            p.doc.doc_id: (p.report.status, p.report.added, p.report.updated) for p in published
        }
        scratch = SyncReport(store.collection, "", spec.model_id, spec.order)
        for plan in published:
            scratch.documents[plan.report.status] += 1
            scratch.documents["synced"] += 1

        def pick(doc: Document) -> Chunker:  # only a repair of a versioned document asks
            return state.chunkers()[state.picks.get(doc.doc_id, 0)]

        t0 = time.perf_counter()
        failed = _check_published(
            list(published),
            scratch,
            store,
            pick,
            _LazyEmbedder(spec),
            None,
            vectors,
            spec.order,
            spec.locked,
        )
        seconds["verify"] += time.perf_counter() - t0
    finally:
        close()
    status: dict[str, tuple[str, str | None]] = {}
    repaired: dict[str, tuple[int, int]] = {}
    for plan in published:
        rep = plan.report
        was, added, updated = before[rep.doc_id]
        if rep.status != was:
            status[rep.doc_id] = (rep.status, rep.reason)
        if (rep.added, rep.updated) != (added, updated):
            repaired[rep.doc_id] = (rep.added - added, rep.updated - updated)
    return _Committed(index, status, repaired, failed, seconds, (began, time.time()))


def _stage(stage: str, spec: _Spec, *args: Any) -> Any:
    """A plan (``stage="plan"``) or a commit: one Ray task function for both, so that both
    stages run in the same worker processes. Ray leases a worker to one task function at a
    time; with two functions a node kept a worker for each, more than its CPUs, and ended
    and restarted them as they idled (each restart importing rechunk and the store client
    again, and planning with cold chunkers)."""
    if stage == "plan":
        return _plan_part(spec, *args)
    return _commit_part(spec, *args)


#: calls an embedding actor takes at once: one calls the model while the next is received
#: and unpacked (the model itself gets one call at a time, under the actor's lock)
ACTOR_CALLS = 2
#: model batches in one call to an embedding actor, at most: a partition's inputs go to
#: the actors in few calls (each call costs Ray messages on both sides, more than the hash
#: embedder's model call), small enough that a dead actor's call re-sends little
CALL_BATCHES = 16


class _Embedding:
    """An embedding actor's body: loads the model once and embeds batches, one model call
    at a time (the next call's transport overlaps it, so the model is never idle between
    batches). Each call's count goes to the tally as the model call starts and is
    confirmed when it ends (so the inputs of a call a dead actor was making are counted:
    the count leaves the process in well under a millisecond, a model call takes longer)."""

    def __init__(self, spec: _Spec, tally: Any) -> None:
        import threading

        self._spec = spec
        self._tally = tally
        self._embedder: Embedder | None = None
        self._model = threading.Lock()

    def embed(self, keys: list[str], texts: list[str], step: int) -> tuple[list[str], Any]:
        """The vectors of ``texts``, ``step`` at a time to the model."""
        import numpy as np
        import ray

        parts: list[Any] = []
        with self._model:
            if self._embedder is None:
                self._embedder = self._spec.open_embedder()
            t0 = time.perf_counter()
            for start in range(0, len(texts), step):
                batch = texts[start : start + step]
                # counted before the model call: an actor killed during it (out of memory)
                # has then told the tally already, where a message still queued would die
                # with it and the report undercount what was sent
                ray.get(self._tally.add.remote(len(batch)))
                parts.append(
                    check_vectors(
                        self._embedder.embed(batch),
                        model_id=self._spec.model_id,
                        dimension=self._spec.dimension,
                        count=len(batch),
                    )
                )
            seconds = time.perf_counter() - t0
        self._tally.spent.remote(seconds)
        return keys, parts[0] if len(parts) == 1 else np.concatenate(parts)

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


class _Tally:
    """Inputs sent to a model by this run's embedding actors (retries included), and the
    seconds their models took."""

    def __init__(self) -> None:
        self.sent = 0
        self.seconds = 0.0

    def add(self, n: int) -> None:
        self.sent += n

    def spent(self, seconds: float) -> None:
        self.seconds += seconds

    def total(self) -> tuple[int, float]:
        return self.sent, self.seconds


# -- the driver ----------------------------------------------------------------------------


def _ray() -> Any:
    """``ray``, imported with usage statistics off (nothing leaves the cluster)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return require("ray", "ray")


def connect(address: str | None = None) -> Any:
    """Join the Ray cluster at ``address`` (``HOST:PORT`` of its head node, or ``auto``),
    or, without one, the cluster this process already joined, else a new local one (no
    dashboard, no usage statistics, worker logs not copied to this process). Returns
    ``ray``."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    _probe(address)
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    except Exception as exc:
        from rechunk.errors import StoreUnavailableError

        if _refused_for_token(exc):
            raise ConfigError(
                f"the Ray cluster at {address} wants its authentication token, and this "
                "process sent none or another: set RAY_AUTH_MODE=token and the cluster's "
                "token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token (where "
                "`ray start` reads it)"
            ) from exc
        if not isinstance(exc, ConnectionError):
            raise
        raise StoreUnavailableError(
            f"cannot reach the Ray cluster at {address}: {exc}; start it with `ray start "
            "--head` or pass its --ray-address"
        ) from exc
    return ray


def _refused_for_token(exc: BaseException) -> bool:
    """Whether ``ray.init`` failed because the cluster wants a token: a head started by
    ``ray start`` where ``~/.ray/auth_token`` exists turns token authentication on, while a
    driver without ``RAY_AUTH_MODE`` sends no token, and Ray raises "Failed to connect"
    from a RuntimeError that holds the GCS client's ``AuthenticationError`` as text."""
    from ray.exceptions import AuthenticationError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AuthenticationError) or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: how long the head node's port may take to accept a connection (seconds)
PROBE_SECONDS = 5.0


def _host_port(address: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of ``address`` (``HOST:PORT``, or ``ray://HOST:PORT``); None for
    ``auto``, ``local``, none, or what is not HOST:PORT (Ray says what it makes of it)."""
    if not address or address == "auto" or address == "local":
        return None
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _probe(address: str | None) -> None:
    """StoreUnavailableError when ``address`` (``HOST:PORT``, or ``ray://HOST:PORT``)
    accepts no connection: ``ray.init`` retries a cluster that is down for ever."""
    target = _host_port(address)
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=PROBE_SECONDS).close()
    except OSError as exc:
        from rechunk.errors import StoreUnavailableError

        raise StoreUnavailableError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it "
            "with `ray start --head` or pass its --ray-address"
        ) from exc


def _unwrap(exc: BaseException) -> BaseException:
    """The error a task raised (rechunk's own, or the user's embedder's) out of the Ray
    task error that carries it, else the error: it passes through as a plain sync's
    would, not behind Ray's task banner."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _partition_of(doc_id: str, parts: int) -> int:
    digest = hashlib.sha256(doc_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % parts


def _rows(dataset: Any) -> Iterator[Document | tuple[str, str, str | None]]:
    """Documents or files from a Ray Dataset's rows: ``doc_id`` and ``text`` (and
    optionally ``revision``, ``metadata``, ``version``), or ``path`` (and optionally
    ``doc_id``, default the path, and ``format``)."""
    for row in dataset.iter_rows():
        if "path" in row and "text" not in row:
            path = str(row["path"])
            yield (path, str(row.get("doc_id") or path), row.get("format"))
        elif "doc_id" in row and "text" in row:
            version = row.get("version")
            yield Document(
                str(row["doc_id"]),
                row["text"],
                row.get("revision"),
                dict(row["metadata"]) if row.get("metadata") else None,
                version=None if version is None else int(version),
            )
        else:
            raise InputError(
                f"a dataset row needs doc_id and text, or path; this one has {sorted(row)}"
            )


def sync(
    documents: Iterable[Document] | Any = (),
    store: str | Callable[[], VectorStore] = "",
    *,
    collection: str | None = None,
    layout: str = "langchain",
    chunker: Chunker,
    embedder: str | Callable[[], Embedder] | Embedder,
    embed_url: str | None = None,
    files: Iterable[tuple[str, str] | tuple[str, str, str | None]] = (),
    parse_options: ParseOptions | None = None,
    cache: Any = None,
    order: Order = "upsert-then-delete",
    prune: bool = False,
    keep: Iterable[str] = (),
    dry_run: bool = False,
    check_stored: bool = False,
    chunker_for: Callable[[Document], Chunker | None] | None = None,
    reuse_from: Sequence[VectorStore] = (),
    complete_files: Iterable[str] = (),
    address: str | None = None,
    workers: int = 2,
    num_gpus: float = 0.0,
    cpus: float = CPUS,
    docs_per_task: int | None = None,
    progress: Progress | None = None,
) -> RaySyncReport:
    """:func:`rechunk.sync` on a Ray cluster (see the module docstring for the stages).

    ``documents``: :class:`~rechunk.Document` objects, or a ``ray.data.Dataset`` whose
    rows are documents (``doc_id``, ``text``; optionally ``revision``, ``metadata``,
    ``version``) or files (``path``; optionally ``doc_id`` and ``format``).
    ``files``: ``(path, doc_id[, format])`` read and parsed on the workers
    (:func:`rechunk.sources.documents.documents_from_file`; each worker must see the
    path); a file that cannot be parsed is reported skipped with its reason.
    ``parse_options``: what the parsers of those files take (a JSON record's
    ``id_field``, the ``encoding`` of text that is not UTF-8), as ``rechunk sync``'s
    ``--id-field`` and ``--encoding`` give them.
    ``store``: a server URI (``chroma+http://HOST:PORT``, ``qdrant+http://HOST:PORT``)
    with ``collection`` and ``layout`` (a Chroma server's tenant and database are written
    into the URI the workers open), or a picklable callable that opens the store
    (each task calls it). The collection must exist (``ensure_collection``).
    ``embedder``: an embedder URI (``onnx:``, ``st:``, ``openai:MODEL`` with
    ``embed_url``), a picklable callable that makes the embedder, or a picklable
    embedder; each of the ``workers`` embedding actors makes its own once, with
    ``num_gpus`` GPUs. ``cache`` (an :class:`~rechunk.reuse.cache.EmbeddingCache`) is used by
    the driver: inputs it holds are not embedded, and what the actors embed is put in it.
    ``address``: the head node (``HOST:PORT`` or ``auto``; default: the cluster this
    process joined, else a new local one). ``cpus``: what each task and actor asks for.
    ``chunker_for``, ``order``, ``prune``, ``keep``, ``dry_run``, ``check_stored``,
    ``complete_files`` and ``reuse_from`` mean what they mean for :func:`rechunk.sync`
    (the collections of
    ``reuse_from`` are read by the driver, for the inputs neither the collection nor the
    cache holds: a reindex's live generation lends its vectors this way).
    ``progress(stage, done, total)`` is called as partitions are planned and committed.

    Raises what :func:`rechunk.sync` raises, before anything is written for bad input
    (checked on the driver for ``documents``; for ``files``, in each partition's plan).
    """
    started = time.perf_counter()
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {ORDERS}, not {order!r}")
    if type(workers) is not int or workers < 1:
        raise ConfigError(f"workers must be a positive int, not {workers!r}")
    if not (isinstance(cpus, (int, float)) and 0 < cpus <= 64):
        raise ConfigError(f"cpus must be a number in (0, 64], not {cpus!r}")
    if isinstance(store, str):
        if not store.startswith(SERVER_SCHEMES):
            raise ConfigError(
                "the ray engine needs a store server every node reaches "
                f"({', '.join(SERVER_SCHEMES)}...), not {store!r}: an embedded store lives in "
                "one process"
            )
        if not collection:
            raise ConfigError("give the collection to sync into (collection=...)")
    elif not callable(store):
        raise ConfigError("store must be a server URI or a callable that opens the store")
    kept = doc_id_set(keep, "keep")
    whole = doc_id_set(complete_files, "complete_files")
    raw = _embedder_from(embedder, embed_url)
    ray = connect(address)
    listed: list[Document | tuple[str, str, str | None]]
    if hasattr(documents, "iter_rows") and hasattr(documents, "map_batches"):
        listed = list(_rows(documents))
    else:
        listed = [*_check_input(documents)]
    docs = [d for d in listed if isinstance(d, Document)]
    paths = [d for d in listed if not isinstance(d, Document)]
    for item in files:
        if isinstance(item, (str, bytes)) or len(item) not in (2, 3):
            raise InputError("files takes (path, doc_id) or (path, doc_id, format) tuples")
        paths.append((str(item[0]), str(item[1]), item[2] if len(item) == 3 else None))
    docs = _check_documents(docs)
    doc_ids = {d.doc_id for d in docs}
    for _, doc_id, _ in paths:
        if doc_id in doc_ids:
            raise InputError(f"doc_id {doc_id!r} appears more than once in one sync")
        doc_ids.add(doc_id)
    if prune and not doc_ids:
        raise InputError(
            "prune=True with no documents would delete every document of the collection "
            "(an empty folder or a spent generator?); to empty it on purpose, delete its "
            "points or drop it"
        )
    check_compatible(chunker, raw)
    pick = _chooser(chunker, chunker_for, docs, raw)

    shipped = store  # what the workers open
    if isinstance(store, str):
        from rechunk.adapters.uri import resolved_uri

        # with a Chroma server's tenant and database written in (defaults included): a
        # worker whose environment sets CHROMA_TENANT would refuse a URI naming none
        shipped = resolved_uri(store)
    opener = _Spec(store, collection, layout, embedder, embed_url, raw.model_id, raw.dimension,
                   order, False, False)  # fmt: skip
    # kept for the next call, as workers keep theirs: a service calling sync() in a loop
    # opened a client each time, and a Chroma client's close() keeps its socket
    driver_store, close_store = opener.open_store(keep=True)
    try:
        for doc in docs:
            driver_store.check_metadata(doc.doc_id, doc.metadata or {})
        lock = None if dry_run else _method(driver_store, "writer_lock")
        with lock() if lock is not None else contextlib.nullcontext():
            info = _check_store(driver_store, raw, dry_run)
            check_lenders(reuse_from, raw)
            if info is None:  # only a dry run gets here with no collection
                raise ConfigError(
                    f"collection {driver_store.collection!r} does not exist yet: the ray "
                    "engine plans against the collection there; plan the first sync with "
                    "the local engine (rechunk.sync, --engine local): its plan is the same"
                )
            model_check = ModelCheck([*([driver_store] if info.points else []), *reuse_from],
                                     cache)  # fmt: skip
            spec = _Spec(shipped, driver_store.collection if isinstance(store, str) else None,
                         layout, embedder, embed_url, raw.model_id, raw.dimension, order,
                         lock is not None, _keeps(driver_store), raw.max_input_tokens,
                         int(getattr(raw, "special_tokens", 0) or 0),
                         lock is not None and info.points == 0,
                         text_locators=_text_locators(driver_store))  # fmt: skip
            report = _run(
                ray, spec, raw, docs, paths, chunker, pick, chunker_for, cache, info.points,
                parse_options=parse_options, dry_run=dry_run, check_stored=check_stored,
                reuse_from=reuse_from,
                held=(prune or bool(whole)) and _offers(driver_store, "all_ids", "doc_ids_of"),
                workers=workers, num_gpus=num_gpus, cpus=cpus,
                docs_per_task=docs_per_task, progress=progress, model_check=model_check,
            )  # fmt: skip
            report.model_check, report.model_check_tokens = model_check.state, model_check.tokens
            report.collection = driver_store.collection
            if not dry_run:
                check_one_model(report, driver_store, raw.model_id, info, lock is not None)
            if prune or whole:
                scope = None if prune else records_of(whole)
                # the documents the workers parsed from files= are given too
                planned = {rep.doc_id for rep in report.per_document}
                _prune(report, driver_store, doc_ids | kept | planned, dry_run, scope)
            report.engine.pop("_held", None)
    finally:
        close_store()
    report.engine["seconds"] = round(time.perf_counter() - started, 3)
    failed = report.engine.pop("_failed")
    if not dry_run:
        stale_verdict(report, failed)
    return report


def _check_input(documents: Any) -> Iterator[Document]:
    kind = type(documents).__name__
    if isinstance(documents, (str, bytes, Document)) or documents is None:
        raise InputError(f"sync takes an iterable of rechunk.Document, not {kind}")
    try:
        yield from documents
    except TypeError:
        raise InputError(f"sync takes an iterable of rechunk.Document, not {kind}") from None


def _run(
    ray: Any,
    spec: _Spec,
    raw: Embedder,
    docs: list[Document],
    paths: list[tuple[str, str, str | None]],
    chunker: Chunker,
    pick: Callable[[Document], Chunker],
    chunker_for: Callable[[Document], Chunker | None] | None,
    cache: Any,
    points: int,
    *,
    parse_options: ParseOptions | None,
    dry_run: bool,
    check_stored: bool,
    reuse_from: Sequence[VectorStore],
    held: bool,
    workers: int,
    num_gpus: float,
    cpus: float,
    docs_per_task: int | None,
    progress: Progress | None,
    model_check: ModelCheck,
) -> RaySyncReport:
    """Plan, embed and commit every partition; the report from the plans and checks."""
    model_id = raw.model_id
    report = RaySyncReport(spec.collection or "", chunker.policy_id, model_id, spec.order, dry_run)
    report.chunks_not_given = points
    total = len(docs) + len(paths)
    # as many tasks at once as the cluster has CPUs: each runs in a worker process that
    # stays (with its imports and its store client) while it is kept busy; more at once
    # would start processes that the node ends again when they idle
    in_flight = max(2, int(ray.cluster_resources().get("CPU", 2)))
    size = docs_per_task or min(DOC_BATCH, max(1, math.ceil(total / (4 * in_flight))))
    if type(size) is not int or size < 1:
        raise ConfigError(f"docs_per_task must be a positive int, not {docs_per_task!r}")
    count = max(1, math.ceil(total / size))
    grouped: list[list[Document | tuple[str, str, str | None]]] = [[] for _ in range(count)]
    items: list[Document | tuple[str, str, str | None]] = [*docs, *paths]
    for item in items:
        doc_id = item.doc_id if isinstance(item, Document) else item[1]
        grouped[_partition_of(doc_id, count)].append(item)
    grouped = [g for g in grouped if g]
    table: list[Chunker] = [chunker]
    index_of = {id(chunker): 0}
    picked: list[dict[str, int]] = []
    for group in grouped:
        picks: dict[str, int] = {}
        for doc in group:
            if not isinstance(doc, Document):
                continue
            chosen = pick(doc)
            if id(chosen) not in index_of:
                index_of[id(chosen)] = len(table)
                table.append(chosen)
            if chosen is not chunker:
                picks[doc.doc_id] = index_of[id(chosen)]
        picked.append(picks)
    table_ref = ray.put(table)
    policies = [c.policy_id for c in table]
    parts: list[_Part] = []
    for i, (group, picks) in enumerate(zip(grouped, picked)):
        part_docs = [d for d in group if isinstance(d, Document)]
        part_files = [d for d in group if not isinstance(d, Document)]
        parts.append(
            _Part(i, part_docs, part_files, parse_options, policies, table_ref, picks,
                  chunker_for if part_files else None, check_stored, held)
        )  # fmt: skip

    options = {"num_cpus": cpus, "max_retries": RETRIES, "scheduling_strategy": "SPREAD"}
    stage_task = ray.remote(**options)(_stage)
    plan_task = stage_task.options(num_returns=2)
    tally = ray.remote(num_cpus=0)(_Tally).remote()
    actor_class = ray.remote(
        num_cpus=cpus,
        num_gpus=num_gpus,
        max_restarts=RETRIES,
        max_task_retries=RETRIES,
        max_concurrency=ACTOR_CALLS,
    )(_Embedding)
    actors: list[Any] = []
    step = getattr(raw, "embed_batch", None)
    step = step if type(step) is int and step > 0 else EMBED_BATCH

    spec_ref = ray.put(spec)
    begun = time.perf_counter()
    epoch = time.time()
    marks: dict[str, float] = {}
    spans: list[tuple[str, int, float, float]] = []  # (stage, partition, start, end)
    planning: dict[Any, Any] = {}  # summary ref -> state ref
    queue = list(parts)
    committing: list[Any] = []
    waiting: list[tuple[Any, ...]] = []  # commits to submit: (state, cached, *embed calls)
    dispatched: dict[str, Any] = {}  # input key -> the ref of the embed call that has it
    from_cache: dict[str, Any] = {}  # input key -> the vector the cache or a lender held
    counted: set[str] = set()
    source_of: dict[str, str] = {}
    embed_calls: list[Any] = []
    changed: list[DocumentReport] = []
    reports: dict[str, DocumentReport] = {}
    seconds = report.seconds
    held_ids: set[str] = set()
    skipped_files: list[tuple[str, str]] = []
    planned = committed = 0
    next_actor = 0
    if not dry_run and total:  # started now, they load the model while the plans run
        actors = [actor_class.remote(spec, tally) for _ in range(workers)]  # by value: restarts
    try:
        failed: list[tuple[str, int, int]] = []
        while queue or planning or waiting or committing:
            # at most in_flight plans and commits run at once; a commit is submitted when
            # its vectors are ready (first: it frees what its plan holds), so that commits
            # waiting for the model do not hold back plans. While partitions wait to be
            # planned, commits leave a plan its slot (unless many planned partitions
            # already wait): commits that take every slot keep the next commits' plans
            # back, and a store whose writes do not overlap (Chroma) then idles between
            # rounds of commits
            backlog = len(waiting) + len(committing) >= 2 * in_flight
            for entry in list(waiting):
                free = in_flight - len(planning) - len(committing)
                if free <= 0 or (free == 1 and queue and not planning and not backlog):
                    break
                calls = entry[2:]
                if not calls or not ray.wait(list(calls), num_returns=len(calls), timeout=0,
                                             fetch_local=False)[1]:  # fmt: skip
                    waiting.remove(entry)
                    committing.append(stage_task.remote("commit", spec_ref, *entry))
            while queue and len(planning) + len(committing) < in_flight:
                part = queue.pop(0)
                state_ref, summary_ref = plan_task.remote("plan", spec_ref, part)
                planning[summary_ref] = state_ref
            watch = [*planning, *committing]
            pending = list({id(c): c for entry in waiting for c in entry[2:]}.values())
            if pending and len(watch) < in_flight:  # a free slot: wake when vectors are ready
                _, unready = ray.wait(pending, num_returns=len(pending), timeout=0,
                                      fetch_local=False)  # fmt: skip
                watch += unready
            if not watch:  # the vectors came in since the loop above looked: commit them now
                continue
            ready, _ = ray.wait(watch, num_returns=1)
            if ready[0] not in planning and ready[0] not in committing:
                continue
            if ready[0] not in planning:
                committing.remove(ready[0])
                committed += 1
                done = _merge(report, reports, ready[0], ray, failed)
                spans.append(_span("commit", done.index, done.span, epoch))
                marks.setdefault("first_commit", time.perf_counter() - begun)
                marks["last_commit"] = time.perf_counter() - begun
                if progress is not None:
                    progress("publish", committed, len(parts))
                continue
            state_ref = planning.pop(ready[0])
            try:
                summary: _Summary = ray.get(ready[0])
            except Exception as exc:
                raise _unwrap(exc) from None
            planned += 1
            spans.append(_span("plan", summary.index, summary.span, epoch))
            marks.setdefault("first_plan", time.perf_counter() - begun)
            marks["last_plan"] = time.perf_counter() - begun
            if progress is not None:
                progress("plan", planned, len(parts))
            for name, value in summary.seconds.items():
                seconds[name] += value
            skipped_files.extend(summary.skipped)
            held_ids.update(summary.held)
            report.chunks_not_given -= summary.stored
            # inputs count once per run, in the partition that first needed them
            for key in summary.found:
                source_of.setdefault(key, "store")
            # an input is sent to a model once per run: not when an earlier partition's
            # embed call has it, or the cache had it
            fresh = [k for k in summary.wanted if k not in dispatched and k not in from_cache]
            if cache is not None and fresh and not dry_run:
                good, _ = usable_vectors(
                    cache.get_many(fresh, model_id, raw.dimension), raw.dimension
                )
                from_cache.update(good)
                for key in good:
                    source_of.setdefault(key, "cache")
            new = [k for k in fresh if k not in from_cache]
            for lender in reuse_from:  # collections lending vectors by input key
                if not new:
                    break
                lent, _ = usable_vectors(lender.get_vectors(new, model_id), raw.dimension)
                from_cache.update(lent)
                for key in lent:
                    source_of.setdefault(key, "store")
                new = [k for k in new if k not in lent]
            for key in new:
                source_of.setdefault(key, "embed")
            for rep in summary.reports:
                reports[rep.doc_id] = rep
                _count(report, rep, summary, source_of, changed)
            for key in (k for d in summary.needs.values() for k, _, _ in d):
                if key not in counted:
                    counted.add(key)
                    kind = source_of[key]
                    report.inputs[_COUNTER[kind]] += 1
                    if kind == "embed":
                        report.tokens_embedded += summary.tokens[key]
            if dry_run:
                continue
            if new and not model_check.done:  # before the model's first call: the same one?
                hits = [(k, summary.wanted[k], summary.tokens[k], from_cache[k])
                        for k in summary.wanted if k in from_cache]  # fmt: skip
                model_check.before_embedding(raw, (), hits)
            # the partition's inputs shared evenly by the actors, in calls of whole model
            # batches, CALL_BATCHES of them at most
            per_call = step * max(1, min(CALL_BATCHES, math.ceil(len(new) / (len(actors) * step))))
            for batch in batches(new, per_call):
                actor = actors[next_actor % len(actors)]
                next_actor += 1
                texts = [summary.wanted[k] for k in batch]
                ref = actor.embed.remote(list(batch), texts, step)
                embed_calls.append(ref)
                for key in batch:
                    dispatched[key] = ref
            cached_mine = {k: from_cache[k] for k in summary.wanted if k in from_cache}
            by_call = {id(dispatched[k]): dispatched[k] for k in summary.wanted if k in dispatched}
            needed = list(by_call.values())
            if any(r.status in ("new", "changed") for r in summary.reports):
                waiting.append((state_ref, cached_mine, *needed))
            else:  # nothing to publish: no commit
                committed += 1
        if cache is not None and embed_calls:
            for keys, vectors in ray.get(embed_calls):
                cache.put_many(list(zip(keys, vectors)), model_id)
            from rechunk.reuse.cache import record_dimension

            record_dimension(cache, model_id, raw.dimension)
        sent, seconds["embed"] = ray.get(tally.total.remote())
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        with contextlib.suppress(Exception):
            ray.kill(tally)
    report.per_document = [reports[r] for r in reports]
    report.per_document.extend(DocumentReport(d, "skipped", reason=r) for d, r in skipped_files)
    report.documents["skipped"] += len(skipped_files)
    report.chunks_not_given = max(report.chunks_not_given, 0)
    for rep in report.per_document:
        if rep.policy is not None:
            report.policies[rep.policy] = report.policies.get(rep.policy, 0) + 1
    report.tokens_total = sum(report.engine.pop("_tokens", {}).values())
    changed_totals(report, changed)
    report.engine.update(
        engine="ray",
        nodes=len(nodes),
        node_addresses=sorted({str(n.get("NodeManagerAddress")) for n in nodes}),
        partitions=len(parts),
        docs_per_task=size,
        embedding_actors=len(actors),
        inputs_sent=sent,
        inputs_sent_again=max(0, sent - report.inputs["embedded"]),
        _failed=failed,
        _held=held_ids,
        stage_ends={name: round(value, 3) for name, value in marks.items()},
        spans=spans,
    )
    return report


_COUNTER = {"cache": "from_cache", "store": "from_store", "embed": "embedded"}


def _span(
    stage: str, index: int, span: tuple[float, float], epoch: float
) -> tuple[str, int, float, float]:
    """A task's stage, partition, start and end (seconds after ``epoch``)."""
    return stage, index, round(span[0] - epoch, 3), round(span[1] - epoch, 3)


def _merge(
    report: RaySyncReport,
    reports: Mapping[str, DocumentReport],
    ref: Any,
    ray: Any,
    failed: list[tuple[str, int, int]],
) -> _Committed:
    """Add what a commit found to the report: documents superseded by a newer version,
    what repair rounds wrote, and the stale check's counts (returns the commit's answer)."""
    try:
        done: _Committed = ray.get(ref)
    except Exception as exc:
        raise _unwrap(exc) from None
    for name, value in done.seconds.items():
        report.seconds[name] += value
    for doc_id, (status, reason) in done.status.items():
        rep = reports[doc_id]
        report.documents[rep.status] -= 1
        report.documents["synced"] -= 1
        report.documents[status] += 1
        rep.status, rep.reason = status, reason  # type: ignore[assignment]
    for doc_id, (added, updated) in done.repaired.items():
        reports[doc_id].added += added
        reports[doc_id].updated += updated
        report.chunks["added"] += added
        report.chunks["updated"] += updated
    for _, wrong, missing in done.failed:
        report.stale_points += wrong + missing
    failed += done.failed
    return done


def _count(
    report: RaySyncReport,
    rep: DocumentReport,
    summary: _Summary,
    source_of: Mapping[str, str],
    changed: list[DocumentReport],
) -> None:
    """Add one planned document to the report (as :func:`rechunk.sync` counts it)."""
    report.documents[rep.status] += 1
    if rep.status == "skipped":
        return
    report.documents["synced"] += 1
    for name in ("kept", "updated", "added", "deleted"):
        report.chunks[name] += getattr(rep, name)
    tokens: dict[str, int] = report.engine.setdefault("_tokens", {})
    for key, value in summary.tokens.items():
        tokens[key] = value
    for key, key_tokens, nbytes in summary.needs.get(rep.doc_id, []):
        kind = "store" if key in summary.found else source_of.get(key, "embed")
        if kind == "store":
            rep.from_store += 1
        elif kind == "cache":
            rep.from_cache += 1
        else:
            rep.embedded += 1
            rep.tokens_embedded += key_tokens
            rep.reindexed_bytes += nbytes
    if rep.status == "changed":
        changed.append(rep)


def _prune(
    report: RaySyncReport,
    store: VectorStore,
    given: set[str],
    dry_run: bool,
    scope: Callable[[str], bool] | None = None,
) -> None:
    """Delete the documents the collection holds beyond ``given`` (of those, the ones
    ``scope`` takes: the records of files read whole), as :func:`rechunk.sync` prunes: on
    the driver, under the writer lock, after every commit."""
    held: set[str] = report.engine.pop("_held", set())
    delete_gone(report, store, given, held, scope, dry_run)


def engine(
    store: str,
    *,
    embedder: str | Callable[[], Embedder] | Embedder | None = None,
    embed_url: str | None = None,
    address: str | None = None,
    workers: int = 2,
    num_gpus: float = 0.0,
    cpus: float = CPUS,
    docs_per_task: int | None = None,
) -> Callable[..., RaySyncReport]:
    """A callable with :func:`rechunk.sync`'s signature that runs :func:`sync` on the
    cluster at ``address``, into the collection (and layout) of the store it is given, on
    the server ``store`` (a URI every node reaches). The embedding actors make
    ``embedder`` (a URI or a factory; default: the embedder the call is given, shipped
    as it is). For :func:`rechunk.sync.generations.reindex`'s ``engine``: a model change
    reindexed on a cluster::

        reindex(docs, ChromaStore(client, "docs"), chunker, embedder,
                engine=engine("chroma+http://10.0.0.5:8000", embedder="onnx:", address="auto"))
    """
    if not isinstance(store, str) or not store.startswith(SERVER_SCHEMES):
        raise ConfigError(
            f"the ray engine needs a store server every node reaches ({', '.join(SERVER_SCHEMES)}"
            f"...), not {store!r}"
        )
    on_actors = embedder

    def run(
        documents: Iterable[Document] | Any,
        target: VectorStore,
        *,
        chunker: Chunker,
        embedder: Embedder,
        **options: Any,
    ) -> RaySyncReport:
        return sync(
            documents,
            store,
            collection=target.collection,
            layout=str(getattr(target, "layout", "langchain")),
            chunker=chunker,
            embedder=embedder if on_actors is None else on_actors,
            embed_url=embed_url,
            address=address,
            workers=workers,
            num_gpus=num_gpus,
            cpus=cpus,
            docs_per_task=docs_per_task,
            **options,
        )

    return run


#: how often a command-line run looks at its head node (seconds), and how many refusals
#: in a row end it: about 45 s, under the 60 s after which Ray's core ends the driver
#: itself, so a head that comes back sooner (Ray's GCS fault tolerance) is not lost
HEAD_CHECK_SECONDS = 5.0
HEAD_REFUSALS = 9


@contextlib.contextmanager
def _head_watch(address: str | None, lost: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, look at the head node at ``address`` (``HOST:PORT``) every
    :data:`HEAD_CHECK_SECONDS`; when it refuses connections :data:`HEAD_REFUSALS` times
    in a row (its process is gone), call ``lost`` with what to say. Ray's own core ends
    a driver whose head went away after 60 s, with exit 1 and only its own log line:
    a cron job read that as a sync that skipped a file. A timeout (a busy head) is not
    counted, and a head that accepts again starts the count anew."""
    target = _host_port(address)
    if target is None:
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        refused = 0
        while not stop.wait(HEAD_CHECK_SECONDS):
            try:
                socket.create_connection(target, timeout=PROBE_SECONDS).close()
                refused = 0
            except ConnectionRefusedError:
                refused += 1
                if refused >= HEAD_REFUSALS and not stop.is_set():
                    lost(
                        f"the Ray cluster at {address} went away during the run (its head "
                        "node refuses connections): what the run had not committed is not "
                        "in the collection; start the cluster and run it again"
                    )
                    return
            except OSError:  # a timeout or a busy network: not a head that is gone
                continue

    watcher = threading.Thread(target=watch, name="rechunk-ray-head", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()


def _end_cli_run(message: str) -> None:
    """End a command-line run whose cluster went away, as the CLI ends a run whose store
    did: one error line and exit 3 (Ray's core would end it with exit 1 a minute later)."""
    print(f"rechunk: error: {message}", file=sys.stderr, flush=True)
    os._exit(3)


def engine_for_cli(args: Any) -> Callable[..., RaySyncReport]:
    """``--engine ray`` of ``rechunk sync`` and ``rechunk reindex``: :func:`engine` on the
    cluster at ``--ray-address`` and the server of ``--store``, each embedding actor
    making the embedder of ``--embedder`` / ``--model`` / ``--embed-url`` once. Made
    before the store is opened: an embedded ``--store`` is refused with nothing created."""
    import functools

    from rechunk.integrations.uri import open_embedder

    factory = functools.partial(
        open_embedder,
        getattr(args, "embedder", None),
        model=getattr(args, "model", None),
        embed_url=getattr(args, "embed_url", None),
    )
    address = getattr(args, "ray_address", None)
    run = engine(str(args.store), embedder=factory, address=address)

    def watched(*given: Any, **options: Any) -> RaySyncReport:
        with _head_watch(address, _end_cli_run):
            return run(*given, **options)

    return watched
