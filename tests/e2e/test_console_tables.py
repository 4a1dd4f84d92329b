"""The console's Tables pages (issue 19) in headless Chromium against a real `dhub serve`: the
example sales table (the server loads it with the examples) with its columns and first rows; a
query grouped and summed, and a filter the server refuses with its message beside the field; a
table imported from a CSV through the file input, shared with a user, its versions after an
edit, moved into a folder, and deleted after a confirmation; a table from columns with rows
appended from a file and a column added; what a viewer is not offered. Needs what
tests/e2e/test_console.py needs (Debian's chromium, playwright, `make web`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import playwright.sync_api as playwright_api
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.e2e.browser import CHROMIUM, Page
from tests.e2e.test_console import TOKEN, api, sign_in, snap
from tests.e2e.test_console_folders import CONSOLE
from tests.e2e.test_serve import Server

if not CHROMIUM.exists() or not CONSOLE.exists():
    pytest.fail(f"needs {CHROMIUM} and the built console ({CONSOLE}): make web", pytrace=False)

CSV = "city,visits,open\nLyon,12,true\nNantes,7,false\nLille,30,true\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("tables-server") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def open_table(page: Page, server: Server, name: str) -> None:
    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tables").click()
    page.locator(f"[data-testid=table-row][data-name={name}]").get_by_role("link").click()
    page.get_by_test_id("table-columns").wait_for()


def test_a_table_with_its_columns_and_first_rows(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    # The server loaded the examples: examples/knowledge/sales.csv is the table `sales`.
    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tables").click()
    row = page.locator("[data-testid=table-row][data-name=sales]")
    expect(row).to_contain_text("order_id, day, region")
    row.get_by_role("link", name="sales").click()
    expect(page.get_by_test_id("table-columns")).to_contain_text("unit_price")
    expect(page.get_by_test_id("table-rows").locator("tbody tr")).to_have_count(50)
    expect(page.get_by_test_id("table-rows")).to_contain_text("1001")


def test_a_grouped_query(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    open_table(page, server, "sales")
    form = page.get_by_test_id("query-form")
    form.get_by_label("Group by").select_option("region")
    form.get_by_role("button", name="Add an aggregate").click()
    form.get_by_label("Aggregate 1: function").select_option("sum")
    form.get_by_label("Aggregate 1: column").select_option("units")
    form.get_by_label("Sort by").select_option("sum_units")
    form.get_by_label("descending").check()
    form.get_by_role("button", name="Run the query").click()
    result = page.get_by_test_id("query-result")
    expect(result.locator("thead")).to_contain_text("region")
    expect(result.locator("thead")).to_contain_text("sum_units")
    rows = result.get_by_test_id("query-row")
    expect(rows).to_have_count(4)
    expect(rows.nth(0)).to_have_text("north282")
    expect(rows.nth(3)).to_have_text("east198")
    snap(page, shots, "tables-query")


def test_a_bad_filter_shows_the_servers_error_beside_the_field(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    open_table(page, server, "sales")
    form = page.get_by_test_id("query-form")
    form.get_by_role("button", name="Add a condition").click()
    form.get_by_label("Condition 1: column").select_option("units")
    form.get_by_label("Condition 1: op").select_option("gt")
    form.get_by_label("Condition 1: value").fill("many")
    form.get_by_role("button", name="Run the query").click()
    expect(page.get_by_test_id("query-error-filter-0-value")).to_contain_text(
        "column 'units': 'many' is not an integer"
    )
    expect(form.get_by_label("Condition 1: value")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("query-result")).to_have_count(0)
    # Fixed, it runs: 50 orders, of which those with more than 20 units.
    form.get_by_label("Condition 1: value").fill("20")
    form.get_by_role("button", name="Run the query").click()
    expect(page.get_by_test_id("query-error-filter-0-value")).to_have_count(0)
    expect(page.get_by_test_id("query-row").first).to_be_visible()


def test_import_share_edit_and_delete_a_table(
    server: Server, page: Page, shots: Path, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    api(server, "POST", "/users", json={"name": "bea", "display_name": "Bea"})
    sign_in(page, server)
    page.goto(f"{server.url}/#/tables")
    page.get_by_role("link", name="New table").click()
    page.get_by_label("Name", exact=True).fill("visits")
    csv = tmp_path / "visits.csv"
    csv.write_text(CSV)
    page.get_by_label("File", exact=True).set_input_files(csv)
    page.get_by_role("button", name="Import").click()

    expect(page.get_by_test_id("flash")).to_have_text("Imported 3 rows from visits.csv.")
    expect(page.get_by_role("heading", level=1)).to_have_text("visits")
    expect(page.get_by_test_id("table-columns")).to_contain_text("integer")
    rows = page.get_by_test_id("table-rows").locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(2)).to_contain_text("Lille")
    table_id = page.url.rsplit("/", 1)[1]

    # Shared with a user, as a viewer: the grant is listed, and stored.
    page.get_by_label("Share with").fill("user.bea")
    page.get_by_label("Scope", exact=True).select_option("viewer")
    page.get_by_role("button", name="Grant", exact=True).click()
    expect(page.get_by_test_id("grants")).to_contain_text("user.bea")
    grants = api(server, "GET", f"/tables/{table_id}/grants")["data"]
    assert [(g["principal_id"], g["scope"]) for g in grants] == [("user.bea", "viewer")]

    # An edit (here through the API) is a new version in the history.
    expect(page.get_by_test_id("version")).to_have_count(1)
    api(server, "PATCH", f"/tables/{table_id}", json={"description": "Visits by city"})
    page.reload()
    versions = page.get_by_test_id("version")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("Version 2")
    expect(versions.nth(0)).to_contain_text("by user.admin")
    snap(page, shots, "tables-imported")

    # Moved into a folder (its grants and markings then reach the table too).
    reports = api(server, "POST", "/folders", json={"name": "reports"})
    page.reload()
    folder = page.get_by_test_id("resource-folder")
    folder.select_option(label="reports")
    expect(folder).to_have_value(reports["id"])
    assert api(server, "GET", f"/tables/{table_id}")["folder_id"] == reports["id"]

    # Delete asks first: saying no keeps it; yes deletes it and says so on the list.
    page.once("dialog", lambda d: d.dismiss())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("visits")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("flash")).to_have_text("Deleted the table visits.")
    expect(page.locator("[data-testid=table-row][data-name=visits]")).to_have_count(0)
    gone = api(server, "GET", "/tables")["data"]
    assert table_id not in [t["id"] for t in gone]


def test_a_table_from_columns_then_rows_appended_from_a_file(
    server: Server, page: Page, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    sign_in(page, server)
    page.goto(f"{server.url}/#/tables/new")
    page.get_by_label("Columns").check()
    page.get_by_label("Name", exact=True).fill("stock")
    page.get_by_label("Column 1: name").fill("sku")
    page.get_by_role("button", name="Add a column").click()
    page.get_by_label("Column 2: name").fill("_count")
    page.get_by_label("Column 2: type").select_option("integer")
    page.get_by_role("button", name="Create").click()
    # The server's refusal is beside the column it names.
    expect(page.get_by_test_id("error-column-1-name")).to_be_visible()
    page.get_by_label("Column 2: name").fill("count")
    page.get_by_role("button", name="Create").click()

    expect(page.get_by_test_id("flash")).to_have_text("Created the table stock.")
    expect(page.get_by_test_id("table-columns")).to_contain_text("count")
    expect(page.get_by_text("No rows yet.")).to_be_visible()
    rows = tmp_path / "stock.jsonl"
    rows.write_text('{"sku": "A1", "count": 3}\n{"sku": "B2", "count": 0}\n')
    page.get_by_label("Rows file").set_input_files(rows)
    page.get_by_role("button", name="Append").click()
    expect(page.get_by_test_id("append-result")).to_have_text("Appended 2 rows from stock.jsonl.")
    expect(page.get_by_test_id("table-rows").locator("tbody tr")).to_have_count(2)
    # And a Parquet file (sent as application/vnd.apache.parquet).
    parquet = tmp_path / "more.parquet"
    pq.write_table(pa.table({"sku": ["C3"], "count": [9]}), parquet)
    page.get_by_label("Rows file").set_input_files(parquet)
    page.get_by_role("button", name="Append").click()
    expect(page.get_by_test_id("append-result")).to_have_text("Appended 1 row from more.parquet.")
    expect(page.get_by_test_id("table-rows").locator("tbody tr")).to_have_count(3)
    expect(page.get_by_test_id("table-rows")).to_contain_text("C3")

    # A new column: required is refused while there are rows (beside it); optional, it is added.
    page.get_by_role("button", name="Edit columns").click()
    page.get_by_role("button", name="Add a column").click()
    page.get_by_label("Column 3: name").fill("price")
    page.get_by_label("Column 3: type").select_option("number")
    page.get_by_label("Column 3: required").check()
    page.get_by_role("button", name="Save columns").click()
    expect(page.locator("[data-testid^=error-column-2-]")).to_be_visible()
    page.get_by_label("Column 3: required").uncheck()
    page.get_by_role("button", name="Save columns").click()
    expect(page.get_by_test_id("flash")).to_have_text("Saved, version 2.")
    expect(page.get_by_test_id("table-columns")).to_contain_text("price")
    expect(page.get_by_test_id("version")).to_have_count(2)


def test_a_viewer_may_query_but_not_change_or_delete(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    user = api(server, "POST", "/users", json={"name": "cyd", "display_name": "Cyd"})
    token = api(server, "POST", f"/users/{user['id']}/tokens", json={"name": "console"})["token"]
    made = httpx.post(
        f"{server.url}/api/v1/tables/import?name=readings&format=csv",
        content=CSV, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30,
    )  # fmt: skip
    assert made.status_code == 201, made.text
    table_id = made.json()["table"]["id"]
    grant = {"principal_id": user["id"], "scope": "viewer"}
    api(server, "POST", f"/tables/{table_id}/grants", json=grant)

    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{server.url}/#/tables/{table_id}")
    expect(page.get_by_test_id("table-rows").locator("tbody tr")).to_have_count(3)
    expect(page.get_by_test_id("sharing")).to_contain_text("you can look")
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    expect(page.get_by_test_id("table-append")).to_have_count(0)
    expect(page.get_by_role("button", name="Grant", exact=True)).to_have_count(0)
    page.get_by_test_id("query-form").get_by_role("button", name="Run the query").click()
    expect(page.get_by_test_id("query-row")).to_have_count(3)
