"""Measurement: the recompute fraction R_c and the edit fraction, as the study defined them."""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Hashable, Iterable, Sequence

from rechunk.chunking.chunk import Chunk
from rechunk.errors import ConfigError, InputError

__all__ = [
    "DIFF_CELLS",
    "EDIT_BANDS",
    "atoms",
    "changed_blocks",
    "edit_band",
    "edit_fraction",
    "recompute_fraction",
]

#: Upper bounds of the edit bands (inclusive); anything above the last is "extreme".
EDIT_BANDS = (("small", 0.05), ("medium", 0.20), ("large", 0.50))

_CJK = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u312f\u3130-\u318f"
    "\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002fa1f\U00030000-\U0003134f"
)
_ATOM = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+|[^\w\s]")


def atoms(text: str) -> list[str]:
    """Edit atoms: words of non-CJK letters/digits, single CJK characters, and
    every other non-space character (punctuation) on its own."""
    return _ATOM.findall(text)


def edit_fraction(old_text: str, new_text: str) -> float:
    """(atoms removed + atoms added) / (old atoms + new atoms).

    Atoms are compared with ``difflib.SequenceMatcher(autojunk=False)``, after the
    atoms the two texts share at their start and end are set aside (equal texts cost
    no diff at all). Two empty texts give 0.0. The diff grows with the product of
    the lengths between the first and the last change.
    """
    if not isinstance(old_text, str) or not isinstance(new_text, str):
        raise InputError("edit_fraction takes two str")
    a, b = atoms(old_text), atoms(new_text)
    if not a and not b:
        return 0.0
    if a == b:
        return 0.0
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    changed = 0
    matcher = difflib.SequenceMatcher(
        None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed += (i2 - i1) + (j2 - j1)
    return changed / (len(a) + len(b))


#: The largest diff handed to difflib in one piece, in cells (old items x new items).
#: difflib's SequenceMatcher is quadratic where items repeat (blank lines, common words):
#: a larger middle is first split at anchors (see :func:`changed_blocks`).
DIFF_CELLS = 4_000_000


def changed_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int, int, int]]:
    """The blocks ``(i1, i2, j1, j2)`` where ``a[i1:i2]`` was replaced by ``b[j1:j2]`` (one of
    them may be empty), in order, in time near-linear in ``len(a) + len(b)``.

    Two sequences of at most :data:`DIFF_CELLS` cells (``len(a) * len(b)``) get exactly
    the non-equal opcodes of ``difflib.SequenceMatcher(None, a, b, autojunk=False)``.
    Larger ones: the items the two share at their start and end are set aside, and a
    middle still over the limit is split at anchors: items that occur exactly once in
    each side's middle, in the longest run that keeps their order in both (patience
    diff); each part between anchors is compared the same way. A part over the limit
    with no anchor counts as wholly replaced. So above the limit the blocks can differ
    from difflib's and be larger (the bound: every item outside a block is still paired
    with an equal item, and a block never spans an anchor).
    """
    blocks: list[tuple[int, int, int, int]] = []
    stack = [(0, len(a), 0, len(b))]
    while stack:
        i1, i2, j1, j2 = stack.pop()
        if (i2 - i1) * (j2 - j1) > DIFF_CELLS:
            while i1 < i2 and j1 < j2 and a[i1] == b[j1]:
                i1, j1 = i1 + 1, j1 + 1
            while i2 > i1 and j2 > j1 and a[i2 - 1] == b[j2 - 1]:
                i2, j2 = i2 - 1, j2 - 1
        if i1 == i2 and j1 == j2:
            continue
        if i1 == i2 or j1 == j2:
            blocks.append((i1, i2, j1, j2))
            continue
        if (i2 - i1) * (j2 - j1) <= DIFF_CELLS:
            matcher = difflib.SequenceMatcher(None, a[i1:i2], b[j1:j2], autojunk=False)
            blocks.extend(
                (i1 + x1, i1 + x2, j1 + y1, j1 + y2)
                for tag, x1, x2, y1, y2 in matcher.get_opcodes()
                if tag != "equal"
            )
            continue
        anchors = _anchors(a, i1, i2, b, j1, j2)
        if not anchors:
            blocks.append((i1, i2, j1, j2))
            continue
        parts = []
        start_i, start_j = i1, j1
        for i, j in anchors:
            parts.append((start_i, i, start_j, j))
            start_i, start_j = i + 1, j + 1
        parts.append((start_i, i2, start_j, j2))
        stack.extend(reversed(parts))
    blocks.sort()
    return blocks


def _anchors(
    a: Sequence[Hashable], i1: int, i2: int, b: Sequence[Hashable], j1: int, j2: int
) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of items unique in ``a[i1:i2]`` and in ``b[j1:j2]`` with
    ``a[i] == b[j]``, the longest subsequence increasing in both (patience sorting)."""
    seen_a: dict[Hashable, int] = {}
    for i in range(i1, i2):
        seen_a[a[i]] = -1 if a[i] in seen_a else i
    seen_b: dict[Hashable, int] = {}
    for j in range(j1, j2):
        seen_b[b[j]] = -1 if b[j] in seen_b else j
    pairs = [
        (i, seen_b[item])
        for item, i in seen_a.items()
        if i >= 0 and seen_b.get(item, -1) >= 0
    ]
    pairs.sort()
    # longest increasing subsequence of the j's (pairs are sorted by i)
    tails: list[int] = []  # index into pairs of the smallest tail of each length
    tail_js: list[int] = []  # the j of each of those tails (increasing)
    back: list[int] = []
    for index, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tail_js, j)
        back.append(tails[at - 1] if at else -1)
        if at == len(tails):
            tails.append(index)
            tail_js.append(j)
        else:
            tails[at] = index
            tail_js[at] = j
    chain: list[tuple[int, int]] = []
    index = tails[-1] if tails else -1
    while index >= 0:
        chain.append(pairs[index])
        index = back[index]
    return chain[::-1]


def edit_band(fraction: float) -> str:
    """``small`` (<= 5%), ``medium`` (<= 20%), ``large`` (<= 50%) or ``extreme``."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise ConfigError(f"edit fraction must be a number, not {fraction!r}")
    if not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"edit fraction must lie in [0, 1], got {fraction}")
    for name, bound in EDIT_BANDS:
        if fraction <= bound:
            return name
    return "extreme"


def recompute_fraction(old_chunks: Iterable[Chunk], new_chunks: Iterable[Chunk]) -> float:
    """R_c: the token share of the new version's distinct inputs that the old one lacks.

    Inputs are compared byte for byte (``Chunk.text``, the embedding input);
    duplicates within a version count once; tokens are the chunk's model tokens.
    A new version with no inputs costs nothing (0.0); old versus old is exactly 0.
    """
    old_list, new_list = list(old_chunks), list(new_chunks)
    if not all(isinstance(chunk, Chunk) for chunk in (*old_list, *new_list)):
        raise InputError("recompute_fraction takes two iterables of Chunk")
    old = {chunk.text for chunk in old_list}
    distinct: dict[str, int] = {}
    for chunk in new_list:
        distinct.setdefault(chunk.text, chunk.tokens)
    total = sum(distinct.values())
    if total == 0:
        return 0.0
    fresh = sum(tokens for text, tokens in distinct.items() if text not in old)
    return fresh / total
