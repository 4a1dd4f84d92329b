"""Agent rows, their versions, tags and owners. Repositories flush; services commit."""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    bindparam,
    case,
    delete,
    func,
    insert,
    null,
    or_,
    select,
    update,
)

from dhub.domain.agent import BUILTIN_FOLDER
from dhub.store import sharing, tree
from dhub.store.db import Conn

if TYPE_CHECKING:
    from dhub.store.resources import ResourceRow
from dhub.store.tables import (
    agent_versions,
    agents,
    groups,
    resource_grants,
    resource_markings,
    resource_owners,
    resource_tags,
    users,
)


@dataclass(frozen=True, slots=True)
class AgentRecord:
    id: str
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
class AgentRow:
    """An agent with what access decisions need: its owners (with display fields) and the best
    scope granted to the caller's principals (None: no grant)."""

    record: AgentRecord
    owners: list[dict[str, Any]]
    grant: str | None
    above: tree.Inherited = tree.NOTHING  # from the folders and collection above it


_Row = TypeVar("_Row", bound="AgentRow | ResourceRow")


@dataclass(frozen=True, slots=True)
class AgentFilter:
    q: str | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    collection_id: str | None = None
    folder_id: str | None = None
    mode: str | None = None
    input_mode: str | None = None
    type: str | None = None
    is_builtin: bool | None = None


_RECORD_COLUMNS = (
    agents.c.id,
    agents.c.name,
    agents.c.folder_id,
    agents.c.version,
    agents.c.document,
    agents.c.is_builtin,
    agents.c.markings,
    agents.c.created_by,
    agents.c.created_at,
    agents.c.updated_at,
)


# The built-in agents' names are unique among themselves, apart from every folder: a built-in
# never takes a name from anyone's folder, nor blocks one (services/builtins.py). No folder_id
# may be this (engine/validate.py), so no one's agent can squat a built-in's name either.
BUILTIN_FOLDER_KEY = BUILTIN_FOLDER


def folder_key(folder_id: str | None, collection_id: str | None = None) -> str:
    """Where a name must be unique: its folder, else its collection's top level."""
    return folder_id or collection_id or ""


async def insert_agent(conn: Conn, values: dict[str, Any]) -> None:
    await conn.execute(insert(agents).values(values))


async def update_agent(conn: Conn, agent_id: str, values: dict[str, Any]) -> None:
    await conn.execute(update(agents).where(agents.c.id == agent_id).values(values))


async def delete_agent(conn: Conn, agent_id: str) -> None:
    # Explicit deletes keep this correct even where foreign keys are not enforced.
    await conn.execute(delete(agent_versions).where(agent_versions.c.agent_id == agent_id))
    await conn.execute(delete(resource_tags).where(resource_tags.c.resource_id == agent_id))
    await conn.execute(delete(resource_owners).where(resource_owners.c.resource_id == agent_id))
    await conn.execute(delete(resource_grants).where(resource_grants.c.resource_id == agent_id))
    await sharing.bump_epoch(conn)
    await conn.execute(delete(resource_markings).where(resource_markings.c.resource_id == agent_id))
    await conn.execute(delete(agents).where(agents.c.id == agent_id))
    await tree.remove(conn, agent_id)


async def builtin_ids(conn: Conn) -> list[str]:
    """The ids of the built-in agents stored, whatever release installed them."""
    found = await conn.execute(select(agents.c.id).where(agents.c.is_builtin.is_(True)))
    return [row[0] for row in found]


_OWNER_COLUMNS = (
    resource_owners.c.principal_id,
    func.coalesce(users.c.display_name, groups.c.display_name),
    users.c.avatar_url,
    users.c.avatar_config,
    users.c.email,
)
SCOPE_RANK = {"viewer": 1, "runner": 2, "editor": 3}
_SCOPE_BY_RANK = {rank: scope for scope, rank in SCOPE_RANK.items()}


def _with_owners(source: Any, id_column: Any) -> Any:
    """``source`` outer-joined to its owners and their display fields (users or groups)."""
    owners = source.outerjoin(resource_owners, resource_owners.c.resource_id == id_column)
    with_users = owners.outerjoin(users, users.c.id == resource_owners.c.principal_id)
    return with_users.outerjoin(groups, groups.c.id == resource_owners.c.principal_id)


def _grant_rank(id_column: Any) -> Any:
    """The best scope granted on the resource to any of the caller's ``principals``, as a rank."""
    rank = case(
        *((resource_grants.c.scope == scope, value) for scope, value in SCOPE_RANK.items()),
        else_=0,
    )
    return (
        select(func.max(rank))
        .where(
            resource_grants.c.resource_id == id_column,
            resource_grants.c.principal_id.in_(bindparam("principals", expanding=True)),
        )
        .scalar_subquery()
    )


