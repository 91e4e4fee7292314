"""The code policy through the framework adapters, as the structured policy is offered:
LangChain's `from_language` and LlamaIndex's node parser with `policy="code"`."""

from __future__ import annotations

import pytest

from rechunk import ConfigError
from rechunk.chunkers.code import CodeChunker

pytest.importorskip("tree_sitter_python")

SOURCE = "\n\n".join(
    f"class Store{k}:\n    \"\"\"Shelf {k}.\"\"\"\n\n    def put(self, item):\n"
    f"        self.items.append(item)\n        return len(self.items) + {k}\n"
    for k in range(20)
)


def test_langchain_from_language_splits_with_the_code_policy() -> None:
    pytest.importorskip("langchain_text_splitters")
    from langchain_text_splitters import Language

    from rechunk.adapters.langchain import RechunkTextSplitter

    splitter = RechunkTextSplitter.from_language(Language.PYTHON)
    docs = splitter.create_documents([SOURCE], metadatas=[{"source": "store.py"}])
    assert len(docs) > 1
    assert all(d.metadata["policy"].startswith("code-") for d in docs)
    # the chunks are those of the code chunker sized for MiniLM, cut at definitions
    assert all(d.page_content.lstrip().startswith(("class ", "def ", '"""')) for d in docs)
    chunker = CodeChunker("python", **{k: v for k, v in splitter.chunker.params.items()})
    assert [(d.metadata["start"], d.metadata["end"]) for d in docs] == [
        (c.start, c.end) for c in chunker.chunk(SOURCE)
    ]
    sized = RechunkTextSplitter.from_language("rust", chunk_size=120)
    assert sized.split_text("fn main() {\n    println!(\"hi\");\n}\n")
    with pytest.raises(ConfigError, match="no code grammar for 'perl'"):
        RechunkTextSplitter.from_language(Language.PERL)
    with pytest.raises(ConfigError, match=r"prose, not code: use RechunkTextSplitter\(\)"):
        RechunkTextSplitter.from_language(Language.MARKDOWN)
    with pytest.raises(ConfigError, match="RechunkLoader"):
        RechunkTextSplitter.from_language(Language.HTML)
    # advice for code, not for prose
    with pytest.raises(ConfigError, match=r"grammar finds .* drop separators"):
        RechunkTextSplitter.from_language(Language.PYTHON, separators=["\nclass ", "\ndef "])
    with pytest.raises(ConfigError, match=r"from_language\(language\)"):
        RechunkTextSplitter.get_separators_for_language(Language.PYTHON)
    # every language LangChain names that has a grammar here gets the code policy
    for language in (Language.CSHARP, Language.KOTLIN, Language.SWIFT, Language.SCALA,
                     Language.PHP, Language.RUBY, Language.LUA):  # fmt: skip
        assert RechunkTextSplitter.from_language(language).chunker.language == language.value


def test_llamaindex_node_parser_takes_the_code_policy() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document

    from rechunk.adapters.llamaindex import RechunkNodeParser

    parser = RechunkNodeParser(policy="code", language="python")
    nodes = parser.get_nodes_from_documents([Document(text=SOURCE, id_="store.py")])
    expected = CodeChunker("python", **{k: v for k, v in parser.params.items()
                                        if k != "language"}).chunk(SOURCE)
    # nodes start where the code chunker's chunks start (their ends leave out trailing space)
    assert [n.start_char_idx for n in nodes] == [c.start for c in expected]
    assert parser.policy_id.startswith("code-")
    with pytest.raises(ConfigError, match="language='python'"):
        RechunkNodeParser(policy="code")  # which language?
    with pytest.raises(ConfigError, match="instead"):  # CodeSplitter's own argument
        RechunkNodeParser(policy="code", language="python", parser=object())
    with pytest.raises(ConfigError, match="'markdown' is prose, not code"):
        RechunkNodeParser(policy="code", language="markdown")
    # rebuilt from its own fields (LlamaIndex's from_dict and from_json, an ingestion
    # pipeline's cache key) with its language
    for again in (RechunkNodeParser.from_dict(parser.to_dict()),
                  RechunkNodeParser.from_json(parser.to_json())):  # fmt: skip
        assert again.policy_id == parser.policy_id and again.chunker.language == "python"


def test_a_sized_code_parser_makes_room_for_the_metadata() -> None:
    """With chunk_size (or chunk_overlap) and documents carrying metadata, as
    SimpleDirectoryReader's do, the chunker was rebuilt for the header without its
    language: a TypeError on every document."""
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.schema import MetadataMode

    from rechunk.adapters.llamaindex import RechunkNodeParser

    metadata = {"file_path": "/srv/repo/store.py", "file_name": "store.py", "team": "shelves"}
    for sizing in ({"chunk_size": 150}, {"chunk_overlap": 20}):
        parser = RechunkNodeParser(policy="code", language="python", **sizing)
        nodes = parser.get_nodes_from_documents([Document(text=SOURCE, metadata=metadata)])
        assert len(nodes) > 1 and all(n.metadata["policy"].startswith("code-") for n in nodes)
        counter = parser.chunker.token_counter
        limit = parser.chunk_size
        embedded = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        assert max(counter.count_many(embedded)) <= limit
