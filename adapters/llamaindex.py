"""rechunk inside LlamaIndex: swap one class, re-embed only what changed.

Install with ``pip install 'rechunk[llamaindex]'``. Two pieces:

:class:`RechunkNodeParser`
    A ``NodeParser`` backed by a rechunk chunker. Node ids are content-addressed
    (never LlamaIndex's random ``uuid4``), offsets are the chunker's true spans
    (never recovered with ``str.find``), and each node's input key covers exactly
    what LlamaIndex embeds for it (metadata header included).
:class:`CachedEmbedding`
    A ``BaseEmbedding`` that reuses vectors by rechunk input key from a rechunk
    :class:`~rechunk.reuse.cache.EmbeddingCache` and sends only misses to the wrapped
    embedding model.

In an ``IngestionPipeline`` with ``DocstoreStrategy.UPSERTS`` a changed document
is still deleted and re-added node by node (that is how the pipeline works),
but the model only sees the chunks whose embedded text is new, and unchanged
chunks come back under the same node ids.

Node fields set by :class:`RechunkNodeParser` (input: a ``Document`` or node
whose ``node_id`` is the ref doc id). Give documents stable ids: a LlamaIndex
``Document`` gets a random ``id_`` unless one is passed (``Document(id_=...)``,
or ``SimpleDirectoryReader(..., filename_as_id=True)``), and then every node id
changes on every load, so a docstore or vector store keeps nothing across runs
(the cache still reuses vectors, which are keyed by text):

* ``id_`` = ``rechunk.reuse.identity.point_id(root, input_key,
  occurrence)``: a UUIDv5 that depends on no position, where ``root`` is
  the document the input came from; a custom ``id_func`` replaces it. An input that is
  a node of another parser (it has a SOURCE, its document; its own id is random) may
  reach the parser in a call of its own (``IngestionPipeline(num_workers=...)`` batches
  nodes): its chunks' ids are made under a scope of its document, its text and its own
  metadata instead of ``root``, with occurrences counted within it (``_placement``), so
  that they are unique and the same however the nodes are batched;
* ``text`` = ``source[start_char_idx:end_char_idx]``, the exact slice of the
  document's text (the chunk's span without the whitespace at its edges): after
  another parser, the input node's ``start_char_idx`` is added when its span is its
  text's length, else the offsets are into the input node's text;
* relationships: ``SOURCE`` = the parsed node (after LlamaIndex's post-processing,
  its document), ``PREVIOUS`` / ``NEXT`` = the neighbouring chunks of the same document;
* metadata: the document's metadata (when ``include_metadata``, LlamaIndex's
  default) plus the fields of the points ``rechunk.sync`` writes in the
  ``llamaindex`` layout, under the same names: ``doc_id`` (the root document),
  ``revision`` (``text_revision`` of the parsed text), ``policy``, ``input_key``,
  ``model_id``, ``ordinal`` (position among the document's nodes in the call), ``start`` /
  ``end`` (the chunker's span: spans tile the text, so they include the whitespace
  ``start_char_idx`` / ``end_char_idx`` leave out), ``tokens``
  (content tokens of ``text``), and ``occurrence`` (earlier nodes of the document, or
  of the input node of another parser, with the same key), so one collection has one
  schema whichever path wrote it.

What is embedded is what LlamaIndex defines: ``node.get_content(MetadataMode.EMBED)``,
the user's ``text_template`` around a header the ``metadata_template`` makes from
every key not in ``excluded_embed_metadata_keys`` (the document's exclusions
carry over), then the text. rechunk's own keys above are always excluded (from the
LLM's view too). ``input_key`` is the key of that embedded string, so an
unchanged header reuses vectors and a changed title re-embeds. Chunks shrink so
that header and text fit ``chunk_size`` together (as in ``SentenceSplitter``).
``embed_metadata=False`` excludes every key: the bare text is embedded.
"""

from __future__ import annotations

import copy
import inspect
import json
import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Final, NamedTuple

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
    check_cache,
    check_cache_queries,
    check_dimension,
    check_model_id,
    default_model_id,
    derive_identity,
    warn_replaced_keys,
)
from rechunk.adapters._splitting import (
    FACTORIES,
    FOREIGN,
    SIZE_PARAMS,
    Piece,
    Sizing,
    WindowWarning,
    build_sizing,
    check_separators,
    check_window,
    chunk_named,
    largest_chunk,
    pieces,
)
from rechunk.chunking.chunk import Chunker
from rechunk.document import locator_as_text
from rechunk.errors import ConfigError, InputError
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import check_texts
from rechunk.reuse.identity import hash_fields, input_key, point_id, text_revision

require("llama_index.core", "llamaindex", package="llama-index-core")

from llama_index.core.async_utils import run_jobs  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding  # noqa: E402
from llama_index.core.bridge.pydantic import Field, PrivateAttr  # noqa: E402
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload  # noqa: E402
from llama_index.core.node_parser.interface import NodeParser  # noqa: E402
from llama_index.core.node_parser.node_utils import default_id_func  # noqa: E402
from llama_index.core.schema import (  # noqa: E402
    BaseComponent,
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    TextNode,
)
from llama_index.core.utils import get_tqdm_iterable  # noqa: E402

if TYPE_CHECKING:
    from rechunk.sources.base import Locator

__all__ = [
    "DOC_ID_KEY",
    "INPUT_KEY_KEY",
    "METADATA_KEYS",
    "MODEL_ID_KEY",
    "OCCURRENCE_KEY",
    "ORDINAL_KEY",
    "POLICY_KEY",
    "REVISION_KEY",
    "SPAN_END_KEY",
    "SPAN_START_KEY",
    "TOKENS_KEY",
    "CachedEmbedding",
    "RechunkNodeParser",
    "derive_model_id",
]

#: The metadata keys :class:`RechunkNodeParser` writes (existing values are replaced).
METADATA_KEYS: Final = SCHEMA_KEYS

