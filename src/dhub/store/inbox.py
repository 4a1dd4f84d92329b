"""The runs' inbox (tables.run_inbox): answers, decisions and cancellations left for a run, in
both execution modes. An answer is saved here, in its own committed transaction, before the
API acknowledges it; the run takes it from here, and the step that consumes it removes it in
that step's transaction (``settle``), so it is applied exactly once, whatever crashes when.
Every letter of a run goes when the run ends."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, select, tuple_
from sqlalchemy.dialects import postgresql

from dhub.store.db import Conn
from dhub.store.runs import ACTIVE
from dhub.store.tables import run_commands, run_inbox, runs

CANCEL = "cancel"  # the command_id of a cancellation (distributed mode)


@dataclass(frozen=True, slots=True)
class Letter:
    run_id: str
    command_id: str
    kind: str  # answer | decision | cancel
    payload: dict[str, Any]


# ON CONFLICT DO NOTHING: PostgreSQL's construct, which SQLite (3.24+) speaks too.
_PUT = postgresql.insert(run_inbox).on_conflict_do_nothing().returning(run_inbox.c.run_id)
# The task, locked until the letter's transaction ends (PostgreSQL; SQLite writes one
# transaction at a time anyway): a step closing it waits, then deletes the letter with it.
_OPEN_TASK = (
    select(run_commands.c.command_id)
    .where(
        run_commands.c.run_id == bindparam("run_id"),
        run_commands.c.command_id == bindparam("command_id"),
        run_commands.c.kind == bindparam("task_kind"),
        run_commands.c.status == "pending",
    )
    .with_for_update()
)


async def put(conn: Conn, letter: Letter, at: int) -> bool:
    """Leave ``letter`` for its run; False when the run has one for that command already
    (the first one stays: one answer per task)."""
    values = {
        "run_id": letter.run_id,
        "command_id": letter.command_id,
        "kind": letter.kind,
        "payload": letter.payload,
        "created_at": at,
    }
    return (await conn.execute(_PUT, values)).first() is not None


async def task_open(conn: Conn, run_id: str, command_id: str, task_kind: str) -> bool:
    """Whether the run's command ``command_id`` (of ``task_kind``: await_input,
    await_confirmation) is still open; in a write transaction, it stays so until the end of
    the transaction (the row is locked)."""
    params = {"run_id": run_id, "command_id": command_id, "task_kind": task_kind}
    return (await conn.execute(_OPEN_TASK, params)).first() is not None


_LETTERS = (
    select(run_inbox.c.run_id, run_inbox.c.command_id, run_inbox.c.kind, run_inbox.c.payload)
    .where(run_inbox.c.run_id == bindparam("run_id"))
    .order_by(run_inbox.c.created_at, run_inbox.c.command_id)
)


async def letters(conn: Conn, run_id: str) -> list[Letter]:
    rows = await conn.execute(_LETTERS, {"run_id": run_id})
    return [Letter(str(r[0]), str(r[1]), str(r[2]), dict(r[3])) for r in rows]


_ANSWERED = select(run_inbox.c.run_id, run_inbox.c.command_id).where(
    run_inbox.c.run_id.in_(bindparam("runs", expanding=True))
)


async def answered(conn: Conn, run_ids: Sequence[str]) -> set[tuple[str, str]]:
    """(run id, command id) of the letters waiting for ``run_ids``: tasks answered already,
    their answers not applied yet."""
    if not run_ids:
        return set()
    rows = await conn.execute(_ANSWERED, {"runs": sorted(set(run_ids))})
    return {(str(r[0]), str(r[1])) for r in rows}


_ADDRESSED = (
    select(run_inbox.c.run_id, runs.c.lease_expires_at)
    .select_from(run_inbox.join(runs, runs.c.id == run_inbox.c.run_id))
    .where(runs.c.status.in_(ACTIVE))
    .distinct()
)


async def addressed(conn: Conn) -> list[tuple[str, int | None]]:
    """(run id, lease expiry) of the unfinished runs that have letters waiting: the ones a
    server sweeping its inbox hands them to, or wakes."""
    rows = await conn.execute(_ADDRESSED)
    return [(str(r[0]), None if r[1] is None else int(r[1])) for r in rows]


_TAKEN = delete(run_inbox).where(
    tuple_(run_inbox.c.run_id, run_inbox.c.command_id).in_(bindparam("pairs", expanding=True))
)
_ENDED = delete(run_inbox).where(run_inbox.c.run_id.in_(bindparam("runs", expanding=True)))


async def settle(conn: Conn, taken: Iterable[tuple[str, str]], ended: Sequence[str]) -> None:
    """Remove the letters (run id, command id) that a step consumed or made moot (the tasks
    it closed), and every letter of runs just ended."""
    pairs = sorted(set(taken))
    if pairs:
        await conn.execute(_TAKEN, {"pairs": pairs})
    if ended:
        await conn.execute(_ENDED, {"runs": list(ended)})
