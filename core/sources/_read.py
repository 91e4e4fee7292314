"""Reading a file's bytes, for :mod:`rechunk.sources.files` (documents) and
:mod:`rechunk.sources.generated` (a built site's markers): one reader, which never opens a
special file (a FIFO would block until a writer came, a device might never end).

A module of its own because ``files`` imports ``generated``; both import this.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rechunk.errors import InputError

__all__ = ["mode_kind", "read_bytes", "special_kind"]

#: What a file that is neither a regular file nor a folder is, by its mode.
_SPECIAL_KINDS = (
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
)


def mode_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is neither a regular file nor a
    folder (``"FIFO"``...), else None."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), "special file")


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` (its link followed) is when it exists but is neither a regular file
    nor a folder (``"character device"``, ``"block device"``, ``"FIFO"``, ``"socket"``),
    else None. Only its metadata is read: a special file is never opened (opening a FIFO
    blocks until a writer comes; a device may act on being opened)."""
    try:
        return mode_kind(os.stat(path).st_mode)
    except (OSError, ValueError):
        return None


def read_bytes(path: Path, limit: int = -1) -> bytes:
    """A regular file's bytes (its first ``limit``, if given); a file that is not a regular
    file (a device, a FIFO: never opened) or cannot be read is an :class:`InputError`."""
    kind = special_kind(path)
    if kind is not None:
        raise InputError(f"{path} is not a regular file ({kind})")
    try:
        # non-blocking, in case it became a FIFO since: then it is refused, not waited on
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as file:
            kind = mode_kind(os.fstat(file.fileno()).st_mode)
            if kind is not None:
                raise InputError(f"{path} is not a regular file ({kind})")
            data = file.read(limit)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return data
