"""Sync memory benchmark: what a sync holds beyond the documents it is given, as the corpus grows.

A caller hands ``rechunk.sync`` a list of documents; their texts are the caller's
memory. This script measures what the sync itself allocates on top, with Python's
``tracemalloc`` (every Python object and numpy array, nothing the kernel reports
about fragmentation): for N documents of ``scale.py``'s corpus (~4.4 KB each, ~9
chunks), in a fresh process per N, into an in-memory Qdrant collection (the
collection lives in the same process: every case is measured after it exists, so only
what the case adds counts):

* ``documents``: what the Document list holds (texts and objects), built before the sync;
* per case, ``peak``: the largest traced memory during the sync above the level
  before it, and ``report``: what is still held after it, the returned
  :class:`~rechunk.SyncReport` (its ``per_document`` list is one entry a document).

Cases: ``noop`` (every document again, nothing changed; run twice, the second
measured, so that the store adapter's own index of the collection, built by its
first read in a process, is not counted) and ``edit_all`` (one document edited,
every document passed). The embedder is ``scale.py``'s hash embedder.

    python benchmarks/sync_memory.py                    # 1k, 5k, 20k; writes json + docs
    python benchmarks/sync_memory.py --sizes 500,2000 --quick
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report
import scale

RESULTS = Path(__file__).resolve().parent / "results" / "sync_memory.json"
MB = 2**20


def _traced(call: Any) -> tuple[Any, float, float]:
    """``call()``'s result, the peak traced memory above the level before it and what
    is still traced above that level after it, both in MB."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = call()
    now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, (peak - before) / MB, (now - before) / MB


def child(n: int) -> dict[str, Any]:
    from qdrant_client import QdrantClient

    import rechunk
    from rechunk.adapters.qdrant import QdrantStore

    embedder = scale.HashEmbedder()
    chunker = rechunk.policy_for(embedder)
    store = QdrantStore(QdrantClient(":memory:"), "memory")
    store.ensure_collection(scale.DIM)
    documents, _, docs_mb = _traced(
        lambda: [rechunk.Document(doc_id, text) for doc_id, text in scale.corpus(n).items()]
    )

    def sync(docs: Sequence[Any]) -> Any:
        return rechunk.sync(docs, store, chunker=chunker, embedder=embedder)

    t0 = time.perf_counter()
    report = sync(documents)
    out: dict[str, Any] = {
        "n": n,
        "points": report.chunks["added"],
        "documents_mb": docs_mb,
        "initial_s": time.perf_counter() - t0,
    }
    del report
    sync(documents)  # the store's first read in this process builds its index
    first = documents[0]
    edited = [rechunk.Document(first.doc_id, scale.edited(first.text, 1)), *documents[1:]]
    for case, docs in (("noop", documents), ("edit_all", edited)):
        report, peak, held = _traced(lambda docs=docs: sync(docs))
        out[case] = {"peak_mb": peak, "report_mb": held, "documents": len(report.per_document)}
        del report
    return out


def run(n: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"n={n} failed: {proc.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def to_markdown(result: dict[str, Any]) -> str:
    lines = [
        "## Sync memory: what a sync holds beyond its documents (`benchmarks/sync_memory.py`)",
        "",
        f"Machine: {result['machine']}. Reproduce with `python benchmarks/sync_memory.py` "
        "(raw numbers in `benchmarks/results/sync_memory.json`). N documents of the scale "
        "benchmark's corpus (~4.4 KB each) in an in-memory Qdrant collection, a fresh "
        "process per N; Python's `tracemalloc` (every Python object and numpy array). "
        "documents: what the Document list the caller passes holds (texts and objects); "
        "peak: the most the sync call held above the level before it; KB/doc: that peak "
        "per document; report: what the returned SyncReport still holds after it (one "
        "`per_document` entry a document). Cases: no-op (every document again, unchanged) "
        "and one document edited with all passed.",
        "",
        "| N | points | documents MB | no-op: peak MB | KB/doc | report MB | one edit: peak MB | KB/doc |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        noop, edit = row["noop"], row["edit_all"]
        lines.append(
            f"| {row['n']:,} | {row['points']:,} | {row['documents_mb']:.1f} | "
            f"{noop['peak_mb']:.1f} | {noop['peak_mb'] * 1024 / row['n']:.2f} | "
            f"{noop['report_mb']:.1f} | {edit['peak_mb']:.1f} | "
            f"{edit['peak_mb'] * 1024 / row['n']:.2f} |"
        )
    rows = result["rows"]
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        per_doc = (b["noop"]["peak_mb"] - a["noop"]["peak_mb"]) * 1024 / (b["n"] - a["n"])
        lines += [
            "",
            f"From {a['n']:,} to {b['n']:,} documents a no-op's peak grows "
            f"{per_doc:.2f} KB a document, against "
            f"{(b['documents_mb'] - a['documents_mb']) * 1024 / (b['n'] - a['n']):.2f} KB "
            "a document of the documents themselves.",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--quick", action="store_true", help="print only, do not write docs")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.child)))
        return 0
    rows = []
    for n in (int(s) for s in args.sizes.split(",") if s):
        rows.append(run(n))
        print(json.dumps(rows[-1]), flush=True)
    result = {"machine": _report.machine(), "rows": rows}
    markdown = to_markdown(result)
    print(markdown)
    if not args.quick:
        RESULTS.write_text(json.dumps(result, indent=1), encoding="utf-8")
        _report.write_section("sync_memory", markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
