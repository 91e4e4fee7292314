"""ODT (OpenDocument text): the body as Writer shows it, tracked changes accepted, the
furniture (contents, footnotes, comments, page fields) left out; the parser contract;
and a folder synced by the real CLI, an inserted paragraph re-embedding only around it.
Files are written by odfdo (an OpenDocument library) from the project's own text."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from cli_helpers import sync_an_insert
from packages import rewritten
from parser_contract import ParserContract

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for
from rechunk.sources.files import read_documents

odfdo = pytest.importorskip("odfdo")

PARAGRAPHS = [
    "The nightly job syncs the shop's guides into the search index.",
    "It embeds only the inputs that are new byte for byte and removes stale chunks.",
    "Its summary names every file it skipped, with the reason, and what it cost.",
    "A file that is not UTF-8 is read once its encoding is named.",
    "On call, read the stale check first: it says whether the collection is exact.",
    "Then read the skipped rows, and only then the store's own health endpoint.",
]


def _element(xml: str) -> Any:
    return odfdo.Element.from_tag(xml)


def guide(paragraphs: list[str] = PARAGRAPHS) -> bytes:
    """The on-call guide as Writer would hold it: every construct the parser reads or
    leaves out."""
    from odfdo import TOC, Document, Header, List, Paragraph, Table

    doc = Document("text")
    doc.meta.set_title("Operating the sync job")
    doc.insert_style(
        _element(
            '<text:list-style style:name="Steps">'
            '<text:list-level-style-number text:level="1" style:num-format="1"/>'
            '<text:list-level-style-bullet text:level="2" text:bullet-char="*"/>'
            "</text:list-style>"
        ),
        automatic=True,
    )
    body = doc.body
    body.clear()
    body.append(TOC("Contents"))
    body.append(Paragraph("Operating the sync job", style="Title"))
    body.append(Header(1, "Running it"))
    for text in paragraphs[:3]:
        body.append(Paragraph(text))
    body.append(
        _element(
            "<text:p>The job runs at<text:s text:c='2'/>two<text:tab/>every night"
            "<text:note text:note-class='footnote' text:id='n1'><text:note-citation>1"
            "</text:note-citation><text:note-body><text:p>a footnote</text:p></text:note-body>"
            "</text:note>, page <text:page-number>7</text:page-number>."
            "<office:annotation><dc:creator>Ada</dc:creator><text:p>a comment</text:p>"
            "</office:annotation></text:p>"
        )
    )
    body.append(Paragraph("rechunk sync docs --prune", style="Preformatted_20_Text"))
    body.append(Paragraph("rechunk status", style="Preformatted_20_Text"))
    body.append(Paragraph("Keep the index honest.", style="Quotations"))
    body.append(Header(2, "Steps"))
    steps = List(["check the stale check", "read the skipped rows"], style="Steps")
    steps.get_item(position=0).append(List(["its verdict", "its count"]))
    body.append(steps)
    table = Table("Options", width=2, height=3)
    table.set_values([["Option", "Meaning"], ["--prune", "remove what is gone"],
                      ["--encoding", "read legacy files"]])  # fmt: skip
    body.append(table)
    body.append(
        _element(
            "<text:section text:name='More'><text:p>A section's paragraph.</text:p>"
            "</text:section>"
        )
    )
    body.append(
        _element(
            "<text:p>Anchor paragraph.<draw:frame draw:name='box' text:anchor-type='paragraph'>"
            "<draw:text-box><text:p>Boxed words.</text:p></draw:text-box></draw:frame></text:p>"
        )
    )
    body.append(
        _element(
            "<text:tracked-changes><text:changed-region text:id='c1'><text:deletion>"
            "<office:change-info><dc:creator>Ada</dc:creator>"
            "<dc:date>2026-11-30T10:00:00</dc:date></office:change-info>"
            "<text:p>deleted words</text:p></text:deletion></text:changed-region>"
            "<text:changed-region text:id='c2'><text:insertion><office:change-info>"
            "<dc:creator>Ada</dc:creator><dc:date>2026-11-30T10:00:00</dc:date>"
            "</office:change-info></text:insertion></text:changed-region></text:tracked-changes>"
        )
    )
    body.append(
        _element(
            "<text:p>Kept <text:change text:change-id='c1'/>and <text:change-start "
            "text:change-id='c2'/>inserted<text:change-end text:change-id='c2'/> text.</text:p>"
        )
    )
    body.append(Header(1, "When it fails"))
    for text in paragraphs[3:]:
        body.append(Paragraph(text))
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


EXPECTED = f"""# Operating the sync job

# Running it

{PARAGRAPHS[0]}

{PARAGRAPHS[1]}

{PARAGRAPHS[2]}

The job runs at two every night, page .

```
rechunk sync docs --prune
rechunk status
```

> Keep the index honest.

## Steps

1. check the stale check
  - its verdict
  - its count
2. read the skipped rows

| Option | Meaning |
| --prune | remove what is gone |
| --encoding | read legacy files |

A section's paragraph.

Anchor paragraph.

