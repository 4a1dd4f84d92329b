"""Users, groups, memberships and markings: who someone is, and what they hold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, insert, literal, select, update

from dhub.domain.ids import PUBLIC
from dhub.store.db import Conn
from dhub.store.sharing import bump_epoch
from dhub.store.tables import group_members, groups, marking_members, markings, users


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: str
    display_name: str
    email: str | None
    avatar_url: str | None
    avatar_config: dict[str, Any] | None
    is_admin: bool
    created_at: int


@dataclass(frozen=True, slots=True)
class GroupRecord:
    id: str
    display_name: str
    created_at: int


@dataclass(frozen=True, slots=True)
class MarkingRecord:
    id: str
    name: str
    description: str
    created_by: str
    created_at: int


_USER_COLUMNS = (
    users.c.id,
    users.c.display_name,
    users.c.email,
    users.c.avatar_url,
    users.c.avatar_config,
    users.c.is_admin,
    users.c.created_at,
)

# Every group ``member`` belongs to, directly or through nested groups.
_member_of = (
    select(group_members.c.group_id.label("id"))
    .where(group_members.c.member_id.in_(bindparam("members", expanding=True)))
    .cte("member_of", recursive=True)
)
_member_of = _member_of.union(
    select(group_members.c.group_id).where(group_members.c.member_id == _member_of.c.id)
)
_GROUPS_OF = select(_member_of.c.id)
_HELD_MARKINGS = select(marking_members.c.marking_id).where(
    marking_members.c.principal_id.in_(bindparam("principals", expanding=True))
)


async def groups_of(conn: Conn, member_ids: Sequence[str]) -> set[str]:
    """The groups any of ``member_ids`` (users, groups, public.all) is in, transitively."""
    return {row[0] for row in await conn.execute(_GROUPS_OF, {"members": list(member_ids)})}


async def held_markings(conn: Conn, principal_ids: Sequence[str]) -> set[str]:
    rows = await conn.execute(_HELD_MARKINGS, {"principals": list(principal_ids)})
    return {row[0] for row in rows}


async def principal_exists(conn: Conn, principal_id: str) -> bool:
    """Whether ``principal_id`` names a user, a group or ``public.all``."""
    if principal_id == PUBLIC:
        return True
    kind, _, rest = principal_id.partition(".")
    if kind == "user" and rest:
        return await get_user(conn, principal_id) is not None
    if kind == "group" and rest:
        return await get_group(conn, principal_id) is not None
    return False


async def get_user(conn: Conn, user_id: str) -> UserRecord | None:
    # Built once: every run step on a user's behalf reads its user (principal_of).
    row = (await conn.execute(_GET_USER, {"user_id": user_id})).first()
    return UserRecord(*row) if row else None


_GET_USER = select(*_USER_COLUMNS).where(users.c.id == bindparam("user_id"))


async def list_users(conn: Conn) -> list[UserRecord]:
    rows = await conn.execute(select(*_USER_COLUMNS).order_by(users.c.id))
    return [UserRecord(*r) for r in rows]


async def update_user(conn: Conn, user_id: str, values: dict[str, Any]) -> None:
    # Owners are listed with their profiles: lists rendered before are stale (the epoch is
    # in their keys: services/agents.py page_rendered).
    await bump_epoch(conn)
    await conn.execute(update(users).where(users.c.id == user_id).values(values))


async def delete_user(conn: Conn, user_id: str) -> None:
    await bump_epoch(conn)  # as update_user
    await conn.execute(delete(group_members).where(group_members.c.member_id == user_id))
    await conn.execute(delete(marking_members).where(marking_members.c.principal_id == user_id))
    await conn.execute(delete(users).where(users.c.id == user_id))


async def insert_group(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(groups).values(values))


async def get_group(conn: Conn, group_id: str) -> GroupRecord | None:
    stmt = select(groups.c.id, groups.c.display_name, groups.c.created_at).where(
        groups.c.id == group_id
    )
    row = (await conn.execute(stmt)).first()
    return GroupRecord(*row) if row else None


async def list_groups(conn: Conn) -> list[GroupRecord]:
    stmt = select(groups.c.id, groups.c.display_name, groups.c.created_at).order_by(groups.c.id)
    return [GroupRecord(*r) for r in await conn.execute(stmt)]


async def update_group(conn: Conn, group_id: str, values: dict[str, Any]) -> None:
    await bump_epoch(conn)  # as update_user
    await conn.execute(update(groups).where(groups.c.id == group_id).values(values))


async def delete_group(conn: Conn, group_id: str) -> None:
    await bump_epoch(conn)  # as update_user
    await conn.execute(
        delete(group_members).where(
            (group_members.c.group_id == group_id) | (group_members.c.member_id == group_id)
        )
    )
    await conn.execute(delete(marking_members).where(marking_members.c.principal_id == group_id))
    await conn.execute(delete(groups).where(groups.c.id == group_id))


async def members_of(conn: Conn, group_id: str) -> list[str]:
    stmt = (
        select(group_members.c.member_id)
        .where(group_members.c.group_id == group_id)
        .order_by(group_members.c.member_id)
    )
    return [r[0] for r in await conn.execute(stmt)]


async def add_member(conn: Conn, group_id: str, member_id: str) -> bool:
    """Add ``member_id`` to the group; False when it was already a member."""
    stmt = select(literal(1)).where(
        group_members.c.group_id == group_id, group_members.c.member_id == member_id
    )
    if (await conn.execute(stmt)).first() is not None:
        return False
    await conn.execute(insert(group_members).values(group_id=group_id, member_id=member_id))
    return True


async def remove_member(conn: Conn, group_id: str, member_id: str) -> bool:
    stmt = select(literal(1)).where(
        group_members.c.group_id == group_id, group_members.c.member_id == member_id
    )
    if (await conn.execute(stmt)).first() is None:
        return False
    await conn.execute(
        delete(group_members).where(
            group_members.c.group_id == group_id, group_members.c.member_id == member_id
        )
    )
    return True


async def insert_marking(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(markings).values(values))


_MARKING_COLUMNS = (
    markings.c.id,
    markings.c.name,
    markings.c.description,
    markings.c.created_by,
    markings.c.created_at,
)


async def get_marking(conn: Conn, marking_id: str) -> MarkingRecord | None:
    stmt = select(*_MARKING_COLUMNS).where(markings.c.id == marking_id)
    row = (await conn.execute(stmt)).first()
    return MarkingRecord(*row) if row else None


async def list_markings(conn: Conn) -> list[MarkingRecord]:
    stmt = select(*_MARKING_COLUMNS).order_by(markings.c.id)
    return [MarkingRecord(*r) for r in await conn.execute(stmt)]


async def marking_members_of(conn: Conn, marking_id: str) -> list[str]:
    stmt = (
        select(marking_members.c.principal_id)
        .where(marking_members.c.marking_id == marking_id)
        .order_by(marking_members.c.principal_id)
    )
    return [r[0] for r in await conn.execute(stmt)]


async def add_marking_member(conn: Conn, marking_id: str, principal_id: str) -> bool:
    stmt = select(literal(1)).where(
        marking_members.c.marking_id == marking_id,
        marking_members.c.principal_id == principal_id,
    )
    if (await conn.execute(stmt)).first() is not None:
        return False
    await conn.execute(
        insert(marking_members).values(marking_id=marking_id, principal_id=principal_id)
    )
    return True


async def remove_marking_member(conn: Conn, marking_id: str, principal_id: str) -> bool:
    stmt = select(literal(1)).where(
        marking_members.c.marking_id == marking_id,
        marking_members.c.principal_id == principal_id,
    )
    if (await conn.execute(stmt)).first() is None:
        return False
    await conn.execute(
        delete(marking_members).where(
            marking_members.c.marking_id == marking_id,
            marking_members.c.principal_id == principal_id,
        )
    )
    return True
