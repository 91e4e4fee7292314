"""The option groups several commands share: ``--debug`` after the command, the store
(``--store``, ``--collection``, ``--layout``), the model (``--embedder``, ``--model``,
``--embed-url``) and the input (``--cache``, ``--glob``, ``--no-ignore``, ``--format``,
``--id-field``), each added to a command's parser by one function and read back as a
frozen dataclass (:class:`StoreOptions`, :class:`ModelOptions`, :class:`InputOptions`).

A command's own arguments are a frozen dataclass too, built from argparse's Namespace by
:meth:`Parsed.from_args` and extending the groups it takes (``SyncArgs(StoreOptions,
ModelOptions, InputOptions)``), so that what composes a store or reads the files takes
the group, and the command passes itself.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from rechunk.cli.sources import add_source_options, parse_options
from rechunk.sources import ParseOptions

__all__ = [
    "DEFAULT_CACHE",
    "DEFAULT_COLLECTION",
    "STATE_DIR",
    "InputOptions",
    "ModelOptions",
    "Parsed",
    "StoreOptions",
    "debug_option",
    "input_options",
    "make_state_dir",
    "model_option",
    "policy_option",
    "store_options",
]

STATE_DIR = Path(".rechunk")
DEFAULT_CACHE = STATE_DIR / "cache.sqlite"


def make_state_dir(keeps: str | None = None) -> bool:
    """Make the working folder when it is not there, readable by its owner only: its
    embedded stores and cache hold the documents' text and vectors. True when it is there.

    A folder that cannot be made (a read-only checkout, a full disk, a file of that name)
    raises the OSError; given what it ``keeps`` (``cache .rechunk/cache.sqlite``), it is a
    :class:`~rechunk.reuse.cache.CacheWarning` instead, saying that is kept in memory only,
    and False (docs/cli.md: a cache that cannot be created does not stop the sync)."""
    try:
        STATE_DIR.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        if keeps is None:
            raise
        import warnings

        from rechunk.reuse.cache import CacheWarning

        why = "a file is in its place" if STATE_DIR.exists() else exc.strerror or str(exc)
        warnings.warn(
            f"{keeps} cannot be created ({STATE_DIR}: {why}); it is kept in memory only",
            CacheWarning,
            stacklevel=2,
        )
        return False
    return True


DEFAULT_COLLECTION = "rechunk"

P = TypeVar("P", bound="Parsed")


@dataclass(frozen=True)
class Parsed:
    """The base of the typed arguments: each field is read from the Namespace by its name
    (a list as a tuple), or, when its metadata names a ``from`` function, computed by it
    from the whole Namespace."""

    @classmethod
    def from_args(cls: type[P], args: argparse.Namespace) -> P:
        values: dict[str, Any] = {}
        for f in fields(cls):
            convert = f.metadata.get("from")
            value = convert(args) if convert is not None else getattr(args, f.name)
            values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


@dataclass(frozen=True)
class StoreOptions(Parsed):
    """``--store``, ``--collection`` and ``--layout`` (None: the collection's own, else
    langchain)."""

    store: str
    collection: str
    layout: str | None


@dataclass(frozen=True)
class ModelOptions(Parsed):
    """``--embedder``, ``--model`` and ``--embed-url`` (None: not given)."""

    embedder: str | None
    model: str | None
    embed_url: str | None


@dataclass(frozen=True)
class InputOptions(Parsed):
    """``--cache``, ``--glob`` (the default globs when none is given), ``--no-ignore``,
    ``--include-generated``, ``--max-file-bytes``, ``--format``, and what the parsers
    take (``--id-field``, ``--encoding``) as :class:`ParseOptions`."""

    cache: str
    glob: tuple[str, ...]
    no_ignore: bool
    include_generated: bool
    max_file_bytes: int | None
    format: str | None
    parse: ParseOptions = field(metadata={"from": parse_options})


def debug_option() -> argparse.ArgumentParser:
    """The parent parser of every command: ``--debug`` also after the command (``rechunk
    sync docs --debug``); SUPPRESS keeps the value given before the command when it is not
    repeated after it."""
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    return debug


def store_options(p: argparse.ArgumentParser) -> None:
    from rechunk.adapters.uri import DEFAULT_STORE

    p.add_argument(
        "--store",
        default=DEFAULT_STORE,
        metavar="URI",
        help="qdrant:DIR (default %(default)s), qdrant-edge:DIR (Qdrant Edge), "
        "qdrant+http(s)://HOST:PORT (API key from $QDRANT_API_KEY), chroma:DIR, "
        "chroma+http(s)://HOST:PORT[?tenant=T&database=D] (token from "
        "$CHROMA_CLIENT_AUTH_CREDENTIALS)",
    )
    p.add_argument(
        "--collection",
        default=DEFAULT_COLLECTION,
        metavar="NAME",
        help="collection (or Qdrant alias); default %(default)s",
    )
    p.add_argument(
        "--layout",
        choices=["langchain", "llamaindex"],
        default=None,
        help="payload layout, readable by that framework's own vector store (default: the "
        "one the collection was written in; a new collection: langchain)",
    )


def input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache",
        default=str(DEFAULT_CACHE),
        metavar="PATH",
        help="SQLite embedding cache (default %(default)s)",
    )
    p.add_argument(
        "--glob",
        action="append",
        default=None,
        metavar="PATTERN",
        help="file pattern, repeatable; git's wildcards, matched at any depth; '!' first "
        "leaves out what it matches ('!tests/**') (default: every file; a type no parser "
        "reads is counted, not read)",
    )
    p.add_argument(
        "--no-ignore",
        action="store_true",
        help="also read files that .gitignore excludes (by default the .gitignore files "
        "of each folder, and of the folders above it up to the top of its git "
        "repository, apply; .rechunkignore files, in the same syntax, always apply; "
        "hidden files and folders are never read)",
    )
    p.add_argument(
        "--include-generated",
        action="store_true",
        help="also read lockfiles (package-lock.json, poetry.lock, go.sum, ...), build "
        "wrappers (gradlew, mvnw), minified "
        "files (*.min.js, or code that is mostly lines of over 300 characters) and code "
        "marked generated ('Code generated ... DO NOT EDIT', '@generated'), Office owner "
        "files (~$memo.docx) and, under the root of a site Sphinx or MkDocs built (its "
        ".buildinfo, or search/search_index.json), "
        "everything but its HTML pages, and its search, genindex, py-modindex and 404 "
        "pages; by default they are counted, not read",
    )
    p.add_argument(
        "--max-file-bytes",
        type=file_size,
        default=None,
        metavar="SIZE",
        help="leave out files larger than SIZE (bytes, or 50MB, 50MiB, 50M = 50MiB, as "
        "rsync's --max-size): counted and not read; a sync keeps the chunks they had "
        "(default: no limit; a file's text and chunks are held in memory, about 40 bytes "
        "a byte of prose)",
    )
    add_source_options(p)


#: a size's unit -> bytes (rsync's: K, M, G are powers of 1024, KB, MB, GB of 1000)
_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kib": 1 << 10, "kb": 10**3,
    "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
    "g": 1 << 30, "gib": 1 << 30, "gb": 10**9,
}  # fmt: skip


def file_size(text: str) -> int:
    """``SIZE`` of ``--max-file-bytes`` in bytes: a whole or decimal number with an
    optional unit (``1000000``, ``50MB``, ``1.5GiB``, ``200k``)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = found.group(2).lower() if found else ""
    if found is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: give bytes, or a number with KB, MB, GB (1000s) or "
            "KiB, MiB, GiB (1024s; K, M, G too), such as 50MB"
        )
    size = int(Decimal(found.group(1)) * _UNITS[unit])  # exact, however large
    if size < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the size must be at least 1 byte")
    return size


