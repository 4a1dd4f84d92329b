"""The workflow stepper (DESIGN.md 3): pure functions from (compiled graph, run state, event) to
(new state, commands, trace events). No I/O and no clock: the executor performs the commands
(call a function or a model, ask a person, sleep) and feeds what happened back as events.

``start`` begins a run; ``step`` applies one event. Both run every node that becomes ready
(walk.py) until the run waits on a command or ends. Determinism: the same graph, inputs and
events give the same states, commands and trace events.
"""

from __future__ import annotations

from typing import Any

from dhub.domain.nodes import (
    ActorCallWorkflowNode,
    HumanInputWorkflowNode,
    LLMWorkflowNode,
    StartWorkflowNode,
)
from dhub.engine import actions, react, usage
from dhub.engine.actions import NodeFailure
from dhub.engine.compile import CompiledGraph, Link
from dhub.engine.expressions import Expressions, shared
from dhub.engine.react_config import AgentNode
from dhub.engine.state import (
    AwaitConfirmation,
    AwaitInput,
    CallFunction,
    CallModel,
    Cancel,
    CancelRun,
    Command,
    Complete,
    Confirmed,
    Done,
    Event,
    Fail,
    InputGiven,
    RunState,
    SleepUntil,
    Step,
    Woke,
    node_key,
)
from dhub.engine.values import InputError, check_submission, coerce_inputs
from dhub.engine.walk import Walk

__all__ = [
    "AwaitConfirmation",
    "AwaitInput",
    "CallFunction",
    "CallModel",
    "Cancel",
    "CancelRun",
    "Command",
    "Complete",
    "Confirmed",
    "Done",
    "Fail",
    "InputGiven",
    "RunState",
    "SleepUntil",
    "Step",
    "Stepper",
    "Woke",
]


