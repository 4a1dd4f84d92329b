"""Queries over table rows that may scan millions of them (structured queries and read-only
SQL), run so that they neither block the server nor outlive their time limit:

- SQLite: on a worker thread, on a connection of their own opened read-only
  (``file:...?mode=ro``, and ``PRAGMA query_only``), interrupted by a progress handler at the
  deadline; SQL text also passes SQLite's authorizer, which allows reading only the given
  tables and calling only the given functions;
- PostgreSQL: in a READ ONLY transaction with ``statement_timeout`` (Database.read_only).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Select

from dhub.store.db import Database
from dhub.store.inline import InlineReader

_COMPILER = InlineReader(":memory:", ())  # compiles statements for SQLite; never connects
_CHECK_EVERY = 10_000  # SQLite VM instructions between deadline checks


class QueryTimeout(Exception):
    """The query ran past its time limit and was stopped."""


class QueryFailed(Exception):
    """The database refused the query; the message is the database's."""


@dataclass(frozen=True, slots=True)
class SqlResult:
    columns: list[str]
    rows: list[Sequence[Any]]
    truncated: bool  # more rows than ``max_rows``


def _connect(path: str, deadline: float) -> sqlite3.Connection:
    uri = f"file:{quote(path)}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only=ON")
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _CHECK_EVERY)
    return conn


def _sqlite_select(path: str, statement: Select[Any], timeout: float) -> list[Sequence[Any]]:
    compiled = _COMPILER.compile(statement)
    sql, values = compiled.bind({})
    conn = _connect(path, time.monotonic() + timeout)
    try:
        rows: list[Sequence[Any]] = conn.execute(sql, values).fetchall()
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise QueryTimeout from None
        raise
    finally:
        conn.close()
    if compiled.processors:
        out: list[Sequence[Any]] = []
        for row in rows:
            items = list(row)
            for i, processor in compiled.processors:
                items[i] = processor(items[i])
            out.append(items)
        return out
    return rows


async def select_rows(db: Database, statement: Select[Any], seconds: float) -> list[Sequence[Any]]:
    """All rows of a built SELECT (bounded by its own LIMIT)."""
    path = db.sqlite_path
    if path is not None:
        return await asyncio.to_thread(_sqlite_select, path, statement, seconds)
    try:
        async with db.read_only(seconds) as conn:
            return list((await conn.execute(statement)).all())
    except DBAPIError as exc:
        if isinstance(exc.orig, psycopg.errors.QueryCanceled):
            raise QueryTimeout from None
        raise


def _sqlite_sql(
    path: str,
    sql: str,
    timeout: float,
    max_rows: int,
    tables: Collection[str],
    functions: Collection[str],
) -> SqlResult:
    allowed_tables = {t.lower() for t in tables}
    allowed_functions = {f.lower() for f in functions}

    def authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_SELECT or action == sqlite3.SQLITE_RECURSIVE:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            return (
                sqlite3.SQLITE_OK if (arg1 or "").lower() in allowed_tables else sqlite3.SQLITE_DENY
            )
        if action == sqlite3.SQLITE_FUNCTION:
            return (
                sqlite3.SQLITE_OK
                if (arg2 or "").lower() in allowed_functions
                else sqlite3.SQLITE_DENY
            )
        return sqlite3.SQLITE_DENY

    conn = _connect(path, time.monotonic() + timeout)
    try:
        conn.set_authorizer(authorize)
        cursor = conn.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
        names = [d[0] for d in cursor.description or ()]
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise QueryTimeout from None
        raise QueryFailed(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise QueryFailed(str(exc)) from None
    finally:
        conn.close()
    return SqlResult(names, rows[:max_rows], len(rows) > max_rows)


async def sql_rows(
    db: Database,
    sql: str,
    seconds: float,
    max_rows: int,
    tables: Collection[str],
    functions: Collection[str],
) -> SqlResult:
    """A checked, rewritten SELECT (knowledge/tables_sql.py) over the physical ``tables``:
    at most ``max_rows`` rows, ``truncated`` if there were more."""
    path = db.sqlite_path
    if path is not None:
        return await asyncio.to_thread(_sqlite_sql, path, sql, seconds, max_rows, tables, functions)
    try:
        async with db.read_only(seconds) as conn:
            raw = await conn.get_raw_connection()
            driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
            async with driver.cursor() as cursor:
                await cursor.execute(sql.encode())  # no parameters: '%' stays itself
                rows = await cursor.fetchmany(max_rows + 1)
                names = [d.name for d in cursor.description or ()]
    except psycopg.errors.QueryCanceled:
        raise QueryTimeout from None
    except psycopg.Error as exc:
        primary = exc.diag.message_primary if exc.diag else None
        raise QueryFailed(primary or str(exc)) from None
    return SqlResult(names, list(rows[:max_rows]), len(rows) > max_rows)
