"""Folders and collections through the SDK and ``dhub folders|collections`` (and ``dhub agents
move``, ``agents list --folder``), against a real app on SQLite and PostgreSQL: CLI -> SDK ->
HTTP -> API -> store. Another user's Client over the same app is the outsider trying names,
moves and listings it should get nothing from."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import AmbiguousName, Client, Conflict, InvalidInput, NotFound, UnknownName
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json

TRIAGE = load_json(FIXTURES / "valid" / "workflow_triage.json")  # named ticket-triage


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def user(api: Client, client: TestClient) -> Callable[[str], Client]:
    """A Client of a new non-admin user ``name``."""

    def make(name: str) -> Client:
        api.create_user(name, name.title())
        return Client(str(client.base_url), api.issue_token(f"user.{name}", "t")["token"],
                      http=client)  # fmt: skip

    return make


@pytest.fixture
def dhub(api: Client) -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str, obj: Client | None = None) -> Result:
        return runner.invoke(app, list(args), obj=obj or api)

    return run


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


def table(result: Result) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in ok(result).stdout.splitlines()]


# -- the SDK -----------------------------------------------------------------------------------


def test_sdk_folders_collections_and_their_children(api: Client) -> None:
    support = api.create_collection("support", description="The support team")
    reports = api.create_folder("reports", collection="support")  # names where ids go
    weekly = api.create_folder("weekly", folder="reports")
    assert (reports["collection_id"], weekly["folder_id"]) == (support["id"], reports["id"])
    assert weekly["collection_id"] == support["id"]  # from its folder
    scratch = api.create_folder("scratch")  # no place given: the caller's home folder
    home = api.home_folder()
    assert (home["type"], home["name"], scratch["folder_id"]) == ("home", "home", home["id"])
    assert api.get_folder("weekly") == api.get_folder(weekly["id"]) == api.resolve_folder("weekly")
    assert api.get_folder("home")["id"] == home["id"]
    assert api.get_collection("support") == support

    agent = api.create_agent(TRIAGE)
    assert agent["folder_id"] == home["id"]
    moved = api.move("ticket-triage", folder="weekly")  # an agent also by its name
    assert (moved["folder_id"], moved["collection_id"]) == (weekly["id"], support["id"])
    prompt = api._object("POST", "/prompts", json={"name": "p", "description": "", "template": "x"})
    api.move(prompt["id"], folder=weekly["id"])
    assert [c["id"] for c in api.iter_folder_children("weekly", page_size=1)] == sorted(
        [agent["id"], prompt["id"]]
    )
    first = api.folder_children("weekly", limit=1)
    assert len(first.data) == 1 and first.next_cursor is not None
    rest = api.folder_children("weekly", limit=1, cursor=first.next_cursor)
    assert [c["category"] for c in [*first.data, *rest.data]] == sorted(["agent", "prompt"])
    assert [c["id"] for c in api.iter_collection_children("support")] == [reports["id"]]
    assert [f["id"] for f in api.iter_folders(collection_id=support["id"])] == [
        reports["id"], weekly["id"]]  # fmt: skip

    top = api.move(agent["id"], collection="support")  # out of its folder, same collection
    assert (top["folder_id"], top["collection_id"]) == (None, support["id"])
    assert api.get_resource(prompt["id"])["folder_id"] == weekly["id"]
    with pytest.raises(ValueError, match="folder="):
        api.move(agent["id"])
    renamed = api.update_folder("weekly", {"name": "monthly"})
    assert renamed["name"] == "monthly" and renamed["version"] == 2
    assert api.update_collection("support", {"description": "Ours"})["description"] == "Ours"
    with pytest.raises(Conflict):
        api.delete_folder("monthly")  # not empty
    api.delete_agent(agent["id"])
    api._request("DELETE", f"/prompts/{prompt['id']}")
    api.delete_folder("monthly")
    api.delete_folder("reports")
    api.delete_collection("support")
    with pytest.raises(UnknownName):
        api.get_collection("support")


def test_sdk_sharing_and_markings_of_a_folder_reach_what_is_in_it(
    api: Client, user: Callable[[str], Client]
) -> None:
    bob = user("bob")
    team = api.create_folder("team")
    api.create_agent({**TRIAGE, "folder_id": team["id"]})
    with pytest.raises(UnknownName):
        bob.get_agent("ticket-triage")
    assert api.grant(team["id"], "user.bob", "viewer")["scope"] == "viewer"
    assert [g["principal_id"] for g in api.list_grants(team["id"])] == ["user.bob"]
    # Homes pass nothing down, but a folder in one does.
    assert bob.get_agent("ticket-triage")["my_share_scope"] == "grant"
    assert [c["name"] for c in bob.iter_folder_children(team["id"])] == ["ticket-triage"]
    api.create_marking("pii")
    api.add_marking_member("marking.pii", "user.admin")
    marked = api.mark(team["id"], "marking.pii")
    assert marked["markings"] == marked["effective_markings"] == ["marking.pii"]
    inside = api.get_agent("ticket-triage")
    assert (inside["markings"], inside["effective_markings"]) == ([], ["marking.pii"])
    with pytest.raises(UnknownName):
        bob.get_agent("ticket-triage")  # hidden by the folder's marking
    with pytest.raises(NotFound):
        bob.get_folder(team["id"])
    assert api.unmark(team["id"], "marking.pii")["effective_markings"] == []
    api.revoke_grant(team["id"], "user.bob")
    assert api.list_grants(team["id"]) == []


def test_folder_names_resolve_among_what_the_caller_sees(
    api: Client, user: Callable[[str], Client]
) -> None:
    bob, carol = user("bob"), user("carol")
    mine = bob.create_folder("reports")
    with pytest.raises(UnknownName):  # carol cannot see bob's: the same as none at all
        carol.get_folder("reports")
    assert carol.home_folder()["id"] != bob.home_folder()["id"]
    # Every home is called home and the admin sees them all; "home" is still its own.
    assert api.get_folder("home")["id"] == api.home_folder()["id"]
    assert bob.get_folder("home")["id"] == bob.home_folder()["id"]
    api.create_collection("c")
    other = api.create_folder("reports", collection="c")
    with pytest.raises(AmbiguousName) as caught:
        api.get_folder("reports")  # the admin sees bob's and its own
    assert {m["id"] for m in caught.value.matches} == {mine["id"], other["id"]}


def test_an_outsider_cannot_place_move_or_list_through_names_or_ids(
    api: Client, user: Callable[[str], Client]
) -> None:
    bob = user("bob")
    secret = api.create_folder("secret")
    agent = api.create_agent({**TRIAGE, "folder_id": secret["id"]})
    mine = bob.create_agent({**TRIAGE, "name": "bobs"})
    with pytest.raises(UnknownName):
        bob.move(mine["id"], folder="secret")
    with pytest.raises(InvalidInput) as refused:  # by id: the answer for a folder not there
        bob.move(mine["id"], folder=secret["id"])
    assert [e.loc for e in refused.value.errors] == ["/folder_id"]
    with pytest.raises(NotFound):
        bob.move(agent["id"], folder=bob.home_folder()["id"])
    with pytest.raises(NotFound):
        list(bob.iter_folder_children(secret["id"]))
    assert [f["id"] for f in bob.iter_folders()] == [bob.home_folder()["id"]]
    assert api.get_agent(agent["id"])["folder_id"] == secret["id"]


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_folders_and_collections(dhub: Callable[..., Result], api: Client) -> None:
    assert ok(dhub("collections", "create", "support")).stdout.startswith("created support (")
    reports = as_json(dhub("folders", "create", "reports", "--collection", "support", "--json"))
    weekly = as_json(dhub("folders", "create", "weekly", "--in", "reports", "--json"))
    assert weekly["folder_id"] == reports["id"]
    ok(dhub("folders", "create", "scratch"))
    agent_id = api.create_agent(TRIAGE)["id"]
    moved = ok(dhub("agents", "move", "ticket-triage", "--to", "weekly"))
    assert moved.stdout == f"moved ticket-triage ({agent_id}) into folder {weekly['id']}\n"

    rows = table(dhub("folders", "list", "--collection", "support"))
    assert rows[0] == ["ID", "NAME", "COLLECTION", "IN FOLDER", "MARKINGS"]
    assert [r[1] for r in rows[1:]] == ["reports", "weekly"]
    listed = table(dhub("agents", "list", "--folder", "weekly"))
    assert [r[0] for r in listed[1:]] == [agent_id]
    assert table(dhub("agents", "list", "--folder", "reports")) == [["No agents found."]]
    children = table(dhub("folders", "children", "reports"))
    assert children == [["ID", "NAME", "KIND", "MARKINGS"], [weekly["id"], "weekly", "folder"]]
    lines = ok(dhub("folders", "tree")).stdout.splitlines()
    home = api.home_folder()["id"]
    assert lines[0] == f"home/  ({home})"
    assert [line.split("  (")[0] for line in lines] == [
        "home/", "  scratch/", "support/", "  reports/", "    weekly/", "      ticket-triage"
    ]  # fmt: skip
    assert lines[-1] == f"      ticket-triage  (agent {agent_id})"
    tree = as_json(dhub("collections", "tree", "support", "--json"))
    assert tree["children"][0]["children"][0]["children"][0]["id"] == agent_id
    assert as_json(dhub("folders", "home", "--json"))["id"] == home

    assert ok(dhub("folders", "rename", "weekly", "monthly")).stdout.endswith("to monthly\n")
    ok(dhub("agents", "move", "ticket-triage", "--home"))
    assert api.get_agent(agent_id)["folder_id"] == home
    moved_folder = as_json(dhub("folders", "move", "monthly", "--collection", "support", "--json"))
    assert moved_folder["folder_id"] is None
    ok(dhub("folders", "delete", "monthly"))
    ok(dhub("folders", "delete", "reports"))
    deleted = as_json(dhub("collections", "delete", "support", "--json"))
    assert deleted["deleted"] is True
    assert table(dhub("collections", "list")) == [["No collections found."]]


def test_cli_sharing_and_marking_a_folder(dhub: Callable[..., Result], api: Client) -> None:
    ok(dhub("folders", "create", "team"))
    api.create_agent({**TRIAGE, "folder_id": api.get_folder("team")["id"]})
    shared = ok(dhub("folders", "share", "team", "public.all", "--scope", "runner"))
    assert shared.stdout.startswith("shared team (") and shared.stdout.endswith("as runner\n")
    assert table(dhub("folders", "grants", "team"))[1][::3] == ["public.all", "runner"]
    api.create_marking("pii")
    api.add_marking_member("marking.pii", "user.admin")
    ok(dhub("folders", "mark", "team", "marking.pii"))
    assert api.get_agent("ticket-triage")["effective_markings"] == ["marking.pii"]
    assert table(dhub("folders", "children", "team"))[1][-1] == "marking.pii"
    assert "[marking.pii]" in ok(dhub("folders", "tree", "team")).stdout
    ok(dhub("folders", "unmark", "team", "marking.pii"))
    ok(dhub("folders", "unshare", "team", "public.all"))
    assert api.list_grants(api.get_folder("team")["id"]) == []
    ok(dhub("collections", "create", "c"))
    ok(dhub("collections", "share", "c", "public.all"))
    assert as_json(dhub("collections", "grants", "c", "--json"))[0]["scope"] == "viewer"


def test_cli_mistakes_exit_1_or_2_without_a_traceback(
    dhub: Callable[..., Result], api: Client, user: Callable[[str], Client]
) -> None:
    api.create_agent(TRIAGE)
    unknown = dhub("folders", "get", "nope")
    assert unknown.exit_code == 1
    assert unknown.stderr.splitlines() == [
        "Error: no folder named 'nope' that you can see.",
        "`dhub folders list` shows the ones you can.",
    ]
    assert dhub("agents", "move", "ticket-triage").exit_code == 2  # where to?
    assert dhub("agents", "move", "ticket-triage", "--home", "--to", "x").exit_code == 2
    both = dhub("folders", "create", "x", "--in", "a", "--collection", "b")
    assert both.exit_code == 2 and "not both" in both.output
    ok(dhub("folders", "create", "full"))
    api.move("ticket-triage", folder="full")
    refused = dhub("folders", "delete", "full")
    assert refused.exit_code == 1 and "not empty" in refused.stderr
    bob = user("bob")
    stolen = dhub("agents", "move", "ticket-triage", "--home", obj=bob)
    assert stolen.exit_code == 1 and "no agent named 'ticket-triage'" in stolen.stderr
    for result in (unknown, refused, stolen):
        assert "Traceback" not in result.output


def test_cli_names_folders_by_their_path_in_one_request(
    dhub: Callable[..., Result], api: Client, client: TestClient, user: Callable[[str], Client]
) -> None:
    ok(dhub("collections", "create", "support"))
    ok(dhub("folders", "create", "reports", "--collection", "support"))
    ok(dhub("folders", "create", "weekly", "--in", "reports"))
    ok(dhub("folders", "create", "drafts"))
    weekly, drafts = api.get_folder("weekly")["id"], api.get_folder("drafts")["id"]
    made = [
        api.create_agent({**TRIAGE, "name": f"a{i}", "folder_id": (weekly, drafts)[i % 2]})["id"]
        for i in range(6)
    ]
    asked: list[str] = []
    client.event_hooks["request"].append(lambda request: asked.append(request.url.path))
    rows = table(dhub("agents", "list", "--no-builtin"))
    assert [r[-1] for r in rows[1:]] == ["support/reports/weekly", "home/drafts"] * 3
    assert asked == ["/api/v1/agents", "/api/v1/folders/paths"]  # one for the page's folders
    got = ok(dhub("agents", "get", made[0])).stdout
    assert re.search(r"^folder:\s+support/reports/weekly$", got, re.MULTILINE), got
    folders = table(dhub("folders", "list", "--collection", "support"))
    assert [r[1:4] for r in folders[1:]] == [
        ["reports", "support", "-"], ["weekly", "support", "support/reports"]
    ]  # fmt: skip
    # bob, given an agent but not its folder: the folder by its id, which the agent shows.
    bob = user("bob")
    api.grant(made[0], "user.bob", "viewer")
    assert table(dhub("agents", "list", "--no-builtin", obj=bob))[1][-1] == weekly
    assert as_json(dhub("agents", "list", "--no-builtin", "--json", obj=bob))[0]["id"] == made[0]
