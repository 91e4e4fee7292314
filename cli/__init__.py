"""The ``rechunk`` command line.

It composes the parts (stores from :mod:`rechunk.adapters.uri`, embedders from
:mod:`rechunk.integrations.uri`), so it lives beside them, outside the core package
(``import rechunk`` loads neither), as the subpackage ``rechunk.cli`` in ``cli/``.

Exit codes: 0 ok, 1 partial failure (a file or folder skipped), 2 usage or
configuration error, 3 store or embedder error (a failed stale check too). Errors
print one line (a usage error too: the full usage with ``--help``); the traceback
only with ``--debug``. Names are printed through
:func:`rechunk.files.printable` (control characters escaped).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from rechunk.chunking.chunk import Chunker
from rechunk.cli.sources import add_source_options
from rechunk.errors import (
    CacheError,
    ConfigError,
    EmbeddingError,
    InputError,
    MissingDependencyError,
    RechunkError,
    StaleCheckError,
    StoreError,
)
from rechunk.files import printable, read_text_file

__all__ = ["main"]

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_BACKEND = 0, 1, 2, 3
CHUNKER_NAMES = ("fixed", "recursive", "cdc", "structured")
#: the code policy: measured where the language is known (a pair's lang, a file's suffix)
CODE_CHUNKER = "code"


def make_chunker(name: str, tokenizer: Any = None, language: str | None = None) -> Chunker:
    """A chunker with the study's default parameters (``code``: of ``language``)."""
    from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker, StructuredChunker

    if name == CODE_CHUNKER:
        from rechunk.chunkers.code import CodeChunker

        if language is None:
            raise ConfigError("the code chunker needs a language (--lang, or a file suffix)")
        return CodeChunker(language, tokenizer=tokenizer)

    factories: dict[str, Callable[..., Chunker]] = {
        "fixed": FixedChunker,
        "recursive": RecursiveChunker,
        "cdc": CDCChunker,
        "structured": StructuredChunker,
    }
    if name not in factories:
        raise ConfigError(f"unknown chunker {name!r}; choose from {', '.join(factories)}")
    return factories[name](tokenizer=tokenizer)


# -- measure ------------------------------------------------------------------------------


def measure_pair(old: str, new: str, chunkers: Sequence[tuple[str, Chunker]]) -> dict[str, Any]:
    """The ``rechunk measure`` report for one revision pair."""
    from rechunk.chunking.measure import edit_band, edit_fraction, recompute_fraction

    fraction = edit_fraction(old, new)
    rows = []
    for name, chunker in chunkers:
        old_chunks, new_chunks = chunker.chunk(old), chunker.chunk(new)
        old_inputs = {c.text for c in old_chunks}
        distinct: dict[str, int] = {}
        for c in new_chunks:
            distinct.setdefault(c.text, c.tokens)
        rows.append(
            {
                "chunker": name,
                "policy": chunker.policy_id,
                "recompute_fraction": recompute_fraction(old_chunks, new_chunks),
                "chunks_old": len(old_chunks),
                "chunks_new": len(new_chunks),
                "tokens_to_embed": sum(t for s, t in distinct.items() if s not in old_inputs),
                "tokens_total": sum(distinct.values()),
            }
        )
    return {"edit_fraction": fraction, "edit_band": edit_band(fraction), "chunkers": rows}


def _cmd_measure(args: argparse.Namespace) -> int:
    from rechunk.chunkers.code_languages import language_for

    old = read_text_file(Path(args.old))
    new = read_text_file(Path(args.new))
    language = args.lang or language_for(args.new) or language_for(args.old)
    names = args.chunker or ["all"]
    if "all" in names:  # the code policy beside the others when the files are code
        names = [*CHUNKER_NAMES, *([CODE_CHUNKER] if language else [])]
    chunkers = [
        (name, make_chunker(name, args.tokenizer, language)) for name in dict.fromkeys(names)
    ]
    report = measure_pair(old, new, chunkers)
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"edit fraction: {report['edit_fraction']:.2%} ({report['edit_band']})")
    header = f"{'chunker':<10} {'R_c':>7} {'chunks old/new':>15} {'tokens to embed / total':>24}"
    print(header)
    for row in report["chunkers"]:
        counts = f"{row['chunks_old']}/{row['chunks_new']}"
        tokens = f"{row['tokens_to_embed']:,} / {row['tokens_total']:,}"
        print(f"{row['chunker']:<10} {row['recompute_fraction']:>7.1%} {counts:>15} {tokens:>24}")
    return EXIT_OK


# -- shared options -----------------------------------------------------------------------

STATE_DIR = Path(".rechunk")
DEFAULT_CACHE = STATE_DIR / "cache.sqlite"
MANIFEST = STATE_DIR / "manifest.json"  # the roots each store and collection was synced from
DEFAULT_COLLECTION = "rechunk"


def _open(args: argparse.Namespace, *, create: bool = True, dry_run: bool = False) -> Any:
    """The store of ``--store``; without ``create``, a missing store is a StoreError.

    A dry run plans against an empty in-memory store when nothing is stored yet.
    """
    from rechunk.adapters.uri import open_store, store_exists

    uri = args.store
    if dry_run and not store_exists(uri):
        uri = "qdrant::memory:"
    return open_store(uri, args.collection, layout=args.layout or "langchain", create=create)