_CUSTOM: Final = "custom"
#: Id of a node between parsing and :meth:`RechunkNodeParser._finish` (never returned).
_PENDING: Final = "rechunk-pending"
#: The fewest tokens a node's metadata header may leave for its text.
_MIN_BUDGET: Final = 8
_TEXT_TEMPLATE: Final[str] = TextNode.model_fields["text_template"].default
#: BaseEmbedding's bound on ``embed_batch_size``.
_MAX_BATCH: Final[int] = 2048
#: Fields that describe what was built at construction (assigning them raises ConfigError).
_PARSER_FIXED: Final = frozenset(
    {"policy", "params", "policy_id", "tokenizer_id", "chunk_size", "chunk_overlap"}
)
_EMBEDDING_FIXED: Final = frozenset({"model_name"})
_PICKLING: Final = "cannot be pickled (as IngestionPipeline(num_workers=...) needs)"
#: Domain of the id scope of a node another parser cut from a document (see :func:`_placement`).
_PIECE_DOMAIN: Final = "rechunk/llamaindex/piece/v1"


def _check_count(name: str, value: object, most: int | None = None) -> None:
    """:class:`~rechunk.ConfigError` unless ``value`` is an ``int`` from 1 (to ``most``)."""
    if type(value) is not int or value < 1 or (most is not None and value > most):
        bound = f"from 1 to {most}" if most is not None else "of at least 1"
        raise ConfigError(f"{name} must be an int {bound}, got {value!r}")


def _checked(name: str, value: Any) -> Any:
    """``value`` for the field ``name`` of either class, checked as its constructor checks it.

    ``callback_manager=None`` becomes a new ``CallbackManager([])`` (as in LlamaIndex);
    fields without a check pass unchanged.
    """
    if name == "callback_manager":
        if value is None:
            return CallbackManager([])
        if not isinstance(value, CallbackManager):
            raise ConfigError(
                f"callback_manager must be a LlamaIndex CallbackManager or None, "
                f"got {type(value).__name__}"
            )
    elif (
        name in ("include_metadata", "include_prev_next_rel", "embed_metadata")
        and type(value) is not bool
    ):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    elif name == "id_func" and value is not None and not callable(value):
        raise ConfigError(f"id_func must be a callable (i, node) -> str or None, got {value!r}")
    elif name == "model_id" and check_model_id(value) is None:
        raise ConfigError("model_id must be a non-empty str, got None")
    elif name == "embed_batch_size":
        _check_count(name, value, _MAX_BATCH)
    elif name == "num_workers" and value is not None:
        _check_count(name, value)
    elif name == "dimension":
        check_dimension(value)
    elif name == "cache_queries":
        check_cache_queries(value)
    return value


def _id_func(value: object) -> Any:
    """``id_func`` as given; ``None`` for the default, also as ``to_dict`` wrote it."""
    if isinstance(value, Mapping):  # to_dict() -> {"id_func_name": ..., "title": "id_func"}
        name = value.get("id_func_name")
        if name == default_id_func.__name__:
            return None
        raise ConfigError(
            f"id_func {name!r} cannot be rebuilt from a dict: pass id_func=<the function> to "
            "from_dict(data, id_func=...)"
        )
    if value is default_id_func:
        return None
    return value


def _counter_identity(chunker: Chunker) -> str:
    counter = getattr(chunker, "token_counter", None)
    return str(getattr(counter, "identity", "") or "")


def _check_tokenizer_given(tokenizer: object, tokenizer_id: object) -> None:
    """A parser rebuilt from its dict needs its tokenizer back when it was not the default:
    a dict cannot hold one (``from_dict(data, tokenizer=...)`` passes it)."""
    if tokenizer is not None or not tokenizer_id:
        return
    default = _default_identity()
    if default is not None and tokenizer_id != default:
        raise ConfigError(
            f"this parser counted tokens with {tokenizer_id!r}, which its dict cannot hold: "
            "pass the same tokenizer, RechunkNodeParser.from_dict(data, tokenizer=...)"
        )


def _default_identity() -> str | None:
    from rechunk.chunking.tokens import default_tokenizer_path, resolve_tokenizer

    try:
        return resolve_tokenizer(default_tokenizer_path()).identity
    except (ConfigError, ImportError):
        return None


def _overlap(value: object, limit: int) -> int:
    if type(value) is not int or not 0 <= value < limit:
        raise ConfigError(f"chunk_overlap must be an int from 0 to {limit - 1}, got {value!r}")
    return value


def _check_kept(state: Mapping[str, Any], owner: str, parts: Mapping[str, str]) -> None:
    """:class:`~rechunk.ConfigError` when LlamaIndex's pickle ``state`` left out a private part.

    ``BaseComponent.__getstate__`` drops each private attribute it cannot pickle (with
    a logged warning) and the copy then lacks it; ``parts`` maps the private
    attributes that must travel to what the error calls them.
    """
    kept = state.get("__pydantic_private__") or {}
    lost = [what for name, what in parts.items() if name not in kept]
    if lost:
        raise ConfigError(f"{owner} {_PICKLING}: {' and '.join(lost)} cannot be pickled")


class _ComponentState:
    """A LlamaIndex component's pickle state, taken once; it unpickles as the component.

    ``lost`` names the private attributes the copy would miss: those the state
    leaves out (LlamaIndex cannot pickle them) when the component's ``__init__``
    cannot take its fields, so that LlamaIndex's ``__setstate__``, which first
    tries ``__init__(**fields)``, falls back to the state without them.
    """

    def __init__(self, component: BaseComponent) -> None:
        self.kind = type(component)
        self.state: dict[str, Any] = component.__getstate__()
        kept = self.state.get("__pydantic_private__") or {}
        dropped = [name for name in component.__pydantic_private__ or {} if name not in kept]
        try:
            inspect.signature(self.kind.__init__).bind(component, **self.state["__dict__"])
        except TypeError:
            self.lost = dropped
        else:
            self.lost = []

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore, (self.kind, self.state)


def _restore(kind: type[BaseComponent], state: dict[str, Any]) -> BaseComponent:
    """A component from its pickle state, as pickle rebuilds one (``__new__``, ``__setstate__``)."""
    component = kind.__new__(kind)
    component.__setstate__(state)
    return component


