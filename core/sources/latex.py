"""LaTeX (``.tex``): papers, theses, lecture notes and the manuals of older projects.

The source is parsed with pylatexenc's walker (MIT, pure Python) and written in the
Markdown-shaped form every parser writes, so the structured policy finds its sections:

* the document's ``\\title`` is a level-1 heading; ``\\part`` and ``\\chapter`` are level
  1 too, ``\\section`` 2, down to ``\\subparagraph`` at 6 (starred forms alike);
* a paragraph (text up to a blank line or ``\\par``) is one line, its macros read as
  text by pylatexenc (``\\emph{x}`` is ``x``, ``caf\\'e`` is ``café``); a re-wrapped
  paragraph gives the same text. Math is kept as written (``$x^2$``, an ``equation``
  environment), so a formula stays searchable as its source;
* ``itemize``, ``enumerate`` and ``description`` items become list items, nested by
  depth (every ``enumerate`` item is ``1.``, as LaTeX leaves the count to the
  renderer: an inserted item renumbers nothing); ``\\bibitem`` entries of a
  ``thebibliography`` too, with their key;
* ``verbatim``, ``Verbatim``, ``lstlisting`` and ``minted`` become fenced code with the
  listing's language, their text exactly as written (a ``%`` there is not a comment), and
  so does the code pandoc writes as one macro per token (``Highlighting``);
* ``tabular`` (and ``tabularx``, ``longtable``...) become a row per line, cells split at
  ``&``; rules (``\\hline``, ``\\toprule``) are dropped;
* ``quote``, ``quotation`` and ``verse`` become quotes; a float's ``\\caption`` is a
  paragraph of its own;
* citations and references keep their keys (``\\cite{knuth84}`` is ``[knuth84]``,
  ``\\ref{sec:cache}`` is ``[sec:cache]``): a key does not change when a section is
  inserted before it, a rendered number would;
* what is not text is dropped: the preamble (everything before
  ``\\begin{document}``, but the title), comments, ``\\label``, ``\\index``,
  ``\\maketitle``, ``\\today`` (today's date would make the text differ from day to
  day), figures' graphics, TikZ pictures, ``comment`` environments and macro
  definitions.

``\\input`` and ``\\include`` are not followed (nothing outside the file is read). A
macro the document defines without arguments (``\\newcommand{\\tool}{rechunk}``, or
``\\def``) reads as its body; other macros pylatexenc does not know read as the text of
their braced arguments. Blocks carry ``{"line": n}`` or ``{"line": [first, last]}``
(1-based lines of the file). The text comes from the file's bytes by the rule of
:mod:`rechunk.sources.encoding`.

pylatexenc logs the parse errors it recovers from with the text around them; its
loggers are held at WARNING when this parser loads, so no document text reaches a log.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from rechunk._optional import require
from rechunk.sources.base import Parsed, TextBuilder
from rechunk.sources.registry import FORMATS, ParseOptions

if TYPE_CHECKING:
    from pylatexenc.latex2text import LatexNodes2Text
    from pylatexenc.latexwalker import LatexNode

__all__ = ["LatexParser"]

_LEVELS = {
    "part": 1,
    "chapter": 1,
    "section": 2,
    "subsection": 3,
    "subsubsection": 4,
    "paragraph": 5,
    "subparagraph": 6,
}
_LISTS = frozenset({"itemize", "enumerate", "description", "compactitem", "compactenum"})
_ORDERED = frozenset({"enumerate", "compactenum"})
_CODE = ("verbatim", "verbatim*", "Verbatim", "BVerbatim", "lstlisting", "minted")
# environments whose body is not LaTeX: read as written, up to their \end
_RAW_ENVIRONMENTS = (*_CODE, "comment")
# code written as macros, one per token (pandoc's default highlighting)
_HIGHLIGHTED = frozenset({"Highlighting"})
_TABLES = frozenset(
    {"tabular", "tabular*", "tabularx", "tabulary", "longtable", "supertabular", "array"}
)
_QUOTES = frozenset({"quote", "quotation", "verse"})
_DROPPED_ENVIRONMENTS = frozenset(
    {"comment", "tikzpicture", "pgfpicture", "picture", "filecontents", "filecontents*"}
)
# math environments stay inside the paragraph they are written in (read as written)
_INLINE_ENVIRONMENTS = frozenset(
    name + star
    for name in (
        "equation",
        "align",
        "alignat",
        "gather",
        "multline",
        "flalign",
        "eqnarray",
        "displaymath",
        "math",
        "dmath",
    )
    for star in ("", "*")
)
_ROW_ENDS = frozenset({"\\", "tabularnewline", "cr"})
_PARAGRAPH_BREAKS = frozenset({"par"})
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
# what _layout looks for: \verb and its delimiter, \begin / \end, other escapes, groups,
# comments, a blank line, white space, a long run of other characters
_TOKENS = re.compile(
    r"\\verb\*?(?P<verb>[^\w\s])|\\(?P<kind>begin|end)\s*\{(?P<env>[^{}\n]*)\}|\\.|[{}%]"
    r"|\n[ \t]*\n|\s|[^\s\\{}%]{4096}",
    re.S,
)
_PIECE = 32_000  # characters: a piece longer than this is cut at white space

# Macros dropped with their arguments, and the argument each takes (pylatexenc's
# argspec: ``{`` mandatory, ``[`` optional, ``*`` a star). Listed here so that their
# arguments are consumed, not read as text.
_DROPPED: dict[str, str] = {
    "label": "{",
    "index": "{",
    "maketitle": "",
    "tableofcontents": "",
    "listoffigures": "",
    "listoftables": "",
    "today": "",
    "newpage": "",
    "clearpage": "",
    "cleardoublepage": "",
    "pagebreak": "[",
    "nopagebreak": "[",
    "appendix": "",
    "frontmatter": "",
    "mainmatter": "",
    "backmatter": "",
    "noindent": "",
    "centering": "",
    "raggedright": "",
    "raggedleft": "",
    "smallskip": "",
    "medskip": "",
    "bigskip": "",
    "hline": "",
    "toprule": "[",
    "midrule": "[",
    "bottomrule": "[",
    "cline": "{",
    "cmidrule": "[{",
    "input": "{",
    "include": "{",
    "includeonly": "{",
    "includegraphics": "*[[{",
    "graphicspath": "{",
    "nocite": "{",
    "bibliography": "{",
    "bibliographystyle": "{",
    "addbibresource": "[{",
    "printbibliography": "[",
    "pagestyle": "{",
    "thispagestyle": "{",
    "setcounter": "{{",
    "addtocounter": "{{",
    "stepcounter": "{",
    "setlength": "{{",
    "addtolength": "{{",
    "vspace": "*{",
    "hspace": "*{",
    "newcommand": "*{[[{",
    "renewcommand": "*{[[{",
    "providecommand": "*{[[{",
    "DeclareMathOperator": "*{{",
    "newenvironment": "*{[[{{",
    "renewenvironment": "*{[[{{",
    "newtheorem": "*{[{[",
    "definecolor": "{{{",
    "hypersetup": "{",
    "lstset": "{",
    "usepackage": "[{",
    "documentclass": "[{",
    "title": "[{",
    "author": "[{",
    "date": "{",
    "thanks": "{",
    "caption": "*[{",  # read at block level, as a paragraph of its own
    "bibitem": "[{",  # read in thebibliography, as a list item with its key
    "tightlist": "",
    "noalign": "{",
    "endhead": "",
    "endfirsthead": "",
    "endfoot": "",
    "endlastfoot": "",
}
# macros whose argument is read as text (specs pylatexenc's walker lacks)
_READ: dict[str, str] = {
    "href": "{{",
    "multicolumn": "{{{",
    "multirow": "[{[{",
    "textsuperscript": "{",
    "textsubscript": "{",
    "mintinline": "[{{",
}
_CITATIONS = (
    "cite",
    "citep",
    "citet",
    "citealt",
    "citealp",
    "citeauthor",
    "citeyear",
    "parencite",
    "textcite",
    "autocite",
    "footcite",
    "Cite",
    "Parencite",
    "Textcite",
    "Autocite",
)
_LOGOS = ("TeX", "LaTeX", "LaTeXe", "XeTeX", "XeLaTeX", "LuaTeX", "LuaLaTeX", "BibTeX")
_REFERENCES = ("ref", "eqref", "autoref", "cref", "Cref", "pageref", "nameref", "vref")

_CONTEXT: tuple[Any, LatexNodes2Text] | None = None
_DEFINING = frozenset({"newcommand", "renewcommand", "providecommand"})
_DEF = frozenset({"def", "gdef", "edef", "xdef"})
# the macros without arguments the document being read defines: name -> body (a node)
_DEFINED: ContextVar[dict[str, Any] | None] = ContextVar("rechunk_latex_defined", default=None)


def _context() -> tuple[Any, LatexNodes2Text]:
    """The walker's context (macro and environment specs) and the text converter, built
    once: pylatexenc's defaults with the specs above."""
    global _CONTEXT
    if _CONTEXT is None:
        walker = require("pylatexenc.latexwalker", "formats", "pylatexenc")
        macrospec = require("pylatexenc.macrospec", "formats", "pylatexenc")
        latex2text = require("pylatexenc.latex2text", "formats", "pylatexenc")
        for name in ("pylatexenc.latexwalker", "pylatexenc.latex2text"):
            logging.getLogger(name).setLevel(logging.WARNING)

        specs = walker.get_default_latex_context_db()
        macros = [macrospec.std_macro(name, spec) for name, spec in {**_DROPPED, **_READ}.items()]
        macros += [macrospec.std_macro(name, "*[[{") for name in _CITATIONS]
        macros += [macrospec.std_macro(name, "*{") for name in _REFERENCES]
        macros += [macrospec.std_macro(name, "*[{") for name in _LEVELS]
        environments = [
            macrospec.EnvironmentSpec(name, args_parser=_verbatim_parser(name, macrospec))
            for name in _RAW_ENVIRONMENTS
        ]
        environments += [
            macrospec.std_environment("tabularx", "{[{"),
            macrospec.std_environment("tabulary", "{[{"),
            macrospec.std_environment("longtable", "[{"),
            macrospec.std_environment("supertabular", "{"),
            macrospec.std_environment("array", "[{"),
            macrospec.std_environment("thebibliography", "{"),
            macrospec.std_environment("minipage", "[[[{"),
            macrospec.std_environment("wrapfigure", "[{[{"),
            macrospec.std_environment("multicols", "{[["),
            macrospec.std_environment("Highlighting", "["),
        ]
        macros.append(
            macrospec.MacroSpec("lstinline", args_parser=macrospec.VerbatimArgsParser("verb-macro"))
        )
        specs.add_context_category("rechunk", macros, environments, prepend=True)
        # The walker asks at every character whether a special ("~", "--", "&"...)
        # starts there, trying each one in turn: most of its time on plain text. Only a
        # character that starts one needs the search.
        starts = {chars[0] for cat in specs.category_list for chars in specs.d[cat]["specials"]}
        search = specs.test_for_specials

        def test_for_specials(s: str, pos: int, parsing_state: Any = None) -> Any:
            return search(s, pos, parsing_state) if s[pos] in starts else None

        specs.test_for_specials = test_for_specials

        text_spec = latex2text.MacroTextSpec
        to_text = latex2text.get_default_latex_context_db()
        text_macros = [text_spec(name, discard=True) for name in _DROPPED]
        text_macros += [text_spec(name, simplify_repl=_keys) for name in _CITATIONS]
        text_macros += [text_spec(name, simplify_repl=_keys) for name in _REFERENCES]
        text_macros += [
            text_spec("href", simplify_repl=_argument(1)),
            text_spec("url", simplify_repl=_argument(0)),
            text_spec("multicolumn", simplify_repl=_argument(2)),
            text_spec("multirow", simplify_repl=_argument(3)),
            text_spec("footnote", simplify_repl=_footnote),
            text_spec("lstinline", simplify_repl=_verbatim),
            text_spec("verb", simplify_repl=_verbatim),
            text_spec("mintinline", simplify_repl=_argument(-1)),
            text_spec("S", simplify_repl="\u00a7"),  # the section sign
            text_spec("P", simplify_repl="\u00b6"),  # the pilcrow
        ]
        text_macros += [text_spec(name, simplify_repl=name) for name in _LOGOS]
        to_text.add_context_category("rechunk", text_macros, [], prepend=True)
        # a macro the converter does not know (\texttt, \textsf, a document's own):
        # the text of its mandatory arguments
        to_text.set_unknown_macro_spec(text_spec("", simplify_repl=_mandatory))
        converter = latex2text.LatexNodes2Text(
            latex_context=to_text, math_mode="verbatim", strict_latex_spaces=True
        )
        _CONTEXT = (specs, converter)
    return _CONTEXT


