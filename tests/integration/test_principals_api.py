"""Users, groups, markings, tokens, /me and /audit over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import FIXTURES, load_json

API = "/api/v1"


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def user(client: TestClient, name: str, **extra: Any) -> dict[str, Any]:
    body = {"name": name, "display_name": name.title(), **extra}
    created: dict[str, Any] = ok(client.post(f"{API}/users", json=body), 201)
    return created


def token_for(client: TestClient, user_id: str) -> str:
    issued = ok(client.post(f"{API}/users/{user_id}/tokens", json={"name": "t"}), 201)
    token: str = issued["token"]
    return token


def as_(client: TestClient, token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_users_and_me(client: TestClient) -> None:
    alice = user(client, "alice", email="alice@example.com")
    assert alice["id"] == "user.alice"
    assert alice["is_admin"] is False
    token = token_for(client, "user.alice")
    me = ok(client.get(f"{API}/me", headers=as_(client, token)))
    assert me["id"] == "user.alice"
    assert me["groups"] == [] and me["markings"] == []
    assert [u["id"] for u in ok(client.get(f"{API}/users"))["data"]] == ["user.admin", "user.alice"]
    # A user edits its own profile, but may not make itself an admin.
    renamed = client.patch(
        f"{API}/users/user.alice", json={"display_name": "Al"}, headers=as_(client, token)
    )
    assert ok(renamed)["display_name"] == "Al"
    refused = client.patch(
        f"{API}/users/user.alice", json={"is_admin": True}, headers=as_(client, token)
    )
    assert refused.status_code == 403
    assert (
        client.post(
            f"{API}/users", json={"name": "x", "display_name": "X"}, headers=as_(client, token)
        ).status_code
        == 403
    )


def test_bad_user_input_changes_nothing(client: TestClient) -> None:
    bad = client.post(f"{API}/users", json={"name": "Not A Slug", "display_name": "x"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "/name"
    bad = client.post(f"{API}/users", json={"name": "bob", "display_name": "B", "email": "no"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "/email"
    user(client, "bob")
    assert client.post(f"{API}/users", json={"name": "bob", "display_name": "B"}).status_code == 409
    assert client.delete(f"{API}/users/user.admin").status_code == 409  # not yourself
    assert client.get(f"{API}/users/user.nobody").status_code == 404
    assert [u["id"] for u in ok(client.get(f"{API}/users"))["data"]] == ["user.admin", "user.bob"]


def test_groups_nest_without_cycles(client: TestClient) -> None:
    user(client, "carol")
    token = token_for(client, "user.carol")
    for name in ("ops", "eng", "all"):
        ok(client.post(f"{API}/groups", json={"name": name, "display_name": name}), 201)
    ok(client.post(f"{API}/groups/group.ops/members", json={"principal_id": "user.carol"}))
    ok(client.post(f"{API}/groups/group.eng/members", json={"principal_id": "group.ops"}))
    ok(client.post(f"{API}/groups/group.all/members", json={"principal_id": "group.eng"}))
    me = ok(client.get(f"{API}/me", headers=as_(client, token)))
    assert me["groups"] == ["group.all", "group.eng", "group.ops"]

    cycle = client.post(f"{API}/groups/group.ops/members", json={"principal_id": "group.all"})
    assert cycle.status_code == 409 and "cycle" in cycle.json()["detail"]
    itself = client.post(f"{API}/groups/group.ops/members", json={"principal_id": "group.ops"})
    assert itself.status_code == 409
    unknown = client.post(f"{API}/groups/group.ops/members", json={"principal_id": "group.ghost"})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["loc"] == "/principal_id"
    assert ok(client.get(f"{API}/groups/group.ops"))["members"] == ["user.carol"]

    assert client.delete(f"{API}/groups/group.eng/members/group.ops").status_code == 204
    me = ok(client.get(f"{API}/me", headers=as_(client, token)))
    assert me["groups"] == ["group.ops"]  # effective at once in this process


def test_markings_are_held_through_groups(client: TestClient) -> None:
    user(client, "dan")
    token = token_for(client, "user.dan")
    ok(client.post(f"{API}/groups", json={"name": "sec", "display_name": "Security"}), 201)
    ok(client.post(f"{API}/groups/group.sec/members", json={"principal_id": "user.dan"}))
    for name in ("secret", "other"):
        ok(client.post(f"{API}/markings", json={"name": name}), 201)
    ok(client.post(f"{API}/markings/marking.secret/members", json={"principal_id": "group.sec"}))
    assert ok(client.get(f"{API}/me", headers=as_(client, token)))["markings"] == ["marking.secret"]
    held = ok(client.get(f"{API}/markings", headers=as_(client, token)))["data"]
    assert [m["id"] for m in held] == ["marking.secret"]  # not the one it does not hold
    assert (
        client.get(f"{API}/markings/marking.other", headers=as_(client, token)).status_code == 404
    )
    assert (
        client.post(f"{API}/markings", json={"name": "x"}, headers=as_(client, token)).status_code
        == 403
    )
    assert client.delete(f"{API}/markings/marking.secret/members/group.sec").status_code == 204
    assert ok(client.get(f"{API}/me", headers=as_(client, token)))["markings"] == []


def test_tokens(client: TestClient) -> None:
    user(client, "erin")
    first = token_for(client, "user.erin")
    mine = ok(
        client.post(f"{API}/tokens", json={"name": "laptop"}, headers=as_(client, first)), 201
    )
    assert mine["user_id"] == "user.erin" and mine["token"].startswith("dhub_")
    listed = ok(client.get(f"{API}/tokens", headers=as_(client, mine["token"])))["data"]
    assert sorted(t["name"] for t in listed) == ["laptop", "t"]
    assert all("token" not in t and "token_hash" not in t for t in listed)
    # Another user's token is not yours to see or revoke.
    user(client, "frank")
    other = token_for(client, "user.frank")
    assert (
        client.get(
            f"{API}/tokens", params={"user_id": "user.erin"}, headers=as_(client, other)
        ).status_code
        == 403
    )
    assert (
        client.delete(f"{API}/tokens/{mine['id']}", headers=as_(client, other)).status_code == 404
    )

    assert (
        client.delete(f"{API}/tokens/{mine['id']}", headers=as_(client, first)).status_code == 204
    )
    assert client.get(f"{API}/me", headers=as_(client, mine["token"])).status_code == 401
    assert client.get(f"{API}/me", headers=as_(client, first)).status_code == 200
    past = client.post(
        f"{API}/tokens", json={"name": "old", "expires_at": 1}, headers=as_(client, first)
    )
    assert past.status_code == 422 and past.json()["errors"][0]["loc"] == "/expires_at"


def test_audit_records_who_did_what(client: TestClient) -> None:
    user(client, "gina")
    token = token_for(client, "user.gina")
    ok(client.post(f"{API}/groups", json={"name": "g", "display_name": "G"}), 201)
    ok(client.post(f"{API}/groups/group.g/members", json={"principal_id": "user.gina"}))
    entries = ok(client.get(f"{API}/audit"))["data"]
    actions = [(e["actor_id"], e["action"], e["target_id"]) for e in entries]
    assert actions[:4] == [
        ("user.admin", "group.member.add", "group.g"),
        ("user.admin", "group.create", "group.g"),
        ("user.admin", "token.create", entries[2]["target_id"]),
        ("user.admin", "user.create", "user.gina"),
    ]
    assert entries[0]["after"] == "user.gina"
    assert all(e["at"] > 0 for e in entries)
    only = ok(client.get(f"{API}/audit", params={"target_id": "group.g", "limit": 1}))
    assert [e["action"] for e in only["data"]] == ["group.member.add"]
    rest = ok(
        client.get(f"{API}/audit", params={"target_id": "group.g", "cursor": only["next_cursor"]})
    )
    assert [e["action"] for e in rest["data"]] == ["group.create"] and rest["next_cursor"] is None
    assert client.get(f"{API}/audit", headers=as_(client, token)).status_code == 403


def test_deleting_a_principal_never_orphans_an_agent(client: TestClient) -> None:
    user(client, "hal")
    hal = as_(client, token_for(client, "user.hal"))
    ok(client.post(f"{API}/groups", json={"name": "crew", "display_name": "Crew"}), 201)
    doc = load_json(FIXTURES / "valid" / "workflow_triage.json")
    mine = ok(client.post(f"{API}/agents", json=doc, headers=hal), 201)
    shared = ok(client.post(f"{API}/agents", json={**doc, "name": "shared"}, headers=hal), 201)
    ok(client.patch(f"{API}/agents/{shared['id']}", json={"owners": ["user.hal", "group.crew"]}))
    ok(client.post(f"{API}/agents/{mine['id']}/grants", json={"principal_id": "group.crew",
                                                            "scope": "viewer"}), 201)  # fmt: skip

    refused = client.delete(f"{API}/users/user.hal")
    assert refused.status_code == 409 and mine["id"] in refused.json()["detail"]
    assert ok(client.get(f"{API}/users/user.hal"))["id"] == "user.hal"  # nothing changed

    assert client.delete(f"{API}/groups/group.crew").status_code == 204
    after = ok(client.get(f"{API}/agents/{shared['id']}"))
    assert [o["id"] for o in after["owners"]] == ["user.hal"]
    assert ok(client.get(f"{API}/agents/{mine['id']}/grants"))["data"] == []


def test_required_profile_fields_cannot_be_nulled(client: TestClient) -> None:
    user(client, "ivy")
    refused = client.patch(f"{API}/users/user.ivy", json={"display_name": None, "is_admin": None})
    assert refused.status_code == 422
    assert {e["loc"] for e in refused.json()["errors"]} == {"/display_name", "/is_admin"}
    assert ok(client.get(f"{API}/users/user.ivy"))["display_name"] == "Ivy"
