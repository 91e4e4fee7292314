"""Syntax-aware chunking of source code: tree-sitter boundaries, content-chosen cuts."""

from __future__ import annotations

import bisect
import heapq
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
import numpy.typing as npt

from rechunk._optional import require
from rechunk.chunkers.base import (
    Analysis,
    BaseChunker,
    IntArray,
    Units,
    check_sizes,
    check_text,
    pre_token_pieces,
    refine,
)
from rechunk.chunkers.code_languages import (
    LANGUAGES,
    LanguageSpec,
    grammar,
    language_for,
    spec_for,
    symbol_name,
)
from rechunk.chunkers.recursive import RecursiveChunker
from rechunk.chunkers.structured import _chain, _local_maxima, _mix, _span_hashes
from rechunk.chunking.chunk import NORMALIZATION_VERSION, Chunk
from rechunk.errors import ConfigError, MissingDependencyError
from rechunk.reuse.identity import hash_fields

__all__ = [
    "LANGUAGES",
    "CodeChunker",
    "code_chunker_for",
    "language_for",
    "row_starts",
    "span_lines",
]

U64 = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

# Strength of the boundary before a unit (higher wins); FORBID is never cut by choice.
FORBID, PIECE, WORD, CLOSING_LINE, TEXT_LINE, TEXT_BLOCK = range(6)
_BASE = 6  # first syntax level: the deepest statement boundary
_DEPTHS = 7  # nesting depths told apart (0 .. 6; deeper counts as 6)
_SUBLEVELS = 4  # within a depth: plain, after a blank line, at a block's edge, both
_TOP = _BASE + _DEPTHS * _SUBLEVELS  # the two ends of the text
_LEVEL_SHIFT = 56
_HASH_BITS = 28  # the first line's hash, then a longer context's (ties)
_LINE_UNITS = 8  # units of the first line hashed for the key
_CONTEXT_UNITS = 24  # units hashed to break ties between equal first lines
_MAX_KEY = np.int64(_TOP << _LEVEL_SHIFT)


_LINE_FIRST = re.compile(r"^[^\S\n]*(\S)", re.M)


def _last_row(node: Any) -> int:
    """The row of a node's last character (a node ending at a line start ends on the row before)."""
    end = node.end_point
    row: int = end.row
    if end.column == 0 and row > node.start_point.row:
        row -= 1
    return row


@dataclass
class _Structure:
    """What one parse says about the lines of a text.

    ``first[r]``: character offset of the first non-whitespace character of row
    ``r`` (-1 for a blank row). ``level[r]``: the level of a boundary before that
    character. ``head[r]``: the row that starts the item whose first line is ``r``
    (earlier when comments or attributes are attached above it). ``spans``: the
    (first row, last row, end character) of every multi-line item starting a line.
    """

    text: str
    source: bytes
    first: list[int]
    level: list[int]
    head: list[int]
    spans: list[tuple[int, int, int]]
    line_starts: list[int]
    tree: Any
    char_of: Callable[[int], int]
    #: node id -> row, for every named node that starts a line
    items: dict[int, int]
    #: rows where the head of the file is cut: after its leading comments and after
    #: its prologue (see :func:`_prologue_cuts`)
    cuts: list[int]
    #: the row where the head is cut after a copyright or licence notice among the
    #: leading comments, whatever its size (see :func:`_notice_cut`), else None
    notice: int | None


def _byte_to_char(text: str, source: bytes) -> Callable[[int], int]:
    if len(source) == len(text):
        return lambda b: b
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    widths = 1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000)
    byte_of_char = np.zeros(len(text) + 1, dtype=np.int64)
    np.cumsum(widths, out=byte_of_char[1:])

    def char_of(b: int) -> int:
        return int(np.searchsorted(byte_of_char, b, side="right")) - 1

    return char_of