def _arguments(node: LatexNode) -> list[Any]:
    """A macro's parsed arguments (an argument left out is None)."""
    parsed = getattr(node, "nodeargd", None)
    return list(getattr(parsed, "argnlist", None) or [])


def _argument(index: int) -> Callable[[LatexNode, LatexNodes2Text], str]:
    """A text spec that reads one of a macro's arguments (``-1``: the last)."""

    def read(node: LatexNode, l2tobj: LatexNodes2Text) -> str:
        arguments = _arguments(node)
        try:
            argument = arguments[index]
        except IndexError:
            return ""
        return l2tobj.nodelist_to_text([argument]) if argument is not None else ""

    return read


def _mandatory(node: LatexNode, l2tobj: LatexNodes2Text) -> str:
    """The text of a macro's mandatory (braced) arguments, its options left out; a macro
    the document defines without arguments (``\\newcommand{\\tool}{rechunk}``), its
    body's text."""
    defined = _DEFINED.get() or {}
    body = defined.get(node.macroname)
    if body is not None and not _arguments(node):
        del defined[node.macroname]  # a definition that uses itself reads as nothing there
        try:
            return str(l2tobj.nodelist_to_text([body]))
        finally:
            defined[node.macroname] = body
    texts = [
        l2tobj.nodelist_to_text([argument])
        for argument in _arguments(node)
        if getattr(argument, "delimiters", None) == ("{", "}")
    ]
    return " ".join(text for text in texts if text.strip())


