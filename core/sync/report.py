"""What a sync reports: a :class:`SyncReport` of the run and a :class:`DocumentReport` of
each document (ids, counts, sizes and seconds: never text), with the names they use (the
publication orders, the stages timed, the progress callback)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Order = Literal["upsert-then-delete", "delete-then-upsert"]
ORDERS: tuple[Order, ...] = ("upsert-then-delete", "delete-then-upsert")
STAGES = ("chunk", "plan", "embed", "publish", "verify")
#: ``progress(stage, done, total)``: called as a sync advances (for progress bars)
Progress = Callable[[str, int, int], None]


@dataclass
class DocumentReport:
    """What a sync did to one document. Ids, counts and sizes only: never text.

    ``kept`` points were left as they were (only in an unchanged document);
    ``updated`` points kept their text, hence their vector, and got a new payload
    (the new revision, a new position); ``added`` and ``deleted`` points were
    written with a vector or removed. Input counts are this document's own: an
    input it shares with another document of the same sync counts in both.
    """

    doc_id: str
    status: Literal["new", "changed", "unchanged", "skipped", "deleted"]
    revision: str | None = None
    chunks: int = 0
    kept: int = 0
    updated: int = 0
    added: int = 0
    deleted: int = 0
    from_cache: int = 0
    from_store: int = 0
    embedded: int = 0
    tokens_embedded: int = 0
    tokens_total: int = 0
    recompute_fraction: float | None = None
    changed_bytes: int = 0
    reindexed_bytes: int = 0
    reason: str | None = None
    policy: str | None = None


@dataclass
class SyncReport:
    """The report of one :func:`sync` run (JSON-serialisable via :meth:`to_dict`).

    ``chunks["added"]`` counts the points written with a vector: new ones, and ones
    written again under the same id because their stored vector failed the vector check
    or was of another input than their key (so ``added - deleted`` may exceed the change
    in the collection's points); ``updated`` counts payload-only writes.
    ``inputs`` and ``tokens_embedded`` count each distinct input once (what the
    model was asked for), also when several documents of the sync share it;
    ``tokens_total`` is the tokens of every distinct input of the synced
    documents. A :class:`DocumentReport` counts its own document's inputs.
    ``recompute_fraction`` is R_c over the changed documents (token-weighted over their
    distinct new inputs): the share that the stored revision did not have, which a sync must
    embed unless the cache or the collection holds it; new documents are counted in
    ``documents["new"]`` and cost their full size. ``reindex_amplification`` is the bytes of
    the inputs embedded for changed documents per byte of edit atoms added or removed
    (words, CJK characters, punctuation; whitespace is no edit), over the documents with
    such an edit (a reindented file's inputs count in ``tokens_embedded``, not here).
    ``stale_points`` counts points of a synced document that carry another revision, or that
    the new revision lacks, after the sync (the check queries the store). When it is not 0,
    ``stale_check`` is ``"failed"`` and :func:`sync` raises
    :class:`~rechunk.errors.StaleCheckError` whose ``report`` is this report.
    ``model_check`` is ``"passed"`` when the model embedded again an input whose vector the
    collection or the cache held under its identity and the two agreed, before anything
    else was embedded (see :mod:`rechunk.sync.model_check`; a disagreement raises
    :class:`~rechunk.errors.ModelChangedError`), and ``"skipped"`` when the sync embedded
    nothing or nothing was held to compare with; ``model_check_tokens`` is what that input
    cost (not in ``tokens_embedded``).
    ``chunks_not_given`` is the number of points of documents the sync was not given
    (``keep``'s among them) that the collection holds after it: the count the sync reads
    first, less the given documents' points that it reads to plan and the points it
    prunes (that a dry run would prune), so it costs no further read.
    ``seconds`` is the time the sync spent in each stage;
    chunking done by the helper process while the sync published counts only as long
    as the sync waited for it.
    """

    collection: str
    policy: str
    model_id: str
    order: Order
    dry_run: bool = False
    documents: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("synced", "new", "changed", "unchanged", "skipped", "deleted"), 0
        )
    )
    chunks: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("kept", "updated", "added", "deleted"), 0)
    )
    inputs: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("from_cache", "from_store", "embedded"), 0)
    )
    tokens_embedded: int = 0
    tokens_total: int = 0
    recompute_fraction: float = 0.0
    reindex_amplification: float | None = None
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    stale_points: int = 0
    stale_check: Literal["passed", "failed", "skipped"] = "skipped"
    model_check: Literal["passed", "skipped"] = "skipped"
    model_check_tokens: int = 0
    chunks_not_given: int = 0
    policies: dict[str, int] = field(default_factory=dict)
    per_document: list[DocumentReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)


def changed_totals(report: SyncReport, changed: Sequence[DocumentReport]) -> None:
    """Set ``report``'s R_c (token-weighted over the changed documents) and reindex
    amplification (bytes re-indexed per changed byte) from those documents' reports: the
    totals a local sync and the Ray engine both end with."""
    fresh = sum(r.tokens_total * (r.recompute_fraction or 0.0) for r in changed)
    total = sum(r.tokens_total for r in changed)
    report.recompute_fraction = fresh / total if total else 0.0
    # a document whose edit is whitespace only (a reindent) has no changed byte to divide
    # by: its inputs, re-embedded, would swell the ratio of the others (as the watcher's
    # per-document figure leaves it out too)
    edited = [r for r in changed if r.changed_bytes]
    changed_bytes = sum(r.changed_bytes for r in edited)
    if changed_bytes:
        report.reindex_amplification = sum(r.reindexed_bytes for r in edited) / changed_bytes
