"""LaTeX: written in the Markdown-shaped form the structured policy reads, so its sections
stay hard boundaries; the parser contract, on the project's own documents and on files
pandoc writes; pieces that bound the walker's time; and a folder of .tex files synced by
the real CLI, an edit re-embedding only around it. The documents are the project's own
(a note on how rechunk keeps an index current)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cli_helpers import run_json
from parser_contract import ParserContract
from runbook_checks import assert_an_edit_stays_in_its_section, assert_sections_are_hard

from rechunk.sources import ParseError, ParseOptions, parse_file, parser_for

NOTE = r"""\documentclass[11pt]{article}
\usepackage[utf8]{inputenc}
\usepackage{listings,booktabs,hyperref}
\hypersetup{colorlinks=true, pdftitle={not text}}
\newcommand{\tool}{\texttt{rechunk}}
\title{Keeping an Index \emph{Current}}
\author{The rechunk authors}
\date{\today}

\begin{document}
\maketitle
\tableofcontents

\begin{abstract}
A note on how \tool{} re-embeds only what changed.
\end{abstract}

\section{Why boundaries matter}\label{sec:why}
When a chunk boundary moves, unchanged text is embedded
again~\cite{study2026,wiki}. See Section~\ref{sec:how}
and caf\'e na\"ive --- written by hand.% a comment that is not text

A second paragraph with math $n \log n$ and
\begin{equation}
  R_c = \frac{\text{new}}{\text{all}}
\end{equation}
inside it\footnote{Counted in model tokens.}.

\subsection*{What we keep}
\begin{itemize}
  \item the cache, keyed by hash
  \item the collection
  \begin{enumerate}
    \item its points
    \item its payloads
  \end{enumerate}
  \item[Store] Qdrant or Chroma
\end{itemize}

\begin{lstlisting}[language=Python, caption={Sync}]
def sync(folder):  # a % here is code, not a comment
    return {"new": 1}
\end{lstlisting}

\begin{table}[t]
\centering
\begin{tabular}{lr}
\toprule
Case & Tokens \\
\midrule
small edit & 60 \\
no change & 0 \\
\bottomrule
\end{tabular}
\caption{Tokens embedded per sync.}\label{tab:cost}
\end{table}

\section{How it works}\label{sec:how}
\begin{quote}
Embed only inputs that are new byte for byte.
\end{quote}
\begin{verbatim}
rechunk sync docs {--prune}
\end{verbatim}
\begin{comment}
a draft paragraph, not text
\end{comment}

\begin{thebibliography}{9}
\bibitem{study2026} The revision study.
\end{thebibliography}
\end{document}
text after the document is not read
"""

EXPECTED = r"""# Keeping an Index Current

A note on how rechunk re-embeds only what changed.

## Why boundaries matter

When a chunk boundary moves, unchanged text is embedded again [study2026, wiki]. See Section [sec:how] and café naïve — written by hand.

A second paragraph with math $n \log n$ and \begin{equation} R_c = \frac{\text{new}}{\text{all}} \end{equation} inside it (Counted in model tokens.).

### What we keep

- the cache, keyed by hash
- the collection
  1. its points
  1. its payloads
- Store: Qdrant or Chroma

```python
def sync(folder):  # a % here is code, not a comment
    return {"new": 1}
```

| Case | Tokens |
| small edit | 60 |
| no change | 0 |

Tokens embedded per sync.

## How it works

> Embed only inputs that are new byte for byte.

```
rechunk sync docs {--prune}
```

