"""Remembering what was computed from an object, by the object's identity.

A react loop sends its whole transcript at every model call, so each message would be
converted and counted again at every call: O(n²) over a run. The engine never changes a
message once it is in the transcript, so what was derived from it the first time holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByIdentity(Generic[K, V]):
    """``derive(key)``, computed once per key object (up to ``size`` keys; the oldest are
    forgotten first). Only for keys that are never changed after they are first seen. The key
    is held with its value, so its id cannot be reused by another object while remembered."""

    def __init__(self, derive: Callable[[K], V], size: int = 8192) -> None:
        self._derive = derive
        self._size = size
        self._seen: dict[int, tuple[K, V]] = {}

    def __call__(self, key: K) -> V:
        found = self._seen.get(id(key))
        if found is not None and found[0] is key:
            return found[1]  # the hot path: one lookup, no bookkeeping
        value = self._derive(key)
        if len(self._seen) >= self._size:
            del self._seen[next(iter(self._seen))]  # insertion order: the oldest
        self._seen[id(key)] = (key, value)
        return value
