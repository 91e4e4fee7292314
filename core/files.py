"""Documents from files: what ``rechunk sync PATH...`` reads."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rechunk.document import Document
from rechunk.errors import ConfigError, InputError

__all__ = ["DEFAULT_GLOBS", "FileSet", "read_documents", "read_text_file"]

DEFAULT_GLOBS = ("*.md", "*.markdown", "*.rst", "*.txt")


def read_text_file(path: Path) -> str:
    """A file's text as UTF-8 (without a leading byte-order mark); invalid UTF-8 or NUL
    bytes are an :class:`InputError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not valid UTF-8 (byte offset {exc.start})") from exc
    if "\x00" in text:
        raise InputError(f"{path} contains NUL bytes; is it a binary file?")
    return text.removeprefix("\ufeff")  # a byte-order mark is encoding, not text


@dataclass
class FileSet:
    """Documents read from files, and what was left out.

    ``skipped``: ``(doc_id, reason)`` of files that could not be read, and of folders
    that could not be listed (shown as ``folder/``). ``unlisted``: the doc_id prefix
    of each such folder (``""`` for a whole root). ``empty``: doc_ids of empty or
    blank files.
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)

    def covers(self, doc_id: str) -> bool:
        """Whether ``doc_id`` may be a file that exists but was not read: a skipped file,
        or any file under a folder that could not be listed. Its documents are kept."""
        return any(doc_id == skipped for skipped, _ in self.skipped) or any(
            doc_id.startswith(prefix) for prefix in self.unlisted
        )


def _check_globs(globs: Sequence[str]) -> None:
    for pattern in globs:
        if not pattern or Path(pattern).is_absolute():
            raise ConfigError(
                f"--glob {pattern!r}: a pattern is a file name pattern relative to each folder "
                "(such as '*.md' or 'guides/*.rst')"
            )


def _candidates(root: Path, globs: Sequence[str]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Matching files under ``root`` (hidden files and folders left out), and the folders
    that could not be listed, with why."""
    found: set[Path] = set()
    try:
        for pattern in globs:
            found.update(p for p in root.rglob(pattern) if p.is_file())
    except (NotImplementedError, ValueError) as exc:
        raise ConfigError(f"--glob: {exc}") from None
    hidden = [p for p in found if any(part.startswith(".") for part in p.relative_to(root).parts)]
    # rglob passes over a folder it cannot list in silence: find them, so that their
    # documents are reported as skipped (and kept), not taken for deleted
    unreadable: list[tuple[Path, str]] = []

    def failed(exc: OSError) -> None:
        unreadable.append((Path(exc.filename), exc.strerror or str(exc)))

    for _folder, subfolders, _files in os.walk(root, onerror=failed):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
    return sorted(found - set(hidden)), unreadable


def _printable(doc_id: str) -> str:
    """``doc_id`` with anything that cannot be printed as UTF-8 escaped."""
    return doc_id.encode("utf-8", "backslashreplace").decode("utf-8")


def read_documents(
    paths: Sequence[str | Path],
    globs: Sequence[str] = DEFAULT_GLOBS,
    *,
    within: Sequence[str | Path] = (),
) -> FileSet:
    """Read every matching file under ``paths`` (folders are searched recursively).

    ``doc_id`` is the file's path relative to the folder given (POSIX separators).
    A file given directly is named relative to the first folder of ``within`` that
    holds it (the folders synced before), else by its name. A file reached twice
    (overlapping paths, a symbolic link to a file also found directly) is read once,
    under its first doc_id. A file that cannot be read, is not valid UTF-8, holds
    NUL bytes or has a name that is not valid UTF-8 is skipped with the reason, and
    so is a folder that cannot be listed; an empty or blank file is listed in
    ``empty``; hidden files and folders are ignored.
    """
    _check_globs(globs)
    homes = [Path(folder).resolve() for folder in within]
    out = FileSet()
    by_id: dict[str, Path] = {}
    read: set[Path] = set()
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            candidates, unreadable = _candidates(root, globs)
            files = [(p, p.relative_to(root).as_posix()) for p in candidates]
            for folder, why in unreadable:
                prefix = "" if folder == root else f"{folder.relative_to(root).as_posix()}/"
                out.unlisted.append(prefix)
                out.skipped.append((prefix or "./", f"cannot read folder {folder}: {why}"))
        elif root.is_file():
            resolved = root.resolve()
            home = next((h for h in homes if resolved.is_relative_to(h)), None)
            files = [(root, resolved.relative_to(home).as_posix() if home else root.name)]
        else:
            raise ConfigError(f"no such file or folder: {root}")
        out.roots.append(str(root.resolve()))
        # real files before symbolic links to them, so that a file keeps its own name
        for path, doc_id in sorted(files, key=lambda item: item[0].is_symlink()):
            real = path.resolve()
            if real in read:
                continue
            if doc_id in by_id:
                raise ConfigError(
                    f"two files map to the same doc_id {doc_id!r}: {by_id[doc_id]} and {path}"
                )
            by_id[doc_id] = path
            read.add(real)
            try:
                text = read_text_file(path)
                if not text.strip():
                    out.empty.append(doc_id)
                    continue
                out.documents.append(Document(doc_id, text))
            except InputError as exc:
                out.skipped.append((_printable(doc_id), str(exc)))
    return out
