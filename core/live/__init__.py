"""Live folders: ``rechunk watch`` and its Python API.

:class:`Watcher` syncs folders once, then again as their files change, with the
embedder, chunker and store kept open; :class:`Freshness` tracks each accepted revision
from the event to the moment the store's query path returns it (and no longer returns
the revision before it), in a small state file an operator's ``rechunk status`` reads;
:class:`LiveMetrics` exposes counts, sizes and durations to Prometheus, and
:class:`DiagnosisLog` writes one JSON line per document revision with opaque ids.
Nothing here records a document's text, and metrics carry no document id or path.

What this package may import: the standard library, numpy and the rest of
:mod:`rechunk`'s core (never the CLI, the adapters or a framework); ``watchfiles`` and
``prometheus_client`` are imported inside functions, on first use, through
:func:`rechunk._optional.require` (extra ``watch``).
"""

from __future__ import annotations

from rechunk.live.engine import BatchReport, Watcher, check_not_nested
from rechunk.live.freshness import DiagnosisLog, Freshness, read_freshness
from rechunk.live.metrics import LiveMetrics, serve_metrics
from rechunk.live.selection import Selection

__all__ = [
    "BatchReport",
    "DiagnosisLog",
    "Freshness",
    "LiveMetrics",
    "Selection",
    "Watcher",
    "check_not_nested",
    "read_freshness",
    "serve_metrics",
]
