"""``rechunk reindex [PATH...] --policy P``: build the collection's next generation with
another policy (or model), reusing vectors by input key, verify it, then switch the alias;
without PATH, every file and folder the manifest recorded is read as it was synced."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from rechunk.cli import compose
from rechunk.cli.manifest import copy_roots, record_roots
from rechunk.cli.options import (
    InputOptions,
    ModelOptions,
    StoreOptions,
    debug_option,
    engine_options,
    input_options,
    model_option,
    store_options,
)
from rechunk.cli.output import EXIT_OK, EXIT_PARTIAL, print_json
from rechunk.cli.reading import read_paths, read_recorded
from rechunk.cli.summary import file_fields, file_notes, progress_reporter
from rechunk.errors import ConfigError
from rechunk.sources.files import files_holding, printable
from rechunk.sync.stages import record_files_of, records_among, records_of

__all__ = ["ReindexArgs", "add_parser", "execute", "run"]


@dataclass(frozen=True)
class ReindexArgs(StoreOptions, ModelOptions, InputOptions):
    """``rechunk reindex``'s arguments."""

    paths: tuple[str, ...]
    policy: str
    prune: bool
    drop_old: bool
    engine: str
    ray_address: str | None
    json: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    from rechunk.chunking.policy import POLICIES

    p: argparse.ArgumentParser = sub.add_parser(
        "reindex",
        parents=[debug_option()],
        help="switch policies: build a new generation, then switch the alias",
        description="Build the collection <alias>__<policy> with the new policy (reusing "
        "vectors by input key from the cache and the live generation), verify it, then "
        "switch the Qdrant alias atomically. Without PATH, every file and folder synced "
        "into this store and collection is read. Reindex refuses to leave out a document "
        "of the live collection unless --prune is given.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders")
    p.add_argument(
        "--policy", choices=list(POLICIES), required=True, help="the new generation's policy"
    )
    store_options(p)
    model_option(p)
    input_options(p)
    p.add_argument(
        "--prune",
        action="store_true",
        help="let the new generation leave out documents of the live one that are not among "
        "the files read (without it, reindex refuses)",
    )
    p.add_argument(
        "--drop-old",
        action="store_true",
        help="after the switch, delete the previous generation and the older ones no alias "
        "points at (a generation another alias points at is kept)",
    )
    engine_options(p, "build the new generation on a Ray cluster, as sync --engine ray does")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(ReindexArgs.from_args(args))


def execute(args: ReindexArgs) -> int:
    from rechunk.chunking.policy import policy_for
    from rechunk.cli.sources import Chooser
    from rechunk.sync.generations import reindex

    if args.paths:
        files = read_paths(args.paths, args, args, complete=args.prune)
    else:
        from rechunk.sources.files import DEFAULT_GLOBS

        if args.glob != tuple(DEFAULT_GLOBS) or args.no_ignore or args.max_file_bytes:
            raise ConfigError(
                "--glob, --no-ignore and --max-file-bytes apply to the PATHs given; without "
                "PATH, every recorded file and folder is read as it was synced"
            )
        files = read_recorded(args, args)
    if not files.documents:
        raise ConfigError("no readable file matched: nothing to reindex")
    embedder = compose.open_embedder(args)
    chunker = policy_for(embedder, args.policy)
    engine = None
    if args.engine == "ray":  # the new generation built on a Ray cluster
        from rechunk.integrations.ray import engine_for_cli

        engine = engine_for_cli(args)
    with compose.cache_and_store(args, args.cache) as (cache, opened):
        compose.share_cache(embedder, cache)
        if opened.store.collection_info() is not None and not args.prune:
            # a record removed from a file read whole is not missing: it is gone (a
            # record by its stored points; a skipped file's records are missing), but
            # only where the file still holds records the collection has: where none is
            # read again, its records were read under other ids (another --id-field)
            live = opened.store.doc_ids()
            read = {doc.doc_id for doc in files.documents}
            removed = records_of(record_files_of(live & read, files.record_files))
            gone = live - read
            maybe = [d for d in gone if removed(d) and not files.covers(d)]
            missing = sorted(gone - records_among(opened.store, maybe))
            if missing:
                hints = []
                large = files_holding((name for name, _ in files.too_large), missing)
                if large:
                    hints.append(f"with a --max-file-bytes that reads {', '.join(large[:3])}")
                if any(map(records_of(files.record_files), missing)):  # read under other ids
                    hints.append("their records with the --id-field they were synced with")
                # a file read and skipped: this error is all a refused reindex prints
                skipped = dict(files.skipped)
                held = files_holding(skipped, missing)
                if held:
                    hints.append(f"{held[0]} was read and skipped: {skipped[held[0]]}")
                hint = f" ({'; '.join(hints)})" if hints else ""
                raise ConfigError(
                    f"{len(missing)} document(s) of the live collection are not among the files "
                    f"read ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}); "
                    f"pass the folders that hold them{hint}, or --prune to leave them out"
                )
        with progress_reporter(args.json) as progress:
            result = reindex(
                files.documents,
                opened.store,
                chunker,
                embedder,
                cache=cache,
                drop_old=args.drop_old,
                chunker_for=Chooser(embedder),
                engine=engine,
                progress=progress,
            )
        opened.check_on_disk()
        if args.paths:  # without, the recorded roots (and how each is read) stay as they are
            record_roots(args, args, files.roots, replace=True)
        if not result.switched:  # Chroma: later commands name the new generation
            copy_roots(args, result.collection)
    if args.json:
        print_json({**result.to_dict(), **file_fields(files)})
    else:
        report = result.sync
        print(f"rechunk reindex -> {result.collection} ({report.policy})")
        print(f"  documents     {report.documents['synced']} in the new generation")
        chunks = report.chunks
        # a generation built before holds documents gone since: the sync deletes them
        gone = (
            f", {chunks['deleted']} deleted ({report.documents['deleted']} document(s) "
            "gone since the generation was built)"
            if chunks["deleted"]
            else ""
        )
        print(
            f"  chunks        {chunks['added']} added, {chunks['kept']} kept (their points "
            f"there already), {chunks['updated']} updated (payload only){gone}"
        )
        print(
            f"  inputs        {report.inputs['embedded']} embedded, "
            f"{report.inputs['from_cache']} from cache, {report.inputs['from_store']} "
            "from the live generation"
        )
        print(f"  tokens        {report.tokens_embedded:,} embedded of {report.tokens_total:,}")
        print(f"  stale check   {report.stale_check}")
        if result.switched:
            print(
                f"  alias         {result.alias} -> {result.collection} "
                f"(was {result.previous or 'none'})"
            )
        else:
            print(
                f"  alias         none (this store has no aliases): point your application "
                f"at collection {result.collection!r}, and later rechunk commands with "
                f"--collection {result.collection}"
            )
            if args.drop_old:
                print(
                    f"  --drop-old    has no effect without aliases: {result.previous} was kept; "
                    "drop it once no reader uses it"
                )
        if result.dropped:
            print(f"  dropped       {result.dropped}")
        elif result.kept_for:
            print(
                f"  kept          {result.previous}: alias(es) {', '.join(result.kept_for)} "
                "still point at it"
            )
        elif result.switched and result.previous:
            print(
                f"  kept          {result.previous} (--drop-old drops it, and the older "
                "generations no alias points at)"
            )
        for name in result.leftovers_dropped:
            print(f"  dropped       {name} (an older generation no alias pointed at)")
        for name, text in file_notes(files, generation=True):
            print(f"  {name:<14}{printable(text)}")
    return EXIT_PARTIAL if files.skipped else EXIT_OK
