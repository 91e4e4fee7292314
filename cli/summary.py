"""What ``rechunk sync`` prints for a person: its progress while it runs, the summary
of its report, and the notes on what file discovery left out (which ``--json`` reports
as fields). ``rechunk watch`` prints its initial sync with the same summary."""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from rechunk.sources.files import printable
from rechunk.sources.generated import REASONS

__all__ = [
    "encodings",
    "file_fields",
    "file_notes",
    "formats",
    "listed",
    "progress_reporter",
    "replaced",
    "sync_summary",
    "unknown_notes",
]

#: hidden folders and files a summary names (``--json`` lists every one)
HIDDEN_SHOWN = 5


def encodings(files: Any) -> dict[str, int]:
    """Documents read in an encoding other than UTF-8 (a byte-order mark's, ``--encoding``,
    an HTML page's declared charset), by encoding."""
    found = Counter(
        str(doc.metadata["encoding"])
        for doc in files.documents
        if (doc.metadata or {}).get("encoding", "utf-8") != "utf-8"
    )
    return dict(sorted(found.items()))


def replaced(files: Any) -> list[str]:
    """Documents whose bytes were not all valid in the encoding their file declares (an
    HTML page's charset, an e-mail part's) or its format prescribes (an EPUB chapter's
    UTF-8), read with U+FFFD in place of those bytes."""
    return [doc.doc_id for doc in files.documents if (doc.metadata or {}).get("invalid_bytes")]


def formats(files: Any) -> dict[str, int]:
    """Documents read, by format (``markdown``, ``pdf``, ``code``...)."""
    found = Counter(str((doc.metadata or {}).get("format", "text")) for doc in files.documents)
    return dict(sorted(found.items()))


def file_fields(files: Any) -> dict[str, Any]:
    """The documents read by format, what file discovery left out, and the encodings
    files were read in that are not UTF-8, for --json reports."""
    return {
        "formats": formats(files),
        "encodings": encodings(files),
        "invalid_bytes_files": replaced(files),
        "skipped_files": [{"doc_id": d, "reason": r} for d, r in files.skipped],
        "empty_files": files.empty,
        "ignored": files.ignored,
        "hidden": files.hidden,
        "links_not_followed": files.links,
        "unsupported_files": dict(sorted(files.unsupported.items())),
        "generated_files": [{"doc_id": d, "reason": r} for d, r in files.generated],
        "binary_files": files.binary,
        "too_large_files": [{"doc_id": d, "bytes": n} for d, n in files.too_large],
        "inline_data": [{"doc_id": d, "bytes": n} for d, n in files.inline_data],
    }


def file_notes(
    files: Any, prune: bool | None = None, *, generation: bool = False
) -> list[tuple[str, str]]:
    """What file discovery left out, as (name, text) rows: files skipped, empty files (with
    what happens to their documents, unless ``prune`` is None), what .gitignore or
    .rechunkignore excluded, hidden files and folders, generated files (by reason), files
    over ``--max-file-bytes`` (kept, or with ``generation`` left out of the new
    generation a reindex builds), links to folders not followed and documents holding
    large data: URIs; documents read with bytes not valid in their declared charset
    replaced; then the encodings documents were read in that are not UTF-8."""
    rows = [("skipped", f"{doc_id}: {reason}") for doc_id, reason in files.skipped]
    for doc_id in files.empty:
        if prune is None:
            rows.append(("empty", doc_id))
        else:
            fate = "pruned" if prune else "kept until a sync with --prune"
            fate = f"empty; any chunks it had are {fate}"
            rows.append(("empty", f"{doc_id}: {fate}"))
    if files.ignored:
        folders = sum(name.endswith("/") for name in files.ignored)
        counts = f"{len(files.ignored) - folders} matching file(s) and {folders} folder(s)"
        rows.append(
            (
                "ignored",
                f"{counts} excluded by .gitignore (--no-ignore reads them) or .rechunkignore",
            )
        )
    if files.hidden:
        rows.append(
            (
                "hidden",
                f"{listed(files.hidden)} (names starting with '.' "
                "are not read: give one as a path beside its folder to read it, such as "
                "`rechunk sync repo repo/.github`)",
            )
        )
    if files.generated:
        reasons = [why for _, why in files.generated]
        counts = ", ".join(f"{why} {reasons.count(why)}" for why in REASONS if why in reasons)
        rows.append(
            (
                "generated",
                f"{counts} (not read: written by tools; --include-generated reads them, "
                "--json lists them)",
            )
        )
    if files.binary:
        rows.append(
            (
                "binary",
                f"{listed(files.binary)} (a source-code suffix on a file that is not text, "
                "such as a video saved as .ts: not read)",
            )
        )
    if files.too_large:
        shown = listed([f"{d} ({_size_text(n)})" for d, n in files.too_large])
        fate = (
            "left out of the new generation"
            if generation
            else "chunks stored from them before are kept"
        )
        rows.append(
            (
                "too large",
                f"{shown} (over --max-file-bytes: not read; {fate})",
            )
        )
    rows.extend(
        ("not followed", f"{link} (a symbolic link to a folder; pass its target)")
        for link in files.links
    )
    rows.extend(
        (
            "inline data",
            f"{doc_id}: {size / 1024:,.0f} KB of base64 data: URIs, embedded as text (a "
            "pasted picture costs many tokens and finds nothing: link the file instead)",
        )
        for doc_id, size in files.inline_data
    )
    bad = replaced(files)
    if bad:
        rows.append(
            (
                "invalid bytes",
                f"{listed(bad)} (bytes not valid in the charset the file declares, or its "
                "format prescribes, read as U+FFFD: correct the declaration, or save the file "
                "in that charset)",
            )
        )
    read_as = encodings(files)
    if read_as:
        counts = ", ".join(f"{name} {n}" for name, n in read_as.items())
        rows.append(("encodings", f"{counts} (documents not read as UTF-8; payloads say so)"))
    return rows


