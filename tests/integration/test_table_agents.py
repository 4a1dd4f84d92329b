"""Agents answering from a table, end to end on the server (SQLite and PostgreSQL): a react
agent with the scripted model calls describe_table, query_table and sql_query, and the run's
log holds what the rows say; a workflow's tool_call node queries the table; a user who may
run the agent but not read its table gets nothing from it."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from dhub.settings import Settings
from tests.conftest import ROOT
from tests.integration.test_react import agent, call
from tests.integration.test_react_runs_api import log, say, server
from tests.integration.test_runs_api import ok, until
from tests.integration.test_sharing_api import World

API = "/api/v1"
ANSWER = "North sold the most."


def sales_table(client: TestClient) -> str:
    data = (ROOT / "examples" / "knowledge" / "sales.csv").read_bytes()
    made = client.post(
        f"{API}/tables/import", params={"name": "sales", "format": "csv"}, content=data
    )
    return str(ok(made, 201)["table"]["id"])


def totals(client: TestClient, table_id: str) -> dict[str, int]:
    """Units by region, computed here from the rows."""
    out: dict[str, int] = {}
    rows = ok(client.get(f"{API}/tables/{table_id}/rows", params={"limit": 100}))["data"]
    for row in rows:
        out[row["region"]] = out.get(row["region"], 0) + row["units"]
    return out


REPLIES: list[Any] = [
    {"tool_calls": [call("describe_table", {"table": "sales"}, "d1")]},
    {"tool_calls": [call("query_table", {
        "table": "sales", "group_by": ["region"],
        "aggregates": [{"op": "sum", "column": "units", "as": "units"}],
        "sort": [{"column": "units", "desc": True}],
        # planted: the bound ids replace anything the model says
        "table_ids": ["table.01jzzzzzzzzzzzzzzzzzzzzzzz"],
    }, "q1")]},
    {"tool_calls": [call("sql_query", {
        "sql": "SELECT region, SUM(units) AS units FROM sales GROUP BY region ORDER BY 2 DESC",
    }, "s1")]},
    ANSWER,
]  # fmt: skip


def test_a_react_agent_answers_from_its_table(settings: Settings) -> None:
    with server(settings, list(REPLIES)) as client:
        table_id = sales_table(client)
        expected = sorted(totals(client, table_id).items(), key=lambda kv: -kv[1])
        doc = {**agent(), "name": "analyst", "tables": [table_id]}
        agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        _, run_id = say(client, agent_id, "Which region sold the most units?")
        done = until(client, run_id, "succeeded", "failed")
        events = log(client, run_id)
    assert done["status"] == "succeeded", done["error"]
    assert done["outputs"] == {"answer": ANSWER}
    called = [
        (e["data"]["name"], e["data"].get("category")) for e in events if e["type"] == "tool.called"
    ]
    assert called == [
        ("describe_table", "knowledge"), ("query_table", "knowledge"), ("sql_query", "knowledge"),
    ]  # fmt: skip
    results = [e["data"]["result"] for e in events if e["type"] == "tool.succeeded"]
    described, queried, answered = results
    assert described["row_count"] == 50 and described["name"] == "sales"
    assert [c["name"] for c in described["columns"]][:3] == ["order_id", "day", "region"]
    assert [(r["region"], r["units"]) for r in queried["rows"]] == expected
    assert [tuple(r) for r in answered["rows"]] == expected


def test_a_workflow_node_queries_the_table(client: TestClient) -> None:
    table_id = sales_table(client)
    expected = totals(client, table_id)
    doc = {
        "name": "region-units", "description": "", "mode": "workflow", "input_mode": "event",
        "tables": [table_id],
        "nodes": [
            {"id": "start", "type": "start",
             "config": {"variables": [{"name": "region", "type": "string"}]}},
            {"id": "ask", "type": "tool_call",
             "config": {"tool": "query_table", "input_mappings": {
                 "filter": "{{ {'column': 'region', 'op': 'eq', 'value': region} }}",
                 "aggregates": [{"op": "sum", "column": "units", "as": "units"}]},
                 "outputs": {"units": "rows.0.units"}}},
            {"id": "end", "type": "end",
             "config": {"outputs": [{"name": "units", "type": "number", "value": "{{ units }}"}]}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
    }  # fmt: skip
    agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
    run = ok(
        client.post(f"{API}/agents/{agent_id}/runs", json={"inputs": {"region": "north"}}), 202
    )
    done = until(client, run["id"], "succeeded", "failed")
    assert done["status"] == "succeeded", done["error"]
    assert done["outputs"] == {"units": expected["north"]}


def test_a_user_who_cannot_read_the_table_gets_nothing(settings: Settings) -> None:
    with server(settings, list(REPLIES)) as client:
        world = World(client)
        mallory = world.user("mallory")
        table_id = sales_table(client)
        doc = {**agent(), "name": "analyst", "tables": [table_id]}
        agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        grant = {"principal_id": mallory, "scope": "runner"}
        ok(client.post(f"{API}/agents/{agent_id}/grants", json=grant), 201)
        headers = world.as_(mallory)
        chat = client.post(f"{API}/agents/{agent_id}/conversations", headers=headers)
        if chat.status_code == 201:
            sent = client.post(
                f"{API}/conversations/{chat.json()['id']}/messages",
                json={"content": "Which region sold the most?"},
                headers=headers,
            )
        else:
            sent = chat
        assert sent.status_code == 422, sent.text
        assert "sales" not in sent.text  # nothing of the table: not its name, not its rows
        assert "No table" in sent.text
        # the same refusal as for a table that does not exist at all
        assert ok(client.get(f"{API}/runs", headers=headers))["data"] == []
        assert client.get(f"{API}/tables/{table_id}/rows", headers=headers).status_code == 404


CODE = """from dhub_knowledge import KnowledgeError, call


