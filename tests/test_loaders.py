"""rechunk's parsers as a LangChain document loader and a LlamaIndex reader: one document
per file with the frameworks' usual metadata keys, the same text `rechunk sync` chunks, and
a pipeline that keeps the rest of its code (real framework classes, real files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rechunk.errors import InputError
from rechunk.sources import ParseError
from rechunk.sources.documents import documents_from_file

pytest.importorskip("selectolax")

PAGE = """<!doctype html><html><head><title>Release notes</title></head><body>
<nav>Home | Blog</nav><main><h1>Release notes</h1>
<p>The sync now reads pages, manuals and records as well as notes.</p>
<h2>Fixes</h2><p>A damaged cache is set aside with one warning.</p></main>
<footer>Site footer</footer></body></html>"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "notes.html").write_text(PAGE)
    (tmp_path / "faq.jsonl").write_text(
        json.dumps({"id": "a", "q": "Is text embedded twice?", "r": "No."})
        + "\n"
        + json.dumps({"id": "b", "q": "Does a move re-embed?", "r": "No."})
        + "\n"
    )
    return tmp_path


def test_langchain_loader_gives_the_text_sync_chunks(folder: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document as LCDocument

    from rechunk.adapters.langchain import RechunkTextSplitter
    from rechunk.adapters.langchain_loader import RechunkLoader

    loaded = RechunkLoader([folder / "notes.html", folder / "faq.jsonl"], id_field="id").load()
    assert all(isinstance(doc, LCDocument) for doc in loaded)
    page, *records = loaded
    ours = documents_from_file(folder / "notes.html", "notes.html")[0]
    assert page.page_content == ours.text
    assert "Home | Blog" not in page.page_content and "Site footer" not in page.page_content
    assert page.metadata["source"] == str(folder / "notes.html")
    assert page.metadata["format"] == "html" and page.metadata["title"] == "Release notes"
    # the file is the source (as JSONLoader gives it); the record is its own key and the id
    assert [r.metadata["source"] for r in records] == [str(folder / "faq.jsonl")] * 2
    assert [r.metadata["record"] for r in records] == ["a", "b"]
    assert [r.id for r in records] == [f"{folder / 'faq.jsonl'}#a", f"{folder / 'faq.jsonl'}#b"]
    chunks = RechunkTextSplitter().split_documents(loaded)
    assert chunks and all(c.metadata["source"] for c in chunks)
    with pytest.raises(ParseError):
        (folder / "bad.pdf").write_bytes(b"not a pdf")
        RechunkLoader(folder / "bad.pdf").load()


def test_a_record_removed_from_a_file_leaves_an_index_with_incremental_cleanup(
    folder: Path,
) -> None:
    """LangChain's index() deletes by source: with the file as every record's source, a
    record removed from the file is deleted when the file is indexed again."""
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    from rechunk.adapters.langchain import RechunkTextSplitter
    from rechunk.adapters.langchain_loader import RechunkLoader

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    records = InMemoryRecordManager("faq")
    records.create_schema()
    splitter = RechunkTextSplitter()

    def indexed() -> dict[str, Any]:
        docs = splitter.split_documents(RechunkLoader(folder / "faq.jsonl", id_field="id").load())
        return index(docs, records, store, cleanup="incremental", source_id_key="source")

    assert indexed()["num_added"] == 2
    faq = folder / "faq.jsonl"
    faq.write_text(faq.read_text().splitlines()[1] + "\n")
    indexed()
    assert [entry["metadata"]["record"] for entry in store.store.values()] == ["b"]


def test_llamaindex_reader_in_simple_directory_reader(folder: Path) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.schema import MetadataMode

    from rechunk.adapters.llamaindex import RechunkNodeParser
    from rechunk.adapters.llamaindex_reader import RechunkReader

    reader = RechunkReader(id_field="id")
    docs = SimpleDirectoryReader(str(folder), file_extractor=reader.file_extractor()).load_data()
    by_id = {d.id_: d for d in docs}
    page = by_id[str(folder / "notes.html")]
    assert page.text == documents_from_file(folder / "notes.html", "notes.html")[0].text
    # SimpleDirectoryReader's own metadata, then the parser's
    assert page.metadata["file_name"] == "notes.html" and page.metadata["format"] == "html"
    # how the text was read is no part of what it says: neither embedded nor shown
    assert page.metadata["encoding"] == "utf-8" and "locator_digest" in page.metadata
    for mode in (MetadataMode.EMBED, MetadataMode.LLM):
        shown = page.get_metadata_str(mode)
        assert not any(key in shown for key in ("parser", "encoding", "locator_digest"))
    assert {f"{folder / 'faq.jsonl'}#a", f"{folder / 'faq.jsonl'}#b"} <= set(by_id)
    nodes = RechunkNodeParser().get_nodes_from_documents([page])
    assert nodes and all(n.ref_doc_id == page.id_ for n in nodes)
    # one file a call, as LlamaIndex's file readers: a list is told what to do instead
    with pytest.raises(InputError, match=r"one file a call.*SimpleDirectoryReader"):
        reader.load_data([folder / "notes.html", folder / "faq.jsonl"])  # type: ignore[arg-type]


def test_langchain_loader_names_a_pdfs_pages_as_pypdfloader_does(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("pypdfium2")
    pytest.importorskip("reportlab")
    from reportlab.lib.pagesizes import A6
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    from rechunk.adapters.langchain_loader import RechunkLoader

    path = tmp_path / "manual.pdf"
    style = getSampleStyleSheet()["BodyText"]
    SimpleDocTemplate(str(path), pagesize=A6, title="Manual").build(
        [Paragraph("The sync reads manuals.", style), PageBreak(),
         Paragraph("A second page.", style)]
    )  # fmt: skip
    (doc,) = RechunkLoader(path).load()
    # PyPDFLoader(mode="single")'s keys where they overlap: source, title, total_pages
    assert doc.metadata["source"] == str(path)
    assert doc.metadata["total_pages"] == 2
    # not `pages`, which in rechunk is a chunk's [first, last] page: the splitter copied
    # the count to every chunk, and a filter on pages matched it
    assert "pages" not in doc.metadata
    assert doc.metadata["title"] == "Manual"
    assert doc.metadata["format"] == "pdf" and doc.metadata["parser"].startswith("pdf/")
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import MetadataMode

    from rechunk.adapters.llamaindex_reader import RechunkReader

    (node_doc,) = RechunkReader().load_data(path)
    assert node_doc.metadata["total_pages"] == 2 and "pages" not in node_doc.metadata
    # a page added would otherwise change every node's embedded header
    assert "total_pages" not in node_doc.get_metadata_str(MetadataMode.EMBED)


def test_a_loader_asked_for_code_says_what_reads_code(tmp_path: Path) -> None:
    """Source code is no parser's format: the loaders say what reads and splits it, in the
    Python API's words (not the command line's --format)."""
    pytest.importorskip("langchain_core")
    from rechunk import ConfigError, InputError
    from rechunk.adapters.langchain_loader import RechunkLoader

    path = tmp_path / "shop.py"
    path.write_text("def total(items):\n    return sum(items)\n")
    with pytest.raises(ConfigError, match=r"from_language") as err:
        RechunkLoader(path, format="code").load()
    assert "--format" not in str(err.value)
    # found by its suffix, as `rechunk sync` finds it, it is named as code too
    with pytest.raises(InputError, match=r"shop.py: source code, .*TextLoader.*from_language"):
        RechunkLoader(path).load()


#: one word per page, in every sentence of it, so that a chunk's words say its pages
PAGE_WORDS = ("amber", "birch", "cedar", "delta", "ember")
GUIDE = """# Guide

Read this first.

## Setup

Install the package, then point it at a folder of notes.

### Offline

Copy the wheel across and install it without an index.

## Use

Run the sync every night; it embeds only what changed.
"""


def _manual(path: Path, words: tuple[str, ...], blank: str = "") -> None:
    """A PDF written by reportlab: one page per word, each sentence naming its page's word;
    ``blank`` ``"first"`` or ``"last"`` adds a page with no text there (the same text and
    page count, on other pages)."""
    from reportlab.lib.pagesizes import A6
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

    style = getSampleStyleSheet()["BodyText"]
    story: list[Any] = [Spacer(1, 10), PageBreak()] if blank == "first" else []
    for word in words:
        # the word every few words, so that any run of words (an overlap) names its page
        sentences = " ".join(f"{word} step {n} {word} of {word}." for n in range(10))
        story += [Paragraph(sentences, style), PageBreak()]
    if blank == "last":
        story.append(Spacer(1, 10))
    else:
        story.pop()  # no page break after the last page
    SimpleDocTemplate(str(path), pagesize=A6, title="Manual").build(story)


def _pages_by_words(text: str, words: tuple[str, ...], first: int = 1) -> list[int]:
    return [n for n, word in enumerate(words, first) if word in text]


def _heading_path(text: str, start: int) -> list[str]:
    """The Markdown heading path in force at ``start``, read from the lines themselves."""
    path: list[tuple[int, str]] = []
    for line in text[:start].splitlines():
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            path = [(lv, title) for lv, title in path if lv < level]
            path.append((level, line.lstrip("#").strip()))
    for line in text[start:].splitlines()[:1]:  # a chunk that opens with a heading
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            path = [(lv, title) for lv, title in path if lv < level]
            path.append((level, line.lstrip("#").strip()))
    return [title for _, title in path]


def test_langchain_splitter_says_where_each_chunk_of_a_loaded_file_lies(tmp_path: Path) -> None:
    """Chunks of a loaded PDF carry the pages their text is on, and chunks of a loaded
    Markdown note their heading path, as `rechunk sync` writes them; a copy of a loaded
    document, or one whose text was changed, carries only the document's metadata."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("pypdfium2")
    pytest.importorskip("reportlab")
    from rechunk.adapters.langchain import RechunkTextSplitter
    from rechunk.adapters.langchain_loader import RechunkLoader

    _manual(tmp_path / "manual.pdf", PAGE_WORDS)
    (tmp_path / "guide.md").write_text(GUIDE)
    pdf, note = RechunkLoader([tmp_path / "manual.pdf", tmp_path / "guide.md"]).load()
    splitter = RechunkTextSplitter(chunk_size=24)
    chunks = splitter.split_documents([pdf, note])
    on_pages = [c for c in chunks if c.metadata["source"].endswith(".pdf")]
    assert len(on_pages) > len(PAGE_WORDS)  # several chunks a page
    for chunk in on_pages:
        first, last = chunk.metadata["pages"]
        assert list(range(first, last + 1)) == _pages_by_words(chunk.page_content, PAGE_WORDS)
        assert "section" not in chunk.metadata
    in_note = [c for c in chunks if c.metadata["source"].endswith(".md")]
    assert {tuple(c.metadata["section"]) for c in in_note} >= {
        ("Guide", "Setup", "Offline"),
        ("Guide", "Use"),
    }
    for chunk in in_note:
        assert chunk.metadata["section"] == _heading_path(GUIDE, chunk.metadata["start"])
        assert "pages" not in chunk.metadata
    # with an overlap, the pages of page_content, the text a reader quotes, overlap and all
    # while its section is that of its own span, where `rechunk sync` puts it (a few words
    # of the section before do not make it that section's)
    overlapping = RechunkTextSplitter(chunk_size=24, chunk_overlap=8).split_documents([pdf, note])
    assert any(
        c.metadata.get("pages", [0, 0])[0] < c.metadata.get("pages", [0, 0])[1] for c in overlapping
    )
    for chunk in overlapping:
        if "pages" in chunk.metadata:
            first, last = chunk.metadata["pages"]
            assert list(range(first, last + 1)) == _pages_by_words(chunk.page_content, PAGE_WORDS)
        else:
            assert chunk.metadata["section"] == _heading_path(GUIDE, chunk.metadata["start"])
    assert any(
        c.metadata["section"] != _heading_path(GUIDE, c.metadata["start_index"])
        for c in overlapping
        if "section" in c.metadata
    )  # the overlap reaches back into another section somewhere
    # a copy, or a text the user changed, has no parse to locate its chunks in
    from rechunk import LocatorWarning

    with pytest.warns(LocatorWarning, match="1 document"):
        copied = splitter.split_documents([pdf.model_copy(deep=True), note])
    cleaned = pdf.model_copy(update={"page_content": pdf.page_content.upper()})
    with pytest.warns(LocatorWarning, match="as a copy .* or with their text changed"):
        changed = splitter.split_documents([cleaned])
    copied = [c for c in copied if c.metadata["source"].endswith(".pdf")]
    for chunk in copied + changed:
        assert "pages" not in chunk.metadata
    assert [c.page_content for c in copied] == [c.page_content for c in on_pages]


def test_a_reflowed_pdf_gets_its_new_pages_from_the_cache(tmp_path: Path, minilm: Any) -> None:
    """A page inserted at the front moves every chunk to the next page: index() rewrites
    those records with their new pages, and every vector of unchanged text comes from the
    cache (the real model embeds the new page's chunks only)."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("pypdfium2")
    pytest.importorskip("reportlab")
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    from rechunk import MemoryCache
    from rechunk.adapters.langchain import (
        CachedEmbeddings,
        RechunkTextSplitter,
        rechunk_key_encoder,
    )
    from rechunk.adapters.langchain_embeddings import RechunkEmbeddings
    from rechunk.adapters.langchain_loader import RechunkLoader

    path = tmp_path / "manual.pdf"
    embeddings = CachedEmbeddings(RechunkEmbeddings(minilm), MemoryCache())
    store = InMemoryVectorStore(embeddings)
    records = InMemoryRecordManager("manual")
    records.create_schema()
    splitter = RechunkTextSplitter(chunk_size=24, model_id=minilm.model_id)

    def indexed(words: tuple[str, ...]) -> dict[str, Any]:
        _manual(path, words)
        docs = splitter.split_documents(RechunkLoader(path).load())
        embeddings.reset_stats()
        return index(
            docs, records, store, cleanup="incremental", source_id_key="source",
            key_encoder=rechunk_key_encoder,
        )  # fmt: skip

    indexed(PAGE_WORDS)
    before = len(store.store)
    result = indexed(("fable", *PAGE_WORDS))
    stored = list(store.store.values())
    for entry in stored:
        first, last = entry["metadata"]["pages"]
        words = ("fable", *PAGE_WORDS)
        assert list(range(first, last + 1)) == _pages_by_words(entry["text"], words)
    new_page = [e for e in stored if "fable" in e["text"]]
    assert result["num_deleted"] == before  # every old record named its old page
    assert embeddings.stats.inputs_embedded == len(new_page)


def test_llamaindex_nodes_of_a_reflowed_pdf_reach_chroma_with_their_pages(
    tmp_path: Path, minilm: Any, chroma_client: Any
) -> None:
    """RechunkReader in SimpleDirectoryReader, RechunkNodeParser and CachedEmbedding in an
    IngestionPipeline into LlamaIndex's ChromaVectorStore (which holds no lists): every
    node carries its pages as text, they stay out of what is embedded, and a page inserted
    at the front re-embeds that page's nodes only."""
    pytest.importorskip("llama_index.vector_stores.chroma")
    pytest.importorskip("pypdfium2")
    pytest.importorskip("reportlab")
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.schema import MetadataMode
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from rechunk import MemoryCache
    from rechunk.adapters.llamaindex import CachedEmbedding, RechunkNodeParser
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding
    from rechunk.adapters.llamaindex_reader import RechunkReader

    folder = tmp_path / "docs"
    folder.mkdir()
    collection = chroma_client.get_or_create_collection("manual", embedding_function=None)
    embedding = CachedEmbedding(RechunkEmbedding(minilm), MemoryCache())
    parser = RechunkNodeParser(chunk_size=100, model_id=minilm.model_id)
    pipeline = IngestionPipeline(
        transformations=[parser, embedding],
        docstore=SimpleDocumentStore(),
        vector_store=ChromaVectorStore(chroma_collection=collection),
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    reader = RechunkReader()

    def run(words: tuple[str, ...]) -> list[Any]:
        _manual(folder / "manual.pdf", words)
        docs = SimpleDirectoryReader(str(folder), file_extractor=reader.file_extractor())
        embedding.reset_stats()
        return pipeline.run(documents=docs.load_data())

    run(PAGE_WORDS)
    words = ("fable", *PAGE_WORDS)
    nodes = run(words)
    assert nodes and all("pages" not in n.get_content(MetadataMode.EMBED) for n in nodes)
    assert all("pages: " in n.get_content(MetadataMode.LLM) for n in nodes)  # to cite
    stored = collection.get(include=["documents", "metadatas"])
    assert len(stored["ids"]) == len(nodes)
    for text, metadata in zip(stored["documents"], stored["metadatas"]):
        first, _, last = metadata["pages"].partition("-")
        pages = list(range(int(first), int(last or first) + 1))
        assert pages == _pages_by_words(text, words)
    assert embedding.stats.inputs_embedded == sum("fable" in n.text for n in nodes) > 0


def test_a_loaded_document_holds_its_parse_no_longer_than_itself(folder: Path) -> None:
    """The parse a splitter looks up lives as long as the document: a pipeline that loads
    a folder a file at a time does not keep every file's text."""
    pytest.importorskip("langchain_core")
    import gc

    from rechunk.adapters import _locators
    from rechunk.adapters.langchain_loader import RechunkLoader

    before = len(_locators._KNOWN)
    docs = RechunkLoader([folder / "notes.html", folder / "faq.jsonl"], id_field="id").load()
    assert len(_locators._KNOWN) == before + len(docs) == before + 3
    del docs
    gc.collect()
    assert len(_locators._KNOWN) == before


def test_llamaindex_locators_leave_ids_and_embedded_text_as_they_were(folder: Path) -> None:
    """A node's locators are shown to the LLM only: its embedded text, input key and id are
    those of the same document without them (a copy), and a key the document itself holds
    (a record's id) keeps its value and stays embedded."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import MetadataMode

    from rechunk.adapters.llamaindex import RechunkNodeParser
    from rechunk.adapters.llamaindex_reader import RechunkReader

    reader = RechunkReader(id_field="id")
    docs = [*reader.load_data(folder / "faq.jsonl"), *reader.load_data(folder / "notes.html")]
    parser = RechunkNodeParser()
    located = parser.get_nodes_from_documents(docs)
    from rechunk import LocatorWarning

    with pytest.warns(LocatorWarning, match="3 document"):
        bare = parser.get_nodes_from_documents([d.model_copy(deep=True) for d in docs])
    assert [n.id_ for n in located] == [n.id_ for n in bare]
    embedded = [n.get_content(MetadataMode.EMBED) for n in located]
    assert embedded == [n.get_content(MetadataMode.EMBED) for n in bare]
    assert [n.metadata["lines"] for n in located[:2]] == ["1", "2"]
    assert all("record: " in text and "lines" not in text for text in embedded[:2])
    assert located[2].metadata["section"] == "Release notes"
    assert all("section" not in n.metadata and "lines" not in n.metadata for n in bare)


def test_llamaindex_docstore_passes_a_reflowed_pdf_to_the_parser(
    tmp_path: Path, minilm: Any
) -> None:
    """A PDF whose text and page count are unchanged but whose text lies on other pages (a
    blank page moved from the front to the back) is a changed document to an
    IngestionPipeline's docstore: its nodes get their new pages, and nothing is embedded
    again. Its text and metadata alone would have the docstore pass over it."""
    pytest.importorskip("llama_index.core")
    pytest.importorskip("pypdfium2")
    pytest.importorskip("reportlab")
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from rechunk import MemoryCache
    from rechunk.adapters.llamaindex import CachedEmbedding, RechunkNodeParser
    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding
    from rechunk.adapters.llamaindex_reader import RechunkReader

    path = tmp_path / "manual.pdf"
    embedding = CachedEmbedding(RechunkEmbedding(minilm), MemoryCache())
    pipeline = IngestionPipeline(
        transformations=[RechunkNodeParser(chunk_size=120, model_id=minilm.model_id), embedding],
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    _manual(path, PAGE_WORDS, blank="first")
    (before,) = RechunkReader().load_data(path)
    assert pipeline.run(documents=[before])
    _manual(path, PAGE_WORDS, blank="last")
    (after,) = RechunkReader().load_data(path)
    assert after.text == before.text
    assert after.metadata["total_pages"] == before.metadata["total_pages"]
    assert after.hash != before.hash  # where its blocks lie is in its metadata
    embedding.reset_stats()
    nodes = pipeline.run(documents=[after])
    assert nodes and embedding.stats.inputs_embedded == 0
    for node in nodes:
        first, _, last = node.metadata["pages"].partition("-")
        pages = list(range(int(first), int(last or first) + 1))
        assert pages == _pages_by_words(node.text, PAGE_WORDS)


def test_an_overlap_from_another_sheet_adds_none_of_its_rows(tmp_path: Path) -> None:
    """Rows are numbered in each sheet: a chunk opening a sheet whose overlap reaches back
    into the sheet before cites its own sheet's rows only (openpyxl writes the workbook)."""
    pytest.importorskip("langchain_core")
    openpyxl = pytest.importorskip("openpyxl")
    from rechunk.adapters.langchain import RechunkTextSplitter
    from rechunk.adapters.langchain_loader import RechunkLoader

    book = openpyxl.Workbook()
    alpha = book.active
    alpha.title = "Alpha"
    alpha.append(["Name", "Value"])
    for row in range(2, 42):
        alpha.append([f"alpha{row}", row])
    beta = book.create_sheet("Beta")
    beta.append(["Name", "Value"])
    for row in range(2, 6):
        beta.append([f"beta{row}", row])
    book.save(tmp_path / "two.xlsx")
    chunks = RechunkTextSplitter(chunk_size=40, chunk_overlap=15).split_documents(
        RechunkLoader(tmp_path / "two.xlsx").load()
    )
    opening = [c for c in chunks if c.metadata.get("sheet") == "Beta" and "alpha" in c.page_content]
    assert opening  # the overlap reaches back into Alpha
    for chunk in chunks:
        if chunk.metadata.get("sheet") == "Beta":
            first, last = chunk.metadata["rows"]
            assert 2 <= first <= last <= 5, chunk.metadata


@pytest.mark.timeout(60)
def test_a_collection_inside_the_table_frees_documents_without_a_hang() -> None:
    """A garbage collection may start at any allocation, also while the table is locked,
    and free a remembered document in a reference cycle, whose callback takes the lock in
    the same thread: with a plain lock that hung the process for good."""
    pytest.importorskip("langchain_core")
    import gc

    from langchain_core.documents import Document as LCDocument

    from rechunk.adapters import _locators
    from rechunk.sources.base import Parsed

    parsed = Parsed("x\n", (), "text", "text/1")
    before = len(_locators._KNOWN)
    threshold = gc.get_threshold()
    gc.set_threshold(1)  # a collection at nearly every allocation
    try:
        for _ in range(1000):
            doc = LCDocument(page_content="x\n")
            doc.metadata["self"] = doc  # a cycle: only the collector frees it
            _locators.remember(doc, parsed)
            del doc
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert len(_locators._KNOWN) == before


def test_create_documents_names_the_call_that_keeps_locators(folder: Path) -> None:
    pytest.importorskip("langchain_core")
    from rechunk import LocatorWarning
    from rechunk.adapters.langchain import RechunkTextSplitter
    from rechunk.adapters.langchain_loader import RechunkLoader

    (page,) = RechunkLoader(folder / "notes.html").load()
    with pytest.warns(LocatorWarning, match=r"call split_documents\(docs\)"):
        chunks = RechunkTextSplitter().create_documents([page.page_content], [page.metadata])
    assert chunks and all("section" not in c.metadata for c in chunks)


def test_the_file_loaders_own_arguments_are_taken_or_say_what_to_do(tmp_path: Path) -> None:
    """A drop-in user kept ``TextLoader(file_path=...)``, ``BSHTMLLoader(open_encoding=)``
    and ``PyPDFLoader(password=...)``: each was a bare TypeError."""
    pytest.importorskip("langchain_core")
    from rechunk.adapters.langchain_loader import RechunkLoader
    from rechunk.errors import ConfigError

    page = tmp_path / "page.html"
    page.write_bytes(
        "<html><body><h1>Caf\xe9</h1><p>Open daily.</p></body></html>".encode("cp1252")
    )
    by_path = RechunkLoader(page, "cp1252").load()
    assert RechunkLoader(file_path=page, open_encoding="cp1252").load() == by_path
    assert "Café" in by_path[0].page_content
    for given, says in (({"password": "x"}, "decrypt the file first"),
                        ({"mode": "elements"}, "RechunkTextSplitter"),
                        ({"jq_schema": ".[]"}, "id_field"),
                        ({"extraction_mode": "layout"}, "reading order"),
                        ({"web_path": "https://example.com"}, "save the page"),
                        ({"colour": "red"}, "not an argument of RechunkLoader")):  # fmt: skip
        with pytest.raises(ConfigError, match=says):
            RechunkLoader(page, **given)
    with pytest.raises(ConfigError, match=r"paths \(or file_path"):
        RechunkLoader()
    pytest.importorskip("llama_index.core")
    from rechunk.adapters.llamaindex_reader import RechunkReader

    # PDFReader's own argument: a bare TypeError before
    with pytest.raises(ConfigError, match="nodes of it cite their pages"):
        RechunkReader(return_full_document=True)
    with pytest.raises(ConfigError, match="not an argument of RechunkReader"):
        RechunkReader(colour="red")


class _ListLocators:
    """A llamaindex-layout store as it wrote before locators were text (lists)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    text_locators = False


def test_a_sync_in_the_llamaindex_layout_stores_locators_as_the_node_parser_does(
    folder: Path, minilm: Any
) -> None:
    """`rechunk sync --layout llamaindex` stored `section` as a list (shown to the LLM
    as `['Release notes']`) where RechunkNodeParser gives `"Release notes"`, so one
    collection held both shapes and a metadata filter matched half of it. Locators are
    text in that layout now; a collection written with lists gets payload-only updates
    once, nothing embedded."""
    pytest.importorskip("llama_index.core")
    from qdrant_client import QdrantClient

    from rechunk import policy_for, sync
    from rechunk.adapters.llamaindex import RechunkNodeParser
    from rechunk.adapters.llamaindex_reader import RechunkReader
    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.sources.files import read_documents

    docs = read_documents([folder / "notes.html"]).documents
    store = QdrantStore(QdrantClient(":memory:"), "kb", layout="llamaindex")
    store.ensure_collection(minilm.dimension)
    chunker = policy_for(minilm, "structured")
    old = sync(docs, _ListLocators(store), chunker=chunker, embedder=minilm)  # type: ignore[arg-type]
    assert old.inputs["embedded"] > 0
    (stored,) = store.get_points_many(["notes.html"]).values()
    assert all(isinstance(p.payload.metadata["section"], list) for p in stored)
    moved = sync(docs, store, chunker=chunker, embedder=minilm)
    assert moved.inputs["embedded"] == 0 and moved.chunks["updated"] == len(stored)
    assert sync(docs, store, chunker=chunker, embedder=minilm).chunks["updated"] == 0
    (stored,) = store.get_points_many(["notes.html"]).values()
    synced = sorted(p.payload.metadata["section"] for p in stored)
    (page,) = RechunkReader().load_data(folder / "notes.html")
    nodes = RechunkNodeParser().get_nodes_from_documents([page])
    assert synced == sorted(n.metadata["section"] for n in nodes)
    assert all(isinstance(s, str) for s in synced) and "Release notes > Fixes" in synced


def test_locators_as_text_touch_rechunks_ranges_and_heading_path_only() -> None:
    """A locator of one's own keeps its lists (`[4, 9, 17]` had become "4-17", losing
    page 9, and `["x", "y"]` "x > y"); the parsers' range keys are the ones named."""
    from rechunk.document import RANGED_LOCATOR_KEYS, locator_as_text
    from rechunk.sources.base import _RANGED

    assert set(_RANGED.values()) == RANGED_LOCATOR_KEYS
    located = {"pages": [3, 4], "rows": [7, 7], "section": ["Guide", "Setup"],
               "visits": [4, 9, 17], "where": ["x", "y"], "sheet": "Q3"}  # fmt: skip
    assert locator_as_text(located) == {
        "pages": "3-4", "rows": "7", "section": "Guide > Setup",
        "visits": [4, 9, 17], "where": ["x", "y"], "sheet": "Q3",
    }  # fmt: skip
