"""Structure-aware, content-defined chunking: sections first, then content-chosen cuts."""

from __future__ import annotations

import functools
import re
import string
from typing import Any

import numpy as np
import numpy.typing as npt

from rechunk.chunkers.base import (
    CJK_SENTENCE_END,
    Analysis,
    BaseChunker,
    IntArray,
    Units,
    check_int,
    check_sizes,
    pre_token_pieces,
    refine,
)

__all__ = ["StructuredChunker"]

U64 = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

# Strength of the boundary before a unit (higher wins). FORBID is never cut.
FORBID, PIECE, WORD, CLAUSE, SENTENCE, LINE, ITEM, BLOCK, SECTION = range(9)
_LEVEL_SHIFT = 55  # key = level << 55 | 55 bits of the content hashes
_WINDOW_BITS = 20  # of those: the window's hash, then the longer context's (ties)
_CONTEXT_UNITS = 8  # units in the context that breaks ties between equal windows
_MAX_KEY = np.int64((SECTION + 1) << _LEVEL_SHIFT)
_NO_KEY = np.int64(-1)

# -- line structure (lines end at "\n"; a trailing "\r" belongs to the line) ------------------
_ORDERED_ITEM = re.compile(r"\d{1,9}[.)]")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_DIGITS = frozenset("0123456789")
_LIST, _TABLE, _QUOTE, _DIRECTIVE = 1, 2, 3, 4  # line flags


# hashing: a polynomial hash of each unit's characters, a window of unit hashes, a mixer
_MUL = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64
_MUL_INV = pow(_MUL, -1, 1 << 64)
_WINDOW_BASE = 0xD6E8FEB86659FD93
_BLOCK = 1 << 16
_POWER_STEP = 1 << 10


def _mix(x: U64) -> U64:
    """splitmix64's finaliser (a bijection that spreads every input bit)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    out: U64 = x ^ (x >> np.uint64(31))
    return out


def _powers(base: int, n: int) -> U64:
    """``base**0 .. base**(n-1)`` modulo 2**64."""
    out = np.full(n, base, dtype=np.uint64)
    out[0] = 1
    return np.cumprod(out, dtype=np.uint64)


@functools.lru_cache(maxsize=4)
def _low_powers(base: int) -> U64:
    """``base**0 .. base**(_POWER_STEP - 1)``, computed once per base."""
    table = _powers(base, _POWER_STEP)
    table.flags.writeable = False
    return table


def _powers_at(base: int, exponents: IntArray) -> U64:
    """``base**e`` modulo 2**64 for each non-negative exponent ``e``, from two short tables
    (``e = q * _POWER_STEP + r``), not one as long as the text."""
    step = pow(base, _POWER_STEP, 1 << 64)
    high = _powers(step, int(exponents.max(initial=0)) // _POWER_STEP + 1)
    out: U64 = high[exponents // _POWER_STEP] * _low_powers(base)[exponents % _POWER_STEP]
    return out


def _span_hashes(codes: npt.NDArray[np.uint32], starts: IntArray, ends: IntArray) -> U64:
    """Position-free 64-bit hashes of ``text[starts[i]:ends[i]]``, where ``codes`` are the
    text's code points: a polynomial over code point + 1, un-shifted by its start.

    Vectorised in one array of 64-bit prefix sums: 8 bytes a character.
    """
    n = len(codes)
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    terms = prefix[1:]  # _MUL**i * (codes[i] + 1), then their running sum, in place
    terms.fill(_MUL)
    terms[0] = 1
    np.multiply.accumulate(terms, out=terms)
    for block in range(0, n, _BLOCK):  # a block at a time: no second text-sized array
        terms[block : block + _BLOCK] *= codes[block : block + _BLOCK] + np.uint32(1)
    np.add.accumulate(terms, out=terms)
    raw = (prefix[ends] - prefix[starts]) * _powers_at(_MUL_INV, starts)
    return _mix(raw ^ (ends - starts).astype(np.uint64))


def _table(chars: str) -> BoolArray:
    """A membership table over the Basic Multilingual Plane."""
    table = np.zeros(0x10000, dtype=np.bool_)
    table[[ord(c) for c in chars]] = True
    return table


def _in(codes: npt.NDArray[np.uint32], table: BoolArray) -> BoolArray:
    """``codes[i]`` is one of the table's characters (vectorised; beyond the BMP: no)."""
    found: BoolArray = table[np.minimum(codes, 0xFFFF)] & (codes < 0xFFFF)
    return found


