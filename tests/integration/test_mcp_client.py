"""dhub as an MCP client (issue 20), on SQLite and PostgreSQL: MCP servers are resources
(``/api/v1/mcp-servers``) whose tools agents list; a real Streamable HTTP server and a real
stdio server, both built with the official SDK (tests/support/mcp_servers.py), the stdio one
started by dhub inside its sandbox (bubblewrap) and outside it (DHUB_SANDBOX=unsafe). A
scripted model calls the tools; results and errors reach it as tool results; a user who may
not run a server learns nothing of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.settings import Settings
from tests.conftest import SANDBOX_ENVS
from tests.integration.test_react_runs_api import log, say, server
from tests.integration.test_runs_api import ok, until, user
from tests.support.mcp_servers import MCP_REQUIREMENT, STDIO_SOURCE, http_server

API = "/api/v1"
SERVERS = f"{API}/mcp-servers"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The test servers are on this machine's loopback: allowed, as an operator would."""
    return dataclasses.replace(settings, mcp_allowed_hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def weather() -> Iterator[str]:
    """The Streamable HTTP server's URL."""
    with http_server() as url:
        yield url


def http_doc(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "weather", "description": "Forecasts", "transport": "streamable_http",
            "url": url, **extra}  # fmt: skip


def stdio_doc(**extra: Any) -> dict[str, Any]:
    return {"name": "arith", "description": "Arithmetic", "transport": "stdio",
            "source": STDIO_SOURCE, "dependencies": [MCP_REQUIREMENT], **extra}  # fmt: skip


def chat_agent(tools: list[Any], name: str = "forecaster") -> dict[str, Any]:
    return {
        "name": name, "description": "Uses MCP tools", "mode": "react", "input_mode": "chat",
        "agent": {"instructions": "Use your tools.", "model_provider": "openai",
                  "model": "gpt-4o-mini", "tools": tools},
    }  # fmt: skip


def shared_envs(settings: Settings) -> Settings:
    """The data dir's sandbox environments are the tests' shared ones (built once)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "envs").symlink_to(SANDBOX_ENVS, target_is_directory=True)
    SANDBOX_ENVS.mkdir(parents=True, exist_ok=True)
    return settings


def tool_steps(client: TestClient, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    shown = ("tool.called", "tool.succeeded", "tool.failed")
    return [
        (e["type"], e["data"].get("name"), e["data"])
        for e in log(client, run_id)
        if e["type"] in shown
    ]


def test_a_react_agent_calls_an_http_servers_tools_and_reads_their_errors(
    settings: Settings, weather: str
) -> None:
    forecast = {"id": "c1", "name": "forecast", "arguments": {"city": "Paris", "days": 2}}
    failing = {"id": "c2", "name": "fail", "arguments": {"reason": "no data"}}
    with server(
        settings, [{"tool_calls": [forecast]}, {"tool_calls": [failing]}, "Sunny."]
    ) as client:
        server_id = ok(client.post(SERVERS, json=http_doc(weather)), 201)["id"]
        listed = ok(client.get(f"{SERVERS}/{server_id}/tools"))
        names = {t["name"] for t in listed["data"]}
        assert {"forecast", "header", "fail", "structured", "dotted.name"} <= names
        schema = next(t for t in listed["data"] if t["name"] == "forecast")["input_schema"]
        assert schema["required"] == ["city"]
        agent = ok(client.post(f"{API}/agents", json=chat_agent([server_id])), 201)["id"]
        _, run_id = say(client, agent, "Weather in Paris?")
        done = until(client, run_id, "succeeded", "failed")
        assert done["status"] == "succeeded", done
        steps = tool_steps(client, run_id)
    assert [(kind, name) for kind, name, _ in steps] == [
        ("tool.called", "forecast"), ("tool.succeeded", "forecast"),
        ("tool.called", "fail"), ("tool.failed", "fail"),
    ]  # fmt: skip
    assert steps[1][2]["result"] == {"result": "Sunny in Paris for 2 day(s)"}
    assert "no data" in str(steps[3][2])


def test_named_tools_with_a_prefix_and_a_workflow_node(settings: Settings, weather: str) -> None:
    call = {"id": "c1", "name": "w_structured", "arguments": {"n": 7}}
    with server(settings, [{"tool_calls": [call]}, "49."]) as client:
        server_id = ok(client.post(SERVERS, json=http_doc(weather)), 201)["id"]
        use = {"id": server_id, "tools": ["structured", "dotted.name"], "prefix": "w_"}
        agent = ok(client.post(f"{API}/agents", json=chat_agent([use])), 201)["id"]
        _, run_id = say(client, agent, "Square 7")
        assert until(client, run_id, "succeeded", "failed")["status"] == "succeeded"
        steps = tool_steps(client, run_id)
        assert steps[1][2]["result"] == {"n": 7, "square": 49}
        flow = {
            "name": "squarer", "description": "Squares", "mode": "workflow",
            "input_mode": "event",
            "nodes": [
                {"id": "start", "type": "start", "config": {"variables": [
                    {"name": "n", "type": "number"}]}},
                {"id": "sq", "type": "tool_call", "config": {
                    "tool": {"id": server_id, "tools": ["structured"]},
                    "input_mappings": {"n": "{{ n }}"}, "outputs": {"square": "square"}}},
                {"id": "end", "type": "end", "config": {"outputs": [
                    {"name": "square", "type": "number", "value": "{{ square }}"}]}},
            ],
            "edges": [{"source": "start", "target": "sq"}, {"source": "sq", "target": "end"}],
        }  # fmt: skip
        flow_id = ok(client.post(f"{API}/agents", json=flow), 201)["id"]
        run = ok(client.post(f"{API}/agents/{flow_id}/runs", json={"inputs": {"n": 5}}), 202)
        done = until(client, run["id"], "succeeded", "failed")
    assert done["status"] == "succeeded", done["error"]
    assert done["outputs"] == {"square": 25}


def test_unknown_and_misplaced_uses_are_refused_when_saved(
    settings: Settings, weather: str
) -> None:
    with server(settings, []) as client:
        server_id = ok(client.post(SERVERS, json=http_doc(weather)), 201)["id"]
        node_without_tool = {
            "name": "f", "description": "x", "mode": "workflow", "input_mode": "event",
            "nodes": [{"id": "start", "type": "start", "config": {}},
                      {"id": "t", "type": "tool_call", "config": {"tool": server_id}},
                      {"id": "end", "type": "end", "config": {}}],
            "edges": [{"source": "start", "target": "t"}, {"source": "t", "target": "end"}],
        }  # fmt: skip
        bad = client.post(f"{API}/agents", json=node_without_tool)
        assert bad.status_code == 422
        assert any(e["code"] == "one_tool" for e in bad.json()["errors"]), bad.text
        extra = chat_agent([{"id": server_id, "function": None, "bogus": 1}])
        assert client.post(f"{API}/agents", json=extra).status_code == 422


@pytest.mark.parametrize(
    ("doc", "pointer"),
    [
        ({"name": "x", "description": "", "transport": "stdio"}, "/command"),
        ({"name": "x", "description": "", "transport": "streamable_http"}, "/url"),
        ({"name": "x", "description": "", "transport": "streamable_http",
          "url": "ftp://host/mcp"}, "/url"),
        ({"name": "x", "description": "", "transport": "streamable_http",
          "url": "https://user:pw@host/mcp"}, "/url"),
        ({"name": "x", "description": "", "transport": "streamable_http",
          "url": "https://host/mcp", "command": "python"}, "/command"),
        ({"name": "x", "description": "", "transport": "stdio", "command": "python",
          "url": "https://host/mcp"}, "/url"),
        ({"name": "x", "description": "", "transport": "streamable_http",
          "url": "https://host/mcp", "headers": {"Mcp-Session-Id": "x"}},
         "/headers/Mcp-Session-Id"),
        ({"name": "x", "description": "", "transport": "stdio", "command": "python",
          "env": {"1BAD": "x"}}, "/env/1BAD"),
    ],
)  # fmt: skip
def test_bad_documents_name_the_field(
    client: TestClient, doc: dict[str, Any], pointer: str
) -> None:
    response = client.post(SERVERS, json=doc)
    assert response.status_code == 422, response.text
    assert pointer in [e["loc"] for e in response.json()["errors"]], response.text


def test_who_may_not_run_a_server_learns_nothing_of_it(settings: Settings, weather: str) -> None:
    with server(settings, []) as client:
        server_id = ok(client.post(SERVERS, json=http_doc(weather)), 201)["id"]
        eve = user(client, "eve")
        random_id = "mcp_server.01jzzzzzzzzzzzzzzzzzzzzzzz"
        for target in (server_id, random_id):
            answer = client.get(f"{SERVERS}/{target}/tools", headers=eve)
            assert answer.status_code == 404
            assert answer.json()["detail"] == answer.json()["detail"].replace(target, target)
        mine = client.get(f"{SERVERS}/{server_id}/tools", headers=eve).json()["detail"]
        other = client.get(f"{SERVERS}/{random_id}/tools", headers=eve).json()["detail"]
        assert mine.replace(server_id, "X") == other.replace(random_id, "X")
        # Planted in her own agent, the id is refused as a random one is.
        planted = client.post(f"{API}/agents", json=chat_agent([server_id]), headers=eve)
        random = client.post(f"{API}/agents", json=chat_agent([random_id]), headers=eve)
        assert planted.status_code == random.status_code == 422
        assert planted.text.replace(server_id, "X") == random.text.replace(random_id, "X")
        # Read access is not enough: its tools run on the caller's behalf.
        grant = {"principal_id": eve["id"], "scope": "viewer"}
        ok(client.post(f"{SERVERS}/{server_id}/grants", json=grant), 201)
        assert client.get(f"{SERVERS}/{server_id}", headers=eve).status_code == 200
        assert client.get(f"{SERVERS}/{server_id}/tools", headers=eve).status_code == 404
        grant["scope"] = "runner"
        ok(client.post(f"{SERVERS}/{server_id}/grants", json=grant))
        assert client.get(f"{SERVERS}/{server_id}/tools", headers=eve).status_code == 200


def test_an_unreachable_server_is_a_clear_502_and_a_tool_error(settings: Settings) -> None:
    call = {"id": "c1", "name": "forecast", "arguments": {"city": "Oslo"}}
    with server(settings, [{"tool_calls": [call]}, "Could not check."]) as client:
        doc = http_doc("http://127.0.0.1:9/mcp")
        server_id = ok(client.post(SERVERS, json=doc), 201)["id"]
        answer = client.get(f"{SERVERS}/{server_id}/tools")
        assert answer.status_code == 502
        assert "could not be reached" in answer.json()["detail"]
        use = {"id": server_id, "tools": ["forecast"]}
        agent = ok(client.post(f"{API}/agents", json=chat_agent([use])), 201)["id"]
        _, run_id = say(client, agent, "Oslo?")
        done = until(client, run_id, "succeeded", "failed")
        steps = tool_steps(client, run_id)
    assert done["status"] == "succeeded", done
    assert steps[1][0] == "tool.failed" and "could not be reached" in str(steps[1][2])


@pytest.mark.parametrize(
    "url",
    ["http://localhost:{port}/mcp", "http://[::1]:{port}/mcp", "http://10.1.2.3/mcp",
     "http://169.254.169.254/latest/meta-data", "http://[::ffff:127.0.0.1]:{port}/mcp"],
)  # fmt: skip
def test_a_users_server_cannot_reach_this_servers_own_networks(
    settings: Settings, weather: str, url: str
) -> None:
    port = weather.split(":")[2].split("/")[0]
    unallowed = dataclasses.replace(settings, mcp_allowed_hosts=())
    with server(unallowed, []) as client:
        server_id = ok(client.post(SERVERS, json=http_doc(url.format(port=port))), 201)["id"]
        answer = client.get(f"{SERVERS}/{server_id}/tools")
    assert answer.status_code == 502
    assert "DHUB_MCP_ALLOWED_HOSTS" in answer.json()["detail"]


@pytest.mark.parametrize("isolation", ["bubblewrap", "unsafe"])
def test_a_stdio_server_runs_in_the_sandbox_with_its_environment(
    settings: Settings, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DHUB_SANDBOX", isolation)
    add = {"id": "c1", "name": "add", "arguments": {"a": 2, "b": 40}}
    env = {"id": "c2", "name": "environment", "arguments": {"name": "GREETING"}}
    leak = {"id": "c3", "name": "environment", "arguments": {"name": "DHUB_ADMIN_TOKEN"}}
    replies = [{"tool_calls": [add]}, {"tool_calls": [env]}, {"tool_calls": [leak]}, "42."]
    monkeypatch.setenv("DHUB_ADMIN_TOKEN", "server-secret")
    with server(shared_envs(settings), replies) as client:
        doc = stdio_doc(env={"GREETING": "hello"}, allowed_tools=["add", "environment"])
        server_id = ok(client.post(SERVERS, json=doc), 201)["id"]
        listed = {t["name"] for t in ok(client.get(f"{SERVERS}/{server_id}/tools"))["data"]}
        assert listed == {"add", "environment"}  # allowed_tools narrows what agents get
        agent = ok(client.post(f"{API}/agents", json=chat_agent([server_id])), 201)["id"]
        _, run_id = say(client, agent, "2 + 40?")
        done = until(client, run_id, "succeeded", "failed")
        steps = tool_steps(client, run_id)
    assert done["status"] == "succeeded", done
    results = [data.get("result") for kind, _, data in steps if kind == "tool.succeeded"]
    assert results[0] == {"result": 42}
    assert results[1] == {"result": "hello"}
    assert results[2] == {"result": "<unset>"}  # none of the server's own environment reaches it


def test_a_crashed_stdio_server_is_a_tool_error_and_starts_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash = {"id": "c1", "name": "crash", "arguments": {}}
    add = {"id": "c2", "name": "add", "arguments": {"a": 1, "b": 1}}
    with server(
        shared_envs(settings), [{"tool_calls": [crash]}, {"tool_calls": [add]}, "2"]
    ) as client:
        server_id = ok(client.post(SERVERS, json=stdio_doc()), 201)["id"]
        agent = ok(client.post(f"{API}/agents", json=chat_agent([server_id])), 201)["id"]
        _, run_id = say(client, agent, "crash, then add")
        done = until(client, run_id, "succeeded", "failed")
        steps = tool_steps(client, run_id)
    assert done["status"] == "succeeded", done
    assert steps[1][0] == "tool.failed" and "ended with code 3" in str(steps[1][2])
    assert steps[3][0] == "tool.succeeded" and steps[3][2]["result"] == {"result": 2}


def test_the_sandboxed_server_cannot_see_the_host(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret_file = tmp_path / "host-secret.txt"
    secret_file.write_text("do not read")
    source = STDIO_SOURCE.replace(
        'if __name__ == "__main__":',
        "@server.tool()\ndef peek(path: str) -> str:\n"
        "    try:\n        return open(path).read()\n"
        "    except OSError as exc:\n        return type(exc).__name__\n\n\n"
        'if __name__ == "__main__":',
    )
    peek = {"id": "c1", "name": "peek", "arguments": {"path": str(secret_file)}}
    with server(shared_envs(settings), [{"tool_calls": [peek]}, "no"]) as client:
        server_id = ok(client.post(SERVERS, json=stdio_doc(source=source)), 201)["id"]
        agent = ok(client.post(f"{API}/agents", json=chat_agent([server_id])), 201)["id"]
        _, run_id = say(client, agent, "peek")
        until(client, run_id, "succeeded", "failed")
        steps = tool_steps(client, run_id)
    assert steps[1][2]["result"] == {"result": "FileNotFoundError"}
