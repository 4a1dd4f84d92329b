"""The built-in agents (docs/api.md, Built-in agents), on SQLite and PostgreSQL: shipped
and installed by every server, listed for a brand-new user, runnable by everyone (end to end,
with the demo model and with a scripted one), read-only for everyone (admins included) on
every write endpoint, their runs their users' own, and upgraded with dhub as new versions
without touching users' copies (copies: test_builtin_copies.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.engine.validate import validate_agent_document
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.services.agents import dump_spec
from dhub.services.builtins import Builtin, install_builtins, shipped
from dhub.settings import Settings
from dhub.store.db import Database
from tests.conftest import ADMIN_TOKEN, BUILTIN_IDS
from tests.integration.test_hidden_everywhere import _list_operations, _walk
from tests.integration.test_runs_api import ok, until
from tests.integration.test_sharing_api import World

API = "/api/v1"
SUMMARIZER, CLASSIFIER, EXTRACTOR, ANALYST = (
    "agent.builtin-summarizer",
    "agent.builtin-classifier",
    "agent.builtin-extractor",
    "agent.builtin-table-analyst",
)
ARTICLE = (
    "The db-1 server ran out of disk at 03:00. Nightly backups failed as a result. The team "
    "added a volume at 04:30 and the backups resumed at 05:00. No data was lost."
)
PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def server(settings: Settings, **entries: EntryConfig) -> TestClient:
    """A server with the demo model on (as `make run` has it) and these provider entries."""
    configured = Settings(**{**vars(settings), "demo_model": True,
                             "providers": ProvidersConfig(entries=entries)})  # fmt: skip
    client = TestClient(create_app(configured))
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


@pytest.fixture
def demo(settings: Settings) -> Iterator[TestClient]:
    with server(settings) as client:
        yield client


def run(w: World, who: str, agent_id: str, inputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Start a run as ``who`` and wait for it to end."""
    started = ok(w.call(who, "POST", f"{API}/agents/{agent_id}/runs", {"inputs": inputs, **extra}),
                 202)  # fmt: skip
    return until(w.client, started["id"], "succeeded", "failed", **w.as_(who))


def test_every_shipped_builtin_validates_and_has_a_stable_id() -> None:
    found = shipped()
    assert [b.id for b in found] == BUILTIN_IDS
    assert sorted([CLASSIFIER, EXTRACTOR, SUMMARIZER, ANALYST]) == BUILTIN_IDS
    for builtin in found:
        spec = builtin.spec
        assert spec.folder_id is None and spec.collection_id is None
        assert "copy it" in spec.description
        if spec.mode == "react":  # the table analyst: a chat agent, with the caller's tables
            assert spec.input_mode == "chat" and spec.tables == [] and spec.agent is not None
            assert (spec.agent.model_provider, spec.agent.model) == ("openai", "gpt-4o-mini")
            continue
        assert spec.mode == "workflow" and spec.input_mode == "event"
        # The provider and model the examples use, so the demo model answers for them offline.
        models = {(n.config.model_provider, n.config.model) for n in spec.nodes
                  if n.type == "llm"}  # fmt: skip
        assert models == {("openai", "gpt-4o-mini")}


def test_a_brand_new_user_sees_the_builtins_and_nothing_else(demo: TestClient) -> None:
    w = World(demo)
    newcomer = w.user("newcomer")
    listed = w.listed(newcomer)
    assert sorted(listed) == BUILTIN_IDS
    for agent in listed.values():
        assert agent["is_builtin"] is True and agent["version"] == 1
        assert agent["owners"] == [] and agent["folder_id"] is None
        assert agent["my_share_scope"] == "grant"  # a runner grant to every signed-in user
        assert ok(w.call(newcomer, "GET", f"{API}/agents/{agent['id']}")) == agent
        assert ok(w.call(newcomer, "GET", f"{API}/agents/{agent['id']}/grants")) == {"data": []}
        [version] = ok(w.call(newcomer, "GET", f"{API}/agents/{agent['id']}/versions"))["data"]
        assert (version["version"], version["created_by"]) == (1, "dhub")
    assert sorted(w.listed(newcomer, is_builtin="true")) == BUILTIN_IDS
    assert w.listed(newcomer, is_builtin="false") == {}
    # Their own agents come first (ids sort by creation), the built-ins after.
    mine = ok(w.call(newcomer, "POST", f"{API}/agents", {**_doc(SUMMARIZER, demo),
                                                        "name": "mine"}), 201)["id"]  # fmt: skip
    assert list(w.listed(newcomer)) == [mine, *BUILTIN_IDS]
    assert list(w.listed(newcomer, is_builtin="false")) == [mine]
    # Paging over them neither repeats nor skips.
    assert list(w.listed(newcomer, limit=1)) == [mine, *BUILTIN_IDS]
    # The admin sees them among everything, with the same scope.
    assert {a["my_share_scope"] for a in w.listed("user.admin", is_builtin="true").values()} == {
        "grant"
    }


