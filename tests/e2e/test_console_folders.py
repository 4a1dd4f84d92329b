"""The console's Folders page and the agent page's folder select, in headless Chromium
against a real `dhub serve`: create a folder in the home folder, move an agent into it from
its page, find it in the folder's listing, and see a folder's marking on what is inside.
Needs what tests/e2e/test_console.py needs (Debian's chromium, playwright, `make web`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import playwright.sync_api as playwright_api
import pytest

from tests.conftest import FIXTURES, load_json
from tests.e2e.browser import CHROMIUM, WAIT, Page
from tests.e2e.test_serve import ROOT, Server

CONSOLE = ROOT / "src" / "dhub" / "api" / "console" / "index.html"
TOKEN = "dhub_console_folders_e2e_token"

if not CHROMIUM.exists() or not CONSOLE.exists():
    pytest.fail(f"needs {CHROMIUM} and the built console ({CONSOLE}): make web", pytrace=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("folders-server") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def api(server: Server, method: str, path: str, **kwargs: Any) -> Any:
    response = httpx.request(
        method, f"{server.url}/api/v1{path}", headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30, **kwargs,
    )  # fmt: skip
    response.raise_for_status()
    return response.json() if response.content else None


def test_create_a_folder_move_an_agent_into_it_and_find_it_there(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    doc = {**load_json(FIXTURES / "valid" / "workflow_triage.json"), "name": "filed-agent"}
    agent = api(server, "POST", "/agents", json=doc)
    home = api(server, "GET", "/folders/home")

    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Folders").click()
    expect(page.get_by_test_id("selected-folder")).to_contain_text(home["alias"])
    expect(page.locator("[data-testid=folder-child][data-name=filed-agent]")).to_be_visible()

    page.get_by_label("New folder here").fill("reports")
    page.get_by_role("button", name="Create folder").click()
    reports_row = page.locator("[data-testid=folder-child][data-name=reports]")
    expect(reports_row).to_have_attribute("data-category", "folder")
    [reports] = [f for f in api(server, "GET", "/folders?name=reports")["data"]]
    page.get_by_role("button", name=f"Expand {home['alias']}").click()
    expect(page.locator("[data-testid=tree-node][data-name=reports]")).to_be_visible()
    page.screenshot(path=shots / "folders-home-1280.png", full_page=True)

    page.goto(f"{server.url}/#/agents/{agent['id']}")
    select = page.get_by_test_id("agent-folder")
    expect(select).to_have_value(home["id"])
    select.select_option(label="reports")
    expect(select).to_have_value(reports["id"])
    assert api(server, "GET", f"/agents/{agent['id']}")["folder_id"] == reports["id"]

    # A marking on the folder is on everything in it: the badge shows on the agent's row.
    api(server, "POST", "/markings", json={"name": "pii"})
    api(server, "POST", "/markings/marking.pii/members", json={"principal_id": "user.admin"})
    api(server, "POST", f"/folders/{reports['id']}/markings", json={"marking_id": "marking.pii"})
    page.get_by_role("link", name="Open the folder").click()
    expect(page.get_by_test_id("selected-folder")).to_contain_text("reports")
    row = page.locator("[data-testid=folder-child][data-name=filed-agent]")
    expect(row).to_be_visible(timeout=WAIT)
    expect(row.get_by_test_id("effective-markings")).to_have_text("marking.pii")
    page.screenshot(path=shots / "folders-reports-1280.png", full_page=True)
    # ... and back in home, the agent is gone from the listing.
    page.get_by_role("link", name=home["alias"]).click()
    expect(reports_row).to_be_visible()
    expect(page.locator("[data-testid=folder-child][data-name=filed-agent]")).to_have_count(0)


def test_applying_an_example_again_finds_it_in_the_home_folder(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Examples").click()
    triage = page.locator("[data-testid=example][data-file='ticket_triage.json']")
    results = []
    for _ in range(2):
        triage.get_by_role("button", name="Apply ticket-triage").click()
        result = triage.get_by_test_id("apply-result")
        expect(result).to_contain_text(re.compile(r"(created|updated|unchanged) ticket-triage"))
        results.append(result.inner_text())
    assert "unchanged ticket-triage" in results[1], results
    named = api(server, "GET", "/agents?name=ticket-triage")["data"]
    assert [a["folder_id"] for a in named] == [api(server, "GET", "/folders/home")["id"]]
