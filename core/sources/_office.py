"""What the Office parsers share: refusing the files Office keeps in an OLE container,
and reading a ZIP package's XML parts within a size limit."""

from __future__ import annotations

import io
import zipfile
import zlib
from xml.etree import ElementTree as ET

from rechunk.sources.base import ParseError, error_kind

__all__ = ["ZIP_ERRORS", "open_package", "read_part", "reject_ole", "xml_part"]

# what reading a damaged ZIP package raises, beyond BadZipFile: a corrupt deflate stream
# (zlib.error), a member cut short (EOFError), an unknown compression method or ZIP
# version (NotImplementedError), a member encrypted with a password (RuntimeError)
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,
    RuntimeError,
)
MAX_PART = 1 << 30  # bytes a part may inflate to: past this the file is refused
# a part that inflates to more than BOMB_RATIO times its compressed size and past
# BOMB_BYTES is refused too: a zip bomb's ratio (a 442 KB package whose document part
# inflated to 419 MB, 1,000 times, ran a sync out of memory; DEFLATE's limit is about
# 1,032); real parts inflate 5-30 times, and a report's table of 20,000 like rows 116
BOMB_RATIO = 500
BOMB_BYTES = 16 << 20

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# a password-protected OOXML file is an OLE compound file holding these two streams;
# directory entry names are UTF-16LE
_ENCRYPTION_INFO = "EncryptionInfo".encode("utf-16-le")


def reject_ole(data: bytes, legacy: str, suffix: str) -> None:
    """A :class:`ParseError` for an OLE compound file given as an OOXML package: a
    password-protected one (``encrypted``), or a legacy binary file such as a ``.doc``
    (``legacy`` names it) renamed to ``suffix``."""
    if not data.startswith(OLE_MAGIC):
        return
    if _ENCRYPTION_INFO in data:
        raise ParseError(
            "encrypted: the file is password-protected; remove the password and save again"
        )
    raise ParseError(f"a legacy binary {legacy} file, not {suffix}: save it as {suffix} to read it")


def open_package(data: bytes, what: str) -> zipfile.ZipFile:
    """The ZIP package ``data``; one that cannot be opened is a :class:`ParseError`
    (``corrupt: not <what> (...)``)."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (*ZIP_ERRORS, ValueError) as exc:
        raise ParseError(f"corrupt: not {what} ({error_kind(exc)})") from None


def read_part(zf: zipfile.ZipFile, name: str) -> bytes | None:
    """The bytes of part ``name`` (None if the package has none); a part that inflates
    past :data:`MAX_PART`, or as a zip bomb does (:data:`BOMB_RATIO`), or cannot be
    read is a :class:`ParseError`. (A member never inflates past the size its entry
    states: :mod:`zipfile` stops there.)"""
    try:
        info = zf.getinfo(name)
    except KeyError:
        return None
    size = info.file_size
    if size > MAX_PART:
        raise ParseError(f"corrupt: part {name} inflates to {size} bytes")
    if size > BOMB_BYTES and size > BOMB_RATIO * info.compress_size:
        raise ParseError(
            f"corrupt: part {name} inflates {size // max(info.compress_size, 1):,} times, "
            f"to {size:,} bytes, as a zip bomb does"
        )
    try:
        return zf.read(info)
    except (*ZIP_ERRORS, OSError, ValueError) as exc:
        raise ParseError(f"corrupt: part {name} cannot be read ({error_kind(exc)})") from None


def xml_part(zf: zipfile.ZipFile, name: str) -> ET.Element | None:
    """Part ``name`` parsed as XML (None if the package has none)."""
    raw = read_part(zf, name)
    if raw is None:
        return None
    try:
        return ET.fromstring(raw)
    except ET.ParseError as exc:
        raise ParseError(
            f"corrupt: part {name} is not well-formed XML ({error_kind(exc)})"
        ) from None
