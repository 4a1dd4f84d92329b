"""Secrets over HTTP and through ``reveal``, on SQLite and PostgreSQL (docs/secrets.md), with
an attacker's eye: the value never comes back from any endpoint (every byte of every response
is searched for it), it is not in the database in the clear, using it takes run scope and
every marking with the same words as for a random id, and only admins read the server's
environment."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.access.principal import Principal
from dhub.domain.resources import unreachable
from dhub.services.secrets import SecretUnavailable, UnreachableSecret, reveal
from tests.integration.test_sharing_api import BUILDER, World, ok

API = "/api/v1"
SECRETS = f"{API}/secrets"
VALUE = "sk-live-TOPSECRET-4f9c2a71e0"  # searched for in every response
ROTATED = "sk-live-ROTATED-88d0c1b7aa"


def secret_doc(name: str = "github-token", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "The GitHub token of the ops bot", "value": VALUE,
            **extra}  # fmt: skip


def principal(client: TestClient, world: World, user_id: str) -> Principal:
    auth = client.app.state.services.auth  # type: ignore[attr-defined]
    token = world.tokens.get(user_id)
    header = f"Bearer {token}" if token else client.headers["Authorization"]
    found: Principal = client.portal.call(auth.authenticate, header)  # type: ignore[union-attr]
    return found


def revealed(client: TestClient, who: Principal, secret_id: str) -> str:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    value: str = client.portal.call(reveal, runtime.db, who, secret_id, runtime.vault)  # type: ignore[union-attr]
    return value


def refused(client: TestClient, who: Principal, secret_id: str) -> str:
    with pytest.raises(UnreachableSecret) as caught:
        revealed(client, who, secret_id)
    return str(caught.value)


def assert_hidden(response: Any, *values: str) -> None:
    """No byte of the response (headers included) holds the value, whatever the encoding."""
    raw = response.content + str(response.headers).encode()
    for value in values:
        for form in (value, value.encode().hex(), value[4:-4]):
            assert form.encode() not in raw, (response.request.url, response.text)


# -- the kind -----------------------------------------------------------------------------------


def test_the_value_never_comes_back_from_any_endpoint(client: TestClient) -> None:
    w = World(client)
    alice = w.user("alice")
    made = client.post(SECRETS, json=secret_doc(tags=["ops"]))
    assert_hidden(made, VALUE)
    body = ok(made, 201)
    secret_id = body["id"]
    assert secret_id.startswith("secret.") and body["category"] == "secret"
    assert body["has_value"] is True and body["from_env"] is None and "value" not in body
    assert body["value_updated_at"] == body["created_at"]
    url = f"{SECRETS}/{secret_id}"
    ok(client.post(f"{url}/grants", json={"principal_id": alice, "scope": "runner"}), 201)
    rotated = client.patch(url, json={"value": ROTATED, "description": "rotated"})
    assert_hidden(rotated, VALUE, ROTATED)
    assert ok(rotated)["version"] == 2 and ok(rotated)["has_value"] is True

    responses = [
        client.get(url),
        client.get(SECRETS),
        client.get(SECRETS, params={"q": "github"}),
        client.get(f"{url}/versions"),
        client.get(f"{url}/versions/1"),
        client.get(f"{url}/versions/2"),
        client.get(f"{url}/grants"),
        client.get(f"{API}/audit", params={"target_id": secret_id}),
        client.get(f"{API}/audit"),
        client.get(url, headers={"Accept": "application/yaml"}),
        client.get(SECRETS, headers={"Accept": "application/yaml"}),
        w.call(alice, "GET", url),
        w.call(alice, "GET", SECRETS),
        client.post(f"{SECRETS}/validate", json=secret_doc("other")),
        client.post(f"{SECRETS}/validate", json=secret_doc("x", value=VALUE, from_env="NOPE")),
        client.post(SECRETS, json=secret_doc()),  # the name is taken: 409
        client.post(SECRETS, json=secret_doc("bad", value=VALUE, tags=[VALUE * 10])),
        client.post(SECRETS, json={**secret_doc("bad2"), "nope": VALUE}),
        client.patch(url, json={"value": [VALUE]}),
        client.patch(url, json={"value": VALUE, "from_env": "DHUB_SECRET_X", "has_value": 3}),
        w.call(alice, "PATCH", url, {"value": VALUE}),  # 403: a runner may not edit
        client.get(f"{API}/openapi.json"),
        client.get("/openapi.json"),
    ]
    for response in responses:
        assert_hidden(response, VALUE, ROTATED)
    assert ok(responses[0])["description"] == "rotated"
    assert [v["version"] for v in ok(responses[3])["data"]] == [2, 1]
    assert responses[16].status_code == 422 and responses[18].status_code == 422
    assert responses[20].status_code == 403
    actions = [e["action"] for e in ok(responses[7])["data"]]
    assert actions == ["secret.update", "secret.grant", "secret.create"]

    assert revealed(client, principal(client, w, alice), secret_id) == ROTATED
    ok(client.delete(url), 204)
    assert refused(client, principal(client, w, BUILDER), secret_id) == unreachable(
        "secret", secret_id
    )


def test_validation_and_rotation_rules(client: TestClient) -> None:
    def errors(response: Any) -> list[tuple[str, str]]:
        assert response.status_code == 422, response.text
        return [(e["loc"], e["code"]) for e in response.json()["errors"]]

    assert errors(client.post(SECRETS, json={"name": "empty"})) == [("/value", "missing")]
    assert errors(client.post(SECRETS, json={"name": "e", "value": ""})) == [("/value", "empty")]
    both = {"name": "both", "value": VALUE, "from_env": "DHUB_SECRET_TOKEN"}
    assert errors(client.post(SECRETS, json=both)) == [("/value", "exclusive")]
    for bad in ("PATH", "DHUB_SECRET_", "DHUB_SECRET_key", "DHUB_SECRET_KEY", "DHUB_DATABASE_URL"):
        found = errors(client.post(SECRETS, json={"name": "env", "from_env": bad}))
        assert found == [("/from_env", "invalid_name")], bad
    served = {"name": "s", "value": VALUE, "has_value": False, "value_updated_at": 1}
    assert errors(client.post(SECRETS, json=served)) == [
        ("/has_value", "read_only"), ("/value_updated_at", "read_only"),
    ]  # fmt: skip
    assert errors(client.post(SECRETS, json={"name": "big", "value": "x" * 70_000})) == [
        ("/value", "too_long")
    ]
    checked = ok(client.post(f"{SECRETS}/validate", json={"name": "v"}))
    assert checked["valid"] is False and checked["errors"][0]["loc"] == "/value"

    made = ok(client.post(SECRETS, json=secret_doc()), 201)
    url = f"{SECRETS}/{made['id']}"
    renamed = ok(client.patch(url, json={"name": "gh-token"}))  # the value stays
    assert renamed["has_value"] is True and renamed["value_updated_at"] == made["created_at"]
    assert errors(client.patch(url, json={"has_value": False})) == [("/has_value", "read_only")]
    assert errors(client.patch(url, json={"value": ""})) == [("/value", "empty")]
    admin = principal(client, World(client), BUILDER)
    assert revealed(client, admin, made["id"]) == VALUE
    ok(client.patch(url, json={"value": ROTATED}))
    assert revealed(client, admin, made["id"]) == ROTATED
    again = ok(client.patch(url, json={}))  # nothing changes: no new version
    assert again["version"] == 3


def test_from_env_is_for_admins_and_read_when_used(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = World(client)
    bob = w.user("bob")
    env = {"name": "from-env", "from_env": "DHUB_SECRET_OPS_TOKEN"}
    denied = w.call(bob, "POST", SECRETS, env)
    assert denied.status_code == 403 and "'from_env'" in denied.json()["detail"]
    checked = ok(w.call(bob, "POST", f"{SECRETS}/validate", env))
    assert [(e["loc"], e["code"]) for e in checked["errors"]] == [("/from_env", "admin_only")]

    made = ok(client.post(SECRETS, json=env), 201)
    assert made["from_env"] == "DHUB_SECRET_OPS_TOKEN" and made["has_value"] is False
    url = f"{SECRETS}/{made['id']}"
    ok(client.post(f"{url}/grants", json={"principal_id": bob, "scope": "editor"}), 201)
    admin, as_bob = principal(client, w, BUILDER), principal(client, w, bob)
    with pytest.raises(SecretUnavailable, match=r"DHUB_SECRET_OPS_TOKEN.*not set"):
        revealed(client, as_bob, made["id"])
    monkeypatch.setenv("DHUB_SECRET_OPS_TOKEN", "from-the-environment")
    assert revealed(client, as_bob, made["id"]) == "from-the-environment"

    # An editor may rename it, not point it at another variable; the error names the field.
    ok(w.call(bob, "PATCH", url, {"description": "the ops token"}))
    moved = w.call(bob, "PATCH", url, {"from_env": "DHUB_SECRET_OTHER"})
    assert moved.status_code == 403 and "'from_env'" in moved.json()["detail"]
    # Nor may a non-admin turn a stored secret of theirs into an environment one.
    own = ok(w.call(bob, "POST", SECRETS, secret_doc("bobs")), 201)
    sneaky = {"value": None, "from_env": "DHUB_SECRET_OPS_TOKEN"}
    assert w.call(bob, "PATCH", f"{SECRETS}/{own['id']}", sneaky).status_code == 403
    # Clearing from_env needs a value in the same patch; with one, it is a stored secret.
    cleared = w.call(bob, "PATCH", url, {"from_env": None})
    assert cleared.status_code == 422 and cleared.json()["errors"][0]["loc"] == "/value"
    stored = ok(w.call(bob, "PATCH", url, {"from_env": None, "value": ROTATED}))
    assert stored["from_env"] is None and stored["has_value"] is True
    assert revealed(client, admin, made["id"]) == ROTATED
    # And back (an admin): the stored value is gone.
    back = ok(client.patch(url, json={"from_env": "DHUB_SECRET_OPS_TOKEN", "value": None}))
    assert back["has_value"] is False and back["value_updated_at"] is None
    assert revealed(client, admin, made["id"]) == "from-the-environment"


# -- reveal: the one reference check ------------------------------------------------------------


def test_reveal_needs_run_scope_and_every_marking_with_one_message(client: TestClient) -> None:
    w = World(client)
    viewer, runner, stranger, cleared = (w.user(n) for n in ("viewer", "runner", "eve", "cleo"))
    secret_id = ok(client.post(SECRETS, json=secret_doc()), 201)["id"]
    url = f"{SECRETS}/{secret_id}"
    for user, scope in ((viewer, "viewer"), (runner, "runner"), (cleared, "runner")):
        ok(client.post(f"{url}/grants", json={"principal_id": user, "scope": scope}), 201)
    assert revealed(client, principal(client, w, runner), secret_id) == VALUE

    def words(user: str, ref: str) -> str:
        return refused(client, principal(client, w, user), ref)

    random_id = "secret.01jzzzzzzzzzzzzzzzzzzzzzzz"
    expected = unreachable("secret", secret_id)
    assert words(viewer, secret_id) == expected  # may read the envelope, not use the value
    assert ok(w.call(viewer, "GET", url))["has_value"] is True
    assert words(stranger, secret_id) == expected
    assert words(stranger, random_id) == unreachable("secret", random_id)
    assert words(runner, "tool.01jzzzzzzzzzzzzzzzzzzzzzzz") == unreachable(
        "secret", "tool.01jzzzzzzzzzzzzzzzzzzzzzzz"
    )
    assert words(runner, "secret.\x00nul") == unreachable("secret", "secret.\x00nul")

    secret_marking = w.marking("secret-ops", [cleared])
    ok(client.post(f"{url}/markings", json={"marking_id": secret_marking}))
    assert words(runner, secret_id) == expected  # a runner without the marking
    assert revealed(client, principal(client, w, cleared), secret_id) == VALUE
    # The one message is the same for a deleted secret, to everyone.
    ok(client.delete(url), 204)
    assert words(cleared, secret_id) == expected


def test_reveal_follows_folders(client: TestClient) -> None:
    """Access and markings inherited from a folder count, as for every reference."""
    w = World(client)
    dana = w.user("dana")
    folder = ok(client.post(f"{API}/folders", json={"name": "vault"}), 201)["id"]
    secret_id = ok(client.post(SECRETS, json=secret_doc(folder_id=folder)), 201)["id"]
    as_dana = principal(client, w, dana)
    assert refused(client, as_dana, secret_id) == unreachable("secret", secret_id)
    ok(client.post(f"{API}/folders/{folder}/grants", json={"principal_id": dana,
                                                           "scope": "runner"}), 201)  # fmt: skip
    assert revealed(client, principal(client, w, dana), secret_id) == VALUE


# -- at rest ------------------------------------------------------------------------------------


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_value_is_encrypted_at_rest_and_goes_with_the_secret(
    client: TestClient, settings: Any
) -> None:
    made = ok(client.post(SECRETS, json=secret_doc()), 201)
    path = Path(settings.database_url.removeprefix("sqlite:///"))
    key_file = settings.data_dir / "secret.key"
    assert key_file.stat().st_mode & 0o777 == 0o600

    def on_disk() -> bytes:
        data = path.read_bytes()
        for extra in (Path(f"{path}-wal"), Path(f"{path}-journal")):
            data += extra.read_bytes() if extra.exists() else b""
        return data

    assert VALUE.encode() not in on_disk()
    assert key_file.read_bytes().strip() not in on_disk()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT secret_id, ciphertext FROM secret_values").fetchall()
        documents = conn.execute("SELECT document FROM resource_versions").fetchall()
    assert [r[0] for r in rows] == [made["id"]] and VALUE not in rows[0][1]
    assert all(VALUE not in d[0] for d in documents)
    ok(client.delete(f"{SECRETS}/{made['id']}"), 204)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM secret_values").fetchone() == (0,)


def test_the_value_is_in_no_table_in_the_clear(client: TestClient, settings: Any) -> None:
    """Every row of every table (documents, versions, audit, the values' own), both databases,
    after a create and a rotation: neither value appears, only ciphertexts do."""
    from sqlalchemy import create_engine, select

    from dhub.store import json_codec
    from dhub.store.db import normalize_url
    from dhub.store.tables import metadata

    made = ok(client.post(SECRETS, json=secret_doc()), 201)
    ok(client.patch(f"{SECRETS}/{made['id']}", json={"value": ROTATED}))
    engine = create_engine(normalize_url(settings.database_url), **json_codec.ENGINE_OPTIONS)
    try:
        with engine.connect() as conn:
            everything = {
                t.name: repr(conn.execute(select(t)).all()) for t in metadata.sorted_tables
            }
    finally:
        engine.dispose()
    assert made["id"] in everything["secret_values"] and made["id"] in everything["audit_log"]
    for name, rows in everything.items():
        assert VALUE not in rows and ROTATED not in rows, name


def test_a_ciphertext_moved_to_another_secret_does_not_decrypt(client: TestClient) -> None:
    """Someone who can write the database but has no key cannot make their own secret carry
    another's value."""
    from sqlalchemy import update

    from dhub.services.secret_vault import SecretKeyError
    from dhub.store.tables import secret_values

    w = World(client)
    mallory = w.user("mallory")
    victim = ok(client.post(SECRETS, json=secret_doc("victim")), 201)["id"]
    own = ok(w.call(mallory, "POST", SECRETS, {"name": "mine", "value": "m"}), 201)["id"]
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    async def swap() -> None:
        async with runtime.db.write() as conn:
            rows = await conn.execute(
                secret_values.select().where(secret_values.c.secret_id == victim)
            )
            stolen = next(iter(rows)).ciphertext
            await conn.execute(
                update(secret_values)
                .where(secret_values.c.secret_id == own)
                .values(ciphertext=stolen)
            )

    client.portal.call(swap)  # type: ignore[union-attr]
    with pytest.raises(SecretKeyError) as caught:
        revealed(client, principal(client, w, mallory), own)
    assert VALUE not in str(caught.value)


# -- references in other documents --------------------------------------------------------------


def test_references_in_documents_get_the_one_check(client: TestClient) -> None:
    """``{"secret": id}`` anywhere in a document (an MCP server's headers, say): each one the
    user may not run is the one message, pointing at it; an id of another kind names no
    secret, even one the user may run."""
    from dhub.services.references import Reach, check_secret_references

    w = World(client)
    bob = w.user("bob")
    usable = ok(client.post(SECRETS, json=secret_doc("usable")), 201)["id"]
    readable = ok(client.post(SECRETS, json=secret_doc("readable")), 201)["id"]
    for secret_id, scope in ((usable, "runner"), (readable, "viewer")):
        grant = {"principal_id": bob, "scope": scope}
        ok(client.post(f"{SECRETS}/{secret_id}/grants", json=grant), 201)
    tool = {"name": "t", "description": "", "function": {"source": "def t():\n    return 1\n"}}
    tool_id = ok(w.call(bob, "POST", f"{API}/tools", tool), 201)["id"]
    missing = "secret.01jzzzzzzzzzzzzzzzzzzzzzzz"
    document = {
        "headers": {"Authorization": {"secret": usable}, "X-Read": {"secret": readable}},
        "env": [{"name": "A", "value": {"secret": tool_id}}, {"secret": missing}],
        "plain": "no reference",
    }
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    as_bob = principal(client, w, bob)

    async def check() -> list[tuple[str, str]]:
        async with runtime.db.read() as conn:
            found = await check_secret_references(Reach(conn, as_bob), document)
        return [(e.loc, e.message) for e in found]

    assert client.portal.call(check) == [  # type: ignore[union-attr]
        ("/headers/X-Read/secret", unreachable("secret", readable)),
        ("/env/0/value/secret", unreachable("secret", tool_id)),
        ("/env/1/secret", unreachable("secret", missing)),
    ]


def test_reveal_without_a_vault_and_reveal_in(client: TestClient) -> None:
    """What the MCP client calls: the process's keys (open_runtime installed the server's),
    and ``reveal_in`` answering None, not an error, to a principal who may not use it."""
    from dhub.services.secrets import reveal_in

    w = World(client)
    eve = w.user("eve")
    secret_id = ok(client.post(SECRETS, json=secret_doc()), 201)["id"]
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    admin, as_eve = principal(client, w, BUILDER), principal(client, w, eve)
    assert client.portal.call(reveal, runtime.db, admin, secret_id) == VALUE  # type: ignore[union-attr]

    async def inside(who: Principal) -> str | None:
        async with runtime.db.read() as conn:
            return await reveal_in(conn, who, secret_id)

    assert client.portal.call(inside, admin) == VALUE  # type: ignore[union-attr]
    assert client.portal.call(inside, as_eve) is None  # type: ignore[union-attr]
