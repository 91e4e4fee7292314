"""The Office and sheet parsers on files written by the real writers: python-docx (plus raw
WordprocessingML for what it cannot write: tracked changes, fields), python-pptx, openpyxl,
the csv module, msoffcrypto-tool (encryption), and pandoc (the shared DOCX renders)."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parser_contract import ParserContract, check_parsed

from rechunk.sources import Parsed, ParseError, ParseOptions, locate, parse_file, parser_for
from rechunk.sources.base import clean_inline
from rechunk.sources.sheets import column_letter, format_value, row_line, sniff_delimiter

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
openpyxl = pytest.importorskip("openpyxl")

from docx.enum.style import WD_STYLE_TYPE  # noqa: E402
from docx.oxml import parse_xml  # noqa: E402
from docx.oxml.ns import nsdecls  # noqa: E402

FORMATS_DEV = Path(__file__).resolve().parents[2] / "shared" / "revisions" / "formats-dev"
OPTIONS = ParseOptions()


def parse(fmt: str, data: bytes) -> Parsed:
    docs = parser_for(fmt).parse(data, OPTIONS)
    assert len(docs) == 1
    return docs[0]


def kinds(parsed: Parsed) -> list[tuple[str, int, str]]:
    return [(b.kind, b.level, parsed.text[b.start : b.end]) for b in parsed.blocks]


def saved(document: Any) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


# -- DOCX -------------------------------------------------------------------------------------

W = nsdecls("w")


def _field_runs(instr: str, result: str) -> str:
    """A complex field (begin, instruction, separate, result, end) as runs."""
    return (
        f'<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> {instr} </w:instrText></w:r>'
        f'<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f'<w:r><w:t xml:space="preserve">{result}</w:t></w:r>'
        f'<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )


def _append_xml(document: Any, xml: str) -> None:
    """Insert raw body XML before the section properties (still a real package: python-docx
    saves it and the parser reads it back from the zip)."""
    body = document.element.body
    body.insert(len(body) - 1, parse_xml(xml))


def _office_docx() -> bytes:
    d = docx.Document()
    d.core_properties.title = "Field guide"
    d.add_heading("Field guide", 0)
    # a table of contents: a complex field over three paragraphs, as Word writes it
    _append_xml(
        d,
        f'<w:p {W}><w:pPr><w:pStyle w:val="TOC1"/></w:pPr>'
        f'<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> TOC \\o "1-3" \\h \\z \\u </w:instrText></w:r>'
        f'<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f"<w:r><w:t>Introduction 1</w:t></w:r></w:p>",
    )
    _append_xml(d, f"<w:p {W}><w:r><w:t>Habitats 2</w:t></w:r></w:p>")
    _append_xml(
        d,
        f'<w:p {W}><w:r><w:t>Tables 3</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>',
    )
    d.add_heading("Introduction", 1)
    p = d.add_paragraph("Birds are seen ")
    p.add_run("mostly at dawn").bold = True
    p.add_run(".")
    hidden = d.add_paragraph("Shown text.")
    hidden.add_run(" Hidden note.").font.hidden = True
    # tracked changes: an insertion kept, a deletion dropped, a move resolved
    _append_xml(
        d,
        f'<w:p {W}><w:r><w:t xml:space="preserve">Owls hunt </w:t></w:r>'
        f'<w:del w:id="1" w:author="A" w:date="2024-01-01T00:00:00Z"><w:r>'
        f'<w:delText xml:space="preserve">only </w:delText></w:r></w:del>'
        f'<w:ins w:id="2" w:author="A" w:date="2024-01-01T00:00:00Z"><w:r>'
        f'<w:t xml:space="preserve">mostly </w:t></w:r></w:ins>'
        f"<w:r><w:t>at night.</w:t></w:r>"
        f'<w:moveFrom w:id="3" w:author="A" w:date="2024-01-01T00:00:00Z"><w:r>'
        f'<w:t xml:space="preserve"> Moved away.</w:t></w:r></w:moveFrom></w:p>',
    )
    _append_xml(
        d,
        f"<w:p {W}><w:r><w:t>Hawks hunt by day.</w:t></w:r>"
        f'<w:moveTo w:id="4" w:author="A" w:date="2024-01-01T00:00:00Z"><w:r>'
        f'<w:t xml:space="preserve"> Moved away.</w:t></w:r></w:moveTo></w:p>',
    )
    # a paragraph whose mark was deleted joins the next one
    _append_xml(
        d,
        f'<w:p {W}><w:pPr><w:rPr><w:del w:id="5" w:author="A" w:date="2024-01-01T00:00:00Z"/>'
        f'</w:rPr></w:pPr><w:r><w:t xml:space="preserve">Split sentence </w:t></w:r></w:p>',
    )
    _append_xml(d, f"<w:p {W}><w:r><w:t>joined again.</w:t></w:r></w:p>")
    # fields: page numbers and a date dropped, a hyperlink's result kept
    _append_xml(
        d,
        f'<w:p {W}><w:r><w:t xml:space="preserve">Page </w:t></w:r>'
        + _field_runs("PAGE", "7")
        + '<w:r><w:t xml:space="preserve"> of </w:t></w:r>'
        + _field_runs("NUMPAGES", "12")
        + '<w:r><w:t xml:space="preserve">, printed </w:t></w:r>'
        + _field_runs('DATE \\@ "yyyy-MM-dd"', "2031-02-03")
        + '<w:r><w:t xml:space="preserve">; see </w:t></w:r>'
        + _field_runs('HYPERLINK "https://example.org/birds"', "the bird list")
        + '<w:fldSimple w:instr=" PAGE "><w:r><w:t>99</w:t></w:r></w:fldSimple>'
        + "<w:r><w:t>.</w:t></w:r></w:p>",
    )
    d.add_heading("Habitats", 2)
    d.add_paragraph("Wetlands", style="List Bullet")
    d.add_paragraph("Reed beds", style="List Bullet 2")
    d.add_paragraph("Forests", style="List Bullet")
    d.add_paragraph("Count the nests", style="List Number")
    d.add_paragraph("Record the species", style="List Number")
    d.add_paragraph("A field guide is a book for the field.", style="Quote")
    code = d.styles.add_style("Source Code", WD_STYLE_TYPE.PARAGRAPH)
    assert code.name == "Source Code"
    d.add_paragraph("def count(nests):", style="Source Code")
    d.add_paragraph("    return len(nests)", style="Source Code")
    _append_xml(
        d,
        f'<w:p {W}><w:pPr><w:outlineLvl w:val="2"/></w:pPr><w:r><w:t>Outline heading</w:t></w:r></w:p>',
    )
    commented = d.add_paragraph("A sentence with a comment.")
    d.add_comment(commented.runs, text="Comment text never inlined", author="R")
    table = d.add_table(rows=3, cols=2)
    for r, row in enumerate([("Bird", "Count"), ("Owl", "3"), ("Hawk", "5")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    d.add_paragraph("After the table.")
    section = d.sections[0]
    section.header.paragraphs[0].text = "Running header text"
    footer = section.footer.paragraphs[0]
    footer.text = "Footer words "
    footer._p.append(
        parse_xml(f'<w:fldSimple {W} w:instr=" PAGE "><w:r><w:t>1</w:t></w:r></w:fldSimple>')
    )
    return saved(d)


EXPECTED_DOCX = """\
# Field guide

