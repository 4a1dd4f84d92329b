"""The run queue of distributed mode (DESIGN.md 7): procrastinate on dhub's own PostgreSQL.

One task, ``dhub.run(run_id)``: execute the run here until it ends, parks or stops. It is
deferred

- with the run, in the transaction that creates it (so no run exists without its job, and no
  job without its run);
- when a parked run is handed an answer, a decision or a cancellation (runtime/dispatch.py);
- for a parked run's timer, scheduled at the timer's time (a durable timer: a job that falls
  due while no worker runs waits in the table, and the first worker to start takes it);
- for runs whose worker died (their lease lapsed), by the workers' periodic sweep, and for the
  runs a stopping worker hands back.

Every deferral but the first carries the queueing lock ``run:<id>``: one waiting job per run is
enough, whoever holds the run's lease does the work (leases keep steps exactly-once, as in
the embedded mode). LISTEN/NOTIFY wakes idle workers at once.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from sqlalchemy import text
from sqlalchemy.engine import make_url

from dhub.store.db import Conn

TASK = "dhub.run"
QUEUE = "runs"


_STALLED = f"""
DELETE FROM procrastinate_jobs AS j
WHERE j.status = 'doing' AND j.task_name = '{TASK}' AND NOT EXISTS (
    SELECT 1 FROM procrastinate_workers AS w
    WHERE w.id = j.worker_id AND w.last_heartbeat > now() - interval '60 seconds')
"""


# A worker is alive while procrastinate saw its heartbeat (every 10 s) in the last 30 s (its
# own stalled_worker_timeout): a dead worker's runs are queued again that soon, about when
# their leases (DHUB_RUN_LEASE_SECONDS, 30) lapse; not a minute later.
# Of ``run_ids``, the runs a sweep should queue a job for, as they are now (the sweep's list
# is stale by the time it gets to them): still unfinished and unheld (not parked), with no job
# due (one a worker may fetch as this transaction queues another: the queueing lock would not
# stop the second then) nor under way at a live worker (taken, its run not claimed yet). They
# are locked until commit; those another transaction holds (a claim, a step, another worker's
# sweep) are skipped.
_UNQUEUED = text(f"""
SELECT r.id FROM runs AS r
WHERE r.id = ANY(:ids) AND r.status IN ('queued', 'running', 'waiting')
  AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= :now)
  AND (r.status <> 'waiting' OR r.lease_owner IS NOT NULL)
  AND r.id NOT IN (
    SELECT j.args->>'run_id' FROM procrastinate_jobs AS j
    LEFT JOIN procrastinate_workers AS w ON w.id = j.worker_id
    WHERE j.task_name = '{TASK}' AND j.args->>'run_id' IS NOT NULL AND (
      (j.status = 'todo' AND (j.scheduled_at IS NULL OR j.scheduled_at <= now()))
      OR (j.status = 'doing' AND w.last_heartbeat > now() - interval '30 seconds')))
ORDER BY r.id
FOR UPDATE OF r SKIP LOCKED
""")


def conninfo(database_url: str) -> str:
    """A libpq URL (what psycopg takes) from dhub's database URL."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class RunQueue:
    """procrastinate's app over the database; ``open`` before deferring or working."""

    def __init__(self, database_url: str, pool_size: int = 4) -> None:
        connector = procrastinate.PsycopgConnector(
            conninfo=conninfo(database_url), min_size=1, max_size=pool_size
        )
        self.app = procrastinate.App(connector=connector)
        self._opened = False

    async def open(self) -> None:
        if not self._opened:
            await self.app.open_async()
            self._opened = True

    async def close(self) -> None:
        if self._opened:
            await self.app.close_async()
            self._opened = False

    async def enqueue(
        self, conn: Conn, run_id: str, *, at: float | None = None, once: bool = True
    ) -> None:
        """A job for ``run_id``, committed with ``conn``'s transaction. ``at``: not before
        this time (seconds since the epoch). ``once``: unless the run has a job waiting
        already (a savepoint keeps that refusal from spoiling the caller's transaction)."""
        options: dict[str, Any] = {"connection": await conn.driver(), "queue": QUEUE}
        if at is not None:
            options["schedule_at"] = datetime.datetime.fromtimestamp(at, datetime.UTC)
        if not once:
            await self.app.configure_task(TASK, **options).defer_async(run_id=run_id)
            return
        options["queueing_lock"] = f"run:{run_id}"
        await conn.execute(text("SAVEPOINT dhub_enqueue"))
        try:
            await self.app.configure_task(TASK, **options).defer_async(run_id=run_id)
        except AlreadyEnqueued:
            await conn.execute(text("ROLLBACK TO SAVEPOINT dhub_enqueue"))
        else:
            await conn.execute(text("RELEASE SAVEPOINT dhub_enqueue"))

    async def unqueued(self, conn: Conn, run_ids: list[str], now: int) -> list[str]:
        """Of ``run_ids`` (lapsed when a sweep listed them), those that still need a job,
        locked by ``conn``'s transaction until it commits (see ``_UNQUEUED``)."""
        rows = await conn.execute(_UNQUEUED, {"ids": run_ids, "now": now})
        return [str(r[0]) for r in rows]

    async def check(self) -> None:
        """Raise unless the queue's tables answer (readiness)."""
        await self.app.job_manager.connector.execute_query_one_async(
            "SELECT count(*) AS n FROM procrastinate_workers"
        )

    async def forget_stalled(self) -> None:
        """Delete the jobs a dead worker was doing (its heartbeat stopped a minute ago): the
        lease sweep queued their runs again; procrastinate would keep them 'doing' forever."""
        await self.app.job_manager.connector.execute_query_async(_STALLED)

    def register(self, execute: Callable[[str], Awaitable[None]]) -> None:
        """What a worker does with a job: ``execute(run_id)``."""

        async def run(run_id: str) -> None:
            await execute(run_id)

        self.app.task(name=TASK, queue=QUEUE)(run)

    async def work(self, concurrency: int, queues: list[str] | None = None) -> None:
        """Take jobs until cancelled (then wait for the jobs under way: they stop, or park,
        as the executor closes)."""
        await self.app.run_worker_async(
            queues=queues or [QUEUE],
            concurrency=concurrency,
            install_signal_handlers=False,
            wait=True,
            listen_notify=True,
            delete_jobs="successful",
        )