_SENTENCE_ENDERS = _table(".!?。！？")
_CLOSERS = _table("\"')]”’」』）")
_CLAUSE_ENDERS = _table(",;:，；：、")
_LINE_MARKERS = _table("`~#." + string.digits)  # first characters of marked lines
_BULLETS = _table("-*+")
_PUNCTUATION = _table(string.punctuation)


def _local_maxima(positions: IntArray, keys: IntArray, horizon: int) -> BoolArray:
    """True where a key beats every other key less than ``horizon`` tokens away.

    Ties go to the leftmost. ``positions`` are non-decreasing token offsets.
    """
    n = len(keys)
    lo = np.searchsorted(positions, positions - (horizon - 1), side="left")
    hi = np.searchsorted(positions, positions + (horizon - 1), side="right") - 1
    # sparse table for range maxima
    table = [keys]
    span = 1
    while span * 2 <= n:
        prev = table[-1]
        table.append(np.maximum(prev[: len(prev) - span], prev[span:]))
        span *= 2

    def range_max(a: IntArray, b: IntArray) -> IntArray:
        """max(keys[a..b]) inclusive; -1 where the range is empty (b < a)."""
        out = np.full(len(a), _NO_KEY, dtype=np.int64)
        ok = b >= a
        a, b = a[ok], b[ok]
        length = b - a + 1
        level = np.log2(np.maximum(length, 1)).astype(np.int64)
        level -= np.left_shift(1, level) > length  # floating-point rounding of log2
        level = level.clip(0, len(table) - 1)
        res = np.empty(len(a), dtype=np.int64)
        for j in np.unique(level).tolist():
            sel = level == j
            row = table[j]
            res[sel] = np.maximum(row[a[sel]], row[b[sel] - (1 << j) + 1])
        out[ok] = res
        return out

    idx = np.arange(n, dtype=np.int64)
    whole = range_max(lo, hi)
    left = range_max(lo, idx - 1)
    return (keys >= whole) & (left < keys)


def _line_kinds(
    analysis: Analysis, codes: npt.NDArray[np.uint32], line_starts: IntArray, li: IntArray
) -> tuple[dict[int, tuple[str, int, bool]], set[int], set[int], IntArray]:
    """Classify lines by their first word (no regex scan of the whole text).

    Returns fence lines ``{line: (char, run length, nothing else on the line)}``
    (three or more backticks or tildes after at most three spaces), lines made of
    one repeated ASCII punctuation character (possible underlines), ATX heading
    lines, and a flag per line: list item, table row, quote, directive.
    """
    starts, words = analysis.starts, analysis.words
    n = len(starts)
    flags = np.zeros(len(line_starts), dtype=np.int64)
    fences: dict[int, tuple[str, int, bool]] = {}
    runs: set[int] = set()
    atx: set[int] = set()
    if n == 0:
        return fences, runs, atx, flags
    first = np.ones(n, dtype=np.bool_)
    first[1:] = li[1:] != li[:-1]
    alone = np.ones(n, dtype=np.bool_)  # the only word on its line
    alone[:-1] = li[1:] != li[:-1]
    alone &= first
    k = np.flatnonzero(first)
    lines = li[k]
    indent = starts[k] - line_starts[lines]
    head = codes[starts[k]]
    flags[lines[head == ord("|")]] = _TABLE
    flags[lines[(head == ord(">")) & (indent <= 3)]] = _QUOTE
    length = analysis.ends[k] - starts[k]
    single = alone[k]
    bullet = ~single & (length == 1) & _in(head, _BULLETS)
    flags[lines[bullet]] = _LIST
    special = _in(head, _LINE_MARKERS) | (single & (length > 1) & _in(head, _PUNCTUATION))
    for j in np.flatnonzero(special).tolist():
        word = words[int(k[j])]
        ch = word[0]
        line = int(lines[j])
        is_alone = bool(single[j])
        if is_alone and indent[j] == 0 and ch in _ASCII_PUNCT and word.count(ch) == len(word) > 1:
            runs.add(line)
        if not is_alone and ch in _DIGITS and _ORDERED_ITEM.fullmatch(word):
            flags[line] = _LIST
        elif indent[j] > 3:
            continue
        elif ch in "`~" and word.startswith(ch * 3):
            run = len(word) - len(word.lstrip(ch))
            fences[line] = (ch, run, is_alone and run == len(word))
        elif ch == "#":
            if len(word) <= 6 and word.count("#") == len(word):
                atx.add(line)
        elif word == ".." and not is_alone and indent[j] == 0:
            flags[line] = _DIRECTIVE
    return fences, runs, atx, flags


