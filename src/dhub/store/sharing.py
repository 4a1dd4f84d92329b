"""Who owns and who was granted what: owners, grants and markings of resources, and the access
epoch that lets callers cache what a set of principals can reach.

Every change to owners, grants or markings bumps the epoch in the same transaction, so a cached
set of reachable ids keyed by (principals, held markings, epoch) is never stale: the next reader
sees a new epoch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import (
    String,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    true,
    union,
    union_all,
    update,
)

from dhub.store.db import Conn
from dhub.store.tables import (
    access_epoch,
    agents,
    groups,
    marking_history,
    resource_ancestors,
    resource_grants,
    resource_markings,
    resource_owners,
    resources,
    users,
)

_EPOCH = select(access_epoch.c.epoch).where(access_epoch.c.id == 1)


async def read_epoch(conn: Conn) -> int:
    """The current access epoch (bumped by every owner or grant change)."""
    epoch = (await conn.execute(_EPOCH)).scalar()
    return int(epoch or 0)


async def bump_epoch(conn: Conn) -> None:
    await conn.execute(
        update(access_epoch).where(access_epoch.c.id == 1).values(epoch=access_epoch.c.epoch + 1)
    )


_OWNED_OR_GRANTED = union_all(
    select(resource_owners.c.resource_id, literal(None, String).label("scope")).where(
        resource_owners.c.principal_id.in_(bindparam("principals", expanding=True))
    ),
    select(resource_grants.c.resource_id, resource_grants.c.scope).where(
        resource_grants.c.principal_id.in_(bindparam("principals", expanding=True))
    ),
).subquery()
# Each resource owned or granted, and everything below it when it is a folder or collection
# (DESIGN.md 2.2: access is inherited down the tree), with the scope (NULL: owned).
_REACH = union_all(
    select(_OWNED_OR_GRANTED.c.resource_id, _OWNED_OR_GRANTED.c.scope),
    select(resource_ancestors.c.resource_id, _OWNED_OR_GRANTED.c.scope).select_from(
        _OWNED_OR_GRANTED.join(
            resource_ancestors, resource_ancestors.c.ancestor_id == _OWNED_OR_GRANTED.c.resource_id
        )
    ),
)
# The built-in agents, which every caller reads (access/policy.py): not owned, not granted.
_BUILTINS = select(agents.c.id).where(agents.c.is_builtin == true())  # "=": ix_agents_builtin
_RANK = {"viewer": 1, "runner": 2, "editor": 3}


def _marked(held: Collection[str]) -> Any:
    """Every resource carrying a marking outside ``held``, itself or on a container above it
    (markings are inherited down the tree too)."""
    own = select(resource_markings.c.resource_id)
    below = select(resource_ancestors.c.resource_id).select_from(
        resource_markings.join(
            resource_ancestors, resource_ancestors.c.ancestor_id == resource_markings.c.resource_id
        )
    )
    if held:
        own = own.where(resource_markings.c.marking_id.not_in(list(held)))
        below = below.where(resource_markings.c.marking_id.not_in(list(held)))
    return union(own, below)


@dataclass(frozen=True, slots=True)
class Reach:
    """What a caller can see through its principals: the sorted ids of the resources they own
    or were granted, themselves or through a folder or collection above them (and the
    built-in agents, when asked), and whose every marking (inherited ones included) the
    caller holds; the best scope granted on each granted one, and which are owned."""

    ids: list[str]
    grants: dict[str, str]
    owned: frozenset[str] = frozenset()
    # The markings each reachable resource inherits from the containers above it (all held:
    # anything carrying an unheld one is not reachable), so a page read from the reach needs
    # no look up the tree (store/tree.py from_reach).
    marked_above: dict[str, frozenset[str]] = field(default_factory=dict)


async def reach_of(
    conn: Conn, principals: Sequence[str], held: Collection[str], builtins: bool = False
) -> Reach:
    """Collected over the principal-first indexes (probing each principal per agent scanned
    made a checked list page 17x slower than an unchecked one). ``builtins``: the built-in
    agents count too (every caller reads them; access/policy.py)."""
    ids: set[str] = set()
    owned: set[str] = set()
    grants: dict[str, str] = {}
    for resource_id, scope in await conn.execute(_REACH, {"principals": list(principals)}):
        ids.add(resource_id)
        if scope is None:
            owned.add(resource_id)
        elif _RANK[scope] > _RANK.get(grants.get(resource_id, ""), 0):
            grants[resource_id] = scope
    if builtins:
        ids.update(str(r[0]) for r in await conn.execute(_BUILTINS))
    hidden = {str(r[0]) for r in await conn.execute(_marked(held))}
    above: dict[str, set[str]] = {}
    if held:
        for resource_id, marking_id in await conn.execute(_MARKED_ABOVE, {"held": list(held)}):
            if resource_id in ids:
                above.setdefault(resource_id, set()).add(marking_id)
    return Reach(
        sorted(ids - hidden),
        grants,
        frozenset(owned - hidden),
        {r: frozenset(m) for r, m in above.items() if r not in hidden},
    )


# Held markings on containers, with each resource below them.
_MARKED_ABOVE = (
    select(resource_ancestors.c.resource_id, resource_markings.c.marking_id)
    .select_from(
        resource_markings.join(
            resource_ancestors, resource_ancestors.c.ancestor_id == resource_markings.c.resource_id
        )
    )
    .where(resource_markings.c.marking_id.in_(bindparam("held", expanding=True)))
)


async def marked_beyond(conn: Conn, held: Collection[str]) -> list[str]:
    """Resources carrying a marking outside ``held``, themselves or above them: hidden from a
    caller holding ``held``, admins included (DESIGN.md 2)."""
    return sorted({str(r[0]) for r in await conn.execute(_marked(held))})


class ReachCache:
    """What a caller can reach, remembered per access epoch.

    A caller in many groups reaches its agents through many owner and grant rows; collecting
    them was most of a checked list page. The epoch changes with every change of owners,
    grants or markings, so an entry is only ever used while it is exact. The key holds the
    caller's principals and held markings, so membership changes are new keys. Held per
    process (by the service).
    """

    def __init__(self, max_entries: int = 256) -> None:
        self._max_entries = max_entries
        self._entries: dict[tuple[tuple[str, ...], tuple[str, ...], bool, int], Reach] = {}

    async def get(
        self, conn: Conn, principals: Sequence[str], held: Sequence[str], builtins: bool = False
    ) -> Reach:
        """Read ``conn`` in a snapshot, so that the epoch and the page agree. Installing a
        built-in bumps the epoch too (services/builtins.py)."""
        key = (tuple(principals), tuple(held), builtins, await read_epoch(conn))
        found = self._entries.get(key)
        if found is None:
            found = await reach_of(conn, principals, held, builtins)
            if len(self._entries) >= self._max_entries:
                self._entries.clear()  # entries of older epochs are dead anyway
            self._entries[key] = found
        return found


async def add_owners(conn: Conn, resource_id: str, principals: Sequence[str]) -> None:
    await bump_epoch(conn)
    await conn.execute(
        insert(resource_owners),
        [{"resource_id": resource_id, "principal_id": p} for p in principals],
    )


async def replace_owners(conn: Conn, resource_id: str, principals: Sequence[str]) -> None:
    """Make ``principals`` the resource's owners (the service checks at least one remains)."""
    await conn.execute(delete(resource_owners).where(resource_owners.c.resource_id == resource_id))
    await add_owners(conn, resource_id, principals)


