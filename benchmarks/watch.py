"""Watch benchmark: save-to-retrievable latency of `rechunk watch`, beside a one-shot sync.

A folder of N generated Markdown documents (default 1,000, three paragraphs each) is
synced once into embedded Qdrant (``qdrant:DIR``) with the ONNX default
(all-MiniLM-L6-v2) and a SQLite cache. Then:

* one-shot: a one-paragraph edit of one document followed by ``rechunk sync FOLDER``
  in a new process, timed from the save to the process's exit (``--oneshot`` edits);
* watch: ``rechunk watch FOLDER --json`` runs in its own process (default settle
  0.2 s); each of ``--edits`` one-paragraph edits (a different document each time) is
  timed from the moment before the file is written to the moment the watcher prints
  the batch that verified the revision retrievable (a search of the store with one of
  the new revision's points returns it and no earlier revision). Edits are made one
  after another, each once the previous is retrievable.

Figures: p50 / p95 / max of save-to-retrievable over the edits, inputs embedded per
edit, and the one-shot sync's median. Results go to ``benchmarks/results/watch.json``;
``--write-docs`` also writes the section of ``docs/benchmarks.md``.

    python benchmarks/watch.py                  # 1,000 documents, 50 edits
    python benchmarks/watch.py --docs 100 --edits 10
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "watch.json"
WORDS = ["index", "revision", "answer", "vector", "folder", "editor", "store", "query", "section", "paragraph", "model", "token", "cache", "batch", "retrieval", "freshness", "operator", "latency"]


def paragraph(seed: int, length: int = 60) -> str:
    return " ".join(WORDS[(seed * 7 + i * (seed % 5 + 1)) % len(WORDS)] for i in range(length)) + "."


def document(i: int, version: int = 0) -> str:
    edit = f" Edit {version} of document {i}." if version else ""
    return (
        f"# Document {i}\n\n{paragraph(i)} Unique to {i}.\n\n{paragraph(i + 1)}{edit}\n\n"
        f"## Details {i}\n\n{paragraph(i + 2)} Closing {i}.\n"
    )


def rechunk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rechunk.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--oneshot", type=int, default=5)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rechunk-watch-bench-"))
    folder = work / "docs"
    folder.mkdir()
    for i in range(args.docs):
        (folder / f"doc{i:04d}.md").write_text(document(i), encoding="utf-8")
    t0 = time.perf_counter()
    first = rechunk("sync", "docs", "--json", cwd=work)
    assert first.returncode == 0, first.stderr
    initial_seconds = time.perf_counter() - t0
    print(f"initial sync of {args.docs} documents: {initial_seconds:.1f} s", flush=True)

    oneshot = []
    for n in range(args.oneshot):
        i = (n * 37) % args.docs
        t0 = time.perf_counter()
        (folder / f"doc{i:04d}.md").write_text(document(i, 100 + n), encoding="utf-8")
        done = rechunk("sync", "docs", "--json", cwd=work)
        oneshot.append(time.perf_counter() - t0)
        assert done.returncode == 0, done.stderr
    print(f"one-shot sync after an edit: median {statistics.median(oneshot):.2f} s", flush=True)

    process = subprocess.Popen(
        [sys.executable, "-m", "rechunk.cli", "watch", "docs", "--json"],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(json.loads(line))

    threading.Thread(target=pump, daemon=True).start()

    def wait(kind: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = lines.get(timeout=1)
            except queue.Empty:
                if process.poll() is not None:
                    raise SystemExit(process.stderr.read() if process.stderr else "watch died") from None
                continue
            if data.get("kind") == kind and (kind != "batch" or data.get("retrievable")):
                return data
        raise SystemExit(f"no {kind} report within {timeout} s")

    t0 = time.perf_counter()
    start = wait("initial")
    watch_start = time.perf_counter() - t0
    print(f"watch started (initial sync, all unchanged): {watch_start:.1f} s", flush=True)
    latencies, embedded = [], []
    try:
        for n in range(args.edits):
            i = (n * 53 + 11) % args.docs
            saved = time.time()
            (folder / f"doc{i:04d}.md").write_text(document(i, 1 + n), encoding="utf-8")
            report = wait("batch", timeout=60)
            latencies.append(report["time"] - saved)
            embedded.append(report["embedded"])
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    result = {
        "documents": args.docs,
        "edits": args.edits,
        "initial_sync_seconds": round(initial_seconds, 2),
        "watch_start_seconds": round(watch_start, 2),
        "watch_initial_report": {k: start[k] for k in ("files", "unchanged", "retrievable")},
        "save_to_retrievable_seconds": {
            "p50": round(statistics.median(latencies), 3),
            "p95": round(percentile(latencies, 0.95), 3),
            "max": round(max(latencies), 3),
        },
        "inputs_embedded_per_edit": {
            "median": statistics.median(embedded),
            "max": max(embedded),
        },
        "oneshot_sync_seconds": {
            "median": round(statistics.median(oneshot), 3),
            "max": round(max(oneshot), 3),
        },
        "watch_exit_code": code,
        "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.write_docs:
        sys.path.insert(0, str(ROOT))
        from _report import machine, write_section

        s, o = result["save_to_retrievable_seconds"], result["oneshot_sync_seconds"]
        write_section(
            "watch",
            "## rechunk watch: save to retrievable\n\n"
            f"{args.docs} Markdown documents in embedded Qdrant, ONNX all-MiniLM-L6-v2, "
            f"{args.edits} one-paragraph edits made one after another ({machine()}).\n\n"
            "| | p50 | p95 | max |\n|---|---|---|---|\n"
            f"| `rechunk watch` (save to verified retrievable) | {s['p50']:.2f} s | "
            f"{s['p95']:.2f} s | {s['max']:.2f} s |\n"
            f"| one-shot `rechunk sync` (save to exit) | {o['median']:.2f} s (median) | | "
            f"{o['max']:.2f} s |\n\n"
            "Reproduce: `python benchmarks/watch.py --write-docs`.\n",
        )


if __name__ == "__main__":
    main()
