"""Plain text, Markdown and reStructuredText parsers: the file's text exactly as rechunk read
it before parsers existed, and the blocks in it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parser_contract import ParserContract, check_parsed

from rechunk.errors import InputError
from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for
from rechunk.sources.files import read_text_file
from rechunk.sources.text import markdown_items

REVISIONS = Path(__file__).resolve().parents[2] / "shared" / "revisions" / "dev.jsonl"


def _dev_texts(suffix: str, limit: int = 4) -> list[tuple[str, bytes]]:
    """Both versions of the first dev pairs whose source file ends with ``suffix``."""
    if not REVISIONS.exists():
        return []
    out = []
    with REVISIONS.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["source"]["path"].endswith(suffix):
                out += [(f"{row['id']}-{v}", row[v].encode("utf-8")) for v in ("old", "new")]
            if len(out) >= limit:
                break
    return out


MARKDOWN = """\
---
title: Front matter is no block
---
# Guide

Intro paragraph
over two lines.

Setext title
------------

1. first
2. second
   - nested item

     its second paragraph

> quoted line
> and its continuation

| name | value |
|------|-------|
| a    | 1     |

```python
def f():
    return 1
```

    indented code

<div>raw html</div>
"""

RST = """\
=========
Doc title
=========

Intro paragraph
over two lines.

Section
-------

- item one
  continued
- item two

An example::

    literal code

      still code

.. code-block:: python

   x = 1

Sub section
~~~~~~~~~~~

    A block quote.

=====  =====
col a  col b
=====  =====
1      2

3      4
=====  =====

----

中文标题
========

