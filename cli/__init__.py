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

from rechunk.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
