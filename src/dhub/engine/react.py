"""The react loop (DESIGN.md 3.3) as the one node of a react agent's graph.

A react agent compiles to ``start → agent → end``: the ``agent`` node runs the loop and writes
``answer``. Running it inside the workflow machinery gives it everything runs already have —
saved steps, leases, resume, cancellation, parking while a person decides, the event log.

The loop, as steps: ask the model (``CallChat`` with the transcript and the tool definitions);
when it answers with tool calls, perform them — tools at once and concurrently
(``CallFunction``), actors that need a person after their ``AwaitConfirmation`` — and when the
last one is done, append the results in call order and ask again; when it answers without tool
calls, that is the answer (checked against ``outputs`` when it is a schema: one repair, then a
clear failure). ``max_iterations`` bounds the model calls. The transcript, the open calls and
their results live in ``RunState.agents`` (plain JSON): a call whose result was saved is never
performed again, whatever restarts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dhub.engine import compaction
from dhub.engine.actions import NodeFailure
from dhub.engine.state import (
    AwaitConfirmation,
    CallChat,
    CallFunction,
    Confirmed,
    Done,
    InputGiven,
    Woke,
    node_key,
)

if TYPE_CHECKING:
    from dhub.engine.walk import Walk

ToolKind = Literal["tool", "actor", "builtin"]
SET_VARIABLE = "set_conversation_variable"
MAX_RESULT_CHARS = 20_000  # a tool result longer than this is cut for the model (not the log)


@dataclass(frozen=True)
class ReactTool:
    """What the model may call. ``kind`` tool runs at once, actor after a person's yes when
    ``confirm``; builtin is performed by the engine itself."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: ToolKind = "tool"
    confirm: bool = False
    source: str = ""
    entry: str | None = None
    timeout: float = 30.0
    dependencies: tuple[str, ...] = ()
    network: bool = False
    outputs: dict[str, Any] | None = None
    decorators: tuple[dict[str, Any], ...] = ()

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters}  # fmt: skip


@dataclass(frozen=True)
class ReactConfig:
    """A react agent resolved for running: its system prompt rendered, its tools inline."""

    system: str
    model_provider: str
    model: str
    tools: tuple[ReactTool, ...] = ()
    max_iterations: int = 50
    outputs: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    conversation_variables: tuple[str, ...] = ()
    compaction: compaction.Settings | None = None  # None: no budget is known

    def tool(self, name: str) -> ReactTool | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class AgentNode:
    """The node that runs the loop (not a document node: react agents have no nodes)."""

    id: str
    config: ReactConfig
    type: Literal["agent"] = "agent"


def begin(walk: Walk, frame: str, node: AgentNode) -> None:
    """Start the loop with the run's task: the chat message, the ``message`` input, or the
    event that started the run."""
    key = node_key(frame, node.id)
    history = list(walk.state.sys.get("history") or [])
    loop: dict[str, Any] = {
        "messages": [*history, {"role": "user", "content": task_of(walk.state.sys,
                                                                   walk.state.inputs)}],
        "iteration": 0, "calls": [], "asking": None, "repaired": False, "usage": {},
    }  # fmt: skip
    if isinstance(summary := walk.state.sys.get("summary"), str) and summary:
        loop["summary"] = summary  # a chat's earlier turns, compacted by an earlier run
    walk.state.agents[key] = loop
    _ask(walk, frame, node, loop)


def task_of(sys: dict[str, Any], inputs: dict[str, Any]) -> str:
    """The chat message; else the event, as its type and payload; else the ``message``
    input; else the inputs as JSON."""
    if isinstance(sys.get("message"), str):
        return str(sys["message"])
    event = sys.get("event")
    if isinstance(event, dict):
        payload = json.dumps(event.get("payload", {}), ensure_ascii=False, sort_keys=True)
        return f"Event '{event.get('type', 'event')}': {payload}"
    if isinstance(inputs.get("message"), str):
        return str(inputs["message"])
    return json.dumps(inputs, ensure_ascii=False, sort_keys=True)


