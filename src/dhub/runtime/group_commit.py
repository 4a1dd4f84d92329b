"""Group commit: the steps of concurrent runs share transactions.

Every step is saved before its commands run, so a run waits for its write. Writes that arrive
while a commit is under way wait for the next one, and that one saves all of them together
(store/step_batch.py: one statement per table, one commit). One run alone pays one
transaction per step, as before; a thousand runs stepping at once pay a handful.

A step that consumed people's answers (or closed the tasks they answered) deletes their
letters from the runs' inbox in the same transaction (store/inbox.py): an answer is applied
exactly once, whatever crashes when.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy.exc import DBAPIError

from dhub.observability.context import untraced
from dhub.store import inbox
from dhub.store.db import Conn, Database
from dhub.store.step_batch import StepWrite, write_steps

log = logging.getLogger(__name__)

_MAX_BATCH = 512  # keeps one commit's statements and the loop's pause bounded


AfterWrite = Callable[[Conn, Sequence[StepWrite]], Awaitable[None]]
Taken = Sequence[tuple[str, str]]  # (run id, command id): inbox letters a step consumed
_Item = tuple[StepWrite, Taken, asyncio.Future[None]]


class GroupCommitter:
    """``after``: more work in each commit's transaction, after its steps are written
    (distributed mode: tell the API processes, settle the inbox, schedule timers)."""

    def __init__(self, db: Database, after: AfterWrite | None = None) -> None:
        self._db = db
        self._after = after
        self._queue: list[_Item] = []
        self._flusher: asyncio.Task[None] | None = None
        # Made once: a lone run starts a flusher per step, and making one was a tenth of its
        # step. One flusher at a time runs in it (a context is entered by one task at once).
        self._context = untraced()
        self.commits = 0  # transactions committed (the benchmark reports steps per commit)

    def save(self, write: StepWrite, taken: Taken = ()) -> asyncio.Future[None]:
        """Queue ``write`` (and the deletion of the ``taken`` letters); the future is done once
        it is committed (or failed: StepConflict when the run is not where the write says, the
        database's error otherwise)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((write, taken, future))
        if self._flusher is None:
            # Started, not run: the runs that are ready now queue their steps first. In a
            # context of its own: it writes many runs' steps, not the caller's.
            loop = asyncio.get_running_loop()
            self._flusher = loop.create_task(self._flush(), context=self._context)
        return future

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch = self._queue[:_MAX_BATCH]
                del self._queue[:_MAX_BATCH]
                await self._commit(batch)
        finally:
            self._flusher = None

    async def _commit(self, batch: list[_Item]) -> None:
        try:
            await self._write(batch)
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][2], exc)
                return
            # One write spoiled the batch (a lost lease, say): each alone finds out which.
            log.debug("a batch of %d steps failed (%r); saving them one by one", len(batch), exc)
            for item in batch:
                await self._commit([item])
            return
        self.commits += 1
        for _, _, future in batch:
            _settle(future, None)

    async def _write(self, batch: list[_Item]) -> None:
        writes = [write for write, _, _ in batch]
        taken = [pair for _, pairs, _ in batch for pair in pairs]
        try:
            async with self._db.write(pinged=False, first=True) as conn:
                await self._write_in(conn, writes, taken)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            # The connection had dropped (a database restart): the pool replaced it.
            async with self._db.write() as conn:
                await self._write_in(conn, writes, taken)

    async def _write_in(self, conn: Conn, writes: list[StepWrite], taken: Taken) -> None:
        await write_steps(conn, writes)
        await inbox.settle(conn, taken, [])  # no statement when no letter was taken
        if self._after is not None:
            await self._after(conn, writes)


def _settle(future: asyncio.Future[None], problem: Exception | None) -> None:
    if future.done():
        return
    if problem is None:
        future.set_result(None)
    else:
        future.set_exception(problem)
