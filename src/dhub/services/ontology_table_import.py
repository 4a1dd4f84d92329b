"""Objects and links from the rows of a stored table (``POST /ontologies/{id}/import-table``,
docs/ontologies.md): each row becomes an import item, which ontology_import.py checks and
stores as it does a JSON import, all or nothing, with the same limits.

The body names the table and what each row makes:

- ``objects``: ``{"type", "properties": {property: column}}``, one object of ``type`` a row.
  A property the mapping leaves out takes the column of the same name (any case) if the
  table has one; one mapped to null is left out. Rows that make the same object with the
  same values make it once (a table of orders names each customer many times).
- ``links``: ``{"link_type", "from": column, "to": column}``, one link a row.

Problems point at the row by its id (``_row``) and name the column:
``/rows/12/properties/total: Row 12, column 'amount': 'total' is a number property; ...``.

Access: ``edit`` on the ontology, checked first, so an ontology the caller cannot use
answers as every objects endpoint does; then ``read`` on the table, through TableService.
A table the caller cannot read is refused with the one ``unreachable`` message, word for
word as an id that names nothing (and before anything of its columns is said).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from dhub.access.principal import Principal
from dhub.domain.errors import FieldError, Forbidden, InvalidInput, NotFound
from dhub.domain.pointers import join
from dhub.domain.resources import TableColumn, unreachable
from dhub.knowledge.ontology_schema import ObjectTypeSpec
from dhub.knowledge.tables_schema import column_key, to_json
from dhub.services.ontologies import Opened, open_ontology
from dhub.services.ontology_import import MAX_ITEMS, Item, store_items
from dhub.services.references import UNREACHABLE
from dhub.services.tables import LoadedTable, TableService
from dhub.store import table_rows
from dhub.store.db import Conn

_FIELDS = ("table", "objects", "links")


@dataclass(frozen=True, slots=True)
class _Objects:
    type: str
    columns: dict[str, TableColumn]  # property -> the column its values come from


@dataclass(frozen=True, slots=True)
class _Links:
    link_type: str
    ends: dict[str, TableColumn]  # "from" / "to" -> the column of the keys


async def import_table(
    tables: TableService, principal: Principal, ontology_id: str, body: Any
) -> dict[str, Any]:
    """Objects and links made from every row of the table ``body`` names."""
    async with tables.db.write() as conn:
        opened = await open_ontology(conn, principal, ontology_id, "edit")
        table_id = _table_ref(body)
        found = await _readable(conn, tables, principal, table_id)
        objects, links = _mappings(opened, found.spec.columns, body)
        rows = await _rows(conn, found, objects, links)
        items = _items(rows, objects, links)
        try:
            return await store_items(conn, principal, opened, items, {"table": found.id})
        except InvalidInput as bad:
            raise InvalidInput([_located(e, objects, links) for e in bad.errors]) from None


# -- the body -------------------------------------------------------------------------------


def _table_ref(body: Any) -> str:
    """The table id the body names, once the body has the right shape."""
    shape = (
        'Send {"table": "table.…", "objects": {"type", "properties"}} and/or '
        '"links": {"link_type", "from", "to"}.'
    )
    if not isinstance(body, dict):
        raise InvalidInput([FieldError("", shape, "type")])
    errors = [
        FieldError(
            join(name),
            f"'{name[:80]}' is not a field of a table import: use table, objects and links.",
            "extra_forbidden",
        )
        for name in sorted(set(body) - set(_FIELDS))
    ]
    table_id = body.get("table")
    if not isinstance(table_id, str) or not table_id:
        message = "'table' is the id of a table you can read (table.…)."
        errors.append(FieldError("/table", message, "type" if table_id is not None else "missing"))
    if body.get("objects") is None and body.get("links") is None:
        message = (
            "Say what each row makes: objects {type, properties}, links {link_type, from, to}, "
            "or both."
        )
        errors.append(FieldError("", message, "missing"))
    if errors:
        raise InvalidInput(errors)
    assert isinstance(table_id, str)
    return table_id


async def _readable(
    conn: Conn, tables: TableService, principal: Principal, table_id: str
) -> LoadedTable:
    try:
        return await tables.load(conn, principal, table_id, "read")
    except (NotFound, Forbidden):
        raise InvalidInput(
            [FieldError("/table", unreachable("table", table_id), UNREACHABLE)]
        ) from None


def _mappings(
    opened: Opened, columns: Sequence[TableColumn], body: Mapping[str, Any]
) -> tuple[_Objects | None, _Links | None]:
    errors: list[FieldError] = []
    objects = links = None
    if body.get("objects") is not None:
        objects = _object_mapping(opened, columns, body["objects"], errors)
    if body.get("links") is not None:
        links = _link_mapping(opened, columns, body["links"], errors)
    if errors:
        raise InvalidInput(errors)
    return objects, links


def _by_key(columns: Sequence[TableColumn]) -> dict[str, TableColumn]:
    return {column_key(c.name): c for c in columns}


def _no_column(at: str, name: str, columns: Sequence[TableColumn]) -> FieldError:
    known = ", ".join(c.name for c in columns) or "none"
    return FieldError(
        at, f"The table has no column '{name[:80]}' (its columns: {known}).", "unknown_column"
    )


def _extra(at: str, value: Mapping[str, Any], allowed: tuple[str, ...]) -> list[FieldError]:
    return [
        FieldError(
            join(at, name),
            f"'{name[:80]}' is not a field of {at}: use {', '.join(allowed)}.",
            "extra_forbidden",
        )
        for name in sorted(set(value) - set(allowed))
    ]


def _object_mapping(
    opened: Opened, columns: Sequence[TableColumn], value: Any, errors: list[FieldError]
) -> _Objects | None:
    if not isinstance(value, dict):
        message = '\'objects\' is {"type", "properties": {property: column}}.'
        errors.append(FieldError("/objects", message, "type"))
        return None
    errors += _extra("objects", value, ("type", "properties"))
    name = value.get("type")
    spec = opened.schema.types.get(name) if isinstance(name, str) else None
    if spec is None:
        message = f"Not an object type of this ontology (it has {opened.schema.type_names()})."
        errors.append(FieldError("/objects/type", message, "unknown_type"))
        return None
    mapping = value.get("properties")
    if mapping is not None and not isinstance(mapping, dict):
        message = "'properties' maps property names to column names (null leaves one out)."
        errors.append(FieldError("/objects/properties", message, "type"))
        return None
    chosen = _columns_of(spec, columns, mapping or {}, errors)
    return _Objects(spec.name, chosen)


def _columns_of(
    spec: ObjectTypeSpec,
    columns: Sequence[TableColumn],
    mapping: Mapping[str, Any],
    errors: list[FieldError],
) -> dict[str, TableColumn]:
    """Property -> column: the same-named columns, then the mapping's choices over them."""
    by_key = _by_key(columns)
    declared = {p.name for p in spec.properties}
    chosen = {
        p.name: by_key[column_key(p.name)] for p in spec.properties if column_key(p.name) in by_key
    }
    before = len(errors)
    for prop, column in mapping.items():
        at = join("objects", "properties", prop)
        if prop not in declared:
            listed = ", ".join(sorted(declared))
            message = f"'{spec.name}' has no property '{prop[:80]}' (it has {listed})."
            errors.append(FieldError(at, message, "unknown_property"))
        elif column is None:
            chosen.pop(prop, None)
        elif not isinstance(column, str):
            message = f"Map '{prop}' to a column's name (or to null to leave it out)."
            errors.append(FieldError(at, message, "type"))
        elif column_key(column) not in by_key:
            errors.append(_no_column(at, column, columns))
        else:
            chosen[prop] = by_key[column_key(column)]
    if len(errors) == before:  # what every row would miss: said once, not for each row
        for p in spec.properties:
            if (p.required or p.name == spec.primary_key) and p.name not in chosen:
                what = "the primary key" if p.name == spec.primary_key else "required"
                message = (
                    f"'{p.name}' is {what} of '{spec.name}' and the table has no column of "
                    f'that name: map it to one ("{p.name}": "column").'
                )
                errors.append(FieldError(join("objects", "properties", p.name), message, "missing"))
    return chosen