- [study2026] The revision study.
"""


def _sections(paragraphs: int) -> str:
    """A LaTeX runbook of several sections, each of several paragraphs."""
    out = [r"\documentclass{article}", r"\title{Runbook}", r"\begin{document}", ""]
    for s in range(4):
        out += [rf"\section{{Incident kind {s}}}", ""]
        for k in range(paragraphs):
            out += [
                rf"When alert {s}.{k} fires, check the sync's summary for skipped files,",
                rf"then the stale check, then the store's health endpoint number {k}.",
                "",
            ]
        out += [r"\begin{verbatim}", f"rechunk status --collection kb{s}", r"\end{verbatim}"]
        out += [""]
    return "\n".join([*out, r"\end{document}", ""])


def parse(text: str) -> str:
    (doc,) = parser_for("latex").parse(text.encode(), ParseOptions())
    return doc.text


def test_the_note_is_written_in_markdown_shape() -> None:
    (doc,) = parser_for("latex").parse(NOTE.encode(), ParseOptions())
    assert doc.text == EXPECTED
    assert doc.metadata == {"title": "Keeping an Index Current"}
    kinds = [b.kind for b in doc.blocks]
    assert kinds.count("heading") == 4 and "table" in kinds and kinds.count("code") == 2
    code = next(b for b in doc.blocks if b.kind == "code")
    assert dict(code.locator) == {"line": [40, 43]}  # \begin{lstlisting} to \end
    # the preamble, the date (it would change the text every day), labels, comments,
    # the draft in a comment environment and what follows \end{document} are not text
    for dropped in ("usepackage", "colorlinks", "not text", "The rechunk authors", "sec:why",
                    "comment that", "draft", "after the document"):  # fmt: skip
        assert dropped not in doc.text


def test_a_rewrapped_paragraph_or_crlf_gives_the_same_text() -> None:
    rewrapped = NOTE.replace(
        "When a chunk boundary moves, unchanged text is embedded\nagain~",
        "When a chunk boundary\nmoves, unchanged text is embedded again~",
    )
    assert rewrapped != NOTE
    assert parse(rewrapped) == EXPECTED
    assert parse(NOTE.replace("\n", "\r\n")) == EXPECTED


def test_sections_are_hard_boundaries() -> None:
    text = parse(_sections(6))
    assert_sections_are_hard(text)
    assert "```\nrechunk status --collection kb0\n```" in text


def test_an_edit_in_one_section_leaves_the_others_chunks_as_they_were() -> None:
    assert_an_edit_stays_in_its_section(parse, _sections)


def test_macros_the_document_defines_without_arguments_read_as_their_body() -> None:
    """A paper names its method with a macro: without its body the name would be lost
    from every paragraph. Macros with arguments read as their arguments' text."""
    text = parse(
        "\\newcommand{\\tool}{\\texttt{rechunk}}\n\\newcommand\\me{Ada}\n"
        "\\def\\again{\\again more}\n\\newcommand{\\key}[1]{\\textbf{#1}}\n"
        "\\begin{document}\n\\renewcommand{\\tool}{reChunk}\n"
        "Using \\tool{} by \\me, \\again, \\key{x}; \\contact{Ada}{ada@example.com}.\n"
        "\\end{document}\n"
    )
    # (\contact is no macro pylatexenc knows: its arguments' words are kept apart)
    assert text == "Using reChunk by Ada, more, x; Ada ada@example.com.\n"


def test_a_file_without_a_document_environment_is_all_text() -> None:
    """A chapter file that a main file pulls in with \\input has no preamble."""
    chapter = "\\chapter{Costs}\n\\input{figures}\nEvery sync reports its tokens.\n"
    assert parse(chapter) == "# Costs\n\nEvery sync reports its tokens.\n"


def test_section_and_paragraph_signs_are_kept() -> None:
    assert (
        parse("See \\S~3, \\P 2 and \\S\\S 4--5.\n")
        == "See \u00a7 3, \u00b62 and \u00a7\u00a74\u20135.\n"
    )


def test_a_preamble_alone_has_no_text() -> None:
    with pytest.raises(ParseError, match="no text"):
        parse("\\documentclass{article}\n\\usepackage{x}\n% nothing\n")
    with pytest.raises(ParseError, match="no text"):
        parse("\\documentclass{article}\n\\begin{document}\n\\maketitle\n\\end{document}\n")


def test_verbatim_text_keeps_braces_and_percent_signs_and_the_rest_is_read() -> None:
    """A listing's unbalanced brace or ``%`` must not swallow the text after it."""
    text = parse(
        "\\begin{document}\n\\begin{lstlisting}\nif (x) {\n  y %= 2;\n\\end{lstlisting}\n\n"
        "After the listing \\verb|a{b| here.\n\n\\section{Next}\nMore.\n\\end{document}\n"
    )
    assert (
        text == "```\nif (x) {\n  y %= 2;\n```\n\nAfter the listing a{b here.\n\n## Next\n\nMore.\n"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("word " * 200_000, "word " * 200_000),  # one paragraph of 1 MB
        ("x" * 1_000_000, "x" * 1_000_000),  # one word of 1 MB
        ("\\begin{center}a\\end{center}\n" * 30_000, "a\n\n" * 30_000),  # many environments
        ("{" + "word " * 200_000, "word " * 200_000),  # a group never closed
    ],
    ids=["paragraph", "word", "environments", "unclosed"],
)
def test_large_files_are_read_in_pieces_in_linear_time(source: str, expected: str) -> None:
    """pylatexenc's walker is quadratic in a run of plain text and copies the rest of the
    file at each environment: 1 MB of one paragraph took 30 s. The file is read in
    pieces, and the text is the same as in one."""
    (doc,) = parser_for("latex").parse(source.encode(), ParseOptions())
    assert doc.text == expected.strip() + "\n"


