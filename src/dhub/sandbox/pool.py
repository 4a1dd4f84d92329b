"""The warm pool: sandboxed interpreters started before they are needed (DESIGN.md 5).

Workers are pooled by *key*: one function (its source, entry point, environment and network
option) of one owner (an agent version's node), so nothing a call leaves behind in an
interpreter can reach another agent or user. A call takes an idle worker of its key when there
is one and starts one otherwise. After the call the worker goes back to the pool, unless the
call timed out, ran out of memory, or its process died: such a worker is ended, never reused.

**How many it keeps.** Per key, one more than the most calls of that key in flight at once over
the last ``demand_seconds`` (demand.py): a steady stream of N concurrent calls reuses N
interpreters (and one spare), instead of starting and ending one per call. A call that finds no
idle worker of its key starts one, at most ``STARTS_AT_ONCE`` at a time per key: beyond that,
and whenever one of the key's busy workers is expected back sooner than a start would take (its
own calls, timed, are short), it waits for a worker to come back. So a burst grows the pool
step by step to what keeps its queue shorter than a start, rather than by one interpreter per
call. When a call takes the last idle worker of its key and the key is below that figure, one
replacement starts in the background. Workers beyond the demand, or idle for ``idle_seconds``,
are ended by a sweep. ``idle_per_key`` and ``idle_total`` cap the idle ones.

**Memory budget.** Every worker the pool holds, busy or idle, counts with its memory as last
measured (``Worker.memory``: after its start, its first call, and then at most every second
after a call; before its first measurement the largest figure seen so far, or 20 MB). Before a
start, least recently used idle workers of any key are ended until the new one fits; when it
still does not, the call *waits* until a busy worker's memory comes back (as calls wait for a
slot of ``DHUB_SANDBOX_CONCURRENCY``), and a background replacement is not started at all. A
worker that grew during its call and no longer fits is ended instead of kept. So the pool's
accounted memory never exceeds the budget, with one exception: a budget too small for a single
interpreter still runs one call at a time. What a function allocates *during* a call is bounded
by its own limit (DHUB_SANDBOX_MEMORY_MB), not by the budget, until the call ends and the
worker is measured again.

**Spares.** Starting an interpreter is mostly the supervisor's own start (bubblewrap, Python,
its imports and sibling files: bench/cold_start.py), the same for every function started with
the same command line (its *shape*: the dependency environment; no network, no browser). So
the runner keeps one sandbox per shape started ahead of need, its supervisor waiting for a
function (``take_spare``, ``spare_soon``): a function's first call, or one more interpreter of a
busy function, only sends the setup and loads the source. A spare has run nothing, and is given
to one function only and then never back: it holds nothing of anyone's. Spares are pooled like
workers (key ``Spare(shape)``): counted in the budget, ended to make room like any idle worker
(least recently used first), and ended once no start of their shape came for
``demand_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from dhub.observability import metrics
from dhub.sandbox.demand import Demand
from dhub.sandbox.worker import FunctionResult, Host, Worker

Starter = Callable[[], Awaitable[tuple[Worker | None, FunctionResult]]]
# A worker's memory before any was measured: the supervisor's and the function's process's
# RssAnon came to 15-16 MB (2026-12-03, Python 3.11, with and without bubblewrap).
ESTIMATE = 20 << 20
REMEASURE_SECONDS = 1.0
# What starting a worker costs, against waiting for a busy one: a cold start under bubblewrap
# is 45-50 ms of CPU (bench/cold_start.py), even when a spare took its time off the call's path.
START_SECONDS = 0.05
# Starts of one function under way at once for its calls: a burst grows the pool a few at a
# time (its calls, once timed, may turn out shorter than a start), not by a storm of starts.
STARTS_AT_ONCE = 4


@dataclass(frozen=True)
class Spare:
    """The pool key of the spares of one shape: never equal to a function's key."""

    shape: Hashable


@dataclass(frozen=True)
class PoolMemory:
    """The pool's memory: what its workers hold now (busy and idle, starts counted with their
    estimate), the most they ever held together, and the budget, in bytes."""

    used: int
    peak: int
    budget: int
    workers: int


