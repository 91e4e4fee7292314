"""JSON and JSON Lines records: one document per record, its fields in a fixed order.

Which values are the records:

* ``.jsonl`` / ``.ndjson``: every non-blank line is one record (a line that is not JSON
  is a :class:`ParseError` naming the line).
* ``.json``: an array holds the records; an object whose *only* member is an array of
  objects (``{"items": [{...}, ...]}``, an export's envelope) holds them in that array;
  any other object is one record, and so is a lone string or number. A file that is not
  JSON but is JSON with comments (``//`` and ``/* */`` comments, commas before a closing
  bracket: ``tsconfig.json``, editor settings) is read as that; the comments are not
  part of the text.

A record's id (its document's ``part``, so its doc_id is ``path#id``): the value of the
field ``ParseOptions.id_field`` names (``--id-field``; a dotted name reaches into nested
objects when no field has that exact name) when given, which must be a string or an
integer, present and unique in the file (else a :class:`ParseError` naming the record);
without it, the record's 1-based position among the file's records.

A record's text, written with :class:`~rechunk.sources.base.TextBuilder`: one paragraph
per field, ``name: value``, fields in sorted order of their names, nested objects
flattened to dotted names (``author.name: Ada``), a list of scalars joined with ``, ``
(``tags: a, b``), a list holding objects or lists flattened with 0-based indices
(``authors.0.name: Ada``). Strings as written (whitespace runs become one space; a NUL or
a lone surrogate, which JSON can escape but a document cannot hold, as U+FFFD; in an id,
as its escape ``\\u0000``), numbers
as JSON writes them, ``true`` / ``false``; ``null``, empty strings, arrays and objects
are left out (they say nothing). A string with blank lines in it (several paragraphs)
gives ``name: <first paragraph>`` and then a paragraph per further one. A record that is
not an object is its value alone. The id field is *not* in the text: it is the doc_id
and the record's locator already, and an opaque key (a UUID) only adds tokens that say
nothing; with ``--id-field`` unset, every field is in the text.

A JSON Lines record's blocks carry ``{"line": n}`` (1-based).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from rechunk.sources.base import Parsed, ParseError, TextBuilder
from rechunk.sources.notebook import load_json
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = ["JsonParser", "JsonlParser", "record_fields"]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# JSON with comments: a string (kept as it is), else a comment or a comma before a
# closing bracket (dropped)
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_COMMENT = re.compile(_STRING + r"|//[^\n]*|/\*.*?\*/", re.DOTALL)
_TRAILING_COMMA = re.compile(_STRING + r"|,(?=\s*[\]}])")
_MISSING = object()
#: what JSON can escape but a document cannot hold: NUL (``\u0000``), lone surrogates
_UNHELD = re.compile("[\x00\ud800-\udfff]")


def _held(text: str) -> str:
    """``text`` with a NUL or a lone surrogate as U+FFFD: a record holding one escaped
    (a test fixture's ``"a\\u0000b"``) is read, not its whole file skipped."""
    return _UNHELD.sub("\ufffd", text)


def _held_id(text: str) -> str:
    """An id with a NUL or a lone surrogate written as its JSON escape (``a\\u0000``):
    one to one, so that two ids that differ there stay two ids."""
    return _UNHELD.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def record_fields(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted name, text)`` of a record's fields, in the order they are written."""
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            if not _empty(value[key]):
                yield from record_fields(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        items = [item for item in value if not _empty(item)]
        if all(not isinstance(item, (dict, list)) for item in items):
            if items:
                yield prefix, ", ".join(_scalar(item) for item in items)
        else:
            for index, item in enumerate(value):
                if not _empty(item):
                    yield from record_fields(item, f"{prefix}.{index}" if prefix else str(index))
    elif not _empty(value):
        yield prefix, _scalar(value)


def _write(record: Any, builder: TextBuilder, skip: str | None, **locator: Any) -> None:
    for name, text in record_fields(record):
        if skip is not None and name == skip:
            continue
        name, text = _held(name), _held(text)
        paragraphs = [part for part in _PARAGRAPH_BREAK.split(text) if part.strip()]
        for i, paragraph in enumerate(paragraphs):
            builder.paragraph(f"{name}: {paragraph}" if i == 0 and name else paragraph, **locator)


def _id_of(record: Any, field: str) -> tuple[Any, str]:
    """The id value of ``record`` and the dotted name of the field it is in."""
    if not isinstance(record, dict):
        return _MISSING, field
    if field in record:
        return record[field], field
    value: Any = record
    for step in field.split("."):
        if not isinstance(value, dict) or step not in value:
            return _MISSING, field
        value = value[step]
    return value, field


def _documents(
    records: list[tuple[str, Any, dict[str, Any]]], parser: str, version: str, options: ParseOptions
) -> list[Parsed]:
    """One document per ``(where, record, locator)``: ``where`` names it in errors."""
    if not records:
        raise ParseError("no records")
    field = options.id_field
    seen: dict[str, str] = {}
    documents = []
    for position, (where, record, locator) in enumerate(records, 1):
        skip = None
        if field:
            value, skip = _id_of(record, field)
            if value is _MISSING or _empty(value):
                raise ParseError(f"{where} has no {field!r} field (the id field)")
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise ParseError(
                    f"{where}: its {field!r} is {type(value).__name__}, not a string or integer"
                )
            part = _held_id(str(value))
            if part in seen:
                raise ParseError(f"{where}: id {part!r} repeats {seen[part]}")
            seen[part] = where
        else:
            part = str(position)
        builder = TextBuilder()
        _write(record, builder, skip, **locator)
        documents.append(builder.build(parser, version, part=part))
    return documents


def _load_json_with_comments(data: bytes) -> Any:
    """The value of a JSON file, or of a JSON-with-comments one; the error is JSON's."""
    try:
        return load_json(data)
    except ParseError:
        try:
            text = data.decode("utf-8-sig")
            plain = _TRAILING_COMMA.sub(_strings, _COMMENT.sub(_strings_or_space, text))
            return json.loads(plain)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            pass
        raise


def _strings(match: re.Match[str]) -> str:
    """A string as it is; a trailing comma dropped."""
    return match.group() if match.group().startswith('"') else ""


def _strings_or_space(match: re.Match[str]) -> str:
    """A string as it is; a comment a space (``1/**/2`` is not ``12``)."""
    return match.group() if match.group().startswith('"') else " "


class JsonParser:
    """``.json``: an array of records, an envelope of one array, or one record."""

    name = "json"
    suffixes = FORMATS["json"][1]

    def version(self) -> str:
        return "json/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        value = _load_json_with_comments(data)
        if isinstance(value, dict) and len(value) == 1:
            (inner,) = value.values()
            if isinstance(inner, list) and inner and all(isinstance(r, dict) for r in inner):
                value = inner
        records = value if isinstance(value, list) else [value]
        return _documents(
            [(f"record {i}", record, {}) for i, record in enumerate(records, 1)],
            self.name,
            self.version(),
            options,
        )


class JsonlParser:
    """``.jsonl`` / ``.ndjson``: one record per non-blank line."""

    name = "jsonl"
    suffixes = FORMATS["jsonl"][1]

    def version(self) -> str:
        return "jsonl/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ParseError(f"not valid UTF-8 (byte offset {exc.start})") from None
        records = []
        # split at "\n" only: U+2028 and other separators may stand inside JSON strings
        for number, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ParseError(f"line {number}: not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise ParseError(f"line {number}: JSON nested too deeply") from None
            records.append((f"line {number}", record, {"line": number}))
        return _documents(records, self.name, self.version(), options)
