"""Webhook triggers (issue 21), on SQLite and PostgreSQL: an agent's editor makes one (its secret
shown once), a signed delivery starts a run with the mapped inputs as the trigger's user, and
everything else is refused with nothing started: a bad signature, a stale timestamp, an
oversize body, a source not allowed. A retried delivery id gives the first run. Revoking the
user's access stops the trigger, with the reason shown."""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi.testclient import TestClient

from dhub.domain.triggers import signature
from tests.integration.test_runs_api import TRIAGE, create, ok, until, user

API = "/api/v1"
MAPPING = {"ticket": "{{ body.issue.title }}", "customer": "{{ headers['x-customer'] }}"}


def webhook(client: TestClient, agent_id: str, **config: Any) -> dict[str, Any]:
    doc = {"name": "github", "config": {"type": "webhook", **config}}
    return dict(ok(client.post(f"{API}/agents/{agent_id}/triggers", json=doc), 201))


def deliver(
    client: TestClient, hook: dict[str, Any], body: Any, *, secret: str | None = None,
    at: int | None = None, delivery: str | None = None, headers: dict[str, str] | None = None,
) -> Any:  # fmt: skip
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    stamp = str(int(time.time()) if at is None else at)
    sent = {
        "X-Dhub-Timestamp": stamp,
        "X-Dhub-Signature": signature(secret or hook["secret"], stamp, raw),
        "Content-Type": "application/json",
        **(headers or {}),
    }
    if delivery is not None:
        sent["X-Dhub-Delivery"] = delivery
    # No bearer token: the signature is the credential.
    return client.post(f"/hooks/{hook['id']}", content=raw, headers=sent,
                       auth=None)  # fmt: skip


def history(client: TestClient, agent_id: str, hook_id: str) -> list[dict[str, Any]]:
    path = f"{API}/agents/{agent_id}/triggers/{hook_id}/history"
    return list(ok(client.get(path))["data"])


