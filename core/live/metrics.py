"""Prometheus metrics of a watcher: counts, sizes and durations, never text.

Labels are only ``source_type`` (the format a file is read as: ``markdown``, ``pdf``,
``code``..., or ``other``) and ``policy`` (the chunking policy's id), and ``kind`` on
errors (the error's class name): no document id, path or text appears in a label or a
value. ``prometheus_client`` is imported when a :class:`LiveMetrics` is made (extra
``watch``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rechunk._optional import require

__all__ = [
    "AMPLIFICATION_BUCKETS",
    "INPUTS_PER_EDIT_BUCKETS",
    "LAG_BUCKETS",
    "LiveMetrics",
    "MetricsServer",
    "serve_metrics",
]

#: seconds from the first file event to the revision being retrievable
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
#: bytes of embedding inputs re-indexed per byte the edit changed
AMPLIFICATION_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
#: inputs embedded for one changed document: an edit in one place needs the one or two
#: inputs holding it, whatever its size; more, edit after edit, is boundary drift
INPUTS_PER_EDIT_BUCKETS = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0)
_LABELS = ("source_type", "policy")


class LiveMetrics:
    """The metrics of one watcher, in their own registry (``registry``: one of yours).

    ``queue`` and ``freshness`` are read when Prometheus scrapes: ``queue()`` gives the
    files waiting and the age of the oldest (seconds, None when none), ``freshness()``
    the accepted revisions not yet retrievable, how many of them an earlier revision
    still answers for, and the age of the oldest.
    """

    def __init__(self, registry: Any = None) -> None:
        prom = require("prometheus_client", "watch", "prometheus-client")
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        r = self.registry
        self.accepted = prom.Counter(
            "rechunk_documents_accepted",
            "document revisions accepted (new, changed, deleted)",
            _LABELS,
            registry=r,
        )
        self.published = prom.Counter(
            "rechunk_documents_published",
            "document revisions published to the store",
            _LABELS,
            registry=r,
        )
        self.failed = prom.Counter(
            "rechunk_documents_failed",
            "document revisions given up on (parse or input errors)",
            _LABELS,
            registry=r,
        )
        self.embedded = prom.Counter(
            "rechunk_inputs_embedded", "embedding inputs sent to the model", _LABELS, registry=r
        )
        self.reused = prom.Counter(
            "rechunk_inputs_reused",
            "embedding inputs whose vector was reused (cache or store)",
            _LABELS,
            registry=r,
        )
        self.tokens = prom.Counter(
            "rechunk_tokens_embedded",
            "tokens of the inputs sent to the model",
            _LABELS,
            registry=r,
        )
        self.model_check_tokens = prom.Counter(
            "rechunk_model_check_tokens",
            "tokens of the held inputs embedded again to check the model (one per sync that "
            "embeds, for a model not known by its weights)",
            registry=r,
        )
        self.amplification = prom.Histogram(
            "rechunk_reindexed_bytes_per_changed_byte",
            "bytes of inputs re-embedded per byte the edit changed, per changed document",
            _LABELS,
            buckets=AMPLIFICATION_BUCKETS,
            registry=r,
        )
        self.inputs_per_edit = prom.Histogram(
            "rechunk_inputs_embedded_per_changed_document",
            "embedding inputs sent to the model for one changed document",
            _LABELS,
            buckets=INPUTS_PER_EDIT_BUCKETS,
            registry=r,
        )
        self.lag = prom.Histogram(
            "rechunk_accept_to_retrievable_seconds",
            "seconds from a file's first event to its revision being retrievable",
            _LABELS,
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.errors = prom.Counter(
            "rechunk_errors", "errors by kind (the error's class)", ("kind",), registry=r
        )
        self.queue_depth = prom.Gauge(
            "rechunk_queue_depth", "files waiting to be synced", registry=r
        )
        self.queue_age = prom.Gauge(
            "rechunk_queue_oldest_age_seconds",
            "age of the oldest file waiting (0: none)",
            registry=r,
        )
        self.unretrievable = prom.Gauge(
            "rechunk_unretrievable_revisions",
            "accepted revisions not yet verified retrievable",
            registry=r,
        )
        self.unretrievable_age = prom.Gauge(
            "rechunk_oldest_unretrievable_age_seconds",
            "age of the oldest accepted revision not yet retrievable (0: none)",
            registry=r,
        )
        self.stale = prom.Gauge(
            "rechunk_stale_retrievable_revisions",
            "documents whose earlier revision the store still returns",
            registry=r,
        )

    def watch(
        self,
        queue: Callable[[], tuple[int, float | None]],
        freshness: Callable[[], tuple[int, int, float | None]],
    ) -> None:
        """Read the queue and the freshness state at every scrape."""
        self.queue_depth.set_function(lambda: float(queue()[0]))
        self.queue_age.set_function(lambda: float(queue()[1] or 0.0))
        self.unretrievable.set_function(lambda: float(freshness()[0]))
        self.stale.set_function(lambda: float(freshness()[1]))
        self.unretrievable_age.set_function(lambda: float(freshness()[2] or 0.0))

    def text(self) -> str:
        """The exposition text, as a scrape would read it."""
        prom = require("prometheus_client", "watch", "prometheus-client")
        data: bytes = prom.generate_latest(self.registry)
        return data.decode("utf-8")


class MetricsServer:
    """A running metrics endpoint: its ``port`` and :meth:`stop`."""

    def __init__(self, server: Any, thread: Any) -> None:
        self._server = server
        self._thread = thread
        self.port: int = int(server.server_address[1])

    def stop(self) -> None:
        """Stop serving and close the socket (safe to call twice)."""
        if self._thread is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._thread = None


def serve_metrics(metrics: LiveMetrics, port: int, addr: str = "127.0.0.1") -> MetricsServer:
    """Serve ``metrics`` over HTTP on ``addr:port`` (port 0: any free one) from a thread."""
    prom = require("prometheus_client", "watch", "prometheus-client")
    server, thread = prom.start_http_server(port, addr=addr, registry=metrics.registry)
    return MetricsServer(server, thread)
