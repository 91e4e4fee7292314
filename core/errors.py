"""One exception root for everything rechunk raises on purpose.

Catch :class:`RechunkError` to handle any of them. Subclasses that describe bad
arguments also derive from :class:`ValueError` / :class:`TypeError`, and a
missing optional package from :class:`ImportError`, so code written against the
builtin exceptions keeps working. :class:`TransientError` marks failures that
are safe to retry (a store or model that did not answer this time).
"""

from __future__ import annotations

__all__ = [
    "BadVectorError",
    "CacheError",
    "CollectionMismatchError",
    "ConfigError",
    "EmbeddingError",
    "ForeignPointsWarning",
    "InputError",
    "LocatorWarning",
    "MissingDependencyError",
    "ModelChangedError",
    "RechunkError",
    "StaleCheckError",
    "StoreError",
    "StoreTimeoutError",
    "StoreUnavailableError",
    "TransientError",
]


class RechunkError(Exception):
    """Base class of every error rechunk raises deliberately."""


class ForeignPointsWarning(UserWarning):
    """A store's read met points rechunk did not write (another tool's); they were skipped
    and left alone (``warnings.filterwarnings("ignore", category=ForeignPointsWarning)``
    quiets it; the store's ``foreign_points`` names them)."""


class UncheckedModelWarning(UserWarning):
    """A cache wrapper's call embedded with no model check: its cache keeps no reference
    for the model (a cache filled by ``rechunk sync``'s first run, or by a release before
    the check) and the call held no cached input to compare with. A call that includes a
    cached input, or a ``rechunk sync`` whose check passes, records the reference."""


class LocatorWarning(UserWarning):
    """A document that rechunk's loaders read reached rechunk's splitter as a copy, or with
    its text changed: its chunks carry no ``pages``, ``section``... (see
    :mod:`rechunk.adapters._locators`)."""


class ConfigError(RechunkError, ValueError):
    """Invalid parameters: min above max, a bool where an int is due, a bad path."""


class InputError(RechunkError, ValueError):
    """Input that cannot be processed: not a str, NUL bytes, lone surrogates."""


class MissingDependencyError(RechunkError, ImportError):
    """An optional package is not installed; the message names the extra."""

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{package} is not installed; install the {extra!r} extra: pip install "
            f"'rechunk[{extra}]' (from a clone: pip install '.[{extra}]')"
        )


class TransientError(RechunkError):
    """A failure that is safe to retry as it is."""


class EmbeddingError(RechunkError):
    """The embedder refused or failed: input too long, wrong dimension, model mismatch."""


class BadVectorError(EmbeddingError):
    """An embedder returned vectors that cannot be cosine vectors (all zeros or of a norm
    near zero, NaN or infinite values, values near float32's limit, the wrong dimension).
    Nothing of that batch was stored or cached. ``model_id`` names the embedder, ``bad``
    and ``total`` count the vectors of the batch, ``reasons`` maps each fault to how many
    vectors have it."""

    def __init__(
        self,
        message: str,
        *,
        model_id: str = "",
        bad: int = 0,
        total: int = 0,
        reasons: dict[str, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.model_id = model_id
        self.bad = bad
        self.total = total
        self.reasons = dict(reasons or {})


class CacheError(RechunkError):
    """The reuse cache is unreadable, from a newer schema, or belongs to another model."""


class StoreError(RechunkError):
    """The vector store refused the operation or holds an incompatible collection."""


class CollectionMismatchError(StoreError):
    """The collection holds vectors of another dimension, distance or model than the
    ones asked for: sync into another collection, or reindex it (the command line's
    exit 2, a usage error, not a failing store's 3)."""


class ModelChangedError(CollectionMismatchError):
    """The model behind an embedder's identity now gives another vector for an input than
    the one held under that identity (the collection's, or the cache's): a server serving
    another model under the same name. Raised before anything the model embedded in that
    sync is cached or stored (the model check, :mod:`rechunk.sync.model_check`)."""


class StaleCheckError(StoreError, TransientError):
    """After publishing, the store does not hold exactly the synced revisions (points of
    another revision left, or points missing). ``report`` is the run's full
    :class:`~rechunk.sync.SyncReport` (``stale_check == "failed"``), so a caller keeps the
    counts of what was written; running the same sync again repairs the store, so it is a
    :class:`TransientError` (a concurrent writer of a document without ``version`` may
    leave points of both revisions until then)."""

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class StoreUnavailableError(StoreError, TransientError):
    """The vector store could not be reached (server down, path locked by another process)."""


class StoreTimeoutError(StoreUnavailableError):
    """The store took the request but did not answer in time (a frozen or overloaded
    server). The message says what was waiting; a sync does not retry it."""
