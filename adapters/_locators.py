"""Where each chunk of a loaded document lies in its file, for the frameworks' splitters.

``rechunk sync`` writes each chunk's locators (``pages``, ``section``, ``rows``,
``slides``...: :func:`rechunk.sources.locate`) beside it. A framework's splitter sees only
a document's text and metadata, so :class:`~rechunk.adapters.langchain_loader.RechunkLoader`
and :class:`~rechunk.adapters.llamaindex_reader.RechunkReader` leave each document's parse
here, and rechunk's splitters look it up by the document object: an entry lives as long
as its document does (a weak reference), and holds for that document only while its text
is the text that was parsed. A copy of the document (a pickle sent to another process, a
text the user cleaned) finds nothing, and its chunks carry the document's metadata only,
as any other splitter's would. No framework is imported here.
"""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
import weakref
from collections.abc import Mapping
from typing import Any

from rechunk.errors import LocatorWarning
from rechunk.sources.base import RANGED_LOCATOR_KEYS, Locator, Parsed

__all__ = [
    "locate_piece",
    "locator_digest",
    "locator_for",
    "remember",
    "warn_unlocated",
]

#: ``id(document) -> (weak reference to it, its parse, its locator once asked for)``
_KNOWN: dict[int, tuple[weakref.ref[Any], Parsed, list[Locator]]] = {}
# re-entrant: a garbage collection may run inside a locked section (any allocation starts
# one) and free a remembered document, whose callback then takes the lock in that thread
_LOCK = threading.RLock()


def remember(document: object, parsed: Parsed) -> None:
    """Keep ``parsed`` as the parse of ``document`` for as long as ``document`` lives."""
    key = id(document)

    def forget(ref: weakref.ref[Any]) -> None:
        with _LOCK:
            entry = _KNOWN.get(key)
            if entry is not None and entry[0] is ref:
                del _KNOWN[key]

    made: list[Locator] = []
    entry = (weakref.ref(document, forget), parsed, made)
    with _LOCK:
        _KNOWN[key] = entry


def locator_for(document: object, text: str) -> Locator | None:
    """The locator of ``document`` when a loader parsed it and ``text``, the text to be
    split, is still the text it parsed; else None."""
    with _LOCK:
        entry = _KNOWN.get(id(document))
    if entry is None or entry[0]() is not document:
        return None
    _, parsed, made = entry
    if parsed.text != text:
        return None
    if not made:  # blocks are indexed once, on the first split that asks
        made.append(Locator(parsed))
    return made[0]


def locate_piece(locator: Locator, start: int, end: int, own: tuple[int, int]) -> dict[str, Any]:
    """Where a chunk's text ``[start, end)`` lies, its overlap included: the ranges
    (``pages``, ``lines``...) cover all of it, while ``section`` and the other keys are
    those of the chunk's ``own`` span, as ``rechunk sync`` gives them (a few words of
    overlap from the section before do not make the chunk that section's). An overlap
    from another sheet (or record) leaves the ranges the own span's: numbered in another
    sheet, its rows are not this one's."""
    located = locator(*own)
    if (start, end) == own:
        return located
    quoted = locator(start, end)
    # an overlap from another sheet (rows restart in each) is not counted in this one's rows
    scope = [k for k in located if k not in RANGED_LOCATOR_KEYS and k != "section"]
    if all(quoted.get(k) == located[k] for k in scope):
        located.update({k: v for k, v in quoted.items() if k in RANGED_LOCATOR_KEYS})
    return located


def locator_digest(parsed: Parsed) -> str:
    """A digest of where each block of ``parsed`` lies: its span, kind and heading level
    (which give ``section``) and its locator (pages, lines, slides...).

    A framework that decides by a document's text and metadata whether to split it again
    (LlamaIndex's docstore and ingestion cache) would otherwise keep the old pages of a
    PDF whose text did not change but moved to other pages, or the old line of a record
    that a record inserted above it moved: with this in the document's metadata, such a
    document counts as changed, and its chunks get their new locators."""
    blocks = [(b.start, b.end, b.kind, b.level, b.locator, b.pieces) for b in parsed.blocks]
    encoded = json.dumps(blocks, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()[:16]


def _read_by_a_loader(metadata: Mapping[str, Any]) -> bool:
    """Whether metadata is that of a document rechunk's loaders read (``format`` and a
    ``parser`` naming it: ``pdf/3 pypdfium2 ...``)."""
    fmt, parser = metadata.get("format"), metadata.get("parser")
    return isinstance(fmt, str) and isinstance(parser, str) and parser.startswith(f"{fmt}/")


def warn_unlocated(
    documents: list[tuple[Mapping[str, Any], bool]], stacklevel: int, use: str = ""
) -> None:
    """A :class:`~rechunk.errors.LocatorWarning` when any ``(metadata, located)`` pair is
    a document a loader read that has no locator here (a copy, a pickle, a changed text,
    or its text alone: ``use`` names the call that would have found it): its chunks would
    lose their pages without a word."""
    lost = sum(1 for metadata, located in documents if not located and _read_by_a_loader(metadata))
    if not lost:
        return
    how = (
        f"as text and metadata: their chunks carry no pages, section or rows; call {use}"
        if use
        else "as a copy (pickled to a worker, restored from a store, rebuilt) or with their "
        "text changed: their chunks carry no pages, section or rows; split the documents "
        "the loader returned, in its process"
    )
    warnings.warn(
        f"{lost} document(s) read by RechunkLoader or RechunkReader reached the splitter {how}",
        LocatorWarning,
        stacklevel=stacklevel + 1,
    )