# Introduction

Birds are seen mostly at dawn.

Shown text.

Owls hunt mostly at night.

Hawks hunt by day. Moved away.

Split sentence joined again.

Page of , printed ; see the bird list.

## Habitats

- Wetlands
  - Reed beds
- Forests
1. Count the nests
2. Record the species

> A field guide is a book for the field.

```
def count(nests):
    return len(nests)
```

### Outline heading

A sentence with a comment.

| Bird | Count |
| Owl | 3 |
| Hawk | 5 |

After the table.
"""


@pytest.fixture(scope="module")
def office_docx() -> bytes:
    return _office_docx()


def test_docx_text_as_word_shows_it(office_docx: bytes) -> None:
    parsed = parse("docx", office_docx)
    assert parsed.text == EXPECTED_DOCX
    assert parsed.parser == "docx" and parsed.version.startswith("docx/1 ")
    assert parsed.metadata == {"title": "Field guide"}
    got = kinds(parsed)
    assert got[:3] == [
        ("heading", 1, "# Field guide"),
        ("heading", 1, "# Introduction"),
        ("paragraph", 0, "Birds are seen mostly at dawn."),
    ]
    assert ("heading", 3, "### Outline heading") in got
    assert ("list_item", 0, "  - Reed beds") in got
    assert ("quote", 0, "> A field guide is a book for the field.") in got
    assert [k for k, _, _ in got].count("table") == 1
    assert [k for k, _, _ in got].count("code") == 1
    # the section path of the table: the headings in force there (Title is a level-1
    # heading, so "Introduction" is its sibling)
    table = next(b for b in parsed.blocks if b.kind == "table")
    assert locate(parsed, table.start, table.end)["section"] == [
        "Introduction",
        "Habitats",
        "Outline heading",
    ]


def test_docx_furniture_and_fields_are_not_text(office_docx: bytes) -> None:
    text = parse("docx", office_docx).text
    for absent in (
        "Introduction 1",  # the table of contents' entries
        "Habitats 2",
        "Tables 3",
        "TOC",
        "HYPERLINK",
        "PAGE",
        " 7 ",
        "12",
        "99",
        "2031",
        "Running header text",
        "Footer words",
        "Comment text",
        "Hidden note",
        "only",  # deleted
    ):
        assert absent not in text, absent
    assert text.count("Moved away.") == 1


def test_docx_through_the_registry_and_twice_the_same(tmp_path: Path, office_docx: bytes) -> None:
    path = tmp_path / "guide.DOCX"
    path.write_bytes(office_docx)
    first = parse_file(path)
    assert first == parse_file(path) == parser_for("docx").parse(office_docx, OPTIONS)


def _paragraphs_docx(paragraphs: list[str]) -> bytes:
    d = docx.Document()
    d.add_heading("Notes", 1)
    for text in paragraphs:
        d.add_paragraph(text)
    return saved(d)


_WORDS = st.sampled_from(
    [
        "the",
        "owl",
        "hawk",
        "heron",
        "nest",
        "reed",
        "dawn",
        "night",
        "counts",
        "wetland",
        "forest",
        "river",
        "12",
        "of",
        "and",
        "is",
    ]
)
_SENTENCE = st.lists(_WORDS, min_size=1, max_size=12).map(
    lambda ws: " ".join(ws).capitalize() + "."
)


@settings(max_examples=5, deadline=None)
@given(
    paragraphs=st.lists(_SENTENCE, min_size=1, max_size=8),
    inserted=_SENTENCE,
    data=st.data(),
)
def test_docx_inserting_a_paragraph_changes_only_its_own_block(
    paragraphs: list[str], inserted: str, data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(paragraphs)))
    old = parse("docx", _paragraphs_docx(paragraphs))
    new = parse("docx", _paragraphs_docx([*paragraphs[:at], inserted, *paragraphs[at:]]))
    old_blocks = [old.text[b.start : b.end] for b in old.blocks]
    new_blocks = [new.text[b.start : b.end] for b in new.blocks]
    assert new_blocks == [*old_blocks[: at + 1], inserted, *old_blocks[at + 1 :]]
    assert new.text == "\n\n".join(new_blocks) + "\n"


def test_docx_corrupt_files_are_parse_errors(office_docx: bytes) -> None:
    with pytest.raises(ParseError, match="corrupt"):
        parse("docx", b"plain text, not a package")
    with pytest.raises(ParseError, match="corrupt"):
        parse("docx", office_docx[: len(office_docx) // 2])
    # a real package of another kind: a deck is not a Word document
    with pytest.raises(ParseError, match="not a Word document"):
        parse("docx", saved(pptx.Presentation()))
    # a package whose main part is not XML
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(office_docx and io.BytesIO(office_docx)) as src,
        zipfile.ZipFile(buffer, "w") as dst,
    ):
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, b"<w:document" if item.filename == "word/document.xml" else data)
    with pytest.raises(ParseError, match="not well-formed"):
        parse("docx", buffer.getvalue())
    with pytest.raises(ParseError, match="no text"):
        parse("docx", saved(docx.Document()))


def test_docx_a_zip_bomb_is_refused_unread(office_docx: bytes) -> None:
    """A package whose main part inflates a thousand times (a user's 442 KB file held
    419 MB of it) is a ParseError before it is inflated, not a sync out of memory; a
    real document's parts inflate far less and are read."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(office_docx)) as src,
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "word/document.xml":
                body = b"<w:p><w:r><w:t>" + b"a " * (10 << 20) + b"</w:t></w:r></w:p>"
                data = data.replace(b"<w:body>", b"<w:body>" + body, 1)
            dst.writestr(item.filename, data)
    with pytest.raises(ParseError, match=r"word/document\.xml inflates [\d,]+ times"):
        parse("docx", buffer.getvalue())
    assert parse("docx", office_docx).text
    # a report's table of 20,000 like rows inflates over 100 times, and is read
    from rechunk.sources._office import read_part

    cell = (
        "<w:tc><w:tcPr><w:tcW w:w='1870' w:type='dxa'/></w:tcPr><w:p><w:pPr><w:spacing "
        "w:after='0'/></w:pPr><w:r><w:rPr><w:rFonts w:ascii='Calibri' w:hAnsi='Calibri'/>"
        "<w:sz w:val='20'/></w:rPr><w:t>{}</w:t></w:r></w:p></w:tc>"
    )
    values = ("OK", "0", "N/A", "2024-01-01")
    rows = "".join(
        "<w:tr>" + "".join(cell.format(v) for v in (i, *values)) + "</w:tr>"
        for i in range(20_000)
    )
    table = f"<w:tbl>{rows}</w:tbl>".encode()
    report = io.BytesIO()
    with zipfile.ZipFile(report, "w", zipfile.ZIP_DEFLATED) as dst:
        dst.writestr("word/document.xml", table)
    with zipfile.ZipFile(report) as zf:
        info = zf.getinfo("word/document.xml")
        assert info.file_size > 16 << 20 and info.file_size > 100 * info.compress_size
        assert read_part(zf, "word/document.xml") == table


