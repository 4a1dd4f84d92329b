"""What the durable executor writes about a step, as plain data (DESIGN.md 4).

Commands are stored so that a run resumed in another process can perform the ones its saved
state still waits on (its ``pending`` commands); a run's status and what it waits for follow
from those pending commands. Pure functions: the store and the executor service use them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dhub.engine.react import pending_messages
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
    values are not changed after they are issued). A react loop's model call is stored
    without its messages: they are the loop's transcript, which the run's state keeps, and
    ``command_from`` takes them from there (each call storing its whole transcript made a
    long loop's stored calls grow with the square of its turns)."""
    names = _FIELDS.get(type(command))
    if names is None:
        names = _FIELDS[type(command)] = tuple(f.name for f in dataclasses.fields(command))
    payload = {name: getattr(command, name) for name in names}
    if isinstance(command, CallChat):
        payload["messages"] = FROM_STATE
    return payload


FROM_STATE = "$state"  # a model call's messages: the loop's transcript in the run's state


def command_from(
    kind: str, payload: dict[str, Any], state: dict[str, Any] | None = None
) -> Command:
    """The command a stored row holds; ``state``: the run's saved state (its ``agents``
    give a model call's messages back)."""
    cls = KINDS[kind]
    values = {
        key: tuple(value) if key in _TUPLES and isinstance(value, list) else value
        for key, value in payload.items()
    }
    if cls is CallChat and values.get("messages") == FROM_STATE:
        messages = pending_messages(
            (state or {}).get("agents") or {}, str(values.get("frame", "")),
            str(values["node_id"]), str(values.get("path", "")), str(values["command_id"]),
        )  # fmt: skip
        if messages is None:
            raise ValueError(f"model call {values['command_id']}: its loop is not in the state")
        values["messages"] = messages
    command: Command = cls(**values)
    return command


_FIELDS: dict[type, tuple[str, ...]] = {}


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
