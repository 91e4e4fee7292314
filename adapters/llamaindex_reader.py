"""rechunk's parsers as a LlamaIndex reader.

Install with ``pip install 'rechunk[llamaindex,formats]'``.

:class:`RechunkReader` is a ``llama_index.core.readers.base.BaseReader`` over
:mod:`rechunk.sources`: one ``Document`` per file (one per record for JSON and JSONL)
whose text is the revision-stable text ``rechunk sync`` chunks (a site's menus, a
PDF's running headers and page numbers left out). Use it on its own, or give it to
``SimpleDirectoryReader(file_extractor={".pdf": reader, ".html": reader, ...})`` (see
:meth:`RechunkReader.file_extractor`) and keep the rest of the pipeline; pair it with
:class:`rechunk.adapters.llamaindex.RechunkNodeParser`.

Metadata: what ``SimpleDirectoryReader`` passes as ``extra_info`` (``file_path``,
``file_name``, ``file_type``, sizes and dates), else ``file_path`` and ``file_name``;
then ``format``, ``parser`` (name and version) and what the format states of the whole
document (``title``, a PDF's page count as ``total_pages``...). Where each node lies
(``pages``, ``section``, ``rows``...) is added by ``RechunkNodeParser``, which finds each
read document's parse (:mod:`rechunk.adapters._locators`); LlamaIndex's own node parsers
see text and the document's metadata only. ``Document.id_`` is the path (``path#id``
for a record), so an ingestion pipeline's docstore sees one document per file across runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rechunk._optional import require
from rechunk.adapters._locators import locator_digest, remember
from rechunk.errors import ConfigError, InputError
from rechunk.sources import ParseOptions, format_for, parse_file, supported_suffixes
from rechunk.sources.base import HOW_READ_KEYS

require("llama_index.core", "llamaindex", "llama-index-core")

from llama_index.core import Document  # noqa: E402
from llama_index.core.readers.base import BaseReader  # noqa: E402

__all__ = ["LOCATOR_DIGEST", "RechunkReader"]

#: The metadata key of :func:`rechunk.adapters._locators.locator_digest`: where the
#: document's blocks lie, so that LlamaIndex re-splits a document whose pages moved.
LOCATOR_DIGEST = "locator_digest"
#: Keys that say how a document's text was read, not what it says: kept out of what is
#: embedded and of what the LLM is shown
_HOW_READ = (*HOW_READ_KEYS, LOCATOR_DIGEST)


#: other readers' arguments a user swapping them keeps by habit, and what to do instead
_OTHER_READERS = {
    "return_full_document": (
        "a PDF is one document, and RechunkNodeParser's nodes of it cite their pages "
        "(pages); nothing to set"
    ),
    "concat_pages": "a PDF is one document whose nodes cite their pages; nothing to set",
    "password": "encrypted PDFs are not read: decrypt the file first (qpdf --decrypt)",
    "extract_images": "images are not read (their text, if any, is not extracted)",
}
_NOT_TAKEN = (
    "not an argument of RechunkReader (format, id_field, html_include, html_exclude, "
    "encoding)"
)


class RechunkReader(BaseReader):
    """Read files through rechunk's parsers.

    ``format`` forces a parser (a name of :data:`rechunk.sources.FORMATS`); by default
    the suffix picks it. ``id_field`` names a JSON record's id field. A file that cannot
    be parsed raises :class:`rechunk.sources.ParseError` (a ``ValueError``);
    ``SimpleDirectoryReader`` reports it and skips the file unless ``raise_on_error``.

    ``encoding``: the encoding of text files (text, Markdown, RST, AsciiDoc, Org, LaTeX,
    CSV, code) that are not UTF-8 (a byte-order mark or valid UTF-8 decides first; an
    unknown name is a :class:`rechunk.errors.ConfigError`). ``SimpleDirectoryReader``'s own
    ``encoding`` reaches only the files it reads itself, not a ``file_extractor``'s: name
    it here.
    """

    def __init__(
        self,
        *,
        format: str | None = None,
        id_field: str | None = None,
        html_include: Sequence[str] = (),
        html_exclude: Sequence[str] = (),
        encoding: str | None = None,
        **other: Any,
    ) -> None:
        for name in other:  # another reader's argument, kept by habit
            raise ConfigError(f"{name}: {_OTHER_READERS.get(name, _NOT_TAKEN)}")
        self.format = format
        self.options = ParseOptions(
            id_field, tuple(html_include), tuple(html_exclude), encoding=encoding
        )

    def file_extractor(self) -> dict[str, BaseReader]:
        """``{suffix: self}`` for every suffix a parser reads, for ``SimpleDirectoryReader``."""
        return {suffix: self for suffix in supported_suffixes()}

    def lazy_load_data(
        self, file: str | Path, extra_info: dict[str, Any] | None = None, **_: Any
    ) -> Iterable[Document]:
        if not isinstance(file, (str, os.PathLike)):
            # as LlamaIndex's own file readers, one file a call (SimpleDirectoryReader
            # calls it per file)
            raise InputError(
                f"RechunkReader reads one file a call, not a {type(file).__name__}: call "
                "load_data for each, or give the files to SimpleDirectoryReader(input_files="
                "[...], file_extractor={'.pdf': RechunkReader(), ...})"
            )
        path = Path(file)
        fmt = self.format or format_for(path)
        base = dict(extra_info) if extra_info else {"file_path": str(path), "file_name": path.name}
        for parsed in parse_file(path, fmt, self.options):
            doc_id = str(path) if parsed.part is None else f"{path}#{parsed.part}"
            metadata = {**base, "format": fmt, "parser": parsed.version, **parsed.metadata}
            if parsed.part is not None:
                metadata["record"] = parsed.part
            if fmt == "pdf" and "pages" in metadata:  # in rechunk, a chunk's [first, last]
                metadata["total_pages"] = metadata.pop("pages")
            # a reflowed PDF counts as changed, its text unchanged
            metadata[LOCATOR_DIGEST] = locator_digest(parsed)
            doc = Document(
                text=parsed.text,
                metadata=metadata,
                id_=doc_id,
                # what says how the text was made is no part of what it says, and a page
                # count in every node's header would re-embed them all when a page is added
                excluded_embed_metadata_keys=[*_HOW_READ, "total_pages"],
                excluded_llm_metadata_keys=list(_HOW_READ),
            )
            remember(doc, parsed)  # for the node parser's per-node locators
            yield doc

    def load_data(
        self, file: str | Path, extra_info: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return list(self.lazy_load_data(file, extra_info, **kwargs))
