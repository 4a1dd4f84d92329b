"""Prompt, tool, actor and role rows (one table, by ``category``) and their versions.

Owners, grants, markings and tags are the generic ``resource_*`` tables agents use, so the
access model is the agents' own (store/sharing.py); the queries here mirror store/agents.py.
Repositories flush; services commit.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    bindparam,
    delete,
    func,
    insert,
    null,
    or_,
    select,
    update,
)

from dhub.store import sharing, tree
from dhub.store.agents import (  # the owner and grant parts of a query are the agents' own
    _OWNER_COLUMNS,
    _SCOPE_BY_RANK,
    Visibility,
    _grant_rank,
    _like,
    _owner,
    _with_owners,
    with_above,
)
from dhub.store.db import Conn
from dhub.store.tables import (
    resource_grants,
    resource_markings,
    resource_owners,
    resource_tags,
    resource_versions,
    resources,
)


@dataclass(frozen=True, slots=True)
class ResourceRecord:
    id: str
    category: str
    name: str
    folder_id: str | None
    version: int
    document: str
    is_builtin: bool
    markings: str  # JSON list of marking ids
    created_by: str
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class ResourceRow:
    """A resource with its owners (with display fields) and the caller's best grant."""

    record: ResourceRecord
    owners: list[dict[str, Any]]
    grant: str | None
    above: tree.Inherited = tree.NOTHING  # from the folders and collection above it


@dataclass(frozen=True, slots=True)
class ResourceFilter:
    q: str | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    collection_id: str | None = None
    folder_id: str | None = None
    type: str | None = None


_RECORD_COLUMNS = (
    resources.c.id,
    resources.c.category,
    resources.c.name,
    resources.c.folder_id,
    resources.c.version,
    resources.c.document,
    resources.c.is_builtin,
    resources.c.markings,
    resources.c.created_by,
    resources.c.created_at,
    resources.c.updated_at,
)
_WIDTH = len(_RECORD_COLUMNS)


def _rows_to_resources(rows: Sequence[Any]) -> list[ResourceRow]:
    """Rows of (resource columns..., grant rank, owner columns...) into one ResourceRow per
    resource, by id, owners by principal id."""
    out: list[ResourceRow] = []
    last_id = None
    owners: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: (r[0], r[_WIDTH + 1] or "")):
        if row[0] != last_id:
            last_id, owners = row[0], []
            record = ResourceRecord(*row[:_WIDTH])
            out.append(ResourceRow(record, owners, _SCOPE_BY_RANK.get(row[_WIDTH])))
        if row[_WIDTH + 1] is not None:
            owners.append(_owner(*row[_WIDTH + 1 :]))
    return out


async def insert_resource(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(resources).values(values))


async def update_resource(conn: Conn, resource_id: str, values: dict[str, Any]) -> None:
    await conn.execute(update(resources).where(resources.c.id == resource_id).values(values))


async def delete_resource(conn: Conn, resource_id: str) -> None:
    # Explicit deletes keep this correct even where foreign keys are not enforced.
    await conn.execute(
        delete(resource_versions).where(resource_versions.c.resource_id == resource_id)
    )
    await conn.execute(delete(resource_tags).where(resource_tags.c.resource_id == resource_id))
    await conn.execute(delete(resource_owners).where(resource_owners.c.resource_id == resource_id))
    await conn.execute(delete(resource_grants).where(resource_grants.c.resource_id == resource_id))
    await sharing.bump_epoch(conn)
    await conn.execute(
        delete(resource_markings).where(resource_markings.c.resource_id == resource_id)
    )
    await conn.execute(delete(resources).where(resources.c.id == resource_id))
    await tree.remove(conn, resource_id)


_GET = (
    select(*_RECORD_COLUMNS, _grant_rank(resources.c.id), *_OWNER_COLUMNS)
    .select_from(_with_owners(resources, resources.c.id))
    .where(resources.c.id == bindparam("resource_id"))
)
_LOCK = select(resources.c.id).where(resources.c.id == bindparam("resource_id")).with_for_update()