def _verbatim(node: LatexNode) -> str:
    """The text of ``\\verb|...|`` or ``\\lstinline!...!``, as written."""
    return str(getattr(node.nodeargd, "verbatim_text", "") or "")


def _footnote(node: LatexNode, l2tobj: LatexNodes2Text) -> str:
    """A footnote's text, in parentheses where it is anchored."""
    text = _argument(-1)(node, l2tobj)
    return f" ({text})" if text.strip() else ""


def _keys(node: LatexNode) -> str:
    """A citation's or reference's keys, as written: ``[knuth84, lamport94]``."""
    arguments = [a for a in _arguments(node) if a is not None]
    if not arguments:
        return ""
    keys = arguments[-1].latex_verbatim().strip("{}").split(",")
    return "[" + ", ".join(key.strip() for key in keys if key.strip()) + "]"


def _verbatim_parser(name: str, macrospec: Any) -> Any:
    """The argument parser of a verbatim-like environment ``name``: its options
    (``[language=Python]``; minted's ``{python}``) and then its body exactly as written,
    up to ``\\end{name}`` (to the end of the file if that never comes)."""
    from pylatexenc import latexwalker

    class Verbatim(macrospec.MacroStandardArgsParser):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(argspec="")

        def parse_args(self, w: Any, pos: int, parsing_state: Any = None) -> Any:
            source, start = w.s, pos
            language = ""
            option = re.compile(r"[ \t]*\[([^\]\n]*)\]").match(source, pos)
            if option:
                found = re.search(r"language\s*=\s*\{?(?:\[[^\]]*\])?\s*([\w+#-]+)", option[1])
                language = found[1] if found else ""
                pos = option.end()
            if name == "minted":
                argument = re.compile(r"[ \t]*\{([^}\n]*)\}").match(source, pos)
                if argument:
                    language, pos = argument[1].strip(), argument.end()
            end = source.find(f"\\end{{{name}}}", pos)
            if end < 0:
                end = len(source)
            body = w.make_node(
                latexwalker.LatexCharsNode,
                parsing_state=parsing_state,
                chars=source[pos:end],
                pos=pos,
                len=end - pos,
            )
            parsed = macrospec.ParsedVerbatimArgs(verbatim_chars_node=body)
            parsed.language = language.lower()
            return (parsed, start, end - start)

    return Verbatim()


