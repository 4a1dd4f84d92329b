"""Agent rows, their versions, tags and owners. Repositories flush; services commit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, bindparam, delete, func, insert, or_, select, update

from dhub.store.db import Conn
from dhub.store.tables import agent_versions, agents, resource_owners, resource_tags, users


@dataclass(frozen=True, slots=True)
class AgentRecord:
    id: str
    name: str
    folder_id: str | None
    version: int
    document: str
    is_builtin: bool
    created_by: str
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class AgentFilter:
    q: str | None = None
    tags: tuple[str, ...] = ()
    collection_id: str | None = None
    folder_id: str | None = None
    mode: str | None = None
    input_mode: str | None = None
    type: str | None = None


_RECORD_COLUMNS = (
    agents.c.id,
    agents.c.name,
    agents.c.folder_id,
    agents.c.version,
    agents.c.document,
    agents.c.is_builtin,
    agents.c.created_by,
    agents.c.created_at,
    agents.c.updated_at,
)


def folder_key(folder_id: str | None) -> str:
    return folder_id or ""


def _record(row: Any) -> AgentRecord:
    return AgentRecord(*row)


async def insert_agent(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(agents).values(values))


async def update_agent(conn: Conn, agent_id: str, values: dict[str, Any]) -> None:
    await conn.execute(update(agents).where(agents.c.id == agent_id).values(values))


async def delete_agent(conn: Conn, agent_id: str) -> None:
    # Explicit deletes keep this correct even where foreign keys are not enforced.
    await conn.execute(delete(agent_versions).where(agent_versions.c.agent_id == agent_id))
    await conn.execute(delete(resource_tags).where(resource_tags.c.resource_id == agent_id))
    await conn.execute(delete(resource_owners).where(resource_owners.c.resource_id == agent_id))
    await conn.execute(delete(agents).where(agents.c.id == agent_id))


# Hot-path statements are built once: building a select costs more than running it on SQLite.
_GET_AGENT = select(*_RECORD_COLUMNS).where(agents.c.id == bindparam("agent_id"))
_OWNERS = (
    select(
        resource_owners.c.resource_id,
        resource_owners.c.principal_id,
        users.c.display_name,
        users.c.avatar_url,
        users.c.avatar_config,
        users.c.email,
    )
    .select_from(resource_owners.outerjoin(users, users.c.id == resource_owners.c.principal_id))
    .where(resource_owners.c.resource_id.in_(bindparam("ids", expanding=True)))
    .order_by(resource_owners.c.resource_id, resource_owners.c.principal_id)
)


_GET_WITH_OWNERS = (
    select(*_RECORD_COLUMNS, *_OWNERS.selected_columns[1:])
    .select_from(
        agents.outerjoin(resource_owners, resource_owners.c.resource_id == agents.c.id).outerjoin(
            users, users.c.id == resource_owners.c.principal_id
        )
    )
    .where(agents.c.id == bindparam("agent_id"))
    .order_by(resource_owners.c.principal_id)
)


async def get_agent_with_owners(
    conn: Conn, agent_id: str
) -> tuple[AgentRecord, list[dict[str, Any]]] | None:
    """The agent and its owners (as ``owners_of`` gives them) in one statement."""
    rows = (await conn.execute(_GET_WITH_OWNERS, {"agent_id": agent_id})).all()
    if not rows:
        return None
    width = len(_RECORD_COLUMNS)
    owners = [_owner(*row[width:]) for row in rows if row[width] is not None]
    return _record(rows[0][:width]), owners


async def get_agent(conn: Conn, agent_id: str) -> AgentRecord | None:
    row = (await conn.execute(_GET_AGENT, {"agent_id": agent_id})).first()
    return _record(row) if row else None


async def find_by_name(conn: Conn, folder_id: str | None, name: str) -> str | None:
    """The id of the agent holding ``name`` in that folder, if any."""
    stmt = select(agents.c.id).where(
        agents.c.folder_key == folder_key(folder_id), agents.c.name == name
    )
    return (await conn.execute(stmt)).scalar()


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _conditions(flt: AgentFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if flt.q:
        pattern = _like(flt.q)
        conds.append(
            or_(
                func.lower(agents.c.name).like(pattern, escape="\\"),
                func.lower(func.coalesce(agents.c.alias, "")).like(pattern, escape="\\"),
                func.lower(agents.c.description).like(pattern, escape="\\"),
            )
        )
    for column, value in (
        (agents.c.collection_id, flt.collection_id),
        (agents.c.folder_id, flt.folder_id),
        (agents.c.mode, flt.mode),
        (agents.c.input_mode, flt.input_mode),
        (agents.c.type, flt.type),
    ):
        if value is not None:
            conds.append(column == value)
    for tag in dict.fromkeys(flt.tags):  # "all of": one EXISTS per distinct tag
        conds.append(
            select(resource_tags.c.resource_id)
            .where(resource_tags.c.resource_id == agents.c.id, resource_tags.c.tag == tag)
            .exists()
        )
    return conds


async def list_agents(
    conn: Conn,
    flt: AgentFilter,
    visible: ColumnElement[bool] | None,
    after_id: str | None,
    limit: int,
) -> list[AgentRecord]:
    """A page ordered by id (creation order); ``after_id`` is the last id of the previous page."""
    conds = _conditions(flt)
    if visible is not None:
        conds.append(visible)
    if after_id is not None:
        conds.append(agents.c.id > after_id)
    stmt = select(*_RECORD_COLUMNS).where(*conds).order_by(agents.c.id).limit(limit)
    return [_record(r) for r in (await conn.execute(stmt)).all()]


def owned_by(principal_ids: Sequence[str]) -> ColumnElement[bool]:
    """Agents owned by any of ``principal_ids`` (an SQL condition for list filtering)."""
    return (
        select(resource_owners.c.resource_id)
        .where(
            resource_owners.c.resource_id == agents.c.id,
            resource_owners.c.principal_id.in_(principal_ids),
        )
        .exists()
    )


async def set_tags(conn: Conn, resource_id: str, tags: Sequence[str]) -> None:
    await conn.execute(delete(resource_tags).where(resource_tags.c.resource_id == resource_id))
    unique = list(dict.fromkeys(tags))
    if unique:
        await conn.execute(
            insert(resource_tags), [{"resource_id": resource_id, "tag": t} for t in unique]
        )


async def add_owners(conn: Conn, resource_id: str, principals: Sequence[str]) -> None:
    await conn.execute(
        insert(resource_owners),
        [{"resource_id": resource_id, "principal_id": p} for p in principals],
    )


async def owners_of(conn: Conn, resource_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Owner principals with their display fields, per resource, in principal-id order."""
    if not resource_ids:
        return {}
    out: dict[str, list[dict[str, Any]]] = {rid: [] for rid in resource_ids}
    rows = await conn.execute(_OWNERS, {"ids": list(resource_ids)})
    for rid, *owner in rows:
        out[rid].append(_owner(*owner))
    return out


