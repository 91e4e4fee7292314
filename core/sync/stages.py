"""The stages of one sync, in the order a batch of documents meets them.

:func:`start` checks what the sync was given and opens the run (:class:`_Run`, the state
the stages share). Then, :data:`DOC_BATCH` documents at a time: :func:`read` (the batch's
stored points in one request, and the chunks they prove; the next batch is read while
this one is worked on), :func:`chunk` and :func:`plan` (each document), :func:`embed`
(the vectors the plans need) and :func:`count` (the batch in the report),
:func:`publish`, and :func:`verify` (the stale check, which settles versioned documents
with concurrent writers first: :func:`~rechunk.sync.verifying.settle`). At the end,
:func:`prune` and :func:`finish`. ``SyncReport.seconds`` names these stages: reading
counts as ``plan``, settling as ``verify``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from rechunk.chunkers.base import BaseChunker
from rechunk.chunking.chunk import Chunk, Chunker, tiling_problem
from rechunk.document import Document
from rechunk.errors import ConfigError, InputError
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import Embedder
from rechunk.sync.ahead import ChunkAhead
from rechunk.sync.inputs import (
    _check_store,
    _chooser,
    check_flags,
    check_inputs,
    check_lenders,
    check_parts,
)
from rechunk.sync.model_check import ModelCheck
from rechunk.sync.planning import _Plan, _plan, _stored_chunks
from rechunk.sync.publishing import _publish
from rechunk.sync.report import (
    ORDERS,
    DocumentReport,
    Order,
    Progress,
    SyncReport,
    changed_totals,
)
from rechunk.sync.store import (
    CollectionInfo,
    StoredPoint,
    VectorStore,
    _keeps,
    _offers,
    _text_locators,
    batches,
    of_model,
)
from rechunk.sync.vectors import Vector, _bad_stored, _Published, _vectors
from rechunk.sync.verifying import _check_published, stale_verdict

log = logging.getLogger("rechunk.sync")


#: documents read, chunked, planned, embedded, published and verified together: a sync's
#: memory grows with this batch and the largest document, not with the corpus
DOC_BATCH = 256
#: bytes of vectors a sync keeps of what it published, so that a later batch needing the
#: same input (a repeated paragraph) takes it from memory rather than from a read of the
#: collection, whose cost grows with the collection; past it the oldest are let go
PUBLISHED_BYTES = 64 * 1024 * 1024
#: inputs whose point id a sync keeps of what it published (about 30 MB), newest first:
#: past the vectors it keeps, a store that reads by id (``get_vectors_at``: Chroma, whose
#: filtered reads scan the collection) is asked for the vectors at those points
PUBLISHED_IDS = 1 << 17


@dataclass
class _Batch:
    """A batch of documents read ahead: their stored points, and per document the chunks
    (None: still to chunk; ``sent``: the positions of those the helper process is
    chunking, none when it is not)."""

    stored: dict[str, list[StoredPoint]]
    chunks: list[list[Chunk] | None]
    sent: list[int]


@dataclass
class _Run:
    """What the stages of one sync share: what it was given, the report it fills, and what
    it carries from one batch to the next."""

    store: VectorStore
    docs: list[Document]
    batches: list[Sequence[Document]]  # the documents, DOC_BATCH at a time
    chunker: Chunker  # the sync's own (the helper process chunks only its documents)
    pick: Callable[[Document], Chunker]  # each document's chunker
    embedder: Embedder  # the model itself (a CachedEmbedder's cache is ``cache``)
    cache: EmbeddingCache | None
    report: SyncReport
    info: CollectionInfo | None  # None: the collection does not exist (a dry run)
    locked: bool  # the writer lock is held: no other rechunk writer changes the collection
    order: Order
    dry_run: bool
    prune: bool
    keep: set[str]  # doc_ids a prune keeps
    complete_files: set[str]  # files whose records were all given (see rechunk.sync)
    check_stored: bool
    sources: list[VectorStore]  # where a vector is looked up: the collection, reuse_from
    neighbours: bool  # the store keeps each point's PREVIOUS / NEXT ids
    text_locators: bool  # the store holds locators as text
    keep_held: bool  # a prune lists the collection's ids: ``held`` is kept
    progress: Progress | None
    published: _Published  # what this sync wrote, for later batches to reuse
    ahead: ChunkAhead | None  # the helper process that chunks the next batch
    model_check: ModelCheck  # run before the model embeds anything
    held: set[str] = field(default_factory=set)  # ids of the given documents' points
    tokens: dict[str, int] = field(default_factory=dict)  # every distinct input synced
    counted: set[str] = field(default_factory=set)  # inputs counted in report.inputs
    changed: list[DocumentReport] = field(default_factory=list)
    failed: list[tuple[str, int, int]] = field(default_factory=list)  # (doc_id, wrong, missing)
    done: int = 0  # documents planned
    embedded_before: int = 0  # inputs embedded by earlier batches (for progress)

    @property
    def nothing_stored(self) -> bool:
        """Nothing to read before planning: the collection is missing, or held no point
        when the writer lock was taken (every document is new, and the collection holds
        only what this sync writes)."""
        return self.info is None or (self.locked and self.info.points == 0)

    def tick(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()


def start(
    documents: Iterable[Document],
    store: VectorStore,
    *,
    locked: bool,
    chunker: Chunker,
    embedder: Embedder,
    cache: EmbeddingCache | None,
    order: Order,
    prune: bool,
    keep: Iterable[str],
    dry_run: bool,
    reuse_from: Sequence[VectorStore],
    progress: Progress | None,
    check_stored: bool,
    chunker_for: Callable[[Document], Chunker | None] | None,
    complete_files: Iterable[str] = (),
) -> _Run:
    """Check what the sync was given (:func:`~rechunk.sync.inputs.check_inputs`, ``keep``,
    ``order``, then the collection) and open the run. With more than one batch, a helper
    process chunks the next batch while this one is embedded and published (see
    :mod:`rechunk.sync.ahead`; only the documents of the sync's own chunker: another
    policy's are chunked here)."""
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {ORDERS}, not {order!r}")
    check_flags(prune=prune, dry_run=dry_run, check_stored=check_stored)
    check_parts(store, chunker, embedder, cache, progress=progress, chunker_for=chunker_for)
    if not isinstance(reuse_from, Sequence) or not all(
        hasattr(source, "get_vectors") for source in reuse_from
    ):
        raise ConfigError("reuse_from takes a list of stores (collections to copy vectors from)")
    docs, raw_embedder, cache = check_inputs(documents, store, chunker, embedder, cache)
    pick = _chooser(chunker, chunker_for, docs, raw_embedder)
    kept = doc_id_set(keep, "keep")
    whole = doc_id_set(complete_files, "complete_files")
    if prune and not docs:
        raise InputError(
            "prune=True with no documents would delete every document of the collection "
            "(an empty folder or a spent generator?); to empty it on purpose, delete its "
            "points or drop it"
        )
    report = SyncReport(store.collection, chunker.policy_id, raw_embedder.model_id, order, dry_run)
    info = _check_store(store, raw_embedder, dry_run)
    check_lenders(reuse_from, raw_embedder)
    report.chunks_not_given = info.points if info is not None else 0
    groups = list(batches(docs, DOC_BATCH))
    return _Run(
        store=store,
        docs=docs,
        batches=groups,
        chunker=chunker,
        pick=pick,
        embedder=raw_embedder,
        cache=cache,
        report=report,
        info=info,
        locked=locked,
        order=order,
        dry_run=dry_run,
        prune=prune,
        keep=kept,
        complete_files=whole,
        check_stored=check_stored,
        sources=[*([] if info is None else [store]), *reuse_from],
        neighbours=_keeps(store),
        text_locators=_text_locators(store),
        keep_held=(prune or bool(whole)) and _offers(store, *_LISTS_IDS),
        progress=progress,
        published=_Published(store, PUBLISHED_BYTES, PUBLISHED_IDS),
        ahead=ChunkAhead(chunker) if len(groups) > 1 else None,
        model_check=ModelCheck(
            [*([store] if info is not None and info.points else []), *reuse_from], cache
        ),
    )


def read(run: _Run, batch: Sequence[Document], send: bool) -> _Batch:
    """The batch's stored points in one read (embedded Qdrant without its index scans
    per read) and the chunks they prove; ``send`` the others to the helper process."""
    t0 = time.perf_counter()
    stored = (
        {}
        if run.nothing_stored
        else of_model(run.store.get_points_many([d.doc_id for d in batch]), run.embedder.model_id)
    )
    chunks = [
        _stored_chunks(doc, stored.get(doc.doc_id, []), run.pick(doc).policy_id) for doc in batch
    ]
    run.report.seconds["plan"] += time.perf_counter() - t0
    todo = [
        i
        for i, (doc, known) in enumerate(zip(batch, chunks))
        if known is None and run.pick(doc) is run.chunker
    ]
    sent = send and run.ahead is not None and run.ahead.submit([batch[i].text for i in todo])
    return _Batch(stored, chunks, todo if sent else [])


def collect_chunks(run: _Run, current: _Batch) -> None:
    """The chunks the helper process made of the batch's documents it was sent (none when
    the helper failed: :func:`chunk` then makes them here)."""
    if current.sent and run.ahead is not None:
        t0 = time.perf_counter()
        made = run.ahead.collect() or ()  # nothing: the helper failed
        for i, chunks_made in zip(current.sent, made):
            current.chunks[i] = chunks_made
        run.report.seconds["chunk"] += time.perf_counter() - t0


def bad_vectors(run: _Run, current: _Batch) -> dict[str, frozenset[str]]:
    """With ``check_stored``: per doc_id of the batch, its stored points whose vector
    fails the vector check (each is written again with a new vector); else nothing."""
    if not run.check_stored or not current.stored:
        return {}
    t0 = time.perf_counter()
    model_id, dimension = run.embedder.model_id, run.embedder.dimension
    revector = _bad_stored(current.stored, run.store, model_id, dimension)
    run.report.seconds["plan"] += time.perf_counter() - t0
    if revector:
        log.warning(
            "%d stored point(s) of %d document(s) hold a vector that fails the "
            "vector check; they are written again",
            sum(len(ids) for ids in revector.values()),
            len(revector),
        )
    return revector


def chunk(run: _Run, doc: Document, chunks: list[Chunk] | None, i: int) -> list[Chunk]:
    """``doc``'s chunks: ``chunks`` (proven by its stored points, or made by the helper
    process), else made here by its chunker. ``i``: its place among the sync's
    documents, for progress."""
    if chunks is None:
        t0 = time.perf_counter()
        chunker = run.pick(doc)
        chunks = chunker.chunk(doc.text)
        run.report.seconds["chunk"] += time.perf_counter() - t0
        if not isinstance(chunker, BaseChunker):  # rechunk's own are tested to the contract
            problem = tiling_problem(doc.text, chunks, chunker.hard_max_tokens)
            if problem is not None:
                raise ConfigError(
                    f"chunker {chunker.policy_id} broke the Chunker contract on document "
                    f"{doc.doc_id!r}: {problem}. Nothing of that document was written (of "
                    "this sync, only documents before it may have been)"
                )
    run.tick("chunk", i, len(run.docs))
    return chunks


def plan(
    run: _Run,
    doc: Document,
    chunks: list[Chunk],
    stored: list[StoredPoint],
    revector: frozenset[str],
    i: int,
) -> _Plan:
    """What to write and delete for ``doc`` (:func:`~rechunk.sync.planning._plan`), given
    ``stored``, the points the collection holds of it, and ``revector``, those of them
    whose vector failed the check."""
    run.report.chunks_not_given -= len(stored)
    if run.keep_held:
        run.held.update(p.id for p in stored)
    t0 = time.perf_counter()
    planned = _plan(
        doc,
        chunks,
        run.pick(doc),
        run.embedder.model_id,
        stored,
        run.neighbours,
        revector,
        run.text_locators,
    )
    if run.keep_held:
        run.held.update(planned.ids)
    run.report.seconds["plan"] += time.perf_counter() - t0
    run.tick("plan", i, len(run.docs))
    return planned


def embed(run: _Run, plans: Sequence[_Plan]) -> tuple[dict[str, Vector], dict[str, str]]:
    """The vectors of the inputs the batch's new points need, and where each came from
    (:func:`~rechunk.sync.vectors._vectors`: the cache, what this sync published, the
    collections, then the model; only the model's count as ``embed`` time)."""
    before = run.embedded_before

    def progress(stage: str, n: int, total: int) -> None:
        run.tick(stage, before + n, before + total)

    active = [p for p in plans if p.report.status not in ("skipped", "unchanged")]
    # with nothing stored before this sync, the collection holds only the inputs that
    # earlier batches published: no other key is looked up there
    vectors, source = _vectors(
        active,
        run.embedder,
        run.cache,
        run.sources,
        run.dry_run,
        run.report.seconds,
        progress,
        (run.store, run.counted) if run.nothing_stored else None,
        run.published,
        run.model_check,
    )
    run.embedded_before += sum(1 for kind in source.values() if kind == "embed")
    return vectors, source


def count(run: _Run, plans: Sequence[_Plan], source: Mapping[str, str]) -> None:
    """The batch's documents, chunks and inputs in the report: an input counts once per
    sync, in the batch that first needed it."""
    report = run.report
    for planned in plans:
        rep = planned.report
        report.per_document.append(rep)
        report.documents[rep.status] += 1
        if rep.policy is not None:
            report.policies[rep.policy] = report.policies.get(rep.policy, 0) + 1
        if rep.status == "skipped":
            continue
        report.documents["synced"] += 1
        for name in ("kept", "updated", "added", "deleted"):
            report.chunks[name] += getattr(rep, name)
        for key, piece in zip(planned.keys, planned.chunks):
            run.tokens[key] = piece.tokens
        if rep.status == "changed":
            run.changed.append(rep)
    for key, kind in source.items():
        if key not in run.counted:
            run.counted.add(key)
            report.inputs[_INPUT_COUNTER[kind]] += 1
            if kind == "embed":
                report.tokens_embedded += run.tokens[key]
    run.done += len(plans)


def publish(run: _Run, plans: Sequence[_Plan], vectors: dict[str, Vector]) -> list[_Plan]:
    """Write the batch's new and changed documents (:func:`~rechunk.sync.publishing._publish`)
    and remember what was written, for later batches: the plans published (none in a dry
    run)."""
    published = [p for p in plans if p.report.status in ("new", "changed")]
    if run.dry_run or not published:
        return []
    t0 = time.perf_counter()
    _publish(published, vectors, run.store, run.order)
    run.report.seconds["publish"] += time.perf_counter() - t0
    run.published.add(
        {k: vectors[k] for p in published for k in p.needs_vector},
        {k: pid for p in published for k, pid in zip(p.keys, p.ids)},
    )
    for p in published:
        rep = p.report
        log.info(
            "synced doc_id=%s status=%s added=%d updated=%d deleted=%d",
            rep.doc_id,
            rep.status,
            rep.added,
            rep.updated,
            rep.deleted,
        )
    run.tick("publish", run.done, len(run.docs))
    return published


def verify(run: _Run, published: list[_Plan], vectors: dict[str, Vector]) -> None:
    """The stale check of what the batch published
    (:func:`~rechunk.sync.verifying._check_published`: settle, then verify); unchanged
    documents were proven exact by their plan. A document that fails it is kept in
    ``run.failed`` for :func:`finish`."""
    if not published:
        return
    t0 = time.perf_counter()
    run.failed += _check_published(
        published,
        run.report,
        run.store,
        run.pick,
        run.embedder,
        run.cache,
        vectors,
        run.order,
        run.locked,
    )
    run.report.seconds["verify"] += time.perf_counter() - t0


def prune(run: _Run) -> None:
    """With ``prune=True``, delete the documents the collection holds beyond the given
    ones and ``keep`` (:func:`_gone`); without it, the records of ``complete_files`` that
    were not given. The reads that find them count as ``plan``, the deletes as
    ``publish``; a dry run only counts them."""
    if run.info is None or not (run.prune or run.complete_files):
        return
    given = {doc.doc_id for doc in run.docs} | run.keep
    scope = None if run.prune else records_of(run.complete_files)
    delete_gone(run.report, run.store, given, run.held, scope, run.dry_run)


def delete_gone(
    report: SyncReport,
    store: VectorStore,
    given: set[str],
    held: set[str],
    scope: Callable[[str], bool] | None,
    dry_run: bool,
) -> None:
    """Delete the documents ``store`` holds beyond ``given`` (:func:`_gone`; of those, the
    ones ``scope`` takes: the records of files read whole) and count them in ``report``:
    the reads that find them as ``plan``, the deletes as ``publish``; a dry run only
    counts them. :func:`prune`, and the Ray engine's driver after its commits."""
    seconds = report.seconds
    t0 = time.perf_counter()
    for points_of in _gone(store, given, held, scope):
        seconds["plan"] += time.perf_counter() - t0
        delete = [pid for point_ids in points_of.values() for pid in point_ids]
        for doc_id, point_ids in points_of.items():
            n = len(point_ids)
            report.per_document.append(DocumentReport(doc_id, "deleted", deleted=n))
            report.documents["deleted"] += 1
            report.chunks["deleted"] += n
            report.chunks_not_given -= n  # they were counted among the chunks not given
        if not dry_run and delete:
            t0 = time.perf_counter()
            store.delete(delete)
            seconds["publish"] += time.perf_counter() - t0
        t0 = time.perf_counter()
    seconds["plan"] += time.perf_counter() - t0


def finish(run: _Run) -> SyncReport:
    """The run's totals (tokens, R_c over the changed documents, the reindex
    amplification) and the stale check's verdict: :class:`~rechunk.errors.StaleCheckError`
    when a published document failed it."""
    report = run.report
    # a writer that added points of a given document after the count would make it negative
    report.chunks_not_given = max(report.chunks_not_given, 0)
    report.tokens_total = sum(run.tokens.values())
    report.model_check = run.model_check.state
    report.model_check_tokens = run.model_check.tokens
    changed_totals(report, run.changed)
    if not run.dry_run:
        stale_verdict(report, run.failed)
    log.info(
        "sync collection=%s documents=%s tokens_embedded=%d",
        report.collection,
        report.documents,
        report.tokens_embedded,
    )
    return report


#: SyncReport.inputs counter of each source of a vector
_INPUT_COUNTER = {"cache": "from_cache", "store": "from_store", "embed": "embedded"}
#: what a store offers for a prune to find its gone documents by id (see :func:`_gone`)
_LISTS_IDS = ("all_ids", "doc_ids_of")


def doc_id_set(doc_ids: Iterable[str], name: str) -> set[str]:
    """``doc_ids`` as a set, or an :class:`InputError` naming the argument ``name``."""
    if isinstance(doc_ids, (str, bytes)) or not isinstance(doc_ids, Iterable):
        raise InputError(f"{name} takes an iterable of doc_ids, not a {type(doc_ids).__name__}")
    out = set(doc_ids)
    if any(not isinstance(doc_id, str) for doc_id in out):
        raise InputError(f"{name} takes doc_ids (str)")
    return out


def records_of(files: set[str]) -> Callable[[str], bool]:
    """Whether a doc_id may be a record of one of ``files`` (``file#id``; the id may hold
    a ``#`` too). A file's own doc_id can look the same (``data.jsonl#notes.md``): the
    prune checks the stored points too (see :func:`_gone`)."""

    def of(doc_id: str) -> bool:
        return any(_files_of(doc_id, files))

    return of


def record_files_of(doc_ids: Iterable[str], files: set[str]) -> set[str]:
    """The files of ``files`` that one of ``doc_ids`` may be a record of (see
    :func:`records_of`)."""
    return {file for doc_id in doc_ids for file in _files_of(doc_id, files)}


def _files_of(doc_id: str, files: set[str]) -> Iterator[str]:
    """The files of ``files`` whose records ``doc_id`` may be one of (``file#id``)."""
    return (doc_id[:i] for i, char in enumerate(doc_id) if char == "#" and doc_id[:i] in files)


def records_among(store: VectorStore, doc_ids: Sequence[str]) -> set[str]:
    """The ``doc_ids`` whose stored points are a record's (see :func:`are_records`)."""
    stored = store.get_points_many(list(doc_ids)) if doc_ids else {}
    return {doc_id for doc_id in doc_ids if are_records(stored[doc_id])}


def are_records(points: Sequence[StoredPoint]) -> bool:
    """Whether a document's stored points are a record's (they carry the ``record``
    locator a file of records gives each of its documents)."""
    return bool(points) and all("record" in p.payload.metadata for p in points)


def _gone(
    store: VectorStore,
    given: set[str],
    held: set[str],
    scope: Callable[[str], bool] | None = None,
) -> Iterator[dict[str, list[str]]]:
    """The documents the collection holds beyond ``given`` (of those, the records
    ``scope`` takes, when given: their stored points say they are records), each with
    its points' ids, at most :data:`DOC_BATCH` documents at a time. A store that can
    list its ids and read
    doc_ids by id (``all_ids`` and ``doc_ids_of``: Chroma, where every record's
    metadata costs over ten times its id to read) is asked for its ids, and for the
    doc_ids of those not ``held`` (the points of the given documents, which the sync
    keeps while it prunes); any other store names every doc_id it holds, then the
    points of each batch of the others."""
    if _offers(store, *_LISTS_IDS):
        all_ids, doc_ids_of = (getattr(store, name) for name in _LISTS_IDS)
        found: dict[str, list[str]] = {}
        for page in all_ids():
            others = [pid for pid in page if pid not in held]
            for pid, doc_id in (doc_ids_of(others) if others else {}).items():
                if doc_id not in given and (scope is None or scope(doc_id)):
                    found.setdefault(doc_id, []).append(pid)
        for batch in batches(sorted(found), DOC_BATCH):
            if scope is not None:
                records = records_among(store, batch)
                batch = [doc_id for doc_id in batch if doc_id in records]
            yield {doc_id: found[doc_id] for doc_id in batch}
        return
    gone = store.doc_ids() - given
    for batch in batches(sorted(d for d in gone if scope is None or scope(d)), DOC_BATCH):
        points_of = store.get_points_many(batch)
        if scope is not None:
            batch = [doc_id for doc_id in batch if are_records(points_of[doc_id])]
        yield {doc_id: [p.id for p in points_of[doc_id]] for doc_id in batch}