@contextlib.contextmanager
def _lenders(args: argparse.Namespace, model_id: str) -> Iterator[list[Any]]:
    """The collections of ``--reuse-from``, each opened read-only on ``--collection`` (in
    the layout it was written in): a sync copies their vectors by input key, so that a
    collection moved to another store embeds nothing again. Closed on the way out."""
    from rechunk.adapters.uri import open_store

    opened: list[Any] = []
    lenders: list[Any] = []
    try:
        for uri in getattr(args, "reuse_from", None) or []:
            if uri == args.store:
                raise ConfigError(f"--reuse-from {uri} is the --store itself")
            layout = args.layout or "langchain"
            source = open_store(uri, args.collection, layout=layout, create=False)
            opened.append(source)
            lender = source.store
            other = "llamaindex" if layout == "langchain" else "langchain"
            if args.layout is None and _written_in(lender, other):
                lender = type(lender)(lender.client, lender.collection, other)
            info = lender.collection_info()
            if info is None or model_id not in info.model_ids:
                held = "nothing" if info is None else ", ".join(sorted(info.model_ids))
                raise ConfigError(
                    f"--reuse-from {uri}: collection {args.collection!r} there holds "
                    f"{held or 'no rechunk points'}, not vectors of {model_id.split(';')[0]}: "
                    "nothing could be reused from it"
                )
            lenders.append(lender)
        yield lenders
    finally:
        for source in opened:
            source.close()


def _written_in(store: Any, layout: str) -> bool:
    """Whether ``store``'s collection holds rechunk points in ``layout``."""
    try:
        info = type(store)(store.client, store.collection, layout).collection_info()
    except StoreError:
        return False
    return info is not None and bool(info.model_ids)


def _check_collection(store: Any, model_id: str | None = None) -> None:
    """Refuse a collection written in the other ``--layout``, or (given) by another model.

    Writing it would rewrite its points in the other payload format; reading it
    would find no document, or score mismatched vectors.
    """
    other = "llamaindex" if store.layout == "langchain" else "langchain"
    mismatch = ConfigError(
        f"collection {store.collection!r} was written with --layout {other}, not "
        f"{store.layout}; a collection keeps one layout: pass --layout {other}"
    )
    try:
        info = store.collection_info()
    except StoreError:
        if _written_in(store, other):
            raise mismatch from None
        raise
    if info is None:
        return
    if info.points and not info.model_ids and _written_in(store, other):
        raise mismatch
    others = sorted(info.model_ids - {model_id}) if model_id is not None else []
    if others:
        raise ConfigError(
            f"collection {store.collection!r} was written by {others[0].split(';')[0]}, not "
            f"{str(model_id).split(';')[0]}; pass the --model it was synced with "
            "(or its --embedder; rechunk reindex --model changes it)"
        )


def _embedder(args: argparse.Namespace) -> Any:
    """The embedder of ``--embedder`` / ``--model`` / ``--embed-url`` (see
    :mod:`rechunk.integrations.uri`); nothing is loaded until something is embedded."""
    from rechunk.integrations.uri import open_embedder

    return open_embedder(
        getattr(args, "embedder", None),
        model=getattr(args, "model", None),
        embed_url=getattr(args, "embed_url", None),
    )


def _share_cache(embedder: Any, cache: Any) -> None:
    from rechunk.integrations.uri import share_cache

    share_cache(embedder, cache)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _interactive(args: argparse.Namespace) -> bool:
    return sys.stdout.isatty() and not getattr(args, "json", False)


# -- sync ---------------------------------------------------------------------------------


def _read_manifest() -> dict[str, Any]:
    """The manifest of earlier syncs (``{}`` when there is none or it is unreadable)."""
    try:
        manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


class _Source(NamedTuple):
    """How a recorded file or folder was read: its globs, and whether ``.gitignore`` applied."""

    globs: list[str]
    gitignore: bool = True


def _recorded_roots(manifest: dict[str, Any], args: argparse.Namespace) -> dict[str, _Source]:
    """The files and folders (with how they were read) synced into this store and collection."""
    try:
        entry = manifest[f"{args.store} {args.collection}"]
        roots = entry["roots"]
        if isinstance(roots, list):  # the first format: the last sync's roots only
            return {str(root): _Source(list(entry["globs"])) for root in roots}
        return {
            str(root): _Source(list(how))  # the second format: root -> globs
            if isinstance(how, list)
            else _Source(list(how["globs"]), bool(how["gitignore"]))
            for root, how in roots.items()
        }
    except (KeyError, TypeError, AttributeError):
        return {}


def _record_roots(args: argparse.Namespace, roots: list[str], *, replace: bool) -> None:
    """Remember every folder that fed a collection, for ``rechunk reindex`` without paths.

    Roots accumulate over syncs (the latest last); ``replace`` keeps only these,
    after a sync or reindex that made the collection hold exactly their documents.
    """
    manifest = _read_manifest()
    recorded = {} if replace else _recorded_roots(manifest, args)
    for root in roots:
        recorded.pop(root, None)
        recorded[root] = _Source(list(args.glob), not args.no_ignore)
    manifest[f"{args.store} {args.collection}"] = {
        "roots": {root: how._asdict() for root, how in recorded.items()}
    }
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = MANIFEST.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    tmp.replace(MANIFEST)


def _synced_folders(args: argparse.Namespace) -> list[str]:
    """The folders synced into this store and collection before: a file named directly
    keeps the doc_id it has under one of them."""
    return [root for root in _recorded_roots(_read_manifest(), args) if Path(root).is_dir()]


def _read_paths(args: argparse.Namespace) -> Any:
    """The documents under the paths given, read as the options say."""
    from rechunk.cli.sources import parse_options
    from rechunk.files import read_documents

    return read_documents(
        args.paths,
        args.glob,
        within=_synced_folders(args),
        gitignore=not args.no_ignore,
        fmt=args.format,
        options=parse_options(args),
    )


