"""What every parser yields: text, blocks that are spans of it, and where they came from."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rechunk.document import RANGED_LOCATOR_KEYS
from rechunk.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

    from rechunk.sources.registry import ParseOptions

__all__ = [
    "BLOCK_KINDS",
    "HOW_READ_KEYS",
    "RANGED_LOCATOR_KEYS",
    "Block",
    "Locator",
    "NoTextError",
    "ParseError",
    "Parsed",
    "Parser",
    "TextBuilder",
    "error_kind",
    "locate",
]

BLOCK_KINDS = ("heading", "paragraph", "list_item", "table", "code", "quote")


class ParseError(InputError):
    """A file that cannot be parsed (encrypted, corrupt, no text layer, not the format its
    name says). The message is one line and names the reason; the file is skipped.

    ``path``, where given, starts the message (``PATH: reason``); :attr:`reason` is the
    message without it, for a report that names the file its own way."""

    def __init__(self, reason: str, path: str | Path | None = None) -> None:
        super().__init__(reason if path is None else f"{path}: {reason}")
        self.reason = reason


class NoTextError(ParseError):
    """A file that parses but holds no text to read: a page whose content is a script's
    empty box, a deck of pictures, a workbook of empty sheets. It is an empty document, not
    a failure: a sync lists it as ``empty``, as it lists a file of 0 bytes (its chunks are
    removed with ``--prune``). A parser's :meth:`~Parser.parse` raises it (there is no
    document to return); :func:`~rechunk.sources.documents_from_file` gives no document."""

    def __init__(self, reason: str = "no text", path: str | Path | None = None) -> None:
        super().__init__(reason, path)


def error_kind(exc: BaseException) -> str:
    """What a library's exception was, never what it says: its class, and where in the
    input a syntax error lies. A parser's message may quote the file (libxml2 quotes the
    text around a fault, Python's idna codec the label it failed on), and a reason is
    printed, logged and sent in ``--json``, where no document text may go."""
    name = type(exc).__name__
    if name == "error":  # zlib's, binascii's, struct's: "(error)" said nothing
        name = f"{type(exc).__module__}.error"
    where = getattr(exc, "position", None)
    if isinstance(where, tuple) and len(where) == 2 and all(type(n) is int for n in where):
        return f"{name} at line {where[0]}, column {where[1]}"
    return name


@dataclass(frozen=True)
class Block:
    """One block of a parsed text: ``text[start:end]`` is its span.

    ``level`` is a heading's level (1-6; 0 for other kinds). ``locator`` says where the
    block is in the source, in JSON values a reader can cite: ``{"page": 3}`` (1-based),
    ``{"slide": 2}``, ``{"sheet": "Q3", "row": 14}``, ``{"cell": 5}``, ``{"line": 40}``;
    a block that spans several pages (or lines) gives ``[first, last]`` instead of one int.

    ``pieces`` says where inside such a block its locator changes: ``(offset, locator)``
    pairs in text order, the first at ``start``, each piece's locator holding from its
    offset to the next piece's (``{"page": 1}`` up to the page break, ``{"page": 2}``
    after it). A span of the block then cites what its own characters lie on: a chunk
    that starts after the break in a paragraph joined across it is on page 2 only. Empty
    when the whole block has one locator.
    """

    kind: str
    start: int
    end: int
    level: int = 0
    locator: Mapping[str, Any] = field(default_factory=dict)
    pieces: tuple[tuple[int, Mapping[str, Any]], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise ValueError(f"block kind {self.kind!r} is not one of {BLOCK_KINDS}")
        if not 0 <= self.start <= self.end:
            raise ValueError(f"block span [{self.start}, {self.end}) is not a span")
        offsets = [offset for offset, _ in self.pieces]
        if offsets and (
            offsets[0] != self.start
            or offsets[-1] >= self.end
            or any(a >= b for a, b in zip(offsets, offsets[1:]))
        ):
            raise ValueError(
                f"block pieces {offsets} do not cut the span [{self.start}, {self.end}) in order"
            )


@dataclass(frozen=True)
class Parsed:
    """One document parsed from a file.

    ``parser`` and ``version`` name what produced the text (``version`` includes the
    third-party library's version, so a payload tells which build made a record).
    ``part`` is ``None`` for a whole file, or a record's id when one file holds many
    documents (JSON, JSONL). ``metadata``: JSON values the format states about the
    document (a title, an e-mail's subject and date), stored beside every chunk and
    never embedded.
    """

    text: str
    blocks: tuple[Block, ...]
    parser: str
    version: str
    part: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        last = 0
        for block in self.blocks:
            if block.start < last or block.end > len(self.text):
                raise ValueError(
                    f"{self.parser}: blocks must be in order, apart and inside the text "
                    f"([{block.start}, {block.end}) after {last}, text of {len(self.text)})"
                )
            last = block.end


class Parser(Protocol):
    """A parser for one format: bytes in, documents out. Stateless and deterministic."""

    name: str
    suffixes: tuple[str, ...]

    def version(self) -> str:
        """``name/N`` and the third-party library's name and version it runs on."""
        ...

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        """The documents in ``data``; a :class:`ParseError` when there is none to read."""
        ...


_SPACE = re.compile(r"\s+")
# a paragraph that starts like Markdown structure would be read as structure: escape it
_LOOKS_STRUCTURAL = re.compile(r"(?:#{1,6}(?:\s|$)|>|\||[-*+]\s|\d{1,9}[.)]\s|```|~~~)")
#: the characters of scripts written without spaces between words, where a line may break
#: between any two characters (Chinese and Japanese: Han, kana, bopomofo, CJK punctuation,
#: full-width forms). Not Hangul: Korean puts spaces between words.
UNSPACED = (
    "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
)
# a line break (with the spaces around it) between two such characters
_UNSPACED_BREAK = re.compile(f"(?<=[{UNSPACED}])[^\\S\n]*\n\\s*(?=[{UNSPACED}])")


def clean_inline(text: str) -> str:
    """One line of running text: whitespace runs become one space, none at the ends, and
    a line break between two Chinese or Japanese characters becomes nothing (a line
    break inside Chinese is no space). Spaces the text has are kept in every script."""
    return _SPACE.sub(" ", _UNSPACED_BREAK.sub("", text)).strip()


_VISIBLE = re.compile(r"\S")


class TextBuilder:
    """Writes the Markdown-shaped text of a parsed document and records its blocks.

    Blocks are separated by a blank line; consecutive list items and table rows by one
    line break. Inline text is cleaned with :func:`clean_inline`; a block that is empty
    after cleaning is dropped, so an empty element never yields an empty block.

    ``pieces`` (headings, paragraphs, list items, quotes, code) are ``(offset, locator)``
    pairs with offsets into the ``text`` given, where its locator changes (a paragraph
    joined across a page break: where each page's part starts); the builder carries them
    through the cleaning and the block's markup into :attr:`Block.pieces`.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._blocks: list[Block] = []
        self._last_kind: str | None = None

    def _add(
        self,
        kind: str,
        body: str,
        level: int,
        locator: Mapping[str, Any],
        pieces: Sequence[tuple[int, Mapping[str, Any]]] = (),
    ) -> None:
        """Append a block; ``pieces``' offsets are into ``body``."""
        if self._parts:
            joined = kind in ("list_item",) and self._last_kind == kind
            sep = "\n" if joined else "\n\n"
            self._parts.append(sep)
            self._length += len(sep)
        start = self._length
        self._parts.append(body)
        self._length += len(body)
        cut: list[tuple[int, Mapping[str, Any]]] = []
        for index, (offset, where) in enumerate(pieces):
            at = start if index == 0 else min(start + offset, self._length)
            if cut and at <= cut[-1][0]:
                cut.pop()  # the piece before holds no character
            if at < self._length:
                cut.append((at, dict(where)))
        block = Block(kind, start, self._length, level, dict(locator), tuple(cut))
        self._blocks.append(block)
        self._last_kind = kind

    @staticmethod
    def _pieces(
        raw: str, clean: str, prefix: str, pieces: Sequence[tuple[int, Mapping[str, Any]]]
    ) -> list[tuple[int, Mapping[str, Any]]]:
        """``pieces``, offsets into ``raw`` in order, as offsets into ``prefix + clean``,
        where ``clean`` is ``raw`` with whitespace collapsed, dropped or stripped and
        nothing else (what :func:`clean_inline` and ``strip`` do): a piece starts at the
        character of ``clean`` after as many visible ones as ``raw`` has before it. A
        piece after the first with no character left in ``clean`` is dropped."""
        if not pieces:
            return []
        visible = [match.start() for match in _VISIBLE.finditer(clean)]
        cut = []
        seen = last = 0  # the visible characters of raw[:last]
        for index, (offset, where) in enumerate(pieces):
            offset = max(offset, last)
            seen += len(_VISIBLE.findall(raw, last, offset))
            last = offset
            at = visible[seen] if seen < len(visible) else len(clean)
            if index == 0 or at < len(clean):
                cut.append((len(prefix) + at, where))
        return cut

    def heading(
        self,
        text: str,
        level: int = 1,
        *,
        pieces: Sequence[tuple[int, Mapping[str, Any]]] = (),
        **locator: Any,
    ) -> None:
        body = clean_inline(text)
        if body:
            level = min(max(level, 1), 6)
            prefix = "#" * level + " "
            cut = self._pieces(text, body, prefix, pieces)
            self._add("heading", prefix + body, level, locator, cut)

    def paragraph(
        self, text: str, *, pieces: Sequence[tuple[int, Mapping[str, Any]]] = (), **locator: Any
    ) -> None:
        body = clean_inline(text)
        if body:
            prefix = "\\" if _LOOKS_STRUCTURAL.match(body) else ""
            cut = self._pieces(text, body, prefix, pieces)
            self._add("paragraph", prefix + body, 0, locator, cut)

    def list_item(
        self,
        text: str,
        depth: int = 0,
        ordered: int | None = None,
        *,
        pieces: Sequence[tuple[int, Mapping[str, Any]]] = (),
        **locator: Any,
    ) -> None:
        body = clean_inline(text)
        if body:
            marker = f"{ordered}." if ordered is not None else "-"
            prefix = "  " * max(depth, 0) + marker + " "
            cut = self._pieces(text, body, prefix, pieces)
            self._add("list_item", prefix + body, 0, locator, cut)

    def table(self, rows: Iterable[Sequence[str]], **locator: Any) -> None:
        lines = []
        for row in rows:
            cells = [clean_inline(cell).replace("|", "\\|") for cell in row]
            if any(cells):
                lines.append("| " + " | ".join(cells) + " |")
        if lines:
            self._add("table", "\n".join(lines), 0, locator)

    def code(
        self,
        text: str,
        language: str = "",
        *,
        pieces: Sequence[tuple[int, Mapping[str, Any]]] = (),
        **locator: Any,
    ) -> None:
        body = text.strip("\n")
        if body.strip():
            fence = "````" if "```" in body else "```"
            prefix = f"{fence}{language}\n"
            cut = self._pieces(text, body, prefix, pieces)
            self._add("code", f"{prefix}{body}\n{fence}", 0, locator, cut)

    def quote(
        self, text: str, *, pieces: Sequence[tuple[int, Mapping[str, Any]]] = (), **locator: Any
    ) -> None:
        body = clean_inline(text)
        if body:
            cut = self._pieces(text, body, "> ", pieces)
            self._add("quote", "> " + body, 0, locator, cut)

    @property
    def empty(self) -> bool:
        return not self._parts

    def build(
        self,
        parser: str,
        version: str,
        *,
        part: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Parsed:
        """The document written so far (``text`` ends with one line break)."""
        text = "".join(self._parts)
        if text:
            text += "\n"
        return Parsed(text, tuple(self._blocks), parser, version, part, dict(metadata or {}))

    def text_document(
        self, parser: str, version: str, read: Mapping[str, str], title: str | None
    ) -> list[Parsed]:
        """The one document a markup parser (AsciiDoc, Org, LaTeX) wrote: its metadata is
        how its bytes were decoded (``read``) and its ``title``, if it has one; a document
        with no text is a :class:`NoTextError`."""
        if self.empty:
            raise NoTextError()
        metadata: dict[str, Any] = dict(read)
        if title is not None:
            metadata["title"] = title
        return [self.build(parser, version, metadata=metadata)]


#: a locator's singular key -> its range key (:data:`RANGED_LOCATOR_KEYS`)
_RANGED = {
    "page": "pages",
    "slide": "slides",
    "line": "lines",
    "cell": "cells",
    "row": "rows",
    "chapter": "chapters",
}
#: the metadata keys that say how a file was read (its format, the parser and its version,
#: the text encoding a file was decoded from, a CSV's delimiter), not what the file says: a
#: framework's node shows them neither to its embedder nor to an LLM
HOW_READ_KEYS = ("format", "parser", "encoding", "delimiter")


#: a line of one punctuation character repeated: a setext underline or an RST adornment
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*")
#: an ATX heading (one line): its opening ``#`` run, and a closing one after a space
_ATX = re.compile(r"#+(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")


def heading_title(source: str) -> str:
    """A heading's title as a reader names it, from its source: an ATX heading's text
    without its ``#`` marks (``# C#`` is ``C#``), an underlined title's lines without their
    adornment (``Title``, not ``Title\\n=====``); anything else as written."""
    lines = [line.strip() for line in source.strip().splitlines()]
    if not lines:
        return ""
    if len(lines) == 1:
        atx = _ATX.fullmatch(lines[0])
        return (atx.group(1) or "") if atx else lines[0]
    words = [line for line in lines if line and not _ADORNMENT.fullmatch(line)]
    return " ".join(words) or lines[0]


def locate(parsed: Parsed, start: int, end: int) -> dict[str, Any]:
    """Where ``parsed.text[start:end]`` is in the source, for a reader to cite.

    ``section``: the heading path in force at ``start`` (when the text has headings);
    ``pages`` / ``slides`` / ``lines`` / ``cells`` / ``rows`` / ``chapters``:
    ``[first, last]`` over the blocks the span overlaps (over the pieces it overlaps of a
    block cut into :attr:`Block.pieces`); other locator keys (a sheet, a
    record) from the first block it overlaps; ``record`` is the part's id for a document
    from a file of records. For many spans of one document use :class:`Locator`, which
    finds each in time logarithmic in its blocks.
    """
    return Locator(parsed)(start, end)


class Locator:
    """:func:`locate` for one parsed document, its blocks indexed once: a document's
    locator is asked once per chunk, and each answer scanned the blocks from the start,
    so a sync of a 20 MB file (32,000 chunks) spent minutes planning, and every no-op
    re-sync as long."""

    def __init__(self, parsed: Parsed) -> None:
        self.parsed = parsed
        blocks = parsed.blocks
        # blocks are in order and apart (Parsed checks it), so their ends are in order too
        self._ends = [block.end for block in blocks]
        self._heading_starts: list[int] = []
        self._sections: list[list[str]] = []  # the heading path from each heading on
        path: list[tuple[int, str]] = []
        for block in blocks:
            if block.kind == "heading":
                while path and path[-1][0] >= block.level:
                    path.pop()
                title = heading_title(parsed.text[block.start : block.end])
                path.append((block.level, title))
                self._heading_starts.append(block.start)
                self._sections.append([name for _, name in path])

    def __call__(self, start: int, end: int) -> dict[str, Any]:
        parsed = self.parsed
        found: dict[str, Any] = {}
        heading = bisect.bisect_right(self._heading_starts, start) - 1  # the last at or before
        if heading >= 0 and self._sections[heading]:
            found["section"] = list(self._sections[heading])
        ranges: dict[str, list[int]] = {}
        first = bisect.bisect_left(self._ends, start)  # the blocks before end before start
        for block in parsed.blocks[first:]:
            if block.end <= start and not (block.start == block.end == start):
                continue
            if block.start >= end:
                break
            for key, value in self._where(block, start, end).items():
                name = _RANGED.get(key)
                if name:  # an int, or [first, last] for a block that spans several
                    values = value if isinstance(value, (list, tuple)) else [value]
                    lo_hi = ranges.setdefault(name, [min(values), max(values)])
                    lo_hi[0], lo_hi[1] = min(lo_hi[0], *values), max(lo_hi[1], *values)
                else:
                    found.setdefault(key, value)
        found.update(ranges)
        if parsed.part is not None:
            found["record"] = parsed.part
        return found

    @staticmethod
    def _where(block: Block, start: int, end: int) -> Mapping[str, Any]:
        """The locator of ``block`` for the span's characters in it: the block's own, or,
        for a block cut into pieces, the pieces the span overlaps merged over it (a
        chunk that starts after a page break inside a paragraph is not on the page
        before)."""
        if not block.pieces:
            return block.locator
        merged: dict[str, Any] = {}
        ranges: dict[str, list[Any]] = {}
        bounds = [offset for offset, _ in block.pieces[1:]] + [block.end]
        for (offset, where), stop in zip(block.pieces, bounds):
            if stop <= start:
                continue  # pieces are never empty
            if offset >= end and not offset == end == start:  # a point cites the piece it opens
                break
            for key, value in where.items():
                if key in _RANGED:
                    ranges.setdefault(key, []).extend(
                        value if isinstance(value, (list, tuple)) else [value]
                    )
                else:
                    merged.setdefault(key, value)
        for key, value in block.locator.items():
            merged.setdefault(key, value)
        for key, values in ranges.items():
            merged[key] = [min(values), max(values)]
        return merged or block.locator
