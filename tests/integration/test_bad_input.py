"""Bad input on every endpoint of the OpenAPI document, on SQLite and PostgreSQL: no answer is
a server error, every refusal says where and why, and afterwards the other users' reads work.

One app per database serves the whole module. A plain user (mallory) and the admin send every
bad request of tests/support/attacks.py to every operation the app publishes, against real
resources (mallory's agents, runs waiting for her, her conversation, her prompt...), so a new
endpoint is attacked without a change here. Then a second user (victim), and the admin, read
everything: lists, their own agents (unchanged), the users page, every page of the audit log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from dhub.api.app import create_app
from dhub.settings import Settings
from dhub.store import json_codec
from dhub.store.db import normalize_url
from dhub.store.tables import audit_log, users
from tests.conftest import ADMIN_TOKEN, BUILTIN_IDS, DATABASES, FIXTURES, load_json, url_for
from tests.integration.test_runs_api import REFUND
from tests.support.asgi import RawResponse, send_raw
from tests.support.attacks import Attack, Operation, attacks, operations
from tests.support.ontology import SHOP_ITEMS, customer, ontology_doc, order

API = "/api/v1"

# Workflows that need neither a model nor the sandbox: a chat echo, a form waiting for
# mallory, and an actor call waiting for confirmation (never approved here).
ECHO = {
    "name": "echo", "description": "Echoes", "mode": "workflow", "input_mode": "chat",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "message", "type": "string"}]}},
        {"id": "reply", "type": "template", "config": {"template": "{{ sys.message }}",
                                                       "output": "answer"}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "answer", "type": "string", "value": "{{ answer }}"}]}},
    ],
    "edges": [{"source": "start", "target": "reply"}, {"source": "reply", "target": "end"}],
}  # fmt: skip
FORM = {
    "name": "form", "description": "Asks", "mode": "workflow", "input_mode": "event",
    "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "ticket", "type": "string"}, {"name": "count", "type": "number"}]}},
        {"id": "review", "type": "human_input", "config": {
            "prompt": "Approve {{ ticket }}?", "assignees": ["user.mallory"],
            "input_fields": [{"name": "approved", "type": "boolean"},
                             {"name": "note", "type": "string"}]}},
        {"id": "end", "type": "end", "config": {"outputs": [
            {"name": "approved", "type": "boolean", "value": "{{ approved }}"}]}},
    ],
    "edges": [{"source": "start", "target": "review"}, {"source": "review", "target": "end"}],
}  # fmt: skip
REACT = load_json(FIXTURES / "valid" / "react_support.json")
RESOURCES = {
    "prompt": {"name": "persona", "description": "Tone", "template": "Be {{ tone }}.",
               "variables": [{"name": "tone", "description": "How", "default": "kind"}],
               "tags": ["t"]},
    "tool": {"name": "lookup", "description": "Look up", "function": {
        "source": "def lookup(order_id: str) -> dict:\n    return {'id': order_id}\n"}},
    "actor": {"name": "refund", "description": "Refund", "function": {
        "source": "def refund(order_id: str, amount: float) -> dict:\n    return {}\n"}},
    "role": {"name": "researcher", "description": "Looks", "instructions": "Research.",
             "tools": ["set_conversation_variable"]},
    "secret": {"name": "api-key", "description": "Its key", "value": "sk-bad-input-1",
               "tags": ["t"]},
}  # fmt: skip
SECRET_VALUE = b"sk-bad-input-1"


@dataclass
class World:
    app: FastAPI
    admin: TestClient
    tokens: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)  # path parameter -> a real id
    kinds: dict[str, str] = field(default_factory=dict)  # "/prompts" -> mallory's prompt id
    victim_agent: dict[str, Any] = field(default_factory=dict)
    victim_prompt: dict[str, Any] = field(default_factory=dict)

    def call(self, who: str, method: str, path: str, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        response = self.admin.request(method, API + path, json=body, headers=headers)
        assert response.status_code < 300, (method, path, response.text)
        return response.json() if response.content else None


def _build(client: TestClient, app: FastAPI) -> World:
    world = World(app, client, {"admin": ADMIN_TOKEN})
    for name in ("mallory", "victim"):
        body = {"name": name, "display_name": name.title(), "avatar_config": {"color": "red"}}
        assert client.post(f"{API}/users", json=body).status_code == 201
        issued = client.post(f"{API}/users/user.{name}/tokens", json={"name": "t"}).json()
        world.tokens[name] = issued["token"]
    group = world.call("admin", "POST", "/groups", {"name": "crew", "display_name": "Crew"})
    world.call("admin", "POST", f"/groups/{group['id']}/members", {"principal_id": "user.mallory"})
    marking = world.call("admin", "POST", "/markings", {"name": "secret"})
    world.call("admin", "POST", f"/markings/{marking['id']}/members",
               {"principal_id": "user.mallory"})  # fmt: skip
    spare = world.call("mallory", "POST", "/tokens", {"name": "spare"})
    # The victim's own things, as they were before the attack.
    world.victim_agent = world.call("victim", "POST", "/agents", {**ECHO, "name": "mine"})
    world.victim_prompt = world.call(
        "victim", "POST", "/prompts", {**RESOURCES["prompt"], "name": "my-persona"}
    )
    # Mallory's things, the targets of her requests.
    echo = world.call("mallory", "POST", "/agents", ECHO)
    form = world.call("mallory", "POST", "/agents", FORM)
    refunds = world.call("mallory", "POST", "/agents", REFUND)
    for kind, doc in RESOURCES.items():
        world.kinds[f"/{kind}s"] = world.call("mallory", "POST", f"/{kind}s", doc)["id"]
    # An ontology with objects and links, for its objects, links and import endpoints.
    shop = world.call("mallory", "POST", "/ontologies", ontology_doc())["id"]
    world.kinds["/ontologies"] = shop
    world.call("mallory", "POST", f"/ontologies/{shop}/import", SHOP_ITEMS)
    chat = world.call("mallory", "POST", f"/agents/{echo['id']}/conversations")
    run = world.call("mallory", "POST", f"/agents/{form['id']}/runs",
                     {"inputs": {"ticket": "T-1", "count": 1}})  # fmt: skip
    paying = world.call("mallory", "POST", f"/agents/{refunds['id']}/runs",
                        {"inputs": {"amount": 3}})  # fmt: skip
    tasks = _tasks(world, 2)
    confirmation = next(t for t in tasks if t["run_id"] == paying["id"])
    world.values = {
        "agent_id": form["id"], "version": "1", "principal_id": "user.victim",
        "marking_id": marking["id"], "user_id": "user.mallory", "group_id": group["id"],
        "token_id": spare["id"], "run_id": run["id"], "node_id": "review",
        "call_id": confirmation["command_id"], "conversation_id": chat["id"],
        "type": "customer", "key": "c1", "link_type": "placed", "from_key": "c1", "to_key": "1",
    }  # fmt: skip
    return world


def _tasks(world: World, count: int) -> list[dict[str, Any]]:
    for _ in range(500):
        found: list[dict[str, Any]] = world.call("mallory", "GET", "/tasks")["data"]
        if len(found) >= count:
            return found
        time.sleep(0.01)
    raise AssertionError(f"the runs did not wait for mallory: {found}")


@pytest.fixture(scope="module", params=DATABASES)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    data = tmp_path_factory.mktemp("bad-input")
    url = url_for(request, data)
    app = create_app(Settings(data_dir=data, database_url=url, admin_token=ADMIN_TOKEN))
    with TestClient(app) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield _build(client, app)


def _templates(world: World) -> dict[tuple[str, str], Any]:
    """A valid body for each operation that takes one (others get one from their schema)."""
    agent = f"{API}/agents/{{agent_id}}"
    found: dict[tuple[str, str], Any] = {
        # A react agent has integer settings (budgets, retries) for the integer attacks.
        ("POST", f"{API}/agents"): FORM, ("POST", f"{API}/agents/validate"): REACT,
        ("PATCH", agent): {"description": "new", "tags": ["a"], "options": {"n": 1}},
        ("POST", f"{agent}/grants"): {"principal_id": "user.victim", "scope": "viewer"},
        ("POST", f"{agent}/markings"): {"marking_id": world.values["marking_id"]},
        ("POST", f"{agent}/runs"): {"inputs": {"ticket": "T", "count": 1}, "version": 1},
        ("POST", f"{agent}/events"): {"type": "t", "payload": {"ticket": "T", "count": 2},
                                      "idempotency_key": "k"},
        ("POST", f"{API}/conversations/{{conversation_id}}/messages"): {"content": "hi"},
        ("POST", f"{API}/runs/{{run_id}}/inputs/{{node_id}}"): {
            "values": {"approved": True, "note": "n"}},
        ("POST", f"{API}/runs/{{run_id}}/confirmations/{{call_id}}"): {
            "approve": False, "reason": "no"},
        ("POST", f"{API}/users"): {"name": "newcomer", "display_name": "N", "email": "n@ex.org",
                                   "avatar_url": "https://ex.org/a.png",
                                   "avatar_config": {"color": {"r": 1, "g": 2.5}}},
        ("PATCH", f"{API}/users/{{user_id}}"): {"display_name": "M", "avatar_url": "https://x",
                                                "avatar_config": {"shape": [1, "round"]}},
        ("POST", f"{API}/users/{{user_id}}/tokens"): {"name": "t", "expires_at": 4102444800000},
        ("POST", f"{API}/tokens"): {"name": "t", "expires_at": 4102444800000},
        ("POST", f"{API}/groups"): {"name": "team", "display_name": "Team"},
        ("PATCH", f"{API}/groups/{{group_id}}"): {"display_name": "Crew 2"},
        ("POST", f"{API}/groups/{{group_id}}/members"): {"principal_id": "user.victim"},
        ("POST", f"{API}/markings"): {"name": "other", "description": "d"},
        ("POST", f"{API}/markings/{{marking_id}}/members"): {"principal_id": "user.victim"},
    }  # fmt: skip
    for kind, doc in RESOURCES.items():
        base = f"{API}/{kind}s"
        found[("POST", base)] = found[("POST", f"{base}/validate")] = doc
        found[("PATCH", f"{base}/{{resource_id}}")] = {"description": "new", "tags": ["b"]}
        found[("POST", f"{base}/{{resource_id}}/grants")] = found[("POST", f"{agent}/grants")]
        found[("POST", f"{base}/{{resource_id}}/markings")] = found[("POST", f"{agent}/markings")]
    shop = f"{API}/ontologies/{{resource_id}}"
    found[("POST", f"{API}/ontologies")] = found[("POST", f"{API}/ontologies/validate")] = (
        ontology_doc("shop2")
    )
    found[("PATCH", shop)] = {"description": "new", "tags": ["b"]}
    found[("POST", f"{shop}/grants")] = found[("POST", f"{agent}/grants")]
    found[("POST", f"{shop}/markings")] = found[("POST", f"{agent}/markings")]
    found[("POST", f"{shop}/objects")] = customer("c7", "Hooli", country="US", vip=True)
    found[("POST", f"{shop}/objects/search")] = {
        "type": "order", "q": "open", "limit": 5,
        "filters": [{"property": "total", "op": "gt", "value": 10},
                    {"property": "status", "op": "in", "value": ["open", "shipped"]}],
    }  # fmt: skip
    found[("PATCH", f"{shop}/objects/{{type}}/{{key}}")] = {"properties": {"country": "IT"}}
    found[("POST", f"{shop}/links")] = {"link_type": "refers", "from": "c1", "to": "c2"}
    found[("POST", f"{shop}/import")] = {"objects": [order(9, total=1.5)],
                                         "links": [{"link_type": "placed", "from": "c3",
                                                    "to": 9}]}  # fmt: skip
    return found


def _values(world: World, op: Operation) -> dict[str, str]:
    prefix = op.template.removeprefix(API)
    resource = next((v for k, v in world.kinds.items() if prefix.startswith(k + "/")), None)
    return {**world.values, "resource_id": resource or "x"}


def _refusal_problem(response: RawResponse, path: str) -> str | None:
    """What is wrong with a 4xx answer's body, if anything: every refusal is our error body,
    and a 422 lists its problems, each with a pointer and a sentence; under /v1 (the
    OpenAI-compatible API) it is OpenAI's, and bad input is 400 (docs/openai.md)."""
    try:
        body = orjson.loads(response.body)
    except orjson.JSONDecodeError:
        return f"not JSON: {response.body[:80]!r}"
    if path.startswith("/v1/"):
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or not all(
            isinstance(error.get(k), str) for k in ("message", "type", "code")
        ):
            return f"not an OpenAI error body: {body!r:.120}"
        return "a 422 where OpenAI's clients expect 400" if response.status == 422 else None
    if not isinstance(body, dict) or not isinstance(body.get("detail"), str):
        return f"not an error body: {body!r:.120}"
    if response.status == 422:
        errors = body.get("errors") or []
        if not errors or any(not e.get("message") or not isinstance(e.get("loc"), str)
                             for e in errors):  # fmt: skip
            return f"a 422 without located problems: {body!r:.200}"
    return None


