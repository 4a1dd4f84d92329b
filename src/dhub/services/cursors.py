"""The cursors of list pages: the id of the last row a page showed, opaque to the caller.
A cursor the server did not issue is refused with one message, whatever it holds."""

from __future__ import annotations

import base64
import binascii

import orjson

from dhub.domain.errors import FieldError, InvalidInput


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"after": last_id})).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        after = orjson.loads(raw)["after"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        after = None
    if not isinstance(after, str) or "\x00" in after:  # NUL: PostgreSQL cannot compare it
        raise InvalidInput(
            [
                FieldError(
                    "/query/cursor",
                    "This cursor is not one the server issued: pass next_cursor from the "
                    "previous page unchanged, or leave cursor out to start again.",
                    "invalid_cursor",
                )
            ]
        )
    return after
