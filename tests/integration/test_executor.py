"""The in-process executor: compiled workflows run to their end through the ports.

Functions run in real child processes unless a test needs to control a call's timing; then an
in-process fake of the function port stands in (the I/O seam). Concurrency is proven with
barriers and time with the fake clock, never with sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dhub.engine.compile import compile_document
from dhub.engine.state import AwaitConfirmation, AwaitInput, CallFunction, Done
from dhub.providers.registry import Providers
from dhub.providers.testing import ScriptedModel
from dhub.runtime.executor import RunResult, run_workflow
from dhub.runtime.model import ProviderModel
from dhub.runtime.ports import (
    Answer,
    Clock,
    Decision,
    FakeClock,
    FunctionPort,
    ModelPort,
    NoModel,
    RealClock,
    SandboxFunctions,
)
from dhub.sandbox.runner import SandboxRunner
from tests.conftest import FIXTURES, load_json, sandbox_settings

pytestmark = pytest.mark.asyncio

TRIAGE = FIXTURES / "valid" / "workflow_triage.json"
BATCH = FIXTURES / "valid" / "workflow_batch.json"
SUMMARIZER = FIXTURES / "valid" / "event_summarizer.json"
LIMIT = 20  # seconds: a test that would deadlock fails after this instead of hanging


# -- documents ----------------------------------------------------------------------------------


def workflow(nodes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "name": "test-flow",
        "description": "",
        "mode": "workflow",
        "input_mode": "event",
        "nodes": nodes,
        "edges": [{"source": s, "target": t} for s, t in edges],
    }


def start(*variables: dict[str, Any]) -> dict[str, Any]:
    return {"id": "start", "type": "start", "config": {"variables": list(variables)}}


def end(**outputs: tuple[str, str]) -> dict[str, Any]:
    """end(name=(type, value expression), ...)"""
    listed = [{"name": n, "type": t, "value": v} for n, (t, v) in outputs.items()]
    return {"id": "end", "type": "end", "config": {"outputs": listed}}


def code(node_id: str, source: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "code", "config": {"source": source, **config}}


def returns(node_id: str, name: str, value: Any) -> dict[str, Any]:
    """A code node returning ``{name: value}``."""
    return code(node_id, f"def main():\n    return {{{name!r}: {value!r}}}\n")


def parallel(
    node_id: str, join: str, timeout: float = 300, **branches: list[str]
) -> dict[str, Any]:
    listed = [{"id": b, "node_ids": ids} for b, ids in branches.items()]
    config = {"branches": listed, "join_strategy": join, "timeout": timeout}
    return {"id": node_id, "type": "parallel", "config": config}


# -- fakes at the I/O seams ---------------------------------------------------------------------


class InProcessFunctions:
    """The function port, run in this process: ``behaviour[node_id]`` decides each call."""

    def __init__(self, **behaviour: Callable[[CallFunction], Awaitable[Any]]) -> None:
        self.behaviour = behaviour
        self.started: list[str] = []
        self.completed: list[str] = []
        self.cancelled: list[str] = []

    async def call(self, request: CallFunction) -> Done:
        self.started.append(request.node_id)
        try:
            value = await self.behaviour[request.node_id](request)
        except asyncio.CancelledError:
            self.cancelled.append(request.node_id)
            raise
        self.completed.append(request.node_id)
        return Done(request.command_id, True, value)


class Gate:
    """Wraps a function port: the calls of ``nodes`` meet at a barrier before they run, so
    none of them can finish unless all of them are in flight at the same time."""

    def __init__(self, inner: FunctionPort, nodes: set[str]) -> None:
        self.inner = inner
        self.nodes = nodes
        self.barrier = asyncio.Barrier(len(nodes))

    async def call(self, request: CallFunction) -> Done:
        if request.node_id in self.nodes:
            await self.barrier.wait()
        return await self.inner.call(request)


class Person:
    """The human port: answers from a script, records what it was asked, and waits forever
    (until cancelled) when the script is empty."""

    def __init__(
        self, answers: list[Answer] | None = None, decisions: list[Decision] | None = None
    ) -> None:
        self.answers = list(answers or [])
        self.decisions = list(decisions or [])
        self.asked: list[tuple[AwaitInput, str | None]] = []
        self.confirming: list[AwaitConfirmation] = []
        self.cancelled = 0

    async def ask(self, request: AwaitInput, problem: str | None = None) -> Answer:
        self.asked.append((request, problem))
        if not self.answers:
            await self._forever()
        return self.answers.pop(0)

    async def confirm(self, request: AwaitConfirmation) -> Decision:
        self.confirming.append(request)
        if not self.decisions:
            await self._forever()
        return self.decisions.pop(0)

    async def _forever(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def run(
    doc: dict[str, Any],
    inputs: dict[str, Any],
    *,
    functions: FunctionPort | None = None,
    model: ModelPort | None = None,
    clock: Clock | None = None,
    human: Person | None = None,
    observer: Callable[[dict[str, Any]], None] | None = None,
    live: Callable[[dict[str, Any]], None] | None = None,
) -> RunResult:
    own = functions is None
    port = functions or SandboxFunctions(SandboxRunner(sandbox_settings()))
    try:
        async with asyncio.timeout(LIMIT):
            return await run_workflow(
                compile_document(doc),
                inputs,
                functions=port,
                model=model or NoModel(),
                clock=clock or RealClock(),
                human=human or Person(),
                observer=observer,
                live=live,
            )
    finally:
        if own and isinstance(port, SandboxFunctions):
            await port.close()


def of_type(result: RunResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind]


# -- the shared fixtures ------------------------------------------------------------------------


async def test_triage_routine_ticket() -> None:
    seen: list[dict[str, Any]] = []
    result = await run(
        load_json(TRIAGE), {"ticket": "Checkout page shows an error"}, observer=seen.append
    )
    assert (result.status, result.error) == ("succeeded", None)
    assert result.outputs == {"category": "bug", "summary": "bug from anonymous"}
    assert seen == result.events  # the observer saw every event, live
    assert all(isinstance(e["time"], float) for e in seen)


async def test_triage_urgent_ticket_waits_for_a_person() -> None:
    person = Person([Answer({"escalate": True}, responded_by="ann")])
    ticket = {"ticket": "Total outage since 9am", "customer": "acme"}
    result = await run(load_json(TRIAGE), ticket, human=person)
    assert result.outputs == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    [(request, problem)] = person.asked
    assert request.prompt == "Escalate ticket from acme: Total outage since 9am?"
    assert [f["name"] for f in request.fields] == ["escalate", "note"]
    assert problem is None
    assert result.state.node_outputs["approve"]["responded_by"] == "ann"


async def test_a_refused_answer_is_asked_again_with_the_reason() -> None:
    person = Person([Answer({"escalate": "maybe"}), Answer({"escalate": False}, "ann")])
    result = await run(load_json(TRIAGE), {"ticket": "site down"}, human=person)
    assert result.outputs["summary"] == "URGENT bug from anonymous; escalate=False"
    [(first, none), (again, problem)] = person.asked
    assert first == again and none is None
    assert problem is not None and "'escalate' should be a boolean" in problem
    assert len(of_type(result, "input.rejected")) == 1


async def test_batch_loops_aggregates_and_survives_the_flaky_step() -> None:
    result = await run(load_json(BATCH), {"numbers": [1, 2, 3]})
    assert result.outputs == {"total": 14, "report": "#0: 1\n#1: 4\n#2: 9\n", "checked": False}
    flaky = [e for e in result.events if e["node_id"] == "flaky"]
    assert [e["type"] for e in flaky] == [
        "node.started", "node.retrying", "node.started", "node.retrying",
        "node.started", "node.failed",
    ]  # fmt: skip
    assert result.state.variables["failure"] == "RuntimeError: upstream unavailable"
    frames = {e.get("frame") for e in result.events if e["node_id"] == "square"}
    assert frames == {"each#0", "each#1", "each#2"}


# -- concurrency --------------------------------------------------------------------------------


async def test_fan_out_branches_are_all_in_flight_at_once() -> None:
    doc = workflow(
        [
            start(),
            returns("a", "a", 1),
            returns("b", "b", 2),
            returns("c", "c", 3),
            {"id": "join", "type": "template", "config": {"template": "{{ a }}{{ b }}{{ c }}"}},
            end(text=("string", "{{ text }}")),
        ],
        [("start", "a"), ("start", "b"), ("start", "c"),
         ("a", "join"), ("b", "join"), ("c", "join"), ("join", "end")],
    )  # fmt: skip
    gate = Gate(SandboxFunctions(SandboxRunner(sandbox_settings(warm=False))), {"a", "b", "c"})
    result = await run(doc, {}, functions=gate)  # sequential calls would time out at the gate
    assert result.outputs == {"text": "123"}


async def test_parallel_branches_are_all_in_flight_at_once() -> None:
    doc = workflow(
        [
            start(),
            parallel("par", "all", x=["bx"], y=["by"], z=["bz"]),
            returns("bx", "v", "x"),
            returns("by", "v", "y"),
            returns("bz", "v", "z"),
            end(v=("string", "{{ branches.x.v }}{{ branches.y.v }}{{ branches.z.v }}")),
        ],
        [("start", "par"), ("par", "end")],
    )
    gate = Gate(SandboxFunctions(SandboxRunner(sandbox_settings(warm=False))), {"bx", "by", "bz"})
    result = await run(doc, {}, functions=gate)
    assert result.outputs == {"v": "xyz"}


def race(join: str = "any", timeout: float = 300) -> dict[str, Any]:
    """start -> par(fast | slow1 | slow2) -> end, each branch one code node."""
    return workflow(
        [
            start(),
            parallel("par", join, timeout, fast=["f"], slow1=["s1"], slow2=["s2"]),
            returns("f", "v", "fast"),
            returns("s1", "v", "slow"),
            returns("s2", "v", "slow"),
            end(winner=("string", "{{ winner }}"), v=("string", "{{ branches.fast.v }}")),
        ],
        [("start", "par"), ("par", "end")],
    )


async def test_join_any_cancels_the_losing_calls() -> None:
    slow_started = asyncio.Event()

    async def fast(_: CallFunction) -> Any:
        await slow_started.wait()  # the losers are surely running when the winner finishes
        return {"v": "fast"}

    async def slow(_: CallFunction) -> Any:
        if functions.started.count("s1") + functions.started.count("s2") == 2:
            slow_started.set()
        await asyncio.Event().wait()  # never finishes on its own

    functions = InProcessFunctions(f=fast, s1=slow, s2=slow)
    result = await run(race("any"), {}, functions=functions)
    assert result.outputs == {"winner": "fast", "v": "fast"}
    assert sorted(functions.cancelled) == ["s1", "s2"]
    assert functions.completed == ["f"]
    cancelled = {e["branch"] for e in of_type(result, "branch.cancelled")}
    assert cancelled == {"slow1", "slow2"}


async def test_a_cancelled_call_leaves_no_process_behind() -> None:
    marker = "27.1828"  # an unusual sleep length to find the grandchildren by
    slow = (
        "import subprocess, time\n"
        "def main():\n"
        f"    subprocess.Popen(['sleep', '{marker}'])\n"
        "    time.sleep(30)\n"
    )
    doc = race("any")
    by_id = {n["id"]: n for n in doc["nodes"]}
    by_id["f"]["config"].update(source="def main():\n    return {'v': 'fast'}\n")
    for loser in ("s1", "s2"):
        by_id[loser]["config"].update(source=slow)
    sandbox = SandboxFunctions(SandboxRunner(sandbox_settings(warm=False)))
    # The winner may finish only once both losers are running (sandboxes share no files, so
    # the port, which sees the host's processes, holds it back).
    port = Hold(sandbox, "f", lambda: _count(["sleep", marker]) >= 2)
    started = time.monotonic()
    result = await run(doc, {}, functions=port)
    assert result.outputs == {"winner": "fast", "v": "fast"}
    assert time.monotonic() - started < 15  # not the slow calls' 30 s
    assert await _gone(["sleep", marker])


class Hold:
    """A function port that starts ``node``'s call only once ``ready()`` holds."""

    def __init__(self, inner: FunctionPort, node: str, ready: Callable[[], bool]) -> None:
        self.inner, self.node, self.ready = inner, node, ready

    async def call(self, request: CallFunction) -> Done:
        while request.node_id == self.node and not self.ready():  # noqa: ASYNC110 - polls /proc
            await asyncio.sleep(0.02)
        return await self.inner.call(request)


