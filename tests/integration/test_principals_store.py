"""Group nesting and held markings in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dhub.access.tokens import resolve
from dhub.store import principals as repo
from dhub.store import users
from dhub.store.db import Database


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await database.migrate()
    try:
        yield database
    finally:
        await database.dispose()


async def test_groups_resolve_through_nesting_and_public(db: Database) -> None:
    async with db.write() as conn:
        await users.insert_user(
            conn, {"id": "user.u", "display_name": "U", "is_admin": False, "created_at": 1}
        )
        for group in ("a", "b", "c", "d", "everyone"):
            await repo.insert_group(
                conn, {"id": f"group.{group}", "display_name": group, "created_at": 1}
            )
        await repo.add_member(conn, "group.a", "user.u")
        await repo.add_member(conn, "group.b", "group.a")
        await repo.add_member(conn, "group.c", "group.b")  # u -> a -> b -> c
        await repo.add_member(conn, "group.everyone", "public.all")
        assert not await repo.add_member(conn, "group.a", "user.u")  # already a member
        await repo.insert_marking(
            conn,
            {
                "id": "marking.m",
                "name": "m",
                "description": "",
                "created_by": "user.u",
                "created_at": 1,
            },
        )
        await repo.add_marking_member(conn, "marking.m", "group.c")
    async with db.read() as conn:
        assert await repo.groups_of(conn, ["user.u"]) == {"group.a", "group.b", "group.c"}
        assert await repo.groups_of(conn, ["group.b"]) == {"group.c"}
        assert await repo.groups_of(conn, ["group.d"]) == set()
        principal = await resolve(conn, "user.u", False)
    assert principal.groups == {"group.a", "group.b", "group.c", "group.everyone"}
    assert principal.markings == {"marking.m"}  # held through the outermost group
    assert principal.principal_ids >= {"user.u", "public.all", "group.everyone"}

    async with db.write() as conn:
        assert await repo.remove_member(conn, "group.b", "group.a")
        assert not await repo.remove_member(conn, "group.b", "group.a")
    async with db.read() as conn:
        again = await resolve(conn, "user.u", False)
    assert again.groups == {"group.a", "group.everyone"}
    assert again.markings == set()
