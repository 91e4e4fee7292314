"""The model check: before a sync embeds anything, the model embeds once more one input
whose vector the collection (or the cache) already holds under the model's identity, and
the two vectors must agree.

An identity names a model (``model_id``), and every vector stored or cached under it is
taken to be that model's. A server that starts serving another model under the same name
(an embeddings server redeployed with new weights, a tag pulled again) breaks that
silently: new inputs would get the new model's vectors beside the collection's old ones,
and queries would rank them against each other. The check finds it before anything the
new model made is cached or stored, and raises :class:`~rechunk.errors.ModelChangedError`.
It runs once per sync, when the sync first needs the model.

An embedder whose ``model_id`` names its weights (``pins_weights``: rechunk's local models,
known by their package's version or a hash of their files) is not checked.

What is compared, the first that exists: the collection's vector of an input (the
collection is what must stay one model's), the cache's, then nothing:

1. the shortest stored chunk of a document that first batch changes (read already);
2. else the shortest of the points nearest a fixed unit vector (one ``search``) in the
   collection, then in each collection lending vectors (``reuse_from``: a reindex's live
   generation);
3. else the cache's reference: the vector of :data:`REFERENCE` that the first check
   with that cache that passed recorded for the model;
4. else the shortest input the cache gave that batch.

A stored point's text is taken only when it hashes to the point's input key (it is then
exactly the input whose vector is stored). With a cache that has no reference yet, a
check that passed (against a collection, or an input the cache gave) records one (a few
tokens embedded once per cache and model): from then on a new collection sharing that
cache is checked too. A check with nothing to compare with records none: the model that
answers then may already be another than the one whose vectors the cache or the
collections hold, and a reference of it would refuse the right model for good. The
tokens the check embeds are counted in ``SyncReport.model_check_tokens``. The cache
wrappers (:class:`~rechunk.CachedEmbedder`, the drop-ins) check against the cache alone
(:mod:`rechunk.reuse.agreement`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rechunk.reuse.agreement import REFERENCE, SAME_MODEL_COSINE, Held, cosine, plan_check
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import Embedder, check_vectors, usable_vectors
from rechunk.reuse.identity import input_key
from rechunk.sync.planning import _Plan
from rechunk.sync.store import StoredPoint, VectorStore

__all__ = ["REFERENCE", "SAME_MODEL_COSINE", "Held", "ModelCheck", "cosine", "local_candidates"]

#: points the search for a held input looks at (one of this model with its own text will do)
SEARCHED = 8
#: what a sync's refusal tells the user
ADVICE = (
    "nothing was embedded or stored. Give the new model its own identity (identity=NAME) "
    "and `rechunk reindex`, or serve the old model again"
)

#: ``(key, text, tokens, vector)`` of an input the cache gave
CacheHit = tuple[str, str, int, np.ndarray]


@dataclass
class ModelCheck:
    """One sync's model check. ``stores``: the collections that hold vectors of the model
    (the sync's own, when it held points at the start, then any lending vectors);
    ``cache``: the sync's cache. ``state`` is ``"passed"`` once the check has compared two
    vectors that agree, else ``"skipped"`` (the sync embedded nothing, nothing is held to
    compare with, or the model names its weights); ``tokens``: what it embedded."""

    stores: Sequence[VectorStore]
    cache: EmbeddingCache | None
    state: Literal["passed", "skipped"] = "skipped"
    tokens: int = 0
    done: bool = False  # it has run: once per sync, before the model's first call

    def before_embedding(
        self, embedder: Embedder, stored: Iterable[StoredPoint], cached: Iterable[CacheHit]
    ) -> None:
        """Check the model before its first call in this sync (later calls: nothing).
        ``stored``: the stored points of the documents the batch changes; ``cached``: the
        inputs of the batch the cache gave."""
        if self.done:
            return
        self.done = True
        if getattr(embedder, "pins_weights", False):
            return
        model_id, dimension = embedder.model_id, embedder.dimension
        held = _from_collections(stored, self.stores, model_id, dimension)
        hits = (Held(k, text, tokens, np.asarray(v), "cache") for k, text, tokens, v in cached)
        check = plan_check(
            self.cache, model_id, dimension, held, hits, lambda: self._count(embedder)
        )
        if check is None:
            return
        texts = check.texts
        fresh = check_vectors(
            _embed_uncached(embedder, texts), model_id=model_id, dimension=dimension,
            count=len(texts),
        )  # fmt: skip
        assert check.held is not None  # a sync's check always compares
        self.tokens += check.held.tokens
        check.settle(fresh, ADVICE)
        self.state = "passed"
        if check.record:
            self.tokens += self._count(embedder)

    @staticmethod
    def _count(embedder: Embedder) -> int:
        count = getattr(embedder, "count_tokens", None)
        return int(count(REFERENCE)) if callable(count) else 0


def _from_collections(
    stored: Iterable[StoredPoint], stores: Sequence[VectorStore], model_id: str, dimension: int
) -> Held | None:
    """Tiers 1 and 2 of the module's doc: the shortest of ``stored`` whose text is its own
    input, else of the points of each of ``stores`` nearest a fixed unit vector."""
    if not stores:
        return None
    if held := _stored(stored, stores[0], model_id, dimension):
        return held
    probe = np.zeros(dimension, dtype=np.float32)
    probe[0] = 1.0
    for store in stores:
        found = _stored((p for p, _ in store.search(probe, k=SEARCHED)), store, model_id, dimension)
        if found is not None:
            return found
    return None


def local_candidates(
    plans: Sequence[_Plan],
    found: Mapping[str, np.ndarray],
    source: Mapping[str, str],
    wanted: Mapping[str, str],
) -> tuple[list[StoredPoint], list[CacheHit]]:
    """:meth:`ModelCheck.before_embedding`'s ``stored`` and ``cached`` of a batch of a
    local sync: the stored points of its plans, and the inputs (``wanted``: key -> text)
    it ``found`` in the cache (``source``)."""
    tokens = {k: c.tokens for plan in plans for k, c in zip(plan.keys, plan.chunks)}
    stored = [p for plan in plans for p in plan.existing.values()]
    cached = [
        (k, wanted[k], tokens.get(k, 0), found[k])
        for k, kind in source.items()
        if kind == "cache" and k in wanted
    ]
    return stored, cached


def _stored(
    points: Iterable[StoredPoint], store: VectorStore, model_id: str, dimension: int
) -> Held | None:
    """The shortest of ``points`` written by ``model_id`` whose payload text is its own
    input (hashes to its input key), with the vector ``store`` holds for it."""
    own = sorted(
        (p.payload.tokens, p.payload.input_key, p.payload.text)
        for p in points
        if p.payload.model_id == model_id
        and p.payload.text
        and input_key(model_id, p.payload.text) == p.payload.input_key
    )[:SEARCHED]
    if not own:
        return None
    vectors, _ = usable_vectors(store.get_vectors([key for _, key, _ in own], model_id), dimension)
    for tokens, key, text in own:
        if key in vectors:
            return Held(key, text, tokens, np.asarray(vectors[key]), "collection")
    return None


def _embed_uncached(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """The model's vectors of ``texts``, past the cache an API embedder may keep in front of
    it (``embed_uncached``), which would answer the check with the vector held."""
    uncached = getattr(embedder, "embed_uncached", None)
    return uncached(texts) if callable(uncached) else embedder.embed(texts)