def _holds_blocks(group: Any) -> bool:
    """Whether a group's contents are blocks (a blank line, a section, a list...), not
    inline text."""
    for node in group.nodelist:
        kind = type(node).__name__
        name = _name(node)
        if kind == "LatexCharsNode" and _BLANK_LINE.search(node.chars):
            return True
        if kind == "LatexEnvironmentNode" and name not in _INLINE_ENVIRONMENTS:
            return True
        if kind == "LatexMacroNode" and (name in _LEVELS or name in _PARAGRAPH_BREAKS):
            return True
    return False


def _name(node: Any) -> str | None:
    """A macro's or environment's name, else None."""
    return getattr(node, "macroname", None) or getattr(node, "environmentname", None)


class _Reader:
    """Walks the node trees of a file's pieces and writes their blocks into a
    :class:`TextBuilder`. Nodes' positions are offsets in their piece; ``base`` is the
    piece's offset in the file."""

    def __init__(self, source: str, converter: LatexNodes2Text) -> None:
        self.converter = converter
        self.out = TextBuilder()
        self.starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self.title: str | None = None
        self.base = 0
        # the paragraph being read: (first, last) offsets in the file and a node or a
        # piece of a chars node's text; it goes on across pieces of the file
        self.paragraph: list[tuple[int, int, Any]] = []
        self.quoted = False
        self.defined: dict[str, Any] = {}

    def where(self, first: int, last: int) -> dict[str, Any]:
        """The locator of the file from offset ``first`` to ``last`` (inclusive)."""
        a = bisect.bisect_right(self.starts, first)
        b = bisect.bisect_right(self.starts, max(first, last))
        return {"line": a if a == b else [a, b]}

    def span(self, node: Any) -> dict[str, Any]:
        """The locator of a node of the current piece."""
        return self.where(self.base + node.pos, self.base + node.pos + node.len - 1)

    def text(self, nodes: Iterable[Any]) -> str:
        """The text of nodes and pieces of chars nodes. Two groups in a row are the
        arguments of a macro pylatexenc does not know (``\\moduleauthor{Ada}{ada@x}``):
        a space keeps their words apart."""
        parts: list[str] = []
        group = False
        for node in nodes:
            if isinstance(node, str):  # a piece of a chars node
                parts.append(node)
            elif node is not None:
                if group and type(node).__name__ == "LatexGroupNode":
                    parts.append(" ")
                parts.append(self.converter.node_to_text(node))
            group = type(node).__name__ == "LatexGroupNode"
        return "".join(parts)

    def last_argument(self, node: Any) -> str | None:
        """The text of a macro's last argument given (a section's title)."""
        arguments = [a for a in _arguments(node) if a is not None]
        return self.text([arguments[-1]]) if arguments else None

    def heading(self, node: Any, level: int) -> None:
        title = self.last_argument(node)
        if title is not None:
            self.out.heading(title, level, **self.span(node))

    def document_title(self, node: Any) -> None:
        """``\\title``: the level-1 heading, and the title in the metadata (the first)."""
        self.heading(node, 1)
        title = " ".join((self.last_argument(node) or "").split())
        if self.title is None and title:
            self.title = title

    def preamble(self, nodes: Sequence[Any]) -> None:
        """A preamble, where nothing is text but ``\\title``; and the macros it defines."""
        for node in nodes:
            if type(node).__name__ != "LatexMacroNode":
                continue
            if node.macroname == "title":
                self.document_title(node)
            elif node.macroname in _DEFINING:
                self.define(node)
        self.definitions(nodes)

    def define(self, node: Any) -> None:
        """``\\newcommand{\\name}{body}`` without arguments: ``\\name`` reads as its body
        from here on."""
        arguments = _arguments(node)
        if len(arguments) < 5 or arguments[2] is not None or arguments[4] is None:
            return  # one with arguments: they are read as text where it is used
        name = arguments[1]
        if name is not None and type(name).__name__ == "LatexGroupNode":
            name = next((n for n in name.nodelist if _name(n)), None)
        if name is not None and getattr(name, "macroname", None):
            self.defined[name.macroname] = arguments[4]

    def definitions(self, nodes: Sequence[Any]) -> None:
        """``\\def\\name{body}`` in a node list: ``\\name`` reads as its body."""
        for index, node in enumerate(nodes[:-2]):
            if _name(node) in _DEF and type(node).__name__ == "LatexMacroNode":
                name, body = nodes[index + 1], nodes[index + 2]
                if getattr(name, "macroname", None) and type(body).__name__ == "LatexGroupNode":
                    self.defined[name.macroname] = body

    def add(self, node: Any, quote: bool) -> None:
        """A node (or, as ``(pos, chars)``, a piece of a chars node) of the paragraph."""
        if isinstance(node, tuple):
            pos, chars = node
            pos += len(chars) - len(chars.lstrip())  # at its first character that is text
            entry = (self.base + pos, self.base + pos + len(chars.strip()) - 1, chars)
        else:
            entry = (self.base + node.pos, self.base + node.pos + node.len - 1, node)
        self.paragraph.append(entry)
        self.quoted = quote

    def flush(self) -> None:
        """The paragraph read so far, as a block."""
        if not self.paragraph:
            return
        text = self.text(entry[2] for entry in self.paragraph)
        where = self.where(self.paragraph[0][0], self.paragraph[-1][1])
        self.paragraph = []
        (self.out.quote if self.quoted else self.out.paragraph)(text, **where)

    def blocks(
        self, nodes: Sequence[Any], depth: int = 0, quote: bool = False, end: bool = True
    ) -> None:
        """The blocks of a node list: paragraphs, headings, lists, code, tables (``end``:
        the paragraph ends with the list; a piece of the file leaves it open)."""
        self.definitions(nodes)
        skip_definition = 0
        for node in nodes:
            if node is None:
                continue
            kind = type(node).__name__
            name = _name(node)
            if skip_definition:  # \def\name{...}: the name, then its body
                skip_definition -= 1
                if kind in ("LatexMacroNode", "LatexGroupNode", "LatexCharsNode"):
                    continue
            if kind == "LatexCharsNode":  # a blank line in it ends the paragraph
                chars, start = node.chars, 0
                for blank in _BLANK_LINE.finditer(chars):
                    if chars[start : blank.start()].strip():
                        self.add((node.pos + start, chars[start : blank.start()]), quote)
                    self.flush()
                    start = blank.end()
                if chars[start:].strip():
                    self.add((node.pos + start, chars[start:]), quote)
            elif kind == "LatexCommentNode":
                continue
            elif kind == "LatexMacroNode":
                if name in _LEVELS:
                    self.flush()
                    self.heading(node, _LEVELS[name])
                elif name == "title":
                    self.flush()
                    self.document_title(node)
                elif name in _PARAGRAPH_BREAKS:
                    self.flush()
                elif name == "caption":  # a paragraph of its own
                    self.flush()
                    caption = self.last_argument(node)
                    if caption is not None:
                        (self.out.quote if quote else self.out.paragraph)(
                            caption, **self.span(node)
                        )
                elif name in _DEF:
                    skip_definition = 2
                elif name in _DEFINING:
                    self.define(node)
                elif name not in _DROPPED:
                    self.add(node, quote)
            elif kind == "LatexEnvironmentNode":
                if name in _INLINE_ENVIRONMENTS:
                    self.add(node, quote)
                else:
                    self.flush()
                    self.environment(node, depth, quote)
            elif kind == "LatexGroupNode" and _holds_blocks(node):
                self.flush()  # {\small ... \begin{longtable} ...}: its blocks are read
                self.blocks(node.nodelist, depth, quote)
            else:  # groups, math, specials (``~``, ``--``)
                self.add(node, quote)
        if end:
            self.flush()

    def environment(self, node: Any, depth: int, quote: bool) -> None:
        name = node.environmentname
        where = self.span(node)
        if name in _DROPPED_ENVIRONMENTS:
            return
        if name in _CODE:
            parsed = node.nodeargd
            body = getattr(parsed, "verbatim_text", "") or ""
            language = getattr(parsed, "language", "")
            self.out.code(body.removeprefix("\n").rstrip(), language, **where)
        elif name in _HIGHLIGHTED:
            self.out.code(self.text(node.nodelist).strip("\n"), **where)
        elif name in _LISTS:
            self.items(node.nodelist, depth, name in _ORDERED, "item", quote)
        elif name == "thebibliography":
            self.items(node.nodelist, depth, False, "bibitem", quote)
        elif name in _TABLES:
            self.out.table(self.rows(node.nodelist), **where)
        else:
            self.blocks(node.nodelist, depth, quote or name in _QUOTES)

    def items(
        self, nodes: Sequence[Any], depth: int, ordered: bool, marker: str, quote: bool
    ) -> None:
        """A list's items: each ``\\item``'s first paragraph is the item, what follows it
        (nested lists, more paragraphs) is read one level deeper."""
        groups: list[tuple[Any, list[Any]]] = []
        for node in nodes:
            if _name(node) == marker and type(node).__name__ == "LatexMacroNode":
                groups.append((node, []))
            elif groups and node is not None:
                groups[-1][1].append(node)
        for item, body in groups:
            label = ""
            arguments = [a for a in _arguments(item) if a is not None]
            if marker == "bibitem" and arguments:
                label = "[" + arguments[-1].latex_verbatim().strip("{}").strip() + "] "
            elif arguments:  # \item[Term]
                label = self.text([arguments[0]]).strip("[] ") + ": "
            split = len(body)
            for index, node in enumerate(body):
                kind = type(node).__name__
                blank = kind == "LatexCharsNode" and _BLANK_LINE.search(node.chars)
                block = kind == "LatexEnvironmentNode" and _name(node) not in _INLINE_ENVIRONMENTS
                if blank or block or _name(node) in _LEVELS:
                    split = index
                    break
            head, rest = body[:split], body[split:]
            text = label + self.text(n for n in head if _name(n) not in _DROPPED)
            if text.strip():
                last = head[-1] if head else item
                length = len(last.chars.rstrip()) if hasattr(last, "chars") else last.len
                where = self.where(self.base + item.pos, self.base + last.pos + length - 1)
                self.out.list_item(text, depth, 1 if ordered else None, **where)
            if rest:
                self.blocks(rest, depth + 1, quote)

    def rows(self, nodes: Sequence[Any]) -> list[list[str]]:
        """A tabular's cells: rows end at ``\\\\``, cells at ``&``."""
        rows: list[list[str]] = []
        row: list[str] = []
        cell: list[Any] = []

        def end_cell() -> None:
            row.append(self.text(cell))
            cell.clear()

        for node in nodes:
            kind = type(node).__name__
            name = _name(node)
            if kind == "LatexSpecialsNode" and node.specials_chars == "&":
                end_cell()
            elif kind == "LatexMacroNode" and name in _ROW_ENDS:
                end_cell()
                rows.append(row)
                row = []
            elif kind == "LatexCommentNode" or (kind == "LatexMacroNode" and name in _DROPPED):
                continue
            elif node is not None:
                cell.append(node)
        if self.text(cell).strip():
            end_cell()
        if row:
            rows.append(row)
        return rows


