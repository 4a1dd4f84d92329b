"""``dhub me|users|groups|markings|tokens|audit`` and the sharing commands of ``dhub agents``
(share, unshare, grants, owners, mark, unmark) against a real app (SQLite and PostgreSQL).

As in test_cli.py, the CLI gets a dhub Client over the conftest's TestClient as the typer
context object, so every command goes CLI -> SDK -> HTTP -> API -> store. A second Client with
another token stands in for another user.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Client, Unauthenticated
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json

ADMIN_ID = "user.admin"
TRIAGE = FIXTURES / "valid" / "workflow_triage.json"


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    """Run ``dhub <args...>`` with the injected client (``obj=`` another); returns the result."""
    runner = CliRunner()

    def run(*args: str, obj: Client | None = None) -> Result:
        return runner.invoke(app, list(args), obj=obj or api)

    return run


@pytest.fixture
def as_token(client: TestClient) -> Any:
    """A Client over the same app that authenticates with ``secret``."""

    def make(secret: str) -> Client:
        return Client(str(client.base_url), secret, http=client)

    return make


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def assert_clean_failure(result: Result) -> None:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def table(result: Result) -> list[list[str]]:
    """The rows of a table, split on runs of two or more spaces (cells may hold one)."""
    return [re.split(r"\s{2,}", line.strip()) for line in ok(result).stdout.splitlines()]


def issue(dhub: Any, *args: str, obj: Client | None = None) -> tuple[str, str]:
    """Run a token-issuing command; returns (secret, token id)."""
    result = ok(dhub(*args, obj=obj))
    secret = result.stdout.strip()
    assert "\n" not in secret  # the secret alone on stdout
    assert "shown only once" in result.stderr
    token_id = result.stderr.split("Created token ", 1)[1].split(" ", 1)[0]
    assert token_id.startswith("token.")
    return secret, token_id


def test_me_shows_the_admin(dhub: Any) -> None:
    result = ok(dhub("me"))
    lines = dict(line.split(":", 1) for line in result.stdout.splitlines())
    assert lines["id"].strip() == ADMIN_ID
    assert lines["admin"].strip() == "yes"
    assert lines["groups"].strip() == "(none)"

    as_json = json.loads(ok(dhub("me", "--json")).stdout)
    assert as_json["id"] == ADMIN_ID
    assert as_json["is_admin"] is True


def test_users_create_list_get_delete(dhub: Any, api: Client) -> None:
    created = ok(dhub("users", "create", "alice", "--display-name", "Alice A", "--email", "a@x.io"))
    assert created.stdout.strip() == "created user.alice"
    ok(dhub("users", "create", "bob", "--admin"))

    header, *rows = table(dhub("users", "list"))
    assert header == ["ID", "NAME", "EMAIL", "ADMIN", "CREATED"]
    by_id = {row[0]: row for row in rows}
    assert by_id["user.alice"][1:4] == ["Alice A", "a@x.io", "no"]
    assert by_id["user.bob"][1:4] == ["bob", "-", "yes"]  # display name defaults to the name

    listed = json.loads(ok(dhub("users", "list", "--json")).stdout)
    assert {u["id"] for u in listed} == {ADMIN_ID, "user.alice", "user.bob"}

    got = json.loads(ok(dhub("users", "get", "user.alice", "--json")).stdout)
    assert got == api.get_user("user.alice")
    assert "email:   a@x.io" in ok(dhub("users", "get", "user.alice")).stdout

    assert ok(dhub("users", "delete", "user.bob")).stdout.strip() == "deleted user.bob"
    gone = dhub("users", "get", "user.bob")
    assert_clean_failure(gone)
    assert gone.stderr.startswith("Error: No user with id 'user.bob'. (HTTP 404)")


def test_invalid_and_duplicate_users_are_clean_errors(dhub: Any) -> None:
    bad = dhub("users", "create", "Not Valid")
    assert_clean_failure(bad)
    assert "(HTTP 422)" in bad.stderr
    assert "  /name: 'Not Valid' is not a valid name" in bad.stderr

    ok(dhub("users", "create", "carol"))
    again = dhub("users", "create", "carol")
    assert_clean_failure(again)
    assert "already exists. (HTTP 409)" in again.stderr


def test_groups_and_members(dhub: Any, api: Client) -> None:
    ok(dhub("users", "create", "alice"))
    ok(dhub("users", "create", "bob"))
    assert ok(dhub("groups", "create", "eng", "--display-name", "Engineering")).stdout == (
        "created group.eng\n"
    )
    ok(dhub("groups", "create", "staff"))

    assert ok(dhub("groups", "add-member", "group.eng", "user.alice")).stdout == (
        "added user.alice to group.eng\n"
    )
    ok(dhub("groups", "add-member", "group.eng", "user.bob"))
    ok(dhub("groups", "add-member", "group.staff", "group.eng"))  # nesting

    header, *rows = table(dhub("groups", "list"))
    assert header == ["ID", "NAME", "CREATED"]
    assert {row[0]: row[1] for row in rows} == {"group.eng": "Engineering", "group.staff": "staff"}

    shown = ok(dhub("groups", "get", "group.eng")).stdout
    assert "members: user.alice, user.bob" in shown
    assert json.loads(ok(dhub("groups", "get", "group.eng", "--json")).stdout)["members"] == [
        "user.alice",
        "user.bob",
    ]

    removed = ok(dhub("groups", "remove-member", "group.eng", "user.bob"))
    assert removed.stdout == "removed user.bob from group.eng\n"
    assert api.get_group("group.eng")["members"] == ["user.alice"]

    cycle = dhub("groups", "add-member", "group.eng", "group.staff")
    assert_clean_failure(cycle)
    assert "would make a cycle" in cycle.stderr

    unknown = dhub("groups", "add-member", "group.eng", "user.nobody")
    assert_clean_failure(unknown)
    assert "  /principal_id: No user or group has the id 'user.nobody'" in unknown.stderr

    assert ok(dhub("groups", "delete", "group.staff")).stdout == "deleted group.staff\n"
    assert [g["id"] for g in api.list_groups()] == ["group.eng"]


def test_an_issued_token_works_for_its_user(dhub: Any, as_token: Any) -> None:
    ok(dhub("users", "create", "alice", "--display-name", "Alice"))
    ok(dhub("groups", "create", "eng"))
    ok(dhub("groups", "create", "staff"))
    ok(dhub("groups", "add-member", "group.eng", "user.alice"))
    ok(dhub("groups", "add-member", "group.staff", "group.eng"))

    secret, token_id = issue(dhub, "users", "token", "user.alice", "--name", "laptop")
    alice = as_token(secret)

    me = json.loads(ok(dhub("me", "--json", obj=alice)).stdout)
    assert me["id"] == "user.alice"
    assert me["is_admin"] is False
    assert me["groups"] == ["group.eng", "group.staff"]  # through nesting
    assert "groups:   group.eng, group.staff" in ok(dhub("me", obj=alice)).stdout

    # Not an admin: admin-only commands fail cleanly.
    denied = dhub("users", "create", "mallory", obj=alice)
    assert_clean_failure(denied)
    assert "(HTTP 403)" in denied.stderr

    # Alice sees her own token; the admin sees it with --user.
    [row] = table(dhub("tokens", "list", obj=alice))[1:]
    assert row[:3] == [token_id, "laptop", "user.alice"]
    assert row[-1] == "active"
    listed = json.loads(ok(dhub("tokens", "list", "--user", "user.alice", "--json")).stdout)
    assert [t["id"] for t in listed] == [token_id]
    assert all("token" not in t for t in listed)  # never the secret again


def test_tokens_create_list_revoke(dhub: Any, api: Client, as_token: Any) -> None:
    secret, token_id = issue(dhub, "tokens", "create", "--name", "ci", "--expires-in-days", "30")
    assert as_token(secret).me()["id"] == ADMIN_ID

    header, *rows = table(dhub("tokens", "list"))
    assert header == ["ID", "NAME", "USER", "CREATED", "EXPIRES", "STATUS"]
    mine = {row[0]: row for row in rows}
    assert mine[token_id][1:3] == ["ci", ADMIN_ID]
    assert mine[token_id][4] != "never"
    assert mine[token_id][5] == "active"

    assert ok(dhub("tokens", "revoke", token_id)).stdout == f"revoked {token_id}\n"
    with pytest.raises(Unauthenticated):
        as_token(secret).me()
    rejected = dhub("me", obj=as_token(secret))
    assert_clean_failure(rejected)
    assert "(HTTP 401)" in rejected.stderr

    [revoked] = [t for t in api.list_tokens() if t["id"] == token_id]
    assert revoked["revoked_at"] is not None
    assert {r[0]: r[5] for r in table(dhub("tokens", "list"))[1:]}[token_id] == "revoked"

    missing = dhub("tokens", "revoke", "token.nope")
    assert_clean_failure(missing)
    assert "(HTTP 404)" in missing.stderr


def test_a_user_revokes_their_own_token(dhub: Any, as_token: Any) -> None:
    ok(dhub("users", "create", "alice"))
    first, _ = issue(dhub, "users", "token", "user.alice", "--name", "first")
    alice = as_token(first)
    second, second_id = issue(dhub, "tokens", "create", "--name", "second", obj=alice)
    assert as_token(second).me()["id"] == "user.alice"

    ok(dhub("tokens", "revoke", second_id, obj=alice))
    assert_clean_failure(dhub("me", obj=as_token(second)))
    assert ok(dhub("me", "--json", obj=alice))


def test_markings_and_members(dhub: Any, api: Client, as_token: Any) -> None:
    ok(dhub("users", "create", "alice"))
    ok(dhub("groups", "create", "legal"))
    created = ok(dhub("markings", "create", "pii", "--description", "Personal data"))
    assert created.stdout == "created marking.pii\n"
    ok(dhub("markings", "create", "secret"))

    header, *rows = table(dhub("markings", "list"))
    assert header == ["ID", "DESCRIPTION", "CREATED BY"]
    assert {row[0]: row[1:] for row in rows} == {
        "marking.pii": ["Personal data", ADMIN_ID],
        "marking.secret": [ADMIN_ID],
    }

    ok(dhub("markings", "add-member", "marking.pii", "user.alice"))
    added = ok(dhub("markings", "add-member", "marking.pii", "group.legal"))
    assert added.stdout == "added group.legal to marking.pii\n"
    assert (
        "members:     group.legal, user.alice" in ok(dhub("markings", "get", "marking.pii")).stdout
    )

    # The holder sees it, and only it.
    secret, _ = issue(dhub, "users", "token", "user.alice", "--name", "t")
    alice = as_token(secret)
    assert api.get_marking("marking.pii")["members"] == ["group.legal", "user.alice"]
    held = json.loads(ok(dhub("markings", "list", "--json", obj=alice)).stdout)
    assert [m["id"] for m in held] == ["marking.pii"]
    assert json.loads(ok(dhub("me", "--json", obj=alice)).stdout)["markings"] == ["marking.pii"]

    removed = ok(dhub("markings", "remove-member", "marking.pii", "user.alice"))
    assert removed.stdout == "removed user.alice from marking.pii\n"
    assert as_token(secret).me()["markings"] == []
    hidden = dhub("markings", "get", "marking.pii", obj=alice)
    assert_clean_failure(hidden)
    assert "(HTTP 404)" in hidden.stderr


def test_audit_shows_the_actions(dhub: Any, api: Client) -> None:
    ok(dhub("users", "create", "alice"))
    ok(dhub("groups", "create", "eng"))
    ok(dhub("groups", "add-member", "group.eng", "user.alice"))
    ok(dhub("markings", "create", "pii"))
    _, token_id = issue(dhub, "users", "token", "user.alice", "--name", "t")
    ok(dhub("tokens", "revoke", token_id))

    header, *rows = table(dhub("audit"))
    assert header == ["WHEN", "ACTOR", "ACTION", "TARGET", "DETAIL"]
    actions = [(row[1], row[2], row[3]) for row in rows]
    assert actions[:6] == [  # newest first
        (ADMIN_ID, "token.revoke", token_id),
        (ADMIN_ID, "token.create", token_id),
        (ADMIN_ID, "marking.create", "marking.pii"),
        (ADMIN_ID, "group.member.add", "group.eng"),
        (ADMIN_ID, "group.create", "group.eng"),
        (ADMIN_ID, "user.create", "user.alice"),
    ]
    assert rows[3][4] == "user.alice"  # the member added

    filtered = json.loads(ok(dhub("audit", "--target", "group.eng", "--json")).stdout)
    assert [e["action"] for e in filtered] == ["group.member.add", "group.create"]
    by_action = json.loads(ok(dhub("audit", "--action", "user.create", "--json")).stdout)
    assert [e["target_id"] for e in by_action] == ["user.alice"]
    by_actor = json.loads(ok(dhub("audit", "--actor", "user.alice", "--json")).stdout)
    assert by_actor == []
    assert ok(dhub("audit", "--actor", "user.alice")).stdout == "No audit entries found.\n"

    limited = json.loads(ok(dhub("audit", "--limit", "2", "--json")).stdout)
    assert [e["action"] for e in limited] == ["token.revoke", "token.create"]

    # iter_audit follows cursors across pages to the same entries.
    everything = [e["id"] for e in api.iter_audit()]
    assert [e["id"] for e in api.iter_audit(page_size=2)] == everything
    page = api.audit(limit=2)
    assert len(page.data) == 2
    assert page.next_cursor is not None


def test_audit_is_for_admins(dhub: Any, as_token: Any) -> None:
    ok(dhub("users", "create", "alice"))
    secret, _ = issue(dhub, "users", "token", "user.alice", "--name", "t")
    denied = dhub("audit", obj=as_token(secret))
    assert_clean_failure(denied)
    assert "(HTTP 403)" in denied.stderr


@pytest.fixture
def alice(dhub: Any, as_token: Any) -> Client:
    """A Client for a new, non-admin user.alice."""
    ok(dhub("users", "create", "alice"))
    secret, _ = issue(dhub, "users", "token", "user.alice", "--name", "t")
    client: Client = as_token(secret)
    return client


def test_share_and_unshare_an_agent(dhub: Any, api: Client, alice: Client) -> None:
    agent_id = api.create_agent(load_json(TRIAGE))["id"]
    assert_clean_failure(dhub("agents", "get", agent_id, obj=alice))  # not shared yet
    assert (
        ok(dhub("agents", "grants", agent_id)).stdout
        == f"ticket-triage ({agent_id}) is not shared with anyone.\n"
    )

    shared = ok(dhub("agents", "share", agent_id, "user.alice", "--scope", "viewer"))
    assert shared.stdout == f"shared ticket-triage ({agent_id}) with user.alice as viewer\n"
    seen = json.loads(ok(dhub("agents", "get", agent_id, "--json", obj=alice)).stdout)
    assert seen["id"] == agent_id

    ok(dhub("agents", "share", agent_id, "user.alice", "--scope", "runner"))  # replaces
    header, *rows = table(dhub("agents", "grants", agent_id))
    assert header == ["PRINCIPAL", "TYPE", "NAME", "SCOPE"]
    assert [(r[0], r[-1]) for r in rows] == [("user.alice", "runner")]
    listed = json.loads(ok(dhub("agents", "grants", agent_id, "--json")).stdout)
    assert [(g["principal_id"], g["scope"]) for g in listed] == [("user.alice", "runner")]
    assert listed == api.list_grants(agent_id)

    # A viewer or runner may not share it further.
    denied = dhub("agents", "share", agent_id, "public.all", "--scope", "viewer", obj=alice)
    assert_clean_failure(denied)
    assert "(HTTP 403)" in denied.stderr

    unshared = ok(dhub("agents", "unshare", agent_id, "user.alice"))
    assert unshared.stdout == f"unshared ticket-triage ({agent_id}) from user.alice\n"
    gone = dhub("agents", "get", agent_id, obj=alice)
    assert_clean_failure(gone)
    assert "(HTTP 404)" in gone.stderr

    audited = json.loads(ok(dhub("audit", "--target", agent_id, "--json")).stdout)
    assert [e["action"] for e in audited][:3] == ["agent.ungrant", "agent.grant", "agent.grant"]


def test_share_rejects_bad_input_cleanly(dhub: Any, api: Client) -> None:
    agent_id = api.create_agent(load_json(TRIAGE))["id"]
    unknown = dhub("agents", "share", agent_id, "user.nobody", "--scope", "viewer")
    assert_clean_failure(unknown)
    assert "(HTTP 422)" in unknown.stderr
    assert "user.nobody" in unknown.stderr

    bad_scope = dhub("agents", "share", agent_id, "public.all", "--scope", "owner")
    assert bad_scope.exit_code == 2  # a usage error: typer checks the choices

    missing = dhub("agents", "grants", "agent.01m8pq9je70y0jz9n1k7fmy8v2")  # an id nobody has
    assert_clean_failure(missing)
    assert "(HTTP 404)" in missing.stderr


def test_owners_replace_the_owners(dhub: Any, api: Client, alice: Client) -> None:
    agent_id = api.create_agent(load_json(TRIAGE))["id"]
    ok(dhub("groups", "create", "eng"))
    ok(dhub("groups", "add-member", "group.eng", "user.alice"))

    result = ok(dhub("agents", "owners", agent_id, "user.admin", "group.eng"))
    assert result.stdout == f"owners of ticket-triage ({agent_id}): group.eng, user.admin\n"
    assert sorted(o["id"] for o in api.get_agent(agent_id)["owners"]) == ["group.eng", "user.admin"]
    assert alice.get_agent(agent_id)["id"] == agent_id  # an owner through group.eng

    empty = dhub("agents", "owners", agent_id)
    assert empty.exit_code == 2  # at least one owner is required by the CLI
    unknown = dhub("agents", "owners", agent_id, "group.nope")
    assert_clean_failure(unknown)
    assert "/owners/0" in unknown.stderr


def test_mark_and_unmark_an_agent(dhub: Any, api: Client, alice: Client) -> None:
    agent_id = api.create_agent(load_json(TRIAGE))["id"]
    ok(dhub("markings", "create", "pii"))
    ok(dhub("agents", "share", agent_id, "user.alice", "--scope", "viewer"))
    assert alice.get_agent(agent_id)["id"] == agent_id

    # Only an owner who holds the marking may add it.
    not_held = dhub("agents", "mark", agent_id, "marking.pii")
    assert_clean_failure(not_held)
    ok(dhub("markings", "add-member", "marking.pii", ADMIN_ID))

    marked = ok(dhub("agents", "mark", agent_id, "marking.pii"))
    assert marked.stdout == f"marked ticket-triage ({agent_id}): markings marking.pii\n"
    assert api.get_agent(agent_id)["markings"] == ["marking.pii"]
    hidden = dhub("agents", "get", agent_id, obj=alice)  # shared, but alice lacks the marking
    assert_clean_failure(hidden)

    unmarked = ok(dhub("agents", "unmark", agent_id, "marking.pii"))
    assert unmarked.stdout == f"unmarked ticket-triage ({agent_id}): markings (none)\n"
    assert alice.get_agent(agent_id)["markings"] == []
