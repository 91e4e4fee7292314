"""rechunk's :class:`~rechunk.sync.store.VectorStore` on Chroma (``pip install 'rechunk[chroma]'``).

Works with every kind of Chroma client: ``chromadb.PersistentClient``,
``EphemeralClient`` and ``HttpClient`` (a ``chroma run`` server). The collection
is laid out so that LangChain's ``Chroma`` or LlamaIndex's
``ChromaVectorStore`` reads it directly (see :mod:`rechunk.adapters._layout`).
rechunk never lets Chroma embed anything: collections are opened with
``embedding_function=None`` and every write carries its vectors, so Chroma's
default embedding model is never downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

import numpy as np

from rechunk._optional import require
from rechunk.adapters._layout import (
    ForeignPointError,
    Layout,
    PreparedWrite,
    StoreBase,
    batches,
    by_doc,
    check_dimension,
    check_dimensions,
    check_distance,
    check_doc_ids,
    check_ids,
    check_k,
    check_point_id,
    check_query_vector,
    chroma_record,
    chroma_vouches,
    from_chroma,
    is_point_id,
    is_timeout,
    is_unreachable,
    prepare_writes,
)
from rechunk.errors import (
    CollectionMismatchError,
    ConfigError,
    RechunkError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
)
from rechunk.sync.store import (
    SUPERSEDED_KEY,
    SUPERSEDED_MARK,
    CollectionInfo,
    Distance,
    PointWrite,
    StoredPoint,
    current_hits,
)

require("chromadb", "chroma")

import chromadb  # noqa: E402  (after the check that names the extra)
from chromadb.errors import NotFoundError  # noqa: E402

if TYPE_CHECKING:
    import numpy.typing as npt
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = ["ChromaStore", "http_client"]

_TO_CHROMA: Final[dict[Distance, str]] = {"cosine": "cosine", "dot": "ip", "euclid": "l2"}
_FROM_CHROMA: Final = {value: key for key, value in _TO_CHROMA.items()}
#: Collection metadata rechunk records beside Chroma's own configuration.
DIMENSION_KEY: Final = "rechunk:dimension"
LAYOUT_KEY: Final = "rechunk:layout"
_MODEL_SAMPLE: Final = 256
#: records per read request (the answers of a server stay a few MB)
_READ_PAGE: Final = 4096
#: The most bytes one write request should carry (estimated: text, metadata as JSON and
#: the vector as JSON numbers). A Chroma server refuses large bodies ("Payload too
#: large"), and a sync that fails there would fail the same way on every re-run.
MAX_REQUEST_BYTES: Final = 8 << 20
#: How long one request to a Chroma server may wait for its answer (Chroma's default: for
#: ever); a server that does not answer within it (frozen, overloaded) fails the request
#: with :class:`~rechunk.errors.StoreTimeoutError`.
REQUEST_SECONDS = 60.0
_BYTES_PER_NUMBER: Final = 24  # a float32 written out as JSON, with its separator
#: The collection (in the same database) that holds rechunk's writer locks.
LOCK_COLLECTION: Final = "rechunk-writer-locks"
#: How long a writer's lock lasts without renewal; the holder renews it every third of
#: that, and a lock not renewed for this long (its holder killed or frozen) is taken over.
LOCK_SECONDS = 60.0
#: How long a writer waits for another writer's lock before it gives up.
LOCK_WAIT_SECONDS = 900.0

log = logging.getLogger("rechunk.chroma")

_T = TypeVar("_T")


def http_client(
    host: str,
    port: int,
    *,
    ssl: bool = False,
    headers: Mapping[str, str] | None = None,
    settings: Any = None,
    path: str = "",
    tenant: str | None = None,
    database: str | None = None,
) -> ClientAPI:
    """``chromadb.HttpClient(...)``, raising :class:`StoreUnavailableError` when nobody answers.

    Chroma's ``HttpClient`` contacts the server as it is created and raises a
    ``ValueError`` when it cannot; this turns that into rechunk's retry-safe error.
    Its requests wait for an answer for ever; this client's give up after
    :data:`REQUEST_SECONDS` (connecting: 10 s), so a server that stops answering
    mid-sync is a :class:`~rechunk.errors.StoreTimeoutError`, not a hang.

    ``host`` may be an IPv6 address (``::1``, or with a zone id ``fe80::1%eth0``; Chroma
    itself would take its colons for a port), and ``path`` the prefix a reverse proxy
    serves the server under (``/chroma``: requests go to ``/chroma/api/v2/...``).

    ``tenant`` and ``database`` choose where the client's collections (and rechunk's
    writer locks, :data:`LOCK_COLLECTION`) are; one not given is Chroma's default
    (``default_tenant``, ``default_database``), and leaving one out while Chroma's own
    ``CHROMA_TENANT`` / ``CHROMA_DATABASE`` names another is a
    :class:`~rechunk.errors.ConfigError` (Chroma's ``HttpClient`` reads neither, and
    rechunk does not guess: a store is the same whatever the environment). Both must
    exist on the server: one that does not is a :class:`~rechunk.errors.ConfigError`, and
    nothing is created. So is a server's refusal of the credentials (HTTP 401 or 403; set
    them with Chroma's ``CHROMA_CLIENT_AUTH_PROVIDER`` and
    ``CHROMA_CLIENT_AUTH_CREDENTIALS``, or ``settings``): trying again will not help.
    """
    from rechunk.adapters.uri import chroma_names

    tenant, database = chroma_names(tenant, database)
    netloc = f"[{host}]" if ":" in host and not host.startswith("[") else host
    target = netloc
    if path.strip("/"):
        target = f"{'https' if ssl else 'http'}://{netloc}:{port}/{path.strip('/')}"
    where = f"{netloc}:{port}{'/' + path.strip('/') if path.strip('/') else ''}"
    kwargs: dict[str, Any] = {
        "host": target, "port": port, "ssl": ssl, "tenant": tenant, "database": database
    }  # fmt: skip
    if headers is not None:
        kwargs["headers"] = dict(headers)
    if settings is not None:
        kwargs["settings"] = settings
    try:
        client = chromadb.HttpClient(**kwargs)
    except Exception as exc:
        if is_unreachable(exc):
            message = f"cannot reach the Chroma server at {where}: {exc}"
            raise StoreUnavailableError(message) from exc
        sent = _sends_credentials(headers, settings)
        raise _connect_error(exc, where, path.strip("/"), tenant, database, sent) from exc
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client) and session.timeout.read is None:
        session.timeout = httpx.Timeout(REQUEST_SECONDS, connect=10.0)
    return client


#: Chroma's token client provider (what ``CHROMA_CLIENT_AUTH_PROVIDER`` names for a token).
TOKEN_PROVIDER: Final = "chromadb.auth.token_authn.TokenAuthClientProvider"
_CREDENTIALS_HELP: Final = (
    f"set CHROMA_CLIENT_AUTH_PROVIDER={TOKEN_PROVIDER} and CHROMA_CLIENT_AUTH_CREDENTIALS "
    "to the token in the environment (CHROMA_AUTH_TOKEN_TRANSPORT_HEADER=X-Chroma-Token "
    "for a server that reads that header; a token never goes in the store URI)"
)


def _answer(exc: BaseException) -> tuple[int, str, str] | None:
    """The HTTP status, reason and request path of the answer behind ``exc`` (chromadb
    raises its own exception while handling httpx's), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            url = getattr(getattr(response, "request", None), "url", None)
            reason = str(getattr(response, "reason_phrase", ""))
            return status, reason, str(getattr(url, "path", ""))
        current = current.__cause__ or current.__context__
    return None


def _refusal(exc: BaseException) -> str | None:
    """What a server's refusal of the credentials said (an HTTP 401 or 403, or Chroma's
    error for one), or None when ``exc`` is something else."""
    from chromadb.errors import AuthorizationError, ChromaAuthError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ChromaAuthError, AuthorizationError)):
            return f"{type(current).__name__}: {current}".rstrip(": ")
        current = current.__cause__ or current.__context__
    answer = _answer(exc)
    if answer is not None and answer[0] in (401, 403):
        return f"HTTP {answer[0]} {answer[1]}".rstrip()
    return None