# Built once: building a select costs more than running it on SQLite (bench/api_latency.py).
_GET_AGENT = (
    select(*_RECORD_COLUMNS, _grant_rank(agents.c.id), *_OWNER_COLUMNS)
    .select_from(_with_owners(agents, agents.c.id))
    .where(agents.c.id == bindparam("agent_id"))
)


_LOCK_AGENT = select(agents.c.id).where(agents.c.id == bindparam("agent_id")).with_for_update()


def _rows_to_agents(rows: Sequence[Any]) -> list[AgentRow]:
    """Rows of (agent columns..., grant rank, owner columns...) into one AgentRow per agent,
    agents by id and owners by principal id (sorted here, not in SQL: see _list_statement)."""
    width = len(_RECORD_COLUMNS)
    out: list[AgentRow] = []
    last_id = None
    owners: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: (r[0], r[width + 1] or "")):
        if row[0] != last_id:
            last_id, owners = row[0], []
            out.append(AgentRow(AgentRecord(*row[:width]), owners, _SCOPE_BY_RANK.get(row[width])))
        if row[width + 1] is not None:
            owners.append(_owner(*row[width + 1 :]))
    return out


async def with_above(conn: Conn, rows: list[_Row], principals: Sequence[str]) -> list[_Row]:
    """``rows`` (AgentRow or ResourceRow) with what ``principals`` inherit on each from the
    folders and collection above it."""
    found = await tree.inherited(conn, [r.record.id for r in rows], principals)
    return [dataclasses.replace(r, above=found[r.record.id]) if r.record.id in found else r
            for r in rows]  # fmt: skip


async def get_agent(conn: Conn, agent_id: str, principals: Sequence[str]) -> AgentRow | None:
    """The agent, its owners and the caller's best grant, in one statement. In a write
    transaction the agent's row is locked first, so concurrent changes to one agent (owners,
    grants, markings are replaced by delete-then-insert) queue instead of colliding on
    PostgreSQL; SQLite already serialises writers."""
    if conn.writing:
        await conn.execute(_LOCK_AGENT, {"agent_id": agent_id})
    params = {"agent_id": agent_id, "principals": list(principals)}
    found = _rows_to_agents((await conn.execute(_GET_AGENT, params)).all())
    return (await with_above(conn, found, principals))[0] if found else None


_GET_AGENTS = (
    select(*_RECORD_COLUMNS, _grant_rank(agents.c.id), *_OWNER_COLUMNS)
    .select_from(_with_owners(agents, agents.c.id))
    .where(agents.c.id.in_(bindparam("ids", expanding=True)))
)


async def get_agents(
    conn: Conn, ids: Sequence[str], principals: Sequence[str]
) -> dict[str, AgentRow]:
    """The agents of ``ids`` that exist, by id, with owners and the best grant to
    ``principals``; no row locks (for reading references to agents, e.g. roles)."""
    if not ids:
        return {}
    params = {"ids": sorted(set(ids)), "principals": list(principals)}
    rows = _rows_to_agents((await conn.execute(_GET_AGENTS, params)).all())
    return {r.record.id: r for r in await with_above(conn, rows, principals)}


async def find_by_name(conn: Conn, key: str, name: str) -> str | None:
    """The id of the agent holding ``name`` in that folder (``key``: see folder_key), if any."""
    stmt = select(agents.c.id).where(agents.c.folder_key == key, agents.c.name == name)
    holder: str | None = (await conn.execute(stmt)).scalar()
    return holder


async def names_taken(conn: Conn, key: str, prefix: str) -> set[str]:
    """The names starting with ``prefix`` held in that folder (``key``: see folder_key) or by
    a built-in."""
    keys = [key, BUILTIN_FOLDER_KEY]
    stmt = select(agents.c.name).where(
        agents.c.folder_key.in_(keys), agents.c.name.startswith(prefix, autoescape=True)
    )
    return {str(row[0]) for row in await conn.execute(stmt)}


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True, slots=True)
class Visibility:
    """Which agents a caller may see, as the access policy decides it; the store renders it as
    SQL. ``restricted``: only agents owned by or granted to one of ``principals`` (admins are
    not restricted). Either way, only agents whose every marking is in ``held_markings``."""

    principals: tuple[str, ...]
    restricted: bool
    held_markings: tuple[str, ...] | None  # None: no marking check (internal callers only)
    builtins: bool = False  # restricted callers see the built-in agents too

    @classmethod
    def everything(cls) -> Visibility:
        """No access checks at all: for the platform's own jobs, and as the baseline that
        bench/access_list.py compares a caller's list against."""
        return cls(principals=(), restricted=False, held_markings=None)


