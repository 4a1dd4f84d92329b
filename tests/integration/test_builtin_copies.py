"""``POST /api/v1/agents/{id}/copy`` (docs/api.md), the SDK's ``copy_agent`` and ``dhub agents
copy``, on SQLite and PostgreSQL: a copy of any agent the caller can read (a built-in or not)
is the caller's own, editable, not built-in, at version 1, with a free name unless one is
asked for; it gives the caller nothing it could not have made itself (references are checked
for it, markings stay), and of what it cannot read it learns nothing."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dhub.cli.main import app
from dhub.client import Client, Conflict
from dhub.domain.resources import unreachable
from tests.conftest import ADMIN_TOKEN, BUILTIN_IDS
from tests.integration.test_reference_access import react_doc
from tests.integration.test_reference_runs import LOOKUP_SOURCE, stored
from tests.integration.test_runs_api import ok, until
from tests.integration.test_sharing_api import World, react

API = "/api/v1"
SUMMARIZER = "agent.builtin-summarizer"
FAKE = "agent.01nosuchthing0000000000000"


def copy(w: World, who: str, agent_id: str, body: Any = None) -> Any:
    return w.call(who, "POST", f"{API}/agents/{agent_id}/copy", body)


def test_a_copy_of_a_builtin_is_the_callers_own_to_change(client: TestClient) -> None:
    w = World(client)
    bob = w.user("bob")
    builtin = ok(w.call(bob, "GET", f"{API}/agents/{SUMMARIZER}"))
    made = copy(w, bob, SUMMARIZER)
    assert made.status_code == 201, made.text
    mine = made.json()
    assert made.headers["location"] == f"{API}/agents/{mine['id']}"
    assert mine["id"] not in BUILTIN_IDS and mine["id"].startswith("agent.")
    assert (mine["is_builtin"], mine["version"], mine["my_share_scope"]) == (False, 1, "owner")
    assert [o["id"] for o in mine["owners"]] == [bob]
    assert mine["name"] == "summarizer-copy"  # a built-in's name is never a copy's
    same = ("description", "nodes", "edges", "mode", "input_mode", "tags", "alias")
    assert {k: mine[k] for k in same} == {k: builtin[k] for k in same}
    # Editable, runnable and deletable: it is bob's.
    changed = ok(w.call(bob, "PATCH", f"{API}/agents/{mine['id']}", {"description": "Mine."}))
    assert changed["version"] == 2
    started = ok(w.call(bob, "POST", f"{API}/agents/{mine['id']}/runs",
                        {"inputs": {"text": "One. Two."}}), 202)  # fmt: skip
    assert until(client, started["id"], "succeeded", "failed", **w.as_(bob))["status"]
    assert ok(w.call(bob, "GET", f"{API}/agents/{SUMMARIZER}")) == builtin  # untouched
    again = ok(copy(w, bob, SUMMARIZER), 201)
    third = ok(copy(w, bob, SUMMARIZER, {}), 201)  # an empty object is no body
    assert (again["name"], third["name"]) == ("summarizer-copy-2", "summarizer-copy-3")
    assert list(w.listed(bob, is_builtin="false")) == [mine["id"], again["id"], third["id"]]
    assert w.call(bob, "DELETE", f"{API}/agents/{mine['id']}").status_code == 204
    entries = ok(client.get(f"{API}/audit", params={"target_id": again["id"]}))["data"]
    assert [(e["actor_id"], e["action"], e["before"]) for e in entries[::-1]] == [
        (bob, "agent.create", None),
        (bob, "agent.copy", {"id": SUMMARIZER, "version": 1}),
    ]


def folder(w: World, who: str, name: str) -> str:
    """A folder of ``who``'s (in their home folder)."""
    return str(ok(w.call(who, "POST", f"{API}/folders", {"name": name}), 201)["id"])


def home(w: World, who: str) -> str:
    return str(ok(w.call(who, "GET", f"{API}/folders/home"))["id"])