def _factory_params(chunker: Chunker) -> dict[str, Any]:
    """A chunker's parameters as its factory takes them (the ``params`` field, which
    ``from_dict`` and the rebuilds for a new size or a metadata header build it from): its
    ``params``, and the code policy's ``language``, an argument of its own."""
    params = dict(getattr(chunker, "params", {}))
    language = getattr(chunker, "language", None)
    if isinstance(language, str):
        params["language"] = language
    return params


class RechunkNodeParser(NodeParser):
    """A LlamaIndex ``NodeParser`` whose nodes are rechunk chunks.

    ``policy`` is ``"structured"`` (default), ``"cdc"``, ``"recursive"`` or ``"fixed"`` with
    ``tokenizer`` (anything :func:`rechunk.chunking.tokens.resolve_tokenizer` accepts;
    ``None`` = all-MiniLM-L6-v2's) and the chunker's ``params`` (``max_tokens``,
    ``target_tokens``, ``min_tokens``, ``hard_max_tokens``), or a ready rechunk
    chunker such as ``rechunk.policy_for(embedder, "cdc")`` (sized so that the
    model never truncates a chunk).

    ``model_id`` is the identity in every input key and node id (default: the
    tokenizer's identity, ``"tokenizer:<identity>"``); pass your embedding
    model's rechunk ``model_id`` to make ``input_key`` equal rechunk's
    cache keys.

    ``policy``, ``params`` and ``policy_id`` describe the chunker, built once:
    assigning them raises :class:`~rechunk.ConfigError` (construct a new parser).
    ``model_id``, ``include_metadata``, ``include_prev_next_rel`` and
    ``callback_manager`` may be assigned (checked as in the constructor) and take
    effect on the next call. Pickling (``IngestionPipeline.run(num_workers=...)``)
    needs a picklable tokenizer and ``id_func``: a lambda or local function raises
    :class:`~rechunk.ConfigError` when pickled (LlamaIndex would drop it); pass a
    module-level function.

    Contracts: see the module docstring for ids, offsets, relationships and
    metadata. Offsets are restored after LlamaIndex's own post-processing
    (which would recompute them with ``str.find``), and input keys, ids and
    PREVIOUS/NEXT are recomputed after its metadata merge, so ``input_key``
    is always the key of ``node.get_content(MetadataMode.EMBED)``. ``chunk_size``,
    ``chunk_overlap``, ``from_defaults``, ``id_func`` and ``embed_metadata`` as in
    the module docstring. A document with blank text yields no node; text
    with NUL bytes or lone surrogates raises :class:`~rechunk.InputError`. Node ids
    are unique only per document id (and, for nodes of another parser parsed in
    different calls, per distinct node): give every document a stable ``id_``
    (LlamaIndex's default is random, and then nothing can be reused across runs).
    """

    policy: str = Field(
        default="structured",
        description="Chunker kind: 'structured', 'cdc', 'recursive', 'fixed' or 'custom'.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="The chunker's parameters (hard maximum included)."
    )
    chunk_size: int = Field(
        default=0, description="The most tokens a node's text holds (overlap included)."
    )
    chunk_overlap: int = Field(
        default=0, description="Tokens of the preceding text each node after the first repeats."
    )
    model_id: str = Field(default="", description="Identity entering input keys and node ids.")
    policy_id: str = Field(default="", description="The chunker's policy id.")
    tokenizer_id: str = Field(default="", description="Identity of the token counter.")
    embed_metadata: bool = Field(
        default=True,
        description="Embed the metadata header LlamaIndex's templates make (False: bare text).",
    )
    _chunker: Chunker = PrivateAttr()
    _sizing: Sizing = PrivateAttr()
    _resized: dict[int, Sizing] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        policy: str | Chunker = "structured",
        tokenizer: Any = None,
        *,
        model_id: str | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int = 0,
        include_metadata: bool = True,
        include_prev_next_rel: bool = True,
        embed_metadata: bool = True,
        callback_manager: CallbackManager | None = None,
        params: Mapping[str, Any] | None = None,
        policy_id: str | None = None,
        tokenizer_id: str | None = None,
        id_func: Any = None,
        separator: str | None = None,
        paragraph_separator: str | None = None,
        **chunker_params: Any,
    ) -> None:
        check_separators(separator, False, "separator", policy=policy)
        check_separators(paragraph_separator, False, "paragraph_separator", policy=policy)
        id_func = _id_func(id_func)
        if params is not None and not isinstance(params, Mapping):
            raise ConfigError(
                f"params must be a mapping of the chunker's parameters, got {type(params).__name__}"
            )
        if params is not None:  # rebuilt from its own fields (from_dict, pickling)
            _check_tokenizer_given(tokenizer, tokenizer_id)
            sizing = build_sizing(
                policy, tokenizer, {**params, **chunker_params}, receiver="the node parser"
            )
            limit = chunk_size or sizing.limit
            if type(limit) is not int or limit < sizing.chunker.hard_max_tokens:
                raise ConfigError(
                    f"chunk_size must be an int of at least the chunker's hard maximum "
                    f"({sizing.chunker.hard_max_tokens}), got {chunk_size!r}"
                )
            sizing = replace(sizing, limit=limit, overlap=_overlap(chunk_overlap, limit))
        else:
            sizing = build_sizing(
                policy,
                tokenizer,
                chunker_params,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                receiver="the node parser",
            )
        chunker = sizing.chunker
        if policy_id is not None and policy_id != chunker.policy_id:
            raise ConfigError(
                f"policy_id {policy_id!r} does not match the chunker built from these "
                f"parameters ({chunker.policy_id!r}): another tokenizer or version?"
            )
        model_id = check_model_id(model_id)
        kind = policy if isinstance(policy, str) else str(getattr(chunker, "kind", _CUSTOM))
        fields: dict[str, Any] = {  # this class's pydantic fields and NodeParser's
            "policy": kind,
            "params": _factory_params(chunker),
            "chunk_size": sizing.limit,
            "chunk_overlap": sizing.overlap,
            "model_id": model_id or default_model_id(chunker),
            "policy_id": chunker.policy_id,
            "tokenizer_id": _counter_identity(chunker),
            "include_metadata": include_metadata,
            "include_prev_next_rel": include_prev_next_rel,
            "embed_metadata": embed_metadata,
            "callback_manager": callback_manager,
            "id_func": id_func,
        }
        super().__init__(**{name: _checked(name, value) for name, value in fields.items()})
        self._chunker = chunker
        self._sizing = sizing

    @classmethod
    def from_defaults(
        cls,
        separator: str = " ",
        chunk_size: int | None = None,
        chunk_overlap: int = 0,
        tokenizer: Any = None,
        paragraph_separator: str = "\n\n\n",
        chunking_tokenizer_fn: Any = None,
        secondary_chunking_regex: str | None = None,
        callback_manager: CallbackManager | None = None,
        include_metadata: bool = True,
        include_prev_next_rel: bool = True,
        *,
        policy: str | Chunker = "structured",
        id_func: Any = None,
        **kwargs: Any,
    ) -> RechunkNodeParser:
        """A parser from the arguments LlamaIndex's ``SentenceSplitter.from_defaults`` takes,
        in its order (``from_defaults(" ", 200, 20)`` is chunk_size 200, overlap 20).

        ``chunk_size`` counts tokens of ``tokenizer`` (rechunk's default:
        all-MiniLM-L6-v2's; a LlamaIndex ``tokenizer`` function returning a list of
        tokens works too); unset, chunks are sized for the tokenizer's model window
        when it is known. ``separator`` and ``paragraph_separator`` are accepted when
        they are whitespace; ``chunking_tokenizer_fn`` and
        ``secondary_chunking_regex`` are refused (rechunk decides where sentences
        end). ``policy`` (keyword only) and ``kwargs``: the policy, its parameters,
        ``model_id``, ``embed_metadata``.
        """
        for name, value in (
            ("chunking_tokenizer_fn", chunking_tokenizer_fn),
            ("secondary_chunking_regex", secondary_chunking_regex),
        ):
            if value is not None:
                raise ConfigError(f"{name}: {FOREIGN[name]}")
        return cls(
            policy,
            tokenizer,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            callback_manager=callback_manager,
            include_metadata=include_metadata,
            include_prev_next_rel=include_prev_next_rel,
            id_func=id_func,
            separator=separator,
            paragraph_separator=paragraph_separator,
            **kwargs,
        )

    def __setattr__(self, name: str, value: Any) -> None:
        """Assign a field, checked as in the constructor. ``chunk_size`` and
        ``chunk_overlap`` build the chunker again for them (LlamaIndex's
        ``Settings.chunk_size = 512`` assigns the node parser's); the chunker's other
        fields, and those two on a parser given a ready chunker, are refused."""
        if name in ("chunk_size", "chunk_overlap") and self.policy in FACTORIES:
            self._resize(**{name: value})
            return
        if name in _PARSER_FIXED:
            raise ConfigError(
                f"{name} describes the chunker, which is built once: construct a new "
                "RechunkNodeParser(...) instead of assigning it"
            )
        super().__setattr__(name, _checked(name, value))

    def _resize(self, chunk_size: object = None, chunk_overlap: object = None) -> None:
        """The chunker built again, as the constructor builds it, for a new ``chunk_size``
        or ``chunk_overlap``; nothing changes when they cannot be honoured."""
        # the chunker's own parameters but its sizes, which chunk_size sets
        kept = {k: v for k, v in self.params.items() if k not in SIZE_PARAMS}
        sizing = build_sizing(
            self.policy,
            self._sizing.counter or getattr(self._chunker, "token_counter", None),
            kept,
            chunk_size=self.chunk_size if chunk_size is None else chunk_size,
            chunk_overlap=self.chunk_overlap if chunk_overlap is None else chunk_overlap,
            receiver="the node parser",
        )
        chunker = sizing.chunker
        for field, value in (
            ("params", _factory_params(chunker)),
            ("chunk_size", sizing.limit),
            ("chunk_overlap", sizing.overlap),
            ("policy_id", chunker.policy_id),
        ):
            super().__setattr__(field, _checked(field, value))
        self._chunker, self._sizing, self._resized = chunker, sizing, {}

    def __getstate__(self) -> dict[str, Any]:
        """LlamaIndex's pickle state, refused when it would lose the chunker or ``id_func``
        (LlamaIndex leaves out what it cannot pickle, and the copy would make other ids)."""
        # LlamaIndex deletes what it cannot pickle from the dicts pydantic's state shares
        # with the parser: the state gets copies, and the parser keeps all of its own
        fields, private = dict(self.__dict__), dict(self.__pydantic_private__ or {})
        state: dict[str, Any] = super().__getstate__()
        kept = state.get("__pydantic_private__")
        state = {
            **state,
            "__dict__": dict(state["__dict__"]),
            "__pydantic_private__": None if kept is None else dict(kept),
        }
        self.__dict__.update(fields)
        if self.__pydantic_private__ is not None:
            self.__pydantic_private__.update(private)
        id_func = fields.get("id_func")
        if id_func is not None and "id_func" not in state["__dict__"]:
            name = getattr(id_func, "__qualname__", type(id_func).__name__)
            raise ConfigError(
                f"RechunkNodeParser {_PICKLING}: its id_func {name} cannot be pickled (a "
                "lambda or a local function cannot be: pass a module-level function)"
            )
        what = (
            f"its chunker {type(self._chunker).__name__} (a tokenizer given as a lambda or a "
            "local function cannot be: pass a module-level function)"
        )
        _check_kept(state, "RechunkNodeParser", {"_chunker": what})
        return state

    @classmethod
    def class_name(cls) -> str:
        """Name LlamaIndex uses when serialising the parser."""
        return "RechunkNodeParser"

    @property
    def chunker(self) -> Chunker:
        """The rechunk chunker that cuts the text."""
        return self._chunker

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        """One ``TextNode`` per chunk of each input node, in order (ids, offsets, relations set)."""
        out: list[TextNode] = []
        placements: list[_Placement] = []
        with self.callback_manager.event(
            CBEventType.CHUNKING, payload={EventPayload.CHUNKS: []}
        ) as event:
            located: list[tuple[Mapping[str, Any], bool]] = []
            for node in get_tqdm_iterable(nodes, show_progress, "Parsing nodes"):
                text = node.get_content(metadata_mode=MetadataMode.NONE)
                locator = locator_for(node, text) if self.include_metadata else None
                located.append((node.metadata, locator is not None))
                placement = _placement(node, text)
                parsed = self._parse_one(node, text, locator, placement.offset)
                out.extend(parsed)
                placements.extend([placement] * len(parsed))
            if self.include_metadata:
                warn_unlocated(located, stacklevel=4)
                warn_replaced_keys([metadata for metadata, _ in located], stacklevel=4)
            event.on_end(payload={EventPayload.CHUNKS: [n.text for n in out]})
        self._finish(out, placements)
        return list(out)

    def _sizing_for(self, node: BaseNode, metadata: dict[str, Any], excluded: list[str]) -> Sizing:
        """The sizing of one input node: chunks shrink so that the metadata header LlamaIndex
        embeds with them fits within ``chunk_size`` (as ``SentenceSplitter`` does)."""
        if not self.embed_metadata or not metadata:
            return self._sizing
        probe = TextNode(
            text="",
            metadata=metadata,
            excluded_embed_metadata_keys=excluded,
            metadata_separator=node.metadata_separator,
            metadata_template=node.metadata_template,
            text_template=getattr(node, "text_template", _TEXT_TEMPLATE),
        )
        return self._sizing_beside(
            probe.get_content(MetadataMode.EMBED),
            f"node {node.node_id!r}",
            "list keys in excluded_embed_metadata_keys, or pass embed_metadata=False",
        )

    def _sizing_beside(self, header: str, what: str, fix: str) -> Sizing:
        """The sizing of chunks embedded after ``header``: they shrink so that the header
        and a chunk fit within ``chunk_size`` together."""
        sizing = self._sizing
        counter = sizing.counter or getattr(sizing.chunker, "token_counter", None)
        if not header or counter is None:
            return sizing
        tokens = counter.count_many([header])[0]
        budget = sizing.limit - tokens
        largest = largest_chunk(sizing.chunker)
        if largest + sizing.overlap <= budget:  # a chunk with its overlap fits
            return sizing
        if budget < _MIN_BUDGET:
            raise InputError(
                f"{what}: its metadata header ({tokens} tokens as embedded) leaves "
                f"{budget} of chunk_size={sizing.limit} for text; {fix}"
            )
        if self.policy not in FACTORIES:
            warnings.warn(
                f"{what}: a metadata header of {tokens} tokens on chunks of up to "
                f"{largest} exceeds chunk_size={sizing.limit}; a ready chunker cannot be "
                "resized: size it for the header, or pass embed_metadata=False",
                WindowWarning,
                stacklevel=5,
            )
            return sizing
        cached = self._resized.get(budget)
        if cached is None:
            overlap = sizing.overlap if sizing.overlap < budget // 2 else budget // 10
            core = budget - overlap  # what a chunk holds beside its overlap
            factor = core / largest
            params = {
                k: (max(1, int(v * factor)) if k in SIZE_PARAMS else v)
                for k, v in self.params.items()
            }
            params["hard_max_tokens"] = core
            chunker = FACTORIES[self.policy](tokenizer=counter, **params)
            cached = replace(sizing, chunker=chunker, limit=budget, overlap=overlap)
            self._resized[budget] = cached
        return cached

    # -- SentenceSplitter's text methods -------------------------------------------------

    def split_text(self, text: str) -> list[str]:
        """The texts of the nodes ``text`` would be cut into, in order (what
        ``SentenceSplitter.split_text`` returns)."""
        return self._split(text, self._sizing)

    def split_texts(self, texts: list[str]) -> list[str]:
        """:meth:`split_text` of each text, one list."""
        return [chunk for text in texts for chunk in self.split_text(text)]

    def split_text_metadata_aware(self, text: str, metadata_str: str) -> list[str]:
        """:meth:`split_text` with chunks that leave room for ``metadata_str`` (the header
        embedded with each) within ``chunk_size``."""
        fix = "shorten the metadata, or split without it"
        return self._split(text, self._sizing_beside(metadata_str, "the text", fix))

    def split_texts_metadata_aware(self, texts: list[str], metadata_strs: list[str]) -> list[str]:
        """:meth:`split_text_metadata_aware` of each text with its metadata, one list."""
        if len(texts) != len(metadata_strs):
            raise InputError(f"{len(texts)} texts but {len(metadata_strs)} metadata strings")
        return [
            chunk
            for text, header in zip(texts, metadata_strs)
            for chunk in self.split_text_metadata_aware(text, header)
        ]

    def _split(self, text: str, sizing: Sizing) -> list[str]:
        return [piece.text for piece in self._pieces(text, sizing, "")]

    def _pieces(self, text: str, sizing: Sizing, where: str) -> list[Piece]:
        found = pieces(text, chunk_named(sizing.chunker, text, where), sizing)
        check_window(found, sizing, "RechunkNodeParser")
        return found

    def _parse_one(
        self, node: BaseNode, text: str, locator: Locator | None, offset: int = 0
    ) -> list[TextNode]:
        """The nodes of ``node``, whose text is ``text``; ``locator``: where its spans lie
        (a document a rechunk reader read), else None; ``offset``: where ``text`` starts in
        its document (:func:`_placement`), added to every span."""
        inherited = copy.deepcopy(dict(node.metadata)) if self.include_metadata else {}
        for key in METADATA_KEYS:
            inherited.pop(key, None)
        embed_excluded = [k for k in node.excluded_embed_metadata_keys if k not in METADATA_KEYS]
        sizing = self._sizing_for(node, inherited, embed_excluded)
        found = self._pieces(text, sizing, f"node {node.node_id!r}")
        if not found:
            return []

        def where(piece: Piece) -> dict[str, Any]:
            """Where a node's text lies, as text; the document's own keys (a record's id)
            stay its own."""
            if locator is None:
                return {}
            own = (piece.tile_start, piece.tile_end)
            at = locator_as_text(locate_piece(locator, piece.start, piece.end, own))
            return {key: value for key, value in at.items() if key not in inherited}

        located = [where(piece) for piece in found]
        # where a node lies is for citing it, not for embedding: a reflowed page would
        # otherwise change the header of every node after it
        for key in dict.fromkeys(key for where in located for key in where):
            if key not in embed_excluded:
                embed_excluded.append(key)
        source = node.as_related_node_info()
        revision = text_revision(text)
        llm_excluded = [
            key for key in node.excluded_llm_metadata_keys if key not in METADATA_KEYS
        ] + list(METADATA_KEYS)
        custom_ids = self.id_func is not None and self.id_func is not default_id_func
        parsed: list[TextNode] = []
        for i, piece in enumerate(found):
            metadata = copy.deepcopy(inherited)
            metadata.update(located[i])
            metadata.update(
                {
                    REVISION_KEY: revision,
                    POLICY_KEY: sizing.chunker.policy_id,
                    MODEL_ID_KEY: self.model_id,
                    SPAN_START_KEY: offset + piece.tile_start,
                    SPAN_END_KEY: offset + piece.tile_end,
                    TOKENS_KEY: piece.tokens,
                }
            )
            parsed.append(
                TextNode(
                    id_=str(self.id_func(i, node)) if custom_ids else _PENDING,
                    text=piece.text,
                    start_char_idx=offset + piece.start,
                    end_char_idx=offset + piece.end,
                    metadata=metadata,
                    excluded_embed_metadata_keys=list(embed_excluded),
                    excluded_llm_metadata_keys=list(llm_excluded),
                    metadata_separator=node.metadata_separator,
                    metadata_template=node.metadata_template,
                    text_template=getattr(node, "text_template", _TEXT_TEMPLATE),
                    relationships={NodeRelationship.SOURCE: source},
                )
            )
        return parsed

    def _finish(self, nodes: Sequence[TextNode], placements: Sequence[_Placement]) -> None:
        """Input keys, occurrences, ids and PREVIOUS/NEXT of ``nodes`` from what is embedded.

        The input key is that of ``node.get_content(MetadataMode.EMBED)``, the text
        LlamaIndex embeds (the metadata header the templates make from the keys not
        excluded, then the text), with rechunk's own keys always excluded; with
        ``embed_metadata=False`` every key is excluded and the key is the text's.
        ``placements`` holds each node's document and id scope (:func:`_placement`):
        ordinals count per document across the call, occurrences per scope.
        """
        seen: dict[str, Counter[str]] = defaultdict(Counter)
        ordinals: Counter[str] = Counter()
        custom_ids = self.id_func is not None and self.id_func is not default_id_func
        roots = [placement.root for placement in placements]
        for node, (root, scope, _) in zip(nodes, placements):
            node.metadata[DOC_ID_KEY] = root
            node.metadata[ORDINAL_KEY] = ordinals[root]
            ordinals[root] += 1
            if self.embed_metadata:
                excluded = [k for k in node.excluded_embed_metadata_keys if k not in METADATA_KEYS]
                excluded += [k for k in METADATA_KEYS if k in node.metadata]
            else:
                excluded = list(node.metadata)
            node.excluded_embed_metadata_keys = excluded
            key = input_key(self.model_id, node.get_content(MetadataMode.EMBED))
            occurrence = seen[scope][key]
            seen[scope][key] += 1
            node.metadata[INPUT_KEY_KEY] = key
            node.metadata[OCCURRENCE_KEY] = occurrence
            if not custom_ids:
                node.id_ = point_id(scope, key, occurrence)
        for node in nodes:
            node.relationships.pop(NodeRelationship.PREVIOUS, None)
            node.relationships.pop(NodeRelationship.NEXT, None)
        if self.include_prev_next_rel:
            for (before, first), (after, second) in pairwise(zip(nodes, roots)):
                if first == second:
                    after.relationships[NodeRelationship.PREVIOUS] = before.as_related_node_info()
                    before.relationships[NodeRelationship.NEXT] = after.as_related_node_info()

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        """LlamaIndex's post-processing, then our offsets, keys, ids and relations win again.

        LlamaIndex recomputes offsets with ``str.find`` and merges the parent's
        metadata into each node (which may change what is embedded): the true
        offsets are put back and keys and ids recomputed from the final nodes.
        """
        spans = [
            (node.start_char_idx, node.end_char_idx) if isinstance(node, TextNode) else None
            for node in nodes
        ]
        # each node's placement, from the node it was cut from (its SOURCE until LlamaIndex
        # puts that node's own SOURCE, the document, in its place)
        parents = [
            parent_doc_map.get(node.source_node.node_id) if node.source_node else None
            for node in nodes
        ]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, span in zip(nodes, spans):
            if span is not None and isinstance(node, TextNode):
                node.start_char_idx, node.end_char_idx = span
        text_nodes: list[TextNode] = []
        placements: list[_Placement] = []
        for node, parent in zip(nodes, parents):
            if isinstance(node, TextNode):
                text_nodes.append(node)
                placements.append(
                    _placement(parent, parent.get_content(metadata_mode=MetadataMode.NONE))
                    if parent is not None
                    else _Placement.of(node.ref_doc_id or node.node_id)
                )
        self._finish(text_nodes, placements)
        return nodes


