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
import time
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
    SleepUntil,
    Step,
)
from dhub.runtime import checkpoints, journal
from dhub.runtime.deltas import coalesce
from dhub.runtime.executor import RunResult, resume_workflow, run_workflow
from dhub.runtime.group_commit import GroupCommitter
from dhub.runtime.ports import Answer, Clock, Decision, FunctionPort, ModelPort
from dhub.store import runs as store
from dhub.store.db import Database
from dhub.store.step_batch import Reply, StepRows, StepWrite

log = logging.getLogger(__name__)

GraphLoader = Callable[[str, int], Awaitable[CompiledGraph]]  # agent id, version -> graph
FunctionsFor = Callable[[str], FunctionPort]  # owner (agent version) -> its function port
Work = Callable[["_Live"], Awaitable[RunResult | None]]  # what a run's task does


class Stopped(Exception):
    """The server is shutting down (or evicting the run): the run stops where it is, unsaved
    beyond its last step, to be resumed."""


class Parked(Exception):
    """The run waits for people (or a distant timer) only: its step is saved with the lease
    given up, and the task ends; an answer or the timer wakes it from the database."""


class ServerPeople:
    """The human port of one server run: a task waits until the API delivers an answer. An
    answer that arrives before the run asks (it was just woken) waits in ``early``."""

    def __init__(self, early: dict[str, Answer | Decision] | None = None) -> None:
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self.early: dict[str, Answer | Decision] = dict(early or {})

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

    def deliver(self, command_id: str, value: Answer | Decision) -> bool:
        future = self._waiting.get(command_id)
        if future is None or future.done():
            return False
        future.set_result(value)
        return True


@dataclass
class _Live:
    """A run executing in this process. ``journal`` is set once its state is loaded."""

    people: ServerPeople
    task: asyncio.Task[RunResult | None] = field(init=False)
    journal: _Journal | None = None
    loaded: asyncio.Event = field(default_factory=asyncio.Event)  # journal set, or task ended
    parking: bool = False  # its last step gives the lease up: answers must wake it anew
    evicting: bool = False  # stopped on purpose (nothing to do here): save nothing more


@dataclass
class _Journal:
    """Saves each step of one run (through the group committer) and tells listeners."""

    committer: GroupCommitter
    run_id: str
    owner: str
    step: int  # the next step number to store
    next_seq: int  # the seq of the next event
    before: dict[str, Any]  # the state as last stored
    live: _Live
    issued: dict[str, Command] = field(default_factory=dict)  # open commands by id
    notify: Callable[[str], None] = lambda _: None
    stopping: Callable[[], bool] = lambda: False
    parks: Callable[[dict[str, Command]], bool] = lambda _: False
    conversation_id: str | None = None  # a chat turn: its reply goes into the conversation
    released: bool = False  # the last step saved gave the lease up
    # Streamed events (llm.delta) not saved yet, and the one write at a time of this run.
    shown: list[dict[str, Any]] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    status: str = "running"  # as last saved
    waiting: dict[str, Any] | None = None

    async def __call__(self, step: Step) -> None:
        async with self.writing:
            await self._step(step)

    async def _step(self, step: Step) -> None:
        if self.stopping() or self.live.evicting:
            # A shutdown, not a decision about the run: save nothing (not even the cancelled
            # step the executor makes of it); the lease lapses and a later start resumes it.
            raise Stopped(self.run_id)
        patch, after = checkpoints.advance(self.before, vars(step.state))
        if not patch and not step.events and not step.commands and not self.shown:
            return  # nothing happened (a result for a command abandoned earlier)
        write = self._write(step, patch)
        if write.release and not write.ended:
            self.live.parking = True
        saving = self.committer.save(write)
        try:
            await asyncio.shield(saving)
        except asyncio.CancelledError:
            # Cancelled while saving: the step is saved all the same (or not at all), and
            # the journal must know which before the run goes on to save its cancellation.
            with contextlib.suppress(Exception):
                await asyncio.wait([saving])
            if saving.exception() is None:
                self._saved(write, after)
            raise
        self._saved(write, after)
        if self.live.parking:
            raise Parked(self.run_id)

    def _write(self, step: Step, patch: checkpoints.Patch) -> StepWrite:
        at = now_ms()
        opened = [c for c in step.commands if journal.kind_of(c) is not None]
        self.issued.update({c.command_id: c for c in opened})  # type: ignore[union-attr]
        closed = self._closed(step)
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
        rows = StepRows(
            self.run_id, self.step, self.next_seq, patch, events,
            [store.command_record(self.run_id, c, at) for c in opened], closed, at,
        )  # fmt: skip
        return StepWrite(
            rows, self.owner, status, waiting, ended=ended,
            outputs=step.state.outputs if ended else None,
            error=step.state.error if ended else None, release=ended or park, reply=reply,
        )  # fmt: skip

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
                if not self.shown or self.stopping() or self.live.evicting:
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

    def _saved(self, write: StepWrite, after: dict[str, Any]) -> None:
        self.released = write.release
        self.step += 1
        self.next_seq = write.next_seq
        self.before = after
        self.notify(self.run_id)

    def _closed(self, step: Step) -> dict[str, store.Closing]:
        cancelled = {i for c in step.commands if isinstance(c, Cancel) for i in c.command_ids}
        closed: dict[str, store.Closing] = {}
        for command_id in list(self.issued):
            if command_id not in step.state.pending:
                closed[command_id] = "cancelled" if command_id in cancelled else "done"
                del self.issued[command_id]
        return closed


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


