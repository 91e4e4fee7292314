"""rechunk inside LangChain: swap one class, re-embed only what changed.

Install with ``pip install 'rechunk[langchain]'``.

Three pieces, each a drop-in for what a LangChain indexing pipeline already uses:

:class:`RechunkTextSplitter`
    A ``langchain_text_splitters.TextSplitter`` backed by a rechunk chunker
    (``"structured"``, ``"cdc"``, ``"recursive"`` or ``"fixed"``, or any ready rechunk
    ``Chunker``).
    Every produced ``Document`` has ``page_content`` = the chunk's embedding
    input (:attr:`rechunk.Chunk.text`), a deterministic ``Document.id`` and the
    true span offsets in its metadata (never recovered with ``str.find``).
:func:`rechunk_key_encoder`
    A ``key_encoder`` for ``langchain_core.indexing.index``: it hashes what
    decides the embedding input (page content, source id, occurrence) and the
    metadata you gave the document, never the offsets, so a chunk whose offsets
    moved is not re-embedded and a changed title or ACL still reaches the store.
:class:`CachedEmbeddings` / :class:`ByteStoreCache`
    A ``langchain_core.embeddings.Embeddings`` that reuses vectors by input key
    from a rechunk :class:`~rechunk.reuse.cache.EmbeddingCache` (memory, SQLite, or a
    LangChain ``ByteStore`` through :class:`ByteStoreCache`) and sends only misses
    to the wrapped model.

Metadata written on every chunk (the ``*_KEY`` constants of this module). Past the
two offsets LangChain users know, these are the fields of the points ``rechunk.sync``
writes in the ``langchain`` layout (same names, same meaning), so a collection filled
through ``index()`` and one filled by ``rechunk sync`` have one schema (``rechunk
query`` and ``status`` read both); ``occurrence`` is this path's own (ids need it):

==================  ==========================================================================
``start_index``     start of the chunk in the source text (characters); left out with
                    ``add_start_index=False``
``end_index``       its end (exclusive): ``source[start_index:end_index] == page_content``,
                    always (CRLF and all whitespace as in the source)
``doc_id``          the source id the chunk belongs to (recipe below)
``revision``        ``rechunk.reuse.identity.text_revision`` of the text that was split (the
                    default revision of a ``rechunk.Document``)
``policy``          the chunker's policy id (kind, parameters, tokenizer)
``input_key``       ``rechunk.input_key(model_id, page_content)``
``model_id``        the identity that enters ``input_key`` (see ``model_id``)
``ordinal``         the chunk's position among the chunks of its source (in one call)
``start``/``end``   the chunk's span as rechunk's chunker cut it (the spans tile the text,
                    whitespace between chunks included, overlap left out): the values
                    ``rechunk.sync`` stores for the same chunk (with ``chunk_overlap``, a
                    short span the overlap would repeat whole is joined to the next one)
``tokens``          content tokens of ``page_content`` under the chunker's tokenizer
``occurrence``      how many earlier chunks of the same source (in one call) share this
                    input key
==================  ==========================================================================

A document that :class:`~rechunk.adapters.langchain_loader.RechunkLoader` loaded also
gets, from ``split_documents``, where each chunk lies in its file (ranges cover its
overlap too: :func:`rechunk.adapters._locators.locate_piece`), under the names
``rechunk sync`` writes (:func:`rechunk.sources.locate`): ``pages`` / ``slides`` /
``rows`` / ``lines`` as ``[first, last]``, ``section`` as the heading path, ``sheet``...
(the loaded document object, with its text unchanged: a copy carries none; a key the
document's metadata already holds keeps the document's value). They are metadata like
any other: a chunk whose page moved gets a new id, and its vector comes from
:class:`CachedEmbeddings`' cache.

Id recipes:

* source id: ``metadata["source"]`` when present (a non-empty ``str``; an ``int``
  or a path as its text), else
  ``Document.id`` (``split_documents`` / ``transform_documents``), else
  ``"text:" + rechunk.reuse.identity.text_revision(text)`` (deterministic, but it changes
  with every revision: give documents a ``source`` so that ``index()`` cleanup can
  find a document's older chunks).
* ``Document.id`` = ``rechunk.reuse.identity.point_id(source_id, input_key,
  occurrence)`` when the chunk carries no metadata besides the keys above
  and ``source``; otherwise that id folded with the rest of the metadata (its
  canonical JSON by the ``meta-v1`` rule of
  :func:`rechunk.adapters._reuse.canonical_value`: dates, paths, sets, bytes and
  ``int`` keys become tagged strings), so that a metadata change gives a new id.
  Either way a UUIDv5 that depends on no position. Split all texts of one source
  (the pages of a PDF, say) in one call: occurrences count across the call.
* :func:`rechunk_key_encoder` returns the same recipe recomputed from
  ``page_content`` and the metadata, so ``index()`` stores a chunk under its
  ``Document.id``.
"""

from __future__ import annotations

