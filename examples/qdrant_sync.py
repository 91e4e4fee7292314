"""``rechunk.sync`` into embedded Qdrant, then LangChain and LlamaIndex read the same points.

rechunk writes each chunk once, in a layout that one framework's own Qdrant
vector store reads with its defaults:

* ``layout="langchain"``: the unnamed vector and ``{"page_content", "metadata"}``
  payloads, read by ``langchain_qdrant.QdrantVectorStore``;
* ``layout="llamaindex"``: the ``"text-dense"`` vector and LlamaIndex's node
  payload (``_node_content`` and the flat metadata), read by
  ``llama_index.vector_stores.qdrant.QdrantVectorStore``.

One layout does not serve both frameworks (the script checks it: each
framework fails on the other's layout), so a collection is written for the
framework that will read it; the reuse cache makes the second one free.

Runs offline on all-MiniLM-L6-v2 with ONNX Runtime (``pip install '.[onnx,st,qdrant]'
langchain-qdrant llama-index-vector-stores-qdrant``; torch exports the graph on the first
run), on the project's own text
``examples/revisions/chunking-guide``.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore", message="Payload indexes have no effect")

from langchain_qdrant import QdrantVectorStore as LangChainQdrant  # noqa: E402
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaIndexQdrant  # noqa: E402
from qdrant_client import QdrantClient  # noqa: E402

import rechunk  # noqa: E402
from rechunk.adapters.langchain_embeddings import RechunkEmbeddings  # noqa: E402
from rechunk.adapters.llamaindex_embedding import RechunkEmbedding  # noqa: E402
from rechunk.adapters.qdrant import QdrantStore, local_client  # noqa: E402
from rechunk.integrations.onnx import OnnxEmbedder  # noqa: E402

HERE = Path(__file__).resolve().parent
REVISIONS = [
    (HERE / "revisions" / f"chunking-guide.v{n}.md").read_text(encoding="utf-8") for n in (1, 2)
]
DOC_ID = "chunking-guide.md"
QUERY = "Why does a heading help every chunking policy?"


def sync_revisions(
    store: QdrantStore, embedder: rechunk.Embedder, chunker: rechunk.Chunker
) -> None:
    """Sync revision 1 then revision 2 of the guide into ``store``; print each report."""
    for number, text in enumerate(REVISIONS, start=1):
        report = rechunk.sync(
            [rechunk.Document(DOC_ID, text, metadata={"title": "Choosing a chunking policy"})],
            store,
            chunker=chunker,
            embedder=embedder,
        )
        chunks, inputs = report.chunks, report.inputs
        same_id = chunks["kept"] + chunks["updated"]
        print(
            f"  revision {number}: {same_id} chunks kept their ids (payload updated: "
            f"{chunks['updated']}), {chunks['added']} added, {chunks['deleted']} deleted"
        )
        print(
            f"    embedded {inputs['embedded']} inputs ({report.tokens_embedded} tokens); reused "
            f"{inputs['from_cache']} from the cache, {inputs['from_store']} from the collection; "
            f"R_c {report.recompute_fraction:.2f}; stale check {report.stale_check}"
        )


def read_with_langchain(client: QdrantClient, collection: str, model: RechunkEmbeddings) -> str:
    """The first line and position of LangChain's top hit, or why it could not read."""
    try:
        store = LangChainQdrant(client=client, collection_name=collection, embedding=model)
        hit = store.similarity_search(QUERY, k=1)[0]
    except Exception as exc:
        return f"cannot read it ({type(exc).__name__})"
    meta = hit.metadata
    return (
        f"{meta['doc_id']} chars {meta['start']}-{meta['end']} (revision {meta['revision'][:8]}): "
        f"{hit.page_content.splitlines()[0]!r}"
    )


def read_with_llamaindex(client: QdrantClient, collection: str, model: RechunkEmbedding) -> str:
    """The first line and position of LlamaIndex's top hit, or why it could not read."""
    try:
        store = LlamaIndexQdrant(client=client, collection_name=collection)
        retriever = VectorStoreIndex.from_vector_store(store, embed_model=model).as_retriever(
            similarity_top_k=1
        )
        node = retriever.retrieve(QUERY)[0].node
    except Exception as exc:
        return f"cannot read it ({type(exc).__name__})"
    return (
        f"{node.ref_doc_id} chars {node.start_char_idx}-{node.end_char_idx} "  # type: ignore[attr-defined]
        f"(revision {node.metadata['revision'][:8]}): {node.get_content().splitlines()[0]!r}"
    )


def main() -> None:
    model = OnnxEmbedder()
    chunker = rechunk.policy_for(model, "recursive")  # as in langchain_swap.py
    with tempfile.TemporaryDirectory() as folder:
        client = local_client(Path(folder) / "qdrant")  # embedded Qdrant, on disk
        embedder = rechunk.CachedEmbedder(model, rechunk.MemoryCache())
        for layout in ("langchain", "llamaindex"):
            store = QdrantStore(client, f"guide-{layout}", layout=layout)
            store.ensure_collection(model.dimension)
            print(f"rechunk.sync into collection {store.collection!r} (layout={layout!r})")
            sync_revisions(store, embedder, chunker)
        # the queries' model: the one the points were synced with
        langchain_model = RechunkEmbeddings(model)
        llamaindex_model = RechunkEmbedding(model)
        print(f"query {QUERY!r}")
        print("  LangChain QdrantVectorStore on guide-langchain:")
        print(f"    {read_with_langchain(client, 'guide-langchain', langchain_model)}")
        print("  LlamaIndex QdrantVectorStore on guide-llamaindex:")
        print(f"    {read_with_llamaindex(client, 'guide-llamaindex', llamaindex_model)}")
        print("one layout for both? each framework on the other's collection:")
        cross_langchain = read_with_langchain(client, "guide-llamaindex", langchain_model)
        cross_llamaindex = read_with_llamaindex(client, "guide-langchain", llamaindex_model)
        print(f"  LangChain on guide-llamaindex: {cross_langchain}")
        print(f"  LlamaIndex on guide-langchain: {cross_llamaindex}")
        client.close()


if __name__ == "__main__":
    main()
