"""PDF: text with positions from PDFium, rebuilt into paragraphs that survive reflow.

PDFium (through ``pypdfium2``, Apache-2.0/BSD; PyMuPDF is AGPL and stays out) gives each
character of a page with its box, baseline, font size and font. :mod:`._pdf_layout`
rebuilds lines, columns, paragraphs, headings and list items from them, drops running
headers, footers and page numbers, and joins paragraphs and hyphenated words across
line and page breaks, so that a paragraph inserted on page 2 leaves the text of every
later paragraph as it was although every later page reflowed. A PDF without a text
layer (a scan) is a :class:`ParseError`: rechunk does no OCR.
"""

from __future__ import annotations

import ctypes
import math
import threading
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rechunk._optional import require
from rechunk.sources._pdf_layout import Glyph, Page, layout
from rechunk.sources.base import Parsed, ParseError, TextBuilder

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["PdfParser"]

# PDFium's FPDF_GetLastError codes, as its public header names them
_PDFIUM_ERRORS = {
    1: "unknown error",
    2: "file not found or could not be opened",
    3: "not a PDF or corrupted",
    4: "password required or incorrect password",
    5: "unsupported security scheme",
    6: "page not found or content error",
}
_FIXED_PITCH = 1  # PDF font descriptor flag bit 1
_FORCE_BOLD = 1 << 18
_HYPHEN_MARKS = frozenset((0x02, 0xFFFE))
_SPACES = frozenset((0x7F, 0xA0, 0x2028, 0x2029, 0x3000))
_INVISIBLE = frozenset((0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF))  # dropped, no space
# typographic ligatures a font may map to one character: the letters they stand for
_LIGATURES = {
    0xFB00: "ff", 0xFB01: "fi", 0xFB02: "fl", 0xFB03: "ffi", 0xFB04: "ffl", 0xFB05: "st",
    0xFB06: "st",
}  # fmt: skip
# the pairs of characters the Unicode bidirectional algorithm mirrors (BidiMirroring.txt)
# that a text is likely to hold: PDFium turns them round in the lines it reverses
_MIRROR_PAIRS = (
    "()[]{}<>«»‹›⁅⁆⁽⁾₍₎⌈⌉⌊⌋〈〉⟦⟧⟨⟩⟪⟫⦃⦄⦅⦆"
    "〈〉《》「」『』【】〔〕〖〗〘〙〚〛（）＜＞［］｛｝｟｠｢｣≤≥≪≫⊂⊃⊆⊇∈∋"
)
_MIRROR = dict(zip(_MIRROR_PAIRS[::2], _MIRROR_PAIRS[1::2]))
_MIRROR.update({b: a for a, b in _MIRROR.items()})
# PDFium is not thread-safe: one document at a time in this process
_PDFIUM_LOCK = threading.Lock()


def _pdfium() -> tuple[Any, Any]:
    module = require("pypdfium2", "formats")
    raw = require("pypdfium2.raw", "formats", "pypdfium2")
    return module, raw


def _open(data: bytes) -> Any:
    pdfium, raw = _pdfium()
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = raw.FPDF_GetLastError()
        if code == 4:
            raise ParseError("encrypted (password required)") from None
        reason = _PDFIUM_ERRORS.get(code) or " ".join(str(exc).split()) or "unreadable"
        raise ParseError(f"not a readable PDF: PDFium says {reason}") from None


def _page_text(raw: Any, handle: Any, count: int) -> list[int]:
    """The page's characters, one UTF-16 unit per character index (PDFium keeps a
    character beyond the BMP as two): in one call when the text PDFium writes has one
    unit per character (nearly always), else one by one."""
    buffer = (ctypes.c_ushort * (count + 1))()
    written = raw.FPDFText_GetText(handle, 0, count, buffer)
    if written == count + 1:
        return list(buffer[:count])
    return [raw.FPDFText_GetUnicode(handle, index) for index in range(count)]