def _parse_structure(spec: LanguageSpec, text: str) -> _Structure:
    """Parse ``text`` and classify the boundary before the first character of each line."""
    language, _ = grammar(spec.name)
    parser = require("tree_sitter", "code", "tree-sitter").Parser(language)
    source = text.encode("utf-8")
    tree = parser.parse(source)
    char_of = _byte_to_char(text, source)
    newlines = [m.start() for m in re.finditer("\n", text)]
    line_starts = [0, *(n + 1 for n in newlines)]
    n_rows = len(line_starts)
    first = [-1] * n_rows
    for m in _LINE_FIRST.finditer(text):
        pos = m.start(1)
        first[bisect.bisect_right(newlines, pos - 1)] = pos
    if len(source) == len(text):
        first_byte = first
    else:
        prefix = np.zeros(len(text) + 1, dtype=np.int64)
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        np.cumsum(1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000), out=prefix[1:])
        first_byte = [int(prefix[c]) if c >= 0 else -1 for c in first]
    level = [TEXT_LINE] * n_rows
    head = list(range(n_rows))
    spans: list[tuple[int, int, int]] = []
    assigned = [False] * n_rows
    item_rows: dict[int, int] = {}
    attached = spec.attached
    definitions = spec.definitions
    lists = spec.lists

    def blank_before(row: int) -> bool:
        return row > 0 and first[row - 1] < 0

    # iterative walk over the nodes that span several lines: (node, distinct start rows of
    # its ancestors below the root, the last of those rows)
    stack: list[tuple[Any, int, int]] = [(tree.root_node, 0, -1)]
    while stack:
        node, count, last = stack.pop()
        # the children that start a line, in order: (child, row, last row, depth)
        items: list[tuple[Any, int, int, int]] = []
        descend: list[tuple[Any, int, int]] = []
        for child in node.children:
            row = child.start_point.row
            end_row = _last_row(child)
            if child.type in lists:
                if end_row > row or child.child_count:
                    descend.append((child, count, last))
                continue
            if (
                row < n_rows
                and not assigned[row]
                and child.start_byte == first_byte[row]
                and child.end_byte > child.start_byte
            ):
                assigned[row] = True
                depth = count - (1 if last == row else 0)
                if child.is_named:
                    items.append((child, row, end_row, depth))
                    item_rows[child.id] = row
                else:
                    level[row] = CLOSING_LINE
            if end_row > row:
                if row != last:
                    descend.append((child, count + 1, row))
                else:
                    descend.append((child, count, last))
        if items:
            _classify(items, level, head, spans, attached, definitions, blank_before, char_of)
        stack.extend(reversed(descend))
    for row in range(1, n_rows):
        if not assigned[row] and first[row] >= 0 and first[row - 1] < 0:
            level[row] = TEXT_BLOCK  # a paragraph inside a docstring or block comment
    # the rows that start those items (or what is attached above them); whether a cut
    # is made there is decided with the token counts (CodeChunker._word_levels)
    cut_items = _prologue_cuts(spec, tree.root_node)
    cuts = [head[item.start_point.row] for item in cut_items]
    notice = None
    named = [c for c in tree.root_node.children if c.is_named]
    leading = named[: _first_code(spec, named) or 0]  # comments above the first code
    if leading and cuts:  # then the first cut ends them (see _prologue_cuts)
        notice = _notice_cut(spec, text, char_of, leading, cut_items[0], cuts[0])
        if notice is not None:
            cuts[0] = notice
    return _Structure(
        text,
        source,
        first,
        level,
        head,
        spans,
        line_starts,
        tree,
        char_of,
        item_rows,
        cuts,
        notice,
    )


def _notice_cut(
    spec: LanguageSpec,
    text: str,
    char_of: Callable[[int], int],
    leading: list[Any],
    code: Any,
    cut: int,
) -> int | None:
    """The row a file's head is cut at after a copyright or licence notice among its
    ``leading`` comments, else None. ``code`` is the first item below them and ``cut``
    the row of what is attached to it (comments with no blank line between).

    The comments fall in runs with no blank line inside; the last run that names a
    notice holds its end. The cut is after the last comment of that run that names
    the notice when another comment of the run follows (a package's or module's doc);
    else, when a blank line parts the run from ``code``, at what follows the run (the
    next comment, or ``code`` with its attached doc); else (the notice right above
    ``code``) right above ``code`` when ``code`` is a prologue item (a module
    docstring, ``package``, an import) or the notice has the strongest words
    (``copyright``, ``SPDX-License``, ``(c)``): a comment right above a definition that
    only speaks of a licence is that definition's doc.
    """
    runs: list[list[Any]] = []
    for comment in leading:
        if runs and comment.start_point.row <= _last_row(runs[-1][-1]) + 1:
            runs[-1].append(comment)
        else:
            runs.append([comment])

    def names(nodes: list[Any]) -> bool:
        return _NOTICE.search(text, *_span(nodes, char_of)) is not None

    found = [k for k, run in enumerate(runs) if names(run)]
    if not found:
        return None
    run = runs[found[-1]]
    last = max((k for k, comment in enumerate(run) if names([comment])), default=len(run) - 1)
    if last + 1 < len(run):  # comments of what follows, in the notice's run
        return int(run[last + 1].start_point.row)
    if run[0].start_point.row < cut:  # parted from the code by a blank line
        after = runs[found[-1] + 1][0] if found[-1] + 1 < len(runs) else None
        return cut if after is None or after.start_point.row >= cut else int(after.start_point.row)
    # right above the code: a module docstring's or a package's notice, or (but for the
    # strongest words) a definition's doc that speaks of a licence
    if _in_prologue(spec, code) or _STRONG_NOTICE.search(text, *_span(run[last:], char_of)):
        return int(code.start_point.row)
    return None


def _span(nodes: list[Any], char_of: Callable[[int], int]) -> tuple[int, int]:
    """The characters from the first of ``nodes`` to the end of the last."""
    return char_of(nodes[0].start_byte), char_of(nodes[-1].end_byte)


#: words of a notice that a definition's doc does not use ("licence" alone may be one's)
_STRONG_NOTICE = re.compile(r"copyright|spdx-license|\u00a9|\(c\)|all rights reserved", re.I)
#: words of a copyright or licence notice (a year in it is bumped every January)
_NOTICE = re.compile(r"copyright|licen[cs]e|spdx|\u00a9|\(c\)|all rights reserved", re.I)


