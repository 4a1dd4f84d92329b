"""One step of a run: the walk over ready nodes, links, frames and failures (DESIGN.md 3.2).

A ``Walk`` lives for one stepper call. It owns the state it was given, collects the commands and
trace events the step produces, and runs every node that is ready until the run waits for the
executor or ends. Loop iterations and parallel branches run in frames (see state.py for keys);
containers.py opens and closes them.

Readiness: a node runs once every incoming link (inside its frame) is resolved and at least one
was taken; when none was, it is skipped and the skip flows on (dead-path elimination). Ready
nodes come from a frontier ordered by document position, so steps are deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.nodes import (
    ActorCallWorkflowNode,
    CodeWorkflowNode,
    EndWorkflowNode,
    ErrorHandlerWorkflowNode,
    HumanInputWorkflowNode,
    IfElseWorkflowNode,
    LLMWorkflowNode,
    LoopWorkflowNode,
    ParallelWorkflowNode,
    StartWorkflowNode,
    TemplateWorkflowNode,
    ToolCallWorkflowNode,
    VariableWorkflowNode,
    WorkflowNode,
)
from dhub.engine import actions, react, usage
from dhub.engine.actions import Evaluate, NodeFailure, Scope
from dhub.engine.containers import Containers
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    CallFunction,
    CallKnowledge,
    CallModel,
    Cancel,
    Command,
    Complete,
    Fail,
    RunState,
    SleepUntil,
    Step,
    node_key,
)
from dhub.engine.walk_port import StepperPort


class Walk:
    def __init__(self, stepper: StepperPort, state: RunState) -> None:
        self.stepper = stepper
        self.graph = stepper.graph
        self.state = state
        self.commands: list[Command] = []
        self.events: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.frontier: list[tuple[int, str, str]] = []  # (document position, frame, node id)
        self._sys: dict[str, Any] | None = None
        self._starting: dict[str, Any] = {}  # the node.started event of the node running now
        self.boxes = Containers(self)

    # -- the loop -----------------------------------------------------------------------------

    def push(self, frame: str, node_id: str) -> None:
        heapq.heappush(self.frontier, (self.stepper.position[node_id], frame, node_id))

    def run(self) -> Step:
        state, frames, nodes = self.state, self.state.frames, self.state.nodes
        frontier = self.frontier
        while state.status == "running" and frontier:
            _, frame, node_id = heapq.heappop(frontier)
            if frame and frame not in frames:
                continue  # its frame was closed or cancelled meanwhile
            if node_key(frame, node_id) in nodes:
                continue
            verdict = self._readiness(frame, node_id)
            if verdict is None:
                continue
            if verdict:
                self._execute(frame, node_id)
            else:
                self.skip(frame, node_id)
        return self.finish()

    def over_budget(self, spent: float, limit: float) -> Step:
        """Stop the run that went over its cost budget: what this step would have started
        starts not, what runs already is cancelled, and the run fails with kind ``budget``."""
        for command in self.commands:
            self.state.pending.pop(getattr(command, "command_id", ""), None)
        self.commands.clear()
        self.state.status = "failed"
        self.state.error = {
            "kind": "budget",
            "message": (
                f"The run cost ${spent:.6f}, over its agent's budget of ${limit:.6f} "
                f"(options.{usage.BUDGET}): it stopped after the model call that went over. "
                f"Raise options.{usage.BUDGET} on the agent, or make its runs cheaper."
            ),
            "cost_usd": spent,
            usage.BUDGET: limit,
        }
        return self.finish()

    def finish(self) -> Step:
        """Close the step; a terminal command (Complete, Fail) always comes last."""
        state = self.state
        if state.status in ("failed", "cancelled"):
            self.cancelled.extend(state.pending)
            state.pending.clear()
            state.timers.clear()
        if self.cancelled:
            self.commands.append(Cancel(tuple(self.cancelled)))
        if state.status == "running" and not state.pending:
            state.status = "succeeded"
            self.commands.append(Complete(dict(state.outputs)))
        elif state.status == "failed":
            self.commands.append(Fail(dict(state.error or {})))
        return Step(state, self.commands, self.events)

    def _readiness(self, frame: str, node_id: str) -> bool | None:
        """None while an incoming link is unresolved; then whether one was taken. Nodes with
        no incoming link (start, a frame's entries) are ready; handlers never run on their own."""
        keys = self.stepper.in_keys[node_id]
        if keys is None:
            return None
        if not keys:
            return True
        links = self.state.links
        prefix = frame + "/" if frame else ""
        taken = False
        for key in keys:
            resolved = links.get(prefix + key if prefix else key)
            if resolved is None:
                return None
            taken = taken or resolved
        return taken

    # -- running one node ---------------------------------------------------------------------

    def _execute(self, frame: str, node_id: str) -> None:
        node = self.graph.nodes[node_id]
        self.trace("node.started", frame, node_id)
        self._starting = self.events[-1]
        try:
            self._runners[node.type](self, frame, node, Evaluate(self.stepper.ex, node_id))
        except NodeFailure as failure:
            self.on_failure(frame, node_id, failure)
        finally:
            self._starting = {}  # nothing later in the step writes into this node's start

    def _start(self, frame: str, node: StartWorkflowNode, _: Evaluate) -> None:
        values = actions.start_values(node, self.state.inputs)
        self.started_with(values)
        self.state.inputs = values
        self.state.variables.update(values)
        self.succeed(frame, node.id, {})

    def _end(self, frame: str, node: EndWorkflowNode, ev: Evaluate) -> None:
        produced = actions.end_values(ev, node, self.scope(frame))
        self.state.outputs.update(produced)
        self.succeed(frame, node.id, produced, publish=False)

    def _template(self, frame: str, node: TemplateWorkflowNode, ev: Evaluate) -> None:
        text, artifact = actions.document(ev, node, self.scope(frame))
        self.succeed(frame, node.id, {node.config.output: text})
        if artifact is not None:  # kept with the run by its writer, the content taken out
            self.trace("artifact.created", frame, node.id, **artifact)

    def _if_else(self, frame: str, node: IfElseWorkflowNode, ev: Evaluate) -> None:
        verdict = ev.condition(node.config.condition, self.scope(frame), "condition")
        self.started_with({"condition": verdict})
        self.succeed(frame, node.id, {}, branch=verdict)

    def _loop(self, frame: str, node: LoopWorkflowNode, ev: Evaluate) -> None:
        self.boxes.run_loop(frame, node, ev)

    def _parallel(self, frame: str, node: ParallelWorkflowNode, _: Evaluate) -> None:
        self.boxes.run_parallel(frame, node)

    def _variables(self, frame: str, node: VariableWorkflowNode, ev: Evaluate) -> None:
        """Operations change run (or conversation) variables, wherever the node sits: a
        variable node in a loop body accumulates across iterations."""
        scope = self.scope(frame)
        changed, talk = actions.variable_changes(ev, node, scope, self.state.conversation)
        self.state.variables.update(changed)
        self.state.conversation.update(talk)
        produced = {**changed, **{actions.CONVERSATION + k: v for k, v in talk.items()}}
        self.succeed(frame, node.id, produced, publish=False)

    def _call_function(
        self,
        frame: str,
        node: CodeWorkflowNode | ToolCallWorkflowNode | ActorCallWorkflowNode,
        ev: Evaluate,
        inputs: dict[str, Any] | None = None,
    ) -> None:
        known = self.knowledge_of(node)
        if known is not None:
            self._call_knowledge(frame, node, ev, known, inputs)
            return
        request = actions.function_request(ev, node, self.scope(frame))
        if inputs is None:  # not an approved actor call: that one started before its question
            self.started_with(request.inputs)
        command_id = self.wait_on(frame, node.id, "running")
        self.commands.append(
            CallFunction(
                command_id,
                node.id,
                request.source,
                request.inputs if inputs is None else inputs,
                request.timeout,
                request.entry,
                request.dependencies,
                frame,
                request.network,
                request.parameters,
                request.outputs,
                request.decorators,
                browser=request.browser,
                knowledge=self.graph.code_knowledge,
            )
        )

    def knowledge_of(self, node: WorkflowNode) -> KnowledgeTool | None:
        """The knowledge tool a tool_call or actor_call node names (by its plain name), if
        any: one of those the agent's tables, templates and ontologies give it."""
        item: Any = None
        if isinstance(node, ToolCallWorkflowNode):
            item = node.config.tool
        elif isinstance(node, ActorCallWorkflowNode):
            item = node.config.actor
        return self.graph.knowledge.get(item) if isinstance(item, str) else None

    def _call_knowledge(
        self,
        frame: str,
        node: ToolCallWorkflowNode | ActorCallWorkflowNode | CodeWorkflowNode,
        ev: Evaluate,
        known: KnowledgeTool,
        inputs: dict[str, Any] | None,
    ) -> None:
        if inputs is None:
            inputs = actions.mapped_inputs(ev, node, self.scope(frame))
            self.started_with(inputs)
        command_id = self.wait_on(frame, node.id, "running")
        self.commands.append(
            CallKnowledge(command_id, node.id, known.operation, known.arguments(inputs), frame)
        )

    def call_approved(self, frame: str, node_id: str, arguments: dict[str, Any]) -> None:
        node = self.graph.nodes[node_id]
        assert isinstance(node, ActorCallWorkflowNode)
        try:
            self._call_function(frame, node, Evaluate(self.stepper.ex, node_id), arguments)
        except NodeFailure as failure:
            self.on_failure(frame, node_id, failure)

    def _call_actor(self, frame: str, node: ActorCallWorkflowNode, ev: Evaluate) -> None:
        known = self.knowledge_of(node)
        if not (known.confirm if known else actions.needs_confirmation(node)):
            return self._call_function(frame, node, ev)
        if known is None:
            inputs = actions.function_request(ev, node, self.scope(frame)).inputs
        else:
            inputs = actions.mapped_inputs(ev, node, self.scope(frame))
        self.started_with(inputs)
        command_id = self.wait_on(frame, node.id, "waiting")
        self.state.asked[node_key(frame, node.id)] = inputs
        self.trace("node.waiting", frame, node.id, waiting_for="confirmation")
        name = known.name if known else actions.actor_name(node)
        self.commands.append(AwaitConfirmation(command_id, node.id, name, inputs, frame))
        return None

    def _call_model(self, frame: str, node: LLMWorkflowNode, ev: Evaluate) -> None:
        config, scope = node.config, self.scope(frame)
        system_prompt = ev.template(config.system_prompt, scope, "system_prompt")
        prompt = ev.template(config.prompt, scope, "prompt")
        response = actions.response_schema(ev, node, scope)
        started: dict[str, Any] = {"system_prompt": system_prompt, "prompt": prompt}
        if isinstance(config.response, str):  # worked out for this run: show what it gave
            started["response"] = response
        self.started_with(started)
        command_id = self.wait_on(frame, node.id, "running")
        self.commands.append(
            CallModel(
                command_id,
                node.id,
                config.model_provider,
                config.model,
                system_prompt,
                prompt,
                response,
                config.reasoning_effort,
                frame,
            )
        )

    def _ask_input(self, frame: str, node: HumanInputWorkflowNode, ev: Evaluate) -> None:
        config = node.config
        prompt = ev.template(config.prompt, self.scope(frame), "prompt")
        self.started_with({"prompt": prompt})
        command_id = self.wait_on(frame, node.id, "waiting")
        at = self.state.now + float(config.timeout)
        self.start_timer(frame, node.id, at)
        fields = [f.model_dump(mode="json", exclude_unset=False) for f in config.input_fields]
        self.trace("node.waiting", frame, node.id, waiting_for="input")
        self.commands.append(
            AwaitInput(command_id, node.id, prompt, fields, list(config.assignees), at, frame)
        )

    # -- outcomes -----------------------------------------------------------------------------

    def succeed(
        self,
        frame: str,
        node_id: str,
        produced: dict[str, Any],
        *,
        branch: bool | None = None,
        publish: bool = True,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """Record what a node wrote, resolve its outgoing links and queue what follows. An edge
        condition that cannot be evaluated fails the node before anything is recorded."""
        state = self.state
        verdicts = self._link_verdicts(frame, node_id, produced, branch)
        key = node_key(frame, node_id)
        state.nodes[key] = "succeeded"
        if frame:
            box = state.frames[frame]
            box["nodes"][node_id] = produced
            if publish:
                box["vars"].update(produced)
        else:
            state.node_outputs[node_id] = produced
            if publish:
                state.variables.update(produced)
        if usage is None:
            self.trace("node.succeeded", frame, node_id, outputs=produced)
        else:
            self.trace("node.succeeded", frame, node_id, outputs=produced, usage=usage)
        self._resolve(frame, node_id, verdicts)
        self.settle(frame)

    def _link_verdicts(
        self, frame: str, node_id: str, produced: dict[str, Any], branch: bool | None
    ) -> list[bool]:
        verdicts = []
        scope: Scope | None = None
        for link in self.graph.outgoing[node_id]:
            if link.kind == "failure":
                verdicts.append(False)  # the node did not fail: its fallback path is dead
            elif branch is not None:
                verdicts.append((link.condition == "true") == branch)
            elif link.condition is None:
                verdicts.append(True)
            else:
                if scope is None:
                    scope = self.scope(frame)
                    scope.update(produced)
                    scope["nodes"] = {**scope["nodes"], node_id: produced}
                ev = Evaluate(self.stepper.ex, node_id)
                verdicts.append(ev.condition(link.condition, scope, f"edges.{link.index}"))
        return verdicts

    def _resolve(self, frame: str, node_id: str, verdicts: list[bool]) -> None:
        links = self.state.links
        prefix = frame + "/" if frame else ""
        for key, verdict in zip(self.stepper.out_keys[node_id], verdicts, strict=True):
            links[prefix + key if prefix else key] = verdict
        for target in self.stepper.targets[node_id]:
            self.push(frame, target)

    def skip(self, frame: str, node_id: str) -> None:
        self.state.nodes[node_id if not frame else f"{frame}/{node_id}"] = "skipped"
        self.trace("node.skipped", frame, node_id)
        self._resolve(frame, node_id, [False] * len(self.stepper.out_keys[node_id]))
        self.settle(frame)

    def settle(self, frame: str) -> None:
        """A node of ``frame`` is done for good; the last one closes the frame."""
        if frame:
            box = self.state.frames[frame]
            box["left"] -= 1
            if box["left"] == 0:
                self.boxes.close_frame(frame, None)

    def on_failure(self, frame: str, node_id: str, failure: NodeFailure) -> None:
        """Retry, fall back, continue, or let the failure go up, as the node's handler says."""
        handler_id = self.graph.handler_of.get(node_id)
        handler = self.graph.nodes[handler_id] if handler_id else None
        if not isinstance(handler, ErrorHandlerWorkflowNode) or failure.kind == "unsupported":
            return self.fail(frame, node_id, failure)
        config, key = handler.config, node_key(frame, node_id)
        tries = self.state.attempts.get(key, 0) + 1
        self.state.attempts[key] = tries
        error = {
            "node_id": node_id,
            "type": failure.kind,
            "message": str(failure),
            "attempts": tries,
            **failure.details,
        }
        if tries <= config.retry_count:
            delay = actions.backoff(config.retry_backoff, float(config.retry_delay_seconds), tries)
            self.trace("node.retrying", frame, node_id, attempts=tries, delay=delay, error=error)
            self.state.nodes.pop(key, None)
            if delay <= 0:
                return self.push(frame, node_id)
            command_id = self.wait_on(frame, node_id, "waiting")
            self.commands.append(SleepUntil(command_id, node_id, self.state.now + delay, frame))
            return None
        if config.on_error == "fail":
            return self.fail(frame, node_id, failure, attempts=tries)
        self.trace(
            "node.failed", frame, node_id, attempts=tries, handled_by=handler.id, error=error
        )
        if config.on_error == "continue":
            node = self.graph.nodes[node_id]
            return self.succeed(frame, node_id, dict.fromkeys(actions.declared_outputs(node)))
        self.state.nodes[key] = "failed"  # fallback: only the failure link is taken
        target = self.state.frames[frame]["vars"] if frame else self.state.variables
        target["error"] = error
        links = [link.kind == "failure" for link in self.graph.outgoing[node_id]]
        self._resolve(frame, node_id, links)
        self.settle(frame)
        return None

    def fail(self, frame: str, node_id: str, failure: NodeFailure, attempts: int = 0) -> None:
        """An unhandled failure: it fails the node's frame (and so its loop or parallel node),
        or the run at the top level."""
        self.state.nodes[node_key(frame, node_id)] = "failed"
        error: dict[str, Any] = {"node_id": node_id, "kind": failure.kind, "message": str(failure)}
        error.update(failure.details)
        if attempts:
            error["attempts"] = attempts
        self.trace("node.failed", frame, node_id, error=error)
        if frame:
            self.boxes.close_frame(frame, error)
            return
        self.state.status = "failed"
        self.state.error = error

    # -- helpers ------------------------------------------------------------------------------

    def wait_on(self, frame: str, node_id: str, mark: Any) -> str:
        """A new command for ``node_id``, recorded as pending."""
        state = self.state
        state.next_command += 1
        command_id = f"c{state.next_command}"
        state.pending[command_id] = node_key(frame, node_id)
        state.nodes[node_key(frame, node_id)] = mark
        return command_id

    def start_timer(self, frame: str, node_id: str, at: float) -> None:
        state = self.state
        state.next_command += 1
        command_id = f"c{state.next_command}"
        key = node_key(frame, node_id)
        state.pending[command_id] = key
        state.timers[key] = command_id
        self.commands.append(SleepUntil(command_id, node_id, at, frame))

    def stop_timer(self, key: str) -> None:
        command_id = self.state.timers.pop(key, None)
        if command_id is not None:
            self.state.pending.pop(command_id, None)
            self.cancelled.append(command_id)

    def scope(self, frame: str) -> Scope:
        """The names an expression sees: run variables, then each enclosing frame's, innermost
        last; ``nodes``, ``inputs``, ``sys`` and ``conversation`` are reserved."""
        state = self.state
        scope = {**state.variables}
        nodes = state.node_outputs
        if frame:
            nodes = dict(nodes)
            for box in self.frame_chain(frame):
                scope.update(box["vars"])
                nodes.update(box["nodes"])
        scope["nodes"] = nodes
        scope["inputs"] = state.inputs
        scope["conversation"] = state.conversation
        if self._sys is None:
            moment = datetime.fromtimestamp(state.now, UTC).isoformat()
            self._sys = {**state.sys, "now": moment}
        scope["sys"] = self._sys
        return scope

    def frame_chain(self, frame: str) -> list[dict[str, Any]]:
        chain = []
        while frame:
            box = self.state.frames[frame]
            chain.append(box)
            frame = box["parent"]
        return chain[::-1]

    def started_with(self, inputs: dict[str, Any]) -> None:
        """What the node now running was given, evaluated: its ``node.started`` event's
        ``inputs`` (docs/workflows.md, trace events)."""
        self._starting["inputs"] = inputs

    def trace(self, kind: str, frame: str, node_id: str, **detail: Any) -> None:
        event: dict[str, Any] = {"type": kind, "node_id": node_id}
        if frame:
            event["frame"] = frame
        event.update(detail)
        self.events.append(event)

    # node type -> how it runs (error handlers never run: they are consulted on failures)
    _runners: ClassVar[dict[str, Callable[[Walk, str, Any, Evaluate], None]]] = {
        "agent": lambda walk, frame, node, _: react.begin(walk, frame, node),
        "start": _start,
        "end": _end,
        "template": _template,
        "if_else": _if_else,
        "variable": _variables,
        "code": _call_function,
        "tool_call": _call_function,
        "actor_call": _call_actor,
        "llm": _call_model,
        "human_input": _ask_input,
        "loop": _loop,
        "parallel": _parallel,
    }
