"""MkDocs hook: let mkdocstrings find ``rechunk`` and its mapped subpackages.

The distribution maps folders onto the package (``core/`` is ``rechunk``, ``adapters/``
is ``rechunk.adapters``, ...; see ``[tool.setuptools] package-dir``). Griffe, which
reads the sources for mkdocstrings, finds ``rechunk`` through the editable install but
looks for ``rechunk.adapters`` inside ``core/``. So before any page is rendered this
hook builds a throw-away tree of symbolic links shaped like the installed package
(``rechunk/`` holding ``core``'s entries plus ``adapters``, ``integrations`` and
``cli``) and points the Python handler at it. Nothing is copied, imported or fetched.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
SUBPACKAGES = {"adapters": "adapters", "integrations": "integrations", "cli": "cli"}


def package_tree() -> Path:
    """A temporary folder holding ``rechunk/`` as the installed package lays it out."""
    top = Path(tempfile.mkdtemp(prefix="rechunk-docs-src-"))
    atexit.register(shutil.rmtree, top, ignore_errors=True)  # removes the links only
    package = top / "rechunk"
    package.mkdir()
    for entry in (ROOT / "core").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in SUBPACKAGES.items():
        (package / name).symlink_to(ROOT / folder)
    return top


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config: Any) -> Any:
    handlers = config["plugins"]["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(package_tree())]
    return config
