"""Secrets where they are used (docs/secrets.md): an MCP server's header written as
``{"secret": id}`` reaches the server with the secret's value (stored, rotated, or from the
server's environment), while the MCP server's document, its versions and its tool list show
only the reference. On SQLite and PostgreSQL, against a real Streamable HTTP server."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from dhub.settings import Settings
from tests.integration.test_mcp_client import chat_agent, http_doc, tool_steps
from tests.integration.test_react_runs_api import say, server
from tests.integration.test_runs_api import ok, until
from tests.integration.test_secrets_api import ROTATED, VALUE, assert_hidden
from tests.support.mcp_servers import http_server

API = "/api/v1"
SERVERS = f"{API}/mcp-servers"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The test MCP server is on loopback: allowed, as an operator would allow it."""
    return dataclasses.replace(settings, mcp_allowed_hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def weather() -> Iterator[str]:
    with http_server() as url:
        yield url


def header_seen(client: TestClient, agent_id: str) -> str:
    """What the MCP server's ``header`` tool says it received as X-Api-Key."""
    _, run_id = say(client, agent_id, "Which key?")
    done = until(client, run_id, "succeeded", "failed")
    assert done["status"] == "succeeded", done
    result = [data for kind, _, data in tool_steps(client, run_id) if kind == "tool.succeeded"]
    return str(result[-1]["result"]["result"])


def test_a_header_takes_the_secrets_value_and_shows_only_the_reference(
    settings: Settings, weather: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = {"id": "c1", "name": "header", "arguments": {"name": "X-Api-Key"}}
    script = [{"tool_calls": [call]}, "ok."] * 3
    with server(settings, script) as client:
        secret_id = ok(client.post(f"{API}/secrets", json={"name": "k", "value": VALUE}), 201)["id"]
        doc = http_doc(weather, headers={"X-Api-Key": {"secret": secret_id}})
        made = client.post(SERVERS, json=doc)
        server_id = ok(made, 201)["id"]
        agent = ok(client.post(f"{API}/agents", json=chat_agent([server_id])), 201)["id"]
        assert header_seen(client, agent) == VALUE

        ok(client.patch(f"{API}/secrets/{secret_id}", json={"value": ROTATED}))
        assert header_seen(client, agent) == ROTATED  # a rotation reaches the next connection

        monkeypatch.setenv("DHUB_SECRET_WEATHER_KEY", "from-the-environment")
        env = {"value": None, "from_env": "DHUB_SECRET_WEATHER_KEY"}
        ok(client.patch(f"{API}/secrets/{secret_id}", json=env))
        assert header_seen(client, agent) == "from-the-environment"

        for response in (
            made,
            client.get(f"{SERVERS}/{server_id}"),
            client.get(SERVERS),
            client.get(f"{SERVERS}/{server_id}/versions/1"),
            client.get(f"{SERVERS}/{server_id}/tools"),
            client.get(f"{API}/agents/{agent}"),
        ):
            assert_hidden(response, VALUE, ROTATED, "from-the-environment")
        assert ok(client.get(f"{SERVERS}/{server_id}"))["headers"] == {
            "X-Api-Key": {"secret": secret_id}
        }


def test_saving_a_server_needs_run_on_each_secret_it_names(
    settings: Settings, weather: str
) -> None:
    """Checked at every save as every reference is: a secret the saver may not run (another
    user's, or one only shared to read) is refused word for word as a random id."""
    from dhub.domain.resources import unreachable
    from tests.integration.test_runs_api import user

    with server(settings, []) as client:
        eve = user(client, "eve")
        theirs = ok(client.post(f"{API}/secrets", json={"name": "k", "value": VALUE}), 201)["id"]
        random_id = "secret.01jzzzzzzzzzzzzzzzzzzzzzzz"
        answers = {}
        for target in (theirs, random_id):
            doc = http_doc(weather, name=f"w-{target[-4:]}", env={},
                           headers={"X-Api-Key": {"secret": target}})  # fmt: skip
            answers[target] = client.post(SERVERS, json=doc, headers=eve)
        for target, answer in answers.items():
            assert answer.status_code == 422, answer.text
            [error] = answer.json()["errors"]
            assert error["loc"] == "/headers/X-Api-Key/secret"
            assert error["message"] == unreachable("secret", target)
        grant = {"principal_id": eve["id"], "scope": "viewer"}
        ok(client.post(f"{API}/secrets/{theirs}/grants", json=grant), 201)
        doc = http_doc(weather, headers={"X-Api-Key": {"secret": theirs}})
        assert client.post(SERVERS, json=doc, headers=eve).status_code == 422  # read is not run
        grant["scope"] = "runner"
        ok(client.post(f"{API}/secrets/{theirs}/grants", json=grant))
        ok(client.post(SERVERS, json=doc, headers=eve), 201)
