"""File events of watched folders, collected from a thread until a watcher takes them.

:class:`FileEvents` runs ``watchfiles`` over folders and queues the paths each event
names. It is its own object so that ``rechunk watch`` can start it before it reads the
folders: an edit or a removal made while the files are read, the model loaded and the
store opened (tens of seconds for a large embedded store) is then in the queue when the
:class:`~rechunk.live.engine.Watcher` starts serving, not lost between the read and the
first event.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence

from rechunk._optional import require

__all__ = ["FileEvents"]


#: one event's paths, with when it arrived: ``(time.monotonic(), time.time(), paths)``
Event = tuple[float, float, list[str]]


class FileEvents:
    """The changed paths under ``roots`` (folders, as given to ``watchfiles``), from
    :meth:`start` until :meth:`stop`: each event as one :data:`Event` in :attr:`queue`,
    stamped when it arrived (a watcher busy with a batch takes it later, and its lag
    counts from then); an exception the file watcher raised is put there in its place."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = [str(root) for root in roots]
        self.queue: queue.Queue[Event | BaseException] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, *, debounce_ms: int = 1000, step_ms: int = 30) -> None:
        """Start watching, from a thread; returns once the watcher is in place (at most
        5 s). Starting a running one does nothing."""
        if self._thread is not None:
            return
        watchfiles = require("watchfiles", "watch")
        ready, stop = threading.Event(), threading.Event()
        self._stop = stop

        def pump() -> None:
            try:
                changes = watchfiles.watch(
                    *self.roots,
                    watch_filter=None,
                    debounce=debounce_ms,
                    step=step_ms,
                    stop_event=stop,
                    rust_timeout=200,
                    yield_on_timeout=True,
                    raise_interrupt=False,
                )
                for found in changes:
                    ready.set()
                    if found:
                        paths = [path for _, path in found]
                        self.queue.put((time.monotonic(), time.time(), paths))
            except BaseException as exc:  # the watcher failed: the loop raises it
                self.queue.put(exc)
            finally:
                ready.set()

        self._thread = threading.Thread(target=pump, name="rechunk-watch", daemon=True)
        self._thread.start()
        ready.wait(timeout=5)  # the first timeout yield: the watcher is in place

    def waiting(self) -> list[Event]:
        """The events queued and not yet taken (a watcher takes them between batches), for
        a count of what waits while a batch runs; the queue is left as it is."""
        with self.queue.mutex:
            return [item for item in self.queue.queue if not isinstance(item, BaseException)]

    def stop(self) -> None:
        """Stop watching (waits at most 5 s for the thread); events queued stay."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
