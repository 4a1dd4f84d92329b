"""The agent endpoints over HTTP, on SQLite and on PostgreSQL."""

from __future__ import annotations

import copy
import time
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import BUILTIN_IDS, BUILTIN_REACT_IDS, BUILTIN_WORKFLOW_IDS, FIXTURES, load_json

API = "/api/v1/agents"


def react(name: str, **extra: Any) -> dict[str, Any]:
    doc = copy.deepcopy(load_json(FIXTURES / "valid" / "react_support.json"))
    doc.update(name=name, **extra)
    return doc


def home(client: TestClient) -> str:
    """The caller's home folder id."""
    response = client.get("/api/v1/folders/home")
    assert response.status_code == 200, response.text
    found: str = response.json()["id"]
    return found


def container(client: TestClient, plural: str, name: str, **fields: Any) -> str:
    """A new folder or collection's id."""
    response = client.post(f"/api/v1/{plural}", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    made: str = response.json()["id"]
    return made


def create(client: TestClient, doc: dict[str, Any]) -> dict[str, Any]:
    response = client.post(API, json=doc)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_create_sets_the_server_envelope(client: TestClient) -> None:
    before = int(time.time() * 1000)
    body = create(client, react("a"))
    assert body["id"].startswith("agent.") and body["item"] == body["id"]
    assert before <= body["created_at"] == body["updated_at"] <= int(time.time() * 1000) + 1
    assert body["version"] == 1 and body["markings"] == [] and body["is_builtin"] is False
    assert body["my_share_scope"] == "owner"
    assert [o["id"] for o in body["owners"]] == ["user.admin"]
    assert body["owners"][0]["type"] == "user" and body["owners"][0]["display_name"]


def test_defaults_are_filled_in(client: TestClient) -> None:
    body = create(
        client,
        {
            "name": "minimal",
            "description": "d",
            "agent": {"instructions": "hi", "model_provider": "openai", "model": "m"},
        },
    )
    assert body["input_mode"] == "chat" and body["mode"] == "react"
    assert body["category"] == "agent"
    assert body["agent"]["max_iterations"] == 50
    assert body["agent"]["tools"] == [] and body["agent"]["prompts"] == []
    assert body["tables"] == body["templates"] == body["ontologies"] == []


def test_get_unknown_is_404(client: TestClient) -> None:
    response = client.get(f"{API}/agent.nope")
    assert response.status_code == 404
    assert "agent.nope" in response.json()["detail"]


def test_no_token_or_bad_token_is_401(client: TestClient) -> None:
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}):
        response = client.get(API, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    assert client.get("/healthz", headers={"Authorization": ""}).status_code == 200


def test_name_is_unique_per_folder(client: TestClient) -> None:
    first = create(client, react("dup"))
    response = client.post(API, json=react("dup"))
    assert response.status_code == 409
    assert first["id"] in response.json()["detail"]
    assert first["folder_id"] == home(client)  # what has no folder goes to the home folder
    folder = container(client, "folders", "x")
    other_folder = create(client, react("dup", folder_id=folder))
    assert other_folder["folder_id"] == folder
    rename = client.patch(f"{API}/{other_folder['id']}", json={"folder_id": None})  # home
    assert rename.status_code == 409 and first["id"] in rename.json()["detail"]


def test_server_owned_fields_and_markings_are_rejected(client: TestClient) -> None:
    response = client.post(API, json={**react("x"), "id": "agent.mine", "markings": ["m"]})
    assert response.status_code == 422
    assert {e["loc"] for e in response.json()["errors"]} >= {"/id", "/markings"}
    agent = create(client, react("y"))
    response = client.patch(f"{API}/{agent['id']}", json={"markings": ["m"]})
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["errors"]] == ["/markings"]
    assert client.get(f"{API}/{agent['id']}").json()["version"] == 1


def test_every_error_is_reported_at_once(client: TestClient) -> None:
    doc = react("bad", mode="sideways")
    doc["agent"]["max_iterations"] = "many"
    doc["agent"]["compaction"]["summary_max_tokens"] = 5
    doc["surprise"] = 1
    response = client.post(API, json=doc)
    assert response.status_code == 422
    locs = {e["loc"] for e in response.json()["errors"]}
    assert locs == {
        "/mode",
        "/agent/max_iterations",
        "/agent/compaction/summary_max_tokens",
        "/surprise",
    }


