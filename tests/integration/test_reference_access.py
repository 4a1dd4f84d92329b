"""The one reference check (DESIGN.md 2.1), tried as an attacker would, on SQLite and
PostgreSQL: ids count as references only where the schema puts them; a reference needs read
(prompts) or run (tools, actors, roles, agents as roles) and every marking, at every save and
at every resolution (run start, resume, chat turn) for the acting user; a missing, unshared,
marked or read-only id gets the same error, word for word, and nothing of the hidden
resource reaches a response, a run, an event or the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.domain.resources import unreachable
from dhub.settings import Settings
from tests.integration.test_react_runs_api import API, DONE, LOOKUP, REFUND, log, server
from tests.integration.test_reference_runs import LOOKUP_SOURCE, REFUND_SOURCE, model_of, stored
from tests.integration.test_resources_api import create
from tests.integration.test_runs_api import ok, until
from tests.integration.test_sharing_api import World

SECRET = "TOP-SECRET-7f3a"  # in every hidden resource: it must never reach an attacker
FAKE = {
    "prompt": "prompt.01nosuchthing000000000000",
    "tool": "tool.01nosuchthing00000000000000",
    "actor": "actor.01nosuchthing0000000000000",
    "role": "role.01nosuchthing00000000000000",
    "agent": "agent.01nosuchthing0000000000000",
}


def react_doc(name: str, **agent: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Answers about orders",
        "agent": {
            "instructions": "Be brief.",
            "model_provider": "openai",
            "model": "gpt-4o-mini",
            **agent,
        },
    }


def grant(client: TestClient, kind: str, resource_id: str, who: str, scope: str) -> None:
    body = {"principal_id": who, "scope": scope}
    ok(client.post(f"{API}/{kind}s/{resource_id}/grants", json=body), 201)


def revoke(client: TestClient, kind: str, resource_id: str, who: str) -> None:
    response = client.delete(f"{API}/{kind}s/{resource_id}/grants/{who}")
    assert response.status_code == 204, response.text


def mark(client: TestClient, kind: str, resource_id: str, marking: str) -> None:
    ok(client.post(f"{API}/{kind}s/{resource_id}/markings", json={"marking_id": marking}))


def same_error(hidden: Any, fake: Any, hidden_id: str, fake_id: str) -> None:
    """The two responses are byte-identical once each id is written as the other."""
    assert hidden.status_code == fake.status_code, (hidden.text, fake.text)
    assert hidden.text == fake.text.replace(fake_id, hidden_id)
    assert SECRET not in hidden.text


@contextmanager
def world_of(settings: Settings, *replies: Any) -> Iterator[tuple[TestClient, World]]:
    """A server whose model answers ``replies`` in order, and a World to people it."""
    with server(settings, list(replies)) as client:
        yield client, World(client)


@pytest.fixture
def world(settings: Settings) -> Iterator[tuple[TestClient, World]]:
    with world_of(settings, LOOKUP, DONE, LOOKUP, DONE) as made:
        yield made


def hidden_resources(client: TestClient, w: World, owner: str) -> dict[str, dict[str, str]]:
    """For each kind, one resource ``owner`` cannot use for each reason: unshared (another
    user's), marked (shared with everyone, marked with a marking the owner lacks) and, for
    the kinds that need run, shared read-only."""
    marking = w.marking("secret")  # the admin holds it
    found: dict[str, dict[str, str]] = {}
    for kind in ("prompt", "tool", "actor", "role", "agent"):
        found[kind] = {}
        for reason in ("unshared", "marked", "read_only"):
            if reason == "read_only" and kind == "prompt":
                continue
            resource_id = make_hidden(client, kind, f"{kind}-{reason}".replace("-", "_"))
            if reason == "marked":
                grant(client, kind, resource_id, "public.all", "editor")
                mark(client, kind, resource_id, marking)
            elif reason == "read_only":
                grant(client, kind, resource_id, owner, "viewer")
            found[kind][reason] = resource_id
    return found


def make_hidden(client: TestClient, kind: str, name: str) -> str:
    if kind == "prompt":
        doc: dict[str, Any] = {"name": name, "description": SECRET, "template": SECRET + "{{x}}",
                               "variables": [{"name": "x"}]}  # fmt: skip
        return str(create(client, kind, doc)["id"])
    if kind in ("tool", "actor"):
        source = f"def {name}(q: str) -> dict:\n    return {{'s': '{SECRET}'}}\n"
        return stored(client, kind, name, source, description=SECRET)
    if kind == "role":
        doc = {"name": name, "description": SECRET, "instructions": SECRET}
        return str(create(client, kind, doc)["id"])
    # A workflow agent: a role may not name one, which must not show either.
    agent = {"name": name, "description": SECRET, "mode": "workflow", "nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "end", "type": "end", "config": {}}],
        "edges": [{"source": "start", "target": "end"}]}  # fmt: skip
    return str(ok(client.post(f"{API}/agents", json=agent), 201)["id"])


# Where each kind of reference goes in an agent document, as a merge patch.
def placements(kind: str, ref_id: str) -> list[dict[str, Any]]:
    if kind == "prompt":
        return [{"agent": {"prompts": [{"prompt_id": ref_id}]}},
                {"agent": {"prompts": [{"prompt_id": ref_id, "variables": {"y": 1}}]}}]  # fmt: skip
    if kind in ("tool", "actor"):
        return [
            {"agent": {f"{kind}s": [ref_id]}},
            {"agent": {f"{kind}s": [{"id": ref_id, "name": "n"}]}},
            {"agent": {f"{kind}s": [{"id": ref_id, "description": "d"}]}},
            {"agent": None, "mode": "workflow", "nodes": _calling(kind, ref_id),
             "edges": [{"source": "start", "target": "call"},
                       {"source": "call", "target": "end"}]},
        ]  # fmt: skip
    placed = [{"agent": {"roles": [ref_id]}}, {"agent": {"roles": [{"id": ref_id, "name": "r"}]}}]
    if kind == "tool":
        placed.append({"agent": {"roles": [{"name": "r", "instructions": "i", "tools": [ref_id]}]}})
    return placed


def _calling(kind: str, ref_id: str) -> list[dict[str, Any]]:
    return [
        {"id": "start", "type": "start", "config": {}},
        {"id": "call", "type": f"{kind}_call", "config": {kind: ref_id}},
        {"id": "end", "type": "end", "config": {}},
    ]


def test_planted_ids_are_text_until_a_reference_names_them(
    world: tuple[TestClient, World],
) -> None:
    """Mallory plants hidden ids in her agent's tags, alias, description and metadata (text:
    accepted), then moves each into every reference position: refused exactly as a random id
    is, on create, on PATCH and on validate; her admin colleague without the marking too."""
    client, w = world
    mallory = w.user("mallory")
    nosy_admin = w.user("nosy", admin=True)
    hidden = hidden_resources(client, w, mallory)
    for kind, by_reason in hidden.items():
        for reason, hidden_id in by_reason.items():
            attackers = [mallory] + ([nosy_admin] if reason == "marked" else [])
            for attacker in attackers:
                _attack(w, attacker, kind, hidden_id)


def _attack(w: World, attacker: str, kind: str, hidden_id: str) -> None:
    fake_id = FAKE[kind]
    planted = react_doc(f"plant-{hidden_id[-6:]}-{attacker[-4:]}", instructions=hidden_id)
    planted.update(alias=hidden_id, description=hidden_id, tags=[hidden_id, "x"])
    source = "def note(q: str) -> str:\n    return q\n"
    planted["agent"]["tools"] = [{"name": "note", "description": hidden_id,
                                  "function": {"source": source},
                                  "options": {"id": hidden_id, "ids": [hidden_id]}}]  # fmt: skip
    created = ok(w.call(attacker, "POST", f"{API}/agents", planted), 201)
    assert SECRET not in json.dumps(created)
    url = f"{API}/agents/{created['id']}"
    for patch in placements(kind, hidden_id):
        _same(w, attacker, "PATCH", url, patch, hidden_id, fake_id)
        whole = {**planted, **patch, "name": "whole"}
        if isinstance(patch.get("agent"), dict):
            whole["agent"] = {**planted["agent"], **patch["agent"]}
        for endpoint in (f"{API}/agents", f"{API}/agents/validate"):
            _same(w, attacker, "POST", endpoint, whole, hidden_id, fake_id)
    if kind == "tool":  # a stored role's tools
        role = {
            "name": f"r-{hidden_id[-6:]}-{attacker[-4:]}",
            "description": "",
            "instructions": "i",
        }
        role_id = ok(w.call(attacker, "POST", f"{API}/roles", role), 201)["id"]
        _same(w, attacker, "PATCH", f"{API}/roles/{role_id}", {"tools": [hidden_id]},
              hidden_id, fake_id)  # fmt: skip
        _same(w, attacker, "POST", f"{API}/roles", {**role, "name": "r2", "tools": [hidden_id]},
              hidden_id, fake_id)  # fmt: skip


def _same(w: World, who: str, method: str, url: str, body: Any, hidden: str, fake: str) -> None:
    """``body`` naming ``hidden`` is refused exactly as the same body naming ``fake``."""
    as_fake = json.loads(json.dumps(body).replace(hidden, fake))
    attempt = w.call(who, method, url, body)
    assert attempt.status_code == 422 or url.endswith("/validate"), attempt.text
    same_error(attempt, w.call(who, method, url, as_fake), hidden, fake)


def test_a_run_resolves_its_references_for_its_user(world: tuple[TestClient, World]) -> None:
    """An agent shared with alice runs for her while she may run its tool; once the grant is
    gone, or the tool is marked, her new runs are refused with the reference error (and the
    owner's still run)."""
    client, w = world
    alice = w.user("alice")
    tool = stored(client, "tool", "lookup_order", LOOKUP_SOURCE)
    agent = ok(client.post(f"{API}/agents", json=react_doc("support", tools=[tool])), 201)["id"]
    grant(client, "agent", agent, alice, "runner")
    grant(client, "tool", tool, alice, "runner")
    body = {"inputs": {"message": "Where is A-1001?"}}
    runs = f"{API}/agents/{agent}/runs"
    first = ok(w.call(alice, "POST", runs, body), 202)["id"]
    assert until(client, first, "succeeded", "failed")["status"] == "succeeded"

    revoke(client, "tool", tool, alice)
    refused = w.call(alice, "POST", runs, body)
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["errors"]
    assert (error["loc"], error["message"]) == ("/agent/tools/0", unreachable("tool", tool))
    own = ok(client.post(runs, json=body), 202)["id"]  # the owner's run still resolves
    assert until(client, own, "succeeded", "failed")["status"] == "succeeded"

    grant(client, "tool", tool, alice, "runner")
    mark(client, "tool", tool, w.marking("pii"))
    refused = w.call(alice, "POST", runs, body)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["message"] == unreachable("tool", tool)


def test_a_waiting_run_fails_when_its_user_loses_the_actor(settings: Settings) -> None:
    """Resumption resolves again: alice's run waits for her confirmation; the actor's grant
    goes; her approval resumes a run that fails with the reference error, the refund unpaid."""
    with world_of(settings, REFUND, DONE) as (client, w):
        _approve_after_losing_the_actor(client, w)


def _approve_after_losing_the_actor(client: TestClient, w: World) -> None:
    alice = w.user("alice")
    actor = stored(client, "actor", "issue_refund", REFUND_SOURCE)
    agent = ok(client.post(f"{API}/agents", json=react_doc("refunds", actors=[actor])), 201)["id"]
    grant(client, "agent", agent, alice, "runner")
    grant(client, "actor", actor, alice, "runner")
    run = ok(w.call(alice, "POST", f"{API}/agents/{agent}/runs",
                    {"inputs": {"message": "Refund A-1001"}}), 202)["id"]  # fmt: skip
    assert until(client, run, "waiting", "failed")["status"] == "waiting"
    revoke(client, "actor", actor, alice)
    [task] = ok(w.call(alice, "GET", f"{API}/tasks"))["data"]
    path = f"{API}/runs/{run}/confirmations/{task['command_id']}"
    ok(w.call(alice, "POST", path, {"approve": True}), 202)
    failed = until(client, run, "failed", "succeeded")
    assert failed["error"]["kind"] == "invalid_agent"
    assert unreachable("actor", actor) in failed["error"]["message"]
    assert not [e for e in log(client, run) if e["type"] == "tool.succeeded"]


def test_a_hidden_prompt_never_reaches_the_runner_or_the_model(
    world: tuple[TestClient, World],
) -> None:
    """The admin's agent uses a marked prompt; alice may run the agent but lacks the marking:
    her run and her chat turn are refused before any model call, saying nothing of it."""
    client, w = world
    alice = w.user("alice")
    prompt = create(client, "prompt", {"name": "p", "description": SECRET, "template": SECRET})
    agent = ok(client.post(f"{API}/agents", json=react_doc(
        "chatty", prompts=[{"prompt_id": prompt["id"]}])), 201)["id"]  # fmt: skip
    grant(client, "agent", agent, alice, "runner")
    grant(client, "prompt", prompt["id"], alice, "viewer")
    mark(client, "prompt", prompt["id"], w.marking("hr"))
    model = model_of(client)
    calls = len(model.requests)
    refused = w.call(alice, "POST", f"{API}/agents/{agent}/runs", {"inputs": {"message": "hi"}})
    assert refused.status_code == 422 and SECRET not in refused.text
    assert refused.json()["errors"][0]["message"] == unreachable("prompt", prompt["id"])
    assert len(model.requests) == calls


def test_a_role_agent_resolves_for_the_runner(world: tuple[TestClient, World]) -> None:
    """An agent as a role needs run: a read-only grant on it is not enough to start the
    agent that delegates to it, and the message is the one for a random id."""
    client, w = world
    alice = w.user("alice")
    delegate = ok(client.post(f"{API}/agents", json=react_doc("delegate")), 201)["id"]
    agent = ok(client.post(f"{API}/agents", json=react_doc("boss", roles=[delegate])), 201)["id"]
    grant(client, "agent", agent, alice, "runner")
    grant(client, "agent", delegate, alice, "viewer")
    refused = w.call(alice, "POST", f"{API}/agents/{agent}/runs", {"inputs": {"message": "hi"}})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["message"] == unreachable("agent", delegate)
