"""``rechunk sync PATH...``: chunk every document, embed only inputs that are new byte for
byte, publish, remove stale chunks and report what it cost."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

from rechunk.cli import compose
from rechunk.cli.manifest import record_roots
from rechunk.cli.options import (
    InputOptions,
    ModelOptions,
    StoreOptions,
    debug_option,
    engine_options,
    input_options,
    model_option,
    policy_option,
    store_options,
)
from rechunk.cli.output import EXIT_BACKEND, EXIT_OK, EXIT_PARTIAL, print_json, report_error
from rechunk.cli.reading import read_paths
from rechunk.cli.summary import (
    file_fields,
    file_notes,
    progress_reporter,
    sync_summary,
    unknown_notes,
)
from rechunk.errors import StaleCheckError
from rechunk.sources.files import printable

__all__ = ["SyncArgs", "add_parser", "execute", "run"]


@dataclass(frozen=True)
class SyncArgs(StoreOptions, ModelOptions, InputOptions):
    """``rechunk sync``'s arguments."""

    paths: tuple[str, ...]
    policy: str | None
    prune: bool
    dry_run: bool
    check_stored: bool
    reuse_from: tuple[str, ...]
    engine: str
    ray_address: str | None
    json: bool
    debug: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "sync",
        parents=[debug_option()],
        help="sync a folder of documents into a vector collection",
        description="Chunk every document, embed only inputs that are new byte for byte, "
        "publish, remove stale chunks and report what it cost.",
        epilog="exit codes: 0 done; 1 a file or folder skipped (--dry-run too); 2 usage or "
        "configuration; 3 store or embedder; 130 interrupted (docs/cli.md, Conventions)",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    store_options(p)
    policy_option(p)
    model_option(p)
    input_options(p)
    p.add_argument(
        "--prune",
        action="store_true",
        help="delete every document in the collection that this sync was not given (files "
        "gone or empty, or outside PATH); a file that exists but could not be read, or lies "
        "in a folder that could not be listed, keeps its documents",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan; embed and write nothing")
    p.add_argument(
        "--check-stored",
        action="store_true",
        help="also read back the vectors of the given documents' stored points and write "
        "again each one that fails the vector check (all zeros, NaN, near float32's limit): "
        "the repair of a collection an embedder answered badly into",
    )
    p.add_argument(
        "--reuse-from",
        action="append",
        default=[],
        metavar="URI",
        help="another store (read only) whose collection of the same --collection lends its "
        "vectors by input key, so that moving a collection to another store embeds nothing "
        "again: --store qdrant-edge:DIR --reuse-from qdrant:.rechunk/qdrant (repeatable)",
    )
    engine_options(p, "plan, embed and commit on a Ray cluster")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(SyncArgs.from_args(args))


def execute(args: SyncArgs) -> int:
    from rechunk.chunking.policy import policy_for
    from rechunk.chunking.unknown import unknown_documents
    from rechunk.cli.sources import Chooser, source_notes
    from rechunk.sync import SyncReport, sync

    started = time.perf_counter()
    files = read_paths(args.paths, args, args, complete=args.prune)
    reading = time.perf_counter() - started  # finding, reading and parsing the files
    failed: StaleCheckError | None = None
    if not files.documents:
        return _nothing_matched(args, files)
    embedder = compose.open_embedder(args)
    chooser = Chooser(embedder)
    model_id = embedder.model_id
    engine: Any = sync
    if args.engine == "ray":  # the same sync on a Ray cluster; its store checked first
        from rechunk.integrations.ray import engine_for_cli

        engine = engine_for_cli(args)
    # the collections lending vectors first: one that cannot lend creates nothing
    with (
        compose.lenders(args, args.reuse_from, model_id) as lenders,
        compose.cache_and_store(args, args.cache, dry_run=args.dry_run, model_id=model_id) as (
            cache,
            opened,
        ),
    ):
        compose.share_cache(embedder, cache)
        store = compose.follow_lender(opened.store, lenders, args.layout)
        chunker = policy_for(embedder, compose.policy_kind(args.policy, store, lenders))
        from rechunk.sync.generations import check_live_policy, open_live

        if args.dry_run:  # refused as the sync itself would be, nothing made
            check_live_policy(store, chunker, dimension=embedder.dimension)
        else:
            store = open_live(store, chunker, embedder.dimension)
        # files that exist but were not read (unreadable, or in a folder that could not
        # be listed) keep their documents; an empty file's are pruned like a deleted one's
        keep = files.kept_in(store, args.prune)
        with progress_reporter(args.json) as progress:
            try:
                report = engine(
                    files.documents,
                    store,
                    chunker=chunker,
                    embedder=embedder,
                    cache=cache,
                    prune=args.prune,
                    keep=keep,
                    dry_run=args.dry_run,
                    progress=progress,
                    chunker_for=chooser,
                    check_stored=args.check_stored,
                    reuse_from=lenders,
                    complete_files=files.record_files,
                )
            except StaleCheckError as exc:  # written, but not exact: report, then exit 3
                if not isinstance(exc.report, SyncReport):
                    raise
                report, failed = exc.report, exc
        if not args.dry_run:
            opened.check_on_disk()
            record_roots(args, args, files.roots, replace=args.prune)
            advice = compose.size_advice(store)
            if advice:  # in place of the store client's own warning
                print(f"rechunk: warning: {advice}", file=sys.stderr)
    report.documents["skipped"] += len(files.skipped)
    report.seconds = {"read": reading, **report.seconds}
    # the documents this sync wrote chunks of, checked for text the model cannot read
    written = {rep.doc_id for rep in report.per_document if rep.status in ("new", "changed")}
    unknown = unknown_documents(
        getattr(embedder, "tokenizer", None), (d for d in files.documents if d.doc_id in written)
    )
    if args.json:
        data = {**report.to_dict(), **file_fields(files), "no_grammar": chooser.fields()}
        data["unknown_tokens"] = [{"doc_id": d, "share": round(s, 4)} for d, s in unknown]
        data["model_loaded"] = embedder.loaded
        print_json(data)
    else:
        notes = source_notes(files, report, chooser) + file_notes(files, args.prune)
        notes += unknown_notes(unknown)
        sync_summary(report, args.prune, notes)
    if failed is not None:
        report_error(failed, args.debug)
        return EXIT_BACKEND
    return EXIT_PARTIAL if files.skipped else EXIT_OK


def _nothing_matched(args: SyncArgs, files: Any) -> int:
    """Warn that no readable file matched, and list the files skipped."""
    from rechunk.cli.sources import source_notes
    from rechunk.sources.files import DEFAULT_GLOBS

    # the patterns only when given: "matching *" read as if the user had typed one
    matching = "" if tuple(args.glob) == DEFAULT_GLOBS else f" matching {' '.join(args.glob)}"
    pruning = (
        " (--prune deletes nothing when no file matched: a wrong path must not empty the "
        "collection; to empty it on purpose, drop the collection)"
        if args.prune
        else ""
    )
    print(
        printable(
            f"rechunk: warning: no readable file{matching} under "
            f"{' '.join(args.paths)}; nothing was written{pruning}"
        ),
        file=sys.stderr,
    )
    for name, text in [*source_notes(files, None, None), *file_notes(files)]:
        print(f"rechunk: {name} {printable(text)}", file=sys.stderr)
    if args.json:  # a reader of stdout gets an answer too, with a sync report's counts
        from rechunk.sync import SyncReport

        counts = SyncReport(args.collection, "", "", "upsert-then-delete", args.dry_run)
        counts.documents["skipped"] = len(files.skipped)
        print_json({"nothing_matched": True, "written": False, **counts.to_dict(),
                    **file_fields(files)})  # fmt: skip
    return EXIT_PARTIAL if files.skipped else EXIT_OK
