"""React agents on the server (SQLite and PostgreSQL): the support fixture in a chat, its
refund confirmed through the task endpoints, a restart while it waits, event input, and every
step in the run's event log. The model is a scripted provider entry of the settings."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.integration.test_runs_api import ok, until

API = "/api/v1"
SUPPORT = load_json(FIXTURES / "valid" / "react_support.json")
LOOKUP = {"tool_calls": [{"id": "l1", "name": "lookup_order", "arguments": {"order_id": "A-1001"}}]}
REFUND = {"tool_calls": [{"id": "r1", "name": "issue_refund",
                          "arguments": {"order_id": "A-1001", "amount": 42.0}}]}  # fmt: skip
DONE = "Your refund of 42.0 is on its way."


def server(settings: Settings, replies: list[Any]) -> TestClient:
    entry = EntryConfig(type="scripted", replies=replies)
    configured = Settings(**{**vars(settings),
                             "providers": ProvidersConfig(entries={"openai": entry})})  # fmt: skip
    client = TestClient(create_app(configured))
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


def say(client: TestClient, agent_id: str, text: str) -> tuple[str, str]:
    chat = ok(client.post(f"{API}/agents/{agent_id}/conversations"), 201)
    run = ok(client.post(f"{API}/conversations/{chat['id']}/messages", json={"content": text}),
             202)  # fmt: skip
    return chat["id"], run["id"]


def approve(client: TestClient, run_id: str, **body: Any) -> dict[str, Any]:
    [task] = ok(client.get(f"{API}/tasks"))["data"]
    assert task["run_id"] == run_id and task["kind"] == "await_confirmation"
    path = f"{API}/runs/{run_id}/confirmations/{task['command_id']}"
    ok(client.post(path, json={"approve": True, **body}), 202)
    return dict(task)


def log(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    return list(ok(client.get(f"{API}/runs/{run_id}/events", params={"limit": 1000}))["data"])


def test_the_support_agent_refunds_only_after_approval(settings: Settings) -> None:
    with server(settings, [LOOKUP, REFUND, DONE]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        chat_id, run_id = say(client, agent, "Please refund order A-1001")
        waiting = until(client, run_id, "waiting", "failed")
        assert waiting["waiting"]["for"] == "confirmation", waiting
        before = [e["type"] for e in log(client, run_id)]
        assert before.count("tool.succeeded") == 1  # the lookup; the refund has not run
        task = approve(client, run_id)
        assert task["request"]["arguments"] == {"order_id": "A-1001", "amount": 42.0}
        done = until(client, run_id, "succeeded", "failed")
        assert done["status"] == "succeeded" and done["outputs"] == {"answer": DONE}
        conversation = ok(client.get(f"{API}/conversations/{chat_id}"))
        events = log(client, run_id)
    assert [m["role"] for m in conversation["messages"]] == ["user", "assistant"]
    assert conversation["messages"][1]["content"] == DONE
    shown = ("tool.called", "tool.succeeded", "confirmation.received")
    steps = [(e["type"], e["data"].get("name")) for e in events if e["type"] in shown]
    assert steps == [
        ("tool.called", "lookup_order"), ("tool.succeeded", "lookup_order"),
        ("tool.called", "issue_refund"), ("confirmation.received", None),
        ("tool.succeeded", "issue_refund"),
    ]  # fmt: skip
    messages = [e for e in events if e["type"] == "agent.message"]
    assert len(messages) == 3 and messages[-1]["data"]["content"] == DONE


def test_a_restart_while_waiting_for_confirmation_repeats_nothing(settings: Settings) -> None:
    with server(settings, [LOOKUP, REFUND]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        _, run_id = say(client, agent, "Please refund order A-1001")
        assert until(client, run_id, "waiting", "failed")["status"] == "waiting"
    # A new server process: its scripted model has only the last answer left to give.
    with server(settings, [DONE]) as client:
        approve(client, run_id, arguments={"order_id": "A-1001", "amount": 40.0})
        done = until(client, run_id, "succeeded", "failed")
        events = log(client, run_id)
    assert done["status"] == "succeeded", done["error"]
    ran = [e["data"]["name"] for e in events if e["type"] == "tool.succeeded"]
    assert ran == ["lookup_order", "issue_refund"]  # each once, across the restart
    [refunded] = [e for e in events if e["type"] == "tool.succeeded"][1:]
    assert refunded["data"]["result"] == {"order_id": "A-1001", "refunded": 40.0}


def test_an_event_becomes_the_react_agents_task(settings: Settings) -> None:
    doc = copy.deepcopy(SUPPORT)
    doc.update(name="order-watcher", input_mode="event", conversations=[])
    with server(settings, ["Noted: order A-7 shipped."]) as client:
        agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        body = {"type": "order.shipped", "payload": {"order_id": "A-7"}}
        run = ok(client.post(f"{API}/agents/{agent}/events", json=body), 202)
        done = until(client, run["id"], "succeeded", "failed")
        events = log(client, run["id"])
    assert done["outputs"] == {"answer": "Noted: order A-7 shipped."}
    assert [e["type"] for e in events][:3] == ["run.started", "node.started", "node.succeeded"]


def test_a_bad_reasoning_effort_is_refused_naming_the_field(settings: Settings) -> None:
    with server(settings, []) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        body = {"inputs": {"message": "hi"}, "reasoning_effort": "huge"}
        response = client.post(f"{API}/agents/{agent}/runs", json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "/reasoning_effort"


def test_a_chats_next_turn_starts_from_the_whole_transcript(settings: Settings) -> None:
    """The second turn sees the first turn's tool call and its result, not only the text."""
    shipped = "Order A-1001 shipped yesterday."
    with server(settings, [LOOKUP, shipped, "It was 42.0."]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        chat_id, first = say(client, agent, "Where is order A-1001?")
        assert until(client, first, "succeeded", "failed")["status"] == "succeeded"
        path = f"{API}/conversations/{chat_id}/messages"
        second = ok(client.post(path, json={"content": "And its total?"}), 202)["id"]
        assert until(client, second, "succeeded", "failed")["status"] == "succeeded"
        model = client.app.state.services.providers.client("openai").provider
        conversation = ok(client.get(f"{API}/conversations/{chat_id}"))
    last = model.requests[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "tool", "assistant", "user"]
    assert last[1].tool_calls[0].name == "lookup_order"
    assert last[2].tool_call_id == "l1" and "A-1001" in last[2].content
    assert (last[3].content, last[4].content) == (shipped, "And its total?")
    assert [m["content"] for m in conversation["messages"]] == [
        "Where is order A-1001?",
        shipped,
        "And its total?",
        "It was 42.0.",
    ]
