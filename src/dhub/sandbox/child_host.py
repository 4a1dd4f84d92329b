"""The supervisor's side of a function's knowledge calls (dhub_knowledge.py; docs/sandbox.md
"Knowledge from code"). Copied into the sandbox next to child.py, which loads it; standard
library only; the server never imports it.

During a call the function's process may write knowledge requests on its result pipe, each a
line of its own starting ``{"kind": "host"``, before its result. For each, the supervisor
checks what it can (its size, its shape, how many this call made), and sends the server a
line of its own making: ``{"seq", "kind": "host", "id", "name", "arguments"}``, ``seq`` being
the call's. The server answers ``{"seq", "kind": "host", "id", "ok", "value" | "message"}`` on
the supervisor's stdin; the supervisor writes ``{"ok", "value" | "message"}``, and nothing
else, on the call's answer pipe, which only the function's process reads.

One request at a time: the function's helper sends the next only once it has read the answer
to the last, so a request that arrives earlier means the function wrote requests of its own,
and the call fails (``broken``). The function can make the server perform only the knowledge
its run may reach, for its run: everything that names the run and its user is the server's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

PREFIX = b'{"kind": "host"'


class HostRelay:
    """One call's knowledge requests: checked, sent on, answered in order."""

    def __init__(self, seq: Any, answer_w: int, limits: dict[str, Any]) -> None:
        self.seq = seq
        self.answer_w = answer_w
        self.most = int(limits.get("host_calls") or 100)
        self.request_bytes = int(limits.get("host_request") or 64 << 10)
        self.count = 0
        self.waiting: int | None = None  # the id of the request the server has now
        self.out = b""  # the answer being written on the answer pipe
        self.broken = False  # a request came before the answer to the last was written

    def busy(self) -> bool:
        return self.waiting is not None or bool(self.out)

    def request(self, line: bytes, send: Callable[[dict[str, Any]], None]) -> None:
        """A request line from the function's process: send it on, or answer why not."""
        if self.busy():
            self.broken = True
            return
        self.count += 1
        asked = _parsed(line, self.request_bytes)
        if isinstance(asked, str):
            self.out = _line({"ok": False, "message": asked})
        elif self.count > self.most:
            message = (
                f"more than {self.most} knowledge calls in one call of the function: ask for "
                "more at once (a filter, a page of rows), or split the work over several calls"
            )
            self.out = _line({"ok": False, "message": message})
        else:
            self.waiting = self.count
            name, arguments = asked
            send({"seq": self.seq, "kind": "host", "id": self.count, "name": name,
                  "arguments": arguments})  # fmt: skip

    def answer(self, reply: dict[str, Any]) -> None:
        """The server's answer line: the one awaited goes on to the function."""
        if self.waiting is None or reply.get("seq") != self.seq or reply.get("id") != self.waiting:
            return  # a call's that ended (its function returned before reading it)
        self.waiting = None
        if reply.get("ok") is True:
            self.out = _line({"ok": True, "value": reply.get("value")})
        else:
            message = reply.get("message")
            self.out = _line({"ok": False, "message": str(message)[:20_000]})

    def write(self) -> bool:
        """Write what the pipe takes now; whether the answer is all written (or cannot be:
        the function closed its end)."""
        try:
            written = os.write(self.answer_w, self.out[: 1 << 16])
        except BlockingIOError:
            return False
        except OSError:
            written = len(self.out)
        self.out = self.out[written:]
        return not self.out


def _parsed(line: bytes, most: int) -> tuple[str, dict[str, Any]] | str:
    """The tool's name and arguments a request asks for, or why it is refused."""
    if len(line) + 1 > most:
        return f"the knowledge request is {len(line) + 1} bytes, over the limit of {most}"
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        request = None
    if not isinstance(request, dict):
        return "a malformed knowledge request"
    name, arguments = request.get("name"), request.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return "a knowledge request names a tool (a string) and gives its arguments (an object)"
    return name[:200], arguments


def _line(answer: dict[str, Any]) -> bytes:
    return (json.dumps(answer) + "\n").encode()
