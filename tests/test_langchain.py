"""rechunk.adapters.langchain: the splitter, the key encoder, CachedEmbeddings and ByteStoreCache.

The end-to-end tests run LangChain's real ``index()`` with real vector stores
(Qdrant in memory, Chroma on disk) and the real all-MiniLM-L6-v2 model on real
revision pairs. The underlying ``Embeddings`` records every text it is asked to
embed; it memoises MiniLM's vectors per text only so that the same text is not
computed twice by the test suite itself (the memo is below what is recorded).

Every ``index()`` test runs twice: with langchain_core's ``InMemoryRecordManager``
and with langchain-classic's ``SQLRecordManager`` on a SQLite file (skipped
where langchain-classic is not installed).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import pickle
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_text_splitters")

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.stores import InMemoryByteStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import (
    RecursiveCharacterTextSplitter,
    TextSplitter,
)
from pydantic import BaseModel
from sync_helpers import Memo
from test_cache import CacheContract

import rechunk
from rechunk.adapters.langchain import (
    END_KEY,
    INPUT_KEY_KEY,
    METADATA_KEYS,
    MODEL_ID_KEY,
    OCCURRENCE_KEY,
    POLICY_KEY,
    SOURCE_ID_KEY,
    START_KEY,
    TOKENS_KEY,
    ByteStoreCache,
    CachedEmbeddings,
    RechunkTextSplitter,
    derive_model_id,
    rechunk_key_encoder,
    record_id,
)
from rechunk.chunking.tokens import resolve_tokenizer
from rechunk.errors import CacheError, ConfigError, EmbeddingError, InputError
from rechunk.reuse.agreement import REFERENCE
from rechunk.reuse.cache import EmbeddingCache, MemoryCache, SQLiteCache
from rechunk.reuse.identity import input_key, point_id, text_revision

ROOT = Path(__file__).resolve().parent.parent
GUIDE_V1 = (ROOT / "examples" / "revisions" / "chunking-guide.v1.md").read_text(encoding="utf-8")
GUIDE_V2 = (ROOT / "examples" / "revisions" / "chunking-guide.v2.md").read_text(encoding="utf-8")
#: small English, medium English, medium Chinese (modest chunk counts: MiniLM is slow on CPU)
PAIRS = ("dev-en-002", "dev-en-028", "dev-zh-051")
DIM = 384


# --------------------------------------------------------------------------- helpers


def split_check(requests: list[list[str]]) -> tuple[list[str], list[str]]:
    """(the model check's inputs, the caller's inputs) of the ``requests`` a model got
    behind a cache wrapper with no ``batch_size``, over a cache that keeps (or records in
    its first request) the model's reference: every call that embeds is then one request,
    and the model check (rechunk.reuse.agreement) puts :data:`REFERENCE` at its front."""
    assert all(request[:1] == [REFERENCE] for request in requests), "each starts with the check"
    return [r[0] for r in requests], [text for r in requests for text in r[1:]]


class FakeEmbeddings(Embeddings):
    """Deterministic, model-free embeddings that log every call (sync and async)."""

    def __init__(self, dim: int = 8, model: str | None = "fake-model") -> None:
        self.dim = dim
        if model is not None:
            self.model = model
        self.calls: list[list[str]] = []
        self.async_calls: list[list[str]] = []
        self.queries: list[str] = []

    def vector(self, text: str) -> list[float]:
        rng = np.random.default_rng(abs(hash(("fake", text))) % 2**32)
        return [float(x) for x in rng.standard_normal(self.dim)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.vector("query:" + text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        self.async_calls.append(list(texts))
        return [self.vector(t) for t in texts]

    async def aembed_query(self, text: str) -> list[float]:
        await asyncio.sleep(0)
        self.queries.append(text)
        return self.vector("query:" + text)


class RecordingMiniLM(Embeddings):
    """A real LangChain Embeddings over all-MiniLM-L6-v2 recording what it embeds."""

    model = "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self, memo: Memo) -> None:
        self.memo = memo
        self.requests: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.requests.append(list(texts))
        return self.memo.embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.memo.embed([text])[0].tolist()


@pytest.fixture(scope="module")
def memo(minilm: Any) -> Memo:
    return Memo(minilm)


@pytest.fixture(scope="module")
def pairs(revisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {row["id"]: row for row in revisions}
    missing = [pair for pair in PAIRS if pair not in by_id]
    assert not missing, f"revision pairs {missing} are not in dev.jsonl"
    return [by_id[pair] for pair in PAIRS]


def _splitter(minilm: Any) -> RechunkTextSplitter:
    return RechunkTextSplitter(rechunk.policy_for(minilm, "cdc"), model_id=minilm.model_id)


def _docs(pairs: list[dict[str, Any]], revision: str) -> list[Document]:
    return [Document(page_content=p[revision], metadata={"source": p["id"]}) for p in pairs]


@pytest.fixture(params=["in-memory", "sqlite"])
def new_record_manager(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """Makes empty record managers (a new namespace each) of one kind.

    ``"in-memory"``: ``InMemoryRecordManager``; ``"sqlite"``: ``SQLRecordManager``
    over one SQLite file of the test.
    """
    if request.param == "sqlite":
        pytest.importorskip("langchain_classic")
        from langchain_classic.indexes import SQLRecordManager

    def make() -> Any:
        namespace = f"test/{uuid.uuid4()}"
        if request.param == "sqlite":
            db_url = f"sqlite:///{tmp_path}/records.sqlite"
            manager: Any = SQLRecordManager(namespace, db_url=db_url)
        else:
            manager = InMemoryRecordManager(namespace=namespace)
        manager.create_schema()
        return manager

    return make


def _index(docs: list[Document], manager: Any, store: Any, key_encoder: Any) -> dict[str, int]:
    """``index()`` as the README shows it: incremental cleanup by ``source``."""
    time.sleep(0.01)  # the record manager's clock must move between runs
    return dict(
        index(
            docs,
            manager,
            store,
            cleanup="incremental",
            source_id_key="source",
            key_encoder=key_encoder,
        )
    )


def _memory_index(embeddings: Embeddings) -> tuple[Any, Any]:
    """An empty ``InMemoryVectorStore`` over ``embeddings`` and its record manager."""
    manager = InMemoryRecordManager(namespace=f"test/{uuid.uuid4()}")
    manager.create_schema()
    return InMemoryVectorStore(embeddings), manager


def _run_index(
    splitter: TextSplitter,
    key_encoder: Any,
    store: Any,
    recorder: RecordingMiniLM,
    pairs: list[dict[str, Any]],
    manager: Any,
) -> tuple[list[list[str]], list[list[Document]], list[dict[str, int]]]:
    """index() revision 1 then revision 2: (the requests the model got, documents, results)
    per revision."""
    requests, documents, results = [], [], []
    for revision in ("old", "new"):
        recorder.requests.clear()
        docs = splitter.split_documents(_docs(pairs, revision))
        result = _index(docs, manager, store, key_encoder)
        requests.append(list(recorder.requests))
        documents.append(docs)
        results.append(result)
    return requests, documents, results


def _tokens(minilm: Any, texts: Sequence[str]) -> int:
    return sum(minilm.count_tokens(t) for t in texts)


# --------------------------------------------------------------------------- splitter


def test_is_a_real_text_splitter() -> None:
    splitter = RechunkTextSplitter()
    assert isinstance(splitter, TextSplitter)
    assert splitter.policy_id.startswith("structured-")  # the default policy
    assert splitter.model_id.startswith("tokenizer:hf:")
    # page_content is the exact source slice of each chunk, without its edge whitespace
    assert splitter.split_text(GUIDE_V1) == [
        GUIDE_V1[c.start : c.end].strip() for c in splitter.chunker.chunk(GUIDE_V1)
    ]


@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("cdc", {"min_tokens": 40, "max_tokens": 90}),
        ("recursive", {"target_tokens": 80}),
        ("fixed", {"max_tokens": 80}),
    ],
)
def test_documents_carry_true_offsets_and_ids(policy: str, params: dict[str, int]) -> None:
    splitter = RechunkTextSplitter(policy, **params)
    docs = splitter.create_documents([GUIDE_V1], [{"source": "guide.md", "lang": "en"}])
    assert len(docs) > 3
    assert docs[0].metadata[START_KEY] == 0
    assert docs[-1].metadata[END_KEY] == len(GUIDE_V1.rstrip())
    for before, after in zip(docs, docs[1:]):  # only whitespace between two chunks
        assert not GUIDE_V1[before.metadata[END_KEY] : after.metadata[START_KEY]].strip()
    seen: Counter[str] = Counter()
    for doc in docs:
        meta = doc.metadata
        assert set(METADATA_KEYS) <= set(meta)
        span = GUIDE_V1[meta[START_KEY] : meta[END_KEY]]
        assert doc.page_content == span
        assert meta["source"] == "guide.md" and meta["lang"] == "en"
        assert meta[SOURCE_ID_KEY] == "guide.md"
        assert meta[POLICY_KEY] == splitter.policy_id
        assert meta[MODEL_ID_KEY] == splitter.model_id
        assert meta[INPUT_KEY_KEY] == input_key(splitter.model_id, doc.page_content)
        assert meta[OCCURRENCE_KEY] == seen[meta[INPUT_KEY_KEY]]
        seen[meta[INPUT_KEY_KEY]] += 1
        assert 0 < meta[TOKENS_KEY] <= splitter.chunker.hard_max_tokens
        assert doc.id == record_id("guide.md", meta[INPUT_KEY_KEY], meta[OCCURRENCE_KEY], meta)
        assert doc.id != point_id("guide.md", meta[INPUT_KEY_KEY], meta[OCCURRENCE_KEY])  # "lang"
        assert uuid.UUID(doc.id).version == 5
        assert rechunk_key_encoder(doc) == doc.id
        json.dumps(meta)  # JSON all the way


def test_repeated_text_gets_true_offsets_and_distinct_ids() -> None:
    paragraph = "The same paragraph appears here again and again."
    text = "\n\n".join([paragraph] * 4)
    tokens = resolve_tokenizer(None).count_many([paragraph])[0]
    splitter = RechunkTextSplitter("fixed", max_tokens=tokens)
    docs = splitter.create_documents([text], [{"source": "rep"}])
    assert [d.page_content for d in docs] == [paragraph] * 4
    step = len(paragraph) + 2
    assert [d.metadata[START_KEY] for d in docs] == [0, step, 2 * step, 3 * step]
    assert [d.metadata[OCCURRENCE_KEY] for d in docs] == [0, 1, 2, 3]
    assert len({d.id for d in docs}) == 4
    assert len({rechunk_key_encoder(d) for d in docs}) == 4


def test_without_other_metadata_the_id_is_the_point_id() -> None:
    splitter = RechunkTextSplitter("fixed", max_tokens=50)
    for doc in splitter.create_documents([GUIDE_V1], [{"source": "guide.md"}]):
        meta = doc.metadata
        assert doc.id == point_id("guide.md", meta[INPUT_KEY_KEY], meta[OCCURRENCE_KEY])


def test_pages_of_one_source_get_distinct_ids_and_all_reach_the_store() -> None:
    """Per-page loaders give every page the same ``source``: a repeated footer is one chunk
    per page, and every one must keep its own id (index() drops duplicate ids)."""
    footer = "Confidential: for the rechunk team only."
    pages = [
        Document(
            page_content=f"Page {n} says something of its own.\n\n{footer}",
            metadata={"source": "report.pdf", "page": n},
        )
        for n in range(3)
    ]
    splitter = RechunkTextSplitter("recursive", target_tokens=12)
    docs = splitter.split_documents(pages)
    footers = [d for d in docs if d.page_content == footer]
    assert len(footers) == 3
    assert [d.metadata[OCCURRENCE_KEY] for d in footers] == [0, 1, 2]
    assert len({d.id for d in docs}) == len(docs)
    store, manager = _memory_index(FakeEmbeddings())
    result = _index(docs, manager, store, rechunk_key_encoder)
    assert result["num_added"] == len(docs) and result["num_skipped"] == 0
    assert len(store.store) == len(docs)


def test_a_metadata_change_reaches_the_store_from_the_cache() -> None:
    """A changed ACL gives new keys: index() rewrites the records, the vectors come from the
    cache, and no record keeps the old value."""
    model = FakeEmbeddings()
    store, manager = _memory_index(CachedEmbeddings(model, MemoryCache()))
    splitter = RechunkTextSplitter("recursive", target_tokens=60)
    results = []
    for acl in ("public", "private"):
        docs = splitter.create_documents([GUIDE_V1], [{"source": "guide", "acl": acl}])
        results.append(_index(docs, manager, store, rechunk_key_encoder))
    n = len(docs)
    assert results[1]["num_added"] == n and results[1]["num_deleted"] == n
    assert {r["metadata"]["acl"] for r in store.store.values()} == {"private"}
    # one request, revision 1's: the model check's REFERENCE (recorded in the new cache),
    # then each input once; revision 2: every vector from the cache
    assert model.calls == [[REFERENCE, *(d.page_content for d in docs)]]


def test_an_insert_keeps_every_other_id() -> None:
    splitter = RechunkTextSplitter("recursive", target_tokens=60)
    old = splitter.create_documents([GUIDE_V1], [{"source": "guide"}])
    inserted = GUIDE_V1.replace(
        "## What a chunk is", "A new opening paragraph.\n\n## What a chunk is"
    )
    new = splitter.create_documents([inserted], [{"source": "guide"}])
    old_ids = {d.id for d in old}
    kept = [d for d in new if d.id in old_ids]
    assert len(kept) >= len(new) - 2
    moved = [d for d in kept if d.metadata[START_KEY] != _by_id(old)[d.id].metadata[START_KEY]]
    assert moved, "offsets after the insert moved, ids did not"
    assert all(rechunk_key_encoder(d) == d.id for d in new)


def _by_id(docs: list[Document]) -> dict[str, Document]:
    return {d.id: d for d in docs if d.id is not None}


def test_source_id_recipes() -> None:
    splitter = RechunkTextSplitter("fixed", max_tokens=50)
    by_source = splitter.split_documents(
        [Document(page_content=GUIDE_V1, metadata={"source": "s"}, id="d")]
    )
    by_id = splitter.split_documents([Document(page_content=GUIDE_V1, id="doc-7")])
    by_text = splitter.create_documents([GUIDE_V1])
    assert {d.metadata[SOURCE_ID_KEY] for d in by_source} == {"s"}
    assert {d.metadata[SOURCE_ID_KEY] for d in by_id} == {"doc-7"}
    assert {d.metadata[SOURCE_ID_KEY] for d in by_text} == {"text:" + text_revision(GUIDE_V1)}
    again = splitter.create_documents([GUIDE_V1])
    assert [d.id for d in again] == [d.id for d in by_text]  # deterministic, never random
    assert not {d.id for d in by_source} & {d.id for d in by_id}
    assert splitter.transform_documents([Document(page_content=GUIDE_V1, id="doc-7")]) == by_id
    assert (
        asyncio.run(splitter.atransform_documents([Document(page_content=GUIDE_V1, id="doc-7")]))
        == by_id
    )


@pytest.mark.parametrize(
    "metadata",
    [
        {"when": date(2024, 1, 1)},
        {"tags": {"a", "b"}},
        {"score": math.nan},
        {"blob": b"x"},
        {"n": np.int64(3)},
        {"embedding": np.arange(3)},
        {1: "int key"},
    ],
)
def test_metadata_the_stock_splitter_takes_is_taken_and_keyed(metadata: dict[Any, Any]) -> None:
    """Passed on unchanged; ids computed from it by the deterministic meta-v1 rule."""
    splitter = RechunkTextSplitter("fixed", max_tokens=50)
    docs = splitter.create_documents([GUIDE_V1], [metadata])
    again = splitter.split_documents([Document(page_content=GUIDE_V1, metadata=metadata)])
    assert [d.id for d in docs] == [d.id for d in again]
    plain = splitter.create_documents([GUIDE_V1])
    assert not {d.id for d in docs} & {d.id for d in plain}  # the metadata is in the id
    for doc in docs:
        key = next(iter(metadata))
        assert repr(doc.metadata[key]) == repr(metadata[key])  # NaN and arrays too
        assert rechunk_key_encoder(doc) == doc.id


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize("value", [object(), threading.Lock(), "caf\udce9", _nested(1200)])
def test_metadata_no_key_can_cover_is_refused(value: Any) -> None:
    splitter = RechunkTextSplitter("fixed", max_tokens=50)
    with pytest.raises(InputError, match="metadata"):
        splitter.create_documents([GUIDE_V1], [{"v": value}])
    with pytest.raises(InputError, match="metadata"):
        splitter.split_documents([Document(page_content=GUIDE_V1, metadata={"v": value})])


def test_bad_source_and_inputs() -> None:
    splitter = RechunkTextSplitter("fixed", max_tokens=50)
    with pytest.raises(InputError, match="source"):
        splitter.create_documents([GUIDE_V1], [{"source": 7.5}])
    with pytest.raises(InputError):
        splitter.create_documents([GUIDE_V1], [{}, {}])
    with pytest.raises(InputError):
        splitter.create_documents("one string")
    with pytest.raises(InputError, match="NUL"):
        splitter.split_text("a\x00b")
    assert splitter.create_documents(["", "  \n "]) == []
    # as in LangChain: an empty metadatas list means none; tuples are JSON (lists)
    assert splitter.create_documents([GUIDE_V1], []) == splitter.create_documents([GUIDE_V1])
    assert splitter.create_documents([GUIDE_V1], [{"box": (1, 2)}])[0].metadata["box"] == (1, 2)
    with pytest.raises(InputError, match="not a LangChain Document"):
        splitter.split_documents(["a plain string"])  # type: ignore[list-item]
    # a name decoded with os.fsdecode from bytes that are not UTF-8 holds a lone surrogate
    with pytest.raises(InputError, match="surrogate"):
        splitter.create_documents([GUIDE_V1], [{"source": "caf\udce9.md"}])
    cached = CachedEmbeddings(FakeEmbeddings(), MemoryCache())
    with pytest.raises(InputError, match="surrogate"):
        cached.embed_documents(["fine", "caf\udce9"])
    assert cached.underlying.calls == []  # type: ignore[attr-defined]


def test_policy_errors_and_ready_chunkers(minilm: Any) -> None:
    with pytest.raises(ConfigError):
        RechunkTextSplitter("semantic")
    with pytest.raises(ConfigError):
        RechunkTextSplitter("fixed", max_tokns=5)
    # LangChain arguments that cannot be honoured get an answer, not a TypeError
    with pytest.raises(ConfigError, match=r"above the 254 content tokens all-MiniLM-L6-v2"):
        RechunkTextSplitter(chunk_size=300, chunk_overlap=30)
    # LangChain's own line, meant as characters: the way to keep that meaning is named
    with pytest.raises(ConfigError, match=r"as LangChain does by default, pass length_function=len"):
        RechunkTextSplitter(chunk_size=1000, chunk_overlap=200)
    assert RechunkTextSplitter(chunk_size=1000, chunk_overlap=200, length_function=len)
    # LangChain's default size (4000 of its units) is past the window: a size is asked for
    with pytest.raises(ConfigError, match=r"length_function without chunk_size.*give chunk_size"):
        RechunkTextSplitter(length_function=len)
    with pytest.raises(ConfigError, match=r"chunk_size and max_tokens both size"):
        RechunkTextSplitter("fixed", chunk_size=100, max_tokens=50)
    with pytest.raises(ConfigError):
        RechunkTextSplitter("cdc", min_tokens=10, max_tokens=5)
    with pytest.raises(ConfigError):
        RechunkTextSplitter("fixed", model_id="")
    chunker = rechunk.policy_for(minilm, "cdc")
    splitter = RechunkTextSplitter(chunker)
    assert splitter.chunker is chunker and splitter._chunk_size == 254
    assert pickle.loads(pickle.dumps(splitter)).split_text(GUIDE_V1) == splitter.split_text(
        GUIDE_V1
    )
    with pytest.raises(ConfigError):
        RechunkTextSplitter(chunker, max_tokens=5)
    same = RechunkTextSplitter("cdc", minilm.tokenizer, **chunker.params)
    assert same.policy_id == splitter.policy_id


def test_from_huggingface_tokenizer(minilm: Any) -> None:
    transformers = pytest.importorskip("transformers")
    folder = minilm.folder
    hf = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    splitter = RechunkTextSplitter.from_huggingface_tokenizer(hf, policy="fixed", max_tokens=60)
    plain = RechunkTextSplitter("fixed", minilm.tokenizer, max_tokens=60)
    assert isinstance(splitter, RechunkTextSplitter)
    assert splitter.split_text(GUIDE_V1) == plain.split_text(GUIDE_V1)
    assert max(d.metadata[TOKENS_KEY] for d in splitter.create_documents([GUIDE_V1])) <= 60


def test_from_tiktoken_encoder_uses_a_named_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_length_function(*args: Any, **kwargs: Any) -> Any:
        return lambda text: len(text.split())

    monkeypatch.setattr(
        RechunkTextSplitter, "_tiktoken_length_function", staticmethod(fake_length_function)
    )
    splitter = RechunkTextSplitter.from_tiktoken_encoder(
        "cl100k_base", policy="fixed", max_tokens=40
    )
    assert splitter.chunker.token_counter.identity == "tiktoken:cl100k_base"
    assert splitter.model_id == "tokenizer:tiktoken:cl100k_base"
    assert all(len(t.split()) <= 40 for t in splitter.split_text(GUIDE_V1))
    # a model name counts with its encoding: the same identity, so the same keys and ids
    by_model = RechunkTextSplitter.from_tiktoken_encoder(
        model_name="gpt-4", policy="fixed", max_tokens=40
    )
    assert by_model.model_id == splitter.model_id


# --------------------------------------------------------------------------- key encoder


def test_key_encoder_hashes_only_what_decides_the_input() -> None:
    doc = RechunkTextSplitter("fixed", max_tokens=50).create_documents(
        [GUIDE_V1], [{"source": "g"}]
    )[1]
    key = rechunk_key_encoder(doc)
    moved = Document(
        page_content=doc.page_content,
        metadata={**doc.metadata, START_KEY: 9999, END_KEY: 10_500, POLICY_KEY: "p", TOKENS_KEY: 1},
    )
    assert rechunk_key_encoder(moved) == key
    for change in (
        {SOURCE_ID_KEY: "other"},
        {OCCURRENCE_KEY: 1},
        {MODEL_ID_KEY: "another-model"},
        {"x": 1},
        {"source": "renamed"},
    ):
        assert (
            rechunk_key_encoder(
                Document(page_content=doc.page_content, metadata={**doc.metadata, **change})
            )
            != key
        )
    assert (
        rechunk_key_encoder(Document(page_content=doc.page_content + ".", metadata=doc.metadata))
        != key
    )
    foreign = Document(page_content="plain text", metadata={"source": "a.md", "page": 3})
    assert uuid.UUID(rechunk_key_encoder(foreign)).version == 5
    assert rechunk_key_encoder(foreign) != rechunk_key_encoder(
        Document(page_content="plain text", metadata={"source": "a.md", "page": 4})
    )
    # metadata beyond JSON is keyed by the deterministic meta-v1 rule, never by a repr that
    # would differ between processes; what has no deterministic form is refused
    for fine in ({"when": date(2024, 1, 1)}, {"tags": {"a", "b"}}, {"n": {1: "x", "y": 2}}):
        doc = Document(page_content="plain text", metadata=fine)
        assert rechunk_key_encoder(doc) == rechunk_key_encoder(doc.model_copy(deep=True))
    assert rechunk_key_encoder(
        Document(page_content="t", metadata={"tags": {"a", "b"}})
    ) == rechunk_key_encoder(Document(page_content="t", metadata={"tags": {"b", "a"}}))
    assert rechunk_key_encoder(
        Document(page_content="t", metadata={"when": date(2024, 1, 1)})
    ) != rechunk_key_encoder(Document(page_content="t", metadata={"when": "2024-01-01"}))
    for bad in ({"name": "caf\udce9.md"}, {"o": object()}):
        with pytest.raises(InputError, match="metadata"):
            rechunk_key_encoder(Document(page_content="plain text", metadata=bad))
    with pytest.raises(InputError):
        rechunk_key_encoder(Document(page_content="x", metadata={OCCURRENCE_KEY: "1"}))


def test_stock_index_keys_change_with_start_index() -> None:
    """Why the key encoder exists: the default encoders hash start_index with the text."""
    doc = Document(page_content="same text", metadata={"source": "s", "start_index": 1})
    moved = Document(page_content="same text", metadata={"source": "s", "start_index": 2})
    from langchain_core.indexing.api import _get_document_with_hash

    assert (
        _get_document_with_hash(doc, key_encoder="sha256").id
        != _get_document_with_hash(moved, key_encoder="sha256").id
    )
    assert rechunk_key_encoder(doc) == rechunk_key_encoder(moved)


# --------------------------------------------------------------------------- CachedEmbeddings


def test_embed_documents_sends_only_distinct_misses() -> None:
    fake = FakeEmbeddings()
    cached = CachedEmbeddings(fake, MemoryCache())
    first = cached.embed_documents(["a", "b", "a"])
    # the model check's REFERENCE first (the new cache records it), then the distinct misses
    assert fake.calls == [[REFERENCE, "a", "b"]]
    assert first[0] == first[2]
    second = cached.embed_documents(["b", "c", "a"])
    assert fake.calls == [[REFERENCE, "a", "b"], [REFERENCE, "c"]]  # checked again, then "c"
    assert second[0] == first[1] and second[2] == first[0]
    assert second[0] == [float(x) for x in np.float32(fake.vector("b"))]  # float32 values
    stats = cached.stats
    assert (stats.inputs, stats.hits, stats.misses, stats.inputs_embedded) == (6, 2, 3, 3)
    assert cached.embed_documents([]) == []
    assert (
        cached.model_id
        == derive_model_id(fake)
        == f"langchain:{__name__}.FakeEmbeddings(dim=8,model=fake-model)"
    )


def test_batch_size_splits_misses() -> None:
    fake = FakeEmbeddings()
    cached = CachedEmbeddings(fake, MemoryCache(), batch_size=2)
    cached.embed_documents(list("abcde"))
    # the model check's REFERENCE rides in the first request, inside its batch_size
    assert fake.calls == [[REFERENCE, "a"], ["b", "c"], ["d", "e"]]


def test_dimension_is_recorded_in_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    fake = FakeEmbeddings(dim=12)
    with SQLiteCache(path) as cache:
        first = CachedEmbeddings(fake, cache)
        assert first.dimension is None
        vectors = first.embed_documents(["x", "y"])
        assert first.dimension == 12
    fake.calls.clear()
    with SQLiteCache(path) as cache:
        again = CachedEmbeddings(fake, cache)  # a new process: nothing given, nothing probed
        assert again.embed_documents(["y", "x"]) == vectors[::-1]
        assert fake.calls == [] and again.dimension == 12


def test_vectors_written_by_rechunk_itself_are_found_on_the_first_call() -> None:
    """sync and CachedEmbedder record the dimension too, so an adapter that is not told
    it can look their vectors up at once."""
    fake = FakeEmbeddings(dim=12)

    class Same:  # a rechunk Embedder giving the same vectors as `fake`
        model_id, dimension, max_input_tokens = "shared-model", 12, None

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.asarray([fake.vector(t) for t in texts], dtype=np.float32)

    cache = MemoryCache()
    rechunk.CachedEmbedder(Same(), cache).embed(["alpha", "beta"])
    adapter = CachedEmbeddings(fake, cache, model_id="shared-model")
    expected = Same().embed(["beta", "alpha"]).tolist()  # the float32 vectors cached
    assert adapter.embed_documents(["beta", "alpha"]) == expected
    assert fake.calls == [] and adapter.dimension == 12


def test_a_read_only_cache_is_used_but_never_written(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    fake = FakeEmbeddings()
    with SQLiteCache(path) as cache:
        CachedEmbeddings(fake, cache).embed_documents(["a"])
    fake.calls.clear()
    with SQLiteCache(path, readonly=True) as cache:
        cached = CachedEmbeddings(fake, cache)
        cached.embed_documents(["a", "b"])
        cached.embed_documents(["b"])
        # each call checked against the reference the writable run recorded; "b" not cached
        assert fake.calls == [[REFERENCE, "b"], [REFERENCE, "b"]] and cache.stats().writes == 0


def test_model_identity_is_in_the_key() -> None:
    cache = MemoryCache()
    CachedEmbeddings(FakeEmbeddings(model="m1"), cache).embed_documents(["a"])
    other = FakeEmbeddings(model="m2")
    CachedEmbeddings(other, cache).embed_documents(["a"])
    assert other.calls == [[REFERENCE, "a"]]  # m2's own model check, then "a": m1's not reused
    explicit = FakeEmbeddings(model=None)
    # no model name: the class path and its settings name it (the run-time call logs do not)
    assert CachedEmbeddings(explicit, cache).model_id == f"langchain:{__name__}.FakeEmbeddings(dim=8)"
    explicit.embed_documents(["state"])
    assert derive_model_id(explicit) == f"langchain:{__name__}.FakeEmbeddings(dim=8)"
    with pytest.raises(ConfigError):
        CachedEmbeddings(explicit, cache, model_id="")
    with pytest.raises(ConfigError):
        CachedEmbeddings(FakeEmbeddings(), {})
    with pytest.raises(ConfigError):
        CachedEmbeddings(object(), cache)
    assert CachedEmbeddings(explicit, cache, model_id="mine").model_id == "mine"


class _Pooling(Enum):
    MEAN = 1
    CLS = 2


class _EncodeOptions(BaseModel):
    prefix: str = ""


class _TypedSettings(BaseModel, Embeddings):
    """The usual LangChain shape, with settings JSON has no form for."""

    model_name: str = "bge"
    pooling: _Pooling = _Pooling.MEAN
    checkpoint: Path = Path("/models/bge/step-1000")
    options: _EncodeOptions = _EncodeOptions()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(self.pooling.value), float(len(self.options.prefix + t))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _TypedAttributes(Embeddings):
    """A hand-written class holding the same kinds of settings as public attributes."""

    def __init__(self, **settings: Any) -> None:
        self.model_name = "bge"
        self.pooling = settings.get("pooling", _Pooling.MEAN)
        self.checkpoint = settings.get("checkpoint", Path("/models/bge/step-1000"))
        self.options = settings.get("options", _EncodeOptions())

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(self.pooling.value), float(len(self.options.prefix + t))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@pytest.mark.parametrize("cls", [_TypedSettings, _TypedAttributes])
def test_enum_path_and_options_settings_enter_the_identity(cls: Any) -> None:
    # each of these settings changes the vectors: two values, two identities, and the
    # cache never serves one's vector for the other's
    base = cls()
    others = [
        cls(pooling=_Pooling.CLS),
        cls(checkpoint=Path("/models/bge/step-2000")),
        cls(options=_EncodeOptions(prefix="query: ")),
    ]
    ids = [derive_model_id(model) for model in (base, *others)]
    assert len(set(ids)) == 4, ids
    assert "pooling=1" in ids[0] and "checkpoint=/models/bge/step-1000" in ids[0]
    # a relative path object names a folder of the project it runs in
    relative = derive_model_id(cls(checkpoint=Path("bge")))
    assert f"checkpoint={Path.cwd() / 'bge'}" in relative
    cache = MemoryCache()
    for model in (base, *others):
        assert CachedEmbeddings(model, cache).embed_documents(["a"]) == model.embed_documents(["a"])


class _ModelInPrivate(Embeddings):
    """A hand-written client keeping its model's name in a private attribute."""

    def __init__(self, model: str) -> None:
        self._model = model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(self._model)), float(len(t))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _ModelInClient(_ModelInPrivate):
    def __init__(self, model: str) -> None:
        self.client = _ModelInPrivate(model)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.client.embed_documents(texts)


