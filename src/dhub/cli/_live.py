"""`dhub run` at the terminal: the live view of a run's nodes, and a person answering its
human tasks and confirmations. Everything here writes to stderr, so stdout holds only the run's
outputs (a pipe gets clean JSON)."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console
from rich.text import Text

from dhub.engine.state import AwaitConfirmation, AwaitInput
from dhub.runtime.ports import Answer, Decision, PortError

T = TypeVar("T")
_UNSET: Any = object()  # an optional field left empty

_GLYPHS = {
    "node.started": ("▶", "cyan"),
    "node.succeeded": ("✓", "green"),
    "node.failed": ("✗", "red"),
    "node.skipped": ("○", "dim"),
    "node.retrying": ("↻", "yellow"),
    "node.waiting": ("⏸", "magenta"),
    "input.rejected": ("!", "yellow"),
    "input.received": ("✎", "magenta"),
    "confirmation.received": ("✎", "magenta"),
    "input.timed_out": ("⏱", "yellow"),
    "branch.cancelled": ("⊘", "dim"),
    "run.cancelled": ("⊘", "red"),
}


class LiveView:
    """One line per node event, as it happens: glyph, node, frame, duration, and a short
    form of what the node wrote or why it failed."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._started: dict[tuple[str, str], float] = {}
        self._streaming: tuple[str, str] | None = None  # the node whose text is coming in

    def show(self, event: dict[str, Any]) -> None:
        if event["type"] == "llm.delta":
            self._delta(event)
            return
        if self._streaming is not None:
            self._console.print()  # end the streamed text's line
            self._streaming = None
        glyph, style = _GLYPHS.get(event["type"], ("·", "dim"))
        line = Text.assemble((glyph, style), " ", (event.get("node_id", "run"), "bold"))
        if event.get("frame"):
            line.append(f" [{event['frame']}]", "dim")
        duration = self._duration(event)
        if duration is not None:
            line.append(f" {duration:.2f}s", "dim")
        detail = _detail(event)
        if detail:
            line.append(f"  {detail}", "red" if event["type"] == "node.failed" else "")
        self._console.print(line, soft_wrap=True, highlight=False)

    def _delta(self, event: dict[str, Any]) -> None:
        """A model's text as it streams in, on one line under its node."""
        if event.get("kind") not in ("text", "reasoning"):
            return
        key = (event.get("frame", ""), event.get("node_id", ""))
        if self._streaming != key:
            if self._streaming is not None:
                self._console.print()
            self._console.print(Text(f"  {key[1]} ▸ ", "dim"), end="")
            self._streaming = key
        style = "dim italic" if event["kind"] == "reasoning" else ""
        self._console.print(Text(str(event.get("text", "")), style), end="", soft_wrap=True,
                            highlight=False)  # fmt: skip

    def _duration(self, event: dict[str, Any]) -> float | None:
        key = (event.get("frame", ""), event.get("node_id", ""))
        if event["type"] == "node.started":
            self._started[key] = event["time"]
            return None
        if event["type"] in ("node.succeeded", "node.failed", "node.retrying"):
            began = self._started.pop(key, None)
            return None if began is None else event["time"] - began
        return None

    def note(self, text: str, style: str = "", end: str = "\n") -> None:
        self._console.print(Text(text, style), end=end, soft_wrap=True, highlight=False)


def _detail(event: dict[str, Any]) -> str:
    kind = event["type"]
    if kind == "node.succeeded":
        return _short(event.get("outputs") or {})
    if kind in ("node.failed", "node.retrying", "input.rejected"):
        error = event.get("error") or {}
        message = str(error.get("message") or event.get("message") or "")
        if kind == "node.retrying":
            return f"retry {event.get('attempts')} in {event.get('delay', 0):g}s: {message}"
        handled = f" (handled by {event['handled_by']})" if event.get("handled_by") else ""
        return message + handled
    if kind == "node.waiting":
        return f"waiting for {event.get('waiting_for', 'something')}"
    if kind == "input.received":
        return f"answered by {event.get('responded_by') or 'someone'}"
    if kind == "confirmation.received":
        verdict = "approved" if event.get("approve") else "rejected"
        return f"{verdict} by {event.get('by') or 'someone'}"
    if kind == "input.timed_out":
        return f"no answer in time (on_timeout {event.get('on_timeout')})"
    if kind == "branch.cancelled":
        return f"branch {event.get('branch')} cancelled"
    if kind == "run.cancelled":
        return str(event.get("reason") or "cancelled")
    if kind == "knowledge.called":
        return f"{event.get('name')}: {event.get('error') or 'answered'}"
    return ""


def _short(outputs: dict[str, Any], width: int = 70) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in outputs.items())
    return text if len(text) <= width else text[: width - 1] + "…"


