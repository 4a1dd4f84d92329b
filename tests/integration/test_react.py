"""The react loop through the executor: a scripted model (the provider seam), tools in the
real sandbox, people through the human port. Concurrency is shown with a barrier in an
in-process function port where a test must control a call's timing."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from dhub.engine.compile import compile_agent
from dhub.engine.state import CallFunction, Done
from dhub.providers.registry import Providers
from dhub.providers.testing import Reply, ScriptedModel
from dhub.providers.types import ModelRequest
from dhub.runtime.executor import RunResult, run_workflow
from dhub.runtime.model import ProviderModel
from dhub.runtime.ports import Decision, FunctionPort, RealClock, SandboxFunctions
from dhub.sandbox.runner import SandboxRunner
from tests.conftest import FIXTURES, load_json, sandbox_settings
from tests.integration.test_executor import Person

SUPPORT = load_json(FIXTURES / "valid" / "react_support.json")
LIMIT = 30


def agent(tools: list[Any] | None = None, actors: list[Any] | None = None,
          **config: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "name": "helper", "description": "", "mode": "react", "input_mode": "chat",
        "agent": {"instructions": "Help.", "model_provider": "openai", "model": "gpt-4o-mini",
                  "tools": tools or [], "actors": actors or [], **config},
    }  # fmt: skip


def tool(name: str, source: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description, "function": {"source": source}}


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


class Model:
    """A scripted model behind the real provider client, recording its requests."""

    def __init__(self, *replies: Any) -> None:
        self.scripted = ScriptedModel(list(replies), name="openai")
        providers = Providers()
        providers.add(self.scripted)
        self.port = ProviderModel(providers)

    @property
    def requests(self) -> list[ModelRequest]:
        return self.scripted.requests


async def run(
    doc: dict[str, Any], model: Model, *, message: str = "Hello", human: Person | None = None,
    functions: FunctionPort | None = None, context: dict[str, Any] | None = None,
    conversation: dict[str, Any] | None = None,
) -> RunResult:  # fmt: skip
    port = functions or SandboxFunctions(SandboxRunner(sandbox_settings()))
    try:
        async with asyncio.timeout(LIMIT):
            return await run_workflow(
                compile_agent(doc), {}, functions=port, model=model.port, clock=RealClock(),
                human=human or Person(), context={"message": message, **(context or {})},
                conversation=conversation,
            )  # fmt: skip
    finally:
        if functions is None:
            await port.close()  # type: ignore[attr-defined]


def events(result: RunResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind]


async def test_an_answer_without_tool_calls_ends_the_run() -> None:
    model = Model("Hi! How can I help?")
    result = await run(agent(), model, message="Hello there")
    assert result.status == "succeeded" and result.outputs == {"answer": "Hi! How can I help?"}
    [request] = model.requests
    assert request.system == "Help." and request.messages[0].content == "Hello there"
    assert request.tools == ()


class Barrier:
    """The function port: every call waits until ``width`` calls are in flight at once."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.started: list[CallFunction] = []
        self.all_in = asyncio.Event()

    async def call(self, request: CallFunction) -> Done:
        self.started.append(request)
        if len(self.started) >= self.width:
            self.all_in.set()
        await asyncio.wait_for(self.all_in.wait(), 5)
        return Done(request.command_id, True, {"city": request.inputs["city"], "temp": 21})


async def test_tool_calls_of_one_turn_run_concurrently_and_return_in_order() -> None:
    weather = tool("weather", "def weather(city: str) -> dict:\n    return {}\n", "Weather now")
    model = Model(
        Reply(
            tool_calls=[
                call("weather", {"city": "Paris"}, "a"),
                call("weather", {"city": "Rome"}, "b"),
            ]
        ),
        "Paris and Rome are both at 21°C.",
    )
    port = Barrier(2)
    result = await run(agent([weather]), model, functions=port)
    assert result.status == "succeeded", result.error
    assert [r.inputs["city"] for r in port.started] == ["Paris", "Rome"]
    second = model.requests[1].messages
    assert [(m.role, m.tool_call_id) for m in second] == [
        ("user", None), ("assistant", None), ("tool", "a"), ("tool", "b")]  # fmt: skip
    assert json.loads(second[2].content) == {"city": "Paris", "temp": 21}
    [definition] = model.requests[0].tools
    assert definition.name == "weather" and definition.description == "Weather now"
    assert definition.parameters["properties"]["city"]["type"] == "string"
    assert [e["name"] for e in events(result, "tool.succeeded")] == ["weather", "weather"]


