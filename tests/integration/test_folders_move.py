"""Moving a folder with everything in it to another collection (issue 18, DESIGN.md 2.2):
what is inside goes with it, in its rows, documents and tree, and inherits from where it now
is; and no one moves, in a folder, what they could not move one by one. Through the HTTP API
on SQLite and PostgreSQL, the attacker first."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_folders import MINE, Tree
from tests.integration.test_sharing_api import ok, react


@pytest.fixture
def t(client: TestClient) -> Tree:
    return Tree(client)


def _grant(t: Tree, plural: str, target: str, who: str, scope: str) -> None:
    body = {"principal_id": who, "scope": scope}
    ok(t.call("alice", "POST", f"{plural}/{target}/grants", body), 201)


def _where(t: Tree, who: str, path: str) -> tuple[str | None, str | None]:
    found = ok(t.call(who, "GET", path))
    return found["folder_id"], found["collection_id"]


def test_no_one_moves_in_a_folder_what_they_could_not_move_one_by_one(t: Tree) -> None:
    d = t.make("alice", "collections", {"name": "D"})
    # An editor of the folder edits in it, but a move changes who inherits: it takes sharing.
    _grant(t, "folders", t.f, t.bob, "editor")
    bobs = t.make("bob", "collections", {"name": "bobs"})
    stolen = t.call("bob", "PATCH", f"folders/{t.f}", {"collection_id": bobs})
    assert stolen.status_code == 403, stolen.text
    # Something bob made in it and marked with a marking alice does not hold: she cannot see
    # it, so she could not move it, and moving the folder would move it.
    private = t.w.marking("private", [t.bob])
    hidden = t.make("bob", "agents", react("hidden", folder_id=t.g))
    ok(t.call("bob", "POST", f"agents/{hidden}/markings", {"marking_id": private}))
    assert not t.sees("alice", f"agents/{hidden}")
    other = t.make("alice", "folders", {"name": "other", "collection_id": t.c})
    for patch in ({"collection_id": d}, {"folder_id": other}, {"collection_id": None}):
        refused = t.call("alice", "PATCH", f"folders/{t.f}", patch)
        assert refused.status_code == 403, (patch, refused.text)
        detail = refused.json()["detail"]
        assert hidden not in detail and private not in detail and "private" not in detail
    assert _where(t, "alice", f"folders/{t.f}") == (None, t.c)  # nothing moved
    assert _where(t, "bob", f"agents/{hidden}") == (t.g, t.c)
    assert _where(t, "alice", f"agents/{t.a}") == (t.g, t.c)
    # An admin who holds the collection's marking, but is no owner, cannot take the folder
    # (and all in it) out from under it: that removes the marking from all of it.
    ok(t.call("bob", "DELETE", f"agents/{hidden}"), 204)
    red = t.w.marking("red", [t.alice, t.dan])
    ok(t.call("alice", "POST", f"collections/{t.c}/markings", {"marking_id": red}))
    _grant(t, "collections", d, t.dan, "editor")
    admin = t.call("dan", "PATCH", f"folders/{t.f}", {"collection_id": d})
    assert admin.status_code == 403 and red in admin.json()["detail"]
    assert _where(t, "alice", f"prompts/{t.p}") == (t.f, t.c)
    # carol, with no access to the folder, learns nothing: as for a folder that is not there.
    random_id = "folder.01jzzzzzzzzzzzzzzzzzzzzzzz"
    answers = {
        t.call("carol", "PATCH", f"folders/{f}", {"collection_id": d}).text.replace(f, "<id>")
        for f in (t.f, random_id)
    }
    assert len(answers) == 1
    # Into a collection the mover cannot edit: the one unreachable answer.
    _grant(t, "collections", d, t.bob, "viewer")
    shut = t.call("alice", "PATCH", f"folders/{t.f}", {"collection_id": bobs})
    assert shut.status_code == 422 and shut.json()["errors"][0]["loc"] == "/collection_id"


def test_a_folder_moves_to_another_collection_with_everything_in_it(t: Tree) -> None:
    red = t.w.marking("red", [t.alice])  # on C: left behind
    blue = t.w.marking("blue", [t.alice, t.bob])  # on D: taken on
    d = t.make("alice", "collections", {"name": "D"})
    _grant(t, "collections", t.c, t.carol, "viewer")  # carol: only through C
    _grant(t, "collections", d, t.bob, "runner")  # bob: only through D
    ok(t.call("alice", "POST", f"collections/{t.c}/markings", {"marking_id": red}))
    ok(t.call("alice", "POST", f"collections/{d}/markings", {"marking_id": blue}))
    everything = (f"folders/{t.f}", f"folders/{t.g}", f"agents/{t.a}", f"prompts/{t.p}")
    t.w.hold(red, t.carol)
    assert all(t.sees("carol", path) for path in everything)
    assert t.listed("carol", MINE) == [t.a]  # (and her cached reach with it)
    assert not any(t.sees("bob", path) for path in everything)
    assert t.listed("bob", MINE) == []

    moved = ok(t.call("alice", "PATCH", f"folders/{t.f}", {"collection_id": d}))
    assert (moved["folder_id"], moved["collection_id"]) == (None, d)
    for path, folder in zip(everything, (None, t.f, t.g, t.f), strict=True):
        found = ok(t.call("alice", "GET", path))
        assert (found["folder_id"], found["collection_id"]) == (folder, d), path
        assert found["effective_markings"] == [blue], path
    assert t.listed("alice", f"agents?collection_id={d}") == [t.a]
    assert t.listed("alice", f"agents?collection_id={t.c}") == []
    assert t.listed("alice", f"prompts?collection_id={d}") == [t.p]
    assert t.listed("alice", f"folders?collection_id={d}") == sorted([t.f, t.g])
    assert t.listed("alice", f"collections/{d}/children") == [t.f]
    assert t.listed("alice", f"collections/{t.c}/children") == []
    # Who had it only through C has lost it; who has D now has it, as D grants it.
    assert not any(t.sees("carol", path) for path in everything)
    assert t.listed("carol", MINE) == [] and t.listed("carol", "prompts") == []
    assert t.listed("bob", MINE) == [t.a]
    assert ok(t.call("bob", "GET", f"agents/{t.a}"))["my_share_scope"] == "grant"
    run = t.call("bob", "POST", f"agents/{t.a}/runs", {"inputs": {}})
    assert run.status_code != 403, run.text
    edit = t.call("bob", "PATCH", f"agents/{t.a}", {"description": "bob was here"})
    assert edit.status_code == 403
    # A document change is a version, here as for a single move: the agent's document now
    # says where it is, and its history where it was.
    agent = ok(t.call("alice", "GET", f"agents/{t.a}"))
    versions = ok(t.call("alice", "GET", f"agents/{t.a}/versions"))["data"]
    assert agent["version"] == 2 and [v["version"] for v in versions] == [2, 1]
    assert ok(t.call("alice", "GET", f"agents/{t.a}/versions/1"))["collection_id"] == t.c
    unchanged = ok(t.call("alice", "PATCH", f"agents/{t.a}", {"collection_id": d}))
    assert unchanged["version"] == 2  # the rewritten document is the stored form
    ok(t.call("alice", "DELETE", f"collections/{t.c}"), 204)  # nothing is left in C

    # Home (no collection): what is inside inherits nothing any more, and D's grant is gone.
    home = ok(t.call("alice", "PATCH", f"folders/{t.f}", {"collection_id": None}))
    assert home["folder_id"] == ok(t.call("alice", "GET", "folders/home"))["id"]
    for path in everything[1:]:
        found = ok(t.call("alice", "GET", path))
        assert found["collection_id"] is None and found["effective_markings"] == [], path
    assert t.listed("bob", MINE) == [] and not t.sees("bob", f"agents/{t.a}")
    assert t.listed("alice", f"agents?collection_id={d}") == []
    # Into a folder of a third collection: the collection comes from that folder.
    e = t.make("alice", "collections", {"name": "E"})
    h = t.make("alice", "folders", {"name": "H", "collection_id": e})
    _grant(t, "folders", h, t.carol, "viewer")
    ok(t.call("alice", "PATCH", f"folders/{t.f}", {"folder_id": h}))
    assert _where(t, "alice", f"agents/{t.a}") == (t.g, e)
    assert _where(t, "carol", f"prompts/{t.p}") == (t.f, e)
    assert t.listed("carol", f"agents?collection_id={e}") == [t.a]
