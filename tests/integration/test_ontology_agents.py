"""An agent that lists an ontology explores it (issue 19), on SQLite and PostgreSQL: a react
agent with a scripted model searches, follows links and answers from what it found (tool calls
and results in the run's log); changing an object waits for a person; a user without access to
the ontology gets nothing from it; ids the agent does not list are refused by the operations.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.access.principal import Principal
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.ontology_tools import agent_tools
from dhub.services.ontology_ops import OPERATIONS
from dhub.settings import Settings
from dhub.store.db import Database
from tests.integration.test_react_runs_api import approve, log, say, server
from tests.integration.test_runs_api import ok, until, user
from tests.support.ontology import API, make, ontology_doc, seed

AGENTS = "/api/v1/agents"
SEARCH = {"id": "s1", "name": "ontology_search", "arguments": {"type": "customer", "q": "acme"}}
FOLLOW = {
    "id": "f1",
    "name": "ontology_follow",
    "arguments": {"type": "customer", "key": "c1", "link": "placed"},
}
ANSWER = "Acme Corp placed orders 1 and 2."


def explorer(ontology_id: str) -> dict[str, Any]:
    return {
        "name": "explorer",
        "description": "Answers from the shop ontology",
        "mode": "react",
        "input_mode": "chat",
        "ontologies": [ontology_id],
        "agent": {
            "instructions": "Answer from the shop ontology.",
            "model_provider": "openai",
            "model": "gpt-4o-mini",
        },
    }


def _calls(events: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    shown = ("tool.called", "tool.succeeded", "tool.failed")
    return [(e["type"], e["data"].get("name"), e["data"]) for e in events if e["type"] in shown]


def test_an_agent_answers_from_its_ontology_and_a_user_without_access_gets_nothing(
    settings: Settings,
) -> None:
    with server(settings, [{"tool_calls": [SEARCH]}, {"tool_calls": [FOLLOW]}, ANSWER]) as client:
        ontology_id = make(client)
        seed(client, ontology_id)
        agent = ok(client.post(AGENTS, json=explorer(ontology_id)), 201)
        tools = {t for t in ("ontology_search", "ontology_follow")}
        _, run_id = say(client, agent["id"], "Which orders did Acme place?")
        done = until(client, run_id, "succeeded", "failed")
        assert done["status"] == "succeeded", done
        assert done["outputs"] == {"answer": ANSWER}
        steps = _calls(log(client, run_id))
        assert [(t, n) for t, n, _ in steps] == [
            ("tool.called", "ontology_search"),
            ("tool.succeeded", "ontology_search"),
            ("tool.called", "ontology_follow"),
            ("tool.succeeded", "ontology_follow"),
        ]
        assert {n for _, n, _ in steps} == tools
        assert steps[0][2]["category"] == "knowledge"
        found = steps[1][2]["result"]
        assert [(o["key"], o["title"]) for o in found["objects"]] == [("c1", "Acme Corp")]
        followed = steps[3][2]["result"]
        assert [o["key"] for o in followed["objects"]] == ["1", "2"]
        assert followed["objects"][0]["properties"]["total"] == 120.5

        # Bob may run the agent, but not read the ontology: his runs are refused, naming
        # nothing of it.
        bob = user(client, "bob")
        grant = {"principal_id": bob["id"], "scope": "runner"}
        ok(client.post(f"{AGENTS}/{agent['id']}/grants", json=grant), 201)
        headers = {"Authorization": bob["Authorization"]}
        chat = ok(client.post(f"{AGENTS}/{agent['id']}/conversations", headers=headers), 201)
        response = client.post(
            f"/api/v1/conversations/{chat['id']}/messages",
            json={"content": "Which orders did Acme place?"},
            headers=headers,
        )
        assert response.status_code == 422, response.text
        assert "Acme" not in response.text
        assert f"No ontology '{ontology_id}' that you can read" in response.text


def test_changing_an_object_waits_for_a_person(settings: Settings) -> None:
    create = {
        "id": "c1",
        "name": "ontology_create_object",
        "arguments": {"type": "customer", "properties": {"id": "c9", "name": "Umbrella"}},
    }
    with server(settings, [{"tool_calls": [create]}, "Created Umbrella."]) as client:
        ontology_id = make(client)
        agent = ok(client.post(AGENTS, json=explorer(ontology_id)), 201)
        _, run_id = say(client, agent["id"], "Add the customer Umbrella as c9")
        waiting = until(client, run_id, "waiting", "failed")
        assert waiting["waiting"]["for"] == "confirmation", waiting
        assert client.get(f"{API}/{ontology_id}/objects/customer/c9").status_code == 404
        task = approve(client, run_id)
        assert task["request"]["arguments"]["properties"]["name"] == "Umbrella"
        assert until(client, run_id, "succeeded", "failed")["status"] == "succeeded"
        assert ok(client.get(f"{API}/{ontology_id}/objects/customer/c9"))["title"] == "Umbrella"


def finder(ontology_id: str) -> dict[str, Any]:
    """A workflow: its tool_call node searches the ontology it lists."""
    return {
        "name": "finder", "description": "", "mode": "workflow", "input_mode": "event",
        "ontologies": [ontology_id],
        "nodes": [
            {"id": "start", "type": "start",
             "config": {"variables": [{"name": "who", "type": "string"}]}},
            {"id": "find", "type": "tool_call",
             "config": {"tool": "ontology_search",
                        "input_mappings": {"type": "customer", "q": "{{ who }}",
                                           "ontology_ids": ["ontology.planted"]},
                        "outputs": {"title": "objects.0.key"}}},
            {"id": "end", "type": "end",
             "config": {"outputs": [{"name": "key", "type": "string", "value": "{{ title }}"}]}},
        ],
        "edges": [{"source": "start", "target": "find"}, {"source": "find", "target": "end"}],
    }  # fmt: skip


def test_a_workflow_node_searches_its_ontology(client: TestClient) -> None:
    ontology_id = make(client)
    seed(client, ontology_id)
    agent = ok(client.post(AGENTS, json=finder(ontology_id)), 201)
    run = ok(client.post(f"{AGENTS}/{agent['id']}/runs", json={"inputs": {"who": "globex"}}), 202)
    done = until(client, run["id"], "succeeded", "failed")
    assert done["status"] == "succeeded", done
    assert done["outputs"] == {"key": "c2"}


def test_with_auto_confirmation_a_change_needs_no_person(settings: Settings) -> None:
    create = {
        "id": "c1",
        "name": "ontology_create_object",
        "arguments": {"type": "customer", "properties": {"id": "c9", "name": "Umbrella"}},
    }
    with server(settings, [{"tool_calls": [create]}, "Created Umbrella."]) as client:
        ontology_id = make(client)
        doc = {**explorer(ontology_id), "options": {"ontology_confirmation": "auto"}}
        agent = ok(client.post(AGENTS, json=doc), 201)
        _, run_id = say(client, agent["id"], "Add the customer Umbrella as c9")
        assert until(client, run_id, "succeeded", "failed", "waiting")["status"] == "succeeded"
        assert ok(client.get(f"{API}/{ontology_id}/objects/customer/c9"))["title"] == "Umbrella"


def test_only_an_owner_lets_changes_go_unconfirmed(client: TestClient) -> None:
    ontology_id = make(client)
    agent = ok(client.post(AGENTS, json=explorer(ontology_id)), 201)
    url = f"{AGENTS}/{agent['id']}"
    bob = user(client, "bob")
    headers = {"Authorization": bob["Authorization"]}
    grant = {"principal_id": bob["id"], "scope": "editor"}
    ok(client.post(f"{url}/grants", json=grant), 201)
    ok(client.post(f"{API}/{ontology_id}/grants", json=grant), 201)  # he edits it too
    auto = {"options": {"ontology_confirmation": "auto"}}
    refused = client.patch(url, json=auto, headers=headers)
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"] == (
        "Setting options.ontology_confirmation to 'auto' (the agent's ontology tools change "
        f"objects without a person's confirmation) on '{agent['id']}' needs an owner (or an "
        "admin); you have the 'editor' scope."
    )
    assert ok(client.get(url))["version"] == 1  # nothing stored
    # The editor changes the rest; the owner chooses auto; the editor may turn it off again.
    ok(client.patch(url, json={"description": "Explores."}, headers=headers))
    assert ok(client.patch(url, json=auto))["options"] == {"ontology_confirmation": "auto"}
    ok(client.patch(url, json={"description": "Explores, unchecked."}, headers=headers))
    off = {"options": {"ontology_confirmation": "confirm"}}
    assert ok(client.patch(url, json=off, headers=headers))["options"] == off["options"]
    assert client.patch(url, json=auto, headers=headers).status_code == 403


def test_the_tools_describe_the_schema_and_bind_the_ids(client: TestClient) -> None:
    ontology_id = make(client)
    document = json.dumps(ontology_doc())
    record = type("Record", (), {"id": ontology_id, "document": document})
    tools = {t.name: t for t in agent_tools([record])}
    assert sorted(tools) == sorted(
        [
            "ontology_search",
            "ontology_get",
            "ontology_follow",
            "ontology_create_object",
            "ontology_update_object",
            "ontology_delete_object",
            "ontology_link",
            "ontology_unlink",
        ]
    )
    search = tools["ontology_search"]
    assert search.bound == {"ontology_ids": [ontology_id]} and not search.confirm
    assert "object type customer" in search.description
    assert "name string required" in search.description
    assert "link placed: customer -> order (one_to_many; backwards: placed_by)" in (
        search.description
    )
    assert all(
        t.confirm
        for n, t in tools.items()
        if n not in ("ontology_search", "ontology_get", "ontology_follow")
    )
    assert not any(t.confirm for t in agent_tools([record], auto=True))


@pytest.fixture
def db(settings: Settings, client: TestClient) -> Database:
    return client.app.state.services.db  # type: ignore[attr-defined, no-any-return]


def test_operations_refuse_what_the_agent_does_not_list_or_the_user_cannot_read(
    client: TestClient, db: Database
) -> None:
    mine = make(client, "mine")
    seed(client, mine)
    other = make(client, "other")
    seed(client, other)
    admin = Principal("user.admin", is_admin=True)
    bob = Principal(user(client, "bob")["id"])
    portal = client.portal  # type: ignore[attr-defined]

    def run(op: str, who: Principal, arguments: dict[str, Any]) -> Any:
        return portal.call(OPERATIONS[f"ontology.{op}"], db, who, arguments)

    found = run("get", admin, {"ontology_ids": [mine], "type": "customer", "key": "c1"})
    assert found["title"] == "Acme Corp"
    # Another ontology the user may read, but the agent does not list: refused.
    with pytest.raises(KnowledgeError, match="is not an ontology this agent lists"):
        run(
            "get",
            admin,
            {"ontology_ids": [mine], "ontology": other, "type": "customer", "key": "c1"},
        )
    with pytest.raises(KnowledgeError, match="Name the ontology"):
        run("search", admin, {"ontology_ids": [mine, other]})
    # A user who cannot read it: the one unreachable message, for reads and changes alike.
    for op, arguments in (
        ("search", {}),
        ("get", {"type": "customer", "key": "c1"}),
        ("create_object", {"type": "customer", "properties": {"id": "x", "name": "X"}}),
    ):
        with pytest.raises(KnowledgeError) as refused:
            run(op, bob, {"ontology_ids": [mine], **arguments})
        assert str(refused.value).startswith(f"No ontology '{mine}' that you can read")
    # Mistakes are messages for the model.
    with pytest.raises(KnowledgeError, match="/properties/name: 'name' is required"):
        run(
            "create_object",
            admin,
            {"ontology_ids": [mine], "type": "customer", "properties": {"id": "c7"}},
        )
    with pytest.raises(KnowledgeError, match="one_to_many"):
        run("link", admin, {"ontology_ids": [mine], "link_type": "placed", "from": "c3", "to": 1})
    page = run(
        "search",
        admin,
        {
            "ontology_ids": [mine],
            "type": "order",
            "limit": 2,
            "filters": [{"property": "status", "value": "open"}],
        },
    )
    assert [o["key"] for o in page["objects"]] == ["1", "3"] and page["next_cursor"] is None
    assert asyncio.iscoroutinefunction(OPERATIONS["ontology.unlink"])
