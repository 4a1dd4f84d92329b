"""Collections and folders (issue 18, DESIGN.md 2.2): access and markings inherited down the
tree, moves in and out of marked folders, home folders, children listings; through the HTTP
API on SQLite and PostgreSQL, as an attacker would try it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.client import Client
from dhub.services.examples import read_document
from tests.integration.test_sharing_api import BUILDER, World, ok, react

API = "/api/v1"
MINE = "agents?is_builtin=false"  # the agents list without the built-ins everyone sees


class Tree:
    """alice's collection C > folder F > folder G > agent A; prompt P in F; bob in group team;
    carol an outsider; dan an admin without alice's marking."""

    def __init__(self, client: TestClient) -> None:
        self.w = w = World(client)
        self.alice, self.bob, self.carol = w.user("alice"), w.user("bob"), w.user("carol")
        self.dan = w.user("dan", admin=True)
        self.team = w.group("team", [self.bob])
        self.secret = w.marking("secret", [self.alice])
        self.c = self.make("alice", "collections", {"name": "C"})
        self.f = self.make("alice", "folders", {"name": "F", "collection_id": self.c})
        self.g = self.make("alice", "folders", {"name": "G", "folder_id": self.f})
        self.a = self.make("alice", "agents", react("A", folder_id=self.g))
        prompt = {"name": "P", "description": "p", "template": "hi", "folder_id": self.f}
        self.p = self.make("alice", "prompts", prompt)

    def call(self, who: str, method: str, path: str, body: Any = None) -> Any:
        user = getattr(self, who) if who != "admin" else BUILDER
        return self.w.call(user, method, f"{API}/{path}", body)

    def make(self, who: str, plural: str, body: dict[str, Any]) -> str:
        made: str = ok(self.call(who, "POST", plural, body), 201)["id"]
        return made

    def sees(self, who: str, path: str) -> bool:
        status = self.call(who, "GET", path).status_code
        assert status in (200, 404), (who, path, status)
        return status == 200

    def listed(self, who: str, path: str) -> list[str]:
        ids: list[str] = []
        params = ""
        while True:
            page = ok(self.call(who, "GET", f"{path}{params}"))
            ids += [item["id"] for item in page["data"]]
            if page["next_cursor"] is None:
                return ids
            sep = "&" if "?" in path else "?"
            params = f"{sep}limit=2&cursor={page['next_cursor']}"


@pytest.fixture
def t(client: TestClient) -> Tree:
    return Tree(client)


def test_the_collection_and_folders_hold_what_is_created_in_them(t: Tree) -> None:
    agent = ok(t.call("alice", "GET", f"agents/{t.a}"))
    assert agent["folder_id"] == t.g and agent["collection_id"] == t.c  # from its folder
    assert ok(t.call("alice", "GET", f"folders/{t.g}"))["collection_id"] == t.c
    assert t.listed("alice", f"folders/{t.f}/children") == sorted([t.g, t.p])
    assert t.listed("alice", f"collections/{t.c}/children") == [t.f]
    children = ok(t.call("alice", "GET", f"folders/{t.g}/children"))["data"]
    assert [(c["id"], c["category"], c["name"]) for c in children] == [(t.a, "agent", "A")]
    assert t.listed("alice", f"agents?folder_id={t.g}") == [t.a]
    assert t.a in t.listed("alice", f"agents?collection_id={t.c}")


