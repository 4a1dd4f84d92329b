"""Database connections: SQLite (embedded default) or PostgreSQL, chosen by URL.

Repositories receive a ``Conn``: one interface over the ways dhub talks to a database.

- On PostgreSQL, everything goes through SQLAlchemy's async engine (psycopg).
- On SQLite, everything runs on the event loop thread, through the stdlib driver. An indexed
  SQLite statement takes microseconds, while handing it to a worker thread (aiosqlite) cost ~4
  thread round trips per statement and GIL contention under load (measured in bench/: 10x
  throughput for reads, and most of a durable step's cost for writes). Reads compile their
  statements once and run them on plain ``sqlite3`` connections (store/inline.py); WAL mode
  means they never wait for the writer. Writes share one connection of a synchronous engine,
  one transaction at a time. The loop is never blocked on a lock: the writer's busy timeout
  is 0, and a ``BEGIN IMMEDIATE`` that finds another process writing is retried after an
  asyncio sleep. Inside the transaction no statement waits (the write lock is held).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, Table, create_engine, event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.base import Executable

from dhub.settings import private
from dhub.store import json_codec
from dhub.store.bulk import (
    Batches,
    Plan,
    PostgresBulk,
    PostgresCopy,
    SqliteBulk,
    SqliteCopy,
    csv_text,
)
from dhub.store.inline import InlineConnection, InlineReader, Rows

T = TypeVar("T")

_WRITE = "dhub_write"
_MIGRATE_LOCK = 0x64687562  # "dhub": the advisory lock key that serialises migrations
_PRAGMAS = ("busy_timeout=10000", "synchronous=NORMAL", "foreign_keys=ON")
_BUSY_SECONDS = 10.0  # how long a SQLite writer waits for another process's transaction
_JSON = json_codec.ENGINE_OPTIONS


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` and ``sqlite:///`` URLs; choosing the driver is ours."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+pysqlite")
    else:
        raise ValueError(
            f"DHUB_DATABASE_URL must be a sqlite:/// or postgresql:// URL, not {backend!r}"
        )
    return parsed.render_as_string(hide_password=False)


class Conn:
    """A connection inside one transaction, whichever engine it came from. ``execute`` returns
    the statement's rows, fully fetched (our statements return small results)."""

    __slots__ = ("_async", "_bulk", "_inline", "_sync", "writing")

    def __init__(
        self,
        async_conn: AsyncConnection | None = None,
        inline: InlineConnection | None = None,
        sync_conn: Connection | None = None,
        bulk: SqliteBulk | PostgresBulk | None = None,
        writing: bool = False,
    ) -> None:
        self._async = async_conn
        self._inline = inline
        self._sync = sync_conn
        self._bulk = bulk
        self.writing = writing  # inside Database.write(): repositories may lock rows

    @property
    def is_sqlite(self) -> bool:
        """For the few queries whose SQL differs (JSON paths: store/ontology.py)."""
        return self._async is None

    async def execute(
        self,
        statement: Executable,
        parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> Rows:
        if self._inline is not None:
            assert parameters is None or isinstance(parameters, Mapping)
            return self._inline.execute(statement, parameters)
        if self._sync is not None:
            result = self._sync.execute(statement, parameters)
        else:
            assert self._async is not None
            result = await self._async.execute(statement, parameters)
        if result.returns_rows:
            return Rows(result.all())
        return Rows((), result.rowcount)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return "postgresql" if self._async is not None else "sqlite"

    async def copy_rows(self, table: Table, batches: Batches) -> int:
        """Many rows into ``table`` by the database's bulk path (store/bulk.py): on SQLite an
        ``executemany`` off the loop thread (making the batches too: the iterator may parse
        a file), on PostgreSQL COPY, the batches made off the loop thread. How many rows;
        only inside ``Database.write()``; whatever ``batches`` raises propagates."""
        if not self.writing:
            raise RuntimeError("copy_rows runs inside Database.write() only")
        if self._sync is not None:
            raw = self._sync.connection.dbapi_connection
            return await asyncio.to_thread(SqliteCopy(table).run, raw, batches)  # type: ignore[arg-type]

        def next_csv() -> tuple[int, str] | None:
            batch = next(batches, None)
            return None if batch is None else (len(batch), csv_text(batch))

        async def next_batch() -> tuple[int, str] | None:
            return await asyncio.to_thread(next_csv)

        return await PostgresCopy(table).run(await self.driver(), next_batch)

    async def driver(self) -> Any:
        """The psycopg connection under this transaction (PostgreSQL only): for libraries
        that write in the same transaction (procrastinate's deferrals, runtime/queue.py)."""
        if self._async is None:
            raise RuntimeError("the driver connection is PostgreSQL's only")
        return (await self._async.get_raw_connection()).driver_connection

    async def execute_plan(self, plan: Plan) -> list[int]:
        """Constant INSERTs and UPDATEs (built once, at module level), each for its rows, in
        order, by the driver itself (store/bulk.py); how many rows each changed. Only inside
        ``Database.write()``."""
        work = [(statement, rows) for statement, rows in plan if rows]
        if isinstance(self._bulk, SqliteBulk) and self._sync is not None:
            raw = self._sync.connection.dbapi_connection
            assert raw is not None
            done = self._bulk.run(raw, work)  # type: ignore[arg-type]
        elif isinstance(self._bulk, PostgresBulk) and self._async is not None:
            driver = (await self._async.get_raw_connection()).driver_connection
            done = await self._bulk.run(driver, work)  # type: ignore[arg-type]
        else:
            raise RuntimeError("execute_plan runs inside Database.write() only")
        counts = iter(done)
        return [next(counts) if rows else 0 for _, rows in plan]  # as many as given


class Database:
    """Owns the engines. ``read()`` and ``write()`` hand out one transaction each; on SQLite a
    write transaction starts with BEGIN IMMEDIATE, so it never fails to upgrade a read lock."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self._async: AsyncEngine | None = None
        self._unpinged: AsyncEngine | None = None
        self._sync: Engine | None = None
        self._reader: InlineReader | None = None
        self._writer: _SqliteWriter | None = None
        if self.is_sqlite:
            self._sync = _sqlite_engine(self.url)
            self._reader = InlineReader(self._sqlite_path(), _PRAGMAS)
            self._writer = _SqliteWriter(self._sync)
        else:
            self._async = create_async_engine(
                self.url,
                pool_size=10,
                max_overflow=20,
                pool_pre_ping=True,
                **_JSON,
            )
            # For writers that retry on a dropped connection themselves (the group commit of
            # steps): no ping round trip before each transaction (a fifth of a step's cost).
            self._unpinged = create_async_engine(
                self.url,
                pool_size=2,
                max_overflow=2,
                pool_pre_ping=False,
                **_JSON,
            )
            self._bulk = PostgresBulk()

    @property
    def engines(self) -> list[Engine | AsyncEngine]:
        """Its SQLAlchemy engines (for instrumentation; SQLite's inline reads use none)."""
        return [e for e in (self._sync, self._async, self._unpinged) if e is not None]

    def _sqlite_path(self) -> str:
        return make_url(self.url).database or ":memory:"

    @property
    def sqlite_path(self) -> str | None:
        """The SQLite file (None on PostgreSQL), for read-only connections of its own
        (store/table_reads.py)."""
        return self._sqlite_path() if self.is_sqlite else None

    @asynccontextmanager
    async def read_only(self, timeout_seconds: float) -> AsyncIterator[AsyncConnection]:
        """PostgreSQL: a READ ONLY transaction whose statements are cancelled after
        ``timeout_seconds`` (SET LOCAL statement_timeout); rolled back at the end."""
        assert self._async is not None, "read_only is PostgreSQL's; SQLite: sqlite_path"
        async with self._async.connect() as aconn:
            await aconn.begin()
            try:
                await aconn.execute(text("SET TRANSACTION READ ONLY"))
                await aconn.execute(
                    text("SELECT set_config('statement_timeout', :ms, true)"),
                    {"ms": str(max(1, int(timeout_seconds * 1000)))},
                )
                yield aconn
            finally:
                await aconn.rollback()

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
        assert self._async is not None
        async with self._async.connect() as aconn:
            if snapshot:  # PostgreSQL's default, READ COMMITTED, is per statement
                await aconn.execution_options(isolation_level="REPEATABLE READ")
            yield Conn(async_conn=aconn)

    @contextmanager
    def _inline_read(self, snapshot: bool) -> Iterator[Conn]:
        assert self._reader is not None
        with self._reader.connection(snapshot) as inline:
            yield Conn(inline=inline)

    @asynccontextmanager
    async def write(self, pinged: bool = True, first: bool = False) -> AsyncIterator[Conn]:
        """One write transaction: committed when the block ends, rolled back if it raises.
        ``pinged=False`` (PostgreSQL): the connection is not checked first; a dropped one
        fails the transaction with ``connection_invalidated`` set, and the caller retries.
        ``first`` (SQLite, where one connection writes): ahead of the other writers waiting."""
        if self._writer is not None:
            async with self._writer.transaction(first) as conn:
                yield Conn(sync_conn=conn, bulk=self._writer.bulk, writing=True)
            return
        engine = self._async if pinged else self._unpinged
        assert engine is not None
        async with engine.connect() as aconn, aconn.begin():
            yield Conn(async_conn=aconn, bulk=self._bulk, writing=True)

    async def run_sync(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` on a synchronous connection in a write transaction of its own (Alembic),
        off the loop thread on SQLite, so the loop stays free while it waits for locks."""
        if self._sync is not None:
            return await asyncio.to_thread(_in_transaction, self._sync, work)
        assert self._async is not None
        async with self._async.connect() as conn, conn.begin():
            return await conn.run_sync(work)

    async def migrate(self) -> None:
        # Several servers may start at once on one database: one migrates, the others wait for
        # it (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL, both held until the
        # transaction ends) and then find nothing left to do.
        await self.run_sync(_upgrade)

    async def dispose(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            self._writer.close()
        if self._sync is not None:
            self._sync.dispose()
        if self._async is not None:
            await self._async.dispose()
        if self._unpinged is not None:
            await self._unpinged.dispose()


def _upgrade(connection: Connection) -> None:
    from dhub.store.migrate import upgrade  # alembic is only needed when migrating

    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATE_LOCK})
    upgrade(connection)


def _in_transaction(engine: Engine, work: Callable[[Connection], T]) -> T:
    with engine.connect() as conn:
        conn = conn.execution_options(**{_WRITE: True})
        with conn.begin():
            return work(conn)


class _SqliteWriter:
    """The SQLite write connection, used from the loop thread one transaction at a time."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._turns = _Turns()
        self.bulk = SqliteBulk()

    @asynccontextmanager
    async def transaction(self, first: bool = False) -> AsyncIterator[Connection]:
        async with self._turns.turn(first):
            conn = await self._begin()
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            try:
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    async def _begin(self) -> Connection:
        deadline = time.monotonic() + _BUSY_SECONDS
        delay = 0.0005
        while True:
            conn = self._connection()
            try:
                conn.begin()
                return conn
            except OperationalError as exc:
                if not _busy(exc) or time.monotonic() > deadline:
                    raise
                conn.rollback()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.invalidated:
            conn = self._engine.connect().execution_options(**{_WRITE: True})
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.execute("PRAGMA busy_timeout=0")  # never wait on the loop thread
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _Turns:
    """The write connection's turns, in order of asking, except that one asking ``first``
    goes before the others waiting, once in every two turns: saved steps ask first, so that
    under a burst of API writes (a thousand runs submitted at once) runs already going keep
    moving instead of waiting behind every queued request; and requests still get every
    other turn, so a steady stream of steps cannot starve them."""

    def __init__(self) -> None:
        self._busy = False
        self._last_first = False  # whether the turn going on (or the last) was a first one
        self._waiting: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (
            deque(),
            deque(),
        )

    @asynccontextmanager
    async def turn(self, first: bool) -> AsyncIterator[None]:
        if self._busy or any(self._waiting):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            queue = self._waiting[0 if first else 1]
            queue.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._next()  # handed the turn while being cancelled: pass it on
                else:
                    queue.remove(waiter)
                raise
        else:
            self._busy, self._last_first = True, first
        try:
            yield
        finally:
            self._next()

    def _next(self) -> None:
        order = (1, 0) if self._last_first and self._waiting[1] else (0, 1)
        for index in order:
            queue = self._waiting[index]
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # the turn passes on: still busy
                    self._last_first = index == 0
                    return
        self._busy = False


def _busy(exc: OperationalError) -> bool:
    message = str(exc.orig)
    return "locked" in message or "busy" in message


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        _private_file(Path(database))
    # check_same_thread=False: migrations run in a worker thread, and test clients run the
    # loop in a portal thread of their own.
    engine = create_engine(
        url,
        pool_size=4,
        max_overflow=4,
        connect_args={"check_same_thread": False},
        **_JSON,
    )
    _configure_sqlite(engine)
    return engine


def _private_file(database: Path) -> None:
    """The database file only its owner may read (0600), created so before SQLite opens it:
    SQLite gives its -wal, -shm and -journal files the database file's mode. Existing files
    with a looser mode are tightened."""
    database.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(database, os.O_RDWR | os.O_CREAT, 0o600))
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = database.with_name(database.name + suffix)
        if path.exists():
            private(path)


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
        # On the driver itself: through exec_driver_sql this was a tenth of a saved step.
        sql = "BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE, False) else "BEGIN"
        raw = conn.connection.dbapi_connection
        assert raw is not None
        try:
            raw.execute(sql)
        except sqlite3.Error as exc:
            raise DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc


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