@dataclass(frozen=True, slots=True)
class GrantRecord:
    principal_id: str
    scope: str
    display_name: str | None  # the user's or group's, when the principal is one


_LIST_GRANTS = (
    select(
        resource_grants.c.principal_id,
        resource_grants.c.scope,
        func.coalesce(users.c.display_name, groups.c.display_name),
    )
    .select_from(
        resource_grants.outerjoin(users, users.c.id == resource_grants.c.principal_id).outerjoin(
            groups, groups.c.id == resource_grants.c.principal_id
        )
    )
    .where(resource_grants.c.resource_id == bindparam("resource_id"))
    .order_by(resource_grants.c.principal_id)
)
_GET_GRANT = select(resource_grants.c.scope).where(
    resource_grants.c.resource_id == bindparam("resource_id"),
    resource_grants.c.principal_id == bindparam("principal_id"),
)


async def list_grants(conn: Conn, resource_id: str) -> list[GrantRecord]:
    """The resource's grants, by principal id."""
    rows = await conn.execute(_LIST_GRANTS, {"resource_id": resource_id})
    return [GrantRecord(*r) for r in rows]


async def get_grant(conn: Conn, resource_id: str, principal_id: str) -> str | None:
    """The scope granted to exactly ``principal_id`` (not through groups), if any."""
    params = {"resource_id": resource_id, "principal_id": principal_id}
    scope: str | None = (await conn.execute(_GET_GRANT, params)).scalar()
    return scope


