"""The console's Ontologies pages in headless Chromium against a real `dhub serve`: the example
ontology (the server loads it, with its data, with the examples) in the list, its object types,
a search by type and text, a filter, and an object's links followed by clicking; a new one from
YAML (the server's error on the YAML's line), objects and links imported from a JSON file, its
document edited (a new version listed), and deleted after a confirmation. Needs what
tests/e2e/test_console.py needs (Debian's chromium, playwright, `make web`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright_api
import pytest

from tests.e2e.browser import CHROMIUM, Page
from tests.e2e.test_serve import ROOT, Server

CONSOLE = ROOT / "src" / "dhub" / "api" / "console" / "index.html"
TOKEN = "dhub_console_ontologies_e2e_token"
PROJECTS = """name: projects
description: Projects and the people on them
object_types:
  - name: person
    primary_key: email
    title_property: name
    properties:
      - {name: email, type: string}
      - {name: name, type: string, required: true}
  - name: project
    primary_key: code
    properties:
      - {name: code, type: string}
      - {name: budget, type: number}
link_types:
  - {name: works_on, from_type: person, to_type: projet, cardinality: many_to_many}
"""
DATA = {
    "objects": [
        {"type": "person", "properties": {"email": "ada@example.com", "name": "Ada"}},
        {"type": "person", "properties": {"email": "alan@example.com", "name": "Alan"}},
        {"type": "project", "properties": {"code": "ENGINE", "budget": 1200.5}},
    ],
    "links": [{"link_type": "works_on", "from": "ada@example.com", "to": "ENGINE"}],
}

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


def test_create_import_and_delete_an_ontology(
    server: Server, page: Page, shots: Path, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Ontologies").click()
    page.get_by_role("link", name="New ontology").click()
    editor = page.get_by_label("Ontology document (YAML or JSON)")
    editor.fill(PROJECTS)
    create = page.get_by_role("button", name="Create")
    create.click()
    # A link to a type that is not there: the server's pointer marks the link type's line.
    expect(page.get_by_test_id("ontology-problem")).to_contain_text("projet")
    expect(page.locator("[data-testid=error-line][data-line='16']")).to_be_visible()
    editor.fill(PROJECTS.replace("projet", "project"))
    create.click()

    expect(page.get_by_test_id("flash")).to_have_text("Created the ontology projects.")
    expect(page.get_by_test_id("object-type")).to_have_count(2)
    expect(page.get_by_test_id("link-types")).to_contain_text("works_on (person → project")
    expect(page.get_by_text("No objects match.")).to_be_visible()

    data = tmp_path / "projects.json"
    data.write_text(json.dumps(DATA))
    page.get_by_label("Objects and links file").set_input_files(data)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_test_id("import-result")).to_have_text(
        "Imported from projects.json: 3 objects created, 1 link created."
    )
    expect(page.get_by_test_id("object-row")).to_have_count(3)
    page.get_by_role("button", name="ada@example.com").click()
    links = page.locator("[data-testid=object-links][data-link=works_on]")
    expect(links).to_contain_text("ENGINE")
    page.screenshot(path=shots / "ontology-new-1280.png", full_page=True)

    # Edit the document: a new optional property is a new version.
    page.get_by_role("link", name="Edit").click()
    editor = page.get_by_label("Ontology document (YAML or JSON)")
    expect(editor).to_contain_text("name: works_on")
    lines = editor.input_value().split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip() == "type: number")
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines[at + 1 : at + 1] = [f"{indent[:-2]}- name: team", f"{indent}type: string"]
    editor.fill("\n".join(lines))
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("flash")).to_have_text("Saved, version 2.")
    expect(page.locator("[data-testid=object-type][data-name=project]")).to_contain_text(
        "team: string"
    )
    versions = page.get_by_test_id("version")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("Version 2")

    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("flash")).to_have_text("Deleted the ontology projects.")
    expect(page.locator("[data-testid=ontology-item][data-name=projects]")).to_have_count(0)
    expect(page.locator("[data-testid=ontology-item][data-name=support-ontology]")).to_be_visible()