def _object_of(raw: Any) -> Any:
    """``FPDFText_GetTextObject`` returning the object's address as an int (the same
    function, another prototype: no pointer object to build and compare per character)."""
    address = ctypes.cast(raw.FPDFText_GetTextObject, ctypes.c_void_p).value
    if not address:  # pragma: no cover - a function of a loaded library has an address
        raise ParseError("PDFium has no FPDFText_GetTextObject")
    prototype = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    return prototype(address)


def _page_glyphs(raw: Any, textpage: Any) -> Iterator[Glyph]:
    """The page's characters with their geometry, in content-stream order. Spaces (the
    PDF's own and those PDFium generates for a gap) become a flag on the next glyph;
    PDFium's line breaks are dropped (the layout finds lines from positions).

    Per character PDFium is asked for its box and its text object only; the font, its
    size and the baseline's offset from the box are asked once per text object."""
    handle = textpage.raw
    count = raw.FPDFText_CountChars(handle)
    if count <= 0:
        return
    codes = _page_text(raw, handle, count)
    rect = raw.FS_RECTF()
    matrix = raw.FS_MATRIX()
    origin_x, origin_y = ctypes.c_double(), ctypes.c_double()
    flags = ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    loose_box = raw.FPDFText_GetLooseCharBox
    text_object = _object_of(raw)
    rect_p, matrix_p = ctypes.byref(rect), ctypes.byref(matrix)
    ox_p, oy_p, flags_p = ctypes.byref(origin_x), ctypes.byref(origin_y), ctypes.byref(flags)
    fonts: dict[tuple[bytes, int], int] = {}
    font_kinds: list[tuple[bool, bool]] = []
    new = tuple.__new__
    space = False
    last_object: int | None = -1
    size = rise = 0.0
    font, mono, bold = 0, False, False
    # the glyphs since PDFium's last line break (its bidi reorders a line at a time),
    # the indexes of the spaces among them, and whether one of them is a letter of a
    # right-to-left script
    line: list[Glyph] = []
    spaces: list[int] = []
    rtl = False
    for index, code in enumerate(codes):
        if code in _HYPHEN_MARKS:  # PDFium's mark for a line-end "-" it takes to be soft
            code = 0x2D
        elif code in (0x0A, 0x0D):  # PDFium's line break
            yield from _as_drawn(raw, handle, line, spaces) if rtl else line
            line, spaces, rtl = [], [], False
            space = True
            continue
        elif code <= 0x20 or code in _SPACES:
            space = True
            spaces.append(index)
            continue
        elif code in _INVISIBLE:
            continue
        elif 0xD800 <= code < 0xE000:  # a character beyond the BMP comes in two halves
            low = codes[index + 1] if index + 1 < count else 0
            if code >= 0xDC00 or not 0xDC00 <= low < 0xE000:
                continue  # the second half (read with the first), or a lone one
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        if not loose_box(handle, index, rect_p):
            continue
        bottom = rect.bottom
        obj = text_object(handle, index)
        if obj != last_object or obj is None:
            if not raw.FPDFText_GetCharOrigin(handle, index, ox_p, oy_p):
                continue
            rise = origin_y.value - bottom
            size = raw.FPDFText_GetFontSize(handle, index)
            if raw.FPDFText_GetMatrix(handle, index, matrix_p):
                size *= math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c)) or 1.0
            if size <= 0:
                size = rect.top - bottom
            raw.FPDFText_GetFontInfo(handle, index, name, 256, flags_p)
            key = (name.value, flags.value)
            font = fonts.get(key, -1)
            if font < 0:
                font = fonts[key] = len(fonts)
                lower = name.value.lower()
                font_kinds.append(
                    (
                        bool(flags.value & _FIXED_PITCH) or b"mono" in lower or b"courier" in lower,
                        bool(flags.value & _FORCE_BOLD) or b"bold" in lower or b"heavy" in lower,
                    )
                )
            mono, bold = font_kinds[font]
            last_object = obj
        char = _LIGATURES.get(code) or chr(code)
        if not rtl and code >= 0x590 and unicodedata.bidirectional(char) in ("R", "AL"):
            rtl = True
        line.append(
            new(
                Glyph,
                (
                    char,
                    rect.left,
                    rect.right,
                    bottom,
                    rect.top,
                    bottom + rise,
                    size,
                    font,
                    mono,
                    bold,
                    space,
                ),
            )
        )
        space = False
    yield from _as_drawn(raw, handle, line, spaces) if rtl else line


