"""The executor's ports (DESIGN.md 3): the only ways a run touches the world.

The stepper decides; the executor performs its commands through five ports: functions (user
Python), knowledge (tables, templates, ontologies), the model, the clock and people. Each is a
Protocol with the implementations the product uses (the subprocess function runner, the real
clock) and the ones tests need that are honest fakes of I/O (a clock whose time moves only when
told).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dhub.domain.knowledge import from_code
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    CallChat,
    CallFunction,
    CallKnowledge,
    CallModel,
    Done,
)
from dhub.sandbox.errors import HostRefused
from dhub.sandbox.runner import FunctionCall, SandboxRunner
from dhub.sandbox.worker import FunctionResult, Host


class PortError(Exception):
    """An expected failure of a port (no provider, no reply left, ...): the command fails with
    this ``kind`` and message (and ``details``, e.g. a provider's name, model and HTTP status),
    instead of the generic ``crashed``."""

    def __init__(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = details or {}


# -- knowledge ----------------------------------------------------------------------------------


class KnowledgePort(Protocol):
    async def call(self, request: CallKnowledge) -> Done:
        """Perform the knowledge operation for the run's user (services/knowledge.py) and
        answer with its ``Done``: a refusal the model should read is ``ok=False``."""
        ...


class NoKnowledge:
    """Where no platform database is at hand (``dhub run FILE``): every operation fails
    saying so."""

    async def call(self, request: CallKnowledge) -> Done:
        raise PortError("unavailable", _outside(f"'{request.operation}'"))


def _outside(what: str) -> str:
    return (
        f"{what} needs the dhub server: tables, templates and ontologies live in its "
        "database (run the agent there, e.g. `dhub agents run`)."
    )


class CodeKnowledge:
    """A function's knowledge calls (docs/sandbox.md "Knowledge from code"): the tools its
    call carries (``CallFunction.knowledge``, the agent's), each performed through the run's
    knowledge port with its bound arguments over the function's, exactly as for the model.
    Tools that change data wait for a person's yes when the model calls them; code has no
    person in the loop, so they are refused. Each call, done or refused, is shown to ``live``
    as a ``knowledge.called`` event (the run's log keeps them)."""

    def __init__(
        self, port: KnowledgePort, request: CallFunction, live: Live | None = None
    ) -> None:
        self.port = port
        self.request = request
        self.live = live
        self.tools = {item["name"]: from_code(item) for item in request.knowledge}
        self.count = 0

    async def __call__(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            value = await self._perform(name, arguments)
        except HostRefused as exc:
            self._show(name, arguments, str(exc))
            raise
        self._show(name, arguments, None)
        return value

    def _show(self, name: str, arguments: dict[str, Any], error: str | None) -> None:
        if self.live is None:
            return
        event: dict[str, Any] = {"type": "knowledge.called", "node_id": self.request.node_id}
        if self.request.frame:
            event["frame"] = self.request.frame
        event.update(name=name, arguments=arguments, ok=error is None)
        if error is not None:
            event["error"] = error
        self.live(event)

    async def _perform(self, name: str, arguments: dict[str, Any]) -> Any:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            raise HostRefused(
                f"No knowledge tool '{name}': the agent's tables, templates and ontologies "
                f"give its code these: {known}."
            )
        if tool.confirm:
            raise HostRefused(
                f"'{name}' changes data, so a person confirms each call of it; code runs with "
                "nobody to ask and cannot call it (let the agent's model call it, or an "
                "actor_call node)."
            )
        self.count += 1
        request = self.request
        command = CallKnowledge(
            f"{request.command_id}.k{self.count}", request.node_id, tool.operation,
            tool.arguments(arguments), request.frame,
        )  # fmt: skip
        try:
            done = await self.port.call(command)
        except PortError as exc:
            raise HostRefused(exc.message) from exc
        if not done.ok:
            raise HostRefused(str((done.error or {}).get("message") or f"'{name}' failed"))
        return done.value


# -- functions ----------------------------------------------------------------------------------


class FunctionPort(Protocol):
    async def call(self, request: CallFunction, host: Host | None = None) -> Done:
        """Run the function and answer with its ``Done`` (the executor stamps ``now``). Must
        stop the work when cancelled. ``host`` performs the knowledge calls its code makes
        (``CodeKnowledge``); the executor passes it only to calls that carry knowledge."""
        ...


class SandboxFunctions:
    """The function port over the sandbox runner (DESIGN.md 5): result kinds become error
    kinds. ``owner`` (an agent version and the run's user, a file) keys the warm workers, with
    the node id, so a worker serves one function of one owner only."""

    def __init__(
        self, runner: SandboxRunner | None = None, owner: str = "", server: bool = True
    ) -> None:
        self.runner = runner or SandboxRunner()
        self._owner = owner
        self._server = server  # False: `dhub run FILE`, where no knowledge is at hand

    async def call(self, request: CallFunction, host: Host | None = None) -> Done:
        result = await self.runner.call(
            FunctionCall(
                source=request.source,
                inputs=request.inputs,
                timeout=request.timeout,
                entry=request.entry,
                dependencies=request.dependencies,
                network=request.network,
                owner=f"{self._owner}#{request.node_id}",
                parameters=request.parameters,
                outputs=request.outputs,
                decorators=request.decorators,
                browser=request.browser,
                host=host or self._no_knowledge,
            )
        )
        if result.ok:
            return Done(request.command_id, True, result.value)
        return Done(request.command_id, False, error=function_error(result))

    async def close(self) -> None:
        """End the warm workers."""
        await self.runner.close()

    async def _no_knowledge(self, name: str, arguments: dict[str, Any]) -> Any:
        """A call that carries no knowledge: its code calls what is not there."""
        if not self._server:
            raise HostRefused(_outside(f"Knowledge ('{name}')"))
        raise HostRefused(
            f"No knowledge tool '{name}': the agent lists no tables, templates or ontologies "
            "whose tools its code could call."
        )


def function_error(result: FunctionResult) -> dict[str, Any]:
    """A failed result as a Done error: ``kind`` and a message a person can read on its own."""
    message = result.message or f"the function failed ({result.kind})"
    if result.error_type and result.kind == "exception" and result.error_type != "ProcessDied":
        message = f"{result.error_type}: {message}" if result.message else result.error_type
    error: dict[str, Any] = {"kind": result.kind, "message": message}
    if result.traceback:
        error["traceback"] = result.traceback
    if result.stderr:
        error["stderr"] = result.stderr
    return error


# -- the model ----------------------------------------------------------------------------------


Live = Callable[[dict[str, Any]], None]  # takes streamed events as they happen (llm.delta)


@dataclass(frozen=True)
class ModelAnswer:
    """What an llm node's call gives back: its value and the tokens it used; why the model
    stopped and which model answered, when the provider said (for traces)."""

    value: Any
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None  # providers/types.py StopReason
    response_model: str | None = None


class ModelPort(Protocol):
    async def complete(self, request: CallModel, live: Live | None = None) -> ModelAnswer:
        """The model's answer: text, or the parsed object when a response schema is given;
        streamed pieces go to ``live`` as they come. Raise PortError for an expected
        failure."""
        ...

    async def chat(self, request: CallChat, live: Live | None = None) -> ModelAnswer:
        """A react loop's model call: the assistant message as JSON (content, tool_calls,
        reasoning, replay, parsed). Raise PortError for an expected failure."""
        ...


class NoModel:
    """The model port of a process that runs no llm nodes (tests, benchmarks)."""

    async def complete(self, request: CallModel, live: Live | None = None) -> ModelAnswer:
        raise self._none(request)

    async def chat(self, request: CallChat, live: Live | None = None) -> ModelAnswer:
        raise self._none(request)

    @staticmethod
    def _none(request: CallModel | CallChat) -> PortError:
        return PortError(
            "no_provider",
            f"node '{request.node_id}' needs model provider '{request.model_provider}' "
            f"(model '{request.model}'), and this process has no model providers",
        )


# -- the clock ----------------------------------------------------------------------------------


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, on the scale of SleepUntil's ``at``."""
        ...

    async def sleep_until(self, at: float) -> None:
        """Return once ``now() >= at``."""
        ...

    def idle(self) -> None:
        """The executor can make no progress until a timer fires or a person answers (or the
        run ended). A simulated clock may then move time on; a real one ignores it."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()

    async def sleep_until(self, at: float) -> None:
        await asyncio.sleep(max(0.0, at - time.time()))
        # The event loop's timer is monotonic and may fire a hair early against wall time.
        if (early := at - time.time()) > 0:
            await asyncio.sleep(early)

    def idle(self) -> None:
        pass


class FakeClock:
    """A clock whose time moves only in ``advance``: sleepers wake exactly at their times, in
    (time, arrival) order, and the run settles after each wake before the next one, so a
    retry scheduled by a wake is itself woken within the same ``advance``."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._idle = asyncio.Event()
        self.requested: list[float] = []  # every ``at`` asked for, in order
        self.woken: list[float] = []  # the time of every wake delivered, in order

    def now(self) -> float:
        return self._now

    async def sleep_until(self, at: float) -> None:
        self.requested.append(at)
        if at <= self._now:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (at, next(self._order), waiter))
        await waiter

    def idle(self) -> None:
        self._idle.set()

    @property
    def sleepers(self) -> list[float]:
        """When the pending sleepers wake, earliest first (cancelled ones left out)."""
        return sorted(at for at, _, waiter in self._sleepers if not waiter.done())

    async def until_idle(self) -> None:
        """Wait until the executor says it can only wait for the clock or a person."""
        await self._idle.wait()

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every sleeper due on the way at its own
        time and waiting for the run to settle after each."""
        target = self._now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            at, _, waiter = heapq.heappop(self._sleepers)
            if waiter.done():  # its sleep was cancelled
                continue
            self._now = at
            self._idle.clear()
            waiter.set_result(None)
            self.woken.append(at)
            await self._idle.wait()
        self._now = target


# -- people -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A person's answer to a human task."""

    values: dict[str, Any]
    responded_by: str | None = None


@dataclass(frozen=True)
class Decision:
    """A person's decision on an actor call."""

    approve: bool
    arguments: dict[str, Any] | None = None
    reason: str = ""
    by: str | None = None


class HumanPort(Protocol):
    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        """Ask for the task's fields; ``problem`` says why the previous answer was refused."""
        ...

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        """Ask whether the actor call may run (maybe with edited arguments)."""
        ...