def _doc(agent_id: str, client: TestClient) -> dict[str, Any]:
    """The built-in's document as a user would send it (without the server's fields)."""
    got = ok(client.get(f"{API}/agents/{agent_id}"))
    server_fields = ("id", "created_at", "updated_at", "owners", "my_share_scope", "is_builtin",
                     "item", "version", "markings", "effective_markings")  # fmt: skip
    return {k: v for k, v in got.items() if k not in server_fields}


def test_a_new_user_runs_each_builtin_with_the_demo_model(demo: TestClient) -> None:
    w = World(demo)
    bob = w.user("bob")
    summary = run(w, bob, SUMMARIZER, {"text": ARTICLE, "max_words": 20})
    assert summary["status"] == "succeeded", summary
    # The demo model's honest summary: the text's opening sentences that fit in 20 words.
    assert summary["outputs"] == {
        "summary": "The db-1 server ran out of disk at 03:00. Nightly backups failed as a result."
    }
    assert summary["usage"]["by_model"] and summary["usage"].get("model") == "demo"

    labels = ["billing", "outage", "other"]
    sorted_ = run(
        w, bob, CLASSIFIER, {"text": ARTICLE + " Outages like this one", "labels": labels}
    )
    assert sorted_["status"] == "succeeded", sorted_
    assert sorted_["outputs"]["label"] == "outage"
    assert "demo model's keyword match" in sorted_["outputs"]["reason"]
    assert "DHUB_OPENAI_API_KEY" in sorted_["outputs"]["reason"]

    # Made-up data would be worse than none: the extractor says what to configure instead.
    extracted = run(w, bob, EXTRACTOR, {"text": "Alice is 31.", "schema": PERSON_SCHEMA})
    assert extracted["status"] == "failed"
    assert extracted["error"]["kind"] == "unsupported"
    assert "set DHUB_OPENAI_API_KEY" in extracted["error"]["message"]


def test_the_builtins_run_with_a_real_provider_and_hold_its_answers_to_their_schemas(
    settings: Settings,
) -> None:
    """A scripted 'openai' stands in for the real one: the extractor's answer must fit the
    run's schema, the classifier's label must be one of the run's labels."""
    replies = [
        {"name": "Alice", "age": 31},
        {"name": "Alice"},  # misses "age": refused, not passed on
        {"label": "billing", "reason": "It is about an invoice."},
        {"label": "refunds", "reason": "Not one of the labels."},
        "Disk ran out on db-1; backups failed, then resumed. No data lost.",
    ]
    entry = EntryConfig(type="scripted", replies=replies, max_retries=0)
    with server(settings, openai=entry) as client:
        w = World(client)
        bob = w.user("bob")
        good = run(w, bob, EXTRACTOR, {"text": "Alice is 31.", "schema": PERSON_SCHEMA})
        bad = run(w, bob, EXTRACTOR, {"text": "Alice.", "schema": PERSON_SCHEMA})
        labels = ["billing", "outage"]
        picked = run(w, bob, CLASSIFIER, {"text": "My invoice is wrong", "labels": labels})
        outside = run(w, bob, CLASSIFIER, {"text": "Refund me", "labels": labels})
        summary = run(w, bob, SUMMARIZER, {"text": ARTICLE})
        events = ok(w.call(bob, "GET", f"{API}/runs/{good['id']}/events"))["data"]
    assert good["outputs"] == {"data": {"name": "Alice", "age": 31}}
    assert bad["status"] == "failed" and bad["error"]["kind"] == "invalid_output", bad
    assert "age" in bad["error"]["message"]
    assert picked["outputs"] == {"label": "billing", "reason": "It is about an invoice."}
    assert outside["status"] == "failed" and outside["error"]["kind"] == "invalid_output"
    assert summary["outputs"]["summary"].startswith("Disk ran out")
    assert "model" not in summary["usage"]  # a configured provider answered, not the demo
    # The node shows the schema it held the answer to: the run's own.
    [started] = [e for e in events if e["type"] == "node.started" and e["node_id"] == "extract"]
    assert started["data"]["inputs"]["response"] == PERSON_SCHEMA


