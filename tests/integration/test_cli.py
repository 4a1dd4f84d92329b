"""The ``dhub agents`` commands against a real app (SQLite and PostgreSQL), through CliRunner.

The CLI gets a dhub Client built on the conftest's authenticated TestClient, injected as the
typer context object, so every command goes CLI -> SDK -> HTTP -> API -> store.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from rich.cells import cell_len
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client
from tests.conftest import (
    ADMIN_TOKEN,
    BUILTIN_IDS,
    BUILTIN_NAMES,
    FIXTURES,
    invalid_fixtures,
    load_json,
    valid_fixtures,
)
from tests.integration.test_agents_api import container, home

TRIAGE = FIXTURES / "valid" / "workflow_triage.json"


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    """Run ``dhub <args...>`` with the injected client; returns the CliRunner result."""
    runner = CliRunner()

    def run(*args: str | Path, obj: Client | None = None) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=obj or api)

    return run


def write(path: Path, doc: Any) -> Path:
    if path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    else:
        path.write_text(json.dumps(doc))
    return path


def assert_clean_failure(result: Result) -> None:
    """Failed with a message, not a crash."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("fixture", valid_fixtures(), ids=lambda p: p.stem)
def test_apply_creates_then_updates(dhub: Any, api: Client, tmp_path: Path, fixture: Path) -> None:
    doc = load_json(fixture)
    path = write(tmp_path / "agent.json", doc)

    created = dhub("agents", "apply", "-f", path)
    assert created.exit_code == 0, created.output
    assert created.stdout.startswith(f"created {doc['name']} (agent.")
    assert created.stdout.rstrip().endswith("version 1)")

    doc["description"] = "Edited by the CLI test."
    updated = dhub("agents", "apply", "-f", write(path, doc))
    assert updated.exit_code == 0, updated.output
    assert updated.stdout.startswith(f"updated {doc['name']} (agent.")
    assert "version 2)" in updated.stdout

    [stored] = api.iter_agents(q=doc["name"])
    assert stored["description"] == "Edited by the CLI test."
    assert stored["version"] == 2


def test_apply_of_an_unchanged_document_makes_no_version(dhub: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "agent.json", load_json(TRIAGE))
    assert dhub("agents", "apply", "-f", path).exit_code == 0
    again = dhub("agents", "apply", "-f", path)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("unchanged ticket-triage")
    assert "version 1)" in again.stdout


def test_apply_makes_the_agent_equal_the_document(dhub: Any, api: Client, tmp_path: Path) -> None:
    doc = load_json(TRIAGE) | {"options": {"keep": 1, "drop": 2}, "alias": "Old alias"}
    assert dhub("agents", "apply", "-f", write(tmp_path / "a.json", doc)).exit_code == 0

    # Fields left out (at the top level and inside objects) go back to their defaults.
    del doc["alias"], doc["tags"]
    doc["options"] = {"keep": 1}
    result = dhub("agents", "apply", "-f", write(tmp_path / "a.json", doc))
    assert result.exit_code == 0, result.output
    [stored] = api.iter_agents(q="ticket-triage")
    assert stored["alias"] is None
    assert stored["tags"] is None
    assert stored["options"] == {"keep": 1}


def test_apply_accepts_get_output(dhub: Any, tmp_path: Path) -> None:
    created = dhub("agents", "apply", "-f", TRIAGE)
    agent_id = created.stdout.split("(")[1].split(",")[0]
    fetched = json.loads(dhub("agents", "get", agent_id, "--json").stdout)

    # The envelope (id, version, owners, unchanged markings...) is dropped by apply.
    assert fetched["markings"] == []
    fetched["description"] = "Round-tripped through get."
    result = dhub("agents", "apply", "-f", write(tmp_path / "got.json", fetched))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"updated ticket-triage ({agent_id}, version 2)")


