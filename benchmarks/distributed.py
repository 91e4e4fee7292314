"""Distributed sync benchmark: rechunk.integrations.ray against rechunk.sync, same corpus,
same store (a Chroma server on 127.0.0.1), on a two-node Ray cluster started on this
machine (tests/ray_cluster.py: every node on 127.0.0.1, one CPU each).

Corpus: the OLD side of the 60 revision pairs of ``../shared/revisions/dev.jsonl``,
repeated ``--copies`` times under other doc_ids, every paragraph of a copy marked with
the copy's number so that every copy's inputs are its own (all of them are embedded). Chunker:
``StructuredChunker()`` (default settings). Every run syncs into a fresh collection.

Embedders:

* ``latency``: vectors from a hash of the text after a fixed wait per request
  (``--latency`` seconds per call of ``--batch`` inputs): a remote embedding API whose
  latency dominates and which does not compete for this machine's two cores. (The API
  embedder against the tests' infinity server behind the fault proxy would measure the
  same thing plus infinity's own CPU time on this machine's two cores.)
* ``hash``: vectors from a hash of the text, no wait: what remains is the engine's own
  cost (planning, transport, commits).

Measured: wall seconds and chunks per second of the local sync and of the Ray engine with
1 and 2 embedding actors on the latency embedder; the engine's start-up (a sync of one
small document) and its cost per document on the hash embedder against the local sync's;
the commit stage's overlap on Chroma (task seconds of publishing / wall seconds of the
commit stage). Then the arithmetic for 10 M chunks on N GPU workers.

    python benchmarks/distributed.py                 # writes benchmarks/results/distributed.json
    python benchmarks/distributed.py --copies 1      # a quick run (60 documents); prints only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from chroma_server import running_chroma  # noqa: E402
from ray_cluster import running_ray  # noqa: E402

import rechunk  # noqa: E402
from rechunk.adapters.chroma import ChromaStore, http_client  # noqa: E402
from rechunk.integrations import ray as rray  # noqa: E402

REVISIONS = ROOT.parent / "shared" / "revisions" / "dev.jsonl"
RESULTS = Path(__file__).resolve().parent / "results" / "distributed.json"


class HashEmbedder:
    model_id = "hash/bench-v1"
    dimension = 64
    max_input_tokens: int | None = None
    embed_batch = 16

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = [
            np.random.default_rng(
                int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big")
            ).standard_normal(self.dimension)
            for t in texts
        ]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimension)


class LatencyEmbedder(HashEmbedder):
    """The hash embedder behind a fixed wait per request, as a remote API's latency."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        time.sleep(self.latency)
        return super().embed(texts)


