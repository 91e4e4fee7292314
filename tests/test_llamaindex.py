"""rechunk.adapters.llamaindex: RechunkNodeParser and CachedEmbedding.

The end-to-end tests run LlamaIndex's real ``IngestionPipeline`` (docstore
upserts) into real vector stores (Qdrant in memory, Chroma on disk) with the
real all-MiniLM-L6-v2 model on real revision pairs. The underlying
``BaseEmbedding`` records every text it is asked to embed; it memoises MiniLM's
vectors per text only so that the test suite never computes one text twice
(the memo sits below what is recorded).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import pickle
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import NodeParser, SentenceSplitter
from llama_index.core.schema import Document, MetadataMode, NodeRelationship, TextNode
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore import SimpleDocumentStore
from sync_helpers import Memo

import rechunk
from rechunk.adapters.llamaindex import (
    INPUT_KEY_KEY,
    METADATA_KEYS,
    MODEL_ID_KEY,
    OCCURRENCE_KEY,
    POLICY_KEY,
    TOKENS_KEY,
    CachedEmbedding,
    RechunkNodeParser,
    derive_model_id,
)
from rechunk.chunking.tokens import resolve_tokenizer
from rechunk.errors import ConfigError, EmbeddingError, InputError
from rechunk.reuse.agreement import REFERENCE
from rechunk.reuse.cache import MemoryCache, SQLiteCache
from rechunk.reuse.identity import input_key, point_id

ROOT = Path(__file__).resolve().parent.parent
GUIDE_V1 = (ROOT / "examples" / "revisions" / "chunking-guide.v1.md").read_text(encoding="utf-8")
#: small English, medium English, medium Chinese (modest chunk counts: MiniLM is slow on CPU)
PAIRS = ("dev-en-002", "dev-en-028", "dev-zh-051")
DIM = 384


# --------------------------------------------------------------------------- helpers


def split_check(embedded: list[str]) -> tuple[list[str], list[str]]:
    """(the model check's inputs, the caller's inputs) of what a model embedded behind a
    CachedEmbedding whose cache keeps (or records in its first request) the model's
    reference: the model check (rechunk.reuse.agreement) puts :data:`REFERENCE` at the
    front of every batch that embeds, so what the model embedded starts with it."""
    assert not embedded or embedded[0] == REFERENCE, "the first request starts with the check"
    return [t for t in embedded if t == REFERENCE], [t for t in embedded if t != REFERENCE]


class FakeEmbedding(BaseEmbedding):
    """Deterministic, model-free embedding that logs every call (sync and async)."""

    _calls: list[list[str]] = PrivateAttr(default_factory=list)
    _async_calls: list[list[str]] = PrivateAttr(default_factory=list)
    _queries: list[str] = PrivateAttr(default_factory=list)
    _dim: int = PrivateAttr(default=8)

    def __init__(self, dim: int = 8, model_name: str = "fake-model", **kwargs: Any) -> None:
        super().__init__(model_name=model_name, **kwargs)
        self._dim = dim

    def vector(self, text: str) -> list[float]:
        rng = np.random.default_rng(abs(hash(("fake", text))) % 2**32)
        return [float(x) for x in rng.standard_normal(self._dim)]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._calls.append(list(texts))
        return [self.vector(t) for t in texts]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        self._async_calls.append(list(texts))
        return [self.vector(t) for t in texts]

    def _get_query_embedding(self, query: str) -> list[float]:
        self._queries.append(query)
        return self.vector("query:" + query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class RecordingMiniLM(BaseEmbedding):
    """A real LlamaIndex BaseEmbedding over all-MiniLM-L6-v2 recording what it embeds."""

    _memo: Memo = PrivateAttr()
    _embedded: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, memo: Memo) -> None:
        super().__init__(model_name="sentence-transformers/all-MiniLM-L6-v2")
        self._memo = memo

    @property
    def embedded(self) -> list[str]:
        return self._embedded

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._embedded.extend(texts)
        return self._memo.embed(texts).tolist()  # type: ignore[no-any-return]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._memo.embed([query])[0].tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


@functools.cache
def _process_minilm() -> Any:
    """This process's all-MiniLM-L6-v2, loaded on first use (each worker process loads its own)."""
    from rechunk.integrations.uri import default_embedder

    return default_embedder()


class PicklableMiniLM(BaseEmbedding):
    """all-MiniLM-L6-v2 as a LlamaIndex embedding that pickles, as HuggingFaceEmbedding does.

    It writes every batch it embeds as one JSON line to ``log``, a file that the
    worker processes of a pipeline share.
    """

    model_name: str = "sentence-transformers/all-MiniLM-L6-v2"
    log: str = Field(description="File that gets one JSON line per embedded batch.")

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors = _process_minilm().embed(texts).tolist()
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(texts) + "\n")
        return vectors  # type: ignore[no-any-return]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return _process_minilm().embed([query])[0].tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class ClientEmbedding(FakeEmbedding):
    """Takes its client in ``__init__`` (as examples/llamaindex_pipeline.py's model does)."""

    _client: Any = PrivateAttr()

    def __init__(self, client: Any) -> None:
        super().__init__()
        self._client = client


class LockedEmbedding(FakeEmbedding):
    """Creates its unpicklable lock in an ``__init__`` that takes its fields, as LlamaIndex's
    API embeddings create their clients."""

    _lock: Any = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.Lock()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            return super()._get_text_embeddings(texts)


class ConcurrentEmbedding(FakeEmbedding):
    """Records how many of its async calls run at once."""

    _running: int = PrivateAttr(default=0)
    _peak: int = PrivateAttr(default=0)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._running += 1
        self._peak = max(self._peak, self._running)
        await asyncio.sleep(0.01)
        self._running -= 1
        return [self.vector(t) for t in texts]


