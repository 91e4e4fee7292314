"""From the positioned characters of a PDF's pages to blocks of reflow-proof text.

Nothing here knows PDFium: :mod:`.pdf` hands in each page's glyphs (a character, its
box, baseline, size and font) and gets blocks back. The steps, each a rule about how
documents are typeset rather than about one renderer:

1. Runs: glyphs that follow each other in the content stream on one baseline, cut at a
   gap of more than an em (columns and table cells are apart by more than a word space).
2. Page furniture: the outermost lines of a page that sit at the same height on many
   pages and repeat their text there (digits read as one digit, so "3 / 9" repeats
   "4 / 9"), and lone page numbers ("3", "- 3 -", "Page 3 of 9", "iii") in the margins.
3. Columns: a vertical gutter of white space that many lines share splits a page; the
   left column is read before the right one, and lines across the gutter (a title over
   both columns) cut the page into bands read top to bottom.
4. Lines: runs on one baseline, left to right. A page's right-to-left words (Hebrew,
   Arabic) are drawn as seen, or, by a typesetter without bidi, in reading order: the
   letters a word has only at its end tell which; lines drawn as seen are put in reading
   order (the bidirectional algorithm's reordering undone) and mirrored for the rules
   below.
5. Tables: a grid of thin rules (two columns or more) is a table, read row by row, one
   table across page breaks (the header row the renderer repeats dropped).
6. Blocks: a line larger than the body text, or a short bold paragraph, is a heading
   (its level from its size on a fixed scale); lines all in a monospaced font are
   code; a leading bullet or number starts a list item; otherwise a line continues the
   paragraph above it unless a gap wider than the line spacing, an indent, or a short
   line (one the next line's first word would have fitted on; in ragged Chinese or
   Japanese, that and one character more) ends it. A paragraph
   continues across a page or column break when the page's last line is full and does
   not end a sentence (or is justified flush).
7. Joins: a line-end hyphen after a letter, before a lower-case letter, is a soft one when
   the document's hyphenation says so (the hyphen character a typesetter puts only at line
   ends, or the word spelled whole elsewhere); lines of Chinese or Japanese text join
   without a space (Korean lines with one: Korean spaces its words); a word broken without
   a hyphen (long code) joins when the document spells it whole.

Levels, depths and edges come from fixed scales and the whole document, never from
ranking what one revision happens to contain: an edit that adds a heading of a new
size or a list at a new indent renumbers nothing else.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from rechunk.sources.base import UNSPACED

__all__ = ["Glyph", "LayoutBlock", "Page", "layout", "page_lines"]


class Glyph(NamedTuple):
    """One character on a page, in PDF user space (y grows upwards)."""

    char: str
    x0: float
    x1: float
    bottom: float
    top: float
    base: float  # baseline
    size: float  # font size in points
    font: int  # the font's index in the document
    mono: bool
    bold: bool
    space: bool  # a space (or a gap PDFium read as one) comes before this glyph


@dataclass
class Page:
    number: int  # 1-based
    left: float
    bottom: float
    right: float
    top: float
    glyphs: list[Glyph]
    # thin filled or stroked shapes (left, bottom, right, top): a table's rules
    rules: list[tuple[float, float, float, float]] = field(default_factory=list)


@dataclass
class LayoutBlock:
    kind: str  # heading, paragraph, list_item, code, table
    text: str
    pages: tuple[int, int]
    level: int = 0  # a heading's level; a list item's depth
    ordered: int | None = None  # an ordered list item's number
    rows: list[list[str]] = field(default_factory=list)  # a table's cells
    # (offset into text, page) where each page after the first starts in a paragraph,
    # list item or code block that goes on across a page break: a citation of part of
    # the block names the pages that part is on
    page_starts: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _Run:
    """Glyphs of one font and size that follow each other on one baseline."""

    glyphs: list[Glyph]
    x0: float
    x1: float
    base: float
    bottom: float
    top: float
    size: float
    mono: bool
    bold: bool


@dataclass
class _Line:
    page: int
    runs: list[_Run]
    x0: float
    x1: float
    base: float
    bottom: float
    top: float
    size: float  # the size most of its characters have
    mono: bool  # every character monospaced
    bold: bool  # most characters bold
    text: str = ""
    group: int = 0  # the column (or band) of the page it is in, in reading order
    right: float = 0.0  # the right edge of the text frame it is set in
    left: float = 0.0  # the left edge of that frame
    segments: list[tuple[float, float, str]] = field(default_factory=list)
    cells: list[list[list[_Line]]] | None = None  # a ruled table: rows of cells' lines
    first_word: float = 0.0  # how wide its first unbreakable piece is
    first_whole: float = 0.0  # how wide its first word is, hyphens and all
    marker: tuple[str, int | None] | None = None  # the list marker it starts with
    after_marker: float = 0.0  # where its text after that marker starts


# ---------------------------------------------------------------------------- runs


def _make_run(glyphs: list[Glyph]) -> _Run:
    first = glyphs[0]
    return _Run(
        glyphs,
        first.x0,
        max(g.x1 for g in glyphs),
        first.base,
        min(g.bottom for g in glyphs),
        max(g.top for g in glyphs),
        round(first.size * 2) / 2,
        first.mono,
        first.bold,
    )


def _runs(glyphs: Sequence[Glyph]) -> list[_Run]:
    """Stream-order glyphs cut into runs: one font and size, one baseline, no wide gap."""
    runs: list[_Run] = []
    current: list[Glyph] = []
    last: Glyph | None = None
    for glyph in glyphs:
        if last is not None and glyph.font == last.font and glyph.size == last.size:
            em = glyph.size if glyph.size > 1.0 else 1.0
            gap = glyph.x0 - last.x1
            if abs(glyph.base - last.base) <= 0.2 * em and -0.3 * em <= gap <= em:
                if glyph.char == last.char and abs(glyph.x0 - last.x0) < 0.05 * em:
                    continue  # drawn twice (a fake bold): one character
                current.append(glyph)
                last = glyph
                continue
        if current:
            runs.append(_make_run(current))
        current = [glyph]
        last = glyph
    if current:
        runs.append(_make_run(current))
    return runs


# ---------------------------------------------------------------------------- lines


def _overlap(a_bottom: float, a_top: float, b_bottom: float, b_top: float) -> float:
    return min(a_top, b_top) - max(a_bottom, b_bottom)


def _lines(runs: Iterable[_Run], page: int) -> list[_Line]:
    """Runs grouped into lines (by vertical overlap), top to bottom, each left to right."""
    rows: list[list[_Run]] = []
    for run in sorted(runs, key=lambda r: (-r.base, r.x0)):
        if rows:
            row = rows[-1]
            anchor = max(row, key=lambda r: len(r.glyphs))
            height = min(run.top - run.bottom, anchor.top - anchor.bottom)
            close = abs(run.base - anchor.base) <= 0.25 * min(run.size, anchor.size)
            if close or (
                height > 0
                and _overlap(run.bottom, run.top, anchor.bottom, anchor.top) >= 0.6 * height
                and min(run.size, anchor.size) < 0.9 * max(run.size, anchor.size)
            ):
                row.append(run)
                continue
        rows.append([run])
    return [_line(sorted(row, key=lambda r: r.x0), page) for row in rows]


_SPACE_GAP = 0.2  # of an em: a gap this wide between two glyphs is a word space


def _line(runs: list[_Run], page: int) -> _Line:
    main = max(runs, key=lambda r: len(r.glyphs))
    sizes: Counter[float] = Counter()
    mono_sizes: Counter[float] = Counter()
    bold = mono = count = 0
    for run in runs:
        n = len(run.glyphs)
        # inline code is often set smaller: the line's size is its prose's
        (mono_sizes if run.mono else sizes)[run.size] += n
        bold += n if run.bold else 0
        mono += n if run.mono else 0
        count += n
    line = _Line(
        page,
        runs,
        runs[0].x0,
        max(r.x1 for r in runs),
        main.base,
        min(r.bottom for r in runs),
        max(r.top for r in runs),
        (sizes or mono_sizes).most_common(1)[0][0],
        mono == count,
        bold * 2 > count,
    )
    _spell(line)
    # what the blocks need of the glyphs, so that a page's glyphs can go (only code
    # keeps them: its spacing is read glyph by glyph)
    line.first_word = _first_word_width(line)
    line.first_whole = _first_word_width(line, at_hyphens=False)
    line.marker = _list_marker(line)
    line.after_marker = line.x0
    if line.marker is not None:
        glyphs = [g for run in runs for g in run.glyphs]
        count = len(line.marker[0].replace(" ", ""))
        if len(glyphs) > count:
            line.after_marker = glyphs[count].x0
    return line


def _spell(line: _Line) -> None:
    """The line's text, and its segments (parts apart by a gap wider than 1.5 em)."""
    parts: list[str] = []
    segments: list[tuple[float, float, str]] = []
    seg_start = line.runs[0].x0
    seg_from = 0
    previous: Glyph | None = None
    for run in line.runs:
        glyphs = run.glyphs
        first = glyphs[0]
        if previous is not None:  # between runs: a word space or a segment's end
            em = max(min(previous.size, first.size), 1.0)
            gap = first.x0 - previous.x1
            if gap > 1.5 * em:
                segments.append((seg_start, previous.x1, "".join(parts[seg_from:]).strip()))
                seg_start = first.x0
                parts.append(" ")
                seg_from = len(parts)
            elif first.space or gap > _SPACE_GAP * em:
                parts.append(" ")
        parts.append(first.char)
        space_gap = _SPACE_GAP * max(first.size, 1.0)  # one size in a run
        end = first.x1
        for glyph in glyphs[1:]:
            if glyph.space or glyph.x0 - end > space_gap:
                parts.append(" ")
            parts.append(glyph.char)
            end = glyph.x1
        previous = glyphs[-1]
    if previous is not None:
        segments.append((seg_start, previous.x1, "".join(parts[seg_from:]).strip()))
    line.text = "".join(parts)
    line.segments = segments


