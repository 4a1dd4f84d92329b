"""An ontology's objects and links (knowledge/ontology_*.py checks them; services/ontologies.py
decides who may). Repositories flush; services commit.

Property filters read the properties JSON in SQL: ``json_extract`` / ``json_type`` on SQLite,
``->>`` on PostgreSQL, strings compared byte for byte on both (collation "C"), so a search
answers what ``knowledge.ontology_values.matches`` answers in Python. Text search is a LIKE
per word over ``search_text`` (lowercased title, key and string values): it works alike on
both databases and scans only the ontology's objects (of the type, when one is named).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Float,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    text,
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
    params = {"ontology_id": ontology_id, "type": type_name, "keys": sorted(keys)}
    return {r.key: r for r in _records((await conn.execute(_GET, params)).all())}


# Statements built once (SQLite reads compile a statement once per object: store/inline.py).
_GET = select(*_COLUMNS).where(
    objects.c.ontology_id == bindparam("ontology_id"),
    objects.c.type == bindparam("type"),
    objects.c.key.in_(bindparam("keys", expanding=True)),
)


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


def _value(sqlite: bool, name: str, kind: str) -> ColumnElement[Any]:
    """The property's stored value in SQL, comparable with a bound value of its type
    (booleans as the text 'true' / 'false'). ``name`` is an identifier (the schema says so),
    so it is safe inside the path literal."""
    props = objects.c.properties
    if sqlite:
        fn = func.json_type if kind == "boolean" else func.json_extract
        return fn(props, literal_column(f"'$.{name}'"))
    raw: ColumnElement[Any] = props.op("->>", return_type=Text)(literal_column(f"'{name}'"))
    if kind in ("number", "integer"):
        return cast(raw, Float)
    if kind in ("string", "date", "datetime"):
        return raw.collate("C")
    return raw


def _bound(f: Filter, value: Any) -> Any:
    if f.type == "boolean":
        return "true" if value else "false"
    return value


def _condition(sqlite: bool, prop: str, kind: str, op: str, i: int) -> ColumnElement[bool]:
    value = _value(sqlite, prop, kind)
    bound: BindParameter[Any] = bindparam(f"v{i}", expanding=op == "in")
    if op == "contains":
        return (func.instr(value, bound) if sqlite else func.strpos(value, bound)) > 0
    if op == "in":
        return value.in_(bound)
    if op == "ne":
        return or_(value.is_(None), value != bound)
    ops: dict[str, ColumnElement[bool]] = {
        "eq": value == bound,
        "lt": value < bound,
        "lte": value <= bound,
        "gt": value > bound,
        "gte": value >= bound,
    }
    return ops[op]


Shape = tuple[bool, bool, tuple[tuple[str, str, str], ...], int, bool]


@functools.lru_cache(maxsize=512)
def _search_statement(shape: Shape) -> Select[Any]:
    """One search's SELECT, by its shape (whether on SQLite, whether typed, the filters'
    properties and operators, how many words, whether paged): values are bound, so a shape
    is built (and on SQLite compiled) once."""
    sqlite, typed, conditions, word_count, paged = shape
    stmt = select(*_COLUMNS).where(objects.c.ontology_id == bindparam("ontology_id"))
    if typed:
        stmt = stmt.where(objects.c.type == bindparam("type"))
    for i, (prop, kind, op) in enumerate(conditions):
        stmt = stmt.where(_condition(sqlite, prop, kind, op, i))
    for i in range(word_count):
        stmt = stmt.where(objects.c.search_text.like(bindparam(f"w{i}"), escape="\\"))
    if paged:
        after = tuple_(bindparam("after_type"), bindparam("after_key"))
        stmt = stmt.where(tuple_(objects.c.type, objects.c.key) > after)
    return stmt.order_by(objects.c.type, objects.c.key).limit(bindparam("limit"))


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
    conditions = tuple((f.property, f.type, f.op) for f in filters)
    shape = (conn.is_sqlite, type_name is not None, conditions, len(words), after is not None)
    params: dict[str, Any] = {"ontology_id": ontology_id, "type": type_name, "limit": limit}
    for i, f in enumerate(filters):
        value = [_bound(f, v) for v in f.value] if f.op == "in" else _bound(f, f.value)
        params[f"v{i}"] = value
    for i, word in enumerate(words):
        params[f"w{i}"] = _like(word)
    if after is not None:
        params["after_type"], params["after_key"] = after
    if type_name is None:
        del params["type"]
    rows = await conn.execute(_search_statement(shape), params)
    return _records(rows.all())


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
    params = {
        "ontology_id": ontology_id,
        "link_type": link_type,
        "key": key,
        "other_type": other_type,
        "after": after,
        "limit": limit,
    }
    rows = await conn.execute(_follow_statement(forward, after is not None), params)
    return _records(rows.all())


@functools.cache
def _follow_statement(forward: bool, paged: bool) -> Select[Any]:
    here, there = (
        (links.c.from_key, links.c.to_key) if forward else (links.c.to_key, links.c.from_key)
    )
    joined = links.join(
        objects,
        and_(
            objects.c.ontology_id == links.c.ontology_id,
            objects.c.type == bindparam("other_type"),
            objects.c.key == there,
        ),
    )
    stmt = (
        select(*_COLUMNS)
        .select_from(joined)
        .where(
            links.c.ontology_id == bindparam("ontology_id"),
            links.c.link_type == bindparam("link_type"),
            here == bindparam("key"),
        )
    )
    if paged:
        stmt = stmt.where(there > bindparam("after"))
    return stmt.order_by(there).limit(bindparam("limit"))


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
            func.count(_value(conn.is_sqlite, p.name, "json" if p.type == "boolean" else p.type))
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


async def refresh_statistics(conn: Conn) -> None:
    """PostgreSQL's planner statistics of the two tables, after a bulk import: a table that
    grew from little to much is otherwise planned as if small (sequential scans) until the
    autovacuum daemon gets to it. SQLite plans by its indexes without them."""
    if not conn.is_sqlite:
        await conn.execute(text("ANALYZE ontology_objects, ontology_links"))
