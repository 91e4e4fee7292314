"""Org (``.org``): the outlines, notes and literate configurations Emacs users keep.

The file's markup is written in the Markdown-shaped form every parser writes, so the
structured policy finds its sections (an Org ``* Headline`` means nothing to it):

* ``#+TITLE:`` is a level-1 heading and the document's title; a headline's stars give
  its level below it (``*`` is 2, ``**`` 3...), with its tags (``:ops:``) and priority
  cookie (``[#A]``) left out and its TODO keyword kept;
* paragraphs are joined into one line each (a re-wrapped paragraph gives the same text);
* ``#+BEGIN_SRC lang`` and ``#+BEGIN_EXAMPLE`` blocks and fixed-width lines (``: ``)
  become fenced code; ``#+BEGIN_QUOTE`` becomes quotes; other blocks (``VERSE``,
  ``CENTER``, a special block) are read for what they hold;
* list items (``-``, ``+``, ``*`` indented, ``1.``, ``1)``) become ``-`` and ``1.`` items
  nested by indentation (every numbered item ``1.``: an inserted item renumbers
  nothing), checkboxes and description terms (``term :: text``) kept as written;
* table rows (``| a | b |``) become rows, rule lines (``|---+---|``) dropped;
* links read as their description (``[[https://x][the site]]`` is ``the site``), or as
  their target when they have none;
* what is not text is dropped: comments (``# ...`` lines, ``#+BEGIN_COMMENT``), other
  keyword lines (``#+AUTHOR:``, ``#+OPTIONS:``), drawers (``:PROPERTIES:`` ...
  ``:END:``), planning lines (``SCHEDULED:``, ``DEADLINE:``, ``CLOSED:``), export blocks
  (``#+BEGIN_EXPORT html``), table formulas (``#+TBLFM:``) and horizontal rules.

Inline markup (``*bold*``, ``=verbatim=``) is kept as written. ``#+INCLUDE:`` is not
followed (nothing outside the file is read). Blocks carry ``{"line": n}`` or
``{"line": [first, last]}`` (1-based lines of the file). The text comes from the file's
bytes by the rule of :mod:`rechunk.sources.encoding`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rechunk.sources.base import Parsed, TextBuilder
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = ["OrgParser"]

_HEADLINE = re.compile(r"(\*+)[ \t]+(.*)$")
_TAGS = re.compile(r":[\w@#%:]+:")
_PRIORITY = re.compile(r"\[#[A-Za-z0-9]\][ \t]*")
_KEYWORD = re.compile(r"#\+(\w+):[ \t]*(.*)$")
_BLOCK = re.compile(r"#\+begin_(\w+)[ \t]*(.*)$", re.I)
_DRAWER = re.compile(r":[\w-]+:[ \t]*$")
_PLANNING = re.compile(r"(?:SCHEDULED|DEADLINE|CLOSED):")
_LIST_ITEM = re.compile(r"([ \t]*)([-+*]|\d{1,9}[.)])[ \t]+(.*)$")
_RULE = re.compile(r"-{5,}[ \t]*$")
_LINK = re.compile(r"\[\[([^\[\]]*)\](?:\[([^\[\]]*)\])?\]")
_ESCAPED = re.compile(r"^([ \t]*),(?=\*|#\+)")  # a code line Org escaped with a comma
_CODE_BLOCKS = frozenset({"src", "example"})
_DROPPED_BLOCKS = frozenset({"comment", "export"})


def _link(match: re.Match[str]) -> str:
    return match.group(2) or match.group(1)


def _inline(text: str) -> str:
    """A line's text with its links read as their descriptions."""
    return _LINK.sub(_link, text) if "[[" in text else text


def _without_tags(headline: str) -> str:
    """A headline's text without its trailing tags (``Deploy  :ops:cron:``). Split by
    hand: a pattern for the blanks before the tags backtracks quadratically on a line of
    many blanks."""
    parts = headline.rsplit(None, 1)
    if len(parts) == 2 and _TAGS.fullmatch(parts[1]):
        return parts[0]
    return headline