@dataclass
class Outcome:
    sent: int = 0
    failures: list[str] = field(default_factory=list)
    covered: set[tuple[str, str]] = field(default_factory=set)


@pytest.fixture(scope="module")
def attacked(world: World) -> Outcome:
    """Every attack on every operation, as mallory and as the admin."""
    openapi = world.app.openapi()
    components = openapi.get("components", {}).get("schemas", {})
    templates = _templates(world)
    outcome = Outcome()
    for who in ("mallory", "admin"):
        auth = {"authorization": f"Bearer {world.tokens[who]}"}
        for op in operations(openapi):
            for attack in attacks(op, _values(world, op), templates, components):
                outcome.sent += 1
                outcome.covered.add((op.method, op.template))
                _judge(world, attack, auth, who, outcome)
    return outcome


def _judge(world: World, attack: Attack, auth: dict[str, str], who: str, out: Outcome) -> None:
    headers = {**auth, **attack.headers}
    response = send_raw(world.admin, attack.method, attack.path, attack.query, headers, attack.body)
    where = f"{who}: {attack.method} {attack.path[:60]!r} {attack.label}"
    if response.status >= 500 or response.status < 100:
        out.failures.append(f"{where} -> {response.status} {response.body[:200]!r}")
    elif response.status >= 400 and (problem := _refusal_problem(response, attack.path)):
        out.failures.append(f"{where} -> {response.status}: {problem}")
    if SECRET_VALUE in response.body:  # a secret's value is never answered, whatever is asked
        out.failures.append(f"{where} -> {response.status}: the secret's value is in the answer")


