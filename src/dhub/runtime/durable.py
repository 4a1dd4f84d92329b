"""Durable runs in the server process (DESIGN.md 4, 7: the embedded default).

Each run executes as an asyncio task under a lease. Every step is saved before its commands are
performed, in one write transaction: the state patch, the step's events and the commands it
opened and closed (store/runs.py). A run whose process died is found by its lapsed lease and
resumed from its saved state: the calls it was waiting on run again, timers are re-armed at their
own times, people are asked again; nothing whose result was saved runs twice.

People answer through the API: ``answer`` and ``decide`` hand the answer to the run's task. The
task of a run waiting for a person stays in memory for now (a bounded cache that evicts waiting
runs and resumes them on the answer is the planned next step).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from dhub.domain.ids import now_ms
from dhub.engine.compile import CompiledGraph
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    Cancel,
    Command,
    Complete,
    Fail,
    RunState,
    Step,
)
from dhub.runtime import checkpoints, journal
from dhub.runtime.executor import RunResult, resume_workflow, run_workflow
from dhub.runtime.ports import Answer, Clock, Decision, FunctionPort, ModelPort
from dhub.store import conversations as chats
from dhub.store import runs as store
from dhub.store.db import Database

log = logging.getLogger(__name__)

GraphLoader = Callable[[str, int], Awaitable[CompiledGraph]]  # agent id, version -> graph
FunctionsFor = Callable[[str], FunctionPort]  # owner (agent version) -> its function port


class Stopped(Exception):
    """The server is shutting down: the run stops where it is, to be resumed."""


class ServerPeople:
    """The human port of one server run: a task waits until the API delivers an answer."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[Any]] = {}

    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        answer: Answer = await self._wait(request.command_id)
        return answer

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        decision: Decision = await self._wait(request.command_id)
        return decision

    async def _wait(self, command_id: str) -> Any:
        future = asyncio.get_running_loop().create_future()
        self._waiting[command_id] = future
        try:
            return await future
        finally:
            self._waiting.pop(command_id, None)

    def deliver(self, command_id: str, value: Answer | Decision) -> bool:
        future = self._waiting.get(command_id)
        if future is None or future.done():
            return False
        future.set_result(value)
        return True


@dataclass
class _Live:
    task: asyncio.Task[RunResult | None]
    people: ServerPeople


@dataclass
class _Journal:
    """Saves each step of one run (store.record_step) and tells listeners about new events."""

    db: Database
    run_id: str
    owner: str
    step: int  # the next step number to store
    before: dict[str, Any]  # the state as last stored
    issued: dict[str, Command] = field(default_factory=dict)  # open commands by id
    notify: Callable[[str], None] | None = None
    stopping: Callable[[], bool] = lambda: False
    conversation_id: str | None = None  # a chat turn: its reply goes into the conversation

    async def __call__(self, step: Step) -> None:
        if self.stopping():
            # A shutdown, not a decision about the run: save nothing (not even the cancelled
            # step the executor makes of it); the lease lapses and a later start resumes it.
            raise Stopped(self.run_id)
        after = step.state.to_dict()
        patch = checkpoints.diff(self.before, after)
        if not patch and not step.events and not step.commands:
            return  # nothing happened (a result for a command abandoned earlier)
        at = now_ms()
        opened = [c for c in step.commands if journal.kind_of(c) is not None]
        self.issued.update({c.command_id: c for c in opened})  # type: ignore[union-attr]
        closed = self._closed(step)
        status, waiting = journal.waiting(step.state, list(self.issued.values()))
        changes: dict[str, Any] = {"status": status, "waiting": waiting}
        events = list(step.events) + _ending_events(step)
        if self.step == 1:
            changes["started_at"] = at
            events.insert(0, {"type": "run.started"})
        if status in ("succeeded", "failed", "cancelled"):
            changes |= {"outputs": step.state.outputs, "error": step.state.error}
            changes["finished_at"] = at
        async with self.db.write() as conn:
            await store.record_step(
                conn, self.run_id, self.step, patch, events=events,
                opened=[store.command_record(self.run_id, c, at) for c in opened],
                closed=closed, changes=changes, owner=self.owner, at=at,
            )  # fmt: skip
            if self.conversation_id is not None and status == "succeeded":
                await chats.add_message(
                    conn, self.conversation_id, "assistant", chat_reply(step.state.outputs),
                    self.run_id, at, variables=step.state.conversation,
                )  # fmt: skip
        self.step += 1
        self.before = after
        if self.notify is not None:
            self.notify(self.run_id)

    def _closed(self, step: Step) -> dict[str, store.Closing]:
        cancelled = {i for c in step.commands if isinstance(c, Cancel) for i in c.command_ids}
        closed: dict[str, store.Closing] = {}
        for command_id in list(self.issued):
            if command_id not in step.state.pending:
                closed[command_id] = "cancelled" if command_id in cancelled else "done"
                del self.issued[command_id]
        return closed


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


def _ending_events(step: Step) -> list[dict[str, Any]]:
    for command in step.commands:
        if isinstance(command, Complete):
            return [{"type": "run.succeeded", "outputs": command.outputs}]
        if isinstance(command, Fail):
            return [{"type": "run.failed", "error": command.error}]
    return []


