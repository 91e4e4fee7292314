"""HTML: the page's own text, without the site's template, as Markdown-shaped blocks.

Parsed with selectolax's Lexbor backend (a fast HTML5 parser in C), imported on first
use (extra ``formats``). What is read, in this order:

1. **Decoding.** A byte-order mark (UTF-8, UTF-16) decides; else a ``<meta charset>``
   (or ``http-equiv`` Content-Type, or an XML declaration's ``encoding``) in the first
   4 kB; else UTF-8, else the encoding named for files that are not UTF-8
   (``--encoding``), else a :class:`ParseError` that says to name it, as for a text file.
   As browsers do, a declared Latin-1 or ASCII is read as windows-1252, and a declared
   UTF-16 without a byte-order mark as UTF-8. Bytes that are not valid in a declared
   (or marked) encoding are replaced by U+FFFD instead of failing the page; the
   document's ``metadata["invalid_bytes"]`` is then ``True``, and ``rechunk sync`` names
   it. A NUL character means a binary file: :class:`ParseError`.
2. **Per-site selectors first** (:class:`~rechunk.sources.registry.ParseOptions`):
   ``html_exclude`` selectors are removed from the page; ``html_include`` selectors are
   the roots that are read, in document order (a match inside another is read once);
   when they match nothing the page is a :class:`ParseError` (it is not the template they
   were written for).
3. **The root**, without include selectors: the first ``main`` (or ``role="main"``)
   element, or the ``article`` inside it when it holds exactly one; without a ``main``,
   the page's only ``article``; else ``body``.
4. **Boilerplate rules** (:class:`HtmlRules`, overridable: ``HtmlParser(rules=...)``),
   applied inside the roots: the elements ``nav``, ``header``, ``footer``, ``aside``,
   ``script``, ``style``, ``noscript``, ``template``, ``svg``, ``button``, ``input``,
   ``select``, ``textarea`` and ``iframe``; elements with the ``hidden`` attribute,
   ``aria-hidden="true"`` or an inline ``display: none``; elements whose ``role`` is
   ``navigation``, ``banner``, ``contentinfo``, ``complementary`` or ``search``; and
   permalink anchors (an ``a`` whose whole text is one of ``¶ § # 🔗``, or whose class is
   ``headerlink``, ``header-anchor``, ``anchor-link`` or ``anchorjs-link``). A ``header``
   inside an ``article`` or ``section`` is kept: it is that article's own heading (a
   byline, a title), not the site's banner.
5. **Blocks**, written with :class:`~rechunk.sources.base.TextBuilder`: ``h1``-``h6`` as
   headings with their level; ``p`` and the direct text of other containers (``div``,
   ``section``, ``figcaption`` ...) as paragraphs; ``li`` as list items (depth from the
   nesting of ``ul``/``ol``, ordered items numbered from ``start`` / ``value``; an item's
   paragraphs are one item, text after a nested list a paragraph); ``dt`` as a list item
   and its ``dd`` one level deeper; a table as one table block of its rows (``th``/``td``
   cells; its ``caption`` a paragraph before it), unless it is a layout table (a table
   inside, or ``role="presentation"``/``"none"``), whose cells are read as containers;
   ``pre`` as code, its text verbatim, its language from a ``language-x``, ``lang-x`` or
   ``highlight-x`` class (or pandoc's ``sourceCode x``) on the ``pre``, its ``code`` or
   the two elements around it; a
   ``blockquote``'s paragraphs as quotes. Inline elements join their text; ``<br>`` is a
   space; images, comments and empty elements give nothing.

Every block carries ``{"anchor": id}`` of the heading in force when that heading has an
``id`` (so a reader can cite ``page.html#id``). ``metadata["title"]`` is the ``<title>``,
else the first ``h1``. A page with no text left is a :class:`NoTextError` (an empty document).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rechunk._optional import require
from rechunk.errors import ConfigError
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder, clean_inline
from rechunk.sources.encoding import decode_text_as, text_codec
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = [
    "DEFAULT_RULES",
    "HtmlParser",
    "HtmlRules",
    "check_selectors",
    "decode_html",
    "write_html",
]


@dataclass(frozen=True)
class HtmlRules:
    """What a page's template is: the elements dropped before its text is read.

    ``drop_tags``: element names dropped with their content. ``drop_roles``: ARIA roles
    dropped (case-insensitive). ``drop_hidden``: drop what a browser does not show (the
    ``hidden`` attribute, ``aria-hidden="true"``, an inline ``display: none``).
    ``keep_article_header``: keep a ``header`` (when ``header`` is in ``drop_tags``)
    inside an ``article`` or ``section``. ``permalink_symbols`` / ``permalink_classes``:
    an ``a`` whose whole text is one of the symbols, or that has one of the classes, is
    a heading's permalink and dropped.
    """

    drop_tags: frozenset[str] = frozenset(
        {
            "nav", "header", "footer", "aside", "script", "style", "noscript", "template",
            "svg", "button", "input", "select", "textarea", "iframe",
            # a ruby annotation's reading (furigana above 漢字) and the brackets shown
            # where ruby is not: the text is the base characters, as the page reads
            "rt", "rp",
        }
    )  # fmt: skip
    drop_roles: frozenset[str] = frozenset(
        {"navigation", "banner", "contentinfo", "complementary", "search"}
    )
    drop_hidden: bool = True
    keep_article_header: bool = True
    permalink_symbols: frozenset[str] = frozenset({"¶", "§", "#", "🔗"})
    permalink_classes: frozenset[str] = frozenset(
        {"headerlink", "header-anchor", "anchor-link", "anchorjs-link"}
    )


DEFAULT_RULES = HtmlRules()

# -- decoding -----------------------------------------------------------------------------

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_DECLARED = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)"""
    rb"""|<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""",
    re.IGNORECASE,
)
_SNIFF_BYTES = 4096


