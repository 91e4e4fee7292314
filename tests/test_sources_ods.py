"""ODS (OpenDocument spreadsheets): a section per sheet and a line per row, each value
beside its column's name, as the XLSX parser writes them; the values a spreadsheet
shows; repeated rows and cells as the sheet shows them, within bounds; the parser
contract; and a folder synced by the real CLI, an inserted row re-embedding only around
it. Files are written by odfdo (an OpenDocument library) from the project's own text."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_json
from parser_contract import ParserContract

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for

odfdo = pytest.importorskip("odfdo")

ORDERS = [
    ("Ada", "Lovelace Ltd", 120.0, dt.date(2026, 3, 1), True),
    ("Grace", "Hopper & Co", 75.5, dt.date(2026, 3, 2), False),
    ("Edsger", "Dijkstra BV", 12.25, dt.date(2026, 3, 4), True),
]


START = dt.date(2026, 1, 1)


def _element(xml: str) -> Any:
    return odfdo.Element.from_tag(xml)


def _row(*cells: Any, repeated: int | None = None) -> Any:
    row = odfdo.Row(repeated=repeated)
    row.set_cells(list(cells))
    return row


def workbook(orders: list[tuple[str, str, float, dt.date, bool]] = ORDERS) -> bytes:
    """A workbook as Calc would hold it: every construct the parser reads or leaves out."""
    from odfdo import Cell, Document, Row, Table

    doc = Document("spreadsheet")
    doc.meta.set_title("Orders this quarter")
    body = doc.body
    body.clear()
    sheet = Table("Orders")
    sheet.append(_row(Cell("Orders of the quarter")))  # a title row above the header
    sheet.append(_row(*(Cell(h) for h in ("Customer", "Company", "Total", "Date", "Paid"))))
    for name, company, total, day, paid in orders:
        shown = f"{total:,.2f} €"  # the text Calc shows in a currency format
        sheet.append(
            _row(
                Cell(name),
                Cell(company),
                Cell(total, text=shown, cell_type="currency", currency="EUR"),
                Cell(day),
                Cell(paid),
            )
        )
    sheet.append(Row())  # an empty row moves the numbers only
    sheet.append(_row(Cell("pending"), Cell(repeated=3), Cell("none"), repeated=2))
    # a cell with no paragraph (some writers store the value only), and one with a comment
    sheet.append(
        _element(
            "<table:table-row><table:table-cell office:value-type='float' office:value='42'/>"
            "<table:table-cell office:value-type='string'><office:annotation>"
            "<text:p>a reviewer's comment</text:p></office:annotation><text:p>checked</text:p>"
            "</table:table-cell></table:table-row>"
        )
    )
    sheet.append(Row(repeated=1048560))  # the empty rest of the sheet, as Calc writes it
    body.append(sheet)
    body.append(Table("Empty"))
    notes = Table("Notes")  # a one-column sheet: its first row is the header
    for text in ("Note", "Totals include tax.", "Refunds are listed separately."):
        notes.append(_row(Cell(text)))
    body.append(notes)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


EXPECTED = """# Orders

Orders of the quarter

- Customer: Ada; Company: Lovelace Ltd; Total: 120.00 €; Date: 2026-03-01; Paid: true
- Customer: Grace; Company: Hopper & Co; Total: 75.50 €; Date: 2026-03-02; Paid: false
- Customer: Edsger; Company: Dijkstra BV; Total: 12.25 €; Date: 2026-03-04; Paid: true
- Customer: pending; Paid: none
- Customer: pending; Paid: none
- Customer: 42; Company: checked

# Notes

