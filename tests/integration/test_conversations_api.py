"""Chat input mode on SQLite and PostgreSQL: a conversation keeps messages and variables."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

API = "/api/v1"

# A chat workflow: counts the turns in a conversation variable and echoes the message.
ECHO = {
    "name": "echo", "description": "", "mode": "workflow", "input_mode": "chat",
    "conversations": [
        {"name": "turns", "type": "number", "description": "turns so far", "default": 0}],
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "message", "type": "string"}]}},
        {"id": "count", "type": "variable", "config": {"operations": [
            {"action": "increment", "variable": "conversation.turns"}]}},
        {"id": "reply", "type": "template", "config": {
            "template": "#{{ conversation.turns }}: {{ sys.message | upper }}",
            "output": "answer"}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "answer", "type": "string", "value": "{{ answer }}"}]}},
    ],
    "edges": [{"source": "start", "target": "count"}, {"source": "count", "target": "reply"},
              {"source": "reply", "target": "end"}],
}  # fmt: skip


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def finished(client: TestClient, run_id: str) -> dict[str, Any]:
    for _ in range(500):
        run: dict[str, Any] = ok(client.get(f"{API}/runs/{run_id}"))
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.02)
    raise AssertionError(run)


def test_a_conversation_keeps_its_messages_and_variables(client: TestClient) -> None:
    agent = ok(client.post(f"{API}/agents", json=ECHO), 201)["id"]
    chat = ok(client.post(f"{API}/agents/{agent}/conversations"), 201)
    assert (chat["variables"], chat["messages"]) == ({"turns": 0}, [])
    say = f"{API}/conversations/{chat['id']}/messages"
    for text in ("hello", "again"):
        run = ok(client.post(say, json={"content": text}), 202)
        assert finished(client, run["id"])["status"] == "succeeded"
    seen = ok(client.get(f"{API}/conversations/{chat['id']}"))
    assert seen["variables"] == {"turns": 2}  # the next turn saw what the last one wrote
    assert [(m["role"], m["content"]) for m in seen["messages"]] == [
        ("user", "hello"), ("assistant", "#1: HELLO"),
        ("user", "again"), ("assistant", "#2: AGAIN"),
    ]  # fmt: skip
    empty = client.post(say, json={"content": " "})
    assert empty.status_code == 422


def test_only_its_user_sees_a_conversation(client: TestClient) -> None:
    agent = ok(client.post(f"{API}/agents", json=ECHO), 201)["id"]
    chat = ok(client.post(f"{API}/agents/{agent}/conversations"), 201)
    body = {"name": "sam", "display_name": "Sam"}
    sam = ok(client.post(f"{API}/users", json=body), 201)["id"]
    token = ok(client.post(f"{API}/users/{sam}/tokens", json={"name": "t"}), 201)["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get(f"{API}/conversations/{chat['id']}", headers=headers).status_code == 404
    say = f"{API}/conversations/{chat['id']}/messages"
    said = client.post(say, json={"content": "hi"}, headers=headers)
    assert said.status_code == 404


def test_an_event_agent_has_no_conversations(client: TestClient) -> None:
    doc = {**ECHO, "name": "evented", "input_mode": "event"}
    agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
    assert client.post(f"{API}/agents/{agent}/conversations").status_code == 422


def test_messages_sent_at_once_start_one_turn_at_a_time(client: TestClient) -> None:
    """Whatever the interleaving, every accepted message is a whole turn: the count of turns
    equals the accepted messages, and the log alternates user, assistant. The others get 409."""
    import threading

    agent = ok(client.post(f"{API}/agents", json=ECHO), 201)["id"]
    chat = ok(client.post(f"{API}/agents/{agent}/conversations"), 201)
    say = f"{API}/conversations/{chat['id']}/messages"
    gate = threading.Barrier(5)
    answers: list[Any] = []

    def send(i: int) -> None:
        gate.wait()
        answers.append(client.post(say, json={"content": f"m{i}"}))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    accepted = [r.json()["id"] for r in answers if r.status_code == 202]
    assert {r.status_code for r in answers} <= {202, 409} and accepted
    for run_id in accepted:
        assert finished(client, run_id)["status"] == "succeeded"
    seen = ok(client.get(f"{API}/conversations/{chat['id']}"))
    assert seen["variables"] == {"turns": len(accepted)}
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["user", "assistant"] * len(accepted)


def test_a_user_lists_their_own_conversations(client: TestClient) -> None:
    echo = ok(client.post(f"{API}/agents", json=ECHO), 201)["id"]
    other = ok(client.post(f"{API}/agents", json={**ECHO, "name": "echo-2"}), 201)["id"]
    mine = [ok(client.post(f"{API}/agents/{agent}/conversations"), 201)["id"]
            for agent in (echo, other, echo)]  # fmt: skip
    run = ok(client.post(f"{API}/conversations/{mine[0]}/messages", json={"content": "hi"}), 202)
    finished(client, run["id"])
    listed = ok(client.get(f"{API}/conversations"))
    assert [c["id"] for c in listed["data"]] == mine[::-1] and listed["next_cursor"] is None
    first = next(c for c in listed["data"] if c["id"] == mine[0])
    assert first["message_count"] == 2 and first["turn_run_id"] == run["id"]
    only = ok(client.get(f"{API}/conversations", params={"agent_id": echo}))["data"]
    assert [c["id"] for c in only] == [mine[2], mine[0]]
    page = ok(client.get(f"{API}/conversations", params={"limit": 2}))
    rest = ok(client.get(f"{API}/conversations", params={"cursor": page["next_cursor"]}))
    assert [c["id"] for c in page["data"] + rest["data"]] == mine[::-1]
    assert client.get(f"{API}/conversations", params={"limit": 0}).status_code == 422
    sam = ok(client.post(f"{API}/users", json={"name": "sam", "display_name": "Sam"}), 201)
    token = ok(client.post(f"{API}/users/{sam['id']}/tokens", json={"name": "t"}), 201)["token"]
    theirs = client.get(f"{API}/conversations", headers={"Authorization": f"Bearer {token}"})
    assert ok(theirs)["data"] == []