def test_a_schema_that_is_not_one_fails_the_run_saying_so(demo: TestClient) -> None:
    w = World(demo)
    bob = w.user("bob")
    not_a_schema = run(w, bob, EXTRACTOR, {"text": "x", "schema": {"type": "thing"}})
    assert not_a_schema["status"] == "failed"
    assert not_a_schema["error"]["kind"] == "invalid_input"
    assert "response gives an invalid JSON schema" in not_a_schema["error"]["message"]
    missing = w.call(bob, "POST", f"{API}/agents/{EXTRACTOR}/runs", {"inputs": {"text": "x"}})
    assert missing.status_code == 422 and missing.json()["errors"][0]["loc"] == "/inputs/schema"


def _write_attempts(agent_id: str, who: str) -> list[tuple[str, str, Any]]:
    """Every endpoint that would change an agent, its owners, grants or markings."""
    url = f"{API}/agents/{agent_id}"
    return [
        ("PATCH", url, {"description": "mine now"}),
        ("PATCH", url, {"owners": [who]}),
        ("PATCH", url, {"owners": [who], "description": "x"}),
        ("PATCH", url, {}),
        ("DELETE", url, None),
        ("POST", f"{url}/grants", {"principal_id": who, "scope": "editor"}),
        ("DELETE", f"{url}/grants/{who}", None),
        ("DELETE", f"{url}/grants/public.all", None),
        ("POST", f"{url}/markings", {"marking_id": "marking.x"}),
        ("DELETE", f"{url}/markings/marking.x", None),
    ]


def test_builtins_are_read_only_for_everyone_admins_included(demo: TestClient) -> None:
    w = World(demo)
    bob = w.user("bob")
    root = w.user("root", admin=True)
    marking = w.marking("m", holders=[bob, root])
    before = {agent_id: ok(demo.get(f"{API}/agents/{agent_id}")) for agent_id in BUILTIN_IDS}
    for who in (bob, root, "user.admin"):
        for agent_id in BUILTIN_IDS:
            for method, url, body in _write_attempts(agent_id, who):
                url = url.replace("marking.x", marking)
                if isinstance(body, dict) and body.get("marking_id"):
                    body = {"marking_id": marking}
                response = w.call(who, method, url, body)
                assert response.status_code == 403, (who, method, url, response.text)
                detail = response.json()["detail"]
                assert "built-in" in detail and f"{API}/agents/{agent_id}/copy" in detail
    for agent_id, was in before.items():
        assert ok(demo.get(f"{API}/agents/{agent_id}")) == was
        assert len(ok(demo.get(f"{API}/agents/{agent_id}/versions"))["data"]) == 1
        assert ok(demo.get(f"{API}/agents/{agent_id}/grants")) == {"data": []}
    # Nothing was written, so nothing was audited but their installation.
    entries = ok(demo.get(f"{API}/audit", params={"target_id": SUMMARIZER}))["data"]
    assert [(e["actor_id"], e["action"]) for e in entries] == [("dhub", "agent.builtin_install")]


