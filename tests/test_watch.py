"""rechunk watch and rechunk.live: a real watcher (watchfiles, inotify) on real files, real
stores (embedded Qdrant, a Chroma server stopped and restarted), the real default model
(ONNX all-MiniLM-L6-v2), the metrics endpoint read over HTTP by prometheus_client's parser."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("watchfiles")
pytest.importorskip("prometheus_client")
pytest.importorskip("qdrant_client")

from rechunk import ConfigError, MemoryCache, policy_for
from rechunk.live import (
    BatchReport,
    DiagnosisLog,
    Freshness,
    LiveMetrics,
    Watcher,
    read_freshness,
    serve_metrics,
)
from rechunk.sources.files import read_documents

pytestmark = pytest.mark.timeout(90)

SETTLE = 0.08


def paragraph(topic: str, n: int = 1) -> str:
    words = ("index", "revision", "answer", "vector", "folder", "editor", "store", "query")
    return " ".join(f"{topic}{i % 7} {words[(i * 3 + n) % len(words)]}" for i in range(40)) + "."


def doc_text(name: str, version: int = 0) -> str:
    return (
        f"# {name}\n\n{paragraph(name + 'a')}\n\n{paragraph(name + 'b')}\n\n"
        f"Version {version} of {name}: {paragraph(name + 'c', version)}\n"
    )


@pytest.fixture(scope="session")
def embedder() -> Any:
    from rechunk.integrations.uri import open_embedder

    return open_embedder(None)  # the default: ONNX all-MiniLM-L6-v2, packaged


@pytest.fixture(scope="session")
def chunker(embedder: Any) -> Any:
    return policy_for(embedder, "structured")


def qdrant_store(embedder: Any, chunker: Any, name: str = "live") -> Any:
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.sync.generations import open_live

    return open_live(QdrantStore(QdrantClient(":memory:"), name), chunker, embedder.dimension)


class Running:
    """A watcher's :meth:`Watcher.run` in a thread; its reports in a queue."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.stop = threading.Event()
        self.reports: queue.Queue[BatchReport] = queue.Queue()
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.watcher.run(self.stop, self.reports.put)
        except BaseException as exc:  # pragma: no cover - shown by next()
            self.error.append(exc)

    def next(self, timeout: float = 15.0, skip_verify: bool = True) -> BatchReport:
        deadline = time.monotonic() + timeout
        while True:
            assert not self.error, self.error
            left = deadline - time.monotonic()
            assert left > 0, "no batch report in time"
            try:
                report = self.reports.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if skip_verify and report.kind == "verify":
                continue
            return report

    def until(self, check: Callable[[], bool], timeout: float = 20.0) -> list[BatchReport]:
        """Reports until ``check()`` holds after one of them."""
        seen: list[BatchReport] = []
        deadline = time.monotonic() + timeout
        while not check():
            seen.append(self.next(max(0.1, deadline - time.monotonic()), skip_verify=False))
        return seen

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=20)
        assert not self.thread.is_alive()


class CliWatcher:
    """`rechunk watch ARGS --json` run in ``cwd`` by a subprocess: its JSON lines as they
    come. Leaving the block kills it if :meth:`stop` did not end it."""

    def __init__(self, cwd: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rechunk.cli", "watch", *args, "--json"],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        out = self.process.stdout
        threading.Thread(target=lambda: [self.lines.put(x) for x in out], daemon=True).start()  # type: ignore[union-attr]

    def next_json(self, kind: str, timeout: float = 40.0) -> dict[str, Any]:
        """The next line of ``kind`` (``initial``, ``batch``, ``metrics``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data: dict[str, Any] = json.loads(self.lines.get(timeout=0.5))
            except queue.Empty:
                assert self.process.poll() is None, self.process.stderr.read()  # type: ignore[union-attr]
                continue
            if data.get("kind") == kind:
                return data
        raise AssertionError(f"no {kind} line")

    def stop(self) -> int:
        """SIGTERM: the batch finishes and the watcher exits; its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)

    def __enter__(self) -> CliWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def revisions(store: Any) -> dict[str, set[str]]:
    points = store.get_points_many(sorted(store.doc_ids()))
    return {doc: {p.payload.revision for p in pts} for doc, pts in points.items()}


def expected(root: Path) -> dict[str, set[str]]:
    """What a sync of ``root`` would store: doc_id -> {revision}."""
    return {d.doc_id: {d.revision or ""} for d in read_documents([root]).documents}


def write_docs(root: Path, names: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / f"{name}.md").write_text(doc_text(name), encoding="utf-8")


# -- part 1: watching -------------------------------------------------------------------


def test_edit_move_delete_end_to_end(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    """An edit is retrievable with only its new inputs embedded; a move becomes the new
    doc_id with nothing embedded (no cache: the vectors come from the collection); a
    deletion leaves nothing of the document; every accepted revision is verified."""
    root = tmp_path / "docs"
    write_docs(root, ["alpha", "beta", "gamma"])
    store = qdrant_store(embedder, chunker)
    freshness = Freshness(tmp_path / "state.json", "k")
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      freshness=freshness)
    with Running(watcher) as run:
        first = run.next()
        assert first.kind == "initial" and first.published == 3 and first.retrievable == 3
        assert revisions(store) == expected(root)

        (root / "alpha.md").write_text(doc_text("alpha", 1), encoding="utf-8")
        edit = run.next()
        assert (edit.accepted, edit.published, edit.deleted) == (1, 1, 0)
        assert 1 <= edit.embedded < 3  # the edited section only, not the whole document
        assert edit.retrievable == 1 and edit.pending == 0 and len(edit.lag) == 1
        assert revisions(store) == expected(root)

        (root / "sub").mkdir()
        os.replace(root / "beta.md", root / "sub" / "beta-moved.md")
        moved = run.until(lambda: "sub/beta-moved.md" in store.doc_ids()
                          and "beta.md" not in store.doc_ids())
        assert sum(r.embedded for r in moved) == 0  # vectors reused, not embedded again
        assert sum(r.reused for r in moved) >= 3
        assert revisions(store) == expected(root)

        (root / "gamma.md").unlink()
        gone = run.next()
        assert gone.deleted == 1 and gone.retrievable == 1 and gone.pending == 0
        assert revisions(store) == expected(root)
    assert read_freshness(tmp_path / "state.json")["unretrievable"] == 0


