"""One conformance suite for the store, run against every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.exc import IntegrityError

from dhub.store import agents as repo
from dhub.store import principals, users
from dhub.store import sharing as shares
from dhub.store.db import Database, normalize_url
from tests.conftest import PG_URL, pg_url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await database.migrate()
    await database.migrate()  # migrating twice is a no-op
    try:
        yield database
    finally:
        await database.dispose()


def row(agent_id: str, name: str, **extra: object) -> dict[str, object]:
    values: dict[str, object] = {
        "id": agent_id,
        "name": name,
        "folder_key": "",
        "folder_id": None,
        "collection_id": None,
        "alias": None,
        "description": "",
        "type": None,
        "mode": "react",
        "input_mode": "chat",
        "version": 1,
        "document": "{}",
        "is_builtin": False,
        "created_by": "user.admin",
        "created_at": 1,
        "updated_at": 1,
    }
    values.update(extra)
    return values


async def test_insert_get_update_delete(db: Database) -> None:
    async with db.write() as conn:
        await users.insert_user(
            conn,
            {
                "id": "user.admin",
                "display_name": "Admin",
                "avatar_config": {"color": "red", "size": [1, 2]},
                "email": "a@example.com",
                "is_admin": True,
                "created_at": 1,
            },
        )
        await repo.insert_agent(conn, row("agent.1", "one", document='{"a": 1}'))
        await repo.insert_version(conn, "agent.1", 1, '{"a": 1}', "user.admin", 1)
        await repo.set_tags(conn, "agent.1", ["x", "y", "x"])
        await shares.add_owners(conn, "agent.1", ["user.admin", "group.ops"])
    async with db.read() as conn:
        found = await repo.get_agent(conn, "agent.1", ["user.x"])
        assert found is not None
        assert found.grant is None
        record = found.record
        assert (record.name, record.document, record.version) == ("one", '{"a": 1}', 1)
        assert record.is_builtin is False  # a bool, not SQLite's 0
        assert record.markings == "[]"
        assert found.owners == [
            {
                "id": "group.ops",
                "type": "group",
                "display_name": "group.ops",  # no such user row: the id stands in
                "avatar_url": None,
                "avatar_config": None,
                "email": None,
            },
            {
                "id": "user.admin",
                "type": "user",
                "display_name": "Admin",
                "avatar_url": None,
                "avatar_config": {"color": "red", "size": [1, 2]},  # JSON comes back parsed
                "email": "a@example.com",
            },
        ]
        assert await repo.find_by_name(conn, "", "one") == "agent.1"
        assert await repo.find_by_name(conn, "folder", "one") is None
    async with db.write() as conn:
        await repo.update_agent(conn, "agent.1", {"version": 2, "document": "{}"})
        await repo.insert_version(conn, "agent.1", 2, "{}", "user.admin", 2)
    async with db.read() as conn:
        assert [v.version for v in await repo.list_versions(conn, "agent.1")] == [2, 1]
        first = await repo.get_version(conn, "agent.1", 1)
        assert first is not None and first.document == '{"a": 1}'
        assert await repo.get_version(conn, "agent.1", 3) is None
    async with db.write() as conn:
        await repo.delete_agent(conn, "agent.1")
    async with db.read() as conn:
        assert await repo.get_agent(conn, "agent.1", []) is None
        assert await repo.list_versions(conn, "agent.1") == []


async def test_name_is_unique_per_folder_key(db: Database) -> None:
    async with db.write() as conn:
        await repo.insert_agent(conn, row("agent.1", "same"))
        await repo.insert_agent(conn, row("agent.2", "same", folder_key="f", folder_id="f"))
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await repo.insert_agent(conn, row("agent.3", "same"))
    async with db.read() as conn:  # the failed transaction left nothing behind
        assert await repo.get_agent(conn, "agent.3", []) is None


def owner_of(agent_id: str) -> str:
    return "user.a" if int(agent_id.split(".")[1]) < 4 else "user.b"


async def test_list_filters_visibility_and_pages(db: Database) -> None:
    async with db.write() as conn:
        for i in range(7):
            mode = "workflow" if i % 2 else "react"
            await repo.insert_agent(
                conn, row(f"agent.{i}", f"n{i}", mode=mode, description=f"about {i}%")
            )
            await shares.add_owners(conn, f"agent.{i}", [owner_of(f"agent.{i}")])
            await repo.set_tags(conn, f"agent.{i}", ["all", *(["even"] if i % 2 == 0 else [])])
    everything = repo.AgentFilter()
    async with db.read() as conn:

        async def ids(
            flt: repo.AgentFilter = everything,
            visible: object = None,
            after: str | None = None,
            limit: int = 100,
        ) -> list[str]:
            cond = repo.Visibility(("user.b",), restricted=bool(visible), held_markings=())
            page = await repo.list_agents(conn, flt, cond, after, limit)
            assert all([o["id"] for o in r.owners] == [owner_of(r.record.id)] for r in page)
            return [r.record.id for r in page]

        assert await ids() == [f"agent.{i}" for i in range(7)]
        assert await ids(repo.AgentFilter(mode="workflow")) == ["agent.1", "agent.3", "agent.5"]
        assert await ids(repo.AgentFilter(tags=("all", "even"))) == [
            "agent.0", "agent.2", "agent.4", "agent.6",
        ]  # fmt: skip
        assert await ids(repo.AgentFilter(q="3%")) == ["agent.3"]
        assert await ids(repo.AgentFilter(q="_")) == []
        assert await ids(visible=True) == ["agent.4", "agent.5", "agent.6"]
        assert await ids(after="agent.2", limit=2) == ["agent.3", "agent.4"]
        nobody = repo.Visibility((), restricted=True, held_markings=())
        assert await repo.list_agents(conn, everything, nobody, None, 10) == []
        assert await ids(repo.AgentFilter(tags=("even",)), visible=True, after="agent.4") == [
            "agent.6"
        ]


async def test_users_and_tokens(db: Database) -> None:
    async with db.write() as conn:
        assert await users.count_users(conn) == 0
        await users.insert_user(
            conn, {"id": "user.x", "display_name": "X", "is_admin": False, "created_at": 1}
        )
        await users.insert_token(
            conn,
            {
                "id": "token.1",
                "user_id": "user.x",
                "name": "t",
                "token_hash": "h" * 64,
                "created_at": 1,
                "expires_at": 5,
            },
        )
    async with db.read() as conn:
        owner = await users.find_token(conn, "h" * 64)
        assert owner is not None
        assert (owner.user_id, owner.is_admin, owner.expires_at) == ("user.x", False, 5)
        assert await users.find_token(conn, "nope") is None
        assert await principals.get_user(conn, "user.x") is not None
        assert await users.token_exists(conn, "h" * 64)


def test_url_normalisation() -> None:
    assert normalize_url("postgresql://u@h:5432/db").startswith("postgresql+psycopg://u@h:5432")
    assert normalize_url("postgres://u@h/db").startswith("postgresql+psycopg://")
    assert normalize_url("sqlite:///x/y.db") == "sqlite+pysqlite:///x/y.db"
    with pytest.raises(ValueError, match="sqlite"):
        normalize_url("mysql://u@h/db")


async def test_snapshot_reads_do_not_see_later_commits(db: Database) -> None:
    async with db.write() as conn:
        await repo.insert_agent(conn, row("agent.1", "before"))
    async with db.read(snapshot=True) as snap:
        assert await repo.find_by_name(snap, "", "before") == "agent.1"
        async with db.write() as conn:  # commits while the snapshot is open
            await repo.update_agent(conn, "agent.1", {"name": "after"})
        assert await repo.find_by_name(snap, "", "before") == "agent.1"
        assert await repo.find_by_name(snap, "", "after") is None
    async with db.read() as fresh:
        assert await repo.find_by_name(fresh, "", "after") == "agent.1"


async def test_reach_cache_is_never_stale(db: Database) -> None:
    cache = shares.ReachCache()
    async with db.write() as conn:
        for i in range(3):
            await repo.insert_agent(conn, row(f"agent.{i}", f"n{i}"))
        await shares.add_owners(conn, "agent.0", ["user.a"])
        await shares.set_grant(conn, "agent.1", "group.g", "viewer")
    async with db.read(snapshot=True) as conn:
        first = await cache.get(conn, ["group.g", "user.a"], [])
        assert (first.ids, first.grants) == (["agent.0", "agent.1"], {"agent.1": "viewer"})
    async with db.write() as conn:  # every owner or grant change moves the epoch on
        await shares.delete_grant(conn, "agent.1", "group.g")
        await shares.set_grant(conn, "agent.2", "user.a", "editor")
    async with db.read(snapshot=True) as conn:
        assert (await cache.get(conn, ["group.g", "user.a"], [])).ids == ["agent.0", "agent.2"]
        visible = repo.Visibility(("group.g", "user.a"), restricted=True, held_markings=())
        reach = await cache.get(conn, visible.principals, [])
        page = await repo.list_agents(conn, repo.AgentFilter(), visible, None, 10, reach)
        assert [(r.record.id, r.grant) for r in page] == [("agent.0", None), ("agent.2", "editor")]
        after = await repo.list_agents(conn, repo.AgentFilter(), visible, "agent.0", 10, reach)
        assert [r.record.id for r in after] == ["agent.2"]
    async with db.write() as conn:
        await repo.delete_agent(conn, "agent.0")
    async with db.read(snapshot=True) as conn:
        assert (await cache.get(conn, ["group.g", "user.a"], [])).ids == ["agent.2"]


async def test_reach_leaves_out_markings_not_held(db: Database) -> None:
    cache = shares.ReachCache()
    async with db.write() as conn:
        for i in range(2):
            await repo.insert_agent(conn, row(f"agent.{i}", f"n{i}"))
            await shares.add_owners(conn, f"agent.{i}", ["user.a"])
    async with db.read(snapshot=True) as conn:
        assert (await cache.get(conn, ["user.a"], [])).ids == ["agent.0", "agent.1"]
    async with db.write() as conn:  # marking moves the epoch on too
        await shares.set_markings(conn, "agent.1", ["marking.m"])
    async with db.read(snapshot=True) as conn:
        assert (await cache.get(conn, ["user.a"], [])).ids == ["agent.0"]
        assert (await cache.get(conn, ["user.a"], ["marking.m"])).ids == ["agent.0", "agent.1"]


async def test_concurrent_migrations_do_not_collide(database_url: str, tmp_path: Path) -> None:
    """Several servers starting at once on a new database all come up (one migrates)."""
    schema = None
    if database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'fresh.db'}"
    else:
        schema = f"dhub_fresh_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = pg_url(schema)
    databases = [Database(url) for _ in range(3)]
    try:
        await asyncio.wait_for(asyncio.gather(*(d.migrate() for d in databases)), 60)
        async with databases[0].read() as conn:
            assert await users.count_users(conn) == 0
    finally:
        for d in databases:
            await d.dispose()
        if schema is not None:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
