"""/api/v1/prompts, /tools, /actors and /roles: one thin router per kind, all alike, over
ResourceService (the endpoints mirror /api/v1/agents)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, create_model

from dhub.api.deps import Ctx, json_body
from dhub.api.query import RESOURCE_LIST_PARAMETERS, parse_resource_query
from dhub.api.render import resource_json, resource_page_json
from dhub.api.responses import ERROR_RESPONSES, JSON, ErrorBody
from dhub.api.routers.agents import AgentVersionList, Grant, GrantList, ValidationResult
from dhub.domain.bounds import VersionNumber
from dhub.domain.resources import CATEGORIES, KINDS, ResourceKind, plural

_FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody, "description": "Visible, but the caller lacks the scope needed"}
}


def _raw(body: bytes, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code, headers=headers, media_type="application/json")


def _body(schema: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if description:
        body["description"] = description
    return {"requestBody": body}


_PATCH_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "An RFC 7396 JSON merge patch of the document.",
        "content": {
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/json": {"schema": {"type": "object"}},
        },
    }
}
_GRANT_BODY = _body(
    {
        "type": "object",
        "properties": {
            "principal_id": {"type": "string", "description": "user.x, group.x or public.all"},
            "scope": {"type": "string", "enum": ["viewer", "runner", "editor"]},
        },
        "required": ["principal_id", "scope"],
    }
)
_MARKING_BODY = _body(
    {"type": "object", "properties": {"marking_id": {"type": "string"}}, "required": ["marking_id"]}
)


def spec_schema_name(kind: ResourceKind) -> str:
    """The component name of a kind's request body (app.py publishes the schemas)."""
    return kind.spec.__name__


