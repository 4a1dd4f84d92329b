"""Objects and links imported from a stored table (POST /ontologies/{id}/import-table), on
SQLite and PostgreSQL: attacks first (a table the caller cannot read answers exactly as one
that does not exist), then mappings that point at the field, values checked per row (the
row and the column named), all or nothing, and the round trip of the example sales table.
SDK and CLI at the end."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dhub.cli.main import app
from dhub.client import Client, InvalidInput
from tests.conftest import ADMIN_TOKEN, ROOT
from tests.integration.test_sharing_api import World, ok
from tests.integration.test_tables_api import TABLES, append, make_table
from tests.support.ontology import API, customer, make

SECRET = "zq7secret"
FAKE_TABLE = "table.01jzzzzzzzzzzzzzzzzzzzzzzz"
SALES = ROOT / "examples" / "knowledge" / "sales.csv"


def people(client: TestClient, name: str = "people", **extra: Any) -> str:
    """A table of customers whose columns match the test ontology's customer type."""
    table_id = make_table(
        client, name, "id:string!", "name:string", "country:string", "since:date", **extra
    )
    rows = [
        {"id": "c1", "name": f"Acme {SECRET}", "country": "FR", "since": "2020-01-05"},
        {"id": "c2", "name": "Globex", "country": None},
    ]
    ok(append(client, table_id, rows), 201)
    return table_id


def url(ontology_id: str) -> str:
    return f"{API}/{ontology_id}/import-table"


def errors_of(response: Any) -> list[tuple[str, str, str]]:
    assert response.status_code == 422, response.text
    return [(e["loc"], e["code"], e["message"]) for e in response.json()["errors"]]


def objects_of(client: TestClient, ontology_id: str, **kw: Any) -> list[dict[str, Any]]:
    page = ok(client.get(f"{API}/{ontology_id}/objects", params={"limit": 200}, **kw))
    data: list[dict[str, Any]] = page["data"]
    return data


def unreachable(table_id: str) -> list[tuple[str, str, str]]:
    message = (
        f"No table '{table_id}' that you can read: check the id (GET /api/v1/tables lists the "
        "ones you can read), or ask its owner to share it with you."
    )
    return [("/table", "unknown_reference", message)]


# -- attacks ----------------------------------------------------------------------------------


def _as_nothing(w: World, who: str, ontology_id: str, table_id: str) -> None:
    """Whatever the body says of the table, it answers as a table id that names nothing."""
    for body in (
        {"objects": {"type": "customer"}},
        {"objects": {"type": "customer", "properties": {"name": "nope"}}},
        {"objects": {"type": "nope"}},
        {"links": {"link_type": "refers", "from": "id", "to": "id"}},
    ):
        seen = w.call(who, "POST", url(ontology_id), {"table": table_id, **body})
        other = w.call(who, "POST", url(ontology_id), {"table": FAKE_TABLE, **body})
        assert errors_of(seen) == unreachable(table_id), body
        assert errors_of(other) == unreachable(FAKE_TABLE)
        assert seen.text == other.text.replace(FAKE_TABLE, table_id)
        assert SECRET not in seen.text and "country" not in seen.text
    assert objects_of(w.client, ontology_id) == []


def _her_shop(w: World, who: str) -> str:
    ontology_id = make(w.client)
    grant = {"principal_id": who, "scope": "editor"}
    ok(w.client.post(f"{API}/{ontology_id}/grants", json=grant), 201)
    return ontology_id


