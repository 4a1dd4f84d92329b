"""The example knowledge (examples/knowledge/) made through the API, as the example loader
makes it on a fresh server, so that tests can send the example agents' documents with their
``${table:sales}`` placeholders filled in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient

from dhub.placeholders import fill_placeholders, placeholders

KNOWLEDGE = Path(__file__).resolve().parents[2] / "examples" / "knowledge"


def _make(client: TestClient, category: str, name: str) -> str:
    if category == "table":
        data = (KNOWLEDGE / f"{name}.csv").read_bytes()
        made = client.post(f"/api/v1/tables/import?name={name}&format=csv", content=data)
        assert made.status_code == 201, made.text
        return str(made.json()["table"]["id"])
    if category == "template":
        doc = yaml.safe_load((KNOWLEDGE / f"{name.replace('-', '_')}.yaml").read_text())
        made = client.post("/api/v1/templates", json=doc)
        assert made.status_code == 201, made.text
        return str(made.json()["id"])
    assert category == "ontology", category
    doc = json.loads((KNOWLEDGE / f"{name.replace('-', '_')}.json").read_text())
    made = client.post("/api/v1/ontologies", json=doc["ontology"])
    assert made.status_code == 201, made.text
    ontology_id = str(made.json()["id"])
    imported = client.post(f"/api/v1/ontologies/{ontology_id}/import", json=doc["data"])
    assert imported.status_code == 200, imported.text
    return ontology_id


def knowledge_for(client: TestClient, doc: Any) -> dict[tuple[str, str], str]:
    """The ids of the example knowledge ``doc`` names by placeholder, made now."""
    return {(c, n): _make(client, c, n) for c, n in sorted(placeholders(doc))}


def filled(client: TestClient, doc: Any) -> Any:
    """``doc`` with its placeholders filled by example knowledge made now."""
    return fill_placeholders(doc, knowledge_for(client, doc))


def filled_text(client: TestClient, text: str, doc: Any) -> str:
    """A document's text with its placeholders filled by example knowledge made now."""
    for (category, name), made_id in knowledge_for(client, doc).items():
        text = text.replace(f"${{{category}:{name}}}", made_id)
    return text
