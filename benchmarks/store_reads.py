"""Store-read benchmark: what a sync's reads cost in embedded Qdrant as the collection grows.

Embedded Qdrant (local mode, the CLI's default store) has no payload index: every
filtered read checks every point, and a key filter checks every point against
every key. A sync therefore reads all its documents' points in a few requests
(``QdrantStore.get_points_many``) instead of one per document, and looks up
vectors by one pass over the collection once the keys number a quarter of it.

Fills a local Qdrant folder with ``--docs`` documents of ``--chunks`` points each
(384-d vectors, payloads as a sync writes them), then times, best of
``--repeat``:

* ``get_points`` of single documents (``--sample`` of them; the per-document
  time times the number of documents is what a sync reading one document at a
  time would spend);
* ``get_points_many`` of every document (what a sync's plan, prune and verify
  each do now);
* ``get_vectors`` of every input key (one pass) and of 2% of them (keyed reads).

    python benchmarks/store_reads.py           # writes the "store" section of docs/benchmarks.md
    python benchmarks/store_reads.py --quick   # 200 documents, prints only
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report

from rechunk.adapters.qdrant import QdrantStore, local_client
from rechunk.store import PointPayload, PointWrite

MODEL = "bench-model"
DIM = 384


def fill(store: QdrantStore, docs: int, chunks: int) -> list[str]:
    """Write ``docs * chunks`` points; return every input key."""
    rng = np.random.default_rng(0)
    keys: list[str] = []
    batch: list[PointWrite] = []
    for d in range(docs):
        for c in range(chunks):
            key = uuid.UUID(int=int(rng.integers(2**63)) << 64 | d * chunks + c).hex * 2
            keys.append(key)
            payload = PointPayload(
                doc_id=f"doc-{d}.md", revision="r1", policy="bench", input_key=key,
                model_id=MODEL, ordinal=c, start=c * 1000, end=(c + 1) * 1000, tokens=200,
                text=f"chunk {c} of document {d} " * 40,
            )  # fmt: skip
            vector = rng.standard_normal(DIM).astype(np.float32)
            batch.append(PointWrite(str(uuid.uuid4()), payload, vector))
            if len(batch) == 1000:
                store.write(batch)
                batch = []
    if batch:
        store.write(batch)
    return keys


def best(repeat: int, call: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - t0)
    return min(times), result


def run(docs: int, chunks: int, sample: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        client = local_client(folder)
        store = QdrantStore(client, "bench")
        store.ensure_collection(DIM)
        t0 = time.perf_counter()
        keys = fill(store, docs, chunks)
        fill_s = time.perf_counter() - t0
        ids = [f"doc-{d}.md" for d in range(docs)]
        picked = ids[:: max(1, docs // sample)][:sample]

        def one_by_one() -> int:
            return sum(len(store.get_points(doc_id)) for doc_id in picked)

        single_s, got_single = best(repeat, one_by_one)
        many_s, many = best(repeat, lambda: store.get_points_many(ids))
        assert got_single == len(picked) * chunks
        assert sum(map(len, many.values())) == docs * chunks
        scan_s, vectors = best(repeat, lambda: store.get_vectors(keys, MODEL))
        assert len(vectors) == len(keys)
        few = keys[:: 50]
        keyed_s, keyed = best(repeat, lambda: store.get_vectors(few, MODEL))
        assert len(keyed) == len(few)
        client.close()
    per_doc = single_s / len(picked)
    return {
        "machine": _report.machine(),
        "docs": docs,
        "chunks_per_doc": chunks,
        "points": docs * chunks,
        "fill_seconds": fill_s,
        "get_points_per_doc_seconds": per_doc,
        "get_points_sampled": len(picked),
        "one_by_one_estimate_seconds": per_doc * docs,
        "get_points_many_seconds": many_s,
        "get_vectors_all_seconds": scan_s,
        "keyed_keys": len(few),
        "get_vectors_keyed_seconds": keyed_s,
        "repeat": repeat,
    }


def to_markdown(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            "## Store reads in embedded Qdrant (`benchmarks/store_reads.py`)",
            "",
            f"Machine: {r['machine']}. Reproduce with `python benchmarks/store_reads.py` "
            f"(best of {r['repeat']}). A local Qdrant folder with {r['docs']:,} documents "
            f"of {r['chunks_per_doc']} points each ({r['points']:,} points, 384-d; filling "
            f"it took {r['fill_seconds']:.0f} s). Embedded Qdrant has no payload index, so "
            "every filtered read checks every point.",
            "",
            "| read | seconds |",
            "|---|---:|",
            f"| `get_points`, one document | {r['get_points_per_doc_seconds']:.3f} |",
            f"| ... one request per document, all {r['docs']:,} (per-document time x "
            f"documents; {r['get_points_sampled']} timed) | "
            f"{r['one_by_one_estimate_seconds']:.0f} |",
            f"| `get_points_many`, all {r['docs']:,} documents (what a sync's plan, prune "
            f"and verify each do) | {r['get_points_many_seconds']:.1f} |",
            f"| `get_vectors`, all {r['points']:,} keys (one pass over the collection) | "
            f"{r['get_vectors_all_seconds']:.1f} |",
            f"| `get_vectors`, {r['keyed_keys']:,} keys (keyed reads) | "
            f"{r['get_vectors_keyed_seconds']:.1f} |",
            "",
            "A sync reads its documents' points three times whatever their number (plan, "
            "prune, verify); a server uses the keyword indexes rechunk creates instead of "
            "scanning.",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=20, help="points per document")
    parser.add_argument("--sample", type=int, default=50, help="documents read one by one")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200 documents; print only")
    args = parser.parse_args(argv)
    docs = 200 if args.quick else args.docs
    result = run(docs, args.chunks, min(args.sample, docs), args.repeat)
    markdown = to_markdown(result)
    if args.quick:
        print(markdown)
    else:
        _report.write_section("store", markdown)
        print(markdown)
        print(f"wrote the store section of {_report.DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
