"""``rechunk watch PATH...``: sync folders, then keep syncing them as their files change.

The command composes what ``rechunk sync`` composes (the same reading of files, embedder,
cache, store and collection checks, from :mod:`rechunk.cli`) around a
:class:`rechunk.live.Watcher`, which keeps the model, tokenizer and store open between
batches. SIGTERM or Ctrl-C finishes the batch under way and exits 0; a second signal
exits at once (130), and the next start repairs what it left half-done, as a re-run of
``sync`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rechunk.cli.options import (
    InputOptions,
    ModelOptions,
    StoreOptions,
    debug_option,
    input_options,
    model_option,
    policy_option,
    store_options,
)
from rechunk.cli.summary import listed
from rechunk.errors import ConfigError

__all__ = ["WatchArgs", "add_parser", "execute", "freshness_line", "freshness_status", "run"]


@dataclass(frozen=True)
class WatchArgs(StoreOptions, ModelOptions, InputOptions):
    """``rechunk watch``'s arguments."""

    paths: tuple[str, ...]
    policy: str | None
    prune: bool
    settle: float
    metrics_port: int | None
    metrics_addr: str
    log: str | None
    log_raw_ids: bool
    json: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``watch`` to the ``rechunk`` subcommands, with the options of ``sync``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "watch",
        parents=[debug_option()],
        help="sync folders, then keep syncing them as their files change",
        description="An initial sync of the folders, then a sync of each batch of changed "
        "files, with the model and store kept open. A file is read once it has stopped "
        "changing; a deleted file's chunks are deleted; a moved file keeps its vectors. "
        "A store that cannot be reached holds the queue and is retried. Ctrl-C or SIGTERM "
        "finishes the current batch and exits 0; a second one exits at once.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="folders")
    store_options(p)
    policy_option(p)
    model_option(p)
    input_options(p)
    p.add_argument(
        "--prune",
        action="store_true",
        help="the initial sync deletes every document of the collection not under PATH "
        "(as sync --prune), and an emptied file's chunks are deleted",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=0.1,
        metavar="SECONDS",
        help="how long a file must stay unchanged (size and mtime) before it is read "
        "(default %(default)s)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics on this port (0: any free one); no text, path or "
        "document id is in them",
    )
    p.add_argument(
        "--metrics-addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address the metrics are served on (default %(default)s)",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        default=None,
        help="append one JSON line per document revision and stage (accepted, published, "
        "retrievable, failed) with opaque ids: the doc_id hashed with the collection's "
        "salt",
    )
    p.add_argument(
        "--log-raw-ids",
        action="store_true",
        help="write doc_ids in --log as they are, not hashed",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON line per batch (and one when it stops)"
    )
    p.set_defaults(func=run)
    return p


@contextlib.contextmanager
def _signals(stop: threading.Event) -> Iterator[None]:
    """The first SIGINT or SIGTERM sets ``stop``; the second raises KeyboardInterrupt."""

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(
            "rechunk watch: stopping after the current batch (a second signal stops at once)",
            file=sys.stderr,
            flush=True,
        )

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _batch_lines(report: Any) -> list[str]:
    """A line per batch for a terminal (counts and durations), and one per error."""
    clock = time.strftime("%H:%M:%S")
    if report.retry_in is not None:
        kind, text = report.errors[0] if report.errors else ("error", "")
        return [
            f"{clock} batch of {report.files} changed path(s) failed ({kind}: {text}); "
            f"queued again, next try in {report.retry_in:.1f} s"
        ]
    parts = [
        f"{report.files} file(s)",
        f"{report.published} published",
        f"{report.deleted} deleted",
    ]
    if report.unchanged:
        parts.append(f"{report.unchanged} unchanged")
    if report.failed:
        parts.append(f"{report.failed} failed")
    parts.append(f"inputs {report.embedded} embedded, {report.reused} reused")
    if report.lag:
        lag = max(report.lag)
        parts.append(f"retrievable {report.retrievable} (at most {lag:.2f} s after save)")
    if report.stale:
        parts.append(f"{report.stale} still answered by an earlier revision")
    parts.append(f"{report.pending} pending")
    if report.queued:  # behind: changes seen, not yet read
        parts.append(f"{report.queued} queued")
    if report.too_large:  # a file grown past --max-file-bytes no longer syncs: say so
        shown = listed(report.too_large, 3)  # printable already (read_documents)
        parts.append(f"too large {shown} (over --max-file-bytes: not read, what they had kept)")
    return [f"{clock} {report.kind}: " + ", ".join(parts)] + [
        f"  {kind}: {text}" for kind, text in report.errors
    ]


def run(args: argparse.Namespace) -> int:
    return execute(WatchArgs.from_args(args))