- Note: Totals include tax.
- Note: Refunds are listed separately.
"""


def parse(data: bytes) -> Any:
    (doc,) = parser_for("ods").parse(data, ParseOptions())
    return doc


def test_the_workbook_reads_as_calc_shows_it() -> None:
    doc = parse(workbook())
    assert doc.text == EXPECTED
    assert doc.metadata == {"title": "Orders this quarter"}
    assert "comment" not in doc.text and "Empty" not in doc.text
    rows = [b.locator for b in doc.blocks if b.kind == "list_item"]
    assert rows[0] == {"sheet": "Orders", "row": 3}
    # the empty row 6 and the repeated rows 7 and 8 are numbered as the sheet numbers them
    assert [r["row"] for r in rows[3:6]] == [7, 8, 9]
    assert rows[-1] == {"sheet": "Notes", "row": 3}


def test_an_inserted_row_is_one_new_line() -> None:
    before = parse(workbook())
    inserted = ("Barbara", "Liskov GmbH", 99.0, dt.date(2026, 3, 3), False)
    after = parse(workbook([*ORDERS[:2], inserted, *ORDERS[2:]]))
    old = [before.text[b.start : b.end] for b in before.blocks]
    new = [after.text[b.start : b.end] for b in after.blocks]
    added = [b for b in new if b not in old]
    assert len(added) == 1 and "Barbara" in added[0]
    new.remove(added[0])
    assert new == old


def _package(content: str) -> bytes:
    """A workbook whose ``content.xml`` body is ``content`` (the sheets' XML)."""
    data = workbook()
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        xml = src.read("content.xml").decode()
        start = xml.index("<office:spreadsheet>") + len("<office:spreadsheet>")
        end = xml.index("</office:spreadsheet>")
        xml = xml[:start] + content + xml[end:]
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as dst:
            for info in src.infolist():
                dst.writestr(info, xml if info.filename == "content.xml" else src.read(info))
    return out.getvalue()


def test_repeats_are_bounded() -> None:
    cell = "<table:table-cell office:value-type='string'><text:p>v</text:p></table:table-cell>"
    # a value repeated past the last column a sheet has: read up to it
    wide = (
        "<table:table table:name='Wide'><table:table-row><table:table-cell "
        "table:number-columns-repeated='1000000' office:value-type='string'><text:p>w</text:p>"
        f"</table:table-cell>{cell}</table:table-row></table:table>"
    )
    (line,) = [b for b in parse(_package(wide)).text.splitlines() if b.startswith("w")]
    assert line.count("w") == 1 << 14
    # a few hundred bytes that would write out 16,384 x 1,048,576 values
    bomb = (
        "<table:table table:name='Bomb'><table:table-row table:number-rows-repeated='1048576'>"
        "<table:table-cell table:number-columns-repeated='16384' office:value-type='string'>"
        "<text:p>x</text:p></table:table-cell></table:table-row></table:table>"
    )
    with pytest.raises(ParseError, match="too large"):
        parse(_package(bomb))
    # an empty row repeated to the end of the sheet leaves nothing to read after it
    tail = (
        "<table:table table:name='Tail'><table:table-row table:number-rows-repeated="
        f"'2000000'><table:table-cell/></table:table-row><table:table-row>{cell}"
        "</table:table-row></table:table>"
    )
    with pytest.raises(ParseError, match="every sheet is empty"):
        parse(_package(tail))


def test_what_is_not_an_opendocument_spreadsheet_is_a_parse_error() -> None:
    text = io.BytesIO()
    odfdo.Document("text").save(text)
    with pytest.raises(ParseError, match="not an OpenDocument spreadsheet"):
        parse(text.getvalue())
    with pytest.raises(ParseError, match="legacy binary Excel"):
        parse(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    with pytest.raises(ParseError, match="every sheet is empty"):
        parse(_package("<table:table table:name='Sheet1'/>"))


class TestOdsContract(ParserContract):
    fmt = "ods"

    def samples(self) -> list[tuple[str, bytes]]:
        return [("orders.ods", workbook()), ("short.ods", workbook(ORDERS[:1]))]


def test_a_folder_with_an_ods_syncs_and_an_inserted_row_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    orders = [
        (f"Customer {i}", f"Company {i}", 10.0 + i, START + dt.timedelta(i), i % 2 == 0)
        for i in range(120)
    ]
    (docs / "orders.ods").write_bytes(workbook(orders))
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "docs")
    assert code == 0 and report["documents"]["new"] == 1 and report["unsupported_files"] == {}
    assert report["skipped_files"] == []
    assert parse_file(docs / "orders.ods")[0].metadata["title"] == "Orders this quarter"
    inserted = ("Barbara", "Liskov GmbH", 99.0, dt.date(2026, 3, 3), False)
    (docs / "orders.ods").write_bytes(workbook([*orders[:60], inserted, *orders[60:]]))
    code, report = run_json(capsys, "sync", "docs")
    (doc,) = report["per_document"]
    assert code == 0 and doc["status"] == "changed"
    assert 0 < doc["tokens_embedded"] <= 0.2 * doc["tokens_total"], doc