class _ModelInSlot(Embeddings):
    __slots__ = ("model_name",)

    def __init__(self, model: str) -> None:
        self.model_name = model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(self.model_name)), float(len(t))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _ModelInClass(_ModelInPrivate):
    model = "small-v1"


class _ModelBesideNumbers(_ModelInPrivate):
    """The model in a private attribute, beside public settings that name none."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.dimension = 2
        self.normalize = True


class _ModelBesideDevice(_ModelInPrivate):
    """The model in a private attribute beside a string setting that names no model."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.device = "cpu"


class _ModelWithDimensionInClass(_ModelInPrivate):
    dimension = 384  # a class attribute that names no model


def _model_in_closure(model: str) -> Embeddings:
    class Closure(_ModelInPrivate):
        def __init__(self) -> None:
            pass

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(len(model)), float(len(t))] for t in texts]

    return Closure()


class _Wrapper(Embeddings):
    """A model wrapped by another object (LlamaIndex's LangchainEmbedding, a cache)."""

    def __init__(self, inner: Embeddings) -> None:
        self._inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)


@dataclass
class _Credentials:
    api_key: str


class _Truncated(_ModelInPrivate):
    def __init__(self, dimension: int) -> None:
        self.model_name = "small"
        self._model = SimpleNamespace(truncate_dim=dimension)  # type: ignore[assignment]


