"""The ``rechunk`` command line.

Exit codes: 0 ok, 1 partial failure (some files skipped), 2 usage or
configuration error, 3 store or embedder error. Errors print one line; the
traceback only with ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rechunk.chunk import Chunker
from rechunk.errors import (
    CacheError,
    ConfigError,
    EmbeddingError,
    InputError,
    MissingDependencyError,
    RechunkError,
    StoreError,
)

__all__ = ["main", "read_text_file"]

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_BACKEND = 0, 1, 2, 3
CHUNKER_NAMES = ("fixed", "recursive", "cdc")


def read_text_file(path: Path) -> str:
    """A file's text as UTF-8; invalid UTF-8 or NUL bytes are an :class:`InputError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not valid UTF-8 (byte offset {exc.start})") from exc
    if "\x00" in text:
        raise InputError(f"{path} contains NUL bytes; is it a binary file?")
    return text


def make_chunker(name: str, tokenizer: Any = None) -> Chunker:
    """A chunker with the study's default parameters."""
    from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker

    factories: dict[str, Callable[..., Chunker]] = {
        "fixed": FixedChunker,
        "recursive": RecursiveChunker,
        "cdc": CDCChunker,
    }
    if name not in factories:
        raise ConfigError(f"unknown chunker {name!r}; choose from {', '.join(factories)}")
    return factories[name](tokenizer=tokenizer)


# -- measure ------------------------------------------------------------------------------


def measure_pair(
    old: str, new: str, chunkers: Sequence[tuple[str, Chunker]]
) -> dict[str, Any]:
    """The ``rechunk measure`` report for one revision pair."""
    from rechunk.measure import edit_band, edit_fraction, recompute_fraction

    fraction = edit_fraction(old, new)
    rows = []
    for name, chunker in chunkers:
        old_chunks, new_chunks = chunker.chunk(old), chunker.chunk(new)
        old_inputs = {c.text for c in old_chunks}
        distinct: dict[str, int] = {}
        for c in new_chunks:
            distinct.setdefault(c.text, c.tokens)
        rows.append(
            {
                "chunker": name,
                "policy": chunker.policy_id,
                "recompute_fraction": recompute_fraction(old_chunks, new_chunks),
                "chunks_old": len(old_chunks),
                "chunks_new": len(new_chunks),
                "tokens_to_embed": sum(t for s, t in distinct.items() if s not in old_inputs),
                "tokens_total": sum(distinct.values()),
            }
        )
    return {"edit_fraction": fraction, "edit_band": edit_band(fraction), "chunkers": rows}


def _cmd_measure(args: argparse.Namespace) -> int:
    old = read_text_file(Path(args.old))
    new = read_text_file(Path(args.new))
    names = CHUNKER_NAMES if args.chunker == "all" else (args.chunker,)
    chunkers = [(name, make_chunker(name, args.tokenizer)) for name in names]
    report = measure_pair(old, new, chunkers)
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"edit fraction: {report['edit_fraction']:.2%} ({report['edit_band']})")
    header = f"{'chunker':<10} {'R_c':>7} {'chunks old/new':>15} {'tokens to embed / total':>24}"
    print(header)
    for row in report["chunkers"]:
        counts = f"{row['chunks_old']}/{row['chunks_new']}"
        tokens = f"{row['tokens_to_embed']:,} / {row['tokens_total']:,}"
        print(f"{row['chunker']:<10} {row['recompute_fraction']:>7.1%} {counts:>15} {tokens:>24}")
    return EXIT_OK


# -- entry point --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rechunk",
        description="Revision-aware chunking and embedding reuse: re-embed only what changed.",
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    measure = sub.add_parser(
        "measure",
        help="edit fraction and recompute fraction R_c of a revision pair",
        description="Print the edit fraction and band of OLD -> NEW and, per chunker, "
        "the recompute fraction R_c, chunks old/new and tokens to embed vs total.",
    )
    measure.add_argument("old", metavar="OLD_FILE", help="the previous version (UTF-8 text)")
    measure.add_argument("new", metavar="NEW_FILE", help="the new version (UTF-8 text)")
    measure.add_argument(
        "--chunker", choices=[*CHUNKER_NAMES, "all"], default="all", help="default: all"
    )
    measure.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json to count tokens with (default: all-MiniLM-L6-v2's)",
    )
    measure.add_argument("--json", action="store_true", help="print a JSON report")
    measure.set_defaults(func=_cmd_measure)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except KeyboardInterrupt:
        print("rechunk: interrupted", file=sys.stderr)
        return 130
    except RechunkError as exc:
        if args.debug:
            raise
        print(f"rechunk: error: {exc}", file=sys.stderr)
        if isinstance(exc, (StoreError, EmbeddingError, CacheError)):
            return EXIT_BACKEND
        if isinstance(exc, (ConfigError, InputError, MissingDependencyError)):
            return EXIT_USAGE
        return EXIT_BACKEND


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
