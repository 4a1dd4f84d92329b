"""Listing equals filtering by get (issue 18): for random trees of collections and folders,
random grants and markings anywhere in them, every user's agent list and every folder's
children are exactly what that user may GET, one by one."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_sharing_api import World, ok, react

API = "/api/v1"
_RUN = itertools.count()
SCOPES = ("viewer", "runner", "editor")


@dataclass
class Plan:
    """Containers as (parent index or None); agents as parent index; grants and markings as
    (container index, user index or marking index)."""

    folders: list[int | None]
    agents: list[int]
    grants: list[tuple[int, int, str]]
    marks: list[int]
    agent_grants: list[tuple[int, int, str]] = field(default_factory=list)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(1, 5))
    folders: list[int | None] = [None]  # folder 0 sits at the collection's top level
    for i in range(1, n):
        folders.append(draw(st.one_of(st.none(), st.integers(0, i - 1))))
    agents = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    grant = st.tuples(st.integers(-1, n - 1), st.integers(0, 2), st.sampled_from(SCOPES))
    grants = draw(st.lists(grant, max_size=4))  # container -1: the collection
    marks = draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True))
    on_agents = draw(st.lists(st.tuples(st.integers(0, len(agents) - 1), st.integers(0, 2),
                                        st.sampled_from(SCOPES)), max_size=2))  # fmt: skip
    return Plan(folders, agents, grants, marks, on_agents)


def _all_pages(w: World, user: str, url: str) -> list[str]:
    return [item["id"] for item in _all_items(w, user, url)]


def _all_items(w: World, user: str, url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        sep = "&" if "?" in url else "?"
        page = ok(
            w.call(
                user, "GET", url + (f"{sep}limit=3&cursor={cursor}" if cursor else f"{sep}limit=3")
            )
        )
        items += page["data"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=plans())
def test_listing_equals_filtering_by_get(client: TestClient, plan: Plan) -> None:
    run = next(_RUN)
    w = World(client)
    owner = w.user(f"own{run}")
    users = [w.user(f"u{run}x{i}") for i in range(2)]
    team = w.group(f"team{run}", [users[1]])
    principals = [users[0], team, users[1]]
    marking = w.marking(f"m{run}", [owner, users[0]])  # users[1] does not hold it

    def make(plural: str, body: dict[str, Any]) -> str:
        made: str = ok(w.call(owner, "POST", f"{API}/{plural}", body), 201)["id"]
        return made

    collection = make("collections", {"name": f"c{run}"})
    folders: list[str] = []
    for i, parent in enumerate(plan.folders):
        where = (
            {"folder_id": folders[parent]} if parent is not None else {"collection_id": collection}
        )
        folders.append(make("folders", {"name": f"f{i}", **where}))
    agents = [
        make("agents", react(f"a{i}", folder_id=folders[p])) for i, p in enumerate(plan.agents)
    ]
    for index, who, scope in plan.grants:
        target = f"collections/{collection}" if index < 0 else f"folders/{folders[index]}"
        body = {"principal_id": principals[who], "scope": scope}
        assert w.call(owner, "POST", f"{API}/{target}/grants", body).status_code in (200, 201)
    for index, who, scope in plan.agent_grants:
        body = {"principal_id": principals[who], "scope": scope}
        assert w.call(owner, "POST", f"{API}/agents/{agents[index]}/grants", body).status_code in (
            200,
            201,
        )
    for index in plan.marks:
        ok(
            w.call(
                owner, "POST", f"{API}/folders/{folders[index]}/markings", {"marking_id": marking}
            )
        )

    mine = set(agents) | set(folders)
    for user in (*users, owner):
        got = {a: w.call(user, "GET", f"{API}/agents/{a}") for a in agents}
        gettable = {a: r.json() for a, r in got.items() if r.status_code == 200}
        listed = {i["id"]: i for i in _all_items(w, user, f"{API}/agents") if i["id"] in mine}
        assert set(listed) == set(gettable)
        for a, item in listed.items():  # what comes down the tree, as a GET tells it
            for name in ("my_share_scope", "effective_markings", "owners"):
                assert item[name] == gettable[a][name], (a, name)
        for folder in folders:
            if w.call(user, "GET", f"{API}/folders/{folder}").status_code != 200:
                assert w.call(user, "GET", f"{API}/folders/{folder}/children").status_code == 404
                continue
            inside = [a for a, p in zip(agents, plan.agents, strict=True) if folders[p] == folder]
            inside += [
                f
                for f, p in zip(folders, plan.folders, strict=True)
                if p is not None and folders[p] == folder
            ]
            shown = {
                f
                for f in inside
                if w.call(user, "GET", f"{API}/{f.split('.')[0]}s/{f}").status_code == 200
            }
            assert set(_all_pages(w, user, f"{API}/folders/{folder}/children")) == shown
