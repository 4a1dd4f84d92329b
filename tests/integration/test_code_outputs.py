"""A code node's ``outputs`` given as JSON Schema hold: a value that does not fit fails the node
with ``invalid_output`` naming the output, where in it, and the schema keyword it breaks; a
schema that is not one is a 422 pointing into it when the agent is saved. The sandbox runs the
code for real. SQLite and PostgreSQL."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from tests.integration.test_runs_api import create, ok, until

API = "/api/v1"
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^A-[0-9]+$"},
        "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1},
    },
    "required": ["id", "lines"],
    "additionalProperties": False,
}
ECHO = {
    "name": "echo-order",
    "description": "Returns the order it is given, as its code node's outputs say.",
    "input_mode": "event",
    "mode": "workflow",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "order", "type": "object", "required": True, "description": "An order"},
        ]}},
        {"id": "shape", "type": "code", "config": {
            "source": "def main(order):\n    return {'order': order, 'count': len(order)}\n",
            "input_mappings": {"order": "{{ order }}"},
            "outputs": {"order": ORDER_SCHEMA, "count": "integer"},
        }},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "order", "type": "object", "value": "{{ order }}"},
        ]}},
    ],
    "edges": [{"source": "start", "target": "shape"}, {"source": "shape", "target": "end"}],
}  # fmt: skip


def run(client: TestClient, agent: str, order: Any) -> dict[str, Any]:
    started = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": {"order": order}}), 202)
    return until(client, started["id"], "succeeded", "failed")


def test_a_value_that_fits_the_schema_passes(client: TestClient) -> None:
    agent = create(client, ECHO)
    done = run(client, agent, {"id": "A-17", "lines": [1, 3]})
    assert done["status"] == "succeeded", done
    assert done["outputs"] == {"order": {"id": "A-17", "lines": [1, 3]}}


def test_a_value_that_breaks_the_schema_fails_the_node_naming_output_and_schema_path(
    client: TestClient,
) -> None:
    agent = create(client, ECHO)
    failed = run(client, agent, {"id": "A-17", "lines": [2, 0]})
    assert failed["status"] == "failed"
    error = failed["error"]
    assert error["kind"] == "invalid_output" and error["node_id"] == "shape", error
    assert error["message"] == (
        "outputs.order.lines[1]: should be at least 1, got 0 "
        "(schema /outputs/order/properties/lines/items/minimum)"
    )
    assert error["output"] == "order"
    assert error["schema_path"] == "/outputs/order/properties/lines/items/minimum"
    events = ok(client.get(f"{API}/runs/{failed['id']}/events"))["data"]
    [node_failed] = [e for e in events if e["type"] == "node.failed"]
    assert node_failed["node_id"] == "shape"
    assert node_failed["data"]["error"]["kind"] == "invalid_output"


def test_every_problem_is_named(client: TestClient) -> None:
    agent = create(client, ECHO)
    failed = run(client, agent, {"id": "B-1", "lines": [], "note": "x"})
    message = failed["error"]["message"]
    assert "outputs.order.id: should match the pattern '^A-[0-9]+$', got 'B-1'" in message
    assert "outputs.order.lines: should have at least 1 items, got an array" in message
    assert "outputs.order.note: is not allowed here (allowed: id, lines)" in message
    assert "outputs.count" not in message  # 3, an integer: only what is wrong is reported


def test_a_bare_type_name_is_checked_as_that_type(client: TestClient) -> None:
    doc = copy.deepcopy(ECHO)
    doc["nodes"][1]["config"]["source"] = (
        "def main(order):\n    return {'order': order, 'count': str(len(order))}\n"
    )
    failed = run(client, create(client, doc), {"id": "A-1", "lines": [1]})
    assert failed["error"]["message"] == "outputs.count: should be an integer, got '2'"
    assert failed["error"]["schema_path"] == "/outputs/count"


def test_an_output_missing_from_the_result_is_named(client: TestClient) -> None:
    doc = copy.deepcopy(ECHO)
    doc["nodes"][1]["config"]["source"] = "def main(order):\n    return {'order': order}\n"
    failed = run(client, create(client, doc), {"id": "A-1", "lines": [1]})
    assert failed["error"]["message"] == "outputs.count: missing from the result (it has 'order')"
    assert failed["error"]["output"] == "count"


def test_a_schema_that_is_not_one_is_refused_pointing_into_it(client: TestClient) -> None:
    doc = copy.deepcopy(ECHO)
    broken = copy.deepcopy(ORDER_SCHEMA)
    broken["properties"]["lines"]["minItems"] = "one"
    doc["nodes"][1]["config"]["outputs"]["order"] = broken
    where = "/nodes/1/config/outputs/order/properties/lines/minItems"
    response = client.post(f"{API}/agents", json=doc)
    body = ok(response, 422)
    assert [(e["loc"], e["code"]) for e in body["errors"]] == [(where, "invalid_schema")]
    assert "Not a valid JSON schema: 'one' is not of type 'integer'" in body["errors"][0]["message"]

    checked = ok(client.post(f"{API}/agents/validate", json=doc))
    assert [e["loc"] for e in checked["errors"]] == [where]

    agent = create(client, ECHO)
    patched = client.patch(f"{API}/agents/{agent}", json={"nodes": doc["nodes"]})
    assert [e["loc"] for e in ok(patched, 422)["errors"]] == [where]
