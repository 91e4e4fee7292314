"""git's wildcard patterns and ``.gitignore`` rules, for ``rechunk sync FOLDER``; and
``.rechunkignore`` files, in the same syntax, for what rechunk alone should leave out.

Written from git's documentation (gitignore(5)) and checked against the ``git``
binary: a pattern without a slash matches a name at any depth; one with a slash
is relative to its ``.gitignore``'s folder; a trailing slash matches folders
only; ``!`` takes a path back in; ``*``, ``?`` and ``[...]`` never match ``/``;
``**/``, ``/**/`` and a trailing ``/**`` span folders. Of the files that apply
to a path, the deepest decides, by its last matching line. A pattern git cannot
use (an unclosed ``[``, a trailing backslash, an unknown ``[:class:]``) matches
nothing, as in git. Names are matched by code point (git matches bytes: ``?``
takes one byte of a multibyte character there).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GITIGNORE", "RECHUNKIGNORE", "IgnoreRules", "wildmatch"]

_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "blank": " \t",
    "cntrl": "\x00-\x1f\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \t\n\v\f\r",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


def _bracket(pattern: str, i: int) -> tuple[str, int] | None:
    """The regex of the ``[...]`` starting at ``pattern[i]`` and the index after it."""
    i += 1
    negated = i < len(pattern) and pattern[i] in "!^"
    i += negated
    items: list[str] = []
    first = True
    while True:
        if i >= len(pattern):
            return None  # unclosed
        c = pattern[i]
        if c == "]" and not first:
            break
        first = False
        if c == "\\":
            i += 1
            if i >= len(pattern):
                return None
            low = pattern[i]
        elif c == "[" and pattern.startswith("[:", i):
            close = pattern.find("]", i + 2)
            if close < 0:
                return None
            if close - 1 < i + 2 or pattern[close - 1] != ":":
                items.append(re.escape("["))  # no ":]" before the next "]": a plain "["
                i += 1
                continue
            name = pattern[i + 2 : close - 1]
            if name not in _CLASSES:
                return None
            items.append(_CLASSES[name])
            i = close + 1
            continue
        else:
            low = c
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            i += 2
            high = pattern[i]
            if high == "\\":
                i += 1
                if i >= len(pattern):
                    return None
                high = pattern[i]
            if low <= high:  # a reversed range matches nothing
                items.append(f"{re.escape(low)}-{re.escape(high)}")
        else:
            items.append(re.escape(low))
        i += 1
    body = "".join(items)
    if negated:
        return f"[^{body}/]", i + 1
    return (f"(?!/)[{body}]" if body else "(?!)"), i + 1


def wildmatch(pattern: str) -> re.Pattern[str] | None:
    """A regex matching what git's wildmatch (with ``WM_PATHNAME``) matches; None when the
    pattern can match nothing (an unclosed bracket, a trailing backslash)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_start = i == 0 or pattern[i - 1] == "/"
            if j - i >= 2 and at_start and j == n:
                out.append(".*")  # "**" at the end: everything below
            elif j - i >= 2 and at_start and pattern[j] == "/":
                out.append("(?:.*/)?")  # "**/": no folder or any number of them
                j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            bracket = _bracket(pattern, i)
            if bracket is None:
                return None
            out.append(bracket[0])
            i = bracket[1]
        elif c == "\\":
            if i + 1 == n:
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.S)


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    folders_only: bool
    name_only: bool  # no slash: matched against the last name of the path


def _trim_trailing_spaces(line: str) -> str:
    """git's rule: trailing spaces go unless escaped with a backslash (tabs stay)."""
    last_space = -1
    i = 0
    while i < len(line):
        c = line[i]
        if c == " ":
            if last_space < 0:
                last_space = i
        elif c == "\\":
            i += 1
            if i >= len(line):
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line if last_space < 0 else line[:last_space]