def _file_fields(files: Any) -> dict[str, Any]:
    """What file discovery left out, for --json reports."""
    return {
        "skipped_files": [{"doc_id": d, "reason": r} for d, r in files.skipped],
        "empty_files": files.empty,
        "ignored": files.ignored,
        "links_not_followed": files.links,
        "unsupported_files": dict(sorted(files.unsupported.items())),
    }


def _file_notes(files: Any, prune: bool | None = None) -> list[tuple[str, str]]:
    """What file discovery left out, as (name, text) rows: files skipped, empty files (with
    what happens to their documents, unless ``prune`` is None), what .gitignore excluded,
    and links to folders not followed."""
    rows = [("skipped", f"{doc_id}: {reason}") for doc_id, reason in files.skipped]
    for doc_id in files.empty:
        if prune is None:
            rows.append(("empty", doc_id))
        else:
            fate = "its chunks are pruned" if prune else "its chunks stay until a sync with --prune"
            rows.append(("empty", f"{doc_id}: {fate}"))
    if files.ignored:
        folders = sum(name.endswith("/") for name in files.ignored)
        counts = f"{len(files.ignored) - folders} matching file(s) and {folders} folder(s)"
        rows.append(("ignored", f"{counts} excluded by .gitignore (--no-ignore reads them)"))
    rows.extend(
        ("not followed", f"{link} (a symbolic link to a folder; pass its target)")
        for link in files.links
    )
    return rows


def _read_recorded(args: argparse.Namespace) -> Any:
    """The documents under every recorded root; a later sync's file wins a shared doc_id."""
    from rechunk.cli.sources import parse_options
    from rechunk.files import FileSet, read_documents

    roots = _recorded_roots(_read_manifest(), args)
    if not roots:
        raise ConfigError(
            "no PATH given and no earlier `rechunk sync` recorded for this store and "
            "collection: pass the folders to reindex"
        )
    documents: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    out = FileSet(roots=list(roots))
    folders = [root for root in roots if Path(root).is_dir()]
    for root, how in roots.items():
        if not Path(root).exists():
            continue  # removed since: its documents count as missing below
        files = read_documents(
            [root],
            how.globs,
            within=folders,
            gitignore=how.gitignore,
            fmt=args.format,
            options=parse_options(args),
        )
        documents.update((doc.doc_id, doc) for doc in files.documents)
        skipped.update(files.skipped)
        out.empty.extend(files.empty)
        out.unlisted.extend(files.unlisted)
        out.ignored += files.ignored
        out.links.extend(files.links)
        out.unsupported.update(files.unsupported)
    out.documents = list(documents.values())
    out.skipped = [(doc_id, why) for doc_id, why in skipped.items() if doc_id not in documents]
    return out


def _progress_bar(enabled: bool) -> Any:
    """A rich progress bar (or a no-op) and the callback sync reports to."""
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), transient=True
    )


def _sync_summary(report: Any, pruned: bool, notes: list[tuple[str, str]]) -> None:
    d, c, i = report.documents, report.chunks, report.inputs
    rows = []
    docs = (
        f"{d['new']} new, {d['changed']} changed, {d['unchanged']} unchanged, "
        f"{d['deleted']} deleted"
    )
    if d["skipped"]:
        docs += f", {d['skipped']} skipped"
    rows.append(("documents", docs))
    if report.chunks_not_given and not pruned:
        rows.append(
            (
                "not given",
                f"{report.chunks_not_given:,} chunks of other documents stay in the "
                "collection (--prune deletes the documents this sync was not given)",
            )
        )
    rows.append(
        (
            "chunks",
            f"{c['added']} added, {c['kept']} kept, {c['updated']} updated "
            f"(payload only), {c['deleted']} deleted",
        )
    )
    rows.append(
        (
            "inputs",
            f"{i['embedded']} embedded, {i['from_cache']} from cache, "
            f"{i['from_store']} from the collection",
        )
    )
    share = report.tokens_embedded / report.tokens_total if report.tokens_total else 0.0
    rows.append(
        ("tokens", f"{report.tokens_embedded:,} embedded of {report.tokens_total:,} ({share:.1%})")
    )
    if d["changed"]:
        rows.append(
            (
                "R_c",
                f"{report.recompute_fraction:.1%} of the changed documents' tokens were new inputs",
            )
        )
    if report.reindex_amplification is not None:
        rows.append(
            ("amplification", f"{report.reindex_amplification:.1f} bytes embedded per changed byte")
        )
    rows.append(("time", ", ".join(f"{k} {v:.2f}s" for k, v in report.seconds.items())))
    rows.append(("stale check", report.stale_check))
    rows.append(("policy", report.policy))
    rows.append(("model", report.model_id.split(";")[0]))
    title = f"rechunk sync -> {printable(report.collection)}"
    print(title + (" (dry run: nothing was written)" if report.dry_run else ""))
    for name, value in [*rows, *notes]:
        print(f"  {name:<14}{printable(value)}")
    if report.dry_run:
        print("plan:")
        for doc in report.per_document:
            if doc.status == "unchanged":
                continue
            counts = f"+{doc.added} ~{doc.updated} -{doc.deleted} chunks"
            print(
                f"  {doc.status:<9} {printable(doc.doc_id)}: {counts}, "
                f"{doc.embedded} inputs to embed ({doc.tokens_embedded:,} tokens)"
            )


