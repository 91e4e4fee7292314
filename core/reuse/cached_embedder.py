"""An Embedder that embeds each distinct input once and reuses it from a cache afterwards."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rechunk.errors import ConfigError, EmbeddingError
from rechunk.reuse.agreement import CheckedBatches, cache_check
from rechunk.reuse.cache import EmbeddingCache, record_dimension
from rechunk.reuse.embedding import Embedder, check_texts, check_vectors, usable_vectors
from rechunk.reuse.identity import input_key

__all__ = ["CachedEmbedder", "EmbedStats"]


@dataclass(frozen=True)
class EmbedStats:
    """What a :class:`CachedEmbedder` did since it was created or last reset.

    ``inputs`` counts texts passed to ``embed`` (duplicates included); ``hits``
    and ``misses`` count the distinct texts of each call found / not found in
    the cache; ``inputs_embedded`` counts texts sent to the underlying model
    (each distinct miss once); ``tokens_embedded`` sums their content tokens
    (no special tokens) when the underlying embedder has ``count_tokens``, else
    stays 0; ``seconds_embedding`` is wall time spent inside the underlying
    ``embed``.
    """

    inputs: int = 0
    hits: int = 0
    misses: int = 0
    inputs_embedded: int = 0
    tokens_embedded: int = 0
    seconds_embedding: float = 0.0


class StatsCounter:
    """Running :class:`EmbedStats`, safe to add to from several threads.

    It pickles as a snapshot of the counts (a copy counts on from there, on its own)
    and gets a new lock when unpickled.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = EmbedStats()

    def __getstate__(self) -> EmbedStats:
        return self.snapshot()

    def __setstate__(self, state: EmbedStats) -> None:
        self._lock = threading.Lock()
        self._stats = state

    def snapshot(self) -> EmbedStats:
        with self._lock:
            return self._stats

    def reset(self) -> None:
        with self._lock:
            self._stats = EmbedStats()

    def add(
        self,
        *,
        inputs: int = 0,
        hits: int = 0,
        misses: int = 0,
        inputs_embedded: int = 0,
        tokens_embedded: int = 0,
        seconds_embedding: float = 0.0,
    ) -> None:
        with self._lock:
            now = self._stats
            self._stats = EmbedStats(
                inputs=now.inputs + inputs,
                hits=now.hits + hits,
                misses=now.misses + misses,
                inputs_embedded=now.inputs_embedded + inputs_embedded,
                tokens_embedded=now.tokens_embedded + tokens_embedded,
                seconds_embedding=now.seconds_embedding + seconds_embedding,
            )


