"""RechunkNodeParser on the nodes of another parser, however LlamaIndex batches them.

``IngestionPipeline.run(nodes=..., num_workers=2)`` hands each worker process a
batch of its own, and ``acall`` on parts of a list does the same in one process:
a document's sections (``MarkdownNodeParser``'s nodes) then reach the parser in
several calls. Their chunks must get the same ids, unique within the document,
and offsets into the document, whatever the split. Documents written here; the
real LlamaIndex classes throughout.
"""

from __future__ import annotations

import asyncio
import pickle
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
from llama_index.core.schema import BaseNode, Document, NodeRelationship, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

from rechunk.adapters.llamaindex import (
    INPUT_KEY_KEY,
    OCCURRENCE_KEY,
    SPAN_END_KEY,
    SPAN_START_KEY,
    RechunkNodeParser,
)
from rechunk.errors import ConfigError
from rechunk.reuse.identity import point_id

NOTICE = "This section is provided as is, without warranty of any kind."


def _manual(sections: int = 8, edited: int | None = None) -> str:
    """A manual whose every section ends with the same notice; section ``edited`` reworded."""
    parts = []
    for i in range(sections):
        body = (
            f"Section {i} text explains item {i} in detail. " + "Filler words for the section. " * 4
        )
        if i == edited:
            body = body.replace("in detail", "in great detail, with an example")
        parts.append(f"## Section {i}\n\n{body}\n\n{NOTICE}")
    return "# Manual\n\n" + "\n\n".join(parts)


TEXT = _manual()


def _sections(text: str = TEXT) -> list[BaseNode]:
    """MarkdownNodeParser's sections of the manual (their own ids are random per run)."""
    return MarkdownNodeParser()([Document(text=text, id_="manual.md")])


def _parser(**kwargs: Any) -> RechunkNodeParser:
    return RechunkNodeParser.from_defaults(chunk_size=60, **kwargs)


def _module_id_func(i: int, node: BaseNode) -> str:
    return f"{node.node_id}-chunk-{i}"


def _ids(nodes: list[BaseNode]) -> list[str]:
    return [node.node_id for node in nodes]


def test_a_documents_sections_get_one_set_of_unique_ids_however_they_are_batched() -> None:
    parser = _parser()
    whole = parser(_sections())
    assert len(whole) > len(_sections()) and sum(n.text == NOTICE for n in whole) == 8
    assert len(set(_ids(whole))) == len(whole)

    half = _sections()
    k = len(half) // 2

    async def halves() -> list[list[BaseNode]]:
        return list(await asyncio.gather(parser.acall(half[:k]), parser.acall(half[k:])))

    gathered = [node for part in asyncio.run(halves()) for node in part]
    one_by_one = [node for section in _sections() for node in parser([section])]
    workers = IngestionPipeline(transformations=[parser], disable_cache=True).run(
        nodes=_sections(), num_workers=2
    )
    for split in (gathered, one_by_one, workers):
        assert sorted(_ids(split)) == sorted(_ids(whole))
        assert {n.node_id: n.text for n in split} == {n.node_id: n.text for n in whole}

    # what a vector store keeps: every chunk
    store = SimpleVectorStore()
    for node in workers:
        node.embedding = [0.1, 0.2]
    store.add(workers)
    assert len(store.data.embedding_dict) == len(whole)


def test_section_ids_are_stable_across_runs_and_an_edit_moves_only_its_sections() -> None:
    parser = _parser()
    first = {n.node_id: n.text for n in parser(_sections())}
    assert {n.node_id: n.text for n in parser(_sections())} == first  # sections' random ids
    edited = parser(_sections(_manual(edited=3)))
    changed = [n for n in edited if n.node_id not in first]
    # only the edited section's chunks get new ids (section 3 is made of two chunks)
    assert changed and all("Section 3" in n.text or n.text == NOTICE for n in changed)
    assert len(changed) <= 2
    assert len({n.node_id for n in edited}) == len(edited)


