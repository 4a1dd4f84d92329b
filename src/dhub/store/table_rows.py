"""The rows of table resources: one database table per resource (``kt_<id>``, see
knowledge/tables_schema.py) with a ``_row`` id and one typed column per declared column
(named by its lowercase name). Created, altered and dropped in the transaction that changes
the resource. Repositories flush; services commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Double,
    Integer,
    MetaData,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateTable
from sqlalchemy.types import TypeEngine

from dhub.domain.resources import ColumnType, TableColumn
from dhub.knowledge.tables_schema import ROW_ID, SchemaChange, column_key, physical_name
from dhub.store.bulk import Batches
from dhub.store.db import Conn

SQL_TYPES: dict[ColumnType, TypeEngine[Any]] = {
    "string": Text(),
    "number": Double(),
    "integer": BigInteger(),
    "boolean": Boolean(),
    "date": Date(),
    "datetime": DateTime(),
    "json": JSON(none_as_null=True),
}
_DIALECTS: dict[str, Dialect] = {
    "sqlite": sqlite.dialect(),
    "postgresql": postgresql.dialect(),  # type: ignore[no-untyped-call]
}


def table_of(resource_id: str, columns: Sequence[TableColumn]) -> Table:
    """The SQLAlchemy table of a resource's rows; column keys are the lowercase names."""
    return Table(
        physical_name(resource_id),
        MetaData(),
        Column(
            ROW_ID,
            BigInteger().with_variant(Integer(), "sqlite"),  # SQLite: the rowid itself
            primary_key=True,
            autoincrement=True,
        ),
        *(Column(column_key(c.name), SQL_TYPES[c.type]) for c in columns),
        sqlite_autoincrement=True,  # ids of deleted rows are never used again
    )


async def create(conn: Conn, resource_id: str, columns: Sequence[TableColumn]) -> None:
    await conn.execute(CreateTable(table_of(resource_id, columns)))


async def drop(conn: Conn, resource_id: str) -> None:
    name = _quote(conn, physical_name(resource_id))
    await conn.execute(text(f"DROP TABLE IF EXISTS {name}"))


def _quote(conn: Conn, name: str) -> str:
    return _DIALECTS[conn.dialect].identifier_preparer.quote(name)


def _type_sql(conn: Conn, kind: ColumnType) -> str:
    return SQL_TYPES[kind].compile(dialect=_DIALECTS[conn.dialect])


async def alter(conn: Conn, resource_id: str, change: SchemaChange) -> None:
    """Apply a checked schema change (services/tables.py decides what a table with rows may
    take): drop and add columns, widen integers to numbers. Names are checked identifiers,
    quoted by the dialect."""
    table = _quote(conn, physical_name(resource_id))
    for column in change.dropped:
        name = _quote(conn, column_key(column.name))
        await conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {name}"))
    for old, new in change.retyped:
        name = _quote(conn, column_key(new.name))
        if (old.type, new.type) == ("integer", "number"):
            if conn.dialect == "postgresql":  # SQLite keeps any number in any column
                sql_type = _type_sql(conn, new.type)
                await conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN {name} TYPE {sql_type}"))
            continue
        await conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {name}"))  # empty table
        await conn.execute(
            text(f"ALTER TABLE {table} ADD COLUMN {name} {_type_sql(conn, new.type)}")
        )
    for column in change.added:
        name = _quote(conn, column_key(column.name))
        sql_type = _type_sql(conn, column.type)
        await conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}"))


async def count(conn: Conn, table: Table) -> int:
    found: int = (await conn.execute(select(func.count()).select_from(table))).scalar() or 0
    return found


async def has_nulls(conn: Conn, table: Table, key: str) -> bool:
    statement = select(table.c[ROW_ID]).where(table.c[key].is_(None)).limit(1)
    return (await conn.execute(statement)).first() is not None


async def insert_rows(conn: Conn, table: Table, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """A few rows (an API append), each with every column key; their new row ids, in order."""
    ids = []
    for row in rows:  # RETURNING of a multi-row INSERT keeps no order on every backend
        statement = insert(table).values(dict(row)).returning(table.c[ROW_ID])
        ids.append(int((await conn.execute(statement)).scalar()))
    return ids


async def copy_rows(conn: Conn, table: Table, batches: Batches) -> int:
    """Many rows (values in the order of ``table``'s columns after ``_row``) by the
    database's bulk path."""
    data = Table(table.name, MetaData(), *(Column(c.name, c.type) for c in table.columns[1:]))
    return await conn.copy_rows(data, batches)


async def page(conn: Conn, table: Table, after: int | None, limit: int) -> Sequence[Sequence[Any]]:
    """Rows by ``_row``, from after ``after``: ``_row`` first, then the columns in order."""
    statement = select(*table.columns).order_by(table.c[ROW_ID]).limit(limit)
    if after is not None:
        statement = statement.where(table.c[ROW_ID] > after)
    return (await conn.execute(statement)).all()


async def column_values(
    conn: Conn, table: Table, keys: Sequence[str], limit: int
) -> Sequence[Sequence[Any]]:
    """The first ``limit`` rows by ``_row``: ``_row``, then the columns ``keys`` in order."""
    columns = [table.c[ROW_ID], *(table.c[k] for k in keys)]
    statement = select(*columns).order_by(table.c[ROW_ID]).limit(limit)
    return (await conn.execute(statement)).all()


async def get_row(conn: Conn, table: Table, row_id: int) -> Sequence[Any] | None:
    statement = select(*table.columns).where(table.c[ROW_ID] == row_id)
    return (await conn.execute(statement)).first()


async def update_row(conn: Conn, table: Table, row_id: int, values: Mapping[str, Any]) -> bool:
    statement = update(table).where(table.c[ROW_ID] == row_id).values(dict(values))
    return (await conn.execute(statement)).rowcount > 0


async def delete_rows(conn: Conn, table: Table, row_ids: Sequence[int]) -> int:
    statement = delete(table).where(table.c[ROW_ID].in_(list(row_ids)))
    return (await conn.execute(statement)).rowcount
