"""Validate an agent document: schema, bounds, mode consistency and graph, all errors at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic import TypeAdapter, ValidationError

from dhub.domain.agent import BUILTIN_FOLDER, SERVER_OWNED_FIELDS, AgentSpec
from dhub.domain.documents import is_template_id
from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.function_spec import Problem, code_problems, function_problems
from dhub.domain.functions import ITEM_TAGS
from dhub.domain.nodes import NODE_TYPES
from dhub.domain.pointers import from_validation_error, join
from dhub.engine import usage
from dhub.engine.expressions import is_one_block
from dhub.engine.graph_checks import check_workflow

_UNION_TAGS = ITEM_TAGS | frozenset(NODE_TYPES) | {"int", "float"}
_spec_adapter: TypeAdapter[AgentSpec] | None = None


def _adapter() -> TypeAdapter[AgentSpec]:
    global _spec_adapter  # built on first use, not at import
    if _spec_adapter is None:
        _spec_adapter = TypeAdapter(AgentSpec)
    return _spec_adapter


@dataclass(frozen=True)
class _Bound:
    path: tuple[str, ...]  # "*" matches every list index
    check: Callable[[float], bool]
    says: str


# A run may wait a long time for a person, but a timer must fit every store and queue: a
# year is past any real deadline and far within what they hold.
MAX_WAIT = 366 * 86_400

_BOUNDS = (
    _Bound(("agent", "max_iterations"), lambda v: v >= 1, "must be at least 1"),
    _Bound(("agent", "max_input_tokens"), lambda v: v >= 1, "must be >= 1 (or null)"),
    _Bound(("agent", "compaction", "trigger_ratio"), lambda v: 0 < v < 1, "is between 0 and 1"),
    _Bound(("agent", "compaction", "target_ratio"), lambda v: 0 < v < 1, "is between 0 and 1"),
    _Bound(
        ("agent", "compaction", "summary_max_tokens"),
        lambda v: 128 <= v <= 8192,
        "is between 128 and 8192",
    ),
    _Bound(("nodes", "*", "config", "max_iterations"), lambda v: v >= 1, "must be at least 1"),
    _Bound(("nodes", "*", "config", "count"), lambda v: v >= 0, "must not be negative"),
    _Bound(
        ("nodes", "*", "config", "timeout"),
        lambda v: 0 < v <= MAX_WAIT,
        f"is more than 0 seconds and at most {MAX_WAIT} (a year)",
    ),
    _Bound(
        ("nodes", "*", "config", "retry_count"),
        lambda v: 0 <= v <= 100,
        "is between 0 and 100",
    ),
    _Bound(
        ("nodes", "*", "config", "retry_delay_seconds"),
        lambda v: 0 <= v <= 86_400,
        "is between 0 and 86400 seconds (a day)",
    ),
)

# Where inline tools and actors sit; the item holds the name the entry point is looked up by.
_FUNCTION_ITEMS = (
    ("agent", "tools", "*"),
    ("agent", "actors", "*"),
    ("nodes", "*", "config", "tool"),
    ("nodes", "*", "config", "actor"),
)


def _walk(
    value: Any, path: tuple[str, ...], at: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if not path:
        yield at, value
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from _walk(item, rest, (*at, i))
    elif isinstance(value, dict) and head in value:
        yield from _walk(value[head], rest, (*at, head))


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_bounds(doc: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for bound in _BOUNDS:
        for at, value in _walk(doc, bound.path):
            if _number(value) and not bound.check(value):
                errors.append(
                    FieldError(join(*at), f"'{at[-1]}' {bound.says}; got {value}.", "out_of_range")
                )
    compaction = (
        doc.get("agent", {}).get("compaction") if isinstance(doc.get("agent"), dict) else None
    )
    if isinstance(compaction, dict):
        trigger, target = compaction.get("trigger_ratio"), compaction.get("target_ratio")
        if _number(trigger) and _number(target) and target >= trigger:
            errors.append(
                FieldError(
                    "/agent/compaction/target_ratio",
                    f"'target_ratio' ({target}) must be lower than 'trigger_ratio' ({trigger}): "
                    "compaction aims below the level that triggers it.",
                    "target_not_below_trigger",
                )
            )
    return errors


def check_functions(doc: dict[str, Any]) -> list[FieldError]:
    """Inline functions (entry point, schemas, decorators) and code nodes' sources, read
    without running them (domain/function_spec.py)."""
    errors: list[FieldError] = []
    for path in _FUNCTION_ITEMS:
        for at, item in _walk(doc, path):
            function = item.get("function") if isinstance(item, dict) else None
            if isinstance(function, dict):
                name = item.get("name")
                problems = function_problems(function, name if isinstance(name, str) else None)
                errors += _located((*at, "function"), problems)
    for (_, i), node in _walk(doc, ("nodes", "*")):
        config = node.get("config") if isinstance(node, dict) else None
        if isinstance(config, dict) and node.get("type") == "code":
            errors += _located(("nodes", i, "config"), code_problems(config))
    return errors


def _located(at: tuple[str | int, ...], problems: list[Problem]) -> list[FieldError]:
    return [FieldError(join(*at, *p.at), p.message, p.code) for p in problems]


# Envelope strings are also indexed columns; PostgreSQL text cannot hold NUL characters.
_SHORT_TEXT = ("type", "collection_id", "folder_id")
_TEXT = ("name", "alias", "description", *_SHORT_TEXT)
MAX_SHORT = 200


def check_text(doc: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    tags = doc.get("tags")
    values = [(k, doc.get(k)) for k in _TEXT]
    if isinstance(tags, list):
        values += [(f"tags/{i}", t) for i, t in enumerate(tags)]
    if doc.get("folder_id") == BUILTIN_FOLDER:
        message = (
            f"'{BUILTIN_FOLDER}' is where the built-in agents' names are kept, not a folder: "
            "choose another folder_id, or none."
        )
        errors.append(FieldError("/folder_id", message, "reserved"))
    for key, value in values:
        if not isinstance(value, str):
            continue
        if "\x00" in value:
            errors.append(
                FieldError(f"/{key}", f"'{key}' contains a NUL character: remove it.", "nul")
            )
        short = key in _SHORT_TEXT or key.startswith("tags/")
        if short and len(value) > MAX_SHORT:
            errors.append(
                FieldError(
                    f"/{key}",
                    f"'{key}' is {len(value)} characters long; the limit is {MAX_SHORT}.",
                    "too_long",
                )
            )
    return errors


def check_modes(doc: dict[str, Any]) -> list[FieldError]:
    """A react agent runs ``agent``, a workflow runs ``nodes``; the other part would be stored
    and silently ignored, so it is an error rather than a surprise later."""
    if doc.get("mode", "react") == "react":
        errors = _react_fields(doc)
    elif doc.get("mode") == "workflow":
        errors = _workflow_fields(doc)
    else:
        errors = []  # the schema check reports an unknown mode
    errors.extend(_check_loops(doc))
    errors.extend(_check_responses(doc))
    errors.extend(_check_template_variables(doc))
    return errors


def _react_fields(doc: dict[str, Any]) -> list[FieldError]:
    errors = []
    if doc.get("agent") is None:
        errors.append(
            FieldError(
                "/agent",
                "A react agent needs an 'agent' config (instructions, model_provider, model): "
                "add one, or set mode to 'workflow'.",
                "react_needs_agent",
            )
        )
    for key in ("nodes", "edges"):
        if doc.get(key):
            errors.append(
                FieldError(
                    f"/{key}",
                    f"A react agent does not run a graph: remove '{key}', or set mode to "
                    "'workflow'.",
                    f"react_has_{key}",
                )
            )
    return errors


def _workflow_fields(doc: dict[str, Any]) -> list[FieldError]:
    errors = []
    nodes = doc.get("nodes")
    if nodes is None or nodes == []:
        errors.append(
            FieldError(
                "/nodes",
                "A workflow agent needs nodes (one start, at least one end): add them, "
                "or set mode to 'react'.",
                "workflow_needs_nodes",
            )
        )
    if doc.get("agent") is not None:
        errors.append(
            FieldError(
                "/agent",
                "A workflow agent does not use 'agent' (llm nodes name their own model): set it "
                "to null, or set mode to 'react'.",
                "workflow_has_agent",
            )
        )
    return errors


def _check_responses(doc: dict[str, Any]) -> Iterator[FieldError]:
    """An llm node's ``response`` written as a string is worked out at run time, so it must
    be one expression giving a value (a schema); other text would only ever fail there."""
    for (_, i), node in _walk(doc, ("nodes", "*")):
        if not isinstance(node, dict) or node.get("type") != "llm":
            continue
        config = node.get("config")
        response = config.get("response") if isinstance(config, dict) else None
        if isinstance(response, str) and not is_one_block(response):
            yield FieldError(
                join("nodes", i, "config", "response"),
                "response is a JSON schema (an object, {} for text) or one {{ … }} expression "
                "giving one, such as '{{ schema }}' for a schema among the run's inputs.",
                "not_an_expression",
            )


def _check_template_variables(doc: dict[str, Any]) -> Iterator[FieldError]:
    """A template node binds ``variables`` only for a stored template: inline text reads the
    run's scope itself (the stored template's own are checked against it at save,
    services/references.py)."""
    for (_, i), node in _walk(doc, ("nodes", "*")):
        if not isinstance(node, dict) or node.get("type") != "template":
            continue
        config = node.get("config")
        if not isinstance(config, dict) or not config.get("variables"):
            continue
        template = config.get("template")
        if isinstance(template, str) and not is_template_id(template):
            yield FieldError(
                join("nodes", i, "config", "variables"),
                "'variables' go with a stored template: set 'template' to its id "
                "(template.…), or remove 'variables' (inline text uses the run's variables "
                "directly).",
                "variables_without_template",
            )


def _check_loops(doc: dict[str, Any]) -> Iterator[FieldError]:
    for (_, i), node in _walk(doc, ("nodes", "*")):
        if not isinstance(node, dict) or node.get("type") != "loop":
            continue
        config = node.get("config")
        if not isinstance(config, dict):
            continue
        mode = config.get("mode", "list")
        needed = "source" if mode == "list" else "count"
        if mode in ("list", "count") and config.get(needed) is None:
            what = "an expression giving the list" if mode == "list" else "how many times"
            yield FieldError(
                join("nodes", i, "config", needed),
                f"A loop in '{mode}' mode needs '{needed}' ({what}).",
                "missing",
            )


def server_owned(doc: dict[str, Any]) -> list[FieldError]:
    errors = []
    if "markings" in doc:
        errors.append(
            FieldError(
                "/markings",
                "Markings are read-only here: remove 'markings' and use "
                "POST /api/v1/agents/{id}/markings to mark an agent.",
                "read_only",
            )
        )
    for key in SERVER_OWNED_FIELDS:
        if key in doc:
            message = _READ_ONLY.get(
                key, f"'{key}' is set by the server: remove it from the document."
            )
            errors.append(FieldError(join(key), message, "read_only"))
    return errors


# PATCH takes ``owners`` out before validating the document (services/agents.py), so this
# message is what Create and /validate report.
_READ_ONLY = {
    "owners": "The creator is the first owner: remove 'owners' here, and change owners "
    'afterwards with PATCH {"owners": ["user.<name>", "group.<name>", ...]}.'
}


def collect_errors(doc: Any) -> tuple[AgentSpec | None, list[FieldError]]:
    """Parse ``doc`` into an AgentSpec and list every problem with it."""
    if not isinstance(doc, dict):
        return None, [FieldError("", "The agent document must be a JSON object.", "type")]
    errors = server_owned(doc)
    body = {k: v for k, v in doc.items() if k != "markings" and k not in SERVER_OWNED_FIELDS}
    spec: AgentSpec | None = None
    try:
        spec = _adapter().validate_python(body)
    except ValidationError as exc:
        errors.extend(from_validation_error(exc, body, _UNION_TAGS))
    errors.extend(check_bounds(body))
    if (budget := usage.budget_problem(body.get("options"))) is not None:
        errors.append(FieldError(f"/options/{usage.BUDGET}", budget, "out_of_range"))
    errors.extend(check_functions(body))
    errors.extend(check_text(body))
    errors.extend(check_modes(body))
    if body.get("mode") == "workflow":
        errors.extend(check_workflow(body))
    return (spec if not errors else None), _dedupe(errors)


def _dedupe(errors: list[FieldError]) -> list[FieldError]:
    seen: set[tuple[str, str]] = set()
    out = []
    for err in errors:
        key = (err.loc, err.code)
        if key not in seen:
            seen.add(key)
            out.append(err)
    return out


def validate_agent_document(doc: Any) -> AgentSpec:
    """The AgentSpec for ``doc``, or InvalidInput listing every problem."""
    spec, errors = collect_errors(doc)
    if errors or spec is None:
        raise InvalidInput(errors)
    return spec
