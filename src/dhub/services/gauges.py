"""The database's gauges of ``GET /metrics`` (api/metrics.py): unfinished runs by status and,
in distributed mode, the queue's jobs and lag, read at each scrape."""

from __future__ import annotations

import logging

from sqlalchemy import func, select, text

from dhub.observability import metrics
from dhub.runtime.queue import QUEUE
from dhub.store import tables
from dhub.store.db import Database

log = logging.getLogger("dhub.api.metrics")


_RUNS = (
    select(tables.runs.c.status, func.count())
    .where(tables.runs.c.status.in_(("queued", "running", "waiting")))  # ix_runs_status
    .group_by(tables.runs.c.status)
)
_JOBS = text("""
SELECT queue_name,
       CASE WHEN status = 'doing' THEN 'doing'
            WHEN scheduled_at > now() THEN 'scheduled' ELSE 'due' END AS state,
       count(*)
FROM procrastinate_jobs WHERE status IN ('todo', 'doing') GROUP BY 1, 2
""")
# A job's wait starts when it was (re)deferred, or at its scheduled time if later.
_LAG = text("""
SELECT j.queue_name, EXTRACT(EPOCH FROM now() - min(GREATEST(j.scheduled_at, e.at)))
FROM procrastinate_jobs AS j
CROSS JOIN LATERAL (
    SELECT max(at) AS at FROM procrastinate_events
    WHERE job_id = j.id AND type IN ('deferred', 'deferred_for_retry')) AS e
WHERE j.status = 'todo' AND (j.scheduled_at IS NULL OR j.scheduled_at <= now())
GROUP BY j.queue_name
""")


async def gauges(db: Database, distributed: bool) -> metrics.Snapshot | None:
    """The database's gauges; None (and a warning) when the database does not answer: the
    process's own counters are still worth a scrape."""
    try:
        async with db.read() as conn:
            runs = {str(status): int(n) for status, n in await conn.execute(_RUNS)}
            if not distributed:
                return metrics.Snapshot(runs)
            jobs = {(str(q), str(s)): int(n) for q, s, n in await conn.execute(_JOBS)}
            lag = {str(q): float(s or 0) for q, s in await conn.execute(_LAG)}
    except Exception as exc:
        log.warning("/metrics: the database's gauges are left out: %r", exc)
        return None
    for queue in {QUEUE, *(queue for queue, _ in jobs)}:  # zeros rather than no series
        lag.setdefault(queue, 0.0)
        for state in ("due", "scheduled", "doing"):
            jobs.setdefault((queue, state), 0)
    return metrics.Snapshot(runs, jobs, lag)
