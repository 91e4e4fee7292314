"""Memory benchmark: peak memory to chunk one large file, and to plan its sync.

Chunking holds the whole text and per-word and per-character arrays, so its memory
grows with the size of the largest file, not with the corpus. For each policy this
script builds one text of each ``--sizes`` (MB of UTF-8; the new versions of the
dev revision pairs, English and Chinese, repeated) and, in a fresh process each:

* chunks it (default parameters, all-MiniLM-L6-v2's tokenizer) and reports the
  peak resident memory above the process's level just before (the text and the
  tokenizer already loaded), and the time;
* for the default policy only: runs ``rechunk sync FILE --dry-run`` on it (the
  CLI: read, chunk, plan against an empty embedded Qdrant collection; no model
  call) and reports the peak resident memory of that process above a dry run of
  a one-line file; and the same on a log of short lines of the same size (written
  here from a seed: an application log's shape, many small blocks per byte).

    python benchmarks/memory.py            # writes the "memory" section of docs/benchmarks.md
    python benchmarks/memory.py --quick    # 1 and 4 MB, prints only
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report

POLICIES = ("fixed", "recursive", "cdc", "structured")


def build_text(megabytes: float) -> str:
    pairs = _report.load_revisions()
    base = "\n\n".join(pair["new"] for pair in pairs)
    size = int(megabytes * 1_000_000)
    repeats = size // len(base.encode("utf-8")) + 1
    data = ("\n\n".join([base] * repeats)).encode("utf-8")[:size]
    return data.decode("utf-8", "ignore")  # a cut inside a character drops it


def build_log(megabytes: float) -> str:
    """A log of short lines (timestamp, level, a few words, an id), seeded, of this size."""
    rng = random.Random(7)
    words = "request served user cache miss hit retry timeout upstream worker queue batch"
    vocabulary = words.split()
    size = int(megabytes * 1_000_000)
    lines: list[str] = []
    total = 0
    while total < size:
        said = " ".join(rng.choice(vocabulary) for _ in range(rng.randrange(4, 14)))
        line = f"2026-12-06T10:{rng.randrange(60):02d}:{rng.randrange(60):02d} INFO {said} "
        line += f"id={rng.randrange(10**6)}\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(policy: str, megabytes: float) -> dict[str, Any]:
    """Chunk one text in this (fresh) process; the peak above the level before."""
    import rechunk
    from rechunk.chunking.tokens import resolve_tokenizer

    classes = {
        "fixed": rechunk.FixedChunker,
        "recursive": rechunk.RecursiveChunker,
        "cdc": rechunk.CDCChunker,
        "structured": rechunk.StructuredChunker,
    }
    text = build_text(megabytes)
    chunker = classes[policy](tokenizer=resolve_tokenizer(None))
    chunker.chunk(text[:20_000])  # imports and first-call set-up are not the file's cost
    before = peak_mb()
    t0 = time.perf_counter()
    chunks = chunker.chunk(text)
    seconds = time.perf_counter() - t0
    return {
        "policy": policy,
        "mb": megabytes,
        "bytes": len(text.encode("utf-8")),
        "chunks": len(chunks),
        "seconds": seconds,
        "before_mb": before,
        "peak_mb": peak_mb(),
    }


def run_child(policy: str, megabytes: float) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", policy, str(megabytes)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def dry_run_peak(path: Path, work: Path) -> tuple[float, float]:
    """Peak RSS (MB) and wall time of ``rechunk sync PATH --dry-run`` in a new process."""
    store = work / f"store-{path.stem}"
    cache = work / f"cache-{path.stem}.sqlite"
    code = (
        "import resource, sys\n"
        "from rechunk.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, "sync", str(path), "--dry-run", "--json",
         "--store", f"qdrant:{store}", "--cache", str(cache)],
        check=True, capture_output=True, text=True, env=env, cwd=work,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    return float(out.stderr.strip().splitlines()[-1]), seconds


def run(sizes: Sequence[float]) -> dict[str, Any]:
    rows = [run_child(policy, mb) for policy in POLICIES for mb in sizes]
    dry: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tiny = work / "tiny.md"
        tiny.write_text("one line\n", encoding="utf-8")
        base, base_seconds = dry_run_peak(tiny, work)
        for mb in sizes:
            row: dict[str, Any] = {"mb": mb, "base_mb": base}
            for kind, build, name in (("", build_text, "big"), ("log_", build_log, "log")):
                big = work / f"{name}-{mb:g}.{'txt' if kind else 'md'}"
                big.write_text(build(mb), encoding="utf-8")
                row[f"{kind}peak_mb"], row[f"{kind}seconds"] = dry_run_peak(big, work)
                big.unlink()
            dry.append(row)
    return {"machine": _report.machine(), "chunk": rows, "dry_run": dry,
            "dry_run_base_seconds": base_seconds}  # fmt: skip


def to_markdown(result: dict[str, Any]) -> str:
    sizes = sorted({row["mb"] for row in result["chunk"]})
    largest = sizes[-1]
    lines = [
        "## Memory: one large file (`benchmarks/memory.py`)",
        "",
        f"Machine: {result['machine']}. Reproduce: `python benchmarks/memory.py` "
        "(raw numbers in `benchmarks/results/memory.json`). One text per size: the new "
        "versions of the dev revision pairs (English and Chinese) repeated to the size. "
        "Each cell is one fresh process: peak resident memory while chunking, above the "
        "level just before (text and tokenizer loaded), in MB; in brackets, that peak per "
        "byte of text. Default parameters, all-MiniLM-L6-v2's tokenizer.",
        "",
        "| policy | " + " | ".join(f"{mb:g} MB" for mb in sizes) + f" | seconds at {largest:g} MB |",
        "|---|" + "---:|" * (len(sizes) + 1),
    ]
    for policy in POLICIES:
        rows = {row["mb"]: row for row in result["chunk"] if row["policy"] == policy}
        cells = []
        for mb in sizes:
            row = rows[mb]
            extra = row["peak_mb"] - row["before_mb"]
            cells.append(f"{extra:,.0f} ({extra * 2**20 / row['bytes']:.0f}×)")
        lines.append(
            f"| `{policy}` | " + " | ".join(cells) + f" | {rows[largest]['seconds']:.1f} |"
        )
    lines += [
        "",
        "`rechunk sync FILE --dry-run` (the CLI with its defaults: read, chunk with the "
        "structured policy sized for the model, plan against an empty embedded Qdrant "
        "collection; the model is not loaded): peak resident memory of the whole process, "
        f"and above a dry run of a one-line file ({result['dry_run'][0]['base_mb']:,.0f} MB); "
        "for the text above and for a log of short lines of the same size (seeded; many "
        "more blocks per byte), with the peak above per byte in brackets.",
        "",
        "| file | peak MB | above a one-line file | seconds | log: peak MB | above | seconds |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["dry_run"]:
        cells = [f"{row['mb']:g} MB"]
        for kind in ("", "log_"):
            if f"{kind}peak_mb" not in row:  # a results file written before the log rows
                cells += ["", "", ""]
                continue
            above = row[f"{kind}peak_mb"] - row["base_mb"]
            per_byte = above * 2**20 / (row["mb"] * 1_000_000)
            cells += [f"{row[f'{kind}peak_mb']:,.0f}", f"{above:,.0f} ({per_byte:.0f}×)",
                      f"{row[f'{kind}seconds']:.1f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1.0, 10.0, 40.0])
    parser.add_argument("--quick", action="store_true", help="1 and 4 MB; print only")
    parser.add_argument("--child", nargs=2, metavar=("POLICY", "MB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], float(args.child[1]))))
        return 0
    result = run([1.0, 4.0] if args.quick else args.sizes)
    markdown = to_markdown(result)
    print(markdown)
    if not args.quick:
        results = Path(__file__).resolve().parent / "results" / "memory.json"
        results.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        _report.write_section("memory", markdown)
        print(f"wrote the memory section of {_report.DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
