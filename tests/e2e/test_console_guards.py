"""The console's guard rails and read-outs (issue 17), each in the browser against a real
`dhub serve` with the examples loaded:

- the actions an agent page offers follow the caller's scope, which the page names;
- leaving the editor with unsaved changes asks first; a save says which version it stored;
- a task answered in Tasks links back to its run; a failed run shows why in the runs list;
- a node's panel shows what it started with (its evaluated inputs); error handlers are
  coloured by how their handling went; counts are worded right ("1 message");
- at 390 px the graph fits its box (or scrolls inside it): the page never scrolls sideways.

Screenshots at 1280 and 390 px, as in test_console.py.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import PHONE, Page
from tests.e2e.test_console import TOKEN, agent_named, api, sign_in, snap
from tests.e2e.test_serve import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("console-guards") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield served
    finally:
        served.stop()


def sign_in_as(page: Page, server: Server, token: str) -> None:
    page.goto(f"{server.url}/")
    page.evaluate("sessionStorage.clear()")  # whoever was signed in, signed out
    page.reload()
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_test_id("signed-in-as").wait_for()


def user_with_token(server: Server, name: str) -> tuple[str, str]:
    user = api(server, "POST", "/users", json={"name": name, "display_name": name.title()})
    token = api(server, "POST", f"/users/{user['id']}/tokens", json={"name": "console"})
    return str(user["id"]), str(token["token"])


def wait_for_run(server: Server, run_id: str, *statuses: str) -> dict[str, Any]:
    for _ in range(600):
        run: dict[str, Any] = api(server, "GET", f"/runs/{run_id}")
        if run["status"] in statuses:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} stayed {run['status']}")


def example(server: Server, file: str) -> dict[str, Any]:
    """The example's document, as the server offers it (GET /api/v1/examples)."""
    found = next(e for e in api(server, "GET", "/examples")["data"] if e["file"] == file)
    return copy.deepcopy(found["document"])


def start(server: Server, agent_id: str, inputs: dict[str, Any]) -> str:
    run = api(server, "POST", f"/agents/{agent_id}/runs", json={"inputs": inputs})
    return str(run["id"])


def offered(page: Page, action: str) -> Any:
    """The page's link or button named ``action``."""
    main = page.get_by_role("main")
    return main.get_by_role("link", name=action, exact=True).or_(
        main.get_by_role("button", name=action, exact=True)
    )


