"""What each node type does with its scope (DESIGN.md 3.2), as pure functions: the values a
node produces, or the request it makes of the executor. The walk (stepper.py) decides when a
node runs and what follows; this module knows nothing of links, frames or commands.

Every problem is a ``NodeFailure`` whose message names the node's field and says what is wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import MISSING

from dhub.domain.call_schemas import CallOutputError, FieldProblem, check_outputs
from dhub.domain.documents import MEDIA_TYPES, RenderError, check_values, is_template_id, render
from dhub.domain.function_spec import (
    SpecError,
    derive_parameters,
    entry_point,
    parameters_from_inputs,
)
from dhub.domain.nodes import (
    ActorCallWorkflowNode,
    CodeWorkflowNode,
    EndWorkflowNode,
    HumanInputWorkflowNode,
    LLMWorkflowNode,
    LoopWorkflowNode,
    ParallelWorkflowNode,
    ResolvedTemplateConfig,
    StartWorkflowNode,
    TemplateWorkflowNode,
    ToolCallWorkflowNode,
    VariableWorkflowNode,
    WorkflowNode,
)
from dhub.domain.pointers import join
from dhub.domain.resources import unreachable
from dhub.engine.expressions import ExpressionError, Expressions, Where
from dhub.engine.values import InputError, check_output, coerce_inputs, operate

Scope = dict[str, Any]
CONVERSATION = "conversation."


class NodeFailure(Exception):
    """A node failed; ``kind`` classifies it (expression, invalid_input, invalid_output, type,
    max_iterations, timeout, rejected, unsupported, or the function runner's kinds)."""

    def __init__(
        self, message: str, kind: str = "error", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.details = details or {}  # e.g. a model call's provider, model and HTTP status


@dataclass(frozen=True)
class Evaluate:
    """Expressions evaluated on behalf of one node, failing it with the field named."""

    ex: Expressions
    node_id: str

    def value(self, source: Any, scope: Scope, where: str) -> Any:
        try:
            return self.ex.value(source, scope, Where(self.node_id, where))
        except ExpressionError as exc:
            raise NodeFailure(str(exc), "expression") from exc

    def template(self, source: str, scope: Scope, where: str) -> str:
        try:
            return self.ex.template(source, scope, Where(self.node_id, where))
        except ExpressionError as exc:
            raise NodeFailure(str(exc), "expression") from exc

    def condition(self, source: str, scope: Scope, where: str) -> bool:
        try:
            return self.ex.condition(source, scope, Where(self.node_id, where))
        except ExpressionError as exc:
            raise NodeFailure(str(exc), "expression") from exc


def start_values(node: StartWorkflowNode, inputs: dict[str, Any]) -> dict[str, Any]:
    try:
        return coerce_inputs(node.config.variables, inputs)
    except InputError as exc:
        raise NodeFailure(str(exc), "invalid_input") from exc


def end_values(ev: Evaluate, node: EndWorkflowNode, scope: Scope) -> dict[str, Any]:
    produced = {}
    for output in node.config.outputs:
        value = ev.value(output.value, scope, f"outputs.{output.name}")
        problem = check_output(output.type, value)
        if problem:
            raise NodeFailure(f"end output '{output.name}' {problem}", "invalid_output")
        produced[output.name] = value
    return produced


def variable_changes(
    ev: Evaluate, node: VariableWorkflowNode, scope: Scope, conversation: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run variables and the conversation variables the operations change, in order: a
    later operation sees what an earlier one wrote."""
    changed: dict[str, Any] = {}
    talk: dict[str, Any] = {}
    for i, op in enumerate(node.config.operations):
        raw = getattr(op, "value", MISSING)
        value = (
            None if raw is MISSING or raw is None else ev.value(raw, scope, f"operations.{i}.value")
        )
        in_conversation = op.variable.startswith(CONVERSATION)
        name = op.variable.removeprefix(CONVERSATION) if in_conversation else op.variable
        target, current = (
            (talk, talk.get(name, conversation.get(name)))
            if in_conversation
            else (changed, changed.get(name, scope.get(name)))
        )
        try:
            target[name] = operate(op.action, current, value)
        except (TypeError, ValueError) as exc:
            raise NodeFailure(f"operations.{i} ({op.action} {op.variable}): {exc}", "type") from exc
        if in_conversation:
            scope["conversation"] = {**scope.get("conversation", {}), name: target[name]}
        else:
            scope[name] = target[name]
    return changed, talk


@dataclass(frozen=True)
class FunctionRequest:
    source: str
    entry: str | None
    inputs: dict[str, Any]
    timeout: float
    dependencies: tuple[str, ...]
    network: bool = False
    parameters: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    decorators: tuple[dict[str, Any], ...] = ()
    browser: bool = False


def mapped_inputs(
    ev: Evaluate,
    node: CodeWorkflowNode | ToolCallWorkflowNode | ActorCallWorkflowNode,
    scope: Scope,
) -> dict[str, Any]:
    """A calling node's ``input_mappings``, evaluated."""
    return {
        name: ev.value(value, scope, f"input_mappings.{name}")
        for name, value in node.config.input_mappings.items()
    }


def function_request(
    ev: Evaluate,
    node: CodeWorkflowNode | ToolCallWorkflowNode | ActorCallWorkflowNode,
    scope: Scope,
) -> FunctionRequest:
    inputs = mapped_inputs(ev, node, scope)
    if isinstance(node, CodeWorkflowNode):
        config = node.config
        return FunctionRequest(
            config.source, "main", inputs, float(config.timeout), tuple(config.dependencies)
        )
    item = node.config.tool if isinstance(node, ToolCallWorkflowNode) else node.config.actor
    function = getattr(item, "function", None)
    if function is None:
        # Stored tools and actors are resolved for the run's user before the graph compiles
        # (services/graphs.py Graphs); one still named here is one that user cannot run (the
        # message is the reference check's own, whatever the reason) or, under `dhub run
        # FILE`, one that is never resolved.
        what = "tool" if isinstance(node, ToolCallWorkflowNode) else "actor"
        raise NodeFailure(
            f"{unreachable(what, _named(item))} (`dhub run FILE` calls inline {what}s only.)",
            "invalid_agent",
        )
    return FunctionRequest(
        function.source,
        str(getattr(item, "name", "")) or None,
        inputs,
        float(node.config.timeout),
        tuple(function.dependencies),
        network=getattr(item, "options", {}).get("network") is True,
        parameters=function_parameters(
            function.source, getattr(item, "name", None), function.inputs
        ),
        outputs=dict(function.outputs) or None,
        decorators=tuple(d.model_dump(mode="json") for d in function.decorators),
        browser=getattr(item, "require_browser", False) is True,
    )


def _named(item: Any) -> str:
    ref = item if isinstance(item, str) else getattr(item, "id", None)
    if ref is None and isinstance(item, dict):
        ref = item.get("id")
    return str(ref) if ref else "?"


def function_parameters(
    source: str, name: str | None, inputs: dict[str, Any]
) -> dict[str, Any] | None:
    """The schema a tool's arguments must fit: its explicit ``inputs``, else its signature's
    (read once per source). None when the source has no entry point: the sandbox says so."""
    if inputs:
        return parameters_from_inputs(inputs)
    return _derived(source, name)


@functools.lru_cache(maxsize=1024)
def _derived(source: str, name: str | None) -> dict[str, Any] | None:
    try:
        return derive_parameters(source, entry_point(source, name)).schema
    except SpecError:
        return None


def response_schema(ev: Evaluate, node: LLMWorkflowNode, scope: Scope) -> dict[str, Any]:
    """The JSON schema an llm node's answer must fit ({} for text): its ``response`` as
    written, or what its one ``{{ … }}`` expression gives, which must be a valid schema."""
    response = node.config.response
    if not isinstance(response, str):
        return dict(response)
    schema = ev.value(response, scope, "response")
    if not isinstance(schema, dict):
        raise NodeFailure(
            f"response should give a JSON schema (an object, or {{}} for text), got "
            f"{type(schema).__name__} {schema!r:.60}",
            "invalid_input",
        )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "the top level"
        raise NodeFailure(
            f"response gives an invalid JSON schema (at {where}): {exc.message}", "invalid_input"
        ) from None
    return schema


def needs_confirmation(node: ActorCallWorkflowNode) -> bool:
    return getattr(node.config.actor, "confirmation_policy", "confirm") == "confirm"


def actor_name(node: ActorCallWorkflowNode) -> str:
    return str(getattr(node.config.actor, "name", node.id))


def call_values(node: WorkflowNode, value: Any) -> dict[str, Any]:
    """What a call's result makes a node write."""
    if isinstance(node, LLMWorkflowNode):
        return {node.config.output: value}
    if isinstance(node, CodeWorkflowNode):
        return _code_values(node, value)
    assert isinstance(node, ToolCallWorkflowNode | ActorCallWorkflowNode)
    produced = {"result": value}
    for name, path in node.config.outputs.items():
        produced[name] = at_path(value, str(path))
    return produced


def _code_values(node: CodeWorkflowNode, value: Any) -> dict[str, Any]:
    """A code node's result, its declared ``outputs`` checked against their JSON Schemas (or
    bare type names) by the validator tools use (domain/call_schemas.py: pure, no I/O)."""
    if not isinstance(value, dict):
        raise NodeFailure(
            f"main() returned {type(value).__name__}; it must return an object (a dict)",
            "invalid_output",
        )
    outputs = node.config.outputs
    try:
        check_outputs(outputs, value)
    except CallOutputError as exc:
        raise _invalid_outputs(outputs, exc.problems) from None
    except ValueError as exc:  # a schema stored before save-time checks knew to refuse it
        raise NodeFailure(f"outputs: {exc}", "invalid_output") from None
    return dict(value)


_SHOWN_PROBLEMS = 5


def _invalid_outputs(outputs: dict[str, Any], problems: Sequence[FieldProblem]) -> NodeFailure:
    """Each problem naming the output (and the place in it) and the schema keyword it breaks;
    the first one's output and schema path (a pointer into the node's config) as details."""
    lines: list[str] = []
    details: dict[str, Any] = {}
    for problem in problems:
        name, rule = _output_of(problem, outputs), problem.rule
        inside = rule[2:] if len(rule) >= 2 and rule[0] == "properties" else ()
        # A bare type name ("number") has no keyword to point at beyond the output itself.
        schema = outputs.get(name) if name is not None else None
        shown = join("outputs", str(name), *inside) if inside and isinstance(schema, dict) else ""
        lines.append(f"{problem}" + (f" (schema {shown})" if shown else ""))
        if not details and name is not None:
            details = {"output": name, "schema_path": shown or join("outputs", name)}
    more = len(lines) - _SHOWN_PROBLEMS
    text = "; ".join(lines[:_SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
    return NodeFailure(text, "invalid_output", details)


def _output_of(problem: FieldProblem, outputs: dict[str, Any]) -> str | None:
    """The declared output a problem is about (names may hold dots and brackets: the
    longest declared name its field starts with)."""
    if len(problem.rule) >= 2 and problem.rule[0] == "properties":
        return str(problem.rule[1])
    field = problem.field
    named = [n for n in outputs if field == f"outputs.{n}" or field.startswith(
        (f"outputs.{n}.", f"outputs.{n}["))]  # fmt: skip
    return max(named, key=len) if named else None


def loop_items(ev: Evaluate, node: LoopWorkflowNode, scope: Scope) -> tuple[int, list[Any] | None]:
    """How many iterations, and the items for list mode; more than ``max_iterations`` fails."""
    config = node.config
    items: list[Any] | None = None
    if config.mode == "list":
        source = ev.value(config.source, scope, "source")
        if not isinstance(source, list):
            raise NodeFailure(
                f"source should give a list to iterate, got {type(source).__name__} {source!r:.60}",
                "type",
            )
        items, count = source, len(source)
    else:
        count = int(getattr(config, "count", 0) or 0)
    if count > config.max_iterations:
        raise NodeFailure(
            f"{count} iterations exceed max_iterations ({config.max_iterations}): raise "
            "max_iterations or give the loop fewer items",
            "max_iterations",
        )
    return count, items


def document(ev: Evaluate, node: TemplateWorkflowNode, scope: Scope) -> tuple[str, Scope | None]:
    """A template node's text and, for a stored template, the artifact it makes (the run
    writer keeps it with the run: runtime/run_writer.py). Inline text renders with the run's
    scope; a stored template (resolved before the graph compiled) with its ``variables``
    evaluated, checked against the declared types, within the render budget."""
    config = node.config
    if not isinstance(config, ResolvedTemplateConfig):
        if is_template_id(config.template):
            # Resolved for the run's user before the graph compiles (services/graphs.py
            # Graphs); one still named here is one that user cannot read, or, under
            # `dhub run FILE`, one that is never resolved.
            raise NodeFailure(
                f"{unreachable('template', config.template.strip())} (`dhub run FILE` "
                "renders inline templates only.)",
                "invalid_agent",
            )
        if config.bindings:
            raise NodeFailure(
                "'variables' go with a stored template (template.…); inline template text "
                "uses the run's variables directly",
                "invalid_agent",
            )
        return ev.template(config.template, scope, "template"), None
    values = {
        name: ev.value(source, scope, f"variables.{name}")
        for name, source in config.bindings.items()
    }
    try:
        text = render(config.body, config.format, check_values(config.declared, values))
    except RenderError as exc:
        where = f"variables.{exc.variable}" if exc.variable else "template"
        raise NodeFailure(
            f"node '{node.id}', field '{where}': template '{config.template_id}' "
            f"({config.name}): {exc.message}",
            "invalid_input" if exc.variable else "template",
        ) from exc
    artifact = {
        "name": config.name,
        "format": config.format,
        "media_type": MEDIA_TYPES[config.format],
        "template_id": config.template_id,
        "template_version": config.template_version,
        "content": text,
    }
    return text, artifact


def declared_outputs(node: Any) -> list[str]:
    """What a node would have written, for on_error 'continue' (all of it null)."""
    if getattr(node, "type", None) == "agent":
        return ["answer"]
    if isinstance(node, LLMWorkflowNode | TemplateWorkflowNode):
        return [node.config.output]
    if isinstance(node, CodeWorkflowNode):
        return list(node.config.outputs)
    if isinstance(node, ToolCallWorkflowNode | ActorCallWorkflowNode):
        return ["result", *node.config.outputs]
    if isinstance(node, LoopWorkflowNode):
        return ["results", "count"]
    if isinstance(node, ParallelWorkflowNode):
        return ["branches"]
    if isinstance(node, HumanInputWorkflowNode):
        return [*(f.name for f in node.config.input_fields), "responded_by"]
    return []


# The longest wait before a retry: a timer further away than any store or queue can hold
# (2 ** 100 seconds) would fail the step that sets it, so backoff saturates here.
MAX_RETRY_DELAY = 7 * 86_400.0


def backoff(kind: str, delay: float, attempt: int) -> float:
    """The wait before retry number ``attempt`` (1-based), at most ``MAX_RETRY_DELAY``."""
    if kind == "linear":
        wait = delay * attempt
    elif kind == "exponential":
        wait = delay * 2.0 ** min(attempt - 1, 64)
    else:
        wait = delay
    return min(wait, MAX_RETRY_DELAY)


def at_path(value: Any, path: str) -> Any:
    """``a.b.0.c`` into a JSON value; a missing step gives None."""
    for step in [p for p in path.split(".") if p]:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value
