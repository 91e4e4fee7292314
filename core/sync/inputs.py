"""What a sync checks before it writes anything: the documents (rechunk Documents, each
doc_id once, no empty text, no metadata key rechunk owns), the embedder and cache pair,
the fit of each chunker to the model, and the collection (its dimension and model)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rechunk.chunking.chunk import Chunker
from rechunk.document import Document
from rechunk.errors import CollectionMismatchError, ConfigError, InputError, StoreError
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.cached_embedder import CachedEmbedder
from rechunk.reuse.embedding import Embedder
from rechunk.sync.store import RESERVED_METADATA_KEYS, CollectionInfo, VectorStore


def check_flags(**flags: object) -> None:
    """ConfigError for an option that is not True or False: ``prune="false"`` is a
    non-empty str, so truthy, and would delete documents."""
    for name, value in flags.items():
        if type(value) is not bool:
            raise ConfigError(f"{name} must be True or False, not {value!r}")


def _check_has(value: object, name: str, members: tuple[str, ...], use: str) -> None:
    missing = [m for m in members if not hasattr(value, m)]
    if missing:
        raise ConfigError(
            f"{name} is a {type(value).__name__}, which has no {', '.join(missing)}: pass {use}"
        )


def check_parts(
    store: VectorStore,
    chunker: Chunker,
    embedder: Embedder,
    cache: EmbeddingCache | None,
    **callables: object,
) -> None:
    """ConfigError for a store, chunker, embedder or cache that is not one (None where a
    store is due, a policy name where a chunker is, a path where a cache is), an
    embedder whose ``model_id`` is not a non-empty str or whose ``dimension`` is not a
    positive int, and each of ``callables`` (``progress``, ``chunker_for``) that is
    neither None nor callable."""
    _check_has(
        store,
        "store",
        ("collection_info", "get_points_many", "check_metadata", "write", "delete"),
        "a rechunk store, such as rechunk.adapters.qdrant.QdrantStore(client, collection)",
    )
    _check_has(
        chunker,
        "chunker",
        ("chunk", "policy_id", "hard_max_tokens"),
        "a rechunk chunker, such as rechunk.policy_for(embedder, 'structured')",
    )
    _check_has(
        embedder,
        "embedder",
        ("embed", "model_id", "dimension", "max_input_tokens"),
        "a rechunk embedder, such as rechunk.integrations.onnx.OnnxEmbedder()",
    )
    if cache is not None:
        _check_has(cache, "cache", ("get_many", "put_many"), "rechunk.SQLiteCache(path) or None")
    model_id = embedder.model_id
    if not isinstance(model_id, str) or not model_id.strip():
        raise ConfigError(f"embedder.model_id must be a non-empty str, not {model_id!r}")
    dimension = embedder.dimension
    if type(dimension) is not int or dimension < 1:
        raise ConfigError(
            f"{model_id}: embedder.dimension must be a positive int, not {dimension!r}"
        )
    for name, value in callables.items():
        if value is not None and not callable(value):
            raise ConfigError(f"{name} must be a callable or None, not a {type(value).__name__}")


def _check_documents(documents: Iterable[Document]) -> list[Document]:
    kind = type(documents).__name__
    wrong = InputError(f"sync takes an iterable of rechunk.Document, not {kind}")
    if isinstance(documents, (str, bytes, Document)) or documents is None:
        raise wrong
    try:
        docs = list(documents)
    except TypeError:
        raise wrong from None
    seen: set[str] = set()
    for doc in docs:
        if not isinstance(doc, Document):
            raise InputError(f"sync takes rechunk.Document objects, not {type(doc).__name__}")
        if doc.doc_id in seen:
            raise InputError(f"doc_id {doc.doc_id!r} appears more than once in one sync")
        seen.add(doc.doc_id)
        if not doc.text.strip():
            raise InputError(
                f"document {doc.doc_id!r} is empty or whitespace-only; "
                "delete it (prune) instead of syncing an empty revision"
            )
        clash = RESERVED_METADATA_KEYS & set(doc.metadata or {})
        if clash:
            raise InputError(
                f"document {doc.doc_id!r}: metadata keys {sorted(clash)} are reserved by rechunk"
            )
    return docs


def _split_embedder(
    embedder: Embedder, cache: EmbeddingCache | None
) -> tuple[Embedder, EmbeddingCache | None]:
    if isinstance(embedder, CachedEmbedder):
        if cache is not None and cache is not embedder.cache:
            raise ConfigError("pass the cache either inside CachedEmbedder or as cache=, not both")
        return embedder.embedder, embedder.cache
    return embedder, cache


def check_compatible(chunker: Chunker, embedder: Embedder) -> None:
    """Refuse a chunker whose chunks the embedder could not read whole."""
    window = embedder.max_input_tokens
    special = int(getattr(embedder, "special_tokens", 0) or 0)
    if window is not None and chunker.hard_max_tokens + special > window:
        raise ConfigError(
            f"chunker {chunker.policy_id} allows {chunker.hard_max_tokens} tokens per chunk "
            f"but {embedder.model_id} reads at most {window - special} (+{special} special): "
            "use rechunk.policy_for(embedder, kind) to size the chunker"
        )
    tokenizer = getattr(embedder, "tokenizer", None)
    counter = getattr(chunker, "token_counter", None)
    if tokenizer is not None and counter is not None:
        from rechunk.chunking.tokens import resolve_tokenizer

        if resolve_tokenizer(tokenizer).identity != counter.identity:
            raise ConfigError(
                f"chunker {chunker.policy_id} counts tokens with another tokenizer than "
                f"{embedder.model_id}; pass tokenizer=embedder.tokenizer (or use policy_for)"
            )


def check_inputs(
    documents: Iterable[Document],
    store: VectorStore,
    chunker: Chunker,
    embedder: Embedder,
    cache: EmbeddingCache | None,
) -> tuple[list[Document], Embedder, EmbeddingCache | None]:
    """What a sync (or a reindex) checks before any I/O: the documents, their metadata
    against the store, the embedder/cache pair and the chunker's fit to the model.
    Returns the documents, the raw embedder and the cache."""
    docs = _check_documents(documents)
    for doc in docs:
        store.check_metadata(doc.doc_id, doc.metadata or {})
    raw_embedder, cache = _split_embedder(embedder, cache)
    check_compatible(chunker, raw_embedder)
    return docs, raw_embedder, cache


def _check_store(
    store: VectorStore, embedder: Embedder, dry_run: bool = False
) -> CollectionInfo | None:
    """Refuse an incompatible collection; its info, None when it is missing (allowed for a
    dry run)."""
    info = store.collection_info()
    if info is None and dry_run:
        return None
    if info is None:
        raise StoreError(
            f"collection {store.collection!r} does not exist; "
            "call store.ensure_collection(embedder.dimension) first"
        )
    if info.dimension == 0:  # a Chroma collection made elsewhere, with no vector yet
        raise StoreError(
            f"collection {info.name!r} records no dimension yet; call "
            "store.ensure_collection(embedder.dimension) first"
        )
    if info.dimension != embedder.dimension:
        raise CollectionMismatchError(
            f"collection {info.name!r} holds {info.dimension}-dimensional vectors but "
            f"{embedder.model_id} makes {embedder.dimension}-dimensional ones"
        )
    others = sorted(set(info.model_ids) - {embedder.model_id})
    if others:
        also = f" (and {embedder.model_id})" if embedder.model_id in info.model_ids else ""
        raise CollectionMismatchError(
            f"collection {info.name!r} was written by another model ({', '.join(others)})"
            f"{also}; sync into a new collection or reindex"
        )
    return info


def lends_to(info: CollectionInfo, model_id: str) -> bool:
    """Whether a collection may hold vectors of ``model_id``: it holds that model's points,
    or no rechunk point yet (input keys name the model, so no other's can serve it)."""
    return not info.model_ids or model_id in info.model_ids


def check_lenders(reuse_from: Sequence[VectorStore], embedder: Embedder) -> None:
    """Refuse a ``reuse_from`` collection another model wrote: no vector of it can serve
    this model (input keys name the model), so it would lend nothing, silently, to a
    sync its caller meant to be a free move. A missing or empty collection lends nothing
    either, and is allowed (a reindex's first generation)."""
    for lender in reuse_from:
        info = lender.collection_info()
        if info is not None and not lends_to(info, embedder.model_id):
            raise ConfigError(
                f"reuse_from collection {info.name!r} was written by another model "
                f"({', '.join(sorted(info.model_ids))}): none of its vectors can serve "
                f"{embedder.model_id}, whose input keys differ; leave it out (the inputs "
                "are embedded with this model)"
            )


def _chooser(
    chunker: Chunker,
    chunker_for: Callable[[Document], Chunker | None] | None,
    docs: Sequence[Document],
    embedder: Embedder,
) -> Callable[[Document], Chunker]:
    """Each document's chunker: ``chunker_for``'s pick (asked once per document, here,
    before any I/O, each pick checked to fit the embedder), else ``chunker``."""
    if chunker_for is None:
        return lambda doc: chunker
    if not callable(chunker_for):
        raise ConfigError("chunker_for must be a callable (Document) -> Chunker | None")
    chosen: dict[str, Chunker] = {}
    checked = {id(chunker)}
    for doc in docs:
        picked = chunker_for(doc)
        if picked is None or picked is chunker:
            continue
        if not callable(getattr(picked, "chunk", None)):
            raise ConfigError(
                f"chunker_for({doc.doc_id!r}) returned a {type(picked).__name__}, not a chunker"
            )
        if id(picked) not in checked:
            check_compatible(picked, embedder)
            checked.add(id(picked))
        chosen[doc.doc_id] = picked
    return lambda doc: chosen.get(doc.doc_id, chunker)
