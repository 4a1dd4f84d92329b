"""Fast JSON responses (orjson) and the error body shared by every error."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response
from pydantic import BaseModel


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


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