def _ending_events(step: Step) -> list[dict[str, Any]]:
    for command in step.commands:
        if isinstance(command, Complete):
            return [{"type": "run.succeeded", "outputs": command.outputs}]
        if isinstance(command, Fail):
            return [{"type": "run.failed", "error": command.error}]
    return []


@dataclass(frozen=True)
class _Loaded:
    run: store.RunRecord
    graph: CompiledGraph
    state: dict[str, Any]
    commands: list[Command]  # the run's pending commands, oldest first


class RunExecutor:
    """Executes and resumes durable runs as tasks of this process, each under a lease.

    A run that waits only for people (or for a timer further away than ``park_after``
    seconds) leaves memory: its last step gives the lease up, and the run is *parked* in the
    database. An answer wakes it (``answer``/``decide``, from any server process), and so does
    its timer (polled every ``timer_poll`` seconds, and once at start-up: timeouts that expired
    while the server was down fire then)."""

    def __init__(
        self,
        db: Database,
        graphs: GraphLoader,
        functions: FunctionsFor,
        model: ModelPort,
        clock: Clock,
        owner: str,
        lease_seconds: float = 30.0,
        park_after: float = 5.0,
        timer_poll: float = 1.0,
    ) -> None:
        self.db = db
        self._graphs = graphs
        self._functions = functions
        self._model = model
        self._clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.park_after = park_after
        self.timer_poll = timer_poll
        self.committer = GroupCommitter(db)
        self._live: dict[str, _Live] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._chores: list[asyncio.Task[None]] = []
        self._closing = False

    def listen(self, listener: Callable[[str], None]) -> None:
        """``listener(run_id)`` is called after each step of a run is saved (for streams)."""
        self._listeners.append(listener)

    def _notify(self, run_id: str) -> None:
        for listener in self._listeners:
            listener(run_id)

    @property
    def live_count(self) -> int:
        """Runs in this process's memory (parked runs are not)."""
        return len(self._live)

    def lease_until(self, now: int) -> int:
        """When a lease taken at ``now`` (ms) expires: a run created here is created held."""
        return now + int(self.lease_seconds * 1000)

    # -- starting, resuming -----------------------------------------------------------------

    def start(
        self,
        run: store.RunRecord,
        context: dict[str, Any],
        conversation: dict[str, Any] | None = None,
    ) -> None:
        """Execute a run just created, its step 0 stored as ``start_state(context,
        conversation)``; a chat turn gets its conversation's variables."""
        self._spawn(run.id, lambda live: self._execute(live, run, context, conversation))

    async def recover(self) -> list[str]:
        """Resume every unfinished run no worker holds (after a restart), except parked ones,
        and wake the parked runs whose timers are due."""
        self._start_chores()
        resumed = await self._resume_lapsed()
        await self._wake_due()
        return resumed

    async def _resume_lapsed(self) -> list[str]:
        async with self.db.read(snapshot=True) as conn:
            lapsed = await store.lapsed_runs(conn, now_ms())
        resumed = []
        for run_id in lapsed:
            if run_id not in self._live:
                self._wake(run_id)
                resumed.append(run_id)
        return resumed

    def _spawn(self, run_id: str, work: Work, people: ServerPeople | None = None) -> _Live:
        live = _Live(people or ServerPeople())
        self._live[run_id] = live
        live.task = asyncio.ensure_future(work(live))
        live.task.add_done_callback(lambda task: self._forget(run_id, live))
        self._start_chores()
        return live

    def _wake(self, run_id: str, people: ServerPeople | None = None) -> _Live:
        return self._spawn(run_id, lambda live: self._resume(live, run_id), people)

    def _forget(self, run_id: str, live: _Live) -> None:
        live.loaded.set()
        if self._live.get(run_id) is live:
            del self._live[run_id]
        task = live.task
        if task.cancelled():
            return
        problem = task.exception()
        if isinstance(problem, Parked):
            log.debug("run %s is parked until an answer or its timer", run_id)
        elif isinstance(problem, Stopped):
            log.debug("run %s stopped with the server; it resumes at the next start", run_id)
        elif problem is not None:
            log.error("run %s stopped: %r", run_id, problem)

    async def _claim(self, run_id: str) -> bool:
        async with self.db.write() as conn:
            return await store.claim(conn, run_id, self.owner, now_ms(), self.lease_seconds)

    def _journal(self, live: _Live, run: store.RunRecord, state: dict[str, Any]) -> _Journal:
        writer = _Journal(
            self.committer, run.id, self.owner, max(run.step_count, 1), run.event_count + 1,
            state, live, notify=self._notify, stopping=self._is_closing, parks=self._parks,
            conversation_id=run.conversation_id,
        )  # fmt: skip
        live.journal = writer
        live.loaded.set()
        return writer

    async def _execute(
        self,
        live: _Live,
        run: store.RunRecord,
        context: dict[str, Any],
        conversation: dict[str, Any] | None,
    ) -> RunResult | None:
        if run.lease_owner != self.owner and not await self._claim(run.id):
            return None
        graph = await self._graphs(run.agent_id, run.agent_version)
        return await self._first_steps(live, run, graph, context, conversation)

    async def _first_steps(
        self,
        live: _Live,
        run: store.RunRecord,
        graph: CompiledGraph,
        context: dict[str, Any],
        conversation: dict[str, Any] | None,
    ) -> RunResult | None:
        writer = self._journal(live, run, start_state(context, conversation))
        try:
            return await run_workflow(
                graph, run.inputs, functions=self._functions(_owner(run)), model=self._model,
                clock=self._clock, human=live.people, context=context,
                conversation=conversation, journal=writer, live=writer.show,
            )  # fmt: skip
        finally:
            await self._release(run.id, writer)

    async def _load(self, run_id: str) -> _Loaded | None:
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
        return _Loaded(run, graph, saved, commands)

    async def _resume(self, live: _Live, run_id: str) -> RunResult | None:
        loaded = await self._load(run_id)
        if loaded is None:
            return None
        run = loaded.run
        if "status" not in loaded.state:  # saved before its first step: start it now
            start = loaded.state.get("start", {})
            context = start.get("sys") or {"run_id": run.id, "agent_id": run.agent_id,
                                           "user_id": run.user_id}  # fmt: skip
            return await self._first_steps(
                live, run, loaded.graph, context, start.get("conversation")
            )
        writer = self._journal(live, run, loaded.state)
        writer.issued = {c.command_id: c for c in loaded.commands}  # type: ignore[union-attr]
        state = RunState.from_dict(loaded.state)
        outstanding = [c for c in loaded.commands if getattr(c, "command_id", "") in state.pending]
        try:
            return await resume_workflow(
                loaded.graph, state, outstanding, functions=self._functions(_owner(run)),
                model=self._model, clock=self._clock, human=live.people, journal=writer,
                live=writer.show,
            )  # fmt: skip
        finally:
            await self._release(run_id, writer)

    async def _release(self, run_id: str, writer: _Journal) -> None:
        if writer.released:
            return  # its last step gave the lease up (it ended, or it is parked)
        with contextlib.suppress(Exception):  # a lapsed lease is taken over anyway
            async with self.db.write() as conn:
                await store.release(conn, run_id, self.owner)

    def _parks(self, issued: dict[str, Command]) -> bool:
        """A waiting run leaves memory unless a timer of its own is due soon."""
        timers = [c.at for c in issued.values() if isinstance(c, SleepUntil)]
        return not timers or min(timers) - self._clock.now() > self.park_after

    # -- chores: leases, timers -------------------------------------------------------------

    def _start_chores(self) -> None:
        if not self._chores and not self._closing:
            self._chores = [
                asyncio.ensure_future(self._renew_leases()),
                asyncio.ensure_future(self._poll_timers()),
            ]

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            if self._live:
                with contextlib.suppress(Exception):
                    async with self.db.write() as conn:
                        await store.renew_all(conn, self.owner, now_ms(), self.lease_seconds)

    async def _poll_timers(self) -> None:
        """Wake parked runs whose timers are due; once a lease length, also take over runs
        whose worker stopped without the server stopping (another server died, or a run's
        task failed on a database error), as a restart would."""
        swept = time.monotonic()
        while True:
            await asyncio.sleep(self.timer_poll)
            with contextlib.suppress(Exception):
                await self._wake_due()
                if time.monotonic() - swept >= self.lease_seconds:
                    swept = time.monotonic()
                    await self._resume_lapsed()

    async def _wake_due(self) -> None:
        async with self.db.read() as conn:
            due = await store.parked_timers(conn, self._clock.now(), now_ms())
        for run_id, _ in due:
            if run_id not in self._live:
                self._wake(run_id)

    # -- people, cancellation ---------------------------------------------------------------

    async def answer(self, run_id: str, command_id: str, answer: Answer) -> bool:
        """Hand a person's answer to the run, waking it if it is parked; False when the run
        does not wait for this (any more), or another server holds it."""
        return await self._hand(run_id, command_id, answer, AwaitInput)

    async def decide(self, run_id: str, command_id: str, decision: Decision) -> bool:
        return await self._hand(run_id, command_id, decision, AwaitConfirmation)

    async def _hand(
        self,
        run_id: str,
        command_id: str,
        value: Answer | Decision,
        kind: type[AwaitInput] | type[AwaitConfirmation],
    ) -> bool:
        for _ in range(3):  # a run parking as the answer comes is woken again, at most twice
            live = self._live.get(run_id)
            woken = live is None
            if live is None:
                live = self._wake(run_id)
            await live.loaded.wait()
            if live.parking:
                await asyncio.wait([live.task])
                continue
            if live.task.done() or live.journal is None:
                return False  # another server holds it, or it ended
            if live.people.deliver(command_id, value):
                return True
            if isinstance(live.journal.issued.get(command_id), kind):
                live.people.early[command_id] = value  # it asks in a moment
                return True
            if woken:  # woken for nothing: back to the database
                await self._evict(live)
            return False
        return False

    async def _evict(self, live: _Live) -> None:
        live.evicting = True
        live.task.cancel()
        await asyncio.wait([live.task])

    async def cancel(self, run_id: str) -> bool:
        """Cancel a live run: its task saves a cancelled step, then ends."""
        live = self._live.get(run_id)
        if live is None or live.parking:
            return False
        live.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await live.task
        return True

    async def wait(self, run_id: str) -> RunResult | None:
        """The result of a live run once it ends (tests, `stream` requests); None if it is
        not live here or leaves memory (parked, stopped)."""
        live = self._live.get(run_id)
        if live is None:
            return None
        with contextlib.suppress(Parked, Stopped):
            return await asyncio.shield(live.task)
        return None

    def _is_closing(self) -> bool:
        return self._closing

    async def close(self) -> None:
        """Stop executing (a graceful shutdown): tasks end without marking their runs
        cancelled (their leases are released and the next start resumes them)."""
        self._closing = True
        for chore in self._chores:
            chore.cancel()
        for live in list(self._live.values()):
            live.task.cancel()
        await asyncio.gather(*(live.task for live in self._live.values()), return_exceptions=True)


def _owner(run: store.RunRecord) -> str:
    return f"{run.agent_id}@{run.agent_version}"