def _as_drawn(raw: Any, handle: Any, line: list[Glyph], spaces: list[int]) -> list[Glyph]:
    """A line PDFium read with right-to-left letters in it, in the order its glyphs are
    drawn (left to right), with the characters drawn.

    PDFium runs the bidirectional algorithm over each line, taking the content stream's
    order for the order the glyphs are seen: it reverses the line's right-to-left runs and
    turns their brackets round. That holds for a PDF that draws such text as it is seen
    (most do) and reverses the words of one that draws it in reading order (a typesetter
    without bidi). The layout tells those apart from what the line says, so here each
    glyph goes back where the pen drew it: by its origin from the left, a combining mark
    (drawn where the pen stood after its letter) before the glyph drawn at the same place
    (marks on one letter in their canonical order);
    a bracket PDFium took right to left (a neighbour in its order on the wrong side) turned
    back; a space before the glyph right of it (not the one after it in PDFium's order)."""
    count = len(line)
    rows: list[float] = []  # the line's baselines (one, but for a raised or lowered glyph)
    keys = []
    for position, glyph in enumerate(line):
        tolerance = 0.3 * max(glyph.size, 1.0)
        row = next((r for r, base in enumerate(rows) if abs(base - glyph.base) <= tolerance), -1)
        if row < 0:
            row = len(rows)
            rows.append(glyph.base)
        # marks on one letter in their canonical order (the order NFC gives them)
        combining = unicodedata.combining(glyph.char)
        mark = combining > 0 or unicodedata.category(glyph.char) == "Mn"
        keys.append((row, glyph.x0 - (0.01 if mark else 0.0), combining, -position, mark))
        char = glyph.char
        if char in _MIRROR:
            before = line[position - 1] if position else None
            after = line[position + 1] if position + 1 < count else None
            if (before is not None and before.x0 > glyph.x0 + 0.01) or (
                after is not None and after.x0 < glyph.x0 - 0.01
            ):
                line[position] = glyph._replace(char=_MIRROR[char])
    order = sorted(range(count), key=keys.__getitem__)
    drawn = [line[i]._replace(space=False) for i in order]
    if drawn and line[0].space:
        drawn[0] = drawn[0]._replace(space=True)
    rect = raw.FS_RECTF()
    for index in spaces:
        if not raw.FPDFText_GetLooseCharBox(handle, index, ctypes.byref(rect)):
            continue
        # the glyph drawn first to the right of the space, on its line
        for at, i in enumerate(order):
            glyph = drawn[at]
            if (
                not keys[i][4]
                and glyph.x0 >= rect.left - 0.05
                and glyph.bottom < rect.top
                and glyph.top > rect.bottom
            ):
                drawn[at] = glyph._replace(space=True)
                break
    return drawn


def _rules(raw: Any, page: Any) -> list[tuple[float, float, float, float]]:
    """The bounds of the page's thin shapes (a table's rules), not those inside forms."""
    handle = page.raw
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    refs = [ctypes.byref(v) for v in (left, bottom, right, top)]
    path = raw.FPDF_PAGEOBJ_PATH
    found = []
    for index in range(raw.FPDFPage_CountObjects(handle)):
        obj = raw.FPDFPage_GetObject(handle, index)
        if raw.FPDFPageObj_GetType(obj) != path or not raw.FPDFPageObj_GetBounds(obj, *refs):
            continue
        width, height = right.value - left.value, top.value - bottom.value
        if min(width, height) <= 2.5 < max(width, height):
            found.append((left.value, bottom.value, right.value, top.value))
    return found


