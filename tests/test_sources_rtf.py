"""RTF: the body in reading order (headings, paragraphs, lists, code, tables), the page
furniture, notes, comments, hidden and deleted text and changing fields left out; the
parser contract; any token soup a ParseError at worst; and a folder synced by the real
CLI, an inserted paragraph re-embedding only around it.

Files come from pandoc (its RTF writer, from the project's own Markdown) and, for what
pandoc does not write (style sheets, Word's list markers, code pages, fields, headers,
TextEdit's line ends), from RTF the project wrote the way Word and TextEdit write it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_helpers import sync_an_insert
from hypothesis import given, settings
from hypothesis import strategies as st
from parser_contract import ParserContract

from rechunk.sources import ParseError, ParseOptions, parser_for

pypandoc = pytest.importorskip("pypandoc")

PARAGRAPHS = [
    "The nightly job syncs the shop's guides into the search index.",
    "It embeds only the inputs that are new byte for byte and removes stale chunks.",
    "Its summary names every file it skipped, with the reason, and what it cost.",
    "On call, read the stale check first: it says whether the collection is exact.",
]

GUIDE = """---
title: The Sync Guide
---

# Running it

{first}

The job runs `rechunk sync` every night. Café naïve 日本語 — “quoted” 😀.

- first item
- second item
    - nested

1. one
2. two

```python
def f():
    return 1
```

| Option | Meaning |
|---|---|
| --prune | remove what is gone |

