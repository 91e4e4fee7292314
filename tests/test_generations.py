"""Policy changes as index generations: shadow collection, verification, atomic alias switch."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sync_helpers import FaultyStore, InjectedFault, RecordingEmbedder, snapshot

from rechunk import (
    ConfigError,
    Document,
    InputError,
    MemoryCache,
    StoreError,
    policy_for,
    reindex,
    sync,
)
from rechunk.adapters.chroma import ChromaStore
from rechunk.adapters.qdrant import QdrantStore
from rechunk.sync.generations import (
    check_live_policy,
    generation_name,
    generations,
    open_live,
)

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
    live = open_live(qdrant, first, minilm.dimension)
    sync(documents[:1], live, chunker=first, embedder=minilm)
    with pytest.raises(ConfigError, match="reindex"):
        open_live(qdrant, policy_for(minilm, "cdc"), minilm.dimension)


def test_an_empty_generation_of_another_policy_is_replaced(qdrant: Any, minilm: Any,
                                                          documents: list[Document]) -> None:
    """A first sync that failed after making its generation (a model that could not be
    reached, whose window gave another policy) left it empty: every later sync was
    refused it ('built with policy ...'). Empty, it gives way to the new policy's."""
    failed = policy_for(minilm, "recursive")
    open_live(qdrant, failed, 8)
    chunker = policy_for(minilm, "cdc")
    # a dry run is not refused what the sync does
    check_live_policy(qdrant, chunker, dimension=minilm.dimension)
    live = open_live(qdrant, chunker, minilm.dimension)
    assert qdrant.aliases() == {"docs": generation_name("docs", chunker.policy_id)}
    assert qdrant.with_collection(generation_name("docs", failed.policy_id)).collection_info() is None
    report = sync(documents, live, chunker=chunker, embedder=minilm)
    assert report.stale_check == "passed" and live.collection_info().dimension == minilm.dimension


def test_an_empty_generation_of_the_same_size_or_read_elsewhere_is_kept(
    qdrant: Any, minilm: Any
) -> None:
    """An empty generation of another policy but the same vector size may be another
    first sync's, made a moment ago: replacing it would let that sync write its policy's
    points into this one's generation. It is refused, as one another alias points at."""
    from qdrant_client import models

    first = policy_for(minilm, "recursive")
    open_live(qdrant, first, minilm.dimension)
    with pytest.raises(ConfigError, match="reindex"):
        open_live(qdrant, policy_for(minilm, "cdc"), minilm.dimension)
    assert qdrant.aliases() == {"docs": generation_name("docs", first.policy_id)}
    other = QdrantStore(qdrant.client, "other")
    open_live(other, first, 8)
    other.client.update_collection_aliases(
        change_aliases_operations=[
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(
                    collection_name=generation_name("other", first.policy_id), alias_name="prod"
                )
            )
        ]
    )
    with pytest.raises(ConfigError, match="reindex"):
        open_live(other, policy_for(minilm, "cdc"), minilm.dimension)
    assert qdrant.client.count("prod").count == 0  # the application's alias still reads


def test_an_empty_generation_of_another_size_is_made_again(qdrant: Any, minilm: Any,
                                                            documents: list[Document]) -> None:
    """A first sync with an 8-dimensional model, killed after making its generation: a
    sync with MiniLM was refused ('holds 8-dimensional vectors') for ever. Empty, it is
    made again at the new size; one that holds points is still refused."""
    chunker = policy_for(minilm)
    open_live(qdrant, chunker, 8)
    live = open_live(qdrant, chunker, minilm.dimension)
    assert live.collection_info().dimension == minilm.dimension
    assert qdrant.aliases() == {"docs": generation_name("docs", chunker.policy_id)}
    report = sync(documents, live, chunker=chunker, embedder=minilm)
    assert report.stale_check == "passed"
    with pytest.raises(StoreError, match="dimensional"):
        open_live(qdrant, chunker, 8)  # it holds points now: never dropped
    assert qdrant.collection_info().points == report.chunks["added"]


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


def test_a_plain_collection_lends_its_vectors_to_a_new_alias(
    qdrant: Any, minilm: Any, documents: list[Document]
) -> None:
    policy = policy_for(minilm, "recursive")
    qdrant.ensure_collection(minilm.dimension)  # a plain collection, as older tools make
    sync(documents, qdrant, chunker=policy, embedder=minilm)
    recorder = RecordingEmbedder(minilm)
    result = reindex(documents, qdrant, policy, recorder, alias="docs_live")
    assert result.switched and qdrant.aliases() == {"docs_live": result.collection}
    assert recorder.calls == [] and result.sync.inputs["from_store"] > 0
    assert qdrant.doc_ids() == {d.doc_id for d in documents}  # the plain one is untouched


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


