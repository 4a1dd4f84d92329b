"""The structured query (POST /api/v1/tables/{id}/query) on SQLite and PostgreSQL, against a
reference computed here in Python: random rows, random filters (SQL's three-valued logic for
nulls included), group by with every aggregate, sort and pages. Plus pointed errors, and a
hidden table answering like a random id."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_sharing_api import World, ok
from tests.integration.test_tables_api import RANDOM, TABLES, append, make_table

COLUMNS = ("k:string", "n:integer", "x:number", "b:boolean", "d:date")
LETTERS = "abc"
Row = dict[str, Any]

rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "k": st.none() | st.text(LETTERS, min_size=0, max_size=2),
            "n": st.none() | st.integers(-5, 5),
            "x": st.none() | st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 2)),
            "b": st.none() | st.booleans(),
            "d": st.none() | st.sampled_from(["2024-01-01", "2024-02-29", "2025-12-31"]),
        }
    ),
    max_size=25,
)
values = {
    "k": st.text(LETTERS, max_size=2),
    "n": st.integers(-6, 6),
    "x": st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 1)),
    "b": st.booleans(),
    "d": st.sampled_from(["2024-01-01", "2024-02-29", "2025-06-01"]),
}


@st.composite
def comparison(draw: st.DrawFn) -> dict[str, Any]:
    column = draw(st.sampled_from(sorted(values)))
    ops = ["eq", "ne", "lt", "le", "gt", "ge", "in", "is_null"]
    if column == "k":
        ops.append("contains")
    op = draw(st.sampled_from(ops))
    if op == "is_null":
        return {"column": column, "op": op, "value": draw(st.booleans())}
    if op == "in":
        return {
            "column": column,
            "op": op,
            "value": draw(st.lists(values[column], min_size=1, max_size=3)),
        }
    return {"column": column, "op": op, "value": draw(values[column])}


conditions = st.recursive(
    comparison(),
    lambda inner: st.one_of(
        st.builds(lambda c: {"and": c}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda c: {"or": c}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda c: {"not": c}, inner),
    ),
    max_leaves=6,
)


def truth(cond: dict[str, Any], row: Row) -> bool | None:
    """SQL's three-valued logic."""
    if "and" in cond:
        parts = [truth(c, row) for c in cond["and"]]
        return False if False in parts else None if None in parts else True
    if "or" in cond:
        parts = [truth(c, row) for c in cond["or"]]
        return True if True in parts else None if None in parts else False
    if "not" in cond:
        inner = truth(cond["not"], row)
        return None if inner is None else not inner
    value, op, wanted = row[cond["column"]], cond["op"], cond["value"]
    if op == "is_null":
        return (value is None) == wanted
    if value is None:
        return None
    if op == "in":
        return value in wanted
    if op == "contains":
        return wanted.lower() in value.lower()
    return {
        "eq": value == wanted, "ne": value != wanted, "lt": value < wanted,
        "le": value <= wanted, "gt": value > wanted, "ge": value >= wanted,
    }[op]  # fmt: skip


def run(client: TestClient, table_id: str, query: dict[str, Any], **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = ok(client.post(f"{TABLES}/{table_id}/query", json=query, **kw))
    return body


def everything(client: TestClient, table_id: str, query: dict[str, Any]) -> list[Row]:
    """Every page of a query."""
    out: list[Row] = []
    query = {**query, "limit": 4}
    while True:
        page = run(client, table_id, query)
        out += page["rows"]
        if page["next_cursor"] is None:
            return out
        query["cursor"] = page["next_cursor"]


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=rows_strategy, cond=conditions)
def test_filters_match_the_reference(
    client: TestClient, rows: list[Row], cond: dict[str, Any]
) -> None:
    table_id = make_table(client, "t", *COLUMNS)
    if rows:
        ok(append(client, table_id, rows), 201)
    got = everything(client, table_id, {"filter": cond, "select": ["n", "k"]})
    want = [{"n": r["n"], "k": r["k"]} for r in rows if truth(cond, r) is True]
    assert got == want  # in row order
    assert client.delete(f"{TABLES}/{table_id}").status_code == 204


def reference_groups(rows: list[Row], cond: dict[str, Any] | None) -> dict[Any, dict[str, Any]]:
    groups: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        if cond is None or truth(cond, row) is True:
            groups[row["k"]].append(row)
    out = {}
    for key, members in groups.items():
        ns = [r["n"] for r in members if r["n"] is not None]
        xs = [r["x"] for r in members if r["x"] is not None]
        ds = [r["d"] for r in members if r["d"] is not None]
        out[key] = {
            "k": key,
            "count": len(members),
            "count_x": len(xs),
            "sum_n": sum(ns) if ns else None,
            "avg_x": sum(xs) / len(xs) if xs else None,
            "min_d": min(ds) if ds else None,
            "max_x": max(xs) if xs else None,
        }
    return out


