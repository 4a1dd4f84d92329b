"""``--json`` on every command: each one, run against a real app (SQLite and PostgreSQL)
with ``--json``, prints JSON on stdout (the API's objects), and the walk covers every command
of the typer app, so a new command without ``--json`` fails here."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, ROOT
from tests.integration.test_conversations_api import ECHO
from tests.integration.test_runs_api import REFUND
from tests.support.cli import commands
from tests.support.mcp_servers import http_server

TRIAGE = FIXTURES / "valid" / "workflow_triage.json"
URGENT = ("--input", "ticket=Total outage since 9am", "--input", "customer=acme")
# Long-running processes with logs, not answers: nothing for a script to parse.
WITHOUT_JSON = {"serve", "worker"}
GREETING = {  # runs here, with `dhub run`, needing neither a model nor the sandbox
    "name": "greeting", "description": "", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "who", "type": "string"}]}},
        {"id": "say", "type": "template", "config": {"template": "hello {{ who }}"}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "text", "type": "string", "value": "{{ text }}"}]}},
    ],
    "edges": [{"source": "start", "target": "say"}, {"source": "say", "target": "end"}],
}  # fmt: skip


def test_every_command_has_a_json_option() -> None:
    lacking = [path for path, command in commands()
               if path not in WITHOUT_JSON
               and not any("--json" in p.opts for p in command.params)]  # fmt: skip
    assert lacking == []


class Cli:
    """Runs ``dhub ... --json`` and keeps which commands it ran."""

    def __init__(self, api: Client) -> None:
        self.api = api
        self.runner = CliRunner()
        self.ran: set[str] = set()
        self.paths = {path for path, _ in commands()}

    def __call__(self, *args: str | Path, input: str = "", lines: bool = False) -> Any:
        argv = [str(a) for a in args]
        self.ran.add(next(" ".join(argv[:n]) for n in (2, 1) if " ".join(argv[:n]) in self.paths))
        result: Result = self.runner.invoke(app, [*argv, "--json"], obj=self.api, input=input)
        assert result.exit_code == 0, (argv, result.output)
        if lines:  # one JSON value a line: events, chat turns
            return [json.loads(line) for line in result.stdout.splitlines()]
        return json.loads(result.stdout)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The walk's MCP server is on this machine's loopback: allowed, as an operator would."""
    return dataclasses.replace(settings, mcp_allowed_hosts=("127.0.0.1",))


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


def test_every_command_prints_json(api: Client, tmp_path: Path) -> None:
    cli = Cli(api)
    agents(cli, api, tmp_path)
    identities(cli, api)
    sharing(cli, api)
    places(cli, api)
    tables(cli, api, tmp_path)
    runs(cli, api, tmp_path)
    templates(cli, api, tmp_path)
    ontologies(cli, api, tmp_path)
    secrets(cli, api)
    mcp_servers(cli, api, tmp_path)
    triggers(cli, api, tmp_path)
    removals(cli, api)
    assert cli.ran == cli.paths - WITHOUT_JSON


def agents(cli: Cli, api: Client, tmp_path: Path) -> None:
    applied = cli("agents", "apply", "-f", TRIAGE)
    assert applied["action"] == "created"
    assert applied["agent"] == api.get_agent(applied["agent"]["id"])
    assert cli("agents", "validate", "-f", TRIAGE) == {"valid": True, "errors": []}
    assert cli("agents", "list") == list(api.iter_agents())
    assert cli("agents", "get", "ticket-triage") == applied["agent"]
    exported = cli("agents", "export", "ticket-triage")
    assert exported == api.export_agent("ticket-triage") and "id" not in exported
    written = cli("agents", "export", "ticket-triage", "-o", tmp_path / "triage.yaml")
    assert (written["file"], written["format"]) == (str(tmp_path / "triage.yaml"), "yaml")
    [version] = cli("agents", "versions", "ticket-triage")
    assert version["version"] == 1 and version["created_by"] == "user.admin"
    copied = cli("agents", "copy", "ticket-triage", "--name", "triage-2")
    assert copied == api.get_agent("triage-2") and copied["is_builtin"] is False


