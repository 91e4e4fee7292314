"""Drop-in for real: the frameworks' own arguments, windows, metadata and offsets (issue 17).

Each test runs the real LangChain / LlamaIndex classes (``index()``, ``IngestionPipeline``,
``VectorStoreIndex``) on the project's own texts with rechunk's classes swapped in, as a
migrating user would. Token counts come from the real all-MiniLM-L6-v2 tokenizer.
"""

from __future__ import annotations

import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import Document as LlamaDocument
from llama_index.core.schema import NodeRelationship
from test_langchain import FakeEmbeddings

import rechunk
from rechunk.adapters._splitting import WindowWarning
from rechunk.adapters.langchain import (
    CachedEmbeddings,
    RechunkTextSplitter,
    rechunk_key_encoder,
)
from rechunk.adapters.llamaindex import CachedEmbedding, RechunkNodeParser
from rechunk.chunking.tokens import default_tokenizer_path, resolve_tokenizer
from rechunk.errors import ConfigError
from rechunk.reuse.agreement import REFERENCE

ROOT = Path(__file__).resolve().parent.parent
#: examples/docs plus the README: the corpus the issue measured the defaults on
CORPUS = {
    path.name: path.read_text(encoding="utf-8")
    for path in [*sorted((ROOT / "examples" / "docs").glob("*.md")), ROOT / "README.md"]
}
GUIDE = CORPUS["chunking-guide.md"]
MINILM_WINDOW = 256  # tokens all-MiniLM-L6-v2 reads, [CLS] and [SEP] included


def minilm_tokens(text: str) -> int:
    """Tokens the model reads for ``text``, special tokens included."""
    return len(resolve_tokenizer(None).tokenizer.encode(text).ids)  # type: ignore[attr-defined]


def content_tokens(text: str) -> int:
    return resolve_tokenizer(None).count_many([text])[0]


def hf_minilm() -> Any:
    """all-MiniLM-L6-v2's tokenizer as ``transformers`` loads it (what LangChain users pass)."""
    transformers = pytest.importorskip("transformers")
    folder = default_tokenizer_path().parent
    return transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def _index(docs: list[Document], embeddings: Any) -> tuple[InMemoryVectorStore, dict[str, Any]]:
    store = InMemoryVectorStore(embedding=embeddings)
    manager = InMemoryRecordManager(namespace="dropin")
    manager.create_schema()
    result = index(
        docs,
        manager,
        store,
        cleanup="incremental",
        source_id_key="source",
        key_encoder=rechunk_key_encoder,
    )
    time.sleep(0.01)
    return store, dict(result)


def _exact(docs: list[Document], sources: dict[str, str]) -> None:
    for doc in docs:
        meta = doc.metadata
        assert sources[meta["source"]][meta["start_index"] : meta["end_index"]] == doc.page_content


# --------------------------------------------------------------------------- 1. arguments


def test_langchain_arguments_are_honoured_through_index() -> None:
    """The arguments of a RecursiveCharacterTextSplitter, as a user carries them over."""
    splitter = RechunkTextSplitter(
        chunk_size=120,
        chunk_overlap=20,
        add_start_index=True,
        keep_separator=True,
        separators=["\n\n", "\n", " ", ""],
        is_separator_regex=False,
        strip_whitespace=True,
    )
    assert splitter._chunk_size == 120 and splitter._chunk_overlap == 20
    docs = splitter.split_documents([Document(page_content=GUIDE, metadata={"source": "guide.md"})])
    assert len(docs) > 5
    assert all(content_tokens(d.page_content) <= 120 for d in docs)
    _exact(docs, {"guide.md": GUIDE})
    # the overlap: each chunk after the first starts inside the one before it
    starts = [d.metadata["start_index"] for d in docs]
    ends = [d.metadata["end_index"] for d in docs]
    assert starts == sorted(starts)
    assert sum(s < e for s, e in zip(starts[1:], ends)) >= len(docs) - 2
    overlaps = [GUIDE[s:e] for s, e in zip(starts[1:], ends) if s < e]
    assert all(0 < content_tokens(o) <= 20 for o in overlaps)
    model = FakeEmbeddings()
    store, result = _index(docs, CachedEmbeddings(model, rechunk.MemoryCache()))
    assert result["num_added"] == len(docs) and len(store.store) == len(docs)
    # regex whitespace separators mean the same thing
    RechunkTextSplitter(separators=[r"\n\n", r"\n", r"\s+"], is_separator_regex=True)


def test_length_function_counts_chunk_size() -> None:
    splitter = RechunkTextSplitter(chunk_size=400, length_function=len, policy="recursive")
    docs = splitter.create_documents([GUIDE], [{"source": "g"}])
    assert len(docs) > 5 and max(len(d.page_content) for d in docs) <= 400
    assert splitter.chunker.token_counter.identity == "callable:builtins.len+whitespace"
    _exact(docs, {"g": GUIDE})
    with pytest.raises(ConfigError, match="either tokenizer or length_function"):
        RechunkTextSplitter(chunk_size=400, length_function=len, tokenizer=default_tokenizer_path())


_LINE_BREAKS = st.sampled_from([" ", "  ", "\n", "\r\n", "\r\n\r\n", "\n\n\n", "\t"])


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(
        st.tuples(st.text("abcxyz.,", min_size=1, max_size=12), _LINE_BREAKS),
        min_size=1,
        max_size=120,
    ),
    size=st.integers(30, 160),
    overlap_share=st.sampled_from([0, 0.1, 0.3]),
    policy=st.sampled_from(["structured", "recursive", "fixed"]),
    keep=st.sampled_from([("end", True), ("end", False), (True, False), (False, False)]),
)
def test_len_counts_every_character_of_a_chunk_and_its_overlap(
    words: list[tuple[str, str]], size: int, overlap_share: float, policy: str, keep: Any
) -> None:
    """With ``length_function=len`` a chunk holds at most ``chunk_size`` characters and
    its overlap at most ``chunk_overlap``, whatever whitespace (CRLFs, runs of blank lines)
    lies between the words and wherever ``keep_separator`` puts it, as in LangChain."""
    text = "".join(w + sep for w, sep in words)
    overlap = int(size * overlap_share)
    keep_separator, strip = keep
    splitter = RechunkTextSplitter(
        policy,
        chunk_size=size,
        chunk_overlap=overlap,
        length_function=len,
        keep_separator=keep_separator,
        strip_whitespace=strip,
    )
    docs = splitter.create_documents([text], [{"source": "t"}])
    assert all(len(d.page_content) <= size for d in docs)
    spans = [(d.metadata["start_index"], d.metadata["end_index"]) for d in docs]
    assert all(text[s:e] == d.page_content for (s, e), d in zip(spans, docs))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        lap = text[start:end].strip()
        assert len(lap) <= overlap


