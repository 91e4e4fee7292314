"""Sync: bring a vector collection to exactly the given revisions of documents, embedding
only inputs it has not seen.

For each document: chunk, compare input keys with what the store holds for that doc_id,
take vectors from the cache, else from the collection, else from the embedder, publish,
verify. Point ids are UUIDv5 of (doc_id, input key, occurrence), so an unchanged chunk
keeps its id and gets at most a payload update. Every input is checked before anything
is written: bad input changes nothing. A crash at any step is repaired by running the
same sync again (the plan is always computed from what the store holds now).

What it holds: :mod:`~rechunk.sync.engine` (:func:`sync`, which runs the stages) and
:mod:`~rechunk.sync.stages` (read, chunk, plan, embed, publish, verify, prune, finish,
and the state they share), the parts the stages use (:mod:`~rechunk.sync.inputs`, the
checks before any write; :mod:`~rechunk.sync.planning`, a document's plan;
:mod:`~rechunk.sync.vectors`, where vectors come from; :mod:`~rechunk.sync.publishing`;
:mod:`~rechunk.sync.verifying`, settling with concurrent writers and the stale check),
:mod:`~rechunk.sync.report` (``SyncReport``, ``DocumentReport``),
:mod:`~rechunk.sync.store` (the ``VectorStore`` protocol and the payload of a point),
:mod:`~rechunk.sync.ahead` (the helper process that chunks the next batch) and
:mod:`~rechunk.sync.generations` (``reindex``: a new generation beside the live one).

The package re-exports the names callers use (``sync``, the reports, ``check_inputs``,
``DOC_BATCH``, ...). A constant is read where it is defined: a test that changes
``DOC_BATCH`` or ``PUBLISHED_BYTES`` sets it on :mod:`~rechunk.sync.stages`.

What it may import: the standard library, numpy, ``rechunk.errors``, ``rechunk.document``
and the chunking, chunkers and reuse rooms; never the sources or live rooms, and no
framework, store client or model library (stores and embedders come in as objects).
"""

from __future__ import annotations

from rechunk.sync.engine import sync
from rechunk.sync.inputs import check_compatible, check_inputs
from rechunk.sync.publishing import PUBLISH_ATTEMPTS, PUBLISH_BACKOFF
from rechunk.sync.report import ORDERS, STAGES, DocumentReport, Order, Progress, SyncReport
from rechunk.sync.stages import DOC_BATCH, PUBLISHED_BYTES, PUBLISHED_IDS
from rechunk.sync.vectors import EMBED_BATCH, Vector
from rechunk.sync.verifying import REPAIR_ROUNDS

__all__ = [
    "DOC_BATCH",
    "EMBED_BATCH",
    "ORDERS",
    "PUBLISHED_BYTES",
    "PUBLISHED_IDS",
    "PUBLISH_ATTEMPTS",
    "PUBLISH_BACKOFF",
    "REPAIR_ROUNDS",
    "STAGES",
    "DocumentReport",
    "Order",
    "Progress",
    "SyncReport",
    "Vector",
    "check_compatible",
    "check_inputs",
    "sync",
]
