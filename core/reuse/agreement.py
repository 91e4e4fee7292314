"""Whether the model behind an identity still agrees with the vectors held under it.

An identity names a model (``model_id``), and every vector cached or stored under it is
taken to be that model's. A server that starts serving another model under the same name
breaks that silently. The check: the model embeds once more an input whose vector is
held, and the two vectors must agree (cosine :data:`SAME_MODEL_COSINE` or more), else
:class:`~rechunk.errors.ModelChangedError`, before anything the model gave in that call
is cached, stored or returned.

Two users: the sync (:mod:`rechunk.sync.model_check`, which compares with the collection
first) and the cache wrappers that hold no collection (:class:`~rechunk.CachedEmbedder`,
the LangChain and LlamaIndex drop-ins), which check every call that embeds against the
cache alone, with :func:`cache_check` and :class:`CheckedBatches`:

1. the cache's reference: the vector of :data:`REFERENCE` the cache keeps per model;
2. else the shortest input of the call the cache gave.

A check that passed, with a cache that has no reference yet (and is writable), records
one, so later calls and syncs of that cache are checked even when nothing they send is
cached. Nothing is recorded without a passing check: the model answering then may
already be another than the one whose vectors the cache holds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from rechunk.errors import ModelChangedError, UncheckedModelWarning
from rechunk.reuse.cache import EmbeddingCache, recorded_dimension
from rechunk.reuse.embedding import usable_vectors
from rechunk.reuse.identity import input_key

__all__ = [
    "REFERENCE",
    "SAME_MODEL_COSINE",
    "Check",
    "CheckedBatches",
    "Held",
    "cache_check",
    "plan_check",
]

#: the cosine at or above which the model's new vector of an input agrees with the one held
#: for it: the same model on another runtime, precision or batch agrees to 0.99 or better,
#: and two different models' vectors of one text are about as far apart as unrelated texts
SAME_MODEL_COSINE = 0.95
#: the text whose vector a cache keeps for each model it holds, to check a model against
#: where nothing else held is at hand
REFERENCE = "rechunk model check"


@dataclass(frozen=True)
class Held:
    """An input whose vector is held: its key, its text, its tokens (0: not counted), the
    vector, and where it is held (``"collection"`` or ``"cache"``)."""

    key: str
    text: str
    tokens: int
    vector: npt.NDArray[np.float32]
    where: Literal["collection", "cache"]


@dataclass(frozen=True)
class Check:
    """One check to run: the input ``held`` (``None``: nothing to compare with), and
    whether the model's vector of :data:`REFERENCE` goes into ``cache`` once the check
    passes (``record``)."""

    held: Held | None
    record: bool
    model_id: str
    cache: EmbeddingCache | None = field(repr=False)

    @property
    def texts(self) -> list[str]:
        """What the model embeds for the check: the held input, then the reference."""
        return [*([self.held.text] if self.held else []), *([REFERENCE] if self.record else [])]

    def settle(self, fresh: npt.NDArray[np.float32], advice: str) -> None:
        """Compare the model's ``fresh`` vectors of :attr:`texts` with the held one, then
        record the reference; ``advice``: what the error tells the user to do."""
        if self.held is not None:
            refuse_if_changed(self.held, fresh[0], self.model_id, advice)
        if self.record:
            assert self.cache is not None
            self.cache.put_many([(input_key(self.model_id, REFERENCE), fresh[-1])], self.model_id)


def reference(
    cache: EmbeddingCache | None, model_id: str, dimension: int
) -> npt.NDArray[np.float32] | None:
    """The cache's vector of :data:`REFERENCE` for ``model_id``, if it keeps a usable one."""
    if cache is None:
        return None
    key = input_key(model_id, REFERENCE)
    found, _ = usable_vectors(cache.get_many([key], model_id, dimension), dimension)
    return np.asarray(found[key]) if key in found else None