class _Configured(Embeddings):
    """A hand-written client whose settings are a dict and a URL."""

    def __init__(self, url: str, encode: dict[str, Any]) -> None:
        self.base_url = url
        self.encode_kwargs = encode

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(self.base_url)), float(len(t))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_a_model_whose_settings_name_nothing_asks_for_a_model_id() -> None:
    """Two hand-written clients of two models (the name in ``self._model``, or in a client
    object) both derived ``...()``: the second got the first's vectors from one cache."""
    cache = MemoryCache()
    for cls in (
        _ModelInPrivate, _ModelInClient, _ModelBesideNumbers, _ModelBesideDevice,
        _ModelWithDimensionInClass,
    ):
        with pytest.raises(ConfigError, match=r"this _Model\w+ is: .* pass model_id="):
            CachedEmbeddings(cls("small"), cache)
        small = CachedEmbeddings(cls("small"), cache, model_id=f"{cls.__name__}/small")
        large = CachedEmbeddings(cls("large-model"), cache, model_id=f"{cls.__name__}/large")
        assert small.embed_documents(["a"]) != large.embed_documents(["a"])
    # the identity an earlier version derived is named, for a user of one model to keep
    with pytest.raises(ConfigError, match=r"derived 'langchain:[\w.]+\._ModelInPrivate\(\)'"):
        CachedEmbeddings(_ModelInPrivate("small"), cache)
    # a setting kept in __slots__ is read; a class that fixes its model is told by its path
    assert derive_model_id(_ModelInSlot("small")).endswith("._ModelInSlot(model_name=small)")
    assert derive_model_id(_ModelInClass("x")).endswith("._ModelInClass()")
    flagged = _ModelInPrivate("x")
    del flagged._model
    flagged._ready = True  # a private flag names no model: no refusal for it
    assert derive_model_id(flagged).endswith("._ModelInPrivate()")
    # a class made inside a function reads its model from the function's variables
    with pytest.raises(ConfigError, match=r"the enclosing variable 'model'"):
        CachedEmbeddings(_model_in_closure("small"), cache)