def on_event(
    walk: Walk, event: Done | Woke | InputGiven | Confirmed, frame: str, node: AgentNode
) -> None:
    """A result for one of the loop's commands."""
    key = node_key(frame, node.id)
    loop = walk.state.agents[key]
    del walk.state.pending[event.command_id]
    if event.command_id == loop["asking"]:
        if not isinstance(event, Done):
            raise ValueError(f"command {event.command_id} is a model call")
        loop["asking"] = None
        return _answered(walk, frame, node, loop, event)
    if event.command_id == (loop.get("compacting") or {}).get("command"):
        if not isinstance(event, Done):
            raise ValueError(f"command {event.command_id} is a model call")
        return _summarized(walk, frame, node, loop, event)
    call = next((c for c in loop["calls"] if c.get("command") == event.command_id), None)
    if call is None:
        raise ValueError(f"command {event.command_id} belongs to no call of '{node.id}'")
    if isinstance(event, Confirmed):
        _decided(walk, frame, node, call, event)
    elif isinstance(event, Done):
        _finished(walk, frame, node.id, call, event)
    _next_turn_if_done(walk, frame, node, loop)


# -- the model -------------------------------------------------------------------------------


def _ask(walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any]) -> None:
    config = node.config
    if loop["iteration"] >= config.max_iterations:
        raise NodeFailure(
            f"the agent used its {config.max_iterations} iterations (max_iterations) without "
            "a final answer; its transcript is kept in the run's state",
            "max_iterations",
        )
    system = _system(config, walk.state.conversation, loop.get("summary"))
    tools = [t.definition() for t in config.tools]
    if config.compaction is not None and _compact(walk, frame, node, loop, system, tools):
        return  # the summary is being written: the call is made when it is in
    loop["iteration"] += 1
    loop["estimate"] = compaction.count_request(system, loop["messages"], tools)
    command_id = walk.wait_on(frame, node.id, "running")
    loop["asking"] = command_id
    walk.commands.append(
        CallChat(
            command_id, node.id, config.model_provider, config.model, system,
            list(loop["messages"]), tools, config.outputs,
            walk.state.sys.get("reasoning_effort") or config.reasoning_effort,
            None, dict(config.options) or None, frame,
        )
    )  # fmt: skip


def _system(config: ReactConfig, conversation: dict[str, Any], summary: str | None) -> str:
    """The system prompt, with the conversation's variables as they are now and the summary
    of the turns compacted so far."""
    system = compaction.with_summary(config.system, summary)
    if not config.conversation_variables:
        return system
    lines = [f"- {name}: {json.dumps(conversation.get(name), ensure_ascii=False)}"
             for name in config.conversation_variables]  # fmt: skip
    return (
        f"{system}\n\nConversation variables (change them with the "
        f"{SET_VARIABLE} tool):\n" + "\n".join(lines)
    )


# -- the budget --------------------------------------------------------------------------------


def _compact(
    walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any], system: str,
    tools: list[dict[str, Any]],
) -> bool:  # fmt: skip
    """Fit the transcript into the budget before a call. True when a summary was asked for
    (the call waits for it); raises when even the last turn alone does not fit."""
    settings = node.config.compaction
    assert settings is not None
    ratio = float(loop.get("ratio", 1.0))
    cut = compaction.plan(system, loop["messages"], tools, settings, ratio)
    if cut is not None and cut.count > 0:
        if settings.enabled:
            command_id = walk.wait_on(frame, node.id, "running")
            loop["compacting"] = {"command": command_id, "count": cut.count,
                                  "before": cut.before}  # fmt: skip
            walk.commands.append(CallChat(
                command_id, node.id, node.config.model_provider, node.config.model,
                compaction.SUMMARY_SYSTEM,
                compaction.summary_request(loop["messages"][: cut.count], loop.get("summary")),
                [], None, "none", settings.summary_max_tokens, None, frame,
            ))  # fmt: skip
            return True
        del loop["messages"][: cut.count]
        walk.trace("compaction.applied", frame, node.id, mode="dropped", removed=cut.count,
                   before=cut.before, after=cut.after, budget=settings.budget)  # fmt: skip
    _check_fits(node, loop, system, tools, ratio)
    return False


