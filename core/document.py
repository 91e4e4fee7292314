"""Documents: a stable id, its text, and the revision the text is."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rechunk.errors import InputError
from rechunk.reuse.identity import is_utf8, text_revision

__all__ = [
    "HEADING_PATH_KEY",
    "MAX_NESTING",
    "RANGED_LOCATOR_KEYS",
    "Document",
    "flat_problem",
    "is_utf8",  # what a doc_id must be, for the rooms that may not import reuse
    "json_problem",
    "locator_as_text",
]

_INT64 = 1 << 63
#: how deep metadata may nest lists and dicts (far past any real metadata; a value nested
#: a thousand deep would exhaust the recursion of JSON encoders and of these checks)
MAX_NESTING = 64


def json_problem(value: object, where: str, depth: int = 0) -> str | None:
    """Why ``value`` is not a JSON value that every store reads back unchanged, or None.

    Allowed: None, bool, str (valid UTF-8: no lone surrogate), int within 64 bits,
    finite float, list, and dict with non-empty str keys, nested up to
    :data:`MAX_NESTING` lists and dicts deep (deeper, JSON encoders and Python's own
    recursion give out).
    """
    if depth > MAX_NESTING:
        return f"{where}: lists and dicts nested more than {MAX_NESTING} deep"
    if value is None or type(value) is bool:
        return None
    if type(value) is str:
        return None if is_utf8(value) else f"{where}: str holds a lone surrogate"
    if type(value) is int:
        fits = -_INT64 <= value < _INT64
        return None if fits else f"{where}: int {value} does not fit in 64 bits"
    if type(value) is float:
        return None if math.isfinite(value) else f"{where}: {value} is not a JSON number"
    if type(value) is list:
        for i, item in enumerate(value):
            problem = json_problem(item, f"{where}[{i}]", depth + 1)
            if problem:
                return problem
        return None
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str or not key or not is_utf8(key):
                return f"{where}: key {key!r} is not a non-empty str"
            problem = json_problem(item, f"{where}[{key!r}]", depth + 1)
            if problem:
                return problem
        return None
    return (
        f"{where}: a {type(value).__name__} is not a JSON value (use str, int, float, bool, "
        f"None, list or dict), so it could not be read back unchanged"
    )


def _held(value: Any) -> str:
    """``a dict``, ``a list of dict and str``: what a value is, never what it says (a
    value may be a document's text, which no error message carries)."""
    if type(value) is not list:
        return f"a {type(value).__name__}"
    if not value:
        return "an empty list"
    return "a list of " + " and ".join(sorted({type(item).__name__ for item in value}))


def flat_problem(values: Mapping[str, Any], where: str) -> str | None:
    """Why ``values`` is not flat metadata that every store holds (str keys; str, int,
    float or bool values, or non-empty lists of one of those types), or None."""
    for key, value in values.items():
        if type(key) is not str or not key:
            return f"{where}: key {key!r} is not a non-empty str"
        items = value if type(value) is list else [value]
        kinds = {type(item) for item in items}
        if not items or len(kinds) != 1 or not kinds <= {str, int, float, bool}:
            return f"{where}[{key!r}]: {_held(value)} is not a str, int, float, bool or list of one"
        problem = json_problem(value, f"{where}[{key!r}]")
        if problem:
            return problem
    return None


#: the keys of rechunk's parsers' locators that are ``[first, last]`` ranges over what a
#: span overlaps (``rechunk.sources`` makes them), and the one that is a heading path
RANGED_LOCATOR_KEYS = frozenset({"pages", "slides", "lines", "cells", "rows", "chapters"})
HEADING_PATH_KEY = "section"


def locator_as_text(located: Mapping[str, Any]) -> dict[str, Any]:
    """``located`` with the ranges and the heading path of rechunk's locators as text,
    for what holds no lists (LlamaIndex's node metadata: its ``ChromaVectorStore``
    refuses them): a range ``[first, last]`` as ``"first-last"`` (``"3"`` when it is
    one), a heading path as its titles joined by ``" > "``. Other values (a locator of
    one's own) are left as they are."""
    out = dict(located)
    for key, value in located.items():
        if key in RANGED_LOCATOR_KEYS and isinstance(value, list) and len(value) == 2:
            first, last = value
            out[key] = str(first) if first == last else f"{first}-{last}"
        elif key == HEADING_PATH_KEY and isinstance(value, list):
            out[key] = " > ".join(str(v) for v in value)
    return out


@dataclass(frozen=True)
class Document:
    """One version of a document.

    ``text`` holds no NUL byte and no lone surrogate (no chunker reads them:
    :class:`InputError` here, before a sync starts). ``revision`` defaults to a hash of
    ``text``. ``version``, when given, is a
    monotonic number: a sync never lets an older version overwrite a newer one
    already in the store. ``metadata`` must be JSON-serialisable; it is stored
    beside every chunk but never embedded.

    ``locator``, when given, says where a span of ``text`` lies in the source the text
    was parsed from: ``locator(start, end)`` returns flat metadata for the chunk that
    spans ``text[start:end]`` (say ``{"pages": [2, 3], "section": ["Guide", "Setup"]}``:
    str, int, float or bool values, or non-empty lists of one of those, which every store
    holds). A sync stores it with ``metadata`` on that chunk's point (its keys win), so a
    reader can cite the page or section; it is never embedded, and a chunk whose locator
    changed (a paragraph inserted on an earlier page) gets a payload-only update.
    ``rechunk sync`` sets it from the file's parser (see :mod:`rechunk.sources`).
    """

    doc_id: str
    text: str
    revision: str | None = None
    metadata: Mapping[str, Any] | None = None
    version: int | None = field(default=None, kw_only=True)
    locator: Callable[[int, int], Mapping[str, Any]] | None = field(
        default=None, kw_only=True, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.doc_id, str) or not self.doc_id:
            raise InputError("Document.doc_id must be a non-empty str")
        if not is_utf8(self.doc_id):
            raise InputError(f"Document.doc_id {self.doc_id!r} holds a lone surrogate")
        if not isinstance(self.text, str):
            raise InputError(f"Document {self.doc_id!r}: text must be a str")
        if "\x00" in self.text:  # no chunker reads it: refused here, before any sync starts
            raise InputError(
                f"Document {self.doc_id!r}: text holds a NUL byte at offset "
                f"{self.text.index(chr(0))}"
            )
        try:
            if self.revision is None:
                object.__setattr__(self, "revision", text_revision(self.text))
            else:
                self.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(
                f"Document {self.doc_id!r}: text holds a lone surrogate at offset {exc.start}"
            ) from None
        if not isinstance(self.revision, str) or not self.revision or not is_utf8(self.revision):
            raise InputError(f"Document {self.doc_id!r}: revision must be a non-empty str")
        if self.version is not None and (
            type(self.version) is not int or not 0 <= self.version < _INT64
        ):
            raise InputError(f"Document {self.doc_id!r}: version must be a non-negative int")
        if self.locator is not None and not callable(self.locator):
            raise InputError(f"Document {self.doc_id!r}: locator must be a callable (start, end)")
        if self.metadata is not None:
            if not isinstance(self.metadata, Mapping):
                raise InputError(f"Document {self.doc_id!r}: metadata must be a mapping")
            problem = json_problem(dict(self.metadata), f"Document {self.doc_id!r}: metadata")
            if problem:
                raise InputError(problem)
