"""Function specs read without running them (DESIGN.md 5): the entry point, the parameters a
model sees, and the create-time rules for inputs, outputs and decorators.

Everything here parses the source with ``ast``; user code never runs in the server.

Entry point: the top-level function named like the tool, else the only top-level function,
else ``main``. ``async def`` functions count when resolving (the runner's child sees them as
functions too) but cannot be the entry point: the platform calls it as a plain function.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from dhub.domain.call_schemas import schema_problem_at
from dhub.domain.functions import AgentActorConfig, AgentToolConfig, FunctionSpec
from dhub.domain.signature import NOT_JSON, hint_schema, literal, nullable, parameter_docs, summary

JsonSchema = dict[str, Any]
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class SpecError(ValueError):
    """A function spec the platform cannot call; ``field`` names the part to fix."""

    def __init__(
        self, message: str, code: str = "invalid_function", field: str = "function.source"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field


@dataclass(frozen=True, slots=True)
class ToolParameters:
    """What a model is told about a function: a description and a JSON Schema object."""

    description: str
    schema: JsonSchema


# --- the entry point ---------------------------------------------------------------------------


def entry_point(source: str, name: str | None = None, *, fallback: bool = True) -> str:
    """The function the platform calls. Without ``fallback`` only ``name`` itself counts
    (code nodes call ``main``)."""
    return _find(source, name, fallback).name


def _find(source: str, name: str | None, fallback: bool) -> ast.FunctionDef:
    functions = _top_level(_parse(source))
    found = _resolve(functions, name, fallback)
    if found is None:
        raise SpecError(_no_entry(functions, name, fallback), "no_entry_point")
    node = functions[found]
    if isinstance(node, ast.AsyncFunctionDef):
        raise SpecError(
            f"'{found}' is an async def; the platform calls the entry point as a plain "
            f"function: make it 'def {found}(...)'.",
            "async_entry_point",
        )
    return node


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "unknown line"
        raise SpecError(
            f"The source does not parse ({exc.msg}, {where}): fix the syntax.", "syntax_error"
        ) from exc
    except ValueError as exc:  # NUL characters, on Python 3.11
        raise SpecError(f"The source does not parse: {exc}.", "syntax_error") from exc
    except (RecursionError, MemoryError) as exc:  # the parser's own limits
        raise SpecError(
            "The source is nested too deeply to parse: split the expressions up.", "syntax_error"
        ) from exc


def _top_level(tree: ast.Module) -> dict[str, FunctionNode]:
    # A later def of the same name replaces the earlier one, as it does when the module runs.
    return {n.name: n for n in tree.body if isinstance(n, FunctionNode)}


def _resolve(functions: Mapping[str, FunctionNode], name: str | None, fallback: bool) -> str | None:
    if name and name in functions:
        return name
    if not fallback:
        return None
    if len(functions) == 1:
        return next(iter(functions))
    return "main" if "main" in functions else None


def _no_entry(functions: Mapping[str, FunctionNode], name: str | None, fallback: bool) -> str:
    defines = ", ".join(f"'{f}'" for f in functions) or "no top-level functions"
    if not fallback:
        return (
            f"Define a top-level function '{name}(...)': it is called with the inputs as keyword "
            f"arguments. The source defines {defines}."
        )
    named = f"a top-level function named '{name}' (like the tool), or " if name else ""
    return (
        f"No entry point: define {named}exactly one top-level function, or one named 'main'. "
        f"The source defines {defines}."
    )


# --- parameters from the signature and docstring -----------------------------------------------


def derive_parameters(source: str, entry: str) -> ToolParameters:
    """The parameters of the top-level function ``entry``, from its type hints, defaults and
    docstring. ``*args`` is left out (arguments are passed by name); ``**kwargs`` lets the
    schema accept other names; positional-only parameters are an error."""
    function = _find(source, entry, fallback=False)
    docstring = ast.get_docstring(function, clean=False) or ""
    return ToolParameters(summary(docstring), _signature_schema(function, docstring))


def parameters_from_inputs(inputs: Mapping[str, Any]) -> JsonSchema:
    """The parameters schema for explicit ``inputs`` (name -> JSON schema): every name is
    required unless its schema has a ``default``."""
    required = [n for n, s in inputs.items() if not (isinstance(s, dict) and "default" in s)]
    return {
        "type": "object",
        "properties": dict(inputs),
        "required": required,
        "additionalProperties": False,
    }


def function_parameters(function: FunctionSpec, name: str | None = None) -> ToolParameters:
    """Explicit ``inputs`` win; without them the entry point's signature is read. The
    description is the docstring's first paragraph either way."""
    node = _find(function.source, entry_point(function.source, name), fallback=False)
    docstring = ast.get_docstring(node, clean=False) or ""
    if function.inputs:
        return ToolParameters(summary(docstring), parameters_from_inputs(function.inputs))
    return ToolParameters(summary(docstring), _signature_schema(node, docstring))