def _encoding(data: bytes) -> tuple[str | None, int]:
    """The encoding to read ``data`` with (None: none is marked or declared), and the
    length of its byte-order mark."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name, len(bom)
    match = _DECLARED.search(data[:_SNIFF_BYTES])
    if match:
        declared = (match.group(1) or match.group(2)).decode("ascii").lower()
        codec = text_codec(declared)  # a page that names no file encoding declares none
        if codec is None:
            return None, 0
        if codec in ("iso8859-1", "ascii", "latin-1"):
            return "cp1252", 0  # what browsers read for these labels
        if codec.startswith("utf-16") or codec.startswith("utf-32"):
            return "utf-8", 0  # an ASCII-readable declaration cannot be UTF-16
        return codec, 0
    return None, 0


def decode_html(
    data: bytes, fallback: str | None = None, *, detect: bool = False
) -> tuple[str, str, bool]:
    """``(markup, encoding, invalid bytes were replaced)`` of an HTML file's bytes: a
    byte-order mark, else the declared charset (bytes not valid in it replaced, as a
    browser does), else read as a text file is: UTF-8, else ``fallback`` (the encoding
    the user named for files that are not UTF-8), else, with ``detect``, the encoding
    detected, else a :class:`ParseError` saying to name it (a page that declares
    nothing has no charset to trust)."""
    encoding, skip = _encoding(data)
    if encoding is None:
        markup, encoding = decode_text_as(data, fallback, detect=detect)
        replaced = False
    else:
        body = data[skip:]
        try:
            markup, replaced = body.decode(encoding), False
        except UnicodeError:  # never shown: a codec's message may quote the text
            markup, replaced = body.decode(encoding, errors="replace"), True
    if "\x00" in markup:
        raise ParseError("contains NUL bytes; is it a binary file?")
    return markup, encoding, replaced


# -- the tree -----------------------------------------------------------------------------

_INLINE = frozenset(
    {
        "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "code", "data", "del",
        "dfn", "em", "font", "i", "img", "ins", "kbd", "label", "mark", "math", "meter",
        "nobr", "output", "picture", "progress", "q", "rp", "rt", "ruby", "s", "samp",
        "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var", "wbr",
    }
)  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_LISTS = frozenset({"ul", "ol", "menu"})
_TEXT, _COMMENT = "-text", "-comment"
_LANGUAGE = re.compile(r"(?:language|lang|highlight)-([\w+#.-]+)")
_PANDOC_CODE_CLASSES = frozenset({"sourceCode", "numberSource", "numberLines"})
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none", re.IGNORECASE)


def _lexbor() -> Any:
    return require("selectolax.lexbor", "formats", "selectolax")


def _classes(node: Any) -> list[str]:
    return (node.attributes.get("class") or "").split()


def _children(node: Any) -> list[Any]:
    return list(node.iter(include_text=True))


def _inline_text(node: Any) -> str:
    """The text of ``node``'s subtree: ``<br>`` and block boundaries are spaces."""
    parts: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if item is None:
            parts.append(" ")
            continue
        tag = item.tag
        if tag == _TEXT:
            parts.append(item.text_content or "")
        elif tag == "br":
            parts.append("\n")  # a line break: none between Chinese characters
        elif tag != _COMMENT:
            if tag not in _INLINE:
                parts.append(" ")
                stack.append(None)
            stack.extend(reversed(_children(item)))
    return "".join(parts)


