"""Documents from files: what ``rechunk sync PATH...`` reads.

Every file whose type a parser reads (see :mod:`rechunk.sources`: text, Markdown, RST,
AsciiDoc, HTML, PDF, Office files, notebooks, e-mail, records, and source code) becomes
one document or more; a file of another type is counted by its suffix, never embedded
as raw bytes or markup.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rechunk.document import Document, is_utf8
from rechunk.errors import ConfigError, InputError, MissingDependencyError
from rechunk.sources._read import mode_kind, read_bytes, special_kind
from rechunk.sources.base import ParseError
from rechunk.sources.documents import CODE, documents_from_file, kind_of
from rechunk.sources.encoding import binary_container, check_encoding, decode_text, not_text
from rechunk.sources.generated import (
    built_site,
    generated_by_content,
    generated_by_name,
    generated_in_site,
)
from rechunk.sources.ignore import IgnoreRules, wildmatch
from rechunk.sources.registry import ParseOptions
from rechunk.sources.scripts import HEAD_BYTES

__all__ = [
    "DEFAULT_GLOBS",
    "FileSet",
    "doc_id_clash",
    "files_holding",
    "globs_regex",
    "printable",
    "read_bytes",
    "read_documents",
    "read_text_file",
    "special_kind",
]

#: every file; those of a type no parser reads are counted by suffix (see FileSet)
DEFAULT_GLOBS = ("*",)


def read_text_file(path: Path, encoding: str | None = None) -> str:
    """A text file's text by the rule of :mod:`rechunk.sources.encoding` (its byte-order
    mark, else UTF-8, else ``encoding``), without a byte-order mark; what none decodes,
    NUL bytes (a :class:`ParseError` naming the file), and a file that is not a regular
    file (a device, a FIFO: never opened) are an :class:`InputError`."""
    data = read_bytes(path)
    try:
        return decode_text(data, check_encoding(encoding))
    except ParseError as exc:
        raise ParseError(exc.reason, path) from None


@dataclass
class FileSet:
    """Documents read from files, and what was left out.

    ``skipped``: ``(doc_id, reason)`` of files that could not be read, of special files
    (devices, FIFOs, sockets: never opened), and of folders that could not be listed
    (shown as ``folder/``). ``unlisted``: the doc_id prefix
    of each such folder (``""`` for a whole root). ``empty``: doc_ids of empty or
    blank files. ``ignored``: the folders (shown as ``folder/``) and the matching files
    that ``.gitignore`` or ``.rechunkignore`` files excluded. ``hidden``: the folders
    (``folder/``) and matching files whose names start with ``.``, which are not read
    (but a version control's folder, rechunk's own, the ignore files and what those
    exclude), unless given as paths themselves. ``links``: symbolic links
    to folders, which are not followed (shown as ``link/``). ``unsupported``: how many
    matching files of each suffix no parser reads (``""``: no suffix); they are not read.
    ``generated``: ``(doc_id, reason)`` of the lockfiles, minified files and code marked
    generated that were left out (see :mod:`rechunk.sources.generated`). ``binary``:
    doc_ids of files with a source-code suffix that are not text (a video saved as
    ``.ts``: an MPEG transport stream, or bytes that did not read as text and look
    binary); not read, and no failure.
    ``inline_data``: ``(doc_id, bytes)`` of the documents whose text holds base64
    ``data:`` URIs of :data:`INLINE_DATA_NOTE` bytes or more (a picture pasted into a
    Markdown note): read and embedded as text, which costs many tokens and finds nothing.
    ``too_large``: ``(doc_id, bytes)`` of the files larger than ``max_bytes``, not
    read; their documents are kept, as a skipped file's are.
    ``record_files``: the doc_ids of the files of records read whole (JSON, JSONL:
    their documents are ``file#id``), whose other records a sync deletes
    (``rechunk.sync(complete_files=...)``).
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    unsupported: Counter[str] = field(default_factory=Counter)
    generated: list[tuple[str, str]] = field(default_factory=list)
    binary: list[str] = field(default_factory=list)
    too_large: list[tuple[str, int]] = field(default_factory=list)
    #: the file each doc_id was read from (a record file's doc_ids share its path's)
    paths: dict[str, Path] = field(default_factory=dict)
    record_files: set[str] = field(default_factory=set)
    inline_data: list[tuple[str, int]] = field(default_factory=list)

    def kept_in(self, store: Any, prune: bool) -> set[str]:
        """The doc_ids of ``store`` a sync that deletes (``prune``, or the records removed
        from :attr:`record_files`) must keep: those of files that exist but were not
        read (:meth:`covers`). The stored ids are read only then: a read of every one."""
        if not (prune or self.record_files) or not (self.skipped or self.too_large):
            return set()
        if store.collection_info() is None:
            return set()
        return {doc_id for doc_id in store.doc_ids() if self.covers(doc_id)}

    def covers(self, doc_id: str) -> bool:
        """Whether ``doc_id`` may be a file that exists but was not read: a skipped or
        too large file (or a record of one: ``file#id``), or any file under a folder that
        could not be listed. Its documents are kept."""
        return any(_holds(kept, doc_id) for kept, _ in (*self.skipped, *self.too_large)) or any(
            doc_id.startswith(prefix) for prefix in self.unlisted
        )


def files_holding(file_ids: Iterable[str], doc_ids: Iterable[str]) -> list[str]:
    """The files of ``file_ids`` that hold one of ``doc_ids`` (as themselves, or as their
    records: ``file#id``), in their order."""
    wanted = list(doc_ids)
    return [name for name in file_ids if any(_holds(name, d) for d in wanted)]


def _holds(file_id: str, doc_id: str) -> bool:
    """Whether ``doc_id`` is the file ``file_id`` or one of its records (``file#id``)."""
    return doc_id == file_id or doc_id.startswith(file_id + "#")


def globs_regex(globs: Sequence[str]) -> re.Pattern[str]:
    """One regex for the relative paths that ``globs`` match at any depth (git's wildcard
    syntax, as in .gitignore: ``*`` and ``?`` stop at ``/``, ``**/`` spans folders).

    A pattern starting with ``!`` excludes what it matches, and what lies in a folder it
    matches (``!tests``, ``!tests/``, ``!tests/**``), whatever the order; patterns that
    all exclude apply to :data:`DEFAULT_GLOBS`. ``\\!`` starts a pattern with a literal
    ``!``."""
    include: list[str] = []
    exclude: list[str] = []
    for given in globs:
        if given.startswith("!"):
            # as in .gitignore, it leaves out a folder of that name too: `!tests`, `!tests/`
            pattern = given[1:].rstrip("/")
            folder = _glob_regex(pattern + "/**", given)
            exclude.append(folder if given.endswith("/") else _glob_regex(pattern, given))
            exclude.append(folder)
        else:
            include.append(_glob_regex(given, given))
    regex = "|".join(include or [_glob_regex(p, p) for p in DEFAULT_GLOBS])
    if exclude:  # for fullmatch: no exclusion matches the whole path
        regex = f"(?!(?:{'|'.join(exclude)})\\Z)(?:{regex})"
    return re.compile(regex, re.S)


def _glob_regex(pattern: str, given: str) -> str:
    """The regex source of one ``--glob`` pattern (``given`` as the user wrote it)."""
    if not pattern or Path(pattern).is_absolute():
        raise ConfigError(
            f"--glob {given!r}: a pattern is a file name pattern relative to each folder "
            "(such as '*.md' or 'guides/*.rst'; '!tests/**' leaves files out)"
        )
    regex = wildmatch("**/" + pattern)
    if regex is None:
        raise ConfigError(f"--glob {given!r}: an unclosed [ or a trailing backslash")
    return f"(?:{regex.pattern})"


@dataclass
class _Found:
    files: list[Path]
    unreadable: list[tuple[Path, str]]
    ignored: list[tuple[Path, str]]  # (path, "/" for a folder, else "")
    hidden: list[tuple[Path, str]]  # the same, for names starting with "."
    links: list[tuple[Path, str]]
    # matching entries that are no file to read (links that lead nowhere, devices,
    # FIFOs, sockets), with why
    broken: list[tuple[Path, str]]
    # the files of ``files`` that are a built site's machinery, with why
    # (rechunk.sources.generated.generated_in_site)
    site: dict[Path, str] = field(default_factory=dict)


#: a folder of a built site: the generator that built it, and the folder's path in it
_Site = tuple[str, PurePosixPath]


#: what :func:`rechunk.sources.generated.built_site` said of each folder, in one reading
_Seen = dict[Path, "str | None"]


def _site_above(path: Path, seen: _Seen) -> _Site | None:
    """The built site (:func:`rechunk.sources.generated.built_site`) whose root holds
    ``path`` (a file or folder given on the command line, or a walk's root), looked for in
    the folders above it, with ``path``'s place in it; None for a path in no built site.
    ``seen`` keeps each folder's answer for the rest of one reading (a watcher reads
    every changed file by naming it)."""
    real = path.resolve()
    for folder in real.parents:
        if folder not in seen:
            seen[folder] = built_site(folder)
        generator = seen[folder]
        if generator is not None:
            return generator, PurePosixPath(real.relative_to(folder).as_posix())
    return None


#: hidden names not counted as left out: version control's, rechunk's own, the ignore files
_UNCOUNTED = frozenset(
    {".git", ".hg", ".svn", ".rechunk", ".gitignore", ".rechunkignore", ".DS_Store"}
)


def _ignores_itself(folder: Path) -> bool:
    """Whether ``folder`` holds a .gitignore of ``*`` (a venv, a tool's cache: uv, pytest
    and mypy write one so that git ignores the folder)."""
    try:
        lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "*" in (line.strip() for line in lines.splitlines())


def _candidates(root: Path, globs: re.Pattern[str], gitignore: bool, seen: _Seen | None) -> _Found:
    """Matching files under ``root`` in one walk that enters no hidden folder, no folder
    ``.gitignore`` (when ``gitignore``) or ``.rechunkignore`` excludes and no symbolic
    link to a folder; with the folders that could not be listed (with why), the folders
    and matching files those files excluded, and the links to folders not followed.
    ``seen``: what :func:`_site_above` keeps of each folder (the walk's folders added, by
    their real path), or None when a built site's machinery is read as any file (no
    folder is asked whether a site is built there)."""
    matches = globs.fullmatch
    rules = IgnoreRules(root, gitignore)
    found = _Found([], [], [], [], [], [])
    sites: dict[Path, _Site] = {}  # each folder walked that a built site holds
    # a folder walked is this and its path under root: the walk follows no link to a folder
    real_root = root.resolve() if seen is not None else root

    def failed(exc: OSError) -> None:
        found.unreadable.append((Path(exc.filename), exc.strerror or str(exc)))

    for folder, subfolders, names in os.walk(root, onerror=failed):
        here = Path(folder)
        parts = here.relative_to(root).parts
        site: _Site | None = None
        if seen is not None:
            real = real_root.joinpath(*parts)
            if real not in seen:
                seen[real] = built_site(here, (*names, *subfolders))
            generator = seen[real]
            if generator is not None:
                site = (generator, PurePosixPath())
            elif not parts:
                site = _site_above(here, seen)
            elif here.parent in sites:
                generator, place = sites[here.parent]
                site = (generator, place / here.name)
            if site is not None:
                sites[here] = site
        kept = []
        for name in sorted(subfolders):
            if name.startswith("."):
                if not (
                    name in _UNCOUNTED
                    or rules.ignores((*parts, name), folder=True)
                    or _ignores_itself(here / name)
                ):  # what git ignores (a .venv/) is not named
                    found.hidden.append((here / name, "/"))
                continue
            if rules.ignores((*parts, name), folder=True):
                found.ignored.append((here / name, "/"))
            elif os.path.islink(here / name):
                found.links.append((here / name, "/"))
            else:
                kept.append(name)
        subfolders[:] = kept
        for name in sorted(names):
            if not matches("/".join((*parts, name))):
                continue
            if name.startswith("."):
                if name not in _UNCOUNTED and not rules.ignores((*parts, name), folder=False):
                    found.hidden.append((here / name, ""))
                continue
            if rules.ignores((*parts, name), folder=False):
                found.ignored.append((here / name, ""))
            elif (here / name).is_file():  # not a dangling link, a pipe or a socket
                found.files.append(here / name)
                if site is not None:
                    machinery = generated_in_site(site[0], site[1] / name)
                    if machinery is not None:
                        found.site[here / name] = machinery
            elif os.path.islink(here / name):
                found.broken.append((here / name, _broken_link(here / name)))
            else:
                kind = special_kind(here / name)
                if kind is not None:
                    found.broken.append((here / name, f"not a regular file ({kind})"))
    return found


def _broken_link(path: Path) -> str:
    """Why a symbolic link leads to no file: it dangles, loops, or names a folder or a
    special file."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if exc.errno == errno.ENOENT:
            return f"a dangling symbolic link (to {os.readlink(path)})"
        return f"cannot follow the symbolic link: {exc.strerror or exc}"
    kind = mode_kind(mode)
    if kind is not None:
        return f"not a regular file (a symbolic link to a {kind})"
    return "a symbolic link to something that is not a file"


#: the bytes of base64 ``data:`` URIs from which a document is named in ``inline_data``
INLINE_DATA_NOTE = 4096
# (``;base64`` in any case, as MIME allows; the payload may be wrapped over lines)
_DATA_URI = re.compile(
    r"data:[\w.+-]{1,80}/[\w.+-]{1,80}(?:;[\w.+=-]{1,80})*;base64,([A-Za-z0-9+/=\s]+)",
    re.IGNORECASE,
)


def inline_data_bytes(text: str) -> int:
    """The base64 characters of the ``data:`` URIs in ``text`` (0 without any)."""
    if "base64," not in text.lower():
        return 0
    return sum(len("".join(m.group(1).split())) for m in _DATA_URI.finditer(text))


def _printable(doc_id: str) -> str:
    """``doc_id`` with anything that cannot be printed as UTF-8 escaped."""
    return doc_id.encode("utf-8", "backslashreplace").decode("utf-8")


#: Characters a terminal acts on rather than shows: C0 and C1 controls, DEL, the line and
#: paragraph separators. The invisible format characters (bidirectional overrides, which
#: reorder what follows; a zero-width space or a byte order mark, which make two names
#: look alike) are Unicode's ``Cf``, escaped by :func:`printable` by their category.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    return _escape_char(match.group())


#: why a file whose name is not valid UTF-8 is skipped
_NAME_NOT_UTF8 = (
    "its path is not valid UTF-8 (saved under another system's encoding?), and a doc_id "
    "must be: rename it (convmv -f latin1 -t utf-8 renames such files)"
)


def printable(text: str) -> str:
    """``text`` safe to print on one terminal line: control characters (a newline, ESC),
    separators, bidirectional overrides and every other invisible format character
    (Unicode's ``Cf``, but the joiners scripts spell with) as ``\\xNN`` / ``\\uNNNN``,
    and anything that is not valid UTF-8 (a lone surrogate from an undecodable file name)
    backslash-escaped. What is printed of a file name can then neither start a new line
    nor move the cursor, nor look like another name."""
    out = _CONTROLS.sub(_escape, _printable(text))
    if out.isascii():
        return out
    return "".join(
        _escape_char(char) if unicodedata.category(char) == "Cf" and char not in _JOINERS else char
        for char in out
    )


_JOINERS = frozenset("\u200c\u200d")  # zero-width non-joiner and joiner: scripts spell with them


def _escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def doc_id_clash(path: Path, other: Path, doc_id: str) -> str:
    """What a sync says of a file that would take the doc_id another file's document
    has in the collection (two folders' ``README.md``)."""
    return (
        f"{printable(str(path))} would replace {printable(str(other))}: both are doc_id "
        f"{printable(doc_id)!r} in this collection"
    )


def _size(path: Path) -> int | None:
    """``path``'s size in bytes, its link followed; None when it cannot be looked at
    (reading it then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _gone(exc: InputError, out: FileSet, doc_id: str) -> bool:
    """Whether ``exc`` says the file was removed after its folder was listed (a temporary
    file, a save by rename): then it is as if never found, not a file that cannot be
    read (skipped, exit 1, its documents kept under --prune)."""
    if not isinstance(exc.__cause__, FileNotFoundError):
        return False
    out.paths.pop(doc_id, None)
    return True


def _named(head: str, root: Path, path: Path) -> str:
    """The doc_id of ``path`` under ``root``, whose files' doc_ids start with ``head``."""
    return head + path.relative_to(root).as_posix()


#: what to do when two files read map to one doc_id
_ONE_OF_THEM = "rename or remove one of them, or leave one out with .rechunkignore"


def read_documents(
    paths: Sequence[str | Path],
    globs: Sequence[str] = DEFAULT_GLOBS,
    *,
    within: Sequence[str | Path] = (),
    gitignore: bool = True,
    fmt: str | None = None,
    options: ParseOptions | None = None,
    include_generated: bool = False,
    max_bytes: int | None = None,
) -> FileSet:
    """Read every matching file under ``paths`` (folders are searched recursively).

    Each file is parsed by the parser of its type (:func:`rechunk.sources.documents.
    documents_from_file`; ``fmt`` forces one, ``options`` go to the parsers); a file of
    a type no parser reads is counted in ``unsupported`` by its suffix and not read. A
    file of records gives one document per record (doc_id ``path#id``).

    ``doc_id`` is the file's path relative to the folder given (POSIX separators),
    unless a folder of ``within`` (the folders synced before) or another folder of
    ``paths`` holds that folder: its files are named relative to the outermost such
    folder, as a sync of it names them (``docs/guides`` after ``docs``: ``guides/x.md``,
    not a second document ``x.md``). A file given directly is named relative to the
    outermost of those folders that holds it, else by its name. ``roots`` lists the
    paths as given, made absolute (a symbolic link is not resolved: ``current`` switched
    from ``v1`` to ``v2`` stays one root). A file reached twice
    (overlapping paths, a symbolic link to a file also found directly) is read once,
    under its first doc_id a parser reads. A file that cannot be read, is not valid UTF-8, holds
    NUL bytes or has a name that is not valid UTF-8 is skipped with the reason, and
    so is a folder that cannot be listed; an empty or blank file is listed in
    ``empty``; hidden files and folders are ignored, and so is what the ``.gitignore``
    files of a folder (and of the folders above it, up to the top of its git
    repository) exclude, unless ``gitignore`` is False, and what its ``.rechunkignore``
    files (the same syntax, read after them) exclude (see :mod:`rechunk.sources.ignore`).
    A file or folder named directly is read whatever those files say. Symbolic
    links to folders are not followed; a matching symbolic link that dangles or loops
    is skipped with the reason, and so is a device, FIFO or socket, given or found (it
    is never opened). ``globs`` use git's wildcard syntax and match
    at any depth (``*.md``; ``guides/*.rst``; ``docs/**/*.md``).

    Lockfiles, minified files and source code marked generated
    (:mod:`rechunk.sources.generated`) are listed in ``generated`` and not read, found
    or named directly, unless ``include_generated``. A file of more than ``max_bytes``
    bytes is listed in ``too_large`` and not read (a parser holds a file's text, and a
    sync its chunks, in memory at once).
    """
    pattern = globs_regex(globs)
    homes = [Path(folder).resolve() for folder in within]
    homes += [Path(p).resolve() for p in paths if Path(p).is_dir()]
    homes.sort(key=lambda home: len(home.parts))  # the outermost first
    out = FileSet()
    read: set[Path] = set()
    parsed_from: dict[str, Path] = {}  # each document read so far -> its file
    left_out: set[Path] = set()
    hidden: dict[Path, str] = {}  # each hidden entry met in a folder -> its name
    seen: _Seen = {}  # each folder looked at for a built site's markers -> its generator
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            found = _candidates(root, pattern, gitignore, None if include_generated else seen)
            resolved = root.resolve()
            base = next((h for h in homes if resolved.is_relative_to(h)), resolved)
            named = resolved.relative_to(base).as_posix()
            head = "" if named == "." else named + "/"  # the doc_id prefix of root's files
            name = functools.partial(_named, head, root)
            files = [(p, name(p)) for p in found.files]
            machinery = found.site
            for path, suffix in found.hidden:
                hidden.setdefault(
                    path.parent.resolve() / path.name, _printable(name(path)) + suffix
                )
            for listed, entries in ((out.ignored, found.ignored), (out.links, found.links)):
                for path, suffix in entries:
                    entry = path.parent.resolve() / path.name  # once, however often reached
                    if entry not in left_out:
                        left_out.add(entry)
                        listed.append(_printable(name(path)) + suffix)
            for link, why in found.broken:
                entry = link.parent.resolve() / link.name
                if entry not in left_out:
                    left_out.add(entry)
                    out.skipped.append((_printable(name(link)), why))
            for folder, why in found.unreadable:
                prefix = head if folder == root else f"{name(folder)}/"
                out.unlisted.append(prefix)
                out.skipped.append((prefix or "./", f"cannot read folder {folder}: {why}"))
        elif root.is_file() or special_kind(root) is not None:
            resolved = root.resolve()
            home = next((h for h in homes if resolved.is_relative_to(h)), None)
            doc_id = resolved.relative_to(home).as_posix() if home else root.name
            kind = special_kind(root)
            if kind is not None:  # never opened: a FIFO would block, a device never end
                out.skipped.append((_printable(doc_id), f"not a regular file ({kind})"))
                continue
            files = [(root, doc_id)]
            machinery = {}
            site = None if include_generated else _site_above(root, seen)
            if site is not None and (reason := generated_in_site(*site)) is not None:
                machinery[root] = reason
        else:
            raise ConfigError(f"no such file or folder: {root}")
        out.roots.append(os.path.abspath(root))
        # real files before symbolic links to them, so that a file keeps its own name
        for path, doc_id in sorted(files, key=lambda item: item[0].is_symlink()):
            real = path.resolve()
            if real in read:
                continue
            if doc_id in out.paths:
                raise ConfigError(
                    f"two files map to the same doc_id {doc_id!r}: {out.paths[doc_id]} and "
                    f"{path}; {_ONE_OF_THEM}"
                )
            out.paths[doc_id] = path
            tool_written = (
                None if include_generated else machinery.get(path) or generated_by_name(path)
            )
            if tool_written is not None:
                read.add(real)
                out.generated.append((_printable(doc_id), tool_written))
                continue
            try:
                read_as = kind_of(path, fmt)
                if read_as is None and not path.suffix:  # a script, by its first line
                    read_as = kind_of(path, fmt, head=read_bytes(path, HEAD_BYTES))
            except InputError as exc:
                read.add(real)
                if _gone(exc, out, doc_id):
                    continue
                out.skipped.append((_printable(doc_id), str(exc)))
                continue
            if read_as is None:
                # not marked read: a link to this file under a name a parser reads
                # (README.md -> README) is read
                out.unsupported[path.suffix.lower()] += 1
                continue
            read.add(real)
            if not is_utf8(doc_id):  # its documents could not be stored under any doc_id
                out.skipped.append((_printable(doc_id), _NAME_NOT_UTF8))
                continue
            if max_bytes is not None and (size := _size(path)) is not None and size > max_bytes:
                out.too_large.append((_printable(doc_id), size))
                continue
            data = None
            try:
                data = read_bytes(path)
                if read_as == CODE and path.suffix.lower() == ".ts" and binary_container(data):
                    out.binary.append(_printable(doc_id))
                    continue
                if not include_generated and read_as == CODE:
                    tool_written = generated_by_content(data)
                    if tool_written is not None:
                        out.generated.append((_printable(doc_id), tool_written))
                        continue
                parsed = documents_from_file(path, doc_id, read_as, options, data=data)
            except InputError as exc:  # a ParseError's reason: the row names the file
                if _gone(exc, out, doc_id):
                    continue
                if read_as == CODE and data is not None and not_text(data):
                    out.binary.append(_printable(doc_id))  # a binary with a code suffix
                    continue
                why = exc.reason if isinstance(exc, ParseError) else str(exc)
                out.skipped.append((_printable(doc_id), why))
                continue
            except MissingDependencyError as exc:  # its parser's extra: the rest are read
                out.skipped.append((_printable(doc_id), str(exc)))
                continue
            if not parsed:
                out.empty.append(doc_id)
            elif any(doc.doc_id != doc_id for doc in parsed):
                out.record_files.add(doc_id)
            for doc in parsed:
                inline = inline_data_bytes(doc.text)
                if inline >= INLINE_DATA_NOTE:
                    out.inline_data.append((_printable(doc.doc_id), inline))
            for doc in parsed:  # a record's doc_id (data.jsonl#a.md) may name a file too
                holder = parsed_from.get(doc.doc_id) or out.paths.get(doc.doc_id)
                if holder is not None and holder != path:
                    raise ConfigError(
                        f"two files map to the same doc_id {doc.doc_id!r}: {holder} and "
                        f"{path}; {_ONE_OF_THEM}"
                    )
                parsed_from.setdefault(doc.doc_id, path)
            out.documents.extend(parsed)
    # a hidden folder or file given as a path itself (`repo repo/.github`) is read
    given = [Path(raw).resolve() for raw in paths]
    out.hidden = [
        name
        for entry, name in hidden.items()
        if not any(g.is_relative_to(entry) or g.is_relative_to(entry.resolve()) for g in given)
    ]
    return out
