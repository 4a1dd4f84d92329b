"""POST /mcp on SQLite and PostgreSQL, driven by the official MCP SDK's client against the app
served on a socket: tools/list shows exactly the agents the caller may run, tools/call runs one
as the caller, and the bearer token is required as everywhere in the API."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal, TypeVar

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Tool

from dhub.api.app import create_app
from dhub.services.agent_tools import CHAT_SCHEMA
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.integration.test_conversations_api import ECHO
from tests.integration.test_sharing_api import BUILDER, World
from tests.support.served import serving

API = "/api/v1"
TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")
# Fails at its end node: the output should be a number, the template gives text.
FAILING = {
    "name": "failing", "description": "Always fails.", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "word", "type": "string"}]}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "count", "type": "number", "value": "{{ word }}"}]}},
    ],
    "edges": [{"source": "start", "target": "end"}],
}  # fmt: skip
T = TypeVar("T")
Mode = Literal["auto", "legacy"]


@pytest.fixture
def served(settings: Settings) -> Iterator[str]:
    """The app on a real socket (uvicorn in a thread): the SDK's client speaks HTTP to it."""
    with serving(create_app(settings)) as url:
        yield url


@pytest.fixture
def world(served: str) -> Iterator[World]:
    """World's users, markings and agents, made over HTTP by the admin (an httpx client has
    the TestClient's interface)."""
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=served, headers=auth, timeout=30) as http:
        yield World(http)  # type: ignore[arg-type]


def with_mcp(url: str, token: str, use: Callable[[Client], Awaitable[T]], mode: Mode = "auto") -> T:
    """``use`` on an MCP client session with ``token``, as an MCP host would open one:
    ``auto`` speaks the newest protocol the server offers, ``legacy`` the 2025 handshake."""

    async def session() -> T:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport, mode=mode) as client:
                return await use(client)

    return asyncio.run(session())


def tools(url: str, token: str, mode: Mode = "auto") -> dict[str, Tool]:
    async def use(client: Client) -> dict[str, Tool]:
        return {t.name: t for t in (await client.list_tools()).tools}

    return with_mcp(url, token, use, mode)


def call(
    url: str, token: str, name: str, arguments: dict[str, Any], mode: Mode = "auto"
) -> CallToolResult:
    async def use(client: Client) -> CallToolResult:
        return await client.call_tool(name, arguments)

    return with_mcp(url, token, use, mode)


def refusal(url: str, token: str, name: str) -> str:
    """The protocol error a call of ``name`` gets, with the name taken out."""

    async def use(client: Client) -> MCPError:
        with pytest.raises(MCPError) as caught:  # raised here: the session would wrap it
            await client.call_tool(name, {})
        return caught.value

    refused = with_mcp(url, token, use)
    assert refused.code == -32602
    return refused.error.message.replace(name, "<name>")


def builtin_ids(world: World) -> set[str]:
    return set(world.listed(BUILDER, is_builtin="true"))


def agent_ids(listed: dict[str, Tool]) -> set[str]:
    return {str((t.meta or {})["dhub/agent_id"]) for t in listed.values()}


def test_the_tools_are_exactly_the_agents_the_caller_may_run(world: World, served: str) -> None:
    alice, bob = world.user("alice"), world.user("bob")
    secret = world.marking("secret", [bob])  # bob holds it, alice does not
    mine = world.agent("alices-agent", owners=[alice])
    ran = world.agent("granted", grants={alice: "runner"})
    world.agent("viewed", grants={alice: "viewer"})  # she may read it, not run it
    world.agent("unshared")
    world.agent("classified", grants={alice: "runner", bob: "runner"}, markings=[secret])
    token = world.tokens[alice]
    listed = tools(served, token)
    assert agent_ids(listed) == {mine, ran, *builtin_ids(world)}
    assert tools(served, token, "legacy") == listed  # the same over the 2025 handshake
    assert {"viewed", "unshared", "classified"}.isdisjoint(listed)
    unknown = refusal(served, token, "no-such-agent")
    for hidden in ("viewed", "unshared", "classified", secret, mine):
        assert refusal(served, token, hidden) == unknown  # nothing tells them apart (nor ids)
    assert "classified" in tools(served, world.tokens[bob])  # it exists, for who may see it