async def get_resource(
    conn: Conn, resource_id: str, principals: Sequence[str]
) -> ResourceRow | None:
    """The resource, its owners and the caller's best grant, in one statement; in a write
    transaction its row is locked first (see store.agents.get_agent)."""
    if conn.writing:
        await conn.execute(_LOCK, {"resource_id": resource_id})
    params = {"resource_id": resource_id, "principals": list(principals)}
    found = _rows_to_resources((await conn.execute(_GET, params)).all())
    return (await with_above(conn, found, principals))[0] if found else None


_GET_MANY = (
    select(*_RECORD_COLUMNS, _grant_rank(resources.c.id), *_OWNER_COLUMNS)
    .select_from(_with_owners(resources, resources.c.id))
    .where(resources.c.id.in_(bindparam("ids", expanding=True)))
)


async def get_resources(
    conn: Conn, ids: Collection[str], principals: Sequence[str]
) -> dict[str, ResourceRow]:
    """The resources of ``ids`` that exist, by id, each with its owners and the best grant to
    ``principals`` (no locks: for reading references)."""
    if not ids:
        return {}
    params = {"ids": sorted(set(ids)), "principals": list(principals)}
    rows = _rows_to_resources((await conn.execute(_GET_MANY, params)).all())
    return {r.record.id: r for r in await with_above(conn, rows, principals)}


_FIND_BY_NAME = select(resources.c.id).where(
    resources.c.category == bindparam("category"),
    resources.c.folder_key == bindparam("folder_key"),
    resources.c.name == bindparam("name"),
)


async def find_by_name(conn: Conn, category: str, key: str, name: str) -> str | None:
    """The id of the resource of ``category`` holding ``name`` in that folder (``key``: see
    store.agents.folder_key), if any."""
    params = {"category": category, "folder_key": key, "name": name}
    holder: str | None = (await conn.execute(_FIND_BY_NAME, params)).scalar()
    return holder


