"""Embedder benchmark: what each backend costs, and the whole sync after a one-paragraph edit.

One run, side by side, on this machine:

* **parity**: ``OnnxEmbedder`` against ``SentenceTransformerEmbedder`` (torch) on
  distinct chunks of the dev revisions (``policy_for``, structured): max
  absolute difference and min cosine;
* **cold start**: process start to first vector (one short input), median of
  ``--cold`` (5) fresh processes per backend; for the API embedder, with the
  server already running;
* **throughput**: chunks/s on ``--chunks`` (300) real chunks at 1 and 2 threads,
  torch and ONNX alternating over ``--rounds`` (3) rounds (median round);
* **end to end**: ``rechunk sync docs`` (process start to exit) after one
  paragraph is inserted into ``examples/docs/sync-guide.md``, on the local
  default (ONNX) and on torch, beside LangChain ``index()`` (SQLRecordManager
  on SQLite, ``langchain_qdrant`` on embedded Qdrant) and a LlamaIndex
  ``IngestionPipeline`` (persisted docstore, embedded Qdrant) doing the same
  update with the same model (sentence-transformers MiniLM on torch, as they
  are usually run); median of ``--e2e`` (3) fresh copies;
* **API embedder**: ``OpenAIEmbedder`` against a real OpenAI-compatible server
  (infinity-emb serving the packaged MiniLM, from the test venv:
  ``python tests/infinity_server.py``) through a counting proxy: requests,
  inputs and tokens sent against the new inputs of each sync (examples/docs,
  then the edit, then ``--api-pairs`` (10) dev revision pairs old -> new).

    python benchmarks/embed.py            # writes the "embed" section + results/embed.json
    python benchmarks/embed.py --quick    # smaller, prints only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import rechunk

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import _report  # noqa: E402

COMMAND = "python benchmarks/embed.py"
DOCS = HERE.parent / "examples" / "docs"
NEW_PARAGRAPH = """
Payload updates are cheap but not free. When a paragraph is inserted near the
top of a document, every later chunk keeps its text and its vector, and only
its recorded position changes; rechunk sends those positions as payload-only
updates and never re-sends a vector that is already stored.
"""
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
PY = sys.executable


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- chunks ------------------------------------------------------------------------------


def dev_chunks(limit: int | None) -> list[str]:
    """Distinct chunks of the dev revisions' new versions (MiniLM-sized structured policy)."""
    from rechunk.integrations.onnx import OnnxEmbedder

    chunker = rechunk.policy_for(OnnxEmbedder())
    texts: list[str] = []
    for pair in _report.load_revisions():
        texts += [c.text for c in chunker.chunk(pair["new"])]
    texts = list(dict.fromkeys(texts))
    if limit is not None and len(texts) > limit:  # spread over the whole set
        step = len(texts) / limit
        texts = [texts[int(i * step)] for i in range(limit)]
    return texts


# -- parity ------------------------------------------------------------------------------


def parity(texts: list[str]) -> dict[str, Any]:
    from rechunk.integrations.onnx import OnnxEmbedder
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    onnx, torch = OnnxEmbedder(threads=2), SentenceTransformerEmbedder(threads=2)
    a, b = onnx.embed(texts), torch.embed(texts)
    cosine = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {
        "chunks": len(texts),
        "mean_tokens": round(statistics.mean(onnx.count_tokens(t) for t in texts), 1),
        "max_abs_diff": float(np.abs(a - b).max()),
        "min_cosine": float(cosine.min()),
        "same_model_id": onnx.model_id == torch.model_id,
    }


# -- cold start --------------------------------------------------------------------------

COLD = {
    "onnx": "from rechunk.integrations.onnx import OnnxEmbedder as E; e = E()",
    "torch": "from rechunk.integrations.sentence_transformers import "
    "SentenceTransformerEmbedder as E; e = E()",
    "api": "from rechunk.integrations.openai import OpenAIEmbedder as E; "
    "e = E('minilm', base_url={url!r}, tokenizer={folder!r})",
}


def cold_start(backend: str, runs: int, **fmt: str) -> dict[str, Any]:
    code = (
        "import time, sys\n"
        + COLD[backend].format(**fmt)
        + "\ne.embed(['process start to first vector'])\nprint(time.time())\n"
    )
    times = []
    for _ in range(runs):
        start = time.time()
        done = subprocess.run([PY, "-c", code], env=ENV, capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]) - start)
    return {"median_s": statistics.median(times), "runs_s": [round(t, 3) for t in times]}


# -- throughput --------------------------------------------------------------------------


