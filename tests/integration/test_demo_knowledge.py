"""The knowledge examples on a server started with them (`make run`), with no provider key: the
loader imports the sales table, the weekly-report template and the support ontology before the
agents, whose ``${table:sales}`` placeholders become those ids; the demo model then answers
from what the tools return: the sales analyst's numbers are the rows' (checked against a
reference computed here from the CSV), the support assistant follows the ontology's links.
SQLite and PostgreSQL."""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, ROOT
from tests.integration.test_demo_model import decide, events, say
from tests.integration.test_runs_api import ok, until

API = "/api/v1"
EXAMPLES = ROOT / "examples"


@pytest.fixture
def served(settings: Settings) -> Iterator[TestClient]:
    loaded = Settings(**{**vars(settings), "examples_dir": EXAMPLES, "demo_model": True})
    with TestClient(create_app(loaded)) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield client


def named(client: TestClient, kind: str, name: str) -> dict[str, Any]:
    [found] = ok(client.get(f"{API}/{kind}", params={"name": name}))["data"]
    return dict(found)


def ask(client: TestClient, agent: str, text: str) -> tuple[dict[str, Any], list[Any]]:
    agent_id = named(client, "agents", agent)["id"]
    chat = ok(client.post(f"{API}/agents/{agent_id}/conversations"), 201)
    run_id = say(client, chat["id"], text)
    return until(client, run_id, "succeeded", "failed", "waiting"), events(client, run_id)


def tool_calls(log: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(e["data"]["name"], e["data"]["arguments"]) for e in log if e["type"] == "tool.called"]


def test_the_loader_makes_the_knowledge_the_example_agents_name(served: TestClient) -> None:
    table = named(served, "tables", "sales")
    template = named(served, "templates", "weekly-report")
    ontology = named(served, "ontologies", "support-ontology")
    assert named(served, "agents", "sales-analyst")["tables"] == [table["id"]]
    assert named(served, "agents", "support-assistant")["ontologies"] == [ontology["id"]]
    filler = named(served, "agents", "weekly-report-filler")
    [fill] = [n for n in filler["nodes"] if n["type"] == "template"]
    assert fill["config"]["template"] == template["id"]
    rows = ok(served.get(f"{API}/tables/{table['id']}/rows", params={"limit": 100}))["data"]
    assert len(rows) == 50
    customers = ok(served.get(f"{API}/ontologies/{ontology['id']}/objects",
                              params={"type": "customer"}))["data"]  # fmt: skip
    assert len(customers) == 10


def _units_by_region() -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    with (EXAMPLES / "knowledge" / "sales.csv").open() as rows:
        for row in csv.DictReader(rows):
            totals[row["region"]] += int(row["units"])
    return dict(totals)


def test_the_sales_analyst_answers_from_the_rows(served: TestClient) -> None:
    run, log = ask(served, "sales-analyst", "What are the total units by region?")
    assert run["status"] == "succeeded", run
    assert tool_calls(log) == [
        ("describe_table", {"table": "sales"}),
        ("query_table", {
            "table": "sales", "group_by": ["region"],
            "aggregates": [{"op": "sum", "column": "units", "as": "sum_units"}],
            "sort": [{"column": "sum_units", "desc": True}],
        }),
    ]  # fmt: skip
    answer = run["outputs"]["answer"]
    expected = sorted(_units_by_region().items(), key=lambda kv: -kv[1])
    listed = "; ".join(f"{region}: {total}" for region, total in expected)
    source = "(computed by query_table from the 50 rows of table 'sales')"
    assert f"Total units by region {source}: {listed}." in answer
    assert "This is the demo model" in answer and "DHUB_OPENAI_API_KEY" in answer


def test_an_average_and_a_count(served: TestClient) -> None:
    run, _ = ask(served, "sales-analyst", "What is the average unit price per product?")
    assert run["outputs"]["answer"].startswith("Average unit_price by product"), run
    run, _ = ask(served, "sales-analyst", "How many orders are there?")
    source = "(computed by query_table from the 50 rows of table 'sales')"
    assert run["outputs"]["answer"].startswith(f"Rows: 50 {source}."), run


def test_the_support_assistant_explores_the_ontology(served: TestClient) -> None:
    run, log = ask(served, "support-assistant", "Who placed order A-1001 and what is in it?")
    assert run["status"] == "succeeded", run
    calls = tool_calls(log)
    assert calls[0] == ("ontology_search", {"q": "A-1001"})
    assert sorted(c[1]["link"] for c in calls[1:]) == ["contains", "placed_by"]
    answer = run["outputs"]["answer"]
    assert answer.startswith("Order A-1001: order_id A-1001, status open, total 203.0")
    assert "- placed_by: C-001 (Ada Lovelace)" in answer
    assert "- contains: P-100 (Mechanical keyboard), P-104 (Laptop stand), P-106 (Webcam)" in answer


def test_a_refund_still_goes_through_the_confirmed_actor(served: TestClient) -> None:
    run, _ = ask(served, "support-assistant", "Please refund order A-1001")
    assert run["status"] == "waiting", run
    task = decide(served, run["id"], approve=True)
    assert task["request"]["actor"] == "issue_refund"
    done = until(served, run["id"], "succeeded", "failed")
    assert done["outputs"] == {"answer": "Done: order A-1001 is refunded (42.0)."}


def test_the_console_offers_the_examples_with_the_callers_ids(served: TestClient) -> None:
    table = named(served, "tables", "sales")
    offered = ok(served.get(f"{API}/examples"))["data"]
    [analyst] = [e for e in offered if e["name"] == "sales-analyst"]
    assert analyst["document"]["tables"] == [table["id"]]
    # Someone who cannot see the admin's table gets the placeholder back, never its id.
    body = {"name": "eve", "display_name": "Eve"}
    eve = ok(served.post(f"{API}/users", json=body), 201)["id"]
    token = ok(served.post(f"{API}/users/{eve}/tokens", json={"name": "t"}), 201)["token"]
    seen = ok(served.get(f"{API}/examples", headers={"Authorization": f"Bearer {token}"}))
    [theirs] = [e for e in seen["data"] if e["name"] == "sales-analyst"]
    assert theirs["document"]["tables"] == ["${table:sales}"]
    refused = served.post(f"{API}/agents", json=theirs["document"],
                          headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["loc"] == "/tables/0"
