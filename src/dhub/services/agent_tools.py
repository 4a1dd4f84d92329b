"""Agents as tools (docs/mcp.md): the agents a caller may run, each with a tool name, a
description and an input schema, and a call that runs one as the caller and waits for it.

The MCP endpoint (api/mcp.py) speaks the protocol; this module holds what it means. A caller
sees exactly the agents ``AgentService.all_runnable`` gives it (the one access policy, markings
included) and a call goes through the same services as the HTTP API (``RunService.start``,
``ConversationService``), so a tool is never a way around them. A tool name the caller's list
does not hold is unknown, whether no agent has it or the caller may not run the one that does.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from dhub.access.principal import Principal
from dhub.domain.errors import DhubError, FieldError, InvalidInput
from dhub.services.agents import AgentService
from dhub.services.conversations import ConversationService
from dhub.services.runs import FINISHED, RunService
from dhub.store.agents import AgentRecord
from dhub.store.runs import RunRecord

MAX_NAME = 128  # the longest tool name MCP clients accept
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")  # what a tool name may not hold (MCP tool names)
_JSON_TYPES = {
    "string": "string", "number": "number", "boolean": "boolean", "object": "object",
    "array": "array",
}  # fmt: skip
CHAT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The message to the agent."},
        "conversation_id": {
            "type": "string",
            "description": "Continue this conversation (the conversation_id of an earlier "
            "answer); leave out to start a new one.",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}
_REACT_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to do."}},
}
WAIT_SECONDS = 300.0  # how long a call waits for its run before answering that it still runs
_POLL_SECONDS = 0.5  # a run's saved steps wake the wait; this bounds a missed wake-up


class UnknownTool(Exception):
    """No tool of that name for this caller: none exists, or the caller may not run it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: '{name[:MAX_NAME]}'.")


@dataclass(frozen=True, slots=True)
class AgentTool:
    name: str
    agent_id: str
    title: str | None
    description: str
    input_schema: dict[str, Any]
    chat: bool  # a chat agent: a call is one turn of a conversation


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a call answers: ``text`` for the model, ``result`` as structured content."""

    text: str
    result: dict[str, Any] = field(default_factory=dict)
    error: bool = False


class AgentTools:
    def __init__(
        self,
        agents: AgentService,
        runs: RunService,
        conversations: ConversationService,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self.agents = agents
        self.runs = runs
        self.conversations = conversations
        self.wait_seconds = wait_seconds

    async def tools(self, who: Principal) -> list[AgentTool]:
        """The caller's runnable agents as tools, in the agents' creation order."""
        records = await self.agents.all_runnable(who)
        names = tool_names([(r.id, r.name) for r in records])
        return [_tool(record, names[record.id]) for record in records]

    async def find(self, who: Principal, name: str) -> AgentTool:
        """The tool ``name``: names come from every runnable agent (a clash appends ids), the
        schema only from the one called."""
        records = await self.agents.all_runnable(who)
        names = tool_names([(r.id, r.name) for r in records])
        for record in records:
            if names[record.id] == name:
                return _tool(record, name)
        raise UnknownTool(name)

    async def call(
        self, who: Principal, name: str, arguments: dict[str, Any], base_url: str
    ) -> ToolOutcome:
        """Run the agent as the caller and wait for it (``wait_seconds`` at most). What the
        caller got wrong (inputs, a conversation) is a failed call naming it, as is a failed
        run; a run that waits for a person answers where to answer it."""
        tool = await self.find(who, name)
        conversation_id: str | None = None
        try:
            if tool.chat:
                run, conversation_id = await self._say(who, tool, arguments)
            else:
                run = await self.runs.start(who, tool.agent_id, {"inputs": arguments})
            run = await self._settled(who, run.id)
        except InvalidInput as exc:
            messages = [f"{e.loc or '/'}: {e.message}" for e in exc.errors] or [exc.detail]
            errors = [e.as_dict() for e in exc.errors]
            return ToolOutcome("\n".join(messages), {"errors": errors}, error=True)
        except DhubError as exc:
            return ToolOutcome(exc.detail, {}, error=True)  # e.g. access lost meanwhile
        return outcome(run, conversation_id, base_url)

    async def _say(
        self, who: Principal, tool: AgentTool, arguments: dict[str, Any]
    ) -> tuple[RunRecord, str]:
        message, conversation_id = _chat_arguments(arguments)
        if conversation_id is None:
            conversation_id = (await self.conversations.create(who, tool.agent_id)).record.id
        else:
            view = await self.conversations.get(who, conversation_id)
            if view.record.agent_id != tool.agent_id:
                raise InvalidInput([FieldError(
                    "/conversation_id", f"Conversation '{conversation_id}' is with another "
                    f"agent, not '{tool.name}'.", "invalid_conversation")])  # fmt: skip
        run = await self.conversations.say(who, conversation_id, {"content": message})
        return run, conversation_id

    async def _settled(self, who: Principal, run_id: str) -> RunRecord:
        """The run once it ended or waits for a person, or as it is when the wait is over."""
        deadline = time.monotonic() + self.wait_seconds
        while True:
            run = await self.runs.get(who, run_id)
            left = deadline - time.monotonic()
            if run.status in FINISHED or asks_person(run) or left <= 0:
                return run
            await self.runs.hub.wait(run_id, min(left, _POLL_SECONDS))


def tool_names(agents: list[tuple[str, str]]) -> dict[str, str]:
    """A tool name for each (agent id, agent name): the name with what MCP does not allow in
    a tool name replaced by ``_``; when two agents would share one, each of them gets its id
    appended (``name__<id>``), so a name never depends on the order agents are listed in."""
    bases = {agent_id: _base(name) for agent_id, name in agents}
    counts = Counter(bases.values())
    names = {
        agent_id: base if counts[base] == 1 else _suffixed(base, agent_id)
        for agent_id, base in bases.items()
    }
    taken = Counter(names.values())  # a plain name can still equal another's suffixed one
    return {
        agent_id: name if taken[name] == 1 else _suffixed(bases[agent_id], agent_id)
        for agent_id, name in names.items()
    }


def _base(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("_")[:MAX_NAME] or "agent"


def _suffixed(base: str, agent_id: str) -> str:
    suffix = "__" + _UNSAFE.sub("_", agent_id.removeprefix("agent."))
    return base[: max(1, MAX_NAME - len(suffix))] + suffix


def _tool(record: AgentRecord, name: str) -> AgentTool:
    spec = orjson.loads(record.document)
    chat = spec.get("input_mode", "chat") == "chat"
    description = str(spec.get("description") or "").strip() or f"Runs the agent '{record.name}'."
    return AgentTool(
        name=name,
        agent_id=record.id,
        title=spec.get("alias") or record.name,
        description=description,
        input_schema=CHAT_SCHEMA if chat else input_schema(spec),
        chat=chat,
    )


def input_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema of an event agent's start variables (a react agent's: its message)."""
    if spec.get("mode", "react") != "workflow":
        return _REACT_EVENT_SCHEMA
    start = next((n for n in spec.get("nodes", []) if n.get("type") == "start"), None)
    variables = (start or {}).get("config", {}).get("variables", [])
    properties: dict[str, Any] = {}
    required: list[str] = []
    for variable in variables:
        prop: dict[str, Any] = {"type": _JSON_TYPES.get(variable.get("type"), "string")}
        if variable.get("description"):
            prop["description"] = variable["description"]
        if "default" in variable:
            prop["default"] = variable["default"]
        elif variable.get("required", True):
            required.append(variable["name"])
        properties[variable["name"]] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _chat_arguments(arguments: dict[str, Any]) -> tuple[str, str | None]:
    errors = [
        FieldError(f"/{k}", f"Unknown argument '{k}': a chat agent takes message and "
                   "conversation_id.", "unknown_field")
        for k in sorted(set(arguments) - {"message", "conversation_id"})
    ]  # fmt: skip
    message, conversation_id = arguments.get("message"), arguments.get("conversation_id")
    if not isinstance(message, str) or not message.strip():
        errors.append(FieldError("/message", "message (the text) is required.", "missing"))
    if conversation_id is not None and not isinstance(conversation_id, str):
        errors.append(FieldError("/conversation_id", "conversation_id should be a string.",
                                 "type"))  # fmt: skip
    if errors:
        raise InvalidInput(errors)
    return str(message), conversation_id


