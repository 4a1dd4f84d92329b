"""Bulk import of an ontology's objects and links, all or nothing: every item is checked
against the schema first, and any problem (pointing at the item and the property) stores
nothing. Objects are created or replaced by key; links already there are kept.

Items are objects ``{"type", "properties"}`` and links ``{"link_type", "from", "to"}``, given
as ``{"objects": [...], "links": [...]}``, as one JSON list, or as JSON Lines (one item per
line; pointers then name the line's index, from 0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from dhub.access.principal import Principal
from dhub.domain.bounds import check_document
from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.ids import now_ms
from dhub.domain.pointers import join
from dhub.knowledge.ontology_schema import SINGLE_END, LinkTypeSpec
from dhub.knowledge.ontology_values import check_object, key_problem, key_text
from dhub.services.ontologies import Opened, open_ontology, stored_row
from dhub.store import audit
from dhub.store import ontology as store
from dhub.store.db import Conn, Database

Loc = tuple[str | int, ...]
MAX_ITEMS = 100_000
MAX_ERRORS = 50  # reported at once
ANALYZE_AFTER = 5_000  # new rows after which PostgreSQL's statistics are refreshed


@dataclass(frozen=True, slots=True)
class Item:
    at: Loc
    value: Any


def items_of(body: Any) -> list[Item]:
    """The items of a JSON import body, each with where it is."""
    if isinstance(body, list):
        return [Item((i,), v) for i, v in enumerate(body)]
    if isinstance(body, dict) and set(body) <= {"objects", "links"}:
        out = []
        for field in ("objects", "links"):
            part = body.get(field, [])
            if not isinstance(part, list):
                raise InvalidInput([FieldError(join(field), f"'{field}' must be a list.", "type")])
            out += [Item((field, i), v) for i, v in enumerate(part)]
        return out
    raise InvalidInput(
        [
            FieldError(
                "",
                'An import is {"objects": [...], "links": [...]}, a '
                "JSON list of items, or JSON Lines.",
                "type",
            )
        ]
    )


def lines_of(raw: bytes) -> list[Item]:
    """The items of a JSON Lines body (blank lines skipped; pointers keep the line index)."""
    out, errors = [], []
    for i, line in enumerate(raw.split(b"\n")):
        if not line.strip():
            continue
        try:
            out.append(Item((i,), check_document(orjson.loads(line))))
        except orjson.JSONDecodeError as exc:
            errors.append(FieldError(join(i), f"Line {i + 1} is not JSON: {exc}.", "json_invalid"))
        except InvalidInput as bad:
            errors += [FieldError(join(i) + e.loc, e.message, e.code) for e in bad.errors]
        if len(errors) >= MAX_ERRORS:
            break
    if errors:
        raise InvalidInput(errors)
    return out


@dataclass
class _Plan:
    objects: dict[tuple[str, str], tuple[Loc, dict[str, Any]]]  # (type, key) -> (at, props)
    links: dict[tuple[str, str, str], Loc]  # (link type, from, to) -> at


def _check(opened: Opened, items: Sequence[Item]) -> tuple[_Plan, list[FieldError]]:
    plan = _Plan({}, {})
    errors: list[FieldError] = []
    for item in items:
        if len(errors) >= MAX_ERRORS:
            break
        value = item.value
        if isinstance(value, dict) and "link_type" in value:
            errors += _check_link(opened, item, plan)
        elif isinstance(value, dict) and "type" in value:
            errors += _check_object(opened, item, plan)
        else:
            errors.append(
                FieldError(
                    join(*item.at),
                    'An item is an object {"type", '
                    '"properties"} or a link {"link_type", "from", '
                    '"to"}.',
                    "type",
                )
            )
    return plan, errors


def _check_object(opened: Opened, item: Item, plan: _Plan) -> list[FieldError]:
    value = item.value
    extra = sorted(set(value) - {"type", "properties"})
    if extra:
        return [
            FieldError(
                join(*item.at, extra[0]),
                f"'{extra[0][:80]}' is not a field of an object: use type and properties.",
                "extra_forbidden",
            )
        ]
    spec = opened.schema.types.get(value["type"]) if isinstance(value["type"], str) else None
    if spec is None:
        return [
            FieldError(
                join(*item.at, "type"),
                f"Not an object type of this ontology (it has {opened.schema.type_names()}).",
                "unknown_type",
            )
        ]
    checked, errors = check_object(spec, value.get("properties"), (*item.at, "properties"))
    if checked is None:
        return errors
    earlier = plan.objects.get((spec.name, checked.key))
    if earlier is not None:
        return [
            FieldError(
                join(*item.at, "properties", spec.primary_key),
                f"The '{spec.name}' "
                f"'{checked.key}' is also at {join(*earlier[0])}: give each object "
                "once.",
                "duplicate",
            )
        ]
    plan.objects[(spec.name, checked.key)] = (item.at, checked.properties)
    return []


def _check_link(opened: Opened, item: Item, plan: _Plan) -> list[FieldError]:
    value = item.value
    extra = sorted(set(value) - {"link_type", "from", "to"})
    if extra:
        return [
            FieldError(
                join(*item.at, extra[0]),
                f"'{extra[0][:80]}' is not a field of a link: use link_type, from and to.",
                "extra_forbidden",
            )
        ]
    name = value["link_type"]
    link = opened.schema.links.get(name) if isinstance(name, str) else None
    if link is None:
        names = ", ".join(opened.schema.links) or "none"
        return [
            FieldError(
                join(*item.at, "link_type"),
                f"Not a link type of this ontology (it has {names}).",
                "unknown_link_type",
            )
        ]
    keys, errors = [], []
    for end in ("from", "to"):
        raw = value.get(end)
        key = ""
        problem: str | None
        if raw is None:
            problem = f"'{end}' is missing: a link needs both ends (the objects' keys)."
        elif isinstance(raw, bool) or not isinstance(raw, str | int):
            problem = "An end of a link is an object's key (a string or an integer)."
        else:
            key = key_text(raw)
            problem = key_problem(key)
        if problem is not None:
            errors.append(FieldError(join(*item.at, end), problem, "invalid_key"))
        keys.append(key)
    if not errors:
        plan.links.setdefault((link.name, keys[0], keys[1]), item.at)
    return errors


async def _missing_ends(conn: Conn, opened: Opened, plan: _Plan) -> list[FieldError]:
    """Links whose objects are neither imported nor stored."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for name, from_key, to_key in plan.links:
        link = opened.schema.links[name]
        wanted[link.from_type].add(from_key)
        wanted[link.to_type].add(to_key)
    known: dict[str, set[str]] = {}
    for type_name, keys in wanted.items():
        new = {k for (t, k) in plan.objects if t == type_name}
        known[type_name] = new | await store.existing_keys(conn, opened.id, type_name, keys - new)
    errors = []
    for (name, from_key, to_key), at in plan.links.items():
        link = opened.schema.links[name]
        ends: tuple[tuple[str, str, str], ...] = (
            ("from", link.from_type, from_key),
            ("to", link.to_type, to_key),
        )
        for end, type_name, key in ends:
            if key not in known[type_name]:
                errors.append(
                    FieldError(
                        join(*at, end),
                        f"No '{type_name}' object with key "
                        f"'{key}' in this ontology or this import.",
                        "unknown_object",
                    )
                )
    return errors[:MAX_ERRORS]


