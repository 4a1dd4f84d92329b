"""Group commit of run steps: the steps of many runs saved by one transaction (DESIGN.md 4).

``record_step`` (runs.py) saves one step and learns the run's counters from the database. A
run's own worker does not need to: under its lease it is the run's only writer, so it knows
the step number and the next event seq, and the database only has to confirm them. That lets
``write_steps`` save a batch of steps (of many runs) with one statement per table, whatever
the batch's size: on SQLite one commit for all of them, on PostgreSQL one round trip per
statement (psycopg pipelines an executemany).

All of a batch's statements go together (one psycopg pipeline on PostgreSQL). If any step does
not match its run (the lease was lost, or a step is out of order: its guarded update matches
nothing, or its step row is taken) the whole batch raises ``BatchConflict`` and must roll
back; the caller then saves the steps one by one to find which (``record_step`` semantics:
StepConflict for that one only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, bindparam, case, func, insert, null, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.base import Executable

from dhub.engine import checkpoints
from dhub.store import artifacts
from dhub.store import conversations as chats
from dhub.store.db import Conn
from dhub.store.run_records import Closing, CommandRecord, StepConflict
from dhub.store.tables import run_commands, run_events, run_steps, run_task_assignees, runs


class BatchConflict(StepConflict):
    """A step of the batch did not match its run: save them one by one to find which."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A chat turn's answer, added to its conversation with the step that ends the run."""

    conversation_id: str
    content: str
    variables: dict[str, Any]
    transcript: dict[str, Any] | None = None  # a react agent's, for the next turn


@dataclass(frozen=True, slots=True)
class StepRows:
    """What a step adds to the run's tables: its patch, events, opened and closed commands."""

    run_id: str
    step: int  # the run's step_count before this step
    first_seq: int  # the seq of the step's first event (the run's event_count + 1)
    patch: checkpoints.Patch
    events: Sequence[Mapping[str, Any]]
    opened: Sequence[CommandRecord]
    closed: Mapping[str, Closing]
    at: int
    artifacts: Sequence[Mapping[str, Any]] = ()  # run_artifacts rows (template nodes' renders)


@dataclass(frozen=True, slots=True)
class StepWrite:
    """One step of one run, as its worker saves it: its rows and the run's new columns."""

    rows: StepRows
    owner: str  # the lease holder (the write fails if it is not)
    status: str
    waiting: dict[str, Any] | None
    ended: bool = False  # the run finished: outputs, error and finished_at are written
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    release: bool = False  # give the lease up with this step (the run is parked)
    reply: Reply | None = None
    wake_at: float | None = None  # a parked run's next timer (distributed: a scheduled job)
    usage: dict[str, Any] | None = None  # the run's token usage, when this step changed it

    @property
    def next_seq(self) -> int:
        return self.rows.first_seq + len(self.rows.events)


# b_*: SQLAlchemy reserves column names for an UPDATE's own parameters.
_WHERE = (
    runs.c.id == bindparam("b_id"),
    runs.c.step_count == bindparam("b_step"),
    runs.c.lease_owner == bindparam("b_owner"),
)
_PROGRESS = {
    "step_count": bindparam("b_next"),
    "event_count": bindparam("b_events"),
    "updated_at": bindparam("b_at"),
    "status": bindparam("b_status"),
    "waiting": bindparam("b_waiting", type_=runs.c.waiting.type),
    "started_at": func.coalesce(runs.c.started_at, bindparam("b_at")),
    "lease_owner": bindparam("b_lease_owner"),
    # Written only by the steps that change it (a model call's): NULL keeps the column.
    "usage": func.coalesce(bindparam("b_usage", type_=JSON(none_as_null=True)), runs.c.usage),
    # A step that changed the state (or its commands) is progress: the run's count of
    # executions that made none starts again. Streamed events alone are not.
    "attempts": case((bindparam("b_progress", type_=Boolean), 0), else_=runs.c.attempts),
    "lease_expires_at": case(
        (bindparam("b_release", type_=Boolean), null()), else_=runs.c.lease_expires_at
    ),
    # Written by the step that ends the run (NULL keeps them: NULL until then).
    "outputs": func.coalesce(bindparam("b_outputs", type_=runs.c.outputs.type), runs.c.outputs),
    "error": func.coalesce(bindparam("b_error", type_=runs.c.error.type), runs.c.error),
    "finished_at": func.coalesce(bindparam("b_finished", type_=BigInteger), runs.c.finished_at),
}
# One shape for every step, so that a batch is one executemany over its runs in id order: the
# order lease renewal locks them in too (runs.renew_all), or the two deadlock on PostgreSQL.
_STEP = update(runs).where(*_WHERE).values(_PROGRESS)
_INSERT_STEP = insert(run_steps)
_INSERT_EVENT = insert(run_events)
_INSERT_COMMAND = insert(run_commands)
_INSERT_ASSIGNEE = insert(run_task_assignees)
_CLOSE_ONE = (
    update(run_commands)
    .where(
        run_commands.c.run_id == bindparam("b_run_id"),
        run_commands.c.command_id == bindparam("b_command_id"),
        run_commands.c.status == "pending",
    )
    .values(status=bindparam("b_status"), closed_at=bindparam("b_closed_at"))
)


