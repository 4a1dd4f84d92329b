"""A run journaled step by step can stop at any step and go on later from what was saved:
the durable executor's contract (DESIGN.md 4), checked here with the in-process executor."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dhub.engine.compile import compile_document
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    CallFunction,
    Command,
    Done,
    RunState,
    Step,
)
from dhub.runtime.executor import resume_workflow, run_workflow
from dhub.runtime.ports import Answer, Decision, FakeClock, NoModel, SandboxFunctions
from dhub.sandbox.runner import SandboxRunner
from tests.conftest import FIXTURES, load_json, sandbox_settings

pytestmark = pytest.mark.asyncio

TRIAGE = FIXTURES / "valid" / "workflow_triage.json"
URGENT = {"ticket": "Total outage since 9am", "customer": "acme"}


class Crash(Exception):
    """The process died right after this step was saved."""


class Journal:
    """Saves what a durable store would: the state after each step (as JSON) and every
    command issued; crashes once a step issues a command of kind ``crash_on``."""

    def __init__(self, crash_on: type | None = None) -> None:
        self.crash_on = crash_on
        self.states: list[dict[str, Any]] = []
        self.issued: dict[str, Command] = {}

    async def __call__(self, step: Step) -> None:
        self.states.append(json.loads(json.dumps(step.state.to_dict())))
        for command in step.commands:
            if hasattr(command, "command_id"):
                self.issued[command.command_id] = command
        if self.crash_on and any(isinstance(c, self.crash_on) for c in step.commands):
            raise Crash

    def outstanding(self) -> list[Command]:
        """The commands the saved state still waits on: its pending ones."""
        pending = self.states[-1]["pending"]
        return [c for cid, c in self.issued.items() if cid in pending]


class Counting:
    """A function port that counts the calls of each node."""

    def __init__(self, inner: SandboxFunctions) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    async def call(self, request: CallFunction) -> Done:
        self.calls[request.node_id] = self.calls.get(request.node_id, 0) + 1
        return await self.inner.call(request)


class Answers:
    def __init__(self, answer: Answer | None = None, decision: Decision | None = None) -> None:
        self.answer, self.decision = answer, decision

    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        if self.answer is None:
            await asyncio.Event().wait()  # nobody answers
        assert self.answer is not None
        return self.answer

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        assert self.decision is not None
        return self.decision


@pytest.fixture
async def functions() -> Any:
    port = SandboxFunctions(SandboxRunner(sandbox_settings()))
    yield Counting(port)
    await port.close()


async def test_a_run_saved_while_waiting_goes_on_after_a_crash(functions: Counting) -> None:
    graph = compile_document(load_json(TRIAGE))
    journal, clock = Journal(crash_on=AwaitInput), FakeClock(1000.0)
    with pytest.raises(Crash):
        await run_workflow(
            graph, URGENT, functions=functions, model=NoModel(), clock=clock,
            human=Answers(), journal=journal,
        )  # fmt: skip
    assert functions.calls == {"classify": 1}
    saved = journal.states[-1]
    outstanding = journal.outstanding()
    assert sorted(type(c).__name__ for c in outstanding) == ["AwaitInput", "SleepUntil"]

    result = await resume_workflow(
        graph, RunState.from_dict(saved), outstanding, functions=functions, model=NoModel(),
        clock=clock, human=Answers(Answer({"escalate": True}, "ann")), journal=Journal(),
    )  # fmt: skip
    assert result.outputs == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    assert functions.calls == {"classify": 1}  # its effect was saved: never run again
    assert [e["node_id"] for e in result.events if e["type"] == "node.started"] == [
        "urgent_summary", "end"
    ]  # fmt: skip


async def test_a_timeout_that_expired_meanwhile_fires_on_resume(functions: Counting) -> None:
    graph = compile_document(load_json(TRIAGE))
    journal, clock = Journal(crash_on=AwaitInput), FakeClock(1000.0)
    with pytest.raises(Crash):
        await run_workflow(
            graph, URGENT, functions=functions, model=NoModel(), clock=clock,
            human=Answers(), journal=journal,
        )  # fmt: skip

    later = FakeClock(1000.0 + 7200)  # the server was down for two hours (timeout: 1 hour)
    result = await resume_workflow(
        graph, RunState.from_dict(journal.states[-1]), journal.outstanding(),
        functions=functions, model=NoModel(), clock=later, human=Answers(),
    )  # fmt: skip
    assert result.status == "failed"
    assert result.error == {
        "node_id": "approve", "kind": "timeout",
        "message": "no answer within 3600s (on_timeout is 'error')",
    }  # fmt: skip
