"""The console with no provider key, as a new user first sees it: `dhub serve --examples`
starts with the demo model on, so the support example chats and refunds, and the summarizer
runs, while every page that shows a model's answer says it came from the demo model and how to
configure a real one (a banner before the first message, a label on each reply, a notice on
the run). Screenshots at 1280 and 390 px, as in test_console.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import Page
from tests.e2e.test_console import TOKEN, agent_named, api, sign_in, snap
from tests.e2e.test_serve import Server

CONFIGURE = "set DHUB_OPENAI_API_KEY on the server and restart it"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("console-demo") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def test_the_support_example_chats_and_refunds_on_the_labelled_demo_model(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    page.locator("[data-testid=chat-agent][data-name='support-assistant']").get_by_role(
        "link"
    ).click()
    # Before the first message: the page says who will answer, and what to set instead.
    banner = page.get_by_test_id("demo-banner")
    expect(banner).to_contain_text("Replies here come from dhub's demo model")
    expect(banner).to_contain_text("no model provider 'openai' configured")
    expect(banner).to_contain_text(CONFIGURE)
    assert page.locator("[data-testid=message]").count() == 0
    snap(page, shots, "demo-01-chat-banner")

    page.get_by_label("Message", exact=True).fill("Please refund order A-1001")
    page.keyboard.press("Enter")
    lookup = page.locator("[data-testid=tool-call][data-name='lookup_order']")
    expect(lookup).to_have_attribute("data-status", "succeeded")
    expect(lookup).to_contain_text("shipped")
    confirm = page.locator("[data-testid=task][data-kind='await_confirmation']")
    expect(confirm.get_by_test_id("argument-order_id")).to_have_value("A-1001")
    expect(confirm.get_by_test_id("argument-amount")).to_have_value("42")
    # The text the demo model wrote with its refund request is labelled as it streams.
    expect(page.get_by_test_id("live-turn").get_by_test_id("demo-label").first).to_be_visible()
    snap(page, shots, "demo-02-chat-confirmation")
    confirm.get_by_role("button", name="Approve").click()

    reply = page.locator("[data-testid=message][data-role='assistant']")
    expect(reply).to_have_text(re.compile(r"Done: order A-1001 is refunded \(42\.0\)\."))
    label = page.get_by_test_id("chat-log").get_by_test_id("demo-label")
    expect(label).to_have_count(1)
    expect(label).to_have_text("demo model reply")
    assert "DHUB_OPENAI_API_KEY" in (label.get_attribute("title") or "")
    snap(page, shots, "demo-03-chat-reply")

    # Reopened later, the saved reply is still labelled (its run's usage says demo).
    page.reload()
    expect(page.get_by_test_id("chat-log").get_by_test_id("demo-label")).to_have_count(1)

    # The turn's run says so too, and its usage names the model.
    page.get_by_role("link", name=re.compile("steps of this turn")).click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "succeeded")
    notice = page.get_by_test_id("run-demo")
    expect(notice).to_contain_text("This run's model answers came from dhub's demo model")
    expect(notice).to_contain_text(CONFIGURE)
    expect(page.get_by_test_id("run-usage")).to_contain_text("demo")
    snap(page, shots, "demo-04-run")


def test_the_summarizer_example_runs_on_the_demo_model_from_the_console(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    agent = agent_named(server, "incident-summarizer")
    assert agent is not None
    sign_in(page, server)
    page.goto(f"{server.url}/#/agents/{agent['id']}/run")
    expect(page.get_by_test_id("demo-banner")).to_contain_text(CONFIGURE)
    page.get_by_label(re.compile(r"^alert")).fill('{"host": "db-1", "disk": 97}')
    snap(page, shots, "demo-05-start-run")
    page.get_by_role("button", name="Start run").click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "succeeded")
    expect(page.get_by_test_id("run-outputs")).to_contain_text("Disk at 97% on db-1")
    expect(page.get_by_test_id("run-demo")).to_contain_text(CONFIGURE)
    page.get_by_test_id("graph-node-summarize").click()
    inputs = page.get_by_test_id("node-inputs")  # the prompt as the model got it
    expect(inputs).to_contain_text(
        'Write a one-line headline for this alert: {"host": "db-1", "disk": 97}'
    )
    expect(page.get_by_test_id("run-cost")).to_contain_text("Cost: $0.00")  # the demo is free
    snap(page, shots, "demo-06-run")
    run_id = page.url.rsplit("/", 1)[-1]
    assert api(server, "GET", f"/runs/{run_id}")["usage"]["model"] == "demo"
    # The agent's page sums its runs' cost (GET /usage).
    page.goto(f"{server.url}/#/agents/{agent['id']}")
    expect(page.get_by_test_id("agent-usage")).to_contain_text(re.compile(r"\d+ runs?, .*\$0\.00"))
