"""rechunk's parsers as a LangChain document loader.

Install with ``pip install 'rechunk[langchain,formats]'``.

:class:`RechunkLoader` is a ``langchain_core.document_loaders.BaseLoader`` over
:mod:`rechunk.sources`: one ``Document`` per file (one per record for JSON and JSONL),
whose ``page_content`` is the revision-stable text ``rechunk sync`` chunks (a site's
menus, a PDF's running headers and page numbers left out), so a user swaps
``PyPDFLoader`` / ``BSHTMLLoader`` / ``Docx2txtLoader`` for it and keeps the rest of the
pipeline. Pair it with :class:`rechunk.adapters.langchain.RechunkTextSplitter`.

Metadata, with LangChain's usual keys where they overlap: ``source`` (the path as given,
a record's too, as ``JSONLoader`` gives it; a record's id is ``record``, and its
``Document.id`` is ``path#id``), ``format`` (the parser's format name), ``parser`` (the
parser's name and version), and what the format states of the whole document
(``title``, an e-mail's ``subject``...; a PDF's page count as ``total_pages``, as
``PyPDFLoader`` names it). Where each chunk lies (``pages``, ``section``, ``rows``,
``slides``..., as ``rechunk sync`` writes them) is added by ``RechunkTextSplitter``'s
``split_documents``, which finds each loaded document's parse
(:mod:`rechunk.adapters._locators`); LangChain's own splitters see text and the
document's metadata only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rechunk._optional import require
from rechunk.adapters._locators import remember
from rechunk.errors import ConfigError
from rechunk.sources import ParseOptions, format_for, parse_file

require("langchain_core", "langchain")

from langchain_core.document_loaders import BaseLoader  # noqa: E402
from langchain_core.documents import Document  # noqa: E402

__all__ = ["RechunkLoader"]


#: other loaders' arguments a user swapping them keeps by habit, and what to do instead
_OTHER_LOADERS = {
    "password": "encrypted PDFs are not read: decrypt the file first (qpdf --decrypt)",
    "mode": (
        "each file is one document (a record file: one per record); for pieces, split the "
        "documents with RechunkTextSplitter"
    ),
    "extract_images": "images are not read (their text, if any, is not extracted)",
    "bs_kwargs": "HTML is parsed by rechunk's own reader; name parts to drop with html_exclude",
    "get_text_separator": "HTML text keeps its blocks as paragraphs; nothing to set",
    "jq_schema": "a JSON or JSONL file is read record by record; name the id with id_field",
    "content_key": "a record's text is all its fields; name the id with id_field",
    "csv_args": "a CSV or TSV row is read as a line beside its header; nothing to set",
    "extraction_mode": (
        "a PDF's text is read in reading order, its running headers, footers and page "
        "numbers left out; nothing to set"
    ),
    "extraction_kwargs": "a PDF's text is read in reading order; nothing to set",
    "pages_delimiter": (
        "a PDF is one document, and the chunks RechunkTextSplitter cuts of it cite their "
        "pages (pages); nothing to set"
    ),
    "images_parser": "images are not read (their text, if any, is not extracted)",
    "headers": "paths are local files: download the file, then load it",
    "web_path": "paths are local files: save the page, then load it",
    "web_paths": "paths are local files: save the pages, then load them",
    "strategy": "each format has one reader; nothing to set",
    "chunking_strategy": "each file is one document: split them with RechunkTextSplitter",
}
_NOT_TAKEN = (
    "not an argument of RechunkLoader (paths or file_path, encoding or open_encoding, "
    "autodetect_encoding, format, id_field, html_include, html_exclude)"
)


class RechunkLoader(BaseLoader):
    """Load files through rechunk's parsers.

    ``paths``: one file or several (folders are not searched: use ``rechunk sync`` or
    LangChain's ``DirectoryLoader(..., loader_cls=RechunkLoader)``). ``format`` forces a
    parser (a name of :data:`rechunk.sources.FORMATS`); by default the suffix picks it.
    ``id_field`` names a JSON record's id field. A file that cannot be parsed raises
    :class:`rechunk.sources.ParseError` (an ``InputError``, so a ``ValueError``).

    ``file_path`` (the name LangChain's file loaders give it) is taken for ``paths``, and
    ``BSHTMLLoader``'s ``open_encoding`` for ``encoding``; another loader's argument
    (``password``, ``mode``, ``jq_schema``...) is a ``ConfigError`` saying what to do.

    ``encoding`` and ``autodetect_encoding`` are ``TextLoader``'s, in its order, for text,
    Markdown, RST, AsciiDoc, Org, LaTeX, CSV and code files (and an HTML page that
    declares no charset), with one difference: a byte-order mark or valid UTF-8 decides
    first, so ``encoding`` is the encoding of the files that are not UTF-8 and a folder of
    mixed files loads in one call; ``autodetect_encoding`` then tries the encoding
    charset-normalizer detects (``formats`` extra). An unknown encoding is a
    :class:`rechunk.errors.ConfigError`.
    """

    def __init__(
        self,
        paths: str | Path | Sequence[str | Path] | None = None,
        encoding: str | None = None,
        autodetect_encoding: bool = False,
        *,
        format: str | None = None,
        id_field: str | None = None,
        html_include: Sequence[str] = (),
        html_exclude: Sequence[str] = (),
        file_path: str | Path | None = None,
        open_encoding: str | None = None,
        **others: Any,
    ) -> None:
        for name in others:
            raise ConfigError(f"{name}: {_OTHER_LOADERS.get(name, _NOT_TAKEN)}")
        if (paths is None) == (file_path is None):
            raise ConfigError(
                "give the files as paths (or file_path, as LangChain's file loaders name it)"
            )
        if open_encoding is not None and encoding is not None:
            raise ConfigError("encoding and open_encoding name one thing: give one")
        given = file_path if paths is None else paths
        encoding = open_encoding if encoding is None else encoding
        self.paths = [given] if isinstance(given, (str, Path)) else list(given or ())
        self.format = format
        self.options = ParseOptions(
            id_field,
            tuple(html_include),
            tuple(html_exclude),
            encoding=encoding,
            detect_encoding=autodetect_encoding,
        )

    def lazy_load(self) -> Iterator[Document]:
        for path in self.paths:
            fmt = self.format or format_for(path)
            for parsed in parse_file(path, fmt, self.options):
                # ``source`` is the file, as LangChain's loaders (JSONLoader's too) give it:
                # index()'s cleanup deletes by source, so a record removed from the file
                # goes when the file is indexed again; the record is ``record`` and the id
                metadata: dict[str, Any] = {
                    "source": str(path),
                    "format": fmt,
                    "parser": parsed.version,
                    **parsed.metadata,
                }
                if parsed.part is not None:
                    metadata["record"] = parsed.part
                if fmt == "pdf" and "pages" in metadata:
                    # PyPDFLoader's key: in rechunk, pages are a chunk's [first, last]
                    metadata["total_pages"] = metadata.pop("pages")
                doc_id = str(path) if parsed.part is None else f"{path}#{parsed.part}"
                doc = Document(page_content=parsed.text, metadata=metadata, id=doc_id)
                remember(doc, parsed)  # for the splitter's per-chunk locators
                yield doc