def _prologue_cuts(spec: LanguageSpec, root: Any) -> list[Any]:
    """The top-level items before which the head of a file is always cut.

    A file's leading comments (a licence or module header), its prologue (imports,
    package and module declarations, a module docstring or directive string,
    CommonJS ``require`` declarations) and its code change for reasons of their own
    (a year bumped, an import added beside a change further down), so each starts a
    chunk: the first item after the leading comments, and the first item after the
    prologue's last item when other code follows (comments below that item belong to
    what follows them). In a C or C++ header, the prologue is looked for inside the
    include guard (``#ifndef X`` / ``#define X``).
    """
    items = [c for c in root.children if c.is_named]
    lead = _first_code(spec, items)
    if lead is None:
        return []
    cuts = [items[lead]] if lead else []
    guarded = _include_guard(items[lead])
    if guarded is not None:
        items = guarded
        lead = _first_code(spec, items)
        if lead is None:
            return cuts
    last = None
    for k in range(lead, len(items)):
        if _in_prologue(spec, items[k]):
            last = k
        elif items[k].type not in spec.attached:
            if last is not None:
                cuts.append(items[last + 1])
            break
    return cuts


def _first_code(spec: LanguageSpec, items: list[Any]) -> int | None:
    """The index of the first item that is not a comment or attribute."""
    return next((k for k, item in enumerate(items) if item.type not in spec.attached), None)


def _include_guard(item: Any) -> list[Any] | None:
    """The items inside ``item`` when it is a C include guard, else None."""
    if item.type != "preproc_ifdef":
        return None
    name = item.child_by_field_name("name")
    inside = [c for c in item.children if c.is_named and c != name]
    if name is None or not inside or inside[0].type != "preproc_def":
        return None
    defined = inside[0].child_by_field_name("name")
    if defined is None or defined.text != name.text:
        return None
    return inside[1:]


def _in_prologue(spec: LanguageSpec, item: Any) -> bool:
    """Whether a top-level item belongs to a file's prologue (see :func:`_prologue_cuts`)."""
    if item.type in spec.prologue:
        return True
    named = item.named_children
    if item.type == "expression_statement" and len(named) == 1 and named[0].type == "string":
        return True  # a module docstring, "use strict"
    if item.type in ("variable_declaration", "lexical_declaration"):  # JavaScript's
        values = [d.child_by_field_name("value") for d in named if d.type == "variable_declarator"]
        if values and all(_requires(v) for v in values):
            return True
    return bool(spec.prologue_calls) and _prologue_call(spec, item)


#: node types of a call, and the field that names what is called (Ruby, Lua, a shell)
_CALLS = {"call": "method", "function_call": "name", "command": "name"}


def _prologue_call(spec: LanguageSpec, item: Any) -> bool:
    """Whether a one-line item is (or assigns) a call of one of ``spec.prologue_calls``:
    ``require "x"``, ``local x = require("x")``, ``source ./lib.sh``, PHP's
    ``require_once 'x.php';``."""
    if item.start_point.row != item.end_point.row:
        return False
    level = [item]
    for _ in range(4):  # a call within a statement, a declaration or an assignment
        below = []
        for node in level:
            field = _CALLS.get(node.type)
            if field is not None and node.child_by_field_name("receiver") is None:
                callee = node.child_by_field_name(field)
                name = "" if callee is None else callee.text.decode("utf-8", "replace")
                if name in spec.prologue_calls:
                    return True
            if node.type.removesuffix("_expression") in spec.prologue_calls:
                return True
            below.extend(node.named_children)
        level = below
    return False


def _requires(node: Any) -> bool:
    """Whether ``node`` is a CommonJS ``require(...)`` call (or a call or member of one)."""
    while node is not None and node.type in ("call_expression", "member_expression"):
        inner = node.child_by_field_name("function") or node.child_by_field_name("object")
        if inner is not None and inner.type == "identifier":
            return bool(inner.text == b"require")
        node = inner
    return False


def _classify(
    items: list[tuple[Any, int, int, int]],
    level: list[int],
    head: list[int],
    spans: list[tuple[int, int, int]],
    attached: frozenset[str],
    definitions: frozenset[str],
    blank_before: Callable[[int], bool],
    char_of: Callable[[int], int],
) -> None:
    """Levels of the lines started by one node's children (siblings, in order).

    A run of attached items (comments, attributes) with no blank line between them
    and the item below belongs to that item: its first line takes the item's level
    and the lines after it inside the run are text lines.
    """
    previous_block = False  # the item before was a block (several lines or a definition)
    k = 0
    while k < len(items):
        # extend a run of attached items down to the item they sit on
        j = k
        while (
            items[j][0].type in attached
            and j + 1 < len(items)
            and items[j + 1][1] == items[j][2] + 1
        ):
            j += 1
        if j > k and items[j][0].type in attached:
            j = k  # the run ends in nothing to attach to: each stands alone
        node, row, end_row, depth = items[j]
        first_row = items[k][1]
        block = end_row > row or node.type in definitions
        sub = 2 * (block or previous_block) + blank_before(first_row)
        level[first_row] = _BASE + (_DEPTHS - 1 - min(depth, _DEPTHS - 1)) * _SUBLEVELS + sub
        for inner in range(k + 1, j + 1):
            level[items[inner][1]] = TEXT_LINE
            head[items[inner][1]] = first_row
        if end_row > first_row:
            spans.append((first_row, end_row, char_of(node.end_byte)))
        previous_block = block
        k = j + 1


