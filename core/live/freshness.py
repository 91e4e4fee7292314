"""Freshness: each accepted revision from the file event to the moment the store's query
path returns it, kept in a small JSON file beside the manifest; and the diagnosis log.

A revision is *accepted* when a watcher reads the file that holds it (its time is the
first event seen for that file), *published* when the sync that wrote it returns, and
*retrievable* when a search of the store with the vector of one of its written points
returns a point of that revision and none of an earlier one (a deletion: none of the
document at all). Until then it is pending: ``rechunk status`` counts the pending
revisions and the age of the oldest (:func:`read_freshness`), which is what an on-call
engineer is paged on. The file names documents (as the manifest names folders) but
holds no text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["Accepted", "DiagnosisLog", "Freshness", "freshness_path", "read_freshness"]


def freshness_path(state_dir: str | os.PathLike[str], key: str) -> Path:
    """The state file of one store and collection (``key``) in ``state_dir``."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return Path(state_dir) / f"freshness-{digest}.json"


@dataclass
class Accepted:
    """One accepted revision not yet verified retrievable (``revision`` None: a deletion).

    Times are seconds since the epoch; ``stale`` is set when a probe found an earlier
    revision of the document still returned."""

    doc_id: str
    revision: str | None
    accepted: float
    source_type: str = "other"
    policy: str = ""
    published: float | None = None
    stale: bool = False


def _load(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _entries(data: dict[str, Any]) -> dict[str, Accepted]:
    out: dict[str, Accepted] = {}
    pending = data.get("pending")
    if not isinstance(pending, dict):
        return out
    for doc_id, raw in pending.items():
        try:
            out[str(doc_id)] = Accepted(
                str(doc_id),
                None if raw.get("revision") is None else str(raw["revision"]),
                float(raw["accepted"]),
                str(raw.get("source_type", "other")),
                str(raw.get("policy", "")),
                None if raw.get("published") is None else float(raw["published"]),
                bool(raw.get("stale", False)),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return out


class Freshness:
    """The accepted revisions of one store and collection that are not yet retrievable.

    With ``path`` the state survives the process (written atomically by :meth:`save`);
    the salt of the collection's opaque ids (:class:`DiagnosisLog`) is kept there too.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, key: str = "") -> None:
        self.path = None if path is None else Path(path)
        self.key = key
        data = _load(self.path)
        if data.get("key", key) != key:
            data = {}
        salt = data.get("salt")
        self.salt = salt if isinstance(salt, str) and salt else secrets.token_hex(16)
        self.pending: dict[str, Accepted] = _entries(data)

    def accept(
        self,
        doc_id: str,
        revision: str | None,
        accepted: float,
        source_type: str = "other",
        policy: str = "",
    ) -> None:
        """A new revision (or a deletion) of ``doc_id`` seen at ``accepted``; an older
        pending one is replaced, keeping its earlier acceptance time (the document has
        not been retrievable as accepted since then)."""
        before = self.pending.get(doc_id)
        if before is not None:
            accepted = min(accepted, before.accepted)
        self.pending[doc_id] = Accepted(doc_id, revision, accepted, source_type, policy)

    def published(self, doc_id: str, at: float) -> None:
        entry = self.pending.get(doc_id)
        if entry is not None:
            entry.published = at

    def verified(self, doc_id: str, revision: str | None) -> Accepted | None:
        """The revision was found retrievable: its entry goes (returned), unless a newer
        revision is pending."""
        entry = self.pending.get(doc_id)
        if entry is None or entry.revision != revision:
            return None
        return self.pending.pop(doc_id)

    def mark_stale(self, doc_id: str) -> None:
        entry = self.pending.get(doc_id)
        if entry is not None:
            entry.stale = True

    def oldest_age(self, now: float | None = None) -> float | None:
        if not self.pending:
            return None
        now = time.time() if now is None else now
        return max(0.0, now - min(e.accepted for e in self.pending.values()))

    def stale_count(self) -> int:
        return sum(1 for e in self.pending.values() if e.stale)

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "key": self.key,
            "salt": self.salt,
            "updated": time.time(),
            "pending": {
                doc_id: {k: v for k, v in asdict(e).items() if k != "doc_id"}
                for doc_id, e in sorted(self.pending.items())
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(self.path)


def read_freshness(path: str | os.PathLike[str], now: float | None = None) -> dict[str, Any]:
    """What ``rechunk status`` shows of a state file: the accepted revisions not yet
    retrievable (``unretrievable``), how many of them an earlier revision still answers
    for (``stale``), the age of the oldest in seconds (None when there is none), and
    each pending revision (doc_id, revision, the time it was accepted and published,
    its age). An absent file: nothing pending."""
    entries = _entries(_load(Path(path)))
    now = time.time() if now is None else now
    rows = [
        {
            "doc_id": e.doc_id,
            "revision": e.revision,
            "deleted": e.revision is None,
            "accepted": e.accepted,
            "published": e.published,
            "stale": e.stale,
            "age_seconds": round(max(0.0, now - e.accepted), 3),
        }
        for e in sorted(entries.values(), key=lambda e: e.accepted)
    ]
    return {
        "unretrievable": len(rows),
        "stale": sum(1 for r in rows if r["stale"]),
        "oldest_age_seconds": rows[0]["age_seconds"] if rows else None,
        "revisions": rows,
    }


class DiagnosisLog:
    """One JSON line per document revision and stage, for an authorised tool.

    Ids are opaque: the doc_id as an HMAC-SHA256 with the collection's ``salt`` (the
    same document always gets the same id in one collection, and the id cannot be
    looked up without the salt), unless ``hash_ids`` is False. Each line holds the
    revision, policy, source type, stage reached and counts, sizes and durations:
    never a path's or a document's text."""

    def __init__(self, path: str | os.PathLike[str], salt: str, *, hash_ids: bool = True) -> None:
        self.path = Path(path)
        self._salt = salt.encode()
        self._hash = hash_ids
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a line at a time: the log is read while the watcher fails (a store outage, a file
        # that does not parse), before any batch finishes
        self._file = self.path.open("a", encoding="utf-8", buffering=1)

    def opaque(self, doc_id: str) -> str:
        if not self._hash:
            return doc_id
        mac = hmac.new(self._salt, doc_id.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()[:24]

    def write(self, doc_id: str, stage: str, **fields: Any) -> None:
        record = {"time": round(time.time(), 3), "doc": self.opaque(doc_id), "stage": stage}
        record.update(fields)
        self._file.write(json.dumps(record, sort_keys=False) + "\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
