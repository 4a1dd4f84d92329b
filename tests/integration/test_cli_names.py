"""Names wherever ids go: every CLI command that takes an agent, given its id, its name, a
name several agents have, and a name nobody has; and the SDK's methods the same way. Against
a real app (SQLite and PostgreSQL), through CliRunner with the SDK on the conftest's
TestClient."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import AmbiguousName, Client, NotFound, UnknownName
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.integration.test_agents_api import container, home
from tests.integration.test_conversations_api import ECHO
from tests.support.cli import commands

TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")  # named ticket-triage
CHATTY = {**ECHO, "name": "ticket-triage"}  # a chat agent under the same name
NOBODY = "agent.01m8pq9je70y0jz9n1k7fmy8v2"  # shaped like an id; no agent has it
AGENT = {"agent", "agent_id"}  # what a parameter naming an agent is called


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str, input: str = "") -> Result:
        return runner.invoke(app, list(args), obj=api, input=input)

    return run


def grants(api: Client, agent_id: str) -> list[tuple[str, str]]:
    return [(g["principal_id"], g["scope"]) for g in api.list_grants(agent_id)]


def hold_pii(api: Client) -> None:
    api.create_marking("pii")
    api.add_marking_member("marking.pii", "user.admin")


@dataclass(frozen=True)
class Command:
    """A command taking an agent (``{agent}`` in ``args``), what to prepare, and how to
    check that it acted on the agent meant, and only on it."""

    args: tuple[str, ...]
    acted: Callable[[Client, str, Result], bool]
    setup: Callable[[Client, str], object] = lambda api, agent_id: None
    doc: dict[str, Any] = field(default_factory=lambda: TRIAGE)
    input: str = ""


COMMANDS = {
    "agents get": Command(
        ("agents", "get", "{agent}", "--json"),
        lambda api, a, r: json.loads(r.stdout) == api.get_agent(a),
    ),
    "agents get --version": Command(
        ("agents", "get", "{agent}", "--version", "1", "--json"),
        lambda api, a, r: json.loads(r.stdout)["id"] == a,
    ),
    "agents export": Command(
        ("agents", "export", "{agent}", "--json"),
        lambda api, a, r: json.loads(r.stdout) == api.export_agent(a),
    ),
    "agents versions": Command(
        ("agents", "versions", "{agent}", "--json"),
        lambda api, a, r: [v["version"] for v in json.loads(r.stdout)] == [2, 1],
        setup=lambda api, a: api.update_agent(a, {"description": "Second."}),
    ),
    "agents copy": Command(
        ("agents", "copy", "{agent}", "--json"),
        lambda api, a, r: (
            json.loads(r.stdout)["name"] == "ticket-triage-copy"
            and api.get_agent(json.loads(r.stdout)["id"])["nodes"] == api.get_agent(a)["nodes"]
        ),
    ),
    "agents delete": Command(
        ("agents", "delete", "{agent}"),
        lambda api, a, r: not any(x["id"] == a for x in api.iter_agents()),
    ),
    "agents share": Command(
        ("agents", "share", "{agent}", "public.all", "--scope", "runner"),
        lambda api, a, r: grants(api, a) == [("public.all", "runner")],
    ),
    "agents unshare": Command(
        ("agents", "unshare", "{agent}", "public.all"),
        lambda api, a, r: grants(api, a) == [],
        setup=lambda api, a: api.grant(a, "public.all", "viewer"),
    ),
    "agents grants": Command(
        ("agents", "grants", "{agent}", "--json"),
        lambda api, a, r: json.loads(r.stdout) == api.list_grants(a) != [],
        setup=lambda api, a: api.grant(a, "public.all", "viewer"),
    ),
    "agents owners": Command(
        ("agents", "owners", "{agent}", "user.admin", "public.all"),
        lambda api, a, r: len(api.get_agent(a)["owners"]) == 2,
    ),
    "agents mark": Command(
        ("agents", "mark", "{agent}", "marking.pii"),
        lambda api, a, r: api.get_agent(a)["markings"] == ["marking.pii"],
        setup=lambda api, a: hold_pii(api),
    ),
    "agents unmark": Command(
        ("agents", "unmark", "{agent}", "marking.pii"),
        lambda api, a, r: api.get_agent(a)["markings"] == [],
        setup=lambda api, a: (hold_pii(api), api.mark_agent(a, "marking.pii")),
    ),
    "agents move": Command(
        ("agents", "move", "{agent}", "--to", "elsewhere"),
        lambda api, a, r: api.get_agent(a)["folder_id"] == api.get_folder("elsewhere")["id"],
        setup=lambda api, a: api.create_folder("elsewhere"),
    ),
    "runs start": Command(
        ("runs", "start", "{agent}", "--input", "ticket=Checkout fails", "--json"),
        lambda api, a, r: [x.id for x in api.list_runs(a)] == [json.loads(r.stdout)["id"]],
    ),
    "runs list --agent": Command(
        ("runs", "list", "--agent", "{agent}", "--json"),
        lambda api, a, r: [x["agent_id"] for x in json.loads(r.stdout)] == [a],
        setup=lambda api, a: api.start_run(a, {"ticket": "Checkout fails"}),
    ),
    "usage --agent": Command(
        ("usage", "--agent", "{agent}", "--json"),
        lambda api, a, r: json.loads(r.stdout)["runs"] == 1 == api.usage(a)["runs"],
        setup=lambda api, a: api.wait_run(api.start_run(a, {"ticket": "Checkout fails"}).id),
    ),
    "triggers list": Command(
        ("triggers", "list", "{agent}", "--json"),
        lambda api, a, r: json.loads(r.stdout) == api.list_triggers(a) != [],
        setup=lambda api, a: made_trigger(api, a),
    ),
    "triggers create": Command(
        ("triggers", "create", "{agent}", "-f", "-", "--json"),
        lambda api, a, r: [t["id"] for t in api.list_triggers(a)] == [json.loads(r.stdout)["id"]],
        input='{"config": {"type": "webhook"}}',
    ),
    "triggers get": Command(
        ("triggers", "get", "{agent}", "{trigger}", "--json"),
        lambda api, a, r: json.loads(r.stdout)["agent_id"] == a,
        setup=lambda api, a: made_trigger(api, a),
    ),
    "triggers disable": Command(
        ("triggers", "disable", "{agent}", "{trigger}", "--json"),
        lambda api, a, r: api.list_triggers(a)[0]["status"] == "stopped",
        setup=lambda api, a: made_trigger(api, a),
    ),
    "triggers enable": Command(
        ("triggers", "enable", "{agent}", "{trigger}", "--json"),
        lambda api, a, r: api.list_triggers(a)[0]["status"] == "active",
        setup=lambda api, a: made_trigger(api, a, enabled=False),
    ),
    "triggers rotate-secret": Command(
        ("triggers", "rotate-secret", "{agent}", "{trigger}", "--json"),
        lambda api, a, r: json.loads(r.stdout)["secret"] != MADE["secret"],
        setup=lambda api, a: made_trigger(api, a),
    ),
    "triggers history": Command(
        ("triggers", "history", "{agent}", "{trigger}", "--json"),
        lambda api, a, r: json.loads(r.stdout) == [],
        setup=lambda api, a: made_trigger(api, a),
    ),
    "triggers delete": Command(
        ("triggers", "delete", "{agent}", "{trigger}", "--json"),
        lambda api, a, r: api.list_triggers(a) == [],
        setup=lambda api, a: made_trigger(api, a),
    ),
    "chat": Command(
        ("chat", "{agent}", "--quiet"),
        lambda api, a, r: r.stdout == "you> hello\n#1: HELLO\n",
        doc=CHATTY,
        input="hello\n",
    ),
}


# The trigger the last setup made: commands naming a trigger (``{trigger}``) name it.
MADE: dict[str, str] = {"id": "trigger.01m8pq9je70y0jz9n1k7fmy8v2", "secret": ""}


def made_trigger(api: Client, agent_id: str, enabled: bool = True) -> None:
    made = api.create_trigger(agent_id, {"enabled": enabled, "config": {"type": "webhook"}})
    MADE.update(id=made["id"], secret=made["secret"])


def invoke(dhub: Callable[..., Result], command: Command, ref: str) -> Result:
    values = {"{agent}": ref, "{trigger}": MADE["id"]}
    return dhub(*(values.get(a, a) for a in command.args), input=command.input)


def untouched(api: Client, agent_id: str) -> bool:
    """Nothing a command above does has happened to the agent."""
    agent = api.get_agent(agent_id)
    return (
        agent["version"] == 1
        and agent["markings"] == []
        and len(agent["owners"]) == 1
        and grants(api, agent_id) == []
        and list(api.list_runs(agent_id)) == []
    )


def test_every_command_taking_an_agent_is_covered() -> None:
    """A new command with an AGENT argument or an --agent option needs a row above."""
    covered = {" ".join(c.args[: c.args.index("{agent}")]).removesuffix(" --agent")
               for c in COMMANDS.values()}  # fmt: skip
    taking = {path for path, command in commands() if {p.name for p in command.params} & AGENT}
    assert taking == covered


@pytest.mark.parametrize("name", COMMANDS)
def test_by_id(dhub: Callable[..., Result], api: Client, name: str) -> None:
    command = COMMANDS[name]
    agent_id = api.create_agent(command.doc)["id"]
    command.setup(api, agent_id)
    result = invoke(dhub, command, agent_id)
    assert result.exit_code == 0, result.output
    assert command.acted(api, agent_id, result), result.output


@pytest.mark.parametrize("name", COMMANDS)
def test_by_name(dhub: Callable[..., Result], api: Client, name: str) -> None:
    command = COMMANDS[name]
    other = api.create_agent({**command.doc, "name": "other"})["id"]
    agent_id = api.create_agent(command.doc)["id"]
    command.setup(api, agent_id)
    result = invoke(dhub, command, "ticket-triage")
    assert result.exit_code == 0, result.output
    assert command.acted(api, agent_id, result), result.output
    assert untouched(api, other)


@pytest.mark.parametrize("name", COMMANDS)
def test_an_ambiguous_name_lists_the_candidates(
    dhub: Callable[..., Result], api: Client, client: TestClient, name: str
) -> None:
    command = COMMANDS[name]
    top = api.create_agent(command.doc)["id"]
    team = container(client, "folders", "team-a")
    filed = api.create_agent({**command.doc, "folder_id": team})["id"]
    command.setup(api, top)
    before = api.get_agent(top)
    result = invoke(dhub, command, "ticket-triage")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        "Error: 2 agents you can see are named 'ticket-triage':",
        f"  {top}  in folder {home(client)}",
        f"  {filed}  in folder {team}",
        "Give the id of the one you mean.",
    ]
    assert result.stdout == ""
    assert untouched(api, filed)
    assert api.get_agent(top) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unknown_name_says_how_to_list(
    dhub: Callable[..., Result], api: Client, name: str
) -> None:
    command = COMMANDS[name]
    bystander = api.create_agent({**command.doc, "name": "ticket-triage-2"})["id"]
    result = invoke(dhub, command, "ticket-triage")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        "Error: no agent named 'ticket-triage' that you can see.",
        "`dhub agents list` shows the ones you can.",
    ]
    assert result.stdout == ""
    assert untouched(api, bystander)

    by_id = invoke(dhub, command, NOBODY)  # an id is never looked up as a name
    assert by_id.exit_code == 1, by_id.output
    assert by_id.stderr.startswith(f"Error: No agent with id '{NOBODY}'.")
    assert "(HTTP 404)" in by_id.stderr and by_id.stderr.count("Error") == 1


def test_a_name_the_caller_cannot_see_is_unknown_to_it(
    dhub: Callable[..., Result], api: Client, client: TestClient
) -> None:
    api.create_user("alice", "Alice")
    secret = api.issue_token("user.alice", "t")["token"]
    alice = Client(str(client.base_url), secret, http=client)
    agent_id = api.create_agent(TRIAGE)["id"]
    with pytest.raises(UnknownName):
        alice.get_agent("ticket-triage")
    api.grant(agent_id, "user.alice", "viewer")
    assert alice.get_agent("ticket-triage")["id"] == agent_id


# -- the SDK -----------------------------------------------------------------------------------


def test_sdk_methods_take_a_name(api: Client) -> None:
    agent_id = api.create_agent(TRIAGE)["id"]
    chat_id = api.create_agent({**ECHO, "name": "echo-chat"})["id"]

    assert api.get_agent("ticket-triage") == api.get_agent(agent_id)
    assert api.resolve_agent("ticket-triage")["id"] == agent_id
    assert api.update_agent("ticket-triage", {"description": "Two."})["version"] == 2
    assert [v.version for v in api.agent_versions("ticket-triage")] == [2, 1]
    assert api.agent_version("ticket-triage", 1)["description"] == TRIAGE["description"]
    run = api.start_run("ticket-triage", {"ticket": "Checkout fails"})
    assert run.agent_id == agent_id
    assert [r.id for r in api.list_runs("ticket-triage")] == [run.id]
    assert [r.id for r in api.runs_page(agent="ticket-triage").data] == [run.id]
    assert api.grant("ticket-triage", "public.all", "viewer")["scope"] == "viewer"
    assert [g["principal_id"] for g in api.list_grants("ticket-triage")] == ["public.all"]
    api.revoke_grant("ticket-triage", "public.all")
    assert api.list_grants(agent_id) == []
    assert len(api.set_owners("ticket-triage", ["user.admin", "public.all"])["owners"]) == 2
    hold_pii(api)
    assert api.mark_agent("ticket-triage", "marking.pii")["markings"] == ["marking.pii"]
    assert api.unmark_agent("ticket-triage", "marking.pii")["markings"] == []
    assert api.create_conversation("echo-chat").agent_id == chat_id
    api.delete_agent("ticket-triage")
    with pytest.raises(NotFound):
        api.get_agent(agent_id)


def test_sdk_ambiguous_and_unknown_names(api: Client, client: TestClient) -> None:
    top = api.create_agent(TRIAGE)["id"]
    team = container(client, "folders", "team-a")
    filed = api.create_agent({**TRIAGE, "folder_id": team})["id"]
    with pytest.raises(AmbiguousName) as caught:
        api.start_run("ticket-triage", {"ticket": "x"})
    assert [m["id"] for m in caught.value.matches] == [top, filed]
    assert list(api.list_runs()) == []  # nothing started
    with pytest.raises(UnknownName) as unknown:
        api.delete_agent("ticket-triage-2")
    assert unknown.value.name == "ticket-triage-2" and unknown.value.status_code == 404
    with pytest.raises(NotFound) as by_id:  # an id is used as is: the server's own 404
        api.get_agent(NOBODY)
    assert type(by_id.value) is NotFound
    # The folder's copy, by id, is unaffected by the name's ambiguity.
    assert api.get_agent(filed)["folder_id"] == team
