"""Text a model cannot read: the share of a document's text its tokenizer reads as the
unknown token (``[UNK]``).

A WordPiece model such as all-MiniLM-L6-v2 has no token for most characters of Thai,
Amharic or many Chinese words, nor for a word of more than 100 characters; such text is
embedded as ``[UNK]`` (one for a whole word: Thai, written without spaces, gives one for
a whole phrase), and its vectors find nothing. The share is counted in characters, the
text of the unknown tokens over the text of all, so a phrase weighs as its length.
``rechunk sync`` names those documents when it writes their chunks, so a person learns it
before retrieval fails.

Only a document holding a character the tokenizer maps to the unknown token, or a run of
more characters without a space than it reads as one word, is tokenized (the characters
are checked once per tokenizer), so a folder of text the model reads costs a scan of each
document's distinct characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from rechunk.chunking.tokens import HFTokenCounter, resolve_tokenizer

__all__ = ["UNKNOWN_NOTE", "UnknownTokens", "unknown_documents"]

#: the share of a document's text read as the unknown token from which it is named
UNKNOWN_NOTE = 0.1


class UnknownTokens:
    """The share of a text's characters that ``tokenizer`` reads as its unknown token.

    ``tokenizer`` is anything :func:`rechunk.chunking.tokens.resolve_tokenizer` takes; a
    tokenizer without an unknown token (byte-level BPE, a callable) gives 0 for any text.
    """

    def __init__(self, tokenizer: Any = None) -> None:
        counter = resolve_tokenizer(tokenizer)
        self._tokenizer = counter.tokenizer if isinstance(counter, HFTokenCounter) else None
        self._unk: int | None = None
        if self._tokenizer is not None:
            token = getattr(self._tokenizer.model, "unk_token", None)
            if isinstance(token, str):
                self._unk = self._tokenizer.token_to_id(token)
        self._unknown: dict[str, bool] = {}  # character -> the tokenizer maps it to the unknown
        # a word longer than WordPiece reads (its max_input_chars_per_word) is unknown whole
        longest = getattr(getattr(self._tokenizer, "model", None), "max_input_chars_per_word", 0)
        self._long = re.compile(rf"\S{{{int(longest) + 1},}}") if longest else None

    @property
    def applies(self) -> bool:
        """Whether the tokenizer has an unknown token at all."""
        return self._unk is not None

    def share(self, text: str) -> float:
        tokenizer, unk = self._tokenizer, self._unk
        if tokenizer is None or unk is None or not text:
            return 0.0
        distinct = set(text)
        new = [c for c in distinct if c not in self._unknown]
        if new:
            encoded = tokenizer.encode_batch(new, add_special_tokens=False)
            for char, encoding in zip(new, encoded):
                self._unknown[char] = unk in encoding.ids
        if not any(self._unknown[c] for c in distinct) and not (
            self._long is not None and self._long.search(text)
        ):
            return 0.0
        # in slices: a tokenizer's encoding of a whole 4 MB document took 200 bytes a byte;
        # and of a longer one, evenly spaced slices only (the share is then an estimate)
        unknown = total = 0
        for piece in _sample(text):
            encoding = tokenizer.encode(piece, add_special_tokens=False)
            for token, (start, end) in zip(encoding.ids, encoding.offsets):
                total += end - start
                if token == unk:
                    unknown += end - start
        return unknown / total if total else 0.0


#: characters tokenized at once when a document is counted
_SLICE = 1 << 16
#: slices counted of a document longer than this many of them (evenly spaced)
_SLICES = 16


def _sample(text: str) -> Iterator[str]:
    """The slices of ``text`` counted: all of them, or :data:`_SLICES` evenly spaced, each
    from the first space or line break at or after its place."""
    if len(text) <= _SLICE * _SLICES:
        yield from _slices(text, _SLICE)
        return
    step = len(text) // _SLICES
    for k in range(_SLICES):
        start = k * step
        if k:  # from a space or a line break, where there is one within a slice
            ends = start + _SLICE
            found = [
                i for i in (text.find(" ", start, ends), text.find("\n", start, ends)) if i >= 0
            ]
            start = min(found) + 1 if found else start
        yield text[start : _end(text, start, _SLICE)]


def _slices(text: str, size: int) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``size`` characters."""
    start = 0
    while start < len(text):
        end = _end(text, start, size)
        yield text[start:end]
        start = end


def _end(text: str, start: int, size: int) -> int:
    """Where a piece from ``start`` of about ``size`` characters ends: after the last space
    or line break within ``size`` where there is one (a word is never cut in two)."""
    end = min(len(text), start + size)
    if end < len(text):
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
        if cut > start:
            end = cut + 1
    return end


def unknown_documents(
    tokenizer: Any, documents: Iterable[Any], threshold: float = UNKNOWN_NOTE
) -> list[tuple[str, float]]:
    """``(doc_id, share)`` of the documents at least ``threshold`` of whose tokens are
    ``tokenizer``'s unknown token, in the order given."""
    check = UnknownTokens(tokenizer)
    if not check.applies:
        return []
    found = []
    for doc in documents:
        share = check.share(doc.text)
        if share >= threshold:
            found.append((doc.doc_id, share))
    return found
