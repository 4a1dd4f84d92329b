"""Durable runs (DESIGN.md 4): the run rows, their step patches, events and commands, and the
leases that say which worker drives a run. Repositories flush; services commit.

A step is persisted by ``record_step`` alone, inside the caller's write transaction: the state
patch, the step's events, the commands it opened and the ones it closed, and the run's changed
columns. Either all of it commits or none of it does.

Times: the ``*_at`` columns of rows are milliseconds (``ids.now_ms``), like every other table;
a command's ``due_at`` is seconds on the executor's clock, as the engine's SleepUntil has it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    update,
)

from dhub.domain.ids import now_ms
from dhub.engine import checkpoints
from dhub.store.db import Conn
from dhub.store.run_records import Closing as Closing
from dhub.store.run_records import CommandRecord as CommandRecord
from dhub.store.run_records import EventRecord as EventRecord
from dhub.store.run_records import RunRecord as RunRecord
from dhub.store.run_records import StepConflict as StepConflict
from dhub.store.run_records import command_record as command_record
from dhub.store.step_batch import StepRows, insert_rows
from dhub.store.tables import run_commands, run_events, run_steps, run_task_assignees, runs

ACTIVE = ("queued", "running", "waiting")  # not finished: a worker must drive these
TASK_KINDS = ("await_input", "await_confirmation")
# The run columns a step may change; the rest are fixed at creation or owned by the lease.
_CHANGEABLE = frozenset(
    {"status", "waiting", "outputs", "error", "usage", "conversation_id", "started_at",
     "finished_at"}
)  # fmt: skip


# -- writing ------------------------------------------------------------------------------------

_INSERT_RUN = insert(runs)


async def insert_run(
    conn: Conn,
    record: RunRecord,
    initial_state: dict[str, Any],
    *,
    events: Sequence[Mapping[str, Any]] = (),
    opened: Sequence[CommandRecord] = (),
) -> list[int]:
    """Create the run and its step 0 (the whole initial state, as a patch from ``{}``, with
    the events and commands of that step); the seqs given to ``events``. The record's step and
    event counts are ignored: step 0 is the first step, its events are numbered from 1."""
    values = dataclasses.asdict(record) | {"step_count": 1, "event_count": len(events)}
    values |= {"attempts": 0, "attempt_error": None}
    await conn.execute_plan([(_INSERT_RUN, [values])])
    patch = checkpoints.diff({}, initial_state)
    rows = StepRows(record.id, 0, 1, patch, events, opened, {}, record.created_at)
    await insert_rows(conn, [rows])
    return list(range(1, len(events) + 1))


async def record_step(
    conn: Conn,
    run_id: str,
    step: int,
    patch: checkpoints.Patch,
    *,
    events: Sequence[Mapping[str, Any]] = (),
    opened: Sequence[CommandRecord] = (),
    closed: Mapping[str, Closing] | None = None,
    changes: Mapping[str, Any] | None = None,
    owner: str | None = None,
    at: int | None = None,
) -> list[int]:
    """Persist one step; returns the seqs given to ``events`` (continuing the run's log).

    ``step`` must be the run's next step (its ``step_count``) and, when ``owner`` is given, the
    run's lease must be held by it: otherwise StepConflict, and nothing may be committed.
    ``closed`` maps command ids to how they ended; commands no longer pending stay as they
    were (a result may arrive for a command already cancelled)."""
    at = now_ms() if at is None else at
    changes = dict(changes or {})
    unknown = set(changes) - _CHANGEABLE
    if unknown:
        raise ValueError(f"a step cannot change run columns {sorted(unknown)}")
    last = await _advance(conn, run_id, step, len(events), changes, owner, at)
    first = last - len(events) + 1
    await insert_rows(
        conn, [StepRows(run_id, step, first, patch, events, opened, closed or {}, at)]
    )
    return list(range(first, last + 1))


async def _advance(
    conn: Conn,
    run_id: str,
    step: int,
    new_events: int,
    changes: dict[str, Any],
    owner: str | None,
    at: int,
) -> int:
    """Move the run's counters on, guarded by the step number, in one statement: the row is
    locked until commit, so two writers can never take the same step or event seqs."""
    conds = [runs.c.id == run_id, runs.c.step_count == step]
    if owner is not None:
        conds.append(runs.c.lease_owner == owner)
    stmt = (
        update(runs)
        .where(*conds)
        .values(
            step_count=runs.c.step_count + 1,
            event_count=runs.c.event_count + new_events,
            updated_at=at,
            attempts=0,  # a step saved: the run made progress
            **changes,
        )
        .returning(runs.c.event_count)
    )
    last = (await conn.execute(stmt)).scalar()
    if last is None:
        raise StepConflict(f"run {run_id} is not at step {step} under this lease")
    return int(last)


# -- reading ------------------------------------------------------------------------------------

_RUN_COLUMNS = tuple(runs.c[f.name] for f in dataclasses.fields(RunRecord))
_EVENT_COLUMNS = tuple(run_events.c[f.name] for f in dataclasses.fields(EventRecord))
_COMMAND_COLUMNS = tuple(run_commands.c[f.name] for f in dataclasses.fields(CommandRecord))

_GET_RUN = select(*_RUN_COLUMNS).where(runs.c.id == bindparam("run_id"))
_PATCHES = (
    select(run_steps.c.patch)
    .where(run_steps.c.run_id == bindparam("run_id"))
    .order_by(run_steps.c.step)
)
_EVENTS_AFTER = (
    select(*_EVENT_COLUMNS)
    .where(run_events.c.run_id == bindparam("run_id"), run_events.c.seq > bindparam("after"))
    .order_by(run_events.c.seq)
    .limit(bindparam("limit", type_=Integer))
)
# Ordered by when they were opened; ids break ties within a step.
_PENDING = (
    select(*_COMMAND_COLUMNS)
    .where(run_commands.c.run_id == bindparam("run_id"), run_commands.c.status == "pending")
    .order_by(run_commands.c.created_at, run_commands.c.command_id)
)


async def get_run(conn: Conn, run_id: str) -> RunRecord | None:
    row = (await conn.execute(_GET_RUN, {"run_id": run_id})).first()
    return RunRecord(*row) if row else None


_BY_KEY = select(*_RUN_COLUMNS).where(
    runs.c.agent_id == bindparam("agent_id"), runs.c.idempotency_key == bindparam("key")
)


async def find_by_idempotency_key(conn: Conn, agent_id: str, key: str) -> RunRecord | None:
    """The run an event with this idempotency key already started for the agent."""
    row = (await conn.execute(_BY_KEY, {"agent_id": agent_id, "key": key})).first()
    return RunRecord(*row) if row else None


async def load_state(conn: Conn, run_id: str) -> dict[str, Any]:
    """The run's state after its last stored step: its patches replayed in order."""
    state: dict[str, Any] = {}
    for (patch,) in await conn.execute(_PATCHES, {"run_id": run_id}):
        checkpoints.apply(state, patch)
    return state


async def events_after(conn: Conn, run_id: str, after_seq: int, limit: int) -> list[EventRecord]:
    """Events with seq > ``after_seq`` (0: from the start), in order: SSE's Last-Event-ID."""
    params = {"run_id": run_id, "after": after_seq, "limit": limit}
    return [EventRecord(*row) for row in await conn.execute(_EVENTS_AFTER, params)]


async def pending_commands(conn: Conn, run_id: str) -> list[CommandRecord]:
    return [CommandRecord(*row) for row in await conn.execute(_PENDING, {"run_id": run_id})]


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Equality filters of a run listing; None: any."""

    agent_id: str | None = None
    status: str | None = None
    user_id: str | None = None


@functools.lru_cache(maxsize=64)
def _list_statement(
    equal: tuple[str, ...], restricted: bool, hidden: bool, after: bool
) -> Select[Any]:
    conds: list[ColumnElement[bool]] = [runs.c[name] == bindparam(name) for name in equal]
    conds.extend(_agent_scope(restricted, hidden))
    if after:
        conds.append(runs.c.id < bindparam("after_id"))
    return (
        select(*_RUN_COLUMNS)
        .where(*conds)
        .order_by(runs.c.id.desc())
        .limit(bindparam("limit", type_=Integer))
    )


def _agent_scope(restricted: bool, hidden: bool) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if restricted:
        conds.append(runs.c.agent_id.in_(bindparam("visible", expanding=True)))
    if hidden:
        conds.append(runs.c.agent_id.not_in(bindparam("hidden", expanding=True)))
    return conds


def _scope_values(visible: Sequence[str] | None, hidden: Sequence[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if visible is not None:
        values["visible"] = list(visible)
    if hidden:
        values["hidden"] = list(hidden)
    return values


async def list_runs(
    conn: Conn,
    flt: RunFilter,
    visible_agent_ids: Sequence[str] | None,
    after_id: str | None,
    limit: int,
    hidden_agent_ids: Sequence[str] = (),
) -> list[RunRecord]:
    """A page of runs, newest first (ids sort by creation time); ``after_id`` is the last id
    of the previous page (the API makes it an opaque cursor).

    Access is decided by the caller, not here: ``visible_agent_ids`` are the agents whose runs
    it may read (None: all, for admins and the platform's own jobs), e.g. the ids of its
    sharing.Reach, and ``hidden_agent_ids`` those it may not whatever else (markings it lacks),
    so runs follow their agent's access without a second policy in SQL."""
    equal = tuple(name for name in ("agent_id", "status", "user_id") if getattr(flt, name))
    values: dict[str, Any] = {name: getattr(flt, name) for name in equal}
    values["limit"] = limit
    values |= _scope_values(visible_agent_ids, hidden_agent_ids)
    if after_id is not None:
        values["after_id"] = after_id
    stmt = _list_statement(
        equal, visible_agent_ids is not None, bool(hidden_agent_ids), after_id is not None
    )
    return [RunRecord(*row) for row in await conn.execute(stmt, values)]


async def run_usages(
    conn: Conn,
    flt: RunFilter,
    visible_agent_ids: Sequence[str] | None,
    hidden_agent_ids: Sequence[str],
    since_ms: int | None,
    until_ms: int | None,
) -> list[dict[str, Any]]:
    """The ``usage`` of every run ``list_runs`` would list with the same filter and scope,
    created from ``since_ms`` (inclusive) until ``until_ms`` (exclusive)."""
    conds: list[ColumnElement[bool]] = [
        runs.c[name] == getattr(flt, name)
        for name in ("agent_id", "status", "user_id")
        if getattr(flt, name)
    ]
    conds.extend(_agent_scope(visible_agent_ids is not None, bool(hidden_agent_ids)))
    if since_ms is not None:
        conds.append(runs.c.created_at >= since_ms)
    if until_ms is not None:
        conds.append(runs.c.created_at < until_ms)
    values = _scope_values(visible_agent_ids, hidden_agent_ids)
    rows = await conn.execute(select(runs.c.usage).where(*conds), values)
    return [dict(row[0] or {}) for row in rows]


# -- timers and human tasks ---------------------------------------------------------------------

_DUE = (
    select(run_commands.c.run_id, run_commands.c.command_id, run_commands.c.due_at)
    .where(
        run_commands.c.status == "pending",
        run_commands.c.kind == "sleep_until",
        run_commands.c.due_at <= bindparam("now"),
    )
    .order_by(run_commands.c.due_at)
    .limit(bindparam("limit", type_=Integer))
)


async def due_timers(conn: Conn, now: float, limit: int = 1000) -> list[tuple[str, str, float]]:
    """(run id, command id, due time) of pending SleepUntil commands due by ``now`` (seconds
    on the executor's clock), soonest first."""
    rows = await conn.execute(_DUE, {"now": now, "limit": limit})
    return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]


_assigned = (
    select(run_task_assignees.c.principal_id)
    .where(
        run_task_assignees.c.run_id == run_commands.c.run_id,
        run_task_assignees.c.command_id == run_commands.c.command_id,
    )
    .correlate(run_commands)
)


@functools.lru_cache(maxsize=8)
def _open_tasks_statement(restricted: bool, hidden: bool) -> Select[Any]:
    mine: BindParameter[Any] = bindparam("principals", expanding=True)
    return (
        select(*_COMMAND_COLUMNS)
        .select_from(run_commands.join(runs, runs.c.id == run_commands.c.run_id))
        .where(
            run_commands.c.status == "pending",
            run_commands.c.kind.in_(TASK_KINDS),
            or_(
                runs.c.user_id.in_(mine),
                _assigned.where(run_task_assignees.c.principal_id.in_(mine)).exists(),
            ),
            *_agent_scope(restricted, hidden),
        )
        .order_by(run_commands.c.created_at, run_commands.c.run_id, run_commands.c.command_id)
    )


async def open_tasks(
    conn: Conn,
    principals: Sequence[str],
    visible_agent_ids: Sequence[str] | None = None,
    hidden_agent_ids: Sequence[str] = (),
) -> list[CommandRecord]:
    """Pending human tasks (AwaitInput, AwaitConfirmation) that any of ``principals`` may
    answer: of runs one of them started, or assigned to one of them (DESIGN.md 2). Oldest
    first. The agent scope is as in ``list_runs``: a task is seen only through its agent."""
    values = {"principals": list(principals)} | _scope_values(visible_agent_ids, hidden_agent_ids)
    stmt = _open_tasks_statement(visible_agent_ids is not None, bool(hidden_agent_ids))
    return [CommandRecord(*row) for row in await conn.execute(stmt, values)]


# -- leases -------------------------------------------------------------------------------------

_CLAIMABLE = (
    update(runs)
    .where(
        runs.c.id == bindparam("run_id"),
        runs.c.status.in_(ACTIVE),
        or_(
            runs.c.lease_owner.is_(None),
            runs.c.lease_owner == bindparam("owner"),
            runs.c.lease_expires_at <= bindparam("now"),
        ),
    )
    .values(lease_owner=bindparam("owner"), lease_expires_at=bindparam("until"))
)
_CLAIM = _CLAIMABLE.returning(runs.c.id)
# An execution takes the run up: one more attempt since its last saved step (a step resets it).
_TAKE = _CLAIMABLE.values(attempts=runs.c.attempts + 1).returning(
    runs.c.attempts, runs.c.attempt_error
)
_RELEASE = (
    update(runs)
    .where(runs.c.id == bindparam("run_id"), runs.c.lease_owner == bindparam("owner"))
    .values(lease_owner=None, lease_expires_at=None)
)
# Woken for nothing (a parked run nobody answered): that was no attempt to go on.
_RELEASE_UNTRIED = _RELEASE.values(
    attempts=case((runs.c.attempts > 0, runs.c.attempts - 1), else_=0)
)
# An execution failed before saving a step: how, for the run's error if it gives up. The lease
# is released unless another owner took the run meanwhile (it may have been released already).
_FAILED_ATTEMPT = (
    update(runs)
    .where(
        runs.c.id == bindparam("run_id"),
        runs.c.status.in_(ACTIVE),
        or_(runs.c.lease_owner.is_(None), runs.c.lease_owner == bindparam("owner")),
    )
    .values(attempt_error=bindparam("why"), lease_owner=None, lease_expires_at=None)
)
# Parked: waiting for a person or a timer with nobody holding it (DESIGN.md 4). Such a run is
# not lapsed: an answer or its due timer wakes it (parked_timers), not the start-up recovery.
_UNHELD = or_(runs.c.lease_expires_at.is_(None), runs.c.lease_expires_at <= bindparam("now"))
_LAPSED = (
    select(runs.c.id)
    .where(
        runs.c.status.in_(ACTIVE),
        _UNHELD,
        or_(runs.c.status != "waiting", runs.c.lease_owner.is_not(None)),
    )
    .order_by(runs.c.id)
    .limit(bindparam("limit", type_=Integer))
)
# The rows are locked in id order, as a batch of steps locks them (step_batch.py): in any
# other order the two deadlock on PostgreSQL (an UPDATE has no ORDER BY; its subquery has).
_RENEWABLE = (
    select(runs.c.id)
    .where(
        runs.c.lease_owner == bindparam("owner"),
        runs.c.lease_expires_at > bindparam("now"),
        runs.c.status.in_(ACTIVE),
    )
    .order_by(runs.c.id)
    .with_for_update()
)
_RENEW_ALL = (
    update(runs)
    .where(
        runs.c.id.in_(_RENEWABLE.scalar_subquery()),
        runs.c.lease_owner == bindparam("owner"),
    )
    .values(lease_expires_at=bindparam("until"))
)
_PARKED_DUE = (
    select(run_commands.c.run_id, func.min(run_commands.c.due_at))
    .select_from(run_commands.join(runs, runs.c.id == run_commands.c.run_id))
    .where(
        run_commands.c.status == "pending",
        run_commands.c.kind == "sleep_until",
        run_commands.c.due_at <= bindparam("due"),
        runs.c.status == "waiting",
        _UNHELD,
    )
    .group_by(run_commands.c.run_id)
    .order_by(func.min(run_commands.c.due_at))
    .limit(bindparam("limit", type_=Integer))
)


def _lease_params(run_id: str, owner: str, now: int, seconds: float) -> dict[str, Any]:
    return {"run_id": run_id, "owner": owner, "now": now, "until": now + int(seconds * 1000)}


async def claim(conn: Conn, run_id: str, owner: str, now: int, seconds: float) -> bool:
    """Take the lease of an unfinished run if nobody holds it, it lapsed, or ``owner`` already
    holds it; True when ``owner`` now holds it. One conditional UPDATE, so of two owners
    racing exactly one wins (the loser waits on the row lock, then no longer matches)."""
    params = _lease_params(run_id, owner, now, seconds)
    return (await conn.execute(_CLAIM, params)).first() is not None


@dataclass(frozen=True, slots=True)
class Taken:
    """A run an execution took up (``take``)."""

    attempts: int  # executions since its last saved step, this one included
    last_error: str | None  # how an earlier one of them failed, if it could say


async def take(conn: Conn, run_id: str, owner: str, now: int, seconds: float) -> Taken | None:
    """``claim`` for an execution of the run, counted as one more attempt (a saved step
    resets the count); None when the lease is not ``owner``'s now."""
    row = (await conn.execute(_TAKE, _lease_params(run_id, owner, now, seconds))).first()
    return None if row is None else Taken(int(row[0]), row[1])


async def release(conn: Conn, run_id: str, owner: str, *, untried: bool = False) -> None:
    """Give the lease up; ``untried``: the execution did not try to go on (a parked run
    woken for nothing), so it is not counted as an attempt."""
    await conn.execute(_RELEASE_UNTRIED if untried else _RELEASE, {"run_id": run_id,
                                                                   "owner": owner})  # fmt: skip


async def failed_attempt(conn: Conn, run_id: str, owner: str, error: str) -> None:
    """An execution of the run failed before it saved a step: ``error`` is kept for the run's
    error should it give up, and the lease is released (unless another owner holds it)."""
    await conn.execute(_FAILED_ATTEMPT, {"run_id": run_id, "owner": owner, "why": error})


async def lapsed_runs(conn: Conn, now: int, limit: int = 1000) -> list[str]:
    """Unfinished runs that no worker holds (never claimed, or the lease expired), except
    parked ones: a waiting run whose worker let it go on purpose."""
    rows = await conn.execute(_LAPSED, {"now": now, "limit": limit})
    return [str(r[0]) for r in rows]


async def renew_all(conn: Conn, owner: str, now: int, seconds: float) -> int:
    """Extend every lease ``owner`` still holds, in one statement; how many it extended.
    A lease that lapsed meanwhile is not revived: its run's next step finds out."""
    params = _lease_params("", owner, now, seconds)
    return (await conn.execute(_RENEW_ALL, params)).rowcount


async def parked_timers(
    conn: Conn, due: float, now: int, limit: int = 100
) -> list[tuple[str, float]]:
    """(run id, earliest due time) of waiting runs nobody holds with a timer due by ``due``
    (seconds on the executor's clock), soonest first: the runs a timer should wake."""
    rows = await conn.execute(_PARKED_DUE, {"due": due, "now": now, "limit": limit})
    return [(str(r[0]), float(r[1])) for r in rows]
