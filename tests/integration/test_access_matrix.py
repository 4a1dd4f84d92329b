"""The access matrix (DESIGN.md section 2) as test data, checked over HTTP on both databases.

The world, built through the API by the admin (``user.admin``, which is no row below):

- markings M, N and K; K is held by every user below (it is what "mark" adds), M and N as the
  ``holds`` column of PRINCIPALS says;
- "shared" agents, owned by olivia and group.owners (gary), with grants: vera viewer, rita
  runner, eddie editor, group.viewers (gina) viewer, group.editors (which contains
  group.inner, which contains nina) editor;
- "public" agents, owned by public.all, with no grants;
- each in three variants: unmarked, marked M, marked M and N.

Actions: get, list (200: listed, 404: not listed), patch (a description), delete, grant
(viewer to a bystander), mark (add K), unmark (remove M). ``scope`` is the my_share_scope that
get and list show ("-": the agent is invisible).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from tests.integration.test_sharing_api import AGENTS, BUILDER, World

PRINCIPALS = """
user     admin  holds  member_of
olivia   no     M,N    -
gary     no     M      owners
vera     no     -      -
rita     no     M,N    -
eddie    no     M,N    -
gina     no     M,N    viewers
nina     no     M,N    inner
adam     yes    M      -
ursula   no     M,N    -
"""

MATRIX = """
user    agents        scope  get  list  patch  delete  grant  mark  unmark
olivia  shared        owner  200  200   200    204     201    200   404
olivia  shared+M      owner  200  200   200    204     201    200   200
olivia  shared+MN     owner  200  200   200    204     201    200   200
gary    shared        owner  200  200   200    204     201    200   404
gary    shared+M      owner  200  200   200    204     201    200   200
gary    shared+MN     -      404  404   404    404     404    404   404
vera    shared        grant  200  200   403    403     403    403   403
vera    shared+M      -      404  404   404    404     404    404   404
vera    shared+MN     -      404  404   404    404     404    404   404
rita    shared        grant  200  200   403    403     403    403   403
rita    shared+M      grant  200  200   403    403     403    403   403
rita    shared+MN     grant  200  200   403    403     403    403   403
eddie   shared        grant  200  200   200    403     403    403   403
eddie   shared+M      grant  200  200   200    403     403    403   403
eddie   shared+MN     grant  200  200   200    403     403    403   403
gina    shared        grant  200  200   403    403     403    403   403
gina    shared+M      grant  200  200   403    403     403    403   403
gina    shared+MN     grant  200  200   403    403     403    403   403
nina    shared        grant  200  200   200    403     403    403   403
nina    shared+M      grant  200  200   200    403     403    403   403
nina    shared+MN     grant  200  200   200    403     403    403   403
adam    shared        admin  200  200   200    204     201    403   403
adam    shared+M      admin  200  200   200    204     201    403   403
adam    shared+MN     -      404  404   404    404     404    404   404
ursula  shared        -      404  404   404    404     404    404   404
ursula  shared+M      -      404  404   404    404     404    404   404
ursula  shared+MN     -      404  404   404    404     404    404   404
ursula  public        owner  200  200   200    204     201    200   404
ursula  public+M      owner  200  200   200    204     201    200   200
ursula  public+MN     owner  200  200   200    204     201    200   200
vera    public        owner  200  200   200    204     201    200   404
vera    public+M      -      404  404   404    404     404    404   404
vera    public+MN     -      404  404   404    404     404    404   404
adam    public        owner  200  200   200    204     201    200   404
adam    public+M      owner  200  200   200    204     201    200   200
adam    public+MN     -      404  404   404    404     404    404   404
"""

ACTIONS = ("get", "list", "patch", "delete", "grant", "mark", "unmark")
MUTATING = frozenset({"delete", "mark", "unmark"})  # a success needs an agent of its own
BYSTANDER = "bystander"


def table(text: str) -> list[dict[str, str]]:
    lines = [line.split() for line in text.strip().splitlines()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


@dataclass(frozen=True)
class Kind:
    owners: tuple[str, ...]
    grants: tuple[tuple[str, str], ...]
    markings: tuple[str, ...]


class Matrix:
    def __init__(self, client: TestClient) -> None:
        self.w = w = World(client)
        self.names = itertools.count()
        people = table(PRINCIPALS)
        for row in people:
            w.user(row["user"], admin=row["admin"] == "yes")
        w.user(BYSTANDER)
        inner = w.group("inner")
        groups = {"owners": w.group("owners"), "viewers": w.group("viewers"), "inner": inner}
        groups["editors"] = w.group("editors", [inner])
        self.marks = {m: w.marking(m.lower()) for m in ("M", "N", "K")}
        for row in people:
            user_id = f"user.{row['user']}"
            if row["member_of"] != "-":
                w.join(groups[row["member_of"]], user_id)
            held = row["holds"].split(",") if row["holds"] != "-" else []
            for mark in (*held, "K"):
                w.hold(self.marks[mark], user_id)
        shared_grants = (
            ("user.vera", "viewer"),
            ("user.rita", "runner"),
            ("user.eddie", "editor"),
            (groups["viewers"], "viewer"),
            (groups["editors"], "editor"),
        )
        self.kinds: dict[str, Kind] = {}
        for suffix, marks in (("", ()), ("+M", ("M",)), ("+MN", ("M", "N"))):
            marking_ids = tuple(self.marks[m] for m in marks)
            shared = Kind(("user.olivia", groups["owners"]), shared_grants, marking_ids)
            self.kinds["shared" + suffix] = shared
            self.kinds["public" + suffix] = Kind(("public.all",), (), marking_ids)
        self.agents = {name: self.fresh(name) for name in self.kinds}

    def fresh(self, kind_name: str) -> str:
        kind = self.kinds[kind_name]
        return self.w.agent(
            f"agent-{next(self.names)}",
            owners=kind.owners,
            grants=dict(kind.grants),
            markings=kind.markings,
        )

    def act(self, user_id: str, action: str, agent_id: str) -> int:
        url = f"{AGENTS}/{agent_id}"
        call = self.w.call
        if action == "get":
            return int(call(user_id, "GET", url).status_code)
        if action == "patch":
            return int(call(user_id, "PATCH", url, {"description": f"by {user_id}"}).status_code)
        if action == "delete":
            return int(call(user_id, "DELETE", url).status_code)
        if action == "grant":
            body = {"principal_id": f"user.{BYSTANDER}", "scope": "viewer"}
            status = int(call(user_id, "POST", f"{url}/grants", body).status_code)
            if status == 201:  # undo, so that the next grant is new again
                assert call(BUILDER, "DELETE", f"{url}/grants/user.{BYSTANDER}").status_code == 204
            return status
        if action == "mark":
            body = {"marking_id": self.marks["K"]}
            return int(call(user_id, "POST", f"{url}/markings", body).status_code)
        assert action == "unmark"
        return int(call(user_id, "DELETE", f"{url}/markings/{self.marks['M']}").status_code)


def test_access_matrix(client: TestClient) -> None:
    m = Matrix(client)
    rows = table(MATRIX)
    assert {r["agents"] for r in rows} == set(m.kinds)
    lists: dict[str, dict[str, dict[str, Any]]] = {}
    wrong: list[str] = []
    for row in rows:
        user_id, kind = f"user.{row['user']}", row["agents"]
        agent_id = m.agents[kind]
        scope = None if row["scope"] == "-" else row["scope"]
        if user_id not in lists:
            lists[user_id] = m.w.listed(user_id)
        listed = lists[user_id].get(agent_id)
        for action in ACTIONS:
            expected = int(row[action])
            if action == "list":
                actual = 200 if listed is not None else 404
                if listed is not None and listed["my_share_scope"] != scope:
                    wrong.append(f"{user_id} list {kind}: scope {listed['my_share_scope']}")
            else:
                target = agent_id
                if action in MUTATING and expected < 300:
                    target = m.fresh(kind)
                actual = m.act(user_id, action, target)
            if actual != expected:
                wrong.append(f"{user_id} {action} {kind}: {actual}, expected {expected}")
        if scope is not None:
            got = m.w.call(user_id, "GET", f"{AGENTS}/{agent_id}").json()["my_share_scope"]
            if got != scope:
                wrong.append(f"{user_id} get {kind}: scope {got}, expected {scope}")
    assert wrong == []
    # Refused actions changed nothing: the world's agents are as built.
    for kind_name, agent_id in m.agents.items():
        built = m.kinds[kind_name]
        body = m.w.call(BUILDER, "GET", f"{AGENTS}/{agent_id}").json()
        assert sorted(o["id"] for o in body["owners"]) == sorted(built.owners)
        assert body["markings"] == sorted(built.markings)
        grants = m.w.call(BUILDER, "GET", f"{AGENTS}/{agent_id}/grants").json()["data"]
        assert sorted((g["principal_id"], g["scope"]) for g in grants) == sorted(built.grants)
