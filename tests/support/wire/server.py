"""A real HTTP/1.1 server on 127.0.0.1 that answers from a script: the transport of the fakes.

The server runs in a background thread (one thread per connection, so concurrent requests and
keep-alive work as with a real API) on an ephemeral port. Tests queue *replies*; every request
to a model endpoint takes the next one. A reply renders to a :class:`Rendered` response: a whole
body, or Server-Sent Events written with chunked transfer encoding, one chunk per event, flushed
as written. A rendered stream can be cut (the connection is closed without the terminating
chunk, as when a proxy or the provider drops it), stalled (nothing more is sent until the client
gives up or the server stops) or slowed down (a delay before each event).

Every request is recorded (:class:`RecordedRequest`: method, path, headers, parsed JSON body).
Anything the fake itself could not do (no reply left, a reply that failed to render, an unknown
path) is answered with a 400 that the SDKs do not retry, and listed in ``server.errors``; the
fixtures fail the test on teardown when that list is not empty.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs, urlsplit

SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
STALL_SECONDS = 30.0  # a stalled stream gives up after this long (or when the server stops)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str  # without the query string
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # names lower-cased
    raw: bytes
    body: Any  # the parsed JSON body, or None when there was none or it was not JSON
    received_at: float  # time.monotonic()

    @property
    def json(self) -> dict[str, Any]:
        """The JSON object body (an assertion error when the body is not a JSON object)."""
        assert isinstance(self.body, dict), f"not a JSON object body: {self.raw[:200]!r}"
        return self.body

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


@dataclass(frozen=True)
class Rendered:
    """What the server writes for one request.

    ``body`` is sent whole with a Content-Length; ``events`` (encoded SSE frames) are streamed
    with chunked encoding. ``cut_after``: events (or, for a body, bytes) written before the
    connection is closed without completing the response. ``stall_after``: events written
    before the server goes silent and holds the connection open.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    events: Sequence[bytes] | None = None
    cut_after: int | None = None
    stall_after: int | None = None
    delay: float = 0.0  # seconds before each event


@runtime_checkable
class Reply(Protocol):
    """Anything a test can queue: it renders the response to one recorded request."""

    def render(self, request: RecordedRequest) -> Rendered: ...


ReplyFactory = Callable[[RecordedRequest], Reply]
Scripted = Reply | ReplyFactory
Handler = Callable[[RecordedRequest], Rendered]


def encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def sse_frame(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event: ``event: NAME`` (optional) then ``data: JSON`` (or a raw str)."""
    text = data if isinstance(data, str) else encode_json(data).decode()
    lines = [f"event: {event}"] if event is not None else []
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def split_text(text: str | Sequence[str], size: int) -> list[str]:
    """A string cut into pieces of ``size`` characters; a sequence is taken as the pieces."""
    if not isinstance(text, str):
        return list(text)
    if size <= 0 or not text:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- generic replies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JSONReply:
    """A whole JSON response (``body`` as ``str``/``bytes`` is sent verbatim, e.g. broken JSON).

    ``cut=True`` sends the headers and half of the body, then closes the connection.
    """

    body: Any
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    cut: bool = False

    def render(self, request: RecordedRequest) -> Rendered:
        if isinstance(self.body, bytes):
            data = self.body
        elif isinstance(self.body, str):
            data = self.body.encode()
        else:
            data = encode_json(self.body)
        headers = {"content-type": "application/json", **self.headers}
        return Rendered(self.status, headers, data, cut_after=len(data) // 2 if self.cut else None)


@dataclass(frozen=True)
class SSEEvent:
    data: Any  # JSON-encoded unless a str (sent as is: "[DONE]", broken JSON, ...)
    event: str | None = None


@dataclass(frozen=True)
class SSEReply:
    """A stream of exactly these events, for wire shapes the provider replies do not produce."""

    events: Sequence[SSEEvent | Mapping[str, Any] | str]
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    stall_after: int | None = None
    delay: float = 0.0

    def render(self, request: RecordedRequest) -> Rendered:
        frames = [
            sse_frame(e.data, e.event) if isinstance(e, SSEEvent) else sse_frame(e)
            for e in self.events
        ]
        headers = {**SSE_HEADERS, **self.headers}
        return Rendered(
            self.status, headers, events=frames, cut_after=self.cut_after,
            stall_after=self.stall_after, delay=self.delay,
        )  # fmt: skip


# -- the server --------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, wire: WireServer) -> None:
        self.wire = wire
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-response is routine here


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # As real API servers do: each frame leaves at once. Without it, Nagle's algorithm
        # meeting the client's delayed ACK holds some responses back ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def _handle(self) -> None:
        wire = self.server.wire
        raw = self._read_body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parts = urlsplit(self.path)
        request = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
            received_at=time.monotonic(),
        )
        rendered = wire.respond(request)
        try:
            if rendered.events is not None:
                self._write_stream(rendered)
            else:
                self._write_body(rendered)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _start(self, rendered: Rendered, extra: Mapping[str, str]) -> None:
        self.send_response(rendered.status)
        for name, value in {**rendered.headers, **extra}.items():
            self.send_header(name, value)
        self.end_headers()

    def _cut(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

    def _write_body(self, rendered: Rendered) -> None:
        data = rendered.body or b""
        self._start(rendered, {"content-length": str(len(data))})
        if rendered.cut_after is not None:
            self.wfile.write(data[: rendered.cut_after])
            self._cut()
            return
        self.wfile.write(data)

    def _write_stream(self, rendered: Rendered) -> None:
        stopped = self.server.wire.stopped
        self._start(rendered, {"transfer-encoding": "chunked"})
        for index, frame in enumerate(rendered.events or ()):
            if rendered.cut_after is not None and index >= rendered.cut_after:
                self._cut()
                return
            if rendered.stall_after is not None and index >= rendered.stall_after:
                stopped.wait(STALL_SECONDS)
                self._cut()
                return
            if rendered.delay and stopped.wait(rendered.delay):
                self._cut()
                return
            self.wfile.write(b"%X\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        if rendered.cut_after is not None or rendered.stall_after is not None:
            # asked to fail after the last event: still no terminating chunk
            if rendered.stall_after is not None:
                stopped.wait(STALL_SECONDS)
            self._cut()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class WireServer:
    """The HTTP machinery; the provider fakes add routes and their reply types.

    ``queue(*replies)`` scripts the next responses of the model endpoints (first in, first
    out; a callable taking the :class:`RecordedRequest` may stand in for a reply and build it
    from the request). ``requests`` lists everything received; ``errors`` what the fake could
    not answer as scripted.
    """

    api_path = "/v1"

    def __init__(self, *, api_key: str | None = None, prefix: str | None = None) -> None:
        self.api_key = api_key
        self.prefix = self.api_path if prefix is None else prefix.rstrip("/")
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._replies: deque[Scripted] = deque()
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._routes: list[tuple[str, str, Handler]] = []
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> WireServer:
        self._http = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{self.port}", daemon=True,
        )  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        http, self._http = self._http, None
        if http is None:
            return
        self.stopped.set()
        http.shutdown()
        with http.connections_lock:
            connections = list(http.open_connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 5
        while http.open_connections and time.monotonic() < deadline:
            time.sleep(0.01)
        http.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._http is not None, "the server is not started"
        return int(self._http.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What the SDK takes as ``base_url``."""
        return f"{self.origin}{self.prefix}"

    # -- the script --

    def queue(self, *replies: Scripted) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Queued replies not yet used."""
        with self._lock:
            return len(self._replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def last(self) -> RecordedRequest:
        with self._lock:
            assert self._requests, "no request received"
            return self._requests[-1]

    @property
    def errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    def requests_to(self, suffix: str, method: str = "POST") -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method and r.path.endswith(suffix)]

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self._requests.clear()
            self._errors.clear()

    # -- routing --

    def route(self, method: str, suffix: str, handler: Handler) -> None:
        """``handler`` answers ``method`` requests whose path ends with ``suffix``."""
        self._routes.append((method, suffix, handler))
        self._routes.sort(key=lambda r: -len(r[1]))  # the most specific suffix wins

    def scripted(self, request: RecordedRequest) -> Rendered:
        """The next queued reply, rendered for ``request``."""
        with self._lock:
            item = self._replies.popleft() if self._replies else None
        if item is None:
            return self.fail(request, "no scripted reply left")
        reply = item if isinstance(item, Reply) else item(request)
        return reply.render(request)

    def fail(self, request: RecordedRequest, why: str) -> Rendered:
        message = f"wire fake: {why} for {request.method} {request.path}"
        with self._lock:
            self._errors.append(message)
        return self.error_response(400, message, {"x-should-retry": "false"})

    def error_response(self, status: int, message: str, headers: Mapping[str, str]) -> Rendered:
        """The provider's error body; overridden by each fake."""
        return JSONReply({"error": {"message": message}}, status, headers).render(_NO_REQUEST)

    def authorize(self, request: RecordedRequest) -> Rendered | None:
        """A 401 when the request lacks the key; overridden by each fake."""
        return None

    def respond(self, request: RecordedRequest) -> Rendered:
        with self._lock:
            self._requests.append(request)
        try:
            denied = self.authorize(request)
            if denied is not None:
                return denied
            for method, suffix, handler in self._routes:
                if request.method == method and request.path.endswith(suffix):
                    return handler(request)
            return self.fail(request, "no such endpoint")
        except Exception as exc:
            return self.fail(request, f"the reply failed to render ({exc!r})\n" + _tb())


def _tb() -> str:
    return "".join(traceback.format_exc(limit=8))


_NO_REQUEST = RecordedRequest("", "", {}, {}, b"", None, 0.0)