def _encrypted(data: bytes) -> bytes:
    ooxml = pytest.importorskip(
        "msoffcrypto.format.ooxml",
        reason="msoffcrypto-tool writes the encrypted files (pip install msoffcrypto-tool)",
    )
    out = io.BytesIO()
    ooxml.OOXMLFile(io.BytesIO(data)).encrypt("secret", out)
    return out.getvalue()


def test_encrypted_office_files_are_parse_errors(office_docx: bytes, tmp_path: Path) -> None:
    for fmt, data in (
        ("docx", office_docx),
        ("pptx", _deck()),
        ("xlsx", _workbook()),
    ):
        locked = _encrypted(data)
        with pytest.raises(ParseError, match=r"^encrypted"):
            parse(fmt, locked)
        path = tmp_path / f"locked.{fmt}"
        path.write_bytes(locked)
        with pytest.raises(ParseError, match=r"locked\.\w+: encrypted"):
            parse_file(path)


# -- the shared DOCX renders (pandoc) -----------------------------------------------------------

_MARKUP = re.compile(
    r"[`*_\[\]<>|#\\{}!~^=]|https?:|^\s*(?:[-+>]|\d+[.)]|\.\.)\s|::|\s--\s|-{3,}", re.M
)


def _prose_paragraphs(source: str) -> list[str]:
    """Source paragraphs with no markup that could render differently: collapsed text."""
    found = []
    for block in re.split(r"\n\s*\n", source):
        lines = block.strip().splitlines()
        if len(" ".join(lines)) < 40 or any(line.startswith((" ", "\t")) for line in lines):
            continue
        if _MARKUP.search(block) or ":" in lines[0][:30]:
            continue
        found.append(clean_inline(block))  # a line break inside Chinese is no space
    return found


