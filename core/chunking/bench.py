"""The study's Table-I view: R_c per chunker, language and edit band on revision pairs.

A corpus is a JSON-lines file with one revision pair per line: ``old`` and
``new`` (required), ``id`` and ``lang`` (optional strings; ids must differ;
``lang`` defaults to ``"?"``). The edit band is computed from the texts with
:func:`edit_fraction`. R_c is article-macro-averaged: the mean of the per-pair
values; a pair whose two texts are the same is no edit, and is left out of every band
(counted as ``unchanged``; it is still chunked for the control). The no-edit control
chunks each old text a second time and takes R_c of that against the first: any
chunker that is not deterministic shows above 0.

For source code, ``lang`` is the programming language (``python``, ``go``...), and a
:class:`ByLanguage` chunker (the code policy) cuts each pair with its language's grammar.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import mean, median
from typing import Any

from rechunk.chunking.chunk import Chunk
from rechunk.chunking.measure import EDIT_BANDS, edit_band, edit_fraction, recompute_fraction
from rechunk.errors import ConfigError, InputError

__all__ = ["BANDS", "ByLanguage", "load_pairs", "plot", "run_bench"]

BANDS = (*(name for name, _ in EDIT_BANDS), "extreme")
ChunkFn = Callable[[str], Sequence[Chunk]]


class ByLanguage:
    """A chunk function per pair language, made by ``make(lang)`` on first use (the code
    policy of each programming language): :func:`run_bench` gives each pair the one of
    its ``lang``. A language ``make`` refuses is a failure of that pair, as any error is."""

    def __init__(self, make: Callable[[str], ChunkFn]) -> None:
        self._make = make
        self._made: dict[str, ChunkFn] = {}

    def for_lang(self, lang: str) -> ChunkFn:
        if lang not in self._made:
            self._made[lang] = self._make(lang)
        return self._made[lang]


def load_pairs(path: str | Path) -> list[dict[str, Any]]:
    """Revision pairs from a JSON-lines file (see the module docstring)."""
    pairs = []
    first_line: dict[str, int] = {}
    try:
        # lines end at "\n" only: U+2028 and the like are text inside a JSON string
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read corpus {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not JSON ({exc})") from exc
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("old"), str)
            or not isinstance(row.get("new"), str)
        ):
            raise InputError(f"{path}:{number}: each line needs string fields 'old' and 'new'")
        row.setdefault("id", f"line-{number}")
        row.setdefault("lang", "?")
        for field in ("id", "lang"):
            if not isinstance(row[field], str):
                raise InputError(f"{path}:{number}: {field!r} must be a string, got {row[field]!r}")
        if row["id"] in first_line:
            raise InputError(
                f"{path}:{number}: id {row['id']!r} is also the id of line "
                f"{first_line[row['id']]}; every pair needs its own"
            )
        first_line[row["id"]] = number
        pairs.append(row)
    if not pairs:
        raise InputError(f"{path} holds no revision pairs")
    return pairs


def run_bench(
    pairs: Sequence[Mapping[str, Any]], chunkers: Mapping[str, ChunkFn | ByLanguage]
) -> dict[str, Any]:
    """R_c per chunker per language and band, the no-edit control, failures and sizes."""
    if not chunkers:
        raise ConfigError("no chunker to benchmark")
    bands = {}
    for pair in pairs:
        fraction = pair.get("edit_fraction")
        if not isinstance(fraction, float):
            fraction = edit_fraction(pair["old"], pair["new"])
        bands[pair["id"]] = edit_band(fraction)
    langs = sorted({str(p["lang"]) for p in pairs})
    unchanged = {p["id"] for p in pairs if p["old"] == p["new"]}
    out: dict[str, Any] = {
        "pairs": len(pairs),
        "unchanged": len(unchanged),
        "languages": langs,
        "chunkers": {},
    }
    for name, chunker in chunkers.items():
        values: dict[str, float] = {}
        control = 0.0
        failures: list[dict[str, str]] = []
        tokens: list[int] = []
        nbytes = 0
        seconds = 0.0
        for pair in pairs:
            try:
                chunk = (
                    chunker.for_lang(str(pair["lang"]))
                    if isinstance(chunker, ByLanguage)
                    else chunker
                )
                t0 = time.perf_counter()
                old, new = list(chunk(pair["old"])), list(chunk(pair["new"]))
                seconds += time.perf_counter() - t0
                again = list(chunk(pair["old"]))  # the control: the same text, chunked again
            except Exception as exc:  # a failure is a result of the benchmark
                failures.append(
                    {
                        "id": str(pair["id"]),
                        "lang": str(pair["lang"]),
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
                continue
            nbytes += len(pair["old"].encode("utf-8")) + len(pair["new"].encode("utf-8"))
            if pair["id"] not in unchanged:
                values[pair["id"]] = recompute_fraction(old, new)
            control = max(control, recompute_fraction(old, again))
            tokens.extend(c.tokens for c in new)
        cells: dict[str, dict[str, Any]] = {}
        for lang in langs:
            for band in (*BANDS, "all"):
                picked = [
                    values[p["id"]]
                    for p in pairs
                    if p["lang"] == lang
                    and p["id"] in values
                    and (band == "all" or bands[p["id"]] == band)
                ]
                cells[f"{lang}/{band}"] = {
                    "n": len(picked),
                    "recompute_fraction": mean(picked) if picked else None,
                }
        out["chunkers"][name] = {
            "cells": cells,
            "control_max": control,
            "failures": failures,
            "median_tokens": median(tokens) if tokens else None,
            "max_tokens": max(tokens) if tokens else None,
            "mb_per_s": nbytes / 1e6 / seconds if seconds else None,
        }
    return out


def format_table(result: Mapping[str, Any], shown: Callable[[str], str] = str) -> str:
    """Plain-text tables, one per language: a row per chunker, a column per edit band.
    ``shown`` makes a corpus's language names printable (the CLI escapes controls)."""
    columns = (*BANDS, "all")
    lines: list[str] = []
    for lang in result["languages"]:
        title = "no language given" if lang == "?" else shown(lang)
        lines += [
            f"R_c, {title}",
            f"{'chunker':<14}" + "".join(f"{c:>14}" for c in columns) + f"{'control':>9}",
        ]
        for name, row in result["chunkers"].items():
            cells = []
            for band in columns:
                cell = row["cells"][f"{lang}/{band}"]
                value = cell["recompute_fraction"]
                cells.append(f"{'-' if value is None else f'{value:.1%}'} (n={cell['n']})")
            failed = sum(1 for f in row["failures"] if f["lang"] == lang)
            failures = f"  failures: {failed}" if failed else ""
            lines.append(
                f"{name:<14}"
                + "".join(f"{c:>14}" for c in cells)
                + f"{row['control_max']:>9.1%}"
                + failures
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def plot(result: Mapping[str, Any], path: str | Path) -> None:
    """A PNG chart of R_c by edit band per chunker, one panel per language."""
    from rechunk._optional import require

    matplotlib = require("matplotlib", "bench")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = result["languages"]
    fig, axes = plt.subplots(1, len(langs), figsize=(5 * len(langs), 3.8), squeeze=False)
    names = list(result["chunkers"])
    width = 0.8 / max(1, len(names))
    for ax, lang in zip(axes[0], langs):
        for i, name in enumerate(names):
            cells = result["chunkers"][name]["cells"]
            ys = [(cells[f"{lang}/{b}"]["recompute_fraction"] or 0.0) * 100 for b in BANDS]
            ax.bar([x + i * width for x in range(len(BANDS))], ys, width, label=name)
        ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(BANDS))], BANDS)
        ax.set_title(f"R_c by edit band ({lang})")
        ax.set_ylabel("R_c (%)")
        ax.set_ylim(0, 100)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