class Stepper:
    """Steps runs of one compiled graph; holds only lookup tables, never a run's state."""

    def __init__(self, graph: CompiledGraph, expressions: Expressions | None = None) -> None:
        self.graph = graph
        self.ex = expressions or shared()
        self.position = {node_id: i for i, node_id in enumerate(graph.order)}
        self.targets = {n: tuple(link.target for link in graph.outgoing[n]) for n in graph.order}
        self.out_keys = {n: tuple(map(_key, graph.outgoing[n])) for n in graph.order}
        # None: never ready on its own (an error handler); () : ready at once (an entry)
        self.in_keys: dict[str, tuple[str, ...] | None] = {
            n: None
            if graph.nodes[n].type == "error_handler"
            else tuple(map(_key, graph.incoming[n]))
            for n in graph.order
        }
        self.budget = usage.budget(graph.spec.options)  # the most a run may cost, in USD
        self.scope_size = {
            sid: sum(1 for n in scope.node_ids if graph.nodes[n].type != "error_handler")
            for sid, scope in graph.scopes.items()
        }

    def start(
        self,
        inputs: dict[str, Any],
        now: float = 0.0,
        context: dict[str, Any] | None = None,
        conversation: dict[str, Any] | None = None,
    ) -> Step:
        """A new run. ``context`` fills ``sys`` (run_id, agent_id, user_id, ...);
        ``conversation`` holds the chat's variables."""
        state = RunState(inputs=dict(inputs), now=now, sys=dict(context or {}))
        state.conversation = dict(conversation or {})
        walk = Walk(self, state)
        walk.push("", self.graph.start)
        return walk.run()

    def step(self, state: RunState, event: Event, *, in_place: bool = False) -> Step:
        """Apply one event. The given state is left as it was unless ``in_place`` (an executor
        that owns the state saves a copy per step that way)."""
        if not in_place:
            state = RunState.from_dict(state.to_dict())
        if state.status != "running":
            return Step(state, [], [])
        state.now = event.now
        walk = Walk(self, state)
        if isinstance(event, CancelRun):
            state.status = "cancelled"
            walk.events.append({"type": "run.cancelled", "reason": event.reason})
            return walk.finish()
        key = state.pending.get(event.command_id)
        if key is None:
            return Step(state, [], [])  # a command abandoned earlier: nothing to do
        frame, node_id = _split(state, key)
        node = self.graph.nodes[node_id]
        if isinstance(node, AgentNode) and not isinstance(event, Woke):
            try:
                react.on_event(walk, event, frame, node)
            except NodeFailure as failure:
                walk.on_failure(frame, node_id, failure)
        elif isinstance(event, Woke):
            self._woke(walk, event, frame, node_id)
        elif isinstance(event, InputGiven):
            self._answered(walk, event, frame, node_id)
        elif isinstance(event, Confirmed):
            self._confirmed(walk, event, frame, node_id)
        else:
            del state.pending[event.command_id]
            self._done(walk, event, frame, node_id)
        spent = usage.spent(state.usage)
        if self.budget is not None and spent > self.budget and state.status == "running":
            return walk.over_budget(spent, self.budget)  # the call that went over completed
        return walk.run()

    def check_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The start node's inputs, typed; raises InputError naming each problem (the API's
        422 before a run is created)."""
        start = self.graph.nodes[self.graph.start]
        assert isinstance(start, StartWorkflowNode)
        return coerce_inputs(start.config.variables, inputs)

    # -- events -------------------------------------------------------------------------------

    @staticmethod
    def _done(walk: Walk, event: Done, frame: str, node_id: str) -> None:
        if not event.ok:
            error = event.error or {}
            message = str(error.get("message") or "the call failed")
            details = {k: error[k] for k in _PROVIDER_DETAILS if k in error}
            failure = NodeFailure(message, str(error.get("kind", "error")), details)
            walk.on_failure(frame, node_id, failure)
            return
        node = walk.graph.nodes[node_id]
        assert not isinstance(node, AgentNode)  # its events go to react.on_event
        try:
            produced = actions.call_values(node, event.value)
            if event.usage:
                assert isinstance(node, LLMWorkflowNode)  # the only node that calls a model
                usage.count(walk.state.usage, event.usage, node.config.model_provider,
                            node.config.model)  # fmt: skip
                walk.succeed(frame, node_id, produced, usage=event.usage)
                return
            walk.succeed(frame, node_id, produced)
        except NodeFailure as failure:
            walk.on_failure(frame, node_id, failure)

    @staticmethod
    def _woke(walk: Walk, event: Woke, frame: str, node_id: str) -> None:
        state = walk.state
        del state.pending[event.command_id]
        key = node_key(frame, node_id)
        if state.timers.get(key) == event.command_id:
            del state.timers[key]
            walk.boxes.timed_out(frame, node_id)
        else:  # a retry is due: the node is ready again
            state.nodes.pop(key, None)
            walk.push(frame, node_id)

    @staticmethod
    def _answered(walk: Walk, event: InputGiven, frame: str, node_id: str) -> None:
        """A submission that does not fit the form is refused and the task stays open."""
        node = walk.graph.nodes[node_id]
        if not isinstance(node, HumanInputWorkflowNode):
            raise ValueError(f"command {event.command_id} does not wait for input")
        try:
            answer = check_submission(node.config.input_fields, event.values)
        except InputError as exc:
            walk.trace("input.rejected", frame, node_id, message=str(exc))
            return
        del walk.state.pending[event.command_id]
        walk.stop_timer(node_key(frame, node_id))
        walk.trace("input.received", frame, node_id, responded_by=event.responded_by)
        walk.succeed(frame, node_id, {**answer, "responded_by": event.responded_by})

    @staticmethod
    def _confirmed(walk: Walk, event: Confirmed, frame: str, node_id: str) -> None:
        node = walk.graph.nodes[node_id]
        if not isinstance(node, ActorCallWorkflowNode):
            raise ValueError(f"command {event.command_id} does not wait for a confirmation")
        del walk.state.pending[event.command_id]
        asked = walk.state.asked.pop(node_key(frame, node_id))
        walk.trace("confirmation.received", frame, node_id, approve=event.approve, by=event.by)
        if event.approve:
            arguments = asked if event.arguments is None else dict(event.arguments)
            walk.call_approved(frame, node_id, arguments)
            return
        who = event.by or "the reviewer"
        reason = f": {event.reason}" if event.reason else ""
        failure = NodeFailure(f"{who} rejected the call{reason}", "rejected")
        walk.on_failure(frame, node_id, failure)


def _key(link: Link) -> str:
    return f"{link.source}>{link.target}:{link.kind}:{link.index}"


def _split(state: RunState, key: str) -> tuple[str, str]:
    """A node key back into (frame, node id): the longest prefix that is an open frame."""
    cut = key.rfind("/")
    while cut > 0:
        if key[:cut] in state.frames:
            return key[:cut], key[cut + 1 :]
        cut = key.rfind("/", 0, cut)
    return "", key


_PROVIDER_DETAILS = ("provider", "model", "status")  # kept from a failed model call's error