def ontologies(cli: Cli, api: Client, tmp_path: Path) -> None:
    made = cli(
        "ontologies", "create", "-f", ROOT / "examples" / "knowledge" / "support_ontology.json"
    )
    ontology_id = made["ontology"]["id"]
    assert made["imported"]["objects"] == {"created": 34, "updated": 0}
    assert cli("ontologies", "list") == list(api.iter_ontologies())
    assert cli("ontologies", "get", "support-ontology") == api.get_ontology(ontology_id)
    us = {"property": "country", "op": "eq", "value": "US"}
    page = cli(
        "ontologies",
        "objects",
        "support-ontology",
        "--type",
        "customer",
        "--filter",
        "country:eq:US",
        "--limit",
        "2",
    )
    expected = api.search_objects(ontology_id, type="customer", filters=[us], limit=2)
    assert page == {"data": expected.data, "next_cursor": expected.next_cursor}
    assert len(page["data"]) == 2 and page["next_cursor"]
    assert cli("ontologies", "object", ontology_id, "customer", "C-001")["title"] == "Ada Lovelace"
    followed = cli("ontologies", "links", ontology_id, "order", "A-1001", "placed_by")
    assert [o["key"] for o in followed["data"]] == ["C-001"]
    more = tmp_path / "more.jsonl"
    more.write_text(
        '{"type": "customer", "properties": {"customer_id": "C-100", "name": "X"}}\n'
        '{"link_type": "placed", "from": "C-100", "to": "A-1001"}\n'
    )
    refused = CliRunner().invoke(
        app, ["ontologies", "import", ontology_id, "-f", str(more)], obj=api
    )
    assert (
        refused.exit_code == 1 and "/1/from" in refused.output and "one_to_many" in (refused.output)
    )
    more.write_text('{"type": "customer", "properties": {"customer_id": "C-100", "name": "X"}}\n')
    assert cli("ontologies", "import", ontology_id, "-f", more) == {
        "objects": {"created": 1, "updated": 0},
        "links": {"created": 0, "existing": 0},
    }
    people = tmp_path / "people.csv"
    people.write_text("code,name,country\nC-100,Y,FR\nC-101,Z,\n")
    cli("tables", "import", people)
    imported = cli(
        "ontologies",
        "import-table",
        "support-ontology",
        "people",
        "--type",
        "customer",
        "--map",
        "customer_id=code",
    )
    assert imported == {
        "objects": {"created": 1, "updated": 1},
        "links": {"created": 0, "existing": 0},
    }
    assert api.get_object(ontology_id, "customer", "C-101")["properties"] == {
        "customer_id": "C-101",
        "name": "Z",
    }
    api.delete_table("people")
    made_object = cli("ontologies", "create-object", "support-ontology", "order",
                      "order_id=A-2000", "status=open")  # fmt: skip
    assert made_object == api.get_object(ontology_id, "order", "A-2000")
    changed = cli("ontologies", "update-object", ontology_id, "order", "A-2000", "total=5")
    assert changed == api.get_object(ontology_id, "order", "A-2000")
    assert changed["properties"]["total"] == 5
    linked = cli("ontologies", "link", "support-ontology", "placed", "C-001", "A-2000")
    assert linked == {"link_type": "placed", "from": "C-001", "to": "A-2000"}
    assert cli("ontologies", "unlink", "support-ontology", "placed", "C-001", "A-2000") == {
        "ontology_id": ontology_id, "link_type": "placed", "from": "C-001", "to": "A-2000",
        "unlinked": True}  # fmt: skip
    gone = cli("ontologies", "delete-object", ontology_id, "order", "A-2000")
    assert gone == {"ontology_id": ontology_id, "type": "order", "key": "A-2000", "deleted": True}
    patch = tmp_path / "ontology.yaml"
    patch.write_text("description: Version two\n")
    updated = cli("ontologies", "update", "support-ontology", "-f", patch)
    assert updated == api.get_ontology(ontology_id) and updated["version"] == 2
    assert [v["version"] for v in cli("ontologies", "versions", "support-ontology")] == [2, 1]
    first = cli("ontologies", "versions", ontology_id, "1")
    assert first == api.resource_version(ontology_id, 1)
    sharing_of(cli, "ontologies", "support-ontology")
    assert cli("ontologies", "delete", "support-ontology") == {"id": ontology_id, "deleted": True}


