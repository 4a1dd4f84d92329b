"""Objects, links and queries checked against an ontology's schema (pure, no I/O).

- ``check_object``: an object's properties against its type: every value of its property's
  type, required ones present, no unknown ones; values normalised (an integral float for an
  integer, a datetime in UTC) so what is stored compares the same in SQL and in Python.
- ``key_text``, ``title_of``, ``search_text``: what the store indexes.
- ``check_filters``: the filters of a search, typed by the properties they name.
- ``matches``: the same filters and text query evaluated in Python (the reference the store's
  SQL must agree with; also used by tests).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dhub.domain.errors import FieldError
from dhub.domain.pointers import join
from dhub.knowledge.ontology_schema import (
    MAX_SAFE_INTEGER,
    ObjectTypeSpec,
    PropertySpec,
    properties_of,
)

MAX_KEY = 200  # characters of a key
MAX_STRING = 100_000  # characters of a string value
Op = Literal["eq", "ne", "lt", "lte", "gt", "gte", "in", "contains"]
OPS: tuple[str, ...] = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "contains")
_ORDERED = ("eq", "ne", "lt", "lte", "gt", "gte", "in")
OPS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "string": (*_ORDERED, "contains"),
    "number": _ORDERED,
    "integer": _ORDERED,
    "date": _ORDERED,
    "datetime": _ORDERED,
    "boolean": ("eq", "ne"),
    "json": (),
}
MAX_IN = 500


class _Bad(ValueError):
    """A value that is not of its property's type; the message says what was expected."""


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return False


def coerce(prop: PropertySpec, value: Any) -> Any:
    """``value`` as a stored value of ``prop``'s type, or _Bad."""
    kind = prop.type
    if kind == "string":
        if not isinstance(value, str):
            raise _Bad(f"'{prop.name}' is a string property; got {_json_type(value)}.")
        if len(value) > MAX_STRING:
            raise _Bad(f"'{prop.name}' is {len(value)} characters long; the limit is {MAX_STRING}.")
        if "\x00" in value:
            raise _Bad(f"'{prop.name}' contains a NUL character: remove it.")
        return value
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Bad(f"'{prop.name}' is {_a(kind)} property; got {_json_type(value)}.")
        if isinstance(value, float) and not math.isfinite(value):
            raise _Bad(f"'{prop.name}' must be a finite number.")
        if kind == "integer":
            if isinstance(value, float):
                if not value.is_integer():
                    raise _Bad(f"'{prop.name}' is an integer property; got {value}.")
                value = int(value)
            if abs(value) > MAX_SAFE_INTEGER:
                raise _Bad(
                    f"'{prop.name}' is beyond ±{MAX_SAFE_INTEGER}, the largest integer "
                    "an ontology stores exactly."
                )
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _Bad(
                f"'{prop.name}' is a boolean property (true or false); got {_json_type(value)}."
            )
        return value
    if kind == "date":
        return _date(prop.name, value)
    if kind == "datetime":
        return _datetime(prop.name, value)
    if _has_nul(value):
        raise _Bad(f"'{prop.name}' contains a NUL character: remove it.")
    return value  # json: anything


def _date(name: str, value: Any) -> str:
    if isinstance(value, str) and len(value) == 10:
        try:
            return dt.date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise _Bad(
        f"'{name}' is a date property: write it as YYYY-MM-DD (e.g. '2026-03-31'); got "
        f"{_shown(value)}."
    )


