"""Raw HTTP requests straight into an ASGI app, for input an HTTP client refuses to build.

httpx will not send a query over 64 KiB, a NUL byte in a header or path, or anything else a
well-behaved client never sends; an attacker's client does (and ASGI servers such as uvicorn
with httptools pass such requests on). ``send_raw`` builds the ASGI scope itself, in the
running TestClient's event loop, so the app is the one whose lifespan the client started.

A streaming response (an event stream) is read up to its first body chunk and then cut off:
what matters here is the status the server chose, and a live stream would not end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Message


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def send_raw(
    client: TestClient,
    method: str,
    path: str,
    query: bytes = b"",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> RawResponse:
    """``path`` is the decoded path (it may hold any character); ``query`` the raw query
    string; ``headers`` are sent as given (latin-1), after the client's own (authorization)."""
    merged = {k.lower(): v for k, v in client.headers.items() if k.lower() == "authorization"}
    merged.update({k.lower(): v for k, v in (headers or {}).items()})
    if body:
        merged.setdefault("content-type", "application/json")
        merged["content-length"] = str(len(body))
    raw_headers = [(b"host", b"testserver")]
    raw_headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merged.items()]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": quote(path).encode(), "root_path": "",
        "query_string": query, "headers": raw_headers, "client": ("testclient", 50000),
        "server": ("testserver", 80), "state": {},
    }  # fmt: skip
    portal = client.portal
    assert portal is not None, "send_raw needs a started TestClient (use it as a context)"
    response: RawResponse = portal.call(_call, client.app, scope, body)
    return response


async def _call(app: ASGIApp, scope: dict[str, Any], body: bytes) -> RawResponse:
    started: dict[str, Any] = {}
    chunks: list[bytes] = []
    finished = anyio.Event()
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            # The whole body, or the first chunk of a stream: enough to judge the answer.
            if not message.get("more_body", False) or chunks[-1]:
                finished.set()

    async def run() -> None:
        try:
            await app(scope, receive, send)
        except Exception:  # an escaping error is a 500, as a server would answer
            if not started:
                started.update({"status": 500, "headers": []})
        finished.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        with anyio.fail_after(60):
            await finished.wait()
        tasks.cancel_scope.cancel()
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in started.get("headers", [])}
    return RawResponse(int(started.get("status", 0)), headers, b"".join(chunks))
