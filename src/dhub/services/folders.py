"""What is in a folder or collection (DESIGN.md 2.2), and each user's home folder. The
folders and collections themselves are resources like prompts (services/resources.py).

A listing shows exactly what the caller would be shown by a GET of each item: every
candidate goes through the one policy with the same rows a GET reads, so nothing hidden by a
marking or unshared appears, however it is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Integer, bindparam, select

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.services import placement
from dhub.services.cursors import decode_cursor, encode_cursor
from dhub.services.resources import ResourceService, ResourceView
from dhub.store import agents as agent_repo
from dhub.store import resources as repo
from dhub.store import tree
from dhub.store.db import Database
from dhub.store.tables import resource_ancestors

_A = resource_ancestors
_CHILDREN = (
    select(_A.c.resource_id)
    .where(
        _A.c.ancestor_id == bindparam("container"),
        _A.c.depth == 1,
        _A.c.resource_id > bindparam("after"),
    )
    .order_by(_A.c.resource_id)
    .limit(bindparam("limit", type_=Integer))
)
# The envelope of each item in a listing (the seed's, without the kind's own fields).
_SUMMARY = ("name", "alias", "category", "type", "collection_id", "folder_id", "tags",
            "description")  # fmt: skip


@dataclass(frozen=True)
class ChildPage:
    data: list[dict[str, Any]]
    next_cursor: str | None


class FolderService:
    def __init__(self, db: Database, resources: ResourceService) -> None:
        self.db = db
        self.resources = resources

    async def home(self, principal: Principal) -> ResourceView:
        """The caller's home folder (made now if it has none yet)."""
        async with self.db.write() as conn:
            folder_id = await placement.home_of(conn, principal.user_id)
        return await self.resources.get(principal, "folder", folder_id)

    async def children(
        self, principal: Principal, category: str, container_id: str, limit: int, cursor: str | None
    ) -> ChildPage:
        """What sits directly in the folder (or at the collection's top level) that the
        caller can see, by id, one page at a time."""
        after = decode_cursor(cursor) if cursor else ""
        view = await self.resources.get(principal, category, container_id)  # 404 unless visible
        home = placement.is_home(view.record)
        principals = sorted(principal.principal_ids)
        found: list[dict[str, Any]] = []
        window = limit + 1
        async with self.db.read(snapshot=True) as conn:
            while len(found) <= limit:
                if home:
                    ids = await tree.home_children(conn, container_id, after, window)
                else:
                    params = {"container": container_id, "after": after, "limit": window}
                    ids = [str(r[0]) for r in await conn.execute(_CHILDREN, params)]
                agent_ids = [i for i in ids if i.startswith("agent.")]
                rows: dict[str, Any] = dict(
                    await agent_repo.get_agents(conn, agent_ids, principals)
                )
                rows.update(await repo.get_resources(conn, set(ids) - set(agent_ids), principals))
                for child_id in ids:
                    item = _summary(principal, rows.get(child_id))
                    if item is not None and len(found) <= limit:
                        found.append(item)
                if len(ids) < window:
                    break
                after, window = ids[-1], window * 2  # what was hidden: look further
        more = len(found) > limit
        return ChildPage(found[:limit], encode_cursor(found[limit - 1]["id"]) if more else None)

    async def paths(self, principal: Principal, ids: Sequence[str]) -> dict[str, str]:
        """Where each folder or collection of ``ids`` that the caller can read is, by name
        from the top (``support/reports``, ``home/drafts``): the containers above it that
        the caller cannot read are one "…" each run. The others are left out, as ids that
        do not exist are."""
        wanted = {i for i in ids if i.startswith(("folder.", "collection."))}
        principals = sorted(principal.principal_ids)
        async with self.db.read(snapshot=True) as conn:
            above = await tree.chains(conn, wanted)
            rows = await repo.get_resources(conn, wanted.union(*above.values()), principals)
            # A home folder passes nothing down, so it is no one's ancestor in the tree: what
            # sits in one has it as the folder of the top of its chain.
            for folder_id in wanted:
                top = rows.get((above.get(folder_id) or [folder_id])[-1])
                if top is not None and top.record.folder_id is not None:
                    above.setdefault(folder_id, []).append(top.record.folder_id)
            homes = {c[-1] for c in above.values()} - set(rows)
            rows.update(await repo.get_resources(conn, homes, principals))
        readable = {i for i, row in rows.items() if _readable(principal, row)}
        found: dict[str, str] = {}
        for container_id in sorted(wanted & readable):
            names: list[str] = []
            for ancestor in reversed(above.get(container_id, [])):
                if ancestor in readable:
                    names.append(rows[ancestor].record.name)
                elif names[-1:] != [HIDDEN]:
                    names.append(HIDDEN)
            found[container_id] = "/".join([*names, rows[container_id].record.name])
        return found


HIDDEN = "…"  # in a path, containers the caller cannot read


def _readable(principal: Principal, row: repo.ResourceRow) -> bool:
    owners = [o["id"] for o in row.owners]
    own = orjson.loads(row.record.markings)
    return policy.access(principal, owners, row.grant, own, row.above) is not None


def _summary(
    principal: Principal, row: agent_repo.AgentRow | repo.ResourceRow | None
) -> dict[str, Any] | None:
    """The item as a listing shows it, or None when the caller may not see it."""
    if row is None:
        return None
    own = orjson.loads(row.record.markings)
    owners = [o["id"] for o in row.owners]
    seen = policy.access(principal, owners, row.grant, own, row.above)
    if seen is None:
        return None
    document = orjson.loads(row.record.document)
    item = {"id": row.record.id, **{k: document.get(k) for k in _SUMMARY}}
    item["category"] = document.get("category", "agent")
    return item | {
        "markings": own,
        "effective_markings": sorted({*own, *row.above.markings}),
        "owners": row.owners,
        "my_share_scope": seen.scope,
        "is_builtin": row.record.is_builtin,
        "created_at": row.record.created_at,
        "updated_at": row.record.updated_at,
        "version": row.record.version,
    }
