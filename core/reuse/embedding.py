"""The Embedder protocol: what rechunk needs from an embedding model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rechunk.errors import BadVectorError, InputError

__all__ = [
    "MAX_COMPONENT",
    "MIN_NORM",
    "Embedder",
    "check_texts",
    "check_vectors",
    "first_fault",
    "usable_rows",
    "usable_vectors",
]

#: A vector with a value of larger magnitude is refused: no embedding model makes one, and
#: float32 arithmetic on it (a norm, a cosine) overflows long before float32's limit.
MAX_COMPONENT = 1e6
#: A vector whose Euclidean norm is below this (all zeros, or nearly) has no direction:
#: it cannot be a cosine vector, and a store would rank it arbitrarily.
MIN_NORM = 1e-6

# fault codes of vector_faults, in the order a row is judged
_OK, _NONFINITE, _HUGE, _ZERO, _TINY = range(5)
#: each fault: what one vector / several vectors "do"
_FAULT_WORDS = {
    _NONFINITE: ("holds NaN or infinite values", "hold NaN or infinite values"),
    _HUGE: (f"has a value beyond +-{MAX_COMPONENT:g}", f"have values beyond +-{MAX_COMPONENT:g}"),
    _ZERO: ("is all zeros", "are all zeros"),
    _TINY: (f"has a norm below {MIN_NORM:g}", f"have a norm below {MIN_NORM:g}"),
}
_FAULT_NAMES = {_NONFINITE: "nonfinite", _HUGE: "huge", _ZERO: "zero", _TINY: "tiny"}


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

    Optional: ``pins_weights``, true when ``model_id`` names the weights themselves (a
    hash of the model's files), so that no other model can answer under it; a sync then
    skips its model check (:mod:`rechunk.sync.model_check`), which otherwise embeds one
    held input again per sync to catch a server that serves another model under the same
    name.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_input_tokens(self) -> int | None: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


_MIN_SQUARES = MIN_NORM * MIN_NORM
_MAX_SQUARES = MAX_COMPONENT * MAX_COMPONENT


def _suspects(squares: npt.NDArray[np.floating]) -> npt.NDArray[np.intp]:
    """Positions of the vectors whose sum of squares is not a finite number between
    ``MIN_NORM**2`` and ``MAX_COMPONENT**2``: only these can be unusable (no value of a
    vector exceeds its norm)."""
    with np.errstate(all="ignore"):
        fine = np.isfinite(squares) & (squares >= _MIN_SQUARES) & (squares <= _MAX_SQUARES)
    return np.flatnonzero(~fine)


def _label(
    rows: npt.NDArray[np.floating], squares: npt.NDArray[np.floating]
) -> npt.NDArray[np.int8]:
    """The fault code of each of a few suspect rows (``_OK`` for a usable row of norm
    above MAX_COMPONENT), value by value."""
    with np.errstate(all="ignore"):
        largest = np.abs(rows).max(axis=1)  # NaN where a row holds one
        codes = np.zeros(rows.shape[0], dtype=np.int8)
        codes[squares < _MIN_SQUARES] = _TINY
        codes[largest == 0] = _ZERO
        codes[largest > MAX_COMPONENT] = _HUGE
        codes[~np.isfinite(largest)] = _NONFINITE
    return codes


def _faults(rows: npt.NDArray[np.floating]) -> npt.NDArray[np.int8]:
    """One fault code per row of a 2-D float array (``_OK`` for a usable vector).

    One vectorised pass sums each row's squares, with warnings silenced; only the rows
    :func:`_suspects` names, rare, are looked at value by value. So a value near
    float32's limit is judged, never warned about, at the cost of one dot product per
    vector."""
    codes = np.zeros(rows.shape[0], dtype=np.int8)
    if rows.size == 0:
        return codes
    with np.errstate(all="ignore"):
        squares = np.einsum("ij,ij->i", rows, rows)
    suspect = _suspects(squares)
    if suspect.size:
        codes[suspect] = _label(rows[suspect], squares[suspect])
    return codes


def usable_rows(vectors: npt.NDArray[np.floating]) -> npt.NDArray[np.bool_]:
    """For a 2-D float array, which rows are usable vectors: finite, no value beyond
    :data:`MAX_COMPONENT`, a norm of at least :data:`MIN_NORM`."""
    usable: npt.NDArray[np.bool_] = _faults(vectors) == _OK
    return usable


def first_fault(vectors: Sequence[npt.NDArray[np.float32]]) -> tuple[int, str] | None:
    """The position of the first unusable one of ``vectors`` (1-D float arrays, of one
    length or several) and what is wrong with it ("is all zeros"), or ``None``. Judged a
    length at a time, vectorised: what a cache checks before it writes anything."""
    by_length: dict[int, list[int]] = {}
    for position, vector in enumerate(vectors):
        by_length.setdefault(int(vector.shape[0]), []).append(position)
    worst: tuple[int, str] | None = None
    for positions in by_length.values():
        codes = _faults(np.stack([vectors[p] for p in positions]))
        failed = np.flatnonzero(codes != _OK)
        if failed.size and (worst is None or positions[int(failed[0])] < worst[0]):
            row = int(failed[0])
            worst = (positions[row], _FAULT_WORDS[int(codes[row])][0])
    return worst


def usable_vectors(
    vectors: Mapping[str, npt.NDArray[np.float32]], dimension: int
) -> tuple[dict[str, npt.NDArray[np.float32]], list[str]]:
    """``vectors`` (key -> 1-D vector, as a cache or a collection hands them back) split
    into the usable ones of ``dimension`` values and the keys of the others, which a
    caller treats as missing: embedded again, and the bad entry overwritten. About 3 us
    a vector (one dot product; only a suspect one is looked at value by value)."""
    if not vectors:
        return {}, []
    wrong = {k for k, v in vectors.items() if getattr(v, "shape", None) != (dimension,)}
    shaped = {k: v for k, v in vectors.items() if k not in wrong}
    bad = list(wrong)
    if not shaped:
        return {}, bad
    keys = list(shaped)
    with np.errstate(all="ignore"):
        squares = np.fromiter((v.dot(v) for v in shaped.values()), np.float64, len(keys))
    suspect = _suspects(squares)
    if suspect.size:
        rows = np.stack([shaped[keys[i]] for i in suspect])
        for i, code in zip(suspect, _label(rows, squares[suspect])):
            if code != _OK:
                bad.append(keys[i])
                del shaped[keys[i]]
    return shaped, bad


def _counted(n: int, words: tuple[str, str]) -> str:
    return f"{n} {words[0] if n == 1 else words[1]}"


def _expected(count: int | str, dimension: int | str | None) -> str:
    """The tail of every BadVectorError message: what was done, what was expected."""
    return (
        f"; none of this batch was stored or cached (expected ({count}, {dimension}) finite "
        f"real numbers, each vector's norm at least {MIN_NORM:g} and no value beyond "
        f"+-{MAX_COMPONENT:g}: check the model or the embedding server)"
    )


def check_vectors(
    vectors: object, *, model_id: str, dimension: int | None, count: int | None = None
) -> npt.NDArray[np.float32]:
    """What an embedder returned for ``count`` inputs, as a fresh C-contiguous float32
    array ``(count, dimension)`` of usable vectors, else :class:`~rechunk.errors.
    BadVectorError` (an ``EmbeddingError``) naming ``model_id``, how many vectors of the
    batch failed and why, in one line. Every vector rechunk stores or caches passes here
    first; a batch that fails is neither stored nor cached.

    Usable: real numbers, the model's ``dimension``, finite, no value beyond
    :data:`MAX_COMPONENT` (near float32's limit, a norm or cosine overflows), and a norm
    of at least :data:`MIN_NORM` (a zero vector has no direction). Values are judged
    before the cast to float32 (a float64 too large for float32 is "beyond", not "inf"),
    and no numpy warning is raised on the way. ``dimension=None`` (a framework's model
    whose dimension is not known yet) takes the batch's width, which must be at least 1.
    """
    try:
        with np.errstate(all="ignore"):
            raw = np.asarray(vectors)
            if raw.dtype.kind not in "biuf":
                raise TypeError(f"{raw.dtype} values")
    except (TypeError, ValueError) as exc:
        raise BadVectorError(
            f"embedder {model_id!r} returned unusable output ({exc}), not rows of numbers"
            + _expected(count if count is not None else "n", dimension or "d"),
            model_id=model_id,
            total=count or 0,
        ) from None
    n = raw.shape[0] if raw.ndim >= 1 else 0
    if count is not None and (raw.ndim != 2 or n != count):
        raise BadVectorError(
            f"embedder {model_id!r} returned shape {raw.shape} for {count} inputs"
            + _expected(count, dimension or "d"),
            model_id=model_id,
            bad=count,
            total=count,
        )
    if dimension is None and raw.ndim == 2 and raw.shape[1] >= 1:
        dimension = int(raw.shape[1])
    if raw.ndim != 2 or raw.shape[1] != dimension:
        width = raw.shape[1] if raw.ndim == 2 else "?"
        wanted = "at least 1" if dimension is None else str(dimension)
        raise BadVectorError(
            f"embedder {model_id!r} returned {n} of {n} vectors with {width} values, expected "
            f"{wanted} (the model's dimension; shape {raw.shape})" + _expected(n, dimension or "d"),
            model_id=model_id,
            bad=n,
            total=n,
            reasons={"dimension": n},
        )
    judged = raw if raw.dtype.kind == "f" else raw.astype(np.float64)
    codes = _faults(judged)
    failed = codes != _OK
    if failed.any():
        present = [int(c) for c in np.unique(codes[failed])]
        tally = {c: int((codes == c).sum()) for c in present}
        bad = int(failed.sum())
        if len(present) == 1:
            why = _FAULT_WORDS[present[0]][0 if bad == 1 else 1]
        else:
            why = (
                "are unusable ("
                + ", ".join(_counted(tally[c], _FAULT_WORDS[c]) for c in present)
                + ")"
            )
        noun = "vector" if n == 1 else "vectors"
        raise BadVectorError(
            f"embedder {model_id!r}: {bad} of {n} {noun} {why}" + _expected(n, dimension),
            model_id=model_id,
            bad=bad,
            total=n,
            reasons={_FAULT_NAMES[c]: tally[c] for c in present},
        )
    with np.errstate(all="ignore"):
        out: npt.NDArray[np.float32] = np.array(judged, dtype=np.float32, order="C", copy=True)
    return out
