"""require_browser from the outside: a stored Tool resource with it, offered to a react agent
and called by the (scripted) model on the server (SQLite and PostgreSQL), and the page-title
example run with `dhub run`. Both reach the browser through the helper the tool imports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dhub.cli.main import app
from dhub.sandbox.browser import CHROMIUM
from dhub.settings import Settings
from tests.conftest import ROOT
from tests.integration.test_react_runs_api import log, server
from tests.integration.test_reference_runs import agent_of, start, stored
from tests.integration.test_runs_api import ok, until
from tests.integration.test_sandbox_browser import PAGE_TITLE

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="no Chromium (make browser-tools)"
)

PAGE = "data:text/html,<title>Read by the agent</title>"
CALL = {"tool_calls": [{"id": "t1", "name": "page_title", "arguments": {"url": PAGE}}]}
DONE = "The page is called 'Read by the agent'."


def test_a_stored_browser_tool_runs_for_a_react_agent(settings: Settings) -> None:
    with server(settings, [CALL, DONE]) as client:
        tool = stored(client, "tool", "page_title", PAGE_TITLE, require_browser=True)
        assert ok(client.get(f"/api/v1/tools/{tool}"))["require_browser"] is True
        agent = agent_of(client, tools=[{"id": tool, "name": "page_title"}])
        run = ok(start(client, agent), 202)["id"]
        done = until(client, run, "succeeded", "failed")
        events = log(client, run)
    assert done["status"] == "succeeded", done["error"]
    [result] = [e["data"]["result"] for e in events if e["type"] == "tool.succeeded"]
    assert result == {"title": "Read by the agent", "url": PAGE}


def test_the_page_title_example_runs_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DHUB_DATA_DIR", str(tmp_path))
    page = "data:text/html,<title>Hello, browser</title>"
    example = ROOT / "examples" / "page_title.yaml"
    result = CliRunner().invoke(app, ["run", str(example), "--input", f"url={page}"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"title": "Hello, browser", "url": page}
