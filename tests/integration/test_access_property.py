"""For random users, nested groups, owners, grants and markings (hypothesis), on both databases:
``GET /agents`` lists exactly the agents ``GET /agents/{id}`` lets the same caller read, and
``my_share_scope`` is what a reference model of DESIGN.md section 2 says; everyone lists the
built-in agents."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import BUILTIN_IDS
from tests.integration.test_sharing_api import AGENTS, World

PUBLIC = "public.all"
SCOPES = ("viewer", "runner", "editor")
_worlds = itertools.count()  # names stay unique across the examples sharing one database


@dataclass(frozen=True)
class AgentSpec:
    owners: frozenset[str]  # symbolic principals: "u0", "g1", "public"
    grants: dict[str, str]
    markings: frozenset[int]


@dataclass(frozen=True)
class Scenario:
    admins: tuple[bool, ...]  # one per user
    groups: tuple[frozenset[str], ...]  # members of group i: users, or groups j < i
    holders: tuple[frozenset[str], ...]  # who holds marking i: users, groups or "public"
    agents: tuple[AgentSpec, ...]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    admin = st.sampled_from([False, False, True])
    admins = tuple(draw(st.lists(admin, min_size=1, max_size=4)))
    users = [f"u{i}" for i in range(len(admins))]
    groups: list[frozenset[str]] = []
    for i in range(draw(st.integers(0, 3))):
        candidates = users + [f"g{j}" for j in range(i)]
        groups.append(frozenset(draw(st.lists(st.sampled_from(candidates), max_size=3))))
    principals = users + [f"g{i}" for i in range(len(groups))] + ["public"]
    holders = tuple(
        frozenset(draw(st.lists(st.sampled_from(principals), max_size=3)))
        for _ in range(draw(st.integers(0, 2)))
    )
    agents = []
    for _ in range(draw(st.integers(1, 4))):
        owners = frozenset(draw(st.lists(st.sampled_from(principals), min_size=1, max_size=2)))
        grants = draw(
            st.dictionaries(st.sampled_from(principals), st.sampled_from(SCOPES), max_size=3)
        )
        markings = frozenset(draw(st.sets(st.sampled_from(range(len(holders))))) if holders else ())
        agents.append(AgentSpec(owners, grants, markings))
    return Scenario(admins, tuple(groups), holders, tuple(agents))


def expected_scope(scenario: Scenario, user: int, agent: AgentSpec) -> str | None:
    """The reference model: None when the agent is invisible to the user."""
    me = f"u{user}"
    mine = {me, "public"}
    changed = True
    while changed:  # the groups the user is in, through nesting
        grown = {f"g{i}" for i, members in enumerate(scenario.groups) if members & mine}
        changed = not grown <= mine
        mine |= grown
    held = {i for i, holders in enumerate(scenario.holders) if holders & mine}
    if not agent.markings <= held:
        return None
    if agent.owners & mine:
        return "owner"
    if mine & set(agent.grants):
        return "grant"
    return "admin" if scenario.admins[user] else None


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(scenario=scenarios())
def test_list_matches_get_and_scope(client: TestClient, scenario: Scenario) -> None:
    n = next(_worlds)
    w = World(client)
    ids: dict[str, str] = {"public": PUBLIC}
    for i, admin in enumerate(scenario.admins):
        ids[f"u{i}"] = w.user(f"w{n}-u{i}", admin=admin)
    for i, members in enumerate(scenario.groups):
        ids[f"g{i}"] = w.group(f"w{n}-g{i}", sorted(ids[m] for m in members))
    marks = [
        w.marking(f"w{n}-m{i}", sorted(ids[h] for h in holders))
        for i, holders in enumerate(scenario.holders)
    ]
    tag = f"world-{n}"
    agents = [
        w.agent(
            f"w{n}-a{i}",
            owners=[ids[o] for o in spec.owners],
            grants={ids[p]: scope for p, scope in spec.grants.items()},
            markings=[marks[m] for m in spec.markings],
            tags=[tag],
        )
        for i, spec in enumerate(scenario.agents)
    ]
    for user in range(len(scenario.admins)):
        user_id = ids[f"u{user}"]
        listed: dict[str, Any] = w.listed(user_id, tags=tag)
        readable = {}
        for agent_id, spec in zip(agents, scenario.agents, strict=True):
            response = w.call(user_id, "GET", f"{AGENTS}/{agent_id}")
            assert response.status_code in (200, 404), response.text
            scope = expected_scope(scenario, user, spec)
            assert (response.status_code == 200) == (scope is not None), (user_id, spec)
            if response.status_code == 200:
                readable[agent_id] = response.json()["my_share_scope"]
                assert readable[agent_id] == scope, (user_id, spec)
        assert {a: v["my_share_scope"] for a, v in listed.items()} == readable
        # The built-ins: everyone's to read and run, whoever they are and whatever they hold.
        builtins = w.listed(user_id, is_builtin="true")
        assert {a: v["my_share_scope"] for a, v in builtins.items()} == dict.fromkeys(
            BUILTIN_IDS, "grant"
        )
