"""The frameworks' splitter arguments mapped onto rechunk chunkers (no framework imported).

Both adapters accept what LangChain's ``TextSplitter`` and LlamaIndex's
``SentenceSplitter`` accept and build a rechunk chunker from it:

* ``chunk_size`` counts what the splitter counts: ``length_function`` when one is
  given (LangChain), else the tokenizer's tokens (rechunk's default: all-MiniLM-L6-v2).
  It is a maximum, as in the frameworks: the chunker's hard maximum, and its
  target sizes are derived from it (:func:`sizes_for`).
* ``chunk_overlap``: each chunk after the first also carries up to this many
  units of the text before it, whole words only (:func:`pieces`): a word is a run
  without whitespace, so unspaced Chinese, Japanese or Thai gets an overlap only
  where such a run before the chunk is short enough (a heading's last word, a short
  line, a sentence the chunker cut off a run). The chunker cuts cores of
  ``chunk_size - chunk_overlap`` so that a core with its overlap stays within
  ``chunk_size``; a core the overlap would repeat whole joins the next chunk instead.
* Without ``chunk_size`` and without rechunk sizes, a tokenizer whose model
  window is known (:func:`window_for`) gets the sizes :func:`rechunk.chunking.policy.policy_for`
  gives that model; a size above the window is refused.
* ``separators`` / ``separator`` / ``paragraph_separator``: whitespace
  separators are what rechunk cuts at anyway and are accepted; any other is refused.
* ``keep_separator`` and ``strip_whitespace`` decide where the whitespace
  between two chunks goes (:func:`pieces`).

:func:`pieces` turns a chunker's tiling into the framework's chunks: spans of
the source with their exact text, so ``source[start:end] == text`` always.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from rechunk.chunkers.base import middle_cut
from rechunk.chunking.chunk import Chunk, Chunker, embedding_input
from rechunk.chunking.policy import sized_params
from rechunk.chunking.tokens import (
    CallableTokenCounter,
    HFTokenCounter,
    TokenCounter,
    resolve_tokenizer,
)
from rechunk.errors import ConfigError, InputError, MissingDependencyError

__all__ = [
    "FACTORIES",
    "SIZE_PARAMS",
    "Piece",
    "Sizing",
    "Window",
    "WindowWarning",
    "build_sizing",
    "check_flag",
    "check_keep_separator",
    "check_separators",
    "check_window",
    "largest_chunk",
    "length_counter",
    "pieces",
    "sizes_for",
    "window_for",
]


class WindowWarning(UserWarning):
    """A chunk (or a chunker's maximum) exceeds the window of the model it is sized for."""


def _factories() -> dict[str, Any]:
    from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker, StructuredChunker
    from rechunk.chunkers.code import CodeChunker  # tree-sitter loads when one is made

    return {
        "structured": StructuredChunker,
        "cdc": CDCChunker,
        "recursive": RecursiveChunker,
        "fixed": FixedChunker,
        "code": CodeChunker,  # with language=
    }


FACTORIES: Final[dict[str, Any]] = _factories()
#: The rechunk parameters that size a chunker of each kind.
SIZE_PARAMS: Final = frozenset({"max_tokens", "min_tokens", "target_tokens", "hard_max_tokens"})
_KEEP_SEPARATOR: Final = (True, False, "start", "end")
#: The default model's window (all-MiniLM-L6-v2, ``sentence_bert_config.json``).
_SBERT_CONFIG: Final = "sentence_bert_config.json"
_UNBOUNDED: Final = 1_000_000


# --------------------------------------------------------------------------- windows


@dataclass(frozen=True)
class Window:
    """A model's input window: ``tokens`` content tokens (special tokens excluded)."""

    tokens: int
    model: str


def _sbert_window(folder: object) -> int | None:
    """``max_seq_length`` of a sentence-transformers model folder, when there is one."""
    if not isinstance(folder, (str, Path)) or not str(folder):
        return None
    path = Path(folder) / _SBERT_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get("max_seq_length") if isinstance(config, dict) else None
    return value if type(value) is int and value > 0 else None


def _specials(counter: TokenCounter) -> int:
    """Special tokens an HF tokenizer adds around one input (0 for other counters)."""
    if not isinstance(counter, HFTokenCounter):
        return 0
    tokenizer = counter.tokenizer
    return len(tokenizer.encode("a").ids) - len(tokenizer.encode("a", add_special_tokens=False).ids)


def _default_window() -> tuple[str, Window] | None:
    """``(identity, window)`` of rechunk's default tokenizer (all-MiniLM-L6-v2)."""
    from rechunk.chunking.tokens import default_tokenizer_path

    try:
        path = default_tokenizer_path()
    except (MissingDependencyError, ConfigError):
        return None
    counter = resolve_tokenizer(path)
    length = _sbert_window(path.parent)
    if length is None:
        return None
    return counter.identity, Window(length - _specials(counter), "all-MiniLM-L6-v2")


def window_for(tokenizer: Any, counter: TokenCounter) -> Window | None:
    """The window of the model ``tokenizer`` belongs to, when the splitter can know it.

    Known: rechunk's default tokenizer (``None``) and any tokenizer equal to it
    (all-MiniLM-L6-v2: 256 tokens, 254 without ``[CLS]``/``[SEP]``); a rechunk
    embedder (``max_input_tokens`` less ``special_tokens``); a sentence-transformers
    model (``max_seq_length``); a ``transformers`` tokenizer (the
    ``max_seq_length`` of a sentence-transformers folder it was loaded from, else
    its ``model_max_length``), less the special tokens it adds. A plain counting
    function or a bare ``tokenizers.Tokenizer`` of another model: unknown (``None``).
    """
    default = _default_window()
    if default is not None and counter.identity == default[0]:
        return default[1]
    name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
    limit = getattr(tokenizer, "max_input_tokens", None)  # a rechunk embedder
    if type(limit) is int and limit > 0:
        special = getattr(tokenizer, "special_tokens", 0)
        return Window(limit - (special if type(special) is int else 0), str(tokenizer))
    limit = getattr(tokenizer, "max_seq_length", None)  # a SentenceTransformer
    if type(limit) is int and limit > 0:
        return Window(limit - _specials(counter), name)
    model_max = getattr(tokenizer, "model_max_length", None)  # a transformers tokenizer
    if type(model_max) is int:
        limit = _sbert_window(getattr(tokenizer, "name_or_path", None))
        if limit is None and model_max < _UNBOUNDED:
            limit = model_max
        if limit is not None:
            return Window(limit - _specials(counter), name)
    return None


# --------------------------------------------------------------------------- counters


class _LengthOf:
    """``str -> int`` from a framework counting function: an ``int`` as it is, else ``len``.

    LangChain's ``length_function`` returns an ``int``; LlamaIndex's ``tokenizer``
    returns the list of tokens. A module-level class, so a parser holding one pickles.
    """

    def __init__(self, func: Callable[[str], Any]) -> None:
        self.func = func

    def __call__(self, text: str) -> int:
        value = self.func(text)
        if type(value) is int:
            return value
        try:
            return len(value)
        except TypeError:
            raise ConfigError(
                f"the length function returned {type(value).__name__}; it must return an int "
                "(LangChain) or a list of tokens (LlamaIndex)"
            ) from None


def length_counter(func: object, what: str = "length_function") -> TokenCounter:
    """A :class:`~rechunk.chunking.tokens.TokenCounter` over a framework's counting function.

    The function counts whitespace as the framework does (``len`` counts every
    space and line break), so chunkers count each word with the whitespace before
    it. Its identity is ``"callable:<module>.<qualname>+whitespace"`` of the
    function (``len``: ``"callable:builtins.len+whitespace"``), so it is stable
    across runs for a named function; a lambda's identity is its module and
    ``"<lambda>"``.
    """
    if not callable(func):
        raise ConfigError(f"{what} must be a callable str -> int, got {func!r}")
    name = getattr(func, "__qualname__", type(func).__qualname__)
    module = getattr(func, "__module__", "") or ""
    return CallableTokenCounter(
        _LengthOf(func), identity=f"callable:{module}.{name}", counts_whitespace=True
    )


# --------------------------------------------------------------------------- sizes


def sizes_for(kind: str, size: int) -> dict[str, int]:
    """Parameters of a ``kind`` chunker whose chunks hold at most ``size`` units.

    fixed: ``max_tokens=size``; recursive: ``target_tokens=size``; structured:
    ``min_tokens=size*7//10, max_tokens=size``; code: ``min_tokens=size*6//10,
    max_tokens=size``; cdc: ``min_tokens=size//2, max_tokens=size`` (the ratios of the
    default sizes); ``hard_max_tokens=size``.
    """
    if kind == "fixed":
        params = {"max_tokens": size}
    elif kind == "recursive":
        params = {"target_tokens": size}
    elif kind == "structured":
        params = {"min_tokens": max(1, size * 7 // 10), "max_tokens": size}
    elif kind == "code":
        params = {"min_tokens": max(1, size * 6 // 10), "max_tokens": size}
    else:
        params = {"min_tokens": max(1, size // 2), "max_tokens": size}
    params["hard_max_tokens"] = size
    return params


#: Regular expressions that match whitespace only (accepted with ``is_separator_regex``).
_WHITESPACE_PATTERNS: Final = frozenset({r"\n\n", r"\n", r"\s", r"\s+", r"\n+", r"\n\n+", r"\t"})


def check_separators(
    separators: object, is_regex: object, name: str = "separators", *, policy: object = None
) -> None:
    """Accept whitespace separators (where rechunk cuts anyway); refuse any other.

    ``separators`` is one ``str`` or a list of them; with ``is_regex`` a pattern
    is accepted when it is literal whitespace or one of ``\\n``, ``\\n\\n``,
    ``\\s``, ``\\s+`` (and the like).
    """
    if type(is_regex) is not bool:
        raise ConfigError(f"is_separator_regex must be True or False, got {is_regex!r}")
    if separators is None:
        return
    items = [separators] if isinstance(separators, str) else separators
    if not isinstance(items, Sequence) or not all(isinstance(s, str) for s in items):
        raise ConfigError(f"{name} must be a str or a list of str, got {separators!r}")
    for sep in items:
        if not sep or sep.isspace() or (is_regex and sep in _WHITESPACE_PATTERNS):
            continue
        if policy == "code":
            raise ConfigError(
                f"{name}={separators!r}: the code policy cuts at the definitions its "
                "language's grammar finds (functions, classes, methods), not at separators; "
                f"drop {name}"
            )
        raise ConfigError(
            f"{name}={separators!r}: rechunk's chunkers cut only between words (at headings "
            "and blank lines, line breaks, sentence ends, then token windows), so a "
            f"separator that is not whitespace ({sep!r}) cannot be honoured. Drop "
            f"{name} (Markdown and RST headings are hard boundaries of the default "
            "'structured' policy), or keep the framework's own splitter for this content"
        )


@dataclass(frozen=True)
class Sizing:
    """What a splitter built from framework arguments needs.

    ``chunker`` cuts the cores; ``limit`` is the most units a chunk may hold with
    its overlap (``chunk_size``, else the chunker's hard maximum); ``overlap``
    the units of preceding text each chunk after the first carries; ``window``
    the model window the chunks are checked against (``None``: unknown);
    ``counter`` counts the units of ``limit`` and ``overlap``.
    """

    chunker: Chunker
    limit: int
    overlap: int
    window: Window | None
    counter: TokenCounter | None


def largest_chunk(chunker: Chunker) -> int:
    """The most tokens a chunk of ``chunker`` holds: its ``max_tokens`` / ``target_tokens``
    (the bound rechunk's chunkers keep), else its hard maximum."""
    params = getattr(chunker, "params", None) or {}
    bound = params.get("max_tokens", params.get("target_tokens"))
    hard = chunker.hard_max_tokens
    return min(bound, hard) if type(bound) is int else hard


def _check_size(name: str, value: object, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise ConfigError(f"{name} must be an int of at least {minimum}, got {value!r}")
    return value


#: the languages the frameworks' code splitters name that are markup for prose: the
#: structured policy's, not the code policy's
PROSE_LANGUAGES: Final = frozenset({"markdown", "rst", "latex", "html"})
#: another splitter's arguments, which a user swapping it for rechunk's keeps by habit,
#: and what to do instead (a bare "unexpected keyword argument" named nothing)
_SENTENCES = (
    "rechunk's chunkers find sentence ends themselves (Latin and full-width terminators) "
    "and cannot take another sentence splitter; drop it, or keep SentenceSplitter for this "
    "content"
)
_CODE_SIZES = (
    "the code policy sizes chunks in tokens, not lines or characters: give chunk_size (and "
    "chunk_overlap) in tokens with policy='code', language=..."
)
FOREIGN: Final[dict[str, str]] = {
    "chunking_tokenizer_fn": _SENTENCES,
    "secondary_chunking_regex": _SENTENCES,
    "backup_separators": (
        "TokenTextSplitter's fallback separators: rechunk cuts between words and at "
        "sentence, paragraph and section ends itself; drop it (a whitespace separator= is "
        "accepted)"
    ),
    "parser": (
        "CodeSplitter's tree-sitter parser: rechunk parses with the grammar its language "
        "names; pass language='python' (or another) instead"
    ),
    "keep_whitespaces": (
        "a chunk's text is always the exact slice of the document, whitespace included; "
        "drop it"
    ),
    "chunk_lines": _CODE_SIZES,
    "chunk_lines_overlap": _CODE_SIZES,
    "max_chars": _CODE_SIZES,
}


def check_foreign(params: Mapping[str, Any], policy: object) -> None:
    """:class:`~rechunk.ConfigError` naming what to use for another splitter's argument in
    ``params`` (see :data:`FOREIGN`), for ``language`` without the code policy, and for
    the code policy without a language or with one of prose."""
    for name in params:
        if name in FOREIGN:
            raise ConfigError(f"{name}: {FOREIGN[name]}")
    if policy != "code":
        if "language" in params:
            raise ConfigError(
                f"language={params['language']!r} is the code policy's: pass policy='code' "
                "with it (CodeSplitter's place), or leave it out for prose"
            )
        return
    if "language" not in params:
        raise ConfigError(
            "the code policy needs the source's language: pass language='python' (or "
            "'typescript', 'go', ...: rechunk.chunkers.code.LANGUAGES) beside policy='code'"
        )
    language = str(getattr(params["language"], "value", params["language"]))
    if language in PROSE_LANGUAGES:
        raise ConfigError(
            f"{language!r} is prose, not code: leave policy='code' and language out for the "
            "default structured policy, which keeps headings as hard boundaries and cuts at "
            "paragraphs"
        )


def build_sizing(
    policy: str | Chunker,
    tokenizer: Any,
    params: Mapping[str, Any],
    *,
    chunk_size: object = None,
    chunk_overlap: object = 0,
    length_function: object = None,
    receiver: str = "the adapter",
) -> Sizing:
    """A chunker and its limits from rechunk's and the framework's arguments.

    ``policy`` is a kind with ``tokenizer`` and rechunk ``params``, or a ready
    :class:`~rechunk.Chunker` (then ``tokenizer``, ``params``, ``chunk_size`` and
    ``length_function`` must be unset: the chunker has its own). Raises
    :class:`~rechunk.ConfigError` for what cannot be honoured, naming what to use.
    """
    overlap = _check_size("chunk_overlap", chunk_overlap, 0)
    check_foreign(params, policy)
    if isinstance(policy, Chunker):
        given = [n for n, v in (("tokenizer", tokenizer), ("chunk_size", chunk_size),
                                ("length_function", length_function)) if v is not None]  # fmt: skip
        if given or params:
            raise ConfigError(
                f"a ready chunker was given as policy: pass {', '.join(given + list(params))} "
                f"to the chunker itself, not to {receiver}"
            )
        counter = getattr(policy, "token_counter", None)
        window = window_for(None, counter) if counter is not None else None
        if window is not None and policy.hard_max_tokens > window.tokens:
            warnings.warn(
                f"the chunker's hard maximum ({policy.hard_max_tokens} tokens) is above the "
                f"{window.tokens} content tokens {window.model} reads: longer chunks would be "
                "truncated by the model; size it with rechunk.policy_for(embedder)",
                WindowWarning,
                stacklevel=3,
            )
        return _with_overlap(policy, policy.hard_max_tokens, overlap, window, counter)
    if type(policy) is not str or policy not in FACTORIES:
        raise ConfigError(
            f"policy must be one of {', '.join(map(repr, FACTORIES))} or a rechunk Chunker, "
            f"got {policy!r}: the policy is {receiver}'s first argument, so pass the "
            "framework's own arguments (separators=..., chunk_size=...) by keyword"
            + (
                "; RechunkNodeParser.from_defaults takes SentenceSplitter's in its order"
                if receiver == "the node parser"
                else ""
            )
        )
    if length_function is not None and tokenizer is not None:
        raise ConfigError(
            "pass either tokenizer or length_function (one counts chunk_size), not both"
        )
    if length_function is not None:
        counter = length_counter(length_function)
    elif _plain_function(tokenizer):
        counter = length_counter(tokenizer, "tokenizer")
    else:
        counter = resolve_tokenizer(tokenizer)
    _probe(counter, "length_function" if length_function is not None else "tokenizer")
    window = None if length_function is not None else window_for(tokenizer, counter)
    sized = sorted(set(params) & SIZE_PARAMS)
    if chunk_size is not None:
        size = _check_size("chunk_size", chunk_size, 1)
        if sized:
            raise ConfigError(
                f"chunk_size and {', '.join(sized)} both size the chunks: pass one of them"
            )
        if window is not None and size > window.tokens:
            raise ConfigError(
                f"chunk_size={size} is above the {window.tokens} content tokens {window.model} "
                f"reads (chunk_size counts its tokens): the model would truncate such chunks "
                f"silently. Use chunk_size<={window.tokens}, or pass the tokenizer of the model "
                "you embed with"
                + (
                    "; to count characters, as LangChain does by default, pass length_function=len"
                    if receiver == "the splitter"
                    else ""
                )
            )
        if overlap >= size:
            raise ConfigError(
                f"chunk_overlap={overlap} must be below chunk_size={size}: a chunk would be "
                "all overlap"
            )
        limit = size
        core = sizes_for(policy, size - overlap)
    else:
        content = window.tokens if window is not None else None
        core = sized_params(policy, content)
        if sized:
            core = {k: v for k, v in core.items() if k == "hard_max_tokens"}
        core.update({k: v for k, v in params.items() if k in SIZE_PARAMS})
        limit = core["hard_max_tokens"]
        if window is not None and limit > window.tokens:
            raise ConfigError(
                f"hard_max_tokens={limit} is above the {window.tokens} content tokens "
                f"{window.model} reads: the model would truncate such chunks silently; use "
                f"hard_max_tokens<={window.tokens} (or rechunk.policy_for(embedder))"
            )
        if overlap:
            if overlap >= limit:
                raise ConfigError(
                    f"chunk_overlap={overlap} must be below the chunks' maximum ({limit})"
                )
            largest = max(v for k, v in core.items() if k != "min_tokens")
            if largest + overlap > limit:  # leave room for the overlap
                shrunk = sizes_for(policy, limit - overlap)
                if sized:
                    raise ConfigError(
                        f"with chunk_overlap={overlap} a chunk of {largest} tokens would exceed "
                        f"hard_max_tokens={limit}: lower {', '.join(sized)} to at most "
                        f"{limit - overlap}"
                    )
                core = {**shrunk, "hard_max_tokens": limit}
    other = {k: v for k, v in params.items() if k not in SIZE_PARAMS}
    try:
        chunker: Chunker = FACTORIES[policy](tokenizer=counter, **core, **other)
    except TypeError as exc:
        raise ConfigError(f"bad parameters for the {policy!r} chunker: {exc}") from exc
    return _with_overlap(chunker, limit, overlap, window, counter)


def _probe(counter: TokenCounter, name: str) -> None:
    """Count a short text once, so that a counter that cannot count fails here, where it is
    given, not at the first text it meets."""
    try:
        counter.count_many(["a probe, counted once."])
    except ConfigError as exc:
        raise ConfigError(f"{name} cannot count a text: {exc}") from None
    except Exception as exc:
        raise ConfigError(f"{name} failed on a short text: {type(exc).__name__}: {exc}") from exc


def _plain_function(tokenizer: object) -> bool:
    """A counting function (LangChain: ``str -> int``; LlamaIndex: ``str -> list``), not a
    tokenizer object rechunk knows."""
    if not callable(tokenizer) or isinstance(tokenizer, (TokenCounter, type)):
        return False
    return (
        all(getattr(tokenizer, name, None) is None for name in ("backend_tokenizer", "tokenizer"))
        and type(tokenizer).__module__.split(".")[0] != "tokenizers"
    )


def _with_overlap(
    chunker: Chunker, limit: int, overlap: int, window: Window | None, counter: Any
) -> Sizing:
    if overlap and overlap >= limit:
        raise ConfigError(f"chunk_overlap={overlap} must be below the chunks' maximum ({limit})")
    if overlap and counter is None:
        raise ConfigError("chunk_overlap needs a chunker with a token_counter")
    return Sizing(chunker, limit, overlap, window, counter)


def check_keep_separator(keep_separator: object) -> bool | str:
    """``keep_separator`` when it is ``True``, ``False``, ``"start"`` or ``"end"``."""
    if keep_separator not in _KEEP_SEPARATOR or type(keep_separator) not in (bool, str):
        raise ConfigError(
            f"keep_separator must be True, False, 'start' or 'end', got {keep_separator!r}"
        )
    return keep_separator


def check_flag(name: str, value: object) -> bool:
    """``value`` when it is a ``bool``."""
    if type(value) is not bool:
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


# --------------------------------------------------------------------------- pieces


@dataclass(frozen=True)
class Piece:
    """One framework chunk: ``text == source[start:end]``; ``tokens`` counts ``text``.

    ``core_start`` is where the chunker's own span starts (after the overlap);
    ``tile_start`` / ``tile_end`` is the chunker's span itself, or two adjacent spans
    when a short one joined the next (see :func:`pieces`); the spans of all chunks
    tile the text: the ``start`` / ``end`` that ``rechunk.sync`` stores.
    """

    start: int
    end: int
    text: str
    tokens: int
    core_start: int
    tile_start: int = 0
    tile_end: int = 0


_WORD: Final = re.compile(r"\S+")


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    span = text[start:end]
    left = len(span) - len(span.lstrip())
    return start + left, start + len(span.rstrip())


def pieces(
    text: str,
    chunks: Sequence[Chunk],
    sizing: Sizing,
    *,
    strip_whitespace: bool = True,
    keep_separator: bool | str = "end",
) -> list[Piece]:
    """The framework's chunks of ``text`` from the chunker's tiling ``chunks``.

    Each chunk's span ``[a, b)`` is its tile without leading and trailing
    whitespace. With ``strip_whitespace`` (the frameworks' default) that is the
    piece. Without it, the whitespace between two chunks goes to the chunk after
    it (``keep_separator`` ``True`` or ``"start"``), to the one before it
    (``"end"``: the chunker's tiles themselves), or to neither (``False``).
    A piece is counted as it is (its CRLFs and edge whitespace included, which a
    length function such as ``len`` counts); one over ``sizing.limit`` has its
    chunk cut in two near the middle until it fits, as LangChain never returns a
    chunk over ``chunk_size`` it could have split.
    With ``sizing.overlap``, every piece after the first starts earlier, at the
    first of the last words of the preceding text whose text holds at most
    ``overlap`` units and keeps the piece within ``sizing.limit``. A piece never
    lies wholly inside the next: when the overlap would take all of it, the two are
    one piece (its ``tile_start`` the earlier one's, so the tiles still tile the
    text).
    The text of a piece is always ``text[start:end]``, never normalised.
    """
    counter = getattr(sizing.chunker, "token_counter", None)
    chunks = list(chunks)
    while True:
        out = _spans(text, chunks, strip_whitespace, keep_separator)
        if counter is None or all(p.text == c.text for p, c in zip(out, chunks)):
            break  # the chunker counted these very strings
        counts = counter.count_many([p.text for p in out])
        out = [replace(p, tokens=t) for p, t in zip(out, counts)]
        over = {i for i, p in enumerate(out) if p.tokens > sizing.limit}
        halves = [_halves(text, c) if i in over else [c] for i, c in enumerate(chunks)]
        if all(len(h) == 1 for h in halves):
            break
        chunks = [c for h in halves for c in h]
    if sizing.overlap and sizing.counter is not None:
        spans = [_trimmed(text, c.start, c.end) for c in chunks]
        out = _overlapped(text, out, spans, sizing)
    return out


def _spans(
    text: str, chunks: Sequence[Chunk], strip_whitespace: bool, keep_separator: bool | str
) -> list[Piece]:
    """The pieces of ``chunks`` as the chunker counted them (see :func:`pieces`)."""
    spans = [_trimmed(text, c.start, c.end) for c in chunks]
    out: list[Piece] = []
    n = len(chunks)
    for i, (chunk, (a, b)) in enumerate(zip(chunks, spans)):
        if strip_whitespace or keep_separator is False:
            start, end = a, b
        elif keep_separator == "end":
            start, end = chunk.start, chunk.end
        else:  # True / "start": the whitespace before a chunk is its own
            start = 0 if i == 0 else spans[i - 1][1]
            end = len(text) if i == n - 1 else b
        out.append(Piece(start, end, text[start:end], chunk.tokens, start, chunk.start, chunk.end))
    return out


def _halves(text: str, chunk: Chunk) -> list[Chunk]:
    """``chunk`` cut in two near its middle (at a word's start where it has one), or
    ``[chunk]`` when it holds one character."""
    a, b = _trimmed(text, chunk.start, chunk.end)
    if b - a < 2:
        return [chunk]
    cut = middle_cut(text, chunk.start, chunk.end)
    return [
        Chunk(s, e, embedding_input(text[s:e]), 0)
        for s, e in ((chunk.start, cut), (cut, chunk.end))
    ]


def _overlapped(
    text: str, out: list[Piece], spans: list[tuple[int, int]], sizing: Sizing
) -> list[Piece]:
    """``out`` with each piece's overlap (see :func:`pieces`); ``spans`` are the chunker's
    spans without their edge whitespace.

    A piece whose overlap would take all of the piece before it (a short core, such as
    a sentence's tail, next to a chunk that has room for it) takes that piece in: the
    two become one chunk when it fits within ``sizing.limit``, else the overlap stops
    short of the earlier piece's first word. Emitting both would give a chunk wholly
    inside the next, which LangChain's splitters never return (they close a chunk only
    when the next text does not fit) and which costs an embedding for nothing.
    """
    counter = sizing.counter
    assert counter is not None
    result: list[Piece] = []
    cores: list[tuple[int, int]] = []  # the chunker's text of each piece in ``result``
    for piece, core in zip(out, spans):
        while result:
            lapped = _lapped(text, piece, cores[-1][0], core[0], sizing)
            before = result[-1]
            if lapped.start > _trimmed(text, before.start, before.end)[0]:
                piece = lapped
                break
            # keep the whitespace keep_separator gave the earlier piece
            start = min(before.start, lapped.start)
            count = lapped.tokens
            if start < lapped.start:
                count = counter.count_many([text[start : lapped.end]])[0]
            if count > sizing.limit:
                # the whitespace before the earlier piece does not fit: overlap its words
                # after the first only
                first = _WORD.search(text, cores[-1][0], core[0])
                lo = first.end() if first is not None else core[0]
                piece = _lapped(text, piece, lo, core[0], sizing)
                break
            result.pop()
            piece = Piece(
                start,
                lapped.end,
                text[start : lapped.end],
                count,
                before.core_start,
                before.tile_start,
                piece.tile_end,
            )
            core = (cores.pop()[0], core[1])
        result.append(piece)
        cores.append(core)
    return result


def _lapped(text: str, piece: Piece, lo: int, hi: int, sizing: Sizing) -> Piece:
    """``piece`` starting at the first of the last words of ``text[lo:hi]`` whose text
    holds at most ``sizing.overlap`` units and keeps the piece within ``sizing.limit``
    (``piece`` itself when no word fits)."""
    counter = sizing.counter
    assert counter is not None
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, lo, hi)]
    counts = counter.count_many([text[s:e] for s, e in words])
    budget = min(sizing.overlap, sizing.limit - piece.tokens)
    taken, total = len(words), 0
    for k in range(len(words) - 1, -1, -1):
        if total + counts[k] > budget:
            break
        total += counts[k]
        taken = k
    # the sum leaves out the whitespace between the words (which a length function
    # counts) and the counter need not be additive: count the real texts, and drop
    # words of the overlap until both fit
    while taken < len(words):
        start = min(words[taken][0], piece.start)
        lap, count = counter.count_many(
            [text[words[taken][0] : words[-1][1]], text[start : piece.end]]
        )
        if lap <= sizing.overlap and count <= sizing.limit:
            return replace(piece, start=start, text=text[start : piece.end], tokens=count)
        taken += 1
    return piece


def chunk_named(chunker: Chunker, text: str, where: str) -> list[Chunk]:
    """``chunker.chunk(text)``; text it cannot cut (a NUL byte, a lone surrogate) is an
    InputError naming the text (``where``: "document 3 (source 'a.pdf')") and the fix."""
    try:
        return chunker.chunk(text)
    except InputError as exc:
        fix = (
            " (PDF extractors leave them; drop them first: text.replace('\\x00', ''))"
            if "NUL" in str(exc)
            else ""
        )
        raise InputError(f"{where}: {exc}{fix}" if where else f"{exc}{fix}") from None


def check_window(found: Sequence[Piece], sizing: Sizing, where: str) -> None:
    """Warn (:class:`WindowWarning`) when a piece holds more tokens than the known window.

    Only reached with a ready chunker or a non-additive counter whose re-count
    found more than its sums; chunk sizes above a known window are refused at
    construction.
    """
    window = sizing.window
    if window is None or not found:
        return
    over = [p.tokens for p in found if p.tokens > window.tokens]
    if over:
        warnings.warn(
            f"{where}: {len(over)} chunk(s) hold more than the {window.tokens} content tokens "
            f"{window.model} reads (largest {max(over)}): the model would truncate them",
            WindowWarning,
            stacklevel=3,
        )