def _root_id(node: BaseNode) -> str:
    """The document a node comes from: its SOURCE when it has one (a node of another parser,
    whose own id is random), else the node itself (a Document)."""
    source = node.source_node
    return source.node_id if source is not None else node.node_id


class _Placement(NamedTuple):
    """Where the text of an input node lies: its document (``root``), the scope its chunks'
    occurrences are counted in and their ids made under (``scope``), and where the text
    starts in the document's text (``offset``)."""

    root: str
    scope: str
    offset: int

    @classmethod
    def of(cls, root: str) -> _Placement:
        """The placement of a whole document."""
        return cls(root, root, 0)


def _placement(node: BaseNode, text: str) -> _Placement:
    """The placement of an input ``node`` whose text is ``text``.

    A document (a node with no SOURCE) is its own scope: its chunks' ids are
    ``point_id(doc_id, input_key, occurrence)``, occurrences counted over the whole text.
    A node another parser cut from a document (a Markdown section, a sentence window)
    may reach the parser in a call of its own (``IngestionPipeline(num_workers=...)`` hands
    each worker a batch), so its chunks' ids and occurrences depend on nothing but what
    the node carries: its document, its text and its own metadata (the keys the
    document's lacks or holds otherwise, such as ``header_path``). Ids stay unique across
    a document's nodes (a notice repeated in every section gets one id per section) and
    the same whatever the batching, and an edit changes the ids of the edited node's
    chunks only. Its offset is its ``start_char_idx`` when that spans its text exactly
    (as LlamaIndex's parsers set it), else 0: spans are then the node's own.
    """
    root = _root_id(node)
    if root == node.node_id:
        return _Placement.of(root)
    source = node.source_node
    document = source.metadata if source is not None else {}
    own = {
        key: value
        for key, value in node.metadata.items()
        if key not in METADATA_KEYS and (key not in document or document[key] != value)
    }
    scope = hash_fields(
        _PIECE_DOMAIN,
        (root, text_revision(text), json.dumps(own, sort_keys=True, default=str)),
    )
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    # a node with a PARENT (HierarchicalNodeParser's lower levels) counts its span in its
    # parent's text, not the document's: its chunks' offsets are into its own text
    if (
        isinstance(start, int)
        and isinstance(end, int)
        and start >= 0
        and end - start == len(text)
        and NodeRelationship.PARENT not in node.relationships
    ):
        return _Placement(root, scope, start)
    return _Placement(root, scope, 0)


