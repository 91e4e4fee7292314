"""An application reads a collection `rechunk sync` filled, with the frameworks' own vector
store classes and rechunk's query embeddings (`RechunkEmbeddings` for LangChain,
`RechunkEmbedding` for LlamaIndex): the same model, so the same hits as `rechunk query`
(real CLI, real embedded Qdrant, the packaged model)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rechunk import ConfigError, InputError
from rechunk.cli import main

DOCS = Path(__file__).resolve().parents[1] / "examples" / "docs"
QUERY = "what does a sync re-embed after an edit"


def top_doc_of_rechunk_query(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["query", QUERY, "-k", "1", *args]) == 0
    first = capsys.readouterr().out.splitlines()[0]  # "1. guide.md [0:120] score 0.61"
    return first.split(" ", 1)[1].split(" [", 1)[0].split(",", 1)[0]


@pytest.fixture()
def synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(DOCS, tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_langchain_reads_a_synced_collection_with_the_same_model(
    synced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from rechunk.adapters.langchain_embeddings import RechunkEmbeddings

    assert main(["sync", "docs"]) == 0
    want = top_doc_of_rechunk_query(capsys)
    embeddings = RechunkEmbeddings()
    assert main(["status"]) == 0
    assert embeddings.model_id in capsys.readouterr().out  # the model the points record
    client = QdrantClient(path=str(synced / ".rechunk" / "qdrant"))
    try:
        store = QdrantVectorStore(client=client, collection_name="rechunk", embedding=embeddings)
        (hit,) = store.similarity_search(QUERY, k=1)
        assert hit.metadata["doc_id"] == want
    finally:
        client.close()


def test_llamaindex_reads_a_synced_collection_with_the_same_model(
    synced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_index.vector_stores.qdrant")
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import MetadataMode
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding

    assert main(["sync", "docs", "--layout", "llamaindex"]) == 0
    want = top_doc_of_rechunk_query(capsys, "--layout", "llamaindex")
    client = QdrantClient(path=str(synced / ".rechunk" / "qdrant"))
    try:
        index = VectorStoreIndex.from_vector_store(
            QdrantVectorStore(client=client, collection_name="rechunk"),
            embed_model=RechunkEmbedding(),
        )
        (hit,) = index.as_retriever(similarity_top_k=1).retrieve(QUERY)
        assert hit.node.metadata["doc_id"] == want
        # the prompt cites the document and where in it the node lies, not how it was read
        shown = hit.node.get_content(metadata_mode=MetadataMode.LLM).split("\n\n", 1)[0]
        assert f"doc_id: {want}" in shown and "section: " in shown
        # as RechunkNodeParser gives it: text, not a list LlamaIndex shows as a repr
        assert isinstance(hit.node.metadata["section"], str) and "section: [" not in shown
        assert "parser:" not in shown and "format:" not in shown and "revision" not in shown
        embedded = hit.node.get_content(metadata_mode=MetadataMode.EMBED)
        assert "doc_id" not in embedded and "parser:" not in embedded
    finally:
        client.close()


def test_both_give_the_vectors_rechunk_embeds_and_refuse_what_is_not_a_model() -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from rechunk.adapters.langchain_embeddings import RechunkEmbeddings
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding
    from rechunk.integrations.uri import open_embedder

    model = open_embedder()
    texts = ["A paragraph about syncs.", "Another about stores."]
    want = model.embed(texts)
    lc, li = RechunkEmbeddings(model), RechunkEmbedding(model)
    assert np.allclose(lc.embed_documents(texts), want, atol=1e-6)
    assert np.allclose(li.get_text_embedding_batch(texts), want, atol=1e-6)
    assert np.allclose(lc.embed_query(texts[0]), li.get_query_embedding(texts[0]), atol=1e-6)
    assert li.model_name == lc.model_id == model.model_id
    with pytest.raises(ConfigError, match="rechunk Embedder, an embedder URI"):
        RechunkEmbeddings(object())
    with pytest.raises(ConfigError, match="unknown embedder URI"):
        RechunkEmbedding("minilm")
    with pytest.raises(InputError):
        lc.embed_documents("one str")


def test_the_llamaindex_embedding_travels_to_worker_processes() -> None:
    """IngestionPipeline workers get a pickled copy: one made from a URI (or the default)
    opens the same model again; one made from an Embedder object refuses to embed with
    another model, and says what to give instead. from_dict round-trips."""
    import pickle

    pytest.importorskip("llama_index.core")
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding
    from rechunk.integrations.uri import open_embedder

    made = RechunkEmbedding()
    copy = pickle.loads(pickle.dumps(made))
    assert copy.model_name == made.model_name
    assert np.allclose(copy.get_query_embedding("a query"), made.get_query_embedding("a query"))
    assert RechunkEmbedding.from_dict(made.to_dict()).model_name == made.model_name
    held = pickle.loads(pickle.dumps(RechunkEmbedding(open_embedder())))
    with pytest.raises(ConfigError, match="make it from an embedder URI"):
        held.get_query_embedding("a query")


def test_cached_rechunk_embeddings_are_keyed_by_their_model(
    synced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CachedEmbeddings named every RechunkEmbeddings alike (its model is an object, which
    a derived identity leaves out), so two models shared each other's cached vectors;
    it is now the model's own id, the one `rechunk sync` keys its cache with."""
    pytest.importorskip("langchain_core")
    from qdrant_client import QdrantClient

    from rechunk import SQLiteCache
    from rechunk.adapters.langchain import CachedEmbeddings
    from rechunk.adapters.langchain_embeddings import RechunkEmbeddings
    from rechunk.integrations.uri import open_embedder

    class Mirrored:  # another model of the same dimension: MiniLM's vectors mirrored
        def __init__(self, inner: Any) -> None:
            self.inner, self.dimension = inner, inner.dimension
            self.model_id, self.max_input_tokens = "mirrored-minilm/v1", None

        def embed(self, texts: Sequence[str]) -> Any:
            return -self.inner.embed(texts)

    onnx = open_embedder("onnx:")
    mirrored = Mirrored(onnx)
    assert main(["sync", "docs"]) == 0  # the default model: ONNX
    cache = SQLiteCache(".rechunk/cache.sqlite")
    ids = [CachedEmbeddings(RechunkEmbeddings(m), cache).model_id for m in (onnx, mirrored)]
    assert ids == [onnx.model_id, "mirrored-minilm/v1"]
    client = QdrantClient(path=".rechunk/qdrant")
    try:
        points, _ = client.scroll("rechunk", limit=10_000, with_payload=True)
    finally:
        client.close()
    texts = [str(p.payload["page_content"]) for p in points if p.payload]
    cached = CachedEmbeddings(RechunkEmbeddings(onnx), cache)
    assert np.allclose(cached.embed_documents(texts), onnx.embed(texts), atol=1e-6)
    assert cached.stats.inputs_embedded == 0  # every vector from the sync's cache
    other = CachedEmbeddings(RechunkEmbeddings(mirrored), cache)
    assert np.allclose(other.embed_documents(texts[:2]), mirrored.embed(texts[:2]), atol=1e-6)
    assert other.stats.inputs_embedded == 2  # not the other model's vectors
    # LlamaIndex's pair names its model as model_name: the same id, the same cached vectors
    pytest.importorskip("llama_index.core")
    from rechunk.adapters.llamaindex import CachedEmbedding
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding

    node_cached = CachedEmbedding(RechunkEmbedding(onnx), cache)
    assert node_cached.model_id == onnx.model_id
    got = node_cached.get_text_embedding_batch(texts)
    assert np.allclose(got, onnx.embed(texts), atol=1e-6)
    assert node_cached.stats.inputs_embedded == 0
    node_other = CachedEmbedding(RechunkEmbedding(mirrored), cache)
    assert node_other.model_id == "mirrored-minilm/v1"
    # texts[:2] are cached under the mirrored model by LangChain's pair above: shared
    assert np.allclose(node_other.get_text_embedding_batch(texts[:4]), mirrored.embed(texts[:4]))
    assert node_other.stats.inputs_embedded == 2
