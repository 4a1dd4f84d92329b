"""What goes into a function and comes out of it, checked against JSON Schema (Draft 2020-12).

This runs on every call. A schema is compiled once (cached by its canonical JSON) into a plain
Python predicate when it only uses the keywords our derived schemas use; the predicate answers
the common case, a valid call, in a few microseconds. Only when it says no, or when the schema
uses other keywords, does ``jsonschema`` walk the value: it is the reference, and its errors are
turned into sentences that name the field.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match

TYPE_NAMES = ("string", "number", "integer", "boolean", "object", "array", "null")

Predicate = Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One problem with a call's values; ``field`` is a path like ``inputs.items[2].id``;
    ``rule`` the path in the checked schema of the keyword the value breaks (when known; it
    does not tell problems apart)."""

    field: str
    message: str
    rule: tuple[str | int, ...] = dataclass_field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class CallValueError(ValueError):
    """Values of a call do not fit their schema; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[FieldProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


class CallInputError(CallValueError):
    """The arguments of a call do not fit the function's parameters."""


class CallOutputError(CallValueError):
    """The function's result does not hold its declared outputs."""


def output_schema(spec: Any) -> Any:
    """An output may be a bare type name (code nodes use them): "number" is {"type": "number"}."""
    return {"type": spec} if isinstance(spec, str) else spec


def schema_problem(schema: Any, *, type_names: bool = False) -> str | None:
    """None when ``schema`` is a valid JSON Schema (or, with ``type_names``, a type name);
    otherwise what is wrong with it, as a sentence."""
    found = schema_problem_at(schema, type_names=type_names)
    return found[1] if found else None


def schema_problem_at(
    schema: Any, *, type_names: bool = False
) -> tuple[tuple[str | int, ...], str] | None:
    """``schema_problem``, with where in ``schema`` the problem is (a path of keys and
    indexes, empty for the schema itself)."""
    if type_names and isinstance(schema, str):
        if schema in TYPE_NAMES:
            return None
        names = ", ".join(TYPE_NAMES)
        return (), f"Unknown type '{schema}': use one of {names}, or a JSON schema."
    if not isinstance(schema, dict | bool):
        shape = 'an object such as {"type": "string"}'
        return (), f"Expected a JSON schema ({shape}), got {_show(schema)}."
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return tuple(exc.absolute_path), f"Not a valid JSON schema: {exc.message}."
    except RecursionError:
        return (), "The schema is nested too deeply to check: flatten it."
    return None


def check_inputs(parameters: Mapping[str, Any], inputs: Any) -> None:
    """Raise CallInputError naming every argument that does not fit ``parameters`` (a JSON
    Schema object, as ``derive_parameters`` gives)."""
    if not isinstance(inputs, dict):
        problem = f"should be an object of named arguments, got {_show(inputs)}"
        raise CallInputError([FieldProblem("inputs", problem)])
    problems = _compiled(parameters).problems(inputs, "inputs")
    if problems:
        raise CallInputError(problems)


def check_outputs(outputs: Mapping[str, Any], value: Any) -> None:
    """Raise CallOutputError unless ``value`` is an object holding each declared output, each
    fitting its schema (or bare type name). With nothing declared, any result is accepted; keys
    beyond the declared ones are allowed."""
    if not outputs:
        return
    if not isinstance(value, dict):
        names = ", ".join(repr(n) for n in outputs)
        problem = f"the function returned {_show(value)}; it must return an object holding {names}"
        raise CallOutputError([FieldProblem("outputs", problem)])
    schema = {
        "type": "object",
        "properties": {name: output_schema(spec) for name, spec in outputs.items()},
        "required": list(outputs),
    }
    problems = _compiled(schema).problems(value, "outputs")
    if problems:
        raise CallOutputError(problems)


@dataclass(frozen=True, slots=True)
class _Compiled:
    fast: Predicate | None
    validator: Draft202012Validator

    def problems(self, instance: Any, root: str) -> list[FieldProblem]:
        if self.fast is not None and self.fast(instance):
            return []
        found: set[FieldProblem] = set()
        for error in self.validator.iter_errors(instance):
            found.update(_describe(error, root))
        return sorted(found, key=lambda p: (p.field, p.message))


def _compiled(schema: Any) -> _Compiled:
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # e.g. an integer beyond 64 bits
        key = json.dumps(schema, sort_keys=True).encode()
    return _compile(key)


