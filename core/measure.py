"""Measurement: the recompute fraction R_c and the edit fraction, as the study defined them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from rechunk.chunk import Chunk
from rechunk.errors import ConfigError

__all__ = ["EDIT_BANDS", "atoms", "edit_band", "edit_fraction", "recompute_fraction"]

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
    old = {chunk.text for chunk in old_chunks}
    distinct: dict[str, int] = {}
    for chunk in new_chunks:
        distinct.setdefault(chunk.text, chunk.tokens)
    total = sum(distinct.values())
    if total == 0:
        return 0.0
    fresh = sum(tokens for text, tokens in distinct.items() if text not in old)
    return fresh / total
