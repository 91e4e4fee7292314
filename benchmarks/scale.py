"""Scale benchmark: what a sync costs as the corpus grows, beside LangChain's index().

Each case runs in a fresh process, as a sync job would (a cron run, a CI step):
open the store, sync, exit. The embedder is a fast deterministic hash embedder
(384-d, MiniLM's tokenizer and window), so the figures are rechunk's own cost and
the store's, not the model's. The corpus is N Markdown documents of about 4.4 KB,
each a heading and paragraphs drawn (seeded) from the English dev revisions'
new texts.

Cases, in order, on one store per N:

* ``initial``: sync every document into an empty collection;
* ``noop``: the same documents again (nothing changed);
* ``edit_all``: one document edited (a paragraph inserted), every document passed;
* ``edit_one``: that document edited again, only it passed;
* ``prune``: every document but the last 1% passed with ``prune=True`` (the first one
  edited again).

Stores: embedded Qdrant (``qdrant:DIR``), Qdrant Edge (``qdrant-edge:DIR``), embedded
Chroma (``chroma:DIR``) and a Chroma server this script starts (``chroma run``,
127.0.0.1). The anchor is
LangChain's ``index()`` with a ``SQLRecordManager`` (SQLite file) writing through
``langchain_qdrant`` / ``langchain_chroma`` into the same kind of store, with a
``RecursiveCharacterTextSplitter`` length-matched to rechunk's chunks (cleanup
``incremental``; ``full`` for prune).

With ``--floor``, the tool ``chroma-only`` times Chroma's own adds of the records
the initial sync writes, nothing else: what no tool writing them can go below; the
tool ``chroma-vectors`` adds only their ids and vectors (Chroma's vector index and
log, without texts or metadata); ``qdrant-only`` upserts the same points into
embedded Qdrant through rechunk's ``local_client``. The read floor needs no flag: on
Chroma, each no-op process also times Chroma's own filtered reads of every point
the no-op read (``chroma_reads_s``), so that the no-op's growth can be set beside
Chroma's. Each ``edit_one`` process also syncs its document once more, unchanged,
through the API (``api_again_s``) and through ``rechunk sync FILE`` (the CLI's
``main`` in the same process, its store open left out: ``cli_s``), so that what the
CLI adds to the API is measured at every size.

A series stops after the first N at which a case takes longer than ``--limit``
seconds (default 600); the growth exponent b of time ~ N^b is fitted between
consecutive sizes. Every case runs ``--repeat`` times, each a fresh process, and keeps
the median: the runs of a cell of a few seconds differ by up to 45%, enough to move an
exponent by 0.2. The runs go in rounds, each round every size once, smallest first, so
that a drift of the machine's speed during the run falls on every size alike rather
than on the largest. Each size keeps its store between rounds, and every round starts
from the corpus as the initial sync wrote it: before each initial sync but the first
round's, what the last one wrote is removed (untimed); where the initial sync is not
re-run (``--cases`` without it), an untimed process syncs back what the last round
edited and pruned.

With ``--edge``, the Qdrant Edge series goes further (1k to 200k documents, about 2 M
points, by default) into its own json (``results/scale_edge.json``), beside embedded
Qdrant's initial sync at ``--edge-baseline`` documents (default 50k) made in the same
run, for the ratio of their throughputs; every case also records the process's RSS once
its documents are built (``docs_mb``), so that a peak can be read beyond the documents
themselves. The docs section shows both runs.

    python benchmarks/scale.py                       # 1k, 5k, 20k, 50k; writes docs section
    python benchmarks/scale.py --sizes 500,2000 --quick   # prints only
    python benchmarks/scale.py --edge --repeat 3 --limit 1800   # Qdrant Edge to 200k
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report

RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"
EDGE_RESULTS = RESULTS.with_name("scale_edge.json")
EDGE_SIZES = "1000,5000,20000,50000,200000"
CASES = ("initial", "noop", "edit_all", "edit_one", "prune")
#: Every case runs ``--repeat`` times (median kept), in rounds that each start from the
#: corpus: the store is emptied before each initial sync but the first
#: (:func:`_emptier`), or what the last round edited and pruned is synced back
#: (``restore``, untimed).
#: The ``--floor`` tools and their stores: Chroma's own adds of the initial sync's
#: records, and of their ids and vectors only; embedded Qdrant's own upserts of them.
FLOOR_STORES = {"chroma-only": "chroma", "chroma-vectors": "chroma", "qdrant-only": "qdrant"}
#: With ``--edge-floor``: Qdrant Edge's own writes of the initial sync's points (a floor of
#: its own: ``--floor`` runs the three above)
EDGE_FLOOR = "edge-only"
FLOORS = (*FLOOR_STORES, EDGE_FLOOR)
STORES = ("qdrant", "qdrant-edge", "chroma", "chroma-server")
#: the URI scheme of each embedded store rechunk opens from a folder
SCHEMES = {"qdrant": "qdrant", "qdrant-edge": "qdrant-edge", "chroma": "chroma"}
ANCHOR_STORES = ("qdrant", "chroma", "chroma-server")
DIM = 384
#: The size at which the issue set its targets against LangChain; where the two tools did
#: not both run it, the verdict compares at the largest size they both ran
TARGET_N = 5000
DOC_BYTES = 4400
COLLECTION = "scale"
#: LangChain's chunk size, length-matched: its median chunk on this corpus is 154 MiniLM
#: tokens, rechunk's (structured, sized for MiniLM) 155
LANGCHAIN_CHARS = 740
INSERTED = (
    "This paragraph was inserted by the scale benchmark to stand for a small edit: "
    "one new paragraph in the middle of one document, everything else unchanged."
)


# -- corpus ------------------------------------------------------------------------------


def _paragraphs() -> list[str]:
    pairs = _report.load_revisions()
    out: list[str] = []
    for pair in pairs:
        if pair["lang"] != "en":
            continue
        for block in pair["new"].split("\n\n"):
            block = block.strip()
            if 40 <= len(block) <= 1500 and not block.startswith("```"):
                out.append(block)
    return sorted(set(out))


def corpus(n: int) -> dict[str, str]:
    """``n`` documents, doc_id -> text, the same for every process."""
    paragraphs = _paragraphs()
    docs: dict[str, str] = {}
    for i in range(n):
        rng = random.Random(i)
        parts = [f"# Document {i}"]
        size = len(parts[0])
        while size < DOC_BYTES:
            para = paragraphs[rng.randrange(len(paragraphs))]
            parts.append(para)
            size += len(para) + 2
        docs[f"doc-{i:06d}.md"] = "\n\n".join(parts) + "\n"
    return docs


def edited(text: str, times: int) -> str:
    parts = text.split("\n\n")
    middle = len(parts) // 2
    for t in range(times):
        parts.insert(middle, f"{INSERTED} (edit {t + 1})")
    return "\n\n".join(parts)


# -- the fast embedder -------------------------------------------------------------------


class HashEmbedder:
    """Deterministic unit vectors from the input's hash, with MiniLM's tokenizer and window."""

    model_id = "bench-hash/v1"
    dimension = DIM
    max_input_tokens = 256
    special_tokens = 2
    loaded = True  # nothing to load (``rechunk sync --json`` reports it)

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        from rechunk.chunking.tokens import default_tokenizer_path

        tok = Tokenizer.from_file(str(default_tokenizer_path()))
        tok.no_truncation()
        tok.no_padding()
        self.tokenizer = tok
        self.calls = 0
        self.inputs = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.inputs += len(texts)
        return np.stack([hash_vector(t) for t in texts])


def hash_vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


# -- one case in a fresh process ---------------------------------------------------------


def _docs_for(case: str, n: int) -> tuple[dict[str, str], bool]:
    """The documents a case passes and whether it prunes. Every round of a series starts
    from the corpus as the initial sync wrote it, and the cases in turn change the first
    document by one paragraph: ``edit_all`` inserts one, ``edit_one`` a second,
    ``prune`` takes the second out again (and leaves out the last 1% of the documents).
    ``restore``: the first document and the last 1% as they were, synced to bring the
    store back to the corpus before a round that does not re-run the initial sync."""
    docs = corpus(n)
    first = next(iter(docs))
    keep = n - max(1, n // 100)
    if case == "restore":
        return {first: docs[first], **dict(list(docs.items())[keep:])}, False
    inserted = {"edit_all": 1, "edit_one": 2, "prune": 1}.get(case, 0)
    if inserted:
        docs[first] = edited(docs[first], inserted)
    if case == "edit_one":
        return {first: docs[first]}, False
    if case == "prune":
        return dict(list(docs.items())[:keep]), True
    return docs, False


def child_rechunk(
    store_uri: str, case: str, n: int, chroma_db: str | None = None
) -> dict[str, Any]:
    import rechunk
    from rechunk.adapters.uri import open_store

    docs, prune = _docs_for(case, n)
    embedder = HashEmbedder()
    chunker = rechunk.policy_for(embedder)
    # import the store's client library first: "open" is the store's own start
    module = store_uri.split(":", 1)[0].split("+", 1)[0].replace("-", "_")
    __import__("rechunk.adapters." + module)
    documents = [rechunk.Document(doc_id, text) for doc_id, text in docs.items()]
    docs_mb = _rss_mb()["VmRSS"]  # the process with its documents, before the store opens
    t0, cpu0 = time.perf_counter(), time.process_time()
    opened = open_store(store_uri, COLLECTION)
    store = opened.store
    if store.collection_info() is None:
        store.ensure_collection(DIM)
    open_s = time.perf_counter() - t0
    open_cpu_s = time.process_time() - cpu0  # every thread's; on a loaded machine, < open_s
    backlog = _chroma_log_records(chroma_db) if chroma_db else None
    helper_mb = _watch_chunking_helper()
    t0 = time.perf_counter()
    report = rechunk.sync(documents, store, chunker=chunker, embedder=embedder, prune=prune)
    sync_s = time.perf_counter() - t0
    chroma = store_uri.startswith("chroma")
    probe = _smallest_request_ms(store) if chroma else None
    floor = _chroma_reads_s(store, list(docs)) if chroma and case == "noop" else None
    extra: dict[str, float] = {}
    if case == "noop" and store_uri.startswith("qdrant-edge:"):
        # the sync's peak first: a search scans every vector, and the pages it reads count
        extra["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        extra["search_ms"] = _search_ms(store)
        extra["search_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        extra["disk_mb"] = _folder_mb(store_uri.split(":", 1)[1])
    cli: dict[str, float] = {}
    if case == "edit_one":
        t0 = time.perf_counter()
        rechunk.sync(documents, store, chunker=chunker, embedder=embedder)
        cli["api_again_s"] = time.perf_counter() - t0
    memory = _rss_mb()  # after the sync, the store still open
    opened.close()
    if cli:  # the sync's peak, taken before the CLI opens the store a second time
        cli["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cli["cli_s"] = _cli_s(store_uri, docs, embedder)
    return {
        **cli,
        **extra,
        **({"chroma_reads_s": floor} if floor is not None else {}),
        **({"request_ms": probe} if probe is not None else {}),
        **({"chroma_log": backlog} if backlog is not None else {}),
        "open_s": open_s,
        "open_cpu_s": open_cpu_s,
        "sync_s": sync_s,
        "docs_mb": docs_mb,
        "rss_anon_mb": memory["RssAnon"],
        "rss_file_mb": memory["RssFile"],
        "stages": report.seconds,
        "embedded": report.inputs["embedded"],
        "chunks": report.chunks,
        "documents": report.documents,
        "stale_check": report.stale_check,
        "points": sum(report.chunks[k] for k in ("kept", "updated", "added")),
        **({"helper_mb": max(helper_mb)} if helper_mb else {}),
    }


def _search_ms(store: Any) -> float:
    """One ``search(vector, k=5)`` of the collection, median of 5 (ms): Qdrant Edge's
    segments are searched exactly, a scan of every vector (no HNSW graph is built)."""
    times = []
    for i in range(5):
        vector = hash_vector(f"query {i}")
        t0 = time.perf_counter()
        store.search(vector, 5)
        times.append(time.perf_counter() - t0)
    return sorted(times)[2] * 1000


def _folder_mb(folder: str) -> float:
    """The disk space the files under ``folder`` take (MB): blocks allocated, not their
    sizes (Edge sizes its files ahead, 32 MB at a time, and leaves them sparse)."""
    files = (p for p in Path(folder).rglob("*") if p.is_file())
    return sum(p.stat().st_blocks * 512 for p in files) / 2**20


def _rss_mb() -> dict[str, float]:
    """This process's resident memory now, in MB: VmRSS, and its parts RssAnon (what it
    allocated) and RssFile (pages of files it maps: a store's files read in place count
    here, and the kernel may drop them at any time)."""
    out = {"VmRSS": 0.0, "RssAnon": 0.0, "RssFile": 0.0}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in out:
                out[name] = int(value.split()[0]) / 1024
    return out


def _watch_chunking_helper() -> list[float]:
    """The peak RSS (MB) of each chunking helper a sync of this process ends, read from
    /proc as it ends. (RUSAGE_CHILDREN would not do: a child started with vfork + exec
    inherits its parent's peak at the exec.)"""
    import importlib

    ahead = importlib.import_module("rechunk.sync.ahead")
    peaks: list[float] = []
    close = ahead.ChunkAhead.close

    def close_and_measure(self: Any) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{self.process.pid}/status").read_text()
                kb = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM"))
                peaks.append(int(kb) / 1024)
        close(self)

    ahead.ChunkAhead.close = close_and_measure
    return peaks


def _smallest_request_ms(store: Any) -> float:
    """Chroma's own latency for the smallest request on this collection (the id of one
    record, nothing else), median of 9: what every read or write of a sync pays at least."""
    collection = store._client.get_collection(COLLECTION, embedding_function=None)
    times = []
    for _ in range(9):
        t0 = time.perf_counter()
        collection.get(limit=1, include=[])
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1000


def _cli_s(store_uri: str, docs: dict[str, str], embedder: Any) -> float:
    """``rechunk sync FILE`` of the documents just synced (now unchanged), run in this
    process through the CLI's ``main`` with this benchmark's embedder, less the CLI's
    own opening of the store: what the CLI adds to the sync beside ``api_again_s``, the
    same sync made straight through the API (files read, the collection checked, the
    summary, the manifest of synced folders, and any read of its own)."""
    import tempfile

    import rechunk.adapters.uri
    import rechunk.cli as cli
    from rechunk.cli import compose

    real_open = rechunk.adapters.uri.open_store
    opening: list[float] = []

    def timed_open(*args: Any, **kwargs: Any) -> Any:
        """The store opened and asked for its info, as the API's ``open_s`` is: a store's
        first request (Chroma loading its collection) is its opening, not the CLI's."""
        t0 = time.perf_counter()
        opened = real_open(*args, **kwargs)
        opened.store.collection_info()
        opening.append(time.perf_counter() - t0)
        return opened

    rechunk.adapters.uri.open_store = timed_open
    compose.open_embedder = lambda args: embedder
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as folder:
        for doc_id, text in docs.items():
            Path(folder, doc_id).write_text(text, encoding="utf-8")
        os.chdir(folder)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                t0 = time.perf_counter()
                code = cli.main(
                    ["sync", *docs, "--store", store_uri, "--collection", COLLECTION, "--json"]
                )
                seconds = time.perf_counter() - t0
        finally:
            os.chdir(here)
    assert code == 0 and len(opening) == 1, (code, opening)
    return seconds - opening[0]


def _chroma_reads_s(store: Any, doc_ids: list[str]) -> float:
    """Chroma's own cost of the reads a no-op sync's plan makes, timed alone: every
    document's points (metadata and text), read with the same filter, ``doc_id`` among
    :data:`rechunk.sync.DOC_BATCH` ids a request, in the order the sync reads them,
    and nothing decoded or compared. What no tool can go below that reads the stored
    points to learn that nothing changed."""
    from rechunk.sync import DOC_BATCH

    collection = store._client.get_collection(COLLECTION, embedding_function=None)
    records = 0
    t0 = time.perf_counter()
    for start in range(0, len(doc_ids), DOC_BATCH):
        where = {"doc_id": {"$in": doc_ids[start : start + DOC_BATCH]}}
        records += len(collection.get(where=where, include=["metadatas", "documents"])["ids"])
    seconds = time.perf_counter() - t0
    assert records == store.collection_info().points, "the floor must read every point"
    return seconds


def _chroma_log_records(db: str) -> int:
    """Records in Chroma's write-ahead log (its SQLite ``embeddings_queue``) that it has
    not yet let go: it keeps them until its vector index is next saved (every
    ``sync_threshold`` records, 1,000 by default), and every write re-reads them, so a
    small write's cost follows this backlog, not the collection's size."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM embeddings_queue").fetchone()[0])


def child_langchain(
    store_kind: str, folder: str, case: str, n: int, uri: str | None = None
) -> dict[str, Any]:
    from langchain_classic.indexes import SQLRecordManager, index
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    class Hash(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hash_vector(t).tolist() for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return hash_vector(text).tolist()

    docs, prune = _docs_for(case, n)
    if store_kind == "qdrant":
        from langchain_qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient, models
    else:
        import chromadb
        from langchain_chroma import Chroma
    t0 = time.perf_counter()
    if store_kind == "qdrant":
        client = QdrantClient(path=os.path.join(folder, "qdrant"))
        if not client.collection_exists(COLLECTION):
            client.create_collection(
                COLLECTION,
                vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
            )
        vectorstore: Any = QdrantVectorStore(client, COLLECTION, embedding=Hash())
    else:
        settings = chromadb.Settings(anonymized_telemetry=False)
        if store_kind == "chroma-server":  # the server series() started, by its URI
            assert uri is not None
            host, port = uri.rsplit("/", 1)[-1].rsplit(":", 1)
            chroma: Any = chromadb.HttpClient(host=host, port=int(port), settings=settings)
        else:
            chroma = chromadb.PersistentClient(os.path.join(folder, "chroma"), settings=settings)
        vectorstore = Chroma(COLLECTION, embedding_function=Hash(), client=chroma)
    manager = SQLRecordManager(
        f"{store_kind}/{COLLECTION}", db_url=f"sqlite:///{folder}/records.sqlite"
    )
    manager.create_schema()
    open_s = time.perf_counter() - t0
    splitter = RecursiveCharacterTextSplitter(chunk_size=LANGCHAIN_CHARS, chunk_overlap=0)
    t0 = time.perf_counter()
    chunks = splitter.create_documents(list(docs.values()), metadatas=[{"source": d} for d in docs])
    result = index(
        chunks,
        manager,
        vectorstore,
        cleanup="full" if prune else "incremental",
        source_id_key="source",
        key_encoder="sha1",
    )
    sync_s = time.perf_counter() - t0
    if store_kind == "qdrant":
        client.close()
    return {"open_s": open_s, "sync_s": sync_s, "result": dict(result), "points": len(chunks)}


def _initial_records(n: int) -> tuple[list[tuple[str, Any]], np.ndarray]:
    """The points an initial sync of ``n`` documents writes, ``(point id, PointPayload)``,
    and their vectors: the same ids, payloads and vectors as ``rechunk.sync``'s."""
    import rechunk
    from rechunk.reuse.identity import input_key, point_id, text_revision
    from rechunk.sync.store import PointPayload

    docs, _ = _docs_for("initial", n)
    embedder = HashEmbedder()
    chunker = rechunk.policy_for(embedder)
    policy = chunker.policy_id
    records: list[tuple[str, Any]] = []
    for doc_id, text in docs.items():
        seen: dict[str, int] = {}
        for ordinal, chunk in enumerate(chunker.chunk(text)):
            key = input_key(embedder.model_id, chunk.text)
            pid = point_id(doc_id, key, seen.get(key, 0))
            seen[key] = seen.get(key, 0) + 1
            payload = PointPayload(
                doc_id=doc_id, revision=text_revision(text), policy=policy, input_key=key,
                model_id=embedder.model_id, ordinal=ordinal, start=chunk.start, end=chunk.end,
                tokens=chunk.tokens, text=chunk.text,
            )  # fmt: skip
            records.append((pid, payload))
    return records, np.stack([hash_vector(payload.text) for _, payload in records])


def child_floor(folder: str, n: int, tool: str) -> dict[str, Any]:
    """The store's own cost of the initial sync's writes: the points ``rechunk.sync``
    writes (Chroma's built before the clock starts, Qdrant's each batch as it is sent)
    written straight through the store's client, and nothing else: no chunking, no
    reads, no checks.

    ``chroma-only``: ``collection.add`` of ids, texts, metadata and vectors in requests
    of ChromaStore's default size; ``chroma-vectors``: ids and vectors alone.
    ``qdrant-only``: ``upsert`` into embedded Qdrant through rechunk's ``local_client``
    (write-ahead logging, float32 vectors grown as QdrantStore grows them) in batches
    of QdrantStore's default size."""
    records, vectors = _initial_records(n)
    if tool == "qdrant-only":
        return _qdrant_floor(folder, records, vectors)
    if tool == EDGE_FLOOR:
        return _edge_floor(folder, records, vectors)
    import chromadb

    from rechunk.adapters._layout import chroma_record

    rows = [(pid, *chroma_record(pid, payload, "langchain")) for pid, payload in records]
    t0 = time.perf_counter()
    client = chromadb.PersistentClient(
        path=os.path.join(folder, "chroma"), settings=chromadb.Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection(
        COLLECTION, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for start in range(0, len(rows), 1024):
        part = rows[start : start + 1024]
        ids = [pid for pid, _, _ in part]
        embeddings = vectors[start : start + len(part)]
        if tool == "chroma-vectors":
            collection.add(ids=ids, embeddings=embeddings)
            continue
        collection.add(
            ids=ids,
            embeddings=embeddings,
            documents=[text for _, text, _ in part],
            metadatas=[metadata for _, _, metadata in part],
        )
    return {"open_s": open_s, "sync_s": time.perf_counter() - t0, "points": len(rows)}


def _qdrant_floor(folder: str, records: list[tuple[str, Any]], vectors: np.ndarray) -> dict[str, Any]:
    from qdrant_client import models

    from rechunk.adapters._layout import qdrant_payload
    from rechunk.adapters.qdrant import QdrantStore, _local_collection, _reserve, local_client

    t0 = time.perf_counter()
    client = local_client(os.path.join(folder, "qdrant"))
    QdrantStore(client, COLLECTION).ensure_collection(DIM)
    collection = _local_collection(client, COLLECTION)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    # each batch's points are built as it is sent, as a client writing them would: built
    # all at once first, they held 4.2 GB at 20,000 documents, which slowed the upserts
    for start in range(0, len(records), 256):
        part = [
            models.PointStruct(
                id=pid, vector=vector.tolist(), payload=qdrant_payload(pid, payload, "langchain")
            )
            for (pid, payload), vector in zip(
                records[start : start + 256], vectors[start : start + 256]
            )
        ]
        _reserve(collection, len(part))
        client.upsert(COLLECTION, points=part, wait=True)
    sync_s = time.perf_counter() - t0
    client.close()
    return {"open_s": open_s, "sync_s": sync_s, "points": len(records)}


def _edge_floor(folder: str, records: list[tuple[str, Any]], vectors: np.ndarray) -> dict[str, Any]:
    """``edge-only``: the initial sync's points upserted into a Qdrant Edge collection made
    by rechunk's store (its configuration and payload indexes), each batch of the store's
    default size built as it is sent (``qdrant_edge.Point`` of the id, the vector as a list
    and the payload ``QdrantEdgeStore`` writes), and the optimizer run as the store runs it
    (``EdgeClient.changed``). ``build_s``: the time spent building the points (Edge's
    bindings convert each payload value into its own types there); the rest of ``sync_s``
    is Edge's own ``update`` and optimizer; ``cpu_s``: the CPU time of the loop, every
    thread's."""
    import qdrant_edge as qe

    from rechunk.adapters._layout import qdrant_payload
    from rechunk.adapters.qdrant_edge import QdrantEdgeStore, edge_client

    t0 = time.perf_counter()
    client = edge_client(os.path.join(folder, "edge"))
    QdrantEdgeStore(client, COLLECTION).ensure_collection(DIM)
    shard = client.shard(COLLECTION)
    assert shard is not None
    open_s = time.perf_counter() - t0
    build_s = 0.0
    t0, cpu0 = time.perf_counter(), time.process_time()
    for start in range(0, len(records), 256):
        t1 = time.perf_counter()
        part = [
            qe.Point(pid, vector.tolist(), qdrant_payload(pid, payload, "langchain"))
            for (pid, payload), vector in zip(
                records[start : start + 256], vectors[start : start + 256]
            )
        ]
        build_s += time.perf_counter() - t1
        shard.update(qe.UpdateOperation.upsert_points(part))
        client.changed(COLLECTION, shard, len(part))
    sync_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    client.close()
    return {
        "open_s": open_s,
        "sync_s": sync_s,
        "cpu_s": cpu_s,  # every thread's: on a loaded machine the clock's figure waits
        "build_s": build_s,
        "points": len(records),
    }


def child(args: argparse.Namespace) -> None:
    spec = json.loads(args.child)
    if spec["tool"] == "rechunk":
        out = child_rechunk(spec["uri"], spec["case"], spec["n"], spec.get("chroma_db"))
    elif spec["tool"] in FLOORS:
        out = child_floor(spec["folder"], spec["n"], spec["tool"])
    else:
        out = child_langchain(
            spec["store"], spec["folder"], spec["case"], spec["n"], spec.get("uri")
        )
    out.setdefault("peak_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print("RESULT " + json.dumps(out))


def run_case(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s", "wall_s": timeout}
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["no result"], "wall_s": wall}
    out: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    out["wall_s"] = wall
    return out


@contextlib.contextmanager
def chroma_server(path: Path) -> Iterator[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from chroma_server import running_chroma

    with running_chroma(path) as server:
        yield f"chroma+http://127.0.0.1:{server.port}"


def _emptier(folder: Path, store: str, uri: str | None) -> Callable[[], None]:
    """What removes everything an initial sync into ``folder``'s store wrote (and
    LangChain's record manager), so that the next initial sync starts from nothing: the
    embedded stores' folders are deleted (opening an embedded Qdrant collection to drop
    it would load it whole), a Chroma server's collection is dropped through rechunk's
    own store (`drop_collection`)."""

    def empty() -> None:
        if store != "chroma-server":
            shutil.rmtree(folder)
            folder.mkdir()
            return
        from rechunk.adapters.uri import open_store

        assert uri is not None
        opened = open_store(uri, COLLECTION)
        opened.store.drop_collection()
        opened.close()
        (folder / "records.sqlite").unlink(missing_ok=True)

    return empty


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median sync time, with every run's sync time in ``runs_s``."""
    ordered = sorted(results, key=lambda r: r["sync_s"])
    median = {**ordered[len(ordered) // 2], "runs_s": [r["sync_s"] for r in ordered]}
    if all("cli_s" in r for r in results):  # the CLI's own median, not the sync's run's
        adds = sorted(r["cli_s"] - r["api_again_s"] for r in results)
        median["cli_adds_s"] = adds[len(adds) // 2]
    return median


def series(
    tool: str,
    store: str,
    sizes: Sequence[int],
    limit: float,
    work: Path,
    repeat: int = 1,
    cases: Sequence[str] = CASES,
    keep: Path | None = None,
) -> list[dict[str, Any]]:
    """Every size's row of one tool on one store, each case the median of ``repeat``
    runs (each a fresh process). Only ``cases`` are kept;
    the initial sync runs (once, untimed) even when not asked for, as the other cases
    start from what it wrote.

    The runs go in rounds: each round runs every size's cases once, smallest N first,
    so that the runs of different sizes are made side by side. This machine's speed
    drifts over the hours (the same initial sync of 20,000 documents took 54 s one
    evening and 119 s that morning), and a drift between the runs of two sizes is read
    as growth: the initial syncs of 20,000 and 50,000 documents, each size's three runs
    made together and an hour apart, grew with exponent 1.21 (53.9 -> 163.1 s); made in
    rounds, with 1.00 (64.3 -> 160.7 s). Each size keeps its own store between rounds,
    and every round starts from the corpus as the initial sync wrote it, so that each
    round's edits are the same edits (:func:`_docs_for`): an initial sync but the first
    round's follows the removal of what the last one wrote (untimed); where the initial
    sync is not re-run, a round but the first starts with a restore of what the last
    one edited and pruned (its own process, untimed). With ``keep`` (``--keep-stores``),
    rechunk's stores live there and outlast the run: a store a run before left is
    restored to the corpus (untimed) rather than synced from nothing. The series stops after the first N at which a case of the first round takes longer than
    ``limit`` (or a case fails): larger N are not run."""
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {n: {} for n in sizes}
    failed: dict[int, dict[str, Any]] = {}
    ran: list[int] = []
    stopped: str | None = None
    with contextlib.ExitStack() as stack:
        homes: dict[int, tuple[dict[str, Any], Callable[[], None], bool]] = {}
        for round_ in range(repeat):
            for n in ran if round_ else sizes:
                if n in failed:
                    continue
                if n not in homes:
                    homes[n] = _home(stack, tool, store, n, work, keep)
                    ran.append(n)
                spec, empty, reused = homes[n]
                asked = [c for c in (CASES if tool not in FLOORS else ("initial",)) if c in cases]
                if round_ == 0 and not reused and "initial" not in asked:
                    asked.insert(0, "initial")  # the other cases start from what it wrote
                elif (round_ or reused) and "initial" in asked:
                    empty()
                elif (round_ or reused) and asked:  # back to the corpus the initial sync wrote
                    restored = run_case({**spec, "case": "restore"}, limit)
                    if "error" in restored:
                        failed[n] = {**restored, "case": asked[0]}
                for case in asked:
                    if n in failed:
                        break
                    result = run_case({**spec, "case": case}, limit)
                    print(
                        f"{tool:9} {store:13} n={n:6} {case:9} round {round_ + 1} {_brief(result)}",
                        flush=True,
                    )
                    if "error" in result:
                        failed[n] = {**result, "case": case}
                        break
                    runs[n].setdefault(case, []).append(result)
                slowest = max((r[0]["wall_s"] for r in runs[n].values()), default=0.0)
                if n in failed or (round_ == 0 and slowest > limit):
                    stopped = (
                        f"a case took {slowest:.0f} s (> {limit:.0f} s) or failed; "
                        "larger N not run"
                    )
                    ran = ran[: ran.index(n) + 1]
                    break
    rows: list[dict[str, Any]] = []
    for n in ran:
        row: dict[str, Any] = {"tool": tool, "store": store, "n": n, "cases": {}}
        for case, results in runs[n].items():
            if case in cases:
                row["cases"][case] = _median(results)
        if n in failed:
            row["cases"][failed[n].pop("case")] = failed[n]
        rows.append(row)
    if rows and stopped:
        rows[-1]["stopped"] = stopped
    return rows


def _home(
    stack: contextlib.ExitStack,
    tool: str,
    store: str,
    n: int,
    work: Path,
    keep: Path | None = None,
) -> tuple[dict[str, Any], Callable[[], None], bool]:
    """The store of one size of a series (a folder of its own, and a Chroma server
    started for it, both kept until ``stack`` closes): the spec every case of that size
    runs with, what empties the store before an initial sync, and whether the store is
    one a run before left in ``keep`` (rechunk's embedded stores only: there they stay)."""
    kept = keep is not None and tool == "rechunk" and store != "chroma-server"
    if kept:
        assert keep is not None
        folder = keep / f"{tool}-{store}-{n}"
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(dir=work))
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
    data = folder / ("server" if store == "chroma-server" else store)
    reused = kept and data.is_dir() and any(data.iterdir())
    uri: str | None = None
    if store == "chroma-server":
        uri = stack.enter_context(chroma_server(data))
    elif tool == "rechunk":
        uri = f"{SCHEMES[store]}:{data}"
    chroma_db = {"chroma_db": str(data / "chroma.sqlite3")} if store.startswith("chroma") else {}
    if tool == "rechunk":
        spec: dict[str, Any] = {"tool": "rechunk", "uri": uri, "n": n, **chroma_db}
    else:
        spec = {
            "tool": tool,
            "store": store,
            "folder": str(folder),
            "n": n,
            **({"uri": uri} if store == "chroma-server" else {}),
        }
    return spec, _emptier(folder, store, uri), reused


def _brief(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"ERROR {r['error']}"
    return f"wall {r['wall_s']:.1f}s open {r['open_s']:.1f}s sync {r['sync_s']:.1f}s peak {r['peak_mb']:.0f}MB"


def exponents(rows: list[dict[str, Any]], key: str = "sync_s") -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    for case in CASES:
        vals = []
        for a, b in zip(rows, rows[1:]):
            ta, tb = a["cases"].get(case, {}).get(key), b["cases"].get(case, {}).get(key)
            if ta and tb and ta > 0 and tb > 0:
                vals.append(math.log(tb / ta) / math.log(b["n"] / a["n"]))
            else:
                vals.append(None)
        out[case] = vals
    return out


def fitted(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per case, the least-squares slope of log(time) on log(N) over every size that ran
    it (None below three sizes): one run per cell varies by about 10% on a shared
    2-core machine, which moves an exponent between sizes 2.5x apart by about 0.1; a
    fit over a 50x range moves by a fraction of that."""
    out: dict[str, float | None] = {}
    for case in CASES:
        pts = [
            (math.log(r["n"]), math.log(t))
            for r in rows
            if (t := r["cases"].get(case, {}).get("sync_s")) and t > 0
        ]
        if len(pts) < 3:
            out[case] = None
            continue
        mx = sum(x for x, _ in pts) / len(pts)
        my = sum(y for _, y in pts) / len(pts)
        out[case] = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return out


# -- report ------------------------------------------------------------------------------


def _s(v: float | None) -> str:
    return "" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.0f}")


def to_markdown(result: dict[str, Any]) -> str:
    lines = [
        "## Scale: syncs as the corpus grows (`benchmarks/scale.py`)",
        "",
        f"Machine: {result['machine']}. Reproduce with `python benchmarks/scale.py` "
        f"(whole run {result['seconds']:.0f} s; raw numbers in `benchmarks/results/scale.json`). "
        f"1-minute load average before/after: {result['load'][0]:.2f}/{result['load'][1]:.2f}.",
        *(["", result["note"]] if result.get("note") else []),
        "",
        "Each cell is one fresh process, as a sync job runs: **sync** is the `rechunk.sync` "
        "(or `index()`) call, **open** is opening the store before it (embedded Qdrant loads "
        "its whole collection into memory then). Every case is the median of `--repeat` "
        "such processes, made in rounds that run every size once in turn, so that a drift "
        "of the machine's speed falls on every size alike. Each size keeps its store between "
        "rounds, and every round starts from the corpus and makes the same edits, each one "
        "paragraph: before each initial sync but the first round's, what the last one wrote "
        "is deleted, untimed; where the initial sync is not re-run, an untimed process "
        "syncs back what the last round edited and pruned. The json's `runs_s` lists every "
        "run, and a cell without it ran once. Corpus: N Markdown "
        "documents of ~4.4 KB drawn from the English dev revisions; a fast hash embedder, so "
        "the times are the "
        "tool's and the store's, not a model's. Cases: initial sync; no-op re-sync; one "
        "document edited with all passed; one document only; prune 1% (`prune=True`, or "
        '`cleanup="full"` for LangChain). Tool `chroma-only` (with `--floor`): Chroma\'s '
        "own adds of the records rechunk's initial sync writes (the same ids, texts, "
        "metadata and vectors, in requests of 1,024), timed alone: the floor under any "
        "tool writing those points; `chroma-vectors`: the same adds with ids and vectors "
        "only (Chroma's vector index and log, no texts or metadata); `qdrant-only`: "
        "embedded Qdrant's own upserts of the same points (rechunk's `local_client`, "
        "batches of 256), timed alone.",
        "",
        "Seconds of the sync call per case; points/s of the initial sync; open: the no-op "
        "case's store open; CLI adds: in the one-document case, what `rechunk sync FILE` "
        "(run through the CLI's `main` in the same process, its own store open left out: "
        "`cli_s`) takes beyond the same sync made through the API (`api_again_s`; both "
        "sync that document once more, unchanged, after the timed one); on Chroma, the json's `chroma_reads_s` of a no-op is Chroma's own cost "
        "of the reads that no-op's plan made (the same filtered requests, timed alone "
        "after it, nothing decoded); peak: the largest RSS of the five processes "
        "(plus the chunking helper's own peak where a row records one, `helper_mb`: a sync "
        "with more than 256 documents to chunk starts it).",
        "",
        "| tool | store | N | points | initial | points/s | no-op | one edit, all passed | one doc only | prune 1% | open | CLI adds | peak MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        c = row["cases"]

        def cell(case: str, c: dict[str, Any] = c) -> str:
            r = c.get(case)
            if r is None:
                return "not run"
            if "error" in r:
                over = _killed_past(r)
                return f"> {over}" if over else "failed"
            return _s(r["sync_s"])

        points = f"{c['initial']['points']:,}" if "points" in c.get("initial", {}) else ""
        peak = max((r.get("peak_mb", 0) + r.get("helper_mb", 0) for r in c.values()), default=0)
        initial = c.get("initial", {})
        rate = f"{initial['points'] / initial['sync_s']:,.0f}" if "sync_s" in initial else ""
        noop = c.get("noop", {})
        lines.append(
            f"| {row['tool']} | {row['store']} | {row['n']:,} | {points} | {cell('initial')} | "
            f"{rate} | " + " | ".join(cell(k) for k in CASES[1:])
            + f" | {_s(noop.get('open_s'))} | {_s(_cli_adds(c.get('edit_one', {})))} | "
            + (f"{peak:,.0f} |" if peak else " |")
        )
    lines += [
        "",
        "Growth exponents b (sync time ~ N^b) between consecutive sizes, and fitted over "
        "every size of a series (least squares on log-log; at least three sizes):",
        "",
        "| tool | store | sizes | " + " | ".join(CASES) + " |",
        "|---|---|---|" + "---:|" * len(CASES),
    ]
    for key, rows in result["series"].items():
        tool, store = key.split("|")
        exp = exponents(rows)
        for i, (a, b) in enumerate(zip(rows, rows[1:])):
            vals = [exp[case][i] for case in CASES]
            lines.append(
                f"| {tool} | {store} | {a['n']:,} -> {b['n']:,} | "
                + " | ".join("" if v is None else f"{v:.2f}" for v in vals)
                + " |"
            )
        fit = fitted(rows)
        if any(v is not None for v in fit.values()):
            lines.append(
                f"| {tool} | {store} | {rows[0]['n']:,} -> {rows[-1]['n']:,} (fit) | "
                + " | ".join("" if fit[c] is None else f"**{fit[c]:.2f}**" for c in CASES)
                + " |"
            )
    lines += ["", *verdict(result)]
    stops = [
        f"{r['tool']} on {r['store']} at N={r['n']:,}: " + _stop_reason(r)
        for r in result["rows"]
        if r.get("stopped")
    ]
    if stops:
        lines += ["", "Series stopped: " + "; ".join(stops) + "."]
    return "\n".join(lines)


def _killed_past(result: dict[str, Any]) -> str | None:
    """The limit a case ran past, its process killed (``run_case``'s error "over 600 s"
    gives "600 s"); None for a case that finished or failed otherwise."""
    error = result.get("error")
    return error[len("over ") :] if isinstance(error, str) and error.startswith("over ") else None


def _stop_reason(row: dict[str, Any]) -> str:
    """Why a series stopped at ``row``: the case that failed or ran past --limit (its
    process killed then), else the recorded reason."""
    for case, r in row["cases"].items():
        if "error" in r:
            over = _killed_past(r)
            error = r["error"] if isinstance(r["error"], str) else " ".join(r["error"])
            why = f"ran over {over} and was killed" if over else f"failed ({error})"
            return f"the {case} sync {why}, so no later case and no larger N ran"
    return str(row["stopped"])


def _cli_adds(case: dict[str, Any]) -> float | None:
    """What ``rechunk sync`` took beyond the API in a one-document case (see _cli_s):
    the median over the case's runs where it ran more than once."""
    if "cli_s" not in case:
        return None
    return float(case.get("cli_adds_s", case["cli_s"] - case["api_again_s"]))


def _case(result: dict[str, Any], tool: str, store: str, n: int, case: str) -> dict[str, Any]:
    for row in result["rows"]:
        if (row["tool"], row["store"], row["n"]) == (tool, store, n):
            r: dict[str, Any] = row["cases"].get(case, {})
            return r if "sync_s" in r else {}
    return {}


def verdict(result: dict[str, Any]) -> list[str]:
    """The issue's targets, read off the table."""
    out = ["Against the targets:", ""]
    for store in STORES:
        rows = result["series"].get(f"rechunk|{store}", [])
        done = [r for r in rows if all("sync_s" in r["cases"].get(k, {}) for k in CASES)]
        if len(done) < 2:
            continue
        exp = exponents(done)
        worst = max((v for vals in exp.values() for v in vals if v is not None), default=None)
        fit = [(v, case) for case, v in fitted(done).items() if v is not None]
        fit_text = (
            "" if not fit else f", fitted over all sizes {max(fit)[0]:.2f} ({max(fit)[1]})"
        )
        first, last = done[0], done[-1]
        flat = last["cases"]["edit_one"]["sync_s"] / first["cases"]["edit_one"]["sync_s"]
        line = (
            f"- rechunk on {store}: largest growth exponent between consecutive sizes "
            f"{worst:.2f}{fit_text} (target <= 1.1); one document only {flat:.1f}x from "
            f"{first['n']:,} to {last['n']:,} documents (target within 2x)"
        )
        adds = [_cli_adds(r["cases"]["edit_one"]) for r in (first, last)]
        if adds[0] is not None and adds[1] is not None:
            line += f"; the CLI adds {adds[0]:.3f} -> {adds[1]:.3f} s to it"
        probes = [r["cases"]["edit_one"].get("request_ms") for r in (first, last)]
        if probes[0] and probes[1]:
            line += (
                f" (Chroma's own smallest request, one record's id: {probes[0]:.1f} -> "
                f"{probes[1]:.1f} ms, {probes[1] / probes[0]:.1f}x)"
            )
        backlog = [r["cases"]["edit_one"].get("chroma_log") for r in (first, last)]
        if None not in backlog:
            line += (
                f" (records in Chroma's write-ahead log before those syncs, which each of "
                f"its writes re-reads: {backlog[0]:,} and {backlog[1]:,})"
            )
        floor = exponents(done, "chroma_reads_s")["noop"]
        pairs = [
            f"{f:.2f} from {a['n']:,} to {b['n']:,} (rechunk's no-op: {v:.2f})"
            for a, b, f, v in zip(done, done[1:], floor, exp["noop"])
            if f is not None and v is not None
        ]
        if pairs:
            noop = last["cases"]["noop"]
            line += (
                "; Chroma's own reads of the points a no-op reads (the same filtered "
                "requests, timed alone after it: `chroma_reads_s`) grow with exponent "
                + "; ".join(pairs)
                + f" ({noop['chroma_reads_s']:.1f} s against the no-op's "
                f"{noop['sync_s']:.1f} s at {last['n']:,} documents)"
            )
        if store in ANCHOR_STORES:
            ns = [r["n"] for r in done]
            both = [n for n in ns if _case(result, "langchain", store, n, "noop")]
            if both:
                n = TARGET_N if TARGET_N in both else max(both)
                parts = []
                for case, name in (("noop", "no-op"), ("edit_all", "one edit")):
                    ours, theirs = (_case(result, t, store, n, case)["sync_s"] for t in ("rechunk", "langchain"))
                    parts.append(f"{name} {theirs / ours:.1f}x faster than LangChain")
                ours_i, theirs_i = (_case(result, t, store, n, "initial") for t in ("rechunk", "langchain"))
                if ours_i and theirs_i:
                    ratio = (ours_i["points"] / ours_i["sync_s"]) / (theirs_i["points"] / theirs_i["sync_s"])
                    parts.append(f"initial throughput {ratio:.2f}x LangChain's (points/s)")
                line += f"; at {n:,} documents: " + ", ".join(parts) + " (targets: 3x, 3x, >= 1x)"
        out.append(line + ".")
    def initial_exponents(key: str) -> dict[tuple[int, int], float]:
        """Exponent of the initial sync per pair of consecutive sizes that both ran."""
        rows = result["series"].get(key, [])
        pairs = zip(pairwise(rows), exponents(rows)["initial"])
        return {(a["n"], b["n"]): v for (a, b), v in pairs if v is not None}

    floors = {  # what each floor tool times, and whether rechunk's own is set beside it
        "chroma-only": ("Chroma's own adds of the same records (chroma-only: no chunking, "
                        "reads or checks)", True),
        "chroma-vectors": ("Chroma's adds of their ids and vectors alone (chroma-vectors: "
                           "its vector index and log)", False),
        "qdrant-only": ("Embedded Qdrant's own upserts of the same points (qdrant-only: "
                        "rechunk's local_client, no chunking, reads or checks)", True),
    }  # fmt: skip
    for tool, (what, beside) in floors.items():
        store = FLOOR_STORES[tool]
        ours = initial_exponents(f"rechunk|{store}") if beside else {}
        parts = [
            f"{v:.2f} from {a:,} to {b:,}"
            + (f" (rechunk's initial sync: {ours[a, b]:.2f})" if (a, b) in ours else "")
            for (a, b), v in initial_exponents(f"{tool}|{store}").items()
        ]
        if parts:
            out.append(f"- {what} grow with exponent " + "; ".join(parts) + ".")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=None, help=f"default 1000,5000,20000,50000 ({EDGE_SIZES} with --edge)"
    )
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--anchor-stores", default=",".join(ANCHOR_STORES))
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time the stores' own writes of the initial sync's points (tools "
        "chroma-only, chroma-vectors, qdrant-only)",
    )
    parser.add_argument("--limit", type=float, default=600.0, help="seconds; stop a series past it")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of every case (each edit its own edit), in rounds over the sizes; the "
        "median is kept",
    )
    parser.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="NAME=N",
        help="largest N for a series; NAME is a tool, a store or tool:store (repeatable)",
    )
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help="the cases to time (the initial sync runs once anyway, untimed, as the others "
        "start from it); with --merge the other cases keep their figures",
    )
    parser.add_argument("--render", action="store_true", help="rewrite the docs from the json")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="replace only the rows run (series and sizes) in the existing json",
    )
    parser.add_argument("--note", help="a sentence on how this run was made, kept in the json")
    parser.add_argument("--quick", action="store_true", help="print only, do not write docs")
    parser.add_argument(
        "--edge",
        action="store_true",
        help="the Qdrant Edge series and, in the same run, embedded Qdrant's initial sync at "
        f"--edge-baseline documents, into {EDGE_RESULTS.name} (--stores and --anchor-stores "
        "do not apply)",
    )
    parser.add_argument(
        "--edge-baseline",
        type=int,
        default=50000,
        metavar="N",
        help="documents of embedded Qdrant's initial sync beside the Edge series (0: none)",
    )
    parser.add_argument(
        "--edge-floor",
        action="store_true",
        help=f"with --edge, also time Qdrant Edge's own writes of the initial sync's points "
        f"({EDGE_FLOOR}: no chunking, reads or checks) at every size",
    )
    parser.add_argument(
        "--results",
        type=Path,
        metavar="PATH",
        help="the json to write (and --merge or --render to read) in place of the default "
        "one: a second run made beside another, merged afterwards",
    )
    parser.add_argument(
        "--keep-stores",
        type=Path,
        metavar="DIR",
        help="keep rechunk's embedded stores in DIR/<tool>-<store>-<N> after the run, and "
        "start from one a run before left there (restored to the corpus, untimed) rather "
        "than from an initial sync: 200,000 documents' Edge store takes 15 minutes to write",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    path = args.results or (EDGE_RESULTS if args.edge else RESULTS)
    if args.render:
        result = json.loads(path.read_text(encoding="utf-8"))
        if args.note:
            result["note"] = args.note
            path.write_text(json.dumps(result, indent=1), encoding="utf-8")
        markdown = _section(result if not args.edge else None, result if args.edge else None)
        _report.write_section("scale", markdown)
        print(markdown)
        return 0
    sizes_text = args.sizes or (EDGE_SIZES if args.edge else "1000,5000,20000,50000")
    sizes = [int(s) for s in sizes_text.split(",") if s]
    cases = [c for c in args.cases.split(",") if c]
    if not set(cases) <= set(CASES):
        parser.error(f"--cases: each one of {', '.join(CASES)}")
    caps = dict(c.split("=", 1) for c in args.cap)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    result: dict[str, Any] = {
        "machine": _report.machine(),
        "sizes": sizes,
        "rows": [],
        "series": {},
    }
    if args.merge and path.exists():
        result = json.loads(path.read_text(encoding="utf-8"))
        t0 -= result.get("seconds", 0.0)
    if args.note:
        result["note"] = args.note
    plan: list[tuple[str, str, list[int], list[str]]] = []
    if args.edge:  # the baseline first: its figure is set beside the Edge series' of this run
        if args.edge_baseline:
            plan.append(("rechunk", "qdrant", [args.edge_baseline], ["initial"]))
        plan.append(("rechunk", "qdrant-edge", sizes, cases))
        if args.edge_floor:
            plan.append((EDGE_FLOOR, "qdrant-edge", sizes, ["initial"]))
    else:
        named = [("rechunk", s) for s in args.stores.split(",") if s] + [
            ("langchain", s) for s in args.anchor_stores.split(",") if s
        ] + (list(FLOOR_STORES.items()) if args.floor else [])
        plan = [(tool, store, sizes, cases) for tool, store in named]
    with tempfile.TemporaryDirectory(prefix="rechunk-scale-") as tmp:
        work = Path(tmp)
        for tool, store, planned, asked in plan:
            cap = min(
                (int(caps[k]) for k in (tool, store, f"{tool}:{store}") if k in caps),
                default=max(planned),
            )
            ns = [n for n in planned if n <= cap]
            rows = series(tool, store, ns, args.limit, work, args.repeat, asked, args.keep_stores)
            key = f"{tool}|{store}"
            if args.merge:  # replace the sizes and cases run, keep the series' others
                old = {r["n"]: r for r in result["series"].get(key, [])}
                for r in rows:
                    if r["n"] in old and not r.get("stopped"):
                        r["cases"] = {**old[r["n"]]["cases"], **r["cases"]}
                ran = {r["n"] for r in rows}
                kept = [r for n, r in old.items() if n not in ran]
                rows = sorted(kept + rows, key=lambda r: r["n"])
            result["series"][key] = rows
            result["rows"] = [r for rows in result["series"].values() for r in rows]
            if not args.quick:  # keep what is done, in case the run is cut short
                result["seconds"] = time.perf_counter() - t0
                result["load"] = [load0, os.getloadavg()[0]]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    result["seconds"] = time.perf_counter() - t0
    result["load"] = [load0, os.getloadavg()[0]]
    markdown = _section(result if not args.edge else None, result if args.edge else None)
    print(markdown)
    if not args.quick:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1), encoding="utf-8")
        if args.results is None:  # a side run's json is merged into the default one first
            _report.write_section("scale", markdown)
        print(f"wrote {path}" + ("" if args.results else f" and the scale section of {_report.DOCS}"), file=sys.stderr)
    return 0


def _section(main: dict[str, Any] | None, edge: dict[str, Any] | None) -> str:
    """The docs section: the run of the stores and anchors, then the Qdrant Edge run; each
    read from its json when not given."""
    if main is None and RESULTS.exists():
        main = json.loads(RESULTS.read_text(encoding="utf-8"))
    if edge is None and EDGE_RESULTS.exists():
        edge = json.loads(EDGE_RESULTS.read_text(encoding="utf-8"))
    parts = [to_markdown(main)] if main is not None else []
    if edge is not None:
        parts.append(edge_markdown(edge))
    return "\n\n".join(parts)


def _beyond_docs(case: dict[str, Any]) -> float | None:
    """A case's peak RSS less the process's RSS once its documents were built (MB)."""
    if "peak_mb" not in case or "docs_mb" not in case:
        return None
    return float(case["peak_mb"] - case["docs_mb"])


def edge_markdown(result: dict[str, Any]) -> str:
    """The Qdrant Edge run: its series to ~2 M points, the growth exponents, and the
    issue's targets read off them (the baseline's initial sync of this run beside)."""
    rows = result["series"].get("rechunk|qdrant-edge", [])
    lines = [
        "### Qdrant Edge to about 2 M points (`python benchmarks/scale.py --edge`)",
        "",
        f"Machine: {result['machine']}, shared with other work while it ran (other "
        "engineers' tests on its 2 cores; benchmarks take turns), so figures vary with "
        "their load, given beside each run in the note below. "
        f"Whole run {result.get('seconds', 0):.0f} s; 1-minute load average before/after: "
        f"{result['load'][0]:.2f}/{result['load'][1]:.2f}; raw numbers in "
        "`benchmarks/results/scale_edge.json`.",
        *(["", result["note"]] if result.get("note") else []),
        "",
        "`rechunk` on `qdrant-edge:DIR`, the same corpus, cases and method as above (each "
        "cell the median of the runs, each run a fresh process). **open**: opening the store "
        "and its first request, in the no-op case, in seconds of the clock (and, in brackets, "
        "of CPU, every thread's: on a loaded machine a process waits for a core); **peak**: the largest RSS of the row's "
        "processes; **beyond docs**: the no-op's peak less the RSS of its process once the "
        "documents were built (the interpreter, the imports and the documents), what the "
        "sync and the store added; **anon / file after**: the no-op's resident memory at "
        "its end, what the process allocated and the pages of the store's files it read in "
        "place (the kernel may drop those at any time); **disk**: the space the store folder's "
        "files take on disk after the no-op; **search**: one `search(vector, k=5)` after the no-op, median of "
        "5 (an exact scan: rechunk builds no HNSW graph in Edge).",
        "",
        "| N | points | initial | points/s | no-op | one edit, all passed | one doc only "
        "| prune 1% | open | peak MB | beyond docs MB | anon / file after, MB | disk MB "
        "| search ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        c = row["cases"]

        def cell(case: str, c: dict[str, Any] = c) -> str:
            r = c.get(case)
            if r is None:
                return "not run"
            if "error" in r:
                over = _killed_past(r)
                return f"> {over}" if over else "failed"
            return _s(r["sync_s"])

        initial = c.get("initial", {})
        noop = c.get("noop", {})
        points = f"{initial['points']:,}" if "points" in initial else ""
        rate = f"{initial['points'] / initial['sync_s']:,.0f}" if "sync_s" in initial else ""
        peak = max((r.get("peak_mb", 0) + r.get("helper_mb", 0) for r in c.values()), default=0)
        beyond = _beyond_docs(noop)
        after = (
            f"{noop['rss_anon_mb']:,.0f} / {noop['rss_file_mb']:,.0f}"
            if "rss_anon_mb" in noop
            else ""
        )
        lines.append(
            f"| {row['n']:,} | {points} | {cell('initial')} | {rate} | "
            + " | ".join(cell(k) for k in CASES[1:])
            + f" | {_s(noop.get('open_s'))}"
            + (f" ({noop['open_cpu_s']:.2f})" if "open_cpu_s" in noop else "")
            + f" | {peak:,.0f} | "
            + ("" if beyond is None else f"{beyond:,.0f}")
            + f" | {after} | "
            + (f"{noop['disk_mb']:,.0f}" if "disk_mb" in noop else "")
            + " | "
            + (f"{noop['search_ms']:,.0f}" if "search_ms" in noop else "")
            + " |"
        )
    lines += [
        "",
        "Growth exponents b (sync time ~ N^b) between consecutive sizes, and fitted over "
        "every size (least squares on log-log):",
        "",
        "| sizes | " + " | ".join(CASES) + " | open |",
        "|---|" + "---:|" * (len(CASES) + 1),
    ]
    exp, opens = exponents(rows), exponents(rows, "open_s")["noop"]
    for i, (a, b) in enumerate(zip(rows, rows[1:])):
        vals = [exp[case][i] for case in CASES] + [opens[i]]
        lines.append(
            f"| {a['n']:,} -> {b['n']:,} | "
            + " | ".join("" if v is None else f"{v:.2f}" for v in vals)
            + " |"
        )
    fit = fitted(rows)
    if any(v is not None for v in fit.values()):
        lines.append(
            f"| {rows[0]['n']:,} -> {rows[-1]['n']:,} (fit) | "
            + " | ".join("" if fit[c] is None else f"**{fit[c]:.2f}**" for c in CASES)
            + " | |"
        )
    lines += ["", *edge_verdict(result)]
    stops = [f"at N={r['n']:,}: " + _stop_reason(r) for r in rows if r.get("stopped")]
    if stops:
        lines += ["", "Series stopped " + "; ".join(stops) + "."]
    return "\n".join(lines)


def edge_verdict(result: dict[str, Any]) -> list[str]:
    """The issue's targets for ``qdrant-edge:``, read off the Edge run."""
    rows = result["series"].get("rechunk|qdrant-edge", [])
    done = [r for r in rows if all("sync_s" in r["cases"].get(k, {}) for k in CASES)]
    out = ["Against the targets (Qdrant Edge):", ""]
    if len(done) >= 2:
        first, last = done[0], done[-1]
        exp = exponents(done)
        worst = max(
            ((v, case) for case, vals in exp.items() for v in vals if v is not None),
            default=None,
        )
        fit = [(v, case) for case, v in fitted(done).items() if v is not None]
        if worst is not None:
            out.append(
                f"- every case's growth exponent <= 1.1 from {first['n']:,} to {last['n']:,} "
                f"documents: the largest between consecutive sizes is {worst[0]:.2f} "
                f"({worst[1]})"
                + (f", fitted over all sizes {max(fit)[0]:.2f} ({max(fit)[1]})" if fit else "")
                + "."
            )
        flat = last["cases"]["edit_one"]["sync_s"] / first["cases"]["edit_one"]["sync_s"]
        out.append(
            f"- one document only within 2x from {first['n']:,} to {last['n']:,} documents: "
            f"{first['cases']['edit_one']['sync_s']:.3f} -> "
            f"{last['cases']['edit_one']['sync_s']:.3f} s, {flat:.1f}x."
        )
    if rows:
        last = rows[-1]
        points = last["cases"].get("initial", {}).get("points")
        opens = [r["open_s"] for r in last["cases"].values() if "open_s" in r]
        if opens:
            noop = last["cases"].get("noop", {})
            noop_open, noop_cpu = noop.get("open_s"), noop.get("open_cpu_s")
            out.append(
                f"- store open <= 1 s at about 2 M points: at {last['n']:,} documents"
                + (f" ({points:,} points)" if points else "")
                + (f" the no-op's open took {noop_open:.2f} s" if noop_open is not None else "")
                + (f" ({noop_cpu:.2f} s of CPU)" if noop_cpu is not None else "")
                + f" (every case's: {min(opens):.2f}-{max(opens):.2f} s)."
            )
        beyond = _beyond_docs(last["cases"].get("noop", {}))
        if beyond is not None:
            noop = last["cases"]["noop"]
            out.append(
                f"- a no-op's peak RSS beyond the documents <= 1 GB at 200,000 documents: at "
                f"{last['n']:,} documents {beyond:,.0f} MB (peak {noop['peak_mb']:,.0f} MB, "
                f"{noop['docs_mb']:,.0f} MB once its documents were built; at its end "
                f"{noop['rss_anon_mb']:,.0f} MB allocated and {noop['rss_file_mb']:,.0f} MB "
                "of the store's files read in place)."
            )
    base = result["series"].get("rechunk|qdrant", [])
    for b in base:
        ours = next((r for r in rows if r["n"] == b["n"]), None)
        theirs_i = b["cases"].get("initial", {})
        ours_i = ours["cases"].get("initial", {}) if ours else {}
        if "sync_s" in theirs_i and "sync_s" in ours_i:
            edge_rate = ours_i["points"] / ours_i["sync_s"]
            local_rate = theirs_i["points"] / theirs_i["sync_s"]
            out.append(
                f"- initial sync >= 5x local mode's points/s at {b['n']:,} documents, in "
                "one run (the note above says which runs these two come from): Qdrant "
                f"Edge {edge_rate:,.0f} points/s, embedded Qdrant "
                f"(local mode) {local_rate:,.0f} points/s: {edge_rate / local_rate:.1f}x."
            )
    floor = [
        r for r in result["series"].get(f"{EDGE_FLOOR}|qdrant-edge", [])
        if "sync_s" in r["cases"].get("initial", {})
    ]
    if floor:
        parts = []
        for r in floor:
            f = r["cases"]["initial"]
            ours = next((x for x in rows if x["n"] == r["n"]), None)
            ours_i = ours["cases"].get("initial", {}) if ours else {}
            parts.append(
                f"at {r['n']:,} documents {f['points'] / f['sync_s']:,.0f} points/s "
                f"(building the points {f.get('build_s', 0) / f['sync_s']:.0%} of it)"
                + (
                    f", rechunk's initial sync {ours_i['points'] / ours_i['sync_s']:,.0f}"
                    if "sync_s" in ours_i
                    else ""
                )
            )
        out.append(
            "- what no sync through Qdrant Edge's Python bindings goes below: Edge's own "
            f"writes of the same points ({EDGE_FLOOR}: the store's points built batch by "
            "batch and upserted, the optimizer run as the store runs it; no chunking, "
            "embedding, reads or checks) " + "; ".join(parts) + "."
        )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
