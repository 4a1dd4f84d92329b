"""The in-process executor: runs a compiled workflow to its end by performing the stepper's
commands through the ports (DESIGN.md 3, 4).

Every command runs as its own asyncio task, so the branches of a fan-out or a parallel node
really run at the same time. Their results go into one queue and are fed to the stepper one at
a time, stamped with the clock's time: the stepper is pure and sees a single, ordered history.
``Cancel`` cancels the named tasks (a function's child process dies with its task); ``Complete``
and ``Fail`` end the run, and whatever still runs is cancelled and awaited before returning.

A port that raises fails its command (kind ``crashed``, or the PortError's kind) and the
stepper decides what that means; the executor itself never dies of a port. Cancelling the
executor's task (Ctrl-C) feeds ``CancelRun`` to the stepper before the cancellation goes on.

Nothing here is persisted yet: the durable executor (checkpoint per step, leases) wraps the
same loop later.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dhub.engine.compile import CompiledGraph
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    CallChat,
    CallFunction,
    CallKnowledge,
    CallModel,
    Cancel,
    CancelRun,
    Command,
    Complete,
    Confirmed,
    Done,
    Event,
    Fail,
    InputGiven,
    RunState,
    RunStatus,
    SleepUntil,
    Step,
    Woke,
    node_key,
)
from dhub.engine.stepper import Stepper
from dhub.observability import logs
from dhub.runtime.ports import (
    Clock,
    CodeKnowledge,
    FunctionPort,
    HumanPort,
    KnowledgePort,
    Live,
    ModelPort,
    NoKnowledge,
    PortError,
)

Observer = Callable[[dict[str, Any]], None]
Journal = Callable[[Step], Awaitable[None]]  # persists a step; the run waits for it
Task = (
    CallFunction
    | CallKnowledge
    | CallModel
    | CallChat
    | SleepUntil
    | AwaitInput
    | AwaitConfirmation
)


@dataclass(frozen=True)
class RunResult:
    status: RunStatus
    outputs: dict[str, Any]
    error: dict[str, Any] | None
    events: list[dict[str, Any]]  # the trace, each event stamped with the clock's "time"
    state: RunState


@dataclass(frozen=True)
class Ports:
    functions: FunctionPort
    model: ModelPort
    clock: Clock
    human: HumanPort
    knowledge: KnowledgePort = dataclasses.field(default_factory=NoKnowledge)


async def run_workflow(
    graph: CompiledGraph,
    inputs: dict[str, Any],
    *,
    functions: FunctionPort,
    model: ModelPort,
    clock: Clock,
    human: HumanPort,
    knowledge: KnowledgePort | None = None,
    observer: Observer | None = None,
    context: dict[str, Any] | None = None,
    conversation: dict[str, Any] | None = None,
    journal: Journal | None = None,
    live: Live | None = None,
) -> RunResult:
    """Run ``graph`` with ``inputs`` to its end. ``observer`` sees every trace event as it
    happens; ``context`` is the run's ``sys`` scope, ``conversation`` its conversation
    variables (chat mode); ``journal`` persists each step before its commands are performed
    (the durable executor's hook); ``live`` takes the events that stream between steps (a
    model's ``llm.delta`` s): the durable executor's journal saves them, ``dhub run`` prints
    them."""
    stepper = Stepper(graph)
    ports = Ports(functions, model, clock, human, knowledge or NoKnowledge())
    execution = _Execution(stepper, ports, observer, journal, live)
    first = stepper.start(inputs, clock.now(), context=context, conversation=conversation)
    return await execution.drive(first, record_first=True)


async def resume_workflow(
    graph: CompiledGraph,
    state: RunState,
    outstanding: list[Command],
    *,
    functions: FunctionPort,
    model: ModelPort,
    clock: Clock,
    human: HumanPort,
    knowledge: KnowledgePort | None = None,
    observer: Observer | None = None,
    journal: Journal | None = None,
    live: Live | None = None,
) -> RunResult:
    """Go on with a run saved earlier: ``outstanding`` are the commands it had issued and not
    seen answered (calls run again, timers are re-armed at their times, people are asked
    again); then as ``run_workflow``."""
    ports = Ports(functions, model, clock, human, knowledge or NoKnowledge())
    execution = _Execution(Stepper(graph), ports, observer, journal, live)
    return await execution.drive(Step(state, list(outstanding), []), record_first=False)


class _Execution:
    """One run: the stepper's state, the tasks performing its commands, the result queue."""

    def __init__(
        self,
        stepper: Stepper,
        ports: Ports,
        observer: Observer | None,
        journal: Journal | None,
        live: Live | None = None,
    ) -> None:
        self._stepper = stepper
        self._live = live
        self._ports = ports
        self._observer = observer
        self._journal = journal
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._tasks: dict[str, asyncio.Task[None]] = {}  # command id -> its task
        self._stopping: set[asyncio.Task[None]] = set()  # cancelled, maybe not finished yet
        self._busy = 0  # tasks doing work (calls), as opposed to waiting on time or people
        self._asks: dict[str, AwaitInput] = {}  # node key -> its open human task
        self._trace: list[dict[str, Any]] = []

    async def drive(self, step: Step, record_first: bool) -> RunResult:
        """Perform ``step``'s commands, feed back what happens, until the run ends. Each step
        is journaled before its commands start, so none is performed unrecorded."""
        clock = self._ports.clock
        try:
            try:
                if record_first:
                    await self._record_step(step)
                while (end := self._perform(step)) is None:
                    if self._stalled():
                        return self._result(step.state, Fail(_STALLED))
                    event = await self._next()
                    step = self._stepper.step(step.state, event, in_place=True)
                    await self._record_step(step)
                return self._result(step.state, end)
            except asyncio.CancelledError:
                # Cancelled waiting for a result, or while a step was being saved (the journal
                # lets the save finish first): the cancellation is a step of its own.
                cancelled = CancelRun("the run was cancelled", clock.now())
                step = self._stepper.step(step.state, cancelled, in_place=True)
                await self._record_step(step)
                self._perform(step)
                raise
        finally:
            await self._shutdown()
            clock.idle()

    async def _record_step(self, step: Step) -> None:
        if self._journal is not None:
            await self._journal(step)

    def _perform(self, step: Step) -> Complete | Fail | None:
        """Record the step's trace and start its commands; the end of the run, if it ended."""
        self._record(step.events)
        end: Complete | Fail | None = None
        for command in step.commands:
            if isinstance(command, Complete | Fail):
                end = command
            elif isinstance(command, Cancel):
                self._cancel(command.command_ids)
            else:
                self._spawn(command)
        self._ask_again(step)
        return end

    def _record(self, events: list[dict[str, Any]]) -> None:
        now = self._ports.clock.now()
        for event in events:
            stamped = {**event, "time": now}
            self._trace.append(stamped)
            if self._observer is not None:
                self._observer(stamped)

    async def _next(self) -> Event:
        """The next result, stamped with the time it is fed at. Tells the clock when nothing
        but a timer or a person can move the run on."""
        if self._idle():
            # Tasks created by the last step have not run yet: let them reach their first
            # wait, so a new sleeper is known to the clock before it hears "idle".
            await asyncio.sleep(0)
            if self._idle():
                self._ports.clock.idle()
        event = await self._queue.get()
        return dataclasses.replace(event, now=self._ports.clock.now())

    def _idle(self) -> bool:
        return self._busy == 0 and self._queue.empty()

    def _stalled(self) -> bool:
        """No result queued and no task left to produce one: the run could never end."""
        return self._queue.empty() and all(task.done() for task in self._tasks.values())

    # -- tasks ----------------------------------------------------------------------------------

    def _spawn(self, command: Command, problem: str | None = None) -> None:
        if not isinstance(command, Task):
            raise TypeError(f"the executor cannot perform {type(command).__name__}")
        busy = isinstance(command, CallFunction | CallKnowledge | CallModel | CallChat)
        self._busy += busy
        if isinstance(command, AwaitInput):
            self._asks[node_key(command.frame, command.node_id)] = command
        task = asyncio.create_task(self._attempt(command, busy, problem))
        self._tasks[command.command_id] = task
        task.add_done_callback(lambda done: self._forget(command.command_id, done))

    def _forget(self, command_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(command_id) is task:  # a new ask may have replaced it
            del self._tasks[command_id]

    async def _attempt(self, command: Task, busy: bool, problem: str | None) -> None:
        logs.node_id.set(command.node_id)  # this call's task: its log lines name the node
        try:
            event = await self._dispatch(command, problem)
        except PortError as exc:
            error = {"kind": exc.kind, "message": str(exc), **exc.details}
            event = Done(command.command_id, False, error=error)
        except Exception as exc:  # a port's bug fails the command, never the executor
            event = Done(command.command_id, False, error=_crash(command, exc))
        finally:
            self._busy -= busy
        self._queue.put_nowait(event)

    async def _dispatch(self, command: Task, problem: str | None) -> Event:
        ports = self._ports
        if isinstance(command, CallFunction):
            if command.knowledge:  # its code may call the agent's knowledge, for this run
                host = CodeKnowledge(ports.knowledge, command, self._live)
                done = await ports.functions.call(command, host=host)
            else:
                done = await ports.functions.call(command)
            return dataclasses.replace(done, command_id=command.command_id)
        if isinstance(command, CallKnowledge):
            done = await ports.knowledge.call(command)
            return dataclasses.replace(done, command_id=command.command_id)
        if isinstance(command, CallModel):
            reply = await ports.model.complete(command, self._live)
            return Done(command.command_id, True, reply.value, usage=reply.usage)
        if isinstance(command, CallChat):
            reply = await ports.model.chat(command, self._live)
            return Done(command.command_id, True, reply.value, usage=reply.usage)
        if isinstance(command, SleepUntil):
            await ports.clock.sleep_until(command.at)
            return Woke(command.command_id)
        if isinstance(command, AwaitInput):
            answer = await ports.human.ask(command, problem)
            return InputGiven(command.command_id, dict(answer.values), answer.responded_by)
        decision = await ports.human.confirm(command)
        return Confirmed(
            command.command_id, decision.approve, decision.arguments, decision.reason, decision.by
        )

    def _ask_again(self, step: Step) -> None:
        """A refused answer leaves the human task open: ask the person again, saying why,
        unless the stepper opened a new task for the node itself."""
        reopened = {
            node_key(c.frame, c.node_id) for c in step.commands if isinstance(c, AwaitInput)
        }
        for event in step.events:
            if event.get("type") != "input.rejected":
                continue
            key = node_key(event.get("frame", ""), event["node_id"])
            request = self._asks.get(key)
            if request is None or key in reopened:
                continue
            asking = self._tasks.get(request.command_id)
            if asking is None or asking.done():
                self._spawn(request, _refusal(event))

    def _cancel(self, command_ids: tuple[str, ...]) -> None:
        for command_id in command_ids:
            task = self._tasks.pop(command_id, None)
            if task is not None and not task.done():
                task.cancel()
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def _shutdown(self) -> None:
        """Cancel what still runs and wait for it, so no call outlives the run."""
        self._cancel(tuple(self._tasks))
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    def _result(self, state: RunState, end: Complete | Fail) -> RunResult:
        if isinstance(end, Complete):
            return RunResult("succeeded", dict(end.outputs), None, self._trace, state)
        status: RunStatus = state.status if state.status != "running" else "failed"
        return RunResult(status, dict(state.outputs), dict(end.error), self._trace, state)


_STALLED = {
    "kind": "stalled",
    "message": "the run waits for nothing and did not end (an engine bug)",
}


def _crash(command: Task, exc: Exception) -> dict[str, Any]:
    port = {
        CallFunction: "function",
        CallKnowledge: "knowledge",
        CallModel: "model",
        CallChat: "model",
        SleepUntil: "clock",
        AwaitInput: "human",
        AwaitConfirmation: "human",
    }[type(command)]
    return {
        "kind": "crashed",
        "message": f"the {port} port failed on node '{command.node_id}': "
        f"{type(exc).__name__}: {exc}",
    }


def _refusal(event: dict[str, Any]) -> str:
    error = event.get("error")
    if isinstance(error, dict):
        error = error.get("message")
    return str(event.get("message") or error or "the answer was refused")
