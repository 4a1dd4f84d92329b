"""Property (hypothesis), on SQLite and PostgreSQL: for random agent documents with another
user's unshared, marked or read-only ids planted in random string fields, then moved by PATCH
into a random reference position, or stored in one by someone who may and then run by the
attacker, no response, run, event or error carries the hidden resource's data, and every
answer is byte-identical to the one for an id that never existed."""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dhub.domain.resources import unreachable
from tests.integration.test_reference_access import (
    FAKE,
    SECRET,
    grant,
    hidden_resources,
    placements,
    react_doc,
)
from tests.integration.test_runs_api import TRIAGE, ok
from tests.integration.test_sharing_api import World

API = "/api/v1"
_examples = itertools.count()
REASONS = ("unshared", "marked", "read_only")


@dataclass(frozen=True)
class Attack:
    kind: str
    reason: str
    base: str  # "react", "workflow" (agents) or "role" (a stored role with tools)
    plants: tuple[int, ...]  # which string leaves get the hidden id (modulo their count)
    placement: int  # which reference position the PATCH moves it into
    admin: bool  # the attacker is an admin (who still lacks the marking)
    stored_by_owner: bool  # someone who may use it stores the reference; the attacker runs


@st.composite
def attacks(draw: st.DrawFn) -> Attack:
    kind = draw(st.sampled_from(["prompt", "tool", "actor", "role", "agent"]))
    reasons = [r for r in REASONS if not (kind == "prompt" and r == "read_only")]
    reason = draw(st.sampled_from(reasons))
    return Attack(
        kind=kind,
        reason=reason,
        base=draw(st.sampled_from(["react", "workflow", "role"])),
        plants=tuple(draw(st.lists(st.integers(0, 10_000), max_size=4))),
        placement=draw(st.integers(0, 10)),
        # An admin may use what is unmarked: only marked things are hidden from it.
        admin=reason == "marked" and draw(st.booleans()),
        stored_by_owner=draw(st.booleans()),
    )


class Setting:
    """One world per database: the attackers and the hidden resources, made once."""

    def __init__(self, client: TestClient) -> None:
        self.w = World(client)
        self.mallory = self.w.user("mallory")
        self.nosy = self.w.user("nosy", admin=True)
        self.hidden = hidden_resources(client, self.w, self.mallory)
        # The nosy admin sees everything but the marked ones: those are its targets.
        for kind, by_reason in self.hidden.items():
            grant(client, kind, by_reason["unshared"], self.nosy, "viewer")


_settings: dict[int, Setting] = {}


def setting_of(client: TestClient) -> Setting:
    found = _settings.get(id(client))
    if found is None:
        _settings.clear()
        found = _settings[id(client)] = Setting(client)
    return found


def base_doc(base: str, name: str) -> dict[str, Any]:
    if base == "role":
        return {"name": name, "description": "d", "instructions": "i", "tags": ["t"],
                "tools": ["set_conversation_variable"]}  # fmt: skip
    if base == "workflow":
        return {**copy.deepcopy(TRIAGE), "name": name}
    doc = react_doc(name, instructions="Answer.")
    doc.update(alias="a", tags=["t"])
    doc["agent"]["tools"] = [{"name": "note", "description": "d",
                              "function": {"source": "def note(q: str) -> str:\n    return q\n"},
                              "options": {"k": "v"}}]  # fmt: skip
    return doc


def plant(doc: Any, picks: tuple[int, ...], value: str) -> Any:
    """``doc`` with the string leaves ``picks`` selects (modulo their count) set to
    ``value``; names and node ids stay, so that both versions differ only in the id."""
    leaves: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, str) and key not in ("name", "id", "source", "target"):
                leaves.append((node, key))
            elif isinstance(child, dict | list):
                stack.append(child)
    for pick in picks:
        if leaves:
            parent, key = leaves[pick % len(leaves)]
            parent[key] = value
    return doc


def twin(value: Any, hidden: str, fake: str) -> Any:
    return json.loads(json.dumps(value).replace(hidden, fake))


