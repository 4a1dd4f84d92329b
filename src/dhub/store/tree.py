"""Where resources sit (DESIGN.md 2.2): the containers above each one (its folder, that
folder's folders up to the top, its collection) in the ``resource_ancestors`` closure table,
and what a caller inherits from them. Repositories flush; services commit.

A resource has one row per container above it (depth 1 is where it sits); one at the top has
none. Reading a chain or a subtree is then a single indexed lookup either way, and moving a
folder rewrites the rows of its subtree only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    union_all,
    update,
)

from dhub.store.db import Conn
from dhub.store.sharing import Reach, bump_epoch
from dhub.store.tables import (
    agent_versions,
    agents,
    resource_ancestors,
    resource_grants,
    resource_markings,
    resource_owners,
    resource_versions,
    resources,
)

_A = resource_ancestors
_RANK = {"viewer": 1, "runner": 2, "editor": 3}


@dataclass(frozen=True, slots=True)
class Inherited:
    """What a caller's principals get from the containers above one resource: whether one of
    them owns a container, the best scope granted on any, and every marking on any."""

    owned: bool = False
    grant: str | None = None
    markings: frozenset[str] = field(default_factory=frozenset)

    def best_grant(self, own: str | None) -> str | None:
        """The better of ``own`` and the inherited grant."""
        if own is None or _RANK.get(self.grant or "", 0) > _RANK[own]:
            return self.grant
        return own


NOTHING = Inherited()


def from_reach(reach: Reach, resource_id: str) -> Inherited:
    """What a caller inherits on a resource of its ``reach``, read from the reach alone: its
    owned and granted sets already hold what comes down the tree, and its marked_above the
    markings from above (the policy takes the better of a row's own and inherited access,
    so own ownership and grants counted here change nothing)."""
    return Inherited(
        resource_id in reach.owned,
        reach.grants.get(resource_id),
        reach.marked_above.get(resource_id, frozenset()),
    )


_CHAIN = (
    select(_A.c.ancestor_id, _A.c.depth)
    .where(_A.c.resource_id == bindparam("resource_id"))
    .order_by(_A.c.depth)
)


async def chain(conn: Conn, resource_id: str) -> list[str]:
    """The containers above ``resource_id``, nearest first."""
    return [row[0] for row in await conn.execute(_CHAIN, {"resource_id": resource_id})]


_CHAINS = (
    select(_A.c.resource_id, _A.c.ancestor_id)
    .where(_A.c.resource_id.in_(bindparam("ids", expanding=True)))
    .order_by(_A.c.resource_id, _A.c.depth)
)


async def chains(conn: Conn, ids: Collection[str]) -> dict[str, list[str]]:
    """The containers above each of ``ids``, nearest first (those at the top left out)."""
    found: dict[str, list[str]] = {}
    if ids:
        for resource_id, ancestor_id in await conn.execute(_CHAINS, {"ids": sorted(set(ids))}):
            found.setdefault(str(resource_id), []).append(str(ancestor_id))
    return found


async def place(conn: Conn, resource_id: str, parent_id: str | None) -> None:
    """Record a new resource under ``parent_id`` (its folder, or its collection when it sits
    at a collection's top level; None: at the top of everything)."""
    if parent_id is None:
        return
    above = [(parent_id, 1)] + [(a, d + 1) for a, d in await _chain_rows(conn, parent_id)]
    await conn.execute(
        insert(_A), [{"resource_id": resource_id, "ancestor_id": a, "depth": d} for a, d in above]
    )


async def _chain_rows(conn: Conn, resource_id: str) -> list[tuple[str, int]]:
    return [(str(a), int(d)) for a, d in await conn.execute(_CHAIN, {"resource_id": resource_id})]


_SUBTREE = select(_A.c.resource_id, _A.c.depth).where(_A.c.ancestor_id == bindparam("root"))


async def move(conn: Conn, resource_id: str, parent_id: str | None) -> None:
    """Hang ``resource_id`` (and, for a folder, everything below it) under ``parent_id``.
    The caller checked that ``parent_id`` is not inside ``resource_id``'s own subtree.
    Who reaches what changes with it: the access epoch moves on (store/sharing.py)."""
    await bump_epoch(conn)
    subtree = [(resource_id, 0)] + [
        (str(r), int(d)) for r, d in await conn.execute(_SUBTREE, {"root": resource_id})
    ]
    old = [a for a, _ in await _chain_rows(conn, resource_id)]
    members = [r for r, _ in subtree]
    if old:
        for start in range(0, len(members), 500):  # bounded IN lists
            await conn.execute(
                delete(_A).where(
                    _A.c.resource_id.in_(members[start : start + 500]), _A.c.ancestor_id.in_(old)
                )
            )
    if parent_id is None:
        return
    above = [(parent_id, 1)] + [(a, d + 1) for a, d in await _chain_rows(conn, parent_id)]
    rows = [
        {"resource_id": r, "ancestor_id": a, "depth": below + d}
        for r, below in subtree
        for a, d in above
    ]
    await conn.execute(insert(_A), rows)


async def below(conn: Conn, container_id: str) -> list[str]:
    """The ids of everything below the folder or collection, at any depth, visible or not."""
    return sorted(str(r[0]) for r in await conn.execute(_SUBTREE, {"root": container_id}))


_BATCH = 500  # bounded IN lists
# Each kind's table, its versions (and their id column) and its category.
_KINDS = (
    (agents, agent_versions, "agent_id", literal("agent")),
    (resources, resource_versions, "resource_id", resources.c.category),
)


async def recollect(
    conn: Conn, ids: Sequence[str], collection_id: str | None, actor_id: str, now: int
) -> list[tuple[str, str, int]]:
    """Put the resources of ``ids`` (what is below a folder that moves to another collection)
    in ``collection_id``: the column and the document, each as its next version, as a move
    of one resource stores it. Returns each one's (id, category, version it was)."""
    changed: list[tuple[str, str, int]] = []
    for table, versions, id_column, category in _KINDS:
        for start in range(0, len(ids), _BATCH):
            stmt = (
                select(table.c.id, category, table.c.version, table.c.document)
                .where(table.c.id.in_(ids[start : start + _BATCH]))
                .with_for_update()  # a patch of one of them in the meantime goes first
            )
            rows, history = [], []
            for resource_id, kind, version, document in await conn.execute(stmt):
                text = orjson.dumps({**orjson.loads(document), "collection_id": collection_id})
                row = {"b_id": resource_id, "b_version": version + 1, "b_document": text.decode()}
                rows.append(row)
                history.append({id_column: resource_id, "version": version + 1,
                                "document": row["b_document"], "created_by": actor_id,
                                "created_at": now})  # fmt: skip
                changed.append((str(resource_id), str(kind), int(version)))
            if rows:
                await conn.execute(_recollected(table, collection_id, now), rows)
                await conn.execute(insert(versions), history)
    return changed


def _recollected(table: Any, collection_id: str | None, now: int) -> Any:
    return (
        update(table)
        .where(table.c.id == bindparam("b_id"))
        .values(
            collection_id=collection_id,
            version=bindparam("b_version"),
            document=bindparam("b_document"),
            updated_at=now,
        )
    )


async def remove(conn: Conn, resource_id: str) -> None:
    """Forget where a deleted resource sat (a folder is deleted only when empty)."""
    await conn.execute(delete(_A).where(_A.c.resource_id == resource_id))


_CHILDREN = select(func.count()).where(_A.c.ancestor_id == bindparam("root"), _A.c.depth == 1)
_INSIDE = select(_A.c.resource_id).where(
    _A.c.resource_id == bindparam("inner"), _A.c.ancestor_id == bindparam("outer")
)


async def child_count(conn: Conn, container_id: str) -> int:
    """How many resources sit directly in the folder or collection (visible or not)."""
    return int((await conn.execute(_CHILDREN, {"root": container_id})).scalar() or 0)


async def count_in_home(conn: Conn, home_id: str) -> int:
    """How many resources sit in a home folder (home folders pass nothing down, so what is in
    one is found by its folder, not in the tree)."""
    total = 0
    for table in (agents, resources):
        stmt = select(func.count()).where(table.c.folder_key == home_id)
        total += int((await conn.execute(stmt)).scalar() or 0)
    return total


async def home_children(conn: Conn, home_id: str, after: str, limit: int) -> list[str]:
    """The ids of what sits in a home folder, in order, after ``after``."""
    found: list[str] = []
    for table in (agents, resources):
        stmt = (
            select(table.c.id)
            .where(table.c.folder_key == home_id, table.c.id > after)
            .order_by(table.c.id)
            .limit(limit)
        )
        found += [str(r[0]) for r in await conn.execute(stmt)]
    return sorted(found)[:limit]


async def is_inside(conn: Conn, inner: str, outer: str) -> bool:
    """Whether ``inner`` is ``outer`` or anywhere below it."""
    if inner == outer:
        return True
    found = await conn.execute(_INSIDE, {"inner": inner, "outer": outer})
    return found.first() is not None


_CONTAINERS: BindParameter[Any] = bindparam("containers", expanding=True)
_ABOVE = select(_A.c.resource_id, _A.c.ancestor_id).where(
    _A.c.resource_id.in_(bindparam("ids", expanding=True))
)
# What is on the containers themselves; few rows, each by its primary key's first column.
_RO, _RG, _RM = resource_owners.c, resource_grants.c, resource_markings.c
# Principals are matched here rather than in SQL: an IN list on both key columns made SQLite
# probe every (container, principal) pair.
_ON_CONTAINERS = union_all(
    select(_RO.resource_id, literal("o").label("what"), _RO.principal_id, literal(None))
    .where(_RO.resource_id.in_(_CONTAINERS)),
    select(_RG.resource_id, literal("g"), _RG.principal_id, _RG.scope)
    .where(_RG.resource_id.in_(_CONTAINERS)),
    select(_RM.resource_id, literal("m"), literal(None), _RM.marking_id)
    .where(_RM.resource_id.in_(_CONTAINERS)),
)  # fmt: skip


async def inherited(
    conn: Conn, ids: Collection[str], principals: Sequence[str]
) -> dict[str, Inherited]:
    """What ``principals`` inherit on each of ``ids`` (those that inherit nothing are left
    out): the containers above them, then what is on those (two indexed lookups; one when
    nothing is in a folder)."""
    if not ids:
        return {}
    above: dict[str, list[str]] = {}
    for resource_id, ancestor_id in await conn.execute(_ABOVE, {"ids": sorted(set(ids))}):
        above.setdefault(ancestor_id, []).append(resource_id)
    if not above:
        return {}
    owned: set[str] = set()
    grants: dict[str, str] = {}
    marks: dict[str, set[str]] = {}
    mine = set(principals)
    params = {"containers": sorted(above)}
    for container, what, who, value in await conn.execute(_ON_CONTAINERS, params):
        if what != "m" and who not in mine:
            continue
        for resource_id in above[container]:
            if what == "o":
                owned.add(resource_id)
            elif what == "g":
                if _RANK[value] > _RANK.get(grants.get(resource_id, ""), 0):
                    grants[resource_id] = value
            else:
                marks.setdefault(resource_id, set()).add(value)
    return {
        r: Inherited(r in owned, grants.get(r), frozenset(marks.get(r, ())))
        for r in owned | set(grants) | set(marks)
    }


def carries_unheld(id_column: Any, held: BindParameter[Any]) -> ColumnElement[bool]:
    """SQL: the resource of ``id_column`` carries a marking outside ``held``, itself or on a
    container above it."""
    rm = resource_markings
    own = select(rm.c.resource_id).where(
        rm.c.resource_id == id_column, rm.c.marking_id.not_in(held)
    )
    above = (
        select(_A.c.resource_id)
        .select_from(_A.join(rm, rm.c.resource_id == _A.c.ancestor_id))
        .where(_A.c.resource_id == id_column, rm.c.marking_id.not_in(held))
    )
    return or_(own.exists(), above.exists())
