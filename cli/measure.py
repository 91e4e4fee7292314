"""``rechunk measure OLD NEW``: the edit fraction of a revision pair and, per chunker, its
recompute fraction R_c, chunks old/new and tokens to embed. Each file is read by the parser
of its format, as ``rechunk sync`` reads it, and the chunkers are sized for the model, as
sync sizes them (``--study-sizes``: the study's parameters). The chunkers by name with the
study's parameters are here too; ``rechunk bench`` uses them."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rechunk.chunking.chunk import Chunker
from rechunk.cli import compose
from rechunk.cli.options import ModelOptions, debug_option, model_option
from rechunk.cli.output import EXIT_OK
from rechunk.errors import ConfigError, InputError

__all__ = [
    "CHUNKER_NAMES",
    "CODE_CHUNKER",
    "MeasureArgs",
    "add_parser",
    "execute",
    "make_chunker",
    "measure_pair",
    "run",
]


@dataclass(frozen=True)
class MeasureArgs(ModelOptions):
    """``rechunk measure``'s arguments."""

    old: str
    new: str
    chunker: tuple[str, ...] | None
    lang: str | None
    tokenizer: str | None
    encoding: str | None
    study_sizes: bool
    json: bool


CHUNKER_NAMES = ("fixed", "recursive", "cdc", "structured")
#: the code policy: measured where the language is known (a pair's lang, a file's suffix)
CODE_CHUNKER = "code"


def make_chunker(
    name: str, tokenizer: Any = None, language: str | None = None, embedder: Any = None
) -> Chunker:
    """The chunker ``name`` (``code``: of ``language``) sized for ``embedder`` as sync sizes
    it, else with the study's default parameters (what ``rechunk bench`` measures)."""
    from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker, StructuredChunker

    factories: dict[str, Callable[..., Chunker]] = {
        "fixed": FixedChunker,
        "recursive": RecursiveChunker,
        "cdc": CDCChunker,
        "structured": StructuredChunker,
    }
    if name != CODE_CHUNKER and name not in factories:
        raise ConfigError(f"unknown chunker {name!r}; choose from {', '.join(factories)}")
    if name == CODE_CHUNKER and language is None:
        raise ConfigError("the code chunker needs a language (--lang, or a file suffix)")
    if embedder is not None:
        from rechunk.chunking.policy import policy_for

        overrides: dict[str, Any] = {"tokenizer": tokenizer} if tokenizer else {}
        if name == CODE_CHUNKER:
            overrides["language"] = language
        return policy_for(embedder, name, **overrides)
    if name == CODE_CHUNKER:
        from rechunk.chunkers.code import CodeChunker

        return CodeChunker(str(language), tokenizer=tokenizer)
    return factories[name](tokenizer=tokenizer)


# -- measure ------------------------------------------------------------------------------


def read_document(path: Path, encoding: str | None = None) -> str:
    """The text ``rechunk sync`` chunks for the file at ``path``: read by the parser of its
    format (a PDF's text without running headers, a web page's without its menus, a code
    file as it is). InputError for a file no parser reads, one that does not parse, or a
    file of records (several documents: measure compares one with one)."""
    from rechunk.sources.base import ParseError
    from rechunk.sources.documents import documents_from_file
    from rechunk.sources.files import read_bytes
    from rechunk.sources.registry import ParseOptions

    data = read_bytes(path)  # a FIFO or a device is refused, never opened to block
    try:
        found = documents_from_file(
            path, path.name, options=ParseOptions(encoding=encoding), data=data
        )
    except ParseError as exc:
        raise InputError(f"{path}: {exc.reason}") from None
    if not found:
        raise InputError(f"{path} holds no text")
    if len(found) > 1:
        raise InputError(
            f"{path} holds {len(found)} documents (a file of records); measure compares one "
            "document with one: write the two versions of a record to files of their own"
        )
    return found[0].text


def measure_pair(old: str, new: str, chunkers: Sequence[tuple[str, Chunker]]) -> dict[str, Any]:
    """The ``rechunk measure`` report for one revision pair."""
    from rechunk.chunking.measure import edit_band, edit_fraction, recompute_fraction

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


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "measure",
        parents=[debug_option()],
        help="edit fraction and recompute fraction R_c of a revision pair",
        description="Print the edit fraction and band of OLD -> NEW and, per chunker, "
        "the recompute fraction R_c, chunks old/new and tokens to embed vs total.",
    )
    p.add_argument(
        "old",
        metavar="OLD_FILE",
        help="the previous version (any file sync reads: Markdown, PDF, DOCX, HTML, code, ...)",
    )
    p.add_argument("new", metavar="NEW_FILE", help="the new version (read as OLD_FILE is)")
    p.add_argument(
        "--chunker",
        action="append",
        choices=[*CHUNKER_NAMES, CODE_CHUNKER, "all"],
        help="repeatable; default all (code too when the files are source code)",
    )
    p.add_argument(
        "--lang",
        metavar="LANGUAGE",
        help="the programming language of the code chunker (default: by the files' suffix, "
        "or a script's #! line)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json to count tokens with (default: all-MiniLM-L6-v2's)",
    )
    p.add_argument(
        "--encoding",
        metavar="NAME",
        help="the files' encoding when they are not UTF-8 (as sync's --encoding)",
    )
    model_option(p)
    p.add_argument(
        "--study-sizes",
        action="store_true",
        help="the study's chunk sizes (for a 512-token window, as rechunk bench uses), not "
        "those sync gives the model",
    )
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(MeasureArgs.from_args(args))


def execute(args: MeasureArgs) -> int:
    from rechunk.sources.documents import code_language

    old = read_document(Path(args.old), args.encoding)
    new = read_document(Path(args.new), args.encoding)
    language = args.lang or code_language(args.new, new) or code_language(args.old, old)
    names = args.chunker or ["all"]
    if "all" in names:  # the code policy beside the others when the files are code
        names = [*CHUNKER_NAMES, *([CODE_CHUNKER] if language else [])]
    embedder = None if args.study_sizes else compose.open_embedder(args)
    chunkers = [
        (name, make_chunker(name, args.tokenizer, language, embedder))
        for name in dict.fromkeys(names)
    ]
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