def sharing_of(cli: Cli, noun: str, ref: str) -> None:
    """share, grants, unshare, owners, mark, unmark for a resource of a kind."""
    granted = cli(noun, "share", ref, "group.eng", "--scope", "viewer")
    assert (granted["principal_id"], granted["scope"]) == ("group.eng", "viewer")
    assert [g["principal_id"] for g in cli(noun, "grants", ref)] == ["group.eng"]
    assert cli(noun, "unshare", ref, "group.eng")["unshared"] is True
    assert [o["id"] for o in cli(noun, "owners", ref, "user.admin")["owners"]] == ["user.admin"]
    assert cli(noun, "mark", ref, "marking.pii")["markings"] == ["marking.pii"]
    assert cli(noun, "unmark", ref, "marking.pii")["markings"] == []


def identities(cli: Cli, api: Client) -> None:
    assert cli("users", "create", "alice") == api.get_user("user.alice")
    assert cli("users", "list") == api.list_users()
    assert cli("users", "get", "user.alice")["id"] == "user.alice"
    issued = cli("users", "token", "user.alice", "--name", "laptop")
    assert issued["user_id"] == "user.alice" and issued["token"]
    assert cli("groups", "create", "eng")["id"] == "group.eng"
    assert cli("groups", "add-member", "group.eng", "user.alice")["members"] == ["user.alice"]
    assert cli("groups", "get", "group.eng") == api.get_group("group.eng")
    assert cli("groups", "list") == api.list_groups()
    assert cli("markings", "create", "pii")["id"] == "marking.pii"
    assert "user.admin" in cli("markings", "add-member", "marking.pii", "user.admin")["members"]
    assert cli("markings", "get", "marking.pii") == api.get_marking("marking.pii")
    assert cli("markings", "list") == api.list_markings()
    mine = cli("tokens", "create", "--name", "ci")
    assert [t["id"] for t in cli("tokens", "list")] == [t["id"] for t in api.list_tokens()]
    assert cli("tokens", "revoke", mine["id"]) == {"id": mine["id"], "revoked": True}
    assert cli("me")["id"] == "user.admin"
    assert cli("audit", "--limit", "3") == list(api.iter_audit())[:3]
    assert cli("usage") == api.usage()


def sharing(cli: Cli, api: Client) -> None:
    agent_id = api.get_agent("ticket-triage")["id"]
    granted = cli("agents", "share", "ticket-triage", "group.eng", "--scope", "runner")
    assert (granted["principal_id"], granted["scope"]) == ("group.eng", "runner")
    assert cli("agents", "grants", "ticket-triage") == api.list_grants(agent_id)
    assert cli("agents", "unshare", "ticket-triage", "group.eng") == {
        "agent_id": agent_id, "principal_id": "group.eng", "unshared": True}  # fmt: skip
    owned = cli("agents", "owners", "ticket-triage", "user.admin")
    assert owned == api.get_agent(agent_id)
    assert cli("agents", "mark", "ticket-triage", "marking.pii")["markings"] == ["marking.pii"]
    assert cli("agents", "unmark", "ticket-triage", "marking.pii")["markings"] == []


def places(cli: Cli, api: Client) -> None:
    made = cli("collections", "create", "support")
    assert made == api.get_collection("support")
    assert cli("collections", "list") == list(api.iter_collections())
    assert cli("collections", "get", "support") == made
    assert cli("collections", "rename", "support", "help")["name"] == "help"
    reports = cli("folders", "create", "reports", "--collection", "help")
    assert reports == api.get_folder(reports["id"])
    assert cli("folders", "list") == list(api.iter_folders())
    assert cli("folders", "get", "reports") == reports
    assert cli("folders", "home") == api.home_folder()
    weekly = cli("folders", "create", "weekly")
    assert cli("folders", "rename", "weekly", "daily")["name"] == "daily"
    assert cli("folders", "move", "daily", "--to", "reports")["folder_id"] == reports["id"]
    moved = cli("agents", "move", "ticket-triage", "--to", "daily")
    assert moved == api.get_agent("ticket-triage") and moved["folder_id"] == weekly["id"]
    assert [c["id"] for c in cli("folders", "children", "reports")] == [weekly["id"]]
    assert [c["id"] for c in cli("collections", "children", "help")] == [reports["id"]]
    [home_tree, help_tree] = cli("folders", "tree")
    assert help_tree == cli("collections", "tree", "help") and home_tree["type"] == "home"
    assert cli("folders", "tree", "daily")["children"][0]["id"] == moved["id"]
    for noun, ref in (("folders", "daily"), ("collections", "help")):
        granted = cli(noun, "share", ref, "group.eng", "--scope", "editor")
        assert (granted["principal_id"], granted["scope"]) == ("group.eng", "editor")
        assert [g["principal_id"] for g in cli(noun, "grants", ref)] == ["group.eng"]
        assert cli(noun, "unshare", ref, "group.eng")["unshared"] is True
        assert [o["id"] for o in cli(noun, "owners", ref, "user.admin")["owners"]] == ["user.admin"]
        assert cli(noun, "mark", ref, "marking.pii")["markings"] == ["marking.pii"]
        assert api.get_agent("ticket-triage")["effective_markings"] == ["marking.pii"]
        assert cli(noun, "unmark", ref, "marking.pii")["markings"] == []
    assert cli("agents", "move", "ticket-triage", "--home")["folder_id"] == home_tree["id"]
    assert cli("folders", "delete", "daily") == {"id": weekly["id"], "deleted": True}
    api.delete_folder(reports["id"])
    assert cli("collections", "delete", "help") == {"id": made["id"], "deleted": True}