def test_no_bad_input_gets_a_server_error(world: World, attacked: Outcome) -> None:
    everything = {(op.method, op.template) for op in operations(world.app.openapi())}
    assert attacked.covered == everything  # every operation was attacked
    assert attacked.sent > 3000
    assert attacked.failures == [], "\n".join(attacked.failures[:40])


def test_other_users_read_as_before_after_the_attack(world: World, attacked: Outcome) -> None:
    victim_agent = world.victim_agent["id"]
    assert world.call("victim", "GET", f"/agents/{victim_agent}") == world.victim_agent
    listed = world.call("victim", "GET", "/agents")["data"]
    assert [a["id"] for a in listed] == [victim_agent, *BUILTIN_IDS]
    prompt = world.victim_prompt["id"]
    assert world.call("victim", "GET", f"/prompts/{prompt}") == world.victim_prompt
    users = {u["id"]: u for u in world.call("victim", "GET", "/users")["data"]}
    assert users["user.victim"]["avatar_config"] == {"color": "red"}
    me = world.call("victim", "GET", "/me")
    assert (me["id"], me["avatar_config"], me["groups"]) == ("user.victim", {"color": "red"}, [])
    # Every list (no path parameter) answers, to the victim and to the admin.
    for op in operations(world.app.openapi()):
        if op.method == "GET" and "{" not in op.template and op.template.startswith(API):
            path = op.template.removeprefix(API)
            for who in ("victim", "admin"):
                response = world.admin.get(
                    API + path, headers={"Authorization": f"Bearer {world.tokens[who]}"}
                )
                allowed = (200,) if who == "admin" else (200, 403)
                assert response.status_code in allowed, (who, path, response.text[:300])
    # Everything the attacker touched still renders, for the admin.
    for op in operations(world.app.openapi()):
        if op.method == "GET" and "{" in op.template:
            path = op.template
            for name, value in _values(world, op).items():
                path = path.replace("{" + name + "}", value)
            response = world.admin.get(path)
            assert response.status_code in (200, 404), (path, response.text[:300])
    _read_the_whole_audit_log(world)


