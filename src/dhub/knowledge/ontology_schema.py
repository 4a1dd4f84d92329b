"""An ontology's schema: object types with typed properties, a primary key and a title
property, and link types between them (DESIGN.md 2; docs/ontologies.md).

Pure: the document's models (``OntologyBody``, the part an Ontology adds to the common
envelope), the problems with a document (``schema_problems``, every one with a JSON pointer)
and the problems with changing a schema that already holds objects
(``change_problems``, given what the store counted).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from dhub.domain.base import SpecModel
from dhub.domain.errors import FieldError
from dhub.domain.pointers import join

PropertyType = Literal["string", "number", "integer", "boolean", "date", "datetime", "json"]
PROPERTY_TYPES: tuple[str, ...] = (
    "string",
    "number",
    "integer",
    "boolean",
    "date",
    "datetime",
    "json",
)
KEY_TYPES = frozenset({"string", "integer"})
Cardinality = Literal["one_to_one", "one_to_many", "many_to_one", "many_to_many"]
# Whether each end may have at most one link of the type: (each "from" has one "to", each
# "to" has one "from").
SINGLE_END: dict[str, tuple[bool, bool]] = {
    "one_to_one": (True, True),
    "one_to_many": (False, True),  # a customer has many orders; an order has one customer
    "many_to_one": (True, False),
    "many_to_many": (False, False),
}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_TYPES = 100
MAX_PROPERTIES = 200
MAX_LINK_TYPES = 200

# A value of an integer property, or an integer key: within what a double holds exactly, so
# SQL comparisons (as numbers) on both databases agree with Python's.
MAX_SAFE_INTEGER = 2**53 - 1


class PropertySpec(SpecModel):
    name: str = Field(description="An identifier: letters, digits and '_'.")
    type: PropertyType = Field(default="string", description="The values' type.")
    description: str = ""
    required: bool = Field(default=False, description="Every object must have a value.")


class ObjectTypeSpec(SpecModel):
    name: str = Field(description="An identifier, unique in the ontology (e.g. 'customer').")
    description: str = ""
    properties: list[PropertySpec] = Field(default=[])
    primary_key: str = Field(
        description="The property whose value names an object (string "
        "or integer); every object has one, unique within its type."
    )
    title_property: str | None = Field(
        default=None, description="The property shown as an object's title; null: the key."
    )


class LinkTypeSpec(SpecModel):
    name: str = Field(description="An identifier, e.g. 'placed' (customer placed order).")
    from_type: str = Field(description="The object type links start from.")
    to_type: str = Field(description="The object type links go to.")
    cardinality: Cardinality = Field(
        default="many_to_many",
        description="one_to_many: each 'from' object has many links, each 'to' object one.",
    )
    description: str = ""
    inverse: str | None = Field(
        default=None, description="The name for following links backwards (e.g. 'placed_by')."
    )


class OntologyBody(SpecModel):
    """What an ontology adds to the common envelope."""

    object_types: list[ObjectTypeSpec] = Field(default=[])
    link_types: list[LinkTypeSpec] = Field(default=[])


# -- a schema, indexed ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schema:
    """An ontology's types by name, for checking objects, links and queries."""

    types: Mapping[str, ObjectTypeSpec]
    links: Mapping[str, LinkTypeSpec]
    inverses: Mapping[str, LinkTypeSpec]  # by inverse name

    @classmethod
    def of(cls, body: OntologyBody) -> Schema:
        return cls(
            {t.name: t for t in body.object_types},
            {lt.name: lt for lt in body.link_types},
            {lt.inverse: lt for lt in body.link_types if lt.inverse},
        )

    def type_names(self) -> str:
        return ", ".join(self.types) or "none"

    def link_names(self) -> str:
        return ", ".join([*self.links, *self.inverses]) or "none"


def properties_of(spec: ObjectTypeSpec) -> dict[str, PropertySpec]:
    return {p.name: p for p in spec.properties}


# -- document problems ---------------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name_problem(value: Any, at: str, what: str) -> FieldError | None:
    if isinstance(value, str) and NAME.fullmatch(value) is None:
        return FieldError(
            at,
            f"'{value[:80]}' is not a valid {what} name: use up to 64 letters, digits and '_', "
            "not starting with a digit (e.g. 'customer_order').",
            "invalid_name",
        )
    return None


