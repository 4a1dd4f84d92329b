"""What the durable executor writes about a step, as plain data (DESIGN.md 4).

Commands are stored so that a run resumed in another process can perform the ones its saved
state still waits on (its ``pending`` commands); a run's status and what it waits for follow
from those pending commands. Pure functions: the store and the executor service use them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    CallChat,
    CallFunction,
    CallKnowledge,
    CallModel,
    Command,
    RunState,
    SleepUntil,
)

KINDS: dict[str, type[Any]] = {
    "call_function": CallFunction,
    "call_knowledge": CallKnowledge,
    "call_model": CallModel,
    "call_chat": CallChat,
    "await_input": AwaitInput,
    "await_confirmation": AwaitConfirmation,
    "sleep_until": SleepUntil,
}
_KIND_OF = {cls: kind for kind, cls in KINDS.items()}
# Fields stored as JSON lists that the command dataclasses hold as tuples.
_TUPLES = ("dependencies", "decorators", "knowledge")


def kind_of(command: Command) -> str | None:
    """The stored kind of a command that waits for an answer; None for Cancel/Complete/Fail."""
    return _KIND_OF.get(type(command))


def command_payload(command: Command) -> dict[str, Any]:
    """The command's fields, to be stored as JSON (shallow: commands are frozen, and their
    values are not changed after they are issued)."""
    names = _FIELDS.get(type(command))
    if names is None:
        names = _FIELDS[type(command)] = tuple(f.name for f in dataclasses.fields(command))
    return {name: getattr(command, name) for name in names}


_FIELDS: dict[type, tuple[str, ...]] = {}


def command_from(kind: str, payload: dict[str, Any]) -> Command:
    cls = KINDS[kind]
    values = {
        key: tuple(value) if key in _TUPLES and isinstance(value, list) else value
        for key, value in payload.items()
    }
    command: Command = cls(**values)
    return command


def due_at(command: Command) -> float | None:
    """When a timer fires, or when a human task times out."""
    if isinstance(command, SleepUntil):
        return command.at
    if isinstance(command, AwaitInput):
        return command.timeout_at
    return None


def waiting(state: RunState, outstanding: list[Command]) -> tuple[str, dict[str, Any] | None]:
    """The run's status and what it waits for: ``running`` while a call is in flight, else
    ``waiting`` for a person (input, confirmation) or the clock; a finished run's own status."""
    if state.status != "running":
        return state.status, None
    pending = [c for c in outstanding if getattr(c, "command_id", None) in state.pending]
    if not pending or any(
        isinstance(c, CallFunction | CallKnowledge | CallModel | CallChat) for c in pending
    ):
        return "running", None
    for kind, waits_for in ((AwaitInput, "input"), (AwaitConfirmation, "confirmation")):
        for command in pending:
            if isinstance(command, kind):
                return "waiting", {
                    "for": waits_for,
                    "node_id": command.node_id,
                    "frame": command.frame,
                    "command_id": command.command_id,
                }
    until = min(c.at for c in pending if isinstance(c, SleepUntil))
    return "waiting", {"for": "timer", "until": until}
