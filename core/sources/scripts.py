"""Scripts without a suffix, known by the interpreter their first line names.

A repository's ``bin/deploy`` or ``scripts/release`` has no suffix to say what it is,
but its first line does: ``#!/usr/bin/env python3``, ``#!/bin/sh``. :func:`script_language`
reads that line; ``rechunk sync`` then reads the file as code of that language (one
without a grammar here, such as Perl, gets the recursive policy and is counted as such).
A file with no suffix and no such line (a ``LICENSE``, a binary) is not read.
"""

from __future__ import annotations

import re
from pathlib import PurePath

__all__ = ["HEAD_BYTES", "INTERPRETERS", "script_language"]

#: how much of a file :func:`script_language` needs (the first line, if it is a script's)
HEAD_BYTES = 256

#: an interpreter's name (version digits dropped: ``python3.12`` is ``python``) -> the
#: language its scripts are read as
INTERPRETERS = {
    "python": "python",
    "pypy": "python",
    "sh": "bash",
    "bash": "bash",
    "dash": "bash",
    "ash": "bash",
    "ksh": "bash",
    "zsh": "zsh",
    "node": "javascript",
    "nodejs": "javascript",
    "ruby": "ruby",
    "php": "php",
    "lua": "lua",
    "luajit": "lua",
    "perl": "perl",
    "rscript": "r",
    "pwsh": "powershell",
    "elixir": "elixir",
    "make": "make",  # a makefile run as a program (``#!/usr/bin/make -f``)
}

_SHEBANG = re.compile(r"#![ \t]*(\S+)[ \t]*(.*)")
_VERSION = re.compile(r"[\d.]+$")


def script_language(path: str | PurePath, head: bytes | str) -> str | None:
    """The language of a file with no suffix whose first line names an interpreter of
    :data:`INTERPRETERS` (``#!/usr/bin/python3``, ``#!/usr/bin/env -S node --flag``,
    ``#! /bin/sh``); None for a file with a suffix or any other first line.

    ``head``: the file's first bytes (:data:`HEAD_BYTES` are enough) or its text.
    """
    if PurePath(path).suffix:
        return None
    if isinstance(head, bytes):
        head = head[:HEAD_BYTES].decode("utf-8", errors="replace")
    match = _SHEBANG.match(head.removeprefix("\ufeff").split("\n", 1)[0].rstrip("\r"))
    if match is None:
        return None
    program = PurePath(match.group(1)).name
    if program == "env":  # env [-S] [-u NAME] [NAME=VALUE]... PROGRAM [ARGS]
        words = iter(match.group(2).split())
        program = ""
        for word in words:
            if word in ("-u", "--unset", "-C", "--chdir"):
                next(words, None)
            elif not word.startswith("-") and "=" not in word:
                program = PurePath(word).name
                break
    return INTERPRETERS.get(_VERSION.sub("", program.lower()))
