"""Policy changes as index generations: shadow collection, verification, atomic alias switch."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sync_helpers import FaultyStore, InjectedFault, RecordingEmbedder

from rechunk import ConfigError, Document, MemoryCache, StoreError, policy_for, reindex, sync
from rechunk.adapters.chroma import ChromaStore
from rechunk.adapters.qdrant import QdrantStore
from rechunk.generations import generation_name, open_live

DOCS = Path(__file__).resolve().parent.parent / "examples" / "docs"


@pytest.fixture
def documents() -> list[Document]:
    return [Document(p.name, p.read_text()) for p in sorted(DOCS.glob("*.md"))]


@pytest.fixture
def qdrant() -> Any:
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    yield QdrantStore(client, "docs")
    client.close()


def test_reindex_switches_the_alias_atomically(qdrant: Any, minilm: Any,
                                              documents: list[Document]) -> None:
    cache = MemoryCache()
    old_policy = policy_for(minilm, "recursive")
    live = open_live(qdrant, old_policy, minilm.dimension)
    sync(documents, live, chunker=old_policy, embedder=minilm, cache=cache)
    assert qdrant.aliases() == {"docs": generation_name("docs", old_policy.policy_id)}

    new_policy = policy_for(minilm, "fixed")
    recorder = RecordingEmbedder(minilm)
    result = reindex(documents, qdrant, new_policy, recorder, cache=cache)
    assert result.switched and result.previous == generation_name("docs", old_policy.policy_id)
    assert qdrant.aliases()["docs"] == result.collection
    # reads through the alias now see only the new policy's chunks
    held = [p for d in documents for p in qdrant.get_points(d.doc_id)]
    assert {p.payload.policy for p in held} == {new_policy.policy_id}
    assert len(held) == sum(len(new_policy.chunk(d.text)) for d in documents)
    # only inputs the old generation lacked were embedded
    old_inputs = {c.text for d in documents for c in old_policy.chunk(d.text)}
    assert not set(recorder.embedded) & old_inputs
    # the old generation is kept until asked
    assert qdrant.with_collection(result.previous).collection_info() is not None
    other = qdrant.with_collection("unrelated")
    again = reindex(documents, other, policy_for(minilm, "cdc"), minilm, alias="docs",
                    cache=cache, drop_old=True)
    assert again.dropped == result.collection
    assert qdrant.with_collection(result.collection).collection_info() is None


def test_sync_refuses_a_policy_change_on_an_alias(qdrant: Any, minilm: Any,
                                                  documents: list[Document]) -> None:
    first = policy_for(minilm, "recursive")
    open_live(qdrant, first, minilm.dimension)
    with pytest.raises(ConfigError, match="reindex"):
        open_live(qdrant, policy_for(minilm, "cdc"), minilm.dimension)


def test_failed_reindex_leaves_the_live_generation(qdrant: Any, minilm: Any,
                                                   documents: list[Document]) -> None:
    cache = MemoryCache()
    policy = policy_for(minilm, "recursive")
    sync(documents, open_live(qdrant, policy, minilm.dimension), chunker=policy,
         embedder=minilm, cache=cache)
    before = dict(qdrant.aliases())

    class FailingWrites(FaultyStore):
        def with_collection(self, name: str) -> Any:
            inner = self.inner.with_collection(name)
            return FaultyStore(inner, fail_at=3) if name != before["docs"] else inner

    with pytest.raises(InjectedFault):
        reindex(documents, FailingWrites(qdrant), policy_for(minilm, "fixed"), minilm,
                cache=cache)
    assert qdrant.aliases() == before
    assert {p.payload.policy for p in qdrant.get_points(documents[0].doc_id)} == {
        policy.policy_id}


def test_plain_collection_cannot_be_switched(qdrant: Any, minilm: Any,
                                             documents: list[Document]) -> None:
    qdrant.ensure_collection(minilm.dimension)  # "docs" is a collection, not an alias
    with pytest.raises(StoreError, match="not an alias"):
        reindex(documents, qdrant, policy_for(minilm, "fixed"), minilm)


def test_chroma_builds_the_generation_without_switching(tmp_path: Path, minilm: Any,
                                                        documents: list[Document]) -> None:
    import chromadb

    store = ChromaStore(chromadb.PersistentClient(path=str(tmp_path)), f"c{uuid.uuid4().hex[:6]}")
    cache = MemoryCache()
    policy = policy_for(minilm, "recursive")
    sync(documents, open_live(store, policy, minilm.dimension), chunker=policy, embedder=minilm,
         cache=cache)
    result = reindex(documents, store, policy_for(minilm, "fixed"), minilm, cache=cache)
    assert not result.switched and result.previous == store.collection
    new = store.with_collection(result.collection)
    assert new.doc_ids() == {d.doc_id for d in documents}
    assert {p.payload.policy for p in store.get_points(documents[0].doc_id)} == {
        policy.policy_id}