def _datetime(name: str, value: Any) -> str:
    """An ISO 8601 date and time, stored in UTC as 'YYYY-MM-DDTHH:MM:SS[.ffffff]Z' (without an
    offset: taken as UTC), so stored values sort and compare as text."""
    if isinstance(value, str) and 10 <= len(value) <= 40:
        try:
            parsed = dt.datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is not None:
                parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
            return parsed.isoformat() + "Z"
    raise _Bad(
        f"'{name}' is a datetime property: write it in ISO 8601 (e.g. "
        f"'2026-03-31T14:30:00Z'); got {_shown(value)}."
    )


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}" if abs(value) < 1e15 else "a number"
    if isinstance(value, str):
        return f"the string {_shown(value)}"
    return "an array" if isinstance(value, list) else "an object"


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else _json_type(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- objects --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checked:
    """An object's properties as stored (nulls left out), and its key as text."""

    properties: dict[str, Any]
    key: str


def check_object(
    spec: ObjectTypeSpec, properties: Any, at: Sequence[str | int] = ()
) -> tuple[Checked | None, list[FieldError]]:
    """The object's properties checked against its type; errors point at ``at`` + the
    property. A null value means "no value" (and is not stored)."""
    where = join(*at)
    if not isinstance(properties, dict):
        return None, [
            FieldError(where, "'properties' must be an object of property values.", "type")
        ]
    declared = properties_of(spec)
    errors: list[FieldError] = []
    out: dict[str, Any] = {}
    listed = ", ".join(declared) or "none"
    for name, value in properties.items():
        prop = declared.get(name)
        if prop is None:
            shown = name[:80] if "\x00" not in name else name.replace("\x00", "\\0")[:80]
            errors.append(
                FieldError(
                    join(*at, name),
                    f"'{spec.name}' has no property '{shown}' (it has {listed}).",
                    "unknown_property",
                )
            )
            continue
        if value is None:
            continue
        try:
            out[name] = coerce(prop, value)
        except _Bad as bad:
            errors.append(FieldError(join(*at, name), str(bad), "invalid_value"))
    for prop in spec.properties:
        needed = prop.required or prop.name == spec.primary_key
        if (
            needed
            and prop.name not in out
            and not any(e.loc == join(*at, prop.name) for e in errors)
        ):
            what = "the primary key" if prop.name == spec.primary_key else "required"
            errors.append(
                FieldError(
                    join(*at, prop.name),
                    f"'{prop.name}' is {what} of '{spec.name}': give it a value.",
                    "missing",
                )
            )
    if errors:
        return None, errors
    key = key_text(out[spec.primary_key])
    problem = key_problem(key)
    if problem:
        return None, [FieldError(join(*at, spec.primary_key), problem, "invalid_key")]
    return Checked(out, key), []


def key_text(value: Any) -> str:
    """A primary key value as the text objects are stored and addressed by."""
    return str(value)


def key_problem(key: str) -> str | None:
    if not key or len(key) > MAX_KEY:
        return f"A key is 1 to {MAX_KEY} characters long; this one has {len(key)}."
    if "/" in key or any(ord(c) < 32 for c in key):
        return "A key may not contain '/' or control characters (it is part of URLs)."
    return None


def title_of(spec: ObjectTypeSpec, properties: Mapping[str, Any], key: str) -> str:
    value = properties.get(spec.title_property) if spec.title_property else None
    if value is None:
        return key
    return value if isinstance(value, str) else str(value)


def search_text(title: str, key: str, properties: Mapping[str, Any]) -> str:
    """What the text query searches: the title, the key and every string value, lowercased
    (the store matches each word of a query as a substring)."""
    parts = [title, key, *(v for v in properties.values() if isinstance(v, str))]
    return "\n".join(parts).lower()


def words(q: str) -> list[str]:
    return q.lower().split()


# -- filters --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Filter:
    """One typed condition: ``value`` is a stored value of the property's type (a tuple of
    them for ``in``)."""

    property: str
    type: str
    op: str
    value: Any


def check_filters(
    spec: ObjectTypeSpec, filters: Any, at: Sequence[str | int] = ("filters",)
) -> tuple[list[Filter], list[FieldError]]:
    """Filters as ``[{"property", "op", "value"}]``, each checked against the type."""
    if not isinstance(filters, list):
        return [], [
            FieldError(join(*at), "'filters' must be a list of {property, op, value}.", "type")
        ]
    declared = properties_of(spec)
    out: list[Filter] = []
    errors: list[FieldError] = []
    for i, item in enumerate(filters):
        here = (*at, i)
        if not isinstance(item, dict) or set(item) - {"property", "op", "value"}:
            errors.append(
                FieldError(
                    join(*here),
                    "A filter is an object with 'property', 'op' and 'value' only.",
                    "type",
                )
            )
            continue
        name, op = item.get("property"), item.get("op", "eq")
        prop = declared.get(name) if isinstance(name, str) else None
        if prop is None:
            listed = ", ".join(declared) or "none"
            errors.append(
                FieldError(
                    join(*here, "property"),
                    f"'{spec.name}' has no property {_shown(name)} (it has {listed}).",
                    "unknown_property",
                )
            )
            continue
        allowed = OPS_BY_TYPE[prop.type]
        if op not in allowed:
            can = ", ".join(allowed) if allowed else "no filters (it is json)"
            errors.append(
                FieldError(
                    join(*here, "op"),
                    f"{_shown(op)} is not an operator for "
                    f"the {prop.type} property '{prop.name}': it takes {can}.",
                    "invalid_op",
                )
            )
            continue
        filt, problem = _typed(prop, str(op), item.get("value"))
        if problem:
            errors.append(FieldError(join(*here, "value"), problem, "invalid_value"))
        elif filt is not None:
            out.append(filt)
    return out, errors


def _typed(prop: PropertySpec, op: str, value: Any) -> tuple[Filter | None, str | None]:
    try:
        if op == "in":
            if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN:
                return None, f"'in' takes a list of 1 to {MAX_IN} values."
            return Filter(prop.name, prop.type, op, tuple(coerce(prop, v) for v in value)), None
        if op == "contains":
            if not isinstance(value, str) or not value or "\x00" in value:
                return None, "'contains' takes a non-empty string."
            return Filter(prop.name, prop.type, op, value), None
        if value is None:
            return None, "A filter's value cannot be null."
        return Filter(prop.name, prop.type, op, coerce(prop, value)), None
    except _Bad as bad:
        return None, str(bad)


def parse_filter_param(text: str) -> dict[str, Any]:
    """A query-string filter ``property:op:value`` (``in``: values separated by ','), as the
    JSON form, with the value still text (``check_filters`` types it)."""
    name, _, rest = text.partition(":")
    op, sep, value = rest.partition(":")
    if not sep:
        op, value = "eq", rest
    return {"property": name, "op": op, "value": value.split(",") if op == "in" else value}


def from_text(prop: PropertySpec, value: Any) -> Any:
    """A query-string value (text) as a JSON value of the property's type, where it parses;
    otherwise unchanged, so ``coerce`` reports it."""
    if isinstance(value, list):
        return [from_text(prop, v) for v in value]
    if not isinstance(value, str):
        return value
    try:
        if prop.type == "integer":
            return int(value)
        if prop.type == "number":
            number = float(value)
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
    except ValueError:
        return value
    if prop.type == "boolean" and value in ("true", "false"):
        return value == "true"
    return value


# -- the reference evaluation ---------------------------------------------------------------------


def matches(
    properties: Mapping[str, Any], text: str, filters: Sequence[Filter], q: str | None
) -> bool:
    """Whether an object (its stored properties and search text) passes every filter and has
    every word of ``q``: the semantics the store's SQL implements."""
    if q and not all(w in text for w in words(q)):
        return False
    return all(_passes(properties.get(f.property), f) for f in filters)


def _passes(value: Any, f: Filter) -> bool:
    if f.op == "ne":
        return value is None or value != f.value  # no value differs from every value
    if value is None:
        return False
    if f.op == "eq":
        return bool(value == f.value)
    if f.op == "in":
        return value in f.value
    if f.op == "contains":
        return f.value in value
    compare = {
        "lt": value < f.value,
        "lte": value <= f.value,
        "gt": value > f.value,
        "gte": value >= f.value,
    }
    return bool(compare[f.op])
