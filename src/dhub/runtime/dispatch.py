"""How a run reaches whoever executes it (DESIGN.md 7): the dispatch port.

In both, a person's answer or decision is saved in the run's inbox (runtime/mail.py) in a
transaction of its own before ``hand`` returns: the API acknowledges only what is saved.

- ``InProcess`` (the embedded default): the server's own executor starts the run once its
  row is committed; once an answer is saved, the executor tells the run (or wakes it), and
  it hands cancellations to the run directly.
- ``Queued`` (distributed mode): the run's job is deferred in the transaction that creates
  the run (runtime/queue.py); an answer, a decision or a cancellation is left in the run's
  inbox (store/inbox.py), a job is queued for the run in the same transaction (for a parked
  run), and a NOTIFY tells the worker that may hold it live.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import bindparam, text

from dhub.domain.ids import now_ms
from dhub.runtime import mail
from dhub.runtime.durable import RunExecutor
from dhub.runtime.ports import Answer, Decision
from dhub.runtime.queue import RunQueue
from dhub.store import inbox
from dhub.store import runs as store
from dhub.store.db import Conn, Database
from dhub.store.step_batch import StepWrite

INBOX_CHANNEL = "dhub_inbox"  # payload: a run id whose inbox has a new letter
STEPS_CHANNEL = "dhub_steps"  # payload: a run id with a new step saved (for event streams)


class Dispatch(Protocol):
    holds_new_runs: bool  # runs are created held by this process's executor

    async def created(self, conn: Conn, run: store.RunRecord) -> None:
        """In the transaction that creates ``run``."""

    def start(
        self, run: store.RunRecord, context: dict[str, Any], conversation: dict[str, Any] | None
    ) -> None:
        """After that transaction committed."""

    async def hand(self, run_id: str, command_id: str, value: Answer | Decision) -> mail.Outcome:
        """Save a person's answer or decision for the run ("saved": committed, the run will
        apply it), unless the task has an answer saved already or is no longer open."""

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run where it executes live; False when no process holds it (then the
        caller cancels its saved state)."""


class InProcess:
    holds_new_runs = True

    def __init__(self, executor: RunExecutor) -> None:
        self.executor = executor

    async def created(self, conn: Conn, run: store.RunRecord) -> None:
        return None

    def start(
        self, run: store.RunRecord, context: dict[str, Any], conversation: dict[str, Any] | None
    ) -> None:
        self.executor.start(run, context, conversation)

    async def hand(self, run_id: str, command_id: str, value: Answer | Decision) -> mail.Outcome:
        return await self.executor.hand(run_id, command_id, value)

    async def cancel(self, run_id: str) -> bool:
        return await self.executor.cancel(run_id)


class Queued:
    holds_new_runs = False  # a worker claims it

    def __init__(self, db: Database, queue: RunQueue) -> None:
        self.db = db
        self.queue = queue

    async def created(self, conn: Conn, run: store.RunRecord) -> None:
        # With the run's queueing lock: a worker's sweep finds the run unclaimed while its
        # job waits, and must not queue a second one (bench/scale.py counted 40% extra jobs).
        await self.queue.enqueue(conn, run.id)

    def start(
        self, run: store.RunRecord, context: dict[str, Any], conversation: dict[str, Any] | None
    ) -> None:
        return None  # its job is in the queue

    async def hand(self, run_id: str, command_id: str, value: Answer | Decision) -> mail.Outcome:
        """The letter, a job for the run (it may be parked) and a NOTIFY to the worker that
        may hold it, in one transaction."""
        async with self.db.write() as conn:
            letter = mail.letter_of(run_id, command_id, value)
            outcome = await mail.leave(conn, letter, now_ms())
            if outcome == "saved":
                await self.queue.enqueue(conn, run_id)
                await notify(conn, INBOX_CHANNEL, [run_id])
        return outcome

    async def cancel(self, run_id: str, wait: float = 5.0) -> bool:
        """Ask the worker holding the run; True once the run ended, False when no worker
        holds it any more (it parked meanwhile). The letter stays: a worker that loads the
        run later cancels it then."""
        await self.post(inbox.Letter(run_id, inbox.CANCEL, inbox.CANCEL, {}))
        deadline = asyncio.get_running_loop().time() + wait
        while asyncio.get_running_loop().time() < deadline:
            async with self.db.read() as conn:
                run = await store.get_run(conn, run_id)
            if run is None or run.status not in store.ACTIVE:
                return True
            if run.lease_owner is None:
                return False
            await asyncio.sleep(0.05)
        return False

    async def post(self, letter: inbox.Letter) -> None:
        """Leave the letter, queue a job for the run (it may be parked), and tell the worker
        that may hold it: all in one transaction."""
        async with self.db.write() as conn:
            await inbox.put(conn, letter, now_ms())
            await self.queue.enqueue(conn, letter.run_id)
            await notify(conn, INBOX_CHANNEL, [letter.run_id])


_NOTIFY = text("SELECT pg_notify(:channel, id) FROM unnest(CAST(:ids AS text[])) AS id").bindparams(
    bindparam("ids")
)


async def notify(conn: Conn, channel: str, run_ids: Sequence[str]) -> None:
    """NOTIFY ``channel`` once per run id, delivered when ``conn``'s transaction commits."""
    if run_ids:
        await conn.execute(_NOTIFY, {"channel": channel, "ids": sorted(set(run_ids))})


async def announce_steps(conn: Conn, writes: Sequence[StepWrite]) -> None:
    """NOTIFY the runs a step commit saved (PostgreSQL), so that the event streams of other
    processes (API processes, other embedded servers) wake at once, not at their keep-alive."""
    await notify(conn, STEPS_CHANNEL, [w.rows.run_id for w in writes])