_EQUALITY_FILTERS = ("name", "collection_id", "folder_id", "type")


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a list statement looks like, without the values (statements are cached per
    shape, as in store.agents)."""

    q: bool
    equal: tuple[str, ...]
    tags: int
    restricted: bool
    marked: bool
    after: bool


def _shape_and_values(
    category: str, flt: ResourceFilter, visible: Visibility, after_id: str | None, limit: int
) -> tuple[_Shape, dict[str, Any]]:
    values: dict[str, Any] = {"limit": limit, "category": category}
    if flt.q:
        values["q"] = _like(flt.q)
    equal = tuple(name for name in _EQUALITY_FILTERS if getattr(flt, name) is not None)
    values.update({name: getattr(flt, name) for name in equal})
    tags = list(dict.fromkeys(flt.tags))
    values.update({f"tag_{i}": tag for i, tag in enumerate(tags)})
    values["principals"] = list(visible.principals)
    marked = visible.held_markings is not None
    if visible.held_markings is not None:
        values["held"] = list(visible.held_markings)
    if after_id is not None:
        values["after_id"] = after_id
    shape = _Shape(bool(flt.q), equal, len(tags), visible.restricted, marked, after_id is not None)
    return shape, values


@functools.lru_cache(maxsize=256)
def _list_statement(shape: _Shape) -> Select[Any]:
    conds: list[ColumnElement[bool]] = [resources.c.category == bindparam("category")]
    if shape.q:
        pattern: BindParameter[str] = bindparam("q")
        conds.append(
            or_(
                func.lower(resources.c.name).like(pattern, escape="\\"),
                func.lower(func.coalesce(resources.c.alias, "")).like(pattern, escape="\\"),
                func.lower(resources.c.description).like(pattern, escape="\\"),
            )
        )
    conds.extend(resources.c[name] == bindparam(name) for name in shape.equal)
    conds.extend(  # "all of": one EXISTS per distinct tag
        select(resource_tags.c.resource_id)
        .where(
            resource_tags.c.resource_id == resources.c.id,
            resource_tags.c.tag == bindparam(f"tag_{i}"),
        )
        .exists()
        for i in range(shape.tags)
    )
    if shape.restricted:
        conds.append(resources.c.id.in_(bindparam("candidates", expanding=True)))
    if shape.marked:
        conds.append(_markings_held(bindparam("held", expanding=True)))
    if shape.after:
        conds.append(resources.c.id > bindparam("after_id"))
    page = (
        select(*_RECORD_COLUMNS)
        .where(*conds)
        .order_by(resources.c.id)
        .limit(bindparam("limit", type_=Integer))
        .subquery()
    )
    grant = null() if shape.restricted else _grant_rank(page.c.id)
    return select(*page.c, grant, *_OWNER_COLUMNS).select_from(_with_owners(page, page.c.id))


def _markings_held(held: BindParameter[Any]) -> ColumnElement[bool]:
    """Rows carrying no marking outside ``held``, inherited ones included."""
    return ~tree.carries_unheld(resources.c.id, held)


def _category_range(ids: list[str], category: str) -> tuple[int, int]:
    """Where the ids of ``category`` (``<category>.<ulid>``) sit in the sorted ``ids``."""
    prefix = f"{category}."
    # "/" follows "." in ASCII: every id with the prefix sorts before prefix[:-1] + "/".
    return bisect.bisect_left(ids, prefix), bisect.bisect_left(ids, f"{category}/")


async def list_resources(
    conn: Conn,
    category: str,
    flt: ResourceFilter,
    visible: Visibility,
    after_id: str | None,
    limit: int,
    reach: sharing.Reach | None = None,
) -> list[ResourceRow]:
    """A page of ``category`` ordered by id (creation order), as store.agents.list_agents
    pages agents: a restricted caller's candidates come from its ``reach``."""
    if not visible.restricted:
        shape, values = _shape_and_values(category, flt, visible, after_id, limit)
        page = _rows_to_resources((await conn.execute(_list_statement(shape), values)).all())
        return await with_above(conn, page, visible.principals)
    if reach is None:
        reach = await sharing.reach_of(conn, visible.principals, visible.held_markings or ())
    visible = dataclasses.replace(visible, held_markings=None)  # the reach checked them
    ids = reach.ids
    start, stop = _category_range(ids, category)
    if after_id is not None:
        start = max(start, bisect.bisect_right(ids, after_id))
    found: list[ResourceRow] = []
    window = limit
    while start < stop and len(found) < limit:
        chunk = ids[start : min(start + window, stop)]
        shape, values = _shape_and_values(category, flt, visible, None, limit - len(found))
        values["candidates"] = list(chunk)
        rows = (await conn.execute(_list_statement(shape), values)).all()
        found += [
            ResourceRow(r.record, r.owners, reach.grants.get(r.record.id))
            for r in _rows_to_resources(rows)
        ]
        start += len(chunk)
        window *= 2
    # What comes down the tree is in the reach: no look up it (bench/access_list.py --tree).
    return [
        dataclasses.replace(r, above=tree.from_reach(reach, r.record.id)) for r in found[:limit]
    ]


# -- versions -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VersionRecord:
    version: int
    document: str
    created_by: str
    created_at: int


async def insert_version(
    conn: Conn, resource_id: str, version: int, document: str, created_by: str, created_at: int
) -> None:
    await conn.execute(
        insert(resource_versions).values(
            resource_id=resource_id,
            version=version,
            document=document,
            created_by=created_by,
            created_at=created_at,
        )
    )


_VERSION_COLUMNS = (
    resource_versions.c.version,
    resource_versions.c.document,
    resource_versions.c.created_by,
    resource_versions.c.created_at,
)
_LIST_VERSIONS = (
    select(*_VERSION_COLUMNS)
    .where(resource_versions.c.resource_id == bindparam("resource_id"))
    .order_by(resource_versions.c.version.desc())
)
_GET_VERSION = select(*_VERSION_COLUMNS).where(
    resource_versions.c.resource_id == bindparam("resource_id"),
    resource_versions.c.version == bindparam("version"),
)


async def list_versions(conn: Conn, resource_id: str) -> list[VersionRecord]:
    """Newest first."""
    rows = await conn.execute(_LIST_VERSIONS, {"resource_id": resource_id})
    return [VersionRecord(*r) for r in rows]


async def get_version(conn: Conn, resource_id: str, version: int) -> VersionRecord | None:
    params = {"resource_id": resource_id, "version": version}
    row = (await conn.execute(_GET_VERSION, params)).first()
    return VersionRecord(*row) if row else None
