"""Fast JSON responses (orjson) and the error body shared by every error."""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi.responses import Response
from pydantic import BaseModel


def encode(content: Any) -> bytes:
    """JSON bytes: orjson, else the stdlib. Input bounds (domain/bounds.py) keep new values
    within what orjson writes; a value stored before them (nested deeper than orjson's 254
    levels, an integer beyond 64 bits) was written by the store's stdlib fallback, and must
    not make every page that shows it fail."""
    try:
        return orjson.dumps(content)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(content, ensure_ascii=False, default=str).encode()


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return encode(content)


class ErrorItem(BaseModel):
    loc: str
    message: str
    code: str


class ErrorBody(BaseModel):
    detail: str
    errors: list[ErrorItem] = []


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid, expired or revoked token"},
    404: {"model": ErrorBody, "description": "No such resource (or not visible to the caller)"},
    422: {"model": ErrorBody, "description": "Validation failed; every error has a JSON pointer"},
}