_EQUALITY_FILTERS = (
    "name", "collection_id", "folder_id", "mode", "input_mode", "type", "is_builtin"
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a list statement looks like, without the values: statements are cached per shape,
    because building one costs more than running it on SQLite (bench/api_latency.py)."""

    q: bool
    equal: tuple[str, ...]
    tags: int
    restricted: bool
    marked: bool
    after: bool
    markers: bool = False  # only each agent's Marker, no document, owners or grant


def _shape_and_values(
    flt: AgentFilter, visible: Visibility, after_id: str | None, limit: int, markers: bool = False
) -> tuple[_Shape, dict[str, Any]]:
    values: dict[str, Any] = {"limit": limit}
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
    after = after_id is not None
    shape = _Shape(bool(flt.q), equal, len(tags), visible.restricted, marked, after, markers)
    return shape, values


@functools.lru_cache(maxsize=512)
def _list_statement(shape: _Shape) -> Select[Any]:
    conds: list[ColumnElement[bool]] = []
    if shape.q:
        pattern: BindParameter[str] = bindparam("q")
        conds.append(
            or_(
                func.lower(agents.c.name).like(pattern, escape="\\"),
                func.lower(func.coalesce(agents.c.alias, "")).like(pattern, escape="\\"),
                func.lower(agents.c.description).like(pattern, escape="\\"),
            )
        )
    conds.extend(agents.c[name] == bindparam(name) for name in shape.equal)
    conds.extend(  # "all of": one EXISTS per distinct tag
        select(resource_tags.c.resource_id)
        .where(
            resource_tags.c.resource_id == agents.c.id, resource_tags.c.tag == bindparam(f"tag_{i}")
        )
        .exists()
        for i in range(shape.tags)
    )
    if shape.restricted:
        conds.append(agents.c.id.in_(bindparam("candidates", expanding=True)))
    if shape.marked:
        conds.append(_markings_held(bindparam("held", expanding=True)))
    if shape.after:
        conds.append(agents.c.id > bindparam("after_id"))
    if shape.markers:  # the same rows, in the same order, without what is costly to read
        limit = bindparam("limit", type_=Integer)
        return select(*_MARKER_COLUMNS).where(*conds).order_by(agents.c.id).limit(limit)
    page = (
        select(*_RECORD_COLUMNS)
        .where(*conds)
        .order_by(agents.c.id)
        .limit(bindparam("limit", type_=Integer))
        .subquery()
    )
    # No ORDER BY here: sorting the joined rows made SQLite copy every document into a
    # temporary b-tree; _rows_to_agents orders the (few) rows in Python instead.
    # A restricted caller's grants come from its Reach; only unrestricted (admin) pages ask.
    grant = null() if shape.restricted else _grant_rank(page.c.id)
    return select(*page.c, grant, *_OWNER_COLUMNS).select_from(_with_owners(page, page.c.id))


async def list_agents(
    conn: Conn,
    flt: AgentFilter,
    visible: Visibility,
    after_id: str | None,
    limit: int,
    reach: sharing.Reach | None = None,
) -> list[AgentRow]:
    """A page ordered by id (creation order), each agent with its owners and the caller's best
    grant; ``after_id`` is the last id of the previous page.

    A restricted caller's page is read from ``reach`` (the sorted ids its principals own or
    were granted, and the built-ins when ``visible.builtins``, with their grants;
    sharing.ReachCache) in growing windows after the cursor, so
    a page touches about as many agents as it returns, however many the caller can reach."""
    if visible.restricted and reach is None:
        reach = await _reach_of(conn, visible)
    found = await _page(conn, flt, visible, after_id, limit, reach, _rows_to_agents)
    if reach is None:
        return await with_above(conn, found, visible.principals)
    # What comes down the tree is in the reach: no look up it (bench/access_list.py --tree).
    grants = reach.grants
    return [
        dataclasses.replace(
            r, grant=grants.get(r.record.id), above=tree.from_reach(reach, r.record.id)
        )
        for r in found
    ]


Marker = tuple[str, int, int]
"""An agent's id, version and updated_at: with the access epoch, what changes whenever its row
renders differently (its document changes only with a new version; its markings, which are not
versioned, change only with the epoch, sharing.set_markings). Markings stay out of it so the
index that holds it stays small: a long markings list would not fit a PostgreSQL index row."""
_MARKER_COLUMNS = (agents.c.id, agents.c.version, agents.c.updated_at)


async def list_markers(
    conn: Conn,
    flt: AgentFilter,
    visible: Visibility,
    after_id: str | None,
    limit: int,
    reach: sharing.Reach | None = None,
) -> list[Marker]:
    """The Markers of the page ``list_agents`` reads (the same filter, access conditions
    included, the same rows in the same order), without reading the documents or owners."""

    def markers(rows: Sequence[Any]) -> list[Marker]:
        return [(r[0], r[1], r[2]) for r in rows]

    if visible.restricted and reach is None:
        reach = await _reach_of(conn, visible)
    return await _page(conn, flt, visible, after_id, limit, reach, markers, markers=True)


_Out = TypeVar("_Out")


async def _reach_of(conn: Conn, visible: Visibility) -> sharing.Reach:
    held = visible.held_markings or ()
    return await sharing.reach_of(conn, visible.principals, held, visible.builtins)


async def _page(
    conn: Conn,
    flt: AgentFilter,
    visible: Visibility,
    after_id: str | None,
    limit: int,
    reach: sharing.Reach | None,
    convert: Callable[[Sequence[Any]], list[_Out]],
    markers: bool = False,
) -> list[_Out]:
    """The page's rows (``convert``ed from the statement's), as ``list_agents`` describes;
    ``reach``: a restricted caller's."""
    if not visible.restricted:
        shape, values = _shape_and_values(flt, visible, after_id, limit, markers)
        return convert((await conn.execute(_list_statement(shape), values)).all())
    assert reach is not None
    # The reach already left out agents with markings the caller does not hold.
    visible = dataclasses.replace(visible, held_markings=None)
    ids = reach.ids
    # The reach holds every kind of resource (prompt., tool., ...): only agent ids are looked at.
    start, stop = bisect.bisect_left(ids, "agent."), bisect.bisect_left(ids, "agent/")
    if after_id is not None:
        start = max(start, bisect.bisect_right(ids, after_id))
    found: list[_Out] = []
    window = limit
    while start < stop and len(found) < limit:
        chunk = ids[start : min(start + window, stop)]
        shape, values = _shape_and_values(flt, visible, None, limit - len(found), markers)
        values["candidates"] = list(chunk)
        found += convert((await conn.execute(_list_statement(shape), values)).all())
        start += len(chunk)
        window *= 2  # filters left too few: look further, in fewer rounds
    return found[:limit]