def test_saves_are_read_only_when_stable(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    """Truncate-then-write in pieces and a temp file renamed into place: the store only
    ever holds a complete revision (the old one, or the final one)."""
    root = tmp_path / "docs"
    write_docs(root, ["note"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=0.25)
    seen: set[str] = set()
    with Running(watcher) as run:
        run.next()
        old = revisions(store)["note.md"]
        final = doc_text("note", 7)
        with (root / "note.md").open("w", encoding="utf-8") as out:  # truncate, then write
            for i in range(0, len(final), 40):
                out.write(final[i : i + 40])
                out.flush()
                time.sleep(0.03)
        # an editor's save: a temp file written, then renamed over the file
        other = doc_text("note", 8)
        tmp = root / "note.md.tmp"
        tmp.write_text(other[:50], encoding="utf-8")
        time.sleep(0.05)
        tmp.write_text(other, encoding="utf-8")
        os.replace(tmp, root / "note.md")

        def settled() -> bool:
            seen.update(*revisions(store).values())
            return revisions(store) == expected(root)

        run.until(settled)
    from rechunk.reuse.identity import text_revision

    complete = old | {text_revision(final), text_revision(other)}
    assert seen <= complete, "a half-written file was published"
    assert set(revisions(store)) == {"note.md"}  # the temp file never became a document


def test_a_file_written_while_it_is_read_waits(tmp_path: Path, embedder: Any,
                                              chunker: Any) -> None:
    """A file that changes while the watcher reads it (after it looked stable) is not
    published from that read: it waits to be stable again, then its last state goes."""
    from rechunk.identity import text_revision

    root = tmp_path / "docs"
    write_docs(root, ["note"])
    store = qdrant_store(embedder, chunker)
    final = doc_text("note", 9)

    class WrittenDuringRead(Watcher):
        reads = 0

        def _read(self, index: int, paths: list[str]) -> Any:
            found = super()._read(index, paths)
            WrittenDuringRead.reads += 1
            if WrittenDuringRead.reads == 1:  # the writer's last piece lands now
                with (root / "note.md").open("a", encoding="utf-8") as out:
                    out.write(final[len(half) :])
            return found

    watcher = WrittenDuringRead([root], store, chunker=chunker, embedder=embedder,
                                settle=SETTLE)
    watcher.initial_sync()
    half = final[: len(final) // 2]
    (root / "note.md").write_text(half, encoding="utf-8")
    watcher.feed([root / "note.md"])
    now = time.monotonic()
    watcher.step(now)  # first look at it
    first = watcher.step(now + 1)  # stable: read, but written to meanwhile
    assert first is not None and first.published == 0 and first.accepted == 0
    assert revisions(store)["note.md"] == {text_revision(doc_text("note"))}
    assert watcher.step(now + 1.01) is None  # looked at again: stable from now on?
    assert watcher.step(now + 1.01 + SETTLE / 2) is None
    done = watcher.step(now + 2)
    assert done is not None and done.published == 1 and done.retrievable == 1
    assert revisions(store) == expected(root) == {"note.md": {text_revision(final)}}


def test_same_rules_as_sync(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    """.gitignore, --glob and hidden names decide as in sync."""
    root = tmp_path / "docs"
    write_docs(root, ["keep"])
    (root / ".gitignore").write_text("drafts/\n*.log.md\n", encoding="utf-8")
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      globs=["*.md"], parse_retries=1)
    with Running(watcher) as run:
        run.next()
        (root / "drafts").mkdir()
        (root / "drafts" / "wip.md").write_text(doc_text("wip"), encoding="utf-8")
        (root / "x.log.md").write_text(doc_text("log"), encoding="utf-8")
        (root / ".hidden.md").write_text(doc_text("hidden"), encoding="utf-8")
        (root / "notes.txt").write_text(doc_text("txt"), encoding="utf-8")  # not *.md
        (root / "real.md").write_text(doc_text("real"), encoding="utf-8")
        run.until(lambda: "real.md" in store.doc_ids())
        assert store.doc_ids() == {"keep.md", "real.md"}
        assert set(revisions(store)) == {
            d.doc_id for d in read_documents([root], ["*.md"]).documents
        }



def test_generated_files_are_left_out_while_watching(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """As in sync: a lockfile or minified bundle written while watching is never read, and a
    source file that gains a generator's header is taken out of the store."""
    root = tmp_path / "repo"
    write_docs(root, ["keep"])
    (root / "tool.py").write_text("def run():\n    return 1\n", encoding="utf-8")
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      parse_retries=1)  # fmt: skip
    with Running(watcher) as run:
        run.next()
        assert store.doc_ids() == {"keep.md", "tool.py"}
        (root / "package-lock.json").write_text('{"lockfileVersion": 3}', encoding="utf-8")
        (root / "app.min.js").write_text("var a=1;" * 300, encoding="utf-8")
        (root / "tool.py").write_text(
            "# Code generated by shopgen. DO NOT EDIT.\ndef run():\n    return 2\n",
            encoding="utf-8",
        )
        run.until(lambda: store.doc_ids() == {"keep.md"})
        (root / "real.md").write_text(doc_text("real"), encoding="utf-8")
        run.until(lambda: "real.md" in store.doc_ids())
        assert store.doc_ids() == {"keep.md", "real.md"}
        assert set(revisions(store)) == {d.doc_id for d in read_documents([root]).documents}


def test_a_file_grown_past_max_bytes_keeps_its_chunks_while_watching(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """As in sync: a file larger than ``max_bytes`` is not read; what it had stays stored
    until it is small enough again."""
    root = tmp_path / "kb"
    write_docs(root, ["log", "other"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      read_options={"max_bytes": 4000})  # fmt: skip
    with Running(watcher) as run:
        run.next()
        first = revisions(store)
        assert set(first) == {"log.md", "other.md"}
        grown = "\n\n".join(paragraph(f"growth{i}") for i in range(8))
        (root / "log.md").write_text(doc_text("log") + grown, encoding="utf-8")
        (root / "other.md").write_text(doc_text("other", 1), encoding="utf-8")
        reports = run.until(lambda: revisions(store)["other.md"] != first["other.md"])
        assert (root / "log.md").stat().st_size > 4000
        assert revisions(store)["log.md"] == first["log.md"]
        # named in the batch that read it, not left silently stale
        from rechunk.cli.watch import _batch_lines

        (named,) = [r for r in reports if r.too_large]
        assert named.too_large == ["log.md"]
        assert "too large log.md (over --max-file-bytes" in _batch_lines(named)[0]
        (root / "log.md").write_text(doc_text("log", 1), encoding="utf-8")
        run.until(lambda: revisions(store) == expected(root))


@pytest.mark.parametrize("unread", ["too large", "not UTF-8"])
def test_a_file_not_read_at_the_start_and_then_deleted_loses_its_chunks(
    tmp_path: Path, embedder: Any, chunker: Any, unread: str
) -> None:
    """A file stored earlier that the watcher's first sync did not read (over max_bytes,
    or unreadable) kept its chunks, as it should; but it was no file of the watcher's,
    so deleting it later left them in the store for good."""
    root = tmp_path / "kb"
    write_docs(root, ["log", "other"])
    store = qdrant_store(embedder, chunker)
    first = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    with Running(first) as run:
        run.next()
    assert store.doc_ids() == {"log.md", "other.md"}
    if unread == "too large":
        grown = "\n\n".join(paragraph(f"growth{i}") for i in range(8))
        (root / "log.md").write_text(doc_text("log") + grown, encoding="utf-8")
    else:
        (root / "log.md").write_bytes(b"caf\xe9 " + doc_text("log").encode())
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      read_options={"max_bytes": 4000}, parse_retries=0)  # fmt: skip
    with Running(watcher) as run:
        run.next()
        assert store.doc_ids() == {"log.md", "other.md"}  # kept while the file is there
        (root / "log.md").unlink()
        run.until(lambda: store.doc_ids() == {"other.md"})


def test_scripts_without_a_suffix_are_read_while_watching(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """As in sync: a script with no suffix written while watching is read by its #! line,
    a LICENSE is not, and a file whose #! line is taken away is taken out of the store."""
    root = tmp_path / "repo"
    write_docs(root, ["keep"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      parse_retries=1)  # fmt: skip
    with Running(watcher) as run:
        run.next()
        (root / "bin").mkdir()
        (root / "LICENSE").write_text("Permission is granted.\n", encoding="utf-8")
        (root / "bin" / "deploy").write_text("#!/bin/sh\necho deploying\n", encoding="utf-8")
        run.until(lambda: "bin/deploy" in store.doc_ids())
        assert store.doc_ids() == {"keep.md", "bin/deploy"}
        (root / "bin" / "deploy").write_text("echo deploying\n", encoding="utf-8")
        run.until(lambda: store.doc_ids() == {"keep.md"})
        assert set(revisions(store)) == {d.doc_id for d in read_documents([root]).documents}


def test_a_rechunkignore_written_while_watching_applies(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """Writing a .rechunkignore reads the folder again under it (with --prune: what it
    leaves out is deleted), and later files it excludes are never read."""
    root = tmp_path / "docs"
    write_docs(root, ["keep", "vendored"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      prune=True, parse_retries=1)  # fmt: skip
    with Running(watcher) as run:
        run.next()
        assert store.doc_ids() == {"keep.md", "vendored.md"}
        (root / ".rechunkignore").write_text("vendored.md\n*.tmpl.md\n", encoding="utf-8")
        run.until(lambda: store.doc_ids() == {"keep.md"})
        (root / "page.tmpl.md").write_text(doc_text("template"), encoding="utf-8")
        (root / "real.md").write_text(doc_text("real"), encoding="utf-8")
        run.until(lambda: "real.md" in store.doc_ids())
        assert store.doc_ids() == {"keep.md", "real.md"}


def test_parse_failure_is_retried_then_reported(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    root = tmp_path / "docs"
    write_docs(root, ["keep"])
    store = qdrant_store(embedder, chunker)
    log = tmp_path / "diag.jsonl"
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      parse_retries=1, diagnosis=DiagnosisLog(log, "salt"))  # fmt: skip
    with Running(watcher) as run:
        run.next()
        before = revisions(store)
        (root / "keep.md").write_bytes(b"# keep\n\nbroken \xff\xfe bytes\n")
        reports: list[BatchReport] = []
        while not any(r.failed for r in reports):
            reports.append(run.next())
        failed = next(r for r in reports if r.failed)
        assert failed.errors and failed.errors[0][0] == "ParseError"
        # the operator is told which file to fix (the reason alone did not say)
        assert failed.errors[0][1].startswith("keep.md: not valid UTF-8")
        assert revisions(store) == before  # the last good revision stays
        # the log says so at once (it was written out only after a later batch's check)
        lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        failure = next(line for line in lines if line["stage"] == "failed")
        assert failure["reason"] == "parse" and failure["source_type"] == "markdown"


def test_a_folder_inside_another_watched_one_is_refused(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """`watch docs docs/sub`: the sync named docs/sub/x.md from docs ('sub/x.md') and
    the events from docs/sub ('x.md'), so an edit made a second document of one file."""
    write_docs(tmp_path / "docs" / "sub", ["x"])
    store = qdrant_store(embedder, chunker)
    with pytest.raises(ConfigError, match=r"lies inside .*docs, which is watched with all it"):
        Watcher([tmp_path / "docs", tmp_path / "docs" / "sub"], store, chunker=chunker,
                embedder=embedder)  # fmt: skip


def test_a_file_unreadable_at_the_start_is_counted_failed(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """A file broken while no watcher ran was only a 'skipped' row of the first summary:
    no failed counter, no log line, so RechunkDocumentsFailing could not fire while the
    store served its old text. It counts as the same failure while watching does."""
    root = tmp_path / "docs"
    write_docs(root, ["keep", "broken"])
    (root / "data.jsonl").write_text('{"q": "one"}\n{"q": "two"}\n', encoding="utf-8")
    store = qdrant_store(embedder, chunker)
    Watcher([root], store, chunker=chunker, embedder=embedder).initial_sync()
    (root / "broken.md").write_bytes(b"# broken\n\nbad \xff\xfe bytes\n")
    (root / "data.jsonl").write_bytes(b'{"q": "one \xff"}\n')  # a file of records, broken
    metrics, log = LiveMetrics(), tmp_path / "diag.jsonl"
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, metrics=metrics,
                      diagnosis=DiagnosisLog(log, "salt"))  # fmt: skip
    report = watcher.initial_sync()
    assert report.failed == 2 and {kind for kind, _ in report.errors} == {"ParseError"}
    assert sorted(text.split(":")[0] for _, text in report.errors) == ["broken.md", "data.jsonl"]
    from prometheus_client.parser import text_string_to_metric_families

    samples = [s for f in text_string_to_metric_families(metrics.text()) for s in f.samples]
    assert sum(s.value for s in samples if s.name == "rechunk_documents_failed_total") == 2
    failed = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [(f["stage"], f["reason"]) for f in failed if f["stage"] == "failed"] == [
        ("failed", "parse")
    ] * 2


def test_a_link_gone_dangling_while_down_is_failed_then_deleted_with_it(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """Counted failed at the start, the document of a link whose target went while no
    watcher ran stayed for good once the link was removed: the link was not among the
    files the watcher held, so its removal deleted nothing."""
    root, outside = tmp_path / "docs", tmp_path / "outside.md"
    write_docs(root, ["keep"])
    outside.write_text(doc_text("outside"), encoding="utf-8")
    (root / "link.md").symlink_to(outside)
    store = qdrant_store(embedder, chunker)
    Watcher([root], store, chunker=chunker, embedder=embedder).initial_sync()
    outside.unlink()
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    with Running(watcher) as run:
        assert run.next().failed == 1 and "link.md" in store.doc_ids()
        (root / "link.md").unlink()
        run.until(lambda: "link.md" not in store.doc_ids())


def test_a_file_that_would_take_another_folders_doc_id_is_left_out(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """Two folders watched: a file made in one with the doc_id of the other's file would
    replace that document (and deleting it would delete the other's). It is reported
    failed, named in the log, and left out; the other folder's document stays."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_docs(a, ["readme"])
    write_docs(b, ["other"])
    store = qdrant_store(embedder, chunker)
    log = tmp_path / "diag.jsonl"
    watcher = Watcher([a, b], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      diagnosis=DiagnosisLog(log, "salt"))  # fmt: skip
    with Running(watcher) as run:
        run.next()
        before = revisions(store)
        (b / "readme.md").write_text(doc_text("readme", 7), encoding="utf-8")
        reports: list[BatchReport] = []
        while not any(r.failed for r in reports):
            reports.append(run.next())
        failed = next(r for r in reports if r.failed)
        kind, text = failed.errors[0]
        assert kind == "ConfigError" and "doc_id 'readme.md'" in text
        assert str(a / "readme.md") in text and str(b / "readme.md") in text
        assert revisions(store) == before
        # deleting the refused file leaves the other folder's document; later files sync
        (b / "readme.md").unlink()
        (b / "new.md").write_text(doc_text("new"), encoding="utf-8")
        run.until(lambda: "new.md" in store.doc_ids())
        assert revisions(store)["readme.md"] == before["readme.md"]
        # refused again; then the other folder's file goes, and the refused one is read
        # (it was left out until written again, and nothing showed it missing)
        (b / "readme.md").write_text(doc_text("readme", 7), encoding="utf-8")
        reports = []
        while not any(r.failed for r in reports):
            reports.append(run.next())
        (a / "readme.md").unlink()
        run.until(lambda: revisions(store).get("readme.md") == expected(b).get("readme.md"))
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert any(line["stage"] == "failed" and line["reason"] == "clash" for line in lines)


def test_cli_watch_leaves_out_a_file_another_synced_folder_holds(tmp_path: Path) -> None:
    """`rechunk sync a`, then `rechunk watch b`: a README.md made in b would replace a's
    README.md (both are doc_id README.md), as `rechunk sync b` refuses to."""
    from qdrant_client import QdrantClient

    from rechunk.reuse.identity import text_revision

    write_docs(tmp_path / "a", ["README"])
    write_docs(tmp_path / "b", ["other"])
    first = subprocess.run([sys.executable, "-m", "rechunk.cli", "sync", "a"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (tmp_path / "b" / "big.md").write_text(doc_text("big") * 4, encoding="utf-8")
    with CliWatcher(tmp_path, "b", "--settle", "0.05", "--max-file-bytes", "2KB") as watcher:
        initial = watcher.next_json("initial")
        # the files as sync's --json gives them: by format, and those left out
        assert initial["formats"] == {"markdown": 1}, initial
        assert [f["doc_id"] for f in initial["too_large_files"]] == ["big.md"]
        (tmp_path / "b" / "README.md").write_text(doc_text("README", 3), encoding="utf-8")
        batch = watcher.next_json("batch")
        while not batch["failed"]:
            batch = watcher.next_json("batch")
        kind, text = batch["errors"][0]
        assert kind == "ConfigError" and "would replace" in text
        assert watcher.stop() == 0
    client = QdrantClient(path=str(tmp_path / ".rechunk" / "qdrant"))
    try:
        points, _ = client.scroll("rechunk", limit=100, with_payload=True)
    finally:
        client.close()
    revisions_found = {p.payload["metadata"]["revision"] for p in points  # type: ignore[index]
                       if p.payload["metadata"]["doc_id"] == "README.md"}  # type: ignore[index]  # fmt: skip
    assert revisions_found == {text_revision(doc_text("README"))}


def test_burst_is_a_few_batches(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      cache=MemoryCache())
    with Running(watcher) as run:
        run.next()
        for i in range(140):  # as a checkout writes them: a file at a time
            (root / f"f{i:03d}.md").write_text(f"File {i} of the burst.\n", encoding="utf-8")
        (root / "sub").mkdir()  # a folder, and an editor's temporary file, are no files
        for i in range(140, 150):
            (root / "sub" / f"f{i:03d}.md").write_text(f"File {i}.\n", encoding="utf-8")
        (root / "f000.md.swp").write_text("x", encoding="utf-8")
        (root / "f000.md.swp").unlink()
        batches = run.until(lambda: len(store.doc_ids()) == 150, timeout=60)
        assert 1 <= len([b for b in batches if b.kind == "batch"]) <= 4
        assert revisions(store) == expected(root)
        # "N file(s)" on the batch lines counts files, not every path an event named
        assert sum(b.files for b in batches if b.kind == "batch") == 150


def test_a_watcher_that_is_behind_says_so(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    """Changes seen but not yet read are counted as queued on every report: a revision is
    accepted (and counted pending) only once its file is read, so pending alone reads 0
    while a watcher is behind; caught up means both are 0."""
    root = tmp_path / "docs"
    write_docs(root, ["alpha", "beta", "gamma"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=0.0,
                      max_wait=0.0, max_batch=1)
    assert watcher.initial_sync().queued == 0
    for name in ("alpha", "beta", "gamma"):
        (root / f"{name}.md").write_text(doc_text(name, 1), encoding="utf-8")
    watcher.feed(sorted(str(p) for p in root.glob("*.md")))
    later = time.monotonic() + 10  # every path has settled
    reports = [watcher.step(later + i) for i in range(3)]
    assert [(r.published, r.pending, r.queued) for r in reports if r] == [
        (1, 0, 2), (1, 0, 1), (1, 0, 0)
    ]
    assert revisions(store) == expected(root)
    assert json.loads(json.dumps(reports[0].to_dict()))["queued"] == 2  # in --json lines


def test_changes_made_during_a_batch_are_queued_and_timed_from_their_event(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """The watcher takes file events between batches. While a batch ran (a long embed, a
    store that stopped answering), the changes made meanwhile were counted nowhere
    (queue_depth 0 beside 250 unread saves) and their lag was timed from when the batch
    ended, not from their event (11.8 s said for 20 s). Events not yet taken are counted,
    and a path's first sighting is its event's time."""
    root = tmp_path / "docs"
    write_docs(root, ["alpha"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    watcher.start()
    try:
        watcher.initial_sync()
        events = watcher._events
        assert events is not None
        (root / ".hidden.md").write_text(doc_text("hidden"), encoding="utf-8")
        (root / "beta.md").write_text(doc_text("beta"), encoding="utf-8")
        deadline = time.monotonic() + 20

        def seen() -> bool:  # beta.md's event (the hidden file's may come alone, first)
            return any(p.endswith("beta.md") for _, _, paths in events.waiting() for p in paths)

        while not seen() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen(), "no file event in 20 s"
        assert watcher._pending == {}  # not taken yet, as during a batch
        count, age = watcher.queue_state()
        assert count == 1 and age is not None  # beta.md; not the hidden file
        time.sleep(1.0)  # the batch goes on
        watcher._drain(0.5)  # taken now, a second after the event
        (entry,) = watcher._pending.values()
        assert time.monotonic() - entry.first_seen >= 1.0
        assert watcher.queue_state()[0] == 1 and events.waiting() == []
        # stopped (a signal) while gamma.md's event waits: it still counts as unread
        # (the stop line said plain 'stopped' for the changes of the last batch)
        (root / "gamma.md").write_text(doc_text("gamma"), encoding="utf-8")
        while not any(p.endswith("gamma.md") for _, _, paths in events.waiting() for p in paths):
            assert time.monotonic() < deadline + 20, "no file event for gamma.md"
            time.sleep(0.05)
        watcher.stop_watching()
        assert watcher.queue_state()[0] == 2
    finally:
        watcher.stop_watching()


# -- the store goes away -----------------------------------------------------------------


def _start_chroma(path: Path, port: int) -> subprocess.Popen[bytes]:
    from chroma_server import HOST, chroma_cli, make_client

    log = (path.parent / "chroma.log").open("ab")
    process = subprocess.Popen(
        [os.fspath(chroma_cli()), "run", "--path", os.fspath(path), "--host", HOST,
         "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, "chroma run exited"
        try:
            make_client(port).heartbeat()
            return process
        except Exception:
            assert time.monotonic() < deadline, "chroma did not start"
            time.sleep(0.1)


@pytest.fixture
def chroma_process(tmp_path: Path) -> Iterator[dict[str, Any]]:
    pytest.importorskip("chromadb")
    from chroma_server import free_port, stop_process

    state: dict[str, Any] = {"path": tmp_path / "chroma", "port": free_port()}
    state["path"].mkdir()
    state["process"] = _start_chroma(state["path"], state["port"])
    yield state
    stop_process(state["process"])


def test_store_goes_away_and_comes_back(tmp_path: Path, embedder: Any, chunker: Any,
                                        chroma_process: dict[str, Any]) -> None:
    """Chroma stopped mid-stream: the changes wait (retried with back-off); restarted on
    the same port and folder: every change lands, nothing stale, nothing lost."""
    from chroma_server import stop_process

    from rechunk.adapters.chroma import ChromaStore, http_client
    from rechunk.sync.generations import open_live

    root = tmp_path / "docs"
    write_docs(root, ["one", "two", "three"])
    client = http_client("127.0.0.1", chroma_process["port"])
    store = open_live(ChromaStore(client, "live"), chunker, embedder.dimension)
    metrics = LiveMetrics()
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      backoff=(0.2, 0.8), cache=MemoryCache(), metrics=metrics,
                      freshness=Freshness(tmp_path / "state.json", "k"))
    with Running(watcher) as run:
        assert run.next().published == 3
        stop_process(chroma_process["process"])
        # one.md saved as `sed -i` saves: a temporary file renamed over it
        (root / "sedX1y2z3").write_text(doc_text("one", 2), encoding="utf-8")
        (root / "sedX1y2z3").rename(root / "one.md")
        (root / "two.md").unlink()
        write_docs(root, ["four"])
        failed = run.next()
        assert failed.retry_in is not None and failed.errors
        assert failed.errors[0][0] in ("StoreUnavailableError", "StoreTimeoutError")
        time.sleep(1.0)  # every event taken, the batch tried again
        again = run.next()
        assert again.errors and again.files <= 3
        # held, not dropped; the temporary file, gone and never synced, is not among them
        # (it was: the queue gauge and the failed batch's line counted it as a change)
        assert watcher.queue_state()[0] == 3
        (root / "three.md").write_text(doc_text("three", 5), encoding="utf-8")  # while down
        time.sleep(0.5)
        chroma_process["process"] = _start_chroma(chroma_process["path"], chroma_process["port"])
        run.until(lambda: watcher.queue_state()[0] == 0 and not watcher.freshness.pending
                  and revisions(store) == expected(root), timeout=40)
    assert revisions(store) == expected(root)  # 0 lost, 0 stale
    assert read_freshness(tmp_path / "state.json")["unretrievable"] == 0
    from prometheus_client.parser import text_string_to_metric_families

    samples = [s for family in text_string_to_metric_families(metrics.text()) for s in family.samples]
    errors = {s.labels["kind"]: s.value for s in samples if s.name == "rechunk_errors_total"}
    assert errors.get("StoreUnavailableError", 0) + errors.get("StoreTimeoutError", 0) >= 1
    # each revision is accepted once, however often its batch was tried: the three of the
    # first sync, then one.md's edit, two.md's deletion, four.md and three.md's edit
    accepted = sum(s.value for s in samples if s.name == "rechunk_documents_accepted_total")
    assert accepted == 7


# -- part 2 and 3: freshness and metrics ------------------------------------------------


def test_metrics_endpoint_and_no_text(tmp_path: Path, embedder: Any, chunker: Any) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    root = tmp_path / "docs"
    names = ["first", "second"]
    write_docs(root, names)
    store = qdrant_store(embedder, chunker)
    metrics = LiveMetrics()
    freshness = Freshness(tmp_path / "state.json", "k")
    diagnosis = DiagnosisLog(tmp_path / "diag.jsonl", freshness.salt)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      metrics=metrics, freshness=freshness, diagnosis=diagnosis)
    server = serve_metrics(metrics, 0)
    texts = [doc_text(n) for n in names]
    try:
        with Running(watcher) as run:
            run.next()
            texts.append(doc_text("first", 3))
            (root / "first.md").write_text(texts[-1], encoding="utf-8")
            run.next()
            (root / "second.md").unlink()
            run.next()
            url = f"http://127.0.0.1:{server.port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as answer:
                page = answer.read().decode("utf-8")
    finally:
        server.stop()
        diagnosis.close()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if not sample.name.startswith("rechunk_"):
                continue
            assert set(sample.labels) <= {"source_type", "policy", "kind", "le"}, sample
            if "source_type" in sample.labels:
                assert sample.labels["source_type"] == "markdown"
                assert sample.labels["policy"] == chunker.policy_id
            samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
    assert samples["rechunk_documents_accepted_total"] == 4  # 2 new, 1 edit, 1 deletion
    assert samples["rechunk_documents_published_total"] == 4
    assert samples["rechunk_inputs_embedded_total"] >= 1
    assert "rechunk_inputs_reused_total" in samples  # 0 here: unchanged sections are kept
    assert samples["rechunk_tokens_embedded_total"] > 0
    assert samples["rechunk_accept_to_retrievable_seconds_count"] == 4
    assert samples["rechunk_reindexed_bytes_per_changed_byte_count"] == 1
    # the edit: one observation of the inputs it embedded (1 or 2, the sections it touched)
    assert samples["rechunk_inputs_embedded_per_changed_document_count"] == 1
    assert 1 <= samples["rechunk_inputs_embedded_per_changed_document_sum"] <= 2
    assert samples["rechunk_queue_depth"] == 0
    assert samples["rechunk_unretrievable_revisions"] == 0
    assert samples["rechunk_stale_retrievable_revisions"] == 0
    log = (tmp_path / "diag.jsonl").read_text(encoding="utf-8")
    records = [json.loads(line) for line in log.splitlines()]
    assert {r["stage"] for r in records} >= {"accepted", "published", "retrievable"}
    # the deletion passes every stage too
    assert [r["stage"] for r in records if r["revision"] is None] == [
        "accepted", "published", "retrievable"
    ]
    # every revision published was logged accepted first, the initial sync's too
    for doc in {r["doc"] for r in records}:
        stages = [r["stage"] for r in records if r["doc"] == doc]
        assert stages.count("accepted") == stages.count("published") >= 1, stages
    assert all(r["doc"] not in ("first.md", "second.md") for r in records)
    assert len({r["doc"] for r in records}) == 2  # one opaque id per document
    for text in texts:  # no 40-character piece of any document in the page or the log
        for i in range(0, len(text) - 40, 7):
            piece = text[i : i + 40]
            assert piece not in page and piece not in log
    for name in names:
        assert name + ".md" not in page and name + ".md" not in log


def test_a_deleted_source_file_keeps_its_labels(tmp_path: Path, embedder: Any,
                                               chunker: Any) -> None:
    """A deleted Python file was counted as ``source_type="other"`` under the prose policy
    in the metrics and the log, though it was published as code under the code policy:
    per-type and per-policy views no longer lined up."""
    from prometheus_client.parser import text_string_to_metric_families

    from rechunk.chunking.policy import code_policy_for

    root = tmp_path / "src"
    write_docs(root, ["notes"])
    (root / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    code, _ = code_policy_for(embedder, "python")
    store = qdrant_store(embedder, chunker)
    metrics = LiveMetrics()

    def pick(doc: Any) -> Any:
        return code if (doc.metadata or {}).get("format") == "code" else None

    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                      metrics=metrics, chunker_for=pick)  # fmt: skip
    with Running(watcher) as run:
        run.next()
        assert store.doc_ids() == {"notes.md", "cart.py"}
        (root / "cart.py").unlink()
        assert run.next().deleted == 1
    labels = {
        (s.name, s.labels["source_type"], s.labels["policy"]): s.value
        for family in text_string_to_metric_families(metrics.text())
        for s in family.samples
        if s.name in ("rechunk_documents_accepted_total", "rechunk_documents_published_total")
    }
    for name in ("rechunk_documents_accepted_total", "rechunk_documents_published_total"):
        assert labels[(name, "code", code.policy_id)] == 2  # published, then deleted
        assert (name, "other", chunker.policy_id) not in labels


def test_status_shows_unretrievable_revisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A revision accepted but never verified (a watcher killed mid-batch) is what
    rechunk status shows: the count and the age of the oldest, in text and --json."""
    from rechunk.cli import main
    from rechunk.live.freshness import freshness_path

    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path / "docs", ["a"])
    assert main(["sync", "docs", "--json"]) == 0
    capsys.readouterr()
    key = "qdrant:.rechunk/qdrant rechunk"
    state = Freshness(freshness_path(".rechunk", key), key)
    state.accept("a.md", "r-new", time.time() - 42.0, "markdown", "p")
    state.save()
    assert main(["status", "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)["freshness"]
    assert fresh["unretrievable"] == 1 and fresh["oldest_age_seconds"] >= 42.0
    assert fresh["revisions"][0]["doc_id"] == "a.md"
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "1 accepted revision(s) not yet retrievable, the oldest accepted 4" in out
    assert "  pending: a.md revision r-new, accepted 4" in out  # which, not only how many
    # a watcher holding embedded Qdrant: the pending revisions still show, from its state
    from rechunk.adapters.qdrant import local_client

    held = local_client(tmp_path / ".rechunk" / "qdrant")
    try:
        assert main(["status"]) == 3
        shown = capsys.readouterr()
        assert "pending: a.md revision r-new" in shown.out and "in use" in shown.err
        assert main(["status", "--json"]) == 3
        assert json.loads(capsys.readouterr().out)["freshness"]["unretrievable"] == 1
    finally:
        held.close()


# -- the command ------------------------------------------------------------------------


def test_a_metrics_port_that_cannot_be_served_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port in use, or out of range: a usage error naming the option (exit 2), before
    the store is opened, so no collection is made."""
    import socket

    from rechunk.cli import main

    monkeypatch.chdir(tmp_path)
    write_docs(tmp_path / "docs", ["a"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for bad in (str(port), "99999"):
            assert main(["watch", "docs", "--metrics-port", bad]) == 2
            err = capsys.readouterr().err
            assert f"--metrics-port {bad}" in err and "cannot serve metrics there" in err
    assert not (tmp_path / ".rechunk" / "qdrant").exists()


def test_cli_watch_sigterm_finishes_and_exits_0(tmp_path: Path) -> None:
    write_docs(tmp_path / "docs", ["a", "b"])
    with CliWatcher(tmp_path, "docs", "--settle", "0.05", "--metrics-port", "0") as watcher:
        assert watcher.next_json("initial")["published"] == 2
        port = watcher.next_json("metrics")["port"]
        (tmp_path / "docs" / "a.md").write_text(doc_text("a", 1), encoding="utf-8")
        batch = watcher.next_json("batch")
        assert batch["published"] == 1 and batch["retrievable"] == 1
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert b"rechunk_documents_published_total" in answer.read()
        assert watcher.stop() == 0
    status = subprocess.run([sys.executable, "-m", "rechunk.cli", "status", "--json"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    data = json.loads(status.stdout)
    assert data["stale_check"] == "passed" and data["documents"] == 2
    assert data["freshness"]["unretrievable"] == 0


def test_next_start_repairs_what_a_killed_watcher_left(tmp_path: Path, embedder: Any,
                                                     chunker: Any) -> None:
    """A watcher killed after accepting an edit and a deletion (its state file says so):
    the next start publishes the edit, finishes the deletion and verifies both."""
    from rechunk.reuse.identity import text_revision

    root = tmp_path / "docs"
    write_docs(root, ["a", "b"])
    store = qdrant_store(embedder, chunker)
    path = tmp_path / "state.json"
    Watcher([root], store, chunker=chunker, embedder=embedder,
            freshness=Freshness(path, "k")).initial_sync()
    edited = doc_text("a", 4)
    (root / "a.md").write_text(edited, encoding="utf-8")
    (root / "b.md").unlink()
    state = Freshness(path, "k")  # what the killed watcher had written
    state.accept("a.md", text_revision(edited), time.time() - 5, "markdown", chunker.policy_id)
    state.accept("b.md", None, time.time() - 5, "markdown", chunker.policy_id)
    state.save()
    assert read_freshness(path)["unretrievable"] == 2
    report = Watcher([root], store, chunker=chunker, embedder=embedder,
                     freshness=Freshness(path, "k")).initial_sync()
    assert (report.published, report.deleted, report.retrievable) == (1, 1, 2)
    assert min(report.lag) >= 5.0  # measured from the first acceptance
    assert revisions(store) == expected(root)
    assert read_freshness(path)["unretrievable"] == 0


def test_files_removed_while_no_watcher_ran_are_deleted_at_the_next_start(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """A file deleted (or renamed) while the watcher was down, or just before it stopped:
    the next start deletes its document, as a running watcher would have. What it never
    watched stays: documents synced into the collection another way, another folder's
    files, and an emptied file (as a sync without --prune keeps them)."""
    from rechunk import Document, sync

    root, other = tmp_path / "docs", tmp_path / "other"
    write_docs(root, ["a", "b", "c", "d"])
    write_docs(other, ["x"])
    store = qdrant_store(embedder, chunker)
    path = tmp_path / "state.json"

    def start(folder: Path) -> BatchReport:
        watcher = Watcher([folder], store, chunker=chunker, embedder=embedder,
                          freshness=Freshness(path, "k"))  # fmt: skip
        return watcher.initial_sync()

    start(root)
    start(other)
    sync([Document("api:note", doc_text("note"))], store, chunker=chunker, embedder=embedder)
    (root / "b.md").unlink()
    os.replace(root / "c.md", root / "c-renamed.md")
    (root / "d.md").write_text("\n", encoding="utf-8")
    report = start(root)
    assert report.deleted == 2 and report.retrievable >= 2
    assert store.doc_ids() == {"a.md", "c-renamed.md", "d.md", "x.md", "api:note"}
    # the summary's chunks that stay are the other documents' (and the emptied file's),
    # not those of the files gone, just deleted
    others = store.get_points_many(["x.md", "api:note", "d.md"])
    assert report.sync is not None
    assert report.sync.chunks_not_given == sum(len(points) for points in others.values())
    # and the summary counts them among the deleted (it said 0 deleted beside them)
    assert report.sync.documents["deleted"] == 2 and report.sync.chunks["deleted"] >= 2
    assert read_freshness(path)["unretrievable"] == 0
    # a first start with no state of its folders deletes nothing it did not see
    (root / "a.md").unlink()
    (tmp_path / "state.files.json").unlink()
    assert start(root).deleted == 0 and "a.md" in store.doc_ids()


def test_cli_watch_syncs_what_changed_while_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rechunk watch` reads the folders, then loads the model and opens the store (a
    minute for a large embedded store): a file edited and one deleted in that time are
    synced by its first batch. They were lost: the file watcher started only after the
    store was open, and the initial sync had read the files before."""
    from qdrant_client import QdrantClient

    from rechunk.adapters.qdrant import QdrantStore
    from rechunk.cli import compose, main

    root = tmp_path / "docs"
    write_docs(root, ["a", "b", "c"])
    records = [{"id": i, "text": doc_text(f"faq{i}")} for i in range(2)]
    (root / "faq.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.chdir(tmp_path)
    opened = compose.open_embedder

    def edits_while_the_model_loads(args: Any) -> Any:
        (root / "a.md").write_text(doc_text("a", 2), encoding="utf-8")
        (root / "b.md").unlink()
        (root / "faq.jsonl").unlink()  # its records go too
        return opened(args)

    monkeypatch.setattr(compose, "open_embedder", edits_while_the_model_loads)
    serve = Watcher.serve

    def until_a_batch(self: Watcher, stop: threading.Event, on_batch: Any, **kw: Any) -> None:
        def then_stop(report: BatchReport) -> None:
            on_batch(report)
            if report.kind == "batch":
                stop.set()

        timer = threading.Timer(20, stop.set)  # no batch at all: the assertions below fail
        timer.start()
        try:
            serve(self, stop, then_stop, **kw)
        finally:
            timer.cancel()

    monkeypatch.setattr(Watcher, "serve", until_a_batch)
    assert main(["watch", "docs", "--settle", "0.05", "--json"]) == 0
    client = QdrantClient(path=str(tmp_path / ".rechunk" / "qdrant"))
    try:
        assert revisions(QdrantStore(client, "rechunk")) == expected(root)
        assert set(expected(root)) == {"a.md", "c.md"}
    finally:
        client.close()


def test_a_watcher_releases_the_embedders_run_memory(tmp_path: Path, chunker: Any) -> None:
    """After its initial sync (run as `rechunk sync` runs it), a watcher sets the ONNX
    embedder to give each run's memory back, and after each batch gives the C heap's
    free pages back (glibc): a watcher lives for hours and would keep the high-water
    mark of the largest batch it met. ``release_memory=False`` leaves both alone."""
    from rechunk.integrations.onnx import OnnxEmbedder
    from rechunk.live.engine import release_free_heap

    glibc = release_free_heap()
    assert glibc or not sys.platform.startswith("linux") or os.path.exists("/etc/alpine-release")
    for release in (True, False):
        root = tmp_path / f"docs{release}"
        write_docs(root, ["alpha"])
        embedder = OnnxEmbedder()
        store = qdrant_store(embedder, chunker, name=f"release{release}")
        watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE,
                          release_memory=release)
        assert embedder.release_memory is False  # the initial sync runs as sync does
        with Running(watcher) as run:
            assert run.next().kind == "initial"
            assert embedder.release_memory is release
            (root / "alpha.md").write_text(doc_text("alpha", 1), encoding="utf-8")
            edit = run.next()
            assert edit.retrievable == 1
            assert ("release_memory" in edit.seconds) is (release and glibc)


def test_cyclic_garbage_left_between_batches_is_collected(tmp_path: Path, embedder: Any,
                                                          chunker: Any) -> None:
    """Cycles that die between batches are collected: each sync freezes the objects that
    exist when it starts and thaws them into the oldest generation, where only a full
    collection (which a watcher syncing every few seconds never reached) frees them; each
    sync collects the young generations before its freeze."""
    import gc
    import weakref

    class Cycle:
        me: Any = None

    root = tmp_path / "docs"
    write_docs(root, ["alpha"])
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with Running(watcher) as run:
        assert run.next().kind == "initial"
        refs = []
        for version in (1, 2, 3):
            for _ in range(50):
                c = Cycle()
                c.me = c
                refs.append(weakref.ref(c))
            del c
            (root / "alpha.md").write_text(doc_text("alpha", version), encoding="utf-8")
            assert run.next().retrievable == 1
        assert sum(r() is not None for r in refs) == 0


def test_a_watcher_started_on_an_empty_embedded_chroma_syncs_after_another_writer(
    tmp_path: Path,
) -> None:
    """`rechunk watch kb --store chroma:cdb` started while the collection is empty; a
    `rechunk sync` of another folder (another process) then writes the first points; a
    file saved in kb/ is published by the next batch. chromadb's embedded engine of the
    watcher had failed every read of vectors since ("Nothing found on disk"), so every
    batch failed until the watcher was restarted."""
    pytest.importorskip("chromadb")
    (tmp_path / "kb").mkdir()
    write_docs(tmp_path / "other", ["elsewhere"])
    with CliWatcher(tmp_path, "kb", "--store", "chroma:cdb", "--settle", "0.05") as watcher:
        assert watcher.next_json("initial")["published"] == 0
        other = subprocess.run(
            [sys.executable, "-m", "rechunk.cli", "sync", "other", "--store", "chroma:cdb"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert other.returncode == 0, other.stderr
        (tmp_path / "kb" / "saved.md").write_text(doc_text("saved"), encoding="utf-8")
        batch = watcher.next_json("batch")
        assert batch["published"] == 1 and not batch["errors"], batch
        assert watcher.stop() == 0
    status = subprocess.run(
        [sys.executable, "-m", "rechunk.cli", "status", "--store", "chroma:cdb", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    data = json.loads(status.stdout)
    assert data["documents"] == 2 and data["stale_check"] == "passed", data


def test_a_record_removed_while_no_watcher_ran_goes_at_the_restart(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """A JSONL file's record removed between two watchers: the second's initial sync reads
    the file whole, so the record goes (later batches compare against the file map the
    initial sync made, so it would have stayed for good)."""
    root = tmp_path / "docs"
    root.mkdir()
    faq = root / "faq.jsonl"
    faq.write_text("".join(json.dumps({"q": f"question {k}", "a": f"answer {k}"}) + "\n"
                           for k in range(3)))  # fmt: skip
    store = qdrant_store(embedder, chunker)
    first = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    report = first.initial_sync()
    assert store.doc_ids() == {"faq.jsonl#1", "faq.jsonl#2", "faq.jsonl#3"}
    assert report.files == 1  # one file of three records ("1 file(s)", not 3)
    faq.write_text("".join(faq.read_text().splitlines(keepends=True)[:2]))
    second = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    second.initial_sync()
    assert store.doc_ids() == {"faq.jsonl#1", "faq.jsonl#2"}


def test_every_format_a_parser_reads_is_its_own_source_type() -> None:
    """Metrics labelled an ODT, ODS, ODP, RTF, EPUB, AsciiDoc, Org or LaTeX file 'other',
    though the runbook says the label is the format a file is read as."""
    from rechunk.sources.registry import FORMATS

    for fmt, (_, suffixes) in FORMATS.items():
        for suffix in suffixes:
            assert Watcher._source_type(None, f"kb/file{suffix}") == fmt, suffix
    assert Watcher._source_type(None, "kb/tickets.jsonl#T-1") == "jsonl"
    assert Watcher._source_type(None, "kb/logo.png") == "other"


def test_a_stopping_watcher_says_what_it_leaves_undone() -> None:
    """A watcher stopped during a store outage said only 'stopped', with edits unread and
    revisions unpublished; the line now counts them (nothing when nothing is left)."""
    from rechunk.cli.watch import _left_undone

    assert _left_undone(0, 0) == ""
    assert _left_undone(2, 1) == (
        "; 2 changed file(s) not yet read and 1 revision(s) not yet retrievable: "
        "the next start syncs them"
    )
    assert _left_undone(0, 3) == "; 3 revision(s) not yet retrievable: the next start syncs them"


def test_a_restart_logs_each_revision_accepted_once(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """What a killed watcher left pending: a deletion it had published is not logged
    accepted again by the next start, and a revision edited again while no watcher ran
    is logged accepted before it is published (neither was, after the first fix)."""
    from rechunk.reuse.identity import text_revision

    root = tmp_path / "docs"
    write_docs(root, ["alpha", "beta"])
    store = qdrant_store(embedder, chunker)
    state = tmp_path / "state.json"
    Watcher([root], store, chunker=chunker, embedder=embedder,
            freshness=Freshness(state, "k")).initial_sync()  # fmt: skip
    (root / "beta.md").unlink()
    killed = Freshness(state, "k")  # what the killed watcher had written
    killed.accept("beta.md", None, time.time() - 5, "markdown", chunker.policy_id)
    killed.published("beta.md", time.time() - 4)
    killed.accept("alpha.md", text_revision("an edit it never published"), time.time() - 5)
    killed.save()
    (root / "alpha.md").write_text(doc_text("alpha", 2), encoding="utf-8")
    log = tmp_path / "diag.jsonl"
    diagnosis = DiagnosisLog(log, "salt", hash_ids=False)
    Watcher([root], store, chunker=chunker, embedder=embedder,
            freshness=Freshness(state, "k"), diagnosis=diagnosis).initial_sync()  # fmt: skip
    diagnosis.flush()
    stages = [(r["doc"], r["stage"]) for r in map(json.loads, log.read_text().splitlines())]
    assert ("beta.md", "accepted") not in stages and ("beta.md", "retrievable") in stages
    alpha = [stage for doc, stage in stages if doc == "alpha.md"]
    assert alpha == ["accepted", "published", "retrievable"]
    assert revisions(store) == expected(root)


def test_files_emptied_while_no_watcher_ran_keep_their_documents_until_deleted(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """Without --prune an emptied file keeps its documents, as a sync's does: a JSONL
    file emptied while no watcher ran lost its records at the next start (its records'
    ids are not the file's), and an emptied Markdown file deleted afterwards kept its
    chunks for good (the restart had mapped it to no document)."""
    root = tmp_path / "docs"
    write_docs(root, ["alpha", "beta"])
    rows = [json.dumps({"q": f"question {k}", "a": paragraph(f"answer {k}")}) for k in range(3)]
    (root / "faq.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    store = qdrant_store(embedder, chunker)
    state = tmp_path / "state.json"

    def start() -> Watcher:
        watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=0.0,
                          max_wait=0.0, freshness=Freshness(state, "k"))  # fmt: skip
        watcher.initial_sync()
        return watcher

    start()
    held = set(store.doc_ids())
    assert {"faq.jsonl#1", "faq.jsonl#3", "alpha.md"} <= held
    (root / "faq.jsonl").write_bytes(b"")
    (root / "alpha.md").write_text("", encoding="utf-8")
    watcher = start()
    assert set(store.doc_ids()) == held
    for name in ("faq.jsonl", "alpha.md"):
        (root / name).unlink()
    watcher.feed([str(root / "faq.jsonl"), str(root / "alpha.md")])
    report = watcher.step(time.monotonic() + 10)
    assert report is not None and report.deleted == 4
    assert store.doc_ids() == {"beta.md"}


# -- what a running watcher reads and reports, as a sync would ----------------------------


def _settled(watcher: Watcher) -> bool:
    """Nothing waits to be read and every accepted revision is retrievable."""
    return watcher.queue_state()[0] == 0 and not watcher.freshness.pending


def test_a_symbolic_link_to_a_file_is_read_as_a_sync_reads_it(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """A file replaced by a symbolic link, and a new link, while watching: the batch
    deleted their documents and published nothing (`deleted 2, published 0`), while
    `rechunk sync` (and a restarted watcher) reads a link to a file as the file. A path
    given directly was named after the file the link leads to (by its name alone when it
    lies out of the folder), not by the link's own path. As a sync, the watcher reads a
    file reached twice once: under its own name when it lies in the folder, else under
    the first link to it in the walk's order; and follows no link to a folder."""
    from rechunk.identity import text_revision

    root, outside, elsewhere = tmp_path / "docs", tmp_path / "outside.md", tmp_path / "more"
    notes = root / "notes"
    write_docs(notes, ["a", "b", "c", "d"])
    write_docs(elsewhere, ["e"])
    outside.write_text(doc_text("outside"), encoding="utf-8")
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, settle=SETTLE)
    with Running(watcher) as run:
        run.next()
        (notes / "a.md").unlink()
        (notes / "a.md").symlink_to(outside)  # out of the folder
        (notes / "b.md").unlink()
        (notes / "b.md").symlink_to("c.md")  # c.md is read as itself: b.md holds nothing
        (notes / "z.md").symlink_to(outside)  # read through a.md, first in the walk's order
        run.until(lambda: _settled(watcher) and "notes/b.md" not in store.doc_ids())
        assert revisions(store) == expected(root)
        assert revisions(store)["notes/a.md"] == {text_revision(doc_text("outside"))}
        assert set(expected(root)) == {"notes/a.md", "notes/c.md", "notes/d.md"}
        # the link that read the file goes: the file is read through the other one
        (notes / "a.md").unlink()
        run.until(lambda: _settled(watcher) and "notes/z.md" in store.doc_ids())
        assert revisions(store) == expected(root)
        # a new link earlier in the walk's order takes the file over; a link to a folder
        # is not followed
        (root / "more").symlink_to(elsewhere, target_is_directory=True)
        (notes / "m.md").symlink_to(outside)
        run.until(lambda: _settled(watcher) and "notes/z.md" not in store.doc_ids())
        assert revisions(store) == expected(root)
        assert set(expected(root)) == {"notes/c.md", "notes/d.md", "notes/m.md"}


def test_inputs_shared_by_the_files_of_a_batch_count_once_as_in_a_sync(
    tmp_path: Path, embedder: Any, chunker: Any
) -> None:
    """The same section appended to several files in one burst is one input sent to the
    model once, and `rechunk sync` reports it once; the batch and the Prometheus counters
    counted it once per file (`embedded 20, tokens_embedded 520` for one input of 26
    tokens), which `rechunk_tokens_embedded_total`, the tokens billed, must not."""
    from prometheus_client.parser import text_string_to_metric_families

    from rechunk import sync

    root = tmp_path / "docs"
    write_docs(root, ["a", "b", "c"])
    (root / "d.txt").write_text(doc_text("d"), encoding="utf-8")  # another source type
    metrics = LiveMetrics()
    store = qdrant_store(embedder, chunker)
    watcher = Watcher([root], store, chunker=chunker, embedder=embedder, cache=MemoryCache(),
                      metrics=metrics, settle=0.0, max_wait=0.0)  # fmt: skip
    watcher.initial_sync()
    plain_store, plain_cache = qdrant_store(embedder, chunker, "plain"), MemoryCache()

    def plain() -> Any:
        return sync(read_documents([root]).documents, plain_store, chunker=chunker,
                    embedder=embedder, cache=plain_cache)  # fmt: skip

    def counters() -> tuple[float, ...]:
        names = ("rechunk_inputs_embedded_total", "rechunk_inputs_reused_total",
                 "rechunk_tokens_embedded_total")  # fmt: skip
        samples = [s for f in text_string_to_metric_families(metrics.text()) for s in f.samples]
        return tuple(sum(s.value for s in samples if s.name == name) for name in names)

    plain()
    before = counters()
    section = f"\n## Escalation contacts\n\n{paragraph('escalation')}\n"
    names = ["a.md", "b.md", "c.md", "d.txt"]
    for name in names:
        with (root / name).open("a", encoding="utf-8") as out:
            out.write(section)
    watcher.feed([root / name for name in names])
    report = watcher.step(time.monotonic() + 10)
    assert report is not None and report.published == 4 and report.sync is not None
    own = [r for r in report.sync.per_document if r.status == "changed"]
    assert sum(r.embedded for r in own) > report.sync.inputs["embedded"]  # shared inputs
    synced = plain()
    reused = synced.inputs["from_cache"] + synced.inputs["from_store"]
    assert (report.embedded, report.reused, report.tokens_embedded) == (
        synced.inputs["embedded"], reused, synced.tokens_embedded
    )
    after = counters()
    assert [b - a for a, b in zip(before, after, strict=True)] == [
        synced.inputs["embedded"], reused, synced.tokens_embedded
    ]


@pytest.mark.timeout(180)  # three starts of the command, each loading the model
def test_cli_watch_first_line_counts_what_its_sync_deleted(tmp_path: Path) -> None:
    """Files removed while no watcher ran, with --prune: the first sync deletes their
    documents, and the text summary says so (`2 deleted`) while the --json line said
    `deleted: 0` (it counted only what the sync had left to delete)."""
    import re

    docs = tmp_path / "docs"
    write_docs(docs, ["a", "b", "c", "d"])
    with CliWatcher(tmp_path, "docs", "--prune") as watcher:
        assert watcher.next_json("initial")["published"] == 4
        assert watcher.stop() == 0
    (docs / "a.md").unlink()
    (docs / "b.md").unlink()
    with CliWatcher(tmp_path, "docs", "--prune") as watcher:
        initial = watcher.next_json("initial")
        assert (initial["deleted"], initial["unchanged"], initial["published"]) == (2, 2, 0)
        assert watcher.stop() == 0
    (docs / "c.md").unlink()
    process = subprocess.Popen(
        [sys.executable, "-m", "rechunk.cli", "watch", "docs", "--prune"], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        lines = []
        for line in process.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("watching "):
                break
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = "".join(lines) + out
    assert process.returncode == 0, text
    assert re.search(r"documents +0 new, 0 changed, 1 unchanged, 1 deleted", text), text


def test_cli_watch_json_says_what_it_leaves_when_stopped(tmp_path: Path) -> None:
    """With --json a watcher stopped by SIGTERM printed no stop line (the text mode's
    `stopped; 3 changed file(s) not yet read`): only the last batch's `queued` hinted at
    it. It ends with a JSON line of its own saying what it leaves."""
    docs = tmp_path / "docs"
    write_docs(docs, ["a", "b", "c"])
    # a settle longer than the test: the edits wait, seen and not yet read
    with CliWatcher(tmp_path, "docs", "--settle", "600", "--metrics-port", "0") as watcher:
        watcher.next_json("initial")
        port = watcher.next_json("metrics")["port"]
        for name in ("a", "b", "c"):
            (docs / f"{name}.md").write_text(doc_text(name, 5), encoding="utf-8")
        url = f"http://127.0.0.1:{port}/metrics"
        depth = 0.0
        while depth < 3:  # the three changes seen (the test's timeout bounds the wait)
            time.sleep(0.1)
            with urllib.request.urlopen(url, timeout=10) as answer:
                page = answer.read().decode("utf-8")
            depth = next(float(line.split()[1]) for line in page.splitlines()
                         if line.startswith("rechunk_queue_depth "))  # fmt: skip
        assert watcher.stop() == 0
        rest = []
        with contextlib.suppress(queue.Empty):
            while not rest or rest[-1].get("kind") != "stopped":
                rest.append(json.loads(watcher.lines.get(timeout=10)))
    assert rest and rest[-1]["kind"] == "stopped", rest
    assert (rest[-1]["queued"], rest[-1]["pending"]) == (3, 0)
    assert not any(line.get("kind") == "batch" for line in rest)  # none was read