def _open_cache(path: str, *, dry_run: bool = False) -> Any:
    """The SQLite cache of ``--cache`` (a dry run only reads one that exists)."""
    from rechunk.reuse.cache import SQLiteCache

    try:
        if dry_run:
            return SQLiteCache(path, readonly=True) if Path(path).exists() else None
        return SQLiteCache(path)
    except CacheError as exc:
        raise ConfigError(f"--cache {path}: {exc}") from exc


@contextlib.contextmanager
def _cache_and_store(
    args: argparse.Namespace, *, dry_run: bool = False, model_id: str | None = None
) -> Iterator[tuple[Any, Any]]:
    """``--cache`` and ``--store`` (collection checked: its layout, and given ``model_id``
    its model), both closed on the way out.

    The cache opens first, so that a bad ``--cache`` creates nothing in the store. If
    the store then fails to open, or its collection is refused, the cache file (and
    folder) this call created is removed again: a failed first run leaves no state.
    """
    path = Path(args.cache)
    created = [p for p in (path.parent, path) if not p.exists()]
    cache = _open_cache(args.cache, dry_run=dry_run)
    try:
        opened = _open(args, create=not dry_run, dry_run=dry_run)
        try:
            _check_collection(opened.store, model_id)
        except BaseException:
            opened.close()
            raise
    except BaseException:
        if cache is not None:
            cache.close()
        for made in reversed(created):
            with contextlib.suppress(OSError):
                if made.is_dir():
                    made.rmdir()  # only when empty
                else:
                    for suffix in ("", "-wal", "-shm", "-journal"):
                        Path(f"{made}{suffix}").unlink(missing_ok=True)
        raise
    try:
        yield cache, opened
    finally:
        opened.close()
        if cache is not None:
            cache.close()


def _nothing_matched(args: argparse.Namespace, files: Any) -> int:
    """Warn that no readable file matched, and list the files skipped."""
    from rechunk.cli.sources import source_notes

    pruning = (
        " (--prune deletes nothing when no file matched: a wrong path must not empty the "
        "collection; to empty it on purpose, drop the collection)"
        if args.prune
        else ""
    )
    print(
        printable(
            f"rechunk: warning: no readable file matching {' '.join(args.glob)} under "
            f"{' '.join(args.paths)}; nothing was written{pruning}"
        ),
        file=sys.stderr,
    )
    for name, text in [*source_notes(files, None, None), *_file_notes(files)]:
        print(f"rechunk: {name} {printable(text)}", file=sys.stderr)
    if args.json:  # a reader of stdout gets an answer too
        _print_json({"nothing_matched": True, "written": False, **_file_fields(files)})
    return EXIT_PARTIAL if files.skipped else EXIT_OK


def _cmd_sync(args: argparse.Namespace) -> int:
    from rechunk.chunking.policy import policy_for
    from rechunk.cli.sources import Chooser, source_notes
    from rechunk.sync import SyncReport, sync

    files = _read_paths(args)
    failed: StaleCheckError | None = None
    if not files.documents:
        return _nothing_matched(args, files)
    embedder = _embedder(args)
    chunker = policy_for(embedder, args.policy)
    chooser = Chooser(embedder)
    model_id = embedder.model_id
    with _cache_and_store(args, dry_run=args.dry_run, model_id=model_id) as (
        cache,
        opened,
    ), _lenders(args, model_id) as lenders:
        _share_cache(embedder, cache)
        store = opened.store
        if not args.dry_run:
            from rechunk.generations import open_live

            store = open_live(store, chunker, embedder.dimension)
        # with --prune, files that exist but were not read (unreadable, or in a folder
        # that could not be listed) keep their documents; an empty file's are pruned like
        # a deleted one's. The stored ids are read only then: a read of every doc_id.
        keep: set[str] = set()
        if args.prune and files.skipped and store.collection_info() is not None:
            keep = {doc_id for doc_id in store.doc_ids() if files.covers(doc_id)}
        with _progress_bar(_interactive(args)) as bar:
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if bar is None:
                    return
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            engine: Any = sync
            if getattr(args, "engine", "local") == "ray":  # the same sync on a Ray cluster
                from rechunk.integrations.ray import engine_for_cli

                engine = engine_for_cli(args, store)
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
                )
            except StaleCheckError as exc:  # written, but not exact: report, then exit 3
                if not isinstance(exc.report, SyncReport):
                    raise
                report, failed = exc.report, exc
        if not args.dry_run:
            _record_roots(args, files.roots, replace=args.prune)
            advice = _size_advice(store)
            if advice:  # in place of the store client's own warning
                print(f"rechunk: warning: {advice}", file=sys.stderr)
    report.documents["skipped"] += len(files.skipped)
    if args.json:
        data = {**report.to_dict(), **_file_fields(files)}
        data["model_loaded"] = embedder.loaded
        _print_json(data)
    else:
        notes = source_notes(files, report, chooser) + _file_notes(files, args.prune)
        _sync_summary(report, args.prune, notes)
    if failed is not None:
        _report_error(failed, args.debug)
        return EXIT_BACKEND
    return EXIT_PARTIAL if files.skipped else EXIT_OK


# -- status and query ---------------------------------------------------------------------