def _sends_credentials(headers: Mapping[str, str] | None, settings: Any) -> bool:
    """Whether a client made with ``headers`` and ``settings`` sends credentials."""
    if any(key.lower() in ("authorization", "x-chroma-token") for key in headers or {}):
        return True
    if settings is None:
        from chromadb.config import Settings

        settings = Settings()  # what HttpClient reads: the environment (and a .env file)
    provider = getattr(settings, "chroma_client_auth_provider", None)
    return bool(provider and getattr(settings, "chroma_client_auth_credentials", None))


def _connect_error(
    exc: Exception, where: str, prefix: str, tenant: str, database: str, sent: bool
) -> RechunkError:
    """rechunk's error for a Chroma client that could not be made (the server answered)."""
    refused = _refusal(exc)
    if refused is not None:
        if sent:
            return ConfigError(
                f"the Chroma server at {where} refused the credentials ({refused}) for tenant "
                f"{tenant!r}, database {database!r}: check CHROMA_CLIENT_AUTH_CREDENTIALS and "
                f"CHROMA_CLIENT_AUTH_PROVIDER ({TOKEN_PROVIDER} for a token); trying again "
                "with the same ones will not help"
            )
        return ConfigError(
            f"the Chroma server at {where} asks for credentials and none were sent "
            f"({refused}): {_CREDENTIALS_HELP}"
        )
    if isinstance(exc, NotFoundError):
        missing = (
            f"no tenant {tenant!r}"
            if str(exc).lower().startswith("tenant")
            else f"no database {database!r} in tenant {tenant!r}"
        )
        return ConfigError(
            f"the Chroma server at {where} has {missing}; rechunk creates no tenant or "
            "database: create it (chromadb.AdminClient's create_tenant / create_database) "
            "or name one that exists (a store URI's ?tenant=T&database=D, or "
            "http_client's tenant= / database=)"
        )
    said = str(exc).strip()
    answer = _answer(exc)
    if answer is not None:
        status, reason, asked = answer
        said = f"HTTP {status} {reason}".rstrip() + (f" for {asked}" if asked else "")
        if status == 404:
            hint = (
                f"is the path prefix /{prefix} right? (a tenant and database are named as "
                "?tenant=T&database=D, not in the path)"
                if prefix
                else "is it a Chroma server (1.x, API v2), and is a path prefix missing?"
            )
            # a StoreError, as a Qdrant server's 404 is (a proxy's route may come back)
            return StoreError(
                f"cannot connect to the Chroma server at {where}: {said}, no Chroma API "
                f"there: {hint}"
            )
        if status >= 500 or status in (408, 429):
            return StoreUnavailableError(f"cannot connect to the Chroma server at {where}: {said}")
    if said.startswith("(trace ID") or not said:
        said = f"{type(exc).__name__} {said}".strip()
    return StoreError(f"cannot connect to the Chroma server at {where}: {said}")


@dataclass(frozen=True)
class _Config:
    dimension: int  # 0: not recorded and no point yet
    distance: Distance
    layout: str | None


