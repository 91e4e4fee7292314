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
edit, and the one-shot sync's median.

``--case soak``: a watcher on a folder of ``--soak-docs`` documents gets random edits
(written in place, truncated then written in pieces, or written to a temp file renamed
over the file), creates, moves (some into a sub-folder) and deletes for
``--duration`` seconds (default 3600), with now and then a burst of operations at
once; the watcher's resident memory is sampled every few seconds (first against last
quarter, and the least-squares slope). It stops by itself; the watcher is then stopped
(SIGTERM) and the store is read back: every document the folder holds must be stored
at its current revision only and be returned by a search with one of its vectors (no
earlier revision returned), and no deleted or moved-away document may be left.

Each case merges its figures into ``benchmarks/results/watch.json`` (the other cases'
figures stay); ``--write-docs`` writes the section of ``docs/benchmarks.md`` from it.

    python benchmarks/watch.py                  # 1,000 documents, 50 edits
    python benchmarks/watch.py --docs 100 --edits 10
    nice python benchmarks/watch.py --case soak # one hour
    python benchmarks/watch.py --case soak --duration 60 --soak-docs 30
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
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


class WatchProcess:
    """``rechunk watch`` in its own process; its JSON lines in a queue."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rechunk.cli", "watch", *args, "--json"],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._errors, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def _errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            del self.stderr[:-50]

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next line, or None after ``timeout`` seconds without one."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            if self.process.poll() is not None:
                raise SystemExit("watch died: " + "".join(self.stderr)) from None
            return None

    def wait(self, kind: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = self.next(1.0)
            if data is None:
                continue
            if data.get("kind") == kind and (kind != "batch" or data.get("retrievable")):
                return data
        raise SystemExit(f"no {kind} report within {timeout} s")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise SystemExit("no VmRSS")

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


def make_folder(work: Path, count: int) -> Path:
    folder = work / "docs"
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"doc{i:04d}.md").write_text(document(i), encoding="utf-8")
    return folder


def check_store(work: Path, folder: Path) -> dict[str, int]:
    """Read the store back (the watcher stopped): every document under ``folder`` stored
    at its current revision only and returned by a search with one of its vectors, with
    no other revision of it in the answer; nothing stored that the folder lacks."""
    import numpy as np

    from rechunk.adapters.uri import open_store
    from rechunk.files import read_documents
    from rechunk.integrations.uri import open_embedder

    model_id = open_embedder(None).model_id
    current = {d.doc_id: d.revision for d in read_documents([folder]).documents}
    opened = open_store(f"qdrant:{work / '.rechunk' / 'qdrant'}", "rechunk", create=False)
    try:
        store = opened.store
        stored_ids = store.doc_ids()
        points = store.get_points_many(sorted(stored_ids | set(current)))
        keys = {}
        out = {"documents": len(current), "missing": 0, "stale_stored": 0, "left_over": 0,
               "not_retrievable": 0, "stale_returned": 0}
        for doc_id, revision in current.items():
            pts = points.get(doc_id, [])
            if not pts:
                out["missing"] += 1
                continue
            if any(p.payload.revision != revision for p in pts):
                out["stale_stored"] += 1
            own = [p for p in pts if p.payload.revision == revision]
            if own:
                keys[doc_id] = own[len(own) // 2].payload.input_key
        out["left_over"] = len(stored_ids - set(current))
        vectors = store.get_vectors(sorted(set(keys.values())), model_id)
        for doc_id, key in keys.items():
            vector = vectors.get(key)
            if vector is None:
                out["not_retrievable"] += 1
                continue
            hits = store.search(np.asarray(vector, dtype=np.float32), 20)
            mine = {p.payload.revision for p, _ in hits if p.payload.doc_id == doc_id}
            if current[doc_id] not in mine:
                out["not_retrievable"] += 1
            if mine - {current[doc_id]}:
                out["stale_returned"] += 1
        return out
    finally:
        close = getattr(opened.client, "close", None)
        if callable(close):
            close()


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    n = len(samples)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in samples) / n
    my = sum(v for _, v in samples) / n
    den = sum((t - mx) ** 2 for t, _ in samples)
    return 3600 * sum((t - mx) * (v - my) for t, v in samples) / den if den else 0.0


def soak(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="rechunk-watch-soak-"))
    folder = make_folder(work, args.soak_docs)
    watch = WatchProcess(work, "docs")
    t0 = time.perf_counter()
    watch.wait("initial", timeout=3600)
    print(f"soak: initial sync of {args.soak_docs} documents {time.perf_counter() - t0:.1f} s",
          flush=True)
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))
    next_id, version = args.soak_docs, 1000
    ops = {"edit": 0, "create": 0, "move": 0, "delete": 0, "burst": 0}
    seen = {"batches": 0, "failed_batches": 0, "errors": 0, "stale": 0, "retrievable": 0,
            "published": 0, "deleted": 0, "failed": 0}
    lags: list[float] = []
    last: dict[str, Any] = {}
    rss: list[tuple[float, float]] = []
    start = time.monotonic()
    cpu0 = watch.cpu_seconds()
    next_sample = start

    def take(data: dict[str, Any] | None) -> None:
        nonlocal last
        if data is None:
            return
        last = data
        seen["batches"] += 1
        seen["failed_batches"] += data.get("retry_in") is not None
        seen["errors"] += len(data.get("errors", []))
        for k in ("stale", "retrievable", "published", "deleted", "failed"):
            seen[k] += data.get(k, 0)
        lags.extend(data.get("lag", []))

    def one_op() -> None:
        nonlocal next_id, version
        kind = rng.choices(["edit", "create", "move", "delete"], [6, 1.5, 1, 1.5])[0]
        if len(names) < args.soak_docs * 0.8:
            kind = "create"
        elif len(names) > args.soak_docs * 1.2 and kind == "create":
            kind = "delete"
        ops[kind] += 1
        version += 1
        if kind == "create":
            name = f"new{next_id:05d}.md"
            (folder / name).write_text(document(next_id, version), encoding="utf-8")
            names.append(name)
            next_id += 1
            return
        name = rng.choice(names)
        path = folder / name
        if kind == "delete":
            path.unlink()
            names.remove(name)
        elif kind == "move":
            sub = rng.random() < 0.3
            new = f"moved/m{next_id:05d}.md" if sub else f"m{next_id:05d}.md"
            next_id += 1
            (folder / new).parent.mkdir(exist_ok=True)
            os.replace(path, folder / new)
            names.remove(name)
            names.append(new)
        else:
            seed = int("".join(c for c in name if c.isdigit()) or 0)
            text = document(seed, version)
            style = rng.random()
            if style < 0.5:
                path.write_text(text, encoding="utf-8")
            elif style < 0.75:  # truncate, then write in pieces
                with path.open("w", encoding="utf-8") as out:
                    for i in range(0, len(text), 200):
                        out.write(text[i : i + 200])
                        out.flush()
                        time.sleep(0.01)
            else:  # an editor's save: a temp file renamed over the file
                tmp = path.with_name(path.name + ".swp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, path)

    while time.monotonic() - start < args.duration:
        now = time.monotonic()
        if now >= next_sample:
            rss.append((now - start, watch.rss_mb()))
            next_sample = now + args.sample_every
        if rng.random() < 0.02:
            ops["burst"] += 1
            for _ in range(rng.randint(10, 40)):
                one_op()
        else:
            one_op()
        pause = rng.uniform(0.2, 2 * args.mean_pause - 0.2)
        until = time.monotonic() + pause
        while (left := until - time.monotonic()) > 0:
            take(watch.next(left))
        take_all = True
        while take_all:
            try:
                take(watch.lines.get_nowait())
            except queue.Empty:
                take_all = False
    soak_seconds = time.monotonic() - start
    cpu_seconds = watch.cpu_seconds() - cpu0
    rss.append((soak_seconds, watch.rss_mb()))
    # quiet: wait for the last batches, until nothing is pending and all is still
    quiet_deadline = time.monotonic() + 600
    while time.monotonic() < quiet_deadline:
        data = watch.next(5.0)
        if data is None and last.get("pending", 1) == 0:
            break
        take(data)
    code = watch.stop()
    check = check_store(work, folder)
    status = rechunk("status", "--json", cwd=work)
    freshness = json.loads(status.stdout).get("freshness") if status.returncode == 0 else None
    q = max(1, len(rss) // 4)
    first_q = statistics.mean(v for _, v in rss[:q])
    last_q = statistics.mean(v for _, v in rss[-q:])
    warm = [s for s in rss if s[0] >= soak_seconds * 0.1]
    result = {
        "duration_seconds": round(soak_seconds, 1),
        "documents_at_start": args.soak_docs,
        "documents_at_end": len(names),
        "operations": ops,
        "batches": seen,
        "accept_to_retrievable_seconds": {
            "count": len(lags),
            "p50": round(statistics.median(lags), 3) if lags else None,
            "p95": round(percentile(lags, 0.95), 3) if lags else None,
            "max": round(max(lags), 3) if lags else None,
        },
        "rss_mb": {
            "samples": len(rss),
            "first": round(rss[0][1], 1),
            "first_quarter_mean": round(first_q, 1),
            "last_quarter_mean": round(last_q, 1),
            "last": round(rss[-1][1], 1),
            "max": round(max(v for _, v in rss), 1),
            "slope_mb_per_hour_after_first_10pct": round(slope_per_hour(warm), 2),
        },
        "watcher_cpu_seconds": round(cpu_seconds, 1),
        "watcher_cpu_share_of_a_core": round(cpu_seconds / soak_seconds, 4),
        "final_check": check,
        "status_freshness": freshness,
        "watch_exit_code": code,
        "every_revision_retrievable": check["missing"] == 0 and check["not_retrievable"] == 0,
        "no_stale_revision": check["stale_stored"] == 0 and check["stale_returned"] == 0
        and check["left_over"] == 0,
    }
    return result


def latency(args: argparse.Namespace) -> dict[str, Any]:
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
    return result


def merge(key: str, result: dict[str, Any], path: Path = RESULTS) -> dict[str, Any]:
    """Put one case's figures into the results file, keeping the other cases'."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if "save_to_retrievable_seconds" in data and "latency" not in data:  # the old layout
        data = {"latency": data}
    data[key] = result
    data.setdefault("machine", {})
    data["machine"] = {
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "note": "a shared machine, loaded by other jobs while these ran",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


CASES = {"latency": latency, "soak": soak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=[*CASES, "none"], default="latency")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--oneshot", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3600.0, help="soak seconds")
    parser.add_argument("--soak-docs", type=int, default=300)
    parser.add_argument("--mean-pause", type=float, default=2.0, help="soak: seconds between operations")
    parser.add_argument("--sample-every", type=float, default=10.0, help="soak: RSS sampling period")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    if args.case != "none":
        result = CASES[args.case](args)
        result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(result, indent=2), flush=True)
        merge(args.case, result, args.results)
    if args.write_docs:
        write_docs()


def write_docs() -> None:
    sys.path.insert(0, str(ROOT))
    from _report import machine, write_section

    data = json.loads(RESULTS.read_text(encoding="utf-8"))
    result = data["latency"]
    s, o = result["save_to_retrievable_seconds"], result["oneshot_sync_seconds"]
    write_section(
        "watch",
        "## rechunk watch: save to retrievable\n\n"
        f"{result['documents']} Markdown documents in embedded Qdrant, ONNX all-MiniLM-L6-v2, "
        f"{result['edits']} one-paragraph edits made one after another ({machine()}).\n\n"
        "| | p50 | p95 | max |\n|---|---|---|---|\n"
        f"| `rechunk watch` (save to verified retrievable) | {s['p50']:.2f} s | "
        f"{s['p95']:.2f} s | {s['max']:.2f} s |\n"
        f"| one-shot `rechunk sync` (save to exit) | {o['median']:.2f} s (median) | | "
        f"{o['max']:.2f} s |\n\n"
        "Reproduce: `python benchmarks/watch.py --write-docs`.\n",
    )


if __name__ == "__main__":
    main()
