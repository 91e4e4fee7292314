"""Documents from files: what ``rechunk sync PATH...`` reads."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

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
    blank files. ``ignored``: how many matching files ``.gitignore`` files excluded.
    ``links``: symbolic links to folders, which are not followed (shown as ``link/``).
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    ignored: int = 0
    links: list[str] = field(default_factory=list)

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


class _GitIgnore:
    """Which paths under a folder the ``.gitignore`` files exclude, by git's rules.

    The files in the folder and below apply, and so do those of the folders above it
    up to the top of its git repository (the nearest folder holding ``.git``). The
    deepest file with a line matching a path decides (its last matching line: a
    ``!pattern`` takes a path back in), so a folder's own ``.gitignore`` overrides
    its parents'. An excluded folder is not entered, so nothing under it comes back;
    the folder itself is read even if the files above it exclude it (it was named).
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        self._specs: dict[tuple[str, ...], GitIgnoreSpec | None] = {}
        self._above: list[tuple[tuple[str, ...], GitIgnoreSpec]] = []  # nearest first
        real = root.resolve()
        if (real / ".git").exists():
            return
        above: list[tuple[tuple[str, ...], GitIgnoreSpec]] = []
        for folder in real.parents:
            spec = _load_gitignore(folder)
            if spec is not None:
                above.append((real.relative_to(folder).parts, spec))
            if (folder / ".git").exists():
                self._above = above
                break
        # outside a repository the .gitignore files above the folder do not apply, and
        # a folder named on purpose is read even where they exclude it as a whole
        if self.ignores((), folder=True):
            self._above = []

    def _spec(self, parts: tuple[str, ...]) -> GitIgnoreSpec | None:
        if parts not in self._specs:
            self._specs[parts] = _load_gitignore(self._root.joinpath(*parts))
        return self._specs[parts]

    def ignores(self, parts: tuple[str, ...], folder: bool) -> bool:
        """Whether the path ``parts`` (relative to the root) is excluded."""
        tail = "/" if folder else ""
        for depth in range(len(parts) - 1, -1, -1):
            spec = self._spec(parts[:depth])
            if spec is not None:
                verdict = spec.check_file("/".join(parts[depth:]) + tail).include
                if verdict is not None:
                    return verdict
        for prefix, spec in self._above:
            verdict = spec.check_file("/".join(prefix + parts) + tail).include
            if verdict is not None:
                return verdict
        return False


def _load_gitignore(folder: Path) -> GitIgnoreSpec | None:
    try:
        lines = (folder / ".gitignore").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        return None  # none, or unreadable: git passes over it too
    return GitIgnoreSpec.from_lines(lines)


@dataclass
class _Found:
    files: list[Path]
    unreadable: list[tuple[Path, str]]
    ignored: int
    links: list[Path]


def _candidates(root: Path, globs: Sequence[str], gitignore: bool) -> _Found:
    """Matching files under ``root``, leaving out hidden files and folders, what the
    ``.gitignore`` files exclude (when ``gitignore``) and what lies behind a symbolic
    link to a folder; with the folders that could not be listed, with why, how many
    matching files ``.gitignore`` excluded, and the links to folders not followed."""
    matched: set[Path] = set()
    try:
        for pattern in globs:
            matched.update(root.rglob(pattern))
    except (NotImplementedError, ValueError) as exc:
        raise ConfigError(f"--glob: {exc}") from None
    ignore = _GitIgnore(root) if gitignore else None
    # walk the folders rglob may enter, so that a folder it cannot list is found (rglob
    # passes over it in silence: its documents must count as skipped, not deleted)
    unreadable: list[tuple[Path, str]] = []
    entered: set[Path] = set()
    excluded: set[Path] = set()
    links: list[Path] = []

    def failed(exc: OSError) -> None:
        unreadable.append((Path(exc.filename), exc.strerror or str(exc)))

    for folder, subfolders, _files in os.walk(root, onerror=failed):
        here = Path(folder)
        entered.add(here)
        parts = here.relative_to(root).parts
        kept = []
        for name in subfolders:
            if name.startswith("."):
                continue
            if ignore is not None and ignore.ignores((*parts, name), folder=True):
                excluded.add(here / name)
            elif os.path.islink(here / name):
                links.append(here / name)
            else:
                kept.append(name)
        subfolders[:] = kept
    files: list[Path] = []
    ignored = 0
    for path in matched:
        if path.name.startswith(".") or not path.is_file():
            continue
        if path.parent in entered:
            if ignore is not None and ignore.ignores(path.relative_to(root).parts, folder=False):
                ignored += 1
            else:
                files.append(path)
        elif any(parent in excluded for parent in path.parents):
            ignored += 1
    return _Found(sorted(files), unreadable, ignored, sorted(links))


def _printable(doc_id: str) -> str:
    """``doc_id`` with anything that cannot be printed as UTF-8 escaped."""
    return doc_id.encode("utf-8", "backslashreplace").decode("utf-8")


def read_documents(
    paths: Sequence[str | Path],
    globs: Sequence[str] = DEFAULT_GLOBS,
    *,
    within: Sequence[str | Path] = (),
    gitignore: bool = True,
) -> FileSet:
    """Read every matching file under ``paths`` (folders are searched recursively).

    ``doc_id`` is the file's path relative to the folder given (POSIX separators).
    A file given directly is named relative to the first folder of ``within`` that
    holds it (the folders synced before), else by its name. A file reached twice
    (overlapping paths, a symbolic link to a file also found directly) is read once,
    under its first doc_id. A file that cannot be read, is not valid UTF-8, holds
    NUL bytes or has a name that is not valid UTF-8 is skipped with the reason, and
    so is a folder that cannot be listed; an empty or blank file is listed in
    ``empty``; hidden files and folders are ignored, and so is what the ``.gitignore``
    files of a folder (and of the folders above it, up to the top of its git
    repository) exclude, unless ``gitignore`` is False. A file named directly is read
    whatever ``.gitignore`` says. Symbolic links to folders are not followed.
    """
    _check_globs(globs)
    homes = [Path(folder).resolve() for folder in within]
    out = FileSet()
    by_id: dict[str, Path] = {}
    read: set[Path] = set()
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            found = _candidates(root, globs, gitignore)
            files = [(p, p.relative_to(root).as_posix()) for p in found.files]
            out.ignored += found.ignored
            out.links.extend(
                f"{_printable(link.relative_to(root).as_posix())}/" for link in found.links
            )
            for folder, why in found.unreadable:
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
