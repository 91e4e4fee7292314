"""Plain text, Markdown and reStructuredText: the file's own text, and the blocks in it.

These parsers never rewrite the text: it is the file's bytes decoded by the rule of
:mod:`rechunk.sources.encoding`, which code and CSV files share (a byte-order mark,
else UTF-8, else the encoding the user named; what none decodes, or a NUL byte, is a
:class:`ParseError`), so a collection synced before the parsers existed keeps every
chunk and re-embeds nothing. An empty or blank file gives one document with no blocks
(the caller counts it as empty, as before).

Blocks are spans of that text, from the first to the last non-blank character of the
block's lines:

* **text**: a paragraph per run of non-blank lines (paragraphs end at blank lines).
* **markdown**: CommonMark's blocks from markdown-it-py's block parser (its ``map`` of
  line ranges, with GFM tables): headings with their level (ATX and setext), paragraphs,
  list items (a nested item is a block of its own; an item's first paragraph is part of
  it), fenced and indented code, a quote's paragraphs, tables, HTML blocks (as
  paragraphs). YAML (``---``) and TOML (``+++``) front matter is no block. Without
  markdown-it-py (the ``formats`` extra) the text is the same and has no blocks.
* **rst**: section titles by their adornment (a title line under a line of one repeated
  punctuation character at least as wide as the title, optionally with the same line
  above it; levels in the order the styles first appear, as docutils assigns them),
  transitions (no block), literal blocks after ``::`` and ``code-block`` / ``code`` /
  ``sourcecode`` directives (code), grid and simple tables, bullet and enumerated list
  items, indented paragraphs (quotes) and paragraphs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rechunk._optional import require
from rechunk.errors import MissingDependencyError
from rechunk.sources.base import Block, Parsed
from rechunk.sources.encoding import decode_text  # its home before the module (a public name)
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = [
    "MarkdownItem",
    "MarkdownParser",
    "RstParser",
    "TextParser",
    "decode_text",
    "markdown_items",
]

# the line breaks markdown-it's normaliser knows; every line analysis here uses them too
_NEWLINE = re.compile(r"\r\n?|\n")


def _lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each line (``end`` before its line break); a final line break
    ends the last line (no empty line after it), as markdown-it counts lines."""
    spans = []
    pos = 0
    for match in _NEWLINE.finditer(text):
        spans.append((pos, match.start()))
        pos = match.end()
    if pos < len(text):
        spans.append((pos, len(text)))
    return spans