def _link_mapping(
    opened: Opened, columns: Sequence[TableColumn], value: Any, errors: list[FieldError]
) -> _Links | None:
    if not isinstance(value, dict):
        message = '\'links\' is {"link_type", "from": column, "to": column}.'
        errors.append(FieldError("/links", message, "type"))
        return None
    errors += _extra("links", value, ("link_type", "from", "to"))
    name = value.get("link_type")
    link = opened.schema.links.get(name) if isinstance(name, str) else None
    if link is None:
        names = ", ".join(opened.schema.links) or "none"
        message = f"Not a link type of this ontology (it has {names})."
        errors.append(FieldError("/links/link_type", message, "unknown_link_type"))
        return None
    by_key = _by_key(columns)
    ends: dict[str, TableColumn] = {}
    for end, type_name in (("from", link.from_type), ("to", link.to_type)):
        column = value.get(end)
        at = join("links", end)
        if not isinstance(column, str):
            message = f"'{end}' names the column of the keys of the '{type_name}' objects."
            errors.append(FieldError(at, message, "missing" if column is None else "type"))
        elif column_key(column) not in by_key:
            errors.append(_no_column(at, column, columns))
        else:
            ends[end] = by_key[column_key(column)]
    return _Links(link.name, ends)


# -- the rows -------------------------------------------------------------------------------


