"""The documents a command reads: those under the PATHs given, read as the options say,
or, for ``rechunk reindex`` without PATH, those under every root the manifest recorded,
each read as it was synced."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rechunk.cli.manifest import read_manifest, recorded_roots, synced_folders
from rechunk.errors import ConfigError

__all__ = ["read_paths", "read_recorded"]


def read_paths(args: argparse.Namespace) -> Any:
    """The documents under the paths given, read as the options say."""
    from rechunk.cli.sources import parse_options
    from rechunk.files import read_documents

    return read_documents(
        args.paths,
        args.glob,
        within=synced_folders(args),
        gitignore=not args.no_ignore,
        fmt=args.format,
        options=parse_options(args),
    )


def read_recorded(args: argparse.Namespace) -> Any:
    """The documents under every recorded root; a later sync's file wins a shared doc_id."""
    from rechunk.cli.sources import parse_options
    from rechunk.files import FileSet, read_documents

    roots = recorded_roots(read_manifest(), args)
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