async def _gone(argv: list[str]) -> bool:
    """Whether no process runs ``argv`` (within a second: SIGKILL is delivered async)."""
    for _ in range(100):
        if not _running(argv):
            return True
        await asyncio.sleep(0.01)
    return False


def _running(argv: list[str]) -> bool:
    return _count(argv) > 0


def _count(argv: list[str]) -> int:
    wanted = [a.encode() for a in argv]
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    count += f.read().split(b"\0")[: len(wanted)] == wanted
            except OSError:
                continue
    return count


async def test_cancelling_the_run_cancels_its_calls_and_says_so() -> None:
    in_flight = asyncio.Event()

    async def hang(_: CallFunction) -> Any:
        in_flight.set()
        await asyncio.Event().wait()

    functions = InProcessFunctions(a=hang)
    seen: list[dict[str, Any]] = []
    doc = workflow([start(), returns("a", "v", 1), end()], [("start", "a"), ("a", "end")])
    task = asyncio.create_task(run(doc, {}, functions=functions, observer=seen.append))
    await in_flight.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert functions.cancelled == ["a"]
    assert seen[-1]["type"] == "run.cancelled"


# -- failures of the ports ----------------------------------------------------------------------


async def test_a_port_that_raises_fails_the_run_cleanly() -> None:
    async def explode(_: CallFunction) -> Any:
        raise RuntimeError("the port exploded")

    doc = workflow([start(), returns("a", "v", 1), end()], [("start", "a"), ("a", "end")])
    result = await run(doc, {}, functions=InProcessFunctions(a=explode))
    assert result.status == "failed"
    assert result.error == {
        "node_id": "a",
        "kind": "crashed",
        "message": "the function port failed on node 'a': RuntimeError: the port exploded",
    }


