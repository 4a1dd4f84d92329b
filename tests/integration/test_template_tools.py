"""Templates as agents' tools, on SQLite and PostgreSQL: a react agent that lists a template
gets ``render_<name>`` (parameters: the declared variables), renders with the scripted model's
values, and what it renders is kept as an artifact of its run; a workflow's tool_call node
names the same tool. The operation refuses what the agent did not list and what the run's
user cannot read, with the one unreachable message."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.access.principal import Principal
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.templates import agent_tools, render_op
from dhub.settings import Settings
from dhub.store.db import Database
from dhub.store.resources import get_resource
from tests.integration.test_react_runs_api import log, server
from tests.integration.test_runs_api import until
from tests.integration.test_sharing_api import World, ok
from tests.integration.test_template_runs import EXPECTED, ITEMS
from tests.integration.test_templates_api import report_doc

API = "/api/v1"
VALUES = {"customer": "ACME", "week": "2026-11-30", "items": ITEMS, "total": 7}
RENDER = {"tool_calls": [{"id": "t1", "name": "render_weekly-report", "arguments": VALUES}]}
DONE = "Here is the weekly report."


def reporter(template_id: str, name: str = "reporter") -> dict[str, Any]:
    return {
        "name": name,
        "description": "Writes weekly reports",
        "mode": "react",
        "templates": [template_id],
        "agent": {
            "instructions": "Fill the weekly report.",
            "model_provider": "openai",
            "model": "gpt-4o-mini",
        },
    }


def test_a_react_agent_renders_its_template_into_an_artifact(settings: Settings) -> None:
    with server(settings, [RENDER, DONE]) as client:
        template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
        agent_id = ok(client.post(f"{API}/agents", json=reporter(template_id)), 201)["id"]
        started = client.post(f"{API}/agents/{agent_id}/runs", json={"inputs": {}})
        run_id = ok(started, 202)["id"]
        done = until(client, run_id, "succeeded", "failed")
        assert done["status"] == "succeeded", done
        assert done["outputs"] == {"answer": DONE}
        [artifact] = ok(client.get(f"{API}/runs/{run_id}/artifacts"))["data"]
        events = log(client, run_id)
        got = client.get(f"{API}/runs/{run_id}/artifacts/{artifact['id']}")
    assert got.text == EXPECTED and artifact["template_id"] == template_id
    assert artifact["node_id"] is None and artifact["name"] == "weekly-report.md"
    [called] = [e["data"] for e in events if e["type"] == "tool.called"]
    assert called["name"] == "render_weekly-report" and called["category"] == "knowledge"
    [succeeded] = [e["data"] for e in events if e["type"] == "tool.succeeded"]
    assert succeeded["result"] == {
        "artifact_id": artifact["id"],
        "text": EXPECTED,
        "truncated": False,
        "media_type": "text/markdown; charset=utf-8",
    }


def test_a_user_who_cannot_read_the_template_gets_nothing(settings: Settings) -> None:
    with server(settings, [RENDER, DONE]) as client:
        w = World(client)
        alice = w.user("alice")
        template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
        agent_id = ok(client.post(f"{API}/agents", json=reporter(template_id)), 201)["id"]
        grant = {"principal_id": alice, "scope": "runner"}
        ok(client.post(f"{API}/agents/{agent_id}/grants", json=grant), 201)
        started = w.call(alice, "POST", f"{API}/agents/{agent_id}/runs", {"inputs": {}})
        assert started.status_code == 422, started.text
        [error] = started.json()["errors"]
        assert error["loc"] == "/templates/0"
        assert error["message"].startswith(f"No template '{template_id}' that you can read")
        assert "weekly" not in started.text


def test_a_workflow_tool_call_node_renders_through_the_tool(client: TestClient) -> None:
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    doc = {
        "name": "filler", "description": "", "mode": "workflow", "templates": [template_id],
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "customer", "type": "string"}]}},
            {"id": "fill", "type": "tool_call", "config": {
                "tool": "render_weekly-report",
                "input_mappings": {**VALUES, "customer": "{{ customer }}"},
                "outputs": {"artifact": "artifact_id", "text": "text"}}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "text", "type": "string", "value": "{{ text }}"},
                {"name": "artifact", "type": "string", "value": "{{ artifact }}"}]}},
        ],
        "edges": [{"source": "start", "target": "fill"}, {"source": "fill", "target": "end"}],
    }  # fmt: skip
    agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
    body = {"inputs": {"customer": "ACME"}}
    run_id = ok(client.post(f"{API}/agents/{agent_id}/runs", json=body), 202)["id"]
    done = until(client, run_id, "succeeded", "failed")
    assert done["status"] == "succeeded", done
    assert done["outputs"]["text"] == EXPECTED
    listed = ok(client.get(f"{API}/runs/{run_id}/artifacts"))["data"]
    assert [a["id"] for a in listed] == [done["outputs"]["artifact"]]


# -- the operation itself -----------------------------------------------------------------------


@pytest.fixture
def made(client: TestClient) -> tuple[World, str, str]:
    w = World(client)
    alice = w.user("alice")
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    return w, alice, template_id


async def test_the_operation_trusts_nothing_the_model_sends(
    made: tuple[World, str, str], database_url: str
) -> None:
    _, alice, template_id = made
    db = Database(database_url)
    admin = Principal("user.admin", is_admin=True)
    fake = "template.01nosuchthing000000000000000"
    try:
        done = await render_op(
            db, admin, {"template_id": template_id, "template_ids": [template_id], **VALUES}
        )
        assert done["text"] == EXPECTED and done["artifact_id"] is None
        # Not among the agent's templates: refused, even though the admin may read it.
        with pytest.raises(KnowledgeError) as outside:
            await render_op(db, admin, {"template_id": template_id, "template_ids": [], **VALUES})
        with pytest.raises(KnowledgeError) as unknown:
            await render_op(db, admin, {"template_id": fake, "template_ids": [fake], **VALUES})
        assert str(outside.value) == str(unknown.value).replace(fake, template_id)
        # Listed, but alice may not read it: the same message.
        args = {"template_id": template_id, "template_ids": [template_id]}
        with pytest.raises(KnowledgeError) as hidden:
            await render_op(db, Principal(alice), {**args, **VALUES})
        assert str(hidden.value) == str(outside.value)
        # Wrong values name the variable; a run id that is not the user's own stores nothing.
        with pytest.raises(KnowledgeError, match="'total' must be a number"):
            await render_op(db, admin, {**args, **VALUES, "total": "seven"})
        done = await render_op(
            db, admin, {"template_id": template_id, "template_ids": [template_id],
                        "run_id": "run.01nosuchrun", **VALUES},
        )  # fmt: skip
        assert done["artifact_id"] is None
    finally:
        await db.dispose()


async def test_tools_have_the_variables_as_their_parameters(
    made: tuple[World, str, str], database_url: str
) -> None:
    w, _, template_id = made
    other = report_doc(name="weekly report!", body="x", variables=[])
    other_id = ok(w.client.post(f"{API}/templates", json=other), 201)["id"]
    db = Database(database_url)
    try:
        async with db.read() as conn:
            rows = [await get_resource(conn, i, ["user.admin"]) for i in (template_id, other_id)]
    finally:
        await db.dispose()
    tools = agent_tools([r.record for r in rows if r is not None])
    assert [t.name for t in tools] == ["render_weekly-report", "render_weekly_report"]
    first = tools[0]
    assert first.operation == "template.render"
    assert first.bound == {"template_id": template_id, "template_ids": [template_id, other_id]}
    assert first.parameters == {
        "type": "object",
        "properties": {
            "customer": {"type": "string", "description": "Who it is for"},
            "week": {"type": "string", "format": "date"},
            "items": {"type": "array"},
            "total": {"type": "number"},
            "urgent": {"type": "boolean", "default": False},
        },
        "required": ["customer", "week", "items", "total"],
        "additionalProperties": False,
    }
