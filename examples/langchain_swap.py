"""A LangChain indexing pipeline before and after swapping in rechunk.

The usual pipeline: a ``RecursiveCharacterTextSplitter`` with ``add_start_index=True``,
``langchain_core.indexing.index()`` with a record manager and incremental
cleanup, and a Qdrant vector store. Revision 1 of a document is indexed, then
revision 2, and the script prints how many chunks and tokens the embedding
model had to process for revision 2.

The swap: ``RechunkTextSplitter`` instead of the text splitter, with the same
arguments (``chunk_size`` in the model's tokens, ``add_start_index``; the overlap is
dropped, since it costs reuse), ``key_encoder=rechunk_key_encoder`` in ``index()``,
and the embeddings wrapped in ``CachedEmbeddings``. Everything else stays as it was.

The policy is rechunk's paragraph-first ``"recursive"`` chunker sized for the
model (``rechunk.policy_for(embedder, "recursive")``: at most 198 tokens for
MiniLM); at this chunk size it re-embedded fewer tokens than ``"cdc"`` on the
project's 60 development revision pairs, in English and in Chinese.

Runs offline on all-MiniLM-L6-v2 with ONNX Runtime (``pip install
'.[onnx,st,langchain,qdrant]' langchain-qdrant``; torch exports the graph on the first
run), on the project's own text ``examples/revisions/chunking-guide``.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore", message="Using SHA-1")  # the default key encoder's notice
warnings.filterwarnings("ignore", message="Payload indexes have no effect")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.indexing import InMemoryRecordManager, index  # noqa: E402
from langchain_qdrant import QdrantVectorStore  # noqa: E402
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter  # noqa: E402
from qdrant_client import QdrantClient, models  # noqa: E402

import rechunk  # noqa: E402
from rechunk.adapters.langchain import (  # noqa: E402
    CachedEmbeddings,
    RechunkTextSplitter,
    rechunk_key_encoder,
)
from rechunk.integrations.onnx import OnnxEmbedder  # noqa: E402

HERE = Path(__file__).resolve().parent
REVISIONS = [
    (HERE / "revisions" / f"chunking-guide.v{n}.md").read_text(encoding="utf-8") for n in (1, 2)
]
SOURCE = "chunking-guide.md"


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 as a LangChain Embeddings, counting what it embeds."""

    model = "sentence-transformers/all-MiniLM-L6-v2"
    # the model_id the cache wrapper is given below names these weights (a hash of the
    # model's files), so no other model can answer under it: no model check is needed
    pins_weights = True

    def __init__(self, embedder: OnnxEmbedder) -> None:
        self.embedder = embedder
        self.texts = 0
        self.tokens = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        self.tokens += sum(self.embedder.count_tokens(t) for t in texts)
        return self.embedder.embed(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed([text])[0].tolist()  # type: ignore[no-any-return]


def run(
    name: str,
    splitter: TextSplitter,
    key_encoder: Any,
    embeddings: Embeddings,
    counter: MiniLMEmbeddings,
) -> QdrantVectorStore:
    """Index revision 1 then revision 2; print what revision 2 cost."""
    client = QdrantClient(":memory:")
    client.create_collection(
        "guide", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE)
    )
    store = QdrantVectorStore(client=client, collection_name="guide", embedding=embeddings)
    manager = InMemoryRecordManager(namespace=f"qdrant/guide/{name}")
    manager.create_schema()
    for number, text in enumerate(REVISIONS, start=1):
        counter.texts = counter.tokens = 0
        docs = splitter.split_documents([Document(page_content=text, metadata={"source": SOURCE})])
        result = index(
            docs,
            manager,
            store,
            cleanup="incremental",
            source_id_key="source",
            key_encoder=key_encoder,
        )
        print(
            f"  {name:8s} revision {number}: {len(docs):2d} chunks, embedded {counter.texts:2d} "
            f"({counter.tokens:4d} tokens); added {result['num_added']}, "
            f"skipped {result['num_skipped']}, deleted {result['num_deleted']}"
        )
        time.sleep(0.01)  # the record manager's clock must move between runs
    return store


def main() -> None:
    embedder = OnnxEmbedder()
    chunker = rechunk.policy_for(embedder, "recursive")
    max_tokens = chunker.params["target_tokens"]
    print(f"model {embedder.model_id.split('@')[0]}, chunks of at most {max_tokens} tokens")

    print("before: RecursiveCharacterTextSplitter(add_start_index=True) + index()")
    stock_counter = MiniLMEmbeddings(embedder)
    stock = RecursiveCharacterTextSplitter(
        chunk_size=max_tokens,
        chunk_overlap=max_tokens // 10,
        length_function=embedder.count_tokens,
        add_start_index=True,
    )
    run("stock", stock, "sha1", stock_counter, stock_counter)

    print("after:  RechunkTextSplitter + rechunk_key_encoder + CachedEmbeddings")
    counter = MiniLMEmbeddings(embedder)
    with (
        tempfile.TemporaryDirectory() as folder,
        rechunk.SQLiteCache(Path(folder) / "vectors.sqlite") as cache,
    ):
        embeddings = CachedEmbeddings(counter, cache, model_id=embedder.model_id)
        splitter = RechunkTextSplitter(
            "recursive", chunk_size=max_tokens, add_start_index=True, model_id=embedder.model_id
        )
        store = run("rechunk", splitter, rechunk_key_encoder, embeddings, counter)
        query = "Why does a heading help every chunking policy?"
        hit = store.similarity_search(query, k=1)[0]
        meta = hit.metadata
        print(f"query {query!r}")
        print(
            f"  top hit: chars {meta['start_index']}-{meta['end_index']} of {meta['source']}, "
            f"first line: {hit.page_content.splitlines()[0]!r}"
        )
        print(f"  from revision 2 only: {hit.page_content not in REVISIONS[0]}")


if __name__ == "__main__":
    main()
