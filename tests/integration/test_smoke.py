from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import FIXTURES, load_json


def test_create_and_get_roundtrip(client: TestClient) -> None:
    doc = load_json(FIXTURES / "valid" / "workflow_triage.json")
    created = client.post("/api/v1/agents", json=doc)
    assert created.status_code == 201, created.text
    fetched = client.get(f"/api/v1/agents/{created.json()['id']}")
    assert fetched.json() == created.json()
