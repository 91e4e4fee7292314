"""Spreadsheets and delimited text: one line per row, each value beside its column's name.

A row is written as one list item, ``- Name: Ada; Born: 1815-12-10; Field: Mathematics``:
every value carries its header, so a chunk cut anywhere in a long sheet still says what
its numbers are, a query for one record finds the line that holds it, and a row inserted
or edited changes that line only (the structured policy cuts between rows by their
content, so the chunks around it keep their bytes; a table block per group of rows would
need its header repeated and its groups would shift). Empty cells are left out of the
line; a column without a header is named by its letter (``C``). Each block is located by
``{"row": n}`` (1-based, as the spreadsheet numbers rows; for CSV, the record's number,
the header being 1) and for XLSX also ``{"sheet": name}``.

* XLSX (``.xlsx``, ``.xlsm``; openpyxl, read-only, the values Excel cached for formulas):
  one section per worksheet, headed by its name (``# Q3``), hidden sheets included.
  The header is the first row with two or more values (rows above it, such as a title,
  are paragraphs); in a one-column sheet, the first row. Values are written as Excel
  shows them where the cell's number format is a plain one (decimals, thousands
  separators, percent, scientific, currency and other literal text, and dates and
  times with English month and day names); any other format gives the stored value
  (integers without ``.0``, other numbers to 15 significant digits, dates in ISO
  form). A formula whose result was never cached (a file written by a library, not
  saved by a spreadsheet program) has no value to show. Charts and chart sheets,
  comments and images are not read.
* CSV and TSV (``.csv``, ``.tsv``; the standard library's ``csv``): UTF-8 (a byte order
  mark is dropped) or UTF-16 with its byte order mark; the first record is the header.
  The delimiter is chosen by one fixed rule: of comma, tab, semicolon and bar (in that
  order of preference on ties), the one that splits the first record into two or more
  fields and gives the largest share of the first 50 records the first record's
  number of fields; when none splits it, the file is one column. Quotes are ``"``,
  doubled inside a field.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from rechunk._optional import require
from rechunk.sources._office import ZIP_ERRORS, reject_ole
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder, clean_inline

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["CsvParser", "XlsxParser", "format_value"]

VERSION = 1
_DELIMITERS = (",", "\t", ";", "|")
_SNIFF_RECORDS = 50
_SNIFF_CHARS = 1 << 16


def column_letter(index: int) -> str:
    """The spreadsheet letter of a 0-based column index (0 -> A, 26 -> AA)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def row_line(header: Sequence[str], values: Sequence[str]) -> str:
    """``name: value; name: value`` over the row's non-empty values."""
    parts = []
    for i, value in enumerate(values):
        value = clean_inline(value)
        if not value:
            continue
        name = clean_inline(header[i]) if i < len(header) else ""
        parts.append(f"{name or column_letter(i)}: {value}")
    return "; ".join(parts)


# -- number formats ---------------------------------------------------------------------------

