"""A synchronous driver for the pure stepper: an honest fake of the executor.

Calls run in this process in the order they were issued; a person's answers and decisions come
from dicts keyed by node id; sleeps run only when nothing else can, earliest first, and move the
clock to exactly their time. Everything the stepper asked for is logged, so tests can assert on
the commands as well as on the outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dhub.engine.compile import compile_document
from dhub.engine.stepper import (
    AwaitConfirmation,
    AwaitInput,
    CallFunction,
    CallModel,
    Cancel,
    Command,
    Complete,
    Confirmed,
    Done,
    Fail,
    InputGiven,
    SleepUntil,
    Step,
    Stepper,
    Woke,
)


def call_in_process(command: CallFunction, now: float = 0.0) -> Done:
    namespace: dict[str, Any] = {}
    exec(compile(command.source, "<function>", "exec"), namespace)
    entry = namespace.get(command.entry or "") or namespace["main"]
    try:
        return Done(command.command_id, True, entry(**command.inputs), now=now)
    except Exception as exc:
        error = {"kind": "exception", "message": str(exc)}
        return Done(command.command_id, False, error=error, now=now)


@dataclass
class Run:
    step: Step
    trace: list[dict[str, Any]]
    log: list[Command] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> Command:
        return self.step.commands[-1]

    @property
    def outputs(self) -> dict[str, Any]:
        assert isinstance(self.outcome, Complete), self.step.state.error
        return self.outcome.outputs

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.outcome, Fail), self.step.state.outputs
        return self.outcome.error

    def ran(self, kind: str = "node.succeeded") -> list[str]:
        return [
            f"{e['frame']}/{e['node_id']}" if "frame" in e else e["node_id"]
            for e in self.trace
            if e["type"] == kind
        ]


@dataclass
class Driver:
    doc: dict[str, Any]
    model: Callable[[CallModel], Any] | None = None
    answers: dict[str, Any] = field(default_factory=dict)  # node id -> values (or a list)
    decisions: dict[str, Confirmed] = field(default_factory=dict)  # node id -> decision
    function: Callable[[CallFunction, float], Done] = call_in_process

    def __post_init__(self) -> None:
        self.stepper = Stepper(compile_document(self.doc))

    def run(self, inputs: dict[str, Any], now: float = 100.0, max_steps: int = 10_000) -> Run:
        step = self.stepper.start(inputs, now=now)
        run = Run(step, list(step.events))
        outstanding: dict[str, Command] = {}
        for _ in range(max_steps):
            if self._take(run, step.commands, outstanding):
                run.step = step
                return run
            event = self._next_event(step.state.now, outstanding)
            step = self.stepper.step(step.state, event)
            run.trace += step.events
            if any(e["type"] == "input.rejected" for e in step.events):  # the task stays open
                [asked] = [c for c in run.log if getattr(c, "command_id", "") == event.command_id]
                outstanding[event.command_id] = asked
        raise AssertionError("the run did not end")

    def _take(self, run: Run, commands: list[Command], outstanding: dict[str, Command]) -> bool:
        for command in commands:
            run.log.append(command)
            if isinstance(command, Complete | Fail):
                return True
            if isinstance(command, Cancel):
                for command_id in command.command_ids:
                    outstanding.pop(command_id, None)
                    run.cancelled.append(command_id)
            else:
                outstanding[command.command_id] = command
        return False

    def _next_event(self, now: float, outstanding: dict[str, Command]) -> Any:
        for command_id, command in list(outstanding.items()):
            event = self._perform(command, now)
            if event is not None:
                del outstanding[command_id]
                return event
        sleeps = [c for c in outstanding.values() if isinstance(c, SleepUntil)]
        if not sleeps:
            raise AssertionError(f"stuck: nothing to do with {list(outstanding.values())}")
        first = min(sleeps, key=lambda c: c.at)
        del outstanding[first.command_id]
        return Woke(first.command_id, now=first.at)

    def _perform(self, command: Command, now: float) -> Any:
        if isinstance(command, CallFunction):
            return self.function(command, now)
        if isinstance(command, CallModel):
            assert self.model is not None, "this run needs a model"
            return Done(command.command_id, True, self.model(command), now=now)
        if isinstance(command, AwaitInput) and command.node_id in self.answers:
            answer = self.answers[command.node_id]
            if isinstance(answer, list):  # several submissions: the first ones may be refused
                if not answer:
                    return None
                answer = answer.pop(0)
            return InputGiven(command.command_id, answer, "ana", now=now)
        if isinstance(command, AwaitConfirmation) and command.node_id in self.decisions:
            decision = self.decisions[command.node_id]
            return Confirmed(
                command.command_id,
                decision.approve,
                decision.arguments,
                decision.reason,
                decision.by,
                now=now,
            )
        return None
