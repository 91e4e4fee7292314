"""AsciiDoc: written in the Markdown-shaped form the structured policy reads, so its
sections stay hard boundaries; the parser contract; and a folder of .adoc files synced
by the real CLI, an edit re-embedding only around it. The documents are the project's
own (an on-call guide to rechunk's sync job)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_json
from parser_contract import ParserContract
from runbook_checks import assert_an_edit_stays_in_its_section, assert_sections_are_hard

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for
from rechunk.sources.files import read_documents

GUIDE = """= Operating the shop's sync job
Ada Ops <ops@example.com>
v2.1, 2026-11-30
:toc: left
:icons: font

// an internal note, not text
This guide says how the nightly sync keeps the shop's search index current.
It is read by whoever is on call.

== Running it

The job runs `rechunk sync` on the `docs/` folder
every night at two.

.The command cron runs
[source,sh]
----
rechunk sync docs --store qdrant+http://search:6333 --prune
== not a heading: this is code
----

NOTE: A run that finds nothing new embeds nothing.

=== Options

* `--prune` removes documents whose files are gone
** nested detail about pruning
* `--dry-run` plans without writing
+
A continuation paragraph of the second item.

. first step
. second step

[cols="1,2"]
|===
|Option |Meaning

|--prune
|remove what is gone

|--encoding
|read legacy files
|===

////
a comment block
== not a heading either
////

include::partials/footer.adoc[]

[quote, Grace]
____
Keep the index honest.
____

====
An example block holds this paragraph.
====

CPU:: two cores
Memory:: 24 GB

  an indented literal line
  and another

== When it fails

The summary names every file it skipped, and why.
"""

EXPECTED = """# Operating the shop's sync job

This guide says how the nightly sync keeps the shop's search index current. It is read by whoever is on call.

## Running it

The job runs `rechunk sync` on the `docs/` folder every night at two.

The command cron runs

```sh
rechunk sync docs --store qdrant+http://search:6333 --prune
== not a heading: this is code
```

NOTE: A run that finds nothing new embeds nothing.

### Options

- `--prune` removes documents whose files are gone
  - nested detail about pruning
- `--dry-run` plans without writing

A continuation paragraph of the second item.

1. first step
1. second step

| Option | Meaning |
| --prune | remove what is gone |
| --encoding | read legacy files |

> Keep the index honest.

An example block holds this paragraph.

- CPU:: two cores
- Memory:: 24 GB

```
an indented literal line
and another
```

## When it fails

