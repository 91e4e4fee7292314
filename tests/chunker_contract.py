"""The contract every chunker must pass (subclass it and provide ``make``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rechunk import Chunk, InputError, embedding_input
from rechunk.chunking.tokens import resolve_tokenizer

# Text that exercises every boundary rule: Latin prose, Markdown structure, CJK runs,
# full-width punctuation, odd whitespace, long unspaced runs.
ALPHABET = st.sampled_from(
    [*"abcdefghij", "word ", "Word. ", "end! ", "why? ", " ", "  ", "\n", "\n\n", "\t", "\r\n",
     "\u00a0", "\u3000", "# ", "- ", "1. ", "中", "文", "字", "。", "，", "！", "？", "」",
     "ü", "é", "😀", "https://example.org/a/b?c=d ", "-->", "`", "|", "\u200d"]
)
TEXTS = st.lists(ALPHABET, max_size=400).map("".join)
LONG_TEXTS = st.lists(ALPHABET, min_size=300, max_size=2500).map("".join)
# the same, with long runs of characters that are several tokens each
HEAVY_TEXTS = st.lists(
    st.one_of(ALPHABET, st.sampled_from(["中文" * 40, "😀" * 30, "😀😀😀 ", "字。" * 25])),
    min_size=50,
    max_size=600,
).map("".join)
_HEAVY_CHAR = re.compile("[\u3001-\u9fff\uff00-\uffef\U0001f000-\U0001faff]")


def heavy_tokens(text: str) -> int:
    """3 tokens per CJK character or emoji, 1 per other word (tiktoken on CJK, roughly)."""
    return 3 * len(_HEAVY_CHAR.findall(text)) + len(_HEAVY_CHAR.sub(" ", text).split())


def utf8_tokens(text: str) -> int:
    """One token per UTF-8 byte, whitespace included: 1-4 per character, not additive."""
    return len(text.encode("utf-8"))


def exact_tokens(text: str) -> int:
    counter = resolve_tokenizer(None)
    return counter.count_many([text])[0]


def check_tiles(text: str, chunks: list[Chunk]) -> None:
    if not text.strip():
        assert chunks == []
        return
    assert chunks[0].start == 0
    assert chunks[-1].end == len(text)
    for a, b in zip(chunks, chunks[1:]):
        assert a.end == b.start
        assert a.start < a.end
    for c in chunks:
        assert c.text == embedding_input(text[c.start : c.end])
        assert c.text, "every chunk holds some non-whitespace text"


class ChunkerContract:
    """Shared behaviour of FixedChunker, RecursiveChunker and CDCChunker."""

    #: the largest number of tokens a chunk may hold with default parameters
    window: int

    def make(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    # -- tiling, determinism, sizes ------------------------------------------------------

    @pytest.mark.parametrize("text", ["", " ", "\n\n\t ", "\u3000\u00a0"])
    def test_blank_text_gives_no_chunks(self, text: str) -> None:
        assert self.make().chunk(text) == []

    def test_single_word(self) -> None:
        chunks = self.make().chunk("  hello\n")
        assert [(c.start, c.end, c.text) for c in chunks] == [(0, 8, "hello")]
        assert chunks[0].tokens == 1

    @given(TEXTS)
    def test_tiles_and_is_deterministic(self, text: str) -> None:
        chunker = self.make()
        chunks = chunker.chunk(text)
        check_tiles(text, chunks)
        assert self.make().chunk(text) == chunks

    @given(LONG_TEXTS)
    def test_long_text_respects_sizes_exactly(self, text: str) -> None:
        chunker = self.make(**self.small_params())
        chunks = chunker.chunk(text)
        check_tiles(text, chunks)
        limit = self.small_limit()
        for c in chunks:
            assert c.tokens == exact_tokens(c.text)
            assert c.tokens <= limit <= chunker.hard_max_tokens

    def test_real_revisions_tile_and_fit(self, revisions: list[dict[str, Any]]) -> None:
        chunker = self.make()
        counter = resolve_tokenizer(None)
        for pair in revisions:
            for version in ("old", "new"):
                text = pair[version]
                chunks = chunker.chunk(text)
                check_tiles(text, chunks)
                exact = counter.count_many([c.text for c in chunks])
                assert [c.tokens for c in chunks] == exact, pair["id"]
                assert max(exact) <= self.window

    def test_unspaced_cjk_run_never_fails(self) -> None:
        text = ("中文字符没有空格" * 400) + "。" + ("句子" * 300)
        chunks = self.make().chunk(text)
        check_tiles(text, chunks)
        assert all(c.tokens <= self.window for c in chunks)
        assert len(chunks) >= 4

    def test_long_unbroken_token_run(self) -> None:
        text = "x" + "ab1" * 3000  # one word, one pre-token far longer than any window
        chunks = self.make().chunk(text)
        check_tiles(text, chunks)
        assert all(c.tokens <= self.window for c in chunks)

    def test_callable_token_counter(self) -> None:
        chunker = self.make(tokenizer=lambda s: len(s.split()) + s.count("中"))
        text = "one two three. " * 200 + "中" * 900
        chunks = chunker.chunk(text)
        check_tiles(text, chunks)
        assert all(c.tokens <= chunker.hard_max_tokens for c in chunks)

    @given(HEAVY_TEXTS, st.sampled_from([heavy_tokens, utf8_tokens]))
    def test_several_tokens_per_character_keep_the_bound(
        self, text: str, count: Callable[[str], int]
    ) -> None:
        """A callable counter giving one character several tokens keeps the promised bound."""
        chunker = self.make(tokenizer=count, **self.small_params())
        chunks = chunker.chunk(text)
        check_tiles(text, chunks)
        assert self.make(tokenizer=count, **self.small_params()).chunk(text) == chunks
        for c in chunks:
            assert c.tokens == count(c.text)
            assert c.tokens <= self.small_limit(), (c.tokens, c.text)

    def test_characters_of_several_default_tokens_are_counted(self) -> None:
        """BERT splits a Hangul syllable into jamo: several tokens at one offset."""
        text = "가각간,갈감." * 200  # one word of many pre-tokens, each several tokens
        chunks = self.make(**self.small_params()).chunk(text)
        check_tiles(text, chunks)
        for c in chunks:
            assert c.tokens == exact_tokens(c.text)
            assert c.tokens <= self.small_limit()

    # -- identity --------------------------------------------------------------------------

    def test_policy_id_is_stable_and_parameter_sensitive(self) -> None:
        a, b = self.make(), self.make()
        assert a.policy_id == b.policy_id
        assert a.policy_id.startswith(a.kind + "-")
        assert self.make(**self.small_params()).policy_id != a.policy_id
        assert self.make(tokenizer=len).policy_id != a.policy_id

    def test_hard_max_in_identity(self) -> None:
        assert self.make(hard_max_tokens=1000).policy_id != self.make().policy_id

    # -- bad input ------------------------------------------------------------------------

    @pytest.mark.parametrize("bad", [None, b"bytes", 12, ["a"]])
    def test_non_str_is_refused(self, bad: object) -> None:
        with pytest.raises(InputError):
            self.make().chunk(bad)

    def test_nul_and_surrogates_are_refused(self) -> None:
        with pytest.raises(InputError, match="NUL"):
            self.make().chunk("a\x00b")
        with pytest.raises(InputError, match="surrogate"):
            self.make().chunk("a\ud800b")

    def small_params(self) -> dict[str, int]:
        raise NotImplementedError

    def small_limit(self) -> int:
        raise NotImplementedError