async def _rows(
    conn: Conn, found: LoadedTable, objects: _Objects | None, links: _Links | None
) -> list[dict[str, Any]]:
    """Each row (at most what an import takes) as ``_row`` and column key -> JSON value."""
    used = [*(objects.columns.values() if objects else ()), *(links.ends.values() if links else ())]
    keys = list(dict.fromkeys(column_key(c.name) for c in used))
    limit = MAX_ITEMS // ((objects is not None) + (links is not None))
    stored = await table_rows.column_values(conn, found.table(), keys, limit + 1)
    if len(stored) > limit:
        message = (
            f"An import makes at most {MAX_ITEMS} objects and links; this table has more than "
            f"{limit} rows: import from smaller tables."
        )
        raise InvalidInput([FieldError("/table", message, "too_many")])
    return [
        {"_row": row[0], **{k: to_json(v) for k, v in zip(keys, row[1:], strict=True)}}
        for row in stored
    ]


def _items(
    rows: Sequence[dict[str, Any]], objects: _Objects | None, links: _Links | None
) -> list[Item]:
    """The import items the rows make, each at ``/rows/<_row>``: objects first, so the links
    may name them."""
    items: list[Item] = []
    if objects is not None:
        seen: set[bytes] = set()
        for row in rows:
            values = {p: row[column_key(c.name)] for p, c in objects.columns.items()}
            same = _fingerprint(values)  # the same object from another row: made once
            if same not in seen:
                seen.add(same)
                items.append(
                    Item(("rows", row["_row"]), {"type": objects.type, "properties": values})
                )
    if links is not None:
        for row in rows:
            value = {"link_type": links.link_type}
            value |= {end: row[column_key(c.name)] for end, c in links.ends.items()}
            items.append(Item(("rows", row["_row"]), value))
    return items


def _fingerprint(values: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(values)
    except orjson.JSONEncodeError:  # a json cell orjson cannot write (an integer past 64 bits)
        return repr(values).encode()


def _located(error: FieldError, objects: _Objects | None, links: _Links | None) -> FieldError:
    """A problem with an item, saying which row and column it came from."""
    parts = error.loc.split("/")  # "", "rows", id, then "properties", name / "from" / "to"
    if len(parts) < 3 or parts[1] != "rows":
        return error
    column = None
    if len(parts) == 5 and parts[3] == "properties" and objects is not None:
        column = objects.columns.get(parts[4])
    elif len(parts) == 4 and links is not None:
        column = links.ends.get(parts[3])
    where = f"Row {parts[2]}" + (f", column '{column.name}'" if column else "")
    return FieldError(error.loc, f"{where}: {error.message}", error.code)
