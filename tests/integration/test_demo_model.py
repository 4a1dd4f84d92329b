"""The demo model (docs/providers.md, "The demo model"): with no provider key, the examples'
model agents still run on a server that has the demo model on, every answer says it came
from the demo model, the API says which providers it answers for, and it never stands in for
a provider that is configured. SQLite and PostgreSQL."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.services.examples import read_document
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_runs_api import ok, until
from tests.support.examples import filled

API = "/api/v1"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUPPORT = read_document(EXAMPLES / "support_assistant.yaml")
SUMMARIZER = read_document(EXAMPLES / "incident_summarizer.json")


def server(settings: Settings, demo: bool = True, **entries: EntryConfig) -> TestClient:
    configured = Settings(**{**vars(settings), "demo_model": demo,
                             "providers": ProvidersConfig(entries=entries)})  # fmt: skip
    client = TestClient(create_app(configured))
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


def events(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    return list(ok(client.get(f"{API}/runs/{run_id}/events", params={"limit": 1000}))["data"])


def say(client: TestClient, conversation: str, text: str) -> str:
    sent = client.post(f"{API}/conversations/{conversation}/messages", json={"content": text})
    return str(ok(sent, 202)["id"])


def decide(client: TestClient, run_id: str, **body: Any) -> dict[str, Any]:
    [task] = [t for t in ok(client.get(f"{API}/tasks"))["data"] if t["run_id"] == run_id]
    path = f"{API}/runs/{run_id}/confirmations/{task['command_id']}"
    ok(client.post(path, json=body), 202)
    return dict(task)


def test_the_support_example_looks_up_asks_to_refund_and_answers_with_no_key(
    settings: Settings,
) -> None:
    with server(settings) as client:
        agent = ok(client.post(f"{API}/agents", json=filled(client, SUPPORT)), 201)["id"]
        chat = ok(client.post(f"{API}/agents/{agent}/conversations"), 201)["id"]
        run_id = say(client, chat, "Please refund order A-1001")
        waiting = until(client, run_id, "waiting", "failed")
        assert waiting["waiting"]["for"] == "confirmation", waiting
        task = decide(client, run_id, approve=True)
        done = until(client, run_id, "succeeded", "failed")
        log = events(client, run_id)
        # A second turn, refused: the demo model says it did not refund.
        second = say(client, chat, "Also refund order B-77")
        until(client, second, "waiting", "failed")
        decide(client, second, approve=False, reason="B-77 was never paid")
        refused = until(client, second, "succeeded", "failed")
        conversation = ok(client.get(f"{API}/conversations/{chat}"))
    assert task["request"]["actor"] == "issue_refund"
    assert task["request"]["arguments"] == {"order_id": "A-1001", "amount": 42.0}
    assert done["outputs"] == {"answer": "Done: order A-1001 is refunded (42.0)."}, done
    calls = [(e["type"], e["data"].get("name")) for e in log if e["type"].startswith("tool.")]
    assert calls == [
        ("tool.called", "lookup_order"),
        ("tool.succeeded", "lookup_order"),
        ("tool.called", "issue_refund"),
        ("tool.succeeded", "issue_refund"),
    ]
    messages = [e for e in log if e["type"] == "agent.message"]
    assert len(messages) == 3
    assert all(m["data"]["usage"]["model"] == "demo" for m in messages)
    assert done["usage"]["model"] == "demo" and done["usage"]["input_tokens"] > 0
    assert done["usage"]["cost_usd"] == 0  # nobody was paid for the demo model's answers
    assert refused["outputs"]["answer"].startswith("I did not refund order B-77.")
    assert "B-77 was never paid" in refused["outputs"]["answer"]
    replies = [m["content"] for m in conversation["messages"] if m["role"] == "assistant"]
    assert replies == [done["outputs"]["answer"], refused["outputs"]["answer"]]


def test_the_summarizer_example_gets_a_headline_marked_demo(settings: Settings) -> None:
    with server(settings) as client:
        agent = ok(client.post(f"{API}/agents", json=SUMMARIZER), 201)["id"]
        body = {"inputs": {"alert": {"host": "db-1", "disk": 97}}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=body), 202)
        done = until(client, run["id"], "succeeded", "failed")
        log = events(client, run["id"])
    assert done["outputs"] == {"headline": "Disk at 97% on db-1"}, done
    [summarized] = [e for e in log if e["type"] == "node.succeeded" and e["node_id"] == "summarize"]
    assert summarized["data"]["usage"]["model"] == "demo"
    assert summarized["data"]["usage"]["estimated"] is True
    assert done["usage"]["model"] == "demo"


def test_anything_else_gets_an_honest_demo_reply_saying_what_to_set(settings: Settings) -> None:
    doc = copy.deepcopy(SUPPORT)
    doc["name"] = "plain"
    doc["agent"].update(tools=[], actors=[], model_provider="anthropic", model="claude-x")
    doc["ontologies"] = []
    with server(settings) as client:
        agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        chat = ok(client.post(f"{API}/agents/{agent}/conversations"), 201)["id"]
        done = until(client, say(client, chat, "What is 2 + 2?"), "succeeded", "failed")
    answer = done["outputs"]["answer"]
    assert answer.startswith("I am the demo model: this server has no model provider "
                             "'anthropic' configured")  # fmt: skip
    assert "set DHUB_ANTHROPIC_API_KEY and restart the server" in answer


def test_structured_output_is_refused_saying_what_to_configure(settings: Settings) -> None:
    doc = copy.deepcopy(SUMMARIZER)
    doc["nodes"][1]["config"]["response"] = {
        "type": "object", "properties": {"headline": {"type": "string"}}}  # fmt: skip
    with server(settings) as client:
        agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        body = {"inputs": {"alert": {"host": "db-1"}}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=body), 202)
        failed = until(client, run["id"], "succeeded", "failed")
    assert failed["status"] == "failed" and failed["error"]["kind"] == "unsupported"
    assert "the demo model" in failed["error"]["message"]
    assert "set DHUB_OPENAI_API_KEY" in failed["error"]["message"]


def test_the_api_says_what_answers_for_each_provider(settings: Settings) -> None:
    scripted = EntryConfig(type="scripted", replies=["a real answer"])
    with server(settings, local=scripted) as client:
        models = ok(client.get(f"{API}/models"))
        openai = ok(client.get(f"{API}/providers/openai"))
        ollama = ok(client.get(f"{API}/providers/ollama"))
        local = ok(client.get(f"{API}/providers/local"))
        anonymous = client.get(f"{API}/providers/openai", headers={"Authorization": ""})
    assert models["demo_model"] == {"enabled": True, "model": "demo"}
    assert models["providers"] == [{"name": "local", "type": "scripted"}]  # demo is not one
    assert openai == {"name": "openai", "configured": False, "type": "demo", "demo": True,
                      "configure": "set DHUB_OPENAI_API_KEY"}  # fmt: skip
    assert ollama["demo"] is True and ollama["configure"] == (
        "add an entry named 'ollama' to the providers file (DHUB_PROVIDERS_FILE)"
    )
    assert local == {"name": "local", "configured": True, "type": "scripted", "demo": False,
                     "configure": None}  # fmt: skip
    assert anonymous.status_code == 401


def test_a_configured_provider_is_never_replaced_by_the_demo_model(settings: Settings) -> None:
    entry = EntryConfig(type="scripted", replies=["Disk almost full on db-1"])
    with server(settings, openai=entry) as client:
        agent = ok(client.post(f"{API}/agents", json=SUMMARIZER), 201)["id"]
        body = {"inputs": {"alert": {"host": "db-1", "disk": 97}}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=body), 202)
        done = until(client, run["id"], "succeeded", "failed")
        log = events(client, run["id"])
        resolved = ok(client.get(f"{API}/providers/openai"))
    assert done["outputs"] == {"headline": "Disk almost full on db-1"}
    [summarized] = [e for e in log if e["type"] == "node.succeeded" and e["node_id"] == "summarize"]
    assert "model" not in summarized["data"]["usage"] and "model" not in done["usage"]
    assert done["usage"]["output_tokens"] == summarized["data"]["usage"]["output_tokens"] > 0
    assert resolved["demo"] is False and resolved["type"] == "scripted"


def test_with_the_demo_model_off_a_run_fails_saying_how_to_turn_it_on(
    settings: Settings,
) -> None:
    with server(settings, demo=False) as client:
        agent = ok(client.post(f"{API}/agents", json=SUMMARIZER), 201)["id"]
        body = {"inputs": {"alert": {"host": "db-1"}}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=body), 202)
        failed = until(client, run["id"], "succeeded", "failed")
        models = ok(client.get(f"{API}/models"))
        resolved = ok(client.get(f"{API}/providers/openai"))
    assert failed["error"]["kind"] == "no_provider"
    assert "set DHUB_OPENAI_API_KEY" in failed["error"]["message"]
    assert "DHUB_DEMO_MODEL=on" in failed["error"]["message"]
    assert models["demo_model"]["enabled"] is False
    assert resolved == {"name": "openai", "configured": False, "type": None, "demo": False,
                        "configure": "set DHUB_OPENAI_API_KEY"}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "examples", "on"),
    [(None, True, True), (None, False, False), ("off", True, False), ("on", False, True),
     ("1", False, True), ("", True, True)],
)  # fmt: skip
def test_dhub_demo_model_defaults_to_on_when_the_server_loads_examples(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None, examples: bool, on: bool
) -> None:
    monkeypatch.delenv("DHUB_EXAMPLES_DIR", raising=False)
    if value is None:
        monkeypatch.delenv("DHUB_DEMO_MODEL", raising=False)
    else:
        monkeypatch.setenv("DHUB_DEMO_MODEL", value)
    found = Settings.from_env(tmp_path, examples_dir=EXAMPLES if examples else None)
    assert found.demo_model is on


def test_a_dhub_demo_model_that_is_neither_on_nor_off_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DHUB_DEMO_MODEL", "maybe")
    with pytest.raises(ValueError, match="DHUB_DEMO_MODEL must be on or off"):
        Settings.from_env(tmp_path)