class CodeChunker(BaseChunker):
    """Chunks of source code whose boundaries follow its syntax (tree-sitter).

    **Structure.** The text is parsed with the language's tree-sitter grammar
    (from its own grammar wheel; a file that does not parse is read through
    tree-sitter's error recovery, so this never fails). Every line gets the
    level of a boundary before its first character, from the outermost syntax
    node starting there:

    * a node that starts a line and is one of a list of siblings (a top-level
      definition, import or statement; a method in a class body; a statement in
      a function body) gives a *syntax level*: shallower nesting is stronger (the
      depth counts the distinct lines on which the enclosing nodes start, so a
      callback's body is one level below the call that opens it); at the same
      depth a boundary at the edge of a block (the item before or after spans
      several lines or is a definition) beats one after a blank line, which
      beats one between two one-line items;
    * comments and attributes directly above an item (no blank line) belong to
      it: the first of them takes the item's level and the lines after it within
      the run are text lines;
    * a line inside a multi-line token (a docstring, a block comment) is a text
      line, one after a blank line there (a paragraph) a little stronger; a line
      starting with a closing bracket is below both; a word inside a line is
      below all of them, and a piece of a word (a word of more than
      ``min_tokens`` tokens, cut at the tokenizer's pre-tokens) lowest.

    An item of several lines that holds at most ``max_tokens`` tokens (with what
    is attached to it) is never cut inside: a small function, class or statement
    stays whole, and a larger one is split at its members or statements, then
    as text. Such a larger item always starts a chunk (with the floor below), so
    its pieces are cut the same whatever comes before it: an edit above a long
    function or class leaves the chunks inside it as they were.

    **The head of a file** longer than ``max_tokens`` is always cut twice: after
    its leading comments (a licence or module header) and after its prologue
    (imports, package and module declarations, a module docstring, CommonJS
    ``require`` declarations; in a C header, inside the include guard). The three
    change for reasons of their own (a year bumped, an import added beside a change
    further down), and grouped with the first definition an added import would
    re-embed that definition too. A piece of fewer than ``min_tokens // 4`` tokens
    (a lone ``package main``, or a short item between two long ones) is not cut
    off: it joins the piece after it.

    **A copyright or licence notice** among the leading comments (they name
    ``copyright``, ``license``, ``SPDX``, ``(c)`` or hold ``\u00a9``) is cut off
    whatever its size, in a file of any length (when at least ``min_tokens // 4``
    tokens follow it): a year bumped in every file each January then re-embeds the
    notices, not the imports or the whole of a small file. Comments after the notice
    (a package comment, the first definition's doc comment) stay with the code below
    them, and a comment right above a definition that only speaks of a licence is that
    definition's doc (see :func:`_notice_cut`).

    **The cut rule** is the structured policy's, with content *after* a
    boundary: each boundary's key is its level, then 28 bits of a hash of the
    first line of the item that starts there (up to 8 units), then 28 bits of a
    hash of the 24 units from there (breaking ties between equal first lines,
    such as ``#[test]``). A boundary is an *anchor* iff its key beats every other
    key less than ``min_tokens`` tokens away (the leftmost wins a tie); a span
    between consecutive anchors that holds at most ``max_tokens`` tokens is one
    chunk, a longer one is cut from its left end at the allowed boundary with the
    greatest key that makes the chunk ``min_tokens`` to ``max_tokens`` tokens
    (else the best that makes it ``min_tokens // 4`` to ``max_tokens``, so that a
    class's or a YAML key's first line is not left alone before a member too large
    to join it; else the best within ``max_tokens``, else the last boundary within
    it). So
    small neighbouring definitions and imports are grouped by their content, not
    packed greedily, and an inserted function changes only the chunks within
    about ``max_tokens`` tokens of it: the chunks after the next anchor keep their
    bytes.

    Defaults (for a 512-token model window): ``min_tokens=253``,
    ``max_tokens=422``: on the dev commits (``code-dev.jsonl``) their median chunk
    is 293 MiniLM tokens, and scaled to all-MiniLM-L6-v2's window
    (:func:`rechunk.policy_for`: 125 / 209) it is 147.

    No chunk exceeds ``max_tokens`` (every unit holds at most ``min_tokens``
    tokens; with a tokenizer that is not additive the finished chunks are
    re-counted and one over ``max_tokens`` is cut near its middle). The policy id
    names the language and the grammar wheel's version: a new grammar is a new
    policy (inputs with the same text still share their vectors).
    """

    kind = "code"
    version = 5

    def __init__(
        self,
        language: str,
        *,
        min_tokens: int = 253,
        max_tokens: int = 422,
        tokenizer: Any = None,
        hard_max_tokens: int = 512,
    ) -> None:
        spec = spec_for(language)
        check_sizes(hard_max_tokens, min_tokens=min_tokens, max_tokens=max_tokens)
        self._spec = spec
        _, self._grammar_version = grammar(spec.name)
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        super().__init__(tokenizer, hard_max_tokens)

    # -- identity ---------------------------------------------------------------------------

    @property
    def language(self) -> str:
        return self._spec.name

    @property
    def grammar_version(self) -> str:
        """The version of the grammar wheel that parses this language."""
        return self._grammar_version

    @property
    def params(self) -> dict[str, int]:
        return {
            "min_tokens": self.min_tokens,
            "max_tokens": self.max_tokens,
            "hard_max_tokens": self.hard_max_tokens,
        }

    @property
    def policy_id(self) -> str:
        """``code-<language>-<grammar version>-<12 hex>`` (the hash covers all of it)."""
        fields = (
            self.kind,
            str(self.version),
            json.dumps(self.params, sort_keys=True),
            self._counter.identity,
            NORMALIZATION_VERSION,
            self.language,
            self._spec.package,
            self._grammar_version,
        )
        digest = hash_fields("rechunk/policy/v1", fields)[:12]
        return f"{self.kind}-{self.language}-{self._grammar_version}-{digest}"

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["language"] = self.language
        out["grammar"] = f"{self._spec.package} {self._grammar_version}"
        return out

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{type(self).__name__}({self.language!r}, {params})"

    # -- chunking ---------------------------------------------------------------------------

    @property
    def _floor(self) -> int:
        """Pieces below this many tokens are not cut off by choice (see the class doc)."""
        return self.min_tokens // 4

    @property
    def _recount_limit(self) -> int:
        """Re-counted chunks keep to ``max_tokens``, not only to the hard maximum."""
        return self.max_tokens

    def chunk(self, text: str) -> list[Chunk]:
        """Chunks whose spans tile ``text`` (see the class doc). A file whose lines end in
        CR alone (classic Mac) is read with LF, which the parser and the line rules know:
        the same length, so the same spans, and each chunk's text is what it would be
        (``embedding_input`` makes every line end LF)."""
        return super().chunk(_with_lf(text))

    def _chunk_starts(self, analysis: Analysis) -> tuple[Units, list[int]]:
        units, levels = self._units(analysis)
        keys = np.append(self._keys(analysis, units, levels), _MAX_KEY)
        prefix = units.prefix
        allowed = np.append(levels >= PIECE, True)
        anchors = (_local_maxima(prefix, keys, self.min_tokens) & allowed) | (keys == _MAX_KEY)
        bounds = np.flatnonzero(anchors).tolist()
        starts: list[int] = []
        for a, b in zip(bounds, bounds[1:]):
            _chain(
                prefix, keys, allowed, a, b, self.min_tokens, self.max_tokens, starts, self._floor
            )
        return units, starts

    def _word_levels(self, analysis: Analysis) -> tuple[IntArray, BoolArray]:
        """The level of the boundary before each word, and whether a word lies inside an
        item kept whole (its inner pieces may not be cut either)."""
        structure = _parse_structure(self._spec, analysis.text)
        starts = analysis.starts
        n = len(starts)
        levels = np.full(n, WORD, dtype=np.int64)
        first = np.asarray(structure.first, dtype=np.int64)
        rows = np.flatnonzero(first >= 0)
        at = np.searchsorted(starts, first[rows])
        ok = (at < n) & (starts[np.minimum(at, n - 1)] == first[rows])
        row_level = np.asarray(structure.level, dtype=np.int64)
        levels[at[ok]] = row_level[rows[ok]]
        # items of several lines that fit in max_tokens are kept whole
        prefix = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(analysis.counts, out=prefix[1:])
        inside = np.zeros(n + 1, dtype=np.int64)
        forced: list[int] = []  # words a cut is made before (see below)
        if structure.spans:
            spans = np.asarray(structure.spans, dtype=np.int64)
            lo = np.searchsorted(starts, first[spans[:, 0]])
            hi = np.searchsorted(starts, spans[:, 2])  # first word at or after the end
            fits = (prefix[hi] - prefix[lo] <= self.max_tokens) & (hi > lo)
            np.add.at(inside, lo[fits], 1)
            np.add.at(inside, hi[fits], -1)
            within = np.cumsum(inside[:n]) > 0  # words whose pieces may not be cut
            before = np.zeros(n + 1, dtype=np.int64)
            np.add.at(before, lo[fits] + 1, 1)
            np.add.at(before, hi[fits], -1)
            forbidden = np.cumsum(before[:n]) > 0
            levels[forbidden] = FORBID
            # an item too large for one chunk starts one: its cuts then do not depend on
            # what comes before it
            big = (prefix[hi] - prefix[lo] > self.max_tokens) & (hi > lo)
            forced.extend(lo[big].tolist())
        else:
            within = np.zeros(n, dtype=np.bool_)
        if n:
            levels[0] = _TOP
        notice = -1
        for row in structure.cuts:  # the head of the file
            w = int(np.searchsorted(starts, structure.first[row]))
            if w < n and starts[w] == structure.first[row]:
                forced.append(w)
                if row == structure.notice:
                    notice = w
        whole = prefix[n] <= self.max_tokens  # a file of one chunk: only a notice is cut
        if forced and (not whole or notice > 0):
            # a piece of fewer than a quarter of min_tokens joins the next one (no chunk
            # of a lone `package main`), but for a copyright or licence notice
            floor = self._floor
            last = 0
            for w in sorted(set(forced)):
                if w == 0 or (whole and w != notice):
                    continue
                if w != notice and (levels[w] < _BASE or prefix[w] - prefix[last] < floor):
                    continue
                if prefix[n] - prefix[w] < floor:
                    break
                levels[w] = _TOP
                last = w
        return levels, within

    def _units(self, analysis: Analysis) -> tuple[Units, IntArray]:
        """Units (words; a word of more than ``min_tokens`` tokens as pre-token pieces)
        and the level of the boundary before each."""
        word_levels, within = self._word_levels(analysis)
        counter = self._counter
        threshold = self.min_tokens
        splits: dict[int, list[tuple[int, int]]] = {}
        exact = True
        for i in np.flatnonzero(analysis.counts > threshold).tolist():
            pieces, ok = pre_token_pieces(counter, analysis.words[i], threshold)
            exact = exact and ok
            if len(pieces) > 1:
                splits[i] = pieces
        units = refine(analysis, splits, exact)
        if not splits:
            return units, word_levels
        word_of = units.word
        levels = word_levels[word_of].copy()
        first_piece = np.ones(len(units), dtype=np.bool_)
        first_piece[1:] = word_of[1:] != word_of[:-1]
        inner = np.flatnonzero(~first_piece)
        levels[inner] = np.where(within[word_of[inner]], FORBID, PIECE)
        return units, levels

    def _keys(self, analysis: Analysis, units: Units, levels: IntArray) -> IntArray:
        """Key of the boundary before each unit: level, a hash of the first line that
        starts there (up to ``_LINE_UNITS`` units), a hash of ``_CONTEXT_UNITS`` units."""
        text = analysis.text
        n = len(units)
        starts, word_of = units.starts, units.word
        # where each unit's own text ends (a piece ends where the next piece of its word starts)
        ends = analysis.ends[word_of].copy()
        same_next = np.zeros(n, dtype=np.bool_)
        same_next[:-1] = word_of[1:] == word_of[:-1]
        ends[same_next] = starts[1:][same_next[:-1]]
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        newlines = np.append(np.flatnonzero(codes == 10), len(text)).astype(np.int64)
        line_end = newlines[np.searchsorted(newlines, starts, side="left")]
        index = np.arange(n, dtype=np.int64)
        # the first line's last unit: at most _LINE_UNITS units, none past the line's end
        stop = np.minimum(index + _LINE_UNITS, n) - 1
        stop = np.maximum(np.minimum(stop, np.searchsorted(starts, line_end) - 1), index)
        wide = np.minimum(index + _CONTEXT_UNITS, n) - 1
        both = _span_hashes(
            codes, np.concatenate((starts, starts)), np.concatenate((ends[stop], ends[wide]))
        )
        line_hash, context_hash = both[:n], both[n:]
        content = ((line_hash >> np.uint64(64 - _HASH_BITS)) << np.uint64(_HASH_BITS)) | (
            _mix(context_hash) >> np.uint64(64 - _HASH_BITS)
        )
        keys: IntArray = (levels << _LEVEL_SHIFT) | content.astype(np.int64)
        keys[levels == _TOP] = _MAX_KEY
        return keys

    # -- locating chunks --------------------------------------------------------------------

    def locator(self, text: str) -> Callable[[int, int], dict[str, Any]]:
        """Parse ``text`` once; return ``where(start, end)`` for spans of it.

        ``where`` gives ``{"language": ..., "symbol": "Cart.add", "lines": [first, last]}``:
        the 1-based lines of the span's first and last non-whitespace characters, and
        the path of the innermost definition holding its first non-whitespace character
        (a comment or attribute attached above a definition counts as part of it, but
        for a licence or copyright notice cut off above it; ``symbol`` is left out at top
        level, outside any definition).
        """
        text = _with_lf(check_text(text))
        structure = _parse_structure(self._spec, text)
        symbol_at = _innermost(_definitions(self._spec, structure))
        starts = structure.line_starts
        language = self.language
        # a copyright or licence notice is cut off the code below it (see the class doc):
        # a span of the notice alone documents no definition, though it may sit right
        # above one, attached
        row = structure.notice
        notice_end = -1 if row is None else max(structure.first[row], starts[row])

        def where(start: int, end: int) -> dict[str, Any]:
            lines, first = span_lines(text, starts, start, end)
            out: dict[str, Any] = {"language": language}
            symbol = None if end <= notice_end else symbol_at(first)
            if symbol is not None:
                out["symbol"] = symbol
            out["lines"] = lines
            return out

        return where


