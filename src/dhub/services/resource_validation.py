"""Validate a prompt, tool, actor, role or template document: schema, text limits and each
kind's own rules, every error at once with a JSON pointer into the document (as
engine/validate.py does for agents). References to other resources are checked against the
database in services/resources.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from dhub.domain.agent import SERVER_OWNED_FIELDS
from dhub.domain.documents import FORMATS, body_problems, variable_problems
from dhub.domain.errors import FieldError
from dhub.domain.function_spec import function_problems
from dhub.domain.functions import ITEM_TAGS
from dhub.domain.mcp import body_problems as mcp_problems
from dhub.domain.pointers import from_validation_error, join
from dhub.domain.resources import (
    SECRET_SERVER_FIELDS,
    ResourceKind,
    ResourceSpec,
    is_identifier,
    placeholders,
    plural,
)
from dhub.domain.secrets import MAX_VALUE, env_name_problem
from dhub.engine.validate import check_text
from dhub.knowledge.ontology_schema import schema_problems
from dhub.knowledge.tables_schema import column_problems

_UNION_TAGS = ITEM_TAGS | {"int", "float"}


def collect_resource_errors(
    kind: ResourceKind, doc: Any
) -> tuple[ResourceSpec | None, list[FieldError]]:
    """Parse ``doc`` as a ``kind`` document and list every problem with it."""
    if not isinstance(doc, dict):
        message = f"The {kind.category} document must be a JSON object."
        return None, [FieldError("", message, "type")]
    errors = _server_owned(kind, doc)
    body = {k: v for k, v in doc.items() if k != "markings" and k not in SERVER_OWNED_FIELDS}
    spec: ResourceSpec | None = None
    try:
        spec = kind.spec.model_validate(body)
    except ValidationError as exc:
        errors.extend(from_validation_error(exc, body, _UNION_TAGS))
    errors.extend(check_text(body))
    if kind.category == "prompt":
        errors.extend(_prompt_problems(body))
    elif kind.category in ("tool", "actor"):
        errors.extend(_function_problems(body, ()))
    elif kind.category == "template":
        errors.extend(_template_problems(body))
    elif kind.category == "table":
        errors.extend(column_problems(body))
    elif kind.category == "ontology":
        errors.extend(schema_problems(body))
    elif kind.category == "mcp_server":
        errors.extend(mcp_problems(body))
    elif kind.category == "secret":
        errors.extend(_secret_problems(body))
    else:
        errors.extend(_role_problems(body))
    return (spec if not errors else None), _dedupe(errors)


def _server_owned(kind: ResourceKind, doc: dict[str, Any]) -> list[FieldError]:
    errors = []
    if "markings" in doc:
        errors.append(
            FieldError(
                "/markings",
                "Markings are read-only here: remove 'markings' and use "
                f"POST /api/v1/{plural(kind.category)}/{{id}}/markings to mark a {kind.category}.",
                "read_only",
            )
        )
    for key in SERVER_OWNED_FIELDS:
        if key in doc:
            message = (
                "The creator is the first owner: remove 'owners' here, and change owners "
                'afterwards with PATCH {"owners": ["user.<name>", "group.<name>", ...]}.'
                if key == "owners"
                else f"'{key}' is set by the server: remove it from the document."
            )
            errors.append(FieldError(join(key), message, "read_only"))
    return errors


def _secret_problems(body: dict[str, Any]) -> list[FieldError]:
    """A value or an environment variable, not both; a value of sensible size; a variable
    meant for secrets. No message quotes the value (docs/secrets.md)."""
    errors = [
        FieldError(join(key), f"'{key}' is set by the server: remove it from the document.",
                   "read_only")
        for key in SECRET_SERVER_FIELDS
        if key in body
    ]  # fmt: skip
    value, variable = body.get("value"), body.get("from_env")
    if value is not None and variable is not None:
        message = (
            "Give either 'value' or 'from_env', not both: a secret's value is stored, or read "
            "from the server's environment (to switch, set the other one to null)."
        )
        errors.append(FieldError("/value", message, "exclusive"))
    if isinstance(value, str):
        if not value:
            message = "'value' is empty: give the secret's value."
            errors.append(FieldError("/value", message, "empty"))
        elif len(value) > MAX_VALUE:
            message = f"'value' is over {MAX_VALUE:,} characters: a secret is a key or a token."
            errors.append(FieldError("/value", message, "too_long"))
    if isinstance(variable, str):
        problem = env_name_problem(variable)
        if problem is not None:
            errors.append(FieldError("/from_env", problem, "invalid_name"))
    return errors


def _prompt_problems(body: dict[str, Any]) -> Iterator[FieldError]:
    """Variable names are identifiers, declared once; a required variable has no default;
    the template uses only declared ``{{name}}`` placeholders."""
    declared: set[str] = set()
    variables = body.get("variables")
    for i, var in enumerate(variables if isinstance(variables, list) else []):
        if not isinstance(var, dict):
            continue
        name = var.get("name")
        if isinstance(name, str):
            if not is_identifier(name):
                yield FieldError(
                    join("variables", i, "name"),
                    f"'{name}' is not a variable name: use letters, digits and '_', not "
                    "starting with a digit (e.g. 'customer_name').",
                    "invalid_name",
                )
            elif name in declared:
                yield FieldError(
                    join("variables", i, "name"),
                    f"The variable '{name}' is declared twice: remove or rename one.",
                    "duplicate_variable",
                )
            declared.add(name)
        if var.get("required") is True and "default" in var:
            yield FieldError(
                join("variables", i, "required"),
                f"'{name}' is required and has a default, which would never be used: remove "
                "'default', or set 'required' to false.",
                "required_with_default",
            )
    template = body.get("template")
    if not isinstance(template, str):
        return
    reported: set[str] = set()
    for inner in placeholders(template):
        if inner in reported:
            continue
        reported.add(inner)
        if not is_identifier(inner):
            yield FieldError(
                "/template",
                f"'{{{{{inner}}}}}' is not a placeholder a prompt supports: write "
                "'{{name}}' with a declared variable's name (no expressions or filters).",
                "invalid_placeholder",
            )
        elif inner not in declared:
            yield FieldError(
                "/template",
                f"The template uses '{{{{{inner}}}}}', which is not declared: add "
                f'{{"name": "{inner}"}} to variables.',
                "undeclared_variable",
            )


MAX_BODY = 200_000


def _template_problems(body: dict[str, Any]) -> list[FieldError]:
    """Variables well declared; the body parses, uses only declared variables, includes
    nothing (domain/documents.py), and is of a sensible size."""
    variables = body.get("variables")
    declared = [v for v in variables if isinstance(v, dict)] if isinstance(variables, list) else []
    errors = [FieldError(join(*p.at), p.message, p.code) for p in variable_problems(declared)]
    text, document_format = body.get("body"), body.get("format", "markdown")
    if not isinstance(text, str):
        return errors
    if "\x00" in text:
        errors.append(FieldError("/body", "'body' contains a NUL character: remove it.", "nul"))
    elif len(text) > MAX_BODY:
        message = f"'body' is {len(text):,} characters long; the limit is {MAX_BODY:,}."
        errors.append(FieldError("/body", message, "too_long"))
    elif document_format in FORMATS:
        problems = body_problems(text, document_format, declared)
        errors += [FieldError(join(*p.at), p.message, p.code) for p in problems]
    return errors


def _function_problems(item: dict[str, Any], at: tuple[str | int, ...]) -> list[FieldError]:
    """An inline function's create-time problems (domain/function_spec.py), as for an agent's inline
    tools: the entry point is looked up by ``name``."""
    function = item.get("function")
    if not isinstance(function, dict):
        return []
    name = item.get("name")
    problems = function_problems(function, name if isinstance(name, str) else None)
    return [FieldError(join(*at, "function", *p.at), p.message, p.code) for p in problems]


def _role_problems(body: dict[str, Any]) -> list[FieldError]:
    errors = []
    max_iterations = body.get("max_iterations")
    if type(max_iterations) is int and max_iterations < 1:
        errors.append(
            FieldError(
                "/max_iterations",
                f"'max_iterations' must be at least 1 (or null); got {max_iterations}.",
                "out_of_range",
            )
        )
    tools = body.get("tools")
    for i, item in enumerate(tools if isinstance(tools, list) else []):
        if isinstance(item, dict):
            errors.extend(_function_problems(item, ("tools", i)))
    return errors


def _dedupe(errors: list[FieldError]) -> list[FieldError]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for err in errors:
        key = (err.loc, err.code, err.message)
        if key not in seen:
            seen.add(key)
            out.append(err)
    return out
