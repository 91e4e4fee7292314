"""Distributed sync benchmark: rechunk.integrations.ray against rechunk.sync, same corpus,
same store (a Chroma server on 127.0.0.1), on a two-node Ray cluster started on this
machine (tests/ray_cluster.py: every node on 127.0.0.1, one CPU each).

Corpus: the OLD side of the 60 revision pairs of ``../shared/revisions/dev.jsonl``,
repeated ``--copies`` times under other doc_ids, every paragraph of a copy marked with
the copy's number so that every copy's inputs are its own (all of them are embedded). Chunker:
``StructuredChunker()`` (default settings). Every run syncs into a fresh collection,
dropped after the run: the server's cost per write grows with what it holds (in one
server, a local sync of 1,500 documents took 26.1 s, then 36.3 s after nine more runs had
left their collections), so a run must not pay for the runs before it.

Embedders:

* ``api``: the OpenAI-compatible API embedder (rechunk.integrations.openai, batches of
  16, one request in flight per embedder) against the tests' infinity server (the
  packaged MiniLM, tests/infinity_server.py) behind the tests' fault proxy
  (tests/fault_proxy.py), which holds every request ``--latency`` seconds before
  forwarding it: a remote API whose latency dominates the cost (infinity's own CPU time
  on this machine's two cores is in it too). The chunker is ``policy_for`` the model
  (sized to MiniLM's 256 tokens); the corpus is ``--api-copies`` copies. Without
  infinity (it cannot be installed), ``latency``: hash vectors after the same wait, in
  process.
* ``api-long``: the same, every request held ``--long-latency`` seconds (default 1.0),
  longer than infinity's own time a request on this machine's two cores (0.40 s), so
  that the wait dominates and the embedder does not compete for the cores (at 0.25 s
  infinity's CPU bounds two embedders at 1.63x one); local sync and 2 embedding actors.
* ``hash``: vectors from a hash of the text, no wait: what remains is the engine's own
  cost (planning, transport, commits). Run on ``--hash-copies`` copies (1,500 documents:
  enough that the fixed costs do not dominate) and, for the slope, on ``--copies``.

Measured: wall seconds and chunks per second of the local sync and of the Ray engine with
1 and 2 embedding actors on the api embedder, with the requests and inputs the server got;
the engine's start-up (a sync of one small document, in the same run) and its cost per
document on the hash embedder against the local sync's, two ways: (wall - start-up) /
documents on the large corpus, and the slope of wall time between the small and the large
corpus (fixed costs cancel); the CPU seconds the Chroma server spent in each run (its
writes are the local sync's main cost);
the commit stage's overlap on Chroma (task seconds of publishing / wall seconds of the
commit stage). Then the arithmetic for 10 M chunks on N GPU workers.

    python benchmarks/distributed.py                 # writes benchmarks/results/distributed.json
    python benchmarks/distributed.py --copies 1 --api-copies 1   # a quick run; prints only
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import shutil
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


def _made(embedder: Any) -> Any:
    """The embedder a factory makes (or the embedder itself)."""
    return embedder if hasattr(embedder, "embed") else embedder()


def _api_embedder(
    stack: contextlib.ExitStack, scratch: Path, latency: float
) -> tuple[Any, Any, Any]:
    """A factory of the API embedder against infinity behind the fault proxy (every request
    held ``latency`` seconds), the proxy, and the chunker sized for the model; without
    infinity, the latency hash embedder, no proxy and the default chunker."""
    try:
        from fault_proxy import FaultProxy
        from infinity_server import ensure_venv, running_infinity

        from rechunk.integrations._st_folder import ModelFolder
        from rechunk.integrations.openai import OpenAIEmbedder

        ensure_venv()
        folder = ModelFolder().folder
    except Exception as exc:  # no infinity here: the in-process stand-in
        print(f"no infinity server ({type(exc).__name__}: {exc}); the latency embedder instead")
        return (functools.partial(LatencyEmbedder, latency), None, rechunk.StructuredChunker())
    server = stack.enter_context(running_infinity(folder, scratch))
    proxy = FaultProxy(server.base_url, slow_seconds=latency)
    stack.callback(proxy.close)
    proxy.reset(["slow"] * 1_000_000)
    factory = functools.partial(OpenAIEmbedder, "minilm", base_url=proxy.url, tokenizer=folder,
                                batch_size=16, max_in_flight=1)  # fmt: skip
    return factory, proxy, rechunk.policy_for(factory())


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=4, help="corpus copies, hash runs")
    parser.add_argument("--api-copies", type=int, default=2, help="corpus copies, api runs")
    parser.add_argument("--hash-copies", type=int, default=25,
                        help="corpus copies, hash runs (the overhead measure)")  # fmt: skip
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--long-latency", type=float, default=1.0,
                        help="api-long: the proxy's hold, longer than infinity's own time a "
                        "request on this machine (0.40 s)")  # fmt: skip
    parser.add_argument("--runs", default="api,api-long,latency,hash",
                        help="which sets to run (api, api-long, latency, hash); a subset is merged into "
                        "the saved results")  # fmt: skip
    parser.add_argument("--worker-niceness", type=int, default=None,
                        help="nice value of the cluster's workers (Ray's default: 15)")  # fmt: skip
    parser.add_argument("--gpu-chunks-per-second", type=float, default=1000.0,
                        help="the assumed rate of one GPU worker for the 10 M arithmetic")  # fmt: skip
    args = parser.parse_args(argv)
    wanted = set(args.runs.split(","))
    every = {"api", "api-long", "latency", "hash"}
    if not wanted or wanted - every:
        parser.error(f"--runs takes api, api-long, latency and hash, not {args.runs!r}")
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    docs = corpus(args.copies)
    api_docs = corpus(args.api_copies)
    hash_docs = corpus(args.hash_copies)
    chunker = rechunk.StructuredChunker()
    results: dict[str, Any] = {"documents": len(docs), "api_documents": len(api_docs),
                               "hash_documents": len(hash_docs),
                               "latency": args.latency, "long_latency": args.long_latency,
                               "runs": {},
                               "load_average_before": list(os.getloadavg())}  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix="rk-bench-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        address = stack.enter_context(running_ray(2, worker_niceness=args.worker_niceness))
        results["worker_niceness"] = 15 if args.worker_niceness is None else args.worker_niceness
        chroma = stack.enter_context(running_chroma(scratch / "chroma"))
        api: Any = None
        proxy: Any = None
        if wanted & {"api", "api-long"}:
            api, proxy, api_chunker = _api_embedder(stack, scratch, args.latency)
            results["api_embedder"] = "latency-hash" if proxy is None else "openai+infinity+proxy"
        uri = f"chroma+http://127.0.0.1:{chroma.port}"
        made = 0

        def fresh(dimension: int) -> str:
            nonlocal made
            made += 1
            name = f"bench-{made}"
            ChromaStore(http_client("127.0.0.1", chroma.port), name).ensure_collection(dimension)
            return name

        def requests() -> dict[str, int]:
            """What the server got since the last call (then counting starts again)."""
            if proxy is None:
                return {}
            seen = [s for s in proxy.seen if s.inputs]
            got = {"requests": len(seen), "inputs": sum(s.inputs for s in seen)}
            proxy.reset(["slow"] * 1_000_000)
            return got

        def local(embedder: Any, what: list[Any], policy: Any) -> dict[str, Any]:
            store = ChromaStore(http_client("127.0.0.1", chroma.port), fresh(embedder.dimension))
            requests()
            cpu = cpu_seconds(chroma.process.pid)
            t0 = time.perf_counter()
            report = rechunk.sync(what, store, chunker=policy, embedder=embedder)
            seconds = time.perf_counter() - t0
            cpu = cpu_seconds(chroma.process.pid) - cpu
            store.drop_collection()
            return {"seconds": seconds, "chunks": report.chunks["added"],
                    "embedded": report.inputs["embedded"], "stages": report.seconds,
                    "server": requests(), "load_average": list(os.getloadavg()),
                    "store_cpu_seconds": cpu}  # fmt: skip

        def distributed(
            embedder: Any, workers: int, what: list[Any], policy: Any = chunker
        ) -> dict[str, Any]:
            name = fresh(_made(embedder).dimension)
            requests()
            cpu = cpu_seconds(chroma.process.pid)
            t0 = time.perf_counter()
            report = rray.sync(what, uri, collection=name, chunker=policy, embedder=embedder,
                               workers=workers, address=address)  # fmt: skip
            seconds = time.perf_counter() - t0
            tasks = report.seconds["publish"] + report.seconds["verify"]
            commits = sorted((s[2], s[3]) for s in report.engine["spans"] if s[0] == "commit")
            span = commits[-1][1] - commits[0][0] if commits else 0.0
            cpu = cpu_seconds(chroma.process.pid) - cpu
            written = ChromaStore(http_client("127.0.0.1", chroma.port), name)
            points = written.collection_info()
            assert points is not None and points.points == report.chunks["added"]
            written.drop_collection()
            return {"seconds": seconds, "chunks": report.chunks["added"],
                    "embedded": report.inputs["embedded"], "stages": report.seconds,
                    "engine": report.engine, "server": requests(),
                    "load_average": list(os.getloadavg()),
                    "store_cpu_seconds": cpu,
                    "commit_overlap": round(tasks / span, 2) if span > 0 else None,
                    "commits": committing(commits)}  # fmt: skip

        runs = results["runs"]
        distributed(HashEmbedder, 2, docs[:4])  # warm the workers' imports once
        if "api" in wanted:
            runs["api/local"] = local(_made(api), api_docs, api_chunker)
            runs["api/ray-1"] = distributed(api, 1, api_docs, api_chunker)
            runs["api/ray-2"] = distributed(api, 2, api_docs, api_chunker)
        if "api-long" in wanted and proxy is not None:
            # the same server behind a longer hold: the wait, not infinity's CPU, dominates
            proxy.slow_seconds = args.long_latency
            runs["api-long/local"] = local(_made(api), api_docs, api_chunker)
            runs["api-long/ray-2"] = distributed(api, 2, api_docs, api_chunker)
            proxy.slow_seconds = args.latency
        if "latency" in wanted:
            latency = functools.partial(LatencyEmbedder, args.latency)
            runs["latency/local"] = local(latency(), docs, chunker)
            runs["latency/ray-1"] = distributed(latency, 1, docs)
            runs["latency/ray-2"] = distributed(latency, 2, docs)
        if "hash" in wanted:
            one = [rechunk.Document("one", "One doc.")]
            runs["hash/local-small"] = local(HashEmbedder(), docs, chunker)
            runs["hash/local"] = local(HashEmbedder(), hash_docs, chunker)
            runs["hash/ray-startup"] = distributed(HashEmbedder, 2, one)
            runs["hash/ray-2-small"] = distributed(HashEmbedder, 2, docs)
            runs["hash/ray-2"] = distributed(HashEmbedder, 2, hash_docs)
            runs["hash/ray-startup-after"] = distributed(HashEmbedder, 2, one)
    results["load_average_after"] = list(os.getloadavg())
    saving = args.copies == 4 and args.api_copies == 2 and args.hash_copies == 25
    if saving and wanted != every and RESULTS.exists():
        saved = json.loads(RESULTS.read_text(encoding="utf-8"))  # a subset: merged
        saved["runs"].update(runs)
        saved.update({k: v for k, v in results.items() if k != "runs"})
        results, runs = saved, saved["runs"]
    for stale in ("speedup_1", "speedup_2"):
        results.pop(stale, None)
    for name, run in runs.items():
        run["chunks_per_second"] = run["chunks"] / run["seconds"]
        print(f"{name:22} {run['seconds']:7.2f} s  {run['chunks']:6d} chunks  "
              f"{run['chunks_per_second']:7.1f} chunks/s  embedded {run['embedded']}  "
              f"server {run.get('server') or '-'}  store CPU "
              f"{run.get('store_cpu_seconds', float('nan')):.1f} s  "
              f"load {run['load_average'][0]:.1f}")  # fmt: skip
    results["speedup"] = {}
    for kind in ("api", "api-long", "latency"):
        if f"{kind}/local" not in runs:
            continue
        base = runs[f"{kind}/local"]["chunks_per_second"]
        results["speedup"][kind] = {}
        for workers in (1, 2):
            if f"{kind}/ray-{workers}" not in runs:
                continue
            speedup = runs[f"{kind}/ray-{workers}"]["chunks_per_second"] / base
            results["speedup"][kind][workers] = speedup
            print(f"{kind}, {workers} worker(s): {speedup:.2f}x the single-process sync")
    if "hash/ray-startup-after" not in runs:
        return
    n = len(hash_docs)
    # start-up: a one-document sync just before and just after the large run (the mean)
    startup = (runs["hash/ray-startup"]["seconds"] + runs["hash/ray-startup-after"]["seconds"]) / 2
    local_per_doc = runs["hash/local"]["seconds"] / n
    ray_per_doc = max(runs["hash/ray-2"]["seconds"] - startup, 0.0) / n
    # the slope between the small and the large corpus: what one more document costs
    more = n - len(docs)
    local_slope = (runs["hash/local"]["seconds"] - runs["hash/local-small"]["seconds"]) / more
    ray_slope = (runs["hash/ray-2"]["seconds"] - runs["hash/ray-2-small"]["seconds"]) / more
    results.update(
        startup_seconds=startup,
        local_seconds_per_document=local_per_doc,
        ray_seconds_per_document=ray_per_doc,
        overhead_per_document=(ray_per_doc - local_per_doc) / local_per_doc,
        local_slope_per_document=local_slope,
        ray_slope_per_document=ray_slope,
        overhead_by_slope=(ray_slope - local_slope) / local_slope,
    )
    print(f"engine start-up {startup:.2f} s; per document ({n} docs): local "
          f"{local_per_doc * 1e3:.1f} ms, ray {ray_per_doc * 1e3:.1f} ms after start-up "
          f"({results['overhead_per_document']:+.0%}); slope {len(docs)} -> {n} docs: local "
          f"{local_slope * 1e3:.1f} ms, ray {ray_slope * 1e3:.1f} ms "
          f"({results['overhead_by_slope']:+.0%})")  # fmt: skip
    results["ten_million"] = ten_million(runs["hash/ray-2"], args.gpu_chunks_per_second)
    if saving:
        RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")


def committing(spans: list[tuple[float, float]]) -> dict[str, float]:
    """When the commit tasks ran (seconds from the engine's start): the first one's start,
    the last one's end, and the seconds in between with no commit running (the store idle,
    but for the plans' reads)."""
    if not spans:
        return {}
    idle, reach = 0.0, spans[0][0]
    for start, end in spans:
        idle += max(0.0, start - reach)
        reach = max(reach, end)
    return {"first_start": spans[0][0], "last_end": reach, "idle_between": round(idle, 3)}


def ten_million(hash_run: dict[str, Any], rate: float) -> dict[str, Any]:
    """10 M chunks on N GPU workers: the model at the assumed ``rate`` per worker; the
    engine's tasks (the hash run's plan and commit task seconds per chunk, waits on the
    store included: an overestimate) spread over two CPUs per GPU worker; the commit stage
    bounded by the store: the Chroma server's CPU seconds per chunk in the hash run (it
    applies a collection's writes one at a time)."""
    chunks = hash_run["chunks"]
    engine_per_chunk = (
        sum(hash_run["stages"][s] for s in ("chunk", "plan", "publish", "verify")) / chunks
    )
    publish_per_chunk = hash_run["store_cpu_seconds"] / chunks
    total = 10_000_000
    gpu_chunks_per_second = rate
    arithmetic = {}
    for gpus in (1, 4, 16):
        embed = total / (gpus * gpu_chunks_per_second)
        engine = total * engine_per_chunk / (2 * gpus)  # two CPUs of tasks per GPU worker
        commit = total * publish_per_chunk  # one Chroma server: its writes do not overlap
        arithmetic[gpus] = {"embed_s": embed, "engine_s": engine, "commit_s": commit,
                            "hours": max(embed, engine, commit) / 3600}  # fmt: skip
        print(f"10 M chunks on {gpus:2d} GPU worker(s): embed {embed / 3600:.1f} h "
              f"(10e6 / ({gpus} x {gpu_chunks_per_second:g}/s)), engine "
              f"{engine / 3600:.1f} h (10e6 x {engine_per_chunk * 1e3:.2f} ms / {2 * gpus} CPUs), "
              f"commit {commit / 3600:.1f} h (10e6 x {publish_per_chunk * 1e3:.2f} ms, one "
              f"Chroma server) -> about {arithmetic[gpus]['hours']:.1f} h")  # fmt: skip
    return {"engine_ms_per_chunk": engine_per_chunk * 1e3,
            "commit_ms_per_chunk": publish_per_chunk * 1e3,
            "gpu_chunks_per_second": gpu_chunks_per_second,
            "by_gpus": arithmetic}  # fmt: skip


if __name__ == "__main__":
    main()