def test_apply_matches_by_name_within_the_folder(
    dhub: Any, api: Client, client: TestClient, tmp_path: Path
) -> None:
    doc = load_json(TRIAGE)
    f1 = container(client, "folders", "f1")
    top = dhub("agents", "apply", "-f", write(tmp_path / "top.json", doc))
    in_folder = dhub("agents", "apply", "-f", write(tmp_path / "f.json", doc | {"folder_id": f1}))
    assert top.stdout.startswith("created")
    assert in_folder.stdout.startswith("created")

    changed = doc | {"folder_id": f1, "description": "Only the one in f1."}
    result = dhub("agents", "apply", "-f", write(tmp_path / "f.json", changed))
    assert result.stdout.startswith("updated")
    again = dhub("agents", "apply", "-f", write(tmp_path / "top.json", doc))
    assert again.stdout.startswith("unchanged"), again.output  # the one in the home folder
    found = api.find_agent_by_name("ticket-triage")  # where a document without folder_id goes
    assert found is not None
    assert found["folder_id"] == home(client)  # the one applied without a folder
    assert found["description"] == doc["description"]


def test_apply_reads_yaml(dhub: Any, api: Client, tmp_path: Path) -> None:
    doc = load_json(FIXTURES / "valid" / "react_support.json")
    doc["tags"] = ["2024-05-01"]  # a date-like string must stay a string
    result = dhub("agents", "apply", "-f", write(tmp_path / "agent.yaml", doc))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("created support-assistant")
    assert api.find_agent_by_name("support-assistant") is not None
    listed = json.loads(dhub("agents", "list", "--json", "--tag", "2024-05-01").stdout)
    assert [a["name"] for a in listed] == ["support-assistant"]


def test_apply_of_an_invalid_document_prints_each_error(dhub: Any, tmp_path: Path) -> None:
    case = load_json(FIXTURES / "invalid" / "dangling_edge.json")
    result = dhub("agents", "apply", "-f", write(tmp_path / "bad.json", case["document"]))
    assert_clean_failure(result)
    assert "(HTTP 422)" in result.stderr
    assert f"  {case['expected_error_loc']}: " in result.stderr


def test_apply_sends_markings_for_the_server_to_refuse(dhub: Any, tmp_path: Path) -> None:
    case = load_json(FIXTURES / "invalid" / "markings_in_create.json")
    result = dhub("agents", "apply", "-f", write(tmp_path / "marked.yaml", case["document"]))
    assert_clean_failure(result)
    assert "  /markings: " in result.stderr


def test_list_shows_agents_as_a_table_or_json(dhub: Any, tmp_path: Path) -> None:
    for fixture in valid_fixtures():
        assert dhub("agents", "apply", "-f", fixture).exit_code == 0

    table = dhub("agents", "list")
    assert table.exit_code == 0, table.output
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["ID", "NAME", "MODE", "INPUT", "VERSION", "TAGS", "FOLDER"]
    names = {row.split()[1] for row in rows}
    assert names == {load_json(f)["name"] for f in valid_fixtures()} | BUILTIN_NAMES
    # The built-ins sit in no folder, apart from the top level: the table says so.
    assert {row.split()[-1] for row in rows if row.split()[0] in BUILTIN_IDS} == {"(built-in)"}
    mine = dhub("agents", "list", "--no-builtin").stdout.splitlines()[1:]
    assert {row.split()[1] for row in mine} == {load_json(f)["name"] for f in valid_fixtures()}
    shipped = json.loads(dhub("agents", "list", "--builtin", "--json").stdout)
    assert [a["id"] for a in shipped] == BUILTIN_IDS

    react = json.loads(dhub("agents", "list", "--json", "--mode", "react").stdout)
    assert {a["mode"] for a in react} == {"react"}
    assert all(a["id"].startswith("agent.") for a in react)

    limited = json.loads(dhub("agents", "list", "--json", "--limit", "2").stdout)
    assert len(limited) == 2


def test_table_columns_line_up_with_wide_names(dhub: Any, api: Client) -> None:
    api.create_agent(load_json(TRIAGE) | {"name": "티켓-분류"})  # two terminal cells a letter
    api.create_agent(load_json(TRIAGE))
    header, *rows = dhub("agents", "list").stdout.splitlines()
    start = cell_len(header[: header.index("MODE")])
    assert len(rows) == 2 + len(BUILTIN_IDS)
    modes = [re.search(r" (workflow|react) ", row) for row in rows]
    assert all(modes)
    assert {cell_len(row[: m.start() + 1]) for row, m in zip(rows, modes, strict=True) if m} == {
        start
    }