def collection_status(store: Any) -> dict[str, Any]:
    """Documents, chunks, policies, models, revisions and the stale check of a collection."""
    from collections import Counter

    info = store.collection_info()
    if info is None:
        raise StoreError(f"collection {store.collection!r} does not exist (nothing synced yet)")
    policies: Counter[str] = Counter()
    models: Counter[str] = Counter()
    revisions: dict[str, list[str]] = {}
    chunks = 0
    for doc_id, points in store.get_points_many(sorted(store.doc_ids())).items():
        chunks += len(points)
        policies.update(p.payload.policy for p in points)
        models.update(p.payload.model_id for p in points)
        revisions[doc_id] = sorted({p.payload.revision for p in points})
    stale = {doc: revs for doc, revs in revisions.items() if len(revs) > 1}
    status: dict[str, Any] = {
        "collection": info.name,
        "dimension": info.dimension,
        "distance": info.distance,
        "documents": len(revisions),
        "chunks": chunks,
        "other_points": info.points - chunks,  # written by another tool
        "policies": dict(policies),
        "models": dict(models),
        "revisions": revisions,
        "stale_documents": sorted(stale),
        "stale_check": "passed" if not stale else "failed",
        "warnings": [],
    }
    advice = _size_advice(store, info.points)
    if advice:
        status["warnings"].append(advice)
    aliases = getattr(store, "aliases", None)
    if callable(aliases):
        status["aliases"] = aliases()
    from rechunk.generations import generations

    status["generations"] = generations(store)
    return status


def _size_advice(store: Any, points: int | None = None) -> str | None:
    """The store's advice on its size (embedded Qdrant: a server past 100,000 points)."""
    advise = getattr(store, "size_advice", None)
    return advise(points) if callable(advise) else None


