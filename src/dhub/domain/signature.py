"""Type hints and docstrings, read from ``ast``: the JSON Schema of a hint, a literal default as
JSON, and the descriptions a docstring gives (Google, reST and NumPy styles)."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

JsonSchema = dict[str, Any]

NOT_JSON: Any = object()  # a default that JSON cannot hold: a call, a name, a set


def literal(node: ast.expr) -> Any:
    """The value of a literal expression as JSON, else NOT_JSON."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_JSON
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else NOT_JSON
    if isinstance(value, list | tuple):
        items = [_jsonable(v) for v in value]
        return NOT_JSON if any(i is NOT_JSON for i in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        fields = {k: _jsonable(v) for k, v in value.items()}
        return NOT_JSON if any(v is NOT_JSON for v in fields.values()) else fields
    return NOT_JSON


# --- type hints -> JSON Schema -----------------------------------------------------------------

_SCALARS: dict[str, JsonSchema] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "None": {"type": "null"},
    "NoneType": {"type": "null"},
}
_ARRAYS = frozenset(
    {"list", "List", "tuple", "Tuple", "set", "Set", "frozenset", "FrozenSet", "Sequence",
     "MutableSequence", "Iterable", "Collection", "AbstractSet"}
)  # fmt: skip
_SETS = frozenset({"set", "Set", "frozenset", "FrozenSet", "AbstractSet"})
_OBJECTS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})


