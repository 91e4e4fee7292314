"""The manifest of synced folders (``.rechunk/manifest.json``): the files and folders
each store and collection was synced from, and how each was read (its globs, whether
``.gitignore`` applied, whether generated files were read), so that ``rechunk reindex``
without PATH reads them all again and a file named directly keeps the doc_id it has
under a synced folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from rechunk.cli.options import STATE_DIR, InputOptions, StoreOptions

__all__ = [
    "MANIFEST",
    "Source",
    "copy_roots",
    "read_manifest",
    "record_roots",
    "recorded_roots",
    "synced_folders",
]

MANIFEST = STATE_DIR / "manifest.json"  # the roots each store and collection was synced from


def read_manifest() -> dict[str, Any]:
    """The manifest of earlier syncs (``{}`` when there is none or it is unreadable)."""
    try:
        manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


class Source(NamedTuple):
    """How a recorded file or folder was read: its globs, whether ``.gitignore`` applied,
    and whether generated files were read (``--include-generated``)."""

    globs: list[str]
    gitignore: bool = True
    generated: bool = False


def recorded_roots(manifest: dict[str, Any], options: StoreOptions) -> dict[str, Source]:
    """The files and folders (with how they were read) synced into this store and collection."""
    try:
        entry = manifest[_key(options)]
        roots = entry["roots"]
        if isinstance(roots, list):  # the first format: the last sync's roots only
            return {str(root): Source(list(entry["globs"])) for root in roots}
        return {
            str(root): Source(list(how))  # the second format: root -> globs
            if isinstance(how, list)
            else Source(
                list(how["globs"]), bool(how["gitignore"]), bool(how.get("generated", False))
            )
            for root, how in roots.items()
        }
    except (KeyError, TypeError, AttributeError):
        return {}


def record_roots(
    options: StoreOptions, inputs: InputOptions, roots: list[str], *, replace: bool
) -> None:
    """Remember every folder that fed a collection, for ``rechunk reindex`` without paths.

    Roots accumulate over syncs (the latest last); ``replace`` keeps only these,
    after a sync or reindex that made the collection hold exactly their documents. Each
    root is recorded with how ``inputs`` read it.
    """
    manifest = read_manifest()
    recorded = {} if replace else recorded_roots(manifest, options)
    for root in roots:
        recorded.pop(root, None)
        recorded[root] = Source(list(inputs.glob), not inputs.no_ignore, inputs.include_generated)
    manifest[_key(options)] = {"roots": {root: how._asdict() for root, how in recorded.items()}}
    _write(manifest)


def _write(manifest: dict[str, Any]) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = MANIFEST.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    tmp.replace(MANIFEST)


def copy_roots(options: StoreOptions, collection: str) -> None:
    """Record for ``collection`` of the same store the roots (and how each is read) of the
    collection of ``options``: a generation that has no alias (Chroma) is named on later
    commands, and ``rechunk reindex`` without PATH reads its folders."""
    manifest = read_manifest()
    entry = manifest.get(_key(options))
    if entry is None:
        return
    manifest[f"{options.store} {collection}"] = entry
    _write(manifest)


def synced_folders(options: StoreOptions) -> list[str]:
    """The folders synced into this store and collection before: a file named directly
    keeps the doc_id it has under one of them."""
    return [root for root in recorded_roots(read_manifest(), options) if Path(root).is_dir()]


def _key(options: StoreOptions) -> str:
    """A store and collection's entry in the manifest."""
    return f"{options.store} {options.collection}"
