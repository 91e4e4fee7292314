"""ODP (OpenDocument presentations): each slide's title, its shapes in order and its
notes, as the PPTX parser writes a deck; the page furniture and unfilled placeholders
left out; the parser contract; and a folder synced by the real CLI, an inserted slide
re-embedding only around it. Files are written by odfdo (an OpenDocument library) from
the project's own text."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import sync_an_insert
from parser_contract import ParserContract

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for

odfdo = pytest.importorskip("odfdo")

TALKS = [
    ("Why sync", "Every edit reaches the index through the chunker."),
    ("What it costs", "A sync embeds only the inputs that are new byte for byte."),
    ("On call", "Read the stale check first, then the skipped rows."),
]
SIZE = ("20cm", "3cm")


def _element(xml: str) -> Any:
    return odfdo.Element.from_tag(xml)


def _frame(text: str | list[str], kind: str | None = None, y: int = 1) -> Any:
    return odfdo.Frame.text_frame(
        text, size=SIZE, position=("1cm", f"{y}cm"), presentation_class=kind
    )


def deck(talks: list[tuple[str, str]] = TALKS) -> bytes:
    """A deck as Impress would hold it: every construct the parser reads or leaves out."""
    from odfdo import Document, DrawPage

    doc = Document("presentation")
    doc.meta.set_title("The sync job")
    doc.insert_style(
        _element(
            '<text:list-style style:name="Steps">'
            '<text:list-level-style-number text:level="1" style:num-format="1"/>'
            "</text:list-style>"
        ),
        automatic=True,
    )
    body = doc.body
    body.clear()
    opening = DrawPage("p1", name="Opening")
    opening.append(_frame("Syncing a knowledge base", "title"))
    opening.append(_frame("rechunk, for the people on call", "subtitle", 5))
    # the furniture: the footer, date and slide number, and an unfilled placeholder
    opening.append(_frame("Company confidential", "footer", 18))
    opening.append(_frame("2026-12-06", "date-time", 18))
    opening.append(_frame("1", "page-number", 18))
    opening.append(
        _element(
            "<draw:frame presentation:class='outline' presentation:placeholder='true'>"
            "<draw:text-box/></draw:frame>"
        )
    )
    body.append(opening)
    for number, (title, text) in enumerate(talks, start=2):
        page = DrawPage(f"p{number}", name=title)
        page.append(_frame(title, "title"))
        page.append(_frame(text, "outline", 5))
        body.append(page)
    details = DrawPage("details", name="Details")
    details.append(_frame("Steps", "title"))
    details.append(
        _element(
            "<draw:frame presentation:class='outline'><draw:text-box>"
            "<text:list text:style-name='Steps'><text:list-item><text:p>check the stale check"
            "</text:p><text:list><text:list-item><text:p>its verdict</text:p></text:list-item>"
            "</text:list></text:list-item><text:list-item><text:p>read the skipped rows</text:p>"
            "</text:list-item></text:list></draw:text-box></draw:frame>"
        )
    )
    table = odfdo.Table("Options")
    table.set_values([["Option", "Meaning"], ["--prune", "remove what is gone"]])
    frame = odfdo.Frame(size=SIZE, position=("1cm", "9cm"))
    frame.append(table)
    details.append(frame)
    details.append(
        _element(
            "<draw:g><draw:custom-shape><text:p>Shape words.</text:p></draw:custom-shape>"
            "<draw:frame><draw:text-box><text:p>Grouped words, slide "
            "<text:page-number>4</text:page-number>.</text:p></draw:text-box></draw:frame>"
            "</draw:g>"
        )
    )
    details.append(
        _element(
            "<presentation:notes><draw:page-thumbnail draw:page-number='5' "
            "presentation:class='page'/><draw:frame presentation:class='notes'>"
            "<draw:text-box><text:p>Say why the order matters.</text:p>"
            "<text:p>Then take questions.</text:p></draw:text-box></draw:frame>"
            "</presentation:notes>"
        )
    )
    body.append(details)
    untitled = DrawPage("untitled", name="Untitled")
    untitled.append(_frame("A slide with no title.", None, 3))
    body.append(untitled)
    body.append(DrawPage("blank", name="Blank"))  # a slide with no text at all
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


EXPECTED = """# Syncing a knowledge base

rechunk, for the people on call

# Why sync

Every edit reaches the index through the chunker.

# What it costs

A sync embeds only the inputs that are new byte for byte.

# On call

Read the stale check first, then the skipped rows.

# Steps

1. check the stale check
  - its verdict
2. read the skipped rows

| Option | Meaning |
| --prune | remove what is gone |

Shape words.

Grouped words, slide .

> Notes: Say why the order matters.

> Then take questions.

# (untitled slide)

A slide with no title.
"""


def parse(data: bytes) -> Any:
    (doc,) = parser_for("odp").parse(data, ParseOptions())
    return doc


def test_the_deck_reads_as_impress_shows_it() -> None:
    doc = parse(deck())
    assert doc.text == EXPECTED
    assert doc.metadata == {"title": "The sync job"}
    for left_out in ("confidential", "2026-12-06", "Blank"):
        assert left_out not in doc.text
    slides = {doc.text[b.start : b.end]: b.locator for b in doc.blocks}
    assert slides["# Syncing a knowledge base"] == {"slide": 1}
    assert slides["> Then take questions."] == {"slide": 5}
    assert slides["A slide with no title."] == {"slide": 6}


def test_an_inserted_slide_is_its_own_section() -> None:
    before = parse(deck())
    inserted = ("Inserted", "A slide inserted by a later revision.")
    after = parse(deck([*TALKS[:1], inserted, *TALKS[1:]]))
    old = [before.text[b.start : b.end] for b in before.blocks]
    new = [after.text[b.start : b.end] for b in after.blocks]
    new.remove("# Inserted")
    new.remove("A slide inserted by a later revision.")
    assert new == old


def test_what_is_not_an_opendocument_presentation_is_a_parse_error() -> None:
    sheet = io.BytesIO()
    odfdo.Document("spreadsheet").save(sheet)
    with pytest.raises(ParseError, match="not an OpenDocument presentation"):
        parse(sheet.getvalue())
    with pytest.raises(ParseError, match="legacy binary PowerPoint"):
        parse(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    empty = io.BytesIO()
    blank = odfdo.Document("presentation")
    blank.body.clear()
    blank.body.append(odfdo.DrawPage("p1"))
    blank.save(empty)
    with pytest.raises(ParseError, match="no text"):
        parse(empty.getvalue())


class TestOdpContract(ParserContract):
    fmt = "odp"

    def samples(self) -> list[tuple[str, bytes]]:
        return [("talk.odp", deck()), ("short.odp", deck(TALKS[:1]))]


def test_a_folder_with_an_odp_syncs_and_an_inserted_slide_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def talk(paragraphs: list[str]) -> bytes:  # a slide per paragraph, titled by its words
        return deck([(" ".join(p.split()[:3]), p) for p in paragraphs])

    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    doc = sync_an_insert(capsys, "docs", "talk.odp", talk, at=4)
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
    assert parse_file(Path("docs/talk.odp"))[0].metadata["title"] == "The sync job"
