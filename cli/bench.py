"""``rechunk bench CORPUS.jsonl``: the study's Table-I view of a corpus of revision pairs,
R_c per chunker, language and edit band, with the no-edit control and failures, and
optionally a chart."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rechunk.cli.measure import CHUNKER_NAMES, CODE_CHUNKER, make_chunker
from rechunk.cli.options import Parsed, debug_option
from rechunk.cli.output import EXIT_OK, EXIT_PARTIAL, print_json
from rechunk.errors import ConfigError
from rechunk.sources.files import printable

__all__ = ["BenchArgs", "add_parser", "execute", "run"]


@dataclass(frozen=True)
class BenchArgs(Parsed):
    """``rechunk bench``'s arguments."""

    corpus: str
    chunker: tuple[str, ...] | None
    tokenizer: str | None
    plot: str | None
    json: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench",
        parents=[debug_option()],
        help="R_c per chunker, language and edit band on a corpus of revision pairs",
        description="The study's Table-I view on a JSON-lines corpus (fields old, new, and "
        "optionally id, lang): R_c per chunker per language and edit band, the no-edit "
        "control and failures.",
    )
    p.add_argument("corpus", metavar="CORPUS.jsonl")
    p.add_argument(
        "--chunker",
        action="append",
        choices=[*CHUNKER_NAMES, CODE_CHUNKER, "all"],
        help="repeatable; default all (code too when every pair's lang is a programming "
        "language the code policy reads)",
    )
    p.add_argument("--tokenizer", metavar="PATH", help="tokenizer.json to count with")
    p.add_argument("--plot", metavar="FILE.png", help="write a chart of R_c by band")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(BenchArgs.from_args(args))


def execute(args: BenchArgs) -> int:
    from rechunk.chunking.bench import ByLanguage, format_table, load_pairs, plot, run_bench

    pairs = load_pairs(args.corpus)
    chart = _chart_path(args.plot) if args.plot else None
    names = args.chunker or ["all"]
    code_pairs = all(_is_language(p["lang"]) for p in pairs)
    if "all" in names:  # the code policy beside the others when every pair is code
        names = [*CHUNKER_NAMES, *([CODE_CHUNKER] if code_pairs else [])]
    chunkers: dict[str, Any] = {
        name: make_chunker(name, args.tokenizer).chunk
        for name in dict.fromkeys(names)
        if name != CODE_CHUNKER
    }
    if CODE_CHUNKER in names:
        chunkers[CODE_CHUNKER] = ByLanguage(
            lambda lang: make_chunker(CODE_CHUNKER, args.tokenizer, lang).chunk
        )
    result = run_bench(pairs, chunkers)
    if chart is not None:
        plot(result, chart)
    if args.json:
        print_json(result)
    else:
        same = result["unchanged"]
        left_out = f" ({same} with no edit, left out of the bands)" if same else ""
        print(
            f"{result['pairs']} revision pairs{left_out}; R_c article-macro-averaged per "
            "language/band"
        )
        print(format_table(result, printable))
        code = sum(1 for p in pairs if _is_language(p["lang"]))
        if "all" in (args.chunker or ["all"]) and 0 < code < len(pairs):
            print(
                f"the code policy is left out: {len(pairs) - code} of the {len(pairs)} pairs "
                "are not in a programming language it reads (bench the code pairs alone to "
                "see it beside the others)"
            )
        if chart is not None:
            print(f"chart written to {chart}")
    failed = any(row["failures"] for row in result["chunkers"].values())
    return EXIT_PARTIAL if failed else EXIT_OK


_CHART_SUFFIXES = (".png", ".svg", ".pdf")


def _chart_path(name: str) -> Path:
    """Where ``--plot`` writes (a name without suffix gets .png), checked writable up front."""
    path = Path(name)
    if path.name in ("", ".", ".."):
        raise ConfigError(f"--plot {name!r}: give a file name, such as bands.png")
    if path.suffix and path.suffix.lower() not in _CHART_SUFFIXES:
        raise ConfigError(
            f"--plot {name!r}: a chart is written as {', '.join(_CHART_SUFFIXES)} (by the suffix)"
        )
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write the chart {path}: {exc.strerror or exc}") from exc
    if not existed:
        path.unlink()
    return path


def _is_language(name: object) -> bool:
    """Whether ``name`` is a language the code policy has a grammar table for."""
    from rechunk.chunkers.code_languages import spec_for

    try:
        spec_for(str(name))
    except ConfigError:
        return False
    return True