def test_list_with_no_match(dhub: Any) -> None:
    result = dhub("agents", "list", "--q", "no-such-agent")
    assert result.exit_code == 0
    assert result.stdout.strip() == "No agents found."


def test_iter_agents_follows_cursors(api: Client) -> None:
    doc = load_json(TRIAGE)
    ids = [api.create_agent(doc | {"name": f"triage-{i}"})["id"] for i in range(5)]
    assert [a["id"] for a in api.iter_agents(page_size=2)] == ids + BUILTIN_IDS
    assert [a["id"] for a in api.iter_agents(page_size=2, is_builtin=False)] == ids
    first = api.list_agents(limit=2)
    assert len(first.data) == 2
    assert first.next_cursor is not None


def test_get_prints_the_agent_and_its_versions(dhub: Any, api: Client, tmp_path: Path) -> None:
    doc = load_json(TRIAGE)
    agent_id = api.apply_agent(doc).agent["id"]
    api.apply_agent(doc | {"description": "Second."})

    current = dhub("agents", "get", agent_id, "--json")
    assert current.exit_code == 0, current.output
    assert json.loads(current.stdout) == api.get_agent(agent_id)

    shown = dhub("agents", "get", "ticket-triage")  # for people: one field a line
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["id:", agent_id]
    assert lines[1].split() == ["name:", "ticket-triage"]
    assert any(line.split()[:3] == ["version:", "2", "(updated"] for line in lines)
    assert any(line.startswith("nodes:") and "classify (code)" in line for line in lines)

    first = json.loads(dhub("agents", "get", agent_id, "--version", "1", "--json").stdout)
    assert first["version"] == 1
    assert first["description"] == doc["description"]

    versions = dhub("agents", "versions", agent_id)  # newest first, as the API lists them
    assert [line.split()[0] for line in versions.stdout.splitlines()] == ["VERSION", "2", "1"]


def test_delete_removes_the_agent(dhub: Any, api: Client) -> None:
    agent_id = api.create_agent(load_json(TRIAGE))["id"]
    deleted = dhub("agents", "delete", agent_id)
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout.strip() == f"deleted ticket-triage ({agent_id})"

    gone = dhub("agents", "get", agent_id)
    assert_clean_failure(gone)
    assert gone.stderr.startswith(f"Error: No agent with id '{agent_id}'. (HTTP 404)")
    assert gone.stdout == ""


def test_missing_version_is_a_clear_error(dhub: Any, api: Client) -> None:
    agent_id = api.create_agent(load_json(TRIAGE))["id"]
    result = dhub("agents", "get", agent_id, "--version", "7")
    assert_clean_failure(result)
    assert "has no version 7" in result.stderr


@pytest.mark.parametrize("fixture", invalid_fixtures(), ids=lambda p: p.stem)
def test_validate_reports_errors(dhub: Any, tmp_path: Path, fixture: Path) -> None:
    case = load_json(fixture)
    result = dhub("agents", "validate", "-f", write(tmp_path / "doc.json", case["document"]))
    assert result.exit_code == 1, result.output
    locs = [line.split(": ", 1)[0] for line in result.stdout.splitlines()]
    assert case["expected_error_loc"] in locs


def test_validate_accepts_a_valid_document(dhub: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "ok.yml", load_json(TRIAGE))
    result = dhub("agents", "validate", "-f", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{path}: valid"


def test_unreadable_documents_are_usage_errors(dhub: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    result = dhub("agents", "apply", "-f", broken)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {broken} is not valid JSON or YAML")

    listed = write(tmp_path / "list.json", [1, 2])
    result = dhub("agents", "validate", "-f", listed)
    assert result.exit_code == 2
    assert "must hold one object (an agent document), not a list" in result.stderr

    result = dhub("agents", "apply", "-f", tmp_path / "missing.json")
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_a_bad_token_is_a_clear_error(dhub: Any, client: TestClient) -> None:
    wrong = Client(str(client.base_url), "not-a-token", http=client)
    result = dhub("agents", "list", obj=wrong)
    assert_clean_failure(result)
    assert "(HTTP 401)" in result.stderr
    assert "DHUB_TOKEN" in result.stderr


def test_serve_is_still_a_command(dhub: Any) -> None:
    result = dhub("serve", "--help")
    assert result.exit_code == 0
    assert "--data-dir" in result.stdout
