"""Read-only SQL over tables (POST /api/v1/tables/sql) on SQLite and PostgreSQL: results,
row and time limits, refusals (writes, other tables, escaping functions) that leave the data
as it was, a long query that does not hold up the server, and access: a table the caller
cannot read answers like a random id."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_sharing_api import World, ok
from tests.integration.test_tables_api import RANDOM, TABLES, all_rows, append, make_table

SQL = f"{TABLES}/sql"
ESCAPES = (
    "SELECT load_extension('/tmp/x')", "SELECT readfile('/etc/passwd')",
    "SELECT pg_read_file('/etc/passwd')", "SELECT pg_sleep(5)",
    "SELECT dblink('host=x', 'select 1')", "SELECT set_config('statement_timeout', '0', false)",
    "SELECT current_setting('data_directory')", "SELECT * FROM sqlite_master",
    "SELECT * FROM information_schema.tables", "SELECT * FROM pg_catalog.pg_tables",
    "SELECT * FROM tokens", "SELECT * FROM pg_shadow",
)  # fmt: skip


def sql(client: TestClient, query: str, tables: list[str], **kw: Any) -> Any:
    body = {"sql": query, "tables": tables, **{k: v for k, v in kw.items() if k == "limit"}}
    return client.post(SQL, json=body, headers=kw.get("headers"))


def refusal(response: Any) -> str:
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == "/sql"
    message: str = error["message"]
    return message


@pytest.fixture
def sales(client: TestClient) -> str:
    table_id = make_table(client)
    rows = [
        {"region": "north", "units": 3, "price": 2.5},
        {"region": "south", "units": 1, "price": 10.0},
        {"region": "north", "units": 4, "price": 1.25},
    ]
    ok(append(client, table_id, rows), 201)
    return table_id


def test_a_select_over_tables_by_name(client: TestClient, sales: str) -> None:
    people = make_table(client, "People", "name:string", "region:string")
    ok(append(client, people, [{"name": "ann", "region": "north"}]), 201)
    query = (
        "SELECT s.Region, SUM(s.units * s.price) AS revenue, COUNT(p.name) AS staff "
        'FROM sales AS s LEFT JOIN "People" p ON p.region = s.region '
        "GROUP BY s.region ORDER BY revenue DESC"
    )
    body = ok(sql(client, query, [sales, people]))
    assert body["columns"] == ["region", "revenue", "staff"]
    assert body["rows"] == [["north", 12.5, 2], ["south", 10.0, 0]]
    assert body["truncated"] is False
    # the quoted id names a table too, and dates and nulls come back as JSON
    body = ok(sql(client, f'SELECT units FROM "{sales}" WHERE price > 2 ORDER BY 1', [sales]))
    assert body["rows"] == [[1], [3]]


def test_row_limit_and_truncated_flag(client: TestClient, sales: str) -> None:
    body = ok(sql(client, "SELECT units FROM sales ORDER BY units", [sales], limit=2))
    assert body == {"columns": ["units"], "rows": [[1], [3]], "truncated": True}
    body = ok(sql(client, "SELECT units FROM sales ORDER BY units LIMIT 1", [sales], limit=2))
    assert body["rows"] == [[1]] and body["truncated"] is False


@pytest.mark.parametrize("query", ESCAPES)
def test_escapes_and_other_tables_are_refused(client: TestClient, sales: str, query: str) -> None:
    refusal(sql(client, query, [sales]))


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM sales",
        "UPDATE sales SET units = 0",
        "DROP TABLE sales",
        "WITH d AS (DELETE FROM sales RETURNING *) SELECT * FROM d",
        "SELECT 1; DELETE FROM sales",
        "SELECT * INTO stolen FROM sales",
    ],
)
def test_writes_are_refused_and_change_nothing(client: TestClient, sales: str, query: str) -> None:
    assert "SELECT" in refusal(sql(client, query, [sales])) or "one statement" in refusal(
        sql(client, query, [sales])
    )
    assert len(all_rows(client, sales)) == 3


def test_the_time_limit_stops_a_long_query_without_holding_up_the_server(
    client: TestClient, sales: str
) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    services.tables.query_seconds = 1.0
    endless = (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    )
    answers: list[Any] = []
    worker = threading.Thread(target=lambda: answers.append(sql(client, endless, [sales])))
    worker.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert client.get(f"{TABLES}/{sales}").status_code == 200  # while the query runs
    assert time.monotonic() - started < 0.5
    worker.join(timeout=10)
    assert "time limit" in refusal(answers[0])


def test_same_names_need_the_quoted_id(client: TestClient, sales: str) -> None:
    folder = ok(client.post("/api/v1/folders", json={"name": "other"}), 201)["id"]
    twin = make_table(client, "sales", folder_id=folder)
    message = refusal(sql(client, "SELECT * FROM sales", [sales, twin]))
    assert f'"{sales}"' in message and f'"{twin}"' in message
    assert ok(sql(client, f'SELECT COUNT(*) FROM "{twin}"', [sales, twin]))["rows"] == [[0]]


def test_a_table_the_caller_cannot_read_is_like_no_table(client: TestClient, sales: str) -> None:
    world = World(client)
    mallory = world.user("mallory")
    mine = world.call(mallory, "POST", TABLES, {"name": "mine", "columns": []}).json()["id"]
    as_mallory = world.as_(mallory)
    # listed: the same answer as a random id
    for target in (sales, RANDOM):
        response = sql(client, "SELECT 1", [mine, target], headers=as_mallory)
        assert response.status_code == 404
        assert response.json()["detail"] == f"No table with id '{target}'."
    # named, not listed: the same answer as a name nothing has
    hidden = refusal(sql(client, "SELECT * FROM sales", [mine], headers=as_mallory))
    nothing = refusal(sql(client, "SELECT * FROM nosuch", [mine], headers=as_mallory))
    assert hidden == nothing.replace("nosuch", "sales")
    # the storage name of a table is no way in either
    physical = "kt_" + sales.split(".", 1)[1]
    assert "No table" in refusal(
        sql(client, f"SELECT * FROM {physical}", [mine], headers=as_mallory)
    )


def test_the_connection_itself_refuses_writes_and_other_tables(
    client: TestClient, sales: str
) -> None:
    """Beneath the checker: what runs SQL reads only (SQLite: a read-only connection whose
    authorizer allows the listed tables; PostgreSQL: a READ ONLY transaction)."""
    from dhub.store import table_reads

    db = client.app.state.services.db  # type: ignore[attr-defined]
    physical = "kt_" + sales.split(".", 1)[1]

    def run(statement: str, tables: list[str]) -> Any:
        return client.portal.call(  # type: ignore[union-attr]
            table_reads.sql_rows, db, statement, 2.0, 10, tables, ["count"]
        )

    with pytest.raises(table_reads.QueryFailed):
        run(f'DELETE FROM "{physical}"', [physical])
    if db.is_sqlite:  # the authorizer: only the listed tables
        with pytest.raises(table_reads.QueryFailed):
            run("SELECT COUNT(*) FROM users", [physical])
    assert run(f'SELECT COUNT(*) FROM "{physical}"', [physical]).rows == [(3,)]
    assert len(all_rows(client, sales)) == 3
