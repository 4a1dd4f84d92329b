"""/api/v1/agents/{id}/conversations and /api/v1/conversations: chat with an agent."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from dhub.api.deps import Ctx, json_body
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.api.routers.runs import Run, run_json, stream_events
from dhub.services.conversations import ConversationView

router = APIRouter(tags=["conversations"], responses=ERROR_RESPONSES)


class Message(BaseModel):
    seq: int
    role: str
    content: str
    run_id: str | None
    created_at: int


class Conversation(BaseModel):
    id: str
    agent_id: str
    user_id: str
    variables: dict[str, Any]
    messages: list[Message]
    created_at: int
    updated_at: int


class ConversationSummary(BaseModel):
    id: str
    agent_id: str
    user_id: str
    variables: dict[str, Any]
    message_count: int
    turn_run_id: str | None
    created_at: int
    updated_at: int


class ConversationList(BaseModel):
    data: list[ConversationSummary]
    next_cursor: str | None


class Say(BaseModel):
    content: str
    stream: bool = False


def conversation_json(view: ConversationView) -> dict[str, Any]:
    record = view.record
    return {
        "id": record.id, "agent_id": record.agent_id, "user_id": record.user_id,
        "variables": record.variables,
        "messages": [
            {"seq": m.seq, "role": m.role, "content": m.content, "run_id": m.run_id,
             "created_at": m.created_at}
            for m in view.messages
        ],
        "created_at": record.created_at, "updated_at": record.updated_at,
    }  # fmt: skip


@router.post("/agents/{agent_id}/conversations", status_code=201, response_model=Conversation)
async def create_conversation(agent_id: str, ctx: Ctx) -> Any:
    """A new conversation with a chat agent (``runner`` scope), its variables at their
    defaults."""
    view = await ctx.svc.conversations.create(ctx.who, agent_id)
    return JSON(conversation_json(view), status_code=201)


@router.get("/conversations", response_model=ConversationList)
async def list_conversations(
    ctx: Ctx,
    agent_id: str | None = Query(None, description="Only the conversations with this agent."),
    limit: int = Query(50, ge=1, le=200, description="Page size."),
    cursor: str | None = Query(None, description="next_cursor of the previous page."),
) -> Any:
    """The caller's own conversations, newest first, without their messages."""
    found, next_cursor = await ctx.svc.conversations.page(ctx.who, agent_id, limit, cursor)
    data = [
        {"id": c.id, "agent_id": c.agent_id, "user_id": c.user_id, "variables": c.variables,
         "message_count": c.message_count, "turn_run_id": c.turn_run_id,
         "created_at": c.created_at, "updated_at": c.updated_at}
        for c in found
    ]  # fmt: skip
    return JSON({"data": data, "next_cursor": next_cursor})


@router.get("/conversations/{conversation_id}", response_model=Conversation)
async def get_conversation(conversation_id: str, ctx: Ctx) -> Any:
    return JSON(conversation_json(await ctx.svc.conversations.get(ctx.who, conversation_id)))


@router.post(
    "/conversations/{conversation_id}/messages",
    status_code=202,
    response_model=Run,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": Say.model_json_schema()}},
        }
    },
)
async def say(conversation_id: str, request: Request, ctx: Ctx) -> Any:
    """Send a message: one run of the agent answers it (202 with the run, or its events as
    SSE when ``stream`` is true); the reply joins the conversation when the run succeeds."""
    body = await json_body(request)
    run = await ctx.svc.conversations.say(ctx.who, conversation_id, body)
    if isinstance(body, dict) and body.get("stream") is True:
        return stream_events(ctx.svc.runs.follow(run.id, 0))
    return JSON(run_json(run), status_code=202, headers={"Location": f"/api/v1/runs/{run.id}"})
