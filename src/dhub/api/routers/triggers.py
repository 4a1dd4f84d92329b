"""Triggers (docs/triggers.md): ``/api/v1/agents/{id}/triggers`` for the agent's editors, and
``POST /hooks/{trigger_id}``, the webhooks' public URL (no bearer token: the signature is the
credential)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dhub.api.deps import Ctx, Services, check_parameters, json_body
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.domain.errors import TooLarge
from dhub.domain.triggers import (
    DELIVERY_HEADER,
    MAX_BODY_BYTES,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)
from dhub.services.triggers import TriggerView
from dhub.services.types import TriggerEvent

router = APIRouter(prefix="/agents/{agent_id}/triggers", tags=["triggers"],
                   responses=ERROR_RESPONSES)  # fmt: skip
hooks = APIRouter(tags=["triggers"])


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _shown(view: TriggerView, request: Request) -> dict[str, Any]:
    return view.json(_base(request))


@router.get("", name="list_triggers", summary="An agent's triggers (its editors)")
async def list_triggers(agent_id: str, request: Request, ctx: Ctx) -> Response:
    found = await ctx.svc.triggers.all(ctx.who, agent_id)
    return JSON({"data": [_shown(v, request) for v in found]})


@router.post(
    "",
    status_code=201,
    name="create_trigger",
    summary="Create a webhook or a schedule that starts the agent's runs as you",
)
async def create_trigger(agent_id: str, request: Request, ctx: Ctx) -> Response:
    """A webhook's answer carries its ``secret``, shown this once (rotate it to see another)."""
    view = await ctx.svc.triggers.create(ctx.who, agent_id, await json_body(request))
    location = f"/api/v1/agents/{agent_id}/triggers/{view.record.id}"
    return JSON(_shown(view, request), status_code=201, headers={"Location": location})


@router.get("/{trigger_id}", name="get_trigger", summary="A trigger")
async def get_trigger(agent_id: str, trigger_id: str, request: Request, ctx: Ctx) -> Response:
    return JSON(_shown(await ctx.svc.triggers.get(ctx.who, agent_id, trigger_id), request))


@router.patch("/{trigger_id}", name="update_trigger", summary="Change a trigger (merge patch)")
async def update_trigger(agent_id: str, trigger_id: str, request: Request, ctx: Ctx) -> Response:
    """Enabling a stopped trigger makes you the user its runs are for."""
    patch = await json_body(request)
    view = await ctx.svc.triggers.update(ctx.who, agent_id, trigger_id, patch)
    return JSON(_shown(view, request))


@router.delete("/{trigger_id}", status_code=204, name="delete_trigger", summary="Delete it")
async def delete_trigger(agent_id: str, trigger_id: str, ctx: Ctx) -> Response:
    await ctx.svc.triggers.delete(ctx.who, agent_id, trigger_id)
    return Response(status_code=204)


@router.post(
    "/{trigger_id}/rotate-secret",
    name="rotate_trigger_secret",
    summary="A new webhook secret, shown once; the old one stops working",
)
async def rotate_secret(agent_id: str, trigger_id: str, request: Request, ctx: Ctx) -> Response:
    view = await ctx.svc.triggers.rotate_secret(ctx.who, agent_id, trigger_id)
    return JSON(_shown(view, request))


@router.get(
    "/{trigger_id}/history",
    name="trigger_history",
    summary="Each delivery or tick, newest first: its run, or why it was refused",
)
async def history(
    agent_id: str,
    trigger_id: str,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[str | None, Query(max_length=64, description="An event id.")] = None,
) -> Response:
    found = await ctx.svc.triggers.history(ctx.who, agent_id, trigger_id, before, limit)
    data = [_event(e) for e in found]
    more = data[-1]["id"] if len(data) == limit else None
    return JSON({"data": data, "next_before": more})


def _event(event: TriggerEvent) -> dict[str, Any]:
    return {"id": event.id, "kind": event.kind, "key": event.key, "status": event.status,
            "reason": event.reason, "run_id": event.run_id, "at": event.at}  # fmt: skip


@hooks.post(
    "/hooks/{trigger_id}",
    status_code=202,
    name="deliver_webhook",
    summary="A webhook delivery: signed, it starts the agent's run",
    description=(
        f"Headers: `{TIMESTAMP_HEADER}` (Unix seconds), `{SIGNATURE_HEADER}` (`sha256=` + the "
        f"hex HMAC-SHA256 of `{{timestamp}}.{{body}}` under the webhook's secret) and, to make "
        f"retries idempotent, `{DELIVERY_HEADER}`. 202 with the run; 200 with the run a "
        "repeated delivery id started."
    ),
    responses={
        401: {"description": "The signature or timestamp is not good"},
        413: {"description": "The body is over 1 MiB"},
    },
)
async def deliver(trigger_id: str, request: Request) -> Response:
    check_parameters(request)
    svc: Services = request.app.state.services
    body = await _bounded_body(request)
    source = request.client.host if request.client else None
    delivered = await svc.triggers.deliver(trigger_id, dict(request.headers), body, source)
    return JSON(
        {"run_id": delivered.run_id, "url": f"/api/v1/runs/{delivered.run_id}"},
        status_code=202 if delivered.created else 200,
    )


async def _bounded_body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(f"A delivery's body is at most {MAX_BODY_BYTES // 1024} KiB.")
        chunks.append(chunk)
    return b"".join(chunks)
