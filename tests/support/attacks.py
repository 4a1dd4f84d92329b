"""Bad requests for every operation of an OpenAPI document, one class of bad input at a time.

``attacks(operation, values, templates)`` yields ``Attack``s for one operation: its path, query
and header parameters and its JSON body, each made bad in turn while the rest stays valid:

- integers at and beyond the signed 64-bit range (and beyond 32 bits, and 5,000 digits) in
  every integer path, query and header parameter and every integer of the body;
- strings of 100,000 characters in every path and query parameter (10,000 random characters
  in body strings: what is indexed must not break PostgreSQL's index rows);
- a NUL character in every path id, query value, header value, body string and body key, and
  NUL hidden inside base64 (what a cursor decodes to);
- bodies nested 1,000 deep, 65 deep, integer literals beyond 64 bits, 1e400, a lone
  surrogate, invalid UTF-8, and bodies that are not objects.

The valid starting point of a body comes from ``templates`` (by method and path) or, for an
operation without one, from its schema, so a new endpoint is attacked without changes here.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
BAD_INTS = (2**63, -(2**63) - 1, INT64_MAX, INT64_MIN, 2**31, 10**30)
HUGE_DIGITS = "9" * 5000
LONG = "q" * 100_000
NUL = "a\x00b"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# What a server might decode a cursor into: NUL, a huge integer, a huge string.
ENCODED = (_b64(b"\x00"), _b64(b'{"after":"\\u0000"}'), _b64(b'{"after":1e400}'),
           _b64(str(2**64).encode()), _b64(b"x" * 70_000))  # fmt: skip


@dataclass
class Attack:
    label: str
    method: str
    path: str  # decoded
    query: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class Operation:
    method: str
    template: str  # the OpenAPI path
    spec: dict[str, Any]

    def parameters(self, where: str) -> list[dict[str, Any]]:
        return [p for p in self.spec.get("parameters", []) if p["in"] == where]

    def body_schema(self) -> dict[str, Any] | None:
        content = self.spec.get("requestBody", {}).get("content", {})
        media = content.get("application/json")
        return media.get("schema", {}) if media is not None else None


def operations(openapi: dict[str, Any]) -> list[Operation]:
    methods = ("get", "post", "put", "patch", "delete")
    return [
        Operation(method.upper(), path, spec)
        for path, item in openapi["paths"].items()
        for method, spec in item.items()
        if method in methods
    ]


def _kind(param: dict[str, Any]) -> str:
    schema = param.get("schema", {})
    options = schema.get("anyOf", [schema])
    types = {o.get("type") for o in options}
    return "integer" if "integer" in types else "array" if "array" in types else "string"


def _path(op: Operation, values: dict[str, str], bad: dict[str, str] | None = None) -> str:
    path = op.template
    for param in op.parameters("path"):
        name = param["name"]
        value = (bad or {}).get(name, values.get(name, "1" if _kind(param) == "integer" else "x"))
        path = path.replace("{" + name + "}", value)
    return path


def _query(name: str, value: str) -> bytes:
    return f"{quote(name)}={quote(value, safe='')}".encode()


def attacks(
    op: Operation,
    values: dict[str, str],
    templates: dict[tuple[str, str], Any],
    components: dict[str, Any],
) -> Iterator[Attack]:
    """Every bad request for ``op``; ``values`` gives real ids for path parameters by name,
    ``components`` the document's schemas (for bodies without a template)."""
    yield from _path_attacks(op, values)
    yield from _query_attacks(op, values)
    yield from _header_attacks(op, values)
    if op.body_schema() is not None:
        template = templates.get((op.method, op.template))
        if template is None:
            template = example(op.body_schema() or {}, components)
        yield from _body_attacks(op, _path(op, values), template)


def _bad_values(kind: str) -> list[str]:
    if kind == "integer":
        return [*(str(i) for i in BAD_INTS), HUGE_DIGITS, "-1", "1.5", "²"]
    return [LONG, NUL, *ENCODED]


