"""The PDF parser on scripts whose lines are not Latin: Hebrew and Arabic (right to
left, in PDFs that place their glyphs in reading order and in PDFs that place them as
they are seen), and Chinese and Japanese set ragged right (lines that stop short of the
edge by a character or so). Every PDF is written here by reportlab."""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import pytest

from rechunk.sources import Parsed, ParseOptions, parser_for

pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")

from reportlab.lib.enums import TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer

# a system font with Hebrew and Arabic glyphs (DejaVu Sans; fc-list names it)
DEJAVU = next(
    (
        path
        for path in (
            Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
            Path("/usr/share/fonts/dejavu/DejaVuSans.ttf"),
            Path("/usr/share/fonts/TTF/DejaVuSans.ttf"),
        )
        if path.exists()
    ),
    None,
)
needs_dejavu = pytest.mark.skipif(
    DEJAVU is None, reason="DejaVu Sans (a font with Hebrew and Arabic glyphs) is not installed"
)

HEBREW = [
    "(שלב 3) הספרייה קוראת את הקבצים מהתיקייה ושומרת את הטקסט במאגר. כל מסמך מקבל "
    "מזהה קבוע, ולכן שינוי קטן אינו מחייב חישוב מחדש של כל הקטעים.",
    "המערכת בודקת בכל לילה אם נוספו קבצים חדשים. כאשר נמצא קובץ פגום, היא רושמת "
    "הודעה ברורה [ולא שותקת] וממשיכה לקובץ הבא בתור.",
    "הצוות שולח ברכה קצרה לכל המשתמשים: שָׁלוֹם לְכֻלָּם וְתוֹדָה רַבָּה על הסבלנות בזמן העבודה על הגרסה החדשה.",
]
ARABIC = [
    "(الخطوة 3) تقرأ المكتبة الملفات من المجلد وتحفظ النص في قاعدة البيانات. يحصل كل "
    "مستند على معرف ثابت، لذلك لا يتطلب تغيير صغير إعادة حساب كل المقاطع.",
    "يفحص النظام كل ليلة ما إذا كانت هناك ملفات جديدة. عندما يجد ملفاً تالفاً يكتب "
    "رسالة واضحة [ولا يسكت] ثم ينتقل إلى الملف التالي في القائمة.",
    "يرسل الفريق تحية قصيرة إلى جميع المستخدمين ويشكرهم على صبرهم أثناء العمل على "
    "النسخة الجديدة من البرنامج.",
]
JAPANESE = [
    "この手順書は、社内の文書検索を動かすための準備をまとめたものです。毎週月曜日には、"
    "担当者が新しく追加されたPDFの資料を確認し、見出しと日付が正しく付いているかを調べます。"
    "古い資料（Markdown や CSV の形式）が残っている場合は、索引をもう一度作り直してください。",
    "検索の結果がおかしいと感じたときは、まず設定ファイル（config.yaml）の変更履歴を見てください。"
    "多くの場合、誰かが区切りの長さを変えたことが原因です。変更を元に戻すと"
    "（キャッシュは消さずに）以前と同じ結果が返るようになります。",
    "名古屋と福岡の拠点では、2024年から月に一度だけ全体の会議を開いています。会議の記録は"
    " HTML に変換して共有フォルダーに置かれ、翌日の朝までに全員が読めるようになります。",
]
CHINESE = [
    "这份说明介绍了如何为团队准备文档检索服务。每周一上午，负责人会检查新加入的PDF资料，"
    "确认每一份都有标题和日期。如果发现过期的资料，请重新建立索引，并在群里告诉大家。",
    "当检索结果看起来不对时，请先查看配置文件的修改记录。大多数情况下，原因是有人改动了"
    "分块的长度。把改动撤回之后（缓存不需要清空）结果就会恢复到以前的样子。",
    "广州和成都的同事每个月开一次全体会议。会议记录放在共享目录里，第二天早上所有人都能看到。",
]


def parse(data: bytes) -> Parsed:
    (doc,) = parser_for("pdf").parse(data, ParseOptions())
    return doc


def paragraphs_of(doc: Parsed) -> list[str]:
    return [doc.text[b.start : b.end] for b in doc.blocks if b.kind == "paragraph"]


def written(paragraphs: Sequence[str]) -> list[str]:
    return [unicodedata.normalize("NFC", " ".join(p.split())) for p in paragraphs]


def read(doc: Parsed) -> list[str]:
    return [unicodedata.normalize("NFC", " ".join(p.split())) for p in paragraphs_of(doc)]


def flowed(paragraphs: Sequence[str], font: str, *, cjk: bool = False) -> bytes:
    """The paragraphs set by reportlab's Paragraph, ragged right, in ``font``."""
    out = io.BytesIO()
    style = ParagraphStyle(
        "body", fontName=font, fontSize=11, leading=15, alignment=TA_LEFT,
        wordWrap="CJK" if cjk else None,
    )  # fmt: skip
    story: list[object] = []
    for text in paragraphs:
        story += [Paragraph(text, style), Spacer(1, 6)]
    SimpleDocTemplate(out, pagesize=A4).build(story)
    return out.getvalue()


