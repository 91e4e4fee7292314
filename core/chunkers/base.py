"""What every chunker shares: input checks, one-pass word analysis, policy ids, finishing.

A document is split once into *words* (maximal runs of non-whitespace) and every
distinct word is counted once by the tokenizer. A chunker then works on *units*:
words, or pieces of words where a word must be cut (a run of unspaced Chinese,
a word longer than the window). It chooses the units at which chunks start;
:meth:`BaseChunker._finish` turns those into :class:`~rechunk.Chunk` objects
whose spans tile the text, and (re-counting where the sums may be inexact)
enforces the chunker's own bound, never above the hard maximum.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from rechunk.chunking.chunk import NORMALIZATION_VERSION, Chunk, embedding_input
from rechunk.chunking.tokens import TokenCounter, resolve_tokenizer
from rechunk.errors import ConfigError, InputError
from rechunk.reuse.identity import hash_fields

__all__ = [
    "CJK_SENTENCE_END",
    "Analysis",
    "BaseChunker",
    "Units",
    "check_int",
    "check_sizes",
    "check_text",
    "greedy_windows",
    "pre_token_pieces",
    "refine",
]

IntArray = npt.NDArray[np.int64]
_WHITESPACE_SPLIT = re.compile(r"(\s+)")
#: a CJK sentence end (no whitespace needed after it) with its closing quotes or brackets
CJK_SENTENCE_END = re.compile(r"[。！？][\"'”’」』）)\]]*")


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``; bools, floats and strings are refused."""
    if type(value) is not int:
        raise ConfigError(f"{name} must be an int, not {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def check_sizes(hard_max_tokens: object, **sizes: object) -> None:
    """Each size an int >= 1, never decreasing in the order given, the last within the hard max."""
    hard_max = check_int("hard_max_tokens", hard_max_tokens)
    named = [(name, check_int(name, value)) for name, value in sizes.items()]
    for (low_name, low), (high_name, high) in zip(named, named[1:]):
        if low > high:
            raise ConfigError(f"{low_name}={low} is above {high_name}={high}")
    name, value = named[-1]
    if value > hard_max:
        raise ConfigError(f"{name}={value} is above hard_max_tokens={hard_max}")


def check_text(text: object) -> str:
    """Refuse what cannot be chunked: non-str, NUL bytes, lone surrogates."""
    if not isinstance(text, str):
        raise InputError(f"text must be a str, not {type(text).__name__}")
    if "\x00" in text:
        raise InputError(f"text contains a NUL byte at offset {text.index(chr(0))}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"text contains a lone surrogate at offset {exc.start}") from exc
    return text


class Analysis:
    """A document split into words with per-word token counts (one tokenizer pass)."""

    __slots__ = ("counter", "counts", "ends", "separators", "starts", "text", "words")

    def __init__(self, text: str, counter: TokenCounter) -> None:
        parts = _WHITESPACE_SPLIT.split(text)
        lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        words: list[str] = parts[0::2]
        starts = offsets[0:-1:2]
        separators: list[str] = ["", *parts[1::2]]  # separators[i] precedes words[i]
        first = 1 if words and words[0] == "" else 0
        last = len(words) - 1 if words and words[-1] == "" else len(words)
        self.text = text
        self.words = words[first:last]
        self.separators = separators[first:last]
        self.starts: IntArray = starts[first:last].copy()
        self.ends: IntArray = self.starts + lengths[0::2][first:last]
        self.counter = counter
        counted = self.words
        if getattr(counter, "counts_whitespace", False):  # len counts the spaces too
            counted = [s + w for s, w in zip(self.separators, self.words)]
        self.counts: IntArray = np.asarray(counter.count_many(counted), dtype=np.int64)


@dataclass
class Units:
    """The sequence a chunker cuts: unit ``i`` starts at ``starts[i]`` in the source.

    ``word[i]`` is the word a unit belongs to; ``piece[i]`` is True for a unit
    that is not a whole word. ``exact`` is False when some cut went through a
    pre-token of the tokenizer, so token sums may differ from a fresh count.
    """

    starts: IntArray
    tokens: IntArray
    word: IntArray
    piece: npt.NDArray[np.bool_]
    exact: bool = True

    @property
    def prefix(self) -> IntArray:
        out = np.zeros(len(self.tokens) + 1, dtype=np.int64)
        np.cumsum(self.tokens, out=out[1:])
        return out

    def __len__(self) -> int:
        return len(self.starts)


def pre_token_pieces(
    counter: TokenCounter, word: str, limit: int
) -> tuple[list[tuple[int, int]], bool]:
    """Cut ``word`` at the tokenizer's pre-token starts: ``([(offset, tokens)], exact)``.

    A pre-token holding more than ``limit`` tokens is cut further at token starts
    every ``limit`` tokens; then ``exact`` is False (the pieces may tokenize
    differently on their own).

    Each token start normally stands for one token. Where it does not (the
    counter gives ``word`` more tokens than it has token starts: several tokens
    of one character, as byte-level BPE gives an emoji, or a ``str -> int``
    counter, whose starts are at most one per character), the text from each
    start to the next is counted and pieces are filled by those weights
    instead, so that a piece's tokens are not undercounted several times over.
    """
    token_starts = counter.token_starts(word)
    if not token_starts:
        return [(0, 0)], True
    pre: list[list[int]] = []  # [offset, tokens, index of first token]
    for k, (offset, whole) in enumerate(token_starts):
        if not pre or whole:
            pre.append([offset, 1, k])
        else:
            pre[-1][1] += 1
    if counter.count_many([word])[0] != len(token_starts):
        return _weighted_pieces(counter, word, limit, token_starts, pre)
    pieces: list[tuple[int, int]] = []
    exact = True
    for offset, tokens, k in pre:
        if tokens <= limit:
            pieces.append((offset, tokens))
            continue
        exact = False
        for j in range(k, k + tokens, limit):
            pieces.append((token_starts[j][0], min(limit, k + tokens - j)))
    return [(0, pieces[0][1]), *pieces[1:]], exact


def _weighted_pieces(
    counter: TokenCounter,
    word: str,
    limit: int,
    token_starts: list[tuple[int, bool]],
    pre: list[list[int]],
) -> tuple[list[tuple[int, int]], bool]:
    """:func:`pre_token_pieces` where token starts are not one token each.

    A pre-token weighs its own count; one over ``limit`` is cut greedily at token
    starts, each start weighing the count of the text up to the next one (at
    least 1). A piece is one start at least, so a single start heavier than
    ``limit`` is a piece of its own (and the chunk holding it is re-counted).
    """
    offsets = [offset for offset, _ in token_starts]
    ends = [*offsets[1:], len(word)]
    pre_texts = [word[offset : ends[k + tokens - 1]] for offset, tokens, k in pre]
    pre_counts = counter.count_many(pre_texts)
    heavy = [i for i, count in enumerate(pre_counts) if count > limit]
    spans = [(offsets[j], ends[j]) for i in heavy for j in range(pre[i][2], pre[i][2] + pre[i][1])]
    weights = iter(counter.count_many([word[a:b] for a, b in spans]))
    pieces: list[tuple[int, int]] = []
    exact = True
    for (offset, tokens, k), count in zip(pre, pre_counts):
        if count <= limit:
            pieces.append((offset, count))
            continue
        exact = False
        start, total = offsets[k], 0
        for j in range(k, k + tokens):
            weight = max(1, next(weights))
            if total and total + weight > limit:
                pieces.append((start, total))
                start, total = offsets[j], 0
            total += weight
        pieces.append((start, total))
    return [(0, pieces[0][1]), *pieces[1:]], exact


def refine(
    analysis: Analysis, splits: Mapping[int, Sequence[tuple[int, int]]], exact: bool
) -> Units:
    """Units from words, with the words in ``splits`` replaced by their pieces."""
    n = len(analysis.words)
    if not splits:
        return Units(
            analysis.starts.copy(),
            analysis.counts.copy(),
            np.arange(n, dtype=np.int64),
            np.zeros(n, dtype=np.bool_),
            exact,
        )
    starts: list[int] = []
    tokens: list[int] = []
    word_of: list[int] = []
    piece: list[bool] = []
    a_starts = analysis.starts.tolist()
    a_counts = analysis.counts.tolist()
    for i in range(n):
        parts = splits.get(i)
        if parts is None or len(parts) <= 1:
            starts.append(a_starts[i])
            tokens.append(a_counts[i])
            word_of.append(i)
            piece.append(False)
            continue
        for offset, count in parts:
            starts.append(a_starts[i] + offset)
            tokens.append(count)
            word_of.append(i)
            piece.append(True)
    return Units(
        np.asarray(starts, dtype=np.int64),
        np.asarray(tokens, dtype=np.int64),
        np.asarray(word_of, dtype=np.int64),
        np.asarray(piece, dtype=np.bool_),
        exact,
    )


def greedy_windows(prefix: IntArray, lo: int, hi: int, limit: int) -> list[int]:
    """Unit indices starting greedy windows of at most ``limit`` tokens over ``[lo, hi)``.

    Every unit must hold at most ``limit`` tokens on its own.
    """
    out = []
    i = lo
    while i < hi:
        out.append(i)
        j = int(np.searchsorted(prefix, prefix[i] + limit, side="right")) - 1
        i = max(i + 1, min(j, hi))
    return out


class BaseChunker(ABC):
    """Shared machinery; subclasses implement :meth:`_chunk_starts`."""

    kind: ClassVar[str]
    #: Bump when the boundaries a chunker produces for some input change.
    version: ClassVar[int] = 1

    def __init__(self, tokenizer: Any, hard_max_tokens: int) -> None:
        self._hard_max = check_int("hard_max_tokens", hard_max_tokens)
        self._counter = resolve_tokenizer(tokenizer)

    # -- identity -------------------------------------------------------------------------

    @property
    @abstractmethod
    def params(self) -> dict[str, int]:
        """The parameters that decide boundaries (hard maximum included)."""

    @property
    def hard_max_tokens(self) -> int:
        return self._hard_max

    @property
    def token_counter(self) -> TokenCounter:
        return self._counter

    @property
    def policy_id(self) -> str:
        """``<kind>-<12 hex>``: a hash of kind, version, parameters, tokenizer and normalisation."""
        fields = (
            self.kind,
            str(self.version),
            json.dumps(self.params, sort_keys=True),
            self._counter.identity,
            NORMALIZATION_VERSION,
        )
        return f"{self.kind}-{hash_fields('rechunk/policy/v1', fields)[:12]}"

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description: kind, parameters, tokenizer identity, policy id."""
        return {
            "kind": self.kind,
            "version": self.version,
            "params": self.params,
            "tokenizer": self._counter.identity,
            "policy_id": self.policy_id,
        }

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{type(self).__name__}({params})"

    # -- chunking -------------------------------------------------------------------------

    def chunk(self, text: str) -> list[Chunk]:
        """Chunks whose spans tile ``text``; ``[]`` for empty or whitespace-only text."""
        text = check_text(text)
        if not text or text.isspace():
            return []
        analysis = Analysis(text, self._counter)
        units, starts = self._chunk_starts(analysis)
        return self._finish(analysis, units, starts)

    @abstractmethod
    def _chunk_starts(self, analysis: Analysis) -> tuple[Units, list[int]]:
        """The units and the (increasing) unit indices at which chunks start; first is 0."""

    def _finish(self, analysis: Analysis, units: Units, starts: list[int]) -> list[Chunk]:
        text = analysis.text
        prefix = units.prefix
        u_starts = units.starts.tolist()
        bounds = [0, *(u_starts[i] for i in starts[1:]), len(text)]
        tokens = [int(prefix[j] - prefix[i]) for i, j in zip(starts, [*starts[1:], len(units)])]
        chunks = [
            Chunk(s, e, embedding_input(text[s:e]), t)
            for s, e, t in zip(bounds, bounds[1:], tokens)
        ]
        if units.exact and self._counter.additive:
            return chunks
        return self._recount(text, chunks)

    @property
    def _recount_limit(self) -> int:
        """The most tokens a re-counted chunk may hold before it is split again.

        A subclass returns the bound its docstring promises (``max_tokens``,
        ``target_tokens``); the hard maximum is the fallback for one that does not.
        """
        return self._hard_max

    def _recount(self, text: str, chunks: list[Chunk]) -> list[Chunk]:
        """Exact counts where the sums may be inexact; split what exceeds the limit.

        The sums decide boundaries, but with a counter that is not additive (or
        pieces cut inside a pre-token) a chunk may hold more tokens than they
        say; each such chunk is cut near its middle until it fits
        :attr:`_recount_limit`. Only the offending chunk changes.

        A chunk of a single character is never split (no tokenizer gives one
        character more tokens than any sensible limit).
        """
        counts = self._counter.count_many([c.text for c in chunks])
        limit = self._recount_limit
        out: list[Chunk] = []
        for chunk, count in zip(chunks, counts):
            if count <= limit or len(chunk.text) < 2:
                out.append(Chunk(chunk.start, chunk.end, chunk.text, count))
                continue
            cut = middle_cut(text, chunk.start, chunk.end)
            halves = [
                Chunk(s, e, embedding_input(text[s:e]), 0)
                for s, e in ((chunk.start, cut), (cut, chunk.end))
            ]
            out.extend(self._recount(text, halves))
        return out


def middle_cut(text: str, start: int, end: int) -> int:
    """A cut inside ``[start, end)`` that leaves non-whitespace on both sides."""
    first = start + (len(text[start:end]) - len(text[start:end].lstrip()))
    last = start + len(text[start:end].rstrip())  # one past the last non-space character
    middle = (first + last) // 2
    # prefer the start of a word near the middle
    for offset in range(middle, last):
        if text[offset - 1].isspace() and not text[offset].isspace():
            return offset
    for offset in range(middle, first, -1):
        if text[offset - 1].isspace() and not text[offset].isspace():
            return offset
    return max(first + 1, middle)