def test_a_grant_on_a_folder_reaches_everything_below_it(t: Tree) -> None:
    assert not t.sees("bob", f"agents/{t.a}")
    ok(
        t.call(
            "alice", "POST", f"folders/{t.f}/grants", {"principal_id": t.team, "scope": "viewer"}
        ),
        201,
    )
    for path in (f"agents/{t.a}", f"prompts/{t.p}", f"folders/{t.g}", f"folders/{t.f}"):
        assert t.sees("bob", path), path
        assert ok(t.call("bob", "GET", path))["my_share_scope"] == "grant"
    assert t.listed("bob", MINE) == [t.a]
    assert t.listed("bob", f"folders/{t.f}/children") == sorted([t.g, t.p])
    refused = t.call("bob", "PATCH", f"agents/{t.a}", {"description": "bob was here"})
    assert refused.status_code == 403 and "'editor'" in refused.json()["detail"]
    assert not t.sees("bob", f"collections/{t.c}")  # nothing inherits upwards
    assert not t.sees("carol", f"agents/{t.a}") and t.listed("carol", MINE) == []
    # A grant on the collection reaches every folder in it.
    ok(
        t.call(
            "alice",
            "POST",
            f"collections/{t.c}/grants",
            {"principal_id": t.carol, "scope": "runner"},
        ),
        201,
    )
    assert ok(t.call("carol", "GET", f"agents/{t.a}"))["my_share_scope"] == "grant"
    assert t.call("carol", "POST", f"agents/{t.a}/runs", {"inputs": {}}).status_code != 403
    # Owning a folder is owning what is in it, whoever else owns it.
    ok(t.call("alice", "PATCH", f"agents/{t.a}", {"owners": [t.bob]}))
    assert ok(t.call("alice", "GET", f"agents/{t.a}"))["my_share_scope"] == "owner"
    assert ok(t.call("alice", "GET", f"agents/{t.a}"))["owners"][0]["id"] == t.bob  # its own


def test_a_marked_folder_hides_everything_below_it_from_admins_too(t: Tree) -> None:
    ok(
        t.call(
            "alice", "POST", f"folders/{t.f}/grants", {"principal_id": t.team, "scope": "editor"}
        ),
        201,
    )
    marked = ok(t.call("alice", "POST", f"folders/{t.g}/markings", {"marking_id": t.secret}))
    assert marked["markings"] == [t.secret] and marked["effective_markings"] == [t.secret]
    agent = ok(t.call("alice", "GET", f"agents/{t.a}"))
    assert agent["markings"] == [] and agent["effective_markings"] == [t.secret]
    random_id = "agent.01jzzzzzzzzzzzzzzzzzzzzzzz"
    for who in ("bob", "dan"):
        for path in (f"agents/{t.a}", f"folders/{t.g}", f"folders/{t.g}/children"):
            response = t.call(who, "GET", path)
            assert response.status_code == 404, (who, path)
        assert t.a not in t.listed(who, MINE)
        assert t.g not in t.listed(who, "folders")
        assert t.g not in t.listed(who, f"folders/{t.f}/children")
        missing = t.call(who, "GET", f"agents/{random_id}").json()["detail"]
        assert t.call(who, "GET", f"agents/{t.a}").json()["detail"] == missing.replace(
            random_id, t.a
        )
    assert t.sees("dan", f"folders/{t.f}") and t.sees("bob", f"prompts/{t.p}")
    # Nobody without the marking gets at it by reference either: an agent delegating to A.
    doc = react("planted")
    doc["agent"]["roles"] = [t.a]
    planted = t.call("bob", "POST", "agents", doc)
    assert planted.status_code == 422
    assert [e["loc"] for e in planted.json()["errors"]] == ["/agent/roles/0"]


def test_moves_in_and_out_of_marked_folders(t: Tree) -> None:
    ok(
        t.call(
            "alice", "POST", f"folders/{t.f}/grants", {"principal_id": t.team, "scope": "editor"}
        ),
        201,
    )
    ok(t.call("alice", "POST", f"folders/{t.g}/markings", {"marking_id": t.secret}))
    # In: the prompt moves into the marked folder and is gone for bob.
    assert t.sees("bob", f"prompts/{t.p}")
    moved = ok(t.call("alice", "PATCH", f"prompts/{t.p}", {"folder_id": t.g}))
    assert moved["folder_id"] == t.g and moved["effective_markings"] == [t.secret]
    assert not t.sees("bob", f"prompts/{t.p}") and t.p not in t.listed("bob", "prompts")
    # Out: only an owner who holds the marking takes something out from under it.
    admin = t.call("admin", "PATCH", f"agents/{t.a}", {"folder_id": t.f})  # holds it, not owner
    assert admin.status_code == 403 and t.secret in admin.json()["detail"]
    ok(t.call("alice", "PATCH", f"agents/{t.a}", {"folder_id": t.f}))
    assert t.sees("bob", f"agents/{t.a}")
    assert ok(t.call("bob", "GET", f"agents/{t.a}"))["effective_markings"] == []
    # An editor through a folder edits, but moving changes who has access: it takes sharing.
    edited = ok(t.call("bob", "PATCH", f"agents/{t.a}", {"description": "edited"}))
    assert edited["description"] == "edited"
    home = ok(t.call("bob", "GET", "folders/home"))["id"]
    stolen = t.call("bob", "PATCH", f"agents/{t.a}", {"folder_id": home})
    assert stolen.status_code == 403, stolen.text
    assert ok(t.call("alice", "GET", f"agents/{t.a}"))["folder_id"] == t.f