@pytest.fixture(scope="module")
def renders() -> list[dict[str, Any]]:
    manifest = FORMATS_DEV / "manifest.jsonl"
    if not manifest.exists():
        pytest.skip(f"the shared DOCX renders are absent ({manifest} not found)")
    return [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.revisions
def test_shared_docx_renders_hold_the_source_paragraphs(
    renders: list[dict[str, Any]], revisions: list[dict[str, Any]]
) -> None:
    sources = {r["id"]: r for r in revisions}
    checked = found = with_headings = 0
    for k, row in enumerate(renders):
        for version in ("old", "new"):
            parsed = parse_file(FORMATS_DEV / row["id"] / f"{version}.docx")[0]
            if k % 10 == 0:  # the same bytes give the same text
                assert parsed == parse_file(FORMATS_DEV / row["id"] / f"{version}.docx")[0]
            text = clean_inline(parsed.text)
            assert "HYPERLINK" not in text and "TOC \\" not in text and "PAGE " not in text
            with_headings += any(b.kind == "heading" for b in parsed.blocks)
            for paragraph in _prose_paragraphs(sources[row["id"]][version]):
                checked += 1
                found += paragraph in text
    # all but the two plain-text PEPs and one page with no heading in its source
    assert with_headings == len(renders) * 2 - 6
    assert checked > 200
    assert found / checked >= 0.97, (found, checked)


# -- PPTX -------------------------------------------------------------------------------------


def _slide_number_field_xml() -> str:
    return (
        '<a:fld xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum"><a:t>1</a:t></a:fld>'
    )


def _deck() -> bytes:
    from pptx.oxml import parse_xml as pptx_xml
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.core_properties.title = "Survey deck"
    first = deck.slides.add_slide(deck.slide_layouts[0])  # title slide
    first.shapes.title.text = "Bird survey 2024"
    first.placeholders[1].text = "Results from the wetlands"
    second = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
    second.shapes.title.text = "Findings"
    body = second.placeholders[1].text_frame
    body.text = "Owls are up"
    for text, level in (("In the north", 1), ("Mostly barn owls", 2), ("Hawks are down", 0)):
        paragraph = body.add_paragraph()
        paragraph.text = text
        paragraph.level = level
    box = second.shapes.add_textbox(Inches(1), Inches(5), Inches(4), Inches(1))
    box.text_frame.text = "Counted by volunteers "
    box.text_frame.paragraphs[0]._p.append(pptx_xml(_slide_number_field_xml()))
    rows = [("Bird", "2023", "2024"), ("Owl", "10", "14"), ("Hawk", "8", "5")]
    shape = second.shapes.add_table(3, 3, Inches(1), Inches(6), Inches(4), Inches(1))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    second.notes_slide.notes_text_frame.text = "Mention the cold spring.\nThank the volunteers."
    third = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title
    group = third.shapes.add_group_shape()
    group.shapes.add_textbox(
        Inches(1), Inches(1), Inches(3), Inches(1)
    ).text_frame.text = "Grouped one"
    inner = group.shapes.add_group_shape()
    inner.shapes.add_textbox(
        Inches(1), Inches(2), Inches(3), Inches(1)
    ).text_frame.text = "Grouped two"
    third.shapes.add_textbox(
        Inches(1), Inches(3), Inches(3), Inches(1)
    ).text_frame.text = "After the group"
    deck.slides.add_slide(deck.slide_layouts[6])  # empty: no section at all
    return saved(deck)


EXPECTED_PPTX = """\
# Bird survey 2024

Results from the wetlands

# Findings

- Owls are up
  - In the north
    - Mostly barn owls
- Hawks are down

Counted by volunteers

| Bird | 2023 | 2024 |
| Owl | 10 | 14 |
| Hawk | 8 | 5 |

> Notes: Mention the cold spring.

> Thank the volunteers.

# (untitled slide)

Grouped one

Grouped two

After the group
"""


def test_pptx_titles_shapes_in_order_and_notes() -> None:
    parsed = parse("pptx", _deck())
    assert parsed.text == EXPECTED_PPTX
    assert parsed.version.startswith("pptx/1 python-pptx ")
    assert parsed.metadata == {"title": "Survey deck"}
    slides = [dict(b.locator)["slide"] for b in parsed.blocks]
    assert slides == [1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3]
    assert [b.kind for b in parsed.blocks if dict(b.locator)["slide"] == 2] == [
        "heading",
        *["list_item"] * 4,
        "paragraph",
        "table",
        "quote",
        "quote",
    ]
    findings = parsed.text.index("# Findings")
    assert locate(parsed, findings, len(parsed.text)) == {
        "section": ["Findings"],
        "slides": [2, 3],
    }
    assert parse("pptx", _deck()) == parsed


def test_pptx_corrupt_is_a_parse_error(office_docx: bytes) -> None:
    with pytest.raises(ParseError, match="corrupt"):
        parse("pptx", b"\x00" * 64)
    with pytest.raises(ParseError, match="corrupt"):
        parse("pptx", office_docx)  # a Word package is no deck
    with pytest.raises(ParseError, match="no text"):
        parse("pptx", saved(pptx.Presentation()))


# -- XLSX -------------------------------------------------------------------------------------


def _workbook() -> bytes:
    book = openpyxl.Workbook()
    sales = book.active
    sales.title = "Sales"
    sales["A1"] = "Quarterly sales"
    sales.append([])
    sales.append(["Region", "Amount", "Share", "Day", None, "Units"])
    rows = [
        ("North", 1234.5, 0.256, dt.datetime(2024, 3, 5), None, 12),
        ("South", -80, 0.05, dt.datetime(2024, 3, 6), None, None),
        ("East", None, None, None, None, 7),
    ]
    for row in rows:
        sales.append(list(row))
    for row in sales.iter_rows(min_row=4):
        row[1].number_format = "#,##0.00"
        row[2].number_format = "0.0%"
        row[3].number_format = "d mmm yyyy"
    sales["G4"] = "extra"  # a value in a column without a header
    notes = book.create_sheet("Notes")
    for line in ("Remark", "Counted twice", True, 3.0, 0.1 + 0.2):
        notes.append([line])
    book.create_sheet("Empty")
    return saved(book)


EXPECTED_XLSX = """\
# Sales

Quarterly sales

- Region: North; Amount: 1,234.50; Share: 25.6%; Day: 5 Mar 2024; Units: 12
- Region: South; Amount: -80.00; Share: 5.0%; Day: 6 Mar 2024
- Region: East; Units: 7

# Notes

- Remark: Counted twice
- Remark: TRUE
- Remark: 3
- Remark: 0.3
"""


def test_xlsx_a_section_per_sheet_a_line_per_row() -> None:
    parsed = parse("xlsx", _workbook())
    # G5 has no header: it is named by its column letter
    assert parsed.text == EXPECTED_XLSX.replace("Units: 12\n", "Units: 12; G: extra\n")
    assert parsed.version.startswith("xlsx/1 openpyxl ")
    rows = [(dict(b.locator).get("sheet"), dict(b.locator).get("row")) for b in parsed.blocks]
    assert rows == [
        ("Sales", None),
        ("Sales", 1),
        ("Sales", 4),
        ("Sales", 5),
        ("Sales", 6),
        ("Notes", None),
        ("Notes", 2),
        ("Notes", 3),
        ("Notes", 4),
        ("Notes", 5),
    ]
    south = parsed.text.index("- Region: South")
    assert locate(parsed, south, parsed.text.index("# Notes")) == {
        "section": ["Sales"],
        "sheet": "Sales",
        "rows": [5, 6],
    }


def test_xlsx_a_row_styled_out_to_the_last_column_is_read_by_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows with a fill on column XFD (16,384) made openpyxl build a cell of every column
    up to it: 31 times the time of the same values unstyled. Only cells holding a value
    are read now, and the text is the same as without the style."""
    from openpyxl.styles import PatternFill

    from rechunk.sources import sheets

    def book(styled: bool) -> bytes:
        workbook = openpyxl.Workbook()
        sheet = workbook.active
        sheet.append(["When", "What"])
        for n in range(1, 41):
            sheet.append([f"day {n}", f"entry {n}"])
            if styled:
                sheet.cell(row=n + 1, column=16384).fill = PatternFill("solid", fgColor="FFFF00")
        return saved(workbook)

    formatted: list[object] = []
    real = sheets.format_value
    monkeypatch.setattr(sheets, "format_value", lambda v, f=None: formatted.append(v) or real(v, f))
    styled = parse("xlsx", book(True))
    assert len(formatted) == 82  # the values, not 40 rows of 16,384 cells
    assert styled.text == parse("xlsx", book(False)).text
    assert [dict(b.locator).get("row") for b in styled.blocks][-1] == 41


def test_xlsx_rows_listed_out_of_order_read_in_the_sheet_s_order() -> None:
    """The sheet's XML may list a row after the ones below it (its number says where it
    lies): read in row order, the header stays the header, and a row listed twice once."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    for row in (["Item", "Count"], ["apples", 3], ["pears", 5]):
        sheet.append(row)
    data = saved(workbook)

    def reordered(xml: str) -> str:
        rows = re.findall(r"<row [^>]*>.*?</row>", xml)
        xml = xml.replace(rows[0], "", 1)
        return xml.replace(rows[2], rows[2] + rows[0] + rows[1], 1)  # 2, 3, 1, 2

    source = zipfile.ZipFile(io.BytesIO(data))
    patched = io.BytesIO()
    with zipfile.ZipFile(patched, "w") as out:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                body = reordered(body.decode()).encode()
            out.writestr(item, body)
    assert parse("xlsx", patched.getvalue()).text == parse("xlsx", data).text


