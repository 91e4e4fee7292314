"""Which parser reads which file: by suffix, or by a format named with ``--format``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from rechunk.errors import ConfigError, InputError, RechunkError
from rechunk.sources.base import NoTextError, Parsed, ParseError, Parser, error_kind
from rechunk.sources.encoding import check_encoding, decode_text_as

__all__ = [
    "FORMATS",
    "ParseOptions",
    "format_for",
    "parse_bytes",
    "parse_file",
    "parser_for",
    "supported_suffixes",
]


@dataclass(frozen=True)
class ParseOptions:
    """Options some parsers take.

    ``id_field``: for JSON and JSONL records, the field whose value is a record's id
    (its doc_id is ``path#id``); without it a record's id is its position.
    ``html_include`` / ``html_exclude``: CSS selectors of the HTML elements to read
    (instead of ``main``, ``article`` or ``body``) and to drop (beside the built-in
    boilerplate rules), for a site whose template the rules do not know.
    ``encoding``: the encoding of text files that are not UTF-8 (``cp1252``; an unknown
    name is a :class:`ConfigError`), and ``detect_encoding``: failing that, try the
    encoding detected (see :mod:`rechunk.sources.encoding`: a byte-order mark or valid
    UTF-8 always decides first).
    """

    id_field: str | None = None
    html_include: tuple[str, ...] = ()
    html_exclude: tuple[str, ...] = ()
    encoding: str | None = None
    detect_encoding: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoding", check_encoding(self.encoding))

    def decode(self, data: bytes, declared: str | None = None) -> tuple[str, dict[str, str]]:
        """A text file's bytes as its text (:func:`rechunk.sources.encoding.decode_text`
        with these options; ``declared``: the encoding the file names itself), and the
        metadata that says how it was read: nothing for UTF-8, else
        ``{"encoding": codec}`` (``utf-16-le``, ``iso8859-1``...)."""
        text, codec = decode_text_as(
            data, self.encoding, detect=self.detect_encoding, declared=declared
        )
        return text, ({} if codec == "utf-8" else {"encoding": codec})


# format name -> (module:class, suffixes). Each module is imported on first use only.
FORMATS: dict[str, tuple[str, tuple[str, ...]]] = {
    "text": ("rechunk.sources.text:TextParser", (".txt", ".text")),
    "markdown": ("rechunk.sources.text:MarkdownParser", (".md", ".markdown", ".mdx")),
    "rst": ("rechunk.sources.text:RstParser", (".rst",)),
    "asciidoc": ("rechunk.sources.asciidoc:AsciidocParser", (".adoc", ".asciidoc")),
    "org": ("rechunk.sources.org:OrgParser", (".org",)),
    "latex": ("rechunk.sources.latex:LatexParser", (".tex", ".latex", ".ltx")),
    "html": ("rechunk.sources.html:HtmlParser", (".html", ".htm", ".xhtml")),
    "pdf": ("rechunk.sources.pdf:PdfParser", (".pdf",)),
    "docx": ("rechunk.sources.docx:DocxParser", (".docx",)),
    "odt": ("rechunk.sources.odt:OdtParser", (".odt", ".ott")),
    "ods": ("rechunk.sources.ods:OdsParser", (".ods", ".ots")),
    "odp": ("rechunk.sources.odp:OdpParser", (".odp", ".otp")),
    "rtf": ("rechunk.sources.rtf:RtfParser", (".rtf",)),
    "epub": ("rechunk.sources.epub:EpubParser", (".epub",)),
    "pptx": ("rechunk.sources.pptx:PptxParser", (".pptx",)),
    "xlsx": ("rechunk.sources.sheets:XlsxParser", (".xlsx", ".xlsm")),
    "csv": ("rechunk.sources.sheets:CsvParser", (".csv", ".tsv")),
    "ipynb": ("rechunk.sources.notebook:NotebookParser", (".ipynb",)),
    "eml": ("rechunk.sources.email:EmailParser", (".eml",)),
    "json": ("rechunk.sources.records:JsonParser", (".json",)),
    "jsonl": ("rechunk.sources.records:JsonlParser", (".jsonl", ".ndjson")),
}

_BY_SUFFIX = {suffix: name for name, (_, suffixes) in FORMATS.items() for suffix in suffixes}
_LOADED: dict[str, Parser] = {}


def supported_suffixes() -> tuple[str, ...]:
    """Every suffix some parser reads (lower case, with the dot)."""
    return tuple(sorted(_BY_SUFFIX))


def format_for(path: str | Path) -> str | None:
    """The format a file's suffix names (case-insensitive), or None."""
    return _BY_SUFFIX.get(Path(path).suffix.lower())