def _layout(source: str, limit: int = _PIECE) -> tuple[tuple[int, int] | None, list[int]]:
    """Where the document environment's body lies (None without one), and the offsets
    where the file is cut into pieces the walker reads one at a time.

    pylatexenc's walker is quadratic in a run of plain text (it grows the run one token at
    a time) and copies the rest of the file at each ``\\begin``; pieces bound both. A
    piece ends at a blank line outside any group and environment (but ``document``), so
    no paragraph, list or table is cut; a piece that has grown past ``limit`` characters
    without one ends at the next white space, or inside a long run of characters with
    none (the paragraph goes on in the next piece, so its text is the same unless the cut
    falls inside math or a group). Comments,
    ``\\verb`` and verbatim environments are skipped as LaTeX reads them."""
    body_start: int | None = None
    body: tuple[int, int] | None = None
    cuts: list[int] = []
    groups = environments = 0
    skip = last = 0
    for match in _TOKENS.finditer(source):
        at = match.start()
        if at < skip:
            continue
        token = match.group()
        if match["verb"]:
            close = source.find(match["verb"], match.end())
            skip = len(source) if close < 0 else close + 1
        elif match["env"]:
            name, begin = match["env"].strip(), match["kind"] == "begin"
            if name == "document":
                if begin and body_start is None:
                    body_start = match.end()
                    cuts.append(body_start)
                    last = body_start
                elif not begin and body_start is not None and body is None:
                    body = (body_start, at)
                    cuts.append(at)
                    last = at
            elif begin and name in _RAW_ENVIRONMENTS:
                close = source.find(f"\\end{{{name}}}", match.end())
                skip = len(source) if close < 0 else close
            elif begin:
                environments += 1
            else:
                environments = max(environments - 1, 0)
        elif token == "%":
            newline = source.find("\n", at)
            skip = len(source) if newline < 0 else newline
        elif token == "{":
            groups += 1
        elif token == "}":
            groups = max(groups - 1, 0)
        elif token.startswith("\\"):
            continue
        elif (token[0] == "\n" and "\n" in token[1:] and not groups and not environments) or (
            at - last > limit
        ):
            cuts.append(match.end())
            last = match.end()
    if body_start is not None and body is None:
        body = (body_start, len(source))
    return body, cuts