def tool_definition(item: AgentToolConfig | AgentActorConfig) -> dict[str, Any]:
    """The tool as a model sees it: name, description, parameters (a JSON Schema object)."""
    parameters = function_parameters(item.function, item.name)
    return {
        "name": item.name,
        "description": item.description or parameters.description,
        "parameters": parameters.schema,
    }


def _signature_schema(function: ast.FunctionDef, docstring: str) -> JsonSchema:
    try:
        return _read_signature(function, docstring)
    except RecursionError as exc:
        raise SpecError(
            f"The type hints of '{function.name}' are nested too deeply to read: simplify them, "
            "or give 'inputs' explicitly.",
            "bad_signature",
        ) from exc


def _read_signature(function: ast.FunctionDef, docstring: str) -> JsonSchema:
    args = function.args
    if args.posonlyargs:
        names = ", ".join(f"'{a.arg}'" for a in args.posonlyargs)
        raise SpecError(
            f"{names} of '{function.name}' can only be passed by position, and the platform "
            "passes arguments by name: remove the '/' from the signature.",
            "bad_signature",
        )
    docs = parameter_docs(docstring)
    defaults: list[ast.expr | None] = [None] * (len(args.args) - len(args.defaults))
    pairs = [*zip(args.args, [*defaults, *args.defaults], strict=True)]
    pairs += zip(args.kwonlyargs, args.kw_defaults, strict=True)
    properties: JsonSchema = {}
    required: list[str] = []
    for arg, default in pairs:
        properties[arg.arg] = _parameter(arg, default, docs.get(arg.arg))
        if default is None:
            required.append(arg.arg)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": args.kwarg is not None,
    }


def _parameter(arg: ast.arg, default: ast.expr | None, doc: str | None) -> JsonSchema:
    schema = hint_schema(arg.annotation)
    if default is not None:
        value = literal(default)
        if value is None:
            schema = nullable(schema)  # `x: str = None`, the pre-PEP 604 way to say optional
        if value is not NOT_JSON:
            schema["default"] = value
    if doc and "description" not in schema:
        schema["description"] = doc
    return schema


# --- create-time rules ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """A create-time problem; ``at`` is the path below the object that was checked."""

    at: tuple[str | int, ...]
    message: str
    code: str


@dataclass(frozen=True, slots=True)
class ArgumentRule:
    says: str  # what a good value is, for messages
    accepts: Callable[[Any], bool]
    required: bool = True
    default: Any = None


