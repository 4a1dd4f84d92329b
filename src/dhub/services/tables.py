"""Table rows: list, append, update, delete (docs/tables.md). Each public method is one
transaction; access is the table resource's own (read to see rows, edit to change them),
checked through ResourceService, so a table the caller cannot see answers exactly like a
random id."""

from __future__ import annotations

import asyncio
import base64
import binascii
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy.exc import DBAPIError

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.bounds import MAX_ERRORS
from dhub.domain.errors import Conflict, FieldError, InvalidInput, NotFound
from dhub.domain.pointers import join
from dhub.domain.resources import TableColumn, TableSpec
from dhub.knowledge.tables_import import MAX_PROBLEMS, ImportProblems, Source, batches, infer_fast
from dhub.knowledge.tables_query import compile_query, encode_offset, result_rows
from dhub.knowledge.tables_schema import (
    ROW_ID,
    BadValue,
    Dialect,
    SqlRefused,
    SqlTable,
    column_key,
    from_json,
    physical_name,
    to_json,
)
from dhub.services.resources import ResourceService, ResourceView
from dhub.services.table_schema import spec_of
from dhub.store import table_reads, table_rows
from dhub.store.db import Conn, Database

MAX_APPEND_ROWS = 10_000  # rows in one append request (imports take files)
MAX_PAGE = 1000
QUERY_SECONDS = 10.0  # a structured query's or SQL query's time limit
DEFAULT_SQL_ROWS = 1000
MAX_SQL_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class LoadedTable:
    view: ResourceView
    spec: TableSpec

    @property
    def id(self) -> str:
        return self.view.record.id

    def table(self) -> Any:
        return table_rows.table_of(self.id, self.spec.columns)


def row_json(columns: Sequence[TableColumn], row: Sequence[Any]) -> dict[str, Any]:
    """A stored row (``_row`` first) as the API shows it: by declared column names."""
    out: dict[str, Any] = {ROW_ID: row[0]}
    for column, value in zip(columns, row[1:], strict=True):
        out[column.name] = to_json(value)
    return out


def sql_value(value: Any) -> Any:
    """A value a SQL query returned, as JSON carries it (PostgreSQL gives decimals)."""
    if isinstance(value, Decimal):
        return (
            int(value)
            if value == value.to_integral_value() and abs(value) < 2**53
            else float(value)
        )
    if isinstance(value, bytes):
        return value.hex()
    return to_json(value)


def encode_after(after: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"row": after})).decode().rstrip("=")