def hint_schema(node: ast.expr | None) -> JsonSchema:
    """The JSON Schema of a type hint (an ``ast`` expression); ``{}`` (anything) when there is
    no hint or it names a type JSON cannot describe."""
    if node is None:
        return {}
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"type": "null"}
        return hint_schema(_parse_hint(node.value)) if isinstance(node.value, str) else {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([*_alternatives(node)])
    if isinstance(node, ast.Subscript):
        return _generic(_name(node.value), _arguments(node.slice))
    name = _name(node)
    if name in _SCALARS:
        return dict(_SCALARS[name])
    if name in _ARRAYS:
        return {"type": "array", **({"uniqueItems": True} if name in _SETS else {})}
    return {"type": "object"} if name in _OBJECTS else {}


def _parse_hint(text: str) -> ast.expr | None:
    # A string hint is a forward reference, e.g. "list[Order]".
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _arguments(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _alternatives(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_alternatives(node.left), *_alternatives(node.right)]
    return [node]


def _generic(name: str, args: list[ast.expr]) -> JsonSchema:
    if name == "Optional":
        return _union([args[0], ast.Constant(None)])
    if name == "Union":
        return _union(args)
    if name == "Literal":
        return _literal_schema(args)
    if name == "Annotated":
        return _annotated(args)
    if name in ("tuple", "Tuple"):
        return _tuple(args)
    if name in _ARRAYS:
        return _with({"type": "array", **_set_flag(name)}, "items", hint_schema(args[0]))
    if name in _OBJECTS:
        value = hint_schema(args[1]) if len(args) == 2 else {}
        return _with({"type": "object"}, "additionalProperties", value)
    return {}


def _set_flag(name: str) -> JsonSchema:
    return {"uniqueItems": True} if name in _SETS else {}


def _with(schema: JsonSchema, key: str, sub: JsonSchema) -> JsonSchema:
    # An "anything" sub-schema says nothing: leave it out.
    return {**schema, key: sub} if sub else schema


def _tuple(args: list[ast.expr]) -> JsonSchema:
    if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
        return _with({"type": "array"}, "items", hint_schema(args[0]))
    items = [hint_schema(a) for a in args if not (isinstance(a, ast.Tuple) and not a.elts)]
    return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}


def _annotated(args: list[ast.expr]) -> JsonSchema:
    schema = hint_schema(args[0])
    notes = [a.value for a in args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return {**schema, "description": notes[0]} if notes else schema


_JSON_TYPE = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _literal_schema(args: list[ast.expr]) -> JsonSchema:
    values = [v for v in (literal(a) for a in args) if v is not NOT_JSON]
    kinds = {_JSON_TYPE.get(type(v)) for v in values}
    schema: JsonSchema = {"enum": values}
    if len(kinds) == 1 and None not in kinds:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _union(members: list[ast.expr]) -> JsonSchema:
    schemas = [hint_schema(m) for m in members]
    if any(s == {} for s in schemas):
        return {}
    with_null = {"type": "null"} in schemas
    rest: list[JsonSchema] = []
    for s in schemas:
        if s != {"type": "null"} and s not in rest:
            rest.append(s)
    if not rest:
        return {"type": "null"}
    if len(rest) == 1:
        return nullable(rest[0]) if with_null else rest[0]
    if all(set(s) == {"type"} and isinstance(s["type"], str) for s in rest):
        return {"type": [s["type"] for s in rest] + (["null"] if with_null else [])}
    return {"anyOf": rest + ([{"type": "null"}] if with_null else [])}


def nullable(schema: JsonSchema) -> JsonSchema:
    """``schema`` that also accepts null."""
    if not schema:
        return schema
    out = dict(schema)
    if "enum" in out:
        out["enum"] = [*out["enum"], *([] if None in out["enum"] else [None])]
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"] if kind != "null" else kind
    elif isinstance(kind, list):
        out["type"] = kind if "null" in kind else [*kind, "null"]
    elif "enum" not in out:
        return {"anyOf": [schema, {"type": "null"}]}
    return out


# --- docstrings: Google, reST and NumPy styles ---------------------------------------------------

_GOOGLE = re.compile(
    r"^(\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*$"
)
_GOOGLE_ENTRY = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST = re.compile(r"^(\s*):param\s+(?:[^:]*\s)?\**(\w+)\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^(\**\w+(?:\s*,\s*\**\w+)*)\s*(?::.*)?$")
_RULE = re.compile(r"^\s*-{3,}\s*$")
_SECTION = re.compile(r"^\s*(?:[A-Z][\w ]*:\s*$|:\w)")


def summary(docstring: str) -> str:
    """The docstring's first paragraph, on one line."""
    lines = docstring.strip().splitlines()
    kept: list[str] = []
    for i, line in enumerate(lines):
        header = _SECTION.match(line) or (i + 1 < len(lines) and _RULE.match(lines[i + 1]))
        if not line.strip() or header:
            break
        kept.append(line.strip())
    return " ".join(kept)


def parameter_docs(docstring: str) -> dict[str, str]:
    """Each parameter's description, from whichever of the three styles the docstring uses."""
    lines = docstring.expandtabs().splitlines()
    return {**_numpy(lines), **_rest(lines), **_google(lines)}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _GOOGLE.match(lines[i])
        i += 1
        if header:
            i = _google_section(lines, i, len(header.group(1)), found)
    return found


def _google_section(lines: list[str], i: int, base: int, found: dict[str, str]) -> int:
    entry_indent: int | None = None
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if line.strip():
            if _indent(line) <= base:
                break
            entry_indent = entry_indent if entry_indent is not None else _indent(line)
            entry = _GOOGLE_ENTRY.match(line.strip()) if _indent(line) == entry_indent else None
            if entry:
                current = entry.group(1)
                found[current] = entry.group(2).strip()
            elif current:
                found[current] = f"{found[current]} {line.strip()}".strip()
        i += 1
    return i


def _rest(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    current: str | None = None
    base = 0
    for line in lines:
        field = _REST.match(line)
        if field:
            base, current = len(field.group(1)), field.group(2)
            found[current] = field.group(3).strip()
        elif current and line.strip() and _indent(line) > base:
            found[current] = f"{found[current]} {line.strip()}".strip()
        else:
            current = None
    return found


def _numpy(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    i = 0
    while i + 1 < len(lines):
        if lines[i].strip() in ("Parameters", "Other Parameters") and _RULE.match(lines[i + 1]):
            i = _numpy_section(lines, i + 2, _indent(lines[i]), found)
        else:
            i += 1
    return found


def _numpy_section(lines: list[str], i: int, base: int, found: dict[str, str]) -> int:
    names: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.strip() and i + 1 < len(lines) and _RULE.match(lines[i + 1]):
            break  # the next section's header
        if line.strip() and _indent(line) < base:
            break
        if line.strip() and _indent(line) == base:
            entry = _NUMPY_ENTRY.match(line.strip())
            if not entry:
                break
            names = [n.strip().lstrip("*") for n in entry.group(1).split(",")]
            found.update(dict.fromkeys(names, ""))
        elif line.strip():
            for name in names:
                found[name] = f"{found[name]} {line.strip()}".strip()
        i += 1
    return i
