"""The main job: sync document revisions into a vector collection, embedding only new inputs.

For each document: chunk -> compare input keys with what the store holds for
that doc_id -> take vectors from the cache, else from the collection, else from
the embedder -> publish -> verify. Point ids are UUIDv5 of (doc_id, input key,
occurrence), so an unchanged chunk keeps its id and gets at most a payload
update. Every input is checked before anything is written: bad input changes
nothing. A crash at any step is repaired by running the same sync again (the
plan is always computed from what the store holds now).
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rechunk.ahead import ChunkAhead
from rechunk.chunking.chunk import Chunk, Chunker, embedding_input
from rechunk.chunking.measure import atoms, changed_blocks, recompute_fraction
from rechunk.document import Document, flat_problem
from rechunk.errors import (
    ConfigError,
    InputError,
    StaleCheckError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from rechunk.reuse.cache import EmbeddingCache, record_dimension
from rechunk.reuse.cached_embedder import CachedEmbedder
from rechunk.reuse.embedding import Embedder, check_vectors, usable_vectors
from rechunk.reuse.identity import input_key, point_id, text_revision
from rechunk.store import (
    RESERVED_METADATA_KEYS,
    CollectionInfo,
    PointPayload,
    PointWrite,
    StoredPoint,
    VectorStore,
    batches,
    mark_superseded,
)

__all__ = ["DocumentReport", "SyncReport", "sync"]

log = logging.getLogger("rechunk.sync")

Order = Literal["upsert-then-delete", "delete-then-upsert"]
ORDERS: tuple[Order, ...] = ("upsert-then-delete", "delete-then-upsert")
STAGES = ("chunk", "plan", "embed", "publish", "verify")
EMBED_BATCH = 32
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
#: ``progress(stage, done, total)``: called as a sync advances (for progress bars)
Progress = Callable[[str, int, int], None]
Vector = npt.NDArray[np.float32]


def _method(store: object, name: str) -> Callable[..., Any] | None:
    """The optional method ``name`` of ``store`` (see VectorStore), or None."""
    method = getattr(store, name, None)
    return method if callable(method) else None


def _offers(store: object, *methods: str) -> bool:
    """Whether ``store`` has every one of these optional methods (see VectorStore)."""
    return all(_method(store, name) is not None for name in methods)


class _Published:
    """What this sync wrote to its collection ``store``, by input key: the vectors, newest
    kept up to ``limit`` bytes, and, where the store reads vectors by point id, the point
    that holds each input, newest kept up to ``ids`` inputs. A batch asks here before it
    asks the collection."""

    def __init__(self, store: VectorStore, limit: int, ids: int) -> None:
        self._read_at = _method(store, "get_vectors_at")
        self._limit = limit
        self._vectors: dict[str, Vector] = {}
        self._bytes = 0
        self._ids_limit = ids if self._read_at is not None else 0
        self._ids: dict[str, str] = {}

    def add(self, vectors: Mapping[str, Vector], points: Mapping[str, str]) -> None:
        """Remember ``vectors`` (input key -> vector) and ``points`` (input key -> the id
        of the point that holds it); an input already known keeps what it had."""
        for key, vector in vectors.items():
            if key not in self._vectors:
                self._vectors[key] = vector
                self._bytes += vector.nbytes
        while self._bytes > self._limit:  # dicts keep insertion order: oldest first
            self._bytes -= self._vectors.pop(next(iter(self._vectors))).nbytes
        for key, held_at in points.items():
            self._ids.setdefault(key, held_at)
        while len(self._ids) > self._ids_limit:
            del self._ids[next(iter(self._ids))]

    def get(self, key: str) -> Vector | None:
        return self._vectors.get(key)

    def read(self, keys: Sequence[str], model_id: str) -> dict[str, Vector]:
        """The vectors of those ``keys`` this sync published and no longer holds, read by
        point id where the store can (``get_vectors_at``); the others are left out."""
        points = {key: self._ids[key] for key in keys if key in self._ids}
        if not points or self._read_at is None:
            return {}
        found: dict[str, Vector] = self._read_at(points, model_id)
        return found


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

    ``inputs`` and ``tokens_embedded`` count each distinct input once (what the
    model was asked for), also when several documents of the sync share it;
    ``tokens_total`` is the tokens of every distinct input of the synced
    documents. A :class:`DocumentReport` counts its own document's inputs.
    ``recompute_fraction`` is R_c over the changed documents (token-weighted over
    their distinct new inputs): the share that the stored revision did not have,
    which a sync must embed unless the cache or the collection holds it; new
    documents are counted in ``documents["new"]`` and cost their full size.
    ``reindex_amplification`` is the bytes of the inputs embedded for changed
    documents per byte of edit atoms added or removed (words, CJK characters,
    punctuation; whitespace is no edit). ``stale_points`` counts points of a
    synced document that carry another revision, or that the new revision lacks, after
    the sync (the check queries the store). When it is not 0, ``stale_check`` is
    ``"failed"`` and :func:`sync` raises :class:`~rechunk.errors.StaleCheckError` whose
    ``report`` is this report. ``chunks_not_given`` is the number of points the collection
    held when the sync started beside the given documents' (those of documents it was
    not given, ``keep``'s among them): the count the sync reads first, less the given
    documents' points that it reads to plan, so it costs no further read.
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
    chunks_not_given: int = 0
    policies: dict[str, int] = field(default_factory=dict)
    per_document: list[DocumentReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)


@dataclass
class _Batch:
    """A batch of documents read ahead: their stored points, and per document the chunks
    (None: still to chunk; ``sent``: the positions of those the helper process is
    chunking, none when it is not)."""

    stored: dict[str, list[StoredPoint]]
    chunks: list[list[Chunk] | None]
    sent: list[int]


@dataclass
class _Plan:
    doc: Document
    chunks: list[Chunk]
    keys: list[str]
    ids: list[str]
    existing: dict[str, StoredPoint]
    writes: list[PointWrite]
    needs_vector: dict[str, str]  # input key -> text, for points that are new
    delete: list[str]
    report: DocumentReport
    # ids of existing points written again with a vector: theirs failed the vector check
    revector: frozenset[str] = frozenset()


def _check_documents(documents: Iterable[Document]) -> list[Document]:
    kind = type(documents).__name__
    wrong = InputError(f"sync takes an iterable of rechunk.Document, not {kind}")
    if isinstance(documents, (str, bytes, Document)) or documents is None:
        raise wrong
    try:
        docs = list(documents)
    except TypeError:
        raise wrong from None
    seen: set[str] = set()
    for doc in docs:
        if not isinstance(doc, Document):
            raise InputError(f"sync takes rechunk.Document objects, not {type(doc).__name__}")
        if doc.doc_id in seen:
            raise InputError(f"doc_id {doc.doc_id!r} appears more than once in one sync")
        seen.add(doc.doc_id)
        if not doc.text.strip():
            raise InputError(
                f"document {doc.doc_id!r} is empty or whitespace-only; "
                "delete it (prune) instead of syncing an empty revision"
            )
        clash = RESERVED_METADATA_KEYS & set(doc.metadata or {})
        if clash:
            raise InputError(
                f"document {doc.doc_id!r}: metadata keys {sorted(clash)} are reserved by rechunk"
            )
    return docs


def _split_embedder(
    embedder: Embedder, cache: EmbeddingCache | None
) -> tuple[Embedder, EmbeddingCache | None]:
    if isinstance(embedder, CachedEmbedder):
        if cache is not None and cache is not embedder.cache:
            raise ConfigError("pass the cache either inside CachedEmbedder or as cache=, not both")
        return embedder.embedder, embedder.cache
    return embedder, cache


def check_compatible(chunker: Chunker, embedder: Embedder) -> None:
    """Refuse a chunker whose chunks the embedder could not read whole."""
    window = embedder.max_input_tokens
    special = int(getattr(embedder, "special_tokens", 0) or 0)
    if window is not None and chunker.hard_max_tokens + special > window:
        raise ConfigError(
            f"chunker {chunker.policy_id} allows {chunker.hard_max_tokens} tokens per chunk "
            f"but {embedder.model_id} reads at most {window - special} (+{special} special): "
            "use rechunk.policy_for(embedder, kind) to size the chunker"
        )
    tokenizer = getattr(embedder, "tokenizer", None)
    counter = getattr(chunker, "token_counter", None)
    if tokenizer is not None and counter is not None:
        from rechunk.chunking.tokens import resolve_tokenizer

        if resolve_tokenizer(tokenizer).identity != counter.identity:
            raise ConfigError(
                f"chunker {chunker.policy_id} counts tokens with another tokenizer than "
                f"{embedder.model_id}; pass tokenizer=embedder.tokenizer (or use policy_for)"
            )


def check_inputs(
    documents: Iterable[Document],
    store: VectorStore,
    chunker: Chunker,
    embedder: Embedder,
    cache: EmbeddingCache | None,
) -> tuple[list[Document], Embedder, EmbeddingCache | None]:
    """What a sync (or a reindex) checks before any I/O: the documents, their metadata
    against the store, the embedder/cache pair and the chunker's fit to the model.
    Returns the documents, the raw embedder and the cache."""
    docs = _check_documents(documents)
    for doc in docs:
        store.check_metadata(doc.doc_id, doc.metadata or {})
    raw_embedder, cache = _split_embedder(embedder, cache)
    check_compatible(chunker, raw_embedder)
    return docs, raw_embedder, cache


def _check_store(
    store: VectorStore, embedder: Embedder, dry_run: bool = False
) -> CollectionInfo | None:
    """Refuse an incompatible collection; its info, None when it is missing (allowed for a
    dry run)."""
    info = store.collection_info()
    if info is None and dry_run:
        return None
    if info is None:
        raise StoreError(
            f"collection {store.collection!r} does not exist; "
            "call store.ensure_collection(embedder.dimension) first"
        )
    if info.dimension == 0:  # a Chroma collection made elsewhere, with no vector yet
        raise StoreError(
            f"collection {info.name!r} records no dimension yet; call "
            "store.ensure_collection(embedder.dimension) first"
        )
    if info.dimension != embedder.dimension:
        raise StoreError(
            f"collection {info.name!r} holds {info.dimension}-dimensional vectors but "
            f"{embedder.model_id} makes {embedder.dimension}-dimensional ones"
        )
    others = set(info.model_ids) - {embedder.model_id}
    if others:
        raise StoreError(
            f"collection {info.name!r} was written by another model ({sorted(others)[0]}); "
            "sync into a new collection or reindex"
        )
    return info


def _payload(
    doc: Document,
    policy: str,
    model_id: str,
    key: str,
    ordinal: int,
    chunk: Chunk,
    neighbours: tuple[str | None, str | None] = (None, None),
    located: Mapping[str, Any] | None = None,
) -> PointPayload:
    """The payload of one chunk; ``located``: what ``doc.locator`` says of its span."""
    assert doc.revision is not None
    return PointPayload(
        doc_id=doc.doc_id,
        revision=doc.revision,
        policy=policy,
        input_key=key,
        model_id=model_id,
        ordinal=ordinal,
        start=chunk.start,
        end=chunk.end,
        tokens=chunk.tokens,
        text=chunk.text,
        version=doc.version,
        metadata={**(doc.metadata or {}), **located} if located else dict(doc.metadata or {}),
        previous_id=neighbours[0],
        next_id=neighbours[1],
    )


def _changed_bytes(old_texts: Sequence[str], new_texts: Sequence[str]) -> int:
    """UTF-8 bytes of the edit atoms (words, CJK characters, punctuation marks, as
    :func:`~rechunk.chunking.measure.edit_fraction` counts them) that the new inputs add or the
    stored ones lose. Whitespace is no edit. A line diff first, then an atom diff inside
    each block of lines that differs, so a long paragraph costs only its changed words.

    Both diffs are :func:`~rechunk.chunking.measure.changed_blocks`: difflib's opcodes where the
    part that differs is small (every dev revision), anchored on unique lines or atoms
    above :data:`~rechunk.chunking.measure.DIFF_CELLS`, so the time grows about linearly with the
    document (a one-line edit of a 30 MB file: seconds, not hours)."""
    old_lines = "\n".join(old_texts).split("\n")
    new_lines = "\n".join(new_texts).split("\n")
    changed = 0
    for i1, i2, j1, j2 in changed_blocks(old_lines, new_lines):
        before, after = atoms("\n".join(old_lines[i1:i2])), atoms("\n".join(new_lines[j1:j2]))
        for a1, a2, b1, b2 in changed_blocks(before, after):
            changed += len("".join(before[a1:a2]).encode("utf-8"))
            changed += len("".join(after[b1:b2]).encode("utf-8"))
    return changed


def _typed(metadata: Mapping[str, Any]) -> str:
    """Metadata as JSON, in which values that Python finds equal but a store filters apart
    differ: ``1 == True == 1.0``, but ``where={"public": True}`` misses a 1."""
    return json.dumps(metadata, sort_keys=True)


def _same_types(stored: PointPayload, typed: str) -> bool:
    """Whether the metadata of a stored payload equal to a new one, whose metadata is
    ``typed`` (:func:`_typed`, once per document), also agrees with it in type (empty
    metadata, the common case, needs no JSON)."""
    return not stored.metadata or _typed(stored.metadata) == typed


def _stored_chunks(doc: Document, stored: list[StoredPoint], policy: str) -> list[Chunk] | None:
    """The chunks ``policy`` makes of ``doc``, read back from its stored points when they
    prove it: their revision is this text's hash (not a caller's label) and they were cut
    by the same policy (its id names the chunker, its parameters, its version and the
    tokenizer), with ordinals 0..n-1 whose spans tile the text from 0 to its end, each
    holding its span's embedding input (a point an adapter wrote holds the raw slice).
    Chunkers are deterministic, so these are the chunks chunking would make again; None
    otherwise.
    An unchanged document of a re-sync is then planned without being chunked."""
    if not stored or doc.revision != text_revision(doc.text):
        return None
    chunks: list[Chunk] = []
    position = 0
    for ordinal, point in enumerate(stored):  # ordered by (ordinal, id)
        p = point.payload
        if (
            p.ordinal != ordinal
            or p.start != position
            or p.end <= p.start
            or p.revision != doc.revision
            or p.policy != policy
            or p.text != embedding_input(doc.text[p.start : p.end])
        ):
            return None
        chunks.append(Chunk(p.start, p.end, p.text, p.tokens))
        position = p.end
    return chunks if position == len(doc.text) else None


def _located(doc: Document, chunk: Chunk) -> Mapping[str, Any] | None:
    """What ``doc.locator`` says of ``chunk``'s span (None without a locator), checked to
    be flat metadata that every store holds and that uses no key rechunk owns."""
    if doc.locator is None:
        return None
    located = doc.locator(chunk.start, chunk.end)
    where = f"document {doc.doc_id!r}: locator({chunk.start}, {chunk.end})"
    if not isinstance(located, Mapping):
        raise InputError(f"{where} returned a {type(located).__name__}, not a mapping")
    problem = flat_problem(located, where)
    clash = RESERVED_METADATA_KEYS & set(located)
    if clash:
        problem = f"{where}: keys {sorted(clash)} are reserved by rechunk"
    if problem:
        raise InputError(problem)
    return located


def _plan(
    doc: Document,
    chunks: list[Chunk],
    chunker: Chunker,
    model_id: str,
    stored: list[StoredPoint],
    neighbours: bool = False,
    revector: frozenset[str] = frozenset(),
) -> _Plan:
    """What to write and delete so that the store holds exactly ``chunks`` of ``doc``.
    ``neighbours``: the store keeps each point's PREVIOUS / NEXT ids (a point whose
    neighbour changed is updated, payload only). ``revector``: ids of stored points whose
    vector failed the vector check; each is written again, with a vector, as if absent."""
    existing = {p.id: p for p in stored}
    policy = chunker.policy_id  # a hash of the chunker's settings: once per document
    report = DocumentReport(doc.doc_id, "new" if not existing else "changed", doc.revision)
    report.policy = policy
    plan = _Plan(doc, chunks, [], [], existing, [], {}, [], report, revector)
    newest = max(
        (p.payload.version for p in existing.values() if p.payload.version is not None),
        default=None,
    )
    if doc.version is not None and newest is not None and newest > doc.version:
        report.status = "skipped"
        report.reason = f"store holds version {newest} > {doc.version}"
        return plan
    typed = _typed(doc.metadata or {})
    occurrences: Counter[str] = Counter()
    for chunk in chunks:
        key = input_key(model_id, chunk.text)
        plan.keys.append(key)
        plan.ids.append(point_id(doc.doc_id, key, occurrences[key]))
        occurrences[key] += 1
    last = len(chunks) - 1
    for ordinal, (chunk, key, pid) in enumerate(zip(chunks, plan.keys, plan.ids)):
        around: tuple[str | None, str | None] = (None, None)
        if neighbours:
            around = (
                plan.ids[ordinal - 1] if ordinal else None,
                plan.ids[ordinal + 1] if ordinal < last else None,
            )
        located = _located(doc, chunk)
        payload = _payload(doc, policy, model_id, key, ordinal, chunk, around, located)
        current = existing.get(pid)
        if current is None or pid in revector:
            plan.writes.append(PointWrite(pid, payload, None))
            plan.needs_vector.setdefault(key, chunk.text)
            report.added += 1
        elif current.payload != payload or not _same_types(
            current.payload, typed if located is None else _typed(payload.metadata)
        ):
            plan.writes.append(PointWrite(pid, payload, None))
            report.updated += 1
        else:
            report.kept += 1
    new_ids = set(plan.ids)
    plan.delete = [pid for pid in existing if pid not in new_ids]
    report.deleted = len(plan.delete)
    report.chunks = len(chunks)
    if existing and not plan.writes and not plan.delete:
        report.status = "unchanged"
    distinct = {key: chunk.tokens for key, chunk in zip(plan.keys, chunks)}
    report.tokens_total = sum(distinct.values())
    if existing and report.status != "unchanged":
        old = sorted(existing.values(), key=lambda p: (p.payload.revision, p.payload.ordinal))
        old_chunks = [Chunk(0, 0, p.payload.text, p.payload.tokens) for p in old]
        report.recompute_fraction = recompute_fraction(old_chunks, chunks)
        current_old = [p.payload.text for p in old]
        report.changed_bytes = _changed_bytes(current_old, [c.text for c in chunks])
    elif report.status == "unchanged":
        report.recompute_fraction = 0.0
    return plan


def _vectors(
    plans: Sequence[_Plan],
    embedder: Embedder,
    cache: EmbeddingCache | None,
    stores: Sequence[VectorStore],
    dry_run: bool,
    seconds: dict[str, float],
    progress: Progress | None,
    only: tuple[VectorStore, set[str]] | None = None,
    published: _Published | None = None,
) -> tuple[dict[str, Vector], dict[str, str]]:
    """Vectors for every key a plan needs (cache, then what this sync published, then the
    collections, then the model), and where each came from: ``"cache"``, ``"store"`` (a
    vector the collection holds) or ``"embed"``. ``only``: a store of ``stores`` and the
    keys it can hold, so that no other is looked up there.

    Every vector is checked (:func:`~rechunk.reuse.embedding.check_vectors`): a cached or stored
    one that fails (all zeros, a value near float32's limit: written by an older version
    or another tool) is not reused; the input is embedded again, which replaces the bad
    cache entry, and the points this sync writes get the new vector. The model's vectors
    that fail raise :class:`~rechunk.errors.BadVectorError`, before any of that batch is
    cached or stored."""
    model_id, dimension = embedder.model_id, embedder.dimension
    wanted: dict[str, str] = {}
    for plan in plans:
        wanted.update(plan.needs_vector)
    found: dict[str, Vector] = {}
    source: dict[str, str] = {}
    refused = {"cache": 0, "store": 0}  # bad vectors not reused, by where they were

    def from_store(vectors: Mapping[str, Vector]) -> None:
        good, bad = usable_vectors(vectors, dimension)
        refused["store"] += len(bad)
        for key, vector in good.items():
            found[key], source[key] = np.asarray(vector, dtype=np.float32), "store"

    t0 = time.perf_counter()
    recache: set[str] = set()  # a bad cache entry: embedded again, so that it is replaced
    if cache is not None and wanted:
        good, bad = usable_vectors(cache.get_many(list(wanted), model_id, dimension), dimension)
        for key, vector in good.items():
            found[key], source[key] = vector, "cache"
        recache.update(bad)
        refused["cache"] += len(bad)
    if published is not None:
        for key in wanted:
            if key not in found and key not in recache and (kept := published.get(key)) is not None:
                found[key], source[key] = kept, "store"
        gone = [k for k in wanted if k not in found and k not in recache]
        from_store(published.read(gone, model_id) if gone else {})
    for store in stores:
        missing = [k for k in wanted if k not in found and k not in recache]
        if only is not None and store is only[0]:
            missing = [k for k in missing if k in only[1]]
        if not missing:
            continue
        from_store(store.get_vectors(missing, model_id))
    missing = [k for k in wanted if k not in found]
    if refused["cache"] or refused["store"]:
        log.warning(
            "%d cached and %d stored vector(s) of %s failed the vector check (all zeros, "
            "NaN, or values near float32's limit) and are embedded again",
            refused["cache"],
            refused["store"],
            model_id,
        )
    seconds["plan"] += time.perf_counter() - t0
    if dry_run:
        for key in missing:
            source[key] = "embed"
    elif missing:
        step = _embed_step(embedder)
        for start in range(0, len(missing), step):
            batch = missing[start : start + step]
            t0 = time.perf_counter()
            texts = [wanted[k] for k in batch]
            vectors = check_vectors(
                embedder.embed(texts), model_id=model_id, dimension=dimension, count=len(texts)
            )
            for i, key in enumerate(batch):
                found[key], source[key] = vectors[i], "embed"
            seconds["embed"] += time.perf_counter() - t0
            if cache is not None:
                # each batch is cached at once, so an interrupted sync keeps its work; only
                # the model's own output is cached (a collection may normalise vectors)
                cache.put_many([(k, found[k]) for k in batch], model_id)
                if start == 0:  # so that an adapter that is not told it finds them too
                    record_dimension(cache, model_id, dimension)
            if progress is not None:
                progress("embed", min(start + step, len(missing)), len(missing))
    for plan in plans:
        rep = plan.report
        for key in plan.needs_vector:
            kind = source[key]
            if kind == "cache":
                rep.from_cache += 1
            elif kind == "store":
                rep.from_store += 1
            else:
                rep.embedded += 1
        tokens = {k: c.tokens for k, c in zip(plan.keys, plan.chunks)}
        embedded = [k for k in plan.needs_vector if source[k] == "embed"]
        rep.tokens_embedded = sum(tokens[k] for k in embedded)
        rep.reindexed_bytes = sum(len(plan.needs_vector[k].encode("utf-8")) for k in embedded)
    return found, source


def _embed_step(embedder: Embedder) -> int:
    """Inputs per embed call: the embedder's ``embed_batch`` where it names one (an API
    embedder sends several requests at once), else :data:`EMBED_BATCH`. Each call's
    vectors are cached before the next, so an interrupted sync keeps its work."""
    step = getattr(embedder, "embed_batch", None)
    return step if type(step) is int and step > 0 else EMBED_BATCH


#: SyncReport.inputs counter of each source of a vector
_INPUT_COUNTER = {"cache": "from_cache", "store": "from_store", "embed": "embedded"}


def _bad_stored(
    stored: Mapping[str, list[StoredPoint]], store: VectorStore, model_id: str, dimension: int
) -> dict[str, frozenset[str]]:
    """For ``check_stored``: per doc_id, the ids of its stored points of ``model_id``
    whose vector fails the vector check (read by input key: one vector per key, so every
    point of a key whose vector is bad is written again)."""
    keys = sorted(
        {
            p.payload.input_key
            for pts in stored.values()
            for p in pts
            if p.payload.model_id == model_id
        }
    )
    if not keys:
        return {}
    _, bad_keys = usable_vectors(store.get_vectors(keys, model_id), dimension)
    bad = set(bad_keys)
    out: dict[str, frozenset[str]] = {}
    for doc_id, pts in stored.items():
        ids = frozenset(
            p.id for p in pts if p.payload.model_id == model_id and p.payload.input_key in bad
        )
        if ids:
            out[doc_id] = ids
    return out


def _keeps(store: VectorStore) -> bool:
    """Whether ``store`` keeps each point's PREVIOUS / NEXT ids (``keeps_neighbours``)."""
    return bool(getattr(store, "keeps_neighbours", False))