def tables(cli: Cli, api: Client, tmp_path: Path) -> None:
    made = cli("tables", "create", "stock", "-c", "sku:string!", "-c", "count:integer")
    assert made == api.get_table("stock")
    assert cli("tables", "list") == list(api.iter_tables())
    assert cli("tables", "get", "stock") == made
    sales = tmp_path / "sales.csv"
    sales.write_text("region,units\nnorth,3\nsouth,1\n")
    imported = cli("tables", "import", sales)
    assert imported["inserted"] == 2 and imported["table"] == api.get_table("sales")
    assert cli("tables", "import", sales, "--into", "sales") == {"inserted": 2}
    assert len(cli("tables", "rows", "sales")["data"]) == 4
    grouped = cli(
        "tables",
        "query",
        "sales",
        '{"group_by": ["region"], "aggregates": [{"op": "sum", "column": "units"}]}',
    )
    assert grouped["rows"] == [
        {"region": "north", "sum_units": 6},
        {"region": "south", "sum_units": 2},
    ]
    answered = cli("tables", "sql", "SELECT COUNT(*) AS n FROM sales", "--table", "sales")
    assert answered == {"columns": ["n"], "rows": [[4]], "truncated": False}
    granted = cli("tables", "share", "stock", "group.eng", "--scope", "viewer")
    assert (granted["principal_id"], granted["scope"]) == ("group.eng", "viewer")
    assert [g["principal_id"] for g in cli("tables", "grants", "stock")] == ["group.eng"]
    assert cli("tables", "unshare", "stock", "group.eng")["unshared"] is True
    assert [o["id"] for o in cli("tables", "owners", "stock", "user.admin")["owners"]] == [
        "user.admin"
    ]
    assert cli("tables", "mark", "stock", "marking.pii")["markings"] == ["marking.pii"]
    assert cli("tables", "unmark", "stock", "marking.pii")["markings"] == []
    rows = tmp_path / "stock.jsonl"
    rows.write_text('{"sku": "A-1", "count": 3}\n{"sku": "B-2"}\n')
    assert cli("tables", "append", "stock", rows) == {"inserted": 2, "row_ids": [1, 2]}
    changed = cli("tables", "update-row", "stock", "2", "count=5")
    assert changed == {"_row": 2, "sku": "B-2", "count": 5}
    assert cli("tables", "delete-rows", "stock", "1") == {"deleted": 1}
    widened = cli("tables", "columns", "stock", "-c", "sku:string!", "-c", "count:number")
    assert widened == api.get_table("stock") and widened["version"] == 2
    assert [v["version"] for v in cli("tables", "versions", "stock")] == [2, 1]
    assert cli("tables", "versions", "stock", "1") == api.resource_version(made["id"], 1)
    assert cli("tables", "delete", "stock") == {"id": made["id"], "deleted": True}
    api.delete_table("sales")


