"""Where a sync's vectors come from: the cache, what the sync itself published, the
collections, and only then the model; every vector is checked before it is reused,
cached or stored."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rechunk.reuse.cache import EmbeddingCache, record_dimension
from rechunk.reuse.embedding import Embedder, check_vectors, usable_vectors
from rechunk.sync.model_check import ModelCheck, local_candidates
from rechunk.sync.planning import _Plan
from rechunk.sync.report import Progress
from rechunk.sync.store import StoredPoint, VectorStore, _method

log = logging.getLogger("rechunk.sync")


#: inputs per embed call where the embedder names no ``embed_batch`` (see
#: :func:`_embed_step`)
EMBED_BATCH = 32
#: a vector as a sync holds it
Vector = npt.NDArray[np.float32]


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
    check: ModelCheck | None = None,
) -> tuple[dict[str, Vector], dict[str, str]]:
    """Vectors for every key a plan needs (cache, then what this sync published, then the
    collections, then the model), and where each came from: ``"cache"``, ``"store"`` (a
    vector the collection holds) or ``"embed"``. ``only``: a store of ``stores`` and the
    keys it can hold, so that no other is looked up there. ``check``: the sync's model
    check, run before the model embeds anything (:class:`~rechunk.sync.model_check.ModelCheck`).

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
        if check is not None and not check.done:  # its inputs gathered only when it runs
            t0 = time.perf_counter()
            check.before_embedding(embedder, *local_candidates(plans, found, source, wanted))
            seconds["embed"] += time.perf_counter() - t0
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
