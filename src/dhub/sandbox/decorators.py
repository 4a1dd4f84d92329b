"""Function decorators: platform behaviour around a call of the entry point (DESIGN.md 5).

``{decorator, name, arguments}`` entries of a function spec, checked at create time
(domain/function_spec.py), become a ``Policy`` applied here, on the server side of the sandbox, so
that they hold across calls and workers:

- ``retry`` {attempts, delay, backoff}: up to ``attempts`` tries in all, waiting ``delay`` times
  (1, n or 2^(n-1) for fixed, linear, exponential) before retry n; a call that failed with an
  exception or a timeout is retried, one with bad input or a missing dependency is not.
- ``timeout`` {seconds}: the call's wall time, when shorter than the node's own timeout.
- ``cache`` {ttl}: a successful result is reused for ``ttl`` seconds for the same arguments.
- ``rate_limit`` {calls, period}: at most ``calls`` calls start in any ``period`` seconds; a
  call beyond that waits for a slot.

Time comes from a clock port, so tests drive all of it with a fake clock.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from dhub.engine.actions import backoff
from dhub.sandbox.worker import FunctionResult

RETRYABLE = frozenset({"exception", "timeout"})
CACHE_ENTRIES = 4096


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep_until(self, at: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep_until(self, at: float) -> None:
        await asyncio.sleep(max(0.0, at - time.time()))


@dataclass(frozen=True)
class Policy:
    attempts: int = 1
    delay: float = 0.0
    backoff: str = "fixed"
    timeout: float | None = None
    cache_ttl: float | None = None
    rate: tuple[int, float] | None = None  # calls, period

    @classmethod
    def of(cls, decorators: Iterable[dict[str, Any]]) -> Policy:
        """The policy of validated decorator entries (later entries of a kind win)."""
        fields: dict[str, Any] = {}
        for entry in decorators:
            args = entry.get("arguments") or {}
            kind = entry.get("decorator")
            if kind == "retry":
                fields["attempts"] = int(args.get("attempts", 1))
                fields["delay"] = float(args.get("delay", 0))
                fields["backoff"] = str(args.get("backoff", "fixed"))
            elif kind == "timeout":
                fields["timeout"] = float(args["seconds"])
            elif kind == "cache":
                fields["cache_ttl"] = float(args["ttl"])
            elif kind == "rate_limit":
                fields["rate"] = (int(args["calls"]), float(args["period"]))
        return cls(**fields)

    def wait_before(self, retry: int) -> float:
        return backoff(self.backoff, self.delay, retry)


Invoke = Callable[[float], Awaitable[FunctionResult]]


class Decorators:
    """The state decorators keep between calls (cache entries, rate windows), per function."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._cache: OrderedDict[tuple[Any, str], tuple[float, FunctionResult]] = OrderedDict()
        self._windows: dict[Any, deque[float]] = {}
        self._gates: dict[Any, asyncio.Lock] = {}

    async def run(
        self, key: Any, policy: Policy, inputs: dict[str, Any], seconds: float, invoke: Invoke
    ) -> FunctionResult:
        if policy.timeout is not None:
            seconds = min(seconds, policy.timeout)
        cache_key = (key, json.dumps(inputs, sort_keys=True)) if policy.cache_ttl else None
        if cache_key is not None:
            hit = self._cached(cache_key)
            if hit is not None:
                return hit
        result = await self._tries(key, policy, seconds, invoke)
        if cache_key is not None and result.ok and policy.cache_ttl:
            self._store(cache_key, result, policy.cache_ttl)
        return result

    async def _tries(
        self, key: Any, policy: Policy, seconds: float, invoke: Invoke
    ) -> FunctionResult:
        attempt = 1
        while True:
            if policy.rate is not None:
                await self._slot(key, *policy.rate)
            result = await invoke(seconds)
            if result.ok or result.kind not in RETRYABLE or attempt >= policy.attempts:
                return result
            await self.clock.sleep_until(self.clock.now() + policy.wait_before(attempt))
            attempt += 1

    def _cached(self, cache_key: tuple[Any, str]) -> FunctionResult | None:
        entry = self._cache.get(cache_key)
        if entry is None:
            return None
        expires, result = entry
        if self.clock.now() >= expires:
            del self._cache[cache_key]
            return None
        self._cache.move_to_end(cache_key)
        return result

    def _store(self, cache_key: tuple[Any, str], result: FunctionResult, ttl: float) -> None:
        self._cache[cache_key] = (self.clock.now() + ttl, result)
        self._cache.move_to_end(cache_key)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)

    async def _slot(self, key: Any, calls: int, period: float) -> None:
        """Wait until fewer than ``calls`` calls started in the last ``period`` seconds, then
        count this one. One waiter at a time per function, so slots go in arrival order."""
        gate = self._gates.setdefault(key, asyncio.Lock())
        async with gate:
            window = self._windows.setdefault(key, deque())
            while True:
                now = self.clock.now()
                while window and window[0] <= now - period:
                    window.popleft()
                if len(window) < calls:
                    window.append(now)
                    return
                await self.clock.sleep_until(window[0] + period)