def test_every_setting_that_picks_the_model_tells_two_apart(tmp_path: Path) -> None:
    """Settings an earlier version left out while they changed the vectors: a wrapped
    model, the server behind a URL with credentials, a dict of a hand-written class, a
    nested value JSON has no form for, a relative path in two project folders. Each pair
    got one identity, and the second model the first one's vectors."""
    pairs = [
        (_Wrapper(FakeEmbeddings(model="a")), _Wrapper(FakeEmbeddings(model="b"))),
        (
            _Configured("https://svc:pw@bge-host/v1", {}),
            _Configured("https://svc:pw@e5-host/v1", {}),
        ),
        (
            _Configured("http://h", {"prompt": "query: "}),
            _Configured("http://h", {"prompt": "passage: "}),
        ),
        (
            _Configured("http://h", {"dtype": Path("f16"), "truncate_dim": 64}),
            _Configured("http://h", {"dtype": Path("f16"), "truncate_dim": 32}),
        ),
        # a loaded SentenceTransformer keeps what it was given (LlamaIndex's
        # HuggingFaceEmbedding(truncate_dim=...) keeps it nowhere else)
        (_Truncated(64), _Truncated(32)),
    ]
    for one, other in pairs:
        assert derive_model_id(one) != derive_model_id(other), derive_model_id(one)
    for project in ("a", "b"):
        (tmp_path / project / "model").mkdir(parents=True)
    ids = set()
    for project in ("a", "b"):
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(tmp_path / project)
            ids.add(derive_model_id(_Configured("./model", {})))
    assert len(ids) == 2 and all(str(tmp_path) in i for i in ids), ids
    # and the wrapped model's refusal is the wrapper's
    with pytest.raises(ConfigError, match="this _ModelInPrivate is"):
        derive_model_id(_Wrapper(_ModelInPrivate("small")))


