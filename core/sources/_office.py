"""What the Office parsers share: refusing the files Office keeps in an OLE container."""

from __future__ import annotations

from rechunk.sources.base import ParseError

__all__ = ["reject_ole"]

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
