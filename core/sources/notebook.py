"""Jupyter notebooks (``.ipynb``): the cells' sources, outputs dropped.

Read as JSON (nbformat 4, and the ``worksheets`` of nbformat 3; no ``nbformat``
dependency), written with :class:`~rechunk.sources.base.TextBuilder`:

* a markdown cell: its CommonMark blocks (:func:`rechunk.sources.text.markdown_items`,
  markdown-it-py from the ``formats`` extra): headings keep their level, paragraphs,
  list items with their depth and number, fenced code with its language, quotes,
  tables; an HTML block goes through the HTML parser;
* a code cell: fenced code in the kernel's language (``metadata.kernelspec.language``,
  else ``metadata.language_info.name``); its outputs (results, plots, tracebacks) are
  not text of the notebook and are dropped;
* a raw cell: paragraphs at blank lines (an nbformat 3 heading cell: a heading).

Every block's locator is ``{"cell": n}``, the 1-based position of its cell among all
cells (empty ones included), as Jupyter numbers them. ``metadata``: ``language`` and
``title`` (the first level-1 heading), when there are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rechunk._optional import require
from rechunk.sources.base import NoTextError, Parsed, ParseError, TextBuilder, clean_inline
from rechunk.sources.registry import FORMATS, ParseOptions

__all__ = ["NotebookParser", "load_json", "write_markdown"]


def load_json(data: bytes) -> Any:
    """The JSON value of a UTF-8 file (a byte-order mark allowed); a :class:`ParseError`
    that names the line and column when it is not JSON."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not valid UTF-8 (byte offset {exc.start})") from None
    if not text.strip():
        raise ParseError("empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise ParseError("not readable JSON: nested too deeply") from None


def _source(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(line) for line in value)
    return value if isinstance(value, str) else ""


def _cells(notebook: Any) -> list[Mapping[str, Any]]:
    if isinstance(notebook, dict):
        if isinstance(notebook.get("cells"), list):
            cells = notebook["cells"]
        elif isinstance(notebook.get("worksheets"), list):  # nbformat 3
            cells = [
                cell
                for sheet in notebook["worksheets"]
                if isinstance(sheet, dict)
                for cell in sheet.get("cells") or []
            ]
        else:
            cells = None
        if cells is not None:
            return [cell if isinstance(cell, dict) else {} for cell in cells]
    raise ParseError("not a Jupyter notebook (no cells)")


def _language(notebook: Mapping[str, Any]) -> str:
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field), str):
            return str(section[field]).strip()
    return ""


def write_markdown(text: str, builder: TextBuilder, **locator: Any) -> str:
    """Write the blocks of a Markdown text into ``builder`` (needs markdown-it-py); the
    text of its first level-1 heading, or ''."""
    from rechunk.sources.html import write_html
    from rechunk.sources.text import markdown_items

    first_h1 = ""
    for item in markdown_items(text):
        if item.kind == "heading":
            builder.heading(item.content, item.level, **locator)
            if item.level == 1 and not first_h1:
                first_h1 = clean_inline(item.content)
        elif item.kind == "paragraph":
            builder.paragraph(item.content, **locator)
        elif item.kind == "quote":
            builder.quote(item.content, **locator)
        elif item.kind == "list_item":
            builder.list_item(item.content, item.depth, item.number, **locator)
        elif item.kind == "code":
            builder.code(item.content, item.language, **locator)
        elif item.kind == "table":
            builder.table(item.rows, **locator)
        elif item.kind == "html":
            write_html(item.content, builder, locator=locator)
    return first_h1


class NotebookParser:
    """Jupyter notebooks: markdown cells as Markdown blocks, code cells fenced."""

    name = "ipynb"
    suffixes = FORMATS["ipynb"][1]

    def version(self) -> str:
        markdown_it = require("markdown_it", "formats", "markdown-it-py")
        return f"ipynb/1 markdown-it-py {markdown_it.__version__}"

    def parse(self, data: bytes, options: ParseOptions) -> list[Parsed]:
        from rechunk.sources.email import write_plain_text

        notebook = load_json(data)
        cells = _cells(notebook)
        language = _language(notebook)
        builder = TextBuilder()
        title = ""
        for number, cell in enumerate(cells, 1):
            kind = cell.get("cell_type")
            if kind == "code":
                source = _source(cell.get("source", cell.get("input")))
                builder.code(source, language, cell=number)
            elif kind == "markdown":
                source = _source(cell.get("source"))
                first_h1 = write_markdown(source, builder, cell=number)
                title = title or first_h1
            elif kind == "heading":  # nbformat 3
                level = cell.get("level")
                source = _source(cell.get("source"))
                builder.heading(source, level if isinstance(level, int) else 1, cell=number)
                if not title and level == 1:
                    title = clean_inline(source)
            elif kind == "raw":
                write_plain_text(_source(cell.get("source")), builder, cell=number)
        if builder.empty:
            raise NoTextError("no text")
        metadata = {
            key: value for key, value in (("language", language), ("title", title)) if value
        }
        return [builder.build(self.name, self.version(), metadata=metadata)]
