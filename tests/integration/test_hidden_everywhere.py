"""A marked resource does not exist for anyone without its markings, admins included, on
SQLite and PostgreSQL: walked over every list, search, audit and cursor endpoint of the
OpenAPI document (every page, every filter naming it), nothing of it shows (not its id, its
runs, tasks or conversations, its name or text), and every endpoint that takes its id
answers exactly as for an id that never existed. Name collisions with what the caller cannot
see name no holder; cursors are ids of what the page showed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_runs_api import TRIAGE, until
from tests.integration.test_sharing_api import World, ok, react

API = "/api/v1"
SECRET = "zq7secret"  # in the hidden things' names, descriptions and tags
KINDS = ("prompt", "tool", "actor", "role", "template", "ontology", "table", "secret")
PLURALS = {"ontology": "ontologies"}


def resource_doc(kind: str) -> dict[str, Any]:
    base = {"name": f"{kind}-{SECRET}", "description": SECRET, "tags": [SECRET]}
    source = f"def {kind}_{SECRET}(q: str) -> str:\n    return q\n"
    extra: dict[str, Any] = {
        "prompt": {"template": SECRET},
        "tool": {"function": {"source": source}},
        "actor": {"function": {"source": source}},
        "role": {"instructions": SECRET},
        "template": {"body": SECRET},
        "table": {
            "name": f"table_{SECRET}",
            "columns": [{"name": "ref", "type": "string", "description": SECRET}],
        },
        "secret": {"value": SECRET},
        "ontology": {
            "object_types": [
                {
                    "name": "thing",
                    "description": SECRET,
                    "properties": [{"name": "ref"}, {"name": "label"}],
                    "primary_key": "ref",
                }
            ]
        },
    }[kind]
    return {**base, **extra}


class Hidden:
    """What the admin made and marked: ids the nosy ones must never meet."""

    def __init__(self, client: TestClient, w: World, nosy: list[str]) -> None:
        self.marking = w.marking("classified")
        self.ids: dict[str, str] = {}
        triage = {**TRIAGE, "name": f"triage-{SECRET}", "description": SECRET, "tags": [SECRET]}
        # Assigned to the nosy ones: a task they would otherwise see.
        for node in triage["nodes"]:
            if node["id"] == "approve":
                node["config"]["assignees"] = nosy
        agent = ok(client.post(f"{API}/agents", json=triage), 201)["id"]
        self.ids["agent"] = agent
        for who in nosy:  # a grant: seen if not for the marking
            body = {"principal_id": who, "scope": "editor"}
            ok(client.post(f"{API}/agents/{agent}/grants", json=body), 201)
        body = {"inputs": {"ticket": "outage", "customer": SECRET}}
        run = ok(client.post(f"{API}/agents/{agent}/runs", json=body), 202)["id"]
        until(client, run, "waiting")
        self.ids["run"] = run
        ok(client.patch(f"{API}/agents/{agent}", json={"description": SECRET + " v2"}))
        for kind in KINDS:
            plural = PLURALS.get(kind, f"{kind}s")
            made = ok(client.post(f"{API}/{plural}", json=resource_doc(kind)), 201)["id"]
            for who in nosy:
                grant = {"principal_id": who, "scope": "editor"}
                ok(client.post(f"{API}/{plural}/{made}/grants", json=grant), 201)
            self.ids[kind] = made
        # An object whose key and text are secret, in the ontology.
        thing = {"type": "thing", "properties": {"ref": SECRET, "label": SECRET}}
        ok(client.post(f"{API}/ontologies/{self.ids['ontology']}/objects", json=thing), 201)
        for kind, resource_id in self.ids.items():
            if kind != "run":
                plural = PLURALS.get(kind, f"{kind}s")
                ok(client.post(f"{API}/{plural}/{resource_id}/markings",
                               json={"marking_id": self.marking}))  # fmt: skip
        # Its history goes on after it was marked.
        ok(client.patch(f"{API}/tools/{self.ids['tool']}", json={"description": SECRET + "2"}))

    def assert_absent(self, response: Any, where: str) -> None:
        text = response.text
        assert SECRET not in text, (where, text[:500])
        for kind, hidden_id in self.ids.items():
            assert hidden_id not in text, (where, kind, text[:500])


@pytest.fixture
def setting(client: TestClient) -> tuple[World, Hidden, list[str]]:
    w = World(client)
    alice = w.user("alice")
    nosy = w.user("nosy", admin=True)
    return w, Hidden(client, w, [alice, nosy]), [alice, nosy]


def _list_operations(client: TestClient) -> list[tuple[str, list[str]]]:
    """Every GET without path parameters, with its query parameters."""
    found = []
    for path, ops in client.app.openapi()["paths"].items():  # type: ignore[attr-defined]
        get = ops.get("get")
        if get is None or "{" in path:
            continue
        found.append((path, [p["name"] for p in get.get("parameters", []) if p["in"] == "query"]))
    return found


def _walk(w: World, who: str, path: str, params: dict[str, Any]) -> Iterator[Any]:
    """The response to every page of a list (following next_cursor)."""
    query = dict(params)
    for _ in range(200):
        response = w.client.get(path, params=query, headers=w.as_(who))
        yield response
        body = response.json() if response.status_code == 200 else None
        cursor = body.get("next_cursor") if isinstance(body, dict) else None
        if not cursor:
            return
        query["cursor"] = cursor


def test_lists_searches_and_audit_never_show_a_marked_resource(
    setting: tuple[World, Hidden, list[str]],
) -> None:
    """Every page of every list, plain and with each filter naming a hidden thing (answered
    exactly as the same filter naming nothing)."""
    w, hidden, nosy = setting
    operations = _list_operations(w.client)
    assert {p for p, _ in operations} >= {f"{API}/agents", f"{API}/audit", f"{API}/runs",
                                          f"{API}/tasks", f"{API}/conversations"}  # fmt: skip
    probes = {SECRET: "zq7nothing", **{i: f"{k}.01nosuchthing00000000000" for k, i in
                                         hidden.ids.items()}}  # fmt: skip
    for who in nosy:
        for path, names in operations:
            paged = {"limit": 1} if "limit" in names else {}
            for params in ({}, paged):
                for response in _walk(w, who, path, params):
                    assert response.status_code < 500, (path, params, response.text)
                    hidden.assert_absent(response, f"{who} GET {path} {params}")
            for name in sorted(set(names) - {"limit", "cursor"}):
                for probe, fake in probes.items():
                    seen = list(_walk(w, who, path, {name: probe, **paged}))
                    other = list(_walk(w, who, path, {name: fake, **paged}))
                    assert [r.text for r in seen] == [r.text.replace(fake, probe) for r in other], (
                        who,
                        path,
                        name,
                        probe,
                    )


def test_ids_of_marked_resources_answer_as_ids_that_never_existed(
    setting: tuple[World, Hidden, list[str]],
) -> None:
    """Every operation with a path id, given a hidden id and then a random id of the same
    kind: the same status and body, word for word."""
    w, hidden, nosy = setting
    spec = w.client.app.openapi()  # type: ignore[attr-defined]
    fake = {kind: f"{kind}.01nosuchthing000000000000000" for kind in hidden.ids}
    for who in nosy:
        for path, ops in spec["paths"].items():
            for method, op in ops.items():
                names = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
                for kind, hidden_id in hidden.ids.items():
                    url = _fill(path, names, kind, hidden_id)
                    if url is None:
                        continue
                    body = {} if method in ("post", "patch", "put") else None
                    seen = w.call(who, method.upper(), url, body)
                    other = w.call(who, method.upper(), url.replace(hidden_id, fake[kind]), body)
                    assert seen.status_code == other.status_code, (who, method, url, seen.text)
                    assert seen.text == other.text.replace(fake[kind], hidden_id), (url,)
                    assert SECRET not in seen.text


def _fill(path: str, names: list[str], kind: str, hidden_id: str) -> str | None:
    """``path`` with the hidden id where it takes an id of that kind (and plausible values
    for the other parameters), or None when it takes none."""
    first = names[0] if names else None
    plural = path.split("/")[3] if path.count("/") > 3 else None
    singular = {p: k for k, p in PLURALS.items()}
    takes = {
        "agent_id": "agent",
        "resource_id": singular.get(plural, plural[:-1]) if plural else None,
        "run_id": "run",
    }
    if first is None or takes.get(first) != kind:
        return None
    url = path.replace("{" + first + "}", hidden_id)
    for name in names[1:]:
        # For an ontology's objects: the hidden object's own type and key.
        fills = {"version": "1", "type": "thing", "key": SECRET}
        url = url.replace("{" + name + "}", fills.get(name, "x"))
    return url


def test_a_name_taken_by_what_the_caller_cannot_see_names_no_holder(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    marking = w.marking("m", holders=[])
    # A folder alice may edit, holding an agent and a tool she cannot see (marked).
    shared = ok(client.post(f"{API}/folders", json={"name": "shared"}), 201)["id"]
    ok(client.post(f"{API}/folders/{shared}/grants",
                   json={"principal_id": alice, "scope": "editor"}), 201)  # fmt: skip
    hidden_agent = ok(client.post(f"{API}/agents", json=react("taken", folder_id=shared)), 201)[
        "id"
    ]
    tool = {**resource_doc("tool"), "folder_id": shared}
    hidden_tool = ok(client.post(f"{API}/tools", json=tool), 201)["id"]
    for path in (f"agents/{hidden_agent}", f"tools/{hidden_tool}"):
        ok(client.post(f"{API}/{path}/markings", json={"marking_id": marking}))
    mine = ok(w.call(alice, "POST", f"{API}/agents", react("mine", folder_id=shared)), 201)["id"]
    attempts = [
        w.call(alice, "POST", f"{API}/agents", react("taken", folder_id=shared)),
        w.call(alice, "PATCH", f"{API}/agents/{mine}", {"name": "taken"}),
        w.call(alice, "POST", f"{API}/tools", tool),
    ]
    for response in attempts:
        assert response.status_code == 409, response.text
        assert hidden_agent not in response.text and hidden_tool not in response.text
        assert "already taken" in response.json()["detail"]
    # Once alice may read the holder, the message points her to it.
    ok(client.delete(f"{API}/agents/{hidden_agent}/markings/{marking}"))
    response = w.call(alice, "POST", f"{API}/agents", react("taken", folder_id=shared))
    assert response.status_code == 409 and hidden_agent in response.json()["detail"]
    # Everyone else has a home folder of their own: the same name never collides there.
    ok(w.call(alice, "POST", f"{API}/agents", react("taken")), 201)


def test_a_conversation_cursor_is_never_a_hidden_conversation(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    marking = w.marking("m", holders=[])
    agents = []
    for i in range(3):
        agent = ok(client.post(f"{API}/agents", json=react(f"chat{i}")), 201)["id"]
        ok(client.post(f"{API}/agents/{agent}/grants",
                       json={"principal_id": alice, "scope": "runner"}), 201)  # fmt: skip
        agents.append(agent)
    made = [
        ok(w.call(alice, "POST", f"{API}/agents/{agents[i % 3]}/conversations"), 201)["id"]
        for i in range(9)
    ]
    ok(client.post(f"{API}/agents/{agents[1]}/markings", json={"marking_id": marking}))
    hidden = {c for i, c in enumerate(made) if i % 3 == 1}
    seen: list[str] = []
    for limit in (1, 2, 4):
        seen = []
        for response in _walk(w, alice, f"{API}/conversations", {"limit": limit}):
            page = ok(response)
            assert page["next_cursor"] not in hidden
            assert not hidden & set(json.dumps(page).split('"'))
            seen += [c["id"] for c in page["data"]]
        assert seen == [c for c in reversed(made) if c not in hidden]
