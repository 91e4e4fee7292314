"""Which paths under a watched folder ``rechunk sync`` would read: the same globs,
``.gitignore`` rules and hidden-name rule as :func:`rechunk.sources.files.read_documents`'s walk,
answered for one path at a time (a file event names one path)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rechunk.sources.files import globs_regex
from rechunk.sources.ignore import IgnoreRules

__all__ = ["Selection"]


class Selection:
    """The files a sync of ``root`` reads, decided per path.

    A path is read when no part of it below ``root`` is hidden (starts with ``.``), no
    folder on the way and not the file itself is excluded by ``.gitignore`` (when
    ``gitignore``) or ``.rechunkignore``, and ``globs`` match its path relative to
    ``root``. Those files are read again after :meth:`refresh` (a watcher calls it when
    one of them changes).
    """

    def __init__(self, root: str | os.PathLike[str], globs: Sequence[str], gitignore: bool) -> None:
        self.root = Path(root)
        self.real = self.root.resolve()
        self._pattern = globs_regex(globs)
        self._gitignore = gitignore
        self.refresh()

    def refresh(self) -> None:
        """Forget the ``.gitignore`` and ``.rechunkignore`` rules read so far."""
        self._rules: IgnoreRules = IgnoreRules(self.root, self._gitignore)

    def relative(self, path: str | os.PathLike[str]) -> tuple[str, ...] | None:
        """``path``'s parts below the root (``()`` for the root itself), or None outside it."""
        absolute = Path(os.path.abspath(path))
        for base in (self.real, Path(os.path.abspath(self.root))):
            try:
                return absolute.relative_to(base).parts
            except ValueError:
                continue
        return None

    def hidden(self, parts: tuple[str, ...]) -> bool:
        return any(part.startswith(".") for part in parts)

    def folder_read(self, parts: tuple[str, ...]) -> bool:
        """Whether the walk enters the folder ``parts`` (the root: ``()``)."""
        if self.hidden(parts):
            return False
        return not any(
            self._rules.ignores(parts[:i], folder=True) for i in range(1, len(parts) + 1)
        )

    def file_read(self, parts: tuple[str, ...]) -> bool:
        """Whether the file ``parts`` is read (given it is a file)."""
        if not parts or not self.folder_read(parts[:-1]) or parts[-1].startswith("."):
            return False
        if self._rules.ignores(parts, folder=False):
            return False
        return self._pattern.fullmatch("/".join(parts)) is not None