def _handbook(topics: list[str]) -> str:
    """A Chinese handbook like the one the overlap bug was found on: each chapter's first
    paragraph is a little longer than a chunk's core at ``chunk_size=200,
    chunk_overlap=40``, so its last sentence (30 characters) is cut off on its own."""
    chapters = []
    for n, topic in enumerate(topics, 1):
        chapters.append(
            f"## 第{n}章 {topic}\n\n"
            f"本章说明{topic}的日常流程，适用于所有生产环境的服务器。每周一上午十点，值班工程师需要"
            f"检查{topic}相关的告警记录，并把结果写入共享表格。如果发现异常，请先在工作群里通知负责人，"
            f"再按照第{n}节的步骤处理。所有操作都必须留下记录，包括执行人、时间、命令和结果，以便日后审计。"
            f"对于{topic}配置的任何修改，都要先在测试环境验证至少二十四小时。\n\n"
            f"第{n}章的常见问题包括：磁盘空间不足、进程意外退出、证书过期以及配置文件格式错误。"
            "遇到磁盘空间不足时，可以先清理七天以前的临时文件，然后再观察使用率是否下降。"
            "如果问题在三十分钟内没有解决，请升级给二线支持团队，并附上完整的排查过程。"
            "我们鼓励大家在事后写一份简短的复盘报告，说明原因、影响范围和改进措施。"
        )
    return "# 运维手册\n\n" + "\n\n".join(chapters) + "\n"


#: (text, chunk_size, chunk_overlap) on which a chunk used to lie wholly inside the next:
#: a short core (a sentence's tail; a chunk shorter than the overlap) was emitted, then
#: the next chunk's overlap took all of it
_SHORT_CORES = {
    "zh": (_handbook(["备份", "监控", "发布", "权限", "日志", "容量", "网络", "安全"]), 200, 40),
    "en": (
        "\n\n".join(
            f"Short one {n}. " + "A longer sentence about backups and restores follows. " * 3
            for n in range(6)
        ),
        120,
        60,
    ),
}


def _chars(text: str) -> list[str]:
    """A LlamaIndex tokenizer whose tokens are characters (``chunk_size`` counts like ``len``)."""
    return list(text)


def _framework_chunks(
    framework: str,
    text: str,
    size: int,
    overlap: int,
    policy: str = "structured",
    keep: Any = ("end", True),
) -> list[tuple[int, int, int, int]]:
    """``(start, end, tile start, tile end)`` of each chunk the framework adapter returns,
    with the size counted in characters; checks that each chunk's text is its slice."""
    if framework == "langchain":
        splitter = RechunkTextSplitter(
            policy,
            chunk_size=size,
            chunk_overlap=overlap,
            length_function=len,
            keep_separator=keep[0],
            strip_whitespace=keep[1],
        )
        docs = splitter.create_documents([text], [{"source": "t"}])
        found = [(d.page_content, d.metadata) for d in docs]
        spans = [(m["start_index"], m["end_index"]) for _, m in found]
    else:
        parser = RechunkNodeParser(
            policy, chunk_size=size, chunk_overlap=overlap, tokenizer=_chars, embed_metadata=False
        )
        nodes = parser.get_nodes_from_documents([LlamaDocument(text=text, id_="t")])
        found = [(n.text, n.metadata) for n in nodes]
        spans = [(n.start_char_idx, n.end_char_idx) for n in nodes]
    assert all(text[s:e] == chunk for (s, e), (chunk, _) in zip(spans, found))
    return [(s, e, m["start"], m["end"]) for (s, e), (_, m) in zip(spans, found)]


def _check_overlap_contract(
    text: str, chunks: list[tuple[int, int, int, int]], size: int, overlap: int
) -> None:
    """What LangChain's splitters keep: a chunk is at most ``size`` long, shares at most
    ``overlap`` characters with the next (whitespace at the seam aside), and no chunk lies
    wholly inside a neighbour; the chunker's spans (``start``/``end``) still tile the text."""
    spans = [(s, e) for s, e, _, _ in chunks]
    assert all(e - s <= size for s, e in spans)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert not (s2 <= s1 and e1 <= e2), f"{(s1, e1)} lies inside the next chunk {(s2, e2)}"
        assert not (s1 <= s2 and e2 <= e1), f"{(s2, e2)} lies inside the chunk before {(s1, e1)}"
        assert len(text[s2:e1].strip()) <= overlap
    tiles = [(a, b) for _, _, a, b in chunks]
    assert tiles[0][0] == 0 and tiles[-1][1] == len(text)
    assert all(b1 == a2 for (_, b1), (a2, _) in zip(tiles, tiles[1:]))


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
@pytest.mark.parametrize("sample", sorted(_SHORT_CORES))
def test_a_short_chunk_is_not_repeated_whole_in_the_next(framework: str, sample: str) -> None:
    """The overlap never takes all of the chunk before: the short chunk and the next one are
    one chunk (they fit in ``chunk_size`` together), as in LangChain, whose splitter closes
    a chunk only when the next text does not fit."""
    text, size, overlap = _SHORT_CORES[sample]
    chunks = _framework_chunks(framework, text, size, overlap)
    _check_overlap_contract(text, chunks, size, overlap)
    if sample == "zh":
        # no chunk is added by the overlap: eight 30-character tails were
        assert len(chunks) == len(_framework_chunks(framework, text, size, 0))
    # the stock splitter on the same input keeps the same contract
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    stock = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, length_function=len, add_start_index=True
    ).create_documents([text])
    starts = [d.metadata["start_index"] for d in stock]
    stock_spans = [(s, s + len(d.page_content)) for s, d in zip(starts, stock)]
    assert not any(b[0] <= a[0] and a[1] <= b[1] for a, b in zip(stock_spans, stock_spans[1:]))


_CJK_RUNS = st.text("备份监控发布。，", min_size=1, max_size=40)
_LATIN_WORDS = st.text("abcxyz.,", min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    words=st.lists(
        st.tuples(st.one_of(_LATIN_WORDS, _CJK_RUNS), _LINE_BREAKS),
        min_size=1,
        max_size=60,
    ),
    size=st.integers(20, 160),
    overlap_share=st.sampled_from([0.1, 0.3, 0.6, 0.9]),
    policy=st.sampled_from(["structured", "recursive", "fixed"]),
    keep=st.sampled_from([("end", True), ("end", False), (True, False), (False, False)]),
    framework=st.sampled_from(["langchain", "llamaindex"]),
)
def test_no_chunk_lies_inside_a_neighbour_whatever_the_overlap(
    words: list[tuple[str, str]],
    size: int,
    overlap_share: float,
    policy: str,
    keep: Any,
    framework: str,
) -> None:
    """Short chunks (a chunk shorter than the overlap, a sentence cut off an unspaced
    Chinese run) next to chunks with room to spare: the overlap contract holds in both
    frameworks, wherever ``keep_separator`` puts the whitespace."""
    text = "".join(w + sep for w, sep in words)
    overlap = min(size - 1, int(size * overlap_share))
    if framework == "llamaindex":
        keep = ("end", True)  # SentenceSplitter strips; it has no keep_separator
    chunks = _framework_chunks(framework, text, size, overlap, policy, keep)
    if chunks:
        _check_overlap_contract(text, chunks, size, overlap)


def test_add_start_index_false_leaves_the_offsets_out() -> None:
    docs = RechunkTextSplitter(add_start_index=False).create_documents([GUIDE], [{"source": "g"}])
    assert docs and not any("start_index" in d.metadata or "end_index" in d.metadata for d in docs)
    assert all(rechunk_key_encoder(d) == d.id for d in docs)