def test_a_signed_delivery_starts_a_run_with_the_mapped_inputs(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    hook = webhook(client, agent, mapping=MAPPING)
    assert hook["secret"].startswith("whsec_") and hook["url"].endswith(f"/hooks/{hook['id']}")
    shown = ok(client.get(f"{API}/agents/{agent}/triggers/{hook['id']}"))
    assert "secret" not in shown and shown["status"] == "active"
    assert shown["runs_as"] == "user.admin"
    body = {"issue": {"title": "The app crashes on login"}}
    answer = deliver(client, hook, body, delivery="d-1", headers={"X-Customer": "acme"})
    assert answer.status_code == 202, answer.text
    run = until(client, answer.json()["run_id"], "succeeded", "failed")
    assert run["inputs"] == {"ticket": "The app crashes on login", "customer": "acme"}
    assert run["user_id"] == "user.admin"
    again = deliver(client, hook, body, delivery="d-1", headers={"X-Customer": "acme"})
    assert again.status_code == 200 and again.json()["run_id"] == run["id"]
    statuses = [(e["status"], e["run_id"]) for e in history(client, agent, hook["id"])]
    assert statuses == [("repeated", run["id"]), ("started", run["id"])]


def test_without_a_mapping_the_body_is_the_inputs(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    hook = webhook(client, agent)
    answer = deliver(client, hook, {"ticket": "Refund please"})
    assert answer.status_code == 202, answer.text
    assert ok(client.get(f"{API}/runs/{answer.json()['run_id']}"))["inputs"]["ticket"] == (
        "Refund please"
    )
    bad = deliver(client, hook, {"nothing": 1})  # the agent's inputs say what is missing
    assert bad.status_code == 422 and "ticket" in bad.json()["detail"]


def test_bad_deliveries_start_nothing_and_say_why(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    hook = webhook(client, agent)
    body = {"ticket": "x"}
    wrong = deliver(client, hook, body, secret="whsec_not-the-secret")
    stale = deliver(client, hook, body, at=int(time.time()) - 3600)
    future = deliver(client, hook, body, at=int(time.time()) + 3600)
    raw = orjson.dumps(body)
    unsigned = client.post(f"/hooks/{hook['id']}", content=raw)
    tampered = client.post(
        f"/hooks/{hook['id']}", content=orjson.dumps({"ticket": "y"}),
        headers={"X-Dhub-Timestamp": str(int(time.time())),
                 "X-Dhub-Signature": signature(hook["secret"], str(int(time.time())), raw)},
    )  # fmt: skip
    oversize = deliver(client, hook, b'{"ticket": "' + b"x" * (1 << 20) + b'"}')
    for answer in (wrong, stale, future, unsigned, tampered):
        assert answer.status_code == 401, answer.text
    assert oversize.status_code == 413
    assert ok(client.get(f"{API}/runs", params={"agent_id": agent}))["data"] == []
    reasons = [e["reason"] for e in history(client, agent, hook["id"])]
    assert len(reasons) == 5 and all(r.startswith("Signature refused") for r in reasons)
    assert client.post("/hooks/trigger.01jzzzzzzzzzzzzzzzzzzzzzzz", content=raw).status_code == 404


def test_a_source_not_allowed_is_refused(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    hook = webhook(client, agent, allowed_sources=["10.0.0.0/8"])
    answer = deliver(client, hook, {"ticket": "x"})
    assert answer.status_code == 403
    nowhere = {"config": {"type": "webhook", "allowed_sources": ["nowhere"]}}
    bad = client.post(f"{API}/agents/{agent}/triggers", json=nowhere)
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"].startswith("/config/allowed_sources")


def test_a_rotated_secret_replaces_the_old_one(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    hook = webhook(client, agent)
    rotated = ok(client.post(f"{API}/agents/{agent}/triggers/{hook['id']}/rotate-secret"))
    assert rotated["secret"] != hook["secret"]
    assert deliver(client, hook, {"ticket": "x"}).status_code == 401
    assert deliver(client, rotated, {"ticket": "x"}).status_code == 202


def test_only_editors_manage_triggers_and_chat_agents_have_none(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    hook = webhook(client, agent)
    eve = user(client, "eve")
    random_id = "agent.01jzzzzzzzzzzzzzzzzzzzzzzz"
    mine = client.get(f"{API}/agents/{agent}/triggers", headers=eve)
    other = client.get(f"{API}/agents/{random_id}/triggers", headers=eve)
    assert mine.status_code == other.status_code == 404
    assert mine.json()["detail"].replace(agent, "X") == other.json()["detail"].replace(
        random_id, "X"
    )
    grant = {"principal_id": eve["id"], "scope": "runner"}
    ok(client.post(f"{API}/agents/{agent}/grants", json=grant), 201)
    runner = client.get(f"{API}/agents/{agent}/triggers/{hook['id']}", headers=eve)
    assert runner.status_code == 403
    react = {"instructions": "Hi.", "model_provider": "openai", "model": "gpt-4o-mini"}
    chat = {"name": "chatty", "description": "", "mode": "react", "input_mode": "chat",
            "agent": react}  # fmt: skip
    chat_id = create(client, chat)
    refused = client.post(f"{API}/agents/{chat_id}/triggers",
                          json={"config": {"type": "webhook"}})  # fmt: skip
    assert refused.status_code == 422 and "event agents" in refused.text


def test_revoking_the_users_access_stops_the_trigger(client: TestClient) -> None:
    agent = create(client, TRIAGE)
    bob = user(client, "bob")
    ok(client.post(f"{API}/agents/{agent}/grants",
                   json={"principal_id": bob["id"], "scope": "editor"}), 201)  # fmt: skip
    doc = {"config": {"type": "webhook"}}
    hook = ok(client.post(f"{API}/agents/{agent}/triggers", json=doc, headers=bob), 201)
    assert hook["runs_as"] == bob["id"]
    started = deliver(client, hook, {"ticket": "x"})
    assert started.status_code == 202
    assert ok(client.get(f"{API}/runs/{started.json()['run_id']}"))["user_id"] == bob["id"]
    assert client.delete(f"{API}/agents/{agent}/grants/{bob['id']}").status_code == 204
    stopped = deliver(client, hook, {"ticket": "y"})
    assert stopped.status_code == 409 and "can no longer run" in stopped.json()["detail"]
    shown = ok(client.get(f"{API}/agents/{agent}/triggers/{hook['id']}"))
    assert shown["status"] == "stopped" and bob["id"] in shown["stopped_reason"]
    # An editor who enables it again becomes its user.
    enabled = ok(client.patch(f"{API}/agents/{agent}/triggers/{hook['id']}",
                              json={"enabled": True}))  # fmt: skip
    assert (enabled["status"], enabled["runs_as"]) == ("active", "user.admin")
    assert deliver(client, hook, {"ticket": "z"}).status_code == 202


def test_the_run_sees_the_payload_and_headers_but_no_credential(client: TestClient) -> None:
    echo = {
        "name": "echo-event", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": []}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "event", "type": "object", "value": "{{ sys.event }}"}]}},
        ],
        "edges": [{"source": "start", "target": "end"}],
    }  # fmt: skip
    agent = create(client, echo)
    hook = webhook(client, agent, mapping={})
    sent = {"Authorization": "Bearer sender-credential", "X-Customer": "acme"}
    answer = deliver(client, hook, {"action": "opened"}, headers=sent)
    run = until(client, answer.json()["run_id"], "succeeded", "failed")
    event = run["outputs"]["event"]
    assert event["type"] == "webhook" and event["trigger_id"] == hook["id"]
    assert event["payload"] == {"action": "opened"}
    assert event["headers"]["x-customer"] == "acme"
    assert "authorization" not in event["headers"]
    assert "x-dhub-signature" not in event["headers"]
