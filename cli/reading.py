"""The documents a command reads: those under the PATHs given, read as the options say,
or, for ``rechunk reindex`` without PATH, those under every root the manifest recorded,
each read as it was synced."""

from __future__ import annotations

import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rechunk.cli.manifest import READ_AS, Source, read_manifest, recorded_roots, synced_folders
from rechunk.cli.options import InputOptions, StoreOptions
from rechunk.errors import ConfigError

__all__ = ["ReadOtherwiseWarning", "files_elsewhere", "read_paths", "read_recorded"]


class ReadOtherwiseWarning(UserWarning):
    """A folder synced before is read now with other ``--format``, ``--id-field``,
    ``--encoding`` or HTML selectors than it was synced with: its documents may all read
    differently, and be embedded again."""


def read_paths(
    paths: Sequence[str],
    options: StoreOptions,
    inputs: InputOptions,
    *,
    complete: bool,
    recorded: Mapping[str, Source] | None = None,
) -> Any:
    """The documents under ``paths``, read as ``inputs`` say (a file or folder inside a
    folder synced into the store and collection of ``options`` keeps its doc_id under
    that folder). A file whose doc_id names another file of a folder synced before is
    refused (see :func:`files_elsewhere`), unless the paths are ``complete`` (``--prune``,
    a reindex): the collection then holds their documents only, and the other folders'
    documents go. ``recorded``: the folders the manifest records for the store and
    collection, when the caller read them already (else they are read here, once)."""
    from rechunk.sources.files import doc_id_clash, read_documents

    if recorded is None:
        recorded = recorded_roots(read_manifest(), options)
    files = read_documents(
        paths,
        inputs.glob,
        within=synced_folders(recorded),
        gitignore=not inputs.no_ignore,
        fmt=inputs.format,
        options=inputs.parse,
        include_generated=inputs.include_generated,
        max_bytes=inputs.max_file_bytes,
    )
    _warn_if_read_otherwise(recorded, files.roots, inputs)
    if complete:
        return files
    elsewhere = files_elsewhere(recorded, files.roots)
    for doc_id, path in files.paths.items():
        other = elsewhere(doc_id, path)
        if other is not None:
            raise ConfigError(
                f"{doc_id_clash(path, other, doc_id)}. Sync the folder that holds both, give "
                "each its own --collection, or keep only the folders given now with --prune"
            )
    return files


def _warn_if_read_otherwise(
    recorded: Mapping[str, Source], roots: Sequence[str], inputs: InputOptions
) -> None:
    """A :class:`ReadOtherwiseWarning` for each of ``roots`` that was synced (itself, or
    as part of the outermost recorded folder holding it) with other options of
    :data:`READ_AS` than ``inputs`` gives: a cron job's command line that lost its
    ``--html-exclude`` read every page's menu again, and said nothing."""
    for root in roots:
        synced = _synced_as(recorded, root)
        if synced is None:
            continue
        folder, how = synced
        changed = [
            f"{_read_with(name, getattr(how, name))} and is read now {_read_with(name, given)}"
            for name, given in _given(inputs).items()
            if _compared(name, given) != _compared(name, getattr(how, name))
        ]
        if changed:
            warnings.warn(
                f"{folder} was synced {'; it was synced '.join(changed)}: its documents are read "
                "anew, and what reads differently is embedded again (give the options it was "
                "synced with to read it as before)",
                ReadOtherwiseWarning,
                stacklevel=3,
            )


def _synced_as(recorded: Mapping[str, Source], root: str) -> tuple[str, Source] | None:
    """``root`` as recorded, else the outermost recorded folder it lies in, and how that was
    read; None when there is none, or it was recorded without its read options."""
    holding = [folder for folder in recorded if Path(root).is_relative_to(folder)]
    if not holding:
        return None
    folder = root if root in recorded else min(holding, key=len)
    how = recorded[folder]
    return (folder, how) if how.read_as_recorded else None


