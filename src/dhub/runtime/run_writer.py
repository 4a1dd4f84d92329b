"""A durable run's side of the executor (runtime/durable.py): how each step is saved, and the
people who answer it.

``RunWriter`` saves each step of one run through the group committer: the state patch, the
step's events (streamed deltas coalesced in front), the commands it opened and closed, the
run's new status, a chat turn's reply; a step that leaves the run waiting only for people
(or a distant timer) gives the lease up (the run *parks*); a step that consumes an answer
takes its letter out of the run's inbox in the same transaction. ``ServerPeople`` is the
human port of a run executing in a server: answers read from the inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dhub.domain.documents import file_name
from dhub.domain.ids import new_id, now_ms
from dhub.engine import checkpoints, journal
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    Cancel,
    Command,
    Complete,
    Fail,
    Step,
)
from dhub.observability import metrics
from dhub.runtime import mail
from dhub.runtime.deltas import coalesce
from dhub.runtime.executor import RunResult
from dhub.runtime.group_commit import GroupCommitter
from dhub.runtime.ports import Answer, Decision
from dhub.store import artifacts, inbox
from dhub.store import runs as store
from dhub.store.step_batch import Reply, StepRows, StepWrite

log = logging.getLogger(__name__)


class Stopped(Exception):
    """The server is shutting down (or draining): the run stops where it is, unsaved
    beyond its last step, to be resumed."""


class Parked(Exception):
    """The run waits for people (or a distant timer) only: its step is saved with the lease
    given up, and the task ends; an answer or the timer wakes it from the database."""


class ServerPeople:
    """The human port of one server run: a task waits until a letter from the run's inbox
    answers it (``offer``: the executor reads the inbox when the run loads, and when told it
    has mail). A letter for a task the run has not asked yet (it was just woken) waits in
    ``early``. Each letter is taken once: one read again before the step that consumed it
    is saved (and it leaves the inbox) is ignored."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self.early: dict[str, Answer | Decision] = {}
        self._seen: set[str] = set()  # ids of the letters offered already

    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        answer: Answer = await self._wait(request.command_id)
        return answer

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        decision: Decision = await self._wait(request.command_id)
        return decision

    async def _wait(self, command_id: str) -> Any:
        if command_id in self.early:
            return self.early.pop(command_id)
        future = asyncio.get_running_loop().create_future()
        self._waiting[command_id] = future
        try:
            return await future
        finally:
            self._waiting.pop(command_id, None)

    def offer(self, letter: inbox.Letter) -> None:
        key = mail.letter_id(letter)
        if key in self._seen:
            return
        self._seen.add(key)
        value = mail.value_of(letter)
        future = self._waiting.get(letter.command_id)
        if future is not None and not future.done():
            future.set_result(value)
        else:
            self.early[letter.command_id] = value


@dataclass
class Live:
    """A run executing in this process. ``journal`` is set once its state is loaded."""

    people: ServerPeople
    task: asyncio.Task[RunResult | None] = field(init=False)
    journal: RunWriter | None = None
    loaded: asyncio.Event = field(default_factory=asyncio.Event)  # journal set, or task ended
    parking: bool = False  # its last step gives the lease up: answers must wake it anew
    queued: asyncio.Future[None] | None = None  # its place while it waits for admission