class ChromaStore(StoreBase["ClientAPI"]):
    """A Chroma collection as a rechunk :class:`~rechunk.sync.store.VectorStore`.

    ``client`` is a ready Chroma client (``chromadb.PersistentClient``,
    ``HttpClient``, ...); the constructor does no I/O. ``layout``
    (``"langchain"`` or ``"llamaindex"``) decides how text and metadata are
    stored, so that ``langchain_chroma.Chroma(client=..., collection_name=...)``
    or ``llama_index``'s ``ChromaVectorStore(chroma_collection=...)`` reads the
    collection. Requests carry at most ``batch_size`` records (default 1,024, and
    never more than the client's ``get_max_batch_size()``); a write request also
    carries at most about :data:`MAX_REQUEST_BYTES` (a server refuses larger
    bodies). Chroma's cost per upserted record falls with the request's size: an
    initial sync of 2,000 documents took 11% less time at 1,024 than at 256.

    Contracts:

    * ``ensure_collection`` creates the collection with ``embedding_function=None``,
      ``configuration={"hnsw": {"space": ...}}`` (cosine -> "cosine", dot -> "ip",
      euclid -> "l2") and the collection metadata ``rechunk:dimension`` and
      ``rechunk:layout``, or checks an existing one; another dimension, distance
      or layout raises StoreError naming both and changes nothing. (An existing
      collection rechunk did not create gets the two metadata keys added.)
    * Every other method on a missing collection raises StoreError saying to call
      ``ensure_collection`` (an empty ``write``, ``delete`` or ``get_vectors``
      does no I/O at all); an unreachable server raises StoreUnavailableError
      ("cannot reach ..."); any other failure of the client raises StoreError.
      Reading a record that is not a rechunk point in this layout raises
      StoreError naming it.
    * Metadata values must be str, int, float or bool, or a non-empty list of
      one of those types (what Chroma 1.5+ holds): a None or dict value, or any
      other list, raises StoreError naming the key before anything is written.
      Reserved keys raise ConfigError.
    * Chroma's upsert and update merge metadata, so before writing, ``write``
      reads the metadata of the records it touches and removes keys the new
      payload no longer has (the record then holds exactly the new payload).
    * ``write`` validates every point before the first request. A payload-only
      update (``vector=None``) of an existing record sends its metadata (keys the
      new payload lacks are removed) and, only when the text changed, its
      document; the vector is never sent, so it stays bit-for-bit the same.
      (Chroma's client refuses a document without an embedding on a collection
      with no embedding function, so a changed text goes through the client's
      lower-level update call, which the public one wraps; should a Chroma
      release lack it, the stored vector is read and sent back instead, which
      for cosine collections can move it by a rounding step.) Updating a
      record that does not exist raises StoreError before anything is written.
    * ``get_vectors`` returns float32 vectors as Chroma holds them: exact for
      ip and l2 collections; a cosine collection keeps them only to within a
      rounding step of what was written (Chroma normalises internally).
    * Scores: cosine similarity (1 - cosine distance), dot product
      (1 - Chroma's ip distance), or the negated Euclidean distance (Chroma
      reports its square), so that higher is always closer.

    Switching collections on a policy change: Chroma has no aliases, so a new
    index generation is a new collection. Build it under a new name (for
    instance ``f"docs--{policy_id[:12]}"``) with ``ChromaStore(client,
    new_name)`` (its vectors reused by input key from the old store through
    ``get_vectors``), verify it, then switch the collection name your
    application queries (a config value or a small pointer record your readers
    re-read) and delete the old collection once no reader uses it. Renaming
    (``collection.modify(name=...)``) is not atomic across two collections: a
    swap by renames leaves a moment with no collection under the live name.
    """

    _flat = True  # Chroma metadata: str, int, float, bool or a flat list of one of them
    _lease: _Lease | None = None  # while this object holds the writer lock
    _pinned: Collection | None = None  # the collection, opened once while the lock is held

    def __init__(
        self,
        client: ClientAPI,
        collection: str,
        layout: Layout = "langchain",
        *,
        batch_size: int = 1024,
    ) -> None:
        super().__init__(client, collection, layout, batch_size=batch_size)
        check_collection_name(collection)

    # -- errors ----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn client exceptions into StoreError / StoreUnavailableError."""
        try:
            yield
        except RechunkError:
            raise
        except Exception as exc:
            if _bad_name(exc):
                raise ConfigError(
                    f"Chroma refuses the collection name {self._collection!r}: {exc}"
                ) from exc
            refused = _refusal(exc)
            if refused is not None:  # a token revoked, or one that may not do this
                raise ConfigError(
                    f"the Chroma server refused to let this client {action} collection "
                    f"{self._collection!r} ({refused}): check CHROMA_CLIENT_AUTH_CREDENTIALS "
                    "and CHROMA_CLIENT_AUTH_PROVIDER; trying again will not help"
                ) from exc
            if is_timeout(exc):
                raise StoreTimeoutError(
                    f"cannot reach Chroma to {action} collection {self._collection!r}: the "
                    f"server did not answer within {REQUEST_SECONDS:g} s (frozen or "
                    f"overloaded?): {type(exc).__name__}"
                ) from exc
            if is_unreachable(exc):
                raise StoreUnavailableError(
                    f"cannot reach Chroma to {action} collection {self._collection!r}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            raise StoreError(
                f"Chroma failed to {action} collection {self._collection!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _missing(self) -> NoReturn:
        raise StoreError(
            f"Chroma collection {self._collection!r} does not exist; "
            f"call ensure_collection(dimension) first"
        )

    def _read(self, collection: Collection, read: Callable[..., _T], /, **kwargs: Any) -> _T:
        """``read(**kwargs)``, a read of ``collection``; once more after
        :func:`_reopen_embedded` when it failed because this process's embedded Chroma kept
        a stale view of the collection's folder.

        chromadb's embedded engine (1.5) that counted or read a collection while it held
        no vector cannot read vectors or search it after another process wrote the first
        ones ("Error creating hnsw segment reader: Nothing found on disk"), not even
        through a new ``get_collection``, until the process writes to it itself: a
        ``rechunk sync`` that waited for the writer lock of a new collection failed, and
        so did every batch of a watcher started on an empty one. One that read vectors
        another process then deleted and wrote again fails the same way ("Error finding
        id": a cron sync that waited for a watcher's batches). Counts and metadata read
        fine, so only the reads that carry vectors (or search) come here; the common path
        costs a ``try``.
        """
        try:
            return read(**kwargs)
        except Exception as exc:
            if not _stale_reader(exc) or not _reopen_embedded(collection):
                raise
        log.info(
            "reopened the embedded Chroma folder of collection %r: another process wrote it "
            "after this one last read it",
            self._collection,
        )
        return read(**kwargs)

    # -- collection ------------------------------------------------------------------------

    def _open(self) -> Collection | None:
        """The collection (never with an embedding function), or None when it does not exist.

        Asked of the client each time, but once while this object holds the writer lock
        (a sync's reads and writes then make one request for it, not one each)."""
        if self._pinned is not None:
            return self._pinned
        with self._errors("open"):
            try:
                collection = self._client.get_collection(self._collection, embedding_function=None)
            except NotFoundError:
                return None
            except ValueError as exc:  # older clients
                if "does not exist" in str(exc):
                    return None
                raise
        if self._lease is not None:
            self._pinned = collection
        return collection

    def _require(self) -> Collection:
        collection = self._open()
        if collection is None:
            self._missing()
        return collection

    def _config(self, collection: Collection) -> _Config:
        with self._errors("read the configuration of"):
            configuration: Mapping[str, Any] = collection.configuration or {}
            metadata: Mapping[str, Any] = collection.metadata or {}
            index = configuration.get("hnsw") or configuration.get("spann") or {}
            space = index.get("space") or metadata.get("hnsw:space") or "l2"
            dimension = metadata.get(DIMENSION_KEY)
            if type(dimension) is not int or dimension < 1:
                sample = self._read(collection, collection.get, limit=1, include=["embeddings"])
                embeddings = sample.get("embeddings")
                dimension = len(embeddings[0]) if embeddings is not None and len(embeddings) else 0
        distance = _FROM_CHROMA.get(str(space))
        if distance is None:
            raise CollectionMismatchError(
                f"Chroma collection {self._collection!r} uses the {space!r} space; "
                f"rechunk supports cosine, ip and l2"
            )
        layout = metadata.get(LAYOUT_KEY)
        return _Config(dimension, distance, layout if isinstance(layout, str) else None)

    def _check_layout(self, config: _Config) -> None:
        if config.layout not in (None, self._layout):
            raise StoreError(
                f"Chroma collection {self._collection!r} was written with layout="
                f"{config.layout!r}, not {self._layout!r}"
            )

    def collection_info(self) -> CollectionInfo | None:
        """Dimension, distance, record count and the model_ids of up to 256 sampled records.

        ``None`` when the collection does not exist. ``dimension`` is 0 for a
        collection rechunk did not create that holds no record yet. A collection
        rechunk wrote with the other layout raises StoreError.
        """
        collection = self._open()
        if collection is None:
            return None
        config = self._config(collection)
        self._check_layout(config)
        with self._errors("count the records of"):
            points = collection.count()
            model_ids = self._sampled_model_ids(collection)
        return CollectionInfo(
            name=self._collection,
            dimension=config.dimension,
            distance=config.distance,
            points=points,
            model_ids=model_ids,
        )

    def _sampled_model_ids(self, collection: Collection) -> frozenset[str]:
        """The model_ids of the first :data:`_MODEL_SAMPLE` rechunk records. Another tool's
        records are passed over however many come first (the read goes on page by page),
        so they cannot hide which model wrote rechunk's vectors."""
        found: set[str] = set()
        sampled = 0
        for page in self._pages(collection, first=_MODEL_SAMPLE, include=["metadatas"]):
            for point in self._rechunk_points(page):
                found.add(point.payload.model_id)
                sampled += 1
            if sampled >= _MODEL_SAMPLE:
                break
        return frozenset(found)

    def ensure_collection(self, dimension: int, distance: Distance = "cosine") -> CollectionInfo:
        """Create the collection, or check that the existing one has this configuration."""
        dimension = check_dimension(dimension)
        distance = check_distance(distance)
        collection = self._open()
        if collection is None:
            collection = self._create(dimension, distance)
        config = self._config(collection)
        if (config.distance != distance) or (config.dimension not in (0, dimension)):
            have = f"{config.dimension}-dimensional " if config.dimension else ""
            raise CollectionMismatchError(
                f"Chroma collection {self._collection!r} holds {have}{config.distance} vectors, "
                f"not the {dimension}-dimensional {distance} vectors asked for; "
                f"use another collection for another model or distance"
            )
        self._check_layout(config)
        metadata = dict(collection.metadata or {})
        if metadata.get(DIMENSION_KEY) != dimension or metadata.get(LAYOUT_KEY) != self._layout:
            kept = {k: v for k, v in metadata.items() if not k.startswith("hnsw:")}
            with self._errors("record the configuration of"):
                collection.modify(
                    metadata={**kept, DIMENSION_KEY: dimension, LAYOUT_KEY: self._layout}
                )
            self._pinned = None  # opened again with the metadata just written
        info = self.collection_info()
        if info is None:
            self._missing()
        return info

    def _create(self, dimension: int, distance: Distance) -> Collection:
        with self._errors("create"):
            try:
                configuration: Any = {"hnsw": {"space": _TO_CHROMA[distance]}}
                return self._client.create_collection(
                    self._collection,
                    configuration=configuration,
                    metadata={DIMENSION_KEY: dimension, LAYOUT_KEY: self._layout},
                    embedding_function=None,
                )
            except Exception:
                created = self._open()  # created meanwhile by someone else: validate that one
                if created is None:
                    raise
                return created

    # -- reads -----------------------------------------------------------------------------

    def _pages(
        self,
        collection: Collection,
        size: int | None = None,
        *,
        first: int | None = None,
        **kwargs: Any,
    ) -> Iterator[Mapping[str, Any]]:
        """``collection.get(**kwargs)`` page by page, of ``size`` records (by default
        :data:`_READ_PAGE`; Chroma skips ``offset`` rows for each page, so a read of the
        whole collection costs points^2 / page: pages are large), the first of ``first``
        records when given (a read that usually stops there)."""
        size = size or max(self._batch_size, _READ_PAGE)
        limit, offset = first or size, 0
        while True:
            page = self._read(collection, collection.get, limit=limit, offset=offset, **kwargs)
            yield page
            count = len(page["ids"])
            if count < limit:
                return
            offset += count
            limit = size

    def _decode(
        self, point_id: str, document: str | None, metadata: Mapping[str, Any] | None
    ) -> StoredPoint | None:
        """The point, or None for one another tool wrote (skipped, see ``foreign_points``)."""
        return self._decoded(
            point_id,
            lambda: from_chroma(point_id, document, metadata, self._layout, self._collection),
        )

    def get_points_many(self, doc_ids: Sequence[str]) -> dict[str, list[StoredPoint]]:
        """:meth:`get_points` of each doc_id: one filtered read per ``batch_size`` ids (at
        most the client's ``get_max_batch_size()``)."""
        ids = check_doc_ids(doc_ids)
        collection = self._require()
        points: list[StoredPoint] = []
        size = self._max_batch()  # SQLite limits the values of one $in filter too
        with self._errors("read points from"):
            for chunk in batches(ids, size):
                where = {"doc_id": {"$in": list(chunk)}}
                for page in self._pages(
                    collection, where=where, include=["metadatas", "documents"]
                ):
                    decoded = (
                        self._decode(i, d, m)
                        for i, d, m in zip(page["ids"], page["documents"], page["metadatas"])
                    )
                    points.extend(p for p in decoded if p is not None)
        return by_doc(points, ids)

    def present_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the collection holds (rechunk's records or another tool's),
        read by id without documents, metadata or vectors. A read by id costs what it
        returns, where a ``where`` read of Chroma's scans every record of the collection
        (20 ms a read at 180,000 records): ``rechunk.sync`` checks what it published
        with it while it holds the writer lock."""
        unique = check_ids(ids)
        if not unique:
            return set()
        collection = self._require()
        found: set[str] = set()
        with self._errors("read point ids from"):
            for chunk in batches(unique, self._max_batch()):
                found.update(collection.get(ids=list(chunk), include=[])["ids"])
        return found

    def get_vectors(
        self, input_keys: Sequence[str], model_id: str
    ) -> dict[str, npt.NDArray[np.float32]]:
        """One float32 vector per input key stored by ``model_id`` (any doc); others left out."""
        if isinstance(input_keys, str) or not all(type(k) is str for k in input_keys):
            raise ConfigError("input_keys must be a sequence of str")
        if type(model_id) is not str or not model_id:
            raise ConfigError(f"model_id must be a non-empty str, got {model_id!r}")
        keys = list(dict.fromkeys(input_keys))
        if not keys:
            return {}
        collection = self._require()
        found: dict[str, npt.NDArray[np.float32]] = {}
        size = self._max_batch()
        with self._errors("read vectors from"):
            for chunk in batches(keys, size):
                where = {"$and": [{"input_key": {"$in": list(chunk)}}, {"model_id": model_id}]}
                # the documents too: a vector is handed out only for the key its text
                # was embedded as
                for page in self._pages(
                    collection, where=where, include=["embeddings", "metadatas", "documents"]
                ):
                    embeddings, documents = page["embeddings"], page["documents"] or []
                    for index, metadata in enumerate(page["metadatas"] or []):
                        document = documents[index] if index < len(documents) else None
                        key = chroma_vouches(document, metadata, self._layout)
                        if key is not None and key not in found:
                            found[key] = np.asarray(embeddings[index], dtype=np.float32)
        return found

    def get_vectors_at(
        self, points: Mapping[str, str], model_id: str
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The vectors of ``points`` (input key -> the id of a point that holds it), read
        by id: a sync looks up there the inputs it published itself. A point that is
        gone, or that holds another input or another model's vector, is left out."""
        if type(model_id) is not str or not model_id:
            raise ConfigError(f"model_id must be a non-empty str, got {model_id!r}")
        key_of = {check_point_id(point_id): key for key, point_id in points.items()}
        ids = list(key_of)
        collection = self._require()
        found: dict[str, npt.NDArray[np.float32]] = {}
        with self._errors("read vectors from"):
            for chunk in batches(ids, self._max_batch()):
                page: Any = self._read(
                    collection, collection.get, ids=list(chunk), include=["embeddings", "metadatas"]
                )
                for index, (point_id, metadata) in enumerate(zip(page["ids"], page["metadatas"])):
                    key = key_of[point_id]
                    held = metadata or {}
                    if held.get("input_key") == key and held.get("model_id") == model_id:
                        found[key] = np.asarray(page["embeddings"][index], dtype=np.float32)
        return found

    def doc_ids(self) -> set[str]:
        """Every doc_id that has at least one rechunk record (reads every record's metadata;
        a record another tool wrote, with a ``doc_id`` of its own, is not counted)."""
        collection = self._require()
        found: set[str] = set()
        with self._errors("read doc ids from"):
            for page in self._pages(collection, include=["metadatas"]):
                found.update(self._doc_ids(page).values())
        return found

    def all_ids(self) -> Iterator[list[str]]:
        """The id of every record of the collection (rechunk's or another tool's), a page
        at a time. Ids alone are small, so pages are eight times :data:`_READ_PAGE`
        (Chroma skips the rows before each page): the ids of 180,000 records take about
        1.3 s, where their metadata takes 18 s. A pruning ``rechunk.sync`` reads them to
        find the records of the documents it was not given."""
        collection = self._require()
        with self._errors("read point ids from"):
            for page in self._pages(collection, size=8 * _READ_PAGE, include=[]):
                yield list(page["ids"])

    def doc_ids_of(self, ids: Sequence[str]) -> dict[str, str]:
        """``point id -> doc_id`` of the rechunk records among ``ids`` (as
        :meth:`doc_ids` counts them), read by id; others are left out, and so are ids
        rechunk never gives (another tool's ``"note-1"``: :meth:`all_ids` lists them)."""
        if isinstance(ids, str):
            raise ConfigError("ids must be a sequence of point ids, not a single str")
        unique = list(dict.fromkeys(i for i in ids if is_point_id(i)))
        collection = self._require()
        found: dict[str, str] = {}
        with self._errors("read doc ids from"):
            for chunk in batches(unique, self._max_batch()):
                page = collection.get(ids=list(chunk), include=["metadatas"])
                found.update(self._doc_ids(page))
        return found

    def _doc_ids(self, page: Mapping[str, Any]) -> dict[str, str]:
        """``point id -> doc_id`` of the rechunk records of a page read with metadata."""
        return {point.id: point.payload.doc_id for point in self._rechunk_points(page)}

    def _rechunk_points(self, page: Mapping[str, Any]) -> Iterator[StoredPoint]:
        """The rechunk records of a page read with metadata (their text left empty): those
        that decode as this layout's records (every rechunk field, of its type), as a
        read's :meth:`_decode` tells them from another tool's."""
        for point_id, metadata in zip(page["ids"], page["metadatas"] or []):
            try:
                payload = from_chroma(point_id, "", metadata, self._layout, self._collection)
            except ForeignPointError:
                continue
            yield StoredPoint(point_id, payload)

    def search(
        self, vector: npt.NDArray[np.float32], k: int = 5
    ) -> list[tuple[StoredPoint, float]]:
        """The ``k`` nearest records that are not superseded, closest first; higher scores
        are closer."""
        k = check_k(k)
        collection = self._require()
        config = self._config(collection)
        query = check_query_vector(vector, config.dimension)

        def nearest(n: int) -> list[tuple[StoredPoint | None, float]]:
            (hits,) = self._nearest(collection, config, [query], n)
            return hits

        # superseded records (an old revision waiting for its delete) and records another
        # tool wrote are left out
        return current_hits(nearest, k)

    def search_many(
        self, vectors: Sequence[npt.NDArray[np.float32]], k: int = 5
    ) -> list[list[tuple[StoredPoint, float]]]:
        """:meth:`search` of each of ``vectors``, the answers in their order, in one query
        request per batch (Chroma takes many query embeddings at once); a vector whose
        ``k`` nearest held superseded records is asked for more as :meth:`search` asks."""
        k = check_k(k)
        collection = self._require()
        config = self._config(collection)
        queries = [check_query_vector(v, config.dimension) for v in vectors]
        out: list[list[tuple[StoredPoint, float]]] = []
        for chunk in batches(queries, self._batch_size):
            for query, first in zip(chunk, self._nearest(collection, config, chunk, k)):

                def nearest(
                    n: int, query: Any = query, first: Any = first
                ) -> list[tuple[StoredPoint | None, float]]:
                    return first if n == k else self._nearest(collection, config, [query], n)[0]

                out.append(current_hits(nearest, k))
        return out

    def _nearest(
        self,
        collection: Collection,
        config: _Config,
        queries: Sequence[npt.NDArray[np.float32]],
        n: int,
    ) -> list[list[tuple[StoredPoint | None, float]]]:
        """The ``n`` nearest records of each query, superseded or not, closest first, with
        ``None`` for a record another tool wrote."""
        with self._errors("search"):
            result = self._read(
                collection,
                collection.query,
                query_embeddings=[q.tolist() for q in queries],
                n_results=n,
                include=["metadatas", "documents", "distances"],
            )
        found: Any = result
        answers: list[list[tuple[StoredPoint | None, float]]] = []
        for row, ids in enumerate(found["ids"]):
            none = [None] * len(ids)
            documents = found["documents"][row] if found.get("documents") else none
            metadatas = found["metadatas"][row] if found.get("metadatas") else none
            distances = found["distances"][row] if found.get("distances") else [math.nan] * len(ids)
            answers.append(
                [
                    (self._decode(i, d, m), _score(config.distance, float(dist)))
                    for i, d, m, dist in zip(ids, documents, metadatas, distances)
                ]
            )
        return answers

    # -- writes ----------------------------------------------------------------------------

    def _max_batch(self) -> int:
        with self._errors("read the batch limit of"):
            limit = self._client.get_max_batch_size()
        return max(1, min(self._batch_size, limit))

    def write(self, points: Sequence[PointWrite]) -> None:
        """Upsert records that carry a vector; update only metadata (and a changed text) of
        those with ``vector=None``. Everything is validated before the first request; an
        empty sequence does nothing."""
        prepared = prepare_writes(points, self._layout, flat=True)
        if not prepared:
            return
        collection = self._require()
        config = self._config(collection)
        check_dimensions(prepared, config.dimension, f"Chroma collection {self._collection!r}")
        updates = [w for w in prepared if w.vector is None]
        upserts = [w for w in prepared if w.vector is not None]
        size = self._max_batch()
        self._check_lease()
        with self._errors("write to"):
            current = self._current(collection, [w.id for w in prepared], size)
            missing = [w.id for w in updates if w.id not in current]
            if missing:
                shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
                raise StoreError(
                    f"payload-only update of {len(missing)} record(s) missing from Chroma "
                    f"collection {self._collection!r}: {shown}; write them with a vector; "
                    f"nothing was written"
                )
            records = [(w, *self._record(w, current)) for w in upserts]
            # records that do not exist yet are added: Chroma's add skips the existence
            # check of its upsert (an initial sync's writes take 7-10% less time)
            for write, part in (
                (collection.add, [r for r in records if r[0].id not in current]),
                (collection.upsert, [r for r in records if r[0].id in current]),
            ):
                for chunk in _requests(part, size, config.dimension):
                    write(
                        ids=[w.id for w, _, _ in chunk],
                        embeddings=np.stack(
                            [w.vector for w, _, _ in chunk if w.vector is not None]
                        ),
                        metadatas=[metadata for _, _, metadata in chunk],
                        documents=[document for _, document, _ in chunk],
                    )
            self._update(collection, updates, current, size)

    def _record(
        self, write: PreparedWrite, current: Mapping[str, tuple[str | None, Mapping[str, Any]]]
    ) -> tuple[str, dict[str, Any]]:
        """Document and metadata of a write; keys the record has and the payload lacks are
        set to None, which makes Chroma delete them (its upsert and update merge metadata)."""
        document, metadata = chroma_record(write.id, write.payload, self._layout)
        if write.id in current:
            for key in current[write.id][1]:
                metadata.setdefault(key, None)
        return document, metadata

    @staticmethod
    def _current(
        collection: Collection, ids: list[str], size: int
    ) -> dict[str, tuple[str | None, Mapping[str, Any]]]:
        """``id -> (document, metadata)`` of those records that exist."""
        current: dict[str, tuple[str | None, Mapping[str, Any]]] = {}
        for chunk in batches(ids, size):
            page: Any = collection.get(ids=list(chunk), include=["metadatas", "documents"])
            for i, document, metadata in zip(page["ids"], page["documents"], page["metadatas"]):
                current[i] = (document, metadata or {})
        return current

    def _update(
        self,
        collection: Collection,
        updates: list[PreparedWrite],
        current: Mapping[str, tuple[str | None, Mapping[str, Any]]],
        size: int,
    ) -> None:
        """Payload-only updates: metadata (stale keys set to None, which Chroma deletes)."""
        same_text: list[tuple[str, str, dict[str, Any]]] = []
        new_text: list[tuple[str, str, dict[str, Any]]] = []
        for write in updates:
            document, metadata = self._record(write, current)
            if document == current[write.id][0]:
                same_text.append((write.id, "", metadata))
            else:
                new_text.append((write.id, document, metadata))
        for chunk in _requests(same_text, size):
            collection.update(ids=[i for i, _, _ in chunk], metadatas=[m for _, _, m in chunk])
        for text_chunk in _requests(new_text, size):
            self._update_documents(collection, text_chunk)

    def _update_documents(
        self, collection: Collection, chunk: Sequence[tuple[str, str, dict[str, Any]]]
    ) -> None:
        ids = [i for i, _, _ in chunk]
        metadatas: Any = [m for _, _, m in chunk]
        documents = [d for _, d, _ in chunk]
        low_level = _low_level_update(collection)
        if low_level is not None:
            low_level(
                collection_id=collection.id,
                ids=ids,
                metadatas=metadatas,
                documents=documents,
                tenant=collection.tenant,
                database=collection.database,
            )
            return
        stored: Any = self._read(collection, collection.get, ids=ids, include=["embeddings"])
        by_id = dict(zip(stored["ids"], stored["embeddings"]))
        collection.update(
            ids=ids,
            embeddings=np.stack([np.asarray(by_id[i], dtype=np.float32) for i in ids]),
            metadatas=metadatas,
            documents=documents,
        )

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by id; ids that do not exist are ignored."""
        unique = check_ids(ids)
        if not unique:
            return
        collection = self._require()
        size = self._max_batch()
        self._check_lease()
        with self._errors("delete from"):
            for chunk in batches(unique, size):
                collection.delete(ids=list(chunk))

    def supersede(self, ids: Sequence[str]) -> None:
        """Mark those of ``ids`` that exist superseded (see
        :func:`rechunk.sync.store.mark_superseded`): ``superseded: 1`` added to their
        metadata by Chroma's update, which merges metadata and leaves the document and
        the vector alone; ids that do not exist are ignored."""
        unique = check_ids(ids)
        if not unique:
            return
        collection = self._require()
        size = self._max_batch()
        self._check_lease()
        with self._errors("mark superseded records in"):
            for chunk in batches(unique, size):
                marks: Any = [{SUPERSEDED_KEY: SUPERSEDED_MARK} for _ in chunk]
                collection.update(ids=list(chunk), metadatas=marks)

    # -- writers ---------------------------------------------------------------------------

    @contextmanager
    def writer_lock(self, wait: float | None = None) -> Iterator[None]:
        """Hold this collection's writer lock for the block (``rechunk.sync`` takes it).

        Chroma has no conditional write, so concurrent writers of one collection (two
        processes, two machines) take turns: a lease kept in the collection
        :data:`LOCK_COLLECTION` of the same database, one record per attempt, added
        under a slot id that only the first writer's ``add`` creates (Chroma ignores
        an ``add`` of an existing id), then checked: the writer holds the lock when the
        record is its own and no other unexpired record exists. The holder renews the
        lease every ``LOCK_SECONDS / 3`` from a thread, checks it before every write
        and delete (a lease that ran out, say while the process was stopped, fails the
        sync with :class:`StoreError` rather than writing beside the next holder), and
        deletes its record at the end. A lock whose holder died is taken over once
        ``LOCK_SECONDS`` pass without renewal (at once when the holder ran on this
        machine and its process is gone, or a zombie its parent has not reaped);
        waiting longer than ``wait`` (default :data:`LOCK_WAIT_SECONDS`) raises
        :class:`StoreUnavailableError` naming the holder. The clocks of the machines
        involved must agree to well within ``LOCK_SECONDS``.
        """
        lease = _Lease(self._client, self._collection, LOCK_SECONDS)
        with self._errors("lock"):
            lease.acquire(LOCK_WAIT_SECONDS if wait is None else wait)
        self._lease = lease
        try:
            yield
        finally:
            self._lease = self._pinned = None
            lease.release()

    def _check_lease(self) -> None:
        lease = getattr(self, "_lease", None)
        if lease is not None:  # a server gone while renewing it: unavailable, retried
            with self._errors("renew the writer lock of"):
                lease.check()

    # -- generations -----------------------------------------------------------------------

    def collections(self) -> list[str]:
        """The names of every collection of the client's database (rechunk's own
        :data:`LOCK_COLLECTION` left out)."""
        with self._errors("list the collections of"):
            names = [c.name for c in self._client.list_collections()]
        return [name for name in names if name != LOCK_COLLECTION]

    def drop_collection(self) -> None:
        """Delete the collection and every record in it."""
        self._pinned = None
        with self._errors("drop"):
            self._client.delete_collection(self._collection)


#: Chroma's rule for collection names (chromadb 1.x): 3-512 characters from
#: [a-zA-Z0-9._-], a letter or digit at each end, no "..", not an IPv4 address
_CHROMA_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]")
_IPV4 = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")


def check_collection_name(collection: str) -> None:
    """:class:`ConfigError` for a name Chroma refuses (checked before a folder or a client
    is made: a refused name left a new database behind), and for :data:`LOCK_COLLECTION`,
    which rechunk reserves: a store on it would rewrite the lock records of every
    collection of the database."""
    if (
        not _CHROMA_NAME.fullmatch(collection)
        or ".." in collection
        or _IPV4.fullmatch(collection)
    ):
        raise ConfigError(
            f"Chroma refuses the collection name {collection!r}: it takes 3 to 512 "
            "characters of letters, digits, '.', '_' and '-', a letter or digit at each "
            "end, no '..', and no IPv4 address"
        )
    if collection == LOCK_COLLECTION:
        raise ConfigError(
            f"the Chroma collection name {LOCK_COLLECTION!r} is reserved (rechunk keeps its "
            "writer locks there): choose another collection name"
        )


#: The tokens of this process's leases, from the start of their acquiring to the end of
#: their release. A lock record this process wrote holds exactly while its token is here,
#: so a record whose delete failed at release (the server was down) does not hold back
#: this process's next writer until the record expires.
_HELD_TOKENS: set[str] = set()


class _Lease:
    """One writer's turn at a collection (see :meth:`ChromaStore.writer_lock`)."""

    def __init__(self, client: Any, collection: str, ttl: float) -> None:
        self._client = client
        self._name = collection
        self._ttl = ttl
        self._prefix = hashlib.sha256(collection.encode("utf-8")).hexdigest()[:24] + ":"
        self._token = uuid.uuid4().hex
        self._holder = f"{socket.gethostname()}:{os.getpid()}"
        self._slot: str | None = None
        self._valid_until = 0.0  # time.monotonic() when the lease runs out
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._locks: Any = None

    def _records(self) -> list[tuple[int, dict[str, Any]]]:
        page = self._locks.get(where={"collection": self._name}, include=["metadatas"])
        found = []
        for record_id, metadata in zip(page["ids"], page["metadatas"]):
            if record_id.startswith(self._prefix) and metadata:
                found.append((int(record_id[len(self._prefix) :]), dict(metadata)))
        return sorted(found, key=lambda item: item[0])

    def _id(self, slot: int) -> str:
        return f"{self._prefix}{slot:012d}"

    def acquire(self, wait: float) -> None:
        _HELD_TOKENS.add(self._token)  # before its record exists: live to this process's others
        try:
            self._acquire(wait)
        except BaseException:
            _HELD_TOKENS.discard(self._token)
            raise

    def _acquire(self, wait: float) -> None:
        self._locks = self._client.get_or_create_collection(
            LOCK_COLLECTION, embedding_function=None, metadata={"rechunk:locks": 1}
        )
        deadline = time.monotonic() + wait
        announced = False
        while True:
            records = self._records()
            now = time.time()
            live = [(slot, m) for slot, m in records if self._live(m, now)]
            if not live:
                slot = records[-1][0] + 1 if records else 0
                self._locks.add(
                    ids=[self._id(slot)],
                    embeddings=[[1.0]],
                    metadatas=[self._metadata(now)],
                )
                mine = self._locks.get(ids=[self._id(slot)], include=["metadatas"])
                won = bool(mine["metadatas"]) and mine["metadatas"][0].get("token") == self._token
                if won:
                    others = [
                        (other, m)
                        for other, m in self._records()
                        if other != slot and self._live(m, time.time())
                    ]
                    if not others:
                        self._slot = self._id(slot)
                        self._valid_until = time.monotonic() + self._ttl
                        stale = [self._id(other) for other, _ in records]
                        if stale:
                            self._locks.delete(ids=stale)
                        self._renewer = threading.Thread(
                            target=self._renew_loop, name="rechunk-lease", daemon=True
                        )
                        self._renewer.start()
                        return
                    self._locks.delete(ids=[self._id(slot)])  # two at once: both back off
                    live = others
            if time.monotonic() > deadline:
                holder = live[0][1] if live else {}
                raise StoreUnavailableError(
                    f"waited {wait:g} s for the writer lock of Chroma collection "
                    f"{self._name!r}, held by {holder.get('holder', 'another writer')} "
                    f"(it expires {max(0.0, float(holder.get('expires', 0)) - time.time()):.0f} "
                    "s from now unless renewed); try again later"
                )
            if live and not announced:
                announced = True
                log.warning(
                    "waiting for the writer lock of Chroma collection %r, held by %s",
                    self._name,
                    live[0][1].get("holder", "another writer"),
                )
            time.sleep(random.uniform(0.05, 0.3))

    def _live(self, metadata: Mapping[str, Any], now: float) -> bool:
        """Whether a lock record still holds: not expired, and (its holder on this machine)
        held by a process that still runs, so a writer killed here frees it at once; a
        record of this process holds while its lease is taken or being taken."""
        try:
            if float(metadata.get("expires", 0)) <= now:
                return False
        except (TypeError, ValueError):
            return False
        host, _, pid = str(metadata.get("holder", "")).rpartition(":")
        if host == socket.gethostname() and pid.isdigit():
            if int(pid) == os.getpid():
                return metadata.get("token") in _HELD_TOKENS
            return not _ended(int(pid))
        return True

    def _metadata(self, now: float) -> dict[str, Any]:
        return {
            "collection": self._name,
            "token": self._token,
            "holder": self._holder,
            "expires": now + self._ttl,
        }

    def _renew(self) -> None:
        """Extend the lease, or raise StoreError when it is no longer this writer's."""
        assert self._slot is not None
        if time.monotonic() > self._valid_until:
            raise StoreError(
                f"the writer lock of Chroma collection {self._name!r} ran out (this process "
                f"was stopped or cut off for over {self._ttl:g} s) and another writer may "
                "hold it now; nothing more was written: run the sync again"
            )
        started = time.monotonic()
        self._locks.update(ids=[self._slot], metadatas=[self._metadata(time.time())])
        mine = self._locks.get(ids=[self._slot], include=["metadatas"])
        if not mine["metadatas"] or mine["metadatas"][0].get("token") != self._token:
            raise StoreError(
                f"the writer lock of Chroma collection {self._name!r} was taken over by "
                "another writer; nothing more was written: run the sync again"
            )
        self._valid_until = started + self._ttl

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._ttl / 3):
            try:
                self._renew()
            except Exception:  # the next check() reports it
                return

    def check(self) -> None:
        """Before a write: the lease must still be this writer's, with time to spare."""
        if self._slot is None:
            raise StoreError(f"the writer lock of Chroma collection {self._name!r} is not held")
        if time.monotonic() > self._valid_until - self._ttl / 3:
            self._renew()

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if self._slot is not None:
            with contextlib.suppress(Exception):  # else it expires by itself (for others)
                self._locks.delete(ids=[self._slot])
            self._slot = None
        _HELD_TOKENS.discard(self._token)


