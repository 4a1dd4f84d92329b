"""``GET /api/v1/folders/paths``: where folders and collections are, by name, for the ones
the caller can read (the CLI shows these instead of ids); on SQLite and PostgreSQL, the
attacker first."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_folders import Tree
from tests.integration.test_sharing_api import ok, react


@pytest.fixture
def t(client: TestClient) -> Tree:
    return Tree(client)


def _paths(t: Tree, who: str, *ids: str) -> dict[str, str]:
    query = "&".join(f"id={i}" for i in ids)
    found = ok(t.call(who, "GET", f"folders/paths?{query}"))["data"]
    return {item["id"]: item["path"] for item in found}


def test_paths_say_nothing_of_what_the_caller_cannot_read(t: Tree) -> None:
    random_folder = "folder.01jzzzzzzzzzzzzzzzzzzzzzzz"
    everything = (t.c, t.f, t.g, t.a, t.p, random_folder)
    assert _paths(t, "carol", *everything) == {}  # as for ids that do not exist
    assert _paths(t, "bob", t.g) == {}
    # A grant on G alone: G by name, what is above it (which bob cannot read) as "…".
    body = {"principal_id": t.bob, "scope": "viewer"}
    ok(t.call("alice", "POST", f"folders/{t.g}/grants", body), 201)
    assert _paths(t, "bob", *everything) == {t.g: "…/G"}
    # A marking on F hides F and G from an admin without it, and their names with them.
    assert _paths(t, "dan", t.f, t.g) == {t.f: "C/F", t.g: "C/F/G"}
    ok(t.call("alice", "POST", f"folders/{t.f}/markings", {"marking_id": t.secret}))
    assert _paths(t, "dan", *everything) == {t.c: "C"}
    assert _paths(t, "bob", t.g) == {}
    # Agents and prompts are not containers: no path, whoever asks.
    assert _paths(t, "alice", t.a, t.p) == {}
    too_many = "&".join(["id=" + random_folder] * 201)
    refused = t.call("alice", "GET", f"folders/paths?{too_many}")
    assert refused.status_code == 422 and refused.json()["errors"][0]["loc"] == "/query/id"


def test_paths_from_the_top(t: Tree) -> None:
    assert _paths(t, "alice", t.c, t.f, t.g) == {t.c: "C", t.f: "C/F", t.g: "C/F/G"}
    home = ok(t.call("alice", "GET", "folders/home"))["id"]
    reports = t.make("alice", "folders", {"name": "reports"})
    weekly = t.make("alice", "folders", {"name": "weekly", "folder_id": reports})
    t.make("alice", "agents", react("filed", folder_id=weekly))
    assert _paths(t, "alice", home, reports, weekly) == {
        home: "home",
        reports: "home/reports",
        weekly: "home/reports/weekly",
    }
    # Given a grant on reports, bob reads it and what is in it, but not alice's home.
    body = {"principal_id": t.bob, "scope": "viewer"}
    ok(t.call("alice", "POST", f"folders/{reports}/grants", body), 201)
    assert _paths(t, "bob", home, reports, weekly) == {
        reports: "…/reports",
        weekly: "…/reports/weekly",
    }
    # Comma-separated ids work as repeated ones.
    listed = ok(t.call("alice", "GET", f"folders/paths?id={t.f},{t.g}"))["data"]
    assert [item["id"] for item in listed] == sorted([t.f, t.g])
