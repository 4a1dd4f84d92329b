"""An ontology's objects and links: create, change, delete, search, follow (import:
services/ontology_import.py). Each public method is one transaction.

Access is always the ontology's own, through the one policy: reading objects and links needs
read on the ontology, changing them needs edit; its markings (and its folders') cover every
object. An ontology the caller cannot see answers exactly as an id that names nothing, on
every endpoint, before anything about the request is looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from dhub.access import policy
from dhub.access.principal import Principal
from dhub.domain.errors import Conflict, FieldError, InvalidInput, NotFound
from dhub.domain.ids import now_ms
from dhub.domain.pointers import join
from dhub.domain.resources import OntologySpec
from dhub.knowledge.ontology_schema import (
    SINGLE_END,
    LinkTypeSpec,
    ObjectTypeSpec,
    Schema,
    properties_of,
)
from dhub.knowledge.ontology_values import (
    Filter,
    check_filters,
    check_object,
    key_problem,
    key_text,
    search_text,
    title_of,
    words,
)
from dhub.knowledge.ontology_values import from_text as text_value
from dhub.services.ontology_pages import encode_cursor, follow_cursor, search_cursor
from dhub.store import audit
from dhub.store import ontology as store
from dhub.store import resources as repo
from dhub.store.db import Conn, Database

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Opened:
    """An ontology the caller may use, with its schema."""

    id: str
    spec: OntologySpec
    schema: Schema


async def open_ontology(
    conn: Conn, principal: Principal, ontology_id: str, action: policy.Action
) -> Opened:
    """The ontology if ``principal`` may ``action`` it; NotFound (as for an id naming
    nothing) if it cannot see it, Forbidden if it sees it but may not."""
    found = await repo.get_resource(conn, ontology_id, sorted(principal.principal_ids))
    if found is None or found.record.category != "ontology":
        raise NotFound(f"No ontology with id '{ontology_id}'.")
    record = found.record
    owners = [o["id"] for o in found.owners]
    markings = orjson.loads(record.markings)
    policy.require(
        principal, action, record.id, owners, found.grant, markings, "ontology", found.above
    )
    spec = OntologySpec.model_validate_json(record.document)
    return Opened(record.id, spec, Schema.of(spec))


def object_json(record: store.ObjectRecord) -> dict[str, Any]:
    return {
        "type": record.type,
        "key": record.key,
        "title": record.title,
        "properties": record.properties,
        "created_by": record.created_by,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def type_of(opened: Opened, name: Any, at: str = "/type") -> ObjectTypeSpec:
    spec = opened.schema.types.get(name) if isinstance(name, str) else None
    if spec is None:
        shown = repr(name[:80]) if isinstance(name, str) else "nothing"
        raise InvalidInput(
            [
                FieldError(
                    at,
                    f"{shown} is not an object type of this ontology "
                    f"(it has {opened.schema.type_names()}).",
                    "unknown_type",
                )
            ]
        )
    return spec


def _no_object(type_name: str, key: str) -> NotFound:
    return NotFound(f"No '{type_name}' object with key '{key}' in this ontology.")


def stored_row(
    opened: Opened, spec: ObjectTypeSpec, key: str, properties: dict[str, Any], who: str, now: int
) -> dict[str, Any]:
    title = title_of(spec, properties, key)
    return {
        "ontology_id": opened.id,
        "type": spec.name,
        "key": key,
        "properties": properties,
        "title": title,
        "search_text": search_text(title, key, properties),
        "created_by": who,
        "created_at": now,
        "updated_at": now,
    }


@dataclass(frozen=True, slots=True)
class Direction:
    """A link type followed one way: ``forward`` from its "from" end."""

    link: LinkTypeSpec
    forward: bool

    @property
    def here(self) -> str:
        return self.link.from_type if self.forward else self.link.to_type

    @property
    def there(self) -> str:
        return self.link.to_type if self.forward else self.link.from_type


def direction_of(opened: Opened, name: str, reverse: bool = False) -> Direction:
    """A link type's name (forward; backward with ``reverse``) or its inverse's name."""
    link = opened.schema.links.get(name)
    if link is not None:
        return Direction(link, not reverse)
    link = opened.schema.inverses.get(name)
    if link is not None:
        return Direction(link, reverse)
    raise NotFound(
        f"'{name[:80]}' is not a link type of this ontology (it has {opened.schema.link_names()})."
    )


class OntologyService:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- objects ----------------------------------------------------------------------------

    async def get_object(
        self, principal: Principal, ontology_id: str, type_name: str, key: str
    ) -> dict[str, Any]:
        async with self.db.read(snapshot=True) as conn:
            opened = await open_ontology(conn, principal, ontology_id, "read")
            spec = type_of(opened, type_name)
            found = await store.get_objects(conn, opened.id, spec.name, [key])
        if key not in found:
            raise _no_object(spec.name, key)
        return object_json(found[key])

    async def create_object(
        self, principal: Principal, ontology_id: str, body: Any
    ) -> dict[str, Any]:
        body = _object_body(body, {"type", "properties"})
        async with self.db.write() as conn:
            opened = await open_ontology(conn, principal, ontology_id, "edit")
            spec = type_of(opened, body.get("type"))
            checked, errors = check_object(spec, body.get("properties"), ("properties",))
            if checked is None:
                raise InvalidInput(errors)
            if await store.get_objects(conn, opened.id, spec.name, [checked.key]):
                raise Conflict(
                    f"A '{spec.name}' object with key '{checked.key}' exists already "
                    "in this ontology: change it with PATCH .../objects/"
                    f"{spec.name}/{checked.key}."
                )
            row = stored_row(
                opened, spec, checked.key, checked.properties, principal.user_id, now_ms()
            )
            await store.insert_objects(conn, [row])
            named = {"type": spec.name, "key": checked.key}
            await audit.record(
                conn, principal.user_id, "ontology.object.create", opened.id, None, named
            )
            found = await store.get_objects(conn, opened.id, spec.name, [checked.key])
        return object_json(found[checked.key])

    async def update_object(
        self, principal: Principal, ontology_id: str, type_name: str, key: str, body: Any
    ) -> dict[str, Any]:
        """A merge patch of the properties: a null removes a value; the key stays."""
        body = _object_body(body, {"properties"})
        patch = body.get("properties", {})
        if not isinstance(patch, dict):
            raise InvalidInput(
                [
                    FieldError(
                        "/properties", "'properties' must be an object of property values.", "type"
                    )
                ]
            )
        async with self.db.write() as conn:
            opened = await open_ontology(conn, principal, ontology_id, "edit")
            spec = type_of(opened, type_name)
            found = (await store.get_objects(conn, opened.id, spec.name, [key])).get(key)
            if found is None:
                raise _no_object(spec.name, key)
            merged = {**found.properties, **patch}
            checked, errors = check_object(spec, merged, ("properties",))
            if checked is not None and checked.key != key:
                errors = [
                    FieldError(
                        join("properties", spec.primary_key),
                        f"'{spec.primary_key}"
                        f"' is the primary key of '{spec.name}': it names the "
                        "object and cannot change (create a new object instead).",
                        "key_changed",
                    )
                ]
            if checked is None or errors:
                raise InvalidInput(errors)
            row = stored_row(opened, spec, key, checked.properties, found.created_by, now_ms())
            values = {k: row[k] for k in ("properties", "title", "search_text", "updated_at")}
            await store.update_object(conn, opened.id, spec.name, key, values)
            named = {"type": spec.name, "key": key}
            await audit.record(
                conn, principal.user_id, "ontology.object.update", opened.id, named, named
            )
            updated = await store.get_objects(conn, opened.id, spec.name, [key])
        return object_json(updated[key])

    async def delete_object(
        self, principal: Principal, ontology_id: str, type_name: str, key: str
    ) -> None:
        """Delete the object and every link to or from it."""
        async with self.db.write() as conn:
            opened = await open_ontology(conn, principal, ontology_id, "edit")
            spec = type_of(opened, type_name)
            ends = [
                (lt.name, lt.from_type == spec.name)
                for lt in opened.spec.link_types
                if spec.name in (lt.from_type, lt.to_type)
            ]
            # A link type from a type to itself touches the object at both ends.
            ends += [
                (lt.name, False)
                for lt in opened.spec.link_types
                if lt.from_type == lt.to_type == spec.name
            ]
            if not await store.delete_object(conn, opened.id, spec.name, key, ends):
                raise _no_object(spec.name, key)
            await audit.record(
                conn,
                principal.user_id,
                "ontology.object.delete",
                opened.id,
                {"type": spec.name, "key": key},
            )

    # -- search -------------------------------------------------------------------------------

    async def search(
        self, principal: Principal, ontology_id: str, query: Any, *, from_text: bool = False
    ) -> dict[str, Any]:
        """``query``: {type?, filters?, q?, limit?, cursor?}; filters need a type.
        ``from_text``: filter values are query-string text, read as their properties' types."""
        if not isinstance(query, dict):
            raise InvalidInput(
                [
                    FieldError(
                        "", "A search is an object: {type, filters, q, limit, cursor}.", "type"
                    )
                ]
            )
        unknown = set(query) - {"type", "filters", "q", "limit", "cursor"}
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidInput(
                [
                    FieldError(
                        join(name),
                        f"'{name[:80]}' is not a search field: "
                        "use type, filters, q, limit and cursor.",
                        "extra_forbidden",
                    )
                ]
            )
        limit = _limit(query.get("limit"))
        q = query.get("q")
        if q is not None and (not isinstance(q, str) or "\x00" in q or len(q) > 500):
            raise InvalidInput([FieldError("/q", "'q' is text of up to 500 characters.", "type")])
        cursor = query.get("cursor")
        after = search_cursor(cursor) if cursor is not None else None
        async with self.db.read(snapshot=True) as conn:
            opened = await open_ontology(conn, principal, ontology_id, "read")
            type_name, filters = self._filters(opened, query, from_text)
            found = await store.search(
                conn, opened.id, type_name, filters, words(q or ""), after, limit + 1
            )
        page = found[:limit]
        more = len(found) > limit
        next_cursor = encode_cursor([page[-1].type, page[-1].key]) if more else None
        return {
            "data": [object_json(r) for r in page],
            "next_cursor": next_cursor if more else None,
        }

    @staticmethod
    def _filters(
        opened: Opened, query: dict[str, Any], from_text: bool
    ) -> tuple[str | None, list[Filter]]:
        raw = query.get("filters") or []
        type_name = query.get("type")
        if type_name is None:
            if raw:
                raise InvalidInput(
                    [
                        FieldError(
                            "/type",
                            "Filters name properties of one type: give the object 'type' too.",
                            "missing",
                        )
                    ]
                )
            return None, []
        spec = type_of(opened, type_name)
        if from_text and isinstance(raw, list):
            declared = properties_of(spec)
            raw = [
                {**f, "value": text_value(declared[f["property"]], f["value"])}
                if f.get("property") in declared
                else f
                for f in raw
            ]
        filters, errors = check_filters(spec, raw)
        if errors:
            raise InvalidInput(errors)
        return spec.name, filters

    # -- links --------------------------------------------------------------------------------

    async def link(
        self, principal: Principal, ontology_id: str, body: Any
    ) -> tuple[dict[str, Any], bool]:
        """Create a link (``{link_type, from, to}``, keys of existing objects); True when it is
        new. The link type's cardinality is kept."""
        body = _object_body(body, {"link_type", "from", "to"})
        async with self.db.write() as conn:
            opened = await open_ontology(conn, principal, ontology_id, "edit")
            link = _link_type(opened, body.get("link_type"))
            from_key, to_key = _end_key(body, "from"), _end_key(body, "to")
            for spec_name, key, end in (
                (link.from_type, from_key, "from"),
                (link.to_type, to_key, "to"),
            ):
                if not await store.get_objects(conn, opened.id, spec_name, [key]):
                    raise InvalidInput(
                        [
                            FieldError(
                                join(end),
                                f"No '{spec_name}' object with key '{key}' in this ontology.",
                                "unknown_object",
                            )
                        ]
                    )
            made = {"link_type": link.name, "from": from_key, "to": to_key}
            if await store.link_exists(conn, opened.id, link.name, from_key, to_key):
                return made, False
            await check_cardinality(conn, opened.id, link, from_key, to_key)
            await store.insert_links(
                conn,
                [
                    {
                        "ontology_id": opened.id,
                        "link_type": link.name,
                        "from_key": from_key,
                        "to_key": to_key,
                        "created_by": principal.user_id,
                        "created_at": now_ms(),
                    }
                ],
            )
            await audit.record(conn, principal.user_id, "ontology.link", opened.id, None, made)
        return made, True

    async def unlink(
        self, principal: Principal, ontology_id: str, link_type: str, from_key: str, to_key: str
    ) -> None:
        async with self.db.write() as conn:
            opened = await open_ontology(conn, principal, ontology_id, "edit")
            link = opened.schema.links.get(link_type)
            if link is None or not await store.delete_link(
                conn, opened.id, link.name, from_key, to_key
            ):
                raise NotFound(
                    f"No '{link_type[:80]}' link from '{from_key}' to '{to_key}' in this ontology."
                )
            unmade = {"link_type": link.name, "from": from_key, "to": to_key}
            await audit.record(conn, principal.user_id, "ontology.unlink", opened.id, unmade)

    async def follow(
        self,
        principal: Principal,
        ontology_id: str,
        type_name: str,
        key: str,
        link_name: str,
        *,
        reverse: bool = False,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """The objects linked to one object by a link type (its name: from its "from" end;
        its inverse's name, or ``reverse``: from its "to" end), by key."""
        after = follow_cursor(cursor) if cursor else None
        async with self.db.read(snapshot=True) as conn:
            opened = await open_ontology(conn, principal, ontology_id, "read")
            spec = type_of(opened, type_name)
            way = direction_of(opened, link_name, reverse)
            if way.here != spec.name:
                raise InvalidInput(
                    [
                        FieldError(
                            "/link_type",
                            f"'{link_name}' links "
                            f"'{way.here}' objects to '{way.there}' objects, "
                            f"not '{spec.name}' ones.",
                            "wrong_type",
                        )
                    ]
                )
            if not await store.get_objects(conn, opened.id, spec.name, [key]):
                raise _no_object(spec.name, key)
            found = await store.follow(
                conn, opened.id, way.link.name, key, way.forward, way.there, after, limit + 1
            )
        page = found[:limit]
        more = len(found) > limit
        return {
            "data": [object_json(r) for r in page],
            "next_cursor": encode_cursor(page[-1].key) if more else None,
        }


# -- helpers ----------------------------------------------------------------------------------


async def check_cardinality(
    conn: Conn, ontology_id: str, link: LinkTypeSpec, from_key: str, to_key: str
) -> None:
    one_to, one_from = SINGLE_END[link.cardinality]
    if one_to:
        taken = await store.linked_keys(conn, ontology_id, link.name, from_key, True, 1)
        if taken:
            raise Conflict(_cardinality(link, link.from_type, from_key, link.to_type, taken[0]))
    if one_from:
        taken = await store.linked_keys(conn, ontology_id, link.name, to_key, False, 1)
        if taken:
            raise Conflict(_cardinality(link, link.to_type, to_key, link.from_type, taken[0]))


def _cardinality(link: LinkTypeSpec, here: str, key: str, there: str, other: str) -> str:
    return (
        f"'{link.name}' is {link.cardinality}: the {here} '{key}' already has one (with the "
        f"{there} '{other}'); unlink that first."
    )


def _object_body(body: Any, fields: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidInput(
            [
                FieldError(
                    "", f"The body must be an object with {', '.join(sorted(fields))}.", "type"
                )
            ]
        )
    for name in body:
        if name not in fields:
            raise InvalidInput(
                [
                    FieldError(
                        join(name),
                        f"'{name[:80]}' is not a field here: use {', '.join(sorted(fields))}.",
                        "extra_forbidden",
                    )
                ]
            )
    return body


def _link_type(opened: Opened, name: Any) -> LinkTypeSpec:
    link = opened.schema.links.get(name) if isinstance(name, str) else None
    if link is None:
        names = ", ".join(opened.schema.links) or "none"
        shown = repr(name[:80]) if isinstance(name, str) else "nothing"
        raise InvalidInput(
            [
                FieldError(
                    "/link_type",
                    f"{shown} is not a link type of this ontology (it has {names}).",
                    "unknown_link_type",
                )
            ]
        )
    return link


def _end_key(body: dict[str, Any], end: str) -> str:
    value = body.get(end)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidInput(
            [
                FieldError(
                    join(end), f"'{end}' is the key of an object (a string or an integer).", "type"
                )
            ]
        )
    key = key_text(value)
    problem = key_problem(key)
    if problem:
        raise InvalidInput([FieldError(join(end), problem, "invalid_key")])
    return key


def _limit(value: Any) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(
            [
                FieldError(
                    "/limit", f"'limit' is a whole number from 1 to {MAX_LIMIT}.", "out_of_range"
                )
            ]
        )
    return value
