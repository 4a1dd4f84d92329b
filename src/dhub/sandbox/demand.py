"""How many interpreters a function wants: its calls in flight and their recent peak.

The warm pool (pool.py) keeps, per key, about as many workers as that key recently had calls
in flight at once: a steady stream of N concurrent calls reuses N interpreters instead of
starting and ending one per call, and a key whose calls stopped gives its workers up once its
peak has left the window. Pure bookkeeping, no I/O: the clock is passed in.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class Demand:
    """Calls in flight per key, and the highest number of them over the last ``window``
    seconds (a sliding-window maximum: a burst is remembered for ``window``, then forgotten)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._busy: dict[Any, int] = {}
        # key -> (time, level) with levels falling from left to right: the leftmost one not
        # older than the window is the peak (the classic monotonic queue).
        self._marks: dict[Any, deque[tuple[float, int]]] = {}

    def begin(self, key: Any, now: float) -> None:
        level = self._busy.get(key, 0) + 1
        self._busy[key] = level
        marks = self._marks.setdefault(key, deque())
        while marks and marks[-1][1] <= level:
            marks.pop()
        marks.append((now, level))

    def end(self, key: Any) -> None:
        level = self._busy.get(key, 0) - 1
        if level > 0:
            self._busy[key] = level
        else:
            self._busy.pop(key, None)

    def busy(self, key: Any) -> int:
        return self._busy.get(key, 0)

    def peak(self, key: Any, now: float) -> int:
        """The most calls of ``key`` in flight at once within the window (at least those in
        flight now)."""
        marks = self._marks.get(key)
        while marks and marks[0][0] < now - self.window:
            marks.popleft()
        if marks is not None and not marks:
            del self._marks[key]
        return max(marks[0][1] if marks else 0, self.busy(key))

    def known(self, key: Any) -> bool:
        """Whether the key had calls within the window, or has some in flight."""
        return key in self._busy or key in self._marks

    def forget(self, now: float) -> None:
        """Drop what left the window (keys that were called once stay no longer)."""
        for key in list(self._marks):
            self.peak(key, now)
