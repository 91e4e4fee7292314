"""Fixed-size windows: the study's baseline."""

from __future__ import annotations

from typing import Any

from rechunk.chunkers.base import (
    Analysis,
    BaseChunker,
    Units,
    check_sizes,
    greedy_windows,
    pre_token_pieces,
    refine,
)

__all__ = ["FixedChunker"]


class FixedChunker(BaseChunker):
    """Greedy, non-overlapping windows of at most ``max_tokens`` tokens.

    Windows are filled word by word and cut at the first token of a word; a word
    longer than the window on its own is cut at its pre-token starts (then at
    token starts). With a tokenizer whose counts do not add up over words (or a
    word cut inside a pre-token) every chunk is re-counted, and one over
    ``max_tokens`` is cut near its middle at a word start until it fits. No
    overlap: the study found 10-20% overlap re-embedded as much and retrieved less.
    """

    kind = "fixed"

    def __init__(
        self, max_tokens: int = 304, tokenizer: Any = None, *, hard_max_tokens: int = 512
    ) -> None:
        check_sizes(hard_max_tokens, max_tokens=max_tokens)
        self.max_tokens = max_tokens
        super().__init__(tokenizer, hard_max_tokens)

    @property
    def params(self) -> dict[str, int]:
        return {"max_tokens": self.max_tokens, "hard_max_tokens": self.hard_max_tokens}

    @property
    def _recount_limit(self) -> int:
        """Re-counted chunks keep to ``max_tokens``, not only to the hard maximum."""
        return self.max_tokens

    def _chunk_starts(self, analysis: Analysis) -> tuple[Units, list[int]]:
        limit = self.max_tokens
        splits = {}
        exact = True
        for i in (analysis.counts > limit).nonzero()[0].tolist():
            splits[i], ok = pre_token_pieces(self._counter, analysis.words[i], limit)
            exact = exact and ok
        units = refine(analysis, splits, exact)
        return units, greedy_windows(units.prefix, 0, len(units), limit)
