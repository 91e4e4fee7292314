"""ODT: OpenDocument text (LibreOffice Writer's format, and what Google Docs and Word
export as ODF), from the package's ``content.xml``, read with the standard library.

What the text holds, in document order (the Markdown shape of
:class:`~rechunk.sources.base.TextBuilder`):

* headings (``text:h``, at their outline level; a paragraph in the ``Title`` style is a
  level-1 heading); heading numbering is not written (it renumbers every later heading
  when one is inserted);
* paragraphs; a paragraph in a preformatted or source-code style is code (consecutive
  ones in one fence, spaces, tabs and line breaks kept), one in the ``Quotations`` style
  a quote; styles are followed through their parents, automatic styles included;
* list items at their nesting depth, numbered where the list's style numbers that level
  (counted per list, from the level's start value), else bullets;
* tables, a row per line (header rows, row groups; repeated rows and cells as written);
* what sections and text boxes (frames anchored in a paragraph, after it) hold;
* tracked changes accepted: inserted text is inline; deleted text lives in a region of
  its own, which is not read.

Not in the text: page headers and footers (in ``styles.xml``: never read), tables of
contents and other indexes, footnotes and endnotes, comments, page numbers, page counts
and the dates and times a field shows (they change when the file is opened or printed),
images and embedded objects. ``title`` comes from the document's metadata.

A file that is not a ZIP package, is not an OpenDocument text (its ``mimetype``), or
is password-protected (its parts are encrypted) is a
:class:`~rechunk.sources.base.ParseError`; so is a legacy binary ``.doc`` renamed.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from rechunk.sources._office import open_package, read_part, reject_ole, xml_part
from rechunk.sources.base import Parsed, ParseError, TextBuilder

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["OdtParser"]

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
}
_MIMETYPES = (
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.text-template",
)
_CODE_STYLES = frozenset(
    {"Preformatted Text", "Source Code", "Source Text", "Code", "HTML Preformatted"}
)
_QUOTE_STYLES = frozenset({"Quotations", "Quote", "Block Text"})
_MAX_REPEAT = 64  # repeated rows, cells or spaces written out (no filler, no bomb)


def _q(name: str) -> str:
    """``text:p`` -> ``{urn:...text:1.0}p``."""
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


# elements whose content is no text of the document
_DROPPED = frozenset(
    _q(name)
    for name in (
        "text:table-of-content", "text:alphabetical-index", "text:illustration-index",
        "text:table-index", "text:object-index", "text:user-index", "text:bibliography",
        "text:tracked-changes", "text:sequence-decls", "text:variable-decls",
        "text:user-field-decls", "text:soft-page-break", "office:forms",
    )
)  # fmt: skip
_SKIPPED_INLINE = frozenset(
    _q(name)
    for name in (
        "text:note", "office:annotation", "office:annotation-end", "text:number",
        "text:page-number", "text:page-count", "text:page-continuation", "text:date",
        "text:time", "text:print-date", "text:print-time", "text:modification-date",
        "text:modification-time", "text:change", "text:change-start", "text:change-end",
        "text:bookmark", "text:bookmark-start", "text:bookmark-end",
        "text:reference-mark", "text:reference-mark-start", "text:reference-mark-end",
        "draw:frame", "draw:a", "text:soft-page-break",
    )
)  # fmt: skip
_P, _H, _LIST, _TABLE, _SECTION = (
    _q("text:p"), _q("text:h"), _q("text:list"), _q("table:table"), _q("text:section")
)  # fmt: skip
_S, _TAB, _BREAK = _q("text:s"), _q("text:tab"), _q("text:line-break")
_STYLE_NAME = _q("text:style-name")
_PARENT, _DISPLAY = _q("style:parent-style-name"), _q("style:display-name")


def _number(element: ET.Element, attribute: str, default: int = 1) -> int:
    """An integer attribute (``text:c``, ``text:outline-level``...), ``default`` where it is
    missing or not a number."""
    try:
        return int(element.get(_q(attribute)) or default)
    except ValueError:
        return default


def _inline(element: ET.Element, out: list[str]) -> None:
    """The text ``element`` shows, appended to ``out`` (its tail is the caller's)."""
    if element.text:
        out.append(element.text)
    for child in element:
        tag = child.tag
        if tag == _S:
            out.append(" " * min(_number(child, "text:c"), _MAX_REPEAT))
        elif tag == _TAB:
            out.append("\t")
        elif tag == _BREAK:
            out.append("\n")
        elif tag not in _SKIPPED_INLINE:
            _inline(child, out)
        if child.tail:
            out.append(child.tail)


def _text(element: ET.Element) -> str:
    out: list[str] = []
    _inline(element, out)
    return "".join(out)


class _Styles:
    """Paragraph styles (name -> parent, display name) and list styles (name -> the
    levels that are numbered, with their start values), from ``content.xml``'s automatic
    styles and ``styles.xml``'s."""

    def __init__(self, roots: list[ET.Element]) -> None:
        self.parent: dict[str, str] = {}
        self.display: dict[str, str] = {}
        self.numbered: dict[str, dict[int, int]] = {}
        for root in roots:
            for style in root.iter(_q("style:style")):
                name = style.get(_q("style:name"))
                if not name:
                    continue
                if style.get(_PARENT):
                    self.parent[name] = style.get(_PARENT, "")
                self.display[name] = style.get(_DISPLAY) or name.replace("_20_", " ")
            for listing in root.iter(_q("text:list-style")):
                name = listing.get(_q("style:name"))
                if not name:
                    continue
                levels = {}
                for level in listing.iter(_q("text:list-level-style-number")):
                    levels[_number(level, "text:level")] = _number(level, "text:start-value")
                self.numbered[name] = levels

    def names(self, style: str | None) -> Iterator[str]:
        """The display names of ``style`` and of its ancestors."""
        seen: set[str] = set()
        while style and style not in seen:
            seen.add(style)
            yield self.display.get(style, style.replace("_20_", " "))
            style = self.parent.get(style)

    def kind(self, style: str | None) -> str:
        """``code``, ``quote``, ``title`` or ``paragraph``."""
        for name in self.names(style):
            if name in _CODE_STYLES:
                return "code"
            if name in _QUOTE_STYLES:
                return "quote"
            if name == "Title":
                return "title"
        return "paragraph"


class _Walker:
    def __init__(self, styles: _Styles) -> None:
        self.styles = styles
        self.out = TextBuilder()
        self.code: list[str] = []  # consecutive code paragraphs, written as one fence

    def flush(self) -> None:
        if self.code:
            self.out.code("\n".join(self.code))
            self.code = []

    def blocks(self, parent: ET.Element) -> None:
        for child in parent:
            tag = child.tag
            if tag in _DROPPED:
                continue
            if tag in (_P, _H):
                self.paragraph(child)
            elif tag == _LIST:
                self.flush()
                self.items(child, 0, child.get(_STYLE_NAME))
            elif tag == _TABLE:
                self.flush()
                self.table(child)
            else:  # a section, a text box's content, and what else holds blocks
                self.blocks(child)

    def paragraph(self, element: ET.Element) -> None:
        text = _text(element)
        if element.tag == _H:
            self.flush()
            level = _number(element, "text:outline-level")
            self.out.heading(text, min(max(level, 1), 6))
        else:
            kind = self.styles.kind(element.get(_STYLE_NAME))
            if kind == "code":
                self.code.append(text.rstrip("\n"))
            else:
                self.flush()
                if kind == "title":
                    self.out.heading(text, 1)
                elif kind == "quote":
                    self.out.quote(text)
                else:
                    self.out.paragraph(text)
        for box in element.iter(_q("draw:text-box")):  # anchored here: read after it
            self.blocks(box)

    def items(self, listing: ET.Element, depth: int, style: str | None) -> None:
        style = listing.get(_STYLE_NAME) or style
        starts = self.styles.numbered.get(style or "", {})
        number = starts.get(depth + 1)
        for item in listing:
            if item.tag not in (_q("text:list-item"), _q("text:list-header")):
                continue
            first = True
            for child in item:
                if child.tag == _LIST:
                    self.items(child, depth + 1, style)
                elif child.tag in (_P, _H) and first:
                    ordered = number if item.tag == _q("text:list-item") else None
                    self.out.list_item(_text(child), depth, ordered)
                    first = False
                elif child.tag in (_P, _H):
                    self.out.paragraph(_text(child))
                elif child.tag == _TABLE:
                    self.table(child)
            if number is not None and item.tag == _q("text:list-item"):
                number += 1

    def table(self, table: ET.Element) -> None:
        rows: list[list[str]] = []
        for row in table.iter(_q("table:table-row")):
            cells: list[str] = []
            for cell in row:
                if cell.tag not in (_q("table:table-cell"), _q("table:covered-table-cell")):
                    continue
                text = " ".join(_text(p) for p in cell.iter(_P))
                repeat = _number(cell, "table:number-columns-repeated")
                cells.extend([text] * min(repeat, _MAX_REPEAT))
            while cells and not cells[-1].strip():
                cells.pop()
            repeat = _number(row, "table:number-rows-repeated")
            rows.extend([cells] * min(repeat, _MAX_REPEAT))
        self.out.table(rows)


def _encrypted(zf: zipfile.ZipFile) -> bool:
    """The manifest gives a part encryption data (the package is password-protected)."""
    manifest = xml_part(zf, "META-INF/manifest.xml")
    encrypted = f"{{{_NS['manifest']}}}encryption-data"
    return manifest is not None and next(manifest.iter(encrypted), None) is not None


class OdtParser:
    """OpenDocument text (``.odt``, ``.ott``): see the module docstring."""

    name = "odt"
    suffixes = (".odt", ".ott")

    def version(self) -> str:
        return "odt/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        reject_ole(data, "Word (.doc)", ".odt")
        with open_package(data, "an OpenDocument package") as zf:
            mimetype = (read_part(zf, "mimetype") or b"").decode("ascii", "replace").strip()
            if mimetype not in _MIMETYPES:
                raise ParseError(f"not an OpenDocument text: its mimetype is {mimetype!r}")
            if _encrypted(zf):
                raise ParseError(
                    "encrypted: the file is password-protected; save it without a password"
                )
            content = xml_part(zf, "content.xml")
            styles = xml_part(zf, "styles.xml")
            meta = xml_part(zf, "meta.xml")
        if content is None:
            raise ParseError("corrupt: the package has no content.xml")
        body = content.find(f"{_q('office:body')}/{_q('office:text')}")
        walker = _Walker(_Styles([r for r in (content, styles) if r is not None]))
        if body is not None:
            walker.blocks(body)
        walker.flush()
        if walker.out.empty:
            raise ParseError("no text: the document body is empty")
        title = meta.findtext(f".//{{{_NS['dc']}}}title") if meta is not None else None
        metadata = {"title": title.strip()} if title and title.strip() else {}
        return [walker.out.build(self.name, self.version(), metadata=metadata)]