def _pieces(start: int, end: int, cuts: Sequence[int]) -> list[tuple[int, int]]:
    """The pieces from ``start`` to ``end``, cut at ``cuts``."""
    inside = [c for c in cuts if start < c < end]
    return list(zip([start, *inside], [*inside, end]))


class LatexParser:
    """LaTeX: its sections, paragraphs, lists, tables and listings, in the
    Markdown-shaped form the structured policy reads (see the module docstring)."""

    name = "latex"
    suffixes = FORMATS["latex"][1]

    def version(self) -> str:
        return "latex/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        source = text.replace("\r\n", "\n").replace("\r", "\n")
        specs, converter = _context()
        latexwalker = require("pylatexenc.latexwalker", "formats", "pylatexenc")
        reader = _Reader(source, converter)
        defined = _DEFINED.set(reader.defined)
        body, cuts = _layout(source)

        def read_pieces(start: int, end: int, preamble: bool = False) -> None:
            for a, b in _pieces(start, end, cuts):
                walker = latexwalker.LatexWalker(
                    source[a:b], latex_context=specs, tolerant_parsing=True
                )
                nodes, _, _ = walker.get_latex_nodes()
                reader.base = a
                if preamble:
                    reader.preamble(nodes)
                else:
                    reader.blocks(nodes, end=False)

        try:
            if body is None:  # a chapter file that a main file includes: all of it is text
                read_pieces(0, len(source))
            else:
                read_pieces(0, body[0], preamble=True)
                read_pieces(*body)
            reader.flush()
        finally:
            _DEFINED.reset(defined)
        return reader.out.text_document(self.name, self.version(), read, reader.title)
