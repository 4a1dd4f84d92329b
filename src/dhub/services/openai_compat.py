"""The OpenAI-compatible API's use cases (docs/openai.md): which agents are models, and a
turn of a chat agent's conversation asked as a chat completion or a response.

A model is an agent the caller may run (the one access policy): named by its id, or by its
name when no other agent the caller may run has that name. An agent the caller cannot run is
answered exactly as one that does not exist (``UnknownModel``). A turn is a message of the
conversation service (services/conversations.py): a new conversation, or the one the request
names; its answer is the run's reply once it ends, or a note saying where to answer when it
waits for a person.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from dhub.access.principal import Principal
from dhub.domain.errors import FieldError, Forbidden, InvalidInput, NotFound
from dhub.runtime.run_writer import chat_reply
from dhub.services.agents import AgentService
from dhub.services.conversations import ConversationService
from dhub.services.openai_requests import CONVERSATION_PREFIX, RESPONSE_PREFIX, Ask
from dhub.services.runs import FINISHED, RunService
from dhub.store import conversations as chats
from dhub.store import runs as store
from dhub.store.agents import AgentFilter, AgentRecord
from dhub.store.runs import RunRecord

_PAGE = 200
_PEOPLE = ("input", "confirmation")  # what a run may wait for that only a person gives


class UnknownModel(NotFound):
    """The model is no agent the caller may run: the same answer whether it exists or not."""

    param = "model"
    code = "model_not_found"

    def __init__(self, model: str) -> None:
        super().__init__(f"The model '{model}' does not exist or you do not have access to it.")


class UnknownConversation(NotFound):
    code = "conversation_not_found"

    def __init__(self, param: str, given: str) -> None:
        super().__init__(f"No conversation or response with id '{given}' is yours to continue.")
        self.param = param


@dataclass(frozen=True, slots=True)
class Model:
    id: str  # how the caller names it: its name when unique among its models, else its id
    agent: AgentRecord

    @property
    def owned_by(self) -> str:
        return "dhub" if self.agent.is_builtin else self.agent.created_by


@dataclass(frozen=True, slots=True)
class Turn:
    """A turn started: the run answering it, in which conversation, for which model."""

    run: RunRecord
    conversation_id: str
    model: str  # as the request named it


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a turn ended, or that it waits for a person (``status`` is then ``waiting``)."""

    status: str  # succeeded, failed, cancelled, waiting
    text: str  # the reply; what went wrong; or where to answer
    usage: dict[str, Any]
    run: RunRecord


def _input_mode(agent: AgentRecord) -> str:
    mode = orjson.loads(agent.document).get("input_mode", "chat")
    return str(mode)


