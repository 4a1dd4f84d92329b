"""The SDK's ontology methods against a real app (SQLite and PostgreSQL): names or ids,
objects, links, search and import, and the API's errors as the SDK's exceptions."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dhub.client import Client, Conflict, InvalidInput, NotFound, UnknownName
from tests.conftest import ADMIN_TOKEN
from tests.support.ontology import SHOP_ITEMS, ontology_doc


def test_the_sdk_drives_an_ontology(client: TestClient) -> None:
    api = Client(str(client.base_url), ADMIN_TOKEN, http=client)
    made = api.create_ontology(ontology_doc())
    assert api.get_ontology("shop") == api.get_ontology(made["id"]) == made
    assert [o["id"] for o in api.iter_ontologies()] == [made["id"]]
    with pytest.raises(UnknownName, match="GET /api/v1/ontologies lists"):
        api.get_ontology("nope")
    assert api.import_objects("shop", SHOP_ITEMS)["objects"]["created"] == 8
    lines = b'{"type": "product", "properties": {"sku": "p-3", "name": "Gizmo", "price": 3}}\n'
    assert api.import_objects("shop", lines)["objects"] == {"created": 1, "updated": 0}
    assert [o["key"] for o in api.iter_objects("shop", type="product", page_size=1)] == [
        "p-1",
        "p-2",
        "p-3",
    ]
    page = api.search_objects(
        "shop", type="order", filters=[{"property": "total", "op": "gt", "value": 50}]
    )
    assert [o["key"] for o in page.data] == ["1", "2"]
    assert api.get_object("shop", "order", 1)["properties"]["total"] == 120.5
    changed = api.update_object("shop", "customer", "c3", {"vip": True, "country": None})
    assert changed["properties"] == {"id": "c3", "name": "Initech", "vip": True}
    api.create_object("shop", "order", {"number": 4, "total": 1})
    assert api.link_objects("shop", "placed", "c3", 4) == {
        "link_type": "placed",
        "from": "c3",
        "to": "4",
    }
    with pytest.raises(Conflict, match="one_to_many"):
        api.link_objects("shop", "placed", "c1", 4)
    assert [o["key"] for o in api.follow_links("shop", "order", 4, "placed_by").data] == ["c3"]
    api.unlink_objects("shop", "placed", "c3", 4)
    assert api.follow_links("shop", "customer", "c3", "placed").data == []
    api.delete_object("shop", "order", 4)
    with pytest.raises(NotFound):
        api.get_object("shop", "order", 4)
    with pytest.raises(InvalidInput) as refused:
        api.create_object("shop", "order", {"number": "four"})
    assert refused.value.errors[0].loc == "/properties/number"
    assert api.update_ontology("shop", {"description": "v2"})["version"] == 2
    api.delete_ontology("shop")
    assert list(api.iter_ontologies()) == []
