"""``dhub ontologies`` changing an ontology, its objects and links, its versions and sharing,
against a real app (SQLite and PostgreSQL) through CliRunner: what a person sees, names for
ids, the API's errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client, NotFound
from tests.conftest import ADMIN_TOKEN
from tests.support.ontology import ontology_doc


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api)

    return run


def test_objects_and_links_are_made_changed_and_removed(dhub: Any, api: Client) -> None:
    made = api.create_ontology(ontology_doc())
    # A string property keeps the text (id=7 stays "7"); vip=true is JSON.
    created = dhub("ontologies", "create-object", "shop", "customer", "id=7", "name=Ada",
                   "vip=true")  # fmt: skip
    assert created.output == "created customer 7 (Ada)\n", created.output
    assert api.get_object(made["id"], "customer", "7")["properties"] == {
        "id": "7", "name": "Ada", "vip": True}  # fmt: skip
    order = json.loads(dhub("ontologies", "create-object", made["id"], "order", "number=4",
                            "total=9.5", "--json").stdout)  # fmt: skip
    assert order == api.get_object(made["id"], "order", 4)
    refused = dhub("ontologies", "create-object", "shop", "order", "number=four")
    assert refused.exit_code == 1 and "/properties/number" in refused.output

    changed = dhub("ontologies", "update-object", "shop", "customer", "7", "country=FR",
                   "vip=null")  # fmt: skip
    assert changed.output == "updated customer 7 (Ada)\n", changed.output
    assert api.get_object(made["id"], "customer", "7")["properties"] == {
        "id": "7", "name": "Ada", "country": "FR"}  # fmt: skip

    linked = dhub("ontologies", "link", "shop", "placed", "7", "4")
    assert linked.output == f"linked 7 -placed-> 4 in shop ({made['id']})\n", linked.output
    followed = api.follow_links(made["id"], "order", 4, "placed_by")
    assert [o["key"] for o in followed.data] == ["7"]
    again = json.loads(dhub("ontologies", "link", "shop", "placed", "7", "4", "--json").stdout)
    assert again == {"link_type": "placed", "from": "7", "to": "4"}
    api.create_object(made["id"], "customer", {"id": "8", "name": "Bob"})
    taken = dhub("ontologies", "link", "shop", "placed", "8", "4")
    assert taken.exit_code == 1 and "one_to_many" in taken.output
    unlinked = dhub("ontologies", "unlink", "shop", "placed", "7", "4", "--json")
    assert json.loads(unlinked.stdout) == {"ontology_id": made["id"], "link_type": "placed",
                                           "from": "7", "to": "4", "unlinked": True}  # fmt: skip
    assert api.follow_links(made["id"], "order", 4, "placed_by").data == []

    deleted = dhub("ontologies", "delete-object", "shop", "customer", "7")
    assert deleted.output == f"deleted customer 7 from shop ({made['id']})\n"
    with pytest.raises(NotFound):
        api.get_object(made["id"], "customer", "7")
    missing = dhub("ontologies", "delete-object", "shop", "customer", "7")
    assert missing.exit_code == 1


def test_the_schema_is_updated_versioned_shared_and_deleted(
    dhub: Any, api: Client, tmp_path: Path
) -> None:
    made = api.create_ontology(ontology_doc())
    api.create_object(made["id"], "customer", {"id": "c1", "name": "Ada"})
    patch = tmp_path / "patch.yaml"
    patch.write_text("description: Version two\n")
    updated = dhub("ontologies", "update", "shop", "-f", patch)
    assert updated.output == f"updated shop ({made['id']}) (version 2)\n", updated.output
    # What `get --json` printed, edited, goes back: the envelope is not part of the patch.
    shown = json.loads(dhub("ontologies", "get", "shop", "--json").stdout)
    shown["object_types"][0]["properties"].append({"name": "email", "type": "string"})
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(shown))
    assert dhub("ontologies", "update", made["id"], "-f", whole).exit_code == 0
    assert api.get_ontology("shop")["version"] == 3
    assert api.get_object(made["id"], "customer", "c1")["title"] == "Ada"  # objects stay
    # The file create takes, with 'ontology' and 'data': the schema changes, not the data.
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"ontology": {"description": "Three"}, "data": []}))
    assert dhub("ontologies", "update", "shop", "-f", wrapped).exit_code == 0
    assert api.get_ontology("shop")["description"] == "Three"
    dropped = tmp_path / "dropped.json"
    dropped.write_text(json.dumps({"object_types": shown["object_types"][1:], "link_types": []}))
    refused = dhub("ontologies", "update", "shop", "-f", dropped)
    assert refused.exit_code == 1 and api.get_ontology("shop")["version"] == 4
    assert "The object type 'customer' has 1 objects" in refused.output

    listed = dhub("ontologies", "versions", "shop", "--json")
    assert [v["version"] for v in json.loads(listed.stdout)] == [4, 3, 2, 1]
    first = json.loads(dhub("ontologies", "versions", "shop", "1").stdout)
    assert (first["version"], first["description"]) == (1, "A shop")
    assert first == api.resource_version(made["id"], 1)

    shared = dhub("ontologies", "share", "shop", "public.all", "--scope", "editor")
    assert shared.output == f"shared shop ({made['id']}) with public.all as editor\n"
    assert "public.all" in dhub("ontologies", "grants", "shop").output
    api.create_marking("pii")
    api.add_marking_member("marking.pii", "user.admin")
    marked = json.loads(dhub("ontologies", "mark", "shop", "marking.pii", "--json").stdout)
    assert marked["markings"] == ["marking.pii"]

    deleted = dhub("ontologies", "delete", "shop")
    assert deleted.output == f"deleted shop ({made['id']})\n"
    assert list(api.iter_ontologies()) == []
