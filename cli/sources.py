"""What `rechunk sync` and `rechunk reindex` add for parsed files and code: the
``--format``, ``--id-field``, ``--encoding`` and ``--html-include`` / ``--html-exclude``
options, the chunker each document gets
(the code policy of its language, else the command's policy), and the summary's lines
about them."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from rechunk.chunking.chunk import Chunker
from rechunk.cli.summary import formats
from rechunk.document import Document
from rechunk.sources import FORMATS, ParseOptions
from rechunk.sources.documents import CODE

__all__ = ["Chooser", "add_source_options", "parse_options", "source_notes"]


def add_source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=[*FORMATS, CODE],
        default=None,
        metavar="FORMAT",
        help="read every matching file as FORMAT, whatever its suffix (one of "
        f"{', '.join([*FORMATS, CODE])}; default: by suffix)",
    )
    p.add_argument(
        "--id-field",
        default=None,
        metavar="FIELD",
        help="JSON and JSONL files: the field whose value is a record's id (its doc_id is "
        "PATH#ID; default: the record's position)",
    )
    p.add_argument(
        "--encoding",
        default=None,
        metavar="NAME",
        action=_Once,
        help="text files (text, Markdown, RST, AsciiDoc, Org, LaTeX, CSV, code; an HTML page "
        "that declares no charset) that are not UTF-8 are read in this encoding (cp1252, "
        "latin-1, shift_jis, utf-16, ...); a byte-order mark or valid UTF-8 decides first, "
        "then a code file's coding declaration ('# -*- coding: latin-1 -*-') "
        "(default: such files are skipped with the reason). It applies to every such file "
        "read: sync files saved in another encoding on their own, each with its own",
    )
    p.add_argument(
        "--html-include",
        action="append",
        default=None,
        metavar="SELECTOR",
        help="HTML pages: read only the elements this CSS selector matches, repeatable "
        "('#content', 'div.doc-body'; a page none matches is skipped; default: the "
        "page's main or article, else its body)",
    )
    p.add_argument(
        "--html-exclude",
        action="append",
        default=None,
        metavar="SELECTOR",
        help="HTML pages: also leave out the elements this CSS selector matches, "
        "repeatable ('div.navbar', '.breadcrumbs', '#footer'), for a site template "
        "built from plain divs (nav, header, footer, aside and ARIA roles are left out "
        "already)",
    )


class _Once(argparse.Action):
    """An option that takes one value: given twice, the first was dropped in silence."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
        option_string: str | None = None,
    ) -> None:  # fmt: skip
        if getattr(namespace, self.dest) is not None:
            parser.error(
                f"{option_string} given twice: it takes one value, for every file it "
                "applies to (sync files that need another on their own)"
            )
        setattr(namespace, self.dest, values)


def parse_options(args: argparse.Namespace) -> ParseOptions:
    """The parsers' options of ``args``; a selector that is not CSS is refused here, before
    any file is read (a folder without a page would take it in silence)."""
    include = tuple(getattr(args, "html_include", None) or ())
    exclude = tuple(getattr(args, "html_exclude", None) or ())
    if include or exclude:
        from rechunk.sources.html import check_selectors

        check_selectors(include, "--html-include")
        check_selectors(exclude, "--html-exclude")
    return ParseOptions(
        id_field=getattr(args, "id_field", None),
        html_include=include,
        html_exclude=exclude,
        encoding=getattr(args, "encoding", None),
    )


class Chooser:
    """Picks each document's chunker: a code file's language gets the code policy sized
    for the embedder (once per language); a language without a grammar here, or without
    the ``code`` extra, gets the recursive policy with chunks of about the same size, and
    :attr:`fallbacks` counts them by language with the reason
    (:func:`rechunk.chunking.policy.code_policy_for`); every other document gets the
    command's policy (None)."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self._chunkers: dict[str, Chunker] = {}
        self.fallbacks: Counter[str] = Counter()
        self.reasons: dict[str, str] = {}

    def _for_language(self, language: str) -> Chunker:
        from rechunk.chunking.policy import code_policy_for

        if language not in self._chunkers:
            chunker, reason = code_policy_for(self._embedder, language)
            self._chunkers[language] = chunker
            if reason is not None:
                self.reasons[language] = reason
        if language in self.reasons:
            self.fallbacks[language] += 1
        return self._chunkers[language]

    def fields(self) -> dict[str, Any]:
        """The code files chunked by the recursive policy, for --json reports:
        ``{"sql": {"files": 3, "reason": "..."}}``."""
        return {
            language: {"files": count, "reason": self.reasons[language]}
            for language, count in sorted(self.fallbacks.items())
        }

    def __call__(self, doc: Document) -> Chunker | None:
        metadata = doc.metadata or {}
        if metadata.get("format") != CODE:
            return None
        return self._for_language(str(metadata.get("language") or "unknown"))


def source_notes(files: Any, report: Any, chooser: Chooser | None) -> list[tuple[str, str]]:
    """Summary rows: documents per format (unless all are prose), documents per policy
    (when more than one), code chunked by the recursive policy for want of a grammar,
    and files of types no parser reads."""
    rows: list[tuple[str, str]] = []
    read = formats(files)
    if len(read) > 1 or (read and "markdown" not in read and "text" not in read):
        rows.append(("formats", ", ".join(f"{f} {n}" for f, n in read.items())))
    policies = getattr(report, "policies", {})
    if len(policies) > 1:
        prose = [f"{p} {n}" for p, n in sorted(policies.items()) if not p.startswith("code-")]
        code = [  # code-<language>-<grammar version>-<hash>: by language
            f"{p.split('-')[1]} {n}" for p, n in sorted(policies.items()) if p.startswith("code-")
        ]
        if code:
            prose.append("code: " + ", ".join(code))
        rows.append(("policies", "; ".join(prose)))
    if chooser is not None and chooser.fallbacks:
        counts = ", ".join(f"{language} {n}" for language, n in sorted(chooser.fallbacks.items()))
        rows.append(("no grammar", f"{counts} (chunked by the recursive policy)"))
    if files.unsupported:
        counts = ", ".join(
            f"{suffix or '(no suffix)'} {n}" for suffix, n in sorted(files.unsupported.items())
        )
        note = "no parser reads these types: not read; --format forces one"
        rows.append(("unsupported", f"{counts} ({note})"))
    return rows
