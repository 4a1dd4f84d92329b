"""Conversations: rows and messages. Repository functions only flush; services commit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, select, update

from dhub.store.db import Conn
from dhub.store.tables import conversation_messages, conversations


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    id: str
    agent_id: str
    user_id: str
    variables: dict[str, Any]
    message_count: int
    turn_run_id: str | None
    created_at: int
    updated_at: int
    # A react agent's transcript after its last turn ({messages, summary}): tool calls and
    # all, compacted; the next turn starts from it.
    transcript: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MessageRecord:
    seq: int
    role: str
    content: str
    run_id: str | None
    created_at: int


_COLUMNS = (
    conversations.c.id, conversations.c.agent_id, conversations.c.user_id,
    conversations.c.variables, conversations.c.message_count, conversations.c.turn_run_id,
    conversations.c.created_at, conversations.c.updated_at, conversations.c.transcript,
)  # fmt: skip


async def insert_conversation(conn: Conn, record: ConversationRecord) -> None:
    await conn.execute(
        insert(conversations).values(
            id=record.id, agent_id=record.agent_id, user_id=record.user_id,
            variables=record.variables, message_count=0, turn_run_id=None,
            created_at=record.created_at, updated_at=record.updated_at,
        )
    )  # fmt: skip


async def get_conversation(conn: Conn, conversation_id: str) -> ConversationRecord | None:
    # Statements built once (as store/runs.py's): every chat turn reads both (bench/README.md).
    row = (await conn.execute(_GET, {"conversation_id": conversation_id})).first()
    return ConversationRecord(*row) if row else None


async def list_for_user(
    conn: Conn, user_id: str, agent_id: str | None, before: str | None, limit: int
) -> list[ConversationRecord]:
    """A user's conversations, newest first (ids grow with time), after the cursor
    ``before`` (an id), optionally only with one agent."""
    stmt = select(*_COLUMNS).where(conversations.c.user_id == user_id)
    if agent_id is not None:
        stmt = stmt.where(conversations.c.agent_id == agent_id)
    if before is not None:
        stmt = stmt.where(conversations.c.id < before)
    rows = await conn.execute(stmt.order_by(conversations.c.id.desc()).limit(limit))
    return [ConversationRecord(*row) for row in rows]


async def messages(conn: Conn, conversation_id: str) -> list[MessageRecord]:
    rows = await conn.execute(_MESSAGES, {"conversation_id": conversation_id})
    return [MessageRecord(*row) for row in rows]


_GET = select(*_COLUMNS).where(conversations.c.id == bindparam("conversation_id"))
_M = conversation_messages.c
_MESSAGES = (
    select(_M.seq, _M.role, _M.content, _M.run_id, _M.created_at)
    .where(_M.conversation_id == bindparam("conversation_id"))
    .order_by(_M.seq)
)


async def take_turn(conn: Conn, conversation_id: str, run_id: str, after: str | None) -> bool:
    """Make ``run_id`` the conversation's turn if its turn is still ``after`` (the one the
    caller saw ended); False when another turn took it meanwhile."""
    stmt = (
        update(conversations)
        .where(
            conversations.c.id == conversation_id,
            conversations.c.turn_run_id.is_not_distinct_from(after),
        )
        .values(turn_run_id=run_id)
    )
    return (await conn.execute(stmt)).rowcount == 1


async def add_message(
    conn: Conn,
    conversation_id: str,
    role: str,
    content: str,
    run_id: str | None,
    at: int,
    *,
    variables: dict[str, Any] | None = None,
    turn_run_id: str | None = None,
    transcript: dict[str, Any] | None = None,
) -> int:
    """Append a message (its seq follows the conversation's count, taken under the row's
    write lock) and, with it, the conversation's new variables, the turn's run, or a react
    agent's transcript."""
    values: dict[str, Any] = {
        "message_count": conversations.c.message_count + 1,
        "updated_at": at,
    }
    if variables is not None:
        values["variables"] = variables
    if turn_run_id is not None:
        values["turn_run_id"] = turn_run_id
    if transcript is not None:
        values["transcript"] = transcript
    row = (
        await conn.execute(
            update(conversations)
            .where(conversations.c.id == conversation_id)
            .values(values)
            .returning(conversations.c.message_count)
        )
    ).first()
    if row is None:
        raise LookupError(f"no conversation {conversation_id}")
    seq = int(row[0])
    await conn.execute(
        insert(conversation_messages).values(
            conversation_id=conversation_id, seq=seq, role=role, content=content,
            run_id=run_id, created_at=at,
        )
    )  # fmt: skip
    return seq