def _cmd_status(args: argparse.Namespace) -> int:
    opened = _open(args, create=False)
    try:
        store = opened.store
        try:
            _check_collection(store)
        except ConfigError:  # the other layout: without --layout, status follows the collection
            other = "llamaindex" if store.layout == "langchain" else "langchain"
            if args.layout is not None or not _written_in(store, other):
                raise
            store = type(store)(store.client, store.collection, other)
        status = collection_status(store)
    finally:
        opened.close()
    from rechunk.cli.watch import freshness_line, freshness_status

    fresh = freshness_status(args)  # what `rechunk watch` accepted and has not yet verified
    if fresh is not None:
        status["freshness"] = fresh
    if args.json:
        _print_json(status)
        return _status_exit(status)
    print(
        f"collection {printable(status['collection'])}: {status['documents']} documents, "
        f"{status['chunks']} chunks ({status['dimension']}-d, {status['distance']})"
    )
    if status["other_points"]:
        print(
            f"other points: {status['other_points']} not written by rechunk (another tool's); "
            "query refuses a collection that holds them"
        )
    for name in ("policies", "models"):
        print(
            f"{name}: "
            + ", ".join(f"{printable(k)} ({v} chunks)" for k, v in status[name].items())
        )
    for doc_id, revs in status["revisions"].items():
        print(f"  {printable(doc_id)}: revision {', '.join(printable(r[:12]) for r in revs)}")
    if "aliases" in status:
        pairs = ", ".join(f"{a} -> {c}" for a, c in status["aliases"].items())
        print(printable("aliases: " + (pairs or "none")))
    if status["generations"]:
        live = set(status.get("aliases", {}).values())
        print(
            printable(
                "generations: "
                + ", ".join(f"{g} (live)" if g in live else g for g in status["generations"])
            )
        )
    stale = ", ".join(printable(doc_id) for doc_id in status["stale_documents"])
    print(f"stale check: {status['stale_check']}" + (f" ({stale})" if stale else ""))
    if fresh is not None:
        print(freshness_line(fresh))
    for warning in status["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return _status_exit(status)


def _status_exit(status: dict[str, Any]) -> int:
    """A failed stale check is an error of the collection (exit 3), after the report."""
    if status["stale_check"] == "passed":
        return EXIT_OK
    print(
        f"rechunk: error: stale check failed: {len(status['stale_documents'])} document(s) "
        "hold chunks of more than one revision; sync them again",
        file=sys.stderr,
    )
    return EXIT_BACKEND


def _cmd_query(args: argparse.Namespace) -> int:
    from rechunk.reuse.identity import is_utf8

    text = " ".join(args.text)
    if not text.strip():
        raise InputError("the query text is empty")
    if not is_utf8(text):  # bytes the terminal passed that are not UTF-8
        raise InputError("the query text is not valid UTF-8; check the terminal")
    embedder = _embedder(args)
    tokens = embedder.count_tokens(text) + embedder.special_tokens
    if embedder.max_input_tokens is not None and tokens > embedder.max_input_tokens:
        raise InputError(
            f"the query has {tokens} tokens, but the model reads at most "
            f"{embedder.max_input_tokens}: shorten it"
        )
    opened = _open(args, create=False)
    try:
        _check_collection(opened.store, embedder.model_id)
        info = opened.store.collection_info()
        if info is None:
            raise StoreError(f"collection {args.collection!r} does not exist (nothing synced yet)")
        vector = embedder.embed([text])[0]
        hits = opened.store.search(vector, max(1, min(args.k, info.points)))
    finally:
        opened.close()
    rows = [
        {
            "doc_id": p.payload.doc_id,
            "start": p.payload.start,
            "end": p.payload.end,
            "score": round(float(score), 4),
            "excerpt": " ".join(p.payload.text.split())[:160],
        }
        for p, score in hits
    ]
    if args.json:
        _print_json(rows)
        return EXIT_OK
    if not rows:
        print(f"no chunks: collection {args.collection!r} is empty")
    for rank, row in enumerate(rows, 1):
        where = f"{printable(row['doc_id'])} [{row['start']}:{row['end']}]"
        print(f"{rank}. {where} score {row['score']:.3f}")
        print(f"   {printable(row['excerpt'])}")
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    from rechunk.chunking.policy import policy_for
    from rechunk.cli.sources import Chooser
    from rechunk.generations import reindex

    if args.paths:
        files = _read_paths(args)
    else:
        from rechunk.files import DEFAULT_GLOBS

        if args.glob != list(DEFAULT_GLOBS) or args.no_ignore:
            raise ConfigError(
                "--glob and --no-ignore apply to the PATHs given; without PATH, every "
                "recorded file and folder is read as it was synced"
            )
        files = _read_recorded(args)
    if not files.documents:
        raise ConfigError("no readable file matched: nothing to reindex")
    embedder = _embedder(args)
    chunker = policy_for(embedder, args.policy)
    with _cache_and_store(args) as (cache, opened):
        _share_cache(embedder, cache)
        if opened.store.collection_info() is not None and not args.prune:
            missing = sorted(opened.store.doc_ids() - {doc.doc_id for doc in files.documents})
            if missing:
                raise ConfigError(
                    f"{len(missing)} document(s) of the live collection are not among the files "
                    f"read ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}); "
                    "pass the folders that hold them, or --prune to leave them out"
                )
        result = reindex(
            files.documents,
            opened.store,
            chunker,
            embedder,
            cache=cache,
            drop_old=args.drop_old,
            chunker_for=Chooser(embedder),
        )
        if args.paths:  # without, the recorded roots (and how each is read) stay as they are
            _record_roots(args, files.roots, replace=True)
    if args.json:
        _print_json({**result.to_dict(), **_file_fields(files)})
    else:
        report = result.sync
        print(f"rechunk reindex -> {result.collection} ({report.policy})")
        print(f"  documents     {report.documents['synced']} in the new generation")
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
            print(f"  kept          {result.previous} (drop it with --drop-old next time)")
        for name in result.leftovers_dropped:
            print(f"  dropped       {name} (an older generation no alias pointed at)")
        for name, text in _file_notes(files):
            print(f"  {name:<14}{printable(text)}")
    return EXIT_PARTIAL if files.skipped else EXIT_OK


_CHART_SUFFIXES = (".png", ".svg", ".pdf")


def _chart_path(name: str) -> Path:
    """Where ``--plot`` writes (a name without suffix gets .png), checked writable up front."""
    path = Path(name)
    if path.name in ("", ".", ".."):
        raise ConfigError(f"--plot {name!r}: give a file name, such as bands.png")
    if path.suffix and path.suffix.lower() not in _CHART_SUFFIXES:
        raise ConfigError(
            f"--plot {name!r}: a chart is written as {', '.join(_CHART_SUFFIXES)} (by the suffix)"
        )
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    existed = path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write the chart {path}: {exc.strerror or exc}") from exc
    if not existed:
        path.unlink()
    return path


def _cmd_bench(args: argparse.Namespace) -> int:
    from rechunk.chunking.bench import ByLanguage, format_table, load_pairs, plot, run_bench

    pairs = load_pairs(args.corpus)
    chart = _chart_path(args.plot) if args.plot else None
    names = args.chunker or ["all"]
    code_pairs = all(_is_language(p["lang"]) for p in pairs)
    if "all" in names:  # the code policy beside the others when every pair is code
        names = [*CHUNKER_NAMES, *([CODE_CHUNKER] if code_pairs else [])]
    chunkers: dict[str, Any] = {
        name: make_chunker(name, args.tokenizer).chunk
        for name in dict.fromkeys(names)
        if name != CODE_CHUNKER
    }
    if CODE_CHUNKER in names:
        chunkers[CODE_CHUNKER] = ByLanguage(
            lambda lang: make_chunker(CODE_CHUNKER, args.tokenizer, lang).chunk
        )
    result = run_bench(pairs, chunkers)
    if chart is not None:
        plot(result, chart)
    if args.json:
        _print_json(result)
    else:
        print(f"{result['pairs']} revision pairs; R_c article-macro-averaged per language/band")
        print(format_table(result))
        if chart is not None:
            print(f"chart written to {chart}")
    failed = any(row["failures"] for row in result["chunkers"].values())
    return EXIT_PARTIAL if failed else EXIT_OK


def _is_language(name: object) -> bool:
    """Whether ``name`` is a language the code policy has a grammar table for."""
    from rechunk.chunkers.code_languages import spec_for

    try:
        spec_for(str(name))
    except ConfigError:
        return False
    return True


# -- entry point --------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error in one line, naming the --help that shows the usage."""

    commands: Mapping[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        print(f"rechunk: error: {printable(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> _Parser:
    from rechunk.chunking.policy import DEFAULT_POLICY, POLICIES

    parser = _Parser(
        prog="rechunk",
        description="Revision-aware chunking and embedding reuse: re-embed only what changed.",
    )
    from rechunk import __version__

    parser.add_argument("--version", action="version", version=f"rechunk {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    # --debug also after the command (`rechunk sync docs --debug`); SUPPRESS keeps the
    # value given before the command when it is not repeated after it
    debug = _Parser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    measure = sub.add_parser(
        "measure",
        parents=[debug],
        help="edit fraction and recompute fraction R_c of a revision pair",
        description="Print the edit fraction and band of OLD -> NEW and, per chunker, "
        "the recompute fraction R_c, chunks old/new and tokens to embed vs total.",
    )
    measure.add_argument("old", metavar="OLD_FILE", help="the previous version (UTF-8 text)")
    measure.add_argument("new", metavar="NEW_FILE", help="the new version (UTF-8 text)")
    measure.add_argument(
        "--chunker",
        action="append",
        choices=[*CHUNKER_NAMES, CODE_CHUNKER, "all"],
        help="repeatable; default all (code too when the files are source code)",
    )
    measure.add_argument(
        "--lang",
        metavar="LANGUAGE",
        help="the programming language of the code chunker (default: by the files' suffix)",
    )
    measure.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json to count tokens with (default: all-MiniLM-L6-v2's)",
    )
    measure.add_argument("--json", action="store_true", help="print a JSON report")
    measure.set_defaults(func=_cmd_measure)

    def store_options(p: argparse.ArgumentParser) -> None:
        from rechunk.adapters.uri import DEFAULT_STORE

        p.add_argument(
            "--store",
            default=DEFAULT_STORE,
            metavar="URI",
            help="qdrant:DIR (default %(default)s), qdrant-edge:DIR (Qdrant Edge), "
            "qdrant+http(s)://HOST:PORT (API key from $QDRANT_API_KEY), chroma:DIR, "
            "chroma+http://HOST:PORT",
        )
        p.add_argument(
            "--collection",
            default=DEFAULT_COLLECTION,
            metavar="NAME",
            help="collection (or Qdrant alias); default %(default)s",
        )
        p.add_argument(
            "--layout",
            choices=["langchain", "llamaindex"],
            default=None,
            help="payload layout, readable by that framework's own vector store (default "
            "langchain; status reads a collection in the layout it was written in)",
        )

    def input_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--cache",
            default=str(DEFAULT_CACHE),
            metavar="PATH",
            help="SQLite embedding cache (default %(default)s)",
        )
        p.add_argument(
            "--glob",
            action="append",
            default=None,
            metavar="PATTERN",
            help="file pattern, repeatable; git's wildcards, matched at any depth (default: "
            "every file; a type no parser reads is counted, not read)",
        )
        p.add_argument(
            "--no-ignore",
            action="store_true",
            help="also read files that .gitignore excludes (by default the .gitignore files "
            "of each folder, and of the folders above it up to the top of its git "
            "repository, apply; hidden files and folders are never read)",
        )
        add_source_options(p)

    def model_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--embedder",
            metavar="URI",
            default=None,
            help="onnx:[PATH] (ONNX Runtime, no torch), st:[PATH] (torch) or openai:MODEL "
            "(an OpenAI-compatible API; key from OPENAI_API_KEY); PATH is a local "
            "sentence-transformers folder, left out for the packaged all-MiniLM-L6-v2 "
            "(default: onnx: where onnxruntime is installed, else st:)",
        )
        p.add_argument(
            "--model",
            metavar="NAME_OR_PATH",
            default=None,
            help="a local sentence-transformers folder, run on the default backend (the "
            "same as --embedder onnx:PATH or st:PATH)",
        )
        p.add_argument(
            "--embed-url",
            metavar="URL",
            default=None,
            help="base URL of the openai: embedder's API, e.g. http://127.0.0.1:7997 "
            "(default: OPENAI_BASE_URL, else OpenAI)",
        )

    sync_p = sub.add_parser(
        "sync",
        parents=[debug],
        help="sync a folder of documents into a vector collection",
        description="Chunk every document, embed only inputs that are new byte for byte, "
        "publish, remove stale chunks and report what it cost.",
    )
    sync_p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    store_options(sync_p)
    sync_p.add_argument(
        "--policy",
        choices=list(POLICIES),
        default=DEFAULT_POLICY,
        help="chunking policy, sized for the model (default %(default)s)",
    )
    model_option(sync_p)
    input_options(sync_p)
    sync_p.add_argument(
        "--prune",
        action="store_true",
        help="delete every document in the collection that this sync was not given (files "
        "gone or empty, or outside PATH); a file that exists but could not be read, or lies "
        "in a folder that could not be listed, keeps its documents",
    )
    sync_p.add_argument(
        "--dry-run", action="store_true", help="print the plan; embed and write nothing"
    )
    sync_p.add_argument(
        "--check-stored",
        action="store_true",
        help="also read back the vectors of the given documents' stored points and write "
        "again each one that fails the vector check (all zeros, NaN, near float32's limit): "
        "the repair of a collection an embedder answered badly into",
    )
    sync_p.add_argument(
        "--reuse-from",
        action="append",
        default=[],
        metavar="URI",
        help="another store (read only) whose collection of the same --collection lends its "
        "vectors by input key, so that moving a collection to another store embeds nothing "
        "again: --store qdrant-edge:DIR --reuse-from qdrant:.rechunk/qdrant (repeatable)",
    )
    sync_p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: this process (default); ray: plan, embed and commit on a Ray cluster "
        "(pip install 'rechunk[ray]'; --store must be a server)",
    )
    sync_p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        default=None,
        help="with --engine ray: the head node, HOST:PORT or auto (default: a new local "
        "Ray instance)",
    )
    sync_p.add_argument("--json", action="store_true", help="print the report as JSON")
    sync_p.set_defaults(func=_cmd_sync)
    from rechunk.cli.watch import add_watch_parser

    add_watch_parser(sub, debug, store_options, model_option, input_options)

    status_p = sub.add_parser(
        "status",
        parents=[debug],
        help="what a collection holds",
        description="Documents, chunks, policies and models present, "
        "revisions per document, the stale-revision check and aliases.",
    )
    store_options(status_p)
    status_p.add_argument("--json", action="store_true", help="print JSON")
    status_p.set_defaults(func=_cmd_status)

    query_p = sub.add_parser(
        "query",
        parents=[debug],
        help="search a collection",
        description="Embed TEXT and print the top chunks with doc_id, "
        "offsets, score and a short excerpt.",
    )
    query_p.add_argument("text", metavar="TEXT", nargs="+", help="words are joined by spaces")
    query_p.add_argument("-k", type=int, default=5, help="how many chunks (default 5)")
    store_options(query_p)
    model_option(query_p)
    query_p.add_argument("--json", action="store_true", help="print JSON")
    query_p.set_defaults(func=_cmd_query)
    from rechunk.cli.eval import add_eval_parser

    add_eval_parser(sub, debug, store_options, model_option)
    reindex_p = sub.add_parser(
        "reindex",
        parents=[debug],
        help="switch policies: build a new generation, then switch the alias",
        description="Build the collection <alias>__<policy> with the new policy (reusing "
        "vectors by input key from the cache and the live generation), verify it, then "
        "switch the Qdrant alias atomically. Without PATH, every file and folder synced "
        "into this store and collection is read. Reindex refuses to leave out a document "
        "of the live collection unless --prune is given.",
    )
    reindex_p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders")
    reindex_p.add_argument(
        "--policy", choices=list(POLICIES), required=True, help="the new generation's policy"
    )
    store_options(reindex_p)
    model_option(reindex_p)
    input_options(reindex_p)
    reindex_p.add_argument(
        "--prune",
        action="store_true",
        help="let the new generation leave out documents of the live one that are not among "
        "the files read (without it, reindex refuses)",
    )
    reindex_p.add_argument(
        "--drop-old", action="store_true", help="delete the previous generation after the switch"
    )
    reindex_p.add_argument("--json", action="store_true", help="print the report as JSON")
    reindex_p.set_defaults(func=_cmd_reindex)

    bench_p = sub.add_parser(
        "bench",
        parents=[debug],
        help="R_c per chunker, language and edit band on a corpus of revision pairs",
        description="The study's Table-I view on a JSON-lines corpus (fields old, new, and "
        "optionally id, lang): R_c per chunker per language and edit band, the no-edit "
        "control and failures.",
    )
    bench_p.add_argument("corpus", metavar="CORPUS.jsonl")
    bench_p.add_argument(
        "--chunker",
        action="append",
        choices=[*CHUNKER_NAMES, CODE_CHUNKER, "all"],
        help="repeatable; default all (code too when every pair's lang is a programming "
        "language the code policy reads)",
    )
    bench_p.add_argument("--tokenizer", metavar="PATH", help="tokenizer.json to count with")
    bench_p.add_argument("--plot", metavar="FILE.png", help="write a chart of R_c by band")
    bench_p.add_argument("--json", action="store_true", help="print JSON")
    bench_p.set_defaults(func=_cmd_bench)
    parser.commands = sub.choices
    return parser


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