def _whole(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _seconds(*, zero: bool) -> Callable[[Any], bool]:
    def accepts(v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return False
        return v >= 0 if zero else v > 0

    return accepts


_BACKOFFS = ("fixed", "linear", "exponential")

DECORATOR_RULES: Mapping[str, Mapping[str, ArgumentRule]] = {
    "retry": {
        "attempts": ArgumentRule("a whole number, at least 1", _whole(1)),
        "delay": ArgumentRule("a number of seconds, at least 0", _seconds(zero=True), False, 0),
        "backoff": ArgumentRule(
            "one of 'fixed', 'linear', 'exponential'", lambda v: v in _BACKOFFS, False, "fixed"
        ),
    },
    "timeout": {"seconds": ArgumentRule("a number of seconds, more than 0", _seconds(zero=False))},
    "cache": {"ttl": ArgumentRule("a number of seconds, more than 0", _seconds(zero=False))},
    "rate_limit": {
        "calls": ArgumentRule("a whole number, at least 1", _whole(1)),
        "period": ArgumentRule("a number of seconds, more than 0", _seconds(zero=False)),
    },
}


def decorator_arguments(decorator: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a (validated) decorator with defaults filled in."""
    rules = DECORATOR_RULES[decorator]
    filled = {name: rule.default for name, rule in rules.items() if not rule.required}
    return {**filled, **arguments}


def function_problems(function: Mapping[str, Any], name: str | None) -> list[Problem]:
    """Every create-time problem of an inline function (a raw FunctionSpec object) whose tool
    or actor is called ``name``. Wrong JSON types are left to the schema check."""
    problems: list[Problem] = []
    source = function.get("source")
    entry: str | None = None
    if isinstance(source, str):
        try:
            entry = entry_point(source, name)
            if not function.get("inputs"):
                derive_parameters(source, entry)
        except SpecError as exc:
            problems.append(Problem(("source",), exc.message, exc.code))
    problems += schema_problems(function, "inputs", type_names=False)
    problems += schema_problems(function, "outputs", type_names=True)
    problems += requirement_problems(function.get("dependencies"))
    decorators = function.get("decorators")
    if isinstance(decorators, list):
        problems += _decorators(decorators, entry)
    return problems


def code_problems(config: Mapping[str, Any]) -> list[Problem]:
    """Create-time problems of a code node's config: ``main``, ``outputs``, ``dependencies``."""
    problems = schema_problems(config, "outputs", type_names=True)
    problems += requirement_problems(config.get("dependencies"))
    source = config.get("source")
    if isinstance(source, str):
        try:
            entry_point(source, "main", fallback=False)
        except SpecError as exc:
            problems.insert(0, Problem(("source",), exc.message, exc.code))
    return problems


def requirement_problems(dependencies: Any) -> list[Problem]:
    """Each dependency must be a pip requirement (PEP 508), so a typo fails at create time
    rather than at the first call."""
    problems = []
    for i, text in enumerate(dependencies if isinstance(dependencies, list) else []):
        if not isinstance(text, str):
            continue  # a wrong JSON type is the schema check's to report
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            message = f"'{text}' is not a pip requirement ({exc}); write it like 'name==1.2'."
            problems.append(Problem(("dependencies", i), message, "bad_requirement"))
    return problems


def schema_problems(owner: Mapping[str, Any], key: str, *, type_names: bool) -> list[Problem]:
    """A problem for each entry of ``owner[key]`` (name -> schema) that is not a schema."""
    entries = owner.get(key)
    if not isinstance(entries, dict):
        return []
    problems = []
    for name, schema in entries.items():
        found = schema_problem_at(schema, type_names=type_names)
        if found:  # pointing into the schema, at the keyword that is wrong
            problems.append(Problem((key, name, *found[0]), found[1], "invalid_schema"))
    return problems


def _decorators(decorators: list[Any], entry: str | None) -> list[Problem]:
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for j, decorator in enumerate(decorators):
        if not isinstance(decorator, dict):
            continue
        kind = decorator.get("decorator")
        if isinstance(kind, str) and kind in first:
            problems.append(
                Problem(
                    ("decorators", j, "decorator"),
                    f"'{kind}' is already applied by decorators/{first[kind]}: give each "
                    "decorator once.",
                    "duplicate_decorator",
                )
            )
        elif isinstance(kind, str):
            first[kind] = j
        problems += [Problem(("decorators", j, *p.at), p.message, p.code) for p in
                     decorator_problems(decorator, entry)]  # fmt: skip
    return problems


def decorator_problems(decorator: Mapping[str, Any], entry: str | None) -> list[Problem]:
    """Problems of one ``{decorator, name, arguments}``. An unknown decorator is the only
    problem reported for it: its name and arguments mean nothing until it is known."""
    kind = decorator.get("decorator")
    if not isinstance(kind, str):
        return []
    if kind not in DECORATOR_RULES:
        known = ", ".join(DECORATOR_RULES)
        return [
            Problem(("decorator",), f"Unknown decorator '{kind}': use one of {known}.",
                    "unknown_decorator")
        ]  # fmt: skip
    problems = []
    name = decorator.get("name")
    if entry and isinstance(name, str) and name != entry:
        problems.append(
            Problem(
                ("name",),
                f"Decorators wrap the entry point '{entry}': set name to '{entry}' (got '{name}').",
                "decorator_name",
            )
        )
    arguments = decorator.get("arguments", {})
    if isinstance(arguments, dict):
        problems += _argument_problems(kind, arguments)
    return problems


def _argument_problems(kind: str, arguments: Mapping[str, Any]) -> list[Problem]:
    rules = DECORATOR_RULES[kind]
    problems = []
    for name, value in arguments.items():
        rule = rules.get(name)
        at = ("arguments", name)
        if rule is None:
            takes = ", ".join(rules)
            message = f"'{name}' is not an argument of {kind}: use {takes}."
            problems.append(Problem(at, message, "unknown_decorator_argument"))
        elif not rule.accepts(value):
            message = f"{kind}'s '{name}' must be {rule.says}; got {value!r:.60}."
            problems.append(Problem(at, message, "bad_decorator_argument"))
    for name, rule in rules.items():
        if rule.required and name not in arguments:
            message = f"{kind} needs '{name}' ({rule.says}): add it to arguments."
            problems.append(Problem(("arguments", name), message, "missing_decorator_argument"))
    return problems