See [the site](https://example.com) and a footnote[^1].

## When it fails

{rest}

[^1]: The footnote text.
"""


def guide(paragraphs: list[str] = PARAGRAPHS) -> bytes:
    """The guide as pandoc's RTF writer writes it."""
    markdown = GUIDE.format(first=paragraphs[0], rest="\n\n".join(paragraphs[1:]))
    rtf = pypandoc.convert_text(
        markdown, "rtf", format="markdown-smart", extra_args=["--standalone"]
    )
    return str(rtf).encode("ascii")


GUIDE_TEXT = f"""The Sync Guide

# Running it

{PARAGRAPHS[0]}

The job runs rechunk sync every night. Café naïve 日本語 — “quoted” 😀.

- first item
- second item
  - nested
1. one
2. two

```
def f():
    return 1
```

| Option | Meaning |
| --prune | remove what is gone |

See the site and a footnote.

## When it fails

{PARAGRAPHS[1]}

{PARAGRAPHS[2]}

{PARAGRAPHS[3]}
"""

# As Word writes it: a style sheet (headings, a code, a quote and a title style), a list
# table and Word's rendered list markers, a header and footer with page fields, a contents
# field, hidden text, a footnote, a comment, tracked changes, code-page and Unicode
# characters in two fonts' character sets, a table, a picture, bookmarks, a link, \bin.
WORD = r"""{\rtf1\adeflang1025\ansi\ansicpg1252\uc1\adeff31507\deff0\deflang1033
{\fonttbl{\f0\fbidi \froman\fcharset0\fprq2{\*\panose 02020603050405020304}Times New Roman;}
{\f2\fbidi \fmodern\fcharset0\fprq1{\*\panose 02070309020205020404}Courier New;}
{\f3\fbidi \froman\fcharset2\fprq2{\*\panose 05050102010706020507}Symbol;}
{\f40\fnil\fcharset128 MS Mincho;}}
{\colortbl;\red0\green0\blue0;}
{\stylesheet{\ql \li0\ri0\widctlpar \f0\fs24\lang1033 \snext0 \sqformat \spriority0 Normal;}
{\s1\ql \li0\ri0\sb240\sa60\keepn\outlinelevel0 \b\fs32 \sbasedon0 \snext0 \slink15 heading 1;}
{\s2\ql \li0\ri0\sb240\sa60\keepn\outlinelevel1 \b\i\fs28 \sbasedon0 \snext0 heading 2;}
{\*\cs10 \additive \ssemihidden \sunhideused \spriority1 Default Paragraph Font;}
{\s20\ql \li0\ri0\widctlpar \f2\fs20 \sbasedon0 \snext20 HTML Preformatted;}
{\s21\qc \li0\ri0\widctlpar \b\fs56 \sbasedon0 \snext0 Title;}
{\s29\qc \li864\ri864\widctlpar \i \sbasedon0 \snext0 Quote;}}
{\*\listtable{\list\listtemplateid1{\listlevel\levelnfc23\levelstartat1{\leveltext\'01\u-3913 ?;}
{\levelnumbers;}\f3\fi-360\li720 }{\listname ;}\listid1}}
{\*\listoverridetable{\listoverride\listid1\listoverridecount0\ls1}}
{\info{\title Operating the sync job}{\author Ada}{\creatim\yr2026\mo12\dy6\hr10\min0}}
{\header \pard\plain \s0\ql \f0 Company confidential \chpgn\par}
{\footer \pard\plain \s0\qc \f0 Page {\field{\*\fldinst { PAGE }}{\fldrslt {2}}} of
{\field{\*\fldinst { NUMPAGES }}{\fldrslt {9}}}\par}
\pard\plain \s21\qc \b\fs56 Operating the sync job\par
\pard\plain \ql \f0 {\field\fldedit{\*\fldinst { TOC \\o "1-3" \\h \\z \\u }}{\fldrslt
{\pard\plain \ql Running it\tab 1\par}{\pard\plain \ql When it fails\tab 2\par}}}\par
\pard\plain \s1\ql \outlinelevel0 \b\fs32 Running it\par
\pard\plain \ql \f0 The job runs at two every night, caf\'e9 cr\'e8me, and the summary
 lists {\v hidden notes }the files it skipped\chftn{\footnote \pard\plain \s0 \chftn
 A footnote the index never sees.\par}.{\*\atnid Ada}{\*\annotation \pard\plain a
 reviewer's comment\par}\par
\pard\plain \ql \f0 Kept {\deleted removed words }and {\revised inserted} text.\par
\pard\plain \s29\qc \li864\ri864 \i Keep the index honest.\par
{\pard\plain \ql \f0 Japanese: {\f40 \'93\'fa\'96\'7b\'8c\'ea} and {\uc0\u8364 } euro.\par}
{\listtext\pard\plain \f3 \'b7\tab}\pard\plain \ql \fi-360\li720\ls1\ilvl0 \f0 check the
 stale check\par
{\listtext\pard\plain \f3 \'b7\tab}\pard\plain \ql \fi-360\li720\ls1\ilvl0 \f0 read the
 skipped rows\par
{\listtext\pard\plain 1.\tab}\pard\plain \ql \fi-360\li720\ls2\ilvl0 \f0 first step\par
{\listtext\pard\plain a)\tab}\pard\plain \ql \fi-360\li1440\ls2\ilvl1 \f0 in detail\par
{\listtext\pard\plain 2.\tab}\pard\plain \ql \fi-360\li720\ls2\ilvl0 \f0 second step\par
\pard\plain \s20\ql \f2\fs20 rechunk sync docs --prune\par
\pard\plain \s20\ql \f2\fs20     --dry-run\par
\pard\plain \s2\ql \outlinelevel1 \b\i\fs28 Options\par
\trowd \cellx3000\cellx6000\pard\plain \intbl \f0 Option\cell Meaning\cell \row
\trowd \cellx3000\cellx6000\pard\plain \intbl \f0 --prune\cell remove what is gone\cell \row
\pard\plain \ql \f0 {\*\shppict{\pict\pngblip\picw10\pich10 89504e470d0a1a0a}}{\nonshppict
{\pict\wmetafile8 0100090000}}After the picture{\*\bkmkstart here}{\*\bkmkend here}, see
 {\field{\*\fldinst { HYPERLINK "https://example.com" }}{\fldrslt {\cs10 the site}}}.\par
\pard\plain \ql \f0 Binary {\*\objdata \bin4 }}}} } data skipped.\par
}"""

WORD_TEXT = """# Operating the sync job

# Running it

The job runs at two every night, café crème, and the summary lists the files it skipped.

Kept and inserted text.

> Keep the index honest.

Japanese: 日本語 and € euro.

- check the stale check
- read the skipped rows
1. first step
  1. in detail
2. second step

```
rechunk sync docs --prune
    --dry-run
```

## Options

| Option | Meaning |
| --prune | remove what is gone |

After the picture, see the site.

Binary data skipped.
"""

# As macOS TextEdit writes it: a font table without groups, a line ending in a backslash
# ends a paragraph, list markers in \listtext with tabs, code in Menlo (its blank line is
# a paragraph of its own).
TEXTEDIT = r"""{\rtf1\ansi\ansicpg1252\cocoartf2761
\cocoatextscaling0\cocoaplatform0{\fonttbl\f0\fswiss\fcharset0 Helvetica;\f1\fswiss\fcharset0 Helvetica-Bold;\f2\fnil\fcharset0 Menlo-Regular;
}
{\colortbl;\red255\green255\blue255;}
{\*\expandedcolortbl;;}
{\*\listtable{\list\listtemplateid1\listhybrid{\listlevel\levelnfc23\levelstartat1{\*\levelmarker \{disc\}}{\leveltext\leveltemplateid1\'01\uc0\u8226 ;}{\levelnumbers;}\fi-360\li720\lin720 }{\listname ;}\listid1}}
{\*\listoverridetable{\listoverride\listid1\listoverridecount0\ls1}}
\paperw11900\paperh16840\margl1440\margr1440\vieww11520\viewh8400\viewkind0
\pard\tx566\tx1133\tx1700\pardirnatural\partightenfactor0

\f1\b\fs24 \cf0 Shop notes\

\f0\b0 Orders ship on Tuesdays. Caf\'e9 hours change in winter.\
\
\pard\tx220\tx720\pardeftab720\li720\fi-720\pardirnatural\partightenfactor0
\ls1\ilvl0\cf0 {\listtext<TAB>\uc0\u8226 <TAB>}Check the stock\
{\listtext<TAB>\uc0\u8226 <TAB>}Call the supplier\
\pard\tx566\pardirnatural\partightenfactor0
\cf0 \
\f2 git pull\
\
make deploy\
\
\f0 Last line.}""".replace("<TAB>", "\t")

TEXTEDIT_TEXT = """Shop notes

Orders ship on Tuesdays. Café hours change in winter.

- Check the stock
- Call the supplier

```
git pull

make deploy
```

Last line.
"""


def parse(data: bytes | str) -> Any:
    raw = data.encode("ascii") if isinstance(data, str) else data
    (doc,) = parser_for("rtf").parse(raw, ParseOptions())
    return doc


def test_pandocs_rtf_reads_as_the_markdown_it_came_from() -> None:
    doc = parse(guide())
    assert doc.text == GUIDE_TEXT
    assert "footnote text" not in doc.text


def test_words_rtf_reads_as_word_shows_it() -> None:
    doc = parse(WORD)
    assert doc.text == WORD_TEXT
    assert doc.metadata == {"title": "Operating the sync job"}
    for left_out in ("confidential", "Page", "hidden", "footnote", "comment", "removed"):
        assert left_out not in doc.text
    assert [b.level for b in doc.blocks if b.kind == "heading"] == [1, 1, 2]


def test_textedits_rtf_reads_as_textedit_shows_it() -> None:
    doc = parse(TEXTEDIT)
    assert doc.text == TEXTEDIT_TEXT
    assert doc.metadata == {}


def test_an_inserted_paragraph_is_one_new_block() -> None:
    before = parse(guide())
    after = parse(guide([*PARAGRAPHS[:2], "A paragraph inserted later.", *PARAGRAPHS[2:]]))
    old = [before.text[b.start : b.end] for b in before.blocks]
    new = [after.text[b.start : b.end] for b in after.blocks]
    new.remove("A paragraph inserted later.")
    assert new == old


def test_what_is_not_rtf_or_holds_no_text_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not an RTF file"):
        parse(b"Just text, not RTF.")
    with pytest.raises(ParseError, match="no text"):
        parse(r"{\rtf1\ansi{\fonttbl\f0 Helvetica;}\pard\par}")
    with pytest.raises(ParseError, match="nested too deeply"):
        parse("{\\rtf1 " + "{" * 20_000 + "deep" + "}" * 20_000 + "}")


class TestRtfContract(ParserContract):
    fmt = "rtf"

    def samples(self) -> list[tuple[str, bytes]]:
        return [
            ("guide.rtf", guide()),
            ("word.rtf", WORD.encode("ascii")),
            ("textedit.rtf", TEXTEDIT.encode("ascii")),
        ]


# pieces of RTF, valid and not, shuffled into documents
_PIECES = st.sampled_from(
    [
        "{", "}", "\\par ", "\\pard", "\\plain", "\\intbl", "\\cell", "\\row", "\\*",
        "\\fonttbl", "\\f1", "\\fmodern", "\\fcharset128 ", "\\stylesheet", "\\s1 ",
        "\\outlinelevel0 ", "\\u-3913 ", "\\u55357?", "\\uc0", "\\uc5 ", "\\'e9", "\\'8", "\\",
        "\\bin3 ", "\\bin999999 ", "\\field", "\\fldinst", "\\fldrslt", "PAGE ", "TOC ",
        "\\listtext", "\\tab", "1.", "\\fi-360", "\\li720", "\\ilvl3", "\\v", "\\v0",
        "\\deleted", "\\info", "\\title", "\\footnote", "\\ansicpg99999 ", "\\ansicpg932 ",
        "text ", "caf\\'e9 ", "\\line", "\\~", "\\-", "\\{", "\\}", "\\\\", "\n", "\\\n",
        "\\s99 ", "\\ls1", "\\mac", "\\deff7 ", "\\u1114112 ", "\\u-99999 ",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60))
def test_any_token_soup_is_text_or_a_parse_error(pieces: list[str]) -> None:
    data = ("{\\rtf1 " + "".join(pieces)).encode("latin-1")
    try:
        docs = parser_for("rtf").parse(data, ParseOptions())
    except ParseError:
        return
    from parser_contract import check_parsed

    for doc in docs:
        check_parsed(doc)


def test_a_folder_with_rtf_syncs_and_an_insert_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.rtf").write_text(TEXTEDIT, encoding="ascii")
    monkeypatch.chdir(tmp_path)
    doc = sync_an_insert(capsys, "docs", "guide.rtf", guide)
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