def _refine(analysis: Analysis, splits: dict[int, list[tuple[int, int]]], exact: bool) -> Units:
    """:func:`rechunk.chunkers.base.refine`, vectorised: words, split words as pieces."""
    if not splits:
        return refine(analysis, splits, exact)
    n = len(analysis.words)
    per_word = np.ones(n, dtype=np.int64)
    split_words = sorted(splits)
    per_word[split_words] = [len(splits[i]) for i in split_words]
    word_of = np.repeat(np.arange(n, dtype=np.int64), per_word)
    starts = analysis.starts[word_of].copy()
    tokens = analysis.counts[word_of].copy()
    piece = np.zeros(len(word_of), dtype=np.bool_)
    first_unit = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_word, out=first_unit[1:])
    at = np.concatenate([np.arange(first_unit[i], first_unit[i + 1]) for i in split_words])
    offsets = [o for i in split_words for o, _ in splits[i]]
    counts = [t for i in split_words for _, t in splits[i]]
    starts[at] += np.asarray(offsets, dtype=np.int64)
    tokens[at] = counts
    piece[at] = True
    return Units(starts, tokens, word_of, piece, exact)


def _anchors(positions: IntArray, keys: IntArray, horizon: int) -> BoolArray:
    """:func:`_local_maxima` of all boundaries, computed on the few of level LINE or more.

    A boundary of a lower level is a local maximum only where no boundary of
    level LINE or more lies within ``horizon``; those (rare) stretches fall back
    to the full computation.
    """
    high = np.flatnonzero(keys >= np.int64(LINE << _LEVEL_SHIFT))
    result = np.zeros(len(keys), dtype=np.bool_)
    at = positions[high]
    result[high[_local_maxima(at, keys[high], horizon)]] = True
    after = np.searchsorted(at, positions, side="left").clip(0, len(at) - 1)
    before = (after - 1).clip(0, len(at) - 1)
    gap = np.minimum(np.abs(at[after] - positions), np.abs(positions - at[before]))
    uncovered = np.flatnonzero(gap >= horizon)
    if len(uncovered):
        # each run of uncovered boundaries, with the boundaries within `horizon` of it
        breaks = np.flatnonzero(np.diff(uncovered) > 1)
        for first, last in zip(
            uncovered[np.r_[0, breaks + 1]].tolist(), uncovered[np.r_[breaks, -1]].tolist()
        ):
            lo = int(np.searchsorted(positions, positions[first] - horizon, side="left"))
            hi = int(np.searchsorted(positions, positions[last] + horizon, side="right"))
            local = _local_maxima(positions[lo:hi], keys[lo:hi], horizon)
            result[first : last + 1] |= local[first - lo : last + 1 - lo]
    return result


