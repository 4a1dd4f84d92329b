"""The one place where exceptions become HTTP responses: dhub's error body, or OpenAI's under
/v1 (the OpenAI-compatible API, docs/openai.md), so OpenAI's clients raise their own errors."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from dhub.api.responses import JSON
from dhub.domain.errors import DhubError, FieldError, InvalidInput, Unauthenticated
from dhub.domain.pointers import join
from dhub.services.types import DATABASE_ERRORS, database_unavailable

log = logging.getLogger("dhub.api")


OPENAI_PREFIX = "/v1/"
# OpenAI's error ``type`` and, when the error does not name one, ``code`` for each status.
_OPENAI_KINDS = {
    400: ("invalid_request_error", "invalid_value"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
}


def _openai(request: Request) -> bool:
    return request.url.path.startswith(OPENAI_PREFIX)


def _param(loc: str) -> str | None:
    """A JSON pointer as OpenAI names a parameter: ``/messages/2/content`` is
    ``messages[2].content``."""
    name = ""
    for part in loc.strip("/").split("/"):
        if not part:
            continue
        name += f"[{part}]" if part.isdigit() else f".{part}" if name else part
    return name or None


def _openai_error(
    status: int, message: str, param: str | None = None, code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSON:  # fmt: skip
    kind, default = _OPENAI_KINDS.get(status, ("server_error", "server_error"))
    body = {"message": message, "type": kind, "param": param, "code": code or default}
    return JSON({"error": body}, status, headers=headers)


def _openai_dhub_error(exc: DhubError) -> JSON:
    if isinstance(exc, InvalidInput):  # OpenAI's clients expect 400 for bad input
        first = exc.errors[0] if exc.errors else None
        param = _param(first.loc) if first else None
        message = first.message if first and len(exc.errors) == 1 else exc.detail
        return _openai_error(400, message, param, first.code if first else None)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
    param, code = getattr(exc, "param", None), getattr(exc, "code", None)
    return _openai_error(exc.status_code, exc.detail, param, code, headers)


def _invalid(exc: InvalidInput) -> JSON:
    return JSON(
        {"detail": exc.detail, "errors": [e.as_dict() for e in exc.errors]}, status_code=422
    )


async def _dhub_error(request: Request, exc: Exception) -> JSON:
    assert isinstance(exc, DhubError)
    if _openai(request):
        return _openai_dhub_error(exc)
    if isinstance(exc, InvalidInput):
        return _invalid(exc)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
    return JSON({"detail": exc.detail, "errors": []}, exc.status_code, headers=headers)


async def _request_invalid(request: Request, exc: Exception) -> JSON:
    """FastAPI's own parameter validation, reshaped into our error body."""
    assert isinstance(exc, RequestValidationError)
    errors = []
    for err in exc.errors():
        loc = [s for s in err.get("loc", ()) if isinstance(s, str | int)]
        msg = str(err.get("msg", "is invalid"))
        field = str(loc[-1]) if loc else "request"
        errors.append(FieldError(join(*loc), f"'{field}': {msg}.", str(err.get("type"))))
    if _openai(request):
        return _openai_dhub_error(InvalidInput(errors))
    return _invalid(InvalidInput(errors))


async def _http_error(request: Request, exc: Exception) -> JSON:
    assert isinstance(exc, StarletteHTTPException)
    if _openai(request):
        return _openai_error(exc.status_code, str(exc.detail), headers=exc.headers)
    return JSON({"detail": exc.detail, "errors": []}, exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSON:
    why = database_unavailable(exc)  # the database's own errors, or what was raised from one
    if why is not None:
        return _database_unavailable(request, why)
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    if _openai(request):
        return _openai_error(500, "Internal server error; the server log has the details.")
    return JSON(
        {"detail": "Internal server error; the server log has the details.", "errors": []}, 500
    )


def _database_unavailable(request: Request, why: str) -> JSON:
    """The database took no connection (refused, full, restarting; or this process's pool is
    busy): a passing condition, so 503 and when to try again, not a 500 and a traceback."""
    log.warning(
        "database unavailable on %s %s: %s (docs/deploy.md: max_connections against the "
        "processes' pools)", request.method, request.url.path, why,
    )  # fmt: skip
    message = "The database is not taking connections right now; try again in a moment."
    headers = {"Retry-After": "1"}
    if _openai(request):
        return _openai_error(503, message, headers=headers)
    return JSON({"detail": message, "errors": []}, 503, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(DhubError, _dhub_error)
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    # The same handler by class: Starlette re-raises what reaches the Exception handler after
    # answering (the server then logs it again), but not what a class's handler answered.
    for kind in DATABASE_ERRORS:
        app.add_exception_handler(kind, _unexpected)
    app.add_exception_handler(Exception, _unexpected)
