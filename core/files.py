"""Documents from files: what ``rechunk sync PATH...`` reads."""

from __future__ import annotations

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
    """Documents read from files, and the files that were skipped (with why)."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)


def _candidates(root: Path, globs: Sequence[str]) -> list[Path]:
    found: set[Path] = set()
    for pattern in globs:
        found.update(p for p in root.rglob(pattern) if p.is_file())
    hidden = [p for p in found if any(part.startswith(".") for part in p.relative_to(root).parts)]
    return sorted(found - set(hidden))


def read_documents(paths: Sequence[str | Path], globs: Sequence[str] = DEFAULT_GLOBS) -> FileSet:
    """Read every matching file under ``paths`` (folders are searched recursively).

    ``doc_id`` is the file's path relative to the folder given (POSIX separators),
    or its name for a file given directly; the revision is a hash of the text. A
    file that is not valid UTF-8, holds NUL bytes or is blank is skipped and
    listed with the reason; hidden files and folders are ignored.
    """
    out = FileSet()
    seen: dict[str, Path] = {}
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            files = [(p, p.relative_to(root).as_posix()) for p in _candidates(root, globs)]
        elif root.is_file():
            files = [(root, root.name)]
        else:
            raise ConfigError(f"no such file or folder: {root}")
        out.roots.append(str(root.resolve()))
        for path, doc_id in files:
            if doc_id in seen and seen[doc_id] != path:
                raise ConfigError(
                    f"two files map to the same doc_id {doc_id!r}: {seen[doc_id]} and {path}"
                )
            seen[doc_id] = path
            try:
                text = read_text_file(path)
            except InputError as exc:
                out.skipped.append((doc_id, str(exc)))
                continue
            if not text.strip():
                out.skipped.append((doc_id, f"{path} is empty"))
                continue
            out.documents.append(Document(doc_id, text))
    return out