def listed(names: list[str], limit: int = HIDDEN_SHOWN) -> str:
    """The first ``limit`` of ``names``, and how many more (``a, b and 3 more``)."""
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


def _size_text(size: int) -> str:
    """``size`` bytes for a person: ``1.7 KB``, ``212.4 MB``, ``3.1 GB``."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size / 1000:,.1f} KB"


def unknown_notes(found: list[tuple[str, float]]) -> list[tuple[str, str]]:
    """Summary rows naming the documents much of whose text the model reads as its unknown
    token (``found`` as :func:`rechunk.chunking.unknown.unknown_documents` gives it)."""
    return [
        (
            "unknown text",
            f"{doc_id}: {share:.0%} of its text is unknown to the model's tokenizer "
            "(embedded as [UNK]; a model trained on its script reads it: --model)",
        )
        for doc_id, share in found
    ]


#: a run that is not on a terminal says how far it is every this many seconds (a run
#: shorter than that says nothing)
PROGRESS_EVERY = 60.0
#: stages whose total grows as the run goes (the inputs to embed are known a batch of
#: documents at a time): no share of it is given
_GROWING = frozenset({"embed"})


@contextlib.contextmanager
def progress_reporter(as_json: bool) -> Iterator[Callable[[str, int, int], None]]:
    """The ``progress(stage, done, total)`` callback a sync reports to: a progress bar on
    a terminal (unless the report is printed ``as_json``); elsewhere (cron, CI, a
    service's log, and ``as_json``) a line on stderr every
    :data:`PROGRESS_EVERY` seconds, so that a long run is seen to move
    (``rechunk: progress: publish 1,200 of 5,000 (24%) after 5m0s``: documents chunked,
    planned or published, partitions on a Ray cluster; inputs embedded, of those the
    batches planned so far need, with no share, as their total grows)."""
    if as_json or not sys.stdout.isatty():
        started = last = time.monotonic()

        def line(stage: str, done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last < PROGRESS_EVERY:
                return
            last = now
            if stage in _GROWING:
                count = f"{done:,} of {total:,} planned so far"
            else:
                count = f"{done:,} of {total:,}" + (f" ({done / total:.0%})" if total else "")
            minutes, seconds = divmod(int(now - started), 60)
            print(
                f"rechunk: progress: {stage} {count} after {minutes}m{seconds}s",
                file=sys.stderr,
                flush=True,
            )

        yield line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    tasks: dict[str, Any] = {}
    with Progress(
        TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(), transient=True
    ) as bar:

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update


def sync_summary(report: Any, pruned: bool, notes: list[tuple[str, str]]) -> None:
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
        n = report.chunks_not_given
        if d["skipped"]:  # a skipped file's chunks are among them: given, but not read
            held = (
                f"{n:,} chunks of documents this sync did not read stay in the collection "
                "(skipped files' among them, which --prune keeps)"
            )
        else:
            held = (
                f"{n:,} chunks of other documents stay in the collection (--prune deletes "
                "the documents this sync was not given)"
            )
        rows.append(("not given", held))
    rows.append(
        (
            "chunks",
            f"{c['added']} added, {c['kept']} kept, {c['updated']} updated "
            f"(payload only), {c['deleted']} deleted",
        )
    )
    embedded = "to embed" if report.dry_run else "embedded"  # a dry run embeds nothing
    rows.append(
        (
            "inputs",
            f"{i['embedded']} {embedded}, {i['from_cache']} from cache, "
            f"{i['from_store']} from the collection",
        )
    )
    share = report.tokens_embedded / report.tokens_total if report.tokens_total else 0.0
    rows.append(
        (
            "tokens",
            f"{report.tokens_embedded:,} {embedded} of {report.tokens_total:,} ({share:.1%})",
        )
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
    tokens = report.model_check_tokens
    if report.model_check == "passed":  # an input held under the model's identity, again
        rows.append(("model check", f"passed ({tokens:,} tokens embedded again to compare)"))
    # the policy that cut every document when one did (a folder of Python: the code
    # policy, not the prose default the sync was given); several: a policies row says
    used = getattr(report, "policies", {})
    rows.append(("policy", next(iter(used)) if len(used) == 1 else report.policy))
    rows.append(("model", report.model_id))  # whole: as status shows it and caches key it
    title = f"rechunk sync -> {printable(report.collection)}"
    print(title + (" (dry run: nothing was written)" if report.dry_run else ""))
    for name, value in [*rows, *notes]:
        print(f"  {name:<14}{printable(value)}")
    if report.dry_run:
        changing = [doc for doc in report.per_document if doc.status != "unchanged"]
        print("plan:" if changing else "plan: nothing to change")
        for doc in changing:
            counts = f"+{doc.added} ~{doc.updated} -{doc.deleted} chunks"
            print(
                f"  {doc.status:<9} {printable(doc.doc_id)}: {counts}, "
                f"{doc.embedded} inputs to embed ({doc.tokens_embedded:,} tokens)"
            )
