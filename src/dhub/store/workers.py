"""Worker processes' heartbeats (distributed mode; tables.workers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql

from dhub.store.db import Conn
from dhub.store.tables import workers


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    live_runs: int
    started_at: int
    heartbeat_at: int
    stopping: bool


_COLUMNS = (
    workers.c.id, workers.c.host, workers.c.pid, workers.c.queues, workers.c.concurrency,
    workers.c.live_runs, workers.c.started_at, workers.c.heartbeat_at, workers.c.stopping,
)  # fmt: skip


async def beat(conn: Conn, record: WorkerRecord) -> None:
    values: dict[str, Any] = {c.name: getattr(record, c.name) for c in _COLUMNS}
    stmt = postgresql.insert(workers).values(values)
    await conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[workers.c.id],
            set_={k: stmt.excluded[k] for k in ("live_runs", "heartbeat_at", "stopping")},
        )
    )


async def stopping(conn: Conn, worker_id: str) -> None:
    await conn.execute(update(workers).where(workers.c.id == worker_id).values(stopping=True))


async def gone(conn: Conn, worker_id: str) -> None:
    await conn.execute(delete(workers).where(workers.c.id == worker_id))


async def listing(conn: Conn) -> list[WorkerRecord]:
    rows = await conn.execute(select(*_COLUMNS).order_by(workers.c.started_at, workers.c.id))
    return [WorkerRecord(*row) for row in rows]


async def forget_older_than(conn: Conn, before: int) -> None:
    """Workers whose heart stopped long ago (killed): their runs were taken over already."""
    await conn.execute(delete(workers).where(workers.c.heartbeat_at < before))