def test_a_builtin_run_is_its_users_alone(demo: TestClient) -> None:
    """Everyone runs the built-ins, so one user's runs (their texts) must not show to another
    through any list, filter, id or idempotency key; admins see them, as every run."""
    w = World(demo)
    alice, mallory = w.user("alice"), w.user("mallory")
    secret = "zq7confidential merger memo"
    body = {"type": "memo", "payload": {"text": secret}, "idempotency_key": "k-1"}
    first = w.call(alice, "POST", f"{API}/agents/{SUMMARIZER}/events", body)
    assert first.status_code == 202, first.text
    run_id = first.json()["id"]
    until(demo, run_id, "succeeded", "failed", **w.as_(alice))
    again = w.call(alice, "POST", f"{API}/agents/{SUMMARIZER}/events", body)
    assert again.status_code == 200 and again.json()["id"] == run_id  # her key, her run
    # The same key from mallory starts a run of his own, and shows nothing of hers.
    his = w.call(mallory, "POST", f"{API}/agents/{SUMMARIZER}/events",
                 {**body, "payload": {"text": "mine"}})  # fmt: skip
    assert his.status_code == 202 and his.json()["id"] != run_id
    assert secret not in his.text
    for path in ("", "/events", "/cancel"):
        method = "POST" if path == "/cancel" else "GET"
        seen = w.call(mallory, method, f"{API}/runs/{run_id}{path}")
        never = w.call(mallory, method, f"{API}/runs/run.01nosuchthing000000000000{path}")
        assert seen.status_code == never.status_code == 404
        assert seen.text == never.text.replace("run.01nosuchthing000000000000", run_id)
    for path, _ in _list_operations(demo):
        for params in ({}, {"limit": 1}, {"agent_id": SUMMARIZER}):
            for response in _walk(w, mallory, path, params):
                assert response.status_code < 500, (path, response.text)
                assert run_id not in response.text and secret not in response.text, path
    mine = ok(w.call(alice, "GET", f"{API}/runs?agent_id={SUMMARIZER}"))["data"]
    assert [r["id"] for r in mine] == [run_id]
    assert ok(w.call(alice, "GET", f"{API}/runs"))["data"][0]["id"] == run_id
    assert ok(demo.get(f"{API}/runs/{run_id}"))["inputs"] == {"text": secret, "max_words": 80}
    everyone = ok(demo.get(f"{API}/runs", params={"agent_id": SUMMARIZER}))["data"]
    assert {r["user_id"] for r in everyone} == {alice, mallory}


def _changed(builtin: Builtin, **fields: Any) -> Builtin:
    """The built-in as a later dhub might ship it."""
    doc = {**builtin.spec.model_dump(mode="json", exclude_unset=True), **fields}
    spec = validate_agent_document(doc)
    return dataclasses.replace(builtin, spec=spec, document=dump_spec(spec))


def _install(url: str, builtins: list[Builtin]) -> dict[str, str]:
    async def go() -> dict[str, str]:
        db = Database(url)
        try:
            await db.migrate()
            return await install_builtins(db, builtins)
        finally:
            await db.dispose()

    return asyncio.run(go())


def test_a_changed_builtin_is_a_new_version_and_copies_stay_as_they_were(
    settings: Settings,
) -> None:
    with server(settings) as client:
        w = World(client)
        bob = w.user("bob")
        copy = ok(w.call(bob, "POST", f"{API}/agents/{SUMMARIZER}/copy"), 201)
        old = run(w, bob, SUMMARIZER, {"text": ARTICLE})
    # What a later dhub ships: the summarizer changed, the others not.
    later = [_changed(b, description="Summarizes, better.") if b.id == SUMMARIZER else b
             for b in shipped()]  # fmt: skip
    assert _install(settings.database_url, later) == {
        CLASSIFIER: "unchanged", EXTRACTOR: "unchanged", SUMMARIZER: "upgraded",
        ANALYST: "unchanged"}  # fmt: skip
    with server(settings) as client:  # this dhub again: back to its own, a third version
        w = World(client)
        w.tokens[bob] = _token(client, bob)
        upgraded = ok(w.call(bob, "GET", f"{API}/agents/{SUMMARIZER}"))
        versions = ok(w.call(bob, "GET", f"{API}/agents/{SUMMARIZER}/versions"))["data"]
        second = ok(w.call(bob, "GET", f"{API}/agents/{SUMMARIZER}/versions/2"))
        untouched = ok(w.call(bob, "GET", f"{API}/agents/{copy['id']}"))
        kept = ok(w.call(bob, "GET", f"{API}/runs/{old['id']}"))
        # A run of an older version still starts and runs.
        pinned = run(w, bob, SUMMARIZER, {"text": ARTICLE}, version=1)
        classifier = ok(w.call(bob, "GET", f"{API}/agents/{CLASSIFIER}"))
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert {v["created_by"] for v in versions} == {"dhub"}
    assert upgraded["version"] == 3 and upgraded["is_builtin"] is True
    assert (
        upgraded["description"] == next(b for b in shipped() if b.id == SUMMARIZER).spec.description
    )
    assert second["description"] == "Summarizes, better."
    assert untouched == copy  # the user's copy: not a field changed
    assert kept["agent_version"] == 1 and kept["status"] == "succeeded"
    assert pinned["status"] == "succeeded" and pinned["agent_version"] == 1
    assert classifier["version"] == 1
    # Started again unchanged, nothing is stored.
    assert _install(settings.database_url, shipped()) == dict.fromkeys(BUILTIN_IDS, "unchanged")


