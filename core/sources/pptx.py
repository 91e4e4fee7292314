"""PPTX: each slide's title, the text of its shapes in document order, then its notes.

Read through python-pptx (extra ``formats``). Per slide, in the Markdown shape of
:class:`~rechunk.sources.base.TextBuilder`, every block located by ``{"slide": n}``
(1-based, in the deck's order):

* the title placeholder's text as a level-1 heading (``# Quarterly results``). The
  slide number is never written into the text (inserting a slide would change every
  later slide's text); it is in the locator. A slide with text but no title gets the
  heading ``# (untitled slide)``, so that every slide starts a section of its own
  (sections are hard chunk boundaries: a slide inserted before it moves no cut);
* then its shapes in document order (the slide's shape tree, which is also the order a
  screen reader follows): a text frame's paragraphs as paragraphs, or as list items at
  their outline level where the paragraph shows a bullet or an automatic number (its
  own properties, else the shape's, the layout's and the master's list styles, else the
  master's body style for a body or content placeholder); tables as table blocks (a
  merged cell's text once); group shapes recursed in their own order;
* then the speaker notes, as quote blocks, the first one starting ``Notes:``.

Not in the text: the slide-number, date and footer placeholders and the slide-number
and date fields inside text (page furniture, or text that changes without an edit),
pictures (and their alternative text), charts, SmartArt, media and embedded objects.
Hidden slides are read: they are part of the deck's content.

A file that is not a PPTX package, a password-protected one and a legacy binary
``.ppt`` are :class:`~rechunk.sources.base.ParseError`.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rechunk._optional import require
from rechunk.sources._office import ZIP_ERRORS, reject_ole
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder, error_kind

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["PptxParser"]

VERSION = 1
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
# the heading of a slide with text but no title (the ODP parser writes it too)
UNTITLED = "(untitled slide)"
# fields whose text is page furniture or changes without an edit
_DROPPED_FIELD_PREFIXES = ("slidenum", "datetime")


def _pptx() -> Any:
    return require("pptx", "formats", "python-pptx")


def _paragraph_text(p: Any) -> str:
    """The shown text of an ``a:p`` element: runs, line breaks, fields other than the
    slide number and dates."""
    out: list[str] = []
    for child in p:
        tag = child.tag
        if tag in (f"{_A}r", f"{_A}fld"):
            if tag == f"{_A}fld" and (child.get("type") or "").lower().startswith(
                _DROPPED_FIELD_PREFIXES
            ):
                continue
            t = child.find(f"{_A}t")
            if t is not None and t.text:
                out.append(t.text)
        elif tag == f"{_A}br":
            out.append("\n")
    return "".join(out)


def _level_props(lst_style: Any, level: int) -> Any:
    if lst_style is None:
        return None
    return lst_style.find(f"{_A}lvl{level + 1}pPr")


def _bullet_of(ppr: Any) -> tuple[bool, int] | None:
    """From one ``a:pPr`` / ``a:lvlNpPr``: (shows a bullet, auto-number start), or None when
    it says nothing about bullets."""
    if ppr is None:
        return None
    if ppr.find(f"{_A}buNone") is not None:
        return (False, 0)
    auto = ppr.find(f"{_A}buAutoNum")
    if auto is not None:
        try:
            start = int(auto.get("startAt", "1"))
        except ValueError:
            start = 1
        return (True, start)
    if ppr.find(f"{_A}buChar") is not None or ppr.find(f"{_A}buBlip") is not None:
        return (True, 0)
    return None


class _Slide:
    """Writes one slide's blocks."""

    def __init__(self, out: TextBuilder, number: int, pptx: Any) -> None:
        self.out = out
        self.number = number
        self.ph = pptx.enum.shapes.PP_PLACEHOLDER
        self.group = pptx.enum.shapes.MSO_SHAPE_TYPE.GROUP
        self.furniture = {self.ph.SLIDE_NUMBER, self.ph.DATE, self.ph.FOOTER, self.ph.HEADER}
        self.titles = {self.ph.TITLE, self.ph.CENTER_TITLE, self.ph.VERTICAL_TITLE}

    def _inherited(self, shape: Any) -> list[Any]:
        """The list styles a shape's paragraphs inherit from, nearest first."""
        styles: list[Any] = []
        base = shape
        for _ in range(3):  # slide shape -> layout placeholder -> master placeholder
            body = getattr(getattr(base, "_element", None), "txBody", None)
            if body is not None:
                styles.append(body.find(f"{_A}lstStyle"))
            if not getattr(base, "is_placeholder", False):
                break
            try:
                base = base._base_placeholder
            except (KeyError, AttributeError, ValueError):
                break
            if base is None:
                break
        if getattr(shape, "is_placeholder", False):
            try:
                kind = shape.placeholder_format.type
            except ValueError:
                kind = None
            master = shape.part.slide_layout.slide_master._element
            tx_styles = master.find(
                "{http://schemas.openxmlformats.org/presentationml/2006/main}txStyles"
            )
            if tx_styles is not None:
                name = (
                    "titleStyle"
                    if kind in self.titles
                    else "bodyStyle"
                    if kind in (self.ph.BODY, self.ph.OBJECT, None)
                    else "otherStyle"
                )
                styles.append(
                    tx_styles.find(
                        f"{{http://schemas.openxmlformats.org/presentationml/2006/main}}{name}"
                    )
                )
        return styles

    def text_frame(self, shape: Any) -> None:
        inherited: list[Any] | None = None
        counters: dict[int, int] = {}
        for paragraph in shape.text_frame.paragraphs:
            p = paragraph._p
            text = _paragraph_text(p)
            if not text.strip():
                continue
            level = max(0, min(int(paragraph.level or 0), 8))
            found = _bullet_of(p.find(f"{_A}pPr"))
            if found is None:
                if inherited is None:
                    inherited = self._inherited(shape)
                for style in inherited:
                    found = _bullet_of(_level_props(style, level))
                    if found is not None:
                        break
            bullet, start = found or (False, 0)
            if not bullet:
                counters.clear()
                self.out.paragraph(text, slide=self.number)
                continue
            for deeper in [k for k in counters if k > level]:
                del counters[deeper]
            number: int | None = None
            if start:
                number = counters[level] = counters.get(level, start - 1) + 1
            else:
                counters.pop(level, None)
            self.out.list_item(text, depth=level, ordered=number, slide=self.number)

    def table(self, shape: Any) -> None:
        rows = []
        for row in shape.table.rows:
            cells = []
            for cell in row.cells:
                if cell.is_spanned:
                    cells.append("")
                else:
                    cells.append(
                        " ".join(_paragraph_text(p._p) for p in cell.text_frame.paragraphs)
                    )
            rows.append(cells)
        self.out.table(rows, slide=self.number)

    def shapes(self, shapes: Iterable[Any], title: Any) -> None:
        for shape in shapes:
            if title is not None and shape.shape_id == title.shape_id:
                continue
            if shape.is_placeholder:
                try:
                    kind = shape.placeholder_format.type
                except ValueError:
                    kind = None
                if kind in self.furniture:
                    continue
            if shape.shape_type == self.group:
                self.shapes(shape.shapes, None)
            elif getattr(shape, "has_table", False) and shape.has_table:
                self.table(shape)
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                self.text_frame(shape)

    def notes(self, slide: Any) -> None:
        if not slide.has_notes_slide:
            return
        frame = slide.notes_slide.notes_text_frame
        if frame is None:
            return
        first = True
        for paragraph in frame.paragraphs:
            text = _paragraph_text(paragraph._p)
            if text.strip():
                self.out.quote(("Notes: " if first else "") + text, slide=self.number)
                first = False


