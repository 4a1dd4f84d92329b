"""Agents referring to prompts, tools, actors, roles and other agents: checked when the agent
is created, updated or validated (over HTTP, on SQLite and PostgreSQL), and resolved for the
runtime by ``resolve_agent`` (through the services, against a real database)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.access.principal import Principal
from dhub.domain.agent import AgentSpec
from dhub.domain.functions import AgentActorConfig, AgentToolConfig
from dhub.domain.resources import BUILT_IN_TOOLS, unreachable
from dhub.services.agents import AgentService
from dhub.services.resources import ResourceService, UnresolvableAgent, resolve_agent
from dhub.store.db import Database
from tests.integration.test_resources_api import (
    actor_doc,
    create,
    errors_of,
    prompt_doc,
    role_doc,
    tool_doc,
)
from tests.integration.test_sharing_api import World, ok

API = "/api/v1"


def agent_doc(name: str = "helper", **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Helps",
        "agent": {"instructions": "Be brief.", "model_provider": "p", "model": "m", **config},
    }


def post_agent(client: TestClient, doc: dict[str, Any], **kwargs: Any) -> Any:
    return client.post(f"{API}/agents", json=doc, **kwargs)


def test_an_agent_with_every_kind_of_reference_is_accepted(client: TestClient) -> None:
    prompt = create(client, "prompt", prompt_doc())
    tool = create(client, "tool", tool_doc())
    actor = create(client, "actor", actor_doc())
    role = create(client, "role", role_doc(tools=[tool["id"]]))
    other = ok(post_agent(client, agent_doc("delegate")), 201)
    doc = agent_doc(
        prompts=[{"prompt_id": prompt["id"], "variables": {"tone": "kind"}}],
        tools=[tool["id"], {"id": tool["id"], "name": "lookup"}, *sorted(BUILT_IN_TOOLS)],
        actors=[{"id": actor["id"], "name": "refund"}],
        roles=[
            role["id"],
            {"id": other["id"], "name": "delegate"},
            {"name": "r", "instructions": "Look things up.", "tools": [tool["id"]]},
        ],
    )
    assert ok(client.post(f"{API}/agents/validate", json=doc)) == {"valid": True, "errors": []}
    body = ok(post_agent(client, doc), 201)
    assert body["agent"]["prompts"] == doc["agent"]["prompts"]
    assert body["agent"]["roles"] == doc["agent"]["roles"]


def test_unknown_references_are_422(client: TestClient) -> None:
    workflow = ok(
        post_agent(
            client,
            {
                "name": "wf",
                "description": "d",
                "mode": "workflow",
                "nodes": [
                    {"id": "start", "type": "start", "config": {}},
                    {"id": "end", "type": "end", "config": {}},
                ],
                "edges": [{"source": "start", "target": "end"}],
            },
        ),
        201,
    )
    actor = create(client, "actor", actor_doc())
    doc = agent_doc(
        prompts=[{"prompt_id": "prompt.01nosuchprompt"}, {"prompt_id": "persona"}],
        tools=["tool.01nosuchtool", "search_web", actor["id"], {"id": "lookup", "name": "x"}],
        actors=["refund"],
        roles=["role.01nosuchrole", workflow["id"], "agent.01nosuchagent"],
    )
    response = post_agent(client, doc)
    assert sorted(errors_of(response)) == [
        ("/agent/actors/0", "not_an_id"),
        ("/agent/prompts/0/prompt_id", "unknown_reference"),
        ("/agent/prompts/1/prompt_id", "unknown_reference"),
        ("/agent/roles/0", "unknown_reference"),
        ("/agent/roles/1", "not_react"),
        ("/agent/roles/2", "unknown_reference"),
        ("/agent/tools/0", "unknown_reference"),
        ("/agent/tools/1", "unknown_tool"),
        ("/agent/tools/2", "wrong_kind"),
        ("/agent/tools/3/id", "not_an_id"),
    ]
    messages = {e["loc"]: e["message"] for e in response.json()["errors"]}
    assert "GET /api/v1/prompts" in messages["/agent/prompts/0/prompt_id"]
    assert "set_conversation_variable" in messages["/agent/tools/1"]
    assert (
        "is a actor" not in messages["/agent/tools/2"] and actor["id"] in messages["/agent/tools/2"]
    )
    checked = ok(client.post(f"{API}/agents/validate", json=doc))
    assert checked["valid"] is False and len(checked["errors"]) == 10
    stored = ok(client.get(f"{API}/agents", params={"is_builtin": "false"}))["data"]
    assert [a["id"] for a in stored] == [workflow["id"]]
    # A NUL character is refused where the body comes in, before any reference is looked up.
    doc["agent"]["roles"] = ["agent.01\x00"]
    assert errors_of(post_agent(client, doc)) == [("/agent/roles/0", "nul")]


def test_prompt_variables_must_be_bound(client: TestClient) -> None:
    prompt = create(client, "prompt", prompt_doc())
    response = post_agent(client, agent_doc(prompts=[{"prompt_id": prompt["id"]}]))
    assert errors_of(response) == [("/agent/prompts/0/variables", "missing_variable")]
    assert "'tone'" in response.json()["errors"][0]["message"]
    bound = {"prompt_id": prompt["id"], "variables": {"tone": "calm", "mood": "x"}}
    response = post_agent(client, agent_doc(prompts=[bound]))
    assert errors_of(response) == [("/agent/prompts/0/variables/mood", "unknown_variable")]
    assert "greeting, tone" in response.json()["errors"][0]["message"]
    bound["variables"] = {"tone": "calm"}  # greeting has a default
    agent = ok(post_agent(client, agent_doc(prompts=[bound])), 201)
    # Updates are checked too: the prompt now needs another variable.
    url = f"{API}/prompts/{prompt['id']}"
    ok(client.patch(url, json={"variables": [{"name": "tone"}, {"name": "greeting"}]}))
    response = client.patch(f"{API}/agents/{agent['id']}", json={"description": "new"})
    assert errors_of(response) == [("/agent/prompts/0/variables", "missing_variable")]
    assert "'greeting'" in response.json()["errors"][0]["message"]


def test_object_forms_and_inline_roles_are_checked_on_create(client: TestClient) -> None:
    tool = create(client, "tool", tool_doc())
    actor = create(client, "actor", actor_doc())
    doc = agent_doc(
        tools=[
            {"id": tool["id"], "description": "Find it.", "options": {"timeout": 5}},
            {"name": "lookup", "description": "no function, no id"},
            {"id": tool["id"], "require_browser": True},
            {"id": "tool.01nosuchtool", "description": "x"},
        ],
        actors=[
            {"id": actor["id"], "confirmation_policy": "confirm"},
            {"id": actor["id"], "confirmation_policy": "auto"},
        ],
        roles=[
            {"name": "helper", "description": "d"},
            {"name": "r", "instructions": "i", "tools": ["tool.01nosuchtool"]},
            {"name": "ok", "instructions": "Look up.", "tools": [{"id": tool["id"], "name": "t"}]},
        ],
    )
    response = post_agent(client, doc)
    assert sorted(errors_of(response)) == [
        ("/agent/actors/1/confirmation_policy", "literal_error"),
        ("/agent/roles/0/instructions", "missing"),
        ("/agent/roles/1/tools/0", "unknown_reference"),
        ("/agent/tools/1", "not_callable"),
        ("/agent/tools/2/require_browser", "extra_forbidden"),
        ("/agent/tools/3/id", "unknown_reference"),
    ]
    messages = {e["loc"]: e["message"] for e in response.json()["errors"]}
    assert "'function'" in messages["/agent/tools/1"] and "'id'" in messages["/agent/tools/1"]
    assert "'description', 'options'" in messages["/agent/tools/2/require_browser"]
    assert "its owner decides" in messages["/agent/actors/1/confirmation_policy"]
    doc["agent"]["tools"] = doc["agent"]["tools"][:1]
    doc["agent"]["actors"] = doc["agent"]["actors"][:1]
    doc["agent"]["roles"] = doc["agent"]["roles"][2:]
    ok(post_agent(client, doc), 201)


def test_a_reference_the_caller_cannot_read_is_unknown(client: TestClient) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    hidden = create(client, "prompt", prompt_doc("hidden", variables=[], template="x"))
    shared = create(client, "tool", tool_doc())
    ok(
        client.post(
            f"{API}/tools/{shared['id']}/grants", json={"principal_id": alice, "scope": "runner"}
        ),
        201,
    )

    def refs(prompt_id: str) -> dict[str, Any]:
        return agent_doc(prompts=[{"prompt_id": prompt_id}], tools=[shared["id"]])

    unreadable = w.call(alice, "POST", f"{API}/agents", refs(hidden["id"]))
    unknown = w.call(alice, "POST", f"{API}/agents", refs("prompt.01nosuchprompt"))
    assert (
        errors_of(unreadable)
        == errors_of(unknown)
        == [("/agent/prompts/0/prompt_id", "unknown_reference")]
    )
    assert unreadable.json()["errors"][0]["message"] == unknown.json()["errors"][0][
        "message"
    ].replace("prompt.01nosuchprompt", hidden["id"])
    # The admin can read it, and makes an agent that alice may edit: nothing stored is
    # trusted for being there, so alice cannot save a version naming what she cannot read.
    agent = ok(post_agent(client, refs(hidden["id"])), 201)
    url = f"{API}/agents/{agent['id']}"
    ok(client.post(f"{url}/grants", json={"principal_id": alice, "scope": "editor"}), 201)
    response = w.call(alice, "PATCH", url, {"description": "by alice"})
    assert errors_of(response) == [("/agent/prompts/0/prompt_id", "unknown_reference")]
    other = create(client, "prompt", prompt_doc("other", variables=[], template="y"))
    ok(client.post(f"{API}/prompts/{other['id']}/grants",
                   json={"principal_id": alice, "scope": "viewer"}), 201)  # fmt: skip
    response = w.call(alice, "PATCH", url, {"agent": {"prompts": [{"prompt_id": other["id"]}]}})
    assert ok(response)["version"] == 2  # once she names only what she can read
    # bob has no grant on the tool.
    response = w.call(bob, "POST", f"{API}/agents/validate", agent_doc(tools=[shared["id"]]))
    assert [e["loc"] for e in ok(response)["errors"]] == ["/agent/tools/0"]


def test_a_deleted_reference_fails_the_next_update(client: TestClient) -> None:
    tool = create(client, "tool", tool_doc())
    agent = ok(post_agent(client, agent_doc(tools=[tool["id"]])), 201)
    ok(client.delete(f"{API}/tools/{tool['id']}"), 204)
    url = f"{API}/agents/{agent['id']}"
    response = client.patch(url, json={"description": "new"})
    assert errors_of(response) == [("/agent/tools/0", "unknown_reference")]
    assert response.json()["errors"][0]["message"].startswith(f"No tool '{tool['id']}' that")
    ok(client.patch(url, json={"owners": ["user.admin", "public.all"]}))  # owners alone: fine
    fixed = ok(client.patch(url, json={"agent": {"tools": None}}))
    assert fixed["agent"]["tools"] == [] and fixed["version"] == 2


# -- resolve_agent ------------------------------------------------------------------------------

ADMIN = Principal("user.admin", is_admin=True)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await database.migrate()
    try:
        yield database
    finally:
        await database.dispose()


async def test_resolve_agent_renders_prompts_and_resolves_references(db: Database) -> None:
    resources, agents = ResourceService(db), AgentService(db)

    async def make(kind: str, doc: dict[str, Any]) -> str:
        return (await resources.create(ADMIN, kind, doc)).record.id

    persona = await make("prompt", prompt_doc())
    rules = await make(
        "prompt",
        prompt_doc(
            "rules",
            template="Answer in {{lang}}{{suffix}}; limit {{limit}}. Literal: {{raw}}",
            variables=[
                {"name": "lang", "default": "English"},
                {"name": "suffix", "required": False},
                {"name": "limit", "default": {"words": 50}},
                {"name": "raw"},
            ],
        ),
    )
    tool = await make("tool", tool_doc(options={"x": 1}))
    actor = await make("actor", actor_doc(confirmation_policy="auto"))
    role = await make("role", role_doc(tools=[tool, "set_conversation_variable"], model="small"))
    delegate_doc = agent_doc(
        "delegate", prompts=[{"prompt_id": persona, "variables": {"tone": "terse"}}], tools=[tool]
    )
    delegate = (await agents.create(ADMIN, delegate_doc)).record.id
    inline_tool = copy.deepcopy(tool_doc("inline_tool"))
    doc = agent_doc(
        prompts=[
            {"prompt_id": rules, "variables": {"raw": "{{lang}}"}},
            {"prompt_id": persona, "variables": {"tone": "warm", "greeting": "Hi"}},
        ],
        tools=[inline_tool, {"id": tool, "name": "shown"}, "set_conversation_variable"],
        actors=[actor],
        roles=[
            role,
            {"id": delegate, "name": "d"},
            {"name": "inline", "instructions": "Check.", "tools": [tool]},
        ],
    )
    created = await agents.create(ADMIN, doc)  # its references were checked
    spec = AgentSpec.model_validate_json(created.record.document)

    resolved = await resolve_agent(db, spec, ADMIN)
    assert resolved.system_prompt == (
        'Answer in English; limit {"words":50}. Literal: {{lang}}\n\n'
        "You are warm. Greet with Hi.\n\n"
        "Be brief."
    )
    stored_tool = AgentToolConfig.model_validate(
        {**tool_doc(options={"x": 1}), "type": "python"}, strict=False
    )
    assert resolved.tools == [
        AgentToolConfig.model_validate(inline_tool),
        stored_tool,
        "set_conversation_variable",
    ]
    assert resolved.actors == [
        AgentActorConfig.model_validate(actor_doc(confirmation_policy="auto"))
    ]
    assert [(r.name, r.agent_id, r.model) for r in resolved.roles] == [
        ("researcher", None, "small"),
        ("delegate", delegate, "m"),
        ("inline", None, None),
    ]
    assert resolved.roles[0].tools == [stored_tool, "set_conversation_variable"]
    assert resolved.roles[0].instructions == role_doc()["instructions"]
    assert resolved.roles[1].instructions == "You are terse. Greet with Hello.\n\nBe brief."
    assert resolved.roles[1].tools == [stored_tool] == resolved.roles[2].tools
    async with db.read() as conn:  # a connection works as well as the database
        assert await resolve_agent(conn, spec, ADMIN) == resolved

    # Without prompts: just the instructions. The latest version of a reference is used.
    await resources.patch(ADMIN, "tool", tool, {"description": "v2"})
    plain = AgentSpec.model_validate(agent_doc(tools=[tool]))
    again = await resolve_agent(db, plain, ADMIN)
    assert again.system_prompt == "Be brief." and again.roles == []
    assert [t.description for t in again.tools if isinstance(t, AgentToolConfig)] == ["v2"]

    # References deleted since the agent was saved: every one is reported.
    await resources.delete(ADMIN, "tool", tool)
    await resources.delete(ADMIN, "prompt", persona)
    with pytest.raises(UnresolvableAgent) as caught:
        await resolve_agent(db, spec, ADMIN)
    locs = [(e.loc, e.code) for e in caught.value.errors]
    assert locs == [
        ("/agent/prompts/1/prompt_id", "unknown_reference"),
        ("/agent/tools/1/id", "unknown_reference"),
        ("/agent/roles/0/tools/0", "unknown_reference"),
        ("/agent/roles/1", "unknown_reference"),
        ("/agent/roles/1", "unknown_reference"),
        ("/agent/roles/2/tools/0", "unknown_reference"),
    ]
    assert caught.value.status_code == 422
    assert caught.value.errors[0].message == unreachable("prompt", persona)
