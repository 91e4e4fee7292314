"""RTF: Rich Text Format (what macOS TextEdit saves by default, WordPad, and Word's and
LibreOffice's "Save as RTF"), read by the project's own tokenizer, with the standard
library only.

What the text holds, in reading order (the Markdown shape of
:class:`~rechunk.sources.base.TextBuilder`):

* paragraphs; a paragraph at an outline level (``\\outlinelevelN``, or a style named
  ``heading N`` or carrying that level) is a heading, one in the ``Title`` style a
  level-1 heading;
* list items, where a paragraph carries a list marker (Word's ``\\listtext``, older
  writers' ``\\pntext``, or a marker and a tab opening a paragraph with a hanging indent,
  as pandoc writes them): at the list level (``\\ilvl``, else the indent), numbered
  where the marker is a number or a letter, counted here (the file's own numbers would
  change with every item inserted above);
* a paragraph in a quote style (``Quote``, ``Quotations``) is a quote;
* a paragraph written wholly in a fixed-pitch font (``\\fmodern``, or Courier, Consolas,
  Menlo and the like) is code, consecutive ones in one fence, its line breaks and
  indentation kept;
* tables, a row per line (``\\cell``, ``\\row``; a nested table's cells join the outer
  cell);
* a field's result (a link's text), Unicode (``\\uN``) and code-page characters
  (``\\'hh``, in the font's character set or the document's ``\\ansicpg``).

Not in the text: page headers and footers, footnotes and endnotes, comments, pictures,
text boxes and shapes, equations, embedded objects, hidden text (``\\v``), text deleted
with tracked changes (``\\deleted``), the rendered list numbers, index and contents
entries, a table of contents field's result and fields that change without an edit
(page numbers, page counts, dates and times), and every destination a reader may ignore
(``\\*``) that is not a field instruction. ``title`` comes from the ``\\info`` group.

A file that does not start with ``{\\rtf`` is a
:class:`~rechunk.sources.base.ParseError`; so is one with no text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["RtfParser"]

VERSION = 1
MAX_DEPTH = 10_000  # nested groups: deeper is a damaged or hostile file

_TOKEN = re.compile(
    r"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?"  # a control word and its parameter
    r"|\\'([0-9a-fA-F]{2})"  # a byte in the current code page
    r"|\\([\s\S])"  # a control symbol
    r"|([{}])"
    r"|[\r\n]+"  # line ends in the file are not text
    r"|([^\\{}\r\n]+)"
)
# destinations whose text is not the document's (read for what they say, or skipped)
_SKIPPED = frozenset(
    {
        "fonttbl", "colortbl", "stylesheet", "info", "pict", "object", "objdata",
        "header", "headerl", "headerr", "headerf", "footer", "footerl", "footerr",
        "footerf", "footnote", "annotation", "atnid", "atnauthor", "atndate", "atnref",
        "atrfstart", "atrfend", "listtable", "listoverridetable", "revtbl", "rsidtbl",
        "generator", "xmlnstbl", "themedata", "colorschememapping", "latentstyles",
        "datastore", "mmath", "mmathPr", "pgdsctbl", "pntxta", "pntxtb", "pn", "xe", "tc", "txe",
        "bkmkstart", "bkmkend", "shp", "shpinst", "nonshppict", "shppict", "template",
        "filetbl", "private", "userprops", "docvar", "wgrffmtfilter", "fldtype",
        "datafield", "formfield", "ftnsep", "ftnsepc", "ftncn", "aftnsep", "aftnsepc",
        "aftncn", "expandedcolortbl", "listpicture",
    }
)  # fmt: skip
_MARKERS = frozenset({"listtext", "pntext"})  # the rendered marker of a list item
_FAMILIES = frozenset(
    {"fnil", "froman", "fswiss", "fmodern", "fscript", "fdecor", "ftech", "fbidi"}
)
# fields whose result is furniture or changes without an edit
_DROPPED_FIELDS = frozenset(
    {
        "PAGE", "NUMPAGES", "SECTIONPAGES", "SECTION", "DATE", "TIME", "PRINTDATE",
        "SAVEDATE", "CREATEDATE", "EDITTIME", "TOC", "FILENAME", "FILESIZE", "NUMWORDS",
        "NUMCHARS", "REVNUM", "PAGEREF",
    }
)  # fmt: skip
_SYMBOLS = {
    "tab": "\t", "line": "\n", "emdash": "\u2014", "endash": "\u2013", "bullet": "\u2022",
    "lquote": "\u2018", "rquote": "\u2019", "ldblquote": "\u201c", "rdblquote": "\u201d",
    "emspace": "\u2003", "enspace": "\u2002", "qmspace": "\u2005", "zwj": "\u200d",
    "zwnj": "\u200c", "ltrmark": "", "rtlmark": "", "chftn": "", "chpgn": "", "chdate": "",
}  # fmt: skip
_CONTROL_SYMBOLS = {"~": "\u00a0", "-": "", "_": "\u2011", "\\": "\\", "{": "{", "}": "}"}
# \fcharsetN -> Python codec (0 and 1: the document's code page)
_CHARSETS = {
    77: "mac_roman", 128: "cp932", 129: "cp949", 130: "johab", 134: "cp936", 136: "cp950",
    161: "cp1253", 162: "cp1254", 163: "cp1258", 177: "cp1255", 178: "cp1256",
    186: "cp1257", 204: "cp1251", 222: "cp874", 238: "cp1250",
}  # fmt: skip
_MONO = re.compile(
    r"mono|courier|consolas|menlo|monaco|lucida console|lucida sans typewriter|fixedsys|"
    r"source code|inconsolata|andale|\bcode\b",
    re.IGNORECASE,
)
_CODE_STYLES = frozenset(
    {"source code", "source text", "preformatted text", "html preformatted", "code"}
)
_QUOTE_STYLES = frozenset({"quote", "quotations", "block text", "intense quote"})
_MARKER = re.compile(r"[\u2022\u25cf\u25e6\u25aa\u25a0\u2013\u2014\u00b7o*\-\uf0b7\uf0a7]")
_NUMBERED = re.compile(r"\(?(?:[0-9]{1,4}|[a-zA-Z]{1,4})[.)]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_HEADING_STYLE = re.compile(r"heading\s*([1-9])", re.IGNORECASE)


@dataclass
class _State:
    """What a group carries (copied when a group opens, dropped when it closes)."""

    skip: bool = False  # inside a destination whose text is not read
    capture: str = ""  # the destination whose text is collected: "marker", "fldinst"...
    uc: int = 1  # characters that follow \uN as its fallback
    font: int = 0
    hidden: bool = False
    # paragraph properties
    style: int = 0
    outline: int | None = None
    intbl: bool = False
    li: int = 0
    fi: int = 0
    ilvl: int | None = None

    def copy(self) -> _State:
        return _State(
            self.skip, self.capture, self.uc, self.font, self.hidden, self.style,
            self.outline, self.intbl, self.li, self.fi, self.ilvl,
        )  # fmt: skip


@dataclass
class _Font:
    charset: int = 0
    family: str = ""
    name: str = ""

    @property
    def mono(self) -> bool:
        return self.family == "fmodern" or bool(_MONO.search(self.name))


@dataclass
class _Style:
    name: str = ""
    outline: int | None = None


@dataclass
class _Paragraph:
    parts: list[str] = field(default_factory=list)
    marker: list[str] = field(default_factory=list)
    mono: int = 0  # non-blank characters written in a fixed-pitch font
    other: int = 0  # and in any other font


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out = TextBuilder()
        self.codepage = "cp1252"
        self.fonts: dict[int, _Font] = {}
        self.mono_fonts: set[int] = set()  # the fonts of fixed pitch
        self.styles: dict[int, _Style] = {}
        self.title: list[str] = []
        self.paragraph = _Paragraph()
        self.code: list[str] = []  # consecutive code paragraphs, written as one fence
        self.counters: dict[int, int] = {}  # list depth -> the last number given
        self.cell: list[str] = []  # the paragraphs of the table cell being read
        self.row: list[str] = []
        self.rows: list[list[str]] = []
        self.pending_bytes = bytearray()
        self.pending_codec = ""
        self.fallback = 0  # characters still to skip after a \uN
        self.field_stack: list[list[str]] = []  # the instruction text of each open field
        self.defined = _Font()  # the font a font table entry defines
        self.defined_number: int | None = None
        self.style_number = 0
        self.deff = 0  # the default font (\\deffN), which \\plain returns to

    # -- text ---------------------------------------------------------------------------

    def codec(self, state: _State) -> str:
        font = self.fonts.get(state.font)
        if font is not None and font.charset in _CHARSETS:
            return _CHARSETS[font.charset]
        return self.codepage

    def flush_bytes(self, state: _State) -> None:
        if self.pending_bytes:
            data, self.pending_bytes = bytes(self.pending_bytes), bytearray()
            self.write(state, data.decode(self.pending_codec, "replace"), raw=True)

    def write(self, state: _State, text: str, raw: bool = False) -> None:
        """Text of the current destination (``raw``: already past the \\uN fallback)."""
        if not raw and self.fallback:
            skipped = min(self.fallback, len(text))
            text, self.fallback = text[skipped:], self.fallback - skipped
        if not text or state.hidden:
            return
        if state.capture:
            self.captured(state, text)
            return
        if state.skip:
            return
        p = self.paragraph
        p.parts.append(text)
        visible = len("".join(text.split()))
        if visible:
            if state.font in self.mono_fonts:
                p.mono += visible
            else:
                p.other += visible

    def captured(self, state: _State, text: str) -> None:
        if state.capture == "marker":
            self.paragraph.marker.append(text)
        elif state.capture == "fldinst" and self.field_stack:
            self.field_stack[-1].append(text)
        elif state.capture == "title":
            self.title.append(text)
        elif state.capture == "font":
            self.defined.name += text
        elif state.capture == "style":
            style = self.styles.setdefault(self.style_number, _Style())
            style.name += text

    # -- blocks -------------------------------------------------------------------------

    def end_paragraph(self, state: _State) -> None:
        p, self.paragraph = self.paragraph, _Paragraph()
        text = _joined(p.parts)
        if state.intbl:
            self.cell.append(text)
            return
        self.flush_table()
        style = self.styles.get(state.style, _Style())
        name = style.name.strip().rstrip(";").strip().lower()
        blank = not text.strip()
        code = (p.mono and not p.other) or name in _CODE_STYLES
        if code or (blank and self.code and state.font in self.mono_fonts):
            if not blank or self.code:
                self.code.append(text.replace("\u00a0", " ").rstrip())
            return
        self.flush_code()
        if blank:
            return
        outline = state.outline if state.outline is not None else style.outline
        heading = _HEADING_STYLE.fullmatch(name)
        if heading is not None and outline is None:
            outline = int(heading.group(1)) - 1
        if name == "title":
            outline = 0
        if outline is not None and 0 <= outline < 9:
            self.counters.clear()
            self.out.heading(text, min(outline + 1, 6))
            return
        marker = _joined(p.marker).strip()
        if not marker and state.fi < 0:  # pandoc's: the marker, then a tab
            head, tab, rest = text.lstrip().partition("\t")
            if tab and _is_marker(head.strip()):
                marker, text = head.strip(), rest
        elif marker.isdigit():  # a rendered number with no punctuation after it
            marker += "."
        if marker and _is_marker(marker):
            depth = state.ilvl if state.ilvl is not None else max(0, state.li // 360 - 1)
            depth = min(depth, 8)
            for deeper in [k for k in self.counters if k > depth]:
                del self.counters[deeper]
            number = None
            if _NUMBERED.fullmatch(marker):
                number = self.counters[depth] = self.counters.get(depth, 0) + 1
            else:
                self.counters.pop(depth, None)
            self.out.list_item(text, depth, number)
            return
        self.counters.clear()
        if name in _QUOTE_STYLES:
            self.out.quote(text)
        else:
            self.out.paragraph(text)

    def end_cell(self) -> None:
        if self.paragraph.parts:
            self.cell.append(_joined(self.paragraph.parts))
            self.paragraph = _Paragraph()
        self.row.append(" ".join(t for t in self.cell if t.strip()))
        self.cell = []

    def end_row(self) -> None:
        if self.cell:
            self.row.append(" ".join(self.cell))
            self.cell = []
        self.rows.append(self.row)
        self.row = []

    def flush_table(self) -> None:
        if self.row or self.cell:
            self.end_row()
        if self.rows:
            self.flush_code()
            self.counters.clear()
            self.out.table(self.rows)
            self.rows = []

    def flush_code(self) -> None:
        while self.code and not self.code[-1].strip():
            self.code.pop()
        if self.code:
            self.out.code("\n".join(self.code))
        self.code = []

    # -- the token loop -----------------------------------------------------------------

    def read(self) -> None:
        text = self.text
        state = _State()
        stack: list[_State] = []
        fields_at: list[int] = []  # the stack depth at which each open field began
        ignorable = False  # the last token was \*
        pos = 0
        end = len(text)
        while pos < end:
            match = _TOKEN.match(text, pos)
            if match is None:  # a lone backslash at the end
                break
            pos = match.end()
            word, param, hexbyte, symbol, brace, plain = match.groups()
            if match.lastindex is None:  # line ends in the file: not text, not a boundary
                continue
            if hexbyte is not None:
                if self.fallback:
                    self.fallback -= 1
                    continue
                codec = self.codec(state)
                if self.pending_bytes and codec != self.pending_codec:
                    self.flush_bytes(state)
                self.pending_codec = codec
                self.pending_bytes.append(int(hexbyte, 16))
                continue
            self.flush_bytes(state)
            if plain is not None:
                self.write(state, plain)
                continue
            if brace == "{":
                if len(stack) >= MAX_DEPTH:
                    raise ParseError("corrupt: nested too deeply to read")
                stack.append(state)
                state = state.copy()
                self.fallback = 0
                ignorable = False
                continue
            if brace == "}":
                if state.capture == "font":
                    self.commit_font()
                if fields_at and len(stack) == fields_at[-1]:
                    fields_at.pop()
                    self.field_stack.pop()
                if not stack:
                    break  # the document's group closed: what follows is not RTF
                state = stack.pop()
                self.fallback = 0
                continue
            if symbol is not None:
                if symbol == "*":
                    ignorable = True
                elif symbol in "\r\n":
                    self.end_paragraph(state)
                elif symbol in _CONTROL_SYMBOLS:
                    self.write(state, _CONTROL_SYMBOLS[symbol])
                continue
            number = int(param) if param is not None else None
            was_ignorable, ignorable = ignorable, False
            if word == "bin":  # raw bytes follow: never text
                pos += max(number or 0, 0)
                continue
            if word == "u" and number is not None:
                # a signed 16-bit unit (Word writes U+F0B7 as \u-3913); a pair of them
                # for a character beyond U+FFFF, joined when the paragraph ends
                self.write(state, chr(number % 65536 if number < 0 else number % 0x110000))
                self.fallback = state.uc
                continue
            self.fallback = 0
            self.control(word, number, state, was_ignorable, stack, fields_at)
        self.flush_bytes(state)
        if self.paragraph.parts:
            self.end_paragraph(state)
        self.flush_table()
        self.flush_code()

    def control(
        self,
        word: str,
        number: int | None,
        state: _State,
        ignorable: bool,
        stack: list[_State],
        fields_at: list[int],
    ) -> None:
        """One control word (other than \\u and \\bin)."""
        if state.skip:
            self.skipped_control(word, number, state, ignorable)
            return
        if word in _SYMBOLS:
            self.write(state, _SYMBOLS[word])
        elif word in ("par", "sect"):
            self.end_paragraph(state)
        elif word == "cell":
            self.end_cell()
        elif word == "nestcell":  # a nested table's cell: joins the outer cell
            self.write(state, " ")
        elif word == "row":
            self.end_row()
        elif word == "pard":
            state.style, state.outline, state.intbl = 0, None, False
            state.li = state.fi = 0
            state.ilvl = None
        elif word == "plain":
            state.hidden, state.font = False, self.deff
        elif word == "f":
            state.font = number or 0
        elif word in ("v", "deleted"):  # hidden text, text deleted with tracked changes
            state.hidden = number != 0
        elif word == "uc":
            state.uc = max(number or 0, 0)
        elif word == "s":
            state.style = number or 0
        elif word == "outlinelevel":
            state.outline = number
        elif word == "intbl":
            state.intbl = True
        elif word == "li":
            state.li = number or 0
        elif word == "fi":
            state.fi = number or 0
        elif word == "ilvl":
            state.ilvl = number or 0
        elif word == "ansicpg" and number:
            self.codepage = _codepage(number)
        elif word == "mac":
            self.codepage = "mac_roman"
        elif word == "deff":
            self.deff = number or 0
        elif word == "fonttbl":
            state.skip, state.capture = True, "fonttable"
        elif word == "stylesheet":
            state.skip, state.capture = True, "stylesheet"
        elif word == "info":
            state.skip, state.capture = True, "info"
        elif word in _MARKERS:
            state.skip, state.capture = True, "marker"
        elif word == "field":
            fields_at.append(len(stack))
            self.field_stack.append([])
        elif word == "fldinst":
            state.skip, state.capture = True, "fldinst"
        elif word == "fldrslt":
            instruction = _joined(self.field_stack[-1]).split() if self.field_stack else []
            if instruction and instruction[0].upper() in _DROPPED_FIELDS:
                state.skip, state.capture = True, ""
        elif word in _SKIPPED or ignorable:
            state.skip, state.capture = True, ""

    def skipped_control(
        self, word: str, number: int | None, state: _State, ignorable: bool
    ) -> None:
        """A control word inside a destination that is not read: what it says of fonts,
        styles and the title."""
        capture = state.capture
        if capture in ("fonttable", "font"):
            if word == "f":  # a font's definition starts (in its own group, or running on)
                self.commit_font()
                self.defined_number, self.defined = number or 0, _Font()
                state.capture = "font"
                return
            if word == "fcharset":
                self.defined.charset = number or 0
                return
            if word in _FAMILIES:
                self.defined.family = word
                return
        elif capture in ("stylesheet", "style"):
            if word in ("s", "cs", "ds", "ts"):
                self.style_number = (number or 0) if word == "s" else -1 - (number or 0)
                self.styles[self.style_number] = _Style()
                state.capture = "style"
                return
            if word == "outlinelevel" and capture == "style":
                self.styles[self.style_number].outline = number
                return
        elif capture == "info" and word == "title":
            state.capture = "title"
            return
        if word in _SYMBOLS:
            self.write(state, _SYMBOLS[word])
        elif word in _SKIPPED or word in _MARKERS or word == "fldinst" or ignorable:
            state.capture = ""  # a destination inside: its text is no name, title or marker

    def commit_font(self) -> None:
        number = self.defined_number
        if number is not None:
            self.fonts[number] = self.defined
            if self.defined.mono:
                self.mono_fonts.add(number)
            else:
                self.mono_fonts.discard(number)
        self.defined_number = None


def _codepage(number: int) -> str:
    name = "mac_roman" if number == 10000 else f"cp{number}"
    try:
        "".encode(name)
    except LookupError:
        return "cp1252"
    return name


def _joined(parts: list[str]) -> str:
    """Text parts as one string; surrogate pairs written as two \\uN become one character."""
    text = "".join(parts)
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _is_marker(marker: str) -> bool:
    return bool(_MARKER.fullmatch(marker) or _NUMBERED.fullmatch(marker))


class RtfParser:
    """Rich Text Format (``.rtf``): see the module docstring."""

    name = "rtf"
    suffixes = (".rtf",)

    def version(self) -> str:
        return f"rtf/{VERSION}"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
        if not head.startswith(b"{\\rtf"):
            raise ParseError("not an RTF file: it does not start with {\\rtf")
        reader = _Reader(data.decode("latin-1"))
        reader.read()
        if reader.out.empty:
            raise NoTextError("no text: the document holds no text")
        title = " ".join(_joined(reader.title).split())
        metadata = {"title": title} if title else {}
        return [reader.out.build(self.name, self.version(), metadata=metadata)]
