"""A damaged ZIP package (DOCX, ODT, ODS, ODP, PPTX, XLSX, EPUB) is a skipped file with a reason,
never an exception that ends the sync: a corrupt deflate stream raised ``zlib.error``
out of the PPTX and XLSX parsers, and out of every package part read through
``read_part``. The packages are written by the tests' real writers (python-docx, odfdo,
python-pptx, openpyxl, pandoc), then damaged the way a bad disk or a cut download does."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest
from test_sources_properties import WRITERS

from rechunk.sources import ParseError, ParseOptions, parser_for

PACKAGES = ("docx", "odt", "ods", "odp", "pptx", "xlsx", "epub")
# the part each format reads its text from, after it has opened the package
CONTENT = {
    "docx": "word/document.xml",
    "odt": "content.xml",
    "ods": "content.xml",
    "odp": "content.xml",
    "pptx": "ppt/slides/slide1.xml",
    "xlsx": "xl/worksheets/sheet1.xml",
    "epub": "EPUB/text/ch001.xhtml",
}


def _package(fmt: str) -> bytes:
    return WRITERS[fmt](["The owl counts reeds at dawn.", "The heron nests by the river."])


def _damaged(data: bytes, names: set[str] | None = None) -> bytes:
    """``data`` with the deflate stream of each compressed member in ``names`` (all, if
    None) starting with 0xFF: a reserved block type, so inflating it fails (zlib.error)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            if info.compress_type != zipfile.ZIP_DEFLATED or info.compress_size < 4:
                continue
            if names is not None and info.filename not in names:
                continue
            name_length, extra_length = struct.unpack_from("<HH", out, info.header_offset + 26)
            start = info.header_offset + 30 + name_length + extra_length
            out[start : start + 2] = b"\xff\xff"
    return bytes(out)


@pytest.mark.parametrize("fmt", PACKAGES)
def test_a_package_whose_parts_cannot_be_inflated_is_a_parse_error(fmt: str) -> None:
    data = _package(fmt)
    parser_for(fmt).parse(data, ParseOptions())  # the undamaged package reads
    for damaged in (_damaged(data), _damaged(data, {CONTENT[fmt]})):
        with pytest.raises(ParseError, match="corrupt"):
            parser_for(fmt).parse(damaged, ParseOptions())
