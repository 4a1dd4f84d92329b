"""The console's Templates pages (issue 19) in headless Chromium against a real `dhub serve`:
the example template (loaded with the server) in the list, its variables and body, a render
refused with the server's message beside the variable, a render shown as text, and downloads
as HTML and PDF (POSTed with the session's token); a template created from the form and from
YAML (the server's errors beside the body, on the YAML's line), edited (versions listed),
deleted after a confirmation. Needs what tests/e2e/test_console.py needs
(Debian's chromium, playwright, `make web`). One sign-in, one page: the suite's time is tight."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import Page
from tests.e2e.test_console import TOKEN, sign_in, snap
from tests.e2e.test_serve import Server

ORDERS = [{"item": "bolts", "quantity": 120, "price": 0.25},
          {"item": "nuts", "quantity": 80, "price": 12.5}]  # fmt: skip

NOTICE = """name: notice
format: html
body: <p>{{ note }}</p>
variables:
  - {name: note, type: string}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("templates-server") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def test_see_and_render_the_example_template(
    server: Server, page: Page, shots: Path, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Templates").click()
    row = page.locator("[data-testid=template-row][data-name=weekly-report]")
    expect(row).to_contain_text("markdown")
    expect(row).to_contain_text("customer, week, orders, total, urgent")
    row.get_by_role("link", name="weekly-report").click()

    expect(page.get_by_test_id("template-variable")).to_have_count(5)
    week = page.locator("[data-testid=template-variable][data-name=week]")
    expect(week).to_contain_text("The Monday of the week")
    urgent = page.locator("[data-testid=template-variable][data-name=urgent]")
    expect(urgent).to_contain_text("no, default false")
    expect(page.get_by_test_id("template-body")).to_contain_text("# Weekly report: {{ customer }}")

    # A value the server refuses: its message beside the variable, nothing rendered.
    page.get_by_test_id("field-customer").fill("ACME")
    page.get_by_test_id("field-week").fill("not a date")
    page.get_by_test_id("field-orders").fill(json.dumps(ORDERS))
    page.get_by_test_id("field-total").fill("1030")
    render = page.get_by_role("button", name="Render", exact=True)
    render.click()
    expect(page.get_by_test_id("field-error-week")).to_contain_text(
        "The variable 'week' must be a date (YYYY-MM-DD); got 'not a date'."
    )
    expect(page.get_by_test_id("field-week")).to_be_focused()
    expect(page.get_by_test_id("rendered-text")).to_have_count(0)

    page.get_by_test_id("field-week").fill("2026-11-30")
    render.click()
    rendered = page.get_by_test_id("rendered-text")
    expect(rendered).to_have_text(re.compile(r"^# Weekly report: ACME\n\nWeek of 30 November 2026"))
    expect(rendered).to_contain_text("| bolts | 120 | 0.25 | 30.00 |")
    expect(page.get_by_test_id("field-error-week")).to_have_count(0)
    snap(page, shots, "40-template")

    with page.expect_download() as caught:
        page.get_by_role("button", name="Download PDF").click()
    pdf = tmp_path / "report.pdf"
    caught.value.save_as(pdf)
    assert caught.value.suggested_filename == "weekly-report.pdf"
    assert pdf.read_bytes().startswith(b"%PDF-")

    with page.expect_download() as caught:
        page.get_by_role("button", name="Download HTML").click()
    html = tmp_path / "report.html"
    caught.value.save_as(html)
    assert caught.value.suggested_filename == "weekly-report.html"
    assert "<h1>Weekly report: ACME</h1>" in html.read_text()


def test_create_edit_and_delete_a_template(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    sign_in(page, server)
    page.goto(f"{server.url}/#/templates")
    page.get_by_role("link", name="New template").click()
    page.get_by_label("Name", exact=True).fill("thank-you")
    page.get_by_label("Format").select_option("text")
    page.get_by_role("button", name="Add a variable").click()
    page.get_by_label("Variable 1: name").fill("who")
    page.get_by_label("Variable 1: description").fill("Whom to thank")
    # A body that uses a variable it does not declare: the server's message beside the body.
    page.get_by_label("Body", exact=True).fill("Thank you, {{ who }}, for {{ what }}.")
    create = page.get_by_role("button", name="Create")
    create.click()
    expect(page.get_by_test_id("error-body")).to_contain_text("'what'")
    snap(page, shots, "template-new")
    page.get_by_label("Body", exact=True).fill("Thank you, {{ who }}.")
    create.click()

    expect(page.get_by_test_id("flash")).to_have_text("Created the template thank-you.")
    expect(page.get_by_test_id("template-body")).to_have_text("Thank you, {{ who }}.")
    expect(page.locator("[data-testid=template-variable][data-name=who]")).to_contain_text(
        "Whom to thank"
    )
    expect(page.get_by_test_id("version")).to_have_count(1)

    # Edit: a second variable with a default; leaving with unsaved changes asks first.
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Variable 1: name")).to_have_value("who")
    page.get_by_role("button", name="Add a variable").click()
    page.get_by_label("Variable 2: name").fill("sign")
    page.get_by_label("Variable 2: default").fill("The team")
    page.get_by_label("Body", exact=True).fill("Thank you, {{ who }}.\n-- {{ sign }}")
    page.once("dialog", lambda d: d.dismiss())
    page.get_by_role("link", name="Back to the template").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Edit: thank-you")
    page.get_by_role("button", name="Save").click()

    expect(page.get_by_test_id("flash")).to_have_text("Saved, version 2.")
    expect(page.locator("[data-testid=template-variable][data-name=sign]")).to_contain_text(
        'no, default "The team"'
    )
    versions = page.get_by_test_id("version")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("Version 2")
    page.get_by_test_id("field-who").fill("Ada")
    page.get_by_role("button", name="Render", exact=True).click()
    expect(page.get_by_test_id("rendered-text")).to_have_text("Thank you, Ada.\n-- The team")
    snap(page, shots, "template-edited")

    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("flash")).to_have_text("Deleted the template thank-you.")
    expect(page.locator("[data-testid=template-row][data-name=thank-you]")).to_have_count(0)


def test_a_template_pasted_as_yaml(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    sign_in(page, server)
    page.goto(f"{server.url}/#/templates/new")
    page.get_by_label("YAML").check()
    editor = page.get_by_label("Template document (YAML)")
    editor.fill(NOTICE.replace("string", "strin"))
    page.get_by_role("button", name="Create").click()
    # The server points at the type: the line is marked in the editor.
    expect(page.locator("[data-testid=error-line][data-line='5']")).to_be_visible()
    editor.fill(NOTICE)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_test_id("flash")).to_have_text("Created the template notice.")
    expect(page.get_by_test_id("template-body")).to_have_text("<p>{{ note }}</p>")