def _span(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _blocks(
    text: str, lines: Sequence[tuple[int, int]], found: Sequence[tuple[str, int, int, int]]
) -> tuple[Block, ...]:
    """Blocks from ``(kind, first line, end line, level)`` in document order: a block that
    holds the next one (a list item and its nested list) ends where the next one starts;
    blocks left empty are dropped."""
    blocks: list[Block] = []
    spans = []
    for kind, first, end_line, level in found:
        if first >= len(lines) or end_line <= first:
            continue
        end_line = min(end_line, len(lines))
        spans.append((kind, lines[first][0], lines[end_line - 1][1], level))
    for i, (kind, start, end, level) in enumerate(spans):
        if i + 1 < len(spans):
            end = min(end, spans[i + 1][1])
        if blocks:
            start = max(start, blocks[-1].end)
        start, end = _span(text, start, end)
        if start < end:
            blocks.append(Block(kind, start, end, level))
    return tuple(blocks)


def _document(
    text: str, blocks: tuple[Block, ...], parser: str, version: str, read: dict[str, str]
) -> list[Parsed]:
    """The one document of a text file; ``read``: how its bytes were decoded (metadata)."""
    return [Parsed(text, blocks, parser, version, metadata=read)]


# -- plain text ---------------------------------------------------------------------------


class TextParser:
    """Plain text: the file's text unchanged; a paragraph per run of non-blank lines."""

    name = "text"
    suffixes = FORMATS["text"][1]

    def version(self) -> str:
        return "text/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        lines = _lines(text)
        found = []
        first = None
        for i, (start, end) in enumerate([*lines, (0, 0)]):
            blank = i == len(lines) or text[start:end].isspace() or start == end
            if blank and first is not None:
                found.append(("paragraph", first, i, 0))
                first = None
            elif not blank and first is None:
                first = i
        return _document(text, _blocks(text, lines, found), self.name, self.version(), read)


# -- Markdown -----------------------------------------------------------------------------


@dataclass
class MarkdownItem:
    """One block markdown-it found: ``kind`` (a block kind, or ``"html"`` for an HTML
    block), its lines ``[first, end)``, a heading's ``level``, a list item's ``depth`` (0
    at the top) and ``number`` (ordered lists), a code block's ``language``, the block's
    ``content`` (a heading's or paragraph's inline source, a code block's text, a list
    item's first paragraph, an HTML block's markup) and a table's ``rows`` of cells."""

    kind: str
    first: int
    end: int
    level: int = 0
    depth: int = 0
    number: int | None = None
    language: str = ""
    content: str = ""
    rows: list[list[str]] = field(default_factory=list)


_FRONT_MATTER = re.compile(r"(---|\+\+\+)[ \t]*(?:\r\n?|\n)")
_FRONT_MATTER_LINES = 200  # a closing line further down: the "---" was a thematic break


def _blank_front_matter(text: str) -> str:
    """``text`` with YAML (``---``) or TOML (``+++``) front matter made blank lines (line
    numbers kept), so that its lines are no block (``---`` would read as a heading)."""
    opening = _FRONT_MATTER.match(text)
    if not opening:
        return text
    closers = ("---", "...") if opening.group(1) == "---" else ("+++",)
    pos = opening.end()
    for n, match in enumerate(_NEWLINE.finditer(text, pos)):
        if n >= _FRONT_MATTER_LINES:
            break
        if text[pos : match.start()].rstrip() in closers:
            breaks = len(_NEWLINE.findall(text, 0, match.end()))
            return "\n" * breaks + text[match.end() :]
        pos = match.end()
    return text


_MD: list[Any] = []


def _markdown_it() -> Any:
    if not _MD:
        markdown_it = require("markdown_it", "formats", "markdown-it-py")
        # the block parser only: inline parsing is not needed for block spans
        md = markdown_it.MarkdownIt("commonmark").enable("table")
        md.disable(["inline", "text_join"], ignoreInvalid=True)
        _MD.append(md)
    return _MD[0]


def markdown_items(text: str) -> list[MarkdownItem]:
    """The blocks of a Markdown text, in document order (needs markdown-it-py)."""
    md = _markdown_it()
    tokens = md.parse(_blank_front_matter(text))
    items: list[MarkdownItem] = []
    lists: list[list[int | None]] = []  # per open list: [next number or None]
    containers: list[str | MarkdownItem] = []  # "quote", or the list item it is
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.type
        line_map = token.map or [0, 0]
        if kind == "heading_open":
            content = tokens[i + 1].content if i + 1 < len(tokens) else ""
            items.append(
                MarkdownItem(
                    "heading", line_map[0], line_map[1], int(token.tag[1]), content=content
                )
            )
        elif kind == "paragraph_open":
            content = tokens[i + 1].content if i + 1 < len(tokens) else ""
            holder = containers[-1] if containers else None
            if isinstance(holder, MarkdownItem) and not holder.content and holder is items[-1]:
                holder.content = content  # an item's first paragraph is the item
            else:
                quoted = holder == "quote"
                items.append(
                    MarkdownItem(
                        "quote" if quoted else "paragraph",
                        line_map[0],
                        line_map[1],
                        content=content,
                    )
                )
        elif kind in ("bullet_list_open", "ordered_list_open"):
            start = token.attrs.get("start", 1) if kind == "ordered_list_open" else None
            lists.append([int(start) if start is not None else None])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open":
            number = None
            if lists and lists[-1][0] is not None:
                number = int(token.info) if token.info.isdigit() else lists[-1][0]
                lists[-1][0] = number + 1
            item = MarkdownItem(
                "list_item", line_map[0], line_map[1], depth=len(lists) - 1, number=number
            )
            items.append(item)
            containers.append(item)
        elif kind == "list_item_close" or kind == "blockquote_close":
            containers.pop()
        elif kind == "blockquote_open":
            containers.append("quote")
        elif kind in ("fence", "code_block"):
            language = token.info.split()[0] if token.info.strip() else ""
            items.append(
                MarkdownItem(
                    "code", line_map[0], line_map[1], language=language, content=token.content
                )
            )
        elif kind == "table_open":
            table = MarkdownItem("table", line_map[0], line_map[1])
            while i + 1 < len(tokens) and tokens[i].type != "table_close":
                i += 1
                if tokens[i].type == "tr_open":
                    table.rows.append([])
                elif tokens[i].type == "inline" and table.rows:
                    table.rows[-1].append(tokens[i].content)
            items.append(table)
        elif kind == "html_block":
            items.append(MarkdownItem("html", line_map[0], line_map[1], content=token.content))
        i += 1
    return items


class MarkdownParser:
    """Markdown: the file's text unchanged; CommonMark's blocks (markdown-it-py)."""

    name = "markdown"
    suffixes = FORMATS["markdown"][1]

    def version(self) -> str:
        try:
            markdown_it = require("markdown_it", "formats", "markdown-it-py")
        except MissingDependencyError:
            return "markdown/1"
        return f"markdown/1 markdown-it-py {markdown_it.__version__}"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        try:
            items = markdown_items(text)
        except MissingDependencyError:
            items = []  # the same text; the chunker reads its structure itself
        found = [
            ("paragraph" if it.kind == "html" else it.kind, it.first, it.end, it.level)
            for it in items
        ]
        return _document(
            text, _blocks(text, _lines(text), found), self.name, self.version(), read
        )


# -- reStructuredText ---------------------------------------------------------------------

_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*")
_BULLET = re.compile(
    r"(?:[-*+•‣⁃]|#\.|\d+[.)]|\(\d+\)|[A-Za-z][.)]|\([A-Za-z]\)|[ivxlcdmIVXLCDM]+[.)])(?:\s|$)"
)
_CODE_DIRECTIVE = re.compile(r"\.\.\s+(?:code-block|code|sourcecode)::")
_SIMPLE_TABLE = re.compile(r"=+(?:[ \t]+=+)+[ \t]*")
_GRID_TABLE = re.compile(r"\+[-=+]+\+[ \t]*")


def _width(line: str) -> int:
    """The columns a line takes (East Asian wide characters take two), as docutils counts
    them to check that an underline is long enough."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class RstParser:
    """reStructuredText: the file's text unchanged; its section titles (with levels),
    paragraphs, list items, literal blocks, tables and block quotes."""

    name = "rst"
    suffixes = FORMATS["rst"][1]

    def version(self) -> str:
        return "rst/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        lines = _lines(text)
        rows = [text[start:end].rstrip() for start, end in lines]
        blocks = _blocks(text, lines, list(_rst_blocks(rows)))
        return _document(text, blocks, self.name, self.version(), read)


def _adornment(line: str) -> str | None:
    """The character of a line made of one repeated punctuation character, or None."""
    return line[0] if len(line) >= 2 and _ADORNMENT.fullmatch(line) else None


def _rst_blocks(rows: Sequence[str]) -> Iterator[tuple[str, int, int, int]]:
    styles: list[tuple[str, bool]] = []  # title styles in the order they first appear

    def level(style: tuple[str, bool]) -> int:
        if style not in styles:
            styles.append(style)
        return min(styles.index(style) + 1, 6)

    n = len(rows)
    i = 0
    literal_next = -1  # the indent of the paragraph before when it ended with "::"
    item_indent = -1  # the indent of the list item in force (its paragraphs follow it)
    while i < n:
        row = rows[i]
        if not row.strip():
            i += 1
            continue
        at_group_start = i == 0 or not rows[i - 1].strip()
        indent = _indent(row)
        char = _adornment(row) if indent == 0 else None
        # a title between an overline and an underline of the same style
        if (
            char
            and at_group_start
            and i + 2 < n
            and rows[i + 1].strip()
            and rows[i + 2] == row
            and _width(rows[i + 1].strip()) <= len(row)
        ):
            yield ("heading", i, i + 3, level((char, True)))
            i, literal_next, item_indent = i + 3, -1, -1
            continue
        # a title above an underline
        under = _adornment(rows[i + 1]) if i + 1 < n and indent == 0 else None
        if under and not char and at_group_start and len(rows[i + 1]) >= _width(row.strip()):
            yield ("heading", i, i + 2, level((under, False)))
            i, literal_next, item_indent = i + 2, -1, -1
            continue
        if char and len(row) >= 4 and at_group_start and (i + 1 == n or not rows[i + 1].strip()):
            i += 1  # a transition
            continue
        # an indented literal block after "::", or the body of a code directive
        if indent > literal_next >= 0:
            end = i
            while end < n and (not rows[end].strip() or _indent(rows[end]) > literal_next):
                end += 1
            yield ("code", i, end, 0)
            i, literal_next = end, -1
            continue
        stripped = row.lstrip()
        if _CODE_DIRECTIVE.match(stripped):
            end = i + 1
            while end < n and (not rows[end].strip() or _indent(rows[end]) > indent):
                end += 1
            yield ("code", i, end, 0)
            i, literal_next = end, -1
            continue
        group_end = i
        while group_end < n and rows[group_end].strip():
            group_end += 1
        if _SIMPLE_TABLE.fullmatch(stripped):
            # a simple table may hold blank lines: it ends at a border before a blank line
            end = i + 1
            while end < n and not (
                _SIMPLE_TABLE.fullmatch(rows[end].strip())
                and (end + 1 == n or not rows[end + 1].strip())
            ):
                end += 1
            yield ("table", i, end + 1, 0)
            i, literal_next = end + 1, -1
            continue
        if _GRID_TABLE.fullmatch(stripped):
            yield ("table", i, group_end, 0)
            i, literal_next = group_end, -1
            continue
        if _BULLET.match(stripped):
            # each line at this indent that starts with a marker starts an item
            start = i
            for j in range(i + 1, group_end):
                if _indent(rows[j]) == indent and _BULLET.match(rows[j].lstrip()):
                    yield ("list_item", start, j, 0)
                    start = j
            yield ("list_item", start, group_end, 0)
            item_indent = indent
        elif indent > 0 and not (0 <= item_indent < indent):
            yield ("quote", i, group_end, 0)
        else:
            yield ("paragraph", i, group_end, 0)
            if indent <= item_indent:
                item_indent = -1
        literal_next = indent if rows[group_end - 1].endswith("::") else -1
        i = group_end