def _add_alias(store: QdrantStore, alias: str, collection: str) -> None:
    """An alias the application made itself, with the Qdrant client."""
    from qdrant_client import models

    store.client.update_collection_aliases(change_aliases_operations=[
        models.CreateAliasOperation(
            create_alias=models.CreateAlias(collection_name=collection, alias_name=alias))])


def _live(qdrant: Any, minilm: Any, documents: list[Document], cache: MemoryCache,
          kind: str = "recursive") -> Any:
    policy = policy_for(minilm, kind)
    sync(documents, open_live(qdrant, policy, minilm.dimension), chunker=policy,
         embedder=minilm, cache=cache)
    return policy


def test_bad_input_creates_no_generation(qdrant: Any, minilm: Any,
                                         documents: list[Document]) -> None:
    cache = MemoryCache()
    _live(qdrant, minilm, documents, cache)
    before = (qdrant.collections(), qdrant.aliases())
    fixed = policy_for(minilm, "fixed")
    for docs in ([], [*documents, Document("blank.md", "  \n ")],
                 [Document("a.md", "text", metadata={"document_id": "x"})]):
        store = QdrantStore(qdrant.client, "docs", "llamaindex") if docs and docs[0].metadata \
            else qdrant
        with pytest.raises(InputError):
            reindex(docs, store, fixed, minilm, cache=cache)
        assert (qdrant.collections(), qdrant.aliases()) == before


def test_rebuilding_the_live_policy_builds_a_twin(qdrant: Any, minilm: Any,
                                                  documents: list[Document]) -> None:
    """Reindexing with the policy already live never writes into the live generation: an
    interrupted rebuild leaves readers on the complete old one."""
    cache = MemoryCache()
    policy = _live(qdrant, minilm, documents, cache)
    live = generation_name("docs", policy.policy_id)
    edited = [Document(d.doc_id, d.text + "\n\nAn edit.\n") for d in documents]
    before = snapshot(qdrant)

    class FailingWrites(FaultyStore):
        def with_collection(self, name: str) -> Any:
            inner = self.inner.with_collection(name)
            return FaultyStore(inner, fail_at=4) if name != live else inner

    with pytest.raises(InjectedFault):
        reindex(edited, FailingWrites(qdrant), policy, minilm, cache=cache)
    assert qdrant.aliases() == {"docs": live} and snapshot(qdrant) == before
    result = reindex(edited, qdrant, policy, minilm, cache=cache)
    assert (result.previous, result.collection) == (live, f"{live}__b")
    assert qdrant.aliases() == {"docs": f"{live}__b"}
    assert result.sync.inputs["embedded"] == 0  # the interrupted run cached the edited tails
    back = reindex(documents, qdrant, policy, minilm, cache=cache)
    assert back.collection == live and back.sync.inputs["embedded"] == 0


def test_drop_old_keeps_what_another_alias_uses_and_clears_leftovers(
    qdrant: Any, minilm: Any, documents: list[Document]
) -> None:
    cache = MemoryCache()
    first = _live(qdrant, minilm, documents, cache)
    pinned = generation_name("docs", first.policy_id)
    _add_alias(qdrant, "docs_stable", pinned)  # a reader pinned to the first generation
    cdc = reindex(documents, qdrant, policy_for(minilm, "cdc"), minilm, cache=cache,
                  drop_old=True)
    assert cdc.dropped is None and cdc.kept_for == ["docs_stable"]
    assert qdrant.with_collection("docs_stable").doc_ids() == {d.doc_id for d in documents}
    # an interrupted --drop-old (switched, not dropped) leaves the cdc generation behind;
    # the next reindex with drop_old clears every generation no alias points at
    fixed = reindex(documents, qdrant, policy_for(minilm, "fixed"), minilm, cache=cache)
    assert fixed.dropped is None and fixed.leftovers_dropped == []
    structured = reindex(documents, qdrant, policy_for(minilm, "structured"), minilm,
                         cache=cache, drop_old=True)
    assert structured.dropped == fixed.collection
    assert structured.leftovers_dropped == [cdc.collection]
    assert sorted(qdrant.collections()) == sorted([pinned, structured.collection])
    assert generations(qdrant) == sorted([pinned, structured.collection])