def main(region: str) -> dict:
    rows = call("query_table", {"filter": {"column": "region", "op": "eq", "value": region},
                                "table_ids": ["table.01jzzzzzzzzzzzzzzzzzzzzzzz"]})["rows"]
    try:
        call("no_such_tool", {})
        refused = ""
    except KnowledgeError as exc:
        refused = str(exc)
    return {"units": sum(r["units"] for r in rows), "refused": refused}
"""


def test_a_code_node_queries_the_table_through_the_same_tools(client: TestClient) -> None:
    table_id = sales_table(client)
    expected = totals(client, table_id)
    doc = {
        "name": "region-code", "description": "", "mode": "workflow", "input_mode": "event",
        "tables": [table_id],
        "nodes": [
            {"id": "start", "type": "start",
             "config": {"variables": [{"name": "region", "type": "string"}]}},
            {"id": "sum", "type": "code",
             "config": {"source": CODE, "input_mappings": {"region": "{{ region }}"},
                        "outputs": {"units": "integer", "refused": "string"}}},
            {"id": "end", "type": "end",
             "config": {"outputs": [{"name": "units", "type": "number", "value": "{{ units }}"},
                                    {"name": "refused", "type": "string",
                                     "value": "{{ refused }}"}]}},
        ],
        "edges": [{"source": "start", "target": "sum"}, {"source": "sum", "target": "end"}],
    }  # fmt: skip
    agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
    run = ok(
        client.post(f"{API}/agents/{agent_id}/runs", json={"inputs": {"region": "south"}}), 202
    )
    done = until(client, run["id"], "succeeded", "failed")
    assert done["status"] == "succeeded", done["error"]
    assert done["outputs"]["units"] == expected["south"]  # the bound table, not the planted id
    assert "no_such_tool" in done["outputs"]["refused"]


def test_the_builtin_table_analyst_copied_with_a_table_answers_from_it(
    settings: Settings,
) -> None:
    with server(settings, list(REPLIES)) as client:
        world = World(client)
        bob = world.user("bob")
        headers = world.as_(bob)
        data = (ROOT / "examples" / "knowledge" / "sales.csv").read_bytes()
        made = client.post(f"{API}/tables/import", params={"name": "sales", "format": "csv"},
                           content=data, headers=headers)  # fmt: skip
        table_id = str(ok(made, 201)["table"]["id"])
        builtin = "agent.builtin-table-analyst"
        # Someone else's table is refused like a missing one; nothing is made.
        other = sales_table(client)
        refused = client.post(f"{API}/agents/{builtin}/copy", json={"tables": [other]},
                              headers=headers)  # fmt: skip
        assert refused.status_code == 422
        assert [e["loc"] for e in refused.json()["errors"]] == ["/tables/0"]
        copied = client.post(f"{API}/agents/{builtin}/copy", json={"tables": [table_id]},
                             headers=headers)  # fmt: skip
        mine = ok(copied, 201)
        assert mine["tables"] == [table_id] and mine["is_builtin"] is False
        chat = ok(client.post(f"{API}/agents/{mine['id']}/conversations", headers=headers), 201)
        question = {"content": "Which region sold the most?"}
        sent = client.post(f"{API}/conversations/{chat['id']}/messages", json=question,
                           headers=headers)  # fmt: skip
        run_id = ok(sent, 202)["id"]
        done = until(client, run_id, "succeeded", "failed", **headers)
        events = ok(client.get(f"{API}/runs/{run_id}/events", params={"limit": 1000},
                               headers=headers))["data"]  # fmt: skip
    assert done["status"] == "succeeded", done["error"]
    assert done["outputs"] == {"answer": ANSWER}
    assert [e["data"]["name"] for e in events if e["type"] == "tool.succeeded"] == [
        "describe_table", "query_table", "sql_query",
    ]  # fmt: skip