# ---------------------------------------------------------------------------- right to left

# a word of a right-to-left script (Hebrew, Arabic, Syriac, Thaana, N'Ko, their marks and
# presentation forms)
_RTL_WORD = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]+")
# letters written only at a word's end: Hebrew's final forms, Arabic's teh marbuta and
# alef maqsura
_FINAL_ONLY = frozenset("ךםןףץةى")
_BRACKETS = "()[]{}<>«»‹›"
_TURNED = dict(zip(_BRACKETS, ")(][}{><»«›‹"))


def _rtl(char: str) -> bool:
    return unicodedata.bidirectional(char) in ("R", "AL")


def _in_reading_order(lines: Iterable[_Line]) -> bool:
    """Whether the page draws its right-to-left words in reading order from left to right
    (a typesetter without bidi: the words look reversed) rather than as they are seen.
    The letters a word has only at its end tell: at the right end of the words read left
    to right, the words are in reading order; at the left end, they are seen right to left."""
    ends = starts = 0
    for line in lines:
        for word in _RTL_WORD.findall(line.text):
            letters = [
                unicodedata.normalize("NFKC", c)[:1] for c in word if not unicodedata.combining(c)
            ]
            if len(letters) >= 2:
                ends += letters[-1] in _FINAL_ONLY
                starts += letters[0] in _FINAL_ONLY
    return ends > starts


def _reading_order(text: str) -> str:
    """A line of text as seen (left to right) in reading order: the Unicode bidirectional
    algorithm's reordering undone for one line without explicit embeddings. The line
    reads right to left when most of its letters do; a right-to-left run is reversed
    letter by letter (a letter with its marks), a left-to-right word or a number inside
    it keeps its order, and brackets in right-to-left text are turned round."""
    clusters: list[str] = []
    for char in text:
        if clusters and unicodedata.combining(char):
            clusters[-1] += char
        else:
            clusters.append(char)
    kinds = []  # R, L, N(umber) or "" (neutral)
    for cluster in clusters:
        kind = unicodedata.bidirectional(cluster[0])
        kinds.append(
            "R"
            if kind in ("R", "AL")
            else "L"
            if kind == "L"
            else "N"
            if kind in ("EN", "AN")
            else ""
        )
    base = 1 if kinds.count("R") >= kinds.count("L") else 0
    # levels: right-to-left letters odd, left-to-right letters even, numbers above the
    # right-to-left text they sit in; a neutral takes its neighbours' direction when they
    # agree (a number counting as right to left), else the line's
    levels = []
    for i, kind in enumerate(kinds):
        if kind == "R":
            levels.append(1)
        elif kind == "L":
            levels.append(2 if base else 0)
        elif kind == "N":
            levels.append(2)
        else:
            left = next((k for k in reversed(kinds[:i]) if k), "")
            right = next((k for k in kinds[i + 1 :] if k), "")
            rtl_left = left in ("R", "N") if left else bool(base)
            rtl_right = right in ("R", "N") if right else bool(base)
            if rtl_left == rtl_right:
                levels.append(1 if rtl_left else (2 if base else 0))
            else:
                levels.append(base)
    # a number in left-to-right text is left to right (level 0 there, not 2)
    if not base:
        for i, kind in enumerate(kinds):
            if kind == "N":
                before = next(
                    (levels[j] for j in range(i - 1, -1, -1) if kinds[j] in ("R", "L")), 0
                )
                after = next(
                    (levels[j] for j in range(i + 1, len(kinds)) if kinds[j] in ("R", "L")), 0
                )
                levels[i] = 2 if before % 2 and after % 2 else 0
    order = list(range(len(clusters)))
    for level in range(max(levels, default=0), 0, -1):
        i = 0
        while i < len(order):
            if levels[order[i]] >= level:
                j = i
                while j < len(order) and levels[order[j]] >= level:
                    j += 1
                order[i:j] = order[i:j][::-1]
                i = j
            else:
                i += 1
    out = []
    for i in order:
        cluster = clusters[i]
        if levels[i] % 2 and cluster[0] in _TURNED:
            cluster = _TURNED[cluster[0]] + cluster[1:]
        out.append(cluster)
    return "".join(out)