async def set_grant(conn: Conn, resource_id: str, principal_id: str, scope: str) -> None:
    """Grant ``scope``, replacing any scope the principal had (one grant per principal)."""
    await delete_grant(conn, resource_id, principal_id)
    await conn.execute(
        insert(resource_grants).values(
            resource_id=resource_id, principal_id=principal_id, scope=scope
        )
    )


async def delete_grant(conn: Conn, resource_id: str, principal_id: str) -> None:
    await bump_epoch(conn)
    await conn.execute(
        delete(resource_grants).where(
            resource_grants.c.resource_id == resource_id,
            resource_grants.c.principal_id == principal_id,
        )
    )


async def set_markings(conn: Conn, agent_id: str, marking_ids: Sequence[str]) -> str:
    """Make ``marking_ids`` the resource's markings, in resource_markings (which lists filter
    on) and in the ``markings`` column of its row (the sorted JSON list responses render: in
    ``agents`` for an agent, else in ``resources``), in the caller's transaction; returns that
    JSON."""
    unique = sorted(set(marking_ids))
    await conn.execute(delete(resource_markings).where(resource_markings.c.resource_id == agent_id))
    if unique:
        await conn.execute(
            insert(resource_markings),
            [{"resource_id": agent_id, "marking_id": m} for m in unique],
        )
        await _remember(conn, agent_id, unique)
    stored = orjson.dumps(unique).decode()
    table = agents if agent_id.startswith("agent.") else resources
    await conn.execute(update(table).where(table.c.id == agent_id).values(markings=stored))
    await bump_epoch(conn)
    return stored


async def _remember(conn: Conn, resource_id: str, marking_ids: Sequence[str]) -> None:
    """Add the markings to the resource's marking history (see tables.marking_history)."""
    had = select(marking_history.c.marking_id).where(marking_history.c.resource_id == resource_id)
    known = {str(r[0]) for r in await conn.execute(had)}
    new = [m for m in marking_ids if m not in known]
    if new:
        rows = [{"resource_id": resource_id, "marking_id": m} for m in new]
        await conn.execute(insert(marking_history), rows)


async def solely_owned_by(conn: Conn, principal_id: str, limit: int = 5) -> list[str]:
    """Resources (agents, prompts, tools, ...) whose only owner is ``principal_id`` (deleting
    it would orphan them)."""
    mine = resource_owners.alias("mine")
    others = (
        select(resource_owners.c.resource_id)
        .where(
            resource_owners.c.resource_id == mine.c.resource_id,
            resource_owners.c.principal_id != principal_id,
        )
        .exists()
    )
    stmt = (
        select(mine.c.resource_id)
        .where(mine.c.principal_id == principal_id, ~others)
        .order_by(mine.c.resource_id)
        .limit(limit)
    )
    return [row[0] for row in await conn.execute(stmt)]


async def forget_principal(conn: Conn, principal_id: str) -> None:
    """Remove a deleted principal from every resource's owners and grants."""
    await bump_epoch(conn)
    await conn.execute(
        delete(resource_owners).where(resource_owners.c.principal_id == principal_id)
    )
    await conn.execute(
        delete(resource_grants).where(resource_grants.c.principal_id == principal_id)
    )
