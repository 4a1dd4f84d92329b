"""Agents delegated to over A2A (docs/a2a.md): which agents a caller may delegate to and what
each takes, a message turned into a run of one as the caller, and a task read back or
cancelled for that caller only.

The A2A endpoint (api/a2a.py) speaks the protocol with the SDK; this module holds what it
means, as services/agent_tools.py does for MCP, and goes through the same services as the
HTTP API (``AgentService.runnable``, ``RunService``, ``ConversationService``), so A2A is
never a way around them. A task *is* a dhub run: its id is the run's id and its context the
run's conversation (a chat agent) or the run itself (an event agent). Nothing is kept besides
the runs, so any API process answers for any task, and a task outlives a restart as its run
does.

What a caller may not reach answers as what does not exist: an agent it may not run (marked,
unshared, only readable) as an unknown agent id, a run that is not its own (an admin's or an
agent owner's view of other people's runs included) as an unknown task id.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from dhub.access.principal import Principal
from dhub.domain.errors import Conflict, DhubError, FieldError, Forbidden, InvalidInput, NotFound
from dhub.services.agent_tools import CHAT_SCHEMA, asks_person, input_schema
from dhub.services.agents import AgentService
from dhub.services.conversations import ConversationService
from dhub.services.runs import FINISHED, RunService
from dhub.store.agents import AgentRecord
from dhub.store.runs import RunRecord

_POLL_SECONDS = 0.5  # a run's saved steps wake a wait; this bounds a missed wake-up


class UnknownAgent(NotFound):
    """No agent of that id for this caller: none exists, or the caller may not run it."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"No agent with id '{agent_id}' to delegate to.")


class UnknownTask(NotFound):
    """No task of that id for this caller at this agent: the same for any id it cannot see."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"No task with id '{task_id}'.")
        self.task_id = task_id


class NotCancelable(Conflict):
    """The task's run already ended (or a worker holds it busy)."""


@dataclass(frozen=True, slots=True)
class Delegate:
    """An agent as A2A shows it: its card's name, description and skill."""

    agent_id: str
    name: str
    title: str  # the agent's alias, else its name
    description: str
    version: int
    chat: bool  # a chat agent: a message is one turn of a conversation
    input_schema: dict[str, Any]  # what an event agent's start takes (CHAT_SCHEMA for chat)

    @property
    def text_input(self) -> str | None:
        """The input a plain text message fills for an event agent: a react agent's
        ``message``, else a workflow's one required variable (or its only one) when it is a
        string; None when text cannot say which input it is."""
        properties: dict[str, Any] = self.input_schema.get("properties", {})
        required: list[str] = self.input_schema.get("required", [])
        for candidates in (["message"], required, list(properties)):
            if len(candidates) == 1 and properties.get(candidates[0], {}).get("type") == "string":
                return candidates[0]
        return None


@dataclass(frozen=True, slots=True)
class Ask:
    """A message's content, protocol-free: its text parts joined, its one data part (an
    object), and the context it continues."""

    text: str | None
    data: dict[str, Any] | None
    context_id: str | None


def delegate(record: AgentRecord) -> Delegate:
    spec = orjson.loads(record.document)
    chat = spec.get("input_mode", "chat") == "chat"
    description = str(spec.get("description") or "").strip() or f"Runs the agent '{record.name}'."
    return Delegate(
        agent_id=record.id,
        name=record.name,
        title=str(spec.get("alias") or record.name),
        description=description,
        version=record.version,
        chat=chat,
        input_schema=CHAT_SCHEMA if chat else input_schema(spec),
    )


