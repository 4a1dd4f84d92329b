"""/v1: the OpenAI-compatible API (docs/openai.md), so OpenAI's clients talk to dhub's agents
unchanged. Models are the chat agents the caller may run; a chat completion or a response is
one turn of a conversation. Errors under /v1 take OpenAI's shape (api/errors.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from dhub.api.deps import Ctx, json_body
from dhub.api.openai_shapes import (
    CONVERSATION_HEADER,
    ChatShapes,
    ResponseShapes,
    model_json,
    openai_error,
    sse,
)
from dhub.api.responses import JSON
from dhub.services import openai_requests
from dhub.services.openai_compat import Outcome, Turn

router = APIRouter(tags=["openai"])

_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": True}}}}}  # fmt: skip


@router.get("/models")
async def list_models(ctx: Ctx) -> Any:
    """The chat agents the caller may run, as OpenAI models (``id``: the agent's name, or
    its id when several such agents share the name)."""
    found = await ctx.svc.openai.models(ctx.who)
    return JSON({"object": "list", "data": [model_json(m) for m in found]})


@router.get("/models/{model}")
async def get_model(model: str, ctx: Ctx) -> Any:
    return JSON(model_json(await ctx.svc.openai.model(ctx.who, model)))


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _headers(turn: Turn) -> dict[str, str]:
    return {CONVERSATION_HEADER: turn.conversation_id, "X-Dhub-Run": turn.run.id}


@router.post("/chat/completions", openapi_extra=_BODY)
async def chat_completions(request: Request, ctx: Ctx) -> Any:
    """One turn: the last user message goes to the agent named by ``model``, in a new
    conversation or the one named by the X-Dhub-Conversation header (or ``user``)."""
    ask = openai_requests.chat_completion(
        await json_body(request), request.headers.get(CONVERSATION_HEADER)
    )
    turn = await ctx.svc.openai.start(ctx.who, ask)
    shapes = ChatShapes(turn)
    base = _base(request)
    if not ask.stream:
        outcome = await ctx.svc.openai.answer(ctx.who, turn, base)
        if _failed(outcome):
            return _failure(outcome, turn)
        return JSON(shapes.completion(outcome), headers=_headers(turn))

    async def lines() -> AsyncIterator[bytes]:
        yield sse(shapes.chunk({"role": "assistant", "content": ""}))
        async for outcome in ctx.svc.openai.follow(ctx.who, turn, base):
            if outcome is None:
                yield b": keep-alive\n\n"
            elif _failed(outcome):
                yield sse(_failure_body(outcome))
            else:
                yield sse(shapes.chunk({"content": outcome.text}))
                yield sse(shapes.chunk({}, "stop"))
                if ask.include_usage:
                    yield sse(shapes.usage_chunk(outcome))
        yield b"data: [DONE]\n\n"

    return _stream(lines(), turn)


@router.post("/responses", openapi_extra=_BODY)
async def responses(request: Request, ctx: Ctx) -> Any:
    """One turn: ``input`` (its last user message) goes to the agent named by ``model``, in a
    new conversation or the one ``previous_response_id`` (or X-Dhub-Conversation) names."""
    ask = openai_requests.response(
        await json_body(request), request.headers.get(CONVERSATION_HEADER)
    )
    turn = await ctx.svc.openai.start(ctx.who, ask)
    shapes = ResponseShapes(turn, ask.previous_response_id)
    base = _base(request)
    if not ask.stream:
        outcome = await ctx.svc.openai.answer(ctx.who, turn, base)
        if _failed(outcome):
            return _failure(outcome, turn)
        return JSON(shapes.response(outcome), headers=_headers(turn))

    async def lines() -> AsyncIterator[bytes]:
        for event in shapes.opening():
            yield sse(event, event["type"])
        async for outcome in ctx.svc.openai.follow(ctx.who, turn, base):
            if outcome is None:
                yield b": keep-alive\n\n"
                continue
            events = shapes.failure(outcome) if _failed(outcome) else shapes.closing(outcome)
            for event in events:
                yield sse(event, event["type"])

    return _stream(lines(), turn)


def _failed(outcome: Outcome) -> bool:
    return outcome.status in ("failed", "cancelled")


def _failure_body(outcome: Outcome) -> dict[str, Any]:
    return openai_error(outcome.text, "server_error", None, f"run_{outcome.status}")


def _failure(outcome: Outcome, turn: Turn) -> JSON:
    """A turn whose run failed: a server error the client must not retry (a retry would be
    another turn), as OpenAI's clients read ``x-should-retry``."""
    headers = {**_headers(turn), "x-should-retry": "false"}
    return JSON(_failure_body(outcome), status_code=500, headers=headers)


def _stream(lines: AsyncIterator[bytes], turn: Turn) -> StreamingResponse:
    headers = {"Cache-Control": "no-store", **_headers(turn)}
    return StreamingResponse(lines, media_type="text/event-stream", headers=headers)