def _mirror(line: _Line, axis: float) -> None:
    """A line that reads right to left seen in a mirror (``axis``: the page's left and
    right edges added): it starts at the left, its first word is its rightmost, so that
    the rules for where a paragraph ends hold for it as for a left-to-right line."""
    glyphs = sorted((g for run in line.runs for g in run.glyphs), key=lambda g: -g.x1)
    line.x0, line.x1 = axis - line.x1, axis - line.x0
    if not glyphs:
        return
    first = glyphs[0]
    start = first
    for right, left in zip(glyphs, glyphs[1:]):
        if right.space or right.x0 - left.x1 > _SPACE_GAP * max(right.size, 1.0):
            break
        start = left
    line.first_word = line.first_whole = first.x1 - start.x0
    line.marker = _list_marker(line)
    line.after_marker = line.x0
    if line.marker is not None:
        count = len(line.marker[0].replace(" ", ""))
        if len(glyphs) > count:
            line.after_marker = axis - glyphs[count].x1


def _read_right_to_left(
    lines: Iterable[_Line], in_order: bool | None = None, axis: float | None = None
) -> bool:
    """Lines with right-to-left words put in reading order, unless they are drawn so
    (``in_order``; None: as these lines tell, see _in_reading_order). Returns which. With
    ``axis``, a line that then reads right to left is mirrored (see _mirror)."""
    rtl = [line for line in lines if any(map(_rtl, line.text))]
    if in_order is None:
        in_order = _in_reading_order(rtl)
    if not in_order:
        for line in rtl:
            line.text = _reading_order(line.text)
            letters = [c for c in line.text if c.isalpha()]
            if axis is not None and not line.mono and 2 * sum(map(_rtl, letters)) >= len(letters):
                _mirror(line, axis)
    return in_order


def page_lines(page: Page) -> list[_Line]:
    """A page's lines top to bottom (furniture included), for inspection and tests."""
    return _lines(_runs(page.glyphs), page.number)


# ---------------------------------------------------------------------------- tables


def _cluster(values: Iterable[float], tolerance: float = 2.0) -> list[float]:
    """Sorted values with those within ``tolerance`` of the previous one merged."""
    out: list[float] = []
    for value in sorted(values):
        if not out or value - out[-1] > tolerance:
            out.append(value)
    return out


