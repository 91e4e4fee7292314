"""The manifest of synced folders (``.rechunk/manifest.json``): the files and folders
each store and collection was synced from, and how each was read (its globs, whether
``.gitignore`` applied, whether generated files were read), so that ``rechunk reindex``
without PATH reads them all again and a file named directly keeps the doc_id it has
under a synced folder."""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rechunk.cli.options import STATE_DIR, InputOptions, StoreOptions, make_state_dir

__all__ = [
    "MANIFEST",
    "READ_AS",
    "Source",
    "copy_roots",
    "read_manifest",
    "record_roots",
    "recorded_roots",
    "synced_folders",
]

MANIFEST = STATE_DIR / "manifest.json"  # the roots each store and collection was synced from
_LOCK = STATE_DIR / "manifest.lock"  # held while the manifest is read, changed and written


class ManifestWarning(UserWarning):
    """The manifest could not be read (set aside) or written (the sync itself stands)."""


def read_manifest(*, set_aside: bool = False) -> dict[str, Any]:
    """The manifest of earlier syncs: ``{}`` when there is none, or when it is damaged,
    with a warning; ``set_aside`` (before it is written again) renames a damaged one
    ``manifest.json.damaged-<time>`` (never deleted): rewritten as it was, it would have
    lost every other collection's folders. Read-only commands leave it as it is."""
    try:
        text = MANIFEST.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # unreadable; UnicodeDecodeError is a ValueError
        return _damaged(f"cannot be read ({exc})", set_aside)
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        return _damaged(f"is not JSON ({exc})", set_aside)
    if not isinstance(manifest, dict):
        return _damaged("is not a JSON object", set_aside)
    return manifest


