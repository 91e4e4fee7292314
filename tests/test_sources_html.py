"""The HTML parser: a page's own text as Markdown-shaped blocks, its template left out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parser_contract import ParserContract, check_parsed

from rechunk.errors import ConfigError
from rechunk.sources import NoTextError, Parsed, ParseError, ParseOptions, parse_file
from rechunk.sources.html import HtmlParser, HtmlRules

pytest.importorskip("selectolax.lexbor", reason="the formats extra (selectolax) is not installed")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "revisions"
RENDERS = SHARED / "formats-dev"
DEV = SHARED / "dev.jsonl"


def parse(markup: str | bytes, **options: tuple[str, ...]) -> Parsed:
    data = markup.encode("utf-8") if isinstance(markup, str) else markup
    (doc,) = HtmlParser().parse(data, ParseOptions(**options))  # type: ignore[arg-type]
    check_parsed(doc)
    return doc


def blocks(doc: Parsed) -> list[tuple[str, int, str]]:
    return [(b.kind, b.level, doc.text[b.start : b.end]) for b in doc.blocks]


def page(body: str, head: str = "<title>A page</title>", charset: str = "utf-8") -> str:
    meta = f"<meta charset='{charset}'>" if charset else ""
    return f"<!doctype html><html><head>{meta}{head}</head><body>{body}</body></html>"


# A page in a typical documentation theme: everything but the article is template.
THEMED = page(
    """
<a class="skip" href="#main">Skip to content</a>
<header class="site"><a href="/">Acme Docs</a><form role="search"><input placeholder="Search">
  <button>Go</button></form></header>
<nav class="menu"><ul><li>Home</li><li>Guides</li></ul></nav>
<main>
  <aside class="toc">On this page</aside>
  <article>
    <h1 id="install">Installing <a class="headerlink" href="#install">¶</a></h1>
    <p>Install the package with <code>pip</code>.<br>It needs Python 3.10.</p>
    <div class="admonition">A note <em>inside</em> a div.</div>
    <h2 id="steps">Steps <a href="#steps">#</a></h2>
    <ol start="3"><li><p>Download.</p><p>Unpack it.</p><ul><li>on Linux</li></ul></li>
      <li>Run</li><li value="9">Done</li></ol>
    <pre><code class="language-python">def f():
    return  1
</code></pre>
    <table><caption>Options</caption><tr><th>name</th><th>meaning</th></tr>
      <tr><td>-q</td><td>quiet | terse</td></tr></table>
    <blockquote><p>First quoted.</p><p>Second quoted.</p></blockquote>
    <dl><dt>Term</dt><dd>Its definition.</dd></dl>
    <figure><img src="x.png" alt="x"><figcaption>A figure caption.</figcaption></figure>
    <p hidden>Hidden paragraph.</p><p style="color: red;DISPLAY : none">Invisible.</p>
    <span aria-hidden="true">Decoration.</span>
    <div role="complementary">Related pages.</div>
    <script>var tracking = 1;</script><style>p { color: red }</style>
    <noscript>Enable JavaScript.</noscript><template><p>Template text.</p></template>
    <svg><text>Icon text</text></svg><iframe src="ad.html">Ad frame.</iframe>
    <select><option>Version 1</option></select><textarea>Feedback?</textarea>
  </article>
