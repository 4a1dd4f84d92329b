"""YAML on the wire (docs/api.md#yaml): request bodies sent as YAML, and every JSON response as
YAML to a client that asks for it.

A body whose ``Content-Type`` is ``application/yaml``, ``application/x-yaml``, ``text/yaml``
(or a ``+yaml`` type) is read by domain/yaml_docs.py into the value the same data as JSON gives,
within the same bounds (domain/bounds.py). Responses are converted in one place, a middleware,
so that every JSON body (the ``JSON`` class, the pre-assembled agent bytes, FastAPI's own, the
errors) has its YAML spelling without each route knowing: a request whose ``Accept`` prefers
YAML to JSON gets ``application/yaml``. Requests that do not ask pay one header scan.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dhub.domain import yaml_docs
from dhub.domain.bounds import check_document

YAML_TYPE = "application/yaml"
# Past this size, reading or writing YAML (pure Python, for its checks) leaves the event loop.
_IN_THREAD_BYTES = 64 * 1024


def _media(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def is_yaml(content_type: str | None) -> bool:
    media = _media(content_type or "")
    return media in yaml_docs.MEDIA_TYPES or media.endswith("+yaml")


async def yaml_body(raw: bytes) -> Any:
    """A YAML request body as its JSON value, within the bounds of JSON bodies."""
    if len(raw) > _IN_THREAD_BYTES:
        value = await asyncio.to_thread(yaml_docs.load, raw)
    else:
        value = yaml_docs.load(raw)
    return check_document(value)


def prefers_yaml(accept: str) -> bool:
    """Whether an ``Accept`` header ranks a YAML type above JSON (``*/*`` and
    ``application/*`` count as JSON: it stays the default)."""
    best_yaml = best_json = 0.0
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        media = media.lower()
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if is_yaml(media):
            best_yaml = max(best_yaml, quality)
        elif media in ("application/json", "*/*", "application/*"):
            best_json = max(best_json, quality)
    return best_yaml > 0 and best_yaml > best_json


def to_yaml(body: bytes) -> bytes:
    # The stdlib reads numbers exactly (orjson would round an integer beyond 64 bits).
    return yaml_docs.dump(json.loads(body)).encode()


class YamlResponses:
    """Pure ASGI middleware: a JSON response, as YAML, when the request prefers YAML."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _asks_yaml(scope):
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        chunks: list[bytes] = []

        async def send_yaml(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and _is_json(message):
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            if len(body) > _IN_THREAD_BYTES:
                converted = await asyncio.to_thread(to_yaml, body)
            else:
                converted = to_yaml(body)
            await send({**held, "headers": _yaml_headers(held, len(converted))})
            await send({"type": "http.response.body", "body": converted})

        await self.app(scope, receive, send_yaml)


def _asks_yaml(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"accept":
            return b"yaml" in value and prefers_yaml(value.decode("latin-1"))
    return False


def _is_json(start: Message) -> bool:
    for name, value in start.get("headers", ()):
        if name.lower() == b"content-type":
            return _media(value.decode("latin-1")) == "application/json"
    return False


def _yaml_headers(start: Message, length: int) -> list[tuple[bytes, bytes]]:
    kept = [
        (name, value)
        for name, value in start.get("headers", ())
        if name.lower() not in (b"content-type", b"content-length")
    ]
    return [*kept, (b"content-type", YAML_TYPE.encode()),
            (b"content-length", str(length).encode()), (b"vary", b"Accept")]  # fmt: skip
