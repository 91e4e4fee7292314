"""ODT: OpenDocument text (LibreOffice Writer's format, and what Google Docs and Word
export as ODF), from the package's ``content.xml``, read with the standard library.

What the text holds, in document order (the Markdown shape of
:class:`~rechunk.sources.base.TextBuilder`):

* headings (``text:h``, at their outline level; a paragraph in the ``Title`` style is a
  level-1 heading); heading numbering is not written (it renumbers every later heading
  when one is inserted);
* paragraphs; a paragraph in a preformatted or source-code style is code (consecutive
  ones in one fence, spaces, tabs and line breaks kept), one in the ``Quotations`` style
  a quote; styles are followed through their parents, automatic styles included;
* list items at their nesting depth, numbered where the list's style numbers that level
  (counted per list, from the level's start value), else bullets;
* tables, a row per line (header rows, row groups; repeated rows and cells as written);
* what sections and text boxes (frames anchored in a paragraph, after it) hold;
* tracked changes accepted: inserted text is inline; deleted text lives in a region of
  its own, which is not read.

Not in the text: page headers and footers (in ``styles.xml``: never read), tables of
contents and other indexes, footnotes and endnotes, comments, page numbers, page counts
and the dates and times a field shows (they change when the file is opened or printed),
images and embedded objects. ``title`` comes from the document's metadata.

A file that is not a ZIP package, is not an OpenDocument text (its ``mimetype``), or
is password-protected (its parts are encrypted) is a
:class:`~rechunk.sources.base.ParseError`; so is a legacy binary ``.doc`` renamed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rechunk.sources._odf import Styles, Walker, open_odf
from rechunk.sources.base import NoTextError, Parsed

if TYPE_CHECKING:
    from rechunk.sources.registry import ParseOptions

__all__ = ["OdtParser"]


class OdtParser:
    """OpenDocument text (``.odt``, ``.ott``): see the module docstring."""

    name = "odt"
    suffixes = (".odt", ".ott")

    def version(self) -> str:
        return "odt/1"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        package = open_odf(data, "text", "Word (.doc)", ".odt")
        walker = Walker(Styles(package.style_roots()))
        body = package.body("text")
        if body is not None:
            walker.blocks(body)
        walker.flush()
        if walker.out.empty:
            raise NoTextError("no text: the document body is empty")
        return [walker.out.build(self.name, self.version(), metadata=package.title())]