def decode_after(cursor: str) -> int:
    try:
        after = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["row"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        after = None
    if type(after) is not int or not 0 <= after < 2**63:
        message = "The cursor is not one this endpoint gave: pass next_cursor as it came."
        raise InvalidInput([FieldError("/query/cursor", message, "invalid_cursor")])
    return after


def check_row(
    columns: Sequence[TableColumn],
    row: Any,
    at: tuple[str | int, ...],
    label: str,
    errors: list[FieldError],
    partial: bool = False,
) -> dict[str, Any]:
    """A JSON row as column key -> stored value; problems go to ``errors``, each naming the
    row (``label``) and column. ``partial``: only the columns given (an update)."""
    if not isinstance(row, dict):
        errors.append(FieldError(join(*at), f"{label}: a row is a JSON object", "type"))
        return {}
    by_key = {column_key(c.name): c for c in columns}
    out: dict[str, Any] = {}
    for name, value in row.items():
        column = by_key.get(column_key(name)) if isinstance(name, str) else None
        if column is None:
            if name == ROW_ID:
                continue  # a row read back and sent again: its id is the server's
            known = ", ".join(c.name for c in columns) or "none"
            errors.append(
                FieldError(
                    join(*at, name),
                    f"{label}: the table has no column '{name}' (its columns: {known})",
                    "unknown_column",
                )
            )
            continue
        out[column_key(column.name)] = _checked(column, value, (*at, name), label, errors)
    for column in columns:
        key = column_key(column.name)
        if key not in out and not partial:
            out[key] = _checked(column, None, (*at, column.name), label, errors)
    return out


def _checked(
    column: TableColumn, value: Any, at: tuple[str | int, ...], label: str, errors: list[FieldError]
) -> Any:
    if value is None:
        if not column.nullable:
            errors.append(
                FieldError(
                    join(*at),
                    f"{label}, column '{column.name}': a value is required",
                    "required",
                )
            )
        return None
    try:
        return from_json(column.type, value)
    except BadValue as exc:
        errors.append(FieldError(join(*at), f"{label}, column '{column.name}': {exc}", "type"))
        return None


class TableService:
    def __init__(self, db: Database, resources: ResourceService) -> None:
        self.db = db
        self.resources = resources
        self.imports = TableImports(self)
        self.query_seconds = QUERY_SECONDS

    async def load(
        self, conn: Conn, principal: Principal, table_id: str, action: policy.Action
    ) -> LoadedTable:
        view = await self.resources.load(conn, principal, "table", table_id, action)
        return LoadedTable(view, spec_of(view.record.document))

    async def rows(
        self, principal: Principal, table_id: str, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        after = decode_after(cursor) if cursor else None
        limit = max(1, min(limit, MAX_PAGE))
        async with self.db.read(snapshot=True) as conn:
            found = await self.load(conn, principal, table_id, "read")
            rows = await table_rows.page(conn, found.table(), after, limit + 1)
        data = [row_json(found.spec.columns, row) for row in rows[:limit]]
        more = len(rows) > limit
        return {"data": data, "next_cursor": encode_after(rows[limit - 1][0]) if more else None}

    async def append(self, principal: Principal, table_id: str, body: Any) -> dict[str, Any]:
        rows = body.get("rows") if isinstance(body, dict) else None
        if not isinstance(rows, list) or not rows or len(rows) > MAX_APPEND_ROWS:
            message = (
                f'Send {{"rows": [{{column: value, ...}}, ...]}} with 1 to {MAX_APPEND_ROWS} '
                "rows (import a file for more: POST /api/v1/tables/{id}/import)."
            )
            raise InvalidInput([FieldError("/rows", message, "type")])
        async with self.db.write() as conn:
            found = await self.load(conn, principal, table_id, "edit")
            errors: list[FieldError] = []
            values = [
                check_row(found.spec.columns, row, ("rows", i), f"row {i + 1}", errors)
                for i, row in enumerate(rows)
            ]
            if errors:
                raise InvalidInput(errors[:MAX_ERRORS])
            ids = await table_rows.insert_rows(conn, found.table(), values)
        return {"inserted": len(ids), "row_ids": ids}

    async def update_row(
        self, principal: Principal, table_id: str, row_id: int, body: Any
    ) -> dict[str, Any]:
        async with self.db.write() as conn:
            found = await self.load(conn, principal, table_id, "edit")
            errors: list[FieldError] = []
            values = check_row(found.spec.columns, body, (), f"row {row_id}", errors, True)
            if errors:
                raise InvalidInput(errors[:MAX_ERRORS])
            table = found.table()
            if values and not await table_rows.update_row(conn, table, row_id, values):
                raise _no_row(table_id, row_id)
            row = await table_rows.get_row(conn, table, row_id)
        if row is None:
            raise _no_row(table_id, row_id)
        return row_json(found.spec.columns, row)

    async def delete_rows(self, principal: Principal, table_id: str, row_ids: Sequence[int]) -> int:
        async with self.db.write() as conn:
            found = await self.load(conn, principal, table_id, "edit")
            return await table_rows.delete_rows(conn, found.table(), row_ids)

    async def query(self, principal: Principal, table_id: str, body: Any) -> dict[str, Any]:
        """A structured query (knowledge/tables_query.py) of a table the caller may read."""
        async with self.db.read(snapshot=True) as conn:
            found = await self.load(conn, principal, table_id, "read")
        compiled = compile_query(body, found.spec.columns, found.table())
        rows = await self._select(compiled.statement)
        limit = compiled.limit
        more = len(rows) > limit
        return {
            "columns": [{"name": c.name, "type": c.type} for c in compiled.columns],
            "rows": result_rows(compiled.columns, rows[:limit]),
            "next_cursor": encode_offset(compiled.offset + limit) if more else None,
        }

    async def _select(self, statement: Any) -> list[Sequence[Any]]:
        try:
            return await table_reads.select_rows(self.db, statement, self.query_seconds)
        except table_reads.QueryTimeout:
            raise InvalidInput([FieldError("", self._timeout(), "timeout")]) from None
        except (sqlite3.OperationalError, DBAPIError) as exc:  # dropped or altered meanwhile
            raise Conflict("The table changed while the query ran: try again.") from exc

    def _timeout(self) -> str:
        return (
            f"The query ran past its time limit ({self.query_seconds:g} s) and was stopped: "
            "filter the rows more, or aggregate them."
        )

    async def sql(
        self,
        principal: Principal,
        sql: Any,
        table_ids: Sequence[str],
        max_rows: int = DEFAULT_SQL_ROWS,
        hide_unreadable: bool = False,
    ) -> dict[str, Any]:
        """Read-only SQL (knowledge/tables_sql.py) over ``table_ids``, each of which the
        caller must be able to read: an id it cannot answers like a random id (NotFound),
        or, with ``hide_unreadable`` (an agent's tables), is left out of the query's tables,
        so naming it gets the same answer as naming a table that does not exist."""
        # The SQL parser is imported at the first query: it takes a noticeable part of a
        # server's start, and most servers never run SQL.
        from dhub.knowledge.tables_sql import SQLITE_FUNCTIONS, check_sql

        tables = await self.readable(principal, table_ids, hide_unreadable)
        dialect: Dialect = "sqlite" if self.db.is_sqlite else "postgres"
        try:
            checked = check_sql(sql, tables, dialect, max_rows)
        except SqlRefused as exc:
            raise InvalidInput([FieldError("/sql", str(exc), "refused")]) from None
        try:
            result = await table_reads.sql_rows(
                self.db,
                checked.sql,
                self.query_seconds,
                max_rows,
                [*(t.physical for t in checked.tables), *checked.ctes],
                SQLITE_FUNCTIONS,
            )
        except table_reads.QueryTimeout:
            raise InvalidInput([FieldError("/sql", self._timeout(), "timeout")]) from None
        except table_reads.QueryFailed as exc:
            message = f"The database refused the query: {exc}"
            raise InvalidInput([FieldError("/sql", message, "refused")]) from None
        return {
            "columns": result.columns,
            "rows": [[sql_value(v) for v in row] for row in result.rows],
            "truncated": result.truncated,
        }

    async def readable(
        self, principal: Principal, table_ids: Sequence[str], hide_unreadable: bool = False
    ) -> list[SqlTable]:
        out = []
        async with self.db.read(snapshot=True) as conn:
            for table_id in dict.fromkeys(table_ids):
                try:
                    found = await self.load(conn, principal, table_id, "read")
                except NotFound:
                    if hide_unreadable:
                        continue
                    raise
                name = found.view.record.name
                physical = physical_name(found.id)
                out.append(SqlTable(found.id, name, physical, found.spec.columns))
        return out

    async def row_count(self, principal: Principal, table_id: str) -> int:
        async with self.db.read(snapshot=True) as conn:
            found = await self.load(conn, principal, table_id, "read")
            return await table_rows.count(conn, found.table())


def _no_row(table_id: str, row_id: int) -> NotFound:
    return NotFound(f"Table '{table_id}' has no row {row_id}.")


def row_ids_of(body: Any) -> list[int]:
    ids = body.get("row_ids") if isinstance(body, Mapping) else None
    if (
        not isinstance(ids, list)
        or not ids
        or len(ids) > MAX_APPEND_ROWS
        or any(type(i) is not int or not 0 < i < 2**63 for i in ids)
    ):
        message = f'Send {{"row_ids": [1, 2, ...]}}: 1 to {MAX_APPEND_ROWS} row ids.'
        raise InvalidInput([FieldError("/row_ids", message, "type")])
    return ids


# -- imports ------------------------------------------------------------------------------------


def _problems(exc: ImportProblems) -> InvalidInput:
    errors = [FieldError("/file", p, "invalid_file") for p in exc.problems]
    count = len(errors)
    more = " (the first 20)" if count >= MAX_PROBLEMS else ""
    return InvalidInput(
        errors,
        f"The file cannot be imported{more}: "
        + "; ".join(exc.problems[:3])
        + ("; ..." if count > 3 else ""),
    )


class TableImports:
    """Tables made from files, and files appended to tables: the rows go in by the
    database's bulk path (store/bulk.py), in one transaction with the table's creation."""

    def __init__(self, tables: TableService) -> None:
        self.tables = tables
        self.db = tables.db

    async def create(
        self, principal: Principal, source: Source, doc: dict[str, Any]
    ) -> tuple[ResourceView, int]:
        """A new table with the file's columns (types inferred) and rows."""
        try:
            columns, arrow = await asyncio.to_thread(infer_fast, source)
        except ImportProblems as exc:
            raise _problems(exc) from None
        body = {**doc, "columns": [c.model_dump(exclude_defaults=True) for c in columns]}
        spec = self.tables.resources.checked("table", body)
        assert isinstance(spec, TableSpec)
        async with self.db.write() as conn:
            view = await self.tables.resources.create_in(conn, principal, spec)
            count = await self._copy(conn, view.record.id, spec, source, arrow)
        return view, count

    async def append(self, principal: Principal, table_id: str, source: Source) -> int:
        """The file's rows appended to a table the caller may edit; columns by name."""
        async with self.db.write() as conn:
            found = await self.tables.load(conn, principal, table_id, "edit")
            return await self._copy(conn, found.id, found.spec, source)

    @staticmethod
    async def _copy(
        conn: Conn, table_id: str, spec: TableSpec, source: Source, arrow: bool = False
    ) -> int:
        table = table_rows.table_of(table_id, spec.columns)
        try:
            rows = batches(source, spec.columns, arrow)
            return await table_rows.copy_rows(conn, table, rows)
        except ImportProblems as exc:
            raise _problems(exc) from None
