"""``rechunk eval QUERIES.jsonl``: miss rate at k and duplicate evidence on a fixed query set.

Composes what ``rechunk query`` composes (the embedder of ``--embedder`` / ``--model``,
the store of ``--store``, the collection checks) around
:func:`rechunk.live.evaluation.evaluate`, for the live collection and, with
``--compare``, a second one (a shadow generation ``rechunk reindex`` built), side by
side. The queries, fragments and doc_ids stay out of the output unless ``--show-text``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rechunk.cli.options import (
    ModelOptions,
    StoreOptions,
    debug_option,
    model_option,
    store_options,
)
from rechunk.errors import ConfigError, InputError, StoreError

__all__ = ["EvalArgs", "add_parser", "execute", "run"]


@dataclass(frozen=True)
class EvalArgs(StoreOptions, ModelOptions):
    """``rechunk eval``'s arguments."""

    queries: str
    compare: str | None
    k: int
    show_text: bool
    json: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``eval`` to the ``rechunk`` subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "eval",
        parents=[debug_option()],
        help="miss rate and duplicate evidence of a collection on a fixed query set",
        description='Embed each query of QUERIES.jsonl (lines {"query", "doc_id", '
        'optionally "fragment"}), search the collection, and report the miss rate at k '
        "(no top-k chunk of the doc_id, containing the fragment's words when given) and "
        "the share of top-k chunks that repeat a higher-ranked one (same input, one "
        "text's words inside the other, or half their word 5-grams shared), per policy; "
        "with --compare, for a "
        "second collection beside it. No query or text is printed without --show-text.",
    )
    p.add_argument("queries", metavar="QUERIES.jsonl", help="one JSON object per line")
    store_options(p)
    p.add_argument(
        "--compare",
        metavar="COLLECTION",
        default=None,
        help="a second collection of the same store (e.g. the shadow generation "
        "rechunk reindex built) measured beside --collection",
    )
    p.add_argument("-k", type=int, default=5, help="chunks per query (default %(default)s)")
    model_option(p)
    p.add_argument(
        "--show-text",
        action="store_true",
        help="also print each query, its doc_id and fragment (left out by default)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)
    return p


def _measure(
    args: EvalArgs, collection: str, model_id: str, queries: list[Any], vectors: Any
) -> Any:
    from rechunk.cli import compose
    from rechunk.live.evaluation import evaluate

    opened = compose.open_store(StoreOptions(args.store, collection, args.layout), create=False)
    try:
        store = compose.read_as_written(opened.store, args.layout, model_id)
        if store.collection_info() is None:
            raise StoreError(f"collection {collection!r} does not exist (nothing synced yet)")
        return evaluate(queries, store, vectors, k=args.k)
    finally:
        opened.close()


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def run(args: argparse.Namespace) -> int:
    return execute(EvalArgs.from_args(args))


def execute(args: EvalArgs) -> int:
    from rechunk.cli import compose
    from rechunk.cli.output import EXIT_OK, print_json
    from rechunk.live.evaluation import read_queries
    from rechunk.sources.files import printable

    if args.k < 1:
        raise ConfigError(f"-k {args.k}: give a positive number of chunks")
    if args.compare is not None and args.compare == args.collection:
        raise ConfigError(f"--compare {args.compare} is --collection itself; name another")
    queries = read_queries(args.queries)
    embedder = compose.open_embedder(args)
    for q in queries:
        tokens = embedder.count_tokens(q.query) + embedder.special_tokens
        if embedder.max_input_tokens is not None and tokens > embedder.max_input_tokens:
            raise InputError(
                f"{args.queries} line {q.line}: the query has {tokens} tokens, but the model "
                f"reads at most {embedder.max_input_tokens}: shorten it"
            )
    vectors = embedder.embed([q.query for q in queries])
    names = [args.collection] + ([args.compare] if args.compare is not None else [])
    reports = [_measure(args, name, embedder.model_id, queries, vectors) for name in names]
    data = [r.to_dict(show_text=args.show_text) for r in reports]
    if args.json:
        print_json({"k": args.k, "queries": len(queries), "generations": data})
        return EXIT_OK
    rows: list[tuple[str, list[str]]] = [
        ("", [printable(d["collection"]) for d in data]),
        ("miss rate", [f"{_rate(d['miss_rate'])} ({d['misses']})" for d in data]),
        ("duplicate ratio", [f"{_rate(d['duplicate_ratio'])} ({d['duplicates']})" for d in data]),
        ("chunks returned", [str(d["chunks"]) for d in data]),
    ]
    for policy in sorted({p for d in data for p in d["policies"]}):
        cells = []
        for d in data:
            t = d["policies"].get(policy)
            cells.append(
                "-" if t is None else f"{_rate(t['miss_rate'])} / {_rate(t['duplicate_ratio'])}"
            )
        rows.append((f"{printable(policy)} miss/dup", cells))
    label = max(len(name) for name, _ in rows)
    widths = [max(len(cells[i]) for _, cells in rows) + 3 for i in range(len(data))]
    print(f"rechunk eval: {len(queries)} queries, top {args.k}")
    for name, cells in rows:
        print(f"  {name:<{label}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    for d in data:
        missed = [row for row in d["per_query"] if row["rank"] is None]
        if missed and not args.show_text:
            lines = ", ".join(str(row["line"]) for row in missed[:20])
            more = " ..." if len(missed) > 20 else ""
            print(f"  missed in {printable(d['collection'])}: lines {lines}{more}")
    if args.show_text:
        for d in data:
            print(f"  {printable(d['collection'])}:")
            for row in d["per_query"]:
                found = "miss" if row["rank"] is None else f"rank {row['rank']}"
                fragment = f" [{printable(row['fragment'])}]" if row["fragment"] else ""
                print(
                    f"    line {row['line']}: {found}, {row['duplicates']} duplicate(s): "
                    f"{printable(row['query'])} -> {printable(row['doc_id'])}{fragment}"
                )
    return EXIT_OK
