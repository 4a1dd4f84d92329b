"""Triggers from the SDK and the CLI (SQLite and PostgreSQL): a webhook made for the triage
agent (its secret printed once), a delivery signed with ``sign_delivery`` or sent with ``dhub
triggers send`` (the secret from the environment) starts a run, a retry gives the first run,
the history shows both, a rotated secret refuses the old one, and a disabled trigger
refuses everything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client, Conflict, NotFound, Unauthenticated, sign_delivery
from dhub.domain.triggers import signature
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_cli_json import TRIAGE

WEBHOOK = {"name": "helpdesk", "config": {"type": "webhook"}}


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api, env=env)

    return run


def triage(api: Client) -> str:
    return str(api.create_agent(json.loads(TRIAGE.read_text()))["id"])


def test_sign_delivery_is_the_servers_signature() -> None:
    headers = sign_delivery("whsec_x", '{"a": 1}', delivery="d-1", timestamp=1700000000)
    assert headers["X-Dhub-Signature"] == signature("whsec_x", "1700000000", b'{"a": 1}')
    assert (headers["X-Dhub-Timestamp"], headers["X-Dhub-Delivery"]) == ("1700000000", "d-1")


def test_the_sdk_makes_a_webhook_and_posts_to_it(api: Client) -> None:
    agent = triage(api)
    hook = api.create_trigger("ticket-triage", WEBHOOK)  # by name
    assert hook["secret"].startswith("whsec_") and hook["type"] == "webhook"
    assert "secret" not in api.get_trigger(agent, hook["id"])
    assert [t["id"] for t in api.list_triggers(agent)] == [hook["id"]]

    body = json.dumps({"ticket": "Checkout page shows an error"})
    sent = api.send_delivery(hook["url"], hook["secret"], body, delivery="d-1")
    assert sent["run_id"].startswith("run.") and sent["repeated"] is False
    again = api.send_delivery(hook["url"], hook["secret"], body, delivery="d-1")
    assert (again["run_id"], again["repeated"]) == (sent["run_id"], True)
    assert [(e["status"], e["run_id"]) for e in api.trigger_history(agent, hook["id"])] == [
        ("repeated", sent["run_id"]),
        ("started", sent["run_id"]),
    ]

    [newest] = api.trigger_history(agent, hook["id"], limit=1)
    [older] = api.trigger_history(agent, hook["id"], before=newest["id"])
    assert (newest["status"], older["status"]) == ("repeated", "started")

    rotated = api.rotate_trigger_secret(agent, hook["id"])
    assert rotated["secret"] != hook["secret"]
    with pytest.raises(Unauthenticated):
        api.send_delivery(hook["url"], hook["secret"], body)
    refused = api.trigger_history(agent, hook["id"], limit=1)
    assert refused[0]["status"] != "started" and refused[0]["run_id"] is None

    assert api.update_trigger(agent, hook["id"], {"enabled": False})["enabled"] is False
    with pytest.raises(Conflict, match="stopped: disabled"):
        api.send_delivery(hook["url"], rotated["secret"], body)
    api.delete_trigger(agent, hook["id"])
    assert api.list_triggers(agent) == []


def test_the_cli_makes_sends_and_shows(dhub: Any, api: Client, tmp_path: Path) -> None:
    agent = triage(api)
    document = tmp_path / "hook.yaml"
    document.write_text("name: helpdesk\nconfig:\n  type: webhook\n")
    created = dhub("triggers", "create", "ticket-triage", "-f", document)
    assert created.exit_code == 0, created.output
    assert created.stdout.startswith("created trigger.") and "shown this once" in created.stderr
    [hook] = api.list_triggers(agent)
    secret = next(line.split()[1] for line in created.stdout.splitlines()
                  if line.startswith("secret:"))  # fmt: skip
    listed = dhub("triggers", "list", "ticket-triage")
    assert (
        hook["id"] in listed.output and "active" in listed.output and hook["url"] in listed.output
    )

    payload = tmp_path / "ticket.json"
    payload.write_text(json.dumps({"ticket": "Refund please", "customer": "acme"}))
    args = ("triggers", "send", hook["url"], "--secret-env", "HOOK_SECRET", "-f", payload)
    unset = dhub(*args, env={"HOOK_SECRET": ""})
    assert unset.exit_code == 2 and "$HOOK_SECRET is empty" in unset.output
    sent = dhub(*args, "--delivery", "t-1", env={"HOOK_SECRET": secret})
    assert sent.exit_code == 0, sent.output
    run_id = sent.stdout.split()[-1]
    assert api.get_run(run_id).inputs["customer"] == "acme"
    again = dhub(*args, "--delivery", "t-1", env={"HOOK_SECRET": secret})
    assert again.stdout.strip() == f"repeated: the first run is {run_id}"
    wrong = dhub(*args, env={"HOOK_SECRET": "whsec_wrong"})
    assert wrong.exit_code == 1 and "signature" in wrong.output

    shown = dhub("triggers", "history", "ticket-triage", hook["id"])
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:4] == ["AT", "KIND", "STATUS", "RUN"]
    assert [line.split()[3] for line in lines[1:]][-2:] == ["repeated", "started"]
    newest = api.trigger_history(agent, hook["id"], limit=1)[0]["id"]
    paged = dhub("triggers", "history", "ticket-triage", hook["id"], "--before", newest)
    assert len(paged.stdout.splitlines()) == len(lines) - 1

    disabled = dhub("triggers", "disable", "ticket-triage", hook["id"])
    assert disabled.stdout.startswith(f"disabled {hook['id']}")
    assert "disabled" in dhub("triggers", "get", "ticket-triage", hook["id"]).output
    assert dhub("triggers", "enable", "ticket-triage", hook["id"]).exit_code == 0
    rotated = dhub("triggers", "rotate-secret", "ticket-triage", hook["id"])
    assert "secret: whsec_" in rotated.stdout and secret not in rotated.stdout
    gone = dhub("triggers", "delete", "ticket-triage", hook["id"])
    assert gone.stdout.strip() == f"deleted {hook['id']}"
    missing = dhub("triggers", "get", "ticket-triage", hook["id"])
    assert missing.exit_code == 1 and "Error" in missing.output


def test_a_stranger_learns_nothing(api: Client, client: TestClient) -> None:
    """Someone who cannot edit the agent gets the same answer for a real trigger as for a
    made-up one, from the SDK as from the API."""
    from tests.integration.test_runs_api import user

    agent = triage(api)
    hook = api.create_trigger(agent, WEBHOOK)
    token = user(client, "mallory")["Authorization"].removeprefix("Bearer ")
    stranger = Client(str(client.base_url), token, http=client)
    answers = []
    for trigger in (hook["id"], "trigger.01nosuchthing000000000000000"):
        with pytest.raises(NotFound) as caught:
            stranger.get_trigger(agent, trigger)
        answers.append(caught.value.detail)
    assert answers[0] == answers[1]