def _path_attacks(op: Operation, values: dict[str, str]) -> Iterator[Attack]:
    for param in op.parameters("path"):
        name, kind = param["name"], _kind(param)
        bad = _bad_values(kind)
        if kind != "integer":
            real = values.get(name, "x")
            bad = [real + "\x00", "\x00" + real, LONG]
        for value in bad:
            yield Attack(f"path {name}={value[:20]!r}", op.method, _path(op, values, {name: value}))


def _query_attacks(op: Operation, values: dict[str, str]) -> Iterator[Attack]:
    path = _path(op, values)
    for param in op.parameters("query"):
        name, kind = param["name"], _kind(param)
        for value in _bad_values(kind):
            yield Attack(f"query {name}={value[:20]!r}", op.method, path, _query(name, value))
        if kind == "array":
            many = b"&".join(_query(name, f"t{i}") for i in range(1000))
            yield Attack(f"query {name} x1000", op.method, path, many)
            yield Attack(f"query {name} commas", op.method, path, _query(name, ",".join("t" * 999)))


def _header_attacks(op: Operation, values: dict[str, str]) -> Iterator[Attack]:
    path = _path(op, values)
    yield Attack("header NUL", op.method, path, headers={"x-request-id": NUL})
    yield Attack("header NUL accept", op.method, path, headers={"accept": "text/event-stream\x00"})
    for param in op.parameters("header"):
        name, kind = param["name"], _kind(param)
        for value in [*_bad_values(kind), LONG, NUL]:
            headers = {name.lower(): value, "accept": "text/event-stream"}
            yield Attack(f"header {name}={value[:20]!r}", op.method, path, headers=headers)


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _body_attacks(op: Operation, path: str, template: Any) -> Iterator[Attack]:
    def attack(label: str, body: bytes) -> Attack:
        return Attack(f"body {label}", op.method, path, body=body)

    yield attack("[x1000", b"[" * 1000 + b"]" * 1000)
    yield attack("{x1000", b'{"a":' * 1000 + b"1" + b"}" * 1000)
    for raw in (b"", b"null", b"[]", b'"x"', b"\xff\xfe", b'{"a": "\\ud800"}', b'{"a": 1e400}'):
        yield attack(repr(raw), raw)
    if not isinstance(template, dict):
        return
    deep: Any = "x"
    for _ in range(65):
        deep = {"d": deep}
    yield attack("65 deep", _dump({**template, "deep": deep}))
    yield attack("NUL key", _dump({**template, "a\x00b": 1}))
    big = _dump({**template, "n": 0}).replace(b'"n": 0', b'"n": 18446744073709551616')
    yield attack("2^64 literal", big)
    for at, leaf in _leaves(template):
        for bad in _leaf_values(leaf):
            yield attack(
                f"{'/'.join(map(str, at))}={str(bad)[:20]!r}", _dump(_put(template, at, bad))
            )


def _leaf_values(leaf: Any) -> list[Any]:
    if isinstance(leaf, bool):
        return []
    if isinstance(leaf, int):
        return list(BAD_INTS)
    if isinstance(leaf, float):
        return [1.7976931348623157e308, *BAD_INTS[:2]]
    if isinstance(leaf, str):
        return [leaf + "\x00", os.urandom(5000).hex()]
    return []


def _leaves(
    value: Any, at: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*at, i))
    else:
        yield at, value


def _put(doc: Any, at: tuple[str | int, ...], value: Any) -> Any:
    copied = copy.deepcopy(doc)
    cur = copied
    for key in at[:-1]:
        cur = cur[key]
    cur[at[-1]] = value
    return copied


# -- a valid-looking body from a schema ---------------------------------------------------------


def example(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> Any:
    """A value of ``schema`` with every property filled (strings "a", integers 1...)."""
    if "$ref" in schema:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            options = [o for o in schema[combined] if o.get("type") != "null"]
            return example(options[0], components, depth) if options else None
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    kind = schema.get("type", "object")
    if kind == "object":
        if depth > 3:
            return {}
        props = schema.get("properties", {})
        return {k: example(v, components, depth + 1) for k, v in props.items()} or {
            "a": "b",
            "n": 1,
        }
    if kind == "array":
        return [example(schema.get("items", {}), components, depth + 1)]
    return {"string": "a", "integer": 1, "number": 1.5, "boolean": True}.get(kind)
