"""An ontology's objects and links (knowledge/ontology_*.py checks them; services/ontologies.py
decides who may). Repositories flush; services commit.

Property filters read the properties JSON in SQL: ``json_extract`` / ``json_type`` on SQLite,
``->>`` on PostgreSQL, strings compared byte for byte on both (collation "C"), so a search
answers what ``knowledge.ontology_values.matches`` answers in Python. Text search is a LIKE
per word over ``search_text`` (lowercased title, key and string values): it works alike on
both databases and scans only the ontology's objects (of the type, when one is named).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Text,
    and_,
    cast,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    tuple_,
    update,
)

from dhub.knowledge.ontology_schema import Counts, OntologyBody
from dhub.knowledge.ontology_values import Filter
from dhub.store.agents import _like
from dhub.store.db import Conn
from dhub.store.tables import ontology_links as links
from dhub.store.tables import ontology_objects as objects


@dataclass(frozen=True, slots=True)
class ObjectRecord:
    type: str
    key: str
    properties: dict[str, Any]
    title: str
    created_by: str
    created_at: int
    updated_at: int


_COLUMNS = (
    objects.c.type,
    objects.c.key,
    objects.c.properties,
    objects.c.title,
    objects.c.created_by,
    objects.c.created_at,
    objects.c.updated_at,
)


def _records(rows: Iterable[Sequence[Any]]) -> list[ObjectRecord]:
    return [ObjectRecord(*row) for row in rows]


# -- objects ----------------------------------------------------------------------------------


async def get_objects(
    conn: Conn, ontology_id: str, type_name: str, keys: Collection[str]
) -> dict[str, ObjectRecord]:
    if not keys:
        return {}
    stmt = select(*_COLUMNS).where(
        objects.c.ontology_id == ontology_id,
        objects.c.type == type_name,
        objects.c.key.in_(sorted(keys)),
    )
    return {r.key: r for r in _records((await conn.execute(stmt)).all())}


async def insert_objects(conn: Conn, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(insert(objects), list(rows))


async def update_object(
    conn: Conn, ontology_id: str, type_name: str, key: str, values: dict[str, Any]
) -> None:
    await conn.execute(
        update(objects)
        .where(
            objects.c.ontology_id == ontology_id,
            objects.c.type == type_name,
            objects.c.key == key,
        )
        .values(**values)
    )


async def delete_object(
    conn: Conn, ontology_id: str, type_name: str, key: str, ends: Iterable[tuple[str, bool]]
) -> bool:
    """Delete the object and its links: ``ends`` are (link type, whether this type is the
    link's "from" end) for every link type that touches its type."""
    for link_type, is_from in ends:
        end = links.c.from_key if is_from else links.c.to_key
        await conn.execute(
            delete(links).where(
                links.c.ontology_id == ontology_id, links.c.link_type == link_type, end == key
            )
        )
    done = await conn.execute(
        delete(objects).where(
            objects.c.ontology_id == ontology_id,
            objects.c.type == type_name,
            objects.c.key == key,
        )
    )
    return done.rowcount > 0


async def delete_all(conn: Conn, ontology_id: str) -> None:
    """What goes with the ontology (explicitly: foreign keys may not be enforced)."""
    await conn.execute(delete(links).where(links.c.ontology_id == ontology_id))
    await conn.execute(delete(objects).where(objects.c.ontology_id == ontology_id))


# -- search ---------------------------------------------------------------------------------------


def _value(conn: Conn, name: str, kind: str) -> ColumnElement[Any]:
    """The property's stored value in SQL, comparable with a bound value of its type
    (booleans as the text 'true' / 'false'). ``name`` is an identifier (the schema says so),
    so it is safe inside the path literal."""
    props = objects.c.properties
    if conn.is_sqlite:
        fn = func.json_type if kind == "boolean" else func.json_extract
        return fn(props, literal_column(f"'$.{name}'"))
    text: ColumnElement[Any] = props.op("->>", return_type=Text)(literal_column(f"'{name}'"))
    if kind in ("number", "integer"):
        return cast(text, Float)
    if kind in ("string", "date", "datetime"):
        return text.collate("C")
    return text


def _bound(f: Filter, value: Any) -> Any:
    if f.type == "boolean":
        return "true" if value else "false"
    return value


def _condition(conn: Conn, f: Filter) -> ColumnElement[bool]:
    value = _value(conn, f.property, f.type)
    if f.op == "contains":
        position = func.instr(value, f.value) if conn.is_sqlite else func.strpos(value, f.value)
        return position > 0
    if f.op == "in":
        return value.in_([_bound(f, v) for v in f.value])
    bound = _bound(f, f.value)
    if f.op == "ne":
        return or_(value.is_(None), value != bound)
    ops: dict[str, ColumnElement[bool]] = {
        "eq": value == bound,
        "lt": value < bound,
        "lte": value <= bound,
        "gt": value > bound,
        "gte": value >= bound,
    }
    return ops[f.op]


async def search(
    conn: Conn,
    ontology_id: str,
    type_name: str | None,
    filters: Sequence[Filter],
    words: Sequence[str],
    after: tuple[str, str] | None,
    limit: int,
) -> list[ObjectRecord]:
    """Objects passing every filter with every word in their text, by (type, key)."""
    stmt = select(*_COLUMNS).where(objects.c.ontology_id == ontology_id)
    if type_name is not None:
        stmt = stmt.where(objects.c.type == type_name)
    for f in filters:
        stmt = stmt.where(_condition(conn, f))
    for word in words:
        stmt = stmt.where(objects.c.search_text.like(_like(word), escape="\\"))
    if after is not None:
        stmt = stmt.where(tuple_(objects.c.type, objects.c.key) > tuple_(*after))
    stmt = stmt.order_by(objects.c.type, objects.c.key).limit(limit)
    return _records((await conn.execute(stmt)).all())


# -- links ----------------------------------------------------------------------------------------


async def link_exists(
    conn: Conn, ontology_id: str, link_type: str, from_key: str, to_key: str
) -> bool:
    stmt = select(links.c.from_key).where(
        links.c.ontology_id == ontology_id,
        links.c.link_type == link_type,
        links.c.from_key == from_key,
        links.c.to_key == to_key,
    )
    return (await conn.execute(stmt)).first() is not None


async def linked_keys(
    conn: Conn, ontology_id: str, link_type: str, key: str, forward: bool, limit: int
) -> list[str]:
    """Up to ``limit`` keys at the other end of ``key``'s links of the type."""
    here, there = (
        (links.c.from_key, links.c.to_key) if forward else (links.c.to_key, links.c.from_key)
    )
    stmt = (
        select(there)
        .where(links.c.ontology_id == ontology_id, links.c.link_type == link_type, here == key)
        .order_by(there)
        .limit(limit)
    )
    return [row[0] for row in (await conn.execute(stmt)).all()]


async def insert_links(conn: Conn, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(insert(links), list(rows))


async def delete_link(
    conn: Conn, ontology_id: str, link_type: str, from_key: str, to_key: str
) -> bool:
    done = await conn.execute(
        delete(links).where(
            links.c.ontology_id == ontology_id,
            links.c.link_type == link_type,
            links.c.from_key == from_key,
            links.c.to_key == to_key,
        )
    )
    return done.rowcount > 0


async def follow(
    conn: Conn,
    ontology_id: str,
    link_type: str,
    key: str,
    forward: bool,
    other_type: str,
    after: str | None,
    limit: int,
) -> list[ObjectRecord]:
    """The objects (of ``other_type``) at the other end of ``key``'s links, by key."""
    here, there = (
        (links.c.from_key, links.c.to_key) if forward else (links.c.to_key, links.c.from_key)
    )
    joined = links.join(
        objects,
        and_(
            objects.c.ontology_id == links.c.ontology_id,
            objects.c.type == other_type,
            objects.c.key == there,
        ),
    )
    stmt = (
        select(*_COLUMNS)
        .select_from(joined)
        .where(links.c.ontology_id == ontology_id, links.c.link_type == link_type, here == key)
    )
    if after is not None:
        stmt = stmt.where(there > after)
    stmt = stmt.order_by(there).limit(limit)
    return _records((await conn.execute(stmt)).all())


# -- what a schema change needs to know -----------------------------------------------------------


async def counts(conn: Conn, ontology_id: str, body: OntologyBody) -> Counts:
    """Objects per type, links per link type, and values present per (type, property)."""
    per_type = select(objects.c.type, func.count()).where(objects.c.ontology_id == ontology_id)
    held: dict[str, int] = {
        row[0]: row[1] for row in (await conn.execute(per_type.group_by(objects.c.type))).all()
    }
    per_link = select(links.c.link_type, func.count()).where(links.c.ontology_id == ontology_id)
    linked: dict[str, int] = {
        row[0]: row[1] for row in (await conn.execute(per_link.group_by(links.c.link_type))).all()
    }
    present: dict[tuple[str, str], int] = {}
    for spec in body.object_types:
        if not held.get(spec.name) or not spec.properties:
            continue
        columns = [
            func.count(_value(conn, p.name, "json" if p.type == "boolean" else p.type))
            for p in spec.properties
        ]
        stmt = select(*columns).where(
            objects.c.ontology_id == ontology_id, objects.c.type == spec.name
        )
        row = (await conn.execute(stmt)).first() or ()
        for prop, count in zip(spec.properties, row, strict=False):
            present[(spec.name, prop.name)] = int(count)
    return Counts(held, linked, present)


async def all_of_type(conn: Conn, ontology_id: str, type_name: str) -> list[ObjectRecord]:
    stmt = select(*_COLUMNS).where(
        objects.c.ontology_id == ontology_id, objects.c.type == type_name
    )
    return _records((await conn.execute(stmt)).all())


async def links_at(
    conn: Conn, ontology_id: str, link_type: str, keys: Collection[str], forward: bool
) -> list[tuple[str, str]]:
    """The (from, to) links of the type whose "from" end (``forward``; else "to" end) is
    one of ``keys``."""
    here = links.c.from_key if forward else links.c.to_key
    out: list[tuple[str, str]] = []
    ordered = sorted(keys)
    for start in range(0, len(ordered), 500):
        stmt = select(links.c.from_key, links.c.to_key).where(
            links.c.ontology_id == ontology_id,
            links.c.link_type == link_type,
            here.in_(ordered[start : start + 500]),
        )
        out += [(row[0], row[1]) for row in (await conn.execute(stmt)).all()]
    return out


async def existing_keys(
    conn: Conn, ontology_id: str, type_name: str, keys: Collection[str]
) -> set[str]:
    found: set[str] = set()
    ordered = sorted(keys)
    for start in range(0, len(ordered), 500):
        stmt = select(objects.c.key).where(
            objects.c.ontology_id == ontology_id,
            objects.c.type == type_name,
            objects.c.key.in_(ordered[start : start + 500]),
        )
        found |= {row[0] for row in (await conn.execute(stmt)).all()}
    return found