def test_whole_documents_keep_their_ids() -> None:
    """A Document parsed whole: ``point_id(doc_id, input_key, occurrence)``, as before."""
    parser = _parser()
    nodes = parser([Document(text=TEXT, id_="manual.md")])
    assert [n.node_id for n in nodes] == [
        point_id("manual.md", n.metadata[INPUT_KEY_KEY], n.metadata[OCCURRENCE_KEY]) for n in nodes
    ]
    assert len(set(_ids(nodes))) == len(nodes)


@pytest.mark.parametrize(
    "upstream",
    [MarkdownNodeParser(), SentenceSplitter(chunk_size=120, chunk_overlap=0)],
    ids=["markdown", "sentence"],
)
def test_offsets_after_another_parser_are_the_documents(upstream: Any) -> None:
    parts = upstream([Document(text=TEXT, id_="manual.md")])
    assert all(TEXT[p.start_char_idx : p.end_char_idx] == p.text for p in parts)
    parser = _parser()
    k = len(parts) // 2
    for nodes in (parser(parts), parser(parts[:k]) + parser(parts[k:])):
        assert len(nodes) >= len(parts)
        for node in nodes:
            assert isinstance(node, TextNode)
            assert node.ref_doc_id == "manual.md"
            assert TEXT[node.start_char_idx : node.end_char_idx] == node.text
            start, end = node.metadata[SPAN_START_KEY], node.metadata[SPAN_END_KEY]
            assert start <= node.start_char_idx < node.end_char_idx <= end
            assert TEXT[start:end].strip() == node.text


def test_a_node_without_its_offset_keeps_offsets_into_its_own_text() -> None:
    sections = _sections()
    for section in sections:
        section.start_char_idx = section.end_char_idx = None
    nodes = _parser()(sections)
    by_section = {s.node_id: s.text for s in sections}
    assert len(set(_ids(nodes))) == len(nodes)
    for node in nodes:
        parent = node.relationships[NodeRelationship.SOURCE]
        assert parent.node_id == "manual.md"
    # offsets are into the section each chunk came from (no document offset to add)
    texts = list(by_section.values())
    for node in nodes:
        assert any(t[node.start_char_idx : node.end_char_idx] == node.text for t in texts)


def test_hierarchical_nodes_below_the_top_keep_offsets_into_their_own_text() -> None:
    """HierarchicalNodeParser's lower levels count their spans in their parent's text, not
    the document's: adding them as document offsets gave 17 of 42 chunks a wrong span."""
    from llama_index.core.node_parser import HierarchicalNodeParser

    parts = HierarchicalNodeParser.from_defaults(chunk_sizes=[256, 128, 64])(
        [Document(text=TEXT, id_="manual.md")]
    )
    assert any(NodeRelationship.PARENT in p.relationships for p in parts)
    parser = _parser()
    for part in parts:  # one call a part: which part each chunk came from is then known
        top = NodeRelationship.PARENT not in part.relationships
        for node in parser([part]):
            text = TEXT if top else part.text
            assert text[node.start_char_idx : node.end_char_idx] == node.text


def test_a_lambda_id_func_is_refused_when_pickled_and_a_function_travels() -> None:
    parser = _parser(id_func=lambda i, node: f"{node.node_id}-{i}")
    with pytest.raises(ConfigError, match=r"id_func.*module-level function"):
        pickle.dumps(parser)
    docs = [Document(text=_manual(3), id_=f"d{i}") for i in range(4)]
    parser = _parser(id_func=_module_id_func)
    in_process = IngestionPipeline(transformations=[parser], disable_cache=True).run(documents=docs)
    in_workers = IngestionPipeline(transformations=[parser], disable_cache=True).run(
        documents=docs, num_workers=2
    )
    assert sorted(_ids(in_workers)) == sorted(_ids(in_process))
    assert Counter(i.rsplit("-chunk-", 1)[0] for i in _ids(in_process))["d0"] > 1
