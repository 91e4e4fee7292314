"""``rechunk status``: what a collection holds (documents, chunks, policies, models,
revisions per document, aliases and generations), the stale-revision check, and what
``rechunk watch`` accepted and has not yet verified."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from rechunk.cli import compose
from rechunk.cli.options import StoreOptions, debug_option, store_options
from rechunk.cli.output import EXIT_BACKEND, EXIT_OK, print_json
from rechunk.errors import StoreError, StoreUnavailableError
from rechunk.sources.files import printable

__all__ = ["StatusArgs", "add_parser", "collection_status", "execute", "run"]


@dataclass(frozen=True)
class StatusArgs(StoreOptions):
    """``rechunk status``'s arguments."""

    json: bool


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "status",
        parents=[debug_option()],
        help="what a collection holds",
        description="Documents, chunks, policies and models present, "
        "revisions per document, the stale-revision check and aliases.",
    )
    store_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(StatusArgs.from_args(args))


def execute(args: StatusArgs) -> int:
    from rechunk.cli.watch import freshness_status

    fresh = freshness_status(args)  # what `rechunk watch` accepted and has not yet verified
    try:
        opened = compose.open_store(args, create=False)
    except StoreUnavailableError as exc:
        # embedded Qdrant held by a watcher: what it has pending is in its state file
        if fresh is None:
            raise
        if args.json:
            print_json({"freshness": fresh, "store_error": str(exc)})
            return EXIT_BACKEND
        _print_freshness(fresh)
        raise
    try:
        store = compose.read_as_written(opened.store, args.layout)
        status = collection_status(store)
    finally:
        opened.close()
    if fresh is not None:
        status["freshness"] = fresh
    if args.json:
        print_json(status)
        return _status_exit(status)
    print(
        f"collection {printable(status['collection'])}: {status['documents']} documents, "
        f"{status['chunks']} chunks ({status['dimension']}-d, {status['distance']})"
    )
    if status["other_points"]:
        print(
            f"other points: {status['other_points']} not written by rechunk (another tool's); "
            "queries leave them out"
        )
    for name in ("policies", "models"):
        held = ", ".join(f"{printable(k)} ({v} chunks)" for k, v in status[name].items())
        print(f"{name}: {held or 'none (no rechunk chunks yet)'}")
    revisions = list(status["revisions"].items())
    for doc_id, revs in revisions[:_LISTED]:
        print(f"  {printable(doc_id)}: revision {', '.join(printable(r[:12]) for r in revs)}")
    if len(revisions) > _LISTED:
        print(f"  ... and {len(revisions) - _LISTED:,} more documents (--json lists every one)")
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
    if status["index_documents"]:
        print(
            f"  {status['index_documents']} document(s) written through LangChain's index(): "
            "a chunk it skips keeps the revision it was first written with, so they are "
            "not checked"
        )
    if fresh is not None:
        _print_freshness(fresh)
    for warning in status["warnings"]:
        print(f"rechunk: warning: {warning}", file=sys.stderr)
    return _status_exit(status)


#: documents and pending revisions listed one per line (the rest counted)
_LISTED = 20


def _print_freshness(fresh: dict[str, Any]) -> None:
    """The watchers' freshness line, then the pending revisions, oldest first."""
    from rechunk.cli.watch import freshness_line

    print(freshness_line(fresh))
    rows = fresh["revisions"]
    for row in rows[:_LISTED]:
        what = "deletion" if row["deleted"] else f"revision {str(row['revision'])[:12]}"
        published = ", published" if row["published"] is not None else ""
        stale = ", an earlier revision still answers" if row["stale"] else ""
        print(
            printable(
                f"  pending: {row['doc_id']} {what}, accepted {row['age_seconds']:.1f} s ago"
                f"{published}{stale}"
            )
        )
    if len(rows) > _LISTED:
        print(f"  pending: {len(rows) - _LISTED} more (rechunk status --json lists them all)")


def _status_exit(status: dict[str, Any]) -> int:
    """A failed stale check is an error of the collection (exit 3), after the report."""
    if status["stale_check"] == "passed":
        return EXIT_OK
    print(
        f"rechunk: error: stale check failed: {len(status['stale_documents'])} document(s) "
        "hold chunks of more than one revision or lack some of their chunks; sync them again",
        file=sys.stderr,
    )
    return EXIT_BACKEND


def _incomplete(points: Any) -> bool:
    """Whether a document's points (of one revision, written by a sync) lack one: their
    ordinals are not 0 to n-1, or their spans, which tile the text, leave a gap. A
    document of which only the first chunks were written is not found here (its length
    is not stored); its next sync writes the rest."""
    spans = sorted((p.payload.ordinal, p.payload.start, p.payload.end) for p in points)
    if [ordinal for ordinal, _, _ in spans] != list(range(len(spans))):
        return True
    return spans[0][1] != 0 or any(a[2] != b[1] for a, b in zip(spans, spans[1:]))


def collection_status(store: Any) -> dict[str, Any]:
    """Documents, chunks, policies, models, revisions and the stale check of a collection."""
    from collections import Counter

    from rechunk.adapters._reuse import OCCURRENCE_KEY

    info = store.collection_info()
    if info is None:
        raise StoreError(f"collection {store.collection!r} does not exist (nothing synced yet)")
    policies: Counter[str] = Counter()
    models: Counter[str] = Counter()
    revisions: dict[str, list[str]] = {}
    indexed: set[str] = set()  # written through LangChain's index() (see below)
    incomplete: set[str] = set()  # one revision, some of its chunks missing
    chunks = 0
    for doc_id, points in store.get_points_many(sorted(store.doc_ids())).items():
        chunks += len(points)
        policies.update(p.payload.policy for p in points)
        models.update(p.payload.model_id for p in points)
        revisions[doc_id] = sorted({p.payload.revision for p in points})
        if any(OCCURRENCE_KEY in p.payload.metadata for p in points):
            indexed.add(doc_id)
        elif len(revisions[doc_id]) == 1 and _incomplete(points):
            incomplete.add(doc_id)
    # index() keeps the record it first wrote for a chunk it skips, revision and all, so a
    # document it wrote after an edit holds chunks of several revisions, as it should
    stale = {doc for doc, revs in revisions.items() if len(revs) > 1 and doc not in indexed}
    stale |= incomplete
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
        "index_documents": len(indexed),
        "warnings": [],
    }
    advice = compose.size_advice(store, info.points)
    if advice:
        status["warnings"].append(advice)
    aliases = getattr(store, "aliases", None)
    if callable(aliases):
        status["aliases"] = aliases()
    from rechunk.sync.generations import generations

    status["generations"] = generations(store)
    return status
