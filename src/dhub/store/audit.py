"""The audit log: who did what to which resource, and when. Append-only."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select

from dhub.domain.ids import now_ms
from dhub.store.db import Conn
from dhub.store.tables import audit_log, marking_history


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: int
    actor_id: str
    action: str
    target_id: str
    before: Any
    after: Any


async def record(
    conn: Conn,
    actor_id: str,
    action: str,
    target_id: str,
    before: Any = None,
    after: Any = None,
) -> None:
    """Write one entry in the caller's transaction, so it commits (or not) with the change."""
    await conn.execute(
        insert(audit_log).values(
            at=now_ms(),
            actor_id=actor_id,
            action=action,
            target_id=target_id,
            before=before,
            after=after,
        )
    )


async def record_many(
    conn: Conn, actor_id: str, changes: Sequence[tuple[str, str, Any, Any]]
) -> None:
    """One entry for each (action, target_id, before, after) of ``changes``, as ``record``
    writes them, in one statement."""
    if changes:
        at = now_ms()
        await conn.execute(
            insert(audit_log),
            [{"at": at, "actor_id": actor_id, "action": action, "target_id": target,
              "before": before, "after": after} for action, target, before, after in changes],
        )  # fmt: skip


async def entries(
    conn: Conn,
    *,
    actor_id: str | None = None,
    target_id: str | None = None,
    action: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
    held: Collection[str] = (),
) -> list[AuditEntry]:
    """Newest first; ``before_id`` is the last id of the previous page. Entries about a
    resource that ever carried a marking outside ``held`` are left out, in SQL, so pages and
    cursors only ever show what the reader may see."""
    stmt = select(
        audit_log.c.id,
        audit_log.c.at,
        audit_log.c.actor_id,
        audit_log.c.action,
        audit_log.c.target_id,
        audit_log.c.before,
        audit_log.c.after,
    )
    if actor_id is not None:
        stmt = stmt.where(audit_log.c.actor_id == actor_id)
    if target_id is not None:
        stmt = stmt.where(audit_log.c.target_id == target_id)
    if action is not None:
        stmt = stmt.where(audit_log.c.action == action)
    if before_id is not None:
        stmt = stmt.where(audit_log.c.id < before_id)
    beyond = select(marking_history.c.resource_id).where(
        marking_history.c.resource_id == audit_log.c.target_id
    )
    if held:
        beyond = beyond.where(marking_history.c.marking_id.not_in(sorted(held)))
    stmt = stmt.where(~beyond.exists())
    stmt = stmt.order_by(audit_log.c.id.desc()).limit(limit)
    return [AuditEntry(*r) for r in await conn.execute(stmt)]