_CODE_HINT = (
    "; source code is read as it is (LangChain's TextLoader, LlamaIndex's "
    "SimpleDirectoryReader) and split by the code policy "
    "(RechunkTextSplitter.from_language, RechunkNodeParser(policy='code'))"
)


def parser_for(fmt: str) -> Parser:
    """The parser of format ``fmt`` (a key of :data:`FORMATS`)."""
    parser = _LOADED.get(fmt)
    if parser is None:
        if fmt not in FORMATS:
            hint = _CODE_HINT if fmt == "code" else ""
            raise ConfigError(
                f"format {fmt!r} is not one a parser reads (one of {', '.join(FORMATS)}){hint}"
            )
        module, _, cls = FORMATS[fmt][0].partition(":")
        parser = getattr(importlib.import_module(module), cls)()
        _LOADED[fmt] = parser
    return parser


def parse_file(
    path: str | Path, fmt: str | None = None, options: ParseOptions | None = None
) -> list[Parsed]:
    """The documents in one file, read by ``fmt``'s parser or the one its suffix names.

    Raises :class:`ParseError` (an :class:`~rechunk.errors.InputError`) with a one-line
    reason when the file cannot be parsed, and :class:`InputError` when it cannot be read
    or no parser reads its type."""
    path = Path(path)
    name = fmt or format_for(path)
    if name is None:
        from rechunk.sources.documents import CODE, kind_of  # it builds on this module

        if kind_of(path) == CODE:  # what `rechunk sync` reads as code: say what reads it here
            raise InputError(f"{path}: source code, which no parser reads{_CODE_HINT}")
        raise InputError(f"{path}: no parser reads {path.suffix or 'files without a suffix'}")
    parser = parser_for(name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return parse_bytes(parser, data, options or ParseOptions())
    except NoTextError as exc:  # the same kind, so a caller can tell empty from broken
        raise NoTextError(exc.reason, path) from None
    except ParseError as exc:
        raise ParseError(exc.reason, path) from None


def parse_bytes(parser: Parser, data: bytes, options: ParseOptions) -> list[Parsed]:
    """``parser.parse(data, options)``, where one file cannot end a sync of the others: a
    file nested deeper than Python's stack (thousands of nested elements: a parser walks
    them recursively) is a :class:`ParseError`, and so is any other exception a parser's
    library raises on a file it was not built for, named by its class only
    (:func:`~rechunk.sources.base.error_kind`: its message may quote the file). So is a
    file whose reading ran out of memory: what it allocated is freed as the error
    unwinds, and the other files are read (a page inflating to gigabytes of text ended
    a sync of a whole folder)."""
    try:
        return parser.parse(data, options)
    except RecursionError:
        raise ParseError("corrupt: nested too deeply to read") from None
    except MemoryError:
        raise ParseError(
            f"too large to read in the memory available ({len(data):,} bytes on disk; "
            "--max-file-bytes leaves such files out unread)"
        ) from None
    except (RechunkError, ImportError):  # ours, or the environment's
        raise
    except Exception as exc:  # a library's own failure on a file it did not expect
        raise ParseError(
            f"corrupt, or a case the {parser.name} parser does not handle ({error_kind(exc)})"
        ) from None