def _with_lf(text: str) -> str:
    """``text`` with its line ends LF when every one is CR alone (of the same length)."""
    if isinstance(text, str) and "\r" in text and "\n" not in text:
        return text.replace("\r", "\n")
    return text


def row_starts(text: str) -> list[int]:
    """The character offset where each line of ``text`` starts."""
    return [0, *(m.end() for m in re.finditer("\n", text))]


def span_lines(text: str, starts: list[int], start: int, end: int) -> tuple[list[int], int]:
    """``([first, last], offset)``: the 1-based lines of the first and last non-whitespace
    characters of ``text[start:end]`` (``starts``: :func:`row_starts` of ``text``), and
    the offset of that first character (``start`` for a span of whitespace)."""
    piece = text[start:end]
    stripped = piece.lstrip()
    first = start + len(piece) - len(stripped)
    last = start + len(piece.rstrip()) - 1
    if not stripped:
        first = last = start
    return [bisect.bisect_right(starts, first), bisect.bisect_right(starts, last)], first


def _definitions(spec: LanguageSpec, structure: _Structure) -> list[tuple[int, int, int, str]]:
    """Every named definition: (start, end, depth, symbol path), in characters. The start
    is the first line of what is attached above it when the definition begins the item
    that starts its line (``export function f``, a decorated or commented method)."""
    source = structure.source
    char_of = structure.char_of
    first, head, items = structure.first, structure.head, structure.items
    out: list[tuple[int, int, int, str]] = []
    claimed: set[int] = set()  # items whose first definition took what is attached above

    def starts_line(node: Any) -> bool:
        """Whether ``node`` begins its line: an item, or a node whose row an item above it
        took (a YAML document's first key)."""
        row: int = node.start_point.row
        return row < len(first) and char_of(node.start_byte) == first[row]

    holds_code_before = _CodeBefore(spec, starts_line)
    stack: list[tuple[Any, tuple[str, ...]]] = [(structure.tree.root_node, ())]
    while stack:
        node, path = stack.pop()
        later: list[tuple[Any, tuple[str, ...]]] = []
        for child in node.children:
            inner = path
            if child.type in spec.definitions:
                name = symbol_name(spec, child, source)
                if name:
                    inner = (*path, name)
                    start = char_of(child.start_byte)
                    # the item starting the line this definition opens (itself, or a
                    # wrapper: decorators, export, template, declaration), not through
                    # another definition nor a container (an include guard, an `if`
                    # block) that holds other items before it
                    item = None
                    above = child
                    while above is not None and above.type not in spec.lists:
                        if above.id in items:
                            item = above
                        inner_node, above = above, above.parent
                        if above is None or above.type in spec.definitions:
                            break
                        if holds_code_before(above, inner_node):
                            break
                    if item is not None and item.id not in claimed:
                        claimed.add(item.id)
                        top = first[head[items[item.id]]]
                        if 0 <= top <= start:
                            start = top
                    start = min(start, _decorated_from(item or child, char_of))
                    end = char_of(child.end_byte)
                    out.append((start, end, len(inner), _symbol_path(inner, spec.separator)))
            if child.child_count:
                later.append((child, inner))
        stack.extend(reversed(later))
    return out


