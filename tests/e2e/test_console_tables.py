"""The console's Tables page in headless Chromium against a real `dhub serve`: the example
sales table (the server loads it with the examples) found in the list, and shown with its
columns and first rows. Needs what tests/e2e/test_console.py needs (Debian's chromium,
playwright, `make web`)."""

from __future__ import annotations

from collections.abc import Iterator

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import CHROMIUM, Page
from tests.e2e.test_console_folders import CONSOLE
from tests.e2e.test_serve import Server

TOKEN = "dhub_console_tables_e2e_token"

if not CHROMIUM.exists() or not CONSOLE.exists():
    pytest.fail(f"needs {CHROMIUM} and the built console ({CONSOLE}): make web", pytrace=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("tables-server") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def test_a_table_with_its_columns_and_first_rows(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    # The server loaded the examples: examples/knowledge/sales.csv is the table `sales`.
    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tables").click()
    row = page.locator("[data-testid=table-row][data-name=sales]")
    expect(row).to_contain_text("order_id, day, region")
    row.get_by_role("link", name="sales").click()
    expect(page.get_by_test_id("table-columns")).to_contain_text("unit_price")
    expect(page.get_by_test_id("table-rows").locator("tbody tr")).to_have_count(50)
    expect(page.get_by_test_id("table-rows")).to_contain_text("1001")