@pytest.mark.parametrize(
    "setting",
    [
        {"creds": "SECRET-1"},
        {"clientsecret": "SECRET-2"},
        {"pwd": "SECRET-3"},
        {"options": {"accesstoken": "SECRET-4"}},
        {"headers": {"X": "Api-Key SECRET-5"}},
        {"headers": {"X": "OAuth SECRET-6"}},
        {"connection": "Endpoint=https://a;AccountKey=SECRET-7"},
        {"connection": "Endpoint=https://a;Id=abc;Secret = SECRET-7"},
        {"endpoint": "https://u:pa/ss-SECRET-8@host/v1"},
        {"endpoint": "https://host/v1#access_token=SECRET-9"},
        {"endpoint": "https://user:SECRET-10@host/v1"},
        {"endpoint": "https://user:p@ss-SECRET-11@host/v1"},
        {"options": {"client": _Credentials("SECRET-12")}},
    ],
)
def test_no_secret_reaches_a_derived_identity(setting: dict[str, Any]) -> None:
    """Secrets under other names and forms than a SecretStr or an api_key (plurals, a
    header list, credential schemes, a connection string, a URL's credentials or
    fragment) enter the identity, which the cache and every chunk's metadata store, as
    digests only."""
    model = FakeEmbeddings(model="m")
    for name, value in setting.items():
        setattr(model, name, value)
    assert "SECRET" not in derive_model_id(model), derive_model_id(model)
    if "client" in str(setting):
        return  # an object in a setting enters as its type only: nothing to tell apart
    other = FakeEmbeddings(model="m")
    for name, value in setting.items():
        setattr(other, name, json.loads(json.dumps(value).replace("SECRET", "OTHER")))
    assert derive_model_id(model) != derive_model_id(other)  # still two identities


