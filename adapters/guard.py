"""Filters that keep superseded points out of a LangChain or LlamaIndex retriever.

A sync publishes a document's new revision before it deletes the old one
(``order="upsert-then-delete"``, the default). In between, the old points are
marked ``superseded: 1`` in a payload-only update (see
:func:`rechunk.sync.store.mark_superseded`), and rechunk's own search
(:meth:`rechunk.sync.store.VectorStore.search`, ``rechunk query``) leaves them out.
A retriever of LangChain or LlamaIndex reads the collection with its own query,
so it needs a filter that does the same; these functions build the right one
for the vector store class it uses::

    from rechunk.adapters.guard import langchain_filter, llamaindex_filters

    # LangChain (langchain_qdrant.QdrantVectorStore or langchain_chroma.Chroma)
    retriever = vectorstore.as_retriever(search_kwargs={"filter": langchain_filter(vectorstore)})
    # LlamaIndex (QdrantVectorStore or ChromaVectorStore under a VectorStoreIndex)
    retriever = index.as_retriever(filters=llamaindex_filters(index.vector_store))

Each takes the filter the caller already uses, if any, and returns one that
requires it too. What they build (for a caller who writes the filter by hand):

* LangChain on Qdrant: ``models.Filter(must_not=[models.FieldCondition(
  key="metadata.superseded", match=models.MatchValue(value=1))])`` (the
  store's ``metadata_payload_key`` in place of ``metadata``).
* LangChain on Chroma: ``{"superseded": {"$ne": 1}}``.
* LlamaIndex on Qdrant: ``MetadataFilters(filters=[MetadataFilter(key="superseded",
  value=1)], condition=FilterCondition.NOT)`` (LlamaIndex turns NOT into
  Qdrant's ``must_not``; its ``!=`` is Qdrant's ``except`` match, which a point
  without the key does not pass).
* LlamaIndex on Chroma: ``MetadataFilters(filters=[MetadataFilter(key="superseded",
  value=1, operator=FilterOperator.NE)])`` (Chroma's ``$ne`` passes a record
  without the key; LlamaIndex's Chroma store has no NOT).

The mark is the integer 1, not ``true``: LlamaIndex's ``MetadataFilter`` cannot hold a
bool, and Qdrant and Chroma tell 1 and ``true`` apart. A point is marked only between
two steps of one sync (or, after a sync was killed between them, until the next sync
deletes it), so the filter excludes nothing most of the time.
"""

from __future__ import annotations

from typing import Any, Literal

from rechunk._optional import require
from rechunk.errors import ConfigError
from rechunk.sync.store import SUPERSEDED_KEY, SUPERSEDED_MARK

__all__ = ["langchain_filter", "llamaindex_filters"]

Kind = Literal["qdrant", "chroma"]

#: module prefixes of the vector store classes each function knows
_LANGCHAIN: dict[str, Kind] = {"langchain_qdrant": "qdrant", "langchain_chroma": "chroma"}
_LLAMAINDEX: dict[str, Kind] = {
    "llama_index.vector_stores.qdrant": "qdrant",
    "llama_index.vector_stores.chroma": "chroma",
}


def _kind(vectorstore: object, known: dict[str, Kind], what: str) -> Kind:
    """``"qdrant"`` or ``"chroma"``: the string itself, or the kind of the vector store
    class (or a class it derives from) by its module."""
    if vectorstore == "qdrant" or vectorstore == "chroma":
        return vectorstore
    for cls in type(vectorstore).__mro__:
        for prefix, kind in known.items():
            if cls.__module__ == prefix or cls.__module__.startswith(prefix + "."):
                return kind
    raise ConfigError(
        f"{what} takes a {' or '.join(sorted(known))} vector store, or 'qdrant' or "
        f"'chroma', not {type(vectorstore).__name__}"
    )


def langchain_filter(vectorstore: object, filter: Any = None) -> Any:
    """The ``filter`` to pass in ``search_kwargs`` of ``vectorstore.as_retriever`` (or to
    its ``similarity_search``) so that superseded points are left out, requiring
    ``filter`` (the caller's own, in the store's form) too.

    ``vectorstore`` is a ``langchain_qdrant.QdrantVectorStore`` (its
    ``metadata_payload_key`` names where the fields sit) or a ``langchain_chroma.Chroma``,
    or ``"qdrant"`` / ``"chroma"`` (Qdrant's default key ``metadata``). Qdrant gets a
    ``qdrant_client.models.Filter``, Chroma a ``where`` dict."""
    kind = _kind(vectorstore, _LANGCHAIN, "langchain_filter")
    if kind == "chroma":
        guard: dict[str, Any] = {SUPERSEDED_KEY: {"$ne": SUPERSEDED_MARK}}
        if filter is None:
            return guard
        if not isinstance(filter, dict):
            raise ConfigError(f"a Chroma filter is a dict, not {type(filter).__name__}")
        return {"$and": [filter, guard]}
    models = require("qdrant_client.models", "qdrant", package="qdrant-client")
    prefix = getattr(vectorstore, "metadata_payload_key", "metadata")
    key = f"{prefix}.{SUPERSEDED_KEY}" if prefix else SUPERSEDED_KEY
    marked = models.FieldCondition(key=key, match=models.MatchValue(value=SUPERSEDED_MARK))
    if filter is None:
        return models.Filter(must_not=[marked])
    if not isinstance(filter, models.Filter):
        raise ConfigError(f"a Qdrant filter is a models.Filter, not {type(filter).__name__}")
    return models.Filter(must=[filter], must_not=[marked])


def llamaindex_filters(vectorstore: object, filters: Any = None) -> Any:
    """The ``MetadataFilters`` to pass as ``filters=`` to ``index.as_retriever`` (or in a
    ``VectorStoreQuery``) so that superseded points are left out, requiring ``filters``
    (the caller's own ``MetadataFilters``) too.

    ``vectorstore`` is LlamaIndex's ``QdrantVectorStore`` or ``ChromaVectorStore`` (say
    ``index.vector_store``), or ``"qdrant"`` / ``"chroma"``."""
    kind = _kind(vectorstore, _LLAMAINDEX, "llamaindex_filters")
    types = require(
        "llama_index.core.vector_stores.types", "llamaindex", package="llama-index-core"
    )
    if kind == "qdrant":
        guard = types.MetadataFilters(
            filters=[types.MetadataFilter(key=SUPERSEDED_KEY, value=SUPERSEDED_MARK)],
            condition=types.FilterCondition.NOT,
        )
    else:
        guard = types.MetadataFilters(
            filters=[
                types.MetadataFilter(
                    key=SUPERSEDED_KEY, value=SUPERSEDED_MARK, operator=types.FilterOperator.NE
                )
            ]
        )
    if filters is None:
        return guard
    if not isinstance(filters, types.MetadataFilters):
        raise ConfigError(f"filters must be MetadataFilters, not {type(filters).__name__}")
    return types.MetadataFilters(filters=[filters, guard], condition=types.FilterCondition.AND)