async def test_a_failing_function_fails_with_its_error_kind_and_message() -> None:
    doc = workflow(
        [start(), code("a", "def main():\n    raise ValueError('bad ticket')\n"), end()],
        [("start", "a"), ("a", "end")],
    )
    result = await run(doc, {})
    assert result.error == {
        "node_id": "a",
        "kind": "exception",
        "message": "ValueError: bad ticket",
    }


async def test_llm_nodes_without_a_provider_fail_saying_what_to_set() -> None:
    alert = {"alert": {"host": "db-1"}}
    result = await run(load_json(SUMMARIZER), alert, model=ProviderModel(Providers()))
    assert result.status == "failed"
    assert result.error is not None and result.error["kind"] == "no_provider"
    assert "set DHUB_OPENAI_API_KEY" in result.error["message"]
    assert result.error["provider"] == "openai" and result.error["model"] == "gpt-4o-mini"


async def test_llm_nodes_use_the_scripted_model_and_stream_deltas() -> None:
    providers = Providers()
    model = ScriptedModel(["Disk full on db-1"], name="openai")
    providers.add(model)
    live: list[dict[str, Any]] = []
    result = await run(
        load_json(SUMMARIZER), {"alert": {"host": "db-1"}}, model=ProviderModel(providers),
        live=live.append,
    )  # fmt: skip
    assert result.outputs == {"headline": "Disk full on db-1"}
    [request] = model.requests
    assert request.messages[0].content == (
        'Write a one-line headline for this alert: {"host": "db-1"}'
    )
    assert request.system == "You write terse incident headlines."
    assert request.reasoning_effort == "none" and request.response_schema is None
    assert "".join(e["text"] for e in live) == "Disk full on db-1"
    assert {(e["type"], e["node_id"], e["kind"]) for e in live} == {
        ("llm.delta", "summarize", "text")
    }
    [done] = [
        e for e in result.events if e["type"] == "node.succeeded" and e["node_id"] == "summarize"
    ]
    assert done["usage"]["estimated"] is True and done["usage"]["output_tokens"] > 0
    assert result.state.usage["input_tokens"] == done["usage"]["input_tokens"]