class OpenAICompatService:
    def __init__(
        self, agents: AgentService, runs: RunService, conversations: ConversationService
    ) -> None:
        self.agents = agents
        self.runs = runs
        self.conversations = conversations

    async def _runnable(self, who: Principal, flt: AgentFilter) -> list[AgentRecord]:
        found: list[AgentRecord] = []
        cursor: str | None = None
        while True:
            page = await self.agents.page(who, flt, _PAGE, cursor, action="run")
            found += [view.record for view in page.data]
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    async def models(self, who: Principal) -> list[Model]:
        """The chat agents the caller may run (event agents take events, not messages), each
        by its name, or by its id when several agents the caller may run share the name."""
        every = await self._runnable(who, AgentFilter())
        names = Counter(agent.name for agent in every)
        return [
            Model(agent.name if names[agent.name] == 1 else agent.id, agent)
            for agent in every
            if _input_mode(agent) == "chat"
        ]

    async def model(self, who: Principal, model: str) -> Model:
        """The chat agent ``model`` names (its id, or a name only it has)."""
        try:
            agent = await self.agents.runnable(who, model)
        except (NotFound, Forbidden):  # cannot run it: as if it did not exist
            agent = await self._by_name(who, model)
        if _input_mode(agent) != "chat":
            message = (
                f"The model '{model}' is an agent that takes events, not chat messages: send "
                f"it events (POST /api/v1/agents/{agent.id}/events)."
            )
            raise InvalidInput([FieldError("/model", message, "model_not_chat")])
        return Model(model, agent)

    async def _by_name(self, who: Principal, name: str) -> AgentRecord:
        found = await self._runnable(who, AgentFilter(name=name))
        if not found:
            raise UnknownModel(name)
        if len(found) > 1:
            ids = ", ".join(agent.id for agent in found)
            message = f"Several agents you may run are named '{name}': name one by id ({ids})."
            raise InvalidInput([FieldError("/model", message, "ambiguous_model")])
        return found[0]

    async def start(self, who: Principal, ask: Ask) -> Turn:
        """The run that answers ``ask``: a message of the conversation it continues, else of
        a new conversation with the model's agent."""
        model = await self.model(who, ask.model)
        conversation_id = await self._continued(who, ask, model.agent.id)
        if conversation_id is None:
            conversation_id = (await self.conversations.create(who, model.agent.id)).record.id
        run = await self.conversations.say(who, conversation_id, {"content": ask.text})
        return Turn(run, conversation_id, ask.model)

    async def _continued(self, who: Principal, ask: Ask, agent_id: str) -> str | None:
        if ask.previous_response_id is not None:
            param, given = "previous_response_id", ask.previous_response_id
            conversation_id = await self._of_response(who, given)
        elif ask.conversation_id is not None:
            param, given = "conversation", ask.conversation_id
            conversation_id = given
        else:
            return None
        if not conversation_id.startswith(CONVERSATION_PREFIX):
            raise UnknownConversation(param, given)
        # The conversation's row only, not its messages: ``say`` reads them (and checks it all
        # again) for the turn; reading them here too cost as much as the rest of the request.
        async with self.conversations.db.read() as conn:
            found = await chats.get_conversation(conn, conversation_id)
        if found is None or found.user_id != who.user_id:  # an admin may read it, not continue it
            raise UnknownConversation(param, given)
        if found.agent_id != agent_id:
            try:  # name its agent only to a caller who may still read it (as ``get`` checks)
                await self.conversations.get(who, conversation_id)
            except NotFound:
                raise UnknownConversation(param, given) from None
            message = (
                f"Conversation '{conversation_id}' is with agent '{found.agent_id}', "
                f"not with the model '{ask.model}': name that agent as the model, or start a "
                "new conversation."
            )
            raise InvalidInput([FieldError(f"/{param}", message, "conversation_mismatch")])
        return conversation_id  # with the model's agent, which the caller may run (so read)

    async def _of_response(self, who: Principal, response_id: str) -> str:
        run_id = response_id.removeprefix(RESPONSE_PREFIX)
        try:
            run = await self.runs.get(who, run_id)
        except NotFound:
            raise UnknownConversation("previous_response_id", response_id) from None
        if run.conversation_id is None or run.user_id != who.user_id:
            raise UnknownConversation("previous_response_id", response_id)
        return run.conversation_id

    async def follow(self, who: Principal, turn: Turn, base: str) -> AsyncIterator[Outcome | None]:
        """``None`` now and then while the turn runs (a stream's keep-alive), then its
        Outcome: when the run ends, or when it waits for a person (``base``: the server's
        URL, to say where to answer)."""
        run_id = turn.run.id
        async for event in self.runs.follow(run_id, 0):
            if event is not None and event.type == "llm.delta":
                continue
            # The run's row alone after each event (the access check and the policy's reads
            # cost more than the row): the caller's access is checked again for the outcome.
            async with self.runs.db.read() as conn:
                row = await store.get_run(conn, run_id)
            if row is None or _settled(row):
                run = await self.runs.get(who, run_id)
                if _settled(run):
                    yield _outcome(run, base)
                    return
            if event is None:
                yield None
        yield _outcome(await self.runs.get(who, run_id), base)

    async def answer(self, who: Principal, turn: Turn, base: str) -> Outcome:
        async for outcome in self.follow(who, turn, base):
            if outcome is not None:
                return outcome
        raise AssertionError("follow ends with an outcome")  # pragma: no cover


def _settled(run: RunRecord) -> bool:
    return run.status in FINISHED or _waits_for_person(run)


def _waits_for_person(run: RunRecord) -> bool:
    return run.status == "waiting" and (run.waiting or {}).get("for") in _PEOPLE


def _outcome(run: RunRecord, base: str) -> Outcome:
    usage = run.usage or {}
    if run.status == "succeeded":
        return Outcome("succeeded", chat_reply(run.outputs or {}), usage, run)
    if _waits_for_person(run):
        waiting = run.waiting or {}
        if waiting.get("for") == "input":
            what, path = "your input", f"inputs/{waiting.get('node_id')}"
        else:
            what, path = "a confirmation", f"confirmations/{waiting.get('command_id')}"
        text = (
            f"This turn waits for {what}: answer it in the console at {base}/#/runs/{run.id}, "
            f"or with POST {base}/api/v1/runs/{run.id}/{path} (GET {base}/api/v1/tasks lists "
            "it). The reply joins this conversation when the run ends."
        )
        return Outcome("waiting", text, usage, run)
    error = run.error or {}
    where = f"node '{error['node_id']}' failed" if error.get("node_id") else f"run {run.status}"
    text = f"Run '{run.id}' {where}: {error.get('message') or run.status}"
    return Outcome(run.status, text, usage, run)