def execute(args: WatchArgs) -> int:
    from rechunk._optional import require
    from rechunk.chunking.policy import policy_for
    from rechunk.cli import compose
    from rechunk.cli.manifest import read_manifest, recorded_roots
    from rechunk.cli.output import EXIT_OK
    from rechunk.cli.reading import files_elsewhere, read_paths
    from rechunk.cli.sources import Chooser
    from rechunk.live import LiveMetrics, check_not_nested
    from rechunk.live.events import FileEvents
    from rechunk.sync.generations import open_live

    for path in args.paths:
        if not Path(path).is_dir():
            raise ConfigError(f"{path} is not a folder: watch takes folders")
    check_not_nested(args.paths)  # before anything is read, loaded or made
    if args.settle < 0:
        raise ConfigError("--settle must be 0 or more seconds")
    require("watchfiles", "watch")  # the extra's packages, before anything is opened
    if args.metrics_port is not None:
        require("prometheus_client", "watch", "prometheus-client")
    _check_state_dir()
    recorded = recorded_roots(read_manifest(), args)  # read once, for both uses below
    # the folders are watched before they are read: what changes while they are read, the
    # model loads and the store opens (a minute for a large embedded store) is among the
    # first events the watcher takes, not lost between the read and the watcher's start
    events = FileEvents([str(Path(path).resolve()) for path in args.paths])
    events.start()
    server = None
    try:
        files = read_paths(args.paths, args, args, complete=args.prune, recorded=recorded)
        embedder = compose.open_embedder(args)
        chooser = Chooser(embedder)
        # metrics are served before the store is opened: a port in use changes nothing
        metrics = LiveMetrics() if args.metrics_port is not None else None
        server = None if metrics is None else _serve(metrics, args)
        with compose.cache_and_store(args, args.cache, model_id=embedder.model_id) as (
            cache,
            opened,
        ):
            compose.share_cache(embedder, cache)
            chunker = policy_for(embedder, compose.policy_kind(args.policy, opened.store))
            store = open_live(opened.store, chunker, embedder.dimension)
            elsewhere = None if args.prune else files_elsewhere(recorded, files.roots)
            undone = _watch(
                args,
                files,
                events,
                store,
                embedder,
                chunker,
                chooser,
                cache,
                metrics,
                server,
                elsewhere,
                opened.check_on_disk,
            )
    finally:
        events.stop()
        if server is not None:
            server.stop()
    queued, pending = undone
    if args.json:  # the stop line as one more JSON line, with what it leaves
        stopped = {"time": round(time.time(), 3), "kind": "stopped", "queued": queued,
                   "pending": pending}  # fmt: skip
        print(json.dumps(stopped), flush=True)
    else:
        print(f"rechunk watch: stopped{_left_undone(queued, pending)}", flush=True)
    return EXIT_OK


def _watch(
    args: WatchArgs,
    files: Any,
    events: Any,
    store: Any,
    embedder: Any,
    chunker: Any,
    chooser: Any,
    cache: Any,
    metrics: Any,
    server: Any,
    elsewhere: Any,
    check_on_disk: Callable[[], None],
) -> tuple[int, int]:
    """The initial sync of ``files`` (read after ``events`` started), then batches until a
    signal stops the watcher; returns what it leaves undone, for the line that says it
    stopped: the changed files not yet read and the revisions not yet retrievable."""
    from rechunk.cli.manifest import record_roots
    from rechunk.cli.options import STATE_DIR
    from rechunk.live import DiagnosisLog, Freshness, Watcher
    from rechunk.live.freshness import freshness_path
    from rechunk.sources.files import printable

    key = f"{args.store} {args.collection}"
    stop = threading.Event()
    freshness = Freshness(freshness_path(STATE_DIR, key), key)
    diagnosis = (
        DiagnosisLog(args.log, freshness.salt, hash_ids=not args.log_raw_ids) if args.log else None
    )
    watcher = Watcher(
        args.paths,
        store,
        chunker=chunker,
        embedder=embedder,
        cache=cache,
        globs=args.glob,
        gitignore=not args.no_ignore,
        read_options={
            "fmt": args.format,
            "options": args.parse,
            "include_generated": args.include_generated,
            "max_bytes": args.max_file_bytes,
        },
        chunker_for=chooser,
        prune=args.prune,
        settle=args.settle,
        freshness=freshness,
        metrics=metrics,
        diagnosis=diagnosis,
        elsewhere=elsewhere,
    )
    try:
        with _signals(stop):
            watcher.start(events)
            initial = watcher.initial_sync(files)
            check_on_disk()
            record_roots(args, args, files.roots, replace=args.prune)
            _print_initial(args, initial, files)
            where = (
                f"; metrics on http://{args.metrics_addr}:{server.port}/metrics"
                if server is not None
                else ""
            )
            if not args.json:
                print(
                    printable(f"watching {len(args.paths)} folder(s){where}; Ctrl-C stops"),
                    flush=True,
                )
            elif server is not None:
                print(json.dumps({"kind": "metrics", "port": server.port}), flush=True)

            def on_batch(report: Any) -> None:
                check_on_disk()  # an embedded store's folder removed: stop (exit 3)
                if args.json:
                    print(json.dumps({"time": round(time.time(), 3), **report.to_dict()}))
                else:
                    for line in _batch_lines(report):
                        print(printable(line))
                sys.stdout.flush()

            watcher.serve(stop, on_batch)
    finally:
        # with the changes made during the last batch (stopping the file watcher kept
        # the events no batch took)
        undone = (watcher.queue_state()[0], len(watcher.freshness.pending))
        watcher.stop_watching()
        if diagnosis is not None:
            diagnosis.close()
    return undone