def throughput(texts: list[str], rounds: int) -> dict[str, Any]:
    from rechunk.integrations.onnx import OnnxEmbedder
    from rechunk.integrations.sentence_transformers import SentenceTransformerEmbedder

    embedders = {
        (name, threads): cls(threads=threads)
        for name, cls in (("onnx", OnnxEmbedder), ("torch", SentenceTransformerEmbedder))
        for threads in (1, 2)
    }
    for embedder in embedders.values():
        embedder.embed(texts[:8])  # load and warm up
    rates: dict[tuple[str, int], list[float]] = {key: [] for key in embedders}
    for round_ in range(rounds):
        for key, embedder in embedders.items():
            start = time.perf_counter()
            embedder.embed(texts)
            rates[key].append(len(texts) / (time.perf_counter() - start))
            log(f"  round {round_ + 1} {key}: {rates[key][-1]:.1f} chunks/s")
    return {
        f"{name}_{threads}t": {
            "median": round(statistics.median(r), 1),
            "best": round(max(r), 1),
        }
        for (name, threads), r in rates.items()
    }


# -- end to end --------------------------------------------------------------------------

ANCHOR_LANGCHAIN = """
import sys, time
from pathlib import Path
work = Path(sys.argv[1])
from langchain_classic.indexes import SQLRecordManager
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.indexing import index
from langchain_qdrant import QdrantVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter
from qdrant_client import QdrantClient, models
from sentence_transformers import SentenceTransformer
from transformers import AutoTokenizer
from rechunk.integrations.onnx import OnnxEmbedder
folder = str(OnnxEmbedder().folder)
class MiniLM(Embeddings):
    model = None
    def _m(self):
        if self.model is None:
            self.model = SentenceTransformer(folder, device="cpu", local_files_only=True)
        return self.model
    def embed_documents(self, texts):
        return self._m().encode(texts, batch_size=32).tolist()
    def embed_query(self, text):
        return self.embed_documents([text])[0]
client = QdrantClient(path=str(work / "qdrant"))
if not client.collection_exists("lc"):
    client.create_collection("lc", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
store = QdrantVectorStore(client=client, collection_name="lc", embedding=MiniLM())
manager = SQLRecordManager("qdrant/lc", db_url=f"sqlite:///{work / 'records.sqlite'}")
manager.create_schema()
splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
    AutoTokenizer.from_pretrained(folder, local_files_only=True), chunk_size=198, chunk_overlap=0)
docs = [Document(p.read_text(encoding="utf-8"), metadata={"source": p.name})
        for p in sorted((work / "docs").glob("*.md"))]
result = index(splitter.split_documents(docs), manager, store, cleanup="incremental",
               source_id_key="source")  # sha1, the one encoder whose ids Qdrant takes
print(result, file=sys.stderr)
client.close()
"""

ANCHOR_LLAMAINDEX = """
import sys
from pathlib import Path
work = Path(sys.argv[1])
from llama_index.core import Document
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from rechunk.integrations.onnx import OnnxEmbedder
folder = str(OnnxEmbedder().folder)
_model = []
def model():
    if not _model:
        from sentence_transformers import SentenceTransformer
        _model.append(SentenceTransformer(folder, device="cpu", local_files_only=True))
    return _model[0]
class MiniLM(BaseEmbedding):
    @classmethod
    def class_name(cls):
        return "MiniLM"
    def _get_text_embedding(self, text):
        return self._get_text_embeddings([text])[0]
    def _get_text_embeddings(self, texts):
        return model().encode(texts, batch_size=32).tolist()
    def _get_query_embedding(self, query):
        return self._get_text_embedding(query)
    async def _aget_query_embedding(self, query):
        return self._get_query_embedding(query)
client = QdrantClient(path=str(work / "qdrant"))
pipeline = IngestionPipeline(
    transformations=[SentenceSplitter(chunk_size=198, chunk_overlap=0), MiniLM()],
    docstore=SimpleDocumentStore(), vector_store=QdrantVectorStore(client=client, collection_name="li"),
    docstore_strategy=DocstoreStrategy.UPSERTS)
state = work / "pipeline"
if state.exists():
    pipeline.load(str(state))
docs = [Document(text=p.read_text(encoding="utf-8"), id_=p.name)
        for p in sorted((work / "docs").glob("*.md"))]
nodes = pipeline.run(documents=docs)
pipeline.persist(str(state))
print(len(nodes), "nodes embedded", file=sys.stderr)
client.close()
"""


def _edit(work: Path) -> None:
    guide = work / "docs" / "sync-guide.md"
    text = guide.read_text(encoding="utf-8")
    guide.write_text(text.replace("## Embed\n", NEW_PARAGRAPH.lstrip() + "\n## Embed\n"), "utf-8")