@pytest.mark.parametrize(
    ("keep_separator", "joined"),
    [("end", True), (True, True), ("start", True), (False, False)],
)
def test_whitespace_between_chunks_goes_where_keep_separator_says(
    keep_separator: Any, joined: bool
) -> None:
    text = "  " + GUIDE.replace("\n\n", "\n\n\n") + "\n\n"
    splitter = RechunkTextSplitter(
        "fixed", max_tokens=60, strip_whitespace=False, keep_separator=keep_separator
    )
    docs = splitter.create_documents([text], [{"source": "t"}])
    _exact(docs, {"t": text})
    assert ("".join(d.page_content for d in docs) == text) is joined
    if keep_separator in (True, "start"):
        assert all(d.page_content[:1].isspace() for d in docs)
    elif keep_separator == "end":
        assert all(d.page_content[-1:].isspace() for d in docs)
    else:
        assert all(d.page_content == d.page_content.strip() for d in docs)


def test_arguments_that_cannot_be_honoured_say_what_to_use() -> None:
    with pytest.raises(ConfigError, match=r"not whitespace \('\\nclass '\).*framework's own"):
        RechunkTextSplitter(separators=["\nclass ", "\ndef ", "\n\n"])
    with pytest.raises(ConfigError, match="not whitespace"):
        RechunkTextSplitter(separators=[r"(?<=\.) "], is_separator_regex=True)
    with pytest.raises(ConfigError, match="keep_separator"):
        RechunkTextSplitter(keep_separator="middle")
    with pytest.raises(ConfigError, match="is_separator_regex"):
        RechunkTextSplitter(is_separator_regex="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="chunk_overlap=50 must be below chunk_size=50"):
        RechunkTextSplitter(chunk_size=50, chunk_overlap=50)
    with pytest.raises(ConfigError, match="chunk_overlap"):
        RechunkTextSplitter(chunk_size=50, chunk_overlap=-1)
    with pytest.raises(ConfigError, match="secondary_chunking_regex"):
        RechunkNodeParser.from_defaults(secondary_chunking_regex="[^,.;]+[,.;]?")
    with pytest.raises(ConfigError, match="chunking_tokenizer_fn"):
        RechunkNodeParser.from_defaults(chunking_tokenizer_fn=str.split)
    with pytest.raises(ConfigError, match="separator"):
        RechunkNodeParser.from_defaults(separator="|")


def test_from_huggingface_tokenizer_takes_chunk_size() -> None:
    tokenizer = hf_minilm()
    splitter = RechunkTextSplitter.from_huggingface_tokenizer(tokenizer, chunk_size=200)
    docs = splitter.create_documents([GUIDE], [{"source": "g"}])
    assert max(len(tokenizer.tokenize(d.page_content)) for d in docs) <= 200
    overlapping = RechunkTextSplitter.from_huggingface_tokenizer(
        tokenizer, chunk_size=100, chunk_overlap=10, policy="recursive"
    )
    assert max(len(tokenizer.tokenize(t)) for t in overlapping.split_text(GUIDE)) <= 100


def test_from_tiktoken_encoder_takes_chunk_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken downloads its encodings: a word counter stands in for the encoder offline
    monkeypatch.setattr(
        RechunkTextSplitter,
        "_tiktoken_length_function",
        staticmethod(lambda *a, **k: lambda text: len(text.split())),
    )
    splitter = RechunkTextSplitter.from_tiktoken_encoder(
        "cl100k_base", chunk_size=50, chunk_overlap=5
    )
    assert all(len(t.split()) <= 50 for t in splitter.split_text(GUIDE))


def test_node_parser_from_defaults_in_an_ingestion_pipeline() -> None:
    from llama_index.core.embeddings import MockEmbedding

    parser = RechunkNodeParser.from_defaults(chunk_size=120, chunk_overlap=20)
    assert (parser.chunk_size, parser.chunk_overlap) == (120, 20)
    model = CachedEmbedding(MockEmbedding(embed_dim=8), rechunk.MemoryCache())  # no model_id
    pipeline = IngestionPipeline(transformations=[parser, model])
    nodes = pipeline.run(documents=[LlamaDocument(text=GUIDE, id_="guide.md")])
    assert len(nodes) > 5 and all(n.embedding for n in nodes)
    assert all(content_tokens(n.text) <= 120 for n in nodes)
    assert all(GUIDE[n.start_char_idx : n.end_char_idx] == n.text for n in nodes)
    assert sum(b.start_char_idx < a.end_char_idx for a, b in zip(nodes, nodes[1:])) > 0
    # a LlamaIndex tokenizer (str -> list of tokens) counts chunk_size
    words = RechunkNodeParser.from_defaults(chunk_size=60, tokenizer=str.split)
    parsed = words.get_nodes_from_documents([LlamaDocument(text=GUIDE, id_="g")])
    assert max(len(n.text.split()) for n in parsed) <= 60
    # whitespace separators are what rechunk cuts at anyway
    RechunkNodeParser.from_defaults(separator=" ", paragraph_separator="\n\n\n")


def test_node_parser_splits_text_as_sentence_splitter_does() -> None:
    """SentenceSplitter's text methods and its positional from_defaults order."""
    parser = RechunkNodeParser.from_defaults(" ", 120, 12)
    assert (parser.chunk_size, parser.chunk_overlap) == (120, 12)
    chunks = parser.split_text(GUIDE)
    nodes = parser.get_nodes_from_documents([LlamaDocument(text=GUIDE, id_="g")])
    assert chunks == [n.text for n in nodes] and len(chunks) > 5
    assert parser.split_texts([GUIDE, "One more line."]) == [*chunks, "One more line."]
    header = "title: a guide to chunking\nauthor: the rechunk team\n\n" * 3
    aware = parser.split_text_metadata_aware(GUIDE, header)
    assert len(aware) > len(chunks)
    assert max(content_tokens(header + c) for c in aware) <= 120
    assert parser.split_texts_metadata_aware([GUIDE], [header]) == aware
    with pytest.raises(ConfigError, match=r"by keyword; RechunkNodeParser\.from_defaults"):
        RechunkNodeParser(" ", 120)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"separators=\.\.\., chunk_size=\.\.\.\) by keyword"):
        RechunkTextSplitter(["\n\n", "\n", " ", ""])  # type: ignore[arg-type]


def test_a_text_that_cannot_be_cut_is_named() -> None:
    """A NUL byte (PDF extractors leave them) or a lone surrogate: the error names the
    document and its source, so one bad page among thousands can be found."""
    splitter = RechunkTextSplitter()
    docs = [
        Document(page_content=GUIDE),
        Document(page_content="a\x00b", metadata={"source": "p.pdf"}),
    ]
    with pytest.raises(rechunk.InputError, match=r"document 1 \(source 'p.pdf'\): .*NUL.*replace"):
        splitter.split_documents(docs)
    with pytest.raises(rechunk.InputError, match=r"^text 1: .*lone surrogate"):
        splitter.create_documents([GUIDE, "caf\udce9"])
    with pytest.raises(rechunk.InputError, match=r"^node 'n': .*NUL"):
        RechunkNodeParser().get_nodes_from_documents([LlamaDocument(text="a\x00", id_="n")])


