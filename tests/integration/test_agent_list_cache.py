"""Agent lists served from each server's cache of rendered agents (issue 23's API goal) never
show a stale or someone else's view: after every kind of change, made on this server or on
another one sharing the database, the list and GET agree and show the new state at once; a
caller never sees an agent it may not see, whoever's list put it in the cache. Through the
HTTP API on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_sharing_api import AGENTS, API, BUILDER, World, ok


@pytest.fixture
def other(settings: Settings) -> Iterator[TestClient]:
    """A second server on the same database, with a cache of its own (another process)."""
    with TestClient(create_app(settings)) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield c


class Views:
    """The world's callers, each read through both servers."""

    def __init__(self, w: World, servers: dict[str, TestClient]) -> None:
        self.w, self.servers = w, servers

    def listed(self, server: str, user: str, **params: Any) -> dict[str, dict[str, Any]]:
        client = self.servers[server]
        out: dict[str, dict[str, Any]] = {}
        query: dict[str, Any] = {"limit": 2, **params}  # small pages: cursors too
        while True:
            page = ok(client.get(AGENTS, params=query, headers=self.w.as_(user)))
            out.update((a["id"], a) for a in page["data"])
            if page["next_cursor"] is None:
                return out
            query["cursor"] = page["next_cursor"]

    def got(self, server: str, user: str, agent_id: str) -> dict[str, Any] | None:
        response = self.servers[server].get(f"{AGENTS}/{agent_id}", headers=self.w.as_(user))
        assert response.status_code in (200, 404), response.text
        return response.json() if response.status_code == 200 else None

    def check(self, users: list[str], ids: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
        """Every caller's list on both servers, each listed agent equal to its GET, and
        every agent the caller may GET listed; returns (server, user) -> that list."""
        seen = {}
        for server in self.servers:
            for user in users:
                listed = self.listed(server, user)
                for agent_id in ids:
                    assert listed.get(agent_id) == self.got(server, user, agent_id), (
                        server,
                        user,
                        agent_id,
                    )
                seen[server, user] = listed
        return seen


@pytest.mark.parametrize("writer", ["here", "elsewhere"])
def test_lists_follow_every_change_at_once_wherever_it_is_made(
    client: TestClient, other: TestClient, writer: str
) -> None:
    w = World(client)
    alice, bob, carol = w.user("alice"), w.user("bob"), w.user("carol")
    team = w.group("team", [carol])
    secret = w.marking("secret", [alice])
    a = w.agent("a", owners=[alice])
    b = w.agent("b", owners=[alice, bob])
    users, ids = [BUILDER, alice, bob, carol], [a, b]
    views = Views(w, {"here": client, "elsewhere": other})
    views.check(users, ids)  # every cache warm before each change
    write = World(other if writer == "elsewhere" else client)
    write.tokens = w.tokens

    def change(
        method: str, path: str, body: Any = None, status: int = 200, who: str = BUILDER
    ) -> None:
        ok(write.call(who, method, f"{API}/{path}", body), status)

    change("PATCH", f"agents/{a}", {"description": "changed"})
    seen = views.check(users, ids)
    assert seen["here", alice][a]["description"] == "changed"
    assert seen["here", alice][a]["version"] == 2

    change("PATCH", f"agents/{a}", {"name": "renamed"})
    assert views.check(users, ids)["elsewhere", alice][a]["name"] == "renamed"

    change("POST", f"agents/{a}/grants", {"principal_id": bob, "scope": "viewer"}, 201)
    seen = views.check(users, ids)
    assert seen["here", bob][a]["my_share_scope"] == "grant"
    assert seen["here", alice][a]["my_share_scope"] == "owner"
    assert seen["here", BUILDER][a]["my_share_scope"] == "admin"

    change("DELETE", f"agents/{a}/grants/{bob}", status=204)
    assert a not in views.check(users, ids)["here", bob]

    change("POST", f"agents/{a}/grants", {"principal_id": team, "scope": "runner"}, 201)
    assert views.check(users, ids)["elsewhere", carol][a]["my_share_scope"] == "grant"

    change("POST", f"agents/{a}/markings", {"marking_id": secret}, who=alice)
    seen = views.check(users, ids)
    assert a not in seen["here", carol] and a not in seen["elsewhere", carol]
    assert seen["here", BUILDER][a]["markings"] == [secret]

    change("DELETE", f"agents/{a}/markings/{secret}", who=alice)
    assert views.check(users, ids)["here", carol][a]["markings"] == []

    change("PATCH", f"agents/{a}", {"owners": [bob]})
    seen = views.check(users, ids)
    assert a not in seen["here", alice]
    assert [o["id"] for o in seen["here", bob][a]["owners"]] == [bob]
    assert seen["here", bob][a]["version"] == 3  # owners are no version: still re-rendered

    change("PATCH", f"users/{bob}", {"display_name": "Robert"})
    seen = views.check(users, ids)
    assert seen["here", bob][a]["owners"][0]["display_name"] == "Robert"
    assert seen["elsewhere", BUILDER][b]["owners"][1]["display_name"] == "Robert"

    change("PATCH", f"agents/{a}", {"tags": ["fresh"]})
    views.check(users, ids)
    assert list(views.listed("here", bob, tags="fresh")) == [a]

    folder = ok(write.call(BUILDER, "POST", f"{API}/folders", {"name": "F"}), 201)["id"]
    change("POST", f"folders/{folder}/grants", {"principal_id": alice, "scope": "editor"}, 201)
    change("PATCH", f"agents/{b}", {"folder_id": folder})
    seen = views.check(users, ids)
    assert seen["here", alice][b]["folder_id"] == folder

    change("POST", f"folders/{folder}/markings", {"marking_id": secret})
    seen = views.check(users, ids)
    assert b not in seen["here", bob] and b not in seen["elsewhere", bob]  # bob lacks it
    assert seen["here", alice][b]["effective_markings"] == [secret]

    change("DELETE", f"agents/{a}", status=204)
    seen = views.check(users, ids)
    assert all(a not in listed for listed in seen.values())


def test_a_caller_never_sees_what_another_callers_list_cached(
    client: TestClient, other: TestClient
) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    secret = w.marking("secret", [alice])
    mine = w.agent("mine", owners=[alice])
    marked = w.agent("marked", owners=[alice, bob], markings=[secret])
    shared = w.agent("shared", owners=[alice], grants={bob: "viewer"})
    views = Views(w, {"here": client, "elsewhere": other})
    for server in ("here", "elsewhere"):
        everything = views.listed(server, BUILDER)  # the admin's list fills the cache first
        assert {mine, marked, shared} <= set(everything)
        assert set(views.listed(server, alice)) >= {mine, marked, shared}
        bobs = views.listed(server, bob)
        assert mine not in bobs and marked not in bobs  # not his / marked beyond him
        assert bobs[shared]["my_share_scope"] == "grant"
        assert views.listed(server, alice)[shared]["my_share_scope"] == "owner"
        assert views.listed(server, BUILDER)[shared]["my_share_scope"] == "admin"
        assert mine not in views.listed(server, bob, q="mine")
        assert marked not in views.listed(server, bob, name="marked")


def test_without_the_cache_lists_are_the_same(settings: Settings, client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    ids = [w.agent(f"a{i}", owners=[alice]) for i in range(3)]
    uncached = Settings(**{**vars(settings), "list_cache_mb": 0})
    with TestClient(create_app(uncached)) as plain:
        plain.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        views = Views(w, {"cached": client, "plain": plain})
        for _ in range(2):  # the second time from the cache
            seen = views.check([BUILDER, alice], ids)
            assert seen["cached", alice] == seen["plain", alice]
            assert seen["cached", BUILDER] == seen["plain", BUILDER]
