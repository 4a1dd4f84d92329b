"""Secrets from the SDK and the CLI (SQLite and PostgreSQL): a value goes in through stdin,
never an argument, and never comes out of any command, JSON or not; names stand for ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client, Forbidden
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_secrets_api import ROTATED, VALUE, principal, revealed
from tests.integration.test_sharing_api import BUILDER, World


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    def run(*args: str | Path, stdin: str | None = None) -> Result:
        result = CliRunner().invoke(app, [str(a) for a in args], obj=api, input=stdin)
        for value in (VALUE, ROTATED):
            assert value not in result.output, args
        return result

    return run


def test_the_cli_takes_values_from_stdin_and_never_shows_them(
    client: TestClient, api: Client, dhub: Any
) -> None:
    made = dhub("secrets", "create", "gh-token", "--description", "ops bot", stdin=VALUE + "\n")
    assert made.exit_code == 0, made.output
    assert "created gh-token (secret." in made.output
    secret = api.get_secret("gh-token")
    admin = principal(client, World(client), BUILDER)
    assert revealed(client, admin, secret["id"]) == VALUE  # the newline was the terminal's

    listed = dhub("secrets", "list")
    assert "gh-token" in listed.output and "stored" in listed.output
    shown = dhub("secrets", "get", "gh-token")
    assert "value:" in shown.output and "stored" in shown.output
    for args in (("secrets", "list", "--json"), ("secrets", "get", "gh-token", "--json")):
        assert dhub(*args).exit_code == 0

    rotated = dhub("secrets", "set-value", "gh-token", stdin=ROTATED)
    assert rotated.exit_code == 0 and "version 2" in rotated.output
    assert revealed(client, admin, secret["id"]) == ROTATED
    assert dhub("secrets", "set-value", "gh-token", stdin="").exit_code == 1

    env = dhub("secrets", "create", "ops", "--from-env", "DHUB_SECRET_OPS", "--json")
    assert env.exit_code == 0 and '"from_env": "DHUB_SECRET_OPS"' in env.output
    assert "env DHUB_SECRET_OPS" in dhub("secrets", "get", "ops").output

    shared = dhub("secrets", "share", "gh-token", "public.all", "--scope", "runner")
    assert shared.exit_code == 0, shared.output
    assert dhub("secrets", "delete", "gh-token").exit_code == 0
    assert [s["name"] for s in api.iter_secrets()] == ["ops"]


def test_the_sdk(client: TestClient, api: Client) -> None:
    made = api.create_secret({"name": "sdk", "value": VALUE})
    assert made["has_value"] and "value" not in made
    assert api.get_secret("sdk")["id"] == made["id"] == api.list_secrets().data[0]["id"]
    assert api.set_secret_value("sdk", ROTATED)["version"] == 2
    assert api.update_secret(made["id"], {"description": "d"})["description"] == "d"
    w = World(client)
    bob = Client(str(client.base_url), w.tokens[w.user("bob")], http=client)
    with pytest.raises(Forbidden, match="from_env"):
        bob.create_secret({"name": "env", "from_env": "DHUB_SECRET_X"})
    api.delete_secret("sdk")
    assert list(api.iter_secrets()) == []
