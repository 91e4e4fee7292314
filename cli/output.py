"""What every command prints the same way: its exit code, JSON, and an error as one line.

Exit codes: 0 ok, 1 partial failure (a file or folder skipped), 2 usage or
configuration error, 3 store or embedder error (a failed stale check too). An error
prints one line; the traceback only with ``--debug``. Names are printed through
:func:`rechunk.sources.files.printable` (control characters escaped).
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from rechunk.sources.files import printable

__all__ = [
    "EXIT_BACKEND",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "one_line",
    "print_json",
    "report_error",
]

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_BACKEND = 0, 1, 2, 3


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def one_line(exc: BaseException, limit: int = 400) -> str:
    """An error as one line: a server's answer quoted in it (an HTML page, a JSON body)
    is cut at its first line break and at ``limit`` characters (--debug shows it all)."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    line = lines[0]
    if len(lines) > 1 or len(line) > limit:
        line = line[:limit].rstrip() + " [...] (--debug shows all)"
    return line


def report_error(exc: BaseException, debug: bool) -> None:
    """One line on stderr; with --debug the whole traceback (the exit code stays the same)."""
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    else:
        print(f"rechunk: error: {printable(one_line(exc))}", file=sys.stderr)
