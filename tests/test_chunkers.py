from __future__ import annotations

import random
import re
from typing import Any

import pytest
from chunker_contract import ChunkerContract, check_tiles
from hypothesis import given
from hypothesis import strategies as st

from rechunk import (
    CDCChunker,
    ConfigError,
    FixedChunker,
    RechunkError,
    RecursiveChunker,
    embedding_input,
)


class TestFixed(ChunkerContract):
    window = 304

    def make(self, **kwargs: Any) -> FixedChunker:
        return FixedChunker(**kwargs)

    def small_params(self) -> dict[str, int]:
        return {"max_tokens": 40}

    def small_limit(self) -> int:
        return 40

    def test_windows_are_greedy(self) -> None:
        text = " ".join(f"w{i}" for i in range(100))  # "w12" is two tokens: w, ##12
        chunks = FixedChunker(max_tokens=30).chunk(text)
        check_tiles(text, chunks)
        # each window is full up to the limit, except at word granularity and the last one
        assert all(28 <= c.tokens <= 30 for c in chunks[:-1])


class TestRecursive(ChunkerContract):
    window = 400

    def make(self, **kwargs: Any) -> RecursiveChunker:
        return RecursiveChunker(**kwargs)

    def small_params(self) -> dict[str, int]:
        return {"target_tokens": 40}

    def small_limit(self) -> int:
        return 40

    def test_paragraphs_stay_whole_and_pack(self) -> None:
        paragraphs = [f"Paragraph {i} has a few words in it." for i in range(6)]
        text = "\n\n".join(paragraphs)
        chunks = RecursiveChunker(target_tokens=20).chunk(text)
        check_tiles(text, chunks)
        for c in chunks:  # every chunk is a run of whole paragraphs
            assert all(p in paragraphs for p in c.text.split("\n\n"))

    def test_headings_start_blocks(self) -> None:
        text = "# Title\nintro line\n## Part\nbody line one.\n- item a\n- item b\n"
        chunks = RecursiveChunker(target_tokens=6).chunk(text)
        starts = {text[c.start : c.end].split("\n")[0] for c in chunks}
        assert "## Part" in starts
        assert "- item a" in starts or "- item b" in starts

    def test_sentence_ends_split_large_paragraph(self) -> None:
        sentence = "This sentence has exactly nine short words in it. "
        text = sentence * 12
        chunks = RecursiveChunker(target_tokens=25).chunk(text)
        check_tiles(text, chunks)
        assert all(c.text.endswith(".") for c in chunks)

    def test_cjk_sentence_ends_need_no_whitespace(self) -> None:
        text = "今天天气很好，我们去公园散步。" * 10
        chunks = RecursiveChunker(target_tokens=40).chunk(text)
        check_tiles(text, chunks)
        assert all(c.text.endswith("。") for c in chunks)

    def test_edit_in_one_large_block_leaves_later_blocks(self) -> None:
        block = "Some words repeat in this block of text. " * 20
        tail = "\n\n".join(f"Tail paragraph number {i} stays put." for i in range(10))
        chunker = RecursiveChunker(target_tokens=60)
        old = chunker.chunk(block + "\n\n" + tail)
        new = chunker.chunk("Inserted. " + block + "\n\n" + tail)
        assert {c.text for c in old if "Tail" in c.text} == {c.text for c in new if "Tail" in c.text}


class TestCDC(ChunkerContract):
    window = 352

    def make(self, **kwargs: Any) -> CDCChunker:
        return CDCChunker(**kwargs)

    def small_params(self) -> dict[str, int]:
        return {"min_tokens": 20, "max_tokens": 40, "window_words": 8}

    def small_limit(self) -> int:
        return 40

    def test_edit_resynchronises(self) -> None:
        rng = random.Random(7)
        text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "pi", "rho", "mu"]) + str(rng.randrange(50)) for _ in range(3000))
        chunker = CDCChunker(min_tokens=40, max_tokens=120, window_words=16)
        old = chunker.chunk(text)
        new = chunker.chunk("inserted words here " + text)
        old_inputs = {c.text for c in old}
        assert len(old_inputs & {c.text for c in new}) >= len(old_inputs) - 2


@pytest.mark.parametrize(
    ("factory", "kwargs"),
    [
        (FixedChunker, {"max_tokens": 0}),
        (FixedChunker, {"max_tokens": True}),
        (FixedChunker, {"max_tokens": 300.0}),
        (FixedChunker, {"max_tokens": "300"}),
        (FixedChunker, {"max_tokens": 600}),
        (FixedChunker, {"hard_max_tokens": False}),
        (RecursiveChunker, {"target_tokens": 513}),
        (RecursiveChunker, {"target_tokens": 400, "hard_max_tokens": 300}),
        (CDCChunker, {"min_tokens": 400, "max_tokens": 300}),
        (CDCChunker, {"max_tokens": 600}),
        (CDCChunker, {"min_tokens": 1.5}),
        (CDCChunker, {"primary_mask_bits": 4, "backup_mask_bits": 6}),
        (FixedChunker, {"tokenizer": "/no/such/tokenizer.json"}),
        (FixedChunker, {"tokenizer": 3}),
        (FixedChunker, {"tokenizer": object()}),
    ],
)
def test_invalid_parameters_raise_config_error(factory: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        factory(**kwargs)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, RechunkError)


def test_same_text_same_input_whatever_the_chunker() -> None:
    paragraph = "A paragraph that every chunker keeps whole because it is short."
    inputs = [c.chunk("\n\n" + paragraph + "\n")[0].text for c in (FixedChunker(), RecursiveChunker(), CDCChunker())]
    assert inputs == [paragraph] * 3


@given(st.text(alphabet=st.sampled_from(list("ab.中 \t\n\r\x0b\x0c\u3000\u00a0\u2028\x85\x1c")),
               max_size=40))
def test_embedding_input_rule(span: str) -> None:
    text = embedding_input(span)
    assert embedding_input(text) == text  # idempotent
    assert text == text.strip()
    assert not set(text) - set(span) - {" ", "\n"}  # only spaces and line breaks are added
    assert all(not c.isspace() or c in " \t\n" for c in text)
    assert "\n\n\n" not in text and " \n" not in text and "\t\n" not in text
    assert text.split() == span.split()  # words are never changed


def _every_step(span: str) -> str:
    """The ws-v1 rule with every step applied, no shortcut for text that needs none."""
    text = re.sub("\r\n?|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]", "\n", span.strip())
    text = re.sub(r"[^\S\n\t ]", " ", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text)


@given(st.text(alphabet=st.sampled_from(
    list("ab. \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000中")), max_size=40))
def test_embedding_input_shortcut_changes_no_result(span: str) -> None:
    # the check that skips the steps for text that needs none (most spans) must never
    # skip one that would change it: ASCII and non-ASCII spans alike
    assert embedding_input(span) == _every_step(span)