class A2ATasks:
    def __init__(
        self, agents: AgentService, runs: RunService, conversations: ConversationService
    ) -> None:
        self.agents = agents
        self.runs = runs
        self.conversations = conversations

    async def delegates(self, who: Principal) -> list[Delegate]:
        """The agents the caller may run, in creation order (the MCP tools' set)."""
        return [delegate(record) for record in await self.agents.all_runnable(who)]

    async def delegate(self, who: Principal, agent_id: str) -> Delegate:
        try:
            return delegate(await self.agents.runnable(who, agent_id))
        except (NotFound, Forbidden):  # a viewer's agent, a marked one: as if none
            raise UnknownAgent(agent_id) from None

    async def send(self, who: Principal, agent: Delegate, ask: Ask) -> RunRecord:
        """The run a message starts, as the caller: a turn of a conversation (a new one, or
        the context it names) for a chat agent, a run with the message's inputs for an
        event agent. ``InvalidInput`` names what the message got wrong."""
        if agent.chat:
            message = _chat_message(ask)
            conversation_id = await self._conversation(who, agent, ask.context_id)
            return await self.conversations.say(who, conversation_id, {"content": message})
        return await self.runs.start(who, agent.agent_id, {"inputs": event_inputs(agent, ask)})

    async def _conversation(self, who: Principal, agent: Delegate, context_id: str | None) -> str:
        if context_id is None:
            return (await self.conversations.create(who, agent.agent_id)).record.id
        unknown = InvalidInput([FieldError("/message/contextId", f"No conversation with id "
                                f"'{context_id}' is yours to continue: leave contextId out to "
                                "start a new one.", "unknown_context")])  # fmt: skip
        try:
            view = await self.conversations.get(who, context_id)
        except NotFound:
            raise unknown from None
        if view.record.user_id != who.user_id:  # an admin may read it, not continue it
            raise unknown
        if view.record.agent_id != agent.agent_id:
            raise InvalidInput([FieldError("/message/contextId", f"Conversation "
                                f"'{context_id}' is with agent '{view.record.agent_id}', not "
                                f"'{agent.agent_id}': send it there, or leave contextId out.",
                                "context_mismatch")])  # fmt: skip
        return context_id

    async def task(self, who: Principal, agent: Delegate, task_id: str) -> RunRecord:
        """The run ``task_id`` names, when the caller started it with this agent."""
        try:
            run = await self.runs.get(who, task_id)
        except NotFound:
            raise UnknownTask(task_id) from None
        if run.user_id != who.user_id or run.agent_id != agent.agent_id:
            raise UnknownTask(task_id)
        return run

    async def cancel(self, who: Principal, agent: Delegate, task_id: str) -> RunRecord:
        run = await self.task(who, agent, task_id)
        try:
            return await self.runs.cancel(who, run.id)
        except Conflict as exc:
            raise NotCancelable(exc.detail) from None
        except DhubError:  # lost access meanwhile: as any task it cannot see
            raise UnknownTask(task_id) from None

    async def settled(self, who: Principal, run_id: str, wait_seconds: float) -> RunRecord:
        """The run once it ended or waits for a person, or as it is when the wait is over."""
        deadline = time.monotonic() + wait_seconds
        while True:
            run = await self.runs.get(who, run_id)
            left = deadline - time.monotonic()
            if settles(run) or left <= 0:
                return run
            await self.runs.hub.wait(run_id, min(left, _POLL_SECONDS))

    async def changes(self, who: Principal, run: RunRecord) -> AsyncIterator[RunRecord]:
        """The run each time its status or what it waits for changes (not ``run`` itself),
        until it ends or waits for a person."""
        seen = (run.status, run.waiting)
        if settles(run):
            return
        async for event in self.runs.follow(run.id, run.event_count):
            if event is not None and event.type == "llm.delta":
                continue
            now = await self.runs.get(who, run.id)
            if (now.status, now.waiting) != seen:
                seen = (now.status, now.waiting)
                yield now
            if settles(now):
                return
        now = await self.runs.get(who, run.id)  # it ended before the first event was read
        if (now.status, now.waiting) != seen:
            yield now


def settles(run: RunRecord) -> bool:
    """A run a sender stops waiting for: ended, or waiting for a person."""
    return run.status in FINISHED or asks_person(run)


def _chat_message(ask: Ask) -> str:
    if ask.text is None or not ask.text.strip():
        raise InvalidInput([FieldError("/message/parts", "A chat agent takes a message: send "
                                       "it as a text part.", "missing")])  # fmt: skip
    return ask.text


def event_inputs(agent: Delegate, ask: Ask) -> dict[str, Any]:
    """An event agent's start inputs: the message's data part, else its text when that is a
    JSON object, else the text as the one input plain text fills (``text_input``)."""
    if ask.data is not None:
        return ask.data
    text = (ask.text or "").strip()
    if not text:
        return {}  # the start checks what is required, naming each missing input
    if text.startswith("{"):
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    if agent.text_input is not None:
        return {agent.text_input: ask.text}
    names = ", ".join(agent.input_schema.get("properties", {})) or "none"
    raise InvalidInput([FieldError("/message/parts", f"Agent '{agent.name}' takes its inputs "
                                   f"({names}) as a JSON object: send them in a data part.",
                                   "inputs_expected")])  # fmt: skip