def test_a_builtin_this_dhub_no_longer_ships_is_deleted_and_copies_stay(
    settings: Settings,
) -> None:
    summarizer = next(b for b in shipped() if b.id == SUMMARIZER)
    old = dataclasses.replace(summarizer, id="agent.builtin-old-summarizer")
    old = _changed(old, name="old-summarizer")
    with server(settings) as client:
        # An earlier dhub, sharing the database while this server runs, installs one more.
        assert _install(settings.database_url, [*shipped(), old])[old.id] == "installed"
        w = World(client)
        bob = w.user("bob")
        copy = ok(w.call(bob, "POST", f"{API}/agents/{old.id}/copy"), 201)
        done = run(w, bob, old.id, {"text": ARTICLE})
    # This dhub does not ship it: its next start retires it, and only it.
    outcomes = _install(settings.database_url, shipped())
    assert outcomes == {**dict.fromkeys(BUILTIN_IDS, "unchanged"), old.id: "retired"}
    with server(settings) as client:
        w = World(client)
        w.tokens[bob] = _token(client, bob)
        gone = w.call(bob, "GET", f"{API}/agents/{old.id}")
        listed = ok(w.call(bob, "GET", f"{API}/agents?is_builtin=true"))["data"]
        run_after = w.call(bob, "GET", f"{API}/runs/{done['id']}")
        mine = ok(w.call(bob, "GET", f"{API}/agents/{copy['id']}"))
    assert gone.status_code == 404
    assert sorted(a["id"] for a in listed) == sorted(BUILTIN_IDS)
    assert done["status"] == "succeeded"
    assert run_after.status_code == 404  # as for the runs of any deleted agent
    assert mine == copy
    # Retired once: a later start has nothing to do.
    assert _install(settings.database_url, shipped()) == dict.fromkeys(BUILTIN_IDS, "unchanged")


def _token(client: TestClient, user_id: str) -> str:
    made = client.post(f"{API}/users/{user_id}/tokens", json={"name": "again"})
    return str(ok(made, 201)["token"])


def test_servers_starting_together_install_each_builtin_once(settings: Settings) -> None:
    async def together() -> list[dict[str, str]]:
        dbs = [Database(settings.database_url) for _ in range(3)]
        try:
            await dbs[0].migrate()
            return list(await asyncio.gather(*(install_builtins(db) for db in dbs)))
        finally:
            for db in dbs:
                await db.dispose()

    outcomes = asyncio.run(together())
    for agent_id in BUILTIN_IDS:
        assert sorted(o[agent_id] for o in outcomes) == ["installed", "unchanged", "unchanged"]
    with server(settings) as client:
        for agent_id in BUILTIN_IDS:
            assert len(ok(client.get(f"{API}/agents/{agent_id}/versions"))["data"]) == 1


def test_no_one_squats_a_builtins_name_and_a_clash_never_stops_the_server(
    settings: Settings,
) -> None:
    with server(settings) as client:
        w = World(client)
        bob = w.user("bob")
        doc = {**_doc(SUMMARIZER, client), "name": "next-builtin", "folder_id": "(built-in)"}
        refused = w.call(bob, "POST", f"{API}/agents", doc)
        assert refused.status_code == 422, refused.text
        [error] = refused.json()["errors"]
        assert (error["loc"], error["code"]) == ("/folder_id", "reserved")
    # A built-in whose name another built-in holds (a database written by hand) is left out,
    # said in the log, and the server starts all the same.
    [summarizer] = [b for b in shipped() if b.id == SUMMARIZER]
    clash = dataclasses.replace(summarizer, id="agent.builtin-clash")
    assert _install(settings.database_url, [*shipped(), clash]) == {
        **dict.fromkeys(BUILTIN_IDS, "unchanged"), "agent.builtin-clash": "blocked"}  # fmt: skip
    with server(settings) as client:
        assert ok(client.get(f"{API}/agents", params={"is_builtin": "true"}))["data"]
        assert client.get(f"{API}/agents/agent.builtin-clash").status_code == 404