def _summarized(walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any], event: Done) -> None:
    settings = node.config.compaction
    assert settings is not None
    plan = loop.pop("compacting")
    if event.usage:
        _count(loop["usage"], event.usage)
        _count(walk.state.usage, event.usage)
    del loop["messages"][: plan["count"]]
    detail: dict[str, Any] = {"removed": plan["count"], "before": plan["before"],
                              "budget": settings.budget}  # fmt: skip
    if event.ok and str((event.value or {}).get("content") or "").strip():
        loop["summary"] = str(event.value["content"]).strip()
        detail.update(mode="summarized", summary_tokens=(event.usage or {}).get("output_tokens"))
    else:  # no summary: the turns are dropped all the same, and the event says why
        detail.update(mode="dropped", error=(event.error or {}).get("message", "empty summary"))
    system = _system(node.config, walk.state.conversation, loop.get("summary"))
    tools = [t.definition() for t in node.config.tools]
    ratio = float(loop.get("ratio", 1.0))
    detail["after"] = math.ceil(compaction.count_request(system, loop["messages"], tools) * ratio)
    walk.trace("compaction.applied", frame, node.id, **detail)
    _ask(walk, frame, node, loop)


def _check_fits(
    node: AgentNode, loop: dict[str, Any], system: str, tools: list[dict[str, Any]],
    ratio: float,
) -> None:  # fmt: skip
    settings = node.config.compaction
    assert settings is not None
    size = math.ceil(compaction.count_request(system, loop["messages"], tools) * ratio)
    if size > settings.budget:
        raise NodeFailure(
            f"the request needs about {size} input tokens and max_input_tokens is "
            f"{settings.budget}: even with the older turns compacted, the system prompt, the "
            "tools and the current turn do not fit; raise max_input_tokens or shorten them",
            "budget_exceeded",
        )


def _answered(walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any], event: Done) -> None:
    if event.usage:
        _count(loop["usage"], event.usage)
        _count(walk.state.usage, event.usage)
        reported, estimate = event.usage.get("input_tokens"), loop.get("estimate")
        if not event.usage.get("estimated") and isinstance(reported, int) and estimate:
            loop["ratio"] = reported / estimate  # this model's tokenizer, for the budget
    if not event.ok:
        return _model_failed(walk, frame, node, loop, event.error or {})
    message = dict(event.value or {})
    calls = list(message.get("tool_calls") or [])
    loop["messages"].append(_assistant(message))
    walk.trace("agent.message", frame, node.id, iteration=loop["iteration"],
               content=message.get("content", ""),
               tool_calls=[{"id": c["id"], "name": c["name"]} for c in calls],
               usage=event.usage)  # fmt: skip
    if not calls:
        answer = message.get("parsed") if node.config.outputs else message.get("content", "")
        walk.succeed(frame, node.id, {"answer": answer}, usage=dict(loop["usage"]))
        return None
    for call in calls:
        _start_call(walk, frame, node, loop, call)
    _next_turn_if_done(walk, frame, node, loop)
    return None


def _model_failed(
    walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any], error: dict[str, Any]
) -> None:
    message = str(error.get("message") or "the model call failed")
    kind = str(error.get("kind") or "error")
    if kind == "invalid_output" and node.config.outputs and not loop["repaired"]:
        loop["repaired"] = True
        walk.trace("agent.repair", frame, node.id, error=message)
        loop["messages"].append({"role": "user", "content": (
            f"Your answer does not fit the required output: {message}. Answer again with "
            "only a JSON value that matches the output schema."
        )})  # fmt: skip
        return _ask(walk, frame, node, loop)
    details: dict[str, Any] = {k: error[k] for k in ("provider", "model", "status") if k in error}
    raise NodeFailure(message, kind, details)


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    for name in ("tool_calls", "reasoning", "replay"):
        if message.get(name):
            kept[name] = message[name]
    return kept


# -- tool calls ------------------------------------------------------------------------------


def _start_call(
    walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any], asked: dict[str, Any]
) -> None:
    name, arguments = str(asked.get("name", "")), asked.get("arguments") or {}
    call: dict[str, Any] = {"id": asked["id"], "name": name, "arguments": arguments,
                            "status": "done", "command": None}  # fmt: skip
    loop["calls"].append(call)
    tool = node.config.tool(name)
    if tool is None:
        known = ", ".join(t.name for t in node.config.tools) or "none"
        return _result(call, f"There is no tool named '{name}'. The tools are: {known}.", True)
    walk.trace("tool.called", frame, node.id, call_id=call["id"], name=name,
               arguments=arguments, category=tool.kind)  # fmt: skip
    if tool.kind == "builtin":
        return _builtin(walk, frame, node, call)
    if tool.confirm:
        call["status"] = "waiting"
        call["command"] = walk.wait_on(frame, node.id, "waiting")
        walk.trace("node.waiting", frame, node.id, waiting_for="confirmation",
                   call_id=call["id"], actor=name)  # fmt: skip
        walk.commands.append(
            AwaitConfirmation(call["command"], node.id, name, dict(arguments), frame)
        )
        return None
    _run(walk, frame, node.id, call, tool, arguments)
    return None