def _metadata(document: Any, pages: int) -> dict[str, Any]:
    """The page count, and the title the document's Info dictionary gives (if any)."""
    pdfium, _ = _pdfium()
    found: dict[str, Any] = {"pages": pages}
    try:
        title = document.get_metadata_value("Title")
    except (pdfium.PdfiumError, UnicodeError, ValueError):  # a broken Info dictionary
        title = ""
    title = " ".join(str(title or "").split())
    if title:
        found["title"] = title
    return found


class PdfParser:
    """PDF files through PDFium: paragraphs, headings and list items with page locators."""

    name = "pdf"
    suffixes = (".pdf",)

    def version(self) -> str:
        pdfium, _ = _pdfium()
        return f"pdf/2 pypdfium2 {pdfium.PYPDFIUM_INFO.tag} pdfium {pdfium.PDFIUM_INFO.tag}"

    def pages(self, data: bytes) -> list[Page]:
        """Every page's glyphs, as the layout reads them."""
        _, raw = _pdfium()
        with _PDFIUM_LOCK:
            document = _open(data)
            try:
                return list(self._pages(raw, document))
            finally:
                document.close()

    def _pages(self, raw: Any, document: Any) -> Iterator[Page]:
        pdfium, _ = _pdfium()
        for number in range(len(document)):
            try:
                page = document[number]
            except pdfium.PdfiumError as exc:
                reason = " ".join(str(exc).split())
                raise ParseError(f"page {number + 1} is unreadable: {reason}") from None
            try:
                left, bottom, right, top = page.get_cropbox()
                textpage = page.get_textpage()
                try:
                    glyphs = list(_page_glyphs(raw, textpage))
                finally:
                    textpage.close()
                rules = _rules(raw, page) if glyphs else []
            finally:
                page.close()
            yield Page(number + 1, left, bottom, right, top, glyphs, rules)

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        _, raw = _pdfium()
        glyphs = 0

        def counted(pages: Iterator[Page]) -> Iterator[Page]:
            nonlocal glyphs
            for page in pages:
                glyphs += len(page.glyphs)
                yield page

        with _PDFIUM_LOCK:
            document = _open(data)
            try:
                # page by page: a page's glyphs are gone once the layout has its lines
                blocks = layout(counted(self._pages(raw, document)))
                metadata = _metadata(document, len(document))
            finally:
                document.close()
        if not glyphs:
            raise ParseError("no text layer (a scanned PDF? rechunk does no OCR)")
        builder = TextBuilder()
        for block in blocks:
            first, last = block.pages
            page: int | list[int] = first if first == last else [first, last]
            # a block across a page break: where each page's part starts, so that a chunk
            # of it cites the pages its own text is on (one that starts after the break
            # is not on the page before)
            pieces: list[tuple[int, dict[str, Any]]] = []
            if block.page_starts:
                pieces = [(0, {"page": first})]
                pieces += [(at, {"page": number}) for at, number in block.page_starts]
            if block.kind == "heading":
                builder.heading(block.text, block.level, page=page, pieces=pieces)
            elif block.kind == "list_item":
                builder.list_item(block.text, block.level, block.ordered, page=page, pieces=pieces)
            elif block.kind == "code":
                builder.code(block.text, page=page, pieces=pieces)
            elif block.kind == "table":
                builder.table(block.rows, page=page)
            else:
                builder.paragraph(block.text, page=page, pieces=pieces)
        if builder.empty:
            raise ParseError("no text layer (a scanned PDF? rechunk does no OCR)")
        return [builder.build(self.name, self.version(), metadata=metadata)]