def plan_check(
    cache: EmbeddingCache | None,
    model_id: str,
    dimension: int | None,
    held: Held | None,
    hits: Iterable[Held],
    count_reference: Callable[[], int] = lambda: 0,
    *,
    first: bool = False,
) -> Check | None:
    """The check to run: against ``held`` (the caller's own, e.g. a collection's), else
    the cache's reference, else the shortest of ``hits`` (by tokens, then length); with
    none of them and ``first`` (a cache wrapper: the cache is all it has), only the
    recording of a reference in a cache that holds no vector of the model yet (its first
    vectors are about to be made); else ``None``. ``dimension``: ``None`` while it is not
    known (nothing recorded in the cache: a cache wrapper's first call).
    ``count_reference``: the reference's tokens, for :class:`Held` (asked only then)."""
    recorded = None if dimension is None else reference(cache, model_id, dimension)
    if held is None and recorded is not None:
        key = input_key(model_id, REFERENCE)
        held = Held(key, REFERENCE, count_reference(), recorded, "cache")
    if held is None:
        held = min(hits, key=lambda h: (h.tokens, len(h.text), h.key), default=None)
    writable = cache is not None and not getattr(cache, "readonly", False)
    if held is None:
        if first and writable and cache is not None and recorded_dimension(cache, model_id) is None:
            return Check(None, True, model_id, cache)
        return None
    return Check(held, recorded is None and writable, model_id, cache)


def cache_check(
    cache: EmbeddingCache, model_id: str, dimension: int | None, hits: dict[str, np.ndarray],
    *, key_of: dict[str, str],
) -> Check | None:  # fmt: skip
    """The check of a cache wrapper's call: against the cache's reference, else the
    shortest of the call's ``hits`` (input key -> vector; ``key_of``: text -> key), else
    the recording of a reference in a cache that holds no vector of the model yet. With
    none of them the call is not checked, and :class:`~rechunk.errors.
    UncheckedModelWarning` says so (once per model, by Python's default filter)."""
    texts = {key: text for text, key in key_of.items() if key in hits}
    held = (Held(key, text, 0, np.asarray(hits[key]), "cache") for key, text in texts.items())
    check = plan_check(cache, model_id, dimension, None, held, first=True)
    if check is None:
        warnings.warn(
            f"the model check of {model_id} has nothing to compare with: the cache keeps "
            "no reference for it and this call held no cached input, so its vectors are "
            "taken unchecked; a call that includes a cached input, or a `rechunk sync` "
            "whose check passes, records the reference",
            UncheckedModelWarning,
            stacklevel=4,
        )
    return check


def refuse_if_changed(held: Held, fresh: np.ndarray, model_id: str, advice: str) -> None:
    """:class:`~rechunk.errors.ModelChangedError` when ``fresh`` is not ``held``'s vector."""
    similarity = cosine(fresh, held.vector)
    if similarity < SAME_MODEL_COSINE:
        raise ModelChangedError(
            f"the model behind {model_id} has changed: an input the {held.where} holds "
            f"under that identity now gets a vector at cosine {similarity:.2f} from the "
            f"held one (the same model gives {SAME_MODEL_COSINE} or more), so {advice}"
        )


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors (both passed the vector check: neither is zero)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


#: what a cache wrapper's refusal tells the user
WRAPPER_ADVICE = (
    "nothing it gave in this call was cached or returned. Give the new model an identity "
    "of its own (model_id=..., and a collection of its own), or serve the old model again"
)


class CheckedBatches:
    """The batches a cache wrapper sends for one call: the check's texts first (when there
    is a check), then the misses, ``batch_size`` at a time (``None``: all in one). The
    check rides in the call's first request instead of a request of its own.

    :meth:`keep` takes each batch's checked vectors and returns the misses' part of them,
    after settling the check once its vectors are all in: a refusal comes before any
    vector of a miss is kept.
    """

    def __init__(self, check: Check | None, missing: list[str], batch_size: int | None) -> None:
        self._check = check
        self._prefix = check.texts if check else []
        self._texts = [*self._prefix, *missing]
        self._size = batch_size or max(1, len(self._texts))
        self._fresh: list[np.ndarray] = []  # the check's vectors so far

    def __iter__(self) -> Iterator[list[str]]:
        for start in range(0, len(self._texts), self._size):
            yield self._texts[start : start + self._size]

    def checks(self, batch: Sequence[str]) -> bool:
        """Whether ``batch`` (the next one sent) holds any of the check's inputs."""
        return len(self._fresh) < len(self._prefix) and bool(batch)

    def keep(
        self, batch: Sequence[str], vectors: npt.NDArray[np.float32]
    ) -> tuple[list[str], npt.NDArray[np.float32]]:
        """The misses of ``batch`` and their rows of ``vectors`` (the batch's, checked)."""
        wanted = len(self._prefix) - len(self._fresh)
        if wanted > 0:
            self._fresh.extend(vectors[:wanted])
            if len(self._fresh) == len(self._prefix):
                assert self._check is not None
                self._check.settle(np.asarray(self._fresh), WRAPPER_ADVICE)
            return list(batch[wanted:]), vectors[wanted:]
        return list(batch), vectors
