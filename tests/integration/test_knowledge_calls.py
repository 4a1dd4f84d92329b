"""Knowledge tools through the executor (issue 19): what a react agent's or a workflow's
listed tables, templates and ontologies give it becomes ``CallKnowledge`` commands, performed
by the knowledge port for the run's user. The port here records its calls (the I/O seam); the
kinds' own tests drive the real operations through the API."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.testclient import TestClient

from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.resources import ResolvedAgent
from dhub.engine import journal
from dhub.engine.compile import compile_agent
from dhub.engine.state import CallKnowledge, Done
from dhub.providers.testing import Reply
from dhub.runtime.executor import RunResult, run_workflow
from dhub.runtime.ports import Decision, NoKnowledge, RealClock, SandboxFunctions
from dhub.sandbox.runner import SandboxRunner
from tests.conftest import sandbox_settings
from tests.integration.test_executor import Person
from tests.integration.test_react import Model, agent, call, events

QUERY = KnowledgeTool(
    "query_table", "Query the sales table.",
    {"type": "object", "properties": {"where": {"type": "string"}}},
    "table.query", {"table_ids": ["table.sales"]},
)  # fmt: skip
CHANGE = KnowledgeTool(
    "update_object", "Change a customer.", {"type": "object"}, "ontology.update_object",
    {"ontology_ids": ["ontology.crm"]}, confirm=True,
)  # fmt: skip


class Shelf:
    """The knowledge port: records each call and answers from ``answers`` by operation."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[CallKnowledge] = []

    async def call(self, request: CallKnowledge) -> Done:
        self.calls.append(request)
        answer = self.answers[request.operation]
        if isinstance(answer, Exception):
            return Done(request.command_id, False, error={"kind": "knowledge",
                                                         "message": str(answer)})  # fmt: skip
        return Done(request.command_id, True, answer)


async def _run(
    doc: dict[str, Any], knowledge: list[KnowledgeTool], model: Model | None, shelf: Any,
    human: Person | None = None, inputs: dict[str, Any] | None = None,
) -> RunResult:  # fmt: skip
    resolved = ResolvedAgent(doc.get("agent", {}).get("instructions", ""), knowledge=knowledge)
    functions = SandboxFunctions(SandboxRunner(sandbox_settings()))
    try:
        async with asyncio.timeout(30):
            return await run_workflow(
                compile_agent(doc, None, resolved), inputs or {}, functions=functions,
                model=(model or Model()).port, clock=RealClock(), human=human or Person(),
                knowledge=shelf, context={"message": "How much did we sell in May?"},
            )  # fmt: skip
    finally:
        await functions.close()


async def test_a_react_agent_calls_its_knowledge_with_the_bound_ids_over_the_models() -> None:
    planted = {"where": "month = 5", "table_ids": ["table.someone-elses"]}
    model = Model(
        Reply(tool_calls=[call("query_table", planted, "c1")]), "We sold 42 units in May."
    )
    shelf = Shelf({"table.query": {"rows": [{"units": 42}]}})
    result = await _run(agent(), [QUERY], model, shelf)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"answer": "We sold 42 units in May."}
    [sent] = shelf.calls
    assert sent.operation == "table.query"
    assert sent.arguments == {"where": "month = 5", "table_ids": ["table.sales"]}
    first, second = model.requests
    assert [t.name for t in first.tools] == ["query_table"]
    assert '{"rows": [{"units": 42}]}' in str(second.messages[-1].content)
    [called] = events(result, "tool.called")
    assert called["category"] == "knowledge"
    assert events(result, "tool.succeeded")[0]["result"] == {"rows": [{"units": 42}]}


async def test_a_refused_operation_is_the_tools_error_for_the_model() -> None:
    model = Model(Reply(tool_calls=[call("query_table", {}, "c1")]), "I cannot see it.")
    shelf = Shelf({"table.query": ValueError("No table 'table.sales' that you can read")})
    result = await _run(agent(), [QUERY], model, shelf)
    assert result.status == "succeeded"
    assert "No table 'table.sales' that you can read" in str(model.requests[1].messages[-1])
    assert events(result, "tool.failed")[0]["error"]["kind"] == "knowledge"