def end_to_end(runs: int) -> dict[str, Any]:
    pipelines = {
        "rechunk sync (onnx, default)": [PY, "-m", "rechunk.cli", "sync", "docs"],
        "rechunk sync --embedder st:": [
            PY,
            "-m",
            "rechunk.cli",
            "sync",
            "docs",
            "--embedder",
            "st:",
        ],
        "LangChain index()": [PY, "-c", ANCHOR_LANGCHAIN, "."],
        "LlamaIndex IngestionPipeline": [PY, "-c", ANCHOR_LLAMAINDEX, "."],
    }
    out: dict[str, Any] = {}
    for name, command in pipelines.items():
        times = []
        for _ in range(runs):
            work = Path(tempfile.mkdtemp(prefix="rechunk-bench-embed-"))
            try:
                shutil.copytree(DOCS, work / "docs")
                subprocess.run(command, cwd=work, env=ENV, check=True, capture_output=True)
                _edit(work)
                start = time.perf_counter()
                subprocess.run(command, cwd=work, env=ENV, check=True, capture_output=True)
                times.append(time.perf_counter() - start)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        out[name] = {"median_s": statistics.median(times), "runs_s": [round(t, 2) for t in times]}
        log(f"  {name}: {out[name]['median_s']:.2f} s")
    return out


# -- API embedder ------------------------------------------------------------------------


def api_costs(pairs: int, cold_runs: int) -> dict[str, Any]:
    from fault_proxy import FaultProxy
    from infinity_server import running_infinity
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.integrations.onnx import OnnxEmbedder
    from rechunk.integrations.openai import OpenAIEmbedder

    folder = OnnxEmbedder().folder
    rows = []
    with tempfile.TemporaryDirectory() as tmp, running_infinity(folder, Path(tmp)) as server:
        proxy = FaultProxy(server.base_url)
        try:
            cold = cold_start("api", cold_runs, url=proxy.url, folder=str(folder))
            embedder = OpenAIEmbedder("minilm", base_url=proxy.url, tokenizer=folder)
            store = QdrantStore(QdrantClient(":memory:"), "docs")
            store.ensure_collection(embedder.dimension)
            cache = rechunk.SQLiteCache(Path(tmp) / "cache.sqlite")
            chunker = rechunk.policy_for(embedder)

            def step(name: str, docs: list[rechunk.Document]) -> None:
                proxy.reset()
                embedder.reset_stats()
                report = rechunk.sync(docs, store, chunker=chunker, embedder=embedder, cache=cache)
                sent = proxy.forwarded_inputs()
                rows.append(
                    {
                        "step": name,
                        "new_inputs": report.inputs["embedded"],
                        "requests": len(proxy.seen),
                        "inputs_sent": len(sent),
                        "distinct_sent": len(set(sent)),
                        "tokens_sent": embedder.stats.tokens,
                        "tokens_of_new_inputs": report.tokens_embedded
                        + embedder.special_tokens * report.inputs["embedded"],
                    }
                )
                log(f"  api {name}: {rows[-1]}")

            docs = [
                rechunk.Document(p.name, p.read_text("utf-8")) for p in sorted(DOCS.glob("*.md"))
            ]
            step("examples/docs, first sync", docs)
            edited = [
                rechunk.Document(
                    d.doc_id,
                    d.text.replace("## Embed\n", NEW_PARAGRAPH.lstrip() + "\n## Embed\n"),
                )
                for d in docs
            ]
            step("one paragraph inserted", edited)
            step("no edit", edited)
            revisions = _report.load_revisions()[:pairs]
            step(
                f"{pairs} dev pairs, old", [rechunk.Document(p["id"], p["old"]) for p in revisions]
            )
            step(
                f"{pairs} dev pairs, new", [rechunk.Document(p["id"], p["new"]) for p in revisions]
            )
        finally:
            proxy.close()
    return {"cold_start": cold, "syncs": rows}


