"""ODP: OpenDocument presentations (LibreOffice Impress's format, and what Google Slides
and PowerPoint export as ODF), read as the PPTX parser reads a deck. Per slide, every
block located by ``{"slide": n}`` (1-based, in the deck's order):

* the title placeholder's text as a level-1 heading; a slide with text but no title
  gets ``# (untitled slide)``, so that every slide starts a section of its own. The
  slide's number is never written into the text (it is in the locator);
* then its shapes in document order (text boxes, outline and other placeholders, shapes
  with text, tables; groups in their own order): paragraphs, headings, lists at their
  nesting depth (numbered where the list's style numbers that level), tables a row per
  line, code and quote paragraph styles as in ODT;
* then the speaker notes, as quote blocks, the first one starting ``Notes:``.

Not in the text: the slide-number, date, header and footer placeholders and fields,
placeholders still showing their prompt (never filled in), the master slides (in
``styles.xml``: never read), images, charts, media and embedded objects, comments.
Hidden slides are read: they are part of the deck's content.

A file that is not a ZIP package, is not an OpenDocument presentation (its
``mimetype``), is password-protected, or is a legacy binary ``.ppt`` renamed is a
:class:`~rechunk.sources.base.ParseError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from rechunk.sources._odf import P, Styles, Walker, ns, open_odf, q, text_of
from rechunk.sources.base import NoTextError, Parsed, TextBuilder
from rechunk.sources.pptx import UNTITLED

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["OdpParser"]

_PAGE, _NOTES = q("draw:page"), q("presentation:notes")
_CLASS, _PLACEHOLDER = q("presentation:class"), q("presentation:placeholder")
_DRAW = ns("draw")
_FURNITURE = frozenset({"page-number", "date-time", "header", "footer"})


def _shapes(page: ET.Element) -> tuple[ET.Element | None, list[ET.Element]]:
    """A slide's title frame (None if it has none) and its other shapes with content,
    in document order."""
    title = None
    shapes = []
    for child in page:
        if not child.tag.startswith(_DRAW):
            continue  # the notes, forms, animations
        kind = child.get(_CLASS)
        if kind in _FURNITURE or child.get(_PLACEHOLDER) == "true":
            continue
        if kind == "title" and title is None:
            title = child
        else:
            shapes.append(child)
    return title, shapes


def _shown(element: ET.Element) -> str:
    """The text of every paragraph inside ``element``, joined by spaces."""
    return " ".join(text_of(p) for p in element.iter(P))


def _notes(page: ET.Element) -> list[str]:
    """The speaker notes' paragraphs (the notes page's thumbnail is not text)."""
    out: list[str] = []
    for notes in page.iter(_NOTES):
        for frame in notes:
            if frame.get(_CLASS) == "notes" and frame.get(_PLACEHOLDER) != "true":
                out.extend(t for t in (text_of(p) for p in frame.iter(P)) if t.strip())
    return out


class OdpParser:
    """OpenDocument presentations (``.odp``, ``.otp``): see the module docstring."""

    name = "odp"
    suffixes = (".odp", ".otp")

    def version(self) -> str:
        return "odp/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        package = open_odf(data, "presentation", "PowerPoint (.ppt)", ".odp")
        body = package.body("presentation")
        styles = Styles(package.style_roots())
        out = TextBuilder()
        for number, page in enumerate([] if body is None else body.findall(_PAGE), start=1):
            title, shapes = _shapes(page)
            notes = _notes(page)
            heading = _shown(title) if title is not None else ""
            if heading.strip():
                out.heading(heading, 1, slide=number)
            elif notes or any(_shown(shape).strip() for shape in shapes):
                out.heading(UNTITLED, 1, slide=number)
            walker = Walker(styles, out, slide=number)
            for shape in shapes:
                walker.blocks(shape)
                walker.flush()
            for k, note in enumerate(notes):
                out.quote(("Notes: " if k == 0 else "") + note, slide=number)
        if out.empty:
            raise NoTextError("no text: the deck's slides hold no text")
        return [out.build(self.name, self.version(), metadata=package.title())]