def policy_option(p: argparse.ArgumentParser) -> None:
    """``--policy`` of the commands that chunk with the default policy unless told
    (``sync``, ``watch``)."""
    from rechunk.chunking.policy import DEFAULT_POLICY, POLICIES

    p.add_argument(
        "--policy",
        choices=list(POLICIES),
        default=None,
        help="chunking policy, sized for the model (default: the one the collection's live "
        f"generation was built with, as rechunk reindex left it; a new collection: "
        f"{DEFAULT_POLICY})",
    )


def engine_options(p: argparse.ArgumentParser, ray_does: str) -> None:
    """``--engine`` and ``--ray-address`` of the commands a Ray cluster can run (``sync``,
    ``reindex``); ``ray_does`` says what the cluster does for this command."""
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help=f"local: this process (default); ray: {ray_does} (pip install 'rechunk[ray]'; "
        "--store must be a server)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        default=None,
        help="with --engine ray: the head node, HOST:PORT or auto (default: the cluster "
        "`ray start` runs on this machine, else a new local Ray instance)",
    )


def model_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--embedder",
        metavar="URI",
        default=None,
        help="onnx:[PATH] (ONNX Runtime, no torch), st:[PATH] (torch) or openai:MODEL "
        "(an OpenAI-compatible API; key from OPENAI_API_KEY); PATH is a local "
        "sentence-transformers folder, left out for the packaged all-MiniLM-L6-v2 "
        "(default: onnx: where onnxruntime is installed, else st:)",
    )
    p.add_argument(
        "--model",
        metavar="NAME_OR_PATH",
        default=None,
        help="a local sentence-transformers folder, run on the default backend (the "
        "same as --embedder onnx:PATH or st:PATH)",
    )
    p.add_argument(
        "--embed-url",
        metavar="URL",
        default=None,
        help="base URL of the openai: embedder's API, e.g. http://127.0.0.1:7997 "
        "(default: OPENAI_BASE_URL, else OpenAI)",
    )
