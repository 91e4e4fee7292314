"""How a text file's bytes become its text: the rule text, Markdown, RST, AsciiDoc, Org,
LaTeX, CSV and code files share (HTML reads its declared charset first; JSON, notebooks
and e-mail name theirs).

1. A byte-order mark decides: UTF-8, UTF-16 or UTF-32, little- or big-endian. The mark
   is encoding, not text, and is removed.
2. Otherwise the bytes are read as UTF-8. A file that decodes as UTF-8 and holds no NUL
   character is UTF-8 in practice, whatever else it might also decode as.
3. Otherwise, for code, the encoding a coding declaration on its first or second line
   names (Python's ``# -*- coding: latin-1 -*-``, PEP 263; Ruby and Emacs write it so
   too): the file's own word on itself, before the user's. Latin-1 is read as cp1252
   where it decodes, as browsers read the label.
4. Otherwise, where the user named an encoding (``--encoding cp1252``,
   ``ParseOptions.encoding``), the bytes are read in it. UTF-16 without a byte-order
   mark decodes as UTF-8 full of NULs, so it reaches this step too.
5. Otherwise, where the user asked for detection (a LangChain ``TextLoader``'s
   ``autodetect_encoding``), the encoding charset-normalizer names (``formats`` extra)
   is tried.

Whatever fails is a :class:`ParseError` naming the byte where UTF-8 (and the named
encoding) failed, or the NUL, so the file is skipped with its reason. The same bytes and
options give the same text on every run: a changed ``--encoding`` changes the text of
the files it reads, and only those are embedded again.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

from rechunk._optional import require
from rechunk.errors import ConfigError
from rechunk.sources.base import ParseError

__all__ = ["check_encoding", "declared_encoding", "decode_text", "decode_text_as", "text_codec"]

# UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_BINARY = "contains NUL bytes; is it a binary file?"
_NUL = "NUL bytes"
_SNIFF_BYTES = 4096  # of a file without a mark, looked at for UTF-16's pattern


_TS_PACKET = 188  # an MPEG transport stream: packets of 188 bytes, each opening with 0x47
_CONTROL = frozenset(range(32)) - {0, 9, 10, 11, 12, 13, 27}  # not whitespace, ESC or NUL
_CONTROL_SHARE = 0.1  # of a file's head; random bytes hold about 10%, text none


def binary_container(data: bytes) -> bool:
    """Whether ``data`` opens as an MPEG transport stream (a video saved as ``.ts``): the
    sync byte 0x47 at the start of four packets running."""
    return len(data) >= 4 * _TS_PACKET and all(
        data[k * _TS_PACKET] == 0x47 for k in range(4)
    )


def not_text(data: bytes) -> bool:
    """Whether bytes that did not read as text are a binary file's: NUL bytes or a tenth
    of the head in control characters no text holds, unless they look like UTF-16 or
    UTF-32 without a byte-order mark (text, which ``--encoding`` reads)."""
    head = data[:8192]
    if _utf16_unmarked(head) or _utf32_unmarked(head):
        return False
    if b"\x00" in head:
        return True
    return bool(head) and sum(b in _CONTROL for b in head) > _CONTROL_SHARE * len(head)


def _utf32_unmarked(data: bytes) -> bool:
    """Whether ``data`` looks like UTF-32 of mostly Latin text without a byte-order mark:
    most units of four bytes hold one byte that is not zero, at one end."""
    units = [data[i : i + 4] for i in range(0, len(data) - 3, 4)]
    if len(units) < 4:
        return False
    latin = sum(u[1:] == b"\0\0\0" or u[:3] == b"\0\0\0" for u in units)
    return latin > 0.6 * len(units)


#: codecs Python counts as text encodings that are no file's encoding: domain-name labels
#: (whose errors quote the text they failed on) and the codec that always fails
_NOT_FILE_ENCODINGS = frozenset({"idna", "punycode", "undefined"})


def text_codec(name: str) -> str | None:
    """``name`` as Python's codec registry knows it (``latin1`` -> ``iso8859-1``) when it
    names an encoding a file's text can be saved in, else None: not a codec, a codec of
    bytes to bytes or text to text (base64, zlib, rot13), or one for domain names (idna,
    punycode), whose errors quote the text. A file's own declaration names any of these,
    so every decode goes through here first."""
    try:
        codec = codecs.lookup(name)
    except (LookupError, TypeError, ValueError):
        return None
    if not getattr(codec, "_is_text_encoding", True) or codec.name in _NOT_FILE_ENCODINGS:
        return None
    return codec.name


def check_encoding(name: str | None) -> str | None:
    """``name`` as Python's codec registry knows it (``latin1`` -> ``iso8859-1``), or a
    :class:`ConfigError` when it names no text encoding (:func:`text_codec`); None stays
    None."""
    if name is None:
        return None
    codec = text_codec(name)
    if codec is None:
        raise ConfigError(
            f"encoding {name!r}: not an encoding text files are saved in that Python knows "
            "(e.g. cp1252, latin-1, shift_jis, utf-16)"
        )
    return codec


#: PEP 263's rule for a coding declaration, on one line of bytes
_DECLARATION = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT = re.compile(rb"^[ \t\f]*(?:[#\r\n]|$)")


def declared_encoding(data: bytes) -> str | None:
    """The text encoding a coding declaration names, as Python's codec registry knows
    it: a comment line matching PEP 263's ``coding[:=]NAME`` on the first line, or on the
    second after a first that is blank or a comment (``#!/usr/bin/env python``). None
    when there is none or it names no text encoding."""
    lines = data[:1024].splitlines(keepends=True)[:2]
    for number, line in enumerate(lines):
        found = _DECLARATION.match(line)
        if found:
            try:
                return check_encoding(found.group(1).decode("ascii"))
            except (ConfigError, UnicodeDecodeError):
                return None
        if number == 0 and not _BLANK_OR_COMMENT.match(line):
            return None
    return None


def _attempt(data: bytes, encoding: str, skip: int = 0) -> tuple[str | None, str]:
    """``(text, "")`` if ``data[skip:]`` decodes in ``encoding`` without a NUL, else
    ``(None, why)`` (a byte offset counts from the start of ``data``)."""
    try:
        text = data[skip:].decode(encoding)
    except UnicodeDecodeError as exc:
        return None, f"byte offset {exc.start + skip}"
    except UnicodeError:  # a codec's own complaint, which may quote the text: never shown
        return None, "cannot decode"
    if "\x00" in text:
        return None, _NUL
    return text, ""


def _utf16_unmarked(data: bytes) -> str | None:
    """``utf-16-le`` / ``utf-16-be`` when ``data`` looks like UTF-16 without a byte-order
    mark, else None: of mostly Latin text (every other byte zero, the rest not), or of
    another script (Cyrillic, CJK: few zero bytes, from its spaces, digits and line ends)
    whose head reads in one byte order as text, with no NUL or other control character.
    A hint for the error message only: nothing is ever read by it."""
    pairs = min(len(data), _SNIFF_BYTES) // 2
    if pairs < 4:
        return None
    sample = data[: 2 * pairs]
    even, odd = sample[0::2].count(0) / pairs, sample[1::2].count(0) / pairs
    if odd > 0.6 and even < 0.05:
        return "utf-16-le"
    if even > 0.6 and odd < 0.05:
        return "utf-16-be"
    if b"\x00" not in sample:  # UTF-16 of text with a space or a line end holds some
        return None
    readable = [name for name in ("utf-16-le", "utf-16-be") if _reads_as_text(sample, name)]
    return readable[0] if len(readable) == 1 else None


def _reads_as_text(sample: bytes, codec: str) -> bool:
    """Whether ``sample`` decodes in ``codec`` to characters that are all printable or
    whitespace (a surrogate pair cut at the sample's end aside); random or binary bytes
    give unpaired surrogates, control characters or NULs within a few hundred units."""
    text = sample.decode(codec, errors="replace")
    if text.endswith("\ufffd"):
        text = text[:-1]
    return bool(text) and all(ch.isprintable() or ch in "\t\n\r\f\v" for ch in text)


def _detected(data: bytes) -> str | None:
    """The encoding charset-normalizer finds most likely for ``data``, if any."""
    charset_normalizer = require("charset_normalizer", "formats", "charset-normalizer")
    best = charset_normalizer.from_bytes(data).best()
    return None if best is None else str(best.encoding)


def _candidates(
    data: bytes, encoding: str | None, detect: bool, declared: str | None
) -> Iterator[str]:
    """The encodings to try in turn (detection runs only if the others failed)."""
    yield "utf-8"
    if declared == "iso8859-1":
        # as browsers read a page labelled latin-1 (WHATWG): such files are mostly saved by
        # Windows tools, with cp1252's quotes and dashes where latin-1 has control codes
        yield "cp1252"
    if declared is not None:
        yield declared
    if encoding is not None:
        yield encoding
    if detect:
        found = _detected(data)
        if found is not None:
            yield found


def decode_text(data: bytes, encoding: str | None = None, *, detect: bool = False) -> str:
    """A text file's text by the module's rule: its byte-order mark, else UTF-8, else
    ``encoding`` (a name :func:`check_encoding` accepts), else, with ``detect``, the
    encoding detected. Raises :class:`ParseError` with the reason."""
    return decode_text_as(data, encoding, detect=detect)[0]


def decode_text_as(
    data: bytes,
    encoding: str | None = None,
    *,
    detect: bool = False,
    declared: str | None = None,
) -> tuple[str, str]:
    """:func:`decode_text`, and the codec that read the text, as Python names it
    (``utf-8``, ``utf-16-le``, ``cp1252``, ``iso8859-1``). ``declared``: the encoding the
    file names itself (:func:`declared_encoding`), tried before ``encoding``."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            text, why = _attempt(data, name, len(bom))
            if text is None:
                reason = _BINARY if why == _NUL else f"not valid {name.upper()} ({why})"
                raise ParseError(f"{reason}, despite its byte-order mark")
            return text, name
    if encoding is None and b"\x00" in data[:_SNIFF_BYTES] and _utf16_unmarked(data) is None:
        # no text file holds NUL bytes (but UTF-16 and UTF-32 without a mark, which an
        # encoding names): "not valid UTF-8, name its encoding" sent a user to --encoding
        raise ParseError(_BINARY)
    failures: dict[str, str] = {}  # codec name -> why it failed
    for candidate in _candidates(data, encoding, detect, declared):
        codec = codecs.lookup(candidate).name
        if codec in failures:
            continue
        text, why = _attempt(data, candidate)
        if text is not None:
            return text, codec
        failures[codec] = why
    if len(failures) == 1 and (unmarked := _utf16_unmarked(data)) is not None:
        raise ParseError(
            f"looks like UTF-16 without a byte-order mark: sync it alone with --encoding "
            f"{unmarked} (encoding={unmarked!r} in Python; the option applies to every file "
            "read that is not UTF-8)"
        )
    if _NUL in failures.values():  # the encoding named read it, NUL bytes and all
        raise ParseError(_BINARY)
    if len(failures) == 1:
        raise ParseError(
            f"not valid UTF-8 ({failures['utf-8']}): name the encoding it was saved in "
            "(--encoding; encoding= in Python) to read it"
        )
    tried = ", ".join(f"{name} ({why})" for name, why in failures.items())
    raise ParseError(f"not valid text in any encoding tried: {tried}")