def without_fallback(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """batch-scores with no fallback path: ``note_failure`` and its edges go."""
    doc["name"] = name
    doc["nodes"] = [n for n in doc["nodes"] if n["id"] != "note_failure"]
    doc["edges"] = [e for e in doc["edges"] if "note_failure" not in (e["source"], e["target"])]
    return doc


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide at {PHONE['width']} px"


def test_actions_follow_the_callers_scope_which_the_page_names(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    triage = agent_named(server, "ticket-triage")
    assert triage is not None
    runner, runner_token = user_with_token(server, "rita")
    viewer, viewer_token = user_with_token(server, "vic")
    for who, scope in ((runner, "runner"), (viewer, "viewer")):
        api(server, "POST", f"/agents/{triage['id']}/grants",
            json={"principal_id": who, "scope": scope})  # fmt: skip
    actions = ("Start a run", "Edit", "Delete")

    sign_in(page, server)  # the owner: everything
    page.goto(f"{server.url}/#/agents/{triage['id']}")
    expect(page.get_by_test_id("my-scope")).to_have_attribute("data-scope", "owner")
    for action in actions:
        expect(offered(page, action)).to_have_count(1)

    sign_in_as(page, server, runner_token)
    page.goto(f"{server.url}/#/agents/{triage['id']}")
    scope = page.get_by_test_id("my-scope")
    expect(scope).to_have_attribute("data-scope", "runner")
    expect(scope).to_contain_text("runner (a grant): you may read and run it, not edit it")
    main = page.get_by_role("main")
    expect(main.get_by_role("link", name="Start a run")).to_be_visible()
    expect(main.get_by_role("link", name="Edit", exact=True)).to_have_count(0)
    expect(main.get_by_role("button", name="Delete")).to_have_count(0)
    snap(page, shots, "guards-01-runner")
    # Typed in, the editor says saving would be refused and offers no Save.
    page.goto(f"{server.url}/#/agents/{triage['id']}/edit")
    expect(page.get_by_test_id("scope-notice")).to_contain_text("saving will be refused")
    expect(page.get_by_role("button", name="Save")).to_be_disabled()

    sign_in_as(page, server, viewer_token)
    page.goto(f"{server.url}/#/agents/{triage['id']}")
    expect(page.get_by_test_id("my-scope")).to_contain_text("viewer (a grant): you may read it")
    main = page.get_by_role("main")
    expect(main.get_by_test_id("graph")).to_be_visible()
    for action in actions:
        expect(offered(page, action)).to_have_count(0)
    snap(page, shots, "guards-02-viewer")
    page.goto(f"{server.url}/#/agents/{triage['id']}/run")
    expect(page.get_by_test_id("scope-notice")).to_contain_text("starting a run will be refused")
    expect(page.get_by_role("button", name="Start run")).to_be_disabled()


def test_unsaved_edits_ask_before_leaving_and_saves_say_their_version(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    doc = example(server, "incident_summarizer.json")
    doc["name"] = "edited-in-the-console"
    agent = api(server, "POST", "/agents", json=doc)
    asked: list[str] = []

    def answer(no: bool) -> None:
        page.once("dialog", lambda d: (asked.append(d.message), d.dismiss() if no else d.accept()))

    sign_in(page, server)
    page.goto(f"{server.url}/#/agents/{agent['id']}")
    page.get_by_role("link", name="Edit", exact=True).click()
    editor = page.get_by_label("Agent document (JSON)")
    expect(editor).to_contain_text('"name": "edited-in-the-console"')
    # Switching to YAML and back changes nothing: leaving asks nothing.
    page.get_by_text("YAML", exact=True).click()
    page.get_by_text("JSON", exact=True).click()
    expect(page.get_by_test_id("unsaved")).to_have_count(0)

    edited = editor.input_value().replace(doc["description"], "Changed, not saved yet.")
    editor.fill(edited)
    expect(page.get_by_test_id("unsaved")).to_have_text("Unsaved changes.")
    # A link: asked, and "no" stays with the text as it was.
    answer(no=True)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    assert asked == ["Leave the editor? Your changes to this document are not saved."]
    expect(page).to_have_url(re.compile(r"/edit$"))
    assert page.get_by_label("Agent document (JSON)").input_value() == edited
    snap(page, shots, "guards-03-unsaved", phone=False)
    # Back: asked again; "no" stays too.
    answer(no=True)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/edit$"))
    assert len(asked) == 2
    assert page.get_by_label("Agent document (JSON)").input_value() == edited

    # Saving says which version it stored, and leaves without asking.
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("saved-notice")).to_have_text("Saved, version 2.")
    expect(page.get_by_text("Changed, not saved yet.", exact=True)).to_be_visible()
    assert len(asked) == 2
    snap(page, shots, "guards-04-saved")
    # A save that changes nothing says so, with the version it stays at.
    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("editor-status")).to_have_text("Nothing changed: still version 2.")
    # Leaving with changes and saying yes goes.
    page.get_by_label("Agent document (JSON)").fill(edited.replace("Changed", "Dropped"))
    answer(no=False)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    assert len(asked) == 3
    assert api(server, "GET", f"/agents/{agent['id']}")["version"] == 2


def test_an_answered_task_links_back_to_its_run(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    triage = agent_named(server, "ticket-triage")
    assert triage is not None
    run_id = start(server, triage["id"], {"ticket": "Total outage", "customer": "acme"})
    wait_for_run(server, run_id, "waiting")
    sign_in(page, server)
    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_role("link", name=re.compile("Tasks")).click()
    task = page.locator(f"[data-testid=task][data-run='{run_id}']")
    task.get_by_label(re.compile(r"^escalate")).select_option("true")
    task.get_by_role("button", name="Submit").click()
    message = page.get_by_test_id("task-message")
    expect(message).to_contain_text("Answered approve")
    snap(page, shots, "guards-05-task-answered")
    message.get_by_role("link", name=re.compile("Follow its run")).click()
    expect(page).to_have_url(re.compile(f"#/runs/{run_id}$"))
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "succeeded")


def test_a_failed_run_shows_why_in_the_runs_list(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    doc = without_fallback(example(server, "batch_scores.json"), "fails-loudly")
    doc["nodes"] = [n for n in doc["nodes"] if n["id"] != "guard"]  # flaky's failure goes up
    agent = api(server, "POST", "/agents", json=doc)
    run_id = start(server, agent["id"], {"numbers": [1, 2]})
    wait_for_run(server, run_id, "failed")
    sign_in(page, server)
    page.goto(f"{server.url}/#/runs?agent_id={agent['id']}")
    row = page.locator(f"[data-testid=run-row][data-run='{run_id}']")
    expect(row.get_by_test_id("run-status")).to_have_text("failed")
    expect(row.get_by_test_id("run-reason")).to_contain_text("flaky: ")
    expect(row.get_by_test_id("run-reason")).to_contain_text("upstream unavailable")
    snap(page, shots, "guards-06-failed-run")
    page.goto(f"{server.url}/#/agents/{agent['id']}")  # its recent runs say it too
    expect(page.get_by_test_id("run-reason").first).to_contain_text("upstream unavailable")


def test_node_inputs_handler_states_and_counts_on_the_run_page(
    server: Server, page: Page, shots: Path
) -> None:
    expect = playwright_api.expect
    scores = agent_named(server, "batch-scores")
    assert scores is not None
    run_id = start(server, scores["id"], {"numbers": [1, 2, 3]})
    wait_for_run(server, run_id, "succeeded")
    gave_up = without_fallback(example(server, "batch_scores.json"), "gives-up")
    guard = next(n for n in gave_up["nodes"] if n["id"] == "guard")
    guard["config"].update(on_error="fail", retry_count=1)
    del guard["config"]["fallback_node_id"]
    failing = api(server, "POST", "/agents", json=gave_up)
    failed_id = start(server, failing["id"], {"numbers": [4]})
    wait_for_run(server, failed_id, "failed")

    sign_in(page, server)
    page.goto(f"{server.url}/#/runs/{run_id}")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "succeeded")
    # The handler took over with its fallback: coloured as done, flaky as failed.
    expect(page.get_by_test_id("graph-node-guard")).to_have_attribute("data-state", "succeeded")
    expect(page.get_by_test_id("graph-node-flaky")).to_have_attribute("data-state", "failed")
    page.get_by_test_id("graph-node-guard").click()
    panel = page.get_by_test_id("node-panel")
    expect(panel.get_by_test_id("node-outputs")).to_contain_text("fallback")
    expect(panel.get_by_test_id("node-outputs")).to_contain_text("2")  # retries
    # What each node started with: the loop's items, each iteration's argument.
    page.get_by_test_id("graph-node-each").click()
    expect(panel.get_by_test_id("node-inputs")).to_contain_text("[1,2,3]")
    page.get_by_test_id("graph-node-square").click()
    inputs = panel.get_by_test_id("node-inputs")
    expect(inputs).to_contain_text("frame each#2")
    expect(inputs.locator(".node-start")).to_have_count(3)
    expect(inputs.locator(".node-start").last).to_contain_text("3")
    page.get_by_test_id("graph-node-flaky").click()
    expect(panel.get_by_test_id("node-inputs")).to_contain_text("total")
    expect(panel.get_by_test_id("node-inputs")).to_contain_text("14")
    snap(page, shots, "guards-07-node-inputs")
    # Counts are worded by their number ("2 events", and "1 message" below).
    page.get_by_test_id("graph-node-start").click()
    expect(panel.get_by_text(re.compile(r"^Events of this node \(2 events\)$"))).to_be_visible()

    page.goto(f"{server.url}/#/runs/{failed_id}")
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "failed")
    expect(page.get_by_test_id("graph-node-guard")).to_have_attribute("data-state", "failed")
    page.get_by_test_id("graph-node-guard").click()
    expect(page.get_by_test_id("node-panel").get_by_test_id("node-outputs")).to_contain_text(
        "gave up"
    )
    snap(page, shots, "guards-08-handler-gave-up")


