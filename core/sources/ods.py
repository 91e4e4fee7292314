"""ODS: OpenDocument spreadsheets (LibreOffice Calc's format, and what Google Sheets and
Excel export as ODF), read as the XLSX parser reads a workbook: one section per sheet,
headed by its name, and a line per row with each value beside its column's name
(``- Name: Ada; Born: 1815-12-10``; see :mod:`rechunk.sources.sheets`). Blocks are
located by ``{"sheet": name, "row": n}`` (1-based, as the spreadsheet numbers rows).

* A cell's value is the text the spreadsheet program showed when it saved the file (the
  cell's paragraphs: numbers, dates and currencies in the cell's format, a formula's
  result); a cell with no paragraphs gives its stored value (a date in ISO form, a
  boolean as ``TRUE`` / ``FALSE``).
* Rows and cells the file writes once with a repeat count are read that many times, as
  the sheet shows them; empty ones only move the row and column numbers. Past
  1,048,576 rows or 16,384 columns (the largest sheet Calc and Excel open) nothing more
  is read, and a file whose repeats would write out more than 20 million values is a
  :class:`~rechunk.sources.base.ParseError`.
* Hidden sheets, rows and columns are read (they are content); comments, charts,
  images and drawings on a sheet, named ranges and the page headers and footers are
  not.

A file that is not a ZIP package, is not an OpenDocument spreadsheet (its
``mimetype``), is password-protected, or is a legacy binary ``.xls`` renamed is a
:class:`~rechunk.sources.base.ParseError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from rechunk.sources._odf import H, P, number, open_odf, q, text_of
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder
from rechunk.sources.sheets import format_value, write_rows

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["OdsParser"]

MAX_ROWS = 1 << 20
MAX_COLUMNS = 1 << 14
MAX_VALUES = 20_000_000

_TABLE, _ROW = q("table:table"), q("table:table-row")
_CELLS = frozenset({q("table:table-cell"), q("table:covered-table-cell")})
_ROW_GROUPS = frozenset(
    {q("table:table-header-rows"), q("table:table-row-group"), q("table:table-rows")}
)
_VALUE_TYPE = q("office:value-type")


def _rows(parent: ET.Element) -> Iterator[ET.Element]:
    """The rows of a sheet in order, through header rows and row groups (not the rows
    of a table nested in a cell)."""
    for child in parent:
        if child.tag == _ROW:
            yield child
        elif child.tag in _ROW_GROUPS:
            yield from _rows(child)


def _stored(cell: ET.Element) -> str:
    """The value a cell stores, for a cell that shows no paragraph."""
    kind = cell.get(_VALUE_TYPE)
    if kind == "string":
        return cell.get(q("office:string-value"), "")
    if kind == "boolean":
        return "TRUE" if cell.get(q("office:boolean-value")) == "true" else "FALSE"
    if kind == "date":
        value = cell.get(q("office:date-value"), "")
        return value.removesuffix("T00:00:00")
    if kind == "time":
        return cell.get(q("office:time-value"), "")
    if kind in ("float", "percentage", "currency"):
        value = cell.get(q("office:value"), "")
        try:
            return format_value(float(value))
        except ValueError:
            return value
    return ""


def _cell(cell: ET.Element) -> str:
    shown = [text_of(child) for child in cell if child.tag in (P, H)]
    return " ".join(shown) if shown else _stored(cell)


def _values(row: ET.Element) -> list[str]:
    """A row's values by column, up to its last non-empty one."""
    values: list[str] = []
    empty = 0  # empty cells since the last value: written only when a value follows
    for cell in row:
        if cell.tag not in _CELLS:
            continue
        repeat = max(number(cell, "table:number-columns-repeated"), 1)
        text = _cell(cell)
        if not text.strip():
            empty += repeat
            continue
        if len(values) + empty >= MAX_COLUMNS:
            break
        values.extend([""] * empty)
        empty = 0
        values.extend([text] * min(repeat, MAX_COLUMNS - len(values)))
    return values


class OdsParser:
    """OpenDocument spreadsheets (``.ods``, ``.ots``): see the module docstring."""

    name = "ods"
    suffixes = (".ods", ".ots")

    def version(self) -> str:
        return "ods/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        package = open_odf(data, "spreadsheet", "Excel (.xls)", ".ods")
        body = package.body("spreadsheet")
        out = TextBuilder()
        written = 0
        for index, table in enumerate([] if body is None else body.findall(_TABLE), start=1):
            title = table.get(q("table:name")) or f"Sheet{index}"
            rows: list[tuple[int, list[str]]] = []
            at = 0  # the number of the row before this one
            for row in _rows(table):
                repeat = min(max(number(row, "table:number-rows-repeated"), 1), MAX_ROWS - at)
                values = _values(row)
                if values:
                    written += repeat * sum(1 for v in values if v.strip())
                    if written > MAX_VALUES:
                        raise ParseError(
                            f"too large: its repeated rows and cells would write out more "
                            f"than {MAX_VALUES:,} values"
                        )
                    rows.extend((at + k, values) for k in range(1, repeat + 1))
                at += repeat
                if at >= MAX_ROWS:
                    break
            if rows:
                out.heading(title, 1, sheet=title)
                write_rows(out, rows, first_is_header=False, sheet=title)
        if out.empty:
            raise NoTextError("no text: every sheet is empty")
        return [out.build(self.name, self.version(), metadata=package.title())]
