"""A worker of distributed mode (DESIGN.md 7): run jobs from the queue, executed by this
process's RunExecutor.

- A job (``dhub.run``) executes its run here until the run ends, parks or stops; the run reads
  what the API left in its inbox as it loads (answers, decisions; a cancellation cancels it).
- A NOTIFY on the inbox channel tells runs this worker holds live to read their inbox.
- Each step commit removes the letters of runs that ended (the group committer removes those
  a step consumed), schedules a parked run's timer as a job, and notifies the API processes
  (``after_write``).
- Runs whose worker died (lapsed leases) go back to the queue from the executor's sweep; a
  stopping worker hands its runs back the same way.
- The worker beats its heart in ``workers`` (GET /api/v1/workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Coroutine, Sequence
from typing import Any

from dhub.domain.ids import now_ms
from dhub.runtime.dispatch import INBOX_CHANNEL, announce_steps
from dhub.runtime.durable import Handoff, RunExecutor
from dhub.runtime.notify import Listener
from dhub.runtime.queue import QUEUE, RunQueue
from dhub.store import inbox
from dhub.store import workers as worker_rows
from dhub.store.db import Conn, Database
from dhub.store.step_batch import StepWrite

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
FORGET_AFTER_MS = 10 * 60 * 1000  # a worker silent this long is gone: drop its row


def handoff(db: Database, queue: RunQueue) -> Handoff:
    """The executor hooks of a distributed-mode process (see RunExecutor's ``handoff``)."""

    async def after_write(conn: Conn, writes: Sequence[StepWrite]) -> None:
        await inbox.settle(conn, [], [w.rows.run_id for w in writes if w.ended])
        for w in writes:
            if w.wake_at is not None:  # a durable timer; a stale one wakes it for nothing
                await queue.enqueue(conn, w.rows.run_id, at=w.wake_at, once=False)
        await announce_steps(conn, writes)

    async def requeue(run_ids: list[str]) -> None:
        """The runs this process hands back as it stops."""
        for batch in _batches(run_ids):
            async with db.write() as conn:
                for run_id in batch:
                    await queue.enqueue(conn, run_id)

    async def sweep(run_ids: list[str]) -> None:
        """The runs a sweep found nobody holding: each checked again as its job is queued, in
        short transactions, so that runs taken meanwhile (by the jobs this or another worker
        is executing) get no second job (bench/scale.py with two workers: up to half)."""
        for batch in _batches(run_ids):
            async with db.write() as conn:
                for run_id in await queue.unqueued(conn, batch, now_ms()):
                    await queue.enqueue(conn, run_id)

    return Handoff(after_write, requeue, sweep)


def _batches(run_ids: list[str], size: int = 50) -> list[list[str]]:
    ordered = sorted(set(run_ids))  # every transaction locks runs in the same order
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


class QueueWorker:
    def __init__(
        self,
        db: Database,
        executor: RunExecutor,
        queue: RunQueue,
        concurrency: int = 100,
        queues: Sequence[str] = (QUEUE,),
        grace: float = 30.0,
    ) -> None:
        self.db = db
        self.executor = executor
        self.queue = queue
        self.concurrency = concurrency
        self.queues = list(queues)
        self.grace = grace  # seconds a stopping worker lets calls under way finish
        self.listener = Listener(db.url, {INBOX_CHANNEL: self._on_letter})
        self._tasks: set[asyncio.Task[None]] = set()
        self._work: asyncio.Task[None] | None = None
        self._beat: asyncio.Task[None] | None = None
        self.started_at = now_ms()

    # -- jobs -------------------------------------------------------------------------------

    async def execute(self, run_id: str) -> None:
        """One job: the run here until it ends, parks or stops (it reads its inbox as it
        loads); cancelled if a cancellation waits for it."""
        async with self.db.read() as conn:
            letters = await inbox.letters(conn, run_id)
        running = asyncio.ensure_future(self.executor.run_here(run_id))
        if any(x.kind == inbox.CANCEL for x in letters):
            await self.executor.cancel(run_id)
        await running

    def _on_letter(self, run_id: str | None) -> None:
        live = self.executor.live_ids()
        for live_id in live if run_id is None else [r for r in [run_id] if r in live]:
            self._spawn(self._deliver(live_id))

    async def _deliver(self, run_id: str) -> None:
        await self.executor.mail(run_id)
        async with self.db.read() as conn:
            letters = await inbox.letters(conn, run_id)
        if any(x.kind == inbox.CANCEL for x in letters):
            await self.executor.cancel(run_id)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- life -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, sweep what dead workers left, beat, and take jobs (in the background)."""
        await self.queue.open()
        self.queue.register(self.execute)
        self.listener.start()
        await self.executor.recover()
        await self._heartbeat(stopping=False)
        self._beat = asyncio.ensure_future(self._beating())
        self._work = asyncio.ensure_future(self.queue.work(self.concurrency, self.queues))

    async def stop(self) -> None:
        """Graceful: stop taking jobs; each run here saves the results of the calls under way
        (for up to ``grace`` seconds) and stops there; the runs go back to the queue for the
        other workers, with nothing in flight repeated; then goodbye."""
        with contextlib.suppress(Exception):
            await self._heartbeat(stopping=True)
        self.executor.drain()
        for task in (self._work, self._beat):  # the jobs under way end as their runs stop
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, self.grace)
        await self.executor.close(self.grace)  # what is left is cut off; all handed back
        await self.listener.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            async with self.db.write() as conn:
                await worker_rows.gone(conn, self.executor.owner)
        await self.queue.close()

    async def _beating(self) -> None:
        beats = 0
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            beats += 1
            try:
                await self._heartbeat(stopping=False)
                if beats % 12 == 0:  # about once a minute
                    await self.queue.forget_stalled()
            except Exception as exc:
                log.warning("worker heartbeat not saved: %r", exc)

    async def _heartbeat(self, stopping: bool) -> None:
        at = now_ms()
        record = worker_rows.WorkerRecord(
            id=self.executor.owner, host=socket.gethostname(), pid=os.getpid(),
            queues=self.queues, concurrency=self.concurrency,
            live_runs=self.executor.live_count, started_at=self.started_at, heartbeat_at=at,
            stopping=stopping,
        )  # fmt: skip
        async with self.db.write() as conn:
            await worker_rows.beat(conn, record)
            await worker_rows.forget_older_than(conn, at - FORGET_AFTER_MS)
