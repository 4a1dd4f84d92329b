"""Agents built from stored resources, run on the server (SQLite and PostgreSQL): the
system prompt is the rendered prompts then the instructions; stored tools, actors (with the
object form's overrides) and roles are what the model is offered and what runs; a fixed tool
applies to the next run; a reference deleted since fails a new run with 422 and a waiting run
with a clear error. The model is a scripted provider entry of the settings."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from dhub.domain.resources import unreachable
from dhub.settings import Settings
from tests.integration.test_react_runs_api import API, DONE, LOOKUP, REFUND, approve, log, server
from tests.integration.test_resources_api import create, prompt_doc
from tests.integration.test_runs_api import ok, until

LOOKUP_SOURCE = (
    "def lookup_order(order_id: str) -> dict:\n"
    "    return {'order_id': order_id, 'status': 'shipped', 'amount': 42.0}\n"
)
REFUND_SOURCE = (
    "def issue_refund(order_id: str, amount: float) -> dict:\n"
    "    return {'order_id': order_id, 'refunded': amount}\n"
)


def stored(client: TestClient, kind: str, name: str, source: str, **extra: Any) -> str:
    doc = {"name": name, "description": f"The stored {name}", "function": {"source": source}}
    return str(create(client, kind, {**doc, **extra})["id"])


def agent_of(client: TestClient, **agent: Any) -> str:
    doc = {
        "name": "support",
        "description": "Answers about orders",
        "agent": {
            "instructions": "Be brief.",
            "model_provider": "openai",
            "model": "gpt-4o-mini",
            **agent,
        },
    }
    return str(ok(client.post(f"{API}/agents", json=doc), 201)["id"])


def start(client: TestClient, agent_id: str) -> Any:
    body = {"inputs": {"message": "Refund A-1001"}}
    return client.post(f"{API}/agents/{agent_id}/runs", json=body)


def model_of(client: TestClient) -> Any:
    return client.app.state.services.providers.client("openai").provider  # type: ignore[attr-defined]


def test_a_react_agent_runs_what_its_references_name(settings: Settings) -> None:
    with server(settings, [LOOKUP, REFUND, DONE]) as client:
        prompt = create(client, "prompt", prompt_doc())["id"]
        tool = stored(client, "tool", "lookup_order", LOOKUP_SOURCE)
        actor = stored(client, "actor", "issue_refund", REFUND_SOURCE, confirmation_policy="auto")
        role = create(client, "role", {"name": "researcher", "description": "Digs",
                                       "instructions": "Research."})["id"]  # fmt: skip
        agent = agent_of(
            client,
            prompts=[{"prompt_id": prompt, "variables": {"tone": "kind"}}],
            tools=[{"id": tool, "description": "Find an order by its id."}],
            # An auto actor made to ask first, for this agent.
            actors=[{"id": actor, "confirmation_policy": "confirm"}],
            roles=[role],
        )
        run = ok(start(client, agent), 202)["id"]
        assert until(client, run, "waiting", "failed")["status"] == "waiting"
        approve(client, run)
        done = until(client, run, "succeeded", "failed")
        first = model_of(client).requests[0]
        events = log(client, run)
    assert done["outputs"] == {"answer": DONE}, done["error"]
    assert first.system == "You are kind. Greet with Hello.\n\nBe brief."
    offered = {t.name: t.description for t in first.tools}
    assert offered == {
        "lookup_order": "Find an order by its id.",
        "issue_refund": "The stored issue_refund",
        "researcher": "Digs",
    }
    results = [e["data"]["result"] for e in events if e["type"] == "tool.succeeded"]
    assert results == [
        {"order_id": "A-1001", "status": "shipped", "amount": 42.0},
        {"order_id": "A-1001", "refunded": 42.0},
    ]


def test_a_fixed_tool_applies_to_the_next_run(settings: Settings) -> None:
    with server(settings, [LOOKUP, "first", LOOKUP, "second"]) as client:
        tool = stored(client, "tool", "lookup_order", LOOKUP_SOURCE)
        agent = agent_of(client, tools=[tool])
        first = ok(start(client, agent), 202)["id"]
        until(client, first, "succeeded", "failed")
        fixed = LOOKUP_SOURCE.replace("'shipped'", "'delivered'")
        ok(client.patch(f"{API}/tools/{tool}", json={"function": {"source": fixed}}))
        second = ok(start(client, agent), 202)["id"]
        until(client, second, "succeeded", "failed")
        statuses = [
            e["data"]["result"]["status"]
            for run in (first, second)
            for e in log(client, run)
            if e["type"] == "tool.succeeded"
        ]
    assert statuses == ["shipped", "delivered"]


def test_a_deleted_reference_refuses_new_runs_and_fails_waiting_ones(settings: Settings) -> None:
    with server(settings, [REFUND]) as client:
        actor = stored(client, "actor", "issue_refund", REFUND_SOURCE)
        agent = agent_of(client, actors=[actor])
        waiting = ok(start(client, agent), 202)["id"]
        assert until(client, waiting, "waiting", "failed")["status"] == "waiting"
        assert client.delete(f"{API}/actors/{actor}").status_code == 204
        refused = start(client, agent)
        approve(client, waiting)
        failed = until(client, waiting, "failed", "succeeded")
        ran = [e for e in log(client, waiting) if e["type"] == "tool.succeeded"]
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["errors"]
    assert error["loc"] == "/agent/actors/0" and error["code"] == "unknown_reference"
    assert error["message"] == unreachable("actor", actor)
    assert failed["status"] == "failed" and failed["error"]["kind"] == "invalid_agent"
    assert actor in failed["error"]["message"]
    assert ran == []  # the refund never ran


def refunds(actor: Any, amount: float = 30) -> dict[str, Any]:
    """A workflow that pays a refund through ``actor``, an actor item of any form."""
    return {
        "name": "refunds", "description": "", "mode": "workflow",
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "order_id", "type": "string"}, {"name": "amount", "type": "number"}]}},
            {"id": "pay", "type": "actor_call", "config": {
                "actor": actor, "outputs": {"paid": "refunded"},
                "input_mappings": {"order_id": "{{ order_id }}", "amount": "{{ amount }}"}}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "paid", "type": "number", "value": "{{ paid }}"}]}},
        ],
        "edges": [{"source": "start", "target": "pay"}, {"source": "pay", "target": "end"}],
    }  # fmt: skip


def test_workflow_nodes_call_stored_actors(settings: Settings) -> None:
    inputs = {"inputs": {"order_id": "A-1", "amount": 30}}
    with server(settings, []) as client:
        actor = stored(client, "actor", "issue_refund", REFUND_SOURCE, confirmation_policy="auto")
        plain = ok(client.post(f"{API}/agents", json=refunds(actor)), 201)["id"]
        run = ok(client.post(f"{API}/agents/{plain}/runs", json=inputs), 202)["id"]
        auto = until(client, run, "succeeded", "failed")
        asking = {**refunds({"id": actor, "confirmation_policy": "confirm"}), "name": "careful"}
        careful = ok(client.post(f"{API}/agents", json=asking), 201)["id"]
        run = ok(client.post(f"{API}/agents/{careful}/runs", json=inputs), 202)["id"]
        assert until(client, run, "waiting", "failed")["waiting"]["for"] == "confirmation"
        approve(client, run, arguments={"order_id": "A-1", "amount": 5})
        confirmed = until(client, run, "succeeded", "failed")
        bad = client.post(f"{API}/agents", json={**refunds("issue_refund"), "name": "bad"})
    assert auto["outputs"] == {"paid": 30}, auto["error"]
    assert confirmed["outputs"] == {"paid": 5}, confirmed["error"]
    assert bad.status_code == 422
    [error] = bad.json()["errors"]
    assert (error["loc"], error["code"]) == ("/nodes/1/config/actor", "not_an_id")


def test_a_workflow_node_whose_actor_was_deleted(settings: Settings) -> None:
    """A new run is refused; a run waiting before the node fails when it gets there."""
    with server(settings, []) as client:
        actor = stored(client, "actor", "issue_refund", REFUND_SOURCE, confirmation_policy="auto")
        doc = refunds({"id": actor, "name": "x"})
        doc["nodes"].insert(1, {"id": "ask", "type": "human_input", "config": {
            "prompt": "Pay?", "input_fields": [{"name": "ok", "type": "boolean"}]}})  # fmt: skip
        doc["edges"] = [{"source": "start", "target": "ask"}, {"source": "ask", "target": "pay"},
                        {"source": "pay", "target": "end"}]  # fmt: skip
        agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        body = {"inputs": {"order_id": "A-1", "amount": 30}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=body), 202)["id"]
        assert until(client, run, "waiting", "failed")["status"] == "waiting"
        assert client.delete(f"{API}/actors/{actor}").status_code == 204
        refused = client.post(f"{API}/agents/{agent}/runs", json=body)
        ok(client.post(f"{API}/runs/{run}/inputs/ask", json={"values": {"ok": True}}), 202)
        failed = until(client, run, "failed", "succeeded")
    assert refused.status_code == 422
    assert [e["loc"] for e in refused.json()["errors"]] == ["/nodes/2/config/actor/id"]
    assert failed["error"]["kind"] == "invalid_agent", failed["error"]
    assert failed["error"]["message"].startswith(unreachable("actor", actor))
