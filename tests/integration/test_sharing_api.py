"""Owners, grants, markings and their audit entries over HTTP, on SQLite and PostgreSQL.

``World`` builds principals and agents through the API as the admin; the access matrix and the
property test use it too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import FIXTURES, load_json

API = "/api/v1"
AGENTS = f"{API}/agents"
BUILDER = "user.admin"  # the conftest client's user: builds every world


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def react(name: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(load_json(FIXTURES / "valid" / "react_support.json"))
    doc.update(name=name, **extra)
    return doc


class World:
    """Users (each with a token), groups, markings and agents, made through the HTTP API by
    the admin, who holds every marking it creates so that it can mark its agents."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.tokens: dict[str, str] = {}

    def user(self, name: str, *, admin: bool = False) -> str:
        body = {"name": name, "display_name": name.title(), "is_admin": admin}
        user_id: str = ok(self.client.post(f"{API}/users", json=body), 201)["id"]
        issued = ok(self.client.post(f"{API}/users/{user_id}/tokens", json={"name": "t"}), 201)
        self.tokens[user_id] = issued["token"]
        return user_id

    def group(self, name: str, members: Iterable[str] = ()) -> str:
        body = {"name": name, "display_name": name.title()}
        group_id: str = ok(self.client.post(f"{API}/groups", json=body), 201)["id"]
        for member in members:
            self.join(group_id, member)
        return group_id

    def join(self, group_id: str, member: str) -> None:
        url = f"{API}/groups/{group_id}/members"
        response = self.client.post(url, json={"principal_id": member})
        assert response.status_code in (200, 201), response.text

    def marking(self, name: str, holders: Iterable[str] = ()) -> str:
        marking_id: str = ok(self.client.post(f"{API}/markings", json={"name": name}), 201)["id"]
        for holder in (BUILDER, *holders):
            self.hold(marking_id, holder)
        return marking_id

    def hold(self, marking_id: str, principal_id: str) -> None:
        url = f"{API}/markings/{marking_id}/members"
        response = self.client.post(url, json={"principal_id": principal_id})
        assert response.status_code in (200, 201), response.text

    def agent(
        self,
        name: str,
        owners: Iterable[str] = (BUILDER,),
        grants: Mapping[str, str] | None = None,
        markings: Iterable[str] = (),
        **extra: Any,
    ) -> str:
        """An agent with exactly these owners, grants and markings."""
        agent_id: str = ok(self.client.post(AGENTS, json=react(name, **extra)), 201)["id"]
        for principal_id, scope in (grants or {}).items():
            body = {"principal_id": principal_id, "scope": scope}
            ok(self.client.post(f"{AGENTS}/{agent_id}/grants", json=body), 201)
        for marking_id in markings:
            ok(self.client.post(f"{AGENTS}/{agent_id}/markings", json={"marking_id": marking_id}))
        owners = sorted(owners)
        if owners != [BUILDER]:
            ok(self.client.patch(f"{AGENTS}/{agent_id}", json={"owners": owners}))
        return agent_id

    def as_(self, user_id: str) -> dict[str, str]:
        if user_id == BUILDER:
            return {}
        return {"Authorization": f"Bearer {self.tokens[user_id]}"}

    def call(self, user_id: str, method: str, url: str, body: Any = None) -> Any:
        kwargs: dict[str, Any] = {"headers": self.as_(user_id)}
        if body is not None:
            kwargs["json"] = body
        return self.client.request(method, url, **kwargs)

    def listed(self, user_id: str, **params: Any) -> dict[str, dict[str, Any]]:
        """Every agent the user's list shows (all pages), by id."""
        out: dict[str, dict[str, Any]] = {}
        query: dict[str, Any] = {"limit": 200, **params}
        while True:
            page = ok(self.client.get(AGENTS, params=query, headers=self.as_(user_id)))
            out.update((a["id"], a) for a in page["data"])
            if page["next_cursor"] is None:
                return out
            query["cursor"] = page["next_cursor"]

    def audit(self, target_id: str) -> list[dict[str, Any]]:
        """The agent's audit entries, oldest first."""
        entries: list[dict[str, Any]] = ok(
            self.client.get(f"{API}/audit", params={"target_id": target_id, "limit": 200})
        )["data"]
        return entries[::-1]


