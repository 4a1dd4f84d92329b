"""/api/v1/agents: thin routes over AgentService."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from dhub.api.deps import Ctx, json_body
from dhub.api.query import LIST_PARAMETERS, parse_list_query
from dhub.api.render import agent_json, items_json
from dhub.api.responses import ERROR_RESPONSES, JSON, ErrorBody, ErrorItem
from dhub.domain.agent import AgentResponse, OwnerType
from dhub.domain.bounds import VersionNumber

_FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "Visible, but the caller lacks the scope needed"}
}
router = APIRouter(prefix="/agents", tags=["agents"], responses={**ERROR_RESPONSES, **_FORBIDDEN})

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


class Grant(BaseModel):
    principal_id: str
    type: OwnerType
    display_name: str
    scope: Literal["viewer", "runner", "editor"]


class GrantList(BaseModel):
    data: list[Grant]


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    content = {"application/json": {"schema": {"type": "object", **schema}}}
    return {"requestBody": {"required": True, "content": content}}


_GRANT_BODY = _body(
    {
        "properties": {
            "principal_id": {"type": "string", "description": "user.x, group.x or public.all"},
            "scope": {"type": "string", "enum": ["viewer", "runner", "editor"]},
        },
        "required": ["principal_id", "scope"],
    }
)
_MARKING_BODY = _body(
    {"properties": {"marking_id": {"type": "string"}}, "required": ["marking_id"]}
)


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
    return JSON(await ctx.svc.agents.validate(ctx.who, await json_body(request)))


@router.get("", response_model=AgentList, openapi_extra={"parameters": LIST_PARAMETERS})
async def list_agents(request: Request, ctx: Ctx) -> Response:
    """Agents the caller can see, in creation order, one page at a time."""
    query = parse_list_query(request.query_params)
    items, next_cursor = await ctx.svc.agents.page_rendered(
        ctx.who, query.filter, query.limit, query.cursor, agent_json
    )
    return _raw(items_json(items, next_cursor))


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


_COPY_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "name": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "description": "The copy's name (409 if taken); default: the "
                            "agent's, or the first free of <name>-copy, <name>-copy-2, ...",
                        },
                        "folder_id": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "description": "Where the copy goes; default: where a new agent "
                            "without folder_id goes",
                        },
                        **{
                            field: {
                                "anyOf": [
                                    {"type": "array", "items": {"type": "string"}},
                                    {"type": "null"},
                                ],
                                "description": f"The copy's {field} (ids), instead of the "
                                "agent's; default: the agent's",
                            }
                            for field in ("tables", "templates", "ontologies")
                        },
                    },
                    "additionalProperties": False,
                }
            }
        },
    }
}


@router.post(
    "/{agent_id}/copy",
    status_code=201,
    response_model=AgentResponse,
    openapi_extra=_COPY_BODY,
    responses={409: {"description": "The name asked for is taken in that folder"}},
)
async def copy_agent(agent_id: str, request: Request, ctx: Ctx) -> Response:
    """An editable copy of an agent you can read (a built-in or any other): yours, not
    built-in, at version 1; its references are checked for you as on any create."""
    body = await json_body(request, optional=True)
    view = await ctx.svc.agents.copy(ctx.who, agent_id, body)
    location = f"/api/v1/agents/{view.record.id}"
    return _raw(agent_json(view), status_code=201, headers={"Location": location})


@router.get("/{agent_id}/versions", response_model=AgentVersionList)
async def list_versions(agent_id: str, ctx: Ctx) -> Response:
    return JSON({"data": await ctx.svc.agents.versions(ctx.who, agent_id)})


@router.get("/{agent_id}/versions/{version}", response_model=AgentResponse)
async def get_version(agent_id: str, version: VersionNumber, ctx: Ctx) -> Response:
    return _raw(agent_json(await ctx.svc.agents.version(ctx.who, agent_id, version)))


@router.get("/{agent_id}/grants", response_model=GrantList)
async def list_grants(agent_id: str, ctx: Ctx) -> Response:
    """Who the agent is shared with, beyond its owners; readable by anyone who can read it."""
    return JSON({"data": await ctx.svc.agents.grants(ctx.who, agent_id)})


@router.post(
    "/{agent_id}/grants",
    status_code=201,
    response_model=Grant,
    openapi_extra=_GRANT_BODY,
    responses={
        200: {"model": Grant, "description": "The principal's scope was changed"},
        409: {"description": "A concurrent grant to the same principal; retry"},
    },
)
async def add_grant(agent_id: str, request: Request, ctx: Ctx) -> Response:
    """Grant a scope to a principal (owners and admins); replaces the scope it had."""
    grant, created = await ctx.svc.agents.grant(ctx.who, agent_id, await json_body(request))
    return JSON(grant, status_code=201 if created else 200)


@router.delete("/{agent_id}/grants/{principal_id}", status_code=204, response_class=Response)
async def remove_grant(agent_id: str, principal_id: str, ctx: Ctx) -> Response:
    await ctx.svc.agents.ungrant(ctx.who, agent_id, principal_id)
    return Response(status_code=204)


@router.post("/{agent_id}/markings", response_model=AgentResponse, openapi_extra=_MARKING_BODY)
async def add_marking(agent_id: str, request: Request, ctx: Ctx) -> Response:
    """Mark the agent: only an owner who holds the marking may. Returns the agent."""
    view = await ctx.svc.agents.mark(ctx.who, agent_id, await json_body(request))
    return _raw(agent_json(view))


@router.delete("/{agent_id}/markings/{marking_id}", response_model=AgentResponse)
async def remove_marking(agent_id: str, marking_id: str, ctx: Ctx) -> Response:
    """Remove a marking: only an owner who holds it may. Returns the agent."""
    return _raw(agent_json(await ctx.svc.agents.unmark(ctx.who, agent_id, marking_id)))