import copy
import os
import re
import struct
import threading
import uuid
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from rechunk._optional import require
from rechunk.adapters._locators import locate_piece, locator_for, warn_unlocated
from rechunk.adapters._reuse import (
    DOC_ID_KEY,
    INPUT_KEY_KEY,
    MODEL_ID_KEY,
    OCCURRENCE_KEY,
    ORDINAL_KEY,
    POLICY_KEY,
    REVISION_KEY,
    SCHEMA_KEYS,
    SPAN_END_KEY,
    SPAN_START_KEY,
    TOKENS_KEY,
    DocumentsAndQueries,
    ReuseReadouts,
    canonical_json,
    canonical_value,
    check_batch_size,
    check_cache,
    check_cache_queries,
    check_dimension,
    check_model_id,
    default_model_id,
    derive_identity,
    keyed_chunks,
    make_chunker,
    warn_replaced_keys,
)
from rechunk.adapters._splitting import (
    PROSE_LANGUAGES,
    Piece,
    build_sizing,
    check_flag,
    check_keep_separator,
    check_separators,
    check_window,
    chunk_named,
    pieces,
)
from rechunk.chunking.chunk import Chunk, Chunker
from rechunk.chunking.tokens import CallableTokenCounter
from rechunk.errors import CacheError, ConfigError, InputError
from rechunk.reuse.cache import CacheStats, EmbeddingCache, check_keys, encode_items
from rechunk.reuse.cache import check_model_id as check_entry_model_id
from rechunk.reuse.identity import POINT_NAMESPACE, hash_fields, input_key, point_id, text_revision

require("langchain_core", "langchain", package="langchain-core")
require("langchain_text_splitters", "langchain", package="langchain-text-splitters")

from langchain_core.documents import Document  # noqa: E402  (after the check naming the extra)
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_text_splitters import TextSplitter  # noqa: E402

if TYPE_CHECKING:
    import numpy.typing as npt
    from langchain_core.stores import ByteStore

    from rechunk.sources.base import Locator

__all__ = [
    "DOC_ID_KEY",
    "END_KEY",
    "FOREIGN_MODEL_ID",
    "INPUT_KEY_KEY",
    "METADATA_KEYS",
    "MODEL_ID_KEY",
    "OCCURRENCE_KEY",
    "ORDINAL_KEY",
    "POLICY_KEY",
    "REVISION_KEY",
    "SOURCE_ID_KEY",
    "SPAN_END_KEY",
    "SPAN_START_KEY",
    "START_KEY",
    "TOKENS_KEY",
    "ByteStoreCache",
    "CachedEmbeddings",
    "RechunkTextSplitter",
    "check_metadata",
    "default_model_id",
    "derive_model_id",
    "make_chunker",
    "rechunk_key_encoder",
    "record_id",
    "source_id_for",
]

START_KEY: Final = "start_index"
END_KEY: Final = "end_index"
#: The source id's key: ``doc_id``, as on the points rechunk.sync writes.
SOURCE_ID_KEY: Final = DOC_ID_KEY
#: Every metadata key this module writes on a chunk (existing values are replaced).
METADATA_KEYS: Final = (START_KEY, END_KEY, *SCHEMA_KEYS)

#: Model identity :func:`rechunk_key_encoder` uses for a document without ``model_id``.
FOREIGN_MODEL_ID: Final = "langchain:page_content"
_RECORD_DOMAIN: Final = "rechunk/langchain-record/v1"

# --------------------------------------------------------------------------- chunkers