# --------------------------------------------------------------------------- embeddings


def derive_model_id(underlying: object) -> str:
    """The model identity of a LlamaIndex ``BaseEmbedding``: class path and non-secret fields.

    ``"llamaindex:<module>.<class>(<name>=<value>,...)"``, see
    :func:`rechunk.adapters._reuse.derive_identity` for what is left out (secrets,
    ``embed_batch_size``, ``num_workers``, callbacks, ...). Pass ``model_id`` when
    something else changes the vectors.
    """
    return derive_identity(underlying, "llamaindex")


class CachedEmbedding(ReuseReadouts, BaseEmbedding):
    """A LlamaIndex ``BaseEmbedding`` that reuses vectors by rechunk input key.

    ``underlying`` is any LlamaIndex ``BaseEmbedding``; ``cache`` any rechunk
    :class:`~rechunk.reuse.cache.EmbeddingCache`. ``model_id`` names the model in
    every key (default :func:`derive_model_id`; never empty); it is also this
    object's ``model_name``, so LlamaIndex's ``IngestionCache`` hashes tell
    models apart.

    Contracts:

    * ``get_text_embedding_batch`` (behind the pipeline's ``__call__``) checks
      that every text is a ``str`` (else :class:`~rechunk.InputError` naming its
      position, before anything is looked up or embedded), then takes
      ``embed_batch_size`` texts at a time (its progress bar counts these
      batches); each batch de-duplicates its texts, looks each up under
      ``input_key(model_id, text)`` and sends only misses to
      ``underlying.get_text_embedding_batch``; the answer is checked (one
      finite vector per text, the known dimension), else
      :class:`~rechunk.EmbeddingError` and nothing of that call is cached. Hits
      and misses return the same float32 values.
    * Every batch that embeds is model-checked against the cache
      (:mod:`rechunk.reuse.agreement`): one or two short inputs at the front of its
      first request to the underlying, and :class:`~rechunk.ModelChangedError` before
      anything of it is cached or returned when the model behind ``model_id`` gives
      another vector than the one the cache holds. Not when ``underlying.pins_weights``
      is true (its identity names its weights, as ``RechunkEmbedding`` over a local model
      says).
    * ``dimension`` (optional): unknown, it is read from the cache's record for
      this model or learnt from the first answer (the record is one extra cache
      entry per model id, the same one :mod:`rechunk.adapters.langchain` writes).
    * Queries go straight to ``underlying.get_query_embedding`` unless
      ``cache_queries=True``; then they are cached under ``model_id + "#query"``.
    * The async variants use the underlying's async methods for misses and run
      cache reads and writes in a worker thread (``asyncio.to_thread``); the
      batches of ``aget_text_embedding_batch`` run concurrently (at most
      ``num_workers`` at a time when set), as in LlamaIndex.
    * Callbacks and instrumentation: this object reports no ``EMBEDDING`` event
      of its own; only the underlying's calls do, for the texts it really
      embeds. Its ``callback_manager`` is the underlying's: the one passed here
      (default: the underlying's own), or one assigned later (as
      ``VectorStoreIndex(callback_manager=...)`` and ``Settings`` do), is given
      to the underlying too. A ``TokenCountingHandler`` therefore counts model
      tokens, and a cache hit counts nothing. (LlamaIndex's own
      ``embeddings_cache`` and ``rate_limiter`` are not used here: give them to
      the underlying.)
    * Fields assigned after construction are checked as the constructor checks
      them; ``model_name`` (the model id) cannot be assigned.
    * Pickling (``IngestionPipeline.run(num_workers=...)`` sends transformations
      to worker processes): the underlying and the cache travel with it, and
      one that cannot be pickled raises :class:`~rechunk.ConfigError` instead of
      leaving a broken copy. That includes an underlying with private attributes
      LlamaIndex cannot pickle (it leaves them out) when its ``__init__`` cannot
      take its fields to rebuild them. An ``SQLiteCache`` reopens its file in each
      worker, so all processes share it; a ``MemoryCache`` copy keeps what a
      worker writes in that worker. A worker's :attr:`stats` stay in the worker.
    * A cache opened read-only (``SQLiteCache(path, readonly=True)``) is read
      and never written.
    * :attr:`stats` counts inputs, hits, misses and inputs sent to the model.
    """

    dimension: int | None = Field(default=None, description="Vector length, once known.")
    cache_queries: bool = Field(default=False, description="Cache query embeddings too.")
    _underlying: BaseEmbedding = PrivateAttr()
    _reuse: DocumentsAndQueries = PrivateAttr()

    def __init__(
        self,
        underlying: BaseEmbedding,
        cache: EmbeddingCache,
        model_id: str | None = None,
        *,
        dimension: int | None = None,
        cache_queries: bool = False,
        embed_batch_size: int = 256,
        num_workers: int | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if not isinstance(underlying, BaseEmbedding):
            raise ConfigError(
                f"underlying must be a LlamaIndex BaseEmbedding, got {type(underlying).__name__}"
            )
        check_cache(cache, "MemoryCache, SQLiteCache, ...")
        model_id = check_model_id(model_id) or derive_model_id(underlying)
        fields: dict[str, Any] = {  # this class's pydantic fields and BaseEmbedding's
            "model_name": model_id,
            "embed_batch_size": embed_batch_size,
            "num_workers": num_workers,
            "dimension": dimension,
            "cache_queries": cache_queries,
            "callback_manager": (
                underlying.callback_manager if callback_manager is None else callback_manager
            ),
        }
        super().__init__(**{name: _checked(name, value) for name, value in fields.items()})
        self._underlying = underlying
        pinned = bool(getattr(underlying, "pins_weights", False))  # no model check needed
        self._reuse = DocumentsAndQueries(cache, model_id, dimension, check=not pinned)
        underlying.callback_manager = self.callback_manager

    def __setattr__(self, name: str, value: Any) -> None:
        """Assign a field, checked as in the constructor; ``callback_manager`` also goes to
        the underlying (as ``VectorStoreIndex`` and ``Settings`` assign one)."""
        if name in _EMBEDDING_FIXED:
            raise ConfigError(
                f"{name} is the model id in every key: construct a new CachedEmbedding(...) "
                "instead of assigning it"
            )
        value = _checked(name, value)
        if name == "callback_manager":
            self._underlying.callback_manager = value
        super().__setattr__(name, value)

    @classmethod
    def class_name(cls) -> str:
        """Name LlamaIndex uses when serialising the embedding."""
        return "RechunkCachedEmbedding"

    @property
    def underlying(self) -> BaseEmbedding:
        """The wrapped embedding model."""
        return self._underlying

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> CachedEmbedding:
        """Refused with :class:`~rechunk.ConfigError`: the dict holds neither the wrapped
        model nor the cache (``to_dict`` is for display and logs)."""
        raise ConfigError(
            "CachedEmbedding cannot be rebuilt from a dict or JSON (neither the wrapped model "
            "nor the cache is in it): construct CachedEmbedding(underlying, cache, ...) again, "
            "or pickle it"
        )

    def __getstate__(self) -> dict[str, Any]:
        """LlamaIndex's pickle state, refused when the copy would lack the underlying, its
        private attributes or the cache.

        The underlying's own state is taken once, checked and pickled as it is.
        """
        state: dict[str, Any] = super().__getstate__()
        parts = {
            "_underlying": f"its underlying {type(self._underlying).__name__}",
            "_reuse": f"its cache {type(self.cache).__name__}",
        }
        _check_kept(state, "CachedEmbedding", parts)
        underlying = _ComponentState(self._underlying)
        if underlying.lost:
            raise ConfigError(
                f"CachedEmbedding {_PICKLING}: {parts['_underlying']} would lose its private "
                f"attribute(s) {', '.join(underlying.lost)} (LlamaIndex leaves out what it "
                "cannot pickle, and this model's __init__ cannot rebuild it from its fields): "
                "make them picklable, or create them in an __init__ that takes the fields"
            )
        state["__pydantic_private__"]["_underlying"] = underlying
        return state

    # -- LlamaIndex's entry points -----------------------------------------------------------
    # BaseEmbedding's versions report an EMBEDDING event for every text they get, cache hits
    # included, and the underlying reports the misses again; these report nothing themselves.

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """Vectors of ``texts``, ``embed_batch_size`` at a time; only misses reach the model."""
        texts = check_texts(texts)
        size = self.embed_batch_size
        batches = range(0, len(texts), size)
        vectors: list[Embedding] = []
        for start in get_tqdm_iterable(batches, show_progress, "Generating embeddings"):
            vectors.extend(self._get_text_embeddings(texts[start : start + size]))
        return vectors

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """Async :meth:`get_text_embedding_batch`; batches run concurrently."""
        texts = check_texts(texts)
        size = self.embed_batch_size
        starts = range(0, len(texts), size)
        jobs = [self._aget_text_embeddings(texts[start : start + size]) for start in starts]
        done = await run_jobs(
            jobs,
            show_progress=show_progress,
            workers=self.num_workers or max(1, len(jobs)),
            desc="Generating embeddings",
        )
        return [vector for batch in done for vector in batch]

    def get_text_embedding(self, text: str) -> Embedding:
        """One text's vector, reused from the cache when it is there."""
        return self._get_text_embedding(text)

    async def aget_text_embedding(self, text: str) -> Embedding:
        """Async :meth:`get_text_embedding`."""
        return await self._aget_text_embedding(text)

    def get_query_embedding(self, query: str) -> Embedding:
        """A query's vector (from the cache only with ``cache_queries=True``)."""
        return self._get_query_embedding(query)

    async def aget_query_embedding(self, query: str) -> Embedding:
        """Async :meth:`get_query_embedding`."""
        return await self._aget_query_embedding(query)

    # -- texts -----------------------------------------------------------------------------

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        vectors = self._reuse.documents.embed(texts, self._underlying.get_text_embedding_batch)
        self.dimension = self._reuse.documents.dimension
        return vectors

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        vectors = await self._reuse.documents.aembed(
            texts, self._underlying.aget_text_embedding_batch
        )
        self.dimension = self._reuse.documents.dimension
        return vectors

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aget_text_embeddings([text]))[0]

    # -- queries ---------------------------------------------------------------------------

    def _get_query_embedding(self, query: str) -> Embedding:
        if not self.cache_queries:
            return self._underlying.get_query_embedding(query)

        def embed_one(batch: list[str]) -> list[Embedding]:
            return [self._underlying.get_query_embedding(batch[0])]

        return self._reuse.for_queries().embed([query], embed_one)[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        if not self.cache_queries:
            return await self._underlying.aget_query_embedding(query)

        async def embed_one(batch: list[str]) -> list[Embedding]:
            return [await self._underlying.aget_query_embedding(batch[0])]

        return (await self._reuse.for_queries().aembed([query], embed_one))[0]