def same(seen: Any, other: Any, hidden: str, fake: str, where: str) -> None:
    assert seen.status_code == other.status_code, (where, seen.text, other.text)
    assert seen.text == other.text.replace(fake, hidden), where
    assert SECRET not in seen.text, where


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(attack=attacks())
def test_planted_ids_reveal_nothing(client: TestClient, attack: Attack) -> None:
    s = setting_of(client)
    n = next(_examples)
    attacker = s.nosy if attack.admin else s.mallory
    hidden = s.hidden[attack.kind][attack.reason]
    if attacker == s.nosy and attack.reason != "marked":
        event("admin, unmarked: skipped")
        return  # an admin may use what is unmarked: nothing is hidden from it
    fake = FAKE[attack.kind]
    if attack.stored_by_owner:
        _run_what_the_owner_stored(s, attack, attacker, hidden, fake, n)
        return
    doc = plant(base_doc(attack.base, f"plant-{n}"), attack.plants, hidden)
    where = f"{API}/roles" if attack.base == "role" else f"{API}/agents"
    validated = s.w.call(attacker, "POST", f"{where}/validate", doc)
    same(validated, s.w.call(attacker, "POST", f"{where}/validate", twin(doc, hidden, fake)),
         hidden, fake, "validate")  # fmt: skip
    created = s.w.call(attacker, "POST", where, doc)
    assert created.status_code in (201, 422), created.text
    assert SECRET not in created.text
    event(f"planted agent {created.status_code}")
    if created.status_code != 201:
        return
    url = f"{where}/{created.json()['id']}"
    choices = placements(attack.kind, hidden)
    patch = choices[attack.placement % len(choices)]
    if attack.base == "role":
        patch = {"tools": [hidden]}
    moved = s.w.call(attacker, "PATCH", url, patch)
    # The same document, the same move, a random id: only the id differs in the answer.
    same(moved, s.w.call(attacker, "PATCH", url, twin(patch, hidden, fake)), hidden, fake,
         f"PATCH {patch}")  # fmt: skip
    assert moved.status_code == 422
    assert ok(s.w.call(attacker, "GET", url))["version"] == 1  # nothing was saved


def _run_what_the_owner_stored(
    s: Setting, attack: Attack, attacker: str, hidden: str, fake: str, n: int
) -> None:
    """The admin (who may use everything) stores an agent naming the hidden resource in a
    reference position and lets the attacker run it: the attacker's run is refused with the
    error a random id would give, and nothing of the resource shows."""
    choices = placements(attack.kind, hidden)
    patch = choices[attack.placement % len(choices)]
    doc = base_doc("react", f"owned-{n}")
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        elif value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    doc = _bindable(doc, attack.kind)
    created = s.w.client.post(f"{API}/agents", json=doc)
    event(f"owner stored {attack.kind}: {created.status_code}")
    if created.status_code != 201:
        return  # a placement the owner cannot save either (a workflow agent as a role)
    agent = created.json()["id"]
    grant(s.w.client, "agent", agent, attacker, "runner")
    start = (doc.get("mode") == "workflow" and {"inputs": {}}) or {"inputs": {"message": "hi"}}
    refused = s.w.call(attacker, "POST", f"{API}/agents/{agent}/runs", start)
    assert refused.status_code == 422, refused.text
    assert SECRET not in refused.text
    for error in refused.json()["errors"]:
        assert error["message"] == unreachable(attack.kind, hidden), error
        assert error["code"] == "unknown_reference"
    # The owner's own runs are not the attacker's business: none of theirs shows either.
    runs = ok(s.w.call(attacker, "GET", f"{API}/runs", None))
    assert SECRET not in json.dumps(runs)


def _bindable(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """Prompt references bind the hidden prompt's one variable (so the owner can save it)."""
    if kind == "prompt":
        for ref in doc["agent"].get("prompts", []):
            ref["variables"] = {"x": "1"}
    return doc