def _actions(world: World, agent_id: str) -> list[tuple[str, str, Any, Any]]:
    return [(e["actor_id"], e["action"], e["before"], e["after"]) for e in world.audit(agent_id)]


def test_owners_are_replaced_through_patch(client: TestClient) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    ops = w.group("ops", [bob])
    agent_id = w.agent("shared")
    url = f"{AGENTS}/{agent_id}"

    body = ok(client.patch(url, json={"owners": [ops, alice, alice]}))
    assert [(o["id"], o["type"], o["display_name"]) for o in body["owners"]] == [
        (ops, "group", "Ops"),
        (alice, "user", "Alice"),
    ]
    assert body["version"] == 1  # owners are not part of the document
    assert body["my_share_scope"] == "admin"  # the admin gave its ownership away
    assert ok(w.call(alice, "GET", url))["my_share_scope"] == "owner"
    assert ok(w.call(bob, "GET", url))["my_share_scope"] == "owner"  # through group.ops

    # An owner adds public.all: every user owns it now.
    carol = w.user("carol")
    assert w.call(carol, "GET", url).status_code == 404
    body = ok(w.call(alice, "PATCH", url, {"owners": [alice, "public.all"]}))
    assert [o["id"] for o in body["owners"]] == ["public.all", alice]
    assert body["owners"][0]["type"] == "public"
    assert ok(w.call(carol, "GET", url))["my_share_scope"] == "owner"

    assert _actions(w, agent_id) == [
        (BUILDER, "agent.create", None, 1),
        (BUILDER, "agent.owners", [BUILDER], [ops, alice]),
        (alice, "agent.owners", [ops, alice], ["public.all", alice]),
    ]