async def write_steps(conn: Conn, writes: Sequence[StepWrite]) -> None:
    """Save ``writes`` in the caller's write transaction (BatchConflict: roll it back)."""
    if not writes:
        return
    ordered = sorted(writes, key=lambda w: (w.rows.run_id, w.rows.step))
    plan = [(_STEP, [_run_values(w) for w in ordered]), *_row_plan([w.rows for w in writes])]
    try:
        counts = await conn.execute_plan(plan)  # one round trip on PostgreSQL
    except IntegrityError as exc:
        # A step row or event seq taken already: another worker stepped the run.
        raise _conflict(writes, len(writes)) from exc
    matched = counts[0]  # the guarded run updates
    if matched != len(writes):
        raise _conflict(writes, len(writes) - matched)
    for w in writes:
        if w.reply is not None:
            await chats.add_message(
                conn, w.reply.conversation_id, "assistant", w.reply.content, w.rows.run_id,
                w.rows.at, variables=w.reply.variables, transcript=w.reply.transcript,
            )  # fmt: skip


def _conflict(writes: Sequence[StepWrite], unmatched: int) -> StepConflict:
    """The caller's transaction must roll back: rows were written for steps that did not
    match their runs."""
    if len(writes) == 1:
        one = writes[0].rows
        return StepConflict(f"run {one.run_id} is not at step {one.step} under this lease")
    return BatchConflict(f"{unmatched} of {len(writes)} steps did not match their runs")


async def insert_rows(conn: Conn, steps: Sequence[StepRows]) -> None:
    """The rows of ``steps`` (of one run or many), one statement per table. The caller has
    moved the runs' counters on (or created them): that is what makes the step numbers and
    seqs unique."""
    await conn.execute_plan(_row_plan(steps))


def _row_plan(steps: Sequence[StepRows]) -> list[tuple[Executable, list[dict[str, Any]]]]:
    if any(c.run_id != s.run_id for s in steps for c in s.opened):
        raise ValueError("opened commands must belong to the run being stepped")
    opened = [c for s in steps for c in s.opened]
    return [
        (_INSERT_STEP, [_step_row(s) for s in steps]),
        (_INSERT_EVENT, [row for s in steps for row in _event_rows(s)]),
        (_INSERT_COMMAND, [_command_row(c) for c in opened]),
        (_INSERT_ASSIGNEE, [
            {"run_id": c.run_id, "command_id": c.command_id, "principal_id": p}
            for c in opened
            for p in dict.fromkeys(c.assignees)
        ]),
        (_CLOSE_ONE, [
            {"b_run_id": s.run_id, "b_command_id": i, "b_status": how, "b_closed_at": s.at}
            for s in steps
            for i, how in s.closed.items()
        ]),
        (artifacts.INSERT, [dict(row) for s in steps for row in s.artifacts]),
    ]  # fmt: skip


def _run_values(w: StepWrite) -> dict[str, Any]:
    values: dict[str, Any] = {
        "b_id": w.rows.run_id,
        "b_step": w.rows.step,
        "b_owner": w.owner,
        "b_next": w.rows.step + 1,
        "b_events": w.next_seq - 1,
        "b_at": w.rows.at,
        "b_status": w.status,
        "b_waiting": w.waiting,
        "b_lease_owner": None if w.release else w.owner,
        "b_release": w.release,
        "b_usage": w.usage,
        "b_progress": bool(w.ended or w.rows.patch or w.rows.opened or w.rows.closed),
        "b_outputs": w.outputs if w.ended else None,
        "b_error": w.error if w.ended else None,
        "b_finished": w.rows.at if w.ended else None,
    }
    return values


def _step_row(w: StepRows) -> dict[str, Any]:
    return {"run_id": w.run_id, "step": w.step, "patch": w.patch, "created_at": w.at}


def _event_rows(w: StepRows) -> list[dict[str, Any]]:
    rows = []
    for seq, event in enumerate(w.events, w.first_seq):
        data = {k: v for k, v in event.items() if k != "type" and k != "node_id"}
        row = {"run_id": w.run_id, "seq": seq, "type": event["type"], "data": data}
        rows.append(row | {"node_id": event.get("node_id"), "created_at": w.at})
    return rows


def _command_row(c: CommandRecord) -> dict[str, Any]:
    return {
        "run_id": c.run_id,
        "command_id": c.command_id,
        "kind": c.kind,
        "node_id": c.node_id,
        "frame": c.frame,
        "payload": c.payload,
        "status": c.status,
        "due_at": c.due_at,
        "assignees": c.assignees,
        "created_at": c.created_at,
        "closed_at": c.closed_at,
    }
