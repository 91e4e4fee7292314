"""Test infrastructure around real stores and the real model (no mocks).

``RecordingEmbedder`` delegates to the real embedder and records what it was
asked to embed. ``FaultyStore`` wraps a real store and makes its k-th call
raise, to inject a crash at every step of a sync.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rechunk import StoreError


class RecordingEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def max_input_tokens(self) -> int | None:
        return self.inner.max_input_tokens

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]


class InjectedFault(StoreError):
    pass


class FaultyStore:
    """A real store whose ``fail_at``-th call (0-based) raises InjectedFault."""

    METHODS = ("collection_info", "ensure_collection", "get_points", "get_points_many",
               "get_vectors", "write", "delete", "doc_ids", "search", "present_ids",
               "get_vectors_at", "all_ids", "doc_ids_of")

    def __init__(self, inner: Any, fail_at: int | None = None) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.calls: list[str] = []

    @property
    def collection(self) -> str:
        return self.inner.collection

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self.METHODS:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            index = len(self.calls)
            self.calls.append(name)
            if index == self.fail_at:
                if name in ("write", "delete") and args and len(args[0]) > 1:
                    # fail half-way: the first half of the batch lands, then the crash
                    half = list(args[0])[: len(args[0]) // 2]
                    target(half)
                raise InjectedFault(f"injected failure at call {index} ({name})")
            return target(*args, **kwargs)

        return call


def snapshot(store: Any, doc_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """Everything a store holds for the given docs: ids, payloads and vectors."""
    ids = sorted(doc_ids) if doc_ids is not None else sorted(store.doc_ids())
    out: dict[str, Any] = {}
    for doc_id in ids:
        points = sorted(store.get_points(doc_id), key=lambda p: p.id)
        keys = [p.payload.input_key for p in points]
        vectors = store.get_vectors(keys, points[0].payload.model_id) if points else {}
        out[doc_id] = [
            (p.id, p.payload, np.round(vectors[p.payload.input_key], 5).tolist()) for p in points
        ]
    return out


class Memo:
    """Real vectors computed once per distinct text (for tests that embed the same text often)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if todo:
            self.vectors.update(zip(todo, self.embedder.embed(todo)))
        if not texts:
            return np.zeros((0, self.embedder.dimension))
        return np.stack([self.vectors[t] for t in texts])