_MONTHS = (
    *("January", "February", "March", "April", "May", "June", "July", "August"),
    *("September", "October", "November", "December"),
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_LITERAL = re.compile(r'"([^"]*)"|\\(.)|_.|\*.|\[\$([^\]-]*)(?:-[^\]]*)?\]|\[[^\]]*\]')
_DATE_TOKEN = re.compile(
    r"yyyy|yy|mmmmm|mmmm|mmm|mm|m|dddd|ddd|dd|d|hh|h|ss|s|am/pm|a/p|\.0+",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[0#?][0#?,]*(?:\.[0#?]*)?(?:[eE][+-]0+)?|\.[0#?]+")


def _sections(fmt: str) -> list[str]:
    """The format's ``;``-separated sections (not splitting inside quotes)."""
    out: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in fmt:
        if ch == '"':
            quoted = not quoted
        if ch == ";" and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return out


def _literals(section: str) -> tuple[str, list[str]]:
    """The section with each literal replaced by ``\\x00``, and the literals in order."""
    found: list[str] = []

    def keep(match: re.Match[str]) -> str:
        quoted, escaped, currency = match.group(1), match.group(2), match.group(3)
        text = quoted if quoted is not None else escaped if escaped is not None else currency
        if text is None:  # padding, fill, a colour or a condition: nothing shown
            return ""
        found.append(text)
        return "\x00"

    return _LITERAL.sub(keep, section), found


def _restore(pattern: str, literals: list[str]) -> str:
    it = iter(literals)
    return re.sub("\x00", lambda _: next(it, ""), pattern)


def _general(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".15g")


def _number(value: float | int, fmt: str) -> str | None:
    sections = _sections(fmt)
    if value < 0 and len(sections) > 1:
        section, sign, value = sections[1], "", -value
    elif value == 0 and len(sections) > 2:
        section, sign = sections[2], ""
    else:
        section, sign = sections[0], "-" if value < 0 else ""
        value = abs(value)
    pattern, literals = _literals(section)
    if pattern.strip().lower() in ("general", ""):
        if not literals:
            return sign + _general(value)
        body = _general(value) if pattern.strip() else ""
        return sign + _restore(pattern.replace("General", body).replace("general", body), literals)
    if "/" in pattern or "@" in pattern or re.search(r"[ymdhs]", pattern, re.IGNORECASE):
        return None
    match = _NUMBER.search(pattern)
    if match is None:  # a section of text only, such as "zero" or "-"
        return _restore(pattern, literals) if literals else None
    if _NUMBER.search(pattern, match.end()):
        return None
    spec = match.group(0)
    if "%" in pattern:
        value *= 100 * pattern.count("%")
    mantissa, _, exponent = spec.lower().partition("e")
    whole, _, decimals = mantissa.partition(".")
    required = decimals.count("0")
    optional = decimals.count("#") + decimals.count("?")
    if exponent:
        text = format(value, f".{required + optional}E")
        text = re.sub(r"E([+-])0*(\d)", lambda m: f"E{m.group(1)}{m.group(2).zfill(2)}", text)
    else:
        thousands = "," in whole.strip(",")
        text = format(value, f"{',' if thousands else ''}.{required + optional}f")
        if optional:
            head, _, tail = text.partition(".")
            tail = tail.rstrip("0").ljust(required, "0")
            text = f"{head}.{tail}" if tail else head
        digits = whole.replace(",", "").count("0")
        head, dot, tail = text.partition(".")
        if digits > 1 and len(head.replace(",", "")) < digits:
            head = head.zfill(digits)
        elif digits == 0 and head == "0" and dot:
            head = ""
        text = head + dot + tail
    out = pattern[: match.start()] + text + pattern[match.end() :]
    return sign + _restore(out, literals)


def _date(value: dt.datetime | dt.date | dt.time, fmt: str) -> str | None:
    section, literals = _literals(_sections(fmt)[0])
    if "[" in section or not _DATE_TOKEN.search(section):
        return None
    if isinstance(value, dt.time):
        value = dt.datetime.combine(dt.date(1899, 12, 31), value)
    elif not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    tokens = list(_DATE_TOKEN.finditer(section))
    twelve = any(t.group(0).lower() in ("am/pm", "a/p") for t in tokens)
    out: list[str] = []
    last = 0
    for i, token in enumerate(tokens):
        out.append(section[last : token.start()])
        last = token.end()
        word = token.group(0)
        key = word.lower()
        if key.startswith("m") and len(key) <= 2:
            before = next(
                (t.group(0).lower() for t in reversed(tokens[:i]) if t.group(0)[0] not in "."),
                "",
            )
            after = next((t.group(0).lower() for t in tokens[i + 1 :]), "")
            minutes = before.startswith("h") or after.startswith("s")
            number = value.minute if minutes else value.month
            out.append(f"{number:02d}" if key == "mm" else str(number))
        elif key == "mmm":
            out.append(_MONTHS[value.month - 1][:3])
        elif key == "mmmm":
            out.append(_MONTHS[value.month - 1])
        elif key == "mmmmm":
            out.append(_MONTHS[value.month - 1][0])
        elif key == "yyyy":
            out.append(f"{value.year:04d}")
        elif key == "yy":
            out.append(f"{value.year % 100:02d}")
        elif key in ("d", "dd"):
            out.append(f"{value.day:02d}" if key == "dd" else str(value.day))
        elif key == "ddd":
            out.append(_DAYS[value.weekday()][:3])
        elif key == "dddd":
            out.append(_DAYS[value.weekday()])
        elif key in ("h", "hh"):
            hour = value.hour % 12 or 12 if twelve else value.hour
            out.append(f"{hour:02d}" if key == "hh" else str(hour))
        elif key in ("s", "ss"):
            out.append(f"{value.second:02d}" if key == "ss" else str(value.second))
        elif key == "am/pm":
            out.append("AM" if value.hour < 12 else "PM")
        elif key == "a/p":
            out.append("A" if value.hour < 12 else "P")
        else:  # fractional seconds
            places = len(word) - 1
            out.append("." + f"{value.microsecond / 1e6:.{places}f}"[2:])
    out.append(section[last:])
    return _restore("".join(out), literals)


def format_value(value: Any, number_format: str | None = None) -> str:
    """A cell's value as a spreadsheet shows it under ``number_format`` where that format
    is a plain one, else the stored value (see the module's docstring)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return value
    fmt = number_format or "General"
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        shown = _date(value, fmt)
        if shown is not None:
            return shown
        if isinstance(value, dt.datetime) and value.time() == dt.time():
            return value.date().isoformat()
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, (int, float)):
        try:
            shown = _number(value, fmt)
        except (ValueError, OverflowError):
            shown = None
        return shown if shown is not None else _general(value)
    return str(value)


# -- rows to blocks ---------------------------------------------------------------------------


def write_rows(
    out: TextBuilder,
    rows: Iterable[tuple[int, list[str]]],
    *,
    first_is_header: bool,
    **locator: Any,
) -> None:
    """Rows (number, values) as list items; a header found as the module says."""
    kept = [(n, values) for n, values in rows if any(v.strip() for v in values)]
    if not kept:
        return
    at = 0
    if not first_is_header:
        wide = [i for i, (_, values) in enumerate(kept) if sum(1 for v in values if v.strip()) > 1]
        at = wide[0] if wide else 0
    for number, values in kept[:at]:
        out.paragraph(" ".join(v for v in values if v.strip()), row=number, **locator)
    header_number, header = kept[at]
    body = kept[at + 1 :]
    if not body:
        line = "; ".join(clean_inline(v) for v in header if clean_inline(v))
        out.paragraph(line, row=header_number, **locator)
        return
    for number, values in body:
        out.list_item(row_line(header, values), row=number, **locator)


def _rows(sheet: Any) -> Iterator[tuple[int, list[Any]]]:
    """(row number, cells) of each row of a read-only sheet that holds a value, its cells
    with a value only. openpyxl's ``iter_rows`` makes a cell of every column up to the
    last one a row names, and a row styled out to column XFD names 16,384: a 333 KB sheet
    of two columns took 31 times as long to read as the same values unstyled. Read from
    openpyxl's own sheet parser, as ``iter_rows`` reads them; its rows where that parser
    is not found (another openpyxl)."""
    try:
        from openpyxl.cell.read_only import ReadOnlyCell
        from openpyxl.worksheet._reader import WorkSheetParser

        book = sheet.parent
        shared, open_source = sheet._shared_strings, sheet._get_source
        options = {
            "data_only": book.data_only,
            "epoch": book.epoch,
            "date_formats": book._date_formats,
            "timedelta_formats": book._timedelta_formats,
        }
    except (ImportError, AttributeError):
        yield from _iter_rows(sheet)
        return
    source = open_source()
    try:
        parser = WorkSheetParser(source, shared, **options)
    except TypeError:
        source.close()
        yield from _iter_rows(sheet)
        return
    with source:
        for number, cells in parser.parse():
            held = [ReadOnlyCell(sheet, **c) for c in cells if c["value"] is not None]
            if held:
                yield number, held


def _iter_rows(sheet: Any) -> Iterator[tuple[int, list[Any]]]:
    """:func:`_rows` by openpyxl's ``iter_rows`` (every cell of a row built)."""
    for number, cells in enumerate(sheet.iter_rows(), start=1):
        held = [c for c in cells if getattr(c, "value", None) is not None]
        if held:
            yield number, held


class XlsxParser:
    """Excel workbooks (``.xlsx``, ``.xlsm``): a section per sheet, a line per row."""

    name = "xlsx"
    suffixes = (".xlsx", ".xlsm")

    def version(self) -> str:
        openpyxl = require("openpyxl", "formats")
        return f"xlsx/{VERSION} openpyxl {openpyxl.__version__}"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        openpyxl = require("openpyxl", "formats")
        from openpyxl.utils.exceptions import InvalidFileException

        reject_ole(data, "Excel (.xls)", ".xlsx")
        failures = (
            *ZIP_ERRORS,
            InvalidFileException,
            KeyError,
            ValueError,
            TypeError,
            AttributeError,
            IndexError,
            OSError,
            SyntaxError,  # xml.etree's ParseError
        )
        try:
            book = openpyxl.load_workbook(
                io.BytesIO(data), read_only=True, data_only=True, keep_links=False
            )
        except failures as exc:
            # the type only: a library's message may quote a cell or a part of the file
            raise ParseError(f"corrupt: not an XLSX workbook ({type(exc).__name__})") from None
        out = TextBuilder()
        try:
            for sheet in book.worksheets:
                sheet.reset_dimensions()  # some writers record wrong dimensions
                rows: dict[int, list[str]] = {}
                for number, cells in _rows(sheet):
                    values = [""] * max((c.column for c in cells), default=0)
                    for c in cells:
                        values[c.column - 1] = format_value(c.value, c.number_format)
                    while values and not values[-1].strip():
                        values.pop()
                    if values and number not in rows:  # a row listed twice: its first
                        rows[number] = values
                if rows:  # in the sheet's order, however its XML lists them
                    out.heading(sheet.title, 1, sheet=sheet.title)
                    write_rows(out, sorted(rows.items()), first_is_header=False, sheet=sheet.title)
        except failures as exc:
            # the type only: openpyxl's message quotes the cell ("could not convert string
            # to float: '...'")
            raise ParseError(f"corrupt: a sheet cannot be read ({type(exc).__name__})") from None
        finally:
            book.close()
        if out.empty:
            raise NoTextError("no text: every sheet is empty")
        return [out.build(self.name, self.version())]


def sniff_delimiter(text: str) -> str:
    """The delimiter of a delimited text, by the module's fixed rule."""
    sample = text[:_SNIFF_CHARS]
    truncated = len(text) > _SNIFF_CHARS
    best, best_score = ",", -1.0
    for delimiter in _DELIMITERS:
        try:
            records = list(
                islice(csv.reader(io.StringIO(sample), delimiter=delimiter), _SNIFF_RECORDS + 1)
            )
        except csv.Error:
            continue
        if truncated and len(records) > 1:
            records = records[:-1]  # the sample may cut the last record short
        records = [r for r in records[:_SNIFF_RECORDS] if r]
        if not records or len(records[0]) < 2:
            continue
        width = len(records[0])
        score = sum(1 for r in records if len(r) == width) / len(records)
        if score > best_score:
            best, best_score = delimiter, score
    return best


class CsvParser:
    """Delimited text (``.csv``, ``.tsv``): a line per record, values beside their header."""

    name = "csv"
    suffixes = (".csv", ".tsv")

    def version(self) -> str:
        return f"csv/{VERSION} stdlib"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        text, read = options.decode(data)
        delimiter = sniff_delimiter(text)
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False)
        try:
            rows = [(number, record) for number, record in enumerate(reader, start=1) if record]
        except csv.Error as exc:
            raise ParseError(f"corrupt: not delimited text ({exc})") from None
        out = TextBuilder()
        write_rows(out, rows, first_is_header=True)
        if out.empty:
            raise NoTextError("no text: the file holds no values")
        name = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "bar"}[delimiter]
        return [out.build(self.name, self.version(), metadata={"delimiter": name, **read})]