def check_metadata(metadata: object, where: str) -> dict[str, Any]:
    """A deep copy of ``metadata`` after checking that a key can cover it.

    Whatever LangChain's own splitter accepts is accepted and passed on unchanged
    (dates, paths, sets, bytes, ``int`` keys, ...): only the ids and keys rechunk
    computes from it convert it, by the deterministic rule of
    :func:`rechunk.adapters._reuse.canonical_value` (``meta-v1``). A value with no
    deterministic text form (an arbitrary object) or a ``str`` holding a lone
    surrogate raises :class:`~rechunk.InputError` naming the key. Whether the
    vector store can hold a value is the store's to say.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InputError(f"{where}: metadata must be a mapping, got {type(metadata).__name__}")
    for key, value in metadata.items():
        canonical_value(key, f"{where}: metadata key {key!r}")
        canonical_value(value, f"{where}: metadata[{key!r}]")
    return copy.deepcopy(dict(metadata))  # as LangChain's splitter does


def source_id_for(text: str, metadata: Mapping[str, Any], document_id: str | None = None) -> str:
    """The source id of a text: ``metadata["source"]``, else ``document_id``, else a text hash.

    ``source`` may be a non-empty ``str``, an ``int`` (as its decimal text: ``7``
    -> ``"7"``) or a path (``os.fspath`` of it), as LangChain loaders and users
    set it. The fallback is ``"text:" + rechunk.reuse.identity.text_revision(text)``:
    never random, but it differs for every revision of the text.
    """
    source = metadata.get("source")
    if source is not None:
        if type(source) is int:
            return str(source)
        if isinstance(source, PurePath):
            source = os.fspath(source)
        if not isinstance(source, str) or not source:
            raise InputError(
                "metadata['source'] must be a non-empty str, an int or a path to serve as the "
                f"source id, got {'an empty str' if source == '' else 'a ' + type(source).__name__}"
            )
        return source
    if isinstance(document_id, str) and document_id:
        return document_id
    return "text:" + text_revision(text)


class RechunkTextSplitter(TextSplitter):
    """A LangChain ``TextSplitter`` whose chunks are rechunk chunks.

    ``policy`` is ``"structured"`` (default), ``"cdc"``, ``"recursive"`` or ``"fixed"`` with
    ``tokenizer`` (anything :func:`rechunk.chunking.tokens.resolve_tokenizer` accepts;
    ``None`` = all-MiniLM-L6-v2's) and the chunker's ``params`` (``max_tokens``,
    ``target_tokens``, ``min_tokens``, ``hard_max_tokens``); or a ready rechunk
    chunker, e.g. ``RechunkTextSplitter(rechunk.policy_for(embedder, "cdc"))``.

    LangChain's own arguments are honoured (see :mod:`rechunk.adapters._splitting`):

    * ``chunk_size``: the most units a chunk holds, counted by ``length_function``
      when given, else in tokens of ``tokenizer``; the chunker is sized from it.
      Unset, chunks are sized for the tokenizer's model when its window is known
      (all-MiniLM-L6-v2 by default: structured 138/198 tokens, never above 254);
      with ``length_function`` it must be given. A size above a known window is a
      :class:`~rechunk.ConfigError`.
    * ``chunk_overlap`` (default 0): every chunk after the first also starts with
      up to this many units of the text before it (whole words: a run without
      whitespace is one word, so unspaced Chinese mostly gets none), and no chunk
      lies wholly inside the next, as in LangChain. Overlap makes
      an edit near a boundary change two chunks' inputs; see the README for its
      measured cost.
    * ``add_start_index`` (default True): write ``start_index``/``end_index``.
    * ``strip_whitespace`` (default True) and ``keep_separator`` (default
      ``"end"``): where the whitespace between chunks goes
      (:func:`rechunk.adapters._splitting.pieces`).
    * ``separators`` / ``is_separator_regex``: whitespace separators are accepted
      (rechunk cuts between words anyway); any other raises ConfigError.

    ``page_content`` is always ``source[start_index:end_index]``, the exact
    slice (CRLF and inner whitespace as in the source), and it is what the
    embedding model gets, so ``input_key`` is the key of ``page_content``.

    ``model_id`` is the identity that enters each chunk's input key and id
    (default :func:`default_model_id`: the tokenizer's identity). Pass your
    embedding model's rechunk ``model_id`` to make ``input_key`` equal
    the keys of :class:`CachedEmbeddings` over the same model.

    Contracts: ``split_text(text)`` returns the chunks' ``page_content`` in order;
    ``create_documents`` / ``split_documents`` / ``transform_documents`` return one
    ``Document`` per chunk with a deterministic ``id`` and the metadata described
    in this module's docstring (the input metadata is deep-copied first; the keys
    in :data:`METADATA_KEYS` are overwritten). Blank texts produce no documents.
    """

    @staticmethod
    def get_separators_for_language(language: Any) -> list[str]:
        """Refused with what to use instead: LangChain's separators for a language are
        what ``RecursiveCharacterTextSplitter.from_language`` cuts at, and the code policy
        cuts at the definitions the language's grammar finds."""
        raise ConfigError(
            "the code policy cuts at the definitions the language's grammar finds, not at "
            "separators: use RechunkTextSplitter.from_language(language) (or "
            "RecursiveCharacterTextSplitter.get_separators_for_language for LangChain's own)"
        )

    @classmethod
    def from_language(cls, language: Any, **kwargs: Any) -> RechunkTextSplitter:
        """The code policy of ``language`` (a LangChain ``Language`` such as
        ``Language.PYTHON``, or a name such as ``"rust"``), in place of
        ``RecursiveCharacterTextSplitter.from_language(language, ...)``; the other
        arguments are this splitter's (``chunk_size``, ``chunk_overlap``, ...)."""
        from rechunk.chunkers.code_languages import spec_for

        name = str(getattr(language, "value", language))
        try:
            spec_for(name)
        except ConfigError:
            if name in PROSE_LANGUAGES:
                load = (
                    "load the files with rechunk.adapters.langchain_loader.RechunkLoader "
                    "(it reads them without their markup), then "
                    if name in ("html", "latex")
                    else ""
                )
                raise ConfigError(
                    f"{name!r} is prose, not code: {load}use RechunkTextSplitter(), whose "
                    "structured policy keeps headings as hard boundaries and cuts at paragraphs"
                ) from None
            raise ConfigError(
                f"rechunk has no code grammar for {name!r}: use RechunkTextSplitter("
                "'recursive') for these files, or keep LangChain's from_language splitter"
            ) from None
        return cls("code", language=name, **kwargs)

    def __init__(
        self,
        policy: str | Chunker = "structured",
        tokenizer: Any = None,
        *,
        model_id: str | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int = 0,
        length_function: Callable[[str], int] | None = None,
        keep_separator: bool | str = "end",
        add_start_index: bool = True,
        strip_whitespace: bool = True,
        separators: list[str] | None = None,
        is_separator_regex: bool = False,
        **params: Any,
    ) -> None:
        check_separators(separators, is_separator_regex, policy=policy)
        if length_function is not None and chunk_size is None:
            raise ConfigError(
                "length_function without chunk_size: LangChain's default then is 4000 of "
                "your units (4000 characters are about 900 all-MiniLM-L6-v2 tokens, past its "
                "254), and rechunk's defaults are sized in tokens; give chunk_size in your "
                "units, or leave length_function out to have chunks sized for the model"
            )
        keep = check_keep_separator(keep_separator)
        add_start = check_flag("add_start_index", add_start_index)
        strip = check_flag("strip_whitespace", strip_whitespace)
        sizing = build_sizing(
            policy,
            tokenizer,
            params,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            length_function=length_function,
            receiver="the splitter",
        )
        model_id = check_model_id(model_id)
        self._sizing = sizing
        self._chunker = sizing.chunker
        super().__init__(
            chunk_size=sizing.limit,
            chunk_overlap=sizing.overlap,
            length_function=self._count_tokens,
            keep_separator=keep,  # type: ignore[arg-type]
            add_start_index=add_start,
            strip_whitespace=strip,
        )
        self._model_id = model_id or default_model_id(self._chunker)

    def __repr__(self) -> str:
        return f"RechunkTextSplitter({self._chunker!r}, model_id={self.model_id!r})"

    def _count_tokens(self, text: str) -> int:
        """Units of ``text`` as ``chunk_size`` counts them (characters without a counter)."""
        counter = self._sizing.counter or getattr(self._chunker, "token_counter", None)
        if counter is None:
            return len(text)
        return int(counter.count_many([text])[0])

    @property
    def chunker(self) -> Chunker:
        """The rechunk chunker that cuts the text."""
        return self._chunker

    @property
    def policy_id(self) -> str:
        """The chunker's policy id (written to ``policy``)."""
        return self._chunker.policy_id

    @property
    def model_id(self) -> str:
        """The identity entering every input key (written to ``model_id``)."""
        return self._model_id

    @classmethod
    def from_huggingface_tokenizer(
        cls, tokenizer: Any, policy: str = "structured", **kwargs: Any
    ) -> RechunkTextSplitter:
        """A splitter counting tokens with a Hugging Face tokenizer, as LangChain's.

        ``tokenizer`` is a ``transformers`` tokenizer (LangChain's type) or a
        ``tokenizers.Tokenizer``; ``kwargs`` are the splitter's (``chunk_size``,
        ``chunk_overlap``, ``model_id``, ...) and the chunker's parameters. A
        tokenizer loaded from a sentence-transformers folder knows its model's
        window (all-MiniLM-L6-v2: 254 content tokens): the default sizes fit it
        and a larger ``chunk_size`` is refused.
        """
        return cls(policy, tokenizer, **kwargs)

    @classmethod
    def from_tiktoken_encoder(
        cls,
        encoding_name: str = "gpt2",
        model_name: str | None = None,
        allowed_special: Any = None,
        disallowed_special: Any = "all",
        **kwargs: Any,
    ) -> RechunkTextSplitter:
        """A splitter counting tokens with a tiktoken encoding (needs ``tiktoken``).

        A plain counting function reports no token offsets, so rechunk cuts an
        over-long word at evenly spaced characters and re-counts every chunk.
        ``kwargs`` are ``policy``, the splitter's arguments (``chunk_size``, ...)
        and the chunker's parameters. The encoding tells no model window:
        nothing is checked against one.
        """
        func = cls._tiktoken_length_function(
            encoding_name, model_name, allowed_special, disallowed_special
        )
        # the encoding, not the model name, decides the counts: gpt-4 and cl100k_base agree
        if model_name is not None:
            model = require("tiktoken.model", "langchain", package="tiktoken")
            encoding_name = model.encoding_name_for_model(model_name)
        identity = f"tiktoken:{encoding_name}"
        policy = kwargs.pop("policy", "structured")
        return cls(policy, CallableTokenCounter(func, identity=identity), **kwargs)

    # -- splitting ---------------------------------------------------------------------

    def split_text(self, text: str) -> list[str]:
        """The chunks' texts (``page_content``), in order."""
        return [piece.text for piece in self._pieces(text, "")]

    def _pieces(
        self, text: str, name: str, metadata: Mapping[str, Any] | None = None
    ) -> list[Piece]:
        """The chunks of ``text``: ``Piece.text == text[start:end]`` (overlap included).
        Text rechunk cannot cut is an InputError naming the text (``name``, its source)."""
        source = (metadata or {}).get("source")
        # a source is a name to quote only when it is one (a str, int or path), not a value
        named = type(source) in (str, int) or isinstance(source, PurePath)
        where = f"{name} (source {source!r})" if name and named else name
        chunks = chunk_named(self._chunker, text, where)
        found = pieces(
            text,
            chunks,
            self._sizing,
            strip_whitespace=self._strip_whitespace,
            keep_separator=self._keep_separator,
        )
        check_window(found, self._sizing, "RechunkTextSplitter")
        return found

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """One ``Document`` per chunk of each text (source: ``metadata["source"]``, else a hash)."""
        if isinstance(texts, str):
            raise InputError("texts must be a list of str, not a single str")
        texts = list(texts)
        if metadatas and len(metadatas) != len(texts):  # [] means none, as in LangChain
            raise InputError(f"{len(texts)} texts but {len(metadatas)} metadatas")
        metas = [
            check_metadata(metadatas[i] if metadatas else None, f"text {i}")
            for i in range(len(texts))
        ]
        # texts, not the loaded documents: their locators cannot be found from here
        warn_unlocated([(m, False) for m in metas], stacklevel=2, use="split_documents(docs)")
        warn_replaced_keys(metas, stacklevel=2)
        return self._split_all(
            [
                (text, metadata, None, f"text {i}", None)
                for i, (text, metadata) in enumerate(zip(texts, metas))
            ]
        )

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """One ``Document`` per chunk (source id: ``metadata["source"]``, else ``Document.id``)."""
        docs = list(documents)
        for i, doc in enumerate(docs):
            if not isinstance(doc, Document):
                raise InputError(
                    f"document {i} is a {type(doc).__name__}, not a LangChain Document (for "
                    "plain strings use split_text or create_documents)"
                )
        metas = [
            check_metadata(doc.metadata, f"document {doc.id or i}") for i, doc in enumerate(docs)
        ]
        locators = [locator_for(doc, doc.page_content) for doc in docs]
        warn_unlocated([(m, loc is not None) for m, loc in zip(metas, locators)], stacklevel=2)
        warn_replaced_keys(metas, stacklevel=2)
        return self._split_all(
            [
                (doc.page_content, metadata, doc.id, f"document {doc.id or i}", locator)
                for i, (doc, metadata, locator) in enumerate(zip(docs, metas, locators))
            ]
        )

    def _split_all(
        self, items: list[tuple[str, dict[str, Any], str | None, str, Locator | None]]
    ) -> list[Document]:
        """Chunks of ``(text, metadata, document id, name for errors, locator)`` items;
        occurrences and ordinals count per source across the call."""
        seen: dict[str, Counter[str]] = defaultdict(Counter)
        ordinals: Counter[str] = Counter()
        out: list[Document] = []
        for text, metadata, document_id, name, locator in items:
            found = self._pieces(text, name, metadata)
            if found:
                source = source_id_for(text, metadata, document_id)
                revision = text_revision(text)
                docs = self._documents(
                    found, metadata, source, revision, seen[source], ordinals[source], locator
                )
                ordinals[source] += len(docs)
                out.extend(docs)
        return out

    def _documents(
        self,
        found: list[Piece],
        metadata: dict[str, Any],
        source: str,
        revision: str,
        seen: Counter[str],
        first: int,
        locator: Locator | None = None,
    ) -> list[Document]:
        policy = self._chunker.policy_id
        out = []
        keyed = list(keyed_chunks([_as_chunk(p) for p in found], self._model_id, seen))
        for ordinal, (piece, (chunk, key, occurrence)) in enumerate(zip(found, keyed), first):
            fields = copy.deepcopy(metadata)
            if locator is not None:  # where it lies: ranges cover the overlap too
                own = (piece.tile_start, piece.tile_end)
                located = locate_piece(locator, piece.start, piece.end, own)
                fields.update({k: v for k, v in located.items() if k not in metadata})
            if self._add_start_index:
                fields.update({START_KEY: chunk.start, END_KEY: chunk.end})
            else:
                fields.pop(START_KEY, None)
                fields.pop(END_KEY, None)
            fields.update(
                {
                    DOC_ID_KEY: source,
                    REVISION_KEY: revision,
                    POLICY_KEY: policy,
                    INPUT_KEY_KEY: key,
                    MODEL_ID_KEY: self._model_id,
                    ORDINAL_KEY: ordinal,
                    SPAN_START_KEY: piece.tile_start,
                    SPAN_END_KEY: piece.tile_end,
                    TOKENS_KEY: chunk.tokens,
                    OCCURRENCE_KEY: occurrence,
                }
            )
            record = record_id(source, key, occurrence, fields)
            out.append(Document(id=record, page_content=chunk.text, metadata=fields))
        return out


def _as_chunk(piece: Piece) -> Chunk:
    return Chunk(piece.start, piece.end, piece.text, piece.tokens)


def record_id(source: str, key: str, occurrence: int, metadata: Mapping[str, Any]) -> str:
    """The record id of a chunk: ``point_id(source, key, occurrence)``, folded with metadata.

    The metadata that counts is everything but :data:`METADATA_KEYS` and a
    ``source`` equal to ``source``. Without any, the id is the plain point id;
    with some, a UUIDv5 of that id and the metadata's canonical JSON (sorted
    keys), so ``metadata`` must pass :func:`check_metadata`.
    """
    base = point_id(source, key, occurrence)
    extra = {
        k: v
        for k, v in metadata.items()
        if k not in METADATA_KEYS and not (k == "source" and _same_source(v, source))
    }
    if not extra:
        return base
    canonical = canonical_json(extra, "metadata")
    return str(uuid.uuid5(POINT_NAMESPACE, hash_fields(_RECORD_DOMAIN, (base, canonical))))


def _same_source(value: object, source: str) -> bool:
    """Whether a ``source`` value is the source id ``source`` (an int or path as its text)."""
    if type(value) is int:
        return str(value) == source
    if isinstance(value, PurePath):
        return os.fspath(value) == source
    return value == source


def rechunk_key_encoder(document: Document) -> str:
    """``key_encoder`` for ``langchain_core.indexing.index``: a UUID of the input and metadata.

    Returns :func:`record_id` of (``source``, ``input_key(model, page_content)``,
    ``occurrence``, metadata) with ``source`` = ``metadata["doc_id"]``, else
    ``metadata["source"]``, else ``""``; ``model`` = ``metadata["model_id"]``, else
    :data:`FOREIGN_MODEL_ID`; ``occurrence`` = ``metadata["occurrence"]``, else 0. For a chunk of
    :class:`RechunkTextSplitter` this is its ``Document.id``.

    The offsets (and the other keys rechunk writes) stay out of the key, so
    ``index()`` skips a chunk whose text and metadata are unchanged even when
    its offsets moved; the record it keeps is the one first written (offsets
    included). A change of any other metadata (a title, an ACL, a timestamp)
    gives the chunk a new key: ``index()`` writes it again and cleanup removes
    the old record, and with :class:`CachedEmbeddings` its vector comes from the
    cache. A UUID string suits every store (Qdrant rejects other string ids).
    Metadata the splitter would refuse (not JSON, a lone surrogate) is an
    :class:`~rechunk.InputError` here too, never a key that changes between runs.
    """
    metadata = check_metadata(document.metadata, "document")  # what the splitter refuses too
    source = metadata.get(SOURCE_ID_KEY)
    if source is None:
        source = source_id_for("", metadata) if metadata.get("source") is not None else ""
    model = metadata.get(MODEL_ID_KEY) or FOREIGN_MODEL_ID
    if not isinstance(model, str):
        raise InputError(f"metadata[{MODEL_ID_KEY!r}] must be a str, got {model!r}")
    occurrence = metadata.get(OCCURRENCE_KEY, 0)
    if type(occurrence) is not int or occurrence < 0:
        raise InputError(
            f"metadata[{OCCURRENCE_KEY!r}] must be a non-negative int, got {occurrence!r}"
        )
    if not isinstance(document.page_content, str):
        raise InputError("page_content must be a str")
    return record_id(source, input_key(model, document.page_content), occurrence, metadata)


# --------------------------------------------------------------------------- embeddings


def derive_model_id(underlying: object) -> str:
    """The model identity of a LangChain ``Embeddings``: class path and non-secret settings.

    ``"langchain:<module>.<class>(<name>=<value>,...)"``, see
    :func:`rechunk.adapters._reuse.derive_identity` for what is left out (secrets,
    batch sizes, clients, ...). Pass ``model_id`` when something else changes the
    vectors.
    """
    return derive_identity(underlying, "langchain")


class CachedEmbeddings(ReuseReadouts, Embeddings):
    """A LangChain ``Embeddings`` that reuses vectors by rechunk input key.

    ``underlying`` is any LangChain ``Embeddings``; ``cache`` any rechunk
    :class:`~rechunk.reuse.cache.EmbeddingCache` (``MemoryCache``, ``SQLiteCache``,
    :class:`ByteStoreCache` over a LangChain ``ByteStore``). ``model_id`` names
    the model in every key (default :func:`derive_model_id`, from the class path
    and non-secret settings of ``underlying``; never empty).

    Contracts:

    * ``embed_documents(texts)`` de-duplicates ``texts``, looks every distinct
      text up under ``input_key(model_id, text)`` and sends only the misses to
      ``underlying.embed_documents`` (``batch_size`` at a time, default all in
      one call); the model's answer is checked (one vector per text, equal
      length, the known dimension, finite), else :class:`~rechunk.EmbeddingError`
      and that batch is not cached. Every vector returned is the float32 value
      stored, so a hit and the original miss return identical lists.
    * ``dimension`` (optional) is the vector length; unknown, it is read from
      the cache's record for this model or learnt from the first answer. The
      record is one extra cache entry per model id: a one-element vector under
      the key ``hash_fields("rechunk/adapter-dimension/v1", (model_id,))``.
    * ``embed_query`` goes straight to ``underlying.embed_query`` unless
      ``cache_queries=True``; query vectors are then cached under the model id
      ``model_id + "#query"`` (a model may embed queries differently).
    * ``aembed_documents`` / ``aembed_query`` use the underlying's async methods
      for misses and run cache reads and writes in a worker thread
      (``asyncio.to_thread``), never blocking the event loop.
    * A cache opened read-only (``SQLiteCache(path, readonly=True)``) is read
      and never written: misses are embedded every time.
    * Every call that embeds is model-checked against the cache
      (:mod:`rechunk.reuse.agreement`): one or two short inputs at the front of its
      first request, and :class:`~rechunk.ModelChangedError` before anything of the
      call is cached or returned when the model behind ``model_id`` gives another
      vector than the one the cache holds. Not when ``underlying.pins_weights`` is true
      (its identity names its weights, as :class:`RechunkEmbeddings` over a local model
      says).
    * :attr:`stats` counts inputs, hits, misses (distinct texts per call) and
      inputs sent to the model, for documents and for cached queries (a query
      with ``cache_queries=False`` goes straight to the underlying and is not
      counted).
    """

    def __init__(
        self,
        underlying: Embeddings,
        cache: EmbeddingCache,
        model_id: str | None = None,
        *,
        dimension: int | None = None,
        cache_queries: bool = False,
        batch_size: int | None = None,
    ) -> None:
        for method in ("embed_documents", "embed_query"):
            if not callable(getattr(underlying, method, None)):
                raise ConfigError(
                    f"underlying must be a LangChain Embeddings (no {method} on "
                    f"{type(underlying).__name__})"
                )
        model_id = check_model_id(model_id) or derive_model_id(underlying)
        self._underlying = underlying
        self._cache_queries = check_cache_queries(cache_queries)
        cache = check_cache(cache, "MemoryCache, SQLiteCache, ByteStoreCache")
        self._batch_size = check_batch_size(batch_size)
        pinned = bool(getattr(underlying, "pins_weights", False))  # no model check needed
        self._reuse = DocumentsAndQueries(
            cache, model_id, check_dimension(dimension), check=not pinned
        )

    def __repr__(self) -> str:
        return f"CachedEmbeddings({type(self._underlying).__name__}, model_id={self.model_id!r})"

    @property
    def underlying(self) -> Embeddings:
        """The wrapped embeddings."""
        return self._underlying

    @property
    def dimension(self) -> int | None:
        """The vector length, once known."""
        return self._reuse.documents.dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of ``texts`` in order; only texts the cache lacks reach the model."""
        return self._reuse.documents.embed(
            texts, self._underlying.embed_documents, self._batch_size
        )

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async :meth:`embed_documents`: cache I/O in a thread, misses via ``aembed_documents``."""
        return await self._reuse.documents.aembed(
            texts, self._underlying.aembed_documents, self._batch_size
        )

    def embed_query(self, text: str) -> list[float]:
        """The query's vector (cached only with ``cache_queries=True``)."""
        if not self._cache_queries:
            return self._underlying.embed_query(text)

        def embed_one(batch: list[str]) -> list[list[float]]:
            return [self._underlying.embed_query(batch[0])]

        return self._reuse.for_queries().embed([text], embed_one)[0]

    async def aembed_query(self, text: str) -> list[float]:
        """Async :meth:`embed_query`."""
        if not self._cache_queries:
            return await self._underlying.aembed_query(text)

        async def embed_one(batch: list[str]) -> list[list[float]]:
            return [await self._underlying.aembed_query(batch[0])]

        return (await self._reuse.for_queries().aembed([text], embed_one))[0]


# --------------------------------------------------------------------------- ByteStore cache

_MAGIC: Final = b"RCV1"
_HEADER: Final = struct.Struct("<4sIII")  # magic, dimension, crc32 of the vector, len(model_id)
_MODEL_DOMAIN: Final = "rechunk/bytestore-model/v1"
_STORE_KEY: Final = re.compile(r"[0-9A-Za-z_.\-]+")


class ByteStoreCache:
    """A rechunk :class:`~rechunk.reuse.cache.EmbeddingCache` on a LangChain ``ByteStore``.

    Any ``BaseStore[str, bytes]`` works (``InMemoryByteStore``, a file store,
    Redis, ...). Entry key: ``namespace + <32 hex of a hash of model_id> + "/" +
    input key`` (only ``[0-9a-z_./-]`` characters when ``namespace`` has only
    those, as file-backed stores require). Entry value: ``b"RCV1"``, the
    dimension, a crc32 of the vector bytes and the model id (little-endian
    ``uint32`` each, then the UTF-8 model id), then the float32 vector.

    ``get_many(keys, model_id, dimension)`` returns only entries whose stored
    model id and dimension equal the ones asked for and whose checksum holds;
    anything else is a miss (a damaged entry also counts in ``stats().corrupt``).
    ``put_many`` validates every item before writing any (keys: letters, digits,
    ``_``, ``.`` and ``-``, which every store can hold), then writes them in one
    ``mset``; a store's own failure is a :class:`~rechunk.errors.CacheError`.
    ``stats().entries`` counts the keys under ``namespace``. A store that does not
    write atomically (``LocalFileStore``) can be read half-written while another
    process writes the same key: that read is a miss counted in ``corrupt``, never
    a wrong vector.
    """

    def __init__(self, store: ByteStore, namespace: str = "rechunk/") -> None:
        for method in ("mget", "mset", "yield_keys"):
            if not callable(getattr(store, method, None)):
                raise ConfigError(
                    f"store must be a LangChain ByteStore (no {method} on {type(store).__name__})"
                )
        if not isinstance(namespace, str):
            raise ConfigError(f"namespace must be a str, got {namespace!r}")
        self._store = store
        self._namespace = namespace
        self._lock = threading.Lock()
        self._hits = self._misses = self._writes = self._corrupt = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"ByteStoreCache({type(self._store).__name__}, namespace={self._namespace!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the lock: the store pickles as itself (an in-memory store as a
        copy; a file store names the same folder), counters and the closed flag travel."""
        with self._lock:
            state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def store(self) -> ByteStore:
        """The wrapped ByteStore."""
        return self._store

    def _check_open(self) -> None:
        if self._closed:
            raise CacheError("the cache is closed")

    def _prefix(self, model_id: str) -> str:
        check_entry_model_id(model_id)
        return f"{self._namespace}{hash_fields(_MODEL_DOMAIN, (model_id,))[:32]}/"

    @staticmethod
    def _check_store_keys(keys: Sequence[str]) -> None:
        """Keys a file-backed store can hold, checked before any I/O."""
        for key in keys:
            if not _STORE_KEY.fullmatch(key) or key in (".", ".."):
                raise InputError(
                    f"key {key!r}: a ByteStoreCache key is made of letters, digits, '_', "
                    "'.' and '-' (rechunk's input keys are hex)"
                )

    def _store_call(self, action: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            raise CacheError(
                f"{type(self._store).__name__} failed to {action}: {type(exc).__name__}: {exc}"
            ) from exc

    def get_many(
        self, keys: Sequence[str], model_id: str, dimension: int
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Vectors of ``keys`` stored under exactly ``model_id`` and ``dimension``."""
        self._check_open()
        prefix = self._prefix(model_id)
        if type(dimension) is not int or dimension <= 0:
            raise InputError(f"dimension must be a positive int, got {dimension!r}")
        wanted = check_keys(keys)
        self._check_store_keys(wanted)
        if not wanted:
            return {}
        values = self._store_call("read", lambda: self._store.mget([prefix + k for k in wanted]))
        found: dict[str, npt.NDArray[np.float32]] = {}
        corrupt = 0
        model = model_id.encode("utf-8")
        for key, blob in zip(wanted, values):
            if blob is None:
                continue
            vector, damaged = _decode_entry(blob, model, dimension)
            corrupt += damaged
            if vector is not None:
                found[key] = vector
        with self._lock:
            self._hits += len(found)
            self._misses += len(wanted) - len(found)
            self._corrupt += corrupt
        return found

    def put_many(self, items: Iterable[tuple[str, npt.NDArray[np.float32]]], model_id: str) -> int:
        """Store ``(key, vector)`` pairs under ``model_id``; all are validated before any write."""
        self._check_open()
        prefix = self._prefix(model_id)
        model = model_id.encode("utf-8")
        rows = encode_items(items)
        self._check_store_keys([key for key, _, _, _ in rows])
        pairs = [
            (prefix + key, _HEADER.pack(_MAGIC, dimension, checksum, len(model)) + model + data)
            for key, dimension, checksum, data in rows
        ]
        if pairs:
            self._store_call("write", lambda: self._store.mset(pairs))
        with self._lock:
            self._writes += len(pairs)
        return len(pairs)

    def stats(self) -> CacheStats:
        """Hits, misses, writes and corrupt entries of this object; entries under the namespace."""
        self._check_open()
        entries = self._store_call(
            "list", lambda: sum(1 for _ in self._store.yield_keys(prefix=self._namespace))
        )
        with self._lock:
            return CacheStats(self._hits, self._misses, self._writes, entries, self._corrupt)

    def close(self) -> None:
        """Stop using the store (it is not closed: it belongs to the caller)."""
        self._closed = True


def _decode_entry(
    blob: bytes, model: bytes, dimension: int
) -> tuple[npt.NDArray[np.float32] | None, int]:
    """``(vector, 0)`` for a valid entry of ``model`` and ``dimension``; ``(None, 1)``: damaged."""
    if not isinstance(blob, (bytes, bytearray)) or len(blob) < _HEADER.size:
        return None, 1
    magic, stored_dim, checksum, model_len = _HEADER.unpack_from(blob)
    if magic != _MAGIC:
        return None, 1
    start = _HEADER.size + model_len
    if blob[_HEADER.size : start] != model or stored_dim != dimension:
        return None, 0  # another model or dimension: a plain miss
    data = bytes(blob[start:])
    if len(data) != dimension * 4 or zlib.crc32(data) != checksum:
        return None, 1
    return np.frombuffer(data, dtype="<f4").astype(np.float32), 0