# -- actor confirmation -------------------------------------------------------------------------


def refund() -> dict[str, Any]:
    actor = {
        "name": "issue_refund",
        "confirmation_policy": "confirm",
        "function": {"source": "def issue_refund(amount):\n    return {'refunded': amount}\n"},
    }
    call = {"actor": actor, "input_mappings": {"amount": "{{ amount }}"}}
    return workflow(
        [
            start({"name": "amount", "type": "number"}),
            {"id": "pay", "type": "actor_call", "config": call},
            end(refunded=("number", "{{ result.refunded }}")),
        ],
        [("start", "pay"), ("pay", "end")],
    )


async def test_an_approved_actor_call_runs_with_the_edited_arguments() -> None:
    person = Person(decisions=[Decision(True, {"amount": 5}, by="ann")])
    result = await run(refund(), {"amount": 50}, human=person)
    assert result.outputs == {"refunded": 5}
    [asked] = person.confirming
    assert (asked.actor, asked.arguments) == ("issue_refund", {"amount": 50})


async def test_a_rejected_actor_call_fails_with_the_reason() -> None:
    person = Person(decisions=[Decision(False, reason="too much", by="ann")])
    result = await run(refund(), {"amount": 50}, human=person)
    assert result.error is not None
    assert result.error["message"] == "ann rejected the call: too much"


