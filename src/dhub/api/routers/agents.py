"""/api/v1/agents: thin routes over AgentService."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from dhub.api.deps import Ctx, json_body
from dhub.api.query import LIST_PARAMETERS, parse_list_query
from dhub.api.render import agent_json, page_json
from dhub.api.responses import ERROR_RESPONSES, JSON, ErrorItem
from dhub.domain.agent import AgentResponse

router = APIRouter(prefix="/agents", tags=["agents"], responses=ERROR_RESPONSES)

_SPEC_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AgentSpec"}}},
    }
}
_PATCH_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "An RFC 7396 JSON merge patch of the agent document.",
        "content": {
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/json": {"schema": {"type": "object"}},
        },
    }
}


def _raw(body: bytes, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code, headers=headers, media_type="application/json")


class AgentList(BaseModel):
    data: list[AgentResponse]
    next_cursor: str | None


class ValidationResult(BaseModel):
    valid: bool
    errors: list[ErrorItem]


class AgentVersion(BaseModel):
    version: int
    created_at: int
    created_by: str


class AgentVersionList(BaseModel):
    data: list[AgentVersion]


@router.post(
    "",
    status_code=201,
    response_model=AgentResponse,
    openapi_extra=_SPEC_BODY,
    responses={409: {"description": "The name is taken in that folder"}},
)
async def create_agent(request: Request, ctx: Ctx) -> Response:
    view = await ctx.svc.agents.create(ctx.who, await json_body(request))
    location = f"/api/v1/agents/{view.record.id}"
    return _raw(agent_json(view), status_code=201, headers={"Location": location})


@router.post("/validate", response_model=ValidationResult, openapi_extra=_SPEC_BODY)
async def validate_agent(request: Request, ctx: Ctx) -> Response:
    return JSON(ctx.svc.agents.validate(await json_body(request)))


@router.get("", response_model=AgentList, openapi_extra={"parameters": LIST_PARAMETERS})
async def list_agents(request: Request, ctx: Ctx) -> Response:
    """Agents the caller can see, in creation order, one page at a time."""
    query = parse_list_query(request.query_params)
    page = await ctx.svc.agents.page(ctx.who, query.filter, query.limit, query.cursor)
    return _raw(page_json(page))


@router.get("/{agent_id}", response_model=AgentResponse)
async def get_agent(agent_id: str, ctx: Ctx) -> Response:
    return _raw(agent_json(await ctx.svc.agents.get(ctx.who, agent_id)))


@router.patch(
    "/{agent_id}",
    response_model=AgentResponse,
    openapi_extra=_PATCH_BODY,
    responses={409: {"description": "The new name is taken in that folder"}},
)
async def patch_agent(agent_id: str, request: Request, ctx: Ctx) -> Response:
    return _raw(agent_json(await ctx.svc.agents.patch(ctx.who, agent_id, await json_body(request))))


@router.delete("/{agent_id}", status_code=204, response_class=Response)
async def delete_agent(agent_id: str, ctx: Ctx) -> Response:
    await ctx.svc.agents.delete(ctx.who, agent_id)
    return Response(status_code=204)


@router.get("/{agent_id}/versions", response_model=AgentVersionList)
async def list_versions(agent_id: str, ctx: Ctx) -> Response:
    return JSON({"data": await ctx.svc.agents.versions(ctx.who, agent_id)})


@router.get("/{agent_id}/versions/{version}", response_model=AgentResponse)
async def get_version(agent_id: str, version: int, ctx: Ctx) -> Response:
    return _raw(agent_json(await ctx.svc.agents.version(ctx.who, agent_id, version)))
