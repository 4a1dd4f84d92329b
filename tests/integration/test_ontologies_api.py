"""Ontologies over HTTP, on SQLite and PostgreSQL: the schema (validation, versions, changes
while objects exist), objects (typed), links (cardinality), following links, and import
with errors pointing at the item and property. Access: test_ontologies_access.py; search
against a reference: test_ontologies_search.py."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import ROOT
from tests.integration.test_sharing_api import ok
from tests.support.ontology import API, SCHEMA, customer, make, ontology_doc, order, seed


def errors_of(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    return [(e["loc"], e["code"]) for e in response.json()["errors"]]


def keys(page: dict[str, Any]) -> list[str]:
    return [o["key"] for o in page["data"]]


# -- the schema -----------------------------------------------------------------------------------


def test_an_ontology_is_a_resource_with_versions(client: TestClient) -> None:
    made = ok(client.post(API, json=ontology_doc(tags=["shop"])), 201)
    assert made["id"].startswith("ontology.") and made["category"] == "ontology"
    assert made["version"] == 1 and made["my_share_scope"] == "owner"
    assert [t["name"] for t in made["object_types"]] == ["customer", "order", "product"]
    assert made["link_types"][0]["inverse"] == "placed_by"
    assert made["link_types"][1]["cardinality"] == "many_to_many"  # the default
    url = f"{API}/{made['id']}"
    assert ok(client.get(url)) == made
    assert made["id"] in [o["id"] for o in ok(client.get(API))["data"]]
    more = copy.deepcopy(SCHEMA["object_types"])
    more.append({"name": "ticket", "properties": [{"name": "ref"}], "primary_key": "ref"})
    patched = ok(client.patch(url, json={"object_types": more}))
    assert patched["version"] == 2 and patched["object_types"][3]["properties"][0]["type"] == (
        "string"
    )
    assert [v["version"] for v in ok(client.get(f"{url}/versions"))["data"]] == [2, 1]
    assert len(ok(client.get(f"{url}/versions/1"))["object_types"]) == 3


def test_schema_problems_point_at_the_field(client: TestClient) -> None:
    doc = ontology_doc()
    types = doc["object_types"]
    types[0]["primary_key"] = "nope"
    types[0]["title_property"] = "label"
    types[1]["properties"].append({"name": "total", "type": "number"})
    types[1]["properties"].append({"name": "bad name"})
    types[2]["primary_key"] = "price"  # a number cannot be a key
    types[2]["properties"][0]["type"] = "decimal"
    types.append(copy.deepcopy(types[2]))  # "product" twice
    doc["link_types"][0]["to_type"] = "invoice"
    doc["link_types"][1]["name"] = "placed_by"  # taken by an inverse
    doc["link_types"][2]["cardinality"] = "some"
    found = errors_of(client.post(API, json=doc))
    assert set(found) >= {
        ("/object_types/0/primary_key", "unknown_property"),
        ("/object_types/0/title_property", "unknown_property"),
        ("/object_types/1/properties/5/name", "duplicate"),
        ("/object_types/1/properties/6/name", "invalid_name"),
        ("/object_types/2/primary_key", "invalid_key"),
        ("/object_types/3/name", "duplicate"),
        ("/link_types/0/to_type", "unknown_type"),
        ("/link_types/1/name", "duplicate"),
    }, found
    assert any(loc == "/object_types/2/properties/0/type" for loc, _ in found)
    assert any(loc == "/link_types/2/cardinality" for loc, _ in found)
    response = client.post(API, json=doc)
    messages = {e["loc"]: e["message"] for e in response.json()["errors"]}
    assert messages["/object_types/0/primary_key"] == (
        "The primary key 'nope' is not a property of 'customer' (it has id, name, country, vip, "
        "since): declare it or name one of those."
    )
    assert messages["/link_types/0/to_type"] == (
        "'invoice' is not an object type of this ontology (it has customer, order, product)."
    )
    # Validate says the same without storing.
    checked = ok(client.post(f"{API}/validate", json=doc))
    assert checked["valid"] is False and len(checked["errors"]) == len(found)


def test_the_schema_cannot_change_under_its_objects(client: TestClient) -> None:
    ontology_id = make(client)
    seed(client, ontology_id)
    url = f"{API}/{ontology_id}"
    types = copy.deepcopy(SCHEMA["object_types"])
    links = copy.deepcopy(SCHEMA["link_types"])

    def patch(**doc: Any) -> Any:
        return client.patch(url, json=doc)

    # Removing a type that has objects, and a link type that has links.
    found = patch(object_types=types[:2], link_types=links[:1] + links[2:])
    assert errors_of(found) == [
        ("/object_types", "type_in_use"),
        ("/link_types", "link_type_in_use"),
    ]
    assert "'product' has 2 objects" in found.json()["errors"][0]["message"]
    # Changing a property's type incompatibly; a widening is fine.
    changed = copy.deepcopy(types)
    changed[0]["properties"][2]["type"] = "integer"  # country
    changed[1]["properties"][1]["type"] = "string"  # total
    found = patch(object_types=changed)
    assert set(errors_of(found)) == {
        ("/object_types/0/properties/2/type", "incompatible_type"),
        ("/object_types/1/properties/1/type", "incompatible_type"),
    }
    # Removing a property objects hold values for; making one required that some lack.
    changed = copy.deepcopy(types)
    del changed[0]["properties"][2]  # country
    changed[1]["properties"][3]["required"] = True  # status: every order has one
    changed[2]["properties"][2]["required"] = True  # price: every product has one
    changed[0]["properties"][3]["required"] = True  # since (now at 3): only c1 has one
    found = patch(object_types=changed)
    assert set(errors_of(found)) == {
        ("/object_types/0/properties", "property_in_use"),
        ("/object_types/0/properties/3/required", "missing_values"),
    }
    # A link type with links keeps its ends and cardinality.
    changed_links = copy.deepcopy(links)
    changed_links[0]["cardinality"] = "many_to_many"
    assert errors_of(patch(link_types=changed_links)) == [("/link_types/0", "link_type_in_use")]
    # What is allowed: new types and properties, widening, a new title property (titles
    # follow), removing an empty link type, required where every object has a value.
    changed = copy.deepcopy(types)
    changed[1]["properties"][1]["type"] = "json"
    changed[1]["properties"][1]["type"] = "number"
    changed[1]["properties"][3]["required"] = True
    changed[0]["properties"].append({"name": "email", "type": "string"})
    changed[0]["title_property"] = "country"
    changed[1]["title_property"] = "status"
    body = ok(patch(object_types=changed, link_types=links[:2]))
    assert body["version"] == 2
    assert ok(client.get(f"{url}/objects/customer/c1"))["title"] == "FR"
    assert ok(client.get(f"{url}/objects/order/2"))["title"] == "shipped"
    found = ok(client.get(f"{url}/objects", params={"q": "shipped"}))
    assert keys(found) == ["2"]


def test_deleting_an_ontology_deletes_its_objects(client: TestClient) -> None:
    ontology_id = make(client)
    seed(client, ontology_id)
    assert client.delete(f"{API}/{ontology_id}").status_code == 204
    assert client.get(f"{API}/{ontology_id}/objects").status_code == 404
    again = make(client)  # the same name, a new id: nothing of the old one
    assert ok(client.get(f"{API}/{again}/objects"))["data"] == []


# -- objects ------------------------------------------------------------------------------------


def test_objects_are_typed(client: TestClient) -> None:
    ontology_id = make(client)
    base = f"{API}/{ontology_id}/objects"
    made = ok(client.post(base, json=customer("c1", "Acme", vip=True, since="2020-01-05")), 201)
    assert made["key"] == "c1" and made["title"] == "Acme" and made["type"] == "customer"
    assert made["properties"] == {"id": "c1", "name": "Acme", "vip": True, "since": "2020-01-05"}
    assert ok(client.get(f"{base}/customer/c1")) == made
    # Integer keys are addressed as text; datetimes are stored in UTC.
    made = ok(client.post(base, json=order(7, total=3, placed_at="2026-03-01T10:00:00+02:00")), 201)
    assert made["key"] == "7" and made["title"] == "7"
    assert made["properties"]["placed_at"] == "2026-03-01T08:00:00Z"
    assert ok(client.post(base, json=order(8, total=2.0)), 201)["properties"]["total"] == 2.0
    bad = {
        "type": "order",
        "properties": {
            "number": 1.5,
            "total": "12",
            "placed_at": "yesterday",
            "status": 3,
            "extra": 1,
        },
    }
    assert set(errors_of(client.post(base, json=bad))) == {
        ("/properties/number", "invalid_value"),
        ("/properties/total", "invalid_value"),
        ("/properties/placed_at", "invalid_value"),
        ("/properties/status", "invalid_value"),
        ("/properties/extra", "unknown_property"),
    }
    response = client.post(base, json={"type": "customer", "properties": {"id": "c2"}})
    assert response.json()["errors"] == [
        {
            "loc": "/properties/name",
            "message": "'name' is required of 'customer': give it a value.",
            "code": "missing",
        }
    ]
    response = client.post(base, json={"type": "invoice", "properties": {}})
    assert errors_of(response) == [("/type", "unknown_type")]
    assert "(it has customer, order, product)" in response.text
    assert errors_of(client.post(base, json=customer("a/b", "Slash"))) == [
        ("/properties/id", "invalid_key")
    ]
    assert errors_of(client.post(base, json=order(2**60))) == [
        ("/properties/number", "invalid_value")
    ]
    # The same key twice: 409, naming how to change it.
    response = client.post(base, json=customer("c1", "Again"))
    assert response.status_code == 409 and "PATCH" in response.json()["detail"]


def test_objects_change_and_go_with_their_links(client: TestClient) -> None:
    ontology_id = make(client)
    seed(client, ontology_id)
    base = f"{API}/{ontology_id}/objects"
    patch = {"properties": {"name": "Acme SA", "vip": None}}
    changed = ok(client.patch(f"{base}/customer/c1", json=patch))
    assert changed["title"] == "Acme SA" and "vip" not in changed["properties"]
    assert changed["updated_at"] >= changed["created_at"]
    assert errors_of(client.patch(f"{base}/customer/c1", json={"properties": {"id": "c9"}})) == [
        ("/properties/id", "key_changed")
    ]
    assert errors_of(client.patch(f"{base}/customer/c1", json={"properties": {"name": None}})) == [
        ("/properties/name", "missing")
    ]
    assert client.patch(f"{base}/customer/zz", json={"properties": {}}).status_code == 404
    # Deleting c1 deletes its orders' "placed" links, not the orders.
    assert client.delete(f"{base}/customer/c1").status_code == 204
    assert client.get(f"{base}/customer/c1").status_code == 404
    assert client.delete(f"{base}/customer/c1").status_code == 404
    assert ok(client.get(f"{base}/order/1/links/placed_by"))["data"] == []
    # So order 1 may be placed by another customer now (one_to_many).
    link = {"link_type": "placed", "from": "c2", "to": 1}
    assert ok(client.post(f"{API}/{ontology_id}/links", json=link), 201) == {**link, "to": "1"}


# -- links --------------------------------------------------------------------------------------


def test_links_keep_their_cardinality(client: TestClient) -> None:
    ontology_id = make(client)
    seed(client, ontology_id)
    url = f"{API}/{ontology_id}/links"
    # one_to_many: an order has one customer; a customer many orders.
    response = client.post(url, json={"link_type": "placed", "from": "c3", "to": 1})
    assert response.status_code == 409
    assert response.json()["detail"] == (
        "'placed' is one_to_many: the order '1' already has one (with the customer 'c1'); "
        "unlink that first."
    )
    assert (
        ok(client.post(url, json={"link_type": "placed", "from": "c1", "to": 3}), 409) is not None
    )
    # Linking again what is linked: 200, nothing new.
    assert client.post(url, json={"link_type": "placed", "from": "c1", "to": 1}).status_code == 200
    # many_to_one: a customer refers to one other customer.
    ok(client.post(url, json={"link_type": "refers", "from": "c2", "to": "c1"}), 201)
    ok(client.post(url, json={"link_type": "refers", "from": "c3", "to": "c1"}), 201)
    assert (
        client.post(url, json={"link_type": "refers", "from": "c2", "to": "c3"}).status_code == 409
    )
    # Unknown objects, link types and bad keys.
    assert errors_of(client.post(url, json={"link_type": "placed", "from": "c9", "to": 1})) == [
        ("/from", "unknown_object")
    ]
    assert errors_of(client.post(url, json={"link_type": "owns", "from": "c1", "to": 1})) == [
        ("/link_type", "unknown_link_type")
    ]
    assert errors_of(client.post(url, json={"link_type": "placed", "from": True, "to": 1})) == [
        ("/from", "type")
    ]
    # Unlinking.
    assert client.delete(f"{url}/placed/c1/1").status_code == 204
    assert client.delete(f"{url}/placed/c1/1").status_code == 404
    ok(client.post(url, json={"link_type": "placed", "from": "c3", "to": 1}), 201)


def test_following_links_both_ways_a_page_at_a_time(client: TestClient) -> None:
    ontology_id = make(client)
    seed(client, ontology_id)
    base = f"{API}/{ontology_id}/objects"
    assert keys(ok(client.get(f"{base}/customer/c1/links/placed"))) == ["1", "2"]
    assert keys(ok(client.get(f"{base}/order/3/links/placed_by"))) == ["c2"]
    assert keys(ok(client.get(f"{base}/order/1/links/placed", params={"reverse": "true"}))) == [
        "c1"
    ]
    assert keys(
        ok(client.get(f"{base}/product/p-1/links/contains", params={"reverse": "true"}))
    ) == [
        "1",
        "3",
    ]
    first = ok(client.get(f"{base}/order/1/links/contains", params={"limit": 1}))
    assert keys(first) == ["p-1"] and first["data"][0]["title"] == "Widget"
    second = ok(
        client.get(
            f"{base}/order/1/links/contains", params={"limit": 1, "cursor": first["next_cursor"]}
        )
    )
    assert keys(second) == ["p-2"] and second["next_cursor"] is None
    response = client.get(f"{base}/order/1/links/placed")
    assert errors_of(response) == [("/link_type", "wrong_type")]
    assert response.json()["errors"][0]["message"] == (
        "'placed' links 'customer' objects to 'order' objects, not 'order' ones."
    )
    assert client.get(f"{base}/order/1/links/owns").status_code == 404
    assert client.get(f"{base}/order/99/links/contains").status_code == 404


# -- import -------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["list", "objects_and_links", "jsonl"])
def test_import_round_trip(client: TestClient, form: str) -> None:
    ontology_id = make(client)
    items = [customer(f"c{i}", f"Customer {i}", country="FR" if i % 2 else "DE") for i in range(30)]
    items += [order(i, total=i * 1.5) for i in range(20)]
    link_items = [{"link_type": "placed", "from": f"c{i % 30}", "to": i} for i in range(20)]
    url = f"{API}/{ontology_id}/import"
    if form == "list":
        response = client.post(url, json=items + link_items)
    elif form == "objects_and_links":
        response = client.post(url, json={"objects": items, "links": link_items})
    else:
        import json

        body = "\n".join(json.dumps(i) for i in items + link_items) + "\n"
        response = client.post(url, content=body, headers={"Content-Type": "application/jsonl"})
    assert ok(response) == {
        "objects": {"created": 50, "updated": 0},
        "links": {"created": 20, "existing": 0},
    }
    # Again, with one change: replaced by key, links kept.
    items[0]["properties"]["name"] = "Renamed"
    again = ok(client.post(url, json=items + link_items))
    assert again == {
        "objects": {"created": 0, "updated": 50},
        "links": {"created": 0, "existing": 20},
    }
    listed = ok(
        client.get(f"{API}/{ontology_id}/objects", params={"type": "customer", "limit": 200})
    )
    assert len(listed["data"]) == 30
    assert ok(client.get(f"{API}/{ontology_id}/objects/customer/c0"))["title"] == "Renamed"
    assert keys(ok(client.get(f"{API}/{ontology_id}/objects/order/5/links/placed_by"))) == ["c5"]


def test_import_errors_point_at_the_item_and_property_and_store_nothing(
    client: TestClient,
) -> None:
    ontology_id = make(client)
    url = f"{API}/{ontology_id}/import"
    items = [
        customer("c1", "Acme"),
        {"type": "customer", "properties": {"id": "c2", "vip": "yes"}},
        order(1, total="lots"),
        customer("c1", "Acme again"),
        {"type": "invoice", "properties": {}},
        {"link_type": "placed", "from": "c1", "to": 1},
        {"link_type": "placed", "from": "c1"},
        {"nothing": 1},
    ]
    found = errors_of(client.post(url, json=items))
    assert found == [
        ("/1/properties/vip", "invalid_value"),
        ("/1/properties/name", "missing"),
        ("/2/properties/total", "invalid_value"),
        ("/3/properties/id", "duplicate"),
        ("/4/type", "unknown_type"),
        ("/6/to", "invalid_key"),
        ("/7", "type"),
    ]
    assert ok(client.get(f"{API}/{ontology_id}/objects"))["data"] == []
    # Links to objects neither stored nor imported; cardinality within the import.
    found = errors_of(
        client.post(
            url,
            json={
                "objects": [customer("c1", "A"), customer("c2", "B"), order(1)],
                "links": [
                    {"link_type": "placed", "from": "c1", "to": 1},
                    {"link_type": "placed", "from": "c2", "to": 1},
                    {"link_type": "contains", "from": 1, "to": "p-9"},
                ],
            },
        )
    )
    assert found == [("/links/2/to", "unknown_object")]
    found = errors_of(
        client.post(
            url,
            json={
                "objects": [customer("c1", "A"), customer("c2", "B"), order(1)],
                "links": [
                    {"link_type": "placed", "from": "c1", "to": 1},
                    {"link_type": "placed", "from": "c2", "to": 1},
                ],
            },
        )
    )
    assert found == [("/links/1/from", "cardinality")]
    # JSON Lines: pointers name the line's index.
    body = b'{"type": "customer", "properties": {"id": "c1", "name": "A"}}\n\nnot json\n'
    body += b'{"type": "customer", "properties": {"id": "c2", "name": 5}}\n'
    response = client.post(url, content=body, headers={"Content-Type": "application/x-ndjson"})
    assert errors_of(response) == [("/2", "json_invalid")]
    response = client.post(
        url, content=body.replace(b"not json\n", b""), headers={"Content-Type": "application/jsonl"}
    )
    assert errors_of(response) == [("/2/properties/name", "invalid_value")]
    assert ok(client.get(f"{API}/{ontology_id}/objects"))["data"] == []


def test_the_example_ontology_loads(client: TestClient) -> None:
    example = json.loads((ROOT / "examples" / "knowledge" / "support_ontology.json").read_text())
    ontology_id = ok(client.post(API, json=example["ontology"]), 201)["id"]
    done = ok(client.post(f"{API}/{ontology_id}/import", json=example["data"]))
    assert done["objects"]["created"] >= 30 and done["links"]["created"] >= 40
    orders = ok(client.get(f"{API}/{ontology_id}/objects/customer/C-001/links/placed"))
    assert orders["data"] and all(o["type"] == "order" for o in orders["data"])
    [ada] = ok(client.get(f"{API}/{ontology_id}/objects", params={"q": "lovelace"}))["data"]
    assert ada["key"] == "C-001"


def test_changes_to_objects_and_links_are_audited(client: TestClient) -> None:
    ontology_id = make(client)
    base = f"{API}/{ontology_id}"
    ok(client.post(f"{base}/objects", json=customer("c1", "Acme")), 201)
    ok(client.patch(f"{base}/objects/customer/c1", json={"properties": {"vip": True}}))
    ok(client.post(f"{base}/import", json=[order(1)]))
    ok(client.post(f"{base}/links", json={"link_type": "placed", "from": "c1", "to": 1}), 201)
    assert client.delete(f"{base}/links/placed/c1/1").status_code == 204
    assert client.delete(f"{base}/objects/customer/c1").status_code == 204
    entries = ok(client.get("/api/v1/audit", params={"target_id": ontology_id}))["data"][::-1]
    assert [(e["action"], e["before"], e["after"]) for e in entries] == [
        ("ontology.create", None, 1),
        ("ontology.object.create", None, {"type": "customer", "key": "c1"}),
        ("ontology.object.update", {"type": "customer", "key": "c1"},
         {"type": "customer", "key": "c1"}),
        ("ontology.import", None, {"objects": {"created": 1, "updated": 0},
                                   "links": {"created": 0, "existing": 0}}),
        ("ontology.link", None, {"link_type": "placed", "from": "c1", "to": "1"}),
        ("ontology.unlink", {"link_type": "placed", "from": "c1", "to": "1"}, None),
        ("ontology.object.delete", {"type": "customer", "key": "c1"}, None),
    ]  # fmt: skip
