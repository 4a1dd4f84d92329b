"""Pages of agents as a caller sees them, and the per-process cache of their rendered bytes
(rendered.py): what AgentService.page and page_rendered do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.services.cursors import decode_cursor, encode_cursor
from dhub.services.rendered import RenderedCache
from dhub.store import agents as repo
from dhub.store import sharing as shares
from dhub.store.db import Database
from dhub.store.tree import NOTHING, Inherited


@dataclass(frozen=True, slots=True)
class AgentView:
    """A stored agent as one caller sees it: the API renders it (api/render.py)."""

    record: repo.AgentRecord
    owners: list[dict[str, Any]]
    scope: policy.ShareScope | None
    above: Inherited = NOTHING  # inherited from its folders and collection

    @property
    def effective_markings(self) -> list[str]:
        """Its own markings and those of every folder and its collection above it."""
        return sorted({*orjson.loads(self.record.markings), *self.above.markings})


@dataclass(frozen=True)
class Page:
    data: list[AgentView]
    next_cursor: str | None


class AgentLists:
    def __init__(self, db: Database, reach: shares.ReachCache, list_cache_mb: int = 0) -> None:
        self.db = db
        self._reach = reach
        # List items as rendered for a caller (``page_rendered``); None: not kept.
        self._rendered = RenderedCache(list_cache_mb << 20) if list_cache_mb > 0 else None

    async def page(
        self,
        principal: Principal,
        flt: repo.AgentFilter,
        limit: int,
        cursor: str | None,
        action: policy.Action = "read",
    ) -> Page:
        """A page of the agents the caller may read; ``action``: only those it may also do
        that with (such a page may hold fewer than ``limit`` and still have a next one)."""
        after = decode_cursor(cursor) if cursor else None
        visible = policy.visible_agents(principal)
        async with self.db.read(snapshot=visible.restricted) as conn:
            reach = None
            if visible.restricted:
                held = visible.held_markings or ()
                reach = await self._reach.get(conn, visible.principals, held, visible.builtins)
            found = await repo.list_agents(conn, flt, visible, after, limit + 1, reach)
        data = []
        for row in found[:limit]:  # the SQL filter already left only what the caller may see
            view, seen = view_of(principal, row)
            if action != "read" and not (seen and seen.allows(action)):
                continue
            data.append(view)
        next_cursor = encode_cursor(found[limit - 1].record.id) if len(found) > limit else None
        return Page(data, next_cursor)

    async def page_rendered(
        self,
        principal: Principal,
        flt: repo.AgentFilter,
        limit: int,
        cursor: str | None,
        render: Callable[[AgentView], bytes],
    ) -> tuple[list[bytes], str | None]:
        """``page`` (for reading) with each agent ``render``ed, and its next cursor; the bytes
        come from this process's cache when the caller, the agent's Marker and the access
        epoch are those they were rendered for (bench/api_latency.py: reading and rendering
        the documents was most of a list's time).

        Whatever renders differently moves one of those: a new version of the document (its
        name, folder, tags...), and the epoch, which every change of owners,
        grants, markings, the folder tree, or a user's or group's profile bumps in its own
        transaction. The caller (its groups and markings too) decides its share scope. The
        access conditions stay in SQL: the Markers come from the statement ``page`` runs,
        conditions and all, and only what it returns is looked up. One snapshot holds the
        epoch, the Markers and any reread, so a key never names a state its bytes are not."""
        if self._rendered is None:
            page = await self.page(principal, flt, limit, cursor)
            return [render(view) for view in page.data], page.next_cursor
        cache = self._rendered
        after = decode_cursor(cursor) if cursor else None
        visible = policy.visible_agents(principal)
        async with self.db.read(snapshot=True) as conn:
            epoch = await shares.read_epoch(conn)
            reach = None
            if visible.restricted:
                held = visible.held_markings or ()
                reach = await self._reach.get(conn, visible.principals, held, visible.builtins)
            marks = await repo.list_markers(conn, flt, visible, after, limit + 1, reach)
            caller = cache.caller((principal, epoch))
            items = cache.get_all(caller, marks[:limit])
            if items is None:  # read and render the page; keep each agent's bytes
                found = await repo.list_agents(conn, flt, visible, after, limit + 1, reach)
                marks = [_marker(row.record) for row in found]
                items = []
                for row, mark in zip(found[:limit], marks, strict=False):
                    body = render(view_of(principal, row)[0])
                    cache.put((caller, *mark), body)
                    items.append(body)
        next_cursor = encode_cursor(marks[limit - 1][0]) if len(marks) > limit else None
        return items, next_cursor


def view_of(principal: Principal, row: repo.AgentRow) -> tuple[AgentView, policy.Access | None]:
    """A listed agent as the caller sees it, and the caller's access (the list's SQL already
    left only what it may see)."""
    owner_ids = [o["id"] for o in row.owners]
    builtin = row.record.is_builtin
    seen = policy.access(principal, owner_ids, row.grant, (), row.above, builtin=builtin)
    scope = seen.scope if seen else None
    return AgentView(row.record, row.owners, scope, row.above), seen


def _marker(record: repo.AgentRecord) -> repo.Marker:
    return (record.id, record.version, record.updated_at)