def test_xlsx_corrupt_and_empty_are_parse_errors() -> None:
    with pytest.raises(ParseError, match="corrupt"):
        parse("xlsx", b"Region,Amount\nNorth,1\n")
    with pytest.raises(ParseError, match="no text"):
        parse("xlsx", saved(openpyxl.Workbook()))


def test_xlsx_a_cell_that_cannot_be_read_is_not_quoted_in_the_reason() -> None:
    """A numeric cell holding text (as some writers other than Excel store it): openpyxl's
    error quotes the cell; the skip reason names only the error's type."""
    book = openpyxl.Workbook()
    book.active["A1"] = 1.5
    base = zipfile.ZipFile(io.BytesIO(saved(book)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as rewritten:
        for item in base.infolist():
            data = base.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"<v>1.5</v>", b"<v>private salary note</v>")
            rewritten.writestr(item, data)
    with pytest.raises(ParseError, match=r"corrupt: a sheet cannot be read \(ValueError\)$"):
        parse("xlsx", out.getvalue())


@pytest.mark.parametrize(
    ("value", "fmt", "shown"),
    [
        (1234.5, "#,##0.00", "1,234.50"),
        (-1234.5, "$#,##0.00_);($#,##0.00)", "($1,234.50)"),
        (0.256, "0.0%", "25.6%"),
        (3.0, "General", "3"),
        (0.1 + 0.2, "General", "0.3"),
        (12345.678, "0.00E+00", "1.23E+04"),
        (5, "000", "005"),
        (1.5, "0.0#", "1.5"),
        (1234.5, "[$€-407] #,##0.00", "€ 1,234.50"),
        (42, '"USD "0', "USD 42"),
        (0, '0;-0;"zero"', "zero"),
        (1.25, "# ?/?", "1.25"),  # a fraction format: the stored value
        (dt.datetime(2024, 3, 5, 14, 7, 9), "yyyy-mm-dd hh:mm:ss", "2024-03-05 14:07:09"),
        (dt.datetime(2024, 3, 5, 14, 7), "dddd d mmmm yy h:mm AM/PM", "Tuesday 5 March 24 2:07 PM"),
        (dt.time(9, 30), "h:mm", "9:30"),
        (dt.datetime(2024, 3, 5), "General", "2024-03-05"),
        (True, "General", "TRUE"),
        ("text", "0.00", "text"),
        (None, "0.00", ""),
    ],
)
def test_number_formats_render_as_a_spreadsheet_shows_them(
    value: Any, fmt: str, shown: str
) -> None:
    assert format_value(value, fmt) == shown


# -- CSV / TSV --------------------------------------------------------------------------------


def _csv(rows: list[list[str]], delimiter: str = ",") -> bytes:
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")


def test_csv_a_line_per_record_beside_its_header(tmp_path: Path) -> None:
    rows = [
        ["name", "note", "count"],
        ["Owl", 'says "hoo", at night', "3"],
        ["Heron", "first line\nsecond line", ""],
        ["", "", ""],
        ["Hawk", "", "5", "extra"],
    ]
    path = tmp_path / "birds.csv"
    path.write_bytes(b"\xef\xbb\xbf" + _csv(rows))
    parsed = parse_file(path)[0]
    assert parsed.text == (
        '- name: Owl; note: says "hoo", at night; count: 3\n'
        "- name: Heron; note: first line second line\n"
        "- name: Hawk; count: 5; D: extra\n"
    )
    assert [dict(b.locator) for b in parsed.blocks] == [{"row": 2}, {"row": 3}, {"row": 5}]
    assert parsed.metadata == {"delimiter": "comma"}
    # the same table written with tabs, as a .tsv
    tsv = tmp_path / "birds.tsv"
    tsv.write_bytes(_csv(rows, "\t"))
    assert parse_file(tsv)[0].text == parsed.text


def test_csv_delimiter_rule() -> None:
    # decimal commas inside semicolon-separated fields
    assert sniff_delimiter("name;price\nOwl;1,5\nHawk;2,25\n") == ";"
    # commas inside tab-separated text
    assert sniff_delimiter("name\tnote\nOwl\tsmall, brown\n") == "\t"
    assert sniff_delimiter("a|b|c\n1|2|3\n") == "|"
    assert sniff_delimiter("one column\nvalue, with comma\n") == ","


def test_csv_not_text_or_empty_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not valid UTF-8"):
        parse("csv", "name,city\nJosé,Köln\n".encode("latin-1"))
    with pytest.raises(ParseError, match="no text"):
        parse("csv", b"\n\n")
    assert parse("csv", "name,city\r\nJosé,Köln\r\n".encode("utf-16")).text == (
        "- name: José; city: Köln\n"
    )


_CELL = st.text(
    alphabet=st.sampled_from(list("abcdef XYZ019é中\"'\n,;\t|")), min_size=0, max_size=8
)


@settings(max_examples=25, deadline=None)
@given(
    delimiter=st.sampled_from([",", "\t", ";", "|"]),
    width=st.integers(2, 4),
    data=st.data(),
)
def test_csv_round_trip_and_insert_a_row(delimiter: str, width: int, data: st.DataObject) -> None:
    others = [d for d in (",", "\t", ";", "|") if d != delimiter]
    cell = _CELL.filter(lambda s: not any(d in s for d in others))
    header = data.draw(
        st.lists(cell.filter(lambda s: s.strip() and "\n" not in s), min_size=width, max_size=width)
    )
    rows = data.draw(
        st.lists(st.lists(cell, min_size=width, max_size=width), min_size=1, max_size=6)
    )
    rows = [r for r in rows if any(v.strip() for v in r)] or [["x"] * width]
    old = parse("csv", _csv([header, *rows], delimiter))
    assert old.text == "".join(f"- {row_line(header, r)}\n" for r in rows)
    extra = data.draw(
        st.lists(cell, min_size=width, max_size=width).filter(lambda r: any(v.strip() for v in r))
    )
    at = data.draw(st.integers(0, len(rows)))
    new = parse("csv", _csv([header, *rows[:at], extra, *rows[at:]], delimiter))
    old_lines = old.text.splitlines()
    assert new.text.splitlines() == [
        *old_lines[:at],
        f"- {row_line(header, extra)}",
        *old_lines[at:],
    ]


def test_column_letters() -> None:
    assert [column_letter(i) for i in (0, 1, 25, 26, 27, 701, 702)] == [
        "A",
        "B",
        "Z",
        "AA",
        "AB",
        "ZZ",
        "AAA",
    ]


# -- the shared parser contract ---------------------------------------------------------------


@functools.cache
def _written(kind: str) -> bytes:
    return {"docx": _office_docx, "pptx": _deck, "xlsx": _workbook}[kind]()


class TestDocxContract(ParserContract):
    fmt = "docx"

    def samples(self) -> list[tuple[str, bytes]]:
        renders = sorted(FORMATS_DEV.glob("*/*.docx"))[::40] if FORMATS_DEV.exists() else []
        return [
            ("guide.docx", _written("docx")),
            *[(f"{p.parent.name}/{p.name}", p.read_bytes()) for p in renders],
        ]


class TestPptxContract(ParserContract):
    fmt = "pptx"

    def samples(self) -> list[tuple[str, bytes]]:
        return [("survey.pptx", _written("pptx"))]


class TestXlsxContract(ParserContract):
    fmt = "xlsx"

    def samples(self) -> list[tuple[str, bytes]]:
        return [("sales.xlsx", _written("xlsx"))]


class TestCsvContract(ParserContract):
    fmt = "csv"

    def samples(self) -> list[tuple[str, bytes]]:
        rows = [["name", "note"], ["Owl", "small, brown"], ["Heron", "tall"]]
        return [("birds.csv", _csv(rows)), ("birds.tsv", _csv(rows, "\t"))]


def test_every_written_file_passes_the_per_document_checks() -> None:
    for fmt in ("docx", "pptx", "xlsx"):
        check_parsed(parse(fmt, _written(fmt)))


def test_docx_a_cell_spanning_billions_of_columns_spans_word_s_widest_table() -> None:
    """A gridSpan is a count the file states: a crafted one (2,000,000,000) wrote that many
    empty cells; it is held to Word's widest table (63 columns)."""
    document = docx.Document()
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Owl", "Heron"
    tc_pr = table.cell(0, 0)._tc.get_or_add_tcPr()
    tc_pr.append(parse_xml(f'<w:gridSpan {nsdecls("w")} w:val="2000000000"/>'))
    (line,) = [row for row in parse("docx", saved(document)).text.splitlines() if "Owl" in row]
    assert line.count("|") <= 64 + 1 and "Heron" in line


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("바뀐 문단만\n다시  계산합니다", "바뀐 문단만 다시 계산합니다"),
        ("第3章 まとめ", "第3章 まとめ"),
        ("只重新计算\n  附近的文本", "只重新计算附近的文本"),
        ("改动 之后\n", "改动 之后"),
        ("words\nand\tmore ", "words and more"),
        ("数据\nbase", "数据 base"),
    ],
)
def test_clean_inline_drops_only_line_breaks_inside_chinese_or_japanese(
    text: str, cleaned: str
) -> None:
    assert clean_inline(text) == cleaned


def test_docx_keeps_the_spaces_of_korean_and_of_spaced_chinese() -> None:
    document = docx.Document()
    paragraphs = ["변경되지 않은 문단은 다시 임베딩하지 않습니다.", "第4章 概要", "用户 张三 已 删除"]
    for text in paragraphs:
        document.add_paragraph(text)
    parsed = parse("docx", saved(document))
    assert [text for kind, _, text in kinds(parsed) if kind == "paragraph"] == paragraphs