def test_owners_and_document_change_together(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    agent_id = w.agent("both")
    body = ok(client.patch(f"{AGENTS}/{agent_id}", json={"owners": [alice], "description": "x"}))
    assert body["description"] == "x" and body["version"] == 2
    assert [o["id"] for o in body["owners"]] == [alice]
    assert [a[1:] for a in _actions(w, agent_id)] == [
        ("agent.create", None, 1),
        ("agent.owners", [BUILDER], [alice]),
        ("agent.update", 1, 2),
    ]


def test_bad_owners_change_nothing(client: TestClient) -> None:
    w = World(client)
    w.group("ops")
    agent_id = w.agent("guarded")
    url = f"{AGENTS}/{agent_id}"
    before = ok(client.get(url))
    cases: list[tuple[Any, list[str]]] = [
        ([], ["/owners"]),
        (None, ["/owners"]),
        ("user.admin", ["/owners"]),
        (["user.nobody", "group.ops", 3, "group.ghost", "robot.x"], [
            "/owners/0", "/owners/2", "/owners/3", "/owners/4"
        ]),
    ]  # fmt: skip
    for owners, locs in cases:
        response = client.patch(url, json={"owners": owners})
        assert response.status_code == 422, response.text
        assert [e["loc"] for e in response.json()["errors"]] == locs
    unknown = client.patch(url, json={"owners": ["group.ghost"]}).json()["errors"][0]
    assert unknown["code"] == "unknown_principal" and "group.ghost" in unknown["message"]
    # Document and owner problems are reported together, and nothing is stored.
    both = client.patch(url, json={"owners": [], "mode": "sideways"})
    assert [e["loc"] for e in both.json()["errors"]] == ["/mode", "/owners"]
    assert ok(client.get(url)) == before
    assert [a[1] for a in _actions(w, agent_id)] == ["agent.create"]


def test_owners_are_rejected_in_create(client: TestClient) -> None:
    response = client.post(AGENTS, json={**react("x"), "owners": ["user.admin"]})
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["loc"] == "/owners" and "PATCH" in error["message"]


def test_who_may_change_owners(client: TestClient) -> None:
    w = World(client)
    ed, viewer, alice = w.user("ed"), w.user("vic"), w.user("alice")
    agent_id = w.agent("who", owners=[alice], grants={ed: "editor", viewer: "viewer"})
    url = f"{AGENTS}/{agent_id}"
    refused = w.call(ed, "PATCH", url, {"owners": [ed]})
    assert refused.status_code == 403 and "owner" in refused.json()["detail"]
    # An editor may send the owners unchanged (e.g. with a document change).
    body = ok(w.call(ed, "PATCH", url, {"owners": [alice], "description": "by ed"}))
    assert body["my_share_scope"] == "grant" and body["version"] == 2
    # Bad owners from a non-owner: refused before they are validated.
    assert w.call(ed, "PATCH", url, {"owners": []}).status_code == 403
    refused = w.call(viewer, "PATCH", url, {"description": "by vic"})
    assert refused.status_code == 403 and "'editor'" in refused.json()["detail"]
    # An owner may give its ownership away; then it sees nothing more.
    body = ok(w.call(alice, "PATCH", url, {"owners": [ed]}))
    assert body["my_share_scope"] is None
    assert w.call(alice, "GET", url).status_code == 404
    assert ok(w.call(ed, "GET", url))["my_share_scope"] == "owner"


def test_grants(client: TestClient) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    agent_id = w.agent("granted", owners=[alice])
    url = f"{AGENTS}/{agent_id}/grants"
    assert w.call(bob, "GET", f"{AGENTS}/{agent_id}").status_code == 404

    grant = ok(w.call(alice, "POST", url, {"principal_id": bob, "scope": "viewer"}), 201)
    assert grant == {"principal_id": bob, "type": "user", "display_name": "Bob", "scope": "viewer"}
    assert ok(w.call(bob, "GET", f"{AGENTS}/{agent_id}"))["my_share_scope"] == "grant"
    assert ok(w.call(alice, "POST", url, {"principal_id": bob, "scope": "viewer"}))  # same: 200
    changed = ok(w.call(alice, "POST", url, {"principal_id": bob, "scope": "editor"}))
    assert changed["scope"] == "editor"
    ok(w.call(alice, "POST", url, {"principal_id": "public.all", "scope": "runner"}), 201)
    listing = ok(w.call(bob, "GET", url))["data"]  # grantees may read them
    assert [(g["principal_id"], g["type"], g["display_name"], g["scope"]) for g in listing] == [
        ("public.all", "public", "All users", "runner"),
        (bob, "user", "Bob", "editor"),
    ]
    # Grantees, even editors, may not share.
    refused = w.call(bob, "POST", url, {"principal_id": bob, "scope": "viewer"})
    assert refused.status_code == 403
    assert w.call(bob, "DELETE", f"{url}/{bob}").status_code == 403

    assert w.call(alice, "DELETE", f"{url}/{bob}").status_code == 204
    missing = w.call(alice, "DELETE", f"{url}/{bob}")
    assert missing.status_code == 404 and bob in missing.json()["detail"]
    assert ok(w.call(bob, "GET", f"{AGENTS}/{agent_id}"))["my_share_scope"] == "grant"  # public
    ok(w.call(alice, "DELETE", f"{url}/public.all"), 204)
    assert w.call(bob, "GET", f"{AGENTS}/{agent_id}").status_code == 404
    assert w.call(bob, "GET", url).status_code == 404

    assert _actions(w, agent_id)[2:] == [
        (alice, "agent.grant", None, {"principal_id": bob, "scope": "viewer"}),
        (
            alice,
            "agent.grant",
            {"principal_id": bob, "scope": "viewer"},
            {"principal_id": bob, "scope": "editor"},
        ),
        (alice, "agent.grant", None, {"principal_id": "public.all", "scope": "runner"}),
        (alice, "agent.ungrant", {"principal_id": bob, "scope": "editor"}, None),
        (alice, "agent.ungrant", {"principal_id": "public.all", "scope": "runner"}, None),
    ]


def test_grants_through_nested_groups(client: TestClient) -> None:
    w = World(client)
    dan = w.user("dan")
    inner = w.group("inner", [dan])
    outer = w.group("outer", [inner])
    agent_id = w.agent("nested", grants={outer: "runner"})
    url = f"{AGENTS}/{agent_id}"
    assert ok(w.call(dan, "GET", url))["my_share_scope"] == "grant"
    assert agent_id in w.listed(dan)
    refused = w.call(dan, "PATCH", url, {"description": "no"})
    assert refused.status_code == 403 and "'runner'" in refused.json()["detail"]
    ok(client.post(f"{url}/grants", json={"principal_id": inner, "scope": "editor"}), 201)
    assert ok(w.call(dan, "PATCH", url, {"description": "yes"}))["version"] == 2  # best grant


def test_bad_grants_change_nothing(client: TestClient) -> None:
    w = World(client)
    bob = w.user("bob")
    agent_id = w.agent("strict")
    url = f"{AGENTS}/{agent_id}/grants"
    cases: list[tuple[Any, list[str]]] = [
        ({"principal_id": "group.ghost", "scope": "viewer"}, ["/principal_id"]),
        ({"principal_id": "user.nobody", "scope": "viewer"}, ["/principal_id"]),
        ({"principal_id": bob, "scope": "owner"}, ["/scope"]),
        ({"principal_id": bob}, ["/scope"]),
        ({"scope": "viewer", "extra": 1}, ["/principal_id", "/extra"]),
        ({"principal_id": 7, "scope": ""}, ["/principal_id", "/scope"]),
        ([bob], [""]),
    ]
    for body, locs in cases:
        response = client.post(url, json=body)
        assert response.status_code == 422, (body, response.text)
        assert [e["loc"] for e in response.json()["errors"]] == locs, body
    assert ok(client.get(url))["data"] == []
    assert w.call(bob, "GET", f"{AGENTS}/{agent_id}").status_code == 404
    assert [a[1] for a in _actions(w, agent_id)] == ["agent.create"]
    assert client.post(f"{AGENTS}/agent.nope/grants", json={}).status_code == 404


def test_markings_hide_agents_from_everyone_without_them(client: TestClient) -> None:
    w = World(client)
    alice, bob, root = w.user("alice"), w.user("bob"), w.user("root", admin=True)
    secret = w.marking("secret", [alice])
    agent_id = w.agent("marked", owners=[alice], grants={bob: "editor"})
    url = f"{AGENTS}/{agent_id}"

    body = ok(w.call(alice, "POST", f"{url}/markings", {"marking_id": secret}))
    assert body["markings"] == [secret] and body["my_share_scope"] == "owner"
    assert ok(w.call(alice, "POST", f"{url}/markings", {"marking_id": secret}))["markings"] == [
        secret
    ]  # idempotent
    for who in (bob, root):  # a grantee and an admin without the marking: as if it did not exist
        assert w.call(who, "GET", url).status_code == 404
        assert w.call(who, "GET", f"{url}/grants").status_code == 404
        assert w.call(who, "PATCH", url, {"description": "x"}).status_code == 404
        assert w.call(who, "DELETE", url).status_code == 404
        assert agent_id not in w.listed(who)
    assert agent_id in w.listed(alice)
    # Through a group, holding the marking shows the agent again.
    cleared = w.group("cleared", [bob])
    w.hold(secret, cleared)
    assert ok(w.call(bob, "GET", url))["markings"] == [secret]
    assert agent_id in w.listed(bob)
    # Only an owner removes it, and then the admin sees the agent again.
    assert w.call(bob, "DELETE", f"{url}/markings/{secret}").status_code == 403
    assert ok(w.call(alice, "DELETE", f"{url}/markings/{secret}"))["markings"] == []
    assert ok(w.call(root, "GET", url))["my_share_scope"] == "admin"
    assert agent_id in w.listed(root)
    missing = w.call(alice, "DELETE", f"{url}/markings/{secret}")
    assert missing.status_code == 404 and secret in missing.json()["detail"]

    assert _actions(w, agent_id)[-2:] == [
        (alice, "agent.mark", [], [secret]),
        (alice, "agent.unmark", [secret], []),
    ]


def test_markings_are_sorted_and_filter_lists(client: TestClient) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    a = w.marking("a", [alice, bob])
    b = w.marking("b", [alice])
    agent_id = w.agent("two", owners=[alice], grants={bob: "viewer"})
    for marking_id in (b, a):
        ok(w.call(alice, "POST", f"{AGENTS}/{agent_id}/markings", {"marking_id": marking_id}))
    assert ok(w.call(alice, "GET", f"{AGENTS}/{agent_id}"))["markings"] == [a, b]
    assert w.listed(alice)[agent_id]["markings"] == [a, b]
    assert agent_id not in w.listed(bob)  # holds a, not b
    ok(w.call(alice, "DELETE", f"{AGENTS}/{agent_id}/markings/{b}"))
    assert w.listed(bob)[agent_id]["markings"] == [a]
    assert ok(w.call(bob, "GET", f"{AGENTS}/{agent_id}"))["markings"] == [a]


def test_marking_needs_an_owner_who_holds_it(client: TestClient) -> None:
    w = World(client)
    alice, ed, root = w.user("alice"), w.user("ed"), w.user("root", admin=True)
    secret = w.marking("secret", [ed, root])
    w.marking("other")  # held by the admin only
    agent_id = w.agent("guarded", owners=[alice], grants={ed: "editor"})
    url = f"{AGENTS}/{agent_id}/markings"
    before = ok(client.get(f"{AGENTS}/{agent_id}"))

    refused = w.call(alice, "POST", url, {"marking_id": secret})  # owner, does not hold it
    assert refused.status_code == 403 and secret in refused.json()["detail"]
    # A marking that does not exist reads exactly like one the caller lacks.
    ghost = w.call(alice, "POST", url, {"marking_id": "marking.ghost"})
    assert ghost.status_code == 403
    assert ghost.json()["detail"] == refused.json()["detail"].replace(secret, "marking.ghost")
    for who in (ed, root):  # holds it, but is a grantee / an admin, not an owner
        refused = w.call(who, "POST", url, {"marking_id": secret})
        assert refused.status_code == 403 and "owner" in refused.json()["detail"]
    for body, loc in (({}, "/marking_id"), ({"marking_id": 1}, "/marking_id"), ([], "")):
        response = w.call(alice, "POST", url, body)
        assert response.status_code == 422 and response.json()["errors"][0]["loc"] == loc
    assert w.call(alice, "DELETE", f"{url}/{secret}").status_code == 404  # not on it
    assert ok(client.get(f"{AGENTS}/{agent_id}")) == before
    assert [a[1] for a in _actions(w, agent_id)] == ["agent.create", "agent.grant", "agent.owners"]


def test_agent_lifecycle_is_audited(client: TestClient) -> None:
    w = World(client)
    agent_id = w.agent("life")
    ok(client.patch(f"{AGENTS}/{agent_id}", json={"description": "two"}))
    ok(client.patch(f"{AGENTS}/{agent_id}", json={"description": "two"}))  # no change: no entry
    ok(client.delete(f"{AGENTS}/{agent_id}"), 204)
    assert _actions(w, agent_id) == [
        (BUILDER, "agent.create", None, 1),
        (BUILDER, "agent.update", 1, 2),
        (BUILDER, "agent.delete", 2, None),
    ]
    # A refused change writes nothing.
    other = w.agent("other")
    assert client.patch(f"{AGENTS}/{other}", json={"mode": "sideways"}).status_code == 422
    assert [a[1] for a in _actions(w, other)] == ["agent.create"]
