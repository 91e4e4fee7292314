"""DOCX: the text of a Word document's body as Word shows it, from the package's XML.

The package is read with the standard library (``zipfile`` and ``xml.etree``), not
through python-docx: python-docx's document model has no notion of tracked changes
(its ``Paragraph.text`` drops inserted runs, which are not children of the paragraph)
nor of fields, content controls or text boxes, so every one of those rules would walk
the XML anyway; reading the XML directly is as faithful, needs no extra, and on the
shared pandoc renders takes less than half the time python-docx takes only to open a
document and read its paragraphs' text. The parts are found the way Word finds them:
the main document through the package's relationships, its styles and numbering through
the main document's, in either the transitional or the strict namespace.

What the text holds, in document order (the Markdown shape of
:class:`~rechunk.sources.base.TextBuilder`):

* body paragraphs and tables, also inside content controls, custom XML and text boxes
  (a text box's paragraphs follow the paragraph that anchors it);
* headings: a paragraph whose style is ``Heading 1``-``Heading 9`` or ``Title`` (1),
  or that has an outline level of its own or through its style chain; heading
  numbering is not written (it renumbers every later heading when one is inserted);
* list items: a paragraph with numbering (``numPr``, direct or from its style) at its
  level, ordered ones with the number Word counts for them (per list, restarts and
  start values honoured; deeper levels restart under a new parent item);
* code: paragraphs in a code style (``Source Code``, ``HTML Preformatted``, ``Plain
  Text``, ``Macro Text``, ``Code``), consecutive ones in one fence, line breaks kept;
* quotes: ``Quote``, ``Intense Quote`` and ``Block Text``;
* tracked changes accepted: inserted and moved-to text kept, deleted and moved-from text
  dropped, a paragraph whose mark was deleted joined to the next one, deleted table
  rows dropped;
* fields: the displayed result of a field is kept (a hyperlink's or a cross reference's
  text), except for the table of contents and index (``TOC``, ``TOA``, ``INDEX``),
  page numbers (``PAGE``, ``NUMPAGES``, ``SECTIONPAGES``, ``PAGEREF``) and the dates
  that change whenever the file is opened or printed (``DATE``, ``TIME``,
  ``PRINTDATE``): those results are dropped; a content control that Word marks as a
  table of contents is dropped whole;
* hidden text (``w:vanish``) is dropped, as Word does not show it.

Not in the text: page headers and footers (page furniture: they are never read),
footnotes, endnotes and comments (they live in parts of their own and are not
inlined; their reference marks are dropped too), images (an image's alternative text
is not shown), charts, SmartArt and embedded objects, and the glossary document.

A file that is not a ZIP package, or whose main part is not a Word document, is a
:class:`~rechunk.sources.base.ParseError`; so is a password-protected DOCX (Office
stores it in an OLE compound file around an ``EncryptionInfo`` stream) and a legacy
binary ``.doc`` renamed ``.docx``.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from rechunk.sources._office import open_package, reject_ole, xml_part
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["DocxParser"]

VERSION = 1

_W_TRANSITIONAL = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_W_STRICT = "http://purl.oclc.org/ooxml/wordprocessingml/main"
_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_MATH = (
    "http://schemas.openxmlformats.org/officeDocument/2006/math",
    "http://purl.oclc.org/ooxml/officeDocument/math",
)
_MATH_TAGS = frozenset(f"{{{m}}}{local}" for m in _MATH for local in ("oMath", "oMathPara"))
_MATH_TEXT = frozenset(f"{{{m}}}t" for m in _MATH)
_CORE_NS = {
    "dc": "http://purl.org/dc/elements/1.1/",
    "cp": "http://schemas.openxmlformats.org/package/2006/metadata/core-properties",
}

_HEADING_STYLE = re.compile(r"heading\s*([1-9])")
# Word's built-in "List Bullet 2" and the like: a list at that depth on its own level 0
_LIST_STYLE = re.compile(r"list(?: bullet| number| continue)? ([2-9])")
_CODE_STYLES = frozenset(
    {"source code", "html preformatted", "plain text", "macro", "macro text", "code", "code block"}
)
_QUOTE_STYLES = frozenset({"quote", "intense quote", "block text"})
# fields whose displayed result is page furniture or changes without an edit
_DROPPED_FIELDS = frozenset(
    {
        "TOC",
        "TOA",
        "INDEX",
        "PAGE",
        "NUMPAGES",
        "SECTIONPAGES",
        "PAGEREF",
        "DATE",
        "TIME",
        "PRINTDATE",
    }
)
_BULLET_FORMATS = frozenset({"bullet", "none", ""})


def _open_zip(data: bytes) -> zipfile.ZipFile:
    reject_ole(data, "Word (.doc)", ".docx")
    return open_package(data, "a DOCX package")


def _rels(zf: zipfile.ZipFile, part: str) -> dict[str, str]:
    """The part's internal relationships: type's last path segment -> target part name."""
    folder, name = posixpath.split(part)
    root = xml_part(zf, posixpath.join(folder, "_rels", name + ".rels"))
    found: dict[str, str] = {}
    if root is None:
        return found
    for rel in root.iter(f"{{{_REL_NS}}}Relationship"):
        if rel.get("TargetMode") == "External":
            continue
        kind = (rel.get("Type") or "").rsplit("/", 1)[-1]
        target = rel.get("Target") or ""
        if not target or kind in found:
            continue
        if target.startswith("/"):
            resolved = target.lstrip("/")
        else:
            resolved = posixpath.normpath(posixpath.join(folder, target))
        found[kind] = resolved
    return found


# -- styles and numbering ---------------------------------------------------------------------


@dataclass
class _Style:
    name: str = ""
    based_on: str | None = None
    outline: int | None = None  # 0-8: an outline level of its own
    num: tuple[str, int] | None = None  # (numId, ilvl)


@dataclass
class _Resolved:
    heading: int = 0
    depth: int = 0  # the list depth a built-in list style's name gives
    code: bool = False
    quote: bool = False
    num: tuple[str, int] | None = None


_MAX_SPAN = 63  # columns a cell may span: Word's widest table (a larger value is no table)


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


_TAGS = [
    "body",
    "p",
    "r",
    "t",
    "tbl",
    "tr",
    "tc",
    "pPr",
    "rPr",
    "trPr",
    "tcPr",
    "gridSpan",
    "pStyle",
    "outlineLvl",
    "numPr",
    "numId",
    "ilvl",
    "val",
    "tab",
    "ptab",
    "br",
    "cr",
    "noBreakHyphen",
    "fldChar",
    "fldCharType",
    "instrText",
    "fldSimple",
    "instr",
    "ins",
    "del",
    "moveFrom",
    "moveTo",
    "hyperlink",
    "smartTag",
    "customXml",
    "sdt",
    "sdtContent",
    "sdtPr",
    "docPartGallery",
    "dir",
    "bdo",
    "vanish",
    "txbxContent",
    "drawing",
    "pict",
    "style",
    "styleId",
    "name",
    "basedOn",
    "type",
    "default",
    "abstractNum",
    "abstractNumId",
    "num",
    "lvl",
    "numFmt",
    "start",
    "lvlOverride",
    "startOverride",
]


class _Ns:
    """Qualified tag names in the document's WordprocessingML namespace: ``ns.pPr`` is
    ``{namespace}pPr`` (``ns.del_`` for ``del``)."""

    def __init__(self, w: str) -> None:
        for local in _TAGS:
            setattr(self, local + ("_" if local == "del" else ""), f"{{{w}}}{local}")
        self.alternate, self.choice = f"{{{_MC}}}AlternateContent", f"{{{_MC}}}Choice"

    def __getattr__(self, name: str) -> str:  # for the type checker: every tag is a str
        raise AttributeError(name)


def _on(el: ET.Element | None, ns: _Ns) -> bool:
    """A toggle property (``<w:vanish/>``, ``w:val`` absent, true or 1) that is set."""
    if el is None:
        return False
    return el.get(ns.val, "true").lower() not in ("0", "false", "off")


def _load_styles(root: ET.Element | None, ns: _Ns) -> tuple[dict[str, _Style], str | None]:
    styles: dict[str, _Style] = {}
    default: str | None = None
    if root is None:
        return styles, default
    for el in root.iter(ns.style):
        if el.get(ns.type, "paragraph") != "paragraph":
            continue
        sid = el.get(ns.styleId)
        if sid is None:
            continue
        style = _Style()
        name = el.find(ns.name)
        style.name = (name.get(ns.val, "") if name is not None else sid).strip().lower()
        based = el.find(ns.basedOn)
        style.based_on = based.get(ns.val) if based is not None else None
        ppr = el.find(ns.pPr)
        if ppr is not None:
            outline = ppr.find(ns.outlineLvl)
            if outline is not None:
                style.outline = _int(outline.get(ns.val), 9)
            style.num = _num_of(ppr, ns)
        styles[sid] = style
        if el.get(ns.default) in ("1", "true", "on"):
            default = default or sid
    return styles, default


def _num_of(ppr: ET.Element, ns: _Ns) -> tuple[str, int] | None:
    numpr = ppr.find(ns.numPr)
    if numpr is None:
        return None
    numid = numpr.find(ns.numId)
    ilvl = numpr.find(ns.ilvl)
    return (
        numid.get(ns.val, "") if numid is not None else "",
        _int(ilvl.get(ns.val) if ilvl is not None else None),
    )


@dataclass
class _Numbering:
    """Word's list counters: one per abstract list and level."""

    formats: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)  # abs -> lvl
    nums: dict[str, tuple[str, dict[int, int]]] = field(default_factory=dict)  # num -> abs
    counters: dict[str, list[int | None]] = field(default_factory=dict)
    restarted: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def load(cls, root: ET.Element | None, ns: _Ns) -> _Numbering:
        numbering = cls()
        if root is None:
            return numbering
        for absn in root.iter(ns.abstractNum):
            levels: dict[int, tuple[str, int]] = {}
            for lvl in absn.iter(ns.lvl):
                fmt = lvl.find(ns.numFmt)
                start = lvl.find(ns.start)
                levels[_int(lvl.get(ns.ilvl))] = (
                    fmt.get(ns.val, "decimal") if fmt is not None else "decimal",
                    _int(start.get(ns.val) if start is not None else None, 1),
                )
            numbering.formats[absn.get(ns.abstractNumId, "")] = levels
        for num in root.iter(ns.num):
            absid = num.find(ns.abstractNumId)
            overrides: dict[int, int] = {}
            for over in num.iter(ns.lvlOverride):
                start = over.find(ns.startOverride)
                if start is not None:
                    overrides[_int(over.get(ns.ilvl))] = _int(start.get(ns.val), 1)
            numbering.nums[num.get(ns.numId, "")] = (
                absid.get(ns.val, "") if absid is not None else "",
                overrides,
            )
        return numbering

    def number(self, numid: str, ilvl: int) -> int | None:
        """The number Word shows for the next item of list ``numid`` at ``ilvl``
        (None for a bullet)."""
        absid, overrides = self.nums.get(numid, (numid, {}))
        fmt, start = self.formats.get(absid, {}).get(ilvl, ("bullet", 1))
        counters = self.counters.setdefault(absid, [None] * 10)
        ilvl = min(max(ilvl, 0), 9)
        if ilvl in overrides and (numid, ilvl) not in self.restarted:
            self.restarted.add((numid, ilvl))
            counters[ilvl] = overrides[ilvl] - 1
        current = counters[ilvl]
        counters[ilvl] = start if current is None else current + 1
        for deeper in range(ilvl + 1, len(counters)):
            counters[deeper] = None
        return None if fmt in _BULLET_FORMATS else counters[ilvl]