def schema_problems(body: Mapping[str, Any]) -> list[FieldError]:
    """Every problem with an ontology document's object and link types beyond their JSON
    shape (which the models check): names, duplicates, primary keys, title properties, and
    link types naming types that do not exist."""
    errors = list(_type_problems(_list(body.get("object_types"))))
    names = {
        t["name"]
        for t in _list(body.get("object_types"))
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    }
    errors += _link_problems(_list(body.get("link_types")), names)
    return errors


def _type_problems(types: list[Any]) -> Iterator[FieldError]:
    if len(types) > MAX_TYPES:
        yield FieldError(
            "/object_types",
            f"An ontology has at most {MAX_TYPES} object types; this one has {len(types)}.",
            "too_many",
        )
    seen: set[str] = set()
    for i, item in enumerate(types):
        if not isinstance(item, dict):
            continue
        at = ("object_types", i)
        name = item.get("name")
        if (bad := _name_problem(name, join(*at, "name"), "type")) is not None:
            yield bad
        elif isinstance(name, str):
            if name in seen:
                yield FieldError(
                    join(*at, "name"),
                    f"The object type '{name}' is declared twice: rename or remove one.",
                    "duplicate",
                )
            seen.add(name)
        yield from _property_problems(item, at)


def _property_problems(item: dict[str, Any], at: tuple[str | int, ...]) -> Iterator[FieldError]:
    properties = _list(item.get("properties"))
    type_name = item.get("name") if isinstance(item.get("name"), str) else "this type"
    if len(properties) > MAX_PROPERTIES:
        yield FieldError(
            join(*at, "properties"),
            f"An object type has at most {MAX_PROPERTIES} properties.",
            "too_many",
        )
    declared: dict[str, dict[str, Any]] = {}
    for j, prop in enumerate(properties):
        if not isinstance(prop, dict):
            continue
        name = prop.get("name")
        where = join(*at, "properties", j, "name")
        if (bad := _name_problem(name, where, "property")) is not None:
            yield bad
        elif isinstance(name, str):
            if name in declared:
                yield FieldError(
                    where,
                    f"'{type_name}' declares the property '{name}' twice: rename or remove one.",
                    "duplicate",
                )
            declared.setdefault(name, prop)
    listed = ", ".join(declared) or "none"
    key = item.get("primary_key")
    if isinstance(key, str):
        found = declared.get(key)
        if found is None:
            yield FieldError(
                join(*at, "primary_key"),
                f"The primary key '{key}' is not a "
                f"property of '{type_name}' (it has {listed}): declare it or name "
                "one of those.",
                "unknown_property",
            )
        elif found.get("type", "string") not in KEY_TYPES:
            yield FieldError(
                join(*at, "primary_key"),
                f"The primary key '{key}' is a "
                f"{found.get('type')}: a key must be a string or an integer "
                "property.",
                "invalid_key",
            )
    title = item.get("title_property")
    if isinstance(title, str) and title not in declared:
        yield FieldError(
            join(*at, "title_property"),
            f"The title property '{title}' is not a property of '{type_name}' (it has {listed}).",
            "unknown_property",
        )


def _link_problems(links: list[Any], types: set[str]) -> Iterator[FieldError]:
    if len(links) > MAX_LINK_TYPES:
        yield FieldError(
            "/link_types", f"An ontology has at most {MAX_LINK_TYPES} link types.", "too_many"
        )
    known = ", ".join(sorted(types)) or "none"
    seen: set[str] = set()  # link names and inverse names share one namespace
    for i, link in enumerate(links):
        if not isinstance(link, dict):
            continue
        at = ("link_types", i)
        for field, what in (("name", "link"), ("inverse", "inverse link")):
            value = link.get(field)
            if (bad := _name_problem(value, join(*at, field), what)) is not None:
                yield bad
            elif isinstance(value, str):
                if value in seen:
                    yield FieldError(
                        join(*at, field),
                        f"'{value}' already names a link type "
                        "or an inverse: link names and inverse names must all "
                        "differ.",
                        "duplicate",
                    )
                seen.add(value)
        for field in ("from_type", "to_type"):
            value = link.get(field)
            if isinstance(value, str) and value not in types:
                yield FieldError(
                    join(*at, field),
                    f"'{value[:80]}' is not an object type of this ontology (it has {known}).",
                    "unknown_type",
                )