def _guarded(store: VectorStore, version: int | None) -> dict[str, int]:
    """``version=`` for a store whose writes and deletes can be conditional on the stored
    version (Qdrant: never replace or delete a point of a newer version), else nothing."""
    if version is None or not getattr(store, "conditional_versions", False):
        return {}
    return {"version": version}


def _publish(
    plans: Sequence[_Plan], vectors: dict[str, Vector], store: VectorStore, order: Order
) -> None:
    """Publish a batch of documents' plans in few requests: every write, then every delete
    (or the other way round), per document version (a store that can makes them
    conditional on it); each document still sees its own order."""
    by_version: dict[int | None, list[_Plan]] = {}
    for plan in plans:
        by_version.setdefault(plan.doc.version, []).append(plan)
    for version, group in by_version.items():
        writes = [
            PointWrite(w.id, w.payload, vectors[w.payload.input_key])
            if w.id not in plan.existing or w.id in plan.revector
            else w
            for plan in group
            for w in plan.writes
        ]
        delete = [pid for plan in group for pid in plan.delete]
        guard: Any = _guarded(store, version)
        if order == "delete-then-upsert":
            if delete:
                _retrying(store.delete, delete, **guard)
            if writes:
                _retrying(store.write, writes, **guard)
        else:
            if writes:
                _retrying(store.write, writes, **guard)
            if delete:
                # the revision guard: the old points, now that the new ones are written,
                # are marked in a payload-only update first, so that no search returns
                # them while they wait for the delete (or, after a crash, for the next sync)
                stale = [plan.existing[pid] for plan in group for pid in plan.delete]
                _retrying(mark_superseded, store, stale, **guard)
                _retrying(store.delete, delete, **guard)


