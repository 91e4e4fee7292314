"""A sync of documents that need different chunkers (prose, code), and chunks that carry
where they lie in the source (pages, sections): ``sync(chunker_for=...)`` and
``Document(locator=...)``, on a real embedded Qdrant with a real (hash-derived) embedder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from qdrant_client import QdrantClient

from rechunk import (
    ConfigError,
    Document,
    FixedChunker,
    InputError,
    RecursiveChunker,
    StructuredChunker,
    sync,
)
from rechunk.adapters.qdrant import QdrantStore
from rechunk.sync import DOC_BATCH


class HashEmbedder:
    """A real deterministic embedder: each vector comes from the sha256 of its text."""

    model_id = "hash/mixed-v1"
    dimension = 16
    max_input_tokens: int | None = None

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        rows = [
            np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "big"))
            .standard_normal(self.dimension)
            for t in texts
        ]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimension)


def prose(i: int) -> str:
    return "\n\n".join(f"# Part {i}.{p}\n\nThe sync keeps paragraph {p} of note {i}." for p in range(6))


def code(i: int) -> str:
    return "\n\n".join(f"def f{i}_{k}(x):\n    return x + {k}\n" for k in range(8))


@pytest.fixture
def store() -> Any:
    made = QdrantStore(QdrantClient(":memory:"), "mixed")
    made.ensure_collection(HashEmbedder.dimension)
    return made


def points(store: Any, doc_id: str) -> list[Any]:
    return store.get_points_many([doc_id])[doc_id]


def test_each_document_is_chunked_by_the_chunker_picked_for_it(store: Any) -> None:
    default, for_code = StructuredChunker(), RecursiveChunker(target_tokens=24)
    docs = [Document("a.md", prose(1)), Document("b.py", code(1)), Document("c.md", prose(2))]
    picked: list[str] = []

    def chunker_for(doc: Document) -> Any:
        picked.append(doc.doc_id)
        return for_code if doc.doc_id.endswith(".py") else None

    embedder = HashEmbedder()
    report = sync(docs, store, chunker=default, embedder=embedder, chunker_for=chunker_for)
    assert sorted(picked) == ["a.md", "b.py", "c.md"]  # once per document
    assert report.policy == default.policy_id
    assert report.policies == {default.policy_id: 2, for_code.policy_id: 1}
    assert {d.doc_id: d.policy for d in report.per_document} == {
        "a.md": default.policy_id, "b.py": for_code.policy_id, "c.md": default.policy_id
    }
    stored = points(store, "b.py")
    assert {p.payload.policy for p in stored} == {for_code.policy_id}
    assert [(p.payload.start, p.payload.end) for p in stored] == [
        (c.start, c.end) for c in for_code.chunk(code(1))
    ]
    # the same documents again: every document is unchanged, nothing is embedded or written
    embedder.texts.clear()
    again = sync(docs, store, chunker=default, embedder=embedder, chunker_for=chunker_for)
    assert again.documents["unchanged"] == 3 and not embedder.texts
    # without the pick, the code file is chunked by the default policy: a changed document
    moved = sync(docs[1:2], store, chunker=default, embedder=embedder)
    assert moved.documents["changed"] == 1
    assert {p.payload.policy for p in points(store, "b.py")} == {default.policy_id}


def test_a_picked_chunker_that_does_not_fit_the_embedder_changes_nothing(store: Any) -> None:
    class Windowed(HashEmbedder):
        max_input_tokens = 256

    too_big = FixedChunker(max_tokens=600, hard_max_tokens=600)
    docs = [Document("a.md", prose(1)), Document("b.py", code(1))]
    with pytest.raises(ConfigError):
        sync(docs, store, chunker=StructuredChunker(max_tokens=200, hard_max_tokens=200),
             embedder=Windowed(), chunker_for=lambda d: too_big if d.doc_id == "b.py" else None)
    assert store.collection_info().points == 0
    with pytest.raises(ConfigError, match="not a chunker"):
        sync(docs, store, chunker=StructuredChunker(), embedder=HashEmbedder(),
             chunker_for=lambda d: "recursive")
    assert store.collection_info().points == 0


def test_many_batches_mix_the_helper_process_and_picked_chunkers(store: Any) -> None:
    """More than one batch: the sync's own chunker's documents go to the chunking helper,
    the others are chunked in process; each ends with its own policy."""
    default, for_code = StructuredChunker(), RecursiveChunker(target_tokens=24)
    docs = [
        Document(f"d{i}.py", code(i)) if i % 3 == 0 else Document(f"d{i}.md", prose(i))
        for i in range(DOC_BATCH + 40)
    ]
    report = sync(docs, store, chunker=default, embedder=HashEmbedder(),
                  chunker_for=lambda d: for_code if d.doc_id.endswith(".py") else None)
    assert report.stale_check == "passed"
    code_docs = sum(1 for d in docs if d.doc_id.endswith(".py"))
    assert report.policies == {default.policy_id: len(docs) - code_docs,
                               for_code.policy_id: code_docs}
    for doc in (docs[0], docs[1], docs[-1], docs[-2]):
        chunker = for_code if doc.doc_id.endswith(".py") else default
        assert [(p.payload.start, p.payload.end) for p in points(store, doc.doc_id)] == [
            (c.start, c.end) for c in chunker.chunk(doc.text)
        ]


def pages_of(text: str, first_page: int) -> Any:
    """A locator: the page of a span is first_page plus the paragraphs before it."""

    def locate(start: int, end: int) -> dict[str, Any]:
        return {"pages": [first_page + text.count("\n\n", 0, start),
                          first_page + text.count("\n\n", 0, max(start, end - 1))],
                "section": ["Guide"]}

    return locate


def test_chunks_carry_their_locator_and_a_moved_locator_is_a_payload_update(store: Any) -> None:
    text = prose(3)
    chunker = RecursiveChunker(target_tokens=16)
    embedder = HashEmbedder()
    doc = Document("guide.pdf", text, metadata={"format": "pdf"}, locator=pages_of(text, 1))
    sync([doc], store, chunker=chunker, embedder=embedder)
    stored = points(store, "guide.pdf")
    assert len(stored) > 1
    for p in stored:
        assert p.payload.metadata == {"format": "pdf", **pages_of(text, 1)(p.payload.start, p.payload.end)}
    # the same text, one page later (a page was inserted before it in the source):
    # every chunk gets a payload-only update, nothing is embedded
    embedder.texts.clear()
    later = Document("guide.pdf", text, metadata={"format": "pdf"}, locator=pages_of(text, 2))
    report = sync([later], store, chunker=chunker, embedder=embedder)
    assert report.chunks["updated"] == len(stored) and report.chunks["added"] == 0
    assert not embedder.texts
    assert points(store, "guide.pdf")[0].payload.metadata["pages"][0] == 2


@pytest.mark.parametrize(
    "located",
    [{"where": {"page": 1}}, {"pages": []}, {"pages": [1, "2"]}, {"doc_id": "x"}, ["page"]],
)
def test_a_locator_that_stores_cannot_hold_is_an_input_error(store: Any, located: Any) -> None:
    doc = Document("bad.md", prose(4), locator=lambda start, end: located)
    with pytest.raises(InputError):
        sync([doc], store, chunker=StructuredChunker(), embedder=HashEmbedder())
    assert store.collection_info().points == 0


def test_documents_with_and_without_locators_compare_by_their_text() -> None:
    with pytest.raises(InputError, match="callable"):
        Document("a.md", "text", locator="page 1")  # type: ignore[arg-type]
    assert Document("a.md", "x", locator=lambda s, e: {}) == Document("a.md", "x")
