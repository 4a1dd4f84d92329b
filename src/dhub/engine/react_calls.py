"""The tool calls of a react turn (DESIGN.md 3.3): tools at once and concurrently, actors
after a person's decision, built-ins in the engine, roles as nested loops. Each call's result
(or error) goes back to the model with the others, in call order, when the last is done."""

from __future__ import annotations

import json
from typing import Any

from dhub.engine.react_config import MAX_RESULT_CHARS, SET_VARIABLE, ReactTool
from dhub.engine.react_loop import Loop, new_loop
from dhub.engine.state import (
    AwaitConfirmation,
    CallFunction,
    CallKnowledge,
    Confirmed,
    Done,
    InputGiven,
    Woke,
)


def start(loop: Loop, asked: dict[str, Any]) -> Loop | None:
    """Begin one call the model asked for; a role's call: the delegate's loop, which the caller
    (react.py) asks at once."""
    name, arguments = str(asked.get("name", "")), asked.get("arguments") or {}
    call: dict[str, Any] = {"id": asked["id"], "name": name, "arguments": arguments,
                            "status": "done", "command": None}  # fmt: skip
    loop.data["calls"].append(call)
    tool = loop.config.tool(name)
    if tool is None:
        known = ", ".join(t.name for t in loop.config.tools) or "none"
        _result(call, f"There is no tool named '{name}'. The tools are: {known}.", True)
        return None
    loop.trace("tool.called", call_id=call["id"], name=name, arguments=arguments,
               category=tool.kind)  # fmt: skip
    if tool.kind == "builtin":
        _builtin(loop, call)
    elif tool.kind == "role":
        return _delegate(loop, call, tool)
    elif tool.confirm:
        call["status"] = "waiting"
        call["command"] = loop.issue("waiting")
        loop.trace("node.waiting", waiting_for="confirmation", call_id=call["id"], actor=name)
        loop.walk.commands.append(
            AwaitConfirmation(call["command"], loop.node.id, name, dict(arguments), loop.frame)
        )
    else:
        _run(loop, call, tool, arguments)
    return None


def on_result(loop: Loop, event: Done | Woke | InputGiven | Confirmed) -> None:
    """The result of a call's command (a function's, or a person's decision); the caller
    (react.py) asks the model again once every call of the turn is done."""
    call = next((c for c in loop.data["calls"] if c.get("command") == event.command_id), None)
    if call is None:
        raise ValueError(f"command {event.command_id} belongs to no call of '{loop.node.id}'")
    if isinstance(event, Confirmed):
        _decided(loop, call, event)
    elif isinstance(event, Done):
        _finished(loop, call, event)


def delegate_done(loop: Loop, call_id: str, text: str, is_error: bool) -> None:
    """A delegate's loop ended: its answer (or why not) is its call's result (the caller,
    react.py, goes on with the turn)."""
    call = next(c for c in loop.data["calls"] if c["id"] == call_id)
    call["status"] = "done"
    _result(call, text, is_error)
    kind = "tool.failed" if is_error else "tool.succeeded"
    loop.trace(kind, call_id=call_id, name=call["name"], result=text)


def _run(loop: Loop, call: dict[str, Any], tool: ReactTool, arguments: dict[str, Any]) -> None:
    call["status"] = "running"
    call["command"] = loop.issue()
    if tool.knowledge is not None:
        known = tool.knowledge
        call_args = known.arguments(dict(arguments))
        request = CallKnowledge(call["command"], loop.node.id, known.operation, call_args,
                                loop.frame)  # fmt: skip
        loop.walk.commands.append(request)
        return
    loop.walk.commands.append(
        CallFunction(
            call["command"], loop.node.id, tool.source, dict(arguments), tool.timeout,
            tool.entry, tool.dependencies, loop.frame, tool.network, tool.parameters,
            tool.outputs, tool.decorators, browser=tool.browser,
            knowledge=loop.walk.graph.code_knowledge,
        )
    )  # fmt: skip


def _decided(loop: Loop, call: dict[str, Any], event: Confirmed) -> None:
    loop.trace("confirmation.received", call_id=call["id"], approve=event.approve, by=event.by,
               reason=event.reason)  # fmt: skip
    if event.approve:
        if event.arguments is not None:
            call["arguments"] = dict(event.arguments)
        tool = loop.config.tool(call["name"])
        assert tool is not None  # it was found when the call was asked for
        _run(loop, call, tool, call["arguments"])
        return
    who = event.by or "the person asked"
    reason = f": {event.reason}" if event.reason else " (no reason given)"
    call["status"] = "done"
    _result(call, f"{who} rejected this call{reason}. It did not run.", True)
    loop.trace("tool.failed", call_id=call["id"], name=call["name"],
               error={"kind": "rejected", "message": call["result"]})  # fmt: skip


def _finished(loop: Loop, call: dict[str, Any], event: Done) -> None:
    call["status"] = "done"
    if event.ok:
        _result(call, _as_text(event.value), False)
        loop.trace("tool.succeeded", call_id=call["id"], name=call["name"], result=event.value)
        return
    error = event.error or {}
    message = str(error.get("message") or "the call failed")
    _result(call, f"Error ({error.get('kind', 'error')}): {message}", True)
    loop.trace("tool.failed", call_id=call["id"], name=call["name"],
               error={"kind": error.get("kind", "error"), "message": message})  # fmt: skip


def _builtin(loop: Loop, call: dict[str, Any]) -> None:
    arguments = call["arguments"]
    name = arguments.get("name")
    variables = loop.config.conversation_variables
    if call["name"] != SET_VARIABLE or name not in variables:
        known = ", ".join(variables) or "none"
        _result(call, f"Unknown conversation variable {name!r}; the variables are: {known}.",
                True)  # fmt: skip
        return
    value = arguments.get("value")
    loop.walk.state.conversation[str(name)] = value
    _result(call, f"{name} is now {json.dumps(value, ensure_ascii=False)}.", False)
    loop.trace("tool.succeeded", call_id=call["id"], name=call["name"],
               result={"name": name, "value": value})  # fmt: skip


def _delegate(loop: Loop, call: dict[str, Any], tool: ReactTool) -> Loop | None:
    """A role: a nested loop with the role's config, its task the call's ``task``."""
    task = call["arguments"].get("task")
    if not isinstance(task, str) or not task.strip():
        _result(call, "Give the role a 'task': what it should do, as text.", True)
        return None
    call["status"] = "delegated"
    sub = new_loop([{"role": "user", "content": task}], role=tool.name)
    loop.data["subs"][call["id"]] = sub
    path = f"{loop.path}/{call['id']}" if loop.path else str(call["id"])
    nested = Loop(loop.walk, loop.frame, loop.node, loop.top, path, sub,
                  loop.config.role(tool.name))  # fmt: skip
    nested.trace("agent.delegated", role=tool.name, task=task)
    return nested


def _result(call: dict[str, Any], text: str, is_error: bool) -> None:
    call["result"] = text
    call["is_error"] = is_error


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + f"… [cut: {len(text)} characters in all]"
    return text
