"""A LlamaIndex IngestionPipeline before and after swapping in rechunk.

The usual pipeline: ``SentenceSplitter`` then an embedding model, a docstore
with ``DocstoreStrategy.UPSERTS`` and a Qdrant vector store. When a document
changes, the pipeline deletes all of its nodes and runs every transformation on
the whole document again, so every node is embedded again.

The swap: ``RechunkNodeParser`` instead of the splitter and the embedding model
wrapped in ``CachedEmbedding``. The pipeline still rewrites the changed
document's nodes, but unchanged chunks keep their node ids and their vectors
come from the cache: the model only sees text that is new.

Runs offline on all-MiniLM-L6-v2 with ONNX Runtime (``pip install
'.[onnx,st,llamaindex]' llama-index-vector-stores-qdrant``; torch exports the graph on
the first run), on the project's own text
``examples/revisions/chunking-guide``. The rechunk policy is the paragraph-first
``"recursive"`` chunker sized for the model (see ``langchain_swap.py``).
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

from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.schema import Document, TransformComponent  # noqa: E402
from llama_index.core.storage.docstore import SimpleDocumentStore  # noqa: E402
from llama_index.vector_stores.qdrant import QdrantVectorStore  # noqa: E402
from qdrant_client import QdrantClient  # noqa: E402

import rechunk  # noqa: E402
from rechunk.adapters.llamaindex import CachedEmbedding, RechunkNodeParser  # noqa: E402
from rechunk.integrations.onnx import OnnxEmbedder  # noqa: E402

HERE = Path(__file__).resolve().parent
REVISIONS = [
    (HERE / "revisions" / f"chunking-guide.v{n}.md").read_text(encoding="utf-8") for n in (1, 2)
]
DOC_ID = "chunking-guide.md"


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 as a LlamaIndex BaseEmbedding, counting what it embeds."""

    _embedder: OnnxEmbedder = PrivateAttr()
    texts: int = 0
    tokens: int = 0

    def __init__(self, embedder: OnnxEmbedder) -> None:
        super().__init__(model_name="sentence-transformers/all-MiniLM-L6-v2")
        self._embedder = embedder

    @property
    def pins_weights(self) -> bool:
        """The model_id the cache wrapper is given below names these weights (a hash of
        the model's files), so no other model can answer under it: no model check."""
        return True

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        self.tokens += sum(self._embedder.count_tokens(t) for t in texts)
        return self._embedder.embed(texts).tolist()  # type: ignore[no-any-return]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query])[0].tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def run(
    name: str, transformations: list[TransformComponent], counter: MiniLMEmbedding
) -> QdrantVectorStore:
    """Ingest revision 1 then revision 2; print what each cost."""
    vector_store = QdrantVectorStore(client=QdrantClient(":memory:"), collection_name="guide")
    pipeline = IngestionPipeline(
        transformations=transformations,
        docstore=SimpleDocumentStore(),
        vector_store=vector_store,
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    for number, text in enumerate(REVISIONS, start=1):
        counter.texts = counter.tokens = 0
        nodes = pipeline.run(documents=[Document(text=text, id_=DOC_ID)])
        print(
            f"  {name:8s} revision {number}: {len(nodes):2d} nodes, embedded {counter.texts:2d} "
            f"({counter.tokens:4d} tokens)"
        )
    return vector_store


def main() -> None:
    embedder = OnnxEmbedder()
    chunker = rechunk.policy_for(embedder, "recursive")
    target = chunker.params["target_tokens"]
    print(f"model {embedder.model_id.split('@')[0]}, chunks of at most {target} tokens")

    def token_ids(text: str) -> list[int]:
        return list(embedder.tokenizer.encode(text, add_special_tokens=False).ids)

    print("before: SentenceSplitter + embedding model, docstore upserts")
    stock = MiniLMEmbedding(embedder)
    splitter = SentenceSplitter(chunk_size=target, chunk_overlap=target // 10, tokenizer=token_ids)
    run("stock", [splitter, stock], stock)

    print("after:  RechunkNodeParser + CachedEmbedding, docstore upserts")
    counter = MiniLMEmbedding(embedder)
    with (
        tempfile.TemporaryDirectory() as folder,
        rechunk.SQLiteCache(Path(folder) / "vectors.sqlite") as cache,
    ):
        embedding = CachedEmbedding(counter, cache, model_id=embedder.model_id)
        parser = RechunkNodeParser.from_defaults(  # SentenceSplitter's arguments, no overlap
            chunk_size=target, policy="recursive", model_id=embedder.model_id
        )
        vector_store = run("rechunk", [parser, embedding], counter)
        stats = embedding.stats
        print(f"  cache: {stats.hits} hits, {stats.misses} misses over both revisions")
        query = "Why does a heading help every chunking policy?"
        retriever = VectorStoreIndex.from_vector_store(
            vector_store, embed_model=embedding
        ).as_retriever(similarity_top_k=1)
        node = retriever.retrieve(query)[0].node
        print(f"query {query!r}")
        print(
            f"  top hit: node {node.node_id[:8]}, chars {node.start_char_idx}-{node.end_char_idx} "  # type: ignore[attr-defined]
            f"of {node.ref_doc_id}, first line: {node.get_content().splitlines()[0]!r}"
        )
        print(f"  from revision 2 only: {node.get_content() not in REVISIONS[0]}")


if __name__ == "__main__":
    main()
