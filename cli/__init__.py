"""The ``rechunk`` command line.

It composes the parts (stores from :mod:`rechunk.adapters.uri`, embedders from
:mod:`rechunk.integrations.uri`), so it lives beside them, outside the core package
(``import rechunk`` loads neither), as the subpackage ``rechunk.cli`` in ``cli/``.

One module per command (:mod:`~rechunk.cli.measure`, :mod:`~rechunk.cli.sync`,
:mod:`~rechunk.cli.watch`, :mod:`~rechunk.cli.status`, :mod:`~rechunk.cli.query`,
:mod:`~rechunk.cli.eval`, :mod:`~rechunk.cli.reindex`, :mod:`~rechunk.cli.bench`), each
with its parser and its run; beside them the option groups they share
(:mod:`~rechunk.cli.options`), what they open (:mod:`~rechunk.cli.compose`), what they
read (:mod:`~rechunk.cli.reading`, :mod:`~rechunk.cli.manifest`,
:mod:`~rechunk.cli.sources`), what they print (:mod:`~rechunk.cli.summary`,
:mod:`~rechunk.cli.output`), and the program that assembles them
(:mod:`~rechunk.cli.app`). Exit codes: see :mod:`rechunk.cli.output`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from rechunk.cli import compose
from rechunk.cli.app import build_parser, main

__all__ = ["build_parser", "main"]

# Tests and benchmarks replace the embedder or the store opener of every command by
# assigning ``rechunk.cli._embedder`` or ``rechunk.cli._open`` (their names before the
# commands had modules of their own). Each name stands for the composition module's own:
# reading it reads it there, and assigning it replaces it there, where the commands look
# it up (pytest's monkeypatch restores it the same way).


def _seam(name: str) -> property:
    def get(module: types.ModuleType) -> Any:
        return getattr(compose, name)

    def put(module: types.ModuleType, value: Any) -> None:
        setattr(compose, name, value)

    return property(get, put, doc=f"rechunk.cli.compose.{name}")


class _Package(types.ModuleType):
    _embedder = _seam("open_embedder")
    _open = _seam("open_store")


sys.modules[__name__].__class__ = _Package