# -- the body ---------------------------------------------------------------------------------


@dataclass
class _Field:
    instr: list[str] = field(default_factory=list)
    result: bool = False  # past the separator: its text is the displayed result
    drop: bool = False


class _Walker:
    def __init__(
        self, ns: _Ns, styles: dict[str, _Style], default: str | None, numbering: _Numbering
    ) -> None:
        self.ns = ns
        self.styles = styles
        self.default_style = default
        self.numbering = numbering
        self.out = TextBuilder()
        self.fields: list[_Field] = []
        self.carry = ""  # text of paragraphs whose mark was deleted, joined to the next
        self.code: list[str] = []
        self._resolved: dict[str | None, _Resolved] = {}

    # styles
    def resolve(self, sid: str | None) -> _Resolved:
        got = self._resolved.get(sid)
        if got is not None:
            return got
        res = _Resolved()
        seen: set[str] = set()
        current = sid if sid in self.styles else self.default_style
        outline: int | None = None
        while current is not None and current not in seen and current in self.styles:
            seen.add(current)
            style = self.styles[current]
            match = _HEADING_STYLE.fullmatch(style.name)
            if not res.heading and match:
                res.heading = int(match.group(1))
            elif not res.heading and style.name == "title":
                res.heading = 1
            listed = _LIST_STYLE.fullmatch(style.name)
            if listed and not res.depth:
                res.depth = int(listed.group(1)) - 1
            if outline is None and style.outline is not None:
                outline = style.outline
            res.code = res.code or style.name in _CODE_STYLES
            res.quote = res.quote or style.name in _QUOTE_STYLES
            if res.num is None and style.num is not None:
                res.num = style.num
            current = style.based_on
        if not res.heading and outline is not None and 0 <= outline < 9:
            res.heading = outline + 1
        self._resolved[sid] = res
        return res

    # inline text
    def _visible(self) -> bool:
        if not self.fields:  # the common case: no field open
            return True
        return not any((not f.result) or f.drop for f in self.fields)

    def _field_char(self, el: ET.Element) -> None:
        kind = el.get(self.ns.fldCharType)
        if kind == "begin":
            self.fields.append(_Field())
        elif kind == "separate" and self.fields:
            top = self.fields[-1]
            top.result = True
            words = "".join(top.instr).split()
            top.drop = bool(words) and words[0].upper() in _DROPPED_FIELDS
        elif kind == "end" and self.fields:
            self.fields.pop()

    def inline(self, el: ET.Element, out: list[str], boxes: list[ET.Element]) -> None:
        """Append the displayed text of ``el``'s children to ``out``; text boxes to ``boxes``."""
        ns = self.ns
        for child in el:
            tag = child.tag
            if tag == ns.r:
                self.run(child, out, boxes, False)
            elif tag in (
                ns.hyperlink,
                ns.smartTag,
                ns.customXml,
                ns.ins,
                ns.moveTo,
                ns.dir,
                ns.bdo,
            ):
                self.inline(child, out, boxes)
            elif tag == ns.sdt:
                content = child.find(ns.sdtContent)
                if content is not None:
                    self.inline(content, out, boxes)
            elif tag == ns.fldSimple:
                words = (child.get(ns.instr) or "").split()
                if not (words and words[0].upper() in _DROPPED_FIELDS):
                    self.inline(child, out, boxes)
            elif tag == ns.alternate:
                choice = child.find(ns.choice)
                if choice is not None:
                    self.inline(choice, out, boxes)
            elif tag in _MATH_TAGS and self._visible():
                out.append("".join(t.text or "" for t in child.iter() if t.tag in _MATH_TEXT))
            # deleted and moved-from text, properties, bookmarks, proofing marks: nothing

    def run(self, r: ET.Element, out: list[str], boxes: list[ET.Element], hidden: bool) -> None:
        ns = self.ns
        t, rpr = ns.t, ns.rPr
        shown = not hidden and self._visible()
        for child in r:
            tag = child.tag
            if tag == t:  # the common cases first
                if shown:
                    out.append(child.text or "")
            elif tag == rpr:  # first in a run: hidden text (w:vanish) is not shown
                if _on(child.find(ns.vanish), ns):
                    hidden, shown = True, False
            elif tag == ns.fldChar:
                self._field_char(child)
                shown = not hidden and self._visible()
            elif tag == ns.instrText:
                if self.fields and not self.fields[-1].result:
                    self.fields[-1].instr.append(child.text or "")
            elif tag in (ns.drawing, ns.pict):
                boxes.extend(child.iter(ns.txbxContent))
            elif tag == ns.alternate:
                choice = child.find(ns.choice)
                if choice is not None:
                    self.run(choice, out, boxes, hidden)
            elif not shown:
                continue
            elif tag in (ns.tab, ns.ptab):
                out.append("\t")
            elif tag in (ns.br, ns.cr):
                out.append("\n")
            elif tag == ns.noBreakHyphen:
                out.append("-")
            # softHyphen: shown only where a line breaks; delText, footnote and comment
            # references, symbols of a symbol font: nothing

    # blocks
    def blocks(self, container: ET.Element) -> None:
        ns = self.ns
        for child in container:
            tag = child.tag
            if tag == ns.p:
                self.paragraph(child)
            elif tag == ns.tbl:
                self.flush()
                self.table(child)
            elif tag == ns.sdt:
                if not self._is_toc(child):
                    content = child.find(ns.sdtContent)
                    if content is not None:
                        self.blocks(content)
            elif tag in (ns.customXml, ns.ins, ns.moveTo):
                self.blocks(child)
            elif tag == ns.alternate:
                choice = child.find(ns.choice)
                if choice is not None:
                    self.blocks(choice)

    def _is_toc(self, sdt: ET.Element) -> bool:
        pr = sdt.find(self.ns.sdtPr)
        if pr is None:
            return False
        for gallery in pr.iter(self.ns.docPartGallery):
            if "table of contents" in gallery.get(self.ns.val, "").lower():
                return True
        return False

    def paragraph_text(self, p: ET.Element) -> tuple[str, list[ET.Element]]:
        out: list[str] = []
        boxes: list[ET.Element] = []
        self.inline(p, out, boxes)
        return "".join(out), boxes

    def paragraph(self, p: ET.Element) -> None:
        ns = self.ns
        text, boxes = self.paragraph_text(p)
        ppr = p.find(ns.pPr)
        sid: str | None = None
        outline: int | None = None
        num: tuple[str, int] | None = None
        mark_deleted = False
        if ppr is not None:
            style = ppr.find(ns.pStyle)
            sid = style.get(ns.val) if style is not None else None
            level = ppr.find(ns.outlineLvl)
            outline = _int(level.get(ns.val), 9) if level is not None else None
            num = _num_of(ppr, ns)
            rpr = ppr.find(ns.rPr)
            mark_deleted = rpr is not None and (
                rpr.find(ns.del_) is not None or rpr.find(ns.moveFrom) is not None
            )
        if self.carry:
            text, self.carry = self.carry + text, ""
        if mark_deleted:  # Word joins it to the next paragraph once the deletion is accepted
            self.carry = text
        else:
            self.emit(text, self.resolve(sid), outline, num)
        for box in boxes:
            self.flush()
            self.blocks(box)

    def emit(
        self, text: str, res: _Resolved, outline: int | None, num: tuple[str, int] | None
    ) -> None:
        heading = res.heading
        if outline is not None:
            heading = outline + 1 if 0 <= outline < 9 else 0
        if res.code and not heading:
            self.code.append(text.replace("\r", ""))
            return
        self.flush()
        if not text.strip():
            return
        if heading:
            self.out.heading(text, heading)
            return
        num = num if num is not None else res.num
        if num is not None and num[0] not in ("", "0"):
            number = self.numbering.number(num[0], num[1])
            depth = num[1] or res.depth
            self.out.list_item(text, depth=depth, ordered=number)
        elif res.quote:
            self.out.quote(text)
        else:
            self.out.paragraph(text)

    def flush(self) -> None:
        if self.code:
            lines = [line.rstrip() for line in "\n".join(self.code).split("\n")]
            self.code = []
            self.out.code("\n".join(lines).expandtabs(4))

    def finish(self) -> None:
        if self.carry:
            text, self.carry = self.carry, ""
            self.emit(text, self.resolve(None), None, None)
        self.flush()

    def table(self, tbl: ET.Element) -> None:
        rows = [row for row in self._rows(tbl) if any(cell.strip() for cell in row)]
        if self.carry:
            self.finish()
        self.out.table(rows)

    def _rows(self, tbl: ET.Element) -> Iterator[list[str]]:
        ns = self.ns
        for tr in _children(tbl, ns.tr, (ns.sdt, ns.sdtContent, ns.customXml, ns.ins)):
            trpr = tr.find(ns.trPr)
            if trpr is not None and trpr.find(ns.del_) is not None:
                continue  # a deleted row
            cells: list[str] = []
            for tc in _children(tr, ns.tc, (ns.sdt, ns.sdtContent, ns.customXml, ns.ins)):
                cells.append(self.cell_text(tc))
                tcpr = tc.find(ns.tcPr)
                span = tcpr.find(ns.gridSpan) if tcpr is not None else None
                if span is not None:
                    cells.extend([""] * (min(_int(span.get(ns.val), 1), _MAX_SPAN) - 1))
            yield cells

    def cell_text(self, tc: ET.Element) -> str:
        ns = self.ns
        parts: list[str] = []
        for child in _children(tc, None, (ns.sdt, ns.sdtContent, ns.customXml)):
            if child.tag == ns.p:
                text, boxes = self.paragraph_text(child)
                parts.append(text)
                for box in boxes:
                    parts.extend(self.paragraph_text(p)[0] for p in box.iter(ns.p))
            elif child.tag == ns.tbl:
                parts.extend(" ".join(row) for row in self._rows(child))
        return " ".join(part for part in parts if part.strip())


