"""Files that tools write for tools: lockfiles, minified bundles and code marked generated.

``rechunk sync`` on a repository leaves them out unless told to read them
(``--include-generated``). They hold little a person searches for (package names and
hashes, a bundle's one line, a generator's output beside the source it was generated
from) and are often a repository's largest files: a small web app's npm lockfile was 98%
of the tokens of its repository, and a major dependency upgrade re-embedded 14,364 of
its tokens (``benchmarks/generated.py``).

Four tests, each cheap and each written so that a file a person wrote does not pass it:

* **lockfile**: the file's name is that of a package manager's lock (:data:`LOCKFILES`,
  and the PEP 751 ``pylock.*.toml``), whatever the folder;
* **build wrapper**: the file's name is that of a script a build tool writes to run
  itself (:data:`WRAPPERS`: Gradle's ``gradlew``, the Maven Wrapper's ``mvnw``), read
  otherwise as shell by its ``#!`` line;
* **minified**: the name ends in ``.min.js``, ``.min.mjs``, ``.min.cjs`` or ``.min.css``;
  or, for a source file of at least :data:`MIN_BYTES`, more than three quarters of
  its bytes lie on lines longer than :data:`LONG_LINE` bytes (hand-written code keeps
  its lines short, and one long literal in it does not reach that share; a bundle
  does, also one that a minifier wraps at a few hundred characters);
* **marked generated**: a source file whose first :data:`HEAD_LINES` lines hold a
  comment line that says so: ``@generated`` (the tag several code generators and
  package managers write), or "generated" together with "do not edit" or "do not
  modify" on one line (Go's ``// Code generated ... DO NOT EDIT.`` convention, the
  protocol buffer compiler's header). The two words must share a comment line, not
  merely the head, so a generator's own source, which mentions both in a docstring or
  a string literal, is read; and a line that opens or closes a generated region
  (``// BEGIN GENERATED CODE. PLEASE DO NOT EDIT.``) marks that region, not the file.

Only source code is tested by content: generated documentation (an API reference, a
changelog written by a release tool) is meant to be read and is read.
"""

from __future__ import annotations

import re
from pathlib import PurePath

__all__ = [
    "HEAD_LINES",
    "LOCKFILE",
    "LOCKFILES",
    "LONG_LINE",
    "MARKED",
    "MINIFIED",
    "MINIFIED_SHARE",
    "MIN_BYTES",
    "REASONS",
    "WRAPPER",
    "WRAPPERS",
    "generated_by_content",
    "generated_by_name",
]

LOCKFILE = "lockfile"
WRAPPER = "build wrapper"
MINIFIED = "minified"
MARKED = "marked generated"
#: every reason, in the order a summary lists them
REASONS = (LOCKFILE, WRAPPER, MINIFIED, MARKED)

#: the scripts build tools write to download and run themselves, by exact name
WRAPPERS = frozenset({"gradlew", "mvnw"})

#: the lock files package managers write, by exact name
LOCKFILES = frozenset(
    {
        # JavaScript and TypeScript
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "bun.lockb",
        "deno.lock",
        # Python
        "poetry.lock",
        "Pipfile.lock",
        "pdm.lock",
        "uv.lock",
        "pylock.toml",
        "conda-lock.yml",
        # other languages
        "Cargo.lock",
        "go.sum",
        "go.work.sum",
        "Gemfile.lock",
        "composer.lock",
        "packages.lock.json",
        "pubspec.lock",
        "Package.resolved",
        "Podfile.lock",
        "mix.lock",
        "flake.lock",
        "gradle.lockfile",
        "MODULE.bazel.lock",
        "stack.yaml.lock",
        "Manifest.toml",
        ".terraform.lock.hcl",
    }
)
_PYLOCK = re.compile(r"pylock\.[^/]+\.toml")  # PEP 751's named lock files
_MINIFIED_SUFFIXES = (".min.js", ".min.mjs", ".min.cjs", ".min.css")

#: a line longer than this (in bytes) is not one a person writes often
LONG_LINE = 300
#: the share of a file's bytes on long lines above which it is minified
MINIFIED_SHARE = 0.75
#: a file smaller than this is never judged minified by its content
MIN_BYTES = 1024
#: how many lines at the top of a file a generator's marker is looked for in
HEAD_LINES = 40

# a comment line: what starts a comment in the languages rechunk reads as code
_COMMENT = re.compile(rb"^[ \t]*(?:#|//|/\*|\*|--|;|%|<!--|\(\*|\{-)")
_AT_GENERATED = re.compile(rb"@generated\b")
_GENERATED = re.compile(rb"generated", re.IGNORECASE)
_DO_NOT = re.compile(rb"do\s+not\s+(?:edit|modify)", re.IGNORECASE)
_REGION = re.compile(rb"\b(?:begin|end)\b", re.IGNORECASE)


def generated_by_name(path: str | PurePath) -> str | None:
    """Why a file is generated, judged by its name alone (:data:`LOCKFILE`,
    :data:`WRAPPER` or :data:`MINIFIED`), or None."""
    name = PurePath(path).name
    if name in LOCKFILES or _PYLOCK.fullmatch(name):
        return LOCKFILE
    if name in WRAPPERS:
        return WRAPPER
    if name.lower().endswith(_MINIFIED_SUFFIXES):
        return MINIFIED
    return None


def generated_by_content(data: bytes) -> str | None:
    """Why a source file is generated, judged by its bytes (:data:`MARKED` or
    :data:`MINIFIED`), or None. Meant for source code only (see the module's text)."""
    lines = data.split(b"\n", HEAD_LINES)
    for line in lines[:HEAD_LINES]:
        says = _AT_GENERATED.search(line) or (_GENERATED.search(line) and _DO_NOT.search(line))
        if says and _COMMENT.match(line) and not _REGION.search(line):
            return MARKED
    if len(data) >= MIN_BYTES and _long_line_share(data) > MINIFIED_SHARE:
        return MINIFIED
    return None


def _long_line_share(data: bytes) -> float:
    """The share of ``data``'s bytes that lie on lines longer than :data:`LONG_LINE`."""
    long = sum(len(line) for line in data.split(b"\n") if len(line) > LONG_LINE)
    return long / len(data)