class StructuredChunker(BaseChunker):
    """Sections are hard boundaries; inside them, cuts are chosen by a content hash.

    **Structure.** Lines (ending at ``\\n``) are classified once: fenced code
    blocks (a line of three or more backticks or tildes, up to a closing line of
    the same character at least as long; an unclosed fence runs to the end),
    Markdown ATX headings (``#`` to ``######`` after at most three spaces),
    underlined headings (a non-blank title line, preceded by a blank line, the
    start of the text or an overline, and followed by a line of one repeated
    punctuation character that is at least as long as the title, or at least
    three ``=`` / ``-`` characters: Markdown Setext and reStructuredText section
    titles, with or without an overline of the same character), list items,
    table rows (lines starting with ``|``), quotes and reStructuredText
    directives. Headings inside fences are code, not headings. A section runs
    from a heading to the next one; it starts one line earlier when a single
    non-blank line sits right above an ATX heading after a blank line (a label
    such as ``r[rule.id]`` or an anchor), and a heading followed by nothing but
    blank lines before the next heading stays with that heading (``# Book`` then
    ``## Chapter 1`` start one section).

    **Boundaries.** Every boundary between two units (words, or pieces of a
    word: a word is cut after every ``。！？`` inside it, and a piece of more
    than ``min_tokens`` tokens at the tokenizer's pre-tokens) gets a *level*:
    section (a heading starts here; always a cut), block (after a blank line,
    at the start or end of a fence or table), item (a list item or directive
    starts), line (a new table row, quote line, or code line of a fence too
    long to keep), sentence (after a word ending in ``.!?。！？`` plus up to
    two closing quotes or brackets), clause (after ``,;:，；：、``), word,
    piece. A line break inside prose counts as the space it replaces, so
    re-wrapping a paragraph changes no level. Never cut: inside a heading,
    right after a heading, and inside a fence or table that holds at most
    ``max_tokens`` tokens.

    **The cut rule.** Each boundary's *key* is its level, then 20 bits of a
    hash of the ``window_units`` units before it, then 35 bits of a hash of the
    (up to) 8 units before it, which break ties between boundaries that follow
    the same word, such as paragraphs that all end alike (with the leftmost
    winning every tie, such a run was cut like a greedy splitter). No hash
    reaches back past the start of its section; section starts and the two ends
    of the text have the greatest key. Chunks are chosen in two steps:

    1. *Anchors.* A boundary is an anchor iff its key is greater than the key
       of every other boundary less than ``min_tokens`` tokens away on either
       side (the leftmost wins a tie). Section starts are anchors. Whether a
       boundary is an anchor depends only on the text within ``min_tokens``
       tokens of it, inside its section; anchors are at least ``min_tokens``
       apart.
    2. *Chunks between anchors.* A span between two consecutive anchors that
       holds at most ``max_tokens`` tokens is one chunk. A longer span is cut
       from its left end: the chunk starting at boundary ``s`` ends at the
       allowed boundary with the greatest key among those that make it
       ``min_tokens`` to ``max_tokens`` tokens long; with no such boundary, at
       the best allowed boundary within ``max_tokens``; failing all, at the last
       boundary within it. The last chunk of the span takes what is left.

    So a chunk never spans two sections; structure wins over content (a
    paragraph break in the window beats every sentence end, a sentence end
    every word); chunks hold ``min_tokens`` to ``max_tokens`` tokens except
    where a section, the end of an anchor span or an unbreakable fence or
    table comes first; and an edit changes only the chunks of the anchor spans
    within ``min_tokens`` tokens of it, and of those only the chunk it falls in,
    the chunks after it, and the chunks starting less than ``max_tokens``
    tokens before it (a cut depends on nothing past ``max_tokens`` tokens from
    its chunk's start, so a chunk never moves because the end of its span did):
    every other section, and every other chunk of the same section, keeps its
    bytes. No chunk exceeds ``max_tokens``: every unit holds at most
    ``min_tokens`` tokens, and where the summed counts are not exact (a
    tokenizer that is not additive, or a piece cut inside a pre-token) the
    finished chunks are re-counted and any chunk over ``max_tokens`` is split
    near its middle at a word start until it fits.

    Defaults (frozen; for a 512-token model window): ``min_tokens=280``,
    ``max_tokens=400``, ``window_units=1``. Scaled to a smaller window as the
    other policies are (all-MiniLM-L6-v2, 254 content tokens: 138 / 198).
    """

    kind = "structured"
    # 2: chunks are cut from the left only (1 balanced an anchor span's last two), and
    # every CJK sentence end inside a word is a boundary (1: only in words over min/4 tokens)
    # 3: ties between equal windows go to the longer context's hash, not to the leftmost
    version = 3

    def __init__(
        self,
        min_tokens: int = 280,
        max_tokens: int = 400,
        tokenizer: Any = None,
        *,
        hard_max_tokens: int = 512,
        window_units: int = 1,
    ) -> None:
        check_int("window_units", window_units)
        check_sizes(hard_max_tokens, min_tokens=min_tokens, max_tokens=max_tokens)
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.window_units = window_units
        super().__init__(tokenizer, hard_max_tokens)

    @property
    def params(self) -> dict[str, int]:
        return {
            "min_tokens": self.min_tokens,
            "max_tokens": self.max_tokens,
            "hard_max_tokens": self.hard_max_tokens,
            "window_units": self.window_units,
        }

    # -- structure ----------------------------------------------------------------------------

    def _word_levels(self, analysis: Analysis, codes: npt.NDArray[np.uint32]) -> IntArray:
        """The level of the boundary before each word (word 0: SECTION)."""
        text = analysis.text
        starts, ends, counts = analysis.starts, analysis.ends, analysis.counts
        n = len(starts)
        line_starts = np.concatenate(
            ([0], np.flatnonzero(codes == 10).astype(np.int64) + 1)
        )
        n_lines = len(line_starts)
        li = np.searchsorted(line_starts, starts, side="right") - 1

        def line_text(i: int) -> str:
            end = int(line_starts[i + 1]) - 1 if i + 1 < n_lines else len(text)
            return text[int(line_starts[i]) : end].rstrip()

        fences, runs, atx, flags = _line_kinds(analysis, codes, line_starts, li)
        fence_spans: list[tuple[int, int]] = []  # (opening line, closing line) inclusive
        headings: list[tuple[int, int]] = []  # (first line, last line) inclusive
        open_line, open_char, open_len = -1, "", 0
        for ln in sorted(fences.keys() | runs | atx):
            if open_line >= 0:
                fence = fences.get(ln)
                if fence is not None:
                    char, length, bare = fence
                    if char == open_char and length >= open_len and bare:
                        fence_spans.append((open_line, ln))
                        open_line = -1
                continue
            if ln in runs and ln >= 1:
                title_line = ln - 1
                title = line_text(title_line)
                under = line_text(ln).strip()
                stripped = title.strip()
                overline = (
                    title_line >= 1
                    and title_line - 1 in runs
                    and line_text(title_line - 1).strip()[:1] == under[:1]
                )
                before_ok = title_line == 0 or overline or not line_text(title_line - 1)
                plain_title = (
                    stripped
                    and title_line not in runs
                    and title_line not in fences
                    and title_line not in atx
                    and flags[title_line] == 0
                    and (overline or len(title) - len(title.lstrip(" ")) <= 3)
                )
                long_enough = (
                    len(under) >= len(stripped) or (under[0] in "=-" and len(under) >= 3)
                ) and not (under[0] == "`" and len(under) >= 3)  # that is a fence
                if plain_title and before_ok and long_enough:
                    headings.append((title_line - 1 if overline else title_line, ln))
                    continue
            fence = fences.get(ln)
            if fence is not None:
                open_line, open_char, open_len = ln, fence[0], fence[1]
                continue
            if ln in atx:
                # a one-line label right above (``r[rule.id]``, an anchor) belongs to it
                label = (
                    ln >= 1
                    and line_text(ln - 1).strip() != ""
                    and (ln == 1 or not line_text(ln - 2).strip())
                    and not ({ln - 1} & (fences.keys() | runs | atx))
                    and flags[ln - 1] == 0
                    and not (headings and headings[-1][1] >= ln - 1)
                )
                headings.append((ln - 1 if label else ln, ln))
        if open_line >= 0:
            fence_spans.append((open_line, n_lines - 1))

        # levels from punctuation and line breaks
        last = codes[ends - 1]
        before_last = codes[np.maximum(ends - 2, starts)]
        third = codes[np.maximum(ends - 3, starts)]
        closer = _in(last, _CLOSERS)
        ends_sentence = _in(last, _SENTENCE_ENDERS) | (
            closer
            & (
                _in(before_last, _SENTENCE_ENDERS)
                | (_in(before_last, _CLOSERS) & _in(third, _SENTENCE_ENDERS))
            )
        )
        ends_clause = _in(last, _CLAUSE_ENDERS)
        levels = np.full(n, WORD, dtype=np.int64)
        levels[1:][ends_clause[:-1]] = CLAUSE
        levels[1:][ends_sentence[:-1]] = SENTENCE
        new_line = np.zeros(n, dtype=np.bool_)
        new_line[1:] = li[1:] != li[:-1]
        blank = np.zeros(n, dtype=np.bool_)
        blank[1:] = li[1:] - li[:-1] >= 2
        word_flags = flags[li]
        prev_flags = np.zeros(n, dtype=np.int64)
        prev_flags[1:] = word_flags[:-1]
        line_start_flags = np.where(new_line, word_flags, 0)
        levels[(line_start_flags == _LIST) | (line_start_flags == _DIRECTIVE)] = ITEM
        rows = (line_start_flags == _TABLE) | (line_start_flags == _QUOTE)
        levels[rows] = np.maximum(levels[rows], LINE)
        table_edge = new_line & ((word_flags == _TABLE) != (prev_flags == _TABLE))
        levels[table_edge | blank] = BLOCK

        # first word at or after the start of each line (and n after the last line)
        word_at = np.append(np.searchsorted(starts, line_starts), n).tolist()

        def words_of(first_line: int, last_line: int) -> tuple[int, int]:
            """Words of lines first_line..last_line: [lo, hi)."""
            return word_at[first_line], word_at[last_line + 1]

        prefix = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=prefix[1:])
        limit = self.max_tokens

        def keep_whole(lo: int, hi: int) -> None:
            """Words [lo, hi) form one fence or table: forbid inner cuts if it fits."""
            if hi - lo <= 1:
                return
            if prefix[hi] - prefix[lo] <= limit:
                levels[lo + 1 : hi] = FORBID
                return
            levels[lo + 1 : hi] = np.where(
                blank[lo + 1 : hi], BLOCK, np.where(new_line[lo + 1 : hi], LINE, WORD)
            )
            # no cut before the third line: an opening fence keeps two code lines, a
            # table header keeps its separator row and first row
            second = int(np.searchsorted(li[lo:hi], li[lo] + 2)) + lo
            levels[lo + 1 : min(second, hi - 1) + 1] = FORBID

        for first, last_line in fence_spans:
            lo, hi = words_of(first, last_line)
            if lo >= n:
                continue
            levels[lo] = max(int(levels[lo]), BLOCK) if new_line[lo] else levels[lo]
            keep_whole(lo, hi)
            if hi - lo > 1 and prefix[hi] - prefix[lo] > limit:
                closing = int(np.searchsorted(starts, line_starts[last_line]))
                if lo < closing < hi:
                    levels[closing] = FORBID  # never leave a closing fence on its own
            if hi < n:
                levels[hi] = BLOCK
        table_lines = flags == _TABLE
        for fence_first, fence_last in fence_spans:
            table_lines[fence_first : fence_last + 1] = False
        if table_lines.any():
            edges = np.diff(np.concatenate(([0], table_lines.astype(np.int8), [0])))
            for row_first, row_stop in zip(
                np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()
            ):
                lo, hi = words_of(row_first, row_stop - 1)
                keep_whole(lo, hi)
        previous_end = -1
        for first, last_line in headings:
            lo, hi = words_of(first, last_line)
            if lo >= n:
                continue
            # a heading with no body before the next heading stays with that heading
            levels[lo] = FORBID if lo == previous_end else SECTION
            levels[lo + 1 : hi] = FORBID
            if hi < n:
                levels[hi] = FORBID
            previous_end = hi
        levels[0] = SECTION
        return levels

    def _units(self, analysis: Analysis) -> tuple[Units, IntArray, U64, U64]:
        """Units, the level of the boundary before each unit, each unit's hash, and the
        hash of the context (up to ``_CONTEXT_UNITS`` units in its section) ending with it."""
        text = analysis.text
        codes32 = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        word_levels = self._word_levels(analysis, codes32)
        counter = self._counter
        words = analysis.words
        starts = analysis.starts
        ends = analysis.ends
        threshold = self.min_tokens
        # words to split: an inner CJK sentence end, or more tokens than min_tokens
        cjk_ends = np.asarray([m.end() for m in CJK_SENTENCE_END.finditer(text)], dtype=np.int64)
        owner = np.searchsorted(starts, cjk_ends, side="right") - 1
        inner = (owner >= 0) & (cjk_ends < ends[np.maximum(owner, 0)])
        cuts_of: dict[int, list[int]] = {}
        for end, word_index in zip(cjk_ends[inner].tolist(), owner[inner].tolist()):
            cuts_of.setdefault(word_index, []).append(end - int(starts[word_index]))
        long_words = np.flatnonzero(analysis.counts > threshold).tolist()
        # every sentence of every word to split, counted in one call
        pieces_of: list[tuple[int, int, str]] = []  # (word, offset, sentence)
        for i in sorted(cuts_of.keys() | set(long_words)):
            word = words[i]
            bounds = [0, *cuts_of.get(i, []), len(word)]
            pieces_of.extend((i, a, word[a:b]) for a, b in zip(bounds, bounds[1:]))
        counts = counter.count_many([sentence for _, _, sentence in pieces_of])
        splits: dict[int, list[tuple[int, int]]] = {}
        exact = True
        for (i, offset, sentence), count in zip(pieces_of, counts):
            pieces = splits.setdefault(i, [])
            if count <= threshold:
                pieces.append((offset, count))
                continue
            sub, ok = pre_token_pieces(counter, sentence, threshold)
            exact = exact and ok
            pieces.extend((offset + o, t) for o, t in sub)
        splits = {i: pieces for i, pieces in splits.items() if len(pieces) > 1}
        units = _refine(analysis, splits, exact)
        word_of = units.word
        u_starts = units.starts
        n = len(units)
        if not splits:
            levels = word_levels.copy()
            u_ends = ends.copy()
        else:
            levels = word_levels[word_of].copy()
            same_next = np.zeros(n, dtype=np.bool_)
            same_next[:-1] = word_of[1:] == word_of[:-1]
            u_ends = np.where(same_next, np.roll(u_starts, -1), ends[word_of])
            first_piece = np.ones(n, dtype=np.bool_)
            first_piece[1:] = ~same_next[:-1]
            inner_pieces = np.flatnonzero(~first_piece)
            before = codes32[u_starts[inner_pieces] - 1]
            before2 = codes32[np.maximum(u_starts[inner_pieces] - 2, 0)]
            inner_levels = np.where(
                _in(before, _SENTENCE_ENDERS)
                | (_in(before, _CLOSERS) & _in(before2, _SENTENCE_ENDERS)),
                SENTENCE,
                np.where(_in(before, _CLAUSE_ENDERS), CLAUSE, PIECE),
            )
            forbidden = word_levels[word_of[inner_pieces]] == FORBID
            levels[inner_pieces] = np.where(forbidden, FORBID, inner_levels)
        # each unit's hash, and the hash of the context ending with it: up to
        # _CONTEXT_UNITS units, never reaching back past the start of its section
        section = np.maximum.accumulate(np.where(levels == SECTION, np.arange(n), 0))
        context_start = u_starts[np.maximum(np.arange(n) - (_CONTEXT_UNITS - 1), section)]
        both = _span_hashes(
            codes32,
            np.concatenate((u_starts, context_start)),
            np.concatenate((u_ends, u_ends)),
        )
        return units, levels, both[:n], both[n:]

    # -- cuts ---------------------------------------------------------------------------------

    def _keys(self, levels: IntArray, hashes: U64, context: U64) -> IntArray:
        """Key of the boundary before each unit: level, then a hash of the units before it,
        then (breaking ties between equal windows) a hash of the longer context before it."""
        n = len(levels)
        section = np.maximum.accumulate(np.where(levels == SECTION, np.arange(n), 0))
        window = np.zeros(n, dtype=np.uint64)
        index = np.arange(n, dtype=np.int64)
        power = 1
        for back in range(1, min(self.window_units, n - 1) + 1):
            term = np.zeros(n, dtype=np.uint64)
            term[back:] = hashes[:-back] * np.uint64(power)
            term[index - back < section] = 0
            window += term
            power = power * _WINDOW_BASE % (1 << 64)
        before = np.zeros(n, dtype=np.uint64)
        before[1:] = context[:-1]
        low = _LEVEL_SHIFT - _WINDOW_BITS
        content = ((_mix(window) >> np.uint64(64 - _WINDOW_BITS)) << np.uint64(low)) | (
            before >> np.uint64(64 - low)
        )
        keys: IntArray = (levels << _LEVEL_SHIFT) | content.astype(np.int64)
        keys[levels == SECTION] = _MAX_KEY
        return keys

    def _chunk_starts(self, analysis: Analysis) -> tuple[Units, list[int]]:
        units, levels, hashes, context = self._units(analysis)
        prefix = units.prefix
        keys = np.append(self._keys(levels, hashes, context), _MAX_KEY)  # n: end of text
        allowed = np.append(levels >= PIECE, True)
        anchors = (_anchors(prefix, keys, self.min_tokens) & allowed) | (keys == _MAX_KEY)
        bounds = np.flatnonzero(anchors).tolist()
        starts: list[int] = []
        for a, b in zip(bounds, bounds[1:]):
            _chain(prefix, keys, allowed, a, b, self.min_tokens, self.max_tokens, starts)
        return units, starts

    @property
    def _recount_limit(self) -> int:
        """Re-counted chunks keep to ``max_tokens``, not only to the hard maximum."""
        return self.max_tokens