@dataclass
class RunWriter:
    """Saves each step of one run (through the group committer) and tells listeners."""

    committer: GroupCommitter
    run_id: str
    owner: str
    step: int  # the next step number to store
    next_seq: int  # the seq of the next event
    before: dict[str, Any]  # the state as last stored
    live: Live
    issued: dict[str, Command] = field(default_factory=dict)  # open commands by id
    notify: Callable[[str], None] = lambda _: None
    stopping: Callable[[], bool] = lambda: False
    # A graceful stop: each run saves the step it is at (its calls' results), then stops
    # before performing anything new; it resumes from there, nothing repeated.
    draining: Callable[[], bool] = lambda: False
    parks: Callable[[dict[str, Command]], bool] = lambda _: False
    conversation_id: str | None = None  # a chat turn: its reply goes into the conversation
    released: bool = False  # the last step saved gave the lease up
    # Streamed events (llm.delta) not saved yet, and the one write at a time of this run.
    shown: list[dict[str, Any]] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    status: str = "running"  # as last saved
    waiting: dict[str, Any] | None = None
    agent_id: str = ""  # for metrics: runs started and finished by agent
    created_at: int | None = None  # the run's (ms): its duration when it ends

    async def __call__(self, step: Step) -> None:
        async with self.writing:
            await self._step(step)

    async def _step(self, step: Step) -> None:
        if self.stopping():
            # A shutdown, not a decision about the run: save nothing (not even the cancelled
            # step the executor makes of it); the lease lapses and a later start resumes it.
            raise Stopped(self.run_id)
        began, first = time.perf_counter(), self.step == 1
        patch, after = checkpoints.advance(self.before, vars(step.state))
        if not patch and not step.events and not step.commands and not self.shown:
            return  # nothing happened (a result for a command abandoned earlier)
        write, taken = self._write(step, patch)
        if write.release and not write.ended:
            self.live.parking = True
        saving = self.committer.save(write, taken)
        try:
            await asyncio.shield(saving)
        except asyncio.CancelledError:
            # Cancelled while saving: the step is saved all the same (or not at all), and
            # the journal must know which before the run goes on to save its cancellation.
            with contextlib.suppress(Exception):
                await asyncio.wait([saving])
            if saving.exception() is None:
                self._saved(write, after)
                self._measure(write, first, began)
            raise
        self._saved(write, after)
        self._measure(write, first, began)
        if self.live.parking:
            raise Parked(self.run_id)
        if self.draining() and not write.ended:
            raise Stopped(self.run_id)

    def _write(
        self, step: Step, patch: checkpoints.Patch
    ) -> tuple[StepWrite, list[tuple[str, str]]]:
        """The step's write, and the inbox letters it takes: those of the tasks it closes
        (answered, timed out, cancelled) and of the answers it refused (the task stays open
        for another one)."""
        at = now_ms()
        opened = [c for c in step.commands if journal.kind_of(c) is not None]
        self.issued.update({c.command_id: c for c in opened})  # type: ignore[union-attr]
        taken = [(self.run_id, command_id) for command_id in self._refused(step)]
        closed = self._closed(step, taken)
        status, waiting = journal.waiting(step.state, list(self.issued.values()))
        self.status, self.waiting = status, waiting
        # Deltas streamed before this step come first: they happened before its events.
        events = self._take_shown() + list(step.events) + _ending_events(step)
        if self.step == 1:
            events.insert(0, {"type": "run.started"})
        ended = status in ("succeeded", "failed", "cancelled")
        reply = None
        if self.conversation_id is not None and status == "succeeded":
            content = chat_reply(step.state.outputs)
            reply = Reply(self.conversation_id, content, step.state.conversation,
                          _transcript(step.state.agents))  # fmt: skip
        park = status == "waiting" and not self.live.people.early and self.parks(self.issued)
        timers = [t for c in self.issued.values() if (t := journal.due_at(c)) is not None]
        rows = StepRows(
            self.run_id, self.step, self.next_seq, patch, events,
            [store.command_record(self.run_id, c, at) for c in opened], closed, at,
            _artifacts(self.run_id, step, at),
        )  # fmt: skip
        usage = step.state.usage
        return StepWrite(
            rows, self.owner, status, waiting, ended=ended,
            outputs=step.state.outputs if ended else None,
            error=step.state.error if ended else None, release=ended or park, reply=reply,
            wake_at=min(timers) if park and timers else None,
            usage=copy.deepcopy(usage) if usage != self.before.get("usage", {}) else None,
        ), taken  # fmt: skip

    def show(self, event: dict[str, Any]) -> None:
        """A model's delta as it streams: saved as soon as the previous write of this run is
        done (deltas that arrive meanwhile are coalesced into one event), or with the next
        step, whichever comes first, so the log has what any stream showed."""
        self.shown.append(event)
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.create_task(self._flush())

    def _take_shown(self) -> list[dict[str, Any]]:
        shown, self.shown = self.shown, []
        return coalesce(shown)

    async def _flush(self) -> None:
        while self.shown:
            async with self.writing:
                if not self.shown or self.stopping():
                    return
                events = self._take_shown()
                rows = StepRows(self.run_id, self.step, self.next_seq, [], events, [], {},
                                now_ms())  # fmt: skip
                write = StepWrite(rows, self.owner, self.status, self.waiting)
                saving = self.committer.save(write)
                try:
                    await asyncio.shield(saving)
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        await asyncio.wait([saving])
                    if not saving.cancelled() and saving.exception() is None:
                        self._saved(write, self.before)
                    raise
                except Exception as exc:  # the next step meets the same problem, and handles it
                    log.warning("run %s: streamed events not saved: %r", self.run_id, exc)
                    return
                self._saved(write, self.before)

    def _measure(self, write: StepWrite, first: bool, began: float) -> None:
        ended = write.status if write.ended else None
        seconds = time.perf_counter() - began
        metrics.step_saved(self.agent_id, seconds, first=first, ended=ended,
                           created_at=self.created_at)  # fmt: skip

    def _saved(self, write: StepWrite, after: dict[str, Any]) -> None:
        self.released = write.release
        self.step += 1
        self.next_seq = write.next_seq
        self.before = after
        self.notify(self.run_id)

    def _closed(self, step: Step, taken: list[tuple[str, str]]) -> dict[str, store.Closing]:
        """The commands the step closed (the human tasks among them into ``taken``)."""
        cancelled = {i for c in step.commands if isinstance(c, Cancel) for i in c.command_ids}
        closed: dict[str, store.Closing] = {}
        for command_id, command in list(self.issued.items()):
            if command_id not in step.state.pending:
                closed[command_id] = "cancelled" if command_id in cancelled else "done"
                del self.issued[command_id]
                if isinstance(command, AwaitInput | AwaitConfirmation):
                    taken.append((self.run_id, command_id))
        return closed

    def _refused(self, step: Step) -> list[str]:
        """The tasks whose answer the step refused (``input.rejected``): the task stays open,
        its letter is consumed."""
        refused = {
            (event.get("frame", ""), event.get("node_id"))
            for event in step.events
            if event.get("type") == "input.rejected"
        }
        return [
            command_id
            for command_id, command in self.issued.items()
            if isinstance(command, AwaitInput) and (command.frame, command.node_id) in refused
        ]