</main>
<footer>© Acme Corp · Privacy</footer>
"""
)

TEMPLATE_STRINGS = [
    "Skip to content", "Acme Docs", "Search", "Go", "Home", "Guides", "On this page", "¶",
    "Hidden paragraph", "Invisible", "Decoration", "Related pages", "tracking", "color",
    "Enable JavaScript", "Template text", "Icon text", "Ad frame", "Version 1", "Feedback",
    "Acme Corp", "Privacy",
]  # fmt: skip


def _renders(limit: int | None = None) -> list[Path]:
    paths = sorted(RENDERS.glob("*/*.html")) if RENDERS.exists() else []
    return paths[:limit] if limit else paths


# -- the contract -----------------------------------------------------------------------


class TestHtmlContract(ParserContract):
    fmt = "html"

    def samples(self) -> list[tuple[str, bytes]]:
        written = [("themed.html", THEMED.encode()), ("latin1.html", _latin1_page())]
        renders = [(f"{p.parent.name}/{p.name}", p.read_bytes()) for p in _renders()[::30]]
        return [*written, *renders]


def _latin1_page() -> bytes:
    return page("<p>Café crème, naïve façade.</p>", charset="iso-8859-1").encode("cp1252")


# -- the template is not text -----------------------------------------------------------


def test_themed_page_keeps_the_article_and_nothing_else() -> None:
    doc = parse(THEMED)
    for template in TEMPLATE_STRINGS:
        assert template not in doc.text, template
    assert blocks(doc) == [
        ("heading", 1, "# Installing"),
        ("paragraph", 0, "Install the package with pip. It needs Python 3.10."),
        ("paragraph", 0, "A note inside a div."),
        ("heading", 2, "## Steps"),
        ("list_item", 0, "3. Download. Unpack it."),
        ("list_item", 0, "  - on Linux"),
        ("list_item", 0, "4. Run"),
        ("list_item", 0, "9. Done"),
        ("code", 0, "```python\ndef f():\n    return  1\n```"),
        ("paragraph", 0, "Options"),
        ("table", 0, "| name | meaning |\n| -q | quiet \\| terse |"),
        ("quote", 0, "> First quoted."),
        ("quote", 0, "> Second quoted."),
        ("list_item", 0, "- Term"),
        ("list_item", 0, "  - Its definition."),
        ("paragraph", 0, "A figure caption."),
    ]
    assert doc.metadata["title"] == "A page"
    assert doc.blocks[0].locator == {"anchor": "install"}
    assert doc.blocks[4].locator == {"anchor": "steps"}


def test_the_root_is_main_or_its_one_article_or_the_one_article_or_body() -> None:
    two_articles = "<main><p>Main text.</p><article>A</article><article>B</article></main>"
    assert parse(page(two_articles)).text == "Main text.\n\nA\n\nB\n"
    assert parse(page("<div>Out</div><div role='main'><p>In</p></div>")).text == "In\n"
    assert parse(page("<div>Out</div><article><p>In</p></article>")).text == "In\n"
    assert parse(page("<div>One</div><div>Two</div>")).text == "One\n\nTwo\n"


def test_header_of_an_article_is_kept_the_sites_header_is_not() -> None:
    markup = page(
        "<header>Site banner</header><article><header><h1>Post title</h1>"
        "<p>By Ada</p></header><p>Body.</p><footer>Share this</footer></article>"
    )
    assert parse(markup).text == "# Post title\n\nBy Ada\n\nBody.\n"


def test_site_selectors_include_and_exclude_come_first() -> None:
    markup = page(
        "<div id='wiki'><p>Wiki text.</p><div class='edit'>Edit this page</div></div>"
        "<main><p>Main text.</p></main><div id='wiki2'><p>More wiki.</p></div>"
    )
    doc = parse(markup, html_include=("#wiki", "#wiki2", "#wiki p"), html_exclude=(".edit",))
    assert doc.text == "Wiki text.\n\nMore wiki.\n"
    with pytest.raises(ParseError, match=r"no element matches the selectors to read \(--html"):
        parse(markup, html_include=("#absent",))


@pytest.mark.parametrize("option", ["html_include", "html_exclude"])
def test_a_selector_that_is_not_css_is_a_config_error(option: str) -> None:
    with pytest.raises(ConfigError, match=rf"{option} selector 'p\[' is not a CSS selector"):
        parse(page("<p>x</p>"), **{option: ("main", "p[")})


def test_rules_can_be_overridden() -> None:
    markup = page("<main><p>Body.</p><aside>A sidebar note.</aside></main>")
    assert "sidebar" not in parse(markup).text
    rules = HtmlRules(drop_tags=HtmlRules().drop_tags - {"aside"})
    (doc,) = HtmlParser(rules).parse(markup.encode(), ParseOptions())
    assert doc.text == "Body.\n\nA sidebar note.\n"


def test_permalink_anchors_go_real_links_stay() -> None:
    markup = page(
        "<h2 id='a'>Title <a href='#a'>§</a></h2><h3>Other <a class='header-anchor'>link</a></h3>"
        "<p>See <a href='/x'>the guide</a> and <a href='#y'>#</a> ok.</p>"
    )
    assert blocks(parse(markup)) == [
        ("heading", 2, "## Title"),
        ("heading", 3, "### Other"),
        ("paragraph", 0, "See the guide and ok."),
    ]


def test_layout_table_cells_are_read_as_containers() -> None:
    markup = page(
        "<table role='presentation'><tr><td><p>Left column.</p></td><td>Right.</td></tr></table>"
        "<table><tr><td><table><tr><td>Inner.</td></tr></table></td></tr></table>"
    )
    assert blocks(parse(markup)) == [
        ("paragraph", 0, "Left column."),
        ("paragraph", 0, "Right."),
        ("table", 0, "| Inner. |"),
    ]


def test_code_language_and_verbatim_text() -> None:
    markup = page(
        '<div class="highlight-rust notranslate"><div class="highlight"><pre>'
        "<span>fn</span> main() {<br>    x &lt; 1;\n}</pre></div></div>"
        "<pre>  plain\n    indented</pre>"
    )
    assert blocks(parse(markup)) == [
        ("code", 0, "```rust\nfn main() {\n    x < 1;\n}\n```"),
        ("code", 0, "```\n  plain\n    indented\n```"),
    ]


def test_pandoc_code_blocks_keep_their_language() -> None:
    """pandoc writes ``<pre class="sourceCode python">`` (its EPUBs too), not ``language-x``."""
    pypandoc = pytest.importorskip("pypandoc")
    markdown = "# Run\n\n```python\nfor x in range(3):\n    print(x)\n```\n\n```\nplain\n```\n"
    markup = pypandoc.convert_text(
        markdown, "html", format="gfm", extra_args=["--standalone", "--quiet", "-M", "title=Run"]
    )
    assert 'class="sourceCode python"' in markup
    codes = [b for b in blocks(parse(markup)) if b[0] == "code"]
    assert codes == [
        ("code", 0, "```python\nfor x in range(3):\n    print(x)\n```"),
        ("code", 0, "```\nplain\n```"),
    ]


def test_title_falls_back_to_the_first_h1() -> None:
    assert parse("<h2>Sub</h2><h1>Main title</h1><p>x</p>").metadata["title"] == "Main title"
    assert "title" not in parse("<p>no title</p>").metadata


# -- decoding ---------------------------------------------------------------------------


def test_declared_charset_and_bom_decide_the_encoding() -> None:
    doc = parse(_latin1_page())
    assert "Café crème, naïve façade." in doc.text
    assert doc.metadata["encoding"] == "cp1252"
    declared = "<meta http-equiv='Content-Type' content='text/html; charset=Shift_JIS'>"
    shift_jis = page("<p>日本語のテキスト</p>", declared, charset="").encode("shift_jis")
    assert parse(shift_jis).text == "日本語のテキスト\n"
    utf16 = "\ufeff" + page("<p>UTF-16 text ünï</p>", charset="")
    assert parse(utf16.encode("utf-16-le")).text == "UTF-16 text ünï\n"
    assert parse(page("<p>plain</p>").encode()).metadata["encoding"] == "utf-8"


def test_bad_bytes_are_replaced_and_said_under_a_declared_charset() -> None:
    declared = b"<meta charset='utf-8'><p>good \xff\xfe bytes</p>"
    doc = parse(declared)
    assert doc.text == "good \ufffd\ufffd bytes\n"
    assert doc.metadata["invalid_bytes"] is True
    assert "invalid_bytes" not in parse(b"<p>fine</p>").metadata


def test_a_page_that_declares_no_charset_is_read_as_a_text_file_is() -> None:
    """Not UTF-8 and no charset declared: skipped with the reason and the advice, as a
    text file is, not stored with U+FFFD in place of its accents (a user's cp1252 page
    was, without a word); the encoding named reads it."""
    legacy = "<p>Our caf\u00e9 serves fair trade coffee.</p>".encode("cp1252")
    with pytest.raises(ParseError, match=r"not valid UTF-8 .*--encoding"):
        parse(legacy)
    doc = HtmlParser().parse(legacy, ParseOptions(encoding="cp1252"))[0]
    assert "caf\u00e9" in doc.text and doc.metadata["encoding"] == "cp1252"
    assert "invalid_bytes" not in doc.metadata


@pytest.mark.parametrize(
    "markup",
    [
        "",
        "<html><head><title>Only a title</title></head><body></body></html>",
        page("<nav>Menu</nav><script>x()</script><p>   </p><footer>Foot</footer>"),
    ],
)
def test_a_page_without_text_is_a_parse_error(markup: str, tmp_path: Path) -> None:
    """No text is a NoTextError (a ParseError): a sync counts the page as empty, and a
    caller of parse_file (the LangChain and LlamaIndex loaders) can tell it from a broken
    file."""
    with pytest.raises(NoTextError, match="no text"):
        HtmlParser().parse(markup.encode(), ParseOptions())
    (tmp_path / "page.html").write_bytes(markup.encode() or b" ")
    with pytest.raises(NoTextError, match=r"page\.html: no text"):
        parse_file(tmp_path / "page.html")


def test_binary_bytes_are_a_parse_error() -> None:
    with pytest.raises(ParseError, match="NUL"):
        HtmlParser().parse(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ParseOptions())


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    markup = "<div>" * 5000 + "<p>deep</p>" + "</div>" * 5000
    assert parse(markup).text == "deep\n"


# -- the shared renders (MkDocs Material) -----------------------------------------------


def _sources() -> dict[str, dict]:
    with DEV.open(encoding="utf-8") as fh:
        return {row["id"]: row for row in map(json.loads, fh)}


# text of the Material theme outside the article (found by reading a render's body)
MATERIAL_TEMPLATE = [
    "Made with", "Material for MkDocs", "Initializing search", "正在初始化搜索引擎",
    "Skip to content", "跳转至", "Table of contents", "__md_", "palette", "annotate",
    "search.result", "clipboard.copy",
]  # fmt: skip
_PLAIN = re.compile(r"[*_`\[\]<>{}\\|#&~^]|https?:|^\s*(\d+[.)]|[-+>])\s", re.M)
_SPACE = re.compile(r"\s+")


@pytest.mark.revisions
def test_renders_carry_no_template_and_keep_the_source_paragraphs() -> None:
    if not RENDERS.exists() or not DEV.exists():
        pytest.skip(f"the shared HTML renders are not available: {RENDERS} is absent")
    sources = _sources()
    checked = 0
    for path in _renders():
        row = sources[path.parent.name]
        source = row[path.stem]
        doc = parse(path.read_bytes())
        for template in [*MATERIAL_TEMPLATE, row["source"]["repo"]]:
            assert template in source or template not in doc.text, (path, template)
        assert doc.metadata["title"].endswith(row["source"]["repo"])  # "<page> - <site>"
        if not row["source"]["path"].endswith(".md"):
            continue  # the PEPs went through pandoc first, which rewrites some text
        # every plain source paragraph (no Markdown syntax in it) is in the text
        text = _SPACE.sub("", doc.text)
        for paragraph in re.split(r"\n\s*\n", source):
            plain = not paragraph.startswith((" ", "\t")) and not _PLAIN.search(paragraph)
            if plain and len(paragraph.strip()) >= 40:
                assert _SPACE.sub("", paragraph) in text, (path, paragraph[:80])
                checked += 1
    assert checked > 500


# -- an edit changes the text only where it is ------------------------------------------

_WORDS = st.sampled_from(["alpha", "beta", "gamma", "Ünïcode", "中文", "字", "42", "x.y", "end."])
_LINE = st.lists(_WORDS, min_size=1, max_size=8).map(" ".join)
_HTML_BLOCK = st.one_of(
    _LINE.map(lambda s: f"<p>Para <em>{s}</em></p>"),
    st.tuples(st.integers(1, 6), _LINE).map(lambda t: f"<h{t[0]}>{t[1]}</h{t[0]}>"),
    st.lists(_LINE, min_size=1, max_size=4).map(
        lambda items: "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
    ),
    st.lists(_LINE, min_size=1, max_size=4).map(
        lambda items: "<ol>" + "".join(f"<li><p>{i}</p></li>" for i in items) + "</ol>"
    ),
    _LINE.map(lambda s: f"<blockquote><p>{s}</p></blockquote>"),
    st.lists(_LINE, min_size=1, max_size=3).map(
        lambda lines: "<pre>" + "\n".join(lines) + "</pre>"
    ),
    st.tuples(_LINE, _LINE).map(
        lambda t: (
            f"<table><tr><th>h</th><th>k</th></tr><tr><td>{t[0]}</td><td>{t[1]}</td></tr></table>"
        )
    ),
    _LINE.map(lambda s: f"<div>Loose {s}<br>text</div>"),
)


def _texts(blocks_html: list[str]) -> list[str]:
    markup = page(f"<nav>Menu</nav><main><article>{''.join(blocks_html)}</article></main>")
    doc = parse(markup)
    return [doc.text[b.start : b.end] for b in doc.blocks]


@given(st.lists(_HTML_BLOCK, min_size=1, max_size=12), st.data())
def test_paragraph_insert_leaves_every_other_block_alone(
    html_blocks: list[str], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(html_blocks)))
    words = data.draw(_LINE)
    before = _texts(html_blocks)
    after = _texts([*html_blocks[:at], f"<p>Inserted {words}</p>", *html_blocks[at:]])
    inserted = [t for t in after if t.startswith("Inserted ")]
    assert len(inserted) == 1
    after.remove(inserted[0])
    assert after == before


def test_parse_file_reads_html(tmp_path: Path) -> None:
    path = tmp_path / "page.htm"
    path.write_bytes(THEMED.encode())
    (doc,) = parse_file(path)
    assert doc.parser == "html" and doc.version.startswith("html/1 selectolax ")


def test_spaces_between_words_are_kept_in_every_script() -> None:
    """A space the page has stays, in Korean (which spaces its words) and between Chinese
    or Japanese characters alike; only a line break inside Chinese or Japanese is no
    space."""
    doc = parse(
        page(
            "<p>배포 전에 바뀐 문단을\n  확인합니다.</p>"
            "<p>第2章 手順</p>"
            "<p>大阪 名古屋 の 二か所で 試します。</p>"
            "<p>改动之后\n    只重新计算附近的文本。</p>"
            "<p>床前明月光，<br>疑是地上霜。</p>"
            "<p>first line<br>second line</p>"
        )
    )
    assert [text for kind, _, text in blocks(doc) if kind == "paragraph"] == [
        "배포 전에 바뀐 문단을 확인합니다.",
        "第2章 手順",
        "大阪 名古屋 の 二か所で 試します。",
        "改动之后只重新计算附近的文本。",
        "床前明月光，疑是地上霜。",
        "first line second line",
    ]


def test_ruby_readings_are_left_out() -> None:
    """Japanese furigana (``<rt>``) and the brackets around it (``<rp>``): the text is the
    base characters, not the characters and their readings run together."""
    doc = parse(
        page(
            "<p><ruby>障害<rp>(</rp><rt>しょうがい</rt><rp>)</rp></ruby>が"
            "<ruby>発生<rt>はっせい</rt></ruby>したら当番に連絡します。</p>"
        )
    )
    assert [text for kind, _, text in blocks(doc) if kind == "paragraph"] == [
        "障害が発生したら当番に連絡します。"
    ]