def test_a_counter_that_cannot_count_fails_where_it_is_given() -> None:
    with pytest.raises(ConfigError, match="tokenizer cannot count a text"):
        RechunkNodeParser.from_defaults(chunk_size=100, tokenizer=list)
    with pytest.raises(ConfigError, match="length_function failed on a short text: ZeroDivision"):
        RechunkTextSplitter(chunk_size=100, length_function=lambda text: 1 // 0)


def test_node_parser_honours_a_custom_id_func() -> None:
    parser = RechunkNodeParser(id_func=lambda i, doc: f"{doc.id_}#{i}")
    nodes = parser.get_nodes_from_documents([LlamaDocument(text=GUIDE, id_="g")])
    assert [n.id_ for n in nodes] == [f"g#{i}" for i in range(len(nodes))]
    assert nodes[1].relationships[NodeRelationship.PREVIOUS].node_id == "g#0"


# --------------------------------------------------------------------------- 2. windows


def test_default_splitters_fit_the_default_model_window() -> None:
    """On examples/docs and the README, no default chunk is over MiniLM's 256 tokens."""
    splitters: dict[str, Any] = {
        "RechunkTextSplitter()": RechunkTextSplitter(),
        "from_huggingface_tokenizer(MiniLM)": RechunkTextSplitter.from_huggingface_tokenizer(
            hf_minilm()
        ),
    }
    parser = RechunkNodeParser()
    for name, splitter in splitters.items():
        texts = [t for text in CORPUS.values() for t in splitter.split_text(text)]
        assert len(texts) > 20, name
        assert max(map(minilm_tokens, texts)) <= MINILM_WINDOW, name
    nodes = parser.get_nodes_from_documents(
        [LlamaDocument(text=text, id_=name) for name, text in CORPUS.items()]
    )
    assert max(minilm_tokens(n.text) for n in nodes) <= MINILM_WINDOW
    assert parser.chunk_size == RechunkTextSplitter()._chunk_size == MINILM_WINDOW - 2


def test_sizes_over_a_known_window_are_refused_or_warned() -> None:
    for make in (
        lambda: RechunkTextSplitter(chunk_size=300),
        lambda: RechunkTextSplitter.from_huggingface_tokenizer(hf_minilm(), chunk_size=400),
        lambda: RechunkNodeParser.from_defaults(chunk_size=1024),  # SentenceSplitter's default
        lambda: RechunkTextSplitter("fixed", hard_max_tokens=512),
    ):
        with pytest.raises(ConfigError, match="254 content tokens all-MiniLM-L6-v2 reads"):
            make()
    with pytest.warns(WindowWarning, match="hard maximum \\(512 tokens\\)"):
        RechunkTextSplitter(rechunk.StructuredChunker())
    with pytest.warns(WindowWarning):
        RechunkNodeParser(rechunk.FixedChunker(max_tokens=300))
    # a window the splitter cannot know: no check (counted in characters)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RechunkTextSplitter(chunk_size=2000, length_function=len)


# --------------------------------------------------------------------------- 4. metadata embedded


class RecordingEmbedding:
    """A real LlamaIndex BaseEmbedding (deterministic vectors) recording what it embeds."""

    @staticmethod
    def make() -> Any:
        from llama_index.core.bridge.pydantic import PrivateAttr
        from llama_index.core.embeddings import MockEmbedding

        class Recording(MockEmbedding):
            _seen: list[str] = PrivateAttr(default_factory=list)

            def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
                self._seen.extend(texts)
                return [[float(len(t) % 7 + 1), 1.0, float(i)] for i, t in enumerate(texts)]

        return Recording(embed_dim=3)


def _guide(title: str, **extra: Any) -> LlamaDocument:
    return LlamaDocument(
        text=GUIDE,
        id_="guide.md",
        metadata={"title": title, "file_path": "docs/guide.md", **extra},
        excluded_embed_metadata_keys=["file_path"],
    )


def test_llamaindex_embeds_the_metadata_header_its_templates_make() -> None:
    """As SentenceSplitter's nodes: the header of the keys not excluded, then the text; the
    input key covers it, so an unchanged header reuses vectors and a changed title re-embeds."""
    from llama_index.core.schema import MetadataMode

    model = RecordingEmbedding.make()
    cached = CachedEmbedding(model, rechunk.MemoryCache())
    parser = RechunkNodeParser(model_id=cached.model_id)
    pipeline = IngestionPipeline(transformations=[parser, cached])
    nodes = pipeline.run(documents=[_guide("Choosing a policy")])
    for node in nodes:
        embedded = node.get_content(MetadataMode.EMBED)
        assert embedded == f"title: Choosing a policy\n\n{node.text}"  # file_path excluded
        assert node.metadata["input_key"] == rechunk.input_key(cached.model_id, embedded)
        assert "input_key" not in embedded and "policy:" not in embedded  # never embedded
        assert minilm_tokens(embedded) <= MINILM_WINDOW  # the header fits in the window too
    # the model check's REFERENCE (recorded in the new cache) first, then every input
    inputs = sorted(n.get_content(MetadataMode.EMBED) for n in nodes)
    assert model._seen[0] == REFERENCE and sorted(model._seen[1:]) == inputs
    model._seen.clear()
    again = pipeline.run(documents=[_guide("Choosing a policy", file_path="elsewhere.md")])
    assert model._seen == []  # header unchanged (file_path is excluded): every vector reused
    assert [n.id_ for n in again] == [n.id_ for n in nodes]
    retitled = pipeline.run(documents=[_guide("Choosing a chunking policy")])
    # a new title is in every input: all re-embedded, after the model check's REFERENCE
    assert model._seen[0] == REFERENCE
    assert sorted(model._seen[1:]) == sorted(n.get_content(MetadataMode.EMBED) for n in retitled)
    assert not {n.id_ for n in retitled} & {n.id_ for n in nodes}


@pytest.mark.parametrize("chunk_size, chunk_overlap", [(254, 50), (100, 30), (200, 90)])
def test_header_text_and_overlap_fit_chunk_size_together(chunk_size: int, chunk_overlap: int) -> None:
    """A chunk's overlap is part of what is embedded after the header: header, overlap
    and text together stay within ``chunk_size`` (with no overlap this held already)."""
    doc = LlamaDocument(
        text=GUIDE * 2,
        id_="guide.md",
        metadata={"title": "A fairly long document title for the header", "kind": "guide"},
    )
    parser = RechunkNodeParser(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    nodes = parser.get_nodes_from_documents([doc])
    embedded = [n.get_content("embed") for n in nodes]
    assert all(e.startswith("title: A fairly") for e in embedded)
    assert max(map(content_tokens, embedded)) <= chunk_size


def test_llamaindex_templates_are_the_users() -> None:
    from llama_index.core.schema import MetadataMode

    doc = LlamaDocument(
        text=GUIDE,
        id_="g",
        metadata={"title": "T", "lang": "en"},
        metadata_template="<{key}|{value}>",
        metadata_separator=" ",
        text_template="{metadata_str}\n---\n{content}",
    )
    nodes = RechunkNodeParser().get_nodes_from_documents([doc])
    assert all(
        n.get_content(MetadataMode.EMBED) == f"<title|T> <lang|en>\n---\n{n.text}" for n in nodes
    )


def test_bare_text_is_an_option() -> None:
    from llama_index.core.schema import MetadataMode

    model = RecordingEmbedding.make()
    cached = CachedEmbedding(model, rechunk.MemoryCache())
    parser = RechunkNodeParser(model_id=cached.model_id, embed_metadata=False)
    pipeline = IngestionPipeline(transformations=[parser, cached])
    nodes = pipeline.run(documents=[_guide("Choosing a policy")])
    assert all(n.get_content(MetadataMode.EMBED) == n.text for n in nodes)
    assert all(n.metadata["title"] == "Choosing a policy" for n in nodes)  # kept, not embedded
    assert "title: Choosing a policy" in nodes[0].get_content(MetadataMode.LLM)
    model._seen.clear()
    pipeline.run(documents=[_guide("Choosing a chunking policy")])
    assert model._seen == []  # a new title changes no input
    assert RechunkNodeParser.from_dict(parser.to_dict()).embed_metadata is False


# --------------------------------------------------------------------------- 5. metadata values


def test_metadata_the_stock_splitter_takes_goes_through_index() -> None:
    """A datetime, a Path or int source, an int key: accepted, passed on unchanged, keyed by
    the meta-v1 rule, so a second index() of the same documents skips every chunk."""
    import datetime

    metadatas = [
        {"source": Path("docs/guide.md"), "modified": datetime.datetime(2024, 5, 1, 12, 0)},
        {"source": 7, 3: "an int key", "day": datetime.date(2024, 5, 2)},
    ]
    splitter = RechunkTextSplitter("recursive", chunk_size=120)
    docs = splitter.create_documents([GUIDE, CORPUS["sync-guide.md"]], metadatas)
    assert {d.metadata["doc_id"] for d in docs} == {"docs/guide.md", "7"}
    assert isinstance(docs[0].metadata["modified"], datetime.datetime)  # unchanged
    model = FakeEmbeddings()
    store = InMemoryVectorStore(embedding=CachedEmbeddings(model, rechunk.MemoryCache()))
    manager = InMemoryRecordManager(namespace="meta")
    manager.create_schema()
    first = index(docs, manager, store, cleanup="incremental", source_id_key="source",
                  key_encoder=rechunk_key_encoder)  # fmt: skip
    assert first["num_added"] == len(docs)
    again = splitter.create_documents([GUIDE, CORPUS["sync-guide.md"]], metadatas)
    second = index(again, manager, store, cleanup="incremental", source_id_key="source",
                   key_encoder=rechunk_key_encoder)  # fmt: skip
    assert second["num_skipped"] == len(docs) and second["num_added"] == 0
    touched = [{**metadatas[0], "modified": datetime.datetime(2024, 6, 1)}, metadatas[1]]
    third = splitter.create_documents([GUIDE, CORPUS["sync-guide.md"]], touched)
    n_guide = sum(d.metadata["doc_id"] == "docs/guide.md" for d in third)
    result = index(third, manager, store, cleanup="incremental", source_id_key="source",
                   key_encoder=rechunk_key_encoder)  # fmt: skip
    assert result["num_added"] == n_guide  # the changed date reaches the store ...
    # ... with every vector from the cache: the model embedded each chunk once, in the
    # first index(), after the model check's REFERENCE (recorded in the new cache)
    assert [t for call in model.calls for t in call] == [REFERENCE, *(d.page_content for d in docs)]


def test_llamaindex_metadata_values_are_keyed_as_embedded() -> None:
    import datetime

    from llama_index.core.schema import MetadataMode

    parser = RechunkNodeParser()
    doc = LlamaDocument(text=GUIDE, id_="g", metadata={"modified": datetime.date(2024, 5, 1)})
    nodes = parser.get_nodes_from_documents([doc])
    again = parser.get_nodes_from_documents([doc.model_copy(deep=True)])
    assert [n.id_ for n in nodes] == [n.id_ for n in again]
    assert nodes[0].get_content(MetadataMode.EMBED).startswith("modified: 2024-05-01\n\n")


# --------------------------------------------------------------------------- 6. offsets


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_offsets_slice_the_source_exactly_in_both_frameworks(newline: str) -> None:
    text = ("  " + GUIDE.replace("\n", newline) + newline * 3).replace(
        "rechunk", "re\u00a0chunk", 2
    )
    splitter = RechunkTextSplitter(chunk_size=100)
    docs = splitter.split_documents([Document(page_content=text, metadata={"source": "g"})])
    assert len(docs) > 5
    _exact(docs, {"g": text})
    assert all(d.page_content == d.page_content.strip() for d in docs)
    if newline == "\r\n":
        assert sum("\r\n" in d.page_content for d in docs) > 3  # the source's own line breaks
    overlapping = RechunkTextSplitter(chunk_size=100, chunk_overlap=15)
    _exact(overlapping.create_documents([text], [{"source": "g"}]), {"g": text})
    pipeline = IngestionPipeline(transformations=[RechunkNodeParser.from_defaults(chunk_size=100)])
    nodes = pipeline.run(documents=[LlamaDocument(text=text, id_="g")])
    assert len(nodes) > 5
    assert all(text[n.start_char_idx : n.end_char_idx] == n.text for n in nodes)


# --------------------------------------------------------------------------- 7. foreign points


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_points_another_tool_wrote_never_break_query_status_or_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """langchain_qdrant.add_documents into the collection `rechunk sync` keeps: the CLI's
    query, status and sync still work, report the other points and leave them alone."""
    import json
    import shutil

    pytest.importorskip("langchain_qdrant")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from rechunk.adapters._layout import ForeignPointsWarning
    from rechunk.cli import main

    shutil.copytree(ROOT / "examples" / "docs", tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    assert main(["sync", "docs", "--json"]) == 0
    capsys.readouterr()
    client = QdrantClient(path=".rechunk/qdrant")
    collection = client.get_aliases().aliases[0].collection_name
    other = QdrantVectorStore(
        client=client, collection_name=collection, embedding=DeterministicFakeEmbedding(size=384)
    )
    foreign_ids = other.add_documents(
        [
            Document(page_content="a note another tool wrote", metadata={"source": "x.md"}),
            # the same doc_id as a synced document: sync reads it, and must leave it alone
            Document(
                page_content="its own chunk of the guide", metadata={"doc_id": "sync-guide.md"}
            ),
        ]
    )
    client.close()

    def run(*args: str) -> tuple[int, Any]:
        with pytest.warns(ForeignPointsWarning, match="did not write and left it alone"):
            code = main([*args, "--json"])
        out = capsys.readouterr().out
        return code, json.loads(out)

    code, status = run("status")
    assert code == 0 and status["documents"] == 4 and status["other_points"] == 2
    assert status["stale_check"] == "passed"
    # query: the foreign point nearest to the query vector is skipped, not an error
    code, hits = run("query", "its own chunk of the guide", "-k", "40")
    assert code == 0 and hits and all(hit["doc_id"] in CORPUS for hit in hits)
    guide = tmp_path / "docs" / "sync-guide.md"
    guide.write_text(guide.read_text() + "\n\nA closing paragraph added later.\n")
    code, report = run("sync", "docs")
    assert code == 0 and report["documents"]["changed"] == 1 and report["stale_check"] == "passed"
    client = QdrantClient(path=".rechunk/qdrant")
    left = client.retrieve(collection, foreign_ids, with_payload=True)
    client.close()
    assert sorted(str(p.id) for p in left) == sorted(str(uuid.UUID(i)) for i in foreign_ids)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_status_reads_a_collection_index_wrote_after_an_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented swap, then an edit: index() keeps the record it first wrote for each
    chunk it skips, old revision and all, so the edited document holds chunks of two
    revisions. status says why and passes its stale check (it failed, exit 3, with advice
    to sync again that no index() run could follow)."""
    import json

    pytest.importorskip("langchain_qdrant")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import models

    from rechunk.adapters.qdrant import local_client
    from rechunk.cli import main

    monkeypatch.chdir(tmp_path)
    embeddings = CachedEmbeddings(DeterministicFakeEmbedding(size=384), rechunk.MemoryCache())
    splitter = RechunkTextSplitter(chunk_size=120, model_id=embeddings.model_id)
    records = InMemoryRecordManager("docs")
    records.create_schema()
    client = local_client(tmp_path / "q")
    client.create_collection("docs", models.VectorParams(size=384, distance=models.Distance.COSINE))
    client.close()
    for text in (GUIDE, GUIDE + "\n\nA closing paragraph added later.\n"):
        client = local_client(tmp_path / "q")
        store = QdrantVectorStore(client=client, collection_name="docs", embedding=embeddings)
        docs = splitter.split_documents([Document(page_content=text, metadata={"source": "g"})])
        index(docs, records, store, cleanup="incremental", source_id_key="source",
              key_encoder=rechunk_key_encoder)  # fmt: skip
        client.close()
    assert main(["status", "--store", "qdrant:q", "--collection", "docs", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert len(status["revisions"]["g"]) == 2  # the skipped chunks kept the first revision
    assert status["stale_check"] == "passed" and status["index_documents"] == 1


# --------------------------------------------------------------------------- 9. LlamaIndex details


def word_tokens(text: str) -> list[str]:
    """A LlamaIndex-style tokenizer (text -> tokens), module-level so that it pickles."""
    return text.split()


def test_chunking_callback_event_as_the_stock_parser_emits() -> None:
    from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler

    debug = LlamaDebugHandler()
    parser = RechunkNodeParser(callback_manager=CallbackManager([debug]))
    nodes = parser.get_nodes_from_documents([LlamaDocument(text=GUIDE, id_="g")])
    pairs = debug.get_event_pairs(CBEventType.CHUNKING)
    assert len(pairs) == 1
    assert pairs[0][1].payload["chunks"] == [n.text for n in nodes]
    assert debug.get_event_pairs(CBEventType.NODE_PARSING)


def test_from_dict_with_a_custom_tokenizer() -> None:
    import pickle

    parser = RechunkNodeParser.from_defaults(chunk_size=60, chunk_overlap=6, tokenizer=word_tokens)
    data = parser.to_dict()
    assert data["tokenizer_id"] == f"callable:{__name__}.word_tokens+whitespace"
    with pytest.raises(ConfigError, match=r"from_dict\(data, tokenizer=\.\.\.\)"):
        RechunkNodeParser.from_dict(data)
    again = RechunkNodeParser.from_dict(data, tokenizer=word_tokens)
    assert (again.policy_id, again.chunk_size, again.chunk_overlap) == (parser.policy_id, 60, 6)
    doc = LlamaDocument(text=GUIDE, id_="g")
    ids = [n.id_ for n in parser.get_nodes_from_documents([doc])]
    assert [n.id_ for n in again.get_nodes_from_documents([doc])] == ids
    assert [
        n.id_ for n in pickle.loads(pickle.dumps(parser)).get_nodes_from_documents([doc])
    ] == ids
    json_again = RechunkNodeParser.from_json(parser.to_json(), tokenizer=word_tokens)
    assert json_again.policy_id == parser.policy_id


def test_node_ids_are_stable_when_chained_after_another_parser() -> None:
    """MarkdownNodeParser gives its nodes random ids; rechunk's nodes key on the document."""
    from llama_index.core.node_parser import MarkdownNodeParser

    def run() -> list[Any]:
        pipeline = IngestionPipeline(
            transformations=[MarkdownNodeParser(), RechunkNodeParser.from_defaults(chunk_size=80)]
        )
        return pipeline.run(documents=[LlamaDocument(text=GUIDE, id_="guide.md")])

    first, second = run(), run()
    assert len(first) > 5
    assert [n.id_ for n in first] == [n.id_ for n in second]
    assert {n.ref_doc_id for n in first} == {"guide.md"}
    assert len({n.id_ for n in first}) == len(first)
    for before, after in zip(first, first[1:]):
        assert after.prev_node.node_id == before.id_ and before.next_node.node_id == after.id_


# --------------------------------------------------------------------------- 8. one schema


class HashEmbedder:
    """A deterministic rechunk Embedder (8 dimensions) for schema tests: no model needed."""

    model_id = "hash-8"
    dimension = 8
    max_input_tokens = None

    def embed(self, texts: Any) -> Any:
        import numpy as np

        rows = [np.random.default_rng(len(t) * 7919 + sum(map(ord, t))).random(8) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), 8)


class HashEmbeddings(FakeEmbeddings):
    """The same vectors as a LangChain Embeddings."""

    def vector(self, text: str) -> list[float]:
        return [float(x) for x in HashEmbedder().embed([text])[0]]


def _guide_chunker() -> Any:
    return RechunkTextSplitter(model_id=HashEmbedder.model_id).chunker


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_langchain_layout_one_schema_whichever_path_wrote_it() -> None:
    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    from rechunk.adapters._layout import ForeignPointsWarning
    from rechunk.adapters.qdrant import QdrantStore

    client = QdrantClient(":memory:")
    synced = QdrantStore(client, "synced", "langchain")
    synced.ensure_collection(8)
    rechunk.sync(
        [rechunk.Document("guide.md", GUIDE)], synced, chunker=_guide_chunker(),
        embedder=HashEmbedder(),
    )  # fmt: skip
    client.create_collection(
        "indexed", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
    )
    embeddings = CachedEmbeddings(HashEmbeddings(), rechunk.MemoryCache(), model_id="hash-8")
    store = QdrantVectorStore(client=client, collection_name="indexed", embedding=embeddings)
    splitter = RechunkTextSplitter(model_id="hash-8")
    docs = splitter.split_documents([Document(page_content=GUIDE, metadata={"source": "guide.md"})])
    manager = InMemoryRecordManager(namespace="schema")
    manager.create_schema()
    index(docs, manager, store, cleanup="incremental", source_id_key="source",
          key_encoder=rechunk_key_encoder)  # fmt: skip

    def metadata(collection: str) -> dict[str, dict[str, Any]]:
        points = client.scroll(collection, limit=1000, with_payload=True)[0]
        return {p.payload["metadata"]["input_key"]: p.payload["metadata"] for p in points}  # type: ignore[index]

    by_sync, by_index = metadata("synced"), metadata("indexed")
    assert by_sync.keys() == by_index.keys()  # the same inputs, the same keys
    extras = ("source", "occurrence", "start_index", "end_index")
    for key, written in by_index.items():
        # the same fields, the same values; index() adds the user's source, the ids'
        # occurrence and LangChain's start_index/end_index (the exact page_content slice)
        assert {k: v for k, v in written.items() if k not in extras} == by_sync[key]
        start, end = written["start_index"], written["end_index"]
        assert written["start"] <= start < end <= written["end"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForeignPointsWarning)  # rechunk reads both as its own
        read = QdrantStore(client, "indexed", "langchain").get_points("guide.md")
    assert sorted(p.payload.text for p in read) == sorted(d.page_content for d in docs)
    assert set(read[0].payload.metadata) == {"source", "occurrence", "start_index", "end_index"}


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_llamaindex_layout_one_schema_whichever_path_wrote_it() -> None:
    import json

    pytest.importorskip("llama_index.vector_stores.qdrant")
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from rechunk.adapters._layout import ForeignPointsWarning
    from rechunk.adapters.qdrant import QdrantStore

    client = QdrantClient(":memory:")
    synced = QdrantStore(client, "synced", "llamaindex")
    synced.ensure_collection(8)
    rechunk.sync(
        [rechunk.Document("guide.md", GUIDE)], synced, chunker=_guide_chunker(),
        embedder=HashEmbedder(),
    )  # fmt: skip
    from llama_index.core.embeddings import MockEmbedding

    pipeline = IngestionPipeline(
        transformations=[
            RechunkNodeParser(model_id="hash-8"),
            CachedEmbedding(MockEmbedding(embed_dim=8), rechunk.MemoryCache(), model_id="hash-8"),
        ],
        vector_store=QdrantVectorStore(client=client, collection_name="indexed"),
    )
    nodes = pipeline.run(documents=[LlamaDocument(text=GUIDE, id_="guide.md")])

    def payloads(collection: str) -> dict[str, dict[str, Any]]:
        points = client.scroll(collection, limit=1000, with_payload=True)[0]
        return {p.payload["input_key"]: dict(p.payload) for p in points}  # type: ignore[index]

    by_sync, by_index = payloads("synced"), payloads("indexed")
    assert by_sync.keys() == by_index.keys() and len(by_index) == len(nodes)
    for key, written in by_index.items():
        mine = json.loads(written.pop("_node_content"))
        theirs = json.loads(by_sync[key].pop("_node_content"))
        assert {k: v for k, v in written.items() if k != "occurrence"} == by_sync[key]
        assert mine["text"] == theirs["text"]
        # sync's node spans are the tiles; the parser's the exact slice of node.text
        assert theirs["start_char_idx"] <= mine["start_char_idx"]
        assert mine["end_char_idx"] <= theirs["end_char_idx"]
        assert set(theirs["excluded_embed_metadata_keys"]) <= set(
            mine["excluded_embed_metadata_keys"]
        )
        assert "1" in mine["relationships"] and "1" in theirs["relationships"]  # SOURCE
        # PREVIOUS ("2") and NEXT ("3"): the same neighbours, whichever path wrote them
        assert {r: v["node_id"] for r, v in mine["relationships"].items() if r in "23"} == {
            r: v["node_id"] for r, v in theirs["relationships"].items() if r in "23"
        }
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForeignPointsWarning)
        read = QdrantStore(client, "indexed", "llamaindex").get_points("guide.md")
    assert [p.payload.text for p in read] == [n.text for n in nodes]
    # LlamaIndex readers follow PREVIOUS / NEXT from what the parser wrote
    first = json.loads(payloads("indexed")[nodes[1].metadata["input_key"]]["_node_content"])
    assert first["relationships"]["2"]["node_id"] == nodes[0].id_  # PREVIOUS
    assert first["relationships"]["3"]["node_id"] == nodes[2].id_  # NEXT


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
def test_page_content_changed_after_the_splitter_keyed_it_is_embedded_again() -> None:
    """A LangChain pipeline that changes ``page_content`` after ``RechunkTextSplitter``
    keyed it (a title put before each chunk) stores vectors of the new text under the
    old key: a sync neither keeps them nor hands them to another document."""
    import numpy as np

    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    from rechunk.adapters.qdrant import QdrantStore

    client = QdrantClient(":memory:")
    client.create_collection(
        "kb", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
    )
    embeddings = CachedEmbeddings(HashEmbeddings(), rechunk.MemoryCache(), model_id="hash-8")
    vectorstore = QdrantVectorStore(client=client, collection_name="kb", embedding=embeddings)
    docs = RechunkTextSplitter(model_id="hash-8").split_documents(
        [Document(page_content=GUIDE, metadata={"source": "guide.md"})]
    )
    for doc in docs:
        doc.page_content = "Chunking guide\n\n" + doc.page_content
    manager = InMemoryRecordManager(namespace="titled")
    manager.create_schema()
    index(docs, manager, vectorstore, cleanup="incremental", source_id_key="source",
          key_encoder=rechunk_key_encoder)  # fmt: skip
    store, embedder = QdrantStore(client, "kb", "langchain"), HashEmbedder()

    def sync(doc_id: str) -> Any:
        doc = rechunk.Document(doc_id, GUIDE)
        return rechunk.sync([doc], store, chunker=_guide_chunker(), embedder=embedder)

    copy = sync("copy.md")
    assert copy.inputs["from_store"] == 0 and copy.inputs["embedded"] == len(docs)
    again = sync("guide.md")
    assert again.chunks["updated"] == 0 and again.chunks["added"] == len(docs)
    vectors = _vectors_by_id(store)
    for doc_id in ("guide.md", "copy.md"):
        for point in store.get_points(doc_id):
            (expected,) = embedder.embed([point.payload.text])
            np.testing.assert_allclose(
                vectors[point.id], expected / np.linalg.norm(expected), rtol=1e-5, atol=1e-6
            )


def _llamaindex_reader(backend: str, tmp_path: Path) -> tuple[Any, Any]:
    """A rechunk store in the llamaindex layout and LlamaIndex's own vector store on the
    same collection: embedded Qdrant or embedded Chroma."""
    name = "guide"
    if backend == "qdrant":
        pytest.importorskip("llama_index.vector_stores.qdrant")
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient

        from rechunk.adapters.qdrant import QdrantStore

        client = QdrantClient(":memory:")
        store: Any = QdrantStore(client, name, "llamaindex")
        store.ensure_collection(8)
        return store, QdrantVectorStore(collection_name=name, client=client)
    pytest.importorskip("llama_index.vector_stores.chroma")
    import chromadb
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from rechunk.adapters.chroma import ChromaStore

    chroma = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    store = ChromaStore(chroma, name, "llamaindex")
    store.ensure_collection(8)
    reader = ChromaVectorStore(chroma_collection=chroma.get_collection(name))
    return store, reader


def _walk(reader: Any, first: str) -> list[Any]:
    """The document's nodes as a LlamaIndex reader finds them: from ``first``, following
    each node's NEXT (and checking that PREVIOUS leads back)."""
    nodes = reader.get_nodes(node_ids=[first])
    assert nodes[0].prev_node is None
    while nodes[-1].next_node is not None:
        (after,) = reader.get_nodes(node_ids=[nodes[-1].next_node.node_id])
        assert after.prev_node is not None and after.prev_node.node_id == nodes[-1].node_id
        nodes.append(after)
        assert len(nodes) < 1000
    return nodes


def _vectors_by_id(store: Any) -> dict[str, Any]:
    """Every point's vector, read from the store's client as it holds it."""
    import numpy as np

    if hasattr(store.client, "retrieve"):  # Qdrant
        points = store.client.scroll(store.collection, limit=1000, with_vectors=True)[0]
        return {
            str(p.id): np.asarray(next(iter(p.vector.values())) if isinstance(p.vector, dict)
                                  else p.vector)
            for p in points
        }
    held = store.client.get_collection(store.collection).get(include=["embeddings"])
    return {i: np.asarray(v) for i, v in zip(held["ids"], held["embeddings"])}


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
@pytest.mark.parametrize("backend", ["qdrant", "chroma"])
def test_a_vector_embedded_from_another_string_than_its_key_is_never_reused(
    backend: str, tmp_path: Path
) -> None:
    """An extractor run after ``RechunkNodeParser`` adds metadata to what LlamaIndex
    embeds after the parser keyed each node: the points say ``input_key`` of the bare
    text, their vectors are of a title and the text. A sync neither keeps those vectors
    (a payload-only update) nor hands them to another document of the same text: every
    vector the collection holds afterwards is of its point's text. Points whose vector is
    of their key are still reused."""
    import numpy as np
    from llama_index.core.extractors import TitleExtractor
    from llama_index.core.llms import MockLLM

    from rechunk.adapters.llamaindex_embedding import RechunkEmbedding

    store, reader = _llamaindex_reader(backend, tmp_path)
    embedder = HashEmbedder()

    def pipeline(*extra: Any) -> Any:
        return IngestionPipeline(
            transformations=[
                RechunkNodeParser(model_id=embedder.model_id, embed_metadata=False),
                *extra,
                CachedEmbedding(RechunkEmbedding(embedder), rechunk.MemoryCache()),
            ],
            vector_store=reader,
        )

    titled = pipeline(TitleExtractor(llm=MockLLM(max_tokens=5), nodes=2))
    nodes = titled.run(documents=[LlamaDocument(text=GUIDE, id_="guide.md")])
    assert all(n.get_content("embed") != n.text for n in nodes)  # the title is embedded

    def sync(doc_id: str, text: str = GUIDE) -> Any:
        doc = rechunk.Document(doc_id, text)
        return rechunk.sync([doc], store, chunker=_guide_chunker(), embedder=embedder)

    copy = sync("copy.md")  # the same text: its keys are those the pipeline's points name
    assert copy.inputs["from_store"] == 0 and copy.inputs["embedded"] == len(nodes)
    again = sync("guide.md")
    assert again.chunks["updated"] == 0 and again.chunks["added"] == len(nodes)
    assert again.inputs["embedded"] == 0  # copy.md's vectors are of these keys
    pipeline().run(documents=[LlamaDocument(text=CORPUS["README.md"], id_="readme.md")])
    honest = sync("readme.md", CORPUS["README.md"])
    assert honest.inputs["embedded"] == 0 and honest.chunks["added"] == 0
    vectors = _vectors_by_id(store)
    for doc_id in ("guide.md", "copy.md", "readme.md"):
        for point in store.get_points(doc_id):
            (expected,) = embedder.embed([point.payload.text])
            held = vectors[point.id]
            cosine = held @ expected / np.linalg.norm(held) / np.linalg.norm(expected)
            assert cosine > 0.9999, (doc_id, point.payload.ordinal)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
@pytest.mark.parametrize("backend", ["qdrant", "chroma"])
def test_llamaindex_readers_follow_previous_and_next_of_synced_points(
    backend: str, tmp_path: Path
) -> None:
    store, reader = _llamaindex_reader(backend, tmp_path)
    chunker, embedder = _guide_chunker(), HashEmbedder()

    def synced(text: str) -> tuple[rechunk.SyncReport, list[Any]]:
        report = rechunk.sync(
            [rechunk.Document("guide.md", text)], store, chunker=chunker, embedder=embedder
        )
        points = store.get_points("guide.md")
        nodes = _walk(reader, points[0].id)
        # the chain is the document's chunks in order, each node what rechunk stored
        assert [n.node_id for n in nodes] == [p.id for p in points]
        assert [n.text for n in nodes] == [p.payload.text for p in points]
        assert all(n.source_node.node_id == "guide.md" for n in nodes)
        return report, nodes

    report, before = synced(GUIDE)
    assert len(before) >= 4 and report.chunks["added"] == len(before)
    # a paragraph inserted in the middle: the neighbours of the new chunks are rewritten
    # (payload only), nothing else is embedded again
    at = GUIDE.index("## Sizing chunks")
    edited = GUIDE[:at] + "A paragraph the project wrote for this test.\n\n" + GUIDE[at:]
    report, after = synced(edited)
    assert report.documents["changed"] == 1 and report.inputs["embedded"] <= 2
    assert {n.node_id for n in after} - {n.node_id for n in before}
    # an unchanged re-sync writes nothing: the stored relationships compare equal
    report, again = synced(edited)
    assert report.documents["unchanged"] == 1 and report.chunks["updated"] == 0
    assert [n.node_id for n in again] == [n.node_id for n in after]


@pytest.mark.parametrize(
    ("swapped", "arguments", "says"),
    [
        ("TokenTextSplitter", {"backup_separators": ["\n"]}, "cuts between words"),
        ("TokenTextSplitter", {"keep_whitespaces": True}, "exact slice"),
        ("CodeSplitter", {"chunk_lines": 40}, "in tokens, not lines"),
        ("CodeSplitter", {"max_chars": 1500}, "in tokens, not lines"),
        ("CodeSplitter", {"language": "python"}, "pass policy='code'"),
        ("SentenceSplitter", {"secondary_chunking_regex": "[.]"}, "sentence ends"),
        ("SentenceSplitter", {"chunking_tokenizer_fn": str.split}, "sentence ends"),
    ],
)
def test_another_splitter_s_arguments_say_what_to_use(
    swapped: str, arguments: dict[str, Any], says: str
) -> None:
    """A drop-in user kept their TokenTextSplitter's or CodeSplitter's arguments: the error
    was "bad parameters for the 'structured' chunker: ... unexpected keyword argument",
    which named nothing to use instead."""
    for make in (RechunkNodeParser, RechunkNodeParser.from_defaults, RechunkTextSplitter):
        with pytest.raises(ConfigError, match=says):
            make(chunk_size=120, **arguments)
    assert RechunkNodeParser(policy="code", language="python", chunk_size=120)


def test_metadata_keys_rechunk_replaces_are_named() -> None:
    """A CRM's ``doc_id`` and a transcript's ``start`` in seconds were replaced by
    rechunk's fields in every chunk, with no word: both adapters now warn, naming them."""
    meta = {"source": "call.txt", "doc_id": "CRM-42", "start": 12.5, "title": "Call"}
    text = "The caller asked about the invoice. " * 10
    for split in (
        lambda m: RechunkTextSplitter().split_documents([Document(page_content=text, metadata=m)]),
        lambda m: RechunkNodeParser().get_nodes_from_documents([LlamaDocument(text=text, metadata=m)]),
    ):
        with pytest.warns(UserWarning, match=r"metadata key\(s\) doc_id, start of the documents"):
            split(meta)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            split({"source": "call.txt", "title": "Call"})
