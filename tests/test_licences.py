"""The default install (the embedded default and the parsers: extras onnx, qdrant, formats,
code) holds no GPL or AGPL code: every distribution it pulls in, as installed, states a
licence that is neither (LGPL is named apart and also refused: none is needed)."""

from __future__ import annotations

import importlib.metadata as metadata
import re

import pytest
from packaging.requirements import Requirement

DEFAULT_EXTRAS = ("onnx", "qdrant", "formats", "code")
COPYLEFT = re.compile(r"\b(A|L)?GPL|General Public License")


def installed_tree(name: str, extras: tuple[str, ...] = ()) -> dict[str, str]:
    """Each distribution ``name`` with ``extras`` needs (as installed): its licence text."""
    found: dict[str, str] = {}
    todo = [(name, extras)]
    while todo:
        current, wanted = todo.pop()
        key = current.lower().replace("_", "-")
        if key in found:
            continue
        try:
            dist = metadata.distribution(current)
        except metadata.PackageNotFoundError:
            continue
        meta = dist.metadata
        classifiers = [c for c in meta.get_all("Classifier") or [] if c.startswith("License")]
        found[key] = " ".join(
            [meta.get("License-Expression") or "", (meta.get("License") or "")[:200], *classifiers]
        )
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not any(
                req.marker.evaluate({"extra": extra}) for extra in (wanted or ("",))
            ):
                continue
            todo.append((req.name, ()))
    return found


def test_the_default_install_holds_no_gpl_code() -> None:
    tree = installed_tree("rechunk", DEFAULT_EXTRAS)
    if "pypdfium2" not in tree:
        pytest.skip("the formats extra is not installed")
    assert {"selectolax", "pypdfium2", "python-docx", "tree-sitter", "onnxruntime"} <= set(tree)
    copyleft = {name: text for name, text in tree.items() if COPYLEFT.search(text)}
    assert not copyleft, copyleft
    assert "pymupdf" not in tree