def _tables(page: Page) -> tuple[list[_Line], list[Glyph]]:
    """The page's ruled tables (a grid of thin horizontal and vertical rules, two
    columns or more) as table lines, and the glyphs outside them. A row's cells are
    the spans between the vertical rules that cross it (a merged cell spans more)."""
    flat = [(x0, x1, (y0 + y1) / 2) for x0, y0, x1, y1 in page.rules if y1 - y0 <= 2.5 < x1 - x0]
    tall = [((x0 + x1) / 2, y0, y1) for x0, y0, x1, y1 in page.rules if x1 - x0 <= 2.5 < y1 - y0]
    if len(flat) < 2 or len(tall) < 3:
        return [], page.glyphs
    parent = list(range(len(flat) + len(tall)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (left, right, y) in enumerate(flat):
        for j, (x, bottom, top) in enumerate(tall):
            if left - 2 <= x <= right + 2 and bottom - 2 <= y <= top + 2:
                parent[root(i)] = root(len(flat) + j)
    members: dict[int, list[int]] = {}
    for i in range(len(parent)):
        members.setdefault(root(i), []).append(i)
    grids: list[tuple[list[float], list[tuple[float, float, list[float]]]]] = []
    for group in members.values():
        rows_at = [flat[i][2] for i in group if i < len(flat)]
        walls = [tall[i - len(flat)] for i in group if i >= len(flat)]
        xs = _cluster(x for x, _, _ in walls)
        ys = _cluster(rows_at)[::-1]
        if len(xs) < 3 or len(ys) < 2:
            continue
        rows = []
        for high, low in zip(ys, ys[1:]):
            middle = (high + low) / 2
            crossing = [
                x
                for x in xs
                if any(abs(x - wx) <= 2 and wb - 1 <= middle <= wt + 1 for wx, wb, wt in walls)
            ]
            rows.append((high, low, crossing))
        grids.append((xs, rows))
    if not grids:
        return [], page.glyphs
    # every glyph inside a grid goes to its cell, in stream order
    cells: list[list[list[list[Glyph]]]] = [
        [[[] for _ in row[2][1:]] for row in rows] for _, rows in grids
    ]
    rest: list[Glyph] = []
    for glyph in page.glyphs:
        cx = (glyph.x0 + glyph.x1) / 2
        cy = (glyph.bottom + glyph.top) / 2
        placed = False
        for g, (xs, rows) in enumerate(grids):
            if not (xs[0] <= cx <= xs[-1] and rows[-1][1] <= cy <= rows[0][0]):
                continue
            for r, (high, low, crossing) in enumerate(rows):
                if low <= cy <= high:
                    for c, (a, b) in enumerate(zip(crossing, crossing[1:])):
                        if a <= cx <= b:
                            cells[g][r][c].append(glyph)
                            placed = True
                            break
                    break
            break
        if not placed:
            rest.append(glyph)
    tables: list[_Line] = []
    for (xs, rows), grid in zip(grids, cells):
        table = [[_lines(_runs(cell), page.number) for cell in row] for row in grid if any(row)]
        for row in table:
            for cell_lines in row:
                for line in cell_lines:
                    for run in line.runs:
                        run.glyphs = []  # a cell's text is made
        if not table or max(sum(1 for cell in row if cell) for row in table) < 2:
            rest.extend(g for row in grid for cell in row for g in cell)  # not a table
            continue
        top, bottom = rows[0][0], rows[-1][1]
        tables.append(
            _Line(page.number, [], xs[0], xs[-1], top, bottom, top, 0.0, False, False, cells=table)
        )
    if len(rest) != len(page.glyphs):  # glyphs given back keep their stream order
        order = {id(glyph): i for i, glyph in enumerate(page.glyphs)}
        rest.sort(key=lambda glyph: order[id(glyph)])
    return tables, rest


# ---------------------------------------------------------------------------- furniture

_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(
    r"(?:(?:page|p\.|pg\.?|seite|página|pagina|страница|第)\s*)?"
    r"[-–—(\[]?\s*(?:\d{1,5}|(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3}))"
    r"\s*[-–—)\]]?"
    r"(?:\s*(?:of|/|von|de|sur|из|\|)\s*\d{1,5})?\s*(?:页|頁|ページ)?",
    re.IGNORECASE,
)


def _norm(text: str) -> str:
    return " ".join(_DIGITS.sub("#", text.lower()).split())


def _is_page_number(text: str) -> bool:
    return bool(_PAGE_NUMBER.fullmatch(" ".join(text.split())))


def _furniture(boxes: list[tuple[float, float]], lines: list[list[_Line]]) -> list[set[int]]:
    """Per page (its bottom and top, its lines from the top), the indexes of its lines
    that are running headers, footers or page numbers."""
    drop: list[set[int]] = [set() for _ in boxes]
    # candidates: the two outermost lines at each end, inside the outer fifth of the
    # page and set apart from the line inward of them by more than a line's spacing
    candidates: list[tuple[int, int, str, float, set[str], float, float]] = []
    # (page, line, end, y, texts with digits as one "#", size, bottom)
    for p, ((page_bottom, page_top), page_lines_) in enumerate(zip(boxes, lines)):
        height = page_top - page_bottom
        count = len(page_lines_)
        for end, order in (("top", range(count)), ("bottom", range(count - 1, -1, -1))):
            indexes = list(order)
            for k, index in enumerate(indexes[:2]):
                line = page_lines_[index]
                offset = page_top - line.top if end == "top" else line.bottom - page_bottom
                if offset > 0.2 * height:
                    break
                if k + 1 < len(indexes):
                    inner = page_lines_[indexes[k + 1]]
                    if abs(line.base - inner.base) <= 1.6 * max(line.size, inner.size):
                        continue
                keys = {_norm(text) for _, _, text in line.segments if text.strip()}
                candidates.append((p, index, end, line.base, keys, line.size, line.bottom))
                if k == 0 and _is_page_number(line.text):
                    drop[p].add(index)
    needed = max(2, min(3, math.ceil(len(boxes) / 2)))
    sizes: Counter[float] = Counter()
    for page_lines_ in lines:
        for line in page_lines_:
            sizes[line.size] += len(line.text)
    body = sizes.most_common(1)[0][0] if sizes else 0.0
    # the top of the body text: no line of the body's size and font rises above it
    body_top = max(
        (line.top for page_lines_ in lines for line in page_lines_ if line.size == body),
        default=math.inf,
    )
    # a slot: one end, one height (within 2 pt); it is furniture when at least `needed`
    # pages have there a line sharing a text with a line of another page there, or (at
    # the top) a line smaller than the body's text above the body's top (a running
    # header that names each page's section, all different)
    slots: list[tuple[str, float]] = []
    for p, _, end, y, keys, size, bottom in candidates:
        same_text = {p}
        small = {p} if size < 0.9 * body and bottom > body_top else set()
        for q, _, end2, y2, keys2, size2, _ in candidates:
            if q != p and end2 == end and abs(y2 - y) <= 2.0:
                if keys & keys2:
                    same_text.add(q)
                if small and abs(size2 - size) < 0.5:
                    small.add(q)
        if len(same_text) >= needed or (end == "top" and len(small) >= needed):
            slots.append((end, y))
    for p, index, end, y, _, _, _ in candidates:
        if any(end == s_end and abs(y - s_y) <= 2.0 for s_end, s_y in slots):
            drop[p].add(index)
    return drop


# ---------------------------------------------------------------------------- columns


def _gutter(runs: Sequence[_Run]) -> tuple[float, float] | None:
    """A vertical band of white space between two columns of text, or None."""
    if len(runs) < 8:
        return None
    lo = min(r.x0 for r in runs)
    hi = max(r.x1 for r in runs)
    width = hi - lo
    if width <= 0:
        return None
    # lines across the whole width (a title, an abstract over both columns) are the
    # bands between column sets, not text that fills a gutter: a line's pieces are its
    # runs on one baseline no wider apart than 1.5 em
    rows: dict[int, list[_Run]] = {}
    for run in runs:
        rows.setdefault(round(run.base), []).append(run)
    narrow: list[_Run] = []
    pieces = wide = 0
    for row in rows.values():
        row.sort(key=lambda r: r.x0)
        split = [
            i for i in range(1, len(row)) if row[i].x0 - row[i - 1].x1 > 1.5 * max(row[i].size, 1.0)
        ]
        for a, b in zip([0, *split], [*split, len(row)]):
            if row[b - 1].x1 - row[a].x0 >= 0.6 * width:
                wide += 1
            else:
                narrow.extend(row[a:b])
                pieces += 1
    if pieces < 2 * wide or len(narrow) < 8:
        return None
    runs = narrow
    cells = int(width) + 1
    cover = [0] * (cells + 1)
    for run in runs:
        a = int(run.x0 - lo)
        b = int(run.x1 - lo)
        cover[a] += 1
        cover[min(b + 1, cells)] -= 1
    running = 0
    covered = []
    for cell in range(cells):
        running += cover[cell]
        covered.append(running)
    allowed = max(1, len(runs) // 50)
    best: tuple[float, float] | None = None
    start = None
    for cell in range(int(0.2 * width), int(0.8 * width) + 1):
        if covered[cell] <= allowed:
            if start is None:
                start = cell
        elif start is not None:
            if cell - start >= 6 and (best is None or cell - start > best[1] - best[0]):
                best = (lo + start, lo + cell)
            start = None
    if best is None:
        return None
    gap_lo, gap_hi = best
    left = [r for r in runs if r.x1 <= gap_hi]
    right = [r for r in runs if r.x0 >= gap_lo]
    if len(left) < 4 or len(right) < 4:
        return None
    # side by side: the columns share most of their height
    l_lo, l_hi = min(r.bottom for r in left), max(r.top for r in left)
    r_lo, r_hi = min(r.bottom for r in right), max(r.top for r in right)
    shared = _overlap(l_lo, l_hi, r_lo, r_hi)
    if shared < 0.5 * min(l_hi - l_lo, r_hi - r_lo):
        return None
    # text columns, not a table's cells: lines fill their column on the whole
    for side in (left, right):
        widths = sorted(r.x1 - r.x0 for r in side)
        if widths[len(widths) // 2] < 0.6 * widths[int(0.9 * (len(widths) - 1))]:
            return None
    return best


def _columns(runs: list[_Run], depth: int = 0) -> list[list[_Run]]:
    """The page's runs in groups read one after the other (columns, bands)."""
    gutter = _gutter(runs) if depth < 3 else None
    if gutter is None:
        return [runs]
    g_lo, g_hi = gutter
    middle = (g_lo + g_hi) / 2
    across = [r for r in runs if r.x0 < middle < r.x1]
    # bands: the page cut at every run across the gutter
    across_lines = sorted(across, key=lambda r: -r.top)
    bands: list[list[_Run]] = []
    rest = [r for r in runs if not (r.x0 < middle < r.x1)]
    cuts = [r.top for r in across_lines]
    groups: list[list[_Run]] = []
    if not across:
        bands = [rest]
        ordered_across: list[list[_Run]] = []
    else:
        # group the across-runs into rows and the rest into the bands between them
        ordered_across = [[r] for r in across_lines]
        edges = [math.inf] + [r.bottom for r in across_lines] + [-math.inf]
        bands = [[] for _ in range(len(across_lines) + 1)]
        for run in rest:
            for i in range(len(across_lines) + 1):
                top_edge = edges[i]
                bottom_edge = cuts[i] if i < len(cuts) else -math.inf
                if run.base <= top_edge and run.base >= bottom_edge - 0.5 * run.size:
                    bands[i].append(run)
                    break
            else:
                bands[-1].append(run)
    for i, band in enumerate(bands):
        left = [r for r in band if r.x1 <= middle]
        right = [r for r in band if r.x0 >= middle]
        for side in (left, right):
            if side:
                groups.extend(_columns(side, depth + 1))
        if i < len(ordered_across):
            groups.append(ordered_across[i])
    # across-runs on one row belong in one group
    merged: list[list[_Run]] = []
    for group in groups:
        if (
            merged
            and len(group) == 1
            and group[0] in across
            and all(r in across for r in merged[-1])
            and abs(merged[-1][0].base - group[0].base) < 0.5 * group[0].size
        ):
            merged[-1].extend(group)
        else:
            merged.append(group)
    return merged


# ---------------------------------------------------------------------------- blocks

_BULLET = re.compile(r"([•◦▪▫‣⁃●○■□►▸∙·\-–—*+])\s+(?=\S)")
_NUMBER = re.compile(r"(\(?(\d{1,3}|[a-zA-Z]|[ivxlcdm]{1,5})[.)])\s+(?=\S)")
_SENTENCE_END = re.compile(r"[.!?。！？…:;：；][\"'”’)\]）」』]*$")
# a character a line may break after or before with no space between (Chinese, Japanese)
_CJK_CHAR = re.compile(f"[{UNSPACED}]")
# ... and East Asian text whose Latin words are names and identifiers (Korean's too)
_EAST_ASIAN = re.compile(f"[{UNSPACED}\uac00-\ud7af]")
_HYPHENS = "-\u2010\u00ad"
_LATIN = "0-9A-Za-z_\u00c0-\u024f"
_WORD = re.compile(f"[{_LATIN}]+(?:-[{_LATIN}]+)*")
_WORD_END = re.compile(f"[{_LATIN}]+$")
_WORD_START = re.compile(f"[{_LATIN}]+")


# characters a line may not start with (closing marks) or end with (opening ones): a
# CJK line breaks between two characters, but not before "。" nor after "（"
_NO_START = set("、。，．：；？！）」』】〕〉》’”…‥ー々〻・,.:;?!)]}%％")
_NO_END = set("（「『【〔〈《‘“([{")


def _first_word_width(line: _Line, *, at_hyphens: bool = True) -> float:
    """How wide the line's first unbreakable piece is: a word, or a CJK character with
    the punctuation it may not be parted from; ``at_hyphens``: a line may break after a
    hyphen, a dash or a slash inside a word (else the whole word counts)."""
    glyphs = [g for run in line.runs for g in run.glyphs]
    first = glyphs[0]
    end = first.x1
    if _CJK_CHAR.match(first.char) or first.char in _NO_END:
        # opening marks with the character after them, then the closing marks after that
        index = 0
        while glyphs[index].char in _NO_END and index + 1 < len(glyphs):
            index += 1
        end = glyphs[index].x1
        for glyph in glyphs[index + 1 :]:
            if glyph.char not in _NO_START:
                break
            end = glyph.x1
        return end - first.x0
    for glyph in glyphs[1:]:
        if glyph.space or glyph.x0 - end > _SPACE_GAP * max(glyph.size, 1.0):
            break
        if _CJK_CHAR.match(glyph.char) and glyph.char not in _NO_START:
            break
        end = glyph.x1
        if at_hyphens and (glyph.char in _HYPHENS or glyph.char in "/–—"):
            break  # a line may break after a hyphen, a dash or a slash
    return end - first.x0


@dataclass
class _Stats:
    body: float  # the body text's size
    pitch: dict[float, float]  # size -> usual baseline distance of two lines of it
    headings: set[float]  # sizes larger than the body's: headings
    soft_hyphen: str  # the hyphen the typesetter breaks words with ("" when unknown)
    hard_default: bool  # whether a line-end "-" with no evidence either way is a real one
    words: set[str]
    code_floor: float  # how low a page's last line of code sits when the page is full
    indent: float  # the first-line indent of the document's paragraphs (0: none)


def _usual(values: Iterable[float], default: float) -> float:
    counts = Counter(round(v * 2) / 2 for v in values)
    return counts.most_common(1)[0][0] if counts else default


def _stats(lines: list[_Line]) -> _Stats:
    sizes: Counter[float] = Counter()
    for line in lines:
        if not line.mono:
            sizes[line.size] += len(line.text)
    if not sizes:
        for line in lines:
            sizes[line.size] += len(line.text)
    body = sizes.most_common(1)[0][0] if sizes else 10.0
    deltas: dict[float, list[float]] = {}
    for a, b in zip(lines, lines[1:]):
        if a.page == b.page and a.group == b.group and a.size == b.size:
            delta = a.base - b.base
            if 0.8 * a.size <= delta <= 3 * a.size:
                deltas.setdefault(a.size, []).append(delta)
    pitch = {size: min(_usual(values, 1.2 * size), 2 * size) for size, values in deltas.items()}
    big = {line.size for line in lines if line.size >= 1.12 * body and not line.mono}
    # the hyphen a typesetter breaks words with: one that ends lines but is (almost)
    # never inside one, e.g. WeasyPrint's U+2010
    at_end: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    words: set[str] = set()
    cjk = letters = 0
    for line in lines:
        text = line.text.rstrip()
        letters += sum(map(str.isalpha, text))
        cjk += len(_EAST_ASIAN.findall(text))
        for char in "\u2010\u00ad":
            inside[char] += text[:-1].count(char)
        if text and text[-1] in "\u2010\u00ad":
            at_end[text[-1]] += 1
        if not line.mono:
            # words inside lines (a line's first and last may be parts of a broken word)
            words.update(
                m.group().lower()
                for m in _WORD.finditer(text)
                if m.start() > 0 and m.end() < len(text)
            )
    soft = ""
    for char in "\u00ad\u2010":
        if at_end[char] and inside[char] <= 0.1 * at_end[char]:
            soft = char
            break
    # typesetters hyphenate by the text's language: a CJK document's Latin words are
    # names and identifiers, and a hyphen ending one of its lines is a real one
    hard_default = cjk > 0.3 * max(letters, 1)
    # the lowest a page's last line of code sits (on the pages before the last): a code
    # block broken by the page reaches down there
    last_code = [a.bottom for a, b in zip(lines, lines[1:]) if a.page != b.page and a.mono]
    code_floor = min(last_code) if last_code else -math.inf
    # a first-line indent: a line set in by up to 3 em from the lines that follow it
    # (the next line right below it, not after a gap: a block quote's end is no indent)
    body_pitch = pitch.get(body, 1.2 * body)
    indents = [
        a.x0 - b.x0
        for a, b in zip(lines, lines[1:])
        if a.page == b.page
        and a.group == b.group
        and a.size == b.size == body
        and 0.5 * body < a.x0 - b.x0 <= 3 * body
        and a.base - b.base <= 1.15 * body_pitch
    ]
    indent = _usual(indents, 0.0) if len(indents) >= 3 else 0.0
    return _Stats(body, pitch, big, soft, hard_default, words, code_floor, indent)


def _sentence_end(text: str) -> bool:
    return bool(_SENTENCE_END.search(text.rstrip()))


def _hyphen_join(a: str, b: str, stats: _Stats) -> str | None:
    """``a`` and ``b`` joined over a line-end hyphen, or None when ``a`` ends in none."""
    if len(a) < 2 or a[-1] not in _HYPHENS or not a[-2].isalnum() or not b:
        return None
    mark = a[-1]
    if not a[-2].isalpha():  # "wasm32-": words are not hyphenated after a digit
        return a + b if b[0].isalnum() else None
    if not b[0].isalpha():
        return a + b if b[0].isalnum() else None
    if mark == "\u00ad" or (stats.soft_hyphen and mark == stats.soft_hyphen):
        return a[:-1] + b  # the typesetter's hyphen: in "HT-TPS" too
    if stats.soft_hyphen or not b[0].islower():
        return a + b  # a real hyphen
    left = _WORD_END.search(a[:-1])
    right = _WORD_START.match(b)
    if left is None or right is None:
        return a + b
    # part of a compound or an identifier ("long-term-", "-data/src"): a real hyphen
    before = a[: left.start()][-1:]
    after = b[right.end() : right.end() + 1]
    if before in ("-", "_", "/", ".") or after in ("-", "_", "/"):
        return a + b
    joined = (left.group() + right.group()).lower()
    hyphenated = f"{left.group()}-{right.group()}".lower()
    if joined in stats.words and hyphenated not in stats.words:
        return a[:-1] + b
    if hyphenated in stats.words and joined not in stats.words:
        return a + b
    return a + b if stats.hard_default else a[:-1] + b


def _join(a: str, b: str, stats: _Stats) -> str:
    """Two lines of one paragraph as one line of text."""
    a = a.rstrip()
    b = b.lstrip()
    if not a or not b:
        return a + b
    hyphenated = _hyphen_join(a, b, stats)
    if hyphenated is not None:
        return hyphenated
    if a[-1] in "—/" and a[-2:-1].strip():  # a dash or slash set close: no space was there
        return a + b
    if _CJK_CHAR.match(a[-1]) and _CJK_CHAR.match(b[0]):  # a line of Chinese or Japanese
        return a + b
    # a full-width opening bracket takes no space after it, a full-width closing mark or
    # stop none before it (the mark's own width is its spacing): "（" then "config"
    if (a[-1] in _NO_END and _CJK_CHAR.match(a[-1])) or (
        b[0] in _NO_START and _CJK_CHAR.match(b[0])
    ):
        return a + b
    left = _WORD_END.search(a)
    right = _WORD_START.match(b)
    if left is not None and right is not None:
        # a word broken without a hyphen (long code, overflow-wrap): the document has it
        # whole inside a line, and not both of its parts
        joined = (left.group() + right.group()).lower()
        if joined in stats.words and not (
            left.group().lower() in stats.words and right.group().lower() in stats.words
        ):
            return a + b
    return a + " " + b


class _Kind:
    HEADING = "heading"
    CODE = "code"
    TEXT = "text"


def _kind(line: _Line, stats: _Stats) -> str:
    if line.mono:
        return _Kind.CODE
    if line.size in stats.headings:
        return _Kind.HEADING
    return _Kind.TEXT


def _list_marker(line: _Line) -> tuple[str, int | None] | None:
    """The list marker a line starts with and its number (None for a bullet)."""
    text = line.text.lstrip()
    match = _BULLET.match(text)
    if match:
        return match.group(0), None
    match = _NUMBER.match(text)
    if match:
        token = match.group(2)
        return match.group(0), int(token) if token.isdigit() else None
    return None


def _flush(line: _Line) -> bool:
    return line.x1 >= line.right - 1.0


#: a word of letters joined by hyphens, with the punctuation that may follow it
_HYPHENATED = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+[,.;:!?)\]]*")


def _full(a: _Line, b: _Line) -> bool:
    """Whether ``a`` had no room left for the first word of ``b``: ``b`` continues it."""
    if _flush(a):
        return True
    text = a.text.rstrip()
    if len(text) >= 2 and text[-1] in _HYPHENS and text[-2].isalpha():
        return True
    cjk = bool(_CJK_CHAR.match(b.text.lstrip()[:1] or " "))
    space = 0.0 if cjk else 0.25 * b.size
    if a.x1 + space + b.first_word > a.right + 0.5:
        return True
    if cjk and _CJK_CHAR.match(text[-1:] or " "):
        # Chinese or Japanese set ragged: the line-breaking rules move a character on
        # with a mark that may not start a line, and a typesetter may leave as much unused
        # (reportlab's wrap does), so a line short by less than ``b``'s first piece and one
        # character more goes on in ``b``
        return a.x1 + b.first_word + b.size > a.right + 0.5
    # a typesetter that never breaks after a hyphen (reportlab, some PDF exporters)
    # moves a hyphenated word whole: a line that ends no sentence and had room for the
    # word's first part only goes on in the next (a paragraph ends a sentence); only a
    # word of letters ("shift-swap"), not an identifier ("r[items.traits.vis-a]")
    words = b.text.split(maxsplit=1)
    return (
        bool(words)
        and _HYPHENATED.fullmatch(words[0]) is not None
        and not _sentence_end(a.text)
        and a.x1 + space + b.first_whole > a.right + 0.5
    )


def _code_lines(lines: list[_Line]) -> list[str]:
    """Monospaced lines with their indentation and inner spacing kept, one per line."""
    widths = sorted(
        g.x1 - g.x0 for line in lines for run in line.runs for g in run.glyphs if g.x1 > g.x0
    )
    cell = widths[len(widths) // 2] if widths else 6.0
    x0 = min(line.x0 for line in lines)
    out = []
    for line in lines:
        chars = [" " * max(0, round((line.x0 - x0) / cell))]
        previous: Glyph | None = None
        for run in line.runs:
            for glyph in run.glyphs:
                if previous is not None:
                    spaces = round((glyph.x0 - previous.x1) / cell)
                    if spaces <= 0 and glyph.space:
                        spaces = 1
                    if spaces > 0:
                        chars.append(" " * spaces)
                chars.append(glyph.char)
                previous = glyph
        out.append("".join(chars).rstrip())
    return out


@dataclass
class _Open:
    """The block being built."""

    kind: str
    lines: list[_Line]
    level: int = 0
    ordered: int | None = None
    text_x: float = 0.0  # where a list item's text (after its marker) starts
    text: str = ""
    page_starts: list[tuple[int, int]] = field(default_factory=list)  # (offset in text, page)


def _text_breaks(a: _Line, b: _Line, block: _Open, stats: _Stats) -> bool:
    """Whether text line ``b`` starts a new block after ``a``, the last line of the
    paragraph or list item ``block``: a gap, a list marker, room left on ``a`` for
    ``b``'s first word, a sentence's end at a page break, an indent."""
    size = block.lines[0].size
    new_page = a.page != b.page or a.group != b.group
    em = max(size, 1.0)
    if not new_page and a.base - b.base > 1.35 * stats.pitch.get(size, 1.25 * size):
        return True
    if b.marker is not None and (
        block.kind == "list_item" or not _full(a, b) or _sentence_end(a.text)
    ):
        return True
    if not _full(a, b):
        return True
    if new_page and not _flush(a) and _sentence_end(a.text):
        return True
    # indentation, from the frame's left edge: where the block's lines after its first
    # start (a list item's text, or its marker for a list whose lines wrap under it)
    first = block.lines[0]
    if block.kind == "list_item":
        homes = [block.text_x - first.left, first.x0 - first.left]
    elif len(block.lines) > 1:
        homes = [block.lines[1].x0 - block.lines[1].left]
    else:
        homes = [first.x0 - first.left]
    indent = b.x0 - b.left
    if (
        stats.indent
        and block.kind == "paragraph"
        and len(block.lines) == 1
        and abs(homes[0] - indent) <= 0.3 * em
        and abs(indent - stats.indent) <= 0.3 * em
    ):
        return True  # a one-line paragraph, then the next one's indented first line
    if any(abs(indent - home) <= 0.6 * em for home in homes):
        return False
    if indent < homes[0] and block.kind == "paragraph" and len(block.lines) == 1:
        # a first line indented by up to 3 em, then the paragraph's lines at the margin
        return homes[0] - indent > 3 * em
    return True


def _breaks(a: _Line, b: _Line, block: _Open, stats: _Stats) -> bool:
    """Whether ``b`` starts a new block after ``a``, the last line of ``block``."""
    if block.kind == "table" or b.cells is not None:
        return True
    kind = _kind(b, stats)
    if block.kind in ("paragraph", "list_item"):
        if kind == _Kind.HEADING:
            return True
        if kind == _Kind.CODE:  # a line of inline code still inside the paragraph?
            return _text_breaks(a, b, block, stats)
        if abs(block.lines[0].size - b.size) > 0.1 * max(block.lines[0].size, b.size):
            return True
        return _text_breaks(a, b, block, stats)
    if block.kind == "code":
        if kind != _Kind.CODE:
            return True
        pitch = stats.pitch.get(a.size, 1.2 * a.size)
        if a.page == b.page and a.group == b.group:
            return a.base - b.base > 2.2 * pitch
        # a page or column break: the block goes on if it filled the page
        return a.bottom > stats.code_floor + pitch
    # a heading: its wrapped lines, set as the first is (from the same left edge, about
    # the same centre, or indented under it); a line further left after a centred one
    # is the next heading (a centred title, then a heading at the margin)
    if kind != _Kind.HEADING or a.size != b.size:
        return True
    tolerance = 0.5 * a.size
    aligned = (
        abs(a.x0 - b.x0) <= tolerance
        or abs((a.x0 + a.x1) - (b.x0 + b.x1)) <= 2 * tolerance
        or b.x0 > a.x0
    )
    return a.page != b.page or a.group != b.group or a.base - b.base > 1.6 * a.size or not aligned


def _start(line: _Line, stats: _Stats) -> _Open:
    if line.cells is not None:
        return _Open("table", [line])
    kind = _kind(line, stats)
    if kind == _Kind.CODE:
        return _Open("code", [line])
    if kind == _Kind.HEADING:
        return _Open("heading", [line], text=line.text)
    if line.marker is not None:
        token, number = line.marker
        text = line.text.lstrip()[len(token) :]
        ordered = number if _NUMBER.match(line.text.lstrip()) else None
        return _Open("list_item", [line], ordered=ordered, text_x=line.after_marker, text=text)
    return _Open("paragraph", [line], text=line.text)


def _emit(block: _Open, stats: _Stats) -> LayoutBlock:
    # a soft hyphen inside a line is invisible (the page starts move back over those before)
    starts = [(at - block.text.count("\u00ad", 0, at), page) for at, page in block.page_starts]
    block.text = block.text.replace("\u00ad", "")
    pages = (block.lines[0].page, block.lines[-1].page)
    if block.kind == "table":
        cells = block.lines[0].cells or []
        rows = [[_cell_text(cell, stats) for cell in row] for row in cells]
        return LayoutBlock("table", "", pages, rows=rows)
    if block.kind == "code":
        code = _code_lines(block.lines)
        at = 0
        for number, (line, text) in enumerate(zip(block.lines, code)):
            if number and line.page != block.lines[number - 1].page:
                starts.append((at, line.page))
            at += len(text) + 1
        return LayoutBlock("code", "\n".join(code), pages, page_starts=starts)
    if block.kind == "heading":
        return LayoutBlock("heading", block.text, pages, level=block.level, page_starts=starts)
    if block.kind == "list_item":
        # nesting from how far the item's text is set in, two ems a level: ranking the
        # indents a document happens to use would renumber its lists when an edit adds
        # a list at a new indent
        offset = block.text_x - block.lines[0].left
        depth = min(max(round(offset / (2 * stats.body)) - 1, 0), 5)
        return LayoutBlock(
            "list_item", block.text, pages, level=depth, ordered=block.ordered, page_starts=starts
        )
    return LayoutBlock("paragraph", block.text, pages, page_starts=starts)


def _frames(lines: list[_Line], stats: _Stats) -> None:
    """Each line's text frame: the left and right edge of the column it is set in, and
    a narrower right edge when lines are justified flush to one (a block quote's, a
    caption's). A page's lines belong to the document's frame they lie in (a page of
    nothing but an indented list is still set in the body's frame), so indents and
    list depths are measured from the same edge on every page."""
    by_group: dict[tuple[int, int], list[_Line]] = {}
    for line in lines:
        by_group.setdefault((line.page, line.group), []).append(line)
    # each group's usual left edge (where most of its body lines start), its right one,
    # and whether it is a column (another group of its page stands beside it)
    extents = {
        key: (
            min(line.x0 for line in group_lines),
            max(line.x1 for line in group_lines),
            min(line.bottom for line in group_lines),
            max(line.top for line in group_lines),
        )
        for key, group_lines in by_group.items()
    }
    groups = []
    for key, group_lines in by_group.items():
        body = [line for line in group_lines if not line.mono and abs(line.size - stats.body) < 0.5]
        starts = Counter(round(line.x0 * 2) / 2 for line in body or group_lines)
        usual = max(starts.items(), key=lambda item: (item[1], -item[0]))[0]
        x0, x1, y0, y1 = extents[key]
        column = any(
            other[0] == key[0]
            and other != key
            and (ox1 <= x0 or ox0 >= x1)
            and _overlap(y0, y1, oy0, oy1) > 0
            for other, (ox0, ox1, oy0, oy1) in extents.items()
        )
        ends = sorted((line.x1 for line in body or group_lines), reverse=True)
        right = ends[min(len(ends) - 1, len(ends) // 50)]
        groups.append((usual, x0, right, column, group_lines, body))
    groups.sort(key=lambda g: (g[0], g[1]))
    # frames, from the left: a group joins the frame it lies in, or starts a new one (a
    # column only joins the same column of other pages)
    frame_of: list[int] = []
    starts_of: list[Counter[float]] = []
    ends_of: list[list[float]] = []
    columns_of: list[tuple[bool, float]] = []
    for usual, lowest, right, column, group_lines, body in groups:
        found = -1
        for f in range(len(starts_of) - 1, -1, -1):
            is_column, frame_right = columns_of[f]
            if is_column != column or (column and abs(frame_right - right) > 6):
                continue
            if min(starts_of[f]) <= lowest + 2 and usual < max(ends_of[f]) - 2:
                found = f
                break
        if found < 0:
            starts_of.append(Counter())
            ends_of.append([])
            columns_of.append((column, right))
            found = len(starts_of) - 1
        starts_of[found][usual] += len(group_lines)
        ends_of[found].extend(line.x1 for line in body or group_lines)
        frame_of.append(found)
    edges_of: list[tuple[float, float, list[float]]] = []
    for starts, ends in zip(starts_of, ends_of):
        left = max(starts.items(), key=lambda item: (item[1], -item[0]))[0]
        ends.sort(reverse=True)
        right = ends[min(len(ends) - 1, len(ends) // 50)]  # one overlong line is no edge
        # a justified frame (many lines flush right): x1 values three or more lines
        # share are edges lines are set flush to
        flush = sum(1 for x in ends if x >= right - 0.5)
        edges: list[float] = []
        if flush >= 3 and flush >= 0.3 * len(ends):
            bins = Counter(round(x * 2) for x in ends if x < right - 1)
            edges = sorted(
                b / 2
                for b, n in bins.items()
                if n + bins.get(b - 1, 0) + bins.get(b + 1, 0) >= 3
                and b / 2 > left + 0.6 * (right - left)
            )
        edges_of.append((left, right, edges))
    for (_, _, _, _, group_lines, _), f in zip(groups, frame_of):
        left, right, edges = edges_of[f]
        for line in group_lines:
            line.left = left
            line.right = right
            for edge in edges:
                if edge >= line.x1 - 1.0:
                    line.right = edge + 0.5
                    break
            inset = line.x0 - left
            if inset > 2.0 and abs(line.x1 - (right - inset)) <= 1.0:
                line.right = line.x1 + 0.5  # flush to a box set in alike on both sides


def _headings(blocks: list[_Open], stats: _Stats) -> None:
    """Bold paragraphs of a line or two that end no sentence are headings too. A
    heading's level comes from its size against the body's, on a fixed scale (1: 1.3
    times the body or more, 2: larger than the body, 3: bold at about the body's
    size): ranking the sizes a document happens to use would renumber every heading
    when an edit adds a heading of a new size."""
    for block in blocks:
        if (
            block.kind == "paragraph"
            and len(block.lines) <= 2
            and all(line.bold for line in block.lines)
            and len(block.text) <= 150
            and not _sentence_end(block.text)
            and block.lines[0].size >= 0.9 * stats.body
        ):
            block.kind = "heading"
        if block.kind == "heading":
            ratio = block.lines[0].size / stats.body
            block.level = 1 if ratio >= 1.3 else 2 if ratio >= 1.1 else 3


def _place(tables: list[_Line], lines: list[_Line]) -> list[_Line]:
    """Table lines put among a page's lines by height, in the column they sit in."""
    for table in tables:
        centre = (table.x0 + table.x1) / 2
        groups = [line.group for line in lines if line.x0 <= centre <= line.x1] or [0]
        table.group = groups[0]
        at = len(lines)
        for i, line in enumerate(lines):
            if line.group == table.group and line.base < table.top:
                at = i
                break
            if line.group > table.group:
                at = i
                break
        lines.insert(at, table)
    return lines


def _cell_text(lines: list[_Line], stats: _Stats) -> str:
    text = ""
    for line in lines:
        text = _join(text, line.text, stats) if text else line.text
    return " ".join(text.split())


def _merge_tables(blocks: list[LayoutBlock]) -> list[LayoutBlock]:
    """A table that goes on on the next page (or column) is one table; the header row
    the renderer repeats there is dropped."""
    out: list[LayoutBlock] = []
    for block in blocks:
        last = out[-1] if out else None
        if (
            last is not None
            and last.kind == block.kind == "table"
            and block.pages[0] in (last.pages[1], last.pages[1] + 1)
            and len(last.rows[0]) == len(block.rows[0])
        ):
            rows = block.rows[1:] if block.rows[0] == last.rows[0] else block.rows
            last.rows.extend(rows)
            last.pages = (last.pages[0], block.pages[1])
            continue
        out.append(block)
    return out


def layout(pages: Iterable[Page]) -> list[LayoutBlock]:
    """The document's blocks in reading order, without page furniture. Pages are read
    one at a time: a page's glyphs can go once its lines are made."""
    boxes: list[tuple[float, float]] = []
    whole: list[list[_Line]] = []  # each page's lines, top to bottom
    placed: list[list[_Line]] = []  # each page's lines in reading order, tables among them
    for page in pages:
        tables, glyphs = _tables(page)
        runs = _runs(glyphs)
        page_lines_ = _lines(runs, page.number)
        columns = _columns(runs)
        if len(columns) == 1:
            ordered = list(page_lines_)
        else:
            ordered = []
            for group, column in enumerate(columns):
                for line in _lines(column, page.number):
                    line.group = group
                    ordered.append(line)
        # right-to-left words in reading order: the page's lines decide how its words are
        # drawn, and the same lines of its columns and its tables' cells follow
        axis = page.left + page.right
        in_order = _read_right_to_left(page_lines_, axis=axis)
        seen = {id(line) for line in page_lines_}
        _read_right_to_left([line for line in ordered if id(line) not in seen], in_order, axis)
        cells = [
            line for table in tables for row in table.cells or [] for cell in row for line in cell
        ]
        _read_right_to_left(cells, in_order)
        for line in ordered:
            if not line.mono:
                for run in line.runs:
                    run.glyphs = []
        boxes.append((page.bottom, page.top))
        whole.append(page_lines_)
        placed.append(_place(tables, ordered))
    drop = _furniture(boxes, whole)
    lines: list[_Line] = []
    for page_lines_, ordered, dropped in zip(whole, placed, drop):
        gone = {id(run) for i in dropped for run in page_lines_[i].runs}
        lines.extend(line for line in ordered if not any(id(run) in gone for run in line.runs))
    if not lines:
        return []
    text_lines = [line for line in lines if line.cells is None]
    stats = _stats(text_lines or lines)
    _frames(text_lines, stats)
    opened: list[_Open] = []
    block = _start(lines[0], stats)
    for a, b in zip(lines, lines[1:]):
        if _breaks(a, b, block, stats):
            opened.append(block)
            block = _start(b, stats)
        else:
            block.lines.append(b)
            if block.kind != "code":
                block.text = _join(block.text, b.text, stats)
                if b.page != a.page:  # the joined text ends with b's, from its first character
                    block.page_starts.append((len(block.text) - len(b.text.lstrip()), b.page))
    opened.append(block)
    _headings(opened, stats)
    return _merge_tables([_emit(block, stats) for block in opened])