def given_up(
    run: store.RunRecord,
    pending: list[store.CommandRecord],
    owner: str,
    attempts: int,
    last_error: str | None,
) -> tuple[StepWrite, list[tuple[str, str]]]:
    """The step that fails a run whose last ``attempts`` executions saved no step (its graph
    does not load, its next step cannot be written, its process died each time): status
    failed with an error of kind ``unrecoverable`` saying why and how often, its open
    commands cancelled, its lease given up; and the inbox letters of its open tasks. Built
    from the run's row alone: what made it fail (its graph, its state) is not needed."""
    why = last_error or "its executions stopped before saving a step"
    error = {
        "kind": "unrecoverable",
        "message": f"the run could not be resumed: {why} ({attempts} attempts)",
        "attempts": attempts,
    }
    at = now_ms()
    patch: checkpoints.Patch = [
        ["set", ["status"], "failed"],
        ["set", ["error"], error],
        ["set", ["pending"], {}],
    ]
    closed: dict[str, store.Closing] = dict.fromkeys((c.command_id for c in pending), "cancelled")
    events = [{"type": "run.failed", "error": error}]
    rows = StepRows(run.id, run.step_count, run.event_count + 1, patch, events, [], closed, at)
    write = StepWrite(rows, owner, "failed", None, ended=True, error=error, release=True)
    letters = [(run.id, c.command_id) for c in pending if c.kind in store.TASK_KINDS]
    return write, letters


def start_state(
    context: dict[str, Any], conversation: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a run's step 0 saves: how to start it (its ``sys`` context, a chat turn's
    conversation variables), so a run whose server died before its first step still starts.
    The first step's patch replaces it with the run's state."""
    return {"start": {"sys": context, "conversation": conversation}}


def chat_reply(outputs: dict[str, Any]) -> str:
    """A chat turn's reply: the output named ``answer``, else the only text output (DESIGN.md
    3.2), else all outputs as JSON."""
    answer = outputs.get("answer")
    if isinstance(answer, str):
        return answer
    texts = [value for value in outputs.values() if isinstance(value, str)]
    if len(texts) == 1:
        return texts[0]
    return json.dumps(outputs)


def _transcript(agents: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A react chat turn's transcript, kept on the conversation for its next turn."""
    loop = agents.get("agent")
    if loop is None:
        return None
    return {"messages": loop["messages"], "summary": loop.get("summary")}


def _artifacts(run_id: str, step: Step, at: int) -> list[dict[str, Any]]:
    """The documents the step made (``artifact.created`` events with their content), as
    rows saved with the step; each event keeps the artifact's id and size instead of the
    content."""
    rows = []
    for event in step.events:
        if event.get("type") != "artifact.created" or "content" not in event:
            continue
        content = str(event.pop("content")).encode()
        artifact_id = new_id("artifact")
        event["artifact_id"] = artifact_id
        event["size"] = len(content)
        rows.append(
            artifacts.row_of(
                {
                    "id": artifact_id,
                    "run_id": run_id,
                    "name": file_name(str(event.get("name") or ""), str(event.get("format"))),
                    "media_type": event.get("media_type") or "text/plain; charset=utf-8",
                    "format": event.get("format"),
                    "size": len(content),
                    "content": content,
                    "node_id": event.get("node_id"),
                    "template_id": event.get("template_id"),
                    "template_version": event.get("template_version"),
                    "created_at": at,
                    "created_by": str(step.state.sys.get("user_id") or ""),
                }
            )
        )
    return rows


def _ending_events(step: Step) -> list[dict[str, Any]]:
    for command in step.commands:
        if isinstance(command, Complete):
            return [{"type": "run.succeeded", "outputs": command.outputs}]
        if isinstance(command, Fail):
            return [{"type": "run.failed", "error": command.error}]
    return []
