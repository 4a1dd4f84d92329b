"""A process's cache of rendered list items (bench/api_latency.py, list 50): bytes kept by
what they were rendered from, least recently used first out, within a budget of bytes.

Nothing is ever invalidated: a key names everything its bytes depend on, so a change anywhere
(in this process or another on the same database) makes a new key, and the old entry ages
out. What goes into a key is the caller's business (services/agents.py, ``page_rendered``).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Hashable, Sequence

DEFAULT_MB = 64  # DHUB_LIST_CACHE_MB: 10,000 agents of the bench's ~2.3 KB each take 23 MB
_ENTRY_OVERHEAD = 200  # bytes an entry costs besides its value: key tuple, dict slot, node
_MAX_CALLERS = 10_000  # caller numbers remembered (see ``caller``)


class RenderedCache:
    """Bytes by key, within ``max_bytes`` (values and an estimate of each entry's overhead)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._callers: dict[Hashable, int] = {}
        self._numbers = itertools.count()

    def caller(self, identity: Hashable) -> int:
        """A number standing for ``identity`` in keys: hashing a small int per item is cheaper
        than hashing the identity (a principal and its state) 50 times a page. Numbers are
        never reused, so forgetting them (past ``_MAX_CALLERS``) only costs misses."""
        number = self._callers.get(identity)
        if number is None:
            if len(self._callers) >= _MAX_CALLERS:
                self._callers.clear()
            number = self._callers[identity] = next(self._numbers)
        return number

    def get(self, key: Hashable) -> bytes | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def get_all(self, caller: int, markers: Sequence[tuple[Hashable, ...]]) -> list[bytes] | None:
        """The bytes kept for each of ``markers`` (keyed ``(caller, *marker)``), or None when
        any is missing: one call per page rather than one per item."""
        entries, found = self._entries, []
        for marker in markers:
            key = (caller, *marker)
            value = entries.get(key)
            if value is None:
                return None
            entries.move_to_end(key)
            found.append(value)
        return found

    def put(self, key: Hashable, value: bytes) -> None:
        cost = len(value) + _ENTRY_OVERHEAD
        if cost > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.size -= len(old) + _ENTRY_OVERHEAD
        self._entries[key] = value
        self.size += cost
        while self.size > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.size -= len(dropped) + _ENTRY_OVERHEAD

    def __len__(self) -> int:
        return len(self._entries)
