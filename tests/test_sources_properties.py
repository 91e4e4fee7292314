"""Two properties every parser keeps, on files real writers make from generated text:

* **parse twice, same documents**: the same bytes give the same text, blocks, locators,
  parser version and metadata on every parse;
* **insert a paragraph**: a file written again with one more paragraph (slide text, row,
  cell, record) parses into the same blocks as before plus the inserted one: every other
  block's text is unchanged, so the chunks around it can be reused.

Writers: python-docx, odfdo (ODT, ODS, ODP), python-pptx, openpyxl, reportlab (PDF), pandoc
(EPUB, RTF), the standard library's ``email`` and ``csv`` and ``json`` packages,
nbformat-shaped JSON, and plain strings for Markdown, text, reStructuredText, AsciiDoc and
HTML. (Format-specific inserts
on richer files are in the per-format test modules; this module puts every format under
the same two rules.)
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from parser_contract import check_parsed, fingerprint

from rechunk.sources import Parsed, ParseOptions, parser_for
from rechunk.sources.base import clean_inline

OPTIONS = ParseOptions(id_field="id")

_WORDS = st.sampled_from(
    ["the", "owl", "hawk", "heron", "nest", "reed", "dawn", "night", "counts", "river",
     "12", "of", "and", "is", "wetland", "中文", "段落", "河流"]
)  # fmt: skip
_SENTENCE = st.lists(_WORDS, min_size=1, max_size=10).map(
    lambda ws: " ".join(ws).capitalize() + "."
)
# A PDF paragraph: several lines of Latin words. A page of one-line paragraphs, evenly
# spaced, gives no frame edge and no gap to tell its paragraphs apart (they come back as
# one); and reportlab wraps lines at spaces only, never between two CJK characters as a
# CJK typesetter does, so a CJK word it carries to the next line leaves a gap the parser
# reads as a paragraph's end (CJK PDFs: test_sources_pdf and the shared renders).
_LATIN = _WORDS.filter(lambda w: w.isascii())
_LONG = st.lists(
    st.lists(_LATIN, min_size=4, max_size=10).map(lambda ws: " ".join(ws).capitalize() + "."),
    min_size=6,  # over 100 characters: two lines or more
    max_size=9,
).map(" ".join)


def _saved(document: Any) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


# -- writers: paragraphs -> bytes ----------------------------------------------------------


def _plain(paragraphs: Sequence[str]) -> bytes:
    return ("\n\n".join(paragraphs) + "\n").encode()


def _asciidoc(paragraphs: Sequence[str]) -> bytes:
    return ("= Survey\n:toc:\n\n" + "\n\n".join(paragraphs) + "\n").encode()


def _epub(paragraphs: Sequence[str]) -> bytes:
    pypandoc = pytest.importorskip("pypandoc")
    markdown = "---\ntitle: Survey\n---\n\n" + "\n\n".join(paragraphs) + "\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "survey.epub"
        pypandoc.convert_text(markdown, "epub3", format="markdown", outputfile=str(path))
        return path.read_bytes()


def _org(paragraphs: Sequence[str]) -> bytes:
    return ("#+TITLE: Survey\n#+OPTIONS: toc:nil\n\n" + "\n\n".join(paragraphs) + "\n").encode()


def _latex(paragraphs: Sequence[str]) -> bytes:
    return (
        "\\documentclass{article}\n\\title{Survey}\n\\begin{document}\n\\maketitle\n\n"
        + "\n\n".join(paragraphs)
        + "\n\\end{document}\n"
    ).encode()


def _rtf(paragraphs: Sequence[str]) -> bytes:
    pypandoc = pytest.importorskip("pypandoc")
    markdown = "# Survey\n\n" + "\n\n".join(paragraphs)
    rtf = pypandoc.convert_text(
        markdown, "rtf", format="markdown-smart-raw_tex", extra_args=["--standalone"]
    )
    return str(rtf).encode("ascii")


def _html(paragraphs: Sequence[str]) -> bytes:
    body = "".join(f"<p>{p}</p>\n" for p in paragraphs)
    return (
        "<!doctype html><html><head><title>Survey</title></head><body>"
        f"<nav>Home | Help</nav><main><h1>Survey</h1>\n{body}</main>"
        "<footer>Site footer</footer></body></html>"
    ).encode()


def _docx(paragraphs: Sequence[str]) -> bytes:
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_heading("Survey", 1)
    for p in paragraphs:
        document.add_paragraph(p)
    return _saved(document)


def _odt(paragraphs: Sequence[str]) -> bytes:
    odfdo = pytest.importorskip("odfdo")
    document = odfdo.Document("text")
    document.body.clear()
    document.body.append(odfdo.Header(1, "Survey"))
    for p in paragraphs:
        document.body.append(odfdo.Paragraph(p))
    return _saved(document)


def _pptx(paragraphs: Sequence[str]) -> bytes:
    pptx = pytest.importorskip("pptx")
    from pptx.util import Inches

    deck = pptx.Presentation()
    for i, p in enumerate(paragraphs):  # a slide per paragraph: its title, then its text
        slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
        slide.shapes.title.text = f"Slide {i}"  # the same title whatever the text
        box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(3))
        box.text_frame.text = p
    return _saved(deck)


def _odp(paragraphs: Sequence[str]) -> bytes:
    odfdo = pytest.importorskip("odfdo")
    document = odfdo.Document("presentation")
    document.body.clear()
    for i, p in enumerate(paragraphs):  # a slide per paragraph: its title, then its text
        slide = odfdo.DrawPage(f"s{i}")
        for text, kind, y in ((f"Slide {i}", "title", "1cm"), (p, "outline", "4cm")):
            slide.append(
                odfdo.Frame.text_frame(
                    text, size=("20cm", "3cm"), position=("1cm", y), presentation_class=kind
                )
            )
        document.body.append(slide)
    return _saved(document)


def _xlsx(paragraphs: Sequence[str]) -> bytes:
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Notes"
    sheet.append(["Note", "Length"])
    for p in paragraphs:
        sheet.append([p, len(p)])
    return _saved(book)


def _ods(paragraphs: Sequence[str]) -> bytes:
    odfdo = pytest.importorskip("odfdo")
    document = odfdo.Document("spreadsheet")
    document.body.clear()
    sheet = odfdo.Table("Notes")
    sheet.set_values([["Note", "Length"], *([p, len(p)] for p in paragraphs)])
    document.body.append(sheet)
    return _saved(document)


def _csv(paragraphs: Sequence[str]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["note", "length"])
    for p in paragraphs:
        writer.writerow([p, len(p)])
    return out.getvalue().encode()


def _ipynb(paragraphs: Sequence[str]) -> bytes:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": [p]}
        if len(p) % 2 == 0  # by the text, so an insert changes no other cell's type
        else {"cell_type": "code", "metadata": {}, "execution_count": None, "source": [f"x = {p!r}"],
              "outputs": [{"output_type": "stream", "name": "stdout", "text": ["dropped\n"]}]}
        for i, p in enumerate(paragraphs)
    ]  # fmt: skip
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "language": "python"}},
        "cells": cells,
    }
    return json.dumps(notebook).encode()


def _eml(paragraphs: Sequence[str]) -> bytes:
    msg = EmailMessage()
    msg["Subject"] = "Survey notes"
    msg["From"] = "Alice <alice@example.com>"
    msg["To"] = "bob@example.com"
    msg["Date"] = "Tue, 14 Nov 2023 22:13:20 +0100"
    msg.set_content("\n\n".join(paragraphs) + "\n")
    return bytes(msg)


def _pdf(paragraphs: Sequence[str]) -> bytes:
    pytest.importorskip("reportlab")
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    style = getSampleStyleSheet()["BodyText"]
    out = io.BytesIO()
    SimpleDocTemplate(out, pagesize=A5, invariant=1).build(
        [Paragraph(p, style) for p in paragraphs]
    )
    return out.getvalue()


WRITERS: dict[str, Callable[[Sequence[str]], bytes]] = {
    "text": _plain,
    "markdown": _plain,
    "rst": _plain,
    "asciidoc": _asciidoc,
    "latex": _latex,
    "org": _org,
    "html": _html,
    "docx": _docx,
    "odt": _odt,
    "epub": _epub,
    "rtf": _rtf,
    "pptx": _pptx,
    "odp": _odp,
    "xlsx": _xlsx,
    "ods": _ods,
    "csv": _csv,
    "ipynb": _ipynb,
    "eml": _eml,
    "pdf": _pdf,
}
# slower writers: fewer examples
HEAVY = {"pdf", "docx", "odt", "pptx", "odp", "xlsx", "ods", "epub", "rtf"}


def _parse(fmt: str, data: bytes) -> list[Parsed]:
    docs = parser_for(fmt).parse(data, OPTIONS)
    for doc in docs:
        check_parsed(doc)
    return docs


def _blocks(docs: list[Parsed]) -> list[str]:
    return [doc.text[b.start : b.end] for doc in docs for b in doc.blocks]


def _check(fmt: str, paragraphs: list[str], inserted: str, at: int) -> None:
    before = WRITERS[fmt](paragraphs)
    first = _parse(fmt, before)
    assert fingerprint(first) == fingerprint(_parse(fmt, before))  # parse twice
    assert [d.text for d in first] == [d.text for d in _parse(fmt, before)]
    after = _blocks(_parse(fmt, WRITERS[fmt]([*paragraphs[:at], inserted, *paragraphs[at:]])))
    old = _blocks(first)
    # the inserted paragraph's block(s) are new; every other block is as it was
    # (running text is cleaned: no space is left between two CJK characters)
    forms = (inserted, clean_inline(inserted), repr(inserted))
    new_only = [b for b in after if any(form in b for form in forms)]
    assert new_only, (fmt, inserted, after)
    rest = list(after)
    for block in new_only:
        rest.remove(block)
    # the slide title of the inserted item comes along with it
    decks = ("pptx", "odp")
    extra = [b for b in rest if b not in old]
    assert len(extra) <= (1 if fmt in decks else 0), (fmt, extra)
    for block in extra:
        rest.remove(block)
    if fmt in decks:  # slide titles repeat ("Slide i"): compare the text blocks in order
        assert [b for b in rest if not b.startswith("#")] == [
            b for b in old if not b.startswith("#")
        ]
    else:
        assert rest == old, fmt


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_parse_twice_and_insert_a_paragraph(fmt: str) -> None:
    examples = 5 if fmt in HEAVY else 25
    paragraph = _LONG if fmt == "pdf" else _SENTENCE

    @settings(
        max_examples=examples,
        deadline=None,
        # a slow writer: report a failing example as found, without minutes of shrinking
        phases=[Phase.explicit, Phase.generate] if fmt in HEAVY else list(Phase),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        paragraphs=st.lists(paragraph, min_size=1, max_size=6),
        inserted=paragraph.map(lambda s: "Inserted " + s),
        data=st.data(),
    )
    def prop(paragraphs: list[str], inserted: str, data: st.DataObject) -> None:
        _check(fmt, paragraphs, inserted, data.draw(st.integers(0, len(paragraphs))))

    prop()


_RECORD = st.fixed_dictionaries(
    {"title": _SENTENCE, "body": _SENTENCE, "n": st.integers(0, 999)},
    optional={"tags": st.lists(_WORDS, max_size=3)},
)


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
@settings(max_examples=25, deadline=None)
@given(records=st.lists(_RECORD, min_size=1, max_size=6), extra=_RECORD, data=st.data())
def test_records_parse_twice_and_insert_a_record(
    fmt: str, records: list[dict[str, Any]], extra: dict[str, Any], data: st.DataObject
) -> None:
    def write(rows: list[dict[str, Any]]) -> bytes:
        if fmt == "json":
            return json.dumps(rows).encode()
        return "".join(json.dumps(r) + "\n" for r in rows).encode()

    rows = [{"id": f"r{i}", **r} for i, r in enumerate(records)]
    new_row = {"id": "inserted", **extra}
    at = data.draw(st.integers(0, len(rows)))
    before = write(rows)
    first = _parse(fmt, before)
    assert fingerprint(first) == fingerprint(_parse(fmt, before))
    after = _parse(fmt, write([*rows[:at], new_row, *rows[at:]]))
    by_part = {d.part: d for d in after}
    assert set(by_part) == {d.part for d in first} | {"inserted"}
    for doc in first:  # every other record: the same text and blocks (its line may move)
        moved = by_part[doc.part]
        assert moved.text == doc.text
        assert [(b.kind, b.start, b.end) for b in moved.blocks] == [
            (b.kind, b.start, b.end) for b in doc.blocks
        ]