def test_deep_nesting_is_a_parse_error() -> None:
    from rechunk.sources.registry import parse_bytes

    with pytest.raises(ParseError, match="nested too deeply"):
        parse_bytes(parser_for("latex"), b"{" * 20_000 + b"x" + b"}" * 20_000, ParseOptions())


def test_no_document_text_reaches_a_log(caplog: pytest.LogCaptureFixture) -> None:
    """pylatexenc logs the parse errors it recovers from, with the text around them."""
    caplog.set_level(logging.DEBUG)
    text = parse("\\begin{document}\nsecretword \\begin{itemize} \\item x } \\end{enumerate}\n")
    assert "secretword" in text
    assert "secretword" not in caplog.text


def _pandoc(markdown: str) -> bytes:
    pypandoc = pytest.importorskip("pypandoc")
    latex = pypandoc.convert_text(markdown, "latex", format="gfm", extra_args=["--standalone"])
    return str(latex).encode()


GUIDE_MD = """# Operating the sync job

The job runs `rechunk sync` on the `docs/` folder every night, and a run that finds
nothing new embeds nothing.[^1]

[^1]: It still reads every file.

## Options

| Option | Meaning |
|---|---|
| `--prune` | remove what is gone |
| `--encoding` | read legacy files |

- `--dry-run` plans without writing
- `--json` prints the report

```python
report = rechunk.sync("docs")
```

> Keep the index honest.
"""


def test_a_file_pandoc_writes_reads_as_its_source_does() -> None:
    (doc,) = parser_for("latex").parse(_pandoc(GUIDE_MD), ParseOptions())
    assert doc.text == (
        "## Operating the sync job\n\n"
        "The job runs rechunk sync on the docs/ folder every night, and a run that finds "
        "nothing new embeds nothing. (It still reads every file.)\n\n"
        "### Options\n\n"
        "| Option | Meaning |\n| --prune | remove what is gone |\n"
        "| --encoding | read legacy files |\n\n"
        "- --dry-run plans without writing\n- --json prints the report\n\n"
        '```\nreport = rechunk.sync("docs")\n```\n\n'
        "> Keep the index honest.\n"
    )


class TestLatexContract(ParserContract):
    fmt = "latex"

    def samples(self) -> list[tuple[str, bytes]]:
        return [
            ("note.tex", NOTE.encode()),
            ("runbook.tex", _sections(3).encode()),
            ("crlf.tex", NOTE.replace("\n", "\r\n").encode()),
            ("bom.tex", b"\xef\xbb\xbf" + _sections(1).encode()),
            ("chapter.tex", b"\\section{Costs}\nEvery sync reports its tokens.\n"),
            ("pandoc.tex", _pandoc(GUIDE_MD)),
        ]


def test_a_folder_of_latex_syncs_and_an_edit_re_embeds_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "note.tex").write_text(NOTE)
    (paper / "runbook.tex").write_text(_sections(8))
    (paper / "refs.bib").write_text("@misc{study2026, title={The revision study}}\n")
    monkeypatch.chdir(tmp_path)
    code, report = run_json(capsys, "sync", "paper")
    assert code == 0 and report["documents"]["new"] == 2, report
    assert report["unsupported_files"] == {".bib": 1}
    (paper / "runbook.tex").write_text(
        _sections(8).replace("alert 3.5 fires", "alert 3.5 fires at night")
    )
    code, report = run_json(capsys, "sync", "paper")
    assert code == 0 and report["documents"]["changed"] == 1
    (doc,) = [d for d in report["per_document"] if d["status"] == "changed"]
    assert 0 < doc["tokens_embedded"] <= 0.3 * doc["tokens_total"], doc
    assert parse_file(paper / "note.tex")[0].metadata["title"] == "Keeping an Index Current"
