"""Where a resource goes when it is created or moved (DESIGN.md 2.2), decided for the acting
user inside the caller's transaction.

- In a folder (``folder_id``): the user must be able to edit the folder; the resource is then
  in the folder's collection (a different ``collection_id`` is an error).
- At a collection's top level (``collection_id`` alone): the user must be able to edit it.
- Neither: the user's home folder, which is made the first time it is needed.

A folder or collection the user cannot edit gets the one reference message (``unreachable``),
word for word the same as for one that does not exist. Moving also changes who inherits
access, so it takes what sharing takes (an owner or an admin), and taking a resource out from
under a marking takes what removing the marking takes (an owner who holds it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from sqlalchemy import select

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.agent import AgentSpec
from dhub.domain.errors import FieldError, Forbidden, InvalidInput
from dhub.domain.ids import new_id, now_ms
from dhub.domain.resources import HOME, ResourceSpec, unreachable
from dhub.services.references import UNREACHABLE
from dhub.store import agents as agent_repo
from dhub.store import audit, tree
from dhub.store import resources as repo
from dhub.store import sharing as shares
from dhub.store.agents import AgentRow
from dhub.store.db import Conn
from dhub.store.tables import resources, users

HOME_KEY = "home:"  # the folder_key of a home folder: one per user, whatever its name


@dataclass(frozen=True, slots=True)
class Placement:
    folder_id: str | None
    collection_id: str | None
    home: bool = False  # the folder is a home folder
    # What something placed here inherits: the markings on its container and above it.
    markings: frozenset[str] = frozenset()

    @property
    def parent(self) -> str | None:
        """The container the resource hangs under in the tree, from which it inherits. A home
        folder is a place, not a way to share: it passes nothing down (what its user gave
        away stays given away), so what sits in one hangs under nothing."""
        return None if self.home else self.folder_id or self.collection_id

    @property
    def key(self) -> str:
        """Where its name must be unique (the folder_key column)."""
        return self.folder_id or self.collection_id or ""


NOWHERE = Placement(None, None)
_Spec = TypeVar("_Spec", AgentSpec, ResourceSpec)


def placed(spec: _Spec, to: Placement) -> _Spec:
    """``spec`` (an agent's or a resource's document) where ``to`` puts it."""
    return spec.model_copy(
        update={"folder_id": to.folder_id, "collection_id": to.collection_id}
    )  # collections, and home folders themselves


async def home_of(conn: Conn, user_id: str) -> str:
    """The id of the user's home folder, made now if the user has none yet."""
    key = HOME_KEY + user_id
    stmt = select(resources.c.id).where(
        resources.c.category == "folder", resources.c.folder_key == key
    )
    found: str | None = (await conn.execute(stmt)).scalar()
    if found is not None:
        return found
    name = (await conn.execute(select(users.c.display_name).where(users.c.id == user_id))).scalar()
    folder_id, now = new_id("folder"), now_ms()
    alias = f"{name or user_id}'s home"
    document = orjson.dumps(
        {"name": "home", "alias": alias, "category": "folder", "type": HOME,
         "collection_id": None, "folder_id": None, "tags": None, "description": ""}
    ).decode()  # fmt: skip
    await repo.insert_resource(
        conn,
        {
            "id": folder_id, "category": "folder", "name": "home", "folder_key": key,
            "folder_id": None, "collection_id": None, "alias": alias, "description": "",
            "type": HOME, "version": 1, "document": document, "is_builtin": False,
            "created_by": user_id, "created_at": now, "updated_at": now,
        },
    )  # fmt: skip
    await repo.insert_version(conn, folder_id, 1, document, user_id, now)
    await shares.add_owners(conn, folder_id, [user_id])
    return folder_id


async def drop_home(conn: Conn, user_id: str) -> None:
    """Delete the user's home folder with the user, when nothing is left in it (otherwise the
    user is the only owner of it, and deleting the user is refused as for anything else)."""
    stmt = select(resources.c.id).where(
        resources.c.category == "folder", resources.c.folder_key == HOME_KEY + user_id
    )
    found: str | None = (await conn.execute(stmt)).scalar()
    if found is not None and not await tree.count_in_home(conn, found):
        await repo.delete_resource(conn, found)


def is_home(record: repo.ResourceRecord) -> bool:
    return record.category == "folder" and orjson.loads(record.document).get("type") == HOME


async def _container(
    conn: Conn, principal: Principal, category: str, container_id: str, loc: str
) -> tuple[repo.ResourceRecord, frozenset[str]]:
    """The folder or collection, when the principal may put things in it (edit), and the
    markings what is put in it inherits; InvalidInput naming ``loc`` otherwise."""
    rows = await repo.get_resources(conn, [container_id], sorted(principal.principal_ids))
    row = rows.get(container_id)
    if row is not None and row.record.category == category:
        owners = [o["id"] for o in row.owners]
        markings = orjson.loads(row.record.markings)
        seen = policy.access(principal, owners, row.grant, markings, row.above)
        if seen is not None and seen.allows("edit"):
            return row.record, frozenset({*markings, *row.above.markings})
    raise InvalidInput([FieldError(loc, unreachable(category, container_id), UNREACHABLE)])