def test_a_copy_takes_the_name_and_folder_asked_for(client: TestClient) -> None:
    w = World(client)
    bob = w.user("bob")
    f1, f2 = folder(w, bob, "f1"), folder(w, bob, "f2")
    named = ok(copy(w, bob, SUMMARIZER, {"name": "digest", "folder_id": f1}), 201)
    assert (named["name"], named["folder_id"]) == ("digest", f1)
    # A name asked for is that name or a conflict, as on any create.
    taken = copy(w, bob, SUMMARIZER, {"name": "digest", "folder_id": f1})
    assert taken.status_code == 409 and named["id"] in taken.json()["detail"]
    # A built-in's own name, asked for, is the caller's choice (built-ins hold no folder's).
    same = ok(copy(w, bob, SUMMARIZER, {"name": "summarizer", "folder_id": None}), 201)
    assert (same["name"], same["folder_id"]) == ("summarizer", home(w, bob))
    # A copy of one's own agent, where it is: the name is taken there, so a free one.
    twice = ok(copy(w, bob, named["id"], {"folder_id": f1}), 201)
    assert twice["name"] == "digest-copy"
    elsewhere = ok(copy(w, bob, named["id"], {"folder_id": f2}), 201)
    assert elsewhere["name"] == "digest" and elsewhere["folder_id"] == f2
    # Without a folder it goes where a new agent without one goes: the caller's home folder,
    # not the original's folder.
    assert ok(copy(w, bob, named["id"]), 201)["folder_id"] == home(w, bob)
    # A folder the caller cannot put things in is the one message a folder that is not gets.
    alices = folder(w, w.user("alice"), "hers")
    refused = copy(w, bob, SUMMARIZER, {"folder_id": alices})
    never = copy(w, bob, SUMMARIZER, {"folder_id": "folder.01nosuchthing0000000000000"})
    assert refused.status_code == never.status_code == 422
    assert refused.text == never.text.replace("folder.01nosuchthing0000000000000", alices)


def test_bad_copy_bodies_are_refused_naming_the_field(client: TestClient) -> None:
    w = World(client)
    bob = w.user("bob")
    cases: list[tuple[Any, list[str]]] = [
        (["digest"], [""]),
        ("digest", [""]),
        ({"name": 3}, ["/name"]),
        ({"folder_id": ["f"]}, ["/folder_id"]),
        ({"owners": [bob], "is_builtin": True}, ["/owners", "/is_builtin"]),
        ({"name": ""}, ["/name"]),  # the document's own check
        ({"name": "x" * 201}, ["/name"]),
        ({"folder_id": "(built-in)"}, ["/folder_id"]),  # the built-ins' names, not a folder
    ]
    for body, locs in cases:
        response = copy(w, bob, SUMMARIZER, body)
        assert response.status_code == 422, (body, response.text)
        assert [e["loc"] for e in response.json()["errors"]] == locs, body
    raw = client.post(f"{API}/agents/{SUMMARIZER}/copy", content=b"{not json",
                      headers={**w.as_(bob), "Content-Type": "application/json"})  # fmt: skip
    assert raw.status_code == 422
    assert w.listed(bob, is_builtin="false") == {}  # nothing was made


def test_any_readable_agent_can_be_copied_and_no_other(client: TestClient) -> None:
    w = World(client)
    bob, eve = w.user("bob"), w.user("eve")
    marking = w.marking("finance", holders=[bob])
    shared = w.agent("shared", grants={bob: "viewer"}, markings=[marking])
    private = w.agent("private")
    mine = ok(copy(w, bob, shared), 201)
    assert [o["id"] for o in mine["owners"]] == [bob]
    # In bob's home folder, where the name is free.
    assert (mine["name"], mine["folder_id"]) == ("shared", home(w, bob))
    # A copy does not declassify: it carries the marking, so who lacks it sees neither.
    assert mine["markings"] == [marking]
    ok(w.call(bob, "POST", f"{API}/agents/{mine['id']}/grants",
              {"principal_id": eve, "scope": "viewer"}), 201)  # fmt: skip
    assert w.call(eve, "GET", f"{API}/agents/{mine['id']}").status_code == 404
    assert ok(w.call(bob, "PATCH", f"{API}/agents/{mine['id']}", {"description": "x"}))
    # A marking inherited from the original's folder stays too, though the copy leaves it.
    vault = ok(client.post(f"{API}/folders", json={"name": "vault"}), 201)["id"]
    ok(client.post(f"{API}/folders/{vault}/markings", json={"marking_id": marking}))
    filed = w.agent("filed", grants={bob: "viewer"}, folder_id=vault)
    assert ok(w.call(bob, "GET", f"{API}/agents/{filed}"))["markings"] == []  # its own: none
    taken_out = ok(copy(w, bob, filed), 201)
    assert taken_out["folder_id"] == home(w, bob) and taken_out["markings"] == [marking]
    # What the caller cannot read answers as what does not exist, word for word.
    for hidden in (private, shared):
        seen = copy(w, eve, hidden, {"name": "stolen"})
        never = copy(w, eve, FAKE, {"name": "stolen"})
        assert seen.status_code == never.status_code == 404
        assert seen.text == never.text.replace(FAKE, hidden)
    assert w.listed(eve, is_builtin="false") == {}