def _ended(pid: int) -> bool:
    """Whether process ``pid`` of this machine has ended: it does not exist, or it is a
    zombie (killed or exited, not yet reaped by its parent: it runs no code, and
    ``os.kill(pid, 0)`` still succeeds on it). Unknown (Windows, where signal 0 would
    interrupt the process; no way to read its state) is False: the lease decides."""
    if sys.platform == "win32":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # it exists, as another user's
    return _process_state(pid) in ("Z", "X")  # zombie, dead


def _process_state(pid: int) -> str | None:
    """The one-letter state of process ``pid`` (``R``, ``S``, ``Z`` ...), or None when it
    cannot be read: from ``/proc/PID/stat`` where there is a /proc (Linux), else from
    ``ps -o stat= -p PID`` (macOS, the BSDs)."""
    if os.path.isdir("/proc/self"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            return None
        # "PID (COMMAND) STATE ...": COMMAND may hold spaces and parentheses
        fields = data[data.rfind(b")") + 1 :].split()
        return fields[0].decode("ascii", "replace") if fields else None
    try:
        answer = subprocess.run(
            ["ps", "-o", "stat=", "-p", str(pid)],
            capture_output=True, text=True, timeout=5, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    state = answer.stdout.strip()
    return state[:1] if answer.returncode == 0 and state else None


#: Serialises :func:`_reopen_embedded`: threads that hit the stale view at once reopen
#: the engine one after the other, not over each other.
_REOPENING = threading.Lock()


#: what chromadb's embedded engine (1.5) says when its view of a folder is stale: it saw
#: the collection empty and another process wrote the first vectors, or it read vectors
#: another process has since deleted and written again (a watcher's batches)
_STALE_VIEW = ("Nothing found on disk", "Error finding id")


def _stale_reader(exc: Exception) -> bool:
    """Whether ``exc`` is the failure of chromadb's embedded engine to read vectors another
    process wrote after this one last read the collection (see :meth:`ChromaStore._read`)."""
    return type(exc).__name__ == "InternalError" and any(m in str(exc) for m in _STALE_VIEW)


def _reopen_embedded(collection: Collection) -> bool:
    """Start this process's embedded Chroma engine of ``collection``'s folder afresh (it then
    reads the folder as a new ``PersistentClient`` in a new process would); False, and
    nothing done, for any other client (a server's, an in-memory one's).

    The engine is replaced in place, inside the one ``RustBindingsAPI`` that chromadb shares
    between every client of that folder in the process, so they all see the fresh engine
    and no other folder is touched. chromadb's own remedy,
    ``SharedSystemClient.clear_system_cache()``, forgets the engines of every folder and
    leaves existing clients on the stale one (and their ``close()`` would then stop the
    new one). What the old engine wrote is on disk already (a write returns once Chroma's
    log holds it); a request running on it finishes on it, and it is dropped after.
    """
    try:
        from chromadb.api.rust import RustBindingsAPI
    except ImportError:  # pragma: no cover - a chromadb without its Rust engine
        return False
    server = getattr(collection, "_client", None)
    if not isinstance(server, RustBindingsAPI):
        return False
    if not server.get_settings().is_persistent:
        return False  # an in-memory engine started afresh would be empty
    with _REOPENING:
        server.start()  # new bindings over the same folder, assigned in one step
    return True


def _bad_name(exc: Exception) -> bool:
    """Whether Chroma refused a collection name (its rules: 3-512 characters from
    ``[a-zA-Z0-9._-]``, starting and ending with a letter or digit)."""
    return type(exc).__name__ == "InvalidArgumentError" and "name:" in str(exc)


def _requests(
    records: Sequence[tuple[Any, str, dict[str, Any]]], size: int, dimension: int = 0
) -> Iterator[Sequence[tuple[Any, str, dict[str, Any]]]]:
    """``(write or id, document, metadata)`` records in consecutive requests of at most
    ``size`` records and (but for a single record) :data:`MAX_REQUEST_BYTES` bytes."""
    start, total = 0, 0
    for i, (_, document, metadata) in enumerate(records):
        weight = (
            len(document.encode("utf-8", "replace"))
            + len(json.dumps(metadata, ensure_ascii=False).encode("utf-8", "replace"))
            + dimension * _BYTES_PER_NUMBER
        )
        if i > start and (i - start == size or total + weight > MAX_REQUEST_BYTES):
            yield records[start:i]
            start, total = i, 0
        total += weight
    if start < len(records):
        yield records[start:]


def _low_level_update(collection: Collection) -> Callable[..., Any] | None:
    """The update call that ``Collection.update()`` wraps, when this Chroma has it.

    ``Collection.update()`` embeds a document sent without its embedding (and,
    with no embedding function, refuses); the call it wraps (``_update`` of the
    client's server API, in the local and the HTTP client alike) stores the
    document and metadata and leaves the vector alone.
    """
    server = getattr(collection, "_client", None)
    update = getattr(server, "_update", None)
    return update if callable(update) else None


def _score(distance: Distance, value: float) -> float:
    """Chroma's distance as a score where higher is closer."""
    if distance == "euclid":
        return -math.sqrt(max(value, 0.0))
    return 1.0 - value  # cosine: 1 - cos distance; ip: 1 - (1 - dot)
