"""``rechunk measure OLD NEW``: the edit fraction of a revision pair and, per chunker, its
recompute fraction R_c, chunks old/new and tokens to embed. Each file is read by the parser
of its format, as ``rechunk sync`` reads it, and the chunkers are sized for the model, as
sync sizes them (``--study-sizes``: the study's parameters). The chunkers by name with the
study's parameters are here too; ``rechunk bench`` uses them."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rechunk.chunking.chunk import Chunker
from rechunk.cli import compose
from rechunk.cli.options import ModelOptions, debug_option, model_option
from rechunk.cli.output import EXIT_OK
from rechunk.errors import ConfigError, InputError

__all__ = [
    "CHUNKER_NAMES",
    "CODE_CHUNKER",
    "MeasureArgs",
    "add_parser",
    "execute",
    "make_chunker",
    "measure_pair",
    "run",
]


@dataclass(frozen=True)
class MeasureArgs(ModelOptions):
    """``rechunk measure``'s arguments."""

    old: str
    new: str
    chunker: tuple[str, ...] | None
    lang: str | None
    tokenizer: str | None
    encoding: str | None
    study_sizes: bool
    json: bool


CHUNKER_NAMES = ("fixed", "recursive", "cdc", "structured")
#: the code policy: measured where the language is known (a pair's lang, a file's suffix)
CODE_CHUNKER = "code"


def make_chunker(
    name: str, tokenizer: Any = None, language: str | None = None, embedder: Any = None
) -> Chunker:
    """The chunker ``name`` (``code``: of ``language``) sized for ``embedder`` as sync sizes
    it, else with the study's default parameters (what ``rechunk bench`` measures)."""
    from rechunk.chunkers import CDCChunker, FixedChunker, RecursiveChunker, StructuredChunker

    factories: dict[str, Callable[..., Chunker]] = {
        "fixed": FixedChunker,
        "recursive": RecursiveChunker,
        "cdc": CDCChunker,
        "structured": StructuredChunker,
    }
    if name != CODE_CHUNKER and name not in factories:
        raise ConfigError(f"unknown chunker {name!r}; choose from {', '.join(factories)}")
    if name == CODE_CHUNKER and language is None:
        raise ConfigError("the code chunker needs a language (--lang, or a file suffix)")
    if embedder is not None:
        from rechunk.chunking.policy import policy_for

        overrides: dict[str, Any] = {"tokenizer": tokenizer} if tokenizer else {}
        if name == CODE_CHUNKER:
            overrides["language"] = language
        return policy_for(embedder, name, **overrides)
    if name == CODE_CHUNKER:
        from rechunk.chunkers.code import CodeChunker

        return CodeChunker(str(language), tokenizer=tokenizer)
    return factories[name](tokenizer=tokenizer)


# -- measure ------------------------------------------------------------------------------


def read_document(
    path: Path, encoding: str | None = None, *, like: Path | None = None, old: bool = False
) -> str:
    """The text ``rechunk sync`` chunks for the file at ``path``: read by the parser of its
    format (a PDF's text without running headers, a web page's without its menus, a code
    file as it is). InputError for a folder, a file no parser reads, one that does not
    parse, or a file of records (several documents: measure compares one with one).

    A pipe (``<(git show REV:a.md)``) is read as ``cat`` reads it, and ``/dev/null`` as an
    empty file (see :func:`read_argument`); a file with no suffix (a pipe's name) is read in
    the format of the file ``like`` (the other version). ``old``: a file with no text is
    the old version of a new file, so "" (every input new), not an error."""
    from rechunk.sources.base import ParseError
    from rechunk.sources.documents import documents_from_file, kind_of
    from rechunk.sources.registry import ParseOptions

    data = read_argument(path, old=old)
    fmt = None
    if like is not None and not path.suffix and kind_of(path, head=data) is None:
        fmt = kind_of(like)  # None when it names no format either: refused below
        if fmt is None and data.strip():
            raise InputError(
                f"{path} has no suffix, and neither has {like}: measure reads a file by its "
                "suffix's format; write one version to a file with its suffix first "
                "(git show REV:a.md > old.md)"
            )
    try:
        found = documents_from_file(
            path, path.name, fmt, options=ParseOptions(encoding=encoding), data=data
        )
    except ParseError as exc:
        raise InputError(f"{path}: {exc.reason}") from None
    if not found and old:
        return ""  # a new file: every input of NEW is new
    if not found:
        raise InputError(
            f"{path} holds no text (a deleted file embeds nothing; for a new file, give "
            "its new version as NEW and /dev/null as OLD)"
        )
    if len(found) > 1:
        raise InputError(
            f"{path} holds {len(found)} documents (a file of records); measure compares one "
            "document with one: write the two versions of a record to files of their own"
        )
    return found[0].text


#: what measure reads, said where it refuses another file
_READS = (
    "measure reads files, pipes something writes to (<(git show REV:a.md)) and /dev/null "
    "(the old version of a new file); write it to a file first"
)