# -- report ------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    p, t, e = results["parity"], results["throughput"], results["end_to_end"]
    cold = results["cold_start"]
    lines = [
        "## Embedders: cold start, throughput, and the whole sync (`benchmarks/embed.py`)",
        "",
        f"Machine: {results['machine']}; load average at start {results['load_start']}, "
        f"at end {results['load_end']} (other work shares these cores: figures are noisy). "
        f"Reproduce: `{COMMAND}`. Model: all-MiniLM-L6-v2 (packaged). Chunks are dev: "
        "distinct chunks of `../shared/revisions/dev.jsonl` cut by `policy_for` (structured).",
        "",
        f"**Parity (dev).** `OnnxEmbedder` vs `SentenceTransformerEmbedder` on {p['chunks']} chunks "
        f"(mean {p['mean_tokens']} tokens): max abs difference {p['max_abs_diff']:.2e}, min cosine "
        f"{p['min_cosine']:.7f}: float32 noise, so both share one model identity "
        f"({'yes' if p['same_model_id'] else 'NO'}) and switching backend re-embeds nothing.",
        "",
        "| backend | cold start (process start to first vector, median of "
        f"{len(cold['onnx']['runs_s'])}) | chunks/s, 1 thread | chunks/s, 2 threads |",
        "| --- | ---: | ---: | ---: |",
        f"| ONNX Runtime (`onnx:`, the default) | {cold['onnx']['median_s']:.2f} s | "
        f"{t['onnx_1t']['median']} | {t['onnx_2t']['median']} |",
        f"| torch (`st:`) | {cold['torch']['median_s']:.2f} s | {t['torch_1t']['median']} | "
        f"{t['torch_2t']['median']} |",
    ]
    api = results.get("api")
    if api:
        lines.append(
            f"| OpenAI-compatible API (`openai:`, infinity on this machine) | "
            f"{api['cold_start']['median_s']:.2f} s | | |"
        )
    ratio = t["onnx_2t"]["median"] / t["torch_2t"]["median"]
    lines += [
        "",
        f"Throughput on {t['chunks']} dev chunks (median of {t['rounds']} rounds): ONNX at 2 "
        f"threads runs {ratio:.2f}x torch at 2 threads (target >= 1.5x). Cold start target: <= 1 s.",
        "",
        "**The whole sync after a one-paragraph edit** of `examples/docs` (process start to exit, "
        f"median of {len(next(iter(e.values()))['runs_s'])} fresh copies; the anchors embed with "
        "the same MiniLM through sentence-transformers on torch; target for `rechunk sync` on "
        "the default: <= 1.5 s):",
        "",
        "| pipeline | wall time |",
        "| --- | ---: |",
    ]
    lines += [f"| {name} | {row['median_s']:.2f} s |" for name, row in e.items()]
    if api:
        lines += [
            "",
            "**API embedder: what is sent.** `OpenAIEmbedder` through a counting proxy to a real "
            "OpenAI-compatible server (infinity-emb 0.0.78 serving the packaged MiniLM), sync "
            "with the SQLite cache; tokens are MiniLM's, special tokens included:",
            "",
            "| sync | new inputs | requests | inputs sent (distinct) | tokens sent | "
            "tokens of the new inputs |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {r['step']} | {r['new_inputs']} | {r['requests']} | {r['inputs_sent']} "
            f"({r['distinct_sent']}) | {r['tokens_sent']:,} | {r['tokens_of_new_inputs']:,} |"
            for r in api["syncs"]
        ]
    elif results.get("api_skipped"):
        lines += ["", f"API embedder: not measured ({results['api_skipped']})."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run; print, write nothing")
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--parity", type=int, default=400, help="chunks for parity (0: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--e2e", type=int, default=3)
    parser.add_argument("--api-pairs", type=int, default=10)
    parser.add_argument("--no-api", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.chunks, args.parity, args.rounds, args.cold, args.e2e, args.api_pairs = (
            60, 60, 1, 2, 1, 2,
        )  # fmt: skip
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    from rechunk.integrations.onnx import export_onnx

    export_onnx()  # once, before anything is timed
    results: dict[str, Any] = {"machine": _report.machine(), "load_start": load_average()}
    log("parity ...")
    results["parity"] = parity(dev_chunks(args.parity or None))
    log(f"  {results['parity']}")
    log("cold start ...")
    results["cold_start"] = {b: cold_start(b, args.cold) for b in ("onnx", "torch")}
    log(f"  {results['cold_start']}")
    log("throughput ...")
    results["throughput"] = {
        "chunks": args.chunks,
        "rounds": args.rounds,
        **throughput(dev_chunks(args.chunks), args.rounds),
    }
    log("end to end ...")
    results["end_to_end"] = end_to_end(args.e2e)
    if not args.no_api:
        log("API embedder ...")
        try:
            results["api"] = api_costs(args.api_pairs, args.cold)
        except RuntimeError as exc:
            results["api_skipped"] = str(exc).splitlines()[0]
    results["load_end"] = load_average()
    text = markdown(results)
    print(text)
    if not args.quick:
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "embed.json").write_text(json.dumps(results, indent=2), "utf-8")
        _report.write_section("embed", text)


if __name__ == "__main__":
    main()