class CachedEmbedder:
    """Wraps an :class:`~rechunk.Embedder` with an :class:`~rechunk.reuse.cache.EmbeddingCache`.

    It is itself an Embedder with the wrapped one's ``model_id``, ``dimension``
    and ``max_input_tokens`` (read once, at construction). ``embed(texts)``:

    1. de-duplicates the texts of the call and computes each one's
       :func:`~rechunk.input_key` under ``model_id``;
    2. looks all keys up in one ``cache.get_many`` call (model and dimension
       checked by the cache); a cached vector that fails
       :func:`~rechunk.reuse.embedding.check_vectors` (all zeros, a value near float32's
       limit: written by an older version or another tool) is a miss;
    3. sends only the misses to the wrapped embedder, ``batch_size`` at a time;
    4. checks every batch it gets back: a float32 ndarray that passes
       :func:`~rechunk.reuse.embedding.check_vectors` (shape ``(len(batch), dimension)``,
       finite, a norm in range), else :class:`~rechunk.errors.EmbeddingError`
       (:class:`~rechunk.errors.BadVectorError` for bad values) and that batch is not
       cached (batches validated before it are correct and stay cached);
    5. writes each validated batch to the cache (one ``put_many`` per batch, which
       replaces a bad cached vector; skipped for a cache opened with
       ``readonly=True``) and returns float32 ``(len(texts), dimension)`` in input
       order.

    A call that embeds is model-checked first, unless the wrapped embedder names its
    weights (``pins_weights``): the model embeds again the cache's reference input (or,
    until the cache has one, the shortest input of the call the cache gave), in the call's
    first request, and :class:`~rechunk.errors.ModelChangedError` is raised before
    anything of the call is cached or returned when the two vectors disagree
    (:mod:`rechunk.reuse.agreement`; with neither, a cache holding no vector of the model
    records the reference, else the call is not checked and warns,
    :class:`~rechunk.errors.UncheckedModelWarning`). The check's inputs are not counted
    in :attr:`stats`.

    A vector returned from the cache is bit-identical to the one the wrapped
    embedder returned when it was first computed. Counters: :attr:`stats`.
    Thread-safe if the wrapped embedder and the cache are.
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache, *, batch_size: int = 64) -> None:
        if type(batch_size) is not int or batch_size <= 0:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        model_id = embedder.model_id
        dimension = embedder.dimension
        if not isinstance(model_id, str) or not model_id:
            raise ConfigError("the embedder's model_id must be a non-empty string")
        if type(dimension) is not int or dimension <= 0:
            raise ConfigError(f"the embedder's dimension must be a positive int, got {dimension!r}")
        self._embedder = embedder
        self._cache = cache
        self._readonly = bool(getattr(cache, "readonly", False))
        self._recorded = False
        self._model_id = model_id
        self._dimension = dimension
        self._max_input_tokens: int | None = embedder.max_input_tokens
        self.batch_size = batch_size
        self._stats = StatsCounter()

    # ----------------------------------------------------------------- Embedder protocol

    @property
    def model_id(self) -> str:
        """The wrapped embedder's model identity."""
        return self._model_id

    @property
    def dimension(self) -> int:
        """The wrapped embedder's vector dimension."""
        return self._dimension

    @property
    def max_input_tokens(self) -> int | None:
        """The wrapped embedder's input window (special tokens included)."""
        return self._max_input_tokens

    @property
    def embedder(self) -> Embedder:
        """The wrapped embedder."""
        return self._embedder

    @property
    def cache(self) -> EmbeddingCache:
        """The cache vectors are reused from."""
        return self._cache

    @property
    def stats(self) -> EmbedStats:
        """A snapshot of the counters."""
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        self._stats.reset()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of ``texts`` (float32, ``(len(texts), dimension)``), embedding only misses."""
        texts = check_texts(texts)
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        key_of: dict[str, str] = {}
        for text in texts:
            if text not in key_of:
                key_of[text] = input_key(self._model_id, text)
        keys = list(key_of.values())
        cached = self._cache.get_many(keys, self._model_id, self._dimension)
        vectors, _ = usable_vectors(cached, self._dimension)  # a bad one is embedded again
        missing = [text for text, key in key_of.items() if key not in vectors]
        self._stats.add(inputs=len(texts), hits=len(keys) - len(missing), misses=len(missing))
        check = None
        if missing and not getattr(self._embedder, "pins_weights", False):
            check = cache_check(
                self._cache, self._model_id, self._dimension, vectors, key_of=key_of
            )
        batches = CheckedBatches(check, missing, self.batch_size)
        for sent in batches:
            batch, fresh = batches.keep(sent, self._embed_batch(sent, batches.checks(sent)))
            if not batch:
                continue
            self._count(batch)
            batch_keys = [key_of[text] for text in batch]
            if not self._readonly:
                self._cache.put_many(zip(batch_keys, fresh), self._model_id)
                if not self._recorded:  # for adapters over the same cache that are not told
                    record_dimension(self._cache, self._model_id, self._dimension)
                    self._recorded = True
            vectors.update(zip(batch_keys, fresh))
        for row, text in enumerate(texts):
            out[row] = vectors[key_of[text]]
        return out

    def _embed_batch(self, batch: list[str], checking: bool = False) -> npt.NDArray[np.float32]:
        """Run the wrapped embedder on ``batch`` and check what it returns; ``checking``:
        the batch holds the model check's inputs, which must reach the model past any
        cache of the embedder's own (``embed_uncached``, as ``OpenAIEmbedder`` has)."""
        started = time.perf_counter()
        uncached = getattr(self._embedder, "embed_uncached", None)
        embed = uncached if checking and callable(uncached) else self._embedder.embed
        result = embed(batch)
        elapsed = time.perf_counter() - started
        if not isinstance(result, np.ndarray):
            raise EmbeddingError(
                f"embedder {self._model_id!r} returned {type(result).__name__}, not an ndarray"
            )
        if result.dtype != np.float32:
            raise EmbeddingError(
                f"embedder {self._model_id!r} returned dtype {result.dtype}, expected float32"
            )
        self._stats.add(seconds_embedding=elapsed)
        # a fresh copy (an embedder may reuse its buffer) of checked vectors
        return check_vectors(
            result, model_id=self._model_id, dimension=self._dimension, count=len(batch)
        )

    def _count(self, batch: list[str]) -> None:
        """Count ``batch`` (misses, not the model check's inputs) as embedded."""
        tokens = 0
        count_tokens = getattr(self._embedder, "count_tokens", None)
        if callable(count_tokens):
            tokens = sum(int(count_tokens(text)) for text in batch)
        self._stats.add(inputs_embedded=len(batch), tokens_embedded=tokens)