def test_settings_read_as_they_are_not_as_the_process_or_folder_sees_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An identity must not change from one run to the next (a set's order follows the
    hash seed; a deployment named like a folder of the working directory), nor may a
    client that answers any attribute (a mock, an RPC proxy) be taken for a model; a
    port before a path with an '@' is no password, and a setting that holds itself ends."""
    script = (
        "from test_langchain import FakeEmbeddings, derive_model_id\n"
        "m = FakeEmbeddings(model='m'); m.opts = {'stop': {'alpha', 'beta', 'gamma'}}\n"
        "print(derive_model_id(m))"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True,
            cwd=Path(__file__).parent, env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(runs) == 1, runs
    (tmp_path / "embeddings").mkdir()
    monkeypatch.chdir(tmp_path)
    deployed = _Configured("http://h", {})
    deployed.azure_deployment = "embeddings"  # type: ignore[attr-defined]
    assert "azure_deployment=embeddings" in derive_model_id(deployed)
    from unittest.mock import MagicMock

    mocked = FakeEmbeddings(model="m")
    mocked.client = MagicMock()  # type: ignore[attr-defined]
    assert derive_model_id(mocked).endswith("FakeEmbeddings(dim=8,model=m)")
    ported = _Configured("http://localhost:8080/models/bge@v2", {})
    assert "localhost:8080/models/bge@v2" in derive_model_id(ported)
    itself: dict[str, Any] = {}
    itself["self"] = itself
    assert derive_model_id(_Configured("http://h", itself))  # no RecursionError


def test_a_property_reading_an_enclosing_variable_is_refused() -> None:
    def make(model: str) -> Embeddings:
        class Made(_ModelInPrivate):
            def __init__(self) -> None:
                pass

            @property
            def used(self) -> str:
                return model

        return Made()

    with pytest.raises(ConfigError, match="the enclosing variable 'model'"):
        derive_model_id(make("bge"))


def test_a_declared_list_of_header_pairs_enters_as_digests() -> None:
    """A pydantic field of (name, value) pairs (gRPC metadata) is read like a dict."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    class Metadata(DeterministicFakeEmbedding):
        grpc_metadata: list[tuple[str, str]] = []  # noqa: RUF012 (a pydantic field)
        api_keys: list[str] = []  # noqa: RUF012

    for settings in (
        lambda k: {"grpc_metadata": [("authorization", f"Api-Key K-{k}")]},
        lambda k: {"grpc_metadata": [("x-api-key", f"K-{k}")]},
        lambda k: {"api_keys": [f"K-{k}"]},
    ):
        ids = [derive_model_id(Metadata(size=4, **settings(k))) for k in "ab"]
        assert ids[0] != ids[1] and not any("K-" in i for i in ids), ids


def test_queries_are_cached_only_when_asked() -> None:
    fake = FakeEmbeddings()
    plain = CachedEmbeddings(fake, MemoryCache())
    plain.embed_query("q")
    plain.embed_query("q")
    assert fake.queries == ["q", "q"]
    fake.queries.clear()
    cache = MemoryCache()
    caching = CachedEmbeddings(fake, cache, cache_queries=True)
    caching.embed_documents(["q"])
    one = caching.embed_query("q")
    two = caching.embed_query("q")
    assert fake.queries == ["q"] and one == two
    assert one != caching.embed_documents(["q"])[0]  # queries have their own namespace
    assert asyncio.run(caching.aembed_query("q")) == one and fake.queries == ["q"]