def read_argument(path: Path, *, old: bool = False) -> bytes:
    """The bytes of a file named on the command line (a folder is refused before, by
    :func:`execute`). A pipe (a process substitution, ``<(git show REV:a.md)``) is read to
    its end as ``cat`` reads it; ``/dev/null`` is empty; a pipe that gives nothing is an
    empty ``old`` version. Other special files are refused,
    never waited on or read for ever: a FIFO nothing writes to (read without blocking, it
    gives no byte), a device (``/dev/zero``, a terminal), a socket."""
    import stat

    from rechunk.sources.files import read_bytes, special_kind

    kind = special_kind(path)
    if kind is None:
        return read_bytes(path)
    if kind == "character device":
        with contextlib.suppress(OSError):
            found, null = os.stat(path), os.stat(os.devnull)
            if stat.S_ISCHR(found.st_mode) and found.st_rdev == null.st_rdev:
                return b""
    if kind == "FIFO":
        data = _read_pipe(path)
        if data or old:  # an old version that is empty (`git show BASE:new.md`): a new file
            return data
        raise InputError(
            f"{path} is not a regular file (FIFO) and nothing was written to it; {_READS}"
        )
    raise InputError(f"{path} is not a regular file ({kind}); {_READS}")


def _a_folder(path: Path, new: Path | str) -> InputError:
    return InputError(
        f"{path} is a folder: measure compares two files (two versions of one document); "
        f"for what a change to a whole folder would embed, run `rechunk sync {new} "
        "--dry-run` with the store the old one was synced into"
    )


def _read_pipe(path: Path) -> bytes:
    """A pipe's bytes to its end; b"" at once when nothing writes to it (opened and first
    read without blocking: a FIFO with no writer gives end of file, one whose writer has
    not written yet gives EAGAIN, and is then waited on as ``cat`` waits)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        chunks: list[bytes] = []
        try:
            first = os.read(fd, 1 << 16)
            if not first:
                return b""
            chunks.append(first)
        except BlockingIOError:  # a writer, nothing written yet
            pass
        os.set_blocking(fd, True)
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def measure_pair(old: str, new: str, chunkers: Sequence[tuple[str, Chunker]]) -> dict[str, Any]:
    """The ``rechunk measure`` report for one revision pair."""
    from rechunk.chunking.measure import edit_band, edit_fraction, recompute_fraction

    fraction = edit_fraction(old, new)
    rows = []
    for name, chunker in chunkers:
        old_chunks, new_chunks = chunker.chunk(old), chunker.chunk(new)
        old_inputs = {c.text for c in old_chunks}
        distinct: dict[str, int] = {}
        for c in new_chunks:
            distinct.setdefault(c.text, c.tokens)
        rows.append(
            {
                "chunker": name,
                "policy": chunker.policy_id,
                "recompute_fraction": recompute_fraction(old_chunks, new_chunks),
                "chunks_old": len(old_chunks),
                "chunks_new": len(new_chunks),
                "tokens_to_embed": sum(t for s, t in distinct.items() if s not in old_inputs),
                "tokens_total": sum(distinct.values()),
            }
        )
    return {"edit_fraction": fraction, "edit_band": edit_band(fraction), "chunkers": rows}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "measure",
        parents=[debug_option()],
        help="edit fraction and recompute fraction R_c of a revision pair",
        description="Print the edit fraction and band of OLD -> NEW and, per chunker, "
        "the recompute fraction R_c, chunks old/new and tokens to embed vs total.",
    )
    p.add_argument(
        "old",
        metavar="OLD_FILE",
        help="the previous version (any file sync reads: Markdown, PDF, DOCX, HTML, code, ...)",
    )
    p.add_argument("new", metavar="NEW_FILE", help="the new version (read as OLD_FILE is)")
    p.add_argument(
        "--chunker",
        action="append",
        choices=[*CHUNKER_NAMES, CODE_CHUNKER, "all"],
        help="repeatable; default all (code too when the files are source code)",
    )
    p.add_argument(
        "--lang",
        metavar="LANGUAGE",
        help="the programming language of the code chunker (default: by the files' suffix, "
        "or a script's #! line)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json to count tokens with (default: all-MiniLM-L6-v2's)",
    )
    p.add_argument(
        "--encoding",
        metavar="NAME",
        help="the files' encoding when they are not UTF-8 (as sync's --encoding)",
    )
    model_option(p)
    p.add_argument(
        "--study-sizes",
        action="store_true",
        help="the study's chunk sizes (for a 512-token window, as rechunk bench uses), not "
        "those sync gives the model",
    )
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    return execute(MeasureArgs.from_args(args))


def execute(args: MeasureArgs) -> int:
    from rechunk.sources.documents import code_language

    old_path, new_path = Path(args.old), Path(args.new)
    for path in (old_path, new_path):
        if path.is_dir():
            raise _a_folder(path, new_path if new_path.is_dir() else "FOLDER")
    old = read_document(old_path, args.encoding, like=new_path, old=True)
    new = read_document(new_path, args.encoding, like=old_path)
    language = args.lang or code_language(args.new, new) or code_language(args.old, old)
    names = args.chunker or ["all"]
    if "all" in names:  # the code policy beside the others when the files are code
        names = [*CHUNKER_NAMES, *([CODE_CHUNKER] if language else [])]
    embedder = None if args.study_sizes else compose.open_embedder(args)
    chunkers = [
        (name, make_chunker(name, args.tokenizer, language, embedder))
        for name in dict.fromkeys(names)
    ]
    report = measure_pair(old, new, chunkers)
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    print(f"edit fraction: {report['edit_fraction']:.2%} ({report['edit_band']})")
    header = f"{'chunker':<10} {'R_c':>7} {'chunks old/new':>15} {'tokens to embed / total':>24}"
    print(header)
    for row in report["chunkers"]:
        counts = f"{row['chunks_old']}/{row['chunks_new']}"
        tokens = f"{row['tokens_to_embed']:,} / {row['tokens_total']:,}"
        print(f"{row['chunker']:<10} {row['recompute_fraction']:>7.1%} {counts:>15} {tokens:>24}")
    return EXIT_OK
