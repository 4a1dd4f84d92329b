"""A reasoning_effort the server's model catalog knows a model cannot take is a 422 where it is
written (an agent's, an llm node's, a run's own), not a run that fails at its first model call;
models and providers the catalog does not know stay accepted. SQLite and PostgreSQL."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from dhub.api.app import create_app
from dhub.providers.config import EntryConfig, ModelFields, ProvidersConfig
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.integration.test_runs_api import ok

API = "/api/v1"
SUMMARIZER = load_json(FIXTURES / "valid" / "event_summarizer.json")
NOWHERE = "http://127.0.0.1:9/v1"  # never called: every request here is refused before a call


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """A server whose ``openai`` entry is OpenAI itself (its catalog built in), and a local
    OpenAI-compatible entry listing one model that does not reason."""
    entries = {
        "openai": EntryConfig(type="openai", base_url=NOWHERE, api_key=SecretStr("sk-test")),
        "local": EntryConfig(
            type="openai_compatible", base_url=NOWHERE,
            models={"llama-small": ModelFields(reasoning="none")},
        ),
    }  # fmt: skip
    configured = Settings(**{**vars(settings), "providers": ProvidersConfig(entries=entries)})
    with TestClient(create_app(configured)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield client


def react(model: str, effort: str | None, provider: str = "openai", **agent: Any) -> dict[str, Any]:
    return {
        "name": f"helper-{model}-{effort}-{provider}",
        "description": "Answers questions.",
        "mode": "react",
        "input_mode": "event",
        "agent": {"instructions": "Be brief.", "model_provider": provider, "model": model,
                  "reasoning_effort": effort, **agent},
    }  # fmt: skip


def summarizer(model: str, effort: str | None) -> dict[str, Any]:
    doc = copy.deepcopy(SUMMARIZER)
    doc["nodes"][1]["config"].update(model=model, reasoning_effort=effort)
    return doc


def refused(response: Any) -> dict[str, Any]:
    body = ok(response, 422)
    [error] = body["errors"]
    assert error["code"] == "unsupported_effort", error
    return dict(error)


def test_an_agent_whose_model_does_not_reason_is_refused_naming_the_field(
    api: TestClient,
) -> None:
    error = refused(api.post(f"{API}/agents", json=react("gpt-4o-mini", "high")))
    assert error["loc"] == "/agent/reasoning_effort"
    assert "'high'" in error["message"] and "'gpt-4o-mini'" in error["message"]
    assert "takes only 'none' (or null)" in error["message"]
    stored = ok(api.get(f"{API}/agents", params={"is_builtin": "false"}))["data"]
    assert stored == []  # nothing was stored


@pytest.mark.parametrize(
    ("provider", "model", "effort"),
    [
        ("openai", "gpt-4o-mini", "none"),  # a model that does not reason takes "none"
        ("openai", "gpt-4o-mini", None),
        ("openai", "o3", "minimal"),  # o3 lacks "minimal": the next one above is sent
        ("openai", "gpt-5.2", "max"),  # the highest it has is sent
        ("openai", "my-fine-tune", "high"),  # not in the catalog: not refused
        ("elsewhere", "gpt-4o-mini", "high"),  # a provider not configured: not refused
    ],
)
def test_what_the_catalog_does_not_refuse_is_accepted(
    api: TestClient, provider: str, model: str, effort: str | None
) -> None:
    ok(api.post(f"{API}/agents", json=react(model, effort, provider)), 201)


def test_a_configured_model_of_a_compatible_server_is_checked_too(api: TestClient) -> None:
    error = refused(api.post(f"{API}/agents", json=react("llama-small", "low", "local")))
    assert "'llama-small' of provider 'local'" in error["message"]
    ok(api.post(f"{API}/agents", json=react("llama-big", "low", "local")), 201)  # not listed


def test_an_llm_node_is_checked_on_create_validate_and_patch(api: TestClient) -> None:
    error = refused(api.post(f"{API}/agents", json=summarizer("gpt-4.1", "low")))
    assert error["loc"] == "/nodes/1/config/reasoning_effort"

    checked = ok(api.post(f"{API}/agents/validate", json=summarizer("gpt-4.1", "medium")))
    assert checked["valid"] is False
    assert [e["loc"] for e in checked["errors"]] == ["/nodes/1/config/reasoning_effort"]
    assert ok(api.post(f"{API}/agents/validate", json=summarizer("o4-mini", "medium")))["valid"]

    agent = ok(api.post(f"{API}/agents", json=summarizer("gpt-4.1", "none")), 201)
    nodes = copy.deepcopy(agent["nodes"])
    nodes[1]["config"]["reasoning_effort"] = "high"
    error = refused(api.patch(f"{API}/agents/{agent['id']}", json={"nodes": nodes}))
    assert error["loc"] == "/nodes/1/config/reasoning_effort"
    assert ok(api.get(f"{API}/agents/{agent['id']}"))["version"] == 1
    nodes[1]["config"]["model"] = "o3"  # the same effort on a reasoning model
    assert ok(api.patch(f"{API}/agents/{agent['id']}", json={"nodes": nodes}))["version"] == 2


def test_a_react_agent_is_checked_on_patch_and_validate(api: TestClient) -> None:
    agent = ok(api.post(f"{API}/agents", json=react("o3", "high")), 201)
    error = refused(api.patch(f"{API}/agents/{agent['id']}", json={"agent": {"model": "gpt-4o"}}))
    assert error["loc"] == "/agent/reasoning_effort" and "'gpt-4o'" in error["message"]
    checked = ok(api.post(f"{API}/agents/validate", json=react("gpt-4o", "xhigh")))
    assert [e["code"] for e in checked["errors"]] == ["unsupported_effort"]


def test_a_runs_own_effort_is_checked_against_the_agent_and_its_delegates(
    api: TestClient,
) -> None:
    plain = ok(api.post(f"{API}/agents", json=react("gpt-4o-mini", None)), 201)["id"]
    error = refused(api.post(f"{API}/agents/{plain}/runs", json={"reasoning_effort": "low"}))
    assert error["loc"] == "/reasoning_effort" and "'gpt-4o-mini'" in error["message"]
    ok(api.post(f"{API}/agents/{plain}/runs", json={"reasoning_effort": "none"}), 202)

    role = {"name": "researcher", "description": "Looks things up.",
            "instructions": "Find it.", "model": "gpt-4.1-mini"}  # fmt: skip
    lead = ok(api.post(f"{API}/agents", json=react("o3", "low", roles=[role])), 201)["id"]
    error = refused(api.post(f"{API}/agents/{lead}/runs", json={"reasoning_effort": "high"}))
    assert "role 'researcher''s model 'gpt-4.1-mini'" in error["message"]
    runs = ok(api.get(f"{API}/runs", params={"agent_id": lead}))["data"]
    assert runs == []  # refused before the run existed
