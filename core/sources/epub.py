"""EPUB (``.epub``): books, manuals and reports published as e-books.

An EPUB is a ZIP package: ``META-INF/container.xml`` names the package document (OPF),
whose spine lists the content documents (XHTML) in reading order. Each one is read by
the HTML parser's writer (:func:`rechunk.sources.html.write_html`), so its headings,
lists, tables and code come out as they do from a web page; its blocks carry
``{"chapter": n}``, the content document's place in the spine (1-based), which a chunk
cites as ``chapters``. The navigation document (the book's table of contents) is left
out, as a page's menu is, and so is a content document with no text (a cover image).

The book is one document; its title (``dc:title``) is in the metadata. A package whose
content documents are encrypted (DRM) is refused with that reason; font obfuscation,
which EPUB also records as encryption, is not encryption of the text and is read. Parts
are read within the size limit of the Office parsers.
"""

from __future__ import annotations

import posixpath
import zipfile
from typing import Any
from urllib.parse import unquote
from xml.etree import ElementTree as ET

from rechunk.sources._office import open_package, read_part, xml_part
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = ["EpubParser"]

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
# the algorithms EPUB uses to obfuscate embedded fonts (not encryption of the text)
_FONT_OBFUSCATION = frozenset(
    {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
)
_DOCUMENTS = frozenset({"application/xhtml+xml", "text/html"})


def _rootfile(zf: zipfile.ZipFile) -> str:
    container = xml_part(zf, "META-INF/container.xml")
    if container is None:
        raise ParseError("not an EPUB: the package has no META-INF/container.xml")
    for rootfile in container.iter(f"{_CONTAINER}rootfile"):
        path = rootfile.get("full-path")
        if path and rootfile.get("media-type", "application/oebps-package+xml").endswith(
            "package+xml"
        ):
            return path
    raise ParseError("corrupt: container.xml names no package document")


def _encrypted_text(zf: zipfile.ZipFile) -> bool:
    """Whether ``META-INF/encryption.xml`` encrypts anything but fonts."""
    encryption = xml_part(zf, "META-INF/encryption.xml")
    if encryption is None:
        return False
    for data in encryption.iter(f"{_ENC}EncryptedData"):
        method = data.find(f"{_ENC}EncryptionMethod")
        if method is None or method.get("Algorithm") not in _FONT_OBFUSCATION:
            return True
    return False


def _spine(package: ET.Element, base: str) -> list[str]:
    """The content documents in reading order, as paths in the package (the navigation
    document left out)."""
    manifest: dict[str, tuple[str, str, str]] = {}
    for item in package.iter(f"{_OPF}item"):
        ident, href = item.get("id"), item.get("href")
        if ident and href:
            properties = item.get("properties", "")
            manifest[ident] = (href, item.get("media-type", ""), properties)
    paths = []
    spine = package.find(f"{_OPF}spine")
    for itemref in spine.iter(f"{_OPF}itemref") if spine is not None else ():
        found = manifest.get(itemref.get("idref", ""))
        if found is None:
            continue
        href, media_type, properties = found
        if media_type in _DOCUMENTS and "nav" not in properties.split():
            paths.append(posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0]))))
    return paths


class EpubParser:
    """EPUB: the book's content documents in spine order, read as HTML pages (see the
    module docstring)."""

    name = "epub"
    suffixes = FORMATS["epub"][1]

    def version(self) -> str:
        return "epub/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        from rechunk.sources.html import decode_html, write_html

        builder = TextBuilder()
        replaced = False
        with open_package(data, "an EPUB package") as zf:
            rootfile = _rootfile(zf)
            if _encrypted_text(zf):
                raise ParseError(
                    "encrypted: the book's text is protected (DRM); read a copy without it"
                )
            package = xml_part(zf, rootfile)
            if package is None:
                raise ParseError("corrupt: the package document container.xml names is missing")
            base = posixpath.dirname(rootfile)
            for number, path in enumerate(_spine(package, base), 1):
                raw = read_part(zf, path)
                if raw is None:
                    continue  # a spine entry the package lacks: the rest is still read
                try:
                    markup, _, bad = decode_html(
                        raw, options.encoding, detect=options.detect_encoding
                    )
                except ParseError:  # XHTML that declares nothing is UTF-8 (EPUB's rule):
                    # a stray byte in one chapter is replaced, not a reason to skip the book
                    markup, bad = raw.decode("utf-8", errors="replace"), True
                    if "\x00" in markup:
                        raise
                replaced = replaced or bad
                write_html(markup, builder, options, locator={"chapter": number})
        if builder.empty:
            raise NoTextError("no text: the book's content documents hold no text")
        metadata: dict[str, Any] = {}
        if replaced:
            metadata["invalid_bytes"] = True
        title = package.findtext(f".//{_DC}title")
        if title and title.strip():
            metadata["title"] = " ".join(title.split())
        return [builder.build(self.name, self.version(), metadata=metadata)]
