"""The model check: before a sync embeds anything, the model embeds once more one input
whose vector the collection (or the cache) already holds under the model's identity, and
the two vectors must agree.

An identity names a model (``model_id``), and every vector stored or cached under it is
taken to be that model's. A server that starts serving another model under the same name
(an embeddings server redeployed with new weights, a tag pulled again) breaks that
silently: new inputs would get the new model's vectors beside the collection's old ones,
and queries would rank them against each other. The check finds it before anything the
new model made is cached or stored, and raises :class:`~rechunk.errors.ModelChangedError`.

An embedder whose ``model_id`` names its weights (``pins_weights``: rechunk's local models,
known by their package's version or a hash of their files) is not checked.

Which input (the first that exists): a stored point of a document this batch changes,
one the cache gave this batch, or the point of the collection nearest to a fixed unit
vector (one ``search``). Its text is the point's own payload, taken only when it hashes to
the point's input key (so it is exactly the input whose vector is stored). The shortest
such input is embedded: it costs a few tokens once per sync, counted in
``SyncReport.model_check_tokens``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rechunk.errors import ModelChangedError
from rechunk.reuse.embedding import Embedder, check_vectors, usable_vectors
from rechunk.reuse.identity import input_key
from rechunk.sync.planning import _Plan
from rechunk.sync.store import StoredPoint, VectorStore

#: the cosine at or above which the model's new vector of an input agrees with the one held
#: for it: the same model on another runtime, precision or batch agrees to 0.99 or better,
#: and two different models' vectors of one text are about as far apart as unrelated texts
SAME_MODEL_COSINE = 0.95
#: points the search for a held input looks at (one of this model with its own text will do)
SEARCHED = 8


@dataclass(frozen=True)
class Held:
    """An input whose vector is held: its key, its text, its tokens, the vector, and
    where it is held (``"collection"`` or ``"cache"``)."""

    key: str
    text: str
    tokens: int
    vector: np.ndarray
    where: Literal["collection", "cache"]


@dataclass
class ModelCheck:
    """One sync's model check on ``store``, its collection (None: it held nothing when the
    sync began). ``state`` is ``"skipped"`` until the check has run (nothing was embedded,
    or nothing is held to compare with), then ``"passed"``; ``tokens``: what it embedded."""

    store: VectorStore | None
    state: Literal["passed", "skipped"] = "skipped"
    tokens: int = 0

    def before_embedding(
        self,
        embedder: Embedder,
        stored: Iterable[StoredPoint],
        cached: Iterable[tuple[str, str, int, np.ndarray]],
    ) -> None:
        """Run the check, unless it has passed, with the input :func:`held_input` finds
        among ``stored`` and ``cached`` (see there)."""
        if self.state == "skipped" and not getattr(embedder, "pins_weights", False):
            model_id, dimension = embedder.model_id, embedder.dimension
            self.run(embedder, held_input(stored, cached, self.store, model_id, dimension))

    def run(self, embedder: Embedder, held: Held | None) -> None:
        """Embed ``held``'s text and compare; :class:`~rechunk.errors.ModelChangedError`
        when the vectors disagree (nothing this sync embedded has been cached or stored)."""
        if held is None or self.state == "passed":
            return
        model_id = embedder.model_id
        fresh = check_vectors(
            _embed_uncached(embedder, [held.text]),
            model_id=model_id,
            dimension=embedder.dimension,
            count=1,
        )[0]
        self.tokens += held.tokens
        similarity = cosine(fresh, held.vector)
        if similarity < SAME_MODEL_COSINE:
            raise ModelChangedError(
                f"the model behind {model_id} has changed: an input the {held.where} holds "
                f"under that identity now gets a vector at cosine {similarity:.2f} from the "
                f"held one (the same model gives {SAME_MODEL_COSINE} or more), so nothing was "
                "embedded or stored. Give the new model its own identity (identity=NAME) and "
                "`rechunk reindex`, or serve the old model again"
            )
        self.state = "passed"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors (both passed the vector check: neither is zero)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def held_input(
    stored: Iterable[StoredPoint],
    cached: Iterable[tuple[str, str, int, np.ndarray]],
    store: VectorStore | None,
    model_id: str,
    dimension: int,
) -> Held | None:
    """The input to check the model with, or None when nothing is held under ``model_id``
    to compare with: the shortest of ``stored`` (points the sync read of documents it
    changes) whose text is its own input, else the shortest of ``cached`` (``(key, text,
    tokens, vector)`` of inputs the cache gave), else one of the points of ``store`` (the
    collection; None: it holds nothing) nearest a fixed unit vector."""
    if store is not None and (held := _stored(stored, store, model_id, dimension)):
        return held
    hits = sorted(cached, key=lambda hit: (hit[2], hit[0]))
    if hits:
        key, text, tokens, vector = hits[0]
        return Held(key, text, tokens, np.asarray(vector), "cache")
    if store is None:
        return None
    probe = np.zeros(dimension, dtype=np.float32)
    probe[0] = 1.0
    return _stored((p for p, _ in store.search(probe, k=SEARCHED)), store, model_id, dimension)


def local_candidates(
    plans: Sequence[_Plan],
    found: Mapping[str, np.ndarray],
    source: Mapping[str, str],
    wanted: Mapping[str, str],
) -> tuple[list[StoredPoint], list[tuple[str, str, int, np.ndarray]]]:
    """:func:`held_input`'s ``stored`` and ``cached`` of a batch of a local sync: the
    stored points of its plans, and the inputs (``wanted``: key -> text) it ``found`` in
    the cache (``source``)."""
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
    input (hashes to its input key), with the vector the collection holds for it."""
    own = sorted(
        (p.payload.tokens, p.payload.input_key, p.payload.text)
        for p in points
        if p.payload.model_id == model_id
        and p.payload.text
        and input_key(model_id, p.payload.text) == p.payload.input_key
    )
    for tokens, key, text in own[:SEARCHED]:
        vectors, _ = usable_vectors(store.get_vectors([key], model_id), dimension)
        if key in vectors:
            return Held(key, text, tokens, np.asarray(vectors[key]), "collection")
    return None


def _embed_uncached(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """The model's vectors of ``texts``, past the cache an API embedder may keep in front of
    it (``embed_uncached``), which would answer the check with the vector held."""
    uncached = getattr(embedder, "embed_uncached", None)
    return uncached(texts) if callable(uncached) else embedder.embed(texts)
