"""Griffe extension: show the docstrings' Sphinx roles as code in the API pages.

The sources write cross-references as reStructuredText roles (``:class:`~rechunk.Chunk```,
``:func:`rechunk.sync```), which Markdown would print as they are. This extension turns
each into inline code of the name a reader sees (the last part after ``~``, else the
whole path) when mkdocstrings loads the sources; nothing else in a docstring changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const):`(~?)([^`]+)`")


def plain(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    if "<" in target and target.endswith(">"):  # :class:`title <target>`
        return f"`{target.split('<', 1)[0].strip()}`"
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(plain, obj.docstring.value)
