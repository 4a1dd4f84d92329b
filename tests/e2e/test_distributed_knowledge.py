"""Knowledge tools on a worker (issue 19 in distributed mode): `dhub serve --no-worker` only
queues, so a react agent that lists a table (the examples' sales) answers from it in a `dhub
worker` process, whose knowledge port reads the table from the shared PostgreSQL. The model is
a scripted provider entry in a providers file that the worker reads (DHUB_PROVIDERS_FILE). A
user who may run the agent but not read its table is refused by the API as in single-process
mode (tests/integration/test_table_agents.py), before anything is queued."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_distributed import Cluster
from tests.integration.test_react import agent
from tests.integration.test_table_agents import ANSWER, REPLIES

pytestmark = pytest.mark.postgres


@pytest.fixture
def cluster(tmp_path: Path, pg_schema: str) -> Iterator[Cluster]:
    providers = tmp_path / "providers.json"
    # One worker, one run: the script is spent once, in the worker (the API never calls it).
    providers.write_text(json.dumps({"providers": {"openai": {"type": "scripted",
                                                               "replies": REPLIES}}}))  # fmt: skip
    cluster = Cluster(tmp_path, pg_schema, DHUB_PROVIDERS_FILE=str(providers))
    try:
        yield cluster
    finally:
        cluster.close()


def sales_table(http: httpx.Client) -> str:
    """The examples' sales table (examples/knowledge/sales.csv), loaded by the API process
    on its fresh data directory, made by the admin and shared with nobody."""
    [table] = [t for t in http.get("/tables", params={"limit": 100}).json()["data"]
               if t["name"] == "sales"]  # fmt: skip
    return str(table["id"])


def totals(http: httpx.Client, table_id: str) -> list[tuple[str, int]]:
    """Units by region, most first, computed here from the rows."""
    out: dict[str, int] = {}
    rows = http.get(f"/tables/{table_id}/rows", params={"limit": 100}).json()["data"]
    for row in rows:
        out[row["region"]] = out.get(row["region"], 0) + row["units"]
    return sorted(out.items(), key=lambda kv: -kv[1])


def test_a_react_agent_answers_from_its_table_on_a_worker(cluster: Cluster) -> None:
    http = cluster.http
    table_id = sales_table(http)
    expected = totals(http, table_id)
    doc = {**agent(), "name": "analyst-e2e", "tables": [table_id]}
    made = http.post("/agents", json=doc)
    assert made.status_code == 201, made.text
    agent_id = made.json()["id"]

    # Someone who may run the agent but not read its table: refused by the API, which
    # names nothing of the table, the same refusal as for a table that does not exist.
    user = http.post("/users", json={"name": "mallory", "display_name": "Mallory"}).json()["id"]
    token = http.post(f"/users/{user}/tokens", json={"name": "t"}).json()["token"]
    grant = http.post(f"/agents/{agent_id}/grants",
                      json={"principal_id": user, "scope": "runner"})  # fmt: skip
    assert grant.status_code == 201, grant.text
    mallory = {"Authorization": f"Bearer {token}"}
    chat = http.post(f"/agents/{agent_id}/conversations", headers=mallory)
    if chat.status_code == 201:
        sent = http.post(f"/conversations/{chat.json()['id']}/messages",
                         json={"content": "Which region sold the most?"},
                         headers=mallory)  # fmt: skip
    else:
        sent = chat
    assert sent.status_code == 422, sent.text
    assert "sales" not in sent.text and "No table" in sent.text
    assert http.get("/runs", headers=mallory).json()["data"] == []
    assert http.get(f"/tables/{table_id}/rows", headers=mallory).status_code == 404

    # The owner's question waits in the queue: the API process runs nothing itself.
    chat_id = http.post(f"/agents/{agent_id}/conversations").json()["id"]
    sent = http.post(f"/conversations/{chat_id}/messages",
                     json={"content": "Which region sold the most units?"})  # fmt: skip
    assert sent.status_code == 202, sent.text
    run_id = sent.json()["id"]
    assert http.get(f"/runs/{run_id}").json()["status"] == "queued"
    cluster.add_worker()
    done = cluster.finished(run_id)
    assert done["status"] == "succeeded", done["error"]
    assert done["outputs"] == {"answer": ANSWER}
    events = http.get(f"/runs/{run_id}/events", params={"limit": 1000}).json()["data"]
    called = [(e["data"]["name"], e["data"].get("category"))
              for e in events if e["type"] == "tool.called"]  # fmt: skip
    assert called == [
        ("describe_table", "knowledge"), ("query_table", "knowledge"), ("sql_query", "knowledge"),
    ]  # fmt: skip
    results = [e["data"]["result"] for e in events if e["type"] == "tool.succeeded"]
    described, queried, answered = results
    assert described["row_count"] == 50 and described["name"] == "sales"
    assert [(r["region"], r["units"]) for r in queried["rows"]] == expected
    assert [tuple(r) for r in answered["rows"]] == expected
    # Nobody's run but the owner's: mallory's refusal queued nothing for the worker.
    assert [r["id"] for r in http.get("/runs").json()["data"]] == [run_id]
