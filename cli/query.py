"""``rechunk query TEXT``: embed TEXT and print the top chunks of a collection with their
doc_id, where they lie (pages, section, lines and symbol: what their parser recorded),
offsets, score and a short excerpt."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rechunk.cli import compose
from rechunk.cli.options import (
    ModelOptions,
    StoreOptions,
    debug_option,
    model_option,
    store_options,
)
from rechunk.cli.output import EXIT_OK, print_json
from rechunk.errors import ConfigError, InputError, StoreError
from rechunk.sources.files import printable

__all__ = ["QueryArgs", "add_parser", "citation", "execute", "run"]

#: the locator keys a hit is cited by, in the order they are printed
CITED = (
    "pages", "chapters", "slides", "sheet", "rows", "cells", "lines", "record", "symbol",
    "section",
)  # fmt: skip
_RANGES = {
    "pages": "p.", "chapters": "chapter", "slides": "slide", "rows": "row", "cells": "cell",
    "lines": "line",
}  # fmt: skip


@dataclass(frozen=True)
class QueryArgs(StoreOptions, ModelOptions):
    """``rechunk query``'s arguments."""

    text: tuple[str, ...]
    k: int
    json: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "query",
        parents=[debug_option()],
        help="search a collection",
        description="Embed TEXT and print the top chunks with doc_id, where they lie "
        "(pages, section, lines, symbol), offsets, score and a short excerpt.",
    )
    p.add_argument("text", metavar="TEXT", nargs="+", help="words are joined by spaces")
    p.add_argument("-k", type=int, default=5, help="how many chunks (default 5)")
    store_options(p)
    model_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(QueryArgs.from_args(args))


def execute(args: QueryArgs) -> int:
    from rechunk.reuse.identity import is_utf8

    if args.k < 1:
        raise ConfigError(f"-k {args.k}: give a positive number of chunks")
    text = " ".join(args.text)
    if not text.strip():
        raise InputError("the query text is empty")
    if not is_utf8(text):  # bytes the terminal passed that are not UTF-8
        raise InputError("the query text is not valid UTF-8; check the terminal")
    embedder = compose.open_embedder(args)
    tokens = embedder.count_tokens(text) + embedder.special_tokens
    if embedder.max_input_tokens is not None and tokens > embedder.max_input_tokens:
        raise InputError(
            f"the query has {tokens} tokens, but the model reads at most "
            f"{embedder.max_input_tokens}: shorten it"
        )
    opened = compose.open_store(args, create=False)
    try:
        store = compose.read_as_written(opened.store, args.layout, embedder.model_id)
        info = store.collection_info()
        if info is None:
            raise StoreError(f"collection {args.collection!r} does not exist (nothing synced yet)")
        vector = embedder.embed([text])[0]
        hits = store.search(vector, max(1, min(args.k, info.points)))
    finally:
        opened.close()
    rows = [
        {
            "doc_id": p.payload.doc_id,
            "start": p.payload.start,
            "end": p.payload.end,
            "score": round(float(score), 4),
            **{k: p.payload.metadata[k] for k in (*CITED, "language") if k in p.payload.metadata},
            "excerpt": " ".join(p.payload.text.split())[:160],
        }
        for p, score in hits
    ]
    if args.json:
        print_json(rows)
        return EXIT_OK
    if not rows:
        print(f"no chunks: collection {args.collection!r} is empty")
    # a euclidean collection (LangChain's Chroma makes one by default) scores a hit by its
    # distance made negative, so that higher is closer: print the distance itself
    measure = "distance" if info.distance == "euclid" else "score"
    for rank, row in enumerate(rows, 1):
        cited = citation(row)
        where = printable(row["doc_id"]) + (f", {printable(cited)}" if cited else "")
        value = -row["score"] if measure == "distance" else row["score"]
        print(f"{rank}. {where} [{row['start']}:{row['end']}] {measure} {value:.3f}")
        print(f"   {printable(row['excerpt'])}")
    return EXIT_OK


def _span(value: object) -> tuple[str, str] | None:
    """``(first, last)`` of a range locator: ``[3, 4]``, or its text in the llamaindex
    layout (``"3-4"``, ``"3"``); None for anything else."""
    if isinstance(value, list) and len(value) == 2:
        return str(value[0]), str(value[1])
    if isinstance(value, str):
        first, _, last = value.partition("-")
        if first.isdigit() and (last.isdigit() or not last):
            return first, last or first
    return None


def citation(row: dict[str, Any]) -> str:
    """Where a hit lies, for a person: ``p. 3-4``, ``lines 12-30, Cart.add``, ``sheet Q3,
    row 14``, or the heading path (``Guide > Setup``); empty when the parser recorded none."""
    parts = []
    for key in CITED:
        value = row.get(key)
        if value is None or value == "" or value == []:
            continue
        span = _span(value) if key in _RANGES else None
        if span is not None:
            first, last = span
            plural = "pp." if key == "pages" else f"{_RANGES[key]}s"
            parts.append(f"{_RANGES[key]} {first}" if first == last else f"{plural} {first}-{last}")
        elif key == "section":  # a heading path, or its text (the llamaindex layout's)
            path = " > ".join(str(v) for v in value) if isinstance(value, list) else str(value)
            parts.append(path[:80])
        elif key in ("sheet", "record"):
            parts.append(f"{key} {value}")
        else:
            parts.append(str(value))
    return ", ".join(parts)