def _word_count(text: str) -> int:
    """A tokenizer defined at module level, so it pickles (by name)."""
    return len(text.split())


@pytest.fixture(scope="module")
def memo(minilm: Any) -> Memo:
    return Memo(minilm)


@pytest.fixture(scope="module")
def pairs(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {row["id"]: row for row in revisions}
    missing = [pair for pair in PAIRS if pair not in by_id]
    assert not missing, f"revision pairs {missing} are not in dev.jsonl"
    return [by_id[pair] for pair in PAIRS]


def _docs(pairs: list[dict[str, Any]], revision: str) -> list[Document]:
    return [
        Document(text=p[revision], id_=p["id"], metadata={"source": p["id"], "lang": p["lang"]})
        for p in pairs
    ]


def _parser(minilm: Any) -> RechunkNodeParser:
    return RechunkNodeParser(rechunk.policy_for(minilm, "cdc"), model_id=minilm.model_id)


# --------------------------------------------------------------------------- node parser


def test_is_a_node_parser_that_serialises() -> None:
    parser = RechunkNodeParser("fixed", max_tokens=60)
    assert isinstance(parser, NodeParser)
    data = parser.to_dict()
    assert data["class_name"] == "RechunkNodeParser" and data["policy"] == "fixed"
    again = RechunkNodeParser.from_dict(data)
    assert again.policy_id == parser.policy_id and again.model_id == parser.model_id
    copied = pickle.loads(pickle.dumps(parser))
    doc = Document(text=GUIDE_V1, id_="guide")
    ids = [n.id_ for n in parser.get_nodes_from_documents([doc])]
    assert [n.id_ for n in copied.get_nodes_from_documents([doc])] == ids
    assert [n.id_ for n in again.get_nodes_from_documents([doc])] == ids


@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("cdc", {"min_tokens": 40, "max_tokens": 90}),
        ("recursive", {"target_tokens": 80}),
        ("fixed", {"max_tokens": 80}),
    ],
)
def test_nodes_carry_ids_offsets_relations_and_metadata(
    policy: str, params: dict[str, int]
) -> None:
    parser = RechunkNodeParser(policy, **params)
    doc = Document(
        text=GUIDE_V1,
        id_="guide.md",
        metadata={"title": "Choosing a chunking policy", "secret": "x"},
        excluded_llm_metadata_keys=["secret"],
    )
    nodes = parser.get_nodes_from_documents([doc])
    chunks = parser.chunker.chunk(GUIDE_V1)
    assert len(nodes) == len(chunks) > 3
    seen: Counter[str] = Counter()
    for i, (node, chunk) in enumerate(zip(nodes, chunks)):
        assert isinstance(node, TextNode)
        # the node's text is the exact slice at its offsets: the chunk without edge whitespace
        assert node.text == GUIDE_V1[chunk.start : chunk.end].strip()
        assert GUIDE_V1[node.start_char_idx : node.end_char_idx] == node.text
        assert chunk.start <= node.start_char_idx < node.end_char_idx <= chunk.end
        meta = node.metadata
        assert meta["title"] == "Choosing a chunking policy"
        assert meta[POLICY_KEY] == parser.policy_id
        assert meta[MODEL_ID_KEY] == parser.model_id
        # the key is that of what LlamaIndex embeds: the metadata header, then the text
        embedded = node.get_content(MetadataMode.EMBED)
        assert embedded == f"title: Choosing a chunking policy\nsecret: x\n\n{node.text}"
        assert meta[INPUT_KEY_KEY] == input_key(parser.model_id, embedded)
        assert meta[OCCURRENCE_KEY] == seen[meta[INPUT_KEY_KEY]]
        seen[meta[INPUT_KEY_KEY]] += 1
        assert meta[TOKENS_KEY] == chunk.tokens
        assert node.id_ == point_id("guide.md", meta[INPUT_KEY_KEY], meta[OCCURRENCE_KEY])
        assert node.ref_doc_id == "guide.md"
        assert node.relationships[NodeRelationship.SOURCE].node_id == "guide.md"
        if i:
            assert node.relationships[NodeRelationship.PREVIOUS].node_id == nodes[i - 1].id_
        if i < len(nodes) - 1:
            assert node.relationships[NodeRelationship.NEXT].node_id == nodes[i + 1].id_
        # the LLM sees the document's metadata (less its exclusions), never rechunk's keys
        llm = node.get_content(MetadataMode.LLM)
        assert "title: Choosing a chunking policy" in llm and "secret" not in llm
        header = llm.split("\n\n")[0]
        assert not {line.split(": ")[0] for line in header.splitlines()} & set(METADATA_KEYS)
        json.dumps(meta)
    assert NodeRelationship.PREVIOUS not in nodes[0].relationships
    assert NodeRelationship.NEXT not in nodes[-1].relationships


def test_offsets_survive_llamaindex_post_processing_on_repeated_text() -> None:
    paragraph = "The same paragraph appears here again and again."
    text = "\n\n".join([paragraph] * 5)
    tokens = resolve_tokenizer(None).count_many([paragraph])[0]
    parser = RechunkNodeParser("fixed", max_tokens=2 * tokens)  # two paragraphs per chunk
    doc = Document(text=text, id_="rep")
    spans = [
        (c.start, c.start + len(text[c.start : c.end].rstrip())) for c in parser.chunker.chunk(text)
    ]
    nodes = parser.get_nodes_from_documents([doc])
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == spans
    # LlamaIndex's own post-processing (str.find) would put the last chunk inside the first
    stock = NodeParser._postprocess_parsed_nodes(parser, parser._parse_nodes([doc]), {"rep": doc})
    assert [(n.start_char_idx, n.end_char_idx) for n in stock] != spans  # type: ignore[attr-defined]
    assert [n.text for n in nodes][-1] == paragraph
    assert len({n.id_ for n in nodes}) == len(nodes)


