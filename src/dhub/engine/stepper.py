"""The workflow stepper (DESIGN.md 3): pure functions from (compiled graph, run state, event) to
(new state, commands, trace events). No I/O and no clock: the executor performs the commands
(call a function, call a model) and feeds their results back as events.

This first version runs the top-level graph: start, end, llm, tool_call, code, template,
variable and if_else nodes, edge conditions, fan-out, joins with dead-path elimination, and the
run's result. Loops, parallel nodes, human input and error handlers are the next steps; a graph
that reaches one fails with a clear error instead of doing something half-right.

Determinism: ready nodes are taken in document order, so the same graph, inputs and results
give the same states, commands and trace events.
"""

from __future__ import annotations

import copy
import heapq
from dataclasses import dataclass, field
from typing import Any, Literal

from dhub.domain.nodes import (
    CodeWorkflowNode,
    EndWorkflowNode,
    ErrorHandlerWorkflowNode,
    IfElseWorkflowNode,
    LLMWorkflowNode,
    StartWorkflowNode,
    TemplateWorkflowNode,
    ToolCallWorkflowNode,
    VariableWorkflowNode,
)
from dhub.engine.compile import CompiledGraph, Link
from dhub.engine.expressions import ExpressionError, Expressions, Where
from dhub.engine.values import InputError, check_output, coerce_inputs, operate

NodeState = Literal["running", "succeeded", "failed", "skipped"]
Events = list[dict[str, Any]]
Scope = dict[str, Any]


@dataclass
class RunState:
    """Everything a run knows, as plain data (JSON-serializable) so it can be persisted."""

    status: Literal["running", "succeeded", "failed"] = "running"
    inputs: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)  # flat names: last writer wins
    node_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, NodeState] = field(default_factory=dict)
    links: dict[str, bool] = field(default_factory=dict)  # resolved links: taken or not
    pending: dict[str, str] = field(default_factory=dict)  # command id -> node id
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    next_command: int = 0
    attempts: dict[str, int] = field(default_factory=dict)  # node id -> tries so far
    now: float = 0.0  # the executor's clock at the last event (the stepper has none)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        return cls(**copy.deepcopy(data))


@dataclass(frozen=True)
class CallFunction:
    command_id: str
    node_id: str
    source: str
    inputs: dict[str, Any]
    timeout: float
    entry: str | None = None


@dataclass(frozen=True)
class CallModel:
    command_id: str
    node_id: str
    model_provider: str
    model: str
    system_prompt: str
    prompt: str
    response_schema: dict[str, Any]
    reasoning_effort: str | None


@dataclass(frozen=True)
class SleepUntil:
    """Wake the run (with ``Woke``) at ``at`` (seconds, the executor's clock): a retry delay."""

    command_id: str
    node_id: str
    at: float


@dataclass(frozen=True)
class Complete:
    outputs: dict[str, Any]


@dataclass(frozen=True)
class Fail:
    error: dict[str, Any]


Command = CallFunction | CallModel | SleepUntil | Complete | Fail


@dataclass(frozen=True)
class Done:
    """A command's result, fed back by the executor: ``value`` when ``ok``, else ``error``."""

    command_id: str
    ok: bool
    value: Any = None
    error: dict[str, Any] | None = None
    now: float = 0.0


@dataclass(frozen=True)
class Woke:
    """A SleepUntil's time has come."""

    command_id: str
    now: float = 0.0


@dataclass(frozen=True)
class Step:
    state: RunState
    commands: list[Command]
    events: list[dict[str, Any]]  # the trace: node.started / succeeded / failed / skipped