def test_an_editor_cannot_import_from_a_table_she_cannot_read(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    ontology_id = _her_shop(w, alice)
    table_id = people(client)  # the admin's, not shared with her
    _as_nothing(w, alice, ontology_id, table_id)
    # Once she may read it, the same request imports it.
    grant = {"principal_id": alice, "scope": "viewer"}
    ok(client.post(f"{TABLES}/{table_id}/grants", json=grant), 201)
    body = {"table": table_id, "objects": {"type": "customer"}}
    assert ok(w.call(alice, "POST", url(ontology_id), body))["objects"]["created"] == 2


def test_a_marked_table_answers_as_nothing_without_the_marking(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    ontology_id = _her_shop(w, alice)
    table_id = people(client)
    grant = {"principal_id": alice, "scope": "editor"}
    ok(client.post(f"{TABLES}/{table_id}/grants", json=grant), 201)
    marking = w.marking("classified")
    ok(client.post(f"{TABLES}/{table_id}/markings", json={"marking_id": marking}))
    _as_nothing(w, alice, ontology_id, table_id)
    w.hold(marking, alice)
    body = {"table": table_id, "objects": {"type": "customer"}}
    assert ok(w.call(alice, "POST", url(ontology_id), body))["objects"]["created"] == 2


def test_a_table_in_a_marked_folder_answers_as_nothing(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    ontology_id = _her_shop(w, alice)
    folder = ok(client.post("/api/v1/folders", json={"name": "vault"}), 201)["id"]
    grant = {"principal_id": alice, "scope": "viewer"}
    ok(client.post(f"/api/v1/folders/{folder}/grants", json=grant), 201)
    table_id = people(client, folder_id=folder)
    marking = w.marking("classified")
    ok(client.post(f"/api/v1/folders/{folder}/markings", json={"marking_id": marking}))
    _as_nothing(w, alice, ontology_id, table_id)


@pytest.mark.parametrize(
    "planted",
    [FAKE_TABLE, "table.nope", "../../tables/x", "prompt.01jzzzzzzzzzzzzzzzzzzzzzzz"],
)
def test_a_planted_table_id_is_an_unknown_reference(client: TestClient, planted: str) -> None:
    ontology_id = make(client)
    body = {"table": planted, "objects": {"type": "customer"}}
    assert errors_of(client.post(url(ontology_id), json=body)) == unreachable(planted)


def test_an_id_of_another_kind_is_no_table(client: TestClient) -> None:
    ontology_id = make(client)
    body = {"table": ontology_id, "objects": {"type": "customer"}}
    assert errors_of(client.post(url(ontology_id), json=body)) == unreachable(ontology_id)


def test_the_ontology_is_checked_first(client: TestClient) -> None:
    """Without edit on the ontology nothing is said of the table, readable or not."""
    w = World(client)
    reader, stranger = w.user("reader"), w.user("stranger")
    ontology_id = make(client)
    grant = {"principal_id": reader, "scope": "viewer"}
    ok(client.post(f"{API}/{ontology_id}/grants", json=grant), 201)
    own = {"name": "mine", "columns": [{"name": "id", "type": "string"}]}
    mine = ok(w.call(reader, "POST", TABLES, own), 201)["id"]
    theirs = ok(w.call(stranger, "POST", TABLES, own), 201)["id"]
    for table_id in (mine, theirs, FAKE_TABLE, people(client)):
        body = {"table": table_id, "objects": {"type": "customer"}}
        refused = w.call(reader, "POST", url(ontology_id), body)
        assert refused.status_code == 403 and "edit" in refused.json()["detail"], refused.text
        hidden = w.call(stranger, "POST", url(ontology_id), body)
        assert hidden.status_code == 404 and SECRET not in hidden.text
        fake = "ontology.01nosuchthing000000000000000"
        assert hidden.text == w.call(stranger, "POST", url(fake), body).text.replace(
            fake, ontology_id
        )
    assert objects_of(client, ontology_id) == []


# -- the mapping ------------------------------------------------------------------------------


def test_mapping_problems_point_at_the_field(client: TestClient) -> None:
    ontology_id = make(client)
    table_id = people(client)
    columns = "id, name, country, since"
    found = errors_of(
        client.post(
            url(ontology_id),
            json={
                "table": table_id,
                "objects": {"type": "customer", "properties": {"vip": "flag", "rank": "id"}},
                "links": {"link_type": "refers", "from": "id", "to": "referrer"},
            },
        )
    )
    assert found == [
        (
            "/objects/properties/vip",
            "unknown_column",
            f"The table has no column 'flag' (its columns: {columns}).",
        ),
        (
            "/objects/properties/rank",
            "unknown_property",
            "'customer' has no property 'rank' (it has country, id, name, since, vip).",
        ),
        (
            "/links/to",
            "unknown_column",
            f"The table has no column 'referrer' (its columns: {columns}).",
        ),
    ]
    cases: list[tuple[Any, list[tuple[str, str]]]] = [
        ([], [("", "type")]),
        ({}, [("/table", "missing"), ("", "missing")]),
        ({"table": table_id}, [("", "missing")]),
        ({"table": table_id, "objects": {"type": "invoice"}}, [("/objects/type", "unknown_type")]),
        ({"table": table_id, "objects": {"type": "customer"}, "rows": 1},
         [("/rows", "extra_forbidden")]),
        ({"table": table_id, "objects": {"type": "customer", "key": "id"}},
         [("/objects/key", "extra_forbidden")]),
        ({"table": table_id, "objects": {"type": "customer", "properties": {"id": None}}},
         [("/objects/properties/id", "missing")]),
        ({"table": table_id, "objects": {"type": "order"}},
         [("/objects/properties/number", "missing")]),
        ({"table": table_id, "objects": {"type": "customer", "properties": ["id"]}},
         [("/objects/properties", "type")]),
        ({"table": table_id, "links": {"link_type": "owns", "from": "id", "to": "id"}},
         [("/links/link_type", "unknown_link_type")]),
        ({"table": table_id, "links": {"link_type": "refers", "from": "id"}},
         [("/links/to", "missing")]),
        ({"table": 7, "links": {"link_type": "refers", "from": "id", "to": "id"}},
         [("/table", "type")]),
    ]  # fmt: skip
    for body, expected in cases:
        response = client.post(url(ontology_id), json=body)
        assert [(loc, code) for loc, code, _ in errors_of(response)] == expected, body
    response = client.post(url(ontology_id), json={"table": table_id, "objects": {"type": "order"}})
    assert errors_of(response)[0][2] == (
        "'number' is the primary key of 'order' and the table has no column of that name: "
        'map it to one ("number": "column").'
    )
    assert objects_of(client, ontology_id) == []


def test_values_are_checked_per_row_naming_the_row_and_column(client: TestClient) -> None:
    ontology_id = make(client)
    table_id = make_table(client, "orders", "num:string", "amount:string", "who:string")
    rows = [
        {"num": "1", "amount": "12.5", "who": "c1"},
        {"num": "2", "amount": None, "who": None},
        {"num": "x", "amount": None, "who": "c9"},
    ]
    row_ids = ok(append(client, table_id, rows), 201)["row_ids"]
    body = {
        "table": table_id,
        "objects": {"type": "order", "properties": {"number": "num", "total": "amount"}},
    }
    found = errors_of(client.post(url(ontology_id), json=body))
    first, third = row_ids[0], row_ids[2]
    assert found == [
        (
            f"/rows/{first}/properties/number",
            "invalid_value",
            f"Row {first}, column 'num': 'number' is an integer property; got the string '1'.",
        ),
        (
            f"/rows/{first}/properties/total",
            "invalid_value",
            f"Row {first}, column 'amount': 'total' is a number property; got the string '12.5'.",
        ),
        (
            f"/rows/{row_ids[1]}/properties/number",
            "invalid_value",
            f"Row {row_ids[1]}, column 'num': 'number' is an integer property; got the string '2'.",
        ),
        (
            f"/rows/{third}/properties/number",
            "invalid_value",
            f"Row {third}, column 'num': 'number' is an integer property; got the string 'x'.",
        ),
    ]
    # Links: ends that are not there, and an empty one, point at the row and its column.
    ok(client.post(f"{API}/{ontology_id}/import", json=[customer("c1", "Acme")]))
    body = {"table": table_id, "links": {"link_type": "refers", "from": "who", "to": "who"}}
    found = errors_of(client.post(url(ontology_id), json=body))
    assert [(loc, code) for loc, code, _ in found] == [
        (f"/rows/{row_ids[1]}/from", "invalid_key"),
        (f"/rows/{row_ids[1]}/to", "invalid_key"),
    ]
    assert found[0][2] == (
        f"Row {row_ids[1]}, column 'who': 'from' is missing: a link needs both ends (the "
        "objects' keys)."
    )
    ok(client.patch(f"{TABLES}/{table_id}/rows/{row_ids[1]}", json={"who": "c1"}))
    found = errors_of(client.post(url(ontology_id), json=body))
    assert [(loc, code) for loc, code, _ in found] == [
        (f"/rows/{third}/from", "unknown_object"),
        (f"/rows/{third}/to", "unknown_object"),
    ]
    assert found[0][2] == (
        f"Row {third}, column 'who': No 'customer' object with key 'c9' in this ontology or "
        "this import."
    )
    # Nothing of a refused import is stored.
    assert [o["key"] for o in objects_of(client, ontology_id)] == ["c1"]


def test_rows_that_make_one_object_must_agree(client: TestClient) -> None:
    ontology_id = make(client)
    table_id = make_table(client, "visits", "id:string", "name:string", "country:string")
    rows = [
        {"id": "c1", "name": "Acme", "country": "FR"},
        {"id": "c1", "name": "Acme", "country": "FR"},  # the same object again: fine
        {"id": "c2", "name": "Globex", "country": "DE"},
        {"id": "c2", "name": "Globex", "country": "IT"},  # another country: which one?
    ]
    row_ids = ok(append(client, table_id, rows), 201)["row_ids"]
    body = {"table": table_id, "objects": {"type": "customer"}}
    [(loc, code, message)] = errors_of(client.post(url(ontology_id), json=body))
    assert (loc, code) == (f"/rows/{row_ids[3]}/properties/id", "duplicate")
    assert message.startswith(f"Row {row_ids[3]}, column 'id': The 'customer' 'c2' is also at ")
    mapped = {"type": "customer", "properties": {"country": None}}
    done = ok(client.post(url(ontology_id), json={"table": table_id, "objects": mapped}))
    assert done["objects"] == {"created": 2, "updated": 0}
    assert {o["key"]: o["properties"] for o in objects_of(client, ontology_id)} == {
        "c1": {"id": "c1", "name": "Acme"},
        "c2": {"id": "c2", "name": "Globex"},
    }


# -- round trips ------------------------------------------------------------------------------


SALES_ONTOLOGY: dict[str, Any] = {
    "name": "sales",
    "description": "The example sales table as objects",
    "object_types": [
        {
            "name": "sale",
            "primary_key": "order_id",
            "properties": [
                {"name": "order_id", "type": "integer"},
                {"name": "day", "type": "date"},
                {"name": "region", "type": "string"},
                {"name": "units", "type": "integer"},
                {"name": "price", "type": "number"},
                {"name": "paid", "type": "boolean"},
            ],
        },
        {"name": "buyer", "primary_key": "name", "properties": [{"name": "name"}]},
    ],
    "link_types": [
        {
            "name": "bought",
            "from_type": "buyer",
            "to_type": "sale",
            "cardinality": "one_to_many",
            "inverse": "bought_by",
        }
    ],
}


def _csv_rows() -> list[dict[str, str]]:
    import csv

    with SALES.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_example_sales_table_becomes_objects_and_links(client: TestClient) -> None:
    made = client.post(
        "/api/v1/tables/import",
        params={"name": "sales", "format": "csv"},
        content=SALES.read_bytes(),
    )
    table_id = ok(made, 201)["table"]["id"]
    ontology_id = ok(client.post(API, json=SALES_ONTOLOGY), 201)["id"]
    csv_rows = _csv_rows()
    buyers = sorted({r["customer"] for r in csv_rows})
    # The buyers: one a name, however many rows name them.
    body = {"table": table_id, "objects": {"type": "buyer", "properties": {"name": "customer"}}}
    assert ok(client.post(url(ontology_id), json=body)) == {
        "objects": {"created": len(buyers), "updated": 0},
        "links": {"created": 0, "existing": 0},
    }
    # The sales and who bought each, in one import: the sales made before the links.
    body = {
        "table": table_id,
        "objects": {"type": "sale", "properties": {"price": "unit_price"}},
        "links": {"link_type": "bought", "from": "customer", "to": "order_id"},
    }
    assert ok(client.post(url(ontology_id), json=body)) == {
        "objects": {"created": len(csv_rows), "updated": 0},
        "links": {"created": len(csv_rows), "existing": 0},
    }
    first = csv_rows[0]
    sale = ok(client.get(f"{API}/{ontology_id}/objects/sale/{first['order_id']}"))
    assert sale["properties"] == {
        "order_id": int(first["order_id"]),
        "day": first["day"],
        "region": first["region"],
        "units": int(first["units"]),
        "price": float(first["unit_price"]),
        "paid": first["paid"] == "true",
    }
    for buyer in buyers:
        page = ok(
            client.get(
                f"{API}/{ontology_id}/objects/buyer/{buyer}/links/bought", params={"limit": 200}
            )
        )
        expected = sorted(r["order_id"] for r in csv_rows if r["customer"] == buyer)
        assert sorted(o["key"] for o in page["data"]) == expected
    # Typed values are searchable as such.
    found = ok(
        client.post(
            f"{API}/{ontology_id}/objects/search",
            json={"type": "sale", "filters": [{"property": "units", "op": "gte", "value": 20}]},
        )
    )
    assert len(found["data"]) == sum(int(r["units"]) >= 20 for r in csv_rows)
    # Again: objects replaced by key, links kept; audited with the table.
    again = ok(client.post(url(ontology_id), json=body))
    assert again == {
        "objects": {"created": 0, "updated": len(csv_rows)},
        "links": {"created": 0, "existing": len(csv_rows)},
    }
    entries = ok(client.get("/api/v1/audit", params={"target_id": ontology_id}))["data"]
    assert entries[0]["action"] == "ontology.import"
    assert entries[0]["after"] == {**again, "table": table_id}


def test_same_named_columns_any_case_nulls_and_dates(client: TestClient) -> None:
    ontology_id = make(client)
    table_id = make_table(
        client, "mixed", "ID:string!", "Name:string", "VIP:boolean", "placed:datetime", "n:integer"
    )
    rows = [
        {"ID": "c1", "Name": "Acme", "VIP": True, "placed": "2026-01-02T11:00:00+01:00", "n": 1},
        {"ID": "c2", "Name": "Globex", "VIP": None, "placed": None, "n": 2},
    ]
    ok(append(client, table_id, rows), 201)
    done = ok(
        client.post(url(ontology_id), json={"table": table_id, "objects": {"type": "customer"}})
    )
    assert done["objects"] == {"created": 2, "updated": 0}
    assert {o["key"]: o["properties"] for o in objects_of(client, ontology_id)} == {
        "c1": {"id": "c1", "name": "Acme", "vip": True},
        "c2": {"id": "c2", "name": "Globex"},  # null: no value
    }
    mapped = {"type": "order", "properties": {"number": "n", "placed_at": "PLACED"}}
    ok(client.post(url(ontology_id), json={"table": table_id, "objects": mapped}))
    placed = ok(client.get(f"{API}/{ontology_id}/objects/order/1"))["properties"]
    assert placed == {"number": 1, "placed_at": "2026-01-02T10:00:00Z"}
    # An empty table imports nothing, successfully.
    empty = make_table(client, "empty", "id:string", "name:string")
    nothing = ok(
        client.post(url(ontology_id), json={"table": empty, "objects": {"type": "customer"}})
    )
    assert nothing["objects"] == {"created": 0, "updated": 0}


def test_a_table_beyond_the_import_limit_is_refused(client: TestClient) -> None:
    from dhub.services.ontology_import import MAX_ITEMS

    ontology_id = make(client)
    half = MAX_ITEMS // 2  # objects and links: two items a row
    csv = "id,name\n" + "".join(f"c{i},n\n" for i in range(half + 1))
    made = client.post(
        "/api/v1/tables/import", params={"name": "big", "format": "csv"}, content=csv.encode()
    )
    table_id = ok(made, 201)["table"]["id"]
    body = {
        "table": table_id,
        "objects": {"type": "customer"},
        "links": {"link_type": "refers", "from": "id", "to": "id"},
    }
    [(loc, code, message)] = errors_of(client.post(url(ontology_id), json=body))
    assert (loc, code) == ("/table", "too_many")
    assert message == (
        f"An import makes at most {MAX_ITEMS} objects and links; this table has more than "
        f"{half} rows: import from smaller tables."
    )
    assert objects_of(client, ontology_id) == []


# -- SDK and CLI ------------------------------------------------------------------------------


def test_the_sdk_and_cli_take_names(client: TestClient) -> None:
    api = Client(str(client.base_url), ADMIN_TOKEN, http=client)
    make(client)
    people(client)
    done = api.import_objects_from_table("shop", "people", type="customer")
    assert done["objects"] == {"created": 2, "updated": 0}
    linked = api.import_objects_from_table(
        "shop", "people", link_type="refers", from_column="id", to_column="id"
    )
    assert linked["links"] == {"created": 2, "existing": 0}
    with pytest.raises(InvalidInput) as refused:
        api.import_objects_from_table(
            "shop", "people", type="customer", properties={"country": "nation"}
        )
    assert refused.value.errors[0].loc == "/objects/properties/country"
    with pytest.raises(ValueError, match="give type"):
        api.import_objects_from_table("shop", "people", properties={"id": "id"})
    runner = CliRunner()
    argv = ["ontologies", "import-table", "shop", "people", "--type", "customer"]
    result = runner.invoke(app, [*argv, "--map", "country=", "--map", "name=id"], obj=api)
    assert result.exit_code == 0, result.output
    assert "objects: 0 created, 2 updated" in result.output
    assert api.get_object("shop", "customer", "c1")["properties"] == {
        "id": "c1",
        "name": "c1",
        "since": "2020-01-05",
    }
    refused_cli = runner.invoke(app, [*argv, "--map", "name=nope"], obj=api)
    assert refused_cli.exit_code == 1
    assert "/objects/properties/name" in refused_cli.output
    assert "no column 'nope'" in refused_cli.output
    usage = runner.invoke(app, ["ontologies", "import-table", "shop", "people", "--link", "refers"])
    assert usage.exit_code == 2 and "--from and --to" in usage.output
