"""The one place where exceptions become HTTP responses."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from dhub.api.responses import JSON
from dhub.domain.errors import DhubError, FieldError, InvalidInput, Unauthenticated
from dhub.domain.pointers import join

log = logging.getLogger("dhub.api")


def _invalid(exc: InvalidInput) -> JSON:
    return JSON(
        {"detail": exc.detail, "errors": [e.as_dict() for e in exc.errors]}, status_code=422
    )


async def _dhub_error(_: Request, exc: Exception) -> JSON:
    assert isinstance(exc, DhubError)
    if isinstance(exc, InvalidInput):
        return _invalid(exc)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
    return JSON({"detail": exc.detail, "errors": []}, exc.status_code, headers=headers)


async def _request_invalid(_: Request, exc: Exception) -> JSON:
    """FastAPI's own parameter validation, reshaped into our error body."""
    assert isinstance(exc, RequestValidationError)
    errors = []
    for err in exc.errors():
        loc = [s for s in err.get("loc", ()) if isinstance(s, str | int)]
        msg = str(err.get("msg", "is invalid"))
        field = str(loc[-1]) if loc else "request"
        errors.append(FieldError(join(*loc), f"'{field}': {msg}.", str(err.get("type"))))
    return _invalid(InvalidInput(errors))


async def _http_error(_: Request, exc: Exception) -> JSON:
    assert isinstance(exc, StarletteHTTPException)
    return JSON({"detail": exc.detail, "errors": []}, exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSON:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSON(
        {"detail": "Internal server error; the server log has the details.", "errors": []}, 500
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(DhubError, _dhub_error)
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
