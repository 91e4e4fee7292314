"""What the OpenDocument parsers (text, spreadsheet, presentation) share: opening the
package and checking what it holds, the text a paragraph shows, the styles that make a
paragraph code or a quote, and the writer of text blocks (paragraphs, headings, lists,
tables), all with the standard library.

An OpenDocument file is a ZIP package whose ``mimetype`` part names the kind of
document; ``content.xml`` holds the body, ``styles.xml`` the named styles (and the page
headers and footers, never read) and ``meta.xml`` the title.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

from rechunk.sources._office import open_package, read_part, reject_ole, xml_part
from rechunk.sources.base import ParseError, TextBuilder

__all__ = [
    "MAX_REPEAT", "Package", "Styles", "Walker", "ns", "number", "open_odf", "q", "text_of",
]  # fmt: skip

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
}
_CODE_STYLES = frozenset(
    {"Preformatted Text", "Source Code", "Source Text", "Code", "HTML Preformatted"}
)
_QUOTE_STYLES = frozenset({"Quotations", "Quote", "Block Text"})
# the media types an OpenDocument package names (ODF 1.3, appendix C); any other mimetype
# part is not quoted, since it is whatever the file's author wrote
_ODF_KINDS = (
    "text", "text-template", "text-master", "text-master-template", "text-web",
    "spreadsheet", "spreadsheet-template", "presentation", "presentation-template",
    "graphics", "graphics-template", "chart", "chart-template", "image", "image-template",
    "formula", "formula-template", "database",
)  # fmt: skip
_ODF_MIME_TYPES = frozenset(f"application/vnd.oasis.opendocument.{kind}" for kind in _ODF_KINDS)
MAX_REPEAT = 64  # repeated rows, cells or spaces of a text table written out (no bomb)


def ns(prefix: str) -> str:
    """``draw`` -> ``{urn:...drawing:1.0}``: what the tags of that namespace start with."""
    return f"{{{_NS[prefix]}}}"


def q(name: str) -> str:
    """``text:p`` -> ``{urn:...text:1.0}p``."""
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


# elements whose content is no text of the document
_DROPPED = frozenset(
    q(name)
    for name in (
        "text:table-of-content", "text:alphabetical-index", "text:illustration-index",
        "text:table-index", "text:object-index", "text:user-index", "text:bibliography",
        "text:tracked-changes", "text:sequence-decls", "text:variable-decls",
        "text:user-field-decls", "text:soft-page-break", "office:forms",
    )
)  # fmt: skip
# inline elements whose text is not read: notes, comments, numbering, fields that change
# without an edit (page numbers, dates, a slide's footer, header and date fields), marks
_SKIPPED_INLINE = frozenset(
    q(name)
    for name in (
        "text:note", "office:annotation", "office:annotation-end", "text:number",
        "text:page-number", "text:page-count", "text:page-continuation", "text:date",
        "text:time", "text:print-date", "text:print-time", "text:modification-date",
        "text:modification-time", "text:change", "text:change-start", "text:change-end",
        "text:bookmark", "text:bookmark-start", "text:bookmark-end",
        "text:reference-mark", "text:reference-mark-start", "text:reference-mark-end",
        "draw:frame", "draw:a", "text:soft-page-break", "presentation:date-time",
        "presentation:footer", "presentation:header",
    )
)  # fmt: skip
P, H, LIST, TABLE = q("text:p"), q("text:h"), q("text:list"), q("table:table")
_S, _TAB, _BREAK = q("text:s"), q("text:tab"), q("text:line-break")
_STYLE_NAME = q("text:style-name")
_PARENT, _DISPLAY = q("style:parent-style-name"), q("style:display-name")


def number(element: ET.Element, attribute: str, default: int = 1) -> int:
    """An integer attribute (``text:c``, ``table:number-rows-repeated``...), ``default``
    where it is missing or not a number."""
    try:
        return int(element.get(q(attribute)) or default)
    except ValueError:
        return default


def _inline(element: ET.Element, out: list[str]) -> None:
    """The text ``element`` shows, appended to ``out`` (its tail is the caller's)."""
    if element.text:
        out.append(element.text)
    for child in element:
        tag = child.tag
        if tag == _S:
            out.append(" " * min(number(child, "text:c"), MAX_REPEAT))
        elif tag == _TAB:
            out.append("\t")
        elif tag == _BREAK:
            out.append("\n")
        elif tag not in _SKIPPED_INLINE:
            _inline(child, out)
        if child.tail:
            out.append(child.tail)


def text_of(element: ET.Element) -> str:
    """The text a paragraph (or heading, or span) shows."""
    out: list[str] = []
    _inline(element, out)
    return "".join(out)


class Styles:
    """Paragraph styles (name -> parent, display name) and list styles (name -> the
    levels that are numbered, with their start values), from ``content.xml``'s automatic
    styles and ``styles.xml``'s."""

    def __init__(self, roots: list[ET.Element]) -> None:
        self.parent: dict[str, str] = {}
        self.display: dict[str, str] = {}
        self.numbered: dict[str, dict[int, int]] = {}
        for root in roots:
            for style in root.iter(q("style:style")):
                name = style.get(q("style:name"))
                if not name:
                    continue
                if style.get(_PARENT):
                    self.parent[name] = style.get(_PARENT, "")
                self.display[name] = style.get(_DISPLAY) or name.replace("_20_", " ")
            for listing in root.iter(q("text:list-style")):
                name = listing.get(q("style:name"))
                if not name:
                    continue
                levels = {}
                for level in listing.iter(q("text:list-level-style-number")):
                    levels[number(level, "text:level")] = number(level, "text:start-value")
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


class Walker:
    """Writes text blocks (paragraphs, headings, lists, tables, what sections and text
    boxes hold) to ``out``, each block located by ``locator`` (``slide=3``)."""

    def __init__(self, styles: Styles, out: TextBuilder | None = None, **locator: Any) -> None:
        self.styles = styles
        self.out = TextBuilder() if out is None else out
        self.locator = locator
        self.code: list[str] = []  # consecutive code paragraphs, written as one fence

    def flush(self) -> None:
        if self.code:
            self.out.code("\n".join(self.code), **self.locator)
            self.code = []

    def blocks(self, parent: ET.Element) -> None:
        for child in parent:
            tag = child.tag
            if tag in _DROPPED:
                continue
            if tag in (P, H):
                self.paragraph(child)
            elif tag == LIST:
                self.flush()
                self.items(child, 0, child.get(_STYLE_NAME))
            elif tag == TABLE:
                self.flush()
                self.table(child)
            else:  # a section, a text box's content, and what else holds blocks
                self.blocks(child)

    def paragraph(self, element: ET.Element) -> None:
        text = text_of(element)
        if element.tag == H:
            self.flush()
            level = number(element, "text:outline-level")
            self.out.heading(text, min(max(level, 1), 6), **self.locator)
        else:
            kind = self.styles.kind(element.get(_STYLE_NAME))
            if kind == "code":
                self.code.append(text.rstrip("\n"))
            else:
                self.flush()
                if kind == "title":
                    self.out.heading(text, 1, **self.locator)
                elif kind == "quote":
                    self.out.quote(text, **self.locator)
                else:
                    self.out.paragraph(text, **self.locator)
        for box in element.iter(q("draw:text-box")):  # anchored here: read after it
            self.blocks(box)

    def items(self, listing: ET.Element, depth: int, style: str | None) -> None:
        style = listing.get(_STYLE_NAME) or style
        starts = self.styles.numbered.get(style or "", {})
        count = starts.get(depth + 1)
        for item in listing:
            if item.tag not in (q("text:list-item"), q("text:list-header")):
                continue
            first = True
            for child in item:
                if child.tag == LIST:
                    self.items(child, depth + 1, style)
                elif child.tag in (P, H) and first:
                    ordered = count if item.tag == q("text:list-item") else None
                    self.out.list_item(text_of(child), depth, ordered, **self.locator)
                    first = False
                elif child.tag in (P, H):
                    self.out.paragraph(text_of(child), **self.locator)
                elif child.tag == TABLE:
                    self.table(child)
            if count is not None and item.tag == q("text:list-item"):
                count += 1

    def table(self, table: ET.Element) -> None:
        rows: list[list[str]] = []
        for row in table.iter(q("table:table-row")):
            cells: list[str] = []
            for cell in row:
                if cell.tag not in (q("table:table-cell"), q("table:covered-table-cell")):
                    continue
                text = " ".join(text_of(p) for p in cell.iter(P))
                repeat = number(cell, "table:number-columns-repeated")
                cells.extend([text] * min(repeat, MAX_REPEAT))
            while cells and not cells[-1].strip():
                cells.pop()
            repeat = number(row, "table:number-rows-repeated")
            rows.extend([cells] * min(repeat, MAX_REPEAT))
        self.out.table(rows, **self.locator)


@dataclass(frozen=True)
class Package:
    """The parsed parts of an OpenDocument package (None where it has none)."""

    content: ET.Element
    styles: ET.Element | None
    meta: ET.Element | None

    def body(self, kind: str) -> ET.Element | None:
        """The body's ``office:<kind>`` element (``text``, ``spreadsheet``...)."""
        return self.content.find(f"{q('office:body')}/{q('office:' + kind)}")

    def style_roots(self) -> list[ET.Element]:
        return [r for r in (self.content, self.styles) if r is not None]

    def title(self) -> dict[str, str]:
        """``{"title": ...}`` from the metadata, or nothing."""
        found = self.meta.findtext(f".//{{{_NS['dc']}}}title") if self.meta is not None else None
        return {"title": " ".join(found.split())} if found and found.strip() else {}


def _encrypted(zf: zipfile.ZipFile) -> bool:
    """The manifest gives a part encryption data (the package is password-protected)."""
    manifest = xml_part(zf, "META-INF/manifest.xml")
    encrypted = f"{{{_NS['manifest']}}}encryption-data"
    return manifest is not None and next(manifest.iter(encrypted), None) is not None


def open_odf(data: bytes, kind: str, legacy: str, suffix: str) -> Package:
    """The parts of an OpenDocument ``kind`` (``text``, ``spreadsheet``...; its template
    too) package. A file that is not a ZIP package, whose ``mimetype`` names another
    kind, that is password-protected or has no ``content.xml``, or a legacy binary file
    (``legacy``, such as ``Word (.doc)``) renamed to ``suffix`` is a :class:`ParseError`."""
    reject_ole(data, legacy, suffix)
    mimetypes = (
        f"application/vnd.oasis.opendocument.{kind}",
        f"application/vnd.oasis.opendocument.{kind}-template",
    )
    with open_package(data, "an OpenDocument package") as zf:
        mimetype = (read_part(zf, "mimetype") or b"").decode("ascii", "replace").strip()
        if mimetype not in mimetypes:
            said = (
                f"its mimetype is {mimetype!r}"
                if mimetype in _ODF_MIME_TYPES
                else "its mimetype part names no OpenDocument type"
            )
            raise ParseError(f"not an OpenDocument {kind}: {said}")
        if _encrypted(zf):
            raise ParseError(
                "encrypted: the file is password-protected; save it without a password"
            )
        content = xml_part(zf, "content.xml")
        styles = xml_part(zf, "styles.xml")
        meta = xml_part(zf, "meta.xml")
    if content is None:
        raise ParseError("corrupt: the package has no content.xml")
    return Package(content, styles, meta)