@pytest.mark.parametrize(
    "answer",
    [
        lambda texts: [[1.0, 2.0]] * (len(texts) + 1),
        lambda texts: [[1.0, math.nan]] * len(texts),
        lambda texts: [[1.0, 2.0], [1.0]][: len(texts)] + [[1.0]] * (len(texts) - 2),
        lambda texts: [[]] * len(texts),
        lambda texts: ["ab"] * len(texts),
    ],
)
def test_bad_answers_raise_and_cache_nothing(answer: Any) -> None:
    class Bad(FakeEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return answer(texts)  # type: ignore[no-any-return]

    cache = MemoryCache()
    with pytest.raises(EmbeddingError):
        CachedEmbeddings(Bad(), cache).embed_documents(["a", "b"])
    assert cache.stats().writes == 0


def test_wrong_dimension_is_refused() -> None:
    cache = MemoryCache()
    CachedEmbeddings(FakeEmbeddings(dim=8), cache, model_id="m").embed_documents(["a"])
    with pytest.raises(EmbeddingError, match="expected 8"):
        CachedEmbeddings(FakeEmbeddings(dim=4), cache, model_id="m").embed_documents(["b"])
    with pytest.raises(ConfigError):
        CachedEmbeddings(FakeEmbeddings(), cache, dimension=0)


class ThreadLoggingCache(MemoryCache):
    """A MemoryCache that notes which threads touched it."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def get_many(self, keys: Sequence[str], model_id: str, dimension: int) -> dict[str, np.ndarray]:
        self.threads.add(threading.get_ident())
        return super().get_many(keys, model_id, dimension)


def test_async_uses_the_underlying_async() -> None:
    fake = FakeEmbeddings()
    cached = CachedEmbeddings(fake, MemoryCache(), dimension=8)
    first = asyncio.run(cached.aembed_documents(["a", "b", "a"]))
    second = asyncio.run(cached.aembed_documents(["b", "c"]))
    # each call's model check (REFERENCE, recorded by the first) rides in its async request
    assert fake.async_calls == [[REFERENCE, "a", "b"], [REFERENCE, "c"]] and fake.calls == []
    assert first[0] == first[2] and second[0] == first[1] == cached.embed_documents(["b"])[0]
    assert fake.calls == []


def test_cache_io_of_async_calls_runs_off_the_loop_thread() -> None:
    cache = ThreadLoggingCache()
    cached = CachedEmbeddings(FakeEmbeddings(), cache, dimension=8)
    asyncio.run(cached.aembed_documents(["a"]))
    assert cache.threads and threading.get_ident() not in cache.threads


# --------------------------------------------------------------------------- ByteStoreCache


class TestByteStoreCache(CacheContract):
    @pytest.fixture
    def cache(self, tmp_path: Path) -> Iterator[EmbeddingCache]:
        cache = ByteStoreCache(InMemoryByteStore(), namespace="ns/")
        yield cache
        cache.close()


def test_byte_store_keys_a_file_store_cannot_hold_write_nothing(tmp_path: Path) -> None:
    from langchain_classic.storage import LocalFileStore

    store = LocalFileStore(tmp_path / "store")
    cache = ByteStoreCache(store)
    good = (input_key("m", "t"), np.ones(4, dtype=np.float32))
    for bad in ("a b", "..", "", "x/../../y"):
        with pytest.raises(InputError, match="ByteStoreCache key"):
            cache.put_many([good, (bad, np.ones(4, dtype=np.float32))], "m")
        with pytest.raises(InputError):
            cache.get_many([bad], "m", 4)
    assert list(store.yield_keys()) == [] and cache.stats().writes == 0


def test_byte_store_keys_suit_file_stores_and_values_are_checked() -> None:
    store = InMemoryByteStore()
    cache = ByteStoreCache(store)
    vector = np.arange(6, dtype=np.float32)
    cache.put_many([(input_key("m", "t"), vector)], "m")
    (key,) = list(store.yield_keys())
    assert re.fullmatch(r"[a-zA-Z0-9_.\-/]+", key) and key.startswith("rechunk/")
    assert ByteStoreCache(store, namespace="other/").get_many([input_key("m", "t")], "m", 6) == {}
    blob = store.mget([key])[0]
    assert blob is not None
    store.mset([(key, blob[:-1] + bytes([blob[-1] ^ 1]))])  # flip one bit of the vector
    assert cache.get_many([input_key("m", "t")], "m", 6) == {}
    assert cache.stats().corrupt == 1
    store.mset([(key, b"junk")])
    assert cache.get_many([input_key("m", "t")], "m", 6) == {}
    with pytest.raises(ConfigError):
        ByteStoreCache(object())
    cache.close()
    with pytest.raises(CacheError):
        cache.stats()


def test_byte_store_cache_serves_cached_embeddings() -> None:
    store = InMemoryByteStore()
    fake = FakeEmbeddings()
    first = CachedEmbeddings(fake, ByteStoreCache(store)).embed_documents(["a", "b"])
    fake.calls.clear()
    again = CachedEmbeddings(fake, ByteStoreCache(store))
    assert again.embed_documents(["b", "a"]) == first[::-1] and fake.calls == []


# --------------------------------------------------------------------------- missing extra


@pytest.mark.parametrize("blocked", ["langchain_core", "langchain_text_splitters"])
def test_missing_extra_names_it(blocked: str) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "import rechunk, rechunk.adapters\n"
        "try:\n"
        "    import rechunk.adapters.langchain\n"
        "except rechunk.MissingDependencyError as exc:\n"
        "    print('ERR', exc.extra, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ERR langchain ") and "rechunk[langchain]" in out.stdout


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        (
            "rechunk.adapters.langchain",
            ("llama_index", "torch", "sentence_transformers", "qdrant_client", "chromadb"),
        ),
        (  # the framework-free part both adapters share
            "rechunk.adapters._reuse",
            ("langchain_core", "langchain_text_splitters", "langchain_classic", "llama_index"),
        ),
    ],
)
def test_importing_loads_no_other_framework(module: str, forbidden: tuple[str, ...]) -> None:
    code = (
        f"import sys, {module}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{forbidden!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- end to end


def _check_store(
    stored: list[tuple[str, str, dict[str, Any]]],
    new_docs: list[Document],
    old_docs: list[Document],
) -> None:
    """The store holds exactly revision 2's chunks: ids, texts and sources."""
    want = {d.id: d for d in new_docs}
    assert {sid for sid, _, _ in stored} == set(want)
    for sid, text, meta in stored:
        assert text == want[sid].page_content
        assert meta[SOURCE_ID_KEY] == want[sid].metadata[SOURCE_ID_KEY]
    gone = {d.id for d in old_docs} - set(want)
    assert gone and not gone & {sid for sid, _, _ in stored}


def _check_embedded(
    requests: list[list[list[str]]], docs: list[list[Document]]
) -> tuple[list[list[str]], list[list[str]]]:
    """The requests of each revision (a model behind CachedEmbeddings) held each distinct
    new input once, after the model check's REFERENCE; returns (inputs, check's inputs)
    per revision."""
    embedded, checks = [], []
    for revision in requests:
        check, inputs = split_check(revision)
        embedded.append(inputs)
        checks.append(check)
    old_texts = {d.page_content for d in docs[0]}
    new_texts = {d.page_content for d in docs[1]}
    assert sorted(embedded[0]) == sorted(old_texts)  # each distinct input once
    assert sorted(embedded[1]) == sorted(new_texts - old_texts)  # exactly the new inputs
    assert checks[0] and checks[1]  # both revisions embedded: both were model-checked
    return embedded, checks


def _check_retrieval(store: Any, docs: list[list[Document]]) -> None:
    old_texts = {d.page_content for d in docs[0]}
    new_texts = {d.page_content for d in docs[1]}
    for source in PAIRS:
        fresh = [
            d for d in docs[1] if d.metadata["source"] == source and d.page_content not in old_texts
        ]
        hits = store.similarity_search(fresh[0].page_content, k=4)
        assert hits[0].page_content == fresh[0].page_content
        assert all(h.page_content in new_texts for h in hits)
    retrieved = store.as_retriever(search_kwargs={"k": 1}).invoke(fresh[-1].page_content)
    assert retrieved[0].page_content == fresh[-1].page_content


@pytest.mark.slow
@pytest.mark.revisions
def test_index_into_qdrant_embeds_only_new_inputs(
    minilm: Any, memo: Memo, pairs: list[dict[str, Any]], new_record_manager: Callable[[], Any]
) -> None:
    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection(
        "lc", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    recorder = RecordingMiniLM(memo)
    embeddings = CachedEmbeddings(recorder, ByteStoreCache(InMemoryByteStore()))
    store = QdrantVectorStore(client=client, collection_name="lc", embedding=embeddings)
    requests, docs, results = _run_index(
        _splitter(minilm), rechunk_key_encoder, store, recorder, pairs, new_record_manager()
    )
    embedded, checks = _check_embedded(requests, docs)
    assert results[1]["num_added"] + results[1]["num_skipped"] == len(docs[1])
    points, _ = client.scroll("lc", limit=10_000, with_payload=True)
    stored = [(str(p.id), p.payload["page_content"], p.payload["metadata"]) for p in points]  # type: ignore[index]
    _check_store(stored, docs[1], docs[0])
    _check_retrieval(store, docs)
    print(
        f"\nLangChain index() + Qdrant, rechunk: rev1 {len(embedded[0])} inputs, "
        f"rev2 {len(embedded[1])} of {len(docs[1])} chunks, {_tokens(minilm, embedded[1])} tokens"
        f" (+ {len(checks[1])} model-check inputs, {_tokens(minilm, checks[1])} tokens)"
    )


@pytest.mark.slow
@pytest.mark.revisions
def test_index_into_chroma_embeds_only_new_inputs(
    minilm: Any,
    memo: Memo,
    pairs: list[dict[str, Any]],
    tmp_path: Path,
    chroma_client: Any,
    new_record_manager: Callable[[], Any],
) -> None:
    pytest.importorskip("langchain_chroma")
    from langchain_chroma import Chroma

    client = chroma_client
    recorder = RecordingMiniLM(memo)
    with SQLiteCache(tmp_path / "vectors.sqlite") as cache:
        embeddings = CachedEmbeddings(recorder, cache)
        store = Chroma(
            collection_name="rechunk-lc",
            embedding_function=embeddings,
            client=client,
            collection_metadata={"hnsw:space": "cosine"},
        )
        requests, docs, _ = _run_index(
            _splitter(minilm), rechunk_key_encoder, store, recorder, pairs, new_record_manager()
        )
        _check_embedded(requests, docs)
        got = store.get(include=["documents", "metadatas"])
        stored = list(zip(got["ids"], got["documents"], got["metadatas"]))
        _check_store(stored, docs[1], docs[0])
        _check_retrieval(store, docs)


@pytest.mark.slow
@pytest.mark.revisions
@pytest.mark.filterwarnings("ignore:Using SHA-1")
def test_stock_splitter_reembeds_more_than_rechunk(
    minilm: Any, memo: Memo, pairs: list[dict[str, Any]], new_record_manager: Callable[[], Any]
) -> None:
    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    def store_for(embeddings: Embeddings) -> QdrantVectorStore:
        client = QdrantClient(":memory:")
        client.create_collection(
            "c", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        )
        return QdrantVectorStore(client=client, collection_name="c", embedding=embeddings)

    cdc = rechunk.policy_for(minilm, "cdc")
    stock_recorder = RecordingMiniLM(memo)
    stock = RecursiveCharacterTextSplitter(
        chunk_size=cdc.params["max_tokens"],
        chunk_overlap=cdc.params["max_tokens"] // 10,
        length_function=minilm.count_tokens,
        add_start_index=True,
    )
    stock_store = store_for(stock_recorder)
    # the default key encoder (sha1) is the only built-in one whose ids Qdrant accepts
    s_requests, s_docs, _ = _run_index(
        stock, "sha1", stock_store, stock_recorder, pairs, new_record_manager()
    )
    s_embedded = [[text for request in revision for text in request] for revision in s_requests]

    recorder = RecordingMiniLM(memo)
    store = store_for(CachedEmbeddings(recorder, MemoryCache()))
    r_requests, r_docs, _ = _run_index(
        _splitter(minilm), rechunk_key_encoder, store, recorder, pairs, new_record_manager()
    )
    # rechunk's own inputs, and apart from them the model check's (REFERENCE at the front of
    # each request): a real cost of CachedEmbeddings the stock pipeline does not pay
    (_, r_embedded_0), (r_checks, r_embedded_1) = map(split_check, r_requests)
    r_embedded = [r_embedded_0, r_embedded_1]

    stock_chunks, rechunk_chunks = len(s_embedded[1]), len(r_embedded[1])
    stock_tokens, rechunk_tokens = _tokens(minilm, s_embedded[1]), _tokens(minilm, r_embedded[1])
    check_inputs, check_tokens = len(r_checks), _tokens(minilm, r_checks)
    print(
        f"\nrevision 2 of {', '.join(PAIRS)}: stock RecursiveCharacterTextSplitter"
        f"(add_start_index=True) + index() embedded {stock_chunks} of {len(s_docs[1])} chunks, "
        f"{stock_tokens} tokens; rechunk embedded {rechunk_chunks} of {len(r_docs[1])} chunks, "
        f"{rechunk_tokens} tokens, and {check_inputs} model-check inputs, {check_tokens} tokens"
    )
    assert rechunk_chunks < stock_chunks
    assert rechunk_tokens < stock_tokens
    # ... and still with the model check's cost added
    assert rechunk_chunks + check_inputs < stock_chunks
    assert rechunk_tokens + check_tokens < stock_tokens
    # the stock pipeline re-embeds inputs it had already embedded (start_index is hashed)
    assert set(s_embedded[1]) & set(s_embedded[0])
    assert not set(r_embedded[1]) & set(r_embedded[0])