def test_a_folder_moves_with_everything_in_it(t: Tree) -> None:
    other = t.make("alice", "folders", {"name": "other", "collection_id": t.c})
    ok(
        t.call(
            "alice", "POST", f"folders/{other}/grants", {"principal_id": t.bob, "scope": "viewer"}
        ),
        201,
    )
    assert not t.sees("bob", f"agents/{t.a}")
    ok(t.call("alice", "PATCH", f"folders/{t.g}", {"folder_id": other}))
    assert t.sees("bob", f"agents/{t.a}") and t.listed("bob", MINE) == [t.a]
    cycle = t.call("alice", "PATCH", f"folders/{other}", {"folder_id": t.g})
    assert cycle.status_code == 422 and cycle.json()["errors"][0]["code"] == "folder_cycle"
    itself = t.call("alice", "PATCH", f"folders/{t.g}", {"folder_id": t.g})
    assert itself.status_code == 422
    # Out of the collection, into alice's home: what is in it leaves the collection too
    # (tests/integration/test_folders_move.py).
    ok(t.call("alice", "PATCH", f"folders/{t.g}", {"folder_id": None, "collection_id": None}))
    assert ok(t.call("alice", "GET", f"agents/{t.a}"))["collection_id"] is None
    assert not t.sees("bob", f"agents/{t.a}")


def test_placing_needs_edit_on_the_folder_and_says_nothing_of_what_is_there(t: Tree) -> None:
    ok(
        t.call(
            "alice", "POST", f"folders/{t.f}/grants", {"principal_id": t.bob, "scope": "viewer"}
        ),
        201,
    )
    random_folder = "folder.01jzzzzzzzzzzzzzzzzzzzzzzz"
    answers = set()
    for who, folder in (("carol", t.f), ("bob", t.f), ("carol", random_folder)):
        response = t.call(who, "POST", "agents", react("intruder", folder_id=folder))
        assert response.status_code == 422
        (error,) = response.json()["errors"]
        assert error["loc"] == "/folder_id" and error["code"] == "unknown_reference"
        answers.add(error["message"].replace(folder, "<id>"))
    assert len(answers) == 1  # the same words for unshared, read-only and missing
    wrong = t.call(
        "alice",
        "POST",
        "agents",
        react("x", folder_id=t.f, collection_id="collection.01jzzzzzzzzzzzzzzzzzzzzzzz"),
    )
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["loc"] == "/collection_id"
    top = t.make("alice", "agents", react("top", collection_id=t.c))
    assert ok(t.call("alice", "GET", f"agents/{top}"))["folder_id"] is None
    nested = t.call("alice", "POST", "collections", {"name": "D", "collection_id": t.c})
    assert nested.status_code == 422


def test_names_are_unique_within_a_folder_so_users_never_collide(t: Tree) -> None:
    mine = t.make("bob", "agents", react("same"))
    theirs = t.make("carol", "agents", react("same"))  # each in their own home folder
    homes = {
        ok(t.call(u, "GET", f"agents/{a}"))["folder_id"]
        for u, a in (("bob", mine), ("carol", theirs))
    }
    assert len(homes) == 2
    taken = t.call("alice", "POST", "agents", react("A", folder_id=t.g))
    assert taken.status_code == 409 and t.a in taken.json()["detail"]