def test_a_copy_gives_no_reference_the_caller_could_not_add_itself(client: TestClient) -> None:
    """Bob may read an agent whose tool he may not run: copying it is refused with the very
    error creating it would give him, until he may run the tool."""
    w = World(client)
    bob = w.user("bob")
    tool = stored(client, "tool", "lookup_order", LOOKUP_SOURCE)
    agent = ok(client.post(f"{API}/agents", json=react_doc("support", tools=[tool])), 201)["id"]
    ok(client.post(f"{API}/agents/{agent}/grants", json={"principal_id": bob, "scope": "viewer"}),
       201)  # fmt: skip
    refused = copy(w, bob, agent)
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["errors"]
    assert (error["loc"], error["message"]) == ("/agent/tools/0", unreachable("tool", tool))
    doc = {k: v for k, v in ok(w.call(bob, "GET", f"{API}/agents/{agent}")).items()
           if k in ("name", "description", "agent")}  # fmt: skip
    created = w.call(bob, "POST", f"{API}/agents", doc)
    assert created.status_code == 422 and created.json()["errors"] == refused.json()["errors"]
    ok(client.post(f"{API}/tools/{tool}/grants", json={"principal_id": bob, "scope": "runner"}),
       201)  # fmt: skip
    assert ok(copy(w, bob, agent), 201)["agent"]["tools"] == [tool]


def test_the_sdk_and_the_cli_copy_by_name_or_id(client: TestClient) -> None:
    w = World(client)
    bob = w.user("bob")
    api = Client(str(client.base_url), w.tokens[bob], http=client)
    runner = CliRunner()

    def dhub(*args: str) -> Any:
        return runner.invoke(app, list(args), obj=api)

    f1 = folder(w, bob, "f1")
    first = api.copy_agent("summarizer")  # a name: the built-in is the one bob sees
    assert first["name"] == "summarizer-copy" and first["is_builtin"] is False
    named = api.copy_agent(SUMMARIZER, name="digest", folder_id=f1)
    assert (named["name"], named["folder_id"]) == ("digest", f1)
    with pytest.raises(Conflict, match=named["id"]):
        api.copy_agent(SUMMARIZER, name="digest", folder_id=f1)
    shown = dhub("agents", "copy", "classifier", "--name", "triage", "--folder", f1, "--json")
    assert shown.exit_code == 0, shown.output
    made = json.loads(shown.stdout)
    assert (made["name"], made["folder_id"], made["is_builtin"]) == ("triage", f1, False)
    said = dhub("agents", "copy", "agent.builtin-extractor")
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith("copied extractor (agent.builtin-extractor) to extractor-copy (")
    got = dhub("agents", "get", "agent.builtin-extractor")
    assert "folder:" in got.stdout and "(built-in)" in got.stdout
    refused = dhub("agents", "delete", "summarizer")
    assert refused.exit_code == 1
    assert "built-in" in refused.output and "dhub agents copy" in refused.output
    listed = dhub("agents", "list", "--builtin", "--json")
    assert [a["id"] for a in json.loads(listed.stdout)] == BUILTIN_IDS
    nothing = dhub("agents", "copy", "no-such-agent")
    assert nothing.exit_code == 1 and "no agent named 'no-such-agent'" in nothing.output


_copies = itertools.count()
names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=200).filter(
    lambda n: n.strip() == n and n.strip()
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(name=names, copies=st.integers(1, 4))
def test_copy_names_are_free_fitting_and_predictable(
    client: TestClient, name: str, copies: int
) -> None:
    """Copies of an agent into its own folder: ``<name>-copy``, ``-copy-2``, ... each within
    the name's 200 characters, each a name no other agent there holds."""
    made_in = ok(client.post(f"{API}/folders", json={"name": f"folder-{next(_copies)}"}), 201)
    where = made_in["id"]
    source = ok(client.post(f"{API}/agents", json=react(name, folder_id=where)), 201)
    made = [ok(client.post(f"{API}/agents/{source['id']}/copy", json={"folder_id": where}), 201)
            for _ in range(copies)]  # fmt: skip
    expected = [
        name[: 200 - len(suffix)] + suffix
        for suffix in ["-copy", *(f"-copy-{n}" for n in range(2, copies + 1))]
    ]
    assert [m["name"] for m in made] == expected
    assert all(len(m["name"]) <= 200 and m["folder_id"] == where for m in made)
    listed = ok(client.get(f"{API}/agents", params={"folder_id": where, "limit": 200}))["data"]
    assert sorted(a["name"] for a in listed) == sorted([name, *expected])


def test_an_admin_copies_like_anyone(client: TestClient) -> None:
    mine = ok(client.post(f"{API}/agents/{SUMMARIZER}/copy"), 201)
    assert [o["id"] for o in mine["owners"]] == ["user.admin"]
    token = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert client.delete(f"{API}/agents/{mine['id']}", headers=token).status_code == 204