async def test_a_changing_operation_waits_for_a_persons_yes() -> None:
    model = Model(
        Reply(tool_calls=[call("update_object", {"key": "c-1", "tier": "gold"}, "c1")]),
        "Done.",
    )
    shelf = Shelf({"ontology.update_object": {"updated": "c-1"}})
    person = Person(decisions=[Decision(True, {"key": "c-1", "tier": "silver"}, None, "ana")])
    result = await _run(agent(), [CHANGE], model, shelf, person)
    assert result.status == "succeeded"
    [asked] = person.confirming
    assert asked.actor == "update_object"
    [sent] = shelf.calls  # after the yes, with the arguments the person edited
    assert sent.arguments == {"key": "c-1", "tier": "silver", "ontology_ids": ["ontology.crm"]}


async def test_a_rejected_change_never_reaches_the_port() -> None:
    model = Model(Reply(tool_calls=[call("update_object", {"key": "c-1"}, "c1")]), "OK.")
    shelf = Shelf({})
    person = Person(decisions=[Decision(False, None, "not now", "ana")])
    result = await _run(agent(), [CHANGE], model, shelf, person)
    assert result.status == "succeeded" and shelf.calls == []


def _workflow(tool: str) -> dict[str, Any]:
    return {
        "name": "sales", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start",
             "config": {"variables": [{"name": "month", "type": "number"}]}},
            {"id": "ask", "type": "tool_call",
             "config": {"tool": tool, "input_mappings": {"where": "month = {{ month }}",
                                                         "table_ids": ["table.x"]},
                        "outputs": {"units": "rows.0.units"}}},
            {"id": "end", "type": "end",
             "config": {"outputs": [{"name": "units", "type": "number",
                                     "value": "{{ units }}"}]}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
    }  # fmt: skip


async def test_a_workflow_tool_call_node_names_a_knowledge_tool() -> None:
    shelf = Shelf({"table.query": {"rows": [{"units": 7}]}})
    result = await _run(_workflow("query_table"), [QUERY], None, shelf, inputs={"month": 5})
    assert result.status == "succeeded", result.error
    assert result.outputs == {"units": 7}
    [sent] = shelf.calls
    assert sent.arguments == {"where": "month = 5", "table_ids": ["table.sales"]}


async def test_without_the_knowledge_the_node_names_nothing_it_can_call() -> None:
    result = await _run(_workflow("query_table"), [], None, Shelf({}), inputs={"month": 5})
    assert result.status == "failed"
    assert "No tool 'query_table' that you can run" in str(result.error)


async def test_outside_the_server_knowledge_is_unavailable() -> None:
    result = await _run(_workflow("query_table"), [QUERY], None, NoKnowledge(), inputs={"month": 5})
    assert result.status == "failed"
    assert "needs the dhub server" in str(result.error)


def test_a_knowledge_call_is_journaled_and_read_back() -> None:
    command = CallKnowledge("k1", "agent", "table.query", {"table_ids": ["table.a"]}, "f")
    kind = journal.kind_of(command)
    assert kind == "call_knowledge"
    assert journal.command_from(kind, journal.command_payload(command)) == command


# -- saving: the listed knowledge goes through the one reference check ------------------------


def test_listed_knowledge_that_cannot_be_read_is_refused_alike(client: TestClient) -> None:
    doc = {**agent(), "name": "lister", "tables": ["table.01jzzzzzzzzzzzzzzzzzzzzzzz", "sales"],
           "templates": ["template.nope"], "ontologies": ["prompt.x"]}  # fmt: skip
    response = client.post("/api/v1/agents", json=doc)
    assert response.status_code == 422
    errors = {e["loc"]: e["message"] for e in response.json()["errors"]}
    assert set(errors) == {"/tables/0", "/tables/1", "/templates/0", "/ontologies/0"}
    assert errors["/tables/0"] == (
        "No table 'table.01jzzzzzzzzzzzzzzzzzzzzzzz' that you can read: check the id (GET "
        "/api/v1/tables lists the ones you can read), or ask its owner to share it with you."
    )
    assert "(GET /api/v1/ontologies lists" in errors["/ontologies/0"]


def test_a_node_naming_knowledge_the_agent_does_not_list_is_refused(client: TestClient) -> None:
    response = client.post("/api/v1/agents", json=_workflow("query_table"))
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["loc"] == "/nodes/1/config/tool"
    assert "'query_table' is not a tool id" in error["message"]