#: the longest symbol path a payload carries, in characters (the innermost names are kept)
SYMBOL_CHARS = 300


def _symbol_path(names: tuple[str, ...], separator: str) -> str:
    """``names`` joined, or, past :data:`SYMBOL_CHARS`, the innermost of them that fit
    after ``...`` (functions nested 4,000 deep made a 22,607-character symbol)."""
    path = separator.join(names)
    if len(path) <= SYMBOL_CHARS:
        return path
    kept: list[str] = []
    room = SYMBOL_CHARS - 3
    for name in reversed(names):
        room -= len(name) + len(separator)
        if room < 0 and kept:
            break
        kept.append(name)
    return "..." + separator + separator.join(reversed(kept))[: SYMBOL_CHARS - 3 - len(separator)]


#: decorator nodes (Python, TypeScript): the items a wrapper holds above its definition
_DECORATORS = frozenset({"decorator"})


def _decorated_from(node: Any, char_of: Callable[[int], int]) -> int:
    """Where the decorators right above ``node`` start, as its siblings (a TypeScript
    method's ``@logged``), else where ``node`` starts: they belong to its symbol."""
    start = node
    before = node.prev_named_sibling
    while (
        before is not None
        and before.type in _DECORATORS
        and _last_row(before) >= start.start_point.row - 1
    ):
        start, before = before, before.prev_named_sibling
    return int(char_of(start.start_byte))