def test_body_that_is_not_json_or_not_an_object(client: TestClient) -> None:
    response = client.post(API, content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and response.json()["errors"][0]["code"] == "json_invalid"
    response = client.post(API, json=[1, 2])
    assert response.status_code == 422 and response.json()["errors"][0]["loc"] == ""


def test_merge_patch_then_full_validation(client: TestClient) -> None:
    agent = create(client, react("p", alias="Old", tags=["a", "b"]))
    url = f"{API}/{agent['id']}"
    response = client.patch(
        url,
        json={"alias": None, "tags": ["c"], "agent": {"compaction": {"trigger_ratio": 0.9}}},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["alias"] is None and body["tags"] == ["c"]
    assert body["agent"]["compaction"] == {
        "enabled": True,
        "trigger_ratio": 0.9,
        "target_ratio": 0.5,
        "summary_max_tokens": 512,
    }
    assert body["agent"]["instructions"] == agent["agent"]["instructions"]
    assert body["version"] == 2 and body["updated_at"] >= agent["updated_at"]
    assert body["created_at"] == agent["created_at"]

    invalid = client.patch(url, json={"agent": {"compaction": {"target_ratio": 0.95}}})
    assert invalid.status_code == 422
    assert invalid.json()["errors"][0]["loc"] == "/agent/compaction/target_ratio"
    assert client.get(url).json() == body  # nothing changed

    removed = client.patch(url, json={"agent": None})
    assert removed.status_code == 422 and removed.json()["errors"][0]["loc"] == "/agent"


def test_identical_patch_keeps_the_version(client: TestClient) -> None:
    agent = create(client, react("same"))
    response = client.patch(f"{API}/{agent['id']}", json={"description": agent["description"]})
    assert response.json()["version"] == 1
    assert len(client.get(f"{API}/{agent['id']}/versions").json()["data"]) == 1


def test_versions_keep_every_previous_document(client: TestClient) -> None:
    agent = create(client, react("v", description="one"))
    url = f"{API}/{agent['id']}"
    client.patch(url, json={"description": "two"})
    client.patch(url, json={"description": "three"})
    listing = client.get(f"{url}/versions").json()["data"]
    assert [v["version"] for v in listing] == [3, 2, 1]
    assert all(v["created_by"] == "user.admin" for v in listing)
    first = client.get(f"{url}/versions/1").json()
    assert first["description"] == "one" and first["version"] == 1 and first["id"] == agent["id"]
    assert first["created_at"] == agent["created_at"]
    assert first["updated_at"] == agent["updated_at"]  # when version 1 was stored
    assert client.get(f"{url}/versions/3").json() == client.get(url).json()
    assert client.get(url).json()["description"] == "three"
    missing = client.get(f"{url}/versions/9")
    assert missing.status_code == 404 and "1 to 3" in missing.json()["detail"]


def test_delete(client: TestClient) -> None:
    agent = create(client, react("gone"))
    assert client.delete(f"{API}/{agent['id']}").status_code == 204
    assert client.get(f"{API}/{agent['id']}").status_code == 404
    assert client.delete(f"{API}/{agent['id']}").status_code == 404
    assert client.get(f"{API}/{agent['id']}/versions").status_code == 404
    create(client, react("gone"))  # the name is free again


def _ids(client: TestClient, **params: Any) -> list[str]:
    response = client.get(API, params=params)
    assert response.status_code == 200, response.text
    return [a["id"] for a in response.json()["data"]]


def test_filters(client: TestClient) -> None:
    a = create(client, react("alpha", tags=["x", "y"], alias="The First", type="bot"))
    c1 = container(client, "collections", "c1")
    f1 = container(client, "folders", "f1", collection_id=c1)
    b = create(client, react("beta", tags=["x"], folder_id=f1, collection_id=c1))
    wf = create(client, load_json(FIXTURES / "valid" / "workflow_triage.json"))
    assert _ids(client, q="FIRST") == [a["id"]]
    assert _ids(client, q="triage") == [wf["id"]]  # name
    assert _ids(client, q="keywords") == [wf["id"]]  # description
    assert _ids(client, q="100%") == []  # LIKE wildcards are literal
    assert _ids(client, tags="x") == [a["id"], b["id"]]
    assert _ids(client, tags=["x", "y"]) == [a["id"]]
    assert _ids(client, tags="x,y") == [a["id"]]
    assert _ids(client, folder_id=f1) == [b["id"]]
    assert _ids(client, collection_id=c1) == [b["id"]]
    # The built-ins are listed too, unless left out.
    assert _ids(client, mode="workflow") == [wf["id"], *BUILTIN_WORKFLOW_IDS]
    assert _ids(client, mode="workflow", is_builtin="false") == [wf["id"]]
    assert _ids(client, input_mode="event", is_builtin="false") == [wf["id"]]
    assert _ids(client, is_builtin="true") == BUILTIN_IDS
    assert _ids(client, is_builtin="true", mode="react") == BUILTIN_REACT_IDS
    assert _ids(client, type="bot") == [a["id"]]
    assert _ids(client, mode="react", tags="x", q="beta") == [b["id"]]
    assert _ids(client, name="alpha") == [a["id"]]  # exactly the name:
    assert _ids(client, name="alph") == _ids(client, name="Alpha") == []  # no part, no case
    again = create(client, react("alpha", folder_id=f1))  # names are unique per folder only
    assert _ids(client, name="alpha") == [a["id"], again["id"]]
    assert _ids(client, name="alpha", folder_id=f1) == [again["id"]]
    bad = client.get(API, params={"mode": "sideways"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "/query/mode"
    bad = client.get(API, params={"is_builtin": "yes"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "/query/is_builtin"


def test_pages_have_no_duplicates_or_gaps(client: TestClient) -> None:
    made = [create(client, react(f"agent-{i:02d}"))["id"] for i in range(23)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 5, **({"cursor": cursor} if cursor else {})}
        page = client.get(API, params=params).json()
        seen += [a["id"] for a in page["data"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # The built-ins' ids (agent.builtin-…) sort after every server-made one.
    assert seen == sorted(made) + BUILTIN_IDS and pages == 6
    # A deletion between pages neither repeats nor skips the rest.
    first = client.get(API, params={"limit": 10}).json()
    client.delete(f"{API}/{first['data'][-1]['id']}")
    rest = client.get(API, params={"limit": 200, "cursor": first["next_cursor"]}).json()
    assert [a["id"] for a in rest["data"]] == sorted(made)[10:] + BUILTIN_IDS
    for limit in (0, 201):
        assert client.get(API, params={"limit": limit}).status_code == 422
    bad = client.get(API, params={"cursor": "garbage!"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "/query/cursor"


def test_oversized_bodies_are_refused_and_the_server_goes_on(client: TestClient) -> None:
    from dhub.api.deps import MAX_BODY_BYTES

    huge = b'{"name": "x", "description": "' + b"a" * MAX_BODY_BYTES + b'"}'
    response = client.post(API, content=huge, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["detail"]
    assert client.get(API).status_code == 200
