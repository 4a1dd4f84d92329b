"""A small ontology for tests: customers place orders, orders contain products (the shape of
examples/knowledge/support_ontology.json)."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

API = "/api/v1/ontologies"

SCHEMA: dict[str, Any] = {
    "object_types": [
        {
            "name": "customer",
            "description": "Someone who buys",
            "properties": [
                {"name": "id", "type": "string"},
                {"name": "name", "type": "string", "required": True},
                {"name": "country", "type": "string"},
                {"name": "vip", "type": "boolean"},
                {"name": "since", "type": "date"},
            ],
            "primary_key": "id",
            "title_property": "name",
        },
        {
            "name": "order",
            "properties": [
                {"name": "number", "type": "integer"},
                {"name": "total", "type": "number"},
                {"name": "placed_at", "type": "datetime"},
                {"name": "status", "type": "string"},
                {"name": "notes", "type": "json"},
            ],
            "primary_key": "number",
        },
        {
            "name": "product",
            "properties": [
                {"name": "sku", "type": "string"},
                {"name": "name", "type": "string"},
                {"name": "price", "type": "number"},
            ],
            "primary_key": "sku",
            "title_property": "name",
        },
    ],
    "link_types": [
        {
            "name": "placed",
            "from_type": "customer",
            "to_type": "order",
            "cardinality": "one_to_many",
            "inverse": "placed_by",
        },
        {"name": "contains", "from_type": "order", "to_type": "product"},
        {
            "name": "refers",
            "from_type": "customer",
            "to_type": "customer",
            "cardinality": "many_to_one",
        },
    ],
}


def ontology_doc(name: str = "shop", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "A shop", **copy.deepcopy(SCHEMA), **extra}


def make(client: TestClient, name: str = "shop", **extra: Any) -> str:
    response = client.post(API, json=ontology_doc(name, **extra))
    assert response.status_code == 201, response.text
    made: str = response.json()["id"]
    return made


def customer(key: str, name: str, **props: Any) -> dict[str, Any]:
    return {"type": "customer", "properties": {"id": key, "name": name, **props}}


def order(number: int, **props: Any) -> dict[str, Any]:
    return {"type": "order", "properties": {"number": number, **props}}


def seed(client: TestClient, ontology_id: str) -> None:
    """Three customers, three orders, two products and their links."""
    response = client.post(f"{API}/{ontology_id}/import", json=SHOP_ITEMS)
    assert response.status_code == 200, response.text


SHOP_ITEMS: list[dict[str, Any]] = [
    customer("c1", "Acme Corp", country="FR", vip=True, since="2020-01-05"),
    customer("c2", "Globex", country="DE", vip=False),
    customer("c3", "Initech", country="FR"),
    order(1, total=120.5, status="open", placed_at="2026-01-02T10:00:00Z"),
    order(2, total=80, status="shipped"),
    order(3, total=15.25, status="open", notes={"gift": True}),
    {"type": "product", "properties": {"sku": "p-1", "name": "Widget", "price": 9.5}},
    {"type": "product", "properties": {"sku": "p-2", "name": "Gadget", "price": 20}},
    {"link_type": "placed", "from": "c1", "to": 1},
    {"link_type": "placed", "from": "c1", "to": 2},
    {"link_type": "placed", "from": "c2", "to": 3},
    {"link_type": "contains", "from": 1, "to": "p-1"},
    {"link_type": "contains", "from": 1, "to": "p-2"},
    {"link_type": "contains", "from": 3, "to": "p-1"},
]