def _parse(text: str) -> list[_Rule]:
    rules = []
    for raw in text.removeprefix("\ufeff").split("\n"):
        line = _trim_trailing_spaces(raw.removesuffix("\r"))
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[negated:]
        folders_only = pattern.endswith("/")
        pattern = pattern.removesuffix("/")
        name_only = "/" not in pattern
        regex = wildmatch(pattern.removeprefix("/")) if pattern else None
        if regex is not None:
            rules.append(_Rule(regex, negated, folders_only, name_only))
    return rules


#: the files of rules in each folder: git's, and rechunk's own (read after git's, so a
#: line of it decides before any line of the .gitignore beside it)
GITIGNORE = ".gitignore"
RECHUNKIGNORE = ".rechunkignore"


def _load(folder: Path, names: tuple[str, ...]) -> list[_Rule] | None:
    """The rules of the files ``names`` in ``folder``, in that order; None when there are
    none (a file that is a symbolic link, which git does not follow, or that cannot be
    read, has none)."""
    rules: list[_Rule] = []
    for name in names:
        path = folder / name
        try:
            if not path.is_symlink():
                rules += _parse(path.read_bytes().decode("utf-8", "surrogateescape"))
        except OSError:
            pass
    return rules or None


def _decide(rules: list[_Rule], path: str, folder: bool) -> bool | None:
    """True: excluded, False: taken back in (``!``), None: no line matches ``path``."""
    name = path.rpartition("/")[2]
    for rule in reversed(rules):
        if rule.folders_only and not folder:
            continue
        if rule.regex.fullmatch(name if rule.name_only else path):
            return not rule.negated
    return None


class IgnoreRules:
    """Which paths under a folder the ``.gitignore`` and ``.rechunkignore`` files exclude.

    The files in the folder and below apply, and so do those of the folders above it
    up to the top of its git repository (the nearest folder holding ``.git``, a
    folder or a file); a repository inside it (a folder holding ``.git``) starts
    afresh with its own files. The folder itself is never excluded: it was named.
    In each folder the lines of ``.rechunkignore`` come after those of ``.gitignore``
    (so ``!dist/api.md`` there takes back in what ``.gitignore`` excludes). With
    ``gitignore=False`` only the ``.rechunkignore`` files apply.
    """

    def __init__(self, root: Path, gitignore: bool = True) -> None:
        self._root = root
        self._names = (GITIGNORE, RECHUNKIGNORE) if gitignore else (RECHUNKIGNORE,)
        self._rules: dict[tuple[str, ...], list[_Rule] | None] = {}
        self._tops: dict[tuple[str, ...], bool] = {}
        self._above: list[tuple[tuple[str, ...], list[_Rule]]] = []  # nearest first
        real = root.resolve()
        if (real / ".git").exists():
            return
        above = []
        for folder in real.parents:
            rules = _load(folder, self._names)
            if rules is not None:
                above.append((real.relative_to(folder).parts, rules))
            if (folder / ".git").exists():
                self._above = above
                return
        # outside a repository, the .gitignore files above the folder do not apply

    def _folder_rules(self, parts: tuple[str, ...]) -> list[_Rule] | None:
        if parts not in self._rules:
            self._rules[parts] = _load(self._root.joinpath(*parts), self._names)
        return self._rules[parts]

    def _is_top(self, parts: tuple[str, ...]) -> bool:
        if parts not in self._tops:
            self._tops[parts] = os.path.lexists(self._root.joinpath(*parts, ".git"))
        return self._tops[parts]

    def ignores(self, parts: tuple[str, ...], folder: bool) -> bool:
        """Whether the path ``parts`` (relative to the root, not empty) is excluded."""
        for depth in range(len(parts) - 1, -1, -1):
            base = parts[:depth]
            rules = self._folder_rules(base)
            if rules is not None:
                verdict = _decide(rules, "/".join(parts[depth:]), folder)
                if verdict is not None:
                    return verdict
            if self._is_top(base):
                return False  # the top of a repository: what is above it does not apply
        for prefix, rules in self._above:
            verdict = _decide(rules, "/".join(prefix + parts), folder)
            if verdict is not None:
                return verdict
        return False