def _read_the_whole_audit_log(world: World) -> None:
    cursor: str | None = None
    pages = 0
    while True:
        query = f"?limit=200&cursor={cursor}" if cursor else "?limit=200"
        page = world.call("admin", "GET", f"/audit{query}")
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages >= 1


def test_a_value_stored_before_the_bounds_still_renders(client: TestClient, settings: Any) -> None:
    """Defence in depth: a profile an older server stored unbounded (400 levels deep, an
    integer beyond 64 bits: orjson writes neither) breaks none of the pages that show it."""
    assert client.post(f"{API}/users", json={"name": "old", "display_name": "Old"}).status_code
    agent = client.post(f"{API}/agents", json={**ECHO, "name": "legacy"}).json()["id"]
    assert client.patch(f"{API}/agents/{agent}", json={"owners": ["user.old"]}).status_code == 200
    deep: Any = {"big": 2**70}
    for _ in range(400):
        deep = {"d": deep}
    # Written as the store always wrote JSON columns (orjson, else the stdlib).
    engine = create_engine(normalize_url(settings.database_url), **json_codec.ENGINE_OPTIONS)
    with engine.begin() as conn:
        conn.execute(users.update().where(users.c.id == "user.old").values(avatar_config=deep))
        conn.execute(audit_log.update().values(after={"avatar_config": deep}))
    engine.dispose()
    assert client.get(f"{API}/users/user.old").json()["avatar_config"] == deep
    listed = {u["id"]: u for u in client.get(f"{API}/users").json()["data"]}
    assert listed["user.old"]["avatar_config"] == deep
    [owner] = client.get(f"{API}/agents/{agent}").json()["owners"]
    assert owner["avatar_config"] == deep
    assert client.get(f"{API}/agents").json()["data"][0]["owners"] == [owner]
    entries = client.get(f"{API}/audit").json()["data"]
    assert entries and all(e["after"] == {"avatar_config": deep} for e in entries)