async def test_tools_run_in_the_sandbox_and_errors_go_back_to_the_model() -> None:
    tools = [tool("add", "def add(a: int, b: int) -> int:\n    return a + b\n"),
             tool("boom", "def boom() -> int:\n    raise ValueError('no luck')\n")]  # fmt: skip
    model = Model(
        Reply(
            tool_calls=[
                call("add", {"a": 2, "b": 3}, "1"),
                call("boom", {}, "2"),
                call("nope", {}, "3"),
            ]
        ),
        "2 + 3 = 5; the other tool failed.",
    )
    result = await run(agent(tools), model)
    assert result.status == "succeeded", result.error
    results = {m.tool_call_id: m for m in model.requests[1].messages if m.role == "tool"}
    assert results["1"].content == "5" and not results["1"].is_error
    assert results["2"].is_error and "ValueError: no luck" in results["2"].content
    assert results["3"].is_error and "no tool named 'nope'" in results["3"].content


REFUND_SOURCE = (
    "def issue_refund(order_id: str, amount: float) -> dict:\n"
    "    return {'order_id': order_id, 'refunded': amount}\n"
)
REFUND = {"name": "issue_refund", "description": "Refund an order",
          "function": {"source": REFUND_SOURCE}}  # fmt: skip


async def test_an_actor_waits_for_a_person_who_edits_the_arguments() -> None:
    model = Model(Reply(tool_calls=[call("issue_refund", {"order_id": "A-1", "amount": 42.0},
                                         "r1")]), "Refunded 40.")  # fmt: skip
    person = Person(decisions=[Decision(True, {"order_id": "A-1", "amount": 40.0}, by="ann")])
    result = await run(agent(actors=[REFUND]), model, human=person)
    assert result.status == "succeeded", result.error
    [asked] = person.confirming
    assert (asked.actor, asked.arguments) == ("issue_refund", {"order_id": "A-1", "amount": 42.0})
    [outcome] = [m for m in model.requests[1].messages if m.role == "tool"]
    assert json.loads(outcome.content) == {"order_id": "A-1", "refunded": 40.0}
    [received] = events(result, "confirmation.received")
    assert received["approve"] is True and received["by"] == "ann"
    waiting = events(result, "node.waiting")
    assert waiting[0]["waiting_for"] == "confirmation" and waiting[0]["call_id"] == "r1"


async def test_a_rejection_reaches_the_model_and_the_actor_never_runs() -> None:
    model = Model(Reply(tool_calls=[call("issue_refund", {"order_id": "A-1", "amount": 42.0},
                                         "r1")]), "Sorry, the refund was declined.")  # fmt: skip
    person = Person(decisions=[Decision(False, reason="over the limit", by="ann")])
    result = await run(agent(actors=[REFUND]), model, human=person)
    assert result.outputs == {"answer": "Sorry, the refund was declined."}
    [outcome] = [m for m in model.requests[1].messages if m.role == "tool"]
    assert outcome.is_error and outcome.content == (
        "ann rejected this call: over the limit. It did not run."
    )
    assert not events(result, "tool.succeeded")


async def test_an_auto_actor_runs_without_asking() -> None:
    auto = {**REFUND, "confirmation_policy": "auto"}
    model = Model(Reply(tool_calls=[call("issue_refund", {"order_id": "A-1", "amount": 1.0},
                                         "r1")]), "Done.")  # fmt: skip
    person = Person()
    result = await run(agent(actors=[auto]), model, human=person)
    assert result.status == "succeeded" and person.confirming == []


async def test_max_iterations_fails_clearly_and_keeps_the_transcript() -> None:
    loop_tool = tool("again", "def again() -> str:\n    return 'more'\n")
    model = Model(*[Reply(tool_calls=[call("again", {}, f"c{i}")]) for i in range(3)])
    result = await run(agent([loop_tool], max_iterations=3), model)
    assert result.status == "failed" and result.error is not None
    assert result.error["kind"] == "max_iterations"
    assert "used its 3 iterations" in result.error["message"]
    [loop] = result.state.agents.values()
    assert len([m for m in loop["messages"] if m["role"] == "tool"]) == 3


SCHEMA = {"type": "object", "properties": {"verdict": {"enum": ["refund", "deny"]}},
          "required": ["verdict"]}  # fmt: skip


async def test_structured_outputs_get_one_repair_then_fail_clearly() -> None:
    repaired = Model("I think we should refund.", {"verdict": "refund"})
    result = await run(agent(outputs=SCHEMA), repaired)
    assert result.outputs == {"answer": {"verdict": "refund"}}
    assert "does not fit the required output" in repaired.requests[1].messages[-1].content
    assert repaired.requests[0].response_schema == SCHEMA
    hopeless = Model("refund", {"verdict": "maybe"})
    failed = await run(agent(outputs=SCHEMA), hopeless)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error["kind"] == "invalid_output" and "/verdict" in failed.error["message"]


async def test_the_requests_reasoning_effort_overrides_the_agents() -> None:
    model = Model("ok", "ok")
    await run(agent(reasoning_effort="low"), model)
    await run(agent(reasoning_effort="low"), model, context={"reasoning_effort": "high"})
    assert [r.reasoning_effort for r in model.requests] == ["low", "high"]


