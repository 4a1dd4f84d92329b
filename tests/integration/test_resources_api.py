"""Prompts, tools, actors, roles, templates and secrets over HTTP, on SQLite and PostgreSQL:
CRUD, versions, merge patch, names, validation and access (the agents' model). References from
agents to them, and resolve_agent: tests/integration/test_resource_references.py."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_agents_api import container, home
from tests.integration.test_sharing_api import BUILDER, World, ok

API = "/api/v1"
KINDS = ("prompt", "tool", "actor", "role", "template", "secret")
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def prompt_doc(name: str = "persona", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Sets the tone",
        "template": "You are {{ tone }}. Greet with {{greeting}}.",
        "variables": [
            {"name": "tone", "description": "How to sound"},
            {"name": "greeting", "default": "Hello"},
        ],
        **extra,
    }


def tool_doc(name: str = "lookup_order", **extra: Any) -> dict[str, Any]:
    source = f"def {name}(order_id: str) -> dict:\n    return {{'order_id': order_id}}\n"
    return {
        "name": name,
        "description": "Look an order up",
        "function": {"source": source},
        **extra,
    }


def actor_doc(name: str = "issue_refund", **extra: Any) -> dict[str, Any]:
    source = f"def {name}(order_id: str, amount: float) -> dict:\n    return {{}}\n"
    return {"name": name, "description": "Refund an order", "function": {"source": source}, **extra}


def role_doc(name: str = "researcher", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Looks things up",
        "instructions": "Research the question and answer briefly.",
        "tools": ["set_conversation_variable"],
        **extra,
    }


def template_doc(name: str = "report", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "A report",
        "body": "# {{ title }}",
        "variables": [{"name": "title"}],
        **extra,
    }


def secret_doc(name: str = "api-key", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "A key", "value": "sk-crud-1", **extra}


DOCS = {
    "secret": secret_doc,
    "prompt": prompt_doc,
    "tool": tool_doc,
    "actor": actor_doc,
    "role": role_doc,
    "template": template_doc,
}


def doc_of(kind: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    make = DOCS[kind]
    return make(name, **extra) if name else make(**extra)


def create(client: TestClient, kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = ok(client.post(f"{API}/{kind}s", json=doc), 201)
    return body


def errors_of(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    return [(e["loc"], e["code"]) for e in response.json()["errors"]]


# -- CRUD ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_crud_and_versions(client: TestClient, kind: str) -> None:
    url = f"{API}/{kind}s"
    before = int(time.time() * 1000)
    response = client.post(url, json=doc_of(kind, tags=["a"]))
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["location"] == f"{url}/{body['id']}"
    assert body["id"].startswith(f"{kind}.") and body["item"] == body["id"]
    assert body["category"] == kind and body["tags"] == ["a"]
    assert before <= body["created_at"] == body["updated_at"] <= int(time.time() * 1000) + 1
    assert body["version"] == 1 and body["markings"] == [] and body["is_builtin"] is False
    assert body["my_share_scope"] == "owner"
    assert [(o["id"], o["type"]) for o in body["owners"]] == [(BUILDER, "user")]
    # The envelope is the one an agent has.
    agent = ok(
        client.post(
            f"{API}/agents",
            json={
                "name": "a",
                "description": "d",
                "agent": {"instructions": "i", "model_provider": "p", "model": "m"},
            },
        ),
        201,
    )
    envelope = {"id", "name", "alias", "category", "type", "collection_id", "folder_id", "tags"}
    envelope |= {"description", "markings", "created_at", "updated_at", "owners"}
    envelope |= {"my_share_scope", "is_builtin", "item", "version", "effective_markings"}
    assert envelope <= set(body) and envelope <= set(agent)

    item = f"{url}/{body['id']}"
    assert ok(client.get(item)) == body
    assert [r["id"] for r in ok(client.get(url))["data"]] == [body["id"]]

    patched = ok(
        client.patch(item, json={"description": "second", "tags": None}, headers=MERGE_PATCH)
    )
    assert patched["description"] == "second" and patched["tags"] is None
    assert patched["version"] == 2 and patched["created_at"] == body["created_at"]
    ok(client.patch(item, json={"description": "third"}))  # application/json works too
    listing = ok(client.get(f"{item}/versions"))["data"]
    assert [v["version"] for v in listing] == [3, 2, 1]
    assert all(v["created_by"] == BUILDER for v in listing)
    first = ok(client.get(f"{item}/versions/1"))
    assert first["description"] == body["description"] and first["version"] == 1
    assert first["updated_at"] == body["updated_at"]
    assert ok(client.get(f"{item}/versions/3")) == ok(client.get(item))
    missing = client.get(f"{item}/versions/9")
    assert missing.status_code == 404 and "1 to 3" in missing.json()["detail"]

    assert client.delete(item).status_code == 204
    gone = client.get(item)
    assert gone.status_code == 404 and gone.json()["detail"] == f"No {kind} with id '{body['id']}'."
    assert client.delete(item).status_code == 404
    assert client.get(f"{item}/versions").status_code == 404
    create(client, kind, doc_of(kind))  # the name is free again


def test_defaults_are_filled_in(client: TestClient) -> None:
    prompt = create(client, "prompt", prompt_doc())
    assert prompt["variables"] == [
        {"name": "tone", "description": "How to sound", "required": True},
        {"name": "greeting", "description": "", "default": "Hello", "required": False},
    ]
    assert prompt["alias"] is None and prompt["type"] is None
    assert prompt["folder_id"] == home(client) and prompt["collection_id"] is None
    tool = create(client, "tool", tool_doc())
    assert tool["type"] == "python" and tool["require_browser"] is False and tool["options"] == {}
    assert tool["function"]["inputs"] == {} and tool["function"]["decorators"] == []
    actor = create(client, "actor", actor_doc())
    assert actor["confirmation_policy"] == "confirm" and actor["options"] == {}
    role = create(client, "role", role_doc(tools=[]))
    assert role["tools"] == [] and role["model"] is None and role["max_iterations"] is None


def test_kinds_are_apart(client: TestClient) -> None:
    tool = create(client, "tool", tool_doc("same"))
    actor = create(client, "actor", actor_doc("same"))  # names are unique per kind
    assert client.get(f"{API}/prompts/{tool['id']}").status_code == 404
    assert client.get(f"{API}/actors/{tool['id']}").status_code == 404
    assert client.patch(f"{API}/tools/{actor['id']}", json={}).status_code == 404
    assert [t["id"] for t in ok(client.get(f"{API}/tools"))["data"]] == [tool["id"]]
    assert ok(client.get(f"{API}/prompts"))["data"] == []


def test_name_is_unique_per_kind_and_folder(client: TestClient) -> None:
    first = create(client, "prompt", prompt_doc("dup"))
    response = client.post(f"{API}/prompts", json=prompt_doc("dup"))
    assert response.status_code == 409 and first["id"] in response.json()["detail"]
    other = create(client, "prompt", prompt_doc("dup", folder_id=container(client, "folders", "x")))
    moved = client.patch(f"{API}/prompts/{other['id']}", json={"folder_id": None})
    assert moved.status_code == 409 and first["id"] in moved.json()["detail"]
    renamed = client.patch(f"{API}/prompts/{other['id']}", json={"name": "dup2", "folder_id": None})
    assert ok(renamed)["name"] == "dup2"


def test_merge_patch_then_full_validation(client: TestClient) -> None:
    prompt = create(client, "prompt", prompt_doc())
    url = f"{API}/prompts/{prompt['id']}"
    same = ok(client.patch(url, json={"description": prompt["description"]}))
    assert same["version"] == 1 and same["updated_at"] == prompt["updated_at"]
    body = ok(
        client.patch(
            url,
            json={
                "template": "{{tone}} and {{topic}}",
                "variables": [{"name": "tone"}, {"name": "topic", "default": "x"}],
            },
        )
    )
    assert body["template"] == "{{tone}} and {{topic}}" and body["version"] == 2
    invalid = client.patch(url, json={"template": "{{tone}} {{nope}}"})
    assert errors_of(invalid) == [("/template", "undeclared_variable")]
    assert ok(client.get(url)) == body  # nothing changed
    assert errors_of(client.patch(url, json={"template": None})) == [("/template", "missing")]
    assert errors_of(client.patch(url, json=[1])) == [("", "type")]
    assert errors_of(client.patch(url, json={"version": 4, "markings": []})) == [
        ("/markings", "read_only"),
        ("/version", "read_only"),
    ]
    tool = create(client, "tool", tool_doc(options={"a": 1}))
    reset = ok(client.patch(f"{API}/tools/{tool['id']}", json={"options": None}))
    assert reset["options"] == {} and reset["version"] == 2


# -- validation ---------------------------------------------------------------------------------


def test_prompt_errors_are_reported_at_once(client: TestClient) -> None:
    doc = prompt_doc(
        template="{{tone}} {{ missing }} {{ a.b }} {{missing}}",
        variables=[
            {"name": "tone", "required": True, "default": "calm"},
            {"name": "tone"},
            {"name": "9lives"},
        ],
    )
    response = client.post(f"{API}/prompts", json=doc)
    assert errors_of(response) == [
        ("/variables/0/required", "required_with_default"),
        ("/variables/1/name", "duplicate_variable"),
        ("/variables/2/name", "invalid_name"),
        ("/template", "undeclared_variable"),
        ("/template", "invalid_placeholder"),
    ]
    messages = [e["message"] for e in response.json()["errors"]]
    assert "'{{missing}}'" in messages[3] and '{"name": "missing"}' in messages[3]
    assert "remove 'default'" in messages[0]
    checked = ok(client.post(f"{API}/prompts/validate", json=doc))
    assert checked["valid"] is False
    assert [e["loc"] for e in checked["errors"]] == [e[0] for e in errors_of(response)]
    assert ok(client.post(f"{API}/prompts/validate", json=prompt_doc())) == {
        "valid": True,
        "errors": [],
    }
    assert ok(client.get(f"{API}/prompts"))["data"] == []  # nothing was stored


def test_schema_errors_point_into_the_document(client: TestClient) -> None:
    response = client.post(
        f"{API}/prompts",
        json={"name": "", "template": 5, "variables": [{"name": "x", "colour": 1}], "id": "p"},
    )
    assert sorted(errors_of(response)) == [
        ("/description", "missing"),
        ("/id", "read_only"),
        ("/name", "string_too_short"),
        ("/template", "string_type"),
        ("/variables/0/colour", "extra_forbidden"),
    ]
    owners = client.post(f"{API}/roles", json={**role_doc(), "owners": [BUILDER]})
    assert errors_of(owners) == [("/owners", "read_only")]
    assert "PATCH" in owners.json()["errors"][0]["message"]
    wrong = client.post(f"{API}/tools", json={**tool_doc(), "type": "shell", "category": "agent"})
    assert sorted(errors_of(wrong)) == [("/category", "literal_error"), ("/type", "literal_error")]
    assert errors_of(client.post(f"{API}/actors", json=[])) == [("", "type")]


@pytest.mark.parametrize("kind", ["tool", "actor"])
def test_function_errors(client: TestClient, kind: str) -> None:
    doc = doc_of(kind, "fn")
    doc["function"] = {
        "source": "def fn(x:\n",
        "inputs": {"x": {"type": "strnig"}},
        "dependencies": ["not a requirement!"],
        "decorators": [{"decorator": "memoize", "name": "fn"}],
    }
    assert sorted(errors_of(client.post(f"{API}/{kind}s", json=doc))) == [
        ("/function/decorators/0/decorator", "unknown_decorator"),
        ("/function/dependencies/0", "bad_requirement"),
        ("/function/inputs/x/type", "invalid_schema"),
        ("/function/source", "syntax_error"),
    ]
    # The entry point is looked up by the resource's name.
    doc["function"] = {"source": "def a():\n    pass\n\ndef b():\n    pass\n"}
    response = client.post(f"{API}/{kind}s", json=doc)
    assert errors_of(response) == [("/function/source", "no_entry_point")]
    assert "'fn'" in response.json()["errors"][0]["message"]
    doc["function"] = {"source": "def fn():\n    pass\n\ndef b():\n    pass\n"}
    create(client, kind, doc)
    bad_policy = client.post(f"{API}/actors", json=actor_doc(confirmation_policy="never"))
    assert errors_of(bad_policy) == [("/confirmation_policy", "literal_error")]


def test_role_errors(client: TestClient) -> None:
    tool = create(client, "tool", tool_doc())
    doc = role_doc(
        max_iterations=0,
        tools=[tool["id"], "tool.01nosuchtool", "search_web", {"id": tool["id"], "name": "t"}],
    )
    response = client.post(f"{API}/roles", json=doc)
    assert errors_of(response) == [("/max_iterations", "out_of_range")]
    doc["max_iterations"] = 3
    response = client.post(f"{API}/roles", json=doc)
    assert errors_of(response) == [("/tools/2", "unknown_tool"), ("/tools/1", "unknown_reference")]
    assert "set_conversation_variable" in response.json()["errors"][0]["message"]
    inline = copy.deepcopy(tool_doc("inline_tool"))
    inline["function"]["source"] = "def other():\n    pass\n\ndef more():\n    pass\n"
    doc["tools"] = [tool["id"], inline]
    assert errors_of(client.post(f"{API}/roles", json=doc)) == [
        ("/tools/1/function/source", "no_entry_point")
    ]
    doc["tools"] = [tool["id"], {"id": tool["id"], "name": "t"}, "set_conversation_variable"]
    assert create(client, "role", doc)["tools"] == doc["tools"]


# -- lists --------------------------------------------------------------------------------------


def _ids(client: TestClient, **params: Any) -> list[str]:
    return [r["id"] for r in ok(client.get(f"{API}/prompts", params=params))["data"]]


def test_filters_and_pages(client: TestClient) -> None:
    a = create(client, "prompt", prompt_doc("alpha", tags=["x", "y"], alias="The First"))
    c1 = container(client, "collections", "c1")
    f1 = container(client, "folders", "f1")
    b = create(client, "prompt", prompt_doc("beta", tags=["x"], folder_id=f1, type="persona"))
    c = create(client, "prompt", prompt_doc("gamma", collection_id=c1, description="100% sure"))
    assert _ids(client, q="first") == [a["id"]]
    assert _ids(client, q="100%") == [c["id"]]
    assert _ids(client, q="_") == []
    assert _ids(client, name="beta") == [b["id"]]
    assert _ids(client, tags="x") == [a["id"], b["id"]]
    assert _ids(client, tags="x,y") == [a["id"]]
    assert _ids(client, folder_id=f1) == [b["id"]]
    assert _ids(client, collection_id=c1) == [c["id"]]
    assert _ids(client, type="persona") == [b["id"]]
    made = [a["id"], b["id"], c["id"]]
    made += [create(client, "prompt", prompt_doc(f"p{i}"))["id"] for i in range(4)]
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = ok(client.get(f"{API}/prompts", params=params))
        seen += [r["id"] for r in page["data"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == sorted(made)
    for bad in ({"limit": 0}, {"limit": 201}, {"cursor": "garbage!"}):
        response = client.get(f"{API}/prompts", params=bad)
        assert errors_of(response)[0][0] == f"/query/{next(iter(bad))}"


# -- access -------------------------------------------------------------------------------------


def test_access_follows_owners_and_grants(client: TestClient) -> None:
    w = World(client)
    alice, vic, ed, eve = w.user("alice"), w.user("vic"), w.user("ed"), w.user("eve")
    tool = create(client, "tool", tool_doc())
    url = f"{API}/tools/{tool['id']}"
    ok(client.patch(url, json={"owners": [alice]}))
    for principal_id, scope in ((vic, "viewer"), (ed, "editor")):
        body = {"principal_id": principal_id, "scope": scope}
        ok(w.call(alice, "POST", f"{url}/grants", body), 201)

    # No owner, grant or admin path: as if it did not exist.
    for method, body in (("GET", None), ("PATCH", {"description": "x"}), ("DELETE", None)):
        response = w.call(eve, method, url, body)
        assert response.status_code == 404, method
        assert response.json()["detail"] == f"No tool with id '{tool['id']}'."
    assert ok(w.call(eve, "GET", f"{API}/tools"))["data"] == []
    assert w.call(eve, "GET", f"{url}/grants").status_code == 404

    assert ok(w.call(vic, "GET", url))["my_share_scope"] == "grant"
    assert [t["id"] for t in ok(w.call(vic, "GET", f"{API}/tools"))["data"]] == [tool["id"]]
    refused = w.call(vic, "PATCH", url, {"description": "by vic"})
    assert refused.status_code == 403 and "'editor'" in refused.json()["detail"]
    assert w.call(vic, "DELETE", url).status_code == 403
    assert [g["principal_id"] for g in ok(w.call(vic, "GET", f"{url}/grants"))["data"]] == [
        ed,
        vic,
    ]
    assert ok(w.call(ed, "PATCH", url, {"description": "by ed"}))["version"] == 2
    assert (
        w.call(ed, "POST", f"{url}/grants", {"principal_id": eve, "scope": "viewer"}).status_code
        == 403
    )
    assert w.call(ed, "DELETE", url).status_code == 403
    # The tool still sits in the admin's home folder, which passes nothing down: given away
    # is given away (DESIGN.md 2.2).
    assert ok(client.get(url))["my_share_scope"] == "admin"
    assert ok(w.call(alice, "GET", url))["my_share_scope"] == "owner"

    ok(w.call(alice, "DELETE", f"{url}/grants/{vic}"), 204)
    assert w.call(vic, "GET", url).status_code == 404
    # The only owner of a tool cannot be deleted.
    refused = client.delete(f"{API}/users/{alice}")
    assert refused.status_code == 409 and tool["id"] in refused.json()["detail"]
    actions = [
        (e["actor_id"], e["action"])
        for e in reversed(ok(client.get(f"{API}/audit", params={"target_id": tool["id"]}))["data"])
    ]
    assert actions == [
        (BUILDER, "tool.create"),
        (BUILDER, "tool.owners"),
        (alice, "tool.grant"),
        (alice, "tool.grant"),
        (ed, "tool.update"),
        (alice, "tool.ungrant"),
    ]


def test_markings_hide_resources_from_everyone_without_them(client: TestClient) -> None:
    w = World(client)
    alice, bob, root = w.user("alice"), w.user("bob"), w.user("root", admin=True)
    secret = w.marking("secret", [alice])
    prompt = create(client, "prompt", prompt_doc())
    url = f"{API}/prompts/{prompt['id']}"
    ok(client.post(f"{url}/grants", json={"principal_id": bob, "scope": "editor"}), 201)
    ok(client.patch(url, json={"owners": [alice]}))
    assert w.call(bob, "POST", f"{url}/markings", {"marking_id": secret}).status_code == 403
    body = ok(w.call(alice, "POST", f"{url}/markings", {"marking_id": secret}))
    assert body["markings"] == [secret] and body["version"] == 1
    for who in (bob, root):  # a grantee and an admin without the marking
        assert w.call(who, "GET", url).status_code == 404
        assert w.call(who, "PATCH", url, {"description": "x"}).status_code == 404
        assert w.call(who, "GET", f"{url}/versions").status_code == 404
        assert ok(w.call(who, "GET", f"{API}/prompts"))["data"] == []
    assert [p["id"] for p in ok(w.call(alice, "GET", f"{API}/prompts"))["data"]] == [prompt["id"]]
    w.hold(secret, bob)
    assert ok(w.call(bob, "GET", url))["markings"] == [secret]
    assert w.call(bob, "DELETE", f"{url}/markings/{secret}").status_code == 403  # not an owner
    assert ok(w.call(alice, "DELETE", f"{url}/markings/{secret}"))["markings"] == []
    assert ok(w.call(root, "GET", url))["my_share_scope"] == "admin"
    missing = w.call(alice, "DELETE", f"{url}/markings/{secret}")
    assert missing.status_code == 404 and secret in missing.json()["detail"]
    assert [
        e["action"]
        for e in ok(client.get(f"{API}/audit", params={"target_id": prompt["id"]}))["data"][:2]
    ] == [
        "prompt.unmark",
        "prompt.mark",
    ]
