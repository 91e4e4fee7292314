"""The ``rechunk`` program: the parser assembled from each command's ``add_parser``, and
:func:`main`, which runs the command and turns what it raises into an exit code and one
line on stderr (see :mod:`rechunk.cli.output`); SIGTERM is an interrupt, and rechunk's
own warnings print as one line."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from rechunk.cli import bench, eval, measure, query, reindex, status, sync, watch
from rechunk.cli.output import EXIT_BACKEND, EXIT_USAGE, one_line, report_error
from rechunk.errors import (
    CacheError,
    CollectionMismatchError,
    ConfigError,
    EmbeddingError,
    InputError,
    MissingDependencyError,
    RechunkError,
    StoreError,
)
from rechunk.sources.files import printable

__all__ = ["COMMANDS", "Parser", "build_parser", "main"]


#: each command's ``add_parser``, in the order ``rechunk --help`` lists them
COMMANDS: tuple[Callable[[Any], argparse.ArgumentParser], ...] = (
    measure.add_parser,
    sync.add_parser,
    watch.add_parser,
    status.add_parser,
    query.add_parser,
    eval.add_parser,
    reindex.add_parser,
    bench.add_parser,
)


class Parser(argparse.ArgumentParser):
    """argparse with a usage error in one line, naming the --help that shows the usage."""

    commands: Mapping[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        print(f"rechunk: error: {printable(message)} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> Parser:
    parser = Parser(
        prog="rechunk",
        description="Revision-aware chunking and embedding reuse: re-embed only what changed.",
    )
    from rechunk import __version__

    parser.add_argument("--version", action="version", version=f"rechunk {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add_parser in COMMANDS:
        add_parser(sub)
    parser.commands = sub.choices
    return parser


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


_PATH_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


def _stderr_line(level: str, message: str) -> str:
    """``message`` as rechunk's one line of its ``level`` (``rechunk: warning: ...``):
    names escaped, cut at its first line break; a message that names rechunk already
    (``rechunk: waiting for ...``) keeps its own start."""
    text = printable(one_line(Exception(message)))
    return text if text.startswith("rechunk:") else f"rechunk: {level}: {text}"


def _format_warning(default: Callable[..., str]) -> Callable[..., str]:
    """rechunk's own warnings (a cache set aside, a graph re-exported) as one line,
    ``rechunk: warning: ...``, as the command prints its other warnings; others as Python
    prints them."""

    def format_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if category.__module__.startswith("rechunk."):
            return _stderr_line("warning", str(message)) + "\n"
        return default(message, category, filename, lineno, line)

    return format_warning


class _LogLines(logging.Handler):
    """rechunk's log warnings as the command's other warnings: ``rechunk: warning: ...``
    on one line of the standard error as it is when each is written (Python's last-resort
    handler printed them bare)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging's own report
            self.handleError(record)
            return
        print(_stderr_line(record.levelname.lower(), message), file=sys.stderr, flush=True)


def _log_lines() -> None:
    logger = logging.getLogger("rechunk")
    if not any(isinstance(handler, _LogLines) for handler in logger.handlers):
        logger.addHandler(_LogLines(logging.WARNING))
    # the one-time ONNX export and its check take a while: say so as they start (its
    # warnings reach the handler above)
    onnx = logging.getLogger("rechunk.integrations.onnx")
    if not any(isinstance(handler, _LogLines) for handler in onnx.handlers):
        onnx.setLevel(logging.INFO)
        notes = _LogLines(logging.INFO)
        notes.addFilter(lambda record: record.levelno < logging.WARNING)
        onnx.addHandler(notes)


def _escape_unencodable() -> None:
    """Print what the terminal's encoding cannot hold escaped (``caf\\xe9.md``): under
    an ASCII or legacy locale a file's name failed the command (exit 3) half-way
    through its output."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            # a stream that cannot change now is left alone
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's --help, not the top-level one
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "glob", "absent") is None:
        from rechunk.sources.files import DEFAULT_GLOBS

        args.glob = list(DEFAULT_GLOBS)
    signal.signal(signal.SIGTERM, _terminate)
    _escape_unencodable()
    _log_lines()
    default_format = warnings.formatwarning
    warnings.formatwarning = _format_warning(default_format)
    try:
        code: int = args.func(args)
        return code
    except KeyboardInterrupt:
        print("rechunk: interrupted; the next run repairs anything left half-done", file=sys.stderr)
        return 130
    except RechunkError as exc:
        report_error(exc, args.debug)
        # the command names the wrong one, or the setup is wrong (a key an embeddings API
        # refused is a ConfigError and an EmbeddingError: retrying will not help)
        if isinstance(exc, (CollectionMismatchError, ConfigError)):
            return EXIT_USAGE
        if isinstance(exc, (StoreError, EmbeddingError, CacheError)):
            return EXIT_BACKEND
        if isinstance(exc, (InputError, MissingDependencyError)):
            return EXIT_USAGE
        return EXIT_BACKEND
    except BrokenPipeError:  # the reader went away (`rechunk status | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        report_error(exc, args.debug)
        # a path given on the command line that cannot be used is the caller's to fix;
        # anything else (a full disk, an I/O error) is the machine's
        return EXIT_USAGE if isinstance(exc, _PATH_ERRORS) else EXIT_BACKEND
    except Exception as exc:  # a client library's own error that no adapter translated
        if args.debug:
            report_error(exc, True)
        else:
            name = type(exc).__name__
            print(
                f"rechunk: error: {name}: {printable(one_line(exc))} (--debug shows where)",
                file=sys.stderr,
            )
        return EXIT_BACKEND
    finally:
        warnings.formatwarning = default_format