# -- changing a schema that holds objects -------------------------------------------------------

# A property's type may change while objects hold values for it only where every stored value
# is already a value of the new type.
_WIDENS = {("integer", "number")}


@dataclass(frozen=True, slots=True)
class Counts:
    """What the store counted for a schema change: objects per type, links per link type,
    and for each (type, property) how many objects have a value (``present``)."""

    objects: Mapping[str, int]
    links: Mapping[str, int]
    present: Mapping[tuple[str, str], int]


def change_problems(old: OntologyBody, new: OntologyBody, counts: Counts) -> list[FieldError]:
    """What a new schema may not change while objects and links exist: remove a type that
    has objects or a link type that has links, change a type's primary key, change a
    property's type incompatibly or remove it while objects hold values for it, or make a
    property required that some objects lack."""
    errors: list[FieldError] = []
    new_types = {t.name: (i, t) for i, t in enumerate(new.object_types)}
    for old_type in old.object_types:
        held = counts.objects.get(old_type.name, 0)
        if not held:
            continue
        found = new_types.get(old_type.name)
        if found is None:
            errors.append(
                FieldError(
                    "/object_types",
                    f"The object type '{old_type.name}' "
                    f"has {held} objects: delete them before removing the "
                    "type.",
                    "type_in_use",
                )
            )
            continue
        i, new_type = found
        errors += _type_change(i, old_type, new_type, held, counts)
    new_links = {lt.name: lt for lt in new.link_types}
    for j, old_link in enumerate(old.link_types):
        held = counts.links.get(old_link.name, 0)
        changed = new_links.get(old_link.name)
        if not held:
            continue
        if changed is None:
            errors.append(
                FieldError(
                    "/link_types",
                    f"The link type '{old_link.name}' has "
                    f"{held} links: delete them before removing the type.",
                    "link_type_in_use",
                )
            )
        elif (changed.from_type, changed.to_type) != (old_link.from_type, old_link.to_type) or (
            changed.cardinality != old_link.cardinality
        ):
            errors.append(
                FieldError(
                    join("link_types", j),
                    f"The link type '{old_link.name}' "
                    f"has {held} links: its types and cardinality stay as they "
                    "are while it has links (delete them first, or add a new "
                    "link type).",
                    "link_type_in_use",
                )
            )
    return errors


def _type_change(
    i: int, old: ObjectTypeSpec, new: ObjectTypeSpec, held: int, counts: Counts
) -> Iterator[FieldError]:
    at = ("object_types", i)
    if new.primary_key != old.primary_key:
        yield FieldError(
            join(*at, "primary_key"),
            f"'{old.name}' has {held} objects, keyed by "
            f"'{old.primary_key}': the primary key cannot change while it has "
            "objects.",
            "key_in_use",
        )
    before = properties_of(old)
    after = properties_of(new)
    for name, prop in before.items():
        present = counts.present.get((old.name, name), 0)
        changed = after.get(name)
        if changed is None:
            if present:
                yield FieldError(
                    join(*at, "properties"),
                    f"{present} '{old.name}' objects have "
                    f"a value for '{name}': clear them (set it to null) before "
                    "removing the property.",
                    "property_in_use",
                )
            continue
        j = new.properties.index(changed)
        if present and changed.type != prop.type and (prop.type, changed.type) not in _WIDENS:
            yield FieldError(
                join(*at, "properties", j, "type"),
                f"{present} '{old.name}' "
                f"objects have {prop.type} values for '{name}', which are not "
                f"{changed.type} values: keep the type (or add a new property "
                "and move the values).",
                "incompatible_type",
            )
    for j, prop in enumerate(new.properties):
        if not prop.required:
            continue
        missing = held - counts.present.get((old.name, prop.name), 0)
        if missing > 0:
            yield FieldError(
                join(*at, "properties", j, "required"),
                f"{missing} '{old.name}' "
                f"objects have no value for '{prop.name}': give them one before "
                "making it required.",
                "missing_values",
            )
