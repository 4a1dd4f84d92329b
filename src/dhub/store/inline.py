"""SQLite reads on the event loop thread, through the stdlib driver.

An indexed SQLite read takes microseconds. Handing it to aiosqlite's worker thread costs about
four thread round trips per statement, and SQLAlchemy's execution machinery costs several times
the query itself (measured in bench/api_latency.py). So reads on SQLite compile each statement
once with SQLAlchemy, then run the SQL on a plain ``sqlite3`` connection and convert result
columns with SQLAlchemy's own type processors. WAL mode means these readers never wait for
the writer, so the loop is not blocked on a lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.sql import CompoundSelect, Select
from sqlalchemy.sql.base import Executable

from dhub.store import json_codec

_Processor = Callable[[Any], Any]
_POSTCOMPILE = "__[POSTCOMPILE_{}]"
_MAX_COMPILED = 2048


class Rows:
    """The rows of one statement, fully fetched: the little of SQLAlchemy's Result that the
    repositories use, so both connection kinds can return it."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: Sequence[Sequence[Any]], rowcount: int = -1) -> None:
        self._rows = rows
        self.rowcount = rowcount  # rows a write matched (all of an executemany's); -1: unknown

    def all(self) -> Sequence[Sequence[Any]]:
        return self._rows

    def first(self) -> Sequence[Any] | None:
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def __iter__(self) -> Iterator[Sequence[Any]]:
        return iter(self._rows)


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # bind parameter names, in placeholder order
    expanding: frozenset[str]  # IN (...) parameters that take a list
    defaults: Mapping[str, Any]  # values fixed in the statement itself
    processors: tuple[tuple[int, _Processor], ...]  # (column index, converter), where needed

    def bind(self, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
        values = {**self.defaults, **params}
        if not self.expanding:
            return self.sql, [values[name] for name in self.names]
        sql, flat = self.sql, []
        for name in self.names:
            if name in self.expanding:
                items = list(values[name])
                # An empty list must keep IN false and NOT IN true: NULL would make both unknown.
                marks = ", ".join("?" * len(items)) if items else "SELECT NULL WHERE 0"
                sql = sql.replace(_POSTCOMPILE.format(name), marks, 1)
                flat.extend(items)
            else:
                flat.append(values[name])
        return sql, flat


class InlineReader:
    """A small pool of read connections for one SQLite file, used from the loop thread."""

    def __init__(self, path: str, pragmas: Sequence[str], size: int = 4) -> None:
        self._path = path
        self._pragmas = pragmas
        self._size = size
        self._idle: list[sqlite3.Connection] = []
        self._dialect = SQLiteDialect_pysqlite(
            paramstyle="qmark", json_serializer=json_codec.dumps, json_deserializer=json_codec.loads
        )
        self._compiled: dict[Executable, _Compiled] = {}

    def _connect(self) -> sqlite3.Connection:
        # check_same_thread=False: test clients run the loop in a portal thread of their own.
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        for pragma in self._pragmas:
            conn.execute(f"PRAGMA {pragma}")
        return conn

    @contextmanager
    def connection(self, snapshot: bool) -> Iterator[InlineConnection]:
        conn = self._idle.pop() if self._idle else self._connect()
        try:
            if snapshot:
                conn.execute("BEGIN")
            yield InlineConnection(self, conn)
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if len(self._idle) < self._size:
                self._idle.append(conn)
            else:
                conn.close()

    def compile(self, statement: Executable) -> _Compiled:
        # Keyed by identity: hot statements are built once (module constants, or cached per
        # shape); the bound keeps statements built per call from growing it without end.
        found = self._compiled.get(statement)
        if found is None:
            if len(self._compiled) >= _MAX_COMPILED:
                self._compiled.clear()
            found = self._compiled[statement] = self._compile(statement)
        return found

    def _compile(self, statement: Executable) -> _Compiled:
        if not isinstance(statement, Select | CompoundSelect):
            raise TypeError("inline reads run SELECT statements only")
        compiled = statement.compile(dialect=self._dialect)
        binds = compiled.binds
        expanding = frozenset(n for n, b in binds.items() if b.expanding)
        defaults = {n: b.value for n, b in binds.items() if not b.required and b.callable is None}
        processors = tuple(
            (i, processor)
            for i, column in enumerate(statement.selected_columns)
            if (
                processor := column.type.dialect_impl(self._dialect).result_processor(
                    self._dialect, None
                )
            )
        )
        names = tuple(compiled.positiontup or ())
        return _Compiled(compiled.string, names, expanding, defaults, processors)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class InlineConnection:
    __slots__ = ("_conn", "_reader")

    def __init__(self, reader: InlineReader, conn: sqlite3.Connection) -> None:
        self._reader = reader
        self._conn = conn

    def execute(self, statement: Executable, params: Mapping[str, Any] | None) -> Rows:
        compiled = self._reader.compile(statement)
        sql, values = compiled.bind(params or {})
        rows = self._conn.execute(sql, values).fetchall()
        if compiled.processors:
            rows = [_process(row, compiled.processors) for row in rows]
        return Rows(rows)


def _process(row: tuple[Any, ...], processors: tuple[tuple[int, _Processor], ...]) -> list[Any]:
    out = list(row)
    for i, processor in processors:
        out[i] = processor(out[i])
    return out
