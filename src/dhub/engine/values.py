"""Typed values of a run: start inputs, end outputs and variable operations (DESIGN.md 3.2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import MISSING

from dhub.domain.nodes import InputField, StartVariable

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


class InputError(ValueError):
    """The run's inputs do not fit the start node's variables; ``problems`` pairs each
    input's name with what is wrong with it."""

    def __init__(self, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


def is_type(kind: str, value: Any) -> bool:
    if kind == "number" and isinstance(value, bool):
        return False
    return isinstance(value, _PYTHON_TYPES.get(kind, (object,)))


def check_output(kind: str, value: Any) -> str | None:
    """None when ``value`` is a ``kind``; otherwise what is wrong, as a sentence fragment."""
    if kind not in _PYTHON_TYPES or is_type(kind, value):
        return None
    return f"should be {_a(kind)}, got {type(value).__name__} {value!r:.60}"


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in ("a", "e", "i", "o", "u") else f"a {kind}"


def _coerce(kind: str, value: Any) -> Any:
    """Only conversions that lose nothing: "3" -> 3 for a number, 3 -> "3" never."""
    if is_type(kind, value):
        return value
    if kind == "number" and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return MISSING
        return int(number) if number.is_integer() and "." not in value else number
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return MISSING


def coerce_inputs(variables: Sequence[StartVariable], inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs a run starts with: declared ones typed, defaults filled in, every problem
    reported at once. Undeclared inputs pass through unchanged."""
    values = dict(inputs)
    problems: list[str] = []
    named: list[tuple[str, str]] = []
    for var in variables:
        if var.name not in inputs:
            if var.default is not MISSING:
                values[var.name] = var.default
            elif var.required:
                problems.append(f"'{var.name}' is required ({var.type})")
                named.append((var.name, f"is required ({var.type})"))
            continue
        typed = _coerce(var.type, inputs[var.name])
        if typed is MISSING:
            wrong = f"should be {_a(var.type)}, got {inputs[var.name]!r:.60}"
            problems.append(f"'{var.name}' {wrong}")
            named.append((var.name, wrong))
        else:
            values[var.name] = typed
    if problems:
        raise InputError("invalid inputs: " + "; ".join(problems), named)
    return values


def check_submission(fields: Sequence[InputField], values: dict[str, Any]) -> dict[str, Any]:
    """A person's answer to a human_input node, typed and complete: every field present (the
    optional ones not given take their default, else null). Raises InputError listing every
    problem: unknown fields, missing required ones, wrong types, values outside ``options``."""
    known = {f.name for f in fields}
    problems = [f"'{name}' is not a field of this form" for name in values if name not in known]
    answer: dict[str, Any] = {}
    for f in fields:
        if f.name not in values or values[f.name] is None:
            if f.required:
                problems.append(f"'{f.name}' is required ({f.type})")
            answer[f.name] = None if f.default is MISSING else f.default
            continue
        typed = _coerce(f.type, values[f.name])
        if typed is MISSING:
            problems.append(f"'{f.name}' should be {_a(f.type)}, got {values[f.name]!r:.60}")
        elif f.options and typed not in f.options:
            problems.append(f"'{f.name}' should be one of {f.options!r:.120}, got {typed!r:.60}")
        answer[f.name] = typed
    if problems:
        raise InputError("invalid answer: " + "; ".join(problems))
    return answer


def field_defaults(fields: Sequence[InputField]) -> dict[str, Any]:
    """Every field at its default (null where it has none): on_timeout 'default'."""
    return {f.name: None if f.default is MISSING else f.default for f in fields}


def operate(action: str, current: Any, value: Any) -> Any:
    """The new value of a variable after one operation."""
    if action == "set":
        return value
    if action == "clear":
        return _empty_like(current)
    if action == "append":
        return [*(current or []), value]
    if action == "extend":
        return [*(current or []), *_as_list(value)]
    if action == "remove":
        return _remove(current, value)
    if action in ("increment", "decrement"):
        step = 1 if value is None else value
        base = 0 if current is None else current
        if not is_type("number", base) or not is_type("number", step):
            raise TypeError(f"{action} needs numbers, got {base!r} and {step!r}")
        return base + step if action == "increment" else base - step
    if action == "merge":
        if not isinstance(value, dict) or not isinstance(current or {}, dict):
            raise TypeError("merge needs objects")
        return {**(current or {}), **value}
    raise ValueError(f"unknown action {action!r}")


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"extend needs a list, got {type(value).__name__}")
    return value


def _remove(current: Any, value: Any) -> Any:
    if isinstance(current, list):
        return [item for item in current if item != value]
    if isinstance(current, dict):
        return {k: v for k, v in current.items() if k != value}
    raise TypeError(f"remove needs a list or an object, got {type(current).__name__}")


def _empty_like(current: Any) -> Any:
    if isinstance(current, list):
        return []
    if isinstance(current, dict):
        return {}
    if isinstance(current, str):
        return ""
    return None
