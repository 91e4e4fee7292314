"""AsciiDoc (``.adoc``): the documentation format of many Java, Ruby and Red Hat projects.

The file's markup is written in the Markdown-shaped form every parser writes, so the
structured policy finds its sections (an AsciiDoc ``== Title`` means nothing to it, and
a ``[source,java]`` line above a ``----`` delimiter would look like an underlined
title):

* section titles (``=`` to ``======``, or Markdown's ``#``) become ``#`` headings of the
  same level; the document title is level 1;
* paragraphs are joined into one line each (a re-wrapped paragraph gives the same text);
  an admonition paragraph (``NOTE: ...``) keeps its label;
* listing, literal and passthrough blocks (``----``, ``....``, ``++++``) and Markdown
  fences become fenced code, with the language of a ``[source,LANG]`` line above;
  an indented (literal) paragraph is code too;
* example, sidebar and open blocks (``====``, ``****``, ``--``) are read for what they
  hold; a quote block (``____``) becomes quotes;
* tables (``|===``) become a row per line, cells split at ``|`` and grouped into rows by
  the ``cols`` attribute or the first row's cells;
* list items (``*``, ``-``, ``.``, ``1.``, nested by repeating the marker) become ``-``
  and numbered items (every ``.`` item ``1.``, as AsciiDoc leaves the count to the
  renderer: an inserted item renumbers nothing); a description list's ``term::`` stays
  as written;
* a block title (``.Title``) is a paragraph of its own;
* what is not text is dropped: the document header's author and revision lines,
  comments (``//`` lines, ``////`` blocks), attribute entries (``:toc:``), block
  attribute and anchor lines (``[NOTE]``, ``[[id]]``),
  preprocessor directives (``include::``, ``ifdef::``...), list continuations (``+``),
  page and thematic breaks;
* a reference to an attribute (``{product}``) outside code reads as the value its entry
  gave above it (``:product: Harbour``), and AsciiDoc's character references (``{nbsp}``,
  ``{amp}``, ``{startsb}``...) as their characters; a reference to an attribute not
  set stays as written, as AsciiDoc leaves it, and so does an escaped one
  (``\\{product}`` reads ``{product}``).

Other inline markup (``*bold*``, links, cross references, ``kbd:[...]``) is kept as
written. Includes are not
followed (nothing outside the file is read), and two-line (underlined) section titles of
the older AsciiDoc syntax are read as paragraphs. Blocks carry ``{"line": n}`` or
``{"line": [first, last]}`` (1-based lines of the file). The text comes from the file's
bytes by the rule of :mod:`rechunk.sources.encoding`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rechunk.sources.base import Parsed, TextBuilder
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = ["AsciidocParser"]

_TITLE = re.compile(r"(={1,6}|#{1,6})[ \t]+(\S.*)$")  # the trailing marker: _title
_ATTRIBUTE_ENTRY = re.compile(r":!?[\w][\w-]*!?:(?:\s.*)?$")
_BLOCK_ATTRIBUTES = re.compile(r"\[\[?[^\[\]]*\]\]?\s*$")
_DIRECTIVE = re.compile(r"(?:include|ifdef|ifndef|ifeval|endif)::\S*\[.*\]\s*$")
_BLOCK_TITLE = re.compile(r"\.[^\s.].*$")
_LIST_ITEM = re.compile(r"(\*{1,5}|-|\.{1,5}|\d{1,9}\.)\s+(\S.*)$")
_DESCRIPTION = re.compile(r"\S.*?(?::{2,4}|;;)(?:\s+(.*))?$")
_ADMONITION = re.compile(r"(?:NOTE|TIP|IMPORTANT|CAUTION|WARNING):\s")
_SOURCE = re.compile(r"\[(?:source)?,\s*([\w+#.-]+)")
_COLS = re.compile(r"""cols\s*=\s*["']?([^"'\]]*)""")
_CELL_SPEC = re.compile(r"^\s*(?:\d+\*|\d*\.?\d*\+)?[adehlmsv]?(?=\|)")
_ATTRIBUTE_VALUE = re.compile(r":(!?)([\w][\w-]*)(!?):(?:\s+(.*))?$")
_REFERENCE = re.compile(r"(\\?)\{([\w][\w-]*)\}")
#: AsciiDoc's built-in character references
_CHARACTERS = {
    "empty": "", "sp": " ", "nbsp": "\u00a0", "zwsp": "\u200b", "wj": "\u2060",
    "apos": "'", "quot": '"', "lsquo": "\u2018", "rsquo": "\u2019", "ldquo": "\u201c",
    "rdquo": "\u201d", "deg": "\u00b0", "plus": "+", "brvbar": "\u00a6", "vbar": "|",
    "amp": "&", "lt": "<", "gt": ">", "startsb": "[", "endsb": "]", "caret": "^",
    "asterisk": "*", "tilde": "~", "backslash": "\\", "backtick": "`",
    "two-colons": "::", "two-semicolons": ";;", "cpp": "C++", "pp": "++",
}  # fmt: skip
_VERBATIM = {"-": "listing", ".": "literal", "+": "pass", "/": "comment"}
_COMPOUND = {"=": "example", "*": "sidebar", "_": "quote"}
_BREAKS = frozenset({"'''", "---", "***", "- - -", "* * *", "<<<", "+"})


def _delimiter(line: str) -> str | None:
    """The kind of block a delimiter line opens or closes, else None."""
    stripped = line.rstrip()
    if stripped == "--":
        return "open"
    if stripped.startswith("```"):
        return "fence"
    if stripped == "|===":
        return "table"
    if len(stripped) >= 4 and stripped == stripped[0] * len(stripped):
        return _VERBATIM.get(stripped[0]) or _COMPOUND.get(stripped[0])
    return None


def _title(line: str) -> tuple[int, str] | None:
    """A section title's level and text (``== Title`` or ``== Title ==``), else None."""
    match = _TITLE.match(line)
    if match is None:
        return None
    marker, text = match.group(1), match.group(2).rstrip()
    if text.endswith(" " + marker) or text.endswith("\t" + marker):
        text = text[: -len(marker)].rstrip()
    return len(marker), text


def _span(first: int, last: int) -> dict[str, Any]:
    """The locator of 0-based lines ``first..last``."""
    return {"line": first + 1 if first == last else [first + 1, last + 1]}


def _columns(attributes: str) -> int | None:
    """The column count a table's ``cols`` attribute gives (``"1,2"``, ``3*``)."""
    match = _COLS.search(attributes)
    if not match:
        return None
    spec = match.group(1).strip()
    if re.fullmatch(r"\d+", spec):
        return int(spec)
    count = 0
    for part in spec.split(","):
        multiplier = re.match(r"\s*(\d+)\*", part)
        count += int(multiplier.group(1)) if multiplier else 1
    return count or None


class _Reader:
    """One pass over the lines, writing into a :class:`TextBuilder`."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.out = TextBuilder()
        self.attributes = ""  # the block attribute line in force ("[source,java]")
        self.title: tuple[str, int] | None = None  # a block title waiting, and its line
        self.open: list[str] = []  # the compound blocks open (their delimiter lines)
        self.quote = 0  # quote blocks open
        self.document_title: str | None = None
        self.seen_text = False  # a block was written (the header is over)
        self.values = dict(_CHARACTERS)  # the attributes set so far, by lower-case name

    def entry(self, line: str) -> bool:
        """Whether ``line`` is an attribute entry; one that sets or unsets an attribute is
        taken into :attr:`values`."""
        entry = _ATTRIBUTE_VALUE.match(line)
        if entry is None:
            return _ATTRIBUTE_ENTRY.match(line) is not None
        name = entry.group(2).lower()
        if entry.group(1) or entry.group(3):  # :!name: or :name!: unsets it
            self.values.pop(name, None)
        else:
            self.values[name] = self.sub((entry.group(4) or "").strip())
        return True

    def sub(self, text: str) -> str:
        """``text`` with its references to attributes set (``{product}``) read as their
        values; any other, and an escaped one (``\\{product}``), as written."""
        if "{" not in text:
            return text

        def value(match: re.Match[str]) -> str:
            escaped, name = match.groups()
            if escaped:
                return match[0][1:]
            found = self.values.get(name.lower())
            return match[0] if found is None else found

        return _REFERENCE.sub(value, text)

    def run(self) -> TextBuilder:
        lines, i = self.lines, 0
        while i < len(lines):
            i = self.step(i)
        return self.out

    def step(self, i: int) -> int:
        line = self.lines[i]
        stripped = line.strip()
        if not stripped or stripped in _BREAKS:
            return i + 1
        if self.open and stripped == self.open[-1]:
            if self.open.pop().startswith("_"):
                self.quote -= 1
            return i + 1
        kind = _delimiter(stripped) if line == line.lstrip() else None
        if kind is not None and kind != "comment":
            self.seen_text = True  # a title after this is a section's, not the document's
        if kind in ("listing", "literal", "pass", "comment", "fence"):
            return self.verbatim(i, kind, stripped)
        if kind == "table":
            return self.table(i)
        if kind in ("example", "sidebar", "quote", "open"):
            self.open.append(stripped)
            self.quote += kind == "quote"
            self.title_paragraph()
            self.attributes = ""
            return i + 1
        if stripped.startswith("//"):
            return i + 1
        if self.entry(line) or _DIRECTIVE.match(stripped):
            return i + 1
        if _BLOCK_ATTRIBUTES.match(line):
            self.attributes = stripped
            return i + 1
        if _BLOCK_TITLE.match(line):
            self.title = (stripped[1:], i)
            return i + 1
        title = _title(line)
        if title is not None:
            self.title_paragraph()
            level, text = title[0], self.sub(title[1])
            self.out.heading(text, level, **_span(i, i))
            self.attributes = ""
            first = not self.seen_text
            self.seen_text = True
            if level == 1 and first:  # the document title, then its header
                self.document_title = text
                return self.header_end(i + 1)
            return i + 1
        self.seen_text = True
        self.title_paragraph()
        if line[0] in " \t":  # a literal paragraph: indented lines, kept as code
            end = self.paragraph_end(i, indented=True)
            body = list(self.lines[i:end])
            indent = min(len(r) - len(r.lstrip()) for r in body if r.strip())
            self.out.code("\n".join(r[indent:] for r in body), **_span(i, end - 1))
            return end
        item = _LIST_ITEM.match(line)
        if item:
            return self.list_item(i, item)
        term = (
            _DESCRIPTION.fullmatch(stripped) is not None
            and not _ADMONITION.match(stripped)
            and "://" not in stripped
        )
        end = self.paragraph_end(i, terms=term)
        text = self.sub(" ".join(row.strip() for row in self.lines[i:end]))
        if term:
            self.out.list_item(text, **_span(i, end - 1))
        elif self.quote:
            self.out.quote(text, **_span(i, end - 1))
        else:
            self.out.paragraph(text, **_span(i, end - 1))
        self.attributes = ""
        return end

    def title_paragraph(self) -> None:
        """A pending block title, as a paragraph of its own."""
        if self.title is not None:
            text, line = self.title
            self.out.paragraph(self.sub(text), **_span(line, line))
            self.title = None

    def header_end(self, i: int) -> int:
        """The line after a document header: the author and revision lines (metadata, not
        text) and attribute entries, from line ``i`` to the first blank line or block."""
        lines = self.lines
        while i < len(lines) and lines[i].strip():
            if _delimiter(lines[i].strip()) is not None or _BLOCK_ATTRIBUTES.match(lines[i]):
                break
            self.entry(lines[i])
            i += 1
        return i

    def paragraph_end(self, i: int, indented: bool = False, terms: bool = False) -> int:
        """The line after the paragraph starting at line ``i`` (``terms``: of a description
        list, where each term starts an item)."""
        lines, j = self.lines, i + 1
        while j < len(lines):
            line = lines[j]
            stripped = line.strip()
            if not stripped or stripped == "+":
                break
            if indented:
                if line[0] not in " \t":
                    break
            elif (
                line[0] in " \t"
                or _delimiter(stripped) is not None
                or _LIST_ITEM.match(line)
                or _TITLE.match(line)
                or _BLOCK_ATTRIBUTES.match(line)
                or _BLOCK_TITLE.match(line)
                or stripped.startswith("//")
                or (self.open and stripped == self.open[-1])
                or (terms and _DESCRIPTION.fullmatch(stripped))
            ):
                break
            j += 1
        return j

    def list_item(self, i: int, item: re.Match[str]) -> int:
        marker = item.group(1)
        end = self.paragraph_end(i)
        rest = " ".join(row.strip() for row in self.lines[i + 1 : end])
        text = self.sub(f"{item.group(2)} {rest}" if rest else item.group(2))
        if marker == "-":
            depth, ordered = 0, None
        elif marker[0] == "*":
            depth, ordered = len(marker) - 1, None
        elif marker[0] == ".":
            depth, ordered = len(marker) - 1, 1
        else:
            depth, ordered = 0, int(marker[:-1])
        self.out.list_item(text, depth, ordered, **_span(i, end - 1))
        self.attributes = ""
        return end

    def verbatim(self, i: int, kind: str, delimiter: str) -> int:
        lines, j = self.lines, i + 1
        closing = "```" if kind == "fence" else delimiter
        while j < len(lines) and lines[j].rstrip() != closing:
            j += 1
        if kind != "comment":
            self.title_paragraph()
            language = ""
            if kind == "fence":
                language = delimiter[3:].strip()
            elif (source := _SOURCE.match(self.attributes)) is not None:
                language = source.group(1)
            where = _span(i, min(j, len(lines) - 1))
            self.out.code("\n".join(lines[i + 1 : j]), language, **where)
        self.attributes = ""
        return j + 1

    def table(self, i: int) -> int:
        lines, j = self.lines, i + 1
        while j < len(lines) and lines[j].rstrip() != "|===":
            j += 1
        body = [(k, lines[k]) for k in range(i + 1, j)]
        cells: list[str] = []
        first_row: int | None = None
        for _, line in body:
            if not line.strip():
                continue
            line = _CELL_SPEC.sub("", line)
            pieces = re.split(r"(?<!\\)\|", line)
            if cells and pieces[0].strip():
                cells[-1] += " " + self.sub(pieces[0].strip())  # a cell continued on this line
            new = [self.sub(piece.strip().replace("\\|", "|")) for piece in pieces[1:]]
            if first_row is None and new:
                first_row = len(new)
            cells.extend(new)
        width = _columns(self.attributes) or first_row or 1
        rows = [cells[k : k + width] for k in range(0, len(cells), width)]
        self.title_paragraph()
        self.out.table(rows, **_span(i, min(j, len(lines) - 1)))
        self.attributes = ""
        return j + 1


class AsciidocParser:
    """AsciiDoc: its sections, paragraphs, lists, tables and code, in the Markdown-shaped
    form the structured policy reads (see the module docstring)."""

    name = "asciidoc"
    suffixes = FORMATS["asciidoc"][1]

    def version(self) -> str:
        return "asciidoc/2"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        reader = _Reader(lines)
        builder = reader.run()
        return builder.text_document(self.name, self.version(), read, reader.document_title)