AGGREGATES = [
    {"op": "count"},
    {"op": "count", "column": "x"},
    {"op": "sum", "column": "n"},
    {"op": "avg", "column": "x"},
    {"op": "min", "column": "d"},
    {"op": "max", "column": "x"},
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=rows_strategy, cond=st.none() | conditions)
def test_group_by_and_aggregates_match_the_reference(
    client: TestClient, rows: list[Row], cond: dict[str, Any] | None
) -> None:
    table_id = make_table(client, "t", *COLUMNS)
    if rows:
        ok(append(client, table_id, rows), 201)
    query: dict[str, Any] = {"group_by": ["k"], "aggregates": AGGREGATES}
    if cond is not None:
        query["filter"] = cond
    got = everything(client, table_id, query)
    want = reference_groups(rows, cond)
    assert sorted(r["k"] or "" for r in got) == sorted(k or "" for k in want)
    for row in got:
        expected = want[row["k"]]
        assert all(
            close(row[name], expected[name]) or row[name] == expected[name] for name in expected
        ), (row, expected)
    # one row of totals without group_by
    [total] = run(client, table_id, {"aggregates": [{"op": "count", "as": "rows"}]})["rows"]
    assert total == {"rows": len(rows)}
    assert client.delete(f"{TABLES}/{table_id}").status_code == 204


def test_sort_select_and_pages(client: TestClient) -> None:
    table_id = make_table(client, "t", *COLUMNS)
    rows = [{"k": k, "n": n, "x": float(n) / 2} for k, n in zip("abcabcab", range(8), strict=True)]
    ok(append(client, table_id, rows), 201)
    page = run(
        client, table_id, {"sort": [{"column": "n", "desc": True}], "select": ["n"], "limit": 3}
    )
    assert page["columns"] == [{"name": "n", "type": "integer"}]
    assert page["rows"] == [{"n": 7}, {"n": 6}, {"n": 5}]
    second = run(
        client,
        table_id,
        {"sort": ["-n"], "select": ["n"], "limit": 3, "cursor": page["next_cursor"]},
    )
    assert second["rows"] == [{"n": 4}, {"n": 3}, {"n": 2}]
    grouped = run(
        client,
        table_id,
        {
            "group_by": ["k"],
            "aggregates": [{"op": "sum", "column": "x", "as": "total"}],
            "sort": ["-total"],
        },
    )
    assert grouped["columns"] == [
        {"name": "k", "type": "string"},
        {"name": "total", "type": "number"},
    ]
    assert grouped["rows"] == [
        {"k": "b", "total": 6.0},
        {"k": "a", "total": 4.5},
        {"k": "c", "total": 3.5},
    ]


def test_bad_queries_point_at_the_problem(client: TestClient) -> None:
    table_id = make_table(client, "t", *COLUMNS, "j:json")
    response = client.post(
        f"{TABLES}/{table_id}/query",
        json={
            "filter": {
                "and": [
                    {"column": "nope", "op": "eq", "value": 1},
                    {"column": "n", "op": "gt", "value": "abc"},
                ]
            },
            "aggregates": [{"op": "sum", "column": "k"}, {"op": "median", "column": "n"}],
            "group_by": ["k"],
            "sort": ["zzz"],
            "limit": 0,
            "colour": 1,
        },
    )
    assert response.status_code == 422
    found = {e["loc"]: e["message"] for e in response.json()["errors"]}
    assert found["/filter/and/0/column"].startswith("The table has no column 'nope'")
    assert found["/filter/and/1/value"] == "column 'n': 'abc' is not an integer."
    assert found["/aggregates/0/column"] == "'k' is string: sum takes an integer or number column."
    assert found["/aggregates/1/op"].startswith("'median' is not an aggregate")
    assert found["/sort/0/column"].startswith("'zzz' is not a result column")
    assert found["/limit"] == "Give an integer from 1 to 1000."
    assert found["/colour"].startswith("Unknown key 'colour'")
    response = client.post(
        f"{TABLES}/{table_id}/query", json={"filter": {"column": "n", "op": "eq", "value": None}}
    )
    assert response.status_code == 422 and "is_null" in response.text


def test_a_hidden_table_answers_like_a_random_id(client: TestClient) -> None:
    world = World(client)
    mallory = world.user("mallory")
    table_id = make_table(client)
    for target in (table_id, RANDOM):
        response = client.post(f"{TABLES}/{target}/query", json={}, headers=world.as_(mallory))
        assert response.status_code == 404
        assert response.json()["detail"] == f"No table with id '{target}'."
