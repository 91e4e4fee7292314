"""Index generations: a policy change builds a shadow collection, then switches an alias.

A generation is a collection named ``<alias>__<policy id>`` (with ``__<model hash>``
appended when that name already holds another model's vectors). Applications query
the alias; :func:`reindex` builds the next generation beside the live one
(reusing every vector whose input is unchanged, from the cache or from the live
collection), verifies it, and switches the alias in one atomic request (Qdrant).
Chroma has no aliases: the new generation is built and verified the same way
and the report names it; the application switches the collection it opens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from rechunk.cache import EmbeddingCache
from rechunk.chunk import Chunker
from rechunk.document import Document
from rechunk.embedding import Embedder
from rechunk.errors import ConfigError, StoreError
from rechunk.store import VectorStore
from rechunk.sync import SyncReport, sync

__all__ = ["GenerationalStore", "ReindexReport", "generation_name", "open_live", "reindex"]


@runtime_checkable
class GenerationalStore(VectorStore, Protocol):
    """A store that can open other collections of its client and drop them."""

    def with_collection(self, name: str) -> GenerationalStore: ...

    def drop_collection(self) -> None: ...


def generation_name(alias: str, policy_id: str, model_id: str | None = None) -> str:
    """``<alias>__<policy id>``: the collection of one generation.

    With ``model_id``, ``<alias>__<policy id>__<model hash>``: the generation of
    that policy for a model other than the one the plain name holds.
    """
    if model_id is None:
        return f"{alias}__{policy_id}"
    return f"{alias}__{policy_id}__{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def _holds_other_model(store: Any, embedder: Embedder) -> bool:
    """True when ``store``'s collection exists and holds another model's vectors."""
    info = store.collection_info()
    if info is None:
        return False
    return info.dimension != embedder.dimension or bool(info.model_ids - {embedder.model_id})


def _aliases(store: Any) -> dict[str, str] | None:
    aliases = getattr(store, "aliases", None)
    return aliases() if callable(aliases) else None


def open_live(store: Any, chunker: Chunker, dimension: int) -> Any:
    """The store a sync should write to under ``store.collection`` (created if needed).

    On a store with aliases (Qdrant), a name that does not exist yet becomes an
    alias of a new generation ``<name>__<policy>``, so that a later policy change
    can switch it atomically; an alias whose generation holds another policy is
    refused (that change is a :func:`reindex`). A plain collection is used as it is.
    """
    aliases = _aliases(store)
    name = store.collection
    if aliases is None:
        store.ensure_collection(dimension)
        return store
    if name in aliases:
        expected = generation_name(name, chunker.policy_id)
        if aliases[name] != expected and not aliases[name].startswith(expected + "__"):
            live = aliases[name][len(name) + 2 :]  # "<alias>__<policy id>[__<model hash>]"
            raise ConfigError(
                f"{name!r} points at generation {aliases[name]!r}, built with policy "
                f"{live.split('__')[0]}, not {chunker.policy_id}: sync with the policy it was "
                f"built with (--policy {live.split('-')[0]}), or run `rechunk reindex "
                f"--policy {chunker.policy_id.split('-')[0]}` to switch policies"
            )
        store.ensure_collection(dimension)
        return store
    if store.collection_info() is not None:
        store.ensure_collection(dimension)
        return store  # a plain collection made by someone else: use it as it is
    generation = store.with_collection(generation_name(name, chunker.policy_id))
    generation.ensure_collection(dimension)
    store.switch_alias(generation.collection)
    return store


@dataclass
class ReindexReport:
    """What :func:`reindex` did: the generation built, the switch, and its sync report."""

    alias: str
    previous: str | None
    collection: str
    switched: bool
    dropped: str | None
    sync: SyncReport

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reindex(
    documents: Iterable[Document],
    store: Any,
    chunker: Chunker,
    embedder: Embedder,
    *,
    alias: str | None = None,
    cache: EmbeddingCache | None = None,
    drop_old: bool = False,
) -> ReindexReport:
    """Build the generation of ``chunker`` for ``documents`` and make it live.

    ``store`` is opened on the alias (Qdrant) or on the live collection (Chroma);
    ``alias`` names another one on the same client instead.
    The documents are the complete set: the new generation holds exactly them.
    The previous generation is kept unless ``drop_old`` is set (then it is
    deleted after the switch). If building or verifying fails, the live
    generation is untouched and queries never see the partial one.
    """
    if not callable(getattr(store, "with_collection", None)):
        raise ConfigError(f"{type(store).__name__} cannot open another collection to reindex")
    docs = list(documents)
    if alias is not None:
        store = store.with_collection(alias)
    alias = store.collection
    aliases = _aliases(store)
    if aliases is None:
        previous = alias if store.collection_info() is not None else None
    else:
        previous = aliases.get(alias)
        if previous is None and store.collection_info() is not None:
            raise StoreError(
                f"{alias!r} is a plain Qdrant collection, not an alias, so no generation can "
                "replace it atomically; reindex under a new alias name"
            )
    target = generation_name(alias, chunker.policy_id)
    if _holds_other_model(store.with_collection(target), embedder):
        target = generation_name(alias, chunker.policy_id, embedder.model_id)
    shadow = store.with_collection(target)
    live = store.with_collection(previous) if previous and previous != target else None
    shadow.ensure_collection(embedder.dimension)
    report = sync(
        docs,
        shadow,
        chunker=chunker,
        embedder=embedder,
        cache=cache,
        prune=True,
        reuse_from=[live] if live is not None else [],
    )
    held = shadow.doc_ids()
    wanted = {doc.doc_id for doc in docs}
    if report.stale_check != "passed" or held != wanted:
        raise StoreError(
            f"generation {target!r} failed verification ({len(held ^ wanted)} documents "
            f"differ, stale check {report.stale_check}); the live index was not switched"
        )
    switched = False
    if aliases is not None and previous != target:
        store.switch_alias(target)
        switched = True
    dropped = None
    if drop_old and switched and live is not None:
        live.drop_collection()
        dropped = previous
    return ReindexReport(alias, previous, target, switched, dropped, report)