def _chain(
    prefix: IntArray,
    keys: IntArray,
    allowed: BoolArray,
    a: int,
    b: int,
    low: int,
    high: int,
    out: list[int],
    floor: int = 0,
) -> None:
    """Append the starts of the chunks between anchors ``a`` and ``b`` (unit indices), cut
    from the left: each chunk ends at the allowed boundary with the greatest key that makes
    it ``low`` to ``high`` tokens (else the best that makes it ``floor`` to ``high``, else
    the best within ``high``, else the last one)."""
    end = int(prefix[b])
    start = a
    while True:
        out.append(start)
        base = int(prefix[start])
        if end - base <= high:
            return
        # c in [start + 1, stop): the chunk holds at most `high` tokens
        stop = min(b, int(np.searchsorted(prefix, base + high, side="right")))
        # c >= first: it holds at least `low` tokens
        first = max(start + 1, int(np.searchsorted(prefix, base + low, side="left")))
        choice = _best(keys, allowed, first, stop)
        if choice < 0 and floor:
            least = max(start + 1, int(np.searchsorted(prefix, base + floor, side="left")))
            choice = _best(keys, allowed, least, stop)
        if choice < 0:
            choice = _best(keys, allowed, start + 1, stop)
        if choice < 0:
            choice = max(start + 1, stop - 1)
        start = choice


def _best(keys: IntArray, allowed: BoolArray, lo: int, hi: int) -> int:
    """The allowed index in [lo, hi) with the greatest key (the leftmost of equals); -1 if none."""
    if lo >= hi:
        return -1
    index = np.flatnonzero(allowed[lo:hi]) + lo
    if not len(index):
        return -1
    return int(index[int(np.argmax(keys[index]))])
