"""Old module paths of the core, still importable after their modules moved into rooms.

The core's modules once sat side by side in the package root (``rechunk.cache``,
``rechunk.tokens``, ...). They now live in subpackages by concern, and an import of an
old path gives the very same module object as the new one (so classes, isinstance checks
and module state are shared). The hook is installed when ``rechunk`` is imported (which any
import of ``rechunk.X`` does first); new code imports the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

MOVED = {
    "rechunk.bench": "rechunk.chunking.bench",
    "rechunk.chunk": "rechunk.chunking.chunk",
    "rechunk.measure": "rechunk.chunking.measure",
    "rechunk.policy": "rechunk.chunking.policy",
    "rechunk.tokens": "rechunk.chunking.tokens",
    "rechunk.cache": "rechunk.reuse.cache",
    "rechunk.cached_embedder": "rechunk.reuse.cached_embedder",
    "rechunk.embedding": "rechunk.reuse.embedding",
    "rechunk.identity": "rechunk.reuse.identity",
    "rechunk.ahead": "rechunk.sync.ahead",
    "rechunk.generations": "rechunk.sync.generations",
    "rechunk.store": "rechunk.sync.store",
    "rechunk.files": "rechunk.sources.files",
    "rechunk.ignore": "rechunk.sources.ignore",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at its new path."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set the old path's spec on the module: give it its own back
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)


def install() -> None:
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())


install()
