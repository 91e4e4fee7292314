"""A local HTTP server that misbehaves as an embeddings API, for tests of what the client says.

``BadEmbeddingsServer()`` listens on 127.0.0.1 (a free port) and answers every
``POST .../embeddings`` by its :attr:`~BadEmbeddingsServer.mode`:

* ``"silent"``: read the request, then answer nothing and keep the connection
  open (until :meth:`close`, or ``hold_seconds`` at most);
* ``"trickle"``: send the status line, headers and a promised length, then one
  byte of the body every ``trickle_every`` seconds (never faster than a client's
  read timeout notices; ``hold_seconds`` at most);
* ``"reply"``: answer ``reply(request_json)``, a ``(status, content_type, body)``,
  with the extra ``headers`` (e.g. ``Retry-After``); the default reply is a
  well-formed answer of 384 numbers per input.

It records each request's JSON in :attr:`requests`. Every wait is bounded by
``hold_seconds``, and :meth:`close` ends them at once, so no test outlives it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, str, bytes]


def sync_args(folder: Any, work: Any, url: str, dimension: int) -> list[str]:
    """``rechunk sync FOLDER``'s arguments with the OpenAI-compatible server at ``url`` as the
    embedder (``dimension`` numbers a vector; the packaged model's tokenizer counts
    tokens), its store and cache in the folder ``work``."""
    from rechunk.integrations._st_folder import ModelFolder

    tokenizer = ModelFolder().folder
    embedder = f"openai:team-embedder?tokenizer={tokenizer}&window=512&dimension={dimension}"
    return ["sync", str(folder), "--store", f"qdrant:{work / 'store'}",
            "--cache", str(work / "cache.sqlite"), "--embed-url", url, "--embedder", embedder]  # fmt: skip


def vectors_reply(request: dict[str, Any], dimension: int = 384) -> Reply:
    """A well-formed answer: one non-zero vector of ``dimension`` numbers per input, made
    from the input's text alone, as a model's is (the same text, the same vector, in any
    request: a sync's model check compares them)."""
    inputs = request.get("input", [])
    texts = [inputs] if isinstance(inputs, str) else list(inputs)
    data = [
        {"object": "embedding", "index": i, "embedding": _text_vector(str(text), dimension)}
        for i, text in enumerate(texts)
    ]
    count = len(texts)
    body = {"object": "list", "data": data, "model": request.get("model"),
            "usage": {"prompt_tokens": count, "total_tokens": count}}  # fmt: skip
    return 200, "application/json", json.dumps(body).encode()


def _text_vector(text: str, dimension: int) -> list[float]:
    """A unit vector seeded by ``text``'s sha256."""
    draw = random.Random(hashlib.sha256(text.encode()).digest())
    row = [draw.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = math.sqrt(sum(x * x for x in row))
    return [x / norm for x in row]


def json_reply(body: Any, status: int = 200) -> Callable[[dict[str, Any]], Reply]:
    """A reply of this JSON whatever the request."""
    return lambda request: (status, "application/json", json.dumps(body).encode())


class BadEmbeddingsServer:
    def __init__(
        self,
        mode: str = "reply",
        reply: Callable[[dict[str, Any]], Reply] = vectors_reply,
        *,
        hold_seconds: float = 20.0,
        trickle_every: float = 0.2,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.mode = mode
        self.reply = reply
        self.headers = dict(headers or {})
        self.hold_seconds = hold_seconds
        self.trickle_every = trickle_every
        self.requests: list[dict[str, Any]] = []
        #: when the first request came (time.monotonic()): a deadline counts from there,
        #: not from a client process's start, which a loaded machine makes slow
        self.first_request: float | None = None
        self._closing = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    request = {}
                with server._lock:
                    if server.first_request is None:
                        server.first_request = time.monotonic()
                    server.requests.append(request)
                server._answer(self, request)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *args: None  # type: ignore[method-assign]  # client gave up
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        """Stop serving and end every held connection."""
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> BadEmbeddingsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _answer(self, handler: Any, request: dict[str, Any]) -> None:
        if self.mode == "silent":
            self._closing.wait(self.hold_seconds)
            self._hang_up(handler)
            return
        if self.mode == "trickle":
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", "100000")
            handler.end_headers()
            until = time.monotonic() + self.hold_seconds
            with contextlib.suppress(OSError):
                while time.monotonic() < until and not self._closing.wait(self.trickle_every):
                    handler.wfile.write(b" ")
                    handler.wfile.flush()
            self._hang_up(handler)
            return
        status, content_type, body = self.reply(request)
        handler.send_response(status)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(body)))
        for name, value in self.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    @staticmethod
    def _hang_up(handler: Any) -> None:
        handler.close_connection = True
        with contextlib.suppress(OSError):
            handler.connection.shutdown(socket.SHUT_RDWR)
