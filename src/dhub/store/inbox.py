"""The runs' inbox (distributed mode): answers, decisions and cancellations that the API
hands to the worker holding a run (tables.run_inbox). Rows are removed by the step that
closes their command, or when the run ends (``settle``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, select, tuple_
from sqlalchemy.dialects import postgresql

from dhub.store.db import Conn
from dhub.store.tables import run_inbox

CANCEL = "cancel"  # the command_id of a cancellation


@dataclass(frozen=True, slots=True)
class Letter:
    run_id: str
    command_id: str
    kind: str  # answer | decision | cancel
    payload: dict[str, Any]


async def put(conn: Conn, letter: Letter, at: int) -> None:
    """Leave ``letter`` for its run; a second one for the same command replaces nothing (the
    first answer wins, as it would in memory)."""
    stmt = (
        postgresql.insert(run_inbox)
        .values(
            run_id=letter.run_id,
            command_id=letter.command_id,
            kind=letter.kind,
            payload=letter.payload,
            created_at=at,
        )
        .on_conflict_do_nothing()
    )
    await conn.execute(stmt)


async def letters(conn: Conn, run_id: str) -> list[Letter]:
    rows = await conn.execute(
        select(run_inbox.c.run_id, run_inbox.c.command_id, run_inbox.c.kind, run_inbox.c.payload)
        .where(run_inbox.c.run_id == run_id)
        .order_by(run_inbox.c.created_at)
    )
    return [Letter(str(r[0]), str(r[1]), str(r[2]), dict(r[3])) for r in rows]


_TAKEN = delete(run_inbox).where(
    tuple_(run_inbox.c.run_id, run_inbox.c.command_id).in_(bindparam("pairs", expanding=True))
)
_ENDED = delete(run_inbox).where(run_inbox.c.run_id.in_(bindparam("runs", expanding=True)))


async def settle(conn: Conn, closed: Iterable[tuple[str, str]], ended: Sequence[str]) -> None:
    """Remove the letters of commands just closed, and every letter of runs just ended."""
    pairs = list(closed)
    if pairs:
        await conn.execute(_TAKEN, {"pairs": pairs})
    if ended:
        await conn.execute(_ENDED, {"runs": list(ended)})