async def _cardinality(conn: Conn, opened: Opened, plan: _Plan) -> list[FieldError]:
    by_type: dict[str, list[tuple[str, str, Loc]]] = defaultdict(list)
    for (name, from_key, to_key), at in plan.links.items():
        by_type[name].append((from_key, to_key, at))
    errors: list[FieldError] = []
    for name, new in by_type.items():
        link = opened.schema.links[name]
        for forward, single in zip((True, False), SINGLE_END[link.cardinality], strict=True):
            if single:
                errors += await _one_each(conn, opened.id, link, new, forward)
    return errors[:MAX_ERRORS]


async def _one_each(
    conn: Conn,
    ontology_id: str,
    link: LinkTypeSpec,
    new: list[tuple[str, str, Loc]],
    forward: bool,
) -> list[FieldError]:
    """Each key at the single end (``forward``: "from") has at most one other end."""

    def ends(from_key: str, to_key: str) -> tuple[str, str]:
        return (from_key, to_key) if forward else (to_key, from_key)

    others: dict[str, set[str]] = defaultdict(set)
    keys = {ends(f, t)[0] for f, t, _ in new}
    for from_key, to_key in await store.links_at(conn, ontology_id, link.name, keys, forward):
        key, other = ends(from_key, to_key)
        others[key].add(other)
    errors = []
    for from_key, to_key, at in new:
        key, other = ends(from_key, to_key)
        others[key].add(other)
        if len(others[key]) > 1:
            what = link.from_type if forward else link.to_type
            end = "to" if forward else "from"
            errors.append(
                FieldError(
                    join(*at, end),
                    f"'{link.name}' is {link.cardinality}: "
                    f"the {what} '{key}' would have {len(others[key])} of them "
                    f"({', '.join(sorted(others[key])[:5])}).",
                    "cardinality",
                )
            )
            others[key].discard(other)
    return errors


