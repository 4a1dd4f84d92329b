"""``dhub runs`` and ``dhub tasks`` against a real app (SQLite and PostgreSQL), through
CliRunner with the SDK on the conftest's TestClient; plus the SDK's event stream."""

from __future__ import annotations

import json
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client
from dhub.client._models import Run
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.integration.test_runs_api import REFUND

TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")
URGENT = ("--input", "ticket=Total outage since 9am", "--input", "customer=acme")
ROUTINE = ("--input", "ticket=Checkout page shows an error")


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api)

    return run


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def until(api: Client, run_id: str, *statuses: str) -> Run:
    for _ in range(600):
        run = api.get_run(run_id)
        if run.status in statuses:
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} stayed {run.status}")


def started(dhub: Any, agent_id: str, *inputs: str) -> str:
    """Start a run with ``dhub runs start --json`` (no waiting); its id."""
    return str(json.loads(ok(dhub("runs", "start", agent_id, *inputs, "--json")).stdout)["id"])


def test_a_person_answers_the_triage_form(dhub: Any, api: Client) -> None:
    triage = api.create_agent(TRIAGE)["id"]
    run_id = started(dhub, triage, *URGENT)
    waiting = until(api, run_id, "waiting")
    assert waiting.waiting is not None and waiting.waiting["node_id"] == "approve"

    header, row = ok(dhub("tasks", "list")).stdout.splitlines()
    assert header.split() == ["RUN", "AGENT", "NODE", "KIND", "ID", "ASKS", "DUE"]
    assert row.split()[:4] == [run_id, "ticket-triage", "approve", "input"]
    assert "Escalate ticket from acme: Total outage since 9am?" in row
    [task] = json.loads(ok(dhub("tasks", "list", "--json")).stdout)
    assert (task["run_id"], task["kind"]) == (run_id, "await_input")

    answered = ok(dhub("tasks", "answer", run_id, "approve", "--value", "escalate=true"))
    assert answered.stdout == f"answered approve of {run_id}\n"
    until(api, run_id, "succeeded", "failed")
    got = json.loads(ok(dhub("runs", "get", run_id, "--json")).stdout)
    assert got["status"] == "succeeded"
    assert got["outputs"] == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}
    shown = dict(
        line.split(": ", 1) for line in ok(dhub("runs", "get", run_id)).stdout.splitlines()
    )
    assert shown["agent"].split() == ["ticket-triage", f"({triage}),", "version", "1"]
    assert shown["status"].strip() == "succeeded"
    assert json.loads(shown["outputs"]) == got["outputs"]
    assert ok(dhub("tasks", "list")).stdout == "No tasks waiting for you.\n"


def test_a_bad_answer_is_refused_with_the_field_named(dhub: Any, api: Client) -> None:
    run_id = started(dhub, api.create_agent(TRIAGE)["id"], *URGENT)
    until(api, run_id, "waiting")
    refused = dhub("tasks", "answer", run_id, "approve", "--value", "escalate=maybe")
    assert refused.exit_code == 1
    assert "(HTTP 422)" in refused.stderr and "escalate" in refused.stderr
    assert api.get_run(run_id).status == "waiting"


def test_start_wait_prints_the_outputs(dhub: Any, api: Client) -> None:
    triage = api.create_agent(TRIAGE)["id"]
    result = ok(dhub("runs", "start", triage, *ROUTINE, "--wait", "--timeout", "60"))
    assert json.loads(result.stdout) == {"category": "bug", "summary": "bug from anonymous"}


def test_start_follow_shows_the_nodes_then_prints_the_outputs(dhub: Any, api: Client) -> None:
    triage = api.create_agent(TRIAGE)["id"]
    result = ok(dhub("runs", "start", triage, *ROUTINE, "--follow", "--timeout", "60"))
    assert json.loads(result.stdout) == {"category": "bug", "summary": "bug from anonymous"}
    assert "classify" in result.stderr and "normal_summary" in result.stderr