def _compared(name: str, value: Any) -> Any:
    """An option as compared: None when not given (or, for the encoding, UTF-8, which is
    read first anyway), selectors in any order."""
    if not value or (name == "encoding" and value == "utf-8"):
        return None
    return tuple(sorted(value)) if isinstance(value, tuple) else value


def _given(inputs: InputOptions) -> dict[str, Any]:
    """The options of :data:`READ_AS` as ``inputs`` gives them (None or empty: not given)."""
    return {
        name: inputs.format if name == "format" else getattr(inputs.parse, name) for name in READ_AS
    }


def _read_with(name: str, value: Any) -> str:
    """``with --html-exclude nav --html-exclude '.menu, #footer'`` (as a command line
    gives it) / ``without --html-exclude``."""
    option = "--" + name.replace("_", "-")
    if not value:
        return f"without {option}"
    values = value if isinstance(value, tuple) else (value,)
    return "with " + " ".join(f"{option} {shlex.quote(v)}" for v in values)


def files_elsewhere(
    recorded: Mapping[str, Source], roots: Sequence[str]
) -> Callable[[str, Path], Path | None]:
    """``(doc_id, path) -> the file other than path that holds doc_id`` in a folder
    ``recorded`` for the store and collection (synced into it before), other than ``roots``
    (a folder synced again names its files as before: only the others can clash), else
    None. ``A/README.md`` synced, then ``B/README.md``: both are ``README.md``, and a
    sync of B would replace A's document with B's without a word, as a sync of both
    folders at once refuses to."""
    from rechunk.sources.files import globs_regex

    folders = [
        (Path(root), globs_regex(how.globs).fullmatch)
        for root, how in recorded.items()
        if root not in roots
    ]

    def other_file(doc_id: str, path: Path) -> Path | None:
        for folder, synced in folders:
            other = folder / doc_id
            if synced(doc_id) and other.is_file() and other.resolve() != path.resolve():
                return other
        return None

    return other_file


def read_recorded(options: StoreOptions, inputs: InputOptions) -> Any:
    """The documents under every root recorded for the store and collection of
    ``options``, each read as it was synced (:func:`_read_as_synced`); a later sync's
    file wins a shared doc_id."""
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
        fmt, parse = _read_as_synced(root, how, inputs)
        files = read_documents(
            [root],
            how.globs,
            within=folders,
            gitignore=how.gitignore,
            fmt=fmt,
            options=parse,
            include_generated=how.generated,
            max_bytes=how.max_bytes,
        )
        documents.update((doc.doc_id, doc) for doc in files.documents)
        skipped.update(files.skipped)
        out.empty.extend(files.empty)
        out.unlisted.extend(files.unlisted)
        out.ignored += files.ignored
        out.hidden += files.hidden
        out.links.extend(files.links)
        out.unsupported.update(files.unsupported)
        out.generated += files.generated
        out.binary += files.binary
        out.too_large += files.too_large
        out.record_files |= files.record_files
        out.inline_data += files.inline_data
    out.documents = list(documents.values())
    out.skipped = [(doc_id, why) for doc_id, why in skipped.items() if doc_id not in documents]
    return out


def _read_as_synced(root: str, how: Source, inputs: InputOptions) -> tuple[str | None, Any]:
    """The ``--format`` and parsers' options ``root`` was synced with. One given in
    ``inputs`` that reads otherwise than the root's (none included; compared as the
    warning of :func:`_warn_if_read_otherwise` compares them) is refused; for a root an
    earlier version recorded, which recorded none of them, the given ones apply."""
    read: dict[str, Any] = {}
    for name, given in _given(inputs).items():
        if not how.read_as_recorded:
            read[name] = given
            continue
        synced = getattr(how, name)
        if given and _compared(name, given) != _compared(name, synced):
            raise ConfigError(
                f"{root} was synced {_read_with(name, synced)}, not {_read_with(name, given)}: "
                "without PATH every recorded folder is read as it was synced (pass the folder "
                "to read it otherwise)"
            )
        read[name] = synced
    fmt = read.pop("format")
    return fmt, replace(inputs.parse, **read)
