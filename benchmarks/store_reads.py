"""Store-read benchmark: what a sync's reads cost in embedded Qdrant, with and without
rechunk's index.

Embedded Qdrant (local mode, the CLI's default store) has no payload index: every
filtered read checks every point in Python, and a key filter checks every point
against every key. ``QdrantStore`` therefore keeps its own index of doc_id and
input key to point ids for an embedded collection (one pass over the payloads per
process, then kept current by its writes) and reads points by id. The "scan" rows
are the filtered reads it falls back to where qdrant-client's internals are not as
expected.

Fills a local Qdrant folder with ``--docs`` documents of ``--chunks`` points each
(384-d vectors, payloads as a sync writes them), then times, best of
``--repeat``, both ways:

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

import rechunk.adapters.qdrant as adapter
from rechunk.adapters.qdrant import QdrantStore, local_client
from rechunk.sync.store import PointPayload, PointWrite

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
        client.close()
        client = local_client(folder)
        store = QdrantStore(client, "bench")
        t0 = time.perf_counter()
        store.doc_ids()  # builds the index: one pass over the payloads
        index_s = time.perf_counter() - t0
        out = {"fill_seconds": fill_s, "index_build_seconds": index_s, "index": reads(store, keys, docs, chunks, sample, repeat)}
        saved = adapter._local_collection
        adapter._local_collection = lambda client, name: None  # the filtered reads
        try:
            out["scan"] = reads(store, keys, docs, chunks, sample, repeat)
        finally:
            adapter._local_collection = saved
        client.close()
    return {
        "machine": _report.machine(),
        "docs": docs,
        "chunks_per_doc": chunks,
        "points": docs * chunks,
        "repeat": repeat,
        **out,
    }


def reads(
    store: QdrantStore, keys: list[str], docs: int, chunks: int, sample: int, repeat: int
) -> dict[str, Any]:
    if True:
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
    per_doc = single_s / len(picked)
    return {
        "get_points_per_doc_seconds": per_doc,
        "get_points_sampled": len(picked),
        "one_by_one_estimate_seconds": per_doc * docs,
        "get_points_many_seconds": many_s,
        "get_vectors_all_seconds": scan_s,
        "keyed_keys": len(few),
        "get_vectors_keyed_seconds": keyed_s,
    }


def to_markdown(r: dict[str, Any]) -> str:
    i, s = r["index"], r["scan"]
    return "\n".join(
        [
            "## Store reads in embedded Qdrant (`benchmarks/store_reads.py`)",
            "",
            f"Machine: {r['machine']}. Reproduce with `python benchmarks/store_reads.py` "
            f"(best of {r['repeat']}). A local Qdrant folder with {r['docs']:,} documents "
            f"of {r['chunks_per_doc']} points each ({r['points']:,} points, 384-d; filling "
            f"it took {r['fill_seconds']:.0f} s). Embedded Qdrant has no payload index, so "
            "every filtered read checks every point (scan); rechunk's own index of the "
            "collection (built once per process in "
            f"{r['index_build_seconds']:.2f} s here) reads points by id instead.",
            "",
            "| read | index, s | scan, s |",
            "|---|---:|---:|",
            f"| `get_points`, one document | {i['get_points_per_doc_seconds']:.4f} | "
            f"{s['get_points_per_doc_seconds']:.3f} |",
            f"| ... one request per document, all {r['docs']:,} (per-document time x "
            f"documents; {i['get_points_sampled']} timed) | "
            f"{i['one_by_one_estimate_seconds']:.1f} | {s['one_by_one_estimate_seconds']:.0f} |",
            f"| `get_points_many`, all {r['docs']:,} documents | "
            f"{i['get_points_many_seconds']:.2f} | {s['get_points_many_seconds']:.1f} |",
            f"| `get_vectors`, all {r['points']:,} keys | "
            f"{i['get_vectors_all_seconds']:.2f} | {s['get_vectors_all_seconds']:.1f} |",
            f"| `get_vectors`, {i['keyed_keys']:,} keys | "
            f"{i['get_vectors_keyed_seconds']:.3f} | {s['get_vectors_keyed_seconds']:.1f} |",
            "",
            "With the index a read costs what it returns, so a sync reads in time linear "
            "in the points it involves; a Qdrant server uses the keyword indexes rechunk "
            "creates instead.",
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