# -- time, on the fake clock --------------------------------------------------------------------


def guarded(backoff: str) -> dict[str, Any]:
    """start -> flaky (always fails) -> end; 3 retries, 2 s apart by ``backoff``, then fail."""
    handler = {
        "target_node_id": "flaky", "retry_count": 3, "retry_delay_seconds": 2,
        "retry_backoff": backoff, "on_error": "fail",
    }  # fmt: skip
    return workflow(
        [
            start(),
            code("flaky", "def main():\n    raise RuntimeError('down')\n"),
            {"id": "guard", "type": "error_handler", "config": handler},
            end(),
        ],
        [("start", "flaky"), ("flaky", "end")],
    )


@pytest.mark.parametrize(
    ("backoff", "delays"),
    [("fixed", [2, 2, 2]), ("linear", [2, 4, 6]), ("exponential", [2, 4, 8])],
)
async def test_retry_delays_follow_the_backoff_exactly(backoff: str, delays: list[float]) -> None:
    clock = FakeClock(100.0)
    task = asyncio.create_task(run(guarded(backoff), {}, clock=clock))
    await clock.until_idle()
    await clock.advance(1000)
    result = await task
    assert result.error is not None and result.error["attempts"] == 4
    tries = [e["time"] for e in of_type(result, "node.started") if e["node_id"] == "flaky"]
    assert [b - a for a, b in itertools.pairwise(tries)] == delays
    assert clock.woken == tries[1:]
    assert [e["delay"] for e in of_type(result, "node.retrying")] == delays


async def test_a_parallel_timeout_fires_exactly_at_its_time() -> None:
    both = asyncio.Event()

    async def hang(_: CallFunction) -> Any:
        if len(functions.started) == 2:
            both.set()
        await asyncio.Event().wait()

    functions = InProcessFunctions(x=hang, y=hang)
    doc = workflow(
        [start(), parallel("par", "all", 60, a=["x"], b=["y"]), returns("x", "v", 1),
         returns("y", "v", 2), end()],
        [("start", "par"), ("par", "end")],
    )  # fmt: skip
    clock = FakeClock(100.0)
    task = asyncio.create_task(run(doc, {}, functions=functions, clock=clock))
    await both.wait()
    assert clock.sleepers == [160.0]
    await clock.advance(59.5)
    assert not task.done()
    await clock.advance(1000)
    result = await task
    assert result.error is not None and result.error["kind"] == "timeout"
    [failed] = [e for e in of_type(result, "node.failed") if e["node_id"] == "par"]
    assert failed["time"] == 160.0
    assert sorted(functions.cancelled) == ["x", "y"]


def waiting_form(on_timeout: str) -> dict[str, Any]:
    field = {"name": "level", "type": "string", "required": True, "default": "low"}
    form = {"prompt": "Level?", "input_fields": [field], "timeout": 30, "on_timeout": on_timeout}
    return workflow(
        [
            start(),
            {"id": "ask", "type": "human_input", "config": form},
            end(level=("string", "{{ level or 'unset' }}")),
        ],
        [("start", "ask"), ("ask", "end")],
    )


@pytest.mark.parametrize(
    ("on_timeout", "status", "level"),
    [("error", "failed", None), ("skip", "succeeded", "unset"), ("default", "succeeded", "low")],
)
async def test_a_human_task_times_out(on_timeout: str, status: str, level: str | None) -> None:
    clock = FakeClock(100.0)
    person = Person()  # never answers
    task = asyncio.create_task(run(waiting_form(on_timeout), {}, clock=clock, human=person))
    await clock.until_idle()
    assert clock.sleepers == [130.0]
    await clock.advance(29.9)
    assert not task.done()
    await clock.advance(0.1)
    result = await task
    assert result.status == status
    assert result.outputs.get("level") == level
    [timed_out] = of_type(result, "input.timed_out")
    assert timed_out["time"] == 130.0
    assert person.cancelled == 1  # the open task was closed
    if on_timeout == "error":
        assert result.error is not None and result.error["kind"] == "timeout"