def _check_state_dir() -> None:
    """A :class:`ConfigError` when the working folder's ``.rechunk/`` cannot be written: a
    watcher keeps its revisions' freshness there (a sync from a read-only checkout does
    without it; a watcher would fail at its first batch)."""
    import tempfile

    from rechunk.cli.options import STATE_DIR, make_state_dir

    try:
        make_state_dir()
        with tempfile.TemporaryFile(dir=STATE_DIR):
            pass
    except OSError as exc:
        raise ConfigError(
            f"rechunk watch keeps its state in {STATE_DIR}/ of the working folder, which "
            f"cannot be written here ({exc.strerror or exc}): run it from a writable folder "
            "and give the folders to watch as paths"
        ) from exc


def _left_undone(queued: int, pending: int) -> str:
    """What a stopping watcher leaves: changed files not yet read and accepted revisions
    not yet retrievable (the next start syncs and verifies both)."""
    parts = [f"{queued} changed file(s) not yet read"] if queued else []
    if pending:
        parts.append(f"{pending} revision(s) not yet retrievable")
    if not parts:
        return ""
    return f"; {' and '.join(parts)}: the next start syncs them"


def _serve(metrics: Any, args: WatchArgs) -> Any:
    """The metrics endpoint of ``--metrics-port`` / ``--metrics-addr``; a port or address
    that cannot be served is a usage error naming them."""
    from rechunk.live import serve_metrics

    try:
        return serve_metrics(metrics, args.metrics_port or 0, args.metrics_addr)
    except (OSError, OverflowError, ValueError) as exc:
        raise ConfigError(
            f"--metrics-port {args.metrics_port} --metrics-addr {args.metrics_addr}: cannot "
            f"serve metrics there ({exc}); pick a free port (0: any) or another address"
        ) from None


def _print_initial(args: WatchArgs, initial: Any, files: Any) -> None:
    from rechunk.cli.sources import source_notes
    from rechunk.cli.summary import file_fields, file_notes, sync_summary

    if args.json:  # what the files were, as sync's --json says it
        data = {"time": round(time.time(), 3), **initial.to_dict(), **file_fields(files)}
        print(json.dumps(data), flush=True)
        return
    if initial.sync is not None:
        notes = source_notes(files, initial.sync, None) + file_notes(files, args.prune)
        sync_summary(initial.sync, args.prune, notes)  # its deleted: files gone among them
    else:  # no sync ran (nothing to read): the documents of files gone while it was down
        print(f"rechunk watch: no readable file under {' '.join(args.paths)} yet")
        if initial.deleted:
            print(f"  {'files gone':<14}{initial.deleted} document(s) deleted (removed while down)")
    print(f"  {'retrievable':<14}{initial.retrievable} verified, {initial.pending} pending")
    sys.stdout.flush()


def freshness_status(args: StoreOptions) -> dict[str, Any] | None:
    """What ``rechunk status`` shows of the watchers' freshness state for ``--store`` and
    ``--collection`` (None when no watcher ever ran on them here)."""
    from rechunk.cli.options import STATE_DIR
    from rechunk.live.freshness import freshness_path, read_freshness

    path = freshness_path(STATE_DIR, f"{args.store} {args.collection}")
    return read_freshness(path) if path.exists() else None


def freshness_line(fresh: dict[str, Any]) -> str:
    """The status line of :func:`freshness_status`'s answer."""
    if not fresh["unretrievable"]:
        return "freshness: every accepted revision is retrievable"
    stale = f", {fresh['stale']} still answered by an earlier revision" if fresh["stale"] else ""
    return (
        f"freshness: {fresh['unretrievable']} accepted revision(s) not yet retrievable, the "
        f"oldest accepted {fresh['oldest_age_seconds']:.1f} s ago{stale}"
    )
