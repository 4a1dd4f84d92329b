"""Database connections: SQLite (embedded default) or PostgreSQL, chosen by URL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

_WRITE = "dhub_write"


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` and ``sqlite:///`` URLs; choosing the driver is ours."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    else:
        raise ValueError(
            f"DHUB_DATABASE_URL must be a sqlite:/// or postgresql:// URL, not {backend!r}"
        )
    return parsed.render_as_string(hide_password=False)


class Database:
    """Owns the engine. ``read()`` and ``write()`` hand out one transaction each; on SQLite a
    write transaction starts with BEGIN IMMEDIATE so concurrent writers queue on the busy
    timeout instead of failing when a read lock cannot be upgraded."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self.engine: AsyncEngine = self._create_engine()

    def _create_engine(self) -> AsyncEngine:
        if not self.is_sqlite:
            return create_async_engine(self.url, pool_size=10, max_overflow=20, pool_pre_ping=True)
        database = make_url(self.url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(self.url, pool_size=8, max_overflow=8)
        _configure_sqlite(engine)
        return engine

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            await conn.execution_options(**{_WRITE: True})
            async with conn.begin():
                yield conn

    async def migrate(self) -> None:
        from dhub.store.migrate import upgrade  # alembic is only needed when migrating

        async with self.engine.begin() as conn:
            await conn.run_sync(upgrade)

    async def dispose(self) -> None:
        await self.engine.dispose()


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_conn.cursor()
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "foreign_keys=ON",
            "busy_timeout=10000",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
