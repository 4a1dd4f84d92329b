"""What is in a folder or a collection, and the caller's home folder. Folders and collections
themselves have the endpoints every resource has (routers/resources.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel

from dhub.api.deps import Ctx
from dhub.api.query import IDS_PARAMETERS, PAGE_PARAMETERS, parse_ids, parse_page
from dhub.api.render import resource_json
from dhub.api.responses import ERROR_RESPONSES, JSON
from dhub.domain.agent import Owner, ShareScope

router = APIRouter(tags=["folders"], responses=ERROR_RESPONSES)


class Child(BaseModel):
    """One resource in a folder or collection: its envelope, without its kind's own fields
    (GET it at /api/v1/<category>s/<id> for those)."""

    id: str
    name: str
    alias: str | None
    category: str
    type: str | None
    collection_id: str | None
    folder_id: str | None
    tags: list[str] | None
    description: str
    markings: list[str]
    effective_markings: list[str]
    owners: list[Owner]
    my_share_scope: ShareScope | None
    is_builtin: bool
    created_at: int
    updated_at: int
    version: int


class ChildList(BaseModel):
    data: list[Child]
    next_cursor: str | None


_PAGE: dict[str, Any] = {"parameters": PAGE_PARAMETERS}


@router.get(
    "/folders/home",
    name="get_home_folder",
    summary="The caller's home folder (where what it creates without folder_id goes)",
)
async def home(ctx: Ctx) -> Response:
    view = await ctx.svc.folders.home(ctx.who)
    return Response(resource_json(view), media_type="application/json")


class FolderPath(BaseModel):
    id: str
    path: str


class FolderPathList(BaseModel):
    data: list[FolderPath]


@router.get(
    "/folders/paths",
    response_model=FolderPathList,
    openapi_extra={"parameters": IDS_PARAMETERS},
    name="get_folder_paths",
    summary="Where folders and collections are, by name from the top, for those the caller "
    "can read",
)
async def paths(request: Request, ctx: Ctx) -> Response:
    found = await ctx.svc.folders.paths(ctx.who, parse_ids(request.query_params))
    return JSON({"data": [{"id": i, "path": p} for i, p in found.items()]})


def _children_route(category: str, summary: str) -> None:
    """``GET /{category}s/{{category}_id}/children``: what is directly in the container."""

    async def children(
        request: Request, ctx: Ctx, container_id: str = Path(alias=f"{category}_id")
    ) -> Response:
        limit, cursor = parse_page(request.query_params)
        page = await ctx.svc.folders.children(ctx.who, category, container_id, limit, cursor)
        return JSON({"data": page.data, "next_cursor": page.next_cursor})

    router.add_api_route(
        f"/{category}s/{{{category}_id}}/children",
        children,
        methods=["GET"],
        response_model=ChildList,
        openapi_extra=_PAGE,
        name=f"list_{category}_children",
        summary=summary,
    )


_children_route("folder", "What is in a folder, of every kind, that the caller can see")
_children_route(
    "collection", "What is at a collection's top level, of every kind, that the caller can see"
)