def test_a_waiting_chat_is_listed_as_1_message(server: Server, page: Page) -> None:
    expect = playwright_api.expect
    support = agent_named(server, "support-assistant")
    assert support is not None
    chat = api(server, "POST", f"/agents/{support['id']}/conversations")
    run = api(server, "POST", f"/conversations/{chat['id']}/messages",
              json={"content": "Please refund order A-1001"})  # fmt: skip
    wait_for_run(server, run["id"], "waiting")  # the refund waits: only the user's message
    sign_in(page, server)
    page.goto(f"{server.url}/#/chat")
    listed = page.get_by_test_id("conversations").get_by_role("link")
    expect(listed.first).to_contain_text("Support Assistant: 1 message")
    expect(listed.first).not_to_contain_text("1 messages")


def test_the_graph_fits_a_phone_screen(server: Server, page: Page, shots: Path) -> None:
    expect = playwright_api.expect
    scores = agent_named(server, "batch-scores")
    assert scores is not None
    sign_in(page, server)
    page.set_viewport_size(PHONE)
    page.goto(f"{server.url}/#/agents/{scores['id']}")
    graph = page.get_by_test_id("graph")
    expect(graph).to_have_attribute("data-fit", "width")
    box = graph.bounding_box()
    svg = graph.locator("svg").bounding_box()
    assert box is not None and svg is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert svg["width"] <= box["width"]  # the whole graph is in view, scaled to the box
    no_sideways_scroll(page)
    page.screenshot(path=shots / "guards-09-graph-fit-390.png", full_page=True)
    # At its own size it scrolls inside its box, not the page.
    page.get_by_test_id("graph-zoom").click()
    expect(graph).to_have_attribute("data-fit", "actual")
    assert graph.evaluate("el => el.scrollWidth > el.clientWidth")
    no_sideways_scroll(page)
    page.screenshot(path=shots / "guards-10-graph-actual-390.png", full_page=True)
    # A run's page too.
    run_id = start(server, scores["id"], {"numbers": [1]})
    wait_for_run(server, run_id, "succeeded")
    page.goto(f"{server.url}/#/runs/{run_id}")
    expect(page.get_by_test_id("graph-node-end")).to_have_attribute("data-state", "succeeded")
    no_sideways_scroll(page)
    page.screenshot(path=shots / "guards-11-run-390.png", full_page=True)


