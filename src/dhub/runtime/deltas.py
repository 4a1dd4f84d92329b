"""A model's streamed deltas, coalesced for the run's event log (DESIGN.md 4: "model token
deltas may be coalesced, but whatever a client saw live it can read again")."""

from __future__ import annotations

from typing import Any

_SAME = ("type", "node_id", "frame", "call", "kind", "index")


def coalesce(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent ``llm.delta`` events of the same call and kind (and tool-call index) as one:
    their ``text`` (or ``arguments``) joined, in order. Anything else stays as it is."""
    merged: list[dict[str, Any]] = []
    for event in events:
        last = merged[-1] if merged else None
        if (
            last is not None
            and event.get("type") == "llm.delta"
            and all(last.get(k) == event.get(k) for k in _SAME)
        ):
            field = "arguments" if event.get("kind") == "tool_call" else "text"
            merged[-1] = {**last, field: str(last.get(field, "")) + str(event.get(field, ""))}
        else:
            merged.append(event)
    return merged