async def resolve(
    conn: Conn,
    principal: Principal,
    category: str,
    folder_id: str | None,
    collection_id: str | None,
) -> Placement:
    """Where a resource of ``category`` asked to go to (``folder_id``, ``collection_id``)
    goes, for ``principal``; InvalidInput naming the field when it cannot go there."""
    if category == "collection":
        return NOWHERE
    if folder_id is not None:
        record, marked = await _container(conn, principal, "folder", folder_id, "/folder_id")
        document = orjson.loads(record.document)
        holds: str | None = document.get("collection_id")
        if collection_id is not None and collection_id != holds:
            where = f"collection '{holds}'" if holds else "no collection"
            hint = f"set it to '{holds}'" if holds else "set it to null"
            message = (
                f"Folder '{folder_id}' is in {where}: leave collection_id out, or {hint}; "
                "to put it in another collection, choose a folder of that collection."
            )
            raise InvalidInput([FieldError("/collection_id", message, "folder_collection")])
        if document.get("type") == HOME:  # passes nothing down
            return Placement(folder_id, holds, home=True)
        return Placement(folder_id, holds, markings=marked)
    if collection_id is not None:
        loc = "/collection_id"
        _, marked = await _container(conn, principal, "collection", collection_id, loc)
        return Placement(None, collection_id, markings=marked)
    return Placement(await home_of(conn, principal.user_id), None, home=True)


async def moved(
    conn: Conn,
    principal: Principal,
    found: AgentRow | repo.ResourceRow,
    kind: str,
    current: dict[str, Any],
    spec: _Spec,
    patch: dict[str, Any],
) -> tuple[_Spec, Placement | None]:
    """A patched document placed, and where the patch moves it (checked), if it does. A
    patch naming only ``folder_id`` takes the folder's collection; one naming only a new
    ``collection_id`` goes to that collection's top level."""
    was = (current.get("folder_id"), current.get("collection_id"))
    folder_id, collection_id = spec.folder_id, spec.collection_id
    if (folder_id, collection_id) == was:
        return spec, None
    if "collection_id" not in patch:
        collection_id = None
    elif "folder_id" not in patch:
        folder_id = None
    to = await resolve(conn, principal, kind, folder_id, collection_id)
    if (to.folder_id, to.collection_id) == was:
        return placed(spec, to), None
    await check_move(conn, principal, found, kind, to)
    return placed(spec, to), to


async def check_move(
    conn: Conn, principal: Principal, row: AgentRow | repo.ResourceRow, kind: str, to: Placement
) -> None:
    """What moving a resource to ``to`` takes beyond editing it: sharing (it changes who
    inherits access), an owner holding the markings it would leave behind, and for a folder
    a destination outside itself, and the same for everything in it: no one moves, in a
    folder, what they could not move one by one."""
    record, above = row.record, row.above
    owners, own = [o["id"] for o in row.owners], orjson.loads(record.markings)
    found = policy.require(principal, "share", record.id, owners, row.grant, own, kind, above)
    folder = kind == "folder"
    if folder and to.parent is not None and await tree.is_inside(conn, to.parent, record.id):
        raise InvalidInput(
            [FieldError("/folder_id", "A folder cannot move into itself or into a folder "
                        "inside it: choose a folder outside it.", "folder_cycle")]
        )  # fmt: skip
    left = above.markings - to.markings
    if left and not found.allows("unmark"):
        raise Forbidden(
            f"Moving '{record.id}' out from under the marking(s) {', '.join(sorted(left))} "
            "would remove them from it: that needs an owner who holds them."
        )
    if folder:
        await _check_inside(conn, principal, record.id, "unmark" if left else "share")


async def _check_inside(
    conn: Conn, principal: Principal, folder_id: str, needs: policy.Action
) -> None:
    """Forbidden unless the principal could move each thing below the folder itself (``needs``
    on each: "share", or "unmark" when the move leaves markings behind), saying nothing of
    what it could not: some of it may be hidden from the principal."""
    principals = sorted(principal.principal_ids)
    below = await tree.below(conn, folder_id)
    for start in range(0, len(below), 500):
        ids = below[start : start + 500]
        agent_ids = [i for i in ids if i.startswith("agent.")]
        rows: list[AgentRow | repo.ResourceRow] = [
            *(await agent_repo.get_agents(conn, agent_ids, principals)).values(),
            *(await repo.get_resources(conn, set(ids) - set(agent_ids), principals)).values(),
        ]
        for row in rows:
            owners, own = [o["id"] for o in row.owners], orjson.loads(row.record.markings)
            found = policy.access(
                principal, owners, row.grant, own, row.above, builtin=row.record.is_builtin
            )
            if found is None or not found.allows(needs):
                raise Forbidden(
                    f"Folder '{folder_id}' holds something you could not move yourself (hidden "
                    "from you, or not yours to share), and it would move with the folder: move "
                    "what you can out of it, or ask someone who can see and share all of it."
                )


async def move(
    conn: Conn, principal: Principal, resource_id: str, was: str | None, to: Placement
) -> None:
    """Hang the resource, checked by ``check_move``, where ``to`` says; for a folder leaving
    collection ``was``, everything below it goes to the new collection too (its column and
    document, as a new version each, audited as the move of one resource is). The access
    epoch moves on once (store/tree.py)."""
    if to.collection_id != was:
        below = await tree.below(conn, resource_id)
        changed = await tree.recollect(conn, below, to.collection_id, principal.user_id, now_ms())
        await audit.record_many(
            conn,
            principal.user_id,
            [(f"{kind}.update", rid, version, version + 1) for rid, kind, version in changed],
        )
    await tree.move(conn, resource_id, to.parent)
