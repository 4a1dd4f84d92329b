"""Tables over HTTP on SQLite and PostgreSQL: the kind (columns, schema changes that the rows
must follow), rows (list, append, update, delete) and access (a table the caller cannot
see answers exactly like a random id on every data endpoint)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_sharing_api import World, ok

API = "/api/v1"
TABLES = f"{API}/tables"
RANDOM = "table.01jzzzzzzzzzzzzzzzzzzzzzzz"


def columns(*specs: str) -> list[dict[str, Any]]:
    """``"name:type"`` or ``"name:type!"`` (not nullable)."""
    out = []
    for spec in specs:
        name, kind = spec.split(":")
        out.append({"name": name, "type": kind.rstrip("!"), "nullable": not kind.endswith("!")})
    return out


def make_table(client: TestClient, name: str = "sales", *specs: str, **extra: Any) -> str:
    cols = columns(*(specs or ("region:string!", "units:integer", "price:number")))
    body = {"name": name, "description": "Sales", "columns": cols, **extra}
    table_id: str = ok(client.post(TABLES, json=body), 201)["id"]
    return table_id


def append(client: TestClient, table_id: str, rows: list[dict[str, Any]], **kw: Any) -> Any:
    return client.post(f"{TABLES}/{table_id}/rows", json={"rows": rows}, **kw)


def all_rows(client: TestClient, table_id: str, **kw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = ok(client.get(f"{TABLES}/{table_id}/rows", params=params, **kw))
        out += page["data"]
        if page["next_cursor"] is None:
            return out
        params["cursor"] = page["next_cursor"]


def errors_of(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    return [(e["loc"], e["message"]) for e in response.json()["errors"]]


# -- the kind -----------------------------------------------------------------------------------


def test_a_table_is_a_kind_with_typed_columns(client: TestClient) -> None:
    table_id = make_table(client)
    assert table_id.startswith("table.")
    body = ok(client.get(f"{TABLES}/{table_id}"))
    assert body["category"] == "table"
    assert [c["name"] for c in body["columns"]] == ["region", "units", "price"]
    assert body["version"] == 1
    listed = ok(client.get(TABLES))["data"]
    assert [t["id"] for t in listed] == [table_id]


def test_column_names_are_identifiers_unique_whatever_the_case(client: TestClient) -> None:
    bad = [
        {"name": "Price", "type": "number"},
        {"name": "price", "type": "number"},
        {"name": "unit price", "type": "number"},
        {"name": "_row", "type": "integer"},
        {"name": "x" * 64, "type": "string"},
        {"name": "when", "type": "timestamp"},
    ]
    found = errors_of(client.post(TABLES, json={"name": "t", "columns": bad}))
    locs = [loc for loc, _ in found]
    assert "/columns/1/name" in locs  # the duplicate
    assert "/columns/2/name" in locs
    assert "/columns/3/name" in locs
    assert "/columns/4/name" in locs
    assert "/columns/5/type" in locs
    assert "/columns/0/name" not in locs
    message = dict(found)["/columns/1/name"]
    assert "declared twice" in message and "/columns/0" in message


def test_schema_changes_follow_the_rows(client: TestClient) -> None:
    table_id = make_table(client)
    url = f"{TABLES}/{table_id}"
    ok(append(client, table_id, [{"region": "north", "units": 3, "price": 2.5}]), 201)
    # add a column, widen integer to number, drop a column
    cols = columns("region:string!", "units:number", "note:string")
    body = ok(client.patch(url, json={"columns": cols}))
    assert body["version"] == 2
    rows = all_rows(client, table_id)
    assert rows == [{"_row": 1, "region": "north", "units": 3, "note": None}]
    ok(append(client, table_id, [{"region": "south", "units": 1.5, "note": "x"}]), 201)
    # incompatible changes on a table with rows: refused, pointing at the column
    refused = client.patch(url, json={"columns": columns("region:integer!", "units:number")})
    [(loc, message)] = errors_of(refused)
    assert loc == "/columns/0/type"
    assert "'region'" in message and "string" in message and "integer" in message
    refused = client.patch(url, json={"columns": [*cols, *columns("must:string!")]})
    assert [loc for loc, _ in errors_of(refused)] == ["/columns/3/nullable"]
    refused = client.patch(
        url, json={"columns": columns("region:string!", "units:number", "note:string!")}
    )
    assert [loc for loc, _ in errors_of(refused)] == ["/columns/2/nullable"]
    assert ok(client.get(url))["version"] == 2  # nothing changed
    # once empty, any type change is fine
    ids = [r["_row"] for r in all_rows(client, table_id)]
    assert ok(client.post(f"{url}/rows/delete", json={"row_ids": ids})) == {"deleted": 2}
    ok(client.patch(url, json={"columns": columns("region:integer!", "units:number")}))
    ok(append(client, table_id, [{"region": 7}]), 201)
    assert all_rows(client, table_id) == [{"_row": 3, "region": 7, "units": None}]


def test_a_schema_change_is_a_version_rows_are_not(client: TestClient) -> None:
    table_id = make_table(client)
    url = f"{TABLES}/{table_id}"
    [row_id] = ok(append(client, table_id, [{"region": "north", "units": 3}]), 201)["row_ids"]
    ok(client.patch(f"{url}/rows/{row_id}", json={"units": 4}))
    ok(append(client, table_id, [{"region": "south"}]), 201)
    ok(client.post(f"{url}/rows/delete", json={"row_ids": [row_id]}))
    [first] = ok(client.get(f"{url}/versions"))["data"]
    assert (first["version"], first["created_by"]) == (1, "user.admin")
    assert ok(client.get(url))["version"] == 1

    widened = columns("region:string!", "units:number", "note:string")
    ok(client.patch(url, json={"columns": widened}))
    listed = ok(client.get(f"{url}/versions"))["data"]
    assert [v["version"] for v in listed] == [2, 1]  # newest first
    old = ok(client.get(f"{url}/versions/1"))
    assert (old["id"], old["version"]) == (table_id, 1)
    assert [(c["name"], c["type"]) for c in old["columns"]] == [
        ("region", "string"), ("units", "integer"), ("price", "number")]  # fmt: skip
    assert ok(client.get(f"{url}/versions/2"))["columns"] == ok(client.get(url))["columns"]
    missing = client.get(f"{url}/versions/3")
    assert missing.status_code == 404 and "versions 1 to 2" in missing.json()["detail"]
    assert client.get(f"{TABLES}/{RANDOM}/versions").status_code == 404


def test_deleting_a_table_drops_its_rows(client: TestClient) -> None:
    table_id = make_table(client)
    ok(append(client, table_id, [{"region": "north"}]), 201)
    assert client.delete(f"{TABLES}/{table_id}").status_code == 204
    assert client.get(f"{TABLES}/{table_id}/rows").status_code == 404
    again = make_table(client)  # the same name, a new table: no rows
    assert all_rows(client, again) == []


# -- rows ---------------------------------------------------------------------------------------


def test_rows_round_trip_every_type(client: TestClient) -> None:
    table_id = make_table(
        client, "everything", "s:string", "n:number", "i:integer", "b:boolean", "d:date",
        "t:datetime", "j:json",
    )  # fmt: skip
    row = {
        "s": "é ☃",
        "n": 1.25,
        "i": 2**62,
        "b": True,
        "d": "2024-02-29",
        "t": "2024-02-29T10:11:12.5+02:00",
        "j": {"a": [1, None, "x"]},
    }
    created = ok(append(client, table_id, [row, {}]), 201)
    assert created == {"inserted": 2, "row_ids": [1, 2]}
    got = all_rows(client, table_id)
    assert got[0] == {**row, "_row": 1, "t": "2024-02-29T08:11:12.500000"}
    assert got[1] == {"_row": 2, **dict.fromkeys(row)}


def test_values_are_checked_against_the_columns(client: TestClient) -> None:
    table_id = make_table(client)
    rows = [
        {"region": "north", "units": 1},
        {"region": "south", "units": "many", "price": "abc"},
        {"units": 2},
        {"region": "x", "colour": "red"},
        {"region": "y", "units": 2.5, "price": True},
    ]
    found = errors_of(append(client, table_id, rows))
    assert found == [
        ("/rows/1/units", "row 2, column 'units': 'many' is not an integer"),
        ("/rows/1/price", "row 2, column 'price': 'abc' is not a number"),
        ("/rows/2/region", "row 3, column 'region': a value is required"),
        ("/rows/3/colour",
         "row 4: the table has no column 'colour' (its columns: region, units, price)"),
        ("/rows/4/units", "row 5, column 'units': 2.5 is not an integer"),
        ("/rows/4/price", "row 5, column 'price': true is not a number"),
    ]  # fmt: skip
    assert all_rows(client, table_id) == []  # all or nothing


def test_rows_update_and_delete(client: TestClient) -> None:
    table_id = make_table(client)
    ok(append(client, table_id, [{"region": f"r{i}", "units": i} for i in range(5)]), 201)
    url = f"{TABLES}/{table_id}/rows"
    assert ok(client.patch(f"{url}/2", json={"units": 20, "PRICE": 1})) == {
        "_row": 2, "region": "r1", "units": 20, "price": 1.0,
    }  # fmt: skip
    assert errors_of(client.patch(f"{url}/2", json={"region": None})) == [
        ("/region", "row 2, column 'region': a value is required")
    ]
    assert client.patch(f"{url}/99", json={"units": 1}).status_code == 404
    assert client.delete(f"{url}/3").status_code == 204
    assert ok(client.post(f"{url}/delete", json={"row_ids": [1, 3, 99]})) == {"deleted": 1}
    assert [r["_row"] for r in all_rows(client, table_id)] == [2, 4, 5]
    assert client.get(url, params={"cursor": "bm90IG9uZQ"}).status_code == 422


# -- access -------------------------------------------------------------------------------------


@pytest.fixture
def world(client: TestClient) -> World:
    return World(client)


def _data_calls(table_id: str) -> list[tuple[str, str, Any]]:
    url = f"{TABLES}/{table_id}"
    return [
        ("GET", f"{url}/rows", None),
        ("POST", f"{url}/rows", {"rows": [{"region": "x"}]}),
        ("PATCH", f"{url}/rows/1", {"units": 1}),
        ("DELETE", f"{url}/rows/1", None),
        ("POST", f"{url}/rows/delete", {"row_ids": [1]}),
    ]


def test_a_hidden_table_answers_like_a_random_id(client: TestClient, world: World) -> None:
    mallory = world.user("mallory")
    secret = world.marking("secret", [mallory])  # mallory holds it, but is no owner
    unshared = make_table(client, "unshared")
    marked = make_table(client, "marked")
    ok(
        client.post(f"{TABLES}/{marked}/grants", json={"principal_id": mallory, "scope": "editor"}),
        201,
    )
    ok(client.post(f"{TABLES}/{marked}/markings", json={"marking_id": secret}))
    folder = ok(client.post(f"{API}/folders", json={"name": "vault"}), 201)["id"]
    in_folder = make_table(client, "inside", folder_id=folder)
    ok(
        client.post(
            f"{API}/folders/{folder}/grants", json={"principal_id": mallory, "scope": "editor"}
        ),
        201,
    )
    other = world.marking("other")
    ok(client.post(f"{API}/folders/{folder}/markings", json={"marking_id": other}))
    for table_id in (unshared, in_folder):
        ok(append(client, table_id, [{"region": "x"}]), 201)
        for (method, url, body), (_, random_url, _) in zip(
            _data_calls(table_id), _data_calls(RANDOM), strict=True
        ):
            hidden = world.call(mallory, method, url, body)
            random = world.call(mallory, method, random_url, body)
            assert hidden.status_code == random.status_code == 404, (url, hidden.text)
            assert hidden.json()["detail"].replace(table_id, RANDOM) == random.json()["detail"]
    # the marked table: mallory holds its marking and has a grant, so she sees it
    assert world.call(mallory, "GET", f"{TABLES}/{marked}/rows").status_code == 200
    assert all_rows(client, unshared) == [{"_row": 1, "region": "x", "units": None, "price": None}]


def test_viewers_read_rows_editors_change_them(client: TestClient, world: World) -> None:
    viewer, editor = world.user("vera"), world.user("ed")
    table_id = make_table(client)
    for who, scope in ((viewer, "viewer"), (editor, "editor")):
        body = {"principal_id": who, "scope": scope}
        ok(client.post(f"{TABLES}/{table_id}/grants", json=body), 201)
    ok(append(client, table_id, [{"region": "x"}], headers=world.as_(editor)), 201)
    assert len(all_rows(client, table_id, headers=world.as_(viewer))) == 1
    refused = append(client, table_id, [{"region": "y"}], headers=world.as_(viewer))
    assert refused.status_code == 403
    url = f"{TABLES}/{table_id}/rows/1"
    assert world.call(viewer, "DELETE", url).status_code == 403
    assert world.call(editor, "DELETE", url).status_code == 204
