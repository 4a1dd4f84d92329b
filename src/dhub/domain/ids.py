"""Server-assigned identifiers: ``<category>.<ulid>``, lowercase, sortable by creation time."""

from __future__ import annotations

import os
import time

PUBLIC = "public.all"  # the principal every authenticated user acts as

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase


class _Monotonic:
    """The last ULID value made by this process: the next one made in the same millisecond
    (or after the clock stepped back) is that one plus one, so ids made one after another
    sort in that order (lists page by id)."""

    last = 0


def ulid(now_ms: int | None = None) -> str:
    """A 26-character ULID: 48 bits of milliseconds then 80 random bits; monotonic within
    this process unless ``now_ms`` is given."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    if now_ms is None:
        if value >> 80 <= _Monotonic.last >> 80:
            value = _Monotonic.last + 1
        _Monotonic.last = value
    chars = []
    for _ in range(26):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def new_id(category: str) -> str:
    return f"{category}.{ulid()}"


def now_ms() -> int:
    return int(time.time() * 1000)
