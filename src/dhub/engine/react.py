"""The react loop (DESIGN.md 3.3) as the one node of a react agent's graph.

A react agent compiles to ``start → agent → end``: the ``agent`` node runs the loop and writes
``answer``. Running it inside the workflow machinery gives it everything runs already have —
saved steps, leases, resume, cancellation, parking while a person decides, the event log.

The loop, as steps: ask the model (``CallChat`` with the transcript and the tool definitions);
when it answers with tool calls, perform them (``react_calls``) and, when the last one is
done, append the results in call order and ask again; when it answers without tool calls,
that is the answer (checked against ``outputs`` when it is a schema: one repair, then a clear
failure). ``max_iterations`` bounds the model calls; the budget (``compaction``) bounds what
each call is sent. A *role* is a delegate: calling it runs a nested loop with its own config
and iteration budget, whose answer is the call's result; its events carry ``delegate`` (the
path of call ids that led to it).

Everything lives in ``RunState.agents[node key]`` as plain JSON: the top loop, its delegates'
loops under ``subs``, and ``routes`` (command id → loop path) to hand each result to its loop.
A call whose result was saved is never performed again, whatever restarts.
"""

from __future__ import annotations

import json
import math
from typing import Any

from dhub.engine import compaction, react_calls, usage
from dhub.engine.actions import NodeFailure
from dhub.engine.react_config import (
    SET_VARIABLE,
    AgentNode,
)
from dhub.engine.react_loop import Loop, loop_at, new_loop
from dhub.engine.state import CallChat, Confirmed, Done, InputGiven, Woke, node_key
from dhub.engine.walk_port import WalkPort


def begin(walk: WalkPort, frame: str, node: AgentNode) -> None:
    """Start the loop with the run's task: the chat message, the event, or the ``message``
    input, after the chat's earlier turns (``sys.history``, ``sys.summary``)."""
    _check_runnable(node)
    history = list(walk.state.sys.get("history") or [])
    task = {"role": "user", "content": task_of(walk.state.sys, walk.state.inputs)}
    walk.started_with({"message": task["content"]})
    top = new_loop([*history, task], routes={})
    if isinstance(summary := walk.state.sys.get("summary"), str) and summary:
        top["summary"] = summary  # a chat's earlier turns, compacted by an earlier run
    walk.state.agents[node_key(frame, node.id)] = top
    ask(Loop(walk, frame, node, top, "", top, node.config))


def _check_runnable(node: AgentNode) -> None:
    if node.config.broken is not None:
        raise NodeFailure(node.config.broken, "invalid_agent")


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
    walk: WalkPort, event: Done | Woke | InputGiven | Confirmed, frame: str, node: AgentNode
) -> None:
    """A result for one of the loop's commands (or of a delegate's)."""
    top = walk.state.agents[node_key(frame, node.id)]
    del walk.state.pending[event.command_id]
    path = top["routes"].pop(event.command_id, "")
    _check_runnable(node)
    loop = loop_at(walk, frame, node, top, path)
    data = loop.data
    if event.command_id == data["asking"]:
        if not isinstance(event, Done):
            raise ValueError(f"command {event.command_id} is a model call")
        data["asking"] = None
        return _answered(loop, event)
    if event.command_id == (data.get("compacting") or {}).get("command"):
        if not isinstance(event, Done):
            raise ValueError(f"command {event.command_id} is a model call")
        return _summarized(loop, event)
    react_calls.on_result(loop, event)
    next_turn_if_done(loop)
    return None


