"""MCP servers from the SDK and the CLI (SQLite and PostgreSQL), against a real app and a real
Streamable HTTP MCP server built with the SDK (tests/support/mcp_servers.py): names for ids,
the tools it offers, errors that say what went wrong, nothing learnt of a server one may not
run."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client, DhubAPIError, InvalidInput, McpTool, NotFound
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_runs_api import user
from tests.support.mcp_servers import http_server


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The test server is on this machine's loopback: allowed, as an operator would."""
    return dataclasses.replace(settings, mcp_allowed_hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def weather() -> Iterator[str]:
    with http_server() as url:
        yield url


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api)

    return run


def weather_doc(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "weather", "description": "Forecasts", "transport": "streamable_http",
            "url": url, **extra}  # fmt: skip


def test_the_sdk_stores_a_server_and_lists_its_tools(api: Client, weather: str) -> None:
    made = api.create_mcp_server(weather_doc(weather, allowed_tools=["forecast", "structured"]))
    assert made["id"].startswith("mcp_server.") and made["version"] == 1
    assert api.get_mcp_server("weather")["id"] == made["id"]
    assert [s["id"] for s in api.iter_mcp_servers()] == [made["id"]]
    assert [s["id"] for s in api.list_mcp_servers(name="weather").data] == [made["id"]]

    offered = api.mcp_server_tools("weather")
    assert offered.server == {"id": made["id"], "name": "weather", "version": 1}
    assert [t.name for t in offered.tools] == ["forecast", "structured"]
    forecast = offered.tools[0]
    assert isinstance(forecast, McpTool) and forecast.description == "The forecast for a city."
    assert forecast.input_schema["required"] == ["city"]

    updated = api.update_mcp_server(made["id"], {"allowed_tools": None, "timeout": 30})
    assert updated["version"] == 2 and updated["timeout"] == 30
    names = {t.name for t in api.mcp_server_tools(made["id"], refresh=True).tools}
    assert {"forecast", "header", "fail", "structured", "dotted.name"} <= names

    with pytest.raises(InvalidInput) as caught:
        api.create_mcp_server({"name": "bad", "description": "", "transport": "stdio"})
    assert caught.value.errors[0].loc == "/command"
    api.delete_mcp_server("weather")
    with pytest.raises(NotFound):
        api.get_mcp_server(made["id"])


def test_an_unreachable_server_is_a_502_that_says_why(api: Client) -> None:
    api.create_mcp_server(weather_doc("http://127.0.0.1:9/mcp"))
    with pytest.raises(DhubAPIError) as caught:
        api.mcp_server_tools("weather")
    assert caught.value.status_code == 502 and "could not be reached" in caught.value.detail


def test_the_cli_creates_lists_shows_and_deletes(dhub: Any, weather: str, tmp_path: Path) -> None:
    document = tmp_path / "weather.yaml"
    document.write_text(
        f"name: weather\ndescription: Forecasts\ntransport: streamable_http\nurl: {weather}\n"
        "headers: {X-Team: blue}\nallowed_tools: [forecast, structured]\ntimeout: 20\n"
    )
    created = dhub("mcp-servers", "create", document)
    assert created.exit_code == 0 and created.output.startswith("created mcp_server."), (
        created.output
    )
    listed = dhub("mcp-servers", "list")
    assert "weather" in listed.output and "streamable_http" in listed.output
    assert weather in listed.output
    as_json = json.loads(dhub("mcp-servers", "list", "--json").output)
    assert [s["name"] for s in as_json] == ["weather"]

    shown = dhub("mcp-servers", "get", "weather")
    assert shown.exit_code == 0, shown.output
    assert "allowed tools: forecast, structured" in shown.output
    assert "X-Team: blue" in shown.output and "20 s" in shown.output

    tools = dhub("mcp-servers", "tools", "weather", "--refresh")
    assert tools.exit_code == 0, tools.output
    lines = tools.output.splitlines()
    assert lines[0].split() == ["NAME", "PARAMETERS", "DESCRIPTION"]
    assert lines[1].split(None, 2) == ["forecast", "city,", "days?  The forecast for a city."]
    tools_json = json.loads(dhub("mcp-servers", "tools", "weather", "--json").output)
    assert [t["name"] for t in tools_json["data"]] == ["forecast", "structured"]
    assert tools_json["server"]["name"] == "weather"

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(weather_doc("ftp://host/mcp", name="bad")))
    refused = dhub("mcp-servers", "create", bad)
    assert refused.exit_code == 1 and "/url" in refused.output

    deleted = dhub("mcp-servers", "delete", "weather", "--json")
    assert deleted.exit_code == 0 and json.loads(deleted.output)["deleted"] is True
    missing = dhub("mcp-servers", "tools", "weather")
    assert missing.exit_code == 1 and "weather" in missing.output
    assert dhub("mcp-servers", "list").output.strip() == "No MCP servers found."


def test_who_may_only_read_a_server_cannot_list_its_tools(
    client: TestClient, api: Client, weather: str
) -> None:
    made = api.create_mcp_server(weather_doc(weather))
    eve = user(client, "eve")
    as_eve = Client(str(client.base_url), eve["Authorization"].split()[1], http=client)
    random_id = "mcp_server.01jzzzzzzzzzzzzzzzzzzzzzzz"
    details = []
    for target in (made["id"], random_id):
        with pytest.raises(NotFound) as caught:
            as_eve.mcp_server_tools(target)
        details.append(caught.value.detail.replace(target, "X"))
    assert details[0] == details[1]
    api.grant(made["id"], eve["id"], "viewer")
    assert as_eve.get_mcp_server("weather")["id"] == made["id"]
    with pytest.raises(NotFound):
        as_eve.mcp_server_tools("weather")
    api.grant(made["id"], eve["id"], "runner")
    assert "forecast" in {t.name for t in as_eve.mcp_server_tools("weather").tools}