def asks_person(run: RunRecord) -> bool:
    return run.status == "waiting" and (run.waiting or {}).get("for") in (
        "input",
        "confirmation",
    )


def outcome(run: RunRecord, conversation_id: str | None, base_url: str) -> ToolOutcome:
    """The answer to a call whose run ``run`` is now."""
    run_url = f"{base_url}/api/v1/runs/{run.id}"
    result: dict[str, Any] = {"run_id": run.id, "status": run.status}
    if conversation_id is not None:
        result["conversation_id"] = conversation_id
    if run.status == "succeeded":
        result["outputs"] = run.outputs or {}
        return ToolOutcome(_json(result), result)
    if run.status in FINISHED:
        error = run.error or {}
        result["error"] = error
        why = error.get("message")
        text = f"Run '{run.id}' {run.status}: {why}" if why else f"Run '{run.id}' was {run.status}."
        return ToolOutcome(text, result, error=True)
    result["run_url"] = run_url
    if asks_person(run):
        waiting = run.waiting or {}
        result["waiting"] = waiting
        result["answer_url"] = _answer_url(run_url, waiting)
        result["tasks_url"] = f"{base_url}/api/v1/tasks"
        text = (
            f"Run '{run.id}' waits for a person's {waiting.get('for')} at node "
            f"'{waiting.get('node_id')}': answer it at POST {result['answer_url']} (or in the "
            f"console's tasks), then read the run at {run_url}.\n{_json(result)}"
        )
        return ToolOutcome(text, result)
    text = f"Run '{run.id}' is still {run.status}; read it at {run_url}.\n{_json(result)}"
    return ToolOutcome(text, result)


def _answer_url(run_url: str, waiting: dict[str, Any]) -> str:
    if waiting.get("for") == "confirmation":
        return f"{run_url}/confirmations/{waiting.get('command_id')}"
    return f"{run_url}/inputs/{waiting.get('node_id')}"


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