def test_string_inputs_stay_text(dhub: Any, api: Client) -> None:
    triage = api.create_agent(TRIAGE)["id"]
    run_id = started(dhub, triage, "--input", "ticket=123")
    assert api.get_run(run_id).inputs["ticket"] == "123"  # declared a string: not the number


def test_list_events_and_cancel(dhub: Any, api: Client) -> None:
    triage = api.create_agent(TRIAGE)["id"]
    done = ok(dhub("runs", "start", triage, *ROUTINE, "--wait", "--timeout", "60"))
    assert done.exit_code == 0
    run_id = started(dhub, triage, *URGENT)
    until(api, run_id, "waiting")

    [waiting_run, done_run] = json.loads(
        ok(dhub("runs", "list", "--agent", triage, "--json")).stdout
    )
    assert waiting_run["id"] == run_id and done_run["status"] == "succeeded"
    table = ok(dhub("runs", "list", "--agent", "ticket-triage")).stdout.splitlines()
    assert table[0].split() == ["ID", "AGENT", "VERSION", "STATUS", "STARTED", "FINISHED"]
    assert table[1].split()[:2] == [run_id, "ticket-triage"]  # the agent's name, not its id
    assert "waiting (input at approve)" in table[1] and "succeeded" in table[2]
    only = json.loads(
        ok(dhub("runs", "list", "--agent", triage, "--status", "waiting", "--json")).stdout
    )
    assert [r["id"] for r in only] == [run_id]

    lines = [
        json.loads(x) for x in ok(dhub("runs", "events", run_id, "--json")).stdout.splitlines()
    ]
    assert lines[0]["type"] == "run.started"
    assert ("node.waiting", "approve") in {(e["type"], e["node_id"]) for e in lines}
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    later = ok(dhub("runs", "events", run_id, "--after", "2")).stdout.splitlines()
    assert len(later) == len(lines) - 2 and later[0].startswith("3  ")

    assert ok(dhub("runs", "cancel", run_id)).stdout == f"cancelled {run_id}\n"
    assert api.get_run(run_id).status == "cancelled"
    again = dhub("runs", "cancel", run_id)
    assert again.exit_code == 1 and "(HTTP 409)" in again.stderr


def test_an_actor_call_is_approved_with_edited_arguments(
    dhub: Any, api: Client, tmp_path: Path
) -> None:
    refunds = api.create_agent(REFUND)["id"]
    run_id = started(dhub, refunds, "--input", "amount=30")
    until(api, run_id, "waiting")
    [task] = api.list_tasks()
    assert task.kind == "await_confirmation" and task.request["arguments"] == {"amount": 30}
    listed = ok(dhub("tasks", "list")).stdout
    assert "confirm" in listed and task.command_id in listed and "refund(amount=30)" in listed

    edited = tmp_path / "args.json"
    edited.write_text(json.dumps({"amount": 5}))
    ok(dhub("tasks", "approve", run_id, task.command_id, "--arguments-json", edited))
    assert until(api, run_id, "succeeded", "failed").outputs == {"paid": 5}


def test_a_rejected_actor_call_fails_the_run(dhub: Any, api: Client) -> None:
    refunds = api.create_agent(REFUND)["id"]
    run_id = started(dhub, refunds, "--input", "amount=30")
    until(api, run_id, "waiting")
    [task] = api.list_tasks()
    rejected = ok(dhub("tasks", "reject", run_id, task.command_id, "--reason", "too much"))
    assert rejected.stdout == f"rejected {task.command_id} of {run_id}\n"
    finished = until(api, run_id, "succeeded", "failed")
    assert finished.status == "failed"


def test_an_unknown_run_is_a_clear_error(dhub: Any) -> None:
    for args in (("runs", "get", "run.nope"), ("runs", "events", "run.nope"),
                 ("runs", "cancel", "run.nope")):  # fmt: skip
        result = dhub(*args)
        assert result.exit_code == 1, result.output
        assert "(HTTP 404)" in result.stderr and "Traceback" not in result.output