def _run(
    walk: Walk, frame: str, node_id: str, call: dict[str, Any], tool: ReactTool,
    arguments: dict[str, Any],
) -> None:  # fmt: skip
    call["status"] = "running"
    call["command"] = walk.wait_on(frame, node_id, "running")
    walk.commands.append(
        CallFunction(
            call["command"], node_id, tool.source, dict(arguments), tool.timeout, tool.entry,
            tool.dependencies, frame, tool.network, tool.parameters, tool.outputs,
            tool.decorators,
        )
    )  # fmt: skip


def _decided(
    walk: Walk, frame: str, node: AgentNode, call: dict[str, Any], event: Confirmed
) -> None:
    walk.trace("confirmation.received", frame, node.id, call_id=call["id"],
               approve=event.approve, by=event.by, reason=event.reason)  # fmt: skip
    if event.approve:
        if event.arguments is not None:
            call["arguments"] = dict(event.arguments)
        tool = node.config.tool(call["name"])
        assert tool is not None  # it was found when the call was asked for
        _run(walk, frame, node.id, call, tool, call["arguments"])
        return
    who = event.by or "the person asked"
    reason = f": {event.reason}" if event.reason else " (no reason given)"
    call["status"] = "done"
    _result(call, f"{who} rejected this call{reason}. It did not run.", True)
    walk.trace("tool.failed", frame, node.id, call_id=call["id"], name=call["name"],
               error={"kind": "rejected", "message": call["result"]})  # fmt: skip


def _finished(walk: Walk, frame: str, node_id: str, call: dict[str, Any], event: Done) -> None:
    call["status"] = "done"
    if event.ok:
        _result(call, _as_text(event.value), False)
        walk.trace("tool.succeeded", frame, node_id, call_id=call["id"], name=call["name"],
                   result=event.value)  # fmt: skip
        return
    error = event.error or {}
    message = str(error.get("message") or "the call failed")
    _result(call, f"Error ({error.get('kind', 'error')}): {message}", True)
    walk.trace("tool.failed", frame, node_id, call_id=call["id"], name=call["name"],
               error={"kind": error.get("kind", "error"), "message": message})  # fmt: skip


def _builtin(walk: Walk, frame: str, node: AgentNode, call: dict[str, Any]) -> None:
    arguments = call["arguments"]
    name = arguments.get("name")
    if call["name"] != SET_VARIABLE or name not in node.config.conversation_variables:
        known = ", ".join(node.config.conversation_variables) or "none"
        _result(call, f"Unknown conversation variable {name!r}; the variables are: {known}.",
                True)  # fmt: skip
        return
    walk.state.conversation[str(name)] = arguments.get("value")
    _result(call, f"{name} is now {json.dumps(arguments.get('value'), ensure_ascii=False)}.",
            False)  # fmt: skip
    walk.trace("tool.succeeded", frame, node.id, call_id=call["id"], name=call["name"],
               result={"name": name, "value": arguments.get("value")})  # fmt: skip


def _result(call: dict[str, Any], text: str, is_error: bool) -> None:
    call["result"] = text
    call["is_error"] = is_error


def _next_turn_if_done(walk: Walk, frame: str, node: AgentNode, loop: dict[str, Any]) -> None:
    """Once every call of the turn has its result: the results go to the model, in order."""
    if not loop["calls"] or any(c["status"] != "done" for c in loop["calls"]):
        return
    for call in loop["calls"]:
        loop["messages"].append({
            "role": "tool", "tool_call_id": call["id"], "content": call["result"],
            "is_error": call["is_error"],
        })  # fmt: skip
    loop["calls"] = []
    _ask(walk, frame, node, loop)


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + f"… [cut: {len(text)} characters in all]"
    return text


def _count(total: dict[str, Any], usage: dict[str, Any]) -> None:
    for kind in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"):
        if isinstance(count := usage.get(kind), int):
            total[kind] = total.get(kind, 0) + count