class _CodeBefore:
    """Whether a node holds code of its own above one of its children, read once per node
    (a scan of the siblings before each definition made a file's locator quadratic)."""

    def __init__(self, spec: LanguageSpec, starts_line: Callable[[Any], bool]) -> None:
        self._leading = spec.attached | _DECORATORS
        self._starts_line = starts_line
        # YAML has no wrappers: a key on an earlier line (`- name: Build` above `run:`)
        # is code of the item's own, though the item's dash starts that line
        self._earlier_rows = spec.name == "yaml"
        self._seen: dict[int, tuple[dict[int, int], int, int, int, int, int]] = {}

    def __call__(self, node: Any, child: Any) -> bool:
        """Whether a node other than a comment, attribute or decorator starts a line in
        ``node`` before its ``child`` (in YAML: lies on a line above it), or ``node`` is a
        body whose opening brace has a line of its own above ``child``: ``node`` then
        contains code of its own above ``child`` rather than wrapping it."""
        seen = self._seen.get(node.id)
        if seen is None:
            index: dict[int, int] = {}
            code = named = named_row = brace = brace_row = -1
            for i, sibling in enumerate(node.children):
                index[sibling.id] = i
                if sibling.is_named and sibling.type not in self._leading:
                    if named < 0:
                        named, named_row = i, sibling.start_point.row
                    if code < 0 and self._starts_line(sibling):
                        code = i
                if brace < 0 and sibling.type == "{":
                    brace, brace_row = i, sibling.start_point.row
            seen = (index, code, named, named_row, brace, brace_row)
            self._seen[node.id] = seen
        index, code, named, named_row, brace, brace_row = seen
        at, row = index.get(child.id, len(index)), child.start_point.row
        if 0 <= code < at or (self._earlier_rows and 0 <= named < at and named_row < row):
            return True
        # a body whose brace has a line of its own (C#'s style)
        return 0 <= brace < at and brace_row < row