class TerminalHuman:
    """The human port at the terminal: asks field by field, typed, one task at a time."""

    def __init__(self, view: LiveView) -> None:
        self._view = view
        # Held by the prompting thread, not the task: a cancelled question's thread still
        # owns the terminal until its line arrives, and the next question waits for it.
        self._terminal = threading.Lock()
        self._who = _user()

    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        values = await _in_thread(lambda: self.fill(request, problem))
        return Answer(values, responded_by=self._who)

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        return await _in_thread(lambda: self.decide(request))

    # fill and decide block on the terminal: a caller with no event loop (`dhub chat`) asks
    # on its own thread, so Ctrl-C interrupts the question and no stray thread reads on.

    def fill(self, request: AwaitInput, problem: str | None = None) -> dict[str, Any]:
        """The form's values, asked field by field (PortError when stdin ends)."""
        with self._terminal:
            return self._fields(request, problem)

    def _fields(self, request: AwaitInput, problem: str | None) -> dict[str, Any]:
        self._view.note(f"? {_where(request)}: {request.prompt}", "bold magenta")
        if problem:
            self._view.note(f"  {problem}", "yellow")
        values = {}
        for field in request.fields:
            value = self._field(request, field)
            if value is not _UNSET:
                values[field["name"]] = value
        return values

    def _field(self, request: AwaitInput, field: dict[str, Any]) -> Any:
        label = f"  {field['name']}"
        if field.get("description"):
            label += f" ({field['description']})"
        options = field.get("options") or []
        optional = not field.get("required", True)
        hints = ["/".join(map(str, options)) if options else _HINTS.get(field["type"], "")]
        hints.append("empty to skip" if optional else "")
        hint = ", ".join(h for h in hints if h)
        prompt = f"{label}{f' [{hint}]' if hint else ''}: "
        while True:
            text = self._read(request, prompt, required=not optional)
            if not text and optional:
                return _UNSET
            try:
                return _typed(field["type"], text, options)
            except ValueError as exc:
                self._view.note(f"  {exc}", "yellow")

    def decide(self, request: AwaitConfirmation) -> Decision:
        """Approve or reject the actor call (PortError when stdin ends)."""
        with self._terminal:
            return self._decision(request)

    def _decision(self, request: AwaitConfirmation) -> Decision:
        arguments = json.dumps(request.arguments, ensure_ascii=False)
        self._view.note(
            f"? {_where(request)}: run actor {request.actor} with {arguments}?", "bold magenta"
        )
        while True:
            text = self._read(request, "  approve [y/n]: ", required=True).lower()
            if text in _YES or text in _NO:
                break
            self._view.note("  answer y or n", "yellow")
        if text in _YES:
            return Decision(True, by=self._who)
        reason = self._read(request, "  reason (optional): ", required=False)
        return Decision(False, reason=reason, by=self._who)

    def _read(self, request: AwaitInput | AwaitConfirmation, prompt: str, required: bool) -> str:
        """One answer line. When stdin is not a terminal the answer is echoed, so the log
        reads like the session; at its end an optional question counts as skipped."""
        self._view.note(prompt, end="")
        line = sys.stdin.readline()
        if not sys.stdin.isatty():
            self._view.note(line.rstrip("\n"))
        if not line and required:
            raise PortError("no_answer", f"no answer for '{request.node_id}': standard input ended")
        return line.strip()


def _where(request: AwaitInput | AwaitConfirmation) -> str:
    return f"{request.node_id} [{request.frame}]" if request.frame else request.node_id


_YES = ("y", "yes")
_NO = ("n", "no")
_HINTS = {"boolean": "y/n", "number": "number", "object": "JSON object", "array": "JSON array"}


def _typed(kind: str, text: str, options: list[Any]) -> Any:
    """The typed value of an answer; ValueError says what was expected."""
    if options:
        for option in options:
            if text == str(option):
                return option
        raise ValueError(f"choose one of {', '.join(map(str, options))}")
    if kind == "boolean":
        if text.lower() in (*_YES, "true"):
            return True
        if text.lower() in (*_NO, "false"):
            return False
        raise ValueError("answer y or n")
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("answer a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    if kind in ("object", "array"):
        wanted = dict if kind == "object" else list
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, wanted):
            raise ValueError(f"answer a JSON {kind}")
        return value
    if not text:
        raise ValueError("an answer is required")
    return text


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment or the password database
        return "terminal"


async def _in_thread(work: Callable[[], T]) -> T:
    """``work()`` in a daemon thread: a prompt blocked on the terminal must not keep the
    process alive when the run ends or is cancelled (asyncio's executor threads would)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if future.done():  # the task was cancelled meanwhile
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def target() -> None:
        value: Any
        try:
            ok, value = True, work()
        except BaseException as exc:  # handed to the awaiting task, which decides
            ok, value = False, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(deliver, ok, value)

    threading.Thread(target=target, daemon=True, name="dhub-prompt").start()
    return await future