def test_ids_are_deterministic_and_survive_an_insert() -> None:
    parser = RechunkNodeParser("recursive", target_tokens=60)
    old = parser.get_nodes_from_documents([Document(text=GUIDE_V1, id_="g")])
    assert [n.id_ for n in parser.get_nodes_from_documents([Document(text=GUIDE_V1, id_="g")])] == [
        n.id_ for n in old
    ]
    inserted = GUIDE_V1.replace(
        "## What a chunk is", "A new opening paragraph.\n\n## What a chunk is"
    )
    new = parser.get_nodes_from_documents([Document(text=inserted, id_="g")])
    kept = {n.id_ for n in new} & {n.id_ for n in old}
    assert len(kept) >= len(new) - 2
    other_doc = parser.get_nodes_from_documents([Document(text=GUIDE_V1, id_="h")])
    assert not {n.id_ for n in other_doc} & {n.id_ for n in old}


def test_include_metadata_false_and_async_parsing() -> None:
    parser = RechunkNodeParser("fixed", max_tokens=80, include_metadata=False)
    doc = Document(text=GUIDE_V1, id_="g", metadata={"title": "t"})
    nodes = parser.get_nodes_from_documents([doc])
    assert all("title" not in n.metadata for n in nodes)
    assert all(n.get_content(MetadataMode.EMBED) == n.text for n in nodes)
    again = asyncio.run(parser.aget_nodes_from_documents([doc]))
    assert [n.id_ for n in again] == [n.id_ for n in nodes]
    assert parser.get_nodes_from_documents([Document(text=" \n ", id_="blank")]) == []