class RunExecutor:
    """Executes and resumes durable runs as tasks of this process, each under a lease."""

    def __init__(
        self,
        db: Database,
        graphs: GraphLoader,
        functions: FunctionsFor,
        model: ModelPort,
        clock: Clock,
        owner: str,
        lease_seconds: float = 30.0,
    ) -> None:
        self.db = db
        self._graphs = graphs
        self._functions = functions
        self._model = model
        self._clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self._live: dict[str, _Live] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._renewer: asyncio.Task[None] | None = None
        self._closing = False

    def listen(self, listener: Callable[[str], None]) -> None:
        """``listener(run_id)`` is called after each step of a run is saved (for streams)."""
        self._listeners.append(listener)

    def _notify(self, run_id: str) -> None:
        for listener in self._listeners:
            listener(run_id)

    # -- starting, resuming -----------------------------------------------------------------

    def start(
        self,
        run: store.RunRecord,
        context: dict[str, Any],
        conversation: dict[str, Any] | None = None,
    ) -> None:
        """Execute a run just created (its step 0 stored, empty); a chat turn gets its
        conversation's variables."""
        self._spawn(run.id, self._execute(run, context, conversation))

    async def recover(self) -> list[str]:
        """Resume every unfinished run no live worker holds (after a restart)."""
        async with self.db.read(snapshot=True) as conn:
            lapsed = await store.lapsed_runs(conn, now_ms())
        resumed = []
        for run_id in lapsed:
            if run_id not in self._live:
                self._spawn(run_id, self._resume(run_id))
                resumed.append(run_id)
        return resumed

    def _spawn(self, run_id: str, work: Awaitable[RunResult | None]) -> None:
        people = ServerPeople()
        task = asyncio.ensure_future(work)
        self._live[run_id] = _Live(task, people)
        task.add_done_callback(lambda _: self._forget(run_id, task))
        if self._renewer is None:
            self._renewer = asyncio.ensure_future(self._renew_leases())

    def _forget(self, run_id: str, task: asyncio.Task[RunResult | None]) -> None:
        live = self._live.get(run_id)
        if live is not None and live.task is task:
            del self._live[run_id]
        if task.cancelled():
            return
        problem = task.exception()
        if isinstance(problem, Stopped):
            log.debug("run %s stopped with the server; it resumes at the next start", run_id)
        elif problem is not None:
            log.error("run %s stopped: %r", run_id, problem)

    async def _claim(self, run_id: str) -> bool:
        async with self.db.write() as conn:
            return await store.claim(conn, run_id, self.owner, now_ms(), self.lease_seconds)

    async def _execute(
        self, run: store.RunRecord, context: dict[str, Any], conversation: dict[str, Any] | None
    ) -> RunResult | None:
        if not await self._claim(run.id):
            return None
        graph = await self._graphs(run.agent_id, run.agent_version)
        writer = _Journal(self.db, run.id, self.owner, 1, {}, notify=self._notify)
        writer.stopping = self._is_closing
        writer.conversation_id = run.conversation_id
        try:
            return await run_workflow(
                graph, run.inputs, functions=self._functions(_owner(run)), model=self._model,
                clock=self._clock, human=self._live[run.id].people, context=context,
                conversation=conversation, journal=writer,
            )  # fmt: skip
        finally:
            await self._release(run.id)

    async def _resume(self, run_id: str) -> RunResult | None:
        if not await self._claim(run_id):
            return None
        async with self.db.read(snapshot=True) as conn:
            run = await store.get_run(conn, run_id)
            saved = await store.load_state(conn, run_id)
            rows = await store.pending_commands(conn, run_id)
        if run is None:
            return None
        graph = await self._graphs(run.agent_id, run.agent_version)
        commands = [journal.command_from(r.kind, r.payload) for r in rows]
        writer = _Journal(self.db, run_id, self.owner, run.step_count, saved, notify=self._notify)
        writer.stopping = self._is_closing
        writer.conversation_id = run.conversation_id
        writer.issued = {c.command_id: c for c in commands}  # type: ignore[union-attr]
        state = RunState.from_dict(saved)
        outstanding = [c for c in commands if getattr(c, "command_id", "") in state.pending]
        try:
            return await resume_workflow(
                graph, state, outstanding, functions=self._functions(_owner(run)),
                model=self._model, clock=self._clock, human=self._live[run_id].people,
                journal=writer,
            )  # fmt: skip
        finally:
            await self._release(run_id)

    async def _release(self, run_id: str) -> None:
        with contextlib.suppress(Exception):  # a lapsed lease is taken over anyway
            async with self.db.write() as conn:
                await store.release(conn, run_id, self.owner)

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            for run_id in list(self._live):
                with contextlib.suppress(Exception):
                    async with self.db.write() as conn:
                        await store.renew(conn, run_id, self.owner, now_ms(), self.lease_seconds)

    # -- people, cancellation ---------------------------------------------------------------

    def answer(self, run_id: str, command_id: str, answer: Answer) -> bool:
        live = self._live.get(run_id)
        return live is not None and live.people.deliver(command_id, answer)

    def decide(self, run_id: str, command_id: str, decision: Decision) -> bool:
        live = self._live.get(run_id)
        return live is not None and live.people.deliver(command_id, decision)

    async def cancel(self, run_id: str) -> bool:
        """Cancel a live run: its task saves a cancelled step, then ends."""
        live = self._live.get(run_id)
        if live is None:
            return False
        live.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await live.task
        return True

    async def wait(self, run_id: str) -> RunResult | None:
        """The result of a live run once it ends (tests, `stream` requests)."""
        live = self._live.get(run_id)
        return None if live is None else await asyncio.shield(live.task)

    def _is_closing(self) -> bool:
        return self._closing

    async def close(self) -> None:
        """Stop executing (a graceful shutdown): tasks end without marking their runs
        cancelled (their leases are released and the next start resumes them)."""
        self._closing = True
        if self._renewer is not None:
            self._renewer.cancel()
        for live in list(self._live.values()):
            live.task.cancel()
        await asyncio.gather(*(live.task for live in self._live.values()), return_exceptions=True)


def _owner(run: store.RunRecord) -> str:
    return f"{run.agent_id}@{run.agent_version}"
