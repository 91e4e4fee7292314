"""Org: written in the Markdown-shaped form the structured policy reads, so its outline's
headlines stay hard boundaries; the parser contract; lines that once cost quadratic
time; and a folder of .org files synced by the real CLI, an edit re-embedding only
around it. The documents are the project's own (an on-call guide to rechunk's sync job)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_json
from parser_contract import ParserContract
from runbook_checks import assert_an_edit_stays_in_its_section, assert_sections_are_hard

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for

GUIDE = """#+TITLE: Operating the sync job
#+AUTHOR: Ada Ops
#+OPTIONS: toc:nil

# an internal note, not text
This guide says how the nightly sync keeps the shop's search index current.
It is read by whoever is on call.

* TODO [#A] Running it                                              :ops:cron:
  SCHEDULED: <2026-12-07 Mon>
  :PROPERTIES:
  :ID: 1234
  :END:
The job runs =rechunk sync= on the [[file:docs][docs folder]]
every night at two.

#+BEGIN_SRC sh :results none
rechunk sync docs --prune
,* not a headline: this is code
#+END_SRC

** Options
- =--prune= removes documents whose files are gone
  and says so
  - nested detail about pruning
- [X] =--dry-run= plans without writing
- term :: a description

1. first step
2) second step

| Option   | Meaning             |
|----------+---------------------|
| --prune  | remove what is gone |
#+TBLFM: $2=$1

#+BEGIN_QUOTE
Keep the index honest.
#+END_QUOTE

#+BEGIN_COMMENT
a comment block
* not a heading either
#+END_COMMENT

#+BEGIN_EXPORT html
<b>export markup</b>
#+END_EXPORT

: fixed width line
: and another

-----
* When it fails
The summary names every file it skipped, and why. See [[https://example.com]].
"""

EXPECTED = """# Operating the sync job

This guide says how the nightly sync keeps the shop's search index current. It is read by whoever is on call.

## TODO Running it

The job runs =rechunk sync= on the docs folder every night at two.

```sh
rechunk sync docs --prune
* not a headline: this is code
```

### Options

- =--prune= removes documents whose files are gone and says so
  - nested detail about pruning
- [X] =--dry-run= plans without writing
- term :: a description
1. first step
1. second step

| Option | Meaning |
| --prune | remove what is gone |

> Keep the index honest.

```
fixed width line
and another
```

## When it fails

The summary names every file it skipped, and why. See https://example.com.
"""


def _sections(paragraphs: int) -> str:
    """An Org runbook of several headlines, each of several paragraphs."""
    out = ["#+TITLE: Runbook", ""]
    for s in range(4):
        out += [f"* Incident kind {s}", ":PROPERTIES:", f":CUSTOM_ID: kind-{s}", ":END:", ""]
        for k in range(paragraphs):
            out += [
                f"When alert {s}.{k} fires, check the sync's summary for skipped files,",
                f"then the stale check, then the store's health endpoint number {k}.",
                "",
            ]
        out += ["#+begin_src sh", f"rechunk status --collection kb{s}", "#+end_src", ""]
    return "\n".join(out)


def parse(text: str) -> str:
    (doc,) = parser_for("org").parse(text.encode(), ParseOptions())
    return doc.text


def test_the_guide_is_written_in_markdown_shape() -> None:
    (doc,) = parser_for("org").parse(GUIDE.encode(), ParseOptions())
    assert doc.text == EXPECTED
    assert doc.metadata == {"title": "Operating the sync job"}
    kinds = [b.kind for b in doc.blocks]
    assert kinds.count("heading") == 4 and "table" in kinds and kinds.count("code") == 2
    code = next(b for b in doc.blocks if b.kind == "code")
    assert dict(code.locator) == {"line": [17, 20]}  # #+BEGIN_SRC to #+END_SRC
    for dropped in ("Ada Ops", "toc:nil", "internal note", ":ops:", "[#A]", "SCHEDULED",
                    "1234", "$2=$1", "comment block", "export markup", "file:docs"):  # fmt: skip
        assert dropped not in doc.text


def test_a_rewrapped_paragraph_or_crlf_gives_the_same_text() -> None:
    rewrapped = GUIDE.replace(
        "The job runs =rechunk sync= on the [[file:docs][docs folder]]\nevery night at two.",
        "The job runs =rechunk sync=\non the [[file:docs][docs folder]] every\nnight at two.",
    )
    assert rewrapped != GUIDE
    assert parse(rewrapped) == EXPECTED
    assert parse(GUIDE.replace("\n", "\r\n")) == EXPECTED


def test_headlines_are_hard_boundaries() -> None:
    text = parse(_sections(6))
    assert_sections_are_hard(text)
    assert "```sh\nrechunk status --collection kb0\n```" in text
    assert "CUSTOM_ID" not in text


def test_an_edit_in_one_section_leaves_the_others_chunks_as_they_were() -> None:
    assert_an_edit_stays_in_its_section(parse, _sections)


def test_a_drawer_that_never_closes_is_text_and_keywords_alone_are_none() -> None:
    assert parse(":NOTE:\nnot a drawer\n") == ":NOTE: not a drawer\n"
    with pytest.raises(ParseError, match="no text"):
        parse("#+TITLE:\n#+OPTIONS: toc:nil\n# only a comment\n:PROPERTIES:\n:END:\n")


@pytest.mark.parametrize(
    "source",
    [
        "* Title" + " " * 100_000 + "end :a:\n\nText.\n",  # blanks before tags
        ":A:\n" * 20_000 + "Text.\n",  # drawers that never close
        " " * 100_000 + "Text.\n- item" + " " * 100_000 + "\n",
    ],
    ids=["headline", "drawers", "list"],
)
def test_lines_that_once_took_quadratic_time_are_read_in_one_pass(source: str) -> None:
    """A tags pattern backtracked over a headline's blanks, and every unclosed drawer
    looked for its end to the end of the file: 50,000 of them took four minutes."""
    (doc,) = parser_for("org").parse(source.encode(), ParseOptions())
    assert "Text." in doc.text


class TestOrgContract(ParserContract):
    fmt = "org"

    def samples(self) -> list[tuple[str, bytes]]:
        return [
            ("guide.org", GUIDE.encode()),
            ("runbook.org", _sections(3).encode()),
            ("crlf.org", GUIDE.replace("\n", "\r\n").encode()),
            ("bom.org", b"\xef\xbb\xbf" + _sections(1).encode()),
        ]


def test_a_folder_of_org_notes_syncs_and_an_edit_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "guide.org").write_text(GUIDE)
    (notes / "runbook.org").write_text(_sections(8))
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "notes")
    assert code == 0 and report["documents"]["new"] == 2, report
    assert report["unsupported_files"] == {}
    (notes / "runbook.org").write_text(
        _sections(8).replace("alert 3.5 fires", "alert 3.5 fires at night")
    )
    code, report = run_json(capsys, "sync", "notes")
    assert code == 0 and report["documents"]["changed"] == 1
    (doc,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
    assert parse_file(notes / "guide.org")[0].metadata["title"] == "Operating the sync job"