def runs(cli: Cli, api: Client, tmp_path: Path) -> None:
    started = cli("runs", "start", "ticket-triage", *URGENT)
    run_id = started["id"]
    assert started["status"] == "queued"
    waiting = until(api, run_id, "waiting")
    assert cli("runs", "get", run_id) == waiting.to_json()
    assert [r["id"] for r in cli("runs", "list")] == [run_id]
    [task] = cli("tasks", "list")
    assert (task["run_id"], task["node_id"]) == (run_id, "approve")
    assert cli("tasks", "answer", run_id, "approve", "--value", "escalate=true") == {
        "run_id": run_id, "node_id": "approve", "answered": True}  # fmt: skip
    until(api, run_id, "succeeded")
    events = cli("runs", "events", run_id, lines=True)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    finished = cli("runs", "start", "ticket-triage", "--input", "ticket=Hi", "--wait")
    assert finished["status"] == "succeeded" and finished["outputs"]["category"]

    waiting_id = cli("runs", "start", "ticket-triage", *URGENT)["id"]
    until(api, waiting_id, "waiting")
    assert cli("runs", "cancel", waiting_id)["status"] == "cancelled"

    api.create_agent(REFUND)
    for decision in ("approve", "reject"):
        paying = api.start_run("refunds", {"amount": 3})
        until(api, paying.id, "waiting")
        [call] = [t for t in api.list_tasks() if t.run_id == paying.id]
        extra = ("--reason", "no") if decision == "reject" else ()
        said = cli("tasks", decision, paying.id, call.command_id, *extra)
        assert (said["call_id"], said["approved"]) == (call.command_id, decision == "approve")

    api.create_agent({**ECHO, "name": "echo-chat"})
    [turn] = cli("chat", "echo-chat", input="hello\n", lines=True)
    assert (turn["message"], turn["reply"], turn["status"]) == ("hello", "#1: HELLO", "succeeded")

    document = tmp_path / "greeting.json"
    document.write_text(json.dumps(GREETING))
    local = cli("run", document, "--input", "who=you")
    assert local == {"status": "succeeded", "outputs": {"text": "hello you"}, "error": None}


def templates(cli: Cli, api: Client, tmp_path: Path) -> None:
    from tests.integration.test_template_runs import EXPECTED, INPUTS, report_flow
    from tests.integration.test_templates_api import report_doc

    document = tmp_path / "report.json"
    document.write_text(json.dumps(report_doc()))
    made = cli("templates", "create", document)
    assert made["id"].startswith("template.") and made["version"] == 1
    assert [t["id"] for t in cli("templates", "list")] == [made["id"]]
    assert cli("templates", "get", "weekly-report")["body"] == made["body"]
    values = ("customer=ACME", "week=2026-11-30", 'items=[{"name": "bolts", "amount": 3}]',
              "total=3")  # fmt: skip
    rendered = cli("templates", "render", "weekly-report", *values)
    assert rendered["text"].startswith("# Report for ACME") and rendered["version"] == 1
    pdf = tmp_path / "report.pdf"
    written = cli("templates", "render", made["id"], *values, "--as", "pdf", "-o", pdf)
    assert written["path"] == str(pdf) and pdf.read_bytes().startswith(b"%PDF")

    agent = api.create_agent(report_flow(made["id"]))
    run = api.start_run(agent["id"], INPUTS)
    until(api, run.id, "succeeded")
    [artifact] = cli("runs", "artifacts", run.id)
    target = tmp_path / "out.md"
    saved = cli("runs", "artifact", run.id, artifact["id"], "-o", target)
    assert saved["path"] == str(target) and target.read_text() == EXPECTED

    change = tmp_path / "change.json"
    change.write_text(json.dumps({"description": "Every Monday"}))
    updated = cli("templates", "update", "weekly-report", change)
    assert updated == api.get_template(made["id"]) and updated["version"] == 2
    assert [v["version"] for v in cli("templates", "versions", "weekly-report")] == [2, 1]
    assert cli("templates", "versions", made["id"], "1") == api.resource_version(made["id"], 1)
    sharing_of(cli, "templates", "weekly-report")
    assert cli("templates", "delete", "weekly-report") == {"id": made["id"], "deleted": True}