def build_router(kind: ResourceKind) -> APIRouter:
    """The endpoints of one kind, at ``/<category>s``."""
    category = kind.category
    label = kind.label
    plural_name = plural(category)
    router = APIRouter(
        prefix=f"/{plural_name}", tags=[plural_name], responses={**ERROR_RESPONSES, **_FORBIDDEN}
    )
    response: type[BaseModel] = kind.response
    listing: type[BaseModel] = create_model(
        f"{label}List",
        data=(list[response], ...),  # type: ignore[valid-type]
        next_cursor=(str | None, ...),
    )
    spec_body = _body({"$ref": f"#/components/schemas/{spec_schema_name(kind)}"})

    @router.post(
        "",
        status_code=201,
        response_model=response,
        openapi_extra=spec_body,
        responses={409: {"description": "The name is taken in that folder"}},
        name=f"create_{category}",
        summary=f"Create a {category}",
    )
    async def create(request: Request, ctx: Ctx) -> Response:
        view = await ctx.svc.resources.create(ctx.who, category, await json_body(request))
        location = f"/api/v1/{plural_name}/{view.record.id}"
        return _raw(resource_json(view), status_code=201, headers={"Location": location})

    @router.post(
        "/validate",
        response_model=ValidationResult,
        openapi_extra=spec_body,
        name=f"validate_{category}",
        summary=f"Validate a {category} document without storing it",
    )
    async def validate(request: Request, ctx: Ctx) -> Response:
        return JSON(await ctx.svc.resources.validate(ctx.who, category, await json_body(request)))

    @router.get(
        "",
        response_model=listing,
        openapi_extra={"parameters": RESOURCE_LIST_PARAMETERS},
        name=f"list_{plural_name}",
        summary=f"List {plural_name}",
    )
    async def list_(request: Request, ctx: Ctx) -> Response:
        """The ones the caller can see, in creation order, one page at a time."""
        query = parse_resource_query(request.query_params)
        page = await ctx.svc.resources.page(
            ctx.who, category, query.filter, query.limit, query.cursor
        )
        return _raw(resource_page_json(page))

    @router.get(
        "/{resource_id}",
        response_model=response,
        name=f"get_{category}",
        summary=f"Get a {category}",
    )
    async def get(resource_id: str, ctx: Ctx) -> Response:
        return _raw(resource_json(await ctx.svc.resources.get(ctx.who, category, resource_id)))

    @router.patch(
        "/{resource_id}",
        response_model=response,
        openapi_extra=_PATCH_BODY,
        responses={409: {"description": "The new name is taken in that folder"}},
        name=f"patch_{category}",
        summary=f"Update a {category} (merge patch)",
    )
    async def patch(resource_id: str, request: Request, ctx: Ctx) -> Response:
        body = await json_body(request)
        view = await ctx.svc.resources.patch(ctx.who, category, resource_id, body)
        return _raw(resource_json(view))

    @router.delete(
        "/{resource_id}",
        status_code=204,
        response_class=Response,
        name=f"delete_{category}",
        summary=f"Delete a {category}",
    )
    async def delete(resource_id: str, ctx: Ctx) -> Response:
        await ctx.svc.resources.delete(ctx.who, category, resource_id)
        return Response(status_code=204)

    @router.get(
        "/{resource_id}/versions",
        response_model=AgentVersionList,
        name=f"list_{category}_versions",
        summary=f"List a {category}'s versions, newest first",
    )
    async def versions(resource_id: str, ctx: Ctx) -> Response:
        return JSON({"data": await ctx.svc.resources.versions(ctx.who, category, resource_id)})

    @router.get(
        "/{resource_id}/versions/{version}",
        response_model=response,
        name=f"get_{category}_version",
        summary=f"Get one version of a {category}",
    )
    async def version(resource_id: str, version: VersionNumber, ctx: Ctx) -> Response:
        view = await ctx.svc.resources.version(ctx.who, category, resource_id, version)
        return _raw(resource_json(view))

    @router.get(
        "/{resource_id}/grants",
        response_model=GrantList,
        name=f"list_{category}_grants",
        summary=f"Who the {category} is shared with, beyond its owners",
    )
    async def grants(resource_id: str, ctx: Ctx) -> Response:
        return JSON({"data": await ctx.svc.resources.grants(ctx.who, category, resource_id)})

    @router.post(
        "/{resource_id}/grants",
        status_code=201,
        response_model=Grant,
        openapi_extra=_GRANT_BODY,
        responses={
            200: {"model": Grant, "description": "The principal's scope was changed"},
            409: {"description": "A concurrent grant to the same principal; retry"},
        },
        name=f"add_{category}_grant",
        summary=f"Grant a scope on the {category} to a principal",
    )
    async def add_grant(resource_id: str, request: Request, ctx: Ctx) -> Response:
        body = await json_body(request)
        grant, created = await ctx.svc.resources.grant(ctx.who, category, resource_id, body)
        return JSON(grant, status_code=201 if created else 200)

    @router.delete(
        "/{resource_id}/grants/{principal_id}",
        status_code=204,
        response_class=Response,
        name=f"remove_{category}_grant",
        summary=f"Remove a grant on the {category}",
    )
    async def remove_grant(resource_id: str, principal_id: str, ctx: Ctx) -> Response:
        await ctx.svc.resources.ungrant(ctx.who, category, resource_id, principal_id)
        return Response(status_code=204)

    @router.post(
        "/{resource_id}/markings",
        response_model=response,
        openapi_extra=_MARKING_BODY,
        name=f"add_{category}_marking",
        summary=f"Mark the {category} (an owner who holds the marking)",
    )
    async def add_marking(resource_id: str, request: Request, ctx: Ctx) -> Response:
        body = await json_body(request)
        return _raw(
            resource_json(await ctx.svc.resources.mark(ctx.who, category, resource_id, body))
        )

    @router.delete(
        "/{resource_id}/markings/{marking_id}",
        response_model=response,
        name=f"remove_{category}_marking",
        summary=f"Remove a marking from the {category} (an owner who holds it)",
    )
    async def remove_marking(resource_id: str, marking_id: str, ctx: Ctx) -> Response:
        view = await ctx.svc.resources.unmark(ctx.who, category, resource_id, marking_id)
        return _raw(resource_json(view))

    return router


routers = [build_router(KINDS[category]) for category in CATEGORIES]