def test_home_folders_and_emptiness(t: Tree) -> None:
    home = ok(t.call("carol", "GET", "folders/home"))
    assert home["type"] == "home" and home["my_share_scope"] == "owner"
    assert ok(t.call("carol", "GET", "folders"))["data"][0]["id"] == home["id"]
    assert t.call("carol", "DELETE", f"folders/{home['id']}").status_code == 409
    renamed = t.call("carol", "PATCH", f"folders/{home['id']}", {"name": "mine"})
    assert renamed.status_code == 422
    assert (
        ok(t.call("carol", "PATCH", f"folders/{home['id']}", {"description": "my things"}))[
            "version"
        ]
        == 2
    )
    assert not t.sees("bob", f"folders/{home['id']}")
    full = t.call("alice", "DELETE", f"folders/{t.g}")
    assert full.status_code == 409 and "not empty" in full.json()["detail"]
    ok(t.call("alice", "DELETE", f"agents/{t.a}"), 204)
    ok(t.call("alice", "DELETE", f"folders/{t.g}"), 204)
    assert t.call("alice", "DELETE", f"collections/{t.c}").status_code == 409
    # A user whose home folder is empty goes with it.
    assert t.w.client.delete(f"{API}/users/{t.carol}").status_code == 204
    assert t.call("admin", "GET", f"folders/{home['id']}").status_code == 404


def test_two_users_apply_the_same_example_and_each_gets_their_own(t: Tree) -> None:
    example = read_document(Path(__file__).parents[2] / "examples" / "ticket_triage.json")
    made = {}
    for who in ("bob", "carol"):
        user = getattr(t, who)
        sdk = Client(str(t.w.client.base_url), t.w.tokens[user], http=t.w.client)
        first = sdk.apply_agent(example)
        assert first.action == "created", who
        again = sdk.apply_agent(example)  # found again by name, in the user's own home
        assert again.action == "unchanged" and again.agent["id"] == first.agent["id"]
        made[who] = first.agent
    assert made["bob"]["id"] != made["carol"]["id"]
    assert made["bob"]["folder_id"] != made["carol"]["folder_id"]
    assert not t.sees("carol", f"agents/{made['bob']['id']}")


def _agent_moved_home_by_0011(connection: Any) -> tuple[Any, ...]:
    """Back to 0010, a user with a top-level agent as the old server stored it, then up."""
    from alembic import command
    from sqlalchemy import text

    from dhub.store.migrate import alembic_config

    command.downgrade(alembic_config(connection), "0010")
    connection.execute(text("INSERT INTO users (id, display_name, is_admin, created_at) "
                            "VALUES ('user.old', 'Old', false, 1)"))  # fmt: skip
    doc = '{"name":"legacy","folder_id":null,"description":"d","mode":"react"}'
    connection.execute(
        text("INSERT INTO agents (id, name, folder_key, description, mode, input_mode, version,"
             " document, is_builtin, markings, created_by, created_at, updated_at) VALUES"
             " ('agent.legacy', 'legacy', '', 'd', 'react', 'chat', 1, :doc, false, '[]',"
             " 'user.old', 1, 1)"), {"doc": doc},
    )  # fmt: skip
    command.upgrade(alembic_config(connection), "head")
    row = connection.execute(text("SELECT folder_id, folder_key, document FROM agents "
                                  "WHERE id = 'agent.legacy'")).one()  # fmt: skip
    home = connection.execute(text("SELECT id, type, created_by FROM resources WHERE "
                                   "folder_key = 'home:user.old'")).one()  # fmt: skip
    return (*row, *home)


async def test_migration_0011_moves_top_level_resources_home(settings: Any) -> None:
    from dhub.store.db import Database

    db = Database(settings.database_url)
    await db.migrate()
    try:
        folder_id, key, document, home, kind, owner = await db.run_sync(_agent_moved_home_by_0011)
    finally:
        await db.dispose()
    assert folder_id == key == home and kind == "home" and owner == "user.old"
    assert f'"folder_id":"{home}"' in document
