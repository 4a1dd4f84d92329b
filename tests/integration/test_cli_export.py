"""``dhub agents export`` writes a file that ``dhub agents apply -f`` takes back unchanged, for
every valid fixture and every example, in YAML and JSON; and the file made in one server makes
the same agent in another. Through CliRunner, the SDK and the real app (SQLite, PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client
from dhub.services.examples import read_document
from tests.conftest import ADMIN_TOKEN, ROOT, load_json, valid_fixtures
from tests.support.examples import knowledge_for

EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if p.suffix in (".json", ".yaml"))
ENVELOPE = {"id", "created_at", "updated_at", "owners", "my_share_scope", "is_builtin", "item",
            "version", "markings", "effective_markings"}  # fmt: skip


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


def dhub(api: Client, *args: str | Path) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], obj=api)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("source", [*valid_fixtures(), *EXAMPLES], ids=lambda p: p.name)
@pytest.mark.parametrize("kind", ["yaml", "json"])
def test_export_then_apply_is_unchanged(
    client: TestClient, api: Client, tmp_path: Path, source: Path, kind: str
) -> None:
    knowledge_for(client, read_document(source))  # what its ${table:sales} placeholders name
    applied = dhub(api, "agents", "apply", "-f", source).stdout
    assert applied.startswith("created ")
    agent_id = applied.split("(", 1)[1].split(",", 1)[0]
    stored = api.get_agent(agent_id)
    exported = tmp_path / f"agent.{kind}"
    said = dhub(api, "agents", "export", stored["name"], "-o", exported).stdout
    assert said == f"exported {stored['name']} ({agent_id}, version 1) to {exported}\n"
    text = exported.read_text()
    doc = json.loads(text) if kind == "json" else yaml.safe_load(text)
    # In the admin's home folder: exported without its place, so it lands in the applier's.
    assert stored["folder_id"] == api.home_folder()["id"] and stored["collection_id"] is None
    left_out = ENVELOPE | {"folder_id", "collection_id"}
    assert doc == {k: v for k, v in stored.items() if k not in left_out}
    assert list(doc) == [k for k in stored if k not in left_out]  # the server's order

    again = dhub(api, "agents", "apply", "-f", exported).stdout
    assert again == f"unchanged {stored['name']} ({agent_id}, version 1)\n"
    assert api.get_agent(agent_id) == stored
    # Exported again, the file is the same, byte for byte.
    assert dhub(api, "agents", "export", agent_id, "--format", kind).stdout == text


def test_an_export_makes_the_same_agent_elsewhere(
    api: Client, tmp_path: Path, settings: Any
) -> None:
    doc = load_json(valid_fixtures()[0])
    created = api.create_agent(doc)
    exported = tmp_path / "agent.yaml"
    dhub(api, "agents", "export", created["id"], "-o", exported)
    api.delete_agent(created["id"])
    remade = dhub(api, "agents", "apply", "-f", exported).stdout
    assert remade.startswith(f"created {doc['name']} (agent.")
    [again] = api.iter_agents(q=doc["name"])
    assert {k: v for k, v in again.items() if k not in ENVELOPE} == {
        k: v for k, v in created.items() if k not in ENVELOPE
    }


def test_an_export_applied_by_another_user_lands_in_their_home_folder(
    client: TestClient, api: Client, tmp_path: Path
) -> None:
    doc = load_json(valid_fixtures()[0])
    created = api.create_agent(doc)
    exported = tmp_path / "agent.yaml"
    dhub(api, "agents", "export", created["id"], "-o", exported)
    made = client.post("/api/v1/users", json={"name": "bea", "display_name": "Bea"})
    bea_id = made.json()["id"]
    token = client.post(f"/api/v1/users/{bea_id}/tokens", json={"name": "t"}).json()["token"]
    bea = Client(str(client.base_url), token, http=client)
    applied = dhub(bea, "agents", "apply", "-f", exported).stdout
    assert applied.startswith(f"created {doc['name']} (agent.")
    [mine] = bea.iter_agents(name=doc["name"], folder_id=bea.home_folder()["id"])
    assert mine["id"] != created["id"] and mine["owners"][0]["id"] == bea_id
    # Applied again by its new owner: the same agent, unchanged; the admin's stays where it was.
    again = dhub(bea, "agents", "apply", "-f", exported).stdout
    assert again == f"unchanged {doc['name']} ({mine['id']}, version 1)\n"
    assert api.get_agent(created["id"])["folder_id"] == api.home_folder()["id"]


def test_export_to_stdout_is_yaml_by_default(api: Client) -> None:
    created = api.create_agent(load_json(valid_fixtures()[0]))
    out = dhub(api, "agents", "export", created["id"]).stdout
    assert yaml.safe_load(out)["name"] == created["name"]
    assert not out.lstrip().startswith("{")


def test_export_of_an_unknown_agent_fails_cleanly(api: Client) -> None:
    result = CliRunner().invoke(app, ["agents", "export", "no-such-agent"], obj=api)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: no agent named 'no-such-agent' that you can see.")
