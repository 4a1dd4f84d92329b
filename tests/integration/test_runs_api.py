"""The run API on SQLite and PostgreSQL: start, poll, events, list, cancel, and who may."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import FIXTURES, load_json

API = "/api/v1"
TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")
BATCH = load_json(FIXTURES / "valid" / "workflow_batch.json")


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def create(client: TestClient, doc: dict[str, Any]) -> str:
    return str(ok(client.post(f"{API}/agents", json=doc), 201)["id"])


def until(client: TestClient, run_id: str, *statuses: str, **headers: str) -> dict[str, Any]:
    for _ in range(600):
        run: dict[str, Any] = ok(client.get(f"{API}/runs/{run_id}", headers=headers))
        if run["status"] in statuses:
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} stayed {run['status']}")


def user(client: TestClient, name: str) -> dict[str, str]:
    body = {"name": name, "display_name": name.title()}
    user_id = ok(client.post(f"{API}/users", json=body), 201)["id"]
    token = ok(client.post(f"{API}/users/{user_id}/tokens", json={"name": "t"}), 201)["token"]
    return {"Authorization": f"Bearer {token}", "id": user_id}


def test_both_fixtures_run_on_the_server(client: TestClient) -> None:
    triage, batch = create(client, TRIAGE), create(client, BATCH)
    routine = {"inputs": {"ticket": "Checkout page shows an error"}}
    started = client.post(f"{API}/agents/{triage}/runs", json=routine)
    run = ok(started, 202)
    assert started.headers["location"] == f"{API}/runs/{run['id']}"
    assert (run["agent_version"], run["status"]) == (1, "queued")
    done = until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"category": "bug", "summary": "bug from anonymous"}
    numbers = {"inputs": {"numbers": [1, 2, 3]}}
    run = ok(client.post(f"{API}/agents/{batch}/runs", json=numbers), 202)
    done = until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"total": 14, "report": "#0: 1\n#1: 4\n#2: 9\n", "checked": False}
    events = ok(client.get(f"{API}/runs/{run['id']}/events"))["data"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.succeeded"
    later = ok(client.get(f"{API}/runs/{run['id']}/events", params={"after": 5}))["data"]
    assert later == events[5:]
    listed = ok(client.get(f"{API}/runs", params={"agent_id": batch}))["data"]
    assert [r["id"] for r in listed] == [run["id"]]


def test_start_inputs_are_checked_before_the_run_exists(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    bad = client.post(f"{API}/agents/{triage}/runs", json={"inputs": {"customer": 3}})
    assert bad.status_code == 422
    locs = {e["loc"]: e["message"] for e in bad.json()["errors"]}
    assert locs == {  # every problem at once, each at its input
        "/inputs/ticket": "'ticket' is required (string).",
        "/inputs/customer": "'customer' should be a string, got 3.",
    }
    wrong = client.post(f"{API}/agents/{triage}/runs", json={"inputs": [], "extra": 1})
    assert {e["loc"] for e in wrong.json()["errors"]} == {"/inputs", "/extra"}
    assert ok(client.get(f"{API}/runs", params={"agent_id": triage}))["data"] == []


def test_a_waiting_run_can_be_cancelled(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    body = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
    run = ok(client.post(f"{API}/agents/{triage}/runs", json=body), 202)
    waiting = until(client, run["id"], "waiting")
    assert waiting["waiting"]["for"] == "input" and waiting["waiting"]["node_id"] == "approve"
    cancelled = ok(client.post(f"{API}/runs/{run['id']}/cancel"))
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"] is not None
    again = client.post(f"{API}/runs/{run['id']}/cancel")
    assert again.status_code == 409


def test_who_may_start_read_and_cancel(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    viewer, runner, stranger = user(client, "vic"), user(client, "rita"), user(client, "sam")
    for who, scope in ((viewer, "viewer"), (runner, "runner")):
        grant = {"principal_id": who["id"], "scope": scope}
        ok(client.post(f"{API}/agents/{triage}/grants", json=grant), 201)
    inputs = {"inputs": {"ticket": "Total outage since 9am"}}

    def as_(who: dict[str, str]) -> dict[str, str]:
        return {"Authorization": who["Authorization"]}

    def start(who: dict[str, str]) -> Any:
        return client.post(f"{API}/agents/{triage}/runs", json=inputs, headers=as_(who))

    assert start(viewer).status_code == 403  # sees the agent, may not run it
    assert start(stranger).status_code == 404  # does not see it at all
    run = ok(start(runner), 202)
    assert run["user_id"] == runner["id"]
    until(client, run["id"], "waiting", **as_(runner))
    assert ok(client.get(f"{API}/runs/{run['id']}", headers=as_(viewer)))["id"] == run["id"]
    assert client.get(f"{API}/runs/{run['id']}", headers=as_(stranger)).status_code == 404
    assert client.post(f"{API}/runs/{run['id']}/cancel", headers=as_(viewer)).status_code == 403
    mine = ok(client.get(f"{API}/runs", headers=as_(runner)))["data"]
    assert [r["id"] for r in mine] == [run["id"]]
    assert ok(client.get(f"{API}/runs", headers=as_(viewer)))["data"] == []  # started none
    ok(client.post(f"{API}/runs/{run['id']}/cancel", headers=as_(runner)))


def test_a_person_answers_the_triage_form_through_tasks(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    body = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
    run = ok(client.post(f"{API}/agents/{triage}/runs", json=body), 202)
    until(client, run["id"], "waiting")
    [task] = ok(client.get(f"{API}/tasks"))["data"]
    assert (task["run_id"], task["kind"], task["node_id"]) == (run["id"], "await_input", "approve")
    assert task["request"]["prompt"] == "Escalate ticket from acme: Total outage since 9am?"
    answer = f"{API}/runs/{run['id']}/inputs/approve"
    refused = client.post(answer, json={"values": {"escalate": "maybe"}})
    assert refused.status_code == 422 and "escalate" in refused.json()["errors"][0]["message"]
    stranger = user(client, "sam")
    sam = {"Authorization": stranger["Authorization"]}
    assert client.post(answer, json={"values": {"escalate": True}}, headers=sam).status_code == 404
    assert ok(client.get(f"{API}/tasks", headers=sam))["data"] == []
    ok(client.post(answer, json={"values": {"escalate": True}}), 202)
    done = until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    assert ok(client.get(f"{API}/tasks"))["data"] == []
    assert client.post(answer, json={"values": {"escalate": True}}).status_code == 404


REFUND = {
    "name": "refunds", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "amount", "type": "number"}]}},
        {"id": "pay", "type": "actor_call", "config": {
            "actor": {"name": "refund", "confirmation_policy": "confirm", "function": {
                "source": "def refund(amount):\n    return {'refunded': amount}\n"}},
            "input_mappings": {"amount": "{{ amount }}"}, "outputs": {"paid": "refunded"}}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "paid", "type": "number", "value": "{{ paid }}"}]}},
    ],
    "edges": [{"source": "start", "target": "pay"}, {"source": "pay", "target": "end"}],
}  # fmt: skip


def test_an_actor_call_is_confirmed_with_edited_arguments(client: TestClient) -> None:
    refunds = create(client, REFUND)
    run = ok(client.post(f"{API}/agents/{refunds}/runs", json={"inputs": {"amount": 30}}), 202)
    waiting = until(client, run["id"], "waiting")
    assert waiting["waiting"]["for"] == "confirmation"
    [task] = ok(client.get(f"{API}/tasks"))["data"]
    assert task["request"]["arguments"] == {"amount": 30}
    confirm = f"{API}/runs/{run['id']}/confirmations/{task['command_id']}"
    assert client.post(confirm, json={"approve": "yes"}).status_code == 422
    ok(client.post(confirm, json={"approve": True, "arguments": {"amount": 5}}), 202)
    assert until(client, run["id"], "succeeded", "failed")["outputs"] == {"paid": 5}


def sse(
    client: TestClient, url: str, stop: str | None = None, **headers: str
) -> list[dict[str, Any]]:
    """The events of an SSE stream, read until it ends (or until an event of type ``stop``)."""
    events: list[dict[str, Any]] = []
    with client.stream("GET", url, headers={"Accept": "text/event-stream", **headers}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in stream.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if "data" in fields:
                event = json.loads(fields["data"])
                assert int(fields["id"]) == event["seq"] and fields["event"] == event["type"]
                events.append(event)
                if event["type"] == stop:
                    break
            fields = {}
    return events


def test_a_stream_resumed_with_last_event_id_misses_nothing(client: TestClient) -> None:
    client.app.state.services.runs.keepalive = 0.1  # type: ignore[attr-defined]
    triage = create(client, TRIAGE)
    body = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
    run = ok(client.post(f"{API}/agents/{triage}/runs", json=body), 202)
    url = f"{API}/runs/{run['id']}/events"
    first = sse(client, url, stop="node.waiting")  # disconnects while the run waits
    assert first[-1]["node_id"] == "approve"
    answer = {"values": {"escalate": True}}
    ok(client.post(f"{API}/runs/{run['id']}/inputs/approve", json=answer), 202)
    rest = sse(client, url, **{"Last-Event-ID": str(first[-1]["seq"])})
    stored = ok(client.get(url))["data"]
    assert first + rest == stored  # each event once, in order
    assert stored[-1]["type"] == "run.succeeded"


def test_starting_with_stream_true_streams_the_run(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    body = {"inputs": {"ticket": "Checkout page shows an error"}, "stream": True}
    events = []
    with client.stream("POST", f"{API}/agents/{triage}/runs", json=body) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.succeeded"
    assert events[-1]["data"]["outputs"] == {"category": "bug", "summary": "bug from anonymous"}


def test_an_event_starts_a_run_once_per_idempotency_key(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    event = {"type": "ticket.created", "payload": {"ticket": "Checkout page shows an error"},
             "idempotency_key": "ticket-42"}  # fmt: skip
    first = client.post(f"{API}/agents/{triage}/events", json=event)
    run = ok(first, 202)
    assert run["inputs"] == {"ticket": "Checkout page shows an error", "customer": "anonymous"}
    again = client.post(f"{API}/agents/{triage}/events", json=event)
    assert ok(again, 200)["id"] == run["id"]  # the first run, never a second one
    done = until(client, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"category": "bug", "summary": "bug from anonymous"}
    assert len(ok(client.get(f"{API}/runs", params={"agent_id": triage}))["data"]) == 1
    bad = client.post(f"{API}/agents/{triage}/events", json={"payload": []})
    assert {e["loc"] for e in bad.json()["errors"]} == {"/type", "/payload"}


def test_a_run_no_task_holds_is_cancelled_from_its_saved_state(client: TestClient) -> None:
    triage = create(client, TRIAGE)
    body = {"inputs": {"ticket": "Total outage since 9am"}}
    run = ok(client.post(f"{API}/agents/{triage}/runs", json=body), 202)
    until(client, run["id"], "waiting")
    executor = client.app.state.services.runs.executor  # type: ignore[attr-defined]
    client.portal.call(executor.close)  # type: ignore[union-attr]  # its worker stops
    cancelled = ok(client.post(f"{API}/runs/{run['id']}/cancel"))
    assert cancelled["status"] == "cancelled" and cancelled["waiting"] is None
    events = ok(client.get(f"{API}/runs/{run['id']}/events"))["data"]
    assert events[-1]["type"] == "run.cancelled"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert ok(client.get(f"{API}/tasks"))["data"] == []  # its form closed with it
