"""``GET /metrics`` (Prometheus text) and the middleware that counts HTTP requests
(docs/observability.md, "Metrics"; what is counted: observability/metrics.py).

``DHUB_METRICS`` decides who may scrape: ``off`` (the default) answers 404, as for any path
the server does not have; ``on`` answers anyone who reaches the port (a scraper on a private
network); ``token`` asks for ``Authorization: Bearer`` with ``DHUB_METRICS_TOKEN`` or an admin's
API token. The route is outside /api/v1 and out of the OpenAPI document: it is for Prometheus,
not for the API's clients.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dhub.domain.errors import Forbidden, Unauthenticated
from dhub.observability import metrics
from dhub.services.gauges import gauges

log = logging.getLogger(__name__)

PATH = "/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


@dataclass(frozen=True)
class MetricsAccess:
    """Who may scrape this app (app.state.metrics)."""

    mode: str = "off"
    token: str | None = field(default=None, repr=False)


async def endpoint(request: Request) -> Response:
    access: MetricsAccess = getattr(request.app.state, "metrics", MetricsAccess())
    if access.mode == "off":
        raise HTTPException(404)  # what any path the server does not have answers
    if access.mode == "token":
        await _check_token(request, access)
    runtime = getattr(request.app.state, "runtime", None)
    snapshot = None
    if runtime is not None:
        snapshot = await gauges(runtime.db, distributed=runtime.queue is not None)
    return Response(metrics.exposition(snapshot), media_type=CONTENT_TYPE)


async def _check_token(request: Request, access: MetricsAccess) -> None:
    header = request.headers.get("authorization")
    scheme, _, given = (header or "").partition(" ")
    dedicated = access.token is not None and scheme.lower() == "bearer"
    if dedicated and hmac.compare_digest(given.strip().encode(), str(access.token).encode()):
        return
    try:
        who = await request.app.state.services.auth.authenticate(header)
    except Unauthenticated as exc:
        raise Unauthenticated(
            f"{exc.detail} /metrics takes DHUB_METRICS_TOKEN or an admin's API token."
        ) from exc
    if not who.is_admin:
        raise Forbidden("/metrics takes DHUB_METRICS_TOKEN or an admin's API token.")


class HttpMetrics:
    """Counts each request by method, route template (``/api/v1/runs/{run_id}``, never the
    path itself: ids would make a series each) and status, and times it to the end of its
    response. A path no route matches is ``unmatched``; an unusual method ``OTHER``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not metrics.recording():
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500  # unless a response starts: an exception the server answers with 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            seconds = time.perf_counter() - began
            metrics.http_request(method, _template(scope), str(status), seconds)


def _template(scope: Scope) -> str:
    """The matched route's template, set by the router on the scope it was given. FastAPI
    0.16x keeps an included router whole: its ``scope["route"]`` is the route as the router
    declared it (``/runs/{run_id}``), the template with the router's prefix is on the
    effective route context it also leaves there."""
    inner = scope.get("fastapi")
    context: Any = inner.get("effective_route_context") if isinstance(inner, dict) else None
    path = getattr(context, "path_format", None) or getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else "unmatched"
