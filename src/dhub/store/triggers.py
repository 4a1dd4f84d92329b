"""Triggers and their history (services/triggers.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update

from dhub.store.db import Conn
from dhub.store.tables import trigger_events, triggers


@dataclass(frozen=True, slots=True)
class TriggerRecord:
    id: str
    agent_id: str
    type: str
    document: str
    secret: str | None
    created_by: str
    status: str
    stopped_reason: str | None
    next_fire_at: int | None
    last_fire_at: int | None
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class TriggerEvent:
    id: str
    trigger_id: str
    kind: str
    key: str | None
    status: str
    reason: str | None
    run_id: str | None
    at: int


_COLUMNS = [triggers.c[f] for f in TriggerRecord.__dataclass_fields__]
_EVENT_COLUMNS = [trigger_events.c[f] for f in TriggerEvent.__dataclass_fields__]
_GET = select(*_COLUMNS).where(triggers.c.id == bindparam("trigger_id"))


async def insert_trigger(conn: Conn, record: TriggerRecord) -> None:
    values = {f: getattr(record, f) for f in TriggerRecord.__dataclass_fields__}
    await conn.execute(insert(triggers).values(values))


async def get_trigger(conn: Conn, trigger_id: str) -> TriggerRecord | None:
    row = (await conn.execute(_GET, {"trigger_id": trigger_id})).first()
    return TriggerRecord(*row) if row else None


async def agent_triggers(conn: Conn, agent_id: str) -> list[TriggerRecord]:
    query = select(*_COLUMNS).where(triggers.c.agent_id == agent_id).order_by(triggers.c.id)
    return [TriggerRecord(*row) for row in await conn.execute(query)]


async def update_trigger(conn: Conn, trigger_id: str, values: dict[str, Any]) -> None:
    await conn.execute(update(triggers).where(triggers.c.id == trigger_id).values(values))


async def delete_trigger(conn: Conn, trigger_id: str) -> None:
    await conn.execute(delete(trigger_events).where(trigger_events.c.trigger_id == trigger_id))
    await conn.execute(delete(triggers).where(triggers.c.id == trigger_id))


async def due_schedules(conn: Conn, now: int, limit: int = 100) -> list[TriggerRecord]:
    """Active schedules whose next tick has come, soonest first."""
    query = (
        select(*_COLUMNS)
        .where(
            triggers.c.type == "schedule",
            triggers.c.status == "active",
            triggers.c.next_fire_at <= now,
        )
        .order_by(triggers.c.next_fire_at)
        .limit(limit)
    )
    return [TriggerRecord(*row) for row in await conn.execute(query)]


async def claim_tick(
    conn: Conn, trigger_id: str, due: int, next_fire_at: int, fired: int, at: int
) -> bool:
    """Move a schedule from its tick ``due`` on to ``next_fire_at`` (``fired``: the tick
    handled). True for the one caller that moved it: of processes handling the same tick, only
    that one records it. (A schedule stopped while its tick was handled is moved on too: the
    tick's refusal is recorded once; disabling clears ``next_fire_at``, so no claim moves it.)"""
    query = (
        update(triggers)
        .where(triggers.c.id == trigger_id, triggers.c.next_fire_at == due)
        .values(next_fire_at=next_fire_at, last_fire_at=fired, updated_at=at)
    )
    return (await conn.execute(query)).rowcount == 1


async def add_event(conn: Conn, event: TriggerEvent) -> None:
    values = {f: getattr(event, f) for f in TriggerEvent.__dataclass_fields__}
    await conn.execute(insert(trigger_events).values(values))


async def events(conn: Conn, trigger_id: str, before: str | None, limit: int) -> list[TriggerEvent]:
    """The trigger's history, newest first, ``limit`` at most, before the id ``before``."""
    query = select(*_EVENT_COLUMNS).where(trigger_events.c.trigger_id == trigger_id)
    if before is not None:
        query = query.where(trigger_events.c.id < before)
    query = query.order_by(trigger_events.c.id.desc()).limit(limit)
    return [TriggerEvent(*row) for row in await conn.execute(query)]


async def prune_events(conn: Conn, trigger_id: str, kept: int) -> None:
    """Keep the newest ``kept`` events of the trigger."""
    cutoff = (
        select(trigger_events.c.id)
        .where(trigger_events.c.trigger_id == trigger_id)
        .order_by(trigger_events.c.id.desc())
        .offset(kept)
        .limit(1)
        .scalar_subquery()
    )
    await conn.execute(
        delete(trigger_events).where(
            trigger_events.c.trigger_id == trigger_id, trigger_events.c.id <= cutoff
        )
    )
