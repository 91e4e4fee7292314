"""The sync engine: :func:`sync` takes the collection's writer lock and runs the stages of
:mod:`rechunk.sync.stages` over the documents, a batch at a time."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator, Sequence

from rechunk.chunking.chunk import Chunker
from rechunk.document import Document
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import Embedder
from rechunk.sync import stages
from rechunk.sync.report import Order, Progress, SyncReport
from rechunk.sync.store import VectorStore, _method
from rechunk.sync.verifying import check_one_model


def sync(
    documents: Iterable[Document],
    store: VectorStore,
    *,
    chunker: Chunker,
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    order: Order = "upsert-then-delete",
    prune: bool = False,
    keep: Iterable[str] = (),
    dry_run: bool = False,
    reuse_from: Sequence[VectorStore] = (),
    progress: Progress | None = None,
    check_stored: bool = False,
    chunker_for: Callable[[Document], Chunker | None] | None = None,
    complete_files: Iterable[str] = (),
) -> SyncReport:
    """Bring ``store`` to exactly the given revisions of ``documents``.

    Only inputs whose key the cache and the collection lack are embedded.
    ``order`` is the publication order: ``"upsert-then-delete"`` (default: a
    reader may briefly see both revisions, never neither; the old points are marked
    superseded in one payload-only request once the new ones are written, and a
    search that leaves marked points out (:meth:`VectorStore.search`, the filter of
    ``rechunk.adapters.guard``) then sees only the new revision while they wait to
    be deleted) or ``"delete-then-upsert"`` (a reader may briefly see neither,
    never both).
    With ``prune=True`` the documents are taken as the complete set, and
    documents in the store but not among them (nor in ``keep``: say, files that
    exist but could not be read this time) are deleted; without it, nothing
    outside the given doc_ids is touched, except the records of ``complete_files``:
    files of records (JSON, JSONL: doc_id ``file#id``) read whole, whose stored
    records that were not given (removed from the file) are deleted, prune or not
    (finding them reads every doc_id of the collection, as a prune does);
    ``prune=True`` with no documents is an
    InputError (an empty folder or a spent generator must not empty the
    collection). Every document's metadata is checked against the store
    (:meth:`VectorStore.check_metadata`) before anything is written.
    ``dry_run=True`` plans and counts and writes nothing (no vector is computed).
    When documents carry ``version``, a document older than the version in the
    store is skipped, never written.
    After publishing, every published document is read back (the stale check; under a
    writer lock, its point ids first, see :func:`~rechunk.sync.verifying._check_published`): when
    one holds a point of another revision or lacks one of its own, sync raises
    :class:`~rechunk.errors.StaleCheckError` (a :class:`StoreError`), whose ``report``
    is the full :class:`SyncReport` with ``stale_check == "failed"``.
    ``reuse_from`` names further collections (same model) whose vectors may be
    copied by input key (a reindex reuses the live generation this way); one another
    model wrote is a :class:`~rechunk.errors.ConfigError` (none of its vectors could
    serve this model).
    ``progress(stage, done, total)`` is called as documents are chunked and
    planned, inputs embedded and documents published.
    ``chunker_for(document)`` picks another chunker for a document (code by its
    language, say), or returns None for ``chunker``; it is asked once per document,
    before anything is read, and every chunker it picks must fit the embedder as
    ``chunker`` must. ``report.policy`` names ``chunker``, ``report.policies`` counts
    the documents of each policy and each document's report names its own.

    Every vector is checked before it is stored or cached, and before it is reused
    (:func:`~rechunk.reuse.embedding.check_vectors`: the model's dimension, finite, a norm
    in range): a batch the model answers with unusable vectors (all zeros, NaN, values
    near float32's limit) raises :class:`~rechunk.errors.BadVectorError`, and none of
    that batch is cached or stored; a cached or stored vector that fails is not reused
    but embedded again, replacing the bad cache entry. Points a sync keeps as they are
    are not read back; ``check_stored=True`` also reads the vectors of every stored
    point of the given documents and writes again, with a new vector, each point whose
    vector fails the check (counted as ``added``): the repair of a collection written
    by an embedder that answered badly before these checks existed.
    Before the model embeds anything, it embeds once more one input whose vector the
    collection or the cache holds under its ``model_id`` (the model check,
    :mod:`rechunk.sync.model_check`; not for an embedder whose ``pins_weights`` is true):
    when the two vectors disagree, the model behind the identity has changed (a server
    serving another model under the same name), and sync raises
    :class:`~rechunk.errors.ModelChangedError` with nothing embedded, cached or stored.

    Concurrent writers: after every sync of a document has returned, the store holds
    exactly the chunks of the newest ``version`` any of them synced. On Qdrant every
    write and delete of a versioned document is conditional on the stored version
    (a point of a newer version is never replaced or deleted), and after publishing
    the sync re-reads the document: a writer that finds a newer version removes its
    own points and reports the document ``skipped`` ("superseded"); the newest writer
    removes what older ones left and re-publishes points they deleted or overwrote
    (at most :data:`~rechunk.sync.verifying.REPAIR_ROUNDS` rounds). Chroma has no conditional
    write: a store that offers ``writer_lock()`` (ChromaStore) is locked for the whole
    sync, so writers of one collection take turns. Documents without ``version`` have
    no order: concurrent writers of one of them on Qdrant may end with a failed stale
    check (an error, raised by at least one of them; the collection may then hold points
    of both revisions until that document is synced again, which the error says). Two
    first syncs of one collection with different models: without a writer lock, a sync
    that found the collection without rechunk points checks after publishing that no
    other model wrote into it meanwhile, and one that finds another model's points
    removes its own and raises :class:`~rechunk.errors.StoreError`
    (:func:`~rechunk.sync.verifying.check_one_model`).
    """
    lock = None if dry_run else _method(store, "writer_lock")
    with _older_objects_frozen(), lock() if lock is not None else contextlib.nullcontext():
        return _sync(
            documents,
            store,
            locked=lock is not None,
            chunker=chunker,
            embedder=embedder,
            cache=cache,
            order=order,
            prune=prune,
            keep=keep,
            dry_run=dry_run,
            reuse_from=reuse_from,
            progress=progress,
            check_stored=check_stored,
            chunker_for=chunker_for,
            complete_files=complete_files,
        )


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """Keep Python's cyclic garbage collector off the objects that exist when a sync
    starts, until it ends (``gc.freeze()``). An embedded Qdrant collection is millions
    of such objects, and every full collection during a re-sync walked them all
    (5,000 documents: 0.4-0.5 s of a 3.5-s re-sync, in two or three collections, each
    longer as the collection grows). What the sync itself makes is collected as usual,
    and the frozen objects go back to the collector afterwards. A process that froze
    objects itself (before forking workers, say) or turned the collector off is left
    as it is.

    The young generations are collected first (cheap, whatever the store holds):
    garbage frozen with the rest would go back into the oldest generation, which only a
    full collection visits, and a freeze resets the counts that trigger collections, so
    a process that syncs every few seconds (a watcher, an application's loop) never
    reached one: 4,000 JSON encoders' closures and 90,000 cells piled up in a watcher's
    10-minute accelerated soak."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.collect(1)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _sync(
    documents: Iterable[Document],
    store: VectorStore,
    *,
    locked: bool,
    chunker: Chunker,
    embedder: Embedder,
    cache: EmbeddingCache | None = None,
    order: Order = "upsert-then-delete",
    prune: bool = False,
    keep: Iterable[str] = (),
    dry_run: bool = False,
    reuse_from: Sequence[VectorStore] = (),
    progress: Progress | None = None,
    check_stored: bool = False,
    chunker_for: Callable[[Document], Chunker | None] | None = None,
    complete_files: Iterable[str] = (),
) -> SyncReport:
    """:func:`sync` itself, with the writer lock (if any) held: ``locked`` says it is, so
    that no other rechunk writer changes the collection until this sync ends. It runs the
    stages of :mod:`rechunk.sync.stages` a batch at a time, reading the next batch (and
    handing its chunking to the helper process) while this one is planned, embedded,
    published and verified."""
    run = stages.start(
        documents,
        store,
        locked=locked,
        chunker=chunker,
        embedder=embedder,
        cache=cache,
        order=order,
        prune=prune,
        keep=keep,
        dry_run=dry_run,
        reuse_from=reuse_from,
        progress=progress,
        check_stored=check_stored,
        chunker_for=chunker_for,
        complete_files=complete_files,
    )
    try:
        reads = [stages.read(run, run.batches[0], send=False)] if run.batches else []
        for index, batch in enumerate(run.batches):
            current = reads.pop()
            stages.collect_chunks(run, current)
            if index + 1 < len(run.batches):
                reads.append(stages.read(run, run.batches[index + 1], send=True))
            revector = stages.bad_vectors(run, current)
            plans = []
            for i, (doc, known) in enumerate(zip(batch, current.chunks), run.done + 1):
                chunks = stages.chunk(run, doc, known, i)
                stored = current.stored.get(doc.doc_id, [])
                bad = revector.get(doc.doc_id, frozenset())
                plans.append(stages.plan(run, doc, chunks, stored, bad, i))
            del current
            vectors, source = stages.embed(run, plans)
            stages.count(run, plans, source)
            stages.verify(run, stages.publish(run, plans, vectors), vectors)
    finally:
        run.close()
    if not dry_run:
        check_one_model(run.report, store, run.embedder.model_id, run.info, locked)
    stages.prune(run)
    return stages.finish(run)
