"""Cursors of an ontology's object pages: the last (type, key) of a search page, the last
key of a page of linked objects, as opaque base64 JSON; anything the server did not issue is
refused with the same sentence as every other cursor."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from dhub.domain.errors import FieldError, InvalidInput


def encode_cursor(after: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"after": after})).decode().rstrip("=")


def _decoded(cursor: Any) -> Any:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return orjson.loads(raw)["after"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None


def _bad_cursor(at: str) -> InvalidInput:
    return InvalidInput(
        [
            FieldError(
                at,
                "This cursor is not one the server issued: pass next_cursor from the previous "
                "page unchanged, or leave cursor out to start again.",
                "invalid_cursor",
            )
        ]
    )


def _text(value: Any) -> bool:
    return isinstance(value, str) and "\x00" not in value  # NUL: PostgreSQL cannot compare it


def search_cursor(cursor: Any) -> tuple[str, str]:
    after = _decoded(cursor) if isinstance(cursor, str) else None
    if not isinstance(after, list) or len(after) != 2 or not all(_text(a) for a in after):
        raise _bad_cursor("/cursor")
    return after[0], after[1]


def follow_cursor(cursor: str) -> str:
    after = _decoded(cursor)
    if not _text(after):
        raise _bad_cursor("/query/cursor")
    assert isinstance(after, str)
    return after