@functools.lru_cache(maxsize=1024)
def _compile(key: bytes) -> _Compiled:
    # Built from the key, not the caller's dict, so a later change to that dict cannot
    # disagree with the cached validator.
    schema = json.loads(key)
    problem = schema_problem(schema)
    if problem:
        raise ValueError(problem)
    return _Compiled(_predicate(schema), Draft202012Validator(_located_false(schema)))


# jsonschema reports a ``false`` sub-schema reached through properties, prefixItems and the like
# without the path to the value (jsonschema 4.26); ``{"not": {}}`` means the same and is
# reported where it fails. These keywords handle ``false`` themselves, with the right path.
_OWN_FALSE = frozenset(
    {"additionalProperties", "items", "unevaluatedItems", "unevaluatedProperties"}
)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_SCHEMA_ONE = frozenset({"not", "if", "then", "else", "contains", "propertyNames"}) | _OWN_FALSE


def _located_false(schema: Any, keep_false: bool = False) -> Any:
    if schema is False and not keep_false:
        return {"not": {}}
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _located_false(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_located_false(v) for v in value]
        elif key in _SCHEMA_ONE:
            out[key] = _located_false(value, keep_false=key in _OWN_FALSE)
    return out


# --- the fast path: a predicate for the keywords derived schemas use ---------------------------

_ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$comment", "deprecated", "readOnly"}
)


def _is_integer(v: Any) -> bool:
    # Draft 2020-12: 1.0 is an integer; True is not.
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and v.is_integer())