def test_an_alias_the_application_made_is_used_as_it_is(qdrant: Any, minilm: Any,
                                                        documents: list[Document]) -> None:
    policy = policy_for(minilm, "recursive")
    versioned = qdrant.with_collection("docs_v1")
    versioned.ensure_collection(minilm.dimension)
    _add_alias(qdrant, "docs", "docs_v1")
    live = open_live(qdrant, policy, minilm.dimension)
    report = sync(documents, live, chunker=policy, embedder=minilm)
    assert report.stale_check == "passed" and versioned.doc_ids() == {d.doc_id for d in documents}
    assert qdrant.aliases() == {"docs": "docs_v1"}


def test_chroma_never_rewrites_an_existing_collection(tmp_path: Path, minilm: Any,
                                                      documents: list[Document]) -> None:
    """Without aliases any existing collection may be what the application reads."""
    import chromadb

    store = ChromaStore(chromadb.PersistentClient(path=str(tmp_path)), "docs")
    cache = MemoryCache()
    policy = policy_for(minilm, "recursive")
    sync(documents, open_live(store, policy, minilm.dimension), chunker=policy, embedder=minilm,
         cache=cache)
    fixed = policy_for(minilm, "fixed")
    first = reindex(documents, store, fixed, minilm, cache=cache)
    app = store.with_collection(first.collection)  # the application switched to it ...
    sync([Document("extra.md", "Only in the application's collection.")], app, chunker=fixed,
         embedder=minilm, cache=cache)
    held = snapshot(app)
    second = reindex(documents, store, fixed, minilm, cache=cache)  # ... a stale name again
    assert second.collection == f"{first.collection}__b" and snapshot(app) == held
    assert generations(store) == [first.collection, second.collection]
    # an empty generation is what an interrupted reindex left (no reader is served by
    # it): the next reindex fills it rather than making one more twin
    store.with_collection(f"{first.collection}__c").ensure_collection(minilm.dimension)
    third = reindex(documents, store, fixed, minilm, cache=cache)
    assert third.collection == f"{first.collection}__c" and snapshot(app) == held


def test_chroma_takes_an_empty_collection_of_another_size(tmp_path: Path, minilm: Any,
                                                        documents: list[Document]) -> None:
    """A first sync that failed after making its collection (a 1536-dimensional model that
    could not be reached) left it empty: a sync with MiniLM was refused it ('holds
    1536-dimensional vectors') for ever. One that holds points still is."""
    import chromadb

    store = ChromaStore(chromadb.PersistentClient(path=str(tmp_path)), "docs")
    chunker = policy_for(minilm)
    open_live(store, chunker, 1536)
    live = open_live(store, chunker, minilm.dimension)
    assert live.collection_info().dimension == minilm.dimension
    sync(documents[:1], live, chunker=chunker, embedder=minilm)
    with pytest.raises(StoreError, match="384-dimensional"):
        open_live(store, chunker, 8)


def test_an_engine_gets_progress_only_when_it_is_asked_for(
    qdrant: Any, minilm: Any, documents: list[Document]
) -> None:
    """reindex(progress=...) passes it on to its engine; one written before reindex took
    progress (no such parameter) still builds a generation when none is asked for."""
    calls: list[dict[str, Any]] = []

    def older_engine(docs: Any, store: Any, *, chunker: Any, embedder: Any, cache: Any,
                     prune: bool, reuse_from: Any, chunker_for: Any) -> Any:  # fmt: skip
        calls.append({"prune": prune})
        return sync(docs, store, chunker=chunker, embedder=embedder, cache=cache, prune=prune,
                    reuse_from=reuse_from, chunker_for=chunker_for)  # fmt: skip

    result = reindex(documents, qdrant, policy_for(minilm, "fixed"), minilm, engine=older_engine)
    assert result.switched and calls == [{"prune": True}]
    seen: list[tuple[str, int, int]] = []
    reindex(documents, qdrant, policy_for(minilm, "recursive"), minilm,
            progress=lambda *step: seen.append(step))  # fmt: skip
    assert {stage for stage, _, _ in seen} >= {"chunk", "publish"}
    assert seen[-1][1] == seen[-1][2]  # the last step of a stage is its total