def test_parser_refuses_bad_configuration_and_input() -> None:
    with pytest.raises(ConfigError):
        RechunkNodeParser("semantic")
    with pytest.raises(ConfigError):
        RechunkNodeParser("fixed", max_tokns=3)
    with pytest.raises(ConfigError, match=r"chunk_size=512 is above the 254 content tokens"):
        RechunkNodeParser("fixed", chunk_size=512)  # SentenceSplitter's default, for MiniLM
    with pytest.raises(ConfigError, match="id_func"):
        RechunkNodeParser("fixed", id_func="uuid4")
    with pytest.raises(ConfigError):
        RechunkNodeParser("fixed", model_id="")
    with pytest.raises(ConfigError):
        RechunkNodeParser(rechunk.FixedChunker(max_tokens=50), max_tokens=60)
    with pytest.raises(InputError, match="NUL"):
        RechunkNodeParser("fixed").get_nodes_from_documents([Document(text="a\x00b", id_="x")])
    data = RechunkNodeParser("fixed", max_tokens=50).to_dict()
    data["policy_id"] = "fixed-000000000000"
    with pytest.raises(ConfigError, match="policy_id"):
        RechunkNodeParser.from_dict(data)
    with pytest.raises(ConfigError, match="params must be a mapping"):
        RechunkNodeParser("fixed", params=[("max_tokens", 9)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="callback_manager"):
        RechunkNodeParser("fixed", callback_manager=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="include_metadata"):
        RechunkNodeParser("fixed", include_metadata="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="include_prev_next_rel"):
        RechunkNodeParser("fixed", include_prev_next_rel=1)  # type: ignore[arg-type]


def test_parser_fields_are_checked_and_the_chunkers_cannot_be_reassigned() -> None:
    parser = RechunkNodeParser("fixed", max_tokens=200)
    doc = Document(text=GUIDE_V1, id_="g")
    before = parser.to_dict()
    ids = [n.id_ for n in parser.get_nodes_from_documents([doc])]
    for name, value in [("policy", "cdc"), ("params", {"max_tokens": 30}), ("policy_id", "x")]:
        with pytest.raises(ConfigError, match=r"construct a new RechunkNodeParser"):
            setattr(parser, name, value)
    bad = {"model_id": "", "include_metadata": "no", "callback_manager": 1, "id_func": 7}
    for name, value in bad.items():
        with pytest.raises(ConfigError, match=name):
            setattr(parser, name, value)
    assert parser.to_dict() == before
    assert [n.id_ for n in parser.get_nodes_from_documents([doc])] == ids
    parser.model_id = "my-model"  # read on every call: keys and ids follow it
    nodes = parser.get_nodes_from_documents([doc])
    keys = [input_key("my-model", n.text) for n in nodes]
    assert [n.metadata[INPUT_KEY_KEY] for n in nodes] == keys
    assert [n.id_ for n in nodes] != ids and parser.to_dict()["model_id"] == "my-model"


def test_parser_pickles_a_module_level_tokenizer_and_refuses_a_lambda() -> None:
    doc = Document(text=GUIDE_V1, id_="g")
    parser = RechunkNodeParser("recursive", _word_count, target_tokens=40)
    copied = pickle.loads(pickle.dumps(parser))
    assert [n.id_ for n in copied.get_nodes_from_documents([doc])] == [
        n.id_ for n in parser.get_nodes_from_documents([doc])
    ]
    lambda_parser = RechunkNodeParser("recursive", lambda text: len(text.split()), target_tokens=40)
    with pytest.raises(ConfigError, match="pass a module-level function"):
        pickle.dumps(lambda_parser)


# --------------------------------------------------------------------------- CachedEmbedding


class _PrivateModel(BaseEmbedding):
    """LlamaIndex's custom-embedding pattern: the model in a private attribute,
    ``model_name`` left at its default, "unknown"."""

    _model: str = PrivateAttr()

    def __init__(self, model: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._model = model

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(len(self._model)), float(len(text))]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)


def test_a_model_named_unknown_holding_a_private_model_asks_for_a_model_id() -> None:
    """Two such models over one cache both derived ``...(model_name=unknown)``: the
    second was served the first's vectors."""
    cache = MemoryCache()
    with pytest.raises(ConfigError, match=r"this _PrivateModel is: .* pass model_id="):
        CachedEmbedding(_PrivateModel("instructor-large"), cache)
    named = CachedEmbedding(_PrivateModel("instructor-large", model_name="instructor-large"), cache)
    assert named.model_id.endswith("._PrivateModel(model_name=instructor-large)")
    given = CachedEmbedding(_PrivateModel("base"), cache, model_id="instructor-base")
    assert given.get_text_embedding("a") != named.get_text_embedding("a")


def test_text_embeddings_send_only_distinct_misses() -> None:
    fake = FakeEmbedding()
    cached = CachedEmbedding(fake, MemoryCache(), embed_batch_size=2)
    first = cached.get_text_embedding_batch(["a", "b", "a"])
    # batch 1 misses a, b, sent after the model check's REFERENCE (recorded in the new cache;
    # embed_batch_size counts the caller's texts: the underlying bounds its own requests);
    # batch 2 hits a
    assert fake._calls == [[REFERENCE, "a", "b"]]
    assert first[0] == first[2]
    second = cached.get_text_embedding_batch(["b", "c"])
    assert fake._calls == [[REFERENCE, "a", "b"], [REFERENCE, "c"]]  # checked again, then c
    assert second[0] == first[1] == [float(x) for x in np.float32(fake.vector("b"))]
    assert cached.get_text_embedding("c") == second[1]
    stats = cached.stats
    assert (stats.hits, stats.misses, stats.inputs_embedded) == (3, 3, 3)
    assert cached.model_name == cached.model_id == derive_model_id(fake)
    assert cached.dimension == 8
    assert cached.to_dict()["model_name"] == cached.model_id


def test_model_identity_and_configuration() -> None:
    cache = MemoryCache()
    # MockEmbedding, a model without a name: its class path and fields name it
    from llama_index.core.embeddings import MockEmbedding

    mock = CachedEmbedding(MockEmbedding(embed_dim=8, embed_batch_size=3), cache)
    assert mock.model_id == (
        "llamaindex:llama_index.core.embeddings.mock_embed_model.MockEmbedding"
        "(embed_dim=8,model_name=unknown)"
    )
    assert CachedEmbedding(MockEmbedding(embed_dim=4), cache).model_id != mock.model_id
    with pytest.raises(ConfigError):
        CachedEmbedding(object(), cache)
    with pytest.raises(ConfigError):
        CachedEmbedding(FakeEmbedding(), {})
    with pytest.raises(ConfigError):
        CachedEmbedding(FakeEmbedding(), cache, dimension=-1)
    for name, value in [
        ("embed_batch_size", True),
        ("embed_batch_size", "8"),
        ("embed_batch_size", 0),
        ("embed_batch_size", 4096),
        ("num_workers", 0),
        ("num_workers", True),
        ("callback_manager", 1),
    ]:
        with pytest.raises(ConfigError, match=name):
            CachedEmbedding(FakeEmbedding(), cache, **{name: value})
    cached = CachedEmbedding(FakeEmbedding(), cache)
    for name, value in [("embed_batch_size", 0), ("num_workers", "2"), ("model_name", "other")]:
        with pytest.raises(ConfigError, match=name):
            setattr(cached, name, value)
    assert (cached.embed_batch_size, cached.num_workers) == (256, None)
    assert cached.model_name == cached.model_id
    CachedEmbedding(FakeEmbedding(model_name="m1"), cache).get_text_embedding("a")
    other = FakeEmbedding(model_name="m2")
    CachedEmbedding(other, cache).get_text_embedding("a")
    assert other._calls == [[REFERENCE, "a"]]  # m2's own model check, then "a": m1's not reused


def test_a_bad_text_anywhere_changes_nothing() -> None:
    fake, cache = FakeEmbedding(), MemoryCache()
    cached = CachedEmbedding(fake, cache, embed_batch_size=2)
    texts: list[Any] = ["a", "b", "c", None]
    with pytest.raises(InputError, match="text 3 is a NoneType"):
        cached.get_text_embedding_batch(texts)
    with pytest.raises(InputError, match="text 3 is a NoneType"):
        asyncio.run(cached.aget_text_embedding_batch(texts))
    assert fake._calls == fake._async_calls == []
    assert cache.stats().writes == 0 and cached.stats.inputs == 0


def test_num_workers_bounds_the_concurrent_async_batches() -> None:
    texts = [f"text {i}" for i in range(6)]
    for num_workers, peak in [(2, 2), (None, 6)]:
        model = ConcurrentEmbedding()
        cached = CachedEmbedding(model, MemoryCache(), embed_batch_size=1, num_workers=num_workers)
        vectors = asyncio.run(cached.aget_text_embedding_batch(texts))
        assert len(vectors) == 6 and model._peak == peak


def test_dimension_is_recorded_in_the_cache(tmp_path: Path) -> None:
    fake = FakeEmbedding(dim=5)
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        first = CachedEmbedding(fake, cache).get_text_embedding_batch(["x", "y"])
    fake._calls.clear()
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        again = CachedEmbedding(fake, cache)
        assert again.get_text_embedding_batch(["y", "x"]) == first[::-1]
        assert fake._calls == [] and again.dimension == 5


def test_queries_are_cached_only_when_asked() -> None:
    fake = FakeEmbedding()
    plain = CachedEmbedding(fake, MemoryCache())
    plain.get_query_embedding("q")
    plain.get_query_embedding("q")
    assert fake._queries == ["q", "q"]
    fake._queries.clear()
    caching = CachedEmbedding(fake, MemoryCache(), cache_queries=True)
    one = caching.get_query_embedding("q")
    assert caching.get_query_embedding("q") == one and fake._queries == ["q"]
    assert asyncio.run(caching.aget_query_embedding("q")) == one and fake._queries == ["q"]
    assert caching.get_text_embedding("q") != one  # queries have their own namespace


def test_async_uses_the_underlying_async() -> None:
    fake = FakeEmbedding()
    cached = CachedEmbedding(fake, MemoryCache())
    first = asyncio.run(cached.aget_text_embedding_batch(["a", "b", "a"]))
    second = asyncio.run(cached.aget_text_embedding_batch(["b", "c"]))
    # each call's model check (REFERENCE, recorded by the first) rides in its async request
    assert fake._async_calls == [[REFERENCE, "a", "b"], [REFERENCE, "c"]] and fake._calls == []
    assert second[0] == first[1]
    assert asyncio.run(cached.aget_text_embedding("c")) == second[1]


def test_pickled_copy_shares_an_sqlite_cache_and_embeds(tmp_path: Path) -> None:
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        cached = CachedEmbedding(FakeEmbedding(), cache, embed_batch_size=2)
        first = cached.get_text_embedding_batch(["a", "b"])
        copy = pickle.loads(pickle.dumps(cached))
        assert (copy.model_id, copy.dimension, copy.embed_batch_size) == (cached.model_id, 8, 2)
        assert copy.stats == cached.stats
        again = copy.get_text_embedding_batch(["b", "a", "c"])
        assert again[:2] == [first[1], first[0]]
        # LlamaIndex unpickles the underlying through its __init__: a fresh, empty call log
        # a and b came from the file, c was embedded after the model check against the
        # REFERENCE the original recorded in the file ...
        assert copy.underlying._calls == [[REFERENCE, "c"]]
        assert cached.get_text_embedding("c") == again[2]  # ... and c went into it
        assert cached.underlying._calls == [[REFERENCE, "a", "b"]]
        copy.cache.close()


def test_rebuilding_from_a_dict_is_refused_clearly() -> None:
    cached = CachedEmbedding(FakeEmbedding(), MemoryCache())
    assert cached.to_dict()["class_name"] == CachedEmbedding.class_name()
    with pytest.raises(ConfigError, match="construct CachedEmbedding"):
        CachedEmbedding.from_dict(cached.to_dict())
    with pytest.raises(ConfigError, match="construct CachedEmbedding"):
        CachedEmbedding.from_json(cached.to_json())


def test_an_unpicklable_cache_is_refused_when_pickling() -> None:
    class LockedCache:
        """A user's EmbeddingCache: a MemoryCache behind its own lock, which cannot be pickled."""

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.inner = MemoryCache()

        def get_many(self, keys: Any, model_id: str, dimension: int) -> Any:
            with self.lock:
                return self.inner.get_many(keys, model_id, dimension)

        def put_many(self, items: Any, model_id: str) -> int:
            with self.lock:
                return self.inner.put_many(items, model_id)

        def stats(self) -> Any:
            return self.inner.stats()

        def close(self) -> None:
            self.inner.close()

    cached = CachedEmbedding(FakeEmbedding(), LockedCache())
    cached.get_text_embedding("a")
    with pytest.raises(ConfigError, match=r"its cache LockedCache cannot be pickled"):
        pickle.dumps(cached)


def test_an_underlying_that_would_lose_private_state_is_refused_when_pickling() -> None:
    cached = CachedEmbedding(ClientEmbedding(threading.Lock()), MemoryCache())
    with pytest.raises(ConfigError, match=r"ClientEmbedding would lose .*_client"):
        pickle.dumps(cached)
    assert len(cached.get_text_embedding("a")) == 8  # the original is untouched
    # LlamaIndex rebuilds a model through an __init__ that takes its fields: that copy works
    copy = pickle.loads(pickle.dumps(CachedEmbedding(LockedEmbedding(), MemoryCache())))
    copy.get_text_embedding("b")
    # through the lock its __init__ created again (after the model check's REFERENCE)
    assert copy.underlying._calls == [[REFERENCE, "b"]]


def test_token_counting_handler_counts_the_models_tokens_for_misses_only() -> None:
    from llama_index.core import VectorStoreIndex

    def counting() -> tuple[TokenCountingHandler, CallbackManager]:
        counter = TokenCountingHandler(tokenizer=str.split)
        return counter, CallbackManager([counter])

    # the model embeds the check's REFERENCE at the front of every batch that embeds, and
    # the handler counts those tokens too (a real cost): counted apart below
    check = len(REFERENCE.split())
    counter, manager = counting()
    fake = FakeEmbedding()
    cached = CachedEmbedding(fake, MemoryCache(), embed_batch_size=2, callback_manager=manager)
    cached.get_text_embedding_batch(["one two", "three", "one two"])
    assert counter.total_embedding_token_count == 3 + check  # each miss once, the repeat a hit
    asyncio.run(cached.aget_text_embedding_batch(["three", "four five six"]))
    assert counter.total_embedding_token_count == 6 + 2 * check  # only the new text
    # assigned after construction, as VectorStoreIndex(callback_manager=...) and Settings do
    counter, manager = counting()
    nodes = [TextNode(text="seven eight", id_="n1"), TextNode(text="three", id_="n2")]
    VectorStoreIndex(nodes, embed_model=cached, callback_manager=manager)
    assert counter.total_embedding_token_count == 2 + check
    assert cached.callback_manager is fake.callback_manager is manager
    # by default the underlying keeps its own callback manager
    counter, manager = counting()
    own = CachedEmbedding(FakeEmbedding(callback_manager=manager), MemoryCache())
    own.get_text_embedding("a b")
    assert counter.total_embedding_token_count == 2 + check


@pytest.mark.slow
def test_token_counting_sees_only_what_the_model_embeds(
    minilm: Any, memo: Memo, monkeypatch: pytest.MonkeyPatch
) -> None:
    def token_ids(text: str) -> list[int]:
        return list(minilm.tokenizer.encode(text, add_special_tokens=False).ids)

    counter = TokenCountingHandler(tokenizer=token_ids)
    # the global handlers every CallbackManager([]) picks up (the models are built below)
    monkeypatch.setattr(Settings, "_callback_manager", CallbackManager([counter]))

    def tokens(run: Any) -> int:
        counter.reset_counts()
        run()
        return counter.total_embedding_token_count

    nodes = _parser(minilm).get_nodes_from_documents([Document(text=GUIDE_V1, id_="guide")])
    texts = list(dict.fromkeys(n.text for n in nodes))
    plain = tokens(lambda: RecordingMiniLM(memo).get_text_embedding_batch(texts))
    assert plain == sum(len(token_ids(t)) for t in texts) > 0
    # the model check's REFERENCE, embedded at the front of every batch (embed_batch_size=4)
    # that embeds: the handler counts its tokens too, kept apart from the inputs' here
    check, batches = len(token_ids(REFERENCE)), math.ceil(len(texts) / 4)
    cached = CachedEmbedding(RecordingMiniLM(memo), MemoryCache(), embed_batch_size=4)
    cold = tokens(lambda: cached.get_text_embedding_batch(texts))
    assert cold == plain + batches * check  # cold: each input once
    assert tokens(lambda: cached.get_text_embedding_batch(texts)) == 0  # warm: all hits
    assert tokens(lambda: asyncio.run(cached.aget_text_embedding_batch(texts))) == 0
    fresh = CachedEmbedding(RecordingMiniLM(memo), MemoryCache(), embed_batch_size=4)
    cold = tokens(lambda: asyncio.run(fresh.aget_text_embedding_batch(texts)))
    assert cold == plain + batches * check
    new = "A sentence that no chunk of the guide contains."
    assert tokens(lambda: cached.get_text_embedding(new)) == len(token_ids(new)) + check
    assert tokens(lambda: cached.get_text_embedding(new)) == 0
    assert tokens(lambda: asyncio.run(cached.aget_text_embedding(new))) == 0
    query = "How large should a chunk be?"
    assert tokens(lambda: cached.get_query_embedding(query)) == len(token_ids(query))
    caching = CachedEmbedding(RecordingMiniLM(memo), MemoryCache(), cache_queries=True)
    assert tokens(lambda: caching.get_query_embedding(query)) == len(token_ids(query))
    assert tokens(lambda: asyncio.run(caching.aget_query_embedding(query))) == 0


@pytest.mark.parametrize(
    "answer",
    [
        lambda texts: [[1.0, 2.0]] * (len(texts) + 1),
        lambda texts: [[1.0, math.nan]] * len(texts),
        lambda texts: [[1.0, 2.0], [1.0]],
        lambda texts: [[]] * len(texts),
    ],
)
def test_bad_answers_raise_and_cache_nothing(answer: Any) -> None:
    class Bad(FakeEmbedding):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return answer(texts)  # type: ignore[no-any-return]

    cache = MemoryCache()
    with pytest.raises(EmbeddingError):
        CachedEmbedding(Bad(), cache).get_text_embedding_batch(["a", "b"])
    assert cache.stats().writes == 0


# --------------------------------------------------------------------------- missing extra


def test_missing_extra_names_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['llama_index'] = None\n"
        "sys.modules['llama_index.core'] = None\n"
        "import rechunk, rechunk.adapters\n"
        "try:\n"
        "    import rechunk.adapters.llamaindex\n"
        "except rechunk.MissingDependencyError as exc:\n"
        "    print('ERR', exc.extra, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ERR llamaindex ") and "rechunk[llamaindex]" in out.stdout