#: Attempts of one publishing request that failed because the store could not be reached
#: (a server restarting, a dropped connection), with waits of 1, 2 and 4 s in between; a
#: request that timed out (StoreTimeoutError: a frozen server) is not repeated.
PUBLISH_ATTEMPTS = 4
PUBLISH_BACKOFF = 1.0


def _retrying(call: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    """``call(*args, **kwargs)``, repeated while the store is unavailable (writes and
    deletes are idempotent: a request that did land is harmless to send again)."""
    for attempt in range(1, PUBLISH_ATTEMPTS + 1):
        try:
            call(*args, **kwargs)
            return
        except StoreTimeoutError:
            raise
        except StoreUnavailableError as exc:
            if attempt == PUBLISH_ATTEMPTS:
                raise StoreUnavailableError(
                    f"{exc} (publishing gave up after {PUBLISH_ATTEMPTS} attempts)"
                ) from exc
            wait = PUBLISH_BACKOFF * 2 ** (attempt - 1)
            log.warning(
                "store unavailable while publishing (%s); attempt %d of %d in %.0f s",
                exc,
                attempt + 1,
                PUBLISH_ATTEMPTS,
                wait,
            )
            time.sleep(wait)


#: Rounds of re-planning a versioned document that lost points to a concurrent writer
#: (an older writer deleted a point this sync only updated), before the stale check fails.
REPAIR_ROUNDS = 3


def _settle(plan: _Plan, points: list[StoredPoint], store: VectorStore) -> tuple[int | None, bool]:
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
    first (see :func:`_settle`): a superseded one is reported skipped, and one that lost
    points to an older writer is planned and published again, :data:`REPAIR_ROUNDS`
    times at most.

    Under the writer lock (``locked``), a batch without versions is checked by id where
    the store can read by id (``present_ids``): no other writer ran, so the documents
    hold no point but those the plan read (or, in a collection empty when the lock was
    taken, none) and those this sync wrote; the planned ids being present and the ones
    it deleted gone is then the whole check. Any other answer falls back to re-reading
    the points, which names the documents and counts."""
    seconds = report.seconds
    present_ids = _method(store, "present_ids")
    if locked and present_ids is not None and all(p.doc.version is None for p in published):
        expected = {pid for plan in published for pid in plan.ids}
        gone = {pid for plan in published for pid in plan.delete}
        if present_ids(sorted(expected | gone)) == expected:
            return []
    reread = store.get_points_many([p.doc.doc_id for p in published])
    for _ in range(REPAIR_ROUNDS):
        again = False
        for index, plan in enumerate(published):
            if plan.doc.version is None:
                continue
            points = reread[plan.doc.doc_id]
            newer, deleted = _settle(plan, points, store)
            again = again or deleted
            if newer is not None:
                _superseded(report, plan.report, newer)
                continue
            if deleted:
                points = store.get_points_many([plan.doc.doc_id])[plan.doc.doc_id]
            if _verify(plan, points)[1]:  # points missing: plan and publish again
                redo = _plan(
                    plan.doc, plan.chunks, pick(plan.doc), embedder.model_id, points, _keeps(store)
                )
                if redo.report.status == "skipped":
                    again = True
                    continue
                found, _ = _vectors([redo], embedder, cache, [store], False, seconds, None)
                _publish([redo], {**vectors, **found}, store, order)
                _merge_repair(report, plan.report, redo.report)
                redo.report = plan.report
                published[index] = redo
                again = True
        published = [p for p in published if p.report.status != "skipped"]
        if not again:
            break
        reread = store.get_points_many([p.doc.doc_id for p in published])
    failed: list[tuple[str, int, int]] = []
    for plan in published:
        wrong, missing = _verify(plan, reread[plan.doc.doc_id])
        report.stale_points += wrong + missing
        if wrong or missing:
            failed.append((plan.doc.doc_id, wrong, missing))
    return failed


#: what a store offers for a prune to find its gone documents by id (see :func:`_gone`)
_LISTS_IDS = ("all_ids", "doc_ids_of")


def _gone(store: VectorStore, given: set[str], held: set[str]) -> Iterator[dict[str, list[str]]]:
    """The documents the collection holds beyond ``given``, each with its points' ids, at
    most :data:`DOC_BATCH` documents at a time. A store that can list its ids and read
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
                if doc_id not in given:
                    found.setdefault(doc_id, []).append(pid)
        for batch in batches(sorted(found), DOC_BATCH):
            yield {doc_id: found[doc_id] for doc_id in batch}
        return
    for batch in batches(sorted(store.doc_ids() - given), DOC_BATCH):
        points_of = store.get_points_many(batch)
        yield {doc_id: [p.id for p in points_of[doc_id]] for doc_id in batch}


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
    outside the given doc_ids is touched; ``prune=True`` with no documents is an
    InputError (an empty folder or a spent generator must not empty the
    collection). Every document's metadata is checked against the store
    (:meth:`VectorStore.check_metadata`) before anything is written.
    ``dry_run=True`` plans and counts and writes nothing (no vector is computed).
    When documents carry ``version``, a document older than the version in the
    store is skipped, never written.
    After publishing, every published document is read back (the stale check; under a
    writer lock, its point ids first, see :func:`_check_published`): when
    one holds a point of another revision or lacks one of its own, sync raises
    :class:`~rechunk.errors.StaleCheckError` (a :class:`StoreError`), whose ``report``
    is the full :class:`SyncReport` with ``stale_check == "failed"``.
    ``reuse_from`` names further collections (same model) whose vectors may be
    copied by input key (a reindex reuses the live generation this way).
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

    Concurrent writers: after every sync of a document has returned, the store holds
    exactly the chunks of the newest ``version`` any of them synced. On Qdrant every
    write and delete of a versioned document is conditional on the stored version
    (a point of a newer version is never replaced or deleted), and after publishing
    the sync re-reads the document: a writer that finds a newer version removes its
    own points and reports the document ``skipped`` ("superseded"); the newest writer
    removes what older ones left and re-publishes points they deleted (at most
    :data:`REPAIR_ROUNDS` times). Chroma has no conditional write: a store that offers
    ``writer_lock()`` (ChromaStore) is locked for the whole sync, so writers of one
    collection take turns. Documents without ``version`` have no order: concurrent
    writers of one of them on Qdrant may end with a failed stale check (an error).
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
        )


