"""Database connections: SQLite (embedded default) or PostgreSQL, chosen by URL.

Repositories receive a ``Conn``: one interface over the two ways dhub talks to a database.

- Writes, and everything on PostgreSQL, go through SQLAlchemy's async engine.
- Reads on SQLite run the stdlib driver directly on the event loop thread. An indexed SQLite
  read takes microseconds, while handing it to aiosqlite's worker thread costs ~4 thread round
  trips per statement and GIL contention under load (measured in bench/: 10x throughput).
  WAL mode means these readers never wait for the writer. Writes stay on the worker thread,
  because a write may wait on the busy timeout and must not freeze the loop meanwhile.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.base import Executable

from dhub.store.inline import InlineConnection, InlineReader, Rows

_WRITE = "dhub_write"
_MIGRATE_LOCK = 0x64687562  # "dhub": the advisory lock key that serialises migrations
_PRAGMAS = ("busy_timeout=10000", "synchronous=NORMAL", "foreign_keys=ON")


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


class Conn:
    """A connection inside one transaction, whichever engine it came from. ``execute`` returns
    the statement's rows, fully fetched (our statements return small results)."""

    __slots__ = ("_async", "_inline", "writing")

    def __init__(
        self,
        async_conn: AsyncConnection | None = None,
        inline: InlineConnection | None = None,
        writing: bool = False,
    ) -> None:
        self._async = async_conn
        self._inline = inline
        self.writing = writing  # inside Database.write(): repositories may lock rows

    async def execute(
        self,
        statement: Executable,
        parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> Rows:
        if self._inline is not None:
            assert parameters is None or isinstance(parameters, Mapping)
            return self._inline.execute(statement, parameters)
        assert self._async is not None
        result = await self._async.execute(statement, parameters)
        return Rows(result.all() if result.returns_rows else ())


class Database:
    """Owns the engines. ``read()`` and ``write()`` hand out one transaction each; on SQLite a
    write transaction starts with BEGIN IMMEDIATE so concurrent writers queue on the busy
    timeout instead of failing when a read lock cannot be upgraded."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self.engine: AsyncEngine = self._create_engine()
        self._reader = InlineReader(self._sqlite_path(), _PRAGMAS) if self.is_sqlite else None

    def _create_engine(self) -> AsyncEngine:
        if not self.is_sqlite:
            return create_async_engine(self.url, pool_size=10, max_overflow=20, pool_pre_ping=True)
        database = make_url(self.url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(self.url, pool_size=4, max_overflow=4)
        _configure_sqlite(engine.sync_engine)
        return engine

    def _sqlite_path(self) -> str:
        return make_url(self.url).database or ":memory:"

    @asynccontextmanager
    async def read(self, snapshot: bool = False) -> AsyncIterator[Conn]:
        """A read-only connection. ``snapshot``: every statement sees the same committed state
        (needed when a read takes several statements); otherwise, on SQLite, each statement
        sees the latest commit and no transaction is opened (cheaper for one-statement reads).
        """
        if self._reader is not None:
            with self._inline_read(snapshot) as conn:
                yield conn
            return
        async with self.engine.connect() as aconn:
            if snapshot:  # PostgreSQL's default, READ COMMITTED, is per statement
                await aconn.execution_options(isolation_level="REPEATABLE READ")
            yield Conn(async_conn=aconn)

    @contextmanager
    def _inline_read(self, snapshot: bool) -> Iterator[Conn]:
        assert self._reader is not None
        with self._reader.connection(snapshot) as inline:
            yield Conn(inline=inline)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Conn]:
        async with self.engine.connect() as aconn:
            await aconn.execution_options(**{_WRITE: True})
            async with aconn.begin():
                yield Conn(async_conn=aconn, writing=True)

    async def migrate(self) -> None:
        from dhub.store.migrate import upgrade  # alembic is only needed when migrating

        # Several servers may start at once on one database: one migrates, the others wait for
        # it (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL, both held until the
        # transaction ends) and then find nothing left to do.
        async with self.engine.connect() as conn:
            await conn.execution_options(**{_WRITE: True})
            async with conn.begin():
                if not self.is_sqlite:
                    lock = text("SELECT pg_advisory_xact_lock(:key)")
                    await conn.execute(lock, {"key": _MIGRATE_LOCK})
                await conn.run_sync(upgrade)

    async def dispose(self) -> None:
        if self._reader is not None:
            self._reader.close()
        await self.engine.dispose()


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_conn.cursor()
        for pragma in _PRAGMAS:
            cursor.execute(f"PRAGMA {pragma}")
        _ensure_wal(cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _ensure_wal(cursor: Any) -> None:
    """Put the file in WAL mode (it stays so). Switching takes a lock that SQLite does not wait
    for through the busy timeout, so connections opening a new file at once retry briefly."""
    for _ in range(100):
        cursor.execute("PRAGMA journal_mode")
        if str(cursor.fetchone()[0]).lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.02)
    raise RuntimeError("could not put the SQLite database in WAL mode")
