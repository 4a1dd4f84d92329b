"""Who may reach an ontology's objects and links, on SQLite and PostgreSQL: attacks first.

An ontology the caller cannot see (unshared, marked, or in a marked folder) answers every
objects and links endpoint exactly as an id that names nothing; a reader may look but not
change; keys that collide across ontologies never leak from one to the other.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.integration.test_sharing_api import World, ok
from tests.support.ontology import API, customer, make, seed

SECRET = "zq7secret"
FAKE = "ontology.01nosuchthing000000000000000"

# A request that would succeed (or answer with data) if the caller could use the ontology.
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/objects"): customer("c9", SECRET),
    ("post", "/objects/search"): {"type": "customer", "q": "acme"},
    ("patch", "/objects/{type}/{key}"): {"properties": {"country": SECRET}},
    ("post", "/links"): {"link_type": "refers", "from": "c1", "to": "c2"},
    ("post", "/import"): [customer("c8", SECRET)],
    ("post", "/import-table"): {
        "table": "table.01jzzzzzzzzzzzzzzzzzzzzzzz",
        "objects": {"type": "customer"},
    },
}
FILLS = {"type": "customer", "key": "c1", "link_type": "placed", "from_key": "c1", "to_key": "1"}


def _operations(client: TestClient) -> list[tuple[str, str, Any]]:
    """Every objects/links operation: (method, url template with {id}, body)."""
    found = []
    prefix = f"{API}/{{resource_id}}/"
    for path, ops in client.app.openapi()["paths"].items():  # type: ignore[attr-defined]
        if not path.startswith(prefix):
            continue
        tail = path[len(prefix) - 1 :]
        if not tail.startswith(("/objects", "/links", "/import")):
            continue  # the endpoints every resource has: tests/integration/test_hidden_*.py
        for method in ops:
            url = "/api/v1/ontologies/{id}" + tail
            for name, value in FILLS.items():
                url = url.replace("{" + name + "}", value)
            found.append((method, url, BODIES.get((method, tail))))
    return found


def _same_as_nothing(w: World, who: str, ontology_id: str) -> None:
    operations = _operations(w.client)
    assert len(operations) >= 10, operations
    for method, url, body in operations:
        seen = w.call(who, method.upper(), url.format(id=ontology_id), body)
        other = w.call(who, method.upper(), url.format(id=FAKE), body)
        assert seen.status_code == other.status_code == 404, (method, url, seen.text)
        assert seen.text == other.text.replace(FAKE, ontology_id), (method, url)
        assert SECRET not in seen.text and "Acme" not in seen.text


def _secret_shop(client: TestClient, **extra: Any) -> str:
    ontology_id = make(client, f"shop-{SECRET}", **extra)
    seed(client, ontology_id)
    return ontology_id


def test_an_unshared_ontology_answers_as_nothing(client: TestClient) -> None:
    w = World(client)
    alice, nosy_admin = w.user("alice"), w.user("nosy", admin=True)
    ontology_id = _secret_shop(client)
    _same_as_nothing(w, alice, ontology_id)
    # An admin may reach it (admins may do what owners do) ...
    assert w.call(nosy_admin, "GET", f"{API}/{ontology_id}/objects").status_code == 200
    # ... unless it is marked.
    marking = w.marking("classified")
    ok(client.post(f"{API}/{ontology_id}/markings", json={"marking_id": marking}))
    _same_as_nothing(w, nosy_admin, ontology_id)


def test_a_marked_ontology_answers_as_nothing_to_an_editor_without_the_marking(
    client: TestClient,
) -> None:
    w = World(client)
    alice = w.user("alice")
    ontology_id = _secret_shop(client)
    grant = {"principal_id": alice, "scope": "editor"}
    ok(client.post(f"{API}/{ontology_id}/grants", json=grant), 201)
    assert w.call(alice, "GET", f"{API}/{ontology_id}/objects/customer/c1").status_code == 200
    marking = w.marking("classified")
    ok(client.post(f"{API}/{ontology_id}/markings", json={"marking_id": marking}))
    _same_as_nothing(w, alice, ontology_id)
    # Holding the marking gives her objects back.
    w.hold(marking, alice)
    assert w.call(alice, "GET", f"{API}/{ontology_id}/objects/customer/c1").status_code == 200


def test_an_ontology_in_a_marked_folder_answers_as_nothing(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    folder = ok(client.post("/api/v1/folders", json={"name": "vault"}), 201)["id"]
    ok(
        client.post(
            f"/api/v1/folders/{folder}/grants", json={"principal_id": alice, "scope": "editor"}
        ),
        201,
    )
    ontology_id = _secret_shop(client, folder_id=folder)
    assert w.call(alice, "GET", f"{API}/{ontology_id}/objects").status_code == 200
    marking = w.marking("classified")
    ok(client.post(f"/api/v1/folders/{folder}/markings", json={"marking_id": marking}))
    _same_as_nothing(w, alice, ontology_id)


def test_a_reader_looks_but_cannot_change(client: TestClient) -> None:
    w = World(client)
    reader = w.user("reader")
    ontology_id = _secret_shop(client)
    ok(
        client.post(
            f"{API}/{ontology_id}/grants", json={"principal_id": reader, "scope": "viewer"}
        ),
        201,
    )
    base = f"{API}/{ontology_id}"
    # A table of hers, which she may read: still no import into an ontology she may only read.
    columns = [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}]
    table = {"name": "hers", "columns": columns}
    table_id = ok(w.call(reader, "POST", "/api/v1/tables", table), 201)["id"]
    rows = {"rows": [{"id": "c9", "name": "New"}]}
    ok(w.call(reader, "POST", f"/api/v1/tables/{table_id}/rows", rows), 201)
    assert ok(w.call(reader, "GET", f"{base}/objects/customer/c1"))["title"] == "Acme Corp"
    assert len(ok(w.call(reader, "GET", f"{base}/objects"))["data"]) == 8
    follow = ok(w.call(reader, "GET", f"{base}/objects/customer/c1/links/placed"))
    assert [o["key"] for o in follow["data"]] == ["1", "2"]
    changes = [
        ("POST", f"{base}/objects", customer("c9", "New")),
        ("PATCH", f"{base}/objects/customer/c1", {"properties": {"country": "IT"}}),
        ("DELETE", f"{base}/objects/customer/c1", None),
        ("POST", f"{base}/links", {"link_type": "refers", "from": "c1", "to": "c2"}),
        ("DELETE", f"{base}/links/placed/c1/1", None),
        ("POST", f"{base}/import", [customer("c8", "Other")]),
        ("POST", f"{base}/import-table", {"table": table_id, "objects": {"type": "customer"}}),
    ]
    for method, url, body in changes:
        response = w.call(reader, method, url, body)
        assert response.status_code == 403, (method, url, response.text)
        assert "edit" in response.json()["detail"]
    # Nothing changed.
    assert ok(w.call(reader, "GET", f"{base}/objects/customer/c1"))["properties"]["country"] == (
        "FR"
    )
    assert len(ok(w.call(reader, "GET", f"{base}/objects"))["data"]) == 8
    assert len(ok(w.call(reader, "GET", f"{base}/objects/customer/c1/links/placed"))["data"]) == 2


def test_keys_that_collide_across_ontologies_never_leak(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    theirs = _secret_shop(client)
    ok(
        client.patch(
            f"{API}/{theirs}/objects/customer/c1", json={"properties": {"country": SECRET}}
        )
    )
    mine = ok(w.call(alice, "POST", API, {**_doc_without_name(), "name": "mine"}), 201)["id"]
    base = f"{API}/{mine}"
    # Same type, same key, in her own ontology: hers alone.
    ok(w.call(alice, "POST", f"{base}/objects", customer("c2", "Hers")), 201)
    assert w.call(alice, "GET", f"{base}/objects/customer/c1").status_code == 404
    for response in (
        w.call(alice, "GET", f"{base}/objects"),
        w.call(alice, "GET", f"{base}/objects", None),
        w.call(alice, "POST", f"{base}/objects/search", {"q": SECRET}),
        w.call(alice, "GET", f"{base}/objects/customer/c2/links/refers"),
    ):
        assert response.status_code == 200, response.text
        assert SECRET not in response.text and "Acme" not in response.text
    # Linking to a key that exists only in the other ontology fails as for any unknown key.
    body = {"link_type": "refers", "from": "c2", "to": "c1"}
    response = w.call(alice, "POST", f"{base}/links", body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["code"] == "unknown_object"
    response = w.call(alice, "POST", f"{base}/import", [body])
    assert response.status_code == 422
    assert response.json()["errors"][0] == {
        "loc": "/0/to",
        "message": "No 'customer' object with key 'c1' in this ontology or this import.",
        "code": "unknown_object",
    }
    # Deleting her object leaves theirs alone.
    assert w.call(alice, "DELETE", f"{base}/objects/customer/c2").status_code == 204
    assert ok(client.get(f"{API}/{theirs}/objects/customer/c2"))["title"] == "Globex"


def _doc_without_name() -> dict[str, Any]:
    from tests.support.ontology import ontology_doc

    doc = ontology_doc()
    del doc["name"]
    return doc
