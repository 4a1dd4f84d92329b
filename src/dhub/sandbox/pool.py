"""The warm pool: sandboxed interpreters started before they are needed (DESIGN.md 5).

Workers are pooled by *key*: one function (its source, entry point, environment and network
option) of one owner (an agent version's node), so nothing a call leaves behind in an
interpreter can reach another agent or user. A call takes an idle worker of its key when there
is one and starts one otherwise; when it takes the last idle one, a replacement starts in the
background, so a steady stream of calls never waits for an interpreter. After the call the
worker goes back to the pool, unless the call timed out, ran out of memory, or its process died:
such a worker is ended, never reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

from dhub.observability import metrics
from dhub.sandbox.worker import FunctionResult, Host, Worker

Starter = Callable[[], Awaitable[tuple[Worker | None, FunctionResult]]]


class WarmPool:
    def __init__(self, idle_per_key: int = 2, idle_total: int = 64, idle_seconds: float = 300.0):
        self._idle_per_key = idle_per_key
        self._idle_total = idle_total
        self._idle_seconds = idle_seconds
        # key -> idle workers with the time each became idle; keys in least-recent-use order
        self._idle: OrderedDict[Any, deque[tuple[Worker, float]]] = OrderedDict()
        self._starting: dict[Any, int] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    async def call(
        self, key: Any, start: Starter, inputs: dict[str, Any], seconds: float, warm: bool = True,
        host: Host | None = None,
    ) -> FunctionResult:  # fmt: skip
        worker = self._take(key) if warm else None
        if worker is None:
            metrics.sandbox_cold_start()
            worker, failure = await start()
            if worker is None:
                return failure
        if warm:
            self._refill(key, start)
        began = time.perf_counter()
        metrics.sandbox_busy(1)
        try:
            result = await worker.call(inputs, seconds, host)
        except BaseException:
            await worker.stop()
            raise
        finally:
            metrics.sandbox_busy(-1)
        metrics.sandbox_called(result.kind, time.perf_counter() - began)
        if warm and worker.usable and not self._closed:
            self._give_back(key, worker)
        else:
            await worker.stop()
        return result

    def _take(self, key: Any) -> Worker | None:
        idle = self._idle.get(key)
        while idle:
            worker, _ = idle.pop()
            metrics.sandbox_idle(-1)
            if worker.usable:
                self._idle.move_to_end(key)
                return worker
            self._stop_later(worker)
        return None

    def _give_back(self, key: Any, worker: Worker) -> None:
        idle = self._idle.setdefault(key, deque())
        self._idle.move_to_end(key)
        if len(idle) >= self._idle_per_key:
            self._stop_later(worker)
            return
        idle.append((worker, time.monotonic()))
        metrics.sandbox_idle(1)
        self._trim()

    def _refill(self, key: Any, start: Starter) -> None:
        """Keep one worker of this key ready for the next call."""
        if self._closed or self._idle.get(key) or self._starting.get(key):
            return
        self._starting[key] = self._starting.get(key, 0) + 1
        self._spawn(self._prestart(key, start))

    async def _prestart(self, key: Any, start: Starter) -> None:
        try:
            worker, _ = await start()
        finally:
            self._starting[key] -= 1
            if not self._starting[key]:
                del self._starting[key]
        if worker is None:
            return  # the next call starts one itself and reports why it cannot
        if self._closed:
            await worker.stop()
        else:
            self._give_back(key, worker)

    def _trim(self) -> None:
        """At most ``idle_total`` idle workers, none idle for longer than ``idle_seconds``:
        the least recently used keys give theirs up first."""
        now = time.monotonic()
        count = sum(len(idle) for idle in self._idle.values())
        for key in list(self._idle):
            idle = self._idle[key]
            while idle and (count > self._idle_total or now - idle[0][1] > self._idle_seconds):
                worker, _ = idle.popleft()
                metrics.sandbox_idle(-1)
                count -= 1
                self._stop_later(worker)
            if not idle:
                del self._idle[key]

    def _stop_later(self, worker: Worker) -> None:
        self._spawn(worker.stop())

    def _spawn(self, work: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def idle_count(self, key: Any | None = None) -> int:
        if key is not None:
            return len(self._idle.get(key, ()))
        return sum(len(idle) for idle in self._idle.values())

    async def settle(self) -> None:
        """Wait for background starts and stops (tests and benchmarks)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def close(self) -> None:
        self._closed = True
        workers = [worker for idle in self._idle.values() for worker, _ in idle]
        self._idle.clear()
        metrics.sandbox_idle(-len(workers))
        for worker in workers:
            self._stop_later(worker)
        with contextlib.suppress(Exception):
            await self.settle()