def _innermost(
    definitions: list[tuple[int, int, int, str]],
) -> Callable[[int], str | None]:
    """``symbol_at(offset)``: the path of the innermost definition holding ``offset``
    (the deepest, then the latest to start, then the first listed), found by bisection in
    the segments a sweep over the definitions' starts and ends makes (a query scanned
    every definition, so a file of 30,000 functions took minutes)."""
    order = sorted(range(len(definitions)), key=lambda i: definitions[i][0])
    points = sorted({d[0] for d in definitions} | {d[1] for d in definitions})
    active: list[tuple[int, int, int]] = []  # (-depth, -start, index): the innermost first
    at: list[int] = []
    symbols: list[str | None] = []
    j = 0
    for point in points:
        while j < len(order) and definitions[order[j]][0] <= point:
            start, _, depth, _ = definitions[order[j]]
            heapq.heappush(active, (-depth, -start, order[j]))
            j += 1
        while active and definitions[active[0][2]][1] <= point:
            heapq.heappop(active)  # ended: what is under it may be the innermost now
        at.append(point)
        symbols.append(definitions[active[0][2]][3] if active else None)

    def symbol_at(offset: int) -> str | None:
        k = bisect.bisect_right(at, offset) - 1
        return symbols[k] if k >= 0 else None

    return symbol_at


def code_chunker_for(
    path_or_language: str | PurePath,
    *,
    min_tokens: int = 253,
    max_tokens: int = 422,
    tokenizer: Any = None,
    hard_max_tokens: int = 512,
    fallback_target_tokens: int | None = None,
    text: str | None = None,
) -> tuple[BaseChunker, str | None]:
    """The code policy for a file (by its suffix) or a language name, else the recursive one.

    ``text``: the file's text, which tells a C++ header (``.h``) from a C one, as
    ``rechunk sync`` tells them (:func:`~rechunk.chunkers.code_languages.language_for`);
    without it a ``.h`` is C.

    Returns ``(CodeChunker, None)``, or ``(RecursiveChunker, reason)`` when the
    language has no grammar here or tree-sitter or its grammar wheel is not
    installed; ``reason`` is one line for a report. ``fallback_target_tokens``
    sizes the fallback; its default, halfway between ``min_tokens`` and
    ``max_tokens``, gives chunks of about the code policy's median, so a SQL file
    is cut as finely as the Python beside it (on the dev commits, at the sizes that give
    the code policy a median of 150 and 300 tokens, the fallback's median is 143 and 304;
    with ``max_tokens`` as its target it was 182 and 391). Bad sizes or a bad
    tokenizer raise :class:`ConfigError` either way.
    """
    check_sizes(hard_max_tokens, min_tokens=min_tokens, max_tokens=max_tokens)
    given = str(path_or_language)
    name = _language_name(given) or language_for(given, text)
    if name is None:
        reason = f"no code grammar for {given!r}: chunked with the recursive policy"
    else:
        try:
            grammar(name)
        except MissingDependencyError as exc:
            reason = (
                f"{exc.package} is not installed (pip install 'rechunk[code]'): "
                "chunked with the recursive policy"
            )
        else:
            chunker = CodeChunker(
                name,
                min_tokens=min_tokens,
                max_tokens=max_tokens,
                tokenizer=tokenizer,
                hard_max_tokens=hard_max_tokens,
            )
            return chunker, None
    fallback = RecursiveChunker(
        target_tokens=fallback_target_tokens or (min_tokens + max_tokens) // 2,
        tokenizer=tokenizer,
        hard_max_tokens=hard_max_tokens,
    )
    return fallback, reason


def _language_name(given: str) -> str | None:
    """``given`` as a language of :data:`LANGUAGES` when it names one (or an alias)."""
    try:
        return spec_for(given).name
    except ConfigError:
        return None