def _has_text(shapes: Iterable[Any], skip: Any) -> bool:
    for shape in shapes:
        if skip is not None and shape.shape_id == skip.shape_id:
            continue
        if hasattr(shape, "shapes"):  # a group
            if _has_text(shape.shapes, None):
                return True
        elif (getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip()) or (
            getattr(shape, "has_table", False) and shape.has_table
        ):
            return True
    return False


def _has_notes(slide: Any) -> bool:
    if not slide.has_notes_slide:
        return False
    frame = slide.notes_slide.notes_text_frame
    return frame is not None and bool(frame.text.strip())


class PptxParser:
    """PowerPoint decks (``.pptx``): titles, shapes and notes per slide (see the module)."""

    name = "pptx"
    suffixes = (".pptx",)

    def version(self) -> str:
        return f"pptx/{VERSION} python-pptx {_pptx().__version__}"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        pptx = _pptx()
        reject_ole(data, "PowerPoint (.ppt)", ".pptx")
        try:
            deck = pptx.Presentation(io.BytesIO(data))
        except (*ZIP_ERRORS, pptx.exc.PythonPptxError) as exc:
            raise ParseError(f"corrupt: not a PPTX package ({error_kind(exc)})") from None
        except (KeyError, ValueError, TypeError, AttributeError, OSError, SyntaxError) as exc:
            raise ParseError(
                f"corrupt: the package cannot be read as a deck ({error_kind(exc)})"
            ) from None
        out = TextBuilder()
        try:
            for number, slide in enumerate(deck.slides, start=1):
                writer = _Slide(out, number, pptx)
                title = slide.shapes.title
                title_text = (
                    " ".join(_paragraph_text(p._p) for p in title.text_frame.paragraphs)
                    if title is not None and title.has_text_frame
                    else ""
                )
                if title_text.strip():
                    out.heading(title_text, 1, slide=number)
                elif _has_text(slide.shapes, title) or _has_notes(slide):
                    out.heading(UNTITLED, 1, slide=number)
                writer.shapes(slide.shapes, title)
                writer.notes(slide)
        except (*ZIP_ERRORS, pptx.exc.PythonPptxError, KeyError, ValueError, AttributeError) as exc:
            raise ParseError(f"corrupt: a slide cannot be read ({error_kind(exc)})") from None
        if out.empty:
            raise NoTextError("no text: the deck's slides hold no text")
        try:
            title = (deck.core_properties.title or "").strip()
        except (*ZIP_ERRORS, pptx.exc.PythonPptxError, KeyError, ValueError, AttributeError) as exc:
            raise ParseError(
                f"corrupt: its properties cannot be read ({error_kind(exc)})"
            ) from None
        metadata = {"title": " ".join(title.split())} if title else {}
        return [out.build(self.name, self.version(), metadata=metadata)]
