"""A real loopback HTTP server for tests and benchmarks: real sockets, real bytes.

Routes map a path to either a static response or a handler function that writes the response
itself (for validators, drips, redirects). Every request is recorded with its headers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[["RequestHandler"], None]


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    handler: Handler | None = None
    latency_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    at: float


class RequestHandler(BaseHTTPRequestHandler):
    server: FeedServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        return

    def do_GET(self) -> None:
        srv = self.server
        path = self.path.split("?", 1)[0]
        srv.record(
            RecordedRequest(
                self.path, {k.lower(): v for k, v in self.headers.items()}, time.monotonic()
            )
        )
        route = srv.routes.get(path) or srv.routes.get(self.path)
        if route is None:
            self.send_simple(404, b"not found", {"Content-Type": "text/plain"})
            return
        if route.latency_s:
            time.sleep(route.latency_s)
        if route.handler is not None:
            route.handler(self)
            return
        self.send_simple(route.status, route.body, route.headers)

    def send_simple(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        headers = dict(headers or {})
        if status != 304 and not any(k.lower() == "content-length" for k in headers):
            headers["Content-Length"] = str(len(body))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if status != 304 and body:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)


class FeedServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RequestHandler)
        self.routes: dict[str, Route] = {}
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def add(
        self,
        path: str,
        body: bytes = b"",
        status: int = 200,
        headers: dict[str, str] | None = None,
        handler: Handler | None = None,
        latency_s: float = 0.0,
    ) -> str:
        if handler is None and headers is None:
            headers = {"Content-Type": "application/rss+xml; charset=utf-8"}
        self.routes[path] = Route(status, body, dict(headers or {}), handler, latency_s)
        return self.url(path)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def requests_for(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0] == path]

    def start(self) -> FeedServer:
        # A short poll interval: stop() (shutdown) waits up to one interval, once per test.
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


# -- handler factories (for validators, drips, redirects, echoes) ----------------------------


def redirect_to(location: str, status: int = 302) -> Handler:
    """A handler answering with a redirect to `location`."""

    def handle(req: RequestHandler) -> None:
        req.send_simple(status, b"", {"Location": location, "Content-Length": "0"})

    return handle


def drip(
    body: bytes,
    interval_s: float = 1.0,
    headers: dict[str, str] | None = None,
    in_headers: bool = False,
) -> Handler:
    """Send `body` one byte per `interval_s` (in the body, or while still sending headers)."""

    def handle(req: RequestHandler) -> None:
        try:
            if in_headers:
                req.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for byte in b"X-Drip: " + b"a" * 200:
                    req.wfile.write(bytes([byte]))
                    req.wfile.flush()
                    time.sleep(interval_s)
                return
            req.send_response(200)
            for key, value in (headers or {"Content-Type": "application/rss+xml"}).items():
                req.send_header(key, value)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            for byte in body:
                req.wfile.write(bytes([byte]))
                req.wfile.flush()
                time.sleep(interval_s)
        except (BrokenPipeError, ConnectionResetError):
            return

    return handle


def conditional(
    body: bytes, etag: str, last_modified: str, content_type: str = "application/rss+xml"
) -> Handler:
    """Answer 304 when If-None-Match or If-Modified-Since matches, else 200 with validators."""

    def handle(req: RequestHandler) -> None:
        validators = {"ETag": etag, "Last-Modified": last_modified}
        if (
            req.headers.get("If-None-Match") == etag
            or req.headers.get("If-Modified-Since") == last_modified
        ):
            req.send_simple(304, b"", validators)
            return
        req.send_simple(200, body, {"Content-Type": content_type, **validators})

    return handle


def echo_headers(status: int = 500, names: tuple[str, ...] = ("authorization",)) -> Handler:
    """Answer `status` with a body that echoes the named request headers (a leaky error page)."""

    def handle(req: RequestHandler) -> None:
        lines = "".join(f"{k}: {v}\n" for k, v in req.headers.items() if k.lower() in names)
        req.send_simple(status, lines.encode(), {"Content-Type": "text/plain"})

    return handle


def streamed(chunks: Callable[[], Any], headers: dict[str, str]) -> Handler:
    """Send a 200 whose body is written chunk by chunk without Content-Length (close-delimited)."""

    def handle(req: RequestHandler) -> None:
        req.send_response(200)
        for key, value in headers.items():
            req.send_header(key, value)
        req.send_header("Connection", "close")
        req.end_headers()
        req.close_connection = True
        try:
            for chunk in chunks():
                req.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return

    return handle