def corpus(copies: int) -> list[rechunk.Document]:
    rows = [json.loads(line) for line in REVISIONS.open(encoding="utf-8") if line.strip()]
    return [
        rechunk.Document(f"{row['id']}#{copy}", row["old"].replace("\n\n", f"\n\n({copy}) "))
        for copy in range(copies)
        for row in rows
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--gpu-chunks-per-second", type=float, default=1000.0,
                        help="the assumed rate of one GPU worker for the 10 M arithmetic")  # fmt: skip
    args = parser.parse_args(argv)
    import functools

    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    docs = corpus(args.copies)
    chunker = rechunk.StructuredChunker()
    results: dict[str, Any] = {"documents": len(docs), "latency": args.latency, "runs": {}}
    with (
        running_ray(2) as address,
        running_chroma(Path(tempfile.mkdtemp(prefix="rk-bench-")) / "chroma") as chroma,
    ):
        uri = f"chroma+http://127.0.0.1:{chroma.port}"
        made = 0

        def fresh() -> str:
            nonlocal made
            made += 1
            name = f"bench-{made}"
            ChromaStore(http_client("127.0.0.1", chroma.port), name).ensure_collection(
                HashEmbedder.dimension
            )
            return name

        def local(embedder: Any) -> dict[str, Any]:
            store = ChromaStore(http_client("127.0.0.1", chroma.port), fresh())
            t0 = time.perf_counter()
            report = rechunk.sync(docs, store, chunker=chunker, embedder=embedder)
            seconds = time.perf_counter() - t0
            return {"seconds": seconds, "chunks": report.chunks["added"],
                    "embedded": report.inputs["embedded"], "stages": report.seconds}  # fmt: skip

        def distributed(embedder: Any, workers: int, what: list[Any] = docs) -> dict[str, Any]:
            name = fresh()
            t0 = time.perf_counter()
            report = rray.sync(what, uri, collection=name, chunker=chunker, embedder=embedder,
                               workers=workers, address=address)  # fmt: skip
            seconds = time.perf_counter() - t0
            ends = report.engine["stage_ends"]
            span = ends.get("last_commit", 0) - ends.get("first_commit", 0)
            tasks = report.seconds["publish"] + report.seconds["verify"]
            points = ChromaStore(http_client("127.0.0.1", chroma.port), name).collection_info()
            assert points is not None and points.points == report.chunks["added"]
            return {"seconds": seconds, "chunks": report.chunks["added"],
                    "embedded": report.inputs["embedded"], "stages": report.seconds,
                    "engine": report.engine,
                    "commit_overlap": round(tasks / span, 2) if span > 0 else None}  # fmt: skip

        latency = functools.partial(LatencyEmbedder, args.latency)
        runs = results["runs"]
        distributed(HashEmbedder, 2, docs[:4])  # warm the workers' imports once
        runs["latency/local"] = local(latency())
        runs["latency/ray-1"] = distributed(latency, 1)
        runs["latency/ray-2"] = distributed(latency, 2)
        runs["hash/local"] = local(HashEmbedder())
        runs["hash/ray-startup"] = distributed(
            HashEmbedder, 2, [rechunk.Document("one", "One doc.")]
        )
        runs["hash/ray-2"] = distributed(HashEmbedder, 2)
    for name, run in runs.items():
        run["chunks_per_second"] = run["chunks"] / run["seconds"]
        print(f"{name:18} {run['seconds']:7.2f} s  {run['chunks']:6d} chunks  "
              f"{run['chunks_per_second']:7.1f} chunks/s  embedded {run['embedded']}")  # fmt: skip
    base = runs["latency/local"]["chunks_per_second"]
    for workers in (1, 2):
        speedup = runs[f"latency/ray-{workers}"]["chunks_per_second"] / base
        results[f"speedup_{workers}"] = speedup
        print(f"latency-bound, {workers} worker(s): {speedup:.2f}x the single-process sync")
    n = len(docs)
    startup = runs["hash/ray-startup"]["seconds"]
    local_per_doc = runs["hash/local"]["seconds"] / n
    ray_per_doc = max(runs["hash/ray-2"]["seconds"] - startup, 0.0) / n
    results.update(
        startup_seconds=startup,
        local_seconds_per_document=local_per_doc,
        ray_seconds_per_document=ray_per_doc,
        overhead_per_document=(ray_per_doc - local_per_doc) / local_per_doc,
    )
    print(f"engine start-up {startup:.2f} s; per document: local {local_per_doc * 1e3:.1f} ms, "
          f"ray {ray_per_doc * 1e3:.1f} ms after start-up "
          f"({results['overhead_per_document']:+.0%})")  # fmt: skip
    # 10 M chunks on N GPU workers: the model at the assumed rate per worker, the engine's
    # own cost per chunk (hash run, plan + commit task seconds per chunk) spread over the
    # cluster's CPUs, the commit stage bounded by the store
    hash_run = runs["hash/ray-2"]
    chunks = hash_run["chunks"]
    engine_per_chunk = (
        sum(hash_run["stages"][s] for s in ("chunk", "plan", "publish", "verify")) / chunks
    )
    publish_per_chunk = (hash_run["stages"]["publish"] + hash_run["stages"]["verify"]) / chunks
    total = 10_000_000
    arithmetic = {}
    for gpus in (1, 4, 16):
        embed = total / (gpus * args.gpu_chunks_per_second)
        engine = total * engine_per_chunk / (2 * gpus)  # two CPUs of tasks per GPU worker
        commit = total * publish_per_chunk  # one Chroma server: its writes do not overlap
        arithmetic[gpus] = {"embed_s": embed, "engine_s": engine, "commit_s": commit,
                            "hours": max(embed, engine, commit) / 3600}  # fmt: skip
        print(f"10 M chunks on {gpus:2d} GPU worker(s): embed {embed / 3600:.1f} h "
              f"(10e6 / ({gpus} x {args.gpu_chunks_per_second:g}/s)), engine "
              f"{engine / 3600:.1f} h (10e6 x {engine_per_chunk * 1e3:.2f} ms / {2 * gpus} CPUs), "
              f"commit {commit / 3600:.1f} h (10e6 x {publish_per_chunk * 1e3:.2f} ms, one "
              f"Chroma server) -> about {arithmetic[gpus]['hours']:.1f} h")  # fmt: skip
    results["ten_million"] = {"engine_ms_per_chunk": engine_per_chunk * 1e3,
                              "commit_ms_per_chunk": publish_per_chunk * 1e3,
                              "gpu_chunks_per_second": args.gpu_chunks_per_second,
                              "by_gpus": arithmetic}  # fmt: skip
    if args.copies == 4:
        RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