_PATH_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


def _one_line(exc: BaseException, limit: int = 400) -> str:
    """An error as one line: a server's answer quoted in it (an HTML page, a JSON body)
    is cut at its first line break and at ``limit`` characters (--debug shows it all)."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    line = lines[0]
    if len(lines) > 1 or len(line) > limit:
        line = line[:limit].rstrip() + " [...] (--debug shows all)"
    return line


def _report_error(exc: BaseException, debug: bool) -> None:
    """One line on stderr; with --debug the whole traceback (the exit code stays the same)."""
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    else:
        print(f"rechunk: error: {printable(_one_line(exc))}", file=sys.stderr)


def _format_warning(default: Callable[..., str]) -> Callable[..., str]:
    """rechunk's own warnings (a cache set aside, a graph re-exported) as one line,
    ``rechunk: warning: ...``, as the command prints its other warnings; others as Python
    prints them."""

    def format_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if category.__module__.startswith("rechunk."):
            return f"rechunk: warning: {printable(_one_line(Exception(str(message))))}\n"
        return default(message, category, filename, lineno, line)

    return format_warning


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's --help, not the top-level one
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "glob", "absent") is None:
        from rechunk.files import DEFAULT_GLOBS

        args.glob = list(DEFAULT_GLOBS)
    signal.signal(signal.SIGTERM, _terminate)
    default_format = warnings.formatwarning
    warnings.formatwarning = _format_warning(default_format)
    try:
        code: int = args.func(args)
        return code
    except KeyboardInterrupt:
        print("rechunk: interrupted; the next run repairs anything left half-done", file=sys.stderr)
        return 130
    except RechunkError as exc:
        _report_error(exc, args.debug)
        if isinstance(exc, (StoreError, EmbeddingError, CacheError)):
            return EXIT_BACKEND
        if isinstance(exc, (ConfigError, InputError, MissingDependencyError)):
            return EXIT_USAGE
        return EXIT_BACKEND
    except BrokenPipeError:  # the reader went away (`rechunk status | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        _report_error(exc, args.debug)
        # a path given on the command line that cannot be used is the caller's to fix;
        # anything else (a full disk, an I/O error) is the machine's
        return EXIT_USAGE if isinstance(exc, _PATH_ERRORS) else EXIT_BACKEND
    except Exception as exc:  # a client library's own error that no adapter translated
        if args.debug:
            _report_error(exc, True)
        else:
            name = type(exc).__name__
            print(
                f"rechunk: error: {name}: {printable(_one_line(exc))} (--debug shows where)",
                file=sys.stderr,
            )
        return EXIT_BACKEND
    finally:
        warnings.formatwarning = default_format
