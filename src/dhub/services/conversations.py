"""Conversations of chat agents (input mode ``chat``, DESIGN.md 1, 3.1).

A conversation holds its messages and the agent's ``conversations`` variables (initialised from
their defaults). Each user message is one run of the agent (a *turn*): the message is
``sys.message`` (and the start variable ``message``, when the start node declares one), the
conversation's variables are ``conversation.<name>``; when the turn succeeds its reply (the output
named ``answer``, else the only text output) and the variables as the run left them are saved
with the run's last step. A conversation is its user's (admins may read any).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import MISSING

from dhub.access.principal import Principal
from dhub.domain.agent import ConversationVariable
from dhub.domain.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from dhub.domain.ids import new_id, now_ms
from dhub.services.runs import FINISHED, RunService
from dhub.store import conversations as chats
from dhub.store import runs as store
from dhub.store.db import Database


@dataclass(frozen=True)
class ConversationView:
    record: chats.ConversationRecord
    messages: list[chats.MessageRecord]


class ConversationService:
    def __init__(self, db: Database, runs: RunService) -> None:
        self.db = db
        self.runs = runs

    async def create(self, who: Principal, agent_id: str) -> ConversationView:
        record, document = await self.runs.agents.for_run(who, agent_id, None)
        spec = orjson.loads(document)
        if spec.get("input_mode", "chat") != "chat":
            message = f"Agent '{agent_id}' takes events, not chat messages: send it events."
            raise InvalidInput([FieldError("", message, "input_mode")])
        variables = {
            v.name: None if v.default is MISSING else v.default
            for v in map(ConversationVariable.model_validate, spec.get("conversations", []))
        }
        at = now_ms()
        conversation = chats.ConversationRecord(
            new_id("conversation"), record.id, who.user_id, variables, 0, None, at, at
        )
        async with self.db.write() as conn:
            await chats.insert_conversation(conn, conversation)
        return ConversationView(conversation, [])

    async def get(self, who: Principal, conversation_id: str) -> ConversationView:
        """A conversation is read by its user (admins too) while they may read its agent:
        it belongs to both (DESIGN.md 2), so the agent's markings hide it as well."""
        missing = NotFound(f"No conversation with id '{conversation_id}'.")
        async with self.db.read(snapshot=True) as conn:
            found = await chats.get_conversation(conn, conversation_id)
            if found is None or not (found.user_id == who.user_id or who.is_admin):
                raise missing
            messages = await chats.messages(conn, conversation_id)
        try:
            await self.runs.agents.readable(who, found.agent_id)
        except NotFound:
            raise missing from None
        return ConversationView(found, messages)

    async def page(
        self, who: Principal, agent_id: str | None, limit: int, cursor: str | None
    ) -> tuple[list[chats.ConversationRecord], str | None]:
        """The caller's own conversations, newest first, with agents it may still read (the
        others are left out, as ``get`` would refuse them); the next page's cursor, always
        the id of a conversation on this page (never of one left out)."""
        if agent_id is not None:
            await self.runs.agents.readable(who, agent_id)
        readable: dict[str, bool] = {}
        shown: list[chats.ConversationRecord] = []
        after, more = cursor, True
        while more and len(shown) <= limit:
            async with self.db.read() as conn:
                found = await chats.list_for_user(conn, who.user_id, agent_id, after, limit + 1)
            more = len(found) > limit
            found = found[:limit]
            for agent in {c.agent_id for c in found} - readable.keys():
                readable[agent] = await self._readable(who, agent)
            shown += [c for c in found if readable[c.agent_id]]
            after = found[-1].id if found else after
        if len(shown) > limit:
            return shown[:limit], shown[limit - 1].id
        return shown, None

    async def _readable(self, who: Principal, agent_id: str) -> bool:
        try:
            await self.runs.agents.readable(who, agent_id)
        except NotFound:
            return False
        return True

    async def say(self, who: Principal, conversation_id: str, body: Any) -> store.RunRecord:
        """One turn: the run that answers the message."""
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput([FieldError("/content", "content (the message text) is "
                                           "required.", "missing")])  # fmt: skip
        view = await self.get(who, conversation_id)
        conversation = view.record
        if conversation.user_id != who.user_id:  # an admin reading someone else's
            raise Forbidden(
                f"Conversation '{conversation_id}' is {conversation.user_id}'s: only they may "
                "send it messages; start a conversation of your own."
            )
        if conversation.turn_run_id is not None:
            async with self.db.read() as conn:
                turn = await store.get_run(conn, conversation.turn_run_id)
            if turn is not None and turn.status not in FINISHED:
                raise Conflict(
                    f"Conversation '{conversation_id}' is still answering the last message "
                    f"(run '{turn.id}', {turn.status}); send the next one when it is done."
                )
        return await self.runs.launch(
            who, conversation.agent_id, {}, None, None, {"message": content},
            (conversation.id, dict(conversation.variables), conversation.turn_run_id),
        )  # fmt: skip