def _damaged(why: str, set_aside: bool) -> dict[str, Any]:
    where = "left as it is until a sync records folders"
    if set_aside:
        aside = MANIFEST.with_name(f"{MANIFEST.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            MANIFEST.replace(aside)
            where = f"set aside as {aside}"
        except OSError:
            where = "left as it is"
    warnings.warn(
        f"{MANIFEST} {why}: {where}; the folders synced before are forgotten (`rechunk "
        "reindex` without PATH and the doc_id checks know only what syncs record from now)",
        ManifestWarning,
        stacklevel=3,
    )
    return {}


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Hold the manifest's lock (a file lock where the system has one), so that two
    commands recording at once do not drop each other's entries."""
    make_state_dir()
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    with open(_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Source(NamedTuple):
    """How a recorded file or folder was read: its globs, whether ``.gitignore`` applied,
    whether generated files were read (``--include-generated``), the size above which
    files were left out (``--max-file-bytes``), and the format, record id field,
    encoding and HTML selectors it was read with (``--format``, ``--id-field``,
    ``--encoding``, ``--html-include``, ``--html-exclude``; None or empty: none given).
    ``read_as_recorded``: whether those five were recorded (an earlier version recorded
    none of them); it is not written itself, and without it neither are they."""

    globs: list[str]
    gitignore: bool = True
    generated: bool = False
    max_bytes: int | None = None
    format: str | None = None
    id_field: str | None = None
    encoding: str | None = None
    html_include: tuple[str, ...] = ()
    html_exclude: tuple[str, ...] = ()
    read_as_recorded: bool = False


def recorded_roots(manifest: dict[str, Any], options: StoreOptions) -> dict[str, Source]:
    """The files and folders (with how they were read) synced into this store and
    collection, under every spelling of the store an earlier version recorded apart
    (``qdrant:kb`` and ``qdrant:./kb/``: one store, their folders merged)."""
    found: dict[str, Source] = {}
    for key in _spellings(manifest, options.store, options.collection):
        for root, how in _roots(manifest[key]).items():  # its own spelling's last: the latest
            found.pop(root, None)
            found[root] = how
    return found


def _roots(entry: Any) -> dict[str, Source]:
    """The roots of one entry, in any format a version wrote ({} for one not understood)."""
    try:
        roots = entry["roots"]
        if isinstance(roots, list):  # the first format: the last sync's roots only
            return {str(root): Source(list(entry["globs"])) for root in roots}
        return {
            str(root): Source(list(how))  # the second format: root -> globs
            if isinstance(how, list)
            else Source(
                list(how["globs"]),
                bool(how["gitignore"]),
                bool(how.get("generated", False)),
                _max_bytes(how.get("max_bytes")),
                format=_text(how.get("format")),
                id_field=_text(how.get("id_field")),
                encoding=_text(how.get("encoding")),
                html_include=_texts(how.get("html_include")),
                html_exclude=_texts(how.get("html_exclude")),
                read_as_recorded="id_field" in how,
            )
            for root, how in roots.items()
        }
    except (KeyError, TypeError, AttributeError):
        return {}


def _text(value: Any) -> str | None:
    """A recorded name: a non-empty str, else None."""
    return value if isinstance(value, str) and value else None


def _texts(value: Any) -> tuple[str, ...]:
    """Recorded names: a list of non-empty strs, else none."""
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    return ()


def _max_bytes(value: Any) -> int | None:
    """A recorded ``max_bytes``: a positive int, else None (none recorded, or not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def record_roots(
    options: StoreOptions, inputs: InputOptions, roots: list[str], *, replace: bool
) -> None:
    """Remember every folder that fed a collection, for ``rechunk reindex`` without paths.

    Roots accumulate over syncs (the latest last); ``replace`` keeps only these,
    after a sync or reindex that made the collection hold exactly their documents. Each
    root is recorded with how ``inputs`` read it. A manifest that cannot be written is a
    warning: the sync it records has happened.
    """
    with _recording() as manifest:
        recorded = {} if replace else recorded_roots(manifest, options)
        for root in roots:
            recorded.pop(root, None)
            recorded[root] = Source(
                list(inputs.glob),
                not inputs.no_ignore,
                inputs.include_generated,
                inputs.max_file_bytes,
                inputs.format,
                inputs.parse.id_field,
                inputs.parse.encoding,
                inputs.parse.html_include,
                inputs.parse.html_exclude,
                read_as_recorded=True,
            )
        _put(manifest, options.store, options.collection, recorded)


def copy_roots(options: StoreOptions, collection: str) -> None:
    """Record for ``collection`` of the same store the roots (and how each is read) of the
    collection of ``options``: a generation that has no alias (Chroma) is named on later
    commands, and ``rechunk reindex`` without PATH reads its folders."""
    with _recording() as manifest:
        roots = recorded_roots(manifest, options)
        if roots:
            _put(manifest, options.store, collection, roots)


@contextlib.contextmanager
def _recording() -> Iterator[dict[str, Any]]:
    """The manifest to change, written back (atomically, under the lock) when the block
    ends; a failure to write it is a :class:`ManifestWarning`. It yields once whatever
    happens: when the lock cannot be taken (a read-only working folder) the block changes
    an empty manifest that is not written (returning without yielding raised
    ``RuntimeError: generator didn't yield`` after the sync was done)."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(_locked())
        except OSError as exc:
            yield {}
            _not_recorded(exc)
            return
        manifest = read_manifest(set_aside=True)
        yield manifest
        try:
            tmp = MANIFEST.with_name(f"{MANIFEST.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
            with contextlib.suppress(FileNotFoundError):  # keep the mode its owner gave it
                os.chmod(tmp, MANIFEST.stat().st_mode & 0o7777)
            tmp.replace(MANIFEST)
        except OSError as exc:
            _not_recorded(exc)


def _not_recorded(exc: OSError) -> None:
    warnings.warn(
        f"cannot record the folders synced in {MANIFEST}: {exc.strerror or exc}; the sync "
        "itself is done (later commands will not know these folders)",
        ManifestWarning,
        stacklevel=4,
    )


def synced_folders(recorded: Mapping[str, Source]) -> list[str]:
    """The folders of the roots ``recorded`` for a store and collection (see
    :func:`recorded_roots`): a file or folder named directly keeps the doc_ids its files
    have under one of them."""
    return [root for root in recorded if Path(root).is_dir()]


def _key(store: str, collection: str) -> str:
    """A store and collection's entry in the manifest (the store's one spelling)."""
    from rechunk.adapters.uri import canonical_uri

    return f"{canonical_uri(store)} {collection}"


def _spellings(manifest: dict[str, Any], store: str, collection: str) -> list[str]:
    """The keys of a store and collection's entries: its own, and those an earlier
    version wrote under the store URI as written (``qdrant:.rechunk/qdrant``)."""
    key = _key(store, collection)
    found = []
    for written in manifest:
        uri, _, named = written.rpartition(" ")
        if written == key or (named == collection and uri and _key(uri, named) == key):
            found.append(written)
    return sorted(found, key=lambda written: written == key)  # its own last


def _put(
    manifest: dict[str, Any], store: str, collection: str, roots: Mapping[str, Source]
) -> None:
    """Record ``roots`` as a store and collection's under its one key (other spellings
    go)."""
    for written in _spellings(manifest, store, collection):
        del manifest[written]
    manifest[_key(store, collection)] = {
        "roots": {root: _written(how) for root, how in roots.items()}
    }


#: what a root records of how its files were read (an earlier version recorded none):
#: names of :class:`Source` fields, of :class:`ParseOptions` fields but ``format``, and of
#: options (``--id-field``)
READ_AS = ("format", "id_field", "encoding", "html_include", "html_exclude")


def _written(how: Source) -> dict[str, Any]:
    """``how`` as the manifest holds it: without ``read_as_recorded``, and without the
    options of :data:`READ_AS` where they were not recorded (a root an earlier version
    recorded, copied to a reindexed collection, is read as before, not as if synced
    without them)."""
    fields = how._asdict()
    del fields["read_as_recorded"]
    if not how.read_as_recorded:
        for name in READ_AS:
            del fields[name]
    return fields