def test_the_stream_resumes_after_the_seq_given(api: Client) -> None:
    triage = api.create_agent(TRIAGE)["id"]
    run = api.start_run(triage, {"ticket": "Total outage since 9am", "customer": "acme"})
    first = []
    with closing(api.stream_run_events(run.id)) as stream:  # hang up while the run waits
        for event in stream:
            first.append(event)
            if event.type == "node.waiting":
                break
    api.answer_input(run.id, "approve", {"escalate": True})
    rest = list(api.stream_run_events(run.id, after=first[-1].seq))
    assert first + rest == api.run_events(run.id)
    assert rest[-1].type == "run.succeeded"
    assert api.wait_run(run.id, timeout=10).outputs == {
        "category": "bug",
        "summary": "URGENT bug from acme; escalate=True",
    }


def test_a_stream_cut_before_the_run_ended_is_resumed_with_last_event_id() -> None:
    def event(seq: int, kind: str) -> str:
        body = {"seq": seq, "type": kind, "node_id": None, "data": {}, "created_at": 0}
        return f"id: {seq}\nevent: {kind}\ndata: {json.dumps(body)}\n\n"

    resumed_from: list[str | None] = []

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            resumed_from.append(request.headers.get("last-event-id"))
            if len(resumed_from) == 1:  # a proxy cuts the first stream after one event
                return httpx.Response(200, text=": keep-alive\n\n" + event(1, "run.started"))
            return httpx.Response(200, text=event(2, "run.succeeded"))
        run = {"id": "run.1", "status": "running"}  # only what the client looks at
        return httpx.Response(200, json=run)

    with Client("http://dhub.test", "t", transport=httpx.MockTransport(server)) as sdk:
        events = list(sdk.stream_run_events("run.1"))
    assert [(e.seq, e.type) for e in events] == [(1, "run.started"), (2, "run.succeeded")]
    assert resumed_from == [None, "1"]


def test_waiting_gives_up_after_the_timeout(dhub: Any, api: Client, client: TestClient) -> None:
    client.app.state.services.runs.keepalive = 0.05  # type: ignore[attr-defined]
    triage = api.create_agent(TRIAGE)["id"]
    result = dhub("runs", "start", triage, *URGENT, "--wait", "--timeout", "1.5")
    assert result.exit_code == 1, result.output
    assert "did not finish within 1.5s" in result.stderr and "dhub runs get run." in result.stderr
    assert "waits for input at 'approve': dhub tasks answer" in result.stderr
    [run] = api.list_runs(agent=triage)
    assert run.status == "waiting"
    with pytest.raises(TimeoutError):
        api.wait_run(run.id, timeout=0.2)


def test_a_script_starts_answers_and_waits_without_polling(dhub: Any, api: Client) -> None:
    api.create_agent(TRIAGE)
    started = ok(dhub("runs", "start", "ticket-triage", *URGENT))
    run_id = started.stdout.strip()  # the id alone: RUN=$(dhub runs start ...)
    assert run_id.startswith("run.") and "\n" not in run_id
    assert started.stderr.startswith(f"Started {run_id} of ticket-triage (agent.")
    # Answered at once: the command waits for the run to reach its form.
    answered = ok(dhub("tasks", "answer", run_id, "approve", "--value", "escalate=true"))
    assert answered.stdout == f"answered approve of {run_id}\n"
    got = json.loads(ok(dhub("runs", "get", run_id, "--wait", "--timeout", "60", "--json")).stdout)
    assert got["status"] == "succeeded"
    assert got["outputs"] == {"category": "bug", "summary": "URGENT bug from acme; escalate=True"}


def test_answering_a_form_the_run_never_reaches_says_so(dhub: Any, api: Client) -> None:
    run_id = started(dhub, api.create_agent(TRIAGE)["id"], "--input", "ticket=Hello")
    refused = dhub("tasks", "answer", run_id, "approve", "--value", "escalate=true")
    assert refused.exit_code == 1, refused.output  # it ended without asking: the server says
    assert refused.stderr == (
        f"Error: Run '{run_id}' is not waiting for that (succeeded). (HTTP 404)\n"
    )
