"""The console's MCP servers (issue 20: "a user adds an MCP server's tools to an agent in the
console") in headless Chromium against a real `dhub serve` and a real Streamable HTTP MCP
server built with the SDK (tests/support/mcp_servers.py): a server created from the form,
its connection and live tools on its page, then two of its tools added to a react agent from
the editor's picker, saved, and read back through the API. Needs what
tests/e2e/test_console.py needs (Debian's chromium, playwright, `make web`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import CHROMIUM, Page
from tests.e2e.test_console import TOKEN, sign_in, snap
from tests.e2e.test_console_folders import CONSOLE
from tests.e2e.test_serve import Server
from tests.support.mcp_servers import http_server

if not CHROMIUM.exists() or not CONSOLE.exists():
    pytest.fail(f"needs {CHROMIUM} and the built console ({CONSOLE}): make web", pytrace=False)

AGENT = {
    "name": "forecaster", "description": "Answers with forecasts", "mode": "react",
    "input_mode": "chat",
    "agent": {"instructions": "Use your tools.", "model_provider": "openai",
              "model": "gpt-4o-mini", "tools": []},
}  # fmt: skip


def call(server: Server, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.request(method, f"{server.url}/api/v1{path}", headers=headers, **kwargs)


@pytest.fixture(scope="module")
def weather() -> Iterator[str]:
    with http_server() as url:
        yield url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The MCP server is on this machine's loopback: allowed, as an operator would.
    served = Server(
        tmp_path_factory.mktemp("mcp-server") / "data",
        DHUB_ADMIN_TOKEN=TOKEN,
        DHUB_MCP_ALLOWED_HOSTS="127.0.0.1",
    )
    try:
        yield served
    finally:
        served.stop()


def test_add_two_of_an_mcp_servers_tools_to_an_agent(
    server: Server, weather: str, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    agent = call(server, "POST", "/agents", json=AGENT)
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["id"]

    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="MCP servers").click()
    page.get_by_role("link", name="New MCP server").click()
    page.get_by_label("Name", exact=True).fill("weather")
    page.get_by_label("Description").fill("Forecasts")
    page.get_by_label("URL", exact=True).fill("ftp://nowhere/mcp")
    page.get_by_role("button", name="Add a header").click()
    page.get_by_label("Headers: name 1").fill("X-Team")
    page.get_by_label("Headers: value 1").fill("blue")
    create = page.get_by_role("button", name="Create")
    create.click()
    # The server's refusal names the field; nothing is stored.
    expect(page.locator("[data-testid=field-error][data-loc='/url']")).to_contain_text("http://")
    page.get_by_label("URL", exact=True).fill(weather)
    # The same document as YAML, then back: nothing is lost on the way.
    page.get_by_text("YAML", exact=True).click()
    document = page.get_by_label("MCP server document (YAML)")
    expect(document).to_have_value(re.compile(r"headers:\n  X-Team: blue\n"))
    page.get_by_text("Form", exact=True).click()
    expect(page.get_by_label("Headers: value 1")).to_have_value("blue")
    snap(page, shots, "50-mcp-new")
    create.click()

    expect(page.get_by_test_id("mcp-connection")).to_contain_text(weather)
    expect(page.locator("[data-testid=mcp-value][data-name=X-Team]")).to_contain_text("blue")
    tools = page.get_by_test_id("mcp-tool-row")
    expect(page.locator("[data-testid=mcp-tool-row][data-name=forecast]")).to_contain_text(
        "The forecast for a city."
    )
    expect(page.locator("[data-testid=mcp-tool-row][data-name=forecast]")).to_contain_text(
        "city, days?"
    )
    assert tools.count() >= 5
    snap(page, shots, "51-mcp-server")
    server_id = page.url.rsplit("/", 1)[1]
    assert server_id.startswith("mcp_server.")

    # The agent's editor: two of the server's tools, with a prefix.
    page.goto(f"{server.url}/#/agents/{agent_id}/edit")
    page.get_by_text("Add an MCP server's tools").click()
    page.get_by_label("MCP server").select_option(label="weather")
    add = page.get_by_role("button", name="Add to the agent's tools")
    add.click()  # all its tools: the id alone
    expect(page.get_by_test_id("editor-status")).to_contain_text("Added every tool of weather")
    only_id = re.compile(re.escape(f'"tools": [\n      "{server_id}"\n    ]'))
    expect(page.get_by_label("Agent document (JSON)")).to_have_value(only_id)
    # Then two of them, which take that item's place.
    page.locator("[data-testid=mcp-pick-tool][data-name=structured]").get_by_role(
        "checkbox"
    ).check()
    page.locator("[data-testid=mcp-pick-tool][data-name=forecast]").get_by_role("checkbox").check()
    page.get_by_label("Prefix").fill("w_")
    add.click()
    expect(page.get_by_test_id("editor-status")).to_contain_text(
        "Added forecast, structured from weather to agent.tools"
    )
    snap(page, shots, "52-agent-mcp-tools", phone=False)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved, version 2.")).to_be_visible()

    stored = call(server, "GET", f"/agents/{agent_id}").json()
    assert stored["version"] == 2
    assert stored["agent"]["tools"] == [
        {"id": server_id, "tools": ["forecast", "structured"], "prefix": "w_"}
    ]
