"""The console's Ontologies page in headless Chromium against a real `dhub serve`: the example
ontology (the server loads it, with its data, with the examples) in the list, its object types,
a search by type and text, a filter, and an object's links followed by clicking. Needs what
tests/e2e/test_console.py needs (Debian's chromium, playwright, `make web`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import CHROMIUM, Page
from tests.e2e.test_serve import ROOT, Server

CONSOLE = ROOT / "src" / "dhub" / "api" / "console" / "index.html"
TOKEN = "dhub_console_ontologies_e2e_token"

if not CHROMIUM.exists() or not CONSOLE.exists():
    pytest.fail(f"needs {CHROMIUM} and the built console ({CONSOLE}): make web", pytrace=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("ontologies-server") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def test_explore_the_example_ontology(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Ontologies").click()
    item = page.locator("[data-testid=ontology-item][data-name=support-ontology]")
    expect(item).to_be_visible()
    item.get_by_role("link", name="support-ontology").click()

    expect(page.get_by_test_id("object-type")).to_have_count(3)
    expect(page.get_by_test_id("object-row")).to_have_count(34)
    page.get_by_label("Type").select_option("customer")
    page.get_by_role("searchbox", name="Search").fill("lovelace")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_test_id("object-row")).to_have_count(1)
    page.get_by_role("searchbox", name="Search").fill("")
    page.get_by_label("Filter").fill("tier:eq:gold")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_test_id("object-row")).to_have_count(3)
    page.get_by_role("button", name="C-001").click()
    view = page.get_by_test_id("object-view")
    expect(view).to_contain_text("Ada Lovelace")
    placed = view.locator("[data-testid=object-links][data-link=placed]")
    expect(placed).to_contain_text("A-1001")
    page.screenshot(path=shots / "ontology-1280.png", full_page=True)
    placed.get_by_role("button", name="A-1001").click()  # follow to the order
    expect(view).to_contain_text("order A-1001")
    expect(view.locator("[data-testid=object-links][data-link=placed_by]")).to_contain_text(
        "Ada Lovelace"
    )