def test_a_builtin_agent_offers_copy_instead_of_edit_and_delete(
    server: Server, page: Page, shots: Path
) -> None:
    """A new user meets the built-ins in the list, runs one, and changes it by copying it:
    the copy is theirs to edit and delete. The admin is offered no more on a built-in."""
    expect = playwright_api.expect
    _, token = user_with_token(server, "newton")
    sign_in_as(page, server, token)
    items = page.get_by_test_id("agent-item")
    expect(items).to_have_count(4)  # a brand-new user: the built-ins, nothing else
    expect(items.filter(has_text="built-in")).to_have_count(4)
    page.get_by_role("link", name="Summarizer", exact=True).click()
    expect(page.get_by_test_id("my-scope")).to_have_attribute("data-scope", "builtin")
    expect(page.get_by_test_id("builtin-notice")).to_contain_text("no one may change it")
    expect(offered(page, "Start a run")).to_have_count(1)
    expect(offered(page, "Copy")).to_have_count(1)
    for action in ("Edit", "Delete", "Sharing"):
        expect(offered(page, action)).to_have_count(0)
    snap(page, shots, "guards-06-builtin")

    offered(page, "Copy").click()
    expect(page.get_by_test_id("saved-notice")).to_have_text(
        "Copied summarizer to summarizer-copy: this copy is yours to change."
    )
    expect(page.get_by_test_id("my-scope")).to_have_attribute("data-scope", "owner")
    for action in ("Edit", "Delete", "Sharing", "Copy"):
        expect(offered(page, action)).to_have_count(1)
    expect(page.get_by_test_id("builtin-notice")).to_have_count(0)
    snap(page, shots, "guards-07-copied", phone=False)

    sign_in_as(page, server, TOKEN)  # the admin: a built-in is read-only for admins too
    builtin = api(server, "GET", "/agents/agent.builtin-classifier")
    page.goto(f"{server.url}/#/agents/{builtin['id']}")
    expect(page.get_by_test_id("my-scope")).to_have_attribute("data-scope", "builtin")
    expect(offered(page, "Copy")).to_have_count(1)
    for action in ("Edit", "Delete", "Sharing"):
        expect(offered(page, action)).to_have_count(0)