Last paragraph.
"""

TEXT = "First paragraph\nstill first.\n\n\n  Second, indented.  \n\nThird\n"


def spans(fmt: str, text: str) -> list[tuple[str, int, str]]:
    (doc,) = parser_for(fmt).parse(text.encode("utf-8"), ParseOptions())
    check_parsed(doc)
    assert doc.text == text
    return [(b.kind, b.level, doc.text[b.start : b.end]) for b in doc.blocks]


# -- the contract -----------------------------------------------------------------------


class TestTextContract(ParserContract):
    fmt = "text"
    empty_is_text = True

    def samples(self) -> list[tuple[str, bytes]]:
        return [("written.txt", TEXT.encode()), *_dev_texts(".txt", 2)]


class TestMarkdownContract(ParserContract):
    fmt = "markdown"
    empty_is_text = True

    def samples(self) -> list[tuple[str, bytes]]:
        return [("written.md", MARKDOWN.encode()), *_dev_texts(".md")]


class TestRstContract(ParserContract):
    fmt = "rst"
    empty_is_text = True

    def samples(self) -> list[tuple[str, bytes]]:
        return [("written.rst", RST.encode()), *_dev_texts(".rst")]


# -- the text is what read_text_file reads ----------------------------------------------


@pytest.mark.revisions
def test_text_is_read_text_files_text_on_every_dev_revision(
    revisions: list[dict], tmp_path: Path
) -> None:
    fmts = {".md": "markdown", ".rst": "rst", ".txt": "text"}
    for row in revisions:
        suffix = Path(row["source"]["path"]).suffix
        for version in ("old", "new"):
            path = tmp_path / f"{row['id']}-{version}{suffix}"
            path.write_bytes(row[version].encode("utf-8"))
            (doc,) = parse_file(path)
            assert doc.parser == fmts[suffix]
            assert doc.text == read_text_file(path)
            check_parsed(doc)


@pytest.mark.parametrize("fmt", ["text", "markdown", "rst"])
@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf# Title\r\n\r\nBody with a BOM and CRLF.\r\n",
        b"old mac\rline breaks\r\rhere",
        b"no final line break",
        b"   \n\t\n",
        "\u2028 separators\u2029 and \x0c form feed\n".encode(),
    ],
)
def test_text_is_the_decoded_file(fmt: str, data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "doc.any"
    path.write_bytes(data)
    (doc,) = parse_file(path, fmt)
    assert doc.text == read_text_file(path)
    check_parsed(doc)


@pytest.mark.parametrize("fmt", ["text", "markdown", "rst"])
@pytest.mark.parametrize("data", [b"caf\xe9 latin-1", b"ok\x00nul", b"\xff\xfe\x00\xdc"])
def test_unreadable_text_gives_read_text_files_reason(
    fmt: str, data: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(data)
    with pytest.raises(InputError) as before:
        read_text_file(path)
    with pytest.raises(ParseError) as now:
        parse_file(path, fmt)
    assert str(now.value) == str(before.value)
    assert str(now.value).startswith(f"{path}: ")


# -- blocks -----------------------------------------------------------------------------


def test_plain_text_paragraphs_end_at_blank_lines() -> None:
    assert spans("text", TEXT) == [
        ("paragraph", 0, "First paragraph\nstill first."),
        ("paragraph", 0, "Second, indented."),
        ("paragraph", 0, "Third"),
    ]


def test_markdown_blocks_follow_commonmark() -> None:
    assert spans("markdown", MARKDOWN) == [
        ("heading", 1, "# Guide"),
        ("paragraph", 0, "Intro paragraph\nover two lines."),
        ("heading", 2, "Setext title\n------------"),
        ("list_item", 0, "1. first"),
        ("list_item", 0, "2. second"),
        ("list_item", 0, "- nested item"),
        ("paragraph", 0, "its second paragraph"),
        ("quote", 0, "> quoted line\n> and its continuation"),
        ("table", 0, "| name | value |\n|------|-------|\n| a    | 1     |"),
        ("code", 0, "```python\ndef f():\n    return 1\n```"),
        ("code", 0, "indented code"),
        ("paragraph", 0, "<div>raw html</div>"),
    ]


def test_markdown_items_carry_what_a_rewriter_needs() -> None:
    items = {(it.kind, it.content or str(it.rows)): it for it in markdown_items(MARKDOWN)}
    assert items[("list_item", "second")].number == 2
    assert items[("list_item", "nested item")].depth == 1
    assert items[("code", "def f():\n    return 1\n")].language == "python"
    assert items[("table", "[['name', 'value'], ['a', '1']]")].kind == "table"
    assert items[("quote", "quoted line\nand its continuation")].kind == "quote"


def test_markdown_without_front_matter_closing_keeps_its_blocks() -> None:
    text = "---\n\n# Title\n\nBody\n"
    assert spans("markdown", text) == [("heading", 1, "# Title"), ("paragraph", 0, "Body")]


def test_markdown_without_markdown_it_is_the_same_text_without_blocks(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_bytes(MARKDOWN.encode())
    code = (
        "import sys; sys.modules['markdown_it'] = None\n"  # as if it were not installed
        "from rechunk.sources import parse_file\n"
        f"(doc,) = parse_file({str(path)!r})\n"
        "print(doc.version, len(doc.blocks), doc.text == open(sys.argv[1]).read())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["markdown/1", "0", "True"]


def test_rst_titles_levels_lists_literals_and_tables() -> None:
    assert spans("rst", RST) == [
        ("heading", 1, "=========\nDoc title\n========="),
        ("paragraph", 0, "Intro paragraph\nover two lines."),
        ("heading", 2, "Section\n-------"),
        ("list_item", 0, "- item one\n  continued"),
        ("list_item", 0, "- item two"),
        ("paragraph", 0, "An example::"),
        ("code", 0, "literal code\n\n      still code"),
        ("code", 0, ".. code-block:: python\n\n   x = 1"),
        ("heading", 3, "Sub section\n~~~~~~~~~~~"),
        ("quote", 0, "A block quote."),
        (
            "table",
            0,
            "=====  =====\ncol a  col b\n=====  =====\n1      2\n\n3      4\n=====  =====",
        ),
        # the transition "----" is no block; a CJK title's underline counts columns
        ("heading", 4, "中文标题\n========"),
        ("paragraph", 0, "Last paragraph."),
    ]


def test_underlined_titles_name_their_sections_without_the_underline() -> None:
    """A setext or reStructuredText title's adornment is no part of its name: `section`
    read "Release History\\n===============" for every chunk under it."""
    from rechunk.sources.base import locate

    (rst,) = parser_for("rst").parse(RST.encode("utf-8"), ParseOptions())
    at = rst.text.index("A block quote.")
    assert locate(rst, at, at + 5)["section"] == ["Doc title", "Section", "Sub section"]
    setext = "Release History\n===============\n\n2.31.0 (2023-05-22)\n----\n\nA fix.\n"
    (md,) = parser_for("markdown").parse(setext.encode("utf-8"), ParseOptions())
    at = md.text.index("A fix.")
    assert locate(md, at, at + 6)["section"] == ["Release History", "2.31.0 (2023-05-22)"]
    atx = "# Guide #\n\n## C#\n\nText.\n"
    (md,) = parser_for("markdown").parse(atx.encode("utf-8"), ParseOptions())
    assert locate(md, md.text.index("Text."), len(md.text))["section"] == ["Guide", "C#"]
    # '#' in an underlined title is its text, not an ATX mark
    marks = "Ticket #\n========\n\n#1 priority\n-----------\n\nText.\n"
    (md,) = parser_for("markdown").parse(marks.encode("utf-8"), ParseOptions())
    where = locate(md, md.text.index("Text."), len(md.text))
    assert where["section"] == ["Ticket #", "#1 priority"]


def test_rst_short_underline_is_no_title() -> None:
    assert spans("rst", "A long title\n====\n\nBody\n")[0][0] == "paragraph"


# -- an edit changes the blocks only where it is ----------------------------------------

_WORDS = st.sampled_from(
    ["alpha", "beta", "gamma", "delta", "Ünïcode", "中文", "字", "42", "x.y", "end."]
)
_LINE = st.lists(_WORDS, min_size=1, max_size=8).map(" ".join)
_MD_BLOCK = st.one_of(
    _LINE.map(lambda s: f"Para {s}"),
    st.tuples(st.integers(1, 6), _LINE).map(lambda t: "#" * t[0] + " " + t[1]),
    st.lists(_LINE, min_size=1, max_size=4).map(lambda items: "\n".join(f"- {i}" for i in items)),
    st.lists(_LINE, min_size=1, max_size=3).map(
        lambda items: "\n".join(f"{n}. {i}" for n, i in enumerate(items, 1))
    ),
    _LINE.map(lambda s: f"> {s}"),
    st.lists(_LINE, min_size=1, max_size=3).map(lambda lines: "```\n" + "\n".join(lines) + "\n```"),
    st.tuples(_LINE, _LINE).map(lambda t: f"| h | k |\n|---|---|\n| {t[0]} | {t[1]} |"),
)


def _block_texts(fmt: str, text: str) -> list[str]:
    (doc,) = parser_for(fmt).parse(text.encode(), ParseOptions())
    check_parsed(doc)
    return [doc.text[b.start : b.end] for b in doc.blocks]


@given(st.lists(_MD_BLOCK, min_size=1, max_size=12), st.data())
def test_markdown_paragraph_insert_leaves_other_blocks_alone(
    blocks: list[str], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(blocks)))
    inserted = "Inserted " + data.draw(_LINE)
    before = _block_texts("markdown", "\n\n".join(blocks) + "\n")
    after = _block_texts("markdown", "\n\n".join([*blocks[:at], inserted, *blocks[at:]]) + "\n")
    assert inserted in after
    after.remove(inserted)
    assert after == before


@given(st.lists(_LINE, min_size=1, max_size=12), st.data())
def test_text_and_rst_paragraph_insert_leaves_other_blocks_alone(
    paragraphs: list[str], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(paragraphs)))
    inserted = "Inserted " + data.draw(_LINE)
    for fmt in ("text", "rst"):
        before = _block_texts(fmt, "\n\n".join(paragraphs))
        after = _block_texts(fmt, "\n\n".join([*paragraphs[:at], inserted, *paragraphs[at:]]))
        after.remove(inserted)
        assert after == before


@st.composite
def _parsed_and_spans(draw: st.DrawFn) -> tuple[Any, list[tuple[int, int]]]:
    """A parsed text of headings and paragraphs on pages (some blocks empty), and spans."""
    from rechunk.sources.base import Block, Parsed

    blocks, parts, at = [], [], 0
    for kind, level, size, page in draw(st.lists(st.tuples(
            st.sampled_from(["heading", "paragraph"]), st.integers(1, 3), st.integers(0, 6),
            st.integers(1, 4)), max_size=12)):  # fmt: skip
        text = "#" * level + " " + "t" * size if kind == "heading" and size else "p" * size
        parts.append(text + "\n")
        blocks.append(Block(kind, at, at + len(text), level if kind == "heading" else 0,
                            {"page": page}))  # fmt: skip
        at += len(text) + 1
    parsed = Parsed("".join(parts), tuple(blocks), "test", "test/1")
    spans = draw(st.lists(st.tuples(st.integers(0, at), st.integers(0, at)), max_size=8))
    return parsed, [(min(a, b), max(a, b)) for a, b in spans]


@given(_parsed_and_spans())
def test_the_indexed_locator_finds_what_a_scan_of_every_block_finds(case: Any) -> None:
    """Locator bisects its blocks (a scan from the start for every chunk was quadratic in a
    long document); what it finds is what a plain scan finds."""
    from rechunk.sources.base import Locator, heading_title

    parsed, spans = case
    locator = Locator(parsed)
    for start, end in spans:
        path: list[tuple[int, str]] = []
        pages: list[int] = []
        for block in parsed.blocks:
            if block.start <= start and block.kind == "heading":
                while path and path[-1][0] >= block.level:
                    path.pop()
                path.append((block.level, heading_title(parsed.text[block.start:block.end])))
            overlaps = block.end > start or block.start == block.end == start
            if overlaps and block.start < end:
                pages.append(block.locator["page"])
        expected: dict[str, Any] = {}
        if path:
            expected["section"] = [title for _, title in path]
        if pages:
            expected["pages"] = [min(pages), max(pages)]
        assert locator(start, end) == expected


@pytest.mark.parametrize("kind", ["heading", "paragraph", "list_item", "quote", "code"])
def test_the_builder_carries_a_blocks_pieces_over_cleaning_and_markup(kind: str) -> None:
    """A block's pieces (where each page's part of a paragraph joined across pages starts)
    are offsets into the text a parser gives; the builder moves each over the whitespace
    it collapses or drops and the markup it adds, so a piece starts at its own first
    character and a span cites only the pieces it covers. A piece with no character
    left is dropped."""
    from rechunk.sources.base import Locator, TextBuilder

    raw = "  # one  two\n three 中文\n中文 four \t five  "
    offsets = [0, raw.index("three"), raw.index("中文", raw.index("\n中")), raw.index("five")]
    offsets.append(len(raw) - 1)  # in the trailing whitespace: nothing of it is left
    pieces = [(at, {"page": page}) for page, at in enumerate(offsets, 1)]
    builder = TextBuilder()
    builder.paragraph("Before.", page=1)
    getattr(builder, kind)(raw, page=[1, 5], pieces=pieces)
    builder.paragraph("After.", page=5)
    doc = builder.build("test", "test/1")
    block = doc.blocks[1]
    assert block.kind == kind and block.locator == {"page": [1, 5]}
    starts = [at for at, _ in block.pieces]
    assert starts[0] == block.start and len(starts) == 4
    for at, word in zip(starts[1:], ("three", "中文", "five")):
        assert doc.text.startswith(word, at)
    locate = Locator(doc)
    for i, at in enumerate(starts):
        assert locate(at, block.end)["pages"] == [i + 1, 4]
        if i:
            assert locate(at, at)["pages"] == [i + 1, i + 1]  # a point: the piece it opens
            assert locate(block.start, at)["pages"] == [1, i]
            assert locate(doc.blocks[0].start, at + 1)["pages"] == [1, i + 1]
    assert locate(starts[2], doc.blocks[2].end)["pages"] == [3, 5]


def test_a_blocks_pieces_cut_its_span_in_order() -> None:
    from rechunk.sources.base import Block

    Block("paragraph", 2, 9, pieces=((2, {"page": 1}), (5, {"page": 2})))
    for cut in ([(3, 1)], [(2, 1), (9, 2)], [(2, 1), (6, 2), (6, 3)], [(2, 1), (6, 2), (4, 3)]):
        with pytest.raises(ValueError, match="pieces"):
            Block("paragraph", 2, 9, pieces=tuple((at, {"page": p}) for at, p in cut))
