"""Chunkers sized for an embedder: the study's parameters scaled to the model's window."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from rechunk.chunkers import (
    CDCChunker,
    CodeChunker,
    FixedChunker,
    RecursiveChunker,
    StructuredChunker,
    code_chunker_for,
)
from rechunk.chunking.chunk import Chunker
from rechunk.errors import ConfigError
from rechunk.reuse.embedding import Embedder

__all__ = [
    "DEFAULT_POLICY",
    "KINDS",
    "POLICIES",
    "STUDY_HARD_MAX",
    "code_policy_for",
    "policy_for",
    "sized_params",
]

#: The study's frozen parameters (for a 512-token model window).
STUDY_HARD_MAX = 512
POLICIES = ("structured", "fixed", "recursive", "cdc")
#: every kind :func:`policy_for` builds: the policies above, which chunk any text, and the
#: code policy, which needs a language (``policy_for(embedder, "code", language="go")``)
KINDS = (*POLICIES, "code")
#: The policy sync and the command line use unless told otherwise: it re-embeds least
#: on the dev revisions and retrieves at least as well (docs/benchmarks.md).
DEFAULT_POLICY = "structured"


def _scaled(value: int, scale: float) -> int:
    return max(1, int(value * scale))


def sized_params(kind: str, content_tokens: int | None) -> dict[str, int]:
    """The parameters :func:`policy_for` gives a ``kind`` for a model reading ``content_tokens``.

    The study's sizes (fixed 304, recursive 400, cdc 176/352, structured 280/400,
    code 253/422, hard maximum 512), scaled by ``content_tokens / 512`` when that is below 1
    (``None``: unknown window, the study's sizes).
    """
    content = STUDY_HARD_MAX if content_tokens is None else content_tokens
    if content < 8:
        raise ConfigError(f"a model window of {content} content tokens is too small to chunk for")
    scale = min(1.0, content / STUDY_HARD_MAX)
    params: dict[str, int]
    if kind == "fixed":
        params = {"max_tokens": _scaled(304, scale)}
    elif kind == "recursive":
        params = {"target_tokens": _scaled(400, scale)}
    elif kind == "structured":
        params = {"min_tokens": _scaled(280, scale), "max_tokens": _scaled(400, scale)}
    elif kind == "cdc":
        params = {"min_tokens": _scaled(176, scale), "max_tokens": _scaled(352, scale)}
    elif kind == "code":
        params = {"min_tokens": _scaled(253, scale), "max_tokens": _scaled(422, scale)}
    else:
        raise ConfigError(f"unknown policy {kind!r}; choose from {', '.join(KINDS)}")
    params["hard_max_tokens"] = min(STUDY_HARD_MAX, content)
    return params


def policy_for(embedder: Embedder, kind: str = DEFAULT_POLICY, **overrides: Any) -> Chunker:
    """A chunker of ``kind`` sized so that no chunk is ever truncated by ``embedder``.

    The study's parameters (fixed 304, recursive 400, cdc 176/352, hard maximum
    512) and the structured policy's (280/400) are scaled by
    ``(max_input_tokens - special tokens) / 512`` when the model reads fewer than
    512 content tokens (all-MiniLM-L6-v2: 254/512, so fixed 150, recursive 198,
    cdc 87/174, structured 138/198, code 125/209, hard maximum 254). Tokens are
    counted with the embedder's own tokenizer when it exposes one
    (``embedder.tokenizer``). ``overrides`` replace any parameter.

    ``kind="code"`` needs ``language=`` (``"python"``, ``"rust"``, ...; see
    :func:`rechunk.chunkers.language_for`) and returns a
    :class:`~rechunk.CodeChunker` (``ConfigError`` for a language without a grammar).
    """
    if not hasattr(embedder, "max_input_tokens") or not hasattr(embedder, "model_id"):
        raise ConfigError(
            f"policy_for takes an embedder (its model_id and max_input_tokens), not a "
            f"{type(embedder).__name__}"
        )
    content, tokenizer = _window(embedder, overrides)
    params = sized_params(kind, content)
    if kind == "code":
        language = overrides.pop("language", None)
        if language is None:
            raise ConfigError(
                "the code policy needs language=, e.g. policy_for(embedder, 'code', "
                "language='python')"
            )
        params.update(overrides)
        return CodeChunker(language, tokenizer=tokenizer, **params)
    params.update(overrides)
    factories: dict[str, Any] = {
        "fixed": FixedChunker,
        "recursive": RecursiveChunker,
        "structured": StructuredChunker,
        "cdc": CDCChunker,
    }
    chunker: Chunker = factories[kind](tokenizer=tokenizer, **params)
    return chunker


def code_policy_for(
    embedder: Embedder, path_or_language: str | PurePath, **overrides: Any
) -> tuple[Chunker, str | None]:
    """The code policy for a file (by its suffix) or a language, sized for ``embedder`` as
    :func:`policy_for` sizes it: ``(chunker, None)``; for a language without a grammar
    here, or without the ``code`` extra, the recursive policy with chunks of about the
    same size and the reason, one line for a report (:func:`rechunk.chunkers.code_chunker_for`).
    This is what ``rechunk sync`` gives each source file."""
    content, tokenizer = _window(embedder, overrides)
    params: dict[str, Any] = {**sized_params("code", content), **overrides}
    return code_chunker_for(path_or_language, tokenizer=tokenizer, **params)


def _window(embedder: Embedder, overrides: dict[str, Any]) -> tuple[int, Any]:
    """The content tokens ``embedder`` reads and the tokenizer to count them with
    (``overrides["tokenizer"]``, popped, else the embedder's own)."""
    window = embedder.max_input_tokens
    special = int(getattr(embedder, "special_tokens", 0) or 0)
    content = STUDY_HARD_MAX if window is None else window - special
    if content < 8:
        raise ConfigError(f"{embedder.model_id} reads only {content} content tokens")
    return content, overrides.pop("tokenizer", getattr(embedder, "tokenizer", None))
