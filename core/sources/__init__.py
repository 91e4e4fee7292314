"""Sources: from files on disk to documents, through the parser of each format.

File discovery: :mod:`~rechunk.sources.files` walks folders (globs, hidden names,
``.gitignore`` rules as :mod:`~rechunk.sources.ignore` reads them, files that cannot be
read, the files tools wrote as :mod:`~rechunk.sources.generated` knows them) and makes
each file it finds into documents (:mod:`~rechunk.sources.documents`:
its format's parser, or a code file's language).

A parser turns one file's bytes into :class:`Parsed` documents (most formats give one;
JSON and JSONL records give one per record). Its ``text`` is what is chunked, embedded
and pointed into by offsets; its ``blocks`` (heading, paragraph, list item, table, code,
quote) are spans of that text. Parsers write their text in a Markdown-shaped plain form
(a heading is a ``#`` line, blocks are separated by a blank line, list items start with
``- ``, table rows with ``|``, code is fenced), so the structured policy finds the same
sections and blocks in it that the parser found in the file: sections stay hard
boundaries whatever the format.

Page furniture (a site's menus, a PDF's running headers, footers and page numbers) is
not text. The same bytes give the same text on every run, and an edit changes the text
only near the edit. Nothing is downloaded at run time. A file that cannot be parsed is
a :class:`ParseError` (an :class:`~rechunk.errors.InputError`) whose message is one line;
one that parses and holds no text is a :class:`NoTextError` (a ``ParseError``), which
a sync counts as an empty file, not as a failure.

What this package may import: the standard library, ``rechunk.errors``,
``rechunk.document`` and the chunkers (a code file's language); never the sync or live
rooms. Each format's third-party library is imported inside its own module, on first use, through
:func:`rechunk._optional.require` (extra ``formats``).
"""

from __future__ import annotations

from rechunk.sources.base import (
    BLOCK_KINDS,
    Block,
    NoTextError,
    Parsed,
    ParseError,
    Parser,
    TextBuilder,
    locate,
)
from rechunk.sources.registry import (
    FORMATS,
    ParseOptions,
    format_for,
    parse_file,
    parser_for,
    supported_suffixes,
)

__all__ = [
    "BLOCK_KINDS",
    "FORMATS",
    "Block",
    "NoTextError",
    "ParseError",
    "ParseOptions",
    "Parsed",
    "Parser",
    "TextBuilder",
    "format_for",
    "locate",
    "parse_file",
    "parser_for",
    "supported_suffixes",
]