def test_importing_the_adapter_loads_no_langchain() -> None:
    code = (
        "import sys, rechunk.adapters.llamaindex\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'langchain_core', 'torch', 'sentence_transformers', 'qdrant_client', 'chromadb'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- end to end


def _pipeline_run(
    pipeline: IngestionPipeline, recorder: RecordingMiniLM, pairs: list[dict[str, Any]]
) -> list[list[str]]:
    embedded = []
    for revision in ("old", "new"):
        recorder.embedded.clear()
        pipeline.run(documents=_docs(pairs, revision))
        embedded.append(list(recorder.embedded))
    return embedded


def _expected(
    parser: RechunkNodeParser, pairs: list[dict[str, Any]]
) -> tuple[list[Any], list[Any]]:
    return (
        parser.get_nodes_from_documents(_docs(pairs, "old")),
        parser.get_nodes_from_documents(_docs(pairs, "new")),
    )


def _check(
    embedded: list[list[str]], old: list[Any], new: list[Any], stored: dict[str, tuple[str, str]]
) -> list[list[str]]:
    """Returns the inputs each revision embedded, without the model check's."""
    # each revision is one batch (fewer nodes than embed_batch_size): one model check each
    checks, inputs = zip(*map(split_check, embedded))
    assert list(checks) == [[REFERENCE], [REFERENCE]]
    # what is embedded is LlamaIndex's embed content: the metadata header, then the text
    old_texts = {n.get_content(MetadataMode.EMBED) for n in old}
    new_texts = {n.get_content(MetadataMode.EMBED) for n in new}
    assert sorted(inputs[0]) == sorted(old_texts)  # each distinct input once
    assert sorted(inputs[1]) == sorted(new_texts - old_texts)  # exactly the new inputs
    want = {n.id_: (n.text, n.ref_doc_id) for n in new}
    assert stored == want  # the store holds revision 2's nodes and nothing else
    assert {n.id_ for n in old} - set(want)
    return list(inputs)


def _check_retrieval(
    vector_store: Any, embed_model: CachedEmbedding, old: list[Any], new: list[Any]
) -> None:
    from llama_index.core import VectorStoreIndex

    retriever = VectorStoreIndex.from_vector_store(
        vector_store, embed_model=embed_model
    ).as_retriever(similarity_top_k=3)
    old_texts = {n.text for n in old}
    new_ids = {n.id_ for n in new}
    for source in PAIRS:
        fresh = [n for n in new if n.ref_doc_id == source and n.text not in old_texts]
        hits = retriever.retrieve(fresh[0].text)
        assert hits[0].node.node_id == fresh[0].id_
        assert hits[0].node.get_content() == fresh[0].text
        assert all(hit.node.node_id in new_ids for hit in hits)


@pytest.mark.slow
@pytest.mark.revisions
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_pipeline_into_qdrant_embeds_only_new_inputs(
    minilm: Any, memo: Memo, pairs: list[dict[str, Any]]
) -> None:
    pytest.importorskip("llama_index.vector_stores.qdrant")
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    client = QdrantClient(":memory:")
    vector_store = QdrantVectorStore(client=client, collection_name="li")
    recorder = RecordingMiniLM(memo)
    embedding = CachedEmbedding(recorder, MemoryCache())
    parser = _parser(minilm)
    pipeline = IngestionPipeline(
        transformations=[parser, embedding],
        docstore=SimpleDocumentStore(),
        vector_store=vector_store,
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    embedded = _pipeline_run(pipeline, recorder, pairs)
    old, new = _expected(parser, pairs)
    points, _ = client.scroll("li", limit=10_000, with_payload=True)
    stored = {
        str(p.id): (json.loads(p.payload["_node_content"])["text"], p.payload["doc_id"])  # type: ignore[index]
        for p in points
    }
    embedded = _check(embedded, old, new, stored)
    _check_retrieval(vector_store, embedding, old, new)
    print(
        f"\nIngestionPipeline + Qdrant, rechunk: rev1 {len(embedded[0])} inputs, "
        f"rev2 {len(embedded[1])} of {len(new)} nodes (+ 1 model-check input each)"
    )


@pytest.mark.slow
@pytest.mark.revisions
def test_pipeline_into_chroma_embeds_only_new_inputs(
    minilm: Any,
    memo: Memo,
    pairs: list[dict[str, Any]],
    tmp_path: Path,
    chroma_client: Any,
) -> None:
    pytest.importorskip("llama_index.vector_stores.chroma")
    from llama_index.vector_stores.chroma import ChromaVectorStore

    client = chroma_client
    collection = client.get_or_create_collection(
        "rechunk-li", embedding_function=None, metadata={"hnsw:space": "cosine"}
    )
    vector_store = ChromaVectorStore(chroma_collection=collection)
    recorder = RecordingMiniLM(memo)
    with SQLiteCache(tmp_path / "vectors.sqlite") as cache:
        embedding = CachedEmbedding(recorder, cache)
        parser = _parser(minilm)
        pipeline = IngestionPipeline(
            transformations=[parser, embedding],
            docstore=SimpleDocumentStore(),
            vector_store=vector_store,
            docstore_strategy=DocstoreStrategy.UPSERTS,
        )
        embedded = _pipeline_run(pipeline, recorder, pairs)
        old, new = _expected(parser, pairs)
        got = collection.get(include=["documents", "metadatas"])
        stored = {
            pid: (text, meta["doc_id"])
            for pid, text, meta in zip(got["ids"], got["documents"], got["metadatas"])
        }
        _check(embedded, old, new, stored)
        _check_retrieval(vector_store, embedding, old, new)


@pytest.mark.slow
@pytest.mark.revisions
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_stock_pipeline_reembeds_every_node_of_a_changed_document(
    minilm: Any, memo: Memo, pairs: list[dict[str, Any]]
) -> None:
    pytest.importorskip("llama_index.vector_stores.qdrant")
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    cdc = rechunk.policy_for(minilm, "cdc")

    def token_ids(text: str) -> list[int]:
        return list(minilm.tokenizer.encode(text, add_special_tokens=False).ids)

    runs = {}
    for name in ("stock", "rechunk"):
        recorder = RecordingMiniLM(memo)
        if name == "stock":
            transformations: list[Any] = [
                SentenceSplitter(
                    chunk_size=cdc.params["max_tokens"],
                    chunk_overlap=cdc.params["max_tokens"] // 10,
                    tokenizer=token_ids,
                ),
                recorder,
            ]
        else:
            transformations = [_parser(minilm), CachedEmbedding(recorder, MemoryCache())]
        pipeline = IngestionPipeline(
            transformations=transformations,
            docstore=SimpleDocumentStore(),
            vector_store=QdrantVectorStore(client=QdrantClient(":memory:"), collection_name=name),
            docstore_strategy=DocstoreStrategy.UPSERTS,
        )
        embedded = []
        nodes = []
        for revision in ("old", "new"):
            recorder.embedded.clear()
            nodes.append(pipeline.run(documents=_docs(pairs, revision)))
            embedded.append(list(recorder.embedded))
        runs[name] = (embedded, nodes)
    s_embedded, s_nodes = runs["stock"]
    r_requested, r_nodes = runs["rechunk"]
    # rechunk's own inputs, and apart from them the model check's (REFERENCE at the front of
    # each batch that embeds): a real cost of CachedEmbedding the stock pipeline does not pay
    (_, r_embedded_0), (r_checks, r_embedded_1) = map(split_check, r_requested)
    r_embedded = [r_embedded_0, r_embedded_1]
    # every pair changed, so the stock pipeline embeds every node of revision 2 again
    assert len(s_embedded[1]) == len(s_nodes[1])
    stock_tokens = sum(len(token_ids(t)) for t in s_embedded[1])
    rechunk_tokens = sum(len(token_ids(t)) for t in r_embedded[1])
    check_tokens = sum(len(token_ids(t)) for t in r_checks)
    print(
        f"\nrevision 2 of {', '.join(PAIRS)}: stock SentenceSplitter pipeline (UPSERTS) embedded "
        f"{len(s_embedded[1])} of {len(s_nodes[1])} nodes, {stock_tokens} tokens; rechunk embedded "
        f"{len(r_embedded[1])} of {len(r_nodes[1])} nodes, {rechunk_tokens} tokens, and "
        f"{len(r_checks)} model-check inputs, {check_tokens} tokens"
    )
    assert len(r_embedded[1]) < len(s_embedded[1]) and rechunk_tokens < stock_tokens
    # ... and still with the model check's cost added
    assert len(r_embedded[1]) + len(r_checks) < len(s_embedded[1])
    assert rechunk_tokens + check_tokens < stock_tokens
    assert not set(r_embedded[1]) & set(r_embedded[0])


@pytest.mark.slow
def test_pipeline_with_worker_processes_shares_an_sqlite_cache(
    minilm: Any, memo: Memo, tmp_path: Path
) -> None:
    sections = GUIDE_V1.split("\n## ")
    docs = [Document(text=text, id_=f"guide-{i}") for i, text in enumerate(sections)]
    reference = IngestionPipeline(
        transformations=[_parser(minilm), CachedEmbedding(RecordingMiniLM(memo), MemoryCache())],
        disable_cache=True,
    ).run(documents=docs)
    expected = {n.id_: n.embedding for n in reference}
    texts = sorted(n.get_content() for n in reference)
    assert len(docs) > 3 and len(set(texts)) == len(texts)

    log = tmp_path / "embedded.jsonl"
    log.touch()
    runs = []
    with SQLiteCache(tmp_path / "vectors.sqlite") as cache:
        embedding = CachedEmbedding(PicklableMiniLM(log=str(log)), cache)
        for _ in range(2):
            pipeline = IngestionPipeline(
                transformations=[_parser(minilm), embedding], disable_cache=True
            )
            nodes = pipeline.run(documents=docs, num_workers=2)
            embedded = [t for line in log.read_text().splitlines() for t in json.loads(line)]
            runs.append(({n.id_: n.embedding for n in nodes}, embedded))
        assert embedding.stats.inputs == 0  # everything ran in the workers
        # and went into the shared file, with the record of the dimension and the model
        # check's reference (one key: the workers' checks recorded or used the same entry)
        assert cache.stats().entries == len(texts) + 2
    (first, embedded), (second, embedded_again) = runs
    assert set(first) == set(expected)
    for node_id, vector in first.items():
        np.testing.assert_allclose(vector, expected[node_id], rtol=0, atol=1e-5)
    # each task the pipeline gave its workers embedded after a model check (REFERENCE first);
    # num_workers=2 splits the documents into tasks of len(docs) // 2 each (7 sections: 3 tasks)
    tasks = len(list(IngestionPipeline._node_batcher(num_batches=2, nodes=docs)))
    checks, inputs = split_check(embedded)
    assert checks == [REFERENCE] * tasks
    assert sorted(inputs) == texts  # the first run embedded every input once ...
    assert embedded_again == embedded  # ... the second one nothing: all from the file
    assert second == first


def test_settings_chunk_size_and_overlap_resize_the_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """LlamaIndex's own way to size chunks, ``Settings.chunk_size = 128``, assigns the
    node parser's ``chunk_size``: it raised ConfigError. The chunker is built again for
    it, as the constructor would build it; what cannot be honoured changes nothing."""
    from rechunk.chunking.tokens import resolve_tokenizer

    parser = RechunkNodeParser()
    monkeypatch.setattr(Settings, "_node_parser", parser)
    Settings.chunk_size = 128
    Settings.chunk_overlap = 20
    fresh = RechunkNodeParser(chunk_size=128, chunk_overlap=20)
    assert (parser.chunk_size, parser.chunk_overlap) == (128, 20)
    assert parser.policy_id == fresh.policy_id and parser.to_dict() == fresh.to_dict()
    doc = Document(text=GUIDE_V1 * 3, id_="g")
    nodes = parser.get_nodes_from_documents([doc])
    assert [n.id_ for n in nodes] == [n.id_ for n in fresh.get_nodes_from_documents([doc])]
    counts = resolve_tokenizer(None).count_many([n.get_content("embed") for n in nodes])
    assert max(counts) <= 128
    with pytest.raises(ConfigError, match="chunk_overlap"):
        Settings.chunk_size = 10  # below the overlap: refused, and nothing changed
    assert parser.to_dict() == fresh.to_dict()


def test_a_resized_parser_keeps_its_own_parameters() -> None:
    """``chunk_size`` assigned to a parser of a policy with parameters of its own (the
    CDC window, the code policy's language) built it again without them: a window of 48
    words, or a refusal naming a missing language."""
    for kwargs, size in (
        ({"policy": "cdc", "window_words": 16, "chunk_size": 200}, 150),
        ({"policy": "code", "language": "python", "chunk_size": 120}, 200),
    ):
        parser = RechunkNodeParser(**kwargs)  # type: ignore[arg-type]
        parser.chunk_size = size
        fresh = RechunkNodeParser(**{**kwargs, "chunk_size": size})  # type: ignore[arg-type]
        assert parser.to_dict() == fresh.to_dict()
