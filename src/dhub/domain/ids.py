"""Server-assigned identifiers: ``<category>.<ulid>``, lowercase, sortable by creation time."""

from __future__ import annotations

import os
import time

PUBLIC = "public.all"  # the principal every authenticated user acts as

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase


def ulid(now_ms: int | None = None) -> str:
    """A 26-character ULID: 48 bits of milliseconds then 80 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def new_id(category: str) -> str:
    return f"{category}.{ulid()}"


def now_ms() -> int:
    return int(time.time() * 1000)
