"""Publishing a batch of plans: every write, then every delete (or the other way round), in
few requests, conditional on the document's version where the store can, and repeated
while the store cannot be reached."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from rechunk.errors import StoreTimeoutError, StoreUnavailableError
from rechunk.sync.planning import _Plan
from rechunk.sync.report import Order
from rechunk.sync.store import PointWrite, VectorStore, mark_superseded
from rechunk.sync.vectors import Vector

log = logging.getLogger("rechunk.sync")


def _guarded(store: VectorStore, version: int | None) -> dict[str, int]:
    """``version=`` for a store whose writes and deletes can be conditional on the stored
    version (Qdrant: never replace or delete a point of a newer version), else nothing."""
    if version is None or not getattr(store, "conditional_versions", False):
        return {}
    return {"version": version}


def _publish(
    plans: Sequence[_Plan], vectors: dict[str, Vector], store: VectorStore, order: Order
) -> None:
    """Publish a batch of documents' plans in few requests: every write, then every delete
    (or the other way round), per document version (a store that can makes them
    conditional on it); each document still sees its own order."""
    by_version: dict[int | None, list[_Plan]] = {}
    for plan in plans:
        by_version.setdefault(plan.doc.version, []).append(plan)
    for version, group in by_version.items():
        writes = [
            PointWrite(w.id, w.payload, vectors[w.payload.input_key])
            if w.id not in plan.existing or w.id in plan.revector
            else w
            for plan in group
            for w in plan.writes
        ]
        delete = [pid for plan in group for pid in plan.delete]
        guard: Any = _guarded(store, version)
        if order == "delete-then-upsert":
            if delete:
                _retrying(store.delete, delete, **guard)
            if writes:
                _retrying(store.write, writes, **guard)
        else:
            if writes:
                _retrying(store.write, writes, **guard)
            if delete:
                # the revision guard: the old points, now that the new ones are written,
                # are marked in a payload-only update first, so that no search returns
                # them while they wait for the delete (or, after a crash, for the next sync)
                stale = [plan.existing[pid] for plan in group for pid in plan.delete]
                _retrying(mark_superseded, store, stale, **guard)
                _retrying(store.delete, delete, **guard)


#: Attempts of one publishing request that failed because the store could not be reached
#: (a server restarting, a dropped connection), with waits of 1, 2 and 4 s in between; a
#: request that timed out (StoreTimeoutError: a frozen server) is not repeated.
PUBLISH_ATTEMPTS = 4
PUBLISH_BACKOFF = 1.0


def _retrying(call: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    """``call(*args, **kwargs)``, repeated while the store is unavailable (writes and
    deletes are idempotent: a request that did land is harmless to send again)."""
    for attempt in range(1, PUBLISH_ATTEMPTS + 1):
        try:
            call(*args, **kwargs)
            return
        except StoreTimeoutError:
            raise
        except StoreUnavailableError as exc:
            if attempt == PUBLISH_ATTEMPTS:
                raise StoreUnavailableError(
                    f"{exc} (publishing gave up after {PUBLISH_ATTEMPTS} attempts)"
                ) from exc
            wait = PUBLISH_BACKOFF * 2 ** (attempt - 1)
            log.warning(
                "store unavailable while publishing (%s); attempt %d of %d in %.0f s",
                exc,
                attempt + 1,
                PUBLISH_ATTEMPTS,
                wait,
            )
            time.sleep(wait)