def _code_text(node: Any) -> str:
    """The text of a ``pre`` verbatim (``<br>`` is a line break)."""
    parts: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        tag = item.tag
        if tag == _TEXT:
            parts.append(item.text_content or "")
        elif tag == "br":
            parts.append("\n")
        elif tag != _COMMENT:
            stack.extend(reversed(_children(item)))
    return "".join(parts)


def _code_language(pre: Any) -> str:
    candidates = [pre, pre.css_first("code"), pre.parent]
    if pre.parent is not None:
        candidates.append(pre.parent.parent)
    for node in candidates:
        if node is None or node.tag in ("body", "html"):
            continue
        names = _classes(node)
        for name in names:
            match = _LANGUAGE.fullmatch(name)
            if match:
                return match.group(1)
        if "sourceCode" in names:  # pandoc's: class="sourceCode python"
            rest = [n for n in names if n not in _PANDOC_CODE_CLASSES]
            if rest:
                return rest[0]
    return ""


def _is_layout_table(table: Any) -> bool:
    role = (table.attributes.get("role") or "").lower()
    return role in ("presentation", "none") or len(table.css("table")) > 1


def _has_ancestor(node: Any, tags: Iterable[str], stop: Any) -> bool:
    wanted = set(tags)
    parent = node.parent
    while parent is not None and parent.mem_id != stop.mem_id:
        if parent.tag in wanted:
            return True
        parent = parent.parent
    return bool(stop.tag in wanted)


def _drop_boilerplate(root: Any, rules: HtmlRules) -> None:
    """Remove what ``rules`` call template from ``root``'s subtree (never ``root``)."""
    selectors = sorted(rules.drop_tags)
    selectors += [f'[role="{role}" i]' for role in sorted(rules.drop_roles)]
    if rules.drop_hidden:
        selectors += ["[hidden]", '[aria-hidden="true" i]', "[style]"]
    doomed = []
    for node in root.css(", ".join(selectors)) if selectors else ():
        if node.mem_id == root.mem_id:
            continue
        tag = node.tag
        if tag not in rules.drop_tags:
            attributes = node.attributes
            role = (attributes.get("role") or "").lower()
            if (
                role not in rules.drop_roles
                and "hidden" not in attributes
                and (attributes.get("aria-hidden") or "").lower() != "true"
                and not _HIDDEN_STYLE.search(attributes.get("style") or "")
            ):
                continue  # a [style] that does not hide
        elif (
            tag == "header"
            and rules.keep_article_header
            and _has_ancestor(node, ("article", "section"), root)
        ):
            continue
        doomed.append(node)
    for node in root.css("a"):
        if node.mem_id == root.mem_id:
            continue
        if rules.permalink_classes.intersection(_classes(node)) or (
            node.text(deep=True).strip() in rules.permalink_symbols
        ):
            doomed.append(node)
    for node in doomed:  # unlinked, not destroyed: a node inside one is safe to unlink
        node.remove()


