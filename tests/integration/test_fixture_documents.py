"""Every shared fixture: valid documents are accepted and read back, invalid ones are rejected
with an error at the fixture's expected location — through the API, on both databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import invalid_fixtures, load_json, valid_fixtures

# Keys the response adds to a Create body: the server's envelope and unset nullable fields.
SERVER_KEYS = {
    "id", "item", "version", "markings", "created_at", "updated_at", "owners",
    "my_share_scope", "is_builtin", "collection_id", "folder_id", "effective_markings",
}  # fmt: skip


def assert_contains(actual: Any, expected: Any, at: str = "") -> None:
    """``actual`` holds everything ``expected`` says, recursively; objects may hold more."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{at}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{at}/{key}: missing from the response"
            assert_contains(actual[key], value, f"{at}/{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{at}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{at}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_contains(a, e, f"{at}/{i}")
    else:
        assert actual == expected and type(actual) is type(expected), f"{at}: {actual!r}"


@pytest.mark.parametrize("path", valid_fixtures(), ids=lambda p: p.stem)
def test_valid_fixture_is_accepted_and_read_back(client: TestClient, path: Path) -> None:
    doc = load_json(path)
    created = client.post("/api/v1/agents", json=doc)
    assert created.status_code == 201, created.text
    body = created.json()
    assert_contains(body, doc)
    assert set(body) - set(doc) <= SERVER_KEYS
    assert body["item"] == body["id"] and body["id"].startswith("agent.")
    fetched = client.get(f"/api/v1/agents/{body['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == body


@pytest.mark.parametrize("path", invalid_fixtures(), ids=lambda p: p.stem)
def test_invalid_fixture_is_rejected_at_its_location(client: TestClient, path: Path) -> None:
    fixture = load_json(path)
    response = client.post("/api/v1/agents", json=fixture["document"])
    assert response.status_code == 422, response.text
    body = response.json()
    locs = [e["loc"] for e in body["errors"]]
    assert fixture["expected_error_loc"] in locs, (fixture["why"], body)
    assert all(e["message"] and e["code"] for e in body["errors"])
    stored = client.get("/api/v1/agents", params={"is_builtin": "false"}).json()["data"]
    assert stored == []  # nothing was stored

    checked = client.post("/api/v1/agents/validate", json=fixture["document"])
    assert checked.status_code == 200
    assert checked.json()["valid"] is False
    assert fixture["expected_error_loc"] in [e["loc"] for e in checked.json()["errors"]]


@pytest.mark.parametrize("path", valid_fixtures(), ids=lambda p: p.stem)
def test_valid_fixture_validates(client: TestClient, path: Path) -> None:
    assert client.post("/api/v1/agents/validate", json=load_json(path)).json() == {
        "valid": True,
        "errors": [],
    }
