"""Documents from one file: its format picks the parser, a code file's suffix its language.

This is what ``rechunk sync`` reads each file with. A parsed file becomes one
:class:`~rechunk.Document` (one per record for JSON and JSONL, whose doc_id is
``path#id``) with metadata naming its ``format`` and ``parser`` (name and version, plus
what the format states: a title, an e-mail's subject) and a ``locator`` that gives each
chunk the pages, section, slide or lines it spans. A code file's text is the file as it
is; its metadata names the ``language`` (``None`` when no grammar reads it: the sync
then chunks it with the recursive policy and says so).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rechunk.document import Document, flat_problem
from rechunk.errors import ConfigError, InputError, MissingDependencyError
from rechunk.sources.base import Locator, NoTextError, Parsed, ParseError
from rechunk.sources.encoding import declared_encoding
from rechunk.sources.registry import FORMATS, ParseOptions, format_for, parse_bytes, parser_for
from rechunk.sources.scripts import script_language

__all__ = [
    "CODE",
    "OTHER_CODE_SUFFIXES",
    "code_language",
    "documents_from_file",
    "kind_of",
    "readable_suffixes",
]

#: the format name of source code (chunked by the code policy of its language)
CODE = "code"

#: code suffixes of languages without a grammar here: read as code, chunked by the
#: recursive policy (the report says so), never counted as an unsupported type
OTHER_CODE_SUFFIXES = {
    ".pl": "perl",
    ".pm": "perl",
    ".r": "r",
    ".m": "objective-c",
    ".mm": "objective-c",
    ".sql": "sql",
    ".ps1": "powershell",
    ".psm1": "powershell",
    ".bat": "batch",
    ".cmd": "batch",
    ".ex": "elixir",
    ".exs": "elixir",
    ".erl": "erlang",
    ".hrl": "erlang",
    ".hs": "haskell",
    ".sol": "solidity",
    ".pyx": "cython",
    ".pxd": "cython",
    ".pxi": "cython",
    # web components and stylesheets beside the JavaScript and CSS the grammars read
    ".vue": "vue",
    ".svelte": "svelte",
    ".scss": "scss",
    ".sass": "sass",
    ".less": "less",
    # other languages and the schema and build files kept beside code
    ".dart": "dart",
    ".groovy": "groovy",
    ".gradle": "groovy",
    ".jl": "julia",
    ".clj": "clojure",
    ".cljs": "clojure",
    ".cljc": "clojure",
    ".ml": "ocaml",
    ".mli": "ocaml",
    ".zig": "zig",
    ".nim": "nim",
    ".elm": "elm",
    ".f90": "fortran",
    ".tcl": "tcl",
    ".proto": "protobuf",
    ".graphql": "graphql",
    ".gql": "graphql",
    ".cmake": "cmake",
    ".nix": "nix",
    ".bzl": "starlark",
    # settings and the templates configuration is rendered from (Ansible's, Salt's)
    ".ini": "ini",
    ".cfg": "ini",
    ".conf": "conf",
    ".properties": "properties",
    ".j2": "jinja",
    ".jinja": "jinja",
    ".jinja2": "jinja",
}


def code_language(path: str | Path, text: str | None = None) -> str | None:
    """The language whose grammar reads a code file: by its suffix or name, else (no
    suffix, given its ``text``) by the interpreter its first line names; None when no
    grammar here reads it."""
    from rechunk.chunkers.code_languages import LANGUAGES, language_for

    found = language_for(path, text)
    if found is None and text is not None:
        script = script_language(path, text)
        found = script if script in LANGUAGES else None
    return found


def kind_of(path: str | Path, forced: str | None = None, head: bytes | None = None) -> str | None:
    """The format a file is read as: ``forced`` (``--format``), else the one its suffix
    names, else :data:`CODE` for a source file (by its suffix or name, or, given its first
    bytes as ``head``, a script with no suffix), else None (an unsupported type)."""
    if forced is not None:
        if forced != CODE and forced not in FORMATS:
            raise ConfigError(
                f"--format {forced!r}: not a format (one of {', '.join([*FORMATS, CODE])})"
            )
        return forced
    path = Path(path)
    fmt = format_for(path)
    if fmt is not None:
        return fmt
    if code_language(path) is not None or path.suffix.lower() in OTHER_CODE_SUFFIXES:
        return CODE
    if head is not None and script_language(path, head) is not None:
        return CODE
    return None


def readable_suffixes() -> tuple[str, ...]:
    """Every suffix ``rechunk sync`` reads by default: the parsers' and the code's."""
    from rechunk.chunkers.code_languages import LANGUAGES
    from rechunk.sources.registry import supported_suffixes

    code = {suffix for spec in LANGUAGES.values() for suffix in spec.suffixes}
    return tuple(sorted({*supported_suffixes(), *code, *OTHER_CODE_SUFFIXES}))


def _flat(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A parser's metadata as flat values every store holds: a value that is not flat (a
    nested record, an empty list) is kept as its JSON text."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if value is None or value == "":
            continue
        if flat_problem({key: value}, "metadata") is None:
            out[key] = value
        else:
            out[key] = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return out


@functools.lru_cache(maxsize=16)
def _code_chunker(language: str) -> Any:
    from rechunk.chunkers.code import CodeChunker

    return CodeChunker(language)


def _code_locator(text: str, language: str | None) -> Callable[[int, int], Mapping[str, Any]]:
    """Where a span of a code file is (symbol, lines), parsed on first use; the lines
    alone for a language with no grammar here, or without the ``code`` extra (whose
    files the recursive policy chunks: the sync goes on and says so)."""
    from rechunk.chunkers.code import row_starts, span_lines

    where: list[Callable[[int, int], dict[str, Any]]] = []

    def lines_only(start: int, end: int) -> dict[str, Any]:
        return {"lines": span_lines(text, starts, start, end)[0]}

    def locator(start: int, end: int) -> Mapping[str, Any]:
        if not where:
            try:
                where.append(_code_chunker(language).locator(text) if language else lines_only)
            except MissingDependencyError:
                where.append(lines_only)
        found = dict(where[0](start, end))
        found.pop("language", None)  # in the document's metadata already
        return found

    starts = row_starts(text)
    return locator


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def documents_from_file(
    path: str | Path,
    doc_id: str,
    fmt: str | None = None,
    options: ParseOptions | None = None,
    *,
    data: bytes | None = None,
) -> list[Document]:
    """The documents of one file, read as ``fmt`` (see :func:`kind_of`).

    Raises :class:`~rechunk.sources.ParseError` (one line: the file is skipped) when the
    file cannot be parsed, :class:`InputError` when it cannot be read or no parser reads
    its type. A file whose text is empty or blank gives no document, and so does one
    of any format whose bytes are (a PDF emptied to 0 bytes is emptied, not corrupt).
    ``data``: the file's bytes, when the caller has read them (see
    :func:`rechunk.sources.files.read_bytes`)."""
    path = Path(path)
    kind = kind_of(path, fmt)
    if kind is None and not path.suffix:  # a script, if its first line says so
        data = _read(path) if data is None else data
        kind = kind_of(path, fmt, head=data)
    if kind is None:
        raise InputError(f"{path}: no parser reads {path.suffix or 'files without a suffix'}")
    if data is None:
        data = _read(path)
    if not data or data.isspace():  # emptied: a PDF or DOCX of 0 bytes as a text file's
        return []
    options = options or ParseOptions()
    if kind == CODE:
        try:
            text, read = options.decode(data, declared_encoding(data))
        except ParseError as exc:
            raise ParseError(exc.reason, path) from None
        if not text.strip():
            return []
        language = code_language(path, text)
        name = (
            language or OTHER_CODE_SUFFIXES.get(path.suffix.lower()) or script_language(path, text)
        )
        metadata: dict[str, Any] = {"format": CODE, "parser": "code/1", **read}
        if name:
            metadata["language"] = name
        return [Document(doc_id, text, metadata=metadata, locator=_code_locator(text, language))]
    try:
        parsed_all = parse_bytes(parser_for(kind), data, options)
    except NoTextError:  # it parsed and holds no text: empty, as a file of 0 bytes is
        return []
    except ParseError as exc:
        raise ParseError(exc.reason, path) from None
    return [_document(doc_id, kind, parsed) for parsed in parsed_all if parsed.text.strip()]


def _document(doc_id: str, kind: str, parsed: Parsed) -> Document:
    metadata = {**_flat(parsed.metadata), "format": kind, "parser": parsed.version}
    name = doc_id if parsed.part is None else f"{doc_id}#{parsed.part}"
    return Document(name, parsed.text, metadata=metadata, locator=Locator(parsed))