def check_count(count: int) -> None:
    if count > MAX_ITEMS:
        raise InvalidInput(
            [
                FieldError(
                    "",
                    f"An import has at most {MAX_ITEMS} items; this one has {count}: split it.",
                    "too_many",
                )
            ]
        )


async def import_items(
    db: Database, principal: Principal, ontology_id: str, items: Sequence[Item]
) -> dict[str, Any]:
    """Check every item, then store them all (or nothing, with every problem found)."""
    check_count(len(items))
    async with db.write() as conn:
        opened = await open_ontology(conn, principal, ontology_id, "edit")
        return await store_items(conn, principal, opened, items)


async def store_items(
    conn: Conn,
    principal: Principal,
    opened: Opened,
    items: Sequence[Item],
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``import_items`` in the caller's transaction, on an ontology it opened for edit;
    ``source`` (e.g. the table the items came from) goes into the audit entry."""
    plan, errors = _check(opened, items)
    if not errors:
        errors = await _missing_ends(conn, opened, plan)
    if not errors:
        errors = await _cardinality(conn, opened, plan)
    if errors:
        raise InvalidInput(errors[:MAX_ERRORS])
    created, updated = await _store_objects(conn, opened, plan, principal.user_id)
    new_links = await _store_links(conn, opened, plan, principal.user_id)
    if created + new_links >= ANALYZE_AFTER:
        await store.refresh_statistics(conn)
    result = {
        "objects": {"created": created, "updated": updated},
        "links": {"created": new_links, "existing": len(plan.links) - new_links},
    }
    entry = {**result, **source} if source else result
    await audit.record(conn, principal.user_id, "ontology.import", opened.id, None, entry)
    return result


async def _store_objects(conn: Conn, opened: Opened, plan: _Plan, who: str) -> tuple[int, int]:
    by_type: dict[str, list[str]] = defaultdict(list)
    for type_name, key in plan.objects:
        by_type[type_name].append(key)
    now, created, updated = now_ms(), 0, 0
    for type_name, keys in by_type.items():
        spec = opened.schema.types[type_name]
        there = await store.existing_keys(conn, opened.id, type_name, keys)
        rows = []
        for key in keys:
            row = stored_row(opened, spec, key, plan.objects[(type_name, key)][1], who, now)
            if key in there:
                values = {k: row[k] for k in ("properties", "title", "search_text", "updated_at")}
                await store.update_object(conn, opened.id, type_name, key, values)
                updated += 1
            else:
                rows.append(row)
        await store.insert_objects(conn, rows)
        created += len(rows)
    return created, updated


async def _store_links(conn: Conn, opened: Opened, plan: _Plan, who: str) -> int:
    by_type: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, from_key, to_key in plan.links:
        by_type[name].append((from_key, to_key))
    now, rows = now_ms(), []
    for name, pairs in by_type.items():
        there = set(await store.links_at(conn, opened.id, name, {p[0] for p in pairs}, True))
        rows += [
            {
                "ontology_id": opened.id,
                "link_type": name,
                "from_key": f,
                "to_key": t,
                "created_by": who,
                "created_at": now,
            }
            for f, t in pairs
            if (f, t) not in there
        ]
    await store.insert_links(conn, rows)
    return len(rows)