_TYPE_CHECKS: dict[str, Predicate] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema means it (enum, const): 1 == 1.0, but true != 1."""
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return False  # two equal booleans are the same object, caught above
    if isinstance(a, list | dict) or isinstance(b, list | dict):
        return False
    return bool(a == b)


def _predicate(schema: Any) -> Predicate | None:
    """A predicate equivalent to ``schema``, or None when it uses a keyword not handled here."""
    if schema is True:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if not isinstance(schema, dict):
        return None
    checks: list[Predicate] = []
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        make = _KEYWORDS.get(key)
        check = make(value, schema) if make else None
        if check is None:
            return None
        checks.append(check)
    return _every(checks)


def _every(checks: Sequence[Predicate]) -> Predicate:
    if len(checks) == 1:
        return checks[0]
    frozen = tuple(checks)

    def every(v: Any) -> bool:
        # Loops, not all(...): this runs on every call and a generator costs ~0.3 µs more.
        for check in frozen:  # noqa: SIM110
            if not check(v):
                return False
        return True

    return every


def _type(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    names = [value] if isinstance(value, str) else value
    checks = tuple(_TYPE_CHECKS[n] for n in names)
    return checks[0] if len(checks) == 1 else lambda v: any(c(v) for c in checks)


def _enum(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    options = tuple(value)
    return lambda v: any(json_equal(v, o) for o in options)


def _const(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    return lambda v: json_equal(v, value)


def _properties(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    pairs = tuple((name, _predicate(sub)) for name, sub in value.items())
    checks = tuple((name, sub) for name, sub in pairs if sub is not None)
    if len(checks) < len(pairs):
        return None

    def properties(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        for name, sub in checks:  # noqa: SIM110 (as in _every)
            if name in v and not sub(v[name]):
                return False
        return True

    return properties


def _required(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    names = tuple(value)
    return lambda v: not isinstance(v, dict) or all(n in v for n in names)


def _additional(value: Any, schema: Mapping[str, Any]) -> Predicate | None:
    known = frozenset(schema.get("properties", {}))
    sub = _predicate(value)
    if sub is None:
        return None

    def additional(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        return all(sub(item) for name, item in v.items() if name not in known)

    return additional


def _items(value: Any, schema: Mapping[str, Any]) -> Predicate | None:
    skip = len(schema.get("prefixItems", ()))
    sub = _predicate(value)
    if sub is None:
        return None
    return lambda v: not isinstance(v, list) or all(sub(item) for item in v[skip:])


def _prefix_items(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    subs = [_predicate(sub) for sub in value]
    if any(sub is None for sub in subs):
        return None
    checks = tuple(s for s in subs if s is not None)
    return lambda v: not isinstance(v, list) or all(c(i) for c, i in zip(checks, v, strict=False))


def _min_items(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    return lambda v: not isinstance(v, list) or len(v) >= value


def _max_items(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    return lambda v: not isinstance(v, list) or len(v) <= value


def _any_of(value: Any, _: Mapping[str, Any]) -> Predicate | None:
    subs = [_predicate(sub) for sub in value]
    if any(sub is None for sub in subs):
        return None
    checks = tuple(s for s in subs if s is not None)
    return lambda v: any(c(v) for c in checks)


_KEYWORDS: dict[str, Callable[[Any, Mapping[str, Any]], Predicate | None]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "prefixItems": _prefix_items,
    "minItems": _min_items,
    "maxItems": _max_items,
    "anyOf": _any_of,
}


# --- jsonschema's errors, as sentences naming the field ----------------------------------------


def _field(root: str, path: Iterable[str | int]) -> str:
    return root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _show(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _types(value: Any) -> str:
    names = [value] if isinstance(value, str) else list(value)
    return " or ".join(_a(n) if n != "null" else "null" for n in names)


def _describe(error: ValidationError, root: str) -> list[FieldProblem]:
    at = _field(root, error.absolute_path)
    kind, rule, got = error.validator, error.validator_value, error.instance
    if kind == "required":
        return _missing(at, rule, got, root)
    if kind == "additionalProperties" and rule is False:
        return _unknown(at, error.schema, got, root)
    if kind in ("anyOf", "oneOf"):
        return [FieldProblem(at, _no_form(error, root), tuple(error.absolute_schema_path))]
    sentence = _sentence(kind, rule, got, error.message)
    return [FieldProblem(at, sentence, tuple(error.absolute_schema_path))]


def _missing(at: str, names: Any, instance: Any, root: str) -> list[FieldProblem]:
    has = ", ".join(repr(k) for k in instance) or "nothing"
    if at == "outputs" and root == "outputs":
        says = f"missing from the result (it has {has})"
    elif at == "inputs":
        says = "is required, but was not given"
    else:
        says = f"is required, but missing (given: {has})"
    return [FieldProblem(f"{at}.{n}", says) for n in names if n not in instance]


def _unknown(at: str, schema: Any, instance: Any, root: str) -> list[FieldProblem]:
    known = list(schema.get("properties", {})) if isinstance(schema, dict) else []
    patterns = list(schema.get("patternProperties", {})) if isinstance(schema, dict) else []
    extras = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
    takes = ", ".join(known) or "none"
    if at == "inputs" and root == "inputs":
        says = f"is not a parameter of this function (it takes: {takes})"
    else:
        says = f"is not allowed here (allowed: {takes})"
    return [FieldProblem(_field(at, [k]), says) for k in extras]


def _no_form(error: ValidationError, root: str) -> str:
    context = list(error.context or ())
    if context and all(e.validator == "type" and not e.relative_path for e in context):
        wanted = " or ".join(_types(e.validator_value) for e in context)
        return f"should be {wanted}, got {_show(error.instance)}"
    # best_match descends into the alternatives, preferring one whose type fits the value.
    closest = best_match([error])
    nearest = _describe(closest, root)[:1] if closest is not error else []
    return "matches none of the allowed forms" + (f"; closest: {nearest[0]}" if nearest else "")


_BOUNDS = {
    "minimum": "should be at least {rule}",
    "maximum": "should be at most {rule}",
    "exclusiveMinimum": "should be more than {rule}",
    "exclusiveMaximum": "should be less than {rule}",
    "multipleOf": "should be a multiple of {rule}",
    "minLength": "should have at least {rule} characters",
    "maxLength": "should have at most {rule} characters",
    "minItems": "should have at least {rule} items",
    "maxItems": "should have at most {rule} items",
    "minProperties": "should have at least {rule} fields",
    "maxProperties": "should have at most {rule} fields",
    "pattern": "should match the pattern {rule!r}",
    "format": "should be a valid {rule}",
}


def _sentence(kind: Any, rule: Any, got: Any, fallback: str) -> str:
    if kind == "type":
        return f"should be {_types(rule)}, got {_show(got)}"
    if kind == "enum":
        return f"should be one of {', '.join(_show(o) for o in rule)}, got {_show(got)}"
    if kind == "const":
        return f"should be {_show(rule)}, got {_show(got)}"
    if kind in _BOUNDS:
        return _BOUNDS[kind].format(rule=rule) + f", got {_show(got)}"
    if kind == "uniqueItems":
        return "should not repeat items"
    if kind is None or rule is False or (kind == "not" and rule == {}):
        return "is not allowed here"
    return fallback
