"""A run's artifacts in the console (issue 19), in the browser against a real `dhub serve`: a
workflow fills a stored template, and the run page lists the document it made, downloading it
as stored and as PDF (with the session's token, as an attachment named like it).

Screenshots at 1280 and 390 px, as in test_console.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import Page
from tests.e2e.test_console import TOKEN, api, sign_in, snap
from tests.e2e.test_serve import Server

ORDERS = [{"item": "bolts", "quantity": 120, "price": 0.25},
          {"item": "nuts", "quantity": 80, "price": 12.5}]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("console-artifacts") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def test_the_run_page_lists_and_downloads_its_artifacts(
    server: Server, page: Page, shots: Path, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    # The server loaded the examples: the template, and the workflow that names it.
    [agent] = api(server, "GET", "/agents", params={"name": "weekly-report-filler"})["data"]
    inputs = {"customer": "ACME", "week": "2026-11-30", "orders": ORDERS}
    run = api(server, "POST", f"/agents/{agent['id']}/runs", json={"inputs": inputs})
    for _ in range(300):
        if api(server, "GET", f"/runs/{run['id']}")["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.1)
    sign_in(page, server)
    page.goto(f"{server.url}/#/runs/{run['id']}")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "succeeded")
    listed = page.get_by_test_id("run-artifact")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text("weekly-report.md")
    expect(listed).to_contain_text("node fill")
    snap(page, shots, "30-run-artifacts")

    with page.expect_download() as caught:
        page.get_by_role("button", name="weekly-report.md", exact=True).click()
    saved = tmp_path / "report.md"
    caught.value.save_as(saved)
    assert caught.value.suggested_filename == "weekly-report.md"
    assert saved.read_text().startswith("# Weekly report: ACME")

    with page.expect_download() as caught:
        page.get_by_role("button", name="Download weekly-report.md as PDF").click()
    pdf = tmp_path / "report.pdf"
    caught.value.save_as(pdf)
    assert caught.value.suggested_filename == "weekly-report.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")


def test_a_run_without_artifacts_says_so(server: Server, page: Page) -> None:
    agents = api(server, "GET", "/agents?q=ticket-triage")["data"]  # an example: loaded
    run = api(server, "POST", f"/agents/{agents[0]['id']}/runs",
              json={"inputs": {"ticket": "Checkout page shows an error"}})  # fmt: skip
    sign_in(page, server)
    page.goto(f"{server.url}/#/runs/{run['id']}")
    playwright_api.expect(page.get_by_test_id("run-artifacts-none")).to_have_text("None.")