def _children(
    el: ET.Element, tag: str | None, transparent: tuple[str, ...]
) -> Iterable[ET.Element]:
    """``el``'s children of ``tag`` (any tag: None), looking through wrapper elements."""
    for child in el:
        if child.tag in transparent:
            yield from _children(child, tag, transparent)
        elif tag is None or child.tag == tag:
            yield child


def _title(zf: zipfile.ZipFile, package_rels: dict[str, str]) -> str | None:
    core = package_rels.get("core-properties")
    if core is None:
        return None
    root = xml_part(zf, core)
    if root is None:
        return None
    el = root.find("dc:title", _CORE_NS)
    title = " ".join((el.text or "").split()) if el is not None else ""
    return title or None


class DocxParser:
    """Word documents (``.docx``): the body as Word shows it (see the module's docstring)."""

    name = "docx"
    suffixes = (".docx",)

    def version(self) -> str:
        return f"docx/{VERSION} stdlib zipfile+xml.etree"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        with _open_zip(data) as zf:
            package_rels = _rels(zf, "")
            main = package_rels.get("officeDocument", "word/document.xml")
            root = xml_part(zf, main)
            if root is None:
                raise ParseError("corrupt: the package has no main document part")
            namespace = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else ""
            if namespace not in (_W_TRANSITIONAL, _W_STRICT) or not root.tag.endswith("}document"):
                # the element is not named: its namespace is any text the file's author wrote
                raise ParseError(f"not a Word document: its main part {main} holds no w:document")
            ns = _Ns(namespace)
            rels = _rels(zf, main)
            styles, default = _load_styles(
                xml_part(zf, rels["styles"]) if "styles" in rels else None, ns
            )
            numbering = _Numbering.load(
                xml_part(zf, rels["numbering"]) if "numbering" in rels else None, ns
            )
            title = _title(zf, package_rels)
        walker = _Walker(ns, styles, default, numbering)
        body = root.find(ns.body)
        if body is not None:
            walker.blocks(body)
        walker.finish()
        if walker.out.empty:
            raise NoTextError("no text: the document body is empty")
        metadata = {"title": title} if title else {}
        return [walker.out.build(self.name, self.version(), metadata=metadata)]