def _span(first: int, last: int) -> dict[str, Any]:
    """The locator of 0-based lines ``first..last``."""
    return {"line": first + 1 if first == last else [first + 1, last + 1]}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class _Reader:
    """One pass over the lines, writing into a :class:`TextBuilder`."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.out = TextBuilder()
        self.title: str | None = None
        self.quote = 0  # quote blocks open
        self.open: list[str] = []  # the names of the blocks open that are read through
        # for each line, the first ":END:" after it with no headline between (a drawer
        # opened there closes there), found in one pass from the end
        self.closes: list[int | None] = [None] * len(lines)
        close: int | None = None
        for k in range(len(lines) - 1, -1, -1):
            self.closes[k] = close
            if lines[k].strip().lower() == ":end:":
                close = k
            elif _HEADLINE.match(lines[k]):
                close = None

    def run(self) -> TextBuilder:
        i = 0
        while i < len(self.lines):
            i = self.step(i)
        return self.out

    def step(self, i: int) -> int:
        line = self.lines[i]
        stripped = line.strip()
        if not stripped:
            return i + 1
        headline = _HEADLINE.match(line)
        if headline:
            self.quote, self.open = 0, []  # a headline ends every block (Org's rule)
            text = _PRIORITY.sub("", _without_tags(headline.group(2)), count=1)
            self.out.heading(_inline(text), min(len(headline.group(1)) + 1, 6), **_span(i, i))
            return self.metadata_end(i + 1)
        lower = stripped.lower()
        if self.open and lower == f"#+end_{self.open[-1]}":
            if self.open.pop() == "quote":
                self.quote -= 1
            return i + 1
        block = _BLOCK.match(stripped)
        if block:
            return self.block(i, block.group(1).lower(), block.group(2))
        if stripped.startswith("#+"):
            keyword = _KEYWORD.match(stripped)
            if keyword and keyword.group(1).lower() == "title" and keyword.group(2).strip():
                if self.title is None:
                    self.title = " ".join(keyword.group(2).split())
                self.out.heading(_inline(keyword.group(2)), 1, **_span(i, i))
            return i + 1
        if stripped == "#" or stripped.startswith("# "):
            return i + 1
        drawer = self.drawer_end(i)
        if drawer is not None:
            return drawer
        if stripped.startswith("|"):
            return self.table(i)
        if stripped == ":" or stripped.startswith(": "):
            return self.fixed_width(i)
        if _RULE.fullmatch(stripped):
            return i + 1
        item = _LIST_ITEM.match(line)
        if item and not (item.group(2) == "*" and not item.group(1)):
            return self.list_items(i)
        end = self.paragraph_end(i)
        text = " ".join(_inline(row.strip()) for row in self.lines[i:end])
        (self.out.quote if self.quote else self.out.paragraph)(text, **_span(i, end - 1))
        return end

    def metadata_end(self, i: int) -> int:
        """The line after a headline's planning line and drawers (metadata, not text)."""
        lines = self.lines
        while i < len(lines):
            stripped = lines[i].strip()
            if _PLANNING.match(stripped):
                i += 1
            elif (drawer := self.drawer_end(i)) is not None:
                i = drawer
            else:
                break
        return i

    def drawer_end(self, i: int) -> int | None:
        """The line after the drawer (``:PROPERTIES:`` ... ``:END:``) that opens at line
        ``i``, else None; one that never closes is no drawer, and its line is text."""
        stripped, close = self.lines[i].strip(), self.closes[i]
        if close is None or not _DRAWER.fullmatch(stripped) or stripped.lower() == ":end:":
            return None
        return close + 1

    def paragraph_end(self, i: int) -> int:
        lines, j = self.lines, i + 1
        while j < len(lines):
            line = lines[j]
            stripped = line.strip()
            if (
                not stripped
                or _HEADLINE.match(line)
                or stripped.startswith(("#+", "|", ": "))
                or stripped in (":", "#")
                or stripped.startswith("# ")
                or _RULE.fullmatch(stripped)
                or (_LIST_ITEM.match(line) and not line.startswith("*"))
                or (self.open and stripped.lower() == f"#+end_{self.open[-1]}")
            ):
                break
            j += 1
        return j

    def block(self, i: int, name: str, arguments: str) -> int:
        if name not in _CODE_BLOCKS and name not in _DROPPED_BLOCKS:
            self.open.append(name)  # quote, verse, center, a special block: read through
            self.quote += name == "quote"
            return i + 1
        lines, j = self.lines, i + 1
        closing = f"#+end_{name}"
        while j < len(lines) and lines[j].strip().lower() != closing:
            j += 1
        if name in _CODE_BLOCKS:
            body = list(lines[i + 1 : j])
            language = arguments.split()[0] if name == "src" and arguments.split() else ""
            indent = min((_indent(r) for r in body if r.strip()), default=0)
            text = "\n".join(_ESCAPED.sub(r"\1", r[indent:]) for r in body)
            self.out.code(text, language, **_span(i, min(j, len(lines) - 1)))
        return j + 1

    def fixed_width(self, i: int) -> int:
        lines, j = self.lines, i
        rows = []
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped != ":" and not stripped.startswith(": "):
                break
            rows.append(stripped[2:])
            j += 1
        self.out.code("\n".join(rows), **_span(i, j - 1))
        return j

    def table(self, i: int) -> int:
        lines, j = self.lines, i
        rows: list[list[str]] = []
        while j < len(lines) and lines[j].strip().startswith("|"):
            row = lines[j].strip()
            j += 1
            if row.startswith("|-"):
                continue
            cells = row.strip("|").split("|")
            rows.append([_inline(cell.strip()) for cell in cells])
        self.out.table(rows, **_span(i, j - 1))
        return j

    def list_items(self, i: int) -> int:
        """A list from line ``i``: each item with its continuation lines (indented more
        than its marker), nested by indentation."""
        lines, j = self.lines, i
        indents: list[int] = []  # the markers' indentation of the items open
        while j < len(lines):
            line = lines[j]
            item = _LIST_ITEM.match(line)
            if not item or (item.group(2) == "*" and not item.group(1)):
                break
            indent = _indent(line)
            while indents and indents[-1] > indent:
                indents.pop()
            if not indents or indents[-1] < indent:
                indents.append(indent)
            end = j + 1
            while end < len(lines):
                following = lines[end]
                if not following.strip() or _indent(following) <= indent:
                    break
                if _LIST_ITEM.match(following) or following.strip().startswith(("#+", "|")):
                    break
                end += 1
            parts = [item.group(3).strip(), *(r.strip() for r in lines[j + 1 : end])]
            text = " ".join(_inline(part) for part in parts)
            ordered = 1 if item.group(2)[0].isdigit() else None
            self.out.list_item(text, len(indents) - 1, ordered, **_span(j, end - 1))
            j = end
            # a blank line between two items of the same list does not end it
            if j + 1 < len(lines) and not lines[j].strip() and _LIST_ITEM.match(lines[j + 1]):
                j += 1
        return j


class OrgParser:
    """Org: its outline, paragraphs, lists, tables and code, in the Markdown-shaped form
    the structured policy reads (see the module docstring)."""

    name = "org"
    suffixes = FORMATS["org"][1]

    def version(self) -> str:
        return "org/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        reader = _Reader(lines)
        builder = reader.run()
        return builder.text_document(self.name, self.version(), read, reader.title)
