"""A local HTTP proxy in front of an embeddings server that injects faults and counts inputs.

``FaultProxy(upstream)`` listens on 127.0.0.1 and forwards ``POST .../embeddings``
to ``upstream``. Each request takes the next action of :attr:`FaultProxy.script`
(then ``"ok"`` once the script is used up):

* ``"ok"``: forward and answer;
* ``"429"``: answer 429 with ``Retry-After: retry_after`` (seconds), forward nothing;
* ``"500"`` / ``"400"``: answer that status, forward nothing;
* ``"slow"``: wait ``slow_seconds``, then forward and answer;
* ``"hang"``: wait ``hang_seconds`` (longer than the client's timeout), then close;
* ``"drop"``: close the connection without an answer.

It records every request (time, action, number of inputs), the most requests in
flight at once (a hung one not counted: the client gives it up) and, for each
forwarded request the upstream answered, its inputs: :meth:`forwarded_inputs`
is what the server embedded, the number tests compare with the inputs a sync
needed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    at: float
    action: str
    inputs: int


@dataclass
class FaultProxy:
    upstream: str
    script: list[str] = field(default_factory=list)
    retry_after: float = 1.0
    slow_seconds: float = 0.5
    hang_seconds: float = 3.0
    seen: list[Seen] = field(default_factory=list)
    forwarded: list[list[str]] = field(default_factory=list)
    undelivered: list[list[str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._forward(b"", "GET")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                proxy._handle(self, body)

            def _forward(self, body: bytes, method: str) -> tuple[int, bytes]:
                status, answer = proxy._upstream(self.path, body, method)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                return status, answer

        self._handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *args: None  # type: ignore[method-assign]  # dropped on purpose
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self, script: list[str] | None = None) -> None:
        with self._lock:
            self.script = list(script or [])
            self.seen.clear()
            self.forwarded.clear()
            self.undelivered.clear()
            self.max_in_flight = 0

    def forwarded_inputs(self) -> list[str]:
        with self._lock:
            return [text for batch in self.forwarded for text in batch]

    def _upstream(self, path: str, body: bytes, method: str) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.upstream.rstrip("/") + path,
            data=body if method == "POST" else None,
            method=method,
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def _handle(self, handler: Any, body: bytes) -> None:
        try:
            inputs = json.loads(body).get("input", [])
        except ValueError:
            inputs = []
        if isinstance(inputs, str):
            inputs = [inputs]
        with self._lock:
            action = self.script.pop(0) if self.script else "ok"
            self.seen.append(Seen(time.monotonic(), action, len(inputs)))
            # a hung request is given up by the client after its timeout: not in flight
            counted = action != "hang"
            self.in_flight += counted
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if action in ("400", "429", "500"):
                answer = json.dumps({"error": {"message": f"injected {action}"}}).encode()
                handler.send_response(int(action))
                if action == "429":
                    handler.send_header("retry-after", f"{self.retry_after:g}")
                handler.send_header("content-type", "application/json")
                handler.send_header("content-length", str(len(answer)))
                handler.end_headers()
                handler.wfile.write(answer)
                return
            if action in ("drop", "hang"):
                if action == "hang":
                    time.sleep(self.hang_seconds)
                handler.close_connection = True
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if action == "slow":
                time.sleep(self.slow_seconds)
            status, answer = self._upstream(handler.path, body, "POST")
            if status == 200:
                with self._lock:
                    self.forwarded.append(list(inputs))
            try:
                handler.send_response(status)
                handler.send_header("content-type", "application/json")
                handler.send_header("content-length", str(len(answer)))
                handler.end_headers()
                handler.wfile.write(answer)
            except OSError:  # the client gave up waiting (its timeout): the server embedded
                with self._lock:  # these inputs for nothing
                    self.undelivered.append(list(inputs))
        finally:
            with self._lock:
                self.in_flight -= counted
