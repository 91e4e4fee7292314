"""Recursive, paragraph-first chunking."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rechunk.chunkers.base import (
    CJK_SENTENCE_END,
    Analysis,
    BaseChunker,
    IntArray,
    Units,
    check_sizes,
    greedy_windows,
    pre_token_pieces,
    refine,
)

__all__ = ["RecursiveChunker"]

# Boundary strength before a unit: lower splits first.
BLOCK, LINE, SENTENCE, TOKEN = 0, 1, 2, 3

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n|\r[^\S\r\n]*\r|\r\n[^\S\n]*\r\n")
_BLOCK_START = re.compile(r"(?:#{1,6}|[-*+]|\d{1,9}[.)]|>|```.*|~~~.*|\|.*|\.\.)\Z")
_SENTENCE_END = re.compile(r"[.!?。！？][\"'”’」』）)\]]*\Z")
_CJK_TERMINATOR = re.compile("[。！？]")
_END_CHARS = frozenset(".!?。！？\"'”’」』）)]")


class RecursiveChunker(BaseChunker):
    """Paragraph-first recursive splitting with greedy packing.

    Blocks are paragraphs (separated by blank lines), Markdown headings, list
    items, quotes, table rows and fences (a line starting with ``#``, ``-``, ``*``,
    ``+``, ``1.``, ``>``, ``|`` or a fence starts a block). A span within
    ``target_tokens`` stays whole; a larger one is split at blank lines, then
    line breaks, then sentence ends (``.!?`` followed by whitespace, ``。！？``
    with or without it), then into token windows. At each level the pieces are
    packed greedily while they fit; a piece too large for the target is split at
    the next level on its own, so it also stops the packing from cascading.
    No chunk exceeds ``target_tokens``: where the summed counts are not exact (a
    tokenizer that is not additive, or a piece cut inside a pre-token) the
    finished chunks are re-counted and any chunk over ``target_tokens`` is split
    near its middle at a word start until it fits.
    """

    kind = "recursive"

    def __init__(
        self, target_tokens: int = 400, tokenizer: Any = None, *, hard_max_tokens: int = 512
    ) -> None:
        check_sizes(hard_max_tokens, target_tokens=target_tokens)
        self.target_tokens = target_tokens
        super().__init__(tokenizer, hard_max_tokens)

    @property
    def params(self) -> dict[str, int]:
        return {"target_tokens": self.target_tokens, "hard_max_tokens": self.hard_max_tokens}

    @property
    def _recount_limit(self) -> int:
        """Re-counted chunks keep to ``target_tokens``, not only to the hard maximum."""
        return self.target_tokens

    def _chunk_starts(self, analysis: Analysis) -> tuple[Units, list[int]]:
        units, levels = self._units(analysis)
        prefix = units.prefix
        starts: list[int] = []
        self._split(prefix, levels, 0, len(units), BLOCK, starts)
        return units, starts

    def _units(self, analysis: Analysis) -> tuple[Units, IntArray]:
        """Units (words, or sentence / pre-token pieces of long words) and their levels."""
        target = self.target_tokens
        counter = self._counter
        words = analysis.words
        splits: dict[int, list[tuple[int, int]]] = {}
        piece_levels: dict[int, list[int]] = {}
        exact = True
        # words that need cutting: too long, or holding a CJK sentence end before their last
        # character (found with one scan of the text, not a regex call per word)
        inner_ends = [m.start() for m in _CJK_TERMINATOR.finditer(analysis.text)]
        candidates = set((analysis.counts > target).nonzero()[0].tolist())
        if inner_ends:
            owners = np.searchsorted(analysis.ends, inner_ends, side="right")
            candidates.update(
                int(i)
                for i, pos in zip(owners, inner_ends)
                if i < len(words) and pos < analysis.ends[i] - 1
            )
        # cut candidates at their sentence ends, counting every sentence in one batch
        cut_words = []
        for i in sorted(candidates):
            word = words[i]
            cuts = [m.end() for m in CJK_SENTENCE_END.finditer(word) if m.end() < len(word)]
            bounds = [0, *cuts, len(word)]
            cut_words.append((i, bounds, [word[a:b] for a, b in zip(bounds, bounds[1:])]))
        counts = iter(counter.count_many([s for _, _, sentences in cut_words for s in sentences]))
        for i, bounds, sentences in cut_words:
            pieces: list[tuple[int, int]] = []
            levels: list[int] = []
            for offset, sentence in zip(bounds, sentences):
                count = next(counts)
                if count <= target:
                    pieces.append((offset, count))
                    levels.append(SENTENCE)
                    continue
                sub, ok = pre_token_pieces(counter, sentence, target)
                exact = exact and ok
                pieces.extend((offset + o, t) for o, t in sub)
                levels.extend([SENTENCE] + [TOKEN] * (len(sub) - 1))
            if len(pieces) > 1:
                splits[i] = pieces
                piece_levels[i] = levels
        units = refine(analysis, splits, exact)
        word_levels = self._word_levels(analysis)
        if not splits:
            levels_out = np.asarray(word_levels, dtype=np.int64)
        else:
            out: list[int] = []
            for i, level in enumerate(word_levels):
                inner = piece_levels.get(i)
                if inner is None:
                    out.append(level)
                else:
                    out.append(level)
                    out.extend(inner[1:])
            levels_out = np.asarray(out, dtype=np.int64)
        levels_out[0] = BLOCK
        return units, levels_out

    @staticmethod
    def _word_levels(analysis: Analysis) -> list[int]:
        """Strength of the boundary before each word."""
        words = analysis.words
        levels = [TOKEN] * len(words)
        for i, separator in enumerate(analysis.separators):
            if i == 0:
                levels[0] = BLOCK
            elif "\n" in separator or "\r" in separator:
                block = _BLANK_LINE.search(separator) or _BLOCK_START.match(words[i])
                levels[i] = BLOCK if block else LINE
            elif words[i - 1][-1] in _END_CHARS and _SENTENCE_END.search(words[i - 1]):
                levels[i] = SENTENCE
        return levels

    def _split(
        self, prefix: IntArray, levels: IntArray, lo: int, hi: int, level: int, out: list[int]
    ) -> None:
        """Append the chunk starts for units ``[lo, hi)``, splitting at ``level`` or finer."""
        target = self.target_tokens
        if prefix[hi] - prefix[lo] <= target:
            out.append(lo)
            return
        if level >= TOKEN:
            out.extend(greedy_windows(prefix, lo, hi, target))
            return
        inner = (levels[lo + 1 : hi] <= level).nonzero()[0] + lo + 1
        bounds = [lo, *inner.tolist(), hi]
        open_start: int | None = None  # start of the chunk being packed
        for a, b in zip(bounds, bounds[1:]):
            size = prefix[b] - prefix[a]
            if size > target:
                if open_start is not None:
                    out.append(open_start)
                    open_start = None
                self._split(prefix, levels, a, b, level + 1, out)
            elif open_start is None:
                open_start = a
            elif prefix[b] - prefix[open_start] > target:
                out.append(open_start)
                open_start = a
        if open_start is not None:
            out.append(open_start)
