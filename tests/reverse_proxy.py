"""A reverse proxy on 127.0.0.1 for tests of servers behind one (a path prefix, a token).

``ReverseProxy(upstream, route)`` listens on a free port and, for each request, asks
``route(path, headers)``: a path to forward the request to on the server at port
``upstream`` (its answer passed back as it came), or ``(status, body)`` to answer itself
(a JSON body, or an empty one).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"
#: what a route answers: a path to forward to, or the status and body of its own answer
Route = Callable[[str, Message], "str | tuple[int, bytes]"]
#: headers of one hop only, left out both ways (the length is the body's own)
_HOP = ("host", "connection", "content-length", "transfer-encoding")


class ReverseProxy:
    """See the module's doc; :meth:`close` stops it."""

    def __init__(self, upstream: int | None, route: Route) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                where = route(self.path, self.headers)
                if not isinstance(where, str):
                    self.reply(*where, [])
                    return
                assert upstream is not None, "a route with no upstream forwards nothing"
                server = http.client.HTTPConnection(HOST, upstream, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                server.request(self.command, where, body, headers)
                answer = server.getresponse()
                data = answer.read()
                server.close()
                self.reply(answer.status, data, answer.getheaders())

            def reply(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
                self.send_response(status)
                for key, value in headers:
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                if data and not headers:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
