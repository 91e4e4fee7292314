"""The checks after publishing: versioned documents are settled with concurrent writers
first (:func:`settle`), then each published document is verified to hold exactly its new
revision (the stale check); a sync into a collection that held no rechunk point checks
that no other model wrote into it meanwhile (:func:`check_one_model`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from rechunk.chunking.chunk import Chunker
from rechunk.document import Document
from rechunk.errors import StaleCheckError, StoreError
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import Embedder
from rechunk.sync.planning import _Plan, _plan
from rechunk.sync.publishing import _guarded, _publish
from rechunk.sync.report import DocumentReport, Order, SyncReport
from rechunk.sync.store import (
    CollectionInfo,
    StoredPoint,
    VectorStore,
    _keeps,
    _method,
    _text_locators,
    batches,
    of_model,
)
from rechunk.sync.vectors import Vector, _vectors

log = logging.getLogger("rechunk.sync")


#: Rounds of settling a versioned document with concurrent writers (:func:`settle`) before
#: its stale check fails. A round follows only one that found the document not exactly
#: this sync's revision: an older writer, still publishing, wrote points of its own into it
#: or deleted or overwrote points of this sync's. Each request an older writer had in
#: flight when this sync wrote can do that once; the older writer then sees the newer
#: version and removes its own points itself. The bound stops a store that does not keep
#: what it is told.
REPAIR_ROUNDS = 10


def _settle_document(
    plan: _Plan, points: list[StoredPoint], store: VectorStore
) -> tuple[int | None, bool]:
    """After publishing a versioned document, clear what concurrent writers left.

    Returns ``(newer, changed)``: ``newer`` is the newest version in the store when it is
    newer than this sync's (this writer lost the race: every point older than that
    version is deleted, its own included, so it leaves nothing behind); ``changed`` says
    whether points were deleted (points of an older version, or of none, that are not
    this revision's). Deletes are conditional where the store can (Qdrant), so a point a
    newer writer wrote meanwhile is never removed."""
    version = plan.doc.version
    assert version is not None
    newest = max((p.payload.version for p in points if p.payload.version is not None), default=None)
    if newest is not None and newest > version:
        older = [p.id for p in points if p.payload.version is None or p.payload.version < newest]
        if older:
            store.delete(older, **_guarded(store, newest - 1))
        return newest, bool(older)
    mine = set(plan.ids)
    leftovers = [
        p.id
        for p in points
        if p.id not in mine and (p.payload.version is None or p.payload.version <= version)
    ]
    if leftovers:
        store.delete(leftovers, **_guarded(store, version))
    return None, bool(leftovers)


def _superseded(report: SyncReport, rep: DocumentReport, newest: int) -> None:
    """Count a document whose newer version another writer stored during this sync."""
    report.documents[rep.status] -= 1
    report.documents["synced"] -= 1
    report.documents["skipped"] += 1
    rep.status = "skipped"
    rep.reason = (
        f"superseded: another writer stored version {newest} during this sync; "
        "this sync's points were removed"
    )
    log.warning("doc_id=%s superseded by version %d during the sync", rep.doc_id, newest)


def _merge_repair(report: SyncReport, rep: DocumentReport, redo: DocumentReport) -> None:
    """Add what a repair round wrote to the document's report and the run's chunk counts."""
    for name in ("added", "updated", "from_cache", "from_store", "embedded", "tokens_embedded"):
        setattr(rep, name, getattr(rep, name) + getattr(redo, name))
    report.chunks["added"] += redo.added
    report.chunks["updated"] += redo.updated


def _verify(plan: _Plan, points: list[StoredPoint]) -> tuple[int, int]:
    """``(wrong, missing)`` for the document as re-read after publishing: points that are
    not exactly the new revision's (another revision, or an id the plan does not have),
    and points of the plan that are absent ((0, 0) when all is well)."""
    expected = set(plan.ids)
    stale = sum(1 for p in points if p.payload.revision != plan.doc.revision)
    # a point of the new revision marked superseded (by an older writer) is not found by
    # a search: it is missing until it is written again
    missing = expected - {p.id for p in points if not p.payload.superseded}
    extra = {p.id for p in points} - expected
    return max(stale, len(extra)), len(missing)


def _check_published(
    published: list[_Plan],
    report: SyncReport,
    store: VectorStore,
    pick: Callable[[Document], Chunker],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    vectors: dict[str, Vector],
    order: Order,
    locked: bool,
) -> list[tuple[str, int, int]]:
    """The stale check of a batch of published documents: ``(doc_id, wrong, missing)``
    of each that is not exactly its new revision after publishing (counted in
    ``report.stale_points``). Versioned documents are settled with concurrent writers
    first (see :func:`settle`).

    Under the writer lock (``locked``), a batch without versions is checked by id where
    the store can read by id (``present_ids``): no other writer ran, so the documents
    hold no point but those the plan read (or, in a collection empty when the lock was
    taken, none) and those this sync wrote; the planned ids being present and the ones
    it deleted gone is then the whole check. Any other answer falls back to re-reading
    the points, which names the documents and counts."""
    present_ids = _method(store, "present_ids")
    if locked and present_ids is not None and all(p.doc.version is None for p in published):
        expected = {pid for plan in published for pid in plan.ids}
        gone = {pid for plan in published for pid in plan.delete}
        if present_ids(sorted(expected | gone)) == expected:
            return []
    published, reread = settle(published, report, store, pick, embedder, cache, vectors, order)
    failed: list[tuple[str, int, int]] = []
    for plan in published:
        wrong, missing = _verify(plan, reread[plan.doc.doc_id])
        report.stale_points += wrong + missing
        if wrong or missing:
            failed.append((plan.doc.doc_id, wrong, missing))
    return failed


def settle(
    published: list[_Plan],
    report: SyncReport,
    store: VectorStore,
    pick: Callable[[Document], Chunker],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    vectors: dict[str, Vector],
    order: Order,
) -> tuple[list[_Plan], dict[str, list[StoredPoint]]]:
    """Re-read a batch of published documents, settling the versioned ones with
    concurrent writers (:func:`_settle_document`): a superseded one is reported skipped
    and left out; one that is not exactly its new revision once the points older writers
    left are deleted (an older writer deleted or overwrote points of its own) is planned
    and published again. A document that changed is read again and settled again, until
    a round finds nothing to do, :data:`REPAIR_ROUNDS` rounds at most. Returns the plans
    still published and the points each of them held when last read (a read that left
    nothing to settle, unless the bound was reached)."""
    seconds = report.seconds

    def read(doc_ids: list[str]) -> dict[str, list[StoredPoint]]:
        return of_model(store.get_points_many(doc_ids), embedder.model_id)

    held = read([p.doc.doc_id for p in published])
    for _ in range(REPAIR_ROUNDS):
        deleted: list[str] = []
        for plan in published:
            if plan.doc.version is None:
                continue
            newer, changed = _settle_document(plan, held[plan.doc.doc_id], store)
            if newer is not None:
                _superseded(report, plan.report, newer)
            elif changed:
                deleted.append(plan.doc.doc_id)
        published = [p for p in published if p.report.status != "skipped"]
        if deleted:  # what is left there (an older writer may have written since the read)
            held.update(read(deleted))
        unsettled: list[str] = []
        for index, plan in enumerate(published):
            doc_id = plan.doc.doc_id
            if plan.doc.version is None or not any(_verify(plan, held[doc_id])):
                continue
            # points of its own missing or of an older revision (a payload-only update of
            # this sync found the point gone, and an older writer then wrote it), or new
            # ones an older writer wrote: plan and publish again (conditional writes)
            points = held[doc_id]
            redo = _plan(
                plan.doc,
                plan.chunks,
                pick(plan.doc),
                embedder.model_id,
                points,
                _keeps(store),
                text_locators=_text_locators(store),
            )
            if redo.report.status != "skipped":  # skipped: a newer version, seen next round
                found, _ = _vectors([redo], embedder, cache, [store], False, seconds, None)
                _publish([redo], {**vectors, **found}, store, order)
                _merge_repair(report, plan.report, redo.report)
                redo.report = plan.report
                published[index] = redo
            unsettled.append(doc_id)
        if not unsettled:
            break
        held.update(read(unsettled))
    return published, {p.doc.doc_id: held[p.doc.doc_id] for p in published}


def stale_verdict(report: SyncReport, failed: list[tuple[str, int, int]]) -> None:
    """Set the report's stale check from ``failed`` (doc_id, points of another revision,
    points of its own missing: one per document whose check failed after its repair) and
    raise :class:`~rechunk.errors.StaleCheckError`, carrying the report, if any did."""
    report.stale_check = "passed" if not failed else "failed"
    if failed:
        doc_id, wrong, missing = failed[0]
        more = f" (and {len(failed) - 1} more document(s))" if len(failed) > 1 else ""
        raise StaleCheckError(
            f"stale check failed: document {doc_id!r} holds {wrong} point(s) of another "
            f"revision and lacks {missing} of its own after publish{more}; run the sync "
            "again (the error's report has the counts)",
            report,
        )


#: documents whose points one read of :func:`check_one_model`'s clean-up takes
_READ_BATCH = 256


def check_one_model(
    report: SyncReport,
    store: VectorStore,
    model_id: str,
    info: CollectionInfo | None,
    locked: bool,
) -> None:
    """Prove, after publishing, that no other model's sync wrote into a collection that
    held no rechunk point when this sync checked it (``info``).

    The check before a sync refuses a collection another model wrote, but two first
    syncs of one collection with different models each find it without rechunk points,
    and both would publish: the collection would hold two models' vectors, and a query
    with either model would rank the other's points. Under a writer lock (Chroma, Qdrant
    Edge) no other rechunk writer runs, so there is nothing to check; elsewhere, when
    another model's point is found (``store.other_model``, which looks at every point;
    a store without it is asked :meth:`VectorStore.collection_info`, which may sample),
    this sync deletes the points it wrote and raises :class:`~rechunk.errors.StoreError`.
    No sync deletes or overwrites another model's points (it reads only its own:
    :func:`~rechunk.sync.store.of_model`), so whichever sync looks first and finds none
    keeps its points: the other finds them, as each looks only after its own writes.
    Both may find the other's and both remove theirs; the next sync of either then runs
    alone."""
    if locked or info is None or info.model_ids:
        return
    written = {
        (rep.doc_id, rep.revision)
        for rep in report.per_document
        if rep.status in ("new", "changed") and rep.added + rep.updated
    }
    if not written:
        return
    other_model = _method(store, "other_model")
    if other_model is not None:
        other = other_model(model_id)
    else:
        now = store.collection_info()
        other = min((now.model_ids if now else frozenset()) - {model_id}, default=None)
    if other is None:
        return
    ours: list[str] = []
    for group in batches(sorted({doc_id for doc_id, _ in written}), _READ_BATCH):
        for doc_id, points in store.get_points_many(list(group)).items():
            ours += [
                p.id
                for p in points
                if p.payload.model_id == model_id and (doc_id, p.payload.revision) in written
            ]
    for group in batches(ours, _READ_BATCH):
        store.delete(list(group))
    log.warning(
        "collection=%s another model wrote while this sync ran: removed the %d point(s) this "
        "sync wrote",
        store.collection,
        len(ours),
    )
    raise StoreError(
        f"collection {store.collection!r} was written by another model ({other}) while this "
        f"sync ran (both found it without rechunk points): this sync removed the {len(ours)} "
        "point(s) it wrote, as a collection holds one model's vectors; run it again: it syncs "
        "if the other sync removed its points too, else it is refused"
    )