def _owner(
    principal_id: str,
    display_name: str | None,
    avatar_url: str | None,
    avatar_config: dict[str, Any] | None,
    email: str | None,
) -> dict[str, Any]:
    """An ``owners[]`` item of the seed: the principal with its display fields."""
    return {
        "id": principal_id,
        "type": _principal_type(principal_id),
        "display_name": display_name or principal_id,
        "avatar_url": avatar_url,
        "avatar_config": avatar_config,
        "email": email,
    }


def _principal_type(principal_id: str) -> str:
    kind = principal_id.split(".", 1)[0]
    return kind if kind in ("user", "group", "public") else "user"


async def insert_version(
    conn: Conn,
    agent_id: str,
    version: int,
    document: str,
    created_by: str,
    created_at: int,
) -> None:
    await conn.execute(
        insert(agent_versions).values(
            agent_id=agent_id,
            version=version,
            document=document,
            created_by=created_by,
            created_at=created_at,
        )
    )


@dataclass(frozen=True, slots=True)
class VersionRecord:
    version: int
    document: str
    created_by: str
    created_at: int


async def list_versions(conn: Conn, agent_id: str) -> list[VersionRecord]:
    stmt = (
        select(
            agent_versions.c.version,
            agent_versions.c.document,
            agent_versions.c.created_by,
            agent_versions.c.created_at,
        )
        .where(agent_versions.c.agent_id == agent_id)
        .order_by(agent_versions.c.version.desc())
    )
    return [VersionRecord(*r) for r in await conn.execute(stmt)]


async def get_version(conn: Conn, agent_id: str, version: int) -> VersionRecord | None:
    stmt = select(
        agent_versions.c.version,
        agent_versions.c.document,
        agent_versions.c.created_by,
        agent_versions.c.created_at,
    ).where(agent_versions.c.agent_id == agent_id, agent_versions.c.version == version)
    row = (await conn.execute(stmt)).first()
    return VersionRecord(*row) if row else None
