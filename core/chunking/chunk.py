"""Chunks, the chunker protocol, and the embedding-input rule shared by every chunker."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["NORMALIZATION_VERSION", "Chunk", "Chunker", "embedding_input", "tiling_problem"]

#: Version of :func:`embedding_input`; it enters every policy id.
NORMALIZATION_VERSION = "ws-v1"

_LINE_BREAKS = re.compile("\r\n?|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_OTHER_SPACE = re.compile(r"[^\S\n\t ]")
_TRAILING = re.compile(r"[ \t]+\n")
_BLANK_RUN = re.compile(r"\n{3,}")
#: the ASCII characters step 3 replaces (\r, \v, \f, \x1c-\x1f), read off the rule itself
_ASCII_OTHER_SPACE = tuple(c for c in map(chr, range(128)) if _OTHER_SPACE.match(c))


def _needs_work(text: str) -> bool:
    """Whether steps 2-5 would change ``text``. Most spans need nothing, so this is the
    common path: substring tests (C speed), with the regex scan only for non-ASCII text
    (an alternation regex costs about 15 us per 450 characters, these about 3)."""
    if " \n" in text or "\t\n" in text or "\n\n\n" in text:
        return True
    if text.isascii():
        return any(c in text for c in _ASCII_OTHER_SPACE)
    return _OTHER_SPACE.search(text) is not None


def embedding_input(span: str) -> str:
    """The exact string embedded for a span of source text (rule ``ws-v1``).

    1. strip leading and trailing whitespace;
    2. every line break (``\\r\\n``, ``\\r``, and the other characters Python's
       ``str.splitlines`` breaks at) becomes ``\\n``;
    3. every other whitespace character except tab and space (no-break space,
       ideographic space, ...) becomes a space;
    4. spaces and tabs at the end of a line are dropped;
    5. three or more consecutive ``\\n`` become two (one blank line).

    Words (runs of non-whitespace) are never changed, indentation and single
    line breaks are kept, and the result holds no whitespace but space, tab and
    ``\\n``. The same rule serves every chunker, so identical text produces the
    identical input (and the same cached vector) whatever chunker cut it.
    """
    text = span.strip()
    if not _needs_work(text):
        return text
    text = _LINE_BREAKS.sub("\n", text)
    text = _OTHER_SPACE.sub(" ", text)
    if "\n" in text:
        text = _TRAILING.sub("\n", text)
        text = _BLANK_RUN.sub("\n\n", text)
    return text


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: the half-open source span ``[start, end)`` and its embedding input.

    ``text`` is ``embedding_input(source[start:end])``; ``tokens`` is the number
    of content tokens of ``text`` under the chunker's tokenizer (no special tokens).
    """

    start: int
    end: int
    text: str
    tokens: int


@runtime_checkable
class Chunker(Protocol):
    """A stateless chunker: ``chunk`` is a function of the text and fixed parameters."""

    @property
    def policy_id(self) -> str:
        """Stable identity of the chunker, its parameters and its tokenizer."""
        ...

    @property
    def hard_max_tokens(self) -> int:
        """No chunk's embedding input exceeds this many content tokens."""
        ...

    def chunk(self, text: str) -> list[Chunk]:
        """Spans that tile ``text`` exactly, in order; no chunks for blank text."""
        ...


def tiling_problem(text: str, chunks: object, hard_max_tokens: int) -> str | None:
    """Why ``chunks`` break the :class:`Chunker` contract on ``text`` (a non-blank
    text), or None: a list of :class:`Chunk` whose spans tile ``text`` in order (no gap,
    no overlap, none empty or past its end), whose ``text`` is
    :func:`embedding_input` of its span and not empty, with a token count from 0 to
    ``hard_max_tokens``. A sync checks what a chunker of its own making did not make
    this way before it plans anything from it."""
    if not isinstance(chunks, list):
        return f"chunk() returned a {type(chunks).__name__}, not a list of Chunk"
    if not chunks:
        return "no chunks for a text that is not blank"
    at = 0
    for k, item in enumerate(chunks):
        if not isinstance(item, Chunk):
            return f"item {k} is a {type(item).__name__}, not a Chunk"
        if item.start != at:
            return (
                f"chunk {k} starts at {item.start} where the one before ended at {at} "
                "(a gap or an overlap)"
            )
        if not at < item.end <= len(text):
            return f"chunk {k} spans [{item.start}, {item.end}) of a text of {len(text)}"
        if item.text != embedding_input(text[item.start : item.end]):
            return f"chunk {k}'s text is not embedding_input(text[{item.start}:{item.end}])"
        if not item.text:
            return f"chunk {k} is whitespace only (it would embed an empty input)"
        if type(item.tokens) is not int or not 0 <= item.tokens <= hard_max_tokens:
            return f"chunk {k} counts {item.tokens!r} tokens (0 to {hard_max_tokens} allowed)"
        at = item.end
    if at != len(text):
        return f"the chunks end at {at}, the text at {len(text)}"
    return None
