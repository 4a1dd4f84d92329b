"""Constant INSERT and UPDATE statements of a hot path (a durable step's rows), run by the
database driver directly, many rows at a time.

SQLAlchemy's per-row parameter handling cost several times the statements themselves
(bench/runs.py), and on PostgreSQL each statement it runs is a round trip of its own (it reads
every result before the next statement). Here each statement is compiled once per dialect;
values still go through the columns' own bind processors, so what is stored is exactly what
SQLAlchemy would store. On SQLite the rows go to ``sqlite3`` on the write connection; on
PostgreSQL all statements of a plan go in one psycopg pipeline: one round trip for all of them.
Driver errors are raised as SQLAlchemy's, so callers still catch ``IntegrityError``.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql as pgsql
from sqlalchemy import Table, insert
from sqlalchemy.dialects.postgresql.psycopg import PGDialectAsync_psycopg
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Insert, Update
from sqlalchemy.sql.base import Executable

from dhub.store import json_codec

_Processor = Callable[[Any], Any]
_MAX_COMPILED = 256
Plan = Sequence[tuple[Executable, Sequence[Mapping[str, Any]]]]  # (statement, its rows)


@dataclass(frozen=True, slots=True)
class _Write:
    sql: str
    defaults: Mapping[str, Any]  # values fixed in the statement itself
    plan: tuple[tuple[str, _Processor | None], ...]  # (bind name, converter), in order

    def row(self, params: Mapping[str, Any]) -> list[Any]:
        values = {**self.defaults, **params} if self.defaults else params
        return [
            value if binder is None else binder(value)
            for name, binder in self.plan
            for value in (values[name],)
        ]


class _Statements:
    """Each statement compiled once for one dialect, with positional parameters."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._compiled: dict[Executable, _Write] = {}

    def __call__(self, statement: Executable) -> _Write:
        found = self._compiled.get(statement)
        if found is None:
            if len(self._compiled) >= _MAX_COMPILED:
                self._compiled.clear()  # statements are module constants: this never happens
            found = self._compiled[statement] = self._compile(statement)
        return found

    def _compile(self, statement: Executable) -> _Write:
        if not isinstance(statement, Insert | Update):
            raise TypeError("bulk writes run INSERT and UPDATE statements only")
        dialect = self._dialect
        compiled = statement.compile(dialect=dialect)
        binds = compiled.binds
        if any(b.expanding for b in binds.values()):
            raise TypeError("bulk writes take no IN (...) parameters")
        defaults = {n: b.value for n, b in binds.items() if not b.required and b.callable is None}
        plan = tuple(
            (name, binds[name].type.dialect_impl(dialect).bind_processor(dialect))
            for name in compiled.positiontup or ()
        )
        return _Write(compiled.string, defaults, plan)


class SqliteBulk:
    def __init__(self) -> None:
        self._statements = _Statements(
            SQLiteDialect_pysqlite(paramstyle="qmark", **json_codec.ENGINE_OPTIONS)  # type: ignore[arg-type]
        )

    def run(self, conn: sqlite3.Connection, plan: Plan) -> list[int]:
        """Each statement of ``plan`` for its rows; how many rows each changed."""
        return [self._one(conn, statement, rows) for statement, rows in plan]

    def _one(
        self, conn: sqlite3.Connection, statement: Executable, rows: Sequence[Mapping[str, Any]]
    ) -> int:
        found = self._statements(statement)
        try:
            if len(rows) == 1:
                return conn.execute(found.sql, found.row(rows[0])).rowcount
            return conn.executemany(found.sql, [found.row(r) for r in rows]).rowcount
        except sqlite3.Error as exc:
            raise DBAPIError.instance(found.sql, None, exc, sqlite3.Error) from exc


class PostgresBulk:
    def __init__(self) -> None:
        self._statements = _Statements(
            PGDialectAsync_psycopg(paramstyle="format", **json_codec.ENGINE_OPTIONS)  # type: ignore[no-untyped-call]
        )

    async def run(self, conn: psycopg.AsyncConnection[Any], plan: Plan) -> list[int]:
        """All of ``plan`` in one pipeline, inside the connection's current transaction."""
        cursors = []
        sql = ""
        try:
            async with conn.pipeline():
                for statement, rows in plan:
                    found = self._statements(statement)
                    sql = found.sql
                    cursor = conn.cursor()
                    if len(rows) == 1:
                        await cursor.execute(found.sql, found.row(rows[0]))
                    else:
                        await cursor.executemany(found.sql, [found.row(r) for r in rows])
                    cursors.append(cursor)
        except psycopg.Error as exc:
            raise DBAPIError.instance(sql, None, exc, psycopg.Error) from exc
        return [cursor.rowcount for cursor in cursors]


# -- many rows into one table (tables' imports) -------------------------------------------------

# Rows (values in column order), a batch at a time, already in the form the driver takes:
# str, int, float, bool or None; dates as ISO text, datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff'
# (how SQLAlchemy stores them in SQLite; PostgreSQL reads it too), JSON as JSON text
# (knowledge/tables_schema.storage).
Batches = Iterator[Sequence[Sequence[Any]]]


class SqliteCopy:
    """Rows into one table by ``executemany`` of one INSERT. Meant to run off the loop
    thread, on the write connection, inside the transaction that holds it."""

    def __init__(self, table: Table) -> None:
        dialect = SQLiteDialect_pysqlite(paramstyle="qmark", **json_codec.ENGINE_OPTIONS)  # type: ignore[arg-type]
        self.sql = str(insert(table).compile(dialect=dialect))

    def run(self, conn: sqlite3.Connection, batches: Batches) -> int:
        count = 0
        for batch in batches:
            try:
                conn.executemany(self.sql, batch)
            except sqlite3.Error as exc:
                raise DBAPIError.instance(self.sql, None, exc, sqlite3.Error) from exc
            count += len(batch)
        return count


class _Null:
    """None in ``csv_text``: written bare as \\N (the csv module quotes anything but numbers,
    and takes this for one), so only a real NULL is an unquoted \\N."""

    def __float__(self) -> float:
        return 0.0

    def __str__(self) -> str:
        return "\\N"


_NULL = _Null()


def csv_text(batch: Sequence[Sequence[Any]]) -> str:
    """A batch as CSV for PostgreSQL's COPY (FORMAT csv, NULL '\\N'): every string quoted
    (so '' and '\\N' stay strings), NULL as a bare \\N, numbers and booleans bare."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    writer.writerows([_NULL if v is None else v for v in row] for row in batch)
    return buffer.getvalue()


class PostgresCopy:
    """Rows into one table by PostgreSQL's own bulk load (COPY ... FROM STDIN, CSV), in the
    connection's current transaction; each batch comes as CSV text (``csv_text``)."""

    def __init__(self, table: Table) -> None:
        names = [column.name for column in table.columns]
        self.statement = pgsql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv, NULL '\\N')").format(
            pgsql.Identifier(table.name), pgsql.SQL(", ").join(map(pgsql.Identifier, names))
        )

    async def run(
        self,
        conn: psycopg.AsyncConnection[Any],
        next_batch: Callable[[], Awaitable[tuple[int, str] | None]],
    ) -> int:
        """``next_batch``: (rows, their CSV text), None at the end."""
        count = 0
        try:
            async with conn.cursor() as cursor, cursor.copy(self.statement) as copy:
                while (batch := await next_batch()) is not None:
                    rows, text = batch
                    await copy.write(text)
                    count += rows
        except psycopg.Error as exc:
            raise DBAPIError.instance("COPY", None, exc, psycopg.Error) from exc
        return count
