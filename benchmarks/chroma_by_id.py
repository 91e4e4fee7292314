"""Chroma by-id benchmark: what one record per document, read by id, would cost a no-op.

On Chroma a no-op sync reads every given document's points with filtered reads
(``where doc_id $in [...]``), which grow faster than the corpus (exponent 1.13 from
5,000 to 20,000 documents in ``scale.py``'s read floor). The next step named in the
README is a record per document (its revision, policy, model, and its points' ids,
input keys and tokens) that a no-op reads by id instead of the points. This script
measures that read alone, on embedded Chroma, as the corpus grows: for N documents
it fills one database with

* a collection of the documents' points (``--points`` records a document, each with
  metadata shaped like rechunk's and a one-dimensional vector, so that the database
  holds as many records as a real one without the cost of building its vector
  index), and
* a collection of N summary records (about 1.3 KB of JSON each, in ``documents``),

then times reading every summary record by id, 256 ids a request (what a no-op
of N documents would read), the median of ``--repeat`` passes. Sizes grow in one
database (each size adds to the last), so the larger sizes are timed after the
smaller ones.

    python benchmarks/chroma_by_id.py                      # 1k, 5k, 20k; writes json
    python benchmarks/chroma_by_id.py --sizes 500,2000 --quick
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report

RESULTS = Path(__file__).resolve().parent / "results" / "chroma_by_id.json"
BATCH = 256  # ids a request: rechunk.sync.DOC_BATCH
ADD = 2048  # records an add


def _doc(i: int) -> str:
    return f"doc-{i:06d}.md"


def _summary_id(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "summary/" + _doc(i)))


def _summary(i: int, points: int) -> str:
    """A document's summary record: what a no-op needs to plan it unchanged."""
    digest = hashlib.sha256(_doc(i).encode()).hexdigest()
    return json.dumps(
        {
            "revision": digest,
            "policy": "structured-" + digest[:32],
            "model_id": "sentence-transformers/all-MiniLM-L6-v2",
            "points": [
                [str(uuid.uuid5(uuid.NAMESPACE_URL, f"{_doc(i)}#{j}")),
                 hashlib.sha256(f"{digest}{j}".encode()).hexdigest(), 150]
                for j in range(points)
            ],
        }
    )  # fmt: skip


def _point_metadata(i: int, j: int) -> dict[str, Any]:
    return {
        "doc_id": _doc(i),
        "revision": hashlib.sha256(_doc(i).encode()).hexdigest(),
        "policy": "structured",
        "input_key": hashlib.sha256(f"{i}/{j}".encode()).hexdigest(),
        "model_id": "sentence-transformers/all-MiniLM-L6-v2",
        "ordinal": j,
        "start": j * 450,
        "end": (j + 1) * 450,
        "tokens": 150,
    }


def _fill(client: Any, have: int, n: int, points: int) -> None:
    chunks = client.get_or_create_collection("points", embedding_function=None)
    summaries = client.get_or_create_collection("summaries", embedding_function=None)
    rows = [(i, j) for i in range(have, n) for j in range(points)]
    for start in range(0, len(rows), ADD):
        part = rows[start : start + ADD]
        chunks.add(
            ids=[f"{_doc(i)}#{j}" for i, j in part],
            embeddings=[[float(j)] for _, j in part],
            documents=[f"Text of point {j} of {_doc(i)}." for i, j in part],
            metadatas=[_point_metadata(i, j) for i, j in part],
        )
    for start in range(have, n, ADD):
        ids = range(start, min(n, start + ADD))
        summaries.add(
            ids=[_summary_id(i) for i in ids],
            embeddings=[[0.0] for _ in ids],
            documents=[_summary(i, points) for i in ids],
        )


def _read_all(client: Any, n: int) -> tuple[float, int]:
    """Seconds to read every summary record by id, and the points they name."""
    summaries = client.get_collection("summaries", embedding_function=None)
    named = 0
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        ids = [_summary_id(i) for i in range(start, min(n, start + BATCH))]
        page = summaries.get(ids=ids, include=["documents"])
        named += sum(len(json.loads(text)["points"]) for text in page["documents"])
    return time.perf_counter() - t0, named


def run(sizes: Sequence[int], points: int, repeat: int) -> dict[str, Any]:
    import chromadb

    rows = []
    with tempfile.TemporaryDirectory(prefix="rechunk-by-id-") as tmp:
        client = chromadb.PersistentClient(
            path=tmp, settings=chromadb.Settings(anonymized_telemetry=False)
        )
        have = 0
        for n in sorted(sizes):
            t0 = time.perf_counter()
            _fill(client, have, n, points)
            fill_s = time.perf_counter() - t0
            have = n
            runs = []
            for _ in range(repeat):
                seconds, named = _read_all(client, n)
                assert named == n * points, "every summary must be read"
                runs.append(seconds)
            median = sorted(runs)[len(runs) // 2]
            rows.append({"n": n, "records": n * (points + 1), "read_s": median,
                         "runs_s": runs, "us_per_doc": median / n * 1e6, "fill_s": fill_s})  # fmt: skip
            print(f"n={n:6} records={n * (points + 1):8} read {median:.3f} s "
                  f"({median / n * 1e6:.0f} us a document) runs {runs}", flush=True)  # fmt: skip
    return {"machine": _report.machine(), "points": points, "repeat": repeat, "rows": rows}


def exponents(rows: list[dict[str, Any]]) -> list[float]:
    return [
        math.log(b["read_s"] / a["read_s"]) / math.log(b["n"] / a["n"]) for a, b in pairwise(rows)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--points", type=int, default=10, help="point records a document")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="print only, write nothing")
    args = parser.parse_args(argv)
    result = run([int(s) for s in args.sizes.split(",") if s], args.points, args.repeat)
    result["exponents"] = exponents(result["rows"])
    print("exponents between sizes:", [round(b, 2) for b in result["exponents"]])
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=1), encoding="utf-8")
        print(f"wrote {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