def _markings_held(held: BindParameter[Any]) -> ColumnElement[bool]:
    """Rows carrying no marking outside ``held``, inherited ones included."""
    return ~tree.carries_unheld(agents.c.id, held)


async def set_tags(conn: Conn, resource_id: str, tags: Sequence[str]) -> None:
    await conn.execute(delete(resource_tags).where(resource_tags.c.resource_id == resource_id))
    unique = list(dict.fromkeys(tags))
    if unique:
        await conn.execute(
            insert(resource_tags), [{"resource_id": resource_id, "tag": t} for t in unique]
        )


_DISPLAY_FALLBACK = {"public.all": "All users"}


def _owner(
    principal_id: str,
    display_name: str | None,
    avatar_url: str | None,
    avatar_config: dict[str, Any] | None,
    email: str | None,
) -> dict[str, Any]:
    """An ``owners[]`` item of the seed: the principal with its display fields."""
    return {
        "id": principal_id,
        "type": principal_type(principal_id),
        "display_name": display_name or display_fallback(principal_id),
        "avatar_url": avatar_url,
        "avatar_config": avatar_config,
        "email": email,
    }


def display_fallback(principal_id: str) -> str:
    """The display name of a principal without a user or group row (``public.all``)."""
    return _DISPLAY_FALLBACK.get(principal_id, principal_id)


def principal_type(principal_id: str) -> str:
    # "public.all" is type "public"; user.* and group.* are what their prefix says.
    kind = principal_id.split(".", 1)[0]
    return kind if kind in ("user", "group", "public") else "user"


async def insert_version(
    conn: Conn,
    agent_id: str,
    version: int,
    document: str,
    created_by: str,
    created_at: int,
) -> None:
    await conn.execute(
        insert(agent_versions).values(
            agent_id=agent_id,
            version=version,
            document=document,
            created_by=created_by,
            created_at=created_at,
        )
    )


@dataclass(frozen=True, slots=True)
class VersionRecord:
    version: int
    document: str
    created_by: str
    created_at: int


_VERSION_COLUMNS = (
    agent_versions.c.version,
    agent_versions.c.document,
    agent_versions.c.created_by,
    agent_versions.c.created_at,
)
_LIST_VERSIONS = (
    select(*_VERSION_COLUMNS)
    .where(agent_versions.c.agent_id == bindparam("agent_id"))
    .order_by(agent_versions.c.version.desc())
)
_GET_VERSION = select(*_VERSION_COLUMNS).where(
    agent_versions.c.agent_id == bindparam("agent_id"),
    agent_versions.c.version == bindparam("version"),
)


async def list_versions(conn: Conn, agent_id: str) -> list[VersionRecord]:
    """Newest first."""
    rows = await conn.execute(_LIST_VERSIONS, {"agent_id": agent_id})
    return [VersionRecord(*r) for r in rows]


async def get_version(conn: Conn, agent_id: str, version: int) -> VersionRecord | None:
    row = (await conn.execute(_GET_VERSION, {"agent_id": agent_id, "version": version})).first()
    return VersionRecord(*row) if row else None
