"""The web console (web/, served by `dhub serve` at /) in headless Chromium, against a real
`dhub serve` on SQLite with the examples loaded and a scripted model as `openai`.

- sign in, apply the triage example, start a run, watch it wait, answer the form in Tasks,
  see the graph turn green and the outputs appear;
- chat with the support example and approve its refund;
- an invalid edit shows the error on the right field (JSON and YAML);
- agents list filters, runs list, sharing, at laptop and phone widths.

Every page is saved as a screenshot (1280 px wide, and 390 px for most) in a temporary
directory whose path the tests print (`pytest -s` shows it). Needs Debian's `chromium` and the
`playwright` package (its own browser downloads are not used), and the console built
(`cd web && npm ci && npm run build`, i.e. `make web`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import CHROMIUM, LAPTOP, PHONE, WAIT, Page
from tests.e2e.test_serve import ROOT, Server

CONSOLE = ROOT / "src" / "dhub" / "api" / "console" / "index.html"
TOKEN = "dhub_console_e2e_token"
# The support assistant's model, as tests/e2e/test_react_chat_cli.py scripts it.
REPLIES: list[Any] = [
    {"tool_calls": [{"id": "l1", "name": "lookup_order", "arguments": {"order_id": "A-1001"}}]},
    {"tool_calls": [{"id": "r1", "name": "issue_refund",
                     "arguments": {"order_id": "A-1001", "amount": 42.0}}]},
    "Done: 42.0 is refunded to you.",
    {"tool_calls": [{"id": "r2", "name": "issue_refund",
                     "arguments": {"order_id": "A-1002", "amount": 10.0}}]},
    "I did not refund A-1002.",
]  # fmt: skip


# `make test` installs Chromium and builds the console first; without them these tests fail
# saying what to run (a skipped browser test would prove nothing).
_MISSING = []
if not CHROMIUM.exists():
    _MISSING.append(f"no {CHROMIUM} (make browser-tools, or apt-get install chromium)")
if not CONSOLE.exists():
    _MISSING.append(f"the console is not built ({CONSOLE} is missing): make web")
if _MISSING:
    pytest.fail("; ".join(_MISSING), pytrace=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("console-server")
    providers = root / "providers.json"
    providers.write_text(json.dumps({"providers": {"openai": {"type": "scripted",
                                                               "replies": REPLIES}}}))  # fmt: skip
    served = Server(root / "data", DHUB_ADMIN_TOKEN=TOKEN, DHUB_PROVIDERS_FILE=str(providers))
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


def agent_named(server: Server, name: str) -> dict[str, Any] | None:
    for agent in api(server, "GET", f"/agents?q={name}")["data"]:
        if agent["name"] == name:
            return dict(agent)
    return None


def snap(page: Page, shots: Path, name: str, *, phone: bool = True) -> None:
    """The page at laptop width and, unless told otherwise, at phone width."""
    page.screenshot(path=shots / f"{name}-1280.png", full_page=True)
    if phone:
        page.set_viewport_size(PHONE)
        page.wait_for_timeout(150)
        page.screenshot(path=shots / f"{name}-390.png", full_page=True)
        page.set_viewport_size(LAPTOP)


def sign_in(page: Page, server: Server) -> None:
    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_test_id("signed-in-as").wait_for()


def expect_visible(locator: Any) -> None:
    playwright_api.expect(locator).to_be_visible(timeout=WAIT)


def test_triage_run_waits_for_the_form_in_tasks_then_turns_green(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    # Applying the example creates it (the server loaded the examples: drop that one first).
    loaded = agent_named(server, "ticket-triage")
    if loaded is not None:
        api(server, "DELETE", f"/agents/{loaded['id']}")

    page.goto(f"{server.url}/")
    snap(page, shots, "01-sign-in")
    page.get_by_label("API token").fill("dhub_not_a_token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("signed-in-as")).to_have_text("Administrator")
    expect(page.get_by_test_id("agent-item").first).to_be_visible()
    snap(page, shots, "02-agents")
    assert page.evaluate("sessionStorage.getItem('dhub.token')") == TOKEN
    assert page.evaluate("localStorage.length") == 0

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Examples").click()
    triage = page.locator("[data-testid=example][data-file='ticket_triage.json']")
    expect(triage).to_be_visible()
    snap(page, shots, "03-examples")
    triage.get_by_role("button", name="Apply ticket-triage").click()
    result = triage.get_by_test_id("apply-result")
    expect(result).to_contain_text("created ticket-triage")
    result.get_by_role("link", name="ticket-triage").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Ticket triage")
    expect(page.get_by_test_id("graph-node-approve")).to_be_visible()
    expect(page.get_by_test_id("versions")).to_contain_text("Version 1")
    snap(page, shots, "04-agent-detail")

    page.get_by_role("link", name="Start a run").click()
    page.get_by_role("button", name="Start run").click()  # the ticket is required
    expect(page.get_by_test_id("field-error-ticket")).to_contain_text("'ticket' is required")
    page.get_by_label(re.compile(r"^ticket")).fill("Total outage since 9am")
    page.get_by_label(re.compile(r"^customer")).fill("acme")
    snap(page, shots, "05-start-run")
    page.get_by_role("button", name="Start run").click()

    # The run waits for a person: the status, the graph and the timeline say so.
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "waiting")
    expect(page.get_by_test_id("graph-node-approve")).to_have_attribute("data-state", "waiting")
    expect(page.get_by_test_id("graph-node-classify")).to_have_attribute("data-state", "succeeded")
    expect(page.get_by_test_id("graph-node-normal_summary")).to_have_attribute(
        "data-state", "skipped"
    )
    expect(page.get_by_test_id("timeline")).to_contain_text("node.waiting")
    run_url = page.url
    run_id = run_url.rsplit("/", 1)[-1]
    snap(page, shots, "06-run-waiting")

    # Answer the form in Tasks.
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_test_id("task-count")).to_have_text("1")
    nav.get_by_role("link", name=re.compile("Tasks")).click()
    task = page.locator(f"[data-testid=task][data-run='{run_id}']")
    expect(task.get_by_test_id("task-prompt")).to_have_text(
        "Escalate ticket from acme: Total outage since 9am?"
    )
    snap(page, shots, "07-tasks")
    task.get_by_role("button", name="Submit").click()  # nothing chosen: escalate is required
    expect(task.get_by_test_id("field-error-escalate")).to_contain_text("required")
    task.get_by_label(re.compile(r"^escalate")).select_option("true")
    task.get_by_label(re.compile(r"^note")).fill("paged by the console test")
    task.get_by_role("button", name="Submit").click()
    expect(page.get_by_test_id("task-message")).to_contain_text("Answered approve")
    expect(page.get_by_test_id("no-tasks")).to_be_visible()

    # Back on the run: every node on the path is green, the outputs are there.
    page.goto(run_url)
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "succeeded")
    for node in ("start", "classify", "is_urgent", "approve", "urgent_summary", "end"):
        expect(page.get_by_test_id(f"graph-node-{node}")).to_have_attribute(
            "data-state", "succeeded"
        )
    outputs = page.get_by_test_id("run-outputs")
    expect(outputs).to_contain_text("URGENT bug from acme; escalate=True")
    expect(outputs).to_contain_text("category")
    expect(page.get_by_test_id("timeline")).to_contain_text("run.succeeded")
    page.get_by_test_id("graph-node-approve").click()
    panel = page.get_by_test_id("node-panel")
    expect(panel.get_by_test_id("node-state")).to_have_text("succeeded")
    expect(panel.get_by_test_id("node-outputs")).to_contain_text("paged by the console test")
    snap(page, shots, "08-run-succeeded")
    # Keyboard: a node is a button that Enter selects.
    page.get_by_test_id("graph-node-classify").focus()
    page.keyboard.press("Enter")
    expect(panel).to_contain_text("classify")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    row = page.locator(f"[data-testid=run-row][data-run='{run_id}']")
    expect(row).to_contain_text("succeeded")
    snap(page, shots, "09-runs")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API token")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('dhub.token')") is None


def test_chat_with_the_support_assistant_approving_its_refund(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    sign_in(page, server)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    page.locator("[data-testid=chat-agent][data-name='support-assistant']").get_by_role(
        "link"
    ).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Chat with Support Assistant")
    page.get_by_label("Message", exact=True).fill("Please refund order A-1001")
    page.keyboard.press("Enter")

    # The tool call shows as it happens; the refund waits for a confirmation, shown inline.
    lookup = page.locator("[data-testid=tool-call][data-name='lookup_order']")
    expect(lookup).to_have_attribute("data-status", "succeeded")
    expect(lookup).to_contain_text("shipped")
    confirm = page.locator("[data-testid=task][data-kind='await_confirmation']")
    expect(confirm).to_contain_text("issue_refund")
    expect(confirm.get_by_test_id("argument-amount")).to_have_value("42")
    expect(page.locator("[data-testid=tool-call][data-name='issue_refund']")).to_have_attribute(
        "data-status", "waiting"
    )
    expect(page.get_by_test_id("chat-variables")).to_contain_text("customer_name")
    snap(page, shots, "10-chat-confirmation")

    confirm.get_by_role("button", name="Approve").click()
    reply = page.locator("[data-testid=message][data-role='assistant']")
    expect(reply).to_have_text(re.compile(r"Done: 42\.0 is refunded to you\."))
    refund = page.locator("[data-testid=tool-call][data-name='issue_refund']")
    expect(refund).to_have_attribute("data-status", "succeeded")
    expect(refund).to_contain_text("approved by user.admin")
    # A configured provider (here a scripted one) is never taken for the demo model.
    expect(page.get_by_test_id("demo-banner")).to_have_count(0)
    expect(page.get_by_test_id("demo-label")).to_have_count(0)
    expect(page.locator("[data-testid=message][data-role='user']")).to_have_text(
        re.compile("Please refund order A-1001")
    )
    snap(page, shots, "11-chat-done")

    # A second turn: this refund is rejected from the Tasks page, with a reason.
    page.get_by_label("Message", exact=True).fill("Also refund order A-1002")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("[data-testid=task][data-kind='await_confirmation']")).to_be_visible()
    chat_url = page.url
    page.get_by_role("navigation", name="Main").get_by_role(
        "link", name=re.compile("Tasks")
    ).click()
    task = page.locator("[data-testid=task][data-kind='await_confirmation']")
    expect(task.get_by_test_id("argument-order_id")).to_have_value("A-1002")
    task.get_by_role("button", name="Reject").click()  # no reason yet: asked for one
    expect(task.get_by_role("alert")).to_contain_text("Say why")
    task.get_by_label("Reason (for a rejection)").fill("A-1002 was never paid")
    snap(page, shots, "12-tasks-confirmation", phone=False)
    task.get_by_role("button", name="Reject").click()
    expect(page.get_by_test_id("task-message")).to_contain_text("Rejected issue_refund")
    page.goto(chat_url)
    replies = page.locator("[data-testid=message][data-role='assistant']")
    expect(replies).to_have_count(2)
    expect(replies.nth(1)).to_have_text(re.compile("I did not refund A-1002."))

    # Turns are runs like any other: the decisions and the deltas are in their event logs.
    conversation = page.url.rsplit("/", 1)[-1]
    messages = api(server, "GET", f"/conversations/{conversation}")["messages"]
    run_id = messages[-1]["run_id"]
    decision = next(e for e in api(server, "GET", f"/runs/{run_id}/events")["data"]
                    if e["type"] == "confirmation.received")  # fmt: skip
    assert decision["data"]["approve"] is False
    assert decision["data"]["reason"] == "A-1002 was never paid"
    first_run = messages[0]["run_id"]
    kinds = [e["type"] for e in api(server, "GET", f"/runs/{first_run}/events")["data"]]
    for kind in ("llm.delta", "tool.called", "node.waiting", "confirmation.received"):
        assert kind in kinds

    # The conversation is listed where chats begin, and opens again from there.
    page.goto(f"{server.url}/#/chat")
    listed = page.get_by_test_id("conversations").get_by_role("link")
    expect(listed).to_have_count(1)
    expect(listed.first).to_contain_text("4 messages")
    listed.first.click()
    expect(page.locator("[data-testid=message][data-role='assistant']")).to_have_count(2)


def test_an_invalid_edit_shows_the_error_on_the_offending_field(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    agent = agent_named(server, "batch-scores")
    assert agent is not None
    sign_in(page, server)
    page.goto(f"{server.url}/#/agents/{agent['id']}")
    page.get_by_role("link", name="Edit", exact=True).click()
    editor = page.get_by_label("Agent document (JSON)")
    text = editor.input_value()
    assert "def main(x):" in text
    # `square` (nodes[2]) loses its entry point: no function named main.
    editor.fill(text.replace("def main(x):", "def square_it(x):"))
    page.get_by_role("button", name="Save").click()

    error = page.locator("[data-testid=field-error][data-loc='/nodes/2/config/source']")
    expect(error).to_be_visible()
    expect(error).to_contain_text("main")
    line = int(error.get_attribute("data-line") or 0)
    lines = editor.input_value().split("\n")
    assert '"source": "def square_it(x)' in lines[line - 1]
    assert '"id": "square"' in "\n".join(lines[line - 8 : line])
    expect(page.locator(f"[data-testid=error-line][data-line='{line}']")).to_have_count(1)
    snap(page, shots, "13-editor-error-json")
    # The error's "line" button puts the caret on that line.
    error.get_by_role("button", name=f"line {line}").click()
    caret = editor.evaluate("el => el.value.slice(0, el.selectionStart).split('\\n').length")
    assert caret == line

    # The same in YAML: the error follows the field to its new line.
    page.get_by_text("YAML", exact=True).click()
    yaml_editor = page.get_by_label("Agent document (YAML)")
    page.get_by_role("button", name="Validate").click()
    error = page.locator("[data-testid=field-error][data-loc='/nodes/2/config/source']")
    expect(error).to_be_visible()
    line = int(error.get_attribute("data-line") or 0)
    yaml_lines = yaml_editor.input_value().split("\n")
    assert yaml_lines[line - 1].strip().startswith("source:")
    assert "def square_it(x)" in "\n".join(yaml_lines[line - 1 : line + 2])
    snap(page, shots, "14-editor-error-yaml", phone=False)

    # A field the server owns is refused where it is.
    page.get_by_text("JSON", exact=True).click()
    doc = json.loads(page.get_by_label("Agent document (JSON)").input_value())
    doc["nodes"][2]["config"]["source"] = "def main(x):\n    return {'sq': x * x}\n"
    page.get_by_label("Agent document (JSON)").fill(json.dumps({"version": 7, **doc}, indent=2))
    page.get_by_role("button", name="Save").click()
    error = page.locator("[data-testid=field-error][data-loc='/version']")
    expect(error).to_contain_text("set by the server")
    assert error.get_attribute("data-line") == "2"
    assert api(server, "GET", f"/agents/{agent['id']}")["version"] == 1  # nothing was stored

    # A valid edit stores version 2; editing from version 1 and saving restores it as 3.
    doc["description"] = "Edited in the console."
    page.get_by_label("Agent document (JSON)").fill(json.dumps(doc, indent=2))
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Batch scores")
    expect(page.get_by_text("Edited in the console.", exact=True)).to_be_visible()
    versions = page.get_by_test_id("versions")
    expect(versions.get_by_role("link")).to_have_count(2)
    versions.get_by_role("link", name="Version 1").click()
    page.get_by_role("link", name="Edit from this version").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Edit Batch scores from version 1")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("versions").get_by_role("link")).to_have_count(3)
    restored = api(server, "GET", f"/agents/{agent['id']}")
    assert restored["version"] == 3
    assert restored["description"] == agent["description"]


def test_agents_filters_and_sharing(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    agent = agent_named(server, "incident-summarizer")
    assert agent is not None
    sign_in(page, server)
    page.get_by_label("Search").fill("incident")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.get_by_test_id("agent-item")).to_have_count(1)
    page.get_by_role("button", name="Clear").click()
    page.get_by_label("Mode").select_option("react")
    # the react examples (support-assistant, sales-analyst) and built-in (table-analyst)
    expect(page.get_by_test_id("agent-item")).to_have_count(3)
    react_items = page.locator("[data-testid=agent-item][data-name='support-assistant']")
    expect(react_items).to_have_count(1)

    page.goto(f"{server.url}/#/agents/{agent['id']}/sharing")
    expect(page.get_by_test_id("owners")).to_contain_text("user.admin")
    page.get_by_label("Share with").fill("public.all")
    page.get_by_label("Scope", exact=True).select_option("runner")
    page.get_by_role("button", name="Grant", exact=True).click()
    expect(page.get_by_test_id("grants")).to_contain_text("public.all")
    assert api(server, "GET", f"/agents/{agent['id']}/grants")["data"] == [
        {"principal_id": "public.all", "type": "public", "display_name": "All users",
         "scope": "runner"}
    ]  # fmt: skip
    page.get_by_label("Share with").fill("user.nobody")
    page.get_by_role("button", name="Grant", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("No principal 'user.nobody'")
    snap(page, shots, "15-sharing")


def test_cancel_a_waiting_run(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    agent = agent_named(server, "ticket-triage")
    assert agent is not None
    run = api(server, "POST", f"/agents/{agent['id']}/runs", json={"inputs": {"ticket": "down"}})
    sign_in(page, server)
    page.goto(f"{server.url}/#/runs/{run['id']}")
    expect(page.get_by_test_id("graph-node-approve")).to_have_attribute("data-state", "waiting")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "cancelled")
    expect(page.get_by_test_id("timeline")).to_contain_text("run.cancelled")
    expect(page.get_by_test_id("graph-node-approve")).to_have_attribute("data-state", "cancelled")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    snap(page, shots, "16-run-cancelled", phone=False)


@pytest.mark.parametrize(("path", "ready"), [("/docs", ".opblock"), ("/redoc", "[role=menuitem]")])
def test_api_docs_render_with_no_internet(
    server: Server, page: Page, path: str, ready: str
) -> None:
    """Every request off this machine is refused: the API documentation still renders its
    operations."""
    outside: list[str] = []

    def only_here(route: Any) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_here)
    page.goto(f"{server.url}{path}")
    page.locator(ready).first.wait_for()
    assert page.locator(ready).count() > 10
    assert outside == []