class WarmPool:
    def __init__(
        self, idle_per_key: int | None = None, idle_total: int | None = None,
        idle_seconds: float = 300.0, budget_bytes: int = 1 << 30, demand_seconds: float = 60.0,
    ) -> None:  # fmt: skip
        self._idle_per_key = idle_per_key
        self._idle_total = idle_total
        self._idle_seconds = idle_seconds
        self._budget = budget_bytes
        self._demand = Demand(demand_seconds)
        # key -> idle workers with the time each became idle; keys in least-recent-use order
        self._idle: OrderedDict[Any, deque[tuple[Worker, float]]] = OrderedDict()
        self._starting: dict[Any, int] = {}
        self._asked: dict[Spare, float] = {}  # the last start of each shape
        self._held: dict[Worker, int] = {}  # every worker the pool holds -> its memory
        self._measured: dict[Worker, float] = {}  # when each was last measured after a call
        self._working: dict[Any, int] = {}  # key -> its workers in a call, or starting
        self._starts: dict[Any, int] = {}  # key -> its workers starting for a call
        self._waiting: dict[Any, deque[asyncio.Future[None]]] = {}  # key -> calls waiting
        self._call_seconds: dict[Any, float] = {}  # key -> its calls' time, averaged
        self._sizes: dict[Any, int] = {}  # key -> its workers' largest measured memory
        self._largest = 0  # the largest measured of any key
        self._reserved = 0  # memory set aside for starts under way
        self._used = 0
        self._peak = 0
        self._released: asyncio.Future[None] | None = None  # set when memory comes back
        self._background: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    async def call(
        self, key: Any, start: Starter, inputs: dict[str, Any], seconds: float, warm: bool = True,
        host: Host | None = None,
    ) -> FunctionResult:  # fmt: skip
        self._demand.begin(key, time.monotonic())
        try:
            worker, failure = await self._acquire(key, start, warm)
            if worker is None:
                return failure
            try:
                if warm:
                    self._refill(key, start)
                result = await self._run(key, worker, inputs, seconds, host)
            finally:
                self._done_working(key)  # a call waiting for one of the key's workers looks again
        finally:
            self._demand.end(key)
        if warm and worker.usable and not self._closed:
            self._give_back(key, worker)
        else:
            self._release(worker)
            await worker.stop()
        return result

    async def _acquire(
        self, key: Any, start: Starter, warm: bool
    ) -> tuple[Worker | None, FunctionResult]:
        """An idle worker of the key; else one of its busy workers once back, while
        ``STARTS_AT_ONCE`` of its workers are starting or when one is expected back sooner
        than a start would take; else a new one once its memory fits the budget. Counted as
        working (``_working``) from then on."""
        while True:
            worker = self._take(key) if warm else None
            if worker is not None:
                self._working[key] = self._working.get(key, 0) + 1
                return worker, FunctionResult("ok")
            starting = self._starts.get(key, 0)
            if (
                warm
                and self._working.get(key)
                and (starting >= STARTS_AT_ONCE or self._sooner_back(key))
            ):
                await self._worker_back(key)
                continue
            estimate = self._estimate(key)
            if self._make_room(estimate):
                metrics.sandbox_cold_start()
                self._working[key] = self._working.get(key, 0) + 1  # calls may wait for it
                self._starts[key] = self._starts.get(key, 0) + 1
                try:
                    worker, result = await self._start(key, start, estimate)
                finally:
                    if (left := self._starts[key] - 1) > 0:
                        self._starts[key] = left
                    else:
                        del self._starts[key]
                    if worker is None:
                        self._done_working(key)
                    else:
                        self._wake_one(key)  # the next waiting call may start another
                return worker, result
            await self._memory_released()

    # -- waiting for a worker of the key ------------------------------------------------------

    def _sooner_back(self, key: Any) -> bool:
        """Whether one of the key's busy (or starting) workers is expected back, for this call
        and those already waiting, sooner than a new one would start: calls shorter than a
        start queue for the workers there are instead of starting one each (64 runs in step
        calling a 10 ms function started 64 interpreters per node)."""
        working = self._working.get(key, 0)
        seconds = self._call_seconds.get(key)  # not another function's: they may take seconds
        if not working or seconds is None:
            return False
        ahead = len(self._waiting.get(key, ())) + 1
        return ahead / working * seconds < START_SECONDS

    async def _worker_back(self, key: Any) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(key, deque())
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake_one(key)  # it was woken: the turn goes to the next
            raise
        finally:
            with contextlib.suppress(ValueError):
                queue.remove(waiter)
            if not queue and self._waiting.get(key) is queue:
                del self._waiting[key]

    def _done_working(self, key: Any) -> None:
        left = self._working.get(key, 0) - 1
        if left > 0:
            self._working[key] = left
        else:
            self._working.pop(key, None)
        self._wake_one(key)

    def _wake_one(self, key: Any) -> None:
        queue = self._waiting.get(key)
        while queue:
            waiter = queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _timed(self, key: Any, seconds: float) -> None:
        """A call of the key took ``seconds``: the averages ``_sooner_back`` reads."""
        known = self._call_seconds.get(key)
        self._call_seconds[key] = seconds if known is None else 0.8 * known + 0.2 * seconds

    async def _run(
        self, key: Any, worker: Worker, inputs: dict[str, Any], seconds: float, host: Host | None
    ) -> FunctionResult:
        began = time.perf_counter()
        metrics.sandbox_busy(1)
        try:
            result = await worker.call(inputs, seconds, host)
        except BaseException:
            self._release(worker)
            await worker.stop()
            raise
        finally:
            metrics.sandbox_busy(-1)
        took = time.perf_counter() - began
        metrics.sandbox_called(result.kind, took)
        self._timed(key, took)
        return result

    async def _start(
        self, key: Any, start: Starter, estimate: int, reserved: bool = False
    ) -> tuple[Worker | None, FunctionResult]:
        if not reserved:
            self._reserve(estimate)
        try:
            worker, result = await start()
        finally:
            self._reserve(-estimate)
        if worker is not None:
            # Counted as measured; a first worker of a function larger than the figure it was
            # started on passes the budget by the difference, until it is measured again.
            size = self._measure(key, worker)
            self._make_room(size, keep=key)  # its reservation went back just now
            self._hold(worker, size)
        return worker, result

    # -- spares ---------------------------------------------------------------------------

    def take_spare(self, shape: Hashable) -> Worker | None:
        """A sandbox of ``shape`` whose supervisor waits for its function (``Worker.begin``),
        or None. It is the caller's from now on: its memory counts again once its start
        returns it (``_start``)."""
        worker = self._take(Spare(shape))
        if worker is not None:
            self._release(worker)
        return worker

    def spare_soon(self, shape: Hashable, launch: Starter) -> None:
        """Have one spare of ``shape`` ready, started by ``launch`` in the background (when
        there is none, nor one starting, and the budget has room for it as it is)."""
        key = Spare(shape)
        self._asked[key] = time.monotonic()
        if self._used + self._estimate(key) <= self._budget:  # no warm worker ends for it
            self._refill(key, launch)

    def spare_count(self) -> int:
        return sum(len(idle) for key, idle in self._idle.items() if isinstance(key, Spare))

    # -- idle workers ---------------------------------------------------------------------

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
        size = self._remeasure(key, worker)  # the call may have grown it
        idle = self._idle.setdefault(key, deque())
        self._idle.move_to_end(key)
        wanted = len(idle) + self._demand.busy(key) < self._target(key)
        growth = size - self._held.get(worker, 0)
        if not wanted or self._idle_full() or not self._make_room(growth, keep=key):
            if not idle:
                del self._idle[key]
            self._stop_later(worker)
            return
        self._hold(worker, size)
        idle.append((worker, time.monotonic()))
        metrics.sandbox_idle(1)
        self._sweep_soon()
        self._wake()  # a call waiting for memory may take it, or end it to make room

    def _target(self, key: Any) -> int:
        """Workers the key wants, busy and idle: its recent peak of calls in flight, and one
        spare, so a stream of calls one after the other never waits for a start."""
        wanted = self._demand.peak(key, time.monotonic()) + 1
        return wanted if self._idle_per_key is None else min(wanted, self._idle_per_key)

    def _idle_full(self) -> bool:
        return self._idle_total is not None and self.idle_count() >= self._idle_total

    def _refill(self, key: Any, start: Starter) -> None:
        """Start one worker of this key in the background when the key has no idle one left
        and wants more than it has (one start at a time per key)."""
        if self._closed or self._idle.get(key) or self._starting.get(key):
            return
        if self._demand.busy(key) >= self._target(key) or self._idle_full():
            return
        if self._sooner_back(key):
            return  # the next call would rather wait for one back than for a start
        estimate = self._estimate(key)
        if not self._make_room(estimate):
            return  # no memory to spare: the next call waits for some instead
        self._starting[key] = 1
        self._reserve(estimate)  # now: the task runs later, and the room is taken meanwhile
        self._spawn(self._prestart(key, start, estimate))

    async def _prestart(self, key: Any, start: Starter, estimate: int) -> None:
        try:
            worker, _ = await self._start(key, start, estimate, reserved=True)
        finally:
            del self._starting[key]
        if worker is None:
            return  # the next call starts one itself and reports why it cannot
        if self._closed:
            self._release(worker)
            await worker.stop()
        else:
            self._give_back(key, worker)

    def _sweep_soon(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.ensure_future(self._sweep())

    async def _sweep(self) -> None:
        """While workers are idle: end those beyond their key's demand or idle too long."""
        every = max(0.05, min(self._idle_seconds, self._demand.window) / 4)
        while self._idle and not self._closed:
            await asyncio.sleep(every)
            self.trim()

    def trim(self) -> None:
        """End the idle workers no key wants now: those beyond their key's demand (busy and
        idle together above its target), or idle for longer than ``idle_seconds``."""
        now = time.monotonic()
        self._demand.forget(now)
        for key in list(self._idle):
            idle = self._idle[key]
            spare = len(idle) + self._demand.busy(key) - self._target(key)
            asked = self._asked.get(key, -math.inf) if isinstance(key, Spare) else now
            if now - asked > self._demand.window:
                spare = len(idle)  # spares of a shape no start asked for lately
            while idle and (spare > 0 or now - idle[0][1] > self._idle_seconds):
                worker, _ = idle.popleft()
                metrics.sandbox_idle(-1)
                spare -= 1
                self._stop_later(worker)
            if not idle:
                del self._idle[key]
        for key in [k for k in self._sizes if k not in self._idle and not self._demand.known(k)]:
            del self._sizes[key]  # a function not called lately: measured anew next time
        for key in [k for k, at in self._asked.items() if now - at > self._demand.window]:
            del self._asked[key]
        for key in [k for k in self._call_seconds if not self._demand.known(k)]:
            del self._call_seconds[key]

    # -- memory -----------------------------------------------------------------------------

    def _estimate(self, key: Any) -> int:
        if isinstance(key, Spare):  # never less than it is counted with (``_measure``)
            return max(self._largest, ESTIMATE)
        return self._sizes.get(key) or self._largest or ESTIMATE

    def _measure(self, key: Any, worker: Worker) -> int:
        if isinstance(key, Spare):  # still starting when it comes in: counted as a worker
            return max(worker.memory(), ESTIMATE)
        size = worker.memory() or self._estimate(key)
        self._sizes[key] = max(size, self._sizes.get(key, 0))
        self._largest = max(self._largest, size)
        return size

    def _remeasure(self, key: Any, worker: Worker) -> int:
        """A worker's memory after a call: measured after its first call, then at most every
        ``REMEASURE_SECONDS`` (reading /proc after every call was a sixth of a busy worker
        process's CPU, bench/scale.py); in between, the figure it is held with."""
        now, held = time.monotonic(), self._held.get(worker)
        if held is not None and now - self._measured.get(worker, -math.inf) < REMEASURE_SECONDS:
            return held
        self._measured[worker] = now
        return self._measure(key, worker)

    def _hold(self, worker: Worker, size: int) -> None:
        """Count the worker with its memory ``size``."""
        self._count(size - self._held.get(worker, 0))
        self._held[worker] = size

    def _release(self, worker: Worker) -> None:
        self._measured.pop(worker, None)
        size = self._held.pop(worker, None)
        if size is not None:
            self._count(-size)
            self._wake()

    def _reserve(self, size: int) -> None:
        self._reserved += size
        self._count(size)
        if size < 0:
            self._wake()

    def _wake(self) -> None:
        """Let the calls waiting for memory look again."""
        if self._released is not None:
            self._released.set_result(None)
            self._released = None

    def _count(self, change: int) -> None:
        self._used += change
        self._peak = max(self._peak, self._used)

    def _make_room(self, need: int, keep: Any = None) -> bool:
        """Whether ``need`` more bytes fit the budget, after ending least recently used idle
        workers (never those of ``keep``) as far as that takes. With nothing held at all, a
        worker larger than the budget still fits: one call at a time runs."""
        while self._used + need > self._budget:
            victim = next((k for k in self._idle if k != keep and self._idle[k]), None)
            if victim is None:
                return not self._held and not self._reserved
            worker, _ = self._idle[victim].popleft()
            metrics.sandbox_idle(-1)
            if not self._idle[victim]:
                del self._idle[victim]
            self._stop_later(worker)
        return True

    async def _memory_released(self) -> None:
        if self._released is None:
            self._released = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._released)

    def memory(self) -> PoolMemory:
        return PoolMemory(self._used, self._peak, self._budget, len(self._held))

    # -- background work ----------------------------------------------------------------------

    def _stop_later(self, worker: Worker) -> None:
        # Its memory is counted free now: it is killed at once (SIGKILL), not after a grace.
        self._release(worker)
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
        self._wake()
        if self._sweeper is not None:
            self._sweeper.cancel()
        workers = [worker for idle in self._idle.values() for worker, _ in idle]
        self._idle.clear()
        metrics.sandbox_idle(-len(workers))
        for worker in workers:
            self._stop_later(worker)
        with contextlib.suppress(Exception):
            await self.settle()
