"""Knowledge from code: a function calls its agent's knowledge tools (docs/sandbox.md
"Knowledge from code"). Copied into every sandbox next to child.py, which loads it before the
function's source; standard library only; the server never imports it.

Inside a function::

    from dhub_knowledge import KnowledgeError, call

    def main(month: int) -> dict:
        rows = call("query_table", {"filter": {"month": month}})
        return {"total": sum(r["units"] for r in rows["rows"])}

``call(name, arguments)`` performs the knowledge tool ``name`` (one of those the agent's tables,
templates and ontologies give it) for the run's user and returns its answer; a refusal (an
unknown tool, one that changes data, no access, a bad argument, too many calls, a request or an
answer too large) raises ``KnowledgeError`` with a message saying why.

How: the request is one line on the call's result pipe, before the function's result; the
sandbox's supervisor checks it and passes it on to the server, and writes the server's answer
on the call's answer pipe, where ``call`` waits for it. One request at a time (a lock), so the
function's threads may call it; its other processes may not.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

__all__ = ["KnowledgeError", "call"]

MAX_REQUEST = 64 << 10  # the supervisor says how much (child.py), and refuses more itself
_lock = threading.Lock()
# The call running now: its result pipe (written) and answer pipe (read); set by child.py.
_channel: tuple[int, int] | None = None


class KnowledgeError(Exception):
    """A knowledge call was refused: the message says why (and never names what the run's
    user cannot read)."""


def call(name: str, arguments: dict[str, Any] | None = None) -> Any:
    """The answer of the agent's knowledge tool ``name`` called with ``arguments``."""
    if not isinstance(name, str):
        raise TypeError(f"the tool's name must be a str, not {type(name).__name__}")
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        raise TypeError(f"the arguments must be a dict, not {type(arguments).__name__}")
    data = (json.dumps({"kind": "host", "name": name, "arguments": arguments}) + "\n").encode()
    if len(data) > MAX_REQUEST:
        raise KnowledgeError(
            f"the request for '{name}' is {len(data)} bytes, over the limit of {MAX_REQUEST}: "
            "send smaller arguments"
        )
    with _lock:
        channel = _channel
        if channel is None:
            raise KnowledgeError(
                "knowledge can be called while the function serves a call, not while its "
                "source loads"
            )
        answer = _exchange(channel, data)
    if answer.get("ok") is True:
        return answer.get("value")
    raise KnowledgeError(str(answer.get("message") or f"the call of '{name}' was refused"))


def _exchange(channel: tuple[int, int], data: bytes) -> dict[str, Any]:
    result_w, answer_r = channel
    try:
        while data:
            data = data[os.write(result_w, data) :]
    except OSError as exc:
        raise KnowledgeError("the call has ended: no knowledge can be called now") from exc
    received = b""
    while b"\n" not in received:
        chunk = os.read(answer_r, 1 << 16)
        if not chunk:
            raise KnowledgeError("the call has ended: no knowledge can be called now")
        received += chunk
    answer = json.loads(received)
    return answer if isinstance(answer, dict) else {}


def begin(result_w: int, answer_r: int, max_request: int) -> None:
    """A call starts (child.py): its pipes."""
    global _channel, MAX_REQUEST
    _channel, MAX_REQUEST = (result_w, answer_r), max_request


def end() -> None:
    """The call's result is about to be written: nothing may use its pipes any more."""
    global _channel
    _channel = None
