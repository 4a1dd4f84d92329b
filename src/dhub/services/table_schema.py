"""What a table resource's create, update and delete do to its rows (store/table_rows.py), in
the resource's own transaction (services/resources.py calls these)."""

from __future__ import annotations

from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.resources import ResourceSpec, TableSpec
from dhub.knowledge.tables_schema import WIDENING, column_key, schema_change
from dhub.store import table_rows
from dhub.store.db import Conn


def spec_of(document: str) -> TableSpec:
    return TableSpec.model_validate_json(document, strict=False)


async def created(conn: Conn, resource_id: str, spec: ResourceSpec) -> None:
    if isinstance(spec, TableSpec):
        await table_rows.create(conn, resource_id, spec.columns)


async def deleted(conn: Conn, category: str, resource_id: str) -> None:
    if category == "table":
        await table_rows.drop(conn, resource_id)


async def changed(conn: Conn, resource_id: str, document: str, spec: ResourceSpec) -> None:
    """Alter the rows' table for a new version of the columns, or refuse (422, pointing at
    the column) what the stored rows cannot take."""
    if not isinstance(spec, TableSpec):
        return
    old = spec_of(document)
    change = schema_change(old.columns, spec.columns)
    if not (change.added or change.dropped or change.retyped or change.required):
        return
    table = table_rows.table_of(resource_id, old.columns)
    rows = await table_rows.count(conn, table)
    at = {column_key(c.name): i for i, c in enumerate(spec.columns)}
    errors = []
    if rows:
        for was, now in change.retyped:
            if (was.type, now.type) not in WIDENING:
                errors.append(
                    FieldError(
                        f"/columns/{at[column_key(now.name)]}/type",
                        f"The column '{now.name}' holds {rows} row(s) of {was.type}: its type "
                        f"cannot change to {now.type}. Add a new column instead, or delete "
                        "the rows first (only integer to number keeps every value).",
                        "incompatible_type",
                    )
                )
        for column in change.added:
            if not column.nullable:
                errors.append(
                    FieldError(
                        f"/columns/{at[column_key(column.name)]}/nullable",
                        f"The new column '{column.name}' cannot be required: the table's "
                        f"{rows} row(s) would have no value in it. Add it nullable, fill it, "
                        "then make it required.",
                        "required_column",
                    )
                )
        for column in change.required:
            key = column_key(column.name)
            if await table_rows.has_nulls(conn, table, key):
                errors.append(
                    FieldError(
                        f"/columns/{at[key]}/nullable",
                        f"The column '{column.name}' has rows without a value: fill them "
                        "before making it required.",
                        "required_column",
                    )
                )
    if errors:
        raise InvalidInput(errors)
    await table_rows.alter(conn, resource_id, change)
