"""The watcher: an initial sync of some folders, then a sync of each batch of changes.

File events only say *which* paths to look at; what a path holds is read when it is
stable (its size, mtime and inode unchanged for ``settle`` seconds, so that a save
written in several steps, a truncate-then-write or a temp file renamed into place is
never read half-written), through :func:`rechunk.sources.files.read_documents` with the same
globs, ``.gitignore``, ``.rechunkignore`` and hidden-name rules as ``rechunk sync``
(:class:`Selection`).
Paths that become ready together form one batch (a burst of events waits, up to
``max_wait``, until every path in it is stable, so a ``git checkout`` is a few
batches); each batch is one :func:`rechunk.sync` of the documents read, then the
deletion of the documents whose files are gone (after the sync, so that a file moved
within the folder is published under its new doc_id with the vectors of its old
points: nothing is embedded again), then the freshness probe of every revision the
batch accepted.

A batch that fails for a reason that may pass (a store that cannot be reached, an
embedder that failed, a stale check) goes back to the queue, whole, and is tried again
after a back-off that doubles up to ``backoff[1]`` seconds: no change is lost, and
since a sync plans from what the store holds, trying again repairs whatever the
failure left half-done.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rechunk._heap import release_free_heap
from rechunk.chunking.chunk import Chunker
from rechunk.document import Document
from rechunk.errors import (
    ConfigError,
    EmbeddingError,
    InputError,
    RechunkError,
    TransientError,
)
from rechunk.live.events import FileEvents
from rechunk.live.freshness import DiagnosisLog, Freshness
from rechunk.live.metrics import LiveMetrics
from rechunk.live.selection import Selection
from rechunk.reuse.cache import EmbeddingCache
from rechunk.reuse.embedding import Embedder
from rechunk.sources.documents import CODE, code_language, kind_of
from rechunk.sources.files import DEFAULT_GLOBS, FileSet, doc_id_clash, read_documents
from rechunk.sources.ignore import GITIGNORE, RECHUNKIGNORE
from rechunk.sources.registry import FORMATS
from rechunk.sources.scripts import HEAD_BYTES
from rechunk.sync import SyncReport, sync
from rechunk.sync.inputs import check_flags, check_parts
from rechunk.sync.store import StoredPoint, VectorStore

__all__ = ["BatchReport", "Watcher"]

log = logging.getLogger("rechunk.live")

#: the source types a metric may name: every format a parser reads, and code (anything
#: else is ``other``)
_SOURCE_TYPES = frozenset(FORMATS) | {CODE}
#: how many of a document's points a freshness probe may search with
_PROBES = 3

Stat = tuple[int, int, int, bool]  # size, mtime_ns, inode, is a folder
FileKey = tuple[int, str]  # (root index, path below the root)


def _stat(path: str) -> Stat | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, os.path.isdir(path))


@dataclass
class _Entry:
    """A path waiting to be read: when it was first seen (monotonic and wall clock), its
    last event, its last stat and when that last changed, and failed attempts."""

    first_seen: float
    wall: float
    last_event: float
    stat: Stat | None = None
    changed_at: float = 0.0
    checked: bool = False
    parse_attempts: int = 0
    failures: int = 0


@dataclass
class BatchReport:
    """What one batch did. Counts, sizes and durations only: no document text.

    ``files``: the files the batch read or found gone (a file of records counts once;
    folders and an editor's temporary files are none; a batch that failed: the changed
    paths it held, read again when it is retried); ``accepted``: document revisions
    read that differ from what the store held (new, changed, and deletions);
    ``published`` / ``deleted``: written and removed (an initial sync's ``deleted``: every
    document it deleted, pruned or of a file gone while no watcher ran); ``embedded``,
    ``reused`` and ``tokens_embedded``: the inputs sent to the model, those whose vector
    came from the cache or the store, and the tokens sent, each distinct input once (an
    input several documents of the batch share counts once, as in the sync's report);
    ``retrievable``: revisions the probe found returned by the store's query path (and no
    earlier one); ``stale``: documents for which an earlier revision was still returned;
    ``pending``: accepted revisions not yet retrievable after the batch (all batches);
    ``queued``: changed
    paths seen but not yet read after it, events not yet taken among them (a revision
    is accepted only when its file is read, so a watcher that is behind has changes
    that no ``pending`` count shows yet: caught up means both are 0). ``lag``: seconds from
    each verified revision's first event to its verification. ``retry_in``: the batch
    failed and is queued again, to be tried after that many seconds; ``errors``: (kind,
    one line) of what failed; ``too_large``: the files read in the batch that were over
    ``max_bytes``, so not read (what they had stays stored)."""

    kind: str = "batch"  # "initial", "batch", "rescan" or "verify"
    files: int = 0
    accepted: int = 0
    published: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    retrievable: int = 0
    stale: int = 0
    pending: int = 0
    queued: int = 0
    embedded: int = 0
    reused: int = 0
    tokens_embedded: int = 0
    model_check_tokens: int = 0  # the syncs' model checks (SyncReport.model_check_tokens)
    lag: list[float] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    retry_in: float | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)
    too_large: list[str] = field(default_factory=list)
    sync: SyncReport | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("sync")
        data["lag"] = [round(x, 4) for x in self.lag]
        data["seconds"] = {k: round(v, 4) for k, v in self.seconds.items()}
        return data


class _Retry(Exception):
    """A batch to try again later (the cause is chained)."""

    def __init__(self, cause: BaseException, counts: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.counts = counts  # whether it counts against the batch's attempts


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def _file_names(doc_id: str) -> list[str]:
    """The names of the files ``doc_id`` may come from: itself, or a file of records
    (``file#id``; a name may hold ``#`` itself)."""
    return [doc_id] + [doc_id[:i] for i, c in enumerate(doc_id) if c == "#"]


def _link_target(path: str | os.PathLike[str]) -> str | None:
    """The file a symbolic link ``path`` leads to (its links all followed), None when
    ``path`` is no link."""
    return os.path.realpath(path) if os.path.islink(path) else None


def _walk_order(index: int, parts: Sequence[str]) -> tuple[Any, ...]:
    """Where ``rechunk sync``'s walk meets the file ``parts`` of the folder ``index``: the
    folders in the order given, in each folder its files (by name) before its subfolders
    (by name)."""
    return (index, *((1, part) for part in parts[:-1]), (0, parts[-1]))


def _renamed(files: FileSet, name: str) -> FileSet:
    """``files``, read from one file given by its path, with what it read named ``name``
    (records: ``name#id``), the name the walk of its folder gives that file. A symbolic
    link given by its path is named after the file it leads to (by that file's own name
    when it lies out of the folder); the walk names it by its own path in the folder."""
    given = next(iter(files.paths), None)
    if given is None or given == name:
        return files

    def new(doc_id: str) -> str:
        if doc_id == given:
            return name
        return name + doc_id[len(given) :] if doc_id.startswith(given + "#") else doc_id

    files.documents = [replace(d, doc_id=new(d.doc_id)) for d in files.documents]
    files.skipped = [(new(d), why) for d, why in files.skipped]
    files.empty = [new(d) for d in files.empty]
    files.too_large = [(new(d), size) for d, size in files.too_large]
    files.record_files = {new(d) for d in files.record_files}
    files.paths = {new(d): path for d, path in files.paths.items()}
    return files


def _spread(total: int, own: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """A sync's count of distinct inputs (or their tokens), ``total``, split between the
    labels whose documents counted ``own`` of them each (an input several documents
    share counts in each one's own count): as they are when none is shared, else in
    proportion (largest remainders; none above its own count)."""
    whole = sum(own.values())
    if whole <= total:
        return dict(own)
    shares = {label: total * count / whole for label, count in own.items()}
    spread = {label: int(share) for label, share in shares.items()}
    left = total - sum(spread.values())
    for label in sorted(shares, key=lambda label: spread[label] - shares[label])[:left]:
        spread[label] += 1
    return spread


def check_not_nested(paths: Sequence[str | os.PathLike[str]]) -> None:
    """A :class:`~rechunk.ConfigError` when one folder lies inside another: the initial sync
    names its files from the outer folder and their events from the inner one, so a file
    in both would become two documents. (The same folder given twice is one folder.)"""
    real = [Path(path).resolve() for path in paths]
    for inner, outer in itertools.permutations(range(len(real)), 2):
        if real[inner] != real[outer] and real[inner].is_relative_to(real[outer]):
            raise ConfigError(
                f"{os.fspath(paths[inner])} lies inside {os.fspath(paths[outer])}, which is "
                f"watched with all it holds: watch {os.fspath(paths[outer])} alone"
            )


class Watcher:
    """Keep a collection in step with folders as their files change.

    ``paths`` are folders; documents are read as :func:`rechunk.sources.files.read_documents`
    reads them (``globs``, ``gitignore``, and ``read_options`` passed on: the parser
    options of ``rechunk sync``), and synced with ``chunker`` / ``chunker_for`` and
    ``embedder`` through ``cache`` into ``store``, all kept open. ``prune``: as in
    :func:`rechunk.sync`, for the initial sync (and a rescan after a ``.gitignore``
    or ``.rechunkignore`` changes); an emptied file's documents are then deleted too, as
    a pruning sync does.

    Run it with :meth:`run` (events from ``watchfiles``), or in your own loop:
    :meth:`initial_sync`, then :meth:`feed` the paths your watcher reports (from any
    thread) and call :meth:`step` now and then (it syncs what is ready, and returns
    a :class:`BatchReport`, or None when nothing was ready).

    ``freshness`` keeps the accepted revisions not yet retrievable (give one with a
    path to keep them in a file); ``metrics`` and ``diagnosis`` receive counts and
    durations. ``settle``: seconds a path must stay unchanged before it is read;
    ``max_wait``: how long ready paths wait for the others of a burst; ``max_batch``:
    paths per batch; ``backoff``: the first and the longest wait before a failed batch
    is tried again; ``parse_retries``: how often a file that fails to parse is read
    again (it may still have been written) before it is reported failed.

    ``elsewhere``: ``(doc_id, path) -> Path | None``, the file other than ``path`` that
    holds ``doc_id`` in a folder synced into the collection but not watched here (the CLI
    passes the folders ``rechunk sync`` recorded). A file read while watching whose
    doc_id such a file, or another watched folder's file, already holds would replace
    that document: it is reported failed and left out until it is written again (or,
    another watched folder's, until that file goes), as ``rechunk sync`` refuses the
    same clash.

    ``release_memory`` (default on): a watcher lives for hours, so it gives back the
    memory a batch used. Once the initial sync is done, an embedder that can give the
    working memory of each run back (the ONNX default's ``release_memory``) is set to
    do so (else it keeps the memory of the largest batch it ever met; the initial sync
    runs as ``rechunk sync`` does, and its memory goes back after the first run that
    follows), and after each batch the C heap's free pages go back to the system
    (:func:`release_free_heap`). The embedder is changed in place; pass False to leave
    it and the heap as they are.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        store: VectorStore,
        *,
        chunker: Chunker,
        embedder: Embedder,
        cache: EmbeddingCache | None = None,
        globs: Sequence[str] = DEFAULT_GLOBS,
        gitignore: bool = True,
        read_options: Mapping[str, Any] | None = None,
        chunker_for: Callable[[Document], Chunker | None] | None = None,
        prune: bool = False,
        settle: float = 0.1,
        max_wait: float = 2.0,
        max_batch: int = 1000,
        backoff: tuple[float, float] = (0.5, 30.0),
        parse_retries: int = 2,
        max_failures: int = 5,
        freshness: Freshness | None = None,
        metrics: LiveMetrics | None = None,
        diagnosis: DiagnosisLog | None = None,
        probe_k: int = 20,
        release_memory: bool = True,
        elsewhere: Callable[[str, Path], Path | None] | None = None,
    ) -> None:
        check_flags(gitignore=gitignore, prune=prune, release_memory=release_memory)
        check_parts(store, chunker, embedder, cache, chunker_for=chunker_for, elsewhere=elsewhere)
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if not paths:
            raise ConfigError("watch needs at least one folder")
        for path in paths:
            if not Path(path).is_dir():
                raise ConfigError(
                    f"{path} is not a folder: watch takes folders (a single file: watch its "
                    "folder with --glob naming it)"
                )
        check_not_nested(paths)
        self.store = store
        self.chunker = chunker
        self.embedder = embedder
        self.release_memory = release_memory
        self.cache = cache
        self.globs = list(globs)
        self.gitignore = gitignore
        self.read_options = dict(read_options or {})
        self.chunker_for = chunker_for
        self.prune = prune
        self.settle = settle
        self.max_wait = max_wait
        self.max_batch = max_batch
        self.backoff = backoff
        self.parse_retries = parse_retries
        self.max_failures = max_failures
        self.freshness = freshness if freshness is not None else Freshness()
        self.metrics = metrics
        self.diagnosis = diagnosis
        self.probe_k = probe_k
        self.elsewhere = elsewhere
        self.selections = [Selection(p, self.globs, gitignore) for p in paths]
        self._files: dict[FileKey, set[str]] = {}
        # the files of _files that are symbolic links, and the file each leads to: a file
        # reached twice is read once, as a sync reads it (see _left_out)
        self._link_targets: dict[FileKey, str] = {}
        # the folders the synced files lie in, for _moot: (the _files_epoch it was made
        # at, the set); _files_epoch moves on after each change of _files
        self._files_epoch = 0
        self._folders: tuple[int, frozenset[FileKey]] = (-1, frozenset())
        # the doc_ids of each folder's files, kept beside the state file so that a restart
        # deletes the documents of files removed while no watcher ran (see initial_sync)
        state = self.freshness.path
        self._watched_path = None if state is None else state.with_suffix(".files.json")
        self._watched_dirty = True
        self._known: dict[str, str] = {}  # doc_id -> the revision the store holds
        self._pending: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._rescan: _Entry | None = None
        self._retry_at = 0.0
        self._delay = backoff[0]
        self._last_verify = 0.0
        self._wake_at = 0.0
        self._probes: dict[str, Any] = {}  # doc_id -> a vector a deleted document had
        self._events: FileEvents | None = None  # the file watcher, once started
        if metrics is not None:
            metrics.watch(self.queue_state, self.freshness_state)

    # -- state --------------------------------------------------------------------------

    def queue_state(self) -> tuple[int, float | None]:
        """Paths waiting, and the age in seconds of the oldest (None: none): those taken
        from the file events and not yet read, and those whose events still wait to be
        taken (a watcher takes events between batches, so a long batch, or one waiting
        for a store that stopped answering, would otherwise hide every change made
        meanwhile)."""
        with self._lock:
            firsts = {path: e.first_seen for path, e in self._pending.items()}
        events = self._events
        if events is not None:
            for seen, _, paths in events.waiting():
                for raw in paths:
                    path = os.path.abspath(raw)
                    if path in firsts:
                        firsts[path] = min(firsts[path], seen)
                    elif self._event_kind(path) == "read" and not self._moot(path):
                        firsts[path] = seen
        if not firsts:
            return 0, None
        return len(firsts), max(0.0, time.monotonic() - min(firsts.values()))

    def _event_kind(self, path: str) -> Literal["read", "rescan"] | None:
        """What an event on the absolute ``path`` asks for: ``"read"`` it (queued until
        stable), a ``"rescan"`` of every folder (a ``.rechunkignore`` changed, or a
        ``.gitignore`` that applies), or nothing (outside the folders, or hidden)."""
        found = self._locate(path)
        if found is None:
            return None
        index, parts = found
        hidden = self.selections[index].hidden
        if parts[-1] == RECHUNKIGNORE or (parts[-1] == GITIGNORE and self.gitignore):
            return None if hidden(parts[:-1]) else "rescan"
        return None if hidden(parts) else "read"

    def freshness_state(self) -> tuple[int, int, float | None]:
        """Accepted revisions not yet retrievable, how many of them an earlier revision
        still answers for, and the age of the oldest (None: none)."""
        f = self.freshness
        return len(f.pending), f.stale_count(), f.oldest_age()

    def _policy(self, doc: Document) -> str:
        picked = self.chunker_for(doc) if self.chunker_for is not None else None
        return (picked or self.chunker).policy_id

    @staticmethod
    def _source_type(doc: Document | None, name: str) -> str:
        fmt = (doc.metadata or {}).get("format") if doc is not None else None
        if fmt in _SOURCE_TYPES:
            return str(fmt)
        found = kind_of(name.partition("#")[0])  # a deleted file's: its format, or code
        return found if found in _SOURCE_TYPES else "other"

    def _deleted_policy(self, doc_id: str) -> str:
        """The policy a deleted document's file is chunked with, for its labels (a source
        file's was labelled with the prose policy)."""
        language = code_language(doc_id.partition("#")[0])
        if self.chunker_for is not None and language is not None:
            named = Document(doc_id, "-", metadata={"format": CODE, "language": language})
            picked = self.chunker_for(named)
            if picked is not None:
                return picked.policy_id
        return self.chunker.policy_id

    def _locate(self, path: str) -> tuple[int, tuple[str, ...]] | None:
        """The root (the deepest that holds ``path``) and ``path``'s parts below it."""
        best: tuple[int, tuple[str, ...]] | None = None
        for index, selection in enumerate(self.selections):
            parts = selection.relative(path)
            if parts is not None and parts and (best is None or len(parts) < len(best[1])):
                best = (index, parts)
        return best

    def _file_key(self, doc_id: str) -> FileKey | None:
        """The file a doc_id read at the start came from (a record: ``file#id``)."""
        candidates = _file_names(doc_id)
        for index, selection in enumerate(self.selections):
            for name in candidates:
                path = selection.root / name
                # a link gone dangling too: removing it deletes the document it held
                if path.is_file() or path.is_symlink():
                    return index, name
        return None

    def _read_from(self, files: FileSet, doc_id: str) -> FileKey | None:
        """The key of the file ``files`` read ``doc_id`` from (a record: ``file#id``), by
        the path it was read at: the file may be gone since (None: not read there)."""
        path = next((files.paths[n] for n in _file_names(doc_id) if n in files.paths), None)
        found = None if path is None else self._locate(str(path))
        return None if found is None else (found[0], "/".join(found[1]))

    # -- the files of each folder, across restarts ----------------------------------------

    def _watched_roots(self) -> dict[str, Any]:
        """Each folder's doc_ids as the state file holds them for this collection ({} when
        there is none: a first start, or a watcher without a state file)."""
        path = self._watched_path
        if path is None:
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        roots = data.get("roots") if isinstance(data, dict) else None
        return roots if data.get("key") == self.freshness.key and isinstance(roots, dict) else {}

    def _watched_before(self) -> set[str]:
        """The doc_ids an earlier watcher of these folders had for their files."""
        roots = self._watched_roots()
        found: set[str] = set()
        for selection in self.selections:
            ids = roots.get(str(selection.real))
            if isinstance(ids, list):
                found.update(d for d in ids if isinstance(d, str))
        return found

    def _save_watched(self) -> None:
        """Write the doc_ids of each folder's files when they changed (written atomically;
        the folders of other watchers of the collection keep theirs)."""
        path = self._watched_path
        if path is None or not self._watched_dirty:
            return
        roots = self._watched_roots()
        mine: dict[str, set[str]] = {str(s.real): set() for s in self.selections}
        for (index, _), ids in self._files.items():
            mine[str(self.selections[index].real)].update(ids)
        roots.update({root: sorted(ids) for root, ids in mine.items()})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": self.freshness.key, "roots": roots}), encoding="utf-8")
        tmp.replace(path)
        self._watched_dirty = False

    # -- the initial sync ---------------------------------------------------------------

    def read_all(self) -> FileSet:
        """Every document under the folders, as ``rechunk sync`` reads them."""
        return read_documents(
            [s.root for s in self.selections],
            self.globs,
            gitignore=self.gitignore,
            **self.read_options,
        )

    def initial_sync(self, files: FileSet | None = None, *, kind: str = "initial") -> BatchReport:
        """Sync every document under the folders (``files``: read already, by the
        caller), as ``rechunk sync`` does; revisions accepted before and not yet
        retrievable (the state file of an earlier watcher) are published and probed
        again, and a document such a watcher was deleting whose file is gone is deleted."""
        started, wall = time.monotonic(), time.time()
        report = BatchReport(kind=kind)
        if files is None:
            files = self.read_all()
        docs = list({doc.doc_id: doc for doc in files.documents}.values())
        mapping: dict[FileKey, set[str]] = {}
        unmapped = 0
        for doc in docs:
            # a file removed since it was read is found by its path: its removal is among
            # the first events (`rechunk watch` watches before it reads), and deletes these
            key = self._file_key(doc.doc_id) or self._read_from(files, doc.doc_id)
            if key is not None:
                mapping.setdefault(key, set()).add(doc.doc_id)
            else:
                unmapped += 1
        report.files = len(mapping) + unmapped  # a file of records counts once
        for doc_id in files.empty:
            key = self._file_key(doc_id) or self._read_from(files, doc_id)
            if key is not None:
                mapping.setdefault(key, set())
        read_ids = {doc.doc_id for doc in docs}
        # the stored documents of files that exist but were not read (over max_bytes,
        # unreadable), or were emptied (kept without --prune), stay theirs, so that
        # deleting such a file later deletes them
        emptied = set(files.empty)

        def kept(doc_id: str) -> bool:
            return files.covers(doc_id) or (
                not self.prune and not emptied.isdisjoint(_file_names(doc_id))
            )

        covered: set[str] = set()  # read once: the collection's doc_ids are a read of all
        if (
            files.too_large or files.skipped or (emptied and not self.prune)
        ) and self.store.collection_info() is not None:
            covered = {doc_id for doc_id in self.store.doc_ids() if kept(doc_id)}
            for doc_id in covered - read_ids:
                key = self._file_key(doc_id)
                if key is not None:
                    mapping.setdefault(key, set()).add(doc_id)
        # the documents of files an earlier watcher of these folders synced that are gone
        # now (removed while no watcher ran, or just before it stopped) are deleted, as
        # the watcher would have deleted them; an emptied file keeps its documents (a
        # file of records, its records)
        gone = {
            doc_id
            for doc_id in self._watched_before()
            if doc_id not in read_ids
            and emptied.isdisjoint(_file_names(doc_id))
            and not files.covers(doc_id)
        }
        # an earlier watcher's pending deletions are finished; its pending revisions of
        # files not read now are forgotten (as a sync leaves documents it is not given)
        for doc_id, pending in list(self.freshness.pending.items()):
            if doc_id in read_ids or files.covers(doc_id):
                continue
            if pending.revision is None:
                gone.add(doc_id)
            else:
                del self.freshness.pending[doc_id]
        for doc in docs:  # an earlier watcher's pending revision, edited since: accepted
            entry = self.freshness.pending.get(doc.doc_id)
            if entry is not None and entry.revision != doc.revision:
                self._accept(
                    doc.doc_id,
                    doc.revision,
                    entry.accepted,
                    self._source_type(doc, doc.doc_id),
                    self._policy(doc),
                )
        for doc_id in gone:  # logged and counted once: not again for an earlier watcher's
            source_type, policy = self._source_type(None, doc_id), self._deleted_policy(doc_id)
            earlier = self.freshness.pending.get(doc_id)
            if earlier is not None and earlier.revision is None:
                self.freshness.accept(doc_id, None, wall, source_type, policy)
            else:
                self._accept(doc_id, None, wall, source_type, policy)
        # what a deleting sync keeps (FileSet.kept_in, from the ids read above)
        keep = covered if self.prune or files.record_files else set()
        result = None
        try:
            if docs or not self.prune:
                result = self._sync(
                    docs,
                    prune=self.prune,
                    keep=keep,
                    report=report,
                    complete_files=files.record_files,
                    initial=True,
                )
            if gone:
                before = report.deleted
                deleted = self._delete(gone, report)
                if result is not None:  # counted as chunks that stay: they are deleted ones
                    result.chunks_not_given = max(0, result.chunks_not_given - deleted)
                    result.documents["deleted"] += report.deleted - before
                    result.chunks["deleted"] += deleted
        except _Retry as failure:
            raise failure.cause from None
        if result is not None:
            # the documents the sync deleted (pruned) too, not only the files gone that a
            # watcher held: the count the sync's summary gives
            report.deleted = result.documents["deleted"]
            for rep in result.per_document:
                if rep.status == "deleted":
                    if rep.doc_id not in self.freshness.pending:
                        self._accept(
                            rep.doc_id,
                            None,
                            wall,
                            self._source_type(None, rep.doc_id),
                            self._deleted_policy(rep.doc_id),
                        )
                    self.freshness.published(rep.doc_id, time.time())
        by_id = {doc.doc_id: doc for doc in docs}
        self._account(result, by_id, wall, report, initial=True)
        # a file whose stored document it cannot read now (broken, unreadable, a link gone
        # dangling while no watcher ran): the store serves its old text, so it counts as
        # failed, as it would have while watching; a FIFO or a folder that cannot be
        # listed holds no document, and a rescan does not count a file again (a file's
        # names among the stored doc_ids: its own, or that of its records, file#id)
        if kind == "initial" and covered:
            holding = {name for doc_id in covered for name in _file_names(doc_id)}
            for name, why in files.skipped:
                if name in holding:
                    self._fail(name, "ParseError", f"{name}: {why}", "parse", report)
        self._files = mapping
        self._link_targets = {
            key: target
            for key in mapping
            if (target := _link_target(self.selections[key[0]].root / key[1])) is not None
        }
        self._files_epoch += 1
        self._watched_dirty = True
        self._save_watched()
        self.freshness.save()
        targets = {d: e.revision for d, e in self.freshness.pending.items()}
        self._verify_guarded(targets, report)
        if kind == "initial":
            self.warm_up()
        if self.release_memory and getattr(self.embedder, "release_memory", None) is False:
            self.embedder.release_memory = True  # type: ignore[attr-defined]
        report.pending = len(self.freshness.pending)
        report.queued = self.queue_state()[0]
        report.seconds["total"] = time.monotonic() - started
        return report

    def warm_up(self) -> None:
        """Load a local model now (an ONNX session, a torch model), if an initial sync
        that found nothing to embed left it unloaded: else the first edit would wait for
        it (1.5 s for the default model here). An API embedder sends nothing."""
        load = getattr(self.embedder, "_load", None)
        if getattr(self.embedder, "loaded", True) is False and callable(load):
            try:
                load()
            except Exception as exc:  # the first batch that embeds reports it
                log.warning("could not load the model ahead of the first change: %s", exc)

    # -- events -------------------------------------------------------------------------

    def feed(
        self,
        paths: Iterable[str | os.PathLike[str]],
        now: float | None = None,
        wall: float | None = None,
    ) -> None:
        """Paths that changed (created, modified, deleted or moved: either name); ``now``
        and ``wall``: when (monotonic and wall clock; by default, now)."""
        now = time.monotonic() if now is None else now
        wall = time.time() if wall is None else wall
        with self._lock:
            for raw in paths:
                path = os.path.abspath(raw)
                kind = self._event_kind(path)
                if kind == "rescan":
                    if self._rescan is None:
                        self._rescan = _Entry(now, wall, now)
                    self._rescan.last_event = now
                if kind != "read":
                    continue
                entry = self._pending.get(path)
                if entry is None:
                    self._pending[path] = _Entry(now, wall, now)
                else:
                    entry.last_event = now

    def _ready(self, now: float) -> list[tuple[str, _Entry]]:
        """The paths to read now: every stable path, once no other path is still settling
        (or the oldest waited ``max_wait``); at most ``max_batch``, oldest first."""
        with self._lock:
            items = list(self._pending.items())
        ready, waiting = [], False
        wake = now + 1.0
        for path, entry in items:
            stat = _stat(path)
            if not entry.checked or stat != entry.stat:
                entry.stat, entry.changed_at, entry.checked = stat, now, True
            stable_at = max(entry.changed_at, entry.last_event) + self.settle
            if now >= stable_at:
                ready.append((path, entry))
            else:
                waiting = True
                wake = min(wake, stable_at)
        self._wake_at = wake  # when a path waiting now may be stable: look again then
        if not ready:
            return []
        oldest = min(entry.first_seen for _, entry in items)
        if waiting and now - oldest < self.max_wait:
            return []
        ready.sort(key=lambda item: item[1].first_seen)
        ready = ready[: self.max_batch]
        with self._lock:
            for path, entry in ready:
                if self._pending.get(path) is entry:
                    del self._pending[path]
        return ready

    def _requeue(self, batch: Sequence[tuple[str, _Entry]], now: float) -> None:
        with self._lock:
            for path, entry in batch:
                newer = self._pending.get(path)
                if newer is not None:  # seen again meanwhile: keep the first sighting
                    newer.first_seen = min(newer.first_seen, entry.first_seen)
                    newer.wall = min(newer.wall, entry.wall)
                else:
                    entry.changed_at = now
                    self._pending[path] = entry

    def step(self, now: float | None = None) -> BatchReport | None:
        """Sync what is ready; None when nothing was (or a failed batch still waits)."""
        now = time.monotonic() if now is None else now
        if now < self._retry_at:
            return None
        report = self._step(now)
        if report is not None:
            report.queued = self.queue_state()[0]
        return report

    def _step(self, now: float) -> BatchReport | None:
        rescan = self._rescan
        if rescan is not None and now - rescan.last_event >= self.settle:
            return self._do_rescan(rescan, now)
        batch = self._ready(now)
        if not batch:
            return self._reverify(now)
        try:
            report = self._process(batch, now)
        except _Retry as failure:
            return self._failed(batch, failure, now)
        self._delay = self.backoff[0]
        if self.release_memory:
            started = time.monotonic()
            if release_free_heap():
                report.seconds["release_memory"] = time.monotonic() - started
        return report

    def _moot(self, path: str) -> bool:
        """Whether ``path`` is gone without ever holding a synced document: an editor's
        temporary file (``sed -i``'s, a swap file) made and renamed away between two
        batches. Nothing is left to do for it; a folder is not moot while a synced file
        lay in it."""
        if os.path.lexists(path):
            return False
        found = self._locate(path)
        if found is None:
            return True
        index, parts = found
        name = "/".join(parts)
        if (index, name) in self._files:  # a synced file: its deletion is a change
            return False
        return (index, name) not in self._synced_folders()  # nor a folder one lay in

    def _synced_folders(self) -> frozenset[FileKey]:
        """The folders (root index, path below it) the synced files lie in, made again
        after ``_files`` changed. A metrics scrape asks from its own thread while a batch
        may change ``_files``: the epoch is read before the keys are copied, so a set is
        never older than its epoch says."""
        epoch = self._files_epoch
        made, folders = self._folders
        if made != epoch:
            folders = frozenset(
                (at, name[:cut])
                for at, name in list(self._files)
                for cut, char in enumerate(name)
                if char == "/"
            )
            self._folders = (epoch, folders)
        return folders

    def _failed(
        self, batch: Sequence[tuple[str, _Entry]], failure: _Retry, now: float
    ) -> BatchReport:
        # a temporary file gone since is not tried again, nor counted as waiting
        batch = [item for item in batch if not self._moot(item[0])]
        report = BatchReport(files=len(batch))
        kind = type(failure.cause).__name__
        report.errors.append((kind, _one_line(failure.cause)))
        if self.metrics is not None:
            self.metrics.errors.labels(kind).inc()
        given_up = []
        for item in batch:
            item[1].failures += failure.counts
            if item[1].failures >= self.max_failures:
                given_up.append(item)
        if given_up:  # a batch that keeps failing for a reason that does not pass
            report.failed = len(given_up)
            log.warning(
                "giving up on %d file(s) after %d failures", len(given_up), self.max_failures
            )
        self._requeue([item for item in batch if item not in given_up], now)
        report.retry_in = self._delay
        self._retry_at = now + self._delay
        self._delay = min(self._delay * 2, self.backoff[1])
        report.pending = len(self.freshness.pending)
        log.warning("batch failed (%s); trying again in %.1f s", kind, report.retry_in)
        return report

    def _do_rescan(self, entry: _Entry, now: float) -> BatchReport:
        """A ``.gitignore`` or ``.rechunkignore`` changed: read and sync everything again."""
        for selection in self.selections:
            selection.refresh()
        try:
            report = self.initial_sync(kind="rescan")
        except (RechunkError, OSError) as exc:
            self._retry_at = now + self._delay
            self._delay = min(self._delay * 2, self.backoff[1])
            return BatchReport(
                kind="rescan",
                retry_in=self._retry_at - now,
                errors=[(type(exc).__name__, _one_line(exc))],
            )
        self._rescan = None
        self._delay = self.backoff[0]
        return report

    def _reverify(self, now: float) -> BatchReport | None:
        """Probe again, once a second, the published revisions not yet retrievable."""
        if now - self._last_verify < 1.0:
            return None
        self._last_verify = now
        targets = {
            d: e.revision for d, e in self.freshness.pending.items() if e.published is not None
        }
        if not targets:
            return None
        report = BatchReport(kind="verify")
        self._verify_guarded(targets, report)
        report.pending = len(self.freshness.pending)
        return report if report.retrievable or report.errors else None

    # -- one batch ----------------------------------------------------------------------

    def _read(self, index: int, paths: list[str]) -> FileSet:
        root = self.selections[index].root
        return read_documents(
            paths, self.globs, within=[root], gitignore=self.gitignore, **self.read_options
        )

    def _read_as_itself(self, target: str) -> bool:
        """Whether ``rechunk sync`` reads the file ``target`` (a link's, followed) under its
        own name: it lies in a watched folder, where its name is read, and a parser reads
        its type (a file of a type none reads leaves its name to a link that has one)."""
        for selection in self.selections:
            try:
                parts = Path(target).relative_to(selection.real).parts
            except ValueError:
                continue
            if not parts or not selection.file_read(parts) or not os.path.isfile(target):
                continue
            forced = self.read_options.get("fmt")
            with contextlib.suppress(InputError, ConfigError, OSError):
                if kind_of(target, forced) is not None:
                    return True
                if not Path(target).suffix:  # a script, by its first line
                    with open(target, "rb") as file:
                        return kind_of(target, forced, head=file.read(HEAD_BYTES)) is not None
        return False

    def _left_out(
        self, key: FileKey, target: str, claims: dict[str, FileKey], displaced: dict[FileKey, str]
    ) -> bool:
        """Whether the symbolic link ``key`` to the file ``target`` is left out, as a sync
        reads a file reached twice once, under its first name: the file's own when it lies
        in a watched folder, else that of the first link to it in the walk's order. A link
        held until now that comes later in that order than ``key`` goes into
        ``displaced`` (its documents are deleted: the sync would not read it);
        ``claims``: the links to each file read so far in this batch."""
        if self._read_as_itself(target):
            return True
        if target in claims:  # a link read earlier in this batch (read in the walk's order)
            return True
        order = _walk_order(key[0], key[1].split("/"))
        for rival in sorted(k for k, t in self._link_targets.items() if t == target and k != key):
            path = self.selections[rival[0]].root / rival[1]
            if rival in displaced or _link_target(path) != target:
                continue  # gone, or leading elsewhere since: its own event says so
            if _walk_order(rival[0], rival[1].split("/")) < order:
                return True
            displaced[rival] = target
        claims[target] = key
        return False

    def _read_folder(self, index: int, parts: tuple[str, ...]) -> FileSet:
        """A folder that appeared (made, or moved in), its doc_ids below the root."""
        selection = self.selections[index]
        files = read_documents(
            [selection.root.joinpath(*parts)],
            self.globs,
            gitignore=self.gitignore,
            **self.read_options,
        )
        prefix = "/".join(parts) + "/"
        files.documents = [replace(d, doc_id=prefix + d.doc_id) for d in files.documents]
        files.skipped = [(prefix + d, why) for d, why in files.skipped]
        files.empty = [prefix + d for d in files.empty]
        files.too_large = [(prefix + d, size) for d, size in files.too_large]
        return files

    def _process(self, batch: Sequence[tuple[str, _Entry]], now: float) -> BatchReport:
        started = time.monotonic()
        report = BatchReport()
        to_read: dict[int, list[tuple[str, str, _Entry]]] = {}
        folders: list[tuple[int, tuple[str, ...], _Entry]] = []
        gone_files: dict[FileKey, _Entry] = {}
        for path, entry in batch:
            found = self._locate(path)
            if found is None:
                continue
            index, parts = found
            selection, rel = self.selections[index], "/".join(parts)
            # a symbolic link to a folder is not followed (as by a sync): it holds nothing
            if (
                entry.stat is None
                or not os.path.lexists(path)
                or (entry.stat[3] and os.path.islink(path))
            ):
                gone_files[(index, rel)] = entry
                prefix = rel + "/"
                for key in self._files:
                    if key[0] == index and key[1].startswith(prefix):
                        gone_files.setdefault(key, entry)
            elif entry.stat[3]:
                if selection.folder_read(parts):
                    folders.append((index, parts, entry))
            elif selection.file_read(parts):
                to_read.setdefault(index, []).append((path, rel, entry))
        t0 = time.monotonic()
        read: dict[FileKey, list[Document]] = {}
        entries: dict[FileKey, _Entry] = {}
        requeue: list[tuple[str, _Entry]] = []
        empty: set[FileKey] = set()
        # a file reached twice (a symbolic link to a file read already, two links to one
        # file) is read once, under the name a sync gives it: its own, else the first
        # link's in the walk's order (what a sync of the folders would hold)
        claims: dict[str, FileKey] = {}
        displaced: dict[FileKey, str] = {}
        for index in sorted(to_read):
            items = to_read[index]
            items.sort(key=lambda item: _walk_order(index, item[1].split("/")))
            for path, rel, entry in items:
                target = _link_target(path)
                if target is not None and self._left_out((index, rel), target, claims, displaced):
                    read[(index, rel)] = []  # holds no document of its own
                    entries[(index, rel)] = entry
                    continue
                try:
                    # named as the walk of its folder names it (a symbolic link: its own
                    # path, where a path given is named after the file the link leads to)
                    files = _renamed(self._read(index, [path]), rel)
                except ConfigError:  # gone since it was looked at: seen as gone next time
                    entry.stat, entry.checked = None, True
                    requeue.append((path, entry))
                    continue
                if _stat(path) != entry.stat:  # written to while it was read: not stable
                    entry.checked = False
                    requeue.append((path, entry))
                    continue
                read[(index, rel)] = []
                entries[(index, rel)] = entry
                self._collect(files, index, read, empty, {rel: (path, entry)}, requeue, report)
        for index, parts, entry in folders:
            files = self._read_folder(index, parts)
            for doc in files.documents:
                key = self._file_of(index, doc.doc_id)
                read.setdefault(key, []).append(doc)
                entries[key] = entry
            for doc_id in files.empty:
                empty.add((index, doc_id))
            report.too_large.extend(doc_id for doc_id, _ in files.too_large)
        for rival, target in displaced.items():  # a link read in its place: holds nothing now
            first = claims[target]
            if read.get(first) and rival not in read:  # (not when that read failed or waits)
                gone_files.setdefault(rival, entries[first])
        report.seconds["read"] = time.monotonic() - t0
        # files, not event paths: a folder, an editor's temporary file or one still
        # changing (read next time) is none
        report.files = len(entries.keys() | (gone_files.keys() & self._files.keys()))
        self._refuse_clashes(read, gone_files, report)
        # what the store should hold after this batch
        docs: dict[str, Document] = {}
        doc_entry: dict[str, _Entry] = {}
        for key, found_docs in read.items():
            for doc in found_docs:
                docs[doc.doc_id] = doc
                doc_entry[doc.doc_id] = entries[key]
        deleted: dict[str, _Entry] = {}
        for key, entry in gone_files.items():
            for doc_id in self._files.get(key, ()):
                deleted[doc_id] = entry
        for key, found_docs in read.items():
            if key in empty and not self.prune:
                continue  # an emptied file keeps its documents, as in a sync without --prune
            for doc_id in self._files.get(key, set()) - {d.doc_id for d in found_docs}:
                deleted[doc_id] = entries[key]
        for doc_id in docs:
            deleted.pop(doc_id, None)
        # accepted: what differs from the store
        changed = [d for d in docs.values() if self._known.get(d.doc_id) != d.revision]
        for doc in changed:
            entry = doc_entry[doc.doc_id]
            self._accept(
                doc.doc_id,
                doc.revision,
                entry.wall,
                self._source_type(doc, doc.doc_id),
                self._policy(doc),
            )
        for doc_id, entry in deleted.items():
            self._accept(
                doc_id,
                None,
                entry.wall,
                self._source_type(None, doc_id),
                self._deleted_policy(doc_id),
            )
        report.accepted = len(changed) + len(deleted)
        self.freshness.save()
        try:
            result = self._sync(changed, prune=False, keep=(), report=report) if changed else None
            if deleted:
                self._delete(set(deleted), report)
        except _Retry:
            self._requeue(requeue, now)
            raise
        self._account(result, docs, time.time(), report, initial=False)
        # commit: the files now hold these documents
        for key in gone_files:
            if self._files.pop(key, None) is not None:
                self._watched_dirty = True
        for key, found_docs in read.items():
            if key in empty and not self.prune:
                continue
            held = {d.doc_id for d in found_docs}
            if held != self._files.get(key, set()):
                self._watched_dirty = True
            if held:
                self._files[key] = held
            else:
                self._files.pop(key, None)
        self._files_epoch += 1
        # a file of another folder left out because a file gone now held its doc_id is read
        # (left out until written again, or until the other file goes)
        freed = [
            str(selection.root / name)
            for index, name in gone_files
            for other, selection in enumerate(self.selections)
            if other != index
            and (other, name) not in self._files
            and (other, name) not in read
            and (selection.root / name).is_file()
        ]
        if freed:
            self.feed(freed)
        self._links_changed(gone_files.keys() | read.keys())
        for doc_id in deleted:
            self._known.pop(doc_id, None)
        self._save_watched()
        self.freshness.save()
        self._requeue(requeue, now)
        targets = {d: e.revision for d, e in self.freshness.pending.items() if e.published}
        self._verify_guarded(targets, report)
        report.pending = len(self.freshness.pending)
        report.seconds["total"] = time.monotonic() - started
        return report

    def _links_changed(self, keys: Iterable[FileKey]) -> None:
        """Note which of the files ``keys`` (gone or read in a batch) are symbolic links
        holding documents, and where they lead. A file that such a link led to, read by it
        until now and no longer, is read by the next batch through another link to it, if
        one is left (a sync reads it through the first of them in the walk's order)."""
        before = dict(self._link_targets)
        for key in keys:
            target = _link_target(self.selections[key[0]].root / key[1])
            if target is not None and self._files.get(key):
                self._link_targets[key] = target
            else:
                self._link_targets.pop(key, None)
        held = set(self._link_targets.values())
        freed = {
            target
            for key, target in before.items()
            if target not in held and os.path.isfile(target) and not self._read_as_itself(target)
        }
        if freed:
            self.feed(self._links_to(freed))

    def _links_to(self, targets: set[str]) -> list[str]:
        """The symbolic links in the watched folders, read by a sync's rules, to one of the
        files ``targets`` and holding no document (a walk of the folders: only when a link
        that held such a file stops holding it)."""
        found = []
        for index, selection in enumerate(self.selections):
            for folder, subfolders, names in os.walk(selection.root):
                parts = Path(folder).relative_to(selection.root).parts
                subfolders[:] = sorted(
                    name for name in subfolders if selection.folder_read((*parts, name))
                )
                for name in names:
                    path = os.path.join(folder, name)
                    if (
                        (index, "/".join((*parts, name))) not in self._files
                        and _link_target(path) in targets
                        and selection.file_read((*parts, name))
                    ):
                        found.append(path)
        return found

    def _file_of(self, index: int, doc_id: str) -> FileKey:
        root = self.selections[index].root
        for name in _file_names(doc_id):
            if (root / name).is_file():
                return index, name
        return index, doc_id

    def _collect(
        self,
        files: FileSet,
        index: int,
        read: dict[FileKey, list[Document]],
        empty: set[FileKey],
        by_rel: Mapping[str, tuple[str, _Entry]],
        requeue: list[tuple[str, _Entry]],
        report: BatchReport,
    ) -> None:
        """Sort what one read found by file; a file that failed to parse is read again
        later (it may have been caught mid-write), then reported failed; a file grown past
        ``max_bytes`` keeps what it had in the store."""

        def rel_of(doc_id: str) -> str | None:
            return next((name for name in _file_names(doc_id) if name in by_rel), None)

        for doc in files.documents:
            rel = rel_of(doc.doc_id)
            if rel is not None:
                read[(index, rel)].append(doc)
        for doc_id in files.empty:
            rel = rel_of(doc_id)
            if rel is not None:
                empty.add((index, rel))
        for doc_id, _ in files.too_large:  # left out: the documents it had are kept
            rel = rel_of(doc_id)
            if rel is not None:
                read.pop((index, rel), None)
                report.too_large.append(doc_id)
        for doc_id, reason in files.skipped:
            rel = rel_of(doc_id)
            if rel is None:
                continue
            read.pop((index, rel), None)  # nothing changes for it in this batch
            path, entry = by_rel[rel]
            entry.parse_attempts += 1
            if entry.parse_attempts <= self.parse_retries:
                requeue.append((path, entry))
                continue
            self._fail(rel, "ParseError", f"{doc_id}: {reason}", "parse", report)

    def _refuse_clashes(
        self,
        read: dict[FileKey, list[Document]],
        gone: Mapping[FileKey, _Entry],
        report: BatchReport,
    ) -> None:
        """Leave out of the batch each file read that would take a doc_id another file
        holds: one of another watched folder (not gone in this batch), or of a folder
        synced into the collection and not watched here (``elsewhere``)."""
        if all(d.doc_id in self._files.get(key, ()) for key, docs in read.items() for d in docs):
            return  # files that keep their doc_ids (an edit): no map of every file's ids
        owner = {
            doc_id: key for key, ids in self._files.items() if key not in gone for doc_id in ids
        }
        for key in sorted(read):
            index, rel = key
            path = self.selections[index].root / rel
            held = self._files.get(key, set())
            other: Path | None = None
            for doc in read[key]:
                if doc.doc_id in held:
                    continue
                holder = owner.get(doc.doc_id, key)
                if holder != key:
                    other = self.selections[holder[0]].root / holder[1]
                elif self.elsewhere is not None:
                    other = self.elsewhere(doc.doc_id, path)
                if other is not None:
                    del read[key]
                    text = doc_id_clash(path, other, doc.doc_id)
                    # a watched folder's file going is seen, and frees the doc_id
                    until = "it is written again" + (" or that file goes" if holder != key else "")
                    self._fail(rel, "ConfigError", f"{text}; left out until {until}", "clash",
                               report)  # fmt: skip
                    break
            else:
                owner.update((doc.doc_id, key) for doc in read[key])

    def _fail(self, rel: str, kind: str, text: str, reason: str, report: BatchReport) -> None:
        """A file given up on in this batch: counted, named in the report's errors (its
        path, never its text), the metrics and the log."""
        source_type = self._source_type(None, rel)
        report.failed += 1
        report.errors.append((kind, text[:500]))
        if self.metrics is not None:
            self.metrics.errors.labels(kind).inc()
            self.metrics.failed.labels(source_type, self.chunker.policy_id).inc()
        if self.diagnosis is not None:
            self.diagnosis.write(
                rel, "failed", policy=self.chunker.policy_id, source_type=source_type, reason=reason
            )

    def _accept(
        self, doc_id: str, revision: str | None, wall: float, source_type: str, policy: str
    ) -> None:
        """A revision seen: pending until retrievable. Counted and logged once, not again
        each time a failed batch is retried with it."""
        before = self.freshness.pending.get(doc_id)
        self.freshness.accept(doc_id, revision, wall, source_type, policy)
        if before is not None and before.revision == revision and not before.published:
            return
        if self.metrics is not None:
            self.metrics.accepted.labels(source_type, policy).inc()
        if self.diagnosis is not None:
            self.diagnosis.write(
                doc_id, "accepted", revision=revision, policy=policy, source_type=source_type
            )

    # -- store work ---------------------------------------------------------------------

    def _sync(
        self,
        docs: Sequence[Document],
        *,
        prune: bool,
        keep: Iterable[str],
        report: BatchReport,
        complete_files: Iterable[str] = (),
        initial: bool = False,
    ) -> SyncReport | None:
        """One sync; a failure that may pass raises :class:`_Retry`. Documents a sync
        refuses (bad input) are synced one by one, and those refused reported failed.
        ``complete_files``: see :func:`rechunk.sync` (the initial sync's record files).
        An embedder refusing its setup (a key an API refused: a ``ConfigError`` that is an
        ``EmbeddingError``) is no document's fault: the ``initial`` sync raises it (the
        watcher does not start), a later one reports the batch failed as it is, with no
        sync one by one that would only ask the server again."""
        t0 = time.monotonic()
        result: SyncReport | None
        try:
            result = self._guarded(
                lambda: sync(
                    docs,
                    self.store,
                    chunker=self.chunker,
                    embedder=self.embedder,
                    cache=self.cache,
                    prune=prune,
                    keep=keep,
                    chunker_for=self.chunker_for,
                    complete_files=complete_files,
                )
            )
        except (InputError, ConfigError) as exc:
            setup = isinstance(exc, EmbeddingError)
            if setup and initial:
                raise
            if len(docs) <= 1 or setup:
                self._refused(docs, exc, report)
                return None
            result = self._one_by_one(docs, report)
        report.seconds["sync"] = report.seconds.get("sync", 0.0) + time.monotonic() - t0
        report.sync = result
        return result

    def _one_by_one(self, docs: Sequence[Document], report: BatchReport) -> SyncReport | None:
        merged: SyncReport | None = None
        for doc in docs:
            try:
                one = self._guarded(
                    functools.partial(
                        sync,
                        [doc],
                        self.store,
                        chunker=self.chunker,
                        embedder=self.embedder,
                        cache=self.cache,
                        chunker_for=self.chunker_for,
                    )
                )
            except (InputError, ConfigError) as exc:
                self._refused([doc], exc, report)
                continue
            if merged is None:
                merged = one
                continue
            merged.per_document.extend(one.per_document)
            for name in ("documents", "chunks", "inputs"):
                for k, v in getattr(one, name).items():
                    getattr(merged, name)[k] += v
            merged.tokens_embedded += one.tokens_embedded
            merged.model_check_tokens += one.model_check_tokens
            if one.model_check == "passed":
                merged.model_check = "passed"
        return merged

    def _refused(self, docs: Sequence[Document], exc: BaseException, report: BatchReport) -> None:
        kind = type(exc).__name__
        for doc in docs:
            report.failed += 1
            report.errors.append((kind, _one_line(exc)))
            self.freshness.pending.pop(doc.doc_id, None)
            if self.metrics is not None:
                self.metrics.errors.labels(kind).inc()
                self.metrics.failed.labels(
                    self._source_type(doc, doc.doc_id), self._policy(doc)
                ).inc()
            if self.diagnosis is not None:
                self.diagnosis.write(doc.doc_id, "failed", revision=doc.revision, reason=kind)

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """Run ``call``; an error that may pass (the store, the embedder, the cache, a
        stale check, a client library's own) becomes :class:`_Retry`. Bad input does not."""
        try:
            return call()
        except (InputError, ConfigError):
            raise
        except TransientError as exc:  # a stale check's failure among them
            raise _Retry(exc, counts=False) from exc
        except (RechunkError, OSError) as exc:
            raise _Retry(exc, counts=True) from exc
        except Exception as exc:  # a client library's error no adapter translated
            raise _Retry(exc, counts=True) from exc

    @contextlib.contextmanager
    def _writer_lock(self) -> Iterator[None]:
        lock = getattr(self.store, "writer_lock", None)
        if callable(lock):
            with lock():
                yield
        else:
            yield

    def _points(self, doc_ids: Iterable[str]) -> dict[str, list[StoredPoint]]:
        ids = sorted(doc_ids)
        if not ids or self.store.collection_info() is None:
            return {d: [] for d in ids}
        found: dict[str, list[StoredPoint]] = self.store.get_points_many(ids)
        return found

    def _delete(self, doc_ids: set[str], report: BatchReport) -> int:
        """Delete every point of ``doc_ids`` (a probe vector of each is kept first, to
        check afterwards that nothing of it is returned any more); how many were deleted."""
        t0 = time.monotonic()

        def run() -> int:
            points = self._points(doc_ids)
            ids = [p.id for pts in points.values() for p in pts]
            if ids:
                with self._writer_lock():
                    self.store.delete(ids)
            self._probe_vectors({d: pts[0].payload.input_key for d, pts in points.items() if pts})
            report.deleted += sum(1 for pts in points.values() if pts)
            return len(ids)

        deleted: int = self._guarded(run)
        now = time.time()
        for doc_id in doc_ids:
            self.freshness.published(doc_id, now)
            entry = self.freshness.pending.get(doc_id)
            if entry is not None and self.metrics is not None:
                self.metrics.published.labels(entry.source_type, entry.policy).inc()
            if entry is not None and self.diagnosis is not None:
                self.diagnosis.write(
                    doc_id,
                    "published",
                    revision=None,
                    policy=entry.policy,
                    source_type=entry.source_type,
                    status="deleted",
                )
        report.seconds["delete"] = time.monotonic() - t0
        return deleted

    def _probe_vectors(self, keys: Mapping[str, str]) -> None:
        """Remember, per deleted document, the vector of one of its points."""
        if not keys:
            return
        vectors = self.store.get_vectors(sorted(set(keys.values())), self.embedder.model_id)
        for doc_id, key in keys.items():
            if key in vectors:
                self._probes[doc_id] = vectors[key]

    def _account(
        self,
        result: SyncReport | None,
        docs: Mapping[str, Document],
        wall: float,
        report: BatchReport,
        *,
        initial: bool,
    ) -> None:
        """Record what a sync published: known revisions, freshness, metrics, the log."""
        if result is None:
            return
        now = time.time()
        # each distinct input once, as the sync counted it (what the model was sent), also
        # when several documents of the batch share it; a document's report counts it too
        report.embedded += result.inputs["embedded"]
        report.reused += result.inputs["from_cache"] + result.inputs["from_store"]
        report.tokens_embedded += result.tokens_embedded
        label_counts: dict[tuple[str, str], list[int]] = {}
        report.model_check_tokens += result.model_check_tokens
        if self.metrics is not None and result.model_check_tokens:
            self.metrics.model_check_tokens.inc(result.model_check_tokens)
        for rep in result.per_document:
            doc = docs.get(rep.doc_id)
            if rep.status == "deleted":
                self._known.pop(rep.doc_id, None)
                continue
            if rep.status == "skipped" or doc is None or rep.revision is None:
                continue
            self._known[rep.doc_id] = rep.revision
            self._probes.pop(rep.doc_id, None)  # a deletion's probe, now the document is back
            source, policy = (
                self._source_type(doc, rep.doc_id),
                rep.policy or self.chunker.policy_id,
            )
            reused = rep.from_cache + rep.from_store
            if rep.status == "unchanged":
                report.unchanged += 1
                entry = self.freshness.pending.get(rep.doc_id)
                if entry is not None and entry.published is None:
                    self.freshness.published(rep.doc_id, now)  # written by an earlier try
                continue
            if initial and rep.doc_id not in self.freshness.pending:
                report.accepted += 1
                self._accept(rep.doc_id, rep.revision, wall, source, policy)
            report.published += 1
            self.freshness.published(rep.doc_id, now)
            if self.metrics is not None:
                m = self.metrics
                m.published.labels(source, policy).inc()
                counts = label_counts.setdefault((source, policy), [0, 0, 0])
                counts[0] += rep.embedded
                counts[1] += reused
                counts[2] += rep.tokens_embedded
                if rep.status == "changed" and rep.changed_bytes:
                    m.amplification.labels(source, policy).observe(
                        rep.reindexed_bytes / rep.changed_bytes
                    )
                if rep.status == "changed":
                    m.inputs_per_edit.labels(source, policy).observe(rep.embedded)
            if self.diagnosis is not None:
                self.diagnosis.write(
                    rep.doc_id,
                    "published",
                    revision=rep.revision,
                    policy=policy,
                    source_type=source,
                    status=rep.status,
                    chunks=rep.chunks,
                    added=rep.added,
                    updated=rep.updated,
                    deleted=rep.deleted,
                    embedded=rep.embedded,
                    reused=reused,
                    tokens_embedded=rep.tokens_embedded,
                    changed_bytes=rep.changed_bytes,
                    reindexed_bytes=rep.reindexed_bytes,
                )
        if self.metrics is not None and label_counts:
            totals = (
                result.inputs["embedded"],
                result.inputs["from_cache"] + result.inputs["from_store"],
                result.tokens_embedded,
            )
            counters = (self.metrics.embedded, self.metrics.reused, self.metrics.tokens)
            for i, counter in enumerate(counters):
                own = {label: counts[i] for label, counts in label_counts.items()}
                for label, value in _spread(totals[i], own).items():
                    counter.labels(*label).inc(value)

    def _search_many(self, queries: Sequence[Any]) -> list[list[tuple[StoredPoint, float]]]:
        """The store's ``search`` of each query (``probe_k`` hits): its ``search_many`` in
        one call where it has one, else one ``search`` after another."""
        many = getattr(self.store, "search_many", None)
        if callable(many):
            answers: list[list[tuple[StoredPoint, float]]] = many(queries, self.probe_k)
            return answers
        return [self.store.search(q, self.probe_k) for q in queries]

    def _verify_guarded(self, targets: Mapping[str, str | None], report: BatchReport) -> None:
        """:meth:`_verify`; a store that fails the probe leaves the revisions pending (they
        are probed again within a second, see :meth:`_reverify`)."""
        try:
            self._verify(targets, report)
        except _Retry as failure:
            kind = type(failure.cause).__name__
            report.errors.append((kind, _one_line(failure.cause)))
            if self.metrics is not None:
                self.metrics.errors.labels(kind).inc()

    def _verify(self, targets: Mapping[str, str | None], report: BatchReport) -> None:
        """Probe the store's query path: a revision is retrievable when a search with the
        vector of one of its points returns a point of it and none of another revision of
        the document; a deletion, when a search with a vector it had returns nothing of
        it. Verified revisions leave the freshness state."""
        if not targets:
            return
        t0 = time.monotonic()
        present = {d: r for d, r in targets.items() if r is not None}
        points = self._guarded(lambda: self._points(present))
        chosen: dict[str, list[str]] = {}
        for doc_id, current in present.items():
            own = sorted(
                (p for p in points.get(doc_id, []) if p.payload.revision == current),
                key=lambda p: p.payload.ordinal,
            )
            picks = [own[0], own[len(own) // 2], own[-1]] if own else []
            chosen[doc_id] = list(dict.fromkeys(p.payload.input_key for p in picks))[:_PROBES]
        keys = sorted({k for ks in chosen.values() for k in ks})
        vectors = (
            self._guarded(lambda: self.store.get_vectors(keys, self.embedder.model_id))
            if keys
            else {}
        )
        # each document's probes in rounds (a second probe only where the first neither
        # found the revision nor an earlier one), each round's searches in one batch
        # (a deletion: its one probe vector, if one was kept; with none it counts as found)
        probes: dict[str, list[Any]] = {}
        for doc_id, revision in targets.items():
            if revision is None:
                probes[doc_id] = [self._probes[doc_id]] if doc_id in self._probes else []
            else:
                probes[doc_id] = [vectors[key] for key in chosen[doc_id] if key in vectors]
        found = {doc_id: revision is None for doc_id, revision in targets.items()}
        stale = dict.fromkeys(targets, False)
        while asked := [d for d, left in probes.items() if left]:
            queries = [np.asarray(probes[d].pop(0), dtype=np.float32) for d in asked]
            answers = self._guarded(functools.partial(self._search_many, queries))
            for doc_id, hits in zip(asked, answers, strict=True):
                mine = [p.payload.revision for p, _ in hits if p.payload.doc_id == doc_id]
                revision = targets[doc_id]
                stale[doc_id] = any(r != revision for r in mine)
                found[doc_id] = not mine if revision is None else revision in mine
                if found[doc_id] or stale[doc_id]:
                    probes[doc_id].clear()
        now = time.time()
        for doc_id, revision in targets.items():
            if stale[doc_id]:
                report.stale += 1
                self.freshness.mark_stale(doc_id)
                continue
            if not found[doc_id]:
                continue
            entry = self.freshness.verified(doc_id, revision)
            if revision is None:
                self._probes.pop(doc_id, None)
            if entry is None:
                continue
            report.retrievable += 1
            lag = max(0.0, now - entry.accepted)
            report.lag.append(lag)
            if self.metrics is not None:
                self.metrics.lag.labels(entry.source_type, entry.policy).observe(lag)
            if self.diagnosis is not None:
                self.diagnosis.write(
                    doc_id,
                    "retrievable",
                    revision=revision,
                    policy=entry.policy,
                    source_type=entry.source_type,
                    accept_to_retrievable_s=round(lag, 4),
                )
        self.freshness.save()
        if self.diagnosis is not None:
            self.diagnosis.flush()
        report.seconds["verify"] = time.monotonic() - t0

    # -- the loop -----------------------------------------------------------------------

    def start(
        self, events: FileEvents | None = None, *, debounce_ms: int = 1000, step_ms: int = 30
    ) -> None:
        """Start watching the folders (``watchfiles``, from a thread); events wait in a
        queue until :meth:`serve` (or :meth:`run`) takes them. ``events``: a
        :class:`~rechunk.live.events.FileEvents` over these folders that the caller
        started before it read them, so that a change made since is not missed (what
        ``rechunk watch`` does); the watcher takes it over, and stops it when it stops."""
        if self._events is not None:
            return
        if events is None:
            events = FileEvents([str(s.real) for s in self.selections])
        events.start(debounce_ms=debounce_ms, step_ms=step_ms)
        self._events = events

    def stop_watching(self) -> None:
        """Stop the file watcher; the events it queued and no batch took stay queued here
        (a stopping watcher counts them among the changes it leaves unread)."""
        events = self._events
        if events is not None:
            events.stop()
            for seen, wall, paths in events.waiting():
                self.feed([p for p in paths if not self._moot(os.path.abspath(p))], seen, wall)
            self._events = None

    def serve(
        self,
        stop: threading.Event,
        on_batch: Callable[[BatchReport], None] | None = None,
        *,
        tick: float = 0.05,
    ) -> None:
        """Sync batches of changes until ``stop`` is set; the batch running then is
        finished first. Needs :meth:`start`."""
        try:
            while not stop.is_set():
                # wait for events, but no later than a waiting path may become stable
                until = self._wake_at - time.monotonic()
                self._drain(min(tick, until) if until > 0.001 else tick)
                report = self.step()
                if report is not None and on_batch is not None:
                    on_batch(report)
        finally:
            self.stop_watching()

    def _drain(self, timeout: float) -> None:
        if self._events is None:
            time.sleep(timeout)
            return
        events = self._events.queue
        try:
            first = events.get(timeout=timeout)
        except queue.Empty:
            return
        items = [first]
        with contextlib.suppress(queue.Empty):
            while True:
                items.append(events.get_nowait())
        for item in items:
            if isinstance(item, BaseException):
                raise ConfigError(f"the file watcher stopped: {_one_line(item)}") from item
            seen, wall, paths = item
            self.feed(paths, seen, wall)

    def run(
        self,
        stop: threading.Event,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> BatchReport:
        """:meth:`start`, :meth:`initial_sync` (its report goes to ``on_batch`` too),
        then :meth:`serve` until ``stop`` is set; returns the initial report."""
        self.start()
        try:
            first = self.initial_sync()
            if on_batch is not None:
                on_batch(first)
        except BaseException:
            self.stop_watching()
            raise
        self.serve(stop, on_batch)
        return first