def pending_messages(
    agents: dict[str, Any], frame: str, node_id: str, path: str, command_id: str
) -> list[dict[str, Any]] | None:
    """The messages of the loop's model call ``command_id`` while it is pending, from the
    run's state: the transcript as it was when the call was made (nothing changes it until
    the answer), or the summary request of a compaction. None when the state does not know
    the call. The journal stores model calls without their messages (they would make a long
    loop's stored calls grow with the square of its turns) and rebuilds them with this."""
    data = agents.get(node_key(frame, node_id))
    try:
        for call_id in path.split("/") if path else ():
            data = data["subs"][call_id] if data is not None else None
    except (KeyError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("asking") == command_id:
        return list(data["messages"])
    compacting = data.get("compacting") or {}
    if compacting.get("command") == command_id:
        turns = data["messages"][: compacting["count"]]
        return compaction.summary_request(turns, data.get("summary"))
    return None


# -- the model -------------------------------------------------------------------------------


def ask(loop: Loop) -> None:
    config, data = loop.config, loop.data
    if data["iteration"] >= config.max_iterations:
        raise NodeFailure(
            f"the agent used its {config.max_iterations} iterations (max_iterations) without "
            "a final answer; its transcript is kept in the run's state",
            "max_iterations",
        )
    system = _system(loop)
    tools = config.definitions()
    if config.compaction is not None and _compact(loop, system, tools):
        return  # the summary is being written: the call is made when it is in
    data["iteration"] += 1
    if config.compaction is not None:  # the budget's calibration; nothing else needs it
        data["estimate"] = compaction.count_request(system, data["messages"], tools)
    command_id = loop.issue()
    data["asking"] = command_id
    effort = loop.walk.state.sys.get("reasoning_effort") or config.reasoning_effort
    loop.walk.commands.append(
        CallChat(
            command_id, loop.node.id, config.model_provider, config.model, system,
            list(data["messages"]), tools, config.outputs, effort, None,
            dict(config.options) or None, loop.frame, loop.path,
        )
    )  # fmt: skip


def _system(loop: Loop) -> str:
    """The system prompt, with the summary of the turns compacted so far and the
    conversation's variables as they are now."""
    config = loop.config
    system = compaction.with_summary(config.system, loop.data.get("summary"))
    if not config.conversation_variables:
        return system
    values = loop.walk.state.conversation
    lines = [f"- {name}: {json.dumps(values.get(name), ensure_ascii=False)}"
             for name in config.conversation_variables]  # fmt: skip
    return (
        f"{system}\n\nConversation variables (change them with the "
        f"{SET_VARIABLE} tool):\n" + "\n".join(lines)
    )


def _answered(loop: Loop, event: Done) -> None:
    data = loop.data
    if event.usage:
        _usage(loop, event.usage)
        reported, estimate = event.usage.get("input_tokens"), data.get("estimate")
        if not event.usage.get("estimated") and isinstance(reported, int) and estimate:
            data["ratio"] = reported / estimate  # this model's tokenizer, for the budget
    if not event.ok:
        return _model_failed(loop, event.error or {})
    message = dict(event.value or {})
    calls = list(message.get("tool_calls") or [])
    data["messages"].append(_assistant(message))
    loop.trace("agent.message", iteration=data["iteration"], content=message.get("content", ""),
               tool_calls=[{"id": c["id"], "name": c["name"]} for c in calls],
               usage=event.usage)  # fmt: skip
    if not calls:
        answer = message.get("parsed") if loop.config.outputs else message.get("content", "")
        return finish(loop, answer)
    for call in calls:
        delegate = react_calls.start(loop, call)
        if delegate is not None:
            ask_or_fail(delegate)
    next_turn_if_done(loop)
    return None


def _model_failed(loop: Loop, error: dict[str, Any]) -> None:
    message = str(error.get("message") or "the model call failed")
    kind = str(error.get("kind") or "error")
    data = loop.data
    if kind == "invalid_output" and loop.config.outputs and not data["repaired"]:
        data["repaired"] = True
        loop.trace("agent.repair", error=message)
        data["messages"].append({"role": "user", "content": (
            f"Your answer does not fit the required output: {message}. Answer again with "
            "only a JSON value that matches the output schema."
        )})  # fmt: skip
        return ask_or_fail(loop)
    details: dict[str, Any] = {k: error[k] for k in ("provider", "model", "status") if k in error}
    return fail(loop, NodeFailure(message, kind, details))


def finish(loop: Loop, answer: Any) -> None:
    """The loop's answer: the node's output, or a delegate's result to its caller."""
    if not loop.path:
        spent = dict(loop.data["usage"])
        loop.walk.succeed(loop.frame, loop.node.id, {"answer": answer}, usage=spent)
        return
    text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    loop.trace("agent.answered", answer=answer)
    caller = loop.parent()
    react_calls.delegate_done(caller, loop.path.rpartition("/")[2], text, False)
    next_turn_if_done(caller)


def fail(loop: Loop, failure: NodeFailure) -> None:
    """A loop that cannot go on: the node fails, or a delegate's caller gets the error."""
    if not loop.path:
        raise failure
    loop.trace("agent.failed", error={"kind": failure.kind, "message": str(failure)})
    message = f"The {loop.data['role']} role could not finish ({failure.kind}): {failure}"
    caller = loop.parent()
    react_calls.delegate_done(caller, loop.path.rpartition("/")[2], message, True)
    next_turn_if_done(caller)


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    for name in ("tool_calls", "reasoning", "replay"):
        if message.get(name):
            kept[name] = message[name]
    return kept


def next_turn_if_done(loop: Loop) -> None:
    """Once every call of the turn has its result: the results go to the model, in order."""
    data = loop.data
    if not data["calls"] or any(c["status"] != "done" for c in data["calls"]):
        return
    for call in data["calls"]:
        data["messages"].append({
            "role": "tool", "tool_call_id": call["id"], "content": call["result"],
            "is_error": call["is_error"],
        })  # fmt: skip
    data["calls"] = []
    ask_or_fail(loop)


def ask_or_fail(loop: Loop) -> None:
    """``ask``, a failure going where ``fail`` sends it (a delegate's to its caller)."""
    try:
        ask(loop)
    except NodeFailure as failure:
        fail(loop, failure)


def _usage(loop: Loop, used: dict[str, Any]) -> None:
    """A model call of this loop (an answer, a repair, a summary): into the loop's total (its
    node's, for a delegate its caller's too) and the run's, by the loop's model."""
    usage.add(loop.data["usage"], used)
    if loop.path:
        usage.add(loop.top["usage"], used)
    usage.count(loop.walk.state.usage, used, loop.config.model_provider, loop.config.model)


# -- the budget --------------------------------------------------------------------------------


def _compact(loop: Loop, system: str, tools: list[dict[str, Any]]) -> bool:
    """Fit the transcript into the budget before a call. True when a summary was asked for
    (the call waits for it); raises when even the last turn alone does not fit."""
    settings, data = loop.config.compaction, loop.data
    assert settings is not None
    ratio = float(data.get("ratio", 1.0))
    cut = compaction.plan(system, data["messages"], tools, settings, ratio)
    if cut is not None and cut.count > 0:
        if settings.enabled:
            command_id = loop.issue()
            data["compacting"] = {"command": command_id, "count": cut.count,
                                  "before": cut.before}  # fmt: skip
            loop.walk.commands.append(CallChat(
                command_id, loop.node.id, loop.config.model_provider, loop.config.model,
                compaction.SUMMARY_SYSTEM,
                compaction.summary_request(data["messages"][: cut.count], data.get("summary")),
                [], None, "none", settings.summary_max_tokens, None, loop.frame, loop.path,
            ))  # fmt: skip
            return True
        del data["messages"][: cut.count]
        loop.trace("compaction.applied", mode="dropped", removed=cut.count, before=cut.before,
                   after=cut.after, budget=settings.budget)  # fmt: skip
    _check_fits(loop, system, tools, ratio)
    return False


def _summarized(loop: Loop, event: Done) -> None:
    settings, data = loop.config.compaction, loop.data
    assert settings is not None
    plan = data.pop("compacting")
    if event.usage:
        _usage(loop, event.usage)
    del data["messages"][: plan["count"]]
    detail: dict[str, Any] = {"removed": plan["count"], "before": plan["before"],
                              "budget": settings.budget}  # fmt: skip
    if event.ok and str((event.value or {}).get("content") or "").strip():
        data["summary"] = str(event.value["content"]).strip()
        detail.update(mode="summarized", summary_tokens=(event.usage or {}).get("output_tokens"))
    else:  # no summary: the turns are dropped all the same, and the event says why
        detail.update(mode="dropped", error=(event.error or {}).get("message", "empty summary"))
    ratio = float(data.get("ratio", 1.0))
    size = compaction.count_request(_system(loop), data["messages"], loop.config.definitions())
    detail["after"] = math.ceil(size * ratio)
    loop.trace("compaction.applied", **detail)
    ask_or_fail(loop)


def _check_fits(loop: Loop, system: str, tools: list[dict[str, Any]], ratio: float) -> None:
    settings = loop.config.compaction
    assert settings is not None
    size = math.ceil(compaction.count_request(system, loop.data["messages"], tools) * ratio)
    if size > settings.budget:
        raise NodeFailure(
            f"the request needs about {size} input tokens and max_input_tokens is "
            f"{settings.budget}: even with the older turns compacted, the system prompt, the "
            "tools and the current turn do not fit; raise max_input_tokens or shorten them",
            "budget_exceeded",
        )