async def test_chat_history_and_conversation_variables() -> None:
    doc = copy.deepcopy(SUPPORT)
    model = Model(
        Reply(
            tool_calls=[
                call("set_conversation_variable", {"name": "customer_name", "value": "Ann"}, "v1")
            ]
        ),
        "Nice to meet you, Ann.",
    )
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    result = await run(doc, model, message="I'm Ann", context={"history": history},
                       conversation={"customer_name": ""})  # fmt: skip
    assert result.status == "succeeded", result.error
    assert result.state.conversation == {"customer_name": "Ann"}
    first, second = model.requests
    assert [m.content for m in first.messages] == ["Hi", "Hello!", "I'm Ann"]
    assert 'customer_name: ""' in first.system and 'customer_name: "Ann"' in second.system
    assert "set_conversation_variable" in {t.name for t in first.tools}


async def test_the_support_fixture_looks_up_then_refunds_after_approval() -> None:
    model = Model(
        Reply(tool_calls=[call("lookup_order", {"order_id": "A-1001"}, "l1")]),
        Reply(tool_calls=[call("issue_refund", {"order_id": "A-1001", "amount": 42.0}, "r1")]),
        "Your refund of 42.0 is on its way.",
    )
    person = Person(decisions=[Decision(True, by="ann")])
    result = await run(SUPPORT, model, message="Refund order A-1001 please", human=person)
    assert result.status == "succeeded", result.error
    kinds = [(e["type"], e.get("name") or e.get("waiting_for")) for e in result.events
             if e["type"] in ("tool.called", "tool.succeeded", "node.waiting",
                              "confirmation.received")]  # fmt: skip
    assert kinds == [
        ("tool.called", "lookup_order"), ("tool.succeeded", "lookup_order"),
        ("tool.called", "issue_refund"), ("node.waiting", "confirmation"),
        ("confirmation.received", None), ("tool.succeeded", "issue_refund"),
    ]  # fmt: skip
    assert model.requests[0].reasoning_effort == "low"
    lookup = next(m for m in model.requests[1].messages if m.role == "tool")
    assert json.loads(lookup.content) == {"order_id": "A-1001", "status": "shipped",
                                          "amount": 42.0}  # fmt: skip


RESEARCHER = {
    "name": "researcher", "description": "Looks facts up", "instructions": "You research.",
    "tools": [tool("search", "def search(q: str) -> str:\n    return 'Paris is the capital'\n")],
    "max_iterations": 2,
}  # fmt: skip


async def test_a_role_answers_through_the_parent_and_its_events_are_nested() -> None:
    model = Model(
        Reply(tool_calls=[call("researcher", {"task": "Capital of France?"}, "d1")]),
        Reply(tool_calls=[call("search", {"q": "capital of France"}, "s1")]),
        "Paris",
        "The capital of France is Paris.",
    )
    result = await run(agent(roles=[RESEARCHER]), model, message="What is France's capital?")
    assert result.outputs == {"answer": "The capital of France is Paris."}, result.error
    parent, delegate, delegate_again, parent_again = model.requests
    assert {t.name for t in parent.tools} == {"researcher"}
    assert parent.tools[0].parameters["required"] == ["task"]
    assert delegate.system == "You research." and [t.name for t in delegate.tools] == ["search"]
    assert [m.content for m in delegate.messages] == ["Capital of France?"]
    assert delegate_again.messages[-1].content == "Paris is the capital"
    assert parent_again.messages[-1].tool_call_id == "d1"
    assert parent_again.messages[-1].content == "Paris"
    trail = [(e["type"], e.get("delegate")) for e in result.events
             if e["type"].startswith(("tool.", "agent."))]  # fmt: skip
    assert trail == [
        ("agent.message", None),
        ("tool.called", None),
        ("agent.delegated", "d1"),
        ("agent.message", "d1"),
        ("tool.called", "d1"),
        ("tool.succeeded", "d1"),
        ("agent.message", "d1"),
        ("agent.answered", "d1"),
        ("tool.succeeded", None),
        ("agent.message", None),
    ]
    assert result.state.usage["input_tokens"] > 0


async def test_a_delegate_that_runs_out_of_iterations_reports_to_its_caller() -> None:
    search = {"q": "x"}
    model = Model(
        Reply(tool_calls=[call("researcher", {"task": "Dig forever"}, "d1")]),
        Reply(tool_calls=[call("search", search, "s1")]),
        Reply(tool_calls=[call("search", search, "s2")]),
        "I could not find it.",
    )
    result = await run(agent(roles=[RESEARCHER]), model)
    assert result.outputs == {"answer": "I could not find it."}, result.error
    outcome = model.requests[3].messages[-1]
    assert outcome.is_error and "researcher role could not finish (max_iterations)" in (
        outcome.content
    )