def check_selectors(selectors: tuple[str, ...], option: str) -> None:
    """A :class:`ConfigError` naming ``option`` for the first of ``selectors`` that is not
    a CSS selector selectolax reads."""
    if selectors:
        _select(_lexbor().LexborHTMLParser("<p></p>"), selectors, option)


def _select(tree: Any, selectors: tuple[str, ...], option: str) -> list[Any]:
    """The elements ``selectors`` match, in document order; a selector that is not CSS is
    a :class:`ConfigError` (every page would fail the same way)."""
    lexbor = _lexbor()
    try:
        return list(tree.css(", ".join(selectors)))
    except lexbor.SelectolaxError:
        for selector in selectors:
            try:
                tree.css(selector)
            except lexbor.SelectolaxError:
                raise ConfigError(
                    f"{option} selector {selector!r} is not a CSS selector selectolax reads"
                ) from None
        raise ConfigError(f"{option} selectors {selectors!r} are not CSS") from None


def _roots(tree: Any, options: ParseOptions) -> list[Any]:
    if options.html_include:
        matches = _select(tree, options.html_include, "html_include")
        if not matches:
            raise ParseError(
                "no element matches the selectors to read (--html-include; html_include in "
                f"Python): {', '.join(options.html_include)}"
            )
        ids = {node.mem_id for node in matches}
        roots = []
        for node in matches:
            parent = node.parent
            while parent is not None and parent.mem_id not in ids:
                parent = parent.parent
            if parent is None:
                roots.append(node)
        return roots
    main = tree.css_first('main, [role="main" i]')
    if main is not None:
        articles = main.css("article")
        return [articles[0] if len(articles) == 1 else main]
    articles = tree.css("article")
    if len(articles) == 1:
        return [articles[0]]
    return [tree.body] if tree.body is not None else []


@dataclass
class _Mode:
    """How text gathered inside an element is written: ``para``, ``quote`` or ``item``."""

    kind: str
    depth: int = 0
    number: int | None = None
    written: bool = False


def _int(value: str | None, default: int) -> int:
    try:
        return int((value or "").strip())
    except ValueError:
        return default


