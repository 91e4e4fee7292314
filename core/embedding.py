"""The Embedder protocol: what rechunk needs from an embedding model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rechunk.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Embedder", "check_texts"]


def check_texts(texts: object) -> list[str]:
    """``texts`` as a list; :class:`~rechunk.errors.InputError` for a single ``str``, for
    something that is not iterable, or for an item that is not a ``str`` (named by its
    position). What every embedder checks before it looks up or embeds anything."""
    if isinstance(texts, (str, bytes)):
        raise InputError("texts must be a sequence of str, not a single str")
    try:
        items: list[object] = list(texts)  # type: ignore[call-overload]
    except TypeError:
        raise InputError(f"texts must be a sequence of str, got {type(texts).__name__}") from None
    strings = []
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise InputError(f"text {index} is a {type(text).__name__}, not a str")
        strings.append(text)
    return strings


@runtime_checkable
class Embedder(Protocol):
    """A text embedding model.

    ``model_id`` is a stable identity of everything that changes the vectors
    (model name or path, weights revision or hash, pooling, normalisation,
    maximum sequence length, any prompt or prefix). It enters every input key,
    so two embedders with the same ``model_id`` must produce the same vectors.
    ``max_input_tokens`` counts special tokens; ``None`` means unknown/unbounded.
    ``embed`` returns float32 of shape ``(len(texts), dimension)`` and must never
    truncate silently: an input longer than the window is an ``EmbeddingError``.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_input_tokens(self) -> int | None: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
