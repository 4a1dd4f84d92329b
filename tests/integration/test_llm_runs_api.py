"""llm nodes through the server: providers from the settings, deltas streamed and stored (the
log has what a stream showed), usage on the node's event, the model catalog, and the errors
that say what to set. The OpenAI provider is the real SDK against the local wire-protocol server."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.support.wire import AnthropicReply, OpenAIReply
from tests.support.wire import openai_wire as ow
from tests.support.wire.anthropic_wire import AnthropicServer, Text, Thinking
from tests.support.wire.openai_wire import OpenAIServer

API = "/api/v1"
SUMMARIZER = load_json(FIXTURES / "valid" / "event_summarizer.json")
ALERT = {"alert": {"host": "db-1", "disk": 97}}
HEADLINE = "Disk almost full on db-1"


def app_client(settings: Settings, providers: ProvidersConfig) -> TestClient:
    configured = Settings(**{**vars(settings), "providers": providers})
    client = TestClient(create_app(configured))
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


@pytest.fixture
def openai_client(settings: Settings, openai_server: OpenAIServer) -> Iterator[TestClient]:
    entry = EntryConfig(type="openai", base_url=openai_server.base_url,
                        api_key=openai_server.api_key)  # type: ignore[arg-type]  # fmt: skip
    with app_client(settings, ProvidersConfig(entries={"openai": entry})) as client:
        yield client


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def start(client: TestClient, doc: dict[str, Any], inputs: dict[str, Any]) -> str:
    agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
    run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": inputs}), 202)
    return str(run["id"])


def stream(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    """Every SSE event of the run (each with its seq as the SSE id)."""
    events: list[dict[str, Any]] = []
    url = f"{API}/runs/{run_id}/events"
    with client.stream("GET", url, headers={"Accept": "text/event-stream"}) as response:
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if "data" in fields:
                event = json.loads(fields["data"])
                assert fields["event"] == event["type"] and int(fields["id"]) == event["seq"]
                events.append(event)
            fields = {}
    return events


def test_the_summarizer_streams_its_headline_from_the_openai_wire_server(
    openai_client: TestClient, openai_server: OpenAIServer
) -> None:
    openai_server.queue(
        OpenAIReply(HEADLINE, chunk_size=5, usage=ow.Usage(31, 6, cached_tokens=4), delay=0.01)
    )
    run_id = start(openai_client, SUMMARIZER, ALERT)
    events = stream(openai_client, run_id)
    kinds = [e["type"] for e in events]
    began = kinds.index("node.started", kinds.index("node.started") + 1)  # summarize's
    ended = kinds.index("node.succeeded", began)
    deltas = [e for e in events if e["type"] == "llm.delta"]
    # Five chunks, 10 ms apart: saved as they come, coalesced while a write is in flight.
    assert 2 <= len(deltas) <= 5 and all(began < events.index(d) < ended for d in deltas)
    assert "".join(d["data"]["text"] for d in deltas) == HEADLINE
    assert {d["node_id"] for d in deltas} == {"summarize"}
    assert {d["data"]["kind"] for d in deltas} == {"text"} and len(
        {d["data"]["call"] for d in deltas}
    ) == 1
    assert events[-1]["type"] == "run.succeeded"
    assert events[-1]["data"]["outputs"] == {"headline": HEADLINE}
    summarized = events[ended]
    assert summarized["data"]["usage"] == {
        "input_tokens": 31, "output_tokens": 6, "reasoning_tokens": 0, "cached_tokens": 4,
        "estimated": False,
        "cost_usd": 7.95e-06,  # gpt-4o-mini, a million: 27 x $0.15 + 4 x $0.075 + 6 x $0.60
    }  # fmt: skip
    # What the stream showed, the log has: every event, numbered without gaps.
    stored = ok(openai_client.get(f"{API}/runs/{run_id}/events"))["data"]
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert stored == events
    body = openai_server.last.json
    assert body["model"] == "gpt-4o-mini" and body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "You write terse incident headlines."},
        {"role": "user", "content": "Write a one-line headline for this alert: "
                                    '{"disk": 97, "host": "db-1"}'},
    ] or body["messages"][1]["content"].startswith("Write a one-line headline")  # fmt: skip
    assert "reasoning_effort" not in body  # "none" on a model that does not reason


def test_a_rate_limit_is_retried_after_the_time_the_provider_asks(
    openai_client: TestClient, openai_server: OpenAIServer
) -> None:
    openai_server.queue(ow.rate_limited(retry_after=0.3), OpenAIReply(HEADLINE))
    run_id = start(openai_client, SUMMARIZER, ALERT)
    events = stream(openai_client, run_id)
    assert events[-1]["data"]["outputs"] == {"headline": HEADLINE}
    first, second = openai_server.requests_to("/chat/completions")
    assert second.received_at - first.received_at >= 0.3


def test_structured_output_gives_the_node_a_parsed_object(
    openai_client: TestClient, openai_server: OpenAIServer
) -> None:
    doc = copy.deepcopy(SUMMARIZER)
    schema = {"type": "object", "properties": {"headline": {"type": "string"},
              "severity": {"enum": ["low", "high"]}}, "required": ["headline", "severity"],
              "additionalProperties": False}  # fmt: skip
    doc["nodes"][1]["config"]["response"] = schema
    doc["nodes"][2]["config"]["outputs"] = [
        {"name": "headline", "type": "object", "value": "{{ headline }}"}
    ]
    openai_server.queue(OpenAIReply(json={"headline": HEADLINE, "severity": "high"}),
                        OpenAIReply("Sorry, I cannot answer in JSON."))  # fmt: skip
    run_id = start(openai_client, doc, ALERT)
    events = stream(openai_client, run_id)
    assert events[-1]["data"]["outputs"] == {"headline": {"headline": HEADLINE, "severity": "high"}}
    sent = openai_server.last.json["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == schema
    assert sent["json_schema"]["strict"] is True
    failed = stream(openai_client, start(openai_client, {**doc, "name": "again"}, ALERT))
    error = failed[-1]["data"]["error"]
    assert failed[-1]["type"] == "run.failed" and error["kind"] == "invalid_output"
    assert "is not JSON" in error["message"] and error["provider"] == "openai"


def test_without_any_provider_the_run_fails_saying_what_to_set(settings: Settings) -> None:
    with app_client(settings, ProvidersConfig()) as client:
        events = stream(client, start(client, SUMMARIZER, ALERT))
    error = events[-1]["data"]["error"]
    assert events[-1]["type"] == "run.failed" and error["kind"] == "no_provider"
    assert "set DHUB_OPENAI_API_KEY (or DHUB_OPENAI_BASE_URL" in error["message"]
    assert error["node_id"] == "summarize" and error["model"] == "gpt-4o-mini"


def test_the_model_catalog_lists_configured_models_and_never_a_key(
    settings: Settings, tmp_path: Path
) -> None:
    secret = "sk-very-secret-123"
    providers = ProvidersConfig(entries={
        "openai": EntryConfig(type="openai", api_key=secret),  # type: ignore[arg-type]
        "local": EntryConfig(type="openai_compatible", base_url="http://127.0.0.1:9/v1",
                             models={"qwen3": {"context_window": 40960}}),  # type: ignore[dict-item]
    })  # fmt: skip
    with app_client(settings, providers) as client:
        response = client.get(f"{API}/models")
        listed = ok(response)
        assert secret not in response.text
        only_local = ok(client.get(f"{API}/models", params={"provider": "local"}))
        anonymous = client.get(f"{API}/models", headers={"Authorization": ""})
    ids = {(m["provider"], m["id"]) for m in listed["data"]}
    assert ("openai", "gpt-4o-mini") in ids and ("local", "qwen3") in ids
    qwen = next(m for m in listed["data"] if m["id"] == "qwen3")
    assert qwen["context_window"] == 40960 and qwen["known"] is True
    assert set(qwen["capabilities"]) == {"tools", "structured_output", "reasoning", "vision"}
    assert listed["providers"] == [{"name": "local", "type": "openai_compatible"},
                                   {"name": "openai", "type": "openai"}]  # fmt: skip
    assert {m["provider"] for m in only_local["data"]} == {"local"}
    assert anonymous.status_code == 401


def test_a_scripted_provider_from_the_settings_answers_offline(settings: Settings) -> None:
    entry = EntryConfig(type="scripted", replies=[HEADLINE])
    with app_client(settings, ProvidersConfig(entries={"openai": entry})) as client:
        agent = ok(client.post(f"{API}/agents", json=SUMMARIZER), 201)["id"]
        body = {"inputs": ALERT, "stream": True}
        events = []
        with client.stream("POST", f"{API}/agents/{agent}/runs", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
    assert events[-1]["data"]["outputs"] == {"headline": HEADLINE}
    assert "".join(e["data"]["text"] for e in events if e["type"] == "llm.delta") == HEADLINE


def test_an_anthropic_entry_runs_the_node_with_thinking(
    settings: Settings, anthropic_server: AnthropicServer
) -> None:
    doc = copy.deepcopy(SUMMARIZER)
    config = doc["nodes"][1]["config"]
    config.update(model_provider="claude", model="claude-wire-1", reasoning_effort="low")
    entry = EntryConfig(type="anthropic", base_url=anthropic_server.base_url,
                        api_key=anthropic_server.api_key)  # type: ignore[arg-type]  # fmt: skip
    anthropic_server.queue(AnthropicReply([Thinking("The disk is nearly full.", "sig-1"),
                                           Text(HEADLINE)], delay=0.01))  # fmt: skip
    with app_client(settings, ProvidersConfig(entries={"claude": entry})) as client:
        agent = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        events = []
        body = {"inputs": ALERT, "stream": True}
        with client.stream("POST", f"{API}/agents/{agent}/runs", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
    assert events[-1]["data"]["outputs"] == {"headline": HEADLINE}
    deltas = [e["data"] for e in events if e["type"] == "llm.delta"]
    assert "".join(d["text"] for d in deltas if d["kind"] == "reasoning") == (
        "The disk is nearly full."
    )
    assert "".join(d["text"] for d in deltas if d["kind"] == "text") == HEADLINE
    sent = anthropic_server.last.json
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["system"] == "You write terse incident headlines."
