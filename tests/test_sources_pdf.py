"""The PDF parser (PDFium): on PDFs reportlab writes here, and on the shared WeasyPrint
renders of the dev revision pairs (running headers, page numbers, justified and
hyphenated text, Chinese fonts), skipped with a reason when those are absent."""

from __future__ import annotations

import difflib
import io
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from parser_contract import ParserContract, check_parsed

from rechunk.sources import Parsed, ParseError, ParseOptions, locate, parse_file, parser_for

pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")

from reportlab.lib.enums import TA_JUSTIFY, TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfgen import canvas
from reportlab.platypus import (
    BaseDocTemplate,
    Frame,
    PageTemplate,
    Paragraph,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "revisions"
RENDERS = SHARED / "formats-dev"
CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
SENTENCE_END = re.compile(r"[.!?。！？…:;：；][\"'”’)\]）」』*_`]*$")

WORDS = re.findall(
    r"\w+",
    "the of and a to in is it that for on with as by this be are from at or an was "
    "which data model layer signal network chunk revision parser source page column "
    "stable document reader index vector token embedding system method result value "
    "process structure heading paragraph version change edit text river mountain "
    "garden library window morning evening question answer journey harbour lantern ",
)


# -- PDFs written with reportlab ------------------------------------------------------------


def _style(
    *, justify: bool = True, indent: bool = False, font: str = "Times-Roman"
) -> ParagraphStyle:
    return ParagraphStyle(
        "body",
        fontName=font,
        fontSize=11,
        leading=14,
        alignment=TA_JUSTIFY if justify else TA_LEFT,
        spaceAfter=0 if indent else 7,
        firstLineIndent=16 if indent else 0,
        wordWrap="CJK" if font == "STSong-Light" else None,
    )


def render(
    paragraphs: Sequence[str],
    *,
    columns: int = 1,
    header: str | Callable[[int], str] | None = "Quarterly Field Notes",
    justify: bool = True,
    indent: bool = False,
    headings: dict[int, str] | None = None,
    font: str = "Times-Roman",
    title: str | None = None,
    encrypt: Any = None,
) -> bytes:
    """A PDF of ``paragraphs`` (headings before the paragraph of that index), with a
    running header on the left, the section on the right and a page number below."""
    out = io.BytesIO()
    width, height = A4
    margin = 20 * mm
    gap = 8 * mm
    frame_width = (width - 2 * margin - (columns - 1) * gap) / columns
    frames = [
        Frame(margin + i * (frame_width + gap), margin, frame_width, height - 2 * margin,
              leftPadding=0, rightPadding=0, topPadding=0, bottomPadding=0, id=f"c{i}")
        for i in range(columns)
    ]  # fmt: skip

    def furniture(canv: Any, doc: Any) -> None:
        if header is None:
            return
        canv.saveState()
        canv.setFont("Helvetica", 8)
        if callable(header):  # only the page's section, on the right
            canv.drawRightString(width - margin, height - 12 * mm, header(doc.page))
        else:
            canv.drawString(margin, height - 12 * mm, header)
            canv.drawRightString(width - margin, height - 12 * mm, "Section one")
        canv.drawCentredString(width / 2, 10 * mm, f"Page {doc.page}")
        canv.restoreState()

    doc = BaseDocTemplate(out, pagesize=A4, title=title or "", encrypt=encrypt,
                          pageTemplates=[PageTemplate("all", frames, onPage=furniture)])  # fmt: skip
    style = _style(justify=justify, indent=indent, font=font)
    heading = ParagraphStyle("h", fontName="Helvetica-Bold", fontSize=16, leading=20,
                             spaceBefore=8, spaceAfter=8)  # fmt: skip
    story = []
    for i, text in enumerate(paragraphs):
        if headings and i in headings:
            story.append(Paragraph(headings[i], heading))
        story.append(Paragraph(text, style))
    doc.build(story)
    return out.getvalue()


def sentence(rng_words: Sequence[str]) -> str:
    text = " ".join(rng_words)
    return text[:1].upper() + text[1:] + "."


def paragraphs_from(seed: int, count: int, *, sentences: int = 3) -> list[str]:
    """``count`` paragraphs of ``sentences`` sentences of pseudo-random words."""
    state = seed * 2654435761 % 2**32 or 1
    out = []
    for _ in range(count):
        parts = []
        for _ in range(sentences):
            state = state * 1103515245 + 12345 & 0x7FFFFFFF
            length = 6 + state % 14
            words = []
            for _ in range(length):
                state = state * 1103515245 + 12345 & 0x7FFFFFFF
                words.append(WORDS[state % len(WORDS)])
            parts.append(sentence(words))
        out.append(" ".join(parts))
    return out


def parse(data: bytes) -> Parsed:
    (doc,) = parser_for("pdf").parse(data, ParseOptions())
    check_parsed(doc)
    doc.text.encode("utf-8")  # no lone surrogate (PDFium keeps an emoji as two halves)
    return doc


def block_texts(doc: Parsed, kind: str | None = "paragraph") -> list[str]:
    return [doc.text[b.start : b.end] for b in doc.blocks if kind is None or b.kind == kind]


def typeset(paragraphs: Sequence[Sequence[str]], *, per_page: int = 40) -> bytes:
    """Paragraphs whose line breaks are given, set with canvas calls: every line but a
    paragraph's last justified to one width (word spacing), paragraphs apart by half a
    line, ``per_page`` lines a page, a running header and a page number."""
    out = io.BytesIO()
    canv = canvas.Canvas(out, pagesize=A4)
    width, left, top, leading, size = 420.0, 72.0, 760.0, 14.0, 11.0
    page, y, placed = 1, top, 0

    def furniture() -> None:
        canv.setFont("Helvetica", 8)
        canv.drawString(left, 810, "Typeset Test Document")
        canv.drawCentredString(297, 30, f"- {page} -")

    furniture()
    for lines in paragraphs:
        for i, line in enumerate(lines):
            if placed == per_page:
                canv.showPage()
                page, y, placed = page + 1, top, 0
                furniture()
            text = canv.beginText(left, y)
            text.setFont("Times-Roman", size)
            spaces = line.count(" ")
            if i < len(lines) - 1 and spaces:
                natural = canv.stringWidth(line, "Times-Roman", size)
                text.setWordSpace((width - natural) / spaces)
            text.textLine(line)
            canv.drawText(text)
            y -= leading
            placed += 1
        y -= leading / 2
    canv.showPage()
    canv.save()
    return out.getvalue()


def wrap(text: str, width: float = 420.0) -> list[str]:
    """``text`` broken into lines of at most ``width`` points of 11 pt Times."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    lines: list[str] = []
    for word in text.split():
        if lines and stringWidth(lines[-1] + " " + word, "Times-Roman", 11) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def hyphenated(text: str, pieces: Sequence[tuple[str, str]]) -> list[str]:
    """``text`` wrapped short, then line i ends with ``pieces[i][0]`` and line i + 1
    starts with ``pieces[i][1]`` (a word broken where we say)."""
    lines = wrap(text, 360)
    for i, (head, tail) in enumerate(pieces):
        lines[i] += " " + head
        lines[i + 1] = tail + " " + lines[i + 1]
    return lines


LONG = (
    "The compiler reads the source and the parser builds a tree of it, then the compiler "
    "checks it again with care, and a well-known pass folds the constants it finds; more "
    "words follow here for good measure, so that the paragraph runs to four lines or more "
    "of text in total, which the test needs."
)


# -- the contract --------------------------------------------------------------------------


class TestPdfContract(ParserContract):
    fmt = "pdf"

    def samples(self) -> list[tuple[str, bytes]]:
        found = [
            ("report.pdf", render(paragraphs_from(1, 30), title="Field notes")),
            ("columns.pdf", render(paragraphs_from(2, 30), columns=2, justify=False)),
            ("typeset.pdf", typeset([wrap(p) for p in paragraphs_from(3, 4)])),
        ]
        for pair in ("dev-en-010", "dev-zh-030"):
            path = RENDERS / pair / "old.pdf"
            if path.exists():
                found.append((f"{pair}.pdf", path.read_bytes()))
        return found


# -- PDFs written here ---------------------------------------------------------------------

VARIANTS = {
    "justified": {},
    "ragged": {"justify": False},
    "indented": {"indent": True},
    "ragged-indented": {"indent": True, "justify": False},
    "two-columns": {"columns": 2},
    "two-columns-ragged": {"columns": 2, "justify": False},
    "three-columns-indented": {"columns": 3, "indent": True},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_paragraphs_come_back_whole_in_reading_order(variant: str) -> None:
    """Paragraphs across line, column and page breaks, read column by column, and no
    running header, section title or page number among them."""
    source = paragraphs_from(7, 30, sentences=5)
    doc = parse(render(source, **VARIANTS[variant]))
    assert doc.metadata["pages"] >= 2
    assert block_texts(doc) == source
    assert block_texts(doc, None) == source
    for furniture in ("Quarterly", "Field Notes", "Section one"):
        assert furniture not in doc.text
    assert not re.search(r"Page \d", doc.text)
    # a paragraph's locator: its page, or its first and last page across a break
    pages = [b.locator["page"] for b in doc.blocks]
    assert any(isinstance(p, list) for p in pages) or "indent" in VARIANTS[variant]
    flat = [p if isinstance(p, int) else p[0] for p in pages]
    assert flat == sorted(flat) and flat[0] == 1 and max(flat) <= doc.metadata["pages"]


def paper(title: str, abstract: str, body: Sequence[str]) -> bytes:
    """A paper's layout: the title and abstract across the first page, two columns under
    them and on every later page, a page number at the foot."""
    from reportlab.platypus import FrameBreak, NextPageTemplate

    out = io.BytesIO()
    width, height = A4
    margin, gap, head = 20 * mm, 8 * mm, 70 * mm
    column = (width - 2 * margin - gap) / 2
    bare = {"leftPadding": 0, "rightPadding": 0, "topPadding": 0, "bottomPadding": 0}
    below = height - 2 * margin - head - 5 * mm
    first = [
        Frame(margin, height - margin - head, width - 2 * margin, head, id="head", **bare),
        Frame(margin, margin, column, below, id="left1", **bare),
        Frame(margin + column + gap, margin, column, below, id="right1", **bare),
    ]
    later = [
        Frame(margin, margin, column, height - 2 * margin, id="left", **bare),
        Frame(margin + column + gap, margin, column, height - 2 * margin, id="right", **bare),
    ]

    def number(canv: Any, doc: Any) -> None:
        canv.setFont("Helvetica", 8)
        canv.drawCentredString(width / 2, 10 * mm, str(doc.page))

    doc = BaseDocTemplate(out, pagesize=A4, pageTemplates=[
        PageTemplate("first", first, onPage=number), PageTemplate("later", later, onPage=number),
    ])  # fmt: skip
    heading = ParagraphStyle("t", fontName="Helvetica-Bold", fontSize=18, leading=22, spaceAfter=10)
    story: list[Any] = [Paragraph(title, heading), Paragraph(abstract, _style())]
    story += [NextPageTemplate("later"), FrameBreak()]
    story += [Paragraph(text, _style()) for text in body]
    doc.build(story)
    return out.getvalue()


def test_two_columns_under_a_title_and_abstract_across_the_page() -> None:
    """Lines across the gutter (the title, the abstract) cut the page into bands: the
    band above is read first, then the left column, then the right one."""
    (abstract,) = paragraphs_from(50, 1, sentences=8)
    body = paragraphs_from(51, 30)
    doc = parse(paper("Revision Stable Chunking", abstract, body))
    assert doc.metadata["pages"] >= 3
    assert block_texts(doc, None) == ["# Revision Stable Chunking", abstract, *body]


@settings(max_examples=6, deadline=None, phases=[Phase.generate])
@given(
    seed=st.integers(0, 10_000),
    count=st.integers(26, 40),
    where=st.integers(0, 3),
    variant=st.sampled_from(["justified", "ragged-indented", "two-columns"]),
)
def test_a_paragraph_inserted_on_page_one_leaves_the_later_ones_as_they_were(
    seed: int, count: int, where: int, variant: str
) -> None:
    """The revision contract: every later page reflows, every later paragraph's text
    stays the same."""
    old = paragraphs_from(seed, count)
    (extra,) = paragraphs_from(seed + 1, 1, sentences=2)
    new = [*old[:where], extra, *old[where:]]
    old_doc = parse(render(old, **VARIANTS[variant]))
    new_doc = parse(render(new, **VARIANTS[variant]))
    assert block_texts(old_doc) == old
    assert block_texts(new_doc) == new
    assert block_texts(new_doc)[where + 1 :] == block_texts(old_doc)[where:]


def test_a_running_header_naming_each_pages_section_is_dropped() -> None:
    """Two pages, each with its own section's name above the text in a small type: no
    text repeats, but a line smaller than the body above the body's top on every page
    is a running header."""
    sections = ["Introduction", "Methods and materials", "Results"]
    source = paragraphs_from(21, 14, sentences=4)
    doc = parse(render(source, header=lambda page: sections[page - 1]))
    assert doc.metadata["pages"] == 2
    assert block_texts(doc, None) == source


def test_headings_by_size_with_levels_and_sections() -> None:
    source = paragraphs_from(11, 24)
    titles = {0: "Getting started", 9: "Working with revisions", 17: "Closing notes"}
    doc = parse(render(source, headings=titles, title="A manual"))
    assert doc.metadata == {"pages": doc.metadata["pages"], "title": "A manual"}
    heads = [(doc.text[b.start : b.end], b.level) for b in doc.blocks if b.kind == "heading"]
    assert heads == [(f"# {t}", 1) for t in titles.values()]
    assert block_texts(doc) == source
    # a span inside the second section cites that section and its page
    block = [b for b in doc.blocks if b.kind == "paragraph"][12]
    where = locate(doc, block.start, block.end)
    assert where["section"] == ["Working with revisions"]
    assert where["pages"][0] >= 1


def test_a_centred_title_then_a_heading_of_its_size_are_two_headings() -> None:
    """A report's centred title, then its first heading at the margin, set at the same
    size a line apart: two headings (they were read as one wrapped heading), while a
    heading that wraps, left-aligned or centred, stays one."""
    from reportlab.lib.enums import TA_CENTER
    from reportlab.platypus import SimpleDocTemplate

    out = io.BytesIO()
    big = ParagraphStyle("big", fontName="Helvetica-Bold", fontSize=18, leading=22)
    centred = ParagraphStyle("centred", parent=big, alignment=TA_CENTER)
    wrapped = "A heading long enough that it has to wrap onto a second line of the page"
    body = paragraphs_from(2, 2)
    SimpleDocTemplate(out, pagesize=A4).build(
        [Paragraph("Annual report", centred), Paragraph("Introduction", big),
         Paragraph(body[0], _style()), Paragraph(wrapped, big),
         Paragraph(body[1], _style()), Paragraph(wrapped, centred)]
    )  # fmt: skip
    doc = parse(out.getvalue())
    heads = [doc.text[b.start : b.end] for b in doc.blocks if b.kind == "heading"]
    assert heads == ["# Annual report", "# Introduction", f"# {wrapped}", f"# {wrapped}"]


def test_hyphens_at_line_and_page_ends() -> None:
    """A line-end hyphen before a lower-case letter joins a word the document spells
    whole ("compiler"), keeps one it spells with a hyphen ("well-known"), and a soft
    hyphen (U+00AD) always joins; the same when the break is a page break."""
    special = hyphenated(LONG, [("com-", "piler"), ("well-", "known"), ("hy\u00ad", "phenated")])
    filler = [wrap(p) for p in paragraphs_from(4, 6)]
    lead = len(filler[0])
    for per_page in (lead + 1, lead + 2, lead + 3):  # each break of `special` on a page end
        doc = parse(typeset([filler[0], special, *filler[1:]], per_page=per_page))
        assert doc.metadata["pages"] >= 3
        texts = block_texts(doc)
        assert [" ".join(p) for p in filler] == texts[:1] + texts[2:]
        assert texts[1] == (
            " ".join(special)
            .replace("com- piler", "compiler")
            .replace("well- known", "well-known")
            .replace("hy\u00ad phenated", "hyphenated")
        )
        assert "Typeset Test Document" not in doc.text and "- 2 -" not in doc.text


def test_a_hyphenated_word_moved_whole_to_the_next_line_does_not_end_the_paragraph() -> None:
    """reportlab never breaks a line after a hyphen: it moves "shift-swap" whole to the
    next line, leaving room for "shift-" on the line before. That room read as the end of
    a paragraph, and sentences were cut in two ("...attributes to the new" | "shift-swap
    feature..."), differently in each layout (an evaluator's reflowed report)."""
    words = ["shift-swap", "cross-dock", "on-time", "part-time", "long-haul", "two-way"]
    paragraphs = [
        " ".join(
            f"The {words[(i + k) % len(words)]} plan for depot {i * 7 + k} moved its vans."
            for k in range(9)
        )
        for i in range(6)
    ]
    for justify in (False, True):
        assert block_texts(parse(render(paragraphs, justify=justify, header=None))) == paragraphs


def test_a_span_of_a_paragraph_across_page_breaks_cites_the_pages_its_text_is_on() -> None:
    """A paragraph goes on over two page breaks: the block cites its first and last page,
    and a span of it cites the pages of the lines it covers: one that starts after a
    break is not on the page before (a chunk of page 2's text was cited "pp. 1-2"), one
    across a break is on both."""
    lead = wrap(paragraphs_from(31, 1, sentences=5)[0])
    long = wrap(" ".join(paragraphs_from(32, 6, sentences=5)))
    tail = [wrap(p) for p in paragraphs_from(33, 4)]
    per_page = len(lead) + 4  # `long` starts 4 lines above page 1's foot
    assert len(long) > 4 + per_page + 2  # and ends on page 3 or later
    doc = parse(typeset([lead, long, *tail], per_page=per_page))
    assert block_texts(doc) == [" ".join(lines) for lines in (lead, long, *tail)]
    block = [b for b in doc.blocks if b.kind == "paragraph"][1]
    # each line of `long`: its span in the text and the page it is set on
    lines, at = [], block.start
    for number, line in enumerate(long):
        assert doc.text[at : at + len(line)] == line
        lines.append((at, at + len(line), (len(lead) + number) // per_page + 1))
        at += len(line) + 1
    assert [page for _, _, page in lines[:5]] == [1, 1, 1, 1, 2]
    last_page = lines[-1][2]
    assert last_page >= 3 and block.locator == {"page": [1, last_page]}
    for i, (start, _, first) in enumerate(lines):
        for _, end, last in lines[i:]:
            assert locate(doc, start, end)["pages"] == [first, last], (start, end)
            # from inside the first line to inside the last (a chunk cut mid-line)
            assert locate(doc, start + 2, end - 2)["pages"] == [first, last], (start, end)
    # the whole block, and a span from the paragraph before it into its page 2
    assert locate(doc, block.start, block.end)["pages"] == [1, last_page]
    assert locate(doc, doc.blocks[0].start, lines[4][1])["pages"] == [1, 2]
    assert locate(doc, lines[-1][0], len(doc.text))["pages"] == [last_page, doc.metadata["pages"]]


def test_chinese_in_a_cid_font_without_spaces() -> None:
    """reportlab's built-in CID font (STSong-Light): PDFium reads it, and lines of Chinese
    join without a space."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    sentences = [
        "修订感知的分块让嵌入在文档修改之后仍然可以重复使用。",
        "只有改动附近的文本需要重新计算，其余的向量保持不变。",
        "页眉、页脚和页码不是正文，解析时应当去掉。",
        "中文的换行不对应空格，两行之间直接相连。",
    ]
    source = ["".join(sentences[(i + k) % 4] for k in range(2 + i % 4)) for i in range(30)]
    doc = parse(render(source, font="STSong-Light", header=None))
    assert doc.metadata["pages"] >= 2
    texts = block_texts(doc)
    assert "".join(texts) == "".join(source)
    assert not re.search(r"\s", "".join(texts))


def test_korean_keeps_the_spaces_between_its_words() -> None:
    """Korean spaces its words: lines of a Korean paragraph (a CID font, wrapped at spaces
    as a word processor wraps them) join with a space, and every space inside a line stays.
    Chinese or Japanese inside the same text keeps the spaces its author typed."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("HYSMyeongJo-Medium"))
    paragraphs = [
        "새 버전을 올리기 전에 바뀐 문단만 다시 계산되는지 확인하고 그 결과를 기록해 둡니다.",
        "변경이 없는 문단의 벡터는 그대로 남아야 하며 비용도 그만큼 줄어듭니다.",
        "장애가 생기면 당번이 먼저 로그를 살펴본 다음 담당 팀에 알립니다.",
    ]
    pdf = canvas.Canvas(buffer := io.BytesIO(), pagesize=A4)
    pdf.setFont("HYSMyeongJo-Medium", 12)
    y = 780.0
    for paragraph in paragraphs:
        line = ""
        for word in paragraph.split(" "):
            if line and len(line) + 1 + len(word) > 24:
                pdf.drawString(60, y, line)
                y -= 18
                line = word
            else:
                line = f"{line} {word}".strip()
        pdf.drawString(60, y, line)
        y -= 36
    pdf.showPage()
    pdf.save()
    assert block_texts(parse(buffer.getvalue())) == paragraphs


def test_encrypted_with_a_password_is_skipped_with_that_reason() -> None:
    from reportlab.lib.pdfencrypt import StandardEncryption

    source = paragraphs_from(5, 6)
    locked = render(source, encrypt=StandardEncryption("secret", ownerPassword="owner"))
    assert b"/Encrypt" in locked
    with pytest.raises(ParseError, match=r"^encrypted \(password required\)$"):
        parse(locked)
    # encrypted for permissions only (no password to open it): read as any other
    opened = render(source, header=None, encrypt=StandardEncryption("", ownerPassword="owner"))
    assert block_texts(parse(opened)) == source


def test_no_text_layer_is_skipped_with_that_reason() -> None:
    from PIL import Image
    from reportlab.lib.utils import ImageReader

    out = io.BytesIO()
    canv = canvas.Canvas(out, pagesize=A4)
    canv.showPage()  # an empty page
    scan = Image.new("RGB", (200, 100), "white")
    canv.drawImage(ImageReader(scan), 72, 500, width=400, height=200)  # an image-only page
    canv.rect(72, 200, 300, 100)
    canv.showPage()
    canv.save()
    with pytest.raises(
        ParseError, match=r"^no text layer \(a scanned PDF\? rechunk does no OCR\)$"
    ):
        parse(out.getvalue())


def test_corrupt_files_are_parse_errors_with_pdfiums_reason(tmp_path: Path) -> None:
    good = render(paragraphs_from(9, 4))
    for data in (b"%PDF-1.7\n" + bytes(range(256)) * 8, b"not a pdf at all", good[:40]):
        with pytest.raises(ParseError) as caught:
            parse(data)
        message = str(caught.value)
        assert message.startswith("not a readable PDF: PDFium says ") and "\n" not in message
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4 broken")
    with pytest.raises(ParseError, match=r"broken\.pdf: not a readable PDF"):
        parse_file(path)


def test_version_names_pypdfium2_and_pdfium() -> None:
    import pypdfium2

    version = parser_for("pdf").version()
    assert version == (
        f"pdf/2 pypdfium2 {pypdfium2.PYPDFIUM_INFO.tag} pdfium {pypdfium2.PDFIUM_INFO.tag}"
    )


# -- the shared WeasyPrint renders of the dev revision pairs ---------------------------------

needs_renders = pytest.mark.skipif(
    not (RENDERS / "manifest.jsonl").exists() or not (SHARED / "dev.jsonl").exists(),
    reason=f"the shared PDF renders are not available: {RENDERS} is absent",
)


@cache
def sources() -> dict[str, dict[str, Any]]:
    with (SHARED / "dev.jsonl").open(encoding="utf-8") as fh:
        return {row["id"]: row for row in map(json.loads, fh)}


@cache
def parsed(pair: str, version: str) -> Parsed:
    return parse((RENDERS / pair / f"{version}.pdf").read_bytes())


def furniture_of(path: Path) -> list[tuple[str, str]]:
    """Per page, the text in its top and bottom margins (where these renders put the
    running header and the "page / pages" footer), read by PDFium within those bands."""
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        found = []
        for page in document:
            textpage = page.get_textpage()
            _, _, _, top = page.get_cropbox()
            band = 16 * mm
            head = " ".join(textpage.get_text_bounded(bottom=top - band).split())
            foot = " ".join(textpage.get_text_bounded(top=band).split())
            found.append((head, foot))
        return found
    finally:
        document.close()


def outside_headings(doc: Parsed) -> str:
    return "\n\n".join(
        block_texts(doc, None)[i] for i, b in enumerate(doc.blocks) if b.kind != "heading"
    )


def leaks(text: str, source: str, furniture: list[tuple[str, str]]) -> int:
    """Pages whose header or footer occurs in ``text`` more often than in the source."""
    return sum(
        1
        for head, foot in furniture
        if any(s and text.count(s) > source.count(s) for s in (head, foot))
    )


def mid_sentence(paragraphs: Sequence[str]) -> int:
    return sum(1 for p in paragraphs if p.strip() and not SENTENCE_END.search(p.strip()))


def changed_share(a: Sequence[str], b: Sequence[str]) -> float:
    """Characters in blocks that differ between ``a`` and ``b`` over all characters."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    changed = sum(
        sum(map(len, a[i1:i2])) + sum(map(len, b[j1:j2]))
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
        if op != "equal"
    )
    return changed / max(1, sum(map(len, a)) + sum(map(len, b)))


def source_blocks(text: str) -> list[str]:
    """The source's blocks (apart by a blank line), a table's rows one by one."""
    found: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        if block.lstrip().startswith("|"):
            found.extend(" ".join(row.split()) for row in block.splitlines() if row.strip())
        elif block.strip():
            found.append(" ".join(block.split()))
    return found


def parsed_blocks(doc: Parsed) -> list[str]:
    """The parsed blocks, a table's rows one by one (as :func:`source_blocks`)."""
    found: list[str] = []
    for block in doc.blocks:
        text = doc.text[block.start : block.end]
        if block.kind == "table":
            found.extend(text.splitlines())
        else:
            found.append(" ".join(text.split()))
    return found


@needs_renders
def test_renders_lose_their_running_headers_footers_and_page_numbers() -> None:
    """Every page of these renders has a running header (the current h1 and h2) and a
    "page / pages" footer: none is left in the text (PDFium's plain text has them on
    every page)."""
    pages = leaked = naive = 0
    for pair, row in sorted(sources().items()):
        for version in ("old", "new"):
            furniture = furniture_of(RENDERS / pair / f"{version}.pdf")
            doc = parsed(pair, version)
            pages += len(furniture)
            leaked += leaks(outside_headings(doc), row[version], furniture)
            naive += sum(1 for head, foot in furniture if head or foot)
            assert not re.search(r"(?<![\d/.])\d{1,2} / \d{1,2}(?![\d/.])", doc.text), pair
    assert naive == pages  # the furniture is there to be dropped
    assert leaked == 0, f"{leaked} of {pages} pages leak a header or footer"


@needs_renders
def test_renders_chinese_text_is_recovered() -> None:
    """The Chinese text (CID-keyed Noto CJK subsets) of every zh render: at least 98 % of
    the source's CJK characters, with no space put between two of them."""
    for pair, row in sorted(sources().items()):
        if row["lang"] != "zh":
            continue
        for version in ("old", "new"):
            want = Counter(CJK.findall(row[version]))
            text = parsed(pair, version).text
            got = Counter(CJK.findall(text))
            share = sum(min(n, got[c]) for c, n in want.items()) / sum(want.values())
            assert share >= 0.98, (pair, version, share)
            # no space between two CJK characters but those the source has once its
            # Markdown is read ("其 **生命周期**" is 其, a space, 生命周期)
            gaps = f"(?<={CJK.pattern}) (?={CJK.pattern})"
            source = _MARKDOWN_LINK.sub(r"\1", row[version])
            source = re.sub(r"[*_`~]", "", source)
            assert len(re.findall(gaps, text)) <= len(re.findall(gaps, source)), (pair, version)


# a Markdown link or reference link: [text](target), [text][label], [text][]
_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")


@needs_renders
def test_renders_paragraphs_rarely_end_mid_sentence() -> None:
    """Paragraphs are joined across line and page breaks: per 1,000 characters, the
    paragraphs that end without a sentence's punctuation are about as many as in the
    source texts (the per-page lines PDFium gives end mid-sentence most of the time)."""
    ours = ours_chars = src = src_chars = 0
    for pair, row in sorted(sources().items()):
        for version in ("old", "new"):
            doc = parsed(pair, version)
            ours += mid_sentence(block_texts(doc))
            ours_chars += len(doc.text)
            plain = [
                b for b in source_blocks(row[version])
                if not re.match(r"(#|[-*+] |\d+[.)] |\||>|```|~~~|    )", b)
            ]  # fmt: skip
            src += mid_sentence(plain)
            src_chars += len(row[version])
    rate, source_rate = 1000 * ours / ours_chars, 1000 * src / src_chars
    assert rate <= max(2.5, 1.25 * source_rate), (rate, source_rate)


@needs_renders
def test_renders_small_edits_change_the_text_only_near_the_edit() -> None:
    """Revision stability on the real pairs: between the old and the new render of a
    small edit, the blocks that differ hold about as much text as the source's blocks
    that differ, although the pages after the edit reflowed."""
    for pair, row in sorted(sources().items()):
        if row["band"] != "small":
            continue
        ours = changed_share(*(parsed_blocks(parsed(pair, v)) for v in ("old", "new")))
        theirs = changed_share(source_blocks(row["old"]), source_blocks(row["new"]))
        assert ours <= 1.5 * theirs + 0.01, (pair, ours, theirs)