def mcp_servers(cli: Cli, api: Client, tmp_path: Path) -> None:
    with http_server() as url:
        document = tmp_path / "weather.yaml"
        document.write_text(f"name: weather\ntransport: streamable_http\nurl: {url}\n")
        made = cli("mcp-servers", "create", document)
        assert cli("mcp-servers", "list") == list(api.iter_mcp_servers())
        assert cli("mcp-servers", "get", "weather") == made
        listed = cli("mcp-servers", "tools", "weather", "--refresh")
        assert "forecast" in [t["name"] for t in listed["data"]]
        assert cli("mcp-servers", "delete", "weather") == {"id": made["id"], "deleted": True}


def secrets(cli: Cli, api: Client) -> None:
    made = cli("secrets", "create", "gh-token", "--description", "ops", input="sk-cli-json\n")
    assert made == api.get_secret("gh-token") and made["has_value"] is True
    assert cli("secrets", "list") == list(api.iter_secrets())
    assert cli("secrets", "get", made["id"]) == made
    rotated = cli("secrets", "set-value", "gh-token", input="sk-cli-json-2")
    assert rotated["version"] == 2 and "value" not in rotated
    granted = cli("secrets", "share", "gh-token", "group.eng", "--scope", "runner")
    assert (granted["principal_id"], granted["scope"]) == ("group.eng", "runner")
    assert [g["principal_id"] for g in cli("secrets", "grants", "gh-token")] == ["group.eng"]
    assert cli("secrets", "unshare", "gh-token", "group.eng")["unshared"] is True
    owners = cli("secrets", "owners", "gh-token", "user.admin")["owners"]
    assert [o["id"] for o in owners] == ["user.admin"]
    assert cli("secrets", "mark", "gh-token", "marking.pii")["markings"] == ["marking.pii"]
    assert cli("secrets", "unmark", "gh-token", "marking.pii")["markings"] == []
    assert cli("secrets", "delete", "gh-token") == {"id": made["id"], "deleted": True}


def triggers(cli: Cli, api: Client, tmp_path: Path) -> None:
    document = tmp_path / "hook.json"
    document.write_text(json.dumps({"name": "helpdesk", "config": {"type": "webhook"}}))
    made = cli("triggers", "create", "ticket-triage", "-f", document)
    assert made["secret"].startswith("whsec_")
    shown = {k: v for k, v in made.items() if k != "secret"}
    assert cli("triggers", "list", "ticket-triage") == [shown]
    assert cli("triggers", "get", "ticket-triage", made["id"]) == shown
    payload = tmp_path / "ticket.json"
    payload.write_text(json.dumps({"ticket": "Checkout page shows an error"}))
    send = ("triggers", "send", made["url"], "--secret-env", "DHUB_TEST_HOOK", "-f", payload)
    os.environ["DHUB_TEST_HOOK"] = made["secret"]
    try:
        sent = cli(*send, "--delivery", "walk-1")
    finally:
        del os.environ["DHUB_TEST_HOOK"]
    assert sent["run_id"].startswith("run.") and sent["repeated"] is False
    [event] = cli("triggers", "history", "ticket-triage", made["id"])
    assert (event["status"], event["run_id"], event["key"]) == ("started", sent["run_id"], "walk-1")
    assert cli("triggers", "disable", "ticket-triage", made["id"])["status"] == "stopped"
    assert cli("triggers", "enable", "ticket-triage", made["id"])["status"] == "active"
    rotated = cli("triggers", "rotate-secret", "ticket-triage", made["id"])
    assert rotated["secret"] not in ("", made["secret"])
    gone = cli("triggers", "delete", "ticket-triage", made["id"])
    assert gone == {"id": made["id"], "deleted": True}


def removals(cli: Cli, api: Client) -> None:
    assert cli("groups", "remove-member", "group.eng", "user.alice") == {
        "group_id": "group.eng", "principal_id": "user.alice", "removed": True}  # fmt: skip
    assert cli("markings", "remove-member", "marking.pii", "user.admin")["removed"] is True
    assert cli("groups", "delete", "group.eng") == {"id": "group.eng", "deleted": True}
    assert cli("users", "delete", "user.alice") == {"id": "user.alice", "deleted": True}
    agent_id = api.get_agent("ticket-triage")["id"]
    assert cli("agents", "delete", "ticket-triage") == {"id": agent_id, "deleted": True}


def until(api: Client, run_id: str, *statuses: str, tries: int = 600) -> Any:
    for _ in range(tries):
        run = api.get_run(run_id)
        if run.status in statuses:
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} stayed {run.status}")
