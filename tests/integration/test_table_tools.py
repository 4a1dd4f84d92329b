"""Tables as an agent's knowledge (services/table_tools.py), on SQLite and PostgreSQL: the
operations a run performs for its user (describe, query, SQL) with access checked on every
call, the agent's list enforced, and the tools the model is given."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.access.principal import Principal
from dhub.knowledge.errors import KnowledgeError
from dhub.knowledge.tables_tools import agent_tools, tools_for
from dhub.services import knowledge_kinds as registry
from dhub.store import resources as repo
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_sharing_api import World, ok
from tests.integration.test_tables_api import TABLES, append, make_table


def principal(client: TestClient, token: str) -> Principal:
    auth = client.app.state.services.auth  # type: ignore[attr-defined]
    found: Principal = client.portal.call(auth.authenticate, f"Bearer {token}")  # type: ignore[union-attr]
    return found


def call(client: TestClient, who: Principal, operation: str, arguments: dict[str, Any]) -> Any:
    db = client.app.state.services.db  # type: ignore[attr-defined]
    op = registry.operation(operation)
    assert op is not None
    return client.portal.call(op, db, who, arguments)  # type: ignore[union-attr]


@pytest.fixture
def sales(client: TestClient) -> str:
    table_id = make_table(client, "Sales", "region:string!", "units:integer", "price:number")
    rows = [
        {"region": "north", "units": 3, "price": 2.5},
        {"region": "south", "units": 1, "price": 10.0},
        {"region": "north", "units": 4, "price": 1.25},
    ]
    ok(append(client, table_id, rows), 201)
    return table_id


def test_describe_query_and_sql(client: TestClient, sales: str) -> None:
    admin = principal(client, ADMIN_TOKEN)
    bound = {"table_ids": [sales]}
    described = call(client, admin, "table.describe", {**bound, "table": "sales"})
    assert described["row_count"] == 3
    assert [c["name"] for c in described["columns"]] == ["region", "units", "price"]
    assert described["sample_rows"][0] == {"_row": 1, "region": "north", "units": 3, "price": 2.5}
    queried = call(
        client,
        admin,
        "table.query",
        {
            **bound,
            "table": sales,
            "filter": {"column": "units", "op": "ge", "value": 3},
            "group_by": ["region"],
            "aggregates": [{"op": "sum", "column": "units", "as": "units"}],
        },
    )
    assert queried["rows"] == [{"region": "north", "units": 7}]
    answered = call(client, admin, "table.sql", {**bound, "sql": "SELECT COUNT(*) AS n FROM sales"})
    assert answered == {"columns": ["n"], "rows": [[3]], "truncated": False}
    bad = {"column": "units", "op": "eq", "value": "x"}
    with pytest.raises(KnowledgeError, match="is not an integer"):
        call(client, admin, "table.query", {**bound, "table": "sales", "filter": bad})
    writes = "WITH d AS (DELETE FROM sales RETURNING *) SELECT 1"
    with pytest.raises(KnowledgeError, match="only reading"):
        call(client, admin, "table.sql", {**bound, "sql": writes})


def test_tables_outside_the_list_or_out_of_reach_are_not_there(
    client: TestClient, sales: str
) -> None:
    world = World(client)
    mallory = world.user("mallory")
    other = make_table(client, "other", "x:integer")
    admin = principal(client, ADMIN_TOKEN)
    # the admin may read 'other', but the agent does not list it
    unlisted = {"table_ids": [sales], "table": "other"}
    with pytest.raises(KnowledgeError) as not_listed:
        call(client, admin, "table.describe", unlisted)
    with pytest.raises(KnowledgeError) as nowhere:
        call(client, admin, "table.describe", {**unlisted, "table": "nosuch"})
    assert str(not_listed.value) == str(nowhere.value).replace("nosuch", "other")
    with pytest.raises(KnowledgeError):
        call(client, admin, "table.describe", {"table_ids": [sales], "table": other})
    with pytest.raises(KnowledgeError) as sql_unlisted:
        call(client, admin, "table.sql", {"table_ids": [sales], "sql": "SELECT * FROM other"})
    with pytest.raises(KnowledgeError) as sql_nowhere:
        call(client, admin, "table.sql", {"table_ids": [sales], "sql": "SELECT * FROM nosuch"})
    assert str(sql_unlisted.value) == str(sql_nowhere.value).replace("nosuch", "other")
    # mallory's run: the agent lists the table, but she cannot read it
    theirs = principal(client, world.tokens[mallory])
    bound = {"table_ids": [sales]}
    for operation, arguments in (
        ("table.describe", {"table": "sales"}),
        ("table.query", {"table": "sales"}),
        ("table.query", {"table": sales}),
    ):
        with pytest.raises(KnowledgeError) as hidden:
            call(client, theirs, operation, {**bound, **arguments})
        with pytest.raises(KnowledgeError) as missing:
            call(client, theirs, operation, {**bound, **arguments, "table": "nosuch"})
        assert str(hidden.value) == str(missing.value).replace("nosuch", arguments["table"])
    with pytest.raises(KnowledgeError) as sql_hidden:
        call(client, theirs, "table.sql", {**bound, "sql": "SELECT * FROM sales"})
    with pytest.raises(KnowledgeError) as sql_missing:
        call(client, theirs, "table.sql", {**bound, "sql": "SELECT * FROM nosuch"})
    assert str(sql_hidden.value) == str(sql_missing.value).replace("nosuch", "sales")
    # access is checked at every call: shared now, she reads it; unshared again, she does not
    grant = {"principal_id": mallory, "scope": "viewer"}
    ok(client.post(f"{TABLES}/{sales}/grants", json=grant), 201)
    assert call(client, theirs, "table.describe", {**bound, "table": "sales"})["row_count"] == 3
    assert client.delete(f"{TABLES}/{sales}/grants/{mallory}").status_code == 204
    with pytest.raises(KnowledgeError):
        call(client, theirs, "table.describe", {**bound, "table": "sales"})


def test_agent_tools_describe_the_tables(client: TestClient, sales: str) -> None:
    db = client.app.state.services.db  # type: ignore[attr-defined]

    async def records() -> list[Any]:
        async with db.read() as conn:
            found = await repo.get_resources(conn, [sales], [])
        return [found[sales].record]

    listed = client.portal.call(records)  # type: ignore[union-attr]
    tools = agent_tools(listed)
    assert [t.name for t in tools] == ["describe_table", "query_table", "sql_query"]
    assert [t.operation for t in tools] == ["table.describe", "table.query", "table.sql"]
    for tool in tools:
        assert tool.bound == {"table_ids": [sales]}
        assert "'Sales'" in tool.description and "units (integer)" in tool.description
        assert tool.parameters["type"] == "object"
        assert not tool.confirm
    assert tools_for([]) == [] and agent_tools([]) == []


def test_with_one_table_the_model_need_not_name_it(client: TestClient, sales: str) -> None:
    admin = principal(client, ADMIN_TOKEN)
    arguments = {"table_ids": [sales], "run_id": "run.x", "aggregates": [{"op": "count"}]}
    assert call(client, admin, "table.query", arguments)["rows"] == [{"count": 3}]
