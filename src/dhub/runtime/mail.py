"""People's answers and decisions as letters in a run's inbox (store/inbox.py), in both
execution modes: how one is saved before the API acknowledges it, and read back as the value
the run's human port returns.

``leave`` runs in the API's own write transaction: the task must still be open (its row is
locked until the commit, so a step closing it meanwhile waits and then removes the letter with
it), and hold no letter yet (a second answer to the same task is refused: the first one
stays). Once committed, the answer survives any crash: the run consumes it from the inbox,
and the step that does deletes it (run_writer.py), so it is applied exactly once.
"""

from __future__ import annotations

from typing import Any, Literal

from dhub.domain.ids import new_id
from dhub.runtime.ports import Answer, Decision
from dhub.store import inbox
from dhub.store.db import Conn

# What became of an answer: saved (the run will apply it), or refused because the task has
# an answer saved already, or is no longer open (answered and applied, timed out, ended).
Outcome = Literal["saved", "answered", "closed"]
_TASK_KIND = {"answer": "await_input", "decision": "await_confirmation"}


def letter_of(run_id: str, command_id: str, value: Answer | Decision) -> inbox.Letter:
    kind = "answer" if isinstance(value, Answer) else "decision"
    return inbox.Letter(run_id, command_id, kind, payload_of(value))


async def leave(conn: Conn, letter: inbox.Letter, at: int) -> Outcome:
    """Save a person's answer or decision for its run, in the caller's write transaction."""
    task_kind = _TASK_KIND[letter.kind]
    if not await inbox.task_open(conn, letter.run_id, letter.command_id, task_kind):
        return "closed"
    if not await inbox.put(conn, letter, at):
        return "answered"
    return "saved"


def payload_of(value: Answer | Decision) -> dict[str, Any]:
    """The letter's JSON; ``id`` tells this letter from a later one for the same task (after
    a refused answer), so a run never takes one letter twice."""
    if isinstance(value, Answer):
        return {"id": new_id("letter"), "values": value.values, "by": value.responded_by}
    return {"id": new_id("letter"), "approve": value.approve, "arguments": value.arguments,
            "reason": value.reason, "by": value.by}  # fmt: skip


def value_of(letter: inbox.Letter) -> Answer | Decision:
    p = letter.payload
    if letter.kind == "answer":
        return Answer(dict(p.get("values") or {}), p.get("by"))
    return Decision(bool(p.get("approve")), p.get("arguments"), str(p.get("reason") or ""),
                    p.get("by"))  # fmt: skip


def letter_id(letter: inbox.Letter) -> str:
    return str(letter.payload.get("id") or f"{letter.run_id}/{letter.command_id}")