class _Writer:
    def __init__(self, builder: TextBuilder, base: Mapping[str, Any]) -> None:
        self.builder = builder
        self.base = dict(base)
        self.buffer: list[str] = []
        self.modes = [_Mode("para")]
        self.lists: list[list[int] | None] = []  # per open list: [next number], or None
        self.locator: dict[str, Any] = dict(base)
        self.first_h1: str | None = None

    def flush(self) -> None:
        text = "".join(self.buffer)
        self.buffer.clear()
        if not text or text.isspace():
            return
        mode = self.modes[-1]
        if mode.kind == "quote":
            self.builder.quote(text, **self.locator)
        elif mode.kind == "item" and not mode.written and clean_inline(text):
            self.builder.list_item(text, mode.depth, mode.number, **self.locator)
            mode.written = True
        else:
            self.builder.paragraph(text, **self.locator)

    def heading(self, node: Any, level: int) -> None:
        self.flush()
        text = _inline_text(node)
        anchor = node.attributes.get("id")
        self.locator = {**self.base, "anchor": anchor} if anchor else dict(self.base)
        self.builder.heading(text, level, **self.locator)
        if level == 1 and self.first_h1 is None and clean_inline(text):
            self.first_h1 = clean_inline(text)

    def table(self, node: Any) -> None:
        self.flush()
        caption = node.css_first("caption")
        if caption is not None:
            self.builder.paragraph(_inline_text(caption), **self.locator)
        rows = []
        for row in node.css("tr"):
            rows.append([_inline_text(cell) for cell in row.iter() if cell.tag in ("td", "th")])
        self.builder.table(rows, **self.locator)

    def walk(self, root: Any) -> None:
        # an explicit stack (pages nest deeper than Python's recursion limit); a
        # callable on it runs when the element it closes has been read
        stack: list[Any] = [root]
        while stack:
            item = stack.pop()
            if callable(item):
                item()
                continue
            tag = item.tag
            if tag == _TEXT:
                self.buffer.append(item.text_content or "")
                continue
            if tag == _COMMENT:
                continue
            if tag == "br":
                self.buffer.append("\n")  # a line break: none between Chinese characters
            elif tag in _INLINE:
                stack.extend(reversed(_children(item)))
            elif tag in _HEADINGS:
                self.heading(item, _HEADINGS[tag])
            elif tag == "pre":
                self.flush()
                self.builder.code(_code_text(item), _code_language(item), **self.locator)
            elif tag == "table" and not _is_layout_table(item):
                self.table(item)
            else:
                self.open_block(item, tag, stack)

    def open_block(self, node: Any, tag: str, stack: list[Any]) -> None:
        mode: _Mode | None = None
        if tag in _LISTS:
            start = _int(node.attributes.get("start"), 1) if tag == "ol" else None
            self.lists.append([start] if start is not None else None)
        elif tag == "li":
            number = None
            counter = self.lists[-1] if self.lists else None
            if counter is not None:
                number = _int(node.attributes.get("value"), counter[0])
                counter[0] = number + 1
            mode = _Mode("item", max(len(self.lists) - 1, 0), number)
        elif tag in ("dt", "dd"):
            mode = _Mode("item", 0 if tag == "dt" else 1)
        elif tag == "blockquote":
            mode = _Mode("quote")
        elif self.modes[-1].kind == "item" and tag not in _BREAKS_ITEM:
            # a paragraph (or div) inside a list item is part of the item's text
            self.buffer.append(" ")
            stack.append(self.space)
            stack.extend(reversed(_children(node)))
            return
        self.flush()
        if mode is not None:
            self.modes.append(mode)
        stack.append(self.close_list if tag in _LISTS else self.close_mode if mode else self.flush)
        stack.extend(reversed(_children(node)))

    def space(self) -> None:
        self.buffer.append(" ")

    def close_mode(self) -> None:
        self.flush()
        self.modes.pop()

    def close_list(self) -> None:
        self.flush()
        self.lists.pop()


# elements that end a list item's text (they are blocks of their own)
_BREAKS_ITEM = frozenset({"ul", "ol", "menu", "dl", "table", "hr", "figure"})


def write_html(
    markup: str,
    builder: TextBuilder,
    options: ParseOptions | None = None,
    rules: HtmlRules = DEFAULT_RULES,
    locator: Mapping[str, Any] | None = None,
) -> str | None:
    """Write the blocks of an HTML page into ``builder`` (each with ``locator`` beside its
    anchor); the page's title, or None."""
    options = options or ParseOptions()
    tree = _lexbor().LexborHTMLParser(markup)
    if options.html_exclude:
        for node in _select(tree, options.html_exclude, "html_exclude"):
            node.remove()
    writer = _Writer(builder, locator or {})
    for root in _roots(tree, options):
        _drop_boilerplate(root, rules)
        writer.walk(root)
        writer.flush()
    title_node = tree.css_first("head > title")
    title = clean_inline(title_node.text(deep=True)) if title_node is not None else ""
    return title or writer.first_h1


class HtmlParser:
    """HTML pages: the text of the page's content, its template dropped (see the module)."""

    name = "html"
    suffixes = FORMATS["html"][1]

    def __init__(self, rules: HtmlRules = DEFAULT_RULES) -> None:
        self.rules = rules

    def version(self) -> str:
        selectolax = require("selectolax", "formats")
        return f"html/1 selectolax {selectolax.__version__}"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        markup, encoding, replaced = decode_html(
            data, options.encoding, detect=options.detect_encoding
        )
        builder = TextBuilder()
        title = write_html(markup, builder, options, self.rules)
        if builder.empty:
            raise NoTextError("no text")
        metadata: dict[str, Any] = {"encoding": encoding}
        if title:
            metadata["title"] = title
        if replaced:
            metadata["invalid_bytes"] = True
        return [builder.build(self.name, self.version(), metadata=metadata)]