def test_a_tool_runs_its_agent_as_the_caller_and_answers_its_outputs(
    world: World, served: str
) -> None:
    alice = world.user("alice")
    triage = world.client.post(f"{API}/agents", json=TRIAGE).json()["id"]
    world.client.post(f"{API}/agents/{triage}/grants", json={"principal_id": alice,
                                                               "scope": "runner"})  # fmt: skip
    token = world.tokens[alice]
    tool = tools(served, token)["ticket-triage"]
    assert tool.description == TRIAGE["description"]
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "ticket": {"type": "string", "description": "The ticket text"},
            "customer": {"type": "string", "default": "anonymous"},
        },
        "required": ["ticket"],
    }
    done = call(served, token, "ticket-triage", {"ticket": "Checkout page shows an error"})
    assert not done.is_error
    result = done.structured_content
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"category": "bug", "summary": "bug from anonymous"}
    assert '"summary":"bug from anonymous"' in done.content[0].text  # type: ignore[union-attr]
    run = world.client.get(f"{API}/runs/{result['run_id']}").json()
    assert run["user_id"] == alice  # run as the caller, not as the server
    bad = call(served, token, "ticket-triage", {"customer": 3})
    assert bad.is_error
    assert "/inputs/ticket: 'ticket' is required (string)." in bad.content[0].text  # type: ignore[union-attr]


def test_agents_of_one_name_each_get_their_id(world: World, served: str) -> None:
    folders = [world.client.post(f"{API}/folders", json={"name": n}).json()["id"]
               for n in ("one", "two")]  # fmt: skip
    made = [world.agent("same name", folder_id=f) for f in folders]
    world.agent("other")
    listed = tools(served, ADMIN_TOKEN)
    suffixed = {f"same_name__{a.removeprefix('agent.')}": a for a in made}
    assert {n: str((listed[n].meta or {})["dhub/agent_id"]) for n in suffixed} == suffixed
    assert "other" in listed and "same_name" not in listed


def test_a_failed_run_is_a_tool_error_with_its_message(world: World, served: str) -> None:
    world.client.post(f"{API}/agents", json=FAILING).raise_for_status()
    done = call(served, ADMIN_TOKEN, "failing", {"word": "many"})
    assert done.is_error
    run = world.client.get(f"{API}/runs/{done.structured_content['run_id']}").json()
    assert run["status"] == "failed"
    assert run["error"]["message"] in done.content[0].text  # type: ignore[union-attr]


def test_a_run_waiting_for_a_person_says_where_to_answer(world: World, served: str) -> None:
    world.client.post(f"{API}/agents", json=TRIAGE).raise_for_status()
    done = call(served, ADMIN_TOKEN, "ticket-triage", {"ticket": "Total outage since 9am"})
    assert not done.is_error
    result = done.structured_content
    run_url = f"{served}{API}/runs/{result['run_id']}"
    assert (result["status"], result["waiting"]["for"]) == ("waiting", "input")
    assert (result["run_url"], result["answer_url"]) == (run_url, f"{run_url}/inputs/approve")
    assert f"answer it at POST {run_url}/inputs/approve" in done.content[0].text  # type: ignore[union-attr]
    answered = world.client.post(result["answer_url"], json={"values": {"escalate": True}})
    assert answered.status_code == 202


def test_a_chat_agent_is_a_conversation(world: World, served: str) -> None:
    bob = world.user("bob")
    agent = world.client.post(f"{API}/agents", json=ECHO).json()["id"]
    world.client.post(f"{API}/agents/{agent}/grants", json={"principal_id": bob,
                                                              "scope": "runner"})  # fmt: skip
    tool = tools(served, ADMIN_TOKEN)["echo"]
    assert tool.input_schema == CHAT_SCHEMA
    first = call(served, ADMIN_TOKEN, "echo", {"message": "hello"})
    assert first.structured_content["outputs"] == {"answer": "#1: HELLO"}
    conversation = first.structured_content["conversation_id"]
    later = {"message": "again", "conversation_id": conversation}
    again = call(served, ADMIN_TOKEN, "echo", later, "legacy")  # the 2025 handshake too
    assert again.structured_content["outputs"] == {"answer": "#2: AGAIN"}
    unknown = call(served, ADMIN_TOKEN, "echo", {"message": "x", "conversation_id": "c.x"})
    assert unknown.is_error and "No conversation with id 'c.x'" in unknown.content[0].text  # type: ignore[union-attr]
    others = call(served, world.tokens[bob], "echo", later)  # the admin's: not bob's to see
    assert others.is_error
    assert others.content[0].text == f"No conversation with id '{conversation}'."  # type: ignore[union-attr]
    wrong = call(served, ADMIN_TOKEN, "echo", {"text": "x"})
    assert wrong.is_error and "Unknown argument 'text'" in wrong.content[0].text  # type: ignore[union-attr]


def test_without_a_valid_token_it_is_401_and_only_post_is_served(served: str) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        refused = httpx.post(f"{served}/mcp", json=hello, headers=headers)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert httpx.get(f"{served}/mcp", headers=admin).status_code == 405  # stateless: no stream
