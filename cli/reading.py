"""The documents a command reads: those under the PATHs given, read as the options say,
or, for ``rechunk reindex`` without PATH, those under every root the manifest recorded,
each read as it was synced."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rechunk.cli.manifest import read_manifest, recorded_roots, synced_folders
from rechunk.cli.options import InputOptions, StoreOptions
from rechunk.errors import ConfigError

__all__ = ["read_paths", "read_recorded"]


def read_paths(paths: Sequence[str], options: StoreOptions, inputs: InputOptions) -> Any:
    """The documents under ``paths``, read as ``inputs`` say (a file of a folder synced
    into the store and collection of ``options`` keeps its doc_id under that folder)."""
    from rechunk.sources.files import read_documents

    return read_documents(
        paths,
        inputs.glob,
        within=synced_folders(options),
        gitignore=not inputs.no_ignore,
        fmt=inputs.format,
        options=inputs.parse,
        include_generated=inputs.include_generated,
    )


def read_recorded(options: StoreOptions, inputs: InputOptions) -> Any:
    """The documents under every root recorded for the store and collection of
    ``options``, each read as it was synced (``--format`` and the parsers' options from
    ``inputs``); a later sync's file wins a shared doc_id."""
    from rechunk.sources.files import FileSet, read_documents

    roots = recorded_roots(read_manifest(), options)
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
            fmt=inputs.format,
            options=inputs.parse,
            include_generated=how.generated,
        )
        documents.update((doc.doc_id, doc) for doc in files.documents)
        skipped.update(files.skipped)
        out.empty.extend(files.empty)
        out.unlisted.extend(files.unlisted)
        out.ignored += files.ignored
        out.links.extend(files.links)
        out.unsupported.update(files.unsupported)
        out.generated += files.generated
    out.documents = list(documents.values())
    out.skipped = [(doc_id, why) for doc_id, why in skipped.items() if doc_id not in documents]
    return out
