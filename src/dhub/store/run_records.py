"""The records of durable runs (DESIGN.md 4), as the run store reads and writes them: shared by
the repository (runs.py) and the group commit of steps (step_batch.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dhub.engine import journal
from dhub.engine.state import AwaitInput, Cancel, Command, Complete, Fail

Closing = Literal["done", "cancelled"]


class StepConflict(Exception):
    """The run is not at the step being recorded (another worker recorded it: the lease was
    lost), or the lease is not held by the given owner. The caller's transaction must roll back.
    """


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    agent_id: str
    agent_version: int
    user_id: str
    status: str
    waiting: dict[str, Any] | None
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None
    usage: dict[str, Any]
    conversation_id: str | None
    idempotency_key: str | None
    step_count: int  # steps stored: the next step to record is this number
    event_count: int  # the seq of the last event (0: none yet)
    created_at: int
    started_at: int | None
    finished_at: int | None
    updated_at: int
    lease_owner: str | None
    lease_expires_at: int | None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One logged event. ``data`` is the event without its ``type`` and ``node_id``."""

    run_id: str
    seq: int
    type: str
    node_id: str | None
    data: dict[str, Any]
    created_at: int

    def as_event(self) -> dict[str, Any]:
        """The event as the engine produced it."""
        head: dict[str, Any] = {"type": self.type}
        if self.node_id is not None:
            head["node_id"] = self.node_id
        return {**head, **self.data}


@dataclass(frozen=True, slots=True)
class CommandRecord:
    run_id: str
    command_id: str
    kind: str  # call_function | call_model | await_input | await_confirmation | sleep_until
    node_id: str
    frame: str
    payload: dict[str, Any]  # the engine command, as dataclasses.asdict gives it
    status: str  # pending | done | cancelled
    due_at: float | None
    assignees: list[str]
    created_at: int
    closed_at: int | None


def command_record(run_id: str, command: Command, at: int) -> CommandRecord:
    """The pending row of an engine command that waits for an answer (not Cancel, Complete or
    Fail: those close commands or end the run)."""
    kind = journal.kind_of(command)
    if kind is None or isinstance(command, Cancel | Complete | Fail):
        raise ValueError(f"{type(command).__name__} is not a command that stays open")
    return CommandRecord(
        run_id=run_id,
        command_id=command.command_id,
        kind=kind,
        node_id=command.node_id,
        frame=command.frame,
        payload=journal.command_payload(command),
        status="pending",
        due_at=journal.due_at(command),
        assignees=list(command.assignees) if isinstance(command, AwaitInput) else [],
        created_at=at,
        closed_at=None,
    )