class _Failed(Exception):
    def __init__(self, node_id: str, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.node_id = node_id
        self.kind = kind


class Stepper:
    def __init__(self, graph: CompiledGraph, expressions: Expressions | None = None) -> None:
        self.graph = graph
        self.ex = expressions or Expressions()
        self._position = {node_id: i for i, node_id in enumerate(graph.order)}
        self._scope_nodes = graph.scopes[""].node_ids
        self._targets = {n: tuple(link.target for link in graph.outgoing[n]) for n in graph.order}

    def start(self, inputs: dict[str, Any], now: float = 0.0) -> Step:
        """A new run: inputs are checked against the start node's variables first."""
        state = RunState(inputs=dict(inputs), now=now)
        return self._advance(state, [], [])

    def step(self, state: RunState, event: Done | Woke) -> Step:
        state = RunState.from_dict(state.to_dict())
        state.now = event.now
        node_id = state.pending.pop(event.command_id)
        events: Events = []
        commands: list[Command] = []
        if isinstance(event, Woke):
            del state.nodes[node_id]  # its retry is due: ready again
        elif event.ok:
            try:
                self._finish_call(state, node_id, event.value, events)
            except _Failed as problem:
                self._on_failure(state, problem, events, commands)
        else:
            error = event.error or {}
            message = str(error.get("message") or "the call failed")
            call_failed = _Failed(node_id, message, str(error.get("kind", "error")))
            self._on_failure(state, call_failed, events, commands)
        return self._advance(state, commands, events)

    # -- the walk ---------------------------------------------------------------------------

    def _advance(self, state: RunState, commands: list[Command], events: Events) -> Step:
        """Run every node that is ready, in document order, until the run waits or ends.

        Ready nodes come from a frontier (a heap by document position) seeded by one scan and
        fed with the targets of each node handled, so a long chain costs linear time."""
        frontier = [(self._position[n], n) for n in self._scope_nodes if n not in state.nodes]
        heapq.heapify(frontier)
        while state.status == "running" and frontier:
            _, node_id = heapq.heappop(frontier)
            verdict = None if node_id in state.nodes else self._readiness(state, node_id)
            if verdict is None:
                continue
            if not verdict:
                self._skip(state, node_id, events)
            else:
                try:
                    command = self._run(state, node_id, events)
                    if command is not None:
                        commands.append(command)
                except _Failed as failed:
                    self._on_failure(state, failed, events, commands)
            for follower in (node_id, *self._targets[node_id]):
                if follower not in state.nodes:
                    heapq.heappush(frontier, (self._position[follower], follower))
        if state.status == "running" and not state.pending:
            state.status = "succeeded"
            commands.append(Complete(dict(state.outputs)))
        elif state.status == "failed":
            commands.append(Fail(dict(state.error or {})))
        return Step(state, commands, events)

    def _readiness(self, state: RunState, node_id: str) -> bool | None:
        """None while some incoming link is unresolved; then whether one was taken (run) or
        none was (skip). The start node is always ready; handlers never run on their own."""
        if node_id == self.graph.start:
            return True
        incoming = self.graph.incoming[node_id]
        if not incoming or self.graph.nodes[node_id].type == "error_handler":
            return None
        taken = False
        for link in incoming:
            resolved = state.links.get(_key(link))
            if resolved is None:
                return None
            taken = taken or resolved
        return taken

    def _run(self, state: RunState, node_id: str, events: list[dict[str, Any]]) -> Command | None:
        node = self.graph.nodes[node_id]
        events.append({"type": "node.started", "node_id": node_id})
        scope = self._scope(state)
        if isinstance(node, StartWorkflowNode):
            try:
                values = coerce_inputs(node.config.variables, state.inputs)
            except InputError as exc:
                raise _Failed(node_id, str(exc), "invalid_input") from exc
            state.inputs = values
            state.variables.update(values)
            self._succeed(state, node_id, {}, events)
            return None
        if isinstance(node, EndWorkflowNode):
            produced = {}
            for output in node.config.outputs:
                value = self._value(output.value, scope, node_id, f"outputs.{output.name}")
                problem = check_output(output.type, value)
                if problem:
                    raise _Failed(node_id, f"output '{output.name}' {problem}", "invalid_output")
                produced[output.name] = value
            state.outputs.update(produced)
            self._succeed(state, node_id, produced, events, publish=False)
            return None
        if isinstance(node, TemplateWorkflowNode):
            text = self._template(node.config.template, scope, node_id, "template")
            self._succeed(state, node_id, {node.config.output: text}, events)
            return None
        if isinstance(node, VariableWorkflowNode):
            self._variables(state, node, scope, events)
            return None
        if isinstance(node, IfElseWorkflowNode):
            verdict = self._condition(node.config.condition, scope, node_id, "condition")
            self._succeed(state, node_id, {}, events, branch=verdict)
            return None
        if isinstance(node, CodeWorkflowNode | ToolCallWorkflowNode):
            return self._call_function(state, node, scope)
        if isinstance(node, LLMWorkflowNode):
            return self._call_model(state, node, scope)
        raise _Failed(
            node_id, f"'{node.type}' nodes are not supported by this engine yet", "unsupported"
        )

    def _call_function(
        self, state: RunState, node: CodeWorkflowNode | ToolCallWorkflowNode, scope: dict[str, Any]
    ) -> Command:
        inputs = {
            name: self._value(value, scope, node.id, f"input_mappings.{name}")
            for name, value in node.config.input_mappings.items()
        }
        if isinstance(node, CodeWorkflowNode):
            source, entry = node.config.source, "main"
        else:
            tool = node.config.tool
            if not hasattr(tool, "function"):
                raise _Failed(
                    node.id, "only inline tools can be called by this engine yet", "unsupported"
                )
            source, entry = tool.function.source, tool.name  # type: ignore[union-attr]
        command_id = self._command_id(state)
        state.pending[command_id] = node.id
        state.nodes[node.id] = "running"
        return CallFunction(command_id, node.id, source, inputs, float(node.config.timeout), entry)

    def _call_model(self, state: RunState, node: LLMWorkflowNode, scope: dict[str, Any]) -> Command:
        config = node.config
        command_id = self._command_id(state)
        state.pending[command_id] = node.id
        state.nodes[node.id] = "running"
        return CallModel(
            command_id,
            node.id,
            config.model_provider,
            config.model,
            self._template(config.system_prompt, scope, node.id, "system_prompt"),
            self._template(config.prompt, scope, node.id, "prompt"),
            dict(config.response),
            config.reasoning_effort,
        )

    def _finish_call(
        self, state: RunState, node_id: str, value: Any, events: list[dict[str, Any]]
    ) -> None:
        node = self.graph.nodes[node_id]
        if isinstance(node, LLMWorkflowNode):
            self._succeed(state, node_id, {node.config.output: value}, events)
            return
        if isinstance(node, CodeWorkflowNode):
            if not isinstance(value, dict):
                raise _Failed(node_id, "main() must return an object (a dict)", "invalid_output")
            for name, schema in node.config.outputs.items():
                wanted = schema.get("type") if isinstance(schema, dict) else schema
                if name not in value:
                    raise _Failed(node_id, f"the result has no '{name}'", "invalid_output")
                problem = check_output(str(wanted), value[name]) if wanted else None
                if problem:
                    raise _Failed(node_id, f"output '{name}' {problem}", "invalid_output")
            self._succeed(state, node_id, dict(value), events)
            return
        assert isinstance(node, ToolCallWorkflowNode)
        produced = {"result": value}
        for name, path in node.config.outputs.items():
            produced[name] = _at_path(value, str(path))
        self._succeed(state, node_id, produced, events)

    def _variables(
        self,
        state: RunState,
        node: VariableWorkflowNode,
        scope: dict[str, Any],
        events: list[dict[str, Any]],
    ) -> None:
        changed: dict[str, Any] = {}
        for i, op in enumerate(node.config.operations):
            value = None
            if (
                not isinstance(op.value, type(None))
                and op.value is not None
                and hasattr(op, "value")
            ):
                value = self._value(op.value, scope, node.id, f"operations.{i}.value")
            current = changed.get(op.variable, state.variables.get(op.variable))
            try:
                changed[op.variable] = operate(op.action, current, value)
            except (TypeError, ValueError) as exc:
                raise _Failed(node.id, f"operation {i} ({op.action} {op.variable}): {exc}") from exc
            scope[op.variable] = changed[op.variable]
        self._succeed(state, node.id, changed, events)

    # -- outcomes ---------------------------------------------------------------------------

    def _succeed(
        self,
        state: RunState,
        node_id: str,
        produced: dict[str, Any],
        events: list[dict[str, Any]],
        branch: bool | None = None,
        publish: bool = True,
    ) -> None:
        state.nodes[node_id] = "succeeded"
        state.node_outputs[node_id] = produced
        if publish:
            state.variables.update(produced)
        events.append({"type": "node.succeeded", "node_id": node_id, "outputs": produced})
        scope = self._scope(state)
        for link in self.graph.outgoing[node_id]:
            state.links[_key(link)] = self._taken(link, branch, scope, node_id)

    def _taken(self, link: Link, branch: bool | None, scope: dict[str, Any], node_id: str) -> bool:
        if link.kind == "failure":
            return False  # the node did not fail: its fallback path is dead
        if branch is not None:
            return (link.condition == "true") == branch
        if link.condition is None:
            return True
        return self._condition(link.condition, scope, node_id, f"edges.{link.index}.condition")

    def _skip(self, state: RunState, node_id: str, events: list[dict[str, Any]]) -> None:
        state.nodes[node_id] = "skipped"
        events.append({"type": "node.skipped", "node_id": node_id})
        for link in self.graph.outgoing[node_id]:
            state.links[_key(link)] = False

    def _on_failure(
        self, state: RunState, failed: _Failed, events: Events, commands: list[Command]
    ) -> None:
        """A node failed: retry it, fall back, continue or fail the run, as its error handler
        says; with no handler the run fails."""
        node_id = failed.node_id
        handler_id = self.graph.handler_of.get(node_id)
        handler = self.graph.nodes[handler_id] if handler_id else None
        if not isinstance(handler, ErrorHandlerWorkflowNode) or failed.kind == "unsupported":
            self._fail(state, failed, events)
            return
        config = handler.config
        tries = state.attempts.get(node_id, 0) + 1
        state.attempts[node_id] = tries
        error = {"node_id": node_id, "type": failed.kind, "message": str(failed), "attempts": tries}
        if tries <= config.retry_count:
            delay = _backoff(config.retry_backoff, float(config.retry_delay_seconds), tries)
            events.append(
                {"type": "node.retrying", "node_id": node_id, "attempts": tries,
                 "delay": delay, "error": error}
            )  # fmt: skip
            if delay <= 0:
                del state.nodes[node_id]  # ready again at once
                return
            command_id = self._command_id(state)
            state.pending[command_id] = node_id
            state.nodes[node_id] = "running"
            commands.append(SleepUntil(command_id, node_id, state.now + delay))
            return
        if config.on_error == "fail":
            self._fail(state, failed, events)
            return
        events.append(
            {"type": "node.failed", "node_id": node_id, "attempts": tries,
             "handled_by": handler.id, "error": error}
        )  # fmt: skip
        if config.on_error == "continue":
            self._succeed(
                state, node_id, dict.fromkeys(_declared_outputs(self.graph.nodes[node_id])), events
            )
        else:  # fallback: the failure link is taken, the node's own edges are not
            state.nodes[node_id] = "failed"
            state.variables["error"] = error
            for link in self.graph.outgoing[node_id]:
                state.links[_key(link)] = link.kind == "failure"

    def _fail(self, state: RunState, failed: _Failed, events: list[dict[str, Any]]) -> None:
        state.nodes[failed.node_id] = "failed"
        error = {"node_id": failed.node_id, "kind": failed.kind, "message": str(failed)}
        events.append({"type": "node.failed", "node_id": failed.node_id, "error": error})
        state.status = "failed"
        state.error = error

    # -- expressions --------------------------------------------------------------------------

    def _scope(self, state: RunState) -> dict[str, Any]:
        return {**state.variables, "nodes": state.node_outputs, "inputs": state.inputs}

    def _value(self, source: Any, scope: dict[str, Any], node_id: str, where: str) -> Any:
        try:
            return self.ex.value(source, scope, Where(node_id, where))
        except ExpressionError as exc:
            raise _Failed(node_id, str(exc), "expression") from exc

    def _template(self, source: str, scope: dict[str, Any], node_id: str, where: str) -> str:
        try:
            return self.ex.template(source, scope, Where(node_id, where))
        except ExpressionError as exc:
            raise _Failed(node_id, str(exc), "expression") from exc

    def _condition(self, source: str, scope: dict[str, Any], node_id: str, where: str) -> bool:
        try:
            return self.ex.condition(source, scope, Where(node_id, where))
        except ExpressionError as exc:
            raise _Failed(node_id, str(exc), "expression") from exc

    @staticmethod
    def _command_id(state: RunState) -> str:
        state.next_command += 1
        return f"c{state.next_command}"


def _backoff(kind: str, delay: float, attempt: int) -> float:
    """The wait before retry number ``attempt`` (1-based)."""
    if kind == "linear":
        return delay * attempt
    if kind == "exponential":
        return delay * 2.0 ** (attempt - 1)
    return delay


def _declared_outputs(node: Any) -> list[str]:
    """What a node would have written, for on_error 'continue' (all of it null)."""
    if isinstance(node, LLMWorkflowNode):
        return [node.config.output]
    if isinstance(node, CodeWorkflowNode):
        return list(node.config.outputs)
    if isinstance(node, ToolCallWorkflowNode):
        return ["result", *node.config.outputs]
    if isinstance(node, TemplateWorkflowNode):
        return [node.config.output]
    return []


def _key(link: Link) -> str:
    return f"{link.source}>{link.target}:{link.kind}:{link.index}"


def _at_path(value: Any, path: str) -> Any:
    """``a.b.0.c`` into a JSON value; a missing step gives None."""
    for step in [p for p in path.split(".") if p]:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value
