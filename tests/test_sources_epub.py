"""EPUB: a book's content documents in reading order, read as web pages are, each block
citing its chapter; DRM refused with its reason, font obfuscation read; the parser
contract; and a book synced by the real CLI, an edit in one chapter re-embedding only
around it. The books are written by pandoc (pypandoc-binary, dev extra) from the
project's own text (a handbook of rechunk's sync job)."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import pytest
from cli_helpers import run_json
from parser_contract import ParserContract

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for
from rechunk.sources.base import locate

pypandoc = pytest.importorskip("pypandoc")

HANDBOOK = """---
title: The Sync Handbook
---

# Running it

The job runs `rechunk sync` on the docs folder every night at two, and a run that
finds nothing new embeds nothing.

- `--prune` removes documents whose files are gone
- `--dry-run` plans without writing

# When it fails

The summary names every file it skipped, and why.

| Row | Meaning |
|---|---|
| skipped | the file could not be read |

{incidents}
"""


def _incidents(sections: int, edit: str = "") -> str:
    """Chapters of incident notes, each of eight paragraphs; ``edit`` is appended to one
    paragraph of the third."""
    out = []
    for s in range(sections):
        out.append(f"# Incident kind {s}")
        for k in range(8):
            note = edit if (s, k) == (2, 5) else ""
            out.append(
                f"When alert {s}.{k} fires, check the summary for skipped files, then the "
                f"stale check, then the health endpoint of store number {k}.{note}"
            )
    return "\n\n".join(out)


def _epub(markdown: str, writer: str = "epub3") -> bytes:
    """The book pandoc writes from ``markdown``."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "book.epub"
        pypandoc.convert_text(markdown, writer, format="markdown", outputfile=str(path))
        return path.read_bytes()


def _rewritten(book: bytes, add: dict[str, bytes]) -> bytes:
    """The same package with parts added (or replaced)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(book)) as old, zipfile.ZipFile(out, "w") as new:
        for info in old.infolist():
            if info.filename not in add:
                new.writestr(info, old.read(info))
        for name, data in add.items():
            new.writestr(name, data)
    return out.getvalue()


def _encryption(algorithm: str, uri: str) -> bytes:
    return (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        f'<enc:EncryptionMethod Algorithm="{algorithm}"/>'
        f'<enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    ).encode()


@pytest.fixture(scope="module")
def book() -> bytes:
    return _epub(HANDBOOK.format(incidents=_incidents(3)))


def test_the_chapters_are_read_in_order_and_cited(book: bytes) -> None:
    (doc,) = parser_for("epub").parse(book, ParseOptions())
    assert doc.metadata == {"title": "The Sync Handbook"}
    assert doc.text.startswith("# The Sync Handbook\n\n# Running it\n\nThe job runs rechunk")
    assert "- --prune removes documents whose files are gone\n- --dry-run" in doc.text
    assert "| skipped | the file could not be read |" in doc.text
    assert doc.text.index("# When it fails") < doc.text.index("# Incident kind 0")
    # the navigation document (the table of contents) is not text
    assert doc.text.count("Running it") == 1
    at = doc.text.index("The summary names")
    assert locate(doc, at, at + 10)["chapters"] == [3, 3]  # title page, then a chapter each
    assert locate(doc, at, at + 10)["section"] == ["When it fails"]


def test_a_chapter_with_a_stray_byte_and_no_declaration_is_read_not_the_book_skipped(
    book: bytes,
) -> None:
    """A hand-made chapter that declares no encoding and holds one cp1252 byte: XHTML
    that declares nothing is UTF-8, so the byte reads as U+FFFD and the document says
    so; the book is not skipped (an HTML page that declares nothing is)."""
    with zipfile.ZipFile(io.BytesIO(book)) as zf:
        chapter = next(n for n in zf.namelist() if n.endswith("ch002.xhtml"))
    page = (
        b'<html xmlns="http://www.w3.org/1999/xhtml"><body>'
        b"<p>Chapter two, caf\xe9 au lait, and more text.</p></body></html>"
    )
    (doc,) = parser_for("epub").parse(_rewritten(book, {chapter: page}), ParseOptions())
    assert "caf\ufffd au lait" in doc.text and doc.metadata["invalid_bytes"] is True
    assert "Running it" in doc.text  # the other chapters are there
    named = ParseOptions(encoding="cp1252")  # the encoding named still reads it
    (doc,) = parser_for("epub").parse(_rewritten(book, {chapter: page}), named)
    assert "caf\u00e9 au lait" in doc.text and "invalid_bytes" not in doc.metadata


def test_an_epub2_book_reads_as_the_epub3_one(book: bytes) -> None:
    markdown = HANDBOOK.format(incidents=_incidents(3))
    (epub2,) = parser_for("epub").parse(_epub(markdown, "epub2"), ParseOptions())
    (epub3,) = parser_for("epub").parse(book, ParseOptions())
    assert epub2.text == epub3.text


def test_drm_is_refused_and_font_obfuscation_is_read(book: bytes) -> None:
    drm = _rewritten(
        book,
        {
            "META-INF/encryption.xml": _encryption(
                "http://www.w3.org/2001/04/xmlenc#aes128-cbc", "EPUB/text/ch001.xhtml"
            )
        },
    )
    with pytest.raises(ParseError, match="encrypted: the book's text is protected"):
        parser_for("epub").parse(drm, ParseOptions())
    fonts = _rewritten(
        book,
        {
            "META-INF/encryption.xml": _encryption(
                "http://www.idpf.org/2008/embedding", "EPUB/fonts/serif.otf"
            )
        },
    )
    assert parser_for("epub").parse(fonts, ParseOptions())[0].text == (
        parser_for("epub").parse(book, ParseOptions())[0].text
    )


def test_a_zip_that_is_no_epub_and_a_book_without_text_are_parse_errors(book: bytes) -> None:
    plain = io.BytesIO()
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("readme.txt", "not a book")
    with pytest.raises(ParseError, match=r"no META-INF/container\.xml"):
        parser_for("epub").parse(plain.getvalue(), ParseOptions())
    with zipfile.ZipFile(io.BytesIO(book)) as zf:
        chapters = [n for n in zf.namelist() if n.startswith("EPUB/text/")]
    empty = _rewritten(book, {name: b"<html><body></body></html>" for name in chapters})
    with pytest.raises(ParseError, match="no text"):
        parser_for("epub").parse(empty, ParseOptions())


class TestEpubContract(ParserContract):
    fmt = "epub"

    def samples(self) -> list[tuple[str, bytes]]:
        markdown = HANDBOOK.format(incidents=_incidents(3))
        return [("handbook.epub", _epub(markdown)), ("epub2.epub", _epub(markdown, "epub2"))]


def test_a_book_syncs_and_an_edit_in_one_chapter_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    books = tmp_path / "books"
    books.mkdir()
    (books / "handbook.epub").write_bytes(_epub(HANDBOOK.format(incidents=_incidents(6))))
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "books")
    assert code == 0 and report["documents"]["new"] == 1, report
    assert report["unsupported_files"] == {}
    edited = HANDBOOK.format(incidents=_incidents(6, " Page the owner at night."))
    (books / "handbook.epub").write_bytes(_epub(edited))
    code, report = run_json(capsys, "sync", "books")
    assert code == 0 and report["documents"]["changed"] == 1
    (doc,) = report["per_document"]
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
    assert parse_file(books / "handbook.epub")[0].metadata["title"] == "The Sync Handbook"