def _dejavu() -> str:
    assert DEJAVU is not None
    pdfmetrics.registerFont(TTFont("DejaVuSans", str(DEJAVU)))
    return "DejaVuSans"


# -- right to left --------------------------------------------------------------------------

_MIRRORED = str.maketrans("()[]", ")(][")


def _visual(line: str) -> str:
    """A line of right-to-left text as it is seen, left to right: its words in reverse
    order, each word's letters reversed and its brackets turned round, digits kept in
    their order (what a typesetter that applies the bidirectional algorithm draws)."""
    out = []
    for word in reversed(line.split(" ")):
        pieces: list[str] = []
        for char in word:  # a run of digits keeps its order inside the reversed word
            if char.isdigit() and pieces and pieces[-1][-1:].isdigit():
                pieces[-1] += char
            else:
                pieces.append(char)
        clusters: list[str] = []
        for piece in pieces:  # a letter keeps its marks after it
            if unicodedata.combining(piece) and clusters:
                clusters[-1] += piece
            else:
                clusters.append(piece)
        out.append("".join(reversed(clusters)).translate(_MIRRORED))
    return " ".join(out)


def drawn_right_to_left(paragraphs: Sequence[str], font: str) -> bytes:
    """The paragraphs drawn line by line, each line in the order it is seen (as Word,
    LibreOffice or a browser write right-to-left text): justified to a 400-point measure
    by word spacing, a paragraph's last line set flush right."""
    pdf = canvas.Canvas(buffer := io.BytesIO(), pagesize=A4)
    right, y, measure = A4[0] - 72, A4[1] - 72, 400.0

    def draw(line: str, last: bool) -> None:
        width = pdfmetrics.stringWidth(line, font, 11)
        text = pdf.beginText(right - (width if last else measure), y)
        text.setFont(font, 11)
        text.setWordSpace(0 if last else (measure - width) / line.count(" "))
        text.textOut(_visual(line))
        pdf.drawText(text)

    for paragraph in paragraphs:
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}".strip()
            if line and pdfmetrics.stringWidth(candidate, font, 11) > measure:
                draw(line, last=False)
                y -= 15
                line = word
            else:
                line = candidate
        draw(line, last=True)
        y -= 24
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


@needs_dejavu
@pytest.mark.parametrize("language", ["hebrew", "arabic"])
def test_right_to_left_placed_in_reading_order_reads_whole_words(language: str) -> None:
    """reportlab without a bidi library draws right-to-left text in its reading order,
    left to right. PDFium reverses such a line; the parser reads its words whole, in
    reading order, brackets as written and vowel points on their letters."""
    paragraphs = HEBREW if language == "hebrew" else ARABIC
    doc = parse(flowed(paragraphs, _dejavu()))
    assert read(doc) == written(paragraphs)


@needs_dejavu
@pytest.mark.parametrize("language", ["hebrew", "arabic"])
def test_right_to_left_placed_as_seen_reads_in_reading_order(language: str) -> None:
    """A PDF that draws right-to-left lines as they are seen (right-aligned, the words of
    a line from right to left): the parser gives them in reading order."""
    paragraphs = HEBREW if language == "hebrew" else ARABIC
    doc = parse(drawn_right_to_left(paragraphs, _dejavu()))
    assert read(doc) == written(paragraphs)


# -- Chinese and Japanese, ragged right -----------------------------------------------------


# reportlab drops a closing mark at a line's end when another follows it ("）。"): the
# texts have none
@pytest.mark.parametrize(
    ("font", "paragraphs"), [("HeiseiMin-W3", JAPANESE), ("STSong-Light", CHINESE)]
)
def test_ragged_chinese_and_japanese_lines_join_into_their_paragraphs(
    font: str, paragraphs: list[str]
) -> None:
    """reportlab's CJK wrap leaves a left-aligned line short of the edge by up to a
    character or two (more before a mark that may not start a line): such a line goes on
    in the next one; only the paragraph's last line ends it. Over page breaks (where no
    gap tells) a paragraph may end only where a sentence ends. reportlab's CID fonts need
    no font file."""
    pdfmetrics.registerFont(UnicodeCIDFont(font))
    source = [paragraphs[i % 3] + paragraphs[(i + 1) % 3] for i in range(4)]
    assert read(parse(flowed(source, font, cjk=True))) == written(source)
    source = [paragraphs[i % 3] + paragraphs[(i + 1) % 3] for i in range(12)]
    doc = parse(flowed(source, font, cjk=True))
    assert doc.metadata["pages"] >= 2
    got = read(doc)
    assert "".join(got) == "".join(written(source))
    assert all(text.endswith("。") for text in got), [t[-10:] for t in got]