def _chooser(
    chunker: Chunker,
    chunker_for: Callable[[Document], Chunker | None] | None,
    docs: Sequence[Document],
    embedder: Embedder,
) -> Callable[[Document], Chunker]:
    """Each document's chunker: ``chunker_for``'s pick (asked once per document, here,
    before any I/O, each pick checked to fit the embedder), else ``chunker``."""
    if chunker_for is None:
        return lambda doc: chunker
    if not callable(chunker_for):
        raise ConfigError("chunker_for must be a callable (Document) -> Chunker | None")
    chosen: dict[str, Chunker] = {}
    checked = {id(chunker)}
    for doc in docs:
        picked = chunker_for(doc)
        if picked is None or picked is chunker:
            continue
        if not callable(getattr(picked, "chunk", None)):
            raise ConfigError(
                f"chunker_for({doc.doc_id!r}) returned a {type(picked).__name__}, not a chunker"
            )
        if id(picked) not in checked:
            check_compatible(picked, embedder)
            checked.add(id(picked))
        chosen[doc.doc_id] = picked
    return lambda doc: chosen.get(doc.doc_id, chunker)


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """Keep Python's cyclic garbage collector off the objects that exist when a sync
    starts, until it ends (``gc.freeze()``). An embedded Qdrant collection is millions
    of such objects, and every full collection during a re-sync walked them all
    (5,000 documents: 0.4-0.5 s of a 3.5-s re-sync, in two or three collections, each
    longer as the collection grows). What the sync itself makes is collected as usual,
    and the frozen objects go back to the collector afterwards. A process that froze
    objects itself (before forking workers, say) or turned the collector off is left
    as it is."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
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
) -> SyncReport:
    """:func:`sync` itself, with the writer lock (if any) held: ``locked`` says it is, so
    that no other rechunk writer changes the collection until this sync ends."""
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {ORDERS}, not {order!r}")
    docs, raw_embedder, cache = check_inputs(documents, store, chunker, embedder, cache)
    pick = _chooser(chunker, chunker_for, docs, raw_embedder)
    if isinstance(keep, (str, bytes)):
        raise InputError(f"keep takes an iterable of doc_ids, not one {type(keep).__name__}")
    kept = set(keep)
    if any(not isinstance(doc_id, str) for doc_id in kept):
        raise InputError("keep takes doc_ids (str)")
    if prune and not docs:
        raise InputError(
            "prune=True with no documents would delete every document of the collection "
            "(an empty folder or a spent generator?); to empty it on purpose, delete its "
            "points or drop it"
        )
    model_id = raw_embedder.model_id
    report = SyncReport(store.collection, chunker.policy_id, model_id, order, dry_run)
    seconds = report.seconds
    info = _check_store(store, raw_embedder, dry_run)
    store_missing = info is None
    # under the writer lock a collection that holds no point now holds only what this
    # sync writes: every document is new, so there is nothing to read before planning
    nothing_stored = info is None or (locked and info.points == 0)

    def tick(stage: str, done: int, total: int) -> None:
        if progress is not None:
            progress(stage, done, total)

    sources = [*([] if store_missing else [store]), *reuse_from]
    neighbours = _keeps(store)
    tokens: dict[str, int] = {}  # every distinct input of the synced documents
    counted: set[str] = set()  # inputs already counted in report.inputs
    changed: list[DocumentReport] = []
    failed: list[tuple[str, int, int]] = []  # (doc_id, wrong, missing) of a failed check
    published_vectors = _Published(store, PUBLISHED_BYTES, PUBLISHED_IDS)
    held: set[str] = set()  # the ids of the given documents' points, for _gone
    keep_held = prune and _offers(store, *_LISTS_IDS)
    report.chunks_not_given = info.points if info is not None else 0
    groups = list(batches(docs, DOC_BATCH))
    # with more than one batch, the documents of the next batch are chunked in a helper
    # process while this one is embedded and published (see rechunk.ahead)
    # (only the documents of the sync's own chunker: another policy's are chunked here)
    ahead = ChunkAhead(chunker) if len(groups) > 1 else None

    def read(batch: Sequence[Document], send: bool) -> _Batch:
        """The batch's stored points in one read (embedded Qdrant without its index scans
        per read) and the chunks they prove; ``send`` the others to the helper."""
        t0 = time.perf_counter()
        stored = {} if nothing_stored else store.get_points_many([d.doc_id for d in batch])
        chunks = [
            _stored_chunks(doc, stored.get(doc.doc_id, []), pick(doc).policy_id)
            for doc in batch
        ]
        seconds["plan"] += time.perf_counter() - t0
        todo = [
            i for i, (doc, known) in enumerate(zip(batch, chunks))
            if known is None and pick(doc) is chunker
        ]
        sent = send and ahead is not None and ahead.submit([batch[i].text for i in todo])
        return _Batch(stored, chunks, todo if sent else [])

    done = embedded_before = 0
    try:
        reads = [read(groups[0], send=False)] if groups else []  # this batch, maybe the next
        for index, batch in enumerate(groups):
            current = reads.pop()
            if current.sent and ahead is not None:
                t0 = time.perf_counter()
                made = ahead.collect() or ()  # nothing: the helper failed
                for i, chunks_made in zip(current.sent, made):
                    current.chunks[i] = chunks_made
                seconds["chunk"] += time.perf_counter() - t0
            if index + 1 < len(groups):
                reads.append(read(groups[index + 1], send=True))
            plans = []
            revector: dict[str, frozenset[str]] = {}
            if check_stored and current.stored:
                t0 = time.perf_counter()
                revector = _bad_stored(current.stored, store, model_id, raw_embedder.dimension)
                seconds["plan"] += time.perf_counter() - t0
                if revector:
                    log.warning(
                        "%d stored point(s) of %d document(s) hold a vector that fails the "
                        "vector check; they are written again",
                        sum(len(ids) for ids in revector.values()),
                        len(revector),
                    )
            for i, (doc, chunks) in enumerate(zip(batch, current.chunks), done + 1):
                old = current.stored.get(doc.doc_id, [])
                report.chunks_not_given -= len(old)
                if keep_held:
                    held.update(p.id for p in old)
                if chunks is None:
                    t0 = time.perf_counter()
                    chunks = pick(doc).chunk(doc.text)
                    seconds["chunk"] += time.perf_counter() - t0
                tick("chunk", i, len(docs))
                t0 = time.perf_counter()
                plans.append(
                    _plan(
                        doc,
                        chunks,
                        pick(doc),
                        model_id,
                        old,
                        neighbours,
                        revector.get(doc.doc_id, frozenset()),
                    )
                )
                if keep_held:
                    held.update(plans[-1].ids)
                seconds["plan"] += time.perf_counter() - t0
                tick("plan", i, len(docs))
            del current

            def embed_progress(
                stage: str, n: int, total: int, before: int = embedded_before
            ) -> None:
                tick(stage, before + n, before + total)

            active = [p for p in plans if p.report.status not in ("skipped", "unchanged")]
            # with nothing stored before this sync, the collection holds only the inputs
            # that earlier batches published: no other key is looked up there
            vectors, source = _vectors(
                active,
                raw_embedder,
                cache,
                sources,
                dry_run,
                seconds,
                embed_progress,
                (store, counted) if nothing_stored else None,
                published_vectors,
            )
            embedded_before += sum(1 for kind in source.values() if kind == "embed")
            for plan in plans:
                rep = plan.report
                report.per_document.append(rep)
                report.documents[rep.status] += 1
                if rep.policy is not None:
                    report.policies[rep.policy] = report.policies.get(rep.policy, 0) + 1
                if rep.status == "skipped":
                    continue
                report.documents["synced"] += 1
                for name in ("kept", "updated", "added", "deleted"):
                    report.chunks[name] += getattr(rep, name)
                for key, chunk in zip(plan.keys, plan.chunks):
                    tokens[key] = chunk.tokens
                if rep.status == "changed":
                    changed.append(rep)
            # inputs count once per sync, in the batch that first needed them
            for key, kind in source.items():
                if key not in counted:
                    counted.add(key)
                    report.inputs[_INPUT_COUNTER[kind]] += 1
                    if kind == "embed":
                        report.tokens_embedded += tokens[key]
            done += len(batch)
            published = [p for p in plans if p.report.status in ("new", "changed")]
            if dry_run or not published:
                continue
            t0 = time.perf_counter()
            _publish(published, vectors, store, order)
            seconds["publish"] += time.perf_counter() - t0
            published_vectors.add(
                {k: vectors[k] for plan in published for k in plan.needs_vector},
                {k: pid for plan in published for k, pid in zip(plan.keys, plan.ids)},
            )
            for plan in published:
                rep = plan.report
                log.info(
                    "synced doc_id=%s status=%s added=%d updated=%d deleted=%d",
                    rep.doc_id,
                    rep.status,
                    rep.added,
                    rep.updated,
                    rep.deleted,
                )
            tick("publish", done, len(docs))
            # unchanged documents were proven exact by their plan; re-read what was published
            t0 = time.perf_counter()
            failed += _check_published(
                published, report, store, pick, raw_embedder, cache, vectors, order, locked
            )
            seconds["verify"] += time.perf_counter() - t0
    finally:
        if ahead is not None:
            ahead.close()

    # a writer that added points of a given document after the count would make it negative
    report.chunks_not_given = max(report.chunks_not_given, 0)
    if prune and not store_missing:
        given = {doc.doc_id for doc in docs} | kept
        t0 = time.perf_counter()  # reads that find what to delete: plan
        for points_of in _gone(store, given, held):
            seconds["plan"] += time.perf_counter() - t0
            delete = [pid for point_ids in points_of.values() for pid in point_ids]
            for doc_id, point_ids in points_of.items():
                n = len(point_ids)
                report.per_document.append(DocumentReport(doc_id, "deleted", deleted=n))
                report.documents["deleted"] += 1
                report.chunks["deleted"] += n
            if not dry_run and delete:
                t0 = time.perf_counter()
                store.delete(delete)
                seconds["publish"] += time.perf_counter() - t0
            t0 = time.perf_counter()
        seconds["plan"] += time.perf_counter() - t0

    report.tokens_total = sum(tokens.values())
    fresh = sum(r.tokens_total * (r.recompute_fraction or 0.0) for r in changed)
    total = sum(r.tokens_total for r in changed)
    report.recompute_fraction = fresh / total if total else 0.0
    changed_bytes = sum(r.changed_bytes for r in changed)
    if changed_bytes:
        report.reindex_amplification = sum(r.reindexed_bytes for r in changed) / changed_bytes
    if not dry_run:
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
    log.info(
        "sync collection=%s documents=%s tokens_embedded=%d",
        report.collection,
        report.documents,
        report.tokens_embedded,
    )
    return report
