"""rechunk's parsers as a LangChain document loader and a LlamaIndex reader: one document
per file with the frameworks' usual metadata keys, the same text `rechunk sync` chunks, and
a pipeline that keeps the rest of its code (real framework classes, real files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
        json.dumps({"id": "a", "q": "Is text embedded twice?", "r": "No."}) + "\n"
        + json.dumps({"id": "b", "q": "Does a move re-embed?", "r": "No."}) + "\n"
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
    assert "parser" not in page.get_content(metadata_mode=MetadataMode.EMBED)
    assert {f"{folder / 'faq.jsonl'}#a", f"{folder / 'faq.jsonl'}#b"} <= set(by_id)
    nodes = RechunkNodeParser().get_nodes_from_documents([page])
    assert nodes and all(n.ref_doc_id == page.id_ for n in nodes)


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
    from rechunk import ConfigError
    from rechunk.adapters.langchain_loader import RechunkLoader

    path = tmp_path / "shop.py"
    path.write_text("def total(items):\n    return sum(items)\n")
    with pytest.raises(ConfigError, match=r"from_language") as err:
        RechunkLoader(path, format="code").load()
    assert "--format" not in str(err.value)