Boxed words.

Kept and inserted text.

# When it fails

{PARAGRAPHS[3]}

{PARAGRAPHS[4]}

{PARAGRAPHS[5]}
"""


def parse(data: bytes) -> Any:
    (doc,) = parser_for("odt").parse(data, ParseOptions())
    return doc


def test_the_guide_reads_as_writer_shows_it() -> None:
    doc = parse(guide())
    assert doc.text == EXPECTED
    assert doc.metadata == {"title": "Operating the sync job"}
    for left_out in ("Contents", "a footnote", "a comment", "deleted words", "7"):
        assert left_out not in doc.text


def test_an_inserted_paragraph_is_one_new_block() -> None:
    before = parse(guide())
    edited = [*PARAGRAPHS[:4], "A paragraph inserted by a later revision.", *PARAGRAPHS[4:]]
    after = parse(guide(edited))
    old = [before.text[b.start : b.end] for b in before.blocks]
    new = [after.text[b.start : b.end] for b in after.blocks]
    new.remove("A paragraph inserted by a later revision.")
    assert new == old


def test_what_is_not_an_opendocument_text_is_a_parse_error() -> None:
    docx = pytest.importorskip("docx")
    word = io.BytesIO()
    docx.Document().save(word)
    with pytest.raises(ParseError, match="not an OpenDocument text"):
        parse(word.getvalue())
    sheet = rewritten(guide(), {"mimetype": b"application/vnd.oasis.opendocument.spreadsheet"})
    with pytest.raises(ParseError, match="not an OpenDocument text"):
        parse(sheet)
    # what the part says is not quoted unless it is an OpenDocument type: it is any text
    for written in (b"a private note, not a media type", b"private.note/keep-quiet"):
        with pytest.raises(ParseError) as err:
            parse(rewritten(guide(), {"mimetype": written}))
        assert str(err.value).endswith("its mimetype part names no OpenDocument type")
    # a password-protected package: its manifest gives content.xml encryption data
    ns = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
    ET.register_namespace("manifest", ns)
    manifest = ET.fromstring(zipfile.ZipFile(io.BytesIO(guide())).read("META-INF/manifest.xml"))
    for entry in manifest:
        if entry.get(f"{{{ns}}}full-path") == "content.xml":
            ET.SubElement(entry, f"{{{ns}}}encryption-data", {f"{{{ns}}}checksum": "AAAA"})
    locked = ET.tostring(manifest, xml_declaration=True, encoding="utf-8")
    with pytest.raises(ParseError, match="encrypted"):
        parse(rewritten(guide(), {"META-INF/manifest.xml": locked}))
    with pytest.raises(ParseError, match="legacy binary Word"):
        parse(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))


class TestOdtContract(ParserContract):
    fmt = "odt"

    def samples(self) -> list[tuple[str, bytes]]:
        return [("guide.odt", guide()), ("short.odt", guide(PARAGRAPHS[:4]))]


def test_a_folder_with_an_odt_syncs_and_an_insert_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    doc = sync_an_insert(capsys, "docs", "guide.odt", guide)
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
    assert parse_file(Path("docs/guide.odt"))[0].metadata["title"] == "Operating the sync job"


def test_a_package_nested_deeper_than_the_stack_is_skipped_not_a_crash(tmp_path: Path) -> None:
    """Both XML walkers recurse: 5,000 nested spans (ODT) or content controls (DOCX) were
    a RecursionError that ended the whole sync; now they are a skipped file's reason."""
    docx = pytest.importorskip("docx")
    odt = guide(PARAGRAPHS[:1])
    content = zipfile.ZipFile(io.BytesIO(odt)).read("content.xml").decode()
    deep = "<text:span>" * 5000 + "deep" + "</text:span>" * 5000
    content = content.replace(PARAGRAPHS[0], deep)
    (tmp_path / "deep.odt").write_bytes(rewritten(odt, {"content.xml": content.encode()}))
    word = io.BytesIO()
    docx.Document().save(word)
    part = zipfile.ZipFile(io.BytesIO(word.getvalue())).read("word/document.xml").decode()
    nested = "<w:sdt><w:sdtContent>" * 5000 + "<w:p><w:r><w:t>deep</w:t></w:r></w:p>" + (
        "</w:sdtContent></w:sdt>" * 5000
    )
    part = part.replace("<w:body>", "<w:body>" + nested, 1)
    word_deep = rewritten(word.getvalue(), {"word/document.xml": part.encode()})
    (tmp_path / "deep.docx").write_bytes(word_deep)
    (tmp_path / "fine.odt").write_bytes(guide())
    for name in ("deep.odt", "deep.docx"):
        with pytest.raises(ParseError, match="nested too deeply"):
            parse_file(tmp_path / name)
    files = read_documents([tmp_path])
    assert [d.doc_id for d in files.documents] == ["fine.odt"]
    assert sorted(files.skipped) == [
        ("deep.docx", "corrupt: nested too deeply to read"),
        ("deep.odt", "corrupt: nested too deeply to read"),
    ]
