"""The console's Triggers section (issue 21) in headless Chromium against a real `dhub serve`:
on the triage example's page an editor creates a webhook (a mapping that is not JSON refused
before it is sent), copies its secret from the box that
says it is shown once, a delivery signed with ``dhub.client.sign_delivery`` starts a run, and
the trigger's history shows it with a link to the run; a wrong signature shows as refused with
its reason; disabling shows the stopped reason. Needs what tests/e2e/test_console.py needs
(Debian's chromium, playwright, `make web`). One sign-in, one page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import playwright.sync_api as playwright_api
import pytest

from dhub.client import sign_delivery
from tests.e2e.browser import Page
from tests.e2e.test_console import TOKEN, agent_named, api, sign_in, snap
from tests.e2e.test_serve import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("triggers-server") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def test_make_a_webhook_and_see_its_deliveries(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    triage = agent_named(server, "ticket-triage")
    assert triage is not None, "the triage example is loaded with the server"
    sign_in(page, server)
    page.goto(f"{server.url}/#/agents/{triage['id']}")
    section = page.get_by_test_id("triggers")
    expect(section).to_contain_text("No triggers yet.")

    section.get_by_label("Webhook name").fill("helpdesk")
    section.get_by_text("Options: mapping, allowed sources").click()
    mapping = section.get_by_label("Mapping", exact=False)
    mapping.fill("{ticket: body.title}")
    section.get_by_role("button", name="Create webhook").click()
    expect(section.get_by_role("alert")).to_contain_text("Mapping: not JSON")
    expect(page.get_by_test_id("trigger-row")).to_have_count(0)
    mapping.fill(json.dumps({"ticket": "{{ body.issue.title }}", "customer": "acme"}))
    section.get_by_role("button", name="Create webhook").click()
    box = page.get_by_test_id("trigger-secret-box")
    expect(box).to_contain_text("Shown once.")
    secret = page.get_by_test_id("trigger-secret").input_value()
    url = page.get_by_test_id("trigger-secret-url").inner_text()
    assert secret.startswith("whsec_") and "/hooks/trigger." in url
    row = page.get_by_test_id("trigger-row")
    expect(row).to_have_attribute("data-status", "active")
    expect(row.get_by_test_id("trigger-url")).to_have_text(url)
    expect(row).to_contain_text("user.admin")
    snap(page, shots, "50-webhook-secret")
    box.get_by_role("button", name="I have saved it").click()
    expect(box).to_have_count(0)

    # An outside system posts a signed delivery; a forged one is refused.
    body = json.dumps({"issue": {"title": "Checkout page shows an error"}}).encode()
    good = httpx.post(url, content=body, headers=sign_delivery(secret, body, delivery="hd-1"))
    assert good.status_code == 202, good.text
    run_id = good.json()["run_id"]
    run = api(server, "GET", f"/runs/{run_id}")
    assert run["inputs"] == {"ticket": "Checkout page shows an error", "customer": "acme"}
    forged = httpx.post(url, content=body, headers=sign_delivery("whsec_forged", body))
    assert forged.status_code == 401

    row.get_by_role("button", name="History").click()
    history = page.get_by_test_id("trigger-history")
    expect(history.get_by_test_id("trigger-event")).to_have_count(2)
    refused = history.locator("[data-testid=trigger-event][data-status=refused]")
    expect(refused).to_contain_text("the signature does not match")
    started = history.locator("[data-testid=trigger-event][data-status=started]")
    expect(started).to_contain_text("hd-1")
    snap(page, shots, "51-webhook-history")
    started.get_by_role("link").click()
    expect(page).to_have_url(f"{server.url}/#/runs/{run_id}")

    page.go_back()
    row = page.get_by_test_id("trigger-row")
    row.get_by_role("button", name="Disable").click()
    expect(row).to_have_attribute("data-status", "stopped")
    expect(row.get_by_test_id("trigger-status")).to_contain_text("disabled")
    row.get_by_role("button", name="Enable").click()
    expect(row).to_have_attribute("data-status", "active")

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Rotate secret").click()
    rotated = page.get_by_test_id("trigger-secret")
    expect(rotated).not_to_have_value(secret)
    page.get_by_role("button", name="I have saved it").click()
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("trigger-row")).to_have_count(0)
    assert httpx.post(url, content=body, headers=sign_delivery(secret, body)).status_code == 404