The summary names every file it skipped, and why.
"""


def _sections(paragraphs: int) -> str:
    """An AsciiDoc runbook of several sections, each of several paragraphs."""
    out = ["= Runbook", ""]
    for s in range(4):
        out += [f"== Incident kind {s}", ""]
        for k in range(paragraphs):
            out += [
                f"When alert {s}.{k} fires, check the sync's summary for skipped files,",
                f"then the stale check, then the store's health endpoint number {k}.",
                "",
            ]
        out += ["[source,sh]", "----", f"rechunk status --collection kb{s}", "----", ""]
    return "\n".join(out)


def parse(text: str) -> str:
    (doc,) = parser_for("asciidoc").parse(text.encode(), ParseOptions())
    return doc.text


def test_the_guide_is_written_in_markdown_shape() -> None:
    (doc,) = parser_for("asciidoc").parse(GUIDE.encode(), ParseOptions())
    assert doc.text == EXPECTED
    assert doc.metadata == {"title": "Operating the shop's sync job"}
    kinds = [b.kind for b in doc.blocks]
    assert kinds.count("heading") == 4 and "table" in kinds and kinds.count("code") == 2
    (code, _) = [b for b in doc.blocks if b.kind == "code"]
    assert dict(code.locator) == {"line": [18, 21]}  # the delimiters' lines in the file
    for dropped in ("Ada Ops", ":toc:", "internal note", "comment block", "include::", "Grace"):
        assert dropped not in doc.text


def test_a_rewrapped_paragraph_or_crlf_gives_the_same_text() -> None:
    rewrapped = GUIDE.replace(
        "The job runs `rechunk sync` on the `docs/` folder\nevery night at two.",
        "The job runs `rechunk sync`\non the `docs/` folder every\nnight at two.",
    )
    assert parse(rewrapped) == EXPECTED
    assert parse(GUIDE.replace("\n", "\r\n")) == EXPECTED


def test_sections_are_hard_boundaries_and_a_source_line_is_no_title() -> None:
    text = parse(_sections(6))
    assert_sections_are_hard(text)
    assert "```sh\nrechunk status --collection kb0\n```" in text
    assert "[source,sh]" not in text


def test_an_edit_in_one_section_leaves_the_others_chunks_as_they_were() -> None:
    assert_an_edit_stays_in_its_section(parse, _sections)


def test_a_file_of_only_comments_and_attributes_has_no_text() -> None:
    with pytest.raises(ParseError, match="no text"):
        parse(":toc:\n// nothing here\n////\nhidden\n////\n")


def test_references_read_as_the_values_their_entries_set() -> None:
    """An operator's handbook read `Handbook version {version}`, the `4` of its
    `:version: 4` entry nowhere in the index. A reference reads as the value set above
    it, outside code ({nbsp} a space, as the parsers write every space); one not set, or
    escaped, stays as AsciiDoc leaves it."""
    text = parse(
        "= Handbook\nAda Ops\n:version: 4\n:product: the {shop} job\n:shop: Harbour\n\n"
        "Use {product}.{nbsp}Section {Version}, not \\{version} or {missing}.\n\n"
        "== Release {version}\n\n* on {shop}\n\n:shop!:\nLater: {shop}.\n\n"
        "|===\n|Name |Value\n|{version} |x\n|===\n\n----\nrun {version}\n----\n"
    )
    assert text == (
        "# Handbook\n\nUse the {shop} job. Section 4, not {version} or {missing}.\n\n"
        "## Release 4\n\n- on Harbour\n\nLater: {shop}.\n\n| Name | Value |\n| 4 | x |\n\n"
        "```\nrun {version}\n```\n"
    )
    # a new value changes the text where it is referenced, and nowhere else
    assert parse(":version: 5\n\nOne.\n\nVersion {version}.\n").endswith("Version 5.\n")


class TestAsciidocContract(ParserContract):
    fmt = "asciidoc"

    def samples(self) -> list[tuple[str, bytes]]:
        return [
            ("guide.adoc", GUIDE.encode()),
            ("runbook.adoc", _sections(3).encode()),
            ("crlf.adoc", GUIDE.replace("\n", "\r\n").encode()),
            ("bom.adoc", b"\xef\xbb\xbf" + _sections(1).encode()),
        ]


def test_a_folder_of_asciidoc_syncs_and_an_edit_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.adoc").write_text(GUIDE)
    (docs / "runbook.asciidoc").write_text(_sections(8))
    monkeypatch.chdir(tmp_path)
    assert [d.doc_id for d in read_documents([docs]).documents] == [
        "guide.adoc", "runbook.asciidoc",
    ]  # fmt: skip
    code, report = run_json(capsys, "sync", "docs")
    assert code == 0 and report["documents"]["new"] == 2, report
    assert report["unsupported_files"] == {}
    (docs / "runbook.asciidoc").write_text(
        _sections(8).replace("alert 3.5 fires", "alert 3.5 fires at night")
    )
    code, report = run_json(capsys, "sync", "docs")
    assert code == 0 and report["documents"]["changed"] == 1
    (doc,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
    assert parse_file(docs / "guide.adoc")[0].metadata["title"].startswith("Operating")


def test_a_line_of_a_hundred_thousand_spaces_is_read_in_one_pass() -> None:
    """A title pattern with three ways to split trailing blanks backtracked cubically: a
    title line padded with 100,000 spaces took hours. Titles are now split by hand."""
    padded = "= Title" + " " * 100_000 + "end\n\n== Next ==" + " " * 100_000 + "\n\nText.\n"
    (doc,) = parser_for("asciidoc").parse(padded.encode(), ParseOptions())
    assert doc.text.startswith("# Title ") and "\n\n## Next\n\nText.\n" in doc.text
